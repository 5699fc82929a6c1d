/* SPDX-License-Identifier: Apache-2.0 */
/* The guest's network as `cubicle serve` gives it to a fresh clone: an IPv4 address on one interface, up, and a default route (ioctls; no tool needed in the guest); and its loopback up, which the port bridge (bridge.c) connects over. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

static void sin_set(struct sockaddr *sa, struct in_addr a)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr = a };

	memcpy(sa, &sin, sizeof(sin));
}

static int ifreq_ioctl(int fd, unsigned long req, struct ifreq *ifr, const char *what, char *why,
		       size_t len)
{
	if (ioctl(fd, req, ifr) == 0)
		return 0;
	snprintf(why, len, "%s %s: %s", what, ifr->ifr_name, strerror(errno));
	return -1;
}

/* /etc/resolv.conf naming @dns alone, in place of what was there (a file,
 * or a link into a resolver the guest does not run): 0, or -1 with @why. */
static int resolv_conf(const char *dns, char *why, size_t len)
{
	static const char path[] = "/etc/resolv.conf", tmp[] = "/etc/.resolv.conf.cubicle";
	struct in_addr a;
	FILE *f;

	if (inet_pton(AF_INET, dns, &a) != 1) {
		snprintf(why, len, "network: dns '%s' is not an IPv4 address", dns);
		return -1;
	}
	if (mkdir("/etc", 0755) && errno != EEXIST) {
		snprintf(why, len, "network: /etc: %s", strerror(errno));
		return -1;
	}
	f = fopen(tmp, "we");
	if (!f || fprintf(f, "# cubicle-agent: the sandbox's name server\nnameserver %s\n", dns) < 0 ||
	    fclose(f) || rename(tmp, path)) {
		snprintf(why, len, "network: writing %s: %s", path, strerror(errno));
		if (f)
			unlink(tmp);
		return -1;
	}
	return 0;
}

/*
 * {"interface": "eth0", "address": "A.B.C.D/N", "gateway": "A.B.C.D",
 * "mac": "...", "dns": "A.B.C.D"}: the address and netmask set on the
 * interface, the interface up, a default route through the gateway (when
 * given) added or kept, and the name server (when given) the only one in
 * /etc/resolv.conf. -1 with @why when a member is malformed or the kernel
 * refuses.
 */
int net_configure(json_t *n, char *why, size_t len)
{
	const char *ifname = json_string_value(json_object_get(n, "interface"));
	const char *addr = json_string_value(json_object_get(n, "address"));
	const char *gw = json_string_value(json_object_get(n, "gateway"));
	const char *mac = json_string_value(json_object_get(n, "mac"));
	const char *dns = json_string_value(json_object_get(n, "dns"));
	unsigned char hw[6];
	struct in_addr a, g, mask;
	struct ifreq ifr = { 0 };
	char ip[INET_ADDRSTRLEN], *end;
	const char *slash;
	long plen;
	int fd, ret = -1;

	if (!json_is_object(n) || !ifname || !addr) {
		snprintf(why, len, "network: wants {\"interface\", \"address\": \"A.B.C.D/N\"[, \"gateway\", \"mac\"]}");
		return -1;
	}
	slash = strchr(addr, '/');
	if (!*ifname || strlen(ifname) >= IFNAMSIZ || !slash || (size_t)(slash - addr) >= sizeof(ip)) {
		snprintf(why, len, "network: interface '%s' or address '%s' is malformed", ifname, addr);
		return -1;
	}
	memcpy(ip, addr, (size_t)(slash - addr));
	ip[slash - addr] = 0;
	errno = 0;
	plen = strtol(slash + 1, &end, 10);
	if (inet_pton(AF_INET, ip, &a) != 1 || end == slash + 1 || *end || plen < 1 || plen > 32 ||
	    (gw && inet_pton(AF_INET, gw, &g) != 1)) {
		snprintf(why, len, "network: address '%s' or gateway '%s' is not IPv4", addr,
			 gw ? gw : "");
		return -1;
	}
	if (mac && (sscanf(mac, "%2hhx:%2hhx:%2hhx:%2hhx:%2hhx:%2hhx", &hw[0], &hw[1], &hw[2], &hw[3], &hw[4],
			   &hw[5]) != 6 || strlen(mac) != 17 || (hw[0] & 1))) {
		snprintf(why, len, "network: mac '%s' is not a unicast MAC like 06:01:02:03:04:05", mac);
		return -1;
	}
	mask.s_addr = htonl(plen == 32 ? 0xffffffffu : ~(0xffffffffu >> plen));
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, len, "network: socket: %s", strerror(errno));
		return -1;
	}
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	/* a clone's own MAC (its device was given it on restore; the driver
	 * still holds the template's) */
	if (mac) {
		if (ifreq_ioctl(fd, SIOCGIFHWADDR, &ifr, "reading the MAC of", why, len))
			goto out;
		if (memcmp(ifr.ifr_hwaddr.sa_data, hw, 6)) {
			ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
			memcpy(ifr.ifr_hwaddr.sa_data, hw, 6);
			if (ifreq_ioctl(fd, SIOCSIFHWADDR, &ifr, "setting the MAC of", why, len))
				goto out;
		}
	}
	sin_set(&ifr.ifr_addr, a);
	if (ifreq_ioctl(fd, SIOCSIFADDR, &ifr, "setting the address of", why, len))
		goto out;
	sin_set(&ifr.ifr_netmask, mask);
	if (ifreq_ioctl(fd, SIOCSIFNETMASK, &ifr, "setting the netmask of", why, len))
		goto out;
	if (ifreq_ioctl(fd, SIOCGIFFLAGS, &ifr, "reading the flags of", why, len))
		goto out;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ifreq_ioctl(fd, SIOCSIFFLAGS, &ifr, "bringing up", why, len))
		goto out;
	if (gw) {
		struct rtentry rt = { .rt_flags = RTF_UP | RTF_GATEWAY, .rt_dev = ifr.ifr_name };
		struct in_addr any = { 0 };

		sin_set(&rt.rt_dst, any);
		sin_set(&rt.rt_genmask, any);
		sin_set(&rt.rt_gateway, g);
		if (ioctl(fd, SIOCADDRT, &rt) < 0 && errno != EEXIST) {
			snprintf(why, len, "network: a default route through %s: %s", gw, strerror(errno));
			goto out;
		}
	}
	ret = dns ? resolv_conf(dns, why, len) : 0;
out:
	close(fd);
	return ret;
}

void net_lo_up(void)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (!ioctl(fd, SIOCGIFFLAGS, &ifr) && !(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr))
			fprintf(stderr, "cubicle-agent: bringing lo up: %s\n", strerror(errno));
	}
	close(fd);
}
