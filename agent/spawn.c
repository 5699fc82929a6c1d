/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Starting a client's process: its environment, its user (groups from
 * /etc/group, no NSS), pipes or a pty, its own session, and an exec failure
 * reported back through a close-on-exec pipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "spawn.h"

extern char **environ;

/* The groups USER is a member of besides its primary one (from /etc/group). */
int spawn_groups(const struct user *u, gid_t *list, int max)
{
	FILE *f = fopen("/etc/group", "re");
	struct group *g;
	int n = 0;

	list[n++] = u->gid;
	if (!f)
		return n;
	while ((g = fgetgrent(f)) && n < max) {
		if (g->gr_gid == u->gid)
			continue;
		for (char **m = g->gr_mem; m && *m; m++)
			if (!strcmp(*m, u->name)) {
				list[n++] = g->gr_gid;
				break;
			}
	}
	fclose(f);
	return n;
}

/* Environment: ours, then the user's HOME/USER/LOGNAME, a PATH, TERM for a pty, then ENVS. */
char **spawn_env(const struct user *u, json_t *envs, bool pty)
{
	size_t n = 0, cap;
	char **env;
	const char *k;
	json_t *v;

	for (char **e = environ; *e; e++)
		n++;
	cap = n + 8 + (json_is_object(envs) ? json_object_size(envs) : 0);
	env = calloc(cap, sizeof(*env));
	if (!env)
		return NULL;
	n = 0;
#define SETENV(key, val)                                                              \
	do {                                                                          \
		size_t kl = strlen(key);                                              \
		char *s = malloc(kl + strlen(val) + 2);                               \
		if (!s)                                                               \
			break;                                                        \
		sprintf(s, "%s=%s", key, val);                                        \
		for (size_t i_ = 0; i_ < n; i_++)                                     \
			if (!strncmp(env[i_], key, kl) && env[i_][kl] == '=') {       \
				free(env[i_]);                                        \
				env[i_] = env[--n];                                   \
				break;                                                \
			}                                                             \
		if (n + 1 < cap)                                                      \
			env[n++] = s;                                                 \
		else                                                                  \
			free(s);                                                      \
	} while (0)
	for (char **e = environ; *e; e++)
		if ((env[n] = strdup(*e)))
			n++;
	SETENV("HOME", u->home);
	SETENV("USER", u->name);
	SETENV("LOGNAME", u->name);
	if (!getenv("PATH"))
		SETENV("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	if (pty)
		SETENV("TERM", "xterm-256color");
	if (json_is_object(envs))
		json_object_foreach(envs, k, v) {
			const char *val = json_cstr(v);
			if (val && *k && !strchr(k, '='))
				SETENV(k, val);
		}
#undef SETENV
	env[n] = NULL;
	return env;
}

void spawn_free_strv(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) ? -errno : 0;
}


/* In the child: never returns. */
static void child(const struct spawn *sp, int in_r, int out_w, int err_w, int slave, int master, int errfd)
{
	sigset_t all;
	int e, nullfd;

	/* Ignored signals survive exec: a background start of the agent would pass on SIGINT ignored. */
	for (int i = 1; i < NSIG; i++)
		signal(i, SIG_DFL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	setsid();
	if (sp->pty) {
		close(master);
		if (ioctl(slave, TIOCSCTTY, 0) < 0)
			goto fail;
		if (dup2(slave, 0) < 0 || dup2(slave, 1) < 0 || dup2(slave, 2) < 0)
			goto fail;
		if (slave > 2)
			close(slave);
	} else {
		if (in_r < 0) {
			nullfd = open("/dev/null", O_RDONLY);
			in_r = nullfd;
		}
		if (in_r < 0 || dup2(in_r, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
			goto fail;
	}
	if (sp->switch_user) {
		if (setgroups((size_t)sp->ngroups, sp->groups) || setgid(sp->u->gid) || setuid(sp->u->uid))
			goto fail;
	}
	/* A home that does not exist (nobody's) is no reason to fail: / then. */
	if (chdir(sp->cwd) && (sp->cwd_given || chdir("/")))
		goto fail;
	environ = sp->envp;
	execvp(sp->argv[0], sp->argv);
fail:
	e = errno;
	if (write(errfd, &e, sizeof(e)) < 0)
		_exit(126);
	_exit(127);
}

int spawn_run(struct spawn *sp, struct spawned *sd, char *why, size_t whylen)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, ep[2] = { -1, -1 };
	int master = -1, slave = -1, e = 0, rc = -EIO;
	ssize_t n;
	pid_t pid;

	if (pipe2(ep, O_CLOEXEC))
		goto sys;
	if (sp->pty) {
		if (openpty(&master, &slave, NULL, NULL, &sp->ws))
			goto sys;
		fcntl(master, F_SETFD, FD_CLOEXEC);
		fcntl(slave, F_SETFD, FD_CLOEXEC);
	} else {
		if ((sp->use_stdin && pipe2(in, O_CLOEXEC)) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
			goto sys;
	}
	pid = fork();
	if (pid < 0)
		goto sys;
	if (pid == 0)
		child(sp, in[0], out[1], err[1], slave, master, ep[1]);
	close(ep[1]);
	ep[1] = -1;
	do
		n = read(ep[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	if (n == sizeof(e)) {
		waitpid(pid, NULL, 0);
		snprintf(why, whylen, "starting %s: %s", sp->argv[0], strerror(e));
		rc = -e;
		goto out;
	}
	sd->pid = pid;
	sd->err_fd = -1;
	sd->in_fd = -1;
	if (sp->pty) {
		close(slave);
		slave = -1;
		sd->in_fd = fcntl(master, F_DUPFD_CLOEXEC, 0);
		set_nonblock(master);
		if (sd->in_fd >= 0)
			set_nonblock(sd->in_fd);
		sd->out_fd = master;
		master = -1;
	} else {
		close(out[1]);
		close(err[1]);
		out[1] = err[1] = -1;
		if (in[0] >= 0) {
			close(in[0]);
			in[0] = -1;
			sd->in_fd = in[1];
			set_nonblock(in[1]);
			in[1] = -1;
		}
		set_nonblock(out[0]);
		set_nonblock(err[0]);
		/* Room for a fast writer while we send (best effort: pipe-max-size may be lower). */
		fcntl(out[0], F_SETPIPE_SZ, (int)PIPE_SIZE);
		fcntl(err[0], F_SETPIPE_SZ, (int)PIPE_SIZE);
		sd->out_fd = out[0];
		sd->err_fd = err[0];
		out[0] = err[0] = -1;
	}
	rc = 0;
	goto out;
sys:
	rc = -errno;
	snprintf(why, whylen, "starting %s: %s", sp->argv[0], strerror(errno));
out:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
		if (ep[i] >= 0)
			close(ep[i]);
	}
	if (master >= 0)
		close(master);
	if (slave >= 0)
		close(slave);
	return rc;
}
