/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Firecracker's log and metrics sinks: PUT /logger sends cubicle's log
 * (standard error) to a file or named pipe at a level; PUT /metrics names
 * a file or named pipe that gets one JSON line of metrics on every
 * FlushMetrics action and once a minute (as Firecracker does). The metrics
 * are GET /metrics' series, as an object keyed by series.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "confine.h"
#include "cnode.h"
#include "event.h"
#include "log.h"
#include "promjson.h"

#define FLUSH_PERIOD_S 60

struct fc_sinks {
	bool logger;     /* PUT /logger done */
	int metrics_fd;  /* PUT /metrics done when >= 0 */
	bool emit_id;
	json_t *props;
	int tfd;
	struct event_loop *ev;
	struct api *a;
	unsigned long lost; /* lines a full pipe refused */
};

static struct fc_sinks *sinks(struct api *a)
{
	struct fc_sinks **sp = api_sinks(a), *s = *sp;

	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		s->metrics_fd = s->tfd = -1;
		s->a = a;
		*sp = s;
	}
	return s;
}

void fc_sinks_free(struct fc_sinks *s)
{
	if (!s)
		return;
	if (s->tfd >= 0) {
		if (s->ev)
			event_unwatch(s->ev, s->tfd);
		close(s->tfd);
	}
	if (s->metrics_fd >= 0)
		close(s->metrics_fd);
	json_decref(s->props);
	free(s);
}

/* Open a sink: a regular file (created 0600, appended to) or a named pipe
 * with a reader; the fd, or -1 with a 400 message in err. Writes block,
 * but on a pipe with @keep_nonblock. */
static int open_sink(const char *path, const char *what, bool keep_nonblock, char *err,
		     size_t errlen)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0600);
	struct stat st;

	if (fd < 0) {
		errf(err, errlen, 400, "%s: %s: %s%s", what, path, strerror(errno),
		     errno == ENXIO ? " (a named pipe needs its reader first)" : confine_hint(errno));
		return -1;
	}
	if (fstat(fd, &st) || (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))) {
		close(fd);
		errf(err, errlen, 400, "%s: %s is not a file or a named pipe", what, path);
		return -1;
	}
	if (!(keep_nonblock && S_ISFIFO(st.st_mode)))
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* ---- PUT /logger ---- */

int fc_put_logger(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		  size_t errlen)
{
	static const struct api_field f[] = {
		{ "level", JSON_STRING, false },     { "log_path", JSON_STRING, false },
		{ "show_level", JSON_TRUE, false },  { "show_log_origin", JSON_TRUE, false },
		{ "module", JSON_STRING, false },
	};
	static const struct {
		const char *name;
		int level;
	} levels[] = { { "Error", CUB_LOG_ERR },  { "Warning", CUB_LOG_WARN },
		       { "Info", CUB_LOG_INFO },  { "Debug", CUB_LOG_DEBUG },
		       { "Trace", CUB_LOG_DEBUG }, { "Off", CUB_LOG_ERR - 1 } };
	struct fc_sinks *s = sinks(a);
	json_t *v;
	int ret = api_check(in, f, sizeof(f) / sizeof(f[0]), "logger", err, errlen);
	int level = CUB_LOG_INFO, fd = -1;

	(void)id, (void)out;
	if (ret)
		return ret;
	if (!s)
		return errf(err, errlen, 500, "out of memory");
	if (s->logger)
		return errf(err, errlen, 400, "logger: the logger is already configured");
	if ((v = json_object_get(in, "level"))) {
		unsigned i;

		for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
			if (!strcasecmp(json_string_value(v), levels[i].name))
				break;
		if (i == sizeof(levels) / sizeof(levels[0]))
			return errf(err, errlen, 400,
					"logger: 'level' is \"%s\"; expected Error, Warning, Info, Debug, Trace or Off",
					json_string_value(v));
		level = levels[i].level;
	}
	if (json_is_true(json_object_get(in, "show_log_origin")))
		return errf(err, errlen, 400,
				"logger: cubicle's log lines carry no source locations; 'show_log_origin' must be false");
	if ((v = json_object_get(in, "module")) && *json_string_value(v))
		return errf(err, errlen, 400,
				"logger: cubicle's log has no Rust modules to filter by; leave 'module' out");
	if ((v = json_object_get(in, "log_path"))) {
		fd = open_sink(json_string_value(v), "logger", false, err, errlen);
		if (fd < 0)
			return 400;
		fflush(stderr);
		if (dup2(fd, STDERR_FILENO) < 0) {
			ret = errno;
			close(fd);
			return errf(err, errlen, 500, "logger: %s", strerror(ret));
		}
		close(fd);
		log_set_timestamps(true); /* a file or a pipe, never a terminal */
	}
	log_set_level(level);
	log_set_show_level(json_is_true(json_object_get(in, "show_level")));
	s->logger = true;
	return 204;
}

/* ---- PUT /metrics and FlushMetrics ---- */

int fc_flush_metrics(struct api *a, char *err, size_t errlen)
{
	struct fc_sinks *s = *api_sinks(a);
	const struct api_vm *vm = api_vm(a);
	char *text = NULL, *out;
	size_t len = 0, n;
	struct timespec now;
	json_t *obj, *series;
	ssize_t w;

	if (!s || s->metrics_fd < 0)
		return errf(err, errlen, 400, "FlushMetrics: no metrics file (PUT /metrics first)");
	if (api_metrics_text(vm, &text, &len))
		return errf(err, errlen, 500, "out of memory");
	clock_gettime(CLOCK_REALTIME, &now);
	series = prom_to_json(text);
	free(text);
	if (!series)
		return errf(err, errlen, 500, "out of memory");
	obj = json_pack("{s:I,s:o}", "utc_timestamp_ms",
			(json_int_t)now.tv_sec * 1000 + now.tv_nsec / 1000000, "cubicle", series);
	if (obj && s->emit_id)
		json_object_set_new(obj, "id", json_string(vm->id ? vm->id : "anonymous-instance"));
	if (obj && s->props)
		json_object_set(obj, "properties", s->props);
	out = obj ? json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
	json_decref(obj);
	if (!out)
		return errf(err, errlen, 500, "out of memory");
	n = strlen(out);
	out[n] = '\n'; /* the NUL goes: write n + 1 bytes */
	w = write(s->metrics_fd, out, n + 1);
	free(out);
	if (w < 0 && errno == EAGAIN) {
		/* A pipe whose reader is behind: the line is dropped, not queued. */
		if (!s->lost++)
			log_warn("metrics: the pipe is full; lines are dropped until it drains");
		return 204;
	}
	if (w < 0)
		return errf(err, errlen, 400, "FlushMetrics: %s", strerror(errno));
	return 204;
}

static void on_period(void *arg)
{
	struct fc_sinks *s = arg;
	uint64_t n;
	char err[256];

	if (read(s->tfd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	if (fc_flush_metrics(s->a, err, sizeof(err)) >= 400)
		log_warn("metrics: %s", err);
}

int fc_put_metrics(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		   size_t errlen)
{
	static const struct api_field f[] = {
		{ "metrics_path", JSON_STRING, true },
		{ "emit_id", JSON_TRUE, false },
		{ "properties", JSON_OBJECT, false },
	};
	struct fc_sinks *s = sinks(a);
	struct event_loop *ev = api_loop(a);
	json_t *props = json_object_get(in, "properties"), *v;
	const char *key;
	int ret = api_check(in, f, sizeof(f) / sizeof(f[0]), "metrics", err, errlen), fd;

	(void)id, (void)out;
	if (ret)
		return ret;
	if (!s)
		return errf(err, errlen, 500, "out of memory");
	if (s->metrics_fd >= 0)
		return errf(err, errlen, 400, "metrics: the metrics system is already initialized");
	json_object_foreach(props, key, v)
		if (!json_is_string(v))
			return errf(err, errlen, 400, "metrics: properties.%s must be a string", key);
	fd = open_sink(json_string_value(json_object_get(in, "metrics_path")), "metrics", true,
		       err, errlen);
	if (fd < 0)
		return 400;
	if (ev) {
		struct itimerspec period = { { FLUSH_PERIOD_S, 0 }, { FLUSH_PERIOD_S, 0 } };

		s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (s->tfd < 0 || timerfd_settime(s->tfd, 0, &period, NULL) ||
		    event_watch_control(ev, s->tfd, EPOLLIN, on_period, s)) {
			ret = errno;
			if (s->tfd >= 0)
				close(s->tfd);
			s->tfd = -1;
			close(fd);
			return errf(err, errlen, 500, "metrics: timer: %s", strerror(ret));
		}
		s->ev = ev;
	}
	s->metrics_fd = fd;
	s->emit_id = json_is_true(json_object_get(in, "emit_id"));
	s->props = json_incref(props);
	return 204;
}
