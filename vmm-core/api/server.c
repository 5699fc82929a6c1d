/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control API's HTTP side: http.c's server on cubicle's event loop (so
 * every request is served on the loop thread and never on a vCPU), jansson
 * for the bodies, a route table per endpoint file. Errors are Firecracker's
 * {"fault_message": "..."}; the socket is created here (mode 0600).
 *
 * Why not libmicrohttpd: Debian's links GnuTLS, which alone adds about
 * 2.8 MiB of resident memory to a VMM that serves an API; http-parser and
 * the connection code of http.c add tens of KiB.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api.h"
#include "cnode.h"
#include "event.h"
#include "http.h"
#include "log.h"

#define API_CONN_MAX 64
#define API_CONN_TIMEOUT_S 30

struct api {
	struct http_server *http;
	struct fc_sinks *sinks;
	struct event_loop *ev;
	struct api_vm *vm;
	struct fc_state *fc;
	char *path;
};

struct api_vm *api_vm(struct api *a)
{
	return a->vm;
}

struct fc_state *api_fc(struct api *a)
{
	return a->fc;
}

struct fc_sinks **api_sinks(struct api *a)
{
	return &a->sinks;
}

struct event_loop *api_loop(struct api *a)
{
	return a->ev;
}

void api_set_loop(struct api *a, struct event_loop *ev)
{
	a->ev = ev;
}

static const char *type_name(json_type t)
{
	switch (t) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	}
	return "a value";
}

int api_check(const json_t *obj, const struct api_field *f, unsigned n, const char *what,
	      char *err, size_t errlen)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)obj, key, v) {
		unsigned i;
		json_type t = json_typeof(v);

		for (i = 0; i < n && strcmp(f[i].name, key); i++)
			;
		if (i == n) {
			char list[512] = "";
			size_t o = 0;

			for (unsigned k = 0; k < n && o < sizeof(list); k++)
				o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", k ? ", " : "",
						      f[k].name);
			return errf(err, errlen, 400, "%s: unknown field '%s'; expected one of %s",
					what, key, list);
		}
		if (t == JSON_FALSE)
			t = JSON_TRUE;
		if (t != f[i].type)
			return errf(err, errlen, 400, "%s: '%s' must be %s, not %s", what, key,
					type_name(f[i].type), type_name(json_typeof(v)));
	}
	for (unsigned i = 0; i < n; i++)
		if (f[i].required && !json_object_get(obj, f[i].name))
			return errf(err, errlen, 400, "%s: missing required field '%s'", what,
					f[i].name);
	return 0;
}

/* ---- routing ---- */

/* The route for method and url: *id is the tail segment; *path_ok tells
 * whether the path exists with another method. */
static const struct api_route *find(const char *method, const char *url, const char **id,
				    bool *path_ok)
{
	static const struct {
		const struct api_route *r;
		const unsigned *n;
	} tables[] = { { fc_routes, &fc_n_routes },
		       { cub_routes, &cub_n_routes },
		       { metrics_routes, &metrics_n_routes },
		       { snap_routes, &snap_n_routes } };

	*path_ok = false;
	for (unsigned t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (unsigned i = 0; i < *tables[t].n; i++) {
			const struct api_route *r = &tables[t].r[i];
			size_t pl = strlen(r->path);

			if (r->tail) {
				if (strncmp(url, r->path, pl) || !url[pl])
					continue;
				*id = url + pl;
			} else {
				if (strcmp(url, r->path))
					continue;
				*id = NULL;
			}
			*path_ok = true;
			if (!strcmp(method, r->method))
				return r;
		}
	return NULL;
}

int api_dispatch(struct api *a, const char *method, const char *url, const char *body,
		 size_t len, json_t **reply)
{
	const struct api_route *r;
	const char *id = NULL;
	json_t *in = NULL, *out = NULL, *m;
	char err[1024] = "";
	bool path_ok;
	int status;

	*reply = NULL;
	if (len > API_BODY_MAX)
		status = errf(err, sizeof(err), 413,
				  "the request body is larger than the limit of %u bytes", API_BODY_MAX);
	else if (!(r = find(method, url, &id, &path_ok)))
		/* Firecracker's answer, for an unknown path and a wrong method alike. */
		status = errf(err, sizeof(err), 400, "Invalid request method and/or path: %s %s",
				  method, url);
	else if (id && (!*id || (!r->segments && strchr(id, '/')) || strlen(id) > 200))
		status = errf(err, sizeof(err), 400,
				  "%s %s: the id must be one path segment of 1 to 200 bytes", method, url);
	else if (r->body && !len)
		status = errf(err, sizeof(err), 400, "%s %s needs a JSON body", method, url);
	else if (!r->body && len)
		status = errf(err, sizeof(err), 400, "%s %s takes no body", method, url);
	else {
		json_error_t je;

		status = 0;
		if (r->body) {
			in = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
			if (!in)
				status = errf(err, sizeof(err), 400,
						  "the body is not valid JSON: %s (line %d, column %d)",
						  je.text, je.line, je.column);
			else if (!json_is_object(in))
				status = errf(err, sizeof(err), 400, "the body must be a JSON object");
		}
		if (!status)
			status = r->fn(a, id, in, &out, err, sizeof(err));
		json_decref(in);
	}
	if (status >= 400) {
		json_decref(out);
		log_debug("api: %s %s: %d %s", method, url, status, err);
		/* The message may quote what the client sent: keep it valid UTF-8. */
		m = json_string(err);
		if (!m) {
			for (char *p = err; *p; p++)
				if ((unsigned char)*p >= 0x80 || (unsigned char)*p < 0x20)
					*p = '?';
			m = json_string(err);
		}
		*reply = m ? json_pack("{s:o}", "fault_message", m) : NULL;
		return status;
	}
	log_debug("api: %s %s: %d", method, url, status);
	if (status == 204)
		json_decref(out);
	else
		*reply = out;
	return status;
}

/* A request from the HTTP layer: the reply is Firecracker's JSON. */
static void on_http(void *arg, struct http_conn *c, const struct http_request *r)
{
	struct api *a = arg;
	json_t *out = NULL;
	char *text;
	int status;

	if (r->error) {
		char msg[300];

		log_debug("api: malformed request: %u %s", r->error, r->why);
		if (r->error == 413)
			snprintf(msg, sizeof(msg),
				 "the request body is larger than the limit of %u bytes", API_BODY_MAX);
		else if (r->error == 431)
			snprintf(msg, sizeof(msg),
				 "the request line and headers are larger than the limit of %u bytes",
				 API_HEADER_MAX);
		else
			snprintf(msg, sizeof(msg), "malformed HTTP request: %s", r->why);
		status = (int)r->error;
		out = json_pack("{s:s}", "fault_message", msg);
	} else {
		status = api_dispatch(a, r->method, r->url, r->body, r->len, &out);
	}
	if (json_is_string(out)) {
		/* A route answering a string answers text (GET /metrics). */
		http_respond(c, (unsigned)status, "text/plain; version=0.0.4; charset=utf-8",
			     json_string_value(out), json_string_length(out));
		json_decref(out);
		return;
	}
	text = out ? json_dumps(out, JSON_COMPACT) : NULL;
	json_decref(out);
	http_respond(c, (unsigned)status, text ? "application/json" : NULL, text,
		     text ? strlen(text) : 0);
	free(text);
}

/* ---- the socket ---- */

static int listen_unix(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return errf(err, errlen, -ENAMETOOLONG,
				"API socket %s: the path is longer than %zu bytes", path,
				sizeof(sa.sun_path) - 1);
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return errf(err, errlen, -errno, "API socket: %s", strerror(errno));
	if (!lstat(path, &st)) {
		/* Replace a stale socket; never a live one, nor anything else. */
		if (!S_ISSOCK(st.st_mode)) {
			close(fd);
			return errf(err, errlen, -EEXIST,
					"API socket %s: the path exists and is not a socket", path);
		}
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)) || errno == EAGAIN) {
			close(fd);
			return errf(err, errlen, -EADDRINUSE,
					"API socket %s: another process is listening there", path);
		}
		close(fd);
		unlink(path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return errf(err, errlen, -errno, "API socket: %s", strerror(errno));
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || chmod(path, 0600) ||
	    listen(fd, API_CONN_MAX)) {
		int e = errno;

		close(fd);
		return errf(err, errlen, -e, "API socket %s: %s", path, strerror(e));
	}
	return fd;
}

struct api *api_new_detached(struct api_vm *vm)
{
	struct api *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->vm = vm;
	a->fc = fc_new();
	if (!a->fc) {
		free(a);
		return NULL;
	}
	return a;
}

int api_serve_fd(struct api *a, int fd)
{
	char err[256];
	int ret;

	if (!a->http) {
		static const struct http_limits lim = { API_HEADER_MAX, API_BODY_MAX, API_CONN_MAX,
							API_CONN_TIMEOUT_S };

		ret = http_server_new(&a->http, NULL, -1, &lim, on_http, a, err, sizeof(err));
		if (ret)
			return ret;
	}
	return http_server_adopt(a->http, fd);
}

unsigned api_poll(struct api *a)
{
	return a->http ? http_server_poll(a->http) : 0;
}

int api_listen(struct api *a, const char *path, struct event_loop *ev, char *err, size_t errlen)
{
	static const struct http_limits lim = { API_HEADER_MAX, API_BODY_MAX, API_CONN_MAX,
						API_CONN_TIMEOUT_S };
	int lfd, ret = http_load(err, errlen);

	if (ret)
		return ret;
	if (a->http)
		return errf(err, errlen, -EALREADY, "API: already serving");
	lfd = listen_unix(path, err, errlen);
	if (lfd < 0)
		return lfd;
	a->ev = ev;
	a->path = strdup(path);
	ret = a->path ? http_server_new(&a->http, ev, lfd, &lim, on_http, a, err, errlen)
		      : errf(err, errlen, -ENOMEM, "API: out of memory");
	if (ret) {
		close(lfd);
		unlink(path);
		free(a->path);
		a->path = NULL;
		return ret;
	}
	log_info("API listening on %s", path);
	return 0;
}

int api_open(struct api **out, const char *path, struct event_loop *ev, struct api_vm *vm,
	     char *err, size_t errlen)
{
	struct api *a = api_new_detached(vm);
	int ret;

	if (!a)
		return errf(err, errlen, -ENOMEM, "API: out of memory");
	ret = api_listen(a, path, ev, err, errlen);
	if (ret) {
		api_close(a);
		return ret;
	}
	*out = a;
	return 0;
}

void api_close(struct api *a)
{
	if (!a)
		return;
	http_server_free(a->http);
	fc_sinks_free(a->sinks);
	if (a->path)
		unlink(a->path);
	free(a->path);
	fc_free(a->fc);
	free(a);
}
