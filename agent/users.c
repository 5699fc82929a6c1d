/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Users and groups for cubicle-agent, read straight from /etc/passwd and
 * /etc/group with fgetpwent/fgetgrent: the agent is static, and a static
 * glibc's getpwnam would want NSS modules a small guest does not have.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

static void fill(struct user *u, const struct passwd *pw)
{
	u->uid = pw->pw_uid;
	u->gid = pw->pw_gid;
	snprintf(u->name, sizeof(u->name), "%s", pw->pw_name);
	snprintf(u->home, sizeof(u->home), "%s", pw->pw_dir && *pw->pw_dir ? pw->pw_dir : "/");
	snprintf(u->shell, sizeof(u->shell), "%s", pw->pw_shell && *pw->pw_shell ? pw->pw_shell : "/bin/sh");
}

static int lookup(const char *name, uid_t uid, struct user *u)
{
	FILE *f = fopen("/etc/passwd", "re");
	struct passwd *pw;
	int rc = -ENOENT;

	if (!f)
		return -ENOENT;
	while ((pw = fgetpwent(f))) {
		if (name ? !strcmp(pw->pw_name, name) : pw->pw_uid == uid) {
			fill(u, pw);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

int user_lookup(const char *name, struct user *u)
{
	return lookup(name, 0, u);
}

const char *user_name(uid_t uid, char *buf, size_t len)
{
	static struct { uid_t uid; char name[64]; bool set; } cache[8];
	static unsigned next;
	struct user u;

	for (unsigned i = 0; i < 8; i++)
		if (cache[i].set && cache[i].uid == uid) {
			snprintf(buf, len, "%s", cache[i].name);
			return buf;
		}
	if (lookup(NULL, uid, &u))
		snprintf(u.name, sizeof(u.name), "%u", (unsigned)uid);
	cache[next].uid = uid;
	cache[next].set = true;
	snprintf(cache[next].name, sizeof(cache[next].name), "%s", u.name);
	next = (next + 1) % 8;
	snprintf(buf, len, "%s", u.name);
	return buf;
}

const char *group_name(gid_t gid, char *buf, size_t len)
{
	FILE *f = fopen("/etc/group", "re");
	struct group *gr;

	snprintf(buf, len, "%u", (unsigned)gid);
	if (!f)
		return buf;
	while ((gr = fgetgrent(f)))
		if (gr->gr_gid == gid) {
			snprintf(buf, len, "%s", gr->gr_name);
			break;
		}
	fclose(f);
	return buf;
}

char agent_default_user[64];

void user_resolve(const char *name, struct user *u)
{
	const char *home;

	if (name && *name && !user_lookup(name, u))
		return;
	/* No user named (E2B's SDK names none unless asked): the sandbox's
	 * default user, which /init's defaultUser sets and which is `user`,
	 * as in E2B's sandboxes, when the guest has one. */
	if (!(name && *name) && !user_lookup(agent_default_user[0] ? agent_default_user : "user", u))
		return;
	if (!lookup(NULL, geteuid(), u))
		return;
	/* Not even our own uid is listed (a bare initramfs). */
	u->uid = geteuid();
	u->gid = getegid();
	snprintf(u->name, sizeof(u->name), "%s", u->uid ? "nobody" : "root");
	home = getenv("HOME");
	snprintf(u->home, sizeof(u->home), "%s", home && *home == '/' ? home : "/");
	snprintf(u->shell, sizeof(u->shell), "/bin/sh");
}

int user_path(const struct user *u, const char *path, char *out, size_t len)
{
	int n;

	if (path[0] == '/')
		n = snprintf(out, len, "%s", path);
	else if (!path[0])
		n = snprintf(out, len, "%s", u->home);
	else if (path[0] == '~' && (path[1] == '/' || !path[1]))
		n = snprintf(out, len, "%s%s", u->home, path + 1);
	else
		n = snprintf(out, len, "%s/%s", strcmp(u->home, "/") ? u->home : "", path);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
