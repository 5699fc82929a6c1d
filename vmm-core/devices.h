/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin instances: config → cfg struct, the cub_host services, lifecycle. */
#ifndef CUBICLE_DEVICES_H
#define CUBICLE_DEVICES_H

#include "config.h"
#include "loader.h"
#include "log.h"

struct vm;
struct backend;
struct virtio_dev;

#define INST_MAX_REGIONS 8
#define INST_MAX_WATCHES 16

struct cub_inst {
	struct vm *vm;
	const struct plugin *plugin;
	char *name;       /* "serial8250[com1]" */
	void *cfg;        /* the plugin's cfg struct */
	char **strs;      /* strings in cfg, owned here */
	unsigned n_strs;
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
	/* Backends (backend.c): what h->storage->open and h->net->open need. */
	const struct registry *reg;
	const struct vm_config *conf;
	const struct dev_cfg *dc;      /* this instance's config entry, or NULL */
	struct backend *storages;      /* storage backends it opened (storage.c) */
	struct backend *nets;          /* net backends it opened (net.c) */
	bool err_full;                 /* err already carries file:line and a name */
	/* Virtio (virtio/virtio.c): the config's `transport` key, or NULL for
	 * the arch default; the device, once h->virtio->add made one. */
	const char *transport;
	struct virtio_dev *virtio;
};

/* The host service table every instance gets. */
extern const struct cub_host devices_host;

/* Fill cfg (plugin->d->cfg_size bytes) from defaults and the libconfig group.
 * group may be NULL (defaults only). Unknown keys, wrong types and missing
 * required params: -EINVAL with "FILE:LINE: NAME: ..." in err. strs collects allocated strings. */
int devices_fill_cfg(const struct plugin *p, const struct vm_config *c,
		     const config_setting_t *group, const char *inst_name, void *cfg, char ***strs,
		     unsigned *n_strs, char *err, size_t errlen);

/* Create every configured device in order. */
int devices_create_all(struct vm *vm, const struct registry *reg, const struct vm_config *c,
		       struct cub_inst ***out, unsigned *n_out, char *err, size_t errlen);
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
	char *key;                        /* the group it came from, normally "backend" */
	bool opened;                      /* the plugin's open succeeded */
	struct backend *next;
};

/*
 * What differs between storage and net backends.
 * @kind, @noun:   the plugin kind to look up; "storage" in "no storage plugin named 'x'"
 * @needs, @group: examples in the messages for a missing @key and a non-group @key
 * @ops_names:     "open, close, ...": the ops @ops_complete requires
 * @path_params:   NULL-terminated names of CUB_P_STR params that are paths
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
	const char *noun, *needs, *group, *ops_names;
	bool (*ops_complete)(const void *ops);
	const char *const *path_params;
	size_t size;
	int (*init)(struct backend *b, const struct cub_inst *in);
	int (*open)(struct backend *b, const void *arg);
	int (*info)(struct backend *b, char *why, size_t len);
	void (*release)(struct backend *b);
};

/* Open the backend the group @key of in's config names, as a plugin of
 * k->kind, and add it to @list; @arg goes to k->open. 0, or a negative errno
 * with "FILE:LINE: NAME: ..." in in->err (in->err_full set). */
int backend_open(struct cub_inst *in, const char *key, const struct backend_kind *k,
		 struct backend **list, const void *arg, struct backend **out);
/* Close @b and take it off @list; no-op when @b is not on it. */
void backend_close(struct backend **list, struct backend *b);
void backend_close_all(struct backend **list);
/* Is a backend from group @key on @list? */
bool backend_holds(const struct backend *list, const char *key);
/* After create: a `backend` group the device never opened is an error.
 * 0, or -EINVAL with "FILE:LINE: NAME: TYPE takes no backend" in err. */
int backend_check_unused(struct cub_inst *in, char *err, size_t errlen);

/* storage.c: the h->storage services. */
extern const struct cub_storage_host devices_storage_host;
/* Close every backend in->storages holds (after the device's destroy). */
void storage_close_all(struct cub_inst *in);
/* backend_check_unused, under the name the unit tests use. */
int storage_check_unused(struct cub_inst *in, char *err, size_t errlen);

/* net.c: the h->net services. */
extern const struct cub_net_host devices_net_host;
/* Close every backend in->nets holds (after the device's destroy). */
void net_close_all(struct cub_inst *in);

/* Restore any terminal put in raw mode (atexit and fatal signals). */
void devices_tty_restore(void);

#endif
