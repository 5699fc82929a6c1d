/* SPDX-License-Identifier: Apache-2.0 */
/* bench/net: the virtio-net path on the host (split virtqueues in guest RAM,
 * the virtio-net plugin, the net host, the socket backend on a socketpair)
 * against a plain sendmsg/recvmsg loop on the same socketpair, same run.
 * Usage: net [RUNS [tx|rx [BYTES]]] */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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
#define RX_DATA	  0x100000 /* QSIZE buffers of up to 4096 */
#define TX_DATA	  0x200000 /* QSIZE slots of 12 + 65550 */
#define TX_SLOT	  (12 + 65552)
#define F_WRITE	  2
#define HDR	  12

static struct bench_ring rx, tx;
static int sv[2];
static size_t rx_buf_len = 1536;

/* ---- a minimal host for the plugin ---- */

static const struct cub_host host = {
	.size = sizeof(host), .log = bench_log, .log_ratelimited = bench_log, .fail = bench_fail,
	.fd_watch = bench_fd_watch, .fd_unwatch = bench_fd_unwatch, .clock_us = bench_clock,
	.virtio = &bench_vhost, .net = &devices_net_host,
};

/* ---- the driver ---- */

/* ---- the peer ---- */

/* the peer's job: n frames of len bytes */
static size_t peer_len;
static unsigned peer_n;

/* Job 1 receives the frames, 2 sends them. */
static void peer_work(int job)
{
	static uint8_t buf[65552];

	for (unsigned i = 0; i < peer_n; i++) {
		ssize_t k = job == 1 ? recv(sv[1], buf, sizeof(buf), 0)
				     : send(sv[1], buf, peer_len, 0);

		if (k != (ssize_t)peer_len) {
			fprintf(stderr, "net: peer %s: %zd, not %zu: %s\n",
				job == 1 ? "recv" : "send", k, peer_len, strerror(errno));
			exit(1);
		}
	}
}

static void peer_start(int job, size_t len, unsigned n)
{
	peer_len = len;
	peer_n = n;
	bench_peer_start(job);
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
		bench_ring_publish(&tx);
		bench_ring_wait(&tx);
		/* one read: the device may push between two, and a count
		 * lost so would leave this loop waiting for good */
		uint16_t u = bench_used_idx(&tx);

		done += (uint16_t)(u - tx.used_seen);
		tx.used_seen = u;
	}
	bench_peer_wait();
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
	bench_peer_wait();
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
		bench_ring_wait(&rx);
		while (rx.used_seen != bench_used_idx(&rx)) {
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
		bench_ring_publish(&rx);
	}
	bench_peer_wait();
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
	bench_peer_wait();
	return bench_now_s() - t0;
}

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

	memset(mem_map(&bench_mem, 0, BENCH_RINGS_END), 0, BENCH_RINGS_END);
	if (bench_rings_init(&rx, &tx))
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
	bench_ring_publish(&rx);
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
	size_t size = argc > 3 ? (size_t)atoi(argv[3]) : 0;
	static struct bench_dev dev;
	pthread_t lt, pt;

	if (runs < 1 || runs > 32 || (argc > 3 && size != 64 && size != 1500 && size != 65536)) {
		fprintf(stderr, "usage: net [RUNS 1..32 [tx|rx [64|1500|65536]]]\n");
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
	bench_loop_start(&lt);
	bench_peer_spawn(&pt, peer_work);

	printf("virtio-net host path (socket backend, socketpair) vs plain sendmsg/recvmsg on the same pair;\n"
	       "median of %u runs; ratio = virtio-net rate / plain rate; no offloads (socket backend)\n",
	       runs);
	for (int d = 0; d < 2; d++) {
		const char *dir = d ? "RX" : "TX";

		if (*only && strcasecmp(only, dir))
			continue;
		if (!size || size == 64)
			measure(dir, 64, 200000, runs);
		if (!size || size == 1500)
			measure(dir, 1500, 100000, runs);
		if (!size || size == 65536)
			measure(dir, 65536, 5000, runs);
	}
	printf("kicks: %u, interrupts: %u\n", bench_kicks, bench_irqs);

	bench_peer_stop(pt);
	bench_loop_stop(lt);
	bench_dev_destroy(&dev, net_close_all);
	close(sv[0]);
	close(sv[1]);
	mem_destroy(&bench_mem);
	return 0;
}
