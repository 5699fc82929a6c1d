/* SPDX-License-Identifier: Apache-2.0 */
/* What storage.c and net.c share: take a backend the plan already resolved
 * and checked, make it its own struct cub_inst, open it, and close it. */
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
	free(b);
}

static struct backend *backend_new(struct cub_inst *in, const struct backend_kind *k,
				   const struct plan_backend *pb)
{
	struct backend *b = calloc(1, k->size);

	if (!b)
		return NULL;
	b->kind = k;
	b->key = pb->key;
	b->bin.name = pb->inst.name;
	b->bin.cfg = pb->inst.cfg;
	b->bin.vm = in->vm;
	b->bin.plugin = pb->inst.plugin;
	b->bin.plan = in->plan;
	b->bin.pi = &pb->inst;
	b->bin.created = true; /* a backend never claims bus regions */
	if (k->init && k->init(b, in)) {
		backend_free(b);
		return NULL;
	}
	return b;
}

int backend_open(struct cub_inst *in, const char *key, const struct backend_kind *k,
		 struct backend **list, const void *arg, struct backend **out)
{
	const struct plan_backend *pb = plan_backend(in->pi, key);
	const char *where = in->pi ? in->pi->where : in->name;
	struct backend *b;
	char why[512];
	int ret;

	*out = NULL;
	if (in->created)
		return fail_full(in, -EBUSY, "%s: backends can be opened only at create time",
				 in->name);
	if (!pb)
		return fail_full(in, -ENOENT, "%s: %s: needs %s = { type = \"...\"; ... } (a %s backend)",
				 where, in->name, key, k->noun);
	where = pb->inst.where;
	if (pb->kind != k->kind)
		return fail_full(in, -EINVAL, "%s: %s: '%s' names %s, a %s plugin; expected a %s backend",
				 where, in->name, key, pb->inst.plugin->d->name,
				 loader_kind_name(pb->kind), k->noun);
	if (backend_holds(*list, key))
		return fail_full(in, -EBUSY, "%s: %s: '%s' is already open", where, in->name, key);
	b = backend_new(in, k, pb);
	if (!b)
		return fail_full(in, -ENOMEM, "%s: out of memory", in->name);
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
	for (unsigned i = 0; in->pi && i < in->pi->n_backends; i++) {
		const struct plan_backend *pb = &in->pi->backends[i];

		if (backend_holds(in->storages, pb->key) || backend_holds(in->nets, pb->key))
			continue;
		return errf(err, errlen, -EINVAL, "%s: %s: %s takes no %s", pb->inst.where, in->name,
			    in->plugin->d->name, pb->key);
	}
	return 0;
}
