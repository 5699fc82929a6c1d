/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the socket net backend: the built plugin on socketpairs and socket paths. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cunit_main.h"
#include "fake_host.h"

static const struct cub_plugin *plug;
static const struct cub_net_ops *ops;
static void *dl;
static struct fake_host fh;
static char dir[] = "/tmp/cubicle-test-netsock-XXXXXX";

/* Open an instance with kv params: its error, *priv set on success. */
static int sopen(const char *const *kv, void **priv, void **cfg)
{
	*cfg = fake_cfg_new(plug, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(*cfg);
	*priv = NULL;
	return ops->open(fake_inst(&fh), &fh.ops, *cfg, priv);
}

static void sclose(void *priv, void *cfg)
{
	if (priv)
		ops->close(priv);
	fake_cfg_free(plug, cfg);
}

static int64_t ssend(void *priv, const void *p, size_t len)
{
	struct iovec v = { (void *)p, len };

	return ops->send(priv, &v, 1);
}

static int64_t srecv(void *priv, void *p, size_t len)
{
	struct iovec v = { p, len };

	return ops->recv(priv, &v, 1);
}

static bool pollable(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };

	return poll(&p, 1, 0) == 1 && (p.revents & ev);
}

static void path_of(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

static void test_descriptor(void)
{
	CU_ASSERT_EQUAL(plug->kind, CUB_KIND_NET);
	CU_ASSERT_STRING_EQUAL(plug->name, "socket");
	CU_ASSERT_PTR_NOT_NULL(ops->open && ops->close && ops->info && ops->send && ops->recv);
	CU_ASSERT_PTR_NULL(ops->set_vnet_hdr);
	CU_ASSERT_PTR_NULL(ops->set_offloads);
}

static void test_params(void)
{
	void *p, *c;
	char fdtxt[16];
	int sv[2], f;

	fake_host_init(&fh);
	CU_ASSERT_EQUAL(sopen(NULL, &p, &c), -EINVAL);
	CU_ASSERT(strstr(fh.fail_msg, "needs path") != NULL);
	sclose(p, c);
	CU_ASSERT_EQUAL(sopen((const char *[]){ "path", "/tmp/x", NULL }, &p, &c), -EINVAL);
	sclose(p, c);
	CU_ASSERT_EQUAL(sopen((const char *[]){ "fd", "0", "path", "/tmp/x", "peer", "/tmp/y", NULL },
			      &p, &c), -EINVAL);
	CU_ASSERT(strstr(fh.fail_msg, "not both") != NULL);
	sclose(p, c);
	CU_ASSERT_EQUAL(sopen((const char *[]){ "path", "/tmp/x", "peer", "/tmp/x", NULL }, &p, &c),
			-EINVAL);
	sclose(p, c);
	/* fd: a regular file, a stream socket */
	f = open("/dev/null", O_RDONLY);
	snprintf(fdtxt, sizeof(fdtxt), "%d", f);
	CU_ASSERT_EQUAL(sopen((const char *[]){ "fd", fdtxt, NULL }, &p, &c), -ENOTSOCK);
	sclose(p, c);
	close(f);
	CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	snprintf(fdtxt, sizeof(fdtxt), "%d", sv[0]);
	CU_ASSERT_EQUAL(sopen((const char *[]){ "fd", fdtxt, NULL }, &p, &c), -EINVAL);
	CU_ASSERT(strstr(fh.fail_msg, "datagram") != NULL);
	sclose(p, c);
	close(sv[0]);
	close(sv[1]);
	fake_host_fini(&fh);
}

static void test_socketpair(void)
{
	uint8_t frame[1500], got[2048];
	struct cub_net_info i;
	struct cub_net_stats st;
	char fdtxt[16];
	void *p, *c;
	int sv[2];

	fake_host_init(&fh);
	CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	snprintf(fdtxt, sizeof(fdtxt), "%d", sv[0]);
	CU_ASSERT_EQUAL_FATAL(sopen((const char *[]){ "fd", fdtxt, NULL }, &p, &c), 0);
	ops->info(p, &i);
	CU_ASSERT(i.link_up);
	CU_ASSERT(!i.vnet_hdr);
	CU_ASSERT_EQUAL(i.offloads, 0);
	CU_ASSERT(i.rx_fd >= 0 && i.rx_fd != sv[0]); /* a duplicate: ours stays ours */
	CU_ASSERT_EQUAL(i.tx_fd, i.rx_fd);
	CU_ASSERT(!(fcntl(sv[0], F_GETFL) & O_NONBLOCK)); /* the caller's flags stay */
	CU_ASSERT(fcntl(i.rx_fd, F_GETFD) & FD_CLOEXEC);

	for (unsigned k = 0; k < sizeof(frame); k++)
		frame[k] = (uint8_t)k;
	/* send: one gathered frame is one datagram */
	{
		struct iovec v[3] = { { frame, 14 }, { frame + 14, 100 }, { frame + 114, 86 } };

		CU_ASSERT_EQUAL(ops->send(p, v, 3), 200);
	}
	CU_ASSERT_EQUAL(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), 200);
	CU_ASSERT_EQUAL(memcmp(got, frame, 200), 0);
	/* recv: nothing, a frame, a frame too long for the buffer */
	CU_ASSERT(!pollable(i.rx_fd, POLLIN));
	CU_ASSERT_EQUAL(srecv(p, got, sizeof(got)), 0);
	CU_ASSERT_EQUAL(send(sv[1], frame, 60, 0), 60);
	CU_ASSERT(pollable(i.rx_fd, POLLIN));
	CU_ASSERT_EQUAL(srecv(p, got, sizeof(got)), 60);
	CU_ASSERT_EQUAL(memcmp(got, frame, 60), 0);
	CU_ASSERT_EQUAL(send(sv[1], frame, 1500, 0), 1500);
	CU_ASSERT_EQUAL(srecv(p, got, 1000), -EMSGSIZE);
	CU_ASSERT_EQUAL(srecv(p, got, sizeof(got)), 0); /* it was consumed */
	CU_ASSERT_EQUAL(send(sv[1], frame, 0, 0), 0);   /* an empty datagram is no frame */
	CU_ASSERT_EQUAL(srecv(p, got, sizeof(got)), 0);
	ops->stats(p, &st);
	CU_ASSERT_EQUAL(st.tx_packets, 1);
	CU_ASSERT_EQUAL(st.tx_bytes, 200);
	CU_ASSERT_EQUAL(st.rx_packets, 1);
	CU_ASSERT_EQUAL(st.rx_bytes, 60);
	CU_ASSERT_EQUAL(st.rx_dropped, 1);
	sclose(p, c);
	/* the caller's end is still open and usable */
	CU_ASSERT(fcntl(sv[0], F_GETFD) >= 0);
	close(sv[0]);
	close(sv[1]);
	fake_host_fini(&fh);
}

/* Full peer: -EAGAIN, tx_fd not writable; once the peer reads, writable. */
static void test_backpressure(void)
{
	static uint8_t frame[16384];
	struct cub_net_info i;
	struct cub_net_stats st;
	unsigned sent = 0, got = 0;
	char fdtxt[16];
	int64_t r = 0;
	void *p, *c;
	int sv[2];

	fake_host_init(&fh);
	CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	snprintf(fdtxt, sizeof(fdtxt), "%d", sv[0]);
	CU_ASSERT_EQUAL_FATAL(sopen((const char *[]){ "fd", fdtxt, NULL }, &p, &c), 0);
	ops->info(p, &i);
	while (sent < 100000 && (r = ssend(p, frame, sizeof(frame))) > 0)
		sent++;
	CU_ASSERT_EQUAL(r, -EAGAIN);
	CU_ASSERT(sent > 0 && sent < 100000);
	CU_ASSERT(!pollable(i.tx_fd, POLLOUT));
	while (recv(sv[1], frame, sizeof(frame), MSG_DONTWAIT) > 0)
		got++;
	CU_ASSERT_EQUAL(got, sent);
	CU_ASSERT(pollable(i.tx_fd, POLLOUT));
	CU_ASSERT_EQUAL(ssend(p, frame, sizeof(frame)), sizeof(frame));
	ops->stats(p, &st);
	CU_ASSERT_EQUAL(st.tx_packets, sent + 1);
	CU_ASSERT_EQUAL(st.tx_dropped, 0);
	sclose(p, c);
	close(sv[0]);
	close(sv[1]);
	fake_host_fini(&fh);
}

/* path + peer: A starts alone, B comes later; both directions then work. */
static void test_paths(void)
{
	char a[256], b[256], x[256];
	uint8_t buf[256];
	struct cub_net_stats st;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct cub_net_info ia;
	void *pa, *ca, *pb, *cb;
	int fx;

	fake_host_init(&fh);
	path_of(a, sizeof(a), "a.sock");
	path_of(b, sizeof(b), "b.sock");
	path_of(x, sizeof(x), "x.sock");
	CU_ASSERT_EQUAL_FATAL(sopen((const char *[]){ "path", a, "peer", b, NULL }, &pa, &ca), 0);
	CU_ASSERT(fake_log_has(&fh, "not there yet"));
	ops->info(pa, &ia);
	/* no peer yet: the frame is dropped and counted, not an error for the VM */
	CU_ASSERT_EQUAL(ssend(pa, "0123456789abcdef", 16), -ENOTCONN);
	ops->stats(pa, &st);
	CU_ASSERT_EQUAL(st.tx_dropped, 1);

	/* a stranger writing to A while A is unconnected is dropped */
	fx = socket(AF_UNIX, SOCK_DGRAM, 0);
	memcpy(sa.sun_path, x, strlen(x) + 1);
	CU_ASSERT_EQUAL_FATAL(bind(fx, (struct sockaddr *)&sa, sizeof(sa)), 0);
	memcpy(sa.sun_path, a, strlen(a) + 1);
	CU_ASSERT_EQUAL(sendto(fx, "intruder-frame!!", 16, 0, (struct sockaddr *)&sa, sizeof(sa)), 16);
	CU_ASSERT_EQUAL(srecv(pa, buf, sizeof(buf)), 0);
	ops->stats(pa, &st);
	CU_ASSERT_EQUAL(st.rx_dropped, 1);

	CU_ASSERT_EQUAL_FATAL(sopen((const char *[]){ "path", b, "peer", a, NULL }, &pb, &cb), 0);
	/* B sends first: A is not connected yet but B is A's peer */
	CU_ASSERT_EQUAL(ssend(pb, "from-b-to-a-0000", 16), 16);
	CU_ASSERT_EQUAL(srecv(pa, buf, sizeof(buf)), 16);
	CU_ASSERT_EQUAL(memcmp(buf, "from-b-to-a-0000", 16), 0);
	/* A connects on its next send */
	CU_ASSERT_EQUAL(ssend(pa, "from-a-to-b-0000", 16), 16);
	CU_ASSERT_EQUAL(srecv(pb, buf, sizeof(buf)), 16);
	CU_ASSERT_EQUAL(memcmp(buf, "from-a-to-b-0000", 16), 0);
	/* now connected, the kernel keeps strangers out */
	CU_ASSERT_EQUAL(sendto(fx, "intruder-frame!!", 16, 0, (struct sockaddr *)&sa, sizeof(sa)), -1);
	CU_ASSERT_EQUAL(errno, EPERM);

	/* B restarts (a new socket at the same path): A reconnects */
	sclose(pb, cb);
	CU_ASSERT_EQUAL(access(b, F_OK), -1); /* close removed the socket file */
	CU_ASSERT_EQUAL_FATAL(sopen((const char *[]){ "path", b, "peer", a, NULL }, &pb, &cb), 0);
	CU_ASSERT_EQUAL(ssend(pa, "again-a-to-b-000", 16), 16);
	CU_ASSERT_EQUAL(srecv(pb, buf, sizeof(buf)), 16);
	CU_ASSERT_EQUAL(memcmp(buf, "again-a-to-b-000", 16), 0);

	/* a second A at the same path: in use */
	{
		void *p2, *c2;

		CU_ASSERT_EQUAL(sopen((const char *[]){ "path", a, "peer", x, NULL }, &p2, &c2),
				-EADDRINUSE);
		sclose(p2, c2);
	}
	sclose(pa, ca);
	sclose(pb, cb);
	close(fx);
	unlink(x);
	fake_host_fini(&fh);
}

static void test_stale_and_bad_paths(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char a[256], b[256], f[256];
	void *p, *c;
	int fd;

	fake_host_init(&fh);
	path_of(a, sizeof(a), "stale.sock");
	path_of(b, sizeof(b), "other.sock");
	path_of(f, sizeof(f), "plain-file");
	/* a socket file left by a VM that is gone is replaced */
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	memcpy(sa.sun_path, a, strlen(a) + 1);
	CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	CU_ASSERT_EQUAL(sopen((const char *[]){ "path", a, "peer", b, NULL }, &p, &c), 0);
	sclose(p, c);
	/* a path that is not a socket is never removed */
	fd = open(f, O_CREAT | O_WRONLY, 0600);
	close(fd);
	CU_ASSERT_EQUAL(sopen((const char *[]){ "path", f, "peer", b, NULL }, &p, &c), -EEXIST);
	sclose(p, c);
	CU_ASSERT_EQUAL(access(f, F_OK), 0);
	unlink(f);
	fake_host_fini(&fh);
}

static void test_seqpacket_eof(void)
{
	uint8_t buf[64];
	char fdtxt[16];
	void *p, *c;
	int sv[2];

	fake_host_init(&fh);
	CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	snprintf(fdtxt, sizeof(fdtxt), "%d", sv[0]);
	CU_ASSERT_EQUAL_FATAL(sopen((const char *[]){ "fd", fdtxt, NULL }, &p, &c), 0);
	CU_ASSERT_EQUAL(send(sv[1], "seqpacket-frame!", 16, 0), 16);
	CU_ASSERT_EQUAL(srecv(p, buf, sizeof(buf)), 16);
	close(sv[1]);
	CU_ASSERT_EQUAL(srecv(p, buf, sizeof(buf)), -ECONNRESET);
	sclose(p, c);
	close(sv[0]);
	fake_host_fini(&fh);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "descriptor", test_descriptor },
		{ "parameter errors", test_params },
		{ "socketpair send and receive", test_socketpair },
		{ "full peer: EAGAIN and writability", test_backpressure },
		{ "path and peer, late peer, restart", test_paths },
		{ "stale socket, non-socket path", test_stale_and_bad_paths },
		{ "seqpacket end of file", test_seqpacket_eof },
		{ NULL, NULL },
	};
	char cmd[128];
	int ret;

	signal(SIGPIPE, SIG_IGN);
	plug = fake_plugin_open("socket", &dl);
	if (!plug || !mkdtemp(dir))
		return 1;
	ops = plug->ops;
	ret = cu_run("net_socket", tests);
	fake_plugin_close(dl);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	return ret;
}
