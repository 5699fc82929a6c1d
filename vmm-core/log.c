/* SPDX-License-Identifier: Apache-2.0 */
/* Logging: leveled lines on stderr, a rate limiter, and the process clock. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static int level = CUB_LOG_INFO;
static bool show_level; /* info lines say "info: " too (PUT /logger show_level) */
static int stamp = -1;   /* lines start with the time (stderr is no terminal); -1: not known yet */
static struct timespec start_ts;
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const names[] = { "err", "warn", "info", "debug" };

void log_set_level(int lvl)
{
	if (lvl >= CUB_LOG_ERR && lvl <= CUB_LOG_DEBUG)
		level = lvl;
}

void log_check_output(void)
{
	stamp = !isatty(2);
}

void log_set_timestamps(bool on)
{
	stamp = on;
}

void log_set_show_level(bool on)
{
	show_level = on;
}

int log_get_level(void)
{
	return level;
}

int log_level_parse(const char *s)
{
	for (int i = 0; i < (int)CUB_ARRAY_SIZE(names); i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

const char *log_level_name(int lvl)
{
	return lvl >= 0 && lvl < (int)CUB_ARRAY_SIZE(names) ? names[lvl] : "?";
}

static void mark_start(void)
{
	clock_gettime(CLOCK_MONOTONIC, &start_ts);
}

void clock_mark_start(void)
{
	pthread_once(&start_once, mark_start);
}

uint64_t clock_since_start_us(void)
{
	struct timespec now;

	clock_mark_start();
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(now.tv_sec - start_ts.tv_sec) * 1000000u +
	       (uint64_t)((now.tv_nsec - start_ts.tv_nsec) / 1000);
}

void log_vmsg(int lvl, const char *prefix, const char *fmt, va_list ap)
{
	static const char *const tags[2][4] = { { "error: ", "warning: ", "", "debug: " },
						{ "error: ", "warning: ", "info: ", "debug: " } };
	const char *const *tag = tags[show_level];
	char buf[1024];
	int n;

	if (lvl > level)
		return;
	if (lvl < CUB_LOG_ERR)
		lvl = CUB_LOG_ERR;
	if (lvl > CUB_LOG_DEBUG)
		lvl = CUB_LOG_DEBUG;
	/* Not to a terminal (a file, a pipe, a journal): the wall-clock time,
	 * UTC, first (known from log_check_output: no isatty() here, where a
	 * thread's seccomp filter may forbid the ioctl). */
	n = 0;
	if (stamp > 0) {
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = (int)strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, ".%03ldZ ", ts.tv_nsec / 1000000);
	}
	if (level >= CUB_LOG_DEBUG) /* with debug on, every line carries the time since start */
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "cubicle: [%9.3f ms] %s%s%s",
			      (double)clock_since_start_us() / 1000.0, prefix ? prefix : "",
			      prefix ? ": " : "", tag[lvl]);
	else
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "cubicle: %s%s%s",
			      prefix ? prefix : "", prefix ? ": " : "", tag[lvl]);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(buf))
		vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	/* One write per line so lines from different threads never interleave. */
	pthread_mutex_lock(&out_lock);
	fprintf(stderr, "%s\n", buf);
	fflush(stderr);
	pthread_mutex_unlock(&out_lock);
}

void log_msg(int lvl, const char *prefix, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(lvl, prefix, fmt, ap);
	va_end(ap);
}

#define RL_WINDOW_US 1000000u
#define RL_BURST 10u

/* Not locked: a racing caller may print one line too many, never crash. */
bool ratelimit_ok(struct ratelimit *rl)
{
	uint64_t now = clock_since_start_us();

	if (now - rl->window_start_us >= RL_WINDOW_US) {
		if (rl->dropped)
			log_warn("%u similar messages suppressed", rl->dropped);
		rl->window_start_us = now;
		rl->printed = 0;
		rl->dropped = 0;
	}
	if (rl->printed < RL_BURST) {
		rl->printed++;
		return true;
	}
	rl->dropped++;
	return false;
}
