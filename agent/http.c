/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cubicle-agent's HTTP/1.1 connections, parsed by http-parser.
 *
 * One request at a time per connection: the parser is paused when a request
 * is complete, and input is read again only when its response has ended
 * (keep-alive; pipelined requests wait in the input buffer). Every buffer is
 * bounded: the URL, the headers, a buffered (RPC) body, and the output, which
 * producers fill only while http_can_write() says so. A connection is freed
 * only from the loop's deferred list, so no handler ever sees it vanish.
 */
#include <errno.h>
#include <http_parser.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "http.h"

#define IN_SIZE (256u << 10) /* an upload is read (and written to its file) in big pieces */
#define DISCARD_MAX (1u << 20)
#define CONN_MAX 512

enum body_mode { BODY_NONE, BODY_BUFFER, BODY_STREAM, BODY_DISCARD };

struct conn {
	struct watch w;
	http_parser p;
	bool dead, peer_shut, paused, req_done, resp_started, resp_done, chunked, close_after;
	bool resume_queued, in_writable;
	/* request */
	char url[HTTP_URL_MAX + 1];
	size_t url_len;
	char hdr[HTTP_HDR_MAX];
	size_t hdr_len;
	struct { uint32_t name, value; } h[HTTP_HDR_COUNT];
	unsigned nh;
	bool in_value;
	enum body_mode mode;
	char *body;
	size_t body_len, body_cap, discarded;
	http_body_fn *body_fn;
	const struct conn_ops *ops;
	void *ctx;
	/* input not yet parsed */
	char in[IN_SIZE];
	size_t in_off, in_len;
	/* output */
	char *out;
	size_t out_off, out_len, out_cap;
};

static unsigned nconns;
static http_parser_settings settings;

static void conn_cb(struct watch *w, uint32_t ev);
static void conn_update(struct conn *c);

static void conn_free(void *arg)
{
	struct conn *c = arg;

	free(c->body);
	free(c->out);
	free(c);
	nconns--;
}

static void conn_close(struct conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	loop_del(&c->w);
	close(c->w.fd);
	if (c->ops && c->ops->closed)
		c->ops->closed(c);
	c->ops = NULL;
	loop_defer(conn_free, c);
}

void http_abort(struct conn *c)
{
	conn_close(c);
}

bool http_dead(const struct conn *c)
{
	return c->dead;
}

int http_fd(const struct conn *c)
{
	return c->w.fd;
}

void http_rest(const struct conn *c, const char **rest, size_t *len)
{
	const char *in = c->in + c->in_off, *end = memmem(in, c->in_len - c->in_off, "\r\n\r\n", 4);

	*rest = end ? end + 4 : in + (c->in_len - c->in_off);
	*len = end ? (size_t)(c->in + c->in_len - *rest) : 0;
}

/* ---- output ---- */

static int out_reserve(struct conn *c, size_t n)
{
	size_t need;
	char *p;

	if (c->out_off && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + n <= c->out_cap)
		return 0;
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
		if (c->out_len + n <= c->out_cap)
			return 0;
	}
	need = c->out_cap ? c->out_cap : 16384;
	while (need < c->out_len + n)
		need *= 2;
	p = realloc(c->out, need);
	if (!p)
		return -ENOMEM;
	c->out = p;
	c->out_cap = need;
	return 0;
}

static void out_put(struct conn *c, const void *data, size_t len)
{
	if (c->dead || !len)
		return;
	if (out_reserve(c, len)) {
		fprintf(stderr, "cubicle-agent: out of memory for a response; closing the connection\n");
		conn_close(c);
		return;
	}
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
}

/* Writes what is queued; 0, or -1 when the connection closed. */
static int out_flush(struct conn *c)
{
	size_t before = c->out_len - c->out_off;

	while (!c->dead && c->out_off < c->out_len) {
		ssize_t n = send(c->w.fd, c->out + c->out_off, c->out_len - c->out_off,
				MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			c->out_off += n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		conn_close(c);
		return -1;
	}
	if (c->dead)
		return -1;
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	/* Give back memory a big burst took. */
	if (!c->out_len && c->out_cap > 2 * HTTP_OUT_MAX) {
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
	if (c->out_len - c->out_off < before && c->ops && c->ops->writable && !c->in_writable) {
		c->in_writable = true;
		c->ops->writable(c);
		c->in_writable = false;
	}
	return c->dead ? -1 : 0;
}

bool http_can_write(const struct conn *c)
{
	return !c->dead && c->out_len - c->out_off + HTTP_OUT_SLACK <= HTTP_OUT_MAX;
}

static void conn_resume(void *arg);

static void resp_finished(struct conn *c)
{
	c->resp_done = true;
	if (!c->resume_queued && !c->dead) {
		c->resume_queued = true;
		loop_defer(conn_resume, c);
	}
}

void http_begin(struct conn *c, int status, const char *ctype, int64_t length)
{
	char head[512];
	int n;

	if (c->dead || c->resp_started)
		return;
	c->resp_started = true;
	/* An answer before the whole request was read: drop the rest of its body. */
	if (!c->req_done && (c->mode == BODY_BUFFER || c->mode == BODY_STREAM))
		c->mode = BODY_DISCARD;
	if (length < 0 && c->p.http_major == 1 && c->p.http_minor == 0)
		c->close_after = true;
	c->chunked = length < 0 && !c->close_after;
	n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\n", status,
			http_status_str((enum http_status)status));
	if (ctype)
		n += snprintf(head + n, sizeof(head) - n, "Content-Type: %s\r\n", ctype);
	if (length >= 0)
		n += snprintf(head + n, sizeof(head) - n, "Content-Length: %lld\r\n", (long long)length);
	else if (c->chunked)
		n += snprintf(head + n, sizeof(head) - n, "Transfer-Encoding: chunked\r\n");
	if (c->close_after)
		n += snprintf(head + n, sizeof(head) - n, "Connection: close\r\n");
	n += snprintf(head + n, sizeof(head) - n, "\r\n");
	out_put(c, head, n);
}

void http_write(struct conn *c, const void *data, size_t len)
{
	char pre[24];

	if (c->dead || !c->resp_started || c->resp_done || !len)
		return;
	if (c->chunked) {
		int n = snprintf(pre, sizeof(pre), "%zx\r\n", len);
		out_put(c, pre, n);
		out_put(c, data, len);
		out_put(c, "\r\n", 2);
	} else {
		out_put(c, data, len);
	}
	out_flush(c);
	conn_update(c);
}

void http_end(struct conn *c)
{
	if (c->dead || !c->resp_started || c->resp_done)
		return;
	if (c->chunked)
		out_put(c, "0\r\n\r\n", 5);
	resp_finished(c);
	out_flush(c);
	conn_update(c);
}

void http_reply(struct conn *c, int status, const char *ctype, const void *body, size_t len)
{
	if (c->dead || c->resp_started)
		return;
	http_begin(c, status, ctype, (int64_t)len);
	if (len)
		out_put(c, body, len);
	resp_finished(c);
	out_flush(c);
	conn_update(c);
}

void http_reply_json(struct conn *c, int status, json_t *v)
{
	char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;

	json_decref(v);
	if (!s) {
		http_reply(c, 500, "application/json", "{\"code\":\"internal\",\"message\":\"out of memory\"}", 45);
		return;
	}
	http_reply(c, status, "application/json", s, strlen(s));
	free(s);
}

/* ---- request parsing ---- */

const char *http_header(const struct conn *c, const char *name)
{
	for (unsigned i = 0; i < c->nh; i++)
		if (!strcasecmp(c->hdr + c->h[i].name, name))
			return c->hdr + c->h[i].value;
	return NULL;
}

int http_header_at(const struct conn *c, unsigned i, const char **name, const char **value)
{
	if (i >= c->nh)
		return -ENOENT;
	*name = c->hdr + c->h[i].name;
	*value = c->hdr + c->h[i].value;
	return 0;
}

const char *http_path(const struct conn *c)
{
	return c->url;
}

void *http_ctx(const struct conn *c)
{
	return c->ctx;
}

void http_set_ops(struct conn *c, const struct conn_ops *ops, void *ctx)
{
	c->ops = ops;
	c->ctx = ctx;
}

void http_stream_body(struct conn *c, const struct conn_ops *ops, void *ctx)
{
	c->mode = BODY_STREAM;
	http_set_ops(c, ops, ctx);
}

void http_buffer_body(struct conn *c, http_body_fn *fn)
{
	c->mode = BODY_BUFFER;
	c->body_fn = fn;
}

static struct conn *pconn(http_parser *p)
{
	return p->data;
}

static int on_begin(http_parser *p)
{
	struct conn *c = pconn(p);

	c->url_len = c->hdr_len = 0;
	c->nh = 0;
	c->in_value = false;
	c->mode = BODY_NONE;
	c->body_len = c->discarded = 0;
	c->body_fn = NULL;
	c->ops = NULL;
	c->ctx = NULL;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct conn *c = pconn(p);

	if (len > HTTP_URL_MAX - c->url_len) {
		http_reply(c, 414, "text/plain", "URL too long\n", 13);
		c->close_after = true;
		return -1;
	}
	memcpy(c->url + c->url_len, at, len);
	c->url_len += len;
	c->url[c->url_len] = 0;
	return 0;
}

/* Appends to the header store, keeping a NUL after each name and value. */
static int hdr_add(struct conn *c, const char *at, size_t len, bool value)
{
	if (value != c->in_value || c->nh == 0) {
		if (!value) {
			if (c->nh == HTTP_HDR_COUNT)
				goto big;
			if (c->hdr_len + 1 > HTTP_HDR_MAX)
				goto big;
			c->h[c->nh].name = c->hdr_len;
			c->h[c->nh].value = UINT32_MAX;
			c->nh++;
		} else {
			if (c->nh == 0)
				return -1;
			c->hdr_len++; /* NUL after the name */
			c->h[c->nh - 1].value = c->hdr_len;
		}
		c->in_value = value;
		if (c->hdr_len >= HTTP_HDR_MAX)
			goto big;
		c->hdr[c->hdr_len] = 0;
	}
	if (len + 2 > HTTP_HDR_MAX - c->hdr_len)
		goto big;
	memcpy(c->hdr + c->hdr_len, at, len);
	c->hdr_len += len;
	c->hdr[c->hdr_len] = 0;
	return 0;
big:
	http_reply(c, 431, "text/plain", "headers too large\n", 18);
	c->close_after = true;
	return -1;
}

static int on_field(http_parser *p, const char *at, size_t len)
{
	struct conn *c = pconn(p);

	if (c->in_value) /* a value ended: terminate it */
		c->hdr_len++;
	return hdr_add(c, at, len, false);
}

static int on_value(http_parser *p, const char *at, size_t len)
{
	return hdr_add(pconn(p), at, len, true);
}

static int on_headers(http_parser *p)
{
	struct conn *c = pconn(p);
	char *q;
	const char *expect;

	/* A name without a value reads as empty (its NUL ends it). */
	if (c->nh && c->h[c->nh - 1].value == UINT32_MAX)
		c->h[c->nh - 1].value = c->h[c->nh - 1].name + strlen(c->hdr + c->h[c->nh - 1].name);
	if (!http_should_keep_alive(p))
		c->close_after = true;
	q = strchr(c->url, '?');
	if (q)
		*q++ = 0;
	http_route(c, p->method, c->url, q ? q : "");
	if (c->dead)
		return -1;
	expect = http_header(c, "Expect");
	if (expect && !strcasecmp(expect, "100-continue") && !c->resp_started)
		out_put(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	if (c->mode == BODY_BUFFER && p->content_length != ULLONG_MAX &&
			p->content_length > HTTP_BODY_MAX) {
		http_reply(c, 413, "application/json",
				"{\"code\":\"resource_exhausted\",\"message\":\"request body too large\"}", 64);
		c->close_after = true;
		return -1;
	}
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct conn *c = pconn(p);

	switch (c->mode) {
	case BODY_BUFFER:
		if (len > HTTP_BODY_MAX - c->body_len) {
			http_reply(c, 413, "application/json",
					"{\"code\":\"resource_exhausted\",\"message\":\"request body too large\"}", 64);
			c->close_after = true;
			return -1;
		}
		if (c->body_len + len > c->body_cap) {
			size_t cap = c->body_cap ? c->body_cap : 4096;
			char *b;
			while (cap < c->body_len + len)
				cap *= 2;
			b = realloc(c->body, cap);
			if (!b) {
				conn_close(c);
				return -1;
			}
			c->body = b;
			c->body_cap = cap;
		}
		memcpy(c->body + c->body_len, at, len);
		c->body_len += len;
		return 0;
	case BODY_STREAM:
		if (c->ops && c->ops->body && c->ops->body(c, at, len) < 0 && !c->dead)
			c->mode = BODY_DISCARD;
		return c->dead ? -1 : 0;
	case BODY_NONE:
	case BODY_DISCARD:
		c->discarded += len;
		if (c->discarded > DISCARD_MAX) {
			if (!c->resp_started)
				http_reply(c, 413, "text/plain", "request body too large\n", 23);
			c->close_after = true;
			return -1;
		}
		return 0;
	}
	return 0;
}

static int on_complete(http_parser *p)
{
	struct conn *c = pconn(p);

	c->req_done = true;
	http_parser_pause(p, 1);
	c->paused = true;
	if (c->mode == BODY_BUFFER && c->body_fn && !c->resp_started)
		c->body_fn(c, c->body ? c->body : "", c->body_len);
	else if (c->mode == BODY_STREAM && c->ops && c->ops->complete)
		c->ops->complete(c);
	else if (!c->resp_started)
		http_reply(c, 500, "text/plain", "no handler answered\n", 20);
	/* A large buffered body is not kept for the next request. */
	if (c->body_cap > 65536) {
		free(c->body);
		c->body = NULL;
		c->body_cap = 0;
	}
	return 0;
}

/* Parses buffered input while not paused. */
static void conn_parse(struct conn *c)
{
	while (!c->dead && !c->paused && c->in_len > c->in_off) {
		size_t n = http_parser_execute(&c->p, &settings, c->in + c->in_off, c->in_len - c->in_off);
		enum http_errno e = HTTP_PARSER_ERRNO(&c->p);

		if (c->dead)
			return;
		c->in_off += n;
		if (e == HPE_PAUSED)
			break;
		if (e != HPE_OK) {
			if (!c->resp_started) {
				char msg[160];
				int m = snprintf(msg, sizeof(msg), "bad request: %s\n", http_errno_description(e));
				c->close_after = true;
				http_reply(c, 400, "text/plain", msg, m);
			} else {
				c->close_after = true;
				if (!c->resp_done && !c->req_done)
					conn_close(c);
			}
			c->paused = true; /* parse nothing more on this connection */
			c->req_done = true;
			return;
		}
	}
	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
}

/* The response has ended and the request was read: start on the next one. */
static void conn_resume(void *arg)
{
	struct conn *c = arg;

	c->resume_queued = false;
	if (c->dead || !c->resp_done)
		return;
	if (!c->req_done)
		return; /* still reading (discarding) the rest of this request */
	if (c->out_len > c->out_off) {
		conn_update(c); /* wait until the answer is out */
		return;
	}
	if (c->close_after || c->peer_shut) {
		conn_close(c);
		return;
	}
	if (c->ops && c->ops->closed)
		c->ops->closed(c); /* the request's handler lets go */
	c->ops = NULL;
	c->ctx = NULL;
	c->req_done = c->resp_started = c->resp_done = c->chunked = false;
	c->paused = false;
	http_parser_pause(&c->p, 0);
	conn_parse(c);
	conn_update(c);
}

/* Chooses what to wait for. */
static void conn_update(struct conn *c)
{
	uint32_t ev = 0;

	if (c->dead)
		return;
	if (c->resp_done && c->req_done && c->out_len == c->out_off && !c->resume_queued) {
		c->resume_queued = true;
		loop_defer(conn_resume, c);
	}
	if (!c->paused && !c->peer_shut && c->in_len < IN_SIZE)
		ev |= EPOLLIN;
	if (!c->peer_shut)
		ev |= EPOLLRDHUP;
	if (c->out_len > c->out_off)
		ev |= EPOLLOUT;
	if (ev != c->w.events)
		loop_mod(&c->w, ev);
}

static void conn_read(struct conn *c)
{
	ssize_t n;

	if (c->in_off) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	n = recv(c->w.fd, c->in + c->in_len, IN_SIZE - c->in_len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* The client is gone or shut its side: an open request never completes. */
		if (!c->req_done || c->resp_done) {
			conn_close(c);
			return;
		}
		c->peer_shut = true;
		return;
	}
	c->in_len += n;
	conn_parse(c);
}

static void conn_cb(struct watch *w, uint32_t ev)
{
	struct conn *c = (struct conn *)w;

	if (ev & EPOLLERR) {
		conn_close(c);
		return;
	}
	if (ev & EPOLLOUT)
		out_flush(c);
	if (!c->dead && (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) && !c->paused)
		conn_read(c);
	else if (!c->dead && (ev & (EPOLLRDHUP | EPOLLHUP))) {
		/* Paused (a response in progress): the client went away. */
		if (ev & EPOLLHUP) {
			conn_close(c);
			return;
		}
		c->peer_shut = true;
	}
	if (!c->dead && (ev & EPOLLHUP) && c->out_len > c->out_off) {
		conn_close(c);
		return;
	}
	conn_update(c);
}

static void accept_cb(struct watch *w, uint32_t ev)
{
	int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct conn *c;

	if (fd < 0)
		return;
	if (nconns >= CONN_MAX || !(c = calloc(1, sizeof(*c)))) {
		close(fd);
		return;
	}
	nconns++;
	http_parser_init(&c->p, HTTP_REQUEST);
	c->p.data = c;
	if (loop_add(&c->w, fd, EPOLLIN | EPOLLRDHUP, conn_cb)) {
		close(fd);
		free(c);
		nconns--;
	}
}

int http_listen(int lfd)
{
	static struct watch lw;

	http_parser_settings_init(&settings);
	settings.on_message_begin = on_begin;
	settings.on_url = on_url;
	settings.on_header_field = on_field;
	settings.on_header_value = on_value;
	settings.on_headers_complete = on_headers;
	settings.on_body = on_body;
	settings.on_message_complete = on_complete;
	return loop_add(&lw, lfd, EPOLLIN, accept_cb);
}

/* ---- query strings ---- */

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int http_query(const char *query, const char *key, char *out, size_t len)
{
	size_t klen = strlen(key);
	const char *s = query;

	if (!len)
		return -ENAMETOOLONG;
	while (s && *s) {
		const char *end = strchr(s, '&');
		size_t seg = end ? (size_t)(end - s) : strlen(s);

		if (seg > klen && !strncmp(s, key, klen) && s[klen] == '=') {
			size_t o = 0;
			for (size_t i = klen + 1; i < seg; i++) {
				int ch = (unsigned char)s[i];
				if (ch == '%') {
					int hi = i + 2 < seg ? hexval(s[i + 1]) : -1;
					int lo = i + 2 < seg ? hexval(s[i + 2]) : -1;
					if (hi < 0 || lo < 0)
						return -EINVAL;
					ch = hi << 4 | lo;
					i += 2;
				} else if (ch == '+') {
					ch = ' ';
				}
				if (!ch)
					return -EINVAL;
				if (o + 1 >= len)
					return -ENAMETOOLONG;
				out[o++] = (char)ch;
			}
			out[o] = 0;
			return 0;
		}
		if (seg == klen && !strncmp(s, key, klen)) {
			out[0] = 0;
			return 0;
		}
		s = end ? end + 1 : NULL;
	}
	return -ENOENT;
}
