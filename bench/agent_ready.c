/* SPDX-License-Identifier: Apache-2.0 */
/* bench/agent_ready: median time from exec of cubicle to "ready for code" (cubicle-agent's
 * READY connection on vsock port 49984), beside the time to the example initramfs's
 * ready marker (its boot-timer write) in a VM without vsock or agent, in the same run.
 * Usage: agent_ready CUBICLE KERNEL INITRD INITRD_WITH_AGENT [RUNS] */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "snap_proc.h" /* spawn, reap, now_ms */

#define WAIT_MS 600000 /* a nested boot can take minutes */

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int write_cfg(const char *path, const char *kernel, const char *initrd, const char *uds)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fprintf(f,
		"log_level = \"info\";\n"
		"machine = { vcpus = 1; memory_mib = 256; };\n"
		"boot = { kernel = \"%s\"; initrd = \"%s\";\n"
		"  cmdline = \"console=ttyS0 reboot=k panic=-1 quiet%s\"; };\n"
		"devices = (\n"
		"  { type = \"serial8250\"; id = \"com1\"; console = \"stdio\"; input = false; },\n"
		"  { type = \"boot-timer\"; id = \"boot\"; }",
		kernel, initrd, uds ? " cubicle.agent" : "");
	if (uds)
		fprintf(f, ",\n  { type = \"virtio-vsock\"; id = \"vsock0\"; guest_cid = 3; uds_path = \"%s\"; }",
			uds);
	fprintf(f, "\n);\n");
	return fclose(f);
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4)) {
		fprintf(stderr, "agent_ready: listening on %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/*
 * One boot: cubicle (cub) on @cfg with its console on a pipe. Without @lfd, the
 * time until the console shows the example's marker; with it, until the
 * agent connects to @lfd and says READY. Milliseconds, or -1. The marker is
 * the boot-timer's log line: the example /init writes it right after it
 * prints its own marker, whose way out through the emulated UART is slow.
 */
static double one(const char *cfg, int lfd)
{
	static const char marker[] = "guest boot done after";
	char buf[8192], tail[sizeof(marker)] = "";
	char *argv[] = { (char *)cub, (char *)"run", (char *)cfg, NULL };
	double t0 = now_ms(), t = -1;
	int out;
	pid_t pid = spawn(argv, NULL, &out); /* exits the bench when it cannot */

	for (;;) {
		struct pollfd pf[2] = { { .fd = out, .events = POLLIN }, { .fd = lfd, .events = POLLIN } };
		int n = poll(pf, lfd >= 0 ? 2 : 1, (int)(WAIT_MS - (now_ms() - t0)));

		if (n <= 0) {
			fprintf(stderr, "agent_ready: nothing within %d s\n", WAIT_MS / 1000);
			break;
		}
		if (pf[0].revents) {
			ssize_t r = read(out, buf, sizeof(buf) - 1);
			char joined[sizeof(tail) + sizeof(buf)];

			if (r <= 0) {
				fprintf(stderr, "agent_ready: cubicle ended before the guest was ready\n");
				break;
			}
			buf[r] = '\0';
			/* the marker may straddle two reads */
			snprintf(joined, sizeof(joined), "%s%s", tail, buf);
			if (lfd < 0 && strstr(joined, marker)) {
				t = now_ms() - t0;
				break;
			}
			snprintf(tail, sizeof(tail), "%s",
				 strlen(joined) >= sizeof(tail) ? joined + strlen(joined) - (sizeof(tail) - 1) : joined);
		}
		if (lfd >= 0 && pf[1].revents) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			ssize_t r = c >= 0 ? read(c, buf, sizeof(buf) - 1) : -1;

			if (c >= 0)
				close(c);
			if (r > 0 && !strncmp(buf, "READY", 5)) {
				t = now_ms() - t0;
				break;
			}
			fprintf(stderr, "agent_ready: a connection on the ready port without READY\n");
		}
	}
	reap(pid, SIGKILL);
	close(out);
	return t;
}

int main(int argc, char **argv)
{
	char dir[64], cfg0[256], cfg1[256], uds[200], ready[220];
	const char *tmp = getenv("TMPDIR");
	double *a, *b;
	int runs, lfd, bad = 0;

	if (argc < 5 || argc > 6) {
		fprintf(stderr, "usage: agent_ready CUBICLE KERNEL INITRD INITRD_WITH_AGENT [RUNS]\n");
		return 2;
	}
	cub = argv[1];
	runs = argc == 6 ? atoi(argv[5]) : 5;
	if (runs < 1 || runs > 1000) {
		fprintf(stderr, "agent_ready: RUNS must be 1..1000\n");
		return 2;
	}
	/* Short: the socket paths under it must fit a sun_path. */
	snprintf(dir, sizeof(dir), "%s/cubicle-ar.XXXXXX", tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("agent_ready: mkdtemp");
		return 1;
	}
	snprintf(cfg0, sizeof(cfg0), "%s/plain.cfg", dir);
	snprintf(cfg1, sizeof(cfg1), "%s/agent.cfg", dir);
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	snprintf(ready, sizeof(ready), "%s_49984", uds);
	if (write_cfg(cfg0, argv[2], argv[3], NULL) || write_cfg(cfg1, argv[2], argv[4], uds)) {
		perror("agent_ready: writing the configs");
		return 1;
	}
	lfd = listen_unix(ready);
	a = calloc((size_t)runs, sizeof(*a));
	b = calloc((size_t)runs, sizeof(*b));
	if (lfd < 0 || !a || !b)
		return 1;
	for (int i = 0; i < runs && !bad; i++) { /* interleaved: the same load on both */
		a[i] = one(cfg0, -1);
		b[i] = one(cfg1, lfd);
		bad = a[i] < 0 || b[i] < 0;
		fprintf(stderr, "agent_ready: run %d: marker %.1f ms, agent ready %.1f ms\n", i + 1, a[i], b[i]);
	}
	close(lfd);
	unlink(ready);
	unlink(cfg0);
	unlink(cfg1);
	unlink(uds);
	rmdir(dir);
	if (bad) {
		fprintf(stderr, "agent_ready: a boot failed; no figures\n");
		return 1;
	}
	qsort(a, (size_t)runs, sizeof(*a), cmp);
	qsort(b, (size_t)runs, sizeof(*b), cmp);
	printf("agent-ready: median of %d boots: initramfs marker without agent %.1f ms, agent ready %.1f ms, ratio %.2fx\n",
	       runs, a[runs / 2], b[runs / 2], b[runs / 2] / a[runs / 2]);
	free(a);
	free(b);
	return 0;
}
