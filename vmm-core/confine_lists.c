/* SPDX-License-Identifier: Apache-2.0 */
/* The seccomp allow-lists per kind of thread: rules, their text (the cache's key), compiling. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cnode.h"
#include "confine.h"
#include "confine_lists.h"
#include "resident.h"
#include "cubicle-build.h"
#include "jail.h"
#include "loader.h"

struct crule {
	const char *name;
	int arg;        /* -1: any arguments */
	uint64_t mask, value;
	uint32_t errno_; /* nonzero: answer -errno_ instead of allowing */
};

#define ANY(n) { (n), -1, 0, 0, 0 }
#define ARG(n, i, m, v) { (n), (i), (m), (v), 0 }
#define IOC(v) ARG("ioctl", 1, 0xffffffffu, (v))
#define IOC_TYPE(t) ARG("ioctl", 1, 0xff00u, (uint64_t)(t) << 8)

/* Every thread: memory, futexes, signals' plumbing, time, logging, exit. */
static const struct crule base_rules[] = {
	ANY("read"), ANY("write"), ANY("readv"), ANY("writev"), ANY("close"),
	ANY("futex"), ANY("exit"), ANY("exit_group"), ANY("rt_sigreturn"),
	ANY("rt_sigprocmask"), ANY("restart_syscall"), ANY("brk"), ANY("munmap"),
	ANY("madvise"), ANY("mremap"), ANY("clock_gettime"), ANY("clock_nanosleep"),
	/* madvise's batch form on this process itself (resident_trim) */
	ARG("process_madvise", 0, 0xffffffffu, (uint32_t)RESIDENT_PIDFD_SELF),
	ANY("nanosleep"), ANY("gettid"), ANY("getpid"), ANY("tgkill"), ANY("sched_yield"),
	ANY("getrandom"), ANY("set_robust_list"), ANY("rseq"),
	/* pthread_setname_np on itself */
	ARG("prctl", 0, ~0ull, PR_SET_NAME),
	/* a thread a confined thread started confines itself further
	 * (thread_enter): filters only ever narrow what is allowed */
	ARG("prctl", 0, ~0ull, PR_SET_NO_NEW_PRIVS),
	ARG("seccomp", 0, ~0ull, SECCOMP_SET_MODE_FILTER),
	ANY("landlock_restrict_self"),
};

#ifdef __SANITIZE_ADDRESS__
/* A sanitizer build's runtime: each new thread's alternate signal stack,
 * its own prctl and affinity calls. (LeakSanitizer's check at exit
 * ptraces the process from a forked task, which no list allows: such a
 * build defaults to log, see confine_default_mode.) */
static const struct crule san_rules[] = {
	ANY("sigaltstack"), ANY("prctl"), ANY("sched_getaffinity"), ANY("getrlimit"),
	ANY("prlimit64"),
};
#endif

/* Without PROT_EXEC: every thread but the control thread. */
static const struct crule noexec_rules[] = {
	ARG("mmap", 2, PROT_EXEC, 0),
	ARG("mprotect", 2, PROT_EXEC, 0),
};

/* I/O on fds the thread already has: vCPUs (the devices' handlers),
 * workers and the control thread. */
static const struct crule io_rules[] = {
	ANY("pread64"), ANY("pwrite64"), ANY("preadv"), ANY("pwritev"), ANY("preadv2"),
	ANY("pwritev2"), ANY("lseek"), ANY("fsync"), ANY("fdatasync"), ANY("fallocate"),
	ANY("sync_file_range"), ANY("epoll_wait"), ANY("epoll_pwait"), ANY("epoll_pwait2"),
	ANY("epoll_ctl"), ANY("poll"), ANY("ppoll"), ANY("timerfd_settime"),
	ANY("timerfd_gettime"), ANY("sendmsg"), ANY("recvmsg"), ANY("sendto"),
	ANY("recvfrom"), ANY("sendmmsg"), ANY("recvmmsg"), ANY("fcntl"), ANY("fstat"),
	ANY("shutdown"), ANY("getsockopt"),
	/* fstat(2) is newfstatat(fd, "", st, AT_EMPTY_PATH) in glibc */
	ARG("newfstatat", 3, AT_EMPTY_PATH, AT_EMPTY_PATH),
	/* threads only, never a process */
	ARG("clone", 0, CLONE_THREAD, CLONE_THREAD),
	{ "clone3", -1, 0, 0, ENOSYS },
	IOC_TYPE(0xAE), /* KVM */
	IOC_TYPE(0xAA), /* userfaultfd */
	IOC(0x541B),    /* FIONREAD */
	IOC(0x5421),    /* FIONBIO */
	IOC(0x5401),    /* TCGETS (isatty) */
};

/* The control thread: the API makes snapshots, loads them, accepts
 * connections, opens the files they name. */
static const struct crule control_rules[] = {
	ANY("mmap"), ANY("mprotect"),
	ANY("open"), ANY("openat"), ANY("mkdir"), ANY("mkdirat"), ANY("unlink"),
	ANY("unlinkat"), ANY("rmdir"), ANY("rename"), ANY("renameat"), ANY("renameat2"),
	ANY("link"), ANY("linkat"), ANY("readlink"), ANY("readlinkat"), ANY("fchmod"),
	ANY("statx"), ANY("newfstatat"), ANY("stat"), ANY("lstat"), ANY("statfs"),
	ANY("fstatfs"), ANY("getdents64"), ANY("getcwd"), ANY("access"), ANY("faccessat"),
	ANY("faccessat2"), ANY("ftruncate"), ANY("fadvise64"), ANY("flock"),
	ANY("copy_file_range"), ANY("sendfile"), ANY("socket"), ANY("socketpair"),
	ANY("connect"), ANY("accept"), ANY("accept4"), ANY("bind"), ANY("listen"),
	ANY("getsockname"), ANY("getpeername"), ANY("setsockopt"), ANY("memfd_create"),
	ANY("pipe"), ANY("pipe2"), ANY("eventfd2"), ANY("timerfd_create"),
	ANY("epoll_create1"), ANY("dup"), ANY("dup2"), ANY("dup3"), ANY("sched_getaffinity"),
	ANY("uname"), ANY("sysinfo"), ANY("umask"), ANY("munlock"), ANY("mlock"),
	IOC_TYPE(0x94), /* FICLONE, FICLONERANGE (snapshots' disks) */
	IOC(0x5402), IOC(0x5403), IOC(0x5404), /* TCSETS, TCSETSW, TCSETSF */
	IOC(0x5413),    /* TIOCGWINSZ */
};

/* The signal thread: waits, asks the VM to stop, logs. */
static const struct crule signal_rules[] = {
	ANY("rt_sigtimedwait"),
};

const struct kind_info confine_kinds[CONFINE_KINDS] = {
	[CONFINE_CONTROL] = { "control", true, true, true, false },
	[CONFINE_VCPU] = { "vcpu", true, true, false, true },
	[CONFINE_WORKER] = { "worker", true, true, false, true },
	[CONFINE_SIGNALS] = { "signals", false, false, false, true },
};

/* Room for @n more bytes in @s's description (false: out of memory). */
static bool room(struct sink *s, size_t n)
{
	size_t cap = s->cap ? s->cap : 4096;
	char *p;

	if (s->nomem)
		return false;
	if (s->desc && n < s->cap - s->len)
		return true;
	while (cap < s->len + n + 1)
		cap *= 2;
	p = realloc(s->desc, cap);
	if (!p) {
		s->nomem = true;
		return false;
	}
	s->desc = p;
	s->cap = cap;
	return true;
}

static void __attribute__((format(printf, 2, 3))) describe(struct sink *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		s->nomem = true;
		return;
	}
	if (!room(s, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(s->desc + s->len, s->cap - s->len, fmt, ap);
	va_end(ap);
	s->len += (size_t)n;
}

/*
 * One rule in the description: its fields as bytes, then the call's name
 * and its NUL. A start describes each of its lists (a few hundred rules) to
 * find its program in the cache: formatting them as text took more CPU
 * than anything else in a start's user space.
 */
static void describe_rule(struct sink *s, const char *name, int arg, uint64_t mask,
			  uint64_t value, uint32_t errno_)
{
	struct {
		int32_t arg;
		uint32_t errno_;
		uint64_t mask, value;
	} r = { arg, errno_, mask, value };
	size_t n = strlen(name) + 1;

	if (!room(s, sizeof(r) + n))
		return;
	memcpy(s->desc + s->len, &r, sizeof(r));
	memcpy(s->desc + s->len + sizeof(r), name, n);
	s->len += sizeof(r) + n;
}

/* A call this libseccomp knows on this architecture: its number; else a
 * negative number (a call the architecture lacks: open on arm64). */
static int rule_add(struct sink *s, const char *name, int arg, uint64_t mask, uint64_t value,
		    uint32_t errno_, char *err, size_t errlen)
{
	scmp_filter_ctx ctx = s->ctx;
	int nr, ret;
	uint32_t act = errno_ ? SCMP_ACT_ERRNO(errno_) : SCMP_ACT_ALLOW;

	if (!ctx) {
		describe_rule(s, name, arg, mask, value, errno_);
		return 0;
	}
	nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR)
		return errf(err, errlen, -EINVAL, "seccomp: unknown system call '%s'", name);
	if (nr < 0)
		return 0; /* not on this architecture */
	if (arg < 0)
		ret = seccomp_rule_add(ctx, act, nr, 0);
	else
		ret = seccomp_rule_add(ctx, act, nr, 1,
				       (struct scmp_arg_cmp){ .arg = (unsigned)arg,
							      .op = SCMP_CMP_MASKED_EQ,
							      .datum_a = mask, .datum_b = value });
	/* -EEXIST: an unconditional rule already covers it */
	if (ret && ret != -EEXIST)
		return errf(err, errlen, ret, "seccomp: rule for %s: %s", name, strerror(-ret));
	return 0;
}

static int rules_add(struct sink *ctx, const struct crule *r, size_t n, char *err,
		     size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		int ret = rule_add(ctx, r[i].name, r[i].arg, r[i].mask, r[i].value, r[i].errno_,
				   err, errlen);

		if (ret)
			return ret;
	}
	return 0;
}

static int plugin_rules_add(struct sink *ctx, const struct registry *reg, char *err,
			    size_t errlen)
{
	for (unsigned i = 0; reg && i < reg->n; i++) {
		const struct cub_plugin *d = reg->p[i]->d;

		if (d->size < offsetof(struct cub_plugin, n_syscalls) + sizeof(d->n_syscalls))
			continue;
		for (unsigned j = 0; j < d->n_syscalls; j++) {
			const struct cub_syscall *s = &d->syscalls[j];
			int ret = rule_add(ctx, s->name, s->arg, s->mask, s->value, 0, err, errlen);

			if (ret) {
				char why[256];

				snprintf(why, sizeof(why), "%s", err);
				return errf(err, errlen, ret, "plugin %s: %s", d->name, why);
			}
		}
	}
	return 0;
}

/* A tap's jail (jail.h): jail_seal's setresuid(uid, uid, uid), which glibc
 * runs in every thread, confined ones too; no other uid. */
static int seal_rule_add(struct sink *s, char *err, size_t errlen)
{
	int nr, ret;
	uid_t u;

	if (!jail_seal_pending(&u))
		return 0;
	if (!s->ctx) {
		describe(s, "setresuid-seal %u\n", (unsigned)u);
		return 0;
	}
	nr = seccomp_syscall_resolve_name("setresuid");
	if (nr < 0)
		return 0;
	ret = seccomp_rule_add(s->ctx, SCMP_ACT_ALLOW, nr, 3,
			       SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, u),
			       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, u),
			       SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffffu, u));
	return ret ? errf(err, errlen, ret, "seccomp: rule for setresuid: %s", strerror(-ret)) : 0;
}

/* Every rule of kind @k's list, into @s. */
static int add_lists(enum confine_kind k, const struct registry *reg, struct sink *s, char *err,
		     size_t errlen)
{
	int ret = rules_add(s, base_rules, sizeof(base_rules) / sizeof(*base_rules), err, errlen);

#ifdef __SANITIZE_ADDRESS__
	if (!ret)
		ret = rules_add(s, san_rules, sizeof(san_rules) / sizeof(*san_rules), err, errlen);
#endif
	if (!ret && confine_kinds[k].control)
		ret = rules_add(s, control_rules, sizeof(control_rules) / sizeof(*control_rules), err,
				errlen);
	else if (!ret)
		ret = rules_add(s, noexec_rules, sizeof(noexec_rules) / sizeof(*noexec_rules), err,
				errlen);
	if (!ret && confine_kinds[k].io)
		ret = rules_add(s, io_rules, sizeof(io_rules) / sizeof(*io_rules), err, errlen);
	if (!ret && k == CONFINE_SIGNALS)
		ret = rules_add(s, signal_rules, sizeof(signal_rules) / sizeof(*signal_rules), err,
				errlen);
	if (!ret && confine_kinds[k].plugin_calls)
		ret = plugin_rules_add(s, reg, err, errlen);
	if (!ret)
		ret = seal_rule_add(s, err, errlen);
	return ret;
}

/* Kind @k's list described: what its program is compiled from. */
int confine_describe_list(enum confine_kind k, enum confine_mode mode, const struct registry *reg,
			  struct sink *d, char *err, size_t errlen)
{
	const struct scmp_version *v = seccomp_version();
	int ret;

	/* what else the program depends on: this cubicle (the list's form),
	 * libseccomp and the kernel API level it found, the architecture */
	describe(d, "cubicle %s seccomp list 3 (binary tree, binary rules)\nlibseccomp %u.%u.%u api %u\narch %u\nmode %s\nkind %s\n",
		 PACKAGE_VERSION, v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0,
		 seccomp_api_get(), (unsigned)seccomp_arch_native(), /* SCMP_ARCH_NATIVE is 0 */
		 mode == CONFINE_LOG ? "log" : "trap", confine_kinds[k].name);
	ret = add_lists(k, reg, d, err, errlen);
	if (!ret && d->nomem)
		ret = errf(err, errlen, -ENOMEM, "seccomp: out of memory");
	return ret;
}

/* Kind @k's list compiled with libseccomp into *@prog (malloc'd, *@n
 * instructions): 0, or -errno with a message. */
int confine_compile(enum confine_kind k, enum confine_mode mode, const struct registry *reg,
		    struct sock_filter **prog, unsigned short *n, char *err, size_t errlen)
{
	struct sink c = { 0 };
	int ret;

	c.ctx = seccomp_init(mode == CONFINE_LOG ? SCMP_ACT_LOG : SCMP_ACT_TRAP);
	if (!c.ctx)
		return errf(err, errlen, -ENOMEM, "seccomp: cannot make a filter");
	/*
	 * A binary tree on the syscall number (libseccomp 2.5) rather than
	 * one compare after another: the kernel runs the program on every
	 * call it cannot prove always allowed (an ioctl with its number
	 * checked, the vCPU's KVM_RUN included), and when the filter is
	 * attached it runs it for every syscall number to learn which are
	 * (seccomp's cache), per thread. Attaching the four filters of a
	 * start took 0.16-0.22 ms less on a 6.18 PVM host (exec to the first
	 * guest instruction, 40 starts each). An older libseccomp refuses the
	 * attribute: then the list is linear, as correct.
	 */
	seccomp_attr_set(c.ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	ret = add_lists(k, reg, &c, err, errlen);
	if (ret)
		goto out;
	/* The BPF, into memory: loaded per thread without libseccomp. */
	ret = confine_export(c.ctx, prog, n);
	if (ret)
		ret = errf(err, errlen, ret, "seccomp: exporting the %s filter: %s",
			   confine_kinds[k].name, strerror(-ret));
out:
	seccomp_release(c.ctx);
	return ret;
}

int confine_export(void *ctx, struct sock_filter **prog, unsigned short *n)
{
	int fd = memfd_create("cubicle-seccomp", MFD_CLOEXEC), ret;
	off_t size = 0;
	char *buf = NULL;

	if (fd < 0)
		return -errno;
	ret = seccomp_export_bpf(ctx, fd);
	if (!ret && ((size = lseek(fd, 0, SEEK_END)) <= 0 || size % sizeof(struct sock_filter) ||
		     size / sizeof(struct sock_filter) > BPF_MAXINSNS))
		ret = -EINVAL;
	if (!ret && !(buf = malloc((size_t)size)))
		ret = -ENOMEM;
	if (!ret && pread(fd, buf, (size_t)size, 0) != size)
		ret = -EIO;
	close(fd);
	if (ret) {
		free(buf);
		return ret;
	}
	*n = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
	*prog = (struct sock_filter *)buf;
	return 0;
}
