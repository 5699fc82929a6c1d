/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the event loop's calls (vmm-core/event.c): event_call runs on the loop's thread;
 * event_call_begin returns before its function ends and event_call_end hands back what it
 * returned; another caller waits its turn; with no loop running, the caller's thread runs it. */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "cunit_main.h"
#include "event.h"

static pthread_t ran_on;
static sem_t go, entered;
static atomic_int order;

static int record(void *arg)
{
	ran_on = pthread_self();
	return (int)(intptr_t)arg;
}

static void test_call_on_loop(void)
{
	struct event_loop *ev = event_new();

	CU_ASSERT_FATAL(ev != NULL);
	CU_ASSERT_FATAL(event_start(ev) == 0);
	ran_on = pthread_self();
	CU_ASSERT_EQUAL(event_call(ev, record, (void *)(intptr_t)42), 42);
	CU_ASSERT(!pthread_equal(ran_on, pthread_self()));
	event_stop(ev);
	event_free(ev);
}

/* Waits for the caller's go, so that it can only end after begin returned. */
static int gated(void *arg)
{
	sem_post(&entered);
	sem_wait(&go);
	ran_on = pthread_self();
	atomic_store(&order, 1);
	return (int)(intptr_t)arg;
}

static void test_begin_end(void)
{
	struct event_loop *ev = event_new();

	CU_ASSERT_FATAL(ev != NULL);
	CU_ASSERT_FATAL(event_start(ev) == 0);
	sem_init(&go, 0, 0);
	sem_init(&entered, 0, 0);
	atomic_store(&order, 0);
	CU_ASSERT_FATAL(event_call_begin(ev, gated, (void *)(intptr_t)-7) == 0);
	/* begin returned while the function waits for us on the loop */
	sem_wait(&entered);
	CU_ASSERT_EQUAL(atomic_load(&order), 0);
	sem_post(&go);
	CU_ASSERT_EQUAL(event_call_end(ev), -7);
	CU_ASSERT_EQUAL(atomic_load(&order), 1);
	CU_ASSERT(!pthread_equal(ran_on, pthread_self()));
	sem_destroy(&go);
	sem_destroy(&entered);
	event_stop(ev);
	event_free(ev);
}

static int second(void *arg)
{
	(void)arg;
	return atomic_load(&order) == 2 ? 5 : -1; /* after the first caller's end */
}

static void *other_caller(void *arg)
{
	struct event_loop *ev = arg;

	sem_post(&entered);
	return (void *)(intptr_t)event_call(ev, second, NULL);
}

static int first(void *arg)
{
	(void)arg;
	return 3;
}

static void test_other_caller_waits(void)
{
	struct event_loop *ev = event_new();
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	pthread_t t;
	void *ret;

	CU_ASSERT_FATAL(ev != NULL);
	CU_ASSERT_FATAL(event_start(ev) == 0);
	sem_init(&entered, 0, 0);
	atomic_store(&order, 0);
	CU_ASSERT_FATAL(event_call_begin(ev, first, NULL) == 0);
	CU_ASSERT_FATAL(pthread_create(&t, NULL, other_caller, ev) == 0);
	sem_wait(&entered);
	nanosleep(&pause, NULL); /* the other caller is in event_call by now, or will be */
	atomic_store(&order, 2);
	CU_ASSERT_EQUAL(event_call_end(ev), 3);
	pthread_join(t, &ret);
	CU_ASSERT_EQUAL((int)(intptr_t)ret, 5);
	sem_destroy(&entered);
	event_stop(ev);
	event_free(ev);
}

static void test_no_loop_runs_here(void)
{
	struct event_loop *ev = event_new();

	CU_ASSERT_FATAL(ev != NULL);
	ran_on = (pthread_t)0;
	CU_ASSERT_FATAL(event_call_begin(ev, record, (void *)(intptr_t)9) == 0);
	CU_ASSERT(pthread_equal(ran_on, pthread_self()));
	CU_ASSERT_EQUAL(event_call_end(ev), 9);
	CU_ASSERT_EQUAL(event_call(ev, record, (void *)(intptr_t)11), 11);
	event_free(ev);
}

static atomic_int fired;

static void on_ready(void *arg)
{
	uint64_t n;

	if (read(*(int *)arg, &n, sizeof(n)) == (ssize_t)sizeof(n))
		atomic_fetch_add(&fired, 1);
}

/* A control watch is served while the loop is paused (run.c's trim). */
static void test_control_watch_while_paused(void)
{
	struct event_loop *ev = event_new();
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t one = 1;

	CU_ASSERT_FATAL(ev != NULL && fd >= 0);
	CU_ASSERT_FATAL(event_start(ev) == 0);
	event_pause(ev, true);
	atomic_store(&fired, 0);
	CU_ASSERT_FATAL(event_watch_control(ev, fd, EPOLLIN, on_ready, &fd) == 0);
	CU_ASSERT_FATAL(write(fd, &one, sizeof(one)) == (ssize_t)sizeof(one));
	for (int i = 0; i < 500 && !atomic_load(&fired); i++)
		usleep(1000);
	CU_ASSERT_EQUAL(atomic_load(&fired), 1);
	CU_ASSERT(event_unwatch(ev, fd) == 0);
	event_stop(ev);
	event_free(ev);
	close(fd);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "event_call runs on the loop's thread", test_call_on_loop },
		{ "event_call_begin returns before its function ends; end returns its value",
		  test_begin_end },
		{ "another caller's event_call waits for event_call_end", test_other_caller_waits },
		{ "with no loop running, the caller's thread runs it", test_no_loop_runs_here },
		{ "a control watch is served while the loop is paused",
		  test_control_watch_while_paused },
		{ NULL, NULL },
	};

	return cu_run("event", tests);
}
