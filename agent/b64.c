/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 (RFC 4648): encode with padding, decode strictly (both alphabets). */
#include <stdint.h>

#include "b64.h"

static const char enc_tab[64] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t b64_encode(const void *in, size_t len, char *out)
{
	const unsigned char *s = in;
	size_t o = 0, i = 0;

	for (; len - i >= 3; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
		out[o++] = enc_tab[v >> 18];
		out[o++] = enc_tab[(v >> 12) & 63];
		out[o++] = enc_tab[(v >> 6) & 63];
		out[o++] = enc_tab[v & 63];
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)s[i] << 16;
		out[o++] = enc_tab[v >> 18];
		out[o++] = enc_tab[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
		out[o++] = enc_tab[v >> 18];
		out[o++] = enc_tab[(v >> 12) & 63];
		out[o++] = enc_tab[(v >> 6) & 63];
		out[o++] = '=';
	}
	out[o] = 0;
	return o;
}

static int dec_char(unsigned char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+' || ch == '-')
		return 62;
	if (ch == '/' || ch == '_')
		return 63;
	return -1;
}

long b64_decode(const char *in, size_t len, void *out)
{
	unsigned char *d = out;
	size_t o = 0, i, n;
	uint32_t acc = 0;
	unsigned bits = 0;

	/* Padding: at most two '=' at the very end, and only to a multiple of 4. */
	n = len;
	if (n && in[n - 1] == '=') {
		n--;
		if (n && in[n - 1] == '=')
			n--;
		if (len % 4)
			return -1;
	}
	for (i = 0; i < n; i++) {
		int v = dec_char((unsigned char)in[i]);
		if (v < 0)
			return -1;
		acc = (acc << 6 | (uint32_t)v) & 0xffffff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			d[o++] = (unsigned char)(acc >> bits);
		}
	}
	/* 1 leftover character cannot encode a byte; leftover bits must be zero. */
	if (n % 4 == 1)
		return -1;
	if (bits && (acc & ((1u << bits) - 1)))
		return -1;
	if (len != n && (n % 4) + (len - n) != 4)
		return -1;
	return (long)o;
}
