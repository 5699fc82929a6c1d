/* SPDX-License-Identifier: Apache-2.0 */
/* Unit test of the example "memdisk" storage backend on the fake host: the
 * built memdisk.so, called the way a disk device calls it. */
#include <errno.h>
#include <string.h>

#include <CUnit/Basic.h>
#include <cubicle/testing/fake_host.h>

static const struct cub_plugin *plug;
static void *dl;

static void test_io(void)
{
	const struct cub_storage_ops *o = plug->ops;
	const char *const kv[] = { "size", "1M", "block_size", "4096", NULL };
	char buf[4096], back[4096];
	struct iovec v = { buf, sizeof(buf) }, b = { back, sizeof(back) };
	struct cub_storage_info info;
	struct fake_host fh;
	void *cfg, *priv = NULL;

	fake_host_init(&fh);
	cfg = fake_cfg_new(plug, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	CU_ASSERT_EQUAL_FATAL(o->open(fake_inst(&fh), &fh.ops, cfg, false, &priv), 0);
	o->info(priv, &info);
	CU_ASSERT_EQUAL(info.size, 1 << 20);
	CU_ASSERT_EQUAL(info.block_size, 4096);
	CU_ASSERT(!info.read_only && info.can_discard && info.can_write_zeroes);

	memset(buf, 0x5a, sizeof(buf));
	CU_ASSERT_EQUAL(o->writev(priv, 8192, &v, 1), 4096);
	CU_ASSERT_EQUAL(o->readv(priv, 8192, &b, 1), 4096);
	CU_ASSERT(!memcmp(buf, back, sizeof(buf)));
	CU_ASSERT_EQUAL(o->flush(priv), 0);
	CU_ASSERT_EQUAL(o->write_zeroes(priv, 8192, 4096, false), 0);
	CU_ASSERT_EQUAL(o->readv(priv, 8192, &b, 1), 4096);
	CU_ASSERT_EQUAL(back[0], 0);

	/* The host does not bounds-check: the backend must. */
	CU_ASSERT_EQUAL(o->writev(priv, (1 << 20) - 512, &v, 1), -EINVAL);
	CU_ASSERT_EQUAL(o->readv(priv, (1 << 20) - 512, &b, 1), 512); /* short at the end */
	CU_ASSERT_EQUAL(o->readv(priv, (1 << 20) + 512, &b, 1), -EINVAL);
	CU_ASSERT_EQUAL(o->discard(priv, 1 << 20, 512), -EINVAL);
	o->close(priv);

	/* Opened read-only by the device. */
	CU_ASSERT_EQUAL_FATAL(o->open(fake_inst(&fh), &fh.ops, cfg, true, &priv), 0);
	o->info(priv, &info);
	CU_ASSERT(info.read_only && !info.can_discard);
	CU_ASSERT_EQUAL(o->writev(priv, 0, &v, 1), -EROFS);
	o->close(priv);
	fake_cfg_free(plug, cfg);
	fake_host_fini(&fh);
}

static void test_bad_cfg(void)
{
	const struct cub_storage_ops *o = plug->ops;
	const char *const kv[] = { "size", "1M", "block_size", "1000", NULL };
	struct fake_host fh;
	void *cfg, *priv = NULL;

	fake_host_init(&fh);
	cfg = fake_cfg_new(plug, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	CU_ASSERT_EQUAL(o->open(fake_inst(&fh), &fh.ops, cfg, false, &priv), -EINVAL);
	CU_ASSERT_EQUAL(fh.fail_calls, 1); /* the reason, said once through h->fail */
	CU_ASSERT(strstr(fh.fail_msg, "not a power of two") != NULL);
	fake_cfg_free(plug, cfg);
	fake_host_fini(&fh);
}

int main(void)
{
	CU_pSuite s;
	unsigned fails;

	plug = fake_plugin_open("memdisk", &dl);
	if (!plug)
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("memdisk", NULL, NULL);
	CU_add_test(s, "io", test_io);
	CU_add_test(s, "bad cfg", test_bad_cfg);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	fake_plugin_close(dl);
	return fails ? 1 : 0;
}
