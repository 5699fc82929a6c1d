/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A create's egress allow list, as the tap policy takes it, from E2B's
 * allow_internet_access and network.allowOut / denyOut: everything (or,
 * with allow_internet_access false, nothing) minus each denyOut prefix
 * (split into the prefixes beside it), then each allowOut entry (allowed
 * entries win). Pure: no server state (tests/unit/test_serve_net.c).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		if (strspn(s, "0123456789./:tcpudp") != strlen(s) || !strchr(s, '.') ||
		    strspn(s, "0123456789") == 0) {
			snprintf(msg, len, "%s[%zu] '%.100s': domain names are not supported (the policy "
					   "filters by address): give a CIDR or an IPv4 address", what, i, s);
			return 400;
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
	/* allowed entries win over denied ones: they come as given */
	json_array_foreach(allow, i, v)
		if (json_array_append(list, v))
			goto nomem;
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

