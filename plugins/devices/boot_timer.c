/* SPDX-License-Identifier: Apache-2.0 */
/* The boot-timer device: the guest writes 123 to say "booted"; the VMM logs the time. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cubicle/plugin.h>

#define BOOT_DONE_MAGIC 123 /* Firecracker's value; `devmem 0xd0000000 8 123` */

struct boot_timer_cfg {
	char unused; /* no parameters */
};

struct boot_timer {
	struct cub_inst *in;
	const struct cub_host *h;
	pthread_mutex_t lock; /* guards elapsed_us: vCPUs and the control channel */
	uint64_t elapsed_us;  /* 0 until the guest reports */
};

static double cpu_ms(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		return 0;
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void boot_timer_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct boot_timer *bt = priv;
	uint8_t *b = data, val[8];
	uint64_t t;

	if (is_write) {
		if (off != 0 || !len || b[0] != BOOT_DONE_MAGIC)
			return;
		t = bt->h->clock_us(bt->in);
		pthread_mutex_lock(&bt->lock);
		bt->elapsed_us = t;
		pthread_mutex_unlock(&bt->lock);
		/* Normally once per boot; rate-limited against a guest writing in a loop. */
		bt->h->log_ratelimited(bt->in, CUB_LOG_INFO,
				       "guest boot done after %.1f ms (VMM cpu %.1f ms)",
				       t / 1e3, cpu_ms());
		return;
	}
	/* Reads: the recorded time as a little-endian u64 at offset 0, else 0. */
	memset(b, 0, len);
	pthread_mutex_lock(&bt->lock);
	t = bt->elapsed_us;
	pthread_mutex_unlock(&bt->lock);
	for (int i = 0; i < 8; i++)
		val[i] = (uint8_t)(t >> (8 * i));
	for (uint32_t i = 0; i < len; i++)
		if (off + i < 8)
			b[i] = val[off + i];
}

static int boot_timer_elapsed_us(void *priv, struct cub_reply *reply)
{
	struct boot_timer *bt = priv;
	uint64_t t;
	int n;

	pthread_mutex_lock(&bt->lock);
	t = bt->elapsed_us;
	pthread_mutex_unlock(&bt->lock);
	n = snprintf(reply->text, sizeof(reply->text), "%llu", (unsigned long long)t);
	reply->len = n < 0 ? 0 : (size_t)n;
	return 0;
}

static int boot_timer_create(struct cub_inst *in, const struct cub_host *h, const void *cfg,
			     void **priv)
{
	struct boot_timer *bt = calloc(1, sizeof(*bt));
	struct cub_region r = {
		.want = CUB_BUS_ANY, .class = "boot-timer", .len = 0x1000, .io = boot_timer_io,
	};
	int err;

	if (!bt)
		return h->fail(in, -ENOMEM, "out of memory");
	bt->in = in;
	bt->h = h;
	pthread_mutex_init(&bt->lock, NULL);
	r.priv = bt;
	err = h->region_add(in, &r);
	if (err) {
		pthread_mutex_destroy(&bt->lock);
		free(bt);
		return err;
	}
	*priv = bt;
	return 0;
}

static void boot_timer_destroy(void *priv)
{
	struct boot_timer *bt = priv;

	pthread_mutex_destroy(&bt->lock);
	free(bt);
}

static int boot_timer_reset(void *priv)
{
	struct boot_timer *bt = priv;

	pthread_mutex_lock(&bt->lock);
	bt->elapsed_us = 0;
	pthread_mutex_unlock(&bt->lock);
	return 0;
}

static const struct cub_method boot_timer_methods[] = {
	{ .name = "elapsed_us", .sig = "",
	  .doc = "microseconds from VMM start to the guest's last boot-done write (0: none yet)",
	  .fn = (void (*)(void))boot_timer_elapsed_us },
};

/* Snapshot state 1.0: u64 elapsed_us, little-endian. */
static int boot_timer_save(void *priv, void *buf, size_t cap, size_t *len)
{
	struct boot_timer *bt = priv;
	uint8_t *b = buf;
	uint64_t t;

	*len = 8;
	if (cap < 8)
		return -ENOSPC;
	pthread_mutex_lock(&bt->lock);
	t = bt->elapsed_us;
	pthread_mutex_unlock(&bt->lock);
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(t >> (8 * i));
	return 0;
}

static int boot_timer_load(void *priv, const void *buf, size_t len, uint32_t minor)
{
	struct boot_timer *bt = priv;
	const uint8_t *b = buf;
	uint64_t t = 0;

	(void)minor;
	if (len != 8)
		return bt->h->fail(bt->in, -EINVAL, "state: %zu bytes, expected 8", len);
	for (int i = 0; i < 8; i++)
		t |= (uint64_t)b[i] << (8 * i);
	pthread_mutex_lock(&bt->lock);
	bt->elapsed_us = t;
	pthread_mutex_unlock(&bt->lock);
	return 0;
}

static const struct cub_device_ops boot_timer_ops = {
	.create = boot_timer_create,
	.destroy = boot_timer_destroy,
	.reset = boot_timer_reset,
	.state_version = CUB_STATE_VERSION(1, 0),
	.save = boot_timer_save,
	.load = boot_timer_load,
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(5),
	.kind = CUB_KIND_DEVICE,
	.name = "boot-timer",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "logs the time from VMM start until the guest writes 123 to it",
	.cfg_size = sizeof(struct boot_timer_cfg),
	.methods = boot_timer_methods,
	.n_methods = CUB_ARRAY_SIZE(boot_timer_methods),
	.ops = &boot_timer_ops,
});
