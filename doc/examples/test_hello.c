/* SPDX-License-Identifier: Apache-2.0 */
/* Unit test of the example "hello" device on the fake host: the built
 * hello.so, no VM, no /dev/kvm. Run with CUBICLE_TEST_PLUGIN_DIR=. */
#include <errno.h>
#include <string.h>

#include <CUnit/Basic.h>
#include <cubicle/testing/fake_host.h>

typedef int greet_fn(void *priv, struct cub_reply *reply, const char *name);

static const struct cub_plugin *plug;
static void *dl;

static void test_registers(void)
{
	const struct cub_device_ops *ops = plug->ops;
	const char *const kv[] = { "greeting", "7", NULL };
	struct fake_host fh;
	void *cfg, *priv = NULL;

	fake_host_init(&fh);
	cfg = fake_cfg_new(plug, kv); /* defaults, then greeting = 7 */
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	CU_ASSERT_EQUAL_FATAL(fake_create(&fh, plug, cfg, &priv), 0);
	CU_ASSERT_EQUAL(fh.n_regions, 1);
	CU_ASSERT_STRING_EQUAL(fh.regions[0].class, "hello");
	CU_ASSERT_EQUAL(fh.regions[0].len, 8);
	CU_ASSERT(fake_log_has(&fh, "hello, world: greeting 7"));

	/* The guest's view, as a vCPU would see it. */
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 0, 4), 7);
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 4, 4), 0);
	fake_io_write(&fh, 0, 4, 4, 0xcafe);
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 4, 4), 0xcafe);
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 2, 2), 0); /* not a register */
	fake_io_write(&fh, 0, 0, 4, 1);                 /* read-only: logged, ignored */
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 0, 4), 7);
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_WARN, "read-only greeting"), 1);

	ops->destroy(priv);
	fake_cfg_free(plug, cfg);
	fake_host_fini(&fh);
}

static void test_method(void)
{
	const struct cub_method *m = fake_method_find(plug, "greet");
	struct cub_reply reply = { { 0 }, 0 };
	struct fake_host fh;
	void *cfg, *priv = NULL;

	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_STRING_EQUAL(m->sig, "s");
	fake_host_init(&fh);
	cfg = fake_cfg_new(plug, NULL);
	CU_ASSERT_EQUAL_FATAL(fake_create(&fh, plug, cfg, &priv), 0);
	CU_ASSERT_EQUAL(((greet_fn *)(void *)m->fn)(priv, &reply, "ann"), 0);
	CU_ASSERT_STRING_EQUAL(reply.text, "hello, ann: greeting 42, scratch 0x0");
	CU_ASSERT_EQUAL(reply.len, strlen(reply.text));
	CU_ASSERT_EQUAL(((greet_fn *)(void *)m->fn)(priv, &reply, ""), -EINVAL);
	((const struct cub_device_ops *)plug->ops)->destroy(priv);
	fake_cfg_free(plug, cfg);
	fake_host_fini(&fh);
}

static void test_no_room(void)
{
	struct fake_host fh;
	void *cfg, *priv = NULL;

	fake_host_init(&fh);
	fh.region_add_err = -ENOSPC; /* knob: the arch layout is full */
	cfg = fake_cfg_new(plug, NULL);
	CU_ASSERT_EQUAL(fake_create(&fh, plug, cfg, &priv), -ENOSPC);
	CU_ASSERT_EQUAL(fh.n_regions, 0);
	fake_cfg_free(plug, cfg); /* destroy is not called after a failed create */
	fake_host_fini(&fh);
}

int main(void)
{
	CU_pSuite s;
	unsigned fails;

	plug = fake_plugin_open("hello", &dl); /* $CUBICLE_TEST_PLUGIN_DIR/hello.so */
	if (!plug)
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("hello", NULL, NULL);
	CU_add_test(s, "registers", test_registers);
	CU_add_test(s, "method", test_method);
	CU_add_test(s, "no room", test_no_room);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	fake_plugin_close(dl);
	return fails ? 1 : 0;
}
