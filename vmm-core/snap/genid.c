/* SPDX-License-Identifier: Apache-2.0 */
/* The VM generation ID's bytes (genid.h): made at boot, renewed when a
 * snapshot is restored or rolled back to. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "cnode.h"
#include "mem.h"
#include "snap/genid.h"
#include "snap/state.h"

void genid_new(void *id)
{
	/* 128 random bits, without waiting for the entropy pool (early in a
	 * host's boot it may not be ready); failing that the clock still
	 * differs from one VM to the next. */
	if (getrandom(id, GENID_BYTES, GRND_NONBLOCK) != GENID_BYTES) {
		struct timespec t;

		clock_gettime(CLOCK_REALTIME, &t);
		memcpy(id, &t, sizeof(t) < GENID_BYTES ? sizeof(t) : GENID_BYTES);
	}
}

int genid_save(struct snap_w *w, uint64_t gpa)
{
	return gpa ? snap_w_put(w, SNAP_K_MACHINE, "vmgenid", 0, SNAP_VER(1, 0), &gpa, sizeof(gpa))
		   : 0;
}

int genid_renew(struct guest_mem *m, const struct snap_r *r, uint64_t *gpa, char *err,
		size_t errlen)
{
	const struct snap_sec *s = snap_r_find(r, SNAP_K_MACHINE, "vmgenid", 0);
	void *id;

	*gpa = 0;
	if (!s)
		return 0;
	if (s->len != sizeof(*gpa))
		return errf(err, errlen, -EINVAL, "vmgenid: %zu bytes, expected %zu", s->len,
			    sizeof(*gpa));
	memcpy(gpa, s->data, sizeof(*gpa));
	id = *gpa % 8 ? NULL : mem_map(m, *gpa, GENID_BYTES);
	if (!id)
		return errf(err, errlen, -EINVAL, "vmgenid: address %#" PRIx64 " is not in guest RAM",
			    *gpa);
	genid_new(id);
	mem_mark_dirty(m, id, GENID_BYTES);
	return 0;
}
