/* SPDX-License-Identifier: Apache-2.0 */
/* The plugin loader: dlopen, the ABI gate and descriptor checks (in the order
 * doc/plugin-guide.md gives), the plugin search path, and method calls
 * through libffi. */
#include <dirent.h>
#include <dlfcn.h>
#include <seccomp.h>
#include <errno.h>
#include <ffi.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader.h"
#include "params.h"
#include "cubicle/net.h"
#include "cubicle/storage.h"

#define MAX_ARGS 8

struct method_cif {
	ffi_cif cif;
	ffi_type *types[2 + MAX_ARGS];
	unsigned n_args;
};

const char *loader_kind_name(enum cub_kind k)
{
	switch (k) {
	case CUB_KIND_DEVICE: return "device";
	case CUB_KIND_STORAGE: return "storage";
	case CUB_KIND_NET: return "net";
	}
	return "?";
}

const char *loader_ptype_name(enum cub_ptype t)
{
	return params_type_name(t);
}

static size_t ptype_width(enum cub_ptype t)
{
	switch (t) {
	case CUB_P_BOOL: return sizeof(bool);
	case CUB_P_INT: return sizeof(int64_t);
	case CUB_P_U64: case CUB_P_SIZE: return sizeof(uint64_t);
	case CUB_P_STR: case CUB_P_PATH: case CUB_P_STORAGE: case CUB_P_NET:
		return sizeof(const char *);
	case CUB_P_ENUM: return sizeof(int);
	case CUB_P_STRV: return sizeof(const char *const *);
	case CUB_P_RATELIMIT: return sizeof(struct cub_rl *);
	}
	return 0;
}

static ffi_type *sig_type(char c)
{
	switch (c) {
	case 'b': return &ffi_type_sint;
	case 'i': return &ffi_type_sint32;
	case 'u': return &ffi_type_uint32;
	case 'x': return &ffi_type_sint64;
	case 't': return &ffi_type_uint64;
	case 's': return &ffi_type_pointer;
	}
	return NULL;
}

static bool valid_name(const char *s)
{
	if (!s || !*s || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '_'))
			return false;
	return true;
}

/* A param name: a valid name, or two joined by one dot ("policy.allow"). */
static bool valid_param_name(const char *s)
{
	const char *dot = s ? strchr(s, '.') : NULL;
	char head[65];

	if (!dot)
		return valid_name(s);
	if (dot - s > 64 || strchr(dot + 1, '.'))
		return false;
	memcpy(head, s, (size_t)(dot - s));
	head[dot - s] = 0;
	return valid_name(head) && valid_name(dot + 1);
}

#define FAIL(...)                                       \
	do {                                            \
		snprintf(err, errlen, __VA_ARGS__);     \
		goto fail;                              \
	} while (0)

/* The ops every plugin of a kind must have; NULL if complete. */
static const char *ops_missing(const struct cub_plugin *d)
{
	if (d->kind == CUB_KIND_DEVICE) {
		const struct cub_device_ops *o = d->ops;

		return o->create ? NULL : "create";
	}
	if (d->kind == CUB_KIND_STORAGE) {
		const struct cub_storage_ops *o = d->ops;

		return o->open && o->close && o->info && o->readv && o->writev && o->flush ?
			NULL : "open, close, info, readv, writev and flush";
	}
	const struct cub_net_ops *o = d->ops;

	return o->open && o->close && o->info && o->send && o->recv ? NULL :
		"open, close, info, send and recv";
}

/* Every check that needs only the descriptor, after the ABI gate. */
static int check_desc(const char *path, const struct cub_plugin *d,
		      const struct cub_param *params, char *err, size_t errlen)
{
	const char *missing;

	if (d->kind != CUB_KIND_DEVICE && d->kind != CUB_KIND_STORAGE && d->kind != CUB_KIND_NET)
		FAIL("%s: unknown plugin kind %d", path, (int)d->kind);
	if (!valid_name(d->name))
		FAIL("%s: plugin name must be 1-64 characters of a-z, 0-9, '-', '_'", path);
	if (!d->ops)
		FAIL("%s: plugin '%s' has no ops table", path, d->name);
	if ((missing = ops_missing(d)))
		FAIL("%s: %s plugin '%s' lacks ops it must have: %s", path, loader_kind_name(d->kind),
		     d->name, missing);
	if (d->n_methods && !d->methods)
		FAIL("%s: plugin '%s' declares %u methods but no table", path, d->name,
		     d->n_methods);
	if (d->size >= offsetof(struct cub_plugin, n_syscalls) + sizeof(d->n_syscalls)) {
		if (d->n_syscalls && !d->syscalls)
			FAIL("%s: plugin '%s' declares %u system calls but no table", path, d->name,
			     d->n_syscalls);
		for (unsigned i = 0; i < d->n_syscalls; i++) {
			const struct cub_syscall *s = &d->syscalls[i];

			if (!s->name || seccomp_syscall_resolve_name(s->name) == __NR_SCMP_ERROR)
				FAIL("%s: plugin '%s' declares system call %u '%s', which this cubicle's libseccomp does not know",
				     path, d->name, i, s->name ? s->name : "(null)");
			if (s->arg < -1 || s->arg > 5)
				FAIL("%s: plugin '%s': system call '%s' filters argument %d (0-5, or -1 for any)",
				     path, d->name, s->name, s->arg);
		}
	}
	for (unsigned i = 0; i < d->n_params; i++) {
		const struct cub_param *p = &params[i];
		size_t w = ptype_width(p->type);
		bool backend = p->type == CUB_P_STORAGE || p->type == CUB_P_NET;

		if (!valid_param_name(p->name))
			FAIL("%s: param %u of '%s' has an invalid name", path, i, d->name);
		if (!strcmp(p->name, "type") || !strcmp(p->name, "id") ||
		    !strcmp(p->name, "transport") || (!strcmp(p->name, "backend") && !backend))
			FAIL("%s: param '%s' of '%s' uses a reserved name", path, p->name, d->name);
		if (!w)
			FAIL("%s: param '%s' of '%s' has unknown type %d (built for a newer ABI? set abi_needs)",
			     path, p->name, d->name, (int)p->type);
		if (backend && (d->kind != CUB_KIND_DEVICE || strchr(p->name, '.')))
			FAIL("%s: backend param '%s' of '%s': only a device's top-level params can be backends",
			     path, p->name, d->name);
		if (p->type == CUB_P_RATELIMIT &&
		    (d->kind != CUB_KIND_DEVICE || strchr(p->name, '.') || (p->def && *p->def)))
			FAIL("%s: rate limiter param '%s' of '%s': only a device's top-level params can be rate limiters, with the default \"\" or none",
			     path, p->name, d->name);
		if ((p->min || p->max) && p->type != CUB_P_INT && p->type != CUB_P_U64 &&
		    p->type != CUB_P_SIZE)
			FAIL("%s: param '%s' of '%s' has min/max but is not a number", path, p->name,
			     d->name);
		if (p->offset > d->cfg_size || w > d->cfg_size - p->offset)
			FAIL("%s: param '%s' of '%s' lies outside its %zu-byte cfg struct (offset %zu)",
			     path, p->name, d->name, d->cfg_size, p->offset);
		if (p->type == CUB_P_ENUM && (!p->choices || !p->choices[0]))
			FAIL("%s: enum param '%s' of '%s' has no choices", path, p->name, d->name);
	}
	for (unsigned i = 0; i < d->n_methods; i++) {
		const struct cub_method *m = &d->methods[i];

		if (!valid_name(m->name) || !m->fn || !m->sig)
			FAIL("%s: method %u of '%s' lacks a valid name, function or signature", path,
			     i, d->name);
		if (strlen(m->sig) > MAX_ARGS)
			FAIL("%s: method '%s' of '%s' takes more than %d arguments", path, m->name,
			     d->name, MAX_ARGS);
		for (const char *c = m->sig; *c; c++)
			if (!sig_type(*c))
				FAIL("%s: method '%s' of '%s' has signature \"%s\": '%c' is not one of b i u x t s",
				     path, m->name, d->name, m->sig, *c);
	}
	return 0;
fail:
	return -EINVAL;
}

static int prep_cifs(struct plugin *p, char *err, size_t errlen)
{
	const struct cub_plugin *d = p->d;
	struct method_cif *mc;

	if (!d->n_methods)
		return 0;
	mc = calloc(d->n_methods, sizeof(*mc));
	if (!mc)
		return -ENOMEM;
	p->cifs = mc;
	for (unsigned i = 0; i < d->n_methods; i++) {
		const char *sig = d->methods[i].sig;

		mc[i].n_args = (unsigned)strlen(sig);
		mc[i].types[0] = &ffi_type_pointer;
		mc[i].types[1] = &ffi_type_pointer;
		for (unsigned a = 0; a < mc[i].n_args; a++)
			mc[i].types[2 + a] = sig_type(sig[a]);
		if (ffi_prep_cif(&mc[i].cif, FFI_DEFAULT_ABI, 2 + mc[i].n_args, &ffi_type_sint,
				 mc[i].types) != FFI_OK) {
			snprintf(err, errlen, "%s: libffi cannot prepare method '%s'", p->path,
				 d->methods[i].name);
			return -EINVAL;
		}
	}
	return 0;
}

unsigned loader_abi_needs(const struct cub_plugin *d)
{
	if (d->size >= offsetof(struct cub_plugin, abi_needs) + sizeof(d->abi_needs) && d->abi_needs)
		return d->abi_needs;
	return d->abi_minor;
}

int loader_open(const char *path, struct plugin **out, char *err, size_t errlen)
{
	struct plugin *p = calloc(1, sizeof(*p));
	const struct cub_plugin *d;
	struct stat st;
	int ret = -EINVAL;

	*out = NULL;
	if (!p || !(p->path = strdup(path))) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
		goto out;
	}
	/* dlopen would block on a FIFO named x.so: only regular files load. */
	if (stat(path, &st) < 0)
		FAIL("%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		FAIL("%s: not a regular file", path);
	p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!p->dl)
		FAIL("%s: not a loadable plugin: %s", path, dlerror());
	d = dlsym(p->dl, "cubicle_plugin");
	if (!d)
		FAIL("%s: not a cubicle plugin (no 'cubicle_plugin' symbol)", path);
	/* The ABI gate: read only the fixed head before trusting anything else. */
	if (d->abi_major != CUB_ABI_MAJOR)
		FAIL("%s: plugin ABI %u.%u, but this cubicle speaks ABI %u.%u: rebuild the plugin against cubicle-plugin %u",
		     path, d->abi_major, d->abi_minor, CUB_ABI_MAJOR, CUB_ABI_MINOR, CUB_ABI_MAJOR);
	if (d->size < LOADER_MIN_DESC_SIZE)
		FAIL("%s: plugin descriptor is %u bytes, smaller than the %zu bytes of ABI %u",
		     path, d->size, (size_t)(LOADER_MIN_DESC_SIZE), CUB_ABI_MAJOR);
	if (loader_abi_needs(d) > CUB_ABI_MINOR)
		FAIL("%s: plugin needs ABI %u.%u, newer than this cubicle's %u.%u: upgrade cubicle",
		     path, d->abi_major, loader_abi_needs(d), CUB_ABI_MAJOR, CUB_ABI_MINOR);
	if (d->n_params && !d->params)
		FAIL("%s: plugin '%s' declares %u params but no table", path, d->name, d->n_params);
	if (!(p->params = params_normalize(d))) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
		goto out;
	}
	if ((ret = check_desc(path, d, p->params, err, errlen)))
		goto out;
	p->d = d;
	if ((ret = prep_cifs(p, err, errlen)))
		goto out;
	*out = p;
	return 0;
fail:
	ret = -EINVAL;
out:
	loader_close(p);
	return ret;
}

void loader_close(struct plugin *p)
{
	if (!p)
		return;
	free(p->cifs);
	free(p->params);
	if (p->dl)
		dlclose(p->dl);
	free(p->path);
	free(p);
}

/* See loader.h. */
bool loader_uninstalled(void)
{
	char exe[PATH_MAX], build[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t bl;

	if (n <= 0 || !realpath(CUB_BUILD_DIR, build))
		return false;
	exe[n] = '\0';
	bl = strlen(build);
	return !strncmp(exe, build, bl) && exe[bl] == '/';
}

static int push(char ***v, unsigned *n, const char *s)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(**v));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	if (!(nv[*n] = strdup(s)))
		return -ENOMEM;
	nv[++*n] = NULL;
	return 0;
}

/* push, unless @s is a folder among the list's first @upto (by name, or
 * the same folder by another name: CUBICLE_PLUGIN_PATH naming the build's
 * own plugin folders gave a "found first; this one is not used" warning
 * for every plugin in them). */
static int push_dir(char ***v, unsigned *n, unsigned upto, const char *s)
{
	struct stat st, other;
	int known = -1; /* s stat'ed: not yet */

	for (unsigned i = 0; i < upto; i++) {
		if (!strcmp((*v)[i], s))
			return 0;
		if (known < 0)
			known = !stat(s, &st);
		if (known && !stat((*v)[i], &other) && other.st_dev == st.st_dev &&
		    other.st_ino == st.st_ino)
			return 0;
	}
	return push(v, n, s);
}

char **loader_dirs(char *const *cli_dirs, unsigned n_cli)
{
	static const char *const build_sub[] = { "plugins/devices/.libs", "plugins/storage/.libs",
						  "plugins/net/.libs" };
	const char *env = getenv("CUBICLE_PLUGIN_PATH");
	char **v = calloc(1, sizeof(*v));
	unsigned n = 0, given;

	if (!v)
		return NULL;
	for (unsigned i = 0; i < n_cli; i++)
		if (push_dir(&v, &n, n, cli_dirs[i]) < 0)
			goto fail;
	if (env) {
		char *copy = strdup(env), *save = NULL;

		if (!copy)
			goto fail;
		for (char *t = strtok_r(copy, ":", &save); t; t = strtok_r(NULL, ":", &save)) {
			if (push_dir(&v, &n, n, t) < 0) {
				free(copy);
				goto fail;
			}
		}
		free(copy);
	}
	/* the defaults differ from each other: each is checked against
	 * the folders given only */
	given = n;
	if (loader_uninstalled()) {
		for (unsigned i = 0; i < CUB_ARRAY_SIZE(build_sub); i++) {
			char buf[PATH_MAX];

			snprintf(buf, sizeof(buf), "%s/%s", CUB_BUILD_DIR, build_sub[i]);
			if (push_dir(&v, &n, given, buf) < 0)
				goto fail;
		}
	} else if (push_dir(&v, &n, given, CUB_PLUGIN_DIR) < 0) {
		goto fail;
	}
	return v;
fail:
	loader_dirs_free(v);
	return NULL;
}

void loader_dirs_free(char **dirs)
{
	if (!dirs)
		return;
	for (char **d = dirs; *d; d++)
		free(*d);
	free(dirs);
}

static int so_filter(const struct dirent *e)
{
	size_t l = strlen(e->d_name);

	return l > 3 && !strcmp(e->d_name + l - 3, ".so");
}

/* Is FILE ("virtio_blk.so") the file a plugin of one of @names would have
 * ("virtio-blk": '-' and '_' alike)? */
static bool file_wanted(const char *file, char *const *names)
{
	size_t l = strlen(file) - 3; /* without ".so" */

	for (char *const *n = names; *n; n++) {
		size_t i;

		if (strlen(*n) != l)
			continue;
		for (i = 0; i < l; i++)
			if (file[i] != (*n)[i] && !((file[i] == '_' || file[i] == '-') &&
						     ((*n)[i] == '_' || (*n)[i] == '-')))
				break;
		if (i == l)
			return true;
	}
	return false;
}

int registry_scan(struct registry *r, char *const *dirs,
		  void (*warn)(const char *msg, void *arg), void *arg)
{
	return registry_scan_names(r, dirs, NULL, warn, arg);
}

int registry_scan_names(struct registry *r, char *const *dirs, char *const *names,
			void (*warn)(const char *msg, void *arg), void *arg)
{
	for (char *const *dir = dirs; *dir; dir++) {
		struct dirent **ents;
		int n = scandir(*dir, &ents, so_filter, alphasort);

		if (n < 0)
			continue; /* a search-path entry that does not exist is fine */
		for (int i = 0; i < n; i++) {
			char path[PATH_MAX], err[PATH_MAX * 2 + 128];
			const struct plugin *first;
			struct plugin *p, **np;

			if (names && !file_wanted(ents[i]->d_name, names)) {
				free(ents[i]);
				continue;
			}
			snprintf(path, sizeof(path), "%s/%s", *dir, ents[i]->d_name);
			free(ents[i]);
			if (loader_open(path, &p, err, sizeof(err)) < 0) {
				if (warn)
					warn(err, arg);
				continue;
			}
			if ((first = registry_find(r, p->d->kind, p->d->name))) {
				/* first in the search order wins; say which one */
				snprintf(err, sizeof(err), "%s: %s plugin '%s' is also in %s, found first; this one is not used",
					 path, loader_kind_name(p->d->kind), p->d->name, first->path);
				if (warn)
					warn(err, arg);
				loader_close(p);
				continue;
			}
			np = realloc(r->p, (r->n + 1) * sizeof(*np));
			if (!np) {
				loader_close(p);
				for (int j = i + 1; j < n; j++)
					free(ents[j]);
				free(ents);
				return -ENOMEM;
			}
			r->p = np;
			r->p[r->n++] = p;
		}
		free(ents);
	}
	return 0;
}

void registry_free(struct registry *r)
{
	for (unsigned i = 0; i < r->n; i++)
		loader_close(r->p[i]);
	free(r->p);
	r->p = NULL;
	r->n = 0;
}

bool registry_has(const struct registry *r, const char *name)
{
	for (unsigned i = 0; i < r->n; i++)
		if (!strcmp(r->p[i]->d->name, name))
			return true;
	return false;
}

const struct plugin *registry_find(const struct registry *r, enum cub_kind kind, const char *name)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->p[i]->d->kind == kind && !strcmp(r->p[i]->d->name, name))
			return r->p[i];
	return NULL;
}

union arg_val {
	int b;
	int32_t i;
	uint32_t u;
	int64_t x;
	uint64_t t;
	const char *s;
};

static int parse_arg(char c, const char *s, union arg_val *v)
{
	char *end;

	errno = 0;
	switch (c) {
	case 'b':
		if (!strcmp(s, "true") || !strcmp(s, "1"))
			v->b = 1;
		else if (!strcmp(s, "false") || !strcmp(s, "0"))
			v->b = 0;
		else
			return -EINVAL;
		return 0;
	case 's':
		v->s = s;
		return 0;
	case 'i': case 'x': {
		long long x = strtoll(s, &end, 0);

		if (!*s || *end || errno || (c == 'i' && (x < INT32_MIN || x > INT32_MAX)))
			return -EINVAL;
		if (c == 'i')
			v->i = (int32_t)x;
		else
			v->x = x;
		return 0;
	}
	case 'u': case 't': {
		unsigned long long x;

		if (*s == '-')
			return -EINVAL;
		x = strtoull(s, &end, 0);
		if (!*s || *end || errno || (c == 'u' && x > UINT32_MAX))
			return -EINVAL;
		if (c == 'u')
			v->u = (uint32_t)x;
		else
			v->t = x;
		return 0;
	}
	}
	return -EINVAL;
}

int loader_call(const struct plugin *p, const char *method, void *priv, struct cub_reply *reply,
		char *const *args, unsigned n_args, char *err, size_t errlen)
{
	const struct cub_plugin *d = p->d;
	struct method_cif *mc = p->cifs;
	union arg_val vals[MAX_ARGS];
	void *ptrs[2 + MAX_ARGS];
	ffi_arg rc;
	unsigned i;

	for (i = 0; i < d->n_methods; i++)
		if (!strcmp(d->methods[i].name, method))
			break;
	if (i == d->n_methods) {
		snprintf(err, errlen, "%s has no method '%s'", d->name, method);
		return -ENOENT;
	}
	if (n_args != mc[i].n_args) {
		snprintf(err, errlen, "%s.%s takes %u argument%s (signature \"%s\"), not %u", d->name,
			 method, mc[i].n_args, mc[i].n_args == 1 ? "" : "s", d->methods[i].sig,
			 n_args);
		return -EINVAL;
	}
	ptrs[0] = &priv;
	ptrs[1] = &reply;
	for (unsigned a = 0; a < n_args; a++) {
		if (parse_arg(d->methods[i].sig[a], args[a], &vals[a]) < 0) {
			snprintf(err, errlen, "%s.%s: argument %u \"%s\" is not a valid '%c'", d->name,
				 method, a + 1, args[a], d->methods[i].sig[a]);
			return -EINVAL;
		}
		ptrs[2 + a] = &vals[a];
	}
	reply->len = 0;
	reply->text[0] = '\0';
	ffi_call(&mc[i].cif, d->methods[i].fn, &rc, ptrs);
	return (int)(ffi_sarg)rc;
}
