/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-vsock's data path: connections, the guest's packets (transmit queue) and ours (receive queue). */
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

static void ready_del(struct vsock *s, struct conn *c)
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
static void credit_check(struct vsock *s, struct conn *c)
{
	uint32_t believed = s->buf_size - (c->rx_cnt - c->fwd_sent);
	uint32_t news = c->fwd_cnt - c->fwd_sent;

	if (news && believed < s->buf_size / 2 && (!c->len || news >= s->buf_size / 4))
		conn_ready(s, c, P_CREDIT_UPDATE);
}

/* Both sides are done: the last bytes went, reset (the guest waits for it). */
static void close_check(struct vsock *s, struct conn *c)
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

static ssize_t send_iov(int fd, struct iovec *iov, unsigned n)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };
	ssize_t r;

	do
		r = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	return r;
}

/* Write what the buffer holds to the host end. */
static void flush(struct vsock *s, struct conn *c)
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
		flush(s, c);
	if (c->dead)
		return;
	if ((c->reg & EPOLLIN) && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		c->pend |= P_DATA; /* read when a receive buffer is at hand */
	conn_ready(s, c, 0);
	conn_interest(s, c);
}

/* ---- guest -> host ---- */

/* Copy len bytes at offset off of iov into buf; bytes copied. */
static size_t iov_from(const struct iovec *iov, unsigned n, size_t off, void *buf, size_t len)
{
	size_t done = 0;

	for (unsigned i = 0; i < n && done < len; i++) {
		size_t l = iov[i].iov_len, k;

		if (off >= l) {
			off -= l;
			continue;
		}
		k = l - off < len - done ? l - off : len - done;
		memcpy((uint8_t *)buf + done, (uint8_t *)iov[i].iov_base + off, k);
		done += k;
		off = 0;
	}
	return done;
}

static size_t iov_to(const struct iovec *iov, unsigned n, size_t off, const void *buf, size_t len)
{
	size_t done = 0;

	for (unsigned i = 0; i < n && done < len; i++) {
		size_t l = iov[i].iov_len, k;

		if (off >= l) {
			off -= l;
			continue;
		}
		k = l - off < len - done ? l - off : len - done;
		memcpy((uint8_t *)iov[i].iov_base + off, (const uint8_t *)buf + done, k);
		done += k;
		off = 0;
	}
	return done;
}

/* dst = at most max bytes of src from offset skip on; the segment count. */
static unsigned iov_slice(const struct iovec *src, unsigned n, size_t skip, size_t max,
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
			iov_from(ch->out, ch->n_out, HDR_LEN + off, c->buf + tail, k);
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
	iov_from(ch->out, ch->n_out, 0, &hd, HDR_LEN); /* a copy: the guest may change it */
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
		ret = s->v->pop(q, s->tchain);
		if (ret != 1)
			break;
		tx_one(s, s->tchain);
		s->v->push(q, s->tchain, 0);
		done++;
	}
	if (done)
		s->v->notify(q);
	if (done == TX_BUDGET)
		vsock_kick(s);
}

/* ---- host -> guest ---- */

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
