/* SPDX-License-Identifier: Apache-2.0 */
/* Threads that work beside the one starting them (thread.h). */
#include <errno.h>
#include <sched.h>

#include "thread.h"

int thread_start_beside(pthread_t *t, void *(*fn)(void *), void *arg)
{
	struct sched_param param;
	pthread_attr_t a;
	int policy, ret;

	/* the kernel's word, not pthread_getschedparam's: glibc keeps the
	 * policy a thread was started with, not one it set itself since */
	policy = sched_getscheduler(0);
	if (policy < 0 || sched_getparam(0, &param) || pthread_attr_init(&a))
		return pthread_create(t, NULL, fn, arg);
	/* the stack size stays the process's default (main.c) */
	ret = pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
	if (!ret)
		ret = pthread_attr_setschedpolicy(&a, policy);
	if (!ret)
		ret = pthread_attr_setschedparam(&a, &param);
	if (!ret)
		ret = pthread_create(t, &a, fn, arg);
	pthread_attr_destroy(&a);
	/* a policy glibc's attributes cannot name (SCHED_BATCH, SCHED_IDLE)
	 * or may not set: a plain start, which inherits it */
	return ret == EINVAL || ret == EPERM || ret == ENOTSUP ? pthread_create(t, NULL, fn, arg) : ret;
}
