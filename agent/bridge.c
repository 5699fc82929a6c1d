/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A guest TCP port reached through the agent: `GET /cubicle/port?port=N`
 * with `Upgrade: cubicle-port` (and the access token) is answered 101 once
 * 127.0.0.1:N (else [::1]:N) took the connection, and from then on the
 * connection carries that port's bytes both ways (each side's end passed
 * on as a half close). This is how `cubicle serve` forwards a request for a
 * sandbox's port (a web server the sandbox runs): the host reaches the
 * guest only over vsock, where a server listening on TCP is not.
 *
 * Each bridge is a child process of its own that copies with blocking
 * reads, so the event loop never carries its traffic; the agent reaps it as
 * any child (waitpid(-1) in process.c), and has at most BRIDGE_MAX open.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "http.h"
#include "iov.h"

#define BRIDGE_BUF (64u << 10)
#define BRIDGE_MAX 256 /* bridges open at once (each a process) */

static pid_t bridges[BRIDGE_MAX];
static unsigned n_bridges;

void bridge_reaped(pid_t pid)
{
	for (unsigned i = 0; i < n_bridges; i++)
		if (bridges[i] == pid) {
			bridges[i] = bridges[--n_bridges];
			return;
		}
}

/* 127.0.0.1:@port, else [::1]:@port: a connected socket, or -errno. */
static int tcp_local(unsigned port)
{
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), e;

	if (fd >= 0 && !connect(fd, (struct sockaddr *)&s4, sizeof(s4)))
		return fd;
	e = errno;
	if (fd >= 0)
		close(fd);
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && !connect(fd, (struct sockaddr *)&s6, sizeof(s6)))
		return fd;
	if (fd >= 0)
		close(fd);
	return -e; /* the IPv4 error: the usual case */
}

/* Copies both ways until both ends are done: the child's whole life. */
static void pump(int a, int b)
{
	char *buf = malloc(BRIDGE_BUF);
	bool open_in[2] = { true, true }; /* a -> b, b -> a */
	int fds[2] = { a, b };

	if (!buf)
		return;
	while (open_in[0] || open_in[1]) {
		struct pollfd pf[2] = { { .fd = open_in[0] ? a : -1, .events = POLLIN },
					{ .fd = open_in[1] ? b : -1, .events = POLLIN } };

		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			ssize_t n;

			if (!open_in[i] || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = recv(fds[i], buf, BRIDGE_BUF, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 0) { /* its end: passed on */
				open_in[i] = false;
				shutdown(fds[1 - i], SHUT_WR);
				continue;
			}
			if (n < 0 || fullio_write(fds[1 - i], buf, (size_t)n)) {
				free(buf); /* a side broke: the bridge ends */
				return;
			}
		}
	}
	free(buf);
}

/* The child: answers on @cfd (the vsock connection, with @rest already
 * read past the request's head) and bridges it to the port. */
static void bridge_child(int cfd, unsigned port, const char *rest, size_t rest_len)
{
	static const char up[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: cubicle-port\r\n"
				 "Connection: Upgrade\r\n\r\n";
	int tfd = tcp_local(port);

	if (tfd < 0) {
		char why[160], head[200];
		json_t *j;
		char *body;
		int n;

		snprintf(why, sizeof(why), "nothing listens on port %u in the sandbox (127.0.0.1 and ::1): %s",
			 port, strerror(-tfd));
		j = json_pack("{s:i,s:s}", "code", 502, "message", why);
		body = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
		if (!body)
			return;
		n = snprintf(head, sizeof(head), "HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\n"
						 "Content-Length: %zu\r\nConnection: close\r\n\r\n", strlen(body));
		if (!fullio_write(cfd, head, (size_t)n))
			fullio_write(cfd, body, strlen(body));
		free(body);
		return;
	}
	if (fullio_write(cfd, up, sizeof(up) - 1) || (rest_len && fullio_write(tfd, rest, rest_len)))
		return;
	pump(cfd, tfd);
}

void bridge_port(struct conn *c, const char *query)
{
	char pbuf[16], *end;
	const char *up = http_header(c, "Upgrade"), *rest;
	unsigned long port;
	size_t rest_len;
	pid_t pid;

	if (http_query(query, "port", pbuf, sizeof(pbuf)) || !pbuf[0] ||
	    (port = strtoul(pbuf, &end, 10), *end) || !port || port > 65535) {
		http_reply_json(c, 400, json_pack("{s:i,s:s}", "code", 400, "message", "port=N (1-65535) wanted"));
		return;
	}
	if (!up || strcasecmp(up, "cubicle-port")) {
		http_reply_json(c, 400, json_pack("{s:i,s:s}", "code", 400, "message",
						  "Upgrade: cubicle-port wanted (the connection becomes the port's)"));
		return;
	}
	if (n_bridges >= BRIDGE_MAX) {
		http_reply_json(c, 503, json_pack("{s:i,s:s}", "code", 503, "message",
						  "too many port connections open at once"));
		return;
	}
	http_rest(c, &rest, &rest_len);
	pid = fork();
	if (pid < 0) {
		http_reply_json(c, 503, json_pack("{s:i,s:s}", "code", 503, "message", strerror(errno)));
		return;
	}
	if (pid == 0) {
		int cfd = http_fd(c);

		/* only the connection is kept: the listening socket, the event
		 * loop and other connections are the agent's */
		if (cfd != 3 && dup2(cfd, 3) < 0)
			_exit(1);
#ifdef SYS_close_range
		if (syscall(SYS_close_range, 4u, ~0u, 0u))
#endif
			for (int fd = 4; fd < 1024; fd++)
				close(fd);
		/* the event loop's sockets do not wait; the bridge's do */
		fcntl(3, F_SETFL, fcntl(3, F_GETFL) & ~O_NONBLOCK);
		bridge_child(3, (unsigned)port, rest, rest_len);
		_exit(0);
	}
	/* the child has the connection now: the agent lets go of it (its
	 * close drops the agent's reference, not the socket) */
	bridges[n_bridges++] = pid;
	http_abort(c);
}
