/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the seccomp allow-lists (vmm-core/confine.c): each case runs in a child process
 * that confines one of its threads and then makes calls its kind may or may not make. */
#include <dirent.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bpfcache.h"
#include "confine.h"
#include "cunit_main.h"
#include "loader.h"

static void *nop(void *arg)
{
	return arg;
}

/* How in_child starts: confine_init, or confine_start with a thread that
 * runs confine_build (cubicle's signal thread). */
static bool use_start;

static void *builder(void *arg)
{
	confine_build();
	return arg;
}

/* Run fn in a child after confine_init(mode, reg); its exit status, and
 * what it wrote to stderr in @out. */
static int in_child(enum confine_mode mode, const struct registry *reg, int (*fn)(void),
		    char *out, size_t outlen)
{
	int pfd[2], status = -1;
	pid_t pid;
	ssize_t n;
	size_t got = 0;

	if (pipe(pfd) < 0)
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		char err[256] = "";

		dup2(pfd[1], STDERR_FILENO);
		close(pfd[0]);
		pthread_t t;

		/* as in cubicle, the process has made a thread before any
		 * filter (glibc sets up its thread signals then) */
		if (pthread_create(&t, NULL, nop, NULL) || pthread_join(t, NULL))
			_exit(99);
		if ((use_start ? confine_start : confine_init)(mode, reg, err, sizeof(err))) {
			fprintf(stderr, "confine_init: %s\n", err);
			_exit(100);
		}
		if (use_start && (pthread_create(&t, NULL, builder, NULL) || pthread_detach(t)))
			_exit(99);
		_exit(fn());
	}
	close(pfd[1]);
	while (got + 1 < outlen && (n = read(pfd[0], out + got, outlen - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(pfd[0]);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

/* A vCPU thread opening a file: forbidden. */
static int vcpu_opens(void)
{
	int fd;

	if (confine_thread(CONFINE_VCPU, "vcpu7"))
		return 101;
	fd = open("/dev/null", O_RDONLY);
	return fd >= 0 ? 0 : 102;
}

/* What a vCPU thread does do: I/O on its fds, memory, time, futexes,
 * threads (clone3 answers ENOSYS, glibc falls back to clone). */
static int vcpu_allowed(void)
{
	int fds[2];
	char b = 'x';
	void *p, *ret = NULL;
	pthread_t t;
	struct timespec ts;

	if (pipe(fds) < 0 || confine_thread(CONFINE_VCPU, "vcpu0"))
		return 101;
	if (write(fds[1], &b, 1) != 1 || read(fds[0], &b, 1) != 1 || b != 'x')
		return 102;
	p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || munmap(p, 1 << 20))
		return 103;
	free(malloc(1 << 22)); /* malloc's own mmap */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (syscall(SYS_clone3, NULL, 0) != -1 || errno != ENOSYS)
		return 104;
	if (pthread_create(&t, NULL, nop, &b) || pthread_join(t, &ret) || ret != &b)
		return 105;
	close(fds[0]);
	close(fds[1]);
	return 0;
}

/* Executable memory: only the control thread maps it. */
static int vcpu_maps_exec(void)
{
	if (confine_thread(CONFINE_VCPU, "vcpu1"))
		return 101;
	mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return 0;
}

/* A new process: no thread may fork. */
static int control_forks(void)
{
	pid_t pid;

	if (confine_thread(CONFINE_CONTROL, "event-loop"))
		return 101;
	pid = fork();
	if (pid == 0)
		_exit(0);
	return 0;
}

/* The control thread opens files (the API's snapshots): those it is let
 * reach where Landlock fences it. */
static int control_opens(void)
{
	int fd;

	if (confine_allow("/dev/null", false) || confine_thread(CONFINE_CONTROL, "event-loop"))
		return 101;
	fd = open("/dev/null", O_RDONLY);
	if (fd < 0)
		return 102;
	close(fd);
	return 0;
}

/* Filters stack: a worker started by a vCPU thread keeps the vCPU's. */
static int stacked(void)
{
	int fd;

	if (confine_thread(CONFINE_CONTROL, "ctl") || confine_thread(CONFINE_WORKER, "blk-io"))
		return 101;
	if (!confine_thread_has(CONFINE_CONTROL) || !confine_thread_has(CONFINE_WORKER) ||
	    confine_thread_has(CONFINE_VCPU))
		return 102;
	fd = open("/dev/null", O_RDONLY); /* control allows it, worker does not */
	return fd >= 0 ? 0 : 103;
}

/* The signal thread: not even I/O on a file. */
static int signals_preads(void)
{
	char b;

	if (confine_thread(CONFINE_SIGNALS, "signals"))
		return 101;
	return pread(0, &b, 1, 0) == 1 ? 0 : 0;
}

/* A plugin's declared call: uname (any arguments) and one ioctl number. */
static const struct cub_syscall decl[] = {
	CUB_SYSCALL("uname"),
	CUB_SYSCALL_IOCTL(0x5423), /* TIOCSETD: meaningless on a pipe */
};
static const struct cub_plugin decl_desc = {
	.abi_major = CUB_ABI_MAJOR, .abi_minor = CUB_ABI_MINOR, .size = sizeof(struct cub_plugin),
	.kind = CUB_KIND_DEVICE, .name = "decl", .syscalls = decl, .n_syscalls = 2,
};
static struct plugin decl_plugin = { .d = &decl_desc };
static struct plugin *decl_list[] = { &decl_plugin };
static const struct registry decl_reg = { decl_list, 1 };

static int vcpu_unames(void)
{
	struct utsname u;
	int fds[2], d = 0;

	if (pipe(fds) < 0 || confine_thread(CONFINE_VCPU, "vcpu0"))
		return 101;
	if (uname(&u))
		return 102;
	ioctl(fds[0], 0x5423, &d); /* declared: any result but SIGSYS */
	return 0;
}

static int vcpu_ioctl_undeclared(void)
{
	int fds[2], d = 0;

	if (pipe(fds) < 0 || confine_thread(CONFINE_VCPU, "vcpu0"))
		return 101;
	ioctl(fds[0], 0x5424, &d); /* TIOCGETD: not declared */
	return 0;
}

static int signals_unames(void)
{
	struct utsname u;

	if (confine_thread(CONFINE_SIGNALS, "signals"))
		return 101;
	return uname(&u) ? 102 : 0;
}

static void expect_killed(int (*fn)(void), const struct registry *reg, const char *thread,
			  const char *call)
{
	char out[1024], want[128];
	int st = in_child(CONFINE_ENFORCE, reg, fn, out, sizeof(out));

	CU_ASSERT_EQUAL(st, CONFINE_EXIT_STATUS);
	snprintf(want, sizeof(want), "thread %s made the forbidden system call %s (", thread, call);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
	if (st != CONFINE_EXIT_STATUS || !strstr(out, want))
		fprintf(stderr, "status %d, stderr: %s\n", st, out);
}

static void expect_ok(int (*fn)(void), const struct registry *reg, enum confine_mode mode)
{
	char out[1024];
	int st = in_child(mode, reg, fn, out, sizeof(out));

	CU_ASSERT_EQUAL(st, 0);
	if (st)
		fprintf(stderr, "status %d, stderr: %s\n", st, out);
}

static void test_vcpu(void)
{
	expect_killed(vcpu_opens, NULL, "vcpu7", "openat");
	expect_ok(vcpu_allowed, NULL, CONFINE_ENFORCE);
	expect_killed(vcpu_maps_exec, NULL, "vcpu1", "mmap");
}

static void test_control(void)
{
	expect_ok(control_opens, NULL, CONFINE_ENFORCE);
	expect_killed(control_forks, NULL, "event-loop", "clone");
}

static void test_stacked_and_signals(void)
{
	expect_killed(stacked, NULL, "blk-io", "openat");
	expect_killed(signals_preads, NULL, "signals", "pread64");
}

static void test_plugin_declared(void)
{
	expect_ok(vcpu_unames, &decl_reg, CONFINE_ENFORCE);
	expect_killed(vcpu_unames, NULL, "vcpu0", "uname");
	expect_killed(vcpu_ioctl_undeclared, &decl_reg, "vcpu0", "ioctl");
	/* not added to the signal thread's list */
	expect_killed(signals_unames, &decl_reg, "signals", "uname");
}

/* Landlock (where the kernel has it): a vCPU thread whose seccomp list a
 * plugin widened to openat still reaches no file by path; the control
 * thread does. */
static const struct cub_syscall open_decl[] = { CUB_SYSCALL("openat") };
static const struct cub_plugin open_desc = {
	.abi_major = CUB_ABI_MAJOR, .abi_minor = CUB_ABI_MINOR, .size = sizeof(struct cub_plugin),
	.kind = CUB_KIND_DEVICE, .name = "opener", .syscalls = open_decl, .n_syscalls = 1,
};
static struct plugin open_plugin = { .d = &open_desc };
static struct plugin *open_list[] = { &open_plugin };
static const struct registry open_reg = { open_list, 1 };

static int vcpu_opens_landlocked(void)
{
	if (confine_thread(CONFINE_VCPU, "vcpu0"))
		return 101;
	if (open("/dev/null", O_RDONLY) >= 0)
		return 102; /* Landlock let it through */
	return errno == EACCES ? 0 : 103;
}

/* The control thread reaches what confine_allow let it, and nothing else:
 * in a folder allowed for writing it makes, writes, renames and removes
 * (also when it was first allowed for reading); an allowed file it reads
 * but does not write (its folder allowed twice); /dev/null it cannot open. */
static char ll_dir[64];

static int control_landlocked(void)
{
	char a[128], b[128], sub[128];
	int fd;

	snprintf(a, sizeof(a), "%s/rw/a", ll_dir);
	snprintf(b, sizeof(b), "%s/rw/b", ll_dir);
	snprintf(sub, sizeof(sub), "%s/rw/sub", ll_dir);
	if (!confine_paths_fenced())
		return 100;
	if (confine_allow(a, false) || strlen(ll_dir) + 4 >= sizeof(a)) /* not made yet: ENOENT is 0 */
		return 101;
	/* rw asked for to read first: asked again to write, it is writable */
	snprintf(a, sizeof(a), "%s/rw", ll_dir);
	if (confine_allow(a, false) || confine_allow(a, true))
		return 101;
	/* ro twice: still read only */
	snprintf(a, sizeof(a), "%s/ro", ll_dir);
	if (confine_allow(a, false) || confine_allow(a, false) ||
	    confine_thread(CONFINE_CONTROL, "event-loop"))
		return 102;
	snprintf(a, sizeof(a), "%s/rw/a", ll_dir);
	fd = open(a, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || write(fd, "x", 1) != 1 || close(fd))
		return 103;
	if (rename(a, b) || mkdir(sub, 0700) || rmdir(sub) || unlink(b))
		return 104;
	snprintf(a, sizeof(a), "%s/ro/f", ll_dir);
	fd = open(a, O_RDONLY);
	if (fd < 0)
		return 105;
	close(fd);
	if (open(a, O_WRONLY) >= 0 || errno != EACCES)
		return 106;
	snprintf(a, sizeof(a), "%s/ro/new", ll_dir);
	if (open(a, O_WRONLY | O_CREAT, 0600) >= 0 || errno != EACCES)
		return 107;
	if (open("/dev/null", O_RDONLY) >= 0 || errno != EACCES)
		return 108;
	return 0;
}

static void test_landlock(void)
{
	char p[128];
	int fd;

	if (syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) < 1) {
		printf("(no Landlock in this kernel: not tested) ");
		return;
	}
	expect_ok(vcpu_opens_landlocked, &open_reg, CONFINE_ENFORCE);
	snprintf(ll_dir, sizeof(ll_dir), "/tmp/cubicle-ll-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(ll_dir));
	snprintf(p, sizeof(p), "%s/rw", ll_dir);
	CU_ASSERT_EQUAL(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/ro", ll_dir);
	CU_ASSERT_EQUAL(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/ro/f", ll_dir);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	CU_ASSERT(fd >= 0);
	if (fd >= 0)
		close(fd);
	expect_ok(control_landlocked, &open_reg, CONFINE_ENFORCE);
	unlink(p);
	snprintf(p, sizeof(p), "%s/ro", ll_dir);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/rw", ll_dir);
	rmdir(p);
	rmdir(ll_dir);
}

/* log: the call goes through (the kernel logs it); off: no filter. */
static void test_modes(void)
{
	expect_ok(vcpu_opens, NULL, CONFINE_LOG);
	expect_ok(vcpu_opens, NULL, CONFINE_OFF);
	expect_ok(control_forks, NULL, CONFINE_OFF);
	CU_ASSERT_EQUAL(confine_mode_parse("enforce"), CONFINE_ENFORCE);
	CU_ASSERT_EQUAL(confine_mode_parse("log"), CONFINE_LOG);
	CU_ASSERT_EQUAL(confine_mode_parse("off"), CONFINE_OFF);
	CU_ASSERT_EQUAL(confine_mode_parse("on"), -1);
}

/* A declared call libseccomp does not know: confine_init says which. */
static void test_unknown_call(void)
{
	static const struct cub_syscall bad[] = { CUB_SYSCALL("no_such_call") };
	static const struct cub_plugin bd = {
		.abi_major = CUB_ABI_MAJOR, .abi_minor = CUB_ABI_MINOR,
		.size = sizeof(struct cub_plugin), .kind = CUB_KIND_DEVICE, .name = "bad",
		.syscalls = bad, .n_syscalls = 1,
	};
	struct plugin bp = { .d = &bd };
	struct plugin *l[] = { &bp };
	struct registry reg = { l, 1 };
	char err[256] = "";

	CU_ASSERT_EQUAL(confine_init(CONFINE_ENFORCE, &reg, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "plugin bad"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no_such_call"));
	confine_free();
	/* the build left to confine_build: the start succeeds (the signal
	 * thread's list has no plugin calls), the wait says why not */
	err[0] = '\0';
	CU_ASSERT_EQUAL(confine_start(CONFINE_ENFORCE, &reg, err, sizeof(err)), 0);
	confine_build();
	confine_build(); /* nothing left to do */
	CU_ASSERT_EQUAL(confine_ready(err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no_such_call"));
	CU_ASSERT_EQUAL(confine_thread(CONFINE_VCPU, "vcpu0"), -EINVAL);
	CU_ASSERT_FALSE(confine_thread_has(CONFINE_VCPU));
	confine_free();
}

/* The build left to a thread the caller starts (confine_start and
 * confine_build, as cubicle's signal thread does it): the same lists, each
 * thread waiting for them. */
static void test_background(void)
{
	use_start = true;
	expect_killed(vcpu_opens, NULL, "vcpu7", "openat");
	expect_ok(vcpu_allowed, NULL, CONFINE_ENFORCE);
	expect_ok(control_opens, NULL, CONFINE_ENFORCE);
	expect_killed(control_forks, NULL, "event-loop", "clone");
	expect_killed(signals_preads, NULL, "signals", "pread64");
	expect_ok(vcpu_unames, &decl_reg, CONFINE_ENFORCE);
	expect_killed(vcpu_unames, NULL, "vcpu0", "uname");
	use_start = false;
}

/* ---- compiled filters kept between starts (bpfcache.c) ---- */

static char cache_root[] = "/tmp/cubicle-test-confine-XXXXXX";

#define CACHE_MAX 8
#define FILE_MAX  16384

struct cfile {
	char path[400];
	uint8_t b[FILE_MAX];
	size_t len;
};

/* The cache's files in @dir (sorted by name): their count. */
static int cache_files(const char *dir, struct cfile *f)
{
	struct dirent **e;
	int n = scandir(dir, &e, NULL, alphasort), k = 0;

	for (int i = 0; i < n; i++) {
		size_t l = strlen(e[i]->d_name);

		if (k < CACHE_MAX && l > 4 && !strcmp(e[i]->d_name + l - 4, ".bpf")) {
			int fd;
			ssize_t got;

			snprintf(f[k].path, sizeof(f[k].path), "%s/%s", dir, e[i]->d_name);
			fd = open(f[k].path, O_RDONLY);
			got = fd >= 0 ? read(fd, f[k].b, sizeof(f[k].b)) : -1;
			f[k].len = got > 0 ? (size_t)got : 0;
			if (fd >= 0)
				close(fd);
			k++;
		}
		free(e[i]);
	}
	free(e);
	return k;
}

static bool same_file(const struct cfile *want)
{
	static struct cfile now;
	int fd = open(want->path, O_RDONLY);
	ssize_t got = fd >= 0 ? read(fd, now.b, sizeof(now.b)) : -1;

	if (fd >= 0)
		close(fd);
	return got == (ssize_t)want->len && !memcmp(now.b, want->b, want->len);
}

static void write_file(const char *path, const void *b, size_t len)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, b, len), (ssize_t)len);
	close(fd);
}

static int start_and_free(void)
{
	char err[256] = "";
	int ret = confine_init(CONFINE_ENFORCE, NULL, err, sizeof(err));

	if (ret)
		fprintf(stderr, "confine_init: %s\n", err);
	confine_free();
	return ret;
}

/*
 * The first start compiles each list and keeps its program; a file that is
 * damaged, names another list, or may be written by others is refused and
 * written again from a fresh compile; a folder others may write is not
 * used; "off" uses none. A file that passes every check is what the
 * threads load: one holding an allow-all program (checksum right) lets a
 * vCPU call uname, which shows where the trust lies (the folder's owner).
 */
static void test_cache(void)
{
	static struct cfile f[CACHE_MAX], g[CACHE_MAX];
	char dir[300], global[300];
	struct stat st;
	int n, vcpu = -1;

	snprintf(global, sizeof(global), "%s", getenv("CUBICLE_SECCOMP_CACHE"));
	snprintf(dir, sizeof(dir), "%s/own", cache_root);
	CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
	setenv("CUBICLE_SECCOMP_CACHE", dir, 1);
	CU_ASSERT_EQUAL(start_and_free(), 0);
	n = cache_files(dir, f);
	CU_ASSERT_EQUAL_FATAL(n, 3); /* control, vCPU (and worker), signals */
	for (int i = 0; i < n; i++) {
		CU_ASSERT(f[i].len > 24 && !memcmp(f[i].b, "CUBBPF2\n", 8));
		CU_ASSERT_EQUAL(stat(f[i].path, &st), 0);
		CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
		if (memmem(f[i].b, f[i].len, "kind vcpu\n", 10))
			vcpu = i;
	}
	CU_ASSERT_FATAL(vcpu >= 0);
	/* the list names this machine's architecture (a cache shared by an
	 * x86 host and an arm64 guest over 9p must not mix them up) */
	{
		char arch[32];

		snprintf(arch, sizeof(arch), "\narch %u\n", (unsigned)seccomp_arch_native());
		CU_ASSERT(seccomp_arch_native() != 0 && memmem(f[vcpu].b, f[vcpu].len, arch, strlen(arch)));
	}
	/* the same lists again: the same files, untouched */
	CU_ASSERT_EQUAL(start_and_free(), 0);
	CU_ASSERT_EQUAL(cache_files(dir, g), 3);
	for (int i = 0; i < n; i++)
		CU_ASSERT(same_file(&f[i]));
	/* a damaged program */
	f[0].b[f[0].len - 1] ^= 0x40;
	write_file(f[0].path, f[0].b, f[0].len);
	f[0].b[f[0].len - 1] ^= 0x40;
	CU_ASSERT_EQUAL(start_and_free(), 0);
	CU_ASSERT(same_file(&f[0]));
	/* another list's file under this list's name */
	write_file(f[0].path, f[1].b, f[1].len);
	CU_ASSERT_EQUAL(start_and_free(), 0);
	CU_ASSERT(same_file(&f[0]));
	/* a file others may write */
	CU_ASSERT_EQUAL(chmod(f[1].path, 0666), 0);
	CU_ASSERT_EQUAL(start_and_free(), 0);
	CU_ASSERT(same_file(&f[1]));
	CU_ASSERT_EQUAL(stat(f[1].path, &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
	/* a folder others may write: nothing read, nothing written */
	CU_ASSERT_EQUAL(unlink(f[2].path), 0);
	CU_ASSERT_EQUAL(chmod(dir, 0777), 0);
	CU_ASSERT_EQUAL(start_and_free(), 0);
	CU_ASSERT_NOT_EQUAL(access(f[2].path, F_OK), 0);
	CU_ASSERT_EQUAL(chmod(dir, 0700), 0);
	/* "off" */
	setenv("CUBICLE_SECCOMP_CACHE", "off", 1);
	CU_ASSERT_EQUAL(start_and_free(), 0);
	CU_ASSERT_NOT_EQUAL(access(f[2].path, F_OK), 0);
	setenv("CUBICLE_SECCOMP_CACHE", dir, 1);
	CU_ASSERT_EQUAL(start_and_free(), 0);
	CU_ASSERT(same_file(&f[2]));
	/* cached programs confine as compiled ones do */
	expect_killed(vcpu_opens, NULL, "vcpu7", "openat");
	/* what a trusted file holds is what loads: the vCPU list made allow-all */
	{
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		uint32_t desc_len;
		uint8_t *b = g[0].b;
		uint64_t sum;

		memcpy(&desc_len, f[vcpu].b + 8, 4);
		memcpy(b, f[vcpu].b, 24 + desc_len);
		memcpy(b + 12, &(uint32_t){ 1 }, 4);
		memcpy(b + 24 + desc_len, &allow, sizeof(allow));
		sum = bpfcache_sum((const char *)b + 24, desc_len, &allow, sizeof(allow));
		memcpy(b + 16, &sum, 8);
		write_file(f[vcpu].path, b, 24 + desc_len + sizeof(allow));
		expect_ok(vcpu_unames, NULL, CONFINE_ENFORCE);
		write_file(f[vcpu].path, f[vcpu].b, f[vcpu].len);
		expect_killed(vcpu_unames, NULL, "vcpu0", "uname");
	}
	setenv("CUBICLE_SECCOMP_CACHE", global, 1);
}

/* In the child: every program came from confine_preload (3 lists: the
 * control threads', the vCPUs' and workers', the signal thread's). */
static int all_preloaded(void)
{
	return confine_preloaded() == 3 ? 0 : 110;
}

/*
 * Before a jail: confine_preload compiles the missing lists into the cache
 * and keeps the programs; a later start that cannot reach the cache (as a
 * jailed one cannot) takes them instead of compiling, and they confine as
 * compiled ones do. A list that differs from the preloaded one (another
 * mode) is compiled as before.
 */
static void test_preload(void)
{
	static struct cfile f[CACHE_MAX];
	char dir[300], global[300], out[1024];

	snprintf(global, sizeof(global), "%s", getenv("CUBICLE_SECCOMP_CACHE"));
	snprintf(dir, sizeof(dir), "%s/preload", cache_root);
	CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
	setenv("CUBICLE_SECCOMP_CACHE", dir, 1);
	confine_preload(CONFINE_ENFORCE, NULL);
	CU_ASSERT_EQUAL(cache_files(dir, f), 3); /* compiled, and kept for the next */
	setenv("CUBICLE_SECCOMP_CACHE", "off", 1);
	CU_ASSERT_EQUAL(in_child(CONFINE_ENFORCE, NULL, all_preloaded, out, sizeof(out)), 0);
	expect_killed(vcpu_opens, NULL, "vcpu7", "openat");
	expect_ok(vcpu_allowed, NULL, CONFINE_ENFORCE);
	/* log mode describes other lists: none preloaded fits */
	CU_ASSERT_EQUAL(in_child(CONFINE_LOG, NULL, all_preloaded, out, sizeof(out)), 110);
	/* from the cache the second time (a cache file holds what it should) */
	setenv("CUBICLE_SECCOMP_CACHE", dir, 1);
	confine_preload(CONFINE_ENFORCE, NULL);
	CU_ASSERT_EQUAL(cache_files(dir, f), 3);
	setenv("CUBICLE_SECCOMP_CACHE", "off", 1);
	CU_ASSERT_EQUAL(in_child(CONFINE_ENFORCE, NULL, all_preloaded, out, sizeof(out)), 0);
	confine_preload(CONFINE_OFF, NULL); /* nothing */
	setenv("CUBICLE_SECCOMP_CACHE", global, 1);
}

/* Can this process load a seccomp filter at all? (qemu-user cannot.) */
static bool seccomp_works(void)
{
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { .len = 1, .filter = &allow };
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		      syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       !WEXITSTATUS(status);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "vCPU list: open and exec mappings killed, I/O and threads allowed", test_vcpu },
		{ "control list: open allowed, fork killed", test_control },
		{ "filters stack; the signal thread's list", test_stacked_and_signals },
		{ "a plugin's declared calls", test_plugin_declared },
		{ "log and off", test_modes },
		{ "Landlock: no path for a vCPU thread, only the allowed ones for the control thread", test_landlock },
		{ "an unknown declared call", test_unknown_call },
		{ "filters compiled on the signal thread (confine_start, confine_build)", test_background },
		{ "compiled filters kept between starts: trusted, checked, refreshed", test_cache },
		{ "programs read before a jail, taken by the jailed start", test_preload },
		{ NULL, NULL },
	};
	char cmd[64];
	int ret;

	if (!seccomp_works()) {
		printf("SKIP: this process cannot load seccomp filters (qemu-user?)\n");
		return 77;
	}
	/* every start here keeps its programs in a folder of the test's own */
	if (!mkdtemp(cache_root)) {
		perror("mkdtemp");
		return 1;
	}
	setenv("CUBICLE_SECCOMP_CACHE", cache_root, 1);
	ret = cu_run("confine", tests);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", cache_root);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", cache_root);
	return ret;
}
