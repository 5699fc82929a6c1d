/* SPDX-License-Identifier: Apache-2.0 */
/* The host's default for write_zeroes (storage_zeroes.c). */
#ifndef CUBICLE_STORAGE_ZEROES_H
#define CUBICLE_STORAGE_ZEROES_H

#include <stdbool.h>
#include <stdint.h>

struct cub_storage;

/* The backend's write_zeroes op, or writev of zero buffers (64 KiB at a
 * time). 0 or -errno (-EIO for a short write). */
int storage_write_zeroes(struct cub_storage *s, uint64_t off, uint64_t len, bool unmap);

#endif
