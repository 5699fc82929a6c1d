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
 *
 * The RPC methods that start, find and drive them are in process_rpc.c.
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
#include "process.h"
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

extern char **environ;

struct proc *proc_all;
static struct watch sigw;

static void sub_closed(struct conn *c);
static void sub_writable(struct conn *c);
static const struct conn_ops sub_ops = { .writable = sub_writable, .closed = sub_closed };
static void input_closed(struct conn *c);
const struct conn_ops proc_input_ops = { .closed = input_closed };

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

void proc_free(void *arg)
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

void proc_stdin_close(struct proc *p)
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
	proc_stdin_close(p);
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
	for (struct proc **pp = &proc_all; *pp; pp = &(*pp)->next)
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
		s->pace.next_ka = p->last_out_ms + s->pace.ka_ms;
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

void proc_out_cb_out(struct watch *w, uint32_t ev)
{
	out_read((struct proc *)((char *)w - offsetof(struct proc, wout)), false);
}

void proc_out_cb_err(struct watch *w, uint32_t ev)
{
	out_read((struct proc *)((char *)w - offsetof(struct proc, werr)), true);
}

static void in_cb(struct watch *w, uint32_t ev)
{
	struct proc *p = (struct proc *)((char *)w - offsetof(struct proc, win));

	proc_input_pump(p);
}

void proc_input_pump(struct proc *p)
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
		proc_stdin_close(p);
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
		struct proc *p;

		for (p = proc_all; p; p = p->next)
			if (p->pid == pid && !p->reaped) {
				p->reaped = true;
				p->status = st;
				p->reap_ms = now_ms();
				maybe_finish(p);
				break;
			}
		if (!p)
			bridge_reaped(pid);
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

void proc_subscribe(struct conn *c, struct proc *p)
{
	struct sub *s = calloc(1, sizeof(*s));

	if (!s) {
		rpc_error(c, "resource_exhausted", "out of memory");
		return;
	}
	s->p = p;
	s->c = c;
	rpc_pace_init(c, &s->pace, now_ms());
	s->next = p->subs;
	p->subs = s;
	http_set_ops(c, &sub_ops, s);
	rpc_stream_begin(c);
	rpc_stream_msg(c, event("start", json_pack("{s:i}", "pid", (int)p->pid)));
}

void proc_tick(uint64_t now)
{
	struct proc *p, *pnext;

	for (p = proc_all; p; p = pnext) {
		struct sub *s, *snext;
		pnext = p->next;
		for (s = p->subs; s; s = snext) {
			snext = s->next;
			switch (rpc_pace_tick(&s->pace, s->c, now)) {
			case RPC_PACE_END:
				sub_end(s, NULL, "deadline_exceeded", "Connect-Timeout-Ms passed");
				break;
			case RPC_PACE_KEEPALIVE:
				rpc_stream_msg(s->c, event("keepalive", json_object()));
				break;
			case RPC_PACE_NONE:
				break;
			}
		}
		proc_check_room(p);
		/* Exited, but something it started still holds its output open. */
		if (p->reaped && !p->out_paused && now >= p->reap_ms + DRAIN_GRACE_MS &&
				now >= p->last_out_ms + DRAIN_GRACE_MS)
			proc_finish(p);
	}
}
