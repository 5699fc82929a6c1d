/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle-serve: E2B's sandbox service on one host. The parts share these types. */
#ifndef CUBICLE_SERVE_H
#define CUBICLE_SERVE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "hio.h"
#include "rmtree.h"

#define AGENT_PORT 49983
/* The envd version the SDK is told: what its checks ask for works here
 * (octet-stream uploads 0.5.7, file metadata 0.6.2, watch events with their
 * entries 0.6.3, a watch of a network file system on request 0.6.4). */
#define ENVD_VERSION "0.6.4"
#define ID_LEN 20

enum sbx_state { SBX_STARTING, SBX_RUNNING, SBX_PAUSING, SBX_PAUSED, SBX_RESUMING, SBX_POOLED, SBX_GONE };

/* One usage sample of a sandbox (GET /sandboxes/ID/metrics). */
struct sbx_sample {
	time_t t;
	double cpu_pct;             /* of its vCPUs, since the sample before (or its VMM's start) */
	unsigned long long mem, disk_used, disk_total; /* bytes */
};

#define SBX_SAMPLE_S 5              /* the reaper samples each running sandbox so often */
#define SBX_SAMPLES 720             /* and keeps the last hour of them */

struct sandbox {
	struct sandbox *next;
	unsigned refs;              /* under srv.lock */
	pthread_mutex_t op;         /* held by one lifecycle step at a time */
	enum sbx_state state;       /* under srv.lock */
	bool checkpointing;         /* PAUSING for a fork or snapshot: it runs again soon (under srv.lock) */
	char id[ID_LEN + 1];
	char template_id[64];
	char token[65];             /* envdAccessToken */
	char traffic_token[37];     /* UUID v4, when allowPublicTraffic is false */
	char mask_host[256];        /* E2B's maskRequestHost: the Host its ports are asked with, "" as sent */
	char dir[256];              /* STATE/sandboxes/ID */
	pid_t pid;                  /* the VMM, 0 when paused */
	unsigned long long pid_start; /* its start time (/proc/PID/stat field 22) */
	bool child;                 /* started by this serve (else adopted) */
	unsigned pause_gen;         /* the paused snapshot is DIR/pause-GEN */
	time_t started, end;        /* wall clock */
	bool auto_pause, public_traffic;
	bool auto_resume;           /* paused: resumed by a data-plane request (E2B's autoResume) */
	unsigned timeout;           /* seconds, as last set: an auto-resume's */
	unsigned vcpus, memory_mib;
	json_t *metadata;           /* an object of strings */
	double create_ms;           /* create or resume to agent ready */
	bool jailed;                /* its VMM runs `--jail DIR/j` (files: sbx_file) */
	const char *log_name;       /* its VMM's output in DIR: NULL is vmm.log */
	uint32_t jail_uid, jail_gid; /* its VMM's, from jail_user when it was made; 0: jail_user's now */
	int net_slot;               /* its /30 of the network_subnet, -1: no network */
	char net_dev[65];           /* the tap device's id in its VM */
	json_t *net_allow;          /* its egress allow list (strings) */
	pthread_mutex_t net_lock;   /* net_learned, dns_fd, net_allow's swap, the policy calls */
	json_t *net_learned;        /* addresses its DNS lookups allowed: {"A.B.C.D/32": name} */
	int dns_fd, dns_tcp_fd;     /* its DNS proxy sockets, UDP and TCP (dns.c), -1 */
	/* usage samples, a ring (allocated at the first), under srv.lock */
	struct sbx_sample *samples;
	unsigned n_samples, next_sample;
	double sample_cpu_s, sample_ms; /* the last sample's VMM CPU time and when (now_ms) */
	pid_t sample_pid;               /* of which VMM */
};

struct server {
	pthread_mutex_t lock;
	struct sandbox *list;
	unsigned n_sandboxes;
	const char *state_dir;      /* absolute */
	const char *cubicle;        /* the cubicle binary for VMMs */
	const char *domain;
	const char *seccomp;        /* --seccomp for the VMMs, or NULL */
	char **keys;                /* accepted API keys */
	unsigned n_keys;
	unsigned max_sandboxes, max_conns, default_timeout, max_timeout;
	unsigned agent_wait_ms;
	unsigned pool_size;         /* warm clones of pool_template kept ready */
	const char *pool_template;
	/* Jailed VMMs (jail_user set): uid and gid, the parent cgroup, limits. */
	const char *jail_user, *jail_cgroup, *jail_memory_max, *jail_cpu_max, *jail_pids_max;
	uint32_t jail_first, jail_last; /* jail_user FIRST-LAST: a uid each; else 0 */
	uint32_t jail_uid, jail_gid;    /* jail_user UID:GID; else 0 */
	/* Sandbox networks (network_subnet set): a /30 each from net_base. */
	const char *net_subnet, *net_if;
	uint32_t net_base;          /* host order */
	unsigned net_slots;
	bool net_deny_default;      /* allow_internet_access absent means false */
	const char *dns_upstream;   /* the sandboxes' DNS proxy asks it (dns.c), or NULL */
	const char *image_vm;       /* the VM file a build's fromImage boots (absolute), or NULL */
	unsigned conns;             /* open client connections, under lock */
	volatile int stopping;
	/* recent create latencies (ms), a ring, under lock */
	double lat[64];
	unsigned n_lat;
};

extern struct server srv;

/* srv.jail_user is UID:GID, both numbers and neither 0, and this process
 * is root; srv.jail_cgroup defaults to what `cubicle --jail` uses. 0, or
 * after a message that starts with @who, -2 (not UID:GID) or -1 (not root). */
int serve_jail_check(const char *who);

/* Inside a jail, the folder that holds a sandbox's files (its VMM's view);
 * from outside DIR/j/vm (short: a socket path must fit in 108 bytes). */
#define JAIL_BOX "/vm"

/* ---- sandbox.c, sandbox_create.c ---- */
/* Loads STATE/sandboxes: running ones whose VMM lives are adopted, the rest cleaned. */
int sbx_adopt_all(void);
/* The reaper: ends expired sandboxes, notices dead VMMs (a thread). */
void *sbx_reaper(void *arg);
/* A new sandbox from template @tmpl: 0 and *out (a reference), or an HTTP status with @msg. */
int sbx_create(const char *tmpl, json_t *req, struct sandbox **out, char *msg, size_t len);
/* Ends the warm pool's clones (serve is stopping; sandboxes stay). */
void sbx_pool_drain(void);
/* A reference to sandbox @id, or NULL. */
struct sandbox *sbx_get(const char *id);
/* A reference to the first running sandbox (or paused one that its
 * traffic resumes: autoResume) @match says yes to (called under srv.lock),
 * or NULL. */
struct sandbox *sbx_find(bool (*match)(const struct sandbox *, void *), void *arg);
/* A reference to the sandbox holding /30 @slot of the network_subnet (any
 * state but gone), or NULL. */
struct sandbox *sbx_get_slot(int slot);
void sbx_put(struct sandbox *s);
/* Kill (remove everything), pause (to disk), resume: 0 or an HTTP status with @msg. */
int sbx_kill(struct sandbox *s, char *msg, size_t len);
int sbx_pause(struct sandbox *s, char *msg, size_t len);
int sbx_resume(struct sandbox *s, unsigned timeout, char *msg, size_t len);
/* Ends it @timeout seconds from now (at most max_timeout); extend: unless
 * that is sooner than its end already is (E2B's refresh). */
void sbx_set_timeout(struct sandbox *s, unsigned timeout);
void sbx_extend_timeout(struct sandbox *s, unsigned timeout);
/* POST /sandboxes/ID/fork (@req: count 1-100, default 1; timeout seconds):
 * the running sandbox is paused, snapshotted and resumed, and count new
 * sandboxes are made from that snapshot (copied out of its folder and
 * checked first, as a resume checks a pause snapshot). 0 with *@out an
 * array of {"sandbox": ...} or {"error": {code, message}}, one a fork; or
 * an HTTP status with @msg when none was tried. */
int sbx_fork(struct sandbox *src, json_t *req, json_t **out, char *msg, size_t len);
/* POST /sandboxes/ID/snapshots (@req: an optional name): the running
 * sandbox checkpointed as for a fork, the snapshot kept as template NAME
 * (a random one when none is given; an older snapshot of that name is
 * replaced; a built template's name is a 409) with its record
 * (sbx_snapshot_record). 0 with *@out {"snapshotID", "names"}, or an HTTP
 * status with @msg. */
int sbx_snapshot(struct sandbox *src, json_t *req, json_t **out, char *msg, size_t len);
/* GET /snapshots: every snapshot template (of sandbox @source, named
 * @name, "NAME:TAG" matching NAME:TAG or NAME: either NULL or "" for any)
 * as {"snapshotID", "names", "sandboxID", "created"}. */
json_t *sbx_snapshot_list(const char *source, const char *name);
/* DELETE /templates/NAME: a snapshot template removed (0); 404 when there
 * is none, 409 for a built one, with @msg. */
int sbx_snapshot_delete(const char *name, char *msg, size_t len);
/* A template name: 1-60 characters, no '/' or ' ', not starting with '.'. */
bool template_name_ok(const char *n);
/* STATE/templates/@tmpl/snapshot.json, or NULL (a built template). */
json_t *sbx_snapshot_record(const char *tmpl);
/* The config of sandbox @s's template as it was when @s was made
 * (DIR/template.json; else the template's own now), or NULL. */
json_t *sbx_template_config(const struct sandbox *s);
/* Snapshot folder @dir, which @s's VMM wrote (its guest may have taken it
 * over), against @s's template config @tc: a Full snapshot whose config
 * folder is the template's and whose every path is the template's at the
 * same place or one serve gave @s. 0, or -1 with @msg. */
int sbx_snap_check(const struct sandbox *s, const char *dir, json_t *tc, char *msg, size_t len);
/* PUT /sandboxes/ID/network (@req: allowOut, denyOut, allow_internet_access):
 * the allow list replaced (a paused sandbox's when it resumes): 0 or an
 * HTTP status with @msg. */
int sbx_set_network(struct sandbox *s, json_t *req, char *msg, size_t len);
const char *sbx_state_name(enum sbx_state st);
/* A connection to guest port @port through the sandbox's vsock socket (a refusal or a full backlog tried again: vsock_connect_patient), or -1 (errno). */
int sbx_vsock_connect(const struct sandbox *s, unsigned port, int timeout_ms);
/* A usage sample of running sandbox @s now, its CPU since the last one
 * kept; @keep: kept in its ring as the new last one. */
void sbx_sample(struct sandbox *s, struct sbx_sample *out, bool keep);
/* Its kept samples from @from to @to (seconds, inclusive), oldest first,
 * into @out (at most @max): how many. */
unsigned sbx_samples(const struct sandbox *s, time_t from, time_t to, struct sbx_sample *out,
		     unsigned max);
/* The VMM's resident memory in KiB (0 when none) and CPU seconds used. */
void sbx_usage(const struct sandbox *s, unsigned long long *rss_kib, double *cpu_s);
/* Its disk copies on the host: bytes allocated (a reflink's shared blocks
 * count) and their sizes; 0 and 0 for a template without disks. */
void sbx_disk_usage(const struct sandbox *s, unsigned long long *used, unsigned long long *total);
/* Between the two files: a new sandbox @id (one reference, not listed),
 * listing it, its state (under srv.lock), its sandbox.json written (0 or
 * -1, logged), everything of it gone (its VMM, its folder, its place in
 * the list); the warm pool topped up by one clone (the reaper's). */
struct sandbox *sbx_new(const char *id);
void sbx_link_in(struct sandbox *s);
void sbx_set_state(struct sandbox *s, enum sbx_state st);
/* A fork's or snapshot's checkpoint of @s begins (@on: its state becomes
 * PAUSING) or ends (it is RUNNING again, and whoever waits for it wakes). */
void sbx_checkpoint(struct sandbox *s, bool on);
/* Waits until no checkpoint of @s runs, at most @ms: false when one still
 * does. */
bool sbx_checkpoint_wait(struct sandbox *s, int ms);
int sbx_save(const struct sandbox *s);
void sbx_destroy(struct sandbox *s);
void sbx_pool_fill(void);

/* Makes one sandbox JSON for a create's answer (api.c). */
json_t *sbx_created_json(struct sandbox *s);

/* ---- api.c ---- */
/* One request of a client connection (control plane, status page, or proxied). */
void api_handle(struct hconn *c, struct hreq *r);

/* ---- proxy.c ---- */
/* Forwards request @r (its body still to come) to the sandbox's guest port,
 * with header line(s) @extra ("Name: value\r\n", or NULL) added, and its
 * Host header(s) replaced by "Host: @host" when @host is not NULL. */
void proxy_request(struct hconn *c, struct hreq *r, struct sandbox *s, unsigned port, const char *extra,
		   const char *host);
/* A maskRequestHost serve takes: 1 to 200 characters of a host[:port] in
 * which "${PORT}" stands for the port asked (letters, digits, "-._:[]%~"). */
bool mask_host_ok(const char *m);
/* @m with each "${PORT}" replaced by @port, into @out. */
void mask_host_expand(const char *m, unsigned port, char *out, size_t len);

/* A value of a snapshot manifest's config tree as text ("x" or {"=": "x"}). */
const char *cfg_text(json_t *v);

/* ---- net.c ---- */
/* Checks srv.net_subnet (when set): 0, or -1 with @why. */
int net_server_init(char *why, size_t len);
/* The template's tap device (config tree @tree): 1 with @id, 0 none, -1 with @msg. */
int net_template_dev(json_t *tree, char *id, size_t idlen, char *msg, size_t len);
/* A /30 for clone @s and the --set options for its tap (device @dev) appended
 * to @sets: 0, or -1 with @msg. */
int net_clone(struct sandbox *s, const char *dev, char **sets, unsigned *n, unsigned max,
	      char *msg, size_t len);
/* Once its VMM's API answers: the tap's host side and s->net_allow loaded. */
int net_attach(struct sandbox *s, char *msg, size_t len);
/* Its running VMM's allow list made @list (s->net_allow unchanged): 0 or -1. */
int net_replace(struct sandbox *s, json_t *list, char *msg, size_t len);
/* The DNS proxy answered the guest's lookup of @name with @addrs (@n of
 * them, host order): when an allowOut domain of the sandbox matches @name,
 * each is allowed in its policy (and remembered for a resume). 0, or -1 when
 * the policy did not take them (the answer is then not passed on). */
int net_learn(struct sandbox *s, const char *name, const uint32_t *addrs, int n);
/* /init's "cubicleNetwork" for its guest. */
json_t *net_init_json(const struct sandbox *s);
void net_tap_name(const struct sandbox *s, char *out, size_t len);
/* Its gateway: the tap's host side, where its name server answers (host order). */
uint32_t net_gw(const struct sandbox *s);
/* Its name server's sockets (dns_open) and its policy's entry for them (UDP
 * and TCP to its port 53): at net_attach, and for a sandbox found running.
 * 0, or -1 with @msg. */
int net_dns_open(struct sandbox *s, char *msg, size_t len);

/* ---- dns.c ---- */
/* The sandboxes' DNS proxy thread; @upstream "A.B.C.D[:PORT]" or NULL (the
 * host's /etc/resolv.conf). 0, or -1 with @why. */
int dns_start(const char *upstream, char *why, size_t len);
/* Sandbox @s's sockets on @addr:53, UDP and TCP (host order; its tap's host
 * side), once: 0, or -1 with @msg. */
int dns_open(struct sandbox *s, uint32_t addr, char *msg, size_t len);
void dns_close(struct sandbox *s);

/* ---- logs.c ---- */
struct logs_query {
	long long start;   /* ms since the epoch: v1's start, v2's cursor */
	bool has_start;
	unsigned limit;    /* entries at most */
	bool backward;     /* v2's direction: the newest first, at or before start */
	int min_level;     /* logs_level's: 0 debug .. 3 error */
	char search[257];  /* a substring of the message, or "" */
};
/* 0..3 for "debug", "info", "warn", "error"; -1 for another word. */
int logs_level(const char *name);
/* Sandbox @s's log entries (its VMM's log file) for @q, as E2B's v1
 * ({logs: [{timestamp, line}], logEntries}) or @v2 ({logs}) answer: 0, or
 * an HTTP status with @msg. */
int sbx_logs(const struct sandbox *s, const struct logs_query *q, bool v2, json_t **out, char *msg, size_t len);

/* ---- util ---- */
/* @s as a JSON string; when it is not valid UTF-8 (a guest's output may be
 * anything), its bytes past ASCII each a '?' (it is for reading). */
json_t *text_json(char *s);
void serve_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double now_ms(void);
void rand_hex(char *out, size_t n_chars);
void iso_time(time_t t, char *out, size_t len);
/* A random UUID v4, 36 characters and a NUL. */
void uuid4(char *out);

#endif
