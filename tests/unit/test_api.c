/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the control API's request path (api_dispatch, no socket):
 * Firecracker's pre-boot endpoints, the tree InstanceStart hands to the plan
 * stage, errors, every response checked against the subset of Firecracker's
 * schema in tests/api/fc-schema.json, and a unit plugin's methods called
 * through the API with typed arguments. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "cnode.h"
#include "cubicle-build.h"
#include "cunit_main.h"
#include "devices.h"
#include "loader.h"
#include "log.h"
#include "plan.h"
#include "ratelimit.h"
#include "snap/snapshot.h"

#define SCHEMA CUB_SRC_DIR "/tests/api/fc-schema.json"
#define PDIR CUB_BUILD_DIR "/tests/unit/plugins/.libs"

static json_t *schema;
static struct arena ar;
static const struct cnode *started_tree;
static int start_ret;

static int fake_start(void *ctx, const struct cnode *root, char *err, size_t errlen)
{
	struct api_vm *vm = ctx;

	started_tree = root;
	if (start_ret)
		return errf(err, errlen, start_ret, "PUT /drives/rootfs: raw[rootfs]: no such file");
	vm->running = true;
	return 0;
}

static int pause_ret, pauses;

static int fake_set_paused(void *ctx, bool on, char *err, size_t errlen)
{
	(void)ctx;
	if (pause_ret)
		return errf(err, errlen, pause_ret, "1 of 2 vCPUs did not stop within 5 s");
	pauses += on ? 1 : -1;
	return 0;
}

/* The snapshot hooks: what they were asked, last. */
static char snap_dir[256], snap_sets[256];
static bool snap_flag, snap_diff;
static int snap_calls;

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

static bool snap_uffd;

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
static struct api_vm vm = { .reg = &reg, .ar = &ar, .start = fake_start, .ctx = &vm,
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

static void expect_valid(const json_t *v, const char *def)
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

static struct api *a;

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
static int req(const char *method, const char *url, const char *body, json_t **out)
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
static void expect_fault(const char *method, const char *url, const char *body, int status,
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

static void setup(void)
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

static void test_info(void)
{
	json_t *r;

	setup();
	CU_ASSERT_EQUAL(req("GET", "/", NULL, &r), 200);
	expect_valid(r, "InstanceInfo");
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "state")), "Not started");
	json_decref(r);
	CU_ASSERT_EQUAL(req("GET", "/version", NULL, &r), 200);
	expect_valid(r, "FirecrackerVersion");
	json_decref(r);
	CU_ASSERT_EQUAL(req("GET", "/machine-config", NULL, &r), 200);
	expect_valid(r, "MachineConfiguration");
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(r, "mem_size_mib")), 128);
	json_decref(r);
}

static void test_machine_config(void)
{
	json_t *r;

	setup();
	CU_ASSERT_EQUAL(req("PUT", "/machine-config", "{\"vcpu_count\":2,\"mem_size_mib\":256}", NULL), 204);
	CU_ASSERT_EQUAL(req("PATCH", "/machine-config", "{\"mem_size_mib\":512}", NULL), 204);
	CU_ASSERT_EQUAL(req("GET", "/machine-config", NULL, &r), 200);
	expect_valid(r, "MachineConfiguration");
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(r, "vcpu_count")), 2);
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(r, "mem_size_mib")), 512);
	json_decref(r);
	expect_fault("PUT", "/machine-config", "{\"vcpu_count\":2}", 400, "missing required field 'mem_size_mib'");
	expect_fault("PUT", "/machine-config", "{\"vcpu_count\":\"2\",\"mem_size_mib\":1}", 400, "'vcpu_count' must be an integer, not a string");
	expect_fault("PATCH", "/machine-config", "{\"vcpu_count\":33}", 400, "'vcpu_count' is 33; expected 1 to 32");
	expect_fault("PATCH", "/machine-config", "{\"vcpus\":1}", 400, "unknown field 'vcpus'; expected one of vcpu_count");
	expect_fault("PATCH", "/machine-config", "{\"smt\":true}", 400, "'smt' true is not supported");
	expect_fault("PATCH", "/machine-config", "{\"huge_pages\":\"2M\"}", 400, "'huge_pages' \"2M\" is not supported");
	/* A refused PATCH changed nothing. */
	CU_ASSERT_EQUAL(req("GET", "/machine-config", NULL, &r), 200);
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(r, "vcpu_count")), 2);
	json_decref(r);
}

static void test_errors(void)
{
	char big[API_BODY_MAX + 16];
	json_t *r;

	setup();
	expect_fault("GET", "/nope", NULL, 400, "Invalid request method and/or path: GET /nope");
	expect_fault("DELETE", "/", NULL, 400, "Invalid request method and/or path: DELETE /");
	expect_fault("PUT", "/boot-source", "{\"kernel_image_path\":", 400, "the body is not valid JSON");
	expect_fault("PUT", "/boot-source", "[1]", 400, "the body must be a JSON object");
	expect_fault("PUT", "/boot-source", "{\"kernel_image_path\":\"a\",\"kernel_image_path\":\"b\"}", 400, "duplicate");
	expect_fault("PUT", "/boot-source", NULL, 400, "needs a JSON body");
	expect_fault("GET", "/", "{}", 400, "takes no body");
	expect_fault("PUT", "/drives/a/b", "{}", 400, "one path segment");
	expect_fault("PUT", "/drives/x", "{\"drive_id\":\"y\",\"is_root_device\":false,\"path_on_host\":\"p\"}", 400, "does not match");
	expect_fault("PUT", "/drives/x", "{\"drive_id\":\"x\",\"is_root_device\":false,\"path_on_host\":\"p\",\"rate_limiter\":{\"bandwidth\":{\"size\":1000}}}", 400, "drive: bandwidth needs 'size' and 'refill_time'");
	expect_fault("PUT", "/drives/x", "{\"drive_id\":\"x\",\"is_root_device\":false,\"path_on_host\":\"p\",\"rate_limiter\":{\"bytes\":{}}}", 400, "unknown field 'bytes'; expected bandwidth, ops");
	expect_fault("PUT", "/drives/x", "{\"drive_id\":\"x\",\"is_root_device\":false,\"path_on_host\":\"p\",\"rate_limiter\":{\"ops\":{\"size\":-1,\"refill_time\":5}}}", 400, "ops.size must be an integer >= 0");
	expect_fault("PUT", "/drives/x", "{\"drive_id\":\"x\",\"is_root_device\":false,\"path_on_host\":\"p\",\"rate_limiter\":{\"ops\":{\"size\":5,\"refill_time\":0}}}", 400, "refill_time must be at least 1 ms");
	expect_fault("PUT", "/entropy", "{\"rate_limiter\":{\"ops\":{\"size\":5,\"refill_time\":1,\"burst\":1}}}", 400, "entropy: ops: unknown field 'burst'");
	expect_fault("PUT", "/drives/x", "{\"drive_id\":\"x\",\"is_root_device\":false,\"path_on_host\":\"p\",\"io_engine\":\"Async\"}", 400, "'io_engine' \"Async\" is not supported");
	expect_fault("PUT", "/network-interfaces/e", "{\"iface_id\":\"e\",\"host_dev_name\":\"t\",\"mtu\":20}", 400, "'mtu' is 20; expected 68 to 65535");
	expect_fault("PATCH", "/vm", "{\"state\":\"Paused\"}", 400, "the VM is not running");
	expect_fault("PUT", "/vsock", "{}", 400, "vsock: missing required field 'guest_cid'");
	expect_fault("PUT", "/vsock", "{\"guest_cid\":3}", 400, "vsock: missing required field 'uds_path'");
	expect_fault("PUT", "/vsock", "{\"guest_cid\":\"3\",\"uds_path\":\"/v\"}", 400, "'guest_cid' must be an integer");
	expect_fault("PUT", "/vsock", "{\"guest_cid\":2,\"uds_path\":\"/v\"}", 400, "vsock: 'guest_cid' is 2; expected 3 to 4294967294");
	expect_fault("PUT", "/vsock", "{\"guest_cid\":4294967295,\"uds_path\":\"/v\"}", 400, "expected 3 to 4294967294");
	expect_fault("PUT", "/vsock", "{\"guest_cid\":3,\"uds_path\":\"\"}", 400, "vsock: 'uds_path' is empty");
	expect_fault("PUT", "/vsock", "{\"guest_cid\":3,\"uds_path\":\"/v\",\"port\":1}", 400, "unknown field 'port'");
	memset(big, 'a', 200);
	big[0] = '/';
	big[200] = '\0';
	{
		char body[300];

		snprintf(body, sizeof(body), "{\"guest_cid\":3,\"uds_path\":\"%s\"}", big);
		expect_fault("PUT", "/vsock", body, 400, "vsock: 'uds_path' is 200 bytes; at most 96");
	}
	expect_fault("PUT", "/actions", "{\"action_type\":\"InstanceStart\"}", 400, "Cannot start microvm without kernel configuration.");
	expect_fault("PUT", "/actions", "{\"action_type\":\"Reboot\"}", 400, "'action_type' is \"Reboot\"");
	expect_fault("PUT", "/actions", "{\"action_type\":\"SendCtrlAltDel\"}", 400, "not supported by cubicle yet");
	memset(big, ' ', sizeof(big));
	big[sizeof(big) - 1] = '\0';
	big[0] = '{';
	big[sizeof(big) - 2] = '}';
	expect_fault("PUT", "/boot-source", big, 413, "larger than the limit");
	/* None of it changed the state. */
	CU_ASSERT_EQUAL(req("GET", "/vm/config", NULL, &r), 200);
	expect_valid(r, "FullVmConfiguration");
	CU_ASSERT_EQUAL(json_array_size(json_object_get(r, "drives")), 0);
	CU_ASSERT_PTR_NULL(json_object_get(r, "boot-source"));
	json_decref(r);
}

static const struct cnode *dev(const struct cnode *devs, unsigned i)
{
	return devs && i < devs->n_kids ? devs->kids[i] : NULL;
}

static const char *s_of(const struct cnode *g, const char *path)
{
	char buf[128], *save, *t;

	snprintf(buf, sizeof(buf), "%s", path);
	for (t = strtok_r(buf, ".", &save); t && g; t = strtok_r(NULL, ".", &save))
		g = cnode_get(g, t);
	return g && g->type == CN_STR ? g->s : NULL;
}

static void test_instance_start(void)
{
	const struct cnode *devs, *d, *allow;
	json_t *r;

	setup();
	CU_ASSERT_EQUAL(req("PUT", "/boot-source", "{\"kernel_image_path\":\"/k\",\"boot_args\":\"console=ttyS0\"}", NULL), 204);
	CU_ASSERT_EQUAL(req("PUT", "/drives/data", "{\"drive_id\":\"data\",\"is_root_device\":false,\"path_on_host\":\"/d.img\",\"is_read_only\":true,"
			    "\"rate_limiter\":{\"bandwidth\":{\"size\":1048576,\"one_time_burst\":4096,\"refill_time\":100},\"ops\":null}}", NULL), 204);
	CU_ASSERT_EQUAL(req("PUT", "/drives/rootfs", "{\"drive_id\":\"rootfs\",\"is_root_device\":true,\"path_on_host\":\"/r.img\"}", NULL), 204);
	expect_fault("PUT", "/drives/other", "{\"drive_id\":\"other\",\"is_root_device\":true,\"path_on_host\":\"/o\"}", 400, "A root block device already exists!");
	CU_ASSERT_EQUAL(req("PUT", "/network-interfaces/eth0", "{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap7\",\"guest_mac\":\"06:00:ac:10:00:02\"}", NULL), 204);
	expect_fault("PATCH", "/network-interfaces/eth1", "{\"iface_id\":\"eth1\",\"tx_rate_limiter\":{}}", 400, "no such interface");
	expect_fault("PATCH", "/network-interfaces/eth0", "{\"iface_id\":\"eth0\",\"tx_rate_limiter\":{\"ops\":{\"size\":1}}}", 400, "needs 'size' and 'refill_time'");
	CU_ASSERT_EQUAL(req("PATCH", "/network-interfaces/eth0", "{\"iface_id\":\"eth0\",\"tx_rate_limiter\":{\"ops\":{\"size\":100,\"refill_time\":1000}}}", NULL), 204);
	CU_ASSERT_EQUAL(req("PUT", "/entropy", "{}", NULL), 204);
	CU_ASSERT_EQUAL(req("PUT", "/vsock", "{\"guest_cid\":7,\"uds_path\":\"/run/v.sock\"}", NULL), 204);
	CU_ASSERT_EQUAL(req("PUT", "/vsock", "{\"vsock_id\":\"v\",\"guest_cid\":3,\"uds_path\":\"/run/v.sock\"}", NULL), 204);
	CU_ASSERT_EQUAL(req("GET", "/vm/config", NULL, &r), 200);
	expect_valid(r, "FullVmConfiguration");
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(r, "vsock"), "guest_cid")), 3);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(r, "vsock"), "uds_path")), "/run/v.sock");
	json_decref(r);

	/* A failing start is reported, and can be tried again. */
	start_ret = -ENOENT;
	expect_fault("PUT", "/actions", "{\"action_type\":\"InstanceStart\"}", 400, "PUT /drives/rootfs: raw[rootfs]");
	start_ret = 0;
	CU_ASSERT_EQUAL(req("PUT", "/actions", "{\"action_type\":\"InstanceStart\"}", NULL), 204);
	CU_ASSERT_PTR_NOT_NULL_FATAL(started_tree);
	CU_ASSERT_EQUAL(cnode_get(cnode_get(started_tree, "machine"), "memory_mib")->i, 128);
	CU_ASSERT_STRING_EQUAL(s_of(started_tree, "boot.kernel"), "/k");
	CU_ASSERT_STRING_EQUAL(s_of(started_tree, "boot.cmdline"), "console=ttyS0 root=/dev/vda rw");
	devs = cnode_get(started_tree, "devices");
	CU_ASSERT_EQUAL_FATAL(devs ? devs->n_kids : 0, 6);
	CU_ASSERT_STRING_EQUAL(s_of(dev(devs, 0), "type"), "serial8250");
	/* The root drive first, so that it is /dev/vda. */
	CU_ASSERT_STRING_EQUAL(s_of(dev(devs, 1), "id"), "rootfs");
	CU_ASSERT_TRUE(cnode_get(dev(devs, 1), "root")->b);
	CU_ASSERT_STRING_EQUAL(s_of(dev(devs, 1), "backend.type"), "raw");
	CU_ASSERT_STRING_EQUAL(s_of(dev(devs, 1), "backend.path"), "/r.img");
	CU_ASSERT_STRING_EQUAL(dev(devs, 1)->where, "PUT /drives/rootfs");
	d = dev(devs, 2);
	CU_ASSERT_STRING_EQUAL(s_of(d, "id"), "data");
	CU_ASSERT_TRUE(cnode_get(d, "read_only")->b);
	CU_ASSERT_TRUE(cnode_get(cnode_get(d, "backend"), "read_only")->b);
	{
		const struct cnode *bw = cnode_get(cnode_get(d, "rate_limiter"), "bandwidth");

		CU_ASSERT_PTR_NOT_NULL_FATAL(bw);
		CU_ASSERT_EQUAL(cnode_get(bw, "size")->i, 1048576);
		CU_ASSERT_EQUAL(cnode_get(bw, "one_time_burst")->i, 4096);
		CU_ASSERT_EQUAL(cnode_get(bw, "refill_time")->i, 100);
		CU_ASSERT_PTR_NULL(cnode_get(cnode_get(d, "rate_limiter"), "ops"));
		CU_ASSERT_PTR_NULL(cnode_get(dev(devs, 1), "rate_limiter"));
	}
	d = dev(devs, 3);
	CU_ASSERT_STRING_EQUAL(s_of(d, "type"), "virtio-net");
	CU_ASSERT_STRING_EQUAL(s_of(d, "mac"), "06:00:ac:10:00:02");
	CU_ASSERT_STRING_EQUAL(s_of(d, "backend.type"), "tap");
	CU_ASSERT_STRING_EQUAL(s_of(d, "backend.ifname"), "tap7");
	CU_ASSERT_STRING_EQUAL(s_of(d, "backend.policy.default"), "deny");
	CU_ASSERT_EQUAL(cnode_get(cnode_get(cnode_get(d, "tx_rate_limiter"), "ops"), "size")->i, 100);
	CU_ASSERT_PTR_NULL(cnode_get(d, "rx_rate_limiter"));
	allow = cnode_get(cnode_get(cnode_get(d, "backend"), "policy"), "allow");
	CU_ASSERT_TRUE(allow && allow->n_kids == 1 && !strcmp(allow->kids[0]->s, "0.0.0.0/0"));
	CU_ASSERT_STRING_EQUAL(s_of(dev(devs, 4), "type"), "virtio-rng");
	d = dev(devs, 5);
	CU_ASSERT_STRING_EQUAL(s_of(d, "type"), "virtio-vsock");
	CU_ASSERT_STRING_EQUAL(s_of(d, "id"), "vsock0");
	CU_ASSERT_EQUAL(cnode_get(d, "guest_cid")->i, 3);
	CU_ASSERT_STRING_EQUAL(s_of(d, "uds_path"), "/run/v.sock");
	CU_ASSERT_STRING_EQUAL(d->where, "PUT /vsock");

	/* Started: the pre-boot objects are closed, the state says so. */
	CU_ASSERT_EQUAL(req("GET", "/", NULL, &r), 200);
	expect_valid(r, "InstanceInfo");
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "state")), "Running");
	json_decref(r);
	expect_fault("PUT", "/boot-source", "{\"kernel_image_path\":\"/k\"}", 400, "not supported after starting the microVM");
	expect_fault("PUT", "/actions", "{\"action_type\":\"InstanceStart\"}", 400, "not supported after starting the microVM");
	expect_fault("PUT", "/vsock", "{\"guest_cid\":3,\"uds_path\":\"/v\"}", 400, "not supported after starting the microVM");
	expect_fault("PATCH", "/drives/rootfs", "{\"drive_id\":\"rootfs\",\"path_on_host\":\"/x\"}", 400, "running VM is not supported");

	/* PATCH /vm: pause and resume, each once. */
	expect_fault("PATCH", "/vm", "{\"state\":\"Resumed\"}", 400, "the VM is not paused");
	expect_fault("PATCH", "/vm", "{\"state\":\"Stopped\"}", 400, "expected \"Paused\" or \"Resumed\"");
	pause_ret = -ETIMEDOUT;
	expect_fault("PATCH", "/vm", "{\"state\":\"Paused\"}", 400, "did not stop within 5 s");
	pause_ret = 0;
	CU_ASSERT_EQUAL(req("PATCH", "/vm", "{\"state\":\"Paused\"}", NULL), 204);
	CU_ASSERT_EQUAL(pauses, 1);
	CU_ASSERT_EQUAL(req("GET", "/", NULL, &r), 200);
	expect_valid(r, "InstanceInfo");
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "state")), "Paused");
	json_decref(r);
	expect_fault("PATCH", "/vm", "{\"state\":\"Paused\"}", 400, "already paused");
	CU_ASSERT_EQUAL(req("PATCH", "/vm", "{\"state\":\"Resumed\"}", NULL), 204);
	CU_ASSERT_EQUAL(pauses, 0);
}

/* A method the core has never heard of, in a unit plugin, through the API. */
static void test_methods(void)
{
	static struct plan_inst pi = { .id = "u0" };
	static struct cub_inst in = { .name = "unit-good[u0]", .priv = "hello", .pi = &pi };
	static struct cub_inst *insts[] = { &in };
	struct plugin *p;
	char err[512];
	json_t *r;

	setup();
	expect_fault("PUT", "/devices/u0/methods/add", "{\"args\":[1,2]}", 400, "no VM is running yet");
	CU_ASSERT_EQUAL_FATAL(loader_open(PDIR "/unit_good.so", &p, err, sizeof(err)), 0);
	in.plugin = p;
	vm.insts = insts;
	vm.n_insts = 1;
	vm.running = true;
	CU_ASSERT_EQUAL(req("GET", "/devices", NULL, &r), 200);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(r, 0), "id")), "u0");
	json_decref(r);
	CU_ASSERT_EQUAL(req("PUT", "/devices/u0/methods/add", "{\"args\":[-5,12]}", &r), 200);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "reply")), "7");
	json_decref(r);
	CU_ASSERT_EQUAL(req("PUT", "/devices/u0/methods/echo", "{\"args\":[\"world\"]}", &r), 200);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "reply")), "hello|world");
	json_decref(r);
	CU_ASSERT_EQUAL(req("PUT", "/devices/u0/methods/fail", "{\"args\":[false,7]}", NULL), 200);
	expect_fault("PUT", "/devices/u0/methods/fail", "{\"args\":[true,7]}", 400, "unit-good[u0].fail");
	expect_fault("PUT", "/devices/u0/methods/fail", "{\"args\":[1,7]}", 400, "argument 1 must be a boolean");
	expect_fault("PUT", "/devices/u0/methods/echo", "{\"args\":[5]}", 400, "argument 1 must be a string");
	expect_fault("PUT", "/devices/u0/methods/add", "{\"args\":[1]}", 400, "takes 2 arguments");
	expect_fault("PUT", "/devices/u0/methods/nope", "{}", 404, "has no method 'nope'");
	expect_fault("PUT", "/devices/zz/methods/add", "{}", 404, "no device 'zz'");
	expect_fault("PUT", "/devices/u0/add", "{}", 400, "expected /devices/ID/methods/NAME");
	vm.insts = NULL;
	vm.n_insts = 0;
	loader_close(p);
}

/* A VM from a config file: GET /vm/config shows its virtio-vsock (read
 * through the plugin's parameter table), which clients look up. */
static void test_config_vsock(void)
{
	static struct plan_inst pi = { .id = "v0" };
	static struct cub_inst in = { .name = "virtio-vsock[v0]", .pi = &pi };
	static struct cub_inst *insts[] = { &in };
	const char *path = "/run/vm7.vsock";
	uint64_t cid = 9;
	struct plugin *p;
	char err[512], *cfg;
	json_t *r, *v;

	setup();
	CU_ASSERT_EQUAL_FATAL(loader_open(CUB_BUILD_DIR "/plugins/devices/.libs/virtio_vsock.so", &p,
					  err, sizeof(err)), 0);
	cfg = calloc(1, p->d->cfg_size);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	for (unsigned k = 0; k < p->d->n_params; k++) {
		if (!strcmp(p->params[k].name, "guest_cid"))
			memcpy(cfg + p->params[k].offset, &cid, sizeof(cid));
		if (!strcmp(p->params[k].name, "uds_path"))
			memcpy(cfg + p->params[k].offset, &path, sizeof(path));
	}
	in.plugin = p;
	in.cfg = cfg;
	CU_ASSERT_EQUAL(req("GET", "/vm/config", NULL, &r), 200);
	CU_ASSERT_PTR_NULL(json_object_get(r, "vsock")); /* no VM yet */
	json_decref(r);
	vm.insts = insts;
	vm.n_insts = 1;
	CU_ASSERT_EQUAL(req("GET", "/vm/config", NULL, &r), 200);
	expect_valid(r, "FullVmConfiguration");
	v = json_object_get(r, "vsock");
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(v, "guest_cid")), 9);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(v, "uds_path")), "/run/vm7.vsock");
	json_decref(r);
	vm.insts = NULL;
	vm.n_insts = 0;
	free(cfg);
	loader_close(p);
}

/* PATCH /drives/ID { rate_limiter } on a running VM: the virtio-blk
 * instance's limiter (its cfg slot) takes the new settings at once. */
static void test_patch_rate_limiter(void)
{
	static struct plan_inst pi = { .id = "d1" };
	static struct cub_inst in = { .name = "virtio-blk[d1]", .pi = &pi };
	static struct cub_inst *insts[] = { &in };
	struct rl_cfg c = { .bandwidth = { 1000, 0, 1000 } }, got;
	struct arena rar = { 0 };
	struct cub_rl *rl = cub_rl_new(&rar, &c);
	struct plugin *p;
	char err[512], *cfg;
	uint64_t w;

	setup();
	CU_ASSERT_EQUAL_FATAL(loader_open(CUB_BUILD_DIR "/plugins/devices/.libs/virtio_blk.so", &p,
					  err, sizeof(err)), 0);
	cfg = calloc(1, p->d->cfg_size);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	for (unsigned k = 0; k < p->d->n_params; k++)
		if (!strcmp(p->params[k].name, "rate_limiter"))
			memcpy(cfg + p->params[k].offset, &rl, sizeof(rl));
	in.plugin = p;
	in.cfg = cfg;
	CU_ASSERT_EQUAL(req("PUT", "/boot-source", "{\"kernel_image_path\":\"/k\"}", NULL), 204);
	CU_ASSERT_EQUAL(req("PUT", "/actions", "{\"action_type\":\"InstanceStart\"}", NULL), 204);
	vm.insts = insts;
	vm.n_insts = 1;
	CU_ASSERT_TRUE(cub_rl_take(rl, 1000, 1, &w));
	CU_ASSERT_FALSE(cub_rl_take(rl, 1000, 1, &w)); /* 1000 bytes a second: empty */
	CU_ASSERT_EQUAL(req("PATCH", "/drives/d1", "{\"drive_id\":\"d1\",\"rate_limiter\":{\"bandwidth\":{\"size\":10000000,\"refill_time\":10},\"ops\":{\"size\":7,\"refill_time\":1000}}}", NULL), 204);
	cub_rl_get(rl, &got);
	CU_ASSERT_EQUAL(got.bandwidth.size, 10000000);
	CU_ASSERT_EQUAL(got.bandwidth.refill_time_ms, 10);
	CU_ASSERT_EQUAL(got.ops.size, 7);
	CU_ASSERT_TRUE(cub_rl_take(rl, 1000000, 1, &w)); /* in force at once */
	expect_fault("PATCH", "/drives/d2", "{\"drive_id\":\"d2\",\"rate_limiter\":{}}", 400, "no device 'd2' with a rate_limiter");
	expect_fault("PATCH", "/drives/d1", "{\"drive_id\":\"d1\",\"rate_limiter\":{\"ops\":{\"size\":1}}}", 400, "needs 'size' and 'refill_time'");
	/* an empty limiter lifts the limit */
	CU_ASSERT_EQUAL(req("PATCH", "/drives/d1", "{\"drive_id\":\"d1\",\"rate_limiter\":{}}", NULL), 204);
	for (int i = 0; i < 100; i++)
		CU_ASSERT_TRUE(cub_rl_take(rl, 1ull << 30, 1, &w));
	vm.insts = NULL;
	vm.n_insts = 0;
	free(cfg);
	loader_close(p);
	arena_free(&rar);
}

/* Write text to a temporary JSON file: its path (static). */
static const char *json_file(const char *text)
{
	static char path[64];
	int fd;
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/cubicle-test-fc-XXXXXX"); /* mkstemp's template */
	fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

static void expect_json_err(const char *text, const char *what)
{
	char err[512] = "";
	const char *path;

	setup();
	path = json_file(text);
	CU_ASSERT_EQUAL(api_load_fc_json(a, path, err, sizeof(err)), -EINVAL);
	if (!strstr(err, what) || !strstr(err, path))
		fprintf(stderr, "\n  got: %s\n  want: %s ... %s\n", err, path, what);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, what));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
	CU_ASSERT_PTR_NULL(started_tree); /* nothing started */
	unlink(path);
}

/* Firecracker's --config-file: the sections as their PUTs, then the start. */
static void test_config_file(void)
{
	const char *path;
	char err[512] = "";
	const struct cnode *devs;

	setup();
	path = json_file("{\n"
			 " \"network-interfaces\": [ { \"iface_id\": \"eth0\", \"host_dev_name\": \"tap3\" } ],\n"
			 " \"boot-source\": { \"kernel_image_path\": \"/k\", \"boot_args\": \"quiet\" },\n"
			 " \"drives\": [ { \"drive_id\": \"rootfs\", \"path_on_host\": \"/r.img\",\n"
			 "               \"is_root_device\": true, \"is_read_only\": true } ],\n"
			 " \"machine-config\": { \"vcpu_count\": 3, \"mem_size_mib\": 96 }\n"
			 "}\n");
	CU_ASSERT_EQUAL(api_load_fc_json(a, path, err, sizeof(err)), 0);
	unlink(path);
	CU_ASSERT_PTR_NOT_NULL_FATAL(started_tree);
	CU_ASSERT_EQUAL(cnode_get(cnode_get(started_tree, "machine"), "vcpus")->i, 3);
	CU_ASSERT_EQUAL(cnode_get(cnode_get(started_tree, "machine"), "memory_mib")->i, 96);
	CU_ASSERT_STRING_EQUAL(s_of(started_tree, "boot.cmdline"), "quiet root=/dev/vda ro");
	devs = cnode_get(started_tree, "devices");
	CU_ASSERT_EQUAL_FATAL(devs ? devs->n_kids : 0, 3);
	CU_ASSERT_STRING_EQUAL(s_of(dev(devs, 1), "backend.path"), "/r.img");
	CU_ASSERT_STRING_EQUAL(s_of(dev(devs, 2), "backend.ifname"), "tap3");

	expect_json_err("{ \"drives\": [ }", ":1:");
	expect_json_err("[1]", "expected a JSON object of sections");
	expect_json_err("{ \"boot-source\": { \"kernel_image_path\": \"/k\" }, \"drivez\": [] }",
			"unknown section \"drivez\"");
	expect_json_err("{ \"drives\": { \"drive_id\": \"a\" } }", "\"drives\" must be an array");
	expect_json_err("{ \"drives\": [ { \"path_on_host\": \"/x\" } ] }",
			"drives[0]: expected an object with a string \"drive_id\"");
	expect_json_err("{ \"drives\": [ { \"drive_id\": \"d\", \"is_root_device\": 1 } ] }",
			"drives[0] (\"d\"): drive: 'is_root_device' must be a boolean");
	expect_json_err("{ \"machine-config\": { \"vcpu_count\": 1, \"mem_size_mib\": 64 } }",
			"InstanceStart: ");
	start_ret = 0;
}

/* GET /metrics: Prometheus text, a JSON string to the dispatcher. */
static void test_metrics(void)
{
	json_t *r;
	const char *t;

	setup();
	vm.id = "m0";
	CU_ASSERT_EQUAL(req("GET", "/metrics", NULL, &r), 200);
	t = json_string_value(r);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "# TYPE cubicle_vm_state gauge\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "\ncubicle_vm_state{state=\"Not started\"} 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "cubicle_info{version=\"" PACKAGE_VERSION "\",id=\"m0\"} 1\n"));
	CU_ASSERT_PTR_NULL(strstr(t, "cubicle_vcpu_exits_total{")); /* no VM, no vCPU */
	json_decref(r);
	vm.running = true;
	vm.paused = true;
	CU_ASSERT_EQUAL(req("GET", "/metrics", NULL, &r), 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(r), "cubicle_vm_state{state=\"Paused\"} 1\n"));
	json_decref(r);
	expect_fault("PUT", "/stop", NULL, 400, "cannot be stopped through its API");
	vm.running = vm.paused = false;
	vm.id = NULL;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[16384];
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

/* PUT /logger: the log goes to the file at the level; PUT /metrics and
 * FlushMetrics: one JSON line per flush. */
static void test_sinks(void)
{
	char logp[] = "/tmp/cubicle-test-log-XXXXXX", mp[] = "/tmp/cubicle-test-metrics-XXXXXX";
	int saved = dup(STDERR_FILENO), lvl = log_get_level();
	json_t *line;
	char *text, body[256];

	close(mkstemp(logp)); /* mkstemp's templates: unique names */
	close(mkstemp(mp));
	setup();
	vm.id = "s0";
	expect_fault("PUT", "/logger", "{\"level\":\"Loud\"}", 400, "expected Error, Warning, Info, Debug, Trace or Off");
	expect_fault("PUT", "/logger", "{\"show_log_origin\":true}", 400, "carry no source locations");
	expect_fault("PUT", "/logger", "{\"module\":\"api_server\"}", 400, "no Rust modules");
	expect_fault("PUT", "/logger", "{\"log_path\":\"/nonexistent/dir/log\"}", 400, "/nonexistent/dir/log: No such file");
	snprintf(body, sizeof(body), "{\"log_path\":\"%s\",\"level\":\"Debug\",\"show_level\":true}", logp);
	CU_ASSERT_EQUAL(req("PUT", "/logger", body, NULL), 204);
	CU_ASSERT_EQUAL(log_get_level(), CUB_LOG_DEBUG);
	log_info("to the logger's file");
	expect_fault("PUT", "/logger", body, 400, "already configured");
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	log_set_level(lvl);
	log_set_show_level(false);
	text = slurp(logp);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "] info: to the logger's file\n"));
	unlink(logp);

	expect_fault("PUT", "/actions", "{\"action_type\":\"FlushMetrics\"}", 400, "PUT /metrics first");
	expect_fault("PUT", "/metrics", "{}", 400, "missing required field 'metrics_path'");
	expect_fault("PUT", "/metrics", "{\"metrics_path\":\"/dev/null\"}", 400, "not a file or a named pipe");
	snprintf(body, sizeof(body), "{\"metrics_path\":\"%s\",\"emit_id\":true,\"properties\":{\"team\":\"a\"}}", mp);
	CU_ASSERT_EQUAL(req("PUT", "/metrics", body, NULL), 204);
	expect_fault("PUT", "/metrics", body, 400, "already initialized");
	CU_ASSERT_EQUAL(req("PUT", "/actions", "{\"action_type\":\"FlushMetrics\"}", NULL), 204);
	CU_ASSERT_EQUAL(req("PUT", "/actions", "{\"action_type\":\"FlushMetrics\"}", NULL), 204);
	text = slurp(mp);
	CU_ASSERT_PTR_NOT_NULL_FATAL(strchr(text, '\n'));
	CU_ASSERT_PTR_NOT_NULL(strchr(strchr(text, '\n') + 1, '\n')); /* two lines */
	*strchr(text, '\n') = '\0';
	line = json_loads(text, 0, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(line);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(line, "id")), "s0");
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(line, "properties"), "team")), "a");
	CU_ASSERT(json_integer_value(json_object_get(line, "utc_timestamp_ms")) > 1700000000000LL);
	CU_ASSERT_EQUAL(json_real_value(json_object_get(json_object_get(line, "cubicle"),
							"cubicle_vm_state{state=\"Not started\"}")), 1.0);
	json_decref(line);
	unlink(mp);
	vm.id = NULL;
}

static void test_snapshots(void)
{
	json_t *r;

	setup();
	/* Before a VM: create and rollback have nothing to work on. */
	expect_fault("PUT", "/snapshot/create", "{\"snapshot_path\":\"/s/a\"}", 400, "no VM is running");
	expect_fault("PUT", "/snapshot/rollback", "{\"snapshot_path\":\"/s/a\"}", 400, "no VM is running");
	expect_fault("PUT", "/snapshot/load", "{}", 400, "missing required field 'snapshot_path'");
	expect_fault("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"mem_backend\":{\"backend_type\":\"Uffd\",\"backend_path\":\"/u\"}}", 400, "leave it out or give /s/a/memory");
	expect_fault("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"network_overrides\":[{\"iface_id\":\"e\"}]}", 400, "missing required field 'host_dev_name'");
	expect_fault("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"mem_file_path\":\"/elsewhere/mem\"}", 400, "leave it out or give /s/a/memory");
	CU_ASSERT_EQUAL(snap_calls, 0);
	/* Dirty-page tracking from the load on: the machine's own key. */
	CU_ASSERT_EQUAL(req("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"track_dirty_pages\":true}", &r), 204);
	CU_ASSERT_STRING_EQUAL(snap_sets, "machine.track_dirty_pages=true;");
	vm.running = false;
	CU_ASSERT_FALSE(snap_uffd);
	vm.running = false;
	/* The Uffd backend: cubicle's own handler reads the snapshot's memory. */
	CU_ASSERT_EQUAL(req("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"mem_backend\":{\"backend_type\":\"Uffd\",\"backend_path\":\"/s/a/memory\"}}", &r), 204);
	CU_ASSERT_TRUE(snap_uffd);
	vm.running = false;
	/* Firecracker's two paths name one folder. */
	CU_ASSERT_EQUAL(req("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a/state\",\"mem_backend\":{\"backend_type\":\"File\",\"backend_path\":\"/s/a/memory\"},\"resume_vm\":true}", &r), 204);
	CU_ASSERT_STRING_EQUAL(snap_dir, "/s/a");
	CU_ASSERT_STRING_EQUAL(snap_sets, "");
	CU_ASSERT_TRUE(snap_flag);
	CU_ASSERT_TRUE(vm.running && !vm.paused);
	vm.running = false;
	/* A clone's own tap: the interface's backend, as --set would say it. */
	CU_ASSERT_EQUAL(req("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"network_overrides\":[{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap7\"},{\"iface_id\":\"eth1\",\"host_dev_name\":\"tap8\"}]}", &r), 204);
	CU_ASSERT_STRING_EQUAL(snap_sets, "devices.eth0.backend.ifname=tap7;devices.eth1.backend.ifname=tap8;");
	CU_ASSERT_FALSE(snap_flag);
	vm.running = false;
	/* A clone's own vsock socket: the API's vsock device is vsock0. */
	expect_fault("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"vsock_override\":{}}", 400, "vsock_override: missing required field 'uds_path'");
	expect_fault("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"vsock_override\":{\"uds_path\":\"\"}}", 400, "'uds_path' is 0 bytes; expected 1 to 96");
	CU_ASSERT_EQUAL(req("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"vsock_override\":{\"uds_path\":\"/run/c7.sock\"}}", &r), 204);
	CU_ASSERT_STRING_EQUAL(snap_sets, "devices.vsock0.uds_path=/run/c7.sock;");
	vm.running = false;
	/* A clone's own disk (cubicle's drive_overrides), with its own tap. */
	expect_fault("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"drive_overrides\":[{\"drive_id\":\"a.b\",\"path_on_host\":\"/d\"}]}", 400, "'drive_id' \"a.b\" is not a device id");
	expect_fault("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"drive_overrides\":[{\"drive_id\":\"rootfs\"}]}", 400, "missing required field 'path_on_host'");
	CU_ASSERT_EQUAL(req("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\",\"drive_overrides\":[{\"drive_id\":\"rootfs\",\"path_on_host\":\"/clones/7.img\"}],\"network_overrides\":[{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap7\"}]}", &r), 204);
	CU_ASSERT_STRING_EQUAL(snap_sets, "devices.eth0.backend.ifname=tap7;devices.rootfs.backend.path=/clones/7.img;");
	CU_ASSERT_TRUE(vm.running && vm.paused); /* no resume_vm: it waits */
	expect_fault("PUT", "/snapshot/load", "{\"snapshot_path\":\"/s/a\"}", 400, "the VM already exists");
	vm.paused = false;
	/* Create: only from a paused VM; Diff is not built. */
	expect_fault("PUT", "/snapshot/create", "{\"snapshot_path\":\"/s/b\"}", 400, "pause it first");
	vm.paused = true;
	expect_fault("PUT", "/snapshot/create", "{\"snapshot_path\":\"/s/b\",\"snapshot_type\":\"Half\"}", 400, "expected \"Full\" or \"Diff\"");
	expect_fault("PUT", "/snapshot/create", "{\"snapshot_path\":\"/s/b\",\"mem_file_path\":\"/s/b.mem\"}", 400, "give /s/b/memory");
	expect_fault("PUT", "/snapshot/create", "{\"snapshot_path\":\"\"}", 400, "empty");
	CU_ASSERT_EQUAL(snap_calls, 6);
	CU_ASSERT_EQUAL(req("PUT", "/snapshot/create", "{\"snapshot_path\":\"/s/b/state\",\"mem_file_path\":\"/s/b/memory\",\"snapshot_type\":\"Full\"}", &r), 204);
	CU_ASSERT_STRING_EQUAL(snap_dir, "/s/b");
	CU_ASSERT_FALSE(snap_flag);
	CU_ASSERT_EQUAL(req("PUT", "/snapshot/create", "{\"snapshot_path\":\"/s/c/\",\"release_memory\":true}", &r), 204);
	CU_ASSERT_STRING_EQUAL(snap_dir, "/s/c");
	CU_ASSERT_TRUE(snap_flag);
	CU_ASSERT_FALSE(snap_diff);
	CU_ASSERT_EQUAL(req("PUT", "/snapshot/create", "{\"snapshot_path\":\"/s/d\",\"snapshot_type\":\"Diff\"}", &r), 204);
	CU_ASSERT_TRUE(snap_diff);
	/* Rollback answers with figures. */
	CU_ASSERT_EQUAL(req("PUT", "/snapshot/rollback", "{\"snapshot_path\":\"/s/b\"}", &r), 200);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "snapshot_path")), "/s/b");
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(r, "memory_bytes")), 1 << 20);
	CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(r, "ms")), 2.5, 1e-9);
	json_decref(r);
	CU_ASSERT_EQUAL(snap_calls, 10);
	vm.running = vm.paused = false;
}

static void test_teardown(void)
{
	api_close(a);
	a = NULL;
	arena_free(&ar);
	json_decref(schema);
	schema = NULL;
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "GET /, /version, /machine-config match the schema", test_info },
		{ "machine-config: PUT, PATCH, refusals", test_machine_config },
		{ "errors: 4xx with a fault_message, state unchanged", test_errors },
		{ "InstanceStart hands the plan stage Firecracker's objects", test_instance_start },
		{ "a unit plugin's methods through the API", test_methods },
		{ "GET /vm/config: the vsock of a VM from a config file", test_config_vsock },
		{ "PATCH /drives/ID: a running drive's rate limiter", test_patch_rate_limiter },
		{ "--config-file: Firecracker's JSON description", test_config_file },
		{ "GET /metrics: Prometheus text", test_metrics },
		{ "PUT /logger, PUT /metrics, FlushMetrics", test_sinks },
		{ "snapshot endpoints: folders, refusals, figures", test_snapshots },
		{ "teardown", test_teardown },
		{ NULL, NULL },
	};

	return cu_run("api", tests);
}
