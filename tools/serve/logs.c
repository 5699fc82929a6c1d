/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's logs (GET /sandboxes/ID/logs, /v2/sandboxes/ID/logs): its
 * VMM's log file read back as E2B's log entries. The file holds the VMM's
 * own lines, each after its UTC time (`2026-12-06T11:23:00.123Z cubicle:
 * warning: ...`: the VMM stamps its lines when they go to a file), and what
 * the guest wrote on a stdio console, which carries no time: such a line
 * takes the time of the VMM line before it (the first one's, before any;
 * the sandbox's start in a log with none). A file console's output is a
 * file of its own (DEVICE.log), not read here. Levels: a VMM line's own
 * (error, warning as warn, debug), info for the rest; each entry's fields
 * say its source, "vmm" or "console". The last LOGS_TAIL bytes of the file
 * are read (a long-lived guest's console may have written far more).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#define LOGS_TAIL (4 << 20)
#define LOGS_LINE 4096 /* a longer line's message is cut there */

json_t *text_json(char *s)
{
	json_t *j = json_string(s);

	if (j)
		return j;
	for (unsigned char *p = (unsigned char *)s; *p; p++)
		if (*p >= 0x80)
			*p = '?';
	return json_string(s);
}

static const char *const level_name[] = { "debug", "info", "warn", "error" };

int logs_level(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (!strcmp(name, level_name[i]))
			return i;
	return -1;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ " at @p: its time in ms since the epoch, and
 * *rest past it; -1 when @p does not start so. */
static long long stamp_of(char *p, size_t n, char **rest)
{
	struct tm tm = { 0 };
	const char *e;
	int ms;

	if (n < 25 || p[4] != '-' || p[10] != 'T' || p[19] != '.' || p[23] != 'Z' || p[24] != ' ')
		return -1;
	e = strptime(p, "%Y-%m-%dT%H:%M:%S", &tm);
	if (e != p + 19 || p[20] < '0' || p[20] > '9' || p[21] < '0' || p[21] > '9' || p[22] < '0' ||
	    p[22] > '9')
		return -1;
	ms = (p[20] - '0') * 100 + (p[21] - '0') * 10 + (p[22] - '0');
	*rest = p + 25;
	return (long long)timegm(&tm) * 1000 + ms;
}

static void iso_ms(long long ms, char *out, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	strftime(out, len, "%Y-%m-%dT%H:%M:%S", gmtime_r(&t, &tm));
	snprintf(out + strlen(out), len - strlen(out), ".%03dZ", (int)(ms % 1000));
}

/* The level of a VMM line's @n bytes at @w (past "cubicle: "). */
static int vmm_level(const char *w, size_t n)
{
	const char *end = w + n, *c;

	if (n && *w == '[' && (c = memchr(w, ']', n)) && c + 1 < end && c[1] == ' ')
		w = c + 2;
	for (int tries = 0; tries < 2 && w < end; tries++) {
		if ((size_t)(end - w) >= 7 && !memcmp(w, "error: ", 7))
			return 3;
		if ((size_t)(end - w) >= 9 && !memcmp(w, "warning: ", 9))
			return 2;
		if ((size_t)(end - w) >= 7 && !memcmp(w, "debug: ", 7))
			return 0;
		/* past a plugin's name */
		if (!(c = memmem(w, (size_t)(end - w), ": ", 2)))
			break;
		w = c + 2;
	}
	return 1;
}

struct entry {
	long long ms;
	int level;
	bool vmm;
	char *msg; /* in the buffer, @n bytes */
	size_t n;
};

static json_t *entry_json(const struct entry *e, bool line)
{
	char when[40], text[LOGS_LINE + 1];
	size_t n = e->n < LOGS_LINE ? e->n : LOGS_LINE;

	iso_ms(e->ms, when, sizeof(when));
	memcpy(text, e->msg, n);
	text[n] = '\0';
	if (line)
		return json_pack("{s:s,s:o}", "timestamp", when, "line", text_json(text));
	return json_pack("{s:s,s:s,s:o,s:{s:s}}", "timestamp", when, "level", level_name[e->level], "message",
			 text_json(text), "fields", "source", e->vmm ? "vmm" : "console");
}

/* The last LOGS_TAIL bytes of @path (from a line's start) in *buf: their
 * length, or -1 with errno. */
static ssize_t tail_of(const char *path, char **buf)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	off_t from;
	ssize_t n = 0, r;
	char *b, *nl;

	*buf = NULL;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !(b = malloc(LOGS_TAIL + 1))) {
		close(fd);
		return errno = errno ? errno : ENOMEM, -1;
	}
	from = st.st_size > LOGS_TAIL ? st.st_size - LOGS_TAIL : 0;
	while (n < LOGS_TAIL && (r = pread(fd, b + n, (size_t)(LOGS_TAIL - n), from + n)) > 0)
		n += r;
	close(fd);
	b[n] = '\0';
	if (from && (nl = memchr(b, '\n', (size_t)n))) { /* a line cut at the front */
		n -= nl + 1 - b;
		memmove(b, nl + 1, (size_t)n + 1);
	}
	*buf = b;
	return n;
}

int sbx_logs(const struct sandbox *s, const struct logs_query *q, bool v2, json_t **out, char *msg, size_t len)
{
	char path[300], *buf;
	ssize_t n;
	long long last = (long long)s->started * 1000;
	struct entry *keep;
	size_t kept = 0, next = 0;
	json_t *logs, *entries = NULL;

	snprintf(path, sizeof(path), "%s/%s", s->dir, s->log_name ? s->log_name : "vmm.log");
	n = tail_of(path, &buf);
	if (n < 0 && errno != ENOENT)
		return snprintf(msg, len, "sandbox %s: its log: %s", s->id, strerror(errno)), 500;
	/* lines before the first stamped one take its time (else the
	 * sandbox's start): the entries' times never go back */
	for (char *p = buf, *end; p && n > 0 && p < buf + n; p = end ? end + 1 : NULL) {
		char *rest;
		long long ms;

		end = memchr(p, '\n', (size_t)(buf + n - p));
		if ((ms = stamp_of(p, end ? (size_t)(end - p) : (size_t)(buf + n - p), &rest)) >= 0) {
			last = ms;
			break;
		}
	}
	keep = calloc(q->limit ? q->limit : 1, sizeof(*keep));
	if (!keep) {
		free(buf);
		return snprintf(msg, len, "out of memory"), 500;
	}
	/* forward: the first @limit entries at or after the start; backward:
	 * the last @limit at or before it (a ring), newest first */
	for (char *p = buf, *end; p && n > 0 && p < buf + n && (q->backward || kept < q->limit); p = end ? end + 1 : NULL) {
		struct entry e = { .level = 1 };
		char *rest;
		long long ms;
		size_t l;

		end = memchr(p, '\n', (size_t)(buf + n - p));
		l = end ? (size_t)(end - p) : (size_t)(buf + n - p);
		if (!l)
			continue;
		ms = stamp_of(p, l, &rest);
		e.msg = p;
		if (ms >= 0) {
			last = ms;
			e.msg = rest;
			if (!strncmp(rest, "cubicle: ", 9)) {
				/* "cubicle: ", with --log-level debug "[T ms] ",
				 * a plugin's "NAME: " or not, then the level's
				 * word ("" for info) */
				e.vmm = true;
				e.level = vmm_level(rest + 9, (size_t)(p + l - rest) - 9);
			}
		}
		e.ms = last;
		e.n = l - (size_t)(e.msg - p);
		if (e.level < q->min_level || (q->has_start && (q->backward ? e.ms > q->start : e.ms < q->start)))
			continue;
		if (*q->search) {
			char c = e.msg[e.n];
			bool found;

			e.msg[e.n] = '\0'; /* (the line's '\n', or the buffer's NUL) */
			found = strstr(e.msg, q->search);
			e.msg[e.n] = c;
			if (!found)
				continue;
		}
		if (!q->limit)
			break;
		keep[next] = e;
		next = (next + 1) % q->limit;
		if (kept < q->limit)
			kept++;
	}
	logs = json_array();
	if (!v2)
		entries = json_array();
	for (size_t i = 0; i < kept; i++) {
		/* backward: from the newest, which is before @next in the ring;
		 * forward stopped at @limit, so its ring never turned */
		const struct entry *e = q->backward ? &keep[(next + q->limit - 1 - i) % q->limit] : &keep[i];

		json_array_append_new(logs, entry_json(e, !v2));
		if (entries)
			json_array_append_new(entries, entry_json(e, false));
	}
	free(keep);
	free(buf);
	*out = v2 ? json_pack("{s:o}", "logs", logs) : json_pack("{s:o,s:o}", "logs", logs, "logEntries", entries);
	return *out ? 0 : (snprintf(msg, len, "out of memory"), 500);
}
