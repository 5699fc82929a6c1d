/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the config model: schema errors with file:line, overrides,
 * path expansion and sizes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "arch.h"
#include "cunit_main.h"
#include "loader.h"
#include "params.h"
#include "plan.h"
#include "size.h"

static char dir[] = "/tmp/cubicle-test-config-XXXXXX";
static char cfgpath[256];
static char err[1024];
static struct registry reg;

/* Write text as the config (with a real kernel file beside it) and plan it. */
static int load(struct plan *c, const char *text, char *const *sets, unsigned n)
{
	FILE *f = fopen(cfgpath, "w");

	fputs(text, f);
	fclose(f);
	err[0] = '\0';
	memset(c, 0, sizeof(*c));
	return plan_load(c, cfgpath, sets, n, &reg, err, sizeof(err));
}

#define KERNEL_OK "boot = { kernel = \"vmlinuz\"; };\n"

static void expect_err(const char *text, const char *line, const char *what);

static void test_minimal(void)
{
	struct plan c;

	CU_ASSERT_EQUAL_FATAL(load(&c, KERNEL_OK, NULL, 0), 0);
	CU_ASSERT_EQUAL(c.vcpus, 1);
	CU_ASSERT_EQUAL(c.memory_mib, 256);
	CU_ASSERT_STRING_EQUAL(c.boot.cmdline, "");
	CU_ASSERT_PTR_NULL(c.boot.initrd);
	CU_ASSERT_EQUAL(c.boot.format, BOOT_AUTO);
	/* Relative paths are taken against the config file's folder. */
	CU_ASSERT_PTR_NOT_NULL(strstr(c.boot.kernel, dir));
	CU_ASSERT_EQUAL(c.n_devs, 0);
	CU_ASSERT_FALSE(c.no_pit); /* a PIT unless asked: stock Linux calibrates with it */
	plan_free(&c);
	CU_ASSERT_EQUAL_FATAL(load(&c, "machine = { pit = false; };\n" KERNEL_OK, NULL, 0), 0);
	CU_ASSERT_TRUE(c.no_pit);
	CU_ASSERT_FALSE(c.split_irqchip);
	plan_free(&c);
}

/* machine.irqchip: KVM's by default; "split" has no PIT unless one is
 * asked for, which is refused (KVM's PIT needs its PIC and IOAPIC). */
static void test_irqchip(void)
{
	char *split[] = { "machine.irqchip=split" };
	struct plan c;

	CU_ASSERT_EQUAL_FATAL(load(&c, "machine = { irqchip = \"kernel\"; };\n" KERNEL_OK, NULL, 0), 0);
	CU_ASSERT_FALSE(c.split_irqchip);
	CU_ASSERT_FALSE(c.no_pit);
	plan_free(&c);
	expect_err(KERNEL_OK "machine = { irqchip = \"userspace\"; };\n", ":2:",
		   "'machine.irqchip' is \"userspace\"; expected one of: kernel, split");
	expect_err(KERNEL_OK "machine = {\n irqchip = \"split\";\n pit = true;\n};\n", ":4:",
		   "'machine.pit' is true with machine.irqchip = \"split\"");
	expect_err(KERNEL_OK "machine = { irqchip = 1; };\n", ":2:", "machine.irqchip");
	if (strcmp(arch_name, "x86_64")) { /* arm64: its GIC is always KVM's */
		expect_err("machine = { irqchip = \"split\"; };\n" KERNEL_OK, "config.cfg",
			   "machine.irqchip = \"split\" is x86-only");
		return;
	}
	CU_ASSERT_EQUAL_FATAL(load(&c, "machine = { irqchip = \"split\"; };\n" KERNEL_OK, NULL, 0), 0);
	CU_ASSERT_TRUE(c.split_irqchip);
	CU_ASSERT_TRUE(c.no_pit);
	plan_free(&c);
	CU_ASSERT_EQUAL_FATAL(load(&c, "machine = { irqchip = \"split\"; pit = false; };\n" KERNEL_OK,
				   NULL, 0), 0);
	CU_ASSERT_TRUE(c.split_irqchip);
	plan_free(&c);
	CU_ASSERT_EQUAL_FATAL(load(&c, KERNEL_OK, split, 1), 0);
	CU_ASSERT_TRUE(c.split_irqchip);
	plan_free(&c);
}

/* machine.thp: on for a kernel, off for a flat payload, as said when said. */
static void test_thp(void)
{
	static const struct {
		const char *text;
		bool thp;
	} cases[] = {
		{ KERNEL_OK, true },
		{ "boot = { kernel = \"vmlinuz\"; format = \"flat\"; };\n", false },
		{ "machine = { thp = true; };\nboot = { kernel = \"vmlinuz\"; format = \"flat\"; };\n", true },
		{ "machine = { thp = false; };\n" KERNEL_OK, false },
	};
	struct plan c;

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CU_ASSERT_EQUAL_FATAL(load(&c, cases[i].text, NULL, 0), 0);
		CU_ASSERT_EQUAL(c.thp, cases[i].thp);
		plan_free(&c);
	}
	expect_err(KERNEL_OK "machine = { thp = 1; };\n", ":2:", "machine.thp");
}

static void expect_err(const char *text, const char *line, const char *what)
{
	struct plan c;

	CU_ASSERT_EQUAL(load(&c, text, NULL, 0), -EINVAL);
	if (!strstr(err, line) || !strstr(err, what))
		fprintf(stderr, "\n  got: %s\n  want: %s ... %s\n", err, line, what);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, line));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, what));
	plan_free(&c);
}

static void test_errors(void)
{
	expect_err(KERNEL_OK "machine = {\n vcpus = 2;\n vcpu = 4;\n};\n", "config.cfg:4:",
		   "unknown key 'machine.vcpu'");
	expect_err(KERNEL_OK "machine = { vcpus = \"two\"; };\n", "config.cfg:2:",
		   "'machine.vcpus' must be an integer, not a string");
	expect_err(KERNEL_OK "machine = { vcpus = 0; };\n", ":2:", "expected 1 to 64");
	expect_err(KERNEL_OK "machine = { vcpus = 65; };\n", ":2:", "expected 1 to 64");
	expect_err(KERNEL_OK "machine = { memory_mib = 0; };\n", ":2:", "memory_mib");
	expect_err(KERNEL_OK "machine = { pit = 0; };\n", ":2:", "machine.pit");
	expect_err(KERNEL_OK "colour = \"red\";\n", ":2:", "unknown key 'colour'");
	expect_err("machine = { vcpus = 1; };\n", "config.cfg", "no 'boot' group");
	expect_err("boot = { cmdline = \"x\"; };\n", ":1:", "'boot.kernel' is required");
	expect_err("boot = {\n kernel = \"missing\";\n};\n", ":2:", "cannot read");
	expect_err(KERNEL_OK "log_level = \"loud\";\n", ":2:", "expected err, warn, info or debug");
	expect_err("boot = { kernel = \"vmlinuz\"; format = \"coff\"; };\n", ":1:",
		   "expected one of: auto, bzimage, elf, flat");
	expect_err("boot = { kernel = \"vmlinuz\"; mode = \"long\"; };\n", ":1:",
		   "only applies to format = \"flat\"");
	expect_err(KERNEL_OK "machine = { vcpus = = 1; };\n", "config.cfg:2:", "syntax error");
	expect_err(KERNEL_OK "devices = ( { id = \"x\"; } );\n", ":2:", "needs type");
	expect_err(KERNEL_OK "devices = ( { type = \"boot-timer\"; id = \"x\"; },\n { type = \"boot-timer\"; id = \"x\"; } );\n",
		   ":3:", "used twice");
	expect_err(KERNEL_OK "devices = ( { type = \"boot-timer\"; id = \"x.y\"; } );\n", ":2:",
		   "without spaces, dots or brackets");
	expect_err(KERNEL_OK "devices = ( { type = \"nope\"; } );\n", ":2:",
		   "no device plugin named 'nope'");
	/* integers past 32 bits are not wrapped (libconfig 1.5 would, without an L) */
	expect_err(KERNEL_OK "machine = { memory_mib = 4294967297L; };\n", ":2:",
		   "'machine.memory_mib' is 4294967297; expected 1 to 1048576");
	expect_err(KERNEL_OK "machine = { memory_mib = 4294967297; };\n", ":2:",
		   "'machine.memory_mib' is 4294967297; expected 1 to 1048576");
	expect_err(KERNEL_OK "machine = { memory_mib = 0x100000001; };\n", ":2:",
		   "'machine.memory_mib' is 4294967297; expected 1 to 1048576");
	expect_err(KERNEL_OK "machine = { vcpus = -4294967295; };\n", ":2:",
		   "'machine.vcpus' is -4294967295; expected 1 to 64");
	expect_err(KERNEL_OK "# 99999999999999999999 in a comment is fine\n"
		   "machine = { memory_mib = 99999999999999999999; };\n", "config.cfg:3:",
		   "the integer 99999999999999999999 does not fit in 64 bits");
	expect_err("boot = { kernel = \"/dev/null\"; };\n", ":1:", "not a regular file");
	expect_err("boot = { kernel = \"${CUBICLE_SURELY_UNSET_VAR}/k\"; };\n", ":1:",
		   "CUBICLE_SURELY_UNSET_VAR is not set");
}

/* api = { socket; id; paths; }: relative to the config's folder. */
static void test_api_group(void)
{
	struct plan c;

	CU_ASSERT_EQUAL_FATAL(load(&c, KERNEL_OK "api = { socket = \"vm.sock\"; id = \"vm-1\"; };\n",
				   NULL, 0), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c.api_socket);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.api_socket, dir));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.api_socket, "/vm.sock"));
	CU_ASSERT_STRING_EQUAL(c.api_id, "vm-1");
	plan_free(&c);
	CU_ASSERT_EQUAL_FATAL(load(&c, KERNEL_OK "api = { socket = \"/run/x.sock\"; };\n", NULL, 0), 0);
	CU_ASSERT_STRING_EQUAL(c.api_socket, "/run/x.sock");
	CU_ASSERT_PTR_NULL(c.api_id);
	plan_free(&c);
	CU_ASSERT_EQUAL_FATAL(load(&c, KERNEL_OK, NULL, 0), 0);
	CU_ASSERT_PTR_NULL(c.api_socket);
	plan_free(&c);
	/* api.paths: ':'-joined folders, relative ones the file's */
	CU_ASSERT_EQUAL_FATAL(load(&c, KERNEL_OK "api = { paths = \"/srv/a:snaps\"; };\n", NULL, 0), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c.api_paths);
	CU_ASSERT_NSTRING_EQUAL(c.api_paths, "/srv/a:", 7);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.api_paths + 7, dir));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.api_paths, "/snaps"));
	CU_ASSERT_PTR_NULL(strchr(c.api_paths + 7, ':'));
	plan_free(&c);
	expect_err(KERNEL_OK "api = { paths = \"/a::/b\"; };\n", ":2:",
		   "'api.paths' is \"/a::/b\"; expected folders separated by ':'");
	expect_err(KERNEL_OK "api = {\n sock = \"x\";\n};\n", "config.cfg:3:",
		   "unknown key 'api.sock'; expected one of: socket, id, paths");
	expect_err(KERNEL_OK "api = { socket = \"\"; };\n", ":2:", "'api.socket' is empty");
	expect_err(KERNEL_OK "api = { id = \"a b\"; };\n", ":2:",
		   "'api.id' is \"a b\"; expected 1 to 64 letters");
	expect_err(KERNEL_OK "api = \"x\";\n", ":2:", "'api' must be a group");
}

static void test_missing_file(void)
{
	struct plan c;

	memset(&c, 0, sizeof(c));
	CU_ASSERT_EQUAL(plan_load(&c, "/nonexistent/vm.cfg", NULL, 0, &reg, err, sizeof(err)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/vm.cfg: cannot open config"));
	plan_free(&c);
}

/* A restore's plan (snap_plan sets restoring): the boot files are named,
 * not looked at, so a jailed restore (which has them not) and a restore
 * after the kernel was replaced both work; a run still needs them. */
static void test_restoring(void)
{
	static const char text[] = "boot = { kernel = \"gone\"; initrd = \"/nonexistent/initrd\"; };\n";
	FILE *f = fopen(cfgpath, "w");
	struct plan c;
	char want[300];

	CU_ASSERT_FATAL(f != NULL);
	fputs(text, f);
	fclose(f);
	memset(&c, 0, sizeof(c));
	CU_ASSERT_EQUAL(plan_load(&c, cfgpath, NULL, 0, &reg, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot read"));
	plan_free(&c);
	memset(&c, 0, sizeof(c));
	c.restoring = true;
	CU_ASSERT_EQUAL(plan_load(&c, cfgpath, NULL, 0, &reg, err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "%s/gone", dir);
	CU_ASSERT_STRING_EQUAL(c.boot.kernel ? c.boot.kernel : "", want);
	CU_ASSERT_STRING_EQUAL(c.boot.initrd ? c.boot.initrd : "", "/nonexistent/initrd");
	plan_free(&c);
}

static void test_overrides(void)
{
	char *sets[] = { "machine.vcpus=4", "boot.cmdline=console=ttyS0 quiet",
			 "machine.memory_mib=512", "devices.com1.console=file",
			 "devices.com1.path=/tmp/x" };
	char *bad_type[] = { "machine.vcpus=lots" };
	char *bad_form[] = { "machine.vcpus" };
	char *bad_range[] = { "machine.vcpus=100" };
	struct plan c;
	const char *s;

	CU_ASSERT_EQUAL_FATAL(load(&c, KERNEL_OK "machine = { vcpus = 1; };\n"
				  "devices = ( { type = \"serial8250\"; id = \"com1\"; } );\n",
				  sets, 5), 0);
	CU_ASSERT_EQUAL(c.vcpus, 4);
	CU_ASSERT_EQUAL(c.memory_mib, 512);
	CU_ASSERT_STRING_EQUAL(c.boot.cmdline, "console=ttyS0 quiet");
	CU_ASSERT_EQUAL_FATAL(c.n_devs, 1);
	plan_free(&c);
	{ /* the tree the plan read: --set values are text the reader types */
		struct arena ar = { 0 };
		struct cnode *root, *d;

		CU_ASSERT_EQUAL_FATAL(config_load_file(&ar, cfgpath, sets, 5, &root, err, sizeof(err)), 0);
		d = cnode_get(root, "devices")->kids[0];
		CU_ASSERT_EQUAL(cnode_get(d, "console")->type, CN_TEXT);
		CU_ASSERT_STRING_EQUAL(cnode_get(d, "console")->s, "file");
		CU_ASSERT_STRING_EQUAL(cnode_get(d, "console")->where, "--set devices.com1.console=file");
		s = cnode_get(d, "path")->s;
		CU_ASSERT_STRING_EQUAL(s, "/tmp/x");
		arena_free(&ar);
	}
	/* a nested group, an unknown id, and a value past 64 bits */
	{
		char *nested[] = { "devices.com1.nope.deep=1" };
		char *noid[] = { "devices.com9.console=file" };
		char *huge[] = { "machine.memory_mib=99999999999999999999" };

		CU_ASSERT_EQUAL(load(&c, KERNEL_OK "devices = ( { type = \"serial8250\"; id = \"com1\"; } );\n",
				     nested, 1), -EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "--set devices.com1.nope.deep=1: serial8250[com1]: unknown parameter 'nope'"));
		plan_free(&c);
		CU_ASSERT_EQUAL(load(&c, KERNEL_OK "devices = ( { type = \"serial8250\"; id = \"com1\"; } );\n",
				     noid, 1), -EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "no device with id 'com9'; the ids are: com1"));
		plan_free(&c);
		CU_ASSERT_EQUAL(load(&c, KERNEL_OK, huge, 1), -EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "must be an integer within 64 bits"));
		plan_free(&c);
	}

	CU_ASSERT_EQUAL(load(&c, KERNEL_OK "machine = { vcpus = 1; };\n", bad_type, 1), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "--set machine.vcpus=lots"));
	plan_free(&c);
	CU_ASSERT_EQUAL(load(&c, KERNEL_OK, bad_form, 1), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "expected PATH=VALUE"));
	plan_free(&c);
	/* A range error on an overridden value names the option, not a line. */
	CU_ASSERT_EQUAL(load(&c, KERNEL_OK "machine = { vcpus = 1; };\n", bad_range, 1), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "--set machine.vcpus=100"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "expected 1 to 64"));
	plan_free(&c);
}

static void test_expand(void)
{
	struct arena ar = { 0 };
	char *p;

	setenv("HOME", "/home/tester", 1);
	setenv("CUB_T", "abc", 1);
	p = params_expand_path(&ar, "~/k", "/etc", err, sizeof(err));
	CU_ASSERT_STRING_EQUAL(p, "/home/tester/k");
	p = params_expand_path(&ar, "${CUB_T}/x/${CUB_T}", "/etc", err, sizeof(err));
	CU_ASSERT_STRING_EQUAL(p, "abc/x/abc");
	p = params_expand_path(&ar, "rel/k", "/etc/vms", err, sizeof(err));
	CU_ASSERT_STRING_EQUAL(p, "/etc/vms/rel/k");
	p = params_expand_path(&ar, "/abs", "/etc", err, sizeof(err));
	CU_ASSERT_STRING_EQUAL(p, "/abs");
	CU_ASSERT_PTR_NULL(params_expand_path(&ar, "${CUB_T", "/etc", err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "malformed"));
	(void)p;
	arena_free(&ar);
}

static void test_sizes(void)
{
	uint64_t v;

	CU_ASSERT_EQUAL(size_parse("4096", &v), 0);
	CU_ASSERT_EQUAL(v, 4096);
	CU_ASSERT_EQUAL(size_parse("64M", &v), 0);
	CU_ASSERT_EQUAL(v, 64ull << 20);
	CU_ASSERT_EQUAL(size_parse("2GiB", &v), 0);
	CU_ASSERT_EQUAL(v, 2ull << 30);
	CU_ASSERT_EQUAL(size_parse("0x1000", &v), 0);
	CU_ASSERT_EQUAL(v, 0x1000);
	CU_ASSERT_EQUAL(size_parse("12Q", &v), -EINVAL);
	CU_ASSERT_EQUAL(size_parse("-1", &v), -EINVAL);
	CU_ASSERT_EQUAL(size_parse("", &v), -EINVAL);
	CU_ASSERT_EQUAL(size_parse("99999999999T", &v), -ERANGE);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "minimal config and defaults", test_minimal },
		{ "machine.thp: on for a kernel, off for a flat payload", test_thp },
		{ "machine.irqchip: kernel, split (no PIT), refusals", test_irqchip },
		{ "schema errors name file:line", test_errors },
		{ "api group: socket, id and paths", test_api_group },
		{ "missing config file", test_missing_file },
		{ "--set overrides", test_overrides },
		{ "a restore's plan names its boot files, reads them not", test_restoring },
		{ "path expansion", test_expand },
		{ "sizes", test_sizes },
		{ NULL, NULL },
	};
	char kpath[300];
	FILE *f;
	int ret;

	char *dirs[] = { CUB_BUILD_DIR "/plugins/devices/.libs", NULL };

	if (!mkdtemp(dir) || registry_scan(&reg, dirs, NULL, NULL))
		return 2;
	snprintf(cfgpath, sizeof(cfgpath), "%s/config.cfg", dir);
	snprintf(kpath, sizeof(kpath), "%s/vmlinuz", dir);
	f = fopen(kpath, "w");
	fputs("not really a kernel", f);
	fclose(f);
	ret = cu_run("config", tests);
	unlink(kpath);
	unlink(cfgpath);
	rmdir(dir);
	return ret;
}
