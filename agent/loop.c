/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cubicle-agent's event loop: epoll, level-triggered, one event per wait so
 * a callback that frees an object never leaves a stale event for it in a
 * batch. Frees and follow-ups go on a FIFO deferred list, run after each
 * callback; a tick runs every TICK_MS for keepalives and deadlines.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

struct deferred {
	struct deferred *next;
	void (*fn)(void *);
	void *arg;
};

static int epfd = -1;
static bool stopping;
static struct deferred *dhead, **dtail = &dhead;

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int loop_init(void)
{
	epfd = epoll_create1(EPOLL_CLOEXEC);
	return epfd < 0 ? -errno : 0;
}

int loop_add(struct watch *w, int fd, uint32_t events, void (*cb)(struct watch *, uint32_t))
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	w->fd = fd;
	w->events = events;
	w->cb = cb;
	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

int loop_mod(struct watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	w->events = events;
	return epoll_ctl(epfd, EPOLL_CTL_MOD, w->fd, &ev) ? -errno : 0;
}

void loop_del(struct watch *w)
{
	if (w->fd >= 0)
		epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
}

void loop_defer(void (*fn)(void *), void *arg)
{
	struct deferred *d = malloc(sizeof(*d));

	if (!d) {
		/* Nothing sensible is left: a leak beats a use after free. */
		fprintf(stderr, "cubicle-agent: out of memory in loop_defer\n");
		return;
	}
	d->next = NULL;
	d->fn = fn;
	d->arg = arg;
	*dtail = d;
	dtail = &d->next;
}

static void run_deferred(void)
{
	while (dhead) {
		struct deferred *d = dhead;

		dhead = d->next;
		if (!dhead)
			dtail = &dhead;
		d->fn(d->arg);
		free(d);
	}
}

void loop_stop(void)
{
	stopping = true;
}

int loop_run(void (*tick)(uint64_t now))
{
	uint64_t next = now_ms() + TICK_MS;

	while (!stopping) {
		struct epoll_event ev;
		uint64_t now = now_ms();
		int n, wait = now >= next ? 0 : (int)(next - now);

		n = epoll_wait(epfd, &ev, 1, wait);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0) {
			struct watch *w = ev.data.ptr;
			w->cb(w, ev.events);
		}
		run_deferred();
		now = now_ms();
		if (now >= next) {
			tick(now);
			run_deferred();
			next = now + TICK_MS;
		}
	}
	return 0;
}
