/* SPDX-License-Identifier: Apache-2.0 */
/* A VM description as a plain tree of named values, independent of where it
 * came from (a libconfig file, --set, JSON from the control API), and the
 * arena that owns it and everything the plan derives from it. */
#ifndef CUBICLE_CNODE_H
#define CUBICLE_CNODE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Memory freed all at once: a tree, a plan, their strings. */
struct arena {
	struct arena_blk *head;
};

void *arena_alloc(struct arena *a, size_t n); /* zeroed; NULL when out of memory */
char *arena_strdup(struct arena *a, const char *s);
char *arena_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void arena_free(struct arena *a);

/*
 * CN_TEXT is a value given as text with no type of its own (--set, a
 * default): whoever reads it converts it to the type it expects, with the
 * full 64-bit range checked.
 */
enum cnode_type { CN_GROUP, CN_LIST, CN_BOOL, CN_INT, CN_FLOAT, CN_STR, CN_TEXT };

struct cnode {
	const char *name;    /* member name in a group; NULL in a list */
	enum cnode_type type;
	bool b;
	int64_t i;
	double f;
	const char *s;       /* CN_STR, CN_TEXT */
	struct cnode **kids; /* CN_GROUP, CN_LIST */
	unsigned n_kids, cap_kids;
	const char *where;   /* "vm.cfg:12" or "--set machine.vcpus=2" */
};

struct cnode *cnode_new(struct arena *a, enum cnode_type t, const char *name, const char *where);
/* Append kid to a group or list: 0 or -ENOMEM. */
int cnode_add(struct arena *a, struct cnode *parent, struct cnode *kid);
/* The member called name of a group, or NULL. */
struct cnode *cnode_get(const struct cnode *g, const char *name);
/* "a group { ... }", "an integer", ... for messages. */
const char *cnode_type_name(enum cnode_type t);

/* Free a NULL-ended, malloc'd array of malloc'd strings (NULL: nothing). */
void strv_free(char **v);

/* One message helper for the whole core: format into err (nothing when err
 * is NULL or len 0), return ret. */
int errf(char *err, size_t len, int ret, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
