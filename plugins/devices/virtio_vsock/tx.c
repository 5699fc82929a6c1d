/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-vsock's transmit queue: the guest's packets, checked, to the host's sockets. */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "vsock.h"

/* A RW packet's payload for the host end. */
static void guest_data(struct vsock *s, struct conn *c, const struct cub_vq_chain *ch,
		       uint32_t len)
{
	uint32_t off = 0;

	if (c->st != C_OPEN || (c->guest_shut & VIRTIO_VSOCK_SHUTDOWN_SEND) || c->wr_shut) {
		s->h->log_ratelimited(s->in, CUB_LOG_WARN, "port %u: data after shutdown; reset",
				      c->local_port);
		conn_kill(s, c, true);
		return;
	}
	/* Bytes still waiting go first, and may go now: the host end may have
	 * taken some since, and the event loop need not be the one to tell. */
	if (c->len) {
		conn_flush(s, c);
		if (c->dead)
			return;
	}
	if (len > s->buf_size - c->len) {
		s->h->log_ratelimited(s->in, CUB_LOG_WARN,
				      "port %u: the guest sent %u bytes past its credit; reset",
				      c->local_port, len - (s->buf_size - c->len));
		conn_kill(s, c, true);
		return;
	}
	c->rx_cnt += len;
	s->st_tx_bytes += len;
	if (!c->len) {
		unsigned k = iov_slice(ch->out, ch->n_out, HDR_LEN, len, s->tiov);
		ssize_t n = send_iov(c->fd, s->tiov, k);

		if (n < 0 && errno != EAGAIN) {
			s->h->log(s->in, CUB_LOG_DEBUG, "port %u: host end: %s; reset",
				  c->local_port, strerror(errno));
			conn_kill(s, c, true);
			return;
		}
		off = n > 0 ? (uint32_t)n : 0;
		c->fwd_cnt += off;
	}
	if (off < len) {
		uint32_t tail, k;

		if (!c->buf && !(c->buf = malloc(s->buf_size))) {
			s->h->log_ratelimited(s->in, CUB_LOG_ERR, "out of memory; connection reset");
			conn_kill(s, c, true);
			return;
		}
		while (off < len) {
			tail = (c->head + c->len) % s->buf_size;
			k = s->buf_size - tail < len - off ? s->buf_size - tail : len - off;
			iov_to_buf(ch->out, (int)ch->n_out, HDR_LEN + off, c->buf + tail, k);
			c->len += k;
			off += k;
		}
	}
	credit_check(s, c);
}

/* A guest REQUEST to port @port of the host: connect to <uds_path>_<port>. */
static void guest_connect(struct vsock *s, uint32_t port, uint32_t gport, uint32_t buf_alloc,
			  uint32_t fwd_cnt)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct conn *c;
	int fd;

	if (s->n_conns >= s->max_conns) {
		s->h->log_ratelimited(s->in, CUB_LOG_WARN,
				      "%u connections already: the guest's to port %u reset",
				      s->n_conns, port);
		rst_queue(s, port, gport);
		return;
	}
	snprintf(a.sun_path, sizeof(a.sun_path), "%s_%u", s->path, port);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* A Unix connect never waits: it succeeds, or fails (EAGAIN: backlog full). */
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		s->h->log_ratelimited(s->in, CUB_LOG_DEBUG, "guest connect to %s: %s; reset",
				      a.sun_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		rst_queue(s, port, gport);
		return;
	}
	c = conn_new(s, fd, port, gport);
	if (!c) {
		close(fd);
		rst_queue(s, port, gport);
		return;
	}
	conn_hash_add(s, c);
	c->guest_knows = true;
	c->st = C_OPEN;
	c->peer_buf_alloc = buf_alloc;
	c->peer_fwd_cnt = fwd_cnt;
	conn_ready(s, c, P_RESPONSE);
	conn_interest(s, c);
}

static void guest_shutdown(struct vsock *s, struct conn *c, uint32_t flags)
{
	c->guest_shut |= flags & (VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND);
	if (c->guest_shut & VIRTIO_VSOCK_SHUTDOWN_RCV)
		c->pend &= ~(unsigned)P_DATA;
	if (c->guest_shut == (VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND)) {
		c->st = C_CLOSING;
		c->deadline_us = s->h->clock_us(s->in) + CLOSE_MS * 1000ull;
		timer_need(s);
	}
	close_check(s, c);
}

static void tx_one(struct vsock *s, const struct cub_vq_chain *ch)
{
	struct virtio_vsock_hdr hd;
	uint64_t src_cid, dst_cid;
	uint32_t sport, dport, len, bad = 0;
	uint16_t op, type;
	struct conn *c;
	bool stalled;

	if (ch->n_in || ch->out_len < HDR_LEN) {
		s->st_bad++;
		s->h->log_ratelimited(s->in, CUB_LOG_WARN,
				      "a transmit buffer of %llu bytes (%u writable segments) dropped",
				      (unsigned long long)ch->out_len, ch->n_in);
		return;
	}
	iov_to_buf(ch->out, (int)ch->n_out, 0, &hd, HDR_LEN); /* a copy: the guest may change it */
	src_cid = le64toh(hd.src_cid);
	dst_cid = le64toh(hd.dst_cid);
	sport = le32toh(hd.src_port);
	dport = le32toh(hd.dst_port);
	len = le32toh(hd.len);
	op = le16toh(hd.op);
	type = le16toh(hd.type);
	s->st_tx_pkts++;
	if (type != VIRTIO_VSOCK_TYPE_STREAM)
		bad = 1;
	else if (src_cid != s->cid || dst_cid != HOST_CID)
		bad = 2;
	else if (len > PKT_MAX || len != ch->out_len - HDR_LEN || (op != VIRTIO_VSOCK_OP_RW && len))
		bad = 3;
	else if (op < VIRTIO_VSOCK_OP_REQUEST || op > VIRTIO_VSOCK_OP_CREDIT_REQUEST)
		bad = 4;
	c = conn_find(s, dport, sport);
	if (bad) {
		static const char *const why[] = { "", "not a stream", "wrong address",
						   "bad length", "unknown op" };

		s->st_bad++;
		s->h->log_ratelimited(s->in, CUB_LOG_WARN,
				      "malformed packet (%s: op %u type %u cid %llu->%llu len %u of %llu) from port %u to %u; reset",
				      why[bad], op, type, (unsigned long long)src_cid,
				      (unsigned long long)dst_cid, len,
				      (unsigned long long)(ch->out_len - HDR_LEN), sport, dport);
		if (op == VIRTIO_VSOCK_OP_RST)
			return; /* never answer an RST */
		if (c)
			conn_kill(s, c, true);
		else
			rst_queue(s, dport, sport);
		return;
	}
	if (op == VIRTIO_VSOCK_OP_RST) {
		if (c)
			conn_kill(s, c, false);
		return;
	}
	if (op == VIRTIO_VSOCK_OP_REQUEST) {
		if (c) {
			conn_kill(s, c, true); /* a second REQUEST on a live pair */
			return;
		}
		guest_connect(s, dport, sport, le32toh(hd.buf_alloc), le32toh(hd.fwd_cnt));
		return;
	}
	if (!c || c->st == C_HANDSHAKE) {
		rst_queue(s, dport, sport);
		return;
	}
	c->guest_knows = true;
	stalled = !conn_peer_free(c);
	c->peer_buf_alloc = le32toh(hd.buf_alloc);
	c->peer_fwd_cnt = le32toh(hd.fwd_cnt);
	if (conn_peer_free(c)) {
		c->stalled = false;
		/* Credit again after none: the host socket most likely has
		 * data waiting; read it now rather than after an epoll round. */
		if (stalled && c->st == C_OPEN && !c->host_eof &&
		    !(c->guest_shut & VIRTIO_VSOCK_SHUTDOWN_RCV))
			conn_ready(s, c, P_DATA);
	}
	switch (op) {
	case VIRTIO_VSOCK_OP_RESPONSE:
		if (c->st != C_CONNECTING) {
			conn_kill(s, c, true);
			return;
		}
		hs_done(s, c);
		break;
	case VIRTIO_VSOCK_OP_RW:
		guest_data(s, c, ch, len);
		break;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		guest_shutdown(s, c, le32toh(hd.flags));
		break;
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		conn_ready(s, c, P_CREDIT_UPDATE);
		break;
	default: /* CREDIT_UPDATE: the credit is taken above */
		break;
	}
	if (!c->dead)
		conn_interest(s, c);
}

void vsock_tx(struct vsock *s)
{
	struct cub_vq *q = s->vq[Q_TX];
	unsigned done = 0;

	if (!s->running || !q)
		return;
	while (done < TX_BUDGET) {
		int ret;

		if (s->rst_n >= RST_RING / 2) {
			s->tx_blocked = true; /* on once the guest takes the RSTs */
			break;
		}
		if (s->rl && !vsock_rl_take(s, 1))
			break; /* the rest waits in the ring for the limiter's timer */
		ret = s->v->pop(q, s->tchain);
		if (ret != 1) {
			vsock_rl_charge(s, -1, -1);
			break;
		}
		vsock_rl_charge(s, s->tchain->out_len > HDR_LEN ? (int64_t)(s->tchain->out_len - HDR_LEN) - 1 : -1, 0);
		tx_one(s, s->tchain);
		s->v->push(q, s->tchain, 0);
		done++;
	}
	if (done)
		s->v->notify(q);
	if (done == TX_BUDGET)
		vsock_kick(s);
}
