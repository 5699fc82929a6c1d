/* SPDX-License-Identifier: Apache-2.0 */
/* A create's egress allow list (netpolicy.c). */
#ifndef CUBICLE_SERVE_NETPOLICY_H
#define CUBICLE_SERVE_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* At most this many entries (the policy holds 1024 prefixes). */
#define NET_RULES_MAX 1000
/* At most this many addresses a sandbox's DNS lookups allow (dns.c). */
#define NET_LEARN_MAX 256

/*
 * The allow list (a new array of "CIDR[:port[/proto]]" strings) for create
 * request @req; an absent allow_internet_access means !@deny_default. 0, or
 * an HTTP status (400: a malformed entry, a domain name in denyOut, too
 * many entries) with @msg. allowOut's domain names come as given, in lower
 * case.
 */
int net_allow_list(json_t *req, bool deny_default, json_t **out, char *msg, size_t len);

/* Whether allow-list entry @e is a domain name (pattern), not an address. */
bool net_is_domain(const char *e);
/* Whether DNS name @name (any case; a trailing dot or not) matches allowOut
 * entry @pat: "example.com" itself, or with "*.example.com" any name below
 * it at any depth, not the apex. */
bool net_domain_match(const char *pat, const char *name);
/* DNS reply @buf of @len bytes: its question's name into @qname and up to
 * @max (at most 64) IPv4 addresses of its answers (A records, CNAMEs
 * followed; host order) into @addrs: their count, 0 when it has none, -1
 * when it is not a reply to one question. */
int net_dns_answers(const unsigned char *buf, int len, char *qname, size_t qlen, uint32_t *addrs,
		    int max);

#endif
