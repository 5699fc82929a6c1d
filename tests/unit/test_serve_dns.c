/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of tools/serve/dns.c, the sandboxes' name server, played by a
 * guest that is not always polite, over UDP and TCP, in a network namespace
 * of the test's own (its name server listens on port 53): a fake upstream on
 * 127.0.0.1:5353 answers a.test (one address), big.test (40: truncated over
 * UDP), huge.test (4000: a 64026-byte answer), edns.test (300: 4827 bytes,
 * over UDP too), deny.test (which the fake
 * policy refuses to learn) and never slow.test. serve's sandbox list and
 * policy are stubs here. Skipped (status 77) where no network namespace can
 * be made.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cunit_main.h"
#include "netpolicy.h"
#include "serve.h"

#define UPSTREAM_PORT 5353
#define GW 0x7f000002u /* 127.0.0.2: the sandbox's gateway */

/* ---- the stubs of serve's parts dns.c calls ---- */

static struct sandbox sb;
static pthread_mutex_t sb_lock = PTHREAD_MUTEX_INITIALIZER;
static bool sb_alive = true;
static char learnt_name[256];
static int learnt_n, learn_calls;
static atomic_int upstream_queries;

struct sandbox *sbx_get(const char *id)
{
	bool ok;

	pthread_mutex_lock(&sb_lock);
	ok = sb_alive && !strcmp(id, sb.id);
	pthread_mutex_unlock(&sb_lock);
	return ok ? &sb : NULL;
}

struct sandbox *sbx_get_slot(int slot)
{
	bool ok;

	pthread_mutex_lock(&sb_lock);
	ok = sb_alive && slot == sb.net_slot;
	pthread_mutex_unlock(&sb_lock);
	return ok ? &sb : NULL;
}

void sbx_put(struct sandbox *s)
{
	(void)s;
}

int net_learn(struct sandbox *s, const char *name, const uint32_t *addrs, int n)
{
	(void)s;
	(void)addrs;
	pthread_mutex_lock(&sb_lock);
	snprintf(learnt_name, sizeof(learnt_name), "%s", name);
	learnt_n = n;
	learn_calls++;
	pthread_mutex_unlock(&sb_lock);
	return strcmp(name, "deny.test") ? 0 : -1;
}

void serve_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ---- messages ---- */

/* A query of @name (type A) with id @id into @m: its length. */
static size_t query(unsigned char *m, uint16_t id, const char *name)
{
	size_t n = 12;

	memset(m, 0, 12);
	m[0] = (unsigned char)(id >> 8);
	m[1] = (unsigned char)id;
	m[2] = 0x01; /* RD */
	m[5] = 1;
	for (const char *p = name; *p;) {
		size_t l = strcspn(p, ".");

		m[n++] = (unsigned char)l;
		memcpy(m + n, p, l);
		n += l;
		p += l + (p[l] == '.');
	}
	m[n++] = 0;
	memcpy(m + n, "\0\1\0\1", 4);
	return n + 4;
}

static uint16_t be16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The fake upstream's answer to query @q (@n bytes) into @out (room for
 * 65535): its length, 0 for no answer. Over UDP an answer past 512 bytes
 * comes truncated: the header and question, TC set. */
static size_t answer_of(const unsigned char *q, size_t n, bool udp, unsigned char *out)
{
	char name[256] = "";
	size_t i = 12, k = 0, len;
	unsigned addrs;

	while (i < n && q[i] && k + q[i] + 1 < sizeof(name)) {
		if (k)
			name[k++] = '.';
		memcpy(name + k, q + i + 1, q[i]);
		k += q[i];
		i += 1u + q[i];
	}
	name[k] = '\0';
	i += 5;
	if (i > n || !strcmp(name, "slow.test"))
		return 0;
	addrs = !strcmp(name, "big.test") ? 40 : !strcmp(name, "huge.test") ? 4000 :
		!strcmp(name, "edns.test") ? 300 : 1;
	memcpy(out, q, i);
	out[2] = 0x81;
	out[3] = 0x80;
	out[6] = (unsigned char)(addrs >> 8);
	out[7] = (unsigned char)addrs;
	out[8] = out[9] = out[10] = out[11] = 0;
	len = i;
	for (unsigned a = 0; a < addrs; a++) {
		static const unsigned char rr[12] = { 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4 };

		memcpy(out + len, rr, 12);
		out[len + 12] = 192;
		out[len + 13] = 0;
		out[len + 14] = (unsigned char)(2 + a / 256);
		out[len + 15] = (unsigned char)(7 + a);
		len += 16;
	}
	/* edns.test: as if the guest offered EDNS room for 4827 bytes */
	if (udp && len > 512 && strcmp(name, "edns.test")) {
		len = i;
		out[2] |= 0x02;
		out[6] = out[7] = 0;
	}
	return len;
}

static bool read_all(int fd, unsigned char *p, size_t n)
{
	while (n) {
		ssize_t r = recv(fd, p, n, 0);

		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

static bool write_all(int fd, const unsigned char *p, size_t n)
{
	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

/* One TCP connection to the fake upstream: its queries answered in turn. */
static void *upstream_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	unsigned char *q = malloc(65537), *a = malloc(65537);

	while (q && a) {
		size_t n, len;

		if (!read_all(fd, q, 2) || !read_all(fd, q + 2, n = be16(q)))
			break;
		atomic_fetch_add(&upstream_queries, 1);
		len = answer_of(q + 2, n, false, a + 2);
		if (!len)
			continue;
		a[0] = (unsigned char)(len >> 8);
		a[1] = (unsigned char)len;
		if (!write_all(fd, a, len + 2))
			break;
	}
	free(q);
	free(a);
	close(fd);
	return NULL;
}

static int up_udp, up_tcp; /* the fake upstream's sockets, bound before its thread starts */

static void *upstream(void *arg)
{
	int u = up_udp, t = up_tcp;
	static unsigned char q[4096], a[65536];

	(void)arg;
	for (;;) {
		struct pollfd p[2] = { { .fd = u, .events = POLLIN }, { .fd = t, .events = POLLIN } };

		if (poll(p, 2, -1) < 0)
			continue;
		if (p[0].revents & POLLIN) {
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t n = recvfrom(u, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
			size_t len;

			atomic_fetch_add(&upstream_queries, 1);
			if (n > 0 && (len = answer_of(q, (size_t)n, true, a)))
				sendto(u, a, len, 0, (struct sockaddr *)&from, fl);
		}
		if (p[1].revents & POLLIN) {
			int c = accept4(t, NULL, NULL, SOCK_CLOEXEC);
			pthread_t th;

			if (c >= 0 && pthread_create(&th, NULL, upstream_conn, (void *)(intptr_t)c) == 0)
				pthread_detach(th);
			else if (c >= 0)
				close(c);
		}
	}
	return NULL;
}

/* ---- the guest's side ---- */

static int guest_tcp(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53),
				  .sin_addr.s_addr = htonl(GW) };
	struct timeval tv = { .tv_sec = 15 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CU_ASSERT_FATAL(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* @m framed (its length first) and sent. */
static bool send_framed(int fd, const unsigned char *m, size_t n)
{
	unsigned char b[2 + 4096];

	b[0] = (unsigned char)(n >> 8);
	b[1] = (unsigned char)n;
	memcpy(b + 2, m, n);
	return write_all(fd, b, n + 2);
}

/* An answer read into @a (room for 65535): its length, or 0 when the
 * connection was closed (or nothing came in 15 s). */
static size_t read_framed(int fd, unsigned char *a)
{
	unsigned char l[2];

	if (!read_all(fd, l, 2) || !read_all(fd, a, be16(l)))
		return 0;
	return be16(l);
}

/* Whether the name server closed @fd (an end of file, or a reset). */
static bool closed(int fd)
{
	unsigned char b[1];
	ssize_t r = recv(fd, b, 1, 0);

	return r == 0 || (r < 0 && errno == ECONNRESET);
}

static unsigned char ans[65536];

static void test_tcp_one(void)
{
	unsigned char q[512];
	size_t n = query(q, 0x1234, "a.test"), a;
	int fd = guest_tcp();

	CU_ASSERT_FATAL(fd >= 0);
	learn_calls = 0;
	CU_ASSERT_FATAL(send_framed(fd, q, n));
	a = read_framed(fd, ans);
	CU_ASSERT_EQUAL(a, n + 16);
	CU_ASSERT_EQUAL(be16(ans), 0x1234);
	CU_ASSERT_EQUAL(be16(ans + 6), 1);
	CU_ASSERT_EQUAL(memcmp(ans + a - 4, "\xc0\x00\x02\x07", 4), 0);
	/* learnt before the guest had it */
	CU_ASSERT_EQUAL(learn_calls, 1);
	CU_ASSERT_STRING_EQUAL(learnt_name, "a.test");
	CU_ASSERT_EQUAL(learnt_n, 1);
	/* the same connection asks again */
	n = query(q, 0x4321, "a.test");
	CU_ASSERT_FATAL(send_framed(fd, q, n));
	CU_ASSERT_EQUAL(read_framed(fd, ans), n + 16);
	CU_ASSERT_EQUAL(be16(ans), 0x4321);
	close(fd);
}

/* Two queries in one write: answered in order; then the guest's half-close
 * ends the connection. */
static void test_tcp_pipelined(void)
{
	unsigned char q[600], m[300];
	size_t n1 = query(m, 1, "big.test"), n = 0;
	int fd = guest_tcp();

	CU_ASSERT_FATAL(fd >= 0);
	q[n++] = 0;
	q[n++] = (unsigned char)n1;
	memcpy(q + n, m, n1);
	n += n1;
	n1 = query(m, 2, "a.test");
	q[n++] = 0;
	q[n++] = (unsigned char)n1;
	memcpy(q + n, m, n1);
	n += n1;
	CU_ASSERT_FATAL(write_all(fd, q, n));
	shutdown(fd, SHUT_WR);
	CU_ASSERT_EQUAL(read_framed(fd, ans), 12 + 14 + 40 * 16);
	CU_ASSERT_EQUAL(be16(ans), 1);
	CU_ASSERT_EQUAL(be16(ans + 6), 40);
	CU_ASSERT_EQUAL(read_framed(fd, ans), 12 + 12 + 16);
	CU_ASSERT_EQUAL(be16(ans), 2);
	CU_ASSERT(closed(fd));
	close(fd);
}

/* A query a byte at a time. */
static void test_tcp_trickle(void)
{
	unsigned char q[300], b[302];
	size_t n = query(q, 7, "a.test");
	int fd = guest_tcp();

	CU_ASSERT_FATAL(fd >= 0);
	b[0] = 0;
	b[1] = (unsigned char)n;
	memcpy(b + 2, q, n);
	for (size_t i = 0; i < n + 2; i++) {
		CU_ASSERT_FATAL(write_all(fd, b + i, 1));
		usleep(2000);
	}
	CU_ASSERT_EQUAL(read_framed(fd, ans), n + 16);
	CU_ASSERT_EQUAL(be16(ans), 7);
	close(fd);
}

/* An answer of 64026 bytes (4000 addresses), whole. */
static void test_tcp_huge(void)
{
	unsigned char q[300];
	size_t n = query(q, 9, "huge.test");
	int fd = guest_tcp();

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(send_framed(fd, q, n));
	CU_ASSERT_EQUAL_FATAL(read_framed(fd, ans), n + 4000 * 16);
	CU_ASSERT_EQUAL(be16(ans + 6), 4000);
	/* the last record's address: 192.0.(2 + 3999 / 256).(7 + 3999) */
	CU_ASSERT_EQUAL(ans[n + 4000 * 16 - 2], 2 + 3999 / 256);
	CU_ASSERT_EQUAL(ans[n + 4000 * 16 - 1], (unsigned char)(7 + 3999));
	close(fd);
}

/* What is not a query closes the connection, and nothing is asked. */
static void test_tcp_bad(void)
{
	static const struct {
		const char *what;
		unsigned len;
	} bad[] = { { "a length under a header's", 5 }, { "a length past 4096", 5000 },
		    { "an answer (QR set)", 0 }, { "two questions", 1 } };

	for (unsigned i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		unsigned char q[5002] = { 0 };
		int before = atomic_load(&upstream_queries), fd = guest_tcp();
		size_t n;

		CU_ASSERT_FATAL(fd >= 0);
		if (bad[i].len > 1) {
			n = bad[i].len;
			q[0] = (unsigned char)(n >> 8);
			q[1] = (unsigned char)n;
			n = n > 4096 ? 100 : n + 2; /* the rest never comes */
		} else {
			n = query(q + 2, 3, "a.test");
			if (bad[i].len == 0)
				q[2 + 2] |= 0x80;
			else
				q[2 + 5] = 2;
			q[0] = 0;
			q[1] = (unsigned char)n;
			n += 2;
		}
		CU_ASSERT_FATAL(write_all(fd, q, n));
		if (!closed(fd))
			CU_FAIL("not closed");
		printf("\n  %s: closed", bad[i].what);
		CU_ASSERT_EQUAL(atomic_load(&upstream_queries), before);
		close(fd);
	}
}

/* A sandbox's 5th connection is closed while 4 are open; with them gone,
 * one is answered. */
static void test_tcp_limit(void)
{
	unsigned char q[300];
	size_t n = query(q, 11, "a.test");
	int fd[4], extra, tries = 0;
	bool answered = false;

	for (int i = 0; i < 4; i++) {
		fd[i] = guest_tcp();
		CU_ASSERT_FATAL(fd[i] >= 0);
	}
	/* the 4 taken: each answers */
	for (int i = 0; i < 4; i++) {
		CU_ASSERT_FATAL(send_framed(fd[i], q, n));
		CU_ASSERT_EQUAL(read_framed(fd[i], ans), n + 16);
	}
	extra = guest_tcp();
	CU_ASSERT_FATAL(extra >= 0);
	send_framed(extra, q, n);
	CU_ASSERT(closed(extra));
	close(extra);
	for (int i = 0; i < 4; i++)
		close(fd[i]);
	/* once the name server has seen them go (it is asynchronous) */
	while (!answered && tries++ < 100) {
		extra = guest_tcp();
		CU_ASSERT_FATAL(extra >= 0);
		answered = send_framed(extra, q, n) && read_framed(extra, ans) == n + 16;
		close(extra);
		if (!answered)
			usleep(50000);
	}
	CU_ASSERT(answered);
	printf("\n  answered after %d tries", tries);
}

/* An answer the policy refuses to learn from is not the guest's. */
static void test_tcp_deny(void)
{
	unsigned char q[300];
	size_t n = query(q, 13, "deny.test");
	int fd = guest_tcp();

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(send_framed(fd, q, n));
	CU_ASSERT(closed(fd));
	CU_ASSERT_STRING_EQUAL(learnt_name, "deny.test");
	close(fd);
}

/* A query the upstream never answers: the connection goes after 3 s. */
static void test_tcp_timeout(void)
{
	unsigned char q[300];
	size_t n = query(q, 15, "slow.test");
	int fd = guest_tcp();
	double t0 = now_ms(), t;

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(send_framed(fd, q, n));
	CU_ASSERT(closed(fd));
	t = now_ms() - t0;
	printf("\n  closed after %.0f ms", t);
	CU_ASSERT(t >= 2900);
	close(fd);
}

/* A connection of a sandbox gone is closed (its tap and /30 may be
 * another's next), by the twice-a-second sweep: well before the 10 s an
 * idle connection has. */
static void test_tcp_gone(void)
{
	double t0 = now_ms(), t;
	int fd = guest_tcp();

	CU_ASSERT_FATAL(fd >= 0);
	usleep(100000);
	pthread_mutex_lock(&sb_lock);
	sb_alive = false;
	pthread_mutex_unlock(&sb_lock);
	CU_ASSERT(closed(fd));
	t = now_ms() - t0;
	printf("\n  closed %.0f ms after it was made", t);
	CU_ASSERT(t < 9000);
	pthread_mutex_lock(&sb_lock);
	sb_alive = true;
	pthread_mutex_unlock(&sb_lock);
	close(fd);
}

static void test_udp(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53),
				  .sin_addr.s_addr = htonl(GW) };
	struct timeval tv = { .tv_sec = 10 };
	unsigned char q[300];
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	size_t n = query(q, 21, "a.test");

	CU_ASSERT_FATAL(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CU_ASSERT_FATAL(send(fd, q, n, 0) == (ssize_t)n);
	CU_ASSERT_EQUAL(recv(fd, ans, sizeof(ans), 0), (ssize_t)(n + 16));
	CU_ASSERT_EQUAL(be16(ans), 21);
	/* truncated upstream: passed on, TC set (the guest asks over TCP) */
	n = query(q, 22, "big.test");
	CU_ASSERT_FATAL(send(fd, q, n, 0) == (ssize_t)n);
	CU_ASSERT_EQUAL(recv(fd, ans, sizeof(ans), 0), (ssize_t)n);
	CU_ASSERT_EQUAL(be16(ans), 22);
	CU_ASSERT(ans[2] & 0x02);
	/* an answer past the proxy's 4096 bytes: cut to its question, TC set */
	n = query(q, 23, "edns.test");
	CU_ASSERT_FATAL(send(fd, q, n, 0) == (ssize_t)n);
	CU_ASSERT_EQUAL(recv(fd, ans, sizeof(ans), 0), (ssize_t)n);
	CU_ASSERT_EQUAL(be16(ans), 23);
	CU_ASSERT(ans[2] & 0x02);
	CU_ASSERT_EQUAL(be16(ans + 6), 0);
	CU_ASSERT_EQUAL(memcmp(ans + 12, q + 12, n - 12), 0);
	close(fd);
}

/* dns_close: nothing listens any more. */
static void test_close(void)
{
	dns_close(&sb);
	CU_ASSERT_EQUAL(sb.dns_fd, -1);
	CU_ASSERT_EQUAL(sb.dns_tcp_fd, -1);
	CU_ASSERT_EQUAL(guest_tcp(), -1);
}

/* This test's own network namespace with its loopback up: 0, or -1. */
static int own_net(void)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int fd;

	if (unshare(CLONE_NEWNET) && unshare(CLONE_NEWUSER | CLONE_NEWNET))
		return -1;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr))
		return -1;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr))
		return -1;
	close(fd);
	return 0;
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "TCP: a query, then another on the same connection", test_tcp_one },
		{ "TCP: two queries in one write, answered in order; a half-close ends it", test_tcp_pipelined },
		{ "TCP: a query a byte at a time", test_tcp_trickle },
		{ "TCP: a 64026-byte answer, whole", test_tcp_huge },
		{ "TCP: what is not a query closes the connection, nothing asked", test_tcp_bad },
		{ "TCP: a 5th connection closed while 4 are open", test_tcp_limit },
		{ "TCP: an answer the policy refuses is not the guest's", test_tcp_deny },
		{ "TCP: a query never answered ends its connection after 3 s", test_tcp_timeout },
		{ "TCP: the connections of a sandbox gone are closed", test_tcp_gone },
		{ "UDP: answered; a truncated answer passed on; one past 4096 bytes cut, TC set", test_udp },
		{ "dns_close: nothing listens", test_close },
		{ NULL, NULL },
	};
	char why[200];
	pthread_t t;

	if (own_net()) {
		printf("test_serve_dns: skipped: no network namespace of its own (%s)\n", strerror(errno));
		return 77;
	}
	{
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(UPSTREAM_PORT),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int one = 1;

		/* bound and listening before any query can come */
		up_udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		up_tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		setsockopt(up_tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(up_udp, (struct sockaddr *)&sa, sizeof(sa)) ||
		    bind(up_tcp, (struct sockaddr *)&sa, sizeof(sa)) || listen(up_tcp, 16)) {
			perror("test_serve_dns: the fake upstream");
			return 1;
		}
	}
	pthread_create(&t, NULL, upstream, NULL);
	pthread_detach(t);
	snprintf(sb.id, sizeof(sb.id), "sbxtest");
	sb.net_slot = 3;
	pthread_mutex_init(&sb.net_lock, NULL);
	sb.dns_fd = sb.dns_tcp_fd = -1;
	if (dns_start("127.0.0.1:5353", why, sizeof(why)) || dns_open(&sb, GW, why, sizeof(why))) {
		printf("test_serve_dns: %s\n", why);
		return 1;
	}
	return cu_run("serve dns", tests);
}
