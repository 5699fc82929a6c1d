/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-vsock's data flow on the fake host: the guest's credit, receive rounds, the rate limiter, a side that never reads. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "vsock_support.h"

/* ---- credit and flow ---- */

/* Pump n times, then take the packets the device gave: the bytes of each
 * RW added to *got (checked against want + *got when want is given); true
 * when a CREDIT_REQUEST was among them. */
static bool take_rw(int n, const uint8_t *want, uint32_t *got)
{
	struct pkt p;
	bool req = false;

	for (int i = 0; i < n; i++)
		pump();
	while (next_pkt(&p)) {
		if (p.op == VIRTIO_VSOCK_OP_RW) {
			if (want)
				CU_ASSERT_EQUAL(memcmp(p.data, want + *got, p.len), 0);
			*got += p.len;
		} else if (p.op == VIRTIO_VSOCK_OP_CREDIT_REQUEST)
			req = true;
	}
	return req;
}

/* host -> guest: never more than the guest's credit; more after an update. */
static void test_credit(void)
{
	static uint8_t big[20000];
	uint32_t hp, got = 0;
	bool req;
	int fd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	post_rx(16);
	fd = client_to(52, 8192, &hp);
	for (unsigned i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)i;
	CU_ASSERT_EQUAL(write(fd, big, sizeof(big)), (ssize_t)sizeof(big));
	req = take_rw(5, big, &got);
	CU_ASSERT_EQUAL(got, 8192);
	CU_ASSERT_TRUE(req);
	/* the guest read 4096 of them */
	gsend(VIRTIO_VSOCK_OP_CREDIT_UPDATE, 52, hp, NULL, 0, 0, 8192, 4096);
	take_rw(5, big, &got);
	CU_ASSERT_EQUAL(got, 8192 + 4096);
	/* all of it read: the rest comes */
	gsend(VIRTIO_VSOCK_OP_CREDIT_UPDATE, 52, hp, NULL, 0, 0, 65536, got);
	for (int i = 0; i < 5; i++)
		pump();
	post_rx(16);
	take_rw(5, big, &got);
	CU_ASSERT_EQUAL(got, sizeof(big));
	close(fd);
	dev_close();
}

/* A round of the receive queue ends at its budget (half the queue) with
 * buffers and data left: the device goes on by itself. The guest would not
 * kick for buffers it posted before the device's last pop found some. */
static void test_rx_budget_goes_on(void)
{
	static uint8_t data[150 << 10];
	uint32_t hp, got = 0;
	int fd, sb = 1 << 20;
	struct pkt p;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	post_rx(4);
	fd = client_to(52, 4u << 20, &hp);
	while (next_pkt(&p))
		;
	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + i / 251);
	rx_len = HDR + 1024; /* small buffers: 140 packets for the data, above the budget */
	post_rx(200);
	rx_len = RXLEN;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof(sb));
	/* All of it queued at once on the host end before the device reads. */
	CU_ASSERT_EQUAL_FATAL(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
	take_rw(6, data, &got);
	CU_ASSERT_EQUAL(got, sizeof(data));
	close(fd);
	dev_close();
}

/* The host's rate limiter: data bytes to the guest through a bucket of
 * 8 KiB refilled in 100 ms (80 KiB/s): 40 KiB take about 0.4 s, all of it
 * in order; packets from the guest by an ops bucket likewise. */
static void test_rate_limiter(void)
{
	static uint8_t data[40 << 10];
	const char *kv[] = { "rate_limiter.bandwidth.size", "8K",
			     "rate_limiter.bandwidth.refill_time", "100",
			     "rate_limiter.ops.size", "20", "rate_limiter.ops.refill_time", "100", NULL };
	struct timespec t0, t1;
	uint32_t hp, got = 0;
	uint8_t buf[64];
	struct pkt p;
	double ms;
	int fd, n = 0;

	CU_ASSERT_EQUAL_FATAL(dev_open(kv), 0);
	post_rx(64);
	fd = client_to(52, 1u << 20, &hp);
	while (next_pkt(&p))
		;
	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i ^ (i >> 9));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CU_ASSERT_EQUAL_FATAL(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
	for (int i = 0; i < 300 && got < sizeof(data); i++) {
		take_rw(1, data, &got);
		usleep(10000);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	CU_ASSERT_EQUAL(got, sizeof(data));
	CU_ASSERT(ms >= 350 && ms < 3000);
	/* guest -> host: 30 packets of 1 byte, 20 at once, the rest 50 ms later */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 30; i++) {
		gsend(VIRTIO_VSOCK_OP_RW, 52, hp, "x", 1, 0, 1u << 20, got);
		if (i % 8 == 7)
			pump();
	}
	for (int i = 0; i < 300 && n < 30; i++) {
		ssize_t k;

		pump();
		k = read_some(fd, buf, sizeof(buf), 10);
		n += k > 0 ? (int)k : 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	CU_ASSERT_EQUAL(n, 30);
	CU_ASSERT(ms >= 40 && ms < 3000);
	close(fd);
	dev_close();
}

/* guest -> host: the guest gets credit updates as the host end reads, and a
 * guest past its credit is reset; the device never holds more than buffer_size. */
static void test_host_never_reads(void)
{
	const char *kv[] = { "buffer_size", "16K", NULL };
	static uint8_t chunk[4096];
	uint32_t hp, sent = 0, fwd = 0, credit = 16384;
	struct pkt p;
	int fd, stuck = 0;

	CU_ASSERT_EQUAL_FATAL(dev_open(kv), 0);
	post_rx(NRX);
	fd = client_to(52, G_BUF, &hp);
	/* a well-behaved guest: sends while it has credit, until none comes */
	while (stuck < 3) {
		if (credit - (sent - fwd) >= sizeof(chunk)) {
			gsend(VIRTIO_VSOCK_OP_RW, 52, hp, chunk, sizeof(chunk), 0, G_BUF, 0);
			sent += sizeof(chunk);
			stuck = 0;
		} else
			stuck++;
		pump();
		while (next_pkt(&p)) {
			credit = p.buf_alloc;
			fwd = p.fwd_cnt;
		}
		if (rx_posted - rx_seen < NRX / 2)
			post_rx(NRX / 2);
		CU_ASSERT_FATAL(sent < (64u << 20)); /* the host socket must fill */
	}
	CU_ASSERT(stat_of("buffered") <= 16384);
	CU_ASSERT(stat_of("buffered") > 0);
	CU_ASSERT_EQUAL(stat_of("connections"), 1);
	/* past the credit: reset */
	gsend(VIRTIO_VSOCK_OP_RW, 52, hp, chunk, sizeof(chunk), 0, G_BUF, 0);
	gsend(VIRTIO_VSOCK_OP_RW, 52, hp, chunk, sizeof(chunk), 0, G_BUF, 0);
	gsend(VIRTIO_VSOCK_OP_RW, 52, hp, chunk, sizeof(chunk), 0, G_BUF, 0);
	gsend(VIRTIO_VSOCK_OP_RW, 52, hp, chunk, sizeof(chunk), 0, G_BUF, 0);
	gsend(VIRTIO_VSOCK_OP_RW, 52, hp, chunk, sizeof(chunk), 0, G_BUF, 0);
	pump();
	CU_ASSERT_TRUE(expect_op(&p, VIRTIO_VSOCK_OP_RST));
	CU_ASSERT_EQUAL(stat_of("connections"), 0);
	CU_ASSERT_EQUAL(stat_of("buffered"), 0);
	close(fd);
	dev_close();
}

/* A guest that never reads its receive queue: the device stops reading the
 * host socket, which fills; the host writer sees EAGAIN, host memory does not grow. */
static void test_guest_never_reads(void)
{
	static uint8_t chunk[65536];
	uint32_t hp, got = 0;
	size_t wrote = 0;
	int fd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	post_rx(4);
	fd = client_to(52, 1u << 30, &hp); /* credit is no limit here */
	CU_ASSERT_EQUAL(rx_seen, 1);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	for (int round = 0; round < 2000; round++) {
		ssize_t n = write(fd, chunk, sizeof(chunk));

		if (n < 0) {
			CU_ASSERT_EQUAL(errno, EAGAIN);
			pump();
			if (write(fd, chunk, 1) < 0)
				break;
			wrote++;
			continue;
		}
		wrote += (size_t)n;
		pump();
	}
	/* three buffers were left after the handshake */
	take_rw(0, NULL, &got);
	CU_ASSERT_EQUAL(got, 3 * 4096);
	CU_ASSERT(wrote < (16u << 20)); /* the socket's buffers, not ours */
	CU_ASSERT_EQUAL(stat_of("host_bytes"), 3 * 4096);
	CU_ASSERT_EQUAL(stat_of("buffered"), 0);
	/* buffers again: data flows again */
	post_rx(8);
	take_rw(4, NULL, &got);
	CU_ASSERT_EQUAL(got, 11 * 4096);
	close(fd);
	dev_close();
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "credit: host to guest", test_credit },
		{ "a round at its budget goes on without a kick", test_rx_budget_goes_on },
		{ "the host's rate limiter", test_rate_limiter },
		{ "credit: a host end that never reads", test_host_never_reads },
		{ "a guest that never reads", test_guest_never_reads },
		{ NULL, NULL },
	};

	return vsock_run("virtio-vsock: flow", tests);
}
