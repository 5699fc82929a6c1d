/* SPDX-License-Identifier: Apache-2.0 */
/* bench/snap_proc: what bench/snapshot uses to start processes, read their logs, speak the API and time floors. */
#ifndef CUBICLE_BENCH_SNAP_PROC_H
#define CUBICLE_BENCH_SNAP_PROC_H

#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define MAX_CLONES 256

/* One kept-open connection to a VM's API socket and what it has read. */
struct conn {
	int fd;
	size_t have;
	char buf[16384];
};

extern const char *cub;		/* the cubicle binary, named in messages */
extern int timeout_s;		/* how long any wait may last, in s */
extern bool verbose;		/* -v: each process's time to its line */
extern char work[PATH_MAX];	/* the work folder; "" when there is none */

/* CLOCK_MONOTONIC in ms. */
double now_ms(void);
/* nftw() callback: remove @path, ignoring errors. */
int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *f);
/* Send @sig to the started process @pid and wait for it. */
void reap(pid_t pid, int sig);
/* Kill everything started, remove work, exit 1. */
void __attribute__((noreturn)) fail(void);
/* Start @argv, its output to the file @log or else to a pipe read at *@fd. */
pid_t spawn(char *const argv[], const char *log, int *fd);
/* Run @argv to its end (output to the file @log); ms taken, or -1 when it
 * did not exit 0. */
double run_to_end(char *const argv[], const char *log);
/* Start @n copies of @argv; ms until all showed @marker (@stop: SIGSTOP each). */
double start_all(char *const argv[], unsigned n, const char *marker, bool stop);
/* The VmRSS (KiB) of the process a start_all of one copy saw show its
 * marker, read just after (the time returned is taken before); 0 when
 * unknown or for more copies. */
extern unsigned long marker_rss_kib;
/* The number of lines of the file @path holding @marker. */
unsigned count_in(const char *path, const char *marker);
/* Wait for @pid's log to hold @marker more than @after times; fail otherwise. */
void wait_log(pid_t pid, const char *log, const char *marker, unsigned after);
/* Connect @c to @sock, retrying while @pid runs and time remains. */
void api_connect(struct conn *c, const char *sock, pid_t pid);
/* A request answered with status @want (else fail); ms taken, body in @out. */
double must(struct conn *c, const char *method, const char *path, const char *body,
	    int want, char *out, size_t outlen);
/* Sort @v[0..@n) and return its median. */
double median(double *v, unsigned n);
/* ms to write and fsync @n bytes of @buf as the new file @path. */
double write_floor(const char *path, const uint8_t *buf, uint64_t n);
/* @buf (PATH_MAX bytes) = work/@name. */
void path(char *buf, const char *name);
/* Make the floor's buffer *@buf (*@len bytes) hold at least @n. */
void grow(uint8_t **buf, uint64_t *len, uint64_t n);

#endif
