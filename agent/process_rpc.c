/* SPDX-License-Identifier: Apache-2.0 */
/* process.Process's RPC methods: Start, Connect, List, SendInput, SendSignal, CloseStdin, Update. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "agent.h"
#include "b64.h"
#include "http.h"
#include "process.h"
#include "spawn.h"

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
		for (struct proc *p = proc_all; p; p = p->next)
			if ((uint64_t)p->pid == want)
				return p;
		snprintf(why, len, "process with pid %llu not found", (unsigned long long)want);
		return NULL;
	}
	for (struct proc *p = proc_all; p; p = p->next)
		if (p->tag && !strcmp(p->tag, json_string_value(tag)))
			return p;
	snprintf(why, len, "process with tag %s not found", json_string_value(tag));
	return NULL;
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
	loop_add(&p->wout, sd.out_fd, EPOLLIN, proc_out_cb_out);
	p->out_open = true;
	if (sd.err_fd >= 0) {
		loop_add(&p->werr, sd.err_fd, EPOLLIN, proc_out_cb_err);
		p->err_open = true;
	}
	p->next = proc_all;
	proc_all = p;
	proc_subscribe(c, p);
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
	proc_subscribe(c, p);
}

void proc_list(struct conn *c, json_t *req)
{
	json_t *list = json_array();

	for (struct proc *p = proc_all; p; p = p->next) {
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
	http_set_ops(c, &proc_input_ops, in);
	/* append in order */
	{
		struct input **pp = &p->inq;
		while (*pp)
			pp = &(*pp)->next;
		*pp = in;
	}
	proc_input_pump(p);
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
		proc_stdin_close(p);
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
