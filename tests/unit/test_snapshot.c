/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the snapshot file layer (no KVM): the state file's framing
 * and the VM description tree as JSON (snap_open on folders:
 * test_snapshot_folder.c). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnode.h"
#include "cunit_main.h"
#include "snapshot_support.h"

/* ---- the state file ---- */


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

int main(void)
{
	static const struct cu_test tests[] = {
		{ "state: sections round trip", test_state_round_trip },
		{ "state: every truncation refused", test_state_truncated },
		{ "state: every flipped byte refused", test_state_flipped },
		{ "state: trailing bytes, arch, format, duplicates", test_state_refused },
		{ "state: writer errors", test_writer_errors },
		{ "manifest: tree round trip", test_tree_round_trip },
		{ "manifest: null, depth, root refused", test_tree_refused },
		{ NULL, NULL },
	};

	return cu_run("snapshot", tests);
}
