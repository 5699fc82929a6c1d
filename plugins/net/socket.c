/* SPDX-License-Identifier: Apache-2.0 */
/* The socket net backend: Ethernet frames as Unix datagrams, one frame per datagram. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cubicle/net.h>

/*
 * Two ways to get the socket:
 *   path + peer  bind a datagram socket at path and send to the one at peer:
 *                two VMs name each other's paths and are wired together, no
 *                root needed. Whichever starts first cannot reach the other
 *                yet: its frames are dropped (counted) until the peer's
 *                socket exists, as on a cable not yet plugged in.
 *   fd           an inherited AF_UNIX datagram (or seqpacket) socket, e.g. one
 *                end of a socketpair; it is duplicated, the caller keeps its
 *                own descriptor.
 * The socket is connected to the peer whenever the peer exists, so that
 * (1) the kernel accepts datagrams from the peer only, and (2) the sender's
 * poll reports EPOLLOUT exactly when a send that returned EAGAIN may work
 * again: with both ends connected to each other, a full peer shows up as the
 * sender's own send buffer filling (unix_dgram_poll). An unconnected sender
 * would see EAGAIN from a full receiver but a writable poll: a busy loop.
 * While unconnected, received datagrams from anyone but the peer are dropped.
 * No vnet header, no offloads: plain frames.
 */

#define SNDBUF_WANT (4u << 20) /* capped by net.core.wmem_max without CAP_NET_ADMIN */

struct sock_cfg {
	const char *path;
	const char *peer;
	int64_t fd;
};

struct sock {
	struct cub_inst *in;
	const struct cub_host *h;
	int fd;
	bool unlink_path;
	const char *path;
	struct sockaddr_un peer;
	socklen_t peer_len;       /* 0: fd mode, always connected */
	atomic_bool connected;
	bool seqpacket;           /* fd mode: a seqpacket socket (0 bytes is EOF) */
	atomic_uint_fast64_t rx_packets, rx_bytes, rx_dropped, rx_errors;
	atomic_uint_fast64_t tx_packets, tx_bytes, tx_dropped, tx_errors;
};

static void add(atomic_uint_fast64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static int fill_addr(struct sockaddr_un *sa, socklen_t *len, const char *p)
{
	size_t n = strlen(p);

	if (n >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, p, n + 1);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	return 0;
}

/* Connect to the peer if it exists now: true if connected. Send path only. */
static bool try_connect(struct sock *s)
{
	if (!s->peer_len)
		return true;
	if (connect(s->fd, (struct sockaddr *)&s->peer, s->peer_len) < 0) {
		atomic_store(&s->connected, false);
		return false;
	}
	atomic_store(&s->connected, true);
	return true;
}

static int64_t sock_send(void *priv, const struct iovec *iov, int iovcnt)
{
	struct sock *s = priv;
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	bool retried = false;
	ssize_t n;

	if (!atomic_load_explicit(&s->connected, memory_order_relaxed) && !try_connect(s))
		goto drop;
again:
	n = sendmsg(s->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n >= 0) {
		add(&s->tx_packets, 1);
		add(&s->tx_bytes, (uint64_t)n);
		return n;
	}
	if (errno == EINTR)
		goto again;
	if (errno == EAGAIN)
		return -EAGAIN;
	/* The peer went away (its VM restarted: a new socket at the same path). */
	if (s->peer_len && !retried &&
	    (errno == ECONNREFUSED || errno == ENOTCONN || errno == ECONNRESET ||
	     errno == EPIPE || errno == EDESTADDRREQ)) {
		retried = true;
		if (try_connect(s))
			goto again;
		goto drop;
	}
	if (errno == EMSGSIZE || errno == ENOBUFS) {
		add(&s->tx_dropped, 1);
		return -errno;
	}
	add(&s->tx_errors, 1);
	return -errno;
drop:
	add(&s->tx_dropped, 1);
	return -ENOTCONN;
}

/* Did the datagram come from the socket bound at peer? By name, or by inode
 * when the peer spelled its path differently (relative, symlinked folder). */
static bool from_peer(const struct sock *s, struct sockaddr_un *from, socklen_t len)
{
	size_t off = offsetof(struct sockaddr_un, sun_path);
	struct stat a, b;

	if (len <= off || from->sun_family != AF_UNIX || !from->sun_path[0])
		return false; /* unnamed or abstract: never the peer */
	if (len >= sizeof(*from))
		len = sizeof(*from) - 1;
	((char *)from)[len] = 0;
	if (!strcmp(from->sun_path, s->peer.sun_path))
		return true;
	return !stat(from->sun_path, &a) && !stat(s->peer.sun_path, &b) && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

static int64_t sock_recv(void *priv, const struct iovec *iov, int iovcnt)
{
	struct sock *s = priv;
	struct sockaddr_un from;
	struct msghdr m;
	ssize_t n;

	for (;;) {
		bool check = s->peer_len && !atomic_load_explicit(&s->connected,
								  memory_order_relaxed);

		m = (struct msghdr){ .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
		if (check) {
			m.msg_name = &from;
			m.msg_namelen = sizeof(from);
		}
		n = recvmsg(s->fd, &m, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			add(&s->rx_errors, 1);
			return -errno;
		}
		if (check && !from_peer(s, &from, m.msg_namelen)) {
			add(&s->rx_dropped, 1);
			s->h->log_ratelimited(s->in, CUB_LOG_WARN,
					      "dropped a datagram not from peer %s", s->peer.sun_path);
			continue;
		}
		if (m.msg_flags & MSG_TRUNC) {
			add(&s->rx_dropped, 1);
			return -EMSGSIZE;
		}
		if (!n && s->seqpacket) {
			add(&s->rx_errors, 1);
			return -ECONNRESET; /* end of file: the other end closed */
		}
		if (!n)
			continue; /* an empty datagram is no frame */
		add(&s->rx_packets, 1);
		add(&s->rx_bytes, (uint64_t)n);
		return n;
	}
}

static void sock_info(void *priv, struct cub_net_info *out)
{
	struct sock *s = priv;

	*out = (struct cub_net_info){ .link_up = true, .rx_fd = s->fd, .tx_fd = s->fd };
}

static void sock_stats(void *priv, struct cub_net_stats *out)
{
	struct sock *s = priv;

	*out = (struct cub_net_stats){
		.rx_packets = atomic_load(&s->rx_packets),
		.rx_bytes = atomic_load(&s->rx_bytes),
		.rx_dropped = atomic_load(&s->rx_dropped),
		.rx_errors = atomic_load(&s->rx_errors),
		.tx_packets = atomic_load(&s->tx_packets),
		.tx_bytes = atomic_load(&s->tx_bytes),
		.tx_dropped = atomic_load(&s->tx_dropped),
		.tx_errors = atomic_load(&s->tx_errors),
	};
}

/* ---- open ---- */

static int open_fd(struct sock *s, int fd)
{
	int type = 0, dom = 0;
	socklen_t l = sizeof(type);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0)
		return s->h->fail(s->in, -errno, "fd %d is not a socket: %s", fd, strerror(errno));
	l = sizeof(dom);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 || dom != AF_UNIX ||
	    (type != SOCK_DGRAM && type != SOCK_SEQPACKET))
		return s->h->fail(s->in, -EINVAL,
				  "fd %d must be an AF_UNIX datagram or seqpacket socket", fd);
	/* The duplicate shares the file status flags: leave O_NONBLOCK alone
	 * (every call passes MSG_DONTWAIT instead). */
	s->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (s->fd < 0)
		return s->h->fail(s->in, -errno, "cannot duplicate fd %d: %s", fd, strerror(errno));
	s->seqpacket = type == SOCK_SEQPACKET;
	atomic_store(&s->connected, true);
	return 0;
}

/* A socket file at @sa: is a live socket bound there? A stale one refuses
 * the connection; a live one connected to its own peer answers EPERM. */
static bool in_use(const struct sockaddr_un *sa, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool used;

	if (fd < 0)
		return false;
	used = !connect(fd, (const struct sockaddr *)sa, len) || errno == EPERM;
	close(fd);
	return used;
}

static int open_path(struct sock *s, const char *path, const char *peer)
{
	struct sockaddr_un sa;
	socklen_t len;
	struct stat st;

	if (fill_addr(&sa, &len, path))
		return s->h->fail(s->in, -ENAMETOOLONG, "path %s is too long for a Unix socket",
				  path);
	if (fill_addr(&s->peer, &s->peer_len, peer))
		return s->h->fail(s->in, -ENAMETOOLONG, "peer %s is too long for a Unix socket",
				  peer);
	if (!strcmp(path, peer))
		return s->h->fail(s->in, -EINVAL, "path and peer are both %s", path);
	s->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return s->h->fail(s->in, -errno, "socket: %s", strerror(errno));
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode))
			return s->h->fail(s->in, -EEXIST, "%s exists and is not a socket", path);
		if (in_use(&sa, len))
			return s->h->fail(s->in, -EADDRINUSE,
					  "%s is in use by another process", path);
		unlink(path); /* left behind by a VM that is gone */
	}
	if (bind(s->fd, (struct sockaddr *)&sa, len) < 0)
		return s->h->fail(s->in, -errno, "cannot bind %s: %s", path, strerror(errno));
	s->path = path;
	s->unlink_path = true;
	if (!try_connect(s))
		s->h->log(s->in, CUB_LOG_INFO, "peer %s is not there yet (%s); waiting for it",
			  peer, strerror(errno));
	return 0;
}

static void sock_close(void *priv)
{
	struct sock *s = priv;

	if (s->fd >= 0)
		close(s->fd);
	if (s->unlink_path)
		unlink(s->path);
	free(s);
}

static int sock_open(struct cub_inst *in, const struct cub_host *h, const void *cfgp, void **priv)
{
	const struct sock_cfg *cfg = cfgp;
	bool by_path = (cfg->path && *cfg->path) || (cfg->peer && *cfg->peer);
	int sndbuf = SNDBUF_WANT, err;
	struct sock *s;

	if (cfg->fd >= 0 && by_path)
		return h->fail(in, -EINVAL, "give either fd or path + peer, not both");
	if (cfg->fd < 0 && (!cfg->path || !*cfg->path || !cfg->peer || !*cfg->peer))
		return h->fail(in, -EINVAL,
			       "needs path (to bind) and peer (to send to), or fd (an inherited socket)");
	if (cfg->fd > INT32_MAX)
		return h->fail(in, -EBADF, "fd %lld is out of range", (long long)cfg->fd);
	s = calloc(1, sizeof(*s));
	if (!s)
		return h->fail(in, -ENOMEM, "out of memory");
	s->in = in;
	s->h = h;
	s->fd = -1;
	err = cfg->fd >= 0 ? open_fd(s, (int)cfg->fd) : open_path(s, cfg->path, cfg->peer);
	if (err) {
		sock_close(s);
		return err;
	}
	/* Room for a few 64 KiB frames in flight; failure only costs throughput. */
	setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	*priv = s;
	return 0;
}

static const struct cub_param sock_params[] = {
	{ .name = "path", .type = CUB_P_PATH, .offset = offsetof(struct sock_cfg, path),
	  .def = "", .doc = "Unix datagram socket to bind (removed at exit)" },
	{ .name = "peer", .type = CUB_P_PATH, .offset = offsetof(struct sock_cfg, peer),
	  .def = "", .doc = "Unix datagram socket of the other end (its `path`)" },
	{ .name = "fd", .type = CUB_P_INT, .offset = offsetof(struct sock_cfg, fd),
	  .def = "-1", .min = "-1", .max = "2147483647",
	  .doc = "an inherited AF_UNIX datagram socket instead of path + peer" },
};

static const struct cub_net_ops sock_ops = {
	.open = sock_open,
	.close = sock_close,
	.info = sock_info,
	.send = sock_send,
	.recv = sock_recv,
	.stats = sock_stats,
};

/* Once the VM runs: a connect when the peer's socket appears late. */
static const struct cub_syscall sock_syscalls[] = { CUB_SYSCALL("connect") };

CUB_PLUGIN({
	CUB_PLUGIN_ABI(4),
	.kind = CUB_KIND_NET,
	.name = "socket",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "frames over a Unix datagram socket: two VMs wired together, or a test harness",
	.cfg_size = sizeof(struct sock_cfg),
	.params = sock_params,
	.n_params = CUB_ARRAY_SIZE(sock_params),
	.ops = &sock_ops,
	.syscalls = sock_syscalls,
	.n_syscalls = CUB_ARRAY_SIZE(sock_syscalls),
});
