/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cubicle-serve's HTTP/1.1 on blocking sockets. A request's head is read
 * whole (bounded), then parsed by http-parser in one go, so every callback
 * sees whole names and values; its body is parsed as it arrives, kept
 * (control plane, bounded) or passed on raw (data plane). The parser stops
 * at the end of each message: pipelined bytes stay in the buffer for the
 * next request.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hio.h"

/* All of @buf to @fd, a socket (@sock: send, never SIGPIPE) or a file. */
static int write_all(int fd, const void *buf, size_t len, bool sock)
{
	const char *p = buf;

	while (len) {
		ssize_t n = sock ? send(fd, p, len, MSG_NOSIGNAL) : write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int hio_write_all(int fd, const void *buf, size_t len)
{
	return write_all(fd, buf, len, true);
}

/* ---- request parsing ---- */

static int hdr_copy(struct hreq *r, const char *at, size_t len, const char **out)
{
	if (r->hbuf_len + len + 1 > sizeof(r->hbuf))
		return r->bad = true, -1;
	memcpy(r->hbuf + r->hbuf_len, at, len);
	r->hbuf[r->hbuf_len + len] = '\0';
	*out = r->hbuf + r->hbuf_len;
	r->hbuf_len += len + 1;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct hreq *r = p->data;
	size_t have = strlen(r->url);

	if (have + len >= sizeof(r->url))
		return r->bad = true, -1;
	memcpy(r->url + have, at, len);
	r->url[have + len] = '\0';
	return 0;
}

static int on_field(http_parser *p, const char *at, size_t len)
{
	struct hreq *r = p->data;

	if (r->nh >= HIO_HDR_COUNT)
		return r->bad = true, -1;
	r->h[r->nh].value = "";
	return hdr_copy(r, at, len, &r->h[r->nh++].name);
}

static int on_value(http_parser *p, const char *at, size_t len)
{
	struct hreq *r = p->data;

	if (!r->nh)
		return -1;
	return hdr_copy(r, at, len, &r->h[r->nh - 1].value);
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct hreq *r = p->data;

	if (!r->body_max)
		return 0; /* forwarding: the raw bytes go, not these */
	if (r->too_big || r->body_len + len > r->body_max) {
		r->too_big = true;
		return 0;
	}
	memcpy(r->body + r->body_len, at, len);
	r->body_len += len;
	return 0;
}

static int on_complete(http_parser *p)
{
	struct hreq *r = p->data;

	r->done = true;
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings req_settings = {
	.on_url = on_url,
	.on_header_field = on_field,
	.on_header_value = on_value,
	.on_body = on_body,
	.on_message_complete = on_complete,
};

/* More input into c->in (compacted first): bytes read, 0 at EOF, -1. */
static ssize_t fill(struct hconn *c)
{
	ssize_t n;

	if (c->in_off) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	if (c->in_len == sizeof(c->in))
		return -1;
	do
		n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		c->in_len += (size_t)n;
	return n;
}

/* Runs @r's parser over buffered input; the bytes it took are consumed
 * and, when @fd >= 0, written there (a socket, or a file when @file). 0,
 * or -1 (a parse error, a failed write). */
static int parse_some(struct hconn *c, struct hreq *r, int fd, bool file)
{
	size_t avail = c->in_len - c->in_off, n;

	if (r->done || !avail)
		return 0;
	n = http_parser_execute(&r->p, &req_settings, c->in + c->in_off, avail);
	if (HTTP_PARSER_ERRNO(&r->p) != HPE_OK && HTTP_PARSER_ERRNO(&r->p) != HPE_PAUSED)
		return -1;
	if (fd >= 0 && n && write_all(fd, c->in + c->in_off, n, !file))
		return -1;
	c->in_off += n;
	return 0;
}

int hio_read_head(struct hconn *c, struct hreq *r)
{
	char *end;
	size_t len, n;
	char *q;

	memset(r, 0, offsetof(struct hreq, head));
	r->head_len = 0;
	r->url[0] = '\0';
	r->hbuf_len = 0;
	r->nh = 0;
	r->done = r->bad = r->too_big = false;
	r->body = NULL;
	r->body_len = r->body_max = 0;
	for (;;) {
		/* skip blank lines between requests (RFC 9112 2.2) */
		while (c->in_off < c->in_len && (c->in[c->in_off] == '\r' || c->in[c->in_off] == '\n'))
			c->in_off++;
		end = memmem(c->in + c->in_off, c->in_len - c->in_off, "\r\n\r\n", 4);
		if (end)
			break;
		if (c->in_len - c->in_off >= HIO_HEAD_MAX) {
			hio_error(c, 431, "the request's head is longer than %u bytes", HIO_HEAD_MAX);
			return -1;
		}
		ssize_t got = fill(c);

		if (got == 0 && c->in_len == c->in_off)
			return 1;
		if (got < 0 && c->in_len == c->in_off && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 1; /* idle keep-alive connection */
		if (got <= 0)
			return -1;
	}
	len = (size_t)(end + 4 - (c->in + c->in_off));
	memcpy(r->head, c->in + c->in_off, len);
	r->head_len = len;
	http_parser_init(&r->p, HTTP_REQUEST);
	r->p.data = r;
	n = http_parser_execute(&r->p, &req_settings, r->head, len);
	if (r->bad) {
		hio_error(c, 431, "too many or too long headers");
		return -1;
	}
	if (n != len || (HTTP_PARSER_ERRNO(&r->p) != HPE_OK && HTTP_PARSER_ERRNO(&r->p) != HPE_PAUSED)) {
		hio_error(c, 400, "malformed request: %s",
			  http_errno_description(HTTP_PARSER_ERRNO(&r->p)));
		return -1;
	}
	c->in_off += len;
	r->method = (int)r->p.method;
	r->keep_alive = http_should_keep_alive(&r->p);
	r->path = r->url;
	q = strchr(r->url, '?');
	if (q)
		*q++ = '\0';
	r->query = q ? q : r->url + strlen(r->url);
	return 0;
}

const char *hreq_header(const struct hreq *r, const char *name)
{
	for (unsigned i = 0; i < r->nh; i++)
		if (!strcasecmp(r->h[i].name, name))
			return r->h[i].value;
	return NULL;
}

int hio_read_body(struct hconn *c, struct hreq *r, size_t max)
{
	r->body = malloc(max + 1);
	if (!r->body)
		return -1;
	r->body_max = max;
	r->body_len = 0;
	for (;;) {
		if (parse_some(c, r, -1, false))
			return -1;
		if (r->done)
			break;
		if (fill(c) <= 0)
			return -1;
	}
	r->body[r->body_len] = '\0';
	return r->too_big ? 413 : 0;
}

int hio_forward_body(struct hconn *c, struct hreq *r, int fd, bool file)
{
	r->body_max = 0;
	for (;;) {
		if (parse_some(c, r, fd, file))
			return -1;
		if (r->done)
			return 0;
		if (fill(c) <= 0)
			return -1;
	}
}

/* ---- replies ---- */

static const char *reason(unsigned st)
{
	switch (st) {
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Content Too Large";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	default: return "Status";
	}
}

int hio_reply(struct hconn *c, unsigned status, const char *ctype, const void *body,
	      size_t len, const char *hdrs)
{
	char head[1024];
	int n;

	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %u %s\r\n%s%s%sContent-Length: %zu\r\n%s%s\r\n", status,
		     reason(status), ctype ? "Content-Type: " : "", ctype ? ctype : "",
		     ctype ? "\r\n" : "", status == 204 ? (size_t)0 : len,
		     c->close ? "Connection: close\r\n" : "", hdrs ? hdrs : "");
	if (n < 0 || (size_t)n >= sizeof(head))
		return -1;
	if (hio_write_all(c->fd, head, (size_t)n))
		return -1;
	if (status != 204 && len && hio_write_all(c->fd, body, len))
		return -1;
	return 0;
}

int hio_reply_json(struct hconn *c, unsigned status, json_t *j, const char *hdrs)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int ret;

	json_decref(j);
	if (!s) {
		static const char oom[] = "{\"code\":500,\"message\":\"out of memory\"}";

		return hio_reply(c, 500, "application/json", oom, sizeof(oom) - 1, NULL);
	}
	ret = hio_reply(c, status, "application/json", s, strlen(s), hdrs);
	free(s);
	return ret;
}

int hio_error(struct hconn *c, unsigned status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return hio_reply_json(c, status, json_pack("{s:i,s:s}", "code", (int)status, "message", msg),
			      NULL);
}

/* ---- the client ---- */

struct call {
	char *body;
	size_t len, cap;
	bool done, big;
};

static int call_body(http_parser *p, const char *at, size_t len)
{
	struct call *k = p->data;

	if (k->len + len > (1u << 20)) {
		k->big = true;
		return -1;
	}
	if (k->len + len + 1 > k->cap) {
		size_t cap = (k->len + len + 1) * 2;
		char *b = realloc(k->body, cap);

		if (!b)
			return -1;
		k->body = b;
		k->cap = cap;
	}
	memcpy(k->body + k->len, at, len);
	k->len += len;
	return 0;
}

static int call_done(http_parser *p)
{
	struct call *k = p->data;

	k->done = true;
	http_parser_pause(p, 1);
	return 0;
}

int hio_call(int fd, const char *method, const char *path, const char *body, const char *hdrs,
	     int timeout_ms, unsigned *status, char **out)
{
	static const http_parser_settings s = { .on_body = call_body,
						.on_message_complete = call_done };
	struct call k = { 0 };
	http_parser p;
	char *req = NULL, buf[8192];
	struct timespec t0, t;
	int n;

	*status = 0;
	if (out)
		*out = NULL;
	n = asprintf(&req, "%s %s HTTP/1.1\r\nHost: localhost\r\n%s%sContent-Length: %zu\r\n\r\n%s",
		     method, path, body ? "Content-Type: application/json\r\n" : "", hdrs ? hdrs : "",
		     body ? strlen(body) : 0, body ? body : "");
	if (n < 0)
		return -1;
	if (hio_write_all(fd, req, (size_t)n)) {
		free(req);
		return -1;
	}
	free(req);
	http_parser_init(&p, HTTP_RESPONSE);
	p.data = &k;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!k.done) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		long left;
		ssize_t got;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&pf, 1, (int)left) <= 0) {
			errno = ETIMEDOUT;
			goto fail;
		}
		got = recv(fd, buf, sizeof(buf), 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			goto fail;
		http_parser_execute(&p, &s, buf, (size_t)got);
		if (HTTP_PARSER_ERRNO(&p) != HPE_OK && HTTP_PARSER_ERRNO(&p) != HPE_PAUSED) {
			errno = k.big ? EFBIG : EPROTO;
			goto fail;
		}
		/* 1xx: an interim answer; the real one follows */
		if (k.done && p.status_code >= 100 && p.status_code < 200) {
			k.done = false;
			http_parser_init(&p, HTTP_RESPONSE);
			p.data = &k;
		}
		if (!got && !k.done) {
			errno = ECONNRESET;
			goto fail;
		}
	}
	*status = p.status_code;
	if (out && k.body) {
		k.body[k.len] = '\0';
		*out = k.body;
	} else {
		free(k.body);
	}
	return 0;
fail:
	free(k.body);
	return -1;
}
