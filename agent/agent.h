/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle-agent: the pieces shared by its files (event loop, options, RPC helpers). */
#ifndef CUBICLE_AGENT_H
#define CUBICLE_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#define AGENT_VERSION "0.6.4-cubicle"
#define AGENT_DEFAULT_PORT 49983
#define AGENT_READY_PORT 49984

struct conn;

/* ---- event loop (loop.c): one epoll set, one event per wait ---- */
struct watch {
	int fd;
	uint32_t events;
	/* Called with the epoll events; the object may be freed inside. */
	void (*cb)(struct watch *w, uint32_t events);
};
int loop_init(void);
int loop_add(struct watch *w, int fd, uint32_t events, void (*cb)(struct watch *, uint32_t));
int loop_mod(struct watch *w, uint32_t events);
void loop_del(struct watch *w);
/* Runs until loop_stop(); calls tick() about every TICK_MS milliseconds. */
#define TICK_MS 200
int loop_run(void (*tick)(uint64_t now_ms));
void loop_stop(void);
/* Runs FN(ARG) after the current event's callback (FIFO): frees go here. */
void loop_defer(void (*fn)(void *), void *arg);
uint64_t now_ms(void);

/* ---- options (main.c) ---- */
extern const char *agent_token; /* NULL: no X-Access-Token check */

/* ---- users (users.c): /etc/passwd and /etc/group read without NSS ---- */
struct user {
	uid_t uid;
	gid_t gid;
	char name[64];
	char home[512];
	char shell[256];
};
/* 0, or -ENOENT when NAME is not in /etc/passwd. */
int user_lookup(const char *name, struct user *u);
/* The name of UID / GID, or its number as text. */
const char *user_name(uid_t uid, char *buf, size_t len);
const char *group_name(gid_t gid, char *buf, size_t len);
/* The sandbox's default user (/init's defaultUser), or "" for `user`. */
extern char agent_default_user[64];
/* The default working folder of processes (/init's defaultWorkdir), or "" for the user's home. */
extern char agent_default_workdir[4096];
/* The user a request acts as: the named one when it exists; with no name,
 * the default user (else `user`) when it exists; else the agent's own. */
void user_resolve(const char *name, struct user *u);
/* Joins a relative PATH to U's home (absolute paths as they are); -ENAMETOOLONG. */
int user_path(const struct user *u, const char *path, char *out, size_t len);

/* ---- RPC (rpc.c) ---- */
/* Connect error codes and their HTTP status. */
int rpc_http_status(const char *code);
/* The Connect code for an errno value. */
const char *rpc_errno_code(int err);
/* Unary answers: 200 with JSON (stolen), or the error. */
void rpc_reply(struct conn *c, json_t *msg);
void rpc_error(struct conn *c, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Server streams: the envelope framing. */
void rpc_stream_begin(struct conn *c);
void rpc_stream_msg(struct conn *c, json_t *msg); /* steals msg */
void rpc_stream_end(struct conn *c, const char *code, const char *message);
/*
 * A server stream's pacing, from its request's headers: a keepalive every
 * Keepalive-Ping-Interval seconds (RPC_KEEPALIVE_S when absent; 1 to 3600), its
 * end once Connect-Timeout-Ms has passed (none when absent). rpc_pace_tick
 * says what is due at @now: a keepalive (the next one is then scheduled;
 * only while @c can take it), the end, or nothing.
 */
#define RPC_KEEPALIVE_S 50 /* envd's default */
struct rpc_pace {
	uint64_t ka_ms, next_ka, deadline;
};
enum rpc_pace_due { RPC_PACE_NONE, RPC_PACE_KEEPALIVE, RPC_PACE_END };
void rpc_pace_init(struct conn *c, struct rpc_pace *p, uint64_t now);
enum rpc_pace_due rpc_pace_tick(struct rpc_pace *p, struct conn *c, uint64_t now);

/* Routes a complete Connect request (POST /pkg.Service/Method). */
void rpc_dispatch(struct conn *c, const char *method, const char *body, size_t len, bool stream);
/* Unwraps a streaming request body: one envelope with flag 0 (no compression). */
int rpc_unwrap(const char *body, size_t len, const char **json, size_t *jlen);
/* A JSON string without NULs inside, or NULL. */
const char *json_cstr(const json_t *v);
/* Reads a JSON integer that may be written as a number or a string (proto3 int64). */
int json_get_u64(const json_t *v, uint64_t *out);

/* net.c: POST /init's "cubicleNetwork" (an address, up, a default route). */
int net_configure(json_t *n, char *why, size_t len);
/* Brings the loopback interface up (best effort: a guest whose init did not). */
void net_lo_up(void);
/* GET /cubicle/port?port=N (Upgrade: cubicle-port): the connection becomes
 * that guest TCP port's (agent/bridge.c). */
void bridge_port(struct conn *c, const char *query);
/* A child that was no process's ended: a bridge's, perhaps. */
void bridge_reaped(pid_t pid);

/* ---- the RPC methods (process.c, fs.c) ---- */
void proc_start(struct conn *c, json_t *req, const struct user *u);
void proc_connect(struct conn *c, json_t *req);
void proc_list(struct conn *c, json_t *req);
void proc_send_input(struct conn *c, json_t *req);
void proc_send_signal(struct conn *c, json_t *req);
void proc_close_stdin(struct conn *c, json_t *req);
void proc_update(struct conn *c, json_t *req);
void proc_tick(uint64_t now);
int proc_init(void);
/* Parses a signal: enum name, "SIGINT", or a number. 0 or -EINVAL. */
int proc_parse_signal(const json_t *v, int *sig);

void fs_stat(struct conn *c, json_t *req, const struct user *u);
void fs_list_dir(struct conn *c, json_t *req, const struct user *u);
void fs_make_dir(struct conn *c, json_t *req, const struct user *u);
void fs_move(struct conn *c, json_t *req, const struct user *u);
void fs_remove(struct conn *c, json_t *req, const struct user *u);
/* EntryInfo of PATH (lstat), or NULL with errno set. */
json_t *fs_entry(const char *path);
/* The request's path parameter KEY under U's home into OUT: 0, or -1 after
 * replying invalid_argument (missing, empty, a NUL inside, too long). */
int fs_req_path(struct conn *c, json_t *req, const char *key, const struct user *u, char *out,
		size_t len);
/* watch.c: WatchDir (a stream), CreateWatcher, GetWatcherEvents, RemoveWatcher. */
void fs_watch_dir(struct conn *c, json_t *req, const struct user *u);
void fs_create_watcher(struct conn *c, json_t *req, const struct user *u);
void fs_get_watcher_events(struct conn *c, json_t *req);
void fs_remove_watcher(struct conn *c, json_t *req);
void watch_tick(uint64_t now);

/* ---- GET/POST /files (files.c) ---- */
void files_get(struct conn *c, const char *query, const char *auth_user);
/* Chooses how the upload body is read; replies itself on errors. */
void files_post_begin(struct conn *c, const char *query, const char *auth_user);

#endif
