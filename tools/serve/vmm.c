/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One sandbox's VMM process and its guest agent, seen from cubicle-serve:
 * starting `cubicle restore` in a session of its own (it outlives a
 * restart of serve), knowing whether it still lives (pid and start time,
 * so a reused pid is never mistaken for it), its API socket, and the
 * agent behind its vsock socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serve.h"
#include "unixconn.h"
#include "vmm.h"

unsigned long long proc_start_time(pid_t pid, char *state)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold anything */
	if (!p || p[1] != ' ')
		return 0;
	if (state)
		*state = p[2];
	p += 2;
	/* field 3 is the state; start time is field 22 */
	for (int f = 3; f < 22 && p; f++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (p)
		v = strtoull(p, NULL, 10);
	return v;
}

bool vmm_alive(struct sandbox *s)
{
	char st = 0;

	if (s->pid <= 0)
		return false;
	if (s->child) {
		int status;
		pid_t r = waitpid(s->pid, &status, WNOHANG);

		if (r == s->pid || (r < 0 && errno == ECHILD))
			return false;
	}
	return proc_start_time(s->pid, &st) == s->pid_start && st != 'Z' && st != 'X';
}

void sbx_file(const struct sandbox *s, const char *name, bool inside, char *out, size_t len)
{
	if (!s->jailed)
		snprintf(out, len, "%s/%s", s->dir, name);
	else if (inside)
		snprintf(out, len, JAIL_BOX "/%s", name);
	else
		snprintf(out, len, "%s/j" JAIL_BOX "/%s", s->dir, name);
}

/* The cgroup `cubicle --jail` made for the VMM whose supervisor is @pid. */
static void jail_cgroup(pid_t pid, char *out, size_t len)
{
	snprintf(out, len, "%s/vm-%d", srv.jail_cgroup, (int)pid);
}

void vmm_end(struct sandbox *s)
{
	char cg[320];
	int i = 0;

	if (s->pid <= 0)
		return;
	if (s->jailed && vmm_alive(s)) {
		kill(s->pid, SIGTERM);
		for (; i < 300 && vmm_alive(s); i++)
			usleep(10000);
	}
	if (vmm_alive(s))
		kill(s->pid, SIGKILL);
	for (i = 0; i < 500 && vmm_alive(s); i++)
		usleep(10000);
	if (s->child)
		waitpid(s->pid, NULL, WNOHANG);
	if (s->jailed) {
		jail_cgroup(s->pid, cg, sizeof(cg));
		for (i = 0; i < 200 && rmdir(cg) < 0 && errno == EBUSY; i++)
			usleep(10000);
		if (!access(cg, F_OK))
			serve_log("sandbox %s: cannot remove the cgroup %s: %s", s->id, cg,
				  strerror(errno));
	}
	s->pid = 0;
	s->pid_start = 0;
}

int vmm_jail_args(char **argv, unsigned *n, const char *root, uint32_t uid, uint32_t gid,
		  char *buf, size_t len)
{
	char *g;

	/* the sandbox's own, or jail_user's UID:GID (serve_jail_check) */
	if (!uid || !gid) {
		uid = srv.jail_uid;
		gid = srv.jail_gid;
	}
	if (!uid || !gid || len < 24)
		return -1;
	snprintf(buf, len, "%u", (unsigned)uid);
	g = buf + strlen(buf) + 1;
	snprintf(g, len - (size_t)(g - buf), "%u", (unsigned)gid);
	argv[(*n)++] = "--jail";
	argv[(*n)++] = (char *)root;
	argv[(*n)++] = "--jail-uid";
	argv[(*n)++] = buf;
	argv[(*n)++] = "--jail-gid";
	argv[(*n)++] = g;
	if (srv.jail_first) {
		/* the other sandboxes' ids: what only a snapshot names that one
		 * of them owns is not bound into this jail */
		argv[(*n)++] = "--jail-foreign-ids";
		argv[(*n)++] = (char *)srv.jail_user;
	}
	argv[(*n)++] = "--jail-cgroup";
	argv[(*n)++] = (char *)srv.jail_cgroup;
	if (srv.jail_memory_max) {
		argv[(*n)++] = "--jail-memory-max";
		argv[(*n)++] = (char *)srv.jail_memory_max;
	}
	if (srv.jail_cpu_max) {
		argv[(*n)++] = "--jail-cpu-max";
		argv[(*n)++] = (char *)srv.jail_cpu_max;
	}
	if (srv.jail_pids_max) {
		argv[(*n)++] = "--jail-pids-max";
		argv[(*n)++] = (char *)srv.jail_pids_max;
	}
	return 0;
}

int spawn_child(pid_t *pid, const char *path, char *const argv[], const struct spawn_opts *o)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
	int ret;

	sigemptyset(&none);
	sigfillset(&all);
	if ((ret = posix_spawnattr_init(&at)))
		return ret;
	if ((ret = posix_spawn_file_actions_init(&fa))) {
		posix_spawnattr_destroy(&at);
		return ret;
	}
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	if (o->group == SPAWN_OWN_GROUP) {
		posix_spawnattr_setpgroup(&at, 0);
		flags |= POSIX_SPAWN_SETPGROUP;
	} else if (o->group == SPAWN_OWN_SESSION) {
		flags |= POSIX_SPAWN_SETSID;
	}
	posix_spawnattr_setflags(&at, flags);
	if (!(ret = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) &&
	    !(o->out >= 0 && ((ret = posix_spawn_file_actions_adddup2(&fa, o->out, 1)) ||
			      (ret = posix_spawn_file_actions_adddup2(&fa, o->out, 2)))) &&
	    !(o->cwd && (ret = posix_spawn_file_actions_addchdir_np(&fa, o->cwd))))
		ret = (strchr(path, '/') ? posix_spawn : posix_spawnp)(pid, path, &fa, &at, argv,
									 o->env ? o->env : environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return ret;
}

int vmm_spawn(struct sandbox *s, const char *snap, char *const *sets, unsigned n_sets, bool paused)
{
	char api[300], host_api[300], log[300], root[300], tdir[400], bdir[400], *argv[48 + 2 * VMM_SETS_MAX];
	const char *base;
	json_t *rec;
	char uid[32] = "";
	unsigned n = 0;
	pid_t pid;
	int lfd, ret;

	sbx_file(s, "api.sock", true, api, sizeof(api));
	sbx_file(s, "api.sock", false, host_api, sizeof(host_api));
	snprintf(log, sizeof(log), "%s/vmm.log", s->dir);
	argv[n++] = (char *)srv.cubicle;
	argv[n++] = "restore";
	argv[n++] = (char *)snap;
	argv[n++] = "--api-sock";
	argv[n++] = api;
	argv[n++] = "--id";
	argv[n++] = s->id;
	if (paused)
		argv[n++] = "--paused";
	if (srv.seccomp) {
		argv[n++] = "--seccomp";
		argv[n++] = (char *)srv.seccomp;
	}
	if (s->jailed) {
		snprintf(root, sizeof(root), "%s/j", s->dir);
		if (vmm_jail_args(argv, &n, root, s->jail_uid, s->jail_gid, uid, sizeof(uid)))
			return errno = EINVAL, -1;
		/* its template's files, which the jail's uid cannot reach in
		 * serve's 0700 state folder: a pause snapshot names one only
		 * where its template does (pause_check) */
		snprintf(tdir, sizeof(tdir), "%s/templates/%s", srv.state_dir, s->template_id);
		argv[n++] = "--jail-trust";
		argv[n++] = tdir;
		/* a snapshot template's config is the template it came from */
		rec = sbx_snapshot_record(s->template_id);
		base = json_string_value(json_object_get(rec, "template"));
		if (base && !strchr(base, '/') && strcmp(base, s->template_id)) {
			snprintf(bdir, sizeof(bdir), "%s/templates/%s", srv.state_dir, base);
			argv[n++] = "--jail-trust";
			argv[n++] = bdir;
		}
		json_decref(rec);
	}
	for (unsigned i = 0; i < n_sets && i < VMM_SETS_MAX; i++) {
		argv[n++] = "--set";
		argv[n++] = sets[i];
	}
	argv[n] = NULL;
	unlink(host_api);
	lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (lfd < 0)
		return -1;
	/* its own session: a signal to serve's group (Ctrl-C) is not its;
	 * every path it is given is absolute, and a jail makes no working
	 * folder */
	ret = spawn_child(&pid, srv.cubicle, argv,
			  &(struct spawn_opts){ .out = lfd, .group = SPAWN_OWN_SESSION, .cwd = "/" });
	if (ret) {
		dprintf(lfd, "cubicle serve: %s: %s\n", srv.cubicle, strerror(ret));
		close(lfd);
		return errno = ret, -1;
	}
	close(lfd);
	s->pid = pid;
	s->child = true;
	/* its start time is known once the kernel has it: right away */
	s->pid_start = proc_start_time(pid, NULL);
	return 0;
}

void vmm_log_tail(const struct sandbox *s, char *out, size_t len)
{
	char path[300], buf[4096];
	ssize_t n;
	off_t end;
	int fd;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/%s", s->dir, s->log_name ? s->log_name : "vmm.log");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	end = lseek(fd, 0, SEEK_END);
	if (end > (off_t)sizeof(buf) - 1)
		lseek(fd, end - (off_t)sizeof(buf) + 1, SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	/* the last error line says most; else the last line */
	char *line = NULL, *p = buf, *last = NULL;

	while (p && *p) {
		char *nl = strchr(p, '\n');

		if (nl)
			*nl = '\0';
		if (*p)
			last = p;
		if (strstr(p, "error"))
			line = p;
		p = nl ? nl + 1 : NULL;
	}
	snprintf(out, len, "%s", line ? line : last ? last : "");
}

int sbx_vsock_connect(const struct sandbox *s, unsigned port, int timeout_ms)
{
	char path[300];

	sbx_file(s, "v.sock", false, path, sizeof(path));
	return vsock_connect_patient(path, port, timeout_ms);
}

int vsock_connect_patient(const char *path, unsigned port, int timeout_ms)
{
	int fd = vsock_connect(path, port, timeout_ms);

	/* refused: an agent not listening yet; EAGAIN: the VMM's backlog full
	 * (a burst of connections), which its accepts soon drain */
	for (unsigned wait = 50; fd < 0 && (errno == ECONNREFUSED || errno == EAGAIN) && wait <= 800;
	     wait *= 2) {
		usleep(wait * 1000);
		fd = vsock_connect(path, port, timeout_ms);
	}
	return fd;
}

int vsock_connect(const char *path, unsigned port, int timeout_ms)
{
	char line[64];
	size_t n = 0;
	int fd;

	fd = unix_connect_nofollow(path);
	if (fd < 0)
		return -1;
	n = (size_t)snprintf(line, sizeof(line), "CONNECT %u\n", port);
	if (hio_write_all(fd, line, n))
		goto fail;
	/* "OK <host port>\n", read a byte at a time: what follows is the guest's */
	for (n = 0; n < sizeof(line) - 1;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t got;

		if (poll(&pf, 1, timeout_ms) <= 0) {
			errno = ETIMEDOUT;
			goto fail;
		}
		got = read(fd, line + n, 1);
		if (got <= 0) {
			errno = got ? errno : ECONNREFUSED; /* closed: nothing listens there */
			goto fail;
		}
		if (line[n++] == '\n')
			break;
	}
	line[n] = '\0';
	if (strncmp(line, "OK ", 3)) {
		errno = ECONNREFUSED;
		goto fail;
	}
	return fd;
fail:
	{
		int e = errno;

		close(fd);
		errno = e;
	}
	return -1;
}

/* vmm_api, with the answer's body in *@reply (when not NULL; free it). */
static int vmm_api_reply(const struct sandbox *s, const char *method, const char *path,
			 const char *body, int timeout_ms, char **reply, char *msg, size_t len)
{
	char sock[300], *out = NULL;
	unsigned st;
	int fd, ret;

	sbx_file(s, "api.sock", false, sock, sizeof(sock));
	fd = unix_connect_nofollow(sock);
	if (fd < 0) {
		snprintf(msg, len, "%s: %s", sock,
			 errno == EAGAIN ? "its VMM takes no more connections (stuck?)" : strerror(errno));
		return -1;
	}
	ret = hio_call(fd, method, path, body, NULL, timeout_ms, &st, &out);
	close(fd);
	if (ret) {
		snprintf(msg, len, "%s %s on %s: %s", method, path, sock, strerror(errno));
		return -1;
	}
	if (st / 100 != 2) {
		json_t *j = out ? json_loads(out, 0, NULL) : NULL;
		const char *f = json_string_value(json_object_get(j, "fault_message"));

		snprintf(msg, len, "%s %s: HTTP %u%s%s", method, path, st, f ? ": " : "", f ? f : "");
		json_decref(j);
		free(out);
		return -1;
	}
	if (reply)
		*reply = out;
	else
		free(out);
	return 0;
}

int vmm_api(const struct sandbox *s, const char *method, const char *path, const char *body,
	    int timeout_ms, char *msg, size_t len)
{
	return vmm_api_reply(s, method, path, body, timeout_ms, NULL, msg, len);
}

/* One call to the agent on a fresh connection: 0 with *st, or -1. */
static int agent_call(const char *uds, const char *method, const char *path,
		      const char *body, const char *hdrs, unsigned *st, int timeout_ms)
{
	int fd = vsock_connect(uds, AGENT_PORT, timeout_ms), ret;

	if (fd < 0)
		return -1;
	ret = hio_call(fd, method, path, body, hdrs, timeout_ms, st, NULL);
	close(fd);
	return ret;
}

int vmm_wait_api(struct sandbox *s, char *msg, size_t len)
{
	double t0 = now_ms();

	for (;;) {
		char *out = NULL;
		int ret = vmm_api_reply(s, "GET", "/", NULL, 2000, &out, msg, len);
		json_t *j = out ? json_loads(out, 0, NULL) : NULL;
		const char *st = json_string_value(json_object_get(j, "state"));

		/* the API answers while the restore still makes the VM */
		if (!ret && (!st || strcmp(st, "Not started")))
			ret = 1;
		else if (!ret)
			snprintf(msg, len, "its VM was not made within %u ms", srv.agent_wait_ms);
		json_decref(j);
		free(out);
		if (ret == 1)
			return 0;
		if (!vmm_alive(s)) {
			char tail[300];

			vmm_log_tail(s, tail, sizeof(tail));
			snprintf(msg, len, "its VMM ended before its VM was made%s%s", *tail ? ": " : "",
				 tail);
			return -1;
		}
		if (now_ms() - t0 >= srv.agent_wait_ms || srv.stopping)
			return -1;
		usleep(20000);
	}
}

int vmm_wait_health(struct sandbox *s, const char *uds, char *msg, size_t len)
{
	double t0 = now_ms();
	unsigned st = 0, pause_us = 5000;

	for (;;) {
		if (!agent_call(uds, "GET", "/health", NULL, NULL, &st, 2000) && st / 100 == 2)
			return 0;
		if (!vmm_alive(s)) {
			char tail[300];

			vmm_log_tail(s, tail, sizeof(tail));
			snprintf(msg, len, "its VMM ended before the agent answered%s%s",
				 *tail ? ": " : "", tail);
			return -1;
		}
		if (now_ms() - t0 > srv.agent_wait_ms) {
			snprintf(msg, len, "the guest agent did not answer within %u ms",
				 srv.agent_wait_ms);
			return -1;
		}
		/* a restored agent answers at once; one that does not yet is
		 * asked less and less often (to 100 ms), so many starts at once
		 * do not spend the host's CPU on connects */
		pause_us = pause_us < 50000 ? pause_us * 2 : 100000;
		usleep(st ? 50000 : pause_us);
	}
}

int vmm_agent_init(struct sandbox *s, json_t *body, char *msg, size_t len)
{
	char uds[300], hdr[128], *b = json_dumps(body, JSON_COMPACT);
	unsigned st = 0;
	int ret = -1;

	sbx_file(s, "v.sock", false, uds, sizeof(uds));
	snprintf(hdr, sizeof(hdr), "X-Access-Token: %s\r\n", s->token);
	if (b)
		ret = agent_call(uds, "POST", "/init", b, hdr, &st, 10000);
	free(b);
	if (ret || st != 204)
		return snprintf(msg, len, "the guest agent refused /init (%s)",
				!b ? "out of memory" : ret ? strerror(errno) : "HTTP error"), -1;
	return 0;
}

int vmm_wait_agent(struct sandbox *s, const char *token, json_t *env, char *msg, size_t len)
{
	char uds[300], hdr[128] = "", when[40], *body;
	unsigned st = 0;
	struct timespec ts;
	struct tm tm;
	json_t *init;
	double t0 = now_ms(), left;
	int ret;

	sbx_file(s, "v.sock", false, uds, sizeof(uds));
	if (vmm_wait_health(s, uds, msg, len))
		return -1;
	clock_gettime(CLOCK_REALTIME, &ts);
	strftime(when, 24, "%Y-%m-%dT%H:%M:%S", gmtime_r(&ts.tv_sec, &tm));
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%09ldZ", ts.tv_nsec);
	init = json_pack("{s:s,s:s}", "accessToken", s->token, "timestamp", when);
	if (init && env)
		json_object_set(init, "envVars", env);
	if (init && s->net_slot >= 0)
		json_object_set_new(init, "cubicleNetwork", net_init_json(s));
	body = init ? json_dumps(init, JSON_COMPACT) : NULL;
	json_decref(init);
	if (token && *token)
		snprintf(hdr, sizeof(hdr), "X-Access-Token: %s\r\n", token);
	/* One request (a retry could find the first applied and the token
	 * changed), given what is left of agent_wait_ms: a guest that just
	 * answered /health may be slow to answer again on a loaded host. A
	 * refused connection carried no request, so that is tried again
	 * (vsock_connect_patient): on a loaded host a guest that had just
	 * answered /health refused the next connection now and then (2 of 20
	 * sandboxes made at once, nested run_serve). */
	left = srv.agent_wait_ms - (now_ms() - t0);
	ret = -1;
	if (body) {
		int to = left > 5000 ? (int)left : 5000;
		int fd = vsock_connect_patient(uds, AGENT_PORT, to);

		if (fd >= 0) {
			ret = hio_call(fd, "POST", "/init", body, hdr, to, &st, NULL);
			close(fd);
		}
	}
	free(body);
	if (ret || st != 204) {
		snprintf(msg, len, "the guest agent refused /init (%s)",
			 ret ? strerror(errno) : st == 404 ? "an agent without /init" : "HTTP error");
		return -1;
	}
	return 0;
}
