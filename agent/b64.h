/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 (RFC 4648) for protobuf JSON bytes fields and Basic authorization. */
#ifndef CUBICLE_AGENT_B64_H
#define CUBICLE_AGENT_B64_H

#include <stddef.h>

/* Characters b64_encode writes for LEN bytes, without the NUL. */
#define B64_ENC_LEN(len) (((len) + 2) / 3 * 4)
/* Bytes b64_decode may write for LEN characters, at most. */
#define B64_DEC_MAX(len) ((len) / 4 * 3 + 3)

/* Writes the standard alphabet with padding and a NUL; returns the length. */
size_t b64_encode(const void *in, size_t len, char *out);
/*
 * Decodes the standard or URL-safe alphabet, padded or not (proto3 JSON
 * accepts all four). OUT holds B64_DEC_MAX(len) bytes. Returns the length,
 * or -1 on a character outside the alphabet, misplaced padding, a lone last
 * character, or non-zero bits left over.
 */
long b64_decode(const char *in, size_t len, void *out);

#endif
