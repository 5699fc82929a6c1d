/* SPDX-License-Identifier: Apache-2.0 */
/* A create's egress allow list (netpolicy.c). */
#ifndef CUBICLE_SERVE_NETPOLICY_H
#define CUBICLE_SERVE_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* At most this many entries (the policy holds 1024 prefixes). */
#define NET_RULES_MAX 1000

/*
 * The allow list (a new array of "CIDR[:port[/proto]]" strings) for create
 * request @req; an absent allow_internet_access means !@deny_default. 0, or
 * an HTTP status (400: a malformed or domain-name entry, too many entries)
 * with @msg.
 */
int net_allow_list(json_t *req, bool deny_default, json_t **out, char *msg, size_t len);

#endif
