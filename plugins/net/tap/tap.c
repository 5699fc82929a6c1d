/* SPDX-License-Identifier: Apache-2.0 */
/* The tap net backend: frames to and from a host tap device (IFF_VNET_HDR, non-blocking), optionally fenced by an eBPF egress policy on the tap's ingress. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cubicle/net.h>

#include "mac.h"
#include "policy.h"
#include "probe.h"

/*
 * Order at open, so that a policy that cannot be enforced means no network:
 * the allow list is parsed first (config errors need no root); then the tap
 * is claimed (TUNSETIFF: a tap another VM holds is refused here, before its
 * filter could be touched), the filter attached, and only then a tap
 * cubicle created is brought up. Open runs before any vCPU, so the guest
 * sends nothing before the filter is in place; when it cannot be, open
 * fails, the VM never runs and a created tap goes away with its fd.
 * Without a `policy` group there is no filter at all.
 *
 * The tap always carries the 12-byte vnet header; when the device wants
 * plain frames, send prepends a zeroed header and recv reads the header
 * into a scratch buffer (with no offloads set, the kernel never hands over a
 * GSO or partially checksummed frame). recv reads into the caller's buffers
 * plus a scratch tail, so a frame longer than the buffers is noticed
 * (-EMSGSIZE) instead of being cut.
 */

#define IOV_STACK 64

struct tap_cfg {
	const char *ifname;
	bool create;
	const char *policy_default;
	const char *const *policy_allow;
	bool policy_arp;
	bool policy_dhcp;
	bool policy_required;
	const char *policy_program;
	const char *policy_pin;
	const char *policy_ip;
	const char *policy_mac;
};

struct tap {
	struct cub_inst *in;
	const struct cub_host *h;
	int fd;
	char ifname[IFNAMSIZ];
	int ifindex;
	bool created;
	bool vnet_on;
	uint32_t mtu;
	uint8_t rx_tail[CUB_NET_MAX_FRAME + CUB_NET_HDR_LEN]; /* see recv */
	/* the policy; lock serialises method calls */
	pthread_mutex_t lock;
	struct tp_bpf *bpf;
	struct tp_rules rules;
	bool arp, dhcp;
	uint32_t ip;          /* policy.ip, host order; 0: not set */
	uint8_t mac[6];       /* the guest's: policy.mac, or set_mac */
	bool has_mac;
	bool mac_fixed;       /* from policy.mac: set_mac must agree */
	_Atomic uint64_t rx_packets, rx_bytes, rx_dropped, rx_errors;
	_Atomic uint64_t tx_packets, tx_bytes, tx_errors;
};

#define COUNT(t, field, n) atomic_fetch_add_explicit(&(t)->field, (n), memory_order_relaxed)

/* ---- addresses ---- */

/* "52:54:00:12:34:56": 0, or -EINVAL (multicast and all-zero too). */
/* ---- frames ---- */

static int64_t tap_send(void *priv, const struct iovec *iov, int iovcnt)
{
	struct tap *t = priv;
	uint8_t hdr[CUB_NET_HDR_LEN] = { 0 };
	struct iovec stack[IOV_STACK], *v = (struct iovec *)iov;
	int n = iovcnt, extra = t->vnet_on ? 0 : 1;
	ssize_t r;

	if (iovcnt < 0)
		return -EINVAL;
	if (extra) {
		v = iovcnt + 1 <= IOV_STACK ? stack : malloc((size_t)(iovcnt + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		v[0] = (struct iovec){ hdr, sizeof(hdr) };
		if (iovcnt)
			memcpy(v + 1, iov, (size_t)iovcnt * sizeof(*v));
		n++;
	}
	do
		r = writev(t->fd, v, n);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		r = -errno;
	if (v != iov && v != stack)
		free(v);
	if (r == -EAGAIN)
		return r;
	if (r < 0) {
		COUNT(t, tx_errors, 1);
		return r;
	}
	r -= extra * CUB_NET_HDR_LEN;
	COUNT(t, tx_packets, 1);
	COUNT(t, tx_bytes, (uint64_t)r);
	return r;
}

static int64_t tap_recv(void *priv, const struct iovec *iov, int iovcnt)
{
	struct tap *t = priv;
	uint8_t hdr[CUB_NET_HDR_LEN];
	struct iovec stack[IOV_STACK], *v;
	int extra = t->vnet_on ? 0 : 1, n = iovcnt + extra + 1;
	uint64_t room = 0;
	ssize_t r;

	if (iovcnt < 0)
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++)
		room += iov[i].iov_len;
	v = n <= IOV_STACK ? stack : malloc((size_t)n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (extra)
		v[0] = (struct iovec){ hdr, sizeof(hdr) };
	if (iovcnt)
		memcpy(v + extra, iov, (size_t)iovcnt * sizeof(*v));
	v[n - 1] = (struct iovec){ t->rx_tail, sizeof(t->rx_tail) };
	do
		r = readv(t->fd, v, n);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		r = errno == EAGAIN ? 0 : -errno;
	if (v != stack)
		free(v);
	if (r < 0) {
		COUNT(t, rx_errors, 1);
		return r;
	}
	if (!r)
		return 0;
	r -= extra * CUB_NET_HDR_LEN;
	if (r < 0 || (uint64_t)r > room) {
		COUNT(t, rx_dropped, 1);
		return -EMSGSIZE;
	}
	COUNT(t, rx_packets, 1);
	COUNT(t, rx_bytes, (uint64_t)r);
	return r;
}

static int tap_set_vnet_hdr(void *priv, bool on)
{
	struct tap *t = priv;

	t->vnet_on = on;
	return on ? 0 : ioctl(t->fd, TUNSETOFFLOAD, 0) < 0 ? -errno : 0;
}

static int tap_set_offloads(void *priv, uint32_t off)
{
	struct tap *t = priv;
	unsigned long f = 0;

	if (!t->vnet_on && off)
		return -EINVAL;
	if (off & CUB_NET_OFF_CSUM)
		f |= TUN_F_CSUM;
	if (off & CUB_NET_OFF_TSO4)
		f |= TUN_F_TSO4;
	if (off & CUB_NET_OFF_TSO6)
		f |= TUN_F_TSO6;
	if (off & CUB_NET_OFF_TSO_ECN)
		f |= TUN_F_TSO_ECN;
	if (off & CUB_NET_OFF_UFO)
		f |= TUN_F_UFO;
	if (!ioctl(t->fd, TUNSETOFFLOAD, f))
		return 0;
	/* A kernel without UFO toward user space: fewer offloads are still safe. */
	if (errno == EINVAL && (f & TUN_F_UFO) && !ioctl(t->fd, TUNSETOFFLOAD, f & ~TUN_F_UFO))
		return 0;
	return -errno;
}

static void tap_info(void *priv, struct cub_net_info *out)
{
	struct tap *t = priv;

	*out = (struct cub_net_info){
		.vnet_hdr = true,
		.offloads = CUB_NET_OFF_CSUM | CUB_NET_OFF_TSO4 | CUB_NET_OFF_TSO6 |
			    CUB_NET_OFF_TSO_ECN | CUB_NET_OFF_UFO,
		.mtu = t->mtu,
		.link_up = true,
		.rx_fd = t->fd,
		.tx_fd = t->fd,
	};
	if (t->mac_fixed) { /* the device adopts it unless its own mac is set */
		memcpy(out->mac, t->mac, sizeof(out->mac));
		out->has_mac = true;
	}
}

/* The device names the guest's MAC: from now on the policy passes frames
 * from it (and only from it). */
static int tap_set_mac(void *priv, const uint8_t mac[6])
{
	struct tap *t = priv;
	char want[18], got[18];
	int err = 0;

	pthread_mutex_lock(&t->lock);
	mac_format(mac, got);
	if (t->mac_fixed && memcmp(t->mac, mac, sizeof(t->mac))) {
		mac_format(t->mac, want);
		t->h->log(t->in, CUB_LOG_ERR,
			  "%s: the device gives the guest MAC %s but policy.mac is %s: every frame would be dropped; set the device's mac to %s or drop one of them",
			  t->ifname, got, want, want);
		err = -EINVAL;
		goto out;
	}
	memcpy(t->mac, mac, sizeof(t->mac));
	t->has_mac = true;
	if (t->bpf && (err = tp_bpf_guest(t->bpf, t->mac, t->ip))) {
		t->h->log(t->in, CUB_LOG_ERR, "%s: cannot give the policy the guest's MAC: %s",
			  t->ifname, strerror(-err));
		goto out;
	}
	if (t->bpf)
		t->h->log(t->in, CUB_LOG_INFO, "%s: policy: frames pass only from the guest's MAC %s",
			  t->ifname, got);
out:
	pthread_mutex_unlock(&t->lock);
	return err;
}

static void tap_stats(void *priv, struct cub_net_stats *out)
{
	struct tap *t = priv;
	uint64_t s[TP_NSTATS] = { 0 };
	uint64_t dropped = 0;

	pthread_mutex_lock(&t->lock);
	if (t->bpf && !tp_bpf_stats(t->bpf, s))
		for (unsigned i = TP_PASS + 1; i < TP_NSTATS; i++)
			dropped += s[i];
	pthread_mutex_unlock(&t->lock);
	*out = (struct cub_net_stats){
		.rx_packets = t->rx_packets, .rx_bytes = t->rx_bytes,
		.rx_dropped = t->rx_dropped, .rx_errors = t->rx_errors,
		.tx_packets = t->tx_packets, .tx_bytes = t->tx_bytes,
		.tx_dropped = dropped, .tx_errors = t->tx_errors,
	};
}

/* ---- the policy ---- */

/* Check and parse the `policy` group: 0, or -EINVAL after h->fail. */
static int policy_parse(struct tap *t, const struct tap_cfg *cfg)
{
	char why[256];
	unsigned i = 0;

	if (strcmp(cfg->policy_default, "deny"))
		return t->h->fail(t->in, -EINVAL,
				  "policy.default = \"%s\": only \"deny\" is supported (the allow list names what passes)",
				  cfg->policy_default);
	for (const char *const *a = cfg->policy_allow; a && *a; a++, i++) {
		int ret = tp_rules_add(&t->rules, *a, why, sizeof(why));

		if (ret < 0)
			return t->h->fail(t->in, ret, "policy.allow[%u]: %s", i, why);
	}
	t->arp = cfg->policy_arp;
	t->dhcp = cfg->policy_dhcp;
	if (cfg->policy_ip && *cfg->policy_ip) {
		struct in_addr a;

		if (inet_pton(AF_INET, cfg->policy_ip, &a) != 1)
			return t->h->fail(t->in, -EINVAL, "policy.ip = \"%s\": expected an IPv4 address a.b.c.d",
					  cfg->policy_ip);
		t->ip = ntohl(a.s_addr);
		if (!t->ip || t->ip == 0xffffffff || (t->ip >> 28) == 14)
			return t->h->fail(t->in, -EINVAL, "policy.ip = \"%s\": not a unicast address",
					  cfg->policy_ip);
	}
	if (cfg->policy_mac && *cfg->policy_mac) {
		if (mac_parse(cfg->policy_mac, t->mac))
			return t->h->fail(t->in, -EINVAL,
					  "policy.mac = \"%s\": expected six hex octets like 52:54:00:12:34:56, unicast, not all zero",
					  cfg->policy_mac);
		t->has_mac = t->mac_fixed = true;
	}
	return 0;
}

static void bpf_log(void *arg, int warn, const char *line)
{
	struct tap *t = arg;

	t->h->log(t->in, warn ? CUB_LOG_ERR : CUB_LOG_INFO, "%s", line); /* "libbpf: ..." */
}

/* Load, fill and attach the policy: 0 or -errno with a reason in why. */
static int policy_attach(struct tap *t, const struct tap_cfg *cfg, char *why, size_t len)
{
	struct tp_bpf_opts o = {
		.cfg = (t->arp ? TP_CFG_ARP : 0) | (t->dhcp ? TP_CFG_DHCP : 0),
		.program = cfg->policy_program && *cfg->policy_program ? cfg->policy_program : NULL,
		.pin = cfg->policy_pin,
		.log = bpf_log,
		.log_arg = t,
	};
	int err = tp_bpf_load(&t->bpf, &o, why, len);

	if (!err && (err = tp_bpf_guest(t->bpf, t->has_mac ? t->mac : NULL, t->ip)))
		snprintf(why, len, "cannot set the guest's addresses: %s", strerror(-err));
	if (!err)
		err = tp_bpf_sync(t->bpf, &t->rules, why, len);
	if (!err)
		err = tp_bpf_attach(t->bpf, t->ifindex, why, len);
	if (err) {
		tp_bpf_free(t->bpf);
		t->bpf = NULL;
	}
	return err;
}

/* Policy failures: fatal unless policy.required = false. */
static int policy_setup(struct tap *t, const struct tap_cfg *cfg)
{
	char why[400];
	int err = policy_attach(t, cfg, why, sizeof(why));

	if (!err) {
		char ip[INET_ADDRSTRLEN];
		struct in_addr a = { htonl(t->ip) };

		if (!t->ip || !inet_ntop(AF_INET, &a, ip, sizeof(ip)))
			snprintf(ip, sizeof(ip), "not checked");
		t->h->log(t->in, CUB_LOG_INFO,
			  "%s: egress policy attached (default deny, %u allow rules, arp %s, dhcp %s, source ip %s)",
			  t->ifname, t->rules.n, t->arp ? "on" : "off", t->dhcp ? "on" : "off", ip);
		return 0;
	}
	if (cfg->policy_required)
		return t->h->fail(t->in, err, "%s: the egress policy cannot be enforced, so the VM does not start (policy.required = true): %s",
				  t->ifname, why);
	t->h->log(t->in, CUB_LOG_WARN,
		  "%s: the egress policy cannot be enforced: %s; policy.required = false, so the guest's traffic is NOT filtered",
		  t->ifname, why);
	return 0;
}

static void log_stats(struct tap *t)
{
	uint64_t s[TP_NSTATS];
	char buf[400];
	int n;

	if (!t->bpf || tp_bpf_stats(t->bpf, s))
		return;
	n = snprintf(buf, sizeof(buf), "passed %llu; dropped:", (unsigned long long)s[TP_PASS]);
	for (unsigned i = TP_PASS + 1; i < TP_NSTATS && n > 0 && (size_t)n < sizeof(buf); i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, " %s %llu", tp_stat_names[i],
			      (unsigned long long)s[i]);
	t->h->log(t->in, CUB_LOG_INFO, "%s: policy: %s", t->ifname, buf);
}

/* ---- open and close ---- */

static int tun_open(struct tap *t, const struct tap_cfg *cfg)
{
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };
	int hdr = CUB_NET_HDR_LEN;

	t->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (t->fd < 0)
		return t->h->fail(t->in, -errno, "cannot open /dev/net/tun: %s%s", strerror(errno),
				  errno == ENOENT || errno == ENODEV ? " (modprobe tun)" :
				  errno == EACCES || errno == EPERM ? " (needs root or CAP_NET_ADMIN)" : "");
	if (cfg->create)
		ifr.ifr_flags |= IFF_TUN_EXCL; /* never take over an existing device */
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", t->ifname);
	if (ioctl(t->fd, TUNSETIFF, &ifr) < 0)
		return t->h->fail(t->in, -errno, "cannot %s tap %s: %s%s",
				  cfg->create ? "create" : "attach to", *t->ifname ? t->ifname : "tap%d",
				  strerror(errno),
				  errno == EBUSY ? (cfg->create ? " (it exists already; drop create = true to attach to it)" :
						    " (another process holds it, or it is not a tap)") :
				  errno == EPERM ? " (needs CAP_NET_ADMIN, or a tap owned by this user: scripts/tap-setup.sh --user)" :
				  errno == EINVAL ? " (is it a multi-queue tap, or a tun device?)" : "");
	snprintf(t->ifname, sizeof(t->ifname), "%s", ifr.ifr_name);
	t->created = cfg->create;
	if (ioctl(t->fd, TUNSETVNETHDRSZ, &hdr) < 0)
		return t->h->fail(t->in, -errno, "%s: TUNSETVNETHDRSZ %d: %s", t->ifname, hdr,
				  strerror(errno));
	if (ioctl(t->fd, TUNSETOFFLOAD, 0) < 0)
		return t->h->fail(t->in, -errno, "%s: TUNSETOFFLOAD: %s", t->ifname, strerror(errno));
	return 0;
}

/* Admin up (a tap cubicle created) and read the MTU, through an ioctl socket. */
static int link_setup(struct tap *t, bool up)
{
	struct ifreq ifr = { 0 };
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;

	if (s < 0)
		return t->h->fail(t->in, -errno, "socket: %s", strerror(errno));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", t->ifname);
	if (up && !ioctl(s, SIOCGIFFLAGS, &ifr)) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
			err = t->h->fail(t->in, -errno, "cannot bring %s up: %s", t->ifname,
					 strerror(errno));
	}
	if (!err && !ioctl(s, SIOCGIFMTU, &ifr) && ifr.ifr_mtu >= 68 &&
	    ifr.ifr_mtu <= CUB_NET_MAX_FRAME - 14)
		t->mtu = (uint32_t)ifr.ifr_mtu;
	close(s);
	return err;
}

static void tap_free(struct tap *t)
{
	tp_bpf_free(t->bpf); /* before the fd: a tap we created goes with it */
	if (t->fd >= 0)
		close(t->fd);
	tp_rules_free(&t->rules);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static int tap_open(struct cub_inst *in, const struct cub_host *h, const void *cfgp, void **priv)
{
	const struct tap_cfg *cfg = cfgp;
	bool policy = cfg->policy_default != NULL; /* the `policy` group is there */
	struct tap *t;
	int err;

	if (!cfg->create && (!cfg->ifname || !*cfg->ifname))
		return h->fail(in, -EINVAL, "ifname must name an existing tap (scripts/tap-setup.sh makes one), or set create = true");
	if (cfg->ifname && strlen(cfg->ifname) >= IFNAMSIZ)
		return h->fail(in, -EINVAL, "ifname '%s' is longer than %d characters", cfg->ifname,
			       IFNAMSIZ - 1);
	t = calloc(1, sizeof(*t));
	if (!t)
		return h->fail(in, -ENOMEM, "out of memory");
	t->in = in;
	t->h = h;
	t->fd = -1;
	pthread_mutex_init(&t->lock, NULL);
	snprintf(t->ifname, sizeof(t->ifname), "%s", cfg->ifname ? cfg->ifname : "");
	if (policy && (err = policy_parse(t, cfg)))
		goto fail;
	/* TUNSETIFF would create a missing tap: only create = true may. */
	if (!cfg->create && !if_nametoindex(t->ifname)) {
		err = h->fail(in, -ENODEV, "no network interface named %s (scripts/tap-setup.sh %s makes one; or set create = true)",
			      t->ifname, t->ifname);
		goto fail;
	}
	if ((err = tun_open(t, cfg)))
		goto fail;
	t->ifindex = (int)if_nametoindex(t->ifname);
	if (policy && (err = policy_setup(t, cfg)))
		goto fail;
	if ((err = link_setup(t, cfg->create)))
		goto fail;
	h->log(in, CUB_LOG_INFO, "%s %s (mtu %u)%s", cfg->create ? "created" : "attached to",
	       t->ifname, t->mtu, policy ? "" : ", no egress policy: the guest reaches all the host routes");
	*priv = t;
	return 0;
fail:
	tap_free(t);
	return err;
}

static void tap_close(void *priv)
{
	struct tap *t = priv;

	log_stats(t);
	tap_free(t);
}

/* ---- control methods ---- */

static int reply(struct cub_reply *r, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int reply(struct cub_reply *r, int ret, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(r->text, sizeof(r->text), fmt, ap);
	va_end(ap);
	r->len = n < 0 ? 0 : (size_t)n < sizeof(r->text) ? (size_t)n : sizeof(r->text) - 1;
	return ret;
}

static int m_policy_stats(void *priv, struct cub_reply *r)
{
	struct tap *t = priv;
	uint64_t s[TP_NSTATS];
	size_t n = 0;
	int err;

	pthread_mutex_lock(&t->lock);
	err = t->bpf ? tp_bpf_stats(t->bpf, s) : -ENOENT;
	pthread_mutex_unlock(&t->lock);
	if (err)
		return reply(r, err, err == -ENOENT ? "no egress policy on %s" :
				     "cannot read the policy counters of %s", t->ifname);
	for (unsigned i = 0; i < TP_NSTATS && n < sizeof(r->text); i++) {
		int k = snprintf(r->text + n, sizeof(r->text) - n, "%s%s %llu", i ? " " : "",
				 tp_stat_names[i], (unsigned long long)s[i]);

		if (k < 0)
			break;
		n += (size_t)k;
	}
	r->len = n < sizeof(r->text) ? n : sizeof(r->text) - 1;
	return 0;
}

/* Change the allow list (add or remove entry s) and the maps with it. */
static int change(struct tap *t, struct cub_reply *r, const char *s, bool add)
{
	struct tp_rules old = { 0 };
	char why[300];
	int ret;

	pthread_mutex_lock(&t->lock);
	if (!t->bpf) {
		ret = reply(r, -ENOENT, "no egress policy on %s", t->ifname);
		goto out;
	}
	old.v = malloc((t->rules.n ? t->rules.n : 1) * sizeof(*old.v));
	if (!old.v) {
		ret = reply(r, -ENOMEM, "out of memory");
		goto out;
	}
	if (t->rules.n)
		memcpy(old.v, t->rules.v, t->rules.n * sizeof(*old.v));
	old.n = t->rules.n;
	old.cap = t->rules.n ? t->rules.n : 1;
	ret = add ? tp_rules_add(&t->rules, s ? s : "", why, sizeof(why)) :
		    tp_rules_del(&t->rules, s ? s : "", why, sizeof(why));
	if (ret < 0) {
		reply(r, ret, "%s", why);
		goto out;
	}
	ret = tp_bpf_sync(t->bpf, &t->rules, why, sizeof(why));
	if (ret) {
		reply(r, ret, "%s", why);
		tp_rules_free(&t->rules);
		t->rules = old;
		old = (struct tp_rules){ 0 };
		tp_bpf_sync(t->bpf, &t->rules, why, sizeof(why));
		goto out;
	}
	reply(r, 0, "%s %s: %u allow rules now", add ? "allowed" : "removed", s, t->rules.n);
	t->h->log(t->in, CUB_LOG_INFO, "%s: policy: %s %s (%u allow rules)", t->ifname,
		  add ? "allowed" : "removed", s, t->rules.n);
out:
	pthread_mutex_unlock(&t->lock);
	tp_rules_free(&old);
	return ret;
}

static int m_policy_allow(void *priv, struct cub_reply *r, const char *s)
{
	return change(priv, r, s, true);
}

static int m_policy_deny(void *priv, struct cub_reply *r, const char *s)
{
	return change(priv, r, s, false);
}

static const struct cub_method tap_methods[] = {
	{ .name = "policy_stats", .sig = "",
	  .doc = "frames the egress policy passed, and dropped per reason",
	  .fn = (void (*)(void))m_policy_stats },
	{ .name = "policy_allow", .sig = "s",
	  .doc = "add an allow entry CIDR[:port[/tcp|/udp]] at run time",
	  .fn = (void (*)(void))m_policy_allow },
	{ .name = "policy_deny", .sig = "s",
	  .doc = "remove an allow entry, as it was added",
	  .fn = (void (*)(void))m_policy_deny },
};

static const struct cub_param tap_params[] = {
	{ .name = "ifname", .type = CUB_P_STR, .offset = offsetof(struct tap_cfg, ifname),
	  .def = "", .doc = "the tap device (with create = true, empty lets the kernel name it)" },
	{ .name = "create", .type = CUB_P_BOOL, .offset = offsetof(struct tap_cfg, create),
	  .def = "false", .doc = "create the tap (gone at exit) instead of attaching to an existing one" },
	{ .name = "policy.default", .type = CUB_P_STR,
	  .offset = offsetof(struct tap_cfg, policy_default),
	  .doc = "what the allow list does not name: \"deny\" (the only choice for now)" },
	{ .name = "policy.allow", .type = CUB_P_STRV,
	  .offset = offsetof(struct tap_cfg, policy_allow), .def = "",
	  .doc = "destinations the guest may reach: CIDR[:port[/tcp|/udp]]" },
	{ .name = "policy.arp", .type = CUB_P_BOOL, .offset = offsetof(struct tap_cfg, policy_arp),
	  .def = "true", .doc = "let ARP through" },
	{ .name = "policy.dhcp", .type = CUB_P_BOOL,
	  .offset = offsetof(struct tap_cfg, policy_dhcp), .def = "false",
	  .doc = "let DHCP requests (UDP 68 to 67, broadcast) through" },
	{ .name = "policy.required", .type = CUB_P_BOOL,
	  .offset = offsetof(struct tap_cfg, policy_required), .def = "true",
	  .doc = "fail closed: no VM when the policy cannot be attached" },
	{ .name = "policy.program", .type = CUB_P_PATH,
	  .offset = offsetof(struct tap_cfg, policy_program), .def = "",
	  .doc = "a BPF object to load instead of the built-in program (testing)" },
	{ .name = "policy.pin", .type = CUB_P_PATH, .offset = offsetof(struct tap_cfg, policy_pin),
	  .def = "", .doc = "pin the policy maps in this bpffs folder (for bpftool)" },
	{ .name = "policy.ip", .type = CUB_P_STR, .offset = offsetof(struct tap_cfg, policy_ip),
	  .def = "", .doc = "the guest's IPv4 address: IPv4 and ARP from any other are dropped (empty: not checked)" },
	{ .name = "policy.mac", .type = CUB_P_STR, .offset = offsetof(struct tap_cfg, policy_mac),
	  .def = "", .doc = "the guest's MAC (empty: the device's, which is normal); the device must agree" },
};

static const struct cub_net_ops tap_ops = {
	.open = tap_open,
	.close = tap_close,
	.info = tap_info,
	.set_vnet_hdr = tap_set_vnet_hdr,
	.set_offloads = tap_set_offloads,
	.send = tap_send,
	.recv = tap_recv,
	.stats = tap_stats,
	.set_mac = tap_set_mac,
};

/* Once the VM runs: the offloads the guest's driver negotiates, and the
 * policy's maps (the allow list changed through the API, the guest's
 * address, the counters): lookup, update, delete, next key. */
static const struct cub_syscall tap_syscalls[] = {
	CUB_SYSCALL_IOCTL(TUNSETOFFLOAD),
	CUB_SYSCALL_ARG("bpf", 0, 0xffffffffu, BPF_MAP_LOOKUP_ELEM),
	CUB_SYSCALL_ARG("bpf", 0, 0xffffffffu, BPF_MAP_UPDATE_ELEM),
	CUB_SYSCALL_ARG("bpf", 0, 0xffffffffu, BPF_MAP_DELETE_ELEM),
	CUB_SYSCALL_ARG("bpf", 0, 0xffffffffu, BPF_MAP_GET_NEXT_KEY),
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(4),
	.kind = CUB_KIND_NET,
	.name = "tap",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "host tap device (vnet header, offloads) with an eBPF egress policy",
	.cfg_size = sizeof(struct tap_cfg),
	.params = tap_params,
	.n_params = CUB_ARRAY_SIZE(tap_params),
	.methods = tap_methods,
	.n_methods = CUB_ARRAY_SIZE(tap_methods),
	.ops = &tap_ops,
	.host_check = tap_host_check,
	.syscalls = tap_syscalls,
	.n_syscalls = CUB_ARRAY_SIZE(tap_syscalls),
});
