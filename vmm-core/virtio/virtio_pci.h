/* SPDX-License-Identifier: Apache-2.0 */
/* The modern virtio-pci transport's register map (virtio 1.x, 4.1) and its
 * one test seam; virtio_pci_attach itself is declared in transports.h. */
#ifndef CUBICLE_VIRTIO_PCI_H
#define CUBICLE_VIRTIO_PCI_H

#include <stdint.h>

struct vm;
struct virtio_dev;

#define VIRTIO_PCI_VENDOR       0x1af4
#define VIRTIO_PCI_DEVICE_BASE  0x1040 /* + virtio device id: non-transitional */

/* BAR0, one 32-bit memory BAR; each structure on its own 4 KiB page. */
#define VP_COMMON_OFF     0x0000
#define VP_COMMON_LEN     0x38   /* struct virtio_pci_common_cfg, virtio 1.1 */
#define VP_ISR_OFF        0x1000
#define VP_DEVICE_OFF     0x2000
#define VP_DEVICE_MAX     0x1000 /* largest device config space offered */
#define VP_NOTIFY_OFF     0x3000
#define VP_NOTIFY_MULT    4      /* queue q is kicked at VP_NOTIFY_OFF + 4q */
#define VP_MSIX_TABLE_OFF 0x4000
#define VP_MSIX_PBA_OFF   0x5000
#define VP_BAR_SIZE       0x8000

/* Vendor capability cfg_type values (virtio 1.x 4.1.4). */
#define VIRTIO_PCI_CAP_COMMON_CFG 1
#define VIRTIO_PCI_CAP_NOTIFY_CFG 2
#define VIRTIO_PCI_CAP_ISR_CFG    3
#define VIRTIO_PCI_CAP_DEVICE_CFG 4
#define VIRTIO_PCI_CAP_PCI_CFG    5

/* Delivers one MSI; returns 0 or -errno. The default is irq_msi()
 * (KVM_SIGNAL_MSI on vm->vm_fd). */
typedef int virtio_pci_msi_fn(void *arg, uint64_t addr, uint32_t data);

/* Replace how @d's transport sends MSIs (unit tests: no KVM). @d must use
 * the PCI transport. Before the vCPUs run. */
void virtio_pci_set_msi(struct virtio_dev *d, virtio_pci_msi_fn *fn, void *arg);

#endif
