/* SPDX-License-Identifier: Apache-2.0 */
/* Ethernet MAC addresses as text. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mac.h"

int mac_parse(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char end;

	if (strlen(s) != 17 || sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3],
				      &v[4], &v[5], &end) != 6)
		return -EINVAL;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	if ((mac[0] & 1) || !(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]))
		return -EINVAL;
	return 0;
}

void mac_format(const uint8_t m[6], char buf[18])
{
	snprintf(buf, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}
