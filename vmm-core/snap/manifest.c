/* SPDX-License-Identifier: Apache-2.0 */
/* A VM description tree (cnode.h) as JSON, for a snapshot's manifest, and
 * back. Groups are objects, lists arrays; a value given as text on the
 * command line (--set), which its reader converts to the type it wants, is
 * {"=": "TEXT"} (no config key can be "="). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnode.h"
#include "snap/snapshot.h"

#define TREE_DEPTH_MAX 16

static json_t *to_json(const struct cnode *n, unsigned depth)
{
	json_t *j;

	if (depth > TREE_DEPTH_MAX)
		return NULL;
	switch (n->type) {
	case CN_GROUP:
	case CN_LIST:
		j = n->type == CN_GROUP ? json_object() : json_array();
		for (unsigned i = 0; j && i < n->n_kids; i++) {
			json_t *k = to_json(n->kids[i], depth + 1);

			if (!k || (n->type == CN_GROUP ? json_object_set_new(j, n->kids[i]->name, k)
						       : json_array_append_new(j, k))) {
				json_decref(j);
				return NULL;
			}
		}
		return j;
	case CN_BOOL:
		return json_boolean(n->b);
	case CN_INT:
		return json_integer(n->i);
	case CN_FLOAT:
		return json_real(n->f);
	case CN_STR:
		return json_string(n->s);
	case CN_TEXT:
		return json_pack("{s:s}", "=", n->s);
	}
	return NULL;
}

void *snap_tree_to_json(const struct cnode *n)
{
	return to_json(n, 0);
}

static struct cnode *from_json(struct arena *ar, const json_t *j, const char *name,
			       const char *where, unsigned depth, char *err, size_t errlen)
{
	struct cnode *n = NULL;
	const char *key;
	json_t *v;
	size_t i;

	if (depth > TREE_DEPTH_MAX) {
		errf(err, errlen, -EINVAL, "%s: nested more than %d deep", where, TREE_DEPTH_MAX);
		return NULL;
	}
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		v = json_object_get(j, "=");
		if (v && json_object_size(j) == 1 && json_is_string(v)) {
			n = cnode_new(ar, CN_TEXT, name, where);
			if (n && !(n->s = arena_strdup(ar, json_string_value(v))))
				n = NULL;
			break;
		}
		n = cnode_new(ar, CN_GROUP, name, where);
		json_object_foreach((json_t *)j, key, v) {
			struct cnode *k;

			if (!n)
				break;
			k = from_json(ar, v, arena_strdup(ar, key), where, depth + 1, err, errlen);
			if (!k || cnode_add(ar, n, k))
				return NULL;
		}
		break;
	case JSON_ARRAY:
		n = cnode_new(ar, CN_LIST, name, where);
		json_array_foreach(j, i, v) {
			struct cnode *k;

			if (!n)
				break;
			k = from_json(ar, v, NULL, where, depth + 1, err, errlen);
			if (!k || cnode_add(ar, n, k))
				return NULL;
		}
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		n = cnode_new(ar, CN_BOOL, name, where);
		if (n)
			n->b = json_is_true(j);
		break;
	case JSON_INTEGER:
		n = cnode_new(ar, CN_INT, name, where);
		if (n)
			n->i = json_integer_value(j);
		break;
	case JSON_REAL:
		n = cnode_new(ar, CN_FLOAT, name, where);
		if (n)
			n->f = json_real_value(j);
		break;
	case JSON_STRING:
		n = cnode_new(ar, CN_STR, name, where);
		if (n && !(n->s = arena_strdup(ar, json_string_value(j))))
			n = NULL;
		break;
	case JSON_NULL:
		errf(err, errlen, -EINVAL, "%s: %s%snull is not a config value", where,
		     name ? name : "", name ? ": " : "");
		return NULL;
	}
	if (!n && !*err)
		errf(err, errlen, -ENOMEM, "out of memory");
	return n;
}

struct cnode *snap_tree_from_json(struct arena *ar, const void *json, const char *where,
				  char *err, size_t errlen)
{
	if (!json_is_object((const json_t *)json)) {
		errf(err, errlen, -EINVAL, "%s: the VM description is not an object", where);
		return NULL;
	}
	struct cnode *root;

	if (errlen)
		*err = '\0';
	root = from_json(ar, json, NULL, where, 0, err, errlen);
	if (root && root->type != CN_GROUP) { /* {"=": "..."}: a text value */
		errf(err, errlen, -EINVAL, "%s: the VM description is not a group", where);
		return NULL;
	}
	return root;
}

/* Every "type" of a group in @j (devices and their backends), once each. */
static int collect_types(const json_t *j, char ***out, unsigned *n, unsigned depth)
{
	const char *key;
	json_t *v;
	size_t i;

	if (depth > TREE_DEPTH_MAX)
		return 0;
	if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			if (collect_types(v, out, n, depth + 1))
				return -ENOMEM;
		return 0;
	}
	if (!json_is_object(j) || json_object_get(j, "="))
		return 0;
	json_object_foreach((json_t *)j, key, v) {
		const char *t = !strcmp(key, "type") ? json_string_value(v) : NULL;
		char **grown;
		unsigned k;

		if (!t && !strcmp(key, "type"))
			t = json_string_value(json_object_get(v, "="));
		if (!t) {
			if (collect_types(v, out, n, depth + 1))
				return -ENOMEM;
			continue;
		}
		for (k = 0; k < *n && strcmp((*out)[k], t); k++)
			;
		if (k < *n)
			continue;
		grown = realloc(*out, (*n + 2) * sizeof(**out));
		if (!grown)
			return -ENOMEM;
		*out = grown;
		if (!(grown[*n] = strdup(t)))
			return -ENOMEM;
		grown[++*n] = NULL;
	}
	return 0;
}

char **snap_plugin_names(const char *dir)
{
	char *path, **names = NULL;
	json_t *m;
	const json_t *tree;
	unsigned n = 0;

	if (asprintf(&path, "%s/manifest.json", dir) < 0)
		return NULL;
	m = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
	tree = json_object_get(json_object_get(m, "config"), "tree");
	free(path);
	if (tree && !collect_types(tree, &names, &n, 0) && n) {
		json_decref(m);
		return names;
	}
	json_decref(m);
	strv_free(names);
	return NULL;
}

char **snap_chain_dirs(const char *dir)
{
	char **dirs = calloc(SNAP_DIFF_DEPTH_MAX + 2, sizeof(*dirs));
	unsigned n = 0;

	if (!dirs || !(dirs[n++] = strdup(dir)))
		goto fail;
	while (n <= SNAP_DIFF_DEPTH_MAX) {
		char *path;
		json_t *m;
		const char *type, *parent;

		if (asprintf(&path, "%s/manifest.json", dirs[n - 1]) < 0)
			goto fail;
		m = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
		free(path);
		if (!m)
			goto fail;
		type = json_string_value(json_object_get(m, "type"));
		parent = json_string_value(json_object_get(m, "parent"));
		if (!type || strcmp(type, "Diff") || !parent) {
			json_decref(m);
			return dirs;
		}
		dirs[n] = strdup(parent);
		json_decref(m);
		if (!dirs[n++])
			goto fail;
	}
fail:
	strv_free(dirs);
	return NULL;
}
