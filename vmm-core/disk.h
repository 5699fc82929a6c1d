/* SPDX-License-Identifier: Apache-2.0 */
/* `cubicle disk`: the subcommand table, and the helpers subcommands share. */
#ifndef CUBICLE_DISK_H
#define CUBICLE_DISK_H

#include <stdbool.h>
#include <stdint.h>

/*
 * One `cubicle disk` subcommand. fn gets argv[0] = its name and the
 * arguments after it (getopt ready: optind = 1, opterr = 0), and returns the
 * process exit status: 0, VM_EXIT_ERROR after one message, or
 * VM_EXIT_USAGE through disk_usage_error().
 * To add one: write fn in its own file, declare it below, and add a line to
 * disk_cmds[] in disk_cli.c.
 */
struct disk_cmd {
	const char *name; /* "clone" */
	const char *args; /* "BASE NEW [--fallback fail|copy]" */
	const char *help; /* one line */
	int (*fn)(int argc, char **argv);
};

/* `cubicle disk ...` from main(): argv[0] is "disk". */
int disk_main(int argc, char **argv);

/* "cubicle disk SUB: message" and a pointer to help; returns VM_EXIT_USAGE. */
int disk_usage_error(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

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
