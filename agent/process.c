/* SPDX-License-Identifier: Apache-2.0 */
/*
 * process.Process: processes started for clients, their output streamed to
 * every subscriber (the Start stream and any Connect streams) as it comes,
 * their stdin fed by SendInput in order, signals, pty resizing, and the end
 * event once the child is reaped and its output is drained.
 *
 * Backpressure: a process's output is read only while every subscriber's
 * connection has room (http_can_write); a SendInput is answered only when its
 * bytes are in the pipe, so a process that does not read its stdin holds its
 * clients, not our memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pty.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "b64.h"
#include "http.h"
#include "spawn.h"

/*
 * Output is gathered, not passed on per write: the pipes hold PIPE_SIZE (spawn.h), a
 * read takes up to OUT_BATCH (one data event), and after a read that found
 * less than OUT_SMALL the next one waits BATCH_US so a steady writer fills the
 * pipe meanwhile (the first bytes after a quiet spell still go at once).
 */
#define OUT_BATCH (256u << 10)
#define OUT_SMALL (64u << 10)
#define BATCH_US 2000
#define DRAIN_GRACE_MS 1000 /* after the exit, output still held open by others */
#define KEEPALIVE_DEFAULT_S 50

extern char **environ;

struct proc;

struct sub {
	struct sub *next;
	struct proc *p;
	struct conn *c;
	uint64_t ka_ms, next_ka, deadline;
};

struct input {
	struct input *next;
	struct proc *p;
	struct conn *c; /* NULL once its client left */
	char *data;
	size_t len, off;
};

struct proc {
	struct proc *next;
	pid_t pid;
	char *tag;
	json_t *config;
	bool pty;
	struct watch wout, werr, win, wtimer;
	bool out_open, err_open, in_watched, out_paused, out_wait, timer_open;
	int in_fd;
	struct input *inq;
	bool close_stdin_pending;
	bool reaped;
	int status;
	uint64_t reap_ms, last_out_ms;
	struct sub *subs;
};

static struct proc *procs;
static struct watch sigw;

static void sub_closed(struct conn *c);
static void sub_writable(struct conn *c);
static const struct conn_ops sub_ops = { .writable = sub_writable, .closed = sub_closed };
static void input_closed(struct conn *c);
static const struct conn_ops input_ops = { .closed = input_closed };

static json_t *event(const char *kind, json_t *body)
{
	return json_pack("{s:{s:o}}", "event", kind, body);
}

static void sub_free(struct sub *s)
{
	struct sub **pp;

	for (pp = &s->p->subs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	free(s);
}

/* Ends a subscriber's stream (CODE NULL: cleanly) and lets it go. */
static void sub_end(struct sub *s, json_t *last, const char *code, const char *msg)
{
	struct conn *c = s->c;

	http_set_ops(c, NULL, NULL);
	sub_free(s);
	if (last)
		rpc_stream_msg(c, last);
	rpc_stream_end(c, code, msg);
}

static void sub_closed(struct conn *c)
{
	struct sub *s = http_ctx(c);

	if (s)
		sub_free(s);
}

static void out_watch_update(struct proc *p)
{
	uint32_t ev = p->out_paused || p->out_wait ? 0 : EPOLLIN;

	if (p->out_open && p->wout.events != ev)
		loop_mod(&p->wout, ev);
	if (p->err_open && p->werr.events != ev)
		loop_mod(&p->werr, ev);
}

static void proc_check_room(struct proc *p)
{
	bool room = true;

	for (struct sub *s = p->subs; s; s = s->next)
		if (!http_can_write(s->c))
			room = false;
	if (room != !p->out_paused) {
		p->out_paused = !room;
		out_watch_update(p);
	}
}

static void sub_writable(struct conn *c)
{
	struct sub *s = http_ctx(c);

	if (s)
		proc_check_room(s->p);
}

static const char *status_text(int st, char *buf, size_t len)
{
	if (WIFEXITED(st)) {
		snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
	} else if (WIFSIGNALED(st)) {
		const char *name = strsignal(WTERMSIG(st));
		char lower[64];
		snprintf(lower, sizeof(lower), "%s", name ? name : "unknown signal");
		if (lower[0] >= 'A' && lower[0] <= 'Z')
			lower[0] = (char)(lower[0] - 'A' + 'a');
		snprintf(buf, len, "signal: %s%s", lower, WCOREDUMP(st) ? " (core dumped)" : "");
	} else {
		snprintf(buf, len, "unknown status %d", st);
	}
	return buf;
}

static void proc_free(void *arg)
{
	struct proc *p = arg;

	json_decref(p->config);
	free(p->tag);
	free(p);
}

static void input_finish(struct input *in, const char *code, const char *msg)
{
	struct proc *p = in->p;

	p->inq = in->next;
	if (in->c) {
		struct conn *c = in->c;
		http_set_ops(c, NULL, NULL);
		if (code)
			rpc_error(c, code, "%s", msg);
		else
			rpc_reply(c, NULL);
	}
	free(in->data);
	free(in);
}

static void stdin_close(struct proc *p)
{
	if (p->in_fd < 0)
		return;
	if (p->in_watched)
		loop_del(&p->win);
	p->in_watched = false;
	close(p->in_fd);
	p->in_fd = -1;
	while (p->inq)
		input_finish(p->inq, "failed_precondition", "stdin is closed");
}

static void out_close(struct proc *p, bool err)
{
	struct watch *w = err ? &p->werr : &p->wout;
	bool *open = err ? &p->err_open : &p->out_open;

	if (!*open)
		return;
	loop_del(w);
	close(w->fd);
	w->fd = -1;
	*open = false;
}

/* The child is reaped and its output drained: the end event, then away. */
static void proc_finish(struct proc *p)
{
	char st[96];
	json_t *end;
	int code = WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;

	out_close(p, false);
	out_close(p, true);
	stdin_close(p);
	if (p->timer_open) {
		loop_del(&p->wtimer);
		close(p->wtimer.fd);
		p->timer_open = false;
	}
	status_text(p->status, st, sizeof(st));
	/* As envd (Go's exec): a failed wait's error is the same text, set for any non-zero end. */
	end = json_pack("{s:i,s:b,s:s}", "exitCode", code, "exited", WIFEXITED(p->status), "status", st);
	if (end && code != 0)
		json_object_set_new(end, "error", json_string(st));
	end = event("end", end);
	while (p->subs)
		sub_end(p->subs, json_incref(end), NULL, NULL);
	json_decref(end);
	for (struct proc **pp = &procs; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	loop_defer(proc_free, p);
}

static void maybe_finish(struct proc *p)
{
	if (p->reaped && !p->out_open && !p->err_open)
		proc_finish(p);
}

static void batch_cb(struct watch *w, uint32_t ev)
{
	struct proc *p = (struct proc *)((char *)w - offsetof(struct proc, wtimer));
	uint64_t v;

	if (read(w->fd, &v, sizeof(v)) < 0 && errno == EAGAIN)
		return;
	p->out_wait = false;
	out_watch_update(p);
}

/* Reading waits BATCH_US (a timerfd: the loop goes on meanwhile). */
static void batch_wait(struct proc *p)
{
	struct itimerspec t = { .it_value = { 0, BATCH_US * 1000L } };

	if (!p->timer_open) {
		int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);

		if (fd < 0)
			return;
		if (loop_add(&p->wtimer, fd, EPOLLIN, batch_cb)) {
			close(fd);
			return;
		}
		p->timer_open = true;
	}
	if (timerfd_settime(p->wtimer.fd, 0, &t, NULL))
		return;
	p->out_wait = true;
	out_watch_update(p);
}

/*
 * One data event to every subscriber. The message is written here rather than
 * built with jansson: it is {"event":{"data":{KIND:"<base64>"}}} (base64 needs
 * no escaping) in a Connect envelope (flags 0, big-endian length), and at
 * hundreds of KiB the tree, its dump and their copies cost more than the
 * encoding itself.
 */
static void data_event(struct proc *p, const char *kind, const char *data, size_t n)
{
	static const char pre[] = "{\"event\":{\"data\":{\"", mid[] = "\":\"", post[] = "\"}}}";
	static char env[5 + 64 + B64_ENC_LEN(OUT_BATCH) + 1];
	size_t len = 5, jlen;
	struct sub *s, *next;

	memcpy(env + len, pre, sizeof(pre) - 1);
	len += sizeof(pre) - 1;
	memcpy(env + len, kind, strlen(kind));
	len += strlen(kind);
	memcpy(env + len, mid, sizeof(mid) - 1);
	len += sizeof(mid) - 1;
	len += b64_encode(data, n, env + len);
	memcpy(env + len, post, sizeof(post) - 1);
	len += sizeof(post) - 1;
	jlen = len - 5;
	env[0] = 0;
	env[1] = (char)(jlen >> 24);
	env[2] = (char)(jlen >> 16);
	env[3] = (char)(jlen >> 8);
	env[4] = (char)jlen;
	for (s = p->subs; s; s = next) {
		next = s->next;
		s->next_ka = p->last_out_ms + s->ka_ms;
		http_write(s->c, env, len);
	}
}

/*
 * Reads what the pipe (or pty) holds, up to OUT_BATCH, and sends it as one
 * event. A small read means the writer is slow or just started: the next read
 * waits a moment (batch_wait), so a steady writer's output goes in big events
 * rather than one per write(2) of its.
 */
static void out_read(struct proc *p, bool err)
{
	static char buf[OUT_BATCH];
	struct watch *w = err ? &p->werr : &p->wout;
	size_t got = 0;
	bool eof = false;
	ssize_t n;

	while (got < sizeof(buf)) {
		n = read(w->fd, buf + got, sizeof(buf) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) { /* EOF, or EIO from a pty master whose slave closed */
			eof = true;
			break;
		}
		got += (size_t)n;
	}
	if (got) {
		p->last_out_ms = now_ms();
		data_event(p, p->pty ? "pty" : err ? "stderr" : "stdout", buf, got);
	}
	if (eof) {
		out_close(p, err);
		maybe_finish(p);
		return;
	}
	proc_check_room(p);
	if (got && got < OUT_SMALL && !p->out_paused)
		batch_wait(p);
}

static void out_cb_out(struct watch *w, uint32_t ev)
{
	out_read((struct proc *)((char *)w - offsetof(struct proc, wout)), false);
}

static void out_cb_err(struct watch *w, uint32_t ev)
{
	out_read((struct proc *)((char *)w - offsetof(struct proc, werr)), true);
}

static void input_pump(struct proc *p);

static void in_cb(struct watch *w, uint32_t ev)
{
	struct proc *p = (struct proc *)((char *)w - offsetof(struct proc, win));

	input_pump(p);
}

static void input_pump(struct proc *p)
{
	while (p->inq && p->in_fd >= 0) {
		struct input *in = p->inq;
		ssize_t n = write(p->in_fd, in->data + in->off, in->len - in->off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (!p->in_watched && !loop_add(&p->win, p->in_fd, EPOLLOUT, in_cb))
				p->in_watched = true;
			return;
		}
		if (n < 0) {
			char msg[128];
			snprintf(msg, sizeof(msg), "writing the input: %s", strerror(errno));
			input_finish(in, "failed_precondition", msg);
			continue;
		}
		in->off += (size_t)n;
		if (in->off == in->len)
			input_finish(in, NULL, NULL);
	}
	if (p->in_watched) {
		loop_del(&p->win);
		p->in_watched = false;
	}
	if (!p->inq && p->close_stdin_pending && !p->pty)
		stdin_close(p);
}

static void input_closed(struct conn *c)
{
	struct input *in = http_ctx(c);

	if (in)
		in->c = NULL;
}

static void sigchld_cb(struct watch *w, uint32_t ev)
{
	struct signalfd_siginfo si;
	int st;
	pid_t pid;

	while (read(w->fd, &si, sizeof(si)) == sizeof(si))
		;
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (struct proc *p = procs; p; p = p->next)
			if (p->pid == pid && !p->reaped) {
				p->reaped = true;
				p->status = st;
				p->reap_ms = now_ms();
				maybe_finish(p);
				break;
			}
	}
}

int proc_init(void)
{
	sigset_t set;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		return -errno;
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	return loop_add(&sigw, fd, EPOLLIN, sigchld_cb);
}

static struct proc *find(const json_t *req, char *why, size_t len)
{
	json_t *sel = json_object_get(req, "process");
	json_t *pid = json_object_get(sel, "pid"), *tag = json_object_get(sel, "tag");
	uint64_t want;

	if (!json_is_object(sel) || (!pid && !json_is_string(tag))) {
		snprintf(why, len, "no process selector (pid or tag)");
		return NULL;
	}
	if (pid) {
		if (json_get_u64(pid, &want) || want > INT32_MAX) {
			snprintf(why, len, "bad pid");
			return NULL;
		}
		for (struct proc *p = procs; p; p = p->next)
			if ((uint64_t)p->pid == want)
				return p;
		snprintf(why, len, "process with pid %llu not found", (unsigned long long)want);
		return NULL;
	}
	for (struct proc *p = procs; p; p = p->next)
		if (p->tag && !strcmp(p->tag, json_string_value(tag)))
			return p;
	snprintf(why, len, "process with tag %s not found", json_string_value(tag));
	return NULL;
}


static void header_num(struct conn *c, const char *name, uint64_t *out)
{
	const char *v = http_header(c, name);
	char *end;
	unsigned long long x;

	if (!v || !*v || strlen(v) > 12 || *v == '-' || *v == '+')
		return;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (!errno && !*end)
		*out = x;
}

static void subscribe(struct conn *c, struct proc *p)
{
	struct sub *s = calloc(1, sizeof(*s));
	uint64_t ka = KEEPALIVE_DEFAULT_S, timeout = 0, now = now_ms();

	if (!s) {
		rpc_error(c, "resource_exhausted", "out of memory");
		return;
	}
	header_num(c, "Keepalive-Ping-Interval", &ka);
	header_num(c, "Connect-Timeout-Ms", &timeout);
	if (ka < 1)
		ka = 1;
	if (ka > 3600)
		ka = 3600;
	s->p = p;
	s->c = c;
	s->ka_ms = ka * 1000;
	s->next_ka = now + s->ka_ms;
	s->deadline = timeout ? now + timeout : 0;
	s->next = p->subs;
	p->subs = s;
	http_set_ops(c, &sub_ops, s);
	rpc_stream_begin(c);
	rpc_stream_msg(c, event("start", json_pack("{s:i}", "pid", (int)p->pid)));
}

void proc_start(struct conn *c, json_t *req, const struct user *u)
{
	json_t *pr = json_object_get(req, "process");
	json_t *args = json_object_get(pr, "args"), *pty = json_object_get(req, "pty");
	json_t *stdin_v = json_object_get(req, "stdin"), *tag = json_object_get(req, "tag");
	const char *cmd = json_cstr(json_object_get(pr, "cmd"));
	const char *cwd_in = json_cstr(json_object_get(pr, "cwd"));
	struct spawn sp = { .u = u };
	struct spawned sd;
	char cwd[4096], why[512];
	struct proc *p = NULL;
	size_t i, nargs;
	json_t *a;
	int rc;

	if (!json_is_object(pr) || !cmd || !*cmd) {
		rpc_error(c, "invalid_argument", "process.cmd is required");
		return;
	}
	if (args && !json_is_array(args)) {
		rpc_error(c, "invalid_argument", "process.args must be a list of strings");
		return;
	}
	if ((tag && !json_is_null(tag) && !json_cstr(tag)) || (stdin_v && !json_is_boolean(stdin_v) && !json_is_null(stdin_v))) {
		rpc_error(c, "invalid_argument", "bad tag or stdin");
		return;
	}
	nargs = json_array_size(args);
	if (nargs > 65536) {
		rpc_error(c, "invalid_argument", "too many arguments");
		return;
	}
	if (user_path(u, cwd_in && *cwd_in ? cwd_in : agent_default_workdir, cwd, sizeof(cwd))) {
		rpc_error(c, "invalid_argument", "cwd too long");
		return;
	}
	sp.cwd = cwd;
	sp.cwd_given = cwd_in && *cwd_in;
	sp.pty = json_is_object(pty);
	if (sp.pty) {
		json_t *size = json_object_get(pty, "size");
		uint64_t cols = 80, rows = 24;
		json_get_u64(json_object_get(size, "cols"), &cols);
		json_get_u64(json_object_get(size, "rows"), &rows);
		sp.ws.ws_col = cols > 0 && cols < 65536 ? (unsigned short)cols : 80;
		sp.ws.ws_row = rows > 0 && rows < 65536 ? (unsigned short)rows : 24;
	}
	/* proto: stdin is optional and defaults to true (older SDKs). */
	sp.use_stdin = !json_is_false(stdin_v);
	sp.switch_user = geteuid() == 0 && (u->uid != 0 || u->gid != 0);
	if (sp.switch_user)
		sp.ngroups = spawn_groups(u, sp.groups, 64);
	sp.argv = calloc(nargs + 2, sizeof(char *));
	if (!sp.argv)
		goto nomem;
	if (!(sp.argv[0] = strdup(cmd)))
		goto nomem;
	json_array_foreach(args, i, a) {
		const char *s = json_cstr(a);
		if (!s) {
			rpc_error(c, "invalid_argument", "process.args must be a list of strings");
			goto out;
		}
		if (!(sp.argv[i + 1] = strdup(s)))
			goto nomem;
	}
	sp.envp = spawn_env(u, json_object_get(pr, "envs"), sp.pty);
	if (!sp.envp)
		goto nomem;
	p = calloc(1, sizeof(*p));
	if (!p)
		goto nomem;
	p->in_fd = -1;
	p->wout.fd = p->werr.fd = -1;
	p->config = json_deep_copy(pr);
	if (json_cstr(tag))
		p->tag = strdup(json_cstr(tag));
	rc = spawn_run(&sp, &sd, why, sizeof(why));
	if (rc) {
		rpc_error(c, rc == -ENOENT ? "not_found" : rc == -EACCES ? "permission_denied" : "internal", "%s", why);
		proc_free(p);
		p = NULL;
		goto out;
	}
	p->pid = sd.pid;
	p->pty = sp.pty;
	p->in_fd = sd.in_fd;
	loop_add(&p->wout, sd.out_fd, EPOLLIN, out_cb_out);
	p->out_open = true;
	if (sd.err_fd >= 0) {
		loop_add(&p->werr, sd.err_fd, EPOLLIN, out_cb_err);
		p->err_open = true;
	}
	p->next = procs;
	procs = p;
	subscribe(c, p);
	goto out;
nomem:
	rpc_error(c, "resource_exhausted", "out of memory");
	if (p)
		proc_free(p);
out:
	spawn_free_strv(sp.argv);
	spawn_free_strv(sp.envp);
}

void proc_connect(struct conn *c, json_t *req)
{
	char why[160];
	struct proc *p = find(req, why, sizeof(why));

	if (!p) {
		rpc_error(c, "not_found", "%s", why);
		return;
	}
	subscribe(c, p);
}

void proc_list(struct conn *c, json_t *req)
{
	json_t *list = json_array();

	for (struct proc *p = procs; p; p = p->next) {
		json_t *e = json_pack("{s:o,s:i}", "config",
				p->config ? json_incref(p->config) : json_object(), "pid", (int)p->pid);
		if (e && p->tag)
			json_object_set_new(e, "tag", json_string(p->tag));
		json_array_append_new(list, e);
	}
	rpc_reply(c, json_pack("{s:o}", "processes", list));
}

void proc_send_input(struct conn *c, json_t *req)
{
	char why[160];
	struct proc *p = find(req, why, sizeof(why));
	json_t *input = json_object_get(req, "input");
	json_t *data = json_object_get(input, "stdin");
	struct input *in;
	long n;

	if (!p) {
		rpc_error(c, "not_found", "%s", why);
		return;
	}
	if (!data)
		data = json_object_get(input, "pty");
	if (!json_is_string(data)) {
		rpc_error(c, "invalid_argument", "input.stdin or input.pty (base64) is required");
		return;
	}
	if (p->in_fd < 0) {
		rpc_error(c, "failed_precondition", "the process has no open stdin");
		return;
	}
	in = calloc(1, sizeof(*in));
	if (in)
		in->data = malloc(B64_DEC_MAX(json_string_length(data)) + 1);
	if (!in || !in->data) {
		if (in)
			free(in);
		rpc_error(c, "resource_exhausted", "out of memory");
		return;
	}
	n = b64_decode(json_string_value(data), json_string_length(data), in->data,
			 B64_DEC_MAX(json_string_length(data)));
	if (n < 0) {
		free(in->data);
		free(in);
		rpc_error(c, "invalid_argument", "input is not base64");
		return;
	}
	if (n == 0) {
		free(in->data);
		free(in);
		rpc_reply(c, NULL);
		return;
	}
	in->len = (size_t)n;
	in->p = p;
	in->c = c;
	http_set_ops(c, &input_ops, in);
	/* append in order */
	{
		struct input **pp = &p->inq;
		while (*pp)
			pp = &(*pp)->next;
		*pp = in;
	}
	input_pump(p);
}

int proc_parse_signal(const json_t *v, int *sig)
{
	const char *s;
	uint64_t n;

	if (json_is_integer(v) || (json_is_string(v) && !json_get_u64(v, &n))) {
		if (json_get_u64(v, &n) || n < 1 || n > 64)
			return -EINVAL;
		*sig = (int)n;
		return 0;
	}
	if (!json_is_string(v))
		return -EINVAL;
	s = json_string_value(v);
	if (!strncmp(s, "SIGNAL_", 7))
		s += 7;
	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (int i = 1; i < 32; i++) {
		const char *abbrev = sigabbrev_np(i);
		if (abbrev && !strcmp(abbrev, s)) {
			*sig = i;
			return 0;
		}
	}
	return -EINVAL;
}

void proc_send_signal(struct conn *c, json_t *req)
{
	char why[160];
	struct proc *p = find(req, why, sizeof(why));
	int sig;

	if (!p) {
		rpc_error(c, "not_found", "%s", why);
		return;
	}
	if (proc_parse_signal(json_object_get(req, "signal"), &sig)) {
		rpc_error(c, "invalid_argument", "unknown signal");
		return;
	}
	/* The child leads its own session: signal its whole group, as a terminal would. */
	if (!p->reaped && kill(-p->pid, sig) && kill(p->pid, sig) && errno != ESRCH) {
		rpc_error(c, rpc_errno_code(errno), "kill: %s", strerror(errno));
		return;
	}
	rpc_reply(c, NULL);
}

void proc_close_stdin(struct conn *c, json_t *req)
{
	char why[160];
	struct proc *p = find(req, why, sizeof(why));

	if (!p) {
		rpc_error(c, "not_found", "%s", why);
		return;
	}
	if (p->pty) {
		rpc_error(c, "failed_precondition", "a pty process has no stdin to close: send Ctrl-D (0x04)");
		return;
	}
	if (p->inq)
		p->close_stdin_pending = true;
	else
		stdin_close(p);
	rpc_reply(c, NULL);
}

void proc_update(struct conn *c, json_t *req)
{
	char why[160];
	struct proc *p = find(req, why, sizeof(why));
	json_t *size = json_object_get(json_object_get(req, "pty"), "size");
	uint64_t cols = 0, rows = 0;
	struct winsize ws = { 0 };

	if (!p) {
		rpc_error(c, "not_found", "%s", why);
		return;
	}
	if (!size) {
		rpc_reply(c, NULL);
		return;
	}
	if (!p->pty || !p->out_open) {
		rpc_error(c, "failed_precondition", "the process has no pty");
		return;
	}
	if (json_get_u64(json_object_get(size, "cols"), &cols) || json_get_u64(json_object_get(size, "rows"), &rows) ||
			!cols || !rows || cols > 65535 || rows > 65535) {
		rpc_error(c, "invalid_argument", "pty.size wants cols and rows (1..65535)");
		return;
	}
	ws.ws_col = (unsigned short)cols;
	ws.ws_row = (unsigned short)rows;
	if (ioctl(p->wout.fd, TIOCSWINSZ, &ws)) {
		rpc_error(c, "internal", "TIOCSWINSZ: %s", strerror(errno));
		return;
	}
	rpc_reply(c, NULL);
}

void proc_tick(uint64_t now)
{
	struct proc *p, *pnext;

	for (p = procs; p; p = pnext) {
		struct sub *s, *snext;
		pnext = p->next;
		for (s = p->subs; s; s = snext) {
			snext = s->next;
			if (s->deadline && now >= s->deadline) {
				sub_end(s, NULL, "deadline_exceeded", "Connect-Timeout-Ms passed");
				continue;
			}
			if (now >= s->next_ka && http_can_write(s->c)) {
				s->next_ka = now + s->ka_ms;
				rpc_stream_msg(s->c, event("keepalive", json_object()));
			}
		}
		proc_check_room(p);
		/* Exited, but something it started still holds its output open. */
		if (p->reaped && !p->out_paused && now >= p->reap_ms + DRAIN_GRACE_MS &&
				now >= p->last_out_ms + DRAIN_GRACE_MS)
			proc_finish(p);
	}
}
