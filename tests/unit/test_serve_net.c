/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of tools/serve/netpolicy.c: a create's allow_internet_access, allowOut and denyOut made into the tap policy's allow list. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "netpolicy.h"
#include "policy.h"

/* The list for request @json (deny_default @deny): its status, and *out. */
static int list_of(const char *json, bool deny, json_t **out, char *msg, size_t len)
{
	json_t *req = json_loads(json, 0, NULL);
	int st;

	CU_ASSERT_PTR_NOT_NULL_FATAL(req);
	msg[0] = '\0';
	st = net_allow_list(req, deny, out, msg, len);
	json_decref(req);
	return st;
}

/* Whether the list lets TCP to @ip:@port through, as the policy decides
 * (the longest covering prefix; an entry with a port allows that port;
 * domain names are the DNS proxy's, not the policy's). */
static bool allows(json_t *list, const char *ip, unsigned port)
{
	struct in_addr a;
	json_t *v;
	size_t i;

	CU_ASSERT_FATAL(inet_pton(AF_INET, ip, &a) == 1);
	json_array_foreach(list, i, v) {
		struct tp_rule r[2];
		char why[200];
		int n;

		if (net_is_domain(json_string_value(v)))
			continue;
		n = tp_rule_parse(json_string_value(v), r, why, sizeof(why));
		CU_ASSERT_FATAL(n > 0);
		for (int k = 0; k < n; k++)
			if (tp_covers(r[k].addr, r[k].plen, ntohl(a.s_addr), 32) &&
			    (!r[k].port || (r[k].port == port && r[k].proto == 6)))
				return true;
	}
	return false;
}

static void test_defaults(void)
{
	char msg[300];
	json_t *l;

	CU_ASSERT_EQUAL(list_of("{}", false, &l, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(json_array_size(l), 1);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(l, 0)), "0.0.0.0/0");
	json_decref(l);
	/* the server's default deny: nothing */
	CU_ASSERT_EQUAL(list_of("{}", true, &l, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(json_array_size(l), 0);
	json_decref(l);
	/* the request wins over the server's default, both ways */
	CU_ASSERT_EQUAL(list_of("{\"allow_internet_access\": true}", true, &l, msg, sizeof(msg)), 0);
	CU_ASSERT_TRUE(allows(l, "8.8.8.8", 53));
	json_decref(l);
	CU_ASSERT_EQUAL(list_of("{\"allow_internet_access\": false}", false, &l, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(json_array_size(l), 0);
	CU_ASSERT_FALSE(allows(l, "8.8.8.8", 53));
	json_decref(l);
}

static void test_allow_out(void)
{
	char msg[300];
	json_t *l;

	CU_ASSERT_EQUAL(list_of("{\"allow_internet_access\": false, \"network\": {\"allowOut\": "
				"[\"192.0.2.1/32\", \"198.51.100.7\", \"203.0.113.0/24:443/tcp\"]}}",
				false, &l, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(json_array_size(l), 3);
	CU_ASSERT_TRUE(allows(l, "192.0.2.1", 80));
	CU_ASSERT_FALSE(allows(l, "192.0.2.2", 80));
	CU_ASSERT_TRUE(allows(l, "198.51.100.7", 22));
	CU_ASSERT_TRUE(allows(l, "203.0.113.9", 443));
	CU_ASSERT_FALSE(allows(l, "203.0.113.9", 80));
	CU_ASSERT_FALSE(allows(l, "1.1.1.1", 443));
	json_decref(l);
}

static void test_deny_out(void)
{
	static const char *const probe[] = { "0.0.0.0",   "10.0.0.1",	  "10.255.255.255", "11.0.0.0",
					     "9.255.255.255", "192.0.2.1", "192.0.2.0",	"192.0.2.2",
					     "192.0.2.255", "255.255.255.255", "172.16.5.4", "172.32.0.1" };
	char msg[300];
	json_t *l;

	CU_ASSERT_EQUAL(list_of("{\"network\": {\"denyOut\": [\"10.0.0.0/8\", \"192.0.2.1\", "
				"\"172.16.0.0/12\"]}}", false, &l, msg, sizeof(msg)), 0);
	/* each address is allowed exactly when no deny prefix covers it */
	for (unsigned i = 0; i < sizeof(probe) / sizeof(probe[0]); i++) {
		struct in_addr a;
		uint32_t h;
		bool denied;

		inet_pton(AF_INET, probe[i], &a);
		h = ntohl(a.s_addr);
		denied = tp_covers(0x0a000000, 8, h, 32) || h == 0xc0000201 ||
			 tp_covers(0xac100000, 12, h, 32);
		if (allows(l, probe[i], 80) == denied)
			fprintf(stderr, "  %s: allowed %d, denied %d\n", probe[i], !denied, denied);
		CU_ASSERT_EQUAL(allows(l, probe[i], 80), !denied);
	}
	/* a /32 out of everything: 32 prefixes beside it, no more */
	CU_ASSERT(json_array_size(l) <= 8 + 32 + 12);
	json_decref(l);
	/* allowOut wins over denyOut */
	CU_ASSERT_EQUAL(list_of("{\"network\": {\"denyOut\": [\"0.0.0.0/0\"], \"allowOut\": "
				"[\"192.0.2.1\"]}}", false, &l, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(json_array_size(l), 1);
	CU_ASSERT_TRUE(allows(l, "192.0.2.1", 80));
	CU_ASSERT_FALSE(allows(l, "192.0.2.2", 80));
	json_decref(l);
}

static void test_refused(void)
{
	static const struct {
		const char *req, *want;
	} bad[] = {
		{ "{\"network\": {\"denyOut\": [\"example.com\"]}}", "domain names only in allowOut" },
		{ "{\"network\": {\"allowOut\": [\"exa mple.com\"]}}", "not a domain name" },
		{ "{\"network\": {\"allowOut\": [\"localhost\"]}}", "network.allowOut[0] 'localhost': not a domain" },
		{ "{\"network\": {\"allowOut\": [\"example..com\"]}}", "not a domain name" },
		{ "{\"network\": {\"allowOut\": [\"*.\"]}}", "not a domain name" },
		{ "{\"network\": {\"allowOut\": [\"a.b.c:80\"]}}", "not a domain name" },
		{ "{\"network\": {\"allowOut\": [\"10.0.0.1/8\"]}}", "network.allowOut[0]" },
		{ "{\"network\": {\"allowOut\": [\"300.1.1.1\"]}}", "network.allowOut[0]" },
		{ "{\"network\": {\"allowOut\": \"10.0.0.1\"}}", "must be an array" },
		{ "{\"network\": {\"denyOut\": [1]}}", "network.denyOut[0] is not a string" },
		{ "{\"network\": {\"denyOut\": [\"10.0.0.1:80\"]}}", "no port" },
		{ "{\"allow_internet_access\": \"no\"}", "true or false" },
	};
	char msg[300];
	json_t *l;

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int st = list_of(bad[i].req, false, &l, msg, sizeof(msg));

		CU_ASSERT_EQUAL(st, 400);
		CU_ASSERT_PTR_NULL(l);
		if (!strstr(msg, bad[i].want))
			fprintf(stderr, "  %s: '%s' lacks '%s'\n", bad[i].req, msg, bad[i].want);
		CU_ASSERT_PTR_NOT_NULL(strstr(msg, bad[i].want));
	}
}

static void test_domains(void)
{
	char msg[300];
	json_t *l;

	/* kept (lower case) beside the addresses; no address allowed by them */
	CU_ASSERT_EQUAL_FATAL(list_of("{\"allow_internet_access\": false, \"network\": {\"allowOut\": "
				      "[\"Example.COM\", \"*.cdn.example.net\", \"192.0.2.1\"]}}",
				      false, &l, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(json_array_size(l), 3);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(l, 0)), "example.com");
	CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(l, 1)), "*.cdn.example.net");
	CU_ASSERT_TRUE(net_is_domain("example.com"));
	CU_ASSERT_TRUE(net_is_domain("*.example.com"));
	CU_ASSERT_FALSE(net_is_domain("192.0.2.1"));
	CU_ASSERT_FALSE(net_is_domain("10.0.0.0/8:443/tcp"));
	CU_ASSERT_TRUE(allows(l, "192.0.2.1", 80));
	CU_ASSERT_FALSE(allows(l, "192.0.2.2", 80));
	json_decref(l);
	/* exact names, any case, the root's dot or not */
	CU_ASSERT_TRUE(net_domain_match("example.com", "example.com"));
	CU_ASSERT_TRUE(net_domain_match("example.com", "EXAMPLE.com."));
	CU_ASSERT_FALSE(net_domain_match("example.com", "www.example.com"));
	CU_ASSERT_FALSE(net_domain_match("example.com", "example.co"));
	CU_ASSERT_FALSE(net_domain_match("example.com", "badexample.com"));
	/* a wildcard: names below at any depth, not the apex, not a lookalike */
	CU_ASSERT_TRUE(net_domain_match("*.example.com", "a.example.com"));
	CU_ASSERT_TRUE(net_domain_match("*.example.com", "b.a.Example.com."));
	CU_ASSERT_FALSE(net_domain_match("*.example.com", "example.com"));
	CU_ASSERT_FALSE(net_domain_match("*.example.com", "badexample.com"));
	CU_ASSERT_FALSE(net_domain_match("*.example.com", ".example.com"));
	CU_ASSERT_TRUE(net_domain_match("*.com", "example.com"));
}

/* @name (dotted) as DNS labels at @b + *len. */
static void put_name(unsigned char *b, int *len, const char *name)
{
	for (const char *p = name; *p;) {
		const char *dot = strchr(p, '.');
		int l = dot ? (int)(dot - p) : (int)strlen(p);

		b[(*len)++] = (unsigned char)l;
		memcpy(b + *len, p, (size_t)l);
		*len += l;
		p += l + (dot ? 1 : 0);
	}
	b[(*len)++] = 0;
}

/* A DNS message: header flags @flags, one question @q (dotted) of type A,
 * then the answers: a CNAME of @q to @cname when @cname, then an A record
 * of each of @addrs (@n) owned by @cname or @q. Its length. */
static int dns_msg(unsigned char *b, uint16_t flags, const char *q, const char *cname,
		   const uint32_t *addrs, int n)
{
	int len = 12, qname_at = 12, owner = 12;

	memset(b, 0, 12);
	b[0] = 0x12, b[1] = 0x34, b[2] = (unsigned char)(flags >> 8), b[3] = (unsigned char)flags;
	b[5] = 1;
	b[7] = (unsigned char)(n + (cname ? 1 : 0));
	put_name(b, &len, q);
	b[len++] = 0, b[len++] = 1, b[len++] = 0, b[len++] = 1; /* A, IN */
	if (cname) {
		int rdlen_at;

		b[len++] = 0xc0, b[len++] = (unsigned char)qname_at;
		b[len++] = 0, b[len++] = 5, b[len++] = 0, b[len++] = 1; /* CNAME, IN */
		b[len++] = 0, b[len++] = 0, b[len++] = 0, b[len++] = 60;
		rdlen_at = len;
		len += 2;
		owner = len;
		put_name(b, &len, cname);
		b[rdlen_at + 1] = (unsigned char)(len - owner);
	}
	for (int i = 0; i < n; i++) {
		b[len++] = 0xc0, b[len++] = (unsigned char)owner;
		b[len++] = 0, b[len++] = 1, b[len++] = 0, b[len++] = 1;
		b[len++] = 0, b[len++] = 0, b[len++] = 1, b[len++] = 0;
		b[len++] = 0, b[len++] = 4;
		b[len++] = (unsigned char)(addrs[i] >> 24), b[len++] = (unsigned char)(addrs[i] >> 16);
		b[len++] = (unsigned char)(addrs[i] >> 8), b[len++] = (unsigned char)addrs[i];
	}
	return len;
}

static void test_dns_answers(void)
{
	const uint32_t two[] = { 0xc0000202, 0xc6336401 };
	unsigned char b[512];
	uint32_t got[64];
	char name[256];
	int len;

	len = dns_msg(b, 0x8180, "ok.test", NULL, two, 2);
	CU_ASSERT_EQUAL(net_dns_answers(b, len, name, sizeof(name), got, 64), 2);
	CU_ASSERT_STRING_EQUAL(name, "ok.test");
	CU_ASSERT_EQUAL(got[0], two[0]);
	CU_ASSERT_EQUAL(got[1], two[1]);
	/* through a CNAME: the question's name, the target's addresses */
	len = dns_msg(b, 0x8180, "www.example.com", "edge.cdn.net", two, 1);
	CU_ASSERT_EQUAL(net_dns_answers(b, len, name, sizeof(name), got, 64), 1);
	CU_ASSERT_STRING_EQUAL(name, "www.example.com");
	CU_ASSERT_EQUAL(got[0], two[0]);
	/* at most what the caller has room for */
	len = dns_msg(b, 0x8180, "ok.test", NULL, two, 2);
	CU_ASSERT_EQUAL(net_dns_answers(b, len, name, sizeof(name), got, 1), 1);
	/* an answer without addresses (NXDOMAIN): nothing to learn */
	len = dns_msg(b, 0x8183, "no.test", NULL, NULL, 0);
	CU_ASSERT_EQUAL(net_dns_answers(b, len, name, sizeof(name), got, 64), 0);
	/* not a reply, cut short, or no question: refused */
	len = dns_msg(b, 0x0100, "ok.test", NULL, two, 2);
	CU_ASSERT_EQUAL(net_dns_answers(b, len, name, sizeof(name), got, 64), -1);
	len = dns_msg(b, 0x8180, "ok.test", NULL, two, 2);
	CU_ASSERT_EQUAL(net_dns_answers(b, 11, name, sizeof(name), got, 64), -1);
	CU_ASSERT_EQUAL(net_dns_answers(b, 14, name, sizeof(name), got, 64), -1);
	b[5] = 0;
	CU_ASSERT_EQUAL(net_dns_answers(b, len, name, sizeof(name), got, 64), -1);
	/* a truncated answer section: no addresses taken from it */
	b[5] = 1;
	CU_ASSERT_TRUE(net_dns_answers(b, len - 3, name, sizeof(name), got, 64) <= 0);
}

static void test_too_many(void)
{
	char msg[300], *req = malloc(64 * 1024);
	size_t n;
	json_t *l;

	/* 80 deny /32s spread out: each splits what is left; past the limit is a 400 */
	CU_ASSERT_PTR_NOT_NULL_FATAL(req);
	n = (size_t)sprintf(req, "{\"network\": {\"denyOut\": [");
	for (unsigned i = 0; i < 80; i++)
		n += (size_t)sprintf(req + n, "%s\"%u.%u.%u.%u\"", i ? "," : "", 1 + i * 3, i, 255 - i, i);
	sprintf(req + n, "]}}");
	CU_ASSERT_EQUAL(list_of(req, false, &l, msg, sizeof(msg)), 400);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "more than 1000 entries"));
	free(req);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "allow_internet_access and the server's default", test_defaults },
		{ "allowOut: addresses, CIDRs, a port", test_allow_out },
		{ "denyOut: everything else allowed; allowOut wins", test_deny_out },
		{ "malformed entries, domains in denyOut: 400 naming the entry", test_refused },
		{ "allowOut domain names kept for the DNS proxy; matching", test_domains },
		{ "DNS answers: the question's name, the A records' addresses", test_dns_answers },
		{ "a list past the policy's size: 400", test_too_many },
		{ NULL, NULL },
	};

	return cu_run("serve_net", tests);
}
