/* SPDX-License-Identifier: Apache-2.0 */
/* A fake struct cub_host for unit tests: records every service call a plugin makes (virtio: fake_virtio.c). */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_host.h"
#include "params.h"
#include "storage_zeroes.h"

static struct fake_host *fh_of(struct cub_inst *in)
{
	return (struct fake_host *)in;
}

struct cub_inst *fake_inst(struct fake_host *fh)
{
	return (struct cub_inst *)fh;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void record_log(struct fake_host *fh, int lvl, bool rl, const char *fmt, va_list ap)
{
	struct fake_log *l;

	pthread_mutex_lock(&fh->lock);
	l = &fh->logs[fh->n_logs++ % FAKE_MAX_LOGS];
	l->lvl = lvl;
	l->ratelimited = rl;
	vsnprintf(l->msg, sizeof(l->msg), fmt, ap);
	if (fh->verbose)
		fprintf(stderr, "[fake host] %d%s: %s\n", lvl, rl ? " (rl)" : "", l->msg);
	pthread_mutex_unlock(&fh->lock);
}

__attribute__((format(printf, 3, 4)))
static void fake_log(struct cub_inst *in, int lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	record_log(fh_of(in), lvl, false, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 3, 4)))
static void fake_log_rl(struct cub_inst *in, int lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	record_log(fh_of(in), lvl, true, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 3, 4)))
static int fake_fail(struct cub_inst *in, int err, const char *fmt, ...)
{
	struct fake_host *fh = fh_of(in);
	va_list ap;

	pthread_mutex_lock(&fh->lock);
	va_start(ap, fmt);
	vsnprintf(fh->fail_msg, sizeof(fh->fail_msg), fmt, ap);
	va_end(ap);
	fh->fail_err = err;
	fh->fail_calls++;
	if (fh->verbose)
		fprintf(stderr, "[fake host] fail %d: %s\n", err, fh->fail_msg);
	pthread_mutex_unlock(&fh->lock);
	return err;
}

static void *fake_gpa_map(struct cub_inst *in, uint64_t gpa, uint64_t len)
{
	struct fake_host *fh = fh_of(in);

	if (!fh->ram || gpa < fh->ram_base || len > fh->ram_size ||
	    gpa - fh->ram_base > fh->ram_size - len)
		return NULL;
	return fh->ram + (gpa - fh->ram_base);
}

static int default_place(struct fake_host *fh, struct cub_region *r)
{
	unsigned n = fh->n_regions;

	r->irq = -1;
	if (!strcmp(r->class, "uart")) {
		r->bus = CUB_BUS_PIO;
		r->base = 0x3f8;
		r->irq = 4;
	} else if (!strcmp(r->class, "boot-timer")) {
		r->bus = CUB_BUS_MMIO;
		r->base = 0xd0000000;
	} else if (!strcmp(r->class, "testdev")) {
		r->bus = CUB_BUS_PIO;
		r->base = 0xf0;
	} else {
		r->bus = CUB_BUS_MMIO;
		r->base = 0xd0001000 + 0x1000 * (uint64_t)n;
		r->irq = 5 + (int)n;
	}
	if (r->want != CUB_BUS_ANY && r->want != r->bus) {
		r->bus = r->want;
		r->base = r->bus == CUB_BUS_PIO ? 0x100 + 0x10 * (uint64_t)n
						: 0xd0001000 + 0x1000 * (uint64_t)n;
	}
	return 0;
}

static int fake_region_add(struct cub_inst *in, struct cub_region *r)
{
	struct fake_host *fh = fh_of(in);
	int err;

	if (fh->region_add_err)
		return fh->region_add_err;
	if (!r->class || !r->len || !r->io)
		return fake_fail(in, -EINVAL, "region_add: class, len and io are required");
	pthread_mutex_lock(&fh->lock);
	if (fh->n_regions == FAKE_MAX_REGIONS) {
		pthread_mutex_unlock(&fh->lock);
		return -ENOSPC;
	}
	err = (fh->place ? fh->place : default_place)(fh, r);
	if (!err)
		fh->regions[fh->n_regions++] = *r;
	pthread_mutex_unlock(&fh->lock);
	return err;
}

static int fake_irq_set(struct cub_inst *in, unsigned line, bool level)
{
	struct fake_host *fh = fh_of(in);

	if (line >= FAKE_MAX_IRQS)
		return -EINVAL;
	pthread_mutex_lock(&fh->lock);
	fh->irq_level[line] = level;
	fh->irq_calls[line]++;
	fh->irq_calls_total++;
	pthread_mutex_unlock(&fh->lock);
	return 0;
}

static int fake_fd_watch(struct cub_inst *in, int fd, uint32_t ev, void (*cb)(void *), void *arg)
{
	struct fake_host *fh = fh_of(in);
	int err = 0;

	if (fh->fd_watch_err)
		return fh->fd_watch_err;
	pthread_mutex_lock(&fh->lock);
	for (unsigned i = 0; i < fh->n_watches; i++)
		if (fh->watches[i].active && fh->watches[i].fd == fd)
			err = -EEXIST; /* as epoll_ctl(EPOLL_CTL_ADD) */
	if (!err) {
		unsigned i;

		for (i = 0; i < fh->n_watches && fh->watches[i].active; i++)
			; /* reuse a slot fd_unwatch freed */
		if (i == FAKE_MAX_WATCHES)
			err = -ENOSPC;
		else
			fh->watches[i] = (struct fake_watch){ fd, ev, cb, arg, true };
		if (i == fh->n_watches && !err)
			fh->n_watches++;
	}
	pthread_mutex_unlock(&fh->lock);
	return err;
}

static int fake_fd_unwatch(struct cub_inst *in, int fd)
{
	struct fake_host *fh = fh_of(in);
	int err = -ENOENT;

	pthread_mutex_lock(&fh->lock);
	for (unsigned i = 0; i < fh->n_watches; i++) {
		if (fh->watches[i].active && fh->watches[i].fd == fd) {
			fh->watches[i].active = false;
			err = 0;
		}
	}
	pthread_mutex_unlock(&fh->lock);
	return err;
}

static void fake_vm_exit(struct cub_inst *in, int status)
{
	struct fake_host *fh = fh_of(in);

	pthread_mutex_lock(&fh->lock);
	if (!fh->exit_calls++) /* the first request wins */
		fh->exit_status = status;
	pthread_mutex_unlock(&fh->lock);
}

static int fake_tty_raw(struct cub_inst *in, int fd)
{
	struct fake_host *fh = fh_of(in);

	pthread_mutex_lock(&fh->lock);
	fh->tty_raw_fd = fd;
	fh->tty_raw_calls++;
	pthread_mutex_unlock(&fh->lock);
	return fh->tty_raw_err;
}

static uint64_t fake_clock_us(struct cub_inst *in)
{
	struct fake_host *fh = fh_of(in);

	if (fh->clock_fixed)
		return fh->clock_us;
	return (now_ns() - fh->clock_start_ns) / 1000;
}

/* Threads a plugin starts: named, never confined (a test process has no
 * seccomp filter to hold to). */
static int fake_thread_enter(struct cub_inst *in, const char *name)
{
	char n[16];

	snprintf(n, sizeof(n), "%s", name ? name : "plugin");
	pthread_setname_np(pthread_self(), n);
	return 0;
}

/* ---- storage ---- */

static int fake_storage_open(struct cub_inst *in, const char *key, bool ro,
			     struct cub_storage **out)
{
	struct fake_host *fh = fh_of(in);

	fh->storage_open_calls++;
	snprintf(fh->storage_key, sizeof(fh->storage_key), "%s", key);
	fh->storage_ro = ro;
	*out = NULL;
	if (fh->storage_err)
		return fake_fail(in, fh->storage_err, "storage open refused (test knob)");
	if (!fh->storage)
		return fake_fail(in, -ENOENT, "no '%s' group (test has no storage)", key);
	*out = fh->storage;
	return 0;
}

static void fake_storage_close(struct cub_inst *in, struct cub_storage *s)
{
	fh_of(in)->storage_close_calls++;
}

/* ---- net ---- */

static int fake_net_open(struct cub_inst *in, const char *key, struct cub_net **out)
{
	struct fake_host *fh = fh_of(in);

	fh->net_open_calls++;
	*out = NULL;
	if (fh->net_err)
		return fake_fail(in, fh->net_err, "net open refused (test knob)");
	if (!fh->net)
		return fake_fail(in, -ENOENT, "no '%s' group (test has no net backend)", key);
	*out = fh->net;
	return 0;
}

static void fake_net_close(struct cub_inst *in, struct cub_net *n)
{
	fh_of(in)->net_close_calls++;
}

void fake_host_init(struct fake_host *fh)
{
	const char *v = getenv("FAKE_HOST_VERBOSE");

	memset(fh, 0, sizeof(*fh));
	fh->ops = (struct cub_host){
		.size = sizeof(struct cub_host),
		.log = fake_log,
		.log_ratelimited = fake_log_rl,
		.fail = fake_fail,
		.gpa_map = fake_gpa_map,
		.region_add = fake_region_add,
		.irq_set = fake_irq_set,
		.fd_watch = fake_fd_watch,
		.fd_unwatch = fake_fd_unwatch,
		.vm_exit = fake_vm_exit,
		.tty_raw = fake_tty_raw,
		.clock_us = fake_clock_us,
		.virtio = &fh->virtio,
		.storage = &fh->storage_host,
		.net = &fh->net_host,
		.thread_enter = fake_thread_enter,
	};
	fh->virtio = fake_virtio_host; /* fake_virtio.c */
	fh->net_host = (struct cub_net_host){
		.size = sizeof(struct cub_net_host),
		.open = fake_net_open,
		.close = fake_net_close,
	};
	fh->storage_host = (struct cub_storage_host){
		.size = sizeof(struct cub_storage_host),
		.open = fake_storage_open,
		.close = fake_storage_close,
		.write_zeroes = storage_write_zeroes, /* the core's own */
	};
	for (unsigned i = 0; i < FAKE_MAX_VQS; i++)
		fh->vqs[i].fh = fh;
	pthread_mutex_init(&fh->lock, NULL);
	pthread_cond_init(&fh->cond, NULL);
	fh->tty_raw_fd = -1;
	fh->exit_status = -1;
	fh->clock_start_ns = now_ns();
	fh->verbose = v && *v && strcmp(v, "0");
}

void fake_host_fini(struct fake_host *fh)
{
	free(fh->ram);
	fh->ram = NULL;
	pthread_cond_destroy(&fh->cond);
	pthread_mutex_destroy(&fh->lock);
}

int fake_host_ram(struct fake_host *fh, uint64_t base, uint64_t size)
{
	free(fh->ram);
	fh->ram = calloc(1, size);
	if (!fh->ram)
		return -ENOMEM;
	fh->ram_base = base;
	fh->ram_size = size;
	return 0;
}

/* ---- plugins and their cfg ---- */

static bool exists(const char *path)
{
	return !access(path, R_OK);
}

int fake_plugin_path(const char *name, char *path, size_t len)
{
	static const char *const sub[] = { "devices", "storage", "net" };
	const char *dir = getenv("CUBICLE_TEST_PLUGIN_DIR");

	if (dir) {
		snprintf(path, len, "%s/%s.so", dir, name);
		if (exists(path))
			return 0;
	}
#ifdef CUB_BUILD_DIR
	for (unsigned i = 0; i < CUB_ARRAY_SIZE(sub); i++) {
		snprintf(path, len, "%s/plugins/%s/.libs/%s.so", CUB_BUILD_DIR, sub[i], name);
		if (exists(path))
			return 0;
	}
#endif
	for (unsigned i = 0; i < CUB_ARRAY_SIZE(sub); i++) {
		snprintf(path, len, "plugins/%s/.libs/%s.so", sub[i], name);
		if (exists(path))
			return 0;
	}
	fprintf(stderr, "fake_plugin_path: %s.so not found (set CUBICLE_TEST_PLUGIN_DIR)\n", name);
	return -ENOENT;
}

const struct cub_plugin *fake_plugin_open(const char *name, void **dl)
{
	const struct cub_plugin *p;
	char path[4096];
	void *h;

	if (fake_plugin_path(name, path, sizeof(path)))
		return NULL;
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "fake_plugin_open: %s\n", dlerror());
		return NULL;
	}
	p = dlsym(h, "cubicle_plugin");
	/* the loader's gate: same major, and the minor it needs (abi_needs when
	 * the descriptor has it, else abi_minor) no newer than ours */
	if (!p || p->abi_major != CUB_ABI_MAJOR ||
	    p->size < offsetof(struct cub_plugin, ops) + sizeof(void *) || !p->ops ||
	    (p->size >= offsetof(struct cub_plugin, abi_needs) + sizeof(p->abi_needs) && p->abi_needs ?
	     p->abi_needs : p->abi_minor) > CUB_ABI_MINOR) {
		fprintf(stderr, "fake_plugin_open: %s: no usable cubicle_plugin descriptor\n", path);
		dlclose(h);
		return NULL;
	}
	*dl = h;
	return p;
}

void fake_plugin_close(void *dl)
{
	if (dl)
		dlclose(dl);
}

/* Defaults and overrides through the core's own parameter filler
 * (vmm-core/params.c), so plugin tests see exactly what the host does. */
struct fake_cfg {
	struct arena ar;
	max_align_t cfg[];
};

void *fake_cfg_new(const struct cub_plugin *p, const char *const *kv)
{
	struct fake_cfg *fc = calloc(1, sizeof(*fc) + (p->cfg_size ? p->cfg_size : 1));
	struct cub_param *params = params_normalize(p);
	/* partial: a test may leave a required parameter out to see the plugin cope */
	struct params_ctx ctx = { .inst = p->name, .plugin = p->name, .where = "fake_cfg_new",
				  .partial = true };
	struct cnode *g;
	char err[512];
	int ret = -ENOMEM;

	if (!fc || !params)
		goto fail;
	ctx.ar = &fc->ar;
	g = cnode_new(&fc->ar, CN_GROUP, NULL, "fake_cfg_new");
	for (; g && kv && kv[0]; kv += 2) {
		struct cnode *v, *parent = g;
		const char *key = kv[0], *dot;

		/* "g.key", "g.h.key": inside the group g (and h in it) */
		while ((dot = strchr(key, '.'))) {
			char *grp = arena_printf(&fc->ar, "%.*s", (int)(dot - key), key);
			struct cnode *sub = grp ? cnode_get(parent, grp) : NULL;

			if (!grp || (!sub && (!(sub = cnode_new(&fc->ar, CN_GROUP, grp, "fake_cfg_new")) ||
					     cnode_add(&fc->ar, parent, sub))))
				goto fail;
			parent = sub;
			key = dot + 1;
		}
		v = cnode_new(&fc->ar, CN_TEXT, arena_strdup(&fc->ar, key),
			      arena_printf(&fc->ar, "fake_cfg_new(%s)", kv[0]));
		if (!v || !kv[1] || cnode_add(&fc->ar, parent, v)) {
			ret = -EINVAL;
			goto fail;
		}
		v->s = kv[1];
	}
	if (!g)
		goto fail;
	ret = params_fill(params, p->n_params, &ctx, g, fc->cfg, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "fake_cfg_new: %s\n", err);
		goto fail;
	}
	free(params);
	return fc->cfg;
fail:
	if (ret == -ENOMEM)
		fprintf(stderr, "fake_cfg_new: out of memory\n");
	free(params);
	if (fc)
		arena_free(&fc->ar);
	free(fc);
	return NULL;
}

void fake_cfg_free(const struct cub_plugin *p, void *cfg)
{
	struct fake_cfg *fc;

	(void)p;
	if (!cfg)
		return;
	fc = (struct fake_cfg *)((char *)cfg - offsetof(struct fake_cfg, cfg));
	arena_free(&fc->ar);
	free(fc);
}

int fake_create(struct fake_host *fh, const struct cub_plugin *p, const void *cfg, void **priv)
{
	const struct cub_device_ops *ops = p->ops;
	int err = ops->create(fake_inst(fh), &fh->ops, cfg, priv);

	if (err && fh->verbose) /* FAKE_HOST_VERBOSE=1: why a create failed */
		fprintf(stderr, "(create: %d %s) ", err, fh->fail_msg);
	return err;
}

const struct cub_method *fake_method_find(const struct cub_plugin *p, const char *name)
{
	for (unsigned i = 0; i < p->n_methods; i++)
		if (!strcmp(p->methods[i].name, name))
			return &p->methods[i];
	return NULL;
}

/* ---- guest access ---- */

uint64_t fake_io_read(struct fake_host *fh, unsigned idx, uint64_t off, uint32_t len)
{
	struct cub_region *r = &fh->regions[idx];
	uint8_t b[8];
	uint64_t v = 0;

	if (idx >= fh->n_regions || len > 8)
		return ~0ull;
	memset(b, 0xa5, sizeof(b)); /* a handler must fill every byte it is asked for */
	r->io(r->priv, off, b, len, false);
	for (uint32_t i = 0; i < len; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

void fake_io_write(struct fake_host *fh, unsigned idx, uint64_t off, uint32_t len, uint64_t val)
{
	struct cub_region *r = &fh->regions[idx];
	uint8_t b[8];

	if (idx >= fh->n_regions || len > 8)
		return;
	for (uint32_t i = 0; i < len; i++)
		b[i] = (uint8_t)(val >> (8 * i));
	r->io(r->priv, off, b, len, true);
}

/* ---- queries ---- */

unsigned fake_log_count(struct fake_host *fh, int lvl, const char *substr)
{
	unsigned n = 0, first = fh->n_logs > FAKE_MAX_LOGS ? fh->n_logs - FAKE_MAX_LOGS : 0;

	pthread_mutex_lock(&fh->lock);
	for (unsigned i = first; i < fh->n_logs; i++) {
		const struct fake_log *l = &fh->logs[i % FAKE_MAX_LOGS];

		if ((lvl < 0 || l->lvl == lvl) && strstr(l->msg, substr))
			n++;
	}
	pthread_mutex_unlock(&fh->lock);
	return n;
}

bool fake_log_has(struct fake_host *fh, const char *substr)
{
	return fake_log_count(fh, -1, substr) > 0;
}

void fake_log_clear(struct fake_host *fh)
{
	pthread_mutex_lock(&fh->lock);
	fh->n_logs = 0;
	pthread_mutex_unlock(&fh->lock);
}

struct fake_watch *fake_watch_find(struct fake_host *fh, int fd)
{
	struct fake_watch *w = NULL;

	pthread_mutex_lock(&fh->lock);
	for (unsigned i = 0; i < fh->n_watches; i++)
		if (fh->watches[i].active && fh->watches[i].fd == fd)
			w = &fh->watches[i];
	pthread_mutex_unlock(&fh->lock);
	return w;
}

unsigned fake_watch_pump(struct fake_host *fh, unsigned max)
{
	unsigned fired = 0;

	while (fired < max) {
		bool any = false;

		for (unsigned i = 0; i < fh->n_watches && fired < max; i++) {
			struct fake_watch *w = &fh->watches[i];
			struct pollfd p = { .fd = w->fd, .events = (short)w->ev };

			if (!w->active || poll(&p, 1, 0) != 1)
				continue;
			w->cb(w->arg);
			fired++;
			any = true;
		}
		if (!any)
			break;
	}
	return fired;
}

int fake_watch_fire(struct fake_host *fh, int fd)
{
	struct fake_watch *w = fake_watch_find(fh, fd);

	if (!w)
		return -ENOENT;
	w->cb(w->arg); /* no lock held, like the real event loop */
	return 0;
}
