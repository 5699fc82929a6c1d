/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of virtio-net's receive path when buffers run short: backpressure,
 * a frame waiting for buffers, dropped or reset, never a stall (issue 10). */
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "virtio_net_support.h"

#define RX_WAIT_MS_TEST 100 /* virtio_net.h RX_WAIT_MS */

/* No buffers: stop watching the backend, drop nothing, resume on the kick. */
static void test_rx_backpressure(void)
{
	uint8_t frame[3000], got[128];
	struct cub_vq_chain *a, *b, *c;
	struct cub_reply rep = { 0 };
	int efd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	efd = dev_efd();
	fill(frame, sizeof(frame), 9);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(send(sv[1], frame, 100 + i, 0), 100 + i);
	run_loop();
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 0);
	CU_ASSERT(!readable(efd)); /* frames wait, but the device is not woken for them */
	CU_ASSERT(fh.vqs[RXQ].pops <= 2);
	fake_vq_add(&fh, RXQ, a = rx_chain(HDR + 1500, 0));
	fake_virtio_kick(&fh, RXQ);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 1);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].written, HDR + 100);
	run_loop();
	CU_ASSERT(!readable(efd));
	fake_vq_add(&fh, RXQ, b = rx_chain(HDR + 1500, 0));
	fake_vq_add(&fh, RXQ, c = rx_chain(HDR + 1500, 0));
	fake_virtio_kick(&fh, RXQ);
	if (fh.vqs[RXQ].n_used != 3) fprintf(stderr, "DBG n_used %u\n", fh.vqs[RXQ].n_used);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 3);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[1].written, HDR + 101);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[2].written, HDR + 102);
	CU_ASSERT_EQUAL(recv(sv[0], got, sizeof(got), MSG_DONTWAIT), -1); /* all taken */

	/* out of buffers halfway through a frame: it waits, then goes out whole */
	CU_ASSERT_EQUAL(send(sv[1], frame, 2500, 0), 2500);
	fake_vq_add(&fh, RXQ, a = rx_chain(HDR + 1000, 0));
	fake_vq_add(&fh, RXQ, b = rx_chain(1000, 0));
	fake_virtio_kick(&fh, RXQ);
	run_loop();
	if (fh.vqs[RXQ].n_used != 3) fprintf(stderr, "DBG n_used %u\n", fh.vqs[RXQ].n_used);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 3); /* nothing published yet */
	CU_ASSERT(!readable(efd));
	fake_vq_add(&fh, RXQ, c = rx_chain(1000, 0));
	fake_virtio_kick(&fh, RXQ);
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 6);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[3].head, a->head);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[5].head, c->head);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[5].written, 500);
	CU_ASSERT_EQUAL(le16(mem_of(a) + 10), 3);
	CU_ASSERT_EQUAL(memcmp(mem_of(c), frame + 2000, 500), 0);

	CU_ASSERT_EQUAL(((int (*)(void *, struct cub_reply *))fake_method_find(netp, "stats")->fn)(
				npriv, &rep), 0);
	CU_ASSERT(strstr(rep.text, "rx_packets 4 rx_bytes 2803 rx_dropped 0") != NULL);
	fake_virtio_stop(&fh);
	dev_close();
}

/* A reset drops what the device holds; after a restart it works again. */
static void test_reset(void)
{
	uint8_t frame[2500];

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	fill(frame, sizeof(frame), 19);
	fake_vq_add(&fh, RXQ, rx_chain(HDR + 1000, 0));
	fake_virtio_kick(&fh, RXQ);
	CU_ASSERT_EQUAL(send(sv[1], frame, 2500, 0), 2500);
	run_loop(); /* half placed: waits for buffers */
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 0);
	fake_virtio_stop(&fh);
	CU_ASSERT(!readable(dev_efd()));
	/* the driver comes back with fresh queues */
	memset(fh.vqs, 0, sizeof(fh.vqs));
	for (unsigned i = 0; i < FAKE_MAX_VQS; i++)
		fh.vqs[i].fh = &fh;
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	fake_vq_add(&fh, RXQ, rx_chain(HDR + 1500, 0));
	fake_virtio_kick(&fh, RXQ);
	CU_ASSERT_EQUAL(send(sv[1], frame, 200, 0), 200);
	run_loop();
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 1);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].written, HDR + 200);
	fake_virtio_stop(&fh);
	dev_close();
}

/* ---- mergeable receive never stalls (issue 10, item 7) ---- */

static struct cub_reply stats(void)
{
	struct cub_reply rep = { 0 };

	((int (*)(void *, struct cub_reply *))fake_method_find(netp, "stats")->fn)(npriv, &rep);
	return rep;
}

/* Wait up to ms for the device's set to turn readable (its wait timer). */
static bool readable_within(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

static uint8_t big[65536];

/* A queue of 16 whose buffers can never hold a 64 KiB frame: the frame is
 * dropped once it holds all 16 (not only at 256), the buffers go back
 * empty, and the next frame is delivered. */
static void test_rx_small_queue(void)
{
	struct cub_vq_chain *c;
	struct cub_reply rep;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	fh.vqs[RXQ].size = 16;
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	for (int i = 0; i < 16; i++)
		fake_vq_add(&fh, RXQ, rx_chain(HDR + 1514, 0));
	fake_virtio_kick(&fh, RXQ);
	fill(big, sizeof(big), 3);
	CU_ASSERT_EQUAL(send(sv[1], big, sizeof(big), 0), (ssize_t)sizeof(big));
	CU_ASSERT_EQUAL(send(sv[1], big, 100, 0), 100);
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 16);
	for (int i = 0; i < 16; i++)
		CU_ASSERT_EQUAL(fh.vqs[RXQ].used[i].written, 0);
	rep = stats();
	CU_ASSERT(strstr(rep.text, "rx_packets 0 rx_bytes 0 rx_dropped 1 rx_dropped_nobuf 1") != NULL);
	CU_ASSERT_TRUE(fake_log_has(&fh, "dropped a 65536-byte frame: the receive queue cannot hold it (16 buffers, 16 of 16 descriptors held)"));
	/* the driver posts again: the next frame goes through */
	fake_vq_add(&fh, RXQ, c = rx_chain(HDR + 1514, 0));
	fake_virtio_kick(&fh, RXQ);
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 17);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[16].head, c->head);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[16].written, HDR + 100);
	CU_ASSERT_EQUAL(memcmp(mem_of(c) + HDR, big, 100), 0);
	CU_ASSERT(!readable_within(dev_efd(), 0)); /* no timer left behind */
	fake_virtio_stop(&fh);
	dev_close();
}

/* The case: a queue of 256 filled with 85 chains of three
 * descriptors each (255 in all). The driver cannot post a 86th, so the
 * frame is dropped at once instead of the device waiting forever with the
 * backend unwatched. */
static void test_rx_desc_exhausted(void)
{
	struct cub_reply rep;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	for (int i = 0; i < 85; i++)
		fake_vq_add(&fh, RXQ, rx_chain_n(3, 64));
	fake_virtio_kick(&fh, RXQ);
	fill(big, sizeof(big), 4);
	CU_ASSERT_EQUAL(send(sv[1], big, 60000, 0), 60000);
	CU_ASSERT_EQUAL(send(sv[1], big, 150, 0), 150);
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 85);
	rep = stats();
	CU_ASSERT(strstr(rep.text, "rx_dropped 1 rx_dropped_nobuf 1") != NULL);
	CU_ASSERT_TRUE(fake_log_has(&fh, "85 buffers, 255 of 256 descriptors held"));
	/* receiving goes on: the backend is watched again once buffers come */
	fake_vq_add(&fh, RXQ, rx_chain_n(3, 64));
	fake_virtio_kick(&fh, RXQ);
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 86);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[85].written, HDR + 150);
	CU_ASSERT_EQUAL(le16(mem_of(&chains[85]) + 10), 1);
	fake_virtio_stop(&fh);
	dev_close();
}

/* Buffers trickle in one kick at a time: the frame waits (nothing
 * published, the backend unwatched) and goes out whole once enough came. */
static void test_rx_trickle(void)
{
	struct cub_vq_chain *c[12];
	struct cub_reply rep;
	int efd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	fh.vqs[RXQ].size = 16;
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	efd = dev_efd();
	fill(big, sizeof(big), 6);
	CU_ASSERT_EQUAL(send(sv[1], big, 10000, 0), 10000);
	CU_ASSERT_EQUAL(send(sv[1], big + 1, 70, 0), 70);
	/* 10012 bytes with the header: ten buffers of 1000 and one of 12 */
	for (int i = 0; i < 11; i++) {
		fake_vq_add(&fh, RXQ, c[i] = rx_chain(1000, 0));
		fake_virtio_kick(&fh, RXQ);
		run_loop();
		if (i < 10) {
			CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 0);
			CU_ASSERT(!readable(efd));
		}
	}
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 11);
	CU_ASSERT_EQUAL(le16(mem_of(c[0]) + 10), 11);
	CU_ASSERT_EQUAL(memcmp(mem_of(c[0]) + HDR, big, 1000 - HDR), 0);
	CU_ASSERT_EQUAL(memcmp(mem_of(c[10]), big + 10000 - 12, 12), 0);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[10].written, 12);
	rep = stats();
	CU_ASSERT(strstr(rep.text, "rx_packets 1 rx_bytes 10000 rx_dropped 0") != NULL);
	/* the next frame: the backend is watched again */
	fake_vq_add(&fh, RXQ, c[11] = rx_chain(1000, 0));
	fake_virtio_kick(&fh, RXQ);
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 12);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[11].written, HDR + 70);
	/* the wait timer, armed while the frame waited, is gone */
	CU_ASSERT(!readable_within(efd, RX_WAIT_MS_TEST + 50));
	fake_virtio_stop(&fh);
	dev_close();
}

/* A driver that keeps a few buffers posted and adds none until it gets
 * some back (Linux refills only with half a ring free): after the wait
 * the frame is dropped, its buffers go back, receiving goes on. Kicks
 * without buffers do not extend the wait; a reset ends it. */
static void test_rx_wait_timeout(void)
{
	struct cub_vq_chain *c;
	struct cub_reply rep;
	uint64_t t0, t1, now;
	int efd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	efd = dev_efd();
	for (int i = 0; i < 4; i++)
		fake_vq_add(&fh, RXQ, rx_chain(HDR + 1514, 0));
	fill(big, sizeof(big), 8);
	CU_ASSERT_EQUAL(send(sv[1], big, 20000, 0), 20000);
	CU_ASSERT_EQUAL(send(sv[1], big, 80, 0), 80);
	t0 = fh.ops.clock_us(fake_inst(&fh));
	fake_virtio_kick(&fh, RXQ);
	run_loop();
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 0);
	CU_ASSERT(!readable(efd));
	usleep(RX_WAIT_MS_TEST / 2 * 1000);
	t1 = fh.ops.clock_us(fake_inst(&fh));
	fake_virtio_kick(&fh, RXQ); /* no new buffer */
	/*
	 * The wait ends RX_WAIT_MS after the frame came (t0), not after this
	 * kick (t1): the timer's fd is readable before t1 + RX_WAIT_MS, which
	 * a wait the kick had extended could not be. Asked of the kernel's
	 * timer (poll until that instant), not of when this thread next runs:
	 * a busy host delays the reading, never the timer. A thread so late
	 * that t1 + RX_WAIT_MS has passed cannot tell; it checks the rest.
	 */
	now = fh.ops.clock_us(fake_inst(&fh));
	if (now + 1000 < t1 + RX_WAIT_MS_TEST * 1000)
		CU_ASSERT_TRUE(readable_within(efd, (int)((t1 + RX_WAIT_MS_TEST * 1000 - now) / 1000) - 1));
	CU_ASSERT_TRUE_FATAL(readable_within(efd, RX_WAIT_MS_TEST + 500));
	CU_ASSERT(fh.ops.clock_us(fake_inst(&fh)) - t0 >= RX_WAIT_MS_TEST * 1000 - 5000);
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 4);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(fh.vqs[RXQ].used[i].written, 0);
	rep = stats();
	CU_ASSERT(strstr(rep.text, "rx_dropped 1 rx_dropped_nobuf 1") != NULL);
	CU_ASSERT_TRUE(fake_log_has(&fh, "no more receive buffers came"));
	fake_vq_add(&fh, RXQ, c = rx_chain(HDR + 1514, 0));
	fake_virtio_kick(&fh, RXQ);
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 5);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[4].written, HDR + 80);
	/* a reset while a frame waits leaves no timer running */
	fake_vq_add(&fh, RXQ, rx_chain(HDR + 1514, 0));
	CU_ASSERT_EQUAL(send(sv[1], big, 20000, 0), 20000);
	fake_virtio_kick(&fh, RXQ);
	run_loop();
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 5);
	fake_virtio_stop(&fh);
	CU_ASSERT(!readable_within(efd, RX_WAIT_MS_TEST + 50));
	dev_close();
}

int main(void)
{
	/* The receive tests that hold whichever way a frame is received (see net_main). */
	static const struct cu_test rx[] = {
		{ "RX: no buffers, backpressure", test_rx_backpressure },
		{ "reset with a frame half placed", test_reset },
		{ "RX: mergeable, a queue too small for the frame", test_rx_small_queue },
		{ "RX: mergeable, every descriptor held", test_rx_desc_exhausted },
		{ "RX: mergeable, buffers trickling in", test_rx_trickle },
		{ "RX: mergeable, a driver that stops posting", test_rx_wait_timeout },
		{ NULL, NULL },
	};

	return net_main("virtio_net_rxwait", NULL, rx);
}
