/* SPDX-License-Identifier: Apache-2.0 */
/* AML for the PCI root bridge in the DSDT. Encodings: ACPI 6.5, 20.2 (AML
 * grammar: ScopeOp, DeviceOp, NameOp, BufferOp, PkgLength) and 6.4 (the
 * resource descriptors inside _CRS). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dsdt.h"

/* AML opcodes and prefixes. */
#define AML_ZERO        0x00
#define AML_NAME        0x08
#define AML_BYTE_PREFIX 0x0a
#define AML_WORD_PREFIX 0x0b
#define AML_DWORD_PREFIX 0x0c
#define AML_SCOPE       0x10
#define AML_BUFFER      0x11
#define AML_EXT_PREFIX  0x5b
#define AML_DEVICE      0x82 /* after AML_EXT_PREFIX */
#define AML_ROOT_CHAR   0x5c /* '\' */
#define AML_STRING      0x0d
#define AML_PACKAGE     0x12
#define AML_METHOD      0x14
#define AML_DUAL_NAME   0x2e
#define AML_NOTIFY      0x86

/* Resource descriptors. */
#define RES_IO             0x47 /* small, type 8, 7 bytes */
#define RES_END            0x79 /* small, type 0xf, 1 byte */
#define RES_DWORD_ADDR     0x87
#define RES_WORD_ADDR      0x88
#define RES_TYPE_MEM       0
#define RES_TYPE_IO        1
#define RES_TYPE_BUS       2
#define RES_PRODUCER_FIXED 0x0c /* producer, positive decode, _MIF and _MAF fixed */
#define RES_IO_ENTIRE      0x03 /* _RNG: ISA and non-ISA ranges */
#define RES_MEM_RW         0x01 /* read-write, non-cacheable, memory */

/* A bounded byte sink: writes past the end are counted, not made. */
struct aml {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct aml *a, const void *src, size_t n)
{
	if (a->len <= a->cap && n <= a->cap - a->len)
		memcpy(a->p + a->len, src, n);
	a->len += n;
}

static void b8(struct aml *a, unsigned v)
{
	uint8_t x = (uint8_t)v;

	put(a, &x, 1);
}

static void b16(struct aml *a, unsigned v)
{
	b8(a, v);
	b8(a, v >> 8);
}

static void b32(struct aml *a, uint32_t v)
{
	b16(a, v & 0xffff);
	b16(a, v >> 16);
}

/* PkgLength counts its own 1-4 bytes as well as the @body that follows. */
static unsigned pkglen_bytes(size_t body)
{
	return body + 1 < 0x40 ? 1 : body + 2 < 0x1000 ? 2 : body + 3 < 0x100000 ? 3 : 4;
}

static void pkglen(struct aml *a, size_t body)
{
	unsigned n = pkglen_bytes(body);
	size_t total = body + n;

	if (n == 1) {
		b8(a, (unsigned)total);
		return;
	}
	b8(a, (n - 1) << 6 | (total & 0xf));
	for (unsigned i = 1; i < n; i++)
		b8(a, (unsigned)(total >> (4 + 8 * (i - 1))));
}

/* Name (@seg, <integer 0>) */
static void name_zero(struct aml *a, const char *seg)
{
	b8(a, AML_NAME);
	put(a, seg, 4);
	b8(a, AML_ZERO);
}

/* Scope (\_SB) { Device (@name) { @body } } */
static void sb_device(struct aml *out, const char *name, const uint8_t *body, size_t len)
{
	size_t dev_len = 4 + len; /* after the Device's PkgLength: its name and body */

	b8(out, AML_SCOPE);
	pkglen(out, 5 + 2 + pkglen_bytes(dev_len) + dev_len);
	b8(out, AML_ROOT_CHAR);
	put(out, "_SB_", 4);
	b8(out, AML_EXT_PREFIX);
	b8(out, AML_DEVICE);
	pkglen(out, dev_len);
	put(out, name, 4);
	put(out, body, len);
}

static void word_addr(struct aml *a, unsigned type, unsigned tflags, unsigned min, unsigned max)
{
	b8(a, RES_WORD_ADDR);
	b16(a, 13);
	b8(a, type);
	b8(a, RES_PRODUCER_FIXED);
	b8(a, tflags);
	b16(a, 0);             /* granularity */
	b16(a, min);
	b16(a, max);
	b16(a, 0);             /* translation offset */
	b16(a, max - min + 1); /* length */
}

static void crs(struct aml *a, uint32_t mem_base, uint32_t mem_size)
{
	/* bus 0 only */
	word_addr(a, RES_TYPE_BUS, 0, 0, 0);
	/* IO (Decode16, 0x0cf8, 0x0cf8, 1, 8): the conf1 ports, consumed */
	b8(a, RES_IO);
	b8(a, 1);
	b16(a, 0xcf8);
	b16(a, 0xcf8);
	b8(a, 1);
	b8(a, 8);
	/* The rest of port space is decoded below the bridge, as on a PC. */
	word_addr(a, RES_TYPE_IO, RES_IO_ENTIRE, 0x0000, 0x0cf7);
	word_addr(a, RES_TYPE_IO, RES_IO_ENTIRE, 0x0d00, 0xffff);
	/* DWordMemory: the BAR window */
	b8(a, RES_DWORD_ADDR);
	b16(a, 23);
	b8(a, RES_TYPE_MEM);
	b8(a, RES_PRODUCER_FIXED);
	b8(a, RES_MEM_RW);
	b32(a, 0);                            /* granularity */
	b32(a, mem_base);
	b32(a, mem_base + mem_size - 1);
	b32(a, 0);                            /* translation offset */
	b32(a, mem_size);
	b8(a, RES_END);
	b8(a, 0);                             /* checksum 0: "correct" */
}

int x86_dsdt_pci(uint8_t *buf, size_t cap, uint64_t mmio_base, uint64_t mmio_size)
{
	uint8_t tmp_crs[128], tmp_dev[192];
	struct aml c = { tmp_crs, 0, sizeof(tmp_crs) };
	struct aml d = { tmp_dev, 0, sizeof(tmp_dev) };
	struct aml out = { buf, 0, cap };

	if (!mmio_size || mmio_base + mmio_size > 0x100000000ULL || mmio_base + mmio_size < mmio_base)
		return -EINVAL;
	crs(&c, (uint32_t)mmio_base, (uint32_t)mmio_size);

	/* Device (PCI0) body */
	b8(&d, AML_NAME);
	put(&d, "_HID", 4);
	b8(&d, AML_DWORD_PREFIX);
	b32(&d, 0x030ad041); /* EisaId ("PNP0A03") */
	name_zero(&d, "_SEG");
	name_zero(&d, "_BBN");
	name_zero(&d, "_UID");
	b8(&d, AML_NAME);
	put(&d, "_CRS", 4);
	b8(&d, AML_BUFFER);
	pkglen(&d, 2 + c.len); /* BufferSize as ByteConst, then the bytes */
	b8(&d, AML_BYTE_PREFIX);
	b8(&d, (unsigned)c.len);
	put(&d, tmp_crs, c.len);
	if (c.len > 0xff || c.len > c.cap || d.len > d.cap)
		return -ENOSPC; /* cannot happen: fixed sizes */

	sb_device(&out, "PCI0", tmp_dev, d.len);
	if (out.len > cap)
		return -ENOSPC;
	return (int)out.len;
}

/* Name (@seg, "@str") */
static void name_string(struct aml *a, const char *seg, const char *str)
{
	b8(a, AML_NAME);
	put(a, seg, 4);
	b8(a, AML_STRING);
	put(a, str, strlen(str) + 1);
}

int x86_dsdt_vmgenid(uint8_t *buf, size_t cap, uint64_t id_gpa, unsigned gpe)
{
	uint8_t tmp_dev[128], tmp_m[32];
	struct aml d = { tmp_dev, 0, sizeof(tmp_dev) };
	struct aml m = { tmp_m, 0, sizeof(tmp_m) };
	struct aml out = { buf, 0, cap };
	char ename[5];
	size_t pkg_body = 1 + 2 * 5, m_len;

	if (!id_gpa || id_gpa % 8 || gpe > 0xff)
		return -EINVAL;
	/* Device (VGEN) body: the IDs Linux's vmgenid driver and Windows look
	 * for, and ADDR: Package { low 32 bits, high 32 bits } of the ID. */
	name_string(&d, "_HID", "VMGENCTR");
	name_string(&d, "_CID", "VM_Gen_Counter");
	name_string(&d, "_DDN", "VM_Gen_Counter");
	b8(&d, AML_NAME);
	put(&d, "ADDR", 4);
	b8(&d, AML_PACKAGE);
	pkglen(&d, pkg_body);
	b8(&d, 2);
	b8(&d, AML_DWORD_PREFIX);
	b32(&d, (uint32_t)id_gpa);
	b8(&d, AML_DWORD_PREFIX);
	b32(&d, (uint32_t)(id_gpa >> 32));
	/* Method (_Exx, 0) { Notify (\_SB.VGEN, 0x80) } */
	snprintf(ename, sizeof(ename), "_E%02X", gpe);
	put(&m, ename, 4);
	b8(&m, 0); /* no arguments, not serialized */
	b8(&m, AML_NOTIFY);
	b8(&m, AML_ROOT_CHAR);
	b8(&m, AML_DUAL_NAME);
	put(&m, "_SB_VGEN", 8);
	b8(&m, AML_BYTE_PREFIX);
	b8(&m, 0x80);
	if (d.len > d.cap || m.len > m.cap)
		return -ENOSPC; /* cannot happen: fixed sizes */

	sb_device(&out, "VGEN", tmp_dev, d.len);
	/* Scope (\_GPE) { Method (_Exx) { ... } } */
	m_len = m.len;
	b8(&out, AML_SCOPE);
	pkglen(&out, 5 + 1 + pkglen_bytes(m_len) + m_len);
	b8(&out, AML_ROOT_CHAR);
	put(&out, "_GPE", 4);
	b8(&out, AML_METHOD);
	pkglen(&out, m_len);
	put(&out, tmp_m, m.len);
	if (out.len > cap)
		return -ENOSPC;
	return (int)out.len;
}
