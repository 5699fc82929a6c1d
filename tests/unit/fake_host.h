/* SPDX-License-Identifier: Apache-2.0 */
/* A fake struct cub_host for unit tests: records every service call a plugin makes. */
#ifndef CUBICLE_FAKE_HOST_H
#define CUBICLE_FAKE_HOST_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubicle/net.h"
#include "cubicle/plugin.h"
#include "cubicle/storage.h"
#include "cubicle/virtio.h"

#define FAKE_MAX_REGIONS 8
#define FAKE_MAX_LOGS 256
#define FAKE_MAX_WATCHES 16
#define FAKE_MAX_IRQS 64

struct fake_log {
	int lvl;
	bool ratelimited; /* came through log_ratelimited */
	char msg[256];
};

#define FAKE_MAX_VQS 16
#define FAKE_VQ_LEN 256

struct fake_host;

/*
 * A fake virtqueue (what a device's struct cub_vq * points to): the test
 * queues chains with fake_vq_add, the device pops copies of them and
 * pushes them back; every push is recorded in order.
 */
struct fake_vq {
	struct fake_host *fh;
	const struct cub_vq_chain *avail[FAKE_VQ_LEN];
	unsigned avail_head, avail_n;
	struct {
		uint16_t head;
		uint32_t written;
	} used[FAKE_VQ_LEN];
	unsigned n_used;   /* pushes so far; used[i % FAKE_VQ_LEN] */
	unsigned notifies;
	unsigned pops;     /* pop calls, including empty ones */
	unsigned unpops;   /* chains given back unused (unpop) */
	unsigned unpop_bad; /* unpop calls naming chains not popped last */
	int pop_err;       /* knob: nonzero makes pop return it */
	/* knob: called (no lock held) by a pop that found the ring empty, on
	 * the popping thread: a test's way into the moment a drain ends */
	void (*empty_pop)(struct fake_vq *q);
	uint16_t size;     /* knob: what queue_size reports (0: FAKE_VQ_LEN) */
};

struct fake_watch {
	int fd;
	uint32_t ev;
	void (*cb)(void *);
	void *arg;
	bool active; /* false once fd_unwatch was called */
};

/*
 * One fake host. Hand &fh->ops and fake_inst(fh) to a plugin's create; every
 * field below may be read (and the "knobs" set) by the test. All recording
 * is under fh->lock, so plugins may call in from several threads.
 */
struct fake_host {
	struct cub_host ops;
	pthread_mutex_t lock;

	/* region_add: copies of what the plugin asked for, with placement filled. */
	struct cub_region regions[FAKE_MAX_REGIONS];
	unsigned n_regions;
	int region_add_err; /* knob: nonzero makes region_add fail with it */
	/* knob: placement; NULL uses the built-in x86-like table (uart: PIO
	 * 0x3f8 irq 4; boot-timer: MMIO 0xd0000000; testdev: PIO 0xf0; other
	 * classes: MMIO windows from 0xd0001000 with irqs from 5). */
	int (*place)(struct fake_host *fh, struct cub_region *r);

	/* irq_set */
	bool irq_level[FAKE_MAX_IRQS];
	unsigned irq_calls[FAKE_MAX_IRQS];
	unsigned irq_calls_total;

	/* log, log_ratelimited: the last FAKE_MAX_LOGS lines */
	struct fake_log logs[FAKE_MAX_LOGS];
	unsigned n_logs; /* total ever logged; logs[i % FAKE_MAX_LOGS] */
	bool verbose;    /* echo to stderr; set by FAKE_HOST_VERBOSE=1 */

	/* fail */
	int fail_err;
	char fail_msg[512]; /* as long as the core's cub_inst.err */
	unsigned fail_calls;

	/* vm_exit */
	int exit_status;
	unsigned exit_calls;

	/* fd_watch, fd_unwatch */
	struct fake_watch watches[FAKE_MAX_WATCHES];
	unsigned n_watches;
	int fd_watch_err; /* knob: nonzero makes fd_watch fail with it */

	/* tty_raw */
	int tty_raw_fd;
	unsigned tty_raw_calls;
	int tty_raw_err; /* knob */

	/* clock_us: real monotonic time since fake_host_init unless clock_fixed */
	bool clock_fixed;
	uint64_t clock_us;
	uint64_t clock_start_ns;

	/* gpa_map: guest RAM, see fake_host_ram */
	uint8_t *ram;
	uint64_t ram_base, ram_size;

	/* virtio (ops.virtio): the device's ops from add, its queues */
	struct cub_virtio_host virtio;
	const struct cub_virtio_ops *vdev;
	void *vpriv;
	unsigned virtio_add_calls;
	int virtio_add_err; /* knob */
	struct fake_vq vqs[FAKE_MAX_VQS];
	unsigned broken_calls;
	char broken_why[256];
	pthread_cond_t cond; /* broadcast on every push and broken */

	/* storage (ops.storage): open hands out the knob storage */
	struct cub_storage_host storage_host;
	struct cub_storage *storage; /* knob: NULL makes open fail with -ENOENT */
	int storage_err;             /* knob: nonzero makes open fail with it */
	unsigned storage_open_calls, storage_close_calls;
	char storage_key[32];
	bool storage_ro;

	/* net (ops.net): open hands out the knob net backend */
	struct cub_net_host net_host;
	struct cub_net *net; /* knob: NULL makes open fail with -ENOENT */
	int net_err;         /* knob: nonzero makes open fail with it */
	unsigned net_open_calls, net_close_calls;

	/* virtio: knob: feature bits the fake driver refuses at start */
	uint64_t features_refused;
	unsigned push_batches; /* push_batch calls (each also recorded in used[]) */
};

void fake_host_init(struct fake_host *fh);
void fake_host_fini(struct fake_host *fh);
/* The instance pointer plugins get: the fake host itself, opaque to them. */
struct cub_inst *fake_inst(struct fake_host *fh);
/* Give the fake guest size bytes of zeroed RAM at guest-physical base. */
int fake_host_ram(struct fake_host *fh, uint64_t base, uint64_t size);

/*
 * Find a built plugin: NAME.so in $CUBICLE_TEST_PLUGIN_DIR, then in
 * CUB_BUILD_DIR/plugins/{devices,storage,net}/.libs, then the same under the
 * current directory. 0 with the path in path, or -ENOENT (reason on stderr).
 * Hand the path to loader_open to cover the ABI gate and libffi calls too.
 */
int fake_plugin_path(const char *name, char *path, size_t len);
/* dlopen + dlsym("cubicle_plugin") + the ABI version check, without the
 * core's loader. Prints why on stderr and returns NULL on failure. */
const struct cub_plugin *fake_plugin_open(const char *name, void **dl);
void fake_plugin_close(void *dl);

/*
 * A cfg struct for plugin p: every param's default, then overrides kv, a
 * NULL-terminated list of "key", "value" pairs (values as config text; a
 * string list as "a,b"; dotted keys get their defaults like any other).
 * NULL on an unknown key or bad value (reason on stderr). Free with
 * fake_cfg_free (it owns the strings).
 */
void *fake_cfg_new(const struct cub_plugin *p, const char *const *kv);
void fake_cfg_free(const struct cub_plugin *p, void *cfg);

/* p's device ops ->create with this host; returns its result. */
int fake_create(struct fake_host *fh, const struct cub_plugin *p, const void *cfg, void **priv);
const struct cub_method *fake_method_find(const struct cub_plugin *p, const char *name);

/* Guest access to recorded region idx: little-endian, len 1..8. Reads start
 * from a 0xa5-filled buffer, so a handler that leaves bytes unset shows. */
uint64_t fake_io_read(struct fake_host *fh, unsigned idx, uint64_t off, uint32_t len);
void fake_io_write(struct fake_host *fh, unsigned idx, uint64_t off, uint32_t len, uint64_t val);

/* ---- virtio (fake_virtio.c) ---- */

/* The fake virtqueues' services: fake_host_init copies them into fh->virtio
 * (ops.virtio), where a test may replace one. */
extern const struct cub_virtio_host fake_virtio_host;

/* An empty chain with this head; segments are added in order, readable first. */
void fake_chain_init(struct cub_vq_chain *c, uint16_t head);
/* Append a segment; -EINVAL if a readable one follows a writable one. */
int fake_chain_add(struct cub_vq_chain *c, void *p, size_t len, bool writable);
/* Queue chain c (kept by pointer until popped) on queue q: 0 or -ENOSPC. */
int fake_vq_add(struct fake_host *fh, unsigned q, const struct cub_vq_chain *c);
/* The device's start with every one of its queues, as DRIVER_OK would. */
int fake_virtio_start(struct fake_host *fh);
/* The driver kicks queue q: the device's notify. */
void fake_virtio_kick(struct fake_host *fh, unsigned q);
/* @len (1 to 8) bytes of the device's config space at @off, little-endian. */
uint64_t fake_virtio_config(struct fake_host *fh, uint32_t off, uint32_t len);
/* The driver resets the device: its stop. */
void fake_virtio_stop(struct fake_host *fh);
/* Wait until queue q has seen n pushes, the device breaks, or timeout_ms
 * pass: true if the pushes came. */
bool fake_vq_wait_used(struct fake_host *fh, unsigned q, unsigned n, unsigned timeout_ms);

/* Lines containing substr among the kept logs (any level if lvl < 0). */
unsigned fake_log_count(struct fake_host *fh, int lvl, const char *substr);
bool fake_log_has(struct fake_host *fh, const char *substr);
void fake_log_clear(struct fake_host *fh);

/* The active watch on fd, or NULL. */
struct fake_watch *fake_watch_find(struct fake_host *fh, int fd);
/* Run fd's callback as the event loop would: 0, or -ENOENT if not watched. */
int fake_watch_fire(struct fake_host *fh, int fd);
/* Run the callbacks of watched fds that are ready (poll), round after round,
 * as an event loop would, until none is or @max ran: how many ran. */
unsigned fake_watch_pump(struct fake_host *fh, unsigned max);

#endif
