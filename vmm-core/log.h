/* SPDX-License-Identifier: Apache-2.0 */
/* Logging for the core: four levels to stderr, filtered at run time. */
#ifndef CUBICLE_LOG_H
#define CUBICLE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "cubicle/plugin.h"

/* lvl below CUB_LOG_ERR: nothing is printed. */
void log_set_level(int lvl);
/* Look at stderr once (call it again when fd 2 changes): lines that do
 * not go to a terminal start with the UTC time. */
void log_check_output(void);
/* Lines start with the time, or not, whatever stderr is. */
void log_set_timestamps(bool on);
/* Tag info lines with "info: " as the other levels are tagged. */
void log_set_show_level(bool on);
int log_get_level(void);
/* Parse "err", "warn", "info", "debug"; -1 if none of those. */
int log_level_parse(const char *s);
const char *log_level_name(int lvl);

/* One line to stderr: "cubicle: PREFIX: message". prefix may be NULL. */
void log_vmsg(int lvl, const char *prefix, const char *fmt, va_list ap);
void log_msg(int lvl, const char *prefix, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Token bucket for hot paths: true if a line may be printed now. */
struct ratelimit {
	uint64_t window_start_us;
	unsigned printed, dropped;
};
bool ratelimit_ok(struct ratelimit *rl);

/* Microseconds since process start (CLOCK_MONOTONIC). */
uint64_t clock_since_start_us(void);
void clock_mark_start(void);

#define log_err(...) log_msg(CUB_LOG_ERR, NULL, __VA_ARGS__)
#define log_warn(...) log_msg(CUB_LOG_WARN, NULL, __VA_ARGS__)
#define log_info(...) log_msg(CUB_LOG_INFO, NULL, __VA_ARGS__)
#define log_debug(...) log_msg(CUB_LOG_DEBUG, NULL, __VA_ARGS__)

#endif
