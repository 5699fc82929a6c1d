/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vsockpeer: the host end of the vsock payload tests, speaking to a VM's
 * virtio-vsock device through its Unix sockets (Firecracker's hybrid
 * scheme: CONNECT lines on UDS, guest connections to UDS_<port>).
 *
 *   vsockpeer script UDS
 *
 * The far end of payloads/vsock.S, in lock step with it: listens on
 * UDS_5001 to UDS_5004 (then prints "listening"), and plays its
 * part of each stage, printing one line per stage. Exits 0 when every stage
 * went as the guest's should make it go, 1 (with the reason) otherwise.
 *
 *   vsockpeer flood UDS MIB
 *
 * The far end of payloads/hostile_vsock.S: accepts on UDS_5100 and writes
 * up to MIB MiB there without blocking, as fast as the socket takes them,
 * and accepts on UDS_5101 and never reads. Prints "flood: blocked after N
 * bytes" once no byte went for 2 s; on SIGTERM "flood: wrote N bytes",
 * then whether 5101 was closed by the far end, and exits 0.
 *
 * VSOCKPEER_TIMEOUT_S bounds each wait (default 240 s).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int timeout_ms = 240000;
static const char *uds;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void die(const char *fmt, ...)
{
	va_list ap;

	printf("vsockpeer: error: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	exit(1);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static unsigned char pat(unsigned long k)
{
	return (unsigned char)(k ^ (k >> 8));
}

static void addr_of(struct sockaddr_un *a, const char *path)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(a->sun_path))
		die("%s: path too long for a Unix socket", path);
	strcpy(a->sun_path, path);
}

static int listen_port(unsigned port)
{
	struct sockaddr_un a;
	char path[sizeof(a.sun_path) + 16];
	int fd;

	snprintf(path, sizeof(path), "%s_%u", uds, port);
	addr_of(&a, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64))
		die("%s: %s", path, strerror(errno));
	return fd;
}

/* Wait for @ev on @fd: 1, or 0 after @ms. */
static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int r;

	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR && !stop);
	return r > 0;
}

static int accept_port(int lfd, unsigned port)
{
	int fd;

	if (!wait_fd(lfd, POLLIN, timeout_ms))
		die("no connection to port %u in %d s", port, timeout_ms / 1000);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		die("accept on port %u: %s", port, strerror(errno));
	return fd;
}

/* A connection to UDS (it may not exist yet: cubicle is starting). */
static int connect_uds(void)
{
	struct sockaddr_un a;
	long long end = now_ms() + timeout_ms;
	int fd;

	addr_of(&a, uds);
	for (;;) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die("socket: %s", strerror(errno));
		if (!connect(fd, (struct sockaddr *)&a, sizeof(a)))
			return fd;
		close(fd);
		if (now_ms() > end)
			die("%s: cannot connect: %s", uds, strerror(errno));
		usleep(10000);
	}
}

static void put_all(int fd, const void *buf, size_t len, const char *what)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("%s: write: %s", what, strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* Read until EOF or an error (each wait bounded): bytes read, up to cap of
 * them kept in buf; *how: "EOF" or the error. */
static size_t read_to_end(int fd, unsigned char *buf, size_t cap, const char **how,
			  const char *what)
{
	static char err[64];
	size_t total = 0;
	unsigned char tmp[4096];

	for (;;) {
		ssize_t n;

		if (!wait_fd(fd, POLLIN, timeout_ms))
			die("%s: still open after %d s (%zu bytes read)", what, timeout_ms / 1000,
			    total);
		n = read(fd, tmp, sizeof(tmp));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, sizeof(err), "%s", n ? strerror(errno) : "EOF");
			*how = err;
			return total;
		}
		for (ssize_t i = 0; i < n; i++, total++)
			if (total < cap)
				buf[total] = tmp[i];
	}
}

/* Does buf hold pat(0..n-1) + add? */
static int is_pat(const unsigned char *buf, size_t n, unsigned add)
{
	for (size_t i = 0; i < n; i++)
		if (buf[i] != (unsigned char)(pat(i) + add))
			return 0;
	return 1;
}

/* What a report adds after the n bytes read into buf (of cap): whether
 * those it kept are the guest's pattern. */
static const char *pat_note(const unsigned char *buf, size_t n, size_t cap)
{
	return n && is_pat(buf, n < cap ? n : cap, 0) ? " (the guest's pattern)" : "";
}

/* A connection the guest makes to port (on listener l), number k: read it
 * to its end and say what came. */
static void drain_port(int l, unsigned port, int k, unsigned char *buf, size_t cap)
{
	char what[16];
	const char *how;
	size_t n;
	int c;

	snprintf(what, sizeof(what), "%u", port);
	c = accept_port(l, port);
	n = read_to_end(c, buf, cap, &how, what);
	close(c);
	say("%u #%d: %zu bytes%s and %s", port, k, n, pat_note(buf, n, cap), how);
}

/* One host client: send @line, then read until the device closes; returns
 * what came (NUL-terminated, at most cap - 1 bytes kept). */
static size_t client(const char *line, char *reply, size_t cap, const char **how)
{
	int fd = connect_uds();
	size_t n;

	put_all(fd, line, strlen(line), line);
	n = read_to_end(fd, (unsigned char *)reply, cap - 1, how, line);
	reply[n < cap - 1 ? n : cap - 1] = '\0';
	close(fd);
	return n;
}

static int script(void)
{
	static unsigned char buf[1 << 16];
	int l1 = listen_port(5001), l2 = listen_port(5002), l3 = listen_port(5003);
	int l4 = listen_port(5004), k4 = 0;
	char line[64], reply[256];
	const char *how;
	unsigned hport;
	size_t n;
	int c, h;

	say("listening");

	/* (a) the guest's connection to 5001: 100 bytes, echoed + 1, EOF */
	c = accept_port(l1, 5001);
	n = 0;
	while (n < 100) {
		ssize_t r;

		if (!wait_fd(c, POLLIN, timeout_ms))
			die("5001: %zu of 100 bytes in %d s", n, timeout_ms / 1000);
		r = read(c, buf + n, 100 - n);
		if (r <= 0)
			die("5001: ended after %zu of 100 bytes", n);
		n += (size_t)r;
	}
	if (!is_pat(buf, 100, 0))
		die("5001: the 100 bytes are not the guest's pattern");
	for (int i = 0; i < 100; i++)
		buf[i]++;
	put_all(c, buf, 100, "5001");
	n = read_to_end(c, buf, sizeof(buf), &how, "5001");
	close(c);
	say("5001: 100 bytes as sent, echoed +1; then %zu more bytes and %s", n, how);

	/* host-initiated to 6000: OK, 64 KiB at once, then the guest's RST */
	h = connect_uds();
	put_all(h, "CONNECT 6000\n", 13, "CONNECT 6000");
	n = 0;
	while (n < sizeof(line) - 1 && (n == 0 || line[n - 1] != '\n')) {
		ssize_t r;

		if (!wait_fd(h, POLLIN, timeout_ms))
			die("6000: no OK line in %d s", timeout_ms / 1000);
		r = read(h, line + n, 1);
		if (r <= 0)
			die("6000: closed before the OK line (%zu bytes)", n);
		n += (size_t)r;
	}
	line[n] = '\0';
	if (sscanf(line, "OK %u\n", &hport) != 1)
		die("6000: the reply is '%s', not OK <port>", line);
	say("6000: OK %u", hport);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pat(i);
	put_all(h, buf, sizeof(buf), "6000");
	n = read_to_end(h, buf, sizeof(buf), &how, "6000");
	close(h);
	say("6000: %zu bytes written; then %zu bytes read%s and %s", sizeof(buf), n,
	    pat_note(buf, n, sizeof(buf)), how);

	/* a line that is not CONNECT, and a CONNECT the guest refuses */
	n = client("BOGUS\n", reply, sizeof(reply), &how);
	say("BOGUS: %zu bytes of reply ('%s') and %s", n, reply, how);
	n = client("CONNECT 4294967296\n", reply, sizeof(reply), &how);
	say("CONNECT 2^32: %zu bytes of reply ('%s') and %s", n, reply, how);
	memset(line, 'A', sizeof(line) - 1);
	line[sizeof(line) - 1] = '\0';
	n = client(line, reply, sizeof(reply), &how);
	say("63 bytes, no newline: %zu bytes of reply ('%s') and %s", n, reply, how);
	n = client("CONNECT 6001\n", reply, sizeof(reply), &how);
	say("6001: %zu bytes of reply ('%s') and %s", n, reply, how);

	/* (e) three connections to 5002: the first two reset, the third 10 bytes */
	for (int k = 1; k <= 3; k++)
		drain_port(l2, 5002, k, buf, sizeof(buf));

	/* (f) 5001 again: reset under it; then after the reset 3 bytes */
	for (int k = 2; k <= 3; k++)
		drain_port(l1, 5001, k, buf, sizeof(buf));

	/* no malformed REQUEST may have reached 5003 */
	say("5003: %s", wait_fd(l3, POLLIN, 0) ? "a connection came" : "no connection");
	/* (g) the backlog of 5004 holds what the device connected (never accepted) */
	while (wait_fd(l4, POLLIN, 0) && (c = accept4(l4, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		close(c);
		k4++;
	}
	say("5004: %d connections came", k4);
	close(l1);
	close(l2);
	close(l3);
	close(l4);
	for (unsigned p = 5001; p <= 5004; p++) {
		snprintf(reply, sizeof(reply), "%s_%u", uds, p);
		unlink(reply);
	}
	say("script done");
	return 0;
}

static int flood(unsigned long mib)
{
	static unsigned char chunk[16 << 10];
	unsigned long long limit = (unsigned long long)mib << 20, total = 0;
	int la = listen_port(5100), lb = listen_port(5101), a = -1, b = -1;
	int blocked = 0, a_closed = 0, b_closed = 0;
	long long last = now_ms();
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: poll ends */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	for (size_t i = 0; i < sizeof(chunk); i++)
		chunk[i] = pat(i);
	say("listening");
	while (!stop && (a < 0 || b < 0)) {
		struct pollfd p[2] = { { .fd = la, .events = POLLIN }, { .fd = lb, .events = POLLIN } };

		if (poll(p, 2, 1000) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		if (a < 0 && (p[0].revents & POLLIN))
			a = accept4(la, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (b < 0 && (p[1].revents & POLLIN))
			b = accept4(lb, NULL, NULL, SOCK_CLOEXEC);
	}
	if (!stop)
		say("flood: both connections accepted");
	last = now_ms();
	while (!stop) {
		struct pollfd p[2] = { { .fd = a_closed ? -1 : a, .events = POLLOUT },
				       { .fd = b_closed ? -1 : b, .events = POLLRDHUP } };

		if (poll(p, 2, 100) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		if (!b_closed && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			b_closed = 1;
			say("flood: 5101 closed by the far end");
		}
		if (!a_closed && total < limit && (p[0].revents & (POLLOUT | POLLHUP | POLLERR))) {
			size_t want = limit - total < sizeof(chunk) ? (size_t)(limit - total)
								    : sizeof(chunk);
			ssize_t n = send(a, chunk, want, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (n > 0) {
				total += (unsigned long long)n;
				last = now_ms();
				if (total == limit)
					say("flood: all %llu bytes written", total);
			} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				a_closed = 1;
				say("flood: 5100: %s after %llu bytes", strerror(errno), total);
			}
		}
		if (!blocked && !a_closed && total < limit && now_ms() - last >= 2000) {
			blocked = 1;
			say("flood: blocked after %llu bytes", total);
		}
	}
	say("flood: wrote %llu bytes; 5101 %s", total, b_closed ? "closed" : "open");
	return 0;
}

int main(int argc, char **argv)
{
	const char *t = getenv("VSOCKPEER_TIMEOUT_S");

	if (t && atoi(t) > 0)
		timeout_ms = atoi(t) * 1000;
	signal(SIGPIPE, SIG_IGN);
	if (argc == 3 && !strcmp(argv[1], "script")) {
		uds = argv[2];
		return script();
	}
	if (argc == 4 && !strcmp(argv[1], "flood")) {
		uds = argv[2];
		return flood(strtoul(argv[3], NULL, 0));
	}
	fprintf(stderr, "usage: vsockpeer script UDS | vsockpeer flood UDS MIB\n");
	return 2;
}
