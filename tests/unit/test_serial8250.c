/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the serial8250 plugin: its built .so driven through the fake host. */
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

#include <CUnit/Basic.h>

#include "fake_host.h"

enum { RBR = 0, THR = 0, DLL = 0, IER = 1, DLM = 1, IIR = 2, FCR = 2, LCR = 3, MCR = 4,
       LSR = 5, MSR = 6, SCR = 7 };
#define UART_IRQ 4 /* what the fake host's layout hands a "uart" */

static const struct cub_plugin *plug;
static void *dl;
static struct fake_host fh;
static void *cfg, *priv;
static char tmpdir[64];

static const struct cub_device_ops *ops(void)
{
	return plug->ops;
}

/* Create an instance with these params; returns create's result. */
static int start(const char *const *kv)
{
	fake_host_init(&fh);
	priv = NULL;
	cfg = fake_cfg_new(plug, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	return fake_create(&fh, plug, cfg, &priv);
}

static void start_ok(const char *const *kv)
{
	int err = start(kv);

	if (err)
		fprintf(stderr, "create: %d %s\n", err, fh.fail_msg);
	CU_ASSERT_EQUAL_FATAL(err, 0);
}

static void stop(void)
{
	if (priv)
		ops()->destroy(priv);
	priv = NULL;
	fake_cfg_free(plug, cfg);
	cfg = NULL;
	fake_host_fini(&fh);
}

static uint8_t rd(unsigned off)
{
	return (uint8_t)fake_io_read(&fh, 0, off, 1);
}

static void wr(unsigned off, uint8_t v)
{
	fake_io_write(&fh, 0, off, 1, v);
}

static bool irq(void)
{
	return fh.irq_level[UART_IRQ];
}

static const char *const no_console[] = { "console", "none", NULL };

static void test_descriptor(void)
{
	CU_ASSERT_EQUAL(plug->kind, CUB_KIND_DEVICE);
	CU_ASSERT_STRING_EQUAL(plug->name, "serial8250");
	CU_ASSERT_EQUAL(plug->n_params, 4);
	CU_ASSERT_STRING_EQUAL(plug->params[0].name, "console");
	CU_ASSERT_STRING_EQUAL(plug->params[0].def, "stdio");
	CU_ASSERT_STRING_EQUAL(plug->params[1].name, "path");
	CU_ASSERT_STRING_EQUAL(plug->params[2].name, "input");
	CU_ASSERT_EQUAL(plug->params[2].type, CUB_P_BOOL);
}

static void test_bad_config(void)
{
	static const char *const file_nopath[] = { "console", "file", NULL };
	static const char *const sock_nopath[] = { "console", "socket", NULL };
	static const char *const file_bad[] = { "console", "file", "path", "/nonexistent/dir/x", NULL };

	CU_ASSERT_EQUAL(start(file_nopath), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "path"));
	CU_ASSERT_EQUAL(fh.n_regions, 0);
	stop();
	CU_ASSERT_EQUAL(start(sock_nopath), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "path"));
	stop();
	CU_ASSERT_EQUAL(start(file_bad), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "/nonexistent/dir/x"));
	stop();
}

static void test_region_and_power_on(void)
{
	start_ok(no_console);
	CU_ASSERT_EQUAL(fh.n_regions, 1);
	CU_ASSERT_STRING_EQUAL(fh.regions[0].class, "uart");
	CU_ASSERT_EQUAL(fh.regions[0].len, 8);
	CU_ASSERT_EQUAL(fh.regions[0].want, CUB_BUS_ANY);
	CU_ASSERT_EQUAL(rd(LSR), 0x60); /* THRE | TEMT */
	CU_ASSERT_EQUAL(rd(IIR), 0x01);
	CU_ASSERT_EQUAL(rd(IER), 0);
	CU_ASSERT_EQUAL(rd(LCR), 0);
	CU_ASSERT_EQUAL(rd(MCR), 0);
	CU_ASSERT_EQUAL(rd(MSR), 0xb0); /* DCD | DSR | CTS */
	CU_ASSERT_EQUAL(fh.irq_calls_total, 0);
	/* Out-of-range and wide accesses neither crash nor misbehave. */
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 5, 4), 0x60);
	fake_io_write(&fh, 0, 9, 1, 0xff);
	CU_ASSERT_EQUAL(fake_io_read(&fh, 0, 100, 1), 0);
	stop();
}

static void test_dlab(void)
{
	start_ok(no_console);
	wr(LCR, 0x83);
	wr(DLL, 0x01);
	wr(DLM, 0x02);
	CU_ASSERT_EQUAL(rd(DLL), 0x01);
	CU_ASSERT_EQUAL(rd(DLM), 0x02);
	CU_ASSERT_EQUAL(rd(LCR), 0x83);
	wr(LCR, 0x03);
	CU_ASSERT_EQUAL(rd(IER), 0); /* the latch did not touch IER */
	wr(IER, 0x05);
	CU_ASSERT_EQUAL(rd(IER), 0x05);
	wr(LCR, 0x83);
	CU_ASSERT_EQUAL(rd(DLL), 0x01);
	CU_ASSERT_EQUAL(rd(DLM), 0x02);
	wr(LCR, 0x03);
	CU_ASSERT_EQUAL(rd(IER), 0x05);
	stop();
}

static void test_ier_mask_scr(void)
{
	start_ok(no_console);
	wr(IER, 0xff); /* Linux's autoconfig expects the top nibble to read 0 */
	CU_ASSERT_EQUAL(rd(IER), 0x0f);
	wr(IER, 0);
	wr(SCR, 0x5a);
	CU_ASSERT_EQUAL(rd(SCR), 0x5a);
	wr(MCR, 0xff);
	CU_ASSERT_EQUAL(rd(MCR), 0x1f);
	wr(MCR, 0);
	stop();
}

static void test_thr_to_file(void)
{
	char path[96], buf[64] = { 0 };
	const char *const kv[] = { "console", "file", "path", path, NULL };
	int fd;

	snprintf(path, sizeof(path), "%s/out.txt", tmpdir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CU_ASSERT_EQUAL_FATAL(write(fd, "old\n", 4), 4);
	close(fd);
	start_ok(kv);
	for (const char *p = "hi\r\n"; *p; p++)
		wr(THR, (uint8_t)*p);
	CU_ASSERT_EQUAL(rd(LSR) & 0x60, 0x60);
	wr(MCR, 0x10); /* loopback: nothing reaches the file */
	wr(THR, 'L');
	wr(MCR, 0);
	stop();
	fd = open(path, O_RDONLY);
	CU_ASSERT_EQUAL(read(fd, buf, sizeof(buf) - 1), 8);
	close(fd);
	CU_ASSERT_STRING_EQUAL(buf, "old\nhi\r\n");
	unlink(path);
}

static void test_thre_irq(void)
{
	start_ok(no_console);
	wr(IER, 0x02);
	CU_ASSERT_TRUE(irq());
	CU_ASSERT_EQUAL(rd(IIR), 0x02);
	CU_ASSERT_FALSE(irq());
	CU_ASSERT_EQUAL(rd(IIR), 0x01);
	wr(THR, 'x'); /* sent at once: THR empty again */
	CU_ASSERT_TRUE(irq());
	wr(IER, 0);
	CU_ASSERT_FALSE(irq());
	/* FIFO bits in IIR. */
	wr(FCR, 0x01);
	CU_ASSERT_EQUAL(rd(IIR), 0xc1);
	wr(FCR, 0x00);
	CU_ASSERT_EQUAL(rd(IIR), 0x01);
	/* Only level changes reach the host. */
	CU_ASSERT_EQUAL(fh.irq_calls[UART_IRQ], 4);
	stop();
}

/* Linux's serial8250_do_startup check for UARTs that don't re-assert THRE. */
static void test_linux_thre_probe(void)
{
	uint8_t iir1, iir;

	start_ok(no_console);
	wr(IER, 0x02);
	iir1 = rd(IIR);
	wr(IER, 0);
	wr(IER, 0x02);
	iir = rd(IIR);
	wr(IER, 0);
	CU_ASSERT_FALSE(iir1 & 0x01);
	CU_ASSERT_FALSE(iir & 0x01);
	CU_ASSERT_FALSE(irq());
	stop();
}

static void test_loopback_msr(void)
{
	start_ok(no_console);
	wr(MCR, 0x10 | 0x0a); /* Linux's autoconfig loopback probe */
	CU_ASSERT_EQUAL(rd(MSR) & 0xf0, 0x90);
	wr(THR, 'Z');
	CU_ASSERT_EQUAL(rd(LSR) & 0x01, 0x01);
	CU_ASSERT_EQUAL(rd(RBR), 'Z');
	CU_ASSERT_EQUAL(rd(LSR) & 0x01, 0);
	/* Modem status interrupt on a looped-back DTR change. */
	rd(MSR);
	wr(IER, 0x08);
	CU_ASSERT_FALSE(irq());
	wr(MCR, 0x10 | 0x0a | 0x01);
	CU_ASSERT_TRUE(irq());
	CU_ASSERT_EQUAL(rd(IIR), 0x00);
	CU_ASSERT_EQUAL(rd(MSR), 0x90 | 0x20 | 0x02); /* DCD CTS DSR, delta DSR */
	CU_ASSERT_FALSE(irq());
	wr(IER, 0);
	wr(MCR, 0);
	CU_ASSERT_EQUAL(rd(MSR) & 0xf0, 0xb0);
	stop();
}

static void test_overrun(void)
{
	start_ok(no_console);
	wr(MCR, 0x10);
	wr(IER, 0x04); /* line status interrupt */
	wr(THR, 'a');  /* FIFOs off: one byte of holding */
	CU_ASSERT_FALSE(irq());
	wr(THR, 'b');
	CU_ASSERT_TRUE(irq());
	CU_ASSERT_EQUAL(rd(IIR), 0x06);
	CU_ASSERT_EQUAL(rd(LSR), 0x63); /* OE | DR | THRE | TEMT */
	CU_ASSERT_FALSE(irq());
	CU_ASSERT_EQUAL(rd(LSR), 0x61);
	CU_ASSERT_EQUAL(rd(RBR), 'a');
	wr(FCR, 0x07);
	for (int i = 0; i < 16; i++)
		wr(THR, (uint8_t)('A' + i));
	CU_ASSERT_EQUAL(rd(LSR), 0x61);
	wr(THR, '!');
	CU_ASSERT_EQUAL(rd(LSR), 0x63);
	for (int i = 0; i < 16; i++)
		CU_ASSERT_EQUAL(rd(RBR), 'A' + i);
	CU_ASSERT_EQUAL(rd(LSR), 0x60);
	/* FCR clear-RX empties the FIFO. */
	wr(THR, 'q');
	wr(FCR, 0x03);
	CU_ASSERT_EQUAL(rd(LSR), 0x60);
	stop();
}

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void test_socket_console(void)
{
	char path[96], c = 0;
	const char *const kv[] = { "console", "socket", "path", path, NULL };
	int lfd, cfd, cli, cli2;
	struct stat st;

	snprintf(path, sizeof(path), "%s/con.sock", tmpdir);
	start_ok(kv);
	CU_ASSERT_EQUAL_FATAL(fh.n_watches, 1);
	lfd = fh.watches[0].fd;
	cli = unix_connect(path);
	CU_ASSERT_FATAL(cli >= 0);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, lfd), 0);
	CU_ASSERT_EQUAL_FATAL(fh.n_watches, 2);
	cfd = fh.watches[1].fd;
	CU_ASSERT_TRUE(fake_log_has(&fh, "client connected"));

	/* RX: client → guest, with the data-ready interrupt. */
	wr(IER, 0x01);
	CU_ASSERT_EQUAL(write(cli, "ab", 2), 2);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, cfd), 0);
	CU_ASSERT_TRUE(irq());
	CU_ASSERT_EQUAL(rd(IIR), 0x04);
	CU_ASSERT_EQUAL(rd(LSR) & 0x01, 0x01);
	CU_ASSERT_EQUAL(rd(RBR), 'a');
	CU_ASSERT_TRUE(irq());
	CU_ASSERT_EQUAL(rd(RBR), 'b');
	CU_ASSERT_FALSE(irq());
	CU_ASSERT_EQUAL(rd(LSR) & 0x01, 0);

	/* TX: guest → client. */
	wr(THR, 'Q');
	CU_ASSERT_EQUAL(read(cli, &c, 1), 1);
	CU_ASSERT_EQUAL(c, 'Q');

	/* A second client is turned away. */
	cli2 = unix_connect(path);
	CU_ASSERT_FATAL(cli2 >= 0);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, lfd), 0);
	CU_ASSERT_EQUAL(read(cli2, &c, 1), 0);
	close(cli2);

	/* Disconnect: the watch goes, output is discarded, nothing breaks. */
	close(cli);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, cfd), 0);
	CU_ASSERT_PTR_NULL(fake_watch_find(&fh, cfd));
	wr(THR, 'R');
	/* And the next client is welcome. */
	cli = unix_connect(path);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, lfd), 0);
	wr(THR, 'S');
	CU_ASSERT_EQUAL(read(cli, &c, 1), 1);
	CU_ASSERT_EQUAL(c, 'S');
	close(cli);
	stop();
	CU_ASSERT_NOT_EQUAL(lstat(path, &st), 0); /* unlinked at destroy */
}

static void test_socket_path_checks(void)
{
	char path[96];
	const char *const kv[] = { "console", "socket", "path", path, NULL };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	/* A stale socket from an earlier run is replaced. */
	snprintf(path, sizeof(path), "%s/stale.sock", tmpdir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	start_ok(kv);
	stop();
	/* A live one is not stolen. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CU_ASSERT_EQUAL_FATAL(listen(fd, 1), 0);
	CU_ASSERT_EQUAL(start(kv), -EADDRINUSE);
	stop();
	close(fd);
	unlink(path);
	/* Nor is a regular file. */
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	close(fd);
	CU_ASSERT_EQUAL(start(kv), -EEXIST);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "not a socket"));
	stop();
	unlink(path);
}

/* stdio with stdin a pipe: input flows, no raw mode, no escapes, EOF unwatches. */
static void test_stdin_pipe(void)
{
	static const char *const kv[] = { "console", "stdio", NULL };
	int p[2], saved = dup(0);

	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	dup2(p[0], 0);
	close(p[0]);
	start_ok(kv);
	CU_ASSERT_EQUAL(fh.tty_raw_calls, 0);
	CU_ASSERT_PTR_NOT_NULL(fake_watch_find(&fh, 0));
	CU_ASSERT_EQUAL(write(p[1], "h\001x", 3), 3);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, 0), 0);
	CU_ASSERT_EQUAL(rd(RBR), 'h');
	CU_ASSERT_EQUAL(rd(RBR), 0x01);
	CU_ASSERT_EQUAL(rd(RBR), 'x');
	CU_ASSERT_EQUAL(fh.exit_calls, 0);
	close(p[1]);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, 0), 0);
	CU_ASSERT_PTR_NULL(fake_watch_find(&fh, 0));
	stop();
	dup2(saved, 0);
	close(saved);
}

/* stdio with input=false never touches stdin. */
static void test_stdin_disabled(void)
{
	static const char *const kv[] = { "console", "stdio", "input", "false", NULL };

	start_ok(kv);
	CU_ASSERT_EQUAL(fh.n_watches, 0);
	CU_ASSERT_EQUAL(fh.tty_raw_calls, 0);
	stop();
}

/* stdio with stdin a terminal: raw mode, and Ctrl-A x quits. */
static void test_stdin_tty_escape(void)
{
	static const char *const kv[] = { "console", "stdio", NULL };
	int m, sl, saved = dup(0);
	struct termios t;

	m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) || unlockpt(m) || (sl = open(ptsname(m), O_RDWR | O_NOCTTY)) < 0) {
		printf("skipped: no pseudo-terminal here ");
		if (m >= 0)
			close(m);
		close(saved);
		return;
	}
	tcgetattr(sl, &t);
	cfmakeraw(&t); /* the fake host's tty_raw only records */
	tcsetattr(sl, TCSANOW, &t);
	dup2(sl, 0);
	start_ok(kv);
	CU_ASSERT_EQUAL(fh.tty_raw_calls, 1);
	CU_ASSERT_EQUAL(fh.tty_raw_fd, 0);
	wr(FCR, 0x01);
	CU_ASSERT_EQUAL(write(m, "k\001a\001\001z", 6), 6);
	usleep(10000);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, 0), 0);
	CU_ASSERT_EQUAL(rd(RBR), 'k');
	CU_ASSERT_EQUAL(rd(RBR), 0x01); /* Ctrl-A a */
	CU_ASSERT_EQUAL(rd(RBR), 0x01); /* Ctrl-A Ctrl-A */
	CU_ASSERT_EQUAL(rd(RBR), 'z');
	CU_ASSERT_EQUAL(fh.exit_calls, 0);
	CU_ASSERT_EQUAL(write(m, "\001x", 2), 2);
	usleep(10000);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, 0), 0);
	CU_ASSERT_EQUAL(fh.exit_calls, 1);
	CU_ASSERT_EQUAL(fh.exit_status, CUB_EXIT_STOPPED);
	CU_ASSERT_TRUE(fake_log_has(&fh, "Ctrl-A x"));
	CU_ASSERT_EQUAL(rd(LSR) & 0x01, 0);
	stop();
	dup2(saved, 0);
	close(saved);
	close(sl);
	close(m);
}

/* Host input beyond what the FIFO holds waits in the backlog, in order. */
static void test_rx_backlog(void)
{
	char path[96], buf[100];
	const char *const kv[] = { "console", "socket", "path", path, NULL };
	int cli;

	snprintf(path, sizeof(path), "%s/bl.sock", tmpdir);
	start_ok(kv);
	cli = unix_connect(path);
	fake_watch_fire(&fh, fh.watches[0].fd);
	for (int i = 0; i < (int)sizeof(buf); i++)
		buf[i] = (char)i;
	CU_ASSERT_EQUAL(write(cli, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	fake_watch_fire(&fh, fh.watches[1].fd);
	for (int i = 0; i < (int)sizeof(buf); i++)
		CU_ASSERT_EQUAL(rd(RBR), i);
	CU_ASSERT_EQUAL(rd(LSR) & 0x03, 0); /* no data, no overrun */
	close(cli);
	stop();
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* stdout a pipe nobody reads: the vCPU must not hang; output is dropped. */
static void test_output_blocked(void)
{
	static const char *const kv[] = { "console", "stdio", "input", "false", NULL };
	int p[2], saved, fl;
	char junk[4096];
	double t0;

	fflush(stdout);
	saved = dup(1);
	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	fl = fcntl(p[1], F_GETFL);
	fcntl(p[1], F_SETFL, fl | O_NONBLOCK);
	while (write(p[1], junk, sizeof(junk)) > 0)
		;
	fcntl(p[1], F_SETFL, fl); /* a blocking stdout, like a stuck terminal */
	dup2(p[1], 1);
	start_ok(kv);
	t0 = now_s();
	for (int i = 0; i < 200; i++)
		wr(THR, 'x');
	CU_ASSERT(now_s() - t0 < 2.0);
	CU_ASSERT_TRUE(fake_log_has(&fh, "dropping guest output"));
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	while (read(p[0], junk, sizeof(junk)) > 0)
		;
	wr(THR, 'y');
	CU_ASSERT_TRUE(fake_log_has(&fh, "accepts output again"));
	stop();
	dup2(saved, 1);
	close(saved);
	close(p[0]);
	close(p[1]);
}

/* stdout's reader went away: output stops, once, without a signal death. */
static void test_output_epipe(void)
{
	static const char *const kv[] = { "console", "stdio", "input", "false", NULL };
	int p[2], saved;

	fflush(stdout);
	saved = dup(1);
	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	close(p[0]);
	dup2(p[1], 1);
	close(p[1]);
	start_ok(kv);
	wr(THR, 'a');
	wr(THR, 'b');
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_WARN, "console output closed"), 1);
	stop();
	dup2(saved, 1);
	close(saved);
}

static void test_reset(void)
{
	start_ok(no_console);
	wr(LCR, 0x03);
	wr(MCR, 0x10);
	wr(IER, 0x03);
	wr(THR, 'a');
	CU_ASSERT_TRUE(irq());
	CU_ASSERT_EQUAL(ops()->reset(priv), 0);
	CU_ASSERT_FALSE(irq());
	CU_ASSERT_EQUAL(rd(LSR), 0x60);
	CU_ASSERT_EQUAL(rd(IER), 0);
	CU_ASSERT_EQUAL(rd(LCR), 0);
	CU_ASSERT_EQUAL(rd(MCR), 0);
	CU_ASSERT_EQUAL(rd(IIR), 0x01);
	stop();
}

/* A hostile guest: random widths, offsets and values must not crash or hang. */
static void test_random_accesses(void)
{
	static const uint32_t lens[] = { 1, 2, 4, 8 };
	unsigned seed = 12345;

	start_ok(no_console);
	for (int i = 0; i < 200000; i++) {
		uint32_t len = lens[rand_r(&seed) % 4];
		uint64_t off = (uint64_t)(rand_r(&seed) % 12);

		if (rand_r(&seed) & 1)
			fake_io_write(&fh, 0, off, len, (uint64_t)rand_r(&seed));
		else
			fake_io_read(&fh, 0, off, len);
	}
	CU_ASSERT_EQUAL(ops()->reset(priv), 0);
	CU_ASSERT_EQUAL(rd(LSR), 0x60);
	CU_ASSERT_FALSE(irq());
	stop();
}

static void *vcpu_thread(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	for (int i = 0; i < 20000; i++) {
		unsigned off = (unsigned)rand_r(&seed) % 8;

		if (rand_r(&seed) & 1)
			wr(off, (uint8_t)rand_r(&seed));
		else
			rd(off);
	}
	return NULL;
}

/* Two vCPUs and the event loop at once (run under TSan to see races). */
static void test_threads(void)
{
	char path[96];
	const char *const kv[] = { "console", "socket", "path", path, NULL };
	pthread_t t[2];
	int cli;

	snprintf(path, sizeof(path), "%s/thr.sock", tmpdir);
	start_ok(kv);
	cli = unix_connect(path);
	fake_watch_fire(&fh, fh.watches[0].fd);
	fcntl(cli, F_SETFL, O_NONBLOCK);
	for (uintptr_t i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, vcpu_thread, (void *)(i + 1));
	for (int i = 0; i < 2000; i++) {
		char junk[256];

		if (write(cli, "input", 5) < 0 || read(cli, junk, sizeof(junk)) < 0)
			(void)0; /* full or empty: fine */
		fake_watch_fire(&fh, fh.watches[1].fd);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	close(cli);
	stop();
}

static int suite_init(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cub-serial-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	plug = fake_plugin_open("serial8250", &dl);
	return plug ? 0 : -1;
}

static int suite_clean(void)
{
	fake_plugin_close(dl);
	rmdir(tmpdir);
	return 0;
}

int main(void)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{ "descriptor", test_descriptor },
		{ "bad config", test_bad_config },
		{ "region and power-on state", test_region_and_power_on },
		{ "LCR.DLAB divisor latch", test_dlab },
		{ "IER mask, SCR, MCR mask", test_ier_mask_scr },
		{ "THR to file", test_thr_to_file },
		{ "THRE interrupt and IIR", test_thre_irq },
		{ "Linux THRE re-assert probe", test_linux_thre_probe },
		{ "loopback and MSR", test_loopback_msr },
		{ "overrun and FIFO", test_overrun },
		{ "socket console RX/TX", test_socket_console },
		{ "socket path checks", test_socket_path_checks },
		{ "stdin pipe", test_stdin_pipe },
		{ "stdin disabled", test_stdin_disabled },
		{ "stdin tty and Ctrl-A x", test_stdin_tty_escape },
		{ "RX backlog", test_rx_backlog },
		{ "blocked output drops", test_output_blocked },
		{ "stdout reader gone", test_output_epipe },
		{ "reset", test_reset },
		{ "random guest accesses", test_random_accesses },
		{ "vCPU threads and event loop", test_threads },
	};
	CU_pSuite s;
	unsigned fails;

	signal(SIGPIPE, SIG_IGN); /* a closed pipe must give EPIPE, not kill the test */
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("serial8250", suite_init, suite_clean);
	for (size_t i = 0; s && i < CUB_ARRAY_SIZE(tests); i++)
		CU_add_test(s, tests[i].name, tests[i].fn);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
