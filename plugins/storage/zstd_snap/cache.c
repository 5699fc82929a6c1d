/* SPDX-License-Identifier: Apache-2.0 */
/* zstd-snap: the LRU cache of decompressed base frames, and the read-ahead helpers that fill it. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zseek.h"
#include "zstd_snap.h"

/* ---- the frame cache ---- */

void zs_cache_put(struct zsnap *s, struct slot *sl)
{
	pthread_mutex_lock(&s->cache_lock);
	if (!--sl->refs)
		pthread_cond_broadcast(&s->cache_cond);
	pthread_mutex_unlock(&s->cache_lock);
}

/* The least recently used slot nobody holds (empty ones first), or NULL. */
static struct slot *victim(struct zsnap *s)
{
	struct slot *v = NULL;

	for (unsigned i = 0; i < s->n_slots; i++) {
		struct slot *sl = &s->slots[i];

		if (sl->refs || sl->state == SLOT_LOADING || sl->state == SLOT_QUEUED)
			continue;
		if (sl->state == SLOT_EMPTY)
			return sl;
		if (!v || sl->used < v->used)
			v = sl;
	}
	return v;
}

static int32_t *chain(struct zsnap *s, uint32_t frame)
{
	return &s->bucket[(frame * 2654435761u) & s->bucket_mask];
}

static struct slot *find(struct zsnap *s, uint32_t frame)
{
	for (int32_t k = *chain(s, frame); k >= 0; k = s->slots[k].next)
		if (s->slots[k].frame == frame)
			return &s->slots[k];
	return NULL;
}

/* Take @sl out of the index (it becomes EMPTY). */
static void slot_clear(struct zsnap *s, struct slot *sl)
{
	int32_t me = (int32_t)(sl - s->slots);

	if (sl->state == SLOT_EMPTY)
		return;
	for (int32_t *k = chain(s, sl->frame); *k >= 0; k = &s->slots[*k].next)
		if (*k == me) {
			*k = sl->next;
			break;
		}
	sl->state = SLOT_EMPTY;
}

/* Give @sl (EMPTY, or READY and unheld) to @frame in @state. */
static void slot_assign(struct zsnap *s, struct slot *sl, uint32_t frame, enum slot_state state)
{
	int32_t *head = chain(s, frame);

	slot_clear(s, sl);
	sl->frame = frame;
	sl->state = state;
	sl->next = *head;
	*head = (int32_t)(sl - s->slots);
}

/* Decompress frame @i into slot @sl (marked LOADING, held); cache lock not held. */
static int load(struct zsnap *s, struct slot *sl, uint32_t i, struct zseek_dctx **dc)
{
	char why[256];
	int err;

	if (!sl->buf && !(sl->buf = malloc(s->z.frame_max ? s->z.frame_max : 1)))
		return -ENOMEM;
	if (!*dc && !(*dc = zseek_dctx_new()))
		return -ENOMEM;
	err = zseek_frame_read(&s->z, *dc, i, sl->buf, why, sizeof(why));
	if (err)
		s->h->log_ratelimited(s->in, CUB_LOG_ERR, "base %s: %s: reads of those disk bytes fail with EIO",
				      s->base_path, why);
	return err;
}

/*
 * Decompress frame @i into @sl, which the caller has marked LOADING. Called
 * and returns with cache_lock held (dropped while decompressing); the slot
 * ends READY, or EMPTY on an error (returned as -errno).
 */
static int fill(struct zsnap *s, struct slot *sl, uint32_t i)
{
	struct zseek_dctx *dc = s->n_dctx ? s->dctx[--s->n_dctx] : NULL;
	int err;

	pthread_mutex_unlock(&s->cache_lock);
	err = load(s, sl, i, &dc);
	pthread_mutex_lock(&s->cache_lock);
	if (dc && s->n_dctx < s->n_slots + MAX_RA_THREADS)
		s->dctx[s->n_dctx++] = dc;
	else
		zseek_dctx_free(dc);
	if (err)
		slot_clear(s, sl);
	else
		sl->state = SLOT_READY;
	sl->used = ++s->tick;
	pthread_cond_broadcast(&s->cache_cond);
	return err;
}

/* Hold decompressed frame @i: 0 and *out (release with zs_cache_put), or
 * -errno. Unless @wait, a frame another thread is decompressing is
 * -EINPROGRESS at once. */
int zs_cache_get(struct zsnap *s, uint32_t i, struct slot **out, bool wait)
{
	struct slot *sl;
	int err;

	pthread_mutex_lock(&s->cache_lock);
	for (;;) {
		sl = find(s, i);
		if (sl && sl->state == SLOT_READY) {
			sl->refs++;
			sl->used = ++s->tick;
			pthread_mutex_unlock(&s->cache_lock);
			*out = sl;
			return 0;
		}
		if (sl && sl->state == SLOT_QUEUED)
			break; /* queued for a helper: decompress it here instead */
		if (!sl && (sl = victim(s)))
			break;
		if (!wait && sl && sl->state == SLOT_LOADING) {
			pthread_mutex_unlock(&s->cache_lock);
			return -EINPROGRESS;
		}
		/* Loading elsewhere, or every slot held for a moment: wait. */
		pthread_cond_wait(&s->cache_cond, &s->cache_lock);
	}
	if (sl->state == SLOT_QUEUED)
		sl->state = SLOT_LOADING;
	else
		slot_assign(s, sl, i, SLOT_LOADING);
	sl->refs = 1;
	err = fill(s, sl, i);
	if (err)
		sl->refs = 0;
	pthread_mutex_unlock(&s->cache_lock);
	if (!err)
		*out = sl;
	return err;
}

/* ---- read-ahead ---- */

/* Forget every queued frame (no helper will take them): cache_lock held. */
static void ra_drain(struct zsnap *s)
{
	for (unsigned k = 0; k < s->n_slots; k++)
		if (s->slots[k].state == SLOT_QUEUED)
			slot_clear(s, &s->slots[k]);
	s->ra_len = 0;
	pthread_cond_broadcast(&s->cache_cond);
}

/* A helper: decompress queued frames until the disk closes. */
static void *ra_worker(void *arg)
{
	struct zsnap *s = arg;
	sigset_t all;
	bool ok;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	ok = !CUB_HOST_HAS(s->h, thread_enter) || !s->h->thread_enter(s->in, "zstd-readahead");
	pthread_mutex_lock(&s->cache_lock);
	if (!ok) {
		/* The host has said why; the others (if any) go on. */
		if (!--s->ra_threads)
			ra_drain(s);
	}
	while (ok && !s->ra_quit) {
		struct slot *sl;
		uint32_t f;

		if (!s->ra_len) {
			pthread_cond_wait(&s->ra_cond, &s->cache_lock);
			continue;
		}
		f = s->ra_q[s->ra_head];
		s->ra_head = (s->ra_head + 1) % s->n_slots;
		s->ra_len--;
		sl = find(s, f);
		if (!sl || sl->state != SLOT_QUEUED)
			continue; /* a reader took it */
		sl->state = SLOT_LOADING;
		fill(s, sl, f);
	}
	pthread_mutex_unlock(&s->cache_lock);
	return NULL;
}

/* Start the helpers not yet started: false when there are none. cache_lock held. */
static bool ra_start(struct zsnap *s)
{
	while (s->ra_started < s->ra_threads) {
		int err = pthread_create(&s->ra_tid[s->ra_started], NULL, ra_worker, s);

		if (err) {
			s->h->log(s->in, CUB_LOG_WARN, "base %s: cannot start a read-ahead thread (%s); %u run",
				  s->base_path, strerror(err), s->ra_started);
			s->ra_threads = s->ra_started;
			break;
		}
		if (!s->ra_started++)
			s->h->log(s->in, CUB_LOG_INFO, "base %s: a reader went sequential: read-ahead of %u frames on %u threads",
				  s->base_path, s->ra_frames, s->ra_threads);
	}
	return s->ra_threads > 0;
}

/* Queue frames [lo, hi] that are not cached, while half the cache is free
 * for readers: cache_lock held. Returns the first frame not queued. */
static uint32_t ra_queue(struct zsnap *s, uint32_t lo, uint32_t hi)
{
	uint32_t f = lo;
	bool any = false;

	if (hi >= s->z.n_frames)
		hi = s->z.n_frames - 1;
	if (!ra_start(s))
		return lo;
	for (; f <= hi && s->ra_len < s->n_slots / 2; f++) {
		struct slot *v;

		if (find(s, f))
			continue;
		if (!(v = victim(s)))
			break;
		slot_assign(s, v, f, SLOT_QUEUED);
		v->refs = 0;
		s->ra_q[(s->ra_head + s->ra_len++) % s->n_slots] = f;
		any = true;
	}
	if (any)
		pthread_cond_broadcast(&s->ra_cond);
	return f;
}

/*
 * Before a base read of [off, off+len): the frames after its first go to
 * the helpers, and when it starts where the last one ended, up to
 * ra_frames more past its end.
 */
void zs_ra_before(struct zsnap *s, uint64_t off, uint64_t len)
{
	uint32_t first = zseek_frame_of(&s->z, off), last = zseek_frame_of(&s->z, off + len - 1);
	bool seq = atomic_exchange_explicit(&s->ra_next, off + len, memory_order_relaxed) == off;
	uint64_t hi = (uint64_t)last + (seq ? s->ra_frames : 0);
	uint64_t lo = first + 1u;

	if (seq && atomic_load_explicit(&s->ra_upto, memory_order_relaxed) > lo)
		lo = atomic_load_explicit(&s->ra_upto, memory_order_relaxed);
	if (hi < lo || lo >= s->z.n_frames)
		return;
	pthread_mutex_lock(&s->cache_lock);
	if (!s->ra_quit && s->ra_threads)
		atomic_store_explicit(&s->ra_upto, ra_queue(s, (uint32_t)lo, (uint32_t)(hi < UINT32_MAX ? hi : UINT32_MAX)),
				      memory_order_relaxed);
	pthread_mutex_unlock(&s->cache_lock);
}
