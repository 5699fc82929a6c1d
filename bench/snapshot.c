/* SPDX-License-Identifier: Apache-2.0 */
/* bench/snapshot: what snapshots cost, each figure beside a floor measured
 * in the same run, for guests of several sizes whose guest (snap_guest.S)
 * wrote the same 96 MiB of its RAM:
 *   create    PUT /snapshot/create on the paused VM, against write()+fsync()
 *             of as many bytes as the snapshot's memory file holds
 *             (st_blocks) into a new file of the same folder;
 *   restore   exec `cubicle restore DIR` to its first "guest boot done"
 *             line, against snap_floor (the memory file mapped privately,
 *             a VM, an irqchip, a vCPU, KVM_RUN to the first exit);
 *   clone     N of those at once, until the last one's line, over N;
 *   rollback  PUT /snapshot/rollback on a running restored VM, against the
 *             same VM's PATCH /vm Paused + Resumed (the two state changes a
 *             rollback makes, and their requests);
 *   Diff      a second source VM, tracking dirty pages, with a Full snapshot:
 *             rolled back to it, told (testdev scratch) to dirty N MiB, then
 *             paused; PUT /snapshot/create of a Diff against write()+fsync()
 *             of as many bytes as its memory file holds, for N of 4 and 32
 *             MiB (the cost follows the dirty pages, not the RAM); and
 *             `cubicle restore` of that Diff to its first line, against
 *             snap_floor on the Full's memory file plus, here, that file
 *             mapped private and the Diff's pages pread into it.
 * The API is spoken directly (HTTP/1.1 on the Unix socket, one connection
 * kept open). Medians; a slow figure is never a failure, a request that
 * fails or a process that never shows its line is.
 * Usage: snapshot CUBICLE SNAP_FLOOR PAYLOAD [-r RUNS] [-n CLONES]
 *                 [-c CLONE_RUNS] [-b ROLLBACKS] [-t TIMEOUT_S] [-v] [MIB...]
 * -v: each process's time to its line, on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snap_proc.h"

#define MAX_RUNS 64
#define MAX_SIZES 8
#define TOUCHED_MIB 96 /* snap_guest.S: 2 MiB to 98 MiB */
#define N_DIRTY 2
static const unsigned dirty_mib[N_DIRTY] = { 4, 32 }; /* at most TOUCHED_MIB */
#define READY "guest: ready"
#define BOOTED "guest boot done"

struct figs {
	unsigned mib;
	uint64_t written; /* the snapshot memory file's allocated bytes */
	/* medians in ms: cubicle's and the floor's */
	double create, create_fl, restore, restore_fl, clone, clone_fl, rollback, rollback_fl;
	double rollback_srv;	/* the "ms" in a rollback's reply */
	double rollback_paused; /* a rollback of the VM paused */
	double request;		/* a bare request, GET / */
	/* Diffs, one per dirty_mib[]: memory files' allocated bytes; medians */
	uint64_t diff_written[N_DIRTY];
	double diff[N_DIRTY], diff_fl[N_DIRTY], drestore[N_DIRTY], drestore_fl[N_DIRTY];
	/* restore through the Uffd backend (its floor: restore's) */
	double restore_uffd;
	/* memory.zst: cubicle compress, and a restore from it; floors with
	 * the stock zstd (0 when it is not installed) */
	double compress, compress_fl, zrestore, zrestore_fl;
	uint64_t zst_bytes;
};

static const char *sfloor, *payload;

/* The allocated bytes (st_blocks) of the snapshot @dir's memory file. */
static uint64_t allocated(const char *dir)
{
	char mem[PATH_MAX + 16];
	struct stat sb;

	snprintf(mem, sizeof(mem), "%s/memory", dir);
	if (stat(mem, &sb) < 0) {
		perror(mem);
		fail();
	}
	return (uint64_t)sb.st_blocks * 512;
}

/*
 * A source VM of @mib MiB, NAME.cfg, its socket NAME.sock and its log
 * NAME.log in the work folder (with @track, it logs dirty pages): started,
 * waited for until its guest wrote its RAM, connected to on @c and paused.
 */
static pid_t start_source(struct conn *c, const char *name, unsigned mib, bool track)
{
	char cfg[PATH_MAX], sock[PATH_MAX], log[PATH_MAX], n[64];
	char *argv[] = { (char *)cub, "run", "--api-sock", sock, cfg, NULL };
	pid_t pid;
	FILE *o;

	snprintf(n, sizeof(n), "%s.cfg", name);
	path(cfg, n);
	snprintf(n, sizeof(n), "%s.sock", name);
	path(sock, n);
	snprintf(n, sizeof(n), "%s.log", name);
	path(log, n);
	o = fopen(cfg, "w");
	if (!o) {
		perror(cfg);
		fail();
	}
	fprintf(o, "log_level = \"info\";\nmachine = { vcpus = 1; memory_mib = %u;%s };\n"
		   "boot = { kernel = \"%s\"; format = \"flat\"; mode = \"long\"; load_addr = 0x10000; };\n"
		   "devices = (\n  { type = \"testdev\"; id = \"mmio\"; bus = \"mmio\"; },\n"
		   "  { type = \"boot-timer\"; id = \"boot\"; }\n);\n",
		mib, track ? " track_dirty_pages = true;" : "", payload);
	fclose(o);
	pid = spawn(argv, log, NULL);
	wait_log(pid, log, READY, 0);
	api_connect(c, sock, pid);
	must(c, "PATCH", "/vm", "{\"state\":\"Paused\"}", 204, NULL, 0);
	return pid;
}

/* 1. The source VM, paused once it wrote its RAM; RUNS snapshots of it. */
static void bench_create(struct figs *f, unsigned runs, const char *snap)
{
	uint8_t *buf = NULL;
	uint64_t buf_len = 0;
	char dir[PATH_MAX], body[PATH_MAX + 64], fl[PATH_MAX];
	double cs[MAX_RUNS], fs[MAX_RUNS];
	struct conn c;
	pid_t pid;

	path(fl, "floor.mem");
	pid = start_source(&c, "src", f->mib, false);
	for (unsigned i = 0; i < runs; i++) {
		/* A new folder each time (the last one is kept): replacing a
		 * snapshot would time the old one's removal too. */
		if (i == runs - 1)
			snprintf(dir, sizeof(dir), "%s", snap);
		else
			snprintf(dir, sizeof(dir), "%s/c%u", work, i);
		snprintf(body, sizeof(body), "{\"snapshot_path\":\"%s\"}", dir);
		cs[i] = must(&c, "PUT", "/snapshot/create", body, 204, NULL, 0);
		f->written = allocated(dir);
		grow(&buf, &buf_len, f->written);
		fs[i] = write_floor(fl, buf, f->written);
		if (i != runs - 1)
			nftw(dir, rm_one, 4, FTW_DEPTH | FTW_PHYS);
	}
	free(buf); /* out of the way of the restores */
	close(c.fd);
	reap(pid, SIGKILL);
	f->create = median(cs, runs);
	f->create_fl = median(fs, runs);
}

/* 2. and 3. One restore at a time, then CLONES at once. */
static void bench_restore(struct figs *f, unsigned runs, unsigned clones, unsigned clone_runs,
			  const char *snap)
{
	char mem[PATH_MAX + 16];
	char *cargv[] = { (char *)cub, "restore", (char *)snap, NULL };
	char *uargv[] = { (char *)cub, "restore", "--mem-backend", "uffd", (char *)snap, NULL };
	char *fargv[] = { (char *)sfloor, mem, NULL };
	double cs[MAX_RUNS], fs[MAX_RUNS], us[MAX_RUNS];

	snprintf(mem, sizeof(mem), "%s/memory", snap);
	for (unsigned i = 0; i < runs; i++) {
		fs[i] = start_all(fargv, 1, "!", false);
		cs[i] = start_all(cargv, 1, BOOTED, false);
		us[i] = start_all(uargv, 1, BOOTED, false);
	}
	f->restore = median(cs, runs);
	f->restore_fl = median(fs, runs);
	f->restore_uffd = median(us, runs);
	/* Each stopped once it has shown its line, as each floor then
	 * idles in pause(): the figure is bringing clones up, not 50 busy
	 * guests sharing the CPUs with the ones still starting. */
	for (unsigned i = 0; i < clone_runs; i++) {
		fs[i] = start_all(fargv, clones, "!", true) / clones;
		cs[i] = start_all(cargv, clones, BOOTED, true) / clones;
	}
	f->clone = median(cs, clone_runs);
	f->clone_fl = median(fs, clone_runs);
}

/* 4. A restored VM, running, rolled back ROLLBACKS times. */
static void bench_rollback(struct figs *f, unsigned rollbacks, const char *snap)
{
	char sock[PATH_MAX], log[PATH_MAX], body[PATH_MAX + 64], reply[1024];
	char *argv[] = { (char *)cub, "restore", "--api-sock", sock, (char *)snap, NULL };
	double rs[MAX_RUNS], ps[MAX_RUNS], ss[MAX_RUNS], gs[MAX_RUNS], qs[MAX_RUNS];
	struct conn c;
	unsigned seen;
	pid_t pid;

	path(sock, "r.sock");
	path(log, "r.log");
	pid = spawn(argv, log, NULL);
	wait_log(pid, log, BOOTED, 0);
	api_connect(&c, sock, pid);
	snprintf(body, sizeof(body), "{\"snapshot_path\":\"%s\"}", snap);
	for (unsigned i = 0; i < rollbacks; i++) {
		const char *ms;

		rs[i] = must(&c, "PUT", "/snapshot/rollback", body, 200, reply, sizeof(reply));
		ms = strstr(reply, "\"ms\":");
		ss[i] = ms ? strtod(ms + 5, NULL) : 0;
		ps[i] = must(&c, "PATCH", "/vm", "{\"state\":\"Paused\"}", 204, NULL, 0);
		ps[i] += must(&c, "PATCH", "/vm", "{\"state\":\"Resumed\"}", 204, NULL, 0);
		gs[i] = must(&c, "GET", "/", "", 200, NULL, 0);
		/* Paused: no vCPU to stop, start or share the CPUs with. */
		must(&c, "PATCH", "/vm", "{\"state\":\"Paused\"}", 204, NULL, 0);
		qs[i] = must(&c, "PUT", "/snapshot/rollback", body, 200, NULL, 0);
		must(&c, "PATCH", "/vm", "{\"state\":\"Resumed\"}", 204, NULL, 0);
	}
	/* Rolled back and resumed, the guest runs on: a new line comes. */
	seen = count_in(log, BOOTED);
	wait_log(pid, log, BOOTED, seen);
	close(c.fd);
	reap(pid, SIGKILL);
	f->rollback = median(rs, rollbacks);
	f->rollback_fl = median(ps, rollbacks);
	f->rollback_srv = median(ss, rollbacks);
	f->request = median(gs, rollbacks);
	f->rollback_paused = median(qs, rollbacks);
}

/* The testdev's scratch register, read through its "get_scratch" method. */
static unsigned long get_scratch(struct conn *c)
{
	char reply[1024];
	const char *r;

	must(c, "PUT", "/devices/mmio/methods/get_scratch", "{\"args\":[]}", 200, reply,
	     sizeof(reply));
	r = strstr(reply, "\"reply\"");
	r = r ? strchr(r + 7, '"') : NULL;
	if (!r) {
		fprintf(stderr, "snapshot: get_scratch: no reply in %s\n", reply);
		fail();
	}
	return strtoul(r + 1, NULL, 10);
}

/*
 * 5. Diffs: a VM tracking dirty pages, its Full snapshot @full; then for
 * each dirty_mib[], RUNS times: rolled back to @full (paused), the guest
 * asked to dirty that many MiB and waited for, paused, a Diff made. The
 * last Diff of each amount is kept as @full-N (N: the MiB) for the restores.
 */
static void bench_diff(struct figs *f, unsigned runs, const char *full)
{
	uint8_t *buf = NULL;
	uint64_t buf_len = 0;
	char dir[PATH_MAX], body[PATH_MAX + 96], fl[PATH_MAX], rb[PATH_MAX + 64];
	double cs[MAX_RUNS], fs[MAX_RUNS];
	struct conn c;
	pid_t pid;

	path(fl, "floor.mem");
	pid = start_source(&c, "dsrc", f->mib, true);
	snprintf(body, sizeof(body), "{\"snapshot_path\":\"%s\"}", full);
	must(&c, "PUT", "/snapshot/create", body, 204, NULL, 0);
	snprintf(rb, sizeof(rb), "{\"snapshot_path\":\"%s\"}", full);
	for (unsigned d = 0; d < N_DIRTY; d++) {
		for (unsigned i = 0; i < runs; i++) {
			double deadline = now_ms() + timeout_s * 1e3;

			/* The Diff's parent is the Full one each time. */
			must(&c, "PUT", "/snapshot/rollback", rb, 200, NULL, 0);
			snprintf(body, sizeof(body), "{\"args\":[%u]}", dirty_mib[d]);
			must(&c, "PUT", "/devices/mmio/methods/scratch", body, 200, NULL, 0);
			must(&c, "PATCH", "/vm", "{\"state\":\"Resumed\"}", 204, NULL, 0);
			while (get_scratch(&c)) {
				if (now_ms() > deadline) {
					fprintf(stderr, "snapshot: the guest did not dirty %u MiB within %d s\n",
						dirty_mib[d], timeout_s);
					fail();
				}
				usleep(1000);
			}
			must(&c, "PATCH", "/vm", "{\"state\":\"Paused\"}", 204, NULL, 0);
			if (i == runs - 1)
				snprintf(dir, sizeof(dir), "%s-%u", full, dirty_mib[d]);
			else
				snprintf(dir, sizeof(dir), "%s/d%u-%u", work, dirty_mib[d], i);
			snprintf(body, sizeof(body),
				 "{\"snapshot_path\":\"%s\",\"snapshot_type\":\"Diff\"}", dir);
			cs[i] = must(&c, "PUT", "/snapshot/create", body, 204, NULL, 0);
			f->diff_written[d] = allocated(dir);
			grow(&buf, &buf_len, f->diff_written[d]);
			fs[i] = write_floor(fl, buf, f->diff_written[d]);
			if (i != runs - 1)
				nftw(dir, rm_one, 4, FTW_DEPTH | FTW_PHYS);
		}
		f->diff[d] = median(cs, runs);
		f->diff_fl[d] = median(fs, runs);
	}
	free(buf);
	close(c.fd);
	reap(pid, SIGKILL);
}

/* Part of the floor of a restore from a Diff: the Full's memory file
 * @full mapped private and the Diff's (@diff's) pages pread into it. */
static double copy_floor(const char *full, const char *diff)
{
	int ff = open(full, O_RDONLY | O_CLOEXEC), df = open(diff, O_RDONLY | O_CLOEXEC);
	double t0 = now_ms(), ms;
	struct stat sb;
	uint8_t *m = MAP_FAILED;
	off_t off = 0, d, h;

	if (ff >= 0 && df >= 0 && !fstat(ff, &sb))
		m = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_NORESERVE, ff, 0);
	if (m == MAP_FAILED) {
		fprintf(stderr, "snapshot: %s: %s\n", full, strerror(errno));
		fail();
	}
	while ((d = lseek(df, off, SEEK_DATA)) >= 0 && d < sb.st_size) {
		h = lseek(df, d, SEEK_HOLE);
		if (h < 0 || h > sb.st_size)
			h = sb.st_size;
		for (off = d; off < h;) {
			ssize_t n = pread(df, m + off, (size_t)(h - off), off);

			if (n <= 0) {
				fprintf(stderr, "snapshot: %s: %s\n", diff,
					n ? strerror(errno) : "shorter than its holes said");
				fail();
			}
			off += n;
		}
	}
	ms = now_ms() - t0;
	munmap(m, (size_t)sb.st_size);
	close(ff);
	close(df);
	return ms;
}

/* 6. One restore at a time of each Diff kept by bench_diff(). */
static void bench_diff_restore(struct figs *f, unsigned runs, const char *full)
{
	char dir[PATH_MAX], mem[PATH_MAX + 16], dmem[PATH_MAX + 16];
	char *cargv[] = { (char *)cub, "restore", dir, NULL };
	char *fargv[] = { (char *)sfloor, mem, NULL };
	double cs[MAX_RUNS], fs[MAX_RUNS], ks[MAX_RUNS];

	snprintf(mem, sizeof(mem), "%s/memory", full);
	for (unsigned d = 0; d < N_DIRTY; d++) {
		snprintf(dir, sizeof(dir), "%s-%u", full, dirty_mib[d]);
		snprintf(dmem, sizeof(dmem), "%s/memory", dir);
		for (unsigned i = 0; i < runs; i++) {
			fs[i] = start_all(fargv, 1, "!", false);
			ks[i] = copy_floor(mem, dmem);
			cs[i] = start_all(cargv, 1, BOOTED, false);
		}
		f->drestore[d] = median(cs, runs);
		f->drestore_fl[d] = median(fs, runs) + median(ks, runs);
	}
}

/* 7. memory.zst: `cubicle compress` of the snapshot (last: it replaces
 * its memory file), against the stock zstd at the same level and threads
 * writing nowhere; then restores from it, against restore's floor plus
 * `zstd -d` of it writing nowhere. */
static void bench_zst(struct figs *f, unsigned runs, const char *snap)
{
	char cmd[PATH_MAX * 2 + 128], log[PATH_MAX + 16], zst[PATH_MAX + 16];
	char *zargv[] = { "/bin/sh", "-c", cmd, NULL };
	char *pargv[] = { (char *)cub, "compress", (char *)snap, NULL };
	char *cargv[] = { (char *)cub, "restore", (char *)snap, NULL };
	double cs[MAX_RUNS], dfl = 0;
	struct stat sb;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	snprintf(log, sizeof(log), "%s/zst.log", work);
	snprintf(cmd, sizeof(cmd), "command -v zstd >/dev/null && zstd -q -3 -T%ld -c '%s/memory' >/dev/null",
		 cpus < 1 ? 1 : cpus > 16 ? 16 : cpus, snap);
	f->compress_fl = run_to_end(zargv, log);
	f->compress = run_to_end(pargv, log);
	if (f->compress < 0) {
		fprintf(stderr, "snapshot: cubicle compress failed (%s)\n", log);
		fail();
	}
	snprintf(zst, sizeof(zst), "%s/memory.zst", snap);
	f->zst_bytes = stat(zst, &sb) ? 0 : (uint64_t)sb.st_size;
	snprintf(cmd, sizeof(cmd), "command -v zstd >/dev/null && zstd -q -d -c '%s' >/dev/null", zst);
	for (unsigned i = 0; i < runs; i++) {
		double d = run_to_end(zargv, log);

		cs[i] = start_all(cargv, 1, BOOTED, false);
		dfl = i ? (d < dfl ? d : dfl) : d;
	}
	f->zrestore = median(cs, runs);
	f->zrestore_fl = dfl < 0 || f->compress_fl < 0 ? 0 : f->restore_fl + dfl;
	if (f->compress_fl < 0)
		f->compress_fl = 0;
}

static void row(const char *what, const struct figs *f, double c, double fl)
{
	printf("  %-34s %5u MiB %11.2f %11.2f %8.2fx\n", what, f->mib, c, fl, fl > 0 ? c / fl : 0);
}

/* The table, then what each floor is. */
static void report(const struct figs *figs, unsigned n, unsigned runs, unsigned clones,
		   unsigned clone_runs, unsigned rollbacks)
{
	printf("snapshots (the guest wrote %u MiB of its RAM; medians: %u creates and restores, "
	       "%u clone rounds, %u rollbacks):\n", TOUCHED_MIB, runs, clone_runs, rollbacks);
	printf("  %-34s %9s %11s %11s %9s\n", "figure", "guest", "cubicle ms", "floor ms", "ratio");
	for (unsigned s = 0; s < n; s++) {
		char what[64];

		row("create Full (paused VM)", &figs[s], figs[s].create, figs[s].create_fl);
		row("restore to first guest instruction", &figs[s], figs[s].restore,
		    figs[s].restore_fl);
		snprintf(what, sizeof(what), "clone, %u at once, per clone", clones);
		row(what, &figs[s], figs[s].clone, figs[s].clone_fl);
		row("rollback (running VM)", &figs[s], figs[s].rollback, figs[s].rollback_fl);
		row("restore, Uffd memory backend", &figs[s], figs[s].restore_uffd,
		    figs[s].restore_fl);
		row("compress memory (memory.zst)", &figs[s], figs[s].compress, figs[s].compress_fl);
		row("restore from memory.zst", &figs[s], figs[s].zrestore, figs[s].zrestore_fl);
	}
	for (unsigned s = 0; s < n; s++)
		printf("  %u MiB: memory.zst %.1f MiB\n", figs[s].mib, figs[s].zst_bytes / 1048576.0);
	for (unsigned s = 0; s < n; s++)
		printf("  %u MiB: memory file %.1f MiB allocated; rollback: its reply's \"ms\" %.2f,\n"
		       "    on a paused VM %.2f ms; a bare request (GET /) %.2f ms\n", figs[s].mib,
		       figs[s].written / 1048576.0, figs[s].rollback_srv, figs[s].rollback_paused,
		       figs[s].request);
	printf("Diff snapshots (a VM tracking dirty pages, rolled back to its Full snapshot, its\n"
	       "guest dirties N MiB, paused; medians: %u creates and restores of each):\n", runs);
	printf("  %-34s %9s %11s %11s %9s\n", "figure", "guest", "cubicle ms", "floor ms", "ratio");
	for (unsigned d = 0; d < N_DIRTY; d++) {
		char what[64];

		snprintf(what, sizeof(what), "create Diff, %u MiB dirty", dirty_mib[d]);
		for (unsigned s = 0; s < n; s++)
			row(what, &figs[s], figs[s].diff[d], figs[s].diff_fl[d]);
	}
	for (unsigned d = 0; d < N_DIRTY; d++) {
		char what[64];

		snprintf(what, sizeof(what), "restore from Diff, %u MiB dirty", dirty_mib[d]);
		for (unsigned s = 0; s < n; s++)
			row(what, &figs[s], figs[s].drestore[d], figs[s].drestore_fl[d]);
	}
	for (unsigned s = 0; s < n; s++) {
		printf("  %u MiB: Diff memory files allocated:", figs[s].mib);
		for (unsigned d = 0; d < N_DIRTY; d++)
			printf("%s %.1f MiB (%u dirty)", d ? "," : "",
			       figs[s].diff_written[d] / 1048576.0, dirty_mib[d]);
		printf("\n");
	}
	printf("floors: create = write()+fsync() of the memory file's allocated bytes into a new\n"
	       "file beside it; restore = snap_floor (memory file mapped private, VM, irqchip,\n"
	       "vCPU, KVM_RUN to the first exit); clone = %u of those at once, per floor (each\n"
	       "clone and floor stopped once it showed its line); rollback = PATCH /vm Paused +\n"
	       "Resumed on the same connection (the pause and resume a rollback makes itself);\n"
	       "create Diff = the same as create's, for the Diff's memory file; restore from\n"
	       "Diff = snap_floor on the Full's memory file, plus (medians added) that file\n"
	       "mapped private and the Diff's pages pread into it, in bench/snapshot;\n"
	       "restore with Uffd = restore's floor; compress = the stock zstd, same level\n"
	       "and threads, output discarded; restore from memory.zst = restore's floor plus\n"
	       "`zstd -d` of it, output discarded (0: no zstd installed).\n",
	       clones);
}

static int usage(void)
{
	fprintf(stderr, "usage: snapshot CUBICLE SNAP_FLOOR PAYLOAD [-r RUNS] [-n CLONES] "
			"[-c CLONE_RUNS] [-b ROLLBACKS] [-t TIMEOUT_S] [-v] [MIB...]\n");
	return 2;
}

int main(int argc, char **argv)
{
	unsigned runs = 5, clones = 50, clone_runs = 3, rollbacks = 20, n = 0;
	static struct figs figs[MAX_SIZES];
	const char *tmp = getenv("TMPDIR");
	char snap[PATH_MAX];
	int c, kvm;

	while ((c = getopt(argc, argv, "r:n:c:b:t:v")) != -1) {
		unsigned v = optarg ? (unsigned)strtoul(optarg, NULL, 10) : 0;

		switch (c) {
		case 'r':
			runs = v;
			break;
		case 'n':
			clones = v;
			break;
		case 'c':
			clone_runs = v;
			break;
		case 'b':
			rollbacks = v;
			break;
		case 't':
			timeout_s = (int)v;
			break;
		case 'v':
			verbose = true;
			break;
		default:
			return usage();
		}
	}
	if (argc - optind < 3 || !runs || runs > MAX_RUNS || !clones || clones > MAX_CLONES ||
	    !clone_runs || clone_runs > MAX_RUNS || !rollbacks || rollbacks > MAX_RUNS ||
	    timeout_s < 1)
		return usage();
	cub = argv[optind];
	sfloor = argv[optind + 1];
	payload = argv[optind + 2];
	for (int i = optind + 3; i < argc; i++) {
		if (n == MAX_SIZES || !(figs[n].mib = (unsigned)strtoul(argv[i], NULL, 10)) ||
		    figs[n].mib < TOUCHED_MIB + 4)
			return usage();
		n++;
	}
	if (!n) {
		figs[n++].mib = 128;
		figs[n++].mib = 2048;
	}
	/* Without KVM nothing here can be measured: a failure, as for
	 * bench/startup; bench/snapshot-nested.sh measures in an L1 VM. */
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		fprintf(stderr, "snapshot: /dev/kvm: %s: no KVM here to measure with; "
				"bench/snapshot-nested.sh runs this in the nested harness\n",
			strerror(errno));
		return 1;
	}
	close(kvm);
	signal(SIGPIPE, SIG_IGN);
	for (unsigned s = 0; s < n; s++) {
		snprintf(work, sizeof(work), "%s/cubicle-snapbench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(work)) {
			perror(work);
			return 1;
		}
		path(snap, "snap");
		fprintf(stderr, "snapshot: %u MiB guest: create x%u...\n", figs[s].mib, runs);
		bench_create(&figs[s], runs, snap);
		fprintf(stderr, "snapshot: %u MiB guest: restore x%u, %u clones x%u...\n",
			figs[s].mib, runs, clones, clone_runs);
		bench_restore(&figs[s], runs, clones, clone_runs, snap);
		fprintf(stderr, "snapshot: %u MiB guest: rollback x%u...\n", figs[s].mib, rollbacks);
		bench_rollback(&figs[s], rollbacks, snap);
		path(snap, "dsnap");
		fprintf(stderr, "snapshot: %u MiB guest: Diff create x%u, restore x%u (%u and %u MiB dirty)...\n",
			figs[s].mib, runs, runs, dirty_mib[0], dirty_mib[1]);
		bench_diff(&figs[s], runs, snap);
		bench_diff_restore(&figs[s], runs, snap);
		fprintf(stderr, "snapshot: %u MiB guest: compress, restore from memory.zst x%u...\n",
			figs[s].mib, runs);
		bench_zst(&figs[s], runs, snap);
		nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		*work = '\0';
	}
	report(figs, n, runs, clones, clone_runs, rollbacks);
	return 0;
}
