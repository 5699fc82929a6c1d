/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Threads that work beside the one starting them, not in its place.
 *
 * A thread pthread_create starts plainly is woken as a new task, and on the
 * 2-CPU hosts measured it often took its creator's CPU and ran first: the
 * signal thread, which loads or compiles the seccomp filters as soon as it
 * starts, held the main thread's setup up by 0.2-0.3 ms of a 2 ms start
 * to the first guest instruction (PVM host, 81 alternated starts). Started
 * with explicit scheduling attributes (the creator's own policy and
 * priority: nothing about its scheduling changes), glibc creates it held
 * and lets it go once its attributes are set; that ordinary wakeup takes
 * an idle CPU, and the creator goes on.
 *
 * For setup helpers and the signal thread, started before any seccomp
 * filter (the lists allow no sched_* call). The event loop's and the
 * vCPUs' threads block as soon as they start, and measured no faster this
 * way.
 */
#ifndef CUBICLE_THREAD_H
#define CUBICLE_THREAD_H

#include <pthread.h>

/* pthread_create's contract: 0 or an errno value. */
int thread_start_beside(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
