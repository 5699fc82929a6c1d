/* SPDX-License-Identifier: Apache-2.0 */
/* The DSDT's PCI root bridge (\_SB.PCI0), as AML bytes: with ACPI tables
 * present, x86 Linux finds PCI bus 0 only through this device. */
#ifndef CUBICLE_X86_DSDT_H
#define CUBICLE_X86_DSDT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes x86_dsdt_pci() writes: fixed, whatever the window. */
#define X86_DSDT_PCI_LEN 138

/*
 * Write the AML of
 *   Scope (\_SB) { Device (PCI0) { _HID PNP0A03, _SEG 0, _BBN 0, _UID 0,
 *     _CRS: bus 0-0; I/O 0xcf8-0xcff (consumed, for conf1); I/O windows
 *     0x0000-0x0cf7 and 0x0d00-0xffff; memory window
 *     [@mmio_base, @mmio_base + @mmio_size) } }
 * into @buf, to be appended to a DSDT's term list (after its 36-byte
 * header; the caller sets the length and checksum). No _PRT: functions
 * have no INTx pin and interrupt by MSI-X.
 * Returns the bytes written (X86_DSDT_PCI_LEN), -ENOSPC if @cap is too
 * small, or -EINVAL if the window is empty or does not end below 4 GiB.
 */
int x86_dsdt_pci(uint8_t *buf, size_t cap, uint64_t mmio_base, uint64_t mmio_size);

/* Bytes x86_dsdt_vmgenid() writes. */
#define X86_DSDT_VMGENID_LEN 118

/*
 * The VM generation ID device, as AML to append to a DSDT:
 *   Scope (\_SB) { Device (VGEN) { _HID "VMGENCTR", _CID and _DDN
 *     "VM_Gen_Counter", ADDR Package { low, high 32 bits of @id_gpa } } }
 *   Scope (\_GPE) { Method (_Exx) { Notify (\_SB.VGEN, 0x80) } }
 * where xx is GPE number @gpe in hex: a restore writes a new 16-byte ID at
 * @id_gpa and raises that GPE, and the guest's driver (Linux: vmgenid)
 * re-reads the ID and reseeds its RNG. Returns the bytes written
 * (X86_DSDT_VMGENID_LEN), -ENOSPC if @cap is too small, -EINVAL for a
 * zero or unaligned address or a GPE above 255.
 */
int x86_dsdt_vmgenid(uint8_t *buf, size_t cap, uint64_t id_gpa, unsigned gpe);

#endif
