/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for what `cubicle serve` parses from both sides of
 * its data plane: a client's requests (tools/serve/hio.c: heads, bodies,
 * chunked or not, pipelined) and a guest's answers to them
 * (tools/serve/proxy.c: the response framing it follows to know where an
 * answer ends, 1xx, close-delimited bodies). The input is the client's
 * bytes, a 0xff 0x00 separator, then the guest's bytes; both arrive on
 * socketpairs. Every second request has its body read whole (the control
 * plane's way), the others are proxied to the "guest".
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "seed.h"
#include "serve.h"

struct server srv = { .agent_wait_ms = 10 };

double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static const uint8_t *guest_bytes;
static size_t guest_len;

/* The "guest": a socket whose peer already said all it will say. */
int sbx_vsock_connect(const struct sandbox *s, unsigned port, int timeout_ms)
{
	int sv[2];

	(void)s;
	(void)port;
	(void)timeout_ms;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	if (guest_len && send(sv[1], guest_bytes, guest_len, MSG_NOSIGNAL) < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	shutdown(sv[1], SHUT_WR);
	/* the peer end stays open until the harness is done with this input */
	static int keep[64];
	static unsigned nkeep;

	if (nkeep < 64) {
		keep[nkeep++] = sv[1];
	} else {
		for (unsigned i = 0; i < nkeep; i++)
			close(keep[i]);
		nkeep = 0;
		keep[nkeep++] = sv[1];
	}
	errno = 0;
	return sv[0];
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char get[] = "GET /health HTTP/1.1\r\nE2b-Sandbox-Id: x\r\n\r\n"
				  "\xff\x00"
				  "HTTP/1.1 204 No Content\r\n\r\n";
	static const char chunked[] =
		"POST /process.Process/Start HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		"5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"
		"\xff\x00"
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		"3\r\nabc\r\n0\r\n\r\n";
	static const char closed[] = "GET /files HTTP/1.0\r\n\r\n\xff\x00HTTP/1.0 200 OK\r\n\r\nuntil the end";
	const char *dir = getenv("FUZZ_SEED_DIR");

	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	if (dir) {
		fuzz_write_seed(dir, "get", get, sizeof(get) - 1);
		fuzz_write_seed(dir, "chunked", chunked, sizeof(chunked) - 1);
		fuzz_write_seed(dir, "closed", closed, sizeof(closed) - 1);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static struct hconn c;
	static struct hreq r;
	struct sandbox s = { .id = "fuzz", .state = SBX_RUNNING };
	struct timeval tv = { .tv_usec = 1000 };
	const uint8_t *sep = NULL;
	size_t clen = len;
	int sv[2];

	for (size_t i = 0; i + 1 < len; i++)
		if (data[i] == 0xff && data[i + 1] == 0) {
			sep = data + i;
			break;
		}
	if (sep) {
		clen = (size_t)(sep - data);
		guest_bytes = sep + 2;
		guest_len = len - clen - 2;
	} else {
		guest_bytes = NULL;
		guest_len = 0;
	}
	if (clen > 60000 || guest_len > 60000) /* within the sockets' buffers */
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return 0;
	if (clen && send(sv[1], data, clen, MSG_NOSIGNAL) < 0)
		goto out;
	memset(&c, 0, sizeof(c));
	c.fd = sv[0];
	c.up_fd = -1;
	/* a short read timeout: an unfinished request ends the connection */
	setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (unsigned n = 0; n < 16; n++) {
		if (hio_read_head(&c, &r))
			break;
		(void)hreq_header(&r, "E2b-Sandbox-Id");
		if (n % 2) {
			if (hio_read_body(&c, &r, 4096) == 0)
				hio_reply(&c, 200, "text/plain", r.body, r.body_len, NULL);
			else
				c.close = true;
			free(r.body);
			r.body = NULL;
		} else {
			/* every other one with a header added (a signed link's
			 * token), or its Host replaced (a maskRequestHost) */
			proxy_request(&c, &r, &s, AGENT_PORT, n % 4 ? NULL : "X-Access-Token: 00112233\r\n",
				      n % 4 == 2 ? "localhost:49983" : NULL);
		}
		if (c.close)
			break;
	}
	if (c.up_fd >= 0)
		close(c.up_fd);
out:
	close(sv[0]);
	close(sv[1]);
	return 0;
}
