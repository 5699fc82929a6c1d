/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of virtio-net's receive path: where frames land in the guest's
 * buffers (one, mergeable, popped ahead, contiguous, through the bounce
 * buffer), malformed chains, and a vnet-header backend with offloads. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "virtio_net_support.h"

/* One frame per buffer; the header says one buffer. */
static void test_rx_single(void)
{
	uint8_t frame[1514];
	struct cub_vq_chain *c;
	uint8_t *m;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	c = rx_chain(HDR + 1514, 7); /* header split over two segments */
	fake_vq_add(&fh, RXQ, c);
	fake_virtio_kick(&fh, RXQ);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 0);
	fill(frame, sizeof(frame), 3);
	CU_ASSERT_EQUAL(send(sv[1], frame, 1000, 0), 1000);
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 1);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].head, c->head);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].written, HDR + 1000);
	m = mem_of(c);
	CU_ASSERT_EQUAL(m[0], 0);      /* flags */
	CU_ASSERT_EQUAL(m[1], 0);      /* gso_type NONE */
	CU_ASSERT_EQUAL(le16(m + 10), 1); /* num_buffers */
	CU_ASSERT_EQUAL(memcmp(m + HDR, frame, 1000), 0);
	CU_ASSERT_EQUAL(m[HDR + 1000], 0xee);
	CU_ASSERT(fh.vqs[RXQ].notifies >= 1);
	fake_virtio_stop(&fh);
	dev_close();
}

/* A frame longer than one mergeable buffer spreads over several, published at once. */
static void test_rx_mergeable(void)
{
	uint8_t frame[4000];
	struct cub_vq_chain *c[4];
	unsigned batches;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	for (int i = 0; i < 4; i++)
		fake_vq_add(&fh, RXQ, c[i] = rx_chain(HDR + 1000, i == 1 ? 300 : 0));
	fake_virtio_kick(&fh, RXQ);
	fill(frame, sizeof(frame), 5);
	CU_ASSERT_EQUAL(send(sv[1], frame, 2500, 0), 2500);
	batches = fh.push_batches;
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 3);
	CU_ASSERT_EQUAL(fh.push_batches, batches + 1); /* one publication */
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].head, c[0]->head);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].written, HDR + 1000);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[1].head, c[1]->head);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[1].written, HDR + 1000); /* no header in later buffers */
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[2].head, c[2]->head);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[2].written, 2500 - 1000 - (HDR + 1000));
	CU_ASSERT_EQUAL(le16(mem_of(c[0]) + 10), 3);
	CU_ASSERT_EQUAL(memcmp(mem_of(c[0]) + HDR, frame, 1000), 0);
	CU_ASSERT_EQUAL(memcmp(mem_of(c[1]), frame + 1000, HDR + 1000), 0);
	CU_ASSERT_EQUAL(memcmp(mem_of(c[2]), frame + 2012, 488), 0);
	/* the fourth buffer takes the next frame */
	CU_ASSERT_EQUAL(send(sv[1], frame, 64, 0), 64);
	run_loop();
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 4);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[3].written, HDR + 64);
	CU_ASSERT_EQUAL(le16(mem_of(c[3]) + 10), 1);
	fake_virtio_stop(&fh);
	dev_close();
}

/*
 * Frames longer than one mergeable buffer, one after another: from the
 * second on, the buffers a frame needs are popped before the recv, which
 * lands straight in them; those a shorter frame leaves go back to the ring
 * (unpop) and carry the next frames, in ring order. Chains of many
 * segments that would overflow recv's iovec go back too, and the bounce
 * buffer carries the rest. Every byte lands where the guest expects it.
 */
static void test_rx_pop_ahead(void)
{
	static uint8_t frame[20000];
	struct cub_vq_chain *c[64];
	unsigned used = 0, nc = 0;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	for (unsigned i = 0; i < 40; i++)
		fake_vq_add(&fh, RXQ, c[nc++] = rx_chain(4096, 0));
	fake_virtio_kick(&fh, RXQ);
	for (unsigned round = 0; round < 4; round++) {
		size_t len = round == 2 ? 100 : 20000, off = 0;
		unsigned first = used, k;

		fill(frame, len, 30 + round);
		CU_ASSERT_EQUAL(send(sv[1], frame, len, 0), (ssize_t)len);
		run_loop();
		k = (unsigned)(HDR + len + 4095) / 4096;
		CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, used + k);
		CU_ASSERT_EQUAL(le16(mem_of(c[first]) + 10), k);
		for (unsigned j = 0; j < k; j++) {
			size_t skip = j ? 0 : HDR, n = len - off < 4096 - skip ? len - off : 4096 - skip;

			/* in ring order: the ones given back came out again */
			CU_ASSERT_EQUAL(fh.vqs[RXQ].used[first + j].head, c[first + j]->head);
			CU_ASSERT_EQUAL(fh.vqs[RXQ].used[first + j].written, skip + n);
			CU_ASSERT_EQUAL(memcmp(mem_of(c[first + j]) + skip, frame + off, n), 0);
			off += n;
		}
		used += k;
	}
	CU_ASSERT(fh.vqs[RXQ].unpops >= 4); /* the short frame's */
	CU_ASSERT_EQUAL(fh.vqs[RXQ].unpop_bad, 0);
	fake_virtio_stop(&fh);
	dev_close();

	/* Chains of 300 segments: a fourth would pass recv's 1024 iovecs. */
	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	nc = 0;
	for (unsigned i = 0; i < 12; i++)
		fake_vq_add(&fh, RXQ, c[nc++] = rx_chain_n(300, 16)); /* 4800 bytes each */
	fake_virtio_kick(&fh, RXQ);
	used = 0;
	for (unsigned round = 0; round < 3; round++) {
		size_t off = 0;
		unsigned k = (HDR + 16000 + 4799) / 4800;

		fill(frame, 16000, 50 + round);
		CU_ASSERT_EQUAL(send(sv[1], frame, 16000, 0), 16000);
		run_loop();
		CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, used + k);
		for (unsigned j = 0; j < k; j++) {
			size_t skip = j ? 0 : HDR, n = 16000 - off < 4800 - skip ? 16000 - off : 4800 - skip;

			CU_ASSERT_EQUAL(fh.vqs[RXQ].used[used + j].head, c[used + j]->head);
			CU_ASSERT_EQUAL(memcmp(mem_of(c[used + j]) + skip, frame + off, n), 0);
			off += n;
		}
		used += k;
	}
	CU_ASSERT(fh.vqs[RXQ].unpops >= 1);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].unpop_bad, 0);
	fake_virtio_stop(&fh);
	dev_close();
}

/* The socket backend, counting the segments a send and a recv that took a
 * frame were given. */
static int rec_send_n, rec_recv_n;

static int64_t rec_send(void *priv, const struct iovec *iov, int n)
{
	rec_send_n = n;
	return ((const struct cub_net_ops *)sockp->ops)->send(priv, iov, n);
}

static int64_t rec_recv(void *priv, const struct iovec *iov, int n)
{
	int64_t r = ((const struct cub_net_ops *)sockp->ops)->recv(priv, iov, n);

	if (r > 0)
		rec_recv_n = n; /* the one that took a frame */
	return r;
}

/*
 * Buffers that follow one another in memory (as Linux carves its mergeable
 * receive buffers from one page) reach the backend as one segment; apart,
 * one segment each. A transmit chain split in two, contiguous: one
 * segment. Every byte still lands where the guest expects it.
 */
static void test_rx_contiguous(void)
{
	/* eight 4 KiB buffers back to back, each frame's data 16-byte aligned */
	static uint8_t pages[8 * 4096 + 4] __attribute__((aligned(4096)));
	uint8_t *frag[8];
	static uint8_t frame[14000], got[16000];
	static struct cub_net_ops ops;
	struct cub_vq_chain *c[12];

	ops = *(const struct cub_net_ops *)sockp->ops;
	ops.send = rec_send;
	ops.recv = rec_recv;
	be_ops = &ops;
	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	for (unsigned i = 0; i < 8; i++)
		frag[i] = pages + 4 + i * 4096;
	for (unsigned i = 0; i < 12; i++) {
		c[i] = i < 8 ? chain() : rx_chain(4096, 0);
		if (i < 8)
			seg(c[i], frag[i], 4096, true);
		fake_vq_add(&fh, RXQ, c[i]);
	}
	fake_virtio_kick(&fh, RXQ);
	for (unsigned f = 0; f < 3; f++) { /* chains 0-3, 4-7 (popped ahead), 8-11 */
		size_t off = 0;

		fill(frame, sizeof(frame), 60 + f);
		CU_ASSERT_EQUAL(send(sv[1], frame, sizeof(frame), 0), (ssize_t)sizeof(frame));
		run_loop();
		CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 4 * (f + 1));
		for (unsigned j = 0; j < 4; j++) {
			const uint8_t *m = j + 4 * f < 8 ? frag[j + 4 * f] : mem_of(c[j + 4 * f]);
			size_t skip = j ? 0 : HDR, n = sizeof(frame) - off < 4096 - skip ?
							  sizeof(frame) - off : 4096 - skip;

			CU_ASSERT_EQUAL(memcmp(m + skip, frame + off, n), 0);
			off += n;
		}
		if (f == 1)
			CU_ASSERT_EQUAL(rec_recv_n, 2); /* four buffers in one, and the bounce */
		if (f == 2)
			CU_ASSERT_EQUAL(rec_recv_n, 5);
	}
	fill(frame, 3000, 70);
	fake_vq_add(&fh, TXQ, tx_chain(frame, 3000, NULL, 100));
	fake_virtio_kick(&fh, TXQ);
	CU_ASSERT_EQUAL(rec_send_n, 1);
	CU_ASSERT_EQUAL(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), 3000);
	CU_ASSERT_EQUAL(memcmp(got, frame, 3000), 0);
	fake_virtio_stop(&fh);
	dev_close();
	be_ops = NULL;
}

/*
 * Buffers as Linux lays them out (a frame 12 bytes into a page-aligned
 * buffer): the frame is received whole into the bounce buffer (one segment,
 * nothing popped ahead) and copied to the buffers, every byte where the
 * guest expects it. A header in a descriptor of its own before an aligned
 * one: straight in again.
 */
static void test_rx_bounce(void)
{
	static uint8_t pages[16 * 4096] __attribute__((aligned(4096)));
	static uint8_t frame[20000];
	static struct cub_net_ops ops;
	struct cub_vq_chain *c[11], *h;
	unsigned used = 0;

	ops = *(const struct cub_net_ops *)sockp->ops;
	ops.recv = rec_recv;
	be_ops = &ops;
	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	for (unsigned i = 0; i < 11; i++) { /* what the three frames take */
		c[i] = chain();
		memset(pages + i * 4096, 0xee, 4096);
		seg(c[i], pages + i * 4096, 4096, true);
		fake_vq_add(&fh, RXQ, c[i]);
	}
	fake_virtio_kick(&fh, RXQ);
	for (unsigned round = 0; round < 3; round++) {
		size_t len = round == 1 ? 100 : 20000, off = 0;
		unsigned first = used, k = (unsigned)(HDR + len + 4095) / 4096;

		fill(frame, len, 80 + round);
		rec_recv_n = 0;
		CU_ASSERT_EQUAL(send(sv[1], frame, len, 0), (ssize_t)len);
		run_loop();
		CU_ASSERT_EQUAL(rec_recv_n, 1);
		CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, used + k);
		CU_ASSERT_EQUAL(le16(pages + first * 4096 + 10), k);
		for (unsigned j = 0; j < k; j++) {
			size_t skip = j ? 0 : HDR, n = len - off < 4096 - skip ? len - off : 4096 - skip;
			const uint8_t *m = pages + (first + j) * 4096;

			CU_ASSERT_EQUAL(fh.vqs[RXQ].used[first + j].head, c[first + j]->head);
			CU_ASSERT_EQUAL(fh.vqs[RXQ].used[first + j].written, skip + n);
			CU_ASSERT_EQUAL(memcmp(m + skip, frame + off, n), 0);
			if (skip + n < 4096)
				CU_ASSERT_EQUAL(m[skip + n], 0xee);
			off += n;
		}
		used += k;
	}
	CU_ASSERT_EQUAL(fh.vqs[RXQ].unpops, 0);
	/* header alone, then a page: the frame lands aligned, no bounce */
	h = chain();
	seg(h, pages + 15 * 4096, HDR, true);
	seg(h, pages, 4096, true);
	fake_vq_add(&fh, RXQ, h);
	fake_virtio_kick(&fh, RXQ);
	fill(frame, 3000, 90);
	CU_ASSERT_EQUAL(send(sv[1], frame, 3000, 0), 3000);
	run_loop();
	CU_ASSERT_EQUAL(rec_recv_n, 2); /* the page, and the bounce behind it */
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, used + 1);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[used].written, HDR + 3000);
	CU_ASSERT_EQUAL(memcmp(pages, frame, 3000), 0);
	CU_ASSERT_EQUAL(le16(pages + 15 * 4096 + 10), 1);
	fake_virtio_stop(&fh);
	dev_close();
	be_ops = NULL;
}

/* Without mergeable buffers a frame must fit one buffer; one that does not
 * is dropped and the buffer kept for the next frame. */
static void test_rx_no_mrg(void)
{
	uint8_t frame[3000];
	struct cub_vq_chain *c;
	struct cub_reply rep = { 0 };

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, F(F_MRG_RXBUF)), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	fill(frame, sizeof(frame), 11);
	fake_vq_add(&fh, RXQ, c = rx_chain(HDR + 1518, 0));
	fake_virtio_kick(&fh, RXQ);
	CU_ASSERT_EQUAL(send(sv[1], frame, 2000, 0), 2000);
	CU_ASSERT_EQUAL(send(sv[1], frame, 1518, 0), 1518);
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 1);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].head, c->head);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].written, HDR + 1518);
	CU_ASSERT_EQUAL(le16(mem_of(c) + 10), 1);
	CU_ASSERT_EQUAL(memcmp(mem_of(c) + HDR, frame, 1518), 0);
	((int (*)(void *, struct cub_reply *))fake_method_find(netp, "stats")->fn)(npriv, &rep);
	CU_ASSERT(strstr(rep.text, "rx_packets 1 rx_bytes 1518 rx_dropped 1") != NULL);
	fake_virtio_stop(&fh);
	dev_close();
}

static void test_rx_malformed(void)
{
	static const char *const why[] = { "device-readable", "shorter than the virtio-net header",
					   "empty receive buffer" };
	uint8_t frame[2000] = { 0 };

	for (int k = 0; k < 3; k++) {
		struct cub_vq_chain *c;

		CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
		CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
		c = chain();
		if (k == 0) {
			seg(c, mem_of(c), 8, false);
			seg(c, mem_of(c) + 8, 1500, true);
		} else if (k == 1) {
			seg(c, mem_of(c), HDR - 1, true);
		} else {
			fake_vq_add(&fh, RXQ, rx_chain(HDR + 100, 0));
			seg(c, mem_of(c), 0, true);
		}
		fake_vq_add(&fh, RXQ, c);
		CU_ASSERT_EQUAL(send(sv[1], frame, sizeof(frame), 0), sizeof(frame));
		fake_virtio_kick(&fh, RXQ);
		run_loop();
		CU_ASSERT_EQUAL(fh.broken_calls, 1);
		CU_ASSERT(strstr(fh.broken_why, why[k]) != NULL);
		CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 0);
		fake_virtio_stop(&fh);
		dev_close();
	}
}

/* ---- a backend with vnet headers and offloads, over a socketpair ---- */

static bool vh_on;
static uint32_t vh_offloads;
static unsigned vh_calls;

static void vh_info(void *priv, struct cub_net_info *o)
{
	*o = (struct cub_net_info){ .vnet_hdr = true, .link_up = false, .mtu = 1500,
				    .offloads = CUB_NET_OFF_CSUM | CUB_NET_OFF_TSO4 |
						CUB_NET_OFF_TSO6,
				    .rx_fd = sv[0], .tx_fd = sv[0] };
}

static int vh_set(void *priv, bool on)
{
	vh_on = on;
	vh_calls++;
	return 0;
}

static int vh_offl(void *priv, uint32_t o)
{
	vh_offloads = o;
	return 0;
}

static int64_t vh_send(void *priv, const struct iovec *iov, int n)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };
	ssize_t r = sendmsg(sv[0], &m, MSG_DONTWAIT);

	return r < 0 ? -errno : r;
}

static int64_t vh_recv(void *priv, const struct iovec *iov, int n)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };
	ssize_t r = recvmsg(sv[0], &m, MSG_DONTWAIT);

	if (r < 0)
		return errno == EAGAIN ? 0 : -errno;
	return m.msg_flags & MSG_TRUNC ? -EMSGSIZE : r;
}

static void vh_close(void *priv)
{
}

static const struct cub_net_ops vh_ops = {
	.info = vh_info, .set_vnet_hdr = vh_set, .set_offloads = vh_offl,
	.send = vh_send, .recv = vh_recv, .close = vh_close,
};

/* vh_recv, noting where the frame after the header would land */
static uintptr_t vh_frame_at;

static int64_t vh_recv_rec(void *priv, const struct iovec *iov, int n)
{
	vh_frame_at = n > 0 && iov[0].iov_len > HDR ? (uintptr_t)iov[0].iov_base + HDR : 0;
	return vh_recv(priv, iov, n);
}

/*
 * A backend with vnet headers (a tap) into buffers laid out as Linux's:
 * received whole into the bounce buffer with the frame after the header
 * 16-byte aligned there (the kernel's copy runs at full speed), then
 * spread over the buffers, header first, every byte in place.
 */
static void test_vnet_bounce(void)
{
	static uint8_t pages[3 * 4096] __attribute__((aligned(4096)));
	static struct cub_net_ops ops;
	uint8_t frame[7000], wire[HDR + 7000], hd[HDR] = { 2, 0 };
	struct cub_vq_chain *c[3];
	size_t off = 0;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	ops = vh_ops;
	ops.recv = vh_recv_rec;
	be.ops = &ops;
	vh_info(NULL, &be.info);
	CU_ASSERT_EQUAL_FATAL(recreate(), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	for (unsigned i = 0; i < 3; i++) {
		c[i] = chain();
		memset(pages + i * 4096, 0xee, 4096);
		seg(c[i], pages + i * 4096, 4096, true);
		fake_vq_add(&fh, RXQ, c[i]);
	}
	fill(frame, sizeof(frame), 23);
	memcpy(wire, hd, HDR);
	memcpy(wire + HDR, frame, sizeof(frame));
	vh_frame_at = 1;
	CU_ASSERT_EQUAL(send(sv[1], wire, sizeof(wire), 0), (ssize_t)sizeof(wire));
	fake_virtio_kick(&fh, RXQ);
	run_loop();
	CU_ASSERT(vh_frame_at && vh_frame_at % 16 == 0);
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 2);
	CU_ASSERT_EQUAL(pages[0], 2); /* the backend's header, DATA_VALID */
	CU_ASSERT_EQUAL(le16(pages + 10), 2);
	for (unsigned j = 0; j < 2; j++) {
		size_t skip = j ? 0 : HDR, n = sizeof(frame) - off < 4096 - skip ?
						sizeof(frame) - off : 4096 - skip;

		CU_ASSERT_EQUAL(fh.vqs[RXQ].used[j].head, c[j]->head);
		CU_ASSERT_EQUAL(fh.vqs[RXQ].used[j].written, skip + n);
		CU_ASSERT_EQUAL(memcmp(pages + j * 4096 + skip, frame + off, n), 0);
		off += n;
	}
	fake_virtio_stop(&fh);
	dev_close();
}

static void test_offloads(void)
{
	uint8_t frame[3000], got[4000], hd[HDR] = { 1, 1, 54, 0, 0x5a, 0x05, 34, 0, 16, 0, 0, 0 };
	struct cub_vq_chain *c;
	uint64_t f;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	be.ops = &vh_ops;
	vh_info(NULL, &be.info);
	vh_calls = 0;
	CU_ASSERT_EQUAL_FATAL(recreate(), 0);
	f = fh.vdev->features(fh.vpriv);
	CU_ASSERT(f & F(F_CSUM) && f & F(F_GUEST_CSUM) && f & F(F_HOST_TSO4) && f & F(F_GUEST_TSO4));
	CU_ASSERT(f & F(F_MTU));
	CU_ASSERT_EQUAL(fake_virtio_config(&fh, 10, 2), 1500);
	CU_ASSERT_EQUAL(fake_virtio_config(&fh, 6, 2), 0); /* the backend says link down */
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	CU_ASSERT(vh_on);
	CU_ASSERT_EQUAL(vh_offloads, CUB_NET_OFF_CSUM | CUB_NET_OFF_TSO4 | CUB_NET_OFF_TSO6);

	/* TX: a TSO frame goes out with the guest's header in front */
	fill(frame, sizeof(frame), 17);
	fake_vq_add(&fh, TXQ, tx_chain(frame, 2000, hd, 3));
	fake_virtio_kick(&fh, TXQ);
	CU_ASSERT_EQUAL(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), HDR + 2000);
	CU_ASSERT_EQUAL(memcmp(got, hd, HDR), 0);
	CU_ASSERT_EQUAL(memcmp(got + HDR, frame, 2000), 0);
	/* UFO was not offered: dropped */
	hd[1] = 3;
	fake_vq_add(&fh, TXQ, tx_chain(frame, 2000, hd, 0));
	fake_virtio_kick(&fh, TXQ);
	CU_ASSERT_EQUAL(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), -1);
	CU_ASSERT_EQUAL(fh.broken_calls, 0);

	/* RX: the backend's header reaches the guest, num_buffers set */
	hd[0] = 2; /* DATA_VALID */
	hd[1] = 0;
	memcpy(got, hd, HDR);
	memcpy(got + HDR, frame, 1400);
	got[10] = 0x77; /* whatever the backend left there */
	fake_vq_add(&fh, RXQ, c = rx_chain(HDR + 1500, 4));
	CU_ASSERT_EQUAL(send(sv[1], got, HDR + 1400, 0), HDR + 1400);
	fake_virtio_kick(&fh, RXQ);
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 1);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].written, HDR + 1400);
	CU_ASSERT_EQUAL(mem_of(c)[0], 2);
	CU_ASSERT_EQUAL(le16(mem_of(c) + 10), 1);
	CU_ASSERT_EQUAL(memcmp(mem_of(c) + HDR, frame, 1400), 0);
	fake_virtio_stop(&fh);
	dev_close();

	/* a guest that sends offloads but takes none: the header stays on, the
	 * device keeps what the guest refused out of received headers */
	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, F(F_GUEST_CSUM) | F(F_GUEST_TSO4) | F(8) | F(9) | F(10)), 0);
	be.ops = &vh_ops;
	vh_info(NULL, &be.info);
	CU_ASSERT_EQUAL_FATAL(recreate(), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	CU_ASSERT(vh_on);
	CU_ASSERT_EQUAL(vh_offloads, 0);
	fake_vq_add(&fh, RXQ, c = rx_chain(HDR + 3000, 0));
	fake_virtio_kick(&fh, RXQ);
	memset(got, 0, HDR);
	got[0] = 2; /* DATA_VALID: not for this guest */
	CU_ASSERT_EQUAL(send(sv[1], got, HDR + 100, 0), HDR + 100);
	got[1] = 1; /* a TSO frame: never for this guest */
	CU_ASSERT_EQUAL(send(sv[1], got, HDR + 2000, 0), HDR + 2000);
	got[0] = 1; /* a partial checksum: likewise */
	got[1] = 0;
	CU_ASSERT_EQUAL(send(sv[1], got, HDR + 100, 0), HDR + 100);
	run_loop();
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 1);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].written, HDR + 100);
	CU_ASSERT_EQUAL(mem_of(c)[0], 0);
	fake_vq_add(&fh, RXQ, c = rx_chain(HDR + 3000, 0));
	fake_virtio_kick(&fh, RXQ);
	run_loop();
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 1); /* both dropped */
	CU_ASSERT_EQUAL(fh.broken_calls, 0);
	fake_virtio_stop(&fh);
	dev_close();

	/* feature dependencies (virtio 5.1.3.1): TSO without checksum offload */
	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	be.ops = &vh_ops;
	vh_info(NULL, &be.info);
	CU_ASSERT_EQUAL_FATAL(recreate(), 0);
	CU_ASSERT_EQUAL(fh.vdev->set_features(fh.vpriv, F(F_HOST_TSO4) | F(F_MAC)), -EINVAL);
	CU_ASSERT_EQUAL(fh.vdev->set_features(fh.vpriv, F(F_GUEST_TSO4) | F(F_CSUM)), -EINVAL);
	CU_ASSERT_EQUAL(fh.vdev->set_features(fh.vpriv, F(F_GUEST_TSO4) | F(F_GUEST_CSUM)), 0);
	dev_close();

	/* a guest that takes no offload: plain frames, the header stays off */
	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, F(F_CSUM) | F(F_GUEST_CSUM) | 0x7f80ull /* 7..14 */), 0);
	be.ops = &vh_ops;
	vh_info(NULL, &be.info);
	vh_on = true;
	CU_ASSERT_EQUAL_FATAL(recreate(), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	CU_ASSERT(!vh_on);
	fake_vq_add(&fh, TXQ, tx_chain(frame, 100, NULL, 0));
	fake_virtio_kick(&fh, TXQ);
	CU_ASSERT_EQUAL(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), 100);
	fake_virtio_stop(&fh);
	dev_close();
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "RX: buffers popped ahead of a recv, the unused given back", test_rx_pop_ahead },
		{ "RX and TX: contiguous buffers, one segment", test_rx_contiguous },
		{ "RX: a frame that would land misaligned, through the bounce buffer", test_rx_bounce },
		{ "RX with a vnet header: the frame aligned in the bounce buffer", test_vnet_bounce },
		{ NULL, NULL },
	};
	/* The receive tests that hold whichever way a frame is received (see net_main). */
	static const struct cu_test rx[] = {
		{ "RX: one buffer", test_rx_single },
		{ "RX: mergeable buffers", test_rx_mergeable },
		{ "RX: without mergeable buffers", test_rx_no_mrg },
		{ "RX: malformed chains", test_rx_malformed },
		{ "vnet header backend: offloads", test_offloads },
		{ NULL, NULL },
	};

	return net_main("virtio_net_rx", tests, rx);
}
