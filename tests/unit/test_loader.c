/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the plugin loader: the ABI gate and descriptor checks on
 * real .so files, the search path, libffi method calls, and filling a
 * plugin's cfg struct from config. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cunit_main.h"
#include "devices.h"
#include "loader.h"
#include "plan.h"

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
	/* Only the good variants (and none of the refused ones) are registered. */
	CU_ASSERT_EQUAL(reg.n, 2);
	CU_ASSERT_PTR_NOT_NULL(registry_find(&reg, CUB_KIND_DEVICE, "unit-needs-older"));
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

/* Each folder once, where it first comes: a name given twice, and the
 * build's devices folder named in CUBICLE_PLUGIN_PATH by another name. */
static void test_dirs_once(void)
{
	char *cli[] = { "/opt/a", "/opt/a" };
	char **d;
	unsigned n = 0;

	setenv("CUBICLE_PLUGIN_PATH", "/opt/a:" CUB_BUILD_DIR "/plugins/devices/.libs/.", 1);
	d = loader_dirs(cli, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	while (d[n])
		n++;
	CU_ASSERT_EQUAL_FATAL(n, 4);
	CU_ASSERT_STRING_EQUAL(d[0], "/opt/a");
	CU_ASSERT_STRING_EQUAL(d[1], CUB_BUILD_DIR "/plugins/devices/.libs/.");
	CU_ASSERT_PTR_NOT_NULL(strstr(d[2], "plugins/storage/.libs"));
	CU_ASSERT_PTR_NOT_NULL(strstr(d[3], "plugins/net/.libs"));
	loader_dirs_free(d);
	unsetenv("CUBICLE_PLUGIN_PATH");
}

static struct plan plan;

/* "dev = { ... };" as devices[0] of a config, planned with only p (and the
 * build's storage plugins) in the registry; the filled cfg is copied out
 * (its strings stay valid until the next fill). */
static int fill(struct plugin *p, const char *group_text, void *cfg, size_t len)
{
	static struct registry reg;
	char *dirs[] = { CUB_BUILD_DIR "/plugins/storage/.libs", NULL };
	struct plugin **v;
	char text[1024];
	const char *body = strchr(group_text, '{') + 1;
	int ret;

	plan_free(&plan);
	registry_free(&reg);
	if (registry_scan(&reg, dirs, NULL, NULL) || !(v = realloc(reg.p, (reg.n + 1) * sizeof(*v))))
		return -ENOMEM;
	reg.p = v;
	reg.p[reg.n++] = p;
	snprintf(text, sizeof(text), "devices = ( { %s id = \"u\"; %.*s } );",
		 strncmp(body, " type =", 7) ? "type = \"unit-good\";" : "",
		 (int)(strrchr(body, '}') - body), body);
	ret = plan_devices_text(&plan, text, "unit.cfg", "/srv/vm", &reg, err, sizeof(err));
	if (!ret)
		memcpy(cfg, plan.devs[0].cfg, len);
	reg.n--; /* p is the caller's */
	return ret;
}

static void test_fill_cfg(void)
{
	struct plugin *p;
	struct {
		bool flag;
		int64_t count;
		uint64_t big, size;
		const char *label;
		int colour;
		const char *image;
		int64_t level;
		const char *disk;
	} cfg;

	CU_ASSERT_EQUAL_FATAL(open_variant("unit_good", &p), 0);
	CU_ASSERT_EQUAL(fill(p, "dev = { type = \"unit-good\"; big = 5; };", &cfg, sizeof(cfg)), 0);
	CU_ASSERT_EQUAL(cfg.flag, false);
	CU_ASSERT_EQUAL(cfg.count, -3);
	CU_ASSERT_EQUAL(cfg.big, 5);
	CU_ASSERT_EQUAL(cfg.size, 64 * 1024);
	CU_ASSERT_STRING_EQUAL(cfg.label, "none");
	CU_ASSERT_EQUAL(cfg.colour, 1);

	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; flag = true; size = \"2M\"; colour = \"blue\"; label = \"x\"; };", &cfg, sizeof(cfg)), 0);
	CU_ASSERT_EQUAL(cfg.flag, true);
	CU_ASSERT_EQUAL(cfg.size, 2 << 20);
	CU_ASSERT_EQUAL(cfg.colour, 2);
	CU_ASSERT_STRING_EQUAL(cfg.label, "x");

	CU_ASSERT_EQUAL(fill(p, "dev = { };", &cfg, sizeof(cfg)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'big' is required"));
	CU_ASSERT_EQUAL(fill(p, "dev = {\n big = 1;\n colur = \"red\"; };", &cfg, sizeof(cfg)),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unit.cfg:3: unit-good[u]: unknown parameter 'colur'"));
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; colour = \"pink\"; };", &cfg, sizeof(cfg)),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "one of: red, green, blue"));
	CU_ASSERT_EQUAL(fill(p, "dev = { big = -1; };", &cfg, sizeof(cfg)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "must not be negative"));
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; flag = 1; };", &cfg, sizeof(cfg)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'flag' must be true or false"));
	/* `transport` is the virtio core's key, next to type and id. */
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; transport = \"mmio\"; };", &cfg, sizeof(cfg)), 0);
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; transport = \"isa\"; };", &cfg, sizeof(cfg)),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'transport' must be \"pci\" or \"mmio\""));
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; transport = 2; };", &cfg, sizeof(cfg)), -EINVAL);
	/* CUB_P_PATH under any name: ~, ${VAR}, relative to the config's folder */
	setenv("CUB_UNIT_DIR", "/data", 1);
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; image = \"disk.img\"; };", &cfg, sizeof(cfg)), 0);
	CU_ASSERT_STRING_EQUAL(cfg.image, "/srv/vm/disk.img");
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; image = \"${CUB_UNIT_DIR}/a\"; };", &cfg, sizeof(cfg)), 0);
	CU_ASSERT_STRING_EQUAL(cfg.image, "/data/a");
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; image = \"${CUB_UNIT_NOPE}/a\"; };", &cfg, sizeof(cfg)),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "CUB_UNIT_NOPE is not set"));
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; label = \"rel\"; };", &cfg, sizeof(cfg)), 0);
	CU_ASSERT_STRING_EQUAL(cfg.label, "rel"); /* a STR is never expanded */
	/* min/max from the table, with the range in the message */
	CU_ASSERT_EQUAL(cfg.level, 5);
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1;\n level = 11; };", &cfg, sizeof(cfg)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unit.cfg:2: unit-good[u]: 'level' is 11; expected 1 to 10"));
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; level = 0; };", &cfg, sizeof(cfg)), -EINVAL);
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; level = 10; };", &cfg, sizeof(cfg)), 0);
	/* values past 32 bits are kept whole, or refused with the range */
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 4294967297L; };", &cfg, sizeof(cfg)), 0);
	CU_ASSERT_EQUAL(cfg.big, 4294967297ULL);
	/* a nested backend group: absent is NULL, present is checked here */
	CU_ASSERT_PTR_NULL(cfg.disk);
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1;\n disk = { type = \"raw\";\n pathh = \"x\"; }; };",
			     &cfg, sizeof(cfg)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unit.cfg:3: raw[u.disk]: unknown parameter 'pathh'"));
	CU_ASSERT_EQUAL(fill(p, "dev = { big = 1; disk = { type = \"raw\"; path = \"d.img\"; }; };",
			     &cfg, sizeof(cfg)), 0);
	CU_ASSERT_STRING_EQUAL(cfg.disk, "raw");
	CU_ASSERT_STRING_EQUAL(*(const char *const *)plan.devs[0].backends[0].inst.cfg,
			       "/srv/vm/d.img");
	plan_free(&plan);
	loader_close(p);
}

static unsigned counter(struct plugin *p, const char *which)
{
	struct cub_reply r;

	CU_ASSERT_EQUAL(loader_call(p, which, NULL, &r, NULL, 0, err, sizeof(err)), 0);
	return (unsigned)strtoul(r.text, NULL, 10);
}

#define creates(p) counter(p, "creates")

/* A typo anywhere in the description, even two levels deep in the second
 * device, stops the plan before the first device's create runs. */
static void test_plan_before_create(void)
{
	static const char *const bad =
		"devices = ( { type = \"unit-good\"; big = 1; },\n"
		" { type = \"unit-good\"; big = 2; disk = { type = \"raw\";\n path = 7; }; } );";
	static const char *const good =
		"devices = ( { type = \"unit-good\"; big = 1; }, { type = \"unit-good\"; big = 2; } );";
	struct plugin *p;
	struct registry reg = { 0 };
	char *dirs[] = { CUB_BUILD_DIR "/plugins/storage/.libs", NULL };
	struct plugin **v;
	struct cub_inst **insts;
	unsigned n;

	CU_ASSERT_EQUAL_FATAL(open_variant("unit_good", &p), 0);
	CU_ASSERT_EQUAL_FATAL(registry_scan(&reg, dirs, NULL, NULL), 0);
	v = realloc(reg.p, (reg.n + 1) * sizeof(*v));
	CU_ASSERT_PTR_NOT_NULL_FATAL(v);
	reg.p = v;
	reg.p[reg.n++] = p;
	plan_free(&plan);
	CU_ASSERT_EQUAL(creates(p), 0);
	CU_ASSERT_EQUAL(plan_devices_text(&plan, bad, "unit.cfg", "/srv", &reg, err, sizeof(err)),
			-EINVAL);
	if (!strstr(err, "unit.cfg:3: raw[unit-good1.disk]: 'path' must be a path"))
		fprintf(stderr, "\n  got: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unit.cfg:3: raw[unit-good1.disk]: 'path' must be a path"));
	CU_ASSERT_EQUAL(plan.n_devs, 1); /* the first device was planned, not created */
	CU_ASSERT_EQUAL(creates(p), 0);
	plan_free(&plan);
	/* the same two devices, valid: both are created (the counter works) */
	CU_ASSERT_EQUAL_FATAL(plan_devices_text(&plan, good, "unit.cfg", "/srv", &reg, err,
						sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(devices_create_all(NULL, &plan, &insts, &n, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_EQUAL(creates(p), 2);
	CU_ASSERT_EQUAL(counter(p, "destroys"), 0);
	devices_destroy_all(insts, n);
	CU_ASSERT_EQUAL(counter(p, "destroys"), 2); /* the host calls destroy too */
	plan_free(&plan);
	reg.n--;
	registry_free(&reg);
	loader_close(p);
}

/* abi_needs: built against a newer minor, it loads where what it needs is. */
static void test_abi_needs(void)
{
	struct plugin *p;

	CU_ASSERT_EQUAL_FATAL(open_variant("unit_needs_older", &p), 0);
	CU_ASSERT_EQUAL(p->d->abi_minor, CUB_ABI_MINOR + 1);
	CU_ASSERT_EQUAL(loader_abi_needs(p->d), CUB_ABI_MINOR);
	CU_ASSERT_STRING_EQUAL(p->params[7].max, "10");
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
		{ "search folders: each once, by any name", test_dirs_once },
		{ "config to cfg struct", test_fill_cfg },
		{ "the plan is checked before any create", test_plan_before_create },
		{ "abi_needs lets a newer plugin load", test_abi_needs },
		{ NULL, NULL },
	};

	return cu_run("loader", tests);
}
