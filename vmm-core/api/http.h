/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small HTTP/1.1 server on cubicle's event loop: requests parsed by
 * http-parser (Debian's libhttp-parser, dlopened on first use), keep-alive
 * and pipelining, chunked request bodies, header and body limits, idle
 * timeouts, a connection cap. The listening socket (Unix or TCP) is the
 * caller's; each complete request goes to one handler, on the loop thread,
 * which answers it with http_respond before returning.
 */
#ifndef CUBICLE_HTTP_H
#define CUBICLE_HTTP_H

#include <stdbool.h>
#include <stddef.h>

struct event_loop;
struct http_server;
struct http_conn;

/*
 * One request. @error non-zero: it could not be read (malformed, a limit
 * crossed); @error is the status to answer with and @why says what was
 * wrong; the connection closes after the answer.
 */
struct http_request {
	const char *method; /* "GET", "PUT", ... */
	const char *url;    /* the request target as sent, NUL-terminated */
	const char *body;   /* de-chunked; NUL-terminated, may hold NULs */
	size_t len;
	unsigned error;
	const char *why;
};

typedef void (*http_handler_fn)(void *arg, struct http_conn *c, const struct http_request *r);

struct http_limits {
	size_t header_max; /* request line + headers, bytes: 431 above */
	size_t body_max;   /* body, bytes: 413 above */
	unsigned conn_max; /* open connections; more are answered 503 and closed */
	unsigned idle_s;   /* a connection silent this long (mid-request too) is closed */
};

/* Load libhttp-parser: 0, or -ENOENT with how to install it in err. */
int http_load(char *err, size_t errlen);

/*
 * Serve connections accepted on the listening socket @lfd (non-blocking;
 * the server owns it from now on) on @ev. @ev NULL: nothing is watched;
 * connections come from http_server_adopt and run in http_server_poll (the
 * fuzzer). 0 or -errno with err.
 */
int http_server_new(struct http_server **out, struct event_loop *ev, int lfd,
		    const struct http_limits *lim, http_handler_fn fn, void *arg, char *err,
		    size_t errlen);
/* Close every connection and the listening socket. */
void http_server_free(struct http_server *s);

/* Serve the connected socket @fd (made non-blocking) as if accepted. */
int http_server_adopt(struct http_server *s, int fd);
/* Without an event loop: serve every connection as far as it goes; how
 * many are still open. */
unsigned http_server_poll(struct http_server *s);

/*
 * Answer the request being handled: @status with @body of @len bytes as
 * @content_type (NULL with no body). Exactly once per request. 0 or -ENOMEM.
 */
int http_respond(struct http_conn *c, unsigned status, const char *content_type,
		 const char *body, size_t len);

#endif
