/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the boot-timer plugin: its built .so driven through the fake host. */
#include <stdio.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "fake_host.h"
#include "loader.h"

typedef int method0_fn(void *priv, struct cub_reply *reply);

static const struct cub_plugin *plug;
static void *dl;

static void test_boot_timer(void)
{
	const struct cub_device_ops *ops = plug->ops;
	const struct cub_method *m = fake_method_find(plug, "elapsed_us");
	struct cub_reply reply = { { 0 }, 0 };
	struct fake_host fh;
	void *cfg, *priv = NULL;

	CU_ASSERT_STRING_EQUAL(plug->name, "boot-timer");
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_STRING_EQUAL(m->sig, "");
	fake_host_init(&fh);
	fh.clock_fixed = true;
	fh.clock_us = 0x100000000ull + 1234567; /* > 32 bits: both halves matter */
	cfg = fake_cfg_new(plug, NULL);
	CU_ASSERT_EQUAL_FATAL(fake_create(&fh, plug, cfg, &priv), 0);
	CU_ASSERT_EQUAL(fh.n_regions, 1);
	CU_ASSERT_STRING_EQUAL(fh.regions[0].class, "boot-timer");
	CU_ASSERT_EQUAL(fh.regions[0].len, 0x1000);

	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 0, 4), 0);
	fake_io_write(&fh, 0, 0, 1, 122); /* not the magic */
	fake_io_write(&fh, 0, 8, 1, 123); /* not offset 0 */
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 0, 4), 0);
	CU_ASSERT_EQUAL(fh.n_logs, 0);

	fake_io_write(&fh, 0, 0, 1, 123);
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_INFO,
				       "guest boot done after 4296201.9 ms (VMM cpu "), 1);
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 0, 4), 1234567);
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 4, 4), 1);
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 0, 8), 0x100000000ull + 1234567);
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 0x800, 4), 0);
	CU_ASSERT_EQUAL(((method0_fn *)(void *)m->fn)(priv, &reply), 0);
	CU_ASSERT_STRING_EQUAL(reply.text, "4296201863");

	/* After a reboot the guest reports again. */
	CU_ASSERT_EQUAL(ops->reset(priv), 0);
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 0, 4), 0);
	fh.clock_us = 5000000;
	fake_io_write(&fh, 0, 0, 1, 123);
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_INFO, "guest boot done after 5000.0 ms"), 1);
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 0, 4), 5000000);

	ops->destroy(priv);
	fake_cfg_free(plug, cfg);
	fake_host_fini(&fh);
}

/* The method through the core's loader and libffi. */
static void test_loader_method(void)
{
	char path[4096], err[256] = "";
	struct cub_reply reply;
	struct fake_host fh;
	struct plugin *lp;
	void *cfg, *priv = NULL;

	CU_ASSERT_EQUAL_FATAL(fake_plugin_path("boot_timer", path, sizeof(path)), 0);
	CU_ASSERT_EQUAL_FATAL(loader_open(path, &lp, err, sizeof(err)), 0);
	fake_host_init(&fh);
	fh.clock_fixed = true;
	fh.clock_us = 250000;
	cfg = fake_cfg_new(plug, NULL);
	CU_ASSERT_EQUAL_FATAL(fake_create(&fh, plug, cfg, &priv), 0);
	CU_ASSERT_EQUAL(loader_call(lp, "elapsed_us", priv, &reply, NULL, 0, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(reply.text, "0");
	fake_io_write(&fh, 0, 0, 4, 123);
	CU_ASSERT_EQUAL(loader_call(lp, "elapsed_us", priv, &reply, NULL, 0, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(reply.text, "250000");
	((const struct cub_device_ops *)plug->ops)->destroy(priv);
	fake_cfg_free(plug, cfg);
	fake_host_fini(&fh);
	loader_close(lp);
}

static int suite_init(void)
{
	plug = fake_plugin_open("boot_timer", &dl);
	return plug ? 0 : -1;
}

static int suite_clean(void)
{
	fake_plugin_close(dl);
	return 0;
}

int main(void)
{
	CU_pSuite s;
	unsigned fails;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("boot-timer", suite_init, suite_clean);
	if (s) {
		CU_add_test(s, "boot done, reads, method, reset", test_boot_timer);
		CU_add_test(s, "method through the loader", test_loader_method);
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
