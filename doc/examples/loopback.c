/* SPDX-License-Identifier: Apache-2.0 */
/* Example net backend "loopback": every frame the guest sends comes back to
 * it (with the MAC addresses swapped, so it looks like a reply), through a
 * socket pair. Built out of tree against the installed SDK; see
 * plugin-guide.md. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cubicle/net.h>

struct loop_cfg {
	int64_t mtu;
	bool swap_mac;
};

struct loop {
	struct cub_inst *in;
	const struct cub_host *h;
	int fd[2];                 /* send writes fd[0]; recv reads fd[1] */
	uint32_t mtu;
	bool swap_mac;
	uint8_t frame[CUB_NET_MAX_FRAME]; /* send's: one sender at a time */
	atomic_uint_fast64_t rx_packets, rx_bytes, tx_packets, tx_bytes, tx_dropped;
};

static void count(atomic_uint_fast64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* One thread at a time (virtio-net holds its transmit lock); never blocks. */
static int64_t loop_send(void *priv, const struct iovec *iov, int iovcnt)
{
	struct loop *l = priv;
	size_t len = 0;
	ssize_t n;

	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > sizeof(l->frame) - len) {
			count(&l->tx_dropped, 1);
			return -EMSGSIZE;
		}
		memcpy(l->frame + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	if (l->swap_mac && len >= 12) {
		uint8_t dst[6];

		memcpy(dst, l->frame, 6);
		memcpy(l->frame, l->frame + 6, 6);
		memcpy(l->frame + 6, dst, 6);
	}
	do
		n = send(l->fd[0], l->frame, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -EAGAIN; /* nothing sent: the device waits for tx_fd */
	if (n < 0) {
		count(&l->tx_dropped, 1);
		return -errno;
	}
	count(&l->tx_packets, 1);
	count(&l->tx_bytes, (uint64_t)n);
	return n;
}

/* One thread at a time; 0 when nothing waits, never blocks. */
static int64_t loop_recv(void *priv, const struct iovec *iov, int iovcnt)
{
	struct loop *l = priv;
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	ssize_t n;

	do
		n = recvmsg(l->fd[1], &m, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	if (m.msg_flags & MSG_TRUNC)
		return -EMSGSIZE; /* consumed and dropped */
	count(&l->rx_packets, 1);
	count(&l->rx_bytes, (uint64_t)n);
	return n;
}

static void loop_info(void *priv, struct cub_net_info *out)
{
	const struct loop *l = priv;

	/* Any thread, often: no locks, no system calls. */
	*out = (struct cub_net_info){
		.mtu = l->mtu,
		.link_up = true,
		.rx_fd = l->fd[1], /* EPOLLIN while a frame waits */
		.tx_fd = l->fd[0], /* EPOLLOUT once send may work again after -EAGAIN */
	};
}

static void loop_stats(void *priv, struct cub_net_stats *out)
{
	struct loop *l = priv;

	*out = (struct cub_net_stats){
		.rx_packets = atomic_load(&l->rx_packets),
		.rx_bytes = atomic_load(&l->rx_bytes),
		.tx_packets = atomic_load(&l->tx_packets),
		.tx_bytes = atomic_load(&l->tx_bytes),
		.tx_dropped = atomic_load(&l->tx_dropped),
	};
}

static void loop_close(void *priv)
{
	struct loop *l = priv;

	if (l->fd[0] >= 0)
		close(l->fd[0]);
	if (l->fd[1] >= 0)
		close(l->fd[1]);
	free(l);
}

static int loop_open(struct cub_inst *in, const struct cub_host *h, const void *cfgp, void **priv)
{
	const struct loop_cfg *cfg = cfgp;
	struct loop *l = calloc(1, sizeof(*l));

	if (!l)
		return h->fail(in, -ENOMEM, "out of memory");
	l->in = in;
	l->h = h;
	l->mtu = (uint32_t)cfg->mtu; /* 68..65535: checked by the host (min/max) */
	l->swap_mac = cfg->swap_mac;
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, l->fd) < 0) {
		int err = -errno;

		free(l);
		return h->fail(in, err, "socketpair: %s", strerror(-err));
	}
	*priv = l;
	return 0;
}

static const struct cub_param loop_params[] = {
	{ .name = "mtu", .type = CUB_P_INT, .offset = offsetof(struct loop_cfg, mtu),
	  .def = "1500", .min = "68", .max = "65535", .doc = "MTU the guest is told" },
	{ .name = "swap_mac", .type = CUB_P_BOOL, .offset = offsetof(struct loop_cfg, swap_mac),
	  .def = "true", .doc = "swap source and destination MAC of each frame" },
};

static const struct cub_net_ops loop_ops = {
	.open = loop_open,
	.close = loop_close,
	.info = loop_info,
	.send = loop_send,
	.recv = loop_recv,
	.stats = loop_stats,
	/* No vnet header: set_vnet_hdr and set_offloads stay NULL. */
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(4), /* min/max are ABI 1.4 */
	.kind = CUB_KIND_NET,
	.name = "loopback",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "example net backend: the guest's frames come back to it",
	.cfg_size = sizeof(struct loop_cfg),
	.params = loop_params,
	.n_params = CUB_ARRAY_SIZE(loop_params),
	.ops = &loop_ops,
});
