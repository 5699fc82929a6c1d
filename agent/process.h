/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle-agent: the processes' table, shared by process.c and process_rpc.c. */
#ifndef CUBICLE_AGENT_PROCESS_H
#define CUBICLE_AGENT_PROCESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "agent.h"

struct proc;

struct sub {
	struct sub *next;
	struct proc *p;
	struct conn *c;
	struct rpc_pace pace;
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

/* Every process started and not yet finished, newest first. */
extern struct proc *proc_all;
/* The ops of a SendInput's connection while its bytes wait (proc_input_pump). */
extern const struct conn_ops proc_input_ops;

void proc_free(void *arg);
/* The output watches' callbacks (stdout or the pty, stderr). */
void proc_out_cb_out(struct watch *w, uint32_t ev);
void proc_out_cb_err(struct watch *w, uint32_t ev);
/* Writes what p->inq holds to the child's stdin, as far as the pipe takes it. */
void proc_input_pump(struct proc *p);
/* Closes the child's stdin; inputs still queued fail. */
void proc_stdin_close(struct proc *p);
/* Adds connection @c as a subscriber of @p: the stream begins with the start event. */
void proc_subscribe(struct conn *c, struct proc *p);

#endif
