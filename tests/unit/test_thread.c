/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of thread_start_beside (vmm-core/thread.c): the function runs on a new thread with
 * its argument; the thread has its creator's scheduling policy, also one glibc's attributes cannot
 * name (SCHED_BATCH); its stack is the process's default size (main.c sets one), not glibc's. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "cunit_main.h"
#include "thread.h"

struct seen {
	pthread_t self;
	void *arg;
	int policy;
	size_t stack;
};

static void *look(void *arg)
{
	struct seen *s = arg;
	pthread_attr_t a;

	s->self = pthread_self();
	s->arg = arg;
	s->policy = sched_getscheduler(0);
	if (!pthread_getattr_np(pthread_self(), &a)) {
		pthread_attr_getstacksize(&a, &s->stack);
		pthread_attr_destroy(&a);
	}
	return (void *)(intptr_t)7;
}

static void test_runs_beside(void)
{
	struct seen s = { .policy = -1 };
	pthread_t t;
	void *ret = NULL;

	CU_ASSERT_FATAL(thread_start_beside(&t, look, &s) == 0);
	CU_ASSERT_FATAL(pthread_join(t, &ret) == 0);
	CU_ASSERT_EQUAL((intptr_t)ret, 7);
	CU_ASSERT(s.arg == &s);
	CU_ASSERT(!pthread_equal(s.self, pthread_self()));
	CU_ASSERT_EQUAL(s.policy, sched_getscheduler(0));
}

/* On a thread of its own: the policy it takes is not given back. */
static void *as_batch(void *arg)
{
	struct sched_param none = { 0 };
	struct seen *s = arg;
	pthread_t t;

	if (sched_setscheduler(0, SCHED_BATCH, &none) || thread_start_beside(&t, look, s) ||
	    pthread_join(t, NULL))
		s->policy = -2;
	return NULL;
}

static void test_batch_creator(void)
{
	struct seen s = { .policy = -1 };
	pthread_t t;

	CU_ASSERT_FATAL(pthread_create(&t, NULL, as_batch, &s) == 0);
	CU_ASSERT_FATAL(pthread_join(t, NULL) == 0);
	CU_ASSERT_EQUAL(s.policy, SCHED_BATCH);
	CU_ASSERT(s.arg == &s);
}

static void test_default_stack(void)
{
	struct seen s = { 0 };
	pthread_attr_t a;
	pthread_t t;

	CU_ASSERT_FATAL(pthread_attr_init(&a) == 0);
	CU_ASSERT_FATAL(pthread_attr_setstacksize(&a, 1u << 20) == 0);
	CU_ASSERT_FATAL(pthread_setattr_default_np(&a) == 0);
	pthread_attr_destroy(&a);
	CU_ASSERT_FATAL(thread_start_beside(&t, look, &s) == 0);
	CU_ASSERT_FATAL(pthread_join(t, NULL) == 0);
	/* glibc's own default is 8 MiB (RLIMIT_STACK); a guard page and
	 * rounding aside, this is the 1 MiB set above */
	CU_ASSERT(s.stack >= (1u << 20) && s.stack < (2u << 20));
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "the function runs on a new thread, with the creator's policy", test_runs_beside },
		{ "a SCHED_BATCH creator's thread is SCHED_BATCH too", test_batch_creator },
		{ "the thread's stack is the process's default size", test_default_stack },
		{ NULL, NULL },
	};

	return cu_run("thread", tests);
}
