/* SPDX-License-Identifier: Apache-2.0 */
/* The virtio-rng (entropy) device plugin: guest buffers filled from getrandom(), optionally rate-limited. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cubicle/plugin.h>
#include <cubicle/virtio.h>

/*
 * Requests are served where the kick arrives (vCPU or event loop): filling
 * a buffer from getrandom() is quick, and each call does at most
 * BYTES_PER_KICK before handing the rest to the event loop through the
 * timer. With rate_bytes_per_s, a token bucket (one second of burst) limits
 * the bytes handed out; a request that finds the bucket empty waits, popped,
 * until a timerfd on the event loop says enough tokens have accrued. Nothing
 * ever sleeps.
 */

#define VIRTIO_ID_ENTROPY 4
#define QUEUE_MAX	  256
#define BYTES_PER_REQ	  (64u << 10) /* the most one buffer gets (the spec allows fewer) */
#define BYTES_PER_KICK	  (1u << 20)  /* then the event loop takes over */
#define RATE_MAX	  1000000000000ull
#define US		  1000000ull

struct rng_cfg {
	uint64_t rate;
	struct cub_rl *rl;
};

struct rng {
	struct cub_inst *in;
	const struct cub_host *h;
	uint64_t rate;         /* bytes per second, 0: unlimited */
	struct cub_rl *rl;     /* the host's rate limiter, NULL on an older host */
	int tfd;

	pthread_mutex_t lock;  /* everything below; one thread in the queue at a time */
	struct cub_vq *vq;     /* NULL while the driver is not running */
	struct cub_vq_chain chain;
	bool held;             /* chain popped, waiting for tokens */
	bool armed;
	uint64_t credit;       /* bucket, in byte-microseconds (1 byte = US) */
	uint64_t last_us;
};

static void refill(struct rng *r)
{
	uint64_t now = r->h->clock_us(r->in), cap = r->rate * US, add;

	if (now <= r->last_us)
		return;
	/* A second of idling fills the bucket; shorter ones cannot overflow. */
	add = now - r->last_us >= US ? cap : (now - r->last_us) * r->rate;
	r->credit = add > cap - r->credit ? cap : r->credit + add;
	r->last_us = now;
}

static void arm(struct rng *r, uint64_t us)
{
	struct itimerspec it = { 0 };

	if (r->armed)
		return;
	if (!us)
		us = 1;
	it.it_value.tv_sec = (time_t)(us / US);
	it.it_value.tv_nsec = (long)(us % US) * 1000;
	if (!timerfd_settime(r->tfd, 0, &it, NULL))
		r->armed = true;
}

/* Fill up to max bytes of the chain's writable part; bytes written or -errno. */
static int64_t fill(struct cub_vq_chain *c, uint64_t max)
{
	uint64_t done = 0;

	for (unsigned i = 0; i < c->n_in && done < max; i++) {
		uint8_t *p = c->in[i].iov_base;
		size_t want = c->in[i].iov_len < max - done ? c->in[i].iov_len : (size_t)(max - done);

		while (want) {
			ssize_t n = getrandom(p, want, GRND_NONBLOCK);

			if (n < 0) {
				if (errno == EINTR)
					continue;
				return done ? (int64_t)done : -errno;
			}
			p += n;
			want -= (size_t)n;
			done += (uint64_t)n;
		}
	}
	return (int64_t)done;
}

/* Serve what the bucket allows. Lock held. */
static void rng_process(struct rng *r)
{
	const struct cub_virtio_host *v = r->h->virtio;
	uint64_t kick = 0;
	unsigned done = 0;

	if (!r->vq)
		return;
	if (r->rate)
		refill(r);
	for (;;) {
		uint64_t budget = BYTES_PER_REQ, need;
		int64_t n;

		if (!r->held) {
			int ret = v->pop(r->vq, &r->chain);

			if (ret != 1)
				break;
			if (!r->chain.in_len || r->chain.n_out) {
				v->broken(r->in, "entropy request without (only) device-writable buffers");
				break;
			}
			r->held = true;
		}
		if (kick >= BYTES_PER_KICK) {
			arm(r, 1); /* enough for this thread: the event loop goes on */
			break;
		}
		if (r->rate) {
			if (r->credit / US < budget)
				budget = r->credit / US;
			need = r->rate / 50 ? r->rate / 50 : 1; /* at most ~50 timer wakeups a second */
			if (need > r->chain.in_len)
				need = r->chain.in_len;
			if (need > BYTES_PER_REQ)
				need = BYTES_PER_REQ;
			if (!budget) {
				arm(r, (need * US - r->credit) / r->rate + 1);
				break;
			}
		}
		if (r->rl) {
			uint64_t wait;

			if (budget > r->chain.in_len)
				budget = r->chain.in_len;
			if (!v->rl_take(r->rl, budget, 1, &wait)) {
				arm(r, wait);
				break;
			}
		}
		n = fill(&r->chain, budget);
		if (n <= 0) {
			r->h->log_ratelimited(r->in, CUB_LOG_WARN, "getrandom: %s",
					      n < 0 ? strerror((int)-n) : "no bytes");
			arm(r, 100000);
			break;
		}
		if (r->rate)
			r->credit -= (uint64_t)n * US;
		kick += (uint64_t)n;
		v->push(r->vq, &r->chain, (uint32_t)n);
		r->held = false;
		done++;
	}
	if (done)
		v->notify(r->vq);
}

static void timer_fired(void *arg)
{
	struct rng *r = arg;
	uint64_t ticks;

	if (read(r->tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		r->h->log_ratelimited(r->in, CUB_LOG_WARN, "timerfd: %s", strerror(errno));
	pthread_mutex_lock(&r->lock);
	r->armed = false;
	rng_process(r);
	pthread_mutex_unlock(&r->lock);
}

/* ---- virtio ops ---- */

static uint64_t rng_features(void *priv)
{
	return 0;
}

static void rng_config_read(void *priv, uint32_t off, void *buf, uint32_t len)
{
	memset(buf, 0, len); /* no config space */
}

static int rng_start(void *priv, struct cub_vq *const *vqs, unsigned n)
{
	struct rng *r = priv;

	pthread_mutex_lock(&r->lock);
	r->vq = n ? vqs[0] : NULL;
	r->held = false;
	rng_process(r); /* buffers may already be waiting */
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static void rng_notify(void *priv, unsigned q)
{
	struct rng *r = priv;

	if (q)
		return;
	pthread_mutex_lock(&r->lock);
	rng_process(r);
	pthread_mutex_unlock(&r->lock);
}

static void rng_stop(void *priv)
{
	struct rng *r = priv;
	struct itimerspec off = { 0 };

	pthread_mutex_lock(&r->lock);
	r->vq = NULL;
	r->held = false; /* the driver reset: the popped chain is gone with the queue */
	timerfd_settime(r->tfd, 0, &off, NULL);
	r->armed = false;
	pthread_mutex_unlock(&r->lock);
}

static const struct cub_virtio_ops rng_vops = {
	.device_id = VIRTIO_ID_ENTROPY,
	.n_queues = 1,
	.queue_max = QUEUE_MAX,
	.config_size = 0,
	.features = rng_features,
	.config_read = rng_config_read,
	.start = rng_start,
	.notify = rng_notify,
	.stop = rng_stop,
};

/* ---- lifecycle ---- */

static void rng_free(struct rng *r)
{
	rng_stop(r);
	if (r->tfd >= 0)
		close(r->tfd);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static int rng_create(struct cub_inst *in, const struct cub_host *h, const void *cfgp,
		      void **priv)
{
	const struct rng_cfg *cfg = cfgp;
	struct rng *r;
	int err;

	if (cfg->rate > RATE_MAX)
		return h->fail(in, -EINVAL, "rate_bytes_per_s = %llu; at most %llu",
			       (unsigned long long)cfg->rate, RATE_MAX);
	if (!CUB_HOST_HAS(h, virtio))
		return h->fail(in, -ENOTSUP, "this host offers no virtio services");
	r = calloc(1, sizeof(*r));
	if (!r)
		return h->fail(in, -ENOMEM, "out of memory");
	r->in = in;
	r->h = h;
	r->rate = cfg->rate;
	r->rl = CUB_VIRTIO_HAS_RL(h->virtio) ? cfg->rl : NULL;
	r->credit = r->rate * US; /* start with a full bucket */
	r->last_us = h->clock_us(in);
	pthread_mutex_init(&r->lock, NULL);
	r->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (r->tfd < 0) {
		err = h->fail(in, -errno, "timerfd: %s", strerror(errno));
		goto fail;
	}
	err = h->fd_watch(in, r->tfd, EPOLLIN, timer_fired, r);
	if (err) {
		err = h->fail(in, err, "cannot watch the rate timer: %s", strerror(-err));
		goto fail;
	}
	err = h->virtio->add(in, &rng_vops, r);
	if (err)
		goto fail;
	*priv = r;
	return 0;
fail:
	rng_free(r);
	return err;
}

static void rng_destroy(void *priv)
{
	rng_free(priv);
}

static const struct cub_param rng_params[] = {
	{ .name = "rate_bytes_per_s", .type = CUB_P_SIZE, .offset = offsetof(struct rng_cfg, rate),
	  .def = "0", .doc = "most random bytes per second given to the guest (0: unlimited)" },
	{ .name = "rate_limiter", .type = CUB_P_RATELIMIT, .offset = offsetof(struct rng_cfg, rl),
	  .def = "", .doc = "Firecracker-style limiter: bandwidth (bytes), ops (requests)" },
};

/* Snapshots: no state of its own; the host saves its queues. */
static const struct cub_device_ops rng_ops = {
	.create = rng_create,
	.destroy = rng_destroy,
	.state_version = CUB_STATE_VERSION(1, 0),
	.save = cub_state_none_save,
	.load = cub_state_none_load,
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(6),
	.kind = CUB_KIND_DEVICE,
	.name = "virtio-rng",
	.version = "1.1",
	.license = "Apache-2.0",
	.summary = "virtio entropy device fed by getrandom(), with an optional rate limit",
	.cfg_size = sizeof(struct rng_cfg),
	.params = rng_params,
	.n_params = CUB_ARRAY_SIZE(rng_params),
	.ops = &rng_ops,
});
