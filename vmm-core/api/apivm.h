/* SPDX-License-Identifier: Apache-2.0 */
/* What the control API sees of the VM (struct api_vm), without jansson:
 * main.c fills it. */
#ifndef CUBICLE_API_VM_H
#define CUBICLE_API_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

struct arena;
struct cnode;
struct cub_inst;
struct event_loop;
struct registry;
struct vm;
struct api;
struct snap_stats;

/*
 * What the API may see of and do to the VM; main.c fills it. Every
 * callback runs on the event-loop thread.
 * @reg:     the plugins (GET /plugins, method calls)
 * @ar:      where the API builds its tree for @start: the arena of the plan
 *           @start builds (the plan may point into the tree)
 * @start:   InstanceStart: build a plan from the API-built tree @root, create
 *           the VM and boot it; 0, or -errno with one line in err. NULL: the
 *           VM came from a config file and is already running.
 * @stop:    end the VM with @status (cubicle ctl stop)
 * @set_paused: pause (vCPUs parked, device queues not served, the guest's
 *           clocks held) or resume the running VM; 0 or -errno with err
 * @snapshot: write a Full (or, @diff, a Diff) snapshot of the paused VM
 *           into the folder @dir (snap/snapshot.h); with @release, then let go of guest RAM: it
 *           becomes a private mapping of the snapshot's memory (pause to
 *           disk: the process keeps only what the guest touches after its
 *           resume). 0 or -errno with err
 * @load:    (before a VM exists; NULL once one came from a config file)
 *           make the VM from the snapshot in @dir, paused unless @resume,
 *           with @sets applied to its description (--set syntax)
 * @rollback: roll the VM back to the snapshot in @dir in place (pausing
 *           it meanwhile if it runs); 0 or -errno with err
 * @insts:   the device instances once the VM exists (NULL before)
 * @running: the VM exists and runs
 * @machine: the VM once it exists (GET /metrics reads its vCPUs' counters)
 * @started, @live: CLOCK_MONOTONIC when the VMM started and the VM did
 */
struct api_vm {
	const struct registry *reg;
	struct arena *ar;
	int (*start)(void *ctx, const struct cnode *root, char *err, size_t errlen);
	void (*stop)(void *ctx, int status);
	int (*set_paused)(void *ctx, bool paused, char *err, size_t errlen);
	int (*snapshot)(void *ctx, const char *dir, bool diff, bool release, struct snap_stats *st,
			char *err, size_t errlen);
	int (*load)(void *ctx, const char *dir, bool resume, bool uffd, char *const *sets,
		    unsigned n_sets, char *err, size_t errlen);
	int (*rollback)(void *ctx, const char *dir, struct snap_stats *st, char *err,
			size_t errlen);
	void *ctx;
	const char *id;
	struct cub_inst *const *insts;
	unsigned n_insts;
	bool running;
	bool paused;
	const struct vm *machine;
	struct timespec started, live;
};

#endif
