/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kernel inside a bzImage, decompressed by cubicle instead of by the
 * kernel's own decompressor in the guest (boot.decompress = "vmm"), laid
 * out in guest RAM as that decompressor would lay it out, and relocated
 * for KASLR. No file I/O here (boot.c reads the payload): unit tests feed
 * it buffers.
 *
 * Facts used (Documentation/arch/x86/boot.rst, arch/x86/boot/compressed/):
 * the payload is the stripped vmlinux ELF file followed, when the kernel
 * was built with CONFIG_RANDOMIZE_BASE, by its relocation table, the two
 * compressed together; the payload's last four bytes are the decompressed
 * size (gzip's own trailer, appended for the others). The table is 32-bit
 * words, each a kernel virtual address sign-extended to 64 bits: a zero,
 * the 64-bit relocations, a zero, the inverse 32-bit relocations (kernels
 * before 6.12 only), a zero, the 32-bit relocations. A virtual shift of
 * delta adds delta to each 64-bit and 32-bit place and subtracts it from
 * each inverse one. The kernel then runs at its link-time physical address
 * (pref_address) and finds its virtual one by itself.
 */
#include <elf.h>
#include <errno.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <zlib.h>
#include <zstd.h>

#include "boot.h"
#include "cnode.h"

#define LZ4_LEGACY_MAGIC 0x184c2102u
#define LZ4_LEGACY_BLOCK (8u << 20) /* what a legacy block decompresses to, at most */
#define CHUNK (8u << 20)            /* the output window every format writes through */
#define RELOCS_MAX (64u << 20)      /* a relocation table longer than this is not one */

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Room for what is read or decompressed once, on 2 MiB pages where the host
 * has them: a handful of page faults instead of one per 4 KiB (each costs
 * tens of microseconds where the host is itself a VM). */
#define HUGE (2ull << 20)
void *x86_unpack_alloc(size_t len)
{
	size_t span = (len + HUGE - 1) & ~(HUGE - 1);
	void *p = mem_anon_aligned(span);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, span, MADV_HUGEPAGE); /* advice: without it, 4 KiB pages */
	return p;
}

void x86_unpack_release(void *p, size_t len)
{
	if (p)
		munmap(p, (len + HUGE - 1) & ~(HUGE - 1));
}

enum x86_payload_kind x86_payload_kind(const void *payload, size_t len)
{
	const uint8_t *p = payload;

	if (len < 8)
		return X86_PAYLOAD_OTHER;
	if (le32(p) == LZ4_LEGACY_MAGIC)
		return X86_PAYLOAD_LZ4;
	if (le32(p) == 0xfd2fb528u)
		return X86_PAYLOAD_ZSTD;
	if (p[0] == 0x1f && p[1] == 0x8b)
		return X86_PAYLOAD_GZIP;
	return X86_PAYLOAD_OTHER;
}

const char *x86_payload_name(const void *payload, size_t len)
{
	static const char *const names[] = { [X86_PAYLOAD_LZ4] = "lz4", [X86_PAYLOAD_ZSTD] = "zstd",
					     [X86_PAYLOAD_GZIP] = "gzip" };
	const uint8_t *p = payload;
	enum x86_payload_kind k = x86_payload_kind(payload, len);

	if (k != X86_PAYLOAD_OTHER)
		return names[k];
	if (len >= 6 && !memcmp(p, "\xfd" "7zXZ", 6))
		return "xz";
	if (len >= 3 && !memcmp(p, "BZh", 3))
		return "bzip2";
	if (len >= 3 && p[0] == 0x5d && p[1] == 0 && p[2] == 0)
		return "lzma";
	if (len >= 9 && !memcmp(p, "\x89LZO", 4))
		return "lzo";
	return "an unknown format";
}

/* ---- the sink: decompressed bytes, in order, into guest RAM ---- */

struct sink {
	const struct guest_mem *m;
	uint64_t ram_lo, ram_hi; /* where the segments may go */
	uint64_t total;    /* what the trailer says the payload decompresses to */
	uint64_t done;     /* bytes seen so far */
	bool have_hdr;
	Elf64_Phdr ph[16]; /* the PT_LOAD segments */
	unsigned n_ph;
	uint64_t elf_end;  /* where the ELF file ends: the relocation table starts */
	uint8_t *relocs;   /* [elf_end, total) */
	char *err;
	size_t errlen;
};

/* The first chunk holds the ELF and program headers: check them and every
 * segment's place in RAM before anything is copied. */
static int sink_headers(struct sink *s, const uint8_t *p, size_t n, struct x86_elf_info *ei)
{
	Elf64_Ehdr eh;
	char why[160];
	int ret;

	if (n < sizeof(eh))
		return errf(s->err, s->errlen, -ENOEXEC,
			    "the decompressed kernel is too short for an ELF header");
	memcpy(&eh, p, sizeof(eh));
	if (!memcmp(eh.e_ident, ELFMAG, SELFMAG) && eh.e_phentsize == sizeof(Elf64_Phdr) &&
	    (eh.e_phoff > n || (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > n - eh.e_phoff))
		return errf(s->err, s->errlen, -ENOEXEC,
			    "the decompressed kernel's program headers are not at its start");
	/* the headers are in p; the segments are checked against the whole */
	ret = x86_elf_parse(p, s->total, ei, why, sizeof(why));
	if (ret)
		return errf(s->err, s->errlen, ret, "the decompressed kernel: %s", why);
	if (ei->lo < s->ram_lo || ei->hi > s->ram_hi)
		return errf(s->err, s->errlen, -ENOMEM,
			    "the decompressed kernel's segments span [0x%llx, 0x%llx); they must lie between 0x%llx and the end of low RAM (0x%llx)",
			    (unsigned long long)ei->lo, (unsigned long long)ei->hi,
			    (unsigned long long)s->ram_lo, (unsigned long long)s->ram_hi);
	s->elf_end = eh.e_phoff + (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr);
	if (eh.e_shoff && eh.e_shentsize && eh.e_shoff <= s->total &&
	    (uint64_t)eh.e_shnum * eh.e_shentsize <= s->total - eh.e_shoff &&
	    eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize > s->elf_end)
		s->elf_end = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, p + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD || !ph.p_memsz)
			continue;
		if (s->n_ph == sizeof(s->ph) / sizeof(s->ph[0]))
			return errf(s->err, s->errlen, -ENOEXEC,
				    "the decompressed kernel has more than %zu loadable segments",
				    sizeof(s->ph) / sizeof(s->ph[0]));
		if (!mem_map(s->m, ph.p_paddr, ph.p_memsz))
			return errf(s->err, s->errlen, -EFAULT,
				    "the decompressed kernel's segment [0x%llx, 0x%llx) is not in guest RAM",
				    (unsigned long long)ph.p_paddr,
				    (unsigned long long)(ph.p_paddr + ph.p_memsz));
		if (ph.p_offset + ph.p_filesz > s->elf_end)
			s->elf_end = ph.p_offset + ph.p_filesz;
		s->ph[s->n_ph++] = ph;
	}
	if (s->total - s->elf_end > RELOCS_MAX || (s->total - s->elf_end) % 4)
		return errf(s->err, s->errlen, -ENOEXEC,
			    "the decompressed kernel has %llu bytes after its ELF file: not a relocation table",
			    (unsigned long long)(s->total - s->elf_end));
	if (s->total > s->elf_end) {
		s->relocs = malloc(s->total - s->elf_end);
		if (!s->relocs)
			return errf(s->err, s->errlen, -ENOMEM, "%s", strerror(ENOMEM));
	}
	s->have_hdr = true;
	return 0;
}

/* Bytes [off, off+n) of the decompressed file to where they belong: the
 * parts of segments into guest RAM, the part past the ELF file into the
 * relocation table. */
static void sink_scatter(struct sink *s, uint64_t off, const uint8_t *p, size_t n)
{
	for (unsigned i = 0; i < s->n_ph; i++) {
		const Elf64_Phdr *ph = &s->ph[i];
		uint64_t lo = off > ph->p_offset ? off : ph->p_offset;
		uint64_t hi = off + n < ph->p_offset + ph->p_filesz ? off + n
								    : ph->p_offset + ph->p_filesz;

		if (lo < hi)
			memcpy(mem_map(s->m, ph->p_paddr + (lo - ph->p_offset), hi - lo), p + (lo - off),
			       hi - lo);
	}
	if (off + n > s->elf_end) {
		uint64_t from = off > s->elf_end ? off : s->elf_end;

		memcpy(s->relocs + (from - s->elf_end), p + (from - off), off + n - from);
	}
}

/* The next @n bytes, in order; the first call checks the headers. */
static int sink_put(struct sink *s, const uint8_t *p, size_t n, struct x86_elf_info *ei)
{
	int ret;

	if (!n)
		return 0;
	if (n > s->total - s->done)
		return errf(s->err, s->errlen, -ENOEXEC,
			    "the payload decompresses to more than the %llu bytes its trailer says",
			    (unsigned long long)s->total);
	if (!s->have_hdr && (ret = sink_headers(s, p, n, ei)))
		return ret;
	sink_scatter(s, s->done, p, n);
	s->done += n;
	return 0;
}

/* Where [off, off+n) of the file lies whole inside one segment's file
 * part: its place in guest RAM, which a block can be decompressed to
 * directly; NULL otherwise. */
static uint8_t *sink_direct(const struct sink *s, uint64_t off, size_t n)
{
	for (unsigned i = 0; i < s->n_ph; i++) {
		const Elf64_Phdr *ph = &s->ph[i];

		if (off >= ph->p_offset && off + n <= ph->p_offset + ph->p_filesz)
			return mem_map(s->m, ph->p_paddr + (off - ph->p_offset), n);
	}
	return NULL;
}

/* ---- the decompressors: each writes through one CHUNK-sized window ---- */

/*
 * lz4 -l's legacy frames: blocks of 8 MiB of output each (the last one
 * shorter), each compressed on its own. The first (it holds the ELF
 * headers) goes through the window; a later one straight into guest RAM
 * when its output lies inside one segment (most of the kernel: one copy
 * fewer), else through the window too. (Decompressing the blocks on
 * several threads was measured on a 2-core host and gained nothing there:
 * the time is the first touch of guest RAM, not lz4.)
 */
#define LZ4_MAX_BLOCKS (X86_VMLINUX_MAX / LZ4_LEGACY_BLOCK + 1)

static int unpack_lz4(const uint8_t *in, size_t len, uint8_t *win, struct sink *s,
		      struct x86_elf_info *ei)
{
	size_t pos = 4, at[LZ4_MAX_BLOCKS];
	uint32_t csize[LZ4_MAX_BLOCKS];
	unsigned n_blocks = 0;
	int ret;

	while (pos < len) {
		uint32_t c;

		if (len - pos < 4)
			return errf(s->err, s->errlen, -ENOEXEC, "lz4: truncated block header at %zu",
				    pos);
		c = le32(in + pos);
		pos += 4;
		if (c == LZ4_LEGACY_MAGIC)
			continue; /* a second legacy stream, concatenated */
		if (c > (uint32_t)LZ4_compressBound(LZ4_LEGACY_BLOCK) || c > len - pos)
			return errf(s->err, s->errlen, -ENOEXEC,
				    "lz4: block at %zu claims %u bytes (%zu left)", pos - 4, c,
				    len - pos);
		if (n_blocks == LZ4_MAX_BLOCKS)
			return errf(s->err, s->errlen, -ENOEXEC, "lz4: more than %u blocks",
				    (unsigned)LZ4_MAX_BLOCKS);
		at[n_blocks] = pos;
		csize[n_blocks++] = c;
		pos += c;
	}
	if (!n_blocks || s->total <= (uint64_t)(n_blocks - 1) * LZ4_LEGACY_BLOCK ||
	    s->total > (uint64_t)n_blocks * LZ4_LEGACY_BLOCK)
		return errf(s->err, s->errlen, -ENOEXEC,
			    "lz4: %u blocks of 8 MiB cannot make the %llu bytes the payload's trailer says",
			    n_blocks, (unsigned long long)s->total);
	for (unsigned k = 0; k < n_blocks; k++) {
		uint64_t off = (uint64_t)k * LZ4_LEGACY_BLOCK;
		size_t want = k + 1 < n_blocks ? LZ4_LEGACY_BLOCK : (size_t)(s->total - off);
		uint8_t *dst = k ? sink_direct(s, off, want) : NULL;
		int n = LZ4_decompress_safe((const char *)in + at[k], (char *)(dst ? dst : win),
					    (int)csize[k], (int)want);

		if (n != (int)want)
			return errf(s->err, s->errlen, -ENOEXEC,
				    n < 0 ? "lz4: block at %zu is corrupt, or longer than the payload's trailer says"
					  : "lz4: block at %zu is shorter than 8 MiB or than the payload's trailer says",
				    at[k] - 4);
		if (dst)
			s->done += want;
		else if ((ret = sink_put(s, win, want, ei)))
			return ret;
	}
	return 0;
}

static int unpack_zstd(const uint8_t *in, size_t len, uint8_t *win, struct sink *s,
		       struct x86_elf_info *ei)
{
	ZSTD_DStream *z = ZSTD_createDStream();
	ZSTD_inBuffer ib = { in, len, 0 };
	size_t r = 1;
	int ret = 0;

	if (!z)
		return errf(s->err, s->errlen, -ENOMEM, "zstd: %s", strerror(ENOMEM));
	/* the kernel's own decompressor allows a window this large */
	ZSTD_DCtx_setParameter(z, ZSTD_d_windowLogMax, 27);
	while (!ret && (ib.pos < ib.size || r)) {
		ZSTD_outBuffer ob = { win, CHUNK, 0 };

		r = ZSTD_decompressStream(z, &ob, &ib);
		if (ZSTD_isError(r)) {
			ret = errf(s->err, s->errlen, -ENOEXEC, "zstd: %s", ZSTD_getErrorName(r));
			break;
		}
		if (!ob.pos && ib.pos == ib.size && r) {
			ret = errf(s->err, s->errlen, -ENOEXEC, "zstd: the payload ends inside a frame");
			break;
		}
		ret = sink_put(s, win, ob.pos, ei);
	}
	ZSTD_freeDStream(z);
	return ret;
}

static int unpack_gzip(const uint8_t *in, size_t len, uint8_t *win, struct sink *s,
		       struct x86_elf_info *ei)
{
	z_stream z;
	int zr = Z_OK, ret = 0;

	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return errf(s->err, s->errlen, -ENOMEM, "gzip: %s", z.msg ? z.msg : "inflateInit2");
	z.next_in = (Bytef *)in;
	while (!ret && zr != Z_STREAM_END) {
		size_t step = len - (size_t)((const uint8_t *)z.next_in - in);

		z.avail_in = step > UINT32_MAX ? UINT32_MAX : (uInt)step;
		z.next_out = win;
		z.avail_out = CHUNK;
		zr = inflate(&z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END) {
			ret = errf(s->err, s->errlen, -ENOEXEC, "gzip: %s",
				   zr == Z_BUF_ERROR ? "the payload ends inside the stream"
				   : z.msg ? z.msg : "corrupt");
			break;
		}
		ret = sink_put(s, win, CHUNK - z.avail_out, ei);
	}
	inflateEnd(&z);
	return ret;
}

int x86_vmlinux_unpack(const struct guest_mem *m, uint64_t ram_lo, uint64_t ram_hi,
		       const void *payload, size_t len, struct x86_vmlinux *out, char *err,
		       size_t errlen)
{
	const uint8_t *in = payload;
	enum x86_payload_kind kind = x86_payload_kind(payload, len);
	struct sink s = { .m = m, .ram_lo = ram_lo, .ram_hi = ram_hi, .err = err,
			  .errlen = errlen };
	uint64_t limit = ram_hi > X86_VMLINUX_MAX ? X86_VMLINUX_MAX : ram_hi;
	uint8_t *win;
	int ret;

	memset(out, 0, sizeof(*out));
	if (kind == X86_PAYLOAD_OTHER)
		return errf(err, errlen, -ENOTSUP, "cubicle does not decompress %s kernels",
			    x86_payload_name(payload, len));
	s.total = le32(in + len - 4);
	if (s.total < sizeof(Elf64_Ehdr) || s.total > limit)
		return errf(err, errlen, -ENOEXEC,
			    "the payload's trailer says it decompresses to %llu bytes (at most %llu fit)",
			    (unsigned long long)s.total, (unsigned long long)limit);
	win = x86_unpack_alloc(CHUNK);
	if (!win)
		return errf(err, errlen, -ENOMEM, "%s", strerror(errno));
	/* lz4 and zstd end at the size the build appended; gzip's is its own */
	if (kind == X86_PAYLOAD_LZ4)
		ret = unpack_lz4(in, len - 4, win, &s, &out->elf);
	else if (kind == X86_PAYLOAD_ZSTD)
		ret = unpack_zstd(in, len - 4, win, &s, &out->elf);
	else
		ret = unpack_gzip(in, len, win, &s, &out->elf);
	x86_unpack_release(win, CHUNK);
	if (!ret && s.done != s.total)
		ret = errf(err, errlen, -ENOEXEC,
			   "the payload decompresses to %llu bytes; its trailer says %llu",
			   (unsigned long long)s.done, (unsigned long long)s.total);
	if (ret) {
		free(s.relocs);
		return ret;
	}
	/* the bss past each segment's file part */
	for (unsigned i = 0; i < s.n_ph; i++)
		memset((uint8_t *)mem_map(m, s.ph[i].p_paddr, s.ph[i].p_memsz) + s.ph[i].p_filesz, 0,
		       s.ph[i].p_memsz - s.ph[i].p_filesz);
	memcpy(out->seg, s.ph, sizeof(s.ph));
	out->n_seg = s.n_ph;
	out->relocs = s.relocs;
	out->relocs_len = s.total - s.elf_end;
	out->size = s.total;
	return 0;
}

void x86_vmlinux_free(struct x86_vmlinux *v)
{
	free(v->relocs);
	v->relocs = NULL;
	v->relocs_len = 0;
}

/* ---- relocation ---- */

int x86_vmlinux_reloc_sets(const struct x86_vmlinux *v, size_t count[3])
{
	const uint8_t *r = v->relocs;
	size_t n = v->relocs_len / 4, zeros[3], nz = 0;

	count[0] = count[1] = count[2] = 0;
	if (!n)
		return 0;
	if (le32(r))
		return -ENOEXEC;
	for (size_t i = 0; i < n; i++)
		if (!le32(r + 4 * i)) {
			if (nz == 3)
				return -ENOEXEC;
			zeros[nz++] = i;
		}
	if (nz < 2)
		return -ENOEXEC;
	/* [0] 64-bit, [1] inverse 32-bit (three sets only), [2] 32-bit */
	count[0] = zeros[1] - zeros[0] - 1;
	if (nz == 3)
		count[1] = zeros[2] - zeros[1] - 1;
	count[2] = n - zeros[nz - 1] - 1;
	return (int)nz;
}

/* The guest RAM behind @size bytes at kernel virtual address @va: the
 * kernel's virtual addresses are its physical ones plus __START_KERNEL_map
 * (the per-CPU segment's p_vaddr, 0, is not where its data is loaded: its
 * relocations name the place it is loaded at); the place must lie in a
 * segment. */
#define START_KERNEL_MAP 0xffffffff80000000ULL
static uint8_t *reloc_place(const struct guest_mem *m, const struct x86_vmlinux *v, uint64_t va,
			    unsigned size)
{
	uint64_t pa = va - START_KERNEL_MAP;

	if (va < START_KERNEL_MAP)
		return NULL;
	for (unsigned i = 0; i < v->n_seg; i++) {
		const Elf64_Phdr *ph = &v->seg[i];

		if (pa >= ph->p_paddr && pa - ph->p_paddr <= ph->p_memsz &&
		    ph->p_memsz - (pa - ph->p_paddr) >= size)
			return mem_map(m, pa, size);
	}
	return NULL;
}

int x86_vmlinux_relocate(const struct guest_mem *m, const struct x86_vmlinux *v, int64_t delta,
			 char *err, size_t errlen)
{
	static const char *const set_name[3] = { "64-bit", "inverse 32-bit", "32-bit" };
	const uint8_t *r = v->relocs;
	size_t count[3], i = 4;
	int sets = x86_vmlinux_reloc_sets(v, count);

	if (sets < 0)
		return errf(err, errlen, -ENOEXEC,
			    "the %zu bytes after the decompressed kernel are not a relocation table",
			    v->relocs_len);
	if (!sets)
		return delta ? errf(err, errlen, -ENOEXEC, "the kernel has no relocation table") : 0;
	/* two passes: nothing is written unless every place is in the kernel */
	for (int pass = 0; pass < 2; pass++) {
		i = 4;
		for (int set = 0; set < 3; set++) {
			unsigned size = set == 0 ? 8 : 4;

			if (set == 1 && sets == 2)
				continue;
			for (size_t k = 0; k < count[set]; k++, i += 4) {
				uint64_t va = (uint64_t)(int64_t)(int32_t)le32(r + i);
				uint8_t *p = reloc_place(m, v, va, size);
				uint64_t q;
				uint32_t d;

				if (!p)
					return errf(err, errlen, -ENOEXEC,
						    "%s relocation at 0x%llx is outside the kernel's segments",
						    set_name[set], (unsigned long long)va);
				if (!pass)
					continue;
				if (size == 8) {
					memcpy(&q, p, 8);
					q += (uint64_t)delta;
					memcpy(p, &q, 8);
				} else {
					memcpy(&d, p, 4);
					d = set == 1 ? d - (uint32_t)delta : d + (uint32_t)delta;
					memcpy(p, &d, 4);
				}
			}
			i += 4; /* the next set's zero */
		}
	}
	return 0;
}

/* The decompressor's choice (arch/x86/boot/compressed/kaslr.c): a
 * kernel_alignment-aligned virtual offset from LOAD_PHYSICAL_ADDR up to
 * where the image still ends inside KERNEL_IMAGE_SIZE, 1 GiB whenever the
 * kernel carries relocations (CONFIG_RANDOMIZE_BASE). */
uint64_t x86_kaslr_slots(uint64_t pref, uint64_t span, uint64_t align)
{
	const uint64_t image_max = 1ULL << 30;

	if (!align || pref + span > image_max)
		return 1;
	return 1 + (image_max - pref - span) / align;
}

bool x86_cmdline_has(const char *cmdline, const char *word)
{
	size_t wl = strlen(word);
	const char *p = cmdline;

	while (p && *p) {
		const char *start;
		bool quoted = false;

		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		start = p;
		while (*p && (quoted || (*p != ' ' && *p != '\t' && *p != '\n'))) {
			if (*p == '"')
				quoted = !quoted;
			p++;
		}
		if ((size_t)(p - start) == 2 && !memcmp(start, "--", 2))
			return false; /* the rest is init's */
		if ((size_t)(p - start) == wl && !memcmp(start, word, wl))
			return true;
	}
	return false;
}
