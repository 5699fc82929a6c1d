/* SPDX-License-Identifier: Apache-2.0 */
/* Firecracker's RateLimiter objects: checked, turned into a config group, and applied to a running device. */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "api.h"
#include "devices.h"
#include "loader.h"
#include "ratelimit.h"

/* One TokenBucket { size, one_time_burst, refill_time }: all integers >= 0. */
static int bucket(const json_t *o, const char *what, const char *name, struct tb_cfg *t, char *err,
		  size_t errlen)
{
	static const char *const keys[] = { "size", "one_time_burst", "refill_time" };
	uint64_t *dst[] = { &t->size, &t->one_time_burst, &t->refill_time_ms };
	const char *key;
	json_t *v;

	if (!o || json_is_null(o))
		return 0;
	if (!json_is_object(o))
		return errf(err, errlen, 400, "%s: '%s' must be an object (a TokenBucket)", what, name);
	json_object_foreach((json_t *)o, key, v) {
		unsigned i = 0;

		while (i < 3 && strcmp(keys[i], key))
			i++;
		if (i == 3)
			return errf(err, errlen, 400,
				    "%s: %s: unknown field '%s'; expected size, one_time_burst, refill_time",
				    what, name, key);
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return errf(err, errlen, 400, "%s: %s.%s must be an integer >= 0", what, name,
				    key);
		*dst[i] = (uint64_t)json_integer_value(v);
	}
	if (!json_object_get(o, "size") || !json_object_get(o, "refill_time"))
		return errf(err, errlen, 400, "%s: %s needs 'size' and 'refill_time'", what, name);
	return 0;
}

int fc_rl_parse(const json_t *o, const char *what, struct rl_cfg *c, char *err, size_t errlen)
{
	const char *key, *bad;
	json_t *v;
	int ret;

	memset(c, 0, sizeof(*c));
	if (!o || json_is_null(o))
		return 0;
	if (!json_is_object(o))
		return errf(err, errlen, 400, "%s: 'rate_limiter' must be an object", what);
	json_object_foreach((json_t *)o, key, v)
		if (strcmp(key, "bandwidth") && strcmp(key, "ops"))
			return errf(err, errlen, 400,
				    "%s: rate_limiter: unknown field '%s'; expected bandwidth, ops", what,
				    key);
	ret = bucket(json_object_get(o, "bandwidth"), what, "bandwidth", &c->bandwidth, err, errlen);
	ret = ret ?: bucket(json_object_get(o, "ops"), what, "ops", &c->ops, err, errlen);
	if (ret)
		return ret;
	if ((bad = rl_cfg_check(c)))
		return errf(err, errlen, 400, "%s: rate_limiter: %s", what, bad);
	return 0;
}

int fc_rl_group(struct arena *ar, const char *where, struct cnode *parent, const char *name,
		const json_t *o)
{
	static const char *const buckets[] = { "bandwidth", "ops" };
	static const char *const keys[] = { "size", "one_time_burst", "refill_time" };
	struct cnode *rl = cnode_new(ar, CN_GROUP, name, where);

	if (!rl || cnode_add(ar, parent, rl))
		return -ENOMEM;
	for (unsigned i = 0; i < 2; i++) {
		const json_t *b = json_object_get(o, buckets[i]);
		struct cnode *bg;

		if (!json_is_object(b))
			continue;
		bg = cnode_new(ar, CN_GROUP, buckets[i], where);
		if (!bg || cnode_add(ar, rl, bg))
			return -ENOMEM;
		for (unsigned k = 0; k < 3; k++) {
			const json_t *v = json_object_get(b, keys[k]);
			struct cnode *n;

			if (!v)
				continue;
			n = cnode_new(ar, CN_INT, keys[k], where);
			if (!n || cnode_add(ar, bg, n))
				return -ENOMEM;
			n->i = json_integer_value(v);
		}
	}
	return 0;
}

/* The limiter param @param of the instance with id @id ("virtio-blk[ID]"). */
static struct cub_rl *find_rl(const struct api_vm *vm, const char *id, const char *param)
{
	size_t il = strlen(id);

	for (unsigned i = 0; i < vm->n_insts; i++) {
		const struct cub_inst *d = vm->insts[i];
		const struct plugin *p = d->plugin;
		const char *br = d->name ? strchr(d->name, '[') : NULL;

		if (!p || !d->cfg || !br || strncmp(br + 1, id, il) || strcmp(br + 1 + il, "]"))
			continue;
		for (unsigned k = 0; k < p->d->n_params; k++) {
			const struct cub_param *pr = &p->params[k];
			struct cub_rl *rl;

			if (pr->type != CUB_P_RATELIMIT || strcmp(pr->name, param))
				continue;
			memcpy(&rl, (const char *)d->cfg + pr->offset, sizeof(rl));
			return rl;
		}
	}
	return NULL;
}

int fc_rl_patch(struct api *a, const char *id, const char *param, const json_t *o,
		const char *what, char *err, size_t errlen)
{
	struct rl_cfg c;
	struct cub_rl *rl;
	int ret = fc_rl_parse(o, what, &c, err, errlen);

	if (ret)
		return ret;
	rl = find_rl(api_vm(a), id, param);
	if (!rl)
		return errf(err, errlen, 400, "%s: the running VM has no device '%s' with a %s", what,
			    id, param);
	cub_rl_set(rl, &c);
	return 0;
}
