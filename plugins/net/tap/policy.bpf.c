/* SPDX-License-Identifier: Apache-2.0 */
/* The tap egress policy: a TC classifier (direct action) on the tap's ingress, i.e. on every frame the guest sends, passing only what the allow list names. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "policy.h"

/*
 * Decisions, in order (anything not passed is dropped and counted):
 *   an 802.1Q/802.1ad tag in the skb's metadata: TP_DROP_VLAN. The kernel
 *     moves the outer tag of a tagged frame out of the packet data before tc
 *     ingress (skb_vlan_untag), so the bytes here start at the inner
 *     EtherType; the metadata is the only trace. VID 0 (priority tags) too.
 *   Ethernet header cut short: TP_DROP_SHORT
 *   source MAC other than the guest's, or the guest's not known yet:
 *     TP_DROP_SRC_MAC (see the guest map)
 *   a VLAN EtherType left in the data (QinQ's inner tag): TP_DROP_VLAN
 *   ARP                      TP_DROP_ARP if arp is off; then only an IPv4
 *                            request or reply whose sender MAC is the
 *                            guest's and, with policy.ip, whose sender
 *                            address is the guest's (or 0.0.0.0 in a
 *                            request: an RFC 5227 probe) passes, else
 *                            TP_DROP_ARP_SPOOF
 *   IPv6                     TP_DROP_IPV6: not filtered yet, so never passed
 *   other EtherTypes         TP_DROP_L3
 *   IPv4 with version != 4, IHL < 5, or a header cut short: TP_DROP_SHORT
 *   with policy.ip, a source other than the guest's: TP_DROP_SRC_IP
 *     (0.0.0.0 only in the DHCP request below)
 *   any fragment (MF or an offset): TP_DROP_FRAG. The ports live only in the
 *     first fragment; rather than track fragment trains, none passes. Guests
 *     keep to the MTU (TCP by MSS, PMTU discovery sets DF); a UDP datagram
 *     larger than the MTU does not get through.
 *   DHCP (if dhcp): UDP 68 -> 67 to 255.255.255.255 passes; a unicast renewal
 *     needs an allow entry for the server (busybox udhcpc falls back to
 *     broadcast when it gets no answer).
 *   then the destination's longest match in the prefixes trie:
 *     none                   TP_DROP_ADDR
 *     TP_ANY                 pass
 *     TCP/UDP                pass if (prefix, port, proto) is in ports, else
 *                            TP_DROP_PORT (no L4 header: TP_DROP_SHORT)
 *     ICMP                   pass: ICMP goes to any allowed destination
 *     other protocols        TP_DROP_PROTO
 * Headers are read with bpf_skb_load_bytes, so a frame whose headers are not
 * in the linear part (a guest can choose the split through the vnet header's
 * hdr_len) is judged by its real bytes, not dropped as short.
 */

#define ARP_LEN 28 /* an IPv4-over-Ethernet ARP body */
#define IP_MF_OFFSET_MASK 0x3fff /* MF flag and fragment offset, host order */

const volatile __u32 tp_cfg = 0; /* TP_CFG_*: set by the loader before load */

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, TP_MAX_PREFIXES);
	__type(key, struct tp_prefix_key);
	__type(value, struct tp_prefix);
} prefixes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TP_MAX_PORTS);
	__type(key, struct tp_port_key);
	__type(value, __u8);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tp_guest);
} guest SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TP_NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline int verdict(__u32 reason)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &reason);

	if (c)
		*c += 1; /* per-CPU slot: no atomics needed */
	return reason == TP_PASS ? TC_ACT_OK : TC_ACT_SHOT;
}

static __always_inline int l4_ports(struct __sk_buff *skb, __u32 off, __u16 *sport, __u16 *dport)
{
	__be16 p[2];

	if (bpf_skb_load_bytes(skb, off, p, sizeof(p)))
		return -1;
	*sport = bpf_ntohs(p[0]);
	*dport = bpf_ntohs(p[1]);
	return 0;
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] &&
	       a[5] == b[5];
}

static __always_inline int ipv4(struct __sk_buff *skb, const struct tp_guest *g)
{
	struct tp_prefix_key key = { .prefixlen = 32 };
	struct tp_port_key pk = {};
	struct tp_prefix *pfx;
	__u16 sport, dport;
	struct iphdr ip;
	int src_ok;
	__u32 l4;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)))
		return verdict(TP_DROP_SHORT);
	if (ip.version != 4 || ip.ihl < 5)
		return verdict(TP_DROP_SHORT);
	src_ok = !(g->flags & TP_GUEST_IP) || ip.saddr == g->ip;
	if (!src_ok && ip.saddr) /* 0.0.0.0: only as a DHCP request, below */
		return verdict(TP_DROP_SRC_IP);
	if (bpf_ntohs(ip.frag_off) & IP_MF_OFFSET_MASK)
		return verdict(TP_DROP_FRAG);
	l4 = ETH_HLEN + ip.ihl * 4;
	if ((tp_cfg & TP_CFG_DHCP) && ip.protocol == IPPROTO_UDP &&
	    ip.daddr == bpf_htonl(0xffffffff)) {
		if (l4_ports(skb, l4, &sport, &dport))
			return verdict(TP_DROP_SHORT);
		if (sport == 68 && dport == 67)
			return verdict(TP_PASS);
	}
	if (!src_ok)
		return verdict(TP_DROP_SRC_IP);
	key.addr = ip.daddr;
	pfx = bpf_map_lookup_elem(&prefixes, &key);
	if (!pfx)
		return verdict(TP_DROP_ADDR);
	if (pfx->flags & TP_ANY)
		return verdict(TP_PASS);
	switch (ip.protocol) {
	case IPPROTO_ICMP:
		return verdict(TP_PASS);
	case IPPROTO_TCP:
	case IPPROTO_UDP:
		if (l4_ports(skb, l4, &sport, &dport))
			return verdict(TP_DROP_SHORT);
		pk.id = pfx->id;
		pk.port = dport;
		pk.proto = ip.protocol;
		if (bpf_map_lookup_elem(&ports, &pk))
			return verdict(TP_PASS);
		return verdict(TP_DROP_PORT);
	default:
		return verdict(TP_DROP_PROTO);
	}
}

/* ARP (arp on): an IPv4-over-Ethernet request or reply whose sender is the
 * guest. Offsets in the body: htype 0, ptype 2, hlen 4, plen 5, op 6,
 * sender MAC 8, sender IPv4 14 (not aligned: read as bytes). */
static __always_inline int arp(struct __sk_buff *skb, const struct tp_guest *g)
{
	__u8 a[ARP_LEN];
	__u16 op;
	__u32 spa;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, a, sizeof(a)))
		return verdict(TP_DROP_SHORT);
	op = (__u16)(a[6] << 8 | a[7]);
	if (a[0] != 0 || a[1] != 1 || a[2] != 0x08 || a[3] != 0x00 || a[4] != 6 || a[5] != 4 ||
	    (op != 1 && op != 2))
		return verdict(TP_DROP_ARP_SPOOF);
	if (!mac_eq(a + 8, g->mac))
		return verdict(TP_DROP_ARP_SPOOF);
	__builtin_memcpy(&spa, a + 14, sizeof(spa));
	if ((g->flags & TP_GUEST_IP) && spa != g->ip && !(op == 1 && spa == 0))
		return verdict(TP_DROP_ARP_SPOOF);
	return verdict(TP_PASS);
}

SEC("tc")
int tap_policy(struct __sk_buff *skb)
{
	const struct tp_guest *g;
	struct ethhdr eth;
	__u32 zero = 0;

	/* A tag the kernel took out of the data (see the top of the file). */
	if (skb->vlan_present)
		return verdict(TP_DROP_VLAN);
	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)))
		return verdict(TP_DROP_SHORT);
	g = bpf_map_lookup_elem(&guest, &zero);
	if (!g || !(g->flags & TP_GUEST_MAC) || !mac_eq(eth.h_source, g->mac))
		return verdict(TP_DROP_SRC_MAC);
	switch (bpf_ntohs(eth.h_proto)) {
	case ETH_P_IP:
		return ipv4(skb, g);
	case ETH_P_ARP:
		if (!(tp_cfg & TP_CFG_ARP))
			return verdict(TP_DROP_ARP);
		return arp(skb, g);
	case ETH_P_IPV6:
		return verdict(TP_DROP_IPV6);
	case ETH_P_8021Q:
	case ETH_P_8021AD:
	case ETH_P_QINQ1:
		return verdict(TP_DROP_VLAN);
	}
	return verdict(TP_DROP_L3);
}

char LICENSE[] SEC("license") = "Apache-2.0"; /* uses no GPL-only helper */
