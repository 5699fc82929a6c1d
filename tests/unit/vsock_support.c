/* SPDX-License-Identifier: Apache-2.0 */
/* What both virtio-vsock tests share: the fake guest's queues, the device's setup and the host's Unix socket clients. */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "vsock_support.h"

const struct cub_plugin *plug;
static void *dl;
struct fake_host fh;
void *cfg, *priv;
char dir[64], uds[128];

/* ---- the fake guest ---- */

struct cub_vq_chain rxc[NRX];
uint8_t rxmem[NRX][RXLEN];
unsigned rx_posted, rx_seen, rx_len = RXLEN;

struct cub_vq_chain txc[NTX];
uint8_t txmem[NTX][HDR + 65536 + 16];
unsigned tx_n;

struct cub_vq_chain evc;
uint8_t evmem[8];

void pump(void)
{
	fake_watch_pump(&fh, 200);
}

void post_rx(unsigned n)
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
bool next_pkt(struct pkt *p)
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
bool expect_op(struct pkt *p, uint16_t op)
{
	while (next_pkt(p))
		if (p->op == op)
			return true;
	return false;
}

void send_raw(const struct virtio_vsock_hdr *h, const void *data, uint32_t dlen)
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

void mkhdr(struct virtio_vsock_hdr *h, uint16_t op, uint32_t sport, uint32_t dport,
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
void gsend(uint16_t op, uint32_t sport, uint32_t dport, const void *data, uint32_t len,
	   uint32_t flags, uint32_t buf_alloc, uint32_t fwd)
{
	struct virtio_vsock_hdr h;

	mkhdr(&h, op, sport, dport, len, flags, buf_alloc, fwd);
	send_raw(&h, data, len);
}

/* ---- the device ---- */

int dev_open(const char *const *extra)
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

void dev_close(void)
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
unsigned long long stat_of(const char *key)
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

int client(void)
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
ssize_t read_some(int fd, void *buf, size_t n, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, ms) != 1)
		return -2;
	return read(fd, buf, n);
}

/* The device closed its end (a reset if it left our bytes unread). */
bool is_eof(int fd)
{
	char c;
	ssize_t n;

	pump();
	n = read_some(fd, &c, 1, 200);
	return n == 0 || (n == -1 && errno == ECONNRESET);
}

/* A host client connected to guest port @port through the handshake; the
 * guest answers with credit buf_alloc. The host port in *hport. */
int client_to(uint32_t port, uint32_t buf_alloc, uint32_t *hport)
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

int vsock_run(const char *suite, const struct cu_test *tests)
{
	int ret;

	signal(SIGPIPE, SIG_IGN);
	plug = fake_plugin_open("virtio_vsock", &dl);
	if (!plug)
		return 1;
	ret = cu_run(suite, tests);
	fake_plugin_close(dl);
	return ret;
}
