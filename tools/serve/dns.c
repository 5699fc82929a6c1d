/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandboxes' DNS proxy (network_subnet set): each networked sandbox's
 * guest has its tap's host side (.1 of its /30) as its name server, and its
 * egress policy lets UDP to that address's port 53 through. Serve listens
 * there, one socket a sandbox, and forwards each query to the upstream
 * server (dns_upstream, else the first IPv4 nameserver of the host's
 * /etc/resolv.conf) from a socket of its own. When the answer comes and the
 * question names a domain the sandbox's allowOut lists ("example.com",
 * "*.example.com"), the A records' addresses are allowed in its policy
 * (net_learn) before the answer goes back to the guest: an address is
 * reachable once the guest has looked it up, which is how the eBPF policy,
 * which filters addresses, follows domain names. One thread, nothing
 * blocking but the VMM API calls of net_learn: at most DNS_FLIGHTS queries
 * in flight, DNS_PER_SANDBOX of them a sandbox's, each dropped after
 * DNS_TIMEOUT_MS (the guest's resolver asks again). Messages are
 * DNS_MAX bytes at most over UDP: a longer query is dropped, a longer
 * answer cut to its question and marked truncated (TC).
 *
 * DNS over TCP too (RFC 7766; a resolver asks again over TCP when a UDP
 * answer comes truncated): serve listens on the same address's TCP port 53,
 * DNS_TCP_PER_SANDBOX connections a sandbox, DNS_TCP_CONNS in all. Each
 * query read from a connection (a 2-byte length, then the message; at most
 * DNS_MAX) is asked of the upstream over a TCP connection of its own, its
 * answer (up to 65535 bytes) learnt from as a UDP one and written back; then
 * the next query. One query at a time a connection: the next waits in its
 * socket. A query unanswered in DNS_TIMEOUT_MS, or a connection idle for
 * DNS_TCP_IDLE_MS, a guest that does not read its answer for as long, or one
 * whose sandbox went, is closed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netpolicy.h"
#include "serve.h"

#define DNS_FLIGHTS 256
#define DNS_PER_SANDBOX 16
#define DNS_TIMEOUT_MS 3000
#define DNS_MAX 4096
#define DNS_TCP_CONNS 64
#define DNS_TCP_PER_SANDBOX 4
#define DNS_TCP_IDLE_MS 10000
#define DNS_TCP_MSG 65535
#define TAG_FLIGHT (1ull << 40)
#define TAG_LISTEN (1ull << 41) /* | a sandbox's slot: its TCP socket */
#define TAG_GUEST (1ull << 42)  /* | a struct tconn's index: its guest side */
#define TAG_UP (1ull << 43)     /* | a struct tconn's index: its upstream side */

static struct {
	int ep;
	struct sockaddr_in upstream;
	bool have_upstream;
	char upstream_text[64];
} dns = { .ep = -1 };

/* A query sent upstream, waiting for its answer. */
struct flight {
	int fd;                 /* connected to the upstream; -1: free */
	char sid[ID_LEN + 1];   /* the sandbox that asked */
	int slot;
	struct sockaddr_in from; /* the guest's resolver */
	unsigned char qid[2];
	double deadline;
};

static struct flight fl[DNS_FLIGHTS]; /* the DNS thread's alone */

/* A guest's TCP connection to its name server. */
struct tconn {
	int fd;                 /* the guest's connection; -1: free */
	int up;                 /* to the upstream while a query is asked; -1 */
	enum { T_QUERY, T_ASK, T_ANSWER, T_REPLY } st;
	char sid[ID_LEN + 1];
	int slot;
	unsigned char *buf;     /* a message with its length: 2 + DNS_TCP_MSG */
	size_t have, want;      /* bytes of buf read or written, and in all */
	unsigned char qid[2];   /* the query's, while it is asked */
	uint16_t gen;           /* in its epoll tags: an event of a connection before it is not its */
	double deadline;
};

static struct tconn tc[DNS_TCP_CONNS]; /* the DNS thread's alone */

/* "A.B.C.D" or "A.B.C.D:PORT" into @sa: 0 or -1. */
static int parse_hostport(const char *s, struct sockaddr_in *sa)
{
	char h[64], *colon, *end;
	long port = 53;

	if (strlen(s) >= sizeof(h))
		return -1;
	snprintf(h, sizeof(h), "%s", s);
	colon = strchr(h, ':');
	if (colon) {
		*colon = '\0';
		port = strtol(colon + 1, &end, 10);
		if (end == colon + 1 || *end || port < 1 || port > 65535)
			return -1;
	}
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, h, &sa->sin_addr) == 1 ? 0 : -1;
}

/* The host's first IPv4 name server, from /etc/resolv.conf. */
static int resolv_conf(struct sockaddr_in *sa)
{
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[256], addr[64];
	int ret = -1;

	if (!f)
		return -1;
	while (ret && fgets(line, sizeof(line), f))
		if (sscanf(line, " nameserver %63s", addr) == 1 && !strchr(addr, ':'))
			ret = parse_hostport(addr, sa);
	fclose(f);
	return ret;
}

/* A standard query (QR clear, opcode 0) with one question. */
static bool query_ok(const unsigned char *m, size_t n)
{
	return n >= 12 && !(m[2] & 0xf8) && !m[4] && m[5] == 1;
}

/* What answer @m (@n bytes, for sandbox @sid) says learnt by its policy:
 * the sandbox (a reference), or NULL when it is gone or its policy refused
 * an address (the guest does not get the answer). */
static struct sandbox *learnt(const char *sid, const unsigned char *m, size_t n)
{
	char name[256];
	uint32_t addrs[64];
	int k = net_dns_answers(m, (int)n, name, sizeof(name), addrs, 64);
	struct sandbox *s = k < 0 ? NULL : sbx_get(sid);

	/* the policy first: the guest uses the address as soon as it has it */
	if (s && k && net_learn(s, name, addrs, k)) {
		sbx_put(s);
		return NULL;
	}
	return s;
}

static void flight_end(struct flight *f)
{
	if (f->fd >= 0) {
		epoll_ctl(dns.ep, EPOLL_CTL_DEL, f->fd, NULL);
		close(f->fd);
	}
	f->fd = -1;
}

/* Queries from sandbox @s's guest: each sent upstream; 32 at a time (a
 * flooding guest waits its turn behind the others). Under s->net_lock. */
static void queries(struct sandbox *s)
{
	unsigned char buf[DNS_MAX];

	for (int round = 0; round < 32; round++) {
		struct sockaddr_in from;
		socklen_t fl_len = sizeof(from);
		ssize_t n = recvfrom(s->dns_fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
				     (struct sockaddr *)&from, &fl_len);
		struct flight *f = NULL;
		unsigned mine = 0;
		struct epoll_event ev = { .events = EPOLLIN };

		if (n < 0)
			return; /* EAGAIN: all read */
		if (n > (ssize_t)sizeof(buf) || !query_ok(buf, (size_t)n) || !dns.have_upstream)
			continue; /* (a query past DNS_MAX: dropped, not cut) */
		for (unsigned i = 0; i < DNS_FLIGHTS; i++) {
			if (fl[i].fd >= 0 && fl[i].slot == s->net_slot)
				mine++;
			else if (fl[i].fd < 0 && !f)
				f = &fl[i];
		}
		if (!f || mine >= DNS_PER_SANDBOX)
			continue; /* the guest asks again */
		f->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (f->fd < 0)
			continue;
		ev.data.u64 = TAG_FLIGHT | (uint64_t)(f - fl);
		if (connect(f->fd, (struct sockaddr *)&dns.upstream, sizeof(dns.upstream)) < 0 ||
		    send(f->fd, buf, (size_t)n, 0) != n ||
		    epoll_ctl(dns.ep, EPOLL_CTL_ADD, f->fd, &ev) < 0) {
			close(f->fd);
			f->fd = -1;
			continue;
		}
		snprintf(f->sid, sizeof(f->sid), "%s", s->id);
		f->slot = s->net_slot;
		f->from = from;
		memcpy(f->qid, buf, 2);
		f->deadline = now_ms() + DNS_TIMEOUT_MS;
	}
}

/* The upstream's answer to flight @f: learnt, then to the guest. */
/* Answer @m, of which @have bytes came (a datagram past the buffer: a
 * guest that offered EDNS room for it), cut to its header and question with
 * TC set, which has the guest ask again over TCP: its length, or 0 when its
 * question is not in what came. */
static size_t truncated(unsigned char *m, size_t have)
{
	size_t i = 12;

	while (i < have && m[i]) {
		if (m[i] & 0xc0)
			return 0;
		i += 1u + m[i];
	}
	if (i + 5 > have)
		return 0;
	m[2] |= 0x02;
	memset(m + 6, 0, 6);
	return i + 5;
}

static void answer(struct flight *f)
{
	unsigned char buf[DNS_MAX];
	ssize_t n = recv(f->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
	struct sandbox *s;

	if (n < 0 && errno == EAGAIN)
		return;
	flight_end(f);
	if (n > (ssize_t)sizeof(buf))
		n = (ssize_t)truncated(buf, sizeof(buf));
	if (n < 12 || memcmp(buf, f->qid, 2))
		return;
	s = learnt(f->sid, buf, (size_t)n);
	if (!s)
		return;
	pthread_mutex_lock(&s->net_lock);
	if (s->dns_fd >= 0)
		sendto(s->dns_fd, buf, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&f->from,
		       sizeof(f->from));
	pthread_mutex_unlock(&s->net_lock);
	sbx_put(s);
}

static int watch(int op, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = { .events = events, .data.u64 = tag };

	return epoll_ctl(dns.ep, op, fd, &ev);
}

static uint64_t tc_tag(const struct tconn *c, uint64_t side)
{
	return side | (uint64_t)c->gen << 16 | (uint64_t)(c - tc);
}

static void tconn_end(struct tconn *c)
{
	if (c->up >= 0) {
		epoll_ctl(dns.ep, EPOLL_CTL_DEL, c->up, NULL);
		close(c->up);
		c->up = -1;
	}
	if (c->fd >= 0) {
		epoll_ctl(dns.ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
	free(c->buf);
	c->buf = NULL;
}

/* @c on to state @st, watching @fd (its @side) for @events, @wait_ms more
 * to live (0: as it was): a read starts anew (its length first), a write
 * sends what the buffer holds. 0, or -1. */
static int turn(struct tconn *c, int st, int fd, uint32_t events, uint64_t side, double wait_ms)
{
	if (watch(EPOLL_CTL_MOD, fd, events, tc_tag(c, side)) < 0)
		return -1;
	c->st = st;
	c->have = 0;
	if (events == EPOLLIN)
		c->want = 2;
	if (wait_ms)
		c->deadline = now_ms() + wait_ms;
	return 0;
}

/* The query in @c's buffer asked of the upstream: 0, or -1. */
static int ask(struct tconn *c)
{
	c->up = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->up < 0)
		return -1;
	if ((connect(c->up, (struct sockaddr *)&dns.upstream, sizeof(dns.upstream)) < 0 &&
	     errno != EINPROGRESS) ||
	    watch(EPOLL_CTL_ADD, c->up, EPOLLOUT, tc_tag(c, TAG_UP)) < 0) {
		close(c->up);
		c->up = -1;
		return -1;
	}
	memcpy(c->qid, c->buf + 2, 2);
	/* the guest's side is not read meanwhile (a hang-up still ends it) */
	return turn(c, T_ASK, c->fd, 0, TAG_GUEST, DNS_TIMEOUT_MS);
}

/* A message's length from the 2 bytes before it; 0 when it cannot be one. */
static size_t msg_len(const unsigned char *b, size_t max)
{
	size_t n = (size_t)b[0] << 8 | b[1];

	return n >= 12 && n <= max ? n : 0;
}

/* @c's message moved through @fd: read (@in; its length, at most @max,
 * from its first 2 bytes) or written, as far as the socket lets it. 1 when
 * it is all through, 0 when the socket would block, -1 when the connection
 * is done for. */
static int move(struct tconn *c, int fd, bool in, size_t max)
{
	while (c->have < c->want) {
		ssize_t n = in ? recv(fd, c->buf + c->have, c->want - c->have, MSG_DONTWAIT)
			       : send(fd, c->buf + c->have, c->want - c->have, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n <= 0)
			return -1;
		c->have += (size_t)n;
		if (in && c->have == 2 && (c->want = 2 + msg_len(c->buf, max)) == 2)
			return -1;
	}
	return 1;
}

/* Connection @c moved on as far as its sockets let it: a query from the
 * guest, asked of the upstream (the send waits for its connect), its
 * answer, written to the guest; then the next query. */
static void tconn_run(struct tconn *c)
{
	struct sandbox *s;
	int r = -1;

	for (;;) {
		switch (c->st) {
		case T_QUERY:
			if ((r = move(c, c->fd, true, DNS_MAX)) <= 0)
				goto out;
			if (!query_ok(c->buf + 2, c->want - 2) || !dns.have_upstream || ask(c))
				goto end;
			break;
		case T_ASK:
			if ((r = move(c, c->up, false, 0)) <= 0)
				goto out;
			if (turn(c, T_ANSWER, c->up, EPOLLIN, TAG_UP, 0))
				goto end;
			break;
		case T_ANSWER:
			if ((r = move(c, c->up, true, DNS_TCP_MSG)) <= 0)
				goto out;
			epoll_ctl(dns.ep, EPOLL_CTL_DEL, c->up, NULL);
			close(c->up);
			c->up = -1;
			if (memcmp(c->buf + 2, c->qid, 2) || !(s = learnt(c->sid, c->buf + 2, c->want - 2)))
				goto end;
			sbx_put(s);
			if (turn(c, T_REPLY, c->fd, EPOLLOUT, TAG_GUEST, DNS_TCP_IDLE_MS))
				goto end;
			break;
		case T_REPLY:
			if ((r = move(c, c->fd, false, 0)) <= 0)
				goto out;
			if (turn(c, T_QUERY, c->fd, EPOLLIN, TAG_GUEST, DNS_TCP_IDLE_MS))
				goto end;
			break;
		}
	}
out:
	if (!r)
		return;
end:
	tconn_end(c);
}

/* Connections to sandbox @s's name server taken, up to its share. Under
 * s->net_lock. */
static void accepts(struct sandbox *s)
{
	for (int round = 0; round < 16; round++) {
		int fd = accept4(s->dns_tcp_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct tconn *c = NULL;
		unsigned mine = 0;

		if (fd < 0)
			return; /* EAGAIN: all taken */
		for (unsigned i = 0; i < DNS_TCP_CONNS; i++) {
			if (tc[i].fd >= 0 && tc[i].slot == s->net_slot)
				mine++;
			else if (tc[i].fd < 0 && !c)
				c = &tc[i];
		}
		/* past its share: closed at once (its resolver asks again, or over UDP) */
		if (!c || mine >= DNS_TCP_PER_SANDBOX || !(c->buf = malloc(2 + DNS_TCP_MSG))) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->up = -1;
		c->gen++;
		c->st = T_QUERY;
		c->have = 0;
		c->want = 2;
		snprintf(c->sid, sizeof(c->sid), "%s", s->id);
		c->slot = s->net_slot;
		c->deadline = now_ms() + DNS_TCP_IDLE_MS;
		if (watch(EPOLL_CTL_ADD, fd, EPOLLIN, tc_tag(c, TAG_GUEST)) < 0)
			tconn_end(c);
	}
}

/* Whether @c's sandbox still has its name server. */
static bool tconn_owned(const struct tconn *c)
{
	struct sandbox *s = sbx_get(c->sid);
	bool ok = false;

	if (s) {
		pthread_mutex_lock(&s->net_lock);
		ok = s->dns_tcp_fd >= 0 && s->net_slot == c->slot;
		pthread_mutex_unlock(&s->net_lock);
		sbx_put(s);
	}
	return ok;
}

static void *dns_main(void *arg)
{
	double swept = 0;

	(void)arg;
	for (;;) {
		struct epoll_event ev[32];
		int n = epoll_wait(dns.ep, ev, 32, 500);
		double t = now_ms();

		for (int i = 0; i < n; i++) {
			uint64_t d = ev[i].data.u64;
			struct sandbox *s;

			if (d & TAG_FLIGHT) {
				if ((d & 0xffff) < DNS_FLIGHTS && fl[d & 0xffff].fd >= 0)
					answer(&fl[d & 0xffff]);
				continue;
			}
			if (d & (TAG_GUEST | TAG_UP)) {
				struct tconn *c = (d & 0xffff) < DNS_TCP_CONNS ? &tc[d & 0xffff] : NULL;

				if (!c || c->fd < 0 || c->gen != (uint16_t)(d >> 16))
					continue; /* ended while this event waited */
				if ((d & TAG_GUEST) && (ev[i].events & (EPOLLHUP | EPOLLERR)))
					tconn_end(c);
				else
					tconn_run(c);
				continue;
			}
			/* (a sandbox's sockets are closed before it goes: dns_close) */
			s = sbx_get_slot((int)(d & 0xffffffffu));
			if (!s)
				continue;
			pthread_mutex_lock(&s->net_lock);
			if ((d & TAG_LISTEN) && s->dns_tcp_fd >= 0)
				accepts(s);
			else if (!(d & TAG_LISTEN) && s->dns_fd >= 0)
				queries(s);
			pthread_mutex_unlock(&s->net_lock);
			sbx_put(s);
		}
		for (unsigned i = 0; i < DNS_FLIGHTS; i++)
			if (fl[i].fd >= 0 && fl[i].deadline < t)
				flight_end(&fl[i]);
		/* connections timed out, and twice a second those of sandboxes gone */
		for (unsigned i = 0; i < DNS_TCP_CONNS; i++)
			if (tc[i].fd >= 0 && (tc[i].deadline < t || (t - swept >= 500 && !tconn_owned(&tc[i]))))
				tconn_end(&tc[i]);
		if (t - swept >= 500)
			swept = t;
	}
	return NULL;
}

int dns_start(const char *upstream, char *why, size_t len)
{
	pthread_t t;
	pthread_attr_t a;

	if (upstream) {
		if (parse_hostport(upstream, &dns.upstream)) {
			snprintf(why, len, "dns_upstream %s: expected an IPv4 address, with :PORT or not",
				 upstream);
			return -1;
		}
		dns.have_upstream = true;
	} else {
		dns.have_upstream = !resolv_conf(&dns.upstream);
	}
	if (dns.have_upstream) {
		inet_ntop(AF_INET, &dns.upstream.sin_addr, dns.upstream_text,
			  sizeof(dns.upstream_text));
		snprintf(dns.upstream_text + strlen(dns.upstream_text),
			 sizeof(dns.upstream_text) - strlen(dns.upstream_text), ":%u",
			 ntohs(dns.upstream.sin_port));
	}
	for (unsigned i = 0; i < DNS_FLIGHTS; i++)
		fl[i].fd = -1;
	for (unsigned i = 0; i < DNS_TCP_CONNS; i++)
		tc[i].fd = tc[i].up = -1;
	dns.ep = epoll_create1(EPOLL_CLOEXEC);
	if (dns.ep < 0) {
		snprintf(why, len, "epoll_create1: %s", strerror(errno));
		return -1;
	}
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 << 10);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, dns_main, NULL)) {
		snprintf(why, len, "cannot start the DNS thread");
		return -1;
	}
	if (dns.have_upstream)
		serve_log("sandbox DNS: answers from %s", dns.upstream_text);
	else
		serve_log("sandbox DNS: no upstream (no IPv4 nameserver in /etc/resolv.conf and no dns_upstream): sandboxes get no answers");
	return 0;
}

/* A socket of @type bound to @sa (a tap's address, there or not yet):
 * the fd, or -1 with @msg. */
static int bound(int type, const struct sockaddr_in *sa, char *msg, size_t len)
{
	int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	/* bound to the tap's address: it goes with the tap at a pause and
	 * comes back with the resume's */
	if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)) < 0 ||
	    (type == SOCK_STREAM && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) ||
	    bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 ||
	    (type == SOCK_STREAM && listen(fd, DNS_TCP_PER_SANDBOX) < 0)) {
		snprintf(msg, len, "the DNS proxy's %s socket on %s:53: %s",
			 type == SOCK_STREAM ? "TCP" : "UDP", inet_ntoa(sa->sin_addr), strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int dns_open(struct sandbox *s, uint32_t addr, char *msg, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53),
				  .sin_addr.s_addr = htonl(addr) };
	int udp = -1, tcp = -1, ret = -1;

	if (dns.ep < 0)
		return 0;
	pthread_mutex_lock(&s->net_lock);
	if ((s->dns_fd < 0 && (udp = bound(SOCK_DGRAM, &sa, msg, len)) < 0) ||
	    (s->dns_tcp_fd < 0 && (tcp = bound(SOCK_STREAM, &sa, msg, len)) < 0))
		goto out;
	if ((udp >= 0 && watch(EPOLL_CTL_ADD, udp, EPOLLIN, (uint64_t)s->net_slot) < 0) ||
	    (tcp >= 0 && watch(EPOLL_CTL_ADD, tcp, EPOLLIN, TAG_LISTEN | (uint64_t)s->net_slot) < 0)) {
		snprintf(msg, len, "the DNS proxy: epoll_ctl: %s", strerror(errno));
		goto out;
	}
	if (udp >= 0)
		s->dns_fd = udp;
	if (tcp >= 0)
		s->dns_tcp_fd = tcp;
	udp = tcp = -1;
	ret = 0;
out:
	/* (closing an fd takes it out of the epoll set) */
	if (udp >= 0)
		close(udp);
	if (tcp >= 0)
		close(tcp);
	pthread_mutex_unlock(&s->net_lock);
	return ret;
}

void dns_close(struct sandbox *s)
{
	pthread_mutex_lock(&s->net_lock);
	if (s->dns_fd >= 0) {
		epoll_ctl(dns.ep, EPOLL_CTL_DEL, s->dns_fd, NULL);
		close(s->dns_fd);
		s->dns_fd = -1;
	}
	if (s->dns_tcp_fd >= 0) {
		epoll_ctl(dns.ep, EPOLL_CTL_DEL, s->dns_tcp_fd, NULL);
		close(s->dns_tcp_fd);
		s->dns_tcp_fd = -1;
	}
	pthread_mutex_unlock(&s->net_lock);
}
