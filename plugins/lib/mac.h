/* SPDX-License-Identifier: Apache-2.0 */
/* Ethernet MAC addresses as text, for the plugins that take one. */
#ifndef CUBICLE_PLUGLIB_MAC_H
#define CUBICLE_PLUGLIB_MAC_H

#include <stdint.h>

/* "52:54:00:12:34:56" into mac: 0, or -EINVAL (also for a multicast or an
 * all-zero address, which no guest NIC may have). */
int mac_parse(const char *s, uint8_t mac[6]);
/* mac as "52:54:00:12:34:56" into buf. */
void mac_format(const uint8_t mac[6], char buf[18]);

#endif
