/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin instances: fill a plugin's cfg struct from its declared parameters,
 * hand it the cub_host services, create and destroy it. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "arch.h"
#include "devices.h"
#include "event.h"
#include "virtio/virtio_dev.h"
#include "vm.h"

/* ---- parameters ---- */

static int own_str(char ***strs, unsigned *n, const char *s, const char **out)
{
	char **v = realloc(*strs, (*n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	*strs = v;
	if (!(v[*n] = strdup(s)))
		return -ENOMEM;
	*out = v[(*n)++];
	return 0;
}

/* Take ownership of p (freed with the strings); frees it on failure. */
static int own_ptr(char ***strs, unsigned *n, void *p)
{
	char **v = realloc(*strs, (*n + 1) * sizeof(*v));

	if (!v) {
		free(p);
		return -ENOMEM;
	}
	*strs = v;
	v[(*n)++] = p;
	return 0;
}

/* A list of strings (CUB_P_STRV): from a config array or list, or from the
 * default text "a,b" ("" is the empty list). -EINVAL if s is not a list of
 * strings, -ENOMEM. */
static int put_strv(const config_setting_t *s, const char *text, void *slot, char ***strs,
		    unsigned *n_strs)
{
	const char **v;
	unsigned n = 0;

	if (s) {
		int t = config_setting_type(s);

		if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
			return -EINVAL;
		n = (unsigned)config_setting_length(s);
		for (unsigned i = 0; i < n; i++)
			if (config_setting_type(config_setting_get_elem(s, i)) != CONFIG_TYPE_STRING)
				return -EINVAL;
	} else if (*text) {
		n = 1;
		for (const char *c = text; *c; c++)
			n += *c == ',';
	}
	v = calloc(n + 1, sizeof(*v));
	if (!v || own_ptr(strs, n_strs, v))
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		char *piece = NULL;
		int ret;

		if (!s) {
			size_t l = strcspn(text, ",");

			piece = strndup(text, l);
			text += l + (text[l] == ',');
			if (!piece)
				return -ENOMEM;
		}
		ret = own_str(strs, n_strs, s ? config_setting_get_string(config_setting_get_elem(s, i))
					      : piece, &v[i]);
		free(piece);
		if (ret)
			return ret;
	}
	memcpy(slot, &v, sizeof(v));
	return 0;
}

/* Store one value, given either as a libconfig setting or (s == NULL) as the
 * default text. Returns 0 or a reason in why. */
static int put_param(const struct cub_param *p, const config_setting_t *s, const char *text,
		     void *slot, char ***strs, unsigned *n_strs, char *why, size_t len)
{
	int t = s ? config_setting_type(s) : CONFIG_TYPE_STRING;
	long long iv = 0;
	bool is_int = t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
	char *end;

	if (s && t == CONFIG_TYPE_STRING)
		text = config_setting_get_string(s);
	if (s && is_int)
		iv = config_setting_get_int64(s);
	switch (p->type) {
	case CUB_P_BOOL: {
		bool b;

		if (s && t == CONFIG_TYPE_BOOL)
			b = config_setting_get_bool(s);
		else if (!s && (!strcmp(text, "true") || !strcmp(text, "false")))
			b = !strcmp(text, "true");
		else
			goto type;
		memcpy(slot, &b, sizeof(b));
		return 0;
	}
	case CUB_P_INT:
	case CUB_P_U64:
		if (!s) {
			errno = 0;
			iv = strtoll(text, &end, 0);
			if (!*text || *end || errno)
				goto type;
		} else if (!is_int) {
			goto type;
		}
		if (p->type == CUB_P_U64 && iv < 0) {
			snprintf(why, len, "'%s' must not be negative", p->name);
			return -EINVAL;
		}
		if (p->type == CUB_P_INT) {
			int64_t v = iv;

			memcpy(slot, &v, sizeof(v));
		} else {
			uint64_t v = (uint64_t)iv;

			memcpy(slot, &v, sizeof(v));
		}
		return 0;
	case CUB_P_SIZE: {
		uint64_t v;

		if (s && is_int) {
			if (iv < 0) {
				snprintf(why, len, "'%s' must not be negative", p->name);
				return -EINVAL;
			}
			v = (uint64_t)iv;
		} else if ((!s || t == CONFIG_TYPE_STRING) && config_parse_size(text, &v) == 0) {
			;
		} else {
			goto type;
		}
		memcpy(slot, &v, sizeof(v));
		return 0;
	}
	case CUB_P_STR: {
		const char *v;

		if (s && t != CONFIG_TYPE_STRING)
			goto type;
		if (own_str(strs, n_strs, text, &v))
			return -ENOMEM;
		memcpy(slot, &v, sizeof(v));
		return 0;
	}
	case CUB_P_STRV: {
		int ret = put_strv(s, text, slot, strs, n_strs);

		if (ret != -EINVAL)
			return ret;
		goto type;
	}
	case CUB_P_ENUM:
		if (s && t != CONFIG_TYPE_STRING)
			goto type;
		for (int i = 0; p->choices[i]; i++) {
			if (!strcmp(p->choices[i], text)) {
				memcpy(slot, &i, sizeof(i));
				return 0;
			}
		}
		goto type;
	}
type: {
	char list[256] = "";

	if (p->type == CUB_P_ENUM) {
		for (int i = 0; p->choices[i]; i++) {
			strncat(list, p->choices[i], sizeof(list) - strlen(list) - 5);
			if (p->choices[i + 1])
				strcat(list, ", ");
		}
	}
	snprintf(why, len, "'%s' must be %s%s%s", p->name,
		 p->type == CUB_P_ENUM ? "one of: " :
		 p->type == CUB_P_BOOL ? "true or false" :
		 p->type == CUB_P_STR ? "a string" :
		 p->type == CUB_P_STRV ? "a list of strings, e.g. [ \"a\", \"b\" ]" :
		 p->type == CUB_P_SIZE ? "a size (bytes, or a string like \"64M\")" :
		 p->type == CUB_P_U64 ? "a non-negative integer" : "an integer",
		 list, s ? "" : " (bad default in plugin)");
	return -EINVAL;
}
}

/* Is some param of d a key in the nested group g ("g.key")? */
static bool param_group(const struct cub_plugin *d, const char *g)
{
	size_t n = strlen(g);

	for (unsigned j = 0; j < d->n_params; j++)
		if (!strncmp(d->params[j].name, g, n) && d->params[j].name[n] == '.')
			return true;
	return false;
}

/* Every key of the nested group s (named g) must be a param "g.key". */
static int check_nested(const struct cub_plugin *d, const struct vm_config *c,
			const config_setting_t *s, const char *g, const char *inst_name,
			char *err, size_t errlen)
{
	size_t gl = strlen(g);
	char where[512];

	if (!config_setting_is_group(s)) {
		config_where(c, s, where, sizeof(where));
		snprintf(err, errlen, "%s: %s: '%s' must be a group: %s = { ... };", where,
			 inst_name, g, g);
		return -EINVAL;
	}
	for (int i = 0; i < config_setting_length(s); i++) {
		const config_setting_t *m = config_setting_get_elem(s, (unsigned)i);
		const char *key = config_setting_name(m);
		char known[384] = "";
		unsigned j;

		for (j = 0; j < d->n_params; j++) {
			const char *pn = d->params[j].name;

			if (!strncmp(pn, g, gl) && pn[gl] == '.' && !strcmp(pn + gl + 1, key))
				break;
		}
		if (j < d->n_params)
			continue;
		for (j = 0; j < d->n_params; j++) {
			const char *pn = d->params[j].name;

			if (strncmp(pn, g, gl) || pn[gl] != '.')
				continue;
			if (*known)
				strncat(known, ", ", sizeof(known) - strlen(known) - 1);
			strncat(known, pn + gl + 1, sizeof(known) - strlen(known) - 1);
		}
		config_where(c, m, where, sizeof(where));
		snprintf(err, errlen, "%s: %s: unknown parameter '%s.%s'; the group '%s' takes %s",
			 where, inst_name, g, key, g, known);
		return -EINVAL;
	}
	return 0;
}

int devices_fill_cfg(const struct plugin *p, const struct vm_config *c,
		     const config_setting_t *group, const char *inst_name, void *cfg, char ***strs,
		     unsigned *n_strs, char *err, size_t errlen)
{
	const struct cub_plugin *d = p->d;
	char where[512], why[512];
	int n = group ? config_setting_length(group) : 0;

	if (group)
		config_where(c, group, where, sizeof(where));
	else
		snprintf(where, sizeof(where), "%s", c ? c->path : "defaults");
	/* Unknown keys first: a typo must not silently become a default. */
	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
		const char *key = config_setting_name(s);
		unsigned j;

		if (!strcmp(key, "transport")) { /* read by the virtio core (virtio.c) */
			const char *t = config_setting_get_string(s);

			if (t && (!strcmp(t, "pci") || !strcmp(t, "mmio")))
				continue;
			config_where(c, s, where, sizeof(where));
			snprintf(err, errlen, "%s: %s: 'transport' must be \"pci\" or \"mmio\"",
				 where, inst_name);
			return -EINVAL;
		}
		if (!strcmp(key, "type") || !strcmp(key, "id") || !strcmp(key, "backend"))
			continue; /* backend: a group h->storage/net->open reads (storage.c, net.c) */
		for (j = 0; j < d->n_params; j++)
			if (!strcmp(d->params[j].name, key))
				break;
		if (j == d->n_params && param_group(d, key)) {
			int ret = check_nested(d, c, s, key, inst_name, err, errlen);

			if (ret)
				return ret;
			continue;
		}
		if (j == d->n_params) {
			char known[384] = "";

			for (j = 0; j < d->n_params; j++) {
				strncat(known, d->params[j].name, sizeof(known) - strlen(known) - 3);
				if (j + 1 < d->n_params)
					strcat(known, ", ");
			}
			config_where(c, s, where, sizeof(where));
			snprintf(err, errlen, "%s: %s: unknown parameter '%s'; %s takes %s", where,
				 inst_name, key, d->name, *known ? known : "no parameters");
			return -EINVAL;
		}
	}
	for (unsigned j = 0; j < d->n_params; j++) {
		const struct cub_param *prm = &d->params[j];
		const config_setting_t *s = group ? config_setting_get_member(group, prm->name) : NULL;
		const char *dot = strchr(prm->name, '.');
		char *slot = (char *)cfg + prm->offset;
		char gwhere[512];
		int ret;

		if (dot) { /* "g.key": key in the optional nested group g */
			char g[80];

			snprintf(g, sizeof(g), "%.*s", (int)(dot - prm->name), prm->name);
			s = group ? config_setting_get_member(group, g) : NULL;
			if (!s)
				continue; /* no group g: the slot stays zero */
			config_where(c, s, gwhere, sizeof(gwhere));
			s = config_setting_get_member(s, dot + 1);
		}
		if (!s && !prm->def) {
			snprintf(err, errlen, "%s: %s: '%s' is required (%s)", dot ? gwhere : where, inst_name,
				 prm->name, prm->doc ? prm->doc : loader_ptype_name(prm->type));
			return -EINVAL;
		}
		ret = put_param(prm, s, prm->def, slot, strs, n_strs, why, sizeof(why));
		if (ret) {
			if (s)
				config_where(c, s, where, sizeof(where));
			snprintf(err, errlen, "%s: %s: %s", where, inst_name, why);
			return ret;
		}
	}
	return 0;
}

/* ---- terminal restore, for raw-mode consoles ---- */

static struct {
	int fd;
	struct termios saved;
	volatile sig_atomic_t active;
} tty = { .fd = -1 };

void devices_tty_restore(void)
{
	if (tty.active) {
		tcsetattr(tty.fd, TCSAFLUSH, &tty.saved);
		tty.active = 0;
	}
}

static void fatal_signal(int sig)
{
	devices_tty_restore(); /* async-signal-safe: tcsetattr only */
	signal(sig, SIG_DFL);
	raise(sig);
}

static int host_tty_raw(struct cub_inst *in, int fd)
{
	static const int fatal[] = { SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGQUIT };
	struct termios raw;

	if (tty.active)
		return tty.fd == fd ? 0 : -EBUSY;
	if (tcgetattr(fd, &tty.saved) < 0)
		return -errno;
	raw = tty.saved;
	cfmakeraw(&raw);
	raw.c_oflag |= OPOST | ONLCR; /* keep host-side newline handling sane */
	tty.fd = fd;
	if (tcsetattr(fd, TCSANOW, &raw) < 0)
		return -errno;
	tty.active = 1;
	atexit(devices_tty_restore);
	for (unsigned i = 0; i < CUB_ARRAY_SIZE(fatal); i++) {
		struct sigaction sa = { .sa_handler = fatal_signal };

		sigaction(fatal[i], &sa, NULL);
	}
	return 0;
}

/* ---- the host services ---- */

static void host_log(struct cub_inst *in, int lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(lvl, in->name, fmt, ap);
	va_end(ap);
}

static void host_log_rl(struct cub_inst *in, int lvl, const char *fmt, ...)
{
	va_list ap;

	if (lvl > log_get_level() || !ratelimit_ok(&in->rl))
		return;
	va_start(ap, fmt);
	log_vmsg(lvl, in->name, fmt, ap);
	va_end(ap);
}

static int host_fail(struct cub_inst *in, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(in->err, sizeof(in->err), fmt, ap);
	va_end(ap);
	in->err_full = false;
	return err;
}

static void *host_gpa_map(struct cub_inst *in, uint64_t gpa, uint64_t len)
{
	return mem_map(&in->vm->mem, gpa, len);
}

static int host_region_add(struct cub_inst *in, struct cub_region *r)
{
	char why[256];
	struct bus *bus;
	int ret;

	if (in->created)
		return host_fail(in, -EBUSY, "regions can be added only at create time");
	if (in->n_regions == INST_MAX_REGIONS)
		return host_fail(in, -ENOSPC, "more than %d regions", INST_MAX_REGIONS);
	if (!r->io || !r->len || !r->class)
		return host_fail(in, -EINVAL, "region needs a class, a length and a handler");
	ret = arch_place(in->vm, r, why, sizeof(why));
	if (ret)
		return host_fail(in, ret, "%s", why);
	bus = r->bus == CUB_BUS_PIO ? &in->vm->pio : &in->vm->mmio;
	ret = bus_add(bus, r->base, r->len, r->io, r->priv, in->name);
	if (ret)
		return host_fail(in, ret, "%s region 0x%" PRIx64 "+0x%" PRIx64 " overlaps another device",
				 bus->name, r->base, r->len);
	in->regions[in->n_regions].bus = bus;
	in->regions[in->n_regions++].base = r->base;
	log_msg(CUB_LOG_DEBUG, in->name, "%s at %s 0x%" PRIx64 "+0x%" PRIx64 " irq %d", r->class,
		bus->name, r->base, r->len, r->irq);
	return 0;
}

static int host_irq_set(struct cub_inst *in, unsigned line, bool level)
{
	return irq_line(in->vm, line, level);
}

static int host_fd_watch(struct cub_inst *in, int fd, uint32_t ev, void (*cb)(void *), void *arg)
{
	int ret;

	if (in->n_watched == INST_MAX_WATCHES)
		return -ENOSPC;
	ret = event_watch(in->vm->ev, fd, ev, cb, arg);
	if (!ret)
		in->watched[in->n_watched++] = fd;
	return ret;
}

static int host_fd_unwatch(struct cub_inst *in, int fd)
{
	for (unsigned i = 0; i < in->n_watched; i++) {
		if (in->watched[i] == fd) {
			in->watched[i] = in->watched[--in->n_watched];
			return event_unwatch(in->vm->ev, fd);
		}
	}
	return -ENOENT;
}

static void host_vm_exit(struct cub_inst *in, int status)
{
	vm_request_exit(in->vm, status, "%s asked the VM to exit with status %d", in->name, status);
}

static uint64_t host_clock_us(struct cub_inst *in)
{
	return clock_since_start_us();
}

const struct cub_host devices_host = {
	.size = sizeof(struct cub_host),
	.log = host_log,
	.log_ratelimited = host_log_rl,
	.fail = host_fail,
	.gpa_map = host_gpa_map,
	.region_add = host_region_add,
	.irq_set = host_irq_set,
	.fd_watch = host_fd_watch,
	.fd_unwatch = host_fd_unwatch,
	.vm_exit = host_vm_exit,
	.tty_raw = host_tty_raw,
	.clock_us = host_clock_us,
	.storage = &devices_storage_host,
	.net = &devices_net_host,
	.virtio = &virtio_host,
};

/* ---- lifecycle ---- */

static void inst_free(struct cub_inst *in)
{
	const struct cub_device_ops *ops = in->plugin->d->ops;

	while (in->n_watched)
		host_fd_unwatch(in, in->watched[in->n_watched - 1]);
	for (unsigned i = 0; i < in->n_regions; i++)
		bus_del(in->regions[i].bus, in->regions[i].base);
	virtio_dev_free(in->virtio); /* stops the queues: before destroy frees priv */
	if (in->created && ops->destroy)
		ops->destroy(in->priv);
	storage_close_all(in);
	net_close_all(in);
	for (unsigned i = 0; i < in->n_strs; i++)
		free(in->strs[i]);
	free(in->strs);
	free(in->cfg);
	free(in->name);
	free(in);
}

static int inst_create(struct vm *vm, const struct registry *reg, const struct vm_config *c,
		       const struct dev_cfg *dc, struct cub_inst **out, char *err, size_t errlen)
{
	const struct plugin *p = registry_find(reg, CUB_KIND_DEVICE, dc->type);
	const struct cub_device_ops *ops;
	struct cub_inst *in;
	char where[512];
	int ret;

	config_where(c, dc->group, where, sizeof(where));
	if (!p) {
		snprintf(err, errlen,
			 "%s: no device plugin named '%s' (`cubicle plugins` lists those found)",
			 where, dc->type);
		return -ENOENT;
	}
	ops = p->d->ops;
	in = calloc(1, sizeof(*in));
	if (!in || asprintf(&in->name, "%s[%s]", dc->type, dc->id) < 0 ||
	    !(in->cfg = calloc(1, p->d->cfg_size ? p->d->cfg_size : 1))) {
		if (in)
			free(in->name);
		free(in);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	in->vm = vm;
	in->plugin = p;
	in->reg = reg;
	in->conf = c;
	in->dc = dc;
	ret = devices_fill_cfg(p, c, dc->group, in->name, in->cfg, &in->strs, &in->n_strs, err,
			       errlen);
	if (ret)
		goto fail;
	if (dc->group)
		config_setting_lookup_string(dc->group, "transport", &in->transport);
	if (!ops->create) {
		snprintf(err, errlen, "%s: %s: plugin has no create op", where, in->name);
		ret = -EINVAL;
		goto fail;
	}
	ret = ops->create(in, &devices_host, in->cfg, &in->priv);
	if (ret) {
		if (in->err_full)
			snprintf(err, errlen, "%s", in->err);
		else
			snprintf(err, errlen, "%s: %s: %s", where, in->name,
				 in->err[0] ? in->err : strerror(-ret));
		goto fail;
	}
	in->created = true;
	if (in->transport && !in->virtio) {
		snprintf(err, errlen, "%s: %s: 'transport' applies to virtio devices only", where,
			 in->name);
		ret = -EINVAL;
		goto fail;
	}
	ret = backend_check_unused(in, err, errlen);
	if (ret)
		goto fail;
	*out = in;
	return 0;
fail:
	inst_free(in);
	return ret < 0 ? ret : -EINVAL;
}

int devices_create_all(struct vm *vm, const struct registry *reg, const struct vm_config *c,
		       struct cub_inst ***out, unsigned *n_out, char *err, size_t errlen)
{
	struct cub_inst **v = calloc(c->n_devs + 1, sizeof(*v));
	int ret;

	*out = v;
	*n_out = 0;
	if (!v)
		return -ENOMEM;
	for (unsigned i = 0; i < c->n_devs; i++) {
		ret = inst_create(vm, reg, c, &c->devs[i], &v[i], err, errlen);
		if (ret)
			return ret;
		(*n_out)++;
	}
	return 0;
}

void devices_destroy_all(struct cub_inst **insts, unsigned n)
{
	if (!insts)
		return;
	while (n--)
		inst_free(insts[n]);
	free(insts);
}
