/* SPDX-License-Identifier: Apache-2.0 */
/* PCI bus 0 as the guest sees it: type-0 configuration spaces, memory
 * BARs placed in the arch's MMIO window, capability lists, and the
 * configuration mechanism #1 port pair. Arch-neutral. */
#ifndef CUBICLE_PCI_H
#define CUBICLE_PCI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubicle/plugin.h"

struct vm;
struct pci_dev;

#define PCI_MAX_DEVS 32     /* device numbers on bus 0; function 0 only */
#define PCI_CFG_SIZE 256    /* conventional (type 0) configuration space */
#define PCI_NUM_BARS 6

/* Type-0 header offsets and bits (PCI Local Bus 3.0, 6.1-6.2). */
#define PCI_VENDOR_ID      0x00
#define PCI_DEVICE_ID      0x02
#define PCI_COMMAND        0x04
#define PCI_STATUS         0x06
#define PCI_REVISION_ID    0x08
#define PCI_CLASS_PROG     0x09
#define PCI_CACHE_LINE     0x0c
#define PCI_LATENCY_TIMER  0x0d
#define PCI_HEADER_TYPE    0x0e
#define PCI_BAR0           0x10
#define PCI_SUBSYS_VENDOR  0x2c
#define PCI_SUBSYS_ID      0x2e
#define PCI_ROM_ADDRESS    0x30
#define PCI_CAP_PTR        0x34
#define PCI_INT_LINE       0x3c
#define PCI_INT_PIN        0x3d
#define PCI_CAP_START      0x40 /* first byte after the header */

#define PCI_CMD_IO         0x0001
#define PCI_CMD_MEMORY     0x0002
#define PCI_CMD_MASTER     0x0004
#define PCI_CMD_PARITY     0x0040
#define PCI_CMD_SERR       0x0100
#define PCI_CMD_INTX_DIS   0x0400
#define PCI_STATUS_CAP     0x0010

#define PCI_CAP_ID_VNDR    0x09
#define PCI_CAP_ID_MSIX    0x11

/* The conf1 ports: 0xcf8 address (32-bit accesses only), 0xcfc-0xcff data. */
#define PCI_CONF1_PORT     0xcf8
#define PCI_CONF1_LEN      8

/* The host bridge at 00:00.0. There is no cubicle vendor id (the PCI-SIG
 * assigns them to members); this is the pair Cloud Hypervisor and
 * Dragonball use for their virtual host bridge, so firmware and guests
 * that know those VMMs see a familiar device. */
#define PCI_HOST_VENDOR    0x8086
#define PCI_HOST_DEVICE    0x0d57

/* What a device is, as its header tells the guest. */
struct pci_id {
	uint16_t vendor, device;
	uint16_t subsys_vendor, subsys;
	uint8_t revision;
	uint32_t class; /* class << 16 | subclass << 8 | prog-if */
};

/*
 * struct pci_dev_ops - hooks a device's owner may set (each optional,
 * default: nothing happens).
 *
 * @cfg_read:  the guest is about to read [@off, @off+@len) of config space;
 *             refresh those bytes through pci_cfg() first.
 * @cfg_write: the guest wrote [@off, @off+@len) and the bytes were merged
 *             through the writable mask; react to it.
 * @bar_moved: BAR @bar now decodes at @base, or no longer decodes (@base
 *             0): move anything tied to its address (ioeventfds).
 * @free:      the bus is going away (pci_destroy): let go of @pd and @priv.
 *
 * The first three run on a vCPU thread (bar_moved also at setup) with the
 * bus lock held: they must not call back into pci_conf_access(), and no
 * BAR handler may take a lock that a hook holds while it waits (pci.c
 * explains the order).
 */
struct pci_dev_ops {
	void (*cfg_read)(void *priv, uint16_t off, uint32_t len);
	void (*cfg_write)(void *priv, uint16_t off, uint32_t len);
	void (*bar_moved)(void *priv, unsigned bar, uint64_t base);
	void (*free)(void *priv);
};

/* Create bus 0 with the host bridge at 00:00.0 on vm->pci; BARs come from
 * arch_pci_window(). 0 or -errno with a reason in err. */
int pci_init(struct vm *vm, char *err, size_t errlen);
/* Unmap every BAR, drop the conf1 ports and free the bus (vCPUs stopped). */
void pci_destroy(struct vm *vm);

/* Is there a device on bus 0 besides the host bridge? (Main thread, once
 * the devices are made.) */
bool pci_has_devices(const struct vm *vm);

/* Claim the conf1 ports on vm->pio (x86). 0 or -errno with a reason in err. */
int pci_conf1_attach(struct vm *vm, char *err, size_t errlen);

/*
 * One configuration access to bus/dev/fn at @off, @len bytes (1, 2 or 4,
 * not crossing a dword). Reads of absent functions, of bad offsets or
 * lengths return all ones; such writes are dropped. Any thread.
 */
void pci_conf_access(struct vm *vm, uint8_t bus, uint8_t dev, uint8_t fn, uint16_t off,
		     void *data, uint32_t len, bool is_write);

/* Add a device at the lowest free device number. NULL with a reason in err
 * if there is no bus or it is full. Main thread, before the vCPUs run. */
struct pci_dev *pci_dev_add(struct vm *vm, const struct pci_id *id,
			    const struct pci_dev_ops *ops, void *priv, const char *name,
			    char *err, size_t errlen);

/* Take @pd off the bus and free it (its ops->free is not called: the
 * caller still owns priv). For undoing a failed setup; its BAR space is
 * not reused. Main thread, before the vCPUs run. */
void pci_dev_remove(struct pci_dev *pd);

/*
 * Give @pd a 32-bit non-prefetchable memory BAR @bar of @size bytes (a
 * power of two, 4 KiB to 1 GiB), placed in the PCI window and programmed
 * into the BAR. It decodes on vm->mmio through @io(@priv, offset in BAR)
 * while the command register's memory bit is set; a BAR the guest moves is
 * unmapped and mapped again. Main thread, before the vCPUs run. 0, or
 * -EINVAL, -EBUSY (BAR taken) or -ENOSPC (window full) with a reason in err.
 */
int pci_bar_add(struct pci_dev *pd, unsigned bar, uint64_t size, cub_io_fn *io, void *priv,
		char *err, size_t errlen);

/*
 * Append a capability of @len bytes (4..64) to @pd's list: @cap[0] is the
 * capability id; @cap[1] (next) is filled in here. @wmask, if not NULL,
 * holds @len bytes of guest-writable bits (bytes 0 and 1 stay read-only).
 * Returns its config offset, or -ENOSPC (space full) or -EINVAL.
 */
int pci_cap_add(struct pci_dev *pd, const void *cap, unsigned len, const void *wmask);

/* @pd's 256 config bytes, for its owner: at setup, or inside a cfg hook. */
uint8_t *pci_cfg(struct pci_dev *pd);
/* Where BAR @bar decodes now, or 0 when it does not (memory decoding off,
 * unassigned, or its range collided with another region). */
uint64_t pci_bar_mapped(struct pci_dev *pd, unsigned bar);
/* Device number on bus 0. */
unsigned pci_dev_slot(const struct pci_dev *pd);
/* Snapshots: copy out @pd's config space; put one back (only the bits the
 * guest may write, as if it wrote them: BARs move, decoding follows the
 * command register) without calling the cfg_write hook. */
void pci_cfg_save(struct pci_dev *pd, uint8_t out[PCI_CFG_SIZE]);
void pci_cfg_load(struct pci_dev *pd, const uint8_t in[PCI_CFG_SIZE]);

#endif
