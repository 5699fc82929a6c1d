/* SPDX-License-Identifier: Apache-2.0 */
/* Commands that are programs of their own (`cubicle disk` is cubicle-disk), run git-style: exec'd with the remaining arguments. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper.h"
#include "loader.h"
#include "log.h"
#include "vm.h"

int helper_exec(const char *sub, const char *prog, int argc, char **argv)
{
	char path[PATH_MAX];
	char **av = calloc((size_t)argc + 2, sizeof(*av));
	const char *runner = getenv("TEST_RUNNER");

	if (!av) {
		log_err("out of memory");
		return VM_EXIT_ERROR;
	}
	/* Uninstalled, the build tree's own program: never an installed one of
	 * another version. */
	if (loader_uninstalled())
		snprintf(path, sizeof(path), "%s/%s/%s", CUB_BUILD_DIR, sub, prog);
	else
		snprintf(path, sizeof(path), "%s/%s", CUB_LIBEXEC_DIR, prog);
	/* The helper may run cubicle itself (serve runs a VMM per sandbox):
	 * this very binary, not another one on the PATH. */
	if (!getenv("CUBICLE_BIN")) {
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (n > 0) {
			self[n] = '\0';
			setenv("CUBICLE_BIN", self, 1);
		}
	}
	av[0] = (char *)prog;
	for (int i = 1; i < argc; i++)
		av[i] = argv[i];
	fflush(NULL);
	execv(path, av);
	/* A cross build's tests run cubicle under qemu-user ($TEST_RUNNER),
	 * which cannot exec a foreign binary itself without binfmt_misc. */
	if (errno == ENOEXEC && runner && *runner && loader_uninstalled()) {
		av[0] = path;
		memmove(av + 1, av, (size_t)argc * sizeof(*av));
		av[0] = (char *)runner;
		execvp(runner, av);
	}
	log_err("%s: cannot run %s: %s", argv[0], path, strerror(errno));
	free(av);
	return VM_EXIT_ERROR;
}
