/* SPDX-License-Identifier: Apache-2.0 */
/* `cubicle disk` (cubicle-disk): dispatch to subcommands on disk images, the helpers they share, and the raw ones (create, clone). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "disk.h"
#include "size.h"
#include "fileclone.h"

static int disk_help(int argc, char **argv);

static const struct disk_cmd disk_cmds[] = {
	{ "create", "PATH SIZE [--force]",
	  "make a sparse raw image of SIZE bytes (K, M, G, T suffixes)", disk_create },
	{ "clone", "BASE NEW [--fallback fail|copy] [--durable]",
	  "make NEW a copy-on-write clone of BASE (FICLONE), or copy it", disk_clone },
	{ "compress", "IMG OUT.zst [--level N] [--frame-size S] [--force]",
	  "make a zstd seekable image (zstd-snap's base; `zstd -d` restores it)", disk_compress },
	{ "decompress", "IN.zst OUT [--force]",
	  "restore the raw image from a seekable one (sparse where zero)", disk_decompress },
	{ "inspect", "FILE [--json]",
	  "format (raw, zstd seekable, zstd-snap delta), sizes, ratio, frames, delta usage",
	  disk_inspect },
	{ "check", "FILE", "verify a seekable image's seek table and every frame", disk_check },
	{ "help", "", "show this list", disk_help },
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: cubicle disk SUBCOMMAND [ARGS]\n\nSubcommands:\n");
	for (unsigned i = 0; i < DISK_ARRAY_SIZE(disk_cmds); i++) {
		char head[64];

		snprintf(head, sizeof(head), "%s %s", disk_cmds[i].name, disk_cmds[i].args);
		if (strlen(head) > 34)
			fprintf(f, "  %s\n  %-34s %s\n", head, "", disk_cmds[i].help);
		else
			fprintf(f, "  %-34s %s\n", head, disk_cmds[i].help);
	}
	fprintf(f, "\nSee DISK COMMANDS in cubicle(1).\n");
}

static int disk_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	usage(stdout);
	return 0;
}

int disk_usage_error(const char *sub, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "cubicle: disk%s%s: ", sub ? " " : "", sub ? sub : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'cubicle disk help'.\n");
	return DISK_EXIT_USAGE;
}

/* ---- shared helpers ---- */

void disk_err(const char *fmt, ...)
{
	va_list ap;

	fputs("cubicle: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static uint64_t mono_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static uint64_t start_us;

uint64_t disk_clock_us(void)
{
	return mono_us() - start_us;
}

/* `cubicle disk ARGS` runs this program as `cubicle-disk ARGS`. */
int main(int argc, char **argv)
{
	start_us = mono_us();
	/* As in cubicle: a closed stdout is an EPIPE, not a kill. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2)
		return disk_usage_error(NULL, "missing SUBCOMMAND");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return disk_help(0, NULL);
	for (unsigned i = 0; i < DISK_ARRAY_SIZE(disk_cmds); i++) {
		if (strcmp(argv[1], disk_cmds[i].name))
			continue;
		/* `disk SUB --help` (anywhere among its arguments): its line */
		for (int a = 2; a < argc && strcmp(argv[a], "--"); a++)
			if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
				printf("Usage: cubicle disk %s %s\n\n%s.\nSee DISK COMMANDS in cubicle(1).\n",
				       disk_cmds[i].name, disk_cmds[i].args, disk_cmds[i].help);
				return 0;
			}
		optind = 1;
		opterr = 0;
		return disk_cmds[i].fn(argc - 1, argv + 1);
	}
	return disk_usage_error(NULL, "unknown subcommand '%s'", argv[1]);
}

/* ---- progress ---- */

void disk_progress_init(struct disk_progress *p, const char *what)
{
	p->tty = isatty(STDERR_FILENO);
	p->what = what;
	p->start_us = disk_clock_us();
	p->last_us = p->last_done = 0;
}

void disk_progress(void *arg, uint64_t done, uint64_t total)
{
	struct disk_progress *p = arg;
	uint64_t now = disk_clock_us(), us;
	double pct;
	int bar;

	if (!p->tty || (p->last_us && done == p->last_done) ||
	    (now - p->last_us < 100000 && done < total))
		return;
	p->last_us = now;
	p->last_done = done;
	us = now - p->start_us;
	pct = total ? 100.0 * (double)done / (double)total : 100.0;
	bar = (int)(pct / 5);
	fprintf(stderr, "\r%s [%.*s%*s] %5.1f%% %8.1f MiB/s", p->what, bar, "====================",
		20 - bar, "", pct, us ? (double)done / (double)us * 1e6 / 1048576.0 : 0.0);
	fflush(stderr);
}

void disk_progress_end(struct disk_progress *p)
{
	if (p->tty && p->last_us)
		fprintf(stderr, "\r\033[K");
}

/* ---- create ---- */

int disk_create(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	const char *why = NULL;
	bool force = false;
	uint64_t size;
	struct stat st;
	int c, fd;

	while ((c = getopt_long(argc, argv, "f", opts, NULL)) != -1) {
		if (c != 'f')
			return disk_usage_error("create", "unknown option %s", argv[optind - 1]);
		force = true;
	}
	if (argc - optind != 2)
		return disk_usage_error("create", "needs PATH SIZE");
	if (size_parse(argv[optind + 1], &size) || !size || size % 512 ||
	    size > (uint64_t)INT64_MAX)
		return disk_usage_error("create", "SIZE '%s': expected a non-zero multiple of 512 bytes, e.g. 4G",
					argv[optind + 1]);
	/* O_NONBLOCK: an existing FIFO must not hang the open (ENXIO, or the type check). */
	fd = open(argv[optind], O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | (force ? 0 : O_EXCL),
		  0644);
	if (fd < 0) {
		if (errno == ENXIO)
			disk_err("disk create: %s is not a regular file", argv[optind]);
		else if (errno == EEXIST)
			disk_err("disk create: %s already exists (--force replaces it)", argv[optind]);
		else
			disk_err("disk create: cannot create %s: %s", argv[optind], strerror(errno));
		return DISK_EXIT_ERROR;
	}
	if (fstat(fd, &st) < 0)
		why = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)size) < 0 || fsync(fd) < 0)
		why = strerror(errno);
	if (why) {
		disk_err("disk create: %s: %s", argv[optind], why);
		close(fd);
		return DISK_EXIT_ERROR;
	}
	close(fd);
	printf("created %s: sparse raw image of %" PRIu64 " bytes (%.2f GiB)\n", argv[optind], size,
	       (double)size / (1u << 30));
	return 0;
}

/* ---- clone ---- */

int disk_clone(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "fallback", required_argument, NULL, 'F' },
		{ "durable", no_argument, NULL, 'D' },
		{ NULL, 0, NULL, 0 },
	};
	struct fc_opts o = { .fallback = FC_FALLBACK_FAIL,
			     .hint = "use --fallback copy to copy instead, or XFS (reflink=1) or btrfs" };
	struct disk_progress prog;
	struct fc_result res;
	char err[1024];
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'D') {
			o.durable = true;
			continue;
		}
		if (c != 'F')
			return disk_usage_error("clone", "unknown option or missing value: %s",
						argv[optind - 1]);
		if (!strcmp(optarg, "copy"))
			o.fallback = FC_FALLBACK_COPY;
		else if (strcmp(optarg, "fail"))
			return disk_usage_error("clone", "--fallback %s: expected fail or copy", optarg);
	}
	if (argc - optind != 2)
		return disk_usage_error("clone", "needs BASE NEW");
	disk_progress_init(&prog, "copying");
	o.progress = disk_progress;
	o.arg = &prog;
	if (fc_clone_path(argv[optind], argv[optind + 1], &o, &res, err, sizeof(err))) {
		disk_progress_end(&prog);
		disk_err("disk clone: %s", err);
		return DISK_EXIT_ERROR;
	}
	disk_progress_end(&prog);
	if (res.copied)
		printf("copied %s to %s: %" PRIu64 " bytes (%" PRIu64 " of data) in %.3f s, %.0f MiB/s;"
		       " no reflink because %s\n",
		       argv[optind], argv[optind + 1], res.size, res.data_bytes,
		       (double)res.clone_us / 1e6,
		       res.clone_us ? (double)res.data_bytes / (double)res.clone_us * 1e6 / 1048576.0 : 0.0,
		       res.why);
	else
		printf("cloned %s to %s: reflink of %" PRIu64 " bytes in %" PRIu64 " us (%" PRIu64
		       " us in all%s)\n",
		       argv[optind], argv[optind + 1], res.size, res.clone_us, res.total_us,
		       o.durable ? ", with fsync and rename" : "");
	return 0;
}
