/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of virtio-blk: the built plugin on the raw backend through the
 * fake host's virtqueues (the request parser: test_virtio_blk_parse.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cunit_main.h"
#include "virtio_blk_support.h"

static struct fake_host fh; /* the device's host */
static char dir[] = "/tmp/cubicle-test-blk-XXXXXX";

static const struct cub_plugin *blk, *rawp;
static void *blk_dl, *raw_dl;
static void *bcfg, *bpriv, *rcfg, *rpriv;
static struct cub_storage disk;
static char img[300];

#define F(bit) (1ull << (bit))

static int dev_start(const char *const *kv, bool ro_disk)
{
	const char *rkv[] = { "path", img, "read_only", ro_disk ? "true" : "false", NULL };
	const struct cub_storage_ops *so = rawp->ops;

	fake_host_init(&fh);
	rcfg = fake_cfg_new(rawp, rkv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rcfg);
	CU_ASSERT_EQUAL_FATAL(so->open(fake_inst(&fh), &fh.ops, rcfg, ro_disk, &rpriv), 0);
	disk = (struct cub_storage){ .ops = so, .priv = rpriv, .name = "raw[disk0]" };
	so->info(rpriv, &disk.info);
	fh.storage = &disk;
	bcfg = fake_cfg_new(blk, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(bcfg);
	bpriv = NULL;
	return fake_create(&fh, blk, bcfg, &bpriv);
}

static void dev_stop(void)
{
	if (bpriv)
		((const struct cub_device_ops *)blk->ops)->destroy(bpriv);
	bpriv = NULL;
	fake_cfg_free(blk, bcfg);
	((const struct cub_storage_ops *)rawp->ops)->close(rpriv);
	fake_cfg_free(rawp, rcfg);
	fake_host_fini(&fh);
}

static void test_dev_config(void)
{
	uint64_t f;

	CU_ASSERT_EQUAL_FATAL(dev_start((const char *[]){ "serial", "disk-serial-1", NULL }, false), 0);
	CU_ASSERT_EQUAL(fh.storage_open_calls, 1);
	CU_ASSERT_STRING_EQUAL(fh.storage_key, "backend");
	CU_ASSERT_EQUAL(fh.vdev->device_id, 2);
	CU_ASSERT_EQUAL(fh.vdev->n_queues, 1);
	f = fh.vdev->features(fh.vpriv);
	CU_ASSERT(f & F(2) && f & F(6) && f & F(9) && f & F(13) && f & F(14));
	CU_ASSERT(!(f & F(5)) && !(f & F(12)));
	CU_ASSERT_EQUAL(fake_virtio_config(&fh, 0, 8), (4u << 20) / 512);
	CU_ASSERT_EQUAL(fake_virtio_config(&fh, 12, 4), 254);
	CU_ASSERT_EQUAL(fake_virtio_config(&fh, 20, 4), 512);
	CU_ASSERT_EQUAL(fake_virtio_config(&fh, 40, 4), BLK_MAX_RANGES);
	CU_ASSERT_EQUAL(fake_virtio_config(&fh, 56, 1), 1);
	dev_stop();

	CU_ASSERT_EQUAL_FATAL(dev_start((const char *[]){ "read_only", "true", "num_queues", "4",
							   "root", "true", NULL }, false), 0);
	CU_ASSERT(fh.storage_ro);
	CU_ASSERT(fake_log_has(&fh, "root disk"));
	f = fh.vdev->features(fh.vpriv);
	CU_ASSERT(f & F(5) && f & F(12));
	CU_ASSERT(!(f & F(13)) && !(f & F(14)));
	CU_ASSERT_EQUAL(fh.vdev->n_queues, 4);
	CU_ASSERT_EQUAL(fake_virtio_config(&fh, 34, 2), 4);
	dev_stop();

	/* a read-only backend makes a read-only device */
	CU_ASSERT_EQUAL_FATAL(dev_start(NULL, true), 0);
	CU_ASSERT(fh.vdev->features(fh.vpriv) & F(5));
	dev_stop();
}

static void test_dev_bad_config(void)
{
	/* num_queues is bounded by its min/max: the host refuses 0 and 17 */
	CU_ASSERT_PTR_NULL(fake_cfg_new(blk, (const char *[]){ "num_queues", "0", NULL }));
	CU_ASSERT_PTR_NULL(fake_cfg_new(blk, (const char *[]){ "num_queues", "17", NULL }));
	bcfg = fake_cfg_new(blk, (const char *[]){ "num_queues", "16", NULL });
	CU_ASSERT_PTR_NOT_NULL(bcfg);
	fake_cfg_free(blk, bcfg);
	/* iothread went (see virtio_blk.c): a config that sets it is refused */
	CU_ASSERT_PTR_NULL(fake_cfg_new(blk, (const char *[]){ "iothread", "true", NULL }));
	CU_ASSERT_EQUAL(dev_start((const char *[]){ "serial", "012345678901234567890", NULL },
				  false), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "at most 20"));
	dev_stop();
	/* the storage host's reason stands as it is */
	fake_host_init(&fh);
	fh.storage_err = -ENOENT;
	bcfg = fake_cfg_new(blk, NULL);
	CU_ASSERT_EQUAL(fake_create(&fh, blk, bcfg, &bpriv), -ENOENT);
	CU_ASSERT_EQUAL(fh.fail_calls, 1);
	CU_ASSERT_EQUAL(fh.virtio_add_calls, 0);
	fake_cfg_free(blk, bcfg);
	fake_host_fini(&fh);
}

/* Submit one chain on queue q and wait for it; returns the status byte. */
static bool notified(unsigned q)
{
	bool n;

	pthread_mutex_lock(&fh.lock);
	n = fh.vqs[q].notifies > 0;
	pthread_mutex_unlock(&fh.lock);
	return n;
}

static uint8_t submit(unsigned q, uint32_t *written)
{
	unsigned before = fh.vqs[q].n_used;
	uint8_t *st = (uint8_t *)ch.in[ch.n_in - 1].iov_base + ch.in[ch.n_in - 1].iov_len - 1;

	*st = 0xee;
	CU_ASSERT_EQUAL_FATAL(fake_vq_add(&fh, q, &ch), 0);
	fake_virtio_kick(&fh, q);
	if (!fake_vq_wait_used(&fh, q, before + 1, 5000))
		fprintf(stderr, "(broken %u: %s) ", fh.broken_calls, fh.broken_why);
	CU_ASSERT_FATAL(fh.vqs[q].n_used >= before + 1);
	CU_ASSERT_EQUAL(fh.vqs[q].used[before % FAKE_VQ_LEN].head, ch.head);
	if (written)
		*written = fh.vqs[q].used[before % FAKE_VQ_LEN].written;
	return *st;
}

/* Requests of every kind, on two queues, served on the kicking thread. */
static void test_dev_requests(void)
{
	uint8_t *data, *back, *id;
	uint32_t w;

	CU_ASSERT_EQUAL_FATAL(dev_start((const char *[]){ "serial", "hello", "num_queues", "2",
							   NULL }, false), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	/* write 8 KiB at sector 16 in two segments, read it back */
	fake_chain_init(&ch, 11);
	seg(hdr(VIRTIO_BLK_T_OUT, 16), 16, false);
	data = gmem(8192);
	for (int i = 0; i < 8192; i++)
		data[i] = (uint8_t)(i * 7);
	seg(data, 4096, false);
	seg(data + 4096, 4096, false);
	seg(gmem(1), 1, true);
	CU_ASSERT_EQUAL(submit(0, &w), VIRTIO_BLK_S_OK);
	CU_ASSERT_EQUAL(w, 1);
	fake_chain_init(&ch, 12);
	seg(hdr(VIRTIO_BLK_T_IN, 16), 16, false);
	back = gmem(8193);
	seg(back, 8193, true);
	CU_ASSERT_EQUAL(submit(1, &w), VIRTIO_BLK_S_OK); /* the second queue */
	CU_ASSERT_EQUAL(w, 8193);
	CU_ASSERT_EQUAL(memcmp(back, data, 8192), 0);
	/* flush, get id */
	simple(VIRTIO_BLK_T_FLUSH, 0, 0, false);
	CU_ASSERT_EQUAL(submit(0, &w), VIRTIO_BLK_S_OK);
	simple(VIRTIO_BLK_T_GET_ID, 0, 20, true);
	id = ch.in[0].iov_base;
	memset(id, 'x', 20);
	CU_ASSERT_EQUAL(submit(0, &w), VIRTIO_BLK_S_OK);
	CU_ASSERT_EQUAL(w, 21);
	CU_ASSERT_STRING_EQUAL((char *)id, "hello");
	CU_ASSERT_EQUAL(id[19], 0);
	/* write zeroes over the first half, discard the second, read zeroes */
	fake_chain_init(&ch, 13);
	seg(hdr(VIRTIO_BLK_T_WRITE_ZEROES, 0), 16, false);
	seg(range(16, 8, 0), 16, false);
	seg(gmem(1), 1, true);
	CU_ASSERT_EQUAL(submit(0, &w), VIRTIO_BLK_S_OK);
	fake_chain_init(&ch, 14);
	seg(hdr(VIRTIO_BLK_T_DISCARD, 0), 16, false);
	seg(range(24, 8, 0), 16, false);
	seg(gmem(1), 1, true);
	CU_ASSERT_EQUAL(submit(0, &w), VIRTIO_BLK_S_OK);
	simple(VIRTIO_BLK_T_IN, 16, 8192, true);
	back = ch.in[0].iov_base;
	memset(back, 0xff, 8192);
	CU_ASSERT_EQUAL(submit(0, &w), VIRTIO_BLK_S_OK);
	for (int i = 0; i < 8192; i++)
		if (back[i]) {
			CU_FAIL("not zero after write zeroes / discard");
			break;
		}
	/* bad requests complete with a status; the device goes on */
	simple(VIRTIO_BLK_T_IN, 1u << 30, 512, true);
	CU_ASSERT_EQUAL(submit(0, &w), VIRTIO_BLK_S_IOERR);
	CU_ASSERT_EQUAL(w, 1);
	simple(42, 0, 0, true);
	CU_ASSERT_EQUAL(submit(0, &w), VIRTIO_BLK_S_UNSUPP);
	CU_ASSERT_EQUAL(fh.broken_calls, 0);
	/* a chain without a status byte breaks the device */
	fake_chain_init(&ch, 15);
	seg(hdr(VIRTIO_BLK_T_IN, 0), 16, false);
	CU_ASSERT_EQUAL(fake_vq_add(&fh, 0, &ch), 0);
	fake_virtio_kick(&fh, 0);
	fake_vq_wait_used(&fh, 0, 1000, 2000);
	CU_ASSERT_EQUAL(fh.broken_calls, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.broken_why, "status"));
	/* The completions before it were signalled. */
	CU_ASSERT(notified(0));
	/* reset, start again: the queues serve again */
	fake_virtio_stop(&fh);
	fake_virtio_stop(&fh);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	simple(VIRTIO_BLK_T_FLUSH, 0, 0, false);
	CU_ASSERT_EQUAL(submit(1, &w), VIRTIO_BLK_S_OK);
	dev_stop();
}

/* Queue 4 KiB reads of sector 8i into chains[i], i in [from, to), on queue 0. */
static void queue_reads(struct cub_vq_chain *chains, int from, int to)
{
	for (int i = from; i < to; i++) {
		struct cub_vq_chain *c = &chains[i];

		fake_chain_init(c, (uint16_t)i);
		fake_chain_add(c, hdr(VIRTIO_BLK_T_IN, (uint64_t)i * 8), 16, false);
		fake_chain_add(c, gmem(4096), 4096, true);
		fake_chain_add(c, gmem(1), 1, true);
		CU_ASSERT_EQUAL(fake_vq_add(&fh, 0, c), 0);
	}
}

/* Many chains queued before one kick all complete, in order, with few
 * interrupts, one budget (64 requests) per turn of the event loop; a turn
 * that used its budget but left the ring empty asks for no other. */
static void test_dev_batch(void)
{
	static struct cub_vq_chain chains[264];
	uint8_t *data = NULL;

	CU_ASSERT_EQUAL_FATAL(dev_start((const char *[]){ NULL }, false), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	for (int i = 0; i < 200; i++) {
		struct cub_vq_chain *c = &chains[i];

		fake_chain_init(c, (uint16_t)i);
		fake_chain_add(c, hdr(i % 2 ? VIRTIO_BLK_T_IN : VIRTIO_BLK_T_OUT, (uint64_t)i * 8),
			       16, false);
		data = gmem(4096);
		fake_chain_add(c, data, 4096, i % 2);
		fake_chain_add(c, gmem(1), 1, true);
		CU_ASSERT_EQUAL(fake_vq_add(&fh, 0, c), 0);
	}
	fake_virtio_kick(&fh, 0);
	/* one budget on the kick, the rest through the re-arm fd: 64 + 64 + 8 */
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 64);
	CU_ASSERT_EQUAL(fake_watch_pump(&fh, 100), 3);
	CU_ASSERT_EQUAL_FATAL(fh.vqs[0].n_used, 200);
	for (int i = 0; i < 200; i++)
		CU_ASSERT_EQUAL(fh.vqs[0].used[i].head, i);
	CU_ASSERT(fh.vqs[0].notifies >= 1 && fh.vqs[0].notifies <= 200 / 32 + 5);
	/* exactly one budget: all done on the kick, no other turn asked for */
	queue_reads(chains, 200, 264);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 264);
	CU_ASSERT_EQUAL(fake_watch_pump(&fh, 100), 0);
	dev_stop();
}

/*
 * A request larger than the byte budget is carried over wake-ups, a chunk at
 * a time (aliased segments, as a hostile guest would send them), and a stop
 * in the middle abandons it at once.
 */
static void test_dev_big_request_inline(void)
{
	static struct cub_vq_chain c;
	uint8_t *data = gmem(256 << 10), *st;
	unsigned fired;

	CU_ASSERT_EQUAL_FATAL(dev_start((const char *[]){ NULL }, false), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	fake_chain_init(&c, 7);
	fake_chain_add(&c, hdr(VIRTIO_BLK_T_IN, 0), 16, false);
	for (int i = 0; i < 14; i++) /* 3.5 MiB into the same 256 KiB */
		fake_chain_add(&c, data, 256 << 10, true);
	st = gmem(1);
	*st = 0xee;
	fake_chain_add(&c, st, 1, true);
	CU_ASSERT_EQUAL(fake_vq_add(&fh, 0, &c), 0);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 0); /* 1 MiB done, carried over */
	fired = fake_watch_pump(&fh, 100);
	CU_ASSERT_EQUAL(fired, 3); /* 1 MiB on the kick, then 1 + 1 + 0.5 */
	CU_ASSERT_EQUAL_FATAL(fh.vqs[0].n_used, 1);
	CU_ASSERT_EQUAL(fh.vqs[0].used[0].head, 7);
	CU_ASSERT_EQUAL(fh.vqs[0].used[0].written, (14u << 18) + 1);
	CU_ASSERT_EQUAL(*st, VIRTIO_BLK_S_OK);
	/* write zeroes over two ranges of 1.5 MiB: carried over as well */
	fake_chain_init(&c, 8);
	fake_chain_add(&c, hdr(VIRTIO_BLK_T_WRITE_ZEROES, 0), 16, false);
	fake_chain_add(&c, range(0, 3072, 0), 16, false);
	fake_chain_add(&c, range(4096, 3072, 0), 16, false);
	fake_chain_add(&c, st, 1, true);
	*st = 0xee;
	CU_ASSERT_EQUAL(fake_vq_add(&fh, 0, &c), 0);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 1);
	fake_watch_pump(&fh, 100);
	CU_ASSERT_EQUAL_FATAL(fh.vqs[0].n_used, 2);
	CU_ASSERT_EQUAL(fh.vqs[0].used[1].head, 8);
	CU_ASSERT_EQUAL(*st, VIRTIO_BLK_S_OK);
	/* again, stopped half way: nothing is completed, nothing runs later */
	fake_chain_init(&c, 7);
	fake_chain_add(&c, hdr(VIRTIO_BLK_T_IN, 0), 16, false);
	for (int i = 0; i < 14; i++)
		fake_chain_add(&c, data, 256 << 10, true);
	fake_chain_add(&c, st, 1, true);
	CU_ASSERT_EQUAL(fake_vq_add(&fh, 0, &c), 0);
	fake_virtio_kick(&fh, 0);
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 2);
	fake_virtio_stop(&fh);
	fake_watch_pump(&fh, 100);
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 2);
	dev_stop();
}

/* The host's rate limiter: 40 reads of 4 KiB through a bucket of 64 KiB
 * refilled in 100 ms. The first 16 go at once, the other 24 (96 KiB) take
 * 150 ms more, in order. */
static void test_dev_rate_limited(void)
{
	static struct cub_vq_chain chains[40];
	struct timespec t0, t1;
	double ms;

	CU_ASSERT_EQUAL_FATAL(dev_start((const char *[]){
		"rate_limiter.bandwidth.size", "64K", "rate_limiter.bandwidth.refill_time", "100",
		NULL }, false), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	queue_reads(chains, 0, 40);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fake_virtio_kick(&fh, 0);
	/* 16 (a 17th if 6 ms went by: a slow machine) */
	CU_ASSERT(fh.vqs[0].n_used >= 16 && fh.vqs[0].n_used <= 17);
	for (int i = 0; i < 5000 && fh.vqs[0].n_used < 40; i++) {
		fake_watch_pump(&fh, 100);
		usleep(1000);
	}
	CU_ASSERT(fake_vq_wait_used(&fh, 0, 40, 5000));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	CU_ASSERT(ms >= 140 && ms < 2000);
	for (int i = 0; i < 40; i++)
		CU_ASSERT_EQUAL(fh.vqs[0].used[i].head, i);
	dev_stop();
}

/* ---- kicks from several threads at once ---- */

#define RACE_SLOTS 32   /* chains each racer has queued at most */
#define RACE_N	   3000 /* chains each racer adds in the first part */

struct racer {
	pthread_t t;
	struct cub_vq_chain c[RACE_SLOTS];
	uint8_t *st[RACE_SLOTS];
	bool wait_done; /* reuse a slot only once its chain completed (else skip it) */
	unsigned n;
	bool failed;
};

static _Atomic bool race_quit, pump_quit;

/* A slot's chain completed: its status byte is no longer 0xee (5 s). */
static bool slot_done(const uint8_t *st, bool wait)
{
	for (int i = 0; i < 50000; i++) {
		if (__atomic_load_n(st, __ATOMIC_ACQUIRE) != 0xee)
			return true;
		if (!wait)
			return false;
		usleep(100);
	}
	return false;
}

/* A vCPU of a guest: queue a read, kick, again and again. */
static void *racer_run(void *arg)
{
	struct racer *r = arg;

	for (unsigned i = 0; i < r->n && !race_quit; i++) {
		unsigned k = i % RACE_SLOTS;

		if (i >= RACE_SLOTS && !slot_done(r->st[k], r->wait_done)) {
			if (r->wait_done) {
				r->failed = true; /* a chain never completed: a kick was lost */
				break;
			}
			fake_virtio_kick(&fh, 0); /* still queued, or abandoned by a stop */
			continue;
		}
		__atomic_store_n(r->st[k], 0xee, __ATOMIC_RELEASE);
		if (fake_vq_add(&fh, 0, &r->c[k])) {
			r->failed = true;
			break;
		}
		fake_virtio_kick(&fh, 0);
	}
	return NULL;
}

/* The event loop: serves the queue's re-arm fd. */
static void *pump_run(void *arg)
{
	(void)arg;
	while (!pump_quit) {
		fake_watch_pump(&fh, 100);
		usleep(50);
	}
	return NULL;
}

static unsigned used_now(void)
{
	unsigned n;

	pthread_mutex_lock(&fh.lock);
	n = fh.vqs[0].n_used;
	pthread_mutex_unlock(&fh.lock);
	return n;
}

/* The kick that comes after the drain's last look at the ring. */
static struct cub_vq_chain late;
static unsigned late_kicks;

static void kick_late(struct fake_vq *q)
{
	if (late_kicks++)
		return;
	CU_ASSERT_EQUAL(fake_vq_add(q->fh, 0, &late), 0);
	fake_virtio_kick(q->fh, 0); /* the drain is still on: this only marks the queue */
}

/*
 * A chain queued and kicked just after the draining thread found the ring
 * empty, before it let go of the queue: that kick finds the queue being
 * drained and leaves it to the drainer, which must hand the queue to the
 * event loop (kick_fd) rather than drop the kick. Deterministic: the fake
 * ring's empty pop makes the kick at that very moment.
 */
static void test_dev_late_kick(void)
{
	uint8_t *st;

	CU_ASSERT_EQUAL_FATAL(dev_start((const char *[]){ NULL }, false), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	fake_watch_pump(&fh, 10); /* the start's own kick, if queued */
	fake_chain_init(&late, 3);
	fake_chain_add(&late, hdr(VIRTIO_BLK_T_IN, 8), 16, false);
	fake_chain_add(&late, gmem(512), 512, true);
	st = gmem(1);
	*st = 0xee;
	fake_chain_add(&late, st, 1, true);
	simple(VIRTIO_BLK_T_IN, 0, 512, true);
	late_kicks = 0;
	fh.vqs[0].empty_pop = kick_late;
	CU_ASSERT_EQUAL(submit(0, NULL), VIRTIO_BLK_S_OK);
	CU_ASSERT_EQUAL(late_kicks, 1); /* the late chain went in with its kick */
	CU_ASSERT_EQUAL(fh.vqs[0].n_used, 1); /* ... after the drain's last pop */
	CU_ASSERT_EQUAL(fake_watch_pump(&fh, 10), 1); /* the event loop's turn */
	CU_ASSERT_EQUAL_FATAL(fh.vqs[0].n_used, 2);
	CU_ASSERT_EQUAL(fh.vqs[0].used[1].head, 3);
	CU_ASSERT_EQUAL(*st, VIRTIO_BLK_S_OK);
	fh.vqs[0].empty_pop = NULL;
	dev_stop();
}

/*
 * Two guest vCPUs kick the same queue while each other's drains run, and the
 * event loop serves re-arms: every chain completes with no kick lost (the
 * last ones have no later kick to rescue them). Then stops and starts while
 * they keep kicking: once a stop returns, nothing is pushed until the start.
 */
static void test_dev_kick_race(void)
{
	static struct racer rc[2];
	pthread_t pump;
	unsigned n;

	CU_ASSERT_EQUAL_FATAL(dev_start((const char *[]){ NULL }, false), 0);
	CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	for (int t = 0; t < 2; t++)
		for (int k = 0; k < RACE_SLOTS; k++) {
			struct cub_vq_chain *c = &rc[t].c[k];

			fake_chain_init(c, (uint16_t)(t * RACE_SLOTS + k));
			fake_chain_add(c, hdr(VIRTIO_BLK_T_IN, (uint64_t)k), 16, false);
			fake_chain_add(c, gmem(512), 512, true);
			rc[t].st[k] = gmem(1);
			fake_chain_add(c, rc[t].st[k], 1, true);
		}
	race_quit = pump_quit = false;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&pump, NULL, pump_run, NULL), 0);
	for (int t = 0; t < 2; t++) {
		rc[t].wait_done = true;
		rc[t].n = RACE_N;
		rc[t].failed = false;
		CU_ASSERT_EQUAL_FATAL(pthread_create(&rc[t].t, NULL, racer_run, &rc[t]), 0);
	}
	for (int t = 0; t < 2; t++)
		pthread_join(rc[t].t, NULL);
	CU_ASSERT_FALSE(rc[0].failed || rc[1].failed);
	CU_ASSERT(fake_vq_wait_used(&fh, 0, 2 * RACE_N, 5000));
	CU_ASSERT_EQUAL(used_now(), 2 * RACE_N);
	CU_ASSERT_EQUAL(fh.broken_calls, 0);

	/* stop and start under fire */
	for (int t = 0; t < 2; t++) {
		rc[t].wait_done = false;
		rc[t].n = UINT32_MAX;
		CU_ASSERT_EQUAL_FATAL(pthread_create(&rc[t].t, NULL, racer_run, &rc[t]), 0);
	}
	for (int i = 0; i < 20; i++) {
		usleep(1000);
		fake_virtio_stop(&fh);
		n = used_now();
		usleep(2000);
		CU_ASSERT_EQUAL(used_now(), n); /* stopped: the kicks drain nothing */
		CU_ASSERT_EQUAL_FATAL(fake_virtio_start(&fh), 0);
	}
	usleep(1000);
	CU_ASSERT(used_now() > 2 * RACE_N); /* and it served after each start */
	race_quit = true;
	for (int t = 0; t < 2; t++)
		pthread_join(rc[t].t, NULL);
	fake_virtio_stop(&fh);
	pump_quit = true;
	pthread_join(pump, NULL);
	CU_ASSERT_EQUAL(fh.broken_calls, 0);
	dev_stop();
}

static int suite_init(void)
{
	int fd;

	if (!mkdtemp(dir))
		return 1;
	snprintf(img, sizeof(img), "%s/disk.img", dir);
	fd = open(img, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, 4 << 20))
		return 1;
	close(fd);
	blk = fake_plugin_open("virtio_blk", &blk_dl);
	rawp = fake_plugin_open("raw", &raw_dl);
	return blk_ram_init() || !blk || !rawp;
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "device: features and config space", test_dev_config },
		{ "device: bad config", test_dev_bad_config },
		{ "device: requests on the raw backend", test_dev_requests },
		{ "device: a batch on one kick, one budget per turn", test_dev_batch },
		{ "device: a large request carried over wake-ups", test_dev_big_request_inline },
		{ "device: rate limiter", test_dev_rate_limited },
		{ "device: a kick just after the drain's last look is not lost", test_dev_late_kick },
		{ "device: kicks racing from two threads, stop and start under fire", test_dev_kick_race },
		{ NULL, NULL },
	};
	char cmd[128];
	int ret;

	if (suite_init()) {
		fprintf(stderr, "test_virtio_blk: setup failed\n");
		return 1;
	}
	ret = cu_run("virtio_blk", tests);
	blk_ram_fini();
	fake_plugin_close(blk_dl);
	fake_plugin_close(raw_dl);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	return ret;
}
