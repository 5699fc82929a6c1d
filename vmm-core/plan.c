/* SPDX-License-Identifier: Apache-2.0 */
/* The plan stage: a VM description's value tree checked as a whole (core
 * keys, boot files, every device and nested backend against its plugin's
 * parameter table) into a struct plan, before any plugin code runs. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "arch.h"
#include "config.h"
#include "loader.h"
#include "log.h"
#include "params.h"
#include "plan.h"

#define MAX_MEMORY_MIB (1024u * 1024u) /* 1 TiB */

struct key {
	const char *name;
	enum cnode_type type; /* CN_TEXT (from --set) is accepted for every scalar */
};

static const struct key top_keys[] = {
	{ "log_level", CN_STR }, { "machine", CN_GROUP }, { "boot", CN_GROUP },
	{ "devices", CN_LIST }, { "api", CN_GROUP }, { NULL, 0 },
};
static const struct key api_keys[] = {
	{ "socket", CN_STR }, { "id", CN_STR }, { "paths", CN_STR }, { NULL, 0 },
};
static const struct key machine_keys[] = {
	{ "vcpus", CN_INT }, { "memory_mib", CN_INT }, { "host_check", CN_BOOL },
	{ "track_dirty_pages", CN_BOOL }, { "pit", CN_BOOL }, { "thp", CN_BOOL },
	{ "irqchip", CN_STR }, { NULL, 0 },
};
static const struct key boot_keys[] = {
	{ "kernel", CN_STR }, { "initrd", CN_STR }, { "cmdline", CN_STR }, { "format", CN_STR },
	{ "mode", CN_STR }, { "load_addr", CN_INT }, { "entry", CN_INT }, { "decompress", CN_STR },
	{ NULL, 0 },
};

/* Check a group's members against a key table. */
static int check_keys(const struct cnode *g, const char *gname, const struct key *keys,
		      char *err, size_t len)
{
	for (unsigned i = 0; i < g->n_kids; i++) {
		const struct cnode *m = g->kids[i];
		const struct key *k;
		char known[256] = "";

		for (k = keys; k->name; k++)
			if (!strcmp(k->name, m->name))
				break;
		if (k->name) {
			bool scalar = k->type != CN_GROUP && k->type != CN_LIST;

			if (m->type == k->type || (scalar && m->type == CN_TEXT))
				continue;
			return errf(err, len, -EINVAL, "%s: '%s%s%s' must be %s, not %s", m->where,
				    gname, *gname ? "." : "", m->name, cnode_type_name(k->type),
				    cnode_type_name(m->type));
		}
		for (k = keys; k->name; k++) {
			strncat(known, k->name, sizeof(known) - strlen(known) - 3);
			if (k[1].name)
				strcat(known, ", ");
		}
		return errf(err, len, -EINVAL, "%s: unknown key '%s%s%s'; expected one of: %s",
			    m->where, gname, *gname ? "." : "", m->name, known);
	}
	return 0;
}

/* A number from an integer or a --set text, within [lo, hi]. */
static int get_int(const struct cnode *n, const char *name, int64_t lo, int64_t hi, int64_t *out,
		   char *err, size_t len)
{
	int64_t v = n->i;

	if (n->type == CN_TEXT) {
		char *end;

		errno = 0;
		v = strtoll(n->s, &end, 0);
		if (!*n->s || *end || errno)
			return errf(err, len, -EINVAL, "%s: '%s' must be an integer%s", n->where,
				    name, errno == ERANGE ? " within 64 bits" : "");
	}
	if (v < lo || v > hi)
		return errf(err, len, -EINVAL, "%s: '%s' is %" PRId64 "; expected %" PRId64
			    " to %" PRId64, n->where, name, v, lo, hi);
	*out = v;
	return 0;
}

static int get_enum(const struct cnode *g, const char *group, const char *key,
		    const char *const *choices, int *out, char *err, size_t len)
{
	const struct cnode *s = cnode_get(g, key);
	char list[128] = "";

	if (!s)
		return 0;
	for (int i = 0; choices[i]; i++) {
		if (!strcmp(s->s, choices[i])) {
			*out = i;
			return 0;
		}
		strncat(list, choices[i], sizeof(list) - strlen(list) - 4);
		if (choices[i + 1])
			strcat(list, ", ");
	}
	return errf(err, len, -EINVAL, "%s: '%s.%s' is \"%s\"; expected one of: %s", s->where, group,
		    key, s->s, list);
}

/* A boot file: expanded, and a regular file (or block device) we can read
 * (not looked at for a restore). */
static int get_file(struct plan *p, const struct cnode *g, const char *key, bool required,
		    const char **out, char *err, size_t len)
{
	const struct cnode *s = cnode_get(g, key);
	struct stat st;
	char why[512];
	char *f;

	*out = NULL;
	if (!s)
		return required ? errf(err, len, -EINVAL, "%s: 'boot.%s' is required: the path of the %s",
				       g->where, key, key) : 0;
	f = params_expand_path(&p->ar, s->s, p->dir, why, sizeof(why));
	if (!f)
		return errf(err, len, -EINVAL, "%s: boot.%s: %s", s->where, key, why);
	if (p->restoring) {
		*out = f;
		return 0;
	}
	if (stat(f, &st) < 0)
		return errf(err, len, -EINVAL, "%s: boot.%s: cannot read %s: %s", s->where, key, f,
			    strerror(errno));
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		return errf(err, len, -EINVAL, "%s: boot.%s: %s is not a regular file", s->where, key,
			    f);
	*out = f;
	return 0;
}

static int plan_boot(struct plan *p, const struct cnode *g, char *err, size_t len)
{
	static const char *const formats[] = { "auto", "bzimage", "elf", "flat", NULL };
	static const char *const modes[] = { "real", "protected", "long", NULL };
	static const char *const decompress[] = { "vmm", "guest", NULL };
	static const char *const flat_only[] = { "mode", "load_addr", "entry" };
	struct boot_cfg *b = &p->boot;
	const struct cnode *s;
	int f = BOOT_AUTO, m = BOOT_MODE_REAL, d = BOOT_DECOMPRESS_VMM, ret;
	int64_t v;

	if (!g)
		return errf(err, len, -EINVAL, "%s: no 'boot' group; expected boot = { kernel = \"...\"; }",
			    p->path);
	b->where = g->where;
	if ((ret = check_keys(g, "boot", boot_keys, err, len)) ||
	    (ret = get_file(p, g, "kernel", true, &b->kernel, err, len)) ||
	    (ret = get_file(p, g, "initrd", false, &b->initrd, err, len)) ||
	    (ret = get_enum(g, "boot", "format", formats, &f, err, len)) ||
	    (ret = get_enum(g, "boot", "mode", modes, &m, err, len)) ||
	    (ret = get_enum(g, "boot", "decompress", decompress, &d, err, len)))
		return ret;
	b->format = (enum boot_format)f;
	b->decompress = (enum boot_decompress)d;
	b->mode = (enum boot_mode)m;
	b->where_format = (s = cnode_get(g, "format")) ? s->where : NULL;
	b->where_mode = (s = cnode_get(g, "mode")) ? s->where : NULL;
	b->cmdline = (s = cnode_get(g, "cmdline")) ? s->s : "";
	if (b->format != BOOT_FLAT)
		for (unsigned i = 0; i < CUB_ARRAY_SIZE(flat_only); i++)
			if ((s = cnode_get(g, flat_only[i])))
				return errf(err, len, -EINVAL,
					    "%s: 'boot.%s' only applies to format = \"flat\" payloads",
					    s->where, flat_only[i]);
	b->load_addr = 0x10000;
	if ((s = cnode_get(g, "load_addr"))) {
		if ((ret = get_int(s, "boot.load_addr", 0, INT64_MAX, &v, err, len)))
			return ret;
		b->load_addr = (uint64_t)v;
	}
	b->entry = b->load_addr;
	if ((s = cnode_get(g, "entry"))) {
		if ((ret = get_int(s, "boot.entry", 0, INT64_MAX, &v, err, len)))
			return ret;
		b->entry = (uint64_t)v;
	}
	return 0;
}

/* api = { socket = "PATH"; id = "ID"; }: what --api-sock and --id give. A
 * relative socket path is relative to the config file's folder. */
static int plan_api(struct plan *p, const struct cnode *g, char *err, size_t len)
{
	const struct cnode *s;
	int ret;

	if (!g)
		return 0;
	if ((ret = check_keys(g, "api", api_keys, err, len)))
		return ret;
	if ((s = cnode_get(g, "socket"))) {
		if (!*s->s)
			return errf(err, len, -EINVAL, "%s: 'api.socket' is empty; expected a path",
				    s->where);
		p->api_socket = s->s[0] == '/' || !p->dir
					? arena_strdup(&p->ar, s->s)
					: arena_printf(&p->ar, "%s/%s", p->dir, s->s);
		if (!p->api_socket)
			return errf(err, len, -ENOMEM, "out of memory");
	}
	if ((s = cnode_get(g, "paths"))) {
		const char *q = s->s;

		/* folders joined by ':'; relative ones are the config file's */
		while (*q) {
			size_t n = strcspn(q, ":");
			const char *e = p->api_paths;
			bool rel = q[0] != '/' && p->dir;

			if (!n)
				return errf(err, len, -EINVAL,
					    "%s: 'api.paths' is \"%s\"; expected folders separated by ':'",
					    s->where, s->s);
			p->api_paths = arena_printf(&p->ar, "%s%s%s%s%.*s", e ? e : "", e ? ":" : "",
						    rel ? p->dir : "", rel ? "/" : "", (int)n, q);
			if (!p->api_paths)
				return errf(err, len, -ENOMEM, "out of memory");
			q += n + (q[n] == ':');
		}
	}
	if ((s = cnode_get(g, "id"))) {
		size_t n = strlen(s->s);

		if (!n || n > 64 || strspn(s->s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					  "0123456789-_.") != n)
			return errf(err, len, -EINVAL,
				    "%s: 'api.id' is \"%s\"; expected 1 to 64 letters, digits, '-', '_' or '.'",
				    s->where, s->s);
		p->api_id = s->s;
	}
	return 0;
}

/* A boolean key of the machine group (true or false; --set gives text). */
static int get_flag(const struct cnode *g, const char *key, bool *out, char *err, size_t len)
{
	const struct cnode *s = cnode_get(g, key);

	if (!s)
		return 0;
	if (s->type == CN_TEXT && strcmp(s->s, "true") && strcmp(s->s, "false"))
		return errf(err, len, -EINVAL, "%s: 'machine.%s' must be true or false", s->where,
			    key);
	*out = s->type == CN_BOOL ? s->b : !strcmp(s->s, "true");
	return 0;
}

static int plan_machine(struct plan *p, const struct cnode *g, char *err, size_t len)
{
	static const char *const irqchips[] = { "kernel", "split", NULL };
	int irqchip = 0;
	bool pit;
	const struct cnode *s;
	int64_t v;
	int ret;

	p->vcpus = 1;
	p->memory_mib = 256;
	p->host_check = true;
	if (!g)
		return 0;
	if ((ret = check_keys(g, "machine", machine_keys, err, len)))
		return ret;
	if ((s = cnode_get(g, "vcpus"))) {
		if ((ret = get_int(s, "machine.vcpus", 1, PLAN_MAX_VCPUS, &v, err, len)))
			return ret;
		p->vcpus = (unsigned)v;
	}
	if ((s = cnode_get(g, "memory_mib"))) {
		if ((ret = get_int(s, "machine.memory_mib", 1, MAX_MEMORY_MIB, &v, err, len)))
			return ret;
		p->memory_mib = (uint64_t)v;
	}
	if ((ret = get_flag(g, "host_check", &p->host_check, err, len)))
		return ret;
	if ((ret = get_enum(g, "machine", "irqchip", irqchips, &irqchip, err, len)))
		return ret;
	p->split_irqchip = irqchip == 1;
	/* KVM's PIT feeds its own PIC and IOAPIC: "split" has none */
	pit = !p->split_irqchip;
	if ((ret = get_flag(g, "pit", &pit, err, len)))
		return ret;
	if (pit && p->split_irqchip)
		return errf(err, len, -EINVAL,
			    "%s: 'machine.pit' is true with machine.irqchip = \"split\": KVM's PIT needs its in-kernel PIC and IOAPIC (irqchip = \"kernel\")",
			    cnode_get(g, "pit")->where);
	p->no_pit = !pit;
	return get_flag(g, "track_dirty_pages", &p->track_dirty, err, len);
}

/* ---- devices and backends ---- */

/* A plugin built before ABI 1.4 opens a `backend` group it never declared. */
static bool legacy_backend(const struct plugin *pl)
{
	if (pl->d->abi_minor >= 4)
		return false;
	for (unsigned i = 0; i < pl->d->n_params; i++)
		if (!strcmp(pl->params[i].name, "backend"))
			return false;
	return true;
}

static int fill(struct plan *p, struct plan_inst *pi, const struct cnode *g,
		const char *const *skip, char *err, size_t len)
{
	const struct cub_plugin *d = pi->plugin->d;
	struct params_ctx ctx = { .ar = &p->ar, .dir = p->dir, .inst = pi->name,
				  .plugin = d->name, .where = pi->where, .skip = skip };

	pi->cfg = arena_alloc(&p->ar, d->cfg_size ? d->cfg_size : 1);
	if (!pi->cfg)
		return errf(err, len, -ENOMEM, "out of memory");
	return params_fill(pi->plugin->params, d->n_params, &ctx, g, pi->cfg, err, len);
}

/* The backend group g (key) of device pi, as a plugin of kind (0: storage or
 * net, for legacy plugins). */
static int plan_backend_group(struct plan *p, struct plan_inst *pi, const struct cnode *g,
			      const char *key, enum cub_kind kind, const struct registry *reg,
			      char *err, size_t len)
{
	static const char *const skip[] = { "type", NULL };
	struct plan_backend *pb = &pi->backends[pi->n_backends];
	const struct cnode *t = cnode_get(g, "type"), *bad;
	const struct plugin *pl = NULL;

	if (g->type != CN_GROUP)
		return errf(err, len, -EINVAL, "%s: %s: '%s' must be a group { type = \"...\"; ... }",
			    g->where, pi->name, key);
	if (!t || (t->type != CN_STR && t->type != CN_TEXT))
		return errf(err, len, -EINVAL,
			    "%s: %s: '%s' needs type = \"BACKEND\" (a string; see `cubicle plugins`)",
			    g->where, pi->name, key);
	if (kind != CUB_KIND_NET)
		pl = registry_find(reg, CUB_KIND_STORAGE, t->s);
	if (!pl && kind != CUB_KIND_STORAGE)
		pl = registry_find(reg, CUB_KIND_NET, t->s);
	if (!pl)
		return errf(err, len, -ENOENT,
			    "%s: %s: no %s plugin named '%s' (`cubicle plugins` lists those found)",
			    t->where, pi->name, kind == CUB_KIND_STORAGE ? "storage" :
			    kind == CUB_KIND_NET ? "net" : "storage or net", t->s);
	if ((bad = cnode_get(g, "id")) || (bad = cnode_get(g, "backend")))
		return errf(err, len, -EINVAL, "%s: %s[%s]: a backend takes no '%s'", bad->where,
			    t->s, pi->id, bad->name);
	pb->key = key;
	pb->kind = pl->d->kind;
	pb->inst.plugin = pl;
	pb->inst.id = pi->id;
	pb->inst.where = g->where;
	pb->inst.name = !strcmp(key, "backend") ? arena_printf(&p->ar, "%s[%s]", t->s, pi->id) :
		arena_printf(&p->ar, "%s[%s.%s]", t->s, pi->id, key);
	if (!pb->inst.name)
		return errf(err, len, -ENOMEM, "out of memory");
	pi->n_backends++;
	return fill(p, &pb->inst, g, skip, err, len);
}

static int plan_device(struct plan *p, struct plan_inst *pi, const struct cnode *d, unsigned idx,
		       const struct registry *reg, char *err, size_t len)
{
	static const char *const skip[] = { "type", "id", "transport", NULL };
	static const char *const skip_legacy[] = { "type", "id", "transport", "backend", NULL };
	const struct cnode *s;
	bool legacy;
	int ret;

	if (d->type != CN_GROUP)
		return errf(err, len, -EINVAL, "%s: devices[%u] must be a group { type = \"...\"; ... }",
			    d->where, idx);
	pi->where = d->where;
	s = cnode_get(d, "type");
	if (!s || (s->type != CN_STR && s->type != CN_TEXT))
		return errf(err, len, -EINVAL,
			    "%s: devices[%u] needs type = \"PLUGIN\" (a string; see `cubicle plugins`)",
			    s ? s->where : d->where, idx);
	pi->plugin = registry_find(reg, CUB_KIND_DEVICE, s->s);
	if ((s = cnode_get(d, "id"))) {
		if (s->type != CN_STR && s->type != CN_TEXT)
			return errf(err, len, -EINVAL, "%s: devices[%u].id must be a string", s->where,
				    idx);
		pi->id = s->s;
	} else {
		pi->id = arena_printf(&p->ar, "%s%u", cnode_get(d, "type")->s, idx);
	}
	if (!pi->id)
		return errf(err, len, -ENOMEM, "out of memory");
	if (!*pi->id || strpbrk(pi->id, ".[] \t"))
		return errf(err, len, -EINVAL,
			    "%s: devices[%u].id \"%s\" must be non-empty, without spaces, dots or brackets",
			    s ? s->where : d->where, idx, pi->id);
	for (unsigned j = 0; j < idx; j++)
		if (!strcmp(p->devs[j].id, pi->id))
			return errf(err, len, -EINVAL, "%s: device id \"%s\" is used twice (also at %s)",
				    s ? s->where : d->where, pi->id, p->devs[j].where);
	if (!pi->plugin)
		return errf(err, len, -EINVAL,
			    "%s: no device plugin named '%s' (`cubicle plugins` lists those found)",
			    d->where, cnode_get(d, "type")->s);
	pi->name = arena_printf(&p->ar, "%s[%s]", pi->plugin->d->name, pi->id);
	if (!pi->name)
		return errf(err, len, -ENOMEM, "out of memory");
	if ((s = cnode_get(d, "transport"))) {
		if ((s->type != CN_STR && s->type != CN_TEXT) ||
		    (strcmp(s->s, "pci") && strcmp(s->s, "mmio")))
			return errf(err, len, -EINVAL, "%s: %s: 'transport' must be \"pci\" or \"mmio\"",
				    s->where, pi->name);
		pi->transport = s->s;
	}
	legacy = legacy_backend(pi->plugin);
	if ((ret = fill(p, pi, d, legacy ? skip_legacy : skip, err, len)))
		return ret;
	pi->backends = arena_alloc(&p->ar, (pi->plugin->d->n_params + 1) * sizeof(*pi->backends));
	if (!pi->backends)
		return errf(err, len, -ENOMEM, "out of memory");
	for (unsigned j = 0; j < pi->plugin->d->n_params; j++) {
		const struct cub_param *prm = &pi->plugin->params[j];

		if ((prm->type != CUB_P_STORAGE && prm->type != CUB_P_NET) ||
		    !(s = cnode_get(d, prm->name)))
			continue;
		ret = plan_backend_group(p, pi, s, prm->name, prm->type == CUB_P_STORAGE ?
					 CUB_KIND_STORAGE : CUB_KIND_NET, reg, err, len);
		if (ret)
			return ret;
	}
	if (legacy && (s = cnode_get(d, "backend")))
		return plan_backend_group(p, pi, s, "backend", 0, reg, err, len);
	return 0;
}

int plan_devices(struct plan *p, const struct cnode *l, const struct registry *reg, char *err,
		 size_t len)
{
	if (!l)
		return 0;
	p->devs = arena_alloc(&p->ar, (l->n_kids + 1) * sizeof(*p->devs));
	if (!p->devs)
		return errf(err, len, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < l->n_kids; i++) {
		int ret = plan_device(p, &p->devs[i], l->kids[i], i, reg, err, len);

		if (ret)
			return ret;
		p->n_devs++;
	}
	return 0;
}

int plan_build(struct plan *p, const struct cnode *root, const char *path, const char *dir,
	       const struct registry *reg, char *err, size_t len)
{
	const struct cnode *s;
	int ret;

	p->root = root;
	p->path = arena_strdup(&p->ar, path ? path : "");
	p->dir = dir ? arena_strdup(&p->ar, dir) : NULL;
	p->log_level = CUB_LOG_INFO;
	if (!p->path || (dir && !p->dir))
		return errf(err, len, -ENOMEM, "out of memory");
	if ((ret = check_keys(root, "", top_keys, err, len)))
		return ret;
	if ((s = cnode_get(root, "log_level"))) {
		p->log_level = log_level_parse(s->s);
		if (p->log_level < 0)
			return errf(err, len, -EINVAL,
				    "%s: 'log_level' is \"%s\"; expected err, warn, info or debug",
				    s->where, s->s);
	}
	if ((ret = plan_machine(p, cnode_get(root, "machine"), err, len)) ||
	    (ret = plan_api(p, cnode_get(root, "api"), err, len)) ||
	    (ret = plan_boot(p, cnode_get(root, "boot"), err, len)) ||
	    (ret = arch_plan_check(p, err, len)))
		return ret;
	/* machine.thp, read once the boot format is known: by default on for
	 * a kernel, off for a flat payload (a few pages of code gain nothing
	 * from 2 MiB ones and would zero 2 MiB at its first touch of each). */
	p->thp = p->boot.format != BOOT_FLAT;
	if ((ret = get_flag(cnode_get(root, "machine"), "thp", &p->thp, err, len)))
		return ret;
	return plan_devices(p, cnode_get(root, "devices"), reg, err, len);
}

int plan_read(struct plan *p, const char *path, char *const *sets, unsigned n_sets,
	      struct cnode **root, char *err, size_t len)
{
	return config_load_file(&p->ar, path, sets, n_sets, root, err, len);
}

int plan_build_file(struct plan *p, const struct cnode *root, const char *path,
		    const struct registry *reg, char *err, size_t len)
{
	size_t n = path_dir_len(path);
	char *dir = n ? arena_printf(&p->ar, "%.*s", (int)n, path) : arena_strdup(&p->ar, ".");

	if (!dir)
		return errf(err, len, -ENOMEM, "out of memory");
	return plan_build(p, root, path, dir, reg, err, len);
}

int plan_load(struct plan *p, const char *path, char *const *sets, unsigned n_sets,
	      const struct registry *reg, char *err, size_t len)
{
	struct cnode *root;
	int ret = plan_read(p, path, sets, n_sets, &root, err, len);

	return ret ? ret : plan_build_file(p, root, path, reg, err, len);
}

static int collect_types(const struct cnode *n, char ***names, unsigned *count, unsigned depth)
{
	if (depth > 16)
		return 0;
	for (unsigned i = 0; i < n->n_kids; i++) {
		const struct cnode *k = n->kids[i];
		char **grown;

		if (k->type == CN_GROUP || k->type == CN_LIST) {
			if (collect_types(k, names, count, depth + 1))
				return -ENOMEM;
			continue;
		}
		if (!k->name || strcmp(k->name, "type") || (k->type != CN_STR && k->type != CN_TEXT))
			continue;
		grown = realloc(*names, (*count + 2) * sizeof(**names));
		if (!grown)
			return -ENOMEM;
		*names = grown;
		if (!(grown[*count] = strdup(k->s)))
			return -ENOMEM;
		grown[++*count] = NULL;
	}
	return 0;
}

char **plan_type_names(const struct cnode *root)
{
	char **names = NULL;
	unsigned n = 0;

	if (collect_types(root, &names, &n, 0) || !n) {
		strv_free(names);
		return NULL;
	}
	return names;
}

int plan_devices_text(struct plan *p, const char *text, const char *path, const char *dir,
		      const struct registry *reg, char *err, size_t len)
{
	struct cnode *root;
	int ret = config_load_text(&p->ar, text, path, &root, err, len);

	if (ret)
		return ret;
	p->path = arena_strdup(&p->ar, path);
	p->dir = dir ? arena_strdup(&p->ar, dir) : NULL;
	if (!p->path || (dir && !p->dir))
		return errf(err, len, -ENOMEM, "out of memory");
	return plan_devices(p, cnode_get(root, "devices"), reg, err, len);
}

void plan_free(struct plan *p)
{
	arena_free(&p->ar);
	memset(p, 0, sizeof(*p));
}

const struct plan_backend *plan_backend(const struct plan_inst *pi, const char *key)
{
	for (unsigned i = 0; pi && i < pi->n_backends; i++)
		if (!strcmp(pi->backends[i].key, key))
			return &pi->backends[i];
	return NULL;
}
