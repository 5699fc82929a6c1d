/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of tools/serve/oci.c: OCI image layout and `docker save`
 * archives, made here with libarchive, unpacked into a folder: layer
 * order, whiteouts and opaque folders, numeric owners, links, digests,
 * and entries that try to leave the root. Needs root (the unpacker chroots and
 * chowns); skipped with a message otherwise.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cunit_main.h"
#include "oci.h"

static char top[256];

/* An entry of a layer: type 'f' file (DATA), 'd' folder, 'l' symlink to
 * DATA, 'h' hard link to DATA; owner UID:GID, mode MODE. */
struct ent {
	char type;
	const char *name, *data;
	unsigned uid, gid, mode;
};

static void add(struct archive *a, const struct ent *e)
{
	struct archive_entry *ae = archive_entry_new();
	size_t n = e->type == 'f' && e->data ? strlen(e->data) : 0;

	archive_entry_set_pathname(ae, e->name);
	archive_entry_set_uid(ae, e->uid);
	archive_entry_set_gid(ae, e->gid);
	archive_entry_set_mtime(ae, 1700000000, 0);
	switch (e->type) {
	case 'd': archive_entry_set_filetype(ae, AE_IFDIR); break;
	case 'l': archive_entry_set_filetype(ae, AE_IFLNK); archive_entry_set_symlink(ae, e->data); break;
	case 'h': archive_entry_set_filetype(ae, AE_IFREG); archive_entry_set_hardlink(ae, e->data); break;
	default: archive_entry_set_filetype(ae, AE_IFREG); archive_entry_set_size(ae, (la_int64_t)n); break;
	}
	archive_entry_set_perm(ae, e->mode ? e->mode : (e->type == 'd' ? 0755 : 0644));
	CU_ASSERT_EQUAL(archive_write_header(a, ae), ARCHIVE_OK);
	if (n)
		CU_ASSERT_EQUAL(archive_write_data(a, e->data, n), (la_ssize_t)n);
	archive_entry_free(ae);
}

/* A tar (gzip'd when GZ) of ENTS at PATH. */
static void tarball(const char *path, const struct ent *ents, bool gz)
{
	struct archive *a = archive_write_new();

	archive_write_set_format_pax_restricted(a);
	if (gz)
		archive_write_add_filter_gzip(a);
	CU_ASSERT_EQUAL_FATAL(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (; ents->name; ents++)
		add(a, ents);
	archive_write_close(a);
	archive_write_free(a);
}

/* The outer archive: files NAME=PATH pairs, NULL-terminated. */
static void outer(const char *path, const char *const *files)
{
	struct archive *a = archive_write_new();

	archive_write_set_format_pax_restricted(a);
	CU_ASSERT_EQUAL_FATAL(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (; files[0]; files += 2) {
		struct archive_entry *ae = archive_entry_new();
		FILE *f = fopen(files[1], "rb");
		char buf[65536];
		size_t n;
		struct stat st;

		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		fstat(fileno(f), &st);
		archive_entry_set_pathname(ae, files[0]);
		archive_entry_set_filetype(ae, AE_IFREG);
		archive_entry_set_perm(ae, 0644);
		archive_entry_set_size(ae, st.st_size);
		CU_ASSERT_EQUAL(archive_write_header(a, ae), ARCHIVE_OK);
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			archive_write_data(a, buf, n);
		fclose(f);
		archive_entry_free(ae);
	}
	archive_write_close(a);
	archive_write_free(a);
}

static const char *tmp(const char *fmt, ...)
{
	static char b[8][512];
	static unsigned i;
	char rel[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	i = (i + 1) % 8;
	snprintf(b[i], sizeof(b[i]), "%s/%s", top, rel);
	return b[i];
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

static char *slurp(const char *path)
{
	static char b[256];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return NULL;
	n = fread(b, 1, sizeof(b) - 1, f);
	b[n] = 0;
	fclose(f);
	return b;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

/* Fresh ROOT and WORK folders under top. */
static void fresh(const char *name)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/%s", top, name);
	nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/%s/root", top, name);
	CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/%s/work", top, name);
	CU_ASSERT_EQUAL_FATAL(mkdir(p, 0700), 0);
}

/* The sha256 of the file at PATH, as 64 hex digits in OUT. */
static void sha256_of(const char *path, char out[65])
{
	struct sha256_ctx c;
	uint8_t buf[65536], sum[SHA256_DIGEST_SIZE];
	FILE *f = fopen(path, "rb");
	size_t n;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	sha256_init(&c);
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		sha256_update(&c, n, buf);
	fclose(f);
	sha256_digest(&c, sizeof(sum), sum);
	for (unsigned i = 0; i < sizeof(sum); i++)
		sprintf(out + 2 * i, "%02x", sum[i]);
}

#define IX "4444444444444444444444444444444444444444444444444444444444444444"

static const struct ent layer1[] = {
	{ 'd', "./etc", NULL, 0, 0, 0 },
	{ 'f', "./etc/keep", "kept\n", 0, 0, 0 },
	{ 'f', "./etc/gone", "whited out\n", 0, 0, 0 },
	{ 'd', "./opq", NULL, 0, 0, 0 },
	{ 'f', "./opq/old", "old\n", 0, 0, 0 },
	{ 'd', "./home/user", NULL, 1000, 1000, 0700 },
	{ 'f', "./home/user/own", "mine\n", 1000, 1000, 0600 },
	{ 'd', "./usr/lib", NULL, 0, 0, 0 },
	{ 'l', "./lib", "usr/lib", 0, 0, 0777 },
	{ 'l', "./escape", "/", 0, 0, 0777 },
	{ 'f', "./bin/tool", "#!/bin/sh\n", 0, 0, 04755 },
	{ 0, NULL, NULL, 0, 0, 0 },
};

static const struct ent layer2[] = {
	{ 'f', "etc/.wh.gone", "", 0, 0, 0 },
	{ 'f', "opq/.wh..wh..opq", "", 0, 0, 0 },
	{ 'f', "opq/new", "new\n", 0, 0, 0 },
	{ 'f', "lib/libx.so", "through the link\n", 0, 0, 0 },
	{ 'f', "escape/cubicle-oci-escape", "must stay inside\n", 0, 0, 0 },
	{ 'f', "etc/owned", "owned\n", 1234, 4321, 0640 },
	{ 'h', "etc/hard", "etc/owned", 0, 0, 0 },
	{ 'f', "etc/keep", "kept, layer 2\n", 0, 0, 0 },
	{ 0, NULL, NULL, 0, 0, 0 },
};

static void check_root(const char *name)
{
	struct stat st;
	const char *s;

	s = slurp(tmp("%s/root/etc/keep", name));
	CU_ASSERT(s && !strcmp(s, "kept, layer 2\n"));
	CU_ASSERT_NOT_EQUAL(access(tmp("%s/root/etc/gone", name), F_OK), 0);
	CU_ASSERT_NOT_EQUAL(access(tmp("%s/root/opq/old", name), F_OK), 0);
	s = slurp(tmp("%s/root/opq/new", name));
	CU_ASSERT(s && !strcmp(s, "new\n"));
	CU_ASSERT_EQUAL(lstat(tmp("%s/root/etc/owned", name), &st), 0);
	CU_ASSERT_EQUAL(st.st_uid, 1234);
	CU_ASSERT_EQUAL(st.st_gid, 4321);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0640);
	CU_ASSERT_EQUAL(lstat(tmp("%s/root/home/user", name), &st), 0);
	CU_ASSERT_EQUAL(st.st_uid, 1000);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0700);
	CU_ASSERT_EQUAL(lstat(tmp("%s/root/bin/tool", name), &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 04755);
	CU_ASSERT_EQUAL(lstat(tmp("%s/root/lib", name), &st), 0);
	CU_ASSERT(S_ISLNK(st.st_mode));
	s = slurp(tmp("%s/root/usr/lib/libx.so", name));
	CU_ASSERT(s && !strcmp(s, "through the link\n"));
	/* the absolute link resolved inside the root, not on the host */
	s = slurp(tmp("%s/root/cubicle-oci-escape", name));
	CU_ASSERT(s && !strcmp(s, "must stay inside\n"));
	CU_ASSERT_NOT_EQUAL(access("/cubicle-oci-escape", F_OK), 0);
	CU_ASSERT_EQUAL(lstat(tmp("%s/root/etc/hard", name), &st), 0);
	CU_ASSERT_EQUAL(st.st_nlink, 2);
	s = slurp(tmp("%s/root/etc/hard", name));
	CU_ASSERT(s && !strcmp(s, "owned\n"));
	CU_ASSERT_EQUAL(lstat(tmp("%s/root/etc/keep", name), &st), 0);
	CU_ASSERT_EQUAL(st.st_mtime, 1700000000);
}

/* An OCI layout archive at OUT of layers L1 (gzip'd) and L2 whose blobs
 * are named by their sha256; with TAMPER, layer 2's blob is altered after
 * its digest was taken. */
static void oci_archive(const char *path, bool tamper)
{
	char d1[65], d2[65], dm[65], di[65], text[1024], out[512];
	char n1[128], n2[128], nm[128], ni[128];

	snprintf(out, sizeof(out), "%s", path); /* tmp()'s buffers are reused below */

	tarball(tmp("l1.tgz"), layer1, true);
	tarball(tmp("l2.tar"), layer2, false);
	sha256_of(tmp("l1.tgz"), d1);
	sha256_of(tmp("l2.tar"), d2);
	snprintf(text, sizeof(text), "{\"schemaVersion\":2,\"config\":{\"digest\":\"sha256:%s\"},"
		 "\"layers\":[{\"digest\":\"sha256:%s\"},{\"digest\":\"sha256:%s\"}]}", d1, d1, d2);
	put(tmp("manifest.json"), text);
	sha256_of(tmp("manifest.json"), dm);
	/* an image index naming another architecture's manifest (absent) and this host's */
	snprintf(text, sizeof(text), "{\"schemaVersion\":2,\"manifests\":["
		 "{\"digest\":\"sha256:" IX "\",\"platform\":{\"architecture\":\"%s\"}},"
		 "{\"digest\":\"sha256:%s\",\"platform\":{\"architecture\":\"%s\"}}]}",
#if defined(__aarch64__)
		 "amd64", dm, "arm64");
#else
		 "arm64", dm, "amd64");
#endif
	put(tmp("index2.json"), text);
	sha256_of(tmp("index2.json"), di);
	snprintf(text, sizeof(text), "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":"
		 "\"application/vnd.oci.image.index.v1+json\",\"digest\":\"sha256:%s\"}]}", di);
	put(tmp("index.json"), text);
	if (tamper) {
		FILE *f = fopen(tmp("l2.tar"), "r+b");

		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		fseek(f, 600, SEEK_SET);
		fputc('X', f);
		fclose(f);
	}
	snprintf(n1, sizeof(n1), "blobs/sha256/%s", d1);
	snprintf(n2, sizeof(n2), "./blobs/sha256/%s", d2);
	snprintf(nm, sizeof(nm), "blobs/sha256/%s", dm);
	snprintf(ni, sizeof(ni), "blobs/sha256/%s", di);
	outer(out, (const char *const[]){ "oci-layout", tmp("index.json"), "index.json", tmp("index.json"),
					  ni, tmp("index2.json"), nm, tmp("manifest.json"), n1, tmp("l1.tgz"),
					  n2, tmp("l2.tar"), NULL });
}

static void test_oci_layout(void)
{
	char msg[600] = "";

	fresh("oci");
	oci_archive(tmp("image.tar"), false);
	CU_ASSERT_EQUAL(oci_unpack(tmp("image.tar"), tmp("oci/root"), tmp("oci/work"), msg, sizeof(msg)), 0);
	if (*msg)
		fprintf(stderr, "oci_unpack: %s\n", msg);
	check_root("oci");
	/* a layer altered after its digest was taken: refused, nothing unpacked */
	fresh("oci");
	oci_archive(tmp("tampered.tar"), true);
	CU_ASSERT_EQUAL(oci_unpack(tmp("tampered.tar"), tmp("oci/root"), tmp("oci/work"), msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "does not match its digest"));
	CU_ASSERT_NOT_EQUAL(access(tmp("oci/root/etc"), F_OK), 0);
}

static void test_docker_save(void)
{
	char msg[600] = "";

	fresh("docker");
	tarball(tmp("l1.tar"), layer1, false);
	tarball(tmp("l2.tar"), layer2, false);
	put(tmp("dmanifest.json"), "[{\"Config\":\"c.json\",\"RepoTags\":[\"t:latest\"],"
				   "\"Layers\":[\"aaa/layer.tar\",\"bbb/layer.tar\"]}]");
	outer(tmp("docker.tar"), (const char *const[]){
		"manifest.json", tmp("dmanifest.json"), "aaa/layer.tar", tmp("l1.tar"),
		"bbb/layer.tar", tmp("l2.tar"), NULL });
	CU_ASSERT_EQUAL(oci_unpack(tmp("docker.tar"), tmp("docker/root"), tmp("docker/work"), msg, sizeof(msg)), 0);
	if (*msg)
		fprintf(stderr, "oci_unpack: %s\n", msg);
	check_root("docker");
}

/* Broken and hostile archives: refused with a message, nothing outside the root. */
static void test_refused(void)
{
	static const struct ent dotdot[] = {
		{ 'f', "../../cubicle-oci-dotdot", "out\n", 0, 0, 0 },
		{ 0, NULL, NULL, 0, 0, 0 },
	};
	char msg[600];

	fresh("bad");
	put(tmp("bad.json"), "[{\"Layers\":[\"../../etc/passwd\"]}]");
	outer(tmp("bad1.tar"), (const char *const[]){ "manifest.json", tmp("bad.json"), NULL });
	CU_ASSERT_EQUAL(oci_unpack(tmp("bad1.tar"), tmp("bad/root"), tmp("bad/work"), msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "not a path inside the archive"));

	fresh("bad");
	put(tmp("bad.json"), "{\"manifests\":[{\"digest\":\"sha256:../../x\"}]}");
	outer(tmp("bad2.tar"), (const char *const[]){ "index.json", tmp("bad.json"), NULL });
	CU_ASSERT_EQUAL(oci_unpack(tmp("bad2.tar"), tmp("bad/root"), tmp("bad/work"), msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "is not ALGORITHM:HEX"));

	fresh("bad");
	put(tmp("bad.json"), "{\"manifests\":[{\"digest\":\"md5:0123456789abcdef0123456789abcdef\"}]}");
	put(tmp("md5blob"), "{}");
	outer(tmp("bad6.tar"), (const char *const[]){ "index.json", tmp("bad.json"),
						     "blobs/md5/0123456789abcdef0123456789abcdef", tmp("md5blob"), NULL });
	CU_ASSERT_EQUAL(oci_unpack(tmp("bad6.tar"), tmp("bad/root"), tmp("bad/work"), msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "is not sha256 or sha512"));

	fresh("bad");
	put(tmp("bad.json"), "{\"manifests\":[");
	outer(tmp("bad3.tar"), (const char *const[]){ "index.json", tmp("bad.json"), NULL });
	CU_ASSERT_EQUAL(oci_unpack(tmp("bad3.tar"), tmp("bad/root"), tmp("bad/work"), msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "index.json: line"));

	fresh("bad");
	outer(tmp("bad4.tar"), (const char *const[]){ "README", tmp("bad.json"), NULL });
	CU_ASSERT_EQUAL(oci_unpack(tmp("bad4.tar"), tmp("bad/root"), tmp("bad/work"), msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "neither index.json"));

	fresh("bad");
	tarball(tmp("dd.tar"), dotdot, false);
	put(tmp("bad.json"), "[{\"Layers\":[\"l/layer.tar\"]}]");
	outer(tmp("bad5.tar"), (const char *const[]){ "manifest.json", tmp("bad.json"), "l/layer.tar",
						     tmp("dd.tar"), NULL });
	CU_ASSERT_EQUAL(oci_unpack(tmp("bad5.tar"), tmp("bad/root"), tmp("bad/work"), msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "leaves the root"));
	CU_ASSERT_NOT_EQUAL(access(tmp("cubicle-oci-dotdot"), F_OK), 0);

	fresh("bad");
	put(tmp("junk.tar"), "this is not a tar file at all, not even close.........");
	CU_ASSERT_EQUAL(oci_unpack(tmp("junk.tar"), tmp("bad/root"), tmp("bad/work"), msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "junk.tar"));
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "an OCI image layout: index, layers, whiteouts, owners, links", test_oci_layout },
		{ "a docker save archive: the same layers", test_docker_save },
		{ "broken and hostile archives are refused", test_refused },
		{ NULL, NULL },
	};
	const char *t = getenv("TMPDIR");
	int ret;

	if (geteuid() != 0) {
		printf("test_serve_oci: skipped: unpacking an image needs root (chroot, chown)\n");
		return 77;
	}
	snprintf(top, sizeof(top), "%s/cubicle-oci-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(top))
		return perror("mkdtemp"), 1;
	ret = cu_run("serve_oci", tests);
	nftw(top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return ret;
}
