/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's process event stream as cubicle exec reads it: envelopes to events, output to fds, the exit status. */
#ifndef CUBICLE_EXEC_STREAM_H
#define CUBICLE_EXEC_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"

/*
 * The state of one process.Process/Start (or Connect) response body: fed in
 * pieces of any size, as they come off the connection. Everything in it is
 * the guest's word, so every length is bounded (max per message) and any
 * malformed message ends the stream with a reason.
 */
struct stream {
	int out_fd, err_fd;    /* where stdout (and pty) and stderr data go */
	struct env_reader rd;
	long pid;              /* from the start event, -1 before */
	bool got_end, got_eos; /* the end event; the end-of-stream message */
	bool out_closed;       /* out_fd said EPIPE: its data is dropped since */
	int status;            /* the exit status the end event gives */
	char *fail;            /* why the stream is unusable, or NULL */
	char *eos_error;       /* the end-of-stream message's error, or NULL */
	uint8_t *dec;
	size_t dec_cap;
	/* called on the feeding thread (optional): the pid is known; out_fd is gone */
	void (*on_start)(void *arg, long pid);
	void (*on_out_closed)(void *arg);
	void *arg;
};

void stream_init(struct stream *s, int out_fd, int err_fd, uint32_t max);
void stream_free(struct stream *s);

/* Feed n bytes. 0, or -1 with the reason in s->fail (then stop feeding). */
int stream_feed(struct stream *s, const void *data, size_t n);

/* True when nothing is half read. */
bool stream_idle(const struct stream *s);

/* The agent's error reply ({"code","message"}, or text) as one line (free
 * it), or NULL. */
char *agent_error_text(const char *body, size_t n);

#endif
