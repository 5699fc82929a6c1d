/* SPDX-License-Identifier: Apache-2.0 */
/* bench/harness: what the device benchmarks share (guest RAM, a host vtable for one virtio plugin, the plugin loaded from config text, timing and medians). */
#ifndef CUBICLE_BENCH_HARNESS_H
#define CUBICLE_BENCH_HARNESS_H

#include <pthread.h>
#include <stdint.h>

#include "plan.h"
#include "cubicle/virtio.h"
#include "devices.h"
#include "loader.h"
#include "mem.h"
#include "virtio/virtqueue.h"

#define BENCH_QSIZE 256u
#define BENCH_RAM   (64u << 20)

/* A split-ring descriptor as the driver writes it. */
struct bench_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

/* One device plugin instance and what its creation needs to outlive it. */
struct bench_dev {
	struct cub_inst in;
	struct registry reg;
	struct plan plan;
	void *priv;
};

extern struct guest_mem bench_mem;
extern const struct cub_virtio_ops *bench_vops; /* set by the plugin's add() */
extern void *bench_vpriv;
/* notify() counts an interrupt in bench_irqs and broadcasts bench_irq_cond. */
extern pthread_mutex_t bench_irq_lock;
extern pthread_cond_t bench_irq_cond;
extern unsigned bench_irqs;
/* The virtio host; a bench's cub_host points at it. */
extern const struct cub_virtio_host bench_vhost;

/* Log prefix ("blk"), clock start, and BENCH_RAM of guest RAM at GPA 0. */
int bench_init(const char *tag);
void bench_log(struct cub_inst *in, int lvl, const char *fmt, ...);
int bench_fail(struct cub_inst *in, int err, const char *fmt, ...);
uint64_t bench_clock(struct cub_inst *in);

/* Scan the devices plugins and plugin_dir, then create the device `type`
 * from the config text (a `devices = ( ... );` list of one). */
int bench_dev_create(struct bench_dev *d, const char *type, const char *plugin_dir,
		     const char *text, const struct cub_host *host);
/* Destroy the device, its backends (close_all), its config and registry. */
void bench_dev_destroy(struct bench_dev *d, void (*close_all)(struct cub_inst *));
/* A virtqueue of BENCH_QSIZE on rings at these GPAs; NULL (said) on error. */
struct virtq *bench_virtq(uint64_t desc, uint64_t avail, uint64_t used, uint64_t features);

/* One side of a driver on a split ring in guest RAM, with EVENT_IDX: the
 * queue and what the driver knows of it. */
struct bench_ring {
	struct virtq *vq;
	struct bench_desc *dt;
	uint16_t *avail;  /* flags, idx, ring[BENCH_QSIZE], used_event */
	uint16_t *used;   /* flags, idx, then elems; avail_event after them */
	uint16_t avail_next, kicked_at, used_seen;
	unsigned q;
};

/* Kicks bench_ring_publish made. */
extern unsigned bench_kicks;

/* The receive queue (0) and the transmit queue (1) on rings in guest RAM
 * below BENCH_RINGS_END (VERSION_1 and EVENT_IDX); -1 (said) on error. */
#define BENCH_RINGS_END 0x7000
int bench_rings_init(struct bench_ring *rx, struct bench_ring *tx);

/* The device's used index. */
static inline uint16_t bench_used_idx(const struct bench_ring *r)
{
	return __atomic_load_n(&r->used[1], __ATOMIC_ACQUIRE);
}

/* Publish what was posted; kick if the device asked (virtio 2.7.10). */
void bench_ring_publish(struct bench_ring *r);
/* Sleep until the device used more of r: ask for an interrupt first. */
void bench_ring_wait(struct bench_ring *r);

/* A host's fd_watch/fd_unwatch: the one fd the device watches, served by
 * the event-loop thread bench_loop_start() starts and bench_loop_stop() ends. */
int bench_fd_watch(struct cub_inst *in, int fd, uint32_t ev, void (*cb)(void *), void *arg);
int bench_fd_unwatch(struct cub_inst *in, int fd);
void bench_loop_start(pthread_t *t);
void bench_loop_stop(pthread_t t);

/* A peer thread that runs work(job) for each job bench_peer_start() gives
 * it (job > 0; what the work needs is set before), bench_peer_wait() until
 * it is done; bench_peer_stop() ends it. */
void bench_peer_spawn(pthread_t *t, void (*work)(int job));
void bench_peer_start(int job);
void bench_peer_wait(void);
void bench_peer_stop(pthread_t t);

double bench_now_s(void);
/* Sort t[0..n) and return its median t[n / 2]. */
double bench_median(double *t, unsigned n);

#endif
