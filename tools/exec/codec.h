/* SPDX-License-Identifier: Apache-2.0 */
/* The agent protocol's byte codecs: Connect's stream envelopes (base64 is agent/b64.h's). */
#ifndef CUBICLE_EXEC_CODEC_H
#define CUBICLE_EXEC_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "b64.h" /* agent/b64.c: base64, shared with cubicle-agent */

/* Connect's envelope flags. */
#define ENV_COMPRESSED 0x01
#define ENV_END_STREAM 0x02
#define ENV_HDR_LEN    5

/* Write the 5-byte header of a message of len bytes. */
void env_header(uint8_t flags, uint32_t len, uint8_t hdr[ENV_HDR_LEN]);

/*
 * An envelope stream read in pieces of any size: messages are handed to a
 * callback whole. A message longer than max is refused before any of it is
 * buffered, so a hostile peer cannot make the reader hold more than max.
 */
struct env_reader {
	uint32_t max;
	uint8_t hdr[ENV_HDR_LEN];
	unsigned hdr_got;
	uint8_t flags;
	uint32_t len, got;
	uint8_t *buf;
};

/* Called for each whole message; a non-zero return stops env_feed with it. */
typedef int env_msg_fn(void *arg, uint8_t flags, const uint8_t *msg, uint32_t len);

void env_init(struct env_reader *r, uint32_t max);
void env_free(struct env_reader *r);

/*
 * Feed n bytes. Returns 0, the callback's non-zero value, -EMSGSIZE for a
 * message over max, or -ENOMEM. After an error the reader is unusable.
 */
int env_feed(struct env_reader *r, const void *data, size_t n, env_msg_fn *fn, void *arg);

/* True at a message boundary (nothing half read). */
bool env_idle(const struct env_reader *r);

#endif
