/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of boot.decompress = "vmm" (arch/x86_64/unpack.c) on fake
 * guest RAM: a small vmlinux with a relocation table after it, compressed
 * as a bzImage's payload is (lz4 legacy frames, zstd, gzip), decompressed
 * into place and relocated; corrupt and foreign payloads refused. */
#include <elf.h>
#include <errno.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "../../arch/x86_64/boot.h"
#include "cunit_main.h"

#define MiB (1ULL << 20)
#define KMAP 0xffffffff80000000ULL
#define TEXT_PA (16 * MiB)
/* lz4 blocks of 8 MiB: the first holds the headers, the second lies inside
 * the text (decompressed straight into RAM), the
 * third holds the text's end, the data and the table (through a window) */
#define TEXT_LEN (20 * MiB)
#define DATA_PA (TEXT_PA + 22 * MiB)
#define DATA_FILE 0x3000
#define DATA_MEM 0x5000
#define RAM (64 * MiB)

/* Places the relocation table names, as offsets into the text segment. */
#define R64_A 0x1000
#define R64_B (8 * MiB + 0x10) /* in the second lz4 block */
#define RINV 0x2000
#define R32_A 0x3000
#define R32_B (TEXT_LEN - 4)

static uint8_t *file;
static size_t file_len;
static size_t lz4_block = 8 * MiB; /* what lz4 -l writes; tests change it */

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

/* The ELF file (header, two program headers, text, data) and the table:
 * 0, 64-bit x2, 0, inverse x1, 0, 32-bit x2 (three sets), or without the
 * inverse set (two). @bad_reloc names a place outside every segment. */
static void build(bool three_sets, bool bad_reloc)
{
	size_t text_off = 0x1000, data_off = text_off + TEXT_LEN, elf_end = data_off + DATA_FILE;
	uint32_t table[9];
	unsigned n = 0;
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph[2] = { { 0 } };
	uint64_t q;

	free(file);
	table[n++] = 0;
	table[n++] = (uint32_t)(KMAP + TEXT_PA + R64_A);
	table[n++] = (uint32_t)(KMAP + TEXT_PA + (bad_reloc ? 64 * MiB : R64_B));
	if (three_sets) {
		table[n++] = 0;
		table[n++] = (uint32_t)(KMAP + TEXT_PA + RINV);
	}
	table[n++] = 0;
	table[n++] = (uint32_t)(KMAP + TEXT_PA + R32_A);
	table[n++] = (uint32_t)(KMAP + TEXT_PA + R32_B);
	file_len = elf_end + 4 * n;
	file = calloc(1, file_len);
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_X86_64;
	eh.e_entry = TEXT_PA;
	eh.e_phoff = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = 2;
	memcpy(file, &eh, sizeof(eh));
	ph[0] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = text_off, .p_vaddr = KMAP + TEXT_PA,
			      .p_paddr = TEXT_PA, .p_filesz = TEXT_LEN, .p_memsz = TEXT_LEN };
	ph[1] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = data_off, .p_vaddr = KMAP + DATA_PA,
			      .p_paddr = DATA_PA, .p_filesz = DATA_FILE, .p_memsz = DATA_MEM };
	memcpy(file + sizeof(eh), ph, sizeof(ph));
	for (size_t i = 0; i < TEXT_LEN; i += 4096)
		file[text_off + i] = (uint8_t)(i >> 12);
	for (size_t i = 0; i < DATA_FILE; i++)
		file[data_off + i] = 0xd0 ^ (uint8_t)i;
	q = KMAP + TEXT_PA + 0x100;
	memcpy(file + text_off + R64_A, &q, 8);
	memcpy(file + text_off + R64_B, &q, 8);
	put32(file + text_off + RINV, 0x1000);
	put32(file + text_off + R32_A, (uint32_t)(KMAP + TEXT_PA + 0x200));
	put32(file + text_off + R32_B, (uint32_t)(KMAP + TEXT_PA + 0x300));
	memcpy(file + elf_end, table, 4 * n);
}

static uint32_t le32_of(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static void append_size(uint8_t *out, size_t *len)
{
	put32(out + *len, (uint32_t)file_len);
	*len += 4;
}

/* lz4 -l: the legacy magic, then 8 MiB blocks each after its size. */
static uint8_t *pack_lz4(size_t *len)
{
	uint8_t *out = malloc(LZ4_compressBound((int)file_len) + 64);
	size_t pos = 4;

	put32(out, 0x184c2102);
	for (size_t off = 0; off < file_len; off += lz4_block) {
		size_t n = file_len - off < lz4_block ? file_len - off : lz4_block;
		int c = LZ4_compress_default((const char *)file + off, (char *)out + pos + 4, (int)n,
					     LZ4_compressBound((int)n));

		CU_ASSERT_FATAL(c > 0);
		put32(out + pos, (uint32_t)c);
		pos += 4 + (size_t)c;
	}
	*len = pos;
	append_size(out, len);
	return out;
}

static uint8_t *pack_zstd(size_t *len)
{
	size_t cap = ZSTD_compressBound(file_len) + 4;
	uint8_t *out = malloc(cap);

	*len = ZSTD_compress(out, cap, file, file_len, 3);
	CU_ASSERT_FATAL(!ZSTD_isError(*len));
	append_size(out, len);
	return out;
}

static uint8_t *pack_gzip(size_t *len)
{
	z_stream z = { 0 };
	uint8_t *out;

	CU_ASSERT_FATAL(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) ==
			Z_OK);
	out = malloc(deflateBound(&z, file_len));
	z.next_in = file;
	z.avail_in = (uInt)file_len;
	z.next_out = out;
	z.avail_out = (uInt)deflateBound(&z, file_len);
	CU_ASSERT_FATAL(deflate(&z, Z_FINISH) == Z_STREAM_END);
	*len = z.total_out;
	deflateEnd(&z);
	return out;
}

static struct guest_mem ram(void)
{
	struct guest_mem m;
	struct mem_bank bank = { .gpa = 0, .size = RAM };

	CU_ASSERT_EQUAL_FATAL(mem_create(&m, RAM, &bank, 1), 0);
	memset(m.host, 0xaa, RAM); /* RAM a guest left: the bss must be zeroed */
	return m;
}

static uint64_t at64(const struct guest_mem *m, uint64_t gpa)
{
	uint64_t v;

	memcpy(&v, mem_map(m, gpa, 8), 8);
	return v;
}

static uint32_t at32(const struct guest_mem *m, uint64_t gpa)
{
	uint32_t v;

	memcpy(&v, mem_map(m, gpa, 4), 4);
	return v;
}

static void check_format(uint8_t *(*pack)(size_t *), const char *name)
{
	struct guest_mem m = ram();
	struct x86_vmlinux v;
	size_t len, count[3];
	uint8_t *p;
	char err[256] = "";
	const uint8_t *text, *data;
	int ret;

	build(true, false);
	p = pack(&len);
	CU_ASSERT_STRING_EQUAL(x86_payload_name(p, len), name);
	CU_ASSERT_NOT_EQUAL(x86_payload_kind(p, len), X86_PAYLOAD_OTHER);
	ret = x86_vmlinux_unpack(&m, MiB, RAM, p, len, &v, err, sizeof(err));
	if (ret)
		fprintf(stderr, "%s: %s\n", name, err);
	CU_ASSERT_EQUAL_FATAL(ret, 0);
	CU_ASSERT_EQUAL(v.size, file_len);
	CU_ASSERT_EQUAL(v.elf.entry, TEXT_PA);
	CU_ASSERT_EQUAL(v.elf.lo, TEXT_PA);
	CU_ASSERT_EQUAL(v.elf.hi, DATA_PA + DATA_MEM);
	CU_ASSERT_EQUAL(v.n_seg, 2);
	text = mem_map(&m, TEXT_PA, TEXT_LEN);
	data = mem_map(&m, DATA_PA, DATA_MEM);
	CU_ASSERT(!memcmp(text, file + 0x1000, TEXT_LEN));
	CU_ASSERT(!memcmp(data, file + 0x1000 + TEXT_LEN, DATA_FILE));
	CU_ASSERT_EQUAL(data[DATA_FILE], 0);
	CU_ASSERT_EQUAL(data[DATA_MEM - 1], 0);
	CU_ASSERT_EQUAL(*(const uint8_t *)mem_map(&m, DATA_PA + DATA_MEM, 1), 0xaa);
	CU_ASSERT_EQUAL(*(const uint8_t *)mem_map(&m, TEXT_PA - 1, 1), 0xaa);
	CU_ASSERT_EQUAL(x86_vmlinux_reloc_sets(&v, count), 3);
	CU_ASSERT_EQUAL(count[0], 2);
	CU_ASSERT_EQUAL(count[1], 1);
	CU_ASSERT_EQUAL(count[2], 2);

	CU_ASSERT_EQUAL(x86_vmlinux_relocate(&m, &v, 0x4600000, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(at64(&m, TEXT_PA + R64_A), KMAP + TEXT_PA + 0x100 + 0x4600000);
	CU_ASSERT_EQUAL(at64(&m, TEXT_PA + R64_B), KMAP + TEXT_PA + 0x100 + 0x4600000);
	CU_ASSERT_EQUAL(at32(&m, TEXT_PA + RINV), (uint32_t)(0x1000 - 0x4600000));
	CU_ASSERT_EQUAL(at32(&m, TEXT_PA + R32_A), (uint32_t)(KMAP + TEXT_PA + 0x200 + 0x4600000));
	CU_ASSERT_EQUAL(at32(&m, TEXT_PA + R32_B), (uint32_t)(KMAP + TEXT_PA + 0x300 + 0x4600000));
	x86_vmlinux_free(&v);
	free(p);
	mem_destroy(&m);
}

static void test_lz4(void)
{
	check_format(pack_lz4, "lz4");
}

static void test_zstd(void)
{
	check_format(pack_zstd, "zstd");
}

static void test_gzip(void)
{
	check_format(pack_gzip, "gzip");
}

/* Linux 6.12 dropped the inverse set: two sets, each applied. */
static void test_two_sets(void)
{
	struct guest_mem m = ram();
	struct x86_vmlinux v;
	size_t len, count[3];
	uint8_t *p;
	char err[256];

	build(false, false);
	p = pack_lz4(&len);
	CU_ASSERT_EQUAL_FATAL(x86_vmlinux_unpack(&m, MiB, RAM, p, len, &v, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(x86_vmlinux_reloc_sets(&v, count), 2);
	CU_ASSERT_EQUAL(count[0], 2);
	CU_ASSERT_EQUAL(count[1], 0);
	CU_ASSERT_EQUAL(count[2], 2);
	CU_ASSERT_EQUAL(x86_vmlinux_relocate(&m, &v, 0x200000, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(at64(&m, TEXT_PA + R64_A), KMAP + TEXT_PA + 0x100 + 0x200000);
	CU_ASSERT_EQUAL(at32(&m, TEXT_PA + RINV), 0x1000); /* not named: untouched */
	CU_ASSERT_EQUAL(at32(&m, TEXT_PA + R32_B), (uint32_t)(KMAP + TEXT_PA + 0x300 + 0x200000));
	x86_vmlinux_free(&v);
	free(p);
	mem_destroy(&m);
}

/* A place outside the kernel: refused, and nothing at all written. */
static void test_reloc_outside(void)
{
	struct guest_mem m = ram();
	struct x86_vmlinux v;
	size_t len;
	uint8_t *p;
	char err[256] = "";

	build(true, true);
	p = pack_zstd(&len);
	CU_ASSERT_EQUAL_FATAL(x86_vmlinux_unpack(&m, MiB, RAM, p, len, &v, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(x86_vmlinux_relocate(&m, &v, 0x200000, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "outside the kernel's segments"));
	CU_ASSERT_EQUAL(at64(&m, TEXT_PA + R64_A), KMAP + TEXT_PA + 0x100);
	x86_vmlinux_free(&v);
	/* a table that is not one */
	v.relocs = (uint8_t *)"\1\0\0\0\0\0\0\0";
	v.relocs_len = 8;
	CU_ASSERT_EQUAL(x86_vmlinux_relocate(&m, &v, 0x200000, err, sizeof(err)), -ENOEXEC);
	free(p);
	mem_destroy(&m);
}

static void test_refusals(void)
{
	struct guest_mem m = ram();
	struct x86_vmlinux v;
	size_t len;
	uint8_t *p;
	char err[256] = "";

	build(true, false);
	/* a size trailer that is not the truth */
	p = pack_lz4(&len);
	put32(p + len - 4, (uint32_t)file_len + 4);
	CU_ASSERT_EQUAL(x86_vmlinux_unpack(&m, MiB, RAM, p, len, &v, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "trailer"));
	put32(p + len - 4, (uint32_t)file_len - 4);
	CU_ASSERT_EQUAL(x86_vmlinux_unpack(&m, MiB, RAM, p, len, &v, err, sizeof(err)), -ENOEXEC);
	put32(p + len - 4, (uint32_t)file_len);
	/* a block that claims more than there is, and one cut short */
	CU_ASSERT_EQUAL(x86_vmlinux_unpack(&m, MiB, RAM, p, len - 100, &v, err, sizeof(err)),
			-ENOEXEC);
	p[4 + 4 + 40] ^= 0xff;
	p[4 + 4 + 41] ^= 0x5a;
	CU_ASSERT_NOT_EQUAL(x86_vmlinux_unpack(&m, MiB, RAM, p, len, &v, err, sizeof(err)), 0);
	free(p);
	/* blocks that are not 8 MiB each: refused, not laid out at the wrong place */
	lz4_block = 4 * MiB;
	p = pack_lz4(&len);
	lz4_block = 8 * MiB;
	CU_ASSERT_EQUAL(x86_vmlinux_unpack(&m, MiB, RAM, p, len, &v, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "8 MiB"));
	free(p);
	/* a corrupt block past the first (decompressed straight into RAM):
	 * refused, named */
	p = pack_lz4(&len);
	{
		size_t b1 = 4 + 4 + le32_of(p + 4);

		memset(p + b1 + 4 + 16, 0xff, 64);
		CU_ASSERT_EQUAL(x86_vmlinux_unpack(&m, MiB, RAM, p, len, &v, err, sizeof(err)),
				-ENOEXEC);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "lz4: block at "));
	}
	free(p);
	/* zstd cut inside its frame */
	p = pack_zstd(&len);
	memmove(p + len / 2, p + len - 4, 4);
	CU_ASSERT_EQUAL(x86_vmlinux_unpack(&m, MiB, RAM, p, len / 2 + 4, &v, err, sizeof(err)),
			-ENOEXEC);
	free(p);
	/* segments below the floor or past RAM's end: nothing copied */
	p = pack_gzip(&len);
	memset(m.host, 0xaa, RAM);
	CU_ASSERT_EQUAL(x86_vmlinux_unpack(&m, 32 * MiB, RAM, p, len, &v, err, sizeof(err)),
			-ENOMEM);
	CU_ASSERT_EQUAL(x86_vmlinux_unpack(&m, MiB, 30 * MiB, p, len, &v, err, sizeof(err)),
			-ENOMEM);
	CU_ASSERT_EQUAL(*(const uint8_t *)mem_map(&m, TEXT_PA + 1, 1), 0xaa);
	free(p);
	/* compressions cubicle leaves to the kernel */
	CU_ASSERT_EQUAL(x86_vmlinux_unpack(&m, MiB, RAM, "\xfd" "7zXZ\0\0\0\0\0\0", 12, &v, err,
					   sizeof(err)),
			-ENOTSUP);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "xz"));
	CU_ASSERT_STRING_EQUAL(x86_payload_name("BZh91AY&SY", 10), "bzip2");
	CU_ASSERT_STRING_EQUAL(x86_payload_name("\x5d\0\0\x80\0\0\0\0", 8), "lzma");
	CU_ASSERT_EQUAL(x86_payload_kind("\x02\x21\x4c\x18", 4), X86_PAYLOAD_OTHER); /* too short */
	mem_destroy(&m);
}

static void test_kaslr_inputs(void)
{
	CU_ASSERT_TRUE(x86_cmdline_has("console=ttyS0 nokaslr", "nokaslr"));
	CU_ASSERT_TRUE(x86_cmdline_has("nokaslr", "nokaslr"));
	CU_ASSERT_FALSE(x86_cmdline_has("nokaslrx console=ttyS0", "nokaslr"));
	CU_ASSERT_FALSE(x86_cmdline_has("console=ttyS0 -- nokaslr", "nokaslr"));
	CU_ASSERT_FALSE(x86_cmdline_has("a=\"x nokaslr\" b", "nokaslr"));
	CU_ASSERT_FALSE(x86_cmdline_has("", "nokaslr"));
	/* 16 MiB up, a 46 MiB kernel, 2 MiB steps inside 1 GiB */
	CU_ASSERT_EQUAL(x86_kaslr_slots(16 * MiB, 46 * MiB, 2 * MiB), 1 + (1024 - 16 - 46) / 2);
	CU_ASSERT_EQUAL(x86_kaslr_slots(16 * MiB, 1024 * MiB, 2 * MiB), 1);
	CU_ASSERT_EQUAL(x86_kaslr_slots(16 * MiB, 46 * MiB, 0), 1);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "lz4 legacy payload decompressed into place, relocated", test_lz4 },
		{ "zstd payload", test_zstd },
		{ "gzip payload", test_gzip },
		{ "two-set relocation table (Linux 6.12+)", test_two_sets },
		{ "relocation outside the kernel refused, nothing written", test_reloc_outside },
		{ "corrupt, misplaced and foreign payloads refused", test_refusals },
		{ "nokaslr and the KASLR slots", test_kaslr_inputs },
		{ NULL, NULL },
	};
	int ret = cu_run("x86 kernel decompression", tests);

	free(file);
	return ret;
}
