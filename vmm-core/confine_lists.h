/* SPDX-License-Identifier: Apache-2.0 */
/* confine.c's private interface to its allow-lists (confine_lists.c). */
#ifndef CUBICLE_CONFINE_LISTS_H
#define CUBICLE_CONFINE_LISTS_H

#include <linux/filter.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>

#include "confine.h"

struct registry;

struct kind_info {
	const char *name;
	bool plugin_calls; /* plugins' declared calls added */
	bool io, control;
	bool no_paths;     /* Landlock: no file reached by path */
};

/* Per kind: its name and which lists it gets. */
extern const struct kind_info confine_kinds[CONFINE_KINDS];

/* Where a list's rules go: into a libseccomp filter, or (ctx NULL) into
 * the bytes that describe the list, the cache's key (a line of text, then
 * a record per rule). */
struct sink {
	scmp_filter_ctx ctx;
	char *desc;
	size_t len, cap;
	bool nomem;
};

/* Kind @k's list in @mode described: what its program is compiled from. */
int confine_describe_list(enum confine_kind k, enum confine_mode mode, const struct registry *reg,
			  struct sink *d, char *err, size_t errlen);

/* Kind @k's list in @mode compiled with libseccomp into *@prog (malloc'd,
 * *@n instructions): 0, or -errno with a message. */
int confine_compile(enum confine_kind k, enum confine_mode mode, const struct registry *reg,
		    struct sock_filter **prog, unsigned short *n, char *err, size_t errlen);

#endif
