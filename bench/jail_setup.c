/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/jail_setup: a start's part in user space, on any host, with KVM or
 * without it: exec to KVM_CREATE_VM and exec to the first KVM_RUN (the
 * guest's first instruction) for `cubicle run`, `--seccomp off` and
 * `--jail DIR`, `--jail DIR --jail-netns-pool POOL` (a network namespace
 * made ahead), and with FLOOR (bench/floor) for the floor, medians, all
 * interleaved. No guest runs: /dev/kvm is /dev/null bound over it in this
 * program's own mount namespace, and bench/kvm_standin.so (preloaded)
 * answers every KVM call in user space and notes the instants of
 * KVM_CREATE_VM and the first KVM_RUN, which ends the guest at once. What
 * KVM does in the kernel (making the VM, its memory slots, irqchip and
 * vCPUs, entering the guest) is left out of every row, the floor's too:
 * these rows are what cubicle adds in user space, the part of issue 16's
 * first row and issue 14's last that does not need KVM to be measured.
 * Everything the jail does (cgroup, the namespaces' init and the VMM's
 * process, mounts, pivot, user namespace, the cached filters read before
 * the pivot) comes before KVM_CREATE_VM; the per-thread seccomp filters
 * and the jail's seal come after it. Needs root and cgroup v2.
 * Last, what a forked process costs on this host (see newproc_floor): a
 * jail whose VMM were forked would pay it on the way to the guest, and
 * where the host's paging is shadowed by a hypervisor that cost is large;
 * cubicle's VMM keeps the address space it was set up in (jail.c).
 * Usage: jail_setup CUBICLE KVM_STANDIN_SO PAYLOAD [RUNS [FLOOR]]
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RUNS 256

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * This process's /dev, in a mount namespace of its own: a tmpfs holding
 * null, zero, random and urandom (the host's, bound) and kvm (/dev/null).
 * 0, or -1 with a message.
 */
static int standin_dev(char *dir)
{
	static const char *const nodes[] = { "null", "zero", "random", "urandom", "kvm" };

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    !mkdtemp(dir) || mount("tmpfs", dir, "tmpfs", 0, "mode=0755")) {
		perror("jail_setup: a /dev of its own");
		return -1;
	}
	for (unsigned i = 0; i < sizeof(nodes) / sizeof(*nodes); i++) {
		char node[300], host[64];
		int fd;

		snprintf(node, sizeof(node), "%s/%s", dir, nodes[i]);
		snprintf(host, sizeof(host), "/dev/%s", i == 4 ? "null" : nodes[i]);
		fd = open(node, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0 || close(fd) || mount(host, node, NULL, MS_BIND, NULL)) {
			perror(node);
			return -1;
		}
	}
	if (mount(dir, "/dev", NULL, MS_BIND | MS_REC, NULL)) {
		perror("jail_setup: binding it over /dev");
		return -1;
	}
	/* the folder made for it goes: the tmpfs stays mounted at /dev */
	if (umount2(dir, MNT_DETACH) || rmdir(dir))
		perror(dir);
	return 0;
}

/* The instant stamped after @what ("kvm-standin: WHAT NS"), in ms, or 0. */
static double stamped(const char *out, const char *what)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "kvm-standin: %s ", what);
	p = strstr(out, key);
	return p ? (double)strtoll(p + strlen(key), NULL, 10) / 1e6 : 0;
}

/*
 * One start of @argv with @preload: exec to the stand-in's KVM_CREATE_VM
 * into *@vm, exec to its first KVM_RUN (the guest's first instruction)
 * into *@run, exec to reaped into *@life. The floor does not end by
 * itself (it waits to be killed): @kill_at_run kills it at its KVM_RUN.
 * 0, or -1 with what it printed.
 */
static int measure(char **argv, const char *preload, bool kill_at_run, double *vm, double *run,
		   double *life)
{
	char out[16384];
	size_t have = 0;
	int fds[2], status;
	double t0, at_vm, at_run;
	pid_t pid;
	ssize_t n;

	if (pipe2(fds, O_CLOEXEC))
		return -1;
	t0 = now_ms();
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(fds[1], 2);
		if (null >= 0)
			dup2(null, 1);
		setenv("LD_PRELOAD", preload, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	while (pid > 0 && (n = read(fds[0], out + have, sizeof(out) - 1 - have)) > 0) {
		have += (size_t)n;
		out[have] = '\0';
		if (kill_at_run && strstr(out, "kvm-standin: run "))
			kill(pid, SIGKILL);
	}
	close(fds[0]);
	out[have] = '\0';
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	*life = now_ms() - t0;
	at_vm = stamped(out, "create-vm");
	at_run = stamped(out, "run");
	if (at_vm < t0 || at_run < at_vm) {
		fprintf(stderr, "jail_setup: %s %s... never reached %s:\n%s", argv[0],
			argv[1] ? argv[1] : "", at_vm < t0 ? "KVM_CREATE_VM" : "KVM_RUN", out);
		return -1;
	}
	*vm = at_vm - t0;
	*run = at_run - t0;
	return 0;
}

/*
 * What a forked process costs on this host: fork to the child's first
 * instruction, and the child's first read of a page its parent had mapped
 * and touched, per page, beside the parent's own reads of the same pages.
 * Where a hypervisor shadows the guest's page tables (a PVM guest, this
 * project's usual test host) the child's first touch of every page is a
 * trip to the hypervisor, invisible to the kernel's fault counters. What
 * a jail that forked its VMM would add to each start; cubicle's does not
 * fork it (jail.c). Medians of @runs into *@start_ms, *@child_us and
 * *@parent_us; -1 on error.
 */
#define FLOOR_PAGES 512
static int newproc_floor(int runs, double *start_ms, double *child_us, double *parent_us)
{
	static double st[MAX_RUNS], ch[MAX_RUNS], pa[MAX_RUNS];
	long pg = sysconf(_SC_PAGESIZE);
	volatile unsigned char *buf = malloc((size_t)FLOOR_PAGES * (size_t)pg);
	int fds[2], ret = -1;

	if (!buf || pipe(fds))
		goto out;
	memset((void *)buf, 1, (size_t)FLOOR_PAGES * (size_t)pg);
	for (int i = 0; i < runs; i++) {
		double t[2], t0;
		unsigned sum = 0;
		pid_t pid;

		t0 = now_ms();
		for (int k = 0; k < FLOOR_PAGES; k++)
			sum += buf[(size_t)k * (size_t)pg];
		pa[i] = (now_ms() - t0) * 1e3 / FLOOR_PAGES;
		fflush(stdout);
		t0 = now_ms();
		pid = fork();
		if (pid == 0) {
			t[0] = now_ms();
			for (int k = 0; k < FLOOR_PAGES; k++)
				sum += buf[(size_t)k * (size_t)pg];
			t[1] = now_ms();
			_exit(write(fds[1], t, sizeof(t)) == (ssize_t)sizeof(t) && sum ? 0 : 1);
		}
		if (pid < 0 || read(fds[0], t, sizeof(t)) != (ssize_t)sizeof(t)) {
			if (pid > 0)
				waitpid(pid, NULL, 0);
			goto out_pipe;
		}
		waitpid(pid, NULL, 0);
		st[i] = t[0] - t0;
		ch[i] = (t[1] - t[0]) * 1e3 / FLOOR_PAGES;
	}
	*start_ms = median(st, runs);
	*child_us = median(ch, runs);
	*parent_us = median(pa, runs);
	ret = 0;
out_pipe:
	close(fds[0]);
	close(fds[1]);
out:
	free((void *)buf);
	return ret;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

/* An entry of the network namespace pool (or the pool's own mount):
 * unpinned, removed. */
static int unpin_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	umount2(path, MNT_DETACH);
	remove(path);
	return 0;
}

int main(int argc, char **argv)
{
	static double ms[5][MAX_RUNS], rs[5][MAX_RUNS], gap[5][MAX_RUNS], life[5][MAX_RUNS];
	const char *tmp = getenv("TMPDIR");
	char cfg[256], jail[300], jdir[310], dev[300], cpuid[300], pool[300];
	int runs = argc > 4 ? atoi(argv[4]) : 15, fd, ret = 1;
	int nv = argc > 5 ? 5 : 4;
	double m[5], r[5], g[5], l[5];
	FILE *f;

	if (argc < 4 || runs < 1 || runs > MAX_RUNS) {
		fprintf(stderr, "usage: jail_setup CUBICLE KVM_STANDIN_SO PAYLOAD [RUNS<=%d [FLOOR]]\n",
			MAX_RUNS);
		return 2;
	}
	printf("start under a stand-in KVM (bench/kvm_standin.so answers KVM in user space, no guest\n"
	       "runs; KVM's own work in the kernel, which the floor pays too, is not in these rows;\n"
	       "median of %d):\n", runs);
	if (geteuid() != 0) {
		printf("  not measured: --jail needs root\n");
		return 0;
	}
	if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) &&
	    access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK)) {
		printf("  not measured: no cgroup v2 (--jail makes one)\n");
		return 0;
	}
	snprintf(cfg, sizeof(cfg), "%s/cubicle-jail-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	snprintf(dev, sizeof(dev), "%s/cubicle-jail-bench-dev-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	fd = mkstemp(cfg);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		perror(cfg);
		return 1;
	}
	fprintf(f, "log_level = \"info\";\nmachine = { vcpus = 1; memory_mib = 16; };\n"
		   "boot = { kernel = \"%s\"; format = \"flat\"; mode = \"protected\"; };\n"
		   "devices = ( { type = \"boot-timer\"; id = \"boot\"; } );\n", argv[3]);
	fclose(f);
	/* (in a folder of root's alone: --jail refuses a folder its uid
	 * could rename, as in a sticky /tmp) */
	snprintf(jail, sizeof(jail), "%s-jail", cfg);
	snprintf(jdir, sizeof(jdir), "%s/j", jail);
	snprintf(cpuid, sizeof(cpuid), "%s-cpuid", cfg);
	snprintf(pool, sizeof(pool), "%s-netns", cfg);
	if (mkdir(jail, 0700) || mkdir(jdir, 0755) || chown(jdir, 65534, 65534)) {
		perror(jail);
		goto out;
	}
	/* the stand-in's CPUID is the host CPU's, not KVM's: kept in a folder
	 * of the bench's own, not in the user's cache (kvm_standin.c) */
	if (mkdir(cpuid, 0700) || setenv("CUBICLE_CPUID_CACHE", cpuid, 1)) {
		perror(cpuid);
		goto out;
	}
	if (standin_dev(dev))
		goto out;
	{
		char *cub[] = { argv[1], "run", cfg, NULL };
		char *off[] = { argv[1], "run", "--seccomp", "off", cfg, NULL };
		char *jailed[] = { argv[1], "run", "--jail", jdir, cfg, NULL };
		char *pooled[] = { argv[1], "run", "--jail", jdir, "--jail-netns-pool", pool, cfg,
				   NULL };
		char *flo[] = { argc > 5 ? argv[5] : NULL, NULL };
		char **v[5] = { off, cub, jailed, pooled, flo };

		/* interleaved, the order turned each round (see bench/startup) */
		for (int i = 0; i < runs; i++)
			for (int k = 0; k < nv; k++) {
				int j = (i + k) % nv;

				if (measure(v[j], argv[2], j == 4, &ms[j][i], &rs[j][i], &life[j][i]))
					goto out;
				gap[j][i] = rs[j][i] - ms[j][i];
			}
	}
	for (int j = 0; j < nv; j++) {
		m[j] = median(ms[j], runs);
		r[j] = median(rs[j], runs);
		g[j] = median(gap[j], runs);
		l[j] = median(life[j], runs);
	}
	printf("                 exec to          exec to the     KVM_CREATE_VM to   exec to\n"
	       "                 KVM_CREATE_VM    first KVM_RUN   the first KVM_RUN  reaped\n");
	printf("  --seccomp off  %6.2f ms        %6.2f ms       %6.2f ms          %6.2f ms\n", m[0],
	       r[0], g[0], l[0]);
	printf("  default        %6.2f ms        %6.2f ms       %6.2f ms          %6.2f ms\n", m[1],
	       r[1], g[1], l[1]);
	printf("  --jail         %6.2f ms        %6.2f ms       %6.2f ms          %6.2f ms\n", m[2],
	       r[2], g[2], l[2]);
	printf("  --jail, --jail-netns-pool\n"
	       "                 %6.2f ms        %6.2f ms       %6.2f ms          %6.2f ms\n", m[3],
	       r[3], g[3], l[3]);
	if (nv == 5) {
		printf("  the floor      %6.2f ms        %6.2f ms       %6.2f ms          (bench/floor)\n",
		       m[4], r[4], g[4]);
		printf("  cubicle's default beside the floor: %.2fx to KVM_CREATE_VM, %.2fx to the first KVM_RUN\n"
		       "    (--seccomp off %.2fx, %.2fx)\n",
		       m[1] / m[4], r[1] / r[4], m[0] / m[4], r[0] / r[4]);
	}
	printf("  what seccomp adds to the first KVM_RUN: %+.2f ms (after KVM_CREATE_VM %+.2f ms)\n",
	       r[1] - r[0], g[1] - g[0]);
	printf("  what the jail adds to the first KVM_RUN, beside the default: %+.2f ms (exec to reaped %+.2f ms);\n"
	       "    with a network namespace made ahead (--jail-netns-pool): %+.2f ms\n",
	       r[2] - r[1], l[2] - l[1], r[3] - r[1]);
	{
		double st, ch, pa;

		if (newproc_floor(runs, &st, &ch, &pa) == 0)
			printf("  a fork on this host (the jail makes none on the way to the VM): to the child's first\n"
			       "    instruction %.2f ms; its first read of a page its parent had touched %.2f us a page\n"
			       "    (the parent's %.3f us)\n",
			       st, ch, pa);
		else
			printf("  a fork on this host: not measured (%s)\n", strerror(errno));
	}
	ret = 0;
out:
	unlink(cfg);
	nftw(jail, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	nftw(cpuid, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	nftw(pool, unpin_one, 16, FTW_DEPTH | FTW_PHYS); /* the pool's namespaces */
	return ret;
}
