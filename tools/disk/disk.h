/* SPDX-License-Identifier: Apache-2.0 */
/* `cubicle disk` (the cubicle-disk program cubicle execs): the subcommand table, and the helpers subcommands share. */
#ifndef CUBICLE_DISK_H
#define CUBICLE_DISK_H

#include <stdbool.h>
#include <stdint.h>

/* cubicle's exit statuses (its vm.h), which `cubicle disk` passes on. */
#define DISK_EXIT_ERROR 1
#define DISK_EXIT_USAGE 2

#define DISK_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * One `cubicle disk` subcommand. fn gets argv[0] = its name and the
 * arguments after it (getopt ready: optind = 1, opterr = 0), and returns the
 * process exit status: 0, DISK_EXIT_ERROR after one message (disk_err), or
 * DISK_EXIT_USAGE through disk_usage_error().
 * To add one: write fn in its own file, declare it below, and add a line to
 * disk_cmds[] in disk_cli.c.
 */
struct disk_cmd {
	const char *name; /* "clone" */
	const char *args; /* "BASE NEW [--fallback fail|copy]" */
	const char *help; /* one line */
	int (*fn)(int argc, char **argv);
};

/* "cubicle disk SUB: message" and a pointer to help; returns DISK_EXIT_USAGE. */
int disk_usage_error(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line on stderr, as cubicle's log says errors: "cubicle: error: message". */
void disk_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Microseconds since the program started (CLOCK_MONOTONIC). */
uint64_t disk_clock_us(void);

/* A progress line on stderr, drawn only when stderr is a terminal. */
struct disk_progress {
	bool tty;
	const char *what; /* "copying", "compressing" */
	uint64_t start_us, last_us, last_done;
};
void disk_progress_init(struct disk_progress *p, const char *what);
/* arg is the struct disk_progress (fits fc_progress_fn); redraws at most
 * ten times a second. */
void disk_progress(void *arg, uint64_t done, uint64_t total);
/* Erase the line. */
void disk_progress_end(struct disk_progress *p);

/* disk_cli.c */
int disk_create(int argc, char **argv);
int disk_clone(int argc, char **argv);
/* disk_zstd.c (zstd-snap images) */
int disk_compress(int argc, char **argv);
int disk_decompress(int argc, char **argv);
int disk_inspect(int argc, char **argv);
int disk_check(int argc, char **argv);

#endif
