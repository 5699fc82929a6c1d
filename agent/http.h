/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle-agent's HTTP/1.1 connections: requests in, responses out, bounded buffers. */
#ifndef CUBICLE_AGENT_HTTP_H
#define CUBICLE_AGENT_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct conn;

/* Limits of one connection. */
#define HTTP_URL_MAX 8192
#define HTTP_HDR_MAX 16384     /* all header names and values together */
#define HTTP_HDR_COUNT 64
#define HTTP_BODY_MAX (8u << 20) /* a buffered (RPC) body */
#define HTTP_OUT_MAX (1u << 20) /* what producers may queue */
#define HTTP_OUT_SLACK (384u << 10) /* room a producer needs: a 256 KiB output event in base64 */

/*
 * What a request's handler hooks into its connection (all optional).
 * body:     bytes of a streamed request body, in order; returns 0, or -1 when
 *           it replied with an error (the rest of the body is then dropped).
 * complete: the streamed body has ended.
 * writable: queued output went out; a producer may queue more.
 * closed:   the connection is going away: drop every reference to it.
 * All run on the event loop; none may free the connection.
 */
struct conn_ops {
	int (*body)(struct conn *c, const char *data, size_t len);
	void (*complete)(struct conn *c);
	void (*writable)(struct conn *c);
	void (*closed)(struct conn *c);
};

/* Accepts on a listening socket. 0 or -errno. */
int http_listen(int lfd);

/* Request access. The path stays valid until the connection's next request. */
const char *http_path(const struct conn *c);
const char *http_header(const struct conn *c, const char *name);
/* The I-th header as sent: 0, or -ENOENT past the last. */
int http_header_at(const struct conn *c, unsigned i, const char **name, const char **value);
/* The value of KEY in the URL's query, percent-decoded; -ENOENT, -EINVAL, -ENAMETOOLONG. */
int http_query(const char *query, const char *key, char *out, size_t len);
/* Streams the request body to OPS (from http_route only). */
void http_stream_body(struct conn *c, const struct conn_ops *ops, void *ctx);
void http_set_ops(struct conn *c, const struct conn_ops *ops, void *ctx);
void *http_ctx(const struct conn *c);

/* Responses. A whole one: */
void http_reply(struct conn *c, int status, const char *ctype, const void *body, size_t len);
void http_reply_json(struct conn *c, int status, json_t *v); /* steals v */
/* In parts: LENGTH < 0 means chunked (or to the close for HTTP/1.0). */
void http_begin(struct conn *c, int status, const char *ctype, int64_t length);
void http_write(struct conn *c, const void *data, size_t len);
void http_end(struct conn *c);
/* True when a producer may queue HTTP_OUT_SLACK more bytes. */
bool http_can_write(const struct conn *c);
bool http_dead(const struct conn *c);
/* Drops the connection (a stream that cannot go on). */
void http_abort(struct conn *c);
/* The connection's socket, and the bytes received past the current
 * request's head (a connection taken over: agent/bridge.c). */
int http_fd(const struct conn *c);
void http_rest(const struct conn *c, const char **rest, size_t *len);

/* Routing, in main.c: called once the request's headers are in. */
void http_route(struct conn *c, int method, const char *path, const char *query);
/* A buffered request body is complete (set by http_buffer_body). */
typedef void http_body_fn(struct conn *c, const char *body, size_t len);
void http_buffer_body(struct conn *c, http_body_fn *fn);

#endif
