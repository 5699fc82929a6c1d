/* SPDX-License-Identifier: Apache-2.0 */
/* The tap backend's answer to `cubicle check-host`: can this host load the eBPF egress policy? */
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>

#include "probe.h"

int tap_host_check(char *line, size_t len)
{
	int r = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_SCHED_CLS, NULL);

	if (r == 1) {
		snprintf(line, len, "BPF egress policy: yes (tc programs load)");
		return 0;
	}
	snprintf(line, len,
		 "BPF egress policy: no (cannot load a tc BPF program: need root/CAP_BPF)");
	return r < 0 ? r : -EPERM;
}
