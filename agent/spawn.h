/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle-agent: starting a process (fork, user, pipes or pty, exec). */
#ifndef CUBICLE_AGENT_SPAWN_H
#define CUBICLE_AGENT_SPAWN_H

#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include <jansson.h>

#include "agent.h"

/* What the output pipes are asked to hold (F_SETPIPE_SZ; best effort). */
#define PIPE_SIZE (1u << 20)

struct spawn {
	char **argv, **envp;
	const char *cwd;
	const struct user *u;
	bool pty, use_stdin, switch_user;
	bool cwd_given;   /* else a missing cwd (the home) falls back to / */
	struct winsize ws; /* with pty */
	gid_t groups[64];
	int ngroups;
};

/* The started child: non-blocking, close-on-exec fds; -1 for what it has not. */
struct spawned {
	pid_t pid;
	int out_fd; /* stdout, or the pty master */
	int err_fd; /* stderr (none with a pty) */
	int in_fd;  /* the stdin pipe, or a second descriptor of the pty master */
};

/* 0, or -errno with WHY (an exec failure comes back as its errno). */
int spawn_run(struct spawn *sp, struct spawned *sd, char *why, size_t whylen);
/* U's primary group and the groups /etc/group lists it in; their number. */
int spawn_groups(const struct user *u, gid_t *list, int max);
/* The agent's environment, then U's HOME/USER/LOGNAME, a PATH, TERM with a pty, then ENVS. */
char **spawn_env(const struct user *u, json_t *envs, bool pty);
void spawn_free_strv(char **v);

#endif
