/* SPDX-License-Identifier: Apache-2.0 */
/* bench/vsock: the virtio-vsock path on the host (split virtqueues in guest RAM, the
 * plugin, a host client on its Unix socket) against a Unix socketpair moving the same
 * bytes in the same buffers, same run. Usage: vsock [RUNS [MiB]] */
#include <errno.h>
#include <linux/virtio_vsock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

/*
 * The driver side plays a Linux guest: receive buffers of 4 KiB of payload
 * (Linux's default) or 64 KiB, packets of up to 64 KiB to send, a 256 KiB
 * buffer (buf_alloc) whose room it announces with a CREDIT_UPDATE once it
 * has read half of it, EVENT_IDX on both queues. A "vCPU" (the main thread)
 * posts and kicks; transmit runs on it, inline; the device's fds (its
 * listener, the connection) are served by an event-loop thread. The host
 * side is a peer thread writing or reading the connection's socket with
 * blocking calls, 64 KiB at a time. The plain run replaces the device by the
 * main thread reading (into the same receive buffers) or writing (from the
 * same transmit slots) one end of a socketpair, the peer on the other end.
 */

#define QSIZE	  BENCH_QSIZE
#define RX_DATA	  0x100000  /* QSIZE buffers, RX_STRIDE apart */
#define RX_STRIDE 0x10100
#define TX_DATA	  0x1200000 /* QSIZE slots of header + 64 KiB */
#define TX_SLOT	  0x10100
#define F_WRITE	  2
#define HDR	  44
#define GCID	  3
#define GPORT	  52
#define G_BUF	  (256u << 10) /* the guest's buf_alloc */
#define CHUNK	  65536

static struct bench_ring rx, tx;
static size_t rx_payload = 4096;
static unsigned n_pkts, n_creq;
static uint32_t hport;           /* the connection's port on CID 2 */
static uint32_t g_fwd, g_told;   /* guest: bytes read, and told */
static uint32_t d_buf, d_fwd, g_sent; /* the device's credit, as the guest knows it */
static int cli = -1, sv[2] = { -1, -1 };

static const struct cub_host host = {
	.size = sizeof(host), .log = bench_log, .log_ratelimited = bench_log, .fail = bench_fail,
	.fd_watch = bench_fd_watch, .fd_unwatch = bench_fd_unwatch, .clock_us = bench_clock,
	.virtio = &bench_vhost,
};

/* ---- the driver ---- */

static void rx_post(uint16_t d)
{
	rx.dt[d] = (struct bench_desc){ RX_DATA + (uint64_t)d * RX_STRIDE,
					(uint32_t)(HDR + rx_payload), F_WRITE, 0 };
	rx.avail[2 + rx.avail_next % QSIZE] = d;
	rx.avail_next++;
}

/* A packet to the host; its payload is already in the slot. */
static void tx_put(uint16_t op, uint32_t len)
{
	uint16_t s;
	struct virtio_vsock_hdr h = { 0 };

	while ((uint16_t)(tx.avail_next - bench_used_idx(&tx)) >= QSIZE)
		bench_ring_wait(&tx);
	tx.used_seen = bench_used_idx(&tx);
	s = (uint16_t)(tx.avail_next % QSIZE);
	h.src_cid = htole64(GCID);
	h.dst_cid = htole64(2);
	h.src_port = htole32(GPORT);
	h.dst_port = htole32(hport);
	h.len = htole32(len);
	h.type = htole16(VIRTIO_VSOCK_TYPE_STREAM);
	h.op = htole16(op);
	h.buf_alloc = htole32(G_BUF);
	h.fwd_cnt = htole32(g_fwd);
	memcpy(mem_map(&bench_mem, TX_DATA + (uint64_t)s * TX_SLOT, HDR), &h, HDR);
	tx.dt[s] = (struct bench_desc){ TX_DATA + (uint64_t)s * TX_SLOT, HDR + len, 0, 0 };
	tx.avail[2 + s] = s;
	tx.avail_next++;
	g_told = g_fwd;
}

/* Take what the device gave: data read at once (counted in g_fwd), the
 * device's credit noted. Returns the data bytes. */
static size_t rx_take(bool *creq)
{
	size_t got = 0;

	while (rx.used_seen != bench_used_idx(&rx)) {
		const uint32_t *e = (const uint32_t *)&rx.used[2] + 2 * (rx.used_seen % QSIZE);
		uint16_t d = (uint16_t)e[0];
		struct virtio_vsock_hdr h;

		memcpy(&h, mem_map(&bench_mem, RX_DATA + (uint64_t)d * RX_STRIDE, HDR), HDR);
		if (e[1] != HDR + le32toh(h.len)) {
			fprintf(stderr, "vsock: a packet of %u bytes says %u\n", e[1], le32toh(h.len));
			exit(1);
		}
		uint16_t op = le16toh(h.op);

		n_pkts++;
		if (op == VIRTIO_VSOCK_OP_CREDIT_REQUEST) {
			n_creq++;
			*creq = true;
		}
		d_buf = le32toh(h.buf_alloc);
		d_fwd = le32toh(h.fwd_cnt);
		if (op == VIRTIO_VSOCK_OP_RW) {
			got += le32toh(h.len);
			g_fwd += le32toh(h.len);
		} else if (op == VIRTIO_VSOCK_OP_RST || op == VIRTIO_VSOCK_OP_SHUTDOWN) {
			fprintf(stderr, "vsock: the device reset or shut the connection (op %u)\n",
				op);
			exit(1);
		}
		rx.used_seen++;
		rx_post(d);
	}
	bench_ring_publish(&rx);
	return got;
}

/* ---- the peer (the host side of the connection) ---- */

/* the peer's job: total bytes on fd, through buf */
static int peer_fd = -1;
static size_t peer_total;
static uint8_t peer_buf[CHUNK];

/* Job 1 reads them, 2 writes them. */
static void peer_work(int job)
{
	uint8_t *buf = peer_buf;
	size_t done = 0;

	while (done < peer_total) {
		size_t want = peer_total - done < CHUNK ? peer_total - done : CHUNK;
		ssize_t k = job == 1 ? read(peer_fd, buf, want) : write(peer_fd, buf, want);

		if (k <= 0) {
			fprintf(stderr, "vsock: peer %s: %s\n", job == 1 ? "read" : "write",
				k ? strerror(errno) : "EOF");
			exit(1);
		}
		done += (size_t)k;
	}
}

static void peer_start(int job, int fd, size_t total)
{
	peer_fd = fd;
	peer_total = total;
	bench_peer_start(job);
}

/* ---- the workloads ---- */

/* host -> guest: the peer writes, the guest reads. */
static double h2g_vsock(size_t total)
{
	size_t got = 0;
	bool creq = false;
	double t0 = bench_now_s();

	peer_start(2, cli, total);
	while (got < total) {
		bench_ring_wait(&rx);
		got += rx_take(&creq);
		if (g_fwd - g_told >= G_BUF / 2 || creq) {
			creq = false;
			tx_put(VIRTIO_VSOCK_OP_CREDIT_UPDATE, 0);
			bench_ring_publish(&tx);
		}
	}
	bench_peer_wait();
	return bench_now_s() - t0;
}

/* guest -> host: the guest sends packets of pkt bytes within its credit. */
static double g2h_vsock(size_t total, size_t pkt)
{
	size_t sent = 0;
	bool creq = false;
	double t0 = bench_now_s();

	peer_start(1, cli, total);
	while (sent < total) {
		uint32_t credit = d_buf - (g_sent - d_fwd);
		unsigned posted = 0;

		while (sent < total && posted < QSIZE / 2) {
			uint32_t n = (uint32_t)(total - sent < pkt ? total - sent : pkt);

			if (credit < n)
				break;
			tx_put(VIRTIO_VSOCK_OP_RW, n);
			credit -= n;
			g_sent += n;
			sent += n;
			posted++;
		}
		if (posted) {
			bench_ring_publish(&tx);
			continue;
		}
		bench_ring_wait(&rx); /* out of credit: wait for an update */
		rx_take(&creq);
	}
	bench_peer_wait();
	return bench_now_s() - t0;
}

/* The plain run: host -> guest (h2g), the main thread reads what the peer
 * writes into the receive buffers, rx_payload at a time; else it writes
 * packets of pkt bytes from the transmit slots for the peer to read. */
static double plain(bool h2g, size_t total, size_t pkt)
{
	size_t done = 0;
	unsigned i = 0;
	double t0 = bench_now_s();

	peer_start(h2g ? 2 : 1, sv[1], total);
	while (done < total) {
		uint64_t s = i++ % QSIZE;
		size_t n = h2g ? rx_payload : total - done < pkt ? total - done : pkt;
		void *b = mem_map(&bench_mem, (h2g ? RX_DATA + s * RX_STRIDE : TX_DATA + s * TX_SLOT) + HDR, n);
		ssize_t k = h2g ? read(sv[0], b, n) : write(sv[0], b, n);

		if (k <= 0) {
			perror(h2g ? "vsock: plain read" : "vsock: plain write");
			exit(1);
		}
		done += (size_t)k;
	}
	bench_peer_wait();
	return bench_now_s() - t0;
}

static void report(const char *what, size_t total, double *tv, double *tp, unsigned runs)
{
	double v = bench_median(tv, runs), p = bench_median(tp, runs);

	printf("%-38s vsock %5.2f GB/s  socketpair %5.2f GB/s  ratio %.2f  (%u packets to the guest, %u credit requests)\n",
	       what, (double)total / v / 1e9, (double)total / p / 1e9, p / v, n_pkts, n_creq);
	n_pkts = n_creq = 0;
}

/* ---- setup ---- */

/* The driver starts the device; a host client connects to guest port 52. */
static int connect_host(const char *uds)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct cub_vq *q[3];
	char line[32];
	size_t n = 0;
	uint16_t op = 0;

	if (bench_rings_init(&rx, &tx))
		return -1;
	q[0] = (struct cub_vq *)rx.vq;
	q[1] = (struct cub_vq *)tx.vq;
	q[2] = NULL; /* no event queue: nothing to reset */
	if (bench_vops->start(bench_vpriv, q, 3))
		return -1;
	for (unsigned d = 0; d < QSIZE; d++)
		rx_post((uint16_t)d);
	bench_ring_publish(&rx);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", uds);
	cli = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cli < 0 || connect(cli, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    write(cli, "CONNECT 52\n", 11) != 11) {
		perror("vsock: host client");
		return -1;
	}
	while (op != VIRTIO_VSOCK_OP_REQUEST) {
		const uint32_t *e;
		struct virtio_vsock_hdr h;

		bench_ring_wait(&rx);
		e = (const uint32_t *)&rx.used[2] + 2 * (rx.used_seen % QSIZE);
		memcpy(&h, mem_map(&bench_mem, RX_DATA + (uint64_t)e[0] * RX_STRIDE, HDR), HDR);
		op = le16toh(h.op);
		hport = le32toh(h.src_port);
		d_buf = le32toh(h.buf_alloc);
		rx.used_seen++;
		rx_post((uint16_t)e[0]);
		bench_ring_publish(&rx);
	}
	tx_put(VIRTIO_VSOCK_OP_RESPONSE, 0);
	bench_ring_publish(&tx);
	while (n < sizeof(line) - 1 && read(cli, line + n, 1) == 1 && line[n] != '\n')
		n++;
	line[n] = 0;
	if (strncmp(line, "OK ", 3) || (uint32_t)atol(line + 3) != hport) {
		fprintf(stderr, "vsock: the handshake answered \"%s\"\n", line);
		return -1;
	}
	return 0;
}

static void nop_close(struct cub_inst *in)
{
}

int main(int argc, char **argv)
{
	unsigned runs = argc > 1 ? (unsigned)atoi(argv[1]) : 5;
	size_t total = (argc > 2 ? (size_t)atol(argv[2]) : 256) << 20;
	static struct bench_dev dev;
	double tv[32], tp[32];
	char dir[] = "/tmp/cubvsXXXXXX", uds[64], text[300];
	pthread_t lt, pt;

	if (runs < 1 || runs > 32 || total < (1u << 20) || total > (4ull << 30)) {
		fprintf(stderr, "usage: vsock [RUNS 1..32 [MiB 1..4096]]\n");
		return 2;
	}
	if (bench_init("vsock") || !mkdtemp(dir) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		perror("vsock: setup");
		return 1;
	}
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	snprintf(text, sizeof(text),
		 "devices = ( { type = \"virtio-vsock\"; guest_cid = %d; uds_path = \"%s\"; } );",
		 GCID, uds);
	for (unsigned s = 0; s < QSIZE; s++) {
		uint8_t *b = mem_map(&bench_mem, TX_DATA + (uint64_t)s * TX_SLOT + HDR, CHUNK);

		for (unsigned i = 0; i < CHUNK; i++)
			b[i] = (uint8_t)(i * 7 + s);
	}
	if (bench_dev_create(&dev, "virtio-vsock", CUB_BUILD_DIR "/plugins/devices/.libs", text, &host))
		return 1;
	bench_loop_start(&lt);
	for (size_t i = 0; i < sizeof(peer_buf); i++)
		peer_buf[i] = (uint8_t)(i * 31);
	bench_peer_spawn(&pt, peer_work);
	if (connect_host(uds))
		return 1;

	printf("virtio-vsock host path (virtqueues, plugin, a host client on uds_path) vs a Unix\n"
	       "socketpair moving the same bytes through the same buffers; %zu MiB, median of %u runs;\n"
	       "ratio = vsock rate / socketpair rate (goal >= 0.8)\n", total >> 20, runs);
	for (int b = 0; b < 2; b++) {
		rx_payload = b ? 65536 : 4096;
		for (unsigned r = 0; r < runs; r++) {
			tp[r] = plain(true, total, 0);
			tv[r] = h2g_vsock(total);
		}
		report(b ? "host->guest, 64 KiB rx buffers" : "host->guest, 4 KiB rx buffers (Linux)",
		       total, tv, tp, runs);
	}
	for (int b = 0; b < 2; b++) {
		size_t pkt = b ? 65536 : 4096;

		for (unsigned r = 0; r < runs; r++) {
			tp[r] = plain(false, total, pkt);
			tv[r] = g2h_vsock(total, pkt);
		}
		report(b ? "guest->host, 64 KiB packets" : "guest->host, 4 KiB packets", total, tv, tp,
		       runs);
	}
	printf("kicks: %u, interrupts: %u\n", bench_kicks, bench_irqs);

	bench_peer_stop(pt);
	close(cli);
	bench_vops->stop(bench_vpriv);
	bench_loop_stop(lt);
	bench_dev_destroy(&dev, nop_close);
	virtq_free(rx.vq);
	virtq_free(tx.vq);
	close(sv[0]);
	close(sv[1]);
	rmdir(dir);
	mem_destroy(&bench_mem);
	return 0;
}
