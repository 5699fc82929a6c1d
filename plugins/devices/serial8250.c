/* SPDX-License-Identifier: Apache-2.0 */
/* The 16550A-compatible UART device plugin and its host console (stdio, file, socket). */
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

/*
 * Consoles:
 *   stdio   guest output to stdout; with input = true, host stdin to the guest.
 *           On a terminal stdin goes raw (the host restores it) and, as in
 *           QEMU, Ctrl-A is an escape: Ctrl-A x ends the VM (status 0),
 *           Ctrl-A a or Ctrl-A Ctrl-A sends one Ctrl-A, Ctrl-A h logs help.
 *   file    guest output appended to path; no input.
 *   socket  listen on the Unix socket path (a stale socket is replaced, a
 *           live one or another file type is refused); one client at a time
 *           gets the output and feeds the input. Without a client, output
 *           is discarded.
 *   none    output discarded, no input.
 * Transmission is instantaneous (THRE is always set). Output never blocks a
 * vCPU for long: a console that stops reading costs one OUT_WAIT_MS wait,
 * then output is dropped (with a rate-limited warning) until it reads again.
 * Host input waits in a backlog and enters the receive FIFO as the guest
 * drains it, so pastes are not lost to overruns.
 */

/* Register offsets; 0 and 1 are the divisor latch while LCR.DLAB is set. */
enum {
	UART_RX = 0, UART_TX = 0, UART_DLL = 0,
	UART_IER = 1, UART_DLM = 1,
	UART_IIR = 2, UART_FCR = 2,
	UART_LCR = 3, UART_MCR = 4, UART_LSR = 5, UART_MSR = 6, UART_SCR = 7,
};

#define IER_RDI		0x01	/* received data available */
#define IER_THRI	0x02	/* transmitter holding register empty */
#define IER_RLSI	0x04	/* receiver line status */
#define IER_MSI		0x08	/* modem status */

#define IIR_NO_INT	0x01
#define IIR_MSI		0x00
#define IIR_THRI	0x02
#define IIR_RDI		0x04
#define IIR_RLSI	0x06
#define IIR_FIFO_BITS	0xc0	/* "FIFOs enabled", as a 16550A reports them */

#define FCR_ENABLE	0x01
#define FCR_CLEAR_RX	0x02
#define FCR_CLEAR_TX	0x04

#define LCR_DLAB	0x80

#define MCR_DTR		0x01
#define MCR_RTS		0x02
#define MCR_OUT1	0x04
#define MCR_OUT2	0x08
#define MCR_LOOP	0x10

#define LSR_DR		0x01
#define LSR_OE		0x02
#define LSR_THRE	0x20
#define LSR_TEMT	0x40

#define MSR_DCTS	0x01
#define MSR_DDSR	0x02
#define MSR_TERI	0x04
#define MSR_DDCD	0x08
#define MSR_DELTA	0x0f
#define MSR_CTS		0x10
#define MSR_DSR		0x20
#define MSR_RI		0x40
#define MSR_DCD		0x80
/* With nothing attached to the modem lines we report a ready peer. */
#define MSR_IDLE	(MSR_DCD | MSR_DSR | MSR_CTS)

#define FIFO_LEN	16	/* the 16550A's receive FIFO */
#define BACKLOG_LEN	4096	/* host input not yet "on the wire" */
#define OUT_WAIT_MS	50	/* longest a vCPU waits for a blocked console */
#define ESC_CHAR	0x01	/* Ctrl-A, as in QEMU's -nographic */

enum console_kind { CON_STDIO, CON_FILE, CON_SOCKET, CON_NONE };

static const char *const console_choices[] = { "stdio", "file", "socket", "none", NULL };

struct serial_cfg {
	int console;
	const char *path;
	bool input;
};

struct ring {
	unsigned head, count, size;
	uint8_t *buf;
};

struct serial {
	struct cub_inst *in;
	const struct cub_host *h;
	const struct serial_cfg *cfg;
	int irq;

	/* lock guards everything below: vCPU threads and the event loop. */
	pthread_mutex_t lock;
	uint8_t ier, fcr, lcr, mcr, lsr_err, msr, scr, dll, dlm;
	bool thri_pending, irq_level;
	uint8_t fifo_buf[FIFO_LEN];
	struct ring fifo;    /* what the guest sees (capacity 1 with FIFOs off) */
	struct ring backlog; /* host input waiting for room in fifo */

	int out_fd;          /* -1: output discarded */
	bool out_is_sock, out_direct, out_stalled;
	uint64_t out_dropped;
	int in_fd;           /* stdin while watched, else -1 */
	bool in_escape, esc_pending;
	int file_fd, listen_fd, client_fd;
	bool unlink_path;
};

static bool ring_push(struct ring *r, uint8_t c)
{
	if (r->count == r->size)
		return false;
	r->buf[(r->head + r->count++) % r->size] = c;
	return true;
}

static int ring_pop(struct ring *r)
{
	uint8_t c;

	if (!r->count)
		return -1;
	c = r->buf[r->head];
	r->head = (r->head + 1) % r->size;
	r->count--;
	return c;
}

static void ring_clear(struct ring *r)
{
	r->head = r->count = 0;
}

static unsigned fifo_capacity(const struct serial *s)
{
	return (s->fcr & FCR_ENABLE) ? FIFO_LEN : 1;
}

/* Move host input into the receive FIFO while it has room. Lock held. */
static void fifo_refill(struct serial *s)
{
	if (s->mcr & MCR_LOOP)
		return; /* the serial input is disconnected in loopback */
	while (s->fifo.count < fifo_capacity(s) && s->backlog.count)
		ring_push(&s->fifo, (uint8_t)ring_pop(&s->backlog));
}

/* A byte arriving at the receiver; a full FIFO overruns. Lock held. */
static void rx_byte(struct serial *s, uint8_t c)
{
	if (s->fifo.count < fifo_capacity(s))
		ring_push(&s->fifo, c);
	else
		s->lsr_err |= LSR_OE;
}

static uint8_t lsr_value(const struct serial *s)
{
	/* Transmission is instantaneous: the holding register is always empty. */
	return s->lsr_err | LSR_THRE | LSR_TEMT | (s->fifo.count ? LSR_DR : 0);
}

static uint8_t iir_id(const struct serial *s)
{
	if ((s->ier & IER_RLSI) && s->lsr_err)
		return IIR_RLSI;
	if ((s->ier & IER_RDI) && s->fifo.count)
		return IIR_RDI;
	if ((s->ier & IER_THRI) && s->thri_pending)
		return IIR_THRI;
	if ((s->ier & IER_MSI) && (s->msr & MSR_DELTA))
		return IIR_MSI;
	return IIR_NO_INT;
}

/* Drive the line to "any enabled interrupt pending". Lock held, so the
 * levels reach the host in the order the state changed. */
static void irq_update(struct serial *s)
{
	bool level = iir_id(s) != IIR_NO_INT;

	if (level == s->irq_level)
		return;
	s->irq_level = level;
	if (s->irq >= 0)
		s->h->irq_set(s->in, (unsigned)s->irq, level);
}

/* The modem status inputs: looped back from MCR, or an idle ready peer. */
static void msr_update(struct serial *s)
{
	uint8_t st, old = s->msr;

	if (s->mcr & MCR_LOOP) {
		st = (s->mcr & MCR_RTS ? MSR_CTS : 0) | (s->mcr & MCR_DTR ? MSR_DSR : 0) |
		     (s->mcr & MCR_OUT1 ? MSR_RI : 0) | (s->mcr & MCR_OUT2 ? MSR_DCD : 0);
	} else {
		st = MSR_IDLE;
	}
	s->msr = st | (old & MSR_DELTA);
	if ((st ^ old) & MSR_CTS)
		s->msr |= MSR_DCTS;
	if ((st ^ old) & MSR_DSR)
		s->msr |= MSR_DDSR;
	if ((st ^ old) & MSR_DCD)
		s->msr |= MSR_DDCD;
	if ((old & MSR_RI) && !(st & MSR_RI))
		s->msr |= MSR_TERI;
}

static void regs_reset(struct serial *s)
{
	s->ier = s->fcr = s->lcr = s->mcr = s->lsr_err = s->scr = 0;
	s->dll = 0x0c; /* 9600 baud, what firmware usually leaves behind */
	s->dlm = 0;
	s->thri_pending = false;
	s->msr = MSR_IDLE;
	ring_clear(&s->fifo);
	ring_clear(&s->backlog);
	s->esc_pending = false;
}

/* ---- output ---- */

static bool out_wait(struct serial *s)
{
	struct pollfd p = { .fd = s->out_fd, .events = POLLOUT };
	int n;

	do
		n = poll(&p, 1, s->out_stalled ? 0 : OUT_WAIT_MS);
	while (n < 0 && errno == EINTR);
	return n > 0 && (p.revents & POLLOUT);
}

/*
 * Write one byte of guest output without letting a stuck reader hang the
 * vCPU: wait at most OUT_WAIT_MS once, then drop bytes (and stop waiting)
 * until the console accepts data again. Lock held.
 */
static void out_byte(struct serial *s, uint8_t c)
{
	ssize_t n;
	int tries = 0;

	if (s->out_fd < 0)
		return;
	for (;;) {
		/* Waiting first keeps a blocking tty or pipe from blocking us. */
		if (!s->out_direct && !s->out_is_sock && !out_wait(s))
			goto drop;
		if (s->out_is_sock)
			n = send(s->out_fd, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		else
			n = write(s->out_fd, &c, 1);
		if (n == 1)
			break;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && ++tries < 4 && (!s->out_is_sock || out_wait(s)))
			continue;
		if (n < 0 && errno == EPIPE && !s->out_is_sock) {
			/* The reader of stdout is gone for good (needs SIGPIPE ignored). */
			s->h->log(s->in, CUB_LOG_WARN, "console output closed; guest output discarded");
			s->out_fd = -1;
			return;
		}
		goto drop;
	}
	if (s->out_stalled)
		s->h->log_ratelimited(s->in, CUB_LOG_WARN,
				      "console accepts output again; %llu bytes dropped",
				      (unsigned long long)s->out_dropped);
	s->out_stalled = false;
	s->out_dropped = 0;
	return;
drop:
	if (!s->out_stalled)
		s->h->log_ratelimited(s->in, CUB_LOG_WARN,
				      "console output blocked; dropping guest output");
	s->out_stalled = true;
	s->out_dropped++;
}

/* ---- guest register access ---- */

static uint8_t serial_read(struct serial *s, unsigned off)
{
	uint8_t v, id;
	int c;

	switch (off) {
	case UART_RX:
		if (s->lcr & LCR_DLAB)
			return s->dll;
		c = ring_pop(&s->fifo);
		fifo_refill(s);
		return c < 0 ? 0 : (uint8_t)c;
	case UART_IER:
		return (s->lcr & LCR_DLAB) ? s->dlm : s->ier;
	case UART_IIR:
		id = iir_id(s);
		if (id == IIR_THRI)
			s->thri_pending = false;
		return id | ((s->fcr & FCR_ENABLE) ? IIR_FIFO_BITS : 0);
	case UART_LCR:
		return s->lcr;
	case UART_MCR:
		return s->mcr;
	case UART_LSR:
		v = lsr_value(s);
		s->lsr_err = 0;
		return v;
	case UART_MSR:
		v = s->msr;
		s->msr &= ~MSR_DELTA;
		return v;
	default:
		return s->scr;
	}
}

static void serial_write(struct serial *s, unsigned off, uint8_t v)
{
	uint8_t old;

	switch (off) {
	case UART_TX:
		if (s->lcr & LCR_DLAB) {
			s->dll = v;
		} else {
			if (s->mcr & MCR_LOOP)
				rx_byte(s, v);
			else
				out_byte(s, v);
			s->thri_pending = true; /* sent at once: THR empty again */
		}
		break;
	case UART_IER:
		if (s->lcr & LCR_DLAB) {
			s->dlm = v;
			break;
		}
		old = s->ier;
		s->ier = v & 0x0f;
		/* Enabling THRI while THR is empty interrupts at once, as the
		 * 16550 does; Linux's startup probes exactly this. */
		if ((s->ier & IER_THRI) && !(old & IER_THRI))
			s->thri_pending = true;
		break;
	case UART_FCR:
		if ((v ^ s->fcr) & FCR_ENABLE)
			ring_clear(&s->fifo);
		if (v & FCR_CLEAR_RX)
			ring_clear(&s->fifo);
		s->fcr = v & 0xc9; /* enable, DMA mode, trigger level */
		fifo_refill(s);
		break;
	case UART_LCR:
		s->lcr = v;
		break;
	case UART_MCR:
		s->mcr = v & 0x1f;
		msr_update(s);
		fifo_refill(s);
		break;
	case UART_LSR:
	case UART_MSR:
		break; /* factory test registers: writes ignored */
	default:
		s->scr = v;
		break;
	}
}

static void serial_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct serial *s = priv;
	uint8_t *b = data;

	if (!is_write)
		memset(b, 0, len);
	if (off >= 8 || !len)
		return;
	pthread_mutex_lock(&s->lock);
	/* The registers are bytes; a wider access uses its low byte. */
	if (is_write)
		serial_write(s, (unsigned)off, b[0]);
	else
		b[0] = serial_read(s, (unsigned)off);
	irq_update(s);
	pthread_mutex_unlock(&s->lock);
}

/* ---- host input ---- */

/*
 * Queue host input for the guest; handles the Ctrl-A escape on a tty.
 * Lock held. Returns true when the user asked to quit (Ctrl-A x): the caller
 * calls vm_exit after dropping the lock.
 */
static bool host_input(struct serial *s, const uint8_t *buf, size_t n, bool escapes)
{
	bool quit = false;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = buf[i];

		if (escapes && s->esc_pending) {
			s->esc_pending = false;
			if (c == 'x' || c == 'X') {
				quit = true;
				continue;
			}
			if (c == 'h' || c == 'H' || c == '?') {
				s->h->log(s->in, CUB_LOG_INFO,
					  "escapes: Ctrl-A x exit, Ctrl-A a send Ctrl-A");
				continue;
			}
			if (c == 'a' || c == ESC_CHAR) {
				c = ESC_CHAR;
			} else if (!ring_push(&s->backlog, ESC_CHAR)) {
				goto full;
			}
		} else if (escapes && c == ESC_CHAR) {
			s->esc_pending = true;
			continue;
		}
		if (!ring_push(&s->backlog, c))
			goto full;
	}
	goto out;
full:
	s->h->log_ratelimited(s->in, CUB_LOG_WARN, "guest is not reading input; dropped some");
out:
	fifo_refill(s);
	irq_update(s);
	return quit;
}

/* Read what the fd has (level-triggered: once per call). 0 bytes is EOF. */
static ssize_t input_read(struct serial *s, int fd, uint8_t *buf, size_t len)
{
	ssize_t n;

	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n;
}

static void stdin_ready(void *arg)
{
	struct serial *s = arg;
	uint8_t buf[256];
	bool quit;
	ssize_t n;

	if (s->in_fd < 0)
		return;
	n = input_read(s, s->in_fd, buf, sizeof(buf));
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		s->h->log(s->in, CUB_LOG_INFO, "stdin closed; guest input stops");
		s->h->fd_unwatch(s->in, s->in_fd);
		s->in_fd = -1;
		return;
	}
	pthread_mutex_lock(&s->lock);
	quit = host_input(s, buf, (size_t)n, s->in_escape);
	pthread_mutex_unlock(&s->lock);
	if (quit) {
		s->h->log(s->in, CUB_LOG_INFO, "Ctrl-A x: terminating the VM");
		s->h->vm_exit(s->in, 0);
	}
}

static void client_close(struct serial *s)
{
	int fd;

	pthread_mutex_lock(&s->lock);
	fd = s->client_fd;
	s->client_fd = -1;
	s->out_fd = -1;
	s->out_stalled = false;
	pthread_mutex_unlock(&s->lock);
	if (fd >= 0) {
		s->h->fd_unwatch(s->in, fd);
		close(fd);
	}
}

static void client_ready(void *arg)
{
	struct serial *s = arg;
	uint8_t buf[256];
	ssize_t n;

	if (s->client_fd < 0)
		return;
	n = input_read(s, s->client_fd, buf, sizeof(buf));
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		s->h->log(s->in, CUB_LOG_INFO, "console client disconnected");
		client_close(s);
		return;
	}
	pthread_mutex_lock(&s->lock);
	host_input(s, buf, (size_t)n, false);
	pthread_mutex_unlock(&s->lock);
}

/* One client at a time: while one is connected, newcomers are turned away. */
static void listen_ready(void *arg)
{
	struct serial *s = arg;
	int fd, err;

	fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			s->h->log_ratelimited(s->in, CUB_LOG_WARN, "console accept: %s",
					      strerror(errno));
		return;
	}
	if (s->client_fd >= 0) {
		s->h->log_ratelimited(s->in, CUB_LOG_WARN,
				      "console client refused: one is already connected");
		close(fd);
		return;
	}
	pthread_mutex_lock(&s->lock);
	s->client_fd = fd;
	s->out_fd = fd;
	s->out_stalled = false;
	pthread_mutex_unlock(&s->lock);
	err = s->h->fd_watch(s->in, fd, EPOLLIN, client_ready, s);
	if (err) {
		s->h->log(s->in, CUB_LOG_WARN, "cannot watch console client: %s", strerror(-err));
		client_close(s);
		return;
	}
	s->h->log(s->in, CUB_LOG_INFO, "console client connected");
}

/* ---- console setup ---- */

static int setup_stdio(struct serial *s)
{
	int fl, err;

	s->out_fd = STDOUT_FILENO;
	fl = fcntl(STDOUT_FILENO, F_GETFL);
	if (fl < 0) {
		s->out_fd = -1; /* no stdout at all: discard */
	} else {
		struct stat st;

		s->out_direct = !fstat(STDOUT_FILENO, &st) && S_ISREG(st.st_mode);
	}
	if (!s->cfg->input)
		return 0;
	if (isatty(STDIN_FILENO)) {
		err = s->h->tty_raw(s->in, STDIN_FILENO);
		if (err)
			s->h->log(s->in, CUB_LOG_WARN, "stdin terminal stays in cooked mode: %s",
				  strerror(-err));
		s->in_escape = true;
	}
	s->in_fd = STDIN_FILENO;
	err = s->h->fd_watch(s->in, STDIN_FILENO, EPOLLIN, stdin_ready, s);
	if (err) {
		/* A regular file or /dev/null cannot be polled (EPERM): no input then. */
		s->h->log(s->in, err == -EPERM ? CUB_LOG_DEBUG : CUB_LOG_WARN,
			  "stdin cannot be watched (%s); no guest input", strerror(-err));
		s->in_fd = -1;
	}
	return 0;
}

static int setup_file(struct serial *s)
{
	s->file_fd = open(s->cfg->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (s->file_fd < 0)
		return s->h->fail(s->in, -errno, "cannot open console file %s: %s",
				  s->cfg->path, strerror(errno));
	s->out_fd = s->file_fd;
	s->out_direct = true;
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

static int setup_socket(struct serial *s)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *p = s->cfg->path;
	struct stat st;
	int err;

	if (strlen(p) >= sizeof(sa.sun_path))
		return s->h->fail(s->in, -ENAMETOOLONG, "console socket path too long: %s", p);
	memcpy(sa.sun_path, p, strlen(p) + 1);
	s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0)
		return s->h->fail(s->in, -errno, "console socket: %s", strerror(errno));
	if (!lstat(p, &st)) {
		if (!S_ISSOCK(st.st_mode))
			return s->h->fail(s->in, -EEXIST,
					  "console socket path %s exists and is not a socket", p);
		if (socket_in_use(&sa))
			return s->h->fail(s->in, -EADDRINUSE,
					  "console socket %s is in use by another process", p);
		unlink(p); /* stale, from an earlier run */
	}
	if (bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return s->h->fail(s->in, -errno, "cannot bind console socket %s: %s", p,
				  strerror(errno));
	s->unlink_path = true;
	if (listen(s->listen_fd, 1) < 0)
		return s->h->fail(s->in, -errno, "cannot listen on %s: %s", p, strerror(errno));
	s->out_is_sock = true;
	err = s->h->fd_watch(s->in, s->listen_fd, EPOLLIN, listen_ready, s);
	if (err)
		return s->h->fail(s->in, err, "cannot watch console socket %s", p);
	return 0;
}

/* ---- lifecycle ---- */

static void serial_free(struct serial *s)
{
	if (s->client_fd >= 0)
		close(s->client_fd);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->unlink_path)
		unlink(s->cfg->path);
	if (s->file_fd >= 0)
		close(s->file_fd);
	pthread_mutex_destroy(&s->lock);
	free(s->backlog.buf);
	free(s);
}

static int serial_create(struct cub_inst *in, const struct cub_host *h, const void *cfgp,
			 void **priv)
{
	const struct serial_cfg *cfg = cfgp;
	struct serial *s;
	struct cub_region r = {
		.want = CUB_BUS_ANY, .class = "uart", .len = 8, .io = serial_io,
	};
	int err;

	if (cfg->console < CON_STDIO || cfg->console > CON_NONE)
		return h->fail(in, -EINVAL, "console: unknown choice %d", cfg->console);
	if ((cfg->console == CON_FILE || cfg->console == CON_SOCKET) &&
	    (!cfg->path || !cfg->path[0]))
		return h->fail(in, -EINVAL, "console = \"%s\" needs a non-empty path",
			       console_choices[cfg->console]);
	s = calloc(1, sizeof(*s));
	if (!s)
		return h->fail(in, -ENOMEM, "out of memory");
	s->backlog.buf = malloc(BACKLOG_LEN);
	if (!s->backlog.buf) {
		free(s);
		return h->fail(in, -ENOMEM, "out of memory");
	}
	s->backlog.size = BACKLOG_LEN;
	s->fifo.buf = s->fifo_buf;
	s->fifo.size = FIFO_LEN;
	s->in = in;
	s->h = h;
	s->cfg = cfg;
	s->irq = -1;
	s->out_fd = s->in_fd = s->file_fd = s->listen_fd = s->client_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	regs_reset(s);

	r.priv = s;
	err = h->region_add(in, &r);
	if (err)
		goto fail;
	s->irq = r.irq;

	switch (cfg->console) {
	case CON_STDIO:
		err = setup_stdio(s);
		break;
	case CON_FILE:
		err = setup_file(s);
		break;
	case CON_SOCKET:
		err = setup_socket(s);
		break;
	default:
		err = 0;
		break;
	}
	if (err)
		goto fail;
	*priv = s;
	return 0;
fail:
	/* fd watches of a failed instance are dropped by the host. */
	serial_free(s);
	return err;
}

static void serial_destroy(void *priv)
{
	serial_free(priv);
}

static int serial_reset(void *priv)
{
	struct serial *s = priv;

	pthread_mutex_lock(&s->lock);
	regs_reset(s);
	irq_update(s);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static const struct cub_param serial_params[] = {
	{ .name = "console", .type = CUB_P_ENUM, .offset = offsetof(struct serial_cfg, console),
	  .def = "stdio", .choices = console_choices,
	  .doc = "where the UART goes: stdio (Ctrl-A x quits), file, socket (Unix, listening) or none" },
	{ .name = "path", .type = CUB_P_STR, .offset = offsetof(struct serial_cfg, path),
	  .def = "", .doc = "file to append output to, or Unix socket to listen on" },
	{ .name = "input", .type = CUB_P_BOOL, .offset = offsetof(struct serial_cfg, input),
	  .def = "true", .doc = "stdio: feed host stdin to the guest (raw mode on a tty)" },
};

static const struct cub_device_ops serial_ops = {
	.create = serial_create,
	.destroy = serial_destroy,
	.reset = serial_reset,
};

CUB_PLUGIN({
	.abi_major = CUB_ABI_MAJOR,
	.abi_minor = CUB_ABI_MINOR,
	.size = sizeof(struct cub_plugin),
	.kind = CUB_KIND_DEVICE,
	.name = "serial8250",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "16550A-compatible UART with a stdio, file or socket console",
	.cfg_size = sizeof(struct serial_cfg),
	.params = serial_params,
	.n_params = CUB_ARRAY_SIZE(serial_params),
	.ops = &serial_ops,
});
