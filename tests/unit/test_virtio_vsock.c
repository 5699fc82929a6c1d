/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of virtio-vsock: the built plugin on the fake host, the test playing the guest's
 * driver through fake virtqueues and the host's clients through real Unix sockets. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_vsock.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cunit_main.h"
#include "fake_host.h"

#define RXQ 0
#define TXQ 1
#define EVQ 2
#define GCID 3
#define HDR 44
#define G_BUF (256u << 10) /* the guest's buf_alloc unless a test says otherwise */

static const struct cub_plugin *plug;
static void *dl;
static struct fake_host fh;
static void *cfg, *priv;
static char dir[64], uds[128];

/* ---- the fake guest ---- */

#define NRX 256
#define RXLEN (4096 + HDR)
static struct cub_vq_chain rxc[NRX];
static uint8_t rxmem[NRX][RXLEN];
static unsigned rx_posted, rx_seen, rx_len = RXLEN; /* the length post_rx gives */

#define NTX 16
static struct cub_vq_chain txc[NTX];
static uint8_t txmem[NTX][HDR + 65536 + 16];
static unsigned tx_n;

static struct cub_vq_chain evc;
static uint8_t evmem[8];

struct pkt {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len, flags, buf_alloc, fwd_cnt;
	uint16_t type, op;
	uint8_t *data;
};

static void pump(void)
{
	fake_watch_pump(&fh, 200);
}

static void post_rx(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned k = rx_posted++ % NRX;

		fake_chain_init(&rxc[k], (uint16_t)k);
		CU_ASSERT_EQUAL_FATAL(fake_chain_add(&rxc[k], rxmem[k], rx_len, true), 0);
		CU_ASSERT_EQUAL_FATAL(fake_vq_add(&fh, RXQ, &rxc[k]), 0);
	}
	fake_virtio_kick(&fh, RXQ);
}

/* The next packet the device gave the guest, if any. */
static bool next_pkt(struct pkt *p)
{
	struct fake_vq *q = &fh.vqs[RXQ];
	struct virtio_vsock_hdr h;
	uint16_t head;
	uint32_t written;

	if (rx_seen == q->n_used)
		return false;
	head = q->used[rx_seen % FAKE_VQ_LEN].head;
	written = q->used[rx_seen % FAKE_VQ_LEN].written;
	rx_seen++;
	memcpy(&h, rxmem[head], HDR);
	p->src_cid = le64toh(h.src_cid);
	p->dst_cid = le64toh(h.dst_cid);
	p->src_port = le32toh(h.src_port);
	p->dst_port = le32toh(h.dst_port);
	p->len = le32toh(h.len);
	p->type = le16toh(h.type);
	p->op = le16toh(h.op);
	p->flags = le32toh(h.flags);
	p->buf_alloc = le32toh(h.buf_alloc);
	p->fwd_cnt = le32toh(h.fwd_cnt);
	p->data = rxmem[head] + HDR;
	CU_ASSERT_EQUAL(written, HDR + p->len);
	CU_ASSERT_EQUAL(p->src_cid, 2);
	CU_ASSERT_EQUAL(p->dst_cid, GCID);
	CU_ASSERT_EQUAL(p->type, VIRTIO_VSOCK_TYPE_STREAM);
	return true;
}

/* Skip to the next packet with op, or fail. */
static bool expect_op(struct pkt *p, uint16_t op)
{
	while (next_pkt(p))
		if (p->op == op)
			return true;
	return false;
}

static void send_raw(const struct virtio_vsock_hdr *h, const void *data, uint32_t dlen)
{
	unsigned k = tx_n++ % NTX;

	CU_ASSERT_FATAL(dlen <= sizeof(txmem[0]) - HDR);
	fake_chain_init(&txc[k], (uint16_t)k);
	memcpy(txmem[k], h, HDR);
	if (dlen)
		memcpy(txmem[k] + HDR, data, dlen);
	CU_ASSERT_EQUAL_FATAL(fake_chain_add(&txc[k], txmem[k], HDR, false), 0);
	if (dlen)
		CU_ASSERT_EQUAL_FATAL(fake_chain_add(&txc[k], txmem[k] + HDR, dlen, false), 0);
	CU_ASSERT_EQUAL_FATAL(fake_vq_add(&fh, TXQ, &txc[k]), 0);
	fake_virtio_kick(&fh, TXQ);
}

static void mkhdr(struct virtio_vsock_hdr *h, uint16_t op, uint32_t sport, uint32_t dport,
		  uint32_t len, uint32_t flags, uint32_t buf_alloc, uint32_t fwd)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = htole64(GCID);
	h->dst_cid = htole64(2);
	h->src_port = htole32(sport);
	h->dst_port = htole32(dport);
	h->len = htole32(len);
	h->type = htole16(VIRTIO_VSOCK_TYPE_STREAM);
	h->op = htole16(op);
	h->flags = htole32(flags);
	h->buf_alloc = htole32(buf_alloc);
	h->fwd_cnt = htole32(fwd);
}

/* A guest packet from its port sport to our dport. */
static void gsend(uint16_t op, uint32_t sport, uint32_t dport, const void *data, uint32_t len,
		  uint32_t flags, uint32_t buf_alloc, uint32_t fwd)
{
	struct virtio_vsock_hdr h;

	mkhdr(&h, op, sport, dport, len, flags, buf_alloc, fwd);
	send_raw(&h, data, len);
}

/* ---- the device ---- */

static int dev_open(const char *const *extra)
{
	const char *kv[16] = { "guest_cid", "3", "uds_path", uds };
	unsigned n = 4;
	int err;

	for (; extra && *extra && n < 14; extra++)
		kv[n++] = *extra;
	kv[n] = NULL;
	fake_host_init(&fh);
	fh.clock_fixed = true;
	fh.clock_us = 1000000;
	rx_posted = rx_seen = tx_n = 0;
	snprintf(dir, sizeof(dir), "/tmp/vsockXXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	cfg = fake_cfg_new(plug, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	priv = NULL;
	err = fake_create(&fh, plug, cfg, &priv);
	if (err) {
		fprintf(stderr, "(create: %d %s) ", err, fh.fail_msg);
		return err;
	}
	fake_chain_init(&evc, 0);
	fake_chain_add(&evc, evmem, 4, true);
	fake_vq_add(&fh, EVQ, &evc);
	return fake_virtio_start(&fh);
}

static void dev_close(void)
{
	char p[160];

	if (priv)
		((const struct cub_device_ops *)plug->ops)->destroy(priv);
	priv = NULL;
	fake_cfg_free(plug, cfg);
	fake_host_fini(&fh);
	CU_ASSERT_EQUAL(access(uds, F_OK), -1); /* the socket file went with the device */
	snprintf(p, sizeof(p), "%s/v.sock_77", dir);
	unlink(p);
	rmdir(dir);
}

/* A number from the stats method's reply. */
static unsigned long long stat_of(const char *key)
{
	struct cub_reply rep = { 0 };
	const struct cub_method *m = fake_method_find(plug, "stats");
	char pat[64];
	const char *at;
	unsigned long long v = ~0ull;

	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_EQUAL(((int (*)(void *, struct cub_reply *))m->fn)(priv, &rep), 0);
	snprintf(pat, sizeof(pat), "%s ", key);
	at = strstr(rep.text, pat);
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	sscanf(at + strlen(pat), "%llu", &v);
	return v;
}

/* ---- host clients ---- */

static int client(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", uds);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Read up to n bytes within ms: how many came (0 on EOF, -1 on an error,
 * -2 on timeout). */
static ssize_t read_some(int fd, void *buf, size_t n, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, ms) != 1)
		return -2;
	return read(fd, buf, n);
}

/* The device closed its end (a reset if it left our bytes unread). */
static bool is_eof(int fd)
{
	char c;
	ssize_t n;

	pump();
	n = read_some(fd, &c, 1, 200);
	return n == 0 || (n == -1 && errno == ECONNRESET);
}

/* A host client connected to guest port @port through the handshake; the
 * guest answers with credit buf_alloc. The host port in *hport. */
static int client_to(uint32_t port, uint32_t buf_alloc, uint32_t *hport)
{
	int fd = client();
	char line[64] = "";
	struct pkt p;
	ssize_t n;

	dprintf(fd, "CONNECT %u\n", port);
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_REQUEST));
	CU_ASSERT_EQUAL(p.dst_port, port);
	CU_ASSERT(p.src_port >= (1u << 30));
	CU_ASSERT_EQUAL(p.len, 0);
	gsend(VIRTIO_VSOCK_OP_RESPONSE, port, p.src_port, NULL, 0, 0, buf_alloc, 0);
	pump();
	n = read_some(fd, line, sizeof(line) - 1, 1000);
	CU_ASSERT_FATAL(n > 0);
	line[n] = 0;
	{
		char want[32];

		snprintf(want, sizeof(want), "OK %u\n", p.src_port);
		CU_ASSERT_STRING_EQUAL(line, want);
	}
	*hport = p.src_port;
	return fd;
}

/* ---- tests ---- */

static void test_config(void)
{
	uint64_t cid = 0;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	CU_ASSERT_EQUAL(fh.vdev->device_id, 19);
	CU_ASSERT_EQUAL(fh.vdev->n_queues, 3);
	CU_ASSERT_EQUAL(fh.vdev->config_size, 8);
	fh.vdev->config_read(fh.vpriv, 0, &cid, 8);
	CU_ASSERT_EQUAL(le64toh(cid), GCID);
	CU_ASSERT_EQUAL(access(uds, F_OK), 0);
	dev_close();
}

/* A device from kv on host h that must not come up: its error, the host's
 * failure message holding msg (when given); the host is done with after. */
static int create_fails(struct fake_host *h, const char *const *kv, const char *msg)
{
	void *c, *p = NULL;
	int err;

	fake_host_init(h);
	c = fake_cfg_new(plug, kv);
	err = fake_create(h, plug, c, &p);
	if (msg)
		CU_ASSERT_PTR_NOT_NULL(strstr(h->fail_msg, msg));
	fake_cfg_free(plug, c);
	fake_host_fini(h);
	return err;
}

static void test_config_errors(void)
{
	const char *kv[] = { "guest_cid", "3", "uds_path", "/nonexistent-dir/x/v.sock", NULL };
	char longp[200];
	int fd;

	CU_ASSERT_NOT_EQUAL(create_fails(&fh, kv, "uds_path"), 0);

	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = 0;
	kv[3] = longp;
	CU_ASSERT_EQUAL(create_fails(&fh, kv, NULL), -ENAMETOOLONG);

	/* A regular file at uds_path is never replaced; a live socket neither. */
	snprintf(dir, sizeof(dir), "/tmp/vsockXXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	fd = open(uds, O_CREAT | O_WRONLY, 0600);
	close(fd);
	kv[3] = uds;
	CU_ASSERT_EQUAL(create_fails(&fh, kv, NULL), -EEXIST);
	unlink(uds);
	rmdir(dir);
}

static void test_stale_and_busy_socket(void)
{
	const char *kv[] = { "guest_cid", "3", "uds_path", uds, NULL };
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct fake_host fh2;
	int fd;

	/* A stale socket file (nobody listens) is replaced. */
	snprintf(dir, sizeof(dir), "/tmp/vsockXXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", uds);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	close(fd);
	fake_host_init(&fh);
	cfg = fake_cfg_new(plug, kv);
	CU_ASSERT_EQUAL(fake_create(&fh, plug, cfg, &priv), 0);
	/* A second device on the same path: something listens there. */
	CU_ASSERT_EQUAL(create_fails(&fh2, kv, "listens"), -EADDRINUSE);
	dev_close();
}

static void test_handshake_and_data(void)
{
	uint32_t hp;
	char buf[64];
	struct pkt p;
	int fd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	post_rx(8);
	fd = client_to(52, G_BUF, &hp);
	CU_ASSERT_EQUAL(stat_of("connections"), 1);
	/* host -> guest */
	CU_ASSERT_EQUAL(write(fd, "hello", 5), 5);
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_RW));
	CU_ASSERT_EQUAL(p.len, 5);
	CU_ASSERT_EQUAL(memcmp(p.data, "hello", 5), 0);
	CU_ASSERT_EQUAL(p.src_port, hp);
	CU_ASSERT_EQUAL(p.dst_port, 52);
	CU_ASSERT_EQUAL(p.buf_alloc, 256u << 10);
	/* guest -> host */
	gsend(VIRTIO_VSOCK_OP_RW, 52, hp, "world!", 6, 0, G_BUF, 5);
	pump();
	CU_ASSERT_EQUAL(read_some(fd, buf, sizeof(buf), 1000), 6);
	CU_ASSERT_EQUAL(memcmp(buf, "world!", 6), 0);
	/* bytes after the CONNECT line in the same write belong to the stream */
	close(fd);
	fd = client();
	CU_ASSERT_EQUAL(write(fd, "CONNECT 53\nearly", 16), 16);
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_REQUEST));
	gsend(VIRTIO_VSOCK_OP_RESPONSE, 53, p.src_port, NULL, 0, 0, G_BUF, 0);
	pump();
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_RW));
	CU_ASSERT_EQUAL(p.len, 5);
	CU_ASSERT_EQUAL(memcmp(p.data, "early", 5), 0);
	close(fd);
	dev_close();
}

static void test_guest_connect(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char buf[16];
	struct pkt p;
	int l, fd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	post_rx(8);
	/* nothing at <uds>_77 yet: RST */
	gsend(VIRTIO_VSOCK_OP_REQUEST, 1000, 77, NULL, 0, 0, G_BUF, 0);
	pump();
	CU_ASSERT_FATAL(next_pkt(&p));
	CU_ASSERT_EQUAL(p.op, VIRTIO_VSOCK_OP_RST);
	CU_ASSERT_EQUAL(p.src_port, 77);
	CU_ASSERT_EQUAL(p.dst_port, 1000);
	/* a listener there: RESPONSE, then data both ways */
	snprintf(a.sun_path, sizeof(a.sun_path), "%s_77", uds);
	l = socket(AF_UNIX, SOCK_STREAM, 0);
	CU_ASSERT_EQUAL_FATAL(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	CU_ASSERT_EQUAL_FATAL(listen(l, 4), 0);
	gsend(VIRTIO_VSOCK_OP_REQUEST, 1001, 77, NULL, 0, 0, G_BUF, 0);
	pump();
	CU_ASSERT_FATAL(next_pkt(&p));
	CU_ASSERT_EQUAL(p.op, VIRTIO_VSOCK_OP_RESPONSE);
	CU_ASSERT_EQUAL(p.dst_port, 1001);
	fd = accept(l, NULL, NULL);
	CU_ASSERT_FATAL(fd >= 0);
	gsend(VIRTIO_VSOCK_OP_RW, 1001, 77, "READY x\n", 8, 0, G_BUF, 0);
	pump();
	CU_ASSERT_EQUAL(read_some(fd, buf, sizeof(buf), 1000), 8);
	CU_ASSERT_EQUAL(memcmp(buf, "READY x\n", 8), 0);
	CU_ASSERT_EQUAL(write(fd, "ack", 3), 3);
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_RW));
	CU_ASSERT_EQUAL(memcmp(p.data, "ack", 3), 0);
	/* the guest closes: SHUTDOWN both ways, we answer RST and close ours */
	gsend(VIRTIO_VSOCK_OP_SHUTDOWN, 1001, 77, NULL, 0, 3, G_BUF, 3);
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_RST));
	CU_ASSERT_EQUAL(p.dst_port, 1001);
	CU_ASSERT_EQUAL(read_some(fd, buf, sizeof(buf), 1000), 0);
	CU_ASSERT_EQUAL(stat_of("connections"), 0);
	close(fd);
	close(l);
	dev_close();
}

static void test_rst_unknown(void)
{
	struct pkt p;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	post_rx(8);
	gsend(VIRTIO_VSOCK_OP_RW, 5000, 6000, "x", 1, 0, G_BUF, 0);
	gsend(VIRTIO_VSOCK_OP_CREDIT_UPDATE, 5001, 6001, NULL, 0, 0, G_BUF, 0);
	gsend(VIRTIO_VSOCK_OP_RST, 5002, 6002, NULL, 0, 0, G_BUF, 0); /* never answered */
	pump();
	CU_ASSERT_FATAL(next_pkt(&p));
	CU_ASSERT_EQUAL(p.op, VIRTIO_VSOCK_OP_RST);
	CU_ASSERT_EQUAL(p.src_port, 6000);
	CU_ASSERT_EQUAL(p.dst_port, 5000);
	CU_ASSERT_FATAL(next_pkt(&p));
	CU_ASSERT_EQUAL(p.op, VIRTIO_VSOCK_OP_RST);
	CU_ASSERT_EQUAL(p.src_port, 6001);
	CU_ASSERT_FALSE(next_pkt(&p));
	dev_close();
}

static void test_malformed(void)
{
	struct virtio_vsock_hdr h;
	struct pkt p;
	uint32_t hp;
	int fd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	post_rx(32);
	fd = client_to(52, G_BUF, &hp);
	/* a bad len on a live connection resets it */
	mkhdr(&h, VIRTIO_VSOCK_OP_RW, 52, hp, 100, 0, G_BUF, 0);
	send_raw(&h, "short", 5);
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_RST));
	CU_ASSERT_EQUAL(p.src_port, hp);
	CU_ASSERT_TRUE(is_eof(fd));
	CU_ASSERT_EQUAL(stat_of("connections"), 0);
	close(fd);
	/* each of these: an RST, no crash */
	mkhdr(&h, VIRTIO_VSOCK_OP_REQUEST, 1, 2, 0, 0, G_BUF, 0);
	h.type = htole16(2); /* seqpacket, never offered */
	send_raw(&h, NULL, 0);
	mkhdr(&h, VIRTIO_VSOCK_OP_REQUEST, 1, 2, 0, 0, G_BUF, 0);
	h.src_cid = htole64(9);
	send_raw(&h, NULL, 0);
	mkhdr(&h, VIRTIO_VSOCK_OP_REQUEST, 1, 2, 0, 0, G_BUF, 0);
	h.dst_cid = htole64(3);
	send_raw(&h, NULL, 0);
	mkhdr(&h, 99, 1, 2, 0, 0, G_BUF, 0);
	send_raw(&h, NULL, 0);
	mkhdr(&h, VIRTIO_VSOCK_OP_REQUEST, 1, 2, 4, 0, G_BUF, 0); /* payload on a REQUEST */
	send_raw(&h, "abcd", 4);
	mkhdr(&h, VIRTIO_VSOCK_OP_RW, 1, 2, 65537, 0, G_BUF, 0); /* over 64 KiB */
	send_raw(&h, txmem[0], 65537);
	pump();
	for (int i = 0; i < 6; i++) {
		CU_ASSERT_FATAL(next_pkt(&p));
		CU_ASSERT_EQUAL(p.op, VIRTIO_VSOCK_OP_RST);
	}
	/* an RST that is malformed gets nothing; a chain too short for a
	 * header, or with writable parts, is dropped */
	mkhdr(&h, VIRTIO_VSOCK_OP_RST, 1, 2, 0, 0, G_BUF, 0);
	h.type = 7;
	send_raw(&h, NULL, 0);
	fake_chain_init(&txc[0], 0);
	fake_chain_add(&txc[0], txmem[0], 10, false);
	fake_vq_add(&fh, TXQ, &txc[0]);
	fake_chain_init(&txc[1], 1);
	fake_chain_add(&txc[1], txmem[1], HDR, false);
	fake_chain_add(&txc[1], txmem[1] + HDR, 8, true);
	fake_vq_add(&fh, TXQ, &txc[1]);
	fake_virtio_kick(&fh, TXQ);
	pump();
	CU_ASSERT_FALSE(next_pkt(&p));
	CU_ASSERT_EQUAL(stat_of("malformed"), 10);
	CU_ASSERT_EQUAL(fh.broken_calls, 0);
	dev_close();
}

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

static void test_host_close_and_rst(void)
{
	uint32_t hp;
	struct pkt p;
	int fd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	post_rx(16);
	/* the host client closes: SHUTDOWN both ways; the guest's RST ends it */
	fd = client_to(52, G_BUF, &hp);
	close(fd);
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_SHUTDOWN));
	CU_ASSERT_EQUAL(p.flags, 3);
	CU_ASSERT_EQUAL(stat_of("connections"), 1);
	gsend(VIRTIO_VSOCK_OP_RST, 52, hp, NULL, 0, 0, G_BUF, 0);
	pump();
	CU_ASSERT_EQUAL(stat_of("connections"), 0);
	CU_ASSERT_FALSE(next_pkt(&p)); /* no answer to an RST */
	/* the guest resets: the client sees EOF */
	fd = client_to(53, G_BUF, &hp);
	gsend(VIRTIO_VSOCK_OP_RST, 53, hp, NULL, 0, 0, G_BUF, 0);
	CU_ASSERT_TRUE(is_eof(fd));
	close(fd);
	/* the guest refuses: RST instead of RESPONSE */
	fd = client();
	dprintf(fd, "CONNECT 54\n");
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_REQUEST));
	gsend(VIRTIO_VSOCK_OP_RST, 54, p.src_port, NULL, 0, 0, G_BUF, 0);
	CU_ASSERT_TRUE(is_eof(fd));
	close(fd);
	/* half close by the guest (SEND): the host end reads EOF, can still write */
	fd = client_to(55, G_BUF, &hp);
	gsend(VIRTIO_VSOCK_OP_SHUTDOWN, 55, hp, NULL, 0, VIRTIO_VSOCK_SHUTDOWN_SEND, G_BUF, 0);
	CU_ASSERT_TRUE(is_eof(fd));
	CU_ASSERT_EQUAL(write(fd, "late", 4), 4);
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_RW));
	CU_ASSERT_EQUAL(memcmp(p.data, "late", 4), 0);
	close(fd);
	dev_close();
}

static void wait_tick(void)
{
	for (int i = 0; i < 3; i++) {
		usleep(120 * 1000);
		pump();
	}
}

static void test_handshake_errors(void)
{
	char junk[40];
	struct pkt p;
	int fd, fd2, fd3;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	post_rx(16);
	fd = client();
	dprintf(fd, "HELLO 5\n");
	CU_ASSERT_TRUE(is_eof(fd));
	close(fd);
	fd = client();
	dprintf(fd, "CONNECT 99999999999\n");
	CU_ASSERT_TRUE(is_eof(fd));
	close(fd);
	fd = client();
	memset(junk, 'C', sizeof(junk));
	CU_ASSERT_EQUAL(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	CU_ASSERT_TRUE(is_eof(fd));
	close(fd);
	CU_ASSERT_FALSE(next_pkt(&p)); /* the guest never heard of them */
	/* half-open: silent clients and a guest that never answers time out */
	fd = client();
	fd2 = client();
	CU_ASSERT_EQUAL(write(fd2, "CONNECT 7", 9), 9); /* no newline */
	fd3 = client();
	dprintf(fd3, "CONNECT 8\r\n");
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_REQUEST));
	CU_ASSERT_EQUAL(p.dst_port, 8);
	CU_ASSERT_EQUAL(stat_of("connections"), 3);
	fh.clock_us += 2100 * 1000; /* past CONNECT_MS */
	wait_tick();
	CU_ASSERT_TRUE(is_eof(fd3));
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_RST)); /* the guest saw the REQUEST */
	CU_ASSERT_EQUAL(stat_of("connections"), 2);
	fh.clock_us += 3000 * 1000; /* past HANDSHAKE_MS */
	wait_tick();
	CU_ASSERT_TRUE(is_eof(fd));
	CU_ASSERT_TRUE(is_eof(fd2));
	CU_ASSERT_EQUAL(stat_of("connections"), 0);
	close(fd);
	close(fd2);
	close(fd3);
	dev_close();
}

static void test_max_connections(void)
{
	const char *kv[] = { "max_connections", "2", NULL };
	int fd[3];
	uint32_t hp;
	struct pkt p;

	CU_ASSERT_EQUAL_FATAL(dev_open(kv), 0);
	post_rx(16);
	fd[0] = client_to(60, G_BUF, &hp);
	fd[1] = client();
	fd[2] = client(); /* queued in the backlog, not accepted */
	dprintf(fd[2], "CONNECT 62\n");
	pump();
	CU_ASSERT_EQUAL(stat_of("connections"), 2);
	CU_ASSERT_FALSE(next_pkt(&p));
	/* the guest's own connections are refused too */
	gsend(VIRTIO_VSOCK_OP_REQUEST, 1, 77, NULL, 0, 0, G_BUF, 0);
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_RST));
	close(fd[0]);
	close(fd[1]);
	pump();
	pump();
	CU_ASSERT_FATAL(expect_op(&p, VIRTIO_VSOCK_OP_REQUEST));
	CU_ASSERT_EQUAL(p.dst_port, 62);
	close(fd[2]);
	dev_close();
}

static void test_snapshot_reset(void)
{
	const struct cub_device_ops *o = plug->ops;
	uint8_t blob[16], bad[8];
	size_t len = 0;
	uint32_t hp;
	int fd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	post_rx(8);
	fd = client_to(52, G_BUF, &hp);
	CU_ASSERT_EQUAL(o->save(priv, blob, 4, &len), -ENOSPC);
	CU_ASSERT_EQUAL(len, 8);
	CU_ASSERT_EQUAL(o->save(priv, blob, sizeof(blob), &len), 0);
	CU_ASSERT_EQUAL(len, 8);
	CU_ASSERT_EQUAL(le64toh(*(uint64_t *)(void *)blob), GCID);
	/* bad blobs leave the device as it was */
	CU_ASSERT_EQUAL(o->load(priv, blob, 4, 0), -EINVAL);
	memset(bad, 0, sizeof(bad));
	CU_ASSERT_EQUAL(o->load(priv, bad, sizeof(bad), 0), -EINVAL);
	CU_ASSERT_EQUAL(stat_of("connections"), 1);
	/* a rollback: the host stops the queues, loads, starts them again */
	fake_virtio_stop(&fh);
	CU_ASSERT_EQUAL(o->load(priv, blob, len, 0), 0);
	CU_ASSERT_TRUE(is_eof(fd));
	CU_ASSERT_EQUAL(stat_of("connections"), 0);
	CU_ASSERT_EQUAL(fh.vqs[EVQ].n_used, 0);
	CU_ASSERT_EQUAL(fake_virtio_start(&fh), 0);
	CU_ASSERT_EQUAL_FATAL(fh.vqs[EVQ].n_used, 1);
	CU_ASSERT_EQUAL(fh.vqs[EVQ].used[0].written, 4);
	CU_ASSERT_EQUAL(le32toh(*(uint32_t *)(void *)evmem), VIRTIO_VSOCK_EVENT_TRANSPORT_RESET);
	close(fd);
	/* no event buffer at start: it goes on the driver's kick */
	fake_virtio_stop(&fh);
	CU_ASSERT_EQUAL(o->load(priv, blob, len, 0), 0);
	CU_ASSERT_EQUAL(fake_virtio_start(&fh), 0);
	CU_ASSERT_EQUAL(fh.vqs[EVQ].n_used, 1);
	memset(evmem, 0xff, sizeof(evmem));
	fake_vq_add(&fh, EVQ, &evc);
	fake_virtio_kick(&fh, EVQ);
	CU_ASSERT_EQUAL(fh.vqs[EVQ].n_used, 2);
	CU_ASSERT_EQUAL(le32toh(*(uint32_t *)(void *)evmem), 0);
	/* and the device works after it */
	fd = client_to(52, G_BUF, &hp);
	close(fd);
	dev_close();
}

static void test_rx_buffer_checks(void)
{
	struct cub_vq_chain c;
	uint8_t b[HDR];
	int fd;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL), 0);
	fd = client();
	dprintf(fd, "CONNECT 5\n");
	fake_chain_init(&c, 0);
	fake_chain_add(&c, b, HDR, true); /* no room for anything past the header */
	fake_vq_add(&fh, RXQ, &c);
	fake_virtio_kick(&fh, RXQ);
	pump();
	CU_ASSERT_EQUAL(fh.broken_calls, 1);
	close(fd);
	dev_close();
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "config space and params", test_config },
		{ "config errors", test_config_errors },
		{ "stale and busy uds_path", test_stale_and_busy_socket },
		{ "CONNECT, REQUEST, RESPONSE, OK and data", test_handshake_and_data },
		{ "guest-initiated connections", test_guest_connect },
		{ "RST for unknown connections", test_rst_unknown },
		{ "malformed packets", test_malformed },
		{ "credit: host to guest", test_credit },
		{ "a round at its budget goes on without a kick", test_rx_budget_goes_on },
		{ "the host's rate limiter", test_rate_limiter },
		{ "credit: a host end that never reads", test_host_never_reads },
		{ "a guest that never reads", test_guest_never_reads },
		{ "closes, resets, half close", test_host_close_and_rst },
		{ "handshake errors and timeouts", test_handshake_errors },
		{ "max_connections", test_max_connections },
		{ "snapshot: transport reset", test_snapshot_reset },
		{ "receive buffer checks", test_rx_buffer_checks },
		{ NULL, NULL },
	};
	int ret;

	signal(SIGPIPE, SIG_IGN);
	plug = fake_plugin_open("virtio_vsock", &dl);
	if (!plug)
		return 1;
	ret = cu_run("virtio-vsock", tests);
	fake_plugin_close(dl);
	return ret;
}
