/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the plugin loader: the ABI gate and descriptor checks on
 * real .so files, the search path, libffi method calls, and filling a
 * plugin's cfg struct from config. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "cunit_main.h"
#include "devices.h"
#include "loader.h"

#define PDIR CUB_BUILD_DIR "/tests/unit/plugins/.libs"
static char err[1024];

static int open_variant(const char *name, struct plugin **p)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s.so", PDIR, name);
	err[0] = '\0';
	return loader_open(path, p, err, sizeof(err));
}

static void expect_refused(const char *name, const char *what)
{
	struct plugin *p = (void *)1;

	CU_ASSERT_EQUAL(open_variant(name, &p), -EINVAL);
	CU_ASSERT_PTR_NULL(p);
	if (!strstr(err, what))
		fprintf(stderr, "\n  got: %s\n  want: %s\n", err, what);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, what));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, name)); /* names the file */
}

static void test_refusals(void)
{
	char junk[] = "/tmp/cubicle-junk-XXXXXX.so";
	int fd = mkstemps(junk, 3);
	struct plugin *p;

	expect_refused("unit_bad_abi", ", but this cubicle speaks ABI 1.");
	expect_refused("unit_newer_minor", "newer than this cubicle's");
	expect_refused("unit_no_symbol", "no 'cubicle_plugin' symbol");
	expect_refused("unit_bad_param", "param 'colour' of 'unit-good' lies outside");
	expect_refused("unit_bad_sig", "'q' is not one of");
	CU_ASSERT_EQUAL(write(fd, "hello", 5), 5);
	close(fd);
	CU_ASSERT_EQUAL(loader_open(junk, &p, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a loadable plugin"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, junk));
	unlink(junk);
	CU_ASSERT_EQUAL(loader_open("/nonexistent/x.so", &p, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/x.so"));
}

static void test_methods(void)
{
	struct plugin *p;
	struct cub_reply r;
	char *add[] = { "-5", "12" };
	char *echo[] = { "world" };
	char *fail_on[] = { "true", "7" };
	char *fail_off[] = { "false", "7" };
	char *bad[] = { "x", "1" };
	char *neg[] = { "1", "-1" };

	CU_ASSERT_EQUAL_FATAL(open_variant("unit_good", &p), 0);
	CU_ASSERT_STRING_EQUAL(p->d->name, "unit-good");
	CU_ASSERT_EQUAL(loader_call(p, "add", NULL, &r, add, 2, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(r.text, "7");
	CU_ASSERT_EQUAL(loader_call(p, "echo", "hello", &r, echo, 1, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(r.text, "hello|world");
	CU_ASSERT_EQUAL(loader_call(p, "fail", NULL, &r, fail_on, 2, err, sizeof(err)), -7);
	CU_ASSERT_EQUAL(loader_call(p, "fail", NULL, &r, fail_off, 2, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(loader_call(p, "nope", NULL, &r, NULL, 0, err, sizeof(err)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no method 'nope'"));
	CU_ASSERT_EQUAL(loader_call(p, "add", NULL, &r, add, 1, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "takes 2 arguments"));
	CU_ASSERT_EQUAL(loader_call(p, "add", NULL, &r, bad, 2, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(loader_call(p, "add", NULL, &r, neg, 2, err, sizeof(err)), -EINVAL);
	loader_close(p);
}

static void test_registry(void)
{
	char *dirs[] = { PDIR, "/nonexistent", NULL };
	struct registry reg = { 0 };

	CU_ASSERT_EQUAL(registry_scan(&reg, dirs, NULL, NULL), 0);
	/* Only the good variant (and none of the refused ones) is registered. */
	CU_ASSERT_EQUAL(reg.n, 1);
	CU_ASSERT_PTR_NOT_NULL(registry_find(&reg, CUB_KIND_DEVICE, "unit-good"));
	CU_ASSERT_PTR_NULL(registry_find(&reg, CUB_KIND_STORAGE, "unit-good"));
	registry_free(&reg);
}

static void count_warn(const char *msg, void *arg)
{
	(*(unsigned *)arg)++;
}

static void test_registry_warns(void)
{
	char *dirs[] = { PDIR, NULL };
	struct registry reg = { 0 };
	unsigned warned = 0;

	CU_ASSERT_EQUAL(registry_scan(&reg, dirs, count_warn, &warned), 0);
	CU_ASSERT_EQUAL(warned, 5); /* the five refused variants */
	registry_free(&reg);
}

static void test_dirs(void)
{
	char *cli[] = { "/opt/a", "/opt/b" };
	char **d;

	setenv("CUBICLE_PLUGIN_PATH", "/env/x:/env/y", 1);
	d = loader_dirs(cli, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_STRING_EQUAL(d[0], "/opt/a");
	CU_ASSERT_STRING_EQUAL(d[1], "/opt/b");
	CU_ASSERT_STRING_EQUAL(d[2], "/env/x");
	CU_ASSERT_STRING_EQUAL(d[3], "/env/y");
	/* This test runs from the build tree, so the build's plugins come next. */
	CU_ASSERT_PTR_NOT_NULL(strstr(d[4], "plugins/devices/.libs"));
	loader_dirs_free(d);
	unsetenv("CUBICLE_PLUGIN_PATH");
}

static int fill(struct plugin *p, const char *group_text, struct vm_config *c, void *cfg,
		char ***strs, unsigned *n)
{
	config_setting_t *g;

	config_init(&c->lc);
	c->path = "unit.cfg";
	if (!config_read_string(&c->lc, group_text))
		return -100;
	g = config_lookup(&c->lc, "dev");
	return devices_fill_cfg(p, c, g, "unit-good[u]", cfg, strs, n, err, sizeof(err));
}

static void test_fill_cfg(void)
{
	struct plugin *p;
	struct vm_config c;
	struct {
		bool flag;
		int64_t count;
		uint64_t big, size;
		const char *label;
		int colour;
	} cfg;
	char **strs = NULL;
	unsigned n = 0;

	CU_ASSERT_EQUAL_FATAL(open_variant("unit_good", &p), 0);
	memset(&c, 0, sizeof(c));
	CU_ASSERT_EQUAL(fill(p, "dev = { type = \"unit-good\"; big = 5; };", &c, &cfg, &strs, &n), 0);
	CU_ASSERT_EQUAL(cfg.flag, false);
	CU_ASSERT_EQUAL(cfg.count, -3);
	CU_ASSERT_EQUAL(cfg.big, 5);
	CU_ASSERT_EQUAL(cfg.size, 64 * 1024);
	CU_ASSERT_STRING_EQUAL(cfg.label, "none");
	CU_ASSERT_EQUAL(cfg.colour, 1);
	config_destroy(&c.lc);

	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; flag = true; size = \"2M\"; colour = \"blue\"; label = \"x\"; };",
			     &c, &cfg, &strs, &n), 0);
	CU_ASSERT_EQUAL(cfg.flag, true);
	CU_ASSERT_EQUAL(cfg.size, 2 << 20);
	CU_ASSERT_EQUAL(cfg.colour, 2);
	CU_ASSERT_STRING_EQUAL(cfg.label, "x");
	config_destroy(&c.lc);

	CU_ASSERT_EQUAL(fill(p, "dev = { };", &c, &cfg, &strs, &n), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'big' is required"));
	config_destroy(&c.lc);
	CU_ASSERT_EQUAL(fill(p, "dev = {\n big = 1;\n colur = \"red\"; };", &c, &cfg, &strs, &n),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unit.cfg:3: unit-good[u]: unknown parameter 'colur'"));
	config_destroy(&c.lc);
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; colour = \"pink\"; };", &c, &cfg, &strs, &n),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "one of: red, green, blue"));
	config_destroy(&c.lc);
	CU_ASSERT_EQUAL(fill(p, "dev = { big = -1; };", &c, &cfg, &strs, &n), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "must not be negative"));
	config_destroy(&c.lc);
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; flag = 1; };", &c, &cfg, &strs, &n), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'flag' must be true or false"));
	config_destroy(&c.lc);
	/* `transport` is the virtio core's key, next to type and id. */
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; transport = \"mmio\"; };", &c, &cfg, &strs, &n), 0);
	config_destroy(&c.lc);
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; transport = \"isa\"; };", &c, &cfg, &strs, &n),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'transport' must be \"pci\" or \"mmio\""));
	config_destroy(&c.lc);
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; transport = 2; };", &c, &cfg, &strs, &n), -EINVAL);
	config_destroy(&c.lc);
	for (unsigned i = 0; i < n; i++)
		free(strs[i]);
	free(strs);
	loader_close(p);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "refuses bad files with a message naming them", test_refusals },
		{ "methods through libffi", test_methods },
		{ "registry keeps only good plugins", test_registry },
		{ "registry reports refused files", test_registry_warns },
		{ "search path order", test_dirs },
		{ "config to cfg struct", test_fill_cfg },
		{ NULL, NULL },
	};

	return cu_run("loader", tests);
}
