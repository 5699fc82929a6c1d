/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of virtio-net, the built plugin on the socket backend through the
 * fake host's virtqueues: features, config space, the MAC and snapshot state,
 * transmit, the rate limiters. Receive: test_virtio_net_rx.c, _rxwait.c. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "virtio_net_support.h"

static void mac_of_dev(uint8_t mac[6])
{
	fh.vdev->config_read(fh.vpriv, 0, mac, 6);
}

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
	CU_ASSERT_EQUAL(fake_virtio_config(&fh, 6, 2), 1); /* VIRTIO_NET_S_LINK_UP */
	CU_ASSERT_EQUAL(fake_virtio_config(&fh, 8, 2), 1);
	mac_of_dev(mac);
	CU_ASSERT_EQUAL(mac[0] & 3, 2); /* locally administered, unicast */
	CU_ASSERT_EQUAL(dev_efd() >= 0, true);
	dev_close();

	CU_ASSERT_EQUAL_FATAL(dev_open((const char *[]){ "mac", "52:54:00:ab:cd:ef", "mtu", "9000",
							 NULL }, 0), 0);
	mac_of_dev(mac);
	CU_ASSERT_EQUAL(memcmp(mac, "\x52\x54\x00\xab\xcd\xef", 6), 0);
	CU_ASSERT(fh.vdev->features(fh.vpriv) & F(F_MTU));
	CU_ASSERT_EQUAL(fake_virtio_config(&fh, 10, 2), 9000);
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
		{ "backend told the guest's MAC", test_set_mac },
		{ NULL, NULL },
	};
	/* run in both buffer layouts, like the receive tests (see net_main) */
	static const struct cu_test both[] = {
		{ "rx and tx rate limiters", test_rate_limiters },
		{ NULL, NULL },
	};

	return net_main("virtio_net", tests, both);
}
