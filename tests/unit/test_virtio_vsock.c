/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-vsock's connections on the fake host: config, handshakes both ways, resets, malformed packets, timeouts, snapshots. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "vsock_support.h"

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
		{ "closes, resets, half close", test_host_close_and_rst },
		{ "handshake errors and timeouts", test_handshake_errors },
		{ "max_connections", test_max_connections },
		{ "snapshot: transport reset", test_snapshot_reset },
		{ "receive buffer checks", test_rx_buffer_checks },
		{ NULL, NULL },
	};

	return vsock_run("virtio-vsock", tests);
}
