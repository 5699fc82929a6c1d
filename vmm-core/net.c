/* SPDX-License-Identifier: Apache-2.0 */
/* Packet backends for devices (h->net): find the `backend` group in a
 * device's config, fill the named net plugin's cfg, open and close it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubicle/net.h"
#include "devices.h"
#include "event.h"
#include "vm.h"

/*
 * One open backend, as storage.c keeps one: its own struct cub_inst, so its
 * messages carry its own name ("socket[net0]") and its fd watches are its
 * own; it can never add regions (created is set before open).
 */
struct net_inst {
	struct cub_net n;    /* what the device holds */
	struct cub_inst bin; /* the backend's instance */
	char *key;           /* the group it came from, normally "backend" */
	char *vm_path;       /* n.vm_path */
	bool opened;
	struct net_inst *next;
};

__attribute__((format(printf, 3, 4)))
static int fail_full(struct cub_inst *in, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(in->err, sizeof(in->err), fmt, ap);
	va_end(ap);
	in->err_full = true;
	return err;
}

static void ni_free(struct net_inst *ni)
{
	struct cub_inst *b = &ni->bin;

	if (ni->opened)
		ni->n.ops->close(b->priv);
	while (b->n_watched) {
		int fd = b->watched[--b->n_watched];

		if (b->vm && b->vm->ev)
			event_unwatch(b->vm->ev, fd);
	}
	for (unsigned i = 0; i < b->n_strs; i++)
		free(b->strs[i]);
	free(b->strs);
	free(b->cfg);
	free(b->name);
	free(ni->key);
	free(ni->vm_path);
	free(ni);
}

/* Socket paths in a backend's cfg (`path`, `peer`) read like boot.kernel's:
 * ~, ${VAR}, and relative to the config file's folder. */
static int expand_paths(struct net_inst *ni, const struct vm_config *c, char *why, size_t len)
{
	const struct cub_plugin *d = ni->bin.plugin->d;

	for (unsigned i = 0; i < d->n_params; i++) {
		const struct cub_param *p = &d->params[i];
		char *slot = (char *)ni->bin.cfg + p->offset;
		const char *v;
		char *x, **strs;

		if (p->type != CUB_P_STR || (strcmp(p->name, "path") && strcmp(p->name, "peer")))
			continue;
		memcpy(&v, slot, sizeof(v));
		if (!v || !*v)
			continue;
		x = config_expand_path(v, c->dir ? c->dir : ".", why, len);
		if (!x)
			return -EINVAL;
		strs = realloc(ni->bin.strs, (ni->bin.n_strs + 1) * sizeof(*strs));
		if (!strs) {
			free(x);
			snprintf(why, len, "out of memory");
			return -ENOMEM;
		}
		ni->bin.strs = strs;
		strs[ni->bin.n_strs++] = x;
		memcpy(slot, &x, sizeof(x));
	}
	return 0;
}

static bool ops_complete(const struct cub_net_ops *o)
{
	return o->open && o->close && o->info && o->send && o->recv;
}

/* Check what a backend says about itself before a device relies on it. */
static int info_check(struct net_inst *ni, char *why, size_t len)
{
	const struct cub_net_info *i = &ni->n.info;

	if (i->rx_fd < 0) {
		snprintf(why, len, "backend reports no receive fd");
		return -EINVAL;
	}
	if (i->offloads && (!i->vnet_hdr || !ni->n.ops->set_vnet_hdr || !ni->n.ops->set_offloads)) {
		snprintf(why, len, "backend reports offloads without the vnet header ops");
		return -EINVAL;
	}
	if (i->mtu && (i->mtu < 68 || i->mtu > CUB_NET_MAX_FRAME - 14)) {
		snprintf(why, len, "backend reports MTU %u; expected 68..%u", i->mtu,
			 CUB_NET_MAX_FRAME - 14);
		return -EINVAL;
	}
	return 0;
}

static struct net_inst *ni_new(struct cub_inst *in, const struct plugin *p, const char *key,
			       const char *type)
{
	struct net_inst *ni = calloc(1, sizeof(*ni));
	const char *id = in->dc ? in->dc->id : in->name;
	int n;

	if (!ni)
		return NULL;
	if (!strcmp(key, "backend"))
		n = asprintf(&ni->bin.name, "%s[%s]", type, id);
	else
		n = asprintf(&ni->bin.name, "%s[%s.%s]", type, id, key);
	ni->key = strdup(key);
	ni->vm_path = in->conf && in->conf->path ? realpath(in->conf->path, NULL) : NULL;
	if (!ni->vm_path)
		ni->vm_path = strdup(in->conf && in->conf->path ? in->conf->path : "");
	ni->bin.cfg = calloc(1, p->d->cfg_size ? p->d->cfg_size : 1);
	if (n < 0 || !ni->key || !ni->vm_path || !ni->bin.cfg) {
		if (n < 0)
			ni->bin.name = NULL;
		ni_free(ni);
		return NULL;
	}
	ni->bin.vm = in->vm;
	ni->bin.plugin = p;
	ni->bin.reg = in->reg;
	ni->bin.conf = in->conf;
	ni->bin.created = true; /* a backend never claims bus regions */
	ni->n.ops = p->d->ops;
	ni->n.name = ni->bin.name;
	ni->n.dev_id = id;
	ni->n.vm_path = ni->vm_path;
	return ni;
}

/* The group @key of the device's config, checked, and the plugin it names. */
static int find_backend(struct cub_inst *in, const char *key, const config_setting_t **gout,
			const struct plugin **pout, char *where, size_t wlen)
{
	const struct vm_config *c = in->conf;
	const config_setting_t *g, *t;
	const struct plugin *p = NULL;
	const char *type;

	if (!c || !in->dc || !in->dc->group || !in->reg)
		return fail_full(in, -ENOENT, "%s: no config to find a '%s' group in", in->name,
				 key);
	config_where(c, in->dc->group, where, wlen);
	g = config_setting_get_member(in->dc->group, key);
	if (!g)
		return fail_full(in, -ENOENT,
				 "%s: %s: needs %s = { type = \"socket\"; path = \"...\"; peer = \"...\"; }",
				 where, in->name, key);
	config_where(c, g, where, wlen);
	if (!config_setting_is_group(g))
		return fail_full(in, -EINVAL,
				 "%s: %s: '%s' must be a group { type = \"socket\"; ... }", where,
				 in->name, key);
	for (struct net_inst *ni = in->nets; ni; ni = ni->next)
		if (!strcmp(ni->key, key))
			return fail_full(in, -EBUSY, "%s: %s: '%s' is already open", where,
					 in->name, key);
	t = config_setting_get_member(g, "type");
	if (!t || config_setting_type(t) != CONFIG_TYPE_STRING)
		return fail_full(in, -EINVAL,
				 "%s: %s: '%s' needs type = \"BACKEND\" (a string; see `cubicle plugins`)",
				 where, in->name, key);
	type = config_setting_get_string(t);
	p = registry_find(in->reg, CUB_KIND_NET, type);
	if (!p)
		return fail_full(in, -ENOENT,
				 "%s: %s: no net plugin named '%s' (`cubicle plugins` lists those found)",
				 where, in->name, type);
	if (!ops_complete(p->d->ops))
		return fail_full(in, -EINVAL,
				 "%s: %s: net plugin '%s' lacks open, close, info, send or recv",
				 where, in->name, type);
	/* devices_fill_cfg passes id and backend over: neither means anything here. */
	if ((t = config_setting_get_member(g, "id")) || (t = config_setting_get_member(g, "backend"))) {
		config_where(c, t, where, wlen);
		return fail_full(in, -EINVAL, "%s: %s[%s]: a backend takes no '%s'", where, type,
				 in->dc->id, config_setting_name(t));
	}
	*gout = g;
	*pout = p;
	return 0;
}

static int net_open(struct cub_inst *in, const char *key, struct cub_net **out)
{
	const config_setting_t *g = NULL;
	const struct plugin *p = NULL;
	struct net_inst *ni;
	char where[512], why[512];
	int ret;

	*out = NULL;
	if (in->created)
		return fail_full(in, -EBUSY, "%s: backends can be opened only at create time",
				 in->name);
	ret = find_backend(in, key, &g, &p, where, sizeof(where));
	if (ret)
		return ret;
	ni = ni_new(in, p, key, p->d->name);
	if (!ni)
		return fail_full(in, -ENOMEM, "%s: out of memory", in->name);
	ret = devices_fill_cfg(p, in->conf, g, ni->bin.name, ni->bin.cfg, &ni->bin.strs,
			       &ni->bin.n_strs, in->err, sizeof(in->err));
	if (ret) {
		in->err_full = true;
		goto fail;
	}
	ret = expand_paths(ni, in->conf, why, sizeof(why));
	if (ret) {
		fail_full(in, ret, "%s: %s: %s", where, ni->bin.name, why);
		goto fail;
	}
	ret = ni->n.ops->open(&ni->bin, &devices_host, ni->bin.cfg, &ni->bin.priv);
	if (ret) {
		fail_full(in, ret < 0 ? ret : -EINVAL, "%s: %s: %s", where, ni->bin.name,
			  ni->bin.err[0] ? ni->bin.err : strerror(ret < 0 ? -ret : EINVAL));
		goto fail;
	}
	ni->opened = true;
	ni->n.priv = ni->bin.priv;
	ni->n.ops->info(ni->n.priv, &ni->n.info);
	ret = info_check(ni, why, sizeof(why));
	if (ret) {
		fail_full(in, ret, "%s: %s: %s", where, ni->bin.name, why);
		goto fail;
	}
	log_msg(CUB_LOG_DEBUG, ni->bin.name, "vnet header %s, offloads %#x, mtu %u, link %s",
		ni->n.info.vnet_hdr ? "yes" : "no", ni->n.info.offloads, ni->n.info.mtu,
		ni->n.info.link_up ? "up" : "down");
	ni->next = in->nets;
	in->nets = ni;
	*out = &ni->n;
	return 0;
fail:
	ni_free(ni);
	return ret < 0 ? ret : -EINVAL;
}

static void net_close(struct cub_inst *in, struct cub_net *n)
{
	for (struct net_inst **pp = &in->nets; *pp; pp = &(*pp)->next) {
		struct net_inst *ni = *pp;

		if (&ni->n == n) {
			*pp = ni->next;
			ni_free(ni);
			return;
		}
	}
}

void net_close_all(struct cub_inst *in)
{
	while (in->nets) {
		struct net_inst *ni = in->nets;

		in->nets = ni->next;
		ni_free(ni);
	}
}

bool net_holds(const struct cub_inst *in, const char *key)
{
	for (const struct net_inst *ni = in->nets; ni; ni = ni->next)
		if (!strcmp(ni->key, key))
			return true;
	return false;
}

const struct cub_net_host devices_net_host = {
	.size = sizeof(struct cub_net_host),
	.open = net_open,
	.close = net_close,
};
