/* SPDX-License-Identifier: Apache-2.0 */
/* Loading the control API's module (vmm-core/api/module.h). */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "api/module.h"
#include "cnode.h"
#include "loader.h"

const struct api_module *api_module_load(char *err, size_t errlen)
{
	static const struct api_module *m;
	char path[PATH_MAX];
	void *dl;

	if (m)
		return m;
	/* Uninstalled, the build tree's own module, never an installed one. */
	if (loader_uninstalled())
		snprintf(path, sizeof(path), "%s/.libs/cubicle-api.so", CUB_BUILD_DIR);
	else
		snprintf(path, sizeof(path), "%s/cubicle-api.so", CUB_PKGLIB_DIR);
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		errf(err, errlen, -ENOENT, "the control API's module: %s", dlerror());
		return NULL;
	}
	m = dlsym(dl, "cubicle_api_module");
	if (!m || m->size < sizeof(*m)) {
		errf(err, errlen, -ENOENT, "%s: no cubicle_api_module of this cubicle's version",
		     path);
		m = NULL;
		dlclose(dl);
		return NULL;
	}
	return m; /* kept loaded for the life of the process */
}
