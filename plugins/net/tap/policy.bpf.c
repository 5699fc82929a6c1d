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
 *   ARP                      pass if arp (TP_CFG_ARP), else TP_DROP_ARP
 *   IPv6                     TP_DROP_IPV6: not filtered yet, so never passed
 *   other EtherTypes, VLAN   TP_DROP_L3
 *   IPv4 with version != 4, IHL < 5, or a header cut short: TP_DROP_SHORT
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

#define ETH_P_ARP_BE bpf_htons(ETH_P_ARP)
#define ETH_P_IP_BE bpf_htons(ETH_P_IP)
#define ETH_P_IPV6_BE bpf_htons(ETH_P_IPV6)
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

static __always_inline int ipv4(struct __sk_buff *skb)
{
	struct tp_prefix_key key = { .prefixlen = 32 };
	struct tp_port_key pk = {};
	struct tp_prefix *pfx;
	__u16 sport, dport;
	struct iphdr ip;
	__u32 l4;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)))
		return verdict(TP_DROP_SHORT);
	if (ip.version != 4 || ip.ihl < 5)
		return verdict(TP_DROP_SHORT);
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

SEC("tc")
int tap_policy(struct __sk_buff *skb)
{
	__be16 proto;

	if (bpf_skb_load_bytes(skb, offsetof(struct ethhdr, h_proto), &proto, sizeof(proto)))
		return verdict(TP_DROP_SHORT);
	if (proto == ETH_P_IP_BE)
		return ipv4(skb);
	if (proto == ETH_P_ARP_BE)
		return verdict(tp_cfg & TP_CFG_ARP ? TP_PASS : TP_DROP_ARP);
	if (proto == ETH_P_IPV6_BE)
		return verdict(TP_DROP_IPV6);
	return verdict(TP_DROP_L3);
}

char LICENSE[] SEC("license") = "Apache-2.0"; /* uses no GPL-only helper */
