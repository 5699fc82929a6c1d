/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the virtio-rng plugin through the fake host's virtqueues. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cunit_main.h"
#include "fake_host.h"

static const struct cub_plugin *plug;
static void *dl, *cfg, *priv;
static struct fake_host fh;
static struct cub_vq_chain ch[32];
static uint8_t buf[32][70000];

static int start(const char *const *kv)
{
	int err;

	fake_host_init(&fh);
	fh.clock_fixed = true;
	fh.clock_us = 1000;
	cfg = fake_cfg_new(plug, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	priv = NULL;
	err = fake_create(&fh, plug, cfg, &priv);
	if (!err)
		CU_ASSERT_EQUAL(fake_virtio_start(&fh), 0);
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

/* Chain i: one writable segment of len bytes, zeroed. */
static void add(unsigned i, size_t len)
{
	memset(buf[i], 0, len);
	fake_chain_init(&ch[i], (uint16_t)i);
	CU_ASSERT_EQUAL(fake_chain_add(&ch[i], buf[i], len, true), 0);
	CU_ASSERT_EQUAL(fake_vq_add(&fh, 0, &ch[i]), 0);
}

static uint32_t written(unsigned n)
{
	return fh.vqs[0].used[n].written;
}

static bool timer_armed(int fd)
{
	struct itimerspec it;

	return !timerfd_gettime(fd, &it) && (it.it_value.tv_sec || it.it_value.tv_nsec);
}

static void test_descriptor(void)
{
	CU_ASSERT_STRING_EQUAL(plug->name, "virtio-rng");
	CU_ASSERT_EQUAL_FATAL(start(NULL), 0);
	CU_ASSERT_EQUAL(fh.vdev->device_id, 4);
	CU_ASSERT_EQUAL(fh.vdev->n_queues, 1);
	CU_ASSERT_EQUAL(fh.vdev->config_size, 0);
	CU_ASSERT_EQUAL(fh.vdev->features(fh.vpriv), 0);
	CU_ASSERT_EQUAL(fh.n_watches, 1); /* the rate timer */
	stop();
	CU_ASSERT_EQUAL(start((const char *[]){ "rate_bytes_per_s", "2000000000000", NULL }), -EINVAL);
	stop();
}

static void test_unlimited(void)
{
	unsigned nonzero = 0;

	CU_ASSERT_EQUAL_FATAL(start(NULL), 0);
	add(0, 64);
	add(1, 4096);
	add(2, 70000);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT_EQUAL_FATAL(fh.vqs[0].n_used, 3);
	CU_ASSERT_EQUAL(written(0), 64);
	CU_ASSERT_EQUAL(written(1), 4096);
	CU_ASSERT_EQUAL(written(2), 65536); /* one buffer gets at most 64 KiB */
	CU_ASSERT_EQUAL(fh.vqs[0].notifies, 1);
	for (int i = 0; i < 4096; i++)
		nonzero += buf[1][i] != 0;
	CU_ASSERT(nonzero > 4000);
	/* a buffer split in two segments is filled across both */
	fake_chain_init(&ch[3], 3);
	fake_chain_add(&ch[3], buf[3], 10, true);
	fake_chain_add(&ch[3], buf[4], 10, true);
	memset(buf[4], 0, 10);
	fake_vq_add(&fh, 0, &ch[3]);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT_EQUAL(written(3), 20);
	/* a readable segment is not an entropy request */
	fake_chain_init(&ch[5], 5);
	fake_chain_add(&ch[5], buf[5], 10, false);
	fake_chain_add(&ch[5], buf[6], 10, true);
	fake_vq_add(&fh, 0, &ch[5]);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT_EQUAL(fh.broken_calls, 1);
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 4);
	stop();
}

/* Each kick hands out at most 1 MiB; the event loop does the rest. */
static void test_kick_budget(void)
{
	int tfd;

	CU_ASSERT_EQUAL_FATAL(start(NULL), 0);
	tfd = fh.watches[0].fd;
	for (unsigned i = 0; i < 20; i++)
		add(i, 65536);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 16);
	CU_ASSERT(poll(&(struct pollfd){ .fd = tfd, .events = POLLIN }, 1, 1000) == 1);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, tfd), 0);
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 20);
	stop();
}

static void test_rate_limit(void)
{
	int tfd;

	CU_ASSERT_EQUAL_FATAL(start((const char *[]){ "rate_bytes_per_s", "1000", NULL }), 0);
	tfd = fh.watches[0].fd;
	add(0, 600);
	add(1, 600);
	add(2, 600);
	fake_virtio_kick(&fh, 0);
	/* a full bucket of one second: 600 + 400, the third waits for the timer */
	CU_ASSERT_EQUAL_FATAL(fh.vqs[0].n_used, 2);
	CU_ASSERT_EQUAL(written(0), 600);
	CU_ASSERT_EQUAL(written(1), 400);
	CU_ASSERT(timer_armed(tfd));
	/* nothing accrued yet: firing early gives nothing */
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, tfd), 0);
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 2);
	fh.clock_us += 100000; /* 100 ms: 100 bytes */
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, tfd), 0);
	CU_ASSERT_EQUAL_FATAL(fh.vqs[0].n_used, 3);
	CU_ASSERT_EQUAL(written(2), 100);
	/* a long idle refills to one second, not more */
	fh.clock_us += 3600ull * 1000000;
	add(3, 5000);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT_EQUAL(written(3), 1000);
	/* reset drops the waiting chain and the timer */
	add(4, 10);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT(timer_armed(tfd));
	fake_virtio_stop(&fh);
	CU_ASSERT(!timer_armed(tfd));
	stop();
}

/* The host's rate limiter (rate_limiter = { bandwidth, ops }), on the real
 * clock: what a bucket holds goes at once, the rest when the timer says. */
static void test_rate_limiter(void)
{
	struct timespec t0, t1;
	int tfd;
	double ms;

	CU_ASSERT_PTR_NULL(fake_cfg_new(plug, (const char *[]){
		"rate_limiter.bandwidth.sise", "1000", NULL }));
	CU_ASSERT_PTR_NULL(fake_cfg_new(plug, (const char *[]){
		"rate_limiter.bandwidth.size", "1000", NULL })); /* no refill_time */
	CU_ASSERT_PTR_NULL(fake_cfg_new(plug, (const char *[]){
		"rate_limiter.bytes.size", "1000", NULL }));
	/* 1000 bytes per 100 ms; 3 requests per second */
	CU_ASSERT_EQUAL_FATAL(start((const char *[]){
		"rate_limiter.bandwidth.size", "1000", "rate_limiter.bandwidth.refill_time", "100",
		"rate_limiter.ops.size", "3", "rate_limiter.ops.refill_time", "1000", NULL }), 0);
	tfd = fh.watches[0].fd;
	add(0, 600);
	add(1, 600);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT_EQUAL_FATAL(fh.vqs[0].n_used, 1);
	CU_ASSERT_EQUAL(written(0), 600);
	CU_ASSERT(timer_armed(tfd)); /* 200 bytes short: 20 ms */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CU_ASSERT(poll(&(struct pollfd){ .fd = tfd, .events = POLLIN }, 1, 1000) == 1);
	CU_ASSERT_EQUAL(fake_watch_fire(&fh, tfd), 0);
	CU_ASSERT_EQUAL_FATAL(fh.vqs[0].n_used, 2);
	CU_ASSERT_EQUAL(written(1), 600);
	/* the ops bucket: the third request in the first second waits, the
	 * fourth for a third of a second more */
	usleep(20000); /* the 10 bytes are back in the bandwidth bucket by then */
	add(2, 10);
	add(3, 10);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 3);
	while (fh.vqs[0].n_used < 4 &&
	       poll(&(struct pollfd){ .fd = tfd, .events = POLLIN }, 1, 2000) == 1)
		fake_watch_fire(&fh, tfd);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 4);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	CU_ASSERT(ms >= 300 && ms < 1500);
	stop();
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "descriptor and config", test_descriptor },
		{ "unlimited: buffers filled", test_unlimited },
		{ "kick budget, then the event loop", test_kick_budget },
		{ "token bucket and timer", test_rate_limit },
		{ "the host's rate_limiter", test_rate_limiter },
		{ NULL, NULL },
	};
	int ret;

	plug = fake_plugin_open("virtio_rng", &dl);
	if (!plug)
		return 1;
	ret = cu_run("virtio_rng", tests);
	fake_plugin_close(dl);
	return ret;
}
