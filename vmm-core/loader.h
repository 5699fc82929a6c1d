/* SPDX-License-Identifier: Apache-2.0 */
/* The plugin loader: find .so files, check them before running any of their
 * code, and call their control methods through libffi. */
#ifndef CUBICLE_LOADER_H
#define CUBICLE_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include "cubicle/plugin.h"

struct plugin {
	char *path;
	void *dl;
	const struct cub_plugin *d;
	struct cub_param *params; /* d's params in this host's layout (params.c) */
	void *cifs; /* one prepared ffi_cif (+ arg types) per method */
};

struct registry {
	struct plugin **p;
	unsigned n;
};

/* The smallest struct cub_plugin size this host accepts. */
#define LOADER_MIN_DESC_SIZE offsetof(struct cub_plugin, ops) + sizeof(void *)

/* Open and check one file. 0, or -errno with one line naming the file in err. */
int loader_open(const char *path, struct plugin **out, char *err, size_t errlen);
void loader_close(struct plugin *p);
/* The oldest host ABI minor d says it needs (abi_needs, else abi_minor). */
unsigned loader_abi_needs(const struct cub_plugin *d);

/* The directories to search, in order: each --plugin-dir, then
 * CUBICLE_PLUGIN_PATH (colon-separated), then the build tree (when running
 * uninstalled) or the installed directory, each folder once (the first
 * time it comes, by any name). Returns a NULL-terminated array
 * the caller frees with loader_dirs_free. */
char **loader_dirs(char *const *cli_dirs, unsigned n_cli);
void loader_dirs_free(char **dirs);

/* True if this executable lives in the build tree (tests, uninstalled use):
 * plugins and helper programs are then taken from there. */
bool loader_uninstalled(void);

/* Load every *.so in dirs. A plugin whose name was already found earlier in
 * the search order is skipped (first wins). Files that fail the checks are
 * reported through the warn callback and skipped. 0 or -ENOMEM. */
int registry_scan(struct registry *r, char *const *dirs,
		  void (*warn)(const char *msg, void *arg), void *arg);
/* The same, loading only the files named like one of @names (NULL-ended
 * plugin names; "virtio-blk" is virtio_blk.so or virtio-blk.so): a plugin
 * in a file named otherwise is not found (check with registry_has, and scan
 * them all then). @names NULL: every file. */
int registry_scan_names(struct registry *r, char *const *dirs, char *const *names,
			void (*warn)(const char *msg, void *arg), void *arg);
/* Whether a plugin of that name (any kind) is loaded. */
bool registry_has(const struct registry *r, const char *name);
void registry_free(struct registry *r);
const struct plugin *registry_find(const struct registry *r, enum cub_kind kind, const char *name);

const char *loader_kind_name(enum cub_kind k);
const char *loader_ptype_name(enum cub_ptype t);

/* Call method name on priv with textual args converted per its signature.
 * Returns the method's own return value (0 or -errno), or -ENOENT/-EINVAL
 * with a reason in err for an unknown method or bad arguments. */
int loader_call(const struct plugin *p, const char *method, void *priv, struct cub_reply *reply,
		char *const *args, unsigned n_args, char *err, size_t errlen);

#endif
