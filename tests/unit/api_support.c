/* SPDX-License-Identifier: Apache-2.0 */
/* What both control API tests share: a detached API on a fake VM, requests checked against Firecracker's schema subset. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_support.h"
#include "cubicle-build.h"
#include "cunit_main.h"
#include "devices.h"
#include "snap/snapshot.h"

#define SCHEMA CUB_SRC_DIR "/tests/api/fc-schema.json"

static json_t *schema;
static struct arena ar;
const struct cnode *started_tree;
int start_ret;

static int fake_start(void *ctx, const struct cnode *root, char *err, size_t errlen)
{
	struct api_vm *v = ctx;

	started_tree = root;
	if (start_ret)
		return errf(err, errlen, start_ret, "PUT /drives/rootfs: raw[rootfs]: no such file");
	v->running = true;
	return 0;
}

int pause_ret, pauses;

static int fake_set_paused(void *ctx, bool on, char *err, size_t errlen)
{
	(void)ctx;
	if (pause_ret)
		return errf(err, errlen, pause_ret, "1 of 2 vCPUs did not stop within 5 s");
	pauses += on ? 1 : -1;
	return 0;
}

/* The snapshot hooks: what they were asked, last. */
char snap_dir[256], snap_sets[256];
bool snap_flag, snap_diff;
int snap_calls;

static int fake_snapshot(void *ctx, const char *dir, bool diff, bool release,
			 struct snap_stats *st, char *err, size_t errlen)
{
	(void)ctx, (void)st, (void)err, (void)errlen;
	snprintf(snap_dir, sizeof(snap_dir), "%s", dir);
	snap_flag = release;
	snap_diff = diff;
	snap_calls++;
	return 0;
}

bool snap_uffd;

static int fake_load(void *ctx, const char *dir, bool resume, bool uffd, char *const *sets,
		     unsigned n_sets, char *err, size_t errlen)
{
	struct api_vm *v = ctx;

	snap_uffd = uffd;
	(void)err, (void)errlen;
	snprintf(snap_dir, sizeof(snap_dir), "%s", dir);
	snap_sets[0] = '\0';
	for (unsigned i = 0; i < n_sets; i++)
		snprintf(snap_sets + strlen(snap_sets), sizeof(snap_sets) - strlen(snap_sets), "%s;",
			 sets[i]);
	snap_flag = resume;
	snap_calls++;
	v->running = true;
	v->paused = !resume;
	return 0;
}

static int fake_rollback(void *ctx, const char *dir, struct snap_stats *st, char *err,
			 size_t errlen)
{
	(void)ctx, (void)err, (void)errlen;
	memset(st, 0, sizeof(*st));
	st->mem_bytes = 1 << 20;
	st->us_total = 2500;
	snprintf(snap_dir, sizeof(snap_dir), "%s", dir);
	snap_calls++;
	return 0;
}

static struct registry reg;
struct api_vm vm = { .reg = &reg, .ar = &ar, .start = fake_start, .ctx = &vm,
		      .set_paused = fake_set_paused, .snapshot = fake_snapshot,
		      .load = fake_load, .rollback = fake_rollback };

/* ---- a small validator for the schema subset ---- */

static bool valid(const json_t *v, const json_t *s, char *why, size_t len);

static const json_t *deref(const json_t *s)
{
	const char *ref = json_string_value(json_object_get(s, "$ref"));

	if (ref && !strncmp(ref, "#/definitions/", 14))
		return json_object_get(json_object_get(schema, "definitions"), ref + 14);
	return s;
}

static bool valid(const json_t *v, const json_t *s, char *why, size_t len)
{
	const char *type, *key;
	json_t *sub, *x;
	size_t i;

	s = deref(s);
	if (!s)
		return snprintf(why, len, "unknown $ref"), false;
	type = json_string_value(json_object_get(s, "type"));
	if (type && ((!strcmp(type, "object") && !json_is_object(v)) ||
		     (!strcmp(type, "array") && !json_is_array(v)) ||
		     (!strcmp(type, "string") && !json_is_string(v)) ||
		     (!strcmp(type, "integer") && !json_is_integer(v)) ||
		     (!strcmp(type, "boolean") && !json_is_boolean(v))))
		return snprintf(why, len, "not %s", type), false;
	if ((sub = json_object_get(s, "enum"))) {
		bool found = false;

		json_array_foreach(sub, i, x)
			found = found || json_equal(x, (json_t *)v);
		if (!found)
			return snprintf(why, len, "not in the enum"), false;
	}
	if ((x = json_object_get(s, "minimum")) && json_integer_value(v) < json_integer_value(x))
		return snprintf(why, len, "below the minimum"), false;
	if ((x = json_object_get(s, "maximum")) && json_integer_value(v) > json_integer_value(x))
		return snprintf(why, len, "above the maximum"), false;
	json_array_foreach(json_object_get(s, "required"), i, x)
		if (!json_object_get(v, json_string_value(x)))
			return snprintf(why, len, "missing '%s'", json_string_value(x)), false;
	/* Closed objects: cubicle sends nothing the description does not name. */
	if (json_is_object(v) && (sub = json_object_get(s, "properties"))) {
		json_object_foreach((json_t *)v, key, x) {
			if (!json_object_get(sub, key))
				return snprintf(why, len, "undocumented member '%s'", key), false;
			if (!valid(x, json_object_get(sub, key), why, len))
				return false;
		}
	}
	if (json_is_array(v) && (sub = json_object_get(s, "items")))
		json_array_foreach(v, i, x)
			if (!valid(x, sub, why, len))
				return false;
	return true;
}

void expect_valid(const json_t *v, const char *def)
{
	const json_t *s = json_object_get(json_object_get(schema, "definitions"), def);
	char why[256] = "";
	bool ok;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	ok = valid(v, s, why, sizeof(why));
	if (!ok) {
		char *t = json_dumps(v, JSON_COMPACT);

		fprintf(stderr, "\n  %s against %s: %s\n", t, def, why);
		free(t);
	}
	CU_ASSERT_TRUE(ok);
}

/* ---- requests ---- */

struct api *a;

/* The schema definition a request body of method on url must match. */
static const char *request_def(const char *method, const char *url)
{
	static const struct {
		const char *method, *prefix, *def;
	} map[] = {
		{ "PUT", "/machine-config", "MachineConfiguration" },
		{ "PUT", "/boot-source", "BootSource" },
		{ "PUT", "/drives/", "Drive" },
		{ "PATCH", "/drives/", "PartialDrive" },
		{ "PUT", "/network-interfaces/", "NetworkInterface" },
		{ "PUT", "/entropy", "EntropyDevice" },
		{ "PUT", "/vsock", "Vsock" },
		{ "PUT", "/actions", "InstanceActionInfo" },
		{ "PATCH", "/vm", "Vm" },
		{ "PUT", "/logger", "Logger" },
		{ "PUT", "/metrics", "Metrics" },
	};

	for (unsigned i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(method, map[i].method) && !strncmp(url, map[i].prefix, strlen(map[i].prefix)))
			return map[i].def;
	return NULL;
}

/* One request; returns the status, the reply (owned by the caller) in *out
 * or NULL. Every fault is checked against the Error schema here, and every
 * body the API accepted against the request's schema: cubicle accepts
 * nothing Firecracker's description does not allow. */
int req(const char *method, const char *url, const char *body, json_t **out)
{
	json_t *r = NULL;
	int st = api_dispatch(a, method, url, body, body ? strlen(body) : 0, &r);
	const char *def = request_def(method, url);

	if (st < 400 && body && def) {
		json_t *in = json_loads(body, 0, NULL);

		CU_ASSERT_PTR_NOT_NULL(in);
		if (in)
			expect_valid(in, def);
		json_decref(in);
	}

	if (st >= 400) {
		CU_ASSERT_PTR_NOT_NULL(r);
		if (r)
			expect_valid(r, "Error");
	}
	if (out)
		*out = r;
	else
		json_decref(r);
	return st;
}

/* The request fails with status and a fault_message containing what. */
void expect_fault(const char *method, const char *url, const char *body, int status,
		  const char *what)
{
	json_t *r;
	int st = req(method, url, body, &r);
	const char *m = json_string_value(json_object_get(r, "fault_message"));

	if (st != status || !m || !strstr(m, what))
		fprintf(stderr, "\n  %s %s: %d %s (want %d, /%s/)\n", method, url, st, m ? m : "-",
			status, what);
	CU_ASSERT_EQUAL(st, status);
	CU_ASSERT_PTR_NOT_NULL(m && strstr(m, what));
	json_decref(r);
}

void setup(void)
{
	json_error_t je;

	if (!schema)
		schema = json_load_file(SCHEMA, 0, &je);
	CU_ASSERT_PTR_NOT_NULL_FATAL(schema);
	api_close(a);
	arena_free(&ar);
	vm.running = false;
	vm.paused = false;
	pauses = pause_ret = 0;
	started_tree = NULL;
	start_ret = 0;
	a = api_new_detached(&vm);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
}

void test_teardown(void)
{
	api_close(a);
	a = NULL;
	arena_free(&ar);
	json_decref(schema);
	schema = NULL;
}
