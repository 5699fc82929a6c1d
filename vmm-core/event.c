/* SPDX-License-Identifier: Apache-2.0 */
/* The event loop: an epoll thread dispatching fd readiness to callbacks.
 * Watches are added and removed from any thread; an eventfd wakes the loop
 * to stop. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "event.h"
#include "log.h"

struct watch {
	int fd;
	void (*cb)(void *);
	void *arg;
	struct watch *next;
	uint32_t events;
	bool control; /* served while paused (the control API) */
	bool off;     /* out of the epoll set while paused */
	uint64_t dead; /* unwatched during this batch of the loop's */
};

struct event_loop {
	int epfd, stopfd, callfd;
	pthread_t thread;
	bool running;
	/* event_call: one call at a time, run on the loop thread */
	pthread_mutex_t call_lock;
	pthread_cond_t call_done;
	int (*call_fn)(void *);
	void *call_arg;
	int call_ret;
	bool call_pending;
	bool call_owned; /* between event_call_begin and event_call_end */
	pthread_mutex_t lock; /* guards the watch list; never held across a callback */
	struct watch *watches;
	bool paused;          /* under lock: only control watches are served */
	uint64_t batch;       /* under lock: epoll_wait batches dispatched so far */
};

struct event_loop *event_new(void)
{
	struct event_loop *ev = calloc(1, sizeof(*ev));
	struct epoll_event e = { .events = EPOLLIN };

	if (!ev)
		return NULL;
	ev->epfd = epoll_create1(EPOLL_CLOEXEC);
	ev->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ev->callfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&ev->lock, NULL);
	pthread_mutex_init(&ev->call_lock, NULL);
	pthread_cond_init(&ev->call_done, NULL);
	if (ev->epfd < 0 || ev->stopfd < 0 || ev->callfd < 0)
		goto fail;
	e.data.ptr = NULL; /* NULL marks the stop eventfd */
	if (epoll_ctl(ev->epfd, EPOLL_CTL_ADD, ev->stopfd, &e) < 0)
		goto fail;
	e.data.ptr = &ev->callfd; /* and this the call eventfd */
	if (epoll_ctl(ev->epfd, EPOLL_CTL_ADD, ev->callfd, &e) < 0)
		goto fail;
	return ev;
fail:
	event_free(ev);
	return NULL;
}

void event_free(struct event_loop *ev)
{
	struct watch *w, *next;

	if (!ev)
		return;
	event_stop(ev);
	for (w = ev->watches; w; w = next) {
		next = w->next;
		free(w);
	}
	if (ev->epfd >= 0)
		close(ev->epfd);
	if (ev->stopfd >= 0)
		close(ev->stopfd);
	if (ev->callfd >= 0)
		close(ev->callfd);
	pthread_mutex_destroy(&ev->lock);
	pthread_mutex_destroy(&ev->call_lock);
	pthread_cond_destroy(&ev->call_done);
	free(ev);
}

/*
 * Free the records of fds unwatched before the batch being dispatched (if
 * any) began: the loop thread can no longer hold them. Under lock. Without
 * this a server watching one fd per connection would grow for ever.
 */
static void sweep(struct event_loop *ev)
{
	struct watch **pw = &ev->watches, *w;

	while ((w = *pw)) {
		if (!w->cb && w->dead < ev->batch) {
			*pw = w->next;
			free(w);
		} else {
			pw = &w->next;
		}
	}
}

static int watch(struct event_loop *ev, int fd, uint32_t events, void (*cb)(void *), void *arg,
		 bool control)
{
	struct watch *w = calloc(1, sizeof(*w));
	struct epoll_event e = { .events = events };

	if (!w)
		return -ENOMEM;
	pthread_mutex_lock(&ev->lock);
	sweep(ev);
	pthread_mutex_unlock(&ev->lock);
	*w = (struct watch){ .fd = fd, .cb = cb, .arg = arg, .events = events, .control = control };
	e.data.ptr = w;
	pthread_mutex_lock(&ev->lock);
	w->off = ev->paused && !control;
	if (!w->off && epoll_ctl(ev->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
		int err = -errno;

		pthread_mutex_unlock(&ev->lock);
		free(w);
		return err;
	}
	w->next = ev->watches;
	ev->watches = w;
	pthread_mutex_unlock(&ev->lock);
	return 0;
}

int event_watch(struct event_loop *ev, int fd, uint32_t events, void (*cb)(void *), void *arg)
{
	return watch(ev, fd, events, cb, arg, false);
}

int event_watch_control(struct event_loop *ev, int fd, uint32_t events, void (*cb)(void *),
			void *arg)
{
	return watch(ev, fd, events, cb, arg, true);
}

void event_pause(struct event_loop *ev, bool on)
{
	pthread_mutex_lock(&ev->lock);
	if (ev->paused != on) {
		ev->paused = on;
		for (struct watch *w = ev->watches; w; w = w->next) {
			struct epoll_event e = { .events = w->events, .data.ptr = w };

			if (!w->cb || w->control)
				continue;
			if (on && !w->off)
				epoll_ctl(ev->epfd, EPOLL_CTL_DEL, w->fd, NULL);
			else if (!on && w->off && epoll_ctl(ev->epfd, EPOLL_CTL_ADD, w->fd, &e) < 0)
				log_err("event loop: resuming fd %d: %s", w->fd, strerror(errno));
			w->off = on;
		}
	}
	pthread_mutex_unlock(&ev->lock);
}

/*
 * The watch record is kept (disarmed) until the batch being dispatched is
 * over (sweep): the loop thread may already hold a pointer to it from that
 * epoll_wait batch.
 */
int event_unwatch(struct event_loop *ev, int fd)
{
	struct watch *w;
	int ret = -ENOENT;

	pthread_mutex_lock(&ev->lock);
	for (w = ev->watches; w; w = w->next) {
		if (w->fd == fd && w->cb) {
			if (!w->off)
				epoll_ctl(ev->epfd, EPOLL_CTL_DEL, fd, NULL);
			w->cb = NULL;
			w->fd = -1;
			w->dead = ev->batch;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&ev->lock);
	return ret;
}

/* The loop thread: run the pending event_call. */
static void run_call(struct event_loop *ev)
{
	uint64_t n;

	if (read(ev->callfd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("event loop: call eventfd: %s", strerror(errno));
	pthread_mutex_lock(&ev->call_lock);
	if (ev->call_pending) {
		ev->call_ret = ev->call_fn(ev->call_arg);
		ev->call_pending = false;
		pthread_cond_broadcast(&ev->call_done);
	}
	pthread_mutex_unlock(&ev->call_lock);
}

int event_call_begin(struct event_loop *ev, int (*fn)(void *), void *arg)
{
	uint64_t one = 1;
	int ret = 0;

	pthread_mutex_lock(&ev->call_lock);
	while (ev->call_owned) /* another caller's turn */
		pthread_cond_wait(&ev->call_done, &ev->call_lock);
	ev->call_owned = true;
	if (!ev->running || pthread_equal(pthread_self(), ev->thread)) {
		/* no loop to hand it to: run here, the result kept for end */
		pthread_mutex_unlock(&ev->call_lock);
		ev->call_ret = fn(arg);
		return 0;
	}
	ev->call_fn = fn;
	ev->call_arg = arg;
	ev->call_pending = true;
	if (write(ev->callfd, &one, sizeof(one)) < 0) {
		ret = -errno;
		ev->call_pending = false;
		ev->call_owned = false;
		pthread_cond_broadcast(&ev->call_done);
	}
	pthread_mutex_unlock(&ev->call_lock);
	return ret;
}

int event_call_end(struct event_loop *ev)
{
	int ret;

	pthread_mutex_lock(&ev->call_lock);
	while (ev->call_pending)
		pthread_cond_wait(&ev->call_done, &ev->call_lock);
	ret = ev->call_ret;
	ev->call_owned = false;
	pthread_cond_broadcast(&ev->call_done);
	pthread_mutex_unlock(&ev->call_lock);
	return ret;
}

int event_call(struct event_loop *ev, int (*fn)(void *), void *arg)
{
	int ret;

	if (!ev->running || pthread_equal(pthread_self(), ev->thread))
		return fn(arg); /* reentrant: a call made from a call */
	ret = event_call_begin(ev, fn, arg);
	return ret ? ret : event_call_end(ev);
}

bool event_on_loop(struct event_loop *ev)
{
	return ev->running && pthread_equal(pthread_self(), ev->thread);
}

static void *loop(void *arg)
{
	struct event_loop *ev = arg;
	struct epoll_event evs[32];

	pthread_setname_np(pthread_self(), "event-loop");
	for (;;) {
		int n = epoll_wait(ev->epfd, evs, 32, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err("event loop: epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;
			void (*cb)(void *);
			void *cb_arg;

			if (!w)
				return NULL; /* stop requested */
			if ((void *)w == (void *)&ev->callfd) {
				run_call(ev);
				continue;
			}
			pthread_mutex_lock(&ev->lock);
			cb = w->off ? NULL : w->cb; /* paused since epoll_wait returned */
			cb_arg = w->arg;
			pthread_mutex_unlock(&ev->lock);
			if (cb)
				cb(cb_arg);
		}
		pthread_mutex_lock(&ev->lock);
		ev->batch++;
		pthread_mutex_unlock(&ev->lock);
	}
	return NULL;
}

int event_start(struct event_loop *ev)
{
	int err = pthread_create(&ev->thread, NULL, loop, ev);

	if (err)
		return -err;
	ev->running = true;
	return 0;
}

void event_stop(struct event_loop *ev)
{
	uint64_t one = 1;

	if (!ev->running)
		return;
	if (write(ev->stopfd, &one, sizeof(one)) < 0)
		log_warn("event loop: cannot wake: %s", strerror(errno));
	pthread_join(ev->thread, NULL);
	ev->running = false;
}
