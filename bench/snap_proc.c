/* SPDX-License-Identifier: Apache-2.0 */
/* bench/snap_proc: bench/snapshot's processes, their logs, its API client and floor helpers. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "snap_proc.h"

#define MAX_KIDS (2 * MAX_CLONES + 8)

/* Output of a started process: the last bytes it wrote to its pipe. */
struct proc {
	pid_t pid;
	int fd;
	bool seen;
	size_t have;
	char tail[2048];
};

const char *cub;
int timeout_s = 300;
bool verbose;
char work[PATH_MAX];
static pid_t kids[MAX_KIDS];

double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	remove(path);
	return 0;
}

void reap(pid_t pid, int sig)
{
	for (unsigned i = 0; i < MAX_KIDS; i++) {
		if (kids[i] == pid) {
			kids[i] = 0;
			kill(pid, sig);
			waitpid(pid, NULL, 0);
			return;
		}
	}
}

/* A real failure: stop everything started, remove the work folder, exit 1. */
void __attribute__((noreturn)) fail(void)
{
	for (unsigned i = 0; i < MAX_KIDS; i++)
		if (kids[i])
			reap(kids[i], SIGKILL);
	if (*work)
		nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	exit(1);
}

/*
 * Start @argv with stdin on /dev/null and, with @log, stderr appended to
 * that file (stdout to /dev/null); else stdout and stderr on a pipe whose
 * read end goes to *@fd. posix_spawn: no copy of this process's page tables
 * (it holds the create floor's buffer) in the time of a restore.
 */
pid_t spawn(char *const argv[], const char *log, int *fd)
{
	posix_spawn_file_actions_t fa;
	int p[2] = { -1, -1 }, ret;
	pid_t pid;
	unsigned slot;

	for (slot = 0; slot < MAX_KIDS && kids[slot]; slot++)
		;
	if (slot == MAX_KIDS || (!log && pipe2(p, O_CLOEXEC) < 0)) {
		fprintf(stderr, "snapshot: cannot start %s: %s\n", argv[0],
			slot == MAX_KIDS ? "too many processes" : strerror(errno));
		fail();
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (log) {
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	} else {
		posix_spawn_file_actions_adddup2(&fa, p[1], 1);
		posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	}
	ret = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (ret) {
		fprintf(stderr, "snapshot: cannot start %s: %s\n", argv[0], strerror(ret));
		fail();
	}
	kids[slot] = pid;
	if (!log) {
		close(p[1]);
		*fd = p[0];
	}
	return pid;
}

double run_to_end(char *const argv[], const char *log)
{
	double t0 = now_ms();
	pid_t pid = spawn(argv, log, NULL);
	int st = 0;

	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	for (unsigned i = 0; i < MAX_KIDS; i++)
		if (kids[i] == pid)
			kids[i] = 0;
	return WIFEXITED(st) && !WEXITSTATUS(st) ? now_ms() - t0 : -1;
}

/* Take what @p wrote; 1 once @marker has been seen, -1 when it ended. */
static int feed(struct proc *p, const char *marker)
{
	ssize_t n = read(p->fd, p->tail + p->have, sizeof(p->tail) - 1 - p->have);

	if (n <= 0)
		return -1;
	p->have += (size_t)n;
	p->tail[p->have] = '\0';
	if (strstr(p->tail, marker))
		return p->seen = true;
	if (p->have > sizeof(p->tail) / 2) { /* keep the newer half */
		memmove(p->tail, p->tail + p->have - sizeof(p->tail) / 4, sizeof(p->tail) / 4);
		p->have = sizeof(p->tail) / 4;
		p->tail[p->have] = '\0';
	}
	return 0;
}

/*
 * Wait until each of @n processes has written @marker; with @stop, stop
 * each (SIGSTOP) as soon as it has. Returns when the last one did, in ms
 * since @t0; a process that ends or stays silent past the timeout fails.
 */
unsigned long marker_rss_kib;

static unsigned long rss_kib(pid_t pid)
{
	char path[64], line[128];
	unsigned long kib = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lu kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static double wait_all(struct proc *ps, unsigned n, const char *marker, bool stop, double t0)
{
	static struct pollfd pf[MAX_CLONES];
	static unsigned idx[MAX_CLONES];
	double deadline = t0 + timeout_s * 1e3, last = 0;
	unsigned left = n;

	while (left) {
		unsigned k = 0;
		double now = now_ms();
		int r;

		for (unsigned i = 0; i < n; i++) {
			if (!ps[i].seen) {
				pf[k] = (struct pollfd){ .fd = ps[i].fd, .events = POLLIN };
				idx[k++] = i;
			}
		}
		r = now < deadline ? poll(pf, k, (int)(deadline - now) + 1) : 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			struct proc *p = &ps[idx[0]];

			fprintf(stderr, "snapshot: %u of %u did not show '%s' within %d s; one said: %s\n",
				left, n, marker, timeout_s, p->tail);
			fail();
		}
		for (unsigned j = 0; j < k; j++) {
			struct proc *p = &ps[idx[j]];

			if (!pf[j].revents)
				continue;
			r = feed(p, marker);
			if (r < 0) {
				fprintf(stderr, "snapshot: a process ended before '%s': %s\n", marker,
					p->tail);
				fail();
			}
			if (r > 0) {
				last = now_ms();
				left--;
				if (stop)
					kill(p->pid, SIGSTOP);
				/* one process: nothing else is timed after it */
				marker_rss_kib = n == 1 ? rss_kib(p->pid) : 0;
				if (verbose)
					fprintf(stderr, "  [%u] '%s' after %.1f ms\n", idx[j], marker,
						now_ms() - t0);
			}
		}
	}
	return (last ? last : now_ms()) - t0;
}

/* Start @n copies of @argv at once; ms until each has shown @marker. */
double start_all(char *const argv[], unsigned n, const char *marker, bool stop)
{
	static struct proc ps[MAX_CLONES];
	double t0 = now_ms(), ms;

	for (unsigned i = 0; i < n; i++) {
		ps[i] = (struct proc){ .fd = -1 };
		ps[i].pid = spawn(argv, NULL, &ps[i].fd);
	}
	ms = wait_all(ps, n, marker, stop, t0);
	for (unsigned i = 0; i < n; i++) {
		reap(ps[i].pid, SIGKILL);
		close(ps[i].fd);
	}
	return ms;
}

/* How many lines of the file @path (a process's stderr) hold @marker. */
unsigned count_in(const char *path, const char *marker)
{
	char *line = NULL;
	size_t cap = 0;
	unsigned c = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0)
		c += strstr(line, marker) != NULL;
	free(line);
	fclose(f);
	return c;
}

/* The end of the file @path, on stderr. */
static void show_tail(const char *path)
{
	char buf[2048];
	size_t n;
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	if (fseek(f, -(long)sizeof(buf), SEEK_END) < 0)
		rewind(f);
	n = fread(buf, 1, sizeof(buf), f);
	fwrite(buf, 1, n, stderr);
	fclose(f);
}

/* Has @pid ended? Then it is no longer ours to kill. */
static bool ended(pid_t pid)
{
	if (waitpid(pid, NULL, WNOHANG) != pid)
		return false;
	for (unsigned i = 0; i < MAX_KIDS; i++)
		if (kids[i] == pid)
			kids[i] = 0;
	return true;
}

/* Wait until the log of @pid holds @marker more than @after times. */
void wait_log(pid_t pid, const char *log, const char *marker, unsigned after)
{
	double deadline = now_ms() + timeout_s * 1e3;

	while (count_in(log, marker) <= after) {
		bool gone = ended(pid);

		if (gone || now_ms() > deadline) {
			fprintf(stderr, "snapshot: %s: no new '%s' %s; the end of its log:\n", cub,
				marker, gone ? "before it ended" : "in time");
			show_tail(log);
			fail();
		}
		usleep(10000);
	}
}

void api_connect(struct conn *c, const char *sock, pid_t pid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	double deadline = now_ms() + timeout_s * 1e3;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	c->have = 0;
	for (;;) {
		int e;

		c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd >= 0 && !connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)))
			return;
		e = errno;
		if (c->fd >= 0)
			close(c->fd);
		if (ended(pid) || now_ms() > deadline) {
			fprintf(stderr, "snapshot: cannot connect to %s: %s\n", sock, strerror(e));
			fail();
		}
		usleep(10000);
	}
}

/*
 * One request on @c; its reply's body (truncated) into @out. The HTTP
 * status, or -1 when the connection broke or nothing came back in time.
 */
static int api_call(struct conn *c, const char *method, const char *path, const char *body,
		    char *out, size_t outlen)
{
	char req[PATH_MAX + 256];
	size_t blen = strlen(body), clen = 0, hlen;
	char *end = NULL, *cl;
	int n = snprintf(req, sizeof(req),
			 "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n%s",
			 method, path, blen, body);
	int status;

	if (n < 0 || (size_t)n >= sizeof(req) || send(c->fd, req, (size_t)n, MSG_NOSIGNAL) != n)
		return -1;
	for (;;) {
		struct pollfd pf = { .fd = c->fd, .events = POLLIN };
		ssize_t r;

		if (!end && (end = strstr(c->buf, "\r\n\r\n"))) {
			cl = strcasestr(c->buf, "\r\nContent-Length:");
			if (cl && cl < end)
				clen = strtoul(cl + 17, NULL, 10);
		}
		hlen = end ? (size_t)(end + 4 - c->buf) : 0;
		if (end && c->have >= hlen + clen)
			break;
		if (c->have == sizeof(c->buf) - 1 || poll(&pf, 1, timeout_s * 1000) != 1)
			return -1;
		r = read(c->fd, c->buf + c->have, sizeof(c->buf) - 1 - c->have);
		if (r <= 0)
			return -1;
		c->have += (size_t)r;
		c->buf[c->have] = '\0';
	}
	status = strncmp(c->buf, "HTTP/1.1 ", 9) ? -1 : atoi(c->buf + 9);
	if (outlen) {
		size_t k = clen < outlen - 1 ? clen : outlen - 1;

		memcpy(out, c->buf + hlen, k);
		out[k] = '\0';
	}
	c->have -= hlen + clen;
	memmove(c->buf, c->buf + hlen + clen, c->have);
	c->buf[c->have] = '\0';
	return status;
}

/* A request that must succeed with @want; its time in ms. */
double must(struct conn *c, const char *method, const char *path, const char *body,
	    int want, char *out, size_t outlen)
{
	char reply[1024];
	double t0 = now_ms();
	int st = api_call(c, method, path, body, reply, sizeof(reply));
	double ms = now_ms() - t0;

	if (st != want) {
		fprintf(stderr, "snapshot: %s %s %s: %s %d (wanted %d): %s\n", method, path, body,
			st < 0 ? "no answer," : "status", st, want, st < 0 ? "" : reply);
		fail();
	}
	if (outlen)
		snprintf(out, outlen, "%s", reply);
	return ms;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(v[0]), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The floor of create: @n bytes of @buf written and fsync'd as the new
 * file @path (removed afterwards, outside the time). */
double write_floor(const char *path, const uint8_t *buf, uint64_t n)
{
	double t0 = now_ms(), ms;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	uint64_t off = 0;

	while (fd >= 0 && off < n) {
		ssize_t w = write(fd, buf + off, n - off > (1u << 30) ? (1u << 30) : n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (uint64_t)w;
	}
	if (fd < 0 || off < n || fsync(fd) < 0) {
		fprintf(stderr, "snapshot: %s: %s\n", path, strerror(errno));
		fail();
	}
	close(fd);
	ms = now_ms() - t0;
	unlink(path);
	return ms;
}

void path(char *buf, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", work, name);
}

/* The create floor's buffer *@buf (*@len bytes) made at least @n bytes. */
void grow(uint8_t **buf, uint64_t *len, uint64_t n)
{
	if (n <= *len)
		return;
	free(*buf);
	*buf = malloc(n);
	if (!*buf) {
		fprintf(stderr, "snapshot: out of memory\n");
		fail();
	}
	memset(*buf, 0x5a, n); /* resident, like guest RAM */
	*len = n;
}
