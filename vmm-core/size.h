/* SPDX-License-Identifier: Apache-2.0 */
/* Sizes as cubicle reads them (size.c). Self-contained: tools link it too. */
#ifndef CUBICLE_SIZE_H
#define CUBICLE_SIZE_H

#include <stdint.h>

/* "64M", "1G", "4096", "2KiB", "0x1000" -> bytes (K, M, G, T are powers of
 * 1024). -EINVAL if malformed, -ERANGE past 64 bits. */
int size_parse(const char *s, uint64_t *out);

#endif
