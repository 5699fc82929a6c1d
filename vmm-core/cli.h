/* SPDX-License-Identifier: Apache-2.0 */
/* What the command line's files (main.c, cli_run.c, cli_plugins.c) share:
 * usage errors, help pages, the plugin registry's loading, the commands. */
#ifndef CUBICLE_CLI_H
#define CUBICLE_CLI_H

#include "loader.h"

/* repeatable options (--set, --plugin-dir) a command takes at most */
#define MAX_OPTS 64

/* "cubicle: MESSAGE" and a pointer to help on stderr: VM_EXIT_USAGE (2). */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* getopt_long stopped at a bad option of @cmd: name it (opterr is off). */
int bad_option(const char *cmd, char **argv);
/* `cubicle CMD --help` of a built-in command: its page on stdout, 0. */
int cmd_help(const char *cmd);
/* --plugin-dir @dir names a folder: 0, or a usage error's exit status. */
int plugin_dir_opt(const char *dir);
/* A file the registry's scan skipped: logged at the level *(int *)@arg. */
void scan_warn(const char *msg, void *arg);
/* Every plugin in @dirs_cli (@n of them), $CUBICLE_PLUGIN_PATH and the
 * default folder; files that are not plugins are logged at @warn_lvl. */
int load_registry(struct registry *reg, char *const *dirs_cli, unsigned n, int warn_lvl);

/* The commands: an exit status. @argv[0] is the command's name. */
int cmd_run(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_plugins(int argc, char **argv);

#endif
