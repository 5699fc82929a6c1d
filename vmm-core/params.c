/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin parameters: defaults and a group of values into a plugin's cfg
 * struct, every value checked by its declared type and range. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "ratelimit.h"
#include "size.h"

/* struct cub_param as plugins built for ABI 1.0 to 1.3 lay it out. */
#define PARAM_SIZE_1_0 offsetof(struct cub_param, min)

struct cub_param *params_normalize(const struct cub_plugin *d)
{
	size_t stride = sizeof(struct cub_param);
	struct cub_param *v = calloc(d->n_params + 1, sizeof(*v));
	bool has_size = d->size >= offsetof(struct cub_plugin, param_size) + sizeof(d->param_size);

	if (!v)
		return NULL;
	if (has_size && d->param_size)
		stride = d->param_size;
	else if (d->abi_minor < 4)
		stride = PARAM_SIZE_1_0;
	for (unsigned i = 0; i < d->n_params; i++) {
		const char *src = (const char *)d->params + i * stride;

		memcpy(&v[i], src, stride < sizeof(*v) ? stride : sizeof(*v));
	}
	return v;
}

bool params_group_of(const char *name, char *buf, size_t len)
{
	const char *dot = strchr(name, '.');

	if (!dot)
		return false;
	snprintf(buf, len, "%.*s", (int)(dot - name), name);
	return true;
}

const char *params_type_name(enum cub_ptype t)
{
	switch (t) {
	case CUB_P_BOOL: return "bool";
	case CUB_P_INT: return "int";
	case CUB_P_U64: return "u64";
	case CUB_P_SIZE: return "size";
	case CUB_P_STR: return "string";
	case CUB_P_ENUM: return "enum";
	case CUB_P_STRV: return "strings";
	case CUB_P_PATH: return "path";
	case CUB_P_STORAGE: return "storage";
	case CUB_P_NET: return "net";
	case CUB_P_RATELIMIT: return "ratelimit";
	}
	return "?";
}

char *params_expand_path(struct arena *ar, const char *in, const char *dir, char *err,
			 size_t errlen)
{
	char *out = NULL, *r;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);
	const char *p = in;

	if (!f) {
		errf(err, errlen, 0, "out of memory");
		return NULL;
	}
	if (p[0] == '~' && (p[1] == '/' || !p[1])) {
		const char *home = getenv("HOME");

		if (!home || !*home) {
			errf(err, errlen, 0, "'%s': HOME is not set, cannot expand '~'", in);
			goto fail;
		}
		fputs(home, f);
		p++;
	} else if (p[0] != '/' && !(p[0] == '$' && p[1] == '{') && dir && *dir) {
		fprintf(f, "%s/", dir);
	}
	while (*p) {
		if (p[0] == '$' && p[1] == '{') {
			const char *end = strchr(p + 2, '}');
			char name[128];
			const char *val;

			if (!end || end == p + 2 || (size_t)(end - (p + 2)) >= sizeof(name)) {
				errf(err, errlen, 0, "'%s': malformed ${NAME}", in);
				goto fail;
			}
			snprintf(name, sizeof(name), "%.*s", (int)(end - (p + 2)), p + 2);
			val = getenv(name);
			if (!val) {
				errf(err, errlen, 0, "'%s': environment variable %s is not set", in,
				     name);
				goto fail;
			}
			fputs(val, f);
			p = end + 1;
		} else {
			fputc(*p++, f);
		}
	}
	if (fclose(f)) {
		free(out);
		errf(err, errlen, 0, "out of memory");
		return NULL;
	}
	r = arena_strdup(ar, out);
	free(out);
	if (!r)
		errf(err, errlen, 0, "out of memory");
	return r;
fail:
	fclose(f);
	free(out);
	return NULL;
}

/* ---- one value ---- */

static const char *expected(const struct cub_param *p)
{
	switch (p->type) {
	case CUB_P_BOOL: return "true or false";
	case CUB_P_INT: return "an integer";
	case CUB_P_U64: return "a non-negative integer";
	case CUB_P_SIZE: return "a size (bytes, or a string like \"64M\")";
	case CUB_P_STR: return "a string";
	case CUB_P_PATH: return "a path (a string)";
	case CUB_P_ENUM: return "one of: ";
	case CUB_P_STRV: return "a list of strings, e.g. [ \"a\", \"b\" ]";
	case CUB_P_STORAGE: return "a storage backend group { type = \"raw\"; ... }";
	case CUB_P_NET: return "a net backend group { type = \"socket\"; ... }";
	case CUB_P_RATELIMIT:
		return "a group { bandwidth = { size = ...; refill_time = MS; }; ops = { ... }; }";
	}
	return "?";
}

static int bad_type(const struct cub_param *p, const char *why_extra, char *why, size_t len)
{
	char list[256] = "";

	if (p->type == CUB_P_ENUM) {
		for (int i = 0; p->choices && p->choices[i]; i++) {
			strncat(list, p->choices[i], sizeof(list) - strlen(list) - 5);
			if (p->choices[i + 1])
				strcat(list, ", ");
		}
	}
	return errf(why, len, -EINVAL, "'%s' must be %s%s%s", p->name, expected(p), list,
		    why_extra);
}

/* An integer-like value: v as int64 (INT) or uint64 (U64, SIZE). */
static int get_num(const struct cub_param *p, const struct cnode *v, const char *text,
		   uint64_t *out, char *why, size_t len)
{
	bool sgn = p->type == CUB_P_INT;
	char *end;

	if (v && v->type == CN_INT) {
		if (!sgn && v->i < 0)
			return errf(why, len, -EINVAL, "'%s' is %" PRId64 "; it must not be negative",
				    p->name, v->i);
		*out = (uint64_t)v->i;
		return 0;
	}
	if (v && v->type != CN_TEXT && !(p->type == CUB_P_SIZE && v->type == CN_STR))
		return bad_type(p, "", why, len);
	if (p->type == CUB_P_SIZE) {
		int r = size_parse(text, out);

		if (r == -ERANGE)
			return errf(why, len, -EINVAL, "'%s' is %s, past 2^64 bytes", p->name, text);
		return r ? bad_type(p, v ? "" : " (bad default in plugin)", why, len) : 0;
	}
	errno = 0;
	if (sgn)
		*out = (uint64_t)strtoll(text, &end, 0);
	else
		*out = strtoull(text, &end, 0);
	if (errno == ERANGE)
		return errf(why, len, -EINVAL, "'%s' is %s; expected %s within 64 bits", p->name,
			    text, expected(p));
	if (!*text || *end || errno || (!sgn && strchr(text, '-')))
		return bad_type(p, v ? "" : " (bad default in plugin)", why, len);
	return 0;
}

static int check_range(const struct cub_param *p, uint64_t val, char *why, size_t len)
{
	const char *b[2] = { p->min, p->max };
	uint64_t lim[2] = { 0, UINT64_MAX };
	bool sgn = p->type == CUB_P_INT;

	if (!p->min && !p->max)
		return 0;
	if (sgn)
		lim[0] = (uint64_t)INT64_MIN, lim[1] = (uint64_t)INT64_MAX;
	for (int i = 0; i < 2; i++) {
		struct cub_param q = *p;

		q.min = q.max = NULL;
		if (b[i] && get_num(&q, NULL, b[i], &lim[i], why, len))
			return errf(why, len, -EINVAL, "'%s': bad %s \"%s\" in plugin", p->name,
				    i ? "max" : "min", b[i]);
	}
	if (sgn ? ((int64_t)val >= (int64_t)lim[0] && (int64_t)val <= (int64_t)lim[1])
		: (val >= lim[0] && val <= lim[1]))
		return 0;
	if (sgn)
		return errf(why, len, -EINVAL, "'%s' is %" PRId64 "; expected %s%s%s%s", p->name,
			    (int64_t)val, p->min ? p->min : "", p->min && p->max ? " to " : "",
			    !p->min ? "at most " : !p->max ? " or more" : "", p->max ? p->max : "");
	return errf(why, len, -EINVAL, "'%s' is %" PRIu64 "; expected %s%s%s%s", p->name, val,
		    p->min ? p->min : "", p->min && p->max ? " to " : "",
		    !p->min ? "at most " : !p->max ? " or more" : "", p->max ? p->max : "");
}

/* A list of strings: from a config list or the text "a,b" ("" is empty). */
static int get_strv(const struct cub_param *p, const struct params_ctx *ctx,
		    const struct cnode *v, const char *text, const char ***out, char *why,
		    size_t len)
{
	const char **sv;
	unsigned n = 0;

	if (v && v->type == CN_LIST) {
		n = v->n_kids;
		for (unsigned i = 0; i < n; i++)
			if (v->kids[i]->type != CN_STR && v->kids[i]->type != CN_TEXT)
				return bad_type(p, "", why, len);
	} else if (v && v->type != CN_TEXT) {
		return bad_type(p, "", why, len);
	} else if (*text) {
		n = 1;
		for (const char *c = text; *c; c++)
			n += *c == ',';
	}
	sv = arena_alloc(ctx->ar, (n + 1) * sizeof(*sv));
	if (!sv)
		return errf(why, len, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < n; i++) {
		if (v && v->type == CN_LIST) {
			sv[i] = arena_strdup(ctx->ar, v->kids[i]->s);
		} else {
			size_t l = strcspn(text, ",");

			sv[i] = arena_printf(ctx->ar, "%.*s", (int)l, text);
			text += l + (text[l] == ',');
		}
		if (!sv[i])
			return errf(why, len, -ENOMEM, "out of memory");
	}
	*out = sv;
	return 0;
}

/* One bucket of a rate limiter group: g (NULL: absent) into *t. */
static int get_bucket(const struct cub_param *p, const struct cnode *g, const char *bucket,
		      struct tb_cfg *t, char *why, size_t len)
{
	static const char *const keys[] = { "size", "one_time_burst", "refill_time" };
	uint64_t *dst[] = { &t->size, &t->one_time_burst, &t->refill_time_ms };
	char name[128];

	if (!g)
		return 0;
	if (g->type != CN_GROUP)
		return errf(why, len, -EINVAL,
			    "'%s.%s' must be a group { size = N; refill_time = MS; } (at %s)",
			    p->name, bucket, g->where);
	for (unsigned i = 0; i < g->n_kids; i++) {
		const struct cnode *k = g->kids[i];
		unsigned j = 0;
		int ret;

		while (j < 3 && strcmp(keys[j], k->name))
			j++;
		if (j == 3)
			return errf(why, len, -EINVAL,
				    "'%s.%s' takes size, one_time_burst and refill_time, not '%s' (at %s)",
				    p->name, bucket, k->name, k->where);
		snprintf(name, sizeof(name), "%s.%s.%s", p->name, bucket, k->name);
		{
			struct cub_param q = { .name = name, .type = j < 2 ? CUB_P_SIZE : CUB_P_U64 };

			ret = get_num(&q, k, k->s, dst[j], why, len);
		}
		if (ret)
			return ret;
	}
	return 0;
}

/* A rate limiter group (v NULL or "": no limit) into a new handle. */
static int get_ratelimit(const struct cub_param *p, const struct params_ctx *ctx,
			 const struct cnode *v, struct cub_rl **out, char *why, size_t len)
{
	struct rl_cfg c = { 0 };
	const char *bad;
	int ret;

	if (v && v->type == CN_GROUP) {
		for (unsigned i = 0; i < v->n_kids; i++)
			if (strcmp(v->kids[i]->name, "bandwidth") && strcmp(v->kids[i]->name, "ops"))
				return errf(why, len, -EINVAL,
					    "'%s' takes the groups bandwidth and ops, not '%s' (at %s)",
					    p->name, v->kids[i]->name, v->kids[i]->where);
		if ((ret = get_bucket(p, cnode_get(v, "bandwidth"), "bandwidth", &c.bandwidth, why,
				      len)) ||
		    (ret = get_bucket(p, cnode_get(v, "ops"), "ops", &c.ops, why, len)))
			return ret;
	} else if (v && !((v->type == CN_TEXT || v->type == CN_STR) && !*v->s)) {
		return bad_type(p, "", why, len);
	} else if (!v && p->def && *p->def) {
		return bad_type(p, " (bad default in plugin: only \"\")", why, len);
	}
	if ((bad = rl_cfg_check(&(struct rl_cfg){ .bandwidth = c.bandwidth })))
		return errf(why, len, -EINVAL, "'%s.bandwidth': %s", p->name, bad);
	if ((bad = rl_cfg_check(&(struct rl_cfg){ .ops = c.ops })))
		return errf(why, len, -EINVAL, "'%s.ops': %s", p->name, bad);
	*out = cub_rl_new(ctx->ar, &c);
	return *out ? 0 : errf(why, len, -ENOMEM, "out of memory");
}

/* Store one value: the node v, or (v == NULL) the default text. */
static int put(const struct cub_param *p, const struct params_ctx *ctx, const struct cnode *v,
	       void *slot, char *why, size_t len)
{
	const char *text = v ? v->s : p->def;
	bool textual = !v || v->type == CN_TEXT || v->type == CN_STR;
	uint64_t num;
	int ret;

	switch (p->type) {
	case CUB_P_BOOL: {
		bool b;

		if (v && v->type == CN_BOOL)
			b = v->b;
		else if ((!v || v->type == CN_TEXT) && (!strcmp(text, "true") || !strcmp(text, "false")))
			b = !strcmp(text, "true");
		else
			return bad_type(p, v ? "" : " (bad default in plugin)", why, len);
		memcpy(slot, &b, sizeof(b));
		return 0;
	}
	case CUB_P_INT:
	case CUB_P_U64:
	case CUB_P_SIZE:
		if ((ret = get_num(p, v, text, &num, why, len)) ||
		    (ret = check_range(p, num, why, len)))
			return ret;
		memcpy(slot, &num, sizeof(num));
		return 0;
	case CUB_P_STR:
	case CUB_P_PATH: {
		const char *s;

		if (!textual)
			return bad_type(p, "", why, len);
		if (p->type == CUB_P_PATH && *text && ctx->dir) {
			char e[400];

			s = params_expand_path(ctx->ar, text, ctx->dir, e, sizeof(e));
			if (!s)
				return errf(why, len, -EINVAL, "'%s': %s", p->name, e);
		} else {
			s = arena_strdup(ctx->ar, text);
		}
		if (!s)
			return errf(why, len, -ENOMEM, "out of memory");
		memcpy(slot, &s, sizeof(s));
		return 0;
	}
	case CUB_P_STRV: {
		const char **sv = NULL;

		if ((ret = get_strv(p, ctx, v, text, &sv, why, len)))
			return ret;
		memcpy(slot, &sv, sizeof(sv));
		return 0;
	}
	case CUB_P_ENUM:
		if (!textual)
			return bad_type(p, "", why, len);
		for (int i = 0; p->choices && p->choices[i]; i++) {
			if (!strcmp(p->choices[i], text)) {
				memcpy(slot, &i, sizeof(i));
				return 0;
			}
		}
		return bad_type(p, v ? "" : " (bad default in plugin)", why, len);
	case CUB_P_RATELIMIT: {
		struct cub_rl *rl = NULL;

		if ((ret = get_ratelimit(p, ctx, v, &rl, why, len)))
			return ret;
		memcpy(slot, &rl, sizeof(rl));
		return 0;
	}
	case CUB_P_STORAGE:
	case CUB_P_NET: {
		const struct cnode *t = v && v->type == CN_GROUP ? cnode_get(v, "type") : NULL;
		const char *s;

		if (!v) /* an optional backend group that is absent */
			return 0;
		if (v->type == CN_TEXT) /* the fake host: just the backend's name */
			t = v;
		else if (v->type != CN_GROUP)
			return bad_type(p, "", why, len);
		if (!t || (t->type != CN_STR && t->type != CN_TEXT))
			return errf(why, len, -EINVAL,
				    "'%s' needs type = \"BACKEND\" (a string; see `cubicle plugins`)",
				    p->name);
		s = arena_strdup(ctx->ar, t->s);
		if (!s)
			return errf(why, len, -ENOMEM, "out of memory");
		memcpy(slot, &s, sizeof(s));
		return 0;
	}
	}
	return errf(why, len, -EINVAL, "'%s': unknown parameter type %d", p->name, (int)p->type);
}

/* ---- a group ---- */

static bool skipped(const struct params_ctx *ctx, const char *key)
{
	for (const char *const *s = ctx->skip; s && *s; s++)
		if (!strcmp(*s, key))
			return true;
	return false;
}

static void list_keys(const struct cub_param *params, unsigned n, const char *group, char *buf,
		      size_t len)
{
	size_t gl = group ? strlen(group) : 0;

	buf[0] = '\0';
	for (unsigned j = 0; j < n; j++) {
		const char *pn = params[j].name;

		if (group && (strncmp(pn, group, gl) || pn[gl] != '.'))
			continue;
		if (*buf)
			strncat(buf, ", ", len - strlen(buf) - 1);
		strncat(buf, group ? pn + gl + 1 : pn, len - strlen(buf) - 1);
	}
}

/* Every key of g must be a parameter, a nested group of dotted ones, or the
 * caller's. */
static int check_keys(const struct cub_param *params, unsigned n, const struct params_ctx *ctx,
		      const struct cnode *g, const char *group, char *err, size_t errlen)
{
	size_t gl = group ? strlen(group) : 0;
	char known[512];

	for (unsigned i = 0; i < g->n_kids; i++) {
		const struct cnode *k = g->kids[i];
		bool is_group = false;
		unsigned j;

		if (!group && skipped(ctx, k->name))
			continue;
		for (j = 0; j < n; j++) {
			const char *pn = params[j].name;
			char pg[80];

			if (group) {
				if (!strncmp(pn, group, gl) && pn[gl] == '.' && !strcmp(pn + gl + 1, k->name))
					break;
				continue;
			}
			if (!strcmp(pn, k->name))
				break;
			if (params_group_of(pn, pg, sizeof(pg)) && !strcmp(pg, k->name))
				is_group = true;
		}
		if (j < n)
			continue;
		if (is_group) {
			int ret;

			if (k->type != CN_GROUP)
				return errf(err, errlen, -EINVAL, "%s: %s: '%s' must be a group: %s = { ... };",
					    k->where, ctx->inst, k->name, k->name);
			ret = check_keys(params, n, ctx, k, k->name, err, errlen);
			if (ret)
				return ret;
			continue;
		}
		list_keys(params, n, group, known, sizeof(known));
		if (group)
			return errf(err, errlen, -EINVAL,
				    "%s: %s: unknown parameter '%s.%s'; the group '%s' takes %s",
				    k->where, ctx->inst, group, k->name, group, known);
		return errf(err, errlen, -EINVAL, "%s: %s: unknown parameter '%s'; %s takes %s",
			    k->where, ctx->inst, k->name, ctx->plugin ? ctx->plugin : "it",
			    *known ? known : "no parameters");
	}
	return 0;
}

int params_fill(const struct cub_param *params, unsigned n, const struct params_ctx *ctx,
		const struct cnode *g, void *cfg, char *err, size_t errlen)
{
	char why[512];
	int ret;

	/* Unknown keys first: a typo must not silently become a default. */
	if (g && (ret = check_keys(params, n, ctx, g, NULL, err, errlen)))
		return ret;
	for (unsigned j = 0; j < n; j++) {
		const struct cub_param *p = &params[j];
		const struct cnode *v = cnode_get(g, p->name);
		const char *where = ctx->where;
		char grp[80];

		if (params_group_of(p->name, grp, sizeof(grp))) {
			const struct cnode *sub = cnode_get(g, grp);

			if (!sub)
				continue; /* no group: the slot stays zero */
			where = sub->where;
			v = cnode_get(sub, p->name + strlen(grp) + 1);
		}
		if (!v && !p->def && ctx->partial)
			continue;
		if (!v && !p->def)
			return errf(err, errlen, -EINVAL, "%s: %s: '%s' is required (%s)", where,
				    ctx->inst, p->name, p->doc ? p->doc : params_type_name(p->type));
		if (!v && (p->type == CUB_P_STORAGE || p->type == CUB_P_NET))
			continue; /* optional and absent: NULL */
		ret = put(p, ctx, v, (char *)cfg + p->offset, why, sizeof(why));
		if (ret)
			return errf(err, errlen, ret, "%s: %s: %s", v ? v->where : where, ctx->inst,
				    why);
	}
	return 0;
}
