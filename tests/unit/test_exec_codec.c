/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of tools/exec/codec.c: base64 both ways and Connect envelopes read in pieces of any size. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "cunit_main.h"

static void test_b64_vectors(void)
{
	/* RFC 4648 section 10 */
	static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const enc[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
					   "Zm9vYmFy" };
	char out[16];
	uint8_t dec[16];

	for (unsigned i = 0; i < 7; i++) {
		size_t n = strlen(plain[i]);

		CU_ASSERT_EQUAL(b64_encoded_len(n), strlen(enc[i]));
		b64_encode(plain[i], n, out);
		CU_ASSERT_STRING_EQUAL(out, enc[i]);
		CU_ASSERT_EQUAL(b64_decode(enc[i], strlen(enc[i]), dec, sizeof(dec)), (long)n);
		CU_ASSERT_EQUAL(memcmp(dec, plain[i], n), 0);
	}
	/* protobuf JSON: no padding, URL-safe alphabet */
	CU_ASSERT_EQUAL(b64_decode("Zm9vYg", 6, dec, sizeof(dec)), 4);
	CU_ASSERT_EQUAL(memcmp(dec, "foob", 4), 0);
	CU_ASSERT_EQUAL(b64_decode("-_8", 3, dec, sizeof(dec)), 2);
	CU_ASSERT_EQUAL(dec[0], 0xfb);
	CU_ASSERT_EQUAL(dec[1], 0xff);
	CU_ASSERT_EQUAL(b64_decode("+/8=", 4, dec, sizeof(dec)), 2);
	CU_ASSERT_EQUAL(dec[0], 0xfb);
}

static void test_b64_rejects(void)
{
	static const char *const bad[] = {
		"Z",        /* a dangling character */
		"Zm9vY",    /* 5 characters: one too many for 3 bytes */
		"Zg=",      /* padding that does not make a group of 4 */
		"Z===",     /* three '=' */
		"Zg==Zg==", /* data after padding */
		"Zm 9v",    /* a space */
		"Zm9v\n",   /* a newline */
		"Zh==",     /* non-zero leftover bits */
		"Zm9=",     /* likewise */
		"=",
		"Zm*v",
	};
	uint8_t dec[16];

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CU_ASSERT_EQUAL(b64_decode(bad[i], strlen(bad[i]), dec, sizeof(dec)), -1);
	/* never past cap */
	CU_ASSERT_EQUAL(b64_decode("Zm9vYmFy", 8, dec, 5), -1);
	CU_ASSERT_EQUAL(b64_decode("Zm9vYmFy", 8, dec, 6), 6);
}

static void test_b64_roundtrip(void)
{
	enum { N = 4099 };
	uint8_t *in = malloc(N), *dec = malloc(N + 2);
	char *enc = malloc(b64_encoded_len(N) + 1);

	for (unsigned i = 0; i < N; i++)
		in[i] = (uint8_t)(i * 131 + 7);
	for (size_t n = 0; n <= N; n += n < 40 ? 1 : 997) {
		b64_encode(in, n, enc);
		CU_ASSERT_EQUAL(strlen(enc), b64_encoded_len(n));
		CU_ASSERT_EQUAL(b64_decode(enc, strlen(enc), dec, n), (long)n); /* exactly enough room */
		CU_ASSERT_EQUAL(memcmp(dec, in, n), 0);
	}
	free(in);
	free(dec);
	free(enc);
}

struct got {
	int n;
	uint8_t flags[8];
	char msg[8][64];
	uint32_t len[8];
	int stop_at; /* return 7 from this message on */
};

static int collect(void *arg, uint8_t flags, const uint8_t *msg, uint32_t len)
{
	struct got *g = arg;

	if (g->n >= 8)
		return 99;
	g->flags[g->n] = flags;
	g->len[g->n] = len;
	memcpy(g->msg[g->n], msg, len < 63 ? len : 63);
	g->n++;
	return g->stop_at && g->n >= g->stop_at ? 7 : 0;
}

/* Three messages (one empty) as one byte string. */
static size_t stream(uint8_t *buf)
{
	static const char *const m[] = { "{\"a\":1}", "", "{\"end\":{}}" };
	static const uint8_t fl[] = { 0, 0, ENV_END_STREAM };
	size_t off = 0;

	for (int i = 0; i < 3; i++) {
		env_header(fl[i], (uint32_t)strlen(m[i]), buf + off);
		memcpy(buf + off + ENV_HDR_LEN, m[i], strlen(m[i]));
		off += ENV_HDR_LEN + strlen(m[i]);
	}
	return off;
}

static void check_three(const struct got *g)
{
	CU_ASSERT_EQUAL_FATAL(g->n, 3);
	CU_ASSERT_STRING_EQUAL(g->msg[0], "{\"a\":1}");
	CU_ASSERT_EQUAL(g->len[1], 0);
	CU_ASSERT_EQUAL(g->flags[2], ENV_END_STREAM);
	CU_ASSERT_STRING_EQUAL(g->msg[2], "{\"end\":{}}");
}

static void test_env_pieces(void)
{
	uint8_t buf[128];
	size_t n = stream(buf);

	/* every split into pieces of a fixed size, 1 byte to all at once */
	for (size_t piece = 1; piece <= n; piece++) {
		struct env_reader r;
		struct got g = { 0 };

		env_init(&r, 1024);
		for (size_t off = 0; off < n; off += piece)
			CU_ASSERT_EQUAL(env_feed(&r, buf + off, off + piece <= n ? piece : n - off,
						 collect, &g), 0);
		check_three(&g);
		CU_ASSERT_TRUE(env_idle(&r));
		env_free(&r);
	}
	/* a half-read message is not idle */
	struct env_reader r;
	struct got g = { 0 };

	env_init(&r, 1024);
	CU_ASSERT_EQUAL(env_feed(&r, buf, 7, collect, &g), 0);
	CU_ASSERT_FALSE(env_idle(&r));
	CU_ASSERT_EQUAL(g.n, 0);
	env_free(&r);
}

static void test_env_limits(void)
{
	uint8_t hdr[ENV_HDR_LEN], buf[128];
	struct env_reader r;
	struct got g = { 0 };

	/* over max: refused from the header alone, nothing buffered */
	env_init(&r, 16);
	env_header(0, 17, hdr);
	CU_ASSERT_EQUAL(env_feed(&r, hdr, sizeof(hdr), collect, &g), -EMSGSIZE);
	CU_ASSERT_PTR_NULL(r.buf);
	env_free(&r);
	env_init(&r, 16 << 20);
	env_header(0, 0xffffffffu, hdr);
	CU_ASSERT_EQUAL(env_feed(&r, hdr, sizeof(hdr), collect, &g), -EMSGSIZE);
	env_free(&r);
	/* exactly max is fine */
	env_init(&r, 16);
	env_header(0, 16, buf);
	memset(buf + ENV_HDR_LEN, 'x', 16);
	CU_ASSERT_EQUAL(env_feed(&r, buf, ENV_HDR_LEN + 16, collect, &g), 0);
	CU_ASSERT_EQUAL(g.n, 1);
	CU_ASSERT_EQUAL(g.len[0], 16);
	env_free(&r);
	/* the callback's value stops the feed there */
	memset(&g, 0, sizeof(g));
	g.stop_at = 1;
	env_init(&r, 1024);
	CU_ASSERT_EQUAL(env_feed(&r, buf, stream(buf), collect, &g), 7);
	CU_ASSERT_EQUAL(g.n, 1);
	env_free(&r);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "base64: RFC 4648 vectors, no padding, URL-safe", test_b64_vectors },
		{ "base64: malformed text and a short buffer are refused", test_b64_rejects },
		{ "base64: round trips of many lengths", test_b64_roundtrip },
		{ "envelopes: split anywhere, empty messages, end flag", test_env_pieces },
		{ "envelopes: over max refused from the header, callback stops", test_env_limits },
		{ NULL, NULL },
	};

	return cu_run("exec_codec", tests);
}
