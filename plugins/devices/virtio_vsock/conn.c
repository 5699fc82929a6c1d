/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-vsock's connections: the table, their host sockets' events, buffers and credit; tx.c and rx.c have the packets. */
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

/*
 * Flow control, both ways (virtio 5.10.6.3):
 *  guest -> host  We advertise buf_size (buf_alloc) and count in fwd_cnt the
 *                 bytes the host end took. A packet goes straight to the host
 *                 socket; what it does not take waits in the connection's
 *                 buffer, which can never hold more than buf_size: a guest
 *                 sending past the credit we gave is reset. We tell the guest
 *                 of new room (CREDIT_UPDATE) once half of what it believes it
 *                 has is used up.
 *  host -> guest  We never send more than the guest's buf_alloc less what
 *                 is in flight (tx_cnt - fwd_cnt). With no credit left the
 *                 host socket is not read (it fills, the host writer waits)
 *                 and a CREDIT_REQUEST goes once. Bytes are read from the host
 *                 socket straight into the guest's receive buffer: nothing is
 *                 held on the host for this direction.
 * So per connection the host holds at most buf_size bytes, and there are at
 * most max_conns connections.
 */

static unsigned hash(uint32_t l, uint32_t p)
{
	return (l * 2654435761u ^ p * 40503u) % HASH_SIZE;
}

struct conn *conn_find(struct vsock *s, uint32_t local, uint32_t peer)
{
	for (struct conn *c = s->hash[hash(local, peer)]; c; c = c->hnext)
		if (c->local_port == local && c->peer_port == peer)
			return c;
	return NULL;
}

static void hash_del(struct vsock *s, struct conn *c)
{
	struct conn **pp;

	if (!c->hashed)
		return;
	for (pp = &s->hash[hash(c->local_port, c->peer_port)]; *pp; pp = &(*pp)->hnext)
		if (*pp == c) {
			*pp = c->hnext;
			break;
		}
	c->hashed = false;
}

void conn_hash_add(struct vsock *s, struct conn *c)
{
	unsigned b = hash(c->local_port, c->peer_port);

	c->hnext = s->hash[b];
	s->hash[b] = c;
	c->hashed = true;
}

struct conn *conn_new(struct vsock *s, int fd, uint32_t local, uint32_t peer)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->tag = T_CONN;
	c->fd = fd;
	c->local_port = local;
	c->peer_port = peer;
	c->next = s->all;
	if (s->all)
		s->all->prev = c;
	s->all = c;
	s->n_conns++;
	s->st_conns++;
	return c;
}

void ready_del(struct vsock *s, struct conn *c)
{
	if (!c->in_ready)
		return;
	if (c->rprev)
		c->rprev->rnext = c->rnext;
	else
		s->ready_head = c->rnext;
	if (c->rnext)
		c->rnext->rprev = c->rprev;
	else
		s->ready_tail = c->rprev;
	c->rnext = c->rprev = NULL;
	c->in_ready = false;
}

void conn_ready(struct vsock *s, struct conn *c, unsigned pend)
{
	if (c->dead)
		return;
	c->pend |= pend;
	if (c->in_ready || !c->pend)
		return;
	c->rprev = s->ready_tail;
	c->rnext = NULL;
	if (s->ready_tail)
		s->ready_tail->rnext = c;
	else
		s->ready_head = c;
	s->ready_tail = c;
	c->in_ready = true;
}

void rst_queue(struct vsock *s, uint32_t hport, uint32_t gport)
{
	s->st_rst++;
	if (s->rst_n == RST_RING) {
		s->st_rst_dropped++;
		s->h->log_ratelimited(s->in, CUB_LOG_WARN,
				      "the guest reads no receive buffers: an RST to port %u dropped",
				      gport);
		return;
	}
	s->rst[(s->rst_head + s->rst_n++) % RST_RING] = (struct rst_entry){ hport, gport };
}

void conn_kill(struct vsock *s, struct conn *c, bool rst)
{
	if (c->dead)
		return;
	if (c->fd >= 0)
		close(c->fd); /* leaves the epoll set with it */
	c->fd = -1;
	c->reg = 0;
	hash_del(s, c);
	ready_del(s, c);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->all = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	if (rst && c->guest_knows)
		rst_queue(s, c->local_port, c->peer_port);
	free(c->buf);
	c->buf = NULL;
	c->dead = true;
	c->dnext = s->dead;
	s->dead = c;
	if (s->listen_paused)
		vsock_listen_resume(s);
}

void conn_reap(struct vsock *s)
{
	while (s->dead) {
		struct conn *c = s->dead;

		s->dead = c->dnext;
		free(c);
	}
}

void conn_kill_all(struct vsock *s)
{
	while (s->all)
		conn_kill(s, s->all, false);
	s->rst_n = 0;
	s->tx_blocked = false;
	s->rl_blocked = false;
}

uint32_t conn_peer_free(const struct conn *c)
{
	uint32_t used = c->tx_cnt - c->peer_fwd_cnt;

	return used >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - used;
}

void conn_interest(struct vsock *s, struct conn *c)
{
	struct epoll_event e = { .data.ptr = c };
	uint32_t want = 0;
	int op;

	if (c->dead || c->fd < 0)
		return;
	if (c->st == C_HANDSHAKE)
		want = EPOLLIN;
	else if (c->st == C_OPEN || c->st == C_CLOSING) {
		if (c->len)
			want |= EPOLLOUT;
		if (c->st == C_OPEN && !(c->pend & P_DATA) && !c->host_eof &&
		    !(c->guest_shut & VIRTIO_VSOCK_SHUTDOWN_RCV) && conn_peer_free(c))
			want |= EPOLLIN;
	}
	if (want == c->reg)
		return;
	/* No interest: out of the set (epoll reports HUP regardless). */
	op = !want ? EPOLL_CTL_DEL : c->reg ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	e.events = want;
	if (epoll_ctl(s->efd, op, c->fd, &e) < 0) {
		s->h->log_ratelimited(s->in, CUB_LOG_ERR, "epoll_ctl: %s; connection reset",
				      strerror(errno));
		conn_kill(s, c, true);
		return;
	}
	c->reg = want;
}

/* Tell the guest of room it does not know of yet, once it believes it has
 * less than half of buf_size left, and the news is worth a packet: a
 * quarter of buf_size, or all of it (the buffer emptied). Dribbling out a
 * few KiB at a time, while the host end drains slowly, would only cost the
 * guest a wake-up per dribble (a sender waiting for room for one 64 KiB
 * packet). */
void credit_check(struct vsock *s, struct conn *c)
{
	uint32_t believed = s->buf_size - (c->rx_cnt - c->fwd_sent);
	uint32_t news = c->fwd_cnt - c->fwd_sent;

	if (news && believed < s->buf_size / 2 && (!c->len || news >= s->buf_size / 4))
		conn_ready(s, c, P_CREDIT_UPDATE);
}

/* Both sides are done: the last bytes went, reset (the guest waits for it). */
void close_check(struct vsock *s, struct conn *c)
{
	if (c->len)
		return;
	if (c->st == C_CLOSING) {
		conn_kill(s, c, true);
		return;
	}
	if ((c->guest_shut & VIRTIO_VSOCK_SHUTDOWN_SEND) && !c->wr_shut) {
		shutdown(c->fd, SHUT_WR);
		c->wr_shut = true;
	}
}

ssize_t send_iov(int fd, struct iovec *iov, unsigned n)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };
	ssize_t r;

	do
		r = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	return r;
}

/* Write what the buffer holds to the host end. */
void conn_flush(struct vsock *s, struct conn *c)
{
	while (c->len) {
		uint32_t first = s->buf_size - c->head < c->len ? s->buf_size - c->head : c->len;
		struct iovec iov[2] = { { c->buf + c->head, first }, { c->buf, c->len - first } };
		ssize_t n = send_iov(c->fd, iov, c->len > first ? 2 : 1);

		if (n < 0) {
			if (errno == EAGAIN)
				break;
			s->h->log(s->in, CUB_LOG_DEBUG, "port %u: host end: %s; reset",
				  c->local_port, strerror(errno));
			conn_kill(s, c, true);
			return;
		}
		c->head = (c->head + (uint32_t)n) % s->buf_size;
		c->len -= (uint32_t)n;
		c->fwd_cnt += (uint32_t)n;
	}
	if (!c->len)
		c->head = 0; /* the buffer stays (a host end that lagged once will again) */
	credit_check(s, c);
	close_check(s, c);
}

void conn_event(struct vsock *s, struct conn *c, uint32_t ev)
{
	if (c->dead)
		return;
	if (ev & (EPOLLHUP | EPOLLERR))
		c->hup = true;
	if (c->st == C_HANDSHAKE) {
		hs_read(s, c);
		return;
	}
	if (c->st == C_CONNECTING) {
		conn_kill(s, c, true); /* the client left before the guest answered */
		return;
	}
	if (c->len && (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
		conn_flush(s, c);
	if (c->dead)
		return;
	if ((c->reg & EPOLLIN) && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		c->pend |= P_DATA; /* read when a receive buffer is at hand */
	conn_ready(s, c, 0);
	conn_interest(s, c);
}

/* dst = at most max bytes of src from offset skip on; the segment count. */
unsigned iov_slice(const struct iovec *src, unsigned n, size_t skip, size_t max,
			  struct iovec *dst)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n && max; i++) {
		size_t l;

		if (skip >= src[i].iov_len) {
			skip -= src[i].iov_len;
			continue;
		}
		l = src[i].iov_len - skip < max ? src[i].iov_len - skip : max;
		dst[k].iov_base = (uint8_t *)src[i].iov_base + skip;
		dst[k++].iov_len = l;
		max -= l;
		skip = 0;
	}
	return k;
}
