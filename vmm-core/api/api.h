/* SPDX-License-Identifier: Apache-2.0 */
/* The control API: Firecracker's REST API and cubicle's own endpoints as
 * HTTP/1.1 + JSON on a Unix socket, served on the event-loop thread. */
#ifndef CUBICLE_API_H
#define CUBICLE_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "api/apivm.h"

struct arena;
struct cnode;
struct cub_inst;
struct event_loop;
struct plan;
struct registry;
struct vm;

/* Largest request body and header block accepted (bytes). */
#define API_BODY_MAX (64u * 1024)
#define API_HEADER_MAX (16u * 1024)

struct api;

/* Listen on the Unix socket @path (refused when something answers there;
 * a stale socket file is replaced) and serve on @ev, which may already run.
 * 0, or -errno with one line in err. */
int api_open(struct api **out, const char *path, struct event_loop *ev, struct api_vm *vm,
	     char *err, size_t errlen);
/* The same for an API made with api_new_detached (api_load_fc_json first). */
int api_listen(struct api *a, const char *path, struct event_loop *ev, char *err, size_t errlen);
/*
 * Firecracker's JSON VM description (firecracker --config-file): each
 * section PUT as its endpoint would be (machine-config, boot-source,
 * drives, network-interfaces, entropy, ...), then InstanceStart. On the
 * thread that serves the API, before it listens. 0, or -errno with one
 * line naming the file and the section, element or field in err.
 */
int api_load_fc_json(struct api *a, const char *path, char *err, size_t errlen);
/* Stop serving, close every connection and remove the socket file. */
void api_close(struct api *a);

/* One request, as the server hands it over (tests and the fuzzer call it
 * directly): the status, and in *reply the JSON to send (NULL for 204; a
 * {"fault_message"} for 4xx/5xx). A body over API_BODY_MAX is refused. */
int api_dispatch(struct api *a, const char *method, const char *url, const char *body,
		 size_t len, json_t **reply);
/* An API that serves no socket, for api_dispatch alone. */
struct api *api_new_detached(struct api_vm *vm);
/* Serve the connected socket @fd over HTTP without an event loop (the
 * fuzzer): api_poll answers what it has sent and says how many such
 * connections are still open. 0 or -errno. */
int api_serve_fd(struct api *a, int fd);
unsigned api_poll(struct api *a);

/* ---- for the endpoint files ---- */

/*
 * An endpoint: @method and @path ("/drives/" with @tail: the rest of the
 * path is the id, one segment unless @segments), with a JSON object body
 * when @body. The handler returns the HTTP status; >= 400 with the message in
 * err (sent as {"fault_message": ...}); 200 with *out set, or 204.
 */
struct api_route {
	const char *method;
	const char *path;
	bool tail;
	bool body;
	int (*fn)(struct api *a, const char *id, json_t *in, json_t **out, char *err, size_t errlen);
	bool segments;
};

/* The VM the API drives, and the API's Firecracker state. */
struct api_vm *api_vm(struct api *a);
struct fc_state *api_fc(struct api *a);
/* The loop the API serves on (NULL before api_listen or api_set_loop). */
struct event_loop *api_loop(struct api *a);
void api_set_loop(struct api *a, struct event_loop *ev);
/* fcsinks.c: PUT /logger, PUT /metrics, FlushMetrics. */
struct fc_sinks;
struct fc_sinks **api_sinks(struct api *a);
void fc_sinks_free(struct fc_sinks *s);
int fc_put_logger(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		  size_t errlen);
int fc_put_metrics(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		   size_t errlen);
/* Write one metrics line now: 204, or 4xx/5xx with err. */
int fc_flush_metrics(struct api *a, char *err, size_t errlen);

/* One field of a request object: its JSON type (JSON_TRUE: a boolean). */
struct api_field {
	const char *name;
	json_type type;
	bool required;
};
/* Check @obj's members against @f: unknown members, wrong types, missing
 * required ones. 0, or 400 with "WHAT: ..." in err. Handlers report with
 * errf (cnode.h): the HTTP status as its return value. */
int api_check(const json_t *obj, const struct api_field *f, unsigned n, const char *what,
	      char *err, size_t errlen);
/* firecracker.c: Firecracker's endpoints, and the state they build. */
extern const struct api_route fc_routes[];
extern const unsigned fc_n_routes;
struct fc_state *fc_new(void);
void fc_free(struct fc_state *s);
/* cubicle.c: cubicle's own endpoints. */
/* GET /metrics' text (Prometheus 0.0.4), malloc'd: 0 or -ENOMEM. */
int api_metrics_text(const struct api_vm *vm, char **text, size_t *len);
extern const struct api_route metrics_routes[];
extern const unsigned metrics_n_routes;
extern const struct api_route cub_routes[];
extern const unsigned cub_n_routes;
/* fcrate.c: Firecracker's RateLimiter objects. fc_rl_parse: @o (NULL or
 * null: no limit) into *@c, or 400 with "WHAT: ..." in err. fc_rl_patch:
 * set the limiter param @param of the running device @id from @o: 0 or 400. */
struct rl_cfg;
int fc_rl_parse(const json_t *o, const char *what, struct rl_cfg *c, char *err, size_t errlen);
int fc_rl_patch(struct api *a, const char *id, const char *param, const json_t *o,
		const char *what, char *err, size_t errlen);
/* @o (checked) as a config group @name in @parent: 0 or -ENOMEM. */
int fc_rl_group(struct arena *ar, const char *where, struct cnode *parent, const char *name,
		const json_t *o);
/* snapshot.c: PUT /snapshot/create, /snapshot/load (Firecracker's) and
 * /snapshot/rollback (cubicle's). */
extern const struct api_route snap_routes[];
extern const unsigned snap_n_routes;

#endif
