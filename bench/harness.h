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

double bench_now_s(void);
/* Sort t[0..n) and return its median t[n / 2]. */
double bench_median(double *t, unsigned n);

#endif
