/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cubicle's own endpoints:
 *   GET /plugins                          every plugin found: kind, version,
 *                                         parameters, methods
 *   GET /devices                          the VM's devices, their backends and
 *                                         the methods of each
 *   PUT /devices/{id}/methods/{name}      call a control method through
 *                                         libffi: {"args": [...]} typed by the
 *                                         method's signature; the device's own
 *                                         methods first, then its backends'
 *                                         ({name} may be KEY.NAME to pick the
 *                                         backend group KEY, e.g.
 *                                         backend.policy_allow)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "cnode.h"
#include "devices.h"
#include "loader.h"

static json_t *methods_of(const struct cub_plugin *d)
{
	json_t *arr = json_array();

	for (unsigned i = 0; arr && i < d->n_methods; i++)
		json_array_append_new(arr, json_pack("{s:s,s:s,s:s}", "name", d->methods[i].name,
						     "signature", d->methods[i].sig, "doc",
						     d->methods[i].doc ? d->methods[i].doc : ""));
	return arr;
}

static int get_plugins(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		       size_t errlen)
{
	const struct registry *reg = api_vm(a)->reg;
	json_t *arr = json_array();

	for (unsigned i = 0; arr && i < reg->n; i++) {
		const struct plugin *p = reg->p[i];
		const struct cub_plugin *d = p->d;
		json_t *params = json_array();

		for (unsigned k = 0; params && k < d->n_params; k++) {
			const struct cub_param *pp = &p->params[k];

			json_array_append_new(params,
					      json_pack("{s:s,s:s,s:s?,s:s}", "name", pp->name,
							"type", loader_ptype_name(pp->type),
							"default", pp->def, "doc",
							pp->doc ? pp->doc : ""));
		}
		json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:o}", "name", d->name,
						     "kind", loader_kind_name(d->kind), "version",
						     d->version, "summary", d->summary ? d->summary : "",
						     "file", p->path, "params", params, "methods",
						     methods_of(d)));
	}
	*out = arr;
	return arr ? 200 : errf(err, errlen, 500, "out of memory");
}

static json_t *backends_of(const struct cub_inst *in)
{
	const struct backend *lists[] = { in->storages, in->nets };
	json_t *arr = json_array();

	for (unsigned l = 0; arr && l < 2; l++)
		for (const struct backend *b = lists[l]; b; b = b->next)
			json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:o}", "key", b->key,
							     "name", b->bin.name, "plugin",
							     b->bin.plugin->d->name, "methods",
							     methods_of(b->bin.plugin->d)));
	return arr;
}

static int get_devices(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		       size_t errlen)
{
	const struct api_vm *vm = api_vm(a);
	json_t *arr = json_array();

	for (unsigned i = 0; arr && i < vm->n_insts; i++) {
		const struct cub_inst *d = vm->insts[i];

		json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:o,s:o}", "id", d->pi->id, "name",
						     d->name, "plugin", d->plugin->d->name,
						     "methods", methods_of(d->plugin->d),
						     "backends", backends_of(d)));
	}
	*out = arr;
	return arr ? 200 : errf(err, errlen, 500, "out of memory");
}

static bool has_method(const struct plugin *p, const char *name)
{
	for (unsigned i = 0; i < p->d->n_methods; i++)
		if (!strcmp(p->d->methods[i].name, name))
			return true;
	return false;
}

/* The instance (device or backend) of device @dev whose plugin has method
 * @name; @key: only the backend of that group. NULL if none. */
static const struct cub_inst *target(const struct cub_inst *dev, const char *key, const char *name)
{
	const struct backend *lists[] = { dev->storages, dev->nets };

	if (!key && has_method(dev->plugin, name))
		return dev;
	for (unsigned l = 0; l < 2; l++)
		for (const struct backend *b = lists[l]; b; b = b->next)
			if ((!key || !strcmp(b->key, key)) && has_method(b->bin.plugin, name))
				return &b->bin;
	return NULL;
}

/* A JSON argument as the text loader_call parses for signature letter c. */
static int arg_text(json_t *v, char c, char *buf, size_t len)
{
	switch (c) {
	case 'b':
		if (!json_is_boolean(v))
			return -EINVAL;
		snprintf(buf, len, "%d", json_is_true(v));
		return 0;
	case 'i':
	case 'u':
	case 'x':
	case 't':
		/* Integers, or strings for what JSON numbers lose (above 2^63). */
		if (json_is_integer(v))
			snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		else if (json_is_string(v))
			snprintf(buf, len, "%s", json_string_value(v));
		else
			return -EINVAL;
		return 0;
	case 's':
		if (!json_is_string(v) || json_string_length(v) >= len ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return -EINVAL;
		snprintf(buf, len, "%s", json_string_value(v));
		return 0;
	}
	return -EINVAL;
}

static const char *letter_name(char c)
{
	switch (c) {
	case 'b': return "a boolean";
	case 'i': return "a 32-bit integer";
	case 'u': return "an unsigned 32-bit integer";
	case 'x': return "a 64-bit integer";
	case 't': return "an unsigned 64-bit integer";
	case 's': return "a string (no NUL)";
	}
	return "?";
}

static int put_method(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		      size_t errlen)
{
	static const struct api_field f[] = { { "args", JSON_ARRAY, false } };
	const struct api_vm *vm = api_vm(a);
	const struct cub_inst *dev = NULL, *t;
	char dev_id[201], *name, *dot, key[201] = "";
	char texts[8][1024], *args[8], what[512];
	json_t *list = json_object_get(in, "args"), *v;
	const char *sig = NULL;
	struct cub_reply reply;
	size_t n = list ? json_array_size(list) : 0, i;
	int ret;

	snprintf(dev_id, sizeof(dev_id), "%s", id);
	name = strstr(dev_id, "/methods/");
	if (!name || !name[9] || strchr(name + 9, '/'))
		return errf(err, errlen, 400,
				"Invalid request method and/or path: PUT /devices/%s (expected /devices/ID/methods/NAME)", id);
	*name = '\0';
	name += 9;
	ret = api_check(in, f, 1, "method call", err, errlen);
	if (ret)
		return ret;
	if (!vm->running)
		return errf(err, errlen, 400, "no VM is running yet (PUT /actions InstanceStart first)");
	for (unsigned k = 0; k < vm->n_insts && !dev; k++)
		if (!strcmp(vm->insts[k]->pi->id, dev_id))
			dev = vm->insts[k];
	if (!dev)
		return errf(err, errlen, 404, "no device '%s' (GET /devices lists them)", dev_id);
	dot = strchr(name, '.');
	if (dot) {
		snprintf(key, sizeof(key), "%.*s", (int)(dot - name), name);
		name = dot + 1;
	}
	t = target(dev, dot ? key : NULL, name);
	if (!t)
		return errf(err, errlen, 404, "%s has no method '%s%s%s' (GET /devices lists them)",
				dev->name, key, dot ? "." : "", name);
	for (unsigned k = 0; k < t->plugin->d->n_methods; k++)
		if (!strcmp(t->plugin->d->methods[k].name, name))
			sig = t->plugin->d->methods[k].sig;
	if (n != strlen(sig))
		return errf(err, errlen, 400, "%s.%s takes %zu argument%s (signature \"%s\"), not %zu",
				t->name, name, strlen(sig), strlen(sig) == 1 ? "" : "s", sig, n);
	json_array_foreach(list, i, v) {
		if (arg_text(v, sig[i], texts[i], sizeof(texts[i])))
			return errf(err, errlen, 400, "%s.%s: argument %zu must be %s", t->name,
					name, i + 1, letter_name(sig[i]));
		args[i] = texts[i];
	}
	ret = loader_call(t->plugin, name, t->priv, &reply, args, (unsigned)n, what, sizeof(what));
	if (ret == -ENOENT || (ret < 0 && what[0] && !reply.len))
		return errf(err, errlen, 400, "%s", what);
	if (ret < 0)
		return errf(err, errlen, 400, "%s.%s: %s%s%s", t->name, name,
				reply.len ? reply.text : "", reply.len ? ": " : "", strerror(-ret));
	*out = json_pack("{s:s,s:s,s:s#}", "device", dev_id, "method", name, "reply", reply.text,
			 (int)reply.len);
	return *out ? 200 : errf(err, errlen, 500, "out of memory");
}

/* PUT /stop: end the VMM (the VM, if any, is stopped and torn down; the
 * process exits 0). Answered before the teardown starts. */
static int put_stop(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		    size_t errlen)
{
	const struct api_vm *vm = api_vm(a);

	(void)id, (void)in, (void)out;
	if (!vm->stop)
		return errf(err, errlen, 400, "this VMM cannot be stopped through its API");
	vm->stop(vm->ctx, 0);
	return 204;
}

const struct api_route cub_routes[] = {
	{ "PUT", "/stop", false, false, put_stop, false },
	{ "GET", "/plugins", false, false, get_plugins, false },
	{ "GET", "/devices", false, false, get_devices, false },
	{ "PUT", "/devices/", true, true, put_method, true },
};
const unsigned cub_n_routes = sizeof(cub_routes) / sizeof(cub_routes[0]);
