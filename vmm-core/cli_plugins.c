/* SPDX-License-Identifier: Apache-2.0 */
/* `cubicle plugins [NAME | FILE] [--json]`: the plugins found, or one
 * described (parameters, methods, extra system calls); near names get a
 * "did you mean". */
#include <getopt.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "loader.h"
#include "log.h"
#include "run.h"
#include "cli.h"

/* Levenshtein distance (short names only: longer ones count as far). */
static unsigned edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned row[65];

	if (la > 64 || lb > 64)
		return ~0u;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned diag = row[0], up;

		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned sub = diag + (a[i - 1] != b[j - 1]);

			up = row[j];
			row[j] = sub < up + 1 ? sub : up + 1;
			if (row[j - 1] + 1 < row[j])
				row[j] = row[j - 1] + 1;
			diag = up;
		}
	}
	return row[lb];
}

/* @name is the plugin file's name (virtio_blk.so), or that without .so. */
static bool same_file_name(const char *path, const char *name)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > 3 && !strcmp(base + n - 3, ".so"))
		n -= 3;
	return !strcmp(base, name) || (strlen(name) == n && !strncmp(base, name, n));
}

static void describe(const struct plugin *p)
{
	const struct cub_plugin *d = p->d;

	printf("%s (%s plugin, version %s, %s)\n  %s\n  file: %s\n", d->name,
	       loader_kind_name(d->kind), d->version ? d->version : "?",
	       d->license ? d->license : "license unknown", d->summary ? d->summary : "",
	       p->path);
	if (d->n_params)
		printf("  parameters:\n");
	for (unsigned i = 0; i < d->n_params; i++) {
		const struct cub_param *prm = &p->params[i];
		char def[96];

		if (!prm->def)
			snprintf(def, sizeof(def), "(required)");
		else if (prm->type == CUB_P_STORAGE || prm->type == CUB_P_NET ||
			 prm->type == CUB_P_RATELIMIT)
			snprintf(def, sizeof(def), "(optional)");
		else if (prm->type == CUB_P_STR || prm->type == CUB_P_PATH ||
			 prm->type == CUB_P_ENUM || prm->type == CUB_P_STRV)
			snprintf(def, sizeof(def), "= \"%s\"", prm->def);
		else
			snprintf(def, sizeof(def), "= %s", prm->def);
		printf("    %-14s %-9s %-18s %s\n", prm->name, loader_ptype_name(prm->type), def,
		       prm->doc ? prm->doc : "");
		if (prm->min || prm->max)
			printf("    %-14s range: %s to %s\n", "", prm->min ? prm->min : "-",
			       prm->max ? prm->max : "-");
		if (prm->type == CUB_P_ENUM) {
			printf("    %-14s choices:", "");
			for (int j = 0; prm->choices[j]; j++)
				printf(" %s", prm->choices[j]);
			printf("\n");
		}
	}
	/* read by cubicle itself for each virtio device */
	if (d->kind == CUB_KIND_DEVICE && !strncmp(d->name, "virtio-", 7)) {
		char def[32];

		snprintf(def, sizeof(def), "= \"%s\"", arch_virtio_default_transport());
		printf("    %-14s %-9s %-18s %s\n", "transport", "enum", def,
		       "how the guest finds the device (read by cubicle for every virtio device)");
		printf("    %-14s choices: pci mmio\n", "");
	}
	if (d->n_methods)
		printf("  methods:\n");
	for (unsigned i = 0; i < d->n_methods; i++)
		printf("    %-14s (%s)  %s\n", d->methods[i].name, d->methods[i].sig,
		       d->methods[i].doc ? d->methods[i].doc : "");
	if (d->size >= offsetof(struct cub_plugin, n_syscalls) + sizeof(d->n_syscalls) &&
	    d->n_syscalls) {
		printf("  system calls beyond the seccomp allow-lists:");
		for (unsigned i = 0; i < d->n_syscalls; i++) {
			const struct cub_syscall *c = &d->syscalls[i];

			if (c->arg < 0)
				printf(" %s", c->name);
			else
				printf(" %s(arg%d & 0x%llx == 0x%llx)", c->name, c->arg,
				       (unsigned long long)c->mask, (unsigned long long)c->value);
		}
		printf("\n");
	}
}

/* `plugins NAME --json`: what describe() prints, as one JSON object, the
 * defaults in their own type. */
static void describe_json(const struct plugin *p)
{
	const struct cub_plugin *d = p->d;
	json_t *o = json_pack("{s:s,s:s,s:s?,s:s?,s:s?,s:s,s:[],s:[]}", "name", d->name, "kind",
			      loader_kind_name(d->kind), "version", d->version, "license",
			      d->license, "summary", d->summary, "file", p->path, "parameters",
			      "methods");
	json_t *params = json_object_get(o, "parameters"), *methods = json_object_get(o, "methods");

	for (unsigned i = 0; o && i < d->n_params; i++) {
		const struct cub_param *prm = &p->params[i];
		json_t *e = json_pack("{s:s,s:s,s:b,s:s?}", "name", prm->name, "type",
				      loader_ptype_name(prm->type), "required", !prm->def, "doc",
				      prm->doc);
		json_t *def = NULL;

		if (!e)
			continue;
		if (prm->def && (prm->type == CUB_P_BOOL))
			def = json_boolean(!strcmp(prm->def, "true"));
		else if (prm->def && (prm->type == CUB_P_INT || prm->type == CUB_P_U64) &&
			 *prm->def && strspn(prm->def, "-0123456789") == strlen(prm->def))
			def = json_integer(strtoll(prm->def, NULL, 10));
		else if (prm->def && prm->type != CUB_P_STORAGE && prm->type != CUB_P_NET &&
			 prm->type != CUB_P_RATELIMIT)
			def = json_string(prm->def);
		if (def)
			json_object_set_new(e, "default", def);
		if (prm->min)
			json_object_set_new(e, "min", json_string(prm->min));
		if (prm->max)
			json_object_set_new(e, "max", json_string(prm->max));
		if (prm->type == CUB_P_ENUM) {
			json_t *ch = json_array();

			for (int k = 0; prm->choices[k]; k++)
				json_array_append_new(ch, json_string(prm->choices[k]));
			json_object_set_new(e, "choices", ch);
		}
		json_array_append_new(params, e);
	}
	if (o && d->kind == CUB_KIND_DEVICE && !strncmp(d->name, "virtio-", 7))
		json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:s,s:[s,s],s:s}", "name",
							"transport", "type", "enum", "required", 0,
							"default", arch_virtio_default_transport(),
							"choices", "pci", "mmio", "doc",
							"how the guest finds the device (read by cubicle)"));
	for (unsigned i = 0; o && i < d->n_methods; i++)
		json_array_append_new(methods, json_pack("{s:s,s:s,s:s?}", "name", d->methods[i].name,
							 "signature", d->methods[i].sig, "doc",
							 d->methods[i].doc));
	json_dumpf(o, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(o);
}

int cmd_plugins(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "plugin-dir", required_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *dirs[MAX_OPTS];
	unsigned n_dirs = 0;
	struct registry reg = { 0 };
	bool json = false;
	int c, status = 0;

	while ((c = getopt_long(argc, argv, "P:jh", opts, NULL)) != -1) {
		if (c == 'j') {
			json = true;
			continue;
		}
		if (c == 'P' && plugin_dir_opt(optarg))
			return 2;
		if (c == 'P' && n_dirs < MAX_OPTS)
			dirs[n_dirs++] = optarg;
		else if (c == 'h')
			return cmd_help("plugins");
		else
			return bad_option("plugins", argv);
	}
	if (argc - optind > 1)
		return usage_error("%s", "'plugins' takes at most one NAME or FILE");
	if (optind < argc && strchr(argv[optind], '/')) {
		struct plugin *p;
		char err[1024];

		if (loader_open(argv[optind], &p, err, sizeof(err)) < 0) {
			log_err("%s", err);
			return VM_EXIT_ERROR;
		}
		json ? describe_json(p) : describe(p);
		loader_close(p);
		return 0;
	}
	if (load_registry(&reg, dirs, n_dirs, CUB_LOG_WARN) < 0)
		return VM_EXIT_ERROR;
	if (optind < argc) {
		unsigned found = 0, best_d = ~0u;
		const char *best = NULL;

		for (unsigned i = 0; i < reg.n; i++) {
			if (!strcmp(reg.p[i]->d->name, argv[optind]) ||
			    same_file_name(reg.p[i]->path, argv[optind])) {
				json ? describe_json(reg.p[i]) : describe(reg.p[i]);
				found++;
			}
		}
		for (unsigned i = 0; !found && i < reg.n; i++) {
			unsigned dist = edit_distance(reg.p[i]->d->name, argv[optind]);

			if (dist < best_d) {
				best_d = dist;
				best = reg.p[i]->d->name;
			}
		}
		if (!found && best && best_d <= 3) {
			log_err("no plugin named '%s'; did you mean %s? (`cubicle plugins` lists them)",
				argv[optind], best);
			status = VM_EXIT_ERROR;
		} else if (!found) {
			log_err("no plugin named '%s' (run `cubicle plugins` to list them)",
				argv[optind]);
			status = VM_EXIT_ERROR;
		}
	} else if (!reg.n) {
		log_err("no plugins found; use --plugin-dir or CUBICLE_PLUGIN_PATH");
		status = VM_EXIT_ERROR;
	} else if (json) {
		json_t *all = json_array();

		for (unsigned i = 0; all && i < reg.n; i++) {
			const struct cub_plugin *d = reg.p[i]->d;

			json_array_append_new(all, json_pack("{s:s,s:s,s:s?,s:s?,s:s}", "name", d->name,
							     "kind", loader_kind_name(d->kind), "version",
							     d->version, "summary", d->summary, "file",
							     reg.p[i]->path));
		}
		json_dumpf(all, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(all);
	} else {
		printf("%-14s %-8s %-8s %s\n", "NAME", "KIND", "VERSION", "SUMMARY");
		for (unsigned i = 0; i < reg.n; i++) {
			const struct cub_plugin *d = reg.p[i]->d;

			printf("%-14s %-8s %-8s %s\n", d->name, loader_kind_name(d->kind),
			       d->version ? d->version : "?", d->summary ? d->summary : "");
		}
		printf("\n`cubicle plugins NAME` shows a plugin's parameters and methods.\n");
	}
	registry_free(&reg);
	return status;
}
