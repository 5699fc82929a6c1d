/* SPDX-License-Identifier: Apache-2.0 */
/* The x86 address and IRQ plan: where RAM goes and where each device class
 * is placed. Pure functions, so unit tests need no /dev/kvm. */
#ifndef CUBICLE_X86_LAYOUT_H
#define CUBICLE_X86_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubicle/plugin.h"
#include "mem.h"

/* Up to 3 GiB of RAM sits below the MMIO hole, the rest at 4 GiB. */
#define X86_LOWMEM_MAX 0xc0000000ULL

/* Fixed slots, in the order they are handed out. */
#define X86_UART_SLOTS 4
#define X86_UART_LEN 8
#define X86_BOOT_TIMER_BASE 0xd0000000ULL
#define X86_BOOT_TIMER_LEN 0x1000ULL
#define X86_TESTDEV_MMIO_BASE 0xd0001000ULL
#define X86_TESTDEV_PIO_BASE 0x500
#define X86_TESTDEV_PIO_LEN 0x10
#define X86_TESTDEV_SLOTS 16
/* Other classes (virtio-mmio and friends): 4 KiB-aligned slots in
 * [0xd0100000, 0xe0000000); 0xe0000000 and up stays free for PCI. */
#define X86_MMIO_SLOTS_BASE 0xd0100000ULL
#define X86_MMIO_SLOTS_END 0xe0000000ULL
#define X86_IRQ_MAX 23 /* last pin of KVM's 24-pin IOAPIC */
/* PCI memory BARs (pci.c) and the root bridge's _CRS memory window: from
 * the end of the MMIO slots up to 0xfe000000, below the IOAPIC, HPET,
 * LAPIC and the KVM TSS/identity-map pages. */
#define X86_PCI_WINDOW_BASE 0xe0000000ULL
#define X86_PCI_WINDOW_SIZE 0x1e000000ULL

/* Per-VM placement cursors; zero-initialised means "nothing placed yet". */
struct x86_layout {
	unsigned n_uart;
	bool boot_timer;
	unsigned n_testdev_pio, n_testdev_mmio;
	uint64_t mmio_used; /* bytes handed out from X86_MMIO_SLOTS_BASE */
	unsigned n_irq;     /* generic IRQs handed out */
};

/*
 * Split ram_size bytes into banks around the 3–4 GiB hole: [0, min(size,
 * 3 GiB)) and, for the rest, [4 GiB, ...). Returns the number of banks
 * or -EINVAL (size 0, not 4 KiB-aligned, overflow, max too small).
 */
int x86_mem_layout(uint64_t ram_size, struct mem_bank *banks, unsigned max);

/*
 * Place @r by its class (see layout.c for the table) and fill r->bus,
 * r->base and r->irq. @r->want is honoured or refused. Returns 0, -ENOSPC
 * (no slot or IRQ left), -EINVAL (bus or length the class cannot have) or
 * -ENOENT (no class), with a one-line reason in err.
 */
int x86_layout_place(struct x86_layout *l, struct cub_region *r, char *err, size_t errlen);

/* The IRQ the n-th generic region gets, or -1 past the last one. */
int x86_layout_irq(unsigned n);

#endif
