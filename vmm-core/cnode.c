/* SPDX-License-Identifier: Apache-2.0 */
/* The value tree every VM description becomes, and its arena. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnode.h"

struct arena_blk {
	struct arena_blk *next;
	max_align_t data[];
};

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_blk *b = calloc(1, sizeof(*b) + n);

	if (!b)
		return NULL;
	b->next = a->head;
	a->head = b;
	return b->data;
}

char *arena_strdup(struct arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = arena_alloc(a, n);

	return d ? memcpy(d, s, n) : NULL;
}

char *arena_printf(struct arena *a, const char *fmt, ...)
{
	va_list ap;
	char *s, *d;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	d = arena_strdup(a, s);
	free(s);
	return d;
}

void arena_free(struct arena *a)
{
	while (a->head) {
		struct arena_blk *b = a->head;

		a->head = b->next;
		free(b);
	}
}

struct cnode *cnode_new(struct arena *a, enum cnode_type t, const char *name, const char *where)
{
	struct cnode *n = arena_alloc(a, sizeof(*n));

	if (!n)
		return NULL;
	n->type = t;
	n->name = name;
	n->where = where;
	return n;
}

int cnode_add(struct arena *a, struct cnode *parent, struct cnode *kid)
{
	if (parent->n_kids == parent->cap_kids) {
		unsigned cap = parent->cap_kids ? parent->cap_kids * 2 : 8;
		struct cnode **k = arena_alloc(a, cap * sizeof(*k));

		if (!k)
			return -ENOMEM;
		if (parent->n_kids)
			memcpy(k, parent->kids, parent->n_kids * sizeof(*k));
		parent->kids = k;
		parent->cap_kids = cap;
	}
	parent->kids[parent->n_kids++] = kid;
	return 0;
}

struct cnode *cnode_get(const struct cnode *g, const char *name)
{
	if (!g || g->type != CN_GROUP)
		return NULL;
	for (unsigned i = 0; i < g->n_kids; i++)
		if (g->kids[i]->name && !strcmp(g->kids[i]->name, name))
			return g->kids[i];
	return NULL;
}

const char *cnode_type_name(enum cnode_type t)
{
	switch (t) {
	case CN_GROUP: return "a group { ... }";
	case CN_LIST: return "a list";
	case CN_BOOL: return "true or false";
	case CN_INT: return "an integer";
	case CN_FLOAT: return "a number";
	case CN_STR: return "a string";
	case CN_TEXT: return "a value";
	}
	return "nothing";
}

int errf(char *err, size_t len, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return ret;
}

void strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}
