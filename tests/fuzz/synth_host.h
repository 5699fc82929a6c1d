/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the device fuzzers' synthetic hosts share (fuzz_vsock, fuzz_net):
 * the one fd watch a device asks for and the event loop that runs it, log
 * and fail (silent unless FUZZ_VERBOSE is set), a clock the input moves,
 * and the virtio ops the device registers. Each harness adds its own
 * queues and checks.
 */
#ifndef CUBICLE_FUZZ_SYNTH_HOST_H
#define CUBICLE_FUZZ_SYNTH_HOST_H

#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "cubicle/plugin.h"
#include "cubicle/virtio.h"

static struct {
	const struct cub_virtio_ops *ops; /* as the device added itself */
	void *priv;
	int wfd;                          /* the device's one fd watch */
	void (*wcb)(void *);
	void *warg;
	uint64_t clock;                   /* clock_us */
	bool verbose;                     /* FUZZ_VERBOSE: log lines on stderr */
} S;

static void synth_vsay(const char *fmt, va_list ap)
{
	if (!S.verbose)
		return;
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

static void synth_log(struct cub_inst *in, int lvl, const char *fmt, ...)
{
	va_list ap;

	(void)in, (void)lvl;
	va_start(ap, fmt);
	synth_vsay(fmt, ap);
	va_end(ap);
}

static int synth_fail(struct cub_inst *in, int err, const char *fmt, ...)
{
	va_list ap;

	(void)in;
	va_start(ap, fmt);
	synth_vsay(fmt, ap);
	va_end(ap);
	return err;
}

static int synth_watch(struct cub_inst *in, int fd, uint32_t ev, void (*cb)(void *), void *arg)
{
	(void)in, (void)ev;
	S.wfd = fd;
	S.wcb = cb;
	S.warg = arg;
	return 0;
}

static int synth_unwatch(struct cub_inst *in, int fd)
{
	(void)in, (void)fd;
	return 0;
}

static uint64_t synth_clock(struct cub_inst *in)
{
	(void)in;
	return S.clock;
}

static int synth_add(struct cub_inst *in, const struct cub_virtio_ops *ops, void *priv)
{
	(void)in;
	S.ops = ops;
	S.priv = priv;
	return 0;
}

/* The event loop: the watch's callback while its fd is readable, at most
 * @rounds times. */
static void synth_pump(unsigned rounds)
{
	for (unsigned i = 0; i < rounds; i++) {
		struct pollfd p = { .fd = S.wfd, .events = POLLIN };

		if (poll(&p, 1, 0) != 1)
			break;
		S.wcb(S.warg);
	}
}

#endif
