/* SPDX-License-Identifier: Apache-2.0 */
/* libconfig files and --set overrides into the value tree the plan stage
 * reads. Every node remembers FILE:LINE (or the --set option) for messages. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"

static struct cnode *convert(struct arena *ar, const config_setting_t *s, const char *path,
			     const char *parent_where)
{
	const char *file = config_setting_source_file(s);
	unsigned line = config_setting_source_line(s);
	const char *where = line ? arena_printf(ar, "%s:%u", file ? file : path, line) : parent_where;
	const char *name = config_setting_name(s);
	struct cnode *n;
	enum cnode_type t;

	if (!where)
		return NULL;
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_GROUP: t = CN_GROUP; break;
	case CONFIG_TYPE_LIST: case CONFIG_TYPE_ARRAY: t = CN_LIST; break;
	case CONFIG_TYPE_INT: case CONFIG_TYPE_INT64: t = CN_INT; break;
	case CONFIG_TYPE_FLOAT: t = CN_FLOAT; break;
	case CONFIG_TYPE_BOOL: t = CN_BOOL; break;
	default: t = CN_STR; break;
	}
	n = cnode_new(ar, t, name ? arena_strdup(ar, name) : NULL, where);
	if (!n || (name && !n->name))
		return NULL;
	switch (t) {
	case CN_GROUP:
	case CN_LIST:
		for (int i = 0; i < config_setting_length(s); i++) {
			struct cnode *k = convert(ar, config_setting_get_elem(s, (unsigned)i), path,
						  where);

			if (!k || cnode_add(ar, n, k))
				return NULL;
		}
		break;
	case CN_INT: n->i = config_setting_get_int64(s); break;
	case CN_FLOAT: n->f = config_setting_get_float(s); break;
	case CN_BOOL: n->b = config_setting_get_bool(s); break;
	default:
		if (!(n->s = arena_strdup(ar, config_setting_get_string(s))))
			return NULL;
		break;
	}
	return n;
}

/*
 * libconfig 1.5 (Debian 12) wraps an integer without an L suffix to 32 bits
 * ("memory_mib = 4294967297;" reads as 1). Before it parses, mark every
 * integer literal outside int32 with an L so it is read whole, and refuse
 * one past 64 bits with its line. Strings and comments are left alone.
 * Returns a malloc'd text, or NULL with the reason in err.
 */
static char *widen_ints(const char *in, const char *path, char *err, size_t errlen)
{
	size_t n = strlen(in), o = 0;
	char *out = malloc(2 * n + 1);
	unsigned line = 1;

	if (!out) {
		errf(err, errlen, 0, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < n;) {
		char c = in[i];

		if (c == '\n')
			line++;
		if (c == '"') { /* a string, with escapes */
			out[o++] = in[i++];
			while (i < n && in[i] != '"') {
				if (in[i] == '\\' && i + 1 < n)
					out[o++] = in[i++];
				line += in[i] == '\n';
				out[o++] = in[i++];
			}
			if (i < n)
				out[o++] = in[i++];
			continue;
		}
		if (c == '#' || (c == '/' && in[i + 1] == '/')) { /* to the end of the line */
			while (i < n && in[i] != '\n')
				out[o++] = in[i++];
			continue;
		}
		if (c == '/' && in[i + 1] == '*') {
			while (i < n && !(in[i] == '*' && in[i + 1] == '/')) {
				line += in[i] == '\n';
				out[o++] = in[i++];
			}
			continue;
		}
		if (c >= '0' && c <= '9' && (i == 0 || !(isalnum((unsigned char)in[i - 1]) ||
						   in[i - 1] == '_' || in[i - 1] == '.'))) {
			size_t j = i;
			bool neg = i > 0 && in[i - 1] == '-';
			unsigned long long v;
			char *end;

			while (j < n && (isalnum((unsigned char)in[j]) || in[j] == '_' || in[j] == '.'))
				j++;
			errno = 0;
			v = strtoull(in + i, &end, 0);
			if (end == in + j) { /* a plain integer literal, no suffix */
				if (errno == ERANGE || (neg && v > (1ull << 63))) {
					free(out);
					errf(err, errlen, 0, "%s:%u: the integer %s%.*s does not fit in 64 bits",
					     path, line, neg ? "-" : "", (int)(j - i), in + i);
					return NULL;
				}
				memcpy(out + o, in + i, j - i);
				o += j - i;
				if (neg ? v > (1ull << 31) : v > INT32_MAX)
					out[o++] = 'L';
				i = j;
				continue;
			}
			memcpy(out + o, in + i, j - i);
			o += j - i;
			i = j;
			continue;
		}
		out[o++] = in[i++];
	}
	out[o] = '\0';
	return out;
}

/* Line @n of @text (or of file @path when @text is NULL), trimmed, into @out. */
static void line_text(const char *text, const char *path, int n, char *out, size_t len)
{
	char buf[512];
	FILE *f = text ? fmemopen((void *)text, strlen(text), "r") : fopen(path, "re");
	size_t l;

	out[0] = '\0';
	if (!f || n < 1) {
		if (f)
			fclose(f);
		return;
	}
	while (fgets(buf, sizeof(buf), f))
		if (--n == 0) {
			char *b = buf + strspn(buf, " \t");

			l = strcspn(b, "\r\n");
			while (l && (b[l - 1] == ' ' || b[l - 1] == '\t'))
				l--;
			snprintf(out, len, "%.*s", (int)l, b);
			break;
		}
	fclose(f);
}

static int finish(struct arena *ar, config_t *lc, bool ok, const char *path, const char *text,
		  struct cnode **root, char *err, size_t errlen)
{
	int ret = 0;

	if (!ok) {
		const char *file = config_error_file(lc) ? config_error_file(lc) : path;
		char at[160];

		/* libconfig knows the line, not the column: show the line */
		line_text(config_error_file(lc) ? NULL : text, file, config_error_line(lc), at,
			  sizeof(at));
		ret = errf(err, errlen, -EINVAL, "%s:%d: %s%s%s%s", file, config_error_line(lc),
			   config_error_text(lc), *at ? " in \"" : "", at, *at ? "\"" : "");
	}
	else if (!(*root = convert(ar, config_root_setting(lc), path, path)))
		ret = errf(err, errlen, -ENOMEM, "out of memory");
	config_destroy(lc);
	return ret;
}

int config_load_text(struct arena *ar, const char *text, const char *path, struct cnode **root,
		     char *err, size_t errlen)
{
	char *wide = widen_ints(text, path, err, errlen);
	config_t lc;
	int ret;

	if (!wide)
		return -EINVAL;
	config_init(&lc);
	ret = finish(ar, &lc, config_read_string(&lc, wide), path, text, root, err, errlen);
	free(wide);
	return ret;
}

#define CONFIG_MAX_BYTES (16u << 20)

int config_load_file(struct arena *ar, const char *path, char *const *sets, unsigned n_sets,
		     struct cnode **root, char *err, size_t errlen)
{
	size_t n = path_dir_len(path);
	char *dir = n ? strndup(path, n) : strdup(".");
	struct stat st;
	char *text, *wide = NULL;
	config_t lc;
	FILE *f;
	int ret;

	if (!dir)
		return errf(err, errlen, -ENOMEM, "out of memory");
	if (errlen)
		err[0] = '\0';
	f = fopen(path, "re");
	if (!f) {
		ret = -errno;
		free(dir);
		return errf(err, errlen, ret, "%s: cannot open config: %s", path, strerror(-ret));
	}
	if (fstat(fileno(f), &st) == 0 && !S_ISREG(st.st_mode)) {
		fclose(f);
		free(dir);
		return errf(err, errlen, -EINVAL, "%s: not a regular file; expected a VM config file",
			    path);
	}
	if (st.st_size > CONFIG_MAX_BYTES) {
		fclose(f);
		free(dir);
		return errf(err, errlen, -EFBIG, "%s: %lld bytes; a VM config is at most %u", path,
			    (long long)st.st_size, CONFIG_MAX_BYTES);
	}
	text = calloc(1, (size_t)st.st_size + 1);
	if (!text || fread(text, 1, (size_t)st.st_size, f) != (size_t)st.st_size ||
	    !(wide = widen_ints(text, path, err, errlen))) {
		ret = text ? -EINVAL : -ENOMEM;
		if (!text || !*err)
			errf(err, errlen, ret, "%s: cannot read config", path);
		free(text);
		fclose(f);
		free(dir);
		return ret;
	}
	free(text);
	fclose(f);
	config_init(&lc);
	config_set_include_dir(&lc, dir);
	free(dir);
	ret = finish(ar, &lc, config_read_string(&lc, wide), path, NULL, root, err, errlen);
	free(wide);
	for (unsigned i = 0; !ret && i < n_sets; i++)
		ret = config_apply_set(ar, *root, sets[i], err, errlen);
	return ret;
}

/* ---- --set ---- */

/* devices.ID, devices.[N] or devices.N: the device group, or NULL with a
 * message listing the ids. */
static struct cnode *find_device(struct cnode *root, const char *id, const char *arg, char *err,
				 size_t errlen)
{
	struct cnode *devs = cnode_get(root, "devices");
	char ids[256] = "";
	char *end;
	unsigned long idx;

	if (!devs || devs->type != CN_LIST) {
		errf(err, errlen, 0, "--set %s: the config has no devices list", arg);
		return NULL;
	}
	idx = strtoul(id + (*id == '['), &end, 10);
	if (end != id + (*id == '[') && (!strcmp(end, "]") || !*end)) {
		if (idx < devs->n_kids)
			return devs->kids[idx];
		errf(err, errlen, 0, "--set %s: there are only %u devices", arg, devs->n_kids);
		return NULL;
	}
	for (unsigned i = 0; i < devs->n_kids; i++) {
		const struct cnode *v = cnode_get(devs->kids[i], "id");

		if (v && v->s && !strcmp(v->s, id))
			return devs->kids[i];
		if (v && v->s) {
			if (*ids)
				strncat(ids, ", ", sizeof(ids) - strlen(ids) - 1);
			strncat(ids, v->s, sizeof(ids) - strlen(ids) - 1);
		}
	}
	errf(err, errlen, 0, "--set %s: no device with id '%s'%s%s", arg, id,
	     *ids ? "; the ids are: " : " (no device has an id)", ids);
	return NULL;
}

int config_apply_set(struct arena *ar, struct cnode *root, const char *arg, char *err,
		     size_t errlen)
{
	const char *eq = strchr(arg, '=');
	const char *where = arena_printf(ar, "--set %s", arg);
	char *path, *save = NULL, *tok, *next;
	struct cnode *g = root, *v;

	if (!where)
		return errf(err, errlen, -ENOMEM, "out of memory");
	if (!eq || eq == arg)
		return errf(err, errlen, -EINVAL, "--set %s: expected PATH=VALUE, e.g. machine.vcpus=2",
			    arg);
	path = arena_printf(ar, "%.*s", (int)(eq - arg), arg);
	if (!path)
		return errf(err, errlen, -ENOMEM, "out of memory");
	tok = strtok_r(path, ".", &save);
	while (tok) {
		next = strtok_r(NULL, ".", &save);
		if (g == root && !strcmp(tok, "devices") && next) {
			if (!(g = find_device(root, next, arg, err, errlen)))
				return -EINVAL;
			tok = strtok_r(NULL, ".", &save);
			if (!tok)
				return errf(err, errlen, -EINVAL,
					    "--set %s: name a parameter of the device, e.g. devices.%s.PARAM=VALUE",
					    arg, next);
			continue;
		}
		v = cnode_get(g, tok);
		if (!next) { /* the value */
			if (v && (v->type == CN_GROUP || v->type == CN_LIST))
				return errf(err, errlen, -EINVAL,
					    "--set %s: '%.*s' is %s; only single values can be set",
					    arg, (int)(eq - arg), arg, cnode_type_name(v->type));
			if (!v) {
				v = cnode_new(ar, CN_TEXT, arena_strdup(ar, tok), where);
				if (!v || !v->name || cnode_add(ar, g, v))
					return errf(err, errlen, -ENOMEM, "out of memory");
			}
			v->type = CN_TEXT;
			v->where = where;
			if (!(v->s = arena_strdup(ar, eq + 1)))
				return errf(err, errlen, -ENOMEM, "out of memory");
			return 0;
		}
		if (v && v->type != CN_GROUP)
			return errf(err, errlen, -EINVAL,
				    "--set %s: cannot create '%.*s' (its parent '%s' is not a group)",
				    arg, (int)(eq - arg), arg, tok);
		if (!v) {
			v = cnode_new(ar, CN_GROUP, arena_strdup(ar, tok), where);
			if (!v || !v->name || cnode_add(ar, g, v))
				return errf(err, errlen, -ENOMEM, "out of memory");
		}
		g = v;
		tok = next;
	}
	return errf(err, errlen, -EINVAL, "--set %s: expected PATH=VALUE, e.g. machine.vcpus=2", arg);
}
