/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's network, when serve has a network_subnet and the template a
 * virtio-net device on the tap backend: each clone gets a /30 of the subnet
 * (the host's side .1, the guest's .2), a tap of its own made by its VMM
 * (gone with it), the host side's address set here, the guest's given to
 * its agent in /init, and an egress allow list made from the create's
 * allow_internet_access and network.allowOut / denyOut, loaded into the
 * tap's eBPF policy through the VMM's API (an empty list, all denied,
 * until then).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netpolicy.h"
#include "serve.h"
#include "vmm.h"

static uint32_t mask(unsigned plen)
{
	return plen ? ~0u << (32 - plen) : 0;
}

int net_server_init(char *why, size_t len)
{
	char buf[40], *slash, *end;
	struct in_addr a;
	long plen;

	if (!srv.net_subnet)
		return 0;
	snprintf(buf, sizeof(buf), "%s", srv.net_subnet);
	slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	plen = slash ? strtol(slash + 1, &end, 10) : -1;
	if (!slash || end == slash + 1 || *end || inet_pton(AF_INET, buf, &a) != 1) {
		snprintf(why, len, "network_subnet %s: expected an IPv4 CIDR such as 10.201.0.0/16",
			 srv.net_subnet);
		return -1;
	}
	if (plen < 8 || plen > 28) {
		snprintf(why, len, "network_subnet %s: the prefix must be /8 to /28 (each sandbox takes a /30)",
			 srv.net_subnet);
		return -1;
	}
	if (ntohl(a.s_addr) & ~mask((unsigned)plen)) {
		snprintf(why, len, "network_subnet %s: address bits past the prefix", srv.net_subnet);
		return -1;
	}
	if (geteuid()) {
		snprintf(why, len, "network_subnet %s: making taps needs serve to run as root",
			 srv.net_subnet);
		return -1;
	}
	srv.net_base = ntohl(a.s_addr);
	srv.net_slots = 1u << (30 - plen);
	if (!srv.net_if)
		srv.net_if = "eth0";
	return 0;
}

int net_template_dev(json_t *tree, char *id, size_t idlen, char *msg, size_t len)
{
	json_t *d;
	size_t i;
	int found = 0;

	id[0] = '\0';
	json_array_foreach(json_object_get(tree, "devices"), i, d) {
		const char *type = cfg_text(json_object_get(json_object_get(d, "backend"), "type"));
		const char *did = cfg_text(json_object_get(d, "id"));

		if (!type || strcmp(type, "tap"))
			continue;
		if (found || !did || strpbrk(did, "=/ ,") || strlen(did) >= idlen) {
			snprintf(msg, len, "the template has %s tap device%s: serve gives a clone one",
				 found ? "more than one" : "an unnamed", found ? "s" : "");
			return -1;
		}
		if (json_array_size(json_object_get(
			    json_object_get(json_object_get(d, "backend"), "policy"), "allow"))) {
			snprintf(msg, len, "the template's tap device %s has a policy.allow of its own: "
					   "a clone's allow list comes from its create alone", did);
			return -1;
		}
		snprintf(id, idlen, "%s", did);
		found = 1;
	}
	if (found && !srv.net_subnet) {
		snprintf(msg, len, "the template has a network device (%s) and serve has no network_subnet "
				   "to give each clone its own tap and addresses (see cubicle-serve(1))", id);
		return -1;
	}
	return found;
}

/* ---- a clone's addresses and tap ---- */

/* A host-order IPv4 address as A.B.C.D into @out (16 bytes at least). */
static void dotted(uint32_t addr, char *out, size_t len)
{
	struct in_addr a = { htonl(addr) };

	if (!inet_ntop(AF_INET, &a, out, (socklen_t)len))
		out[0] = '\0';
}

/* Host @host (1: the tap's host side, the gateway; 2: the guest) of /30 @slot. */
static uint32_t slot_addr(unsigned slot, unsigned host)
{
	return srv.net_base + 4 * slot + host;
}

static void addr_of(unsigned slot, unsigned host, char *out, size_t len)
{
	dotted(slot_addr(slot, host), out, len);
}

uint32_t net_gw(const struct sandbox *s)
{
	return slot_addr((unsigned)s->net_slot, 1);
}

void net_tap_name(const struct sandbox *s, char *out, size_t len)
{
	snprintf(out, len, "cub%.11s", s->id + 1);
}

/* A clone's own MAC: 06 (locally administered, unicast; the host sides
 * have 02) and five octets of its random id. */
static void guest_mac(const struct sandbox *s, char *out, size_t len)
{
	const char *h = s->id + 1;

	snprintf(out, len, "06:%.2s:%.2s:%.2s:%.2s:%.2s", h, h + 2, h + 4, h + 6, h + 8);
}

int net_clone(struct sandbox *s, const char *dev, char **sets, unsigned *n, unsigned max, char *msg,
	      size_t len)
{
	char tap[IFNAMSIZ], ip[20], mac[18];
	/* the tap the VMM makes, with its egress policy: the guest's address only, default deny */
	const char *kv[][2] = {
		{ "ifname", tap }, { "create", "true" }, { "policy.ip", ip }, { "policy.default", "deny" },
	};
	unsigned slot;

	pthread_mutex_lock(&srv.lock);
	for (slot = 0; slot < srv.net_slots; slot++) {
		struct sandbox *o = srv.list;

		while (o && (o == s || o->net_slot != (int)slot))
			o = o->next;
		if (!o)
			break;
	}
	if (slot < srv.net_slots)
		s->net_slot = (int)slot;
	pthread_mutex_unlock(&srv.lock);
	if (slot >= srv.net_slots)
		return snprintf(msg, len, "network_subnet %s has no free /30 left", srv.net_subnet), -1;
	snprintf(s->net_dev, sizeof(s->net_dev), "%s", dev);
	net_tap_name(s, tap, sizeof(tap));
	addr_of(slot, 2, ip, sizeof(ip));
	if (*n + 5 > max)
		return snprintf(msg, len, "too many --set options"), -1;
	for (unsigned i = 0; i < 4; i++, ++*n)
		if (asprintf(&sets[*n], "devices.%s.backend.%s=%s", dev, kv[i][0], kv[i][1]) < 0)
			return snprintf(msg, len, "out of memory"), -1;
	/* a MAC of its own (the device takes it over the snapshot's; the
	 * agent's /init moves the guest's interface to it) */
	guest_mac(s, mac, sizeof(mac));
	if (asprintf(&sets[*n], "devices.%s.mac=%s", dev, mac) < 0)
		return snprintf(msg, len, "out of memory"), -1;
	++*n;
	return 0;
}

/* The host's side of the tap: its address (/30) and up. */
static int host_side(const struct sandbox *s, char *msg, size_t len)
{
	struct ifreq ifr = { 0 };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = -1;
	const char *step = "socket";

	net_tap_name(s, ifr.ifr_name, sizeof(ifr.ifr_name));
	if (fd < 0)
		goto out;
	/* the same MAC for the same /30 each time: a resumed guest's ARP
	 * cache still names the gateway by the MAC its tap had before */
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data,
	       (unsigned char[6]){ 0x02, 0xcb, 0x0e, (unsigned char)(s->net_slot >> 16),
				   (unsigned char)(s->net_slot >> 8), (unsigned char)s->net_slot },
	       6);
	step = "setting its MAC";
	if (ioctl(fd, SIOCSIFHWADDR, &ifr) < 0)
		goto out;
	sin.sin_addr.s_addr = htonl(net_gw(s));
	memcpy(&ifr.ifr_addr, &sin, sizeof(sin));
	step = "setting its address";
	if (ioctl(fd, SIOCSIFADDR, &ifr) < 0)
		goto out;
	sin.sin_addr.s_addr = htonl(mask(30));
	memcpy(&ifr.ifr_netmask, &sin, sizeof(sin));
	step = "setting its netmask";
	if (ioctl(fd, SIOCSIFNETMASK, &ifr) < 0)
		goto out;
	step = "bringing it up";
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		goto out;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		goto out;
	ret = 0;
out:
	if (ret)
		snprintf(msg, len, "tap %s: %s: %s", ifr.ifr_name, step, strerror(errno));
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Entry @v's policy call (@method policy_allow or policy_deny): 0 or -1. */
static int policy_call(struct sandbox *s, const char *method, json_t *v, char *msg, size_t len)
{
	char path[160];
	json_t *b = json_pack("{s:[O]}", "args", v);
	char *d = b ? json_dumps(b, JSON_COMPACT) : NULL;
	int ret;

	json_decref(b);
	if (!d)
		return snprintf(msg, len, "out of memory"), -1;
	snprintf(path, sizeof(path), "/devices/%s/methods/%s", s->net_dev, method);
	ret = vmm_api(s, "PUT", path, d, 10000, msg, len);
	free(d);
	return ret;
}

static bool has_entry(json_t *list, json_t *v)
{
	json_t *e;
	size_t i;

	json_array_foreach(list, i, e)
		if (json_equal(e, v))
			return true;
	return false;
}

/* A string policy call (an address of its own, not a list entry). */
static int policy_str(struct sandbox *s, const char *method, const char *e, char *msg, size_t len)
{
	json_t *v = json_string(e);
	int ret = v ? policy_call(s, method, v, msg, len) : -1;

	json_decref(v);
	return ret;
}

/* Whether an allowOut domain of @list matches @name. */
static bool names(json_t *list, const char *name)
{
	json_t *v;
	size_t i;

	json_array_foreach(list, i, v)
		if (net_is_domain(json_string_value(v)) &&
		    net_domain_match(json_string_value(v), name))
			return true;
	return false;
}

int net_dns_open(struct sandbox *s, char *msg, size_t len)
{
	char dns53[40];
	int ret;

	if (s->net_slot < 0)
		return 0;
	if (dns_open(s, net_gw(s), msg, len))
		return -1;
	/* its name server reachable, UDP and TCP, whatever its list */
	dotted(net_gw(s), dns53, sizeof(dns53));
	strcat(dns53, "/32:53");
	pthread_mutex_lock(&s->net_lock);
	ret = policy_str(s, "policy_allow", dns53, msg, len);
	pthread_mutex_unlock(&s->net_lock);
	return ret;
}

int net_attach(struct sandbox *s, char *msg, size_t len)
{
	const char *k;
	json_t *v;
	size_t i;
	int ret = 0;

	if (s->net_slot < 0)
		return 0;
	if (host_side(s, msg, len) || net_dns_open(s, msg, len))
		return -1;
	pthread_mutex_lock(&s->net_lock);
	json_array_foreach(s->net_allow, i, v)
		if (!ret && !net_is_domain(json_string_value(v)))
			ret = policy_call(s, "policy_allow", v, msg, len);
	/* what its lookups allowed before a pause */
	json_object_foreach(s->net_learned, k, v)
		if (!ret)
			ret = policy_str(s, "policy_allow", k, msg, len);
	pthread_mutex_unlock(&s->net_lock);
	return ret;
}

int net_replace(struct sandbox *s, json_t *list, char *msg, size_t len)
{
	const char *k;
	json_t *v;
	void *tmp;
	size_t i;
	int ret = 0;

	pthread_mutex_lock(&s->net_lock);
	/* the new entries first, then the old ones it lacks go: nothing both
	 * lists allow is denied, even for an instant (domain names are the
	 * DNS proxy's: what their lookups allowed goes when no domain of the
	 * new list names it) */
	json_array_foreach(list, i, v)
		if (!ret && !net_is_domain(json_string_value(v)) && !has_entry(s->net_allow, v))
			ret = policy_call(s, "policy_allow", v, msg, len);
	json_array_foreach(s->net_allow, i, v)
		if (!ret && !net_is_domain(json_string_value(v)) && !has_entry(list, v))
			ret = policy_call(s, "policy_deny", v, msg, len);
	json_object_foreach_safe(s->net_learned, tmp, k, v) {
		json_t *e = json_string(k);

		if (!ret && !names(list, json_string_value(v)) && !has_entry(list, e)) {
			ret = policy_str(s, "policy_deny", k, msg, len);
			if (!ret)
				json_object_del(s->net_learned, k);
		}
		json_decref(e);
	}
	pthread_mutex_unlock(&s->net_lock);
	return ret;
}

int net_learn(struct sandbox *s, const char *name, const uint32_t *addrs, int n)
{
	char msg[256];
	int ret = 0;

	pthread_mutex_lock(&s->net_lock);
	if (!names(s->net_allow, name)) {
		pthread_mutex_unlock(&s->net_lock);
		return 0;
	}
	if (!s->net_learned)
		s->net_learned = json_object();
	for (int i = 0; !ret && s->net_learned && i < n; i++) {
		char a[24];

		dotted(addrs[i], a, sizeof(a));
		strcat(a, "/32");
		if (json_object_get(s->net_learned, a))
			continue;
		if (json_object_size(s->net_learned) >= NET_LEARN_MAX) {
			serve_log("sandbox %s: network: %s -> %s not allowed: %u addresses learnt already",
				  s->id, name, a, NET_LEARN_MAX);
			continue;
		}
		ret = policy_str(s, "policy_allow", a, msg, sizeof(msg));
		if (ret)
			serve_log("sandbox %s: network: %s -> %s: %s", s->id, name, a, msg);
		else
			json_object_set_new(s->net_learned, a, json_string(name));
	}
	pthread_mutex_unlock(&s->net_lock);
	return ret;
}

json_t *net_init_json(const struct sandbox *s)
{
	char addr[24], gw[20], mac[18];

	addr_of((unsigned)s->net_slot, 2, addr, sizeof(addr));
	strcat(addr, "/30");
	addr_of((unsigned)s->net_slot, 1, gw, sizeof(gw));
	guest_mac(s, mac, sizeof(mac));
	/* the gateway is its name server too (dns.c) */
	return json_pack("{s:s,s:s,s:s,s:s,s:s}", "interface", srv.net_if, "address", addr, "gateway",
			 gw, "mac", mac, "dns", gw);
}
