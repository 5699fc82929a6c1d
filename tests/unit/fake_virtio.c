/* SPDX-License-Identifier: Apache-2.0 */
/* The fake host's virtio half: fake virtqueues behind ops.virtio and the test's driver side (chains, kicks, start, stop). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fake_host.h"
#include "ratelimit.h"
#include "vq_chain.h"

static struct fake_vq *fvq(struct cub_vq *vq)
{
	return (struct fake_vq *)vq;
}

/* The instance plugins hold is the fake host itself (fake_inst); failures
 * are recorded through its own fail (ops.fail). */
static int fake_virtio_add(struct cub_inst *in, const struct cub_virtio_ops *ops, void *priv)
{
	struct fake_host *fh = (struct fake_host *)in;

	fh->virtio_add_calls++;
	if (fh->virtio_add_err)
		return fh->ops.fail(in, fh->virtio_add_err, "virtio add refused (test knob)");
	if (!ops || !ops->n_queues || ops->n_queues > FAKE_MAX_VQS || !ops->start ||
	    !ops->notify || !ops->stop || !ops->features)
		return fh->ops.fail(in, -EINVAL, "virtio add: bad ops");
	fh->vdev = ops;
	fh->vpriv = priv;
	return 0;
}

static int fake_vq_pop(struct cub_vq *vq, struct cub_vq_chain *c)
{
	struct fake_vq *q = fvq(vq);
	const struct cub_vq_chain *src;
	int ret = 0;

	pthread_mutex_lock(&q->fh->lock);
	q->pops++;
	if (q->pop_err) {
		ret = q->pop_err;
	} else if (q->avail_n) {
		src = q->avail[q->avail_head];
		q->avail_head = (q->avail_head + 1) % FAKE_VQ_LEN;
		q->avail_n--;
		c->head = src->head;
		c->n_out = src->n_out;
		c->n_in = src->n_in;
		c->out_len = src->out_len;
		c->in_len = src->in_len;
		memcpy(c->iov, src->iov, ((size_t)src->n_out + src->n_in) * sizeof(c->iov[0]));
		c->out = c->iov;
		c->in = c->iov + c->n_out;
		ret = 1;
	}
	pthread_mutex_unlock(&q->fh->lock);
	if (!ret && q->empty_pop)
		q->empty_pop(q);
	return ret;
}

/* The chains popped last go back to the front of the available ring. */
static int fake_vq_unpop(struct cub_vq *vq, const uint16_t *heads, unsigned n)
{
	struct fake_vq *q = fvq(vq);
	int ret = 0;

	pthread_mutex_lock(&q->fh->lock);
	for (unsigned j = 0; j < n && !ret; j++) {
		const struct cub_vq_chain *c = q->avail[(q->avail_head + FAKE_VQ_LEN - 1 - j) % FAKE_VQ_LEN];

		if (n > FAKE_VQ_LEN - q->avail_n || !c || c->head != heads[n - 1 - j])
			ret = -EIO;
	}
	if (ret) {
		q->unpop_bad++;
	} else {
		q->unpops += n;
		q->avail_head = (q->avail_head + FAKE_VQ_LEN - n) % FAKE_VQ_LEN;
		q->avail_n += n;
	}
	pthread_mutex_unlock(&q->fh->lock);
	return ret;
}

static void fake_vq_push(struct cub_vq *vq, const struct cub_vq_chain *c, uint32_t written)
{
	struct fake_vq *q = fvq(vq);

	pthread_mutex_lock(&q->fh->lock);
	q->used[q->n_used % FAKE_VQ_LEN].head = c->head;
	q->used[q->n_used % FAKE_VQ_LEN].written = written;
	q->n_used++;
	pthread_cond_broadcast(&q->fh->cond);
	pthread_mutex_unlock(&q->fh->lock);
}

static void fake_vq_push_batch(struct cub_vq *vq, const struct cub_vq_used *u, unsigned n)
{
	struct fake_vq *q = fvq(vq);

	pthread_mutex_lock(&q->fh->lock);
	for (unsigned i = 0; i < n; i++) {
		q->used[q->n_used % FAKE_VQ_LEN].head = u[i].head;
		q->used[q->n_used % FAKE_VQ_LEN].written = u[i].written;
		q->n_used++;
	}
	q->fh->push_batches++;
	pthread_cond_broadcast(&q->fh->cond);
	pthread_mutex_unlock(&q->fh->lock);
}

static uint16_t fake_vq_queue_size(struct cub_vq *vq)
{
	struct fake_vq *q = fvq(vq);

	return q->size ? q->size : FAKE_VQ_LEN;
}

static void fake_vq_notify(struct cub_vq *vq)
{
	struct fake_vq *q = fvq(vq);

	pthread_mutex_lock(&q->fh->lock);
	q->notifies++;
	pthread_mutex_unlock(&q->fh->lock);
}

static void fake_virtio_broken(struct cub_inst *in, const char *why)
{
	struct fake_host *fh = (struct fake_host *)in;

	pthread_mutex_lock(&fh->lock);
	fh->broken_calls++;
	snprintf(fh->broken_why, sizeof(fh->broken_why), "%s", why ? why : "");
	pthread_cond_broadcast(&fh->cond);
	pthread_mutex_unlock(&fh->lock);
}

const struct cub_virtio_host fake_virtio_host = {
	.size = sizeof(struct cub_virtio_host),
	.add = fake_virtio_add,
	.pop = fake_vq_pop,
	.push = fake_vq_push,
	.notify = fake_vq_notify,
	.broken = fake_virtio_broken,
	.push_batch = fake_vq_push_batch,
	.queue_size = fake_vq_queue_size,
	.rl_take = cub_rl_take,
	.rl_charge = cub_rl_charge,
	.unpop = fake_vq_unpop,
};

/* ---- the driver's side: what a test does as the guest ---- */

void fake_chain_init(struct cub_vq_chain *c, uint16_t head)
{
	c->head = head;
	c->n_out = c->n_in = 0;
	c->out_len = c->in_len = 0;
	c->out = c->iov;
	c->in = c->iov;
}

int fake_chain_add(struct cub_vq_chain *c, void *p, size_t len, bool writable)
{
	return vq_chain_add(c, p, len, writable);
}

int fake_vq_add(struct fake_host *fh, unsigned q, const struct cub_vq_chain *c)
{
	struct fake_vq *v = &fh->vqs[q];
	int ret = 0;

	if (q >= FAKE_MAX_VQS)
		return -EINVAL;
	pthread_mutex_lock(&fh->lock);
	if (v->avail_n == FAKE_VQ_LEN)
		ret = -ENOSPC;
	else
		v->avail[(v->avail_head + v->avail_n++) % FAKE_VQ_LEN] = c;
	pthread_mutex_unlock(&fh->lock);
	return ret;
}

int fake_virtio_start(struct fake_host *fh)
{
	struct cub_vq *vqs[FAKE_MAX_VQS];

	if (!fh->vdev)
		return -ENODEV;
	for (unsigned i = 0; i < FAKE_MAX_VQS; i++)
		vqs[i] = (struct cub_vq *)&fh->vqs[i];
	if (fh->vdev->set_features) {
		int err = fh->vdev->set_features(fh->vpriv, fh->vdev->features(fh->vpriv) &
							    ~fh->features_refused);

		if (err)
			return err;
	}
	return fh->vdev->start(fh->vpriv, vqs, fh->vdev->n_queues);
}

void fake_virtio_kick(struct fake_host *fh, unsigned q)
{
	fh->vdev->notify(fh->vpriv, q);
}

uint64_t fake_virtio_config(struct fake_host *fh, uint32_t off, uint32_t len)
{
	uint8_t b[8] = { 0 };
	uint64_t v = 0;

	if (len > sizeof(b))
		len = sizeof(b);
	fh->vdev->config_read(fh->vpriv, off, b, len);
	for (uint32_t i = 0; i < len; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

void fake_virtio_stop(struct fake_host *fh)
{
	fh->vdev->stop(fh->vpriv);
}

bool fake_vq_wait_used(struct fake_host *fh, unsigned q, unsigned n, unsigned timeout_ms)
{
	struct timespec dl;
	unsigned broken;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&fh->lock);
	broken = fh->broken_calls;
	while (fh->vqs[q].n_used < n && fh->broken_calls == broken)
		if (pthread_cond_timedwait(&fh->cond, &fh->lock, &dl))
			break;
	ok = fh->vqs[q].n_used >= n;
	pthread_mutex_unlock(&fh->lock);
	return ok;
}
