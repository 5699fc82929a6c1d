/* SPDX-License-Identifier: Apache-2.0 */
/* What both tap policy tests share: the BPF precondition check and crafted Ethernet frames. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "tap_policy_support.h"

static int root_ok = -1; /* -1 unknown, 0 cannot run BPF here, 1 can */

/* Whether the BPF tests can run; prints why not once. Fails the test
 * instead when CUBICLE_E2E_REQUIRE=1 (CI runs as root). */
bool need_bpf(void)
{
	const char *req = getenv("CUBICLE_E2E_REQUIRE");
	const char *runner = getenv("TEST_RUNNER");

	if (root_ok < 0) {
		const char *why = NULL;

		if (runner && *runner)
			why = "cross build under an emulator (no bpf() there)";
		else if (geteuid())
			why = "loading BPF needs root";
		else if (syscall(__NR_bpf, -1, NULL, 0) < 0 && errno == ENOSYS)
			why = "this kernel has no bpf()";
		root_ok = !why;
		if (why) {
			printf("\n  skipped: %s ", why);
			/* only a missing privilege is the environment's fault */
			if (req && !strcmp(req, "1") && !(runner && *runner) && geteuid()) {
				printf("(CUBICLE_E2E_REQUIRE=1: failing) ");
				CU_FAIL("BPF tests required but cannot run");
			}
		}
	}
	return root_ok == 1;
}

/* The guest's MAC: eth() sends from it. */
const uint8_t guest_mac[6] = { 0x52, 0x54, 0, 0x12, 0x34, 0x56 };
const uint8_t other_mac[6] = { 0x52, 0x54, 0, 0x12, 0x34, 0x57 };

void eth(struct pkt *p, uint16_t type)
{
	static const uint8_t dst[6] = { 0x02, 0, 0, 0, 0, 1 };

	memcpy(p->b, dst, 6);
	memcpy(p->b + 6, guest_mac, 6);
	p->b[12] = (uint8_t)(type >> 8);
	p->b[13] = (uint8_t)type;
	p->len = ETH_HLEN;
}

/* IPv4 header with ihl words (options zeroed), then l4len bytes of L4
 * header whose first four bytes are sport and dport. */
void ip4(struct pkt *p, uint8_t proto, const char *src, const char *dst, uint16_t sport,
	 uint16_t dport, uint16_t frag, unsigned ihl, unsigned l4len)
{
	uint8_t *h;
	uint32_t a;

	eth(p, ETH_P_IP);
	h = p->b + ETH_HLEN;
	memset(h, 0, ihl * 4 + l4len);
	h[0] = (uint8_t)(0x40 | ihl);
	h[2] = (uint8_t)((ihl * 4 + l4len) >> 8);
	h[3] = (uint8_t)(ihl * 4 + l4len);
	h[6] = (uint8_t)(frag >> 8);
	h[7] = (uint8_t)frag;
	h[8] = 64;
	h[9] = proto;
	inet_pton(AF_INET, src, &a);
	memcpy(h + 12, &a, 4);
	inet_pton(AF_INET, dst, &a);
	memcpy(h + 16, &a, 4);
	if (l4len >= 4) {
		uint8_t *l4 = h + ihl * 4;

		l4[0] = (uint8_t)(sport >> 8);
		l4[1] = (uint8_t)sport;
		l4[2] = (uint8_t)(dport >> 8);
		l4[3] = (uint8_t)dport;
	}
	if (proto == IPPROTO_ICMP && l4len)
		h[ihl * 4] = 8; /* echo request */
	p->len = ETH_HLEN + ihl * 4 + l4len;
}

void tcp(struct pkt *p, const char *dst, uint16_t dport)
{
	ip4(p, IPPROTO_TCP, "10.0.2.15", dst, 40000, dport, 0x4000 /* DF */, 5, 20);
}

void udp(struct pkt *p, const char *dst, uint16_t dport)
{
	ip4(p, IPPROTO_UDP, "10.0.2.15", dst, 40000, dport, 0, 5, 8);
}

void icmp(struct pkt *p, const char *dst)
{
	ip4(p, IPPROTO_ICMP, "10.0.2.15", dst, 0, 0, 0x4000, 5, 8);
}

/* An IPv4-over-Ethernet ARP op (1 request, 2 reply) from sha/spa about tpa. */
void arp_pkt(struct pkt *p, uint16_t op, const uint8_t *sha, const char *spa,
	     const char *tpa)
{
	uint8_t *a;
	uint32_t x;

	eth(p, ETH_P_ARP);
	a = p->b + ETH_HLEN;
	memset(a, 0, 28);
	a[1] = 1;     /* Ethernet */
	a[2] = 0x08;  /* IPv4 */
	a[4] = 6;
	a[5] = 4;
	a[7] = (uint8_t)op;
	memcpy(a + 8, sha, 6);
	inet_pton(AF_INET, spa, &x);
	memcpy(a + 14, &x, 4);
	inet_pton(AF_INET, tpa, &x);
	memcpy(a + 24, &x, 4);
	p->len = ETH_HLEN + 28;
}

/* Insert a tag (tpid, vid) after the MAC addresses: called twice, the second
 * tag is the outer one. */
void tag(struct pkt *p, uint16_t tpid, uint16_t vid)
{
	memmove(p->b + 16, p->b + 12, p->len - 12);
	p->b[12] = (uint8_t)(tpid >> 8);
	p->b[13] = (uint8_t)tpid;
	p->b[14] = (uint8_t)(vid >> 8);
	p->b[15] = (uint8_t)vid;
	p->len += 4;
}
