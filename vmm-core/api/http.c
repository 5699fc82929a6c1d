/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/1.1 connections on the event loop, parsed by http-parser.
 *
 * Each connection is watched edge-triggered for input and output; its
 * callback runs a small state machine: send what is queued, and only when
 * all is sent parse the next request (from what is buffered, then from the
 * socket). A request is handed to the handler when http-parser reports it
 * complete; the parser is paused there, so pipelined requests are answered
 * one at a time and in order, and a client that does not read its answers
 * stops being read. Limits are counted here, in the parser's callbacks,
 * not by http-parser's own (process-global) header limit.
 *
 * libhttp-parser is dlopened like the rest of the API's weight: a VM with
 * no API maps nothing of it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "cnode.h"
#include "event.h"
#include "http.h"
#include "log.h"

#define IN_CHUNK 4096
/* A body over the limit is read and dropped up to this size, so the client
 * (which sends before it reads) gets its 413; a larger one is cut off. */
#define DISCARD_MAX (1u << 20)

static struct {
	void (*init)(http_parser *, enum http_parser_type);
	void (*settings_init)(http_parser_settings *);
	size_t (*execute)(http_parser *, const http_parser_settings *, const char *, size_t);
	int (*should_keep_alive)(const http_parser *);
	const char *(*method_str)(enum http_method);
	const char *(*status_str)(enum http_status);
	const char *(*errno_description)(enum http_errno);
	void (*pause)(http_parser *, int);
} hp;

int http_load(char *err, size_t errlen)
{
	static const char *const names[] = { "libhttp_parser.so.2.9", "libhttp_parser.so" };
	void *dl = NULL;

	if (hp.execute)
		return 0;
	for (unsigned i = 0; !dl && i < sizeof(names) / sizeof(names[0]); i++)
		dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!dl)
		return errf(err, errlen, -ENOENT,
				"the control API needs libhttp-parser (apt-get install libhttp-parser2.9): %s",
				dlerror());
#define SYM(field, name)                                                             \
	if (!(*(void **)&hp.field = dlsym(dl, name))) {                              \
		memset(&hp, 0, sizeof(hp));                                          \
		return errf(err, errlen, -ENOENT, "libhttp-parser has no %s", name); \
	}
	SYM(init, "http_parser_init")
	SYM(settings_init, "http_parser_settings_init")
	SYM(should_keep_alive, "http_should_keep_alive")
	SYM(method_str, "http_method_str")
	SYM(status_str, "http_status_str")
	SYM(errno_description, "http_errno_description")
	SYM(pause, "http_parser_pause")
	SYM(execute, "http_parser_execute")
#undef SYM
	return 0; /* kept loaded for the life of the process */
}

struct http_conn {
	struct http_server *s;
	struct http_conn *next, **pprev;
	int fd;
	http_parser p;
	char in[IN_CHUNK];
	size_t in_off, in_len; /* in[in_off, in_len) is read, not yet parsed */
	/* The request being read. */
	char *url, *body;
	size_t url_len, body_len, body_cap, head;
	char field[16];    /* the header name being read, lower-cased, cut short */
	size_t field_len;
	bool in_value;     /* between a value and the next name */
	bool expect_field; /* the header being read is Expect */
	bool expect;       /* Expect: 100-continue */
	bool started, complete;
	bool too_big;      /* the body is over the limit: read and dropped */
	unsigned error;
	const char *why;
	/* What goes back. */
	char *out;
	size_t out_off, out_len, out_cap;
	bool answered, close_after;
	struct timespec last;
};

struct http_server {
	struct event_loop *ev;
	int lfd, tfd;
	struct http_limits lim;
	http_handler_fn fn;
	void *arg;
	http_parser_settings settings;
	struct http_conn *conns;
	unsigned n_conns;
};

static double since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

/* ---- output ---- */

static int queue(struct http_conn *c, const char *data, size_t len)
{
	if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 1024;
		char *o;

		while (cap < c->out_len + len)
			cap *= 2;
		o = realloc(c->out, cap);
		if (!o)
			return -ENOMEM;
		c->out = o;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
	return 0;
}

int http_respond(struct http_conn *c, unsigned status, const char *content_type,
		 const char *body, size_t len)
{
	char head[512];
	int n;

	if (c->answered)
		return -EALREADY;
	c->answered = true;
	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %u %s\r\nServer: cubicle\r\n%s%s%sContent-Length: %zu\r\n%s\r\n",
		     status, hp.status_str((enum http_status)status),
		     content_type ? "Content-Type: " : "", content_type ? content_type : "",
		     content_type ? "\r\n" : "", body ? len : 0,
		     c->close_after ? "Connection: close\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(head) || queue(c, head, (size_t)n) ||
	    (body && len && queue(c, body, len))) {
		c->close_after = true;
		return -ENOMEM;
	}
	return 0;
}

/* Send what is queued: 1 when all is sent, 0 when the socket is full, -1
 * when the peer is gone. */
static int flush(struct http_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -1;
		}
		c->out_off += (size_t)n;
		clock_gettime(CLOCK_MONOTONIC, &c->last); /* a slow reader is not idle */
	}
	c->out_off = c->out_len = 0;
	return 1;
}

/* ---- parser callbacks: the request, within the limits ---- */

static struct http_conn *conn_of(http_parser *p)
{
	return p->data;
}

static int fail(struct http_conn *c, unsigned status, const char *why)
{
	if (!c->error) {
		c->error = status;
		c->why = why;
	}
	return -1; /* stops http_parser_execute */
}

static int count_head(struct http_conn *c, size_t n)
{
	c->head += n;
	return c->head > c->s->lim.header_max ? fail(c, 431, "the request's headers are too large")
					      : 0;
}

static int on_begin(http_parser *p)
{
	struct http_conn *c = conn_of(p);

	c->started = true;
	c->url_len = c->body_len = c->head = c->field_len = 0;
	c->in_value = c->expect_field = c->expect = c->too_big = false;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = conn_of(p);
	char *u;

	if (count_head(c, len))
		return -1;
	u = realloc(c->url, c->url_len + len + 1);
	if (!u)
		return fail(c, 500, "out of memory");
	memcpy(u + c->url_len, at, len);
	c->url = u;
	c->url_len += len;
	c->url[c->url_len] = '\0';
	return 0;
}

static int on_field(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = conn_of(p);

	if (count_head(c, len))
		return -1;
	if (c->in_value) {
		c->in_value = false;
		c->field_len = 0;
	}
	for (size_t i = 0; i < len; i++, c->field_len++)
		if (c->field_len < sizeof(c->field) - 1)
			c->field[c->field_len] = (char)(at[i] | 0x20);
	c->field[c->field_len < sizeof(c->field) ? c->field_len : sizeof(c->field) - 1] = '\0';
	c->expect_field = c->field_len == 6 && !strcmp(c->field, "expect");
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = conn_of(p);

	if (count_head(c, len))
		return -1;
	c->in_value = true;
	if (c->expect_field && len == 12 && !strncasecmp(at, "100-continue", 12))
		c->expect = true;
	return 0;
}

static int on_headers(http_parser *p)
{
	struct http_conn *c = conn_of(p);
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

	if (!c->url_len)
		return fail(c, 400, "the request has no target");
	if (p->http_major != 1)
		return fail(c, 505, "only HTTP/1.0 and HTTP/1.1 are served");
	if (!(p->flags & F_CHUNKED) && p->content_length != ULLONG_MAX &&
	    p->content_length > c->s->lim.body_max) {
		/* Told to wait (Expect), the client sends nothing more: answer
		 * now. Otherwise read what it sends, within reason. */
		if (c->expect || p->content_length > DISCARD_MAX)
			return fail(c, 413, "the request body is larger than the limit");
		c->too_big = true;
		return 0;
	}
	if (c->expect && queue(c, cont, sizeof(cont) - 1))
		return fail(c, 500, "out of memory");
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = conn_of(p);

	if (c->too_big || c->body_len + len > c->s->lim.body_max) {
		c->too_big = true;
		c->body_len += len;
		return c->body_len > DISCARD_MAX
			       ? fail(c, 413, "the request body is larger than the limit")
			       : 0;
	}
	if (c->body_len + len + 1 > c->body_cap) {
		size_t cap = c->body_cap ? c->body_cap : 256;
		char *b;

		while (cap < c->body_len + len + 1)
			cap *= 2;
		b = realloc(c->body, cap);
		if (!b)
			return fail(c, 500, "out of memory");
		c->body = b;
		c->body_cap = cap;
	}
	memcpy(c->body + c->body_len, at, len);
	c->body_len += len;
	return 0;
}

static int on_complete(http_parser *p)
{
	struct http_conn *c = conn_of(p);

	c->complete = true;
	hp.pause(p, 1); /* one request at a time: the rest stays buffered */
	return 0;
}

/* ---- connections ---- */

static void conn_free(struct http_conn *c)
{
	struct http_server *s = c->s;

	if (s->ev)
		event_unwatch(s->ev, c->fd);
	close(c->fd);
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	if (!--s->n_conns && s->tfd >= 0) {
		struct itimerspec off = { { 0, 0 }, { 0, 0 } };

		timerfd_settime(s->tfd, 0, &off, NULL);
	}
	free(c->url);
	free(c->body);
	free(c->out);
	free(c);
}

/* Hand the complete (or failed) request to the handler; queue its answer. */
static void handle(struct http_conn *c)
{
	struct http_request r = { .method = "", .url = c->url ? c->url : "", .len = c->body_len };
	static char empty[1];

	if (!c->error && c->too_big)
		fail(c, 413, "the request body is larger than the limit");
	if (c->error) {
		r.error = c->error;
		r.why = c->why;
		r.len = 0;
		c->close_after = true;
	} else {
		r.method = hp.method_str((enum http_method)c->p.method);
		if (!hp.should_keep_alive(&c->p))
			c->close_after = true;
	}
	if (c->body && !c->error)
		c->body[c->body_len] = '\0';
	r.body = c->body ? c->body : empty;
	c->answered = false;
	c->s->fn(c->s->arg, c, &r);
	if (!c->answered) {
		log_err("api: %s %s: the handler gave no answer", r.method, r.url);
		c->close_after = true;
		http_respond(c, 500, NULL, NULL, 0);
	}
	c->complete = c->started = false;
	c->error = 0;
	c->too_big = false;
	c->url_len = c->body_len = 0;
	/* Big bodies are not kept between requests. */
	if (c->body_cap > 4096) {
		free(c->body);
		c->body = NULL;
		c->body_cap = 0;
	}
}

/* Parse what is buffered: true when a request (or an error) is ready. */
static bool parse(struct http_conn *c)
{
	size_t n = hp.execute(&c->p, &c->s->settings, c->in + c->in_off, c->in_len - c->in_off);
	enum http_errno e = HTTP_PARSER_ERRNO(&c->p);

	c->in_off += n;
	if (e == HPE_PAUSED) {
		hp.pause(&c->p, 0);
		return true;
	}
	if (e != HPE_OK) {
		fail(c, 400, hp.errno_description(e));
		return true;
	}
	return c->complete;
}

static void conn_run(struct http_conn *c)
{
	for (;;) {
		int f = flush(c);
		ssize_t n;

		if (f < 0 || (f > 0 && c->close_after)) {
			conn_free(c);
			return;
		}
		if (!f)
			return; /* the peer reads its answer first */
		if (c->in_off < c->in_len) {
			if (parse(c))
				handle(c);
			continue;
		}
		n = recv(c->fd, c->in, sizeof(c->in), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			/* The peer is gone (or has no more to say): a request cut
			 * short gets no answer. */
			conn_free(c);
			return;
		}
		clock_gettime(CLOCK_MONOTONIC, &c->last);
		c->in_off = 0;
		c->in_len = (size_t)n;
	}
}

static void on_conn(void *arg)
{
	conn_run(arg);
}

int http_server_adopt(struct http_server *s, int fd)
{
	struct http_conn *c;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->s = s;
	c->fd = fd;
	hp.init(&c->p, HTTP_REQUEST);
	c->p.data = c;
	clock_gettime(CLOCK_MONOTONIC, &c->last);
	if (s->ev) {
		int ret = event_watch_control(s->ev, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
					      on_conn, c);

		if (ret) {
			free(c);
			return ret;
		}
	}
	c->next = s->conns;
	if (c->next)
		c->next->pprev = &c->next;
	c->pprev = &s->conns;
	s->conns = c;
	if (!s->n_conns++ && s->tfd >= 0) {
		struct itimerspec tick = { { 1, 0 }, { 1, 0 } };

		timerfd_settime(s->tfd, 0, &tick, NULL);
	}
	return 0;
}

unsigned http_server_poll(struct http_server *s)
{
	struct http_conn *c = s->conns, *next;

	for (; c; c = next) {
		next = c->next;
		conn_run(c);
	}
	return s->n_conns;
}

static void on_accept(void *arg)
{
	struct http_server *s = arg;

	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		int ret;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				log_warn("api: accept: %s", strerror(errno));
			return;
		}
		if (s->n_conns >= s->lim.conn_max) {
			static const char busy[] =
				"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
				"Connection: close\r\n\r\n";

			log_debug("api: %u connections open: one more refused", s->n_conns);
			if (send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
				log_debug("api: 503: %s", strerror(errno));
			close(fd);
			continue;
		}
		ret = http_server_adopt(s, fd);
		if (ret) {
			log_warn("api: cannot serve a connection: %s", strerror(-ret));
			close(fd);
			continue;
		}
		conn_run(s->conns); /* whatever came with the connection */
	}
}

/* Once a second while connections are open: close the silent ones. */
static void on_tick(void *arg)
{
	struct http_server *s = arg;
	struct http_conn *c, *next;
	uint64_t n;

	if (read(s->tfd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_debug("api: timer: %s", strerror(errno));
	for (c = s->conns; c; c = next) {
		next = c->next;
		if (since(&c->last) >= s->lim.idle_s) {
			log_debug("api: a connection silent for %u s closed", s->lim.idle_s);
			conn_free(c);
		}
	}
}

int http_server_new(struct http_server **out, struct event_loop *ev, int lfd,
		    const struct http_limits *lim, http_handler_fn fn, void *arg, char *err,
		    size_t errlen)
{
	struct http_server *s;
	int ret = http_load(err, errlen);

	if (ret)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s)
		return errf(err, errlen, -ENOMEM, "HTTP server: out of memory");
	s->ev = ev;
	s->lfd = lfd;
	s->tfd = -1;
	s->lim = *lim;
	s->fn = fn;
	s->arg = arg;
	hp.settings_init(&s->settings);
	s->settings.on_message_begin = on_begin;
	s->settings.on_url = on_url;
	s->settings.on_header_field = on_field;
	s->settings.on_header_value = on_value;
	s->settings.on_headers_complete = on_headers;
	s->settings.on_body = on_body;
	s->settings.on_message_complete = on_complete;
	if (ev) {
		s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (s->tfd < 0) {
			ret = -errno;
			s->lfd = -1; /* the caller's still */
			http_server_free(s);
			return errf(err, errlen, ret, "HTTP server: timer: %s", strerror(-ret));
		}
		ret = event_watch_control(ev, s->tfd, EPOLLIN, on_tick, s);
		if (!ret && lfd >= 0) {
			ret = event_watch_control(ev, lfd, EPOLLIN, on_accept, s);
			if (ret)
				event_unwatch(ev, s->tfd);
		}
		if (ret) {
			close(s->tfd);
			s->tfd = -1;
			s->lfd = -1;
			http_server_free(s);
			return errf(err, errlen, ret, "HTTP server: cannot watch its socket: %s",
					strerror(-ret));
		}
	}
	*out = s;
	return 0;
}

void http_server_free(struct http_server *s)
{
	if (!s)
		return;
	while (s->conns)
		conn_free(s->conns);
	if (s->ev && s->lfd >= 0)
		event_unwatch(s->ev, s->lfd);
	if (s->ev && s->tfd >= 0)
		event_unwatch(s->ev, s->tfd);
	if (s->tfd >= 0)
		close(s->tfd);
	if (s->lfd >= 0)
		close(s->lfd);
	free(s);
}
