/* SPDX-License-Identifier: Apache-2.0 */
/* The virtio-console device plugin: one port (the guest's hvc0) to stdio, a file or a Unix socket. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cubicle/plugin.h>
#include <cubicle/virtio.h>

/*
 * Single port, no VIRTIO_CONSOLE_F_MULTIPORT: queue 0 carries host input to
 * the guest, queue 1 guest output to the host. Consoles as serial8250's:
 *   stdio   output to stdout; with input = true, stdin to the guest (raw on
 *           a tty, Ctrl-A x ends the VM, Ctrl-A a sends Ctrl-A).
 *   file    output appended to path; no input.
 *   socket  listen on the Unix socket path; one client at a time gets the
 *           output and feeds the input; without one, output is discarded.
 *   none    output discarded, no input.
 * Output runs on the thread that kicked the transmit queue, at most
 * TX_MAX_PER_CHAIN bytes per buffer (segments may alias guest RAM over and
 * over; the rest is dropped with a warning). A console that
 * stops reading costs that thread one OUT_WAIT_MS wait; then output is
 * dropped (rate-limited warning) until it reads again, so a guest spinning
 * on its transmit queue is never stuck. Host input waits in a backlog until
 * the guest posts receive buffers. VIRTIO_CONSOLE_F_EMERG_WRITE is offered:
 * a byte written to emerg_wr goes straight to the output.
 */

#define VIRTIO_ID_CONSOLE 3
#define VIRTIO_CONSOLE_F_EMERG_WRITE 2
#define QUEUE_MAX	256
#define Q_RX		0
#define Q_TX		1
#define CFG_EMERG_WR	8
#define CFG_SIZE	12 /* cols, rows, max_nr_ports, emerg_wr */
#define BACKLOG_LEN	(64u << 10)
#define OUT_WAIT_MS	50
#define OUT_CHUNK	4096 /* <= PIPE_BUF: a writable pipe takes it whole */
#define ESC_CHAR	0x01
#define TX_MAX_PER_CHAIN (64u << 10) /* hvc sends a page at most; more is cut */

enum console_kind { CON_STDIO, CON_FILE, CON_SOCKET, CON_NONE };

static const char *const console_choices[] = { "stdio", "file", "socket", "none", NULL };

struct con_cfg {
	int console;
	const char *path;
	bool input;
};

struct con {
	struct cub_inst *in;
	const struct cub_host *h;
	const struct con_cfg *cfg;

	pthread_mutex_t lock; /* everything below: vCPUs and the event loop */
	struct cub_vq *rxq, *txq;
	struct cub_vq_chain chain;
	uint8_t *backlog;     /* host input, a ring */
	unsigned bl_head, bl_count;
	bool esc_pending;

	int out_fd;           /* -1: output discarded */
	bool out_is_sock, out_direct, out_stalled;
	uint64_t out_dropped;
	int in_fd;            /* stdin while watched, else -1 */
	bool in_escape;
	int file_fd, listen_fd, client_fd;
	bool unlink_path;
};

/* ---- output ---- */

static bool out_wait(struct con *c)
{
	struct pollfd p = { .fd = c->out_fd, .events = POLLOUT };
	int n;

	do
		n = poll(&p, 1, c->out_stalled ? 0 : OUT_WAIT_MS);
	while (n < 0 && errno == EINTR);
	return n > 0 && (p.revents & POLLOUT);
}

/* Write guest output without letting a stuck reader hang us. Lock held. */
static void out_bytes(struct con *c, const uint8_t *p, size_t len)
{
	int tries = 0;

	while (len && c->out_fd >= 0) {
		size_t chunk = len < OUT_CHUNK ? len : OUT_CHUNK;
		ssize_t n;

		if (!c->out_direct && !c->out_is_sock && !out_wait(c))
			goto drop;
		if (c->out_is_sock)
			n = send(c->out_fd, p, chunk, MSG_NOSIGNAL | MSG_DONTWAIT);
		else
			n = write(c->out_fd, p, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && ++tries < 4 && (!c->out_is_sock || out_wait(c)))
			continue;
		if (n < 0 && errno == EPIPE && !c->out_is_sock) {
			c->h->log(c->in, CUB_LOG_WARN, "console output closed; guest output discarded");
			c->out_fd = -1;
			return;
		}
		if (n <= 0)
			goto drop;
		if (c->out_stalled)
			c->h->log_ratelimited(c->in, CUB_LOG_WARN,
					      "console accepts output again; %llu bytes dropped",
					      (unsigned long long)c->out_dropped);
		c->out_stalled = false;
		c->out_dropped = 0;
		p += n;
		len -= (size_t)n;
	}
	return;
drop:
	if (!c->out_stalled)
		c->h->log_ratelimited(c->in, CUB_LOG_WARN, "console output blocked; dropping guest output");
	c->out_stalled = true;
	c->out_dropped += len;
}

/* Guest output: every chain on the transmit queue. Lock held. */
static void tx_drain(struct con *c)
{
	const struct cub_virtio_host *v = c->h->virtio;
	unsigned done = 0;

	while (c->txq && v->pop(c->txq, &c->chain) == 1) {
		size_t budget = TX_MAX_PER_CHAIN;

		for (unsigned i = 0; i < c->chain.n_out && budget; i++) {
			size_t n = c->chain.out[i].iov_len < budget ? c->chain.out[i].iov_len : budget;

			out_bytes(c, c->chain.out[i].iov_base, n);
			budget -= n;
		}
		if (!budget && c->chain.out_len > TX_MAX_PER_CHAIN)
			c->h->log_ratelimited(c->in, CUB_LOG_WARN,
					      "output buffer of %llu bytes cut to %u",
					      (unsigned long long)c->chain.out_len, TX_MAX_PER_CHAIN);
		v->push(c->txq, &c->chain, 0);
		done++;
	}
	if (done)
		v->notify(c->txq);
}

/* ---- input ---- */

/* Host input into receive buffers while both exist. Lock held. */
static void rx_deliver(struct con *c)
{
	const struct cub_virtio_host *v = c->h->virtio;
	unsigned done = 0;

	while (c->rxq && c->bl_count) {
		uint32_t written = 0;

		if (v->pop(c->rxq, &c->chain) != 1)
			break;
		if (!c->chain.in_len) {
			v->broken(c->in, "receive buffer without device-writable space");
			break;
		}
		for (unsigned i = 0; i < c->chain.n_in && c->bl_count; i++) {
			uint8_t *d = c->chain.in[i].iov_base;
			size_t room = c->chain.in[i].iov_len;

			while (room && c->bl_count) {
				unsigned run = BACKLOG_LEN - c->bl_head;

				if (run > c->bl_count)
					run = c->bl_count;
				if (run > room)
					run = (unsigned)room;
				memcpy(d, c->backlog + c->bl_head, run);
				c->bl_head = (c->bl_head + run) % BACKLOG_LEN;
				c->bl_count -= run;
				d += run;
				room -= run;
				written += run;
			}
		}
		v->push(c->rxq, &c->chain, written);
		done++;
	}
	if (done)
		v->notify(c->rxq);
}

static bool bl_push(struct con *c, uint8_t b)
{
	if (c->bl_count == BACKLOG_LEN)
		return false;
	c->backlog[(c->bl_head + c->bl_count++) % BACKLOG_LEN] = b;
	return true;
}

/* Queue host input, handling the Ctrl-A escape; true on Ctrl-A x. Lock held. */
static bool host_input(struct con *c, const uint8_t *buf, size_t n, bool escapes)
{
	bool quit = false, full = false;

	for (size_t i = 0; i < n; i++) {
		uint8_t b = buf[i];

		if (escapes && c->esc_pending) {
			c->esc_pending = false;
			if (b == 'x' || b == 'X') {
				quit = true;
				continue;
			}
			if (b == 'h' || b == 'H' || b == '?') {
				c->h->log(c->in, CUB_LOG_INFO, "escapes: Ctrl-A x exit, Ctrl-A a send Ctrl-A");
				continue;
			}
			if (b == 'a' || b == ESC_CHAR)
				b = ESC_CHAR;
			else
				full |= !bl_push(c, ESC_CHAR);
		} else if (escapes && b == ESC_CHAR) {
			c->esc_pending = true;
			continue;
		}
		full |= !bl_push(c, b);
	}
	if (full)
		c->h->log_ratelimited(c->in, CUB_LOG_WARN, "guest is not reading input; dropped some");
	rx_deliver(c);
	return quit;
}

static ssize_t input_read(int fd, uint8_t *buf, size_t len)
{
	ssize_t n;

	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n;
}

static void stdin_ready(void *arg)
{
	struct con *c = arg;
	uint8_t buf[256];
	bool quit;
	ssize_t n;

	if (c->in_fd < 0)
		return;
	n = input_read(c->in_fd, buf, sizeof(buf));
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		c->h->log(c->in, CUB_LOG_INFO, "stdin closed; guest input stops");
		c->h->fd_unwatch(c->in, c->in_fd);
		c->in_fd = -1;
		return;
	}
	pthread_mutex_lock(&c->lock);
	quit = host_input(c, buf, (size_t)n, c->in_escape);
	pthread_mutex_unlock(&c->lock);
	if (quit) {
		c->h->log(c->in, CUB_LOG_INFO, "Ctrl-A x: terminating the VM");
		c->h->vm_exit(c->in, 0);
	}
}

static void client_close(struct con *c)
{
	int fd;

	pthread_mutex_lock(&c->lock);
	fd = c->client_fd;
	c->client_fd = c->out_fd = -1;
	c->out_stalled = false;
	pthread_mutex_unlock(&c->lock);
	if (fd >= 0) {
		c->h->fd_unwatch(c->in, fd);
		close(fd);
	}
}

static void client_ready(void *arg)
{
	struct con *c = arg;
	uint8_t buf[256];
	ssize_t n;

	if (c->client_fd < 0)
		return;
	n = input_read(c->client_fd, buf, sizeof(buf));
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		c->h->log(c->in, CUB_LOG_INFO, "console client disconnected");
		client_close(c);
		return;
	}
	pthread_mutex_lock(&c->lock);
	host_input(c, buf, (size_t)n, false);
	pthread_mutex_unlock(&c->lock);
}

static void listen_ready(void *arg)
{
	struct con *c = arg;
	int fd, err;

	fd = accept4(c->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (c->client_fd >= 0) {
		c->h->log_ratelimited(c->in, CUB_LOG_WARN,
				      "console client refused: one is already connected");
		close(fd);
		return;
	}
	pthread_mutex_lock(&c->lock);
	c->client_fd = c->out_fd = fd;
	c->out_stalled = false;
	pthread_mutex_unlock(&c->lock);
	err = c->h->fd_watch(c->in, fd, EPOLLIN, client_ready, c);
	if (err) {
		c->h->log(c->in, CUB_LOG_WARN, "cannot watch console client: %s", strerror(-err));
		client_close(c);
		return;
	}
	c->h->log(c->in, CUB_LOG_INFO, "console client connected");
}

/* ---- console setup ---- */

static int setup_stdio(struct con *c)
{
	struct stat st;
	int err;

	if (fcntl(STDOUT_FILENO, F_GETFL) >= 0) {
		c->out_fd = STDOUT_FILENO;
		c->out_direct = !fstat(STDOUT_FILENO, &st) && S_ISREG(st.st_mode);
	}
	if (!c->cfg->input)
		return 0;
	if (isatty(STDIN_FILENO)) {
		err = c->h->tty_raw(c->in, STDIN_FILENO);
		if (err)
			c->h->log(c->in, CUB_LOG_WARN, "stdin terminal stays in cooked mode: %s",
				  strerror(-err));
		c->in_escape = true;
	}
	c->in_fd = STDIN_FILENO;
	err = c->h->fd_watch(c->in, STDIN_FILENO, EPOLLIN, stdin_ready, c);
	if (err) {
		c->h->log(c->in, err == -EPERM ? CUB_LOG_DEBUG : CUB_LOG_WARN,
			  "stdin cannot be watched (%s); no guest input", strerror(-err));
		c->in_fd = -1;
	}
	return 0;
}

static int setup_file(struct con *c)
{
	c->file_fd = open(c->cfg->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (c->file_fd < 0)
		return c->h->fail(c->in, -errno, "cannot open console file %s: %s", c->cfg->path,
				  strerror(errno));
	c->out_fd = c->file_fd;
	c->out_direct = true;
	return 0;
}

static bool socket_in_use(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool used;

	if (fd < 0)
		return false;
	used = !connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	return used;
}

static int setup_socket(struct con *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *p = c->cfg->path;
	struct stat st;
	int err;

	if (strlen(p) >= sizeof(sa.sun_path))
		return c->h->fail(c->in, -ENAMETOOLONG, "console socket path too long: %s", p);
	memcpy(sa.sun_path, p, strlen(p) + 1);
	c->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->listen_fd < 0)
		return c->h->fail(c->in, -errno, "console socket: %s", strerror(errno));
	if (!lstat(p, &st)) {
		if (!S_ISSOCK(st.st_mode))
			return c->h->fail(c->in, -EEXIST,
					  "console socket path %s exists and is not a socket", p);
		if (socket_in_use(&sa))
			return c->h->fail(c->in, -EADDRINUSE,
					  "console socket %s is in use by another process", p);
		unlink(p);
	}
	if (bind(c->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return c->h->fail(c->in, -errno, "cannot bind console socket %s: %s", p,
				  strerror(errno));
	c->unlink_path = true;
	if (listen(c->listen_fd, 1) < 0)
		return c->h->fail(c->in, -errno, "cannot listen on %s: %s", p, strerror(errno));
	c->out_is_sock = true;
	err = c->h->fd_watch(c->in, c->listen_fd, EPOLLIN, listen_ready, c);
	if (err)
		return c->h->fail(c->in, err, "cannot watch console socket %s", p);
	return 0;
}

/* ---- virtio ops ---- */

static uint64_t con_features(void *priv)
{
	return 1ull << VIRTIO_CONSOLE_F_EMERG_WRITE;
}

static void con_config_read(void *priv, uint32_t off, void *buf, uint32_t len)
{
	/* cols, rows (no F_SIZE), max_nr_ports (no F_MULTIPORT), emerg_wr (write-only) */
	memset(buf, 0, len);
}

static void con_config_write(void *priv, uint32_t off, const void *buf, uint32_t len)
{
	struct con *c = priv;

	if (off != CFG_EMERG_WR || !len)
		return;
	pthread_mutex_lock(&c->lock);
	out_bytes(c, buf, 1); /* the low byte of emerg_wr */
	pthread_mutex_unlock(&c->lock);
}

static int con_start(void *priv, struct cub_vq *const *vqs, unsigned n)
{
	struct con *c = priv;

	pthread_mutex_lock(&c->lock);
	c->rxq = n > Q_RX ? vqs[Q_RX] : NULL;
	c->txq = n > Q_TX ? vqs[Q_TX] : NULL;
	rx_deliver(c);
	tx_drain(c);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static void con_notify(void *priv, unsigned q)
{
	struct con *c = priv;

	pthread_mutex_lock(&c->lock);
	if (q == Q_RX)
		rx_deliver(c);
	else if (q == Q_TX)
		tx_drain(c);
	pthread_mutex_unlock(&c->lock);
}

static void con_stop(void *priv)
{
	struct con *c = priv;

	pthread_mutex_lock(&c->lock);
	c->rxq = c->txq = NULL;
	c->esc_pending = false;
	pthread_mutex_unlock(&c->lock);
}

static const struct cub_virtio_ops con_vops = {
	.device_id = VIRTIO_ID_CONSOLE,
	.n_queues = 2,
	.queue_max = QUEUE_MAX,
	.config_size = CFG_SIZE,
	.features = con_features,
	.config_read = con_config_read,
	.config_write = con_config_write,
	.start = con_start,
	.notify = con_notify,
	.stop = con_stop,
};

/* ---- lifecycle ---- */

static void con_free(struct con *c)
{
	if (c->client_fd >= 0)
		close(c->client_fd);
	if (c->listen_fd >= 0)
		close(c->listen_fd);
	if (c->unlink_path)
		unlink(c->cfg->path);
	if (c->file_fd >= 0)
		close(c->file_fd);
	pthread_mutex_destroy(&c->lock);
	free(c->backlog);
	free(c);
}

static int con_create(struct cub_inst *in, const struct cub_host *h, const void *cfgp,
		      void **priv)
{
	const struct con_cfg *cfg = cfgp;
	struct con *c;
	int err;

	if (cfg->console < CON_STDIO || cfg->console > CON_NONE)
		return h->fail(in, -EINVAL, "console: unknown choice %d", cfg->console);
	if ((cfg->console == CON_FILE || cfg->console == CON_SOCKET) &&
	    (!cfg->path || !cfg->path[0]))
		return h->fail(in, -EINVAL, "console = \"%s\" needs a non-empty path",
			       console_choices[cfg->console]);
	if (!CUB_HOST_HAS(h, virtio))
		return h->fail(in, -ENOTSUP, "this host offers no virtio services");
	c = calloc(1, sizeof(*c));
	if (!c || !(c->backlog = malloc(BACKLOG_LEN))) {
		free(c);
		return h->fail(in, -ENOMEM, "out of memory");
	}
	c->in = in;
	c->h = h;
	c->cfg = cfg;
	c->out_fd = c->in_fd = c->file_fd = c->listen_fd = c->client_fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	switch (cfg->console) {
	case CON_STDIO:
		err = setup_stdio(c);
		break;
	case CON_FILE:
		err = setup_file(c);
		break;
	case CON_SOCKET:
		err = setup_socket(c);
		break;
	default:
		err = 0;
		break;
	}
	if (!err)
		err = h->virtio->add(in, &con_vops, c);
	if (err) {
		con_free(c); /* the host drops a failed instance's fd watches */
		return err;
	}
	*priv = c;
	return 0;
}

static void con_destroy(void *priv)
{
	con_free(priv);
}

static const struct cub_param con_params[] = {
	{ .name = "console", .type = CUB_P_ENUM, .offset = offsetof(struct con_cfg, console),
	  .def = "stdio", .choices = console_choices,
	  .doc = "where hvc0 goes: stdio (Ctrl-A x quits), file, socket (Unix, listening) or none" },
	{ .name = "path", .type = CUB_P_STR, .offset = offsetof(struct con_cfg, path),
	  .def = "", .doc = "file to append output to, or Unix socket to listen on" },
	{ .name = "input", .type = CUB_P_BOOL, .offset = offsetof(struct con_cfg, input),
	  .def = "true", .doc = "stdio: feed host stdin to the guest (raw mode on a tty)" },
};

static const struct cub_device_ops con_ops = {
	.create = con_create,
	.destroy = con_destroy,
};

CUB_PLUGIN({
	.abi_major = CUB_ABI_MAJOR,
	.abi_minor = CUB_ABI_MINOR,
	.size = sizeof(struct cub_plugin),
	.kind = CUB_KIND_DEVICE,
	.name = "virtio-console",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "virtio console (hvc0) on stdio, a file or a Unix socket",
	.cfg_size = sizeof(struct con_cfg),
	.params = con_params,
	.n_params = CUB_ARRAY_SIZE(con_params),
	.ops = &con_ops,
});
