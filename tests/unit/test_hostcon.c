/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of hostcon, the console plugins' host end, through a tiny fake device. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cunit_main.h"
#include "fake_host.h"
#include "hostcon.h"

static struct fake_host fh;
static struct hostcon *hc;
static char dir[] = "/tmp/cubicle-test-hostcon-XXXXXX";

/* The fake device: its input callback counts calls and proves it runs
 * without hostcon's lock (hostcon_pending would deadlock otherwise). */
static unsigned input_calls;
static size_t input_seen;

static void dev_input(void *arg)
{
	CU_ASSERT_PTR_EQUAL(arg, &fh);
	input_calls++;
	input_seen = hostcon_pending(hc);
}

static int open_con(int kind, const char *path, bool input, size_t backlog)
{
	static struct hostcon_cfg cfg;

	fake_host_init(&fh);
	input_calls = 0;
	input_seen = 0;
	cfg = (struct hostcon_cfg){ .console = kind, .path = path, .input = input };
	return hostcon_open(&hc, fake_inst(&fh), &fh.ops, &cfg, backlog, dev_input, &fh);
}

static void close_con(void)
{
	hostcon_close(hc);
	hc = NULL;
	fake_host_fini(&fh);
}

/* All of the backlog as a string. */
static const char *drain(void)
{
	static char buf[512];
	size_t n = hostcon_read(hc, buf, sizeof(buf) - 1);

	buf[n] = '\0';
	return buf;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A client connects to the console socket and the event loop takes it (or turns it away). */
static int client(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CU_ASSERT_FATAL(fd >= 0 && strlen(path) < sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	CU_ASSERT_EQUAL_FATAL(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, fh.watches[0].fd), 0); /* the listener's */
	return fd;
}

/* Make stdin a raw terminal: returns the end to type on, or -1 without ptys. */
static int stdin_tty(void)
{
	struct termios t;
	int m = posix_openpt(O_RDWR | O_NOCTTY), sl = -1;

	if (m >= 0 && !grantpt(m) && !unlockpt(m))
		sl = open(ptsname(m), O_RDWR | O_NOCTTY);
	if (sl < 0) {
		if (m >= 0)
			close(m);
		return -1;
	}
	tcgetattr(sl, &t);
	cfmakeraw(&t); /* the fake host's tty_raw only records */
	tcsetattr(sl, TCSANOW, &t);
	dup2(sl, STDIN_FILENO);
	close(sl);
	return m;
}

static void test_config(void)
{
	CU_ASSERT_EQUAL(open_con(7, NULL, true, 16), -EINVAL);
	CU_ASSERT_PTR_NULL(hc);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "unknown choice 7"));
	close_con();
	CU_ASSERT_EQUAL(open_con(HOSTCON_FILE, NULL, true, 16), -EINVAL);
	CU_ASSERT_STRING_EQUAL(fh.fail_msg, "console = \"file\" needs a non-empty path");
	close_con();
	CU_ASSERT_EQUAL(open_con(HOSTCON_SOCKET, "", true, 16), -EINVAL);
	CU_ASSERT_STRING_EQUAL(fh.fail_msg, "console = \"socket\" needs a non-empty path");
	close_con();
	CU_ASSERT_EQUAL(open_con(HOSTCON_NONE, NULL, true, 0), -EINVAL);
	close_con();
	/* none: output vanishes, nothing is watched */
	CU_ASSERT_EQUAL_FATAL(open_con(HOSTCON_NONE, NULL, true, 16), 0);
	CU_ASSERT_EQUAL(fh.n_watches, 0);
	hostcon_write(hc, "lost", 4);
	CU_ASSERT_EQUAL(hostcon_pending(hc), 0);
	CU_ASSERT_EQUAL(fh.n_logs, 0);
	close_con();
	hostcon_close(NULL);
	CU_ASSERT_STRING_EQUAL(hostcon_choices[HOSTCON_SOCKET], "socket");
	CU_ASSERT_PTR_NULL(hostcon_choices[HOSTCON_NONE + 1]);
}

static void test_file(void)
{
	char path[300], got[64] = { 0 };
	int fd;

	snprintf(path, sizeof(path), "%s/out.txt", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CU_ASSERT_EQUAL_FATAL(write(fd, "old\n", 4), 4);
	close(fd);
	CU_ASSERT_EQUAL_FATAL(open_con(HOSTCON_FILE, path, true, 16), 0);
	CU_ASSERT_EQUAL(fh.n_watches, 0); /* a file has no input */
	hostcon_write(hc, "new ", 4);
	hostcon_write(hc, "text\n", 5);
	close_con();
	fd = open(path, O_RDONLY);
	CU_ASSERT_EQUAL(read(fd, got, sizeof(got) - 1), 13);
	close(fd);
	CU_ASSERT_STRING_EQUAL(got, "old\nnew text\n");
	snprintf(path, sizeof(path), "%s/no/such/dir", dir);
	CU_ASSERT_EQUAL(open_con(HOSTCON_FILE, path, true, 16), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "cannot open console file"));
	close_con();
}

/* The backlog is a ring: reads and writes wrap; what does not fit is dropped. */
static void test_backlog(void)
{
	char path[300], got[16];
	int cl;

	snprintf(path, sizeof(path), "%s/bl.sock", dir);
	CU_ASSERT_EQUAL_FATAL(open_con(HOSTCON_SOCKET, path, true, 8), 0);
	cl = client(path);
	CU_ASSERT_EQUAL(write(cl, "abcdef", 6), 6);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, fh.watches[1].fd), 0);
	CU_ASSERT_EQUAL(input_calls, 1);
	CU_ASSERT_EQUAL(input_seen, 6);
	CU_ASSERT_EQUAL(hostcon_read(hc, got, 4), 4);
	CU_ASSERT_EQUAL(memcmp(got, "abcd", 4), 0);
	CU_ASSERT_EQUAL(write(cl, "ghijkl", 6), 6); /* wraps */
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, fh.watches[1].fd), 0);
	CU_ASSERT_EQUAL(hostcon_pending(hc), 8);
	CU_ASSERT_FALSE(fake_log_has(&fh, "dropped"));
	CU_ASSERT_EQUAL(write(cl, "mn", 2), 2); /* no room */
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, fh.watches[1].fd), 0);
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_WARN, "not reading input; dropped some"), 1);
	CU_ASSERT_STRING_EQUAL(drain(), "efghijkl");
	/* a socket client's input knows no escapes */
	CU_ASSERT_EQUAL(write(cl, "\001x", 2), 2);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, fh.watches[1].fd), 0);
	CU_ASSERT_STRING_EQUAL(drain(), "\001x");
	CU_ASSERT_EQUAL(fh.exit_calls, 0);
	/* reset: keep or drop what waits */
	CU_ASSERT_EQUAL(write(cl, "zz", 2), 2);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, fh.watches[1].fd), 0);
	hostcon_reset(hc, false);
	CU_ASSERT_EQUAL(hostcon_pending(hc), 2);
	hostcon_reset(hc, true);
	CU_ASSERT_EQUAL(hostcon_pending(hc), 0);
	CU_ASSERT_EQUAL(hostcon_read(hc, got, sizeof(got)), 0);
	close(cl);
	close_con();
}

static void test_socket(void)
{
	char path[300], c;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd, cfd, cl, cl2, fd;
	struct stat st;

	snprintf(path, sizeof(path), "%s/con.sock", dir);
	CU_ASSERT_EQUAL_FATAL(open_con(HOSTCON_SOCKET, path, true, 64), 0);
	CU_ASSERT_EQUAL_FATAL(fh.n_watches, 1);
	lfd = fh.watches[0].fd;
	hostcon_write(hc, "nobody", 6); /* no client: discarded */
	cl = client(path);
	CU_ASSERT_TRUE(fake_log_has(&fh, "console client connected"));
	CU_ASSERT_EQUAL_FATAL(fh.n_watches, 2);
	cfd = fh.watches[1].fd;
	hostcon_write(hc, "Q", 1);
	CU_ASSERT_EQUAL(read(cl, &c, 1), 1);
	CU_ASSERT_EQUAL(c, 'Q');
	/* one client at a time: the second is hung up on */
	cl2 = client(path);
	CU_ASSERT_TRUE(fake_log_has(&fh, "refused: one is already connected"));
	CU_ASSERT_EQUAL(read(cl2, &c, 1), 0);
	close(cl2);
	/* it leaves: unwatched, output discarded without a warning */
	close(cl);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, cfd), 0);
	CU_ASSERT_PTR_NULL(fake_watch_find(&fh, cfd));
	CU_ASSERT_TRUE(fake_log_has(&fh, "console client disconnected"));
	hostcon_write(hc, "R", 1);
	CU_ASSERT_FALSE(fake_log_has(&fh, "dropping"));
	/* the next one is welcome */
	cl = client(path);
	CU_ASSERT_PTR_NOT_NULL(fake_watch_find(&fh, lfd));
	hostcon_write(hc, "S", 1);
	CU_ASSERT_EQUAL(read(cl, &c, 1), 1);
	CU_ASSERT_EQUAL(c, 'S');
	close_con(); /* with a client still there */
	CU_ASSERT_EQUAL(read(cl, &c, 1), 0);
	close(cl);
	CU_ASSERT_NOT_EQUAL(lstat(path, &st), 0); /* unlinked */

	/* a stale socket is replaced, a live one refused, so is another file */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	CU_ASSERT_EQUAL(open_con(HOSTCON_SOCKET, path, true, 64), 0);
	close_con();
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CU_ASSERT_EQUAL_FATAL(listen(fd, 1), 0);
	CU_ASSERT_EQUAL(open_con(HOSTCON_SOCKET, path, true, 64), -EADDRINUSE);
	CU_ASSERT_EQUAL(lstat(path, &st), 0); /* not ours to remove */
	close_con();
	close(fd);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	close(fd);
	CU_ASSERT_EQUAL(open_con(HOSTCON_SOCKET, path, true, 64), -EEXIST);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "not a socket"));
	close_con();
	unlink(path);
	memset(path, 'p', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	CU_ASSERT_EQUAL(open_con(HOSTCON_SOCKET, path, true, 64), -ENAMETOOLONG);
	close_con();
}

/* A client that stops reading costs one bounded wait, not a hang. */
static void test_socket_stuck_client(void)
{
	char path[300], buf[4096];
	int cl;
	double t0;

	snprintf(path, sizeof(path), "%s/stuck.sock", dir);
	memset(buf, 'x', sizeof(buf));
	CU_ASSERT_EQUAL_FATAL(open_con(HOSTCON_SOCKET, path, true, 64), 0);
	cl = client(path);
	t0 = now_s();
	for (int i = 0; i < 2000; i++)
		hostcon_write(hc, buf, sizeof(buf));
	CU_ASSERT(now_s() - t0 < 2.0);
	CU_ASSERT_TRUE(fake_log_has(&fh, "console output blocked; dropping guest output"));
	close(cl);
	close_con();
}

/* stdin a pipe: input flows without escapes; EOF unwatches it. */
static void test_stdin_pipe(void)
{
	int p[2], saved = dup(STDIN_FILENO);

	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	dup2(p[0], STDIN_FILENO);
	close(p[0]);
	CU_ASSERT_EQUAL_FATAL(open_con(HOSTCON_STDIO, NULL, true, 64), 0);
	CU_ASSERT_EQUAL(fh.tty_raw_calls, 0);
	CU_ASSERT_PTR_NOT_NULL(fake_watch_find(&fh, STDIN_FILENO));
	CU_ASSERT_EQUAL(write(p[1], "h\001x", 3), 3);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, STDIN_FILENO), 0);
	CU_ASSERT_EQUAL(input_calls, 1);
	CU_ASSERT_STRING_EQUAL(drain(), "h\001x");
	CU_ASSERT_EQUAL(fh.exit_calls, 0);
	close(p[1]);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, STDIN_FILENO), 0);
	CU_ASSERT_PTR_NULL(fake_watch_find(&fh, STDIN_FILENO));
	CU_ASSERT_TRUE(fake_log_has(&fh, "stdin closed; guest input stops"));
	close_con();
	/* input = false leaves stdin alone */
	CU_ASSERT_EQUAL_FATAL(open_con(HOSTCON_STDIO, NULL, false, 64), 0);
	CU_ASSERT_EQUAL(fh.n_watches, 0);
	close_con();
	dup2(saved, STDIN_FILENO);
	close(saved);
}

/* Send s from the terminal's far end and let the event loop take it. */
static void type(int m, const char *s)
{
	CU_ASSERT_EQUAL(write(m, s, strlen(s)), (ssize_t)strlen(s));
	usleep(10000);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, STDIN_FILENO), 0);
}

/* stdin a terminal: raw mode and the Ctrl-A escape. */
static void test_stdin_tty_escape(void)
{
	int m, saved = dup(STDIN_FILENO);

	m = stdin_tty();
	if (m < 0) {
		printf("skipped: no pseudo-terminal here ");
		close(saved);
		return;
	}
	CU_ASSERT_EQUAL_FATAL(open_con(HOSTCON_STDIO, NULL, true, 8), 0);
	CU_ASSERT_EQUAL(fh.tty_raw_calls, 1);
	CU_ASSERT_EQUAL(fh.tty_raw_fd, STDIN_FILENO);
	type(m, "k\001a\001\001z\001q");
	CU_ASSERT_STRING_EQUAL(drain(), "k\001\001z\001q"); /* Ctrl-A other: both go */
	type(m, "\001h");
	CU_ASSERT_EQUAL(hostcon_pending(hc), 0);
	CU_ASSERT_TRUE(fake_log_has(&fh, "escapes: Ctrl-A x exit, Ctrl-A a send Ctrl-A"));
	/* an escape split across reads, and one forgotten by a reset */
	type(m, "\001");
	CU_ASSERT_EQUAL(hostcon_pending(hc), 0);
	type(m, "a");
	CU_ASSERT_STRING_EQUAL(drain(), "\001");
	type(m, "\001");
	hostcon_reset(hc, false);
	type(m, "x");
	CU_ASSERT_STRING_EQUAL(drain(), "x");
	CU_ASSERT_EQUAL(fh.exit_calls, 0);
	/* Ctrl-A x still quits right behind input the full backlog dropped */
	type(m, "0123456789\001X");
	CU_ASSERT_TRUE(fake_log_has(&fh, "dropped some"));
	CU_ASSERT_EQUAL(fh.exit_calls, 1);
	CU_ASSERT_EQUAL(fh.exit_status, CUB_EXIT_STOPPED);
	CU_ASSERT_TRUE(fake_log_has(&fh, "Ctrl-A x: terminating the VM"));
	CU_ASSERT_STRING_EQUAL(drain(), "01234567");
	hostcon_close(hc);
	hc = NULL;
	CU_ASSERT_PTR_NULL(fake_watch_find(&fh, STDIN_FILENO)); /* close unwatches */
	fake_host_fini(&fh);
	dup2(saved, STDIN_FILENO);
	close(saved);
	close(m);
}

/* Point stdout at a pipe; with full set, fill it first (a stuck terminal). */
static int stdout_pipe(int p[2], int *saved, bool full)
{
	char junk[4096] = { 0 };
	int fl;

	fflush(stdout);
	*saved = dup(STDOUT_FILENO);
	if (pipe(p))
		return -1;
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	if (full) {
		fl = fcntl(p[1], F_GETFL);
		fcntl(p[1], F_SETFL, fl | O_NONBLOCK);
		while (write(p[1], junk, sizeof(junk)) > 0)
			;
		fcntl(p[1], F_SETFL, fl); /* blocking, as a terminal would be */
	}
	dup2(p[1], STDOUT_FILENO);
	return 0;
}

static void stdout_restore(int p[2], int saved)
{
	dup2(saved, STDOUT_FILENO);
	close(saved);
	if (p[0] >= 0)
		close(p[0]);
	close(p[1]);
}

/* One wait, then drops counted in bytes, then recovery. */
static void test_output_blocked(void)
{
	char junk[4096], big[10000];
	int p[2], saved;
	double t0;

	CU_ASSERT_EQUAL_FATAL(stdout_pipe(p, &saved, true), 0);
	CU_ASSERT_EQUAL_FATAL(open_con(HOSTCON_STDIO, NULL, false, 16), 0);
	memset(big, 'b', sizeof(big));
	t0 = now_s();
	for (int i = 0; i < 200; i++)
		hostcon_write(hc, "x", 1);
	hostcon_write(hc, big, sizeof(big));
	CU_ASSERT(now_s() - t0 < 1.0); /* one HOSTCON_OUT_WAIT_MS, not 201 */
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_WARN, "dropping guest output"), 1);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	while (read(p[0], junk, sizeof(junk)) > 0)
		;
	hostcon_write(hc, "y", 1);
	CU_ASSERT_TRUE(fake_log_has(&fh, "console accepts output again; 10200 bytes dropped"));
	CU_ASSERT_EQUAL(read(p[0], junk, sizeof(junk)), 1);
	CU_ASSERT_EQUAL(junk[0], 'y');
	/* with the reader keeping up, a many-byte write arrives whole */
	hostcon_write(hc, big, 3000);
	CU_ASSERT_EQUAL(read(p[0], junk, sizeof(junk)), 3000);
	close_con();
	stdout_restore(p, saved);
}

/* stdout's reader is gone: one warning, then silence. */
static void test_output_epipe(void)
{
	int p[2], saved;

	CU_ASSERT_EQUAL_FATAL(stdout_pipe(p, &saved, false), 0);
	close(p[0]);
	p[0] = -1;
	CU_ASSERT_EQUAL_FATAL(open_con(HOSTCON_STDIO, NULL, false, 16), 0);
	hostcon_write(hc, "a", 1);
	hostcon_write(hc, "bc", 2);
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_WARN, "console output closed"), 1);
	CU_ASSERT_FALSE(fake_log_has(&fh, "dropping"));
	close_con();
	stdout_restore(p, saved);
}

static void *writer(void *arg)
{
	char buf[64];

	memset(buf, *(const char *)arg, sizeof(buf));
	for (int i = 0; i < 5000; i++) {
		hostcon_write(hc, buf, (size_t)(i % 64) + 1);
		hostcon_read(hc, buf, 3);
		hostcon_reset(hc, i % 7 == 0);
	}
	return NULL;
}

/* Writers on two "vCPUs" while the event loop feeds input (ASan/TSan food). */
static void test_threads(void)
{
	char path[300], junk[4096];
	pthread_t t[2];
	int cl;

	snprintf(path, sizeof(path), "%s/thr.sock", dir);
	CU_ASSERT_EQUAL_FATAL(open_con(HOSTCON_SOCKET, path, true, 256), 0);
	cl = client(path);
	fcntl(cl, F_SETFL, O_NONBLOCK);
	pthread_create(&t[0], NULL, writer, "a");
	pthread_create(&t[1], NULL, writer, "b");
	for (int i = 0; i < 2000; i++) {
		if (write(cl, "input", 5) < 0 || read(cl, junk, sizeof(junk)) < 0)
			(void)0; /* full or empty: fine */
		fake_watch_fire(&fh, fh.watches[1].fd);
	}
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	CU_ASSERT(hostcon_pending(hc) <= 256);
	close(cl);
	close_con();
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "config checks, none", test_config },
		{ "file append", test_file },
		{ "input backlog ring", test_backlog },
		{ "socket: one client, path checks", test_socket },
		{ "socket: stuck client", test_socket_stuck_client },
		{ "stdin pipe", test_stdin_pipe },
		{ "stdin tty and Ctrl-A escapes", test_stdin_tty_escape },
		{ "blocked output drops, recovers", test_output_blocked },
		{ "stdout reader gone", test_output_epipe },
		{ "writers and event loop", test_threads },
		{ NULL, NULL },
	};
	char cmd[128];
	int ret;

	signal(SIGPIPE, SIG_IGN); /* a closed pipe must give EPIPE, not kill the test */
	if (!mkdtemp(dir))
		return 1;
	ret = cu_run("hostcon", tests);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	return ret;
}
