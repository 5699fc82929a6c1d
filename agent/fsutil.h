/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle-agent: directory creation and ownership for the user a request acts as. */
#ifndef CUBICLE_AGENT_FSUTIL_H
#define CUBICLE_AGENT_FSUTIL_H

#include <stdbool.h>

#include <jansson.h>

struct user;

/* Creates PATH's missing parent directories (and PATH itself with LAST), owned by U. 0 or -errno. */
int fsu_mkdirs(const char *path, const struct user *u, bool last);
/* Gives FD (or PATH when FD < 0) to U when we are root and U is someone else. */
void fsu_own(int fd, const char *path, const struct user *u);

/*
 * User metadata as envd keeps it: xattrs "user.e2b.<key>". fsu_meta_set makes
 * PATH's set exactly META (NULL or empty: none); fsu_meta_get returns the map
 * or NULL when there is none. 0 or -errno (-ENOTSUP where xattrs are not).
 */
#define FSU_META_PREFIX "user.e2b."
int fsu_meta_set(const char *path, json_t *meta);
json_t *fsu_meta_get(const char *path);

#endif
