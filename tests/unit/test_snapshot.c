/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the snapshot file layer (no KVM): the state file's framing,
 * the VM description tree as JSON, and snap_open on hand-made folders. */
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
#include "snap/snapshot.h"

#define ERRLEN 512

static char tmpdir[] = "/tmp/cubicle-test-snapshot-XXXXXX";

/* CU_ASSERT with the message shown when it fails. */
#define CHECK_MSG(cond, msg)                                             \
	do {                                                             \
		CU_ASSERT(cond);                                         \
		if (!(cond))                                             \
			fprintf(stderr, "\n  unexpected: %s\n", (msg)); \
	} while (0)
#define HAS(err, sub) CHECK_MSG(strstr((err), (sub)) != NULL, (err))

/* ---- the state file ---- */

static const enum snap_kind kinds[] = { SNAP_K_MACHINE, SNAP_K_VCPU, SNAP_K_DEVICE };
static const size_t lens[] = { 0, 1, 7, 8, 4096 };
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))
#define N_LENS (sizeof(lens) / sizeof(lens[0]))

static uint8_t pattern(unsigned k, unsigned l, size_t i)
{
	return (uint8_t)(k * 71 + l * 13 + i * 2654435761u % 251);
}

static void sec_name(char *buf, size_t n, unsigned k, unsigned l)
{
	snprintf(buf, n, "sec-%u-%zu", k, lens[l]);
}

/* A state file of one section per kind and length; 0 or -errno. */
static int build_state(struct snap_w *w, const char *arch)
{
	uint8_t data[4096];
	char name[SNAP_NAME_MAX];
	int ret = snap_w_begin(w, arch);

	for (unsigned k = 0; k < N_KINDS && !ret; k++)
		for (unsigned l = 0; l < N_LENS && !ret; l++) {
			for (size_t i = 0; i < lens[l]; i++)
				data[i] = pattern(k, l, i);
			sec_name(name, sizeof(name), k, l);
			ret = snap_w_put(w, kinds[k], name, k * 10 + l, SNAP_VER(k + 1, l), data,
					 lens[l]);
		}
	return ret ? ret : snap_w_end(w);
}

/* Parse a copy of exactly @len bytes, so that ASan sees any read past it. */
static int parse_copy(const uint8_t *p, size_t len, const char *arch, char *err)
{
	uint8_t *c = malloc(len ? len : 1);
	struct snap_r r;
	int ret;

	if (!c)
		return -ENOMEM;
	memcpy(c, p, len);
	err[0] = '\0';
	ret = snap_r_parse(&r, c, len, arch, err, ERRLEN);
	snap_r_free(&r);
	free(c);
	return ret;
}

static void test_state_round_trip(void)
{
	struct snap_w w;
	struct snap_r r;
	char err[ERRLEN] = "", name[SNAP_NAME_MAX];

	CU_ASSERT_EQUAL_FATAL(build_state(&w, "x86_64"), 0);
	CU_ASSERT_EQUAL(w.len % 8, 0);
	CU_ASSERT_EQUAL_FATAL(snap_r_parse(&r, w.p, w.len, "x86_64", err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.major, SNAP_FORMAT_MAJOR);
	CU_ASSERT_EQUAL(r.minor, SNAP_FORMAT_MINOR);
	CU_ASSERT_STRING_EQUAL(r.arch, "x86_64");
	CU_ASSERT_EQUAL_FATAL(r.n, N_KINDS * N_LENS);
	for (unsigned k = 0; k < N_KINDS; k++)
		for (unsigned l = 0; l < N_LENS; l++) {
			const struct snap_sec *s = &r.secs[k * N_LENS + l];
			size_t bad = 0;

			sec_name(name, sizeof(name), k, l);
			CU_ASSERT_EQUAL(s->kind, kinds[k]);
			CU_ASSERT_STRING_EQUAL(s->name, name);
			CU_ASSERT_EQUAL(s->inst, k * 10 + l);
			CU_ASSERT_EQUAL(s->ver, SNAP_VER(k + 1, l));
			CU_ASSERT_EQUAL(s->len, lens[l]);
			CU_ASSERT(s->data >= w.p && s->data + s->len <= w.p + w.len);
			for (size_t i = 0; i < s->len; i++)
				bad += s->data[i] != pattern(k, l, i);
			CU_ASSERT_EQUAL(bad, 0);
			CU_ASSERT_PTR_EQUAL(snap_r_find(&r, kinds[k], name, k * 10 + l), s);
			/* The same name under another instance or kind is another section. */
			CU_ASSERT_PTR_NULL(snap_r_find(&r, kinds[k], name, k * 10 + l + 100));
			CU_ASSERT_PTR_NULL(snap_r_find(&r, kinds[(k + 1) % N_KINDS], name, k * 10 + l));
		}
	CU_ASSERT_PTR_NULL(snap_r_find(&r, SNAP_K_DEVICE, "no-such-section", 0));
	CU_ASSERT_PTR_NULL(snap_r_find(&r, SNAP_K_END, "end", 0)); /* the end mark is no section */
	snap_r_free(&r);
	snap_w_free(&w);

	/* A file of no sections at all is valid. */
	CU_ASSERT_EQUAL_FATAL(snap_w_begin(&w, "aarch64"), 0);
	CU_ASSERT_EQUAL_FATAL(snap_w_end(&w), 0);
	CU_ASSERT_EQUAL(snap_r_parse(&r, w.p, w.len, "aarch64", err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.n, 0);
	snap_r_free(&r);
	snap_w_free(&w);
}

static void test_state_truncated(void)
{
	struct snap_w w;
	char err[ERRLEN];
	size_t bad = 0;

	CU_ASSERT_EQUAL_FATAL(build_state(&w, "x86_64"), 0);
	for (size_t n = 0; n < w.len; n++)
		if (parse_copy(w.p, n, "x86_64", err) == 0 || !err[0]) {
			fprintf(stderr, "\n  a cut at %zu bytes of %zu was accepted\n", n, w.len);
			bad++;
		}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_NOT_EQUAL(parse_copy(w.p, 0, "x86_64", err), 0);
	HAS(err, "not a cubicle state file");
	CU_ASSERT_NOT_EQUAL(parse_copy(w.p, w.len - 64, "x86_64", err), 0);
	HAS(err, "truncated (no end mark)");
	CU_ASSERT_NOT_EQUAL(parse_copy(w.p, w.len - 100, "x86_64", err), 0);
	HAS(err, "the file ends first");
	CU_ASSERT_EQUAL(parse_copy(w.p, w.len, "x86_64", err), 0);
	snap_w_free(&w);
}

static void test_state_flipped(void)
{
	struct snap_w w;
	char err[ERRLEN];
	size_t bad = 0;

	CU_ASSERT_EQUAL_FATAL(build_state(&w, "x86_64"), 0);
	/* Every byte: headers, data, padding and the end mark. */
	for (size_t i = 0; i < w.len; i++) {
		w.p[i] ^= 0x01;
		if (parse_copy(w.p, w.len, "x86_64", err) == 0 || !err[0]) {
			fprintf(stderr, "\n  a flip at byte %zu was accepted\n", i);
			bad++;
		}
		w.p[i] ^= 0x01;
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* The first section's data (after the 40-byte header, a 64-byte section
	 * header of length 0, then the second's header): a checksum mismatch. */
	w.p[40 + 64 + 64] ^= 0x80;
	CU_ASSERT_NOT_EQUAL(parse_copy(w.p, w.len, "x86_64", err), 0);
	HAS(err, "checksum mismatch");
	HAS(err, "sec-0-1");
	w.p[40 + 64 + 64] ^= 0x80;
	w.p[40 + 8] ^= 0x80; /* the first section's name */
	CU_ASSERT_NOT_EQUAL(parse_copy(w.p, w.len, "x86_64", err), 0);
	HAS(err, "offset 40: corrupt section header");
	w.p[40 + 8] ^= 0x80;
	CU_ASSERT_EQUAL(parse_copy(w.p, w.len, "x86_64", err), 0);
	snap_w_free(&w);
}

static void test_state_refused(void)
{
	struct snap_w w;
	uint8_t *p;
	char err[ERRLEN];

	CU_ASSERT_EQUAL_FATAL(build_state(&w, "x86_64"), 0);
	p = malloc(w.len + 8);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	memcpy(p, w.p, w.len);
	memset(p + w.len, 0, 8);
	CU_ASSERT_NOT_EQUAL(parse_copy(p, w.len + 8, "x86_64", err), 0);
	HAS(err, "8 bytes after the end mark");
	CU_ASSERT_NOT_EQUAL(parse_copy(p, w.len + 1, "x86_64", err), 0);
	HAS(err, "1 bytes after the end mark");

	CU_ASSERT_NOT_EQUAL(parse_copy(w.p, w.len, "aarch64", err), 0);
	HAS(err, "made on x86_64");
	HAS(err, "runs aarch64");

	/* Format 2: refused on the version, before any checksum is looked at. */
	memcpy(p, w.p, w.len);
	p[16] = 2;
	CU_ASSERT_NOT_EQUAL(parse_copy(p, w.len, "x86_64", err), 0);
	HAS(err, "format version 2.0");
	HAS(err, "reads 1.x");
	free(p);
	snap_w_free(&w);

	/* The writer does not check names; the reader refuses a repeat. */
	CU_ASSERT_EQUAL_FATAL(snap_w_begin(&w, "x86_64"), 0);
	CU_ASSERT_EQUAL(snap_w_put(&w, SNAP_K_DEVICE, "serial", 0, 1, "ab", 2), 0);
	CU_ASSERT_EQUAL(snap_w_put(&w, SNAP_K_DEVICE, "serial", 1, 1, "ab", 2), 0);
	CU_ASSERT_EQUAL(snap_w_put(&w, SNAP_K_VCPU, "serial", 0, 1, "ab", 2), 0);
	CU_ASSERT_EQUAL(snap_w_put(&w, SNAP_K_DEVICE, "serial", 0, 1, "cd", 2), 0);
	CU_ASSERT_EQUAL_FATAL(snap_w_end(&w), 0);
	CU_ASSERT_NOT_EQUAL(parse_copy(w.p, w.len, "x86_64", err), 0);
	HAS(err, "device section 'serial' 0 twice");
	snap_w_free(&w);
}

static void test_writer_errors(void)
{
	char long_name[SNAP_NAME_MAX + 1];
	struct snap_w w;
	struct snap_r r;
	char err[ERRLEN];

	CU_ASSERT_EQUAL_FATAL(snap_w_begin(&w, "x86_64"), 0);
	CU_ASSERT_EQUAL(snap_w_end(&w), 0);
	CU_ASSERT_EQUAL(snap_w_put(&w, SNAP_K_MACHINE, "late", 0, 0, "x", 1), -EINVAL);
	CU_ASSERT_NOT_EQUAL(snap_w_end(&w), 0);
	snap_w_free(&w);

	CU_ASSERT_EQUAL_FATAL(snap_w_begin(&w, "x86_64"), 0);
	CU_ASSERT_EQUAL(snap_w_put(&w, SNAP_K_MACHINE, "", 0, 0, "x", 1), -EINVAL);
	CU_ASSERT_NOT_EQUAL(snap_w_end(&w), 0); /* the error sticks */
	snap_w_free(&w);

	memset(long_name, 'n', SNAP_NAME_MAX);
	long_name[SNAP_NAME_MAX] = '\0';
	CU_ASSERT_EQUAL_FATAL(snap_w_begin(&w, "x86_64"), 0);
	CU_ASSERT_EQUAL(snap_w_put(&w, SNAP_K_DEVICE, long_name, 0, 0, "x", 1), -EINVAL);
	snap_w_free(&w);
	CU_ASSERT_EQUAL_FATAL(snap_w_begin(&w, "x86_64"), 0);
	CU_ASSERT_EQUAL(snap_w_put(&w, SNAP_K_END, "end", 0, 0, NULL, 0), -EINVAL);
	snap_w_free(&w);

	/* The longest name that fits (31 characters and the NUL) is kept whole. */
	long_name[SNAP_NAME_MAX - 1] = '\0';
	CU_ASSERT_EQUAL_FATAL(snap_w_begin(&w, "x86_64"), 0);
	CU_ASSERT_EQUAL(snap_w_put(&w, SNAP_K_DEVICE, long_name, 3, 0, "x", 1), 0);
	CU_ASSERT_EQUAL_FATAL(snap_w_end(&w), 0);
	CU_ASSERT_EQUAL_FATAL(snap_r_parse(&r, w.p, w.len, "x86_64", err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL(snap_r_find(&r, SNAP_K_DEVICE, long_name, 3));
	snap_r_free(&r);
	snap_w_free(&w);
}

/* ---- the VM description tree as JSON ---- */

static struct cnode *add(struct arena *a, struct cnode *parent, enum cnode_type t,
			 const char *name)
{
	struct cnode *n = cnode_new(a, t, name, "test");

	if (n && parent && cnode_add(a, parent, n))
		return NULL;
	return n;
}

static struct cnode *sample_tree(struct arena *a)
{
	struct cnode *root = add(a, NULL, CN_GROUP, NULL), *m, *l, *g, *n;

	m = add(a, root, CN_GROUP, "machine");
	(n = add(a, m, CN_INT, "vcpus"))->i = 2;
	(n = add(a, m, CN_INT, "min"))->i = INT64_MIN;
	(n = add(a, m, CN_INT, "max"))->i = INT64_MAX;
	(n = add(a, m, CN_FLOAT, "ratio"))->f = 0.1;
	(n = add(a, m, CN_FLOAT, "whole"))->f = 3.0; /* stays a real */
	(n = add(a, m, CN_BOOL, "acpi"))->b = true;
	(n = add(a, m, CN_BOOL, "smp"))->b = false;
	(n = add(a, m, CN_STR, "name"))->s = "vm \"one\" \xc3\xbc\n";
	(n = add(a, m, CN_STR, "empty"))->s = "";
	(n = add(a, m, CN_TEXT, "memory"))->s = "512M";
	add(a, m, CN_GROUP, "nothing");
	l = add(a, root, CN_LIST, "devices");
	g = add(a, l, CN_GROUP, NULL);
	(n = add(a, g, CN_STR, "plugin"))->s = "serial8250";
	(n = add(a, g, CN_TEXT, "irq"))->s = "4";
	g = add(a, l, CN_GROUP, NULL);
	(n = add(a, g, CN_STR, "plugin"))->s = "testdev";
	add(a, g, CN_LIST, "none");
	(n = add(a, l, CN_STR, NULL))->s = "=";
	(n = add(a, l, CN_TEXT, NULL))->s = "";
	g = add(a, add(a, l, CN_LIST, NULL), CN_LIST, NULL);
	(n = add(a, g, CN_INT, NULL))->i = -1;
	/* A member called "=" beside others is an ordinary member. */
	g = add(a, root, CN_GROUP, "odd");
	(n = add(a, g, CN_STR, "="))->s = "x";
	(n = add(a, g, CN_INT, "y"))->i = 1;
	return root;
}

/* Every node: type, name and value; groups and lists in order. */
static bool same_tree(const struct cnode *a, const struct cnode *b)
{
	if (a->type != b->type || !a->name != !b->name || (a->name && strcmp(a->name, b->name)))
		return false;
	switch (a->type) {
	case CN_GROUP:
	case CN_LIST:
		if (a->n_kids != b->n_kids)
			return false;
		for (unsigned i = 0; i < a->n_kids; i++)
			if (!same_tree(a->kids[i], b->kids[i]))
				return false;
		return true;
	case CN_BOOL:
		return a->b == b->b;
	case CN_INT:
		return a->i == b->i;
	case CN_FLOAT:
		return a->f == b->f;
	case CN_STR:
	case CN_TEXT:
		return !strcmp(a->s, b->s);
	}
	return false;
}

static void test_tree_round_trip(void)
{
	struct arena a = { 0 }, b = { 0 };
	struct cnode *t = sample_tree(&a), *back;
	json_t *j, *j2;
	char *text, err[ERRLEN];

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	j = snap_tree_to_json(t);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(
				       json_object_get(json_object_get(j, "machine"), "memory"), "=")),
			       "512M");
	CU_ASSERT(json_is_real(json_object_get(json_object_get(j, "machine"), "whole")));
	/* Through text, as the manifest is written and read. */
	text = json_dumps(j, JSON_COMPACT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	j2 = json_loads(text, 0, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j2);
	CU_ASSERT(json_equal(j, j2));
	back = snap_tree_from_json(&b, j2, "manifest.json", err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL(back);
	if (back) {
		CU_ASSERT(same_tree(t, back));
		CU_ASSERT_STRING_EQUAL(back->kids[0]->where, "manifest.json");
	}
	free(text);
	json_decref(j);
	json_decref(j2);
	arena_free(&a);
	arena_free(&b);
}

/* {"a": {"a": ... 1}} with @deep objects inside the root. */
static json_t *nested(unsigned deep)
{
	json_t *v = json_integer(1);

	for (unsigned i = 0; i <= deep; i++)
		v = json_pack("{s:o}", "a", v);
	return v;
}

static void test_tree_refused(void)
{
	struct arena a = { 0 };
	struct cnode *t;
	json_t *j;
	char err[ERRLEN];

	j = json_loads("{\"machine\": {\"vcpus\": 1, \"kernel\": null}}", 0, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_PTR_NULL(snap_tree_from_json(&a, j, "m.json", err, sizeof(err)));
	HAS(err, "m.json: kernel: null is not a config value");
	json_decref(j);
	j = json_loads("{\"list\": [1, null]}", 0, NULL);
	CU_ASSERT_PTR_NULL(snap_tree_from_json(&a, j, "m.json", err, sizeof(err)));
	HAS(err, "null is not a config value");
	json_decref(j);

	/* 16 levels below the root are allowed, 17 are not, either way. */
	j = nested(15);
	t = snap_tree_from_json(&a, j, "m.json", err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	json_decref(j);
	j = snap_tree_to_json(t);
	CU_ASSERT_PTR_NOT_NULL(j);
	json_decref(j);
	j = nested(16);
	CU_ASSERT_PTR_NULL(snap_tree_from_json(&a, j, "m.json", err, sizeof(err)));
	HAS(err, "m.json: nested more than 16 deep");
	json_decref(j);
	j = json_pack("{s:[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]}", "l");
	CU_ASSERT_PTR_NULL(snap_tree_from_json(&a, j, "m.json", err, sizeof(err)));
	HAS(err, "nested more than 16 deep");
	json_decref(j);

	j = json_loads("[1, 2]", 0, NULL);
	CU_ASSERT_PTR_NULL(snap_tree_from_json(&a, j, "m.json", err, sizeof(err)));
	HAS(err, "m.json: the VM description is not an object");
	json_decref(j);
	j = json_string("vm");
	CU_ASSERT_PTR_NULL(snap_tree_from_json(&a, j, "m.json", err, sizeof(err)));
	HAS(err, "not an object");
	json_decref(j);
	CU_ASSERT_PTR_NULL(snap_tree_from_json(&a, NULL, "m.json", err, sizeof(err)));
	HAS(err, "not an object");
	j = json_loads("{\"=\": \"text\"}", 0, NULL); /* a text value, not a group */
	CU_ASSERT_PTR_NULL(snap_tree_from_json(&a, j, "m.json", err, sizeof(err)));
	HAS(err, "m.json: the VM description is not a group");
	json_decref(j);
	arena_free(&a);
}

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
		{ "state: sections round trip", test_state_round_trip },
		{ "disks: bad entries refused before anything is made", test_disks_refused },
		{ "memory.zst: compressed, opened, read by zstd, damage refused", test_zst },
		{ "the plugins a restore loads", test_plugin_names },
		{ "state: every truncation refused", test_state_truncated },
		{ "state: every flipped byte refused", test_state_flipped },
		{ "state: trailing bytes, arch, format, duplicates", test_state_refused },
		{ "state: writer errors", test_writer_errors },
		{ "manifest: tree round trip", test_tree_round_trip },
		{ "manifest: null, depth, root refused", test_tree_refused },
		{ "open: a valid folder", test_open_good },
		{ "open: damaged folders", test_open_damaged },
		{ NULL, NULL },
	};
	char cmd[128];
	int ret;

	if (!mkdtemp(tmpdir))
		return 2;
	ret = cu_run("snapshot", tests);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return ret;
}
