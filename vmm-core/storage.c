/* SPDX-License-Identifier: Apache-2.0 */
/* Storage backends for devices (h->storage): find the `backend` group in a
 * device's config, fill the named storage plugin's cfg, open and close it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubicle/storage.h"
#include "devices.h"
#include "event.h"
#include "vm.h"

/*
 * One open backend. The backend gets its own struct cub_inst, so its
 * messages carry its own name ("raw[disk0]") and its fd watches are its own;
 * it can never add regions (created is set before open).
 */
struct storage_inst {
	struct cub_storage s; /* what the device holds */
	struct cub_storage_ops ops; /* s.ops: the plugin's, cut to its ABI minor */
	struct cub_inst bin;  /* the backend's instance */
	char *key;            /* the group it came from, normally "backend" */
	bool opened;
	struct storage_inst *next;
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

static void si_free(struct storage_inst *si)
{
	const struct cub_storage_ops *ops = si->s.ops;
	struct cub_inst *b = &si->bin;

	if (si->opened)
		ops->close(b->priv);
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
	free(si->key);
	free(si);
}

/* Parameters that name files: path (raw, reflink), base and delta (reflink,
 * zstd-snap). */
static bool is_path_param(const char *name)
{
	return !strcmp(name, "path") || !strcmp(name, "base") || !strcmp(name, "delta");
}

/* Paths in a backend's cfg read like boot.kernel's: ~, ${VAR}, and relative
 * to the config file's folder. */
static int expand_paths(struct storage_inst *si, const struct vm_config *c, char *why,
			size_t len)
{
	const struct cub_plugin *d = si->bin.plugin->d;

	for (unsigned i = 0; i < d->n_params; i++) {
		const struct cub_param *p = &d->params[i];
		char *slot = (char *)si->bin.cfg + p->offset;
		const char *v;
		char *x, **strs;

		if (p->type != CUB_P_STR || !is_path_param(p->name))
			continue;
		memcpy(&v, slot, sizeof(v));
		if (!v || !*v)
			continue;
		x = config_expand_path(v, c->dir ? c->dir : ".", why, len);
		if (!x)
			return -EINVAL;
		strs = realloc(si->bin.strs, (si->bin.n_strs + 1) * sizeof(*strs));
		if (!strs) {
			free(x);
			snprintf(why, len, "out of memory");
			return -ENOMEM;
		}
		si->bin.strs = strs;
		strs[si->bin.n_strs++] = x;
		memcpy(slot, &x, sizeof(x));
	}
	return 0;
}

/*
 * Devices call a backend through a copy of its ops holding only the members
 * its ABI minor defines: a plugin built for 1.0 or 1.1 has a shorter table,
 * so snapshot and rollback (1.2) are read only from plugins built for 1.2 or
 * later, and are NULL (-EOPNOTSUPP for the caller) for older ones.
 */
static void ops_copy(struct cub_storage_ops *dst, const struct cub_plugin *d)
{
	size_t n = offsetof(struct cub_storage_ops, snapshot); /* 1.0, 1.1 */

	if (d->abi_minor >= 2) /* a minor that appends ops adds its own step here */
		n = offsetof(struct cub_storage_ops, rollback) + sizeof(dst->rollback);
	memset(dst, 0, sizeof(*dst));
	memcpy(dst, d->ops, n);
}

static bool ops_complete(const struct cub_storage_ops *o)
{
	return o->open && o->close && o->info && o->readv && o->writev && o->flush;
}

/* Check what a backend says about itself before a device relies on it. */
static int info_check(struct storage_inst *si, char *why, size_t len)
{
	const struct cub_storage_info *i = &si->s.info;

	if (i->size % 512) {
		snprintf(why, len, "backend reports %llu bytes, not a multiple of 512",
			 (unsigned long long)i->size);
		return -EINVAL;
	}
	if (i->block_size < 512 || i->block_size > 65536 ||
	    (i->block_size & (i->block_size - 1))) {
		snprintf(why, len, "backend reports block size %u; expected a power of two 512..65536",
			 i->block_size);
		return -EINVAL;
	}
	return 0;
}

static struct storage_inst *si_new(struct cub_inst *in, const struct plugin *p, const char *key,
				   const char *type)
{
	struct storage_inst *si = calloc(1, sizeof(*si));
	const char *id = in->dc ? in->dc->id : in->name;
	int n;

	if (!si)
		return NULL;
	if (!strcmp(key, "backend"))
		n = asprintf(&si->bin.name, "%s[%s]", type, id);
	else
		n = asprintf(&si->bin.name, "%s[%s.%s]", type, id, key);
	si->key = strdup(key);
	si->bin.cfg = calloc(1, p->d->cfg_size ? p->d->cfg_size : 1);
	if (n < 0 || !si->key || !si->bin.cfg) {
		if (n < 0)
			si->bin.name = NULL;
		si_free(si);
		return NULL;
	}
	si->bin.vm = in->vm;
	si->bin.plugin = p;
	si->bin.reg = in->reg;
	si->bin.conf = in->conf;
	si->bin.created = true; /* a backend never claims bus regions */
	ops_copy(&si->ops, p->d);
	si->s.ops = &si->ops;
	si->s.name = si->bin.name;
	return si;
}

static int storage_open(struct cub_inst *in, const char *key, bool ro, struct cub_storage **out)
{
	const struct vm_config *c = in->conf;
	const config_setting_t *g, *t;
	const struct plugin *p;
	struct storage_inst *si;
	char where[512], why[512];
	const char *type;
	int ret;

	*out = NULL;
	if (in->created)
		return fail_full(in, -EBUSY, "%s: backends can be opened only at create time",
				 in->name);
	if (!c || !in->dc || !in->dc->group || !in->reg)
		return fail_full(in, -ENOENT, "%s: no config to find a '%s' group in", in->name,
				 key);
	config_where(c, in->dc->group, where, sizeof(where));
	g = config_setting_get_member(in->dc->group, key);
	if (!g)
		return fail_full(in, -ENOENT,
				 "%s: %s: needs %s = { type = \"raw\"; path = \"disk.img\"; }",
				 where, in->name, key);
	config_where(c, g, where, sizeof(where));
	if (!config_setting_is_group(g))
		return fail_full(in, -EINVAL,
				 "%s: %s: '%s' must be a group { type = \"raw\"; path = \"...\"; }",
				 where, in->name, key);
	for (si = in->storages; si; si = si->next)
		if (!strcmp(si->key, key))
			return fail_full(in, -EBUSY, "%s: %s: '%s' is already open", where,
					 in->name, key);
	t = config_setting_get_member(g, "type");
	if (!t || config_setting_type(t) != CONFIG_TYPE_STRING)
		return fail_full(in, -EINVAL,
				 "%s: %s: '%s' needs type = \"BACKEND\" (a string; see `cubicle plugins`)",
				 where, in->name, key);
	type = config_setting_get_string(t);
	p = registry_find(in->reg, CUB_KIND_STORAGE, type);
	if (!p)
		return fail_full(in, -ENOENT,
				 "%s: %s: no storage plugin named '%s' (`cubicle plugins` lists those found)",
				 where, in->name, type);
	if (!ops_complete(p->d->ops))
		return fail_full(in, -EINVAL,
				 "%s: %s: storage plugin '%s' lacks open, close, info, readv, writev or flush",
				 where, in->name, type);
	/* devices_fill_cfg passes id and backend over: neither means anything here. */
	if ((t = config_setting_get_member(g, "id")) || (t = config_setting_get_member(g, "backend"))) {
		config_where(c, t, where, sizeof(where));
		return fail_full(in, -EINVAL, "%s: %s[%s]: a backend takes no '%s'", where, type,
				 in->dc->id, config_setting_name(t));
	}
	si = si_new(in, p, key, type);
	if (!si)
		return fail_full(in, -ENOMEM, "%s: out of memory", in->name);
	ret = devices_fill_cfg(p, c, g, si->bin.name, si->bin.cfg, &si->bin.strs,
			       &si->bin.n_strs, in->err, sizeof(in->err));
	if (ret) {
		in->err_full = true;
		goto fail;
	}
	ret = expand_paths(si, c, why, sizeof(why));
	if (ret) {
		fail_full(in, ret, "%s: %s: %s", where, si->bin.name, why);
		goto fail;
	}
	ret = si->s.ops->open(&si->bin, &devices_host, si->bin.cfg, ro, &si->bin.priv);
	if (ret) {
		fail_full(in, ret < 0 ? ret : -EINVAL, "%s: %s: %s", where, si->bin.name,
			  si->bin.err[0] ? si->bin.err : strerror(ret < 0 ? -ret : EINVAL));
		goto fail;
	}
	si->opened = true;
	si->s.priv = si->bin.priv;
	si->s.ops->info(si->s.priv, &si->s.info);
	si->s.info.read_only |= ro;
	ret = info_check(si, why, sizeof(why));
	if (ret) {
		fail_full(in, ret, "%s: %s: %s", where, si->bin.name, why);
		goto fail;
	}
	log_msg(CUB_LOG_DEBUG, si->bin.name, "%llu bytes, block %u%s%s%s",
		(unsigned long long)si->s.info.size, si->s.info.block_size,
		si->s.info.read_only ? ", read-only" : "",
		si->s.info.can_discard ? ", discard" : "",
		si->s.info.can_write_zeroes ? ", write-zeroes" : "");
	si->next = in->storages;
	in->storages = si;
	*out = &si->s;
	return 0;
fail:
	si_free(si);
	return ret < 0 ? ret : -EINVAL;
}

static void storage_close(struct cub_inst *in, struct cub_storage *s)
{
	for (struct storage_inst **pp = &in->storages; *pp; pp = &(*pp)->next) {
		struct storage_inst *si = *pp;

		if (&si->s == s) {
			*pp = si->next;
			si_free(si);
			return;
		}
	}
}

void storage_close_all(struct cub_inst *in)
{
	while (in->storages) {
		struct storage_inst *si = in->storages;

		in->storages = si->next;
		si_free(si);
	}
}

int storage_check_unused(struct cub_inst *in, char *err, size_t errlen)
{
	const config_setting_t *g;
	char where[512];

	if (!in->conf || !in->dc || !in->dc->group)
		return 0;
	g = config_setting_get_member(in->dc->group, "backend");
	if (!g)
		return 0;
	for (struct storage_inst *si = in->storages; si; si = si->next)
		if (!strcmp(si->key, "backend"))
			return 0;
	if (net_holds(in, "backend"))
		return 0;
	config_where(in->conf, g, where, sizeof(where));
	snprintf(err, errlen, "%s: %s: %s takes no backend", where, in->name,
		 in->plugin->d->name);
	return -EINVAL;
}

const struct cub_storage_host devices_storage_host = {
	.size = sizeof(struct cub_storage_host),
	.open = storage_open,
	.close = storage_close,
};
