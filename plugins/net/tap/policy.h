/* SPDX-License-Identifier: Apache-2.0 */
/* The tap egress policy: the map layout shared by the BPF program and the
 * plugin, and the pure allow-list parser and normaliser (policy.c). */
#ifndef CUBICLE_TAP_POLICY_H
#define CUBICLE_TAP_POLICY_H

#include <linux/types.h>

/*
 * Maps (one set per tap; see policy.bpf.c):
 *
 * prefixes  LPM trie: { prefixlen, IPv4 address (network order) } ->
 *           struct tp_prefix. One entry per distinct allowed prefix. Its
 *           value is the union of its own rules and those of every shorter
 *           prefix that covers it (the plugin computes this closure), so the
 *           single longest match answers for all of them.
 * ports     hash: struct tp_port_key { prefix id, port, protocol } -> __u8 1.
 *           The (port, protocol) pairs a prefix allows when its value lacks
 *           TP_ANY.
 * stats     per-CPU array of __u64, indexed by enum tp_stat: frames passed and
 *           frames dropped per reason. The plugin sums the CPUs.
 * guest     array of one struct tp_guest: the addresses the guest may send
 *           from. Filled by the plugin once the device names the guest's MAC
 *           (set_mac) or from policy.mac / policy.ip; until the MAC is known
 *           every frame is dropped (TP_DROP_SRC_MAC).
 */
#define TP_MAX_PREFIXES 1024
#define TP_MAX_PORTS 4096

#define TP_ANY 1u /* every protocol and port to this prefix */

struct tp_prefix_key {
	__u32 prefixlen; /* 0..32, host order (the trie's own field) */
	__u32 addr;      /* network order */
};

struct tp_prefix {
	__u32 id;    /* names the prefix in the ports map */
	__u32 flags; /* TP_ANY */
};

struct tp_port_key {
	__u32 id;
	__u16 port;  /* host order */
	__u8 proto;  /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 pad;    /* always 0 */
};

#define TP_GUEST_MAC 1u /* mac is the guest's: frames from another source are dropped */
#define TP_GUEST_IP 2u  /* ip is the guest's: IPv4 and ARP from another are dropped */

struct tp_guest {
	__u8 mac[6];
	__u8 flags;  /* TP_GUEST_* */
	__u8 pad;    /* always 0 */
	__u32 ip;    /* network order; meaningful with TP_GUEST_IP */
};

/* Counters: one pass counter, then one per drop reason. */
enum tp_stat {
	TP_PASS = 0,
	TP_DROP_SHORT,  /* truncated or malformed Ethernet, IPv4 or L4 header */
	TP_DROP_L3,     /* an EtherType other than IPv4, ARP, IPv6, VLAN */
	TP_DROP_ARP,    /* ARP while arp = false */
	TP_DROP_IPV6,   /* any IPv6 frame (IPv6 is not filtered yet: all dropped) */
	TP_DROP_FRAG,   /* any IPv4 fragment, first or not */
	TP_DROP_ADDR,   /* no allow entry covers the destination */
	TP_DROP_PORT,   /* TCP or UDP port/protocol not allowed to that destination */
	TP_DROP_PROTO,  /* another IP protocol to a destination allowed by port only */
	TP_DROP_VLAN,   /* an 802.1Q/802.1ad tag: in the skb's metadata or the frame */
	TP_DROP_SRC_MAC, /* Ethernet source is not the guest's MAC (or it is not known yet) */
	TP_DROP_SRC_IP, /* IPv4 source is not the guest's address (policy.ip set) */
	TP_DROP_ARP_SPOOF, /* ARP that is not an IPv4 request/reply from the guest's own
			    * MAC (and address, with policy.ip) */
	TP_NSTATS
};

/* Read-only settings fixed at load time (the program's .rodata). */
#define TP_CFG_ARP 1u
#define TP_CFG_DHCP 2u

#ifndef __bpf__
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

extern const char *const tp_stat_names[TP_NSTATS];

/* One allow-list entry; the address has no bits past the prefix. */
struct tp_rule {
	uint32_t addr;  /* host order */
	uint8_t plen;   /* 0..32 */
	uint8_t proto;  /* 0 with port 0: everything; else IPPROTO_TCP or IPPROTO_UDP */
	uint16_t port;  /* 0: every protocol and port */
};

/* An allow list as the user wrote it (duplicates dropped), in order. */
struct tp_rules {
	struct tp_rule *v;
	unsigned n, cap;
};

/*
 * Parse "CIDR[:port[/proto]]": an IPv4 address with an optional /prefix
 * (default /32), an optional port 1..65535, and after the port an optional
 * protocol tcp or udp (default: both, so two rules). Host bits past the
 * prefix are an error, not silently cleared, so a typo such as 10.0.0.1/8
 * is caught. Returns the number of rules written to out (1 or 2), or
 * -EINVAL with a one-line reason in why.
 */
int tp_rule_parse(const char *s, struct tp_rule out[2], char *why, size_t len);

/* Format a rule in the syntax tp_rule_parse reads ("10.0.0.0/24:53/udp"). */
void tp_rule_format(const struct tp_rule *r, char *buf, size_t len);

/* Parse s and append its rules (those not present yet): the number
 * appended (0 if all were there), -EINVAL with why, or -ENOMEM. */
int tp_rules_add(struct tp_rules *rs, const char *s, char *why, size_t len);

/* Parse s and remove exactly the rules it names: the number removed,
 * -ENOENT (with why) when none was in the list, or -EINVAL. */
int tp_rules_del(struct tp_rules *rs, const char *s, char *why, size_t len);

void tp_rules_free(struct tp_rules *rs);

/* True when prefix a/alen covers prefix b/blen. */
bool tp_covers(uint32_t a, unsigned alen, uint32_t b, unsigned blen);

/*
 * The allow list as the maps hold it: one entry per distinct prefix, sorted
 * by (addr, plen), each with the union of the rules of every entry that
 * covers it (so a longest-prefix lookup alone decides). any: every protocol
 * and port (then ports is empty); else the sorted (port, proto) pairs.
 */
struct tp_port {
	uint16_t port;
	uint8_t proto;
};

struct tp_entry {
	uint32_t addr;
	uint8_t plen;
	bool any;
	unsigned n_ports;
	struct tp_port *ports;
};

/* 0 and *out (free with tp_entries_free), or -ENOMEM. */
int tp_normalise(const struct tp_rules *rs, struct tp_entry **out, unsigned *n_out);
void tp_entries_free(struct tp_entry *e, unsigned n);

/* ---- the program and its maps (policy_load.c, libbpf) ---- */

struct tp_bpf;

typedef void tp_log_fn(void *arg, int err_level, const char *line);

struct tp_bpf_opts {
	uint32_t cfg;         /* TP_CFG_ARP | TP_CFG_DHCP */
	const char *program;  /* a BPF object file to load instead of the
			       * built-in one (same maps and program), or NULL */
	const char *pin;      /* a folder on a bpf file system to pin the maps
			       * in (prefixes, ports, stats, guest), or NULL */
	tp_log_fn *log;       /* libbpf's messages and the verifier log, one line
			       * each (err_level: 1 for warnings); may be NULL */
	void *log_arg;
};

/*
 * Open and load the program with its maps (empty allow list: everything is
 * denied once attached). 0 and *out, or -errno with a one-line reason in why
 * (the verifier log itself goes to o->log). Main thread; it swaps libbpf's
 * global print function for the duration.
 */
int tp_bpf_load(struct tp_bpf **out, const struct tp_bpf_opts *o, char *why, size_t len);

/* Attach as a direct-action classifier on ifindex's clsact ingress (made if
 * missing). 0 or -errno with why. */
int tp_bpf_attach(struct tp_bpf *b, int ifindex, char *why, size_t len);

/* Make the maps hold rs (normalised), changing only what differs. 0 or
 * -errno with why (-ENOSPC: more than the maps hold). */
int tp_bpf_sync(struct tp_bpf *b, const struct tp_rules *rs, char *why, size_t len);

/* The guest's addresses: mac (NULL: not known, so every frame is dropped)
 * and ip (host order; 0: not set, so IPv4 and ARP sources are not checked
 * beyond the MAC). 0 or -errno. */
int tp_bpf_guest(struct tp_bpf *b, const uint8_t *mac, uint32_t ip);

/* Counters summed over CPUs. 0 or -errno. */
int tp_bpf_stats(struct tp_bpf *b, uint64_t out[TP_NSTATS]);

/* The loaded program's fd (for BPF_PROG_TEST_RUN in tests). */
int tp_bpf_prog_fd(struct tp_bpf *b);

/* Detach, unpin, free. NULL is fine. */
void tp_bpf_free(struct tp_bpf *b);

#endif /* !__bpf__ */
#endif
