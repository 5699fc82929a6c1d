/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tools/serve/proxy.c: E2B's maskRequestHost (which masks serve takes,
 * their ${PORT} filled in); the head a guest port is sent: unchanged, with
 * a header added, or with every Host line (and its continuation) replaced
 * by the mask's; and a port other than the agent's, asked of the agent's
 * bridge first (its 101, its 502 and 404 as the client's 502). The client
 * and the guest are socketpairs.
 */
#include <CUnit/Basic.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

struct server srv = { .agent_wait_ms = 100 };

double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* the guest's end of the last connection the proxy made, what the guest
 * says on it (at once), and the vsock port it was made to */
static int guest_peer = -1;
static const char *guest_says = "HTTP/1.1 204 No Content\r\n\r\n";
static unsigned guest_port;

int sbx_vsock_connect(const struct sandbox *s, unsigned port, int timeout_ms)
{
	int sv[2];

	(void)s;
	(void)timeout_ms;
	guest_port = port;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	if (send(sv[1], guest_says, strlen(guest_says), MSG_NOSIGNAL) < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (guest_peer >= 0)
		close(guest_peer);
	guest_peer = sv[1];
	return sv[0];
}

static void test_mask_ok(void)
{
	static const char *good[] = { "localhost:${PORT}", "${PORT}-box.example.com", "[::1]:${PORT}",
				      "h", "a.b-c_d~e%20:80" };
	static const char *bad[] = { "", "a b", "x\r\nEvil: 1", "h/x", "${PORT", "{PORT}", "a\tb",
				     "h\"", "caf\xc3\xa9" };
	char big[202];

	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		CU_ASSERT_TRUE(mask_host_ok(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		CU_ASSERT_FALSE(mask_host_ok(bad[i]));
	memset(big, 'h', sizeof(big) - 1);
	big[201] = '\0';
	CU_ASSERT_FALSE(mask_host_ok(big)); /* 201 */
	big[200] = '\0';
	CU_ASSERT_TRUE(mask_host_ok(big)); /* 200 */
}

static void test_mask_expand(void)
{
	char out[64];

	mask_host_expand("localhost:${PORT}", 8080, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "localhost:8080");
	mask_host_expand("${PORT}-x.${PORT}", 1, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "1-x.1");
	mask_host_expand("plain.example", 49983, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "plain.example");
	/* a short buffer: cut, still a string */
	mask_host_expand("ab${PORT}cd", 65535, out, 6);
	CU_ASSERT_STRING_EQUAL(out, "ab655");
	mask_host_expand("abcdef", 1, out, 4);
	CU_ASSERT_STRING_EQUAL(out, "abc");
}

/* What is in socket @fd now (all was written before), as a string. */
static void drain(int fd, char *buf, size_t len)
{
	size_t o = 0;
	ssize_t n;

	while (o + 1 < len && (n = recv(fd, buf + o, len - 1 - o, MSG_DONTWAIT)) > 0)
		o += (size_t)n;
	buf[o] = '\0';
}

/* @req proxied (with @extra and @host) to a guest: what the guest got,
 * into @got; and what the client got back. */
static void proxy_once(unsigned port, const char *req, const char *extra, const char *host, char *got,
		       size_t len, char *back, size_t blen)
{
	static struct hconn c;
	static struct hreq r;
	struct sandbox s = { .id = "box", .state = SBX_RUNNING, .token = "tok" };
	struct timeval tv = { .tv_sec = 2 };
	int sv[2];

	got[0] = back[0] = '\0';
	CU_ASSERT_FATAL(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	CU_ASSERT_FATAL(send(sv[1], req, strlen(req), 0) == (ssize_t)strlen(req));
	memset(&c, 0, sizeof(c));
	c.fd = sv[0];
	c.up_fd = -1;
	setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	CU_ASSERT_FATAL(hio_read_head(&c, &r) == 0);
	proxy_request(&c, &r, &s, port, extra, host);
	if (c.up_fd >= 0)
		close(c.up_fd);
	drain(guest_peer, got, len);
	drain(sv[1], back, blen);
	close(sv[0]);
	close(sv[1]);
}

static void test_head(void)
{
	static const char req[] = "GET /x?y=1 HTTP/1.1\r\nhost: client.example\r\nX-A: 1\r\n"
				  "HOST: second\r\n folded\r\nX-B: 2\r\n\r\n";
	char got[512], back[256];

	/* no mask: the head as the client sent it */
	proxy_once(AGENT_PORT, req, NULL, NULL, got, sizeof(got), back, sizeof(back));
	CU_ASSERT_STRING_EQUAL(got, req);
	CU_ASSERT_STRING_EQUAL(back, "HTTP/1.1 204 No Content\r\n\r\n");
	/* a header added (a signed link's token) */
	proxy_once(AGENT_PORT, req, "X-Access-Token: t\r\n", NULL, got, sizeof(got), back, sizeof(back));
	CU_ASSERT_STRING_EQUAL(got, "GET /x?y=1 HTTP/1.1\r\nhost: client.example\r\nX-A: 1\r\n"
				    "HOST: second\r\n folded\r\nX-B: 2\r\nX-Access-Token: t\r\n\r\n");
	/* masked: both Host lines and the folded line gone, the mask's last */
	proxy_once(AGENT_PORT, req, NULL, "localhost:8080", got, sizeof(got), back, sizeof(back));
	CU_ASSERT_STRING_EQUAL(got, "GET /x?y=1 HTTP/1.1\r\nX-A: 1\r\nX-B: 2\r\nHost: localhost:8080\r\n\r\n");
	CU_ASSERT_STRING_EQUAL(back, "HTTP/1.1 204 No Content\r\n\r\n");
	/* masked and a header added */
	proxy_once(AGENT_PORT, req, "X-Access-Token: t\r\n", "m", got, sizeof(got), back, sizeof(back));
	CU_ASSERT_STRING_EQUAL(got, "GET /x?y=1 HTTP/1.1\r\nX-A: 1\r\nX-B: 2\r\nHost: m\r\n"
				    "X-Access-Token: t\r\n\r\n");
	/* a request without a Host gets the mask's; a header whose name
	 * only starts with "Host" stays */
	proxy_once(AGENT_PORT, "GET / HTTP/1.0\r\nHostile: 1\r\n\r\n", NULL, "m:1", got, sizeof(got), back,
		   sizeof(back));
	CU_ASSERT_STRING_EQUAL(got, "GET / HTTP/1.0\r\nHostile: 1\r\nHost: m:1\r\n\r\n");
}

static void test_bridge(void)
{
	static const char req[] = "GET /app HTTP/1.1\r\nHost: a\r\n\r\n";
	char got[512], back[512];

	/* the agent's 101, then the port's answer */
	guest_says = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: cubicle-port\r\n\r\n"
		     "HTTP/1.1 204 No Content\r\n\r\n";
	proxy_once(3000, req, NULL, "localhost:3000", got, sizeof(got), back, sizeof(back));
	CU_ASSERT_EQUAL(guest_port, AGENT_PORT);
	CU_ASSERT_STRING_EQUAL(got, "GET /cubicle/port?port=3000 HTTP/1.1\r\nHost: cubicle-agent\r\n"
				    "X-Access-Token: tok\r\nConnection: Upgrade\r\nUpgrade: cubicle-port\r\n\r\n"
				    "GET /app HTTP/1.1\r\nHost: localhost:3000\r\n\r\n");
	CU_ASSERT_STRING_EQUAL(back, "HTTP/1.1 204 No Content\r\n\r\n");
	/* nothing listens there: 502 naming it, the request not passed on */
	guest_says = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n";
	proxy_once(3000, req, NULL, NULL, got, sizeof(got), back, sizeof(back));
	CU_ASSERT_PTR_NULL(strstr(got, "GET /app"));
	CU_ASSERT_PTR_NOT_NULL(strstr(back, "HTTP/1.1 502 "));
	CU_ASSERT_PTR_NOT_NULL(strstr(back, "port 3000: nothing listens on it"));
	/* an agent without the bridge */
	guest_says = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
	proxy_once(3000, req, NULL, NULL, got, sizeof(got), back, sizeof(back));
	CU_ASSERT_PTR_NOT_NULL(strstr(back, "has no port bridge"));
	/* an answer that is not HTTP */
	guest_says = "garbage";
	proxy_once(3000, req, NULL, NULL, got, sizeof(got), back, sizeof(back));
	CU_ASSERT_PTR_NOT_NULL(strstr(back, "HTTP/1.1 502 "));
	guest_says = "HTTP/1.1 204 No Content\r\n\r\n";
}

int main(void)
{
	CU_pSuite s;
	unsigned fails;

	signal(SIGPIPE, SIG_IGN);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("serve_proxy", NULL, NULL);
	CU_add_test(s, "maskRequestHost: which serve takes", test_mask_ok);
	CU_add_test(s, "maskRequestHost: ${PORT} filled in", test_mask_expand);
	CU_add_test(s, "the head a guest port gets", test_head);
	CU_add_test(s, "another port: through the agent's bridge", test_bridge);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	if (guest_peer >= 0)
		close(guest_peer);
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
