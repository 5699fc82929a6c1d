/* SPDX-License-Identifier: Apache-2.0 */
/* The state file's framing (state.h). On disk, little-endian:
 *   header  16 magic "CUBICLE-STATE\0\0\0", u32 major, u32 minor, 16 arch
 *   section  4 "SECT", u32 kind, 32 name, u32 inst, u32 ver, u64 len,
 *           u32 CRC-32 of the data, u32 CRC-32 of the 60 bytes before it;
 *           then the data, padded with zeroes to 8 bytes
 *   end      a section of kind END, length 0, whose data CRC covers every
 *           byte before it: a file cut anywhere is refused. */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cnode.h"
#include "snap/state.h"

#define HDR_MAGIC "CUBICLE-STATE\0\0"
#define HDR_LEN 40
#define SEC_LEN 64
#define PAD8(n) (((n) + 7) & ~(size_t)7)

uint32_t snap_crc32(const void *p, size_t len)
{
	uLong c = crc32(0L, Z_NULL, 0);
	const uint8_t *b = p;

	while (len) { /* zlib takes uInt lengths */
		uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;

		c = crc32(c, b, n);
		b += n;
		len -= n;
	}
	return (uint32_t)c;
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static uint8_t *grow(struct snap_w *w, size_t n)
{
	uint8_t *p;

	if (w->err)
		return NULL;
	if (n > SNAP_STATE_MAX || w->len > SNAP_STATE_MAX - n) {
		w->err = -E2BIG;
		return NULL;
	}
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;

		while (cap < w->len + n)
			cap *= 2;
		p = realloc(w->p, cap);
		if (!p) {
			w->err = -ENOMEM;
			return NULL;
		}
		w->p = p;
		w->cap = cap;
	}
	p = w->p + w->len;
	memset(p, 0, n);
	w->len += n;
	return p;
}

int snap_w_begin(struct snap_w *w, const char *arch)
{
	uint8_t *h;

	memset(w, 0, sizeof(*w));
	h = grow(w, HDR_LEN);
	if (!h)
		return w->err;
	memcpy(h, HDR_MAGIC, 16);
	put32(h + 16, SNAP_FORMAT_MAJOR);
	put32(h + 20, SNAP_FORMAT_MINOR);
	snprintf((char *)h + 24, 16, "%s", arch);
	return 0;
}

static void sec_header(uint8_t *s, enum snap_kind kind, const char *name, uint32_t inst,
		       uint32_t ver, uint64_t len, uint32_t dcrc)
{
	memcpy(s, "SECT", 4);
	put32(s + 4, kind);
	snprintf((char *)s + 8, SNAP_NAME_MAX, "%s", name);
	put32(s + 40, inst);
	put32(s + 44, ver);
	put64(s + 48, len);
	put32(s + 56, dcrc);
	put32(s + 60, snap_crc32(s, 60));
}

int snap_w_put(struct snap_w *w, enum snap_kind kind, const char *name, uint32_t inst,
	       uint32_t ver, const void *data, size_t len)
{
	uint8_t *s;

	if (w->ended || kind == SNAP_K_END || strlen(name) >= SNAP_NAME_MAX || !*name)
		return w->err ? w->err : (w->err = -EINVAL);
	s = grow(w, SEC_LEN + PAD8(len));
	if (!s)
		return w->err;
	if (len)
		memcpy(s + SEC_LEN, data, len);
	sec_header(s, kind, name, inst, ver, len, len ? snap_crc32(data, len) : 0);
	return 0;
}

int snap_w_end(struct snap_w *w)
{
	uint32_t all;
	uint8_t *s;

	if (w->err || w->ended)
		return w->err ? w->err : -EINVAL;
	all = snap_crc32(w->p, w->len);
	s = grow(w, SEC_LEN);
	if (!s)
		return w->err;
	sec_header(s, SNAP_K_END, "end", 0, 0, 0, all);
	w->ended = true;
	return 0;
}

void snap_w_free(struct snap_w *w)
{
	free(w->p);
	memset(w, 0, sizeof(*w));
}

static const char *kind_name(uint32_t k)
{
	switch (k) {
	case SNAP_K_MACHINE: return "machine";
	case SNAP_K_VCPU: return "vcpu";
	case SNAP_K_DEVICE: return "device";
	case SNAP_K_END: return "end";
	default: return NULL;
	}
}

int snap_r_parse(struct snap_r *r, const void *buf, size_t len, const char *arch, char *err,
		 size_t errlen)
{
	const uint8_t *b = buf;
	size_t off = HDR_LEN, cap = 0;

	memset(r, 0, sizeof(*r));
	if (len < HDR_LEN || memcmp(b, HDR_MAGIC, 16))
		return errf(err, errlen, -EINVAL, "not a cubicle state file (no CUBICLE-STATE header)");
	if (len > SNAP_STATE_MAX)
		return errf(err, errlen, -EINVAL, "%zu bytes: larger than any state file (%u MiB)",
			    len, SNAP_STATE_MAX >> 20);
	r->major = get32(b + 16);
	r->minor = get32(b + 20);
	if (r->major != SNAP_FORMAT_MAJOR)
		return errf(err, errlen, -EINVAL,
			    "format version %" PRIu32 ".%" PRIu32 "; this cubicle reads %d.x",
			    r->major, r->minor, SNAP_FORMAT_MAJOR);
	if (memchr(b + 24, 0, 16) == NULL)
		return errf(err, errlen, -EINVAL, "offset 24: the arch name is not terminated");
	memcpy(r->arch, b + 24, 16);
	if (strcmp(r->arch, arch))
		return errf(err, errlen, -EINVAL, "made on %s; this cubicle runs %s guests",
			    r->arch, arch);
	for (;;) {
		struct snap_sec s = { 0 };
		const uint8_t *h = b + off;
		uint64_t dlen;

		if (len - off < SEC_LEN)
			return errf(err, errlen, -EINVAL, "offset %zu: truncated (no end mark)", off);
		if (memcmp(h, "SECT", 4) || get32(h + 60) != snap_crc32(h, 60))
			return errf(err, errlen, -EINVAL, "offset %zu: corrupt section header", off);
		if (!kind_name(get32(h + 4)) || !memchr(h + 8, 0, SNAP_NAME_MAX) || !h[8])
			return errf(err, errlen, -EINVAL, "offset %zu: bad section kind or name", off);
		s.kind = (enum snap_kind)get32(h + 4);
		memcpy(s.name, h + 8, SNAP_NAME_MAX);
		s.inst = get32(h + 40);
		s.ver = get32(h + 44);
		dlen = get64(h + 48);
		if (s.kind == SNAP_K_END) {
			if (dlen || get32(h + 56) != snap_crc32(b, off))
				return errf(err, errlen, -EINVAL,
					    "offset %zu: the end mark does not match the file before it",
					    off);
			if (off + SEC_LEN != len)
				return errf(err, errlen, -EINVAL,
					    "offset %zu: %zu bytes after the end mark", off + SEC_LEN,
					    len - off - SEC_LEN);
			return 0;
		}
		if (dlen > len - off - SEC_LEN || PAD8(dlen) > len - off - SEC_LEN)
			return errf(err, errlen, -EINVAL,
				    "offset %zu: %s section '%s' says %" PRIu64 " bytes; the file ends first",
				    off, kind_name(s.kind), s.name, dlen);
		s.data = h + SEC_LEN;
		s.len = (size_t)dlen;
		if (get32(h + 56) != (s.len ? snap_crc32(s.data, s.len) : 0))
			return errf(err, errlen, -EINVAL,
				    "offset %zu: %s section '%s' %" PRIu32 ": checksum mismatch", off,
				    kind_name(s.kind), s.name, s.inst);
		if (r->n == SNAP_SECTIONS_MAX)
			return errf(err, errlen, -EINVAL, "offset %zu: more than %u sections", off,
				    SNAP_SECTIONS_MAX);
		if (snap_r_find(r, s.kind, s.name, s.inst))
			return errf(err, errlen, -EINVAL, "offset %zu: %s section '%s' %" PRIu32 " twice",
				    off, kind_name(s.kind), s.name, s.inst);
		if (r->n == cap) {
			struct snap_sec *n;

			cap = cap ? cap * 2 : 32;
			n = realloc(r->secs, cap * sizeof(*n));
			if (!n)
				return errf(err, errlen, -ENOMEM, "out of memory");
			r->secs = n;
		}
		r->secs[r->n++] = s;
		off += SEC_LEN + PAD8(s.len);
	}
}

const struct snap_sec *snap_r_find(const struct snap_r *r, enum snap_kind kind, const char *name,
				   uint32_t inst)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->secs[i].kind == kind && r->secs[i].inst == inst &&
		    !strcmp(r->secs[i].name, name))
			return &r->secs[i];
	return NULL;
}

void snap_r_free(struct snap_r *r)
{
	free(r->secs);
	memset(r, 0, sizeof(*r));
}
