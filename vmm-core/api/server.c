/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control API's HTTP side: libmicrohttpd in external-event-loop mode
 * (its epoll set watched by cubicle's event loop, so every request is
 * served on the loop thread and never on a vCPU), jansson for the bodies,
 * a route table per endpoint file. Errors are Firecracker's
 * {"fault_message": "..."}; the socket is created here (mode 0600) and
 * handed to libmicrohttpd.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include "api.h"
#include "cnode.h"
#include "event.h"
#include "log.h"

#define API_CONN_MAX 64
#define API_CONN_TIMEOUT_S 30

struct api {
	struct MHD_Daemon *d;
	struct event_loop *ev;
	struct api_vm *vm;
	struct fc_state *fc;
	int lfd, efd, tfd;
	char *path;
};

/* One request being read: its body so far. */
struct api_req {
	char *body;
	size_t len;
	bool too_big;
};

/*
 * libmicrohttpd is loaded when an API is first opened, not linked: it
 * brings GnuTLS and its friends (about 2.7 MiB of resident memory and a
 * dozen libraries to map at every start), which a VM without --api-sock
 * must not pay for. These are the calls the server makes.
 */
static struct {
	struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
					  MHD_AccessHandlerCallback, void *, ...);
	void (*stop_daemon)(struct MHD_Daemon *);
	enum MHD_Result (*run)(struct MHD_Daemon *);
	const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *, enum MHD_DaemonInfoType,
						       ...);
	struct MHD_Response *(*create_response_from_buffer)(size_t, void *, enum MHD_ResponseMemoryMode);
	enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
	enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int,
					  struct MHD_Response *);
	void (*destroy_response)(struct MHD_Response *);
} mhd;

static int mhd_load(char *err, size_t errlen)
{
	static const char *const names[] = { "libmicrohttpd.so.12", "libmicrohttpd.so" };
	void *dl = NULL;

	if (mhd.run)
		return 0;
	for (unsigned i = 0; !dl && i < sizeof(names) / sizeof(names[0]); i++)
		dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!dl)
		return errf(err, errlen, -ENOENT,
				"the control API needs libmicrohttpd (apt-get install libmicrohttpd12): %s",
				dlerror());
#define SYM(field, name)                                                              \
	if (!(*(void **)&mhd.field = dlsym(dl, name))) {                              \
		memset(&mhd, 0, sizeof(mhd));                                         \
		return errf(err, errlen, -ENOENT, "libmicrohttpd has no %s", name); \
	}
	SYM(start_daemon, "MHD_start_daemon")
	SYM(stop_daemon, "MHD_stop_daemon")
	SYM(get_daemon_info, "MHD_get_daemon_info")
	SYM(create_response_from_buffer, "MHD_create_response_from_buffer")
	SYM(add_response_header, "MHD_add_response_header")
	SYM(queue_response, "MHD_queue_response")
	SYM(destroy_response, "MHD_destroy_response")
	SYM(run, "MHD_run")
#undef SYM
	return 0; /* kept loaded for the life of the process */
}

struct api_vm *api_vm(struct api *a)
{
	return a->vm;
}

struct fc_state *api_fc(struct api *a)
{
	return a->fc;
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

/* ---- responses ---- */

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, json_t *body)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = mhd.create_response_from_buffer(text ? strlen(text) : 0, text ? text : (char *)"",
					    MHD_RESPMEM_MUST_COPY);
	free(text);
	if (!r)
		return MHD_NO;
	if (body)
		mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	ret = mhd.queue_response(c, status, r);
	mhd.destroy_response(r);
	return ret;
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
	} tables[] = { { fc_routes, &fc_n_routes }, { cub_routes, &cub_n_routes } };

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

static enum MHD_Result serve(struct api *a, struct MHD_Connection *c, const char *method,
			     const char *url, struct api_req *q)
{
	json_t *out;
	int status = api_dispatch(a, method, url, q->body, q->too_big ? API_BODY_MAX + 1 : q->len,
				  &out);
	enum MHD_Result ret = respond(c, (unsigned)status, out);

	json_decref(out);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *size, void **con_cls)
{
	struct api_req *q = *con_cls;

	(void)version;
	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q)
			return MHD_NO;
		*con_cls = q;
		return MHD_YES;
	}
	if (*size) {
		if (q->too_big || q->len + *size > API_BODY_MAX) {
			q->too_big = true;
		} else {
			char *b = realloc(q->body, q->len + *size);

			if (!b)
				return MHD_NO;
			memcpy(b + q->len, data, *size);
			q->body = b;
			q->len += *size;
		}
		*size = 0;
		return MHD_YES;
	}
	return serve(cls, c, method, url, q);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
		    enum MHD_RequestTerminationCode why)
{
	struct api_req *q = *con_cls;

	(void)cls, (void)c, (void)why;
	if (q) {
		free(q->body);
		free(q);
		*con_cls = NULL;
	}
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_debug("api: libmicrohttpd: %s", line);
}

static void on_ready(void *arg)
{
	struct api *a = arg;

	mhd.run(a->d);
}

/* Once a second: libmicrohttpd closes idle connections only when run. */
static void on_tick(void *arg)
{
	struct api *a = arg;
	uint64_t n;

	if (read(a->tfd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_debug("api: timer: %s", strerror(errno));
	mhd.run(a->d);
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
	a->efd = a->tfd = a->lfd = -1;
	a->fc = fc_new();
	if (!a->fc) {
		free(a);
		return NULL;
	}
	return a;
}

int api_open(struct api **out, const char *path, struct event_loop *ev, struct api_vm *vm,
	     char *err, size_t errlen)
{
	struct itimerspec tick = { { 1, 0 }, { 1, 0 } };
	const union MHD_DaemonInfo *info;
	struct api *a;
	int ret = mhd_load(err, errlen);

	if (ret)
		return ret;
	a = calloc(1, sizeof(*a));
	if (!a)
		return errf(err, errlen, -ENOMEM, "API: out of memory");
	a->ev = ev;
	a->vm = vm;
	a->efd = a->tfd = a->lfd = -1;
	a->path = strdup(path);
	a->fc = fc_new();
	if (!a->path || !a->fc) {
		api_close(a);
		return errf(err, errlen, -ENOMEM, "API: out of memory");
	}
	a->lfd = listen_unix(path, err, errlen);
	if (a->lfd < 0) {
		ret = a->lfd;
		free(a->path);
		a->path = NULL; /* not ours to unlink */
		api_close(a);
		return ret;
	}
	a->d = mhd.start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, a,
				MHD_OPTION_LISTEN_SOCKET, a->lfd,
				MHD_OPTION_NOTIFY_COMPLETED, on_done, a,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)API_CONN_MAX,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)API_CONN_TIMEOUT_S,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)API_HEADER_MAX,
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, a, MHD_OPTION_END);
	info = a->d ? mhd.get_daemon_info(a->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
	if (!info) {
		api_close(a);
		return errf(err, errlen, -EIO, "API socket %s: libmicrohttpd did not start",
				path);
	}
	a->efd = info->epoll_fd;
	a->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (a->tfd < 0 || timerfd_settime(a->tfd, 0, &tick, NULL)) {
		ret = -errno;
		api_close(a);
		return errf(err, errlen, ret, "API timer: %s", strerror(-ret));
	}
	ret = event_watch_control(ev, a->efd, EPOLLIN, on_ready, a);
	if (!ret)
		ret = event_watch_control(ev, a->tfd, EPOLLIN, on_tick, a);
	if (ret) {
		api_close(a);
		return errf(err, errlen, ret, "API: cannot watch its sockets: %s",
				strerror(-ret));
	}
	log_info("API listening on %s", path);
	*out = a;
	return 0;
}

void api_close(struct api *a)
{
	if (!a)
		return;
	if (a->efd >= 0 && a->ev)
		event_unwatch(a->ev, a->efd);
	if (a->tfd >= 0) {
		if (a->ev)
			event_unwatch(a->ev, a->tfd);
		close(a->tfd);
	}
	if (a->d)
		mhd.stop_daemon(a->d); /* closes the listening socket too */
	else if (a->lfd >= 0)
		close(a->lfd);
	if (a->path)
		unlink(a->path);
	free(a->path);
	fc_free(a->fc);
	free(a);
}
