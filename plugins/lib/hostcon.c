/* SPDX-License-Identifier: Apache-2.0 */
/* The host end of a guest console: stdio (with the Ctrl-A escape), a file or a Unix socket. */
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

#include "hostcon.h"

#define OUT_CHUNK	4096 /* <= PIPE_BUF: a writable pipe takes it whole */
#define IN_CHUNK	256  /* bytes read per input event */
#define ESC_CHAR	0x01 /* Ctrl-A, as in QEMU's -nographic */

const char *const hostcon_choices[] = { "stdio", "file", "socket", "none", NULL };

struct hostcon {
	struct cub_inst *in;
	const struct cub_host *h;
	const struct hostcon_cfg *cfg;
	void (*input)(void *arg);
	void *arg;

	pthread_mutex_t lock;  /* everything up to the next comment */
	int out_fd;            /* -1: output discarded */
	bool out_is_sock, out_direct, out_stalled;
	uint64_t out_dropped;
	uint64_t out_total;    /* bytes written to a regular file (out_direct) */
	bool out_capped;       /* max_size reached (logged once) */
	uint8_t *backlog;      /* host input, a ring */
	size_t bl_size, bl_head, bl_count;
	bool esc_pending;

	/* Written by open/close and the event loop only. */
	int in_fd;             /* stdin while watched, else -1 */
	bool in_escape;        /* stdin is a terminal: Ctrl-A escapes apply */
	int file_fd, listen_fd, client_fd;
	bool unlink_path;
};

/* ---- output ---- */

static bool out_wait(struct hostcon *hc)
{
	struct pollfd p = { .fd = hc->out_fd, .events = POLLOUT };
	int n;

	do
		n = poll(&p, 1, hc->out_stalled ? 0 : HOSTCON_OUT_WAIT_MS);
	while (n < 0 && errno == EINTR);
	return n > 0 && (p.revents & POLLOUT);
}

/* Output to a regular file stops at max_size: how much of @len may go. */
static size_t out_room(struct hostcon *hc, size_t len)
{
	uint64_t max = hc->cfg->max_size, room;

	if (!hc->out_direct || !max)
		return len;
	room = hc->out_total < max ? max - hc->out_total : 0;
	if (len <= room)
		return len;
	if (!hc->out_capped)
		hc->h->log(hc->in, CUB_LOG_WARN,
			   "console %s reached max_size (%llu bytes): further guest output is "
			   "dropped; the VM keeps running",
			   hc->cfg->console == HOSTCON_FILE ? hc->cfg->path : "output",
			   (unsigned long long)max);
	hc->out_capped = true;
	return (size_t)room;
}

/* Write without letting a stuck reader hang the caller. Lock held. */
static void out_bytes(struct hostcon *hc, const uint8_t *p, size_t len)
{
	int tries = 0;

	len = out_room(hc, len);

	while (len && hc->out_fd >= 0) {
		size_t chunk = len < OUT_CHUNK ? len : OUT_CHUNK;
		ssize_t n;

		/* Waiting first keeps a blocking tty or pipe from blocking us. */
		if (!hc->out_direct && !hc->out_is_sock && !out_wait(hc))
			goto drop;
		if (hc->out_is_sock)
			n = send(hc->out_fd, p, chunk, MSG_NOSIGNAL | MSG_DONTWAIT);
		else
			n = write(hc->out_fd, p, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && ++tries < 4 && (!hc->out_is_sock || out_wait(hc)))
			continue;
		if (n < 0 && errno == EPIPE && !hc->out_is_sock) {
			/* The reader of stdout is gone for good (needs SIGPIPE ignored). */
			hc->h->log(hc->in, CUB_LOG_WARN,
				   "console output closed; guest output discarded");
			hc->out_fd = -1;
			return;
		}
		if (n <= 0)
			goto drop;
		if (hc->out_stalled)
			hc->h->log_ratelimited(hc->in, CUB_LOG_WARN,
					       "console accepts output again; %llu bytes dropped",
					       (unsigned long long)hc->out_dropped);
		hc->out_stalled = false;
		hc->out_dropped = 0;
		hc->out_total += (uint64_t)n;
		p += n;
		len -= (size_t)n;
	}
	return;
drop:
	if (!hc->out_stalled)
		hc->h->log_ratelimited(hc->in, CUB_LOG_WARN,
				       "console output blocked; dropping guest output");
	hc->out_stalled = true;
	hc->out_dropped += len;
}

void hostcon_write(struct hostcon *hc, const void *buf, size_t len)
{
	pthread_mutex_lock(&hc->lock);
	out_bytes(hc, buf, len);
	pthread_mutex_unlock(&hc->lock);
}

/* ---- input ---- */

size_t hostcon_read(struct hostcon *hc, void *buf, size_t len)
{
	uint8_t *d = buf;
	size_t done = 0;

	pthread_mutex_lock(&hc->lock);
	while (done < len && hc->bl_count) {
		size_t run = hc->bl_size - hc->bl_head;

		if (run > hc->bl_count)
			run = hc->bl_count;
		if (run > len - done)
			run = len - done;
		memcpy(d + done, hc->backlog + hc->bl_head, run);
		hc->bl_head = (hc->bl_head + run) % hc->bl_size;
		hc->bl_count -= run;
		done += run;
	}
	pthread_mutex_unlock(&hc->lock);
	return done;
}

size_t hostcon_pending(struct hostcon *hc)
{
	size_t n;

	pthread_mutex_lock(&hc->lock);
	n = hc->bl_count;
	pthread_mutex_unlock(&hc->lock);
	return n;
}

void hostcon_reset(struct hostcon *hc, bool drop_input)
{
	pthread_mutex_lock(&hc->lock);
	hc->esc_pending = false;
	if (drop_input)
		hc->bl_head = hc->bl_count = 0;
	pthread_mutex_unlock(&hc->lock);
}

static bool bl_push(struct hostcon *hc, uint8_t b)
{
	if (hc->bl_count == hc->bl_size)
		return false;
	hc->backlog[(hc->bl_head + hc->bl_count++) % hc->bl_size] = b;
	return true;
}

/*
 * Queue host input, handling the Ctrl-A escape; true on Ctrl-A x. Escapes
 * are still seen once the backlog is full, so Ctrl-A x works even when the
 * guest has stopped reading. Lock held.
 */
static bool queue_input(struct hostcon *hc, const uint8_t *buf, size_t n, bool escapes)
{
	bool quit = false, full = false;

	for (size_t i = 0; i < n; i++) {
		uint8_t b = buf[i];

		if (escapes && hc->esc_pending) {
			hc->esc_pending = false;
			if (b == 'x' || b == 'X') {
				quit = true;
				continue;
			}
			if (b == 'h' || b == 'H' || b == '?') {
				hc->h->log(hc->in, CUB_LOG_INFO,
					   "escapes: Ctrl-A x exit, Ctrl-A a send Ctrl-A");
				continue;
			}
			if (b == 'a' || b == ESC_CHAR)
				b = ESC_CHAR;
			else
				full |= !bl_push(hc, ESC_CHAR);
		} else if (escapes && b == ESC_CHAR) {
			hc->esc_pending = true;
			continue;
		}
		full |= !bl_push(hc, b);
	}
	if (full)
		hc->h->log_ratelimited(hc->in, CUB_LOG_WARN,
				       "guest is not reading input; dropped some");
	return quit;
}

/* Move what fd has (level-triggered: one read per call) to the backlog and
 * tell the device. False at EOF or on a read error. Event loop. */
static bool input_take(struct hostcon *hc, int fd, bool escapes)
{
	uint8_t buf[IN_CHUNK];
	bool quit;
	ssize_t n;

	do
		n = read(fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return true;
	if (n <= 0)
		return false;
	pthread_mutex_lock(&hc->lock);
	quit = queue_input(hc, buf, (size_t)n, escapes);
	pthread_mutex_unlock(&hc->lock);
	if (hc->input)
		hc->input(hc->arg);
	if (quit) {
		hc->h->log(hc->in, CUB_LOG_INFO, "Ctrl-A x: terminating the VM");
		hc->h->vm_exit(hc->in, CUB_EXIT_STOPPED);
	}
	return true;
}

static void stdin_ready(void *arg)
{
	struct hostcon *hc = arg;

	if (hc->in_fd < 0 || input_take(hc, hc->in_fd, hc->in_escape))
		return;
	hc->h->log(hc->in, CUB_LOG_INFO, "stdin closed; guest input stops");
	hc->h->fd_unwatch(hc->in, hc->in_fd);
	hc->in_fd = -1;
}

/* ---- the socket's client ---- */

static void client_close(struct hostcon *hc)
{
	int fd;

	pthread_mutex_lock(&hc->lock);
	fd = hc->client_fd;
	hc->client_fd = hc->out_fd = -1;
	hc->out_stalled = false;
	pthread_mutex_unlock(&hc->lock);
	if (fd >= 0) {
		hc->h->fd_unwatch(hc->in, fd);
		close(fd);
	}
}

static void client_ready(void *arg)
{
	struct hostcon *hc = arg;

	if (hc->client_fd < 0 || input_take(hc, hc->client_fd, false))
		return;
	hc->h->log(hc->in, CUB_LOG_INFO, "console client disconnected");
	client_close(hc);
}

/* One client at a time: while one is connected, newcomers are turned away. */
static void listen_ready(void *arg)
{
	struct hostcon *hc = arg;
	int fd, err;

	fd = accept4(hc->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			hc->h->log_ratelimited(hc->in, CUB_LOG_WARN, "console accept: %s",
					       strerror(errno));
		return;
	}
	if (hc->client_fd >= 0) {
		hc->h->log_ratelimited(hc->in, CUB_LOG_WARN,
				       "console client refused: one is already connected");
		close(fd);
		return;
	}
	pthread_mutex_lock(&hc->lock);
	hc->client_fd = hc->out_fd = fd;
	hc->out_stalled = false;
	pthread_mutex_unlock(&hc->lock);
	err = hc->h->fd_watch(hc->in, fd, EPOLLIN, client_ready, hc);
	if (err) {
		hc->h->log(hc->in, CUB_LOG_WARN, "cannot watch console client: %s", strerror(-err));
		client_close(hc);
		return;
	}
	hc->h->log(hc->in, CUB_LOG_INFO, "console client connected");
}

/* ---- setup ---- */

static int setup_stdio(struct hostcon *hc)
{
	struct stat st;
	int err;

	if (fcntl(STDOUT_FILENO, F_GETFL) >= 0) { /* else no stdout at all: discard */
		hc->out_fd = STDOUT_FILENO;
		hc->out_direct = !fstat(STDOUT_FILENO, &st) && S_ISREG(st.st_mode);
	}
	if (!hc->cfg->input)
		return 0;
	if (isatty(STDIN_FILENO)) {
		err = hc->h->tty_raw(hc->in, STDIN_FILENO);
		if (err)
			hc->h->log(hc->in, CUB_LOG_WARN, "stdin terminal stays in cooked mode: %s",
				   strerror(-err));
		hc->in_escape = true;
	}
	hc->in_fd = STDIN_FILENO;
	err = hc->h->fd_watch(hc->in, STDIN_FILENO, EPOLLIN, stdin_ready, hc);
	if (err) {
		/* A regular file or /dev/null cannot be polled (EPERM): no input then. */
		hc->h->log(hc->in, err == -EPERM ? CUB_LOG_DEBUG : CUB_LOG_WARN,
			   "stdin cannot be watched (%s); no guest input", strerror(-err));
		hc->in_fd = -1;
	}
	return 0;
}

static int setup_file(struct hostcon *hc)
{
	const char *p = hc->cfg->path;
	struct stat st;

	/* O_NONBLOCK: a FIFO without a reader must not hang the open (ENXIO). */
	hc->file_fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0644);
	if (hc->file_fd < 0 && errno == ENXIO && !stat(p, &st) && S_ISFIFO(st.st_mode))
		return hc->h->fail(hc->in, -EINVAL,
				   "console file %s is a FIFO, not a regular file: refused", p);
	if (hc->file_fd < 0)
		return hc->h->fail(hc->in, -errno, "cannot open console file %s: %s", p,
				   strerror(errno));
	if (fstat(hc->file_fd, &st) < 0)
		return hc->h->fail(hc->in, -errno, "cannot stat console file %s: %s", p,
				   strerror(errno));
	if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
		return hc->h->fail(hc->in, -EINVAL,
				   "console file %s is not a regular file (a FIFO, socket or "
				   "directory is refused; use console = \"socket\" for a socket)", p);
	hc->out_fd = hc->file_fd;
	hc->out_direct = S_ISREG(st.st_mode); /* a tty or /dev/null: poll before writing */
	return 0;
}

/* Does something still accept connections on this path? */
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

static int setup_socket(struct hostcon *hc)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *p = hc->cfg->path;
	struct stat st;
	int err;

	if (strlen(p) >= sizeof(sa.sun_path))
		return hc->h->fail(hc->in, -ENAMETOOLONG, "console socket path too long: %s", p);
	memcpy(sa.sun_path, p, strlen(p) + 1);
	hc->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (hc->listen_fd < 0)
		return hc->h->fail(hc->in, -errno, "console socket: %s", strerror(errno));
	if (!lstat(p, &st)) {
		if (!S_ISSOCK(st.st_mode))
			return hc->h->fail(hc->in, -EEXIST,
					   "console socket path %s exists and is not a socket", p);
		if (socket_in_use(&sa))
			return hc->h->fail(hc->in, -EADDRINUSE,
					   "console socket %s is in use by another process", p);
		unlink(p); /* stale, from an earlier run */
	}
	if (bind(hc->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return hc->h->fail(hc->in, -errno, "cannot bind console socket %s: %s", p,
				   strerror(errno));
	hc->unlink_path = true;
	if (listen(hc->listen_fd, 1) < 0)
		return hc->h->fail(hc->in, -errno, "cannot listen on %s: %s", p, strerror(errno));
	hc->out_is_sock = true;
	err = hc->h->fd_watch(hc->in, hc->listen_fd, EPOLLIN, listen_ready, hc);
	if (err)
		return hc->h->fail(hc->in, err, "cannot watch console socket %s", p);
	return 0;
}

/* ---- lifecycle ---- */

int hostcon_check(struct cub_inst *in, const struct cub_host *h, const struct hostcon_cfg *cfg)
{
	if (cfg->console < HOSTCON_STDIO || cfg->console > HOSTCON_NONE)
		return h->fail(in, -EINVAL, "console: unknown choice %d", cfg->console);
	if ((cfg->console == HOSTCON_FILE || cfg->console == HOSTCON_SOCKET) &&
	    (!cfg->path || !cfg->path[0]))
		return h->fail(in, -EINVAL, "console = \"%s\" needs a non-empty path",
			       hostcon_choices[cfg->console]);
	return 0;
}

int hostcon_open(struct hostcon **hcp, struct cub_inst *in, const struct cub_host *h,
		 const struct hostcon_cfg *cfg, size_t backlog,
		 void (*input)(void *arg), void *arg)
{
	struct hostcon *hc;
	int err;

	*hcp = NULL;
	err = hostcon_check(in, h, cfg);
	if (err)
		return err;
	if (!backlog)
		return h->fail(in, -EINVAL, "console backlog must not be empty");
	hc = calloc(1, sizeof(*hc));
	if (!hc || !(hc->backlog = malloc(backlog))) {
		free(hc);
		return h->fail(in, -ENOMEM, "out of memory");
	}
	hc->in = in;
	hc->h = h;
	hc->cfg = cfg;
	hc->input = input;
	hc->arg = arg;
	hc->bl_size = backlog;
	hc->out_fd = hc->in_fd = hc->file_fd = hc->listen_fd = hc->client_fd = -1;
	pthread_mutex_init(&hc->lock, NULL);
	*hcp = hc; /* before any watch: @input may look hc up through the device */

	switch (cfg->console) {
	case HOSTCON_STDIO:
		err = setup_stdio(hc);
		break;
	case HOSTCON_FILE:
		err = setup_file(hc);
		break;
	case HOSTCON_SOCKET:
		err = setup_socket(hc);
		break;
	default:
		err = 0;
		break;
	}
	if (err) {
		hostcon_close(hc);
		*hcp = NULL;
	}
	return err;
}

/* The host drops an instance's watches before destroy; unwatching here as
 * well covers a create that fails after the console opened. */
void hostcon_close(struct hostcon *hc)
{
	if (!hc)
		return;
	if (hc->in_fd >= 0)
		hc->h->fd_unwatch(hc->in, hc->in_fd);
	if (hc->client_fd >= 0) {
		hc->h->fd_unwatch(hc->in, hc->client_fd);
		close(hc->client_fd);
	}
	if (hc->listen_fd >= 0) {
		hc->h->fd_unwatch(hc->in, hc->listen_fd);
		close(hc->listen_fd);
	}
	if (hc->unlink_path)
		unlink(hc->cfg->path);
	if (hc->file_fd >= 0)
		close(hc->file_fd);
	pthread_mutex_destroy(&hc->lock);
	free(hc->backlog);
	free(hc);
}
