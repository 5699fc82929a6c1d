/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rate limiters in Firecracker's shape: two token buckets, bandwidth
 * (bytes) and ops (requests), each { size, one_time_burst, refill_time }.
 * A bucket holds at most @size tokens and refills from empty to full in
 * @refill_time ms, continuously; it starts full. The one-time burst is
 * spent first and never comes back. A request larger than the bucket
 * passes when the bucket is full and leaves it in debt (negative), paid
 * off by the refill before anything else passes: a bucket smaller than a
 * device's biggest request slows it, never blocks it for good.
 */
#ifndef CUBICLE_RATELIMIT_H
#define CUBICLE_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

struct tb_cfg {
	uint64_t size;           /* tokens; 0: this bucket does not limit */
	uint64_t one_time_burst; /* tokens on top, once */
	uint64_t refill_time_ms; /* from empty to full; > 0 when size is */
};

struct rl_cfg {
	struct tb_cfg bandwidth, ops;
};

struct tbucket {
	struct tb_cfg cfg;
	__int128 budget;   /* tokens × refill_time_us: exact refills; negative: debt */
	uint64_t burst;    /* one-time burst left */
	uint64_t last_us;  /* the budget is as of then */
};

struct rate_limiter {
	struct tbucket bw, ops;
};

#define RL_SIZE_MAX    (1ull << 50) /* tokens a bucket may hold */
#define RL_REFILL_MAX  (1ull << 32) /* ms: about 50 days */

/* Check @cfg; NULL if sound, else what is wrong (a static string). */
const char *rl_cfg_check(const struct rl_cfg *cfg);
/* A limiter with @cfg (checked), full, as of @now_us. */
void rl_init(struct rate_limiter *rl, const struct rl_cfg *cfg, uint64_t now_us);
/* New settings, at run time: the buckets start full again (Firecracker
 * does the same on an update). */
void rl_update(struct rate_limiter *rl, const struct rl_cfg *cfg, uint64_t now_us);
/* Does this limiter limit anything? */
bool rl_active(const struct rate_limiter *rl);
/*
 * Take @bytes and @ops (one request) at @now_us: true if both buckets had
 * them (both are charged), else false with neither charged and *@wait_us
 * set to how long until they will (at least 1).
 */
bool rl_take(struct rate_limiter *rl, uint64_t bytes, uint64_t ops, uint64_t now_us,
	     uint64_t *wait_us);
/* Give back tokens taken for a request that did not happen after all. */
void rl_refund(struct rate_limiter *rl, uint64_t bytes, uint64_t ops);

/*
 * The handle devices hold (a CUB_P_RATELIMIT slot): a limiter, its lock,
 * the monotonic clock. Lives in the instance's config arena.
 */
struct arena;
struct cub_rl;

struct cub_rl *cub_rl_new(struct arena *ar, const struct rl_cfg *cfg);
/* h->virtio->rl_take: *@wait_us capped at RL_WAIT_MAX_US. */
bool cub_rl_take(struct cub_rl *rl, uint64_t bytes, uint64_t ops, uint64_t *wait_us);
/* h->virtio->rl_charge: debt allowed; negative gives back (up to full). */
void cub_rl_charge(struct cub_rl *rl, int64_t bytes, int64_t ops);
/* New settings (checked), at once: the control API's PATCH. */
void cub_rl_set(struct cub_rl *rl, const struct rl_cfg *cfg);
void cub_rl_get(struct cub_rl *rl, struct rl_cfg *cfg);

#define RL_WAIT_MAX_US 100000

#endif
