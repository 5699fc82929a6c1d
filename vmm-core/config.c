/* SPDX-License-Identifier: Apache-2.0 */
/* The VM config: read a libconfig file, apply --set overrides, and check the
 * core's part of the schema. Every error names FILE:LINE (or the --set
 * option) and what was expected. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "config.h"
#include "log.h"

#define MAX_MEMORY_MIB (1024u * 1024u) /* 1 TiB */

struct key {
	const char *name;
	int type; /* CONFIG_TYPE_*; INT also accepts INT64 */
};

static const struct key top_keys[] = {
	{ "log_level", CONFIG_TYPE_STRING },
	{ "machine", CONFIG_TYPE_GROUP },
	{ "boot", CONFIG_TYPE_GROUP },
	{ "devices", CONFIG_TYPE_LIST },
	{ NULL, 0 },
};
static const struct key machine_keys[] = {
	{ "vcpus", CONFIG_TYPE_INT },
	{ "memory_mib", CONFIG_TYPE_INT },
	{ "host_check", CONFIG_TYPE_BOOL },
	{ NULL, 0 },
};
static const struct key boot_keys[] = {
	{ "kernel", CONFIG_TYPE_STRING },
	{ "initrd", CONFIG_TYPE_STRING },
	{ "cmdline", CONFIG_TYPE_STRING },
	{ "format", CONFIG_TYPE_STRING },
	{ "mode", CONFIG_TYPE_STRING },
	{ "load_addr", CONFIG_TYPE_INT },
	{ "entry", CONFIG_TYPE_INT },
	{ NULL, 0 },
};

static const char *type_name(int t)
{
	switch (t) {
	case CONFIG_TYPE_GROUP: return "a group { ... }";
	case CONFIG_TYPE_INT: case CONFIG_TYPE_INT64: return "an integer";
	case CONFIG_TYPE_FLOAT: return "a number";
	case CONFIG_TYPE_STRING: return "a string";
	case CONFIG_TYPE_BOOL: return "true or false";
	case CONFIG_TYPE_ARRAY: return "an array [ ... ]";
	case CONFIG_TYPE_LIST: return "a list ( ... )";
	default: return "nothing";
	}
}

void config_where(const struct vm_config *c, const config_setting_t *s, char *buf, size_t len)
{
	for (unsigned i = 0; i < c->n_sets; i++) {
		if (c->set_nodes[i] == s) {
			snprintf(buf, len, "--set %s", c->set_args[i]);
			return;
		}
	}
	snprintf(buf, len, "%s:%u", c->path, config_setting_source_line(s));
}

static int fail(const struct vm_config *c, const config_setting_t *s, char *err, size_t len,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(const struct vm_config *c, const config_setting_t *s, char *err, size_t len,
		const char *fmt, ...)
{
	char where[512];
	char what[512];
	va_list ap;

	if (s)
		config_where(c, s, where, sizeof(where));
	else
		snprintf(where, sizeof(where), "%s", c->path);
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(err, len, "%s: %s", where, what);
	return -EINVAL;
}

static bool type_ok(int want, int have)
{
	if (want == CONFIG_TYPE_INT)
		return have == CONFIG_TYPE_INT || have == CONFIG_TYPE_INT64;
	return want == have;
}

/* Check a group's members against a key table. */
static int check_keys(const struct vm_config *c, const config_setting_t *g, const char *gname,
		      const struct key *keys, char *err, size_t len)
{
	int n = config_setting_length(g);

	for (int i = 0; i < n; i++) {
		const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
		const char *name = config_setting_name(m);
		const struct key *k;

		for (k = keys; k->name; k++)
			if (name && !strcmp(k->name, name))
				break;
		if (!k->name) {
			char known[256] = "";

			for (k = keys; k->name; k++) {
				strncat(known, k->name, sizeof(known) - strlen(known) - 3);
				if (k[1].name)
					strcat(known, ", ");
			}
			return fail(c, m, err, len, "unknown key '%s%s%s'; expected one of: %s",
				    gname, *gname ? "." : "", name ? name : "?", known);
		}
		if (!type_ok(k->type, config_setting_type(m)))
			return fail(c, m, err, len, "'%s%s%s' must be %s, not %s", gname,
				    *gname ? "." : "", name, type_name(k->type),
				    type_name(config_setting_type(m)));
	}
	return 0;
}

static char *own(struct vm_config *c, char *s)
{
	char **n;

	if (!s)
		return NULL;
	n = realloc(c->strs, (c->n_strs + 1) * sizeof(*n));
	if (!n) {
		free(s);
		return NULL;
	}
	c->strs = n;
	c->strs[c->n_strs++] = s;
	return s;
}

char *config_expand_path(const char *in, const char *dir, char *err, size_t errlen)
{
	size_t cap = strlen(in) + 256, n = 0;
	char *out = malloc(cap);
	const char *p = in;

	if (!out)
		goto nomem;
	out[0] = '\0';
#define PUT(str, l)                                                     \
	do {                                                            \
		size_t _l = (l);                                        \
		if (n + _l + 1 > cap) {                                 \
			char *_o;                                       \
			cap = (n + _l + 1) * 2;                         \
			_o = realloc(out, cap);                         \
			if (!_o)                                        \
				goto nomem;                             \
			out = _o;                                       \
		}                                                       \
		memcpy(out + n, (str), _l);                             \
		n += _l;                                                \
		out[n] = '\0';                                          \
	} while (0)
	if (p[0] == '~' && (p[1] == '/' || !p[1])) {
		const char *home = getenv("HOME");

		if (!home || !*home) {
			snprintf(err, errlen, "'%s': HOME is not set, cannot expand '~'", in);
			goto fail;
		}
		PUT(home, strlen(home));
		p++;
	} else if (p[0] != '/' && !(p[0] == '$' && p[1] == '{') && dir && *dir) {
		PUT(dir, strlen(dir));
		PUT("/", 1);
	}
	while (*p) {
		if (p[0] == '$' && p[1] == '{') {
			const char *end = strchr(p + 2, '}');
			char name[128];
			const char *val;

			if (!end || end - (p + 2) == 0 || (size_t)(end - (p + 2)) >= sizeof(name)) {
				snprintf(err, errlen, "'%s': malformed ${NAME}", in);
				goto fail;
			}
			memcpy(name, p + 2, (size_t)(end - (p + 2)));
			name[end - (p + 2)] = '\0';
			val = getenv(name);
			if (!val) {
				snprintf(err, errlen, "'%s': environment variable %s is not set", in,
					 name);
				goto fail;
			}
			PUT(val, strlen(val));
			p = end + 1;
		} else {
			PUT(p, 1);
			p++;
		}
	}
#undef PUT
	return out;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	free(out);
	return NULL;
}

int config_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: return -EINVAL;
	}
	if (*end == 'i' && shift)
		end++;
	if ((*end == 'B' || *end == 'b') && shift)
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

/* Find or make the setting a --set path names; parent groups are made. */
static config_setting_t *set_path(config_t *lc, const char *path, int type)
{
	config_setting_t *s = config_lookup(lc, path);
	config_setting_t *parent;
	char buf[256];
	char *dot;

	if (s)
		return s;
	if (strlen(path) >= sizeof(buf))
		return NULL;
	strcpy(buf, path);
	dot = strrchr(buf, '.');
	if (dot) {
		*dot = '\0';
		parent = set_path(lc, buf, CONFIG_TYPE_GROUP);
	} else {
		parent = config_root_setting(lc);
	}
	if (!parent || !config_setting_is_group(parent))
		return NULL;
	return config_setting_add(parent, dot ? dot + 1 : buf, type);
}

/* devices.ID.key → devices.[N].key, so users can name a device by its id. */
static void resolve_device_id(config_t *lc, char *path, size_t len)
{
	config_setting_t *devs = config_lookup(lc, "devices");
	char *id = path + strlen("devices.");
	char *dot;

	if (strncmp(path, "devices.", 8) || !devs || *id == '[' || !(dot = strchr(id, '.')))
		return;
	for (int i = 0; i < config_setting_length(devs); i++) {
		const char *v;

		if (config_setting_lookup_string(config_setting_get_elem(devs, (unsigned)i), "id",
						 &v) &&
		    strlen(v) == (size_t)(dot - id) && !strncmp(v, id, (size_t)(dot - id))) {
			char rest[256];

			snprintf(rest, sizeof(rest), "%s", dot);
			snprintf(path, len, "devices.[%d]%s", i, rest);
			return;
		}
	}
}

static int apply_set(struct vm_config *c, const char *arg, char *err, size_t len)
{
	const char *eq = strchr(arg, '=');
	char path[256], val[4096];
	config_setting_t *s;
	int type;
	char *end;
	long long iv;
	const config_setting_t **nn;
	char **na;

	if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(path) || strlen(eq + 1) >= sizeof(val)) {
		snprintf(err, len, "--set %s: expected PATH=VALUE, e.g. machine.vcpus=2", arg);
		return -EINVAL;
	}
	memcpy(path, arg, (size_t)(eq - arg));
	path[eq - arg] = '\0';
	snprintf(val, sizeof(val), "%s", eq + 1);
	resolve_device_id(&c->lc, path, sizeof(path));

	s = config_lookup(&c->lc, path);
	errno = 0;
	iv = strtoll(val, &end, 0);
	if (s && config_setting_is_scalar(s))
		type = config_setting_type(s);
	else if (*val && !*end && !errno)
		type = CONFIG_TYPE_INT64;
	else if (!strcmp(val, "true") || !strcmp(val, "false"))
		type = CONFIG_TYPE_BOOL;
	else
		type = CONFIG_TYPE_STRING;
	if (s && !config_setting_is_scalar(s)) {
		snprintf(err, len, "--set %s: '%s' is %s; only single values can be set", arg,
			 path, type_name(config_setting_type(s)));
		return -EINVAL;
	}
	if (!s)
		s = set_path(&c->lc, path, type);
	if (!s) {
		snprintf(err, len, "--set %s: cannot create '%s' (its parent is not a group)", arg,
			 path);
		return -EINVAL;
	}
	switch (type) {
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		if (!*val || *end || errno) {
			snprintf(err, len, "--set %s: '%s' must be an integer", arg, path);
			return -EINVAL;
		}
		if (!config_setting_set_int64(s, iv)) {
			snprintf(err, len, "--set %s: '%s' is out of range", arg, path);
			return -EINVAL;
		}
		break;
	case CONFIG_TYPE_BOOL:
		if (strcmp(val, "true") && strcmp(val, "false")) {
			snprintf(err, len, "--set %s: '%s' must be true or false", arg, path);
			return -EINVAL;
		}
		config_setting_set_bool(s, !strcmp(val, "true"));
		break;
	case CONFIG_TYPE_FLOAT:
		config_setting_set_float(s, strtod(val, NULL));
		break;
	default:
		config_setting_set_string(s, val);
		break;
	}
	nn = realloc(c->set_nodes, (c->n_sets + 1) * sizeof(*nn));
	if (nn)
		c->set_nodes = nn;
	na = realloc(c->set_args, (c->n_sets + 1) * sizeof(*na));
	if (na)
		c->set_args = na;
	if (!nn || !na || !(c->set_args[c->n_sets] = strdup(arg))) {
		snprintf(err, len, "out of memory");
		return -ENOMEM;
	}
	c->set_nodes[c->n_sets++] = s;
	return 0;
}

static int get_enum(const struct vm_config *c, const config_setting_t *g, const char *key,
		    const char *const *choices, int def, int *out, char *err, size_t len)
{
	const config_setting_t *s = config_setting_get_member(g, key);
	const char *v;

	*out = def;
	if (!s)
		return 0;
	v = config_setting_get_string(s);
	for (int i = 0; choices[i]; i++) {
		if (!strcmp(v, choices[i])) {
			*out = i;
			return 0;
		}
	}
	char list[128] = "";
	for (int i = 0; choices[i]; i++) {
		strncat(list, choices[i], sizeof(list) - strlen(list) - 4);
		if (choices[i + 1])
			strcat(list, ", ");
	}
	return fail(c, s, err, len, "'%s' is \"%s\"; expected one of: %s", key, v, list);
}

static int get_path(struct vm_config *c, const config_setting_t *g, const char *key,
		    bool required, const char **out, char *err, size_t len)
{
	const config_setting_t *s = config_setting_get_member(g, key);
	char why[512];
	char *p;

	*out = NULL;
	if (!s) {
		if (required)
			return fail(c, g, err, len, "'boot.%s' is required: the path of the %s",
				    key, key);
		return 0;
	}
	p = own(c, config_expand_path(config_setting_get_string(s), c->dir, why, sizeof(why)));
	if (!p)
		return fail(c, s, err, len, "boot.%s: %s", key, why);
	if (access(p, R_OK) < 0)
		return fail(c, s, err, len, "boot.%s: cannot read %s: %s", key, p,
			    strerror(errno));
	*out = p;
	return 0;
}

static int check_boot(struct vm_config *c, const config_setting_t *g, char *err, size_t len)
{
	static const char *const formats[] = { "auto", "bzimage", "elf", "flat", NULL };
	static const char *const modes[] = { "real", "protected", "long", NULL };
	struct boot_cfg *b = &c->boot;
	long long v;
	int f, m, ret;

	if (!g)
		return fail(c, NULL, err, len, "no 'boot' group; expected boot = { kernel = \"...\"; }");
	if ((ret = check_keys(c, g, "boot", boot_keys, err, len)) ||
	    (ret = get_path(c, g, "kernel", true, &b->kernel, err, len)) ||
	    (ret = get_path(c, g, "initrd", false, &b->initrd, err, len)) ||
	    (ret = get_enum(c, g, "format", formats, BOOT_AUTO, &f, err, len)) ||
	    (ret = get_enum(c, g, "mode", modes, BOOT_MODE_REAL, &m, err, len)))
		return ret;
	b->format = (enum boot_format)f;
	b->mode = (enum boot_mode)m;
	if (!config_setting_lookup_string(g, "cmdline", &b->cmdline))
		b->cmdline = "";
	if (b->format != BOOT_FLAT) {
		const char *flat_only[] = { "mode", "load_addr", "entry" };

		for (unsigned i = 0; i < CUB_ARRAY_SIZE(flat_only); i++) {
			const config_setting_t *s = config_setting_get_member(g, flat_only[i]);

			if (s)
				return fail(c, s, err, len,
					    "'boot.%s' only applies to format = \"flat\" payloads",
					    flat_only[i]);
		}
	}
	b->load_addr = 0x10000;
	if (config_setting_lookup_int64(g, "load_addr", &v)) {
		if (v < 0)
			return fail(c, config_setting_get_member(g, "load_addr"), err, len,
				    "'boot.load_addr' must not be negative");
		b->load_addr = (uint64_t)v;
	}
	b->entry = b->load_addr;
	if (config_setting_lookup_int64(g, "entry", &v)) {
		if (v < 0)
			return fail(c, config_setting_get_member(g, "entry"), err, len,
				    "'boot.entry' must not be negative");
		b->entry = (uint64_t)v;
	}
	return 0;
}

static int check_machine(struct vm_config *c, const config_setting_t *g, char *err, size_t len)
{
	long long v;
	int b, ret;

	c->vcpus = 1;
	c->memory_mib = 256;
	c->host_check = true;
	if (!g)
		return 0;
	if ((ret = check_keys(c, g, "machine", machine_keys, err, len)))
		return ret;
	if (config_setting_lookup_int64(g, "vcpus", &v)) {
		if (v < 1 || v > CONFIG_MAX_VCPUS)
			return fail(c, config_setting_get_member(g, "vcpus"), err, len,
				    "'machine.vcpus' is %lld; expected 1 to %d", v,
				    CONFIG_MAX_VCPUS);
		c->vcpus = (unsigned)v;
	}
	if (config_setting_lookup_int64(g, "memory_mib", &v)) {
		if (v < 1 || v > MAX_MEMORY_MIB)
			return fail(c, config_setting_get_member(g, "memory_mib"), err, len,
				    "'machine.memory_mib' is %lld; expected 1 to %u", v,
				    MAX_MEMORY_MIB);
		c->memory_mib = (uint64_t)v;
	}
	if (config_setting_lookup_bool(g, "host_check", &b))
		c->host_check = b;
	return 0;
}

static int check_devices(struct vm_config *c, const config_setting_t *l, char *err, size_t len)
{
	int n;

	if (!l)
		return 0;
	n = config_setting_length(l);
	c->devs = calloc((size_t)n + 1, sizeof(*c->devs));
	if (!c->devs)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		config_setting_t *d = config_setting_get_elem(l, (unsigned)i);
		struct dev_cfg *dc = &c->devs[i];
		const config_setting_t *s;
		char idbuf[64];

		if (!config_setting_is_group(d))
			return fail(c, d, err, len,
				    "devices[%d] must be a group { type = \"...\"; ... }", i);
		s = config_setting_get_member(d, "type");
		if (!s || config_setting_type(s) != CONFIG_TYPE_STRING)
			return fail(c, s ? s : d, err, len,
				    "devices[%d] needs type = \"PLUGIN\" (a string; see `cubicle plugins`)",
				    i);
		dc->type = config_setting_get_string(s);
		s = config_setting_get_member(d, "id");
		if (s && config_setting_type(s) != CONFIG_TYPE_STRING)
			return fail(c, s, err, len, "devices[%d].id must be a string", i);
		if (s) {
			dc->id = config_setting_get_string(s);
		} else {
			snprintf(idbuf, sizeof(idbuf), "%s%d", dc->type, i);
			dc->id = own(c, strdup(idbuf));
			if (!dc->id)
				return -ENOMEM;
		}
		if (!*dc->id || strpbrk(dc->id, ".[] \t"))
			return fail(c, s ? s : d, err, len,
				    "devices[%d].id \"%s\" must be non-empty, without spaces, dots or brackets",
				    i, dc->id);
		for (int j = 0; j < i; j++)
			if (!strcmp(c->devs[j].id, dc->id))
				return fail(c, s ? s : d, err, len,
					    "device id \"%s\" is used twice (also at line %d)",
					    dc->id, c->devs[j].line);
		dc->group = d;
		dc->line = config_setting_source_line(d);
		c->n_devs++;
	}
	return 0;
}

int config_load(struct vm_config *c, const char *path, char *const *sets, unsigned n_sets,
		char *err, size_t errlen)
{
	config_setting_t *root;
	const char *lvl;
	const char *slash;
	FILE *f;
	int ret;

	memset(c, 0, sizeof(*c));
	config_init(&c->lc);
	c->log_level = CUB_LOG_INFO;
	c->path = strdup(path);
	slash = strrchr(path, '/');
	c->dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
	if (!c->path || !c->dir) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	config_set_include_dir(&c->lc, c->dir);
	f = fopen(path, "r");
	if (!f) {
		ret = -errno;
		snprintf(err, errlen, "%s: cannot open config: %s", path, strerror(errno));
		return ret;
	}
	if (!config_read(&c->lc, f)) {
		snprintf(err, errlen, "%s:%d: %s", config_error_file(&c->lc) ?
			 config_error_file(&c->lc) : path, config_error_line(&c->lc),
			 config_error_text(&c->lc));
		fclose(f);
		return -EINVAL;
	}
	fclose(f);
	for (unsigned i = 0; i < n_sets; i++)
		if ((ret = apply_set(c, sets[i], err, errlen)))
			return ret;
	root = config_root_setting(&c->lc);
	if ((ret = check_keys(c, root, "", top_keys, err, errlen)))
		return ret;
	if (config_lookup_string(&c->lc, "log_level", &lvl)) {
		c->log_level = log_level_parse(lvl);
		if (c->log_level < 0)
			return fail(c, config_lookup(&c->lc, "log_level"), err, errlen,
				    "'log_level' is \"%s\"; expected err, warn, info or debug", lvl);
	}
	if ((ret = check_machine(c, config_lookup(&c->lc, "machine"), err, errlen)) ||
	    (ret = check_boot(c, config_lookup(&c->lc, "boot"), err, errlen)) ||
	    (ret = check_devices(c, config_lookup(&c->lc, "devices"), err, errlen)))
		return ret;
	return arch_config_check(c, err, errlen);
}

void config_free(struct vm_config *c)
{
	for (unsigned i = 0; i < c->n_strs; i++)
		free(c->strs[i]);
	for (unsigned i = 0; i < c->n_sets; i++)
		free(c->set_args[i]);
	free(c->strs);
	free(c->set_args);
	free(c->set_nodes);
	free(c->devs);
	free(c->path);
	free(c->dir);
	config_destroy(&c->lc);
	memset(c, 0, sizeof(*c));
}
