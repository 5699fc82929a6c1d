/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot endpoints: Firecracker's PUT /snapshot/create and
 * /snapshot/load, and cubicle's PUT /snapshot/rollback. A cubicle snapshot
 * is one folder (snap/snapshot.h); Firecracker's two paths name the folder
 * (or its `state` file) and, optionally, the folder's `memory` file. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api.h"
#include "cnode.h"
#include "snap/snapshot.h"

static const char *str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/*
 * The folder a request names. @snap is the folder, or its `state` file (a
 * path ending in /state whose sibling `memory` is @mem, or an existing
 * regular file); @mem, when given, must be the folder's `memory`. 0, or
 * 400 with err.
 */
static int folder(const char *what, const char *snap, const char *mem, char *dir, size_t len,
		  char *err, size_t errlen)
{
	char want[PATH_MAX + 8];
	struct stat sb;
	size_t n = strlen(snap);
	char *slash;

	if (!n || n >= len)
		return errf(err, errlen, 400, "%s: 'snapshot_path' is empty or too long", what);
	memcpy(dir, snap, n + 1);
	while (n > 1 && dir[n - 1] == '/')
		dir[--n] = '\0';
	slash = strrchr(dir, '/');
	if (!strcmp(slash ? slash + 1 : dir, "state")) {
		snprintf(want, sizeof(want), "%.*smemory", slash ? (int)(slash - dir + 1) : 0, dir);
		if ((mem && !strcmp(mem, want)) || (stat(dir, &sb) == 0 && S_ISREG(sb.st_mode))) {
			if (slash)
				*(slash == dir ? slash + 1 : slash) = '\0';
			else
				snprintf(dir, len, ".");
		}
	}
	if (!mem)
		return 0;
	snprintf(want, sizeof(want), "%s/memory", dir);
	if (strcmp(mem, want))
		return errf(err, errlen, 400,
			    "%s: '%s' is %s; cubicle keeps a snapshot's memory in its folder: leave it out or give %s",
			    what, strstr(what, "load") ? "mem_backend.backend_path" : "mem_file_path", mem,
			    want);
	return 0;
}

static json_t *stats_json(const char *dir, const struct snap_stats *st)
{
	return json_pack("{s:s, s:I, s:I, s:I, s:f}", "snapshot_path", dir, "memory_bytes",
			 (json_int_t)st->mem_bytes, "memory_written_bytes", (json_int_t)st->mem_written,
			 "state_bytes", (json_int_t)st->state_bytes, "ms", st->us_total / 1e3);
}

static int put_create(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		      size_t errlen)
{
	static const struct api_field f[] = {
		{ "snapshot_path", JSON_STRING, true }, { "mem_file_path", JSON_STRING, false },
		{ "snapshot_type", JSON_STRING, false }, { "version", JSON_STRING, false },
		{ "release_memory", JSON_TRUE, false },
	};
	struct api_vm *vm = api_vm(a);
	const char *type;
	char dir[PATH_MAX];
	struct snap_stats st;
	int ret = api_check(in, f, sizeof(f) / sizeof(f[0]), "snapshot/create", err, errlen);

	(void)id;
	(void)out;
	if (ret)
		return ret;
	type = str(in, "snapshot_type");
	if (type && strcmp(type, "Full") && strcmp(type, "Diff"))
		return errf(err, errlen, 400,
			    "snapshot/create: 'snapshot_type' is \"%s\"; expected \"Full\" or \"Diff\"",
			    type);
	ret = folder("snapshot/create", str(in, "snapshot_path"), str(in, "mem_file_path"), dir,
		     sizeof(dir), err, errlen);
	if (ret)
		return ret;
	if (!vm->running || !vm->snapshot)
		return errf(err, errlen, 400, "snapshot/create: no VM is running");
	if (!vm->paused)
		return errf(err, errlen, 400,
			    "snapshot/create: the VM is running: pause it first (PATCH /vm {\"state\": \"Paused\"})");
	if (vm->snapshot(vm->ctx, dir, type && !strcmp(type, "Diff"),
			 json_is_true(json_object_get(in, "release_memory")), &st, err, errlen))
		return 400;
	return 204; /* Firecracker's reply; the log line has the figures */
}

#define MAX_OVERRIDES 64

/* Overrides of the snapshot's description, as --set text:
 * network_overrides [{iface_id, host_dev_name}]: the interface's tap
 * (Firecracker's network interfaces are tap devices; cubicle's tap backend
 * calls it ifname); drive_overrides [{drive_id, path_on_host}] (cubicle's):
 * the file a restored writable disk's copy of the snapshot's goes to. */
struct override_kind {
	const char *list, *id, *value, *set; /* set: "devices.%s.backend.ifname=%s" */
};

static const struct override_kind net_ov = { "network_overrides", "iface_id", "host_dev_name",
					     "devices.%s.backend.ifname=%s" };
static const struct override_kind drive_ov = { "drive_overrides", "drive_id", "path_on_host",
					       "devices.%s.backend.path=%s" };

/* Append @k's overrides from @in to sets (*n of them so far). */
static int overrides(const json_t *in, const struct override_kind *k, char **sets, unsigned *n,
		     char *err, size_t errlen)
{
	const struct api_field f[] = {
		{ k->id, JSON_STRING, true },
		{ k->value, JSON_STRING, true },
	};
	const json_t *list = json_object_get(in, k->list), *o;
	char what[64];
	size_t i;
	int ret;

	if (json_array_size(list) > MAX_OVERRIDES)
		return errf(err, errlen, 400, "snapshot/load: more than %d %s", MAX_OVERRIDES,
			    k->list);
	snprintf(what, sizeof(what), "snapshot/load: %s", k->list);
	json_array_foreach(list, i, o) {
		ret = api_check(o, f, 2, what, err, errlen);
		if (ret)
			return ret;
		if (strchr(str(o, k->id), '.') || strchr(str(o, k->id), '='))
			return errf(err, errlen, 400, "%s[%zu]: '%s' \"%s\" is not a device id",
				    what, i, k->id, str(o, k->id));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		if (asprintf(&sets[*n], k->set, str(o, k->id), str(o, k->value)) < 0) {
#pragma GCC diagnostic pop
			sets[*n] = NULL;
			return errf(err, errlen, 500, "out of memory");
		}
		++*n;
	}
	return 0;
}

static int put_load(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		    size_t errlen)
{
	static const struct api_field f[] = {
		{ "snapshot_path", JSON_STRING, true },	    { "mem_file_path", JSON_STRING, false },
		{ "mem_backend", JSON_OBJECT, false },	    { "enable_diff_snapshots", JSON_TRUE, false },
		{ "track_dirty_pages", JSON_TRUE, false },  { "resume_vm", JSON_TRUE, false },
		{ "network_overrides", JSON_ARRAY, false }, { "vsock_override", JSON_OBJECT, false },
		{ "drive_overrides", JSON_ARRAY, false },
	};
	static const struct api_field fb[] = {
		{ "backend_type", JSON_STRING, true },
		{ "backend_path", JSON_STRING, true },
	};
	static const struct api_field fv[] = { { "uds_path", JSON_STRING, true } };
	const json_t *vs;
	struct api_vm *vm = api_vm(a);
	const json_t *mb = json_object_get(in, "mem_backend");
	const char *mem = str(in, "mem_file_path"), *bt;
	char dir[PATH_MAX], *sets[2 * MAX_OVERRIDES + 2] = { 0 };
	unsigned n_sets = 0;
	bool uffd = false;
	int ret = api_check(in, f, sizeof(f) / sizeof(f[0]), "snapshot/load", err, errlen);

	(void)id;
	(void)out;
	if (ret)
		return ret;
	if (mb && mem)
		return errf(err, errlen, 400,
			    "snapshot/load: give 'mem_backend' or 'mem_file_path', not both");
	if (mb) {
		ret = api_check(mb, fb, 2, "snapshot/load: mem_backend", err, errlen);
		if (ret)
			return ret;
		bt = str(mb, "backend_type");
		/* Uffd: cubicle's own handler thread fills RAM from the
		 * snapshot's memory file (Firecracker hands the fd to another
		 * process at backend_path; here it names the memory file, as
		 * for File). */
		uffd = !strcmp(bt, "Uffd");
		if (!uffd && strcmp(bt, "File"))
			return errf(err, errlen, 400,
				    "snapshot/load: mem_backend: 'backend_type' is \"%s\"; expected \"File\" or \"Uffd\"",
				    bt);
		mem = str(mb, "backend_path");
	}
	vs = json_object_get(in, "vsock_override");
	if (vs) {
		ret = api_check(vs, fv, 1, "snapshot/load: vsock_override", err, errlen);
		if (ret)
			return ret;
		if (!*str(vs, "uds_path") || strlen(str(vs, "uds_path")) > 96)
			return errf(err, errlen, 400,
				    "snapshot/load: vsock_override: 'uds_path' is %zu bytes; expected 1 to 96",
				    strlen(str(vs, "uds_path")));
	}
	ret = folder("snapshot/load", str(in, "snapshot_path"), mem, dir, sizeof(dir), err,
		     errlen);
	if (ret)
		return ret;
	if (vm->running)
		return errf(err, errlen, 400,
			    "snapshot/load: the VM already exists; a snapshot loads only into a new cubicle (cubicle --api-sock PATH)");
	if (!vm->load)
		return errf(err, errlen, 400, "snapshot/load: loading is not available here");
	ret = overrides(in, &net_ov, sets, &n_sets, err, errlen);
	if (!ret)
		ret = overrides(in, &drive_ov, sets, &n_sets, err, errlen);
	/* The vsock device Firecracker's API makes is "vsock0" (firecracker.c);
	 * a config file's must have that id for the override to find it. */
	if (!ret && vs && asprintf(&sets[n_sets++], "devices.vsock0.uds_path=%s", str(vs, "uds_path")) < 0) {
		sets[--n_sets] = NULL;
		ret = errf(err, errlen, 500, "out of memory");
	}
	/* Dirty-page tracking from here on (Diff snapshots of the loaded VM). */
	if (!ret && (json_is_true(json_object_get(in, "track_dirty_pages")) ||
		     json_is_true(json_object_get(in, "enable_diff_snapshots"))) &&
	    !(sets[n_sets++] = strdup("machine.track_dirty_pages=true")))
		ret = errf(err, errlen, 500, "out of memory");
	if (!ret && vm->load(vm->ctx, dir, json_is_true(json_object_get(in, "resume_vm")), uffd,
			     sets, n_sets, err, errlen))
		ret = 400;
	for (unsigned i = 0; i < n_sets; i++)
		free(sets[i]);
	return ret ? ret : 204;
}

static int put_rollback(struct api *a, const char *id, json_t *in, json_t **out, char *err,
			size_t errlen)
{
	static const struct api_field f[] = { { "snapshot_path", JSON_STRING, true } };
	struct api_vm *vm = api_vm(a);
	struct snap_stats st;
	char dir[PATH_MAX];
	int ret = api_check(in, f, 1, "snapshot/rollback", err, errlen);

	(void)id;
	if (ret)
		return ret;
	ret = folder("snapshot/rollback", str(in, "snapshot_path"), NULL, dir, sizeof(dir), err,
		     errlen);
	if (ret)
		return ret;
	if (!vm->running || !vm->rollback)
		return errf(err, errlen, 400, "snapshot/rollback: no VM is running");
	if (vm->rollback(vm->ctx, dir, &st, err, errlen))
		return 400;
	*out = stats_json(dir, &st);
	return *out ? 200 : errf(err, errlen, 500, "out of memory");
}

const struct api_route snap_routes[] = {
	{ "PUT", "/snapshot/create", false, true, put_create, false },
	{ "PUT", "/snapshot/load", false, true, put_load, false },
	{ "PUT", "/snapshot/rollback", false, true, put_rollback, false },
};
const unsigned snap_n_routes = sizeof(snap_routes) / sizeof(snap_routes[0]);
