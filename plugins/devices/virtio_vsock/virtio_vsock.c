/* SPDX-License-Identifier: Apache-2.0 */
/* The virtio-vsock device plugin in user space, with Firecracker's hybrid host side:
 * here setup, virtio ops, snapshots, the listening socket and the CONNECT handshake;
 * conn.c has the data path. */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include "vsock.h"

/*
 * One Unix socket per VM at uds_path (Firecracker's hybrid vsock):
 *  host -> guest  a client connects to uds_path and writes "CONNECT <port>\n"
 *                 (at most LINE_MAX_LEN bytes, within HANDSHAKE_MS); the
 *                 device sends the guest a REQUEST to that port and, on its
 *                 RESPONSE, writes "OK <hostport>\n" (the local port of the
 *                 connection on CID 2); from then on the stream is raw bytes.
 *                 A guest RST, or no answer within CONNECT_MS, closes the
 *                 client's socket.
 *  guest -> host  a guest connecting to CID 2 port P reaches a listener at
 *                 "<uds_path>_<P>"; none: an RST.
 * Every fd (the listener, each connection, a timer, a kick eventfd) sits in
 * an epoll set of the device's own that the event loop watches once: no
 * thread per connection, and nothing blocks (sockets are non-blocking, a
 * Unix connect never waits). The vCPU threads only run the transmit queue's
 * packets (bounded per kick), the event loop the rest.
 */

static uint64_t now_us(struct vsock *s)
{
	return s->h->clock_us(s->in);
}

bool vsock_rl_take(struct vsock *s, uint64_t bytes)
{
	uint64_t w;
	struct itimerspec t = { 0 };

	if (s->v->rl_take(s->rl, bytes, 1, &w))
		return true;
	t.it_value.tv_sec = (time_t)(w / 1000000);
	t.it_value.tv_nsec = (long)(w % 1000000) * 1000;
	timerfd_settime(s->rfd, 0, &t, NULL);
	return false;
}

void vsock_rl_charge(struct vsock *s, int64_t bytes, int64_t ops)
{
	if (s->rl && (bytes || ops))
		s->v->rl_charge(s->rl, bytes, ops);
}

void vsock_kick(struct vsock *s)
{
	uint64_t one = 1;

	if (write(s->kfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		s->h->log_ratelimited(s->in, CUB_LOG_ERR, "kick: %s", strerror(errno));
}

void timer_need(struct vsock *s)
{
	struct itimerspec t = { .it_interval = { 0, TICK_MS * 1000000L },
				.it_value = { 0, TICK_MS * 1000000L } };

	if (s->timer_on)
		return;
	if (!timerfd_settime(s->tfd, 0, &t, NULL))
		s->timer_on = true;
}

static void listen_set(struct vsock *s, bool on)
{
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = &s->ltag };

	if (on == !s->listen_paused)
		return;
	if (epoll_ctl(s->efd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, s->lfd, &e) < 0 &&
	    errno != EEXIST && errno != ENOENT) {
		s->h->log_ratelimited(s->in, CUB_LOG_ERR, "epoll_ctl on the listener: %s",
				      strerror(errno));
		return;
	}
	s->listen_paused = !on;
}

void vsock_listen_resume(struct vsock *s)
{
	if (s->n_conns < s->max_conns && !s->accept_retry_us)
		listen_set(s, true);
}

/* Deadlines: handshakes, answers, closes, a paused accept. */
static void tick(struct vsock *s)
{
	uint64_t now = now_us(s);
	bool more = false;

	for (struct conn *c = s->all, *n; c; c = n) {
		n = c->next;
		if (!c->deadline_us)
			continue;
		if (now < c->deadline_us) {
			more = true;
			continue;
		}
		if (c->st == C_HANDSHAKE)
			s->h->log_ratelimited(s->in, CUB_LOG_INFO,
					      "a host client sent no CONNECT line in %d ms; closed",
					      HANDSHAKE_MS);
		else if (c->st == C_CONNECTING)
			s->h->log_ratelimited(s->in, CUB_LOG_INFO,
					      "the guest did not answer a connection to port %u in %d ms; closed",
					      c->peer_port, CONNECT_MS);
		conn_kill(s, c, true);
	}
	if (s->accept_retry_us) {
		if (now >= s->accept_retry_us) {
			s->accept_retry_us = 0;
			vsock_listen_resume(s);
		} else
			more = true;
	}
	if (!more) {
		struct itimerspec off = { { 0, 0 }, { 0, 0 } };

		timerfd_settime(s->tfd, 0, &off, NULL);
		s->timer_on = false;
	}
}

/* ---- host clients: accept, the CONNECT line, OK ---- */

static void accept_some(struct vsock *s)
{
	for (int i = 0; i < 16; i++) {
		struct conn *c;
		int fd;

		if (s->n_conns >= s->max_conns) {
			s->h->log_ratelimited(s->in, CUB_LOG_WARN,
					      "%u connections: host clients wait", s->n_conns);
			listen_set(s, false);
			return;
		}
		fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return;
			/* EMFILE and the like: the client stays queued; retry later. */
			s->h->log_ratelimited(s->in, CUB_LOG_WARN, "accept: %s", strerror(errno));
			listen_set(s, false);
			s->accept_retry_us = now_us(s) + 1000000;
			timer_need(s);
			return;
		}
		c = conn_new(s, fd, 0, 0);
		if (!c) {
			close(fd);
			return;
		}
		c->from_host = true;
		c->st = C_HANDSHAKE;
		c->deadline_us = now_us(s) + HANDSHAKE_MS * 1000ull;
		timer_need(s);
		conn_interest(s, c);
	}
}

/* "CONNECT <port>\n" (or "\r\n"): 0 and the port, or -EINVAL. */
static int parse_connect(const char *l, unsigned n, uint32_t *port)
{
	uint64_t v = 0;
	unsigned i = 8, d = 0;

	if (n < 10 || memcmp(l, "CONNECT ", 8))
		return -EINVAL;
	for (; i < n && l[i] >= '0' && l[i] <= '9' && d < 10; i++, d++)
		v = v * 10 + (uint64_t)(l[i] - '0');
	if (!d || v > UINT32_MAX)
		return -EINVAL;
	if (i < n && l[i] == '\r')
		i++;
	if (i + 1 != n || l[i] != '\n')
		return -EINVAL;
	*port = (uint32_t)v;
	return 0;
}

void hs_read(struct vsock *s, struct conn *c)
{
	char peek[LINE_MAX_LEN];
	size_t room = LINE_MAX_LEN - c->line_len, take;
	char *nl;
	uint32_t port;
	ssize_t n;

	/* Peek, then take only up to the newline: what follows is the stream's. */
	n = recv(c->fd, peek, room, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_kill(s, c, false);
		return;
	}
	nl = memchr(peek, '\n', (size_t)n);
	take = nl ? (size_t)(nl - peek) + 1 : (size_t)n;
	if (recv(c->fd, c->line + c->line_len, take, MSG_DONTWAIT) != (ssize_t)take) {
		conn_kill(s, c, false);
		return;
	}
	c->line_len += (unsigned)take;
	if (!nl) {
		if (c->line_len == LINE_MAX_LEN) {
			s->h->log_ratelimited(s->in, CUB_LOG_WARN,
					      "a host client sent %d bytes without a CONNECT line; closed",
					      LINE_MAX_LEN);
			conn_kill(s, c, false);
		}
		return;
	}
	if (parse_connect(c->line, c->line_len, &port)) {
		s->h->log_ratelimited(s->in, CUB_LOG_WARN,
				      "a host client sent \"%.*s\", not \"CONNECT <port>\"; closed",
				      (int)(c->line_len - 1), c->line);
		conn_kill(s, c, false);
		return;
	}
	do {
		c->local_port = s->next_port++;
		if (s->next_port < HOST_PORT_FIRST)
			s->next_port = HOST_PORT_FIRST;
	} while (conn_find(s, c->local_port, port));
	c->peer_port = port;
	conn_hash_add(s, c);
	c->st = C_CONNECTING;
	c->deadline_us = now_us(s) + CONNECT_MS * 1000ull;
	conn_ready(s, c, P_REQUEST);
	conn_interest(s, c);
}

void hs_done(struct vsock *s, struct conn *c)
{
	char ok[32];
	int k = snprintf(ok, sizeof(ok), "OK %u\n", c->local_port);

	c->st = C_OPEN;
	c->deadline_us = 0;
	/* A fresh socket takes these few bytes at once. */
	if (send(c->fd, ok, (size_t)k, MSG_NOSIGNAL | MSG_DONTWAIT) != k) {
		conn_kill(s, c, true);
		return;
	}
	conn_interest(s, c);
}

/* ---- the event loop ---- */

static void vsock_event(void *arg)
{
	struct vsock *s = arg;
	struct epoll_event ev[64];
	bool kick = false;
	int n;

	pthread_mutex_lock(&s->lock);
	n = epoll_wait(s->efd, ev, 64, 0);
	for (int i = 0; i < n; i++) {
		int tag = *(int *)ev[i].data.ptr;
		uint64_t v;

		switch (tag) {
		case T_LISTEN:
			accept_some(s);
			break;
		case T_TIMER:
			if (read(s->tfd, &v, sizeof(v)) == sizeof(v))
				tick(s);
			break;
		case T_RL:
			if (read(s->rfd, &v, sizeof(v)) == sizeof(v)) {
				s->rl_blocked = false;
				kick = true;
			}
			break;
		case T_KICK:
			kick = read(s->kfd, &v, sizeof(v)) == sizeof(v) || kick;
			break;
		default:
			conn_event(s, ev[i].data.ptr, ev[i].events);
			break;
		}
	}
	if (kick)
		vsock_tx(s);
	vsock_rx(s);
	conn_reap(s);
	pthread_mutex_unlock(&s->lock);
}

/* ---- virtio ops ---- */

/* Stream sockets only (no VIRTIO_VSOCK_F_SEQPACKET); the transport adds VERSION_1. */
static uint64_t vsock_features(void *priv)
{
	(void)priv;
	return 0;
}

static void vsock_config_read(void *priv, uint32_t off, void *buf, uint32_t len)
{
	struct vsock *s = priv;
	uint64_t cid = htole64(s->cid);

	if (off >= sizeof(cid) || len > sizeof(cid) - off) { /* the host checked */
		memset(buf, 0, len);
		return;
	}
	memcpy(buf, (uint8_t *)&cid + off, len);
}

static int vsock_start(void *priv, struct cub_vq *const *vqs, unsigned n)
{
	struct vsock *s = priv;

	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < 3; i++)
		s->vq[i] = i < n ? vqs[i] : NULL;
	s->running = true;
	s->n_held = 0;
	vsock_event_q(s);
	vsock_tx(s);
	vsock_rx(s);
	conn_reap(s);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void vsock_notify(void *priv, unsigned q)
{
	struct vsock *s = priv;

	pthread_mutex_lock(&s->lock);
	if (q == Q_TX)
		vsock_tx(s);
	else if (q == Q_EVENT)
		vsock_event_q(s);
	vsock_rx(s); /* new receive buffers, or answers to what the guest sent */
	conn_reap(s);
	pthread_mutex_unlock(&s->lock);
}

static void vsock_stop(void *priv)
{
	struct vsock *s = priv;

	pthread_mutex_lock(&s->lock);
	s->running = false;
	s->n_held = 0;
	for (unsigned i = 0; i < 3; i++)
		s->vq[i] = NULL;
	conn_kill_all(s); /* the driver reset: its sockets are gone */
	conn_reap(s);
	pthread_mutex_unlock(&s->lock);
}

static const struct cub_virtio_ops vsock_vops = {
	.device_id = VIRTIO_ID_VSOCK_DEV,
	.n_queues = 3,
	.queue_max = QUEUE_MAX,
	.config_size = sizeof(struct virtio_vsock_config),
	.features = vsock_features,
	.config_read = vsock_config_read,
	.start = vsock_start,
	.notify = vsock_notify,
	.stop = vsock_stop,
};

/* ---- control ---- */

static int vsock_m_stats(void *priv, struct cub_reply *rep)
{
	struct vsock *s = priv;
	uint64_t held = 0;
	int k;

	pthread_mutex_lock(&s->lock);
	for (struct conn *c = s->all; c; c = c->next)
		held += c->len;
	k = snprintf(rep->text, sizeof(rep->text),
		     "connections %u connections_total %llu buffered %llu guest_packets %llu guest_bytes %llu "
		     "host_packets %llu host_bytes %llu resets %llu resets_dropped %llu malformed %llu",
		     s->n_conns, (unsigned long long)s->st_conns, (unsigned long long)held,
		     (unsigned long long)s->st_tx_pkts, (unsigned long long)s->st_tx_bytes,
		     (unsigned long long)s->st_rx_pkts, (unsigned long long)s->st_rx_bytes,
		     (unsigned long long)s->st_rst, (unsigned long long)s->st_rst_dropped,
		     (unsigned long long)s->st_bad);
	pthread_mutex_unlock(&s->lock);
	rep->len = k < 0 ? 0 : (size_t)k < sizeof(rep->text) ? (size_t)k : sizeof(rep->text) - 1;
	return 0;
}

/* ---- snapshots ---- */

/*
 * Connections are not carried over: their other ends (host sockets, the
 * guest's in-flight packets) are not in the snapshot. The blob is the
 * guest's CID (le64). A load drops every host connection and owes the
 * guest a TRANSPORT_RESET event, sent when the queues start again: the
 * driver then resets its sockets (no silent hangs) and reads the CID
 * again (the config's, which --set may have changed).
 */
#define STATE_LEN 8

static int vsock_save(void *priv, void *buf, size_t cap, size_t *len)
{
	struct vsock *s = priv;
	uint64_t cid = htole64(s->cid);

	*len = STATE_LEN;
	if (cap < STATE_LEN)
		return -ENOSPC;
	memcpy(buf, &cid, STATE_LEN);
	return 0;
}

static int vsock_load(void *priv, const void *buf, size_t len, uint32_t minor)
{
	struct vsock *s = priv;
	uint64_t cid;

	(void)minor;
	if (len < STATE_LEN)
		return s->h->fail(s->in, -EINVAL, "vsock state: %zu bytes; expected %d", len,
				  STATE_LEN);
	memcpy(&cid, buf, STATE_LEN);
	cid = le64toh(cid);
	if (cid < 3 || cid >= UINT32_MAX)
		return s->h->fail(s->in, -EINVAL, "vsock state: guest_cid %llu out of range",
				  (unsigned long long)cid);
	pthread_mutex_lock(&s->lock);
	if (cid != s->cid)
		s->h->log(s->in, CUB_LOG_INFO, "guest_cid %llu in the snapshot, %llu now",
			  (unsigned long long)cid, (unsigned long long)s->cid);
	conn_kill_all(s);
	conn_reap(s);
	s->reset_pending = true;
	s->n_held = 0;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* ---- lifecycle ---- */

/* Listen at uds_path: a socket file nobody answers on is stale and
 * replaced; anything else there is an error. */
static int listen_at(struct vsock *s)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, err;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", s->path);
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->lfd < 0)
		return s->h->fail(s->in, -errno, "socket: %s", strerror(errno));
	if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		if (errno != EADDRINUSE)
			return s->h->fail(s->in, -errno, "uds_path %s: %s", s->path, strerror(errno));
		if (lstat(s->path, &st) < 0 || !S_ISSOCK(st.st_mode))
			return s->h->fail(s->in, -EEXIST, "uds_path %s exists and is not a socket",
					  s->path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		err = fd < 0 ? errno : connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		if (err != ECONNREFUSED)
			return s->h->fail(s->in, -EADDRINUSE,
					  "uds_path %s: something listens there already (another VM?)",
					  s->path);
		if (unlink(s->path) < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0)
			return s->h->fail(s->in, -errno, "uds_path %s: %s", s->path,
					  strerror(errno));
	}
	if (lstat(s->path, &st) == 0) {
		s->l_dev = st.st_dev;
		s->l_ino = st.st_ino;
		s->bound = true;
	}
	if (listen(s->lfd, 128) < 0)
		return s->h->fail(s->in, -errno, "listen on %s: %s", s->path, strerror(errno));
	return 0;
}

static void vsock_free(struct vsock *s)
{
	struct stat st;

	conn_kill_all(s);
	conn_reap(s);
	if (s->lfd >= 0)
		close(s->lfd);
	/* Remove the socket file if it is still ours. */
	if (s->bound && lstat(s->path, &st) == 0 && st.st_dev == s->l_dev &&
	    st.st_ino == s->l_ino)
		unlink(s->path);
	if (s->efd >= 0)
		close(s->efd);
	if (s->tfd >= 0)
		close(s->tfd);
	if (s->rfd >= 0)
		close(s->rfd);
	if (s->kfd >= 0)
		close(s->kfd);
	pthread_mutex_destroy(&s->lock);
	for (unsigned i = 0; i < RX_GATHER; i++)
		free(s->rch[i]);
	free(s->tchain);
	free(s);
}

static int add_fd(struct vsock *s, int fd, int *tag)
{
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = tag };

	if (epoll_ctl(s->efd, EPOLL_CTL_ADD, fd, &e) < 0)
		return s->h->fail(s->in, -errno, "epoll_ctl: %s", strerror(errno));
	return 0;
}

static int vsock_setup(struct vsock *s)
{
	int err;

	s->efd = epoll_create1(EPOLL_CLOEXEC);
	if (s->efd < 0)
		return s->h->fail(s->in, -errno, "epoll_create1: %s", strerror(errno));
	s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	s->kfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->tfd < 0 || s->kfd < 0)
		return s->h->fail(s->in, -errno, "timerfd/eventfd: %s", strerror(errno));
	err = listen_at(s);
	err = err ?: add_fd(s, s->tfd, &s->ttag);
	err = err ?: add_fd(s, s->kfd, &s->ktag);
	err = err ?: add_fd(s, s->lfd, &s->ltag);
	if (!err && s->rl) {
		s->rfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		err = s->rfd < 0 ? s->h->fail(s->in, -errno, "timerfd: %s", strerror(errno))
				 : add_fd(s, s->rfd, &s->rtag);
	}
	if (err)
		return err;
	err = s->h->fd_watch(s->in, s->efd, EPOLLIN, vsock_event, s);
	if (err)
		return s->h->fail(s->in, err, "cannot watch the sockets: %s", strerror(-err));
	return s->h->virtio->add(s->in, &vsock_vops, s);
}

static int vsock_create(struct cub_inst *in, const struct cub_host *h, const void *cfgp,
			void **priv)
{
	const struct vsock_cfg *cfg = cfgp;
	struct sockaddr_un a;
	struct vsock *s;
	int err;

	if (!cfg->uds_path || !*cfg->uds_path)
		return h->fail(in, -EINVAL, "uds_path is empty");
	/* Room for "<uds_path>_4294967295" too. */
	if (strlen(cfg->uds_path) + 12 > sizeof(a.sun_path))
		return h->fail(in, -ENAMETOOLONG,
			       "uds_path %s: %zu bytes; at most %zu (a socket name, with _<port> appended)",
			       cfg->uds_path, strlen(cfg->uds_path), sizeof(a.sun_path) - 12);
	if (!CUB_HOST_HAS(h, virtio))
		return h->fail(in, -ENOTSUP, "this host offers no virtio services");
	s = calloc(1, sizeof(*s));
	if (!s)
		return h->fail(in, -ENOMEM, "out of memory");
	s->in = in;
	s->h = h;
	s->v = h->virtio;
	s->cid = cfg->guest_cid;
	s->path = cfg->uds_path;
	s->max_conns = (uint32_t)cfg->max_conns;
	s->buf_size = (uint32_t)cfg->buf_size;
	s->next_port = HOST_PORT_FIRST;
	s->efd = s->lfd = s->tfd = s->kfd = s->rfd = -1;
	s->rl = CUB_VIRTIO_HAS_RL(h->virtio) ? cfg->rl : NULL;
	s->rtag = T_RL;
	s->ltag = T_LISTEN;
	s->ttag = T_TIMER;
	s->ktag = T_KICK;
	pthread_mutex_init(&s->lock, NULL);
	s->tchain = malloc(sizeof(*s->tchain));
	err = s->tchain ? 0 : -ENOMEM;
	for (unsigned i = 0; i < RX_GATHER; i++)
		if (!(s->rch[i] = malloc(sizeof(*s->rch[i]))))
			err = -ENOMEM;
	if (err) {
		vsock_free(s);
		return h->fail(in, -ENOMEM, "out of memory");
	}
	err = vsock_setup(s);
	if (err) {
		vsock_free(s);
		return err;
	}
	h->log(in, CUB_LOG_DEBUG, "guest_cid %llu, listening at %s",
	       (unsigned long long)s->cid, s->path);
	*priv = s;
	return 0;
}

static void vsock_destroy(void *priv)
{
	vsock_free(priv);
}

static const struct cub_param vsock_params[] = {
	{ .name = "guest_cid", .type = CUB_P_U64, .offset = offsetof(struct vsock_cfg, guest_cid),
	  .def = NULL, .min = "3", .max = "4294967294",
	  .doc = "the guest's context ID (the host is 2)" },
	{ .name = "uds_path", .type = CUB_P_PATH, .offset = offsetof(struct vsock_cfg, uds_path),
	  .def = NULL,
	  .doc = "Unix socket for host clients (CONNECT <port>); guest connections reach <uds_path>_<port>" },
	{ .name = "max_connections", .type = CUB_P_U64,
	  .offset = offsetof(struct vsock_cfg, max_conns), .def = "1024", .min = "1",
	  .max = "65536", .doc = "connections at once (host clients and guest-initiated)" },
	{ .name = "buffer_size", .type = CUB_P_SIZE, .offset = offsetof(struct vsock_cfg, buf_size),
	  .def = "256K", .min = "4K", .max = "16M",
	  .doc = "per connection: bytes from the guest the host end has not taken yet (the credit it gets)" },
	{ .name = "rate_limiter", .type = CUB_P_RATELIMIT, .offset = offsetof(struct vsock_cfg, rl),
	  .def = "", .doc = "Firecracker-style limiter: bandwidth (data bytes both ways), ops (packets)" },
};

static const struct cub_method vsock_methods[] = {
	{ .name = "stats", .sig = "", .doc = "connections, packets, bytes and resets",
	  .fn = (void (*)(void))vsock_m_stats },
};

static const struct cub_device_ops vsock_ops = {
	.create = vsock_create,
	.destroy = vsock_destroy,
	.state_version = CUB_STATE_VERSION(1, 0),
	.save = vsock_save,
	.load = vsock_load,
};

/* Once the VM runs: a guest's connection to a host port is a Unix socket
 * connected to <uds_path>_<port>. */
static const struct cub_syscall vsock_syscalls[] = {
	CUB_SYSCALL_ARG("socket", 0, 0xffffffffu, AF_UNIX),
	CUB_SYSCALL("connect"),
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(6),
	.kind = CUB_KIND_DEVICE,
	.name = "virtio-vsock",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "virtio socket device; host side on a Unix socket (Firecracker's hybrid vsock)",
	.cfg_size = sizeof(struct vsock_cfg),
	.params = vsock_params,
	.n_params = CUB_ARRAY_SIZE(vsock_params),
	.methods = vsock_methods,
	.n_methods = CUB_ARRAY_SIZE(vsock_methods),
	.ops = &vsock_ops,
	.syscalls = vsock_syscalls,
	.n_syscalls = CUB_ARRAY_SIZE(vsock_syscalls),
});
