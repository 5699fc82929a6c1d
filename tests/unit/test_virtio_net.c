/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of virtio-net: the built plugin on the socket backend (and on a
 * vnet-header backend made here) through the fake host's virtqueues. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cunit_main.h"
#define RX_WAIT_MS_TEST 100 /* virtio_net.h RX_WAIT_MS */
#include "fake_host.h"

#define RXQ 0
#define TXQ 1
#define HDR 12
#define F(bit) (1ull << (bit))
#define F_CSUM 0
#define F_GUEST_CSUM 1
#define F_MTU 3
#define F_MAC 5
#define F_GUEST_TSO4 7
#define F_HOST_TSO4 11
#define F_MRG_RXBUF 15
#define F_STATUS 16

static const struct cub_plugin *netp, *sockp;
static void *net_dl, *sock_dl;
static struct fake_host fh;
static void *ncfg, *npriv, *scfg, *spriv;
static struct cub_net be;
static int sv[2] = { -1, -1 }; /* sv[1]: the test's end of the wire */
static const struct cub_net_ops *be_ops; /* the backend's ops as the device sees them; NULL: the socket's */

/* Guest memory: chains keep pointers to these until popped. */
#define N_CHAINS 128
static struct cub_vq_chain chains[N_CHAINS];
static unsigned next_chain;
static uint8_t guest[N_CHAINS][20000 + 64] __attribute__((aligned(64)));
/*
 * Where each chain's memory starts in its slot. A received frame follows
 * the 12-byte header: from offset 4 it is 16-byte aligned and the device
 * receives straight into the buffers; main runs the receive tests again
 * from offset 0, Linux's layout, where the frame goes through the bounce
 * buffer first (queues.c, rx_bounce).
 */
static size_t guest_off = 4;

static struct cub_vq_chain *chain(void)
{
	struct cub_vq_chain *c = &chains[next_chain % N_CHAINS];

	fake_chain_init(c, (uint16_t)(next_chain % N_CHAINS));
	next_chain++;
	return c;
}

static uint8_t *mem_of(const struct cub_vq_chain *c)
{
	return guest[c - chains] + guest_off;
}

static void seg(struct cub_vq_chain *c, void *p, size_t len, bool w)
{
	CU_ASSERT_EQUAL_FATAL(fake_chain_add(c, p, len, w), 0);
}

/* ---- device with the socket backend on a socketpair ---- */

static int dev_open(const char *const *kv, uint64_t refused)
{
	char fdtxt[16];
	const char *skv[] = { "fd", fdtxt, NULL };
	const struct cub_net_ops *so = sockp->ops;
	int err;

	fake_host_init(&fh);
	fh.features_refused = refused;
	next_chain = 0;
	CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	snprintf(fdtxt, sizeof(fdtxt), "%d", sv[0]);
	scfg = fake_cfg_new(sockp, skv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(scfg);
	CU_ASSERT_EQUAL_FATAL(so->open(fake_inst(&fh), &fh.ops, scfg, &spriv), 0);
	be = (struct cub_net){ .ops = be_ops ? be_ops : so, .priv = spriv, .name = "socket[net0]",
			       .dev_id = "net0", .vm_path = "/vms/a.cfg" };
	so->info(spriv, &be.info);
	fh.net = &be;
	ncfg = fake_cfg_new(netp, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ncfg);
	npriv = NULL;
	err = fake_create(&fh, netp, ncfg, &npriv);
	if (err && fh.verbose)
		fprintf(stderr, "(create: %d %s) ", err, fh.fail_msg);
	return err;
}

static void dev_close(void)
{
	if (npriv)
		((const struct cub_device_ops *)netp->ops)->destroy(npriv);
	npriv = NULL;
	fake_cfg_free(netp, ncfg);
	((const struct cub_net_ops *)sockp->ops)->close(spriv);
	fake_cfg_free(sockp, scfg);
	close(sv[0]);
	close(sv[1]);
	memset(&be, 0, sizeof(be));
	fake_host_fini(&fh);
}

/* The device's epoll set, as the event loop watches it. */
static int dev_efd(void)
{
	for (unsigned i = 0; i < fh.n_watches; i++)
		if (fh.watches[i].active)
			return fh.watches[i].fd;
	return -1;
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

/* The event loop: fire the device's watch while its set is readable. */
static void run_loop(void)
{
	int efd = dev_efd(), n = 0;

	while (efd >= 0 && readable(efd) && n++ < 1000)
		fake_watch_fire(&fh, efd);
}

static uint64_t cfg_u(uint32_t off, uint32_t len)
{
	uint8_t b[8] = { 0 };
	uint64_t v = 0;

	fh.vdev->config_read(fh.vpriv, off, b, len);
	for (uint32_t i = 0; i < len; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

static void mac_of_dev(uint8_t mac[6])
{
	fh.vdev->config_read(fh.vpriv, 0, mac, 6);
}

static unsigned le16(const uint8_t *p)
{
	return p[0] | p[1] << 8;
}

/* A transmit chain: header (zeroes unless hd) and frame, split as asked. */
static struct cub_vq_chain *tx_chain(const uint8_t *frame, size_t len, const uint8_t *hd,
				     size_t split)
{
	struct cub_vq_chain *c = chain();
	uint8_t *m = mem_of(c);

	memset(m, 0, HDR);
	if (hd)
		memcpy(m, hd, HDR);
	memcpy(m + HDR, frame, len);
	if (split && split < HDR + len) {
		seg(c, m, split, false);
		seg(c, m + split, HDR + len - split, false);
	} else {
		seg(c, m, HDR + len, false);
	}
	return c;
}

/* A receive buffer of len bytes (one segment, or two if split). */
static struct cub_vq_chain *rx_chain(size_t len, size_t split)
{
	struct cub_vq_chain *c = chain();
	uint8_t *m = mem_of(c);

	memset(m, 0xee, len);
	if (split && split < len) {
		seg(c, m, split, true);
		seg(c, m + split, len - split, true);
	} else {
		seg(c, m, len, true);
	}
	return c;
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 7 + seed);
}

/* ---- tests ---- */

static void test_config(void)
{
	uint64_t f;
	uint8_t mac[6];

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL(fh.net_open_calls, 1);
	CU_ASSERT_EQUAL(fh.vdev->device_id, 1);
	CU_ASSERT_EQUAL(fh.vdev->n_queues, 2);
	f = fh.vdev->features(fh.vpriv);
	CU_ASSERT(f & F(F_MAC) && f & F(F_STATUS) && f & F(F_MRG_RXBUF));
	/* the socket backend has no vnet header: no offloads, no MTU unless asked */
	CU_ASSERT(!(f & (F(F_CSUM) | F(F_GUEST_CSUM) | F(F_HOST_TSO4) | F(F_GUEST_TSO4))));
	CU_ASSERT(!(f & F(F_MTU)));
	CU_ASSERT_EQUAL(cfg_u(6, 2), 1); /* VIRTIO_NET_S_LINK_UP */
	CU_ASSERT_EQUAL(cfg_u(8, 2), 1);
	mac_of_dev(mac);
	CU_ASSERT_EQUAL(mac[0] & 3, 2); /* locally administered, unicast */
	CU_ASSERT_EQUAL(dev_efd() >= 0, true);
	dev_close();

	CU_ASSERT_EQUAL_FATAL(dev_open((const char *[]){ "mac", "52:54:00:ab:cd:ef", "mtu", "9000",
							 NULL }, 0), 0);
	mac_of_dev(mac);
	CU_ASSERT_EQUAL(memcmp(mac, "\x52\x54\x00\xab\xcd\xef", 6), 0);
	CU_ASSERT(fh.vdev->features(fh.vpriv) & F(F_MTU));
	CU_ASSERT_EQUAL(cfg_u(10, 2), 9000);
	dev_close();

	CU_ASSERT_EQUAL(dev_open((const char *[]){ "mac", "01:00:5e:00:00:01", NULL }, 0), -EINVAL);
	CU_ASSERT(strstr(fh.fail_msg, "unicast") != NULL);
	dev_close();
	CU_ASSERT_EQUAL(dev_open((const char *[]){ "mac", "52:54:00:ab:cd", NULL }, 0), -EINVAL);
	dev_close();
	CU_ASSERT_EQUAL(dev_open((const char *[]){ "mac", "52:54:00:ab:cd:zz", NULL }, 0), -EINVAL);
	dev_close();
	CU_ASSERT_EQUAL(dev_open((const char *[]){ "mtu", "67", NULL }, 0), -EINVAL);
	dev_close();
	CU_ASSERT_EQUAL(dev_open((const char *[]){ "mtu", "65536", NULL }, 0), -EINVAL);
	dev_close();
}

/* Destroy the device and create it again on the same backend, as the host
 * would: its watches go first. */
static int recreate(void)
{
	for (unsigned i = 0; i < fh.n_watches; i++)
		fh.watches[i].active = false;
	((const struct cub_device_ops *)netp->ops)->destroy(npriv);
	npriv = NULL;
	return fake_create(&fh, netp, ncfg, &npriv);
}

/* The default MAC: the same for the same VM and device, else different. */
static void derived(const char *path, const char *id, uint8_t mac[6])
{
	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	be.dev_id = id;
	be.vm_path = path;
	CU_ASSERT_EQUAL_FATAL(recreate(), 0);
	mac_of_dev(mac);
	dev_close();
}

static void test_mac_derivation(void)
{
	uint8_t a[6], a2[6], b[6], c[6], d[6];

	derived("/vms/a.cfg", "net0", a);
	derived("/vms/a.cfg", "net0", a2);
	derived("/vms/a.cfg", "net1", b);
	derived("/vms/b.cfg", "net0", c);
	derived("/vms/a.cfgn", "et0", d); /* the parts do not just run together */
	CU_ASSERT_EQUAL(memcmp(a, a2, 6), 0);
	CU_ASSERT_NOT_EQUAL(memcmp(a, b, 6), 0);
	CU_ASSERT_NOT_EQUAL(memcmp(a, c, 6), 0);
	CU_ASSERT_NOT_EQUAL(memcmp(a, d, 6), 0);
	CU_ASSERT_EQUAL(a[0] & 3, 2);
	CU_ASSERT_EQUAL(b[0] & 3, 2);
	CU_ASSERT_EQUAL(c[0] & 3, 2);

	/* a backend's suggestion beats the derived one, the param beats both */
	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	be.info.has_mac = true;
	memcpy(be.info.mac, "\x02\x11\x22\x33\x44\x55", 6);
	CU_ASSERT_EQUAL_FATAL(recreate(), 0);
	mac_of_dev(a);
	CU_ASSERT_EQUAL(memcmp(a, "\x02\x11\x22\x33\x44\x55", 6), 0);
	dev_close();
}

static void test_tx(void)
{
	uint8_t frame[1514], got[2048], hd[HDR] = { 0 };
	struct cub_reply rep = { 0 };
	const struct cub_method *m;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	fill(frame, sizeof(frame), 1);
	/* header split 5 + 7, frame after it in the second segment */
	fake_vq_add(&fh, TXQ, tx_chain(frame, 60, NULL, 5));
	fake_vq_add(&fh, TXQ, tx_chain(frame, sizeof(frame), NULL, HDR + 100));
	fake_virtio_kick(&fh, TXQ);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 2);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].used[0].written, 0);
	CU_ASSERT(fh.vqs[TXQ].notifies >= 1);
	CU_ASSERT_EQUAL(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), 60);
	CU_ASSERT_EQUAL(memcmp(got, frame, 60), 0);
	CU_ASSERT_EQUAL(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), (ssize_t)sizeof(frame));
	CU_ASSERT_EQUAL(memcmp(got, frame, sizeof(frame)), 0);

	/* dropped, not broken: a runt, a checksum request never negotiated */
	fake_vq_add(&fh, TXQ, tx_chain(frame, 10, NULL, 0));
	hd[0] = 1; /* VIRTIO_NET_HDR_F_NEEDS_CSUM */
	fake_vq_add(&fh, TXQ, tx_chain(frame, 100, hd, 0));
	hd[0] = 0;
	hd[1] = 1; /* GSO TCPv4 */
	fake_vq_add(&fh, TXQ, tx_chain(frame, 100, hd, 0));
	fake_virtio_kick(&fh, TXQ);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 5);
	CU_ASSERT_EQUAL(fh.broken_calls, 0);
	CU_ASSERT_EQUAL(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), -1);

	m = fake_method_find(netp, "stats");
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_STRING_EQUAL(m->sig, "");
	CU_ASSERT_EQUAL(((int (*)(void *, struct cub_reply *))m->fn)(npriv, &rep), 0);
	CU_ASSERT(strstr(rep.text, "tx_packets 2 tx_bytes 1574 tx_dropped 3") != NULL);
	CU_ASSERT(strstr(rep.text, "rx_packets 0 ") != NULL);
	CU_ASSERT_EQUAL(rep.len, strlen(rep.text));
	fake_virtio_stop(&fh);
	dev_close();
}

static void test_tx_malformed(void)
{
	static const char *const why[] = { "shorter than the virtio-net header",
					   "device-writable", "longer than 65550" };
	uint8_t frame[64] = { 0 };

	for (int k = 0; k < 3; k++) {
		struct cub_vq_chain *c;

		CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
		CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
		if (k == 0) {
			c = chain();
			seg(c, mem_of(c), 11, false);
		} else if (k == 1) {
			c = tx_chain(frame, sizeof(frame), NULL, 0);
			seg(c, mem_of(c) + 200, 16, true);
		} else {
			c = chain();
			seg(c, mem_of(c), HDR, false);
			for (int i = 0; i < 4; i++) /* segments may alias: 80 KiB of frame */
				seg(c, mem_of(c), 20000, false);
		}
		fake_vq_add(&fh, TXQ, c);
		fake_virtio_kick(&fh, TXQ);
		CU_ASSERT_EQUAL(fh.broken_calls, 1);
		CU_ASSERT(strstr(fh.broken_why, why[k]) != NULL);
		CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 0);
		CU_ASSERT_EQUAL(recv(sv[1], frame, sizeof(frame), MSG_DONTWAIT), -1);
		fake_virtio_stop(&fh);
		dev_close();
	}
}

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
static struct cub_vq_chain *rx_chain_n(unsigned n, size_t len);

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

/* The backend is full: the chain in hand waits, the rest stay queued, no
 * spinning; when the peer reads, sending resumes and nothing is lost. */
static void test_tx_backpressure(void)
{
	static uint8_t frame[16000], got[16384];
	unsigned queued = 120, recvd = 0;
	int efd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	efd = dev_efd();
	/* a small send buffer, whatever net.core.wmem_max allowed the backend */
	CU_ASSERT_EQUAL(setsockopt(be.info.tx_fd, SOL_SOCKET, SO_SNDBUF, &(int){ 65536 },
				   sizeof(int)), 0);
	fill(frame, sizeof(frame), 13);
	for (unsigned i = 0; i < queued; i++)
		fake_vq_add(&fh, TXQ, tx_chain(frame, sizeof(frame), NULL, 0));
	fake_virtio_kick(&fh, TXQ);
	CU_ASSERT(fh.vqs[TXQ].n_used > 0 && fh.vqs[TXQ].n_used < queued);
	CU_ASSERT(!readable(efd)); /* waiting for writability, which is not there */
	fake_virtio_kick(&fh, TXQ); /* a kick now changes nothing */
	CU_ASSERT(fh.vqs[TXQ].n_used < queued);
	while (recvd < queued) {
		ssize_t r = recv(sv[1], got, sizeof(got), MSG_DONTWAIT);

		if (r < 0) {
			if (!readable(efd))
				break;
			run_loop();
			continue;
		}
		CU_ASSERT_EQUAL(r, (ssize_t)sizeof(frame));
		recvd++;
	}
	CU_ASSERT_EQUAL(recvd, queued);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, queued);
	CU_ASSERT_EQUAL(fh.broken_calls, 0);
	fake_virtio_stop(&fh);
	dev_close();
}

/* A guest keeping the transmit queue full: one kick sends a budget's worth
 * (64 frames) and re-arms; the event loop's next rounds send the rest. */
static void test_tx_budget(void)
{
	uint8_t frame[60], got[128];
	unsigned queued = 100, recvd = 0;
	int efd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	efd = dev_efd();
	fill(frame, sizeof(frame), 21);
	for (unsigned i = 0; i < queued; i++)
		fake_vq_add(&fh, TXQ, tx_chain(frame, sizeof(frame), NULL, 0));
	fake_virtio_kick(&fh, TXQ);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 64);
	CU_ASSERT(readable(efd)); /* re-armed: the loop comes back */
	run_loop();
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, queued);
	CU_ASSERT(!readable(efd));
	while (recv(sv[1], got, sizeof(got), MSG_DONTWAIT) == (ssize_t)sizeof(frame))
		recvd++;
	CU_ASSERT_EQUAL(recvd, queued);
	fake_virtio_stop(&fh);
	dev_close();
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
	CU_ASSERT_EQUAL(cfg_u(10, 2), 1500);
	CU_ASSERT_EQUAL(cfg_u(6, 2), 0); /* the backend says link down */
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

/* A receive chain of n segments of len bytes each. */
static struct cub_vq_chain *rx_chain_n(unsigned n, size_t len)
{
	struct cub_vq_chain *c = chain();
	uint8_t *m = mem_of(c);

	memset(m, 0xee, n * len);
	for (unsigned i = 0; i < n; i++)
		seg(c, m + i * len, len, true);
	return c;
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
	uint64_t t0;
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
	fake_virtio_kick(&fh, RXQ); /* no new buffer */
	CU_ASSERT_TRUE_FATAL(readable_within(efd, RX_WAIT_MS_TEST + 500));
	CU_ASSERT(fh.ops.clock_us(fake_inst(&fh)) - t0 >= RX_WAIT_MS_TEST * 1000 - 5000);
	CU_ASSERT(fh.ops.clock_us(fake_inst(&fh)) - t0 < RX_WAIT_MS_TEST * 1000 * 3 / 2);
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

/* The device tells the backend the guest's MAC (set_mac) at create; a
 * backend that refuses it fails the device. */
static uint8_t seen_mac[6];
static unsigned set_mac_calls;
static int set_mac_ret;

static int rec_set_mac(void *priv, const uint8_t mac[6])
{
	(void)priv;
	memcpy(seen_mac, mac, 6);
	set_mac_calls++;
	return set_mac_ret;
}

/* Milliseconds since *t0. */
static double ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The host's rate limiters: tx by ops (20 frames a second), rx by bytes
 * (20000 a second): what the buckets hold goes at once, the rest when the
 * limiter's timer says, in order, nothing lost. (rx learns a frame's
 * length only once it has read it: a frame may start while a byte is
 * left, and the bucket owes the rest.) */
static void test_rate_limiters(void)
{
	uint8_t frame[1000], got[2048];
	struct timespec t0;
	double ms;

	CU_ASSERT_PTR_NULL(fake_cfg_new(netp, (const char *[]){
		"tx_rate_limiter.ops.size", "2", NULL })); /* no refill_time */
	CU_ASSERT_EQUAL_FATAL(dev_open((const char *[]){
		"tx_rate_limiter.ops.size", "2", "tx_rate_limiter.ops.refill_time", "100",
		"rx_rate_limiter.bandwidth.size", "2000", "rx_rate_limiter.bandwidth.refill_time", "100",
		NULL }, 0), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	fill(frame, sizeof(frame), 5);
	for (int i = 0; i < 6; i++) {
		frame[0] = (uint8_t)i;
		fake_vq_add(&fh, TXQ, tx_chain(frame, 60, NULL, 0));
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fake_virtio_kick(&fh, TXQ);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 2);
	while (fh.vqs[TXQ].n_used < 6 && ms_since(&t0) < 3000) {
		poll(&(struct pollfd){ .fd = dev_efd(), .events = POLLIN }, 1, 100);
		run_loop();
	}
	ms = ms_since(&t0);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 6);
	CU_ASSERT(ms >= 190 && ms < 1500); /* 4 frames at 20 a second */
	for (int i = 0; i < 6; i++) {
		CU_ASSERT_EQUAL(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), 60);
		CU_ASSERT_EQUAL(got[0], i);
	}

	for (int i = 0; i < 8; i++)
		fake_vq_add(&fh, RXQ, rx_chain(HDR + 1514, 0));
	fake_virtio_kick(&fh, RXQ);
	for (int i = 0; i < 6; i++) {
		frame[0] = (uint8_t)(0x40 + i);
		CU_ASSERT_EQUAL(send(sv[1], frame, 1000, 0), 1000);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	run_loop();
	/* the full bucket, 2000 bytes: two frames (a third if a byte came back
	 * meanwhile: 50 us) */
	CU_ASSERT(fh.vqs[RXQ].n_used == 2 || fh.vqs[RXQ].n_used == 3);
	while (fh.vqs[RXQ].n_used < 6 && ms_since(&t0) < 3000) {
		poll(&(struct pollfd){ .fd = dev_efd(), .events = POLLIN }, 1, 100);
		run_loop();
	}
	ms = ms_since(&t0);
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 6);
	/* the third as soon as a byte is there, owing the rest; the others
	 * 50 ms apart */
	CU_ASSERT(ms >= 140 && ms < 1500);
	for (int i = 0; i < 6; i++) {
		CU_ASSERT_EQUAL(fh.vqs[RXQ].used[i].written, HDR + 1000);
		CU_ASSERT_EQUAL(mem_of(&chains[6 + i])[HDR], 0x40 + i);
	}
	fake_virtio_stop(&fh);
	dev_close();
}

static void test_set_mac(void)
{
	static const char *const kv[] = { "mac", "52:54:00:aa:bb:cc", NULL };
	static struct cub_net_ops ops;
	static const uint8_t want[6] = { 0x52, 0x54, 0, 0xaa, 0xbb, 0xcc };
	uint8_t mac[6];

	ops = *(const struct cub_net_ops *)sockp->ops;
	ops.set_mac = rec_set_mac;
	be_ops = &ops;
	set_mac_calls = 0;
	set_mac_ret = 0;
	CU_ASSERT_EQUAL_FATAL(dev_open(kv, 0), 0);
	CU_ASSERT_EQUAL(set_mac_calls, 1);
	CU_ASSERT_EQUAL(memcmp(seen_mac, want, 6), 0);
	dev_close();
	/* a derived MAC is the one the guest sees */
	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, 0), 0);
	mac_of_dev(mac);
	CU_ASSERT_EQUAL(set_mac_calls, 2);
	CU_ASSERT_EQUAL(memcmp(seen_mac, mac, 6), 0);
	dev_close();
	set_mac_ret = -EINVAL;
	CU_ASSERT_EQUAL(dev_open(kv, 0), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "socket[net0] refused the guest's MAC 52:54:00:aa:bb:cc"));
	npriv = NULL;
	dev_close();
	be_ops = NULL;
}

/* Snapshot state 1.1: the MAC the guest read; loaded, it replaces the one
 * this device derived (a restore's config path differs) and the backend
 * is told; a 1.0 blob (empty) and malformed blobs. */
static void test_state_mac(void)
{
	static const char *const kv[] = { "mac", "52:54:00:aa:bb:cc", NULL };
	static const char *const no_mac[] = { NULL };
	static const uint8_t saved[6] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 };
	static struct cub_net_ops ops;
	const struct cub_device_ops *d = netp->ops;
	uint8_t blob[16], mac[6];
	size_t len = 0;

	CU_ASSERT_EQUAL(d->state_version, CUB_STATE_VERSION(1, 1));
	ops = *(const struct cub_net_ops *)sockp->ops;
	ops.set_mac = rec_set_mac;
	be_ops = &ops;
	set_mac_ret = 0;
	CU_ASSERT_EQUAL_FATAL(dev_open(kv, 0), 0);
	CU_ASSERT_EQUAL(d->save(npriv, blob, 3, &len), -ENOSPC);
	CU_ASSERT_EQUAL(len, 6);
	CU_ASSERT_EQUAL(d->save(npriv, blob, sizeof(blob), &len), 0);
	CU_ASSERT_EQUAL(len, 6);
	CU_ASSERT_EQUAL(memcmp(blob, "\x52\x54\x00\xaa\xbb\xcc", 6), 0);
	/* a MAC the config names wins over the snapshot's (a clone given a new one) */
	set_mac_calls = 0;
	CU_ASSERT_EQUAL(d->load(npriv, saved, 6, 1), 0);
	mac_of_dev(mac);
	CU_ASSERT_EQUAL(memcmp(mac, "\x52\x54\x00\xaa\xbb\xcc", 6), 0);
	CU_ASSERT_EQUAL(set_mac_calls, 0);
	dev_close();
	/* a derived MAC: the snapshot's wins, backend told */
	CU_ASSERT_EQUAL_FATAL(dev_open(no_mac, 0), 0);
	set_mac_calls = 0;
	CU_ASSERT_EQUAL(d->load(npriv, saved, 6, 1), 0);
	mac_of_dev(mac);
	CU_ASSERT_EQUAL(memcmp(mac, saved, 6), 0);
	CU_ASSERT_EQUAL(set_mac_calls, 1);
	CU_ASSERT_EQUAL(memcmp(seen_mac, saved, 6), 0);
	/* the same MAC again: nothing to tell */
	CU_ASSERT_EQUAL(d->load(npriv, saved, 6, 1), 0);
	CU_ASSERT_EQUAL(set_mac_calls, 1);
	/* 1.0: empty, the MAC stays */
	CU_ASSERT_EQUAL(d->load(npriv, NULL, 0, 0), 0);
	CU_ASSERT_EQUAL(d->load(npriv, saved, 6, 0), -EINVAL);
	/* malformed: refused, the device as it was */
	CU_ASSERT_EQUAL(d->load(npriv, saved, 5, 1), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "a MAC is 6"));
	/* a backend that refuses it: refused, the MAC unchanged */
	set_mac_ret = -EINVAL;
	CU_ASSERT_EQUAL(d->load(npriv, "\x02\0\0\0\0\x01", 6, 1), -EINVAL);
	mac_of_dev(mac);
	CU_ASSERT_EQUAL(memcmp(mac, saved, 6), 0);
	set_mac_ret = 0;
	dev_close();
	be_ops = NULL;
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "snapshot state: the guest's MAC kept", test_state_mac },
		{ "features and config", test_config },
		{ "MAC derivation", test_mac_derivation },
		{ "TX: header stripped, drops, stats", test_tx },
		{ "TX: malformed chains", test_tx_malformed },
		{ "TX: backend full", test_tx_backpressure },
		{ "transmit: a budget per kick, then re-armed", test_tx_budget },
		{ "RX: buffers popped ahead of a recv, the unused given back", test_rx_pop_ahead },
		{ "RX and TX: contiguous buffers, one segment", test_rx_contiguous },
		{ "RX: a frame that would land misaligned, through the bounce buffer", test_rx_bounce },
		{ "RX with a vnet header: the frame aligned in the bounce buffer", test_vnet_bounce },
		{ "backend told the guest's MAC", test_set_mac },
		{ NULL, NULL },
	};
	/* The receive tests that hold whichever way a frame is received: run
	 * on buffers whose frame is 16-byte aligned (straight in), then on
	 * Linux's layout (through the bounce buffer), see guest_off. */
	static const struct cu_test rx[] = {
		{ "RX: one buffer", test_rx_single },
		{ "RX: mergeable buffers", test_rx_mergeable },
		{ "RX: no buffers, backpressure", test_rx_backpressure },
		{ "RX: without mergeable buffers", test_rx_no_mrg },
		{ "RX: malformed chains", test_rx_malformed },
		{ "vnet header backend: offloads", test_offloads },
		{ "reset with a frame half placed", test_reset },
		{ "RX: mergeable, a queue too small for the frame", test_rx_small_queue },
		{ "RX: mergeable, every descriptor held", test_rx_desc_exhausted },
		{ "RX: mergeable, buffers trickling in", test_rx_trickle },
		{ "RX: mergeable, a driver that stops posting", test_rx_wait_timeout },
		{ "rx and tx rate limiters", test_rate_limiters },
		{ NULL, NULL },
	};
	int ret;

	signal(SIGPIPE, SIG_IGN);
	netp = fake_plugin_open("virtio_net", &net_dl);
	sockp = fake_plugin_open("socket", &sock_dl);
	if (!netp || !sockp)
		return 1;
	ret = cu_run("virtio_net", tests);
	ret |= cu_run("virtio_net receive, frames aligned in the buffers", rx);
	guest_off = 0;
	ret |= cu_run("virtio_net receive, buffers laid out as Linux's", rx);
	fake_plugin_close(net_dl);
	fake_plugin_close(sock_dl);
	return ret;
}
