/* SPDX-License-Identifier: Apache-2.0 */
/* One PCI function's MSI-X (PCI 3.0, 6.8.2): the capability, the vector
 * table and pending-bit array a BAR exposes, masking, and delivery. */
#ifndef CUBICLE_MSIX_H
#define CUBICLE_MSIX_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

#define MSIX_MAX_VECTORS   2048
#define MSIX_CAP_LEN       12
#define MSIX_ENTRY_SIZE    16
#define MSIX_FLAGS_ENABLE  0x8000 /* message control */
#define MSIX_FLAGS_MASKALL 0x4000
#define MSIX_CTRL_MASKED   1u     /* vector control */

/* Sends one message; 0 or -errno. irq_msi() in production. */
typedef int msix_send_fn(void *arg, uint64_t addr, uint32_t data);

struct msix {
	pthread_mutex_t lock; /* innermost: held only around the state below */
	unsigned n;           /* vectors */
	bool enabled, masked; /* message control, as the guest last wrote it */
	uint32_t (*table)[4]; /* address lo, address hi, data, vector control */
	uint64_t *pba;
	msix_send_fn *send;
	void *arg;
	struct ratelimit rl;  /* failed sends are logged, rate-limited */
};

/* @n vectors (1..MSIX_MAX_VECTORS), all masked, none pending. 0, -EINVAL
 * or -ENOMEM. */
int msix_init(struct msix *m, unsigned n, msix_send_fn *send, void *arg);
void msix_free(struct msix *m);
void msix_set_send(struct msix *m, msix_send_fn *send, void *arg);

/* The capability for pci_cap_add: table and PBA in BAR @bir at the given
 * offsets (8-byte aligned), and its writable mask (enable, function mask). */
void msix_cap(const struct msix *m, unsigned bir, uint32_t table_off, uint32_t pba_off,
	      uint8_t cap[MSIX_CAP_LEN], uint8_t wmask[MSIX_CAP_LEN]);
/* Bytes the table and the PBA take in the BAR. */
uint32_t msix_table_size(const struct msix *m);
uint32_t msix_pba_size(const struct msix *m);

/* Guest accesses at offset @off of the table / PBA: aligned dwords or
 * qwords only (others read 0, writes dropped). Unmasking a pending vector
 * sends it. Any thread; call without the owner's locks. */
void msix_table_io(struct msix *m, uint64_t off, void *data, uint32_t len, bool is_write);
void msix_pba_io(struct msix *m, uint64_t off, void *data, uint32_t len, bool is_write);
/* The guest wrote the capability's message control: pick up enable and
 * function mask, and send what they unmasked. */
void msix_control(struct msix *m, uint16_t ctl);

/* Signal vector @vec: sent now, or left pending while masked. false if
 * MSI-X is disabled (the caller falls back); true otherwise, also for a
 * vector the table lacks (dropped, as the driver asked for none). */
bool msix_notify(struct msix *m, unsigned vec);
/* Forget pending vectors (the function was reset). */
void msix_clear_pending(struct msix *m);

/* Snapshots: enable, function mask, the table and the pending bits as
 * msix_state_size() bytes; load takes them back without sending anything
 * (-EINVAL if the size or a reserved bit is wrong). */
size_t msix_state_size(const struct msix *m);
void msix_save(struct msix *m, uint8_t *buf);
int msix_load(struct msix *m, const uint8_t *buf, size_t len);

#endif
