/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's process event stream as cubicle exec reads it: envelopes to events, output to fds, the exit status. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "stream.h"

char *agent_error_text(const char *body, size_t n)
{
	json_t *j = body && n ? json_loadb(body, n, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(j, "message"));
	json_t *code = json_object_get(j, "code");
	char *out = NULL;

	if (msg) {
		char num[32] = "";

		if (json_is_integer(code))
			snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(code));
		if (asprintf(&out, "%s%s%.300s", json_is_string(code) ? json_string_value(code) : num,
			     json_is_string(code) || *num ? ": " : "", msg) < 0)
			out = NULL;
	} else if (body && n) {
		size_t len = n < 300 ? n : 300;

		out = malloc(len + 1);
		if (out) {
			for (size_t i = 0; i < len; i++)
				out[i] = isprint((unsigned char)body[i]) ? body[i] : ' ';
			while (len && out[len - 1] == ' ')
				len--;
			out[len] = '\0';
		}
	}
	json_decref(j);
	return out;
}

__attribute__((format(printf, 2, 3))) static void set_fail(struct stream *r, const char *fmt, ...)
{
	va_list ap;

	if (r->fail)
		return;
	va_start(ap, fmt);
	if (vasprintf(&r->fail, fmt, ap) < 0)
		r->fail = NULL;
	va_end(ap);
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static const char *const out_names[] = { "stdout", "stderr", "pty" };

/* Base64 text S (N bytes) decoded into r->dec: its length, -1 not base64, -2 out of memory. */
static long out_decode(struct stream *r, const char *s, size_t n)
{
	size_t need = n / 4 * 3 + 3;

	if (need > r->dec_cap) {
		uint8_t *p = realloc(r->dec, need);

		if (!p)
			return -2;
		r->dec = p;
		r->dec_cap = need;
	}
	return b64_decode(s, n, r->dec, r->dec_cap);
}

/* LEN decoded bytes of output I to their fd. */
static void out_put(struct stream *r, unsigned i, long len)
{
	int fd = i == 1 ? r->err_fd : r->out_fd;

	if (fd == r->out_fd && r->out_closed)
		return;
	if (write_all(fd, r->dec, (size_t)len) == -EPIPE && fd == r->out_fd) {
		r->out_closed = true;
		if (r->on_out_closed)
			r->on_out_closed(r->arg);
	}
}

/* Base64 text S (N bytes) of output I decoded and written: 0, or -1 with why. */
static int out_write(struct stream *r, unsigned i, const char *s, size_t n)
{
	long len = out_decode(r, s, n);

	if (len == -2)
		return set_fail(r, "out of memory"), -1;
	if (len < 0)
		return set_fail(r, "the agent sent bad base64 for %s", out_names[i]), -1;
	out_put(r, i, len);
	return 0;
}

static int on_data(struct stream *r, json_t *data)
{
	for (unsigned i = 0; i < 3; i++) {
		json_t *v = json_object_get(data, out_names[i]);

		if (json_is_string(v) && out_write(r, i, json_string_value(v), json_string_length(v)))
			return -1;
	}
	return 0;
}

/*
 * Output comes in messages of hundreds of KiB, nearly all base64: jansson's
 * lexer and copies cost more than everything else together. A message that
 * is exactly {"event":{"data":{"stdout":"<base64>"}}} (or stderr, pty; as
 * the agent writes it) has only one meaning, so it is decoded in place;
 * anything else, or base64 that does not decode, goes to jansson as before.
 * 1 handled, 0 not this form, -1 failed.
 */
static int data_fast(struct stream *r, const uint8_t *msg, uint32_t len)
{
	static const char pre[] = "{\"event\":{\"data\":{\"", post[] = "\"}}}";
	const size_t pl = sizeof(pre) - 1, sl = sizeof(post) - 1;
	const char *m = (const char *)msg;

	if (len < pl + sl || memcmp(m, pre, pl) || memcmp(m + len - sl, post, sl))
		return 0;
	for (unsigned i = 0; i < 3; i++) {
		size_t nl = strlen(out_names[i]);
		long n;

		if (len < pl + nl + 3 + sl || memcmp(m + pl, out_names[i], nl) ||
		    memcmp(m + pl + nl, "\":\"", 3))
			continue;
		n = out_decode(r, m + pl + nl + 3, len - (pl + nl + 3 + sl));
		/* Quotes or backslashes in it (more JSON, not base64) fail the decode: jansson then. */
		if (n == -2)
			return set_fail(r, "out of memory"), -1;
		if (n < 0)
			return 0;
		out_put(r, i, n);
		return 1;
	}
	return 0;
}
/* The exit status for an end event: the code when the command exited, else
 * 128 + the signal named in status ("signal: killed", Go's form, or a number). */
static int end_status(json_t *end)
{
	static const struct { const char *name; int sig; } sigs[] = {
		{ "hangup", 1 }, { "interrupt", 2 }, { "quit", 3 }, { "illegal instruction", 4 },
		{ "trace/breakpoint trap", 5 }, { "aborted", 6 }, { "bus error", 7 },
		{ "floating point exception", 8 }, { "killed", 9 }, { "user defined signal 1", 10 },
		{ "segmentation fault", 11 }, { "user defined signal 2", 12 }, { "broken pipe", 13 },
		{ "alarm clock", 14 }, { "terminated", 15 },
	};
	json_t *jc = json_object_get(end, "exitCode");
	const char *st = json_string_value(json_object_get(end, "status"));
	long long code = json_is_integer(jc) ? json_integer_value(jc)
			 : json_is_string(jc)	  ? strtoll(json_string_value(jc), NULL, 10)
						  : 0;

	if (json_is_true(json_object_get(end, "exited")))
		return (int)(code & 0xff);
	if (st && !strncmp(st, "signal: ", 8)) {
		const char *name = st + 8;

		if (!strncmp(name, "SIG", 3))
			name += 3;
		if (*name >= '1' && *name <= '9')
			return 128 + (atoi(name) & 0x7f);
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			if (!strncasecmp(name, sigs[i].name, strlen(sigs[i].name)))
				return 128 + sigs[i].sig;
		return 128 + 9; /* a signal we cannot name */
	}
	if (code < 0)
		return 128 + 9;
	return (int)(code & 0xff);
}

static int on_msg(void *arg, uint8_t flags, const uint8_t *msg, uint32_t len)
{
	struct stream *r = arg;
	json_t *j, *ev, *x;

	if (flags & ENV_COMPRESSED)
		return set_fail(r, "the agent sent a compressed message"), -1;
	if (r->got_eos)
		return set_fail(r, "the agent sent more after the end of the stream"), -1;
	if (!(flags & ENV_END_STREAM)) {
		int fast = data_fast(r, msg, len);

		if (fast)
			return fast < 0 ? -1 : 0;
	}
	j = json_loadb((const char *)msg, len, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		return set_fail(r, "the agent sent a message that is not a JSON object"), -1;
	}
	if (flags & ENV_END_STREAM) {
		r->got_eos = true;
		if ((x = json_object_get(j, "error"))) {
			char *s = json_dumps(x, JSON_COMPACT);

			r->eos_error = s ? agent_error_text(s, strlen(s)) : NULL;
			free(s);
			if (!r->eos_error)
				r->eos_error = strdup("(no message)");
		}
		json_decref(j);
		return 0;
	}
	ev = json_object_get(j, "event");
	if ((x = json_object_get(ev, "start"))) {
		json_t *p = json_object_get(x, "pid");
		long long pid = json_is_integer(p) ? json_integer_value(p) : -1;

		if (pid <= 0 || pid > 0x7fffffff) {
			json_decref(j);
			return set_fail(r, "the agent's start event has no pid"), -1;
		}
		if (r->pid > 0) {
			json_decref(j);
			return set_fail(r, "the agent sent a second start event"), -1;
		}
		r->pid = (long)pid;
		if (r->on_start)
			r->on_start(r->arg, r->pid);
	} else if ((x = json_object_get(ev, "data"))) {
		if (on_data(r, x)) {
			json_decref(j);
			return -1;
		}
	} else if ((x = json_object_get(ev, "end"))) {
		const char *e = json_string_value(json_object_get(x, "error"));
		const char *st = json_string_value(json_object_get(x, "status"));

		/* envd repeats the status ("exit status 3") as the error of any
		 * non-zero end: that is the exit status, not news for stderr. */
		if (e && *e && !(st && !strcmp(e, st)))
			dprintf(r->err_fd, "cubicle exec: the agent: %.300s\n", e);
		r->status = end_status(x);
		r->got_end = true;
	}
	json_decref(j);
	return 0;
}


void stream_init(struct stream *s, int out_fd, int err_fd, uint32_t max)
{
	memset(s, 0, sizeof(*s));
	s->out_fd = out_fd;
	s->err_fd = err_fd;
	s->pid = -1;
	env_init(&s->rd, max);
}

void stream_free(struct stream *s)
{
	env_free(&s->rd);
	free(s->dec);
	free(s->fail);
	free(s->eos_error);
	s->dec = NULL;
	s->fail = s->eos_error = NULL;
}

int stream_feed(struct stream *s, const void *data, size_t n)
{
	int ret;

	if (s->fail)
		return -1;
	ret = env_feed(&s->rd, data, n, on_msg, s);
	if (ret == -EMSGSIZE)
		set_fail(s, "the agent sent a message over %u MiB", s->rd.max >> 20);
	else if (ret)
		set_fail(s, "cannot read the agent's stream: %s", ret < 0 ? strerror(-ret) : "");
	return ret ? -1 : 0;
}

bool stream_idle(const struct stream *s)
{
	return env_idle(&s->rd);
}
