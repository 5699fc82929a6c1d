/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for a VM's vsock socket in tests without a VM: listens on a Unix
 * socket, answers "CONNECT <port>\n" with "OK <n>\n" as the virtio-vsock
 * device does, then pipes the connection to an agent's Unix socket. Anything
 * else as the first line, another port or no agent: the connection is closed,
 * as the device closes it. AGENT_PATH canned:FILE instead answers every
 * request (after reading it) with FILE's bytes as they are, then closes: a
 * hostile or broken agent.
 *   usage: vsock_shim LISTEN_PATH AGENT_PATH|canned:FILE [PORT]
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -1;
	strcpy(sa->sun_path, path);
	return 0;
}

/* Copy what one side has to the other; 0 at its end (then shut down the
 * other side's writing), -1 on an error. */
static int pump(int from, int to)
{
	char buf[65536];
	ssize_t n = read(from, buf, sizeof(buf));

	if (n < 0)
		return errno == EINTR ? 1 : -1;
	if (n == 0) {
		shutdown(to, SHUT_WR);
		return 0;
	}
	for (ssize_t off = 0; off < n;) {
		ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		off += w;
	}
	return 1;
}

/* Read one request (headers, then Content-Length bytes), answer with the
 * file, close. */
static void canned(int c, const char *file)
{
	static char req[65536];
	size_t n = 0;
	char *end = NULL, *cl;
	long body = 0;
	int fd;

	while (!end && n < sizeof(req) - 1) {
		ssize_t r = read(c, req + n, sizeof(req) - 1 - n);

		if (r <= 0)
			return;
		n += (size_t)r;
		req[n] = '\0';
		end = strstr(req, "\r\n\r\n");
	}
	if (!end)
		return;
	cl = strcasestr(req, "content-length:");
	if (cl && cl < end)
		body = strtol(cl + 15, NULL, 10);
	for (long left = body - (long)(n - (size_t)(end + 4 - req)); left > 0;) {
		ssize_t r = read(c, req, sizeof(req));

		if (r <= 0)
			return;
		left -= r;
	}
	fd = open(file, O_RDONLY);
	if (fd < 0)
		return;
	for (;;) {
		ssize_t r = read(fd, req, sizeof(req));

		if (r <= 0 || write(c, req, (size_t)r) != r)
			break;
	}
	close(fd);
}

static void serve(int c, const char *agent, const char *want)
{
	struct sockaddr_un sa;
	char line[33];
	size_t n = 0;
	int a;

	/* The line a byte at a time: what follows it is the agent's. */
	while (n < sizeof(line) - 1) {
		if (read(c, line + n, 1) != 1)
			return;
		if (line[n] == '\n')
			break;
		n++;
	}
	line[n] = '\0';
	if (strncmp(line, "CONNECT ", 8) || strcmp(line + 8, want))
		return;
	if (!strncmp(agent, "canned:", 7)) {
		if (write(c, "OK 1073741824\n", 14) == 14)
			canned(c, agent + 7);
		return;
	}
	a = socket(AF_UNIX, SOCK_STREAM, 0);
	if (a < 0 || addr(&sa, agent) || connect(a, (struct sockaddr *)&sa, sizeof(sa)))
		return;
	if (write(c, "OK 1073741824\n", 14) != 14)
		return;
	int fds[2] = { c, a }, open_dirs = 2;
	struct pollfd p[2] = { { .fd = c, .events = POLLIN }, { .fd = a, .events = POLLIN } };

	while (open_dirs) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			int r = pump(fds[i], fds[1 - i]);

			if (r < 0)
				return;
			if (r == 0) {
				p[i].fd = -1;
				open_dirs--;
			}
		}
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa;
	int l;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: vsock_shim LISTEN_PATH AGENT_PATH [PORT]\n");
		return 2;
	}
	signal(SIGCHLD, SIG_IGN); /* children reaped by the kernel */
	l = socket(AF_UNIX, SOCK_STREAM, 0);
	unlink(argv[1]);
	if (l < 0 || addr(&sa, argv[1]) || bind(l, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(l, 64)) {
		fprintf(stderr, "vsock_shim: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	for (;;) {
		int c = accept(l, NULL, NULL);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return 1;
		}
		pid_t pid = fork();

		if (pid == 0) {
			close(l);
			serve(c, argv[2], argc > 3 ? argv[3] : "49983");
			_exit(0);
		}
		close(c);
	}
}
