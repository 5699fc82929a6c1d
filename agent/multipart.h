/* SPDX-License-Identifier: Apache-2.0 */
/* A streaming multipart/form-data parser: any body size, boundaries across buffer edges. */
#ifndef CUBICLE_AGENT_MULTIPART_H
#define CUBICLE_AGENT_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

#define MP_BOUNDARY_MAX 70 /* RFC 2046 */
#define MP_HEADERS_MAX 8192
#define MP_NAME_MAX 4096

/*
 * What the parser reports (each returns 0, or a negative value to stop with it).
 * part:  a part's headers are in: its form field NAME and FILENAME ("" when absent).
 * data:  bytes of the current part's content, in order.
 * end:   the current part's content is complete.
 */
struct mp_ops {
	int (*part)(void *arg, const char *name, const char *filename);
	int (*data)(void *arg, const char *data, size_t len);
	int (*end)(void *arg);
};

enum mp_state { MP_PREAMBLE, MP_AFTER_DELIM, MP_AFTER_DELIM_CR, MP_AFTER_DASH,
	MP_HEADERS, MP_BODY, MP_DONE, MP_ERROR };

struct multipart {
	const struct mp_ops *ops;
	void *arg;
	enum mp_state state;
	/* "\r\n--" BOUNDARY */
	char delim[4 + MP_BOUNDARY_MAX + 1];
	size_t dlen;
	size_t match; /* how much of delim the latest bytes matched */
	char hdr[MP_HEADERS_MAX + 1];
	size_t hlen;
	bool in_part;
	const char *error;
};

/* Reads the boundary from a Content-Type value; 0 or -1 (not multipart/form-data, bad boundary). */
int mp_boundary(const char *ctype, char *out, size_t len);
void mp_init(struct multipart *m, const char *boundary, const struct mp_ops *ops, void *arg);
/* Feeds body bytes: 0, -1 on a syntax error (m->error says what), or an ops return value. */
int mp_feed(struct multipart *m, const char *data, size_t len);
/* The body ended: 0 when the closing delimiter was seen, else -1. */
int mp_finish(struct multipart *m);

#endif
