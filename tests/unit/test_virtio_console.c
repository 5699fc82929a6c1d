/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the virtio-console plugin through the fake host's virtqueues. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cunit_main.h"
#include "fake_host.h"

#define RXQ 0
#define TXQ 1

static const struct cub_plugin *plug;
static void *dl, *cfg, *priv;
static struct fake_host fh;
static struct cub_vq_chain ch[8];
static char dir[] = "/tmp/cubicle-test-vcon-XXXXXX";

static int start(const char *const *kv)
{
	int err;

	fake_host_init(&fh);
	cfg = fake_cfg_new(plug, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	priv = NULL;
	err = fake_create(&fh, plug, cfg, &priv);
	return err;
}

static void stop(void)
{
	if (priv)
		((const struct cub_device_ops *)plug->ops)->destroy(priv);
	priv = NULL;
	fake_cfg_free(plug, cfg);
	fake_host_fini(&fh);
}

static void tx(unsigned i, const char *a, const char *b)
{
	fake_chain_init(&ch[i], (uint16_t)i);
	fake_chain_add(&ch[i], (void *)a, strlen(a), false);
	if (b)
		fake_chain_add(&ch[i], (void *)b, strlen(b), false);
	CU_ASSERT_EQUAL(fake_vq_add(&fh, TXQ, &ch[i]), 0);
	fake_virtio_kick(&fh, TXQ);
}

static void rx_buf(unsigned i, void *p, size_t len)
{
	fake_chain_init(&ch[i], (uint16_t)i);
	fake_chain_add(&ch[i], p, len, true);
	CU_ASSERT_EQUAL(fake_vq_add(&fh, RXQ, &ch[i]), 0);
}

static void read_file(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(out, 1, len - 1, f) : 0;

	out[n] = '\0';
	if (f)
		fclose(f);
}

static void test_descriptor(void)
{
	uint8_t cfgsp[12];

	CU_ASSERT_STRING_EQUAL(plug->name, "virtio-console");
	CU_ASSERT_EQUAL_FATAL(start((const char *[]){ "console", "none", NULL }), 0);
	CU_ASSERT_EQUAL(fh.vdev->device_id, 3);
	CU_ASSERT_EQUAL(fh.vdev->n_queues, 2);
	CU_ASSERT_EQUAL(fh.vdev->features(fh.vpriv), 1ull << 2); /* EMERG_WRITE only */
	memset(cfgsp, 0xa5, sizeof(cfgsp));
	fh.vdev->config_read(fh.vpriv, 0, cfgsp, sizeof(cfgsp));
	for (unsigned i = 0; i < sizeof(cfgsp); i++)
		CU_ASSERT_EQUAL(cfgsp[i], 0);
	/* output goes nowhere, but every chain comes back */
	CU_ASSERT_EQUAL(fake_virtio_start(&fh), 0);
	tx(0, "lost", NULL);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 1);
	stop();
	CU_ASSERT_EQUAL(start((const char *[]){ "console", "file", NULL }), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "needs a non-empty path"));
	stop();
}

static void test_file_output(void)
{
	char path[300], got[256];

	snprintf(path, sizeof(path), "%s/out.txt", dir);
	CU_ASSERT_EQUAL_FATAL(start((const char *[]){ "console", "file", "path", path, NULL }), 0);
	CU_ASSERT_EQUAL(fake_virtio_start(&fh), 0);
	tx(0, "hello ", "world");
	tx(1, "\n", NULL);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 2);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].used[0].written, 0);
	CU_ASSERT(fh.vqs[TXQ].notifies >= 1);
	fh.vdev->config_write(fh.vpriv, 8, "Z\0\0\0", 4); /* emerg_wr */
	read_file(path, got, sizeof(got));
	CU_ASSERT_STRING_EQUAL(got, "hello world\nZ");
	/* output before DRIVER_OK waits in the queue; after a reset nothing is popped */
	fake_virtio_stop(&fh);
	tx(2, "late", NULL);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 2);
	CU_ASSERT_EQUAL(fake_virtio_start(&fh), 0);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 3);
	read_file(path, got, sizeof(got));
	CU_ASSERT_STRING_EQUAL(got, "hello world\nZlate");
	stop();
}

/* A guest that keeps its transmit queue full: a budget per kick, the rest
 * on later rounds of the event loop; the file stops at max_size. */
static void test_budget_and_cap(void)
{
	static struct cub_vq_chain many[200];
	static char line[1000];
	char path[300], fifo[300];
	struct stat st;

	memset(line, 'x', sizeof(line));
	snprintf(path, sizeof(path), "%s/capped.txt", dir);
	CU_ASSERT_EQUAL_FATAL(start((const char *[]){ "console", "file", "path", path,
						       "max_size", "100K", NULL }), 0);
	CU_ASSERT_EQUAL(fake_virtio_start(&fh), 0);
	for (int i = 0; i < 200; i++) {
		fake_chain_init(&many[i], (uint16_t)i);
		fake_chain_add(&many[i], line, sizeof(line), false);
		CU_ASSERT_EQUAL(fake_vq_add(&fh, TXQ, &many[i]), 0);
	}
	fake_virtio_kick(&fh, TXQ);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 64);
	CU_ASSERT(fake_watch_pump(&fh, 100) >= 3);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 200);
	CU_ASSERT_EQUAL(stat(path, &st), 0);
	CU_ASSERT_EQUAL(st.st_size, 100 << 10);
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_WARN, "reached max_size"), 1);
	stop();
	/* a FIFO is refused at once, reader or not */
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
	CU_ASSERT_EQUAL(start((const char *[]){ "console", "file", "path", fifo, NULL }), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "FIFO"));
	stop();
	unlink(fifo);
}

static void test_socket(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char a[2], b[8], got[64];
	int cl, lfd;
	ssize_t n;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/con.sock", dir);
	CU_ASSERT_EQUAL_FATAL(start((const char *[]){ "console", "socket", "path", sa.sun_path,
						       NULL }), 0);
	CU_ASSERT_EQUAL_FATAL(fh.n_watches, 2); /* the transmit re-arm fd, the socket */
	lfd = fh.watches[1].fd;
	cl = socket(AF_UNIX, SOCK_STREAM, 0);
	CU_ASSERT_EQUAL_FATAL(connect(cl, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, lfd), 0);
	CU_ASSERT_EQUAL_FATAL(fh.n_watches, 3);
	/* input before the driver is up waits in the backlog */
	CU_ASSERT_EQUAL(write(cl, "abc", 3), 3);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, fh.watches[2].fd), 0);
	CU_ASSERT_EQUAL(fake_virtio_start(&fh), 0);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 0);
	rx_buf(0, a, sizeof(a));
	rx_buf(1, b, sizeof(b));
	fake_virtio_kick(&fh, RXQ);
	CU_ASSERT_EQUAL_FATAL(fh.vqs[RXQ].n_used, 2);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].written, 2);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[1].written, 1);
	CU_ASSERT_EQUAL(memcmp(a, "ab", 2), 0);
	CU_ASSERT_EQUAL(b[0], 'c');
	/* with a buffer posted, input goes straight in */
	rx_buf(2, b, sizeof(b));
	fake_virtio_kick(&fh, RXQ);
	CU_ASSERT_EQUAL(write(cl, "xyz", 3), 3);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, fh.watches[2].fd), 0);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 3);
	CU_ASSERT_EQUAL(memcmp(b, "xyz", 3), 0);
	/* output reaches the client */
	tx(3, "out", "put");
	n = read(cl, got, sizeof(got) - 1);
	CU_ASSERT_EQUAL(n, 6);
	got[n > 0 ? n : 0] = '\0';
	CU_ASSERT_STRING_EQUAL(got, "output");
	/* a receive buffer with no writable part breaks the device */
	CU_ASSERT_EQUAL(write(cl, "q", 1), 1);
	fake_chain_init(&ch[4], 4);
	fake_chain_add(&ch[4], a, 1, false);
	fake_vq_add(&fh, RXQ, &ch[4]);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, fh.watches[2].fd), 0);
	CU_ASSERT_EQUAL(fh.broken_calls, 1);
	/* the client leaves: output is discarded, not blocked */
	close(cl);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, fh.watches[2].fd), 0);
	CU_ASSERT(fake_log_has(&fh, "disconnected"));
	tx(5, "nobody", NULL);
	CU_ASSERT_EQUAL(fh.vqs[TXQ].n_used, 2);
	stop();
	CU_ASSERT_EQUAL(access(sa.sun_path, F_OK), -1); /* the socket is removed */
}

static void test_stdin_pipe(void)
{
	int p[2], saved = dup(STDIN_FILENO);
	char b[16];

	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	dup2(p[0], STDIN_FILENO);
	close(p[0]);
	CU_ASSERT_EQUAL_FATAL(start((const char *[]){ "console", "stdio", NULL }), 0);
	CU_ASSERT_PTR_NOT_NULL(fake_watch_find(&fh, STDIN_FILENO));
	CU_ASSERT_EQUAL(fh.tty_raw_calls, 0); /* a pipe is no terminal */
	CU_ASSERT_EQUAL(fake_virtio_start(&fh), 0);
	rx_buf(0, b, sizeof(b));
	fake_virtio_kick(&fh, RXQ);
	CU_ASSERT_EQUAL(write(p[1], "ls\x01x\r", 5), 5); /* no escapes off a tty */
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, STDIN_FILENO), 0);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].n_used, 1);
	CU_ASSERT_EQUAL(fh.vqs[RXQ].used[0].written, 5);
	CU_ASSERT_EQUAL(memcmp(b, "ls\x01x\r", 5), 0);
	CU_ASSERT_EQUAL(fh.exit_calls, 0);
	close(p[1]);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, STDIN_FILENO), 0); /* EOF: unwatched */
	CU_ASSERT_PTR_NULL(fake_watch_find(&fh, STDIN_FILENO));
	stop();
	dup2(saved, STDIN_FILENO);
	close(saved);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "descriptor and config", test_descriptor },
		{ "file output, emergency write", test_file_output },
		{ "socket input and output", test_socket },
		{ "transmit budget, file max_size, FIFO refused", test_budget_and_cap },
		{ "stdin pipe", test_stdin_pipe },
		{ NULL, NULL },
	};
	char cmd[128];
	int ret;

	signal(SIGPIPE, SIG_IGN);
	plug = fake_plugin_open("virtio_console", &dl);
	if (!plug || !mkdtemp(dir))
		return 1;
	ret = cu_run("virtio_console", tests);
	fake_plugin_close(dl);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	return ret;
}
