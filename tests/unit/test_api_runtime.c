/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the control API on a VM (api_dispatch, no socket): a unit plugin's methods with typed arguments, a config file's vsock, rate limiters, metrics and logs, snapshots. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_support.h"
#include "cubicle-build.h"
#include "cunit_main.h"
#include "devices.h"
#include "loader.h"
#include "log.h"
#include "plan.h"
#include "ratelimit.h"

#define PDIR CUB_BUILD_DIR "/tests/unit/plugins/.libs"

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

int main(void)
{
	static const struct cu_test tests[] = {
		{ "a unit plugin's methods through the API", test_methods },
		{ "GET /vm/config: the vsock of a VM from a config file", test_config_vsock },
		{ "PATCH /drives/ID: a running drive's rate limiter", test_patch_rate_limiter },
		{ "GET /metrics: Prometheus text", test_metrics },
		{ "PUT /logger, PUT /metrics, FlushMetrics", test_sinks },
		{ "snapshot endpoints: folders, refusals, figures", test_snapshots },
		{ NULL, NULL },
	};
	int ret = cu_run("api: a VM's endpoints", tests);

	test_teardown(); /* as test_api.c's last test does */
	return ret;
}
