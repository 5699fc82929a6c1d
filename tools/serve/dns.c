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
 * DNS_TIMEOUT_MS (the guest's resolver asks again).
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
#define TAG_FLIGHT (1ull << 40)

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
		ssize_t n = recvfrom(s->dns_fd, buf, sizeof(buf), MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl_len);
		struct flight *f = NULL;
		unsigned mine = 0;
		struct epoll_event ev = { .events = EPOLLIN };

		if (n < 0)
			return; /* EAGAIN: all read */
		/* a query (QR clear), standard (opcode 0), one question */
		if (n < 12 || (buf[2] & 0xf8) || buf[4] || buf[5] != 1 || !dns.have_upstream)
			continue;
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
static void answer(struct flight *f)
{
	unsigned char buf[DNS_MAX];
	char name[256];
	uint32_t addrs[64];
	ssize_t n = recv(f->fd, buf, sizeof(buf), MSG_DONTWAIT);
	struct sandbox *s;
	int k;

	if (n < 0 && errno == EAGAIN)
		return;
	flight_end(f);
	if (n < 12 || memcmp(buf, f->qid, 2))
		return;
	k = net_dns_answers(buf, (int)n, name, sizeof(name), addrs, 64);
	s = k < 0 ? NULL : sbx_get(f->sid);
	if (!s)
		return;
	/* the policy first: the guest uses the address as soon as it has it */
	if (!k || !net_learn(s, name, addrs, k)) {
		pthread_mutex_lock(&s->net_lock);
		if (s->dns_fd >= 0)
			sendto(s->dns_fd, buf, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&f->from,
			       sizeof(f->from));
		pthread_mutex_unlock(&s->net_lock);
	}
	sbx_put(s);
}

static void *dns_main(void *arg)
{
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
			/* (a sandbox's socket is closed before it goes: dns_close) */
			s = sbx_get_slot((int)d);
			if (!s)
				continue;
			pthread_mutex_lock(&s->net_lock);
			if (s->dns_fd >= 0)
				queries(s);
			pthread_mutex_unlock(&s->net_lock);
			sbx_put(s);
		}
		for (unsigned i = 0; i < DNS_FLIGHTS; i++)
			if (fl[i].fd >= 0 && fl[i].deadline < t)
				flight_end(&fl[i]);
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

int dns_open(struct sandbox *s, uint32_t addr, char *msg, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53),
				  .sin_addr.s_addr = htonl(addr) };
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)s->net_slot };
	int fd, one = 1;

	if (dns.ep < 0 || s->dns_fd >= 0)
		return 0;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* bound to the tap's address: it goes with the tap at a pause and
	 * comes back with the resume's */
	if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		snprintf(msg, len, "the DNS proxy's socket on %s:53: %s", inet_ntoa(sa.sin_addr),
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	pthread_mutex_lock(&s->net_lock);
	s->dns_fd = fd;
	pthread_mutex_unlock(&s->net_lock);
	if (epoll_ctl(dns.ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		snprintf(msg, len, "the DNS proxy: epoll_ctl: %s", strerror(errno));
		dns_close(s);
		return -1;
	}
	return 0;
}

void dns_close(struct sandbox *s)
{
	pthread_mutex_lock(&s->net_lock);
	if (s->dns_fd >= 0) {
		epoll_ctl(dns.ep, EPOLL_CTL_DEL, s->dns_fd, NULL);
		close(s->dns_fd);
		s->dns_fd = -1;
	}
	pthread_mutex_unlock(&s->net_lock);
}
