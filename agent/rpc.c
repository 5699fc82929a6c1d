/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connect RPC with the JSON codec over HTTP/1.1: unary calls (a JSON body
 * in, 200 + JSON or an HTTP error status + {"code","message"} out) and server
 * streams (envelopes: 1 flag byte, 4-byte big-endian length, JSON; the last
 * has flag 0x02 and holds {} or {"error": {...}}), and the method table.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "b64.h"
#include "http.h"

#define ENV_END 0x02
#define ENV_COMPRESSED 0x01

static const struct { const char *code; int status; } codes[] = {
	{ "canceled", 499 }, { "unknown", 500 }, { "invalid_argument", 400 },
	{ "deadline_exceeded", 504 }, { "not_found", 404 }, { "already_exists", 409 },
	{ "permission_denied", 403 }, { "resource_exhausted", 429 },
	{ "failed_precondition", 400 }, { "aborted", 409 }, { "out_of_range", 400 },
	{ "unimplemented", 501 }, { "internal", 500 }, { "unavailable", 503 },
	{ "data_loss", 500 }, { "unauthenticated", 401 },
};

/* Set while a request is dispatched: errors then end a stream instead. */
static bool dispatch_stream;

int rpc_http_status(const char *code)
{
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (!strcmp(codes[i].code, code))
			return codes[i].status;
	return 500;
}

const char *rpc_errno_code(int err)
{
	switch (err < 0 ? -err : err) {
	case ENOENT:
		return "not_found";
	case EEXIST:
	case ENOTEMPTY:
		return "already_exists";
	case EACCES:
	case EPERM:
	case EROFS:
		return "permission_denied";
	case EINVAL:
	case ENOTDIR:
	case EISDIR:
	case ENAMETOOLONG:
	case ELOOP:
	case EXDEV:
		return "invalid_argument";
	case ENOSPC:
	case EDQUOT:
	case ENOMEM:
	case EMFILE:
	case ENFILE:
		return "resource_exhausted";
	default:
		return "internal";
	}
}

void rpc_reply(struct conn *c, json_t *msg)
{
	http_reply_json(c, 200, msg ? msg : json_object());
}

static json_t *error_obj(const char *code, const char *message)
{
	return json_pack("{s:s,s:s}", "code", code, "message", message ? message : "");
}

void rpc_error(struct conn *c, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (dispatch_stream) {
		rpc_stream_begin(c);
		rpc_stream_end(c, code, msg);
		return;
	}
	http_reply_json(c, rpc_http_status(code), error_obj(code, msg));
}

void rpc_stream_begin(struct conn *c)
{
	http_begin(c, 200, "application/connect+json", -1);
}

static void envelope(struct conn *c, uint8_t flags, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	size_t len;
	char *buf;

	json_decref(msg);
	if (!s) {
		http_abort(c);
		return;
	}
	len = strlen(s);
	buf = malloc(len + 5);
	if (!buf) {
		free(s);
		http_abort(c);
		return;
	}
	buf[0] = (char)flags;
	buf[1] = (char)(len >> 24);
	buf[2] = (char)(len >> 16);
	buf[3] = (char)(len >> 8);
	buf[4] = (char)len;
	memcpy(buf + 5, s, len);
	http_write(c, buf, len + 5);
	free(buf);
	free(s);
}

void rpc_stream_msg(struct conn *c, json_t *msg)
{
	envelope(c, 0, msg);
}

void rpc_stream_end(struct conn *c, const char *code, const char *message)
{
	json_t *end = code ? json_pack("{s:o}", "error", error_obj(code, message)) : json_object();

	envelope(c, ENV_END, end);
	http_end(c);
}

int rpc_unwrap(const char *body, size_t len, const char **json, size_t *jlen)
{
	uint32_t n;

	if (len < 5)
		return -EINVAL;
	if (body[0] & ENV_COMPRESSED)
		return -ENOTSUP;
	n = (uint32_t)(unsigned char)body[1] << 24 | (uint32_t)(unsigned char)body[2] << 16 |
		(uint32_t)(unsigned char)body[3] << 8 | (unsigned char)body[4];
	if (n != len - 5)
		return -EINVAL;
	*json = body + 5;
	*jlen = n;
	return 0;
}

const char *json_cstr(const json_t *v)
{
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return NULL;
	return json_string_value(v);
}

int json_get_u64(const json_t *v, uint64_t *out)
{
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return -EINVAL;
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		char *end;
		unsigned long long x;

		if (!*s || *s == '-' || *s == '+' || *s == ' ')
			return -EINVAL;
		errno = 0;
		x = strtoull(s, &end, 10);
		if (errno || *end)
			return -EINVAL;
		*out = x;
		return 0;
	}
	return -EINVAL;
}

/* The user named by "Authorization: Basic base64(user:password)". */
static void auth_user(struct conn *c, char *out, size_t len)
{
	const char *a = http_header(c, "Authorization");
	char dec[B64_DEC_MAX(128) + 1];
	long n;
	char *colon;

	out[0] = 0;
	if (!a || strncasecmp(a, "Basic ", 6))
		return;
	a += 6;
	while (*a == ' ')
		a++;
	if (strlen(a) > 128)
		return;
	n = b64_decode(a, strlen(a), dec, sizeof(dec) - 1);
	if (n < 0)
		return;
	if (memchr(dec, 0, (size_t)n))
		return; /* a NUL inside the name */
	dec[n] = 0;
	colon = strchr(dec, ':');
	if (colon)
		*colon = 0;
	snprintf(out, len, "%s", dec);
}

static void header_num(struct conn *c, const char *name, uint64_t *out)
{
	const char *v = http_header(c, name);
	char *end;
	unsigned long long x;

	if (!v || !*v || strlen(v) > 12 || *v == '-' || *v == '+')
		return;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (!errno && !*end)
		*out = x;
}

void rpc_pace_init(struct conn *c, struct rpc_pace *p, uint64_t now)
{
	uint64_t ka = RPC_KEEPALIVE_S, timeout = 0;

	header_num(c, "Keepalive-Ping-Interval", &ka);
	header_num(c, "Connect-Timeout-Ms", &timeout);
	p->ka_ms = (ka < 1 ? 1 : ka > 3600 ? 3600 : ka) * 1000;
	p->next_ka = now + p->ka_ms;
	p->deadline = timeout ? now + timeout : 0;
}

enum rpc_pace_due rpc_pace_tick(struct rpc_pace *p, struct conn *c, uint64_t now)
{
	if (p->deadline && now >= p->deadline)
		return RPC_PACE_END;
	if (now < p->next_ka || !http_can_write(c))
		return RPC_PACE_NONE;
	p->next_ka = now + p->ka_ms;
	return RPC_PACE_KEEPALIVE;
}

typedef void rpc_fn(struct conn *c, json_t *req);
typedef void rpc_user_fn(struct conn *c, json_t *req, const struct user *u);

static const struct method {
	const char *path;
	bool stream;
	rpc_fn *fn;
	rpc_user_fn *ufn;
} methods[] = {
	{ "/process.Process/Start", true, NULL, proc_start },
	{ "/process.Process/Connect", true, proc_connect, NULL },
	{ "/process.Process/List", false, proc_list, NULL },
	{ "/process.Process/SendInput", false, proc_send_input, NULL },
	{ "/process.Process/SendSignal", false, proc_send_signal, NULL },
	{ "/process.Process/CloseStdin", false, proc_close_stdin, NULL },
	{ "/process.Process/Update", false, proc_update, NULL },
	{ "/filesystem.Filesystem/Stat", false, NULL, fs_stat },
	{ "/filesystem.Filesystem/ListDir", false, NULL, fs_list_dir },
	{ "/filesystem.Filesystem/MakeDir", false, NULL, fs_make_dir },
	{ "/filesystem.Filesystem/Move", false, NULL, fs_move },
	{ "/filesystem.Filesystem/Remove", false, NULL, fs_remove },
	{ "/filesystem.Filesystem/WatchDir", true, NULL, fs_watch_dir },
	{ "/filesystem.Filesystem/CreateWatcher", false, NULL, fs_create_watcher },
	{ "/filesystem.Filesystem/GetWatcherEvents", false, fs_get_watcher_events, NULL },
	{ "/filesystem.Filesystem/RemoveWatcher", false, fs_remove_watcher, NULL },
};

void rpc_dispatch(struct conn *c, const char *path, const char *body, size_t len, bool stream)
{
	const struct method *m = NULL;
	const char *json = body;
	size_t jlen = len;
	json_error_t jerr;
	json_t *req;
	char uname[128];
	struct user u;

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (!strcmp(methods[i].path, path))
			m = &methods[i];
	dispatch_stream = false;
	if (!m) {
		rpc_error(c, "unimplemented", "%s is not implemented", path);
		return;
	}
	if (m->stream != stream) {
		http_reply_json(c, 415, error_obj("invalid_argument", m->stream ?
				"a server-streaming method wants Content-Type application/connect+json" :
				"a unary method wants Content-Type application/json"));
		return;
	}
	dispatch_stream = stream;
	if (stream) {
		int rc = rpc_unwrap(body, len, &json, &jlen);
		if (rc) {
			rpc_error(c, rc == -ENOTSUP ? "unimplemented" : "invalid_argument",
					rc == -ENOTSUP ? "compressed messages are not supported" :
					"the request is not one Connect envelope");
			goto out;
		}
	}
	req = json_loadb(jlen ? json : "{}", jlen ? jlen : 2, JSON_REJECT_DUPLICATES, &jerr);
	if (!req || !json_is_object(req)) {
		rpc_error(c, "invalid_argument", "bad JSON request: %s", req ? "not an object" : jerr.text);
		json_decref(req);
		goto out;
	}
	if (m->ufn) {
		auth_user(c, uname, sizeof(uname));
		user_resolve(uname, &u);
		m->ufn(c, req, &u);
	} else {
		m->fn(c, req);
	}
	json_decref(req);
out:
	dispatch_stream = false;
}
