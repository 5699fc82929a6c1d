/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 (RFC 4648) for protobuf JSON's bytes fields and Basic authorization: one codec for cubicle-agent and its host clients (cubicle exec, cp). */
#ifndef CUBICLE_AGENT_B64_H
#define CUBICLE_AGENT_B64_H

#include <stddef.h>

/* Characters b64_encode writes for LEN bytes, without the NUL. */
#define B64_ENC_LEN(len) (((len) + 2) / 3 * 4)
/* Bytes b64_decode may write for LEN characters, at most. */
#define B64_DEC_MAX(len) ((len) / 4 * 3 + 3)

/* Characters b64_encode writes for n bytes, padding included (no NUL). */
size_t b64_encoded_len(size_t n);

/* Standard base64 with padding, NUL-terminated: out holds b64_encoded_len(n)
 * + 1. Returns the characters written (without the NUL). */
size_t b64_encode(const void *in, size_t n, char *out);

/*
 * Decode n characters of base64 into out (at most cap bytes). Accepts the
 * standard and the URL-safe alphabet, with or without padding (protobuf's
 * JSON mapping allows all four); anything else, data after padding, or a
 * dangling single character is an error. Returns the byte count, or -1.
 * cap >= B64_DEC_MAX(n) is always enough.
 */
long b64_decode(const char *in, size_t n, void *out, size_t cap);

#endif
