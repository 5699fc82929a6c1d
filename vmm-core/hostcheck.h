/* SPDX-License-Identifier: Apache-2.0 */
/* What this host can do: `cubicle check-host`. */
#ifndef CUBICLE_HOSTCHECK_H
#define CUBICLE_HOSTCHECK_H

#include <jansson.h>
#include <stdio.h>

struct registry;

/* Print one "key  value" line per fact (or, when @j is not NULL, set one
 * member of @j per fact instead) about KVM, then one per plugin in reg
 * that probes the host (cub_plugin.host_check), run with dir (the disk
 * images' folder) as the current folder. Returns 0 if this host boots
 * stock Linux kernels, 2 if /dev/kvm works but cannot (PVM, no VT-x/AMD-V),
 * 1 if /dev/kvm is not usable. */
int hostcheck_report(FILE *out, json_t *j, const char *dir, const struct registry *reg);

#endif
