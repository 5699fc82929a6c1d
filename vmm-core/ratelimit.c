/* SPDX-License-Identifier: Apache-2.0 */
/* Token-bucket rate limiters (ratelimit.h): exact integer refills, debt for oversized requests. */
#include <pthread.h>
#include <time.h>

#include "cnode.h"
#include "ratelimit.h"

static __int128 tb_full(const struct tbucket *t)
{
	return (__int128)t->cfg.size * (__int128)(t->cfg.refill_time_ms * 1000);
}

static void tb_refill(struct tbucket *t, uint64_t now_us)
{
	__int128 full = tb_full(t);

	if (now_us <= t->last_us)
		return;
	/* Scaled by refill_time_us, a microsecond adds size: no rounding.
	 * (At most 2^64 us × 2^50: well inside 127 bits.) */
	t->budget += (__int128)(now_us - t->last_us) * t->cfg.size;
	if (t->budget > full)
		t->budget = full;
	t->last_us = now_us;
}

/* How long until @t can give @n tokens (0: now); refilled to @now_us. */
static uint64_t tb_wait(struct tbucket *t, uint64_t n, uint64_t now_us)
{
	__int128 need, lack;
	uint64_t rest;

	if (!t->cfg.size)
		return 0;
	tb_refill(t, now_us);
	rest = n > t->burst ? n - t->burst : 0;
	if (!rest)
		return 0;
	/* More than the bucket holds: wait for a full bucket, then go in debt. */
	need = (__int128)(rest < t->cfg.size ? rest : t->cfg.size) *
	       (__int128)(t->cfg.refill_time_ms * 1000);
	if (t->budget >= need)
		return 0;
	lack = need - t->budget;
	return (uint64_t)((lack + t->cfg.size - 1) / t->cfg.size);
}

static void tb_charge(struct tbucket *t, uint64_t n)
{
	uint64_t from_burst = n < t->burst ? n : t->burst;

	if (!t->cfg.size)
		return;
	t->burst -= from_burst;
	t->budget -= (__int128)(n - from_burst) * (__int128)(t->cfg.refill_time_ms * 1000);
}

static void tb_init(struct tbucket *t, const struct tb_cfg *c, uint64_t now_us)
{
	t->cfg = *c;
	t->burst = c->size ? c->one_time_burst : 0;
	t->budget = tb_full(t);
	t->last_us = now_us;
}

static const char *tb_check(const struct tb_cfg *c)
{
	if (!c->size)
		return c->one_time_burst ? "one_time_burst without a size" : 0;
	if (c->size > RL_SIZE_MAX || c->one_time_burst > RL_SIZE_MAX)
		return "size or one_time_burst above 2^50";
	if (!c->refill_time_ms)
		return "refill_time must be at least 1 ms when size is set";
	if (c->refill_time_ms > RL_REFILL_MAX)
		return "refill_time above 2^32 ms";
	return 0;
}

const char *rl_cfg_check(const struct rl_cfg *cfg)
{
	const char *why = tb_check(&cfg->bandwidth);

	return why ? why : tb_check(&cfg->ops);
}

void rl_init(struct rate_limiter *rl, const struct rl_cfg *cfg, uint64_t now_us)
{
	tb_init(&rl->bw, &cfg->bandwidth, now_us);
	tb_init(&rl->ops, &cfg->ops, now_us);
}

void rl_update(struct rate_limiter *rl, const struct rl_cfg *cfg, uint64_t now_us)
{
	rl_init(rl, cfg, now_us);
}

bool rl_active(const struct rate_limiter *rl)
{
	return rl->bw.cfg.size || rl->ops.cfg.size;
}

bool rl_take(struct rate_limiter *rl, uint64_t bytes, uint64_t ops, uint64_t now_us,
	     uint64_t *wait_us)
{
	uint64_t wb = tb_wait(&rl->bw, bytes, now_us), wo = tb_wait(&rl->ops, ops, now_us);

	if (wb || wo) {
		*wait_us = wb > wo ? wb : wo;
		return false;
	}
	tb_charge(&rl->bw, bytes);
	tb_charge(&rl->ops, ops);
	*wait_us = 0;
	return true;
}

static void tb_refund(struct tbucket *t, uint64_t n)
{
	__int128 full = tb_full(t);

	if (!t->cfg.size)
		return;
	t->budget += (__int128)n * (__int128)(t->cfg.refill_time_ms * 1000);
	if (t->budget > full)
		t->budget = full;
}

void rl_refund(struct rate_limiter *rl, uint64_t bytes, uint64_t ops)
{
	tb_refund(&rl->bw, bytes);
	tb_refund(&rl->ops, ops);
}

/* ---- the handle devices use ---- */

struct cub_rl {
	pthread_mutex_t lock;
	struct rate_limiter rl;
};

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

struct cub_rl *cub_rl_new(struct arena *ar, const struct rl_cfg *cfg)
{
	struct cub_rl *r = arena_alloc(ar, sizeof(*r));

	if (!r)
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	rl_init(&r->rl, cfg, mono_us());
	return r;
}

bool cub_rl_take(struct cub_rl *r, uint64_t bytes, uint64_t ops, uint64_t *wait_us)
{
	bool ok;

	pthread_mutex_lock(&r->lock);
	ok = !rl_active(&r->rl) || rl_take(&r->rl, bytes, ops, mono_us(), wait_us);
	pthread_mutex_unlock(&r->lock);
	if (ok)
		*wait_us = 0;
	else if (*wait_us > RL_WAIT_MAX_US)
		*wait_us = RL_WAIT_MAX_US;
	return ok;
}

void cub_rl_charge(struct cub_rl *r, int64_t bytes, int64_t ops)
{
	pthread_mutex_lock(&r->lock);
	if (bytes >= 0)
		tb_charge(&r->rl.bw, (uint64_t)bytes);
	else
		tb_refund(&r->rl.bw, (uint64_t)-(bytes + 1) + 1);
	if (ops >= 0)
		tb_charge(&r->rl.ops, (uint64_t)ops);
	else
		tb_refund(&r->rl.ops, (uint64_t)-(ops + 1) + 1);
	pthread_mutex_unlock(&r->lock);
}

void cub_rl_set(struct cub_rl *r, const struct rl_cfg *cfg)
{
	pthread_mutex_lock(&r->lock);
	rl_update(&r->rl, cfg, mono_us());
	pthread_mutex_unlock(&r->lock);
}

void cub_rl_get(struct cub_rl *r, struct rl_cfg *cfg)
{
	pthread_mutex_lock(&r->lock);
	cfg->bandwidth = r->rl.bw.cfg;
	cfg->ops = r->rl.ops.cfg;
	pthread_mutex_unlock(&r->lock);
}
