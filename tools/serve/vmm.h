/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's VMM process, its API socket and its guest agent (vmm.c). */
#ifndef CUBICLE_SERVE_VMM_H
#define CUBICLE_SERVE_VMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#define VMM_SETS_MAX 16

struct sandbox;

/* /proc/PID/stat's start time (0: no such process) and state letter. */
unsigned long long proc_start_time(pid_t pid, char *state);
/* File @name of sandbox @s: where serve finds it (@inside false) or the
 * path its VMM names it by (@inside true); they differ when it is jailed
 * (DIR/j/vm/NAME from outside, /vm/NAME inside). */
void sbx_file(const struct sandbox *s, const char *name, bool inside, char *out, size_t len);
/* The sandbox's VMM still runs (same pid, same start time, not a zombie). */
bool vmm_alive(struct sandbox *s);
/* SIGKILL it and wait (at most 5 s) until it is gone; pid becomes 0. A
 * jailed one gets SIGTERM first (its supervisor then removes its cgroup;
 * else serve does). */
void vmm_end(struct sandbox *s);
/* The --jail options of a VMM whose jail is @root (@uid and @gid, or
 * srv.jail_user's UID:GID when 0, in @buf; the range as
 * --jail-foreign-ids; srv.jail_cgroup; the limits) appended to @argv at
 * *@n (at most 16): 0, or -1 when there are no ids to give (jail_user a
 * range and the sandbox none of its own). */
int vmm_jail_args(char **argv, unsigned *n, const char *root, uint32_t uid, uint32_t gid,
		  char *buf, size_t len);
/* How spawn_child places its child. */
enum spawn_group {
	SPAWN_SAME_GROUP,  /* serve's process group (Ctrl-C reaches it too) */
	SPAWN_OWN_GROUP,   /* a process group of its own (killed as one) */
	SPAWN_OWN_SESSION, /* a session of its own (outlives serve) */
};
struct spawn_opts {
	int out;               /* its stdout and stderr (-1: serve's); stdin is /dev/null */
	enum spawn_group group;
	const char *cwd;       /* NULL: serve's working folder */
	char *const *env;      /* NULL: serve's environment */
};
/* Starts @path (without a '/': searched in PATH) with @argv as @o says,
 * every signal unblocked and at its default, with posix_spawn: no code of
 * serve's runs in the child, so it is sound while other threads hold
 * locks. 0 and *@pid, or an errno (the exec's own too: ENOENT, EACCES). */
int spawn_child(pid_t *pid, const char *path, char *const argv[], const struct spawn_opts *o);
/* `cubicle restore SNAP --api-sock DIR/api.sock --set ...` in a session of
 * its own, output to DIR/vmm.log, with --paused when @paused (the VM waits
 * for PATCH /vm Resumed): 0, or -1 (errno). */
int vmm_spawn(struct sandbox *s, const char *snap, char *const *sets, unsigned n_sets, bool paused);
/* The last error line (or last line) of DIR/vmm.log (DIR/s->log_name). */
void vmm_log_tail(const struct sandbox *s, char *out, size_t len);
/* A call to the VMM's API: 0 on a 2xx answer, else -1 with @msg. */
int vmm_api(const struct sandbox *s, const char *method, const char *path, const char *body,
	    int timeout_ms, char *msg, size_t len);
/* A connection to guest port @port through the vsock socket @path (the
 * CONNECT handshake done), or -1 (errno). */
int vsock_connect(const char *path, unsigned port, int timeout_ms);
/* vsock_connect, tried again 50 to 800 ms apart (five more tries) while the
 * guest refuses or the VMM's backlog is full (EAGAIN): neither carried
 * anything to the guest, and both pass (a burst of connections, a guest
 * starved on a loaded host). */
int vsock_connect_patient(const char *path, unsigned port, int timeout_ms);
/* Waits (srv.agent_wait_ms) until the VMM's API answers with its VM made
 * (GET / says a state other than "Not started") while it lives: 0, or -1
 * with @msg. */
int vmm_wait_api(struct sandbox *s, char *msg, size_t len);
/* Waits (srv.agent_wait_ms) until the agent behind @uds answers /health
 * while the VMM lives: 0, or -1 with @msg. */
int vmm_wait_health(struct sandbox *s, const char *uds, char *msg, size_t len);
/* Waits until the agent answers /health, then POST /init with s->token,
 * @env (may be NULL) and the clock; @token is the agent's current token
 * (NULL: none yet). 0, or -1 with @msg. */
int vmm_wait_agent(struct sandbox *s, const char *token, json_t *env, char *msg, size_t len);
/* POST /init @body to the running agent of @s (with s->token): what it
 * sets (envVars, defaultUser, defaultWorkdir) holds for every later
 * process. 0, or -1 with @msg. */
int vmm_agent_init(struct sandbox *s, json_t *body, char *msg, size_t len);

#endif
