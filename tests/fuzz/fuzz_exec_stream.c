/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for what cubicle exec reads from the guest: a
 * process.Process/Start response body (Connect envelopes holding JSON
 * events, base64 output) through tools/exec/stream.c. The first byte picks
 * the size of the pieces the rest is fed in; the same bytes fed at once
 * must end the same way (split anywhere, one result). Output goes to
 * /dev/null.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seed.h"
#include "stream.h"

#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			__builtin_trap(); \
	} while (0)

#define MAX_MSG (64u << 10)

static int null_fd = -1;

struct result {
	bool failed, got_end, got_eos, eos_error, idle;
	long pid;
	int status;
};

static struct result run(const uint8_t *data, size_t size, size_t piece)
{
	struct stream s;
	struct result r;
	bool failed = false;

	stream_init(&s, null_fd, null_fd, MAX_MSG);
	for (size_t off = 0; off < size && !failed; off += piece)
		failed = stream_feed(&s, data + off, off + piece <= size ? piece : size - off) != 0;
	CHECK(failed == (s.fail != NULL));
	CHECK(s.pid == -1 || (s.pid > 0 && s.pid <= 0x7fffffff));
	CHECK(!s.got_end || (s.status >= 0 && s.status <= 255));
	r = (struct result){ .failed = failed, .got_end = s.got_end, .got_eos = s.got_eos,
			     .eos_error = s.eos_error != NULL, .idle = stream_idle(&s),
			     .pid = s.pid, .status = s.status };
	stream_free(&s);
	return r;
}

static size_t put(uint8_t *b, uint8_t flags, const char *json)
{
	size_t n = strlen(json);

	env_header(flags, (uint32_t)n, b);
	memcpy(b + ENV_HDR_LEN, json, n);
	return ENV_HDR_LEN + n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_SEED_DIR");
	static uint8_t b[4096];
	size_t n = 0;

	(void)argc, (void)argv;
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (!dir)
		return 0;
	b[n++] = 7;
	n += put(b + n, 0, "{\"event\":{\"start\":{\"pid\":42}}}");
	n += put(b + n, 0, "{\"event\":{\"data\":{\"stdout\":\"NDIK\"}}}");
	n += put(b + n, 0, "{\"event\":{\"data\":{\"stderr\":\"ZXJyCg==\"}}}");
	n += put(b + n, 0, "{\"event\":{\"keepalive\":{}}}");
	n += put(b + n, 0, "{\"event\":{\"data\":{\"pty\":\"-_8\"}}}");
	n += put(b + n, 0, "{\"event\":{\"end\":{\"exitCode\":3,\"exited\":true,\"status\":\"exit status 3\"}}}");
	n += put(b + n, ENV_END_STREAM, "{}");
	fuzz_write_seed(dir, "seed-run", b, n);
	n = 1;
	n += put(b + n, 0, "{\"event\":{\"start\":{\"pid\":7}}}");
	n += put(b + n, 0, "{\"event\":{\"end\":{\"exitCode\":-1,\"status\":\"signal: killed\"}}}");
	n += put(b + n, ENV_END_STREAM, "{\"error\":{\"code\":\"internal\",\"message\":\"x\"}}");
	fuzz_write_seed(dir, "seed-killed", b, n);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result a, b;

	if (!size)
		return 0;
	a = run(data + 1, size - 1, 1 + data[0] % 61);
	b = run(data + 1, size - 1, size);
	CHECK(a.failed == b.failed);
	if (!a.failed) {
		CHECK(a.got_end == b.got_end && a.got_eos == b.got_eos && a.eos_error == b.eos_error);
		CHECK(a.idle == b.idle && a.pid == b.pid && a.status == b.status);
	}
	return 0;
}
