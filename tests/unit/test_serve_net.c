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
 * (the longest covering prefix; an entry with a port allows that port). */
static bool allows(json_t *list, const char *ip, unsigned port)
{
	struct in_addr a;
	json_t *v;
	size_t i;

	CU_ASSERT_FATAL(inet_pton(AF_INET, ip, &a) == 1);
	json_array_foreach(list, i, v) {
		struct tp_rule r[2];
		char why[200];
		int n = tp_rule_parse(json_string_value(v), r, why, sizeof(why));

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
		{ "{\"network\": {\"allowOut\": [\"example.com\"]}}", "domain names are not supported" },
		{ "{\"network\": {\"allowOut\": [\"*.example.com\"]}}", "domain names" },
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
		{ "domain names and malformed entries: 400 naming the entry", test_refused },
		{ "a list past the policy's size: 400", test_too_many },
		{ NULL, NULL },
	};

	return cu_run("serve_net", tests);
}
