/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for a snapshot's files (vmm-core/snap), the parts read
 * from disk before any of it reaches a VM. The first byte picks:
 * - even: the rest is a `state` file for snap_r_parse (bit 1: with its
 *   checksums set right first, so that mutations get past them to the
 *   layout). What it accepts must point inside the input, be found again
 *   by snap_r_find, and come back the same when written out again with
 *   snap_w_* and parsed.
 * - odd: the rest is JSON (bit 1: duplicate keys refused, as snap_open
 *   does) for snap_tree_from_json. A tree it accepts must become the same
 *   JSON again (json_equal: types, keys, values), survive text as
 *   manifest.json holds it (sorted keys), and read back to the same JSON.
 */
#include <endian.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnode.h"
#include "seed.h"
#include "snap/snapshot.h"

#define ARCH "x86_64"

#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			__builtin_trap(); \
	} while (0)

static bool same_sec(const struct snap_sec *a, const struct snap_sec *b)
{
	return a->kind == b->kind && !strcmp(a->name, b->name) && a->inst == b->inst &&
	       a->ver == b->ver && a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static void put_crc(uint8_t *p, const void *data, size_t len)
{
	uint32_t v = htole32(snap_crc32(data, len));

	memcpy(p, &v, 4);
}

/* Set every checksum of the layout state.c documents: 40-byte header;
 * 64-byte section headers (kind at 4, length at 48, data CRC at 56, header
 * CRC at 60), data padded to 8; the end mark's data CRC covers all before. */
static void fix_crcs(uint8_t *b, size_t len)
{
	size_t off = 40;

	while (len >= 64 && off <= len - 64) {
		uint8_t *h = b + off;
		uint64_t dlen;
		bool end = get32(h + 4) == SNAP_K_END;

		memcpy(&dlen, h + 48, 8);
		dlen = le64toh(dlen);
		if (end)
			put_crc(h + 56, b, off);
		else if (dlen <= len - off - 64)
			put_crc(h + 56, h + 64, (size_t)dlen);
		put_crc(h + 60, h, 60);
		if (end || dlen > len - off - 64)
			return;
		off += 64 + (((size_t)dlen + 7) & ~(size_t)7);
	}
}

static void fuzz_state(const uint8_t *p, size_t len)
{
	struct snap_r r, again;
	struct snap_w w;
	char err[512] = "";
	bool rewrite = true;
	int ret = snap_r_parse(&r, p, len, ARCH, err, sizeof(err));

	if (ret) {
		CHECK(ret < 0 && err[0]);
		snap_r_free(&r);
		return;
	}
	CHECK(r.major == SNAP_FORMAT_MAJOR && !strcmp(r.arch, ARCH));
	snap_w_begin(&w, ARCH);
	for (unsigned i = 0; i < r.n; i++) {
		const struct snap_sec *s = &r.secs[i];

		CHECK(s->kind != SNAP_K_END && memchr(s->name, 0, sizeof(s->name)));
		CHECK(s->len <= len && s->data >= p && (size_t)(s->data - p) <= len - s->len);
		CHECK(snap_r_find(&r, s->kind, s->name, s->inst) == s);
		/* The reader takes an empty name, the writer does not. */
		rewrite = rewrite && s->name[0];
		if (rewrite)
			CHECK(!snap_w_put(&w, s->kind, s->name, s->inst, s->ver, s->data, s->len));
	}
	if (rewrite) {
		/* The same layout: only bytes no check reads (after a NUL) differ. */
		CHECK(!snap_w_end(&w) && w.len == len);
		CHECK(!snap_r_parse(&again, w.p, w.len, ARCH, err, sizeof(err)));
		CHECK(again.n == r.n);
		for (unsigned i = 0; i < r.n; i++)
			CHECK(same_sec(&r.secs[i], &again.secs[i]));
		snap_r_free(&again);
	}
	snap_w_free(&w);
	snap_r_free(&r);
}

static void fuzz_tree(const uint8_t *p, size_t len, bool no_dups)
{
	struct arena a = { 0 }, b = { 0 };
	struct cnode *t, *t2;
	json_t *in, *j, *j2, *back;
	char err[512] = "", *text;

	in = json_loadb((const char *)p, len, no_dups ? JSON_REJECT_DUPLICATES : 0, NULL);
	if (!in)
		return;
	t = snap_tree_from_json(&a, in, "fuzz.json", err, sizeof(err));
	if (!t) {
		CHECK(err[0]);
		goto out;
	}
	/* The root is always a group ({"=": "..."}, a text value, is refused). */
	CHECK(t->type == CN_GROUP && !t->name);
	/* Every JSON value the reader takes maps to a node and back as it was. */
	j = snap_tree_to_json(t);
	CHECK(j && json_equal(in, j));
	text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
	CHECK(text);
	back = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	CHECK(back && json_equal(j, back));
	t2 = snap_tree_from_json(&b, back, "fuzz.json", err, sizeof(err));
	CHECK(t2);
	j2 = snap_tree_to_json(t2);
	CHECK(j2 && json_equal(j, j2));
	json_decref(j2);
	json_decref(back);
	free(text);
	json_decref(j);
out:
	json_decref(in);
	arena_free(&a);
	arena_free(&b);
}

#define SEED(dir, name, lit) fuzz_write_seed(dir, name, lit, sizeof(lit) - 1)

static void state_seed(const char *dir)
{
	static const uint8_t regs[48] = { 1, 2, 3, 4, 5 };
	struct snap_w w;
	uint8_t *s;

	snap_w_begin(&w, ARCH);
	snap_w_put(&w, SNAP_K_MACHINE, "irqchip", 0, SNAP_VER(1, 0), "\x10\x20\x30", 3);
	snap_w_put(&w, SNAP_K_MACHINE, "clock", 0, SNAP_VER(1, 2), NULL, 0);
	snap_w_put(&w, SNAP_K_VCPU, "regs", 0, SNAP_VER(1, 0), regs, sizeof(regs));
	snap_w_put(&w, SNAP_K_VCPU, "regs", 1, SNAP_VER(1, 0), regs, 7);
	snap_w_put(&w, SNAP_K_DEVICE, "serial8250", 0, SNAP_VER(2, 1), "abcdefgh", 8);
	if (!snap_w_end(&w) && (s = malloc(w.len + 1))) {
		s[0] = 0;
		memcpy(s + 1, w.p, w.len);
		fuzz_write_seed(dir, "seed-state", s, w.len + 1);
		s[0] = 2; /* checksums set by the harness */
		fuzz_write_seed(dir, "seed-state-fix", s, w.len + 1);
		free(s);
	}
	snap_w_free(&w);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_SEED_DIR");

	(void)argc, (void)argv;
	if (!dir)
		return 0;
	state_seed(dir);
	SEED(dir, "seed-tree",
	     "\x03{\"machine\": {\"vcpus\": 2, \"memory\": {\"=\": \"512M\"}, \"acpi\": true,"
	     " \"ratio\": 0.25},"
	     " \"kernel\": {\"path\": \"/boot/vmlinuz\", \"cmdline\": \"console=ttyS0\"},"
	     " \"devices\": [{\"plugin\": \"serial8250\", \"irq\": -4}, {\"plugin\": \"testdev\"},"
	     " [], {}, false]}");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	if (!size)
		return 0;
	if (data[0] & 1) {
		fuzz_tree(data + 1, size - 1, data[0] & 2);
	} else if (data[0] & 2) {
		copy = malloc(size - 1 ? size - 1 : 1);
		CHECK(copy);
		memcpy(copy, data + 1, size - 1);
		fix_crcs(copy, size - 1);
		fuzz_state(copy, size - 1);
		free(copy);
	} else {
		fuzz_state(data + 1, size - 1);
	}
	return 0;
}
