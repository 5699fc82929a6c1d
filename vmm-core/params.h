/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin parameters: the one filler that turns a group of values into a
 * plugin's cfg struct, used by the plan stage and by the unit tests' fake
 * host alike. */
#ifndef CUBICLE_PARAMS_H
#define CUBICLE_PARAMS_H

#include "cnode.h"
#include "cubicle/plugin.h"

/* A plugin's parameter table in this host's layout, whatever headers the
 * plugin was built with (min and max NULL before ABI 1.4). NULL when out
 * of memory; free() it. */
struct cub_param *params_normalize(const struct cub_plugin *d);

/* "g" of a dotted name "g.key", into buf; false for a plain name. */
bool params_group_of(const char *name, char *buf, size_t len);

struct params_ctx {
	struct arena *ar;  /* owns the strings and arrays put into cfg */
	const char *dir;   /* base of relative CUB_P_PATH values; NULL: keep paths as given */
	const char *inst;  /* "virtio-blk[disk0]", for messages */
	const char *plugin; /* "virtio-blk": "virtio-blk takes a, b" */
	const char *where; /* where the instance's group is, for messages */
	const char *const *skip; /* keys of the group the caller handles itself */
	bool partial;      /* a missing required parameter stays zero (test harnesses) */
};

/*
 * Fill cfg (zeroed, d->cfg_size bytes) from each parameter's default and
 * the group g (NULL: defaults only). Unknown keys, wrong types, values out
 * of range and missing required parameters: -EINVAL and one line
 * "WHERE: INST: what is wrong; what was expected" in err. CUB_P_STORAGE and
 * CUB_P_NET slots get the backend group's `type`; the group's other keys
 * are the plan's to check against that backend.
 */
int params_fill(const struct cub_param *params, unsigned n, const struct params_ctx *ctx,
		const struct cnode *g, void *cfg, char *err, size_t errlen);

/* A leading "~/" and ${NAME} expanded; a relative result is taken against
 * dir (none if dir is NULL). NULL with the reason in err. */
char *params_expand_path(struct arena *ar, const char *in, const char *dir, char *err,
			 size_t errlen);

const char *params_type_name(enum cub_ptype t);

#endif
