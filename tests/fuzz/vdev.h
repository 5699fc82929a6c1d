/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_virtio_dev's parts: the machine (vdev_machine.c: guest RAM, the
 * host services, an in-memory disk, the real virtio core and transport with
 * the virtio-blk plugin compiled in) and the driver model inside the guest
 * (vdev_driver.c), which fuzz_virtio_dev.c drives from the fuzz input. */
#ifndef CUBICLE_FUZZ_VDEV_H
#define CUBICLE_FUZZ_VDEV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "devices.h"
#include "plan.h"
#include "vm.h"

/* ---- limits: what one input may do ---- */

#define MAX_KICKS 48
#define LOOP_ROUNDS 64 /* event-loop passes after a kick (budgeted re-arms) */

/* Guest RAM: two banks with a hole, one malloc'd buffer so ASan sees any
 * access beside it. Driver-model queue q lives at q * QSTRIDE in bank 0;
 * request buffers come from the rest of bank 0 and from bank 1. Queues
 * are up to 256 entries, so a burst of requests can outrun a device's
 * per-wake-up budget. */
#define BANK0 0x8000u
#define BANK1_GPA 0x10000u
#define BANK1 0x8000u
#define RAM (BANK0 + BANK1)
#define QSTRIDE 0x2000u
#define MODEL_QUEUES 4
#define MODEL_QMAX 256

#define MMIO_BASE 0xd0000000ull
#define MMIO_IRQ 5
#define PCI_WIN 0xe0000000ull
#define MSI_ADDR 0xfee00000u
#define MSI_DATA0 0x40u

#define DISK_SECTORS 32u
#define DISK_SIZE (DISK_SECTORS * 512u)
#define SERIAL "fuzz-disk-0123456789" /* exactly 20 bytes: no NUL in GET_ID */

/* virtio-blk (5.2) */
#define F_SEG_MAX 2
#define F_RO 5
#define F_BLK_SIZE 6
#define F_FLUSH 9
#define F_MQ 12
#define F_DISCARD 13
#define F_WZ 14
#define T_IN 0
#define T_OUT 1
#define T_FLUSH 4
#define T_GET_ID 8
#define T_DISCARD 11
#define T_WZ 13
#define S_OK 0
#define S_IOERR 1
#define S_UNSUPP 2

#define D_NEXT 1
#define D_WRITE 2
#define D_INDIRECT 4

#define ST_ACK 1
#define ST_DRIVER 2
#define ST_DRIVER_OK 4
#define ST_FEATURES_OK 8
#define ST_NEEDS_RESET 0x40

#define TRAP(...)                                                      \
	do {                                                           \
		fprintf(stderr, "fuzz_virtio_dev: " __VA_ARGS__);      \
		fputc('\n', stderr);                                   \
		__builtin_trap();                                      \
	} while (0)

/* virtio-mmio registers (virtio 1.x 4.2.2). */
enum {
	MMIO_DEV_FEATURES = 0x010, MMIO_DEV_FEATURES_SEL = 0x014, MMIO_DRV_FEATURES = 0x020,
	MMIO_DRV_FEATURES_SEL = 0x024, MMIO_QUEUE_SEL = 0x030, MMIO_QUEUE_NUM_MAX = 0x034,
	MMIO_QUEUE_NUM = 0x038, MMIO_QUEUE_READY = 0x044, MMIO_QUEUE_NOTIFY = 0x050,
	MMIO_INT_STATUS = 0x060, MMIO_INT_ACK = 0x064, MMIO_STATUS = 0x070,
	MMIO_DESC_LO = 0x080, MMIO_DESC_HI = 0x084, MMIO_DRIVER_LO = 0x090,
	MMIO_DRIVER_HI = 0x094, MMIO_DEVICE_LO = 0x0a0, MMIO_DEVICE_HI = 0x0a4,
	MMIO_CONFIG = 0x100, MMIO_LEN = 0x200,
};

/* virtio-pci common configuration (4.1.4.3), at VP_COMMON_OFF in BAR0. */
enum {
	CC_DFSELECT = 0x00, CC_DF = 0x04, CC_GFSELECT = 0x08, CC_GF = 0x0c, CC_MSIX = 0x10,
	CC_STATUS = 0x14, CC_Q_SELECT = 0x16, CC_Q_SIZE = 0x18, CC_Q_MSIX = 0x1a,
	CC_Q_ENABLE = 0x1c, CC_Q_DESC = 0x20, CC_Q_AVAIL = 0x28, CC_Q_USED = 0x30,
};

/* ---- one request as the driver model posted it ---- */

struct req {
	bool busy;
	uint32_t type;
	uint64_t sector;
	uint32_t nsec;       /* DISCARD / WRITE_ZEROES range */
	uint32_t range_flags;
	uint64_t hdr_gpa;    /* header, then the range, then data, then status */
	uint64_t data_gpa;   /* IN / OUT / GET_ID data, contiguous */
	uint32_t data_len;
	uint64_t status_gpa;
	uint16_t descs[8];
	unsigned n_descs;    /* ring descriptors taken (1 when indirect) */
};

struct mqueue {
	bool live;
	uint16_t size, avail_idx, last_used;
	uint64_t desc, avail, used;
	uint16_t free[MODEL_QMAX];
	unsigned n_free, busy;
	struct req r[MODEL_QMAX];
};

/* ---- the machine ---- */

struct watch {
	int fd;
	void (*cb)(void *);
	void *arg;
};

struct machine {
	struct vm vm;
	uint8_t *ram;
	struct plan_inst pi;
	struct cub_inst *in;
	void *cfg;
	bool pci;
	unsigned slot, msix_cap;
	uint32_t bar0;           /* where the PCI core first placed BAR0 */
	bool irq_level;          /* MMIO line as the transport drives it */
	unsigned msis[MODEL_QUEUES + 1];
	struct watch w[INST_MAX_WATCHES];
	unsigned n_w;
	/* the disk */
	uint8_t disk[DISK_SIZE];
	bool disk_ro, can_flush, can_discard, can_wz, full_ops;
	struct cub_storage *st;
	bool host_zeroes;        /* inside the host's write_zeroes */
	/* the guest */
	bool tainted;            /* the guest broke (or may have broken) a rule */
	bool irq_unsure;         /* a raw access may have eaten an interrupt */
	bool msix_on;
	uint64_t acked;          /* features the driver model accepted */
	unsigned n_queues, kicks;
	struct mqueue q[MODEL_QUEUES];
	uint8_t shadow[DISK_SIZE];
	uint64_t data_next;      /* bump allocator over bank 0's tail, then bank 1 */
	char why[256];           /* the core's first NEEDS_RESET reason */
	unsigned checked;        /* completions checked against the model */
};

extern struct machine M; /* vdev_machine.c: the one machine */
extern bool vdev_verbose; /* FUZZ_VERBOSE: the host's log lines on stderr */

/* ---- vdev_machine.c ---- */

/* Once per process: guest RAM and the disk's first image. */
void mach_init(void);
/* A fresh machine for one input. conf: bit 0 PCI (else MMIO), 1 read-only
 * disk, 2-3 queues - 1, 4 backend can discard, 5 can write zeroes, 6 can
 * flush (4 or 5: a backend with discard and write_zeroes ops). */
bool mach_up(uint8_t conf);
/* Tear it all down as the host does; everything is freed. */
void mach_down(void);
/* Run every fd watch that is ready until none is (the event loop). */
void mach_loop(void);
/* Guest accesses to the transport's registers (the MMIO window, or BAR0
 * wherever the guest put it), little-endian, len 1..8; reads of nothing
 * are all ones. */
uint64_t mach_rd(uint64_t off, uint32_t len);
void mach_wr(uint64_t off, uint32_t len, uint64_t v);
/* PCI: a config write to the device; BAR0 back where the PCI core put it,
 * memory decoding and bus mastering on. */
void mach_cfg_wr(uint16_t off, uint32_t len, uint32_t v);
void mach_pci_enable(void);
/* Device status: as the core holds it, or as the guest reads and writes it. */
uint8_t mach_status(void);
uint8_t mach_status_rd(void);
void mach_status_wr(uint8_t s);
/* Notify queue q (at most MAX_KICKS per input), then run the event loop. */
void mach_kick(unsigned q);
/* Guest RAM for the driver model: traps outside it. */
uint8_t *mach_gpa(uint64_t a, uint64_t len);
void mach_put16(uint64_t a, uint16_t v);
uint16_t mach_get16(uint64_t a);
uint32_t mach_get32(uint64_t a);

/* ---- vdev_driver.c ---- */

/* Forget every queue and request (after a reset). */
void drv_reset(void);
/* Reset, negotiate and bring queues up. a: bits 0-2 queue size 2 << n,
 * 3 no MSI-X (PCI), 4 queue 0 only, 6 drop VERSION_1 (refused); f: the
 * offered features to accept (EVENT_IDX, INDIRECT_DESC, FLUSH, DISCARD,
 * WRITE_ZEROES, MQ, RO, SEG_MAX). */
void drv_bring_up(uint8_t a, uint8_t f);
/* Post one request on queue qi, unkicked (see vdev_driver.c for the
 * encoding of type and shape). */
void drv_post(unsigned qi, uint8_t type, uint8_t sector, uint8_t shape);
/* The interrupt handler: check and take every completion. */
void drv_reap_all(void);
/* Status 0 through the transport: the device must come back clean. */
void drv_guest_reset(void);
/* The invariants checked after every step. */
void drv_check(void);

#endif
