/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cycles: a long-lived parent that makes and ends VMMs the way `cubicle
 * serve` does (issue 14, must-show 4), and watches for leaks on both sides.
 *
 *   cycles CUBICLE CONFIG DIR N
 *
 * Cycle i: a folder DIR/vm-i; `CUBICLE run CONFIG --api-sock DIR/vm-i/api.sock
 * --id vm-i` in a session of its own, its output to DIR/vm-i/vmm.log; wait
 * until the guest said "up" there and GET / answers Running; read the VMM's
 * fd count and VmRSS; end it, by turns with SIGTERM, SIGKILL, or PATCH /vm
 * Paused then SIGTERM; reap it, check how it ended, remove the folder (a
 * cubicle that ended on SIGTERM must have removed its own API socket).
 *
 * After N cycles: the parent's own fd count must equal what it was after the
 * warm-up (the first N/50 cycles, at least 5), its VmRSS must be within
 * 64 KiB of it; every VMM must have had the same fd count, and the median
 * VmRSS of the last warm-up-sized window of VMMs must be within 256 KiB of the
 * first one's; DIR must be empty and no child left. Prints one summary line
 * and exits 0, or prints why and exits 1 (2: bad usage).
 *
 * CYCLES_TIMEOUT_S bounds each wait (default 60 s). CYCLES_NO_RSS=1 reports
 * the VmRSS figures without judging them (ASan's shadow and quarantine grow
 * them with every allocation).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PARENT_RSS_SLACK_KIB 64
#define VMM_RSS_SLACK_KIB 256

static long timeout_ms = 60000;
static const char *cubicle, *config, *dir;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("cycles: ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
	exit(1);
}

/* Entries of /proc/PID/fd (PID 0: this process), or -1. */
static int fd_count(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/fd");
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return pid ? n : n - 1; /* our own count leaves out opendir's fd */
}

/* VmRSS of PID (0: this process) in KiB, or -1. */
static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* The last line of @log that has text, for a failure message. */
static void log_tail(const char *log, char *out, size_t len)
{
	char line[512];
	FILE *f = fopen(log, "re");

	snprintf(out, len, "(no log)");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (line[0])
			snprintf(out, len, "%s", line);
	}
	fclose(f);
}

/* @log holds @what. */
static int log_has(const char *log, const char *what)
{
	char buf[4096];
	ssize_t n;
	int fd = open(log, O_RDONLY | O_CLOEXEC), found = 0;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		found = strstr(buf, what) != NULL;
	}
	close(fd);
	return found;
}

/* One HTTP/1.1 exchange on the API socket @sock (Connection: close): the
 * answer's first @len - 1 bytes in @out; 0, or -1 when no answer came. */
static int api_call(const char *sock, const char *req, char *out, size_t len)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct pollfd p;
	size_t got = 0;
	ssize_t n;
	int fd;

	if (strlen(sock) >= sizeof(a.sun_path))
		die("%s: too long for a Unix socket path", sock);
	strcpy(a.sun_path, sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		close(fd);
		return -1;
	}
	p.fd = fd;
	p.events = POLLIN;
	while (got < len - 1 && poll(&p, 1, (int)timeout_ms) == 1) {
		n = read(fd, out + got, len - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	out[got] = 0;
	close(fd);
	return got ? 0 : -1;
}

static pid_t spawn(const char *name, const char *sock, const char *log)
{
	int out = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	pid_t pid;

	if (out < 0)
		die("%s: %s", log, strerror(errno));
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid) {
		int null = open("/dev/null", O_RDONLY);

		setsid();
		if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
			_exit(127);
		execl(cubicle, cubicle, "run", config, "--api-sock", sock, "--id", name, (char *)NULL);
		_exit(127);
	}
	close(out);
	return pid;
}

/* Waits until the VMM @pid has said "up" in @log and answers Running on
 * @sock; dies (with the log's last line) if it ends or the wait runs out. */
static void wait_up(pid_t pid, const char *name, const char *sock, const char *log)
{
	static const char get[] = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
	long long t0 = now_ms();
	char ans[1024], tail[512];
	int status;

	for (;;) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			log_tail(log, tail, sizeof(tail));
			die("%s ended (status 0x%x) before it was up: %s", name, status, tail);
		}
		if (log_has(log, "guest: up") && !api_call(sock, get, ans, sizeof(ans)) &&
		    strstr(ans, "Running"))
			return;
		if (now_ms() - t0 > timeout_ms) {
			log_tail(log, tail, sizeof(tail));
			kill(pid, SIGKILL);
			die("%s not up after %ld ms: %s", name, timeout_ms, tail);
		}
		sleep_ms(5);
	}
}

/* The first line of /proc/@pid/task/@tid/@what, into @out. */
static void task_line(pid_t pid, const char *tid, const char *what, char *out, size_t len)
{
	char path[128];
	FILE *f;

	snprintf(out, len, "?");
	snprintf(path, sizeof(path), "/proc/%d/task/%s/%s", (int)pid, tid, what);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/* Where each thread of a VMM that will not end is (for the failure
 * report): its name, state, kernel wait channel and system call, the
 * kernel stack's first lines; then the VMM's log. */
static void stuck_report(pid_t pid, const char *log)
{
	char path[320], comm[64], stat[512], wchan[128], sys[256], line[512];
	struct dirent *e;
	FILE *f;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	while (d && (e = readdir(d))) {
		char *st;

		if (e->d_name[0] == '.')
			continue;
		task_line(pid, e->d_name, "comm", comm, sizeof(comm));
		task_line(pid, e->d_name, "stat", stat, sizeof(stat));
		task_line(pid, e->d_name, "wchan", wchan, sizeof(wchan));
		task_line(pid, e->d_name, "syscall", sys, sizeof(sys));
		st = strrchr(stat, ')');
		printf("# thread %s %s: state %c, wchan %s, syscall %s\n", e->d_name, comm,
		       st && st[1] ? st[2] : '?', wchan, sys);
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stack", (int)pid, e->d_name);
		f = fopen(path, "re");
		for (int k = 0; f && k < 6 && fgets(line, sizeof(line), f); k++)
			printf("#   %s", line);
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	f = fopen(log, "re");
	while (f && fgets(line, sizeof(line), f))
		printf("# log: %s", line);
	if (f)
		fclose(f);
	fflush(stdout);
}

/* Reaps @pid, SIGKILLing it when it outlives the wait: its wait status. */
static int reap(pid_t pid, const char *name, const char *log)
{
	long long t0 = now_ms();
	int status;

	while (waitpid(pid, &status, WNOHANG) != pid) {
		if (now_ms() - t0 > timeout_ms) {
			stuck_report(pid, log);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			die("%s still ran %ld ms after it was told to end", name, timeout_ms);
		}
		sleep_ms(2);
	}
	return status;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

static long median(const long *v, int n)
{
	long s[64];

	memcpy(s, v, (size_t)n * sizeof(*v));
	qsort(s, (size_t)n, sizeof(*s), cmp_long);
	return s[n / 2];
}

int main(int argc, char **argv)
{
	static const char pause_req[] = "PATCH /vm HTTP/1.1\r\nHost: localhost\r\n"
					"Content-Type: application/json\r\nContent-Length: 18\r\n"
					"Connection: close\r\n\r\n{\"state\":\"Paused\"}";
	char vm[4096], sock[4200], log[4200], ans[1024], tail[512];
	long first[64], last[64], rss_min = -1, rss_max = -1, prss0 = 0, prss1;
	int n, warm, i, fds_min = -1, fds_max = -1, pfd0 = 0, pfd1, ended[3] = { 0 };
	long long t0, t_up = 0, t_end = 0, tc;
	const char *t = getenv("CYCLES_TIMEOUT_S");
	struct dirent *e;
	DIR *d;

	if (argc != 5 || (n = atoi(argv[4])) < 10) {
		fprintf(stderr, "usage: cycles CUBICLE CONFIG DIR N (N >= 10)\n");
		return 2;
	}
	cubicle = argv[1];
	config = argv[2];
	dir = argv[3];
	if (t && atol(t) > 0)
		timeout_ms = atol(t) * 1000;
	warm = n / 50 < 5 ? 5 : n / 50 > 64 ? 64 : n / 50;
	signal(SIGPIPE, SIG_IGN);
	t0 = now_ms();
	for (i = 0; i < n; i++) {
		int how = i % 3, status, fds;
		long rss;
		pid_t pid;

		snprintf(vm, sizeof(vm), "%s/vm-%d", dir, i);
		snprintf(sock, sizeof(sock), "%s/api.sock", vm);
		snprintf(log, sizeof(log), "%s/vmm.log", vm);
		if (mkdir(vm, 0700))
			die("%s: %s", vm, strerror(errno));
		tc = now_ms();
		pid = spawn(vm + strlen(dir) + 1, sock, log);
		wait_up(pid, vm, sock, log);
		t_up += now_ms() - tc;
		fds = fd_count(pid);
		rss = rss_kib(pid);
		if (fds < 0 || rss < 0)
			die("%s: cannot read /proc/%d", vm, (int)pid);
		if (fds_min < 0 || fds < fds_min)
			fds_min = fds;
		if (fds > fds_max)
			fds_max = fds;
		if (rss_min < 0 || rss < rss_min)
			rss_min = rss;
		if (rss > rss_max)
			rss_max = rss;
		if (i < warm)
			first[i] = rss;
		if (i >= n - warm)
			last[i - (n - warm)] = rss;
		if (how == 2 && (api_call(sock, pause_req, ans, sizeof(ans)) || !strstr(ans, " 204 ")))
			die("%s: PATCH /vm Paused: %.80s", vm, ans[0] ? ans : "no answer");
		tc = now_ms();
		kill(pid, how == 1 ? SIGKILL : SIGTERM);
		status = reap(pid, vm, log);
		t_end += now_ms() - tc;
		log_tail(log, tail, sizeof(tail));
		if (how == 1 && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
			die("%s: SIGKILL gave wait status 0x%x: %s", vm, status, tail);
		if (how != 1 && !(WIFEXITED(status) && WEXITSTATUS(status) == 143))
			die("%s: SIGTERM gave wait status 0x%x (want exit 143): %s", vm, status, tail);
		if (how != 1 && !access(sock, F_OK))
			die("%s: cubicle ended on SIGTERM and left its API socket", vm);
		ended[how]++;
		unlink(sock); /* what a SIGKILLed VMM leaves */
		if (unlink(log) || rmdir(vm))
			die("%s: cannot remove (%s): something else is in it", vm, strerror(errno));
		if (i == warm - 1) {
			pfd0 = fd_count(0);
			prss0 = rss_kib(0);
		}
		if ((i + 1) % 100 == 0)
			fprintf(stderr, "# cycles: %d of %d, %lld ms each so far\n", i + 1, n,
				(now_ms() - t0) / (i + 1));
	}
	pfd1 = fd_count(0);
	prss1 = rss_kib(0);
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD)
		die("a child is left after %d cycles", n);
	d = opendir(dir);
	if (!d)
		die("%s: %s", dir, strerror(errno));
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			die("%s/%s is left after %d cycles", dir, e->d_name, n);
	closedir(d);
	printf("%d VMMs made and ended (%d by SIGTERM, %d by SIGKILL, %d paused then SIGTERM) in %lld s, "
	       "%lld ms a cycle (spawn to up %lld ms, signal to reaped %lld ms); parent fds %d -> %d, VmRSS %ld -> %ld KiB (after cycle %d and %d); "
	       "VMM fds %d..%d, VmRSS median %ld KiB in the first %d, %ld KiB in the last %d (%ld..%ld); "
	       "nothing left in %s\n",
	       n, ended[0], ended[1], ended[2], (now_ms() - t0) / 1000, (now_ms() - t0) / n, t_up / n, t_end / n, pfd0, pfd1,
	       prss0, prss1, warm, n, fds_min, fds_max, median(first, warm), warm, median(last, warm), warm,
	       rss_min, rss_max, dir);
	if (pfd1 != pfd0)
		die("the parent's fd count went from %d to %d", pfd0, pfd1);
	if (getenv("CYCLES_NO_RSS") && !strcmp(getenv("CYCLES_NO_RSS"), "1"))
		return 0;
	if (prss1 - prss0 > PARENT_RSS_SLACK_KIB)
		die("the parent's VmRSS grew by %ld KiB (at most %d)", prss1 - prss0, PARENT_RSS_SLACK_KIB);
	if (fds_min != fds_max)
		die("the VMMs' fd counts differ: %d..%d", fds_min, fds_max);
	if (labs(median(last, warm) - median(first, warm)) > VMM_RSS_SLACK_KIB)
		die("the VMMs' VmRSS moved by more than %d KiB", VMM_RSS_SLACK_KIB);
	return 0;
}
