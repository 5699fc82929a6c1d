/* SPDX-License-Identifier: Apache-2.0 */
/* Reading a libconfig VM file and --set overrides into a value tree (cnode):
 * the only part of cubicle that knows libconfig. */
#ifndef CUBICLE_CONFIG_H
#define CUBICLE_CONFIG_H

#include <string.h>

#include "cnode.h"

/* The length of @path's folder part ("/" for "/x"), or 0 when it names
 * none (the working folder's file). Paths in a config are taken from its
 * folder: config_load_file, plan_build_file and run.c's Landlock rules. */
static inline size_t path_dir_len(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? (size_t)(slash - path) + (slash == path) : 0;
}

/*
 * Read the libconfig file at path into a tree allocated in ar, then apply
 * each --set override ("machine.vcpus=4", "devices.ID.backend.path=x"). 0,
 * or -errno with one line "FILE:LINE: what is wrong" (or "--set ARG: ...")
 * in err.
 */
int config_load_file(struct arena *ar, const char *path, char *const *sets, unsigned n_sets,
		     struct cnode **root, char *err, size_t errlen);
/* The same from a string; messages name path. */
int config_load_text(struct arena *ar, const char *text, const char *path, struct cnode **root,
		     char *err, size_t errlen);
/* One --set override on a tree: a text value (CN_TEXT) whose reader gives it
 * its type; devices.ID and devices.[N] name a device. */
int config_apply_set(struct arena *ar, struct cnode *root, const char *arg, char *err,
		     size_t errlen);

#endif
