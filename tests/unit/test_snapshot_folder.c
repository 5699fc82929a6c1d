/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of snapshot folders (no KVM): snap_open on hand-made folders, disk entries, memory.zst, the plugins a restore loads. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch.h"
#include "cnode.h"
#include "cunit_main.h"
#include "plan.h"
#include "snapshot_support.h"

static char tmpdir[] = "/tmp/cubicle-test-snapshot-XXXXXX";

/* ---- snapshot folders ---- */

static int write_bytes(const char *dir, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		return -1;
	ret = fwrite(p, 1, n, f) == n ? 0 : -1;
	return fclose(f) ? -1 : ret;
}

static int write_manifest(const char *dir, const json_t *m)
{
	char *s = json_dumps(m, JSON_INDENT(2));
	int ret = s ? write_bytes(dir, "manifest.json", s, strlen(s)) : -1;

	free(s);
	return ret;
}

/* What snap_open checks, as snap_create writes it. */
static json_t *good_manifest(size_t state_len, uint32_t crc)
{
	char cpu[96];

	arch_cpu_id(cpu, sizeof(cpu));
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:{s:s, s:I}, s:{s:s, s:I, s:I}}",
			 "format", "cubicle-snapshot", "version", "1.0", "type", "Full", "arch",
			 arch_name, "cpu", cpu, "vcpus", 1, "memory_mib", 1, "memory", "file",
			 "memory", "bytes", (json_int_t)1 << 20, "state", "file", "state", "bytes",
			 (json_int_t)state_len, "crc32", (json_int_t)crc);
}

/* A valid snapshot in tmpdir/@name, whose path goes to @dir. */
static int make_snapshot(const char *name, char *dir, size_t n, const char *state_arch)
{
	struct snap_w w;
	json_t *m = NULL;
	char path[4096];
	int fd, ret;

	snprintf(dir, n, "%s/%s", tmpdir, name);
	if (mkdir(dir, 0755) < 0)
		return -1;
	ret = build_state(&w, state_arch);
	if (!ret)
		ret = write_bytes(dir, "state", w.p, w.len);
	if (!ret)
		m = good_manifest(w.len, snap_crc32(w.p, w.len));
	if (!ret)
		ret = m ? write_manifest(dir, m) : -1;
	json_decref(m);
	snap_w_free(&w);
	snprintf(path, sizeof(path), "%s/memory", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, 1 << 20) < 0)
		ret = -1;
	if (fd >= 0)
		close(fd);
	return ret;
}

/* The manifest of @dir with @key set to @v. */
static int set_manifest(const char *dir, const char *key, json_t *v)
{
	char path[4096];
	json_t *m;
	int ret;

	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	m = json_load_file(path, 0, NULL);
	if (!m || json_object_set_new(m, key, v)) {
		json_decref(m);
		return -1;
	}
	ret = write_manifest(dir, m);
	json_decref(m);
	return ret;
}

/* @dir/@name, in a buffer of its own until the next call. */
static const char *in_dir(const char *dir, const char *name)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

/* snap_open on @dir must fail and name @file and @what. */
static void refused(const char *dir, const char *file, const char *what, const char *what2)
{
	struct snap_image im;
	char err[ERRLEN] = "", path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	CU_ASSERT_NOT_EQUAL(snap_open(&im, dir, err, sizeof(err)), 0);
	HAS(err, path);
	HAS(err, what);
	if (what2)
		HAS(err, what2);
	snap_close(&im);
}

static void test_open_good(void)
{
	struct snap_image im;
	char dir[4096], err[ERRLEN] = "";
	int ret;

	CU_ASSERT_EQUAL_FATAL(make_snapshot("good", dir, sizeof(dir), arch_name), 0);
	ret = snap_open(&im, dir, err, sizeof(err));
	CHECK_MSG(ret == 0, err);
	if (!ret) {
		CU_ASSERT_EQUAL(im.vcpus, 1);
		CU_ASSERT_EQUAL(im.memory_mib, 1);
		CU_ASSERT_EQUAL(im.mem_bytes, 1u << 20);
		CU_ASSERT(im.mem_fd >= 0);
		CU_ASSERT_EQUAL(im.r.n, N_KINDS * N_LENS);
		CU_ASSERT_PTR_NOT_NULL(snap_r_find(&im.r, SNAP_K_DEVICE, "sec-2-4096", 24));
	}
	snap_close(&im);
	CU_ASSERT_EQUAL(im.mem_fd, -1);
	snap_close(&im); /* twice is harmless */
}

static void test_open_damaged(void)
{
	char dir[4096], cpu[96 + 8], here[96], err[ERRLEN];
	struct snap_image im;
	static const char bad_json[] = "{\n\"format\": 1,\n}\n"; /* line 3: '}' after ',' */
	json_t *st;
	int fd;

	CU_ASSERT_EQUAL_FATAL(make_snapshot("no-manifest", dir, sizeof(dir), arch_name), 0);
	CU_ASSERT_EQUAL(unlink(in_dir(dir, "manifest.json")), 0);
	refused(dir, "manifest.json", "No such file", "not a cubicle snapshot");

	CU_ASSERT_EQUAL_FATAL(make_snapshot("not-json", dir, sizeof(dir), arch_name), 0);
	CU_ASSERT_EQUAL(write_bytes(dir, "manifest.json", bad_json, strlen(bad_json)), 0);
	refused(dir, "manifest.json:3:", "", NULL);

	CU_ASSERT_EQUAL_FATAL(make_snapshot("format", dir, sizeof(dir), arch_name), 0);
	CU_ASSERT_EQUAL(set_manifest(dir, "format", json_string("qcow2")), 0);
	refused(dir, "manifest.json", "'format' is not \"cubicle-snapshot\"", NULL);

	CU_ASSERT_EQUAL_FATAL(make_snapshot("version", dir, sizeof(dir), arch_name), 0);
	CU_ASSERT_EQUAL(set_manifest(dir, "version", json_string("2.0")), 0);
	refused(dir, "manifest.json", "format version 2.0", "reads 1.x");

	CU_ASSERT_EQUAL_FATAL(make_snapshot("arch", dir, sizeof(dir), arch_name), 0);
	CU_ASSERT_EQUAL(set_manifest(dir, "arch", json_string("other")), 0);
	refused(dir, "manifest.json", "made on other", arch_name);

	CU_ASSERT_EQUAL_FATAL(make_snapshot("cpu", dir, sizeof(dir), arch_name), 0);
	arch_cpu_id(here, sizeof(here));
	snprintf(cpu, sizeof(cpu), "%s-v2", here);
	CU_ASSERT_EQUAL(set_manifest(dir, "cpu", json_string(cpu)), 0);
	refused(dir, "manifest.json", cpu, "this host has a");

	CU_ASSERT_EQUAL_FATAL(make_snapshot("memory-size", dir, sizeof(dir), arch_name), 0);
	CU_ASSERT_EQUAL(set_manifest(dir, "memory_mib", json_integer(2)), 0);
	refused(dir, "manifest.json", "'memory.bytes'", "out of range");

	CU_ASSERT_EQUAL_FATAL(make_snapshot("memory-short", dir, sizeof(dir), arch_name), 0);
	CU_ASSERT_EQUAL(truncate(in_dir(dir, "memory"), 4096), 0);
	refused(dir, "memory", "4096 bytes; the manifest says 1048576", NULL);

	CU_ASSERT_EQUAL_FATAL(make_snapshot("no-memory", dir, sizeof(dir), arch_name), 0);
	CU_ASSERT_EQUAL(unlink(in_dir(dir, "memory")), 0);
	refused(dir, "memory", "No such file", NULL);

	CU_ASSERT_EQUAL_FATAL(make_snapshot("state-flip", dir, sizeof(dir), arch_name), 0);
	fd = open(in_dir(dir, "state"), O_RDWR);
	CU_ASSERT_EQUAL(pwrite(fd, "\xff", 1, 300), 1);
	close(fd);
	refused(dir, "state", "checksum mismatch", NULL);

	CU_ASSERT_EQUAL_FATAL(make_snapshot("state-long", dir, sizeof(dir), arch_name), 0);
	fd = open(in_dir(dir, "state"), O_WRONLY | O_APPEND);
	CU_ASSERT_EQUAL(write(fd, "12345678", 8), 8);
	close(fd);
	refused(dir, "state", "the manifest says", "truncated or replaced");

	CU_ASSERT_EQUAL_FATAL(make_snapshot("state-bytes", dir, sizeof(dir), arch_name), 0);
	st = json_pack("{s:s, s:i, s:i}", "file", "state", "bytes", 1000, "crc32", 0);
	CU_ASSERT_EQUAL(set_manifest(dir, "state", st), 0);
	refused(dir, "state", "bytes; the manifest says 1000", NULL);

	/* Size and checksum right, but made for another arch: the parser's
	 * message, under the file's name. */
	CU_ASSERT_EQUAL_FATAL(make_snapshot("state-arch", dir, sizeof(dir), "other-arch"), 0);
	refused(dir, "state", "made on other-arch", arch_name);

	/* A snapshot's own files are never links (a VMM that wrote the folder
	 * could point them at host files, whose size or first word an error
	 * would tell): refused, not followed. */
	for (unsigned i = 0; i < 2; i++) {
		const char *f = i ? "memory" : "manifest.json";
		char real[4200], link[4200];

		CU_ASSERT_EQUAL_FATAL(make_snapshot(i ? "memory-link" : "manifest-link", dir,
						    sizeof(dir), arch_name), 0);
		snprintf(link, sizeof(link), "%s/%s", dir, f);
		snprintf(real, sizeof(real), "%s/real-%s", dir, f);
		CU_ASSERT_EQUAL(rename(link, real), 0);
		CU_ASSERT_EQUAL(symlink(real, link), 0);
		refused(dir, f, "symbolic links", NULL);
	}

	CU_ASSERT_NOT_EQUAL(snap_open(&im, "/nonexistent/snap", err, sizeof(err)), 0);
	HAS(err, "/nonexistent/snap: No such file");
	snap_close(&im);
}

/* A disk entry in @dir's manifest; snap_disks_restore into a VM with no
 * devices must fail with @what (the entry is checked before the config). */
static void disk_refused(const char *dir, json_t *entry, const char *what)
{
	struct snap_disks_made made;
	struct snap_image im;
	struct plan p;
	char err[ERRLEN] = "";

	memset(&p, 0, sizeof(p));
	CU_ASSERT_EQUAL_FATAL(set_manifest(dir, "disks", json_pack("[o]", entry)), 0);
	CU_ASSERT_EQUAL_FATAL(snap_open(&im, dir, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(snap_disks_count(&im), 1);
	CU_ASSERT_NOT_EQUAL(snap_disks_restore(&im, &p, &made, err, sizeof(err)), 0);
	HAS(err, what);
	CU_ASSERT_EQUAL(made.n, 0);
	snap_disks_free(&made);
	snap_close(&im);
}

static void test_disks_refused(void)
{
	char dir[4096];

	CU_ASSERT_EQUAL_FATAL(make_snapshot("disks", dir, sizeof(dir), arch_name), 0);
	CU_ASSERT_EQUAL(write_bytes(dir, "disk-d0", "", 0), 0);
	CU_ASSERT_EQUAL(truncate(in_dir(dir, "disk-d0"), 8192), 0);
	/* a name outside the folder, or not a disk's */
	disk_refused(dir, json_pack("{s:s, s:s, s:s, s:i}", "device", "d0", "key", "backend",
				    "file", "disk-../../etc/passwd", "bytes", 8192),
		     "'file' (disk-...)");
	disk_refused(dir, json_pack("{s:s, s:s, s:s, s:i}", "device", "d0", "key", "backend",
				    "file", "memory", "bytes", 8192),
		     "'file' (disk-...)");
	disk_refused(dir, json_pack("{s:s, s:s, s:i}", "device", "d0", "file", "disk-d0",
				    "bytes", 8192),
		     "disks[0]");
	disk_refused(dir, json_pack("{s:s, s:s, s:s, s:i}", "device", "d0", "key", "backend",
				    "file", "disk-d0", "bytes", 1000),
		     "disks[0]");
	/* the copy must be there, of its size */
	disk_refused(dir, json_pack("{s:s, s:s, s:s, s:i}", "device", "d0", "key", "backend",
				    "file", "disk-d0", "bytes", 4096),
		     "8192 bytes; the manifest says 4096 (truncated or replaced)");
	disk_refused(dir, json_pack("{s:s, s:s, s:s, s:i}", "device", "d0", "key", "backend",
				    "file", "disk-gone", "bytes", 8192),
		     "disk-gone: No such file");
	/* and its device in the config */
	disk_refused(dir, json_pack("{s:s, s:s, s:s, s:i}", "device", "d0", "key", "backend",
				    "file", "disk-d0", "bytes", 8192),
		     "device d0, group backend) is not in the VM's config");
}

/* memory.zst: compressed by several threads, then opened (decompressed
 * into a memfd) byte for byte; `zstd -d` reads it too; damage refused. */
static void test_zst(void)
{
	static uint8_t want[4 << 20], got[4 << 20];
	struct snap_zst_opts o = { .threads = 3, .level = 1 };
	struct snap_zst_stats st;
	struct snap_image im;
	char dir[4096], err[ERRLEN] = "", cmd[8400];
	json_t *mem;
	int fd, ret;

	CU_ASSERT_EQUAL_FATAL(make_snapshot("zst", dir, sizeof(dir), arch_name), 0);
	mem = json_pack("{s:s, s:I, s:I}", "file", "memory", "bytes", (json_int_t)sizeof(want),
			"written", (json_int_t)0);
	CU_ASSERT_EQUAL(set_manifest(dir, "memory", mem), 0);
	CU_ASSERT_EQUAL(set_manifest(dir, "memory_mib", json_integer(4)), 0);
	/* frame 0 and 2 hold data (one incompressible), 1 and 3 zeroes */
	memset(want, 0, sizeof(want));
	for (size_t i = 0; i < (1 << 20); i++)
		want[i] = (uint8_t)(i * 2654435761u >> 13);
	memset(want + (2 << 20) + 4096, 0x5a, 100);
	fd = open(in_dir(dir, "memory"), O_WRONLY | O_TRUNC);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, want, sizeof(want)), (ssize_t)sizeof(want));
	close(fd);
	ret = snap_compress(dir, &o, &st, err, sizeof(err));
	CHECK_MSG(ret == 0, err);
	CU_ASSERT_EQUAL(st.in_bytes, sizeof(want));
	CU_ASSERT_EQUAL(st.frames, 4);
	CU_ASSERT_EQUAL(st.threads, 3);
	CU_ASSERT(st.out_bytes < sizeof(want) / 2);
	CU_ASSERT_EQUAL(access(in_dir(dir, "memory"), F_OK), -1); /* replaced */
	CU_ASSERT_EQUAL(access(in_dir(dir, "memory.zst"), F_OK), 0);
	/* twice: refused, nothing changed */
	CU_ASSERT_EQUAL(snap_compress(dir, &o, &st, err, sizeof(err)), -EALREADY);
	HAS(err, "compressed already");
	ret = snap_open(&im, dir, err, sizeof(err));
	CHECK_MSG(ret == 0, err);
	if (!ret) {
		CU_ASSERT_EQUAL(pread(im.mem_fd, got, sizeof(got), 0), (ssize_t)sizeof(got));
		CU_ASSERT(!memcmp(got, want, sizeof(want)));
	}
	snap_close(&im);
	/* the stock zstd reads it (where it is installed) */
	snprintf(cmd, sizeof(cmd), "command -v zstd >/dev/null || exit 77; zstd -q -d -c '%s' | cmp -s - '%s.want'",
		 in_dir(dir, "memory.zst"), dir);
	CU_ASSERT_EQUAL(write_bytes(tmpdir, "zst.want", want, sizeof(want)), 0);
	ret = system(cmd);
	if (WEXITSTATUS(ret) == 77)
		fprintf(stderr, "\n  (no zstd command here: its check skipped) ");
	else
		CU_ASSERT_EQUAL(ret, 0);
	/* damaged: one line naming the file */
	fd = open(in_dir(dir, "memory.zst"), O_RDWR);
	CU_ASSERT_EQUAL(pwrite(fd, "\xff\xff\xff\xff", 4, 200), 4);
	close(fd);
	refused(dir, "memory.zst", "frame", NULL);
	CU_ASSERT_EQUAL(truncate(in_dir(dir, "memory.zst"), 100), 0);
	refused(dir, "memory.zst", "", NULL);
	/* a Diff's memory is not compressed */
	CU_ASSERT_EQUAL_FATAL(make_snapshot("zst-diff", dir, sizeof(dir), arch_name), 0);
	CU_ASSERT_EQUAL(set_manifest(dir, "type", json_string("Diff")), 0);
	CU_ASSERT_NOT_EQUAL(snap_compress(dir, &o, &st, err, sizeof(err)), 0);
	HAS(err, "compress the Full one it comes from");
	CU_ASSERT_EQUAL(access(in_dir(dir, "memory"), F_OK), 0);
}

/* The plugins a restore loads: every "type" of the recorded description. */
static void test_plugin_names(void)
{
	char dir[4096], **names;
	json_t *cfg;
	unsigned n = 0;

	CU_ASSERT_EQUAL_FATAL(make_snapshot("names", dir, sizeof(dir), arch_name), 0);
	CU_ASSERT_PTR_NULL(snap_plugin_names(dir)); /* no config recorded */
	cfg = json_pack("{s:{s:{s:i}, s:[{s:s, s:s}, {s:s, s:{s:{s:s}, s:s}}, {s:s, s:{s:s}}]}}",
			"tree", "machine", "vcpus", 1, "devices", "type", "serial8250", "id", "com1",
			"type", "virtio-blk", "backend", "type", "=", "raw", "path", "/d",
			"type", "virtio-blk", "backend", "type", "reflink");
	CU_ASSERT_EQUAL_FATAL(set_manifest(dir, "config", cfg), 0);
	names = snap_plugin_names(dir);
	CU_ASSERT_PTR_NOT_NULL_FATAL(names);
	for (char **p = names; *p; p++)
		n++;
	CU_ASSERT_EQUAL(n, 4); /* virtio-blk once */
	CU_ASSERT_STRING_EQUAL(names[0], "serial8250");
	CU_ASSERT_STRING_EQUAL(names[1], "virtio-blk");
	CU_ASSERT_STRING_EQUAL(names[2], "raw");
	CU_ASSERT_STRING_EQUAL(names[3], "reflink");
	strv_free(names);
	CU_ASSERT_PTR_NULL(snap_plugin_names("/nonexistent/snap"));
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "disks: bad entries refused before anything is made", test_disks_refused },
		{ "memory.zst: compressed, opened, read by zstd, damage refused", test_zst },
		{ "the plugins a restore loads", test_plugin_names },
		{ "open: a valid folder", test_open_good },
		{ "open: damaged folders", test_open_damaged },
		{ NULL, NULL },
	};
	char cmd[128];
	int ret;

	if (!mkdtemp(tmpdir))
		return 2;
	ret = cu_run("snapshot: folders", tests);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return ret;
}
