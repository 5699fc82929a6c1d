/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the testdev plugin: its built .so driven through the fake host. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "fake_host.h"
#include "loader.h"

enum { EXIT = 0x0, SCRATCH = 0x4, PUTC = 0x8, MAGIC = 0xc };

typedef int method0_fn(void *priv, struct cub_reply *reply);
typedef int method_u_fn(void *priv, struct cub_reply *reply, uint32_t v);

static const struct cub_plugin *plug;
static void *dl;
static struct fake_host fh;
static void *cfg, *priv;

static const struct cub_device_ops *ops(void)
{
	return plug->ops;
}

static void start(const char *const *kv)
{
	int err;

	fake_host_init(&fh);
	priv = NULL;
	cfg = fake_cfg_new(plug, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	err = fake_create(&fh, plug, cfg, &priv);
	CU_ASSERT_EQUAL_FATAL(err, 0);
	CU_ASSERT_EQUAL_FATAL(fh.n_regions, 1);
}

static void stop(void)
{
	if (priv)
		ops()->destroy(priv);
	priv = NULL;
	fake_cfg_free(plug, cfg);
	cfg = NULL;
	fake_host_fini(&fh);
}

static uint32_t rd(unsigned off, uint32_t len)
{
	return (uint32_t)fake_io_read(&fh, 0, off, len);
}

static void wr(unsigned off, uint32_t len, uint32_t v)
{
	fake_io_write(&fh, 0, off, len, v);
}

static void puts_guest(const char *s)
{
	for (; *s; s++)
		wr(PUTC, 1, (uint8_t)*s);
}

static void test_descriptor_region(void)
{
	static const char *const mmio[] = { "bus", "mmio", NULL };
	static const char *const pio[] = { "bus", "pio", NULL };

	CU_ASSERT_EQUAL(plug->kind, CUB_KIND_DEVICE);
	CU_ASSERT_STRING_EQUAL(plug->name, "testdev");
	CU_ASSERT_EQUAL(plug->n_params, 2);
	CU_ASSERT_STRING_EQUAL(plug->params[0].def, "any");
	start(NULL);
	CU_ASSERT_STRING_EQUAL(fh.regions[0].class, "testdev");
	CU_ASSERT_EQUAL(fh.regions[0].len, 16);
	CU_ASSERT_EQUAL(fh.regions[0].want, CUB_BUS_ANY);
	stop();
	start(mmio);
	CU_ASSERT_EQUAL(fh.regions[0].want, CUB_BUS_MMIO);
	CU_ASSERT_EQUAL(fh.regions[0].bus, CUB_BUS_MMIO);
	stop();
	start(pio);
	CU_ASSERT_EQUAL(fh.regions[0].want, CUB_BUS_PIO);
	stop();
}

static void test_region_add_fails(void)
{
	fake_host_init(&fh);
	fh.region_add_err = -EBUSY;
	cfg = fake_cfg_new(plug, NULL);
	CU_ASSERT_EQUAL(fake_create(&fh, plug, cfg, &priv), -EBUSY);
	priv = NULL;
	stop();
}

static void test_magic(void)
{
	start(NULL);
	CU_ASSERT_EQUAL(rd(MAGIC, 4), 0x49425543);
	CU_ASSERT_EQUAL(rd(MAGIC, 1), 'C');
	CU_ASSERT_EQUAL(rd(MAGIC + 1, 1), 'U');
	CU_ASSERT_EQUAL(rd(MAGIC + 2, 2), 0x4942); /* "BI" */
	wr(MAGIC, 4, 0); /* ignored */
	CU_ASSERT_EQUAL(rd(MAGIC, 4), 0x49425543);
	CU_ASSERT_EQUAL(fh.exit_calls, 0);
	stop();
}

static void test_scratch(void)
{
	start(NULL);
	CU_ASSERT_EQUAL(rd(SCRATCH, 4), 0);
	wr(SCRATCH, 4, 0xdeadbeef);
	CU_ASSERT_EQUAL(rd(SCRATCH, 4), 0xdeadbeef);
	CU_ASSERT_EQUAL(rd(SCRATCH, 2), 0xbeef);
	CU_ASSERT_EQUAL(rd(SCRATCH + 2, 2), 0xdead);
	CU_ASSERT_EQUAL(rd(SCRATCH + 3, 1), 0xde);
	wr(SCRATCH + 2, 2, 0x1234);
	CU_ASSERT_EQUAL(rd(SCRATCH, 4), 0x1234beef);
	wr(SCRATCH + 1, 1, 0x00);
	CU_ASSERT_EQUAL(rd(SCRATCH, 4), 0x123400ef);
	CU_ASSERT_EQUAL(ops()->reset(priv), 0);
	CU_ASSERT_EQUAL(rd(SCRATCH, 4), 0);
	stop();
}

static void test_exit(void)
{
	start(NULL);
	wr(EXIT, 4, 0x1234);
	CU_ASSERT_EQUAL(fh.exit_calls, 1);
	CU_ASSERT_EQUAL(fh.exit_status, 0x34);
	CU_ASSERT_TRUE(fake_log_has(&fh, "guest exit code 52"));
	stop();
	start(NULL);
	wr(EXIT, 1, 0);
	CU_ASSERT_EQUAL(fh.exit_calls, 1);
	CU_ASSERT_EQUAL(fh.exit_status, 0);
	CU_ASSERT_TRUE(fake_log_has(&fh, "guest exit code 0"));
	stop();
}

static void test_putc(void)
{
	char long_line[200];

	start(NULL);
	puts_guest("hello\r\n");
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_INFO, "guest: hello"), 1);
	CU_ASSERT_FALSE(fake_log_has(&fh, "\r"));
	/* 32-bit writes use the low byte. */
	wr(PUTC, 4, 0x4100 | 'o');
	wr(PUTC, 4, 'k');
	wr(PUTC, 2, '\n');
	CU_ASSERT_TRUE(fake_log_has(&fh, "guest: ok"));
	/* Control characters do not reach the host log. */
	puts_guest("\033[2Jx\n");
	CU_ASSERT_TRUE(fake_log_has(&fh, "guest: .[2Jx"));
	/* 120 characters flush without a newline. */
	memset(long_line, 'a', 130);
	long_line[130] = '\0';
	puts_guest(long_line);
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_INFO, "guest: aaaa"), 1);
	puts_guest("\n");
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_INFO, "guest: aaaa"), 2);
	/* A partial line is logged at destroy. */
	puts_guest("bye");
	CU_ASSERT_FALSE(fake_log_has(&fh, "guest: bye"));
	ops()->destroy(priv);
	priv = NULL;
	CU_ASSERT_TRUE(fake_log_has(&fh, "guest: bye"));
	stop();
}

static void test_bad_access(void)
{
	start(NULL);
	wr(SCRATCH, 4, 0x11223344);
	wr(SCRATCH + 1, 2, 0xffff); /* misaligned */
	wr(SCRATCH, 8, ~0u);        /* too wide */
	wr(SCRATCH, 3, ~0u);        /* odd width */
	CU_ASSERT_EQUAL(rd(SCRATCH, 4), 0x11223344);
	CU_ASSERT_EQUAL(rd(SCRATCH + 1, 2), 0);
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, SCRATCH, 8), 0);
	wr(EXIT + 1, 1, 3); /* inside EXIT: ignored */
	CU_ASSERT_EQUAL(fh.exit_calls, 0);
	wr(0x10, 4, 1); /* past the end */
	CU_ASSERT_EQUAL(rd(0x10, 4), 0);
	CU_ASSERT(fake_log_count(&fh, CUB_LOG_WARN, "ignored") >= 5);
	stop();
}

static void test_methods(void)
{
	const struct cub_method *set = fake_method_find(plug, "scratch");
	const struct cub_method *get = fake_method_find(plug, "get_scratch");
	struct cub_reply reply = { { 0 }, 0 };

	CU_ASSERT_PTR_NOT_NULL_FATAL(set);
	CU_ASSERT_PTR_NOT_NULL_FATAL(get);
	CU_ASSERT_STRING_EQUAL(set->sig, "u");
	CU_ASSERT_STRING_EQUAL(get->sig, "");
	start(NULL);
	CU_ASSERT_EQUAL(((method_u_fn *)(void *)set->fn)(priv, &reply, 4000000000u), 0);
	CU_ASSERT_EQUAL(rd(SCRATCH, 4), 4000000000u);
	wr(SCRATCH, 4, 77);
	CU_ASSERT_EQUAL(((method0_fn *)(void *)get->fn)(priv, &reply), 0);
	CU_ASSERT_STRING_EQUAL(reply.text, "77");
	CU_ASSERT_EQUAL(reply.len, 2);
	stop();
}

/* Through the core's loader: the ABI gate, then libffi with a 'u' argument. */
static void test_loader_libffi(void)
{
	char path[4096], err[256] = "";
	char *arg_big[] = { "4000000000" }, *arg_neg[] = { "-1" };
	struct cub_reply reply;
	struct plugin *lp;

	CU_ASSERT_EQUAL_FATAL(fake_plugin_path("testdev", path, sizeof(path)), 0);
	CU_ASSERT_EQUAL_FATAL(loader_open(path, &lp, err, sizeof(err)), 0);
	start(NULL);
	CU_ASSERT_EQUAL(loader_call(lp, "scratch", priv, &reply, arg_big, 1, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(rd(SCRATCH, 4), 4000000000u);
	CU_ASSERT_EQUAL(loader_call(lp, "get_scratch", priv, &reply, NULL, 0, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(reply.text, "4000000000");
	CU_ASSERT_EQUAL(loader_call(lp, "scratch", priv, &reply, arg_neg, 1, err, sizeof(err)),
			-EINVAL);
	CU_ASSERT_EQUAL(loader_call(lp, "scratch", priv, &reply, NULL, 0, err, sizeof(err)),
			-EINVAL);
	CU_ASSERT_EQUAL(rd(SCRATCH, 4), 4000000000u);
	stop();
	loader_close(lp);
}

/* A hostile guest: random widths, offsets and values must not crash or hang. */
static void test_random_accesses(void)
{
	static const uint32_t lens[] = { 1, 2, 3, 4, 8 };
	unsigned seed = 4321;

	start(NULL);
	for (int i = 0; i < 100000; i++) {
		uint32_t len = lens[rand_r(&seed) % 5];
		uint64_t off = (uint64_t)(rand_r(&seed) % 20);

		if (rand_r(&seed) & 1)
			fake_io_write(&fh, 0, off, len, (uint64_t)rand_r(&seed));
		else
			fake_io_read(&fh, 0, off, len);
	}
	CU_ASSERT_EQUAL(rd(MAGIC, 4), 0x49425543);
	stop();
}

static int suite_init(void)
{
	plug = fake_plugin_open("testdev", &dl);
	return plug ? 0 : -1;
}

static int suite_clean(void)
{
	fake_plugin_close(dl);
	return 0;
}

int main(void)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{ "descriptor and region", test_descriptor_region },
		{ "region_add failure", test_region_add_fails },
		{ "magic", test_magic },
		{ "scratch", test_scratch },
		{ "exit", test_exit },
		{ "putc", test_putc },
		{ "bad accesses", test_bad_access },
		{ "control methods", test_methods },
		{ "loader gate and libffi methods", test_loader_libffi },
		{ "random guest accesses", test_random_accesses },
	};
	CU_pSuite s;
	unsigned fails;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("testdev", suite_init, suite_clean);
	for (size_t i = 0; s && i < CUB_ARRAY_SIZE(tests); i++)
		CU_add_test(s, tests[i].name, tests[i].fn);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
