/* SPDX-License-Identifier: Apache-2.0 */
/* A snapshot's `state` file: a header, then sections that each carry their
 * own name, owner, version, length and CRC-32, then an end mark. Built in
 * memory and written at once; read whole and checked before anything uses
 * a byte of it. No KVM here: the unit tests and the fuzzer drive it. */
#ifndef CUBICLE_SNAP_STATE_H
#define CUBICLE_SNAP_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAP_FORMAT_MAJOR 1 /* bump: a reader of the old major cannot read it */
#define SNAP_FORMAT_MINOR 0 /* bump: sections added that old readers skip */
#define SNAP_STATE_MAX (64u << 20) /* a state file larger than this is refused */
#define SNAP_NAME_MAX 32            /* section names, NUL included */
#define SNAP_SECTIONS_MAX 4096      /* a machine of 64 vCPUs and 32 devices has ~800 */

/* Who a section belongs to. */
enum snap_kind {
	SNAP_K_MACHINE = 1, /* the VM: irqchip, PIT, clock (inst 0) */
	SNAP_K_VCPU = 2,    /* one vCPU (inst = its index) */
	SNAP_K_DEVICE = 3,  /* one device instance (inst = its index in the plan): its
			     * plugin's blob, named after the plugin, and the host's
			     * own parts of it, named "@..." ("@virtio", "@virtio-pci") */
	SNAP_K_END = 15,    /* the last section: nothing may follow */
};

/* A section's version: what the writer put in, what a reader accepts. */
#define SNAP_VER(major, minor) (((uint32_t)(major) << 16) | (uint16_t)(minor))
#define SNAP_VER_MAJOR(v) ((v) >> 16)
#define SNAP_VER_MINOR(v) ((v)&0xffff)

struct snap_w {
	uint8_t *p;
	size_t len, cap;
	int err; /* first failure (-ENOMEM, -E2BIG), sticky */
	bool ended;
};

/* Start a state file for arch @arch; snap_w_put adds sections, snap_w_end
 * the end mark. Returns w->err: 0 or -errno. */
int snap_w_begin(struct snap_w *w, const char *arch);
int snap_w_put(struct snap_w *w, enum snap_kind kind, const char *name, uint32_t inst,
	       uint32_t ver, const void *data, size_t len);
int snap_w_end(struct snap_w *w);
void snap_w_free(struct snap_w *w);

struct snap_sec {
	enum snap_kind kind;
	char name[SNAP_NAME_MAX];
	uint32_t inst, ver;
	const uint8_t *data;
	size_t len;
};

struct snap_r {
	uint32_t major, minor;
	char arch[16];
	struct snap_sec *secs;
	unsigned n;
};

/*
 * Parse and check a whole state file held in @buf (not copied: the
 * sections point into it). Every header, length and CRC is checked, the
 * end mark must be there and nothing after it. 0, or -EINVAL (-ENOMEM)
 * with one line in err naming the offset and what is wrong there.
 * @arch: the arch this host runs (a file of another is refused).
 */
int snap_r_parse(struct snap_r *r, const void *buf, size_t len, const char *arch, char *err,
		 size_t errlen);
/* The section (@kind, @name, @inst), or NULL. */
const struct snap_sec *snap_r_find(const struct snap_r *r, enum snap_kind kind, const char *name,
				   uint32_t inst);
void snap_r_free(struct snap_r *r);

/* CRC-32 (zlib's) of len bytes. */
uint32_t snap_crc32(const void *p, size_t len);

#endif
