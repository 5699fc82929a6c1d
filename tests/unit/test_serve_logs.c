/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of tools/serve/logs.c: a sandbox's VMM log file read back as
 * E2B's log entries. Crafted logs: the VMM's stamped lines at each level,
 * with --log-level debug's times and a plugin's name; console lines before
 * and between them; bytes that are not UTF-8, a NUL, a line past 4096
 * bytes; a file past the 4 MiB read (its first line cut); forward and
 * backward, limits, levels, search, cursors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cunit_main.h"
#include "serve.h"

static struct sandbox sb;
static char dir[] = "/tmp/test_serve_logs.XXXXXX";

static void write_log(const char *text, size_t n)
{
	char path[300];
	FILE *f;

	snprintf(path, sizeof(path), "%s/vmm.log", dir);
	f = fopen(path, "w");
	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT_FATAL(fwrite(text, 1, n, f) == n);
	fclose(f);
}

/* The answer for @q (v2 unless @v1): the "logs" array, a reference held by @out. */
static json_t *logs_for(const struct logs_query *q, bool v1, json_t **out)
{
	char msg[300];

	CU_ASSERT_EQUAL_FATAL(sbx_logs(&sb, q, !v1, out, msg, sizeof(msg)), 0);
	return json_object_get(*out, "logs");
}

static const char *field(json_t *a, size_t i, const char *k)
{
	return json_string_value(json_object_get(json_array_get(a, i), k));
}

static const char *source(json_t *a, size_t i)
{
	return json_string_value(json_object_get(json_object_get(json_array_get(a, i), "fields"), "source"));
}

static const char sample[] =
	"SeaBIOS-like console line before any stamp\n"
	"2026-12-06T11:23:00.123Z cubicle: restoring /x/snap\n"
	"2026-12-06T11:23:00.200Z cubicle: warning: virtio-net: slow\n"
	"[    0.000000] Linux version 6.1\n"
	"\n"
	"2026-12-06T11:23:01.000Z cubicle: com1: error: a plugin's error\n"
	"2026-12-06T11:23:01.500Z cubicle: [   12.345 ms] debug: a debug line\n"
	"2026-12-06T11:23:01.600Z cubicle: [   12.400 ms] warning: a warning with debug on\n"
	"2026-12-06T11:23:02.000Z cubicle: restored x: y; paused\n"
	"login: \xff\xfe not UTF-8\n"
	"2026-13-45T99:99:99.999Z not a time\n"
	"a last line with no newline";

static void test_entries(void)
{
	struct logs_query q = { .limit = 1000 };
	json_t *out, *a;

	write_log(sample, sizeof(sample) - 1);
	a = logs_for(&q, false, &out);
	CU_ASSERT_EQUAL_FATAL(json_array_size(a), 11);
	/* a console line before any stamp takes the first stamp's time */
	CU_ASSERT_STRING_EQUAL(field(a, 0, "timestamp"), "2026-12-06T11:23:00.123Z");
	CU_ASSERT_STRING_EQUAL(source(a, 0), "console");
	CU_ASSERT_STRING_EQUAL(field(a, 0, "level"), "info");
	CU_ASSERT_STRING_EQUAL(field(a, 1, "message"), "cubicle: restoring /x/snap");
	CU_ASSERT_STRING_EQUAL(source(a, 1), "vmm");
	CU_ASSERT_STRING_EQUAL(field(a, 1, "level"), "info");
	CU_ASSERT_STRING_EQUAL(field(a, 2, "level"), "warn");
	/* a console line between: the time of the VMM line before it */
	CU_ASSERT_STRING_EQUAL(field(a, 3, "timestamp"), "2026-12-06T11:23:00.200Z");
	CU_ASSERT_STRING_EQUAL(field(a, 3, "message"), "[    0.000000] Linux version 6.1");
	CU_ASSERT_STRING_EQUAL(source(a, 3), "console");
	CU_ASSERT_STRING_EQUAL(field(a, 4, "level"), "error");
	CU_ASSERT_STRING_EQUAL(field(a, 5, "level"), "debug");
	CU_ASSERT_STRING_EQUAL(field(a, 6, "level"), "warn");
	CU_ASSERT_STRING_EQUAL(field(a, 7, "level"), "info");
	CU_ASSERT_STRING_EQUAL(field(a, 8, "message"), "login: ?? not UTF-8");
	/* a stamp that is no time is a console line's text */
	CU_ASSERT_STRING_EQUAL(source(a, 9), "console");
	CU_ASSERT_STRING_EQUAL(field(a, 9, "timestamp"), "2026-12-06T11:23:02.000Z");
	CU_ASSERT_STRING_EQUAL(field(a, 10, "message"), "a last line with no newline");
	json_decref(out);

	/* v1: logs as {timestamp, line}, and logEntries */
	a = logs_for(&q, true, &out);
	CU_ASSERT_EQUAL(json_array_size(a), 11);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(out, "logEntries")), 11);
	CU_ASSERT_STRING_EQUAL(field(a, 2, "line"), "cubicle: warning: virtio-net: slow");
	CU_ASSERT_PTR_NULL(field(a, 2, "level"));
	json_decref(out);
}

static void test_filters(void)
{
	struct logs_query q = { .limit = 2 };
	json_t *out, *a;

	write_log(sample, sizeof(sample) - 1);
	a = logs_for(&q, false, &out);
	CU_ASSERT_EQUAL(json_array_size(a), 2);
	CU_ASSERT_STRING_EQUAL(source(a, 0), "console");
	json_decref(out);

	q.backward = true;
	a = logs_for(&q, false, &out);
	CU_ASSERT_EQUAL_FATAL(json_array_size(a), 2);
	CU_ASSERT_STRING_EQUAL(field(a, 0, "message"), "a last line with no newline");
	CU_ASSERT_STRING_EQUAL(field(a, 1, "message"), "2026-13-45T99:99:99.999Z not a time");
	json_decref(out);

	/* backward from a cursor: at or before it, newest first */
	q = (struct logs_query){ .limit = 3, .backward = true, .has_start = true,
				 .start = 1796556181000LL /* 2026-12-06T11:23:01.000Z */ };
	a = logs_for(&q, false, &out);
	CU_ASSERT_EQUAL_FATAL(json_array_size(a), 3);
	CU_ASSERT_STRING_EQUAL(field(a, 0, "level"), "error");
	CU_ASSERT_STRING_EQUAL(field(a, 1, "message"), "[    0.000000] Linux version 6.1");
	CU_ASSERT_STRING_EQUAL(field(a, 2, "level"), "warn");
	json_decref(out);

	/* forward from it: at or after */
	q = (struct logs_query){ .limit = 1000, .has_start = true, .start = 1796556181500LL };
	a = logs_for(&q, false, &out);
	CU_ASSERT_EQUAL(json_array_size(a), 6);
	CU_ASSERT_STRING_EQUAL(field(a, 0, "level"), "debug");
	json_decref(out);

	q = (struct logs_query){ .limit = 1000, .min_level = 2 };
	a = logs_for(&q, false, &out);
	CU_ASSERT_EQUAL(json_array_size(a), 3);
	json_decref(out);

	q = (struct logs_query){ .limit = 1000 };
	snprintf(q.search, sizeof(q.search), "Linux");
	a = logs_for(&q, false, &out);
	CU_ASSERT_EQUAL(json_array_size(a), 1);
	json_decref(out);

	q = (struct logs_query){ .limit = 0 };
	a = logs_for(&q, false, &out);
	CU_ASSERT_EQUAL(json_array_size(a), 0);
	json_decref(out);
}

/* Past the 4 MiB read: the cut first line is dropped; a NUL and a line
 * past 4096 bytes are taken (the message cut). */
static void test_big(void)
{
	size_t n = (5u << 20), at = 0;
	char *b = malloc(n);
	struct logs_query q = { .limit = 1000, .backward = true };
	json_t *out, *a;

	CU_ASSERT_FATAL(b != NULL);
	/* lines of 99 bytes, one of about 1000, one with a NUL, one of 6988 */
	memset(b, 'x', n);
	while (at + 100 < n - 8000) {
		b[at + 99] = '\n';
		at += 100;
	}
	memcpy(b + n - 7000, "\nNUL\0after\n", 11);
	b[n - 1] = '\n';
	write_log(b, n);
	a = logs_for(&q, false, &out);
	CU_ASSERT_EQUAL_FATAL(json_array_size(a), 1000);
	/* the newest: the 6988 bytes after the NUL's line, cut at 4096 */
	CU_ASSERT_EQUAL(strlen(field(a, 0, "message")), 4096);
	CU_ASSERT_STRING_EQUAL(field(a, 1, "message"), "NUL");
	CU_ASSERT(strlen(field(a, 2, "message")) > 900);
	json_decref(out);
	q.backward = false;
	a = logs_for(&q, false, &out);
	CU_ASSERT_EQUAL_FATAL(json_array_size(a), 1000);
	CU_ASSERT_EQUAL(strlen(field(a, 0, "message")), 99);
	json_decref(out);
	free(b);
}

static void test_none(void)
{
	struct logs_query q = { .limit = 10 };
	char path[300];
	json_t *out, *a;

	snprintf(path, sizeof(path), "%s/vmm.log", dir);
	unlink(path);
	a = logs_for(&q, true, &out);
	CU_ASSERT_EQUAL(json_array_size(a), 0);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(out, "logEntries")), 0);
	json_decref(out);
	CU_ASSERT_EQUAL(logs_level("warn"), 2);
	CU_ASSERT_EQUAL(logs_level("warning"), -1);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "entries: sources, levels, times, text", test_entries },
		{ "limit, direction, cursor, level, search", test_filters },
		{ "a log past 4 MiB, a NUL, a long line", test_big },
		{ "no log", test_none },
		{ NULL, NULL },
	};
	int rc;

	if (!mkdtemp(dir)) {
		perror("test_serve_logs: mkdtemp");
		return 1;
	}
	snprintf(sb.id, sizeof(sb.id), "sbxtest");
	snprintf(sb.dir, sizeof(sb.dir), "%s", dir);
	sb.started = 1796556000;
	rc = cu_run("serve logs", tests);
	rmdir(dir);
	return rc;
}
