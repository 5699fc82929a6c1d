/* SPDX-License-Identifier: Apache-2.0 */
/* The virtio-console device plugin: one port (the guest's hvc0) to stdio, a file or a Unix socket. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cubicle/plugin.h>
#include <cubicle/virtio.h>

#include "hostcon.h"

/*
 * Single port, no VIRTIO_CONSOLE_F_MULTIPORT: queue 0 carries host input to
 * the guest, queue 1 guest output to the host. The console (stdio with the
 * Ctrl-A escape, file, socket, none) is hostcon's, as serial8250's is.
 * Output runs on the thread that kicked the transmit queue, at most
 * TX_MAX_PER_CHAIN bytes per buffer (segments may alias guest RAM over and
 * over; the rest is dropped with a warning). A console that
 * stops reading costs that thread one HOSTCON_OUT_WAIT_MS wait; then output
 * is dropped (rate-limited warning) until it reads again, so a guest spinning
 * on its transmit queue is never stuck. Host input waits in the console's
 * backlog until the guest posts receive buffers. VIRTIO_CONSOLE_F_EMERG_WRITE
 * is offered: a byte written to emerg_wr goes straight to the output.
 * A kick takes at most TX_BUDGET_CHAINS buffers or TX_BUDGET_BYTES; what is
 * left waits for the event loop's next round (kick_fd), so a guest that
 * keeps its transmit queue full never holds a thread for long.
 */

#define VIRTIO_ID_CONSOLE 3
#define VIRTIO_CONSOLE_F_EMERG_WRITE 2
#define QUEUE_MAX	256
#define Q_RX		0
#define Q_TX		1
#define CFG_EMERG_WR	8
#define CFG_SIZE	12 /* cols, rows, max_nr_ports, emerg_wr */
#define BACKLOG_LEN	(64u << 10)
#define TX_MAX_PER_CHAIN (64u << 10) /* hvc sends a page at most; more is cut */
#define TX_BUDGET_CHAINS 64          /* buffers per wake-up, then yield */
#define TX_BUDGET_BYTES	(1u << 20)   /* bytes per wake-up, then yield */

struct con_cfg {
	struct hostcon_cfg con;
};

struct con {
	struct cub_inst *in;
	const struct cub_host *h;
	struct hostcon *hc;   /* takes its own lock, inside ours */
	int kick_fd;          /* eventfd: transmit work left after a budget ran out */

	pthread_mutex_t lock; /* everything below: vCPUs and the event loop */
	struct cub_vq *rxq, *txq;
	struct cub_vq_chain chain;
};

/* ---- output ---- */

/* Guest output: chains on the transmit queue, up to the budget; the rest
 * on the event loop's next round. Lock held. */
static void tx_drain(struct con *c)
{
	const struct cub_virtio_host *v = c->h->virtio;
	unsigned done = 0;
	uint64_t bytes = 0;

	while (c->txq) {
		size_t budget = TX_MAX_PER_CHAIN;

		if (done >= TX_BUDGET_CHAINS || bytes >= TX_BUDGET_BYTES) {
			uint64_t one = 1;

			if (write(c->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
				c->h->log_ratelimited(c->in, CUB_LOG_ERR,
						      "cannot re-arm the transmit queue: %s",
						      strerror(errno));
			break;
		}
		if (v->pop(c->txq, &c->chain) != 1)
			break;
		bytes += c->chain.out_len < budget ? c->chain.out_len : budget;

		for (unsigned i = 0; i < c->chain.n_out && budget; i++) {
			size_t n = c->chain.out[i].iov_len < budget ? c->chain.out[i].iov_len : budget;

			hostcon_write(c->hc, c->chain.out[i].iov_base, n);
			budget -= n;
		}
		if (!budget && c->chain.out_len > TX_MAX_PER_CHAIN)
			c->h->log_ratelimited(c->in, CUB_LOG_WARN,
					      "output buffer of %llu bytes cut to %u",
					      (unsigned long long)c->chain.out_len, TX_MAX_PER_CHAIN);
		v->push(c->txq, &c->chain, 0);
		done++;
	}
	if (done)
		v->notify(c->txq);
}

/* kick_fd: transmit work was left for this round of the event loop. */
static void tx_rearmed(void *arg)
{
	struct con *c = arg;
	uint64_t n;

	if (read(c->kick_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&c->lock);
	tx_drain(c);
	pthread_mutex_unlock(&c->lock);
}

/* ---- input ---- */

/* Host input into receive buffers while both exist. Lock held. */
static void rx_deliver(struct con *c)
{
	const struct cub_virtio_host *v = c->h->virtio;
	unsigned done = 0;

	while (c->rxq && hostcon_pending(c->hc)) {
		uint32_t written = 0;

		if (v->pop(c->rxq, &c->chain) != 1)
			break;
		if (!c->chain.in_len) {
			v->broken(c->in, "receive buffer without device-writable space");
			break;
		}
		for (unsigned i = 0; i < c->chain.n_in; i++)
			written += (uint32_t)hostcon_read(c->hc, c->chain.in[i].iov_base,
							  c->chain.in[i].iov_len);
		v->push(c->rxq, &c->chain, written);
		done++;
	}
	if (done)
		v->notify(c->rxq);
}

/* Host input entered the console's backlog. Event loop, no lock held. */
static void con_input(void *arg)
{
	struct con *c = arg;

	pthread_mutex_lock(&c->lock);
	rx_deliver(c);
	pthread_mutex_unlock(&c->lock);
}

/* ---- virtio ops ---- */

static uint64_t con_features(void *priv)
{
	return 1ull << VIRTIO_CONSOLE_F_EMERG_WRITE;
}

static void con_config_read(void *priv, uint32_t off, void *buf, uint32_t len)
{
	/* cols, rows (no F_SIZE), max_nr_ports (no F_MULTIPORT), emerg_wr (write-only) */
	memset(buf, 0, len);
}

static void con_config_write(void *priv, uint32_t off, const void *buf, uint32_t len)
{
	struct con *c = priv;

	if (off != CFG_EMERG_WR || !len)
		return;
	pthread_mutex_lock(&c->lock);
	hostcon_write(c->hc, buf, 1); /* the low byte of emerg_wr */
	pthread_mutex_unlock(&c->lock);
}

static int con_start(void *priv, struct cub_vq *const *vqs, unsigned n)
{
	struct con *c = priv;

	pthread_mutex_lock(&c->lock);
	c->rxq = n > Q_RX ? vqs[Q_RX] : NULL;
	c->txq = n > Q_TX ? vqs[Q_TX] : NULL;
	rx_deliver(c);
	tx_drain(c);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static void con_notify(void *priv, unsigned q)
{
	struct con *c = priv;

	pthread_mutex_lock(&c->lock);
	if (q == Q_RX)
		rx_deliver(c);
	else if (q == Q_TX)
		tx_drain(c);
	pthread_mutex_unlock(&c->lock);
}

static void con_stop(void *priv)
{
	struct con *c = priv;

	pthread_mutex_lock(&c->lock);
	c->rxq = c->txq = NULL;
	hostcon_reset(c->hc, false); /* pending input stays for the next driver */
	pthread_mutex_unlock(&c->lock);
}

static const struct cub_virtio_ops con_vops = {
	.device_id = VIRTIO_ID_CONSOLE,
	.n_queues = 2,
	.queue_max = QUEUE_MAX,
	.config_size = CFG_SIZE,
	.features = con_features,
	.config_read = con_config_read,
	.config_write = con_config_write,
	.start = con_start,
	.notify = con_notify,
	.stop = con_stop,
};

/* ---- lifecycle ---- */

static void con_free(struct con *c)
{
	hostcon_close(c->hc);
	if (c->kick_fd >= 0) {
		c->h->fd_unwatch(c->in, c->kick_fd);
		close(c->kick_fd);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static int con_create(struct cub_inst *in, const struct cub_host *h, const void *cfgp,
		      void **priv)
{
	const struct con_cfg *cfg = cfgp;
	struct con *c;
	int err;

	err = hostcon_check(in, h, &cfg->con);
	if (err)
		return err;
	if (!CUB_HOST_HAS(h, virtio))
		return h->fail(in, -ENOTSUP, "this host offers no virtio services");
	c = calloc(1, sizeof(*c));
	if (!c)
		return h->fail(in, -ENOMEM, "out of memory");
	c->in = in;
	c->h = h;
	pthread_mutex_init(&c->lock, NULL);
	c->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	err = c->kick_fd < 0 ? -errno : h->fd_watch(in, c->kick_fd, EPOLLIN, tx_rearmed, c);
	if (err) {
		err = h->fail(in, err, "cannot make the transmit re-arm eventfd: %s",
			      strerror(-err));
		con_free(c);
		return err;
	}
	err = hostcon_open(&c->hc, in, h, &cfg->con, BACKLOG_LEN, con_input, c);
	if (!err)
		err = h->virtio->add(in, &con_vops, c);
	if (err) {
		con_free(c);
		return err;
	}
	*priv = c;
	return 0;
}

static void con_destroy(void *priv)
{
	con_free(priv);
}

static const struct cub_param con_params[] = {
	HOSTCON_PARAMS(struct con_cfg, con, "hvc0"),
};

/* Snapshots: no state of its own; the host saves its queues. */
static const struct cub_device_ops con_ops = {
	.create = con_create,
	.destroy = con_destroy,
	.state_version = CUB_STATE_VERSION(1, 0),
	.save = cub_state_none_save,
	.load = cub_state_none_load,
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(5),
	.kind = CUB_KIND_DEVICE,
	.name = "virtio-console",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "virtio console (hvc0) on stdio, a file or a Unix socket",
	.cfg_size = sizeof(struct con_cfg),
	.params = con_params,
	.n_params = CUB_ARRAY_SIZE(con_params),
	.ops = &con_ops,
});
