/* SPDX-License-Identifier: Apache-2.0 */
/* bench/harness: guest RAM, a minimal host, plugin loading, the driver's rings, the event loop, a peer thread and timing shared by the device benchmarks. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>

#include "harness.h"

struct guest_mem bench_mem;
const struct cub_virtio_ops *bench_vops;
void *bench_vpriv;
pthread_mutex_t bench_irq_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t bench_irq_cond = PTHREAD_COND_INITIALIZER;
unsigned bench_irqs;

static const char *tag = "bench";

int bench_init(const char *t)
{
	struct mem_bank bank = { .gpa = 0, .size = BENCH_RAM };

	tag = t;
	clock_mark_start();
	return mem_create(&bench_mem, BENCH_RAM, &bank, 1);
}

/* ---- a minimal host for the plugin ---- */

void bench_log(struct cub_inst *in, int lvl, const char *fmt, ...)
{
	va_list ap;

	if (lvl > CUB_LOG_WARN)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "%s: %s: ", tag, in->name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int bench_fail(struct cub_inst *in, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(in->err, sizeof(in->err), fmt, ap);
	va_end(ap);
	return err;
}

uint64_t bench_clock(struct cub_inst *in)
{
	return clock_since_start_us();
}

static int b_add(struct cub_inst *in, const struct cub_virtio_ops *ops, void *priv)
{
	bench_vops = ops;
	bench_vpriv = priv;
	return 0;
}

static int b_pop(struct cub_vq *q, struct cub_vq_chain *c)
{
	return virtq_pop((struct virtq *)q, c);
}

static int b_unpop(struct cub_vq *q, const uint16_t *heads, unsigned n)
{
	return virtq_unpop((struct virtq *)q, heads, n);
}

static void b_push(struct cub_vq *q, const struct cub_vq_chain *c, uint32_t written)
{
	virtq_push((struct virtq *)q, c->head, written);
}

static void b_push_batch(struct cub_vq *q, const struct cub_vq_used *u, unsigned n)
{
	virtq_push_batch((struct virtq *)q, u, n);
}

static void b_notify(struct cub_vq *q)
{
	if (!virtq_should_notify((struct virtq *)q))
		return;
	pthread_mutex_lock(&bench_irq_lock);
	bench_irqs++;
	pthread_cond_broadcast(&bench_irq_cond);
	pthread_mutex_unlock(&bench_irq_lock);
}

static void b_broken(struct cub_inst *in, const char *why)
{
	fprintf(stderr, "%s: device broken: %s\n", tag, why);
	exit(1);
}

const struct cub_virtio_host bench_vhost = {
	.size = sizeof(bench_vhost), .add = b_add, .pop = b_pop, .push = b_push,
	.notify = b_notify, .broken = b_broken, .push_batch = b_push_batch, .unpop = b_unpop,
};

/* ---- the device ---- */

int bench_dev_create(struct bench_dev *d, const char *type, const char *plugin_dir,
		     const char *text, const struct cub_host *host)
{
	char *dirs[] = { CUB_BUILD_DIR "/plugins/devices/.libs", (char *)plugin_dir, NULL };
	struct cub_inst *in = &d->in;
	char err[512] = "";

	if (registry_scan(&d->reg, dirs, NULL, NULL) ||
	    !registry_find(&d->reg, CUB_KIND_DEVICE, type)) {
		fprintf(stderr, "%s: plugins not built (run make first)\n", tag);
		return -1;
	}
	if (plan_devices_text(&d->plan, text, "bench", ".", &d->reg, err, sizeof(err)) ||
	    !d->plan.n_devs) {
		fprintf(stderr, "%s: %s\n", tag, err);
		return -1;
	}
	in->name = d->plan.devs[0].name;
	in->plugin = d->plan.devs[0].plugin;
	in->cfg = d->plan.devs[0].cfg;
	in->plan = &d->plan;
	in->pi = &d->plan.devs[0];
	if (((const struct cub_device_ops *)in->plugin->d->ops)->create(in, host, in->cfg, &d->priv)) {
		fprintf(stderr, "%s: %s\n", tag, in->err);
		return -1;
	}
	return 0;
}

void bench_dev_destroy(struct bench_dev *d, void (*close_all)(struct cub_inst *))
{
	((const struct cub_device_ops *)d->in.plugin->d->ops)->destroy(d->priv);
	close_all(&d->in);
	plan_free(&d->plan);
	registry_free(&d->reg);
}

struct virtq *bench_virtq(uint64_t desc, uint64_t avail, uint64_t used, uint64_t features)
{
	struct virtq_addr a = { BENCH_QSIZE, desc, avail, used };
	struct virtq *vq;
	char err[256];

	if (virtq_create(&bench_mem, &a, features, &vq, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", tag, err);
		return NULL;
	}
	return vq;
}

/* ---- the driver's rings ---- */

unsigned bench_kicks;

static int ring_init(struct bench_ring *r, unsigned q, uint64_t d, uint64_t a, uint64_t u)
{
	*r = (struct bench_ring){ .q = q };
	r->dt = mem_map(&bench_mem, d, 16 * BENCH_QSIZE);
	r->avail = mem_map(&bench_mem, a, 6 + 2 * BENCH_QSIZE);
	r->used = mem_map(&bench_mem, u, 6 + 8 * BENCH_QSIZE);
	r->vq = bench_virtq(d, a, u, 1ull << VIRTIO_F_VERSION_1 | 1ull << VIRTIO_F_EVENT_IDX);
	return r->vq ? 0 : -1;
}

int bench_rings_init(struct bench_ring *rx, struct bench_ring *tx)
{
	if (ring_init(rx, 0, 0x0, 0x1000, 0x2000) || ring_init(tx, 1, 0x4000, 0x5000, 0x6000))
		return -1;
	return 0;
}

void bench_ring_publish(struct bench_ring *r)
{
	uint16_t ev, old = r->kicked_at, new = r->avail_next;

	__atomic_store_n(&r->avail[1], new, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ev = __atomic_load_n(&r->used[2 + 4 * BENCH_QSIZE], __ATOMIC_RELAXED); /* avail_event */
	r->kicked_at = new;
	if ((uint16_t)(new - ev - 1) < (uint16_t)(new - old)) {
		bench_kicks++;
		bench_vops->notify(bench_vpriv, r->q);
	}
}

void bench_ring_wait(struct bench_ring *r)
{
	pthread_mutex_lock(&bench_irq_lock);
	for (;;) {
		__atomic_store_n(&r->avail[2 + BENCH_QSIZE], r->used_seen, __ATOMIC_RELAXED); /* used_event */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (bench_used_idx(r) != r->used_seen)
			break;
		pthread_cond_wait(&bench_irq_cond, &bench_irq_lock);
	}
	pthread_mutex_unlock(&bench_irq_lock);
}

/* ---- the event loop ---- */

static void (*watch_cb)(void *);
static void *watch_arg;
static int watch_fd = -1, stop_fd = -1;

int bench_fd_watch(struct cub_inst *in, int fd, uint32_t ev, void (*cb)(void *), void *arg)
{
	watch_cb = cb;
	watch_arg = arg;
	watch_fd = fd;
	return 0;
}

int bench_fd_unwatch(struct cub_inst *in, int fd)
{
	return 0;
}

/* The device's epoll set readable → its callback, until stop_fd is. */
static void *loop_thread(void *arg)
{
	struct pollfd p[2] = { { .fd = watch_fd, .events = POLLIN },
			       { .fd = stop_fd, .events = POLLIN } };

	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (p[0].revents)
			watch_cb(watch_arg);
	}
	return NULL;
}

void bench_loop_start(pthread_t *t)
{
	stop_fd = eventfd(0, EFD_CLOEXEC);
	pthread_create(t, NULL, loop_thread, NULL);
}

void bench_loop_stop(pthread_t t)
{
	if (eventfd_write(stop_fd, 1) == 0)
		pthread_join(t, NULL);
}

/* ---- the peer ---- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int job; /* 0 idle, > 0 the bench's, -1 quit */
	void (*work)(int job);
} peer = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL };

static void *peer_thread(void *arg)
{
	for (;;) {
		int job;

		pthread_mutex_lock(&peer.lock);
		while (!peer.job)
			pthread_cond_wait(&peer.cond, &peer.lock);
		job = peer.job;
		pthread_mutex_unlock(&peer.lock);
		if (job < 0)
			return NULL;
		peer.work(job);
		pthread_mutex_lock(&peer.lock);
		peer.job = 0;
		pthread_cond_broadcast(&peer.cond);
		pthread_mutex_unlock(&peer.lock);
	}
}

void bench_peer_spawn(pthread_t *t, void (*work)(int job))
{
	peer.work = work;
	pthread_create(t, NULL, peer_thread, NULL);
}

void bench_peer_start(int job)
{
	pthread_mutex_lock(&peer.lock);
	peer.job = job;
	pthread_cond_broadcast(&peer.cond);
	pthread_mutex_unlock(&peer.lock);
}

void bench_peer_wait(void)
{
	pthread_mutex_lock(&peer.lock);
	while (peer.job)
		pthread_cond_wait(&peer.cond, &peer.lock);
	pthread_mutex_unlock(&peer.lock);
}

void bench_peer_stop(pthread_t t)
{
	bench_peer_start(-1);
	pthread_join(t, NULL);
}

/* ---- timing ---- */

double bench_now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *t, unsigned n)
{
	qsort(t, n, sizeof(double), cmp_d);
	return t[n / 2];
}
