/* SPDX-License-Identifier: Apache-2.0 */
/* The virtio-net device plugin: one queue pair between the guest and a net
 * backend. Here features, config space, setup; queues.c has the data path. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "mac.h"
#include "virtio_net.h"

/* ---- virtio ops ---- */

static uint64_t net_features(void *priv)
{
	return ((struct net *)priv)->offered;
}

static int net_set_features(void *priv, uint64_t f)
{
	struct net *n = priv;
	uint64_t host = F(VIRTIO_NET_F_HOST_TSO4) | F(VIRTIO_NET_F_HOST_TSO6) |
			F(VIRTIO_NET_F_HOST_UFO) | F(VIRTIO_NET_F_HOST_ECN);
	uint64_t guest = F(VIRTIO_NET_F_GUEST_TSO4) | F(VIRTIO_NET_F_GUEST_TSO6) |
			 F(VIRTIO_NET_F_GUEST_UFO) | F(VIRTIO_NET_F_GUEST_ECN);

	f &= n->offered;
	/* virtio 5.1.3.1: segmentation needs checksum offload, ECN needs TSO. */
	if (((f & host) && !(f & F(VIRTIO_NET_F_CSUM))) ||
	    ((f & guest) && !(f & F(VIRTIO_NET_F_GUEST_CSUM))) ||
	    ((f & F(VIRTIO_NET_F_HOST_ECN)) &&
	     !(f & (F(VIRTIO_NET_F_HOST_TSO4) | F(VIRTIO_NET_F_HOST_TSO6)))) ||
	    ((f & F(VIRTIO_NET_F_GUEST_ECN)) &&
	     !(f & (F(VIRTIO_NET_F_GUEST_TSO4) | F(VIRTIO_NET_F_GUEST_TSO6))))) {
		n->h->log_ratelimited(n->in, CUB_LOG_WARN,
				      "driver features %#llx break virtio 5.1.3.1 dependencies; refused",
				      (unsigned long long)f);
		return -EINVAL;
	}
	atomic_store(&n->acked, f);
	return 0;
}

static void net_config_read(void *priv, uint32_t off, void *buf, uint32_t len)
{
	struct net *n = priv;
	struct cub_net_info i;
	uint8_t cfg[CFG_SIZE] = { 0 };

	n->be->ops->info(n->be->priv, &i);
	memcpy(cfg + CFG_MAC, n->mac, 6);
	put_le16(cfg + CFG_STATUS, i.link_up ? VIRTIO_NET_S_LINK_UP : 0);
	put_le16(cfg + CFG_MAX_PAIRS, 1);
	put_le16(cfg + CFG_MTU, n->mtu);
	if (off > CFG_SIZE || len > CFG_SIZE - off) { /* the host checked; belt and braces */
		memset(buf, 0, len);
		return;
	}
	memcpy(buf, cfg + off, len);
}

/* The guest's receive offloads, as the backend names them. */
static uint32_t rx_offloads(uint64_t f)
{
	return (f & F(VIRTIO_NET_F_GUEST_CSUM) ? CUB_NET_OFF_CSUM : 0) |
	       (f & F(VIRTIO_NET_F_GUEST_TSO4) ? CUB_NET_OFF_TSO4 : 0) |
	       (f & F(VIRTIO_NET_F_GUEST_TSO6) ? CUB_NET_OFF_TSO6 : 0) |
	       (f & F(VIRTIO_NET_F_GUEST_ECN) ? CUB_NET_OFF_TSO_ECN : 0) |
	       (f & F(VIRTIO_NET_F_GUEST_UFO) ? CUB_NET_OFF_UFO : 0);
}

static void net_stop(void *priv);

static int net_start(void *priv, struct cub_vq *const *vqs, unsigned nq)
{
	struct net *n = priv;
	uint64_t f = atomic_load(&n->acked);
	const struct cub_net_ops *o = n->be->ops;
	bool vnet = n->be->info.vnet_hdr &&
		    (f & (F(VIRTIO_NET_F_CSUM) | F(VIRTIO_NET_F_GUEST_CSUM)));
	int err = 0;

	if (o->set_vnet_hdr && n->be->info.vnet_hdr)
		err = o->set_vnet_hdr(n->be->priv, vnet);
	if (!err && vnet && o->set_offloads)
		err = o->set_offloads(n->be->priv, rx_offloads(f));
	if (err) {
		n->h->log(n->in, CUB_LOG_ERR, "%s: cannot set up vnet headers: %s", n->be->name,
			  strerror(-err));
		return err;
	}
	pthread_mutex_lock(&n->rx_lock);
	n->rxq = nq > Q_RX ? vqs[Q_RX] : NULL;
	n->mrg = f & F(VIRTIO_NET_F_MRG_RXBUF);
	n->vnet = vnet;
	n->rx_running = n->rxq;
	n->rx_held = n->rx_pend = n->rx_dead = false;
	n->rx_errs = 0;
	n->rx_qsize = QUEUE_MAX;
	if (n->rxq && CUB_VIRTIO_HAS_QUEUE_SIZE(n->v)) {
		uint16_t qs = n->v->queue_size(n->rxq);

		n->rx_qsize = qs && qs < QUEUE_MAX ? qs : QUEUE_MAX;
	}
	pthread_mutex_unlock(&n->rx_lock);
	pthread_mutex_lock(&n->tx_lock);
	n->txq = nq > Q_TX ? vqs[Q_TX] : NULL;
	n->tx_running = n->txq;
	n->tx_held = false;
	pthread_mutex_unlock(&n->tx_lock);
	/* Buffers may be waiting already. */
	vnet_tx_process(n);
	vnet_rx_process(n, false, false);
	return 0;
}

static void net_notify(void *priv, unsigned q)
{
	struct net *n = priv;

	if (q == Q_TX)
		vnet_tx_process(n);
	else if (q == Q_RX)
		vnet_rx_process(n, false, false); /* new buffers: receive again */
}

static void net_stop(void *priv)
{
	struct net *n = priv;

	pthread_mutex_lock(&n->rx_lock);
	n->rx_running = n->rx_held = n->rx_pend = false;
	n->n_used = n->n_sp = 0;
	n->rx_target = 0;
	n->rxq = NULL;
	if (n->rx_waiting) {
		struct itimerspec off = { { 0, 0 }, { 0, 0 } };

		timerfd_settime(n->tfd, 0, &off, NULL);
		n->rx_waiting = false;
	}
	pthread_mutex_unlock(&n->rx_lock);
	pthread_mutex_lock(&n->tx_lock);
	n->tx_running = n->tx_held = false;
	n->txq = NULL;
	pthread_mutex_unlock(&n->tx_lock);
	vnet_interest(n, false, false);
}

/* ---- control ---- */

static int net_m_stats(void *priv, struct cub_reply *rep)
{
	struct net *n = priv;
	struct cub_net_stats b = { 0 };
	int k;

	if (n->be->ops->stats)
		n->be->ops->stats(n->be->priv, &b);
	k = snprintf(rep->text, sizeof(rep->text),
		     "rx_packets %llu rx_bytes %llu rx_dropped %llu rx_dropped_nobuf %llu "
		     "tx_packets %llu tx_bytes %llu tx_dropped %llu "
		     "backend_rx_dropped %llu backend_rx_errors %llu "
		     "backend_tx_dropped %llu backend_tx_errors %llu",
		     (unsigned long long)atomic_load(&n->rx_packets),
		     (unsigned long long)atomic_load(&n->rx_bytes),
		     (unsigned long long)atomic_load(&n->rx_dropped),
		     (unsigned long long)atomic_load(&n->rx_nobuf),
		     (unsigned long long)atomic_load(&n->tx_packets),
		     (unsigned long long)atomic_load(&n->tx_bytes),
		     (unsigned long long)atomic_load(&n->tx_dropped),
		     (unsigned long long)b.rx_dropped, (unsigned long long)b.rx_errors,
		     (unsigned long long)b.tx_dropped, (unsigned long long)b.tx_errors);
	rep->len = k < 0 ? 0 : (size_t)k < sizeof(rep->text) ? (size_t)k : sizeof(rep->text) - 1;
	return 0;
}

/* ---- setup ---- */

/* A MAC from the VM's config path and the device id: the same VM gets the
 * same address every run, two devices or two VMs get different ones.
 * FNV-1a 64; locally administered (bit 1), unicast (bit 0 clear). */
static void derive_mac(const char *vm_path, const char *id, uint8_t mac[6])
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *parts[2] = { vm_path ? vm_path : "", id ? id : "" };

	for (int p = 0; p < 2; p++) {
		for (const char *c = parts[p]; *c; c++)
			h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
		h = (h ^ 0xff) * 0x100000001b3ull; /* separator: ("ab","c") != ("a","bc") */
	}
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)(h >> (8 * i));
	mac[0] = (uint8_t)((mac[0] & 0xfe) | 0x02);
}

static uint64_t offer(const struct cub_net_info *i, bool mtu)
{
	uint64_t f = F(VIRTIO_NET_F_MAC) | F(VIRTIO_NET_F_STATUS) | F(VIRTIO_NET_F_MRG_RXBUF);
	uint32_t o = i->vnet_hdr ? i->offloads : 0;

	if (mtu)
		f |= F(VIRTIO_NET_F_MTU);
	if (!(o & CUB_NET_OFF_CSUM))
		return f; /* every other offload needs checksum offload (virtio 5.1.3.1) */
	f |= F(VIRTIO_NET_F_CSUM) | F(VIRTIO_NET_F_GUEST_CSUM);
	if (o & CUB_NET_OFF_TSO4)
		f |= F(VIRTIO_NET_F_HOST_TSO4) | F(VIRTIO_NET_F_GUEST_TSO4);
	if (o & CUB_NET_OFF_TSO6)
		f |= F(VIRTIO_NET_F_HOST_TSO6) | F(VIRTIO_NET_F_GUEST_TSO6);
	if ((o & CUB_NET_OFF_TSO_ECN) && (o & (CUB_NET_OFF_TSO4 | CUB_NET_OFF_TSO6)))
		f |= F(VIRTIO_NET_F_HOST_ECN) | F(VIRTIO_NET_F_GUEST_ECN);
	if (o & CUB_NET_OFF_UFO)
		f |= F(VIRTIO_NET_F_HOST_UFO) | F(VIRTIO_NET_F_GUEST_UFO);
	return f;
}

static void net_free(struct net *n)
{
	if (n->efd >= 0)
		close(n->efd);
	if (n->tfd >= 0)
		close(n->tfd);
	if (n->kfd >= 0)
		close(n->kfd);
	if (n->lfd >= 0)
		close(n->lfd);
	if (n->be)
		n->h->net->close(n->in, n->be);
	pthread_mutex_destroy(&n->ev_lock);
	pthread_mutex_destroy(&n->rx_lock);
	pthread_mutex_destroy(&n->tx_lock);
	free(n->rxc);
	free(n->rxm);
	free(n->txc);
	free(n->bounce);
	free(n);
}

static const struct cub_virtio_ops net_vops = {
	.device_id = VIRTIO_ID_NET,
	.n_queues = 2,
	.queue_max = QUEUE_MAX,
	.config_size = CFG_SIZE,
	.features = net_features,
	.set_features = net_set_features,
	.config_read = net_config_read,
	.start = net_start,
	.notify = net_notify,
	.stop = net_stop,
};

static int net_setup(struct net *n, const struct net_cfg *cfg)
{
	const struct cub_net_info *i = &n->be->info;
	char m[18];
	int err;

	n->mac_set = cfg->mac && *cfg->mac;
	if (n->mac_set)
		mac_parse(cfg->mac, n->mac);
	else if (i->has_mac)
		memcpy(n->mac, i->mac, 6);
	else
		derive_mac(n->be->vm_path, n->be->dev_id, n->mac);
	mac_format(n->mac, m);
	/* A backend that checks source addresses learns the guest's here,
	 * before any frame can flow. */
	if (n->be->ops->set_mac && (err = n->be->ops->set_mac(n->be->priv, n->mac)))
		return n->h->fail(n->in, err, "%s refused the guest's MAC %s: %s (see its log line)",
				  n->be->name, m, strerror(-err));
	n->mtu = (uint16_t)(cfg->mtu ? cfg->mtu : i->mtu <= 65535 ? i->mtu : 65535);
	n->offered = offer(i, n->mtu);
	n->efd = epoll_create1(EPOLL_CLOEXEC);
	if (n->efd < 0)
		return n->h->fail(n->in, -errno, "epoll_create1: %s", strerror(errno));
	n->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (n->tfd < 0)
		return n->h->fail(n->in, -errno, "timerfd_create: %s", strerror(errno));
	if (epoll_ctl(n->efd, EPOLL_CTL_ADD, n->tfd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.u32 = TAG_TIMER }) < 0)
		return n->h->fail(n->in, -errno, "epoll_ctl: %s", strerror(errno));
	n->kfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (n->kfd < 0 || epoll_ctl(n->efd, EPOLL_CTL_ADD, n->kfd,
				    &(struct epoll_event){ .events = EPOLLIN, .data.u32 = TAG_KICK }) < 0)
		return n->h->fail(n->in, -errno, "transmit re-arm eventfd: %s", strerror(errno));
	if (n->rx_rl || n->tx_rl) {
		n->lfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (n->lfd < 0 || epoll_ctl(n->efd, EPOLL_CTL_ADD, n->lfd,
					    &(struct epoll_event){ .events = EPOLLIN, .data.u32 = TAG_RL }) < 0)
			return n->h->fail(n->in, -errno, "rate limiter timerfd: %s", strerror(errno));
	}
	err = n->h->fd_watch(n->in, n->efd, EPOLLIN, vnet_event, n);
	if (err)
		return n->h->fail(n->in, err, "cannot watch the backend: %s", strerror(-err));
	err = n->h->virtio->add(n->in, &net_vops, n);
	if (err)
		return err;
	n->h->log(n->in, CUB_LOG_DEBUG, "%s: mac %s%s, mtu %u, offloads %s", n->be->name, m,
		  cfg->mac && *cfg->mac ? "" : " (derived)", n->mtu,
		  n->offered & F(VIRTIO_NET_F_CSUM) ? "yes" : "none");
	return 0;
}

static int net_create(struct cub_inst *in, const struct cub_host *h, const void *cfgp,
		      void **priv)
{
	const struct net_cfg *cfg = cfgp;
	uint8_t mac[6];
	struct net *n;
	int err;

	if (cfg->mac && *cfg->mac && mac_parse(cfg->mac, mac))
		return h->fail(in, -EINVAL,
			       "mac \"%s\": expected six hex octets like 52:54:00:12:34:56, unicast, not all zero",
			       cfg->mac);
	if (cfg->mtu && (cfg->mtu < 68 || cfg->mtu > 65535))
		return h->fail(in, -EINVAL, "mtu = %lld; expected 68 to 65535 (0: not set)",
			       (long long)cfg->mtu);
	if (!CUB_HOST_HAS(h, virtio) || !CUB_HOST_HAS(h, net))
		return h->fail(in, -ENOTSUP, "this host offers no virtio or net services");
	n = calloc(1, sizeof(*n));
	if (!n)
		return h->fail(in, -ENOMEM, "out of memory");
	n->in = in;
	n->h = h;
	n->v = h->virtio;
	n->efd = -1;
	n->tfd = -1;
	n->kfd = -1;
	n->lfd = -1;
	if (CUB_VIRTIO_HAS_RL(h->virtio)) {
		n->rx_rl = cfg->rx_rl;
		n->tx_rl = cfg->tx_rl;
	}
	n->batch = CUB_VIRTIO_HAS_PUSH_BATCH(h->virtio);
	n->unpop = CUB_VIRTIO_HAS_UNPOP(h->virtio);
	pthread_mutex_init(&n->ev_lock, NULL);
	pthread_mutex_init(&n->rx_lock, NULL);
	pthread_mutex_init(&n->tx_lock, NULL);
	n->rxc = malloc(sizeof(*n->rxc));
	n->rxm = malloc(sizeof(*n->rxm));
	n->txc = malloc(sizeof(*n->txc));
	/* 64-byte aligned: the kernel's copy into it runs at full speed (rx_bounce) */
	n->bounce = aligned_alloc(64, BOUNCE_SIZE);
	if (!n->rxc || !n->rxm || !n->txc || !n->bounce) {
		net_free(n);
		return h->fail(in, -ENOMEM, "out of memory");
	}
	/* The reason is already recorded on failure (file:line, backend name). */
	err = h->net->open(in, "backend", &n->be);
	if (!err)
		err = net_setup(n, cfg);
	if (err) {
		net_free(n);
		return err;
	}
	*priv = n;
	return 0;
}

static void net_destroy(void *priv)
{
	net_free(priv);
}

static const struct cub_param net_params[] = {
	{ .name = "backend", .type = CUB_P_NET, .offset = offsetof(struct net_cfg, backend),
	  .doc = "the link: a net backend group, e.g. { type = \"socket\"; path = \"...\"; }" },
	{ .name = "mac", .type = CUB_P_STR, .offset = offsetof(struct net_cfg, mac), .def = "",
	  .doc = "guest MAC address; default: derived from the config path and device id" },
	{ .name = "mtu", .type = CUB_P_INT, .offset = offsetof(struct net_cfg, mtu), .def = "0",
	  .doc = "MTU the guest is told (VIRTIO_NET_F_MTU), 68 to 65535; 0: the backend's, if any" },
	{ .name = "rx_rate_limiter", .type = CUB_P_RATELIMIT, .offset = offsetof(struct net_cfg, rx_rl),
	  .def = "", .doc = "Firecracker-style limiter of what the guest receives: bandwidth (bytes), ops (frames)" },
	{ .name = "tx_rate_limiter", .type = CUB_P_RATELIMIT, .offset = offsetof(struct net_cfg, tx_rl),
	  .def = "", .doc = "likewise, of what the guest sends" },
};

static const struct cub_method net_methods[] = {
	{ .name = "stats", .sig = "",
	  .doc = "frame, byte and drop counters of both directions",
	  .fn = (void (*)(void))net_m_stats },
};

/*
 * Snapshots: the host saves the queues; the device saves the MAC its guest
 * read (state 1.1: six bytes). A restore's config path is the snapshot's
 * manifest, so a derived MAC would differ from the one the guest's driver
 * holds, and a backend that checks source addresses would drop all it
 * sends: the saved one is given back, to the backend too. A MAC the
 * config names wins over the saved one (equal, unless a restore's --set
 * gave a clone a new one: `cubicle serve` does, and its agent moves the
 * guest's interface to it). A 1.0 blob (empty, from an older cubicle)
 * keeps the MAC the config gives.
 */
#define NET_STATE_MINOR 1

static int net_save(void *priv, void *buf, size_t cap, size_t *len)
{
	struct net *n = priv;

	*len = sizeof(n->mac);
	if (cap < sizeof(n->mac))
		return -ENOSPC;
	memcpy(buf, n->mac, sizeof(n->mac));
	return 0;
}

static int net_load(void *priv, const void *buf, size_t len, uint32_t minor)
{
	struct net *n = priv;
	char was[18], now[18];
	int err;

	if (minor == 0)
		return len ? n->h->fail(n->in, -EINVAL, "state 1.0 holds no data, this one %zu bytes", len)
			   : 0;
	if (len != sizeof(n->mac))
		return n->h->fail(n->in, -EINVAL, "state: %zu bytes, a MAC is 6", len);
	if (!memcmp(n->mac, buf, sizeof(n->mac)))
		return 0;
	mac_format(n->mac, was);
	mac_format(buf, now);
	if (n->mac_set) {
		n->h->log(n->in, CUB_LOG_INFO,
			  "MAC %s as the config says; the snapshot's guest had %s (frames it sends from that are not this device's)",
			  was, now);
		return 0;
	}
	if (n->be->ops->set_mac && (err = n->be->ops->set_mac(n->be->priv, buf)))
		return n->h->fail(n->in, err, "%s refused the guest's MAC %s from the snapshot: %s",
				  n->be->name, now, strerror(-err));
	memcpy(n->mac, buf, sizeof(n->mac));
	n->h->log(n->in, CUB_LOG_INFO, "the guest keeps its MAC %s from the snapshot (not %s)", now,
		  was);
	return 0;
}

static const struct cub_device_ops net_ops = {
	.create = net_create,
	.destroy = net_destroy,
	.state_version = CUB_STATE_VERSION(1, NET_STATE_MINOR),
	.save = net_save,
	.load = net_load,
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(6),
	.kind = CUB_KIND_DEVICE,
	.name = "virtio-net",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "virtio network device on a net backend (backend = { type = \"socket\"; ... })",
	.cfg_size = sizeof(struct net_cfg),
	.params = net_params,
	.n_params = CUB_ARRAY_SIZE(net_params),
	.methods = net_methods,
	.n_methods = CUB_ARRAY_SIZE(net_methods),
	.ops = &net_ops,
});
