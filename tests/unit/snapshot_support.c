/* SPDX-License-Identifier: Apache-2.0 */
/* What both snapshot tests share: checks that show their message, and a state file of known sections. */
#include "snapshot_support.h"

const enum snap_kind kinds[3] = { SNAP_K_MACHINE, SNAP_K_VCPU, SNAP_K_DEVICE };
const size_t lens[5] = { 0, 1, 7, 8, 4096 };

uint8_t pattern(unsigned k, unsigned l, size_t i)
{
	return (uint8_t)(k * 71 + l * 13 + i * 2654435761u % 251);
}

void sec_name(char *buf, size_t n, unsigned k, unsigned l)
{
	snprintf(buf, n, "sec-%u-%zu", k, lens[l]);
}

/* A state file of one section per kind and length; 0 or -errno. */
int build_state(struct snap_w *w, const char *arch)
{
	uint8_t data[4096];
	char name[SNAP_NAME_MAX];
	int ret = snap_w_begin(w, arch);

	for (unsigned k = 0; k < N_KINDS && !ret; k++)
		for (unsigned l = 0; l < N_LENS && !ret; l++) {
			for (size_t i = 0; i < lens[l]; i++)
				data[i] = pattern(k, l, i);
			sec_name(name, sizeof(name), k, l);
			ret = snap_w_put(w, kinds[k], name, k * 10 + l, SNAP_VER(k + 1, l), data,
					 lens[l]);
		}
	return ret ? ret : snap_w_end(w);
}
