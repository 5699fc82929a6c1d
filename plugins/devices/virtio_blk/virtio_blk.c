/* SPDX-License-Identifier: Apache-2.0 */
/* The virtio-blk device plugin: a disk on a storage backend, served on the
 * thread that delivers the guest's kick. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cubicle/plugin.h>
#include <cubicle/storage.h>
#include <cubicle/virtio.h>

#include "virtio_blk_req.h"

/*
 * The thread that delivers the kick drains the queue itself. With ioeventfd
 * that is the event-loop thread, as Firecracker's synchronous engine does:
 * no thread hop per request, and worker threads only where a backend needs
 * them (doc/plugin-guide.md, "Lifecycle and threads"). A kick that arrives
 * while another thread drains only sets ST_KICKED, and the draining thread
 * hands the queue back to the event loop when it is done. Who drains is
 * decided by a compare-and-swap on the queue's state word, taken and given
 * back without a lock: a request costs no mutex; start and stop still take
 * the queue's lock, and a stop waits on its condition variable.
 *
 * (An `iothread = true` parameter once served each queue on a worker
 * thread instead. The wake-up of that thread and the one back cost more than
 * the read they carried: a 4 KiB read from the page cache ran at 0.09-0.15x
 * of pread against 0.9x inline, so it went; backends that do slow work keep
 * their own helpers, as zstd-snap's read-ahead does.)
 *
 * A wake-up does at most BUDGET_REQS requests or BUDGET_BYTES of data (a
 * request larger than that is carried over, XFER_CHUNK at a time), then
 * yields by writing the queue's kick_fd, which the event loop watches, so
 * other events get their turn before the queue is served again. It yields
 * only when the ring holds more: the chain that would overrun the budget is
 * held, popped, for the next turn. A guest that keeps its avail ring full
 * can then slow this disk, never deafen the VMM. stop() makes the drain
 * finish the chunk in hand and return (the request in hand is abandoned:
 * the device is being reset or destroyed); a reset waits at most for one
 * backend call of XFER_CHUNK per queue.
 */

#define VIRTIO_ID_BLOCK 2

#define VIRTIO_BLK_F_SEG_MAX	  2
#define VIRTIO_BLK_F_RO		  5
#define VIRTIO_BLK_F_BLK_SIZE	  6
#define VIRTIO_BLK_F_FLUSH	  9
#define VIRTIO_BLK_F_MQ		  12
#define VIRTIO_BLK_F_DISCARD	  13
#define VIRTIO_BLK_F_WRITE_ZEROES 14

#define QUEUE_MAX	256
#define SEG_MAX		(QUEUE_MAX - 2) /* header and status take two descriptors */
#define MAX_QUEUES	16
#define DWZ_MAX_SECTORS	0x3fffffu /* 2 GiB per discard / write-zeroes segment */
#define BATCH_NOTIFY	32        /* interrupt at least every this many completions */
#define BUDGET_REQS	64        /* requests per wake-up, then yield */
#define BUDGET_BYTES	(1u << 20) /* data bytes per wake-up, then yield */
#define XFER_CHUNK	(1u << 20) /* data bytes per backend call */

/* struct virtio_blk_config, up to and including write_zeroes_may_unmap. */
enum {
	CFG_CAPACITY = 0, CFG_SEG_MAX = 12, CFG_BLK_SIZE = 20, CFG_NUM_QUEUES = 34,
	CFG_MAX_DISCARD_SECTORS = 36, CFG_MAX_DISCARD_SEG = 40, CFG_DISCARD_ALIGN = 44,
	CFG_MAX_WZ_SECTORS = 48, CFG_MAX_WZ_SEG = 52, CFG_WZ_MAY_UNMAP = 56,
	CFG_SIZE = 60,
};

struct blk_cfg {
	const char *backend; /* the storage plugin's name; the host opens it */
	bool read_only;
	const char *serial;
	int64_t num_queues;
	bool root;
	struct cub_rl *rl;
};

/* A queue's state word. */
enum {
	ST_RUNNING = 1u,   /* started: a kick may drain it */
	ST_DRAINING = 2u,  /* a thread is in blk_drain; only it uses the ring */
	ST_KICKED = 4u,    /* a kick came: the drainer hands the queue back when done */
	ST_QUIT = 8u,      /* stopping: finish the chunk in hand and return */
	ST_STOPWAIT = 16u, /* a stop waits on cond for ST_DRAINING to go off */
};

struct blk;

struct blk_queue {
	struct blk *b;
	struct cub_vq *vq;
	pthread_mutex_t lock; /* start and stop */
	pthread_cond_t cond;  /* ST_DRAINING went off while a stop waits */
	_Atomic unsigned st;  /* ST_*: read and changed without the lock */
	int kick_fd;          /* eventfd re-arming a drain that used its budget */
	int rl_fd;            /* with a rate limiter: timerfd, tokens are due */
	uint64_t rl_wait_us;  /* the request in hand waits this long for tokens (0: not) */
	bool charged;         /* the request in hand has its tokens */
	/* Owned by the draining thread: */
	bool inflight;        /* req is being carried over from a previous wake-up */
	bool held;            /* chain was popped by a wake-up out of budget: begin it next */
	uint64_t xfer_done;   /* bytes of req already moved */
	uint32_t written;     /* bytes written into the chain so far (status included) */
	unsigned pushed;      /* completions since the last notify */
	struct cub_vq_chain chain;
	struct blk_req req;
	struct iovec win[CUB_VQ_MAX_SEGS]; /* the chunk of req->iov in hand */
};

struct blk {
	struct cub_inst *in;
	const struct cub_host *h;
	struct cub_storage *disk;
	struct cub_virtio_ops vops; /* per instance (n_queues); never written after add */
	uint8_t config[CFG_SIZE];
	uint64_t offered;
	_Atomic uint64_t acked;
	struct blk_limits lim;      /* set by start, read by workers */
	uint8_t id[BLK_ID_BYTES];
	unsigned n_queues;
	struct cub_rl *rl;          /* the host's limiter; NULL: none (an older host) */
	struct blk_queue *q;
	pthread_mutex_t lock;       /* start and stop */
};

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- requests ---- */

/* A request without data to carry over: returns the status, adds data bytes
 * to *written. */
static uint8_t blk_execute(struct blk *b, struct blk_req *r, uint32_t *written)
{
	const struct cub_storage_ops *o = b->disk->ops;
	void *dp = b->disk->priv;
	uint64_t left;

	switch (r->type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		return VIRTIO_BLK_S_OK; /* nothing to move (else blk_step does it) */
	case VIRTIO_BLK_T_FLUSH: /* offered only when the backend can flush */
		if (!b->disk->info.can_flush)
			return VIRTIO_BLK_S_UNSUPP;
		return o->flush(dp) ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_GET_ID:
		left = r->len;
		for (int i = 0; i < r->n_iov; i++) {
			memcpy(r->iov[i].iov_base, b->id + (r->len - left), r->iov[i].iov_len);
			left -= r->iov[i].iov_len;
		}
		*written += (uint32_t)r->len;
		return VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_DISCARD:
		for (unsigned i = 0; i < r->n_ranges; i++) {
			int err = o->discard(dp, r->ranges[i].sector * BLK_SECTOR,
					     (uint64_t)r->ranges[i].num_sectors * BLK_SECTOR);

			/* Discard is a hint: a backend that cannot drop blocks did its job. */
			if (err && err != -EOPNOTSUPP)
				return VIRTIO_BLK_S_IOERR;
		}
		return VIRTIO_BLK_S_OK;
	}
	return VIRTIO_BLK_S_UNSUPP;
}

static void blk_failed(struct blk_queue *q)
{
	q->b->h->log_ratelimited(q->b->in, CUB_LOG_WARN, "%s: request type %u sector %llu failed",
				 q->b->disk->name, q->req.type, (unsigned long long)q->req.sector);
}

/* Give the chain in hand back with status @st. */
static void blk_complete(struct blk_queue *q, uint8_t st)
{
	const struct cub_virtio_host *v = q->b->h->virtio;

	*q->req.status = st;
	v->push(q->vq, &q->chain, q->written);
	q->inflight = false;
	if (++q->pushed % BATCH_NOTIFY == 0)
		v->notify(q->vq);
}

static uint64_t wz_total(const struct blk_req *r)
{
	uint64_t t = 0;

	for (unsigned i = 0; i < r->n_ranges; i++)
		t += (uint64_t)r->ranges[i].num_sectors * BLK_SECTOR;
	return t;
}

/* Requests that move data (or write zeroes over ranges) are carried over. */
static bool blk_carried(const struct blk_req *r)
{
	if (r->type == VIRTIO_BLK_T_IN || r->type == VIRTIO_BLK_T_OUT)
		return r->len != 0;
	return r->type == VIRTIO_BLK_T_WRITE_ZEROES && wz_total(r) != 0;
}

/* Take a fresh chain: false if it was malformed (the device is now broken). */
static bool blk_begin(struct blk_queue *q)
{
	struct blk *b = q->b;
	struct blk_req *r = &q->req;
	uint8_t st;

	q->written = 1; /* the status byte */
	if (blk_parse(&q->chain, &b->lim, r) < 0) {
		b->h->virtio->broken(b->in, r->why);
		return false;
	}
	if (r->verdict == BLK_STATUS) {
		b->h->log_ratelimited(b->in, r->status_val == VIRTIO_BLK_S_UNSUPP ?
				      CUB_LOG_DEBUG : CUB_LOG_WARN,
				      "request type %u sector %llu: %s", r->type,
				      (unsigned long long)r->sector, r->why);
		blk_complete(q, r->status_val);
		return true;
	}
	if (blk_carried(r)) {
		q->inflight = true; /* blk_step moves it, a chunk at a time */
		q->charged = false;
		q->xfer_done = 0;
		return true;
	}
	st = blk_execute(b, r, &q->written);
	if (st != VIRTIO_BLK_S_OK)
		blk_failed(q);
	blk_complete(q, st);
	return true;
}

/* dst = bytes [skip, skip + len) of src; returns the segment count. */
static int iov_window(const struct iovec *src, int n, uint64_t skip, uint64_t len,
		      struct iovec *dst)
{
	int k = 0;

	for (int i = 0; i < n && len; i++) {
		uint64_t l = src[i].iov_len, c;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		c = l - skip < len ? l - skip : len;
		dst[k].iov_base = (uint8_t *)src[i].iov_base + skip;
		dst[k++].iov_len = (size_t)c;
		len -= c;
		skip = 0;
	}
	return k;
}

/* Zero up to @n bytes at byte @pos of the request's ranges taken end to
 * end, stopping at a range's end: the bytes done, or -errno. The host
 * falls back to writing zero buffers for a backend without write_zeroes. */
static int64_t wz_step(struct blk *b, const struct blk_req *r, uint64_t pos, uint64_t n)
{
	for (unsigned i = 0; i < r->n_ranges; i++) {
		const struct blk_range *g = &r->ranges[i];
		uint64_t glen = (uint64_t)g->num_sectors * BLK_SECTOR;
		int err;

		if (pos >= glen) {
			pos -= glen;
			continue;
		}
		if (n > glen - pos)
			n = glen - pos;
		err = b->h->storage->write_zeroes(b->disk, g->sector * BLK_SECTOR + pos, n,
						  g->flags & VIRTIO_BLK_WZ_FLAG_UNMAP);
		return err ? err : (int64_t)n;
	}
	return -EIO;
}

/* Move up to @max bytes (at most XFER_CHUNK) of the request in hand;
 * complete it when done or failed. Returns the bytes it accounted for. */
static uint64_t blk_step(struct blk_queue *q, uint64_t max)
{
	struct blk *b = q->b;
	const struct cub_storage_ops *o = b->disk->ops;
	struct blk_req *r = &q->req;
	bool wz = r->type == VIRTIO_BLK_T_WRITE_ZEROES;
	uint64_t total = wz ? wz_total(r) : r->len, n = total - q->xfer_done;
	uint64_t off = r->sector * BLK_SECTOR + q->xfer_done;
	int64_t got;
	int k;

	if (n > max)
		n = max;
	if (n > XFER_CHUNK)
		n = XFER_CHUNK;
	if (wz) {
		got = wz_step(b, r, q->xfer_done, n);
		if (got > 0)
			n = (uint64_t)got; /* it stops at a range's end */
	} else {
		k = iov_window(r->iov, r->n_iov, q->xfer_done, n, q->win);
		got = r->type == VIRTIO_BLK_T_IN ? o->readv(b->disk->priv, off, q->win, k) :
		      o->writev(b->disk->priv, off, q->win, k);
	}
	if (got != (int64_t)n) {
		blk_failed(q);
		blk_complete(q, VIRTIO_BLK_S_IOERR);
		return n;
	}
	q->xfer_done += n;
	if (q->xfer_done == total) {
		if (r->type == VIRTIO_BLK_T_IN)
			q->written += (uint32_t)r->len;
		blk_complete(q, VIRTIO_BLK_S_OK);
	}
	return n ? n : 1;
}

static bool quitting(struct blk_queue *q)
{
	return atomic_load_explicit(&q->st, memory_order_acquire) & ST_QUIT;
}

/* The rate limiter's say on the request in hand (data requests only:
 * their bytes and one op): false if it must wait q->rl_wait_us. */
static bool blk_charge(struct blk_queue *q)
{
	const struct blk_req *r = &q->req;

	if (q->charged || !q->b->rl)
		return true;
	if (!q->b->h->virtio->rl_take(q->b->rl, r->type == VIRTIO_BLK_T_WRITE_ZEROES ? 0 : r->len, 1,
				      &q->rl_wait_us))
		return false;
	q->charged = true;
	return true;
}

/* One wake-up's work. Returns true when the budget ran out with work
 * possibly left: the caller must come back. With q->rl_wait_us set, the
 * request in hand waits for the rate limiter: come back after that. */
static bool blk_drain(struct blk_queue *q)
{
	const struct cub_virtio_host *v = q->b->h->virtio;
	unsigned reqs = 0;
	uint64_t bytes = 0;
	bool more = false;

	q->pushed = 0;
	q->rl_wait_us = 0;
	while (!quitting(q)) {
		if (!q->inflight) {
			if (!q->held && v->pop(q->vq, &q->chain) != 1)
				break;
			q->held = false;
			if (reqs >= BUDGET_REQS || bytes >= BUDGET_BYTES) {
				q->held = true; /* there is more: the next turn begins it */
				more = true;
				break;
			}
			reqs++;
			if (!blk_begin(q))
				break;
			if (!q->inflight)
				continue;
		} else if (bytes >= BUDGET_BYTES) {
			more = true;
			break;
		}
		if (!blk_charge(q))
			break;
		bytes += blk_step(q, BUDGET_BYTES - bytes);
	}
	if (q->pushed % BATCH_NOTIFY)
		v->notify(q->vq);
	return more;
}

/* ---- virtio ops ---- */

static uint64_t blk_features(void *priv)
{
	return ((struct blk *)priv)->offered;
}

static int blk_set_features(void *priv, uint64_t f)
{
	struct blk *b = priv;

	atomic_store(&b->acked, f & b->offered);
	return 0;
}

static void blk_config_read(void *priv, uint32_t off, void *buf, uint32_t len)
{
	struct blk *b = priv;

	if (off > CFG_SIZE || len > CFG_SIZE - off) { /* the host checked; belt and braces */
		memset(buf, 0, len);
		return;
	}
	memcpy(buf, b->config + off, len);
}

static void queue_stop(struct blk_queue *q)
{
	pthread_mutex_lock(&q->lock);
	/* Wait for a draining thread to put back its request: it sees
	 * ST_STOPWAIT and turns ST_DRAINING off under this lock. */
	atomic_fetch_or(&q->st, ST_QUIT | ST_STOPWAIT);
	while (atomic_load(&q->st) & ST_DRAINING)
		pthread_cond_wait(&q->cond, &q->lock);
	if (q->rl_fd >= 0) /* tokens no request waits for any more */
		timerfd_settime(q->rl_fd, 0, &(struct itimerspec){ 0 }, NULL);
	atomic_store(&q->st, ST_QUIT); /* stopped: no one drains until a start */
	q->inflight = false;
	q->held = false; /* the reset clears the ring it came from */
	q->vq = NULL;
	pthread_mutex_unlock(&q->lock);
}

static void blk_stop(void *priv)
{
	struct blk *b = priv;

	pthread_mutex_lock(&b->lock);
	for (unsigned i = 0; i < b->n_queues; i++)
		queue_stop(&b->q[i]);
	pthread_mutex_unlock(&b->lock);
}

static void blk_notify(void *priv, unsigned qi);

static int blk_start(void *priv, struct cub_vq *const *vqs, unsigned n)
{
	struct blk *b = priv;
	uint64_t f = atomic_load(&b->acked);

	b->lim.discard = f & (1ull << VIRTIO_BLK_F_DISCARD);
	b->lim.write_zeroes = f & (1ull << VIRTIO_BLK_F_WRITE_ZEROES);
	pthread_mutex_lock(&b->lock);
	for (unsigned i = 0; i < b->n_queues && i < n; i++) {
		struct blk_queue *q = &b->q[i];

		if (!vqs[i])
			continue;
		pthread_mutex_lock(&q->lock);
		if (!(atomic_load(&q->st) & ST_RUNNING)) {
			q->vq = vqs[i];
			/* kicked: buffers may already be waiting */
			atomic_store(&q->st, ST_RUNNING | ST_KICKED);
		}
		pthread_mutex_unlock(&q->lock);
	}
	pthread_mutex_unlock(&b->lock);
	for (unsigned i = 0; i < b->n_queues && i < n; i++)
		if (vqs[i])
			blk_notify(b, i);
	return 0;
}

/* Ask the event loop to come back to this queue. */
static void rearm(struct blk_queue *q)
{
	uint64_t one = 1;

	if (write(q->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		q->b->h->log_ratelimited(q->b->in, CUB_LOG_ERR, "cannot re-arm a queue: %s",
					 strerror(errno));
}

/*
 * One budget's worth on this thread unless another one is draining (then
 * ST_KICKED tells that one to come back). Work left over, or a kick that
 * came meanwhile, goes back to the event loop through kick_fd: this call is
 * bounded whoever keeps kicking. The queue's fds are written only while
 * ST_DRAINING is on: a stop waits for it to go off before it disarms the
 * timer, and the device closes them only after a stop.
 */
static void drain_inline(struct blk_queue *q)
{
	unsigned s = atomic_load(&q->st);
	bool more;

	for (;;) {
		if ((s & (ST_RUNNING | ST_DRAINING | ST_QUIT)) != ST_RUNNING) {
			/* stopped, or another thread drains: it will see the mark */
			s = atomic_fetch_or(&q->st, ST_KICKED) | ST_KICKED;
			if ((s & (ST_RUNNING | ST_DRAINING | ST_QUIT)) != ST_RUNNING)
				return;
			continue; /* that drain ended meanwhile: take the queue */
		}
		if (atomic_compare_exchange_strong(&q->st, &s, (s | ST_DRAINING) & ~ST_KICKED))
			break;
	}
	more = blk_drain(q);
	if (q->rl_wait_us && !quitting(q)) {
		/* The request in hand waits for tokens: the timer brings it back. */
		struct itimerspec it = { .it_value = { .tv_sec = (time_t)(q->rl_wait_us / 1000000),
						       .tv_nsec = (long)(q->rl_wait_us % 1000000) * 1000 } };

		timerfd_settime(q->rl_fd, 0, &it, NULL);
	}
	s = atomic_load(&q->st);
	for (;;) {
		if (s & ST_STOPWAIT) { /* a stop waits: off under its lock, and tell it */
			pthread_mutex_lock(&q->lock);
			atomic_fetch_and(&q->st, ~(ST_DRAINING | ST_KICKED));
			pthread_cond_broadcast(&q->cond);
			pthread_mutex_unlock(&q->lock);
			return;
		}
		if (!q->rl_wait_us && (more || (s & ST_KICKED))) {
			rearm(q); /* while ST_DRAINING is on: kick_fd is still open */
			more = false;
		}
		/* fails when a kick or a stop came since s was read: look again */
		if (atomic_compare_exchange_strong(&q->st, &s, s & ~(ST_DRAINING | ST_KICKED)))
			return;
	}
}

/* rl_fd fired: the rate limiter's tokens are due. */
static void blk_rl_due(void *arg)
{
	struct blk_queue *q = arg;
	uint64_t n;

	if (read(q->rl_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	drain_inline(q);
}

/* kick_fd fired: the event loop's turn came round again. */
static void blk_rearmed(void *arg)
{
	struct blk_queue *q = arg;
	uint64_t n;

	if (read(q->kick_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	drain_inline(q);
}

static void blk_notify(void *priv, unsigned qi)
{
	struct blk *b = priv;
	struct blk_queue *q;

	if (qi >= b->n_queues)
		return;
	q = &b->q[qi];
	drain_inline(q);
}

/* ---- lifecycle ---- */

static void blk_free(struct blk *b)
{
	if (b->q) {
		blk_stop(b);
		for (unsigned i = 0; i < b->n_queues; i++) {
			if (b->q[i].kick_fd >= 0) {
				b->h->fd_unwatch(b->in, b->q[i].kick_fd);
				close(b->q[i].kick_fd);
			}
			if (b->q[i].rl_fd >= 0) {
				b->h->fd_unwatch(b->in, b->q[i].rl_fd);
				close(b->q[i].rl_fd);
			}
			pthread_mutex_destroy(&b->q[i].lock);
			pthread_cond_destroy(&b->q[i].cond);
		}
	}
	if (b->disk)
		b->h->storage->close(b->in, b->disk);
	pthread_mutex_destroy(&b->lock);
	free(b->q);
	free(b);
}

static void blk_setup_config(struct blk *b, bool ro)
{
	const struct cub_storage_info *i = &b->disk->info;
	const struct cub_storage_ops *o = b->disk->ops;

	b->lim.capacity = i->size / BLK_SECTOR;
	b->lim.read_only = ro;
	b->offered = 1ull << VIRTIO_BLK_F_SEG_MAX | 1ull << VIRTIO_BLK_F_BLK_SIZE;
	if (i->can_flush)
		b->offered |= 1ull << VIRTIO_BLK_F_FLUSH;
	if (ro)
		b->offered |= 1ull << VIRTIO_BLK_F_RO;
	if (b->n_queues > 1)
		b->offered |= 1ull << VIRTIO_BLK_F_MQ;
	put_le(b->config + CFG_CAPACITY, b->lim.capacity, 8);
	put_le(b->config + CFG_SEG_MAX, SEG_MAX, 4);
	put_le(b->config + CFG_BLK_SIZE, i->block_size, 4);
	put_le(b->config + CFG_NUM_QUEUES, b->n_queues, 2);
	if (!ro && i->can_discard && o->discard) {
		b->offered |= 1ull << VIRTIO_BLK_F_DISCARD;
		b->lim.max_discard_sectors = DWZ_MAX_SECTORS;
		b->lim.max_discard_seg = BLK_MAX_RANGES;
		put_le(b->config + CFG_MAX_DISCARD_SECTORS, DWZ_MAX_SECTORS, 4);
		put_le(b->config + CFG_MAX_DISCARD_SEG, BLK_MAX_RANGES, 4);
		put_le(b->config + CFG_DISCARD_ALIGN, i->block_size / BLK_SECTOR, 4);
	}
	if (!ro && (i->can_write_zeroes || !o->write_zeroes)) {
		b->offered |= 1ull << VIRTIO_BLK_F_WRITE_ZEROES;
		b->lim.max_write_zeroes_sectors = DWZ_MAX_SECTORS;
		b->lim.max_write_zeroes_seg = BLK_MAX_RANGES;
		put_le(b->config + CFG_MAX_WZ_SECTORS, DWZ_MAX_SECTORS, 4);
		put_le(b->config + CFG_MAX_WZ_SEG, BLK_MAX_RANGES, 4);
		b->config[CFG_WZ_MAY_UNMAP] = i->can_discard && o->write_zeroes;
	}
}

static int blk_create(struct cub_inst *in, const struct cub_host *h, const void *cfgp,
		      void **priv)
{
	const struct blk_cfg *cfg = cfgp;
	size_t serial_len = cfg->serial ? strlen(cfg->serial) : 0;
	struct blk *b;
	bool ro;
	int err;

	if (serial_len > BLK_ID_BYTES)
		return h->fail(in, -EINVAL, "serial \"%s\" is %zu bytes; at most %u", cfg->serial,
			       serial_len, BLK_ID_BYTES);
	if (!CUB_HOST_HAS(h, virtio) || !CUB_HOST_HAS(h, storage) ||
	    !CUB_STORAGE_HOST_HAS(h->storage, write_zeroes))
		return h->fail(in, -ENOTSUP, "this host offers no virtio or storage services");
	b = calloc(1, sizeof(*b));
	if (!b)
		return h->fail(in, -ENOMEM, "out of memory");
	b->in = in;
	b->h = h;
	b->n_queues = (unsigned)cfg->num_queues;
	b->rl = CUB_VIRTIO_HAS_RL(h->virtio) ? cfg->rl : NULL;
	pthread_mutex_init(&b->lock, NULL);
	memcpy(b->id, cfg->serial ? cfg->serial : "", serial_len); /* NUL-padded by calloc */
	b->q = calloc(b->n_queues, sizeof(*b->q));
	if (!b->q) {
		free(b);
		return h->fail(in, -ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < b->n_queues; i++) {
		b->q[i].b = b;
		b->q[i].kick_fd = -1;
		b->q[i].rl_fd = -1;
		pthread_mutex_init(&b->q[i].lock, NULL);
		pthread_cond_init(&b->q[i].cond, NULL);
	}
	for (unsigned i = 0; i < b->n_queues; i++) {
		b->q[i].kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		err = b->q[i].kick_fd < 0 ? -errno :
		      h->fd_watch(in, b->q[i].kick_fd, EPOLLIN, blk_rearmed, &b->q[i]);
		if (err) {
			h->fail(in, err, "queue %u: cannot make its re-arm eventfd: %s", i,
				strerror(-err));
			goto fail;
		}
		if (!b->rl)
			continue;
		b->q[i].rl_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		err = b->q[i].rl_fd < 0 ? -errno :
		      h->fd_watch(in, b->q[i].rl_fd, EPOLLIN, blk_rl_due, &b->q[i]);
		if (err) {
			h->fail(in, err, "queue %u: cannot make its rate limiter timer: %s", i,
				strerror(-err));
			goto fail;
		}
	}
	/* The reason is already recorded on failure (file:line, backend name). */
	err = h->storage->open(in, "backend", cfg->read_only, &b->disk);
	if (err)
		goto fail;
	ro = cfg->read_only || b->disk->info.read_only;
	blk_setup_config(b, ro);
	b->vops = (struct cub_virtio_ops){
		.device_id = VIRTIO_ID_BLOCK,
		.n_queues = (uint16_t)b->n_queues,
		.queue_max = QUEUE_MAX,
		.config_size = CFG_SIZE,
		.features = blk_features,
		.set_features = blk_set_features,
		.config_read = blk_config_read,
		.start = blk_start,
		.notify = blk_notify,
		.stop = blk_stop,
	};
	err = h->virtio->add(in, &b->vops, b);
	if (err)
		goto fail;
	h->log(in, cfg->root ? CUB_LOG_INFO : CUB_LOG_DEBUG, "%s%s: %llu MiB%s, %u queue%s",
	       cfg->root ? "root disk " : "", b->disk->name,
	       (unsigned long long)(b->disk->info.size >> 20), ro ? ", read-only" : "",
	       b->n_queues, b->n_queues == 1 ? "" : "s");
	*priv = b;
	return 0;
fail:
	blk_free(b);
	return err;
}

static void blk_destroy(void *priv)
{
	blk_free(priv);
}

static const struct cub_param blk_params[] = {
	{ .name = "backend", .type = CUB_P_STORAGE, .offset = offsetof(struct blk_cfg, backend),
	  .doc = "the disk: a storage backend group, e.g. { type = \"raw\"; path = \"disk.img\"; }" },
	{ .name = "read_only", .type = CUB_P_BOOL, .offset = offsetof(struct blk_cfg, read_only),
	  .def = "false", .doc = "the guest sees a read-only disk (VIRTIO_BLK_F_RO)" },
	{ .name = "serial", .type = CUB_P_STR, .offset = offsetof(struct blk_cfg, serial),
	  .def = "", .doc = "device ID string the guest reads (GET_ID), up to 20 bytes" },
	{ .name = "num_queues", .type = CUB_P_INT, .offset = offsetof(struct blk_cfg, num_queues),
	  .def = "1", .min = "1", .max = "16", .doc = "request queues (VIRTIO_BLK_F_MQ)" },
	{ .name = "root", .type = CUB_P_BOOL, .offset = offsetof(struct blk_cfg, root),
	  .def = "false", .doc = "this is the guest's root disk" },
	{ .name = "rate_limiter", .type = CUB_P_RATELIMIT, .offset = offsetof(struct blk_cfg, rl),
	  .def = "", .doc = "Firecracker-style limiter: bandwidth (bytes read or written), ops (requests)" },
};

/* Snapshots: no state of its own; the host saves its queues. */
static const struct cub_device_ops blk_ops = {
	.create = blk_create,
	.destroy = blk_destroy,
	.state_version = CUB_STATE_VERSION(1, 0),
	.save = cub_state_none_save,
	.load = cub_state_none_load,
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(6),
	.kind = CUB_KIND_DEVICE,
	.name = "virtio-blk",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "virtio block device on a storage backend (backend = { type = \"raw\"; ... })",
	.cfg_size = sizeof(struct blk_cfg),
	.params = blk_params,
	.n_params = CUB_ARRAY_SIZE(blk_params),
	.ops = &blk_ops,
});
