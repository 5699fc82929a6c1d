/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the control API's request path (api_dispatch, no socket):
 * Firecracker's pre-boot endpoints, the tree InstanceStart hands to the plan
 * stage, errors and --config-file, every request and response checked against
 * the subset of Firecracker's schema in tests/api/fc-schema.json (a VM's other
 * endpoints: test_api_runtime.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_support.h"
#include "cunit_main.h"

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

int main(void)
{
	static const struct cu_test tests[] = {
		{ "GET /, /version, /machine-config match the schema", test_info },
		{ "machine-config: PUT, PATCH, refusals", test_machine_config },
		{ "errors: 4xx with a fault_message, state unchanged", test_errors },
		{ "InstanceStart hands the plan stage Firecracker's objects", test_instance_start },
		{ "--config-file: Firecracker's JSON description", test_config_file },
		{ "teardown", test_teardown },
		{ NULL, NULL },
	};

	return cu_run("api", tests);
}
