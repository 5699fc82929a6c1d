/* SPDX-License-Identifier: Apache-2.0 */
/* What both tap policy tests share: the BPF precondition check and crafted Ethernet frames. */
#ifndef CUBICLE_TAP_POLICY_SUPPORT_H
#define CUBICLE_TAP_POLICY_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the BPF tests can run; prints why not once. Fails the test
 * instead when CUBICLE_E2E_REQUIRE=1 (CI runs as root). */
bool need_bpf(void);

/* The guest's MAC: eth() sends from it. */
extern const uint8_t guest_mac[6];
extern const uint8_t other_mac[6];

/* A frame under construction. */
struct pkt {
	uint8_t b[256];
	unsigned len;
};

void eth(struct pkt *p, uint16_t type);
/* IPv4 header with ihl words (options zeroed), then l4len bytes of L4
 * header whose first four bytes are sport and dport. */
void ip4(struct pkt *p, uint8_t proto, const char *src, const char *dst, uint16_t sport,
	 uint16_t dport, uint16_t frag, unsigned ihl, unsigned l4len);
void tcp(struct pkt *p, const char *dst, uint16_t dport);
void udp(struct pkt *p, const char *dst, uint16_t dport);
void icmp(struct pkt *p, const char *dst);
/* An IPv4-over-Ethernet ARP op (1 request, 2 reply) from sha/spa about tpa. */
void arp_pkt(struct pkt *p, uint16_t op, const uint8_t *sha, const char *spa, const char *tpa);
/* Insert a tag (tpid, vid) after the MAC addresses: called twice, the second
 * tag is the outer one. */
void tag(struct pkt *p, uint16_t tpid, uint16_t vid);

#endif
