/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of tools/serve/plancheck.c: a jailed template build's snapshot
 * manifest (its config.dir and config.tree, as its VMM wrote them) held to
 * the build's VM file and --set values; path_like.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cunit_main.h"
#include "plancheck.h"

static char dir[256], cfg[300];

/* The manifest a VMM started from cfg would write, with @disk as the
 * disk's path, @dir as its config folder and @extra as one more device's
 * uds_path (NULL: none). */
static json_t *manifest(const char *disk, const char *cdir, const char *extra)
{
	json_t *devs = json_pack("[{s:s, s:s, s:{s:s, s:s}}, {s:s, s:s, s:s}]", "type", "virtio-blk",
				 "id", "root", "backend", "type", "raw", "path", disk, "type",
				 "serial8250", "id", "com1", "console", "stdio");

	if (extra)
		json_array_append_new(devs, json_pack("{s:s, s:s, s:s}", "type", "virtio-vsock", "id",
						      "v", "uds_path", extra));
	return json_pack("{s:s, s:{s:s, s:s, s:{s:{s:i, s:{s:s}}, s:{s:s, s:s, s:s}, s:o}}}", "type",
			 "Full", "config", "source", cfg, "dir", cdir, "tree", "machine", "vcpus", 1,
			 "memory_mib", "=", "256", "boot", "kernel", "/boot/vmlinuz", "initrd",
			 "initrd.img", "cmdline", "console=ttyS0 root=/dev/vda", "devices", devs);
}

static int check(json_t *m, char *const *sets, unsigned n, char *msg, size_t len)
{
	int ret = plan_check_config(m, cfg, sets, n, msg, len);

	json_decref(m);
	return ret;
}

static void test_path_like(void)
{
	CU_ASSERT_TRUE(path_like("/etc/passwd"));
	CU_ASSERT_TRUE(path_like(".."));
	CU_ASSERT_TRUE(path_like("../x"));
	CU_ASSERT_TRUE(path_like("a/../../x"));
	CU_ASSERT_TRUE(path_like("a/.."));
	CU_ASSERT_FALSE(path_like("disk.img"));
	CU_ASSERT_FALSE(path_like("sub/disk.img"));
	CU_ASSERT_FALSE(path_like("10.0.0.0/24"));
	CU_ASSERT_FALSE(path_like("console=ttyS0 root=/dev/vda"));
	CU_ASSERT_FALSE(path_like("a..b"));
}

static void test_config(void)
{
	char msg[600], *sets[] = { "devices.v.uds_path=/run/t.sock" };

	/* what the file names: passes */
	CU_ASSERT_EQUAL(check(manifest("/srv/disk.img", dir, NULL), NULL, 0, msg, sizeof(msg)), 0);
	/* a path only a --set value names: passes with it, not without */
	CU_ASSERT_EQUAL(check(manifest("/srv/disk.img", dir, "/run/t.sock"), sets, 1, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(check(manifest("/srv/disk.img", dir, "/run/t.sock"), NULL, 0, msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "config.tree names \"/run/t.sock\", which neither"));
	/* a host file the file does not name, one climbing out: refused, named */
	CU_ASSERT_EQUAL(check(manifest("/etc/shadow", dir, NULL), NULL, 0, msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "\"/etc/shadow\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, cfg));
	CU_ASSERT_EQUAL(check(manifest("../../etc/shadow", dir, NULL), NULL, 0, msg, sizeof(msg)), -1);
	/* the kernel's path in the disk's place: a string the file holds */
	CU_ASSERT_EQUAL(check(manifest("/boot/vmlinuz", dir, NULL), NULL, 0, msg, sizeof(msg)), 0);
	/* another folder for relative paths: refused */
	CU_ASSERT_EQUAL(check(manifest("/srv/disk.img", "/etc", NULL), NULL, 0, msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "config.dir \"/etc\" is not"));
	/* a file that cannot be read */
	{
		json_t *m = manifest("/srv/disk.img", ".", NULL);

		CU_ASSERT_EQUAL(plan_check_config(m, "nope.cfg", NULL, 0, msg, sizeof(msg)), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(msg, "nope.cfg"));
		json_decref(m);
	}
	/* no config at all */
	{
		json_t *m = json_pack("{s:s}", "type", "Full");

		CU_ASSERT_EQUAL(plan_check_config(m, cfg, NULL, 0, msg, sizeof(msg)), -1);
		json_decref(m);
	}
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "path_like: absolute, or climbing with ..", test_path_like },
		{ "a snapshot's config against its VM file and --set", test_config },
		{ NULL, NULL },
	};
	const char *t = getenv("TMPDIR");
	FILE *f;
	int ret;

	snprintf(dir, sizeof(dir), "%s/cubicle-plancheck-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(dir))
		return perror("mkdtemp"), 1;
	snprintf(cfg, sizeof(cfg), "%s/vm.cfg", dir);
	f = fopen(cfg, "w");
	if (!f)
		return perror(cfg), 1;
	fputs("machine = { vcpus = 1; memory_mib = 256; };\n"
	      "boot = { kernel = \"/boot/vmlinuz\"; initrd = \"initrd.img\";\n"
	      "  cmdline = \"console=ttyS0 root=/dev/vda\"; };\n"
	      "devices = ( { type = \"virtio-blk\"; id = \"root\";\n"
	      "    backend = { type = \"raw\"; path = \"/srv/disk.img\"; }; },\n"
	      "  { type = \"serial8250\"; id = \"com1\"; console = \"stdio\"; } );\n",
	      f);
	fclose(f);
	ret = cu_run("serve_plancheck", tests);
	unlink(cfg);
	rmdir(dir);
	return ret;
}
