/* SPDX-License-Identifier: Apache-2.0 */
/* bench/startup: median time from exec to the guest's first instruction, and
 * the VMM's resident memory excluding guest RAM, for cubicle and for the
 * floor (bench/floor, a bare KVM_CREATE_VM+VCPU+RUN) measured in the same run;
 * the same with --api-sock, with --seccomp off, and (root) with --jail.
 * The goal rows also show their spread round by round (see spread).
 * Usage: startup CUBICLE FLOOR PAYLOAD [RUNS] */
#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long after the marker the memory is read (measure). */
#define SETTLE_MS 50

struct sample {
	double ms;
	long rss_kib; /* resident pages of every mapping but guest RAM (smaps) */
	double life_ms; /* exec to the marker plus SIGTERM to reaped: a create-exit cycle */
};

static int cmp(const void *a, const void *b);

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static long status_kib(pid_t pid, const char *key)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			v = strtol(line + strlen(key) + 1, NULL, 10);
	fclose(f);
	return v;
}

/*
 * Resident KiB of every mapping but guest RAM (cubicle's memfd, or with
 * machine.thp its anonymous RAM: named "cubicle-guest-ram" where the kernel
 * names anonymous memory, advised huge pages, "hg" in VmFlags, everywhere;
 * the floor's shared anonymous mapping), from /proc/PID/smaps: exact, where
 * status's RssAnon/RssFile are per-thread cached counters on kernels before
 * 6.2 and may be off by 64 pages a thread. -1 when smaps cannot be read.
 */
static long smaps_kib(pid_t pid)
{
	char path[64], line[512];
	bool guest = false;
	long kib = 0, rss = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		int n = 0;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s%n", &a, &b, &n) == 2 && n) {
			const char *name = line + n;

			kib += guest ? 0 : rss; /* the mapping before */
			rss = 0;
			name += strspn(name, " ");
			guest = !strncmp(name, "/memfd:", 7) || !strncmp(name, "/dev/zero", 9) ||
				strstr(name, "cubicle-guest-ram");
		} else if (!strncmp(line, "Rss:", 4)) {
			rss = strtol(line + 4, NULL, 10);
		} else if (!strncmp(line, "VmFlags:", 8) && strstr(line, " hg")) {
			guest = true;
		}
	}
	kib += guest ? 0 : rss;
	fclose(f);
	return kib;
}

/*
 * Use the API on @sock: a few requests on one connection (reads, a write,
 * a refusal), every answer read. 0, or -1 when the API did not answer.
 */
static int use_api(const char *sock)
{
	static const char reqs[] =
		"GET / HTTP/1.1\r\nHost: b\r\n\r\n"
		"GET /vm/config HTTP/1.1\r\nHost: b\r\n\r\n"
		"GET /devices HTTP/1.1\r\nHost: b\r\n\r\n"
		"PUT /machine-config HTTP/1.1\r\nHost: b\r\nContent-Length: 15\r\n\r\n{\"vcpu_count\":1}"
		"GET /nope HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char buf[16384];
	size_t have = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), answers = 0;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    write(fd, reqs, sizeof(reqs) - 1) != (ssize_t)(sizeof(reqs) - 1)) {
		perror("startup: the API socket");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	for (;;) { /* the last request asks the server to close */
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pf, 1, 30000) == 0) {
			fprintf(stderr, "startup: the API did not answer within 30 s\n");
			break;
		}
		n = read(fd, buf + have, sizeof(buf) - 1 - have);

		if (n <= 0)
			break;
		have += (size_t)n;
		if (have == sizeof(buf) - 1)
			break;
	}
	buf[have] = '\0';
	close(fd);
	for (char *p = buf; (p = strstr(p, "HTTP/1.1 ")); p++)
		answers++;
	if (answers != 5) {
		fprintf(stderr, "startup: the API gave %d answers to 5 requests: %.300s\n", answers,
			buf);
		return -1;
	}
	return 0;
}

/* Start argv with its stdout+stderr on a pipe; time until marker appears.
 * With @sock, use the API there before measuring the memory. */
static int measure(char *const argv[], const char *marker, struct sample *s, const char *sock)
{
	int p[2];
	char buf[8192];
	size_t have = 0;
	double t0, t1;
	pid_t pid;
	int st;

	if (pipe(p) < 0)
		return -1;
	t0 = now_ms();
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		ssize_t n;

		/* A run that never shows its marker is named, not waited for. */
		if (poll(&pf, 1, 60000) == 0) {
			fprintf(stderr, "startup: %s%s: no '%s' within 60 s; its output: %.*s\n",
				argv[0], sock ? " (API)" : "", marker, (int)have, buf);
			kill(pid, SIGKILL);
			close(p[0]);
			waitpid(pid, &st, 0);
			return -1;
		}
		n = read(p[0], buf + have, sizeof(buf) - 1 - have);
		if (n <= 0) {
			fprintf(stderr, "startup: %s ended before '%s': %.*s\n", argv[0], marker,
				(int)have, buf);
			close(p[0]);
			waitpid(pid, &st, 0);
			return -1;
		}
		have += (size_t)n;
		buf[have] = '\0';
		if (strstr(buf, marker))
			break;
		if (have == sizeof(buf) - 1)
			have = 0;
	}
	s->ms = now_ms() - t0;
	if (sock && use_api(sock)) {
		kill(pid, SIGKILL);
		close(p[0]);
		waitpid(pid, &st, 0);
		return -1;
	}
	/* The running VMM's memory, not the instant's: cubicle drops its
	 * setup's pages once the guest runs (run.c, run_settle_soon), on its
	 * event loop, a millisecond or so after the first instruction. Every
	 * program measured is given the same time. */
	usleep(SETTLE_MS * 1000);
	s->rss_kib = smaps_kib(pid);
	if (s->rss_kib < 0)
		s->rss_kib = status_kib(pid, "RssAnon:") + status_kib(pid, "RssFile:");
	t1 = now_ms();
	kill(pid, SIGTERM);
	close(p[0]);
	waitpid(pid, &st, 0);
	/* exec to the first instruction, then SIGTERM to reaped: the wait
	 * for the memory figure is not part of the VM's life */
	s->life_ms = s->ms + (now_ms() - t1);
	return 0;
}

static double median_life(struct sample *s, int n)
{
	double v[256];

	for (int i = 0; i < n; i++)
		v[i] = s[i].life_ms;
	qsort(v, (size_t)n, sizeof(v[0]), cmp);
	return v[n / 2];
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void median(struct sample *s, int n, double *ms, double *kib)
{
	double v[256];

	for (int i = 0; i < n; i++)
		v[i] = s[i].ms;
	qsort(v, (size_t)n, sizeof(v[0]), cmp);
	*ms = v[n / 2];
	for (int i = 0; i < n; i++)
		v[i] = (double)s[i].rss_kib;
	qsort(v, (size_t)n, sizeof(v[0]), cmp);
	*kib = v[n / 2];
}

/*
 * The spread of a row against its baseline, round by round: the two ran
 * within the same round, so the host's drift over the run weighs on both
 * alike. Per round a ratio (@ratio) or a difference in ms; printed on a
 * line of its own: "(per round: median M, middle half Q1-Q3)".
 */
static void spread(const struct sample *a, const struct sample *b, int n, bool ratio)
{
	double v[256];

	for (int i = 0; i < n; i++)
		v[i] = ratio ? a[i].ms / b[i].ms : a[i].ms - b[i].ms;
	qsort(v, (size_t)n, sizeof(v[0]), cmp);
	printf(ratio ? "  (per round: median %.2fx, middle half %.2f-%.2fx)\n"
		     : "  (per round: median %+.2f ms, middle half %+.2f to %+.2f ms)\n",
	       v[n / 2], v[n / 4], v[(3 * n) / 4]);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

/* An entry of the network namespace pool: unpinned, removed. */
static int unpin_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	umount2(path, MNT_DETACH);
	remove(path);
	return 0;
}

int main(int argc, char **argv)
{
	static struct sample cs[256], fs[256], as[256], os[256], js[256], ns[256], fis[256], fps[256];
	static struct sample ss[256], fss[256], ps[256];
	char cfg[256], sock[300], jail[300] = "", jdir[310], pool[300] = "";
	const char *tmp = getenv("TMPDIR");
	double cms, ckib, fms, fkib, ams, akib, oms, okib, jms = 0, jkib, pms, pkib;
	const char *nojail = NULL;
	int runs = argc > 4 ? atoi(argv[4]) : 15;
	int fd;
	FILE *f;

	if (argc < 4 || runs < 1 || runs > 256) {
		fprintf(stderr, "usage: startup CUBICLE FLOOR PAYLOAD [RUNS<=256]\n");
		return 2;
	}
	snprintf(cfg, sizeof(cfg), "%s/cubicle-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	fd = mkstemp(cfg);
	f = fdopen(fd, "w");
	fprintf(f, "log_level = \"info\";\nmachine = { vcpus = 1; memory_mib = 16; };\n"
		   "boot = { kernel = \"%s\"; format = \"flat\"; mode = \"protected\"; };\n"
		   "devices = ( { type = \"boot-timer\"; id = \"boot\"; } );\n", argv[3]);
	fclose(f);
	/* The jail (root, cgroup v2): a folder owned by nobody. */
	if (geteuid() != 0)
		nojail = "not root";
	else if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) &&
		 access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK))
		nojail = "no cgroup v2";
	else {
		/* (in a folder of root's alone: --jail refuses a folder its
		 * uid could rename, as in a sticky /tmp) */
		snprintf(jail, sizeof(jail), "%s-jail", cfg);
		snprintf(jdir, sizeof(jdir), "%s/j", jail);
		snprintf(pool, sizeof(pool), "%s-netns", cfg);
		if (mkdir(jail, 0700) || mkdir(jdir, 0755) || chown(jdir, 65534, 65534))
			nojail = "cannot make the jail folder";
	}
	{
		char *cub[] = { argv[1], "run", cfg, NULL };
		char *off[] = { argv[1], "run", "--seccomp", "off", cfg, NULL };
		char *nopit[] = { argv[1], "run", "--set", "machine.pit=false", cfg, NULL };
		char *splitc[] = { argv[1], "run", "--set", "machine.irqchip=split", cfg, NULL };
		char *jailed[] = { argv[1], "run", "--jail", jdir, cfg, NULL };
		char *pooled[] = { argv[1], "run", "--jail", jdir, "--jail-netns-pool", pool, cfg,
				   NULL };
		char *flo[] = { argv[2], NULL };
		char *flo_irq[] = { argv[2], "irqchip", NULL };
		char *flo_pit[] = { argv[2], "irqchip", "pit", NULL };
		char *flo_split[] = { argv[2], "split", NULL };
		/* The same VM with the control API served (a socket per run)
		 * and used: its memory is measured after five requests. */
		char *api[] = { argv[1], "run", "--api-sock", sock, cfg, NULL };

		const struct {
			char **argv;
			const char *marker;
			struct sample *s;
			const char *sock; /* the API's, renamed each round */
		} v[] = {
			{ flo, "!", fs, NULL },
			{ flo_irq, "!", fis, NULL },
			{ flo_pit, "!", fps, NULL },
			{ flo_split, "!", fss, NULL },
			{ cub, "guest boot done", cs, NULL },
			{ api, "guest boot done", as, sock },
			{ off, "guest boot done", os, NULL },
			{ nopit, "guest boot done", ns, NULL },
			{ splitc, "guest boot done", ss, NULL },
			/* last: left out without a jail */
			{ jailed, "guest boot done", js, NULL },
			{ pooled, "guest boot done", ps, NULL },
		};
		const int nv = (int)(sizeof(v) / sizeof(v[0])) - 2 * (nojail != NULL);

		/*
		 * Interleave so all see the same machine state, and rotate the
		 * order each round: a start just after a VM's teardown (work
		 * the kernel finishes after the reap) ran up to 2.6 ms slower,
		 * and a fixed order gave that to the same row every round
		 * (--seccomp off, behind the API run, read slower than the
		 * seccomp it is the baseline of).
		 */
		for (int i = 0; i < runs; i++) {
			snprintf(sock, sizeof(sock), "%s-%d.sock", cfg, i);
			for (int k = 0; k < nv; k++) {
				int j = (i + k) % nv;

				if (measure(v[j].argv, v[j].marker, &v[j].s[i], v[j].sock)) {
					unlink(cfg);
					return 1;
				}
			}
			unlink(sock);
		}
	}
	unlink(cfg);
	median(cs, runs, &cms, &ckib);
	median(fs, runs, &fms, &fkib);
	median(as, runs, &ams, &akib);
	median(os, runs, &oms, &okib);
	if (!nojail)
		median(js, runs, &jms, &jkib);
	printf("startup (exec to first guest instruction, median of %d):\n", runs);
	printf("  cubicle %8.2f ms   floor %8.2f ms   ratio %.2fx\n", cms, fms, cms / fms);
	spread(cs, fs, runs, true);
	median(fps, runs, &pms, &pkib);
	printf("  (the floor with the in-kernel irqchip and PIT cubicle creates: %.2f ms, ratio %.2fx)\n",
	       pms, cms / pms);
	{
		double sms, skib;

		median(ss, runs, &sms, &skib);
		printf("  machine.irqchip = \"split\" %6.2f ms   ratio %.2fx the floor\n", sms, sms / fms);
	}
	printf("VMM resident memory, excluding guest RAM (smaps, %d ms after the first\n"
	       "instruction, median):\n", SETTLE_MS);
	printf("  cubicle %8.0f KiB  floor %8.0f KiB  ratio %.2fx\n", ckib, fkib, ckib / fkib);
	printf("the control API served (--api-sock) and used (5 requests answered), against\n"
	       "the same run without it:\n");
	printf("  startup %8.2f ms   ratio %.2fx;  resident %8.0f KiB  %+.0f KiB\n", ams,
	       ams / cms, akib, akib - ckib);
	printf("confinement: the default (seccomp filters per thread) and --jail, against\n"
	       "--seccomp off without a jail (the goal: under 1 ms added):\n");
	printf("  --seccomp off %8.2f ms;  resident %8.0f KiB\n", oms, okib);
	printf("  seccomp       %8.2f ms   ratio %.2fx  %+.2f ms;  resident %+.0f KiB\n", cms,
	       cms / oms, cms - oms, ckib - okib);
	spread(cs, os, runs, false);
	if (nojail)
		printf("  seccomp + jail: not measured (%s)\n", nojail);
	else {
		double qms, qkib;

		printf("  seccomp + jail %7.2f ms   ratio %.2fx  %+.2f ms (its RSS is the supervisor's: not shown)\n",
		       jms, jms / oms, jms - oms);
		spread(js, os, runs, false);
		median(ps, runs, &qms, &qkib);
		printf("  seccomp + jail, --jail-netns-pool (a network namespace made ahead)\n"
		       "                %7.2f ms   ratio %.2fx  %+.2f ms\n", qms, qms / oms, qms - oms);
		spread(ps, os, runs, false);
	}
	{
		double cl = median_life(cs, runs), nl = median_life(ns, runs), fl = median_life(fs, runs);
		double fil = median_life(fis, runs), fpl = median_life(fps, runs);
		double sl = median_life(ss, runs), fsl = median_life(fss, runs);

		printf("create -> exit, one VM after another (exec to reaped, SIGTERM at the first\n"
		       "instruction), median; machine.pit = false leaves out the in-kernel PIT:\n");
		printf("  cubicle %8.2f ms (%5.1f VMs/s)   machine.pit = false %8.2f ms (%5.1f VMs/s, %.2fx)\n",
		       cl, 1000 / cl, nl, 1000 / nl, cl / nl);
		printf("  floor   %8.2f ms (%5.1f VMs/s)   ratio %.2fx / %.2fx\n", fl, 1000 / fl, cl / fl,
		       nl / fl);
		/* The same floor with the machine cubicle asks KVM for: most
		 * of a short VM's life is the kernel's teardown of it. */
		printf("the floor with KVM's in-kernel irqchip, as cubicle creates it (after the RAM),\n"
		       "with and without the PIT:\n");
		printf("  floor + irqchip + PIT %8.2f ms (%5.1f VMs/s)   cubicle   ratio %.2fx\n", fpl,
		       1000 / fpl, cl / fpl);
		printf("  floor + irqchip       %8.2f ms (%5.1f VMs/s)   pit=false ratio %.2fx\n", fil,
		       1000 / fil, nl / fil);
		/* KVM's LAPICs only: nothing on its I/O buses to wait for */
		printf("machine.irqchip = \"split\" (KVM's LAPICs, cubicle's IOAPIC; no 8259, no PIT),\n"
		       "beside the default and the floor with KVM's split irqchip:\n");
		printf("  cubicle split %8.2f ms (%5.1f VMs/s, %.2fx the default's rate)\n", sl,
		       1000 / sl, cl / sl);
		printf("  floor + split %8.2f ms (%5.1f VMs/s)   ratio %.2fx\n", fsl, 1000 / fsl,
		       sl / fsl);
	}
	if (jail[0])
		nftw(jail, rm_one, 16, FTW_DEPTH | FTW_PHYS); /* what the jail runs left */
	if (pool[0])
		nftw(pool, unpin_one, 16, FTW_DEPTH | FTW_PHYS); /* the pool's namespaces */
	return 0;
}
