/* SPDX-License-Identifier: Apache-2.0 */
/* Commands that are programs of their own (`cubicle disk` is cubicle-disk), run git-style: exec'd with the remaining arguments. */
#ifndef CUBICLE_HELPER_H
#define CUBICLE_HELPER_H

/*
 * Replace this process with the program prog, given argv[1..argc-1] (argv[0]
 * is the command's name, "disk"): from the build tree's folder sub when
 * cubicle runs uninstalled, else from the installed libexec folder. Returns
 * only when it cannot: VM_EXIT_ERROR after one message.
 */
int helper_exec(const char *sub, const char *prog, int argc, char **argv);

#endif
