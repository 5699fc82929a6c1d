/* SPDX-License-Identifier: Apache-2.0 */
/* What this host can do: `cubicle check-host`. */
#ifndef CUBICLE_HOSTCHECK_H
#define CUBICLE_HOSTCHECK_H

#include <stdio.h>

/* Print one "key: value" line per fact. dir is where to probe XFS reflink
 * (the disk images' folder). Returns 0 if /dev/kvm is usable, else 1. */
int hostcheck_report(FILE *out, const char *dir);

#endif
