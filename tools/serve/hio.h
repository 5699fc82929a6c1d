/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle-serve's HTTP/1.1 on blocking sockets, parsed by http-parser: a client connection's requests, replies, and a small client. */
#ifndef CUBICLE_SERVE_HIO_H
#define CUBICLE_SERVE_HIO_H

#include <http_parser.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define HIO_HEAD_MAX (32u << 10) /* a request's or response's head */
#define HIO_HDR_COUNT 64
#define HIO_IN (64u << 10)

/* One client connection; served by one thread, one request at a time. */
struct hconn {
	int fd;
	char in[HIO_IN];            /* read, not yet consumed */
	size_t in_off, in_len;
	int up_fd;                  /* the proxied sandbox connection kept for reuse, or -1 */
	char up_id[32];
	unsigned up_port;
	bool close;                 /* end the connection after this response */
	char peer[64];
};

struct hreq {
	http_parser p;
	int method;                 /* enum http_method */
	char head[HIO_HEAD_MAX];    /* the raw head, as received */
	size_t head_len;
	char url[4096];
	char *path, *query;         /* into url (query: after '?', or "") */
	char hbuf[HIO_HEAD_MAX];    /* header names and values, NUL-terminated */
	size_t hbuf_len;
	struct { const char *name, *value; } h[HIO_HDR_COUNT];
	unsigned nh;
	bool done;                  /* the whole message (head and body) was parsed */
	bool keep_alive;
	bool bad;                   /* too many headers, too long */
	/* body sink while parsing */
	char *body;
	size_t body_len, body_max;
	bool too_big;
};

/* Reads and parses the next request's head: 0, 1 at a clean end of the
 * connection (or an idle timeout), -1 on a broken or malformed request
 * (answered with 400/431 when possible). */
int hio_read_head(struct hconn *c, struct hreq *r);
/* A header's value (case-insensitive name), or NULL. */
const char *hreq_header(const struct hreq *r, const char *name);
/* The whole body, at most @max bytes, into r->body (NUL-terminated; free
 * it): 0, 413 when too big, -1 on a broken connection. */
int hio_read_body(struct hconn *c, struct hreq *r, size_t max);
/* The rest of the request, raw (head already sent), to @fd, a socket or
 * (@file) a file: 0 or -1. */
int hio_forward_body(struct hconn *c, struct hreq *r, int fd, bool file);

/* Replies; @hdrs are extra "Name: value\r\n" lines or NULL. 0 or -1. */
int hio_reply(struct hconn *c, unsigned status, const char *ctype, const void *body,
	      size_t len, const char *hdrs);
/* A JSON body (the reference is taken). */
int hio_reply_json(struct hconn *c, unsigned status, json_t *j, const char *hdrs);
/* E2B's error body {"code": status, "message": ...}. */
int hio_error(struct hconn *c, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* All of @buf to socket @fd: 0 or -1. */
int hio_write_all(int fd, const void *buf, size_t len);

/*
 * A request on an open socket @fd (a VMM's API, a guest agent):
 * METHOD PATH with @body (may be NULL) of type application/json and extra
 * header lines @hdrs; waits at most @timeout_ms. 0 with *status and the
 * response body in *out (NUL-terminated, free it; may be NULL), or -1.
 */
int hio_call(int fd, const char *method, const char *path, const char *body, const char *hdrs,
	     int timeout_ms, unsigned *status, char **out);

#endif
