/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for virtio-vsock's packet paths: the plugin compiled
 * in, on a small host of its own with synthetic virtqueues (chains in
 * malloc'd buffers, so a device writing past a segment is caught) and real
 * Unix sockets for the host side. A fuzzed program plays the guest's
 * driver (packets on the transmit queue with fuzzed headers, lengths,
 * segment splits; receive and event buffers), the host's clients (CONNECT
 * lines or garbage, writes, reads, closes), listeners at <uds>_<port>, the
 * event loop, the clock, resets, snapshot loads. Checked after every step:
 * sanitizers; every packet the device gives the guest has a sane header,
 * fits its buffer and, for data, stays within the credit the guest last
 * gave on that connection; connections and buffered bytes stay within the
 * limits. Each input builds a fresh device and tears it down (LeakSanitizer
 * sees everything freed).
 *
 * Input: steps of STEP_LEN bytes: op, a, b, c, len (le16), x, y (le32).
 */
#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "seed.h"
#include "synth_host.h"
#include "../unit/vq_chain.h"
/* The plugin itself, for its static functions (tick) and its ops. */
#include "../../plugins/devices/virtio_vsock/virtio_vsock.c"

#define STEP_LEN 14
#define MAX_STEPS 256
#define QN 3
#define QCAP 64
#define NCLI 6
#define NSRV 6
#define NPAIR 16
#define MAX_CONNS 8

/* ---- the synthetic host ---- */

/* A queue: chains added at add, popped at pop (several may be out at
 * once, as with virtio), freed when pushed, in any order; head is the
 * oldest not yet pushed. Indices count up; slot = index % QCAP. */
struct fq {
	struct cub_vq_chain *slot[QCAP];
	bool out[QCAP]; /* popped, not pushed */
	unsigned head, pop, add;
};

static struct {
	struct fq q[QN];
	bool broken, started;
	char dir[64], uds[128];
} H;

static unsigned qidx(struct cub_vq *vq)
{
	return (unsigned)((struct fq *)(void *)vq - H.q);
}

static void chain_free(struct cub_vq_chain *c)
{
	for (unsigned i = 0; i < (unsigned)c->n_out + c->n_in; i++)
		free(c->iov[i].iov_base);
	free(c);
}

static int v_pop(struct cub_vq *vq, struct cub_vq_chain *c)
{
	struct fq *q = (struct fq *)(void *)vq;
	unsigned s;

	if (H.broken || !H.started)
		return -EIO;
	if (q->pop == q->add)
		return 0;
	s = q->pop++ % QCAP;
	memcpy(c, q->slot[s], sizeof(*c));
	c->out = c->iov;
	c->in = c->iov + c->n_out;
	/* The chain's memory stays until the push: head is its slot. */
	c->head = (uint16_t)s;
	q->out[s] = true;
	return 1;
}

struct pair {
	uint32_t local, gport;  /* the device's port, the guest's */
	uint32_t buf_alloc, fwd; /* what the guest last said */
	uint32_t sent;          /* data bytes the device sent on it */
	bool used;
};
static struct pair P[NPAIR];
static unsigned p_next;

static struct pair *pair_get(uint32_t local, uint32_t gport, bool make)
{
	for (unsigned i = 0; i < NPAIR; i++)
		if (P[i].used && P[i].local == local && P[i].gport == gport)
			return &P[i];
	if (!make)
		return NULL;
	P[p_next % NPAIR] = (struct pair){ .local = local, .gport = gport, .used = true };
	return &P[p_next++ % NPAIR];
}

static struct {
	uint32_t hport, gport;
} learned[4];
static unsigned n_learned;

/* A packet the device gave the guest. */
static void check_rx(const struct cub_vq_chain *c, uint32_t written)
{
	struct virtio_vsock_hdr h;
	uint8_t tmp[HDR_LEN];
	size_t off = 0;
	uint32_t len, sport, dport;
	uint16_t op;
	struct pair *p;

	if (written < HDR_LEN || written > c->in_len)
		abort();
	for (unsigned i = 0; i < c->n_in && off < HDR_LEN; i++) {
		size_t k = c->in[i].iov_len < HDR_LEN - off ? c->in[i].iov_len : HDR_LEN - off;

		memcpy(tmp + off, c->in[i].iov_base, k);
		off += k;
	}
	memcpy(&h, tmp, HDR_LEN);
	len = le32toh(h.len);
	op = le16toh(h.op);
	sport = le32toh(h.src_port);
	dport = le32toh(h.dst_port);
	if (le64toh(h.src_cid) != 2 || le64toh(h.dst_cid) != 3 || le16toh(h.type) != 1 ||
	    len != written - HDR_LEN || len > PKT_MAX || op < 1 || op > 7 ||
	    (len && op != VIRTIO_VSOCK_OP_RW)) {
		fprintf(stderr, "bad packet: cid %llu->%llu type %u op %u len %u written %u\n",
			(unsigned long long)le64toh(h.src_cid), (unsigned long long)le64toh(h.dst_cid),
			le16toh(h.type), op, len, written);
		abort();
	}
	if (op == VIRTIO_VSOCK_OP_REQUEST) {
		learned[n_learned % 4].hport = sport;
		learned[n_learned++ % 4].gport = dport;
		/* a new connection: nothing sent yet; the credit is what the
		 * guest said last on the pair (if it spoke before the
		 * REQUEST reached it, the device took that too) */
		p = pair_get(sport, dport, true);
		p->sent = 0;
	}
	if (op == VIRTIO_VSOCK_OP_RW && (p = pair_get(sport, dport, false))) {
		p->sent += len;
		/* never past the credit the guest gave */
		if ((uint32_t)(p->sent - p->fwd) > p->buf_alloc)
			abort();
	}
	if (op == VIRTIO_VSOCK_OP_RST && (p = pair_get(sport, dport, false)))
		p->used = false;
}

static void v_push(struct cub_vq *vq, const struct cub_vq_chain *c, uint32_t written)
{
	unsigned qi = qidx(vq);
	struct fq *q = &H.q[qi];
	unsigned s = c->head;

	if (s >= QCAP || !q->out[s])
		abort(); /* pushed what it never popped, or twice */
	if (qi == Q_RX)
		check_rx(q->slot[s], written);
	if (qi == Q_EVENT && written != 4)
		abort();
	chain_free(q->slot[s]);
	q->slot[s] = NULL;
	q->out[s] = false;
	while (q->head != q->pop && !q->slot[q->head % QCAP])
		q->head++;
}

static void v_push_batch(struct cub_vq *vq, const struct cub_vq_used *u, unsigned n)
{
	struct cub_vq_chain c;

	for (unsigned i = 0; i < n; i++) {
		c.head = u[i].head;
		v_push(vq, &c, u[i].written);
	}
}

static void v_notify(struct cub_vq *vq)
{
	(void)vq;
}

static void v_broken(struct cub_inst *in, const char *why)
{
	(void)in, (void)why;
	H.broken = true;
}

static const struct cub_virtio_host VH = {
	.size = sizeof(VH), .add = synth_add, .pop = v_pop, .push = v_push, .notify = v_notify,
	.broken = v_broken, .push_batch = v_push_batch,
};

static const struct cub_host HOST = {
	.size = sizeof(HOST), .log = synth_log, .log_ratelimited = synth_log, .fail = synth_fail,
	.fd_watch = synth_watch, .fd_unwatch = synth_unwatch, .clock_us = synth_clock, .virtio = &VH,
};

/* ---- the guest's buffers ---- */

static void q_add(unsigned qi, struct cub_vq_chain *c)
{
	struct fq *q = &H.q[qi];

	if (q->add - q->head == QCAP) {
		chain_free(c);
		return;
	}
	q->slot[q->add++ % QCAP] = c;
}

static struct cub_vq_chain *chain_new(void)
{
	struct cub_vq_chain *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	return c;
}

static void seg(struct cub_vq_chain *c, const void *data, size_t len, bool w)
{
	void *m = malloc(len ? len : 1);

	if (!m)
		abort();
	if (data)
		memcpy(m, data, len);
	else
		memset(m, 0xa5, len);
	if (vq_chain_add(c, m, len, w))
		abort();
}

static void q_clear(void)
{
	for (unsigned qi = 0; qi < QN; qi++) {
		struct fq *q = &H.q[qi];

		for (unsigned s = 0; s < QCAP; s++) {
			if (q->slot[s])
				chain_free(q->slot[s]);
			q->slot[s] = NULL;
			q->out[s] = false;
		}
		q->head = q->pop = q->add = 0;
	}
}

/* ---- the program ---- */

struct step {
	uint8_t op, a, b, c;
	uint16_t len;
	uint32_t x, y;
};

static int cli[NCLI], srv[NSRV], lis[2];
static uint8_t pattern[70000];

static void start(void)
{
	struct cub_vq *vqs[QN];

	for (unsigned i = 0; i < QN; i++)
		vqs[i] = (struct cub_vq *)(void *)&H.q[i];
	H.broken = false;
	H.started = true;
	S.ops->start(S.priv, vqs, QN);
}

static void stop(void)
{
	if (H.started)
		S.ops->stop(S.priv);
	H.started = false;
	q_clear();
}

static void pump(void)
{
	synth_pump(4);
}

static void tx_packet(const struct step *s)
{
	static const uint32_t gp[4] = { 1000, 1001, 1002, 52 };
	uint32_t dp[4] = { 52, 77, HOST_PORT_FIRST, s->x & 0xffff };
	struct virtio_vsock_hdr h = { 0 };
	uint16_t op = s->a % 9;
	uint32_t sport, dport, len = op == VIRTIO_VSOCK_OP_RW ? s->len % (PKT_MAX + 2) : 0;
	uint32_t claimed = len;
	struct cub_vq_chain *c = chain_new();
	bool corrupt = s->c & 0x9e;
	struct pair *p;

	if ((s->c & 1) && n_learned) {
		sport = learned[s->b % (n_learned < 4 ? n_learned : 4)].gport;
		dport = learned[s->b % (n_learned < 4 ? n_learned : 4)].hport;
	} else {
		sport = gp[s->b % 4];
		dport = dp[(s->b >> 2) % 4];
	}
	if (s->c & 16)
		claimed += s->c & 32 ? 1u : (uint32_t)-1;
	h.src_cid = htole64(s->c & 4 ? 9 : 3);
	h.dst_cid = htole64(s->c & 8 ? 3 : 2);
	h.src_port = htole32(sport);
	h.dst_port = htole32(dport);
	h.len = htole32(claimed);
	h.type = htole16(s->c & 2 ? 2 : 1);
	h.op = htole16(op);
	h.flags = htole32(s->x & 3);
	h.buf_alloc = htole32(s->x);
	h.fwd_cnt = htole32(s->y);
	if (s->c & 128) { /* too short for a header */
		seg(c, &h, s->len % HDR_LEN, false);
		q_add(Q_TX, c);
		return;
	}
	if (s->c & 32 && !(s->c & 16)) { /* the header in two pieces */
		seg(c, &h, 10, false);
		seg(c, (uint8_t *)&h + 10, HDR_LEN - 10, false);
	} else
		seg(c, &h, HDR_LEN, false);
	if (len > 1 && (s->c & 64)) {
		seg(c, pattern, len / 2, false);
		seg(c, pattern + len / 2, len - len / 2, false);
	} else if (len)
		seg(c, pattern, len, false);
	if ((s->c & 64) && !len)
		seg(c, NULL, 8, true); /* a writable part: dropped */
	/* The model: what the device will take as the guest's credit (it
	 * takes it from every well-formed packet on a live connection; the
	 * model from every well-formed one, which can only make it laxer). */
	if (!corrupt && op >= VIRTIO_VSOCK_OP_REQUEST && op <= VIRTIO_VSOCK_OP_CREDIT_REQUEST &&
	    !((s->c & 64) && !len)) {
		p = pair_get(dport, sport, op != VIRTIO_VSOCK_OP_RST);
		if (p && op == VIRTIO_VSOCK_OP_REQUEST)
			p->sent = 0;
		if (p && op == VIRTIO_VSOCK_OP_RST)
			p->used = false;
		else if (p) {
			p->buf_alloc = s->x;
			p->fwd = s->y;
		}
	}
	q_add(Q_TX, c);
	if (H.started && !H.broken)
		S.ops->notify(S.priv, Q_TX);
}

static void rx_post(const struct step *s)
{
	unsigned n = s->a % 8 + 1;

	for (unsigned i = 0; i < n; i++) {
		struct cub_vq_chain *c = chain_new();
		size_t size = HDR_LEN + 1 + s->len % 8192;

		if (s->c == 0xff)
			size = HDR_LEN; /* too small: the device breaks */
		if (s->c & 2 && size > 50) {
			seg(c, NULL, 20, true);
			seg(c, NULL, size - 20, true);
		} else
			seg(c, NULL, size, true);
		q_add(Q_RX, c);
	}
	if (H.started && !H.broken)
		S.ops->notify(S.priv, Q_RX);
}

static int unix_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static void drain(int fd)
{
	static uint8_t buf[65536];

	if (fd >= 0)
		while (read(fd, buf, sizeof(buf)) > 0)
			;
}

static void client_op(const struct step *s)
{
	int *fd = &cli[s->a % NCLI];
	char line[48];
	int k;

	switch (s->b % 4) {
	case 0: /* connect, say CONNECT (or garbage) */
		if (*fd >= 0)
			close(*fd);
		*fd = unix_connect(H.uds);
		if (*fd < 0)
			break;
		if (s->c & 1) {
			memset(line, 'A' + s->c % 26, sizeof(line));
			k = s->len % sizeof(line);
		} else
			k = snprintf(line, sizeof(line), "CONNECT %u\n",
				     s->c & 2 ? s->x : s->c & 4 ? 52u : 1000u);
		if (write(*fd, line, (size_t)k) < 0)
			break;
		break;
	case 1:
		if (*fd >= 0 && write(*fd, pattern, s->len % 8192) < 0)
			break;
		break;
	case 2:
		drain(*fd);
		break;
	default:
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
	}
}

static void listener_op(const struct step *s)
{
	static const unsigned ports[2] = { 52, 77 };
	unsigned li = s->a % 2;
	int *fd;

	switch (s->b % 4) {
	case 0:
		if (lis[li] < 0) {
			struct sockaddr_un a = { .sun_family = AF_UNIX };

			snprintf(a.sun_path, sizeof(a.sun_path), "%s_%u", H.uds, ports[li]);
			lis[li] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
			if (lis[li] >= 0 && (bind(lis[li], (struct sockaddr *)&a, sizeof(a)) < 0 ||
					     listen(lis[li], 16) < 0)) {
				close(lis[li]);
				lis[li] = -1;
			}
		}
		for (unsigned i = 0; lis[li] >= 0 && i < NSRV; i++)
			if (srv[i] < 0)
				srv[i] = accept4(lis[li], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		break;
	case 1:
		fd = &srv[s->c % NSRV];
		if (*fd >= 0 && write(*fd, pattern, s->len % 8192) < 0)
			break;
		break;
	case 2:
		drain(srv[s->c % NSRV]);
		break;
	default:
		fd = &srv[s->c % NSRV];
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
	}
}

static void run(const uint8_t *data, size_t size)
{
	struct vsock_cfg cfg = { .guest_cid = 3, .uds_path = H.uds, .max_conns = MAX_CONNS,
				 .buf_size = 4096 };
	struct vsock *vs;
	void *priv = NULL;
	uint8_t blob[16];
	size_t blen;

	memset(P, 0, sizeof(P));
	n_learned = p_next = 0;
	S.clock = 1000000;
	H.started = H.broken = false;
	for (int i = 0; i < NCLI; i++)
		cli[i] = -1;
	for (int i = 0; i < NSRV; i++)
		srv[i] = -1;
	lis[0] = lis[1] = -1;
	if (vsock_create((struct cub_inst *)&H, &HOST, &cfg, &priv))
		abort();
	vs = priv;
	start();
	for (unsigned n = 0; size >= STEP_LEN && n < MAX_STEPS; n++, data += STEP_LEN, size -= STEP_LEN) {
		struct step s = { data[0], data[1], data[2], data[3] };

		memcpy(&s.len, data + 4, 2);
		memcpy(&s.x, data + 6, 4);
		memcpy(&s.y, data + 10, 4);
		s.len = le16toh(s.len);
		s.x = le32toh(s.x);
		s.y = le32toh(s.y);
		switch (s.op % 12) {
		case 0:
		case 1:
			tx_packet(&s);
			break;
		case 2:
			rx_post(&s);
			break;
		case 3:
		case 4:
			client_op(&s);
			break;
		case 5:
			listener_op(&s);
			break;
		case 6:
		case 7:
			pump();
			break;
		case 8: /* time passes: deadlines */
			S.clock += s.x % 8000000;
			pthread_mutex_lock(&vs->lock);
			tick(vs);
			vsock_rx(vs);
			conn_reap(vs);
			pthread_mutex_unlock(&vs->lock);
			break;
		case 9: /* the driver resets the device */
			stop();
			start();
			break;
		case 10: /* a snapshot loaded: a transport reset is owed */
			if (vsock_save(priv, blob, sizeof(blob), &blen) || blen != 8)
				abort();
			stop();
			if (vsock_load(priv, blob, blen, 0))
				abort();
			start();
			break;
		default: { /* an event buffer */
			struct cub_vq_chain *c = chain_new();

			seg(c, NULL, s.c & 1 ? 2 : 4, true);
			q_add(Q_EVENT, c);
			if (H.started && !H.broken)
				S.ops->notify(S.priv, Q_EVENT);
		}
		}
		pthread_mutex_lock(&vs->lock);
		{
			uint64_t held = 0;

			for (struct conn *c = vs->all; c; c = c->next)
				held += c->len;
			if (vs->n_conns > MAX_CONNS || held > (uint64_t)MAX_CONNS * 4096)
				abort();
		}
		pthread_mutex_unlock(&vs->lock);
	}
	stop();
	vsock_destroy(priv);
	for (int i = 0; i < NCLI; i++)
		if (cli[i] >= 0)
			close(cli[i]);
	for (int i = 0; i < NSRV; i++)
		if (srv[i] >= 0)
			close(srv[i]);
	for (int i = 0; i < 2; i++)
		if (lis[i] >= 0)
			close(lis[i]);
	for (unsigned p = 0; p < 2; p++) {
		char path[160];

		snprintf(path, sizeof(path), "%s_%u", H.uds, p ? 77u : 52u);
		unlink(path);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static void put_step(uint8_t *p, uint8_t op, uint8_t a, uint8_t b, uint8_t c, uint16_t len,
		     uint32_t x, uint32_t y)
{
	p[0] = op, p[1] = a, p[2] = b, p[3] = c;
	len = htole16(len), x = htole32(x), y = htole32(y);
	memcpy(p + 4, &len, 2);
	memcpy(p + 6, &x, 4);
	memcpy(p + 10, &y, 4);
}

static void cleanup(void)
{
	rmdir(H.dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_SEED_DIR");
	uint8_t seed[STEP_LEN * 12];
	unsigned n = 0;

	(void)argc, (void)argv;
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(i * 7);
	snprintf(H.dir, sizeof(H.dir), "%s/fuzzvsXXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(H.dir))
		abort();
	snprintf(H.uds, sizeof(H.uds), "%s/v.sock", H.dir);
	atexit(cleanup);
	if (!dir)
		return 0;
	/* A host client's handshake, data both ways, a guest connection. */
	put_step(seed + STEP_LEN * n++, 2, 7, 0, 0, 4000, 0, 0);        /* rx buffers */
	put_step(seed + STEP_LEN * n++, 3, 0, 0, 4, 0, 0, 0);           /* CONNECT 52 */
	put_step(seed + STEP_LEN * n++, 6, 0, 0, 0, 0, 0, 0);           /* pump */
	put_step(seed + STEP_LEN * n++, 0, 2, 0, 1, 0, 65536, 0);       /* RESPONSE */
	put_step(seed + STEP_LEN * n++, 3, 0, 1, 0, 3000, 0, 0);        /* client writes */
	put_step(seed + STEP_LEN * n++, 6, 0, 0, 0, 0, 0, 0);
	put_step(seed + STEP_LEN * n++, 0, 5, 0, 1, 100, 65536, 3000);  /* guest writes */
	put_step(seed + STEP_LEN * n++, 5, 0, 0, 0, 0, 0, 0);           /* listener at _52 */
	put_step(seed + STEP_LEN * n++, 0, 1, 0, 0, 0, 65536, 0);       /* guest REQUEST to 52 */
	put_step(seed + STEP_LEN * n++, 0, 4, 0, 1, 0, 3, 0);           /* SHUTDOWN */
	put_step(seed + STEP_LEN * n++, 10, 0, 0, 0, 0, 0, 0);          /* snapshot load */
	put_step(seed + STEP_LEN * n++, 11, 0, 0, 0, 0, 0, 0);          /* event buffer */
	fuzz_write_seed(dir, "seed-handshake", seed, sizeof(seed));
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run(data, size);
	return 0;
}
