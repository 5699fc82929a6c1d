/* SPDX-License-Identifier: Apache-2.0 */
/* The event loop: one epoll thread for device fds, timers and control. */
#ifndef CUBICLE_EVENT_H
#define CUBICLE_EVENT_H

#include <stdbool.h>
#include <stdint.h>

struct event_loop;

struct event_loop *event_new(void);
/* Stop (if running) and free. */
void event_free(struct event_loop *ev);
/* Call cb(arg) on the loop thread while fd has any of the epoll events ev. */
int event_watch(struct event_loop *ev, int fd, uint32_t events, void (*cb)(void *), void *arg);
int event_unwatch(struct event_loop *ev, int fd);
/* The same for a control fd (the API): still served while paused. */
int event_watch_control(struct event_loop *ev, int fd, uint32_t events, void (*cb)(void *),
			void *arg);
/* Paused, the loop serves control fds only: device fds leave the epoll set
 * (their events wait in the kernel) until event_pause(ev, false). */
void event_pause(struct event_loop *ev, bool on);
/* Run fn(arg) on the loop thread and return what it returns: directly
 * when called there or when the loop does not run, else waiting for the
 * loop to pick it up (it runs between two callbacks). */
int event_call(struct event_loop *ev, int (*fn)(void *), void *arg);
/* event_call in two halves, the caller working meanwhile: begin hands
 * fn(arg) to the loop and returns at once (0, or -errno: fn was not run),
 * end waits for it and returns what fn returned. Every begin that returned
 * 0 is ended; other callers' event_calls wait until then. Not from inside
 * a function an event_call runs (event_call itself may be). */
int event_call_begin(struct event_loop *ev, int (*fn)(void *), void *arg);
int event_call_end(struct event_loop *ev);
/* Is the caller the loop thread? */
bool event_on_loop(struct event_loop *ev);
/* Start the loop thread: 0 or -errno. */
int event_start(struct event_loop *ev);
/* Wake the loop, make it return and join it. Safe to call twice. */
void event_stop(struct event_loop *ev);

#endif
