/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin instances: config → cfg struct, the cub_host services, lifecycle. */
#ifndef CUBICLE_DEVICES_H
#define CUBICLE_DEVICES_H

#include "config.h"
#include "loader.h"
#include "log.h"

struct vm;
struct storage_inst;
struct net_inst;
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
	/* Storage backends (storage.c): what h->storage->open needs. */
	const struct registry *reg;
	const struct vm_config *conf;
	const struct dev_cfg *dc;      /* this instance's config entry, or NULL */
	struct storage_inst *storages; /* backends it opened */
	struct net_inst *nets;         /* net backends it opened (net.c) */
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

/* storage.c: the h->storage services. */
extern const struct cub_storage_host devices_storage_host;
/* Close every backend in->storages holds (after the device's destroy). */
void storage_close_all(struct cub_inst *in);
/* After create: a `backend` group the device never opened is an error.
 * 0, or -EINVAL with "FILE:LINE: NAME: TYPE takes no backend" in err. */
int storage_check_unused(struct cub_inst *in, char *err, size_t errlen);

/* net.c: the h->net services. */
extern const struct cub_net_host devices_net_host;
/* Close every backend in->nets holds (after the device's destroy). */
void net_close_all(struct cub_inst *in);
/* Did the device open a net backend from group @key? */
bool net_holds(const struct cub_inst *in, const char *key);

/* Restore any terminal put in raw mode (atexit and fatal signals). */
void devices_tty_restore(void);

#endif
