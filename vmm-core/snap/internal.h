/* SPDX-License-Identifier: Apache-2.0 */
/* What the two halves of snapshots (create.c writes, snapshot.c reads)
 * share. Private to vmm-core/snap/. */
#ifndef CUBICLE_SNAP_INTERNAL_H
#define CUBICLE_SNAP_INTERNAL_H

#include <stdint.h>

struct cub_inst;
struct cub_device_ops;

#define PAGE 4096u

/* Microseconds, CLOCK_MONOTONIC. */
uint64_t snap_now_us(void);
/* The device ops of an instance whose plugin can save its state, or NULL. */
const struct cub_device_ops *snap_state_ops(const struct cub_inst *in);
/* fsync a file or folder by path: 0 or -errno (create.c). */
int snap_fsync_path(const char *path);
/* "DIR/NAME", malloc'd; NULL when out of memory. */
char *snap_path_in(const char *dir, const char *name);

#endif
