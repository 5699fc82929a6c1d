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

/* One packet of @c into the held chain: its length, or 0 if it had
 * nothing to send after all. */
static uint32_t conn_packet(struct vsock *s, struct conn *c, const struct cub_vq_chain *ch)
{
	struct virtio_vsock_hdr hd;
	uint32_t len = 0, flags = 0;
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
		uint32_t room = (uint32_t)(ch->in_len - HDR_LEN < PKT_MAX ? ch->in_len - HDR_LEN
									  : PKT_MAX);
		uint32_t want = conn_peer_free(c);
		struct msghdr m = { .msg_iov = s->riov };
		ssize_t n;

		if (c->st != C_OPEN || (c->guest_shut & VIRTIO_VSOCK_SHUTDOWN_RCV)) {
			c->pend &= ~(unsigned)P_DATA;
			return 0;
		}
		if (!want) {
			c->pend &= ~(unsigned)P_DATA; /* reading starts again with credit */
			if (c->stalled)
				return 0;
			c->stalled = true;
			op = VIRTIO_VSOCK_OP_CREDIT_REQUEST;
			goto send;
		}
		if (want > room)
			want = room;
		m.msg_iovlen = iov_slice(ch->in, ch->n_in, HDR_LEN, want, s->riov);
		do
			n = recvmsg(c->fd, &m, MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n < 0 && errno == EAGAIN) {
			c->pend &= ~(unsigned)P_DATA;
			return 0;
		}
		if (n < 0) {
			s->h->log(s->in, CUB_LOG_DEBUG, "port %u: host end: %s; reset",
				  c->local_port, strerror(errno));
			conn_kill(s, c, true);
			return 0;
		}
		if (!n) {
			/* EOF: the host end sends no more (a hang-up: nor takes). */
			c->pend &= ~(unsigned)P_DATA;
			c->host_eof = true;
			c->shut_flags |= VIRTIO_VSOCK_SHUTDOWN_SEND |
					 (c->hup ? VIRTIO_VSOCK_SHUTDOWN_RCV : 0);
			c->pend |= P_SHUTDOWN;
			return 0;
		}
		if ((uint32_t)n < want)
			c->pend &= ~(unsigned)P_DATA; /* probably drained: epoll tells */
		len = (uint32_t)n;
		c->tx_cnt += len;
		s->st_rx_bytes += len;
		op = VIRTIO_VSOCK_OP_RW;
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
send:
	put_hdr(s, &hd, c->local_port, c->peer_port, op);
	hd.len = htole32(len);
	hd.flags = htole32(flags);
	hd.fwd_cnt = htole32(c->fwd_cnt);
	c->fwd_sent = c->fwd_cnt;
	c->guest_knows = true;
	iov_to(ch->in, ch->n_in, 0, &hd, HDR_LEN);
	return HDR_LEN + len;
}

/* Hold a receive chain: 1, 0 if the guest has none, -EIO. */
static int rx_hold(struct vsock *s)
{
	int ret;

	if (s->held)
		return 1;
	ret = s->v->pop(s->vq[Q_RX], s->rchain);
	if (ret != 1)
		return ret < 0 ? -EIO : 0;
	if (s->rchain->n_out || s->rchain->in_len <= HDR_LEN) {
		s->v->broken(s->in, "receive buffer not writable or not longer than a packet header");
		return -EIO;
	}
	s->held = true;
	return 1;
}

void vsock_rx(struct vsock *s)
{
	struct cub_vq *q = s->vq[Q_RX];
	unsigned done = 0, rounds = 0;

	if (!s->running || !q)
		return;
	while (done < RX_BUDGET && rounds++ < 4 * RX_BUDGET && (s->rst_n || s->ready_head)) {
		uint32_t n = 0;

		if (rx_hold(s) != 1)
			break;
		if (s->rst_n) {
			struct virtio_vsock_hdr hd;
			struct rst_entry *r = &s->rst[s->rst_head];

			put_hdr(s, &hd, r->src_port, r->dst_port, VIRTIO_VSOCK_OP_RST);
			iov_to(s->rchain->in, s->rchain->n_in, 0, &hd, HDR_LEN);
			s->rst_head = (s->rst_head + 1) % RST_RING;
			s->rst_n--;
			n = HDR_LEN;
		} else {
			struct conn *c = s->ready_head;

			ready_del(s, c);
			n = conn_packet(s, c, s->rchain);
			if (!c->dead) {
				conn_ready(s, c, 0); /* more to say: to the back */
				conn_interest(s, c);
			}
		}
		if (!n)
			continue;
		s->v->push(q, s->rchain, n);
		s->held = false;
		s->st_rx_pkts++;
		done++;
	}
	if (done)
		s->v->notify(q);
	if ((s->rst_n || s->ready_head) && s->held)
		vsock_kick(s); /* the budget ran out, not the buffers */
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
	iov_to(s->tchain->in, s->tchain->n_in, 0, &e, sizeof(e));
	s->v->push(q, s->tchain, sizeof(e));
	s->v->notify(q);
	s->reset_pending = false;
	s->h->log(s->in, CUB_LOG_INFO, "transport reset sent to the guest");
}
