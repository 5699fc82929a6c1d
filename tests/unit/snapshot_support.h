/* SPDX-License-Identifier: Apache-2.0 */
/* What both snapshot tests share: checks that show their message, and a state file of known sections. */
#ifndef CUBICLE_SNAPSHOT_SUPPORT_H
#define CUBICLE_SNAPSHOT_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "snap/snapshot.h"

#define ERRLEN 512

/* CU_ASSERT with the message shown when it fails. */
#define CHECK_MSG(cond, msg)                                             \
	do {                                                             \
		CU_ASSERT(cond);                                         \
		if (!(cond))                                             \
			fprintf(stderr, "\n  unexpected: %s\n", (msg)); \
	} while (0)
#define HAS(err, sub) CHECK_MSG(strstr((err), (sub)) != NULL, (err))

/* build_state's sections: one per kind and length. */
extern const enum snap_kind kinds[3];
extern const size_t lens[5];
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))
#define N_LENS (sizeof(lens) / sizeof(lens[0]))

/* Byte i of the section of kind k and length l. */
uint8_t pattern(unsigned k, unsigned l, size_t i);
/* That section's name. */
void sec_name(char *buf, size_t n, unsigned k, unsigned l);
/* A state file of one section per kind and length; 0 or -errno. */
int build_state(struct snap_w *w, const char *arch);

#endif
