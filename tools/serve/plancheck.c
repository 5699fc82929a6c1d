/* SPDX-License-Identifier: Apache-2.0 */
/* What a snapshot's config may name when a VMM that may be its guest's wrote
 * it: a jailed template build's snapshot against the build's VM file. */
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plancheck.h"

bool path_like(const char *v)
{
	size_t n = strlen(v);

	return v[0] == '/' || !strcmp(v, "..") || !strncmp(v, "../", 3) || strstr(v, "/../") ||
	       (n >= 3 && !strcmp(v + n - 3, "/.."));
}

struct strset {
	const char **v;
	unsigned n, cap;
};

static int strset_add(struct strset *s, const char *v)
{
	if (s->n == s->cap) {
		unsigned cap = s->cap ? 2 * s->cap : 32;
		const char **nv = realloc(s->v, cap * sizeof(*nv));

		if (!nv)
			return -1;
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = v;
	return 0;
}

static bool strset_has(const struct strset *s, const char *v)
{
	for (unsigned i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], v))
			return true;
	return false;
}

/* Every string value below @st (in libconfig's memory: valid while the
 * config is). */
static int collect(config_setting_t *st, struct strset *out, unsigned depth)
{
	int n = config_setting_length(st);

	if (depth > 64)
		return -1;
	if (config_setting_type(st) == CONFIG_TYPE_STRING)
		return strset_add(out, config_setting_get_string(st));
	for (int i = 0; i < n; i++)
		if (collect(config_setting_get_elem(st, (unsigned)i), out, depth + 1))
			return -1;
	return 0;
}

/* The first path-like string of @v not in @ok, or NULL. */
static const char *stray(json_t *v, const struct strset *ok, unsigned depth)
{
	const char *k, *bad;
	json_t *e;
	size_t i;

	if (depth > 64)
		return "(nested too deep)";
	if (json_is_string(v))
		return path_like(json_string_value(v)) && !strset_has(ok, json_string_value(v))
			       ? json_string_value(v)
			       : NULL;
	json_object_foreach(v, k, e)
		if ((bad = stray(e, ok, depth + 1)))
			return bad;
	json_array_foreach(v, i, e)
		if ((bad = stray(e, ok, depth + 1)))
			return bad;
	return NULL;
}

int plan_check_config(json_t *m, const char *cfg, char *const *sets, unsigned n_sets, char *msg,
		      size_t len)
{
	json_t *c = json_object_get(m, "config");
	const char *dir = json_string_value(json_object_get(c, "dir")), *slash = strrchr(cfg, '/'),
		   *bad;
	struct strset ok = { 0 };
	config_t lc;
	char want[4096];
	int ret = -1;

	/* what cubicle records: CONFIG's folder as it was named ("." for none) */
	if (slash)
		snprintf(want, sizeof(want), "%.*s", (int)(slash - cfg) + (slash == cfg), cfg);
	else
		snprintf(want, sizeof(want), ".");
	if (!json_is_object(c))
		return snprintf(msg, len, "the manifest has no config"), -1;
	if (!dir || strcmp(dir, want))
		return snprintf(msg, len, "config.dir \"%s\" is not %s's folder \"%s\"", dir ? dir : "",
				cfg, want),
		       -1;
	config_init(&lc);
	config_set_include_dir(&lc, want); /* @include as cubicle reads it */
	if (config_read_file(&lc, cfg) != CONFIG_TRUE) {
		snprintf(msg, len, "%s:%d: %s", config_error_file(&lc) ? config_error_file(&lc) : cfg,
			 config_error_line(&lc), config_error_text(&lc));
		goto out;
	}
	if (collect(config_root_setting(&lc), &ok, 0))
		goto oom;
	for (unsigned i = 0; i < n_sets; i++) {
		const char *eq = strchr(sets[i], '=');

		if (eq && strset_add(&ok, eq + 1))
			goto oom;
	}
	if ((bad = stray(json_object_get(c, "tree"), &ok, 0)))
		snprintf(msg, len, "config.tree names \"%s\", which neither %s nor a --set value does", bad,
			 cfg);
	else
		ret = 0;
	goto out;
oom:
	snprintf(msg, len, "out of memory");
out:
	free(ok.v);
	config_destroy(&lc);
	return ret;
}
