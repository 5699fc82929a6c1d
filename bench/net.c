/* SPDX-License-Identifier: Apache-2.0 */
/* bench/net: the virtio-net path on the host (split virtqueues in guest RAM,
 * the virtio-net plugin, the net host, the socket backend on a socketpair)
 * against a plain sendmsg/recvmsg loop on the same socketpair, same run.
 * Usage: net [RUNS [tx|rx]] */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cubicle/net.h"
#include "harness.h"

/*
 * The driver side plays a Linux guest: one descriptor per buffer, mergeable
 * receive buffers of 1536 bytes (4096 for 64 KiB frames, as Linux's
 * buffer-size average grows to a page), EVENT_IDX on both sides (a kick only
 * when the device asked for one, an interrupt likewise). A "vCPU" (the main
 * thread) posts and kicks; transmit then runs on it, as on a vCPU's
 * ioeventfd; receive runs on an event-loop thread watching the device's fd.
 * Frames come from, or go to, a peer thread on the socketpair's other end
 * doing blocking send/recv; the plain loop replaces the device by blocking
 * sendmsg/recvmsg on the same end.
 */

#define QSIZE	  BENCH_QSIZE
#define RX_DESC	  0x0
#define RX_AVAIL  0x1000
#define RX_USED	  0x2000
#define TX_DESC	  0x4000
#define TX_AVAIL  0x5000
#define TX_USED	  0x6000
#define RX_DATA	  0x100000 /* QSIZE buffers of up to 4096 */
#define TX_DATA	  0x200000 /* QSIZE slots of 12 + 65550 */
#define TX_SLOT	  (12 + 65552)
#define F_WRITE	  2
#define HDR	  12

/* One side of the driver: a queue in guest RAM and what the driver knows. */
struct ring {
	struct virtq *vq;
	struct bench_desc *dt;
	uint16_t *avail;  /* flags, idx, ring[QSIZE], used_event */
	uint16_t *used;   /* flags, idx, then elems; avail_event after them */
	uint16_t avail_next, kicked_at, used_seen;
	unsigned q;
};

static struct ring rx, tx;
static int sv[2];
static size_t rx_buf_len = 1536;

static unsigned kicks;

/* the device's fd watch, served by loop_thread */
static void (*watch_cb)(void *);
static void *watch_arg;
static int watch_fd = -1, stop_fd = -1;

/* ---- a minimal host for the plugin ---- */

static int b_watch(struct cub_inst *in, int fd, uint32_t ev, void (*cb)(void *), void *arg)
{
	watch_cb = cb;
	watch_arg = arg;
	watch_fd = fd;
	return 0;
}

static int b_unwatch(struct cub_inst *in, int fd)
{
	return 0;
}

static const struct cub_host host = {
	.size = sizeof(host), .log = bench_log, .log_ratelimited = bench_log, .fail = bench_fail,
	.fd_watch = b_watch, .fd_unwatch = b_unwatch, .clock_us = bench_clock,
	.virtio = &bench_vhost, .net = &devices_net_host,
};

/* The event loop: the device's epoll set readable → its callback. */
static void *loop_thread(void *arg)
{
	struct pollfd p[2] = { { .fd = watch_fd, .events = POLLIN },
			       { .fd = stop_fd, .events = POLLIN } };

	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (p[0].revents)
			watch_cb(watch_arg);
	}
	return NULL;
}

/* ---- the driver ---- */

static uint16_t used_idx(const struct ring *r)
{
	return __atomic_load_n(&r->used[1], __ATOMIC_ACQUIRE);
}

/* Publish what was posted; kick if the device asked (virtio 2.7.10). */
static void publish(struct ring *r)
{
	uint16_t ev, old = r->kicked_at, new = r->avail_next;

	__atomic_store_n(&r->avail[1], new, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ev = __atomic_load_n(&r->used[2 + 4 * QSIZE], __ATOMIC_RELAXED); /* avail_event */
	r->kicked_at = new;
	if ((uint16_t)(new - ev - 1) < (uint16_t)(new - old)) {
		kicks++;
		bench_vops->notify(bench_vpriv, r->q);
	}
}

/* Sleep until the device used more of r: ask for an interrupt first. */
static void wait_used(struct ring *r)
{
	pthread_mutex_lock(&bench_irq_lock);
	for (;;) {
		__atomic_store_n(&r->avail[2 + QSIZE], r->used_seen, __ATOMIC_RELAXED); /* used_event */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (used_idx(r) != r->used_seen)
			break;
		pthread_cond_wait(&bench_irq_cond, &bench_irq_lock);
	}
	pthread_mutex_unlock(&bench_irq_lock);
}

/* ---- the peer ---- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int job;             /* 0 idle, 1 receive, 2 send, -1 quit */
	size_t len;
	unsigned n, done;
} peer = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0 };

static void *peer_thread(void *arg)
{
	static uint8_t buf[65552];

	for (;;) {
		int job;

		pthread_mutex_lock(&peer.lock);
		while (!peer.job)
			pthread_cond_wait(&peer.cond, &peer.lock);
		job = peer.job;
		pthread_mutex_unlock(&peer.lock);
		if (job < 0)
			return NULL;
		for (unsigned i = 0; i < peer.n; i++) {
			ssize_t k = job == 1 ? recv(sv[1], buf, sizeof(buf), 0)
					     : send(sv[1], buf, peer.len, 0);

			if (k != (ssize_t)peer.len) {
				fprintf(stderr, "net: peer %s: %zd, not %zu: %s\n",
					job == 1 ? "recv" : "send", k, peer.len, strerror(errno));
				exit(1);
			}
		}
		pthread_mutex_lock(&peer.lock);
		peer.job = 0;
		peer.done++;
		pthread_cond_broadcast(&peer.cond);
		pthread_mutex_unlock(&peer.lock);
	}
}

static void peer_start(int job, size_t len, unsigned n)
{
	pthread_mutex_lock(&peer.lock);
	peer.job = job;
	peer.len = len;
	peer.n = n;
	pthread_cond_broadcast(&peer.cond);
	pthread_mutex_unlock(&peer.lock);
}

static void peer_wait(void)
{
	pthread_mutex_lock(&peer.lock);
	while (peer.job)
		pthread_cond_wait(&peer.cond, &peer.lock);
	pthread_mutex_unlock(&peer.lock);
}

/* ---- the workloads ---- */

static double tx_virtio(size_t len, unsigned n)
{
	unsigned posted = 0, done = 0;
	double t0 = bench_now_s();

	peer_start(1, len, n);
	while (done < n) {
		while (posted < n && posted - done < QSIZE) {
			uint16_t s = (uint16_t)(tx.avail_next % QSIZE);

			tx.dt[s] = (struct bench_desc){ TX_DATA + (uint64_t)s * TX_SLOT,
						  (uint32_t)(HDR + len), 0, 0 };
			tx.avail[2 + s] = s;
			tx.avail_next++;
			posted++;
		}
		publish(&tx);
		wait_used(&tx);
		done += (uint16_t)(used_idx(&tx) - tx.used_seen);
		tx.used_seen = used_idx(&tx);
	}
	peer_wait();
	return bench_now_s() - t0;
}

/* The plain loops touch the same guest memory as the device does: the
 * transmit slots in turn, the receive area (1 MiB) in turn. */
static double tx_plain(size_t len, unsigned n)
{
	double t0 = bench_now_s();

	peer_start(1, len, n);
	for (unsigned i = 0; i < n; i++) {
		struct iovec v = { mem_map(&bench_mem, TX_DATA + (uint64_t)(i % QSIZE) * TX_SLOT + HDR, len),
				   len };
		struct msghdr mh = { .msg_iov = &v, .msg_iovlen = 1 };

		if (sendmsg(sv[0], &mh, 0) != (ssize_t)len) {
			perror("net: plain sendmsg");
			exit(1);
		}
	}
	peer_wait();
	return bench_now_s() - t0;
}

static void rx_post(uint16_t d)
{
	rx.dt[d] = (struct bench_desc){ RX_DATA + (uint64_t)d * 4096, (uint32_t)rx_buf_len, F_WRITE, 0 };
	rx.avail[2 + rx.avail_next % QSIZE] = d;
	rx.avail_next++;
}

static double rx_virtio(size_t len, unsigned n)
{
	unsigned frames = 0, left = 0; /* left: buffers still due for the frame in hand */
	size_t got = 0;
	double t0 = bench_now_s();

	peer_start(2, len, n);
	while (frames < n) {
		wait_used(&rx);
		while (rx.used_seen != used_idx(&rx)) {
			const uint32_t *e = (const uint32_t *)&rx.used[2] + 2 * (rx.used_seen % QSIZE);
			uint16_t d = (uint16_t)e[0];
			uint8_t *b = mem_map(&bench_mem, RX_DATA + (uint64_t)d * 4096, HDR);

			if (!left) {
				left = b[10] | b[11] << 8;
				got = e[1] - HDR;
				if (!left) {
					fprintf(stderr, "net: num_buffers is 0\n");
					exit(1);
				}
			} else {
				got += e[1];
			}
			if (!--left) {
				if (got != len) {
					fprintf(stderr, "net: received %zu bytes, not %zu\n", got, len);
					exit(1);
				}
				frames++;
			}
			rx.used_seen++;
			rx_post(d);
		}
		publish(&rx);
	}
	peer_wait();
	return bench_now_s() - t0;
}

static double rx_plain(size_t len, unsigned n)
{
	unsigned per = (QSIZE * 4096) / (unsigned)(len + 16);
	double t0 = bench_now_s();

	peer_start(2, len, n);
	for (unsigned i = 0; i < n; i++) {
		struct iovec v = { mem_map(&bench_mem, RX_DATA + (uint64_t)(i % per) * (len + 16), len + 16),
				   len + 16 };
		struct msghdr mh = { .msg_iov = &v, .msg_iovlen = 1 };

		if (recvmsg(sv[0], &mh, 0) != (ssize_t)len) {
			perror("net: plain recvmsg");
			exit(1);
		}
	}
	peer_wait();
	return bench_now_s() - t0;
}

static int ring_init(struct ring *r, unsigned q, uint64_t d, uint64_t a, uint64_t u);

/* The driver resets the device and sets it up again on fresh rings: a
 * stopped device does not watch the socket, so the plain loop has it alone. */
static void dev_stop(void)
{
	bench_vops->stop(bench_vpriv);
	virtq_free(rx.vq);
	virtq_free(tx.vq);
	rx.vq = tx.vq = NULL;
}

static void dev_start(void)
{
	struct cub_vq *q[2];

	memset(mem_map(&bench_mem, 0, TX_DESC + 0x3000), 0, TX_DESC + 0x3000);
	if (ring_init(&rx, 0, RX_DESC, RX_AVAIL, RX_USED) ||
	    ring_init(&tx, 1, TX_DESC, TX_AVAIL, TX_USED))
		exit(1);
	bench_vops->set_features(bench_vpriv, bench_vops->features(bench_vpriv));
	q[0] = (struct cub_vq *)rx.vq;
	q[1] = (struct cub_vq *)tx.vq;
	if (bench_vops->start(bench_vpriv, q, 2)) {
		fprintf(stderr, "net: device start failed\n");
		exit(1);
	}
	for (unsigned d = 0; d < QSIZE; d++)
		rx_post((uint16_t)d);
	publish(&rx);
}

static void measure(const char *dir, size_t len, unsigned n, unsigned runs)
{
	double tv[32], tp[32], v, p, bits = (double)n * (double)len * 8;
	bool is_rx = dir[0] == 'R';

	rx_buf_len = len > 1518 + 4 ? 4096 : 1536;
	for (unsigned r = 0; r < runs; r++) {
		tp[r] = is_rx ? rx_plain(len, n) : tx_plain(len, n);
		dev_start();
		tv[r] = is_rx ? rx_virtio(len, n) : tx_virtio(len, n);
		dev_stop();
	}
	v = bench_median(tv, runs);
	p = bench_median(tp, runs);
	printf("%s %5zu B frames   virtio-net %7.3f Mpps %6.2f Gb/s   plain %7.3f Mpps %6.2f Gb/s   ratio %.2f\n",
	       dir, len, n / v / 1e6, bits / v / 1e9, n / p / 1e6, bits / p / 1e9, p / v);
}

/* ---- setup ---- */

static int ring_init(struct ring *r, unsigned q, uint64_t d, uint64_t a, uint64_t u)
{
	*r = (struct ring){ .q = q };
	r->dt = mem_map(&bench_mem, d, 16 * QSIZE);
	r->avail = mem_map(&bench_mem, a, 6 + 2 * QSIZE);
	r->used = mem_map(&bench_mem, u, 6 + 8 * QSIZE);
	r->vq = bench_virtq(d, a, u, 1ull << VIRTIO_F_VERSION_1 | 1ull << VIRTIO_F_EVENT_IDX);
	return r->vq ? 0 : -1;
}

static int setup_device(struct bench_dev *d)
{
	char text[400];

	snprintf(text, sizeof(text),
		 "devices = ( { type = \"virtio-net\"; backend = { type = \"socket\"; fd = %d; }; } );",
		 sv[0]);
	return bench_dev_create(d, "virtio-net", CUB_BUILD_DIR "/plugins/net/.libs", text, &host);
}

int main(int argc, char **argv)
{
	unsigned runs = argc > 1 ? (unsigned)atoi(argv[1]) : 5;
	const char *only = argc > 2 ? argv[2] : "";
	static struct bench_dev dev;
	pthread_t lt, pt;

	if (runs < 1 || runs > 32) {
		fprintf(stderr, "usage: net [RUNS 1..32 [tx|rx]]\n");
		return 2;
	}
	if (bench_init("net") || socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv)) {
		perror("net: setup");
		return 1;
	}
	/* The peer is what another VM's socket backend would be: the same send buffer. */
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &(int){ 4 << 20 }, sizeof(int));
	for (unsigned s = 0; s < QSIZE; s++) { /* frames: zero header, some bytes */
		uint8_t *b = mem_map(&bench_mem, TX_DATA + (uint64_t)s * TX_SLOT, TX_SLOT);

		memset(b, 0, HDR);
		for (unsigned i = HDR; i < TX_SLOT; i++)
			b[i] = (uint8_t)(i * 31 + s);
	}
	if (setup_device(&dev))
		return 1;
	stop_fd = eventfd(0, EFD_CLOEXEC);
	pthread_create(&lt, NULL, loop_thread, NULL);
	pthread_create(&pt, NULL, peer_thread, NULL);

	printf("virtio-net host path (socket backend, socketpair) vs plain sendmsg/recvmsg on the same pair;\n"
	       "median of %u runs; ratio = virtio-net rate / plain rate; no offloads (socket backend)\n",
	       runs);
	for (int d = 0; d < 2; d++) {
		const char *dir = d ? "RX" : "TX";

		if (*only && strcasecmp(only, dir))
			continue;
		measure(dir, 64, 200000, runs);
		measure(dir, 1500, 100000, runs);
		measure(dir, 65536, 5000, runs);
	}
	printf("kicks: %u, interrupts: %u\n", kicks, bench_irqs);

	peer_start(-1, 0, 0);
	pthread_join(pt, NULL);
	if (eventfd_write(stop_fd, 1) == 0)
		pthread_join(lt, NULL);
	bench_dev_destroy(&dev, net_close_all);
	close(sv[0]);
	close(sv[1]);
	mem_destroy(&bench_mem);
	return 0;
}
