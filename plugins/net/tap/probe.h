/* SPDX-License-Identifier: Apache-2.0 */
/* The tap backend's answer to `cubicle check-host`: can this host load the eBPF egress policy? */
#ifndef CUBICLE_TAP_PROBE_H
#define CUBICLE_TAP_PROBE_H

#include <stddef.h>

/* cub_plugin.host_check: one line into @line; 0 if tc BPF programs load here,
 * else -EPERM (no root/CAP_BPF) or the probe's -errno. */
int tap_host_check(char *line, size_t len);

#endif
