/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Firecracker's endpoints (paths, verbs, field names and status codes of its
 * published API description). Before InstanceStart they collect the VM as
 * Firecracker's JSON objects; InstanceStart turns those into the same value
 * tree a config file gives (cnode.h), which the plan stage checks before any
 * plugin runs. The mapping onto cubicle's default plugins:
 *   machine-config      machine = { vcpus; memory_mib; track_dirty_pages; }
 *   boot-source         boot = { kernel; initrd; cmdline; } (default cmdline
 *                       FC_DEFAULT_ARGS; a root drive adds root=/dev/vda ro|rw
 *                       unless the arguments name a root= already)
 *   drives/{id}         virtio-blk (id, read_only, root) on a raw backend; the
 *                       root drive first, so it is /dev/vda
 *   network-interfaces  virtio-net (id, mac, mtu) on a tap backend attached to
 *                       host_dev_name, policy allowing 0.0.0.0/0 (Firecracker
 *                       fences nothing; cubicle's methods narrow it at run time)
 *   entropy             virtio-rng
 *   vsock               virtio-vsock "vsock0" (guest_cid, uds_path; vsock_id is
 *                       accepted and ignored, as Firecracker deprecates it)
 *   (always)            serial8250 "ttyS0" on stdio, as Firecracker's console
 * What cubicle has not built yet (rate limiters, balloon,
 * MMDS, logger and metrics objects, pause) is refused with 400 and a message
 * saying so, never accepted and ignored.
 */
#include <string.h>

#include "api.h"
#include "cnode.h"
#include "cubicle-build.h"
#include "devices.h"
#include "loader.h"
#include "plan.h"
#include "ratelimit.h"

/* The Firecracker API version whose description these endpoints follow. */
#define FC_API_VERSION "1.17.0"
#define FC_DEFAULT_ARGS "console=ttyS0 reboot=k panic=1"
#define FC_AFTER_START "The requested operation is not supported after starting the microVM."

struct fc_state {
	json_t *machine; /* MachineConfiguration, defaults filled */
	json_t *boot;    /* BootSource, or NULL */
	json_t *drives;  /* [Drive], in the order first PUT */
	json_t *nets;    /* [NetworkInterface] */
	json_t *entropy; /* EntropyDevice, or NULL */
	json_t *vsock;   /* Vsock, or NULL */
};

struct fc_state *fc_new(void)
{
	struct fc_state *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->machine = json_pack("{s:i,s:i,s:b,s:b,s:s}", "vcpu_count", 1, "mem_size_mib", 128,
			       "smt", 0, "track_dirty_pages", 0, "huge_pages", "None");
	s->drives = json_array();
	s->nets = json_array();
	if (!s->machine || !s->drives || !s->nets) {
		fc_free(s);
		return NULL;
	}
	return s;
}

void fc_free(struct fc_state *s)
{
	if (!s)
		return;
	json_decref(s->machine);
	json_decref(s->boot);
	json_decref(s->drives);
	json_decref(s->nets);
	json_decref(s->entropy);
	json_decref(s->vsock);
	free(s);
}

static bool started(struct api *a)
{
	return api_vm(a)->running;
}

/* The element of @arr whose @key is @id, and its index; NULL if none. */
static json_t *by_id(json_t *arr, const char *key, const char *id, size_t *at)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v) {
		const char *s = json_string_value(json_object_get(v, key));

		if (s && !strcmp(s, id)) {
			if (at)
				*at = i;
			return v;
		}
	}
	return NULL;
}

static bool truthy(const json_t *o, const char *key)
{
	return json_is_true(json_object_get(o, key));
}

static const char *str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* ---- GET / and /version ---- */

static int get_root(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		    size_t errlen)
{
	const struct api_vm *vm = api_vm(a);

	*out = json_pack("{s:s,s:s,s:s,s:s}", "id", vm->id ? vm->id : "anonymous-instance", "state",
			 vm->paused ? "Paused" : vm->running ? "Running" : "Not started", "vmm_version", PACKAGE_VERSION,
			 "app_name", "cubicle");
	return *out ? 200 : errf(err, errlen, 500, "out of memory");
}

static int get_version(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		       size_t errlen)
{
	*out = json_pack("{s:s}", "firecracker_version", FC_API_VERSION);
	return *out ? 200 : errf(err, errlen, 500, "out of memory");
}

/* ---- machine-config ---- */

static const struct api_field machine_fields[] = {
	{ "vcpu_count", JSON_INTEGER, true },	{ "mem_size_mib", JSON_INTEGER, true },
	{ "smt", JSON_TRUE, false },		{ "track_dirty_pages", JSON_TRUE, false },
	{ "huge_pages", JSON_STRING, false },	{ "cpu_template", JSON_STRING, false },
};

/* Check a complete machine-config (after a PATCH merged in). */
static int machine_ok(const json_t *m, char *err, size_t errlen)
{
	json_int_t v = json_integer_value(json_object_get(m, "vcpu_count"));
	json_int_t mib = json_integer_value(json_object_get(m, "mem_size_mib"));
	const char *hp = str(m, "huge_pages"), *tpl = str(m, "cpu_template");

	if (v < 1 || v > 32)
		return errf(err, errlen, 400,
				"machine-config: 'vcpu_count' is %lld; expected 1 to 32", (long long)v);
	if (mib < 1 || mib > (1 << 20))
		return errf(err, errlen, 400,
				"machine-config: 'mem_size_mib' is %lld; expected 1 to 1048576",
				(long long)mib);
	if (truthy(m, "smt"))
		return errf(err, errlen, 400, "machine-config: 'smt' true is not supported by cubicle");
	if (hp && strcmp(hp, "None"))
		return errf(err, errlen, 400,
				"machine-config: 'huge_pages' \"%s\" is not supported by cubicle yet; only \"None\"",
				hp);
	if (tpl && strcmp(tpl, "None"))
		return errf(err, errlen, 400,
				"machine-config: CPU templates are not supported by cubicle (\"%s\")", tpl);
	return 0;
}

static int get_machine(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		       size_t errlen)
{
	*out = json_deep_copy(api_fc(a)->machine);
	return *out ? 200 : errf(err, errlen, 500, "out of memory");
}

static int set_machine(struct api *a, json_t *in, bool patch, char *err, size_t errlen)
{
	struct fc_state *s = api_fc(a);
	struct api_field f[sizeof(machine_fields) / sizeof(machine_fields[0])];
	json_t *m;
	int ret;

	if (started(a))
		return errf(err, errlen, 400, FC_AFTER_START);
	memcpy(f, machine_fields, sizeof(f));
	for (unsigned i = 0; patch && i < sizeof(f) / sizeof(f[0]); i++)
		f[i].required = false;
	ret = api_check(in, f, sizeof(f) / sizeof(f[0]), "machine-config", err, errlen);
	if (ret)
		return ret;
	m = json_deep_copy(s->machine);
	if (!m || json_object_update(m, in)) {
		json_decref(m);
		return errf(err, errlen, 500, "out of memory");
	}
	ret = machine_ok(m, err, errlen);
	if (ret) {
		json_decref(m);
		return ret;
	}
	json_decref(s->machine);
	s->machine = m;
	return 204;
}

static int put_machine(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		       size_t errlen)
{
	return set_machine(a, in, false, err, errlen);
}

static int patch_machine(struct api *a, const char *id, json_t *in, json_t **out, char *err,
			 size_t errlen)
{
	return set_machine(a, in, true, err, errlen);
}

/* ---- boot-source ---- */

static int put_boot(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		    size_t errlen)
{
	static const struct api_field f[] = {
		{ "kernel_image_path", JSON_STRING, true },
		{ "boot_args", JSON_STRING, false },
		{ "initrd_path", JSON_STRING, false },
	};
	struct fc_state *s = api_fc(a);
	int ret;

	if (started(a))
		return errf(err, errlen, 400, FC_AFTER_START);
	ret = api_check(in, f, sizeof(f) / sizeof(f[0]), "boot-source", err, errlen);
	if (ret)
		return ret;
	json_decref(s->boot);
	s->boot = json_incref(in);
	return 204;
}

/* ---- drives ---- */

static const struct api_field drive_fields[] = {
	{ "drive_id", JSON_STRING, true },    { "is_root_device", JSON_TRUE, true },
	{ "path_on_host", JSON_STRING, false }, { "is_read_only", JSON_TRUE, false },
	{ "cache_type", JSON_STRING, false },  { "io_engine", JSON_STRING, false },
	{ "partuuid", JSON_STRING, false },    { "rate_limiter", JSON_OBJECT, false },
	{ "socket", JSON_STRING, false },
};

static int body_id(const json_t *in, const char *key, const char *id, const char *what, char *err,
		   size_t errlen)
{
	if (strcmp(str(in, key), id))
		return errf(err, errlen, 400,
				"%s: the id from the path (%s) does not match the id from the body (%s)",
				what, id, str(in, key));
	return 0;
}

static int put_drive(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		     size_t errlen)
{
	struct fc_state *s = api_fc(a);
	const char *ct = str(in, "cache_type"), *io = str(in, "io_engine");
	struct rl_cfg rc;
	size_t at, i;
	json_t *old, *d;
	int ret;

	if (started(a))
		return errf(err, errlen, 400, FC_AFTER_START);
	ret = api_check(in, drive_fields, sizeof(drive_fields) / sizeof(drive_fields[0]), "drive",
			err, errlen);
	ret = ret ?: body_id(in, "drive_id", id, "drive", err, errlen);
	if (ret)
		return ret;
	if (json_object_get(in, "socket"))
		return errf(err, errlen, 400, "drive %s: vhost-user drives ('socket') are not supported by cubicle", id);
	if (!str(in, "path_on_host"))
		return errf(err, errlen, 400, "drive %s: missing required field 'path_on_host'", id);
	if (json_object_get(in, "rate_limiter") &&
	    (ret = fc_rl_parse(json_object_get(in, "rate_limiter"), "drive", &rc, err, errlen)))
		return ret;
	if (json_object_get(in, "partuuid"))
		return errf(err, errlen, 400, "drive %s: 'partuuid' is not supported by cubicle yet; the root drive is /dev/vda", id);
	if (ct && strcmp(ct, "Unsafe") && strcmp(ct, "Writeback"))
		return errf(err, errlen, 400, "drive %s: 'cache_type' is \"%s\"; expected \"Unsafe\" or \"Writeback\"", id, ct);
	if (io && strcmp(io, "Sync"))
		return errf(err, errlen, 400, "drive %s: 'io_engine' \"%s\" is not supported by cubicle; only \"Sync\"", id, io);
	json_array_foreach(s->drives, i, d)
		if (truthy(d, "is_root_device") && truthy(in, "is_root_device") &&
		    strcmp(str(d, "drive_id"), id))
			return errf(err, errlen, 400, "A root block device already exists!");
	old = by_id(s->drives, "drive_id", id, &at);
	if (old ? json_array_set(s->drives, at, in) : json_array_append(s->drives, in))
		return errf(err, errlen, 500, "out of memory");
	return 204;
}

static int patch_drive(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		       size_t errlen)
{
	static const struct api_field f[] = {
		{ "drive_id", JSON_STRING, true },
		{ "path_on_host", JSON_STRING, false },
		{ "rate_limiter", JSON_OBJECT, false },
	};
	json_t *d;
	int ret;

	ret = api_check(in, f, sizeof(f) / sizeof(f[0]), "drive", err, errlen);
	ret = ret ?: body_id(in, "drive_id", id, "drive", err, errlen);
	if (ret)
		return ret;
	d = by_id(api_fc(a)->drives, "drive_id", id, NULL);
	if (started(a)) {
		if (str(in, "path_on_host"))
			return errf(err, errlen, 400, "drive %s: changing the disk of a running VM is not supported by cubicle yet", id);
		ret = fc_rl_patch(a, id, "rate_limiter", json_object_get(in, "rate_limiter"), "drive",
				  err, errlen);
		if (ret)
			return ret;
		/* GET /vm/config shows the limit in force */
		if (d && json_object_set(d, "rate_limiter", json_object_get(in, "rate_limiter")))
			return errf(err, errlen, 500, "out of memory");
		return 204;
	}
	if (!d)
		return errf(err, errlen, 400, "drive %s: no such drive (PUT /drives/%s first)", id, id);
	if (json_object_get(in, "rate_limiter")) {
		struct rl_cfg rc;

		ret = fc_rl_parse(json_object_get(in, "rate_limiter"), "drive", &rc, err, errlen);
		if (ret)
			return ret;
		if (json_object_set(d, "rate_limiter", json_object_get(in, "rate_limiter")))
			return errf(err, errlen, 500, "out of memory");
	}
	if (str(in, "path_on_host") && json_object_set(d, "path_on_host", json_object_get(in, "path_on_host")))
		return errf(err, errlen, 500, "out of memory");
	return 204;
}

/* ---- network-interfaces ---- */

static int put_net(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		   size_t errlen)
{
	static const struct api_field f[] = {
		{ "iface_id", JSON_STRING, true },	 { "host_dev_name", JSON_STRING, true },
		{ "guest_mac", JSON_STRING, false },	 { "mtu", JSON_INTEGER, false },
		{ "rx_rate_limiter", JSON_OBJECT, false }, { "tx_rate_limiter", JSON_OBJECT, false },
	};
	struct fc_state *s = api_fc(a);
	json_t *mtu = json_object_get(in, "mtu");
	struct rl_cfg rc;
	size_t at;
	int ret;

	if (started(a))
		return errf(err, errlen, 400, FC_AFTER_START);
	ret = api_check(in, f, sizeof(f) / sizeof(f[0]), "network-interface", err, errlen);
	ret = ret ?: body_id(in, "iface_id", id, "network-interface", err, errlen);
	if (ret)
		return ret;
	ret = fc_rl_parse(json_object_get(in, "rx_rate_limiter"), "network-interface", &rc, err,
			  errlen);
	ret = ret ?: fc_rl_parse(json_object_get(in, "tx_rate_limiter"), "network-interface", &rc,
				 err, errlen);
	if (ret)
		return ret;
	if (mtu && (json_integer_value(mtu) < 68 || json_integer_value(mtu) > 65535))
		return errf(err, errlen, 400, "network-interface %s: 'mtu' is %lld; expected 68 to 65535",
				id, (long long)json_integer_value(mtu));
	if (by_id(s->nets, "iface_id", id, &at) ? json_array_set(s->nets, at, in)
						 : json_array_append(s->nets, in))
		return errf(err, errlen, 500, "out of memory");
	return 204;
}

static int patch_net(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		     size_t errlen)
{
	static const struct api_field f[] = {
		{ "iface_id", JSON_STRING, true },
		{ "rx_rate_limiter", JSON_OBJECT, false }, { "tx_rate_limiter", JSON_OBJECT, false },
	};
	static const char *const dirs[] = { "rx_rate_limiter", "tx_rate_limiter" };
	json_t *d = by_id(api_fc(a)->nets, "iface_id", id, NULL);
	struct rl_cfg rc;
	int ret;

	ret = api_check(in, f, sizeof(f) / sizeof(f[0]), "network-interface", err, errlen);
	ret = ret ?: body_id(in, "iface_id", id, "network-interface", err, errlen);
	for (unsigned i = 0; i < 2 && !ret; i++)
		ret = fc_rl_parse(json_object_get(in, dirs[i]), "network-interface", &rc, err, errlen);
	if (ret)
		return ret;
	if (!started(a) && !d)
		return errf(err, errlen, 400, "network-interface %s: no such interface (PUT /network-interfaces/%s first)", id, id);
	for (unsigned i = 0; i < 2; i++) {
		const json_t *o = json_object_get(in, dirs[i]);

		if (!o)
			continue;
		if (started(a) && (ret = fc_rl_patch(a, id, dirs[i], o, "network-interface", err,
						     errlen)))
			return ret;
		if (d && json_object_set(d, dirs[i], (json_t *)o))
			return errf(err, errlen, 500, "out of memory");
	}
	return 204;
}

/* ---- entropy ---- */

static int put_entropy(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		       size_t errlen)
{
	static const struct api_field f[] = { { "rate_limiter", JSON_OBJECT, false } };
	struct fc_state *s = api_fc(a);
	int ret;

	if (started(a))
		return errf(err, errlen, 400, FC_AFTER_START);
	ret = api_check(in, f, 1, "entropy", err, errlen);
	if (ret)
		return ret;
	if (json_object_get(in, "rate_limiter")) {
		struct rl_cfg rc;

		ret = fc_rl_parse(json_object_get(in, "rate_limiter"), "entropy", &rc, err, errlen);
		if (ret)
			return ret;
	}
	json_decref(s->entropy);
	s->entropy = json_incref(in);
	return 204;
}

/* ---- vsock ---- */

/* The longest uds_path: sun_path (108) less "_<port>" (11) and the NUL. */
#define VSOCK_PATH_MAX 96

static int put_vsock(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		     size_t errlen)
{
	static const struct api_field f[] = {
		{ "guest_cid", JSON_INTEGER, true },
		{ "uds_path", JSON_STRING, true },
		{ "vsock_id", JSON_STRING, false },
	};
	struct fc_state *s = api_fc(a);
	json_int_t cid;
	const char *path;
	int ret;

	if (started(a))
		return errf(err, errlen, 400, FC_AFTER_START);
	ret = api_check(in, f, sizeof(f) / sizeof(f[0]), "vsock", err, errlen);
	if (ret)
		return ret;
	cid = json_integer_value(json_object_get(in, "guest_cid"));
	path = str(in, "uds_path");
	if (cid < 3 || cid > 4294967294LL)
		return errf(err, errlen, 400, "vsock: 'guest_cid' is %lld; expected 3 to 4294967294",
			    (long long)cid);
	if (!*path)
		return errf(err, errlen, 400, "vsock: 'uds_path' is empty");
	if (strlen(path) > VSOCK_PATH_MAX)
		return errf(err, errlen, 400,
			    "vsock: 'uds_path' is %zu bytes; at most %d (a Unix socket name, with _<port> appended)",
			    strlen(path), VSOCK_PATH_MAX);
	json_decref(s->vsock);
	s->vsock = json_pack("{s:I,s:s}", "guest_cid", cid, "uds_path", path);
	if (s->vsock && str(in, "vsock_id"))
		json_object_set(s->vsock, "vsock_id", json_object_get(in, "vsock_id"));
	return s->vsock ? 204 : errf(err, errlen, 500, "out of memory");
}

/* ---- GET /vm/config ---- */

/* A VM described by a config file: its virtio-vsock as a Vsock object
 * (clients find uds_path here), read through the plugin's parameter table. */
static json_t *vsock_of(const struct api_vm *vm)
{
	for (unsigned i = 0; i < vm->n_insts; i++) {
		const struct cub_inst *d = vm->insts[i];
		const struct plugin *p = d->plugin;
		const char *path = NULL;
		uint64_t cid = 0;

		if (!p || !d->cfg || strcmp(p->d->name, "virtio-vsock"))
			continue;
		for (unsigned k = 0; k < p->d->n_params; k++) {
			const struct cub_param *pr = &p->params[k];
			const char *slot = (const char *)d->cfg + pr->offset;

			if (!strcmp(pr->name, "guest_cid") && pr->type == CUB_P_U64)
				memcpy(&cid, slot, sizeof(cid));
			else if (!strcmp(pr->name, "uds_path") &&
				 (pr->type == CUB_P_PATH || pr->type == CUB_P_STR))
				memcpy(&path, slot, sizeof(path));
		}
		if (path)
			return json_pack("{s:I,s:s}", "guest_cid", (json_int_t)cid, "uds_path", path);
	}
	return NULL;
}

static int get_vm_config(struct api *a, const char *id, json_t *in, json_t **out, char *err,
			 size_t errlen)
{
	struct fc_state *s = api_fc(a);
	json_t *vs;

	*out = json_pack("{s:O,s:O,s:O}", "machine-config", s->machine, "drives", s->drives,
			 "network-interfaces", s->nets);
	if (*out && s->boot)
		json_object_set(*out, "boot-source", s->boot);
	if (*out && s->entropy)
		json_object_set(*out, "entropy", s->entropy);
	if (*out && s->vsock)
		json_object_set(*out, "vsock", s->vsock);
	else if (*out && (vs = vsock_of(api_vm(a))))
		json_object_set_new(*out, "vsock", vs);
	return *out ? 200 : errf(err, errlen, 500, "out of memory");
}

/* ---- InstanceStart: Firecracker's objects as a VM description ---- */

struct tb {
	struct arena *ar;
	const char *where;
	bool oom;
};

static struct cnode *add(struct tb *t, struct cnode *parent, enum cnode_type ty, const char *name)
{
	struct cnode *n = cnode_new(t->ar, ty, name, t->where);

	if (!n || cnode_add(t->ar, parent, n)) {
		t->oom = true;
		return NULL;
	}
	return n;
}

static void add_str(struct tb *t, struct cnode *g, const char *name, const char *v)
{
	struct cnode *n = g ? add(t, g, CN_STR, name) : NULL;

	if (n && !(n->s = arena_strdup(t->ar, v)))
		t->oom = true;
}

static void add_int(struct tb *t, struct cnode *g, const char *name, int64_t v)
{
	struct cnode *n = g ? add(t, g, CN_INT, name) : NULL;

	if (n)
		n->i = v;
}

static void add_bool(struct tb *t, struct cnode *g, const char *name, bool v)
{
	struct cnode *n = g ? add(t, g, CN_BOOL, name) : NULL;

	if (n)
		n->b = v;
}

/* A RateLimiter object (checked when it was PUT) as a group @name. */
static void add_rl(struct tb *t, struct cnode *g, const char *name, const json_t *o)
{
	if (g && json_is_object(o) && fc_rl_group(t->ar, t->where, g, name, o))
		t->oom = true;
}

static void add_drive(struct tb *t, struct cnode *devs, const json_t *d)
{
	struct cnode *g, *b;
	bool ro = truthy(d, "is_read_only");

	t->where = arena_printf(t->ar, "PUT /drives/%s", str(d, "drive_id"));
	g = add(t, devs, CN_GROUP, NULL);
	add_str(t, g, "type", "virtio-blk");
	add_str(t, g, "id", str(d, "drive_id"));
	add_bool(t, g, "read_only", ro);
	add_bool(t, g, "root", truthy(d, "is_root_device"));
	add_rl(t, g, "rate_limiter", json_object_get(d, "rate_limiter"));
	b = g ? add(t, g, CN_GROUP, "backend") : NULL;
	add_str(t, b, "type", "raw");
	add_str(t, b, "path", str(d, "path_on_host"));
	add_bool(t, b, "read_only", ro);
}

static void add_net(struct tb *t, struct cnode *devs, const json_t *n)
{
	struct cnode *g, *b, *p, *allow;

	t->where = arena_printf(t->ar, "PUT /network-interfaces/%s", str(n, "iface_id"));
	g = add(t, devs, CN_GROUP, NULL);
	add_str(t, g, "type", "virtio-net");
	add_str(t, g, "id", str(n, "iface_id"));
	if (str(n, "guest_mac"))
		add_str(t, g, "mac", str(n, "guest_mac"));
	if (json_object_get(n, "mtu"))
		add_int(t, g, "mtu", json_integer_value(json_object_get(n, "mtu")));
	add_rl(t, g, "rx_rate_limiter", json_object_get(n, "rx_rate_limiter"));
	add_rl(t, g, "tx_rate_limiter", json_object_get(n, "tx_rate_limiter"));
	b = g ? add(t, g, CN_GROUP, "backend") : NULL;
	add_str(t, b, "type", "tap");
	add_str(t, b, "ifname", str(n, "host_dev_name"));
	p = b ? add(t, b, CN_GROUP, "policy") : NULL;
	add_str(t, p, "default", "deny");
	allow = p ? add(t, p, CN_LIST, "allow") : NULL;
	add_str(t, allow, NULL, "0.0.0.0/0");
}

static int instance_start(struct api *a, char *err, size_t errlen)
{
	struct fc_state *s = api_fc(a);
	struct api_vm *vm = api_vm(a);
	struct tb t = { .ar = vm->ar, .where = "PUT /machine-config" };
	const json_t *root_drive = NULL, *d;
	struct cnode *root, *m, *boot, *devs, *g;
	const char *args;
	size_t i;

	if (started(a))
		return errf(err, errlen, 400, FC_AFTER_START);
	if (!s->boot)
		return errf(err, errlen, 400, "Cannot start microvm without kernel configuration.");
	if (!vm->start)
		return errf(err, errlen, 400, "this cubicle was started with a VM already");
	root = cnode_new(t.ar, CN_GROUP, NULL, "the API");
	if (!root)
		return errf(err, errlen, 500, "out of memory");
	m = add(&t, root, CN_GROUP, "machine");
	add_int(&t, m, "vcpus", json_integer_value(json_object_get(s->machine, "vcpu_count")));
	add_int(&t, m, "memory_mib", json_integer_value(json_object_get(s->machine, "mem_size_mib")));
	if (truthy(s->machine, "track_dirty_pages"))
		add_bool(&t, m, "track_dirty_pages", true);

	t.where = "PUT /boot-source";
	json_array_foreach(s->drives, i, d)
		if (truthy(d, "is_root_device"))
			root_drive = d;
	args = str(s->boot, "boot_args") ? str(s->boot, "boot_args") : FC_DEFAULT_ARGS;
	boot = add(&t, root, CN_GROUP, "boot");
	add_str(&t, boot, "kernel", str(s->boot, "kernel_image_path"));
	if (str(s->boot, "initrd_path"))
		add_str(&t, boot, "initrd", str(s->boot, "initrd_path"));
	if (root_drive && !strstr(args, "root="))
		args = arena_printf(t.ar, "%s root=/dev/vda %s", args,
				    truthy(root_drive, "is_read_only") ? "ro" : "rw");
	add_str(&t, boot, "cmdline", args ? args : "");

	t.where = "PUT /actions";
	devs = add(&t, root, CN_LIST, "devices");
	g = devs ? add(&t, devs, CN_GROUP, NULL) : NULL;
	add_str(&t, g, "type", "serial8250");
	add_str(&t, g, "id", "ttyS0");
	add_str(&t, g, "console", "stdio");
	if (root_drive)
		add_drive(&t, devs, root_drive);
	json_array_foreach(s->drives, i, d)
		if (d != root_drive)
			add_drive(&t, devs, d);
	json_array_foreach(s->nets, i, d)
		add_net(&t, devs, d);
	if (s->entropy) {
		t.where = "PUT /entropy";
		g = devs ? add(&t, devs, CN_GROUP, NULL) : NULL;
		add_str(&t, g, "type", "virtio-rng");
		add_str(&t, g, "id", "rng0");
		add_rl(&t, g, "rate_limiter", json_object_get(s->entropy, "rate_limiter"));
	}
	if (s->vsock) {
		t.where = "PUT /vsock";
		g = devs ? add(&t, devs, CN_GROUP, NULL) : NULL;
		add_str(&t, g, "type", "virtio-vsock");
		add_str(&t, g, "id", "vsock0");
		add_int(&t, g, "guest_cid", json_integer_value(json_object_get(s->vsock, "guest_cid")));
		add_str(&t, g, "uds_path", str(s->vsock, "uds_path"));
	}
	if (t.oom)
		return errf(err, errlen, 500, "out of memory");
	if (vm->start(vm->ctx, root, err, errlen))
		return 400;
	return 204;
}

static int put_actions(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		       size_t errlen)
{
	static const struct api_field f[] = { { "action_type", JSON_STRING, true } };
	const char *act;
	int ret = api_check(in, f, 1, "action", err, errlen);

	if (ret)
		return ret;
	act = str(in, "action_type");
	if (!strcmp(act, "InstanceStart"))
		return instance_start(a, err, errlen);
	if (!strcmp(act, "FlushMetrics"))
		return fc_flush_metrics(a, err, errlen);
	if (!strcmp(act, "SendCtrlAltDel"))
		return errf(err, errlen, 400, "SendCtrlAltDel is not supported by cubicle yet (it has no i8042 keyboard)");
	return errf(err, errlen, 400, "action: 'action_type' is \"%s\"; expected InstanceStart, FlushMetrics or SendCtrlAltDel", act);
}

/* ---- PATCH /vm: pause and resume ---- */

static int patch_vm(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		    size_t errlen)
{
	static const struct api_field f[] = { { "state", JSON_STRING, true } };
	struct api_vm *vm = api_vm(a);
	const char *st;
	bool pause;
	int ret = api_check(in, f, 1, "vm", err, errlen);

	if (ret)
		return ret;
	st = str(in, "state");
	if (strcmp(st, "Paused") && strcmp(st, "Resumed"))
		return errf(err, errlen, 400, "vm: 'state' is \"%s\"; expected \"Paused\" or \"Resumed\"", st);
	pause = !strcmp(st, "Paused");
	if (!vm->running)
		return errf(err, errlen, 400, "vm: the VM is not running (PUT /actions InstanceStart first)");
	if (pause == vm->paused)
		return errf(err, errlen, 400, "vm: the VM is %s", pause ? "already paused" : "not paused");
	if (!vm->set_paused)
		return errf(err, errlen, 400, "vm: pausing is not available here");
	if (vm->set_paused(vm->ctx, pause, err, errlen))
		return 400;
	vm->paused = pause;
	return 204;
}

/* ---- what cubicle has not built yet ---- */

#define NOT_YET(fn, what)                                                                  \
	static int fn(struct api *a, const char *id, json_t *in, json_t **out, char *err,  \
		      size_t errlen)                                                       \
	{                                                                                  \
		return errf(err, errlen, 400, "%s is not supported by cubicle yet", what); \
	}
NOT_YET(no_balloon, "the balloon device")
NOT_YET(no_mmds, "MMDS")
NOT_YET(no_cpu_config, "CPU configuration (PUT /cpu-config)")
NOT_YET(no_serial, "configuring the serial device (PUT /serial)")
NOT_YET(no_pmem, "pmem devices")
NOT_YET(no_hotplug, "memory hotplug")

const struct api_route fc_routes[] = {
	{ "GET", "/", false, false, get_root, false },
	{ "GET", "/version", false, false, get_version, false },
	{ "GET", "/machine-config", false, false, get_machine, false },
	{ "PUT", "/machine-config", false, true, put_machine, false },
	{ "PATCH", "/machine-config", false, true, patch_machine, false },
	{ "PUT", "/boot-source", false, true, put_boot, false },
	{ "PUT", "/drives/", true, true, put_drive, false },
	{ "PATCH", "/drives/", true, true, patch_drive, false },
	{ "PUT", "/network-interfaces/", true, true, put_net, false },
	{ "PATCH", "/network-interfaces/", true, true, patch_net, false },
	{ "PUT", "/entropy", false, true, put_entropy, false },
	{ "PUT", "/actions", false, true, put_actions, false },
	{ "GET", "/vm/config", false, false, get_vm_config, false },
	{ "PATCH", "/vm", false, true, patch_vm, false },
	{ "PUT", "/logger", false, true, fc_put_logger, false },
	{ "PUT", "/metrics", false, true, fc_put_metrics, false },
	{ "PUT", "/vsock", false, true, put_vsock, false },
	{ "PUT", "/balloon", false, true, no_balloon, false },
	{ "PATCH", "/balloon", false, true, no_balloon, false },
	{ "GET", "/balloon", false, false, no_balloon, false },
	{ "PUT", "/mmds", false, true, no_mmds, false },
	{ "PATCH", "/mmds", false, true, no_mmds, false },
	{ "GET", "/mmds", false, false, no_mmds, false },
	{ "PUT", "/mmds/config", false, true, no_mmds, false },
	{ "PUT", "/cpu-config", false, true, no_cpu_config, false },
	{ "PUT", "/serial", false, true, no_serial, false },
	{ "PUT", "/pmem/", true, true, no_pmem, false },
	{ "PUT", "/hotplug/memory", false, true, no_hotplug, false },
};
const unsigned fc_n_routes = sizeof(fc_routes) / sizeof(fc_routes[0]);
