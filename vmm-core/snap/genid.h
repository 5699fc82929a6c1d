/* SPDX-License-Identifier: Apache-2.0 */
/* The VM generation ID: 16 random bytes in guest memory that the arch
 * describes to the guest (x86: an ACPI device; arm64: a device-tree node)
 * and renews, with a notification, whenever the guest runs a second time
 * from one instant (a restore, a clone, a rollback), so that it reseeds
 * its RNG rather than repeat another copy's random numbers. */
#ifndef CUBICLE_SNAP_GENID_H
#define CUBICLE_SNAP_GENID_H

#include <stddef.h>
#include <stdint.h>

#define GENID_BYTES 16

struct guest_mem;
struct snap_w;
struct snap_r;

/* 16 new random bytes at @id. */
void genid_new(void *id);
/* The ID's address as the snapshot's "vmgenid" section (nothing when
 * @gpa is 0: the VM has none). 0 or -errno. */
int genid_save(struct snap_w *w, uint64_t gpa);
/* From a snapshot being loaded into @m: *@gpa the ID's address (0 when the
 * snapshot has none) and new bytes there. 0, or -EINVAL with err. */
int genid_renew(struct guest_mem *m, const struct snap_r *r, uint64_t *gpa, char *err,
		size_t errlen);

#endif
