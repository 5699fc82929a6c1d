/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin instances made from the plan: the cub_host services (host.c),
 * create and destroy (devices.c), their backends (backend.c). */
#ifndef CUBICLE_DEVICES_H
#define CUBICLE_DEVICES_H

#include "loader.h"
#include "plan.h"
#include "storage_zeroes.h"
#include "log.h"

struct vm;
struct backend;
struct virtio_dev;
struct cub_storage;

#define INST_MAX_REGIONS 8
#define INST_MAX_WATCHES 16

struct cub_inst {
	struct vm *vm;
	const struct plugin *plugin;
	const char *name; /* "serial8250[com1]" (the plan's) */
	const void *cfg;  /* the plugin's cfg struct (the plan's) */
	void *priv;
	bool created;
	char err[512];    /* last h->fail() message */
	struct ratelimit rl;
	struct {
		struct bus *bus;
		uint64_t base;
	} regions[INST_MAX_REGIONS];
	unsigned n_regions;
	int watched[INST_MAX_WATCHES];
	unsigned n_watched;
	/* The plan: this instance's entry (its backends, transport) and the
	 * VM's (the config path a net backend derives a MAC from). */
	const struct plan *plan;
	const struct plan_inst *pi;
	struct backend *storages;      /* storage backends it opened (storage.c) */
	struct backend *nets;          /* net backends it opened (net.c) */
	bool err_full;                 /* err already carries file:line and a name */
	/* Virtio (virtio/virtio.c): the device, once h->virtio->add made one. */
	struct virtio_dev *virtio;
};

/* The host service table every instance gets (host.c). */
extern const struct cub_host devices_host;

/* Create every planned device in order; no plugin code has run before. */
int devices_create_all(struct vm *vm, const struct plan *p, struct cub_inst ***out,
		       unsigned *n_out, char *err, size_t errlen);
void devices_destroy_all(struct cub_inst **insts, unsigned n);

/*
 * backend.c: one open backend, as storage.c and net.c keep one. It gets its
 * own struct cub_inst, so its messages carry its own name ("raw[disk0]") and
 * its fd watches are its own; it can never add regions (created is set
 * before open). A kind's struct begins with it.
 */
struct backend {
	struct cub_inst bin;              /* the backend's instance */
	const struct backend_kind *kind;
	const char *key;                  /* the group it came from, normally "backend" */
	bool opened;                      /* the plugin's open succeeded */
	struct backend *next;
};

/*
 * What differs between storage and net backends.
 * @kind, @noun:   the plugin kind; "storage" in messages
 * @size:          size of the kind's struct, which begins with struct backend
 * @init:          (optional) set up the kind's part once bin is named; -ENOMEM
 * @open:          call the plugin's open with bin, devices_host and bin.cfg;
 *                 its return value
 * @info:          after open: read and check the backend's info; 0, or a
 *                 negative errno with the reason in @why
 * @release:       (optional) the plugin's close if opened, and free what init made
 */
struct backend_kind {
	enum cub_kind kind;
	const char *noun;
	size_t size;
	int (*init)(struct backend *b, const struct cub_inst *in);
	int (*open)(struct backend *b, const void *arg);
	int (*info)(struct backend *b, char *why, size_t len);
	void (*release)(struct backend *b);
};

/* Open the backend the plan holds for the group @key of in's config, as a
 * plugin of k->kind, and add it to @list; @arg goes to k->open. 0, or a
 * negative errno with "FILE:LINE: NAME: ..." in in->err (in->err_full set). */
int backend_open(struct cub_inst *in, const char *key, const struct backend_kind *k,
		 struct backend **list, const void *arg, struct backend **out);
/* Close @b and take it off @list; no-op when @b is not on it. */
void backend_close(struct backend **list, struct backend *b);
void backend_close_all(struct backend **list);
/* Is a backend from group @key on @list? */
bool backend_holds(const struct backend *list, const char *key);
/* After create: a planned backend group the device never opened is an
 * error. 0, or -EINVAL with "FILE:LINE: NAME: ..." in err. */
int backend_check_unused(struct cub_inst *in, char *err, size_t errlen);

/* storage.c: the h->storage services. */
extern const struct cub_storage_host devices_storage_host;
/* Close every backend in->storages holds (after the device's destroy). */
void storage_close_all(struct cub_inst *in);
/* What a storage backend's device asked of it so far (GET /metrics). */
struct storage_counters {
	uint64_t reads, read_bytes, writes, write_bytes, flushes, discards, write_zeroes, errors;
};
void storage_counters(const struct backend *b, struct storage_counters *out);
/* The name of the first writable storage backend @in holds, or NULL. */
const char *storage_writable(const struct cub_inst *in);
/* The open storage backends of @in one by one: the one after @prev (NULL:
 * the first), with its group key ("backend") and its instance (whose err
 * holds the reason a failed op gave h->fail()); NULL after the last. */
struct cub_storage;
struct cub_storage *storage_next(const struct cub_inst *in, const struct cub_storage *prev,
				 const char **key, struct cub_inst **bin);


/* net.c: the h->net services. */
extern const struct cub_net_host devices_net_host;
/* Close every backend in->nets holds (after the device's destroy). */
void net_close_all(struct cub_inst *in);
/* The backend's own counters: false when it keeps none (no stats op). */
struct cub_net_stats;
bool net_stats(const struct backend *b, struct cub_net_stats *out);

/* Restore any terminal put in raw mode (atexit and fatal signals). */
void devices_tty_restore(void);

#endif
