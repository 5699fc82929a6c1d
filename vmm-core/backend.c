/* SPDX-License-Identifier: Apache-2.0 */
/* What storage.c and net.c share: find a device's `backend` group, make the
 * backend its own struct cub_inst, fill its cfg, open it, and close it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "event.h"
#include "vm.h"

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

static void backend_free(struct backend *b)
{
	struct cub_inst *bi = &b->bin;

	if (b->kind->release)
		b->kind->release(b);
	while (bi->n_watched) {
		int fd = bi->watched[--bi->n_watched];

		if (bi->vm && bi->vm->ev)
			event_unwatch(bi->vm->ev, fd);
	}
	for (unsigned i = 0; i < bi->n_strs; i++)
		free(bi->strs[i]);
	free(bi->strs);
	free(bi->cfg);
	free(bi->name);
	free(b->key);
	free(b);
}

static bool is_path_param(const struct backend_kind *k, const char *name)
{
	for (const char *const *pp = k->path_params; *pp; pp++)
		if (!strcmp(name, *pp))
			return true;
	return false;
}

/* Paths in a backend's cfg read like boot.kernel's: ~, ${VAR}, and relative
 * to the config file's folder. */
static int expand_paths(struct backend *b, const struct vm_config *c, char *why, size_t len)
{
	const struct cub_plugin *d = b->bin.plugin->d;

	for (unsigned i = 0; i < d->n_params; i++) {
		const struct cub_param *p = &d->params[i];
		char *slot = (char *)b->bin.cfg + p->offset;
		const char *v;
		char *x, **strs;

		if (p->type != CUB_P_STR || !is_path_param(b->kind, p->name))
			continue;
		memcpy(&v, slot, sizeof(v));
		if (!v || !*v)
			continue;
		x = config_expand_path(v, c->dir ? c->dir : ".", why, len);
		if (!x)
			return -EINVAL;
		strs = realloc(b->bin.strs, (b->bin.n_strs + 1) * sizeof(*strs));
		if (!strs) {
			free(x);
			snprintf(why, len, "out of memory");
			return -ENOMEM;
		}
		b->bin.strs = strs;
		strs[b->bin.n_strs++] = x;
		memcpy(slot, &x, sizeof(x));
	}
	return 0;
}

static struct backend *backend_new(struct cub_inst *in, const struct backend_kind *k,
				   const struct plugin *p, const char *key)
{
	struct backend *b = calloc(1, k->size);
	const char *id = in->dc ? in->dc->id : in->name;
	const char *type = p->d->name;
	int n;

	if (!b)
		return NULL;
	b->kind = k;
	if (!strcmp(key, "backend"))
		n = asprintf(&b->bin.name, "%s[%s]", type, id);
	else
		n = asprintf(&b->bin.name, "%s[%s.%s]", type, id, key);
	if (n < 0)
		b->bin.name = NULL;
	b->key = strdup(key);
	b->bin.cfg = calloc(1, p->d->cfg_size ? p->d->cfg_size : 1);
	b->bin.vm = in->vm;
	b->bin.plugin = p;
	b->bin.reg = in->reg;
	b->bin.conf = in->conf;
	b->bin.created = true; /* a backend never claims bus regions */
	if (n < 0 || !b->key || !b->bin.cfg || (k->init && k->init(b, in))) {
		backend_free(b);
		return NULL;
	}
	return b;
}

/* The group @key of the device's config, checked, and the plugin it names. */
static int find_backend(struct cub_inst *in, const char *key, const struct backend_kind *k,
			struct backend *const *list, const config_setting_t **gout,
			const struct plugin **pout, char *where, size_t wlen)
{
	const struct vm_config *c = in->conf;
	const config_setting_t *g, *t;
	const struct plugin *p;
	const char *type;

	if (!c || !in->dc || !in->dc->group || !in->reg)
		return fail_full(in, -ENOENT, "%s: no config to find a '%s' group in", in->name,
				 key);
	config_where(c, in->dc->group, where, wlen);
	g = config_setting_get_member(in->dc->group, key);
	if (!g)
		return fail_full(in, -ENOENT, "%s: %s: needs %s = { %s }", where, in->name, key,
				 k->needs);
	config_where(c, g, where, wlen);
	if (!config_setting_is_group(g))
		return fail_full(in, -EINVAL, "%s: %s: '%s' must be a group { %s }", where,
				 in->name, key, k->group);
	if (backend_holds(*list, key))
		return fail_full(in, -EBUSY, "%s: %s: '%s' is already open", where, in->name, key);
	t = config_setting_get_member(g, "type");
	if (!t || config_setting_type(t) != CONFIG_TYPE_STRING)
		return fail_full(in, -EINVAL,
				 "%s: %s: '%s' needs type = \"BACKEND\" (a string; see `cubicle plugins`)",
				 where, in->name, key);
	type = config_setting_get_string(t);
	p = registry_find(in->reg, k->kind, type);
	if (!p)
		return fail_full(in, -ENOENT,
				 "%s: %s: no %s plugin named '%s' (`cubicle plugins` lists those found)",
				 where, in->name, k->noun, type);
	if (!k->ops_complete(p->d->ops))
		return fail_full(in, -EINVAL, "%s: %s: %s plugin '%s' lacks %s", where, in->name,
				 k->noun, type, k->ops_names);
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

int backend_open(struct cub_inst *in, const char *key, const struct backend_kind *k,
		 struct backend **list, const void *arg, struct backend **out)
{
	const config_setting_t *g = NULL;
	const struct plugin *p = NULL;
	struct backend *b;
	char where[512], why[512];
	int ret;

	*out = NULL;
	if (in->created)
		return fail_full(in, -EBUSY, "%s: backends can be opened only at create time",
				 in->name);
	ret = find_backend(in, key, k, list, &g, &p, where, sizeof(where));
	if (ret)
		return ret;
	b = backend_new(in, k, p, key);
	if (!b)
		return fail_full(in, -ENOMEM, "%s: out of memory", in->name);
	ret = devices_fill_cfg(p, in->conf, g, b->bin.name, b->bin.cfg, &b->bin.strs,
			       &b->bin.n_strs, in->err, sizeof(in->err));
	if (ret) {
		in->err_full = true;
		goto fail;
	}
	ret = expand_paths(b, in->conf, why, sizeof(why));
	if (ret) {
		fail_full(in, ret, "%s: %s: %s", where, b->bin.name, why);
		goto fail;
	}
	ret = k->open(b, arg);
	if (ret) {
		fail_full(in, ret < 0 ? ret : -EINVAL, "%s: %s: %s", where, b->bin.name,
			  b->bin.err[0] ? b->bin.err : strerror(ret < 0 ? -ret : EINVAL));
		goto fail;
	}
	b->opened = true;
	ret = k->info(b, why, sizeof(why));
	if (ret) {
		fail_full(in, ret, "%s: %s: %s", where, b->bin.name, why);
		goto fail;
	}
	b->next = *list;
	*list = b;
	*out = b;
	return 0;
fail:
	backend_free(b);
	return ret < 0 ? ret : -EINVAL;
}

void backend_close(struct backend **list, struct backend *b)
{
	for (struct backend **pp = list; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			backend_free(b);
			return;
		}
}

void backend_close_all(struct backend **list)
{
	while (*list) {
		struct backend *b = *list;

		*list = b->next;
		backend_free(b);
	}
}

bool backend_holds(const struct backend *list, const char *key)
{
	for (; list; list = list->next)
		if (!strcmp(list->key, key))
			return true;
	return false;
}

int backend_check_unused(struct cub_inst *in, char *err, size_t errlen)
{
	const config_setting_t *g;
	char where[512];

	if (!in->conf || !in->dc || !in->dc->group)
		return 0;
	g = config_setting_get_member(in->dc->group, "backend");
	if (!g)
		return 0;
	if (backend_holds(in->storages, "backend") || backend_holds(in->nets, "backend"))
		return 0;
	config_where(in->conf, g, where, sizeof(where));
	snprintf(err, errlen, "%s: %s: %s takes no backend", where, in->name,
		 in->plugin->d->name);
	return -EINVAL;
}
