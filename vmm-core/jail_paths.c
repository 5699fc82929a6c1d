/* SPDX-License-Identifier: Apache-2.0 */
/* What a jail holds: the paths a plan names (its kernel, initrd, every path
 * parameter of its devices and their backends), bound in by jail.c. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail.h"
#include "loader.h"
#include "log.h"
#include "plan.h"

int jail_add(struct jail_cfg *j, const char *path, char *err, size_t errlen)
{
	char cwd[PATH_MAX], *abs;

	if (!path || !*path)
		return 0;
	if (j->n_paths == JAIL_MAX_PATHS)
		return errf(err, errlen, -E2BIG, "jail: more than %d paths", JAIL_MAX_PATHS);
	if (path[0] == '/') {
		abs = strdup(path);
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return errf(err, errlen, -errno, "jail: getcwd: %s", strerror(errno));
		abs = malloc(strlen(cwd) + strlen(path) + 2);
		if (abs)
			sprintf(abs, "%s/%s", cwd, path);
	}
	if (!abs)
		return errf(err, errlen, -ENOMEM, "out of memory");
	j->read_only[j->n_paths] = false;
	j->paths[j->n_paths++] = abs;
	return 0;
}

int jail_add_read_only(struct jail_cfg *j, const char *path, char *err, size_t errlen)
{
	int ret = jail_add(j, path, err, errlen);

	if (!ret && path && *path)
		j->read_only[j->n_paths - 1] = true;
	return ret;
}

static int add_inst(struct jail_cfg *j, const struct plan_inst *pi, char *err, size_t errlen)
{
	const struct cub_plugin *d = pi->plugin->d;
	int ret;

	if (d->kind == CUB_KIND_NET && !strcmp(d->name, "tap")) {
		j->new_net = false;
		/* pins live in the host's bpffs, which the jail has not */
		for (unsigned i = 0; i < d->n_params; i++) {
			const struct cub_param *p = &pi->plugin->params[i];
			const char *v;

			if (strcmp(p->name, "policy.pin"))
				continue;
			memcpy(&v, (const char *)pi->cfg + p->offset, sizeof(v));
			if (v && *v)
				return errf(err, errlen, -ENOTSUP,
					    "%s: --jail with policy.pin: the jail has no bpffs to pin the tap's maps in; leave policy.pin out (the control API reads the counters: policy_stats)",
					    pi->where);
		}
	}
	for (unsigned i = 0; i < d->n_params; i++) {
		const struct cub_param *p = &pi->plugin->params[i];
		const char *v;

		if (p->type != CUB_P_PATH)
			continue;
		memcpy(&v, (const char *)pi->cfg + p->offset, sizeof(v));
		if ((ret = jail_add(j, v, err, errlen)))
			return ret;
	}
	for (unsigned b = 0; b < pi->n_backends; b++)
		if ((ret = add_inst(j, &pi->backends[b].inst, err, errlen)))
			return ret;
	return 0;
}

int jail_add_plan(struct jail_cfg *j, const struct plan *p, char *err, size_t errlen)
{
	int ret;

	j->new_net = true;
	if ((ret = jail_add(j, p->boot.kernel, err, errlen)) ||
	    (ret = jail_add(j, p->boot.initrd, err, errlen)))
		return ret;
	for (unsigned i = 0; i < p->n_devs; i++)
		if ((ret = add_inst(j, &p->devs[i], err, errlen)))
			return ret;
	/* a tap's per-CPU counters: libbpf counts the CPUs there */
	if (!j->new_net && !access("/sys/devices/system/cpu/possible", R_OK))
		return jail_add_read_only(j, "/sys/devices/system/cpu/possible", err, errlen);
	return 0;
}

void jail_paths_free(struct jail_cfg *j)
{
	for (unsigned i = 0; i < j->n_paths; i++)
		free(j->paths[i]);
	j->n_paths = 0;
	j->skip = NULL;
}
