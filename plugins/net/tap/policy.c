/* SPDX-License-Identifier: Apache-2.0 */
/* The tap policy's allow list: parsing "CIDR[:port[/proto]]" entries and normalising the list into what the BPF maps hold; pure functions, no BPF. */
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

const char *const tp_stat_names[TP_NSTATS] = {
	[TP_PASS] = "passed",
	[TP_DROP_SHORT] = "short",
	[TP_DROP_L3] = "ethertype",
	[TP_DROP_ARP] = "arp",
	[TP_DROP_IPV6] = "ipv6",
	[TP_DROP_FRAG] = "fragment",
	[TP_DROP_ADDR] = "address",
	[TP_DROP_PORT] = "port",
	[TP_DROP_PROTO] = "protocol",
	[TP_DROP_VLAN] = "vlan",
	[TP_DROP_SRC_MAC] = "source_mac",
	[TP_DROP_SRC_IP] = "source_ip",
	[TP_DROP_ARP_SPOOF] = "arp_spoof",
};

static uint32_t mask(unsigned plen)
{
	return plen ? ~0u << (32 - plen) : 0;
}

bool tp_covers(uint32_t a, unsigned alen, uint32_t b, unsigned blen)
{
	return alen <= blen && !((a ^ b) & mask(alen));
}

/* A decimal number of at most max, with no sign, no leading zero and no
 * other character: *p advances past it. -1 if there is none or it is too big. */
static long number(const char **p, long max)
{
	const char *s = *p;
	long v = 0;

	if (*s < '0' || *s > '9')
		return -1;
	if (*s == '0' && s[1] >= '0' && s[1] <= '9')
		return -1;
	while (*s >= '0' && *s <= '9') {
		v = v * 10 + (*s++ - '0');
		if (v > max)
			return -1;
	}
	*p = s;
	return v;
}

__attribute__((format(printf, 3, 4)))
static int bad(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int tp_rule_parse(const char *s, struct tp_rule out[2], char *why, size_t len)
{
	const char *p = s;
	uint32_t addr = 0;
	long v, plen = 32, port = 0;
	uint8_t proto = 0;

	for (int i = 0; i < 4; i++) {
		if (i && *p++ != '.')
			return bad(why, len, "'%s': expected an IPv4 address a.b.c.d", s);
		v = number(&p, 255);
		if (v < 0)
			return bad(why, len, "'%s': expected an IPv4 address a.b.c.d (each part 0..255)", s);
		addr = addr << 8 | (uint32_t)v;
	}
	if (*p == '/') {
		p++;
		plen = number(&p, 1000);
		if (plen < 0)
			return bad(why, len, "'%s': expected a prefix length after '/'", s);
		if (plen > 32)
			return bad(why, len, "'%s': prefix length is more than 32", s);
	}
	if (addr & ~mask((unsigned)plen))
		return bad(why, len, "'%s': address has bits set past the prefix length (host bits)", s);
	if (*p == ':') {
		p++;
		port = number(&p, 65535);
		if (port <= 0)
			return bad(why, len, "'%s': port must be 1..65535", s);
		if (*p == '/') {
			p++;
			if (!strcmp(p, "tcp"))
				proto = IPPROTO_TCP;
			else if (!strcmp(p, "udp"))
				proto = IPPROTO_UDP;
			else
				return bad(why, len, "'%s': unknown protocol after the port (tcp or udp)", s);
			p += 3;
		}
	}
	if (*p)
		return bad(why, len, "'%s': expected CIDR[:port[/tcp|/udp]], e.g. 10.0.0.0/24 or 10.0.0.1:443/tcp", s);
	out[0] = (struct tp_rule){ .addr = addr, .plen = (uint8_t)plen, .port = (uint16_t)port,
				   .proto = proto };
	if (!port || proto)
		return 1;
	out[0].proto = IPPROTO_TCP;
	out[1] = out[0];
	out[1].proto = IPPROTO_UDP;
	return 2;
}

void tp_rule_format(const struct tp_rule *r, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%u.%u.%u.%u/%u", r->addr >> 24, r->addr >> 16 & 255,
			 r->addr >> 8 & 255, r->addr & 255, r->plen);

	if (r->port && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, ":%u/%s", r->port,
			 r->proto == IPPROTO_TCP ? "tcp" : "udp");
}

static bool same(const struct tp_rule *a, const struct tp_rule *b)
{
	return a->addr == b->addr && a->plen == b->plen && a->port == b->port &&
	       a->proto == b->proto;
}

int tp_rules_add(struct tp_rules *rs, const char *s, char *why, size_t len)
{
	struct tp_rule r[2];
	int n = tp_rule_parse(s, r, why, len), added = 0;

	for (int i = 0; i < n; i++) {
		unsigned j;

		for (j = 0; j < rs->n && !same(&rs->v[j], &r[i]); j++)
			;
		if (j < rs->n)
			continue;
		if (rs->n == rs->cap) {
			unsigned cap = rs->cap ? rs->cap * 2 : 16;
			struct tp_rule *v = realloc(rs->v, cap * sizeof(*v));

			if (!v) {
				snprintf(why, len, "out of memory");
				return -ENOMEM;
			}
			rs->v = v;
			rs->cap = cap;
		}
		rs->v[rs->n++] = r[i];
		added++;
	}
	return n < 0 ? n : added;
}

int tp_rules_del(struct tp_rules *rs, const char *s, char *why, size_t len)
{
	struct tp_rule r[2];
	int n = tp_rule_parse(s, r, why, len), removed = 0;

	for (int i = 0; i < n; i++) {
		for (unsigned j = 0; j < rs->n; j++) {
			if (same(&rs->v[j], &r[i])) {
				memmove(&rs->v[j], &rs->v[j + 1], (rs->n - j - 1) * sizeof(*rs->v));
				rs->n--;
				removed++;
				break;
			}
		}
	}
	if (n > 0 && !removed) {
		snprintf(why, len, "'%s' is not in the allow list (entries are removed as they were added; "
			 "a hole cannot be cut into a wider entry)", s);
		return -ENOENT;
	}
	return n < 0 ? n : removed;
}

void tp_rules_free(struct tp_rules *rs)
{
	free(rs->v);
	*rs = (struct tp_rules){ 0 };
}

static int cmp_port(const void *a, const void *b)
{
	const struct tp_port *x = a, *y = b;

	if (x->port != y->port)
		return x->port < y->port ? -1 : 1;
	return x->proto - y->proto;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct tp_entry *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->plen - y->plen;
}

/* Fill e (addr and plen set) from every rule covering it. */
static int entry_fill(struct tp_entry *e, const struct tp_rules *rs)
{
	for (unsigned i = 0; i < rs->n && !e->any; i++) {
		const struct tp_rule *r = &rs->v[i];
		bool dup = false;

		if (!tp_covers(r->addr, r->plen, e->addr, e->plen))
			continue;
		if (!r->port) {
			e->any = true;
			break;
		}
		for (unsigned k = 0; k < e->n_ports && !dup; k++)
			dup = e->ports[k].port == r->port && e->ports[k].proto == r->proto;
		if (dup)
			continue;
		if (!e->ports && !(e->ports = calloc(rs->n, sizeof(*e->ports))))
			return -ENOMEM;
		e->ports[e->n_ports++] = (struct tp_port){ r->port, r->proto };
	}
	if (e->any) {
		free(e->ports);
		e->ports = NULL;
		e->n_ports = 0;
	}
	if (e->n_ports > 1)
		qsort(e->ports, e->n_ports, sizeof(*e->ports), cmp_port);
	return 0;
}

int tp_normalise(const struct tp_rules *rs, struct tp_entry **out, unsigned *n_out)
{
	struct tp_entry *e = calloc(rs->n ? rs->n : 1, sizeof(*e));
	unsigned n = 0;

	*out = NULL;
	*n_out = 0;
	if (!e)
		return -ENOMEM;
	for (unsigned i = 0; i < rs->n; i++) {
		unsigned j;

		for (j = 0; j < n; j++)
			if (e[j].addr == rs->v[i].addr && e[j].plen == rs->v[i].plen)
				break;
		if (j < n)
			continue;
		e[n].addr = rs->v[i].addr;
		e[n].plen = rs->v[i].plen;
		if (entry_fill(&e[n++], rs)) {
			tp_entries_free(e, n);
			return -ENOMEM;
		}
	}
	qsort(e, n, sizeof(*e), cmp_entry);
	*out = e;
	*n_out = n;
	return 0;
}

void tp_entries_free(struct tp_entry *e, unsigned n)
{
	for (unsigned i = 0; e && i < n; i++)
		free(e[i].ports);
	free(e);
}
