/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data plane: one request of a client, forwarded to a port of a
 * sandbox's guest through its vsock socket, and the answer back, both
 * streamed as they come (a command's output, a big upload) and never held
 * whole. The guest side is parsed too, only to know where its answer ends:
 * the client's connection then goes on with its next request, and the
 * guest connection is kept for the next request to the same port.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "serve.h"

struct resp {
	bool done, head_req, started;
};

static int resp_headers(http_parser *p)
{
	struct resp *r = p->data;

	return r->head_req ? 1 : 0; /* 1: no body follows */
}

static int resp_begin(http_parser *p)
{
	((struct resp *)p->data)->started = true;
	return 0;
}

static int resp_done(http_parser *p)
{
	((struct resp *)p->data)->done = true;
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings resp_settings = {
	.on_message_begin = resp_begin,
	.on_headers_complete = resp_headers,
	.on_message_complete = resp_done,
};

/* A kept guest connection that is still quiet (nothing unasked, not closed). */
static bool idle_ok(int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN | POLLRDHUP };

	return poll(&pf, 1, 0) == 0;
}

static void drop_up(struct hconn *c)
{
	if (c->up_fd >= 0)
		close(c->up_fd);
	c->up_fd = -1;
	c->up_id[0] = '\0';
}

/* The guest's answer to the client: 0 when it ended cleanly, 1 when the
 * guest connection must not be reused, -1 when the exchange broke (the
 * client connection must end too). */
static int stream_back(struct hconn *c, int up, bool head_req, bool *sent)
{
	struct resp rs = { .head_req = head_req };
	http_parser p;
	char buf[32768];

	http_parser_init(&p, HTTP_RESPONSE);
	p.data = &rs;
	for (;;) {
		struct pollfd pf[2] = { { .fd = up, .events = POLLIN },
					{ .fd = c->fd, .events = POLLRDHUP } };
		ssize_t n;
		size_t off = 0;

		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (pf[1].revents & (POLLRDHUP | POLLHUP | POLLERR))
			return -1; /* the client went away mid-answer */
		if (!pf[0].revents)
			continue;
		n = recv(up, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			/* an answer that ends when its connection does */
			http_parser_execute(&p, &resp_settings, NULL, 0);
			if (!rs.done)
				return -1;
			c->close = true;
			return 1;
		}
		while (off < (size_t)n) {
			size_t m = http_parser_execute(&p, &resp_settings, buf + off, (size_t)n - off);
			enum http_errno e = HTTP_PARSER_ERRNO(&p);

			if (e != HPE_OK && e != HPE_PAUSED)
				return -1;
			if (m && hio_write_all(c->fd, buf + off, m))
				return -1;
			*sent = *sent || m;
			off += m;
			if (!rs.done)
				continue;
			if (p.status_code >= 100 && p.status_code < 200 && p.status_code != 101) {
				/* an interim answer (100 Continue): the real one follows */
				rs.done = false;
				http_parser_init(&p, HTTP_RESPONSE);
				p.data = &rs;
				continue;
			}
			if (p.upgrade || off < (size_t)n)
				return -1; /* bytes nobody asked for */
			return http_should_keep_alive(&p) ? 0 : 1;
		}
	}
}

bool mask_host_ok(const char *m)
{
	size_t n = strlen(m);

	if (!n || n > 200)
		return false;
	for (const char *p = m; *p; p++) {
		if (!strncmp(p, "${PORT}", 7)) {
			p += 6;
			continue;
		}
		if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') && !(*p >= '0' && *p <= '9') &&
		    !strchr("-._:[]%~", *p))
			return false;
	}
	return true;
}

void mask_host_expand(const char *m, unsigned port, char *out, size_t len)
{
	size_t o = 0;

	for (const char *p = m; *p && o + 1 < len; p++) {
		if (!strncmp(p, "${PORT}", 7)) {
			int k = snprintf(out + o, len - o, "%u", port);

			o = k < 0 || (size_t)k >= len - o ? len - 1 : o + (size_t)k;
			p += 6;
		} else {
			out[o++] = *p;
		}
	}
	out[o < len ? o : len - 1] = '\0';
}

/* The head of @r to @fd with @extra added before its end and, when @host is
 * not NULL, its Host line(s) (and their continuations) left out for
 * "Host: @host": 0 or -1. */
static int send_head(int fd, const struct hreq *r, const char *extra, const char *host)
{
	size_t end = r->head_len - 2, i = 0, o = 0, cap = r->head_len + (host ? strlen(host) : 0) + 16;
	bool skip = false;
	char *out;
	int ret;

	if (!host)
		return extra ? hio_write_all(fd, r->head, end) || hio_write_all(fd, extra, strlen(extra)) ||
				       hio_write_all(fd, "\r\n", 2)
			     : hio_write_all(fd, r->head, r->head_len);
	out = malloc(cap);
	if (!out)
		return -1;
	while (i < end) {
		const char *nl = memchr(r->head + i, '\n', end - i);
		size_t n = nl ? (size_t)(nl - (r->head + i)) + 1 : end - i;
		const char *line = r->head + i;

		/* the request line is the first; a line that begins with a
		 * space or tab goes on with the header before it */
		if (i && (line[0] == ' ' || line[0] == '\t'))
			;
		else
			skip = i && n >= 5 && !strncasecmp(line, "Host:", 5);
		if (!skip) {
			memcpy(out + o, line, n);
			o += n;
		}
		i += n;
	}
	o += (size_t)snprintf(out + o, cap - o, "Host: %s\r\n", host);
	ret = hio_write_all(fd, out, o) || (extra && hio_write_all(fd, extra, strlen(extra))) ||
	      hio_write_all(fd, "\r\n", 2);
	free(out);
	return ret;
}

/* A connection to @port of @s's guest: for the agent's port, the vsock
 * port itself; for another, a TCP port in the guest, reached through the
 * agent's bridge (GET /cubicle/port, answered 101, after which the
 * connection is the port's: agent/bridge.c). A socket, or -1 with @why. */
static int port_connect(struct sandbox *s, unsigned port, char *why, size_t len)
{
	char req[300], head[1024];
	size_t n = 0;
	unsigned st = 0;
	double t0 = now_ms();
	int fd = sbx_vsock_connect(s, AGENT_PORT, srv.agent_wait_ms), k;

	if (fd < 0) {
		snprintf(why, len, "its agent does not answer: %s", strerror(errno));
		return -1;
	}
	if (port == AGENT_PORT)
		return fd;
	k = snprintf(req, sizeof(req),
		     "GET /cubicle/port?port=%u HTTP/1.1\r\nHost: cubicle-agent\r\nX-Access-Token: %s\r\n"
		     "Connection: Upgrade\r\nUpgrade: cubicle-port\r\n\r\n",
		     port, s->token);
	if (hio_write_all(fd, req, (size_t)k)) {
		snprintf(why, len, "its agent took no request: %s", strerror(errno));
		close(fd);
		return -1;
	}
	/* the answer's head, a byte at a time (what follows it is the port's),
	 * all of it within agent_wait_ms */
	while (n + 1 < sizeof(head) && (n < 4 || memcmp(head + n - 4, "\r\n\r\n", 4))) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		double left = t0 + srv.agent_wait_ms - now_ms();
		int p = left > 0 ? poll(&pf, 1, (int)left + 1) : 0;
		ssize_t got;

		if (p < 0 && errno == EINTR)
			continue;
		got = p > 0 ? recv(fd, head + n, 1, 0) : -1;
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		n++;
	}
	head[n] = '\0';
	if (n >= 4 && !memcmp(head + n - 4, "\r\n\r\n", 4) && sscanf(head, "HTTP/1.%*d %u", &st) == 1 &&
	    st == 101)
		return fd;
	close(fd);
	if (st == 502)
		snprintf(why, len, "nothing listens on it in the sandbox (TCP, 127.0.0.1 or ::1)");
	else if (st == 404)
		snprintf(why, len, "its agent has no port bridge (a template made with an older "
				   "cubicle-agent: build it again)");
	else if (st)
		snprintf(why, len, "its agent answered HTTP %u to the bridge", st);
	else
		snprintf(why, len, "its agent's answer to the bridge %s",
			 n ? "was not HTTP" : "did not come");
	return -1;
}

void proxy_request(struct hconn *c, struct hreq *r, struct sandbox *s, unsigned port, const char *extra,
		   const char *host)
{
	bool sent = false;
	int ret;

	if (c->up_fd >= 0 && (strcmp(c->up_id, s->id) || c->up_port != port || !idle_ok(c->up_fd)))
		drop_up(c);
	if (c->up_fd < 0) {
		/* (a refusal is tried again: vsock_connect_patient) */
		char why[200];
		int fd = port_connect(s, port, why, sizeof(why));

		if (fd < 0) {
			c->close = !r->done; /* its body was not read */
			hio_error(c, 502, "sandbox %s: port %u: %s", s->id, port, why);
			return;
		}
		c->up_fd = fd;
		snprintf(c->up_id, sizeof(c->up_id), "%s", s->id);
		c->up_port = port;
	}
	/* @extra goes in before the blank line that ends the head */
	if (send_head(c->up_fd, r, extra, host) || hio_forward_body(c, r, c->up_fd, false)) {
		drop_up(c);
		c->close = true;
		hio_error(c, 502, "sandbox %s: the request could not be passed on", s->id);
		return;
	}
	ret = stream_back(c, c->up_fd, r->method == HTTP_HEAD, &sent);
	if (ret)
		drop_up(c);
	if (ret < 0) {
		c->close = true;
		if (!sent)
			hio_error(c, 502, "sandbox %s: the guest's answer broke off", s->id);
	}
	if (!r->keep_alive)
		c->close = true;
}
