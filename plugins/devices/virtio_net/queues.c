/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-net's data path: transmit and receive queues against the net backend. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "virtio_net.h"

/*
 * Queue 0 receives (backend → guest), queue 1 transmits; no control queue,
 * no multiqueue. Both directions run inline, without worker threads:
 *   TX  on the thread that kicks the transmit queue (the event loop with
 *       ioeventfd): pop, check, send. When the backend says -EAGAIN the
 *       chain is kept and the backend's tx_fd watched for EPOLLOUT; nothing
 *       more is sent until it fires.
 *   RX  on the event loop when the backend's rx_fd is readable: hold a
 *       receive chain, recv straight into it, unless the frame would land
 *       misaligned (see rx_bounce): then into the bounce buffer, copied to
 *       the chain and the buffers after it. With mergeable buffers, when
 *       recent frames were longer than that buffer, more buffers are popped
 *       first (as many as the largest recent frame needs), the recv lands
 *       straight in all of them, and those it did not reach go back to the
 *       ring unused (unpop: the held chains stay the ones popped last, as a
 *       snapshot needs). What still does not fit lands in a bounce buffer
 *       behind them and is copied into as many more buffers as it needs;
 *       all reach the used ring in one batch (num_buffers in the first
 *       header). When the guest
 *       has no buffers, rx_fd is no longer watched until it kicks the
 *       receive queue: frames wait in the backend, none is dropped.
 *       A frame short of buffers half way waits for the next kick, but the
 *       buffers it holds are ones the driver cannot post again, so it is
 *       dropped (the buffers go back empty, rx_nobuf counts it) when
 *       - what it holds leaves the driver too few free descriptors for
 *         another chain like the smallest it gave (so with a queue smaller
 *         than the frame needs, it is dropped once it holds the whole
 *         queue), or
 *       - no buffer came for RX_WAIT_MS (a driver that refills only after
 *         it receives, as Linux does below half a ring free, would
 *         otherwise wait on us while we wait on it).
 *       Either way receiving goes on; nothing waits forever.
 * The two fds live in an epoll set of the device's own, which the event
 * loop watches: switching directions on and off is an epoll_ctl on that set,
 * never a new host watch.
 * Offloads (CSUM, TSO4/6, UFO) are offered only when the backend carries
 * vnet headers with them (a tap); then the guest's header is passed through
 * after checks. Otherwise frames are plain, and a guest header asking for an
 * offload it never negotiated drops the frame.
 */

static void count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ---- iovec helpers ---- */

/*
 * Append src's n segments to dst (k used), each joined to the one before it
 * when it starts where that one ends in the host's address space: a guest's
 * buffers carved one after another from a page (Linux's mergeable receive
 * buffers, a frame's pages) reach the backend as one segment, and its
 * recvmsg/sendmsg walks, checks and copies fewer. Returns the new k, never
 * more than k + n.
 */
static unsigned iov_append(struct iovec *dst, unsigned k, const struct iovec *src, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (!src[i].iov_len)
			continue;
		if (k && (uint8_t *)dst[k - 1].iov_base + dst[k - 1].iov_len == src[i].iov_base)
			dst[k - 1].iov_len += src[i].iov_len;
		else
			dst[k++] = src[i];
	}
	return k;
}

/* dst = the bytes of src from offset skip on, contiguous segments joined;
 * returns the segment count (at most n). */
static unsigned iov_tail(const struct iovec *src, unsigned n, size_t skip, struct iovec *dst)
{
	unsigned i = 0, k = 0;

	while (i < n && skip >= src[i].iov_len)
		skip -= src[i++].iov_len;
	if (i < n) {
		dst[0].iov_base = (uint8_t *)src[i].iov_base + skip;
		dst[0].iov_len = src[i].iov_len - skip;
		k = iov_append(dst, 1, src + i + 1, n - i - 1);
	}
	return k;
}

/* Copy between a flat buffer and iov at offset off; returns bytes copied. */
static size_t iov_copy(const struct iovec *iov, unsigned n, size_t off, void *buf, size_t len,
		       bool to_iov)
{
	size_t done = 0;

	for (unsigned i = 0; i < n && done < len; i++) {
		size_t l = iov[i].iov_len, c;
		uint8_t *p = iov[i].iov_base;

		if (off >= l) {
			off -= l;
			continue;
		}
		c = l - off < len - done ? l - off : len - done;
		if (to_iov)
			memcpy(p + off, (uint8_t *)buf + done, c);
		else
			memcpy((uint8_t *)buf + done, p + off, c);
		done += c;
		off = 0;
	}
	return done;
}

/* ---- which fds the device's epoll set watches ---- */

static int set_reg(struct net *n, int fd, uint32_t *reg, uint32_t want, uint32_t tag)
{
	struct epoll_event e = { .events = want, .data.u32 = tag };
	int op;

	if (fd < 0 || *reg == want)
		return 0;
	/* No interest means out of the set: epoll reports ERR and HUP regardless. */
	op = !want ? EPOLL_CTL_DEL : *reg ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(n->efd, op, fd, &e) < 0) {
		n->h->log_ratelimited(n->in, CUB_LOG_ERR, "epoll_ctl on %s fd %d: %s",
				      n->be->name, fd, strerror(errno));
		return -errno;
	}
	*reg = want;
	return 0;
}

void vnet_interest(struct net *n, int rx, int tx)
{
	int rfd = n->be->info.rx_fd, tfd = n->be->info.tx_fd;

	pthread_mutex_lock(&n->ev_lock);
	if (rx >= 0)
		n->rx_want = rx;
	if (tx >= 0)
		n->tx_want = tx;
	if (rfd == tfd) {
		set_reg(n, rfd, &n->rx_reg,
			(n->rx_want ? EPOLLIN : 0) | (n->tx_want ? EPOLLOUT : 0), TAG_RX | TAG_TX);
	} else {
		set_reg(n, rfd, &n->rx_reg, n->rx_want ? EPOLLIN : 0, TAG_RX);
		set_reg(n, tfd, &n->tx_reg, n->tx_want ? EPOLLOUT : 0, TAG_TX);
	}
	pthread_mutex_unlock(&n->ev_lock);
}

/* ---- transmit ---- */

/* Check the guest's header; 0, or -EINVAL: drop the frame. */
static int tx_check_hdr(struct net *n, const struct vnet_hdr *hd)
{
	uint64_t f = atomic_load_explicit(&n->acked, memory_order_relaxed);
	uint8_t gso = hd->gso_type & ~VIRTIO_NET_HDR_GSO_ECN;

	if ((hd->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) && !(f & F(VIRTIO_NET_F_CSUM)))
		return -EINVAL;
	if ((hd->gso_type & VIRTIO_NET_HDR_GSO_ECN) && !(f & F(VIRTIO_NET_F_HOST_ECN)))
		return -EINVAL;
	switch (gso) {
	case VIRTIO_NET_HDR_GSO_NONE:
		return 0;
	case VIRTIO_NET_HDR_GSO_TCPV4:
		return f & F(VIRTIO_NET_F_HOST_TSO4) ? 0 : -EINVAL;
	case VIRTIO_NET_HDR_GSO_TCPV6:
		return f & F(VIRTIO_NET_F_HOST_TSO6) ? 0 : -EINVAL;
	case VIRTIO_NET_HDR_GSO_UDP:
		return f & F(VIRTIO_NET_F_HOST_UFO) ? 0 : -EINVAL;
	}
	return -EINVAL;
}

/* Send txc: 1 done (sent or dropped), 0 backend full, -EIO malformed. */
static int tx_one(struct net *n)
{
	struct cub_vq_chain *c = n->txc;
	struct vnet_hdr hd;
	uint64_t len;
	unsigned k = 0;
	int64_t r;

	if (c->n_in)
		return n->v->broken(n->in, "transmit buffer has device-writable segments"), -EIO;
	if (c->n_out > MAX_SEGS)
		return n->v->broken(n->in, "transmit buffer has more than 1023 segments"), -EIO;
	if (c->out_len < HDR)
		return n->v->broken(n->in, "transmit buffer shorter than the virtio-net header"),
		       -EIO;
	len = c->out_len - HDR;
	if (len > CUB_NET_MAX_FRAME)
		return n->v->broken(n->in, "transmit frame longer than 65550 bytes"), -EIO;
	iov_copy(c->out, c->n_out, 0, &hd, HDR, false); /* a copy: the guest may change it */
	if (len < ETH_HLEN || tx_check_hdr(n, &hd)) {
		n->h->log_ratelimited(n->in, CUB_LOG_WARN,
				      "dropped a %llu-byte frame (flags %#x, gso %#x)",
				      (unsigned long long)len, hd.flags, hd.gso_type);
		count(&n->tx_dropped, 1);
		return 1;
	}
	if (n->vnet) {
		n->tx_iov[k].iov_base = &hd;
		n->tx_iov[k++].iov_len = HDR;
	}
	k += iov_tail(c->out, c->n_out, HDR, n->tx_iov + k);
	r = n->be->ops->send(n->be->priv, n->tx_iov, (int)k);
	if (r == -EAGAIN && n->be->info.tx_fd >= 0)
		return 0;
	if (r < 0) {
		n->h->log_ratelimited(n->in, CUB_LOG_DEBUG, "%s: send: %s", n->be->name,
				      strerror((int)-r));
		count(&n->tx_dropped, 1);
		return 1;
	}
	count(&n->tx_packets, 1);
	count(&n->tx_bytes, len);
	return 1;
}

void vnet_rl_arm(struct net *n, uint64_t us)
{
	struct itimerspec cur, t = { .it_value = { .tv_sec = (time_t)(us / 1000000),
						   .tv_nsec = (long)(us % 1000000) * 1000 } };

	if (!us)
		t.it_value.tv_nsec = 1000;
	pthread_mutex_lock(&n->ev_lock);
	if (timerfd_gettime(n->lfd, &cur) < 0 || (!cur.it_value.tv_sec && !cur.it_value.tv_nsec) ||
	    cur.it_value.tv_sec > t.it_value.tv_sec ||
	    (cur.it_value.tv_sec == t.it_value.tv_sec && cur.it_value.tv_nsec > t.it_value.tv_nsec))
		timerfd_settime(n->lfd, 0, &t, NULL);
	pthread_mutex_unlock(&n->ev_lock);
}

/* Send chains on the transmit queue until the backend is full or the
 * budget is spent; then the event loop comes back through kfd. With a tx
 * limiter short of tokens, the chain in hand waits for lfd. */
void vnet_tx_process(struct net *n)
{
	unsigned done = 0;
	uint64_t bytes = 0;
	int ret;

	pthread_mutex_lock(&n->tx_lock);
	while (n->tx_running) {
		if (done >= TX_BUDGET || bytes >= TX_BUDGET_BYTES) {
			uint64_t one = 1;

			if (write(n->kfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
				n->h->log_ratelimited(n->in, CUB_LOG_ERR,
						      "cannot re-arm the transmit queue: %s",
						      strerror(errno));
			break;
		}
		if (!n->tx_held) {
			ret = n->v->pop(n->txq, n->txc);
			if (ret != 1)
				break;
			n->tx_held = true;
			n->tx_charged = false;
		}
		if (n->tx_rl && !n->tx_charged) {
			uint64_t w, len = n->txc->out_len > HDR ? n->txc->out_len - HDR : 0;

			if (!n->v->rl_take(n->tx_rl, len, 1, &w)) {
				vnet_rl_arm(n, w);
				break;
			}
			n->tx_charged = true;
		}
		ret = tx_one(n);
		if (ret < 0) {
			n->tx_held = false; /* broken: pop fails until the driver resets */
			break;
		}
		if (!ret) {
			vnet_interest(n, -1, true); /* no more until tx_fd is writable */
			break;
		}
		n->tx_held = false;
		bytes += n->txc->out_len;
		n->v->push(n->txq, n->txc, 0);
		if (++done % BATCH_NOTIFY == 0)
			n->v->notify(n->txq);
	}
	if (done % BATCH_NOTIFY)
		n->v->notify(n->txq);
	pthread_mutex_unlock(&n->tx_lock);
}

/* ---- receive ---- */

static void rx_push(struct net *n, unsigned *done)
{
	if (n->batch)
		n->v->push_batch(n->rxq, n->used, n->n_used);
	else
		for (unsigned i = 0; i < n->n_used; i++) {
			n->rxm->head = n->used[i].head; /* push reads the head only */
			n->v->push(n->rxq, n->rxm, n->used[i].written);
		}
	n->n_used = 0;
	if (++*done % BATCH_NOTIFY == 0)
		n->v->notify(n->rxq);
}

/* A receive chain must be writable only, with room for the header
 * (first or only buffer) or for something (later mergeable buffers). */
static int rx_check(struct net *n, const struct cub_vq_chain *c, bool first)
{
	if (c->n_out)
		return n->v->broken(n->in, "receive buffer has device-readable segments"), -EIO;
	if (c->n_in > MAX_SEGS)
		return n->v->broken(n->in, "receive buffer has more than 1023 segments"), -EIO;
	if (c->in_len < (first ? HDR : 1))
		return n->v->broken(n->in, first ? "receive buffer shorter than the virtio-net header"
						 : "empty receive buffer"),
		       -EIO;
	return 0;
}

/* Take the next receive chain into c: 1, 0 if the guest has none, -EIO. */
static int rx_pop(struct net *n, struct cub_vq_chain *c, bool first)
{
	int ret = n->v->pop(n->rxq, c);

	if (ret == 1 && rx_check(n, c, first))
		return -EIO;
	return ret;
}

/* Arm (or disarm) the wait for more receive buffers. */
static void rx_timer(struct net *n, bool on)
{
	struct itimerspec t = { .it_value = { .tv_sec = on ? RX_WAIT_MS / 1000 : 0,
					      .tv_nsec = on ? RX_WAIT_MS % 1000 * 1000000L : 0 } };

	n->rx_waiting = on;
	if (n->tfd >= 0)
		timerfd_settime(n->tfd, 0, &t, NULL); /* cannot fail with these arguments */
}

/* The timer fired for the frame waiting now, not for one finished since
 * (its expiry read on the event loop, a kick on a vCPU thread finishing
 * that frame and starting another before we got the lock): still armed
 * as far as we know, and no time left. */
static bool rx_timer_expired(const struct net *n)
{
	struct itimerspec t;

	return n->rx_waiting && !timerfd_gettime(n->tfd, &t) && !t.it_value.tv_sec &&
	       !t.it_value.tv_nsec;
}

/*
 * Whether the driver can never give another buffer while the pending frame
 * holds these: the descriptors held leave fewer free than the smallest
 * chain it gave. A chain counts one descriptor per segment: exact for a
 * direct chain; an indirect one takes a single descriptor, so with those we
 * give up a little early (Linux's mergeable buffers are one segment each).
 */
static bool rx_exhausted(const struct net *n)
{
	return n->held_desc + n->min_desc > n->rx_qsize;
}

static void rx_hold(struct net *n, const struct cub_vq_chain *c)
{
	n->held_desc += c->n_in;
	if (!n->min_desc || c->n_in < n->min_desc)
		n->min_desc = c->n_in;
}

/* Go on placing a frame's overflow into more mergeable buffers: 1 when the
 * frame is delivered (or dropped), 0 if it waits for buffers, -EIO.
 * @expired: the wait timer fired, so a frame still short is dropped. */
static int rx_continue(struct net *n, unsigned *done, bool expired)
{
	const char *why = NULL;
	unsigned got = 0;
	uint16_t nb;

	while (n->pend_off < n->pend_len) {
		size_t c;
		int ret;

		if (n->n_used == QUEUE_MAX) { /* the largest queue, all held */
			why = "the receive queue cannot hold it";
			break;
		}
		ret = rx_pop(n, n->rxm, false);
		if (ret < 0)
			return ret;
		if (!ret) {
			if (rx_exhausted(n))
				why = "the receive queue cannot hold it";
			else if (expired)
				why = "no more receive buffers came";
			else {
				/* The wait runs from the last buffer that came:
				 * kicks without buffers do not extend it. */
				if (got || !n->rx_waiting)
					rx_timer(n, true);
				return 0;
			}
			break;
		}
		rx_hold(n, n->rxm);
		got++;
		c = n->pend_len - n->pend_off;
		c = iov_copy(n->rxm->in, n->rxm->n_in, 0, n->pend_buf + n->pend_off, c, true);
		n->pend_off += c;
		n->used[n->n_used++] = (struct cub_vq_used){ n->rxm->head, (uint32_t)c };
	}
	if (why) {
		/* Hand the buffers back empty (the driver drops them) and drop
		 * the frame. */
		for (unsigned i = 0; i < n->n_used; i++)
			n->used[i].written = 0;
		count(&n->rx_dropped, 1);
		count(&n->rx_nobuf, 1);
		n->h->log_ratelimited(n->in, CUB_LOG_WARN,
				      "dropped a %u-byte frame: %s (%u buffers, %u of %u descriptors held)",
				      n->pend_frame, why, n->n_used, n->held_desc, n->rx_qsize);
		goto out;
	}
	nb = (uint16_t)n->n_used;
	put_le16((uint8_t *)&nb, nb);
	iov_copy(n->rxc->in, n->rxc->n_in, NUM_BUFFERS_OFF, &nb, sizeof(nb), true);
	count(&n->rx_packets, 1);
	count(&n->rx_bytes, n->pend_frame);
out:
	if (n->rx_waiting)
		rx_timer(n, false);
	rx_push(n, done);
	n->rx_pend = false;
	n->rx_held = false;
	return 1;
}

/* A backend's header on a received frame, against what the guest accepts:
 * 0 (flags fixed up in *hd), or -EINVAL: drop the frame. The tap honours
 * set_offloads; this is the device's own guarantee (virtio 5.1.6.4.1). */
static int rx_fix_hdr(uint64_t f, struct vnet_hdr *hd)
{
	uint8_t gso = hd->gso_type & ~VIRTIO_NET_HDR_GSO_ECN;

	if ((hd->gso_type & VIRTIO_NET_HDR_GSO_ECN) && !(f & F(VIRTIO_NET_F_GUEST_ECN)))
		return -EINVAL;
	if ((gso == VIRTIO_NET_HDR_GSO_TCPV4 && !(f & F(VIRTIO_NET_F_GUEST_TSO4))) ||
	    (gso == VIRTIO_NET_HDR_GSO_TCPV6 && !(f & F(VIRTIO_NET_F_GUEST_TSO6))) ||
	    (gso == VIRTIO_NET_HDR_GSO_UDP && !(f & F(VIRTIO_NET_F_GUEST_UFO))) ||
	    (gso != VIRTIO_NET_HDR_GSO_NONE && gso != VIRTIO_NET_HDR_GSO_TCPV4 &&
	     gso != VIRTIO_NET_HDR_GSO_TCPV6 && gso != VIRTIO_NET_HDR_GSO_UDP))
		return -EINVAL;
	if (!(f & F(VIRTIO_NET_F_GUEST_CSUM))) {
		if (hd->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM)
			return -EINVAL; /* a partial checksum the guest cannot finish */
		hd->flags = 0;  /* DATA_VALID included: flags must be zero */
	}
	return 0;
}

/* Give the buffers popped ahead from @from on back to the ring: 0 or -EIO. */
static int rx_giveback(struct net *n, unsigned from)
{
	unsigned cnt = n->n_sp > from ? n->n_sp - from : 0;

	n->n_sp = from < n->n_sp ? from : n->n_sp;
	return cnt ? n->v->unpop(n->rxq, &n->sp_head[from], cnt) : 0;
}

/*
 * Pop buffers after rxc until @room reaches @want (or the guest has no
 * more), their segments appended to rx_iov from @k: the new k, or -EIO.
 */
static int rx_ahead(struct net *n, size_t room, size_t want, unsigned k)
{
	n->n_sp = 0;
	while (room < want && n->n_sp < QUEUE_MAX - 1) {
		struct cub_vq_chain *m = n->rxm;
		int ret = rx_pop(n, m, false);

		if (ret < 0)
			return ret;
		if (!ret)
			break;
		if (k + m->n_in + 1 > MAX_SEGS + 1) { /* recv's iovec is full: not this one */
			n->sp_head[n->n_sp++] = m->head;
			return rx_giveback(n, n->n_sp - 1) ?: (int)k;
		}
		k = iov_append(n->rx_iov, k, m->in, m->n_in);
		n->sp_head[n->n_sp] = m->head;
		n->sp_nseg[n->n_sp] = m->n_in;
		n->sp_len[n->n_sp++] = (uint32_t)m->in_len;
		room += m->in_len;
	}
	return (int)k;
}

/*
 * Whether a frame for chain c goes through the bounce buffer: when its
 * first byte after the virtio-net header (where the backend's copy of the
 * frame starts) is not 16-byte aligned in the host's address space. Every
 * Linux guest's receive buffer is so: the header is 12 bytes. The kernel's
 * copy to user memory (rep movsb) then runs at a third to a half of its
 * aligned speed (a 64 KiB datagram into a page + 12: 25-50 us against 9 us
 * on this project's AMD EPYC hosts), where recv into the bounce buffer
 * (the frame 64-byte aligned there, a tap's vnet header just before it)
 * and a memcpy to the guest (vector stores, aligned by glibc) take 9-11 us;
 * at 1500 bytes the two are even, and the memcpy of a small frame is a few
 * nanoseconds (bench/net, RX rows).
 */
static bool rx_bounce(const struct cub_vq_chain *c)
{
	size_t off = HDR;

	for (unsigned i = 0; i < c->n_in; i++) {
		if (off < c->in[i].iov_len)
			return ((uintptr_t)c->in[i].iov_base + off) % 16 != 0;
		off -= c->in[i].iov_len;
	}
	return false;
}

/* Receive one frame into rxc (popped and checked): 1 placed or dropped (go
 * on), 0 nothing waiting, -EIO broken, -EAGAIN out of buffers mid-frame. */
static int rx_one(struct net *n, unsigned *done)
{
	struct cub_vq_chain *c = n->rxc;
	size_t skip = n->vnet ? 0 : HDR, room = c->in_len - skip, frame, rem, base = 0;
	bool bounced = rx_bounce(c);
	uint8_t *b = n->bounce; /* what the recv put there: the frame, or its overflow */
	unsigned k, i;
	struct vnet_hdr hd = { 0 };
	int64_t r;

	n->n_sp = 0;
	if (bounced) {
		/* The whole frame in the bounce buffer, 64-byte aligned (a
		 * backend's vnet header just before it); as much as fits in
		 * the chain goes there after, the rest into further buffers
		 * as an overflow would (rx_continue), from offset room. */
		b += n->vnet ? BOUNCE_LEAD - HDR : BOUNCE_LEAD;
		n->rx_iov[0].iov_base = b;
		n->rx_iov[0].iov_len = n->mrg || room > CUB_NET_MAX_FRAME + HDR ?
					       CUB_NET_MAX_FRAME + HDR : room;
		k = 1;
		base = room;
	} else {
		k = iov_tail(c->in, c->n_in, skip, n->rx_iov);
		if (n->mrg) {
			if (n->unpop && n->rx_target > room) {
				int kk = rx_ahead(n, room, n->rx_target, k);

				if (kk < 0)
					return -EIO;
				k = (unsigned)kk;
			}
			n->rx_iov[k].iov_base = b;
			n->rx_iov[k++].iov_len = CUB_NET_MAX_FRAME + HDR;
		}
	}
	r = n->be->ops->recv(n->be->priv, n->rx_iov, (int)k);
	if (r > 0)
		n->rx_target = (size_t)r > n->rx_target - n->rx_target / 8 ?
				       (size_t)r : n->rx_target - n->rx_target / 8;
	if ((r <= 0 || (size_t)r <= room) && rx_giveback(n, 0))
		return -EIO;
	if (r == 0)
		return 0;
	if (r < 0 || (n->vnet && r < HDR)) {
		if (r == -EMSGSIZE || r >= 0) {
			count(&n->rx_dropped, 1);
			return rx_giveback(n, 0) ? -EIO : 1;
		}
		if (++n->rx_errs >= 16) {
			n->rx_dead = true;
			n->h->log(n->in, CUB_LOG_ERR, "%s: receive failed: %s; receiving stops",
				  n->be->name, strerror((int)-r));
			return 0;
		}
		n->h->log_ratelimited(n->in, CUB_LOG_WARN, "%s: receive: %s", n->be->name,
				      strerror((int)-r));
		return 1;
	}
	n->rx_errs = 0;
	if (bounced)
		iov_copy(c->in, c->n_in, skip, b, (size_t)r < room ? (size_t)r : room, true);
	frame = (size_t)r - (n->vnet ? HDR : 0);
	n->last_frame = frame;
	if (n->vnet) {
		iov_copy(c->in, c->n_in, 0, &hd, HDR, false);
		if (rx_fix_hdr(atomic_load_explicit(&n->acked, memory_order_relaxed), &hd)) {
			n->h->log_ratelimited(n->in, CUB_LOG_WARN,
					      "%s: dropped a frame with offloads the guest refused (flags %#x, gso %#x)",
					      n->be->name, hd.flags, hd.gso_type);
			count(&n->rx_dropped, 1);
			/* the buffer stays ours for the next frame */
			return rx_giveback(n, 0) ? -EIO : 1;
		}
	}
	iov_copy(c->in, c->n_in, 0, &hd, HDR, true); /* a plain frame: zeroes */
	if ((size_t)r <= room) {
		uint16_t nb;

		put_le16((uint8_t *)&nb, 1);
		iov_copy(c->in, c->n_in, NUM_BUFFERS_OFF, &nb, sizeof(nb), true);
		n->used[0] = (struct cub_vq_used){ c->head, (uint32_t)(skip + r) };
		n->n_used = 1;
		count(&n->rx_packets, 1);
		count(&n->rx_bytes, frame);
		rx_push(n, done);
		n->rx_held = false;
		return 1;
	}
	/* Only mergeable buffers get here: the rest is in the buffers popped
	 * ahead, then in the bounce buffer. */
	n->used[0] = (struct cub_vq_used){ c->head, (uint32_t)(skip + room) };
	n->n_used = 1;
	n->held_desc = n->min_desc = 0;
	rx_hold(n, c);
	rem = (size_t)r - room;
	for (i = 0; rem && i < n->n_sp; i++) {
		size_t w = rem < n->sp_len[i] ? rem : n->sp_len[i];

		n->used[n->n_used++] = (struct cub_vq_used){ n->sp_head[i], (uint32_t)w };
		n->held_desc += n->sp_nseg[i];
		if (n->sp_nseg[i] < n->min_desc)
			n->min_desc = n->sp_nseg[i];
		rem -= w;
	}
	if (rx_giveback(n, i))
		return -EIO;
	n->pend_buf = b;
	n->pend_len = base + rem;
	n->pend_off = base;
	n->pend_frame = (uint32_t)frame;
	n->rx_pend = true;
	r = rx_continue(n, done, false);
	return r == 0 ? -EAGAIN : (int)r;
}

/* Place frames while the backend has some and the guest has buffers.
 * @hup: the backend's fd reported a hang-up: if it has nothing more, it is
 * gone (a closed peer), and watching it would only spin. @expired: the
 * wait timer fired (see rx_continue). */
void vnet_rx_process(struct net *n, bool hup, bool expired)
{
	unsigned done = 0, budget = RX_BUDGET;
	bool want = true;
	int ret;

	pthread_mutex_lock(&n->rx_lock);
	if (!n->rx_running || n->rx_dead) {
		pthread_mutex_unlock(&n->rx_lock);
		return;
	}
	expired = expired && rx_timer_expired(n);
	while (budget--) {
		if (n->rx_pend) {
			ret = rx_continue(n, &done, expired);
			if (ret <= 0) {
				want = false; /* wait for buffers (or a reset) */
				break;
			}
			continue;
		}
		if (!n->rx_held) {
			ret = rx_pop(n, n->rxc, true);
			if (ret <= 0) {
				want = false;
				break;
			}
			n->rx_held = true;
		}
		if (n->rx_rl) {
			uint64_t w;

			/* A byte and an op now: the frame's length is known after. */
			if (!n->v->rl_take(n->rx_rl, 1, 1, &w)) {
				want = false; /* frames wait in the backend */
				vnet_rl_arm(n, w);
				break;
			}
			n->last_frame = 0;
		}
		ret = rx_one(n, &done);
		if (n->rx_rl)
			n->v->rl_charge(n->rx_rl, n->last_frame ? (int64_t)n->last_frame - 1 : -1,
					n->last_frame ? 0 : -1);
		if (ret == 0 && hup && !n->rx_dead) {
			n->rx_dead = true;
			n->h->log(n->in, CUB_LOG_WARN, "%s hung up; receiving stops", n->be->name);
		}
		if (ret == 0 || ret == -EIO) {
			want = ret == 0 && !n->rx_dead;
			break;
		}
		if (ret == -EAGAIN) {
			want = false;
			break;
		}
	}
	if (done % BATCH_NOTIFY)
		n->v->notify(n->rxq);
	vnet_interest(n, want, -1);
	pthread_mutex_unlock(&n->rx_lock);
}

/* The device's epoll set is readable: see which direction is ready. */
void vnet_event(void *arg)
{
	struct net *n = arg;
	struct epoll_event ev[4];
	bool rx = false, tx = false, hup = false, expired = false;
	int k = epoll_wait(n->efd, ev, 4, 0);

	for (int i = 0; i < k; i++) {
		if (ev[i].data.u32 & TAG_KICK) {
			uint64_t v;

			tx = read(n->kfd, &v, sizeof(v)) == sizeof(v) || tx;
			continue;
		}
		if (ev[i].data.u32 & TAG_RL) {
			uint64_t ticks;

			if (read(n->lfd, &ticks, sizeof(ticks)) == sizeof(ticks))
				rx = tx = true;
			continue;
		}
		if (ev[i].data.u32 & TAG_TIMER) {
			uint64_t ticks;

			/* read, or the level-triggered set stays readable */
			expired = read(n->tfd, &ticks, sizeof(ticks)) == sizeof(ticks);
			continue;
		}
		if (ev[i].data.u32 & TAG_RX && ev[i].events & EPOLLHUP)
			hup = true;
		if (ev[i].data.u32 & TAG_TX && ev[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			tx = true;
		if (ev[i].data.u32 & TAG_RX && ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
			rx = true;
	}
	if (tx) {
		vnet_interest(n, -1, false);
		vnet_tx_process(n);
	}
	if (rx || expired)
		vnet_rx_process(n, hup, expired);
}
