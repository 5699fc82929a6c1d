/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-vsock's receive and event queues: packets to the guest, read straight from the host's sockets. */
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

static void put_hdr(struct vsock *s, struct virtio_vsock_hdr *hd, uint32_t sport, uint32_t dport,
		    uint16_t op)
{
	memset(hd, 0, sizeof(*hd));
	hd->src_cid = htole64(HOST_CID);
	hd->dst_cid = htole64(s->cid);
	hd->src_port = htole32(sport);
	hd->dst_port = htole32(dport);
	hd->type = htole16(VIRTIO_VSOCK_TYPE_STREAM);
	hd->op = htole16(op);
	hd->buf_alloc = htole32(s->buf_size);
}

/* A packet's header into chain @ch. */
static void put_pkt(struct vsock *s, struct conn *c, const struct cub_vq_chain *ch, uint16_t op,
		    uint32_t len, uint32_t flags)
{
	struct virtio_vsock_hdr hd;

	put_hdr(s, &hd, c->local_port, c->peer_port, op);
	hd.len = htole32(len);
	hd.flags = htole32(flags);
	hd.fwd_cnt = htole32(c->fwd_cnt);
	c->fwd_sent = c->fwd_cnt;
	c->guest_knows = true;
	iov_from_buf(ch->in, (int)ch->n_in, 0, &hd, HDR_LEN);
}

/* Hold @want receive chains (at most RX_GATHER) if the guest has them: how
 * many are held, or -EIO. */
static int rx_hold(struct vsock *s, unsigned want)
{
	while (s->n_held < want && s->n_held < RX_GATHER) {
		struct cub_vq_chain *ch = s->rch[s->n_held];
		int ret = s->v->pop(s->vq[Q_RX], ch);

		if (ret < 0)
			return -EIO;
		if (ret != 1)
			break;
		if (ch->n_out || ch->in_len <= HDR_LEN) {
			s->v->broken(s->in,
				     "receive buffer not writable or not longer than a packet header");
			return -EIO;
		}
		s->n_held++;
	}
	return (int)s->n_held;
}

/*
 * Data of @c, at most @max bytes, into as many held receive chains as its
 * credit fills (more are popped, up to RX_GATHER): one read of the host
 * socket for all of them, one packet each. The number of chains filled,
 * their lengths in @lens.
 */
static unsigned conn_data(struct vsock *s, struct conn *c, uint32_t *lens, uint32_t max)
{
	uint32_t want = conn_peer_free(c), total = 0, cap[RX_GATHER];
	struct msghdr m = { .msg_iov = s->riov };
	unsigned nch = 0, nseg = 0, k;
	ssize_t n;

	if (want > max)
		want = max;
	while (total < want) {
		const struct cub_vq_chain *ch;
		uint32_t room;

		if (nch == s->n_held && rx_hold(s, nch + 1) <= (int)nch)
			break;
		ch = s->rch[nch];
		if (nseg + ch->n_in > CUB_VQ_MAX_SEGS)
			break; /* one recvmsg takes at most that many segments */
		room = (uint32_t)(ch->in_len - HDR_LEN < PKT_MAX ? ch->in_len - HDR_LEN : PKT_MAX);
		if (room > want - total)
			room = want - total;
		nseg += iov_slice(ch->in, ch->n_in, HDR_LEN, room, s->riov + nseg);
		cap[nch++] = room;
		total += room;
	}
	m.msg_iovlen = nseg;
	do
		n = recvmsg(c->fd, &m, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN) {
		c->pend &= ~(unsigned)P_DATA;
		return 0;
	}
	if (n < 0) {
		s->h->log(s->in, CUB_LOG_DEBUG, "port %u: host end: %s; reset", c->local_port,
			  strerror(errno));
		conn_kill(s, c, true);
		return 0;
	}
	if (!n) {
		/* EOF: the host end sends no more (a hang-up: nor takes). */
		c->pend &= ~(unsigned)P_DATA;
		c->host_eof = true;
		c->shut_flags |= VIRTIO_VSOCK_SHUTDOWN_SEND | (c->hup ? VIRTIO_VSOCK_SHUTDOWN_RCV : 0);
		c->pend |= P_SHUTDOWN;
		return 0;
	}
	if ((uint32_t)n < total)
		c->pend &= ~(unsigned)P_DATA; /* probably drained: epoll tells */
	c->tx_cnt += (uint32_t)n;
	s->st_rx_bytes += (uint64_t)n;
	for (k = 0; n > 0; k++) {
		uint32_t len = (uint64_t)n < cap[k] ? (uint32_t)n : cap[k];

		put_pkt(s, c, s->rch[k], VIRTIO_VSOCK_OP_RW, len, 0);
		lens[k] = HDR_LEN + len;
		n -= len;
	}
	return k;
}

/* @c's next packet(s) into the held chains: how many chains, their lengths
 * in @lens; 0 if it had nothing to send after all. */
static unsigned conn_packet(struct vsock *s, struct conn *c, uint32_t *lens)
{
	uint32_t flags = 0;
	uint16_t op;

	if (c->pend & P_REQUEST) {
		c->pend &= ~(unsigned)P_REQUEST;
		op = VIRTIO_VSOCK_OP_REQUEST;
	} else if (c->pend & P_RESPONSE) {
		c->pend &= ~(unsigned)P_RESPONSE;
		op = VIRTIO_VSOCK_OP_RESPONSE;
	} else if (c->pend & P_CREDIT_UPDATE) {
		c->pend &= ~(unsigned)P_CREDIT_UPDATE;
		op = VIRTIO_VSOCK_OP_CREDIT_UPDATE;
	} else if (c->pend & P_DATA) {
		if (c->st != C_OPEN || (c->guest_shut & VIRTIO_VSOCK_SHUTDOWN_RCV)) {
			c->pend &= ~(unsigned)P_DATA;
			return 0;
		}
		if (conn_peer_free(c)) {
			uint32_t grant = conn_peer_free(c) < RL_CHUNK ? conn_peer_free(c) : RL_CHUNK;
			uint32_t sent = c->tx_cnt;
			unsigned k;

			if (!s->rl)
				return conn_data(s, c, lens, UINT32_MAX);
			/* A chunk's tokens first, what went unused given back. */
			if (!vsock_rl_take(s, grant)) {
				s->rl_blocked = true; /* P_DATA stays: rfd brings it back */
				return 0;
			}
			k = conn_data(s, c, lens, grant);
			vsock_rl_charge(s, -(int64_t)(grant - (c->tx_cnt - sent)), (int64_t)k - 1);
			return k;
		}
		c->pend &= ~(unsigned)P_DATA; /* reading starts again with credit */
		if (c->stalled)
			return 0;
		c->stalled = true;
		op = VIRTIO_VSOCK_OP_CREDIT_REQUEST;
	} else if (c->pend & P_SHUTDOWN) {
		c->pend &= ~(unsigned)P_SHUTDOWN;
		op = VIRTIO_VSOCK_OP_SHUTDOWN;
		flags = c->shut_flags;
		if (flags == (VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND) &&
		    c->st != C_CLOSING) {
			/* The guest answers with an RST; if it does not, the timer does. */
			c->st = C_CLOSING;
			c->deadline_us = s->h->clock_us(s->in) + CLOSE_MS * 1000ull;
			timer_need(s);
		}
	} else if (c->pend & P_CREDIT_REQUEST) {
		c->pend &= ~(unsigned)P_CREDIT_REQUEST;
		op = VIRTIO_VSOCK_OP_CREDIT_REQUEST;
	} else {
		c->pend = 0;
		return 0;
	}
	put_pkt(s, c, s->rch[0], op, 0, flags);
	lens[0] = HDR_LEN;
	return 1;
}

/* The first @n held chains go to the guest (one used-index update when the
 * host can); the rest move up. */
static void rx_push(struct vsock *s, const uint32_t *lens, unsigned n)
{
	struct cub_vq_chain *t[RX_GATHER];

	if (n > 1 && CUB_VIRTIO_HAS_PUSH_BATCH(s->v)) {
		struct cub_vq_used u[RX_GATHER];

		for (unsigned i = 0; i < n; i++)
			u[i] = (struct cub_vq_used){ .head = s->rch[i]->head, .written = lens[i] };
		s->v->push_batch(s->vq[Q_RX], u, n);
	} else {
		for (unsigned i = 0; i < n; i++)
			s->v->push(s->vq[Q_RX], s->rch[i], lens[i]);
	}
	memcpy(t, s->rch, n * sizeof(t[0]));
	memmove(s->rch, s->rch + n, (s->n_held - n) * sizeof(t[0]));
	memcpy(s->rch + s->n_held - n, t, n * sizeof(t[0]));
	s->n_held -= n;
}

void vsock_rx(struct vsock *s)
{
	struct cub_vq *q = s->vq[Q_RX];
	unsigned done = 0, rounds = 0;
	bool dry = false;

	if (!s->running || !q)
		return;
	while (done < RX_BUDGET && rounds++ < 4 * RX_BUDGET && (s->rst_n || s->ready_head)) {
		uint32_t lens[RX_GATHER];
		unsigned n = 0;

		if (s->rl_blocked)
			break; /* what is left waits for the limiter's timer */
		if (rx_hold(s, 1) < 1) {
			dry = true;
			break;
		}
		if (s->rst_n) {
			struct virtio_vsock_hdr hd;
			struct rst_entry *r = &s->rst[s->rst_head];

			put_hdr(s, &hd, r->src_port, r->dst_port, VIRTIO_VSOCK_OP_RST);
			iov_from_buf(s->rch[0]->in, (int)s->rch[0]->n_in, 0, &hd, HDR_LEN);
			s->rst_head = (s->rst_head + 1) % RST_RING;
			s->rst_n--;
			lens[0] = HDR_LEN;
			n = 1;
		} else {
			struct conn *c = s->ready_head;

			ready_del(s, c);
			n = conn_packet(s, c, lens);
			if (!c->dead) {
				conn_ready(s, c, 0); /* more to say: to the back */
				conn_interest(s, c);
			}
		}
		if (!n)
			continue;
		rx_push(s, lens, n);
		s->st_rx_pkts += n;
		done += n;
	}
	if (done)
		s->v->notify(q);
	/*
	 * The budget ran out, not the buffers: go on in another round. The
	 * guest will not kick for these buffers: an empty pop asks for a kick
	 * (avail_event), and this round's last pop found buffers. Left to
	 * the guest, a connection with data waiting (not watched for EPOLLIN
	 * meanwhile) would wait for its next packet, which a guest that waits
	 * for this data never sends.
	 */
	if ((s->rst_n || s->ready_head) && !dry && !s->rl_blocked)
		vsock_kick(s);
	if (s->tx_blocked && s->rst_n < RST_RING / 2) {
		s->tx_blocked = false;
		vsock_kick(s);
	}
}

void vsock_event_q(struct vsock *s)
{
	struct cub_vq *q = s->vq[Q_EVENT];
	struct virtio_vsock_event e = { .id = htole32(VIRTIO_VSOCK_EVENT_TRANSPORT_RESET) };

	if (!s->running || !q || !s->reset_pending)
		return;
	if (s->v->pop(q, s->tchain) != 1)
		return; /* on the driver's next kick of the event queue */
	if (s->tchain->n_out || s->tchain->in_len < sizeof(e)) {
		s->v->broken(s->in, "event buffer not writable or shorter than 4 bytes");
		return;
	}
	iov_from_buf(s->tchain->in, (int)s->tchain->n_in, 0, &e, sizeof(e));
	s->v->push(q, s->tchain, sizeof(e));
	s->v->notify(q);
	s->reset_pending = false;
	s->h->log(s->in, CUB_LOG_INFO, "transport reset sent to the guest");
}
