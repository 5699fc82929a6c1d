/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A create's egress allow list, as the tap policy takes it, from E2B's
 * allow_internet_access and network.allowOut / denyOut: everything (or,
 * with allow_internet_access false, nothing) minus each denyOut prefix
 * (split into the prefixes beside it), then each allowOut entry (allowed
 * entries win). A domain name in allowOut ("example.com", "*.example.com")
 * stays in the list as such: the sandbox's DNS proxy (dns.c) allows what it
 * resolves to. Pure: no server state (tests/unit/test_serve_net.c).
 */
#include <arpa/inet.h>
#include <ares.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "netpolicy.h"
#include "policy.h"

static uint32_t mask(unsigned plen)
{
	return plen ? ~0u << (32 - plen) : 0;
}

struct pfx {
	uint32_t a;
	unsigned l;
};

/* @p minus @d, appended to @out (at most @max): 0, or -1 when full. */
static int subtract(struct pfx p, struct pfx d, struct pfx *out, unsigned *n, unsigned max)
{
	if (tp_covers(d.a, d.l, p.a, p.l))
		return 0; /* all of p is denied */
	if (!tp_covers(p.a, p.l, d.a, d.l)) {
		if (*n >= max)
			return -1;
		out[(*n)++] = p; /* apart */
		return 0;
	}
	/* d inside p: p's parts beside d's path, one a level */
	for (unsigned l = p.l + 1; l <= d.l; l++) {
		if (*n >= max)
			return -1;
		out[(*n)++] = (struct pfx){ (d.a & mask(l)) ^ (1u << (32 - l)), l };
	}
	return 0;
}

bool net_is_domain(const char *e)
{
	return e && (e[0] == '*' || (e[0] >= 'a' && e[0] <= 'z') || (e[0] >= 'A' && e[0] <= 'Z'));
}

/* "example.com" (two labels or more) or "*.example.com" ("*.com" too):
 * labels of letters, digits and hyphens, each 1 to 63 long, 253 in all. */
static bool domain_ok(const char *e)
{
	size_t lab = 0, labels = 1, want = 2;

	if (!strncmp(e, "*.", 2)) {
		e += 2;
		want = 1;
	}
	if (!*e || strlen(e) > 253)
		return false;
	for (; *e; e++) {
		if (*e == '.') {
			if (!lab)
				return false;
			lab = 0;
			labels++;
		} else if ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') ||
			   (*e >= '0' && *e <= '9') || *e == '-') {
			if (++lab > 63)
				return false;
		} else {
			return false;
		}
	}
	return lab && labels >= want;
}

bool net_domain_match(const char *pat, const char *name)
{
	size_t n = strlen(name), p;

	if (n && name[n - 1] == '.')
		n--; /* the root's dot */
	if (!strncmp(pat, "*.", 2)) {
		p = strlen(pat + 1); /* ".example.com" */
		return n > p && !strncasecmp(name + n - p, pat + 1, p);
	}
	p = strlen(pat);
	return n == p && !strncasecmp(name, pat, n);
}

int net_dns_answers(const unsigned char *buf, int len, char *qname, size_t qlen, uint32_t *addrs,
		    int max)
{
	struct ares_addrttl ttl[64];
	struct hostent *he = NULL;
	int n = max < 64 ? max : 64, r;
	char *name = NULL;
	long enc;

	/* a reply (QR), one question, its name the first thing after the header */
	if (len < 12 || !(buf[2] & 0x80) || buf[4] || buf[5] != 1 ||
	    ares_expand_name(buf + 12, buf, len, &name, &enc) != ARES_SUCCESS)
		return -1;
	snprintf(qname, qlen, "%s", name);
	ares_free_string(name);
	r = ares_parse_a_reply(buf, len, &he, ttl, &n);
	if (he)
		ares_free_hostent(he);
	if (r != ARES_SUCCESS)
		return 0; /* no A records (NXDOMAIN, AAAA, ...): nothing to learn */
	for (int i = 0; i < n; i++)
		addrs[i] = ntohl(ttl[i].ipaddr.s_addr);
	return n;
}

/* The entries of @arr (an array of strings, or absent) checked: 0, or 400. */
static int entries(json_t *arr, const char *what, bool deny, char *msg, size_t len)
{
	json_t *v;
	size_t i;

	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr)) {
		snprintf(msg, len, "%s must be an array of CIDRs or addresses", what);
		return 400;
	}
	json_array_foreach(arr, i, v) {
		const char *s = json_string_value(v);
		struct tp_rule r[2];
		char why[200];
		int n;

		if (!s) {
			snprintf(msg, len, "%s[%zu] is not a string", what, i);
			return 400;
		}
		if (net_is_domain(s)) {
			if (deny) {
				snprintf(msg, len, "%s[%zu] '%.100s': a deny entry is a CIDR or an address "
						   "(domain names only in allowOut)", what, i, s);
				return 400;
			}
			if (!domain_ok(s)) {
				snprintf(msg, len, "%s[%zu] '%.100s': not a domain name (\"example.com\", "
						   "\"*.example.com\"), a CIDR or an IPv4 address", what, i, s);
				return 400;
			}
			continue;
		}
		n = tp_rule_parse(s, r, why, sizeof(why));
		if (n < 0) {
			snprintf(msg, len, "%s[%zu]: %s", what, i, why);
			return 400;
		}
		if (deny && r[0].port) {
			snprintf(msg, len, "%s[%zu] '%.100s': a deny entry is a CIDR or an address, no port",
				 what, i, s);
			return 400;
		}
	}
	return 0;
}

int net_allow_list(json_t *req, bool deny_default, json_t **out, char *msg, size_t len)
{
	json_t *net = json_object_get(req, "network");
	json_t *allow = json_object_get(net, "allowOut"), *deny = json_object_get(net, "denyOut");
	json_t *inet = json_object_get(req, "allow_internet_access"), *list, *v;
	struct pfx *p, *q;
	unsigned n = 0, m;
	size_t i;
	int st;

	*out = NULL;
	if (inet && !json_is_boolean(inet) && !json_is_null(inet))
		return snprintf(msg, len, "allow_internet_access must be true or false"), 400;
	if ((st = entries(allow, "network.allowOut", false, msg, len)) ||
	    (st = entries(deny, "network.denyOut", true, msg, len)))
		return st;
	p = calloc(NET_RULES_MAX, sizeof(*p));
	q = calloc(NET_RULES_MAX, sizeof(*q));
	list = json_array();
	if (!p || !q || !list)
		goto nomem;
	if (json_is_boolean(inet) ? json_is_true(inet) : !deny_default)
		p[n++] = (struct pfx){ 0, 0 };
	json_array_foreach(deny, i, v) {
		struct tp_rule r[2];
		char why[8];

		tp_rule_parse(json_string_value(v), r, why, sizeof(why));
		m = 0;
		for (unsigned k = 0; k < n; k++)
			if (subtract(p[k], (struct pfx){ r[0].addr, r[0].plen }, q, &m, NET_RULES_MAX))
				goto full;
		memcpy(p, q, m * sizeof(*p));
		n = m;
	}
	for (unsigned k = 0; k < n; k++) {
		char s[40];
		struct in_addr a = { htonl(p[k].a) };

		inet_ntop(AF_INET, &a, s, sizeof(s));
		snprintf(s + strlen(s), sizeof(s) - strlen(s), "/%u", p[k].l);
		if (json_array_append_new(list, json_string(s)))
			goto nomem;
	}
	/* allowed entries win over denied ones: they come as given (domain
	 * names in lower case: the DNS proxy allows what they resolve to) */
	json_array_foreach(allow, i, v) {
		char d[256];
		const char *e = json_string_value(v);

		if (net_is_domain(e)) {
			size_t k;

			for (k = 0; e[k] && k < sizeof(d) - 1; k++)
				d[k] = (char)(e[k] >= 'A' && e[k] <= 'Z' ? e[k] - 'A' + 'a' : e[k]);
			d[k] = '\0';
			if (json_array_append_new(list, json_string(d)))
				goto nomem;
		} else if (json_array_append(list, v)) {
			goto nomem;
		}
	}
	if (json_array_size(list) > NET_RULES_MAX)
		goto full;
	free(p);
	free(q);
	*out = list;
	return 0;
full:
	free(p);
	free(q);
	json_decref(list);
	return snprintf(msg, len, "network: the allow list this makes has more than %u entries",
			NET_RULES_MAX), 400;
nomem:
	free(p);
	free(q);
	json_decref(list);
	return snprintf(msg, len, "out of memory"), 500;
}

