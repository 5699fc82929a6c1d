/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for virtio-net's data path (plugins/devices/virtio_net):
 * the plugin compiled in, on a synthetic host of its own (queues of chains
 * in malloc'd segments, so a device writing past one is caught; pop, push,
 * push_batch, unpop and queue_size as the virtio core gives them, a ring of
 * a fuzzed size that holds only so many descriptors; rate limiters) and an
 * in-memory backend whose frames and failures the input makes. A fuzzed
 * program plays the guest's driver (receive buffers of any shape, length
 * and alignment, transmit chains with fuzzed headers, lengths and splits,
 * kicks, feature choices, resets), the backend (frames of 4 to 65550 bytes
 * with fuzzed vnet headers, truncation, errors, a full or failing send
 * side, a limiter short of tokens), the event loop and the wait timer.
 *
 * Checked after every step: sanitizers; every chain the device gives back
 * it popped, once, and unpop gives back exactly the chains popped last;
 * nothing is said written past a chain's writable bytes; a received frame
 * reaches the guest whole, in order, at most once, in one batch of buffers
 * whose first header counts them (num_buffers), with its header as the
 * backend gave it (offload flags the guest did not accept cleared) or
 * zeroes, or else its buffers come back empty; what the backend is asked
 * to send is exactly a transmit chain's frame (after the chain's header
 * when the vnet header is on); the device's packet counters match what the
 * guest and the backend saw. Each input builds a fresh device and tears it
 * down, so LeakSanitizer sees everything freed.
 *
 * Input: two configuration bytes, then steps of STEP_LEN bytes: op, a, b,
 * c, len (le16), x (le16).
 */
#include <endian.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "seed.h"
#include "synth_host.h"
#include "../unit/vq_chain.h"
/* The plugin itself, for struct net and its ops; queues.c is linked beside. */
#include "../../plugins/devices/virtio_net/virtio_net.c"

#define STEP_LEN 8
#define MAX_STEPS 192
#define QCAP 256        /* slots: the largest ring the device takes */
#define MAX_PENDING 16  /* frames the backend holds for the guest */
#define MAX_FRAMES 256  /* frames handed out in one input */
#define LOOP_ROUNDS 32

#define TRAP(...)                                             \
	do {                                                  \
		fprintf(stderr, "fuzz_net: " __VA_ARGS__);    \
		fputc('\n', stderr);                          \
		abort();                                      \
	} while (0)

/* ---- the synthetic host ---- */

struct fq {
	struct cub_vq_chain *slot[QCAP];
	bool out[QCAP];         /* popped, not pushed */
	unsigned head, pop, add; /* oldest not pushed, next to pop, next to add */
	unsigned descs;         /* descriptors of the chains not yet pushed */
};

struct frame {
	uint32_t len;           /* frame bytes, without the header */
	struct vnet_hdr hd;     /* what the backend puts before it (vnet on) */
};

static struct {
	struct fq q[2];
	bool broken, started;
	unsigned qsize;         /* descriptors the ring holds */
	/* the backend */
	struct cub_net be;
	int rx_fd, tx_fd;
	bool rx_ready;          /* rx_fd's counter is non-zero */
	bool vnet_cap, vnet_on, unpop;
	uint32_t offloads;
	int send_mode;          /* 0 takes the frame, 1 -EAGAIN, 2 -ENOBUFS */
	int64_t recv_err;       /* returned by the next recv, once */
	bool rl_deny;
	uint32_t pend[MAX_PENDING]; /* seqs waiting in the backend, oldest first */
	unsigned n_pend;
	struct frame f[MAX_FRAMES]; /* by seq */
	uint32_t next_seq;
	int64_t last_seq;       /* the last frame the guest got (-1: none) */
	/* what the guest and the backend saw */
	uint64_t rx_seen, tx_sent;
	uint64_t acked;
} H;

static struct net *N;
static uint8_t scratch[CUB_NET_MAX_FRAME + 2 * HDR];

static unsigned qidx(struct cub_vq *vq)
{
	unsigned i = (unsigned)((struct fq *)(void *)vq - H.q);

	if (i > Q_TX)
		TRAP("a queue the host never gave");
	return i;
}

static void chain_free(struct cub_vq_chain *c)
{
	for (unsigned i = 0; i < (unsigned)c->n_out + c->n_in; i++)
		free((uint8_t *)c->iov[i].iov_base - ((uintptr_t)c->iov[i].iov_base & 15)); /* seg's */
	free(c);
}

static int v_pop(struct cub_vq *vq, struct cub_vq_chain *c)
{
	struct fq *q = &H.q[qidx(vq)];
	unsigned s;

	if (!H.started)
		TRAP("pop on a stopped device");
	if (H.broken)
		return -EIO;
	if (q->pop == q->add)
		return 0;
	s = q->pop++ % QCAP;
	memcpy(c, q->slot[s], sizeof(*c));
	c->out = c->iov;
	c->in = c->iov + c->n_out;
	c->head = (uint16_t)s;
	q->out[s] = true;
	return 1;
}

static void retire(struct fq *q, unsigned s)
{
	q->descs -= (unsigned)q->slot[s]->n_out + q->slot[s]->n_in;
	chain_free(q->slot[s]);
	q->slot[s] = NULL;
	q->out[s] = false;
	while (q->head != q->pop && !q->slot[q->head % QCAP])
		q->head++;
}

static void v_push(struct cub_vq *vq, const struct cub_vq_chain *c, uint32_t written)
{
	unsigned qi = qidx(vq);
	struct fq *q = &H.q[qi];
	unsigned s = c->head;

	if (s >= QCAP || !q->out[s])
		TRAP("queue %u: pushed chain %u, which is not out", qi, s);
	if (qi == Q_RX)
		TRAP("a receive buffer pushed on its own: frames go in batches");
	if (written)
		TRAP("a transmit chain pushed with %u bytes written", written);
	retire(q, s);
}

/* Bytes [0, written) of chain c's writable part, from offset at of out. */
static size_t gather_in(const struct cub_vq_chain *c, uint32_t written, uint8_t *out, size_t at,
			size_t cap)
{
	size_t done = 0;

	for (unsigned i = 0; i < c->n_in && done < written; i++) {
		size_t k = c->in[i].iov_len < written - done ? c->in[i].iov_len : written - done;

		if (at + done + k > cap)
			TRAP("a received frame longer than any the backend gave");
		memcpy(out + at + done, c->in[i].iov_base, k);
		done += k;
	}
	return done;
}

static uint8_t pat(uint32_t seq, size_t i)
{
	return (uint8_t)(seq * 29u + i * 7u + (i >> 9));
}

/* One frame's buffers, as the device hands them to the guest at once. */
static void check_rx(const struct cub_vq_used *u, unsigned n)
{
	struct fq *q = &H.q[Q_RX];
	size_t total = 0;
	struct vnet_hdr hd;
	struct frame *f;
	uint32_t seq;
	bool all_zero = true;

	if (!n)
		TRAP("an empty batch");
	for (unsigned i = 0; i < n; i++) {
		const struct cub_vq_chain *c;

		if (u[i].head >= QCAP || !q->out[u[i].head])
			TRAP("receive buffer %u pushed, which is not out", u[i].head);
		c = q->slot[u[i].head];
		if (u[i].written > c->in_len)
			TRAP("%u bytes said written into a %llu-byte receive buffer", u[i].written,
			     (unsigned long long)c->in_len);
		if (u[i].written)
			all_zero = false;
		total += gather_in(c, u[i].written, scratch, total, sizeof(scratch));
	}
	if (all_zero)
		return; /* a frame dropped: its buffers back empty */
	if (total < HDR + 4)
		TRAP("a received frame of %zu bytes with its header", total);
	memcpy(&hd, scratch, HDR);
	if (le16toh(hd.num_buffers) != n)
		TRAP("num_buffers %u, the frame came in %u buffers", le16toh(hd.num_buffers), n);
	if (!N->mrg && n != 1)
		TRAP("%u buffers without mergeable buffers", n);
	seq = le32toh(*(uint32_t *)(scratch + HDR));
	if (seq >= H.next_seq || (int64_t)seq <= H.last_seq)
		TRAP("frame %u delivered (the last was %lld, %u given)", seq, (long long)H.last_seq,
		     H.next_seq);
	f = &H.f[seq];
	if (total - HDR != f->len)
		TRAP("frame %u: %zu bytes delivered of %u", seq, total - HDR, f->len);
	for (size_t i = 4; i < f->len; i++)
		if (scratch[HDR + i] != pat(seq, i))
			TRAP("frame %u: byte %zu differs", seq, i);
	if (N->vnet) {
		if (hd.gso_type != f->hd.gso_type || hd.hdr_len != f->hd.hdr_len ||
		    hd.gso_size != f->hd.gso_size || hd.csum_start != f->hd.csum_start ||
		    hd.csum_offset != f->hd.csum_offset)
			TRAP("frame %u: its header changed on the way", seq);
		if (hd.flags != f->hd.flags &&
		    (hd.flags || (H.acked & F(VIRTIO_NET_F_GUEST_CSUM))))
			TRAP("frame %u: header flags %#x, the backend's %#x", seq, hd.flags,
			     f->hd.flags);
	} else if (hd.flags || hd.gso_type || hd.hdr_len || hd.gso_size || hd.csum_start ||
		   hd.csum_offset) {
		TRAP("frame %u: a plain frame's header is not zeroes", seq);
	}
	H.last_seq = seq;
	H.rx_seen++;
}

static void v_push_batch(struct cub_vq *vq, const struct cub_vq_used *u, unsigned n)
{
	unsigned qi = qidx(vq);

	if (qi == Q_RX)
		check_rx(u, n);
	for (unsigned i = 0; i < n; i++) {
		if (u[i].head >= QCAP || !H.q[qi].out[u[i].head])
			TRAP("queue %u: pushed chain %u, which is not out", qi, u[i].head);
		if (qi == Q_TX && u[i].written)
			TRAP("a transmit chain pushed with %u bytes written", u[i].written);
		retire(&H.q[qi], u[i].head);
	}
}

static void v_notify(struct cub_vq *vq)
{
	(void)qidx(vq);
}

static void v_broken(struct cub_inst *in, const char *why)
{
	(void)in;
	if (S.verbose)
		fprintf(stderr, "broken: %s\n", why);
	H.broken = true;
}

static uint16_t v_queue_size(struct cub_vq *vq)
{
	(void)qidx(vq);
	return (uint16_t)H.qsize;
}

static bool v_rl_take(struct cub_rl *rl, uint64_t bytes, uint64_t ops, uint64_t *wait_us)
{
	(void)rl, (void)bytes, (void)ops;
	if (!H.rl_deny)
		return true;
	*wait_us = 1;
	return false;
}

static void v_rl_charge(struct cub_rl *rl, int64_t bytes, int64_t ops)
{
	(void)rl, (void)bytes, (void)ops;
}

static int v_unpop(struct cub_vq *vq, const uint16_t *heads, unsigned n)
{
	struct fq *q = &H.q[qidx(vq)];

	if (n > q->pop - q->head)
		TRAP("unpop of %u chains, %u out", n, q->pop - q->head);
	for (unsigned i = 0; i < n; i++) {
		unsigned s = (q->pop - n + i) % QCAP;

		if (heads[i] != s || !q->out[s])
			TRAP("unpop: chain %u given back where %u was popped", heads[i], s);
	}
	for (unsigned i = 0; i < n; i++)
		q->out[(q->pop - n + i) % QCAP] = false;
	q->pop -= n;
	return 0;
}

static struct cub_virtio_host VH = {
	.size = sizeof(VH), .add = synth_add, .pop = v_pop, .push = v_push, .notify = v_notify,
	.broken = v_broken, .push_batch = v_push_batch, .queue_size = v_queue_size,
	.rl_take = v_rl_take, .rl_charge = v_rl_charge, .unpop = v_unpop,
};

/* ---- the backend ---- */

static void rx_signal(void)
{
	uint64_t v = 1;

	if (H.n_pend && !H.rx_ready) {
		if (write(H.rx_fd, &v, sizeof(v)) != sizeof(v))
			abort();
		H.rx_ready = true;
	} else if (!H.n_pend && H.rx_ready) {
		if (read(H.rx_fd, &v, sizeof(v)) != sizeof(v))
			abort();
		H.rx_ready = false;
	}
}

static void b_info(void *priv, struct cub_net_info *out)
{
	(void)priv;
	*out = (struct cub_net_info){ .link_up = true, .vnet_hdr = H.vnet_cap,
				      .offloads = H.vnet_cap ? H.offloads : 0,
				      .rx_fd = H.rx_fd, .tx_fd = H.tx_fd };
}

static int b_set_vnet_hdr(void *priv, bool on)
{
	(void)priv;
	if (!H.vnet_cap)
		TRAP("vnet headers asked of a backend without them");
	H.vnet_on = on;
	return 0;
}

static int b_set_offloads(void *priv, uint32_t off)
{
	(void)priv;
	if (!H.vnet_on || (off & ~H.offloads))
		TRAP("offloads %#x asked (vnet %d, the backend has %#x)", off, H.vnet_on, H.offloads);
	return 0;
}

/* What the device asks the backend to send must be the chain it popped last. */
static int64_t b_send(void *priv, const struct iovec *iov, int iovcnt)
{
	struct fq *q = &H.q[Q_TX];
	const struct cub_vq_chain *c;
	size_t sent = 0, want, off = 0;

	(void)priv;
	if (H.send_mode == 1 && H.tx_fd >= 0)
		return -EAGAIN;
	if (q->pop == q->head)
		TRAP("send with no transmit chain out");
	c = q->slot[(q->pop - 1) % QCAP];
	for (int i = 0; i < iovcnt; i++) {
		if (sent + iov[i].iov_len > sizeof(scratch))
			TRAP("send of more than a frame");
		memcpy(scratch + sent, iov[i].iov_base, iov[i].iov_len);
		sent += iov[i].iov_len;
	}
	want = c->out_len - HDR + (H.vnet_on ? HDR : 0);
	if (sent != want)
		TRAP("send of %zu bytes for a %llu-byte chain", sent, (unsigned long long)c->out_len);
	/* compare against the chain's bytes: its header (vnet) then the frame */
	for (unsigned i = 0, pos = 0; i < c->n_out; i++) {
		for (size_t j = 0; j < c->out[i].iov_len; j++, pos++) {
			uint8_t b = ((const uint8_t *)c->out[i].iov_base)[j];

			if (pos < HDR && !H.vnet_on)
				continue;
			if (scratch[off++] != b)
				TRAP("sent byte %zu differs from the chain's", off - 1);
		}
	}
	if (H.send_mode == 2)
		return -ENOBUFS;
	H.tx_sent++;
	return (int64_t)sent;
}

static int64_t b_recv(void *priv, const struct iovec *iov, int iovcnt)
{
	size_t cap = 0, need, pos = 0;
	uint8_t hdr[HDR];
	struct frame *f;
	uint32_t seq;

	(void)priv;
	if (H.recv_err) {
		int64_t e = H.recv_err;

		H.recv_err = 0;
		if (e == -EMSGSIZE && H.n_pend) {
			memmove(H.pend, H.pend + 1, --H.n_pend * sizeof(*H.pend));
			rx_signal();
		}
		return e;
	}
	if (!H.n_pend)
		return 0;
	seq = H.pend[0];
	memmove(H.pend, H.pend + 1, --H.n_pend * sizeof(*H.pend));
	rx_signal();
	f = &H.f[seq];
	for (int i = 0; i < iovcnt; i++)
		cap += iov[i].iov_len;
	need = f->len + (H.vnet_on ? HDR : 0);
	if (need > cap)
		return -EMSGSIZE; /* truncated: a datagram socket's MSG_TRUNC */
	memcpy(hdr, &f->hd, HDR);
	for (int i = 0; i < iovcnt && pos < need; i++) {
		uint8_t *p = iov[i].iov_base;

		for (size_t j = 0; j < iov[i].iov_len && pos < need; j++, pos++) {
			size_t at = H.vnet_on ? pos : pos + HDR; /* frame byte at - HDR */

			p[j] = at < HDR ? hdr[at] : at - HDR < 4 ? (uint8_t)(seq >> (8 * (at - HDR)))
							      : pat(seq, at - HDR);
		}
	}
	return (int64_t)need;
}

static void b_close(void *priv)
{
	(void)priv;
}

static const struct cub_net_ops BOPS = {
	.info = b_info, .set_vnet_hdr = b_set_vnet_hdr, .set_offloads = b_set_offloads,
	.send = b_send, .recv = b_recv, .close = b_close,
};

static int n_open(struct cub_inst *in, const char *key, struct cub_net **out)
{
	(void)in, (void)key;
	H.be = (struct cub_net){ .ops = &BOPS, .priv = &H, .name = "fake[net0]",
				 .dev_id = "net0", .vm_path = "" };
	b_info(&H, &H.be.info);
	*out = &H.be;
	return 0;
}

static void n_close(struct cub_inst *in, struct cub_net *n)
{
	(void)in, (void)n;
}

static const struct cub_net_host NH = { .size = sizeof(NH), .open = n_open, .close = n_close };

static struct cub_host HOST = {
	.size = sizeof(HOST), .log = synth_log, .log_ratelimited = synth_log, .fail = synth_fail,
	.fd_watch = synth_watch, .fd_unwatch = synth_unwatch, .clock_us = synth_clock, .virtio = &VH,
	.net = &NH,
};

/* ---- the guest ---- */

static void q_clear(void)
{
	for (unsigned qi = 0; qi < 2; qi++) {
		struct fq *q = &H.q[qi];

		for (unsigned s = 0; s < QCAP; s++) {
			if (q->slot[s])
				chain_free(q->slot[s]);
			q->slot[s] = NULL;
			q->out[s] = false;
		}
		q->head = q->pop = q->add = q->descs = 0;
	}
}

/* A segment of len bytes starting at offset al (0-15) of its allocation,
 * so that where a frame lands in it is the input's to choose. */
static void seg(struct cub_vq_chain *c, size_t len, unsigned al, bool w, const uint8_t *data)
{
	void *mv;
	uint8_t *m;

	if (posix_memalign(&mv, 16, al + (len ? len : 1)))
		abort();
	m = mv;
	if (data)
		memcpy(m + al, data, len);
	else
		memset(m + al, 0xa5, len);
	if (vq_chain_add(c, m + al, len, w))
		abort();
}

/* Add a chain to queue qi if the ring has room for its descriptors. */
static void q_add(unsigned qi, struct cub_vq_chain *c)
{
	struct fq *q = &H.q[qi];
	unsigned d = (unsigned)c->n_out + c->n_in;

	if (q->add - q->head == QCAP || q->descs + d > H.qsize) {
		chain_free(c);
		return;
	}
	q->descs += d;
	q->slot[q->add++ % QCAP] = c;
}

static struct cub_vq_chain *chain_new(void)
{
	struct cub_vq_chain *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	return c;
}

static void kick(unsigned q)
{
	if (H.started && !H.broken)
		S.ops->notify(S.priv, q);
}

/* Receive buffers: nseg segments splitting len bytes, at alignment al. */
static void rx_post(uint8_t a, uint8_t b, uint8_t c, uint16_t len)
{
	struct cub_vq_chain *ch = chain_new();
	unsigned nseg = 1 + a % 6;
	size_t total = a & 0x80 ? len : len % 4096;

	if (c == 0xff)
		seg(ch, 64, 0, false, NULL); /* a readable segment: the device must refuse it */
	for (unsigned i = 0; i < nseg; i++)
		seg(ch, i + 1 < nseg ? total / nseg : total - total / nseg * (nseg - 1),
		    (b >> (i & 3)) & 15, true, NULL);
	q_add(Q_RX, ch);
	if (c & 1)
		kick(Q_RX);
}

/* A transmit chain: header fields from the input, a frame of len bytes in
 * nseg segments (the first the header alone when c says so). */
static void tx_post(uint8_t a, uint8_t b, uint8_t c, uint16_t len, uint16_t x)
{
	static uint8_t buf[CUB_NET_MAX_FRAME + 2 * HDR];
	struct cub_vq_chain *ch = chain_new();
	struct vnet_hdr hd = { .flags = a & 3, .gso_type = b, .hdr_len = htole16(x & 0xff),
			       .gso_size = htole16(x), .csum_start = htole16(x >> 4),
			       .csum_offset = htole16(x & 0x3f) };
	size_t flen = a & 0x80 ? (size_t)len + (a & 0x40 ? CUB_NET_MAX_FRAME - 65535 + (a & 7) : 0)
			       : len % 1600;
	size_t total = (a & 0x20 ? HDR / 2 : HDR) + flen, at = 0;
	unsigned nseg = 1 + (c >> 1) % 6;

	if (total > sizeof(buf))
		total = sizeof(buf);
	memcpy(buf, &hd, HDR);
	for (size_t i = HDR; i < total; i++)
		buf[i] = (uint8_t)(i * 13 + x);
	if (c & 1 && total >= HDR) { /* the header in a segment of its own */
		seg(ch, HDR, 0, false, buf);
		at = HDR;
	}
	for (unsigned i = 0; i < nseg && at < total; i++) {
		size_t k = i + 1 < nseg ? (total - at) / (nseg - i) : total - at;

		seg(ch, k, (unsigned)(x >> i) & 15, false, buf + at);
		at += k;
	}
	if (c == 0xff)
		seg(ch, 16, 0, true, NULL); /* a writable segment: the device must refuse it */
	q_add(Q_TX, ch);
	if (a & 0x10)
		kick(Q_TX);
}

/* The backend gets a frame for the guest. */
static void frame_in(uint8_t a, uint8_t b, uint8_t c, uint16_t len, uint16_t x)
{
	struct frame *f;

	if (H.n_pend == MAX_PENDING || H.next_seq == MAX_FRAMES)
		return;
	f = &H.f[H.next_seq];
	f->len = a & 1 ? 4 + (uint32_t)len % (CUB_NET_MAX_FRAME - 3) : 4 + (uint32_t)len % 1600;
	f->hd = (struct vnet_hdr){ .flags = b & 3, .gso_type = c, .hdr_len = htole16(x & 0xff),
				   .gso_size = htole16(x), .csum_start = htole16(x >> 3),
				   .csum_offset = htole16(x & 0x3f), .num_buffers = htole16(x) };
	H.pend[H.n_pend++] = H.next_seq++;
	rx_signal();
}

static void pump(void)
{
	synth_pump(LOOP_ROUNDS);
}

/* The wait for more receive buffers runs out now rather than in 100 ms. */
static void timer_fire(void)
{
	struct itimerspec t = { .it_value = { 0, 1 } };
	struct pollfd p = { .fd = N->tfd, .events = POLLIN };

	if (!N->rx_waiting)
		return;
	timerfd_settime(N->tfd, 0, &t, NULL);
	poll(&p, 1, 50);
	pump();
}

static void start(uint64_t want)
{
	static struct cub_vq *vqs[2];
	uint64_t f = N->offered & want;

	vqs[0] = (struct cub_vq *)(void *)&H.q[0];
	vqs[1] = (struct cub_vq *)(void *)&H.q[1];
	if (S.ops->set_features(S.priv, f))
		f = N->offered & (F(VIRTIO_NET_F_MAC) | F(VIRTIO_NET_F_MRG_RXBUF));
	if (S.ops->set_features(S.priv, f))
		TRAP("features %#llx refused", (unsigned long long)f);
	H.acked = f;
	H.started = true;
	H.broken = false;
	if (S.ops->start(S.priv, vqs, 2))
		H.started = false;
}

static void stop(void)
{
	if (H.started)
		S.ops->stop(S.priv);
	H.started = false;
	q_clear();
}

static void run(const uint8_t *data, size_t size)
{
	struct net_cfg cfg = { .backend = "fake", .mac = "", .mtu = 0 };
	uint8_t conf, feat;
	void *priv;

	if (size < 2)
		return;
	conf = data[0];
	feat = data[1];
	data += 2;
	size -= 2;
	memset(&H, 0, sizeof(H));
	H.last_seq = -1;
	H.vnet_cap = conf & 1;
	H.offloads = (conf & 2 ? CUB_NET_OFF_CSUM : 0) |
		     (conf & 4 ? CUB_NET_OFF_TSO4 | CUB_NET_OFF_TSO6 | CUB_NET_OFF_UFO |
					 CUB_NET_OFF_TSO_ECN
			       : 0);
	VH.unpop = conf & 8 ? v_unpop : NULL;
	if (conf & 16)
		cfg.rx_rl = cfg.tx_rl = (struct cub_rl *)(void *)&H;
	H.qsize = 16u << ((conf >> 6) & 3);
	H.rx_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	H.tx_fd = conf & 32 ? eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) : -1;
	if (H.rx_fd < 0 || (conf & 32 && H.tx_fd < 0))
		abort();
	if (net_create((struct cub_inst *)&H, &HOST, &cfg, &priv))
		TRAP("create failed");
	N = priv;
	/* feat: bits of the offered features the driver takes, as a mask */
	start((feat & 1 ? ~0ull : ~(F(VIRTIO_NET_F_CSUM) | F(VIRTIO_NET_F_GUEST_CSUM))) &
	      (feat & 2 ? ~0ull : ~F(VIRTIO_NET_F_MRG_RXBUF)) &
	      (feat & 4 ? ~0ull : ~(F(VIRTIO_NET_F_GUEST_TSO4) | F(VIRTIO_NET_F_GUEST_TSO6))) &
	      (feat & 8 ? ~0ull : ~(F(VIRTIO_NET_F_HOST_TSO4) | F(VIRTIO_NET_F_HOST_TSO6))));
	for (unsigned n = 0; size >= STEP_LEN && n < MAX_STEPS;
	     n++, data += STEP_LEN, size -= STEP_LEN) {
		uint8_t op = data[0], a = data[1], b = data[2], c = data[3];
		uint16_t len = (uint16_t)(data[4] | data[5] << 8), x = (uint16_t)(data[6] | data[7] << 8);

		switch (op % 12) {
		case 0:
		case 1:
			rx_post(a, b, c, len);
			break;
		case 2:
		case 3:
			tx_post(a, b, c, len, x);
			break;
		case 4:
			kick(a & 1 ? Q_TX : Q_RX);
			break;
		case 5:
		case 6:
			frame_in(a, b, c, len, x);
			break;
		case 7:
			pump();
			break;
		case 8: /* the backend changes its mind */
			switch (a % 5) {
			case 0: H.send_mode = b % 3; break;
			case 1: H.recv_err = -EIO; break;
			case 2: H.recv_err = -EMSGSIZE; break;
			case 3: H.rl_deny = !H.rl_deny; break;
			default: H.recv_err = -ECONNRESET; break;
			}
			break;
		case 9:
			timer_fire();
			break;
		case 10: /* the driver resets the device and negotiates again */
			stop();
			start(((uint64_t)x << 16 | (uint64_t)len) | (a & 1 ? ~0xffffffffull : 0));
			break;
		default: { /* config space */
			uint8_t cfgb[CFG_SIZE];
			unsigned off = a % CFG_SIZE, l = 1 + b % 4;

			if (off + l <= CFG_SIZE)
				S.ops->config_read(S.priv, off, cfgb, l);
		}
		}
		if (atomic_load(&N->rx_packets) != H.rx_seen ||
		    atomic_load(&N->tx_packets) != H.tx_sent)
			TRAP("counters: rx %llu (guest saw %llu), tx %llu (backend sent %llu)",
			     (unsigned long long)atomic_load(&N->rx_packets),
			     (unsigned long long)H.rx_seen,
			     (unsigned long long)atomic_load(&N->tx_packets),
			     (unsigned long long)H.tx_sent);
	}
	stop();
	net_destroy(priv);
	close(H.rx_fd);
	if (H.tx_fd >= 0)
		close(H.tx_fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static void put_step(uint8_t *p, uint8_t op, uint8_t a, uint8_t b, uint8_t c, uint16_t len,
		     uint16_t x)
{
	p[0] = op, p[1] = a, p[2] = b, p[3] = c;
	p[4] = (uint8_t)len, p[5] = (uint8_t)(len >> 8);
	p[6] = (uint8_t)x, p[7] = (uint8_t)(x >> 8);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_SEED_DIR");
	uint8_t seed[2 + STEP_LEN * 12];
	unsigned n = 0;

	(void)argc, (void)argv;
	S.verbose = getenv("FUZZ_VERBOSE") != NULL;
	if (!dir)
		return 0;
	/* A tap-like backend with offloads, mergeable buffers, unpop: small
	 * and large frames in, frames out, a reset. */
	seed[0] = 1 | 2 | 4 | 8 | 32 | 0x40;
	seed[1] = 0x0f;
	put_step(seed + 2 + STEP_LEN * n++, 0, 0x81, 4, 1, 1536, 0);    /* rx buffers */
	put_step(seed + 2 + STEP_LEN * n++, 0, 0x80, 0, 1, 1536, 0);
	put_step(seed + 2 + STEP_LEN * n++, 5, 0, 0, 0, 1000, 0);       /* a small frame */
	put_step(seed + 2 + STEP_LEN * n++, 5, 1, 1, 1, 9000, 54);      /* a TSO frame */
	put_step(seed + 2 + STEP_LEN * n++, 7, 0, 0, 0, 0, 0);          /* the loop */
	put_step(seed + 2 + STEP_LEN * n++, 0, 0x82, 0, 1, 4096, 0);
	put_step(seed + 2 + STEP_LEN * n++, 7, 0, 0, 0, 0, 0);
	put_step(seed + 2 + STEP_LEN * n++, 9, 0, 0, 0, 0, 0);          /* the wait runs out */
	put_step(seed + 2 + STEP_LEN * n++, 2, 0x11, 0, 2, 600, 7);     /* a frame out */
	put_step(seed + 2 + STEP_LEN * n++, 2, 0x91, 1, 5, 30000, 7);   /* a big one, csum */
	put_step(seed + 2 + STEP_LEN * n++, 10, 1, 0, 0, 0xffff, 0xffff); /* reset */
	put_step(seed + 2 + STEP_LEN * n++, 11, 0, 3, 0, 0, 0);         /* config */
	fuzz_write_seed(dir, "seed-tap", seed, sizeof(seed));
	/* A plain socket-like backend: no vnet, no unpop, a limiter. */
	seed[0] = 16;
	seed[1] = 0;
	fuzz_write_seed(dir, "seed-plain", seed, sizeof(seed));
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run(data, size);
	return 0;
}
