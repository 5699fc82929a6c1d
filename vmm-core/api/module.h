/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control API as main.c sees it: a module of its own (cubicle-api.so,
 * with jansson and, on first use, http-parser), loaded only when a VM is
 * run with an API or a Firecracker JSON file, so that a VM without either
 * maps none of it. This header needs no jansson.
 */
#ifndef CUBICLE_API_MODULE_H
#define CUBICLE_API_MODULE_H

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
	void *ctx;
	const char *id;
	struct cub_inst *const *insts;
	unsigned n_insts;
	bool running;
	bool paused;
	const struct vm *machine;
	struct timespec started, live;
};

/*
 * The module's entry points, exported as `cubicle_api_module`. The module
 * calls back into the executable's core (cubicle is linked with
 * --export-dynamic); it runs on the event-loop thread but for
 * load_fc_json, which runs before the API listens.
 * @new_detached: an API serving nothing yet (NULL: out of memory)
 * @set_loop:     the loop PUT /metrics' periodic flush runs on
 * @load_fc_json: Firecracker's JSON description: its sections, then
 *                InstanceStart (0, or -errno with err naming file and field)
 * @listen:       serve on the Unix socket @path (0 or -errno with err)
 * @close:        stop serving, remove the socket, free
 */
struct api_module {
	unsigned size;
	struct api *(*new_detached)(struct api_vm *vm);
	void (*set_loop)(struct api *a, struct event_loop *ev);
	int (*load_fc_json)(struct api *a, const char *path, char *err, size_t errlen);
	int (*listen)(struct api *a, const char *path, struct event_loop *ev, char *err,
		      size_t errlen);
	void (*close)(struct api *a);
};

/* Load cubicle-api.so (the build tree's when uninstalled): its entry
 * points, or NULL with why in err. Core side (vmm-core/apimod.c). */
const struct api_module *api_module_load(char *err, size_t errlen);

#endif
