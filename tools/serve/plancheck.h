/* SPDX-License-Identifier: Apache-2.0 */
/* What a snapshot's config may name when its VMM may have been its guest's (plancheck.c). */
#ifndef CUBICLE_SERVE_PLANCHECK_H
#define CUBICLE_SERVE_PLANCHECK_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Whether a config value is a path that may leave its config's folder:
 * it starts with '/' or climbs with "..". */
bool path_like(const char *v);

/*
 * The snapshot manifest @m written by a VMM started from the VM file @cfg
 * with the --set values @sets ("PATH=VALUE"): its config.dir must be what
 * cubicle records for @cfg (its folder as named, "." for none), so relative
 * paths stay where the file put them, and every path-like string of its
 * config.tree must be one @cfg (any of its string values) or a --set value
 * holds. 0, or -1 with @msg naming the first that is not.
 */
int plan_check_config(json_t *m, const char *cfg, char *const *sets, unsigned n_sets, char *msg,
		      size_t len);

#endif
