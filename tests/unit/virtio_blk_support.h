/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-blk tests' shared part: fake guest RAM and the request chains built in it. */
#ifndef CUBICLE_TESTS_VIRTIO_BLK_SUPPORT_H
#define CUBICLE_TESTS_VIRTIO_BLK_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fake_host.h"
#include "virtio_blk_req.h"

#define RAM_SIZE (16u << 20)

extern struct fake_host mem;  /* guest RAM for every chain */
extern struct cub_vq_chain ch; /* the chain simple() and seg() build */

/* Give mem its RAM_SIZE bytes of guest RAM: 0, or nonzero on failure. */
int blk_ram_init(void);
void blk_ram_fini(void);

/* Guest memory for a test: a bump allocator over the fake RAM. */
uint8_t *gmem(size_t len);
/* A request header of this type and sector, in guest memory. */
uint8_t *hdr(uint32_t type, uint64_t sector);
/* Append a segment to ch (fatal on failure). */
void seg(void *p, size_t len, bool w);
/* A chain: header (readable), optional data, status byte (writable). */
void simple(uint32_t type, uint64_t sector, size_t data, bool data_writable);
/* A discard / write-zeroes segment, in guest memory. */
uint8_t *range(uint64_t sector, uint32_t n, uint32_t flags);

#endif
