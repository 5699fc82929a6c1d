/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 (RFC 4648) for protobuf JSON's bytes fields and Basic authorization: one codec for cubicle-agent and its host clients (cubicle exec, cp). */
#include <stdint.h>

#include "b64.h"

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t b64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

size_t b64_encode(const void *in, size_t n, char *out)
{
	const uint8_t *p = in;
	const char *start = out;
	size_t i = 0;

	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		*out++ = b64_alphabet[v >> 18];
		*out++ = b64_alphabet[(v >> 12) & 63];
		*out++ = b64_alphabet[(v >> 6) & 63];
		*out++ = b64_alphabet[v & 63];
	}
	if (n - i == 1) {
		*out++ = b64_alphabet[p[i] >> 2];
		*out++ = b64_alphabet[(p[i] & 3) << 4];
		*out++ = '=';
		*out++ = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 8 | p[i + 1];

		*out++ = b64_alphabet[v >> 10];
		*out++ = b64_alphabet[(v >> 4) & 63];
		*out++ = b64_alphabet[(v & 15) << 2];
		*out++ = '=';
	}
	*out = '\0';
	return (size_t)(out - start);
}

/* The 6-bit value of each byte in either alphabet (standard, URL-safe), or -1. */
static const signed char b64_val[256] = {
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, 62, -1, 63,
	52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1,
	-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
	15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, 63,
	-1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
	41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

long b64_decode(const char *in, size_t n, void *out, size_t cap)
{
	uint8_t *o = out;
	size_t len = n, got = 0, i = 0;
	uint32_t acc = 0;
	unsigned bits = 0;

	/* Up to two '=' end the text, and only where they make a group of 4. */
	if (len && in[len - 1] == '=') {
		len--;
		if (len && in[len - 1] == '=')
			len--;
		if (n % 4)
			return -1;
	}
	if (len % 4 == 1)
		return -1;
	/* Whole groups of 4 first: 3 bytes per step, one check of all four. */
	for (; i + 4 <= len && got + 3 <= cap; i += 4) {
		int a = b64_val[(unsigned char)in[i]], b = b64_val[(unsigned char)in[i + 1]];
		int c = b64_val[(unsigned char)in[i + 2]], d = b64_val[(unsigned char)in[i + 3]];
		uint32_t v;

		if ((a | b | c | d) < 0)
			return -1;
		v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
		o[got++] = (uint8_t)(v >> 16);
		o[got++] = (uint8_t)(v >> 8);
		o[got++] = (uint8_t)v;
	}
	for (; i < len; i++) {
		int v = b64_val[(unsigned char)in[i]];

		if (v < 0)
			return -1;
		acc = (acc << 6 | (uint32_t)v) & 0xffffff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (got >= cap)
				return -1;
			o[got++] = (uint8_t)(acc >> bits);
		}
	}
	/* The bits left over must be zero (canonical text). */
	if (bits && (acc & ((1u << bits) - 1)))
		return -1;
	return (long)got;
}
