/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for cubicle-agent's request parsing, with the agent's own
 * units compiled in: agent/http.c (HTTP framing over a real socket, driven by
 * a fake event loop), agent/rpc.c (Connect envelopes, JSON requests, the
 * method table, with stub methods), agent/multipart.c and agent/b64.c.
 * The first input byte picks the target:
 *   0: raw HTTP bytes (requests, pipelined, chunked, cut short) to a connection
 *   1: a multipart body under a boundary: fed whole and in small pieces,
 *      which must give the same parts and bytes
 *   2: base64: decoding is strict and stable, encode/decode round-trips
 *   3: a Connect request body (envelope + JSON) through rpc_dispatch
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"
#include "b64.h"
#include "http.h"
#include "multipart.h"
#include "seed.h"

/* ---- a fake event loop: the harness calls the callbacks itself ---- */
#define NW 8
static struct watch *watches[NW];
struct dfr {
	void (*fn)(void *);
	void *arg;
};
static struct dfr dq[4096];
static size_t dn;

int loop_add(struct watch *w, int fd, uint32_t events, void (*cb)(struct watch *, uint32_t))
{
	w->fd = fd;
	w->events = events;
	w->cb = cb;
	for (int i = 0; i < NW; i++)
		if (!watches[i]) {
			watches[i] = w;
			return 0;
		}
	return -ENOSPC;
}

int loop_mod(struct watch *w, uint32_t events)
{
	w->events = events;
	return 0;
}

void loop_del(struct watch *w)
{
	for (int i = 0; i < NW; i++)
		if (watches[i] == w)
			watches[i] = NULL;
}

void loop_defer(void (*fn)(void *), void *arg)
{
	if (dn == sizeof(dq) / sizeof(dq[0]))
		abort(); /* would be a runaway */
	dq[dn].fn = fn;
	dq[dn].arg = arg;
	dn++;
}

static void run_deferred(void)
{
	for (size_t i = 0; i < dn; i++)
		dq[i].fn(dq[i].arg);
	dn = 0;
}

uint64_t now_ms(void)
{
	return 0;
}

/* ---- stubs for what rpc.c calls ---- */
void user_resolve(const char *name, struct user *u)
{
	memset(u, 0, sizeof(*u));
	snprintf(u->name, sizeof(u->name), "%s", name && *name ? name : "root");
	snprintf(u->home, sizeof(u->home), "/root");
}

static void selector(struct conn *c, json_t *req)
{
	json_t *sel = json_object_get(req, "process");
	uint64_t pid;

	if (json_object_get(sel, "pid") && json_get_u64(json_object_get(sel, "pid"), &pid)) {
		rpc_error(c, "invalid_argument", "bad pid");
		return;
	}
	rpc_reply(c, json_pack("{s:s}", "seen", json_is_object(sel) ? "selector" : "none"));
}

void proc_start(struct conn *c, json_t *req, const struct user *u)
{
	const char *cmd = json_string_value(json_object_get(json_object_get(req, "process"), "cmd"));

	if (!cmd) {
		rpc_error(c, "invalid_argument", "process.cmd is required");
		return;
	}
	rpc_stream_begin(c);
	rpc_stream_msg(c, json_pack("{s:{s:{s:i}}}", "event", "start", "pid", 1));
	rpc_stream_msg(c, json_pack("{s:{s:{s:s}}}", "event", "data", "stdout", cmd));
	rpc_stream_end(c, NULL, NULL);
}

void proc_connect(struct conn *c, json_t *req)
{
	rpc_error(c, "not_found", "no process");
}

void proc_list(struct conn *c, json_t *req)
{
	rpc_reply(c, json_pack("{s:[]}", "processes"));
}

void proc_send_input(struct conn *c, json_t *req)
{
	json_t *d = json_object_get(json_object_get(req, "input"), "stdin");
	char *buf;
	long n;

	if (!json_is_string(d)) {
		selector(c, req);
		return;
	}
	buf = malloc(B64_DEC_MAX(json_string_length(d)) + 1);
	n = buf ? b64_decode(json_string_value(d), json_string_length(d), buf,
				   B64_DEC_MAX(json_string_length(d))) : -1;
	free(buf);
	if (n < 0)
		rpc_error(c, "invalid_argument", "input is not base64");
	else
		rpc_reply(c, NULL);
}

void proc_send_signal(struct conn *c, json_t *req)
{
	selector(c, req);
}

void proc_close_stdin(struct conn *c, json_t *req)
{
	selector(c, req);
}

void proc_update(struct conn *c, json_t *req)
{
	selector(c, req);
}

static void fs_any(struct conn *c, json_t *req, const struct user *u)
{
	const char *p = json_string_value(json_object_get(req, "path"));
	char out[256];

	if (!p) {
		rpc_error(c, "invalid_argument", "path is required");
		return;
	}
	snprintf(out, sizeof(out), "%s/%s", u->home, p);
	rpc_reply(c, json_pack("{s:{s:s}}", "entry", "path", out));
}

void fs_stat(struct conn *c, json_t *req, const struct user *u) { fs_any(c, req, u); }
void fs_list_dir(struct conn *c, json_t *req, const struct user *u) { fs_any(c, req, u); }
void fs_make_dir(struct conn *c, json_t *req, const struct user *u) { fs_any(c, req, u); }
void fs_move(struct conn *c, json_t *req, const struct user *u) { fs_any(c, req, u); }
void fs_remove(struct conn *c, json_t *req, const struct user *u) { fs_any(c, req, u); }
void fs_create_watcher(struct conn *c, json_t *req, const struct user *u) { fs_any(c, req, u); }

void fs_watch_dir(struct conn *c, json_t *req, const struct user *u)
{
	if (!json_string_value(json_object_get(req, "path"))) {
		rpc_error(c, "invalid_argument", "path is required");
		return;
	}
	rpc_stream_begin(c);
	rpc_stream_msg(c, json_pack("{s:{}}", "start"));
	rpc_stream_end(c, NULL, NULL);
	(void)u;
}

static void watcher_any(struct conn *c, json_t *req)
{
	if (!json_string_value(json_object_get(req, "watcherId")))
		rpc_error(c, "invalid_argument", "watcherId is required");
	else
		rpc_reply(c, json_pack("{s:[]}", "events"));
}

void fs_get_watcher_events(struct conn *c, json_t *req) { watcher_any(c, req); }
void fs_remove_watcher(struct conn *c, json_t *req) { watcher_any(c, req); }

/* ---- routing as main.c does, with uploads parsed and dropped ---- */
struct up {
	struct multipart mp;
	bool mpart;
};

static int nop_part(void *arg, const char *name, const char *filename) { return 0; }
static int nop_data(void *arg, const char *d, size_t len) { return 0; }
static int nop_end(void *arg) { return 0; }
static const struct mp_ops nop_ops = { .part = nop_part, .data = nop_data, .end = nop_end };

static int up_body(struct conn *c, const char *d, size_t len)
{
	struct up *u = http_ctx(c);

	if (u->mpart && mp_feed(&u->mp, d, len)) {
		http_reply(c, 400, "text/plain", "bad\n", 4);
		return -1;
	}
	return 0;
}

static void up_complete(struct conn *c)
{
	struct up *u = http_ctx(c);

	if (u->mpart && mp_finish(&u->mp))
		http_reply(c, 400, "text/plain", "bad\n", 4);
	else
		http_reply_json(c, 200, json_pack("[{s:s}]", "type", "file"));
}

static void up_closed(struct conn *c)
{
	free(http_ctx(c));
	http_set_ops(c, NULL, NULL);
}

static const struct conn_ops up_ops = { .body = up_body, .complete = up_complete, .closed = up_closed };

static void rpc_body(struct conn *c, const char *body, size_t len)
{
	const char *ct = http_header(c, "Content-Type");

	rpc_dispatch(c, http_path(c), body, len, ct && !strcmp(ct, "application/connect+json"));
}

void http_route(struct conn *c, int method, const char *path, const char *query)
{
	char val[256];

	if (!strcmp(path, "/files")) {
		const char *ct = http_header(c, "Content-Type");
		char boundary[MP_BOUNDARY_MAX + 1];
		struct up *u;

		if (http_query(query, "path", val, sizeof(val)) == -EINVAL) {
			http_reply(c, 400, "text/plain", "bad query\n", 10);
			return;
		}
		if (method != 3 /* HTTP_POST */) {
			http_reply(c, 404, "text/plain", "none\n", 5);
			return;
		}
		u = calloc(1, sizeof(*u));
		if (!u) {
			http_reply(c, 500, NULL, NULL, 0);
			return;
		}
		u->mpart = ct && !mp_boundary(ct, boundary, sizeof(boundary));
		if (u->mpart)
			mp_init(&u->mp, boundary, &nop_ops, NULL);
		http_stream_body(c, &up_ops, u);
		return;
	}
	if (!strncmp(path, "/process.Process/", 17) || !strncmp(path, "/filesystem.Filesystem/", 23)) {
		http_buffer_body(c, rpc_body);
		return;
	}
	if (!strcmp(path, "/cubicle/port")) {
		/* the bridge's take-over: what follows the head, echoed back
		 * (the harness forks no bridge) */
		const char *rest;
		size_t n;

		http_rest(c, &rest, &n);
		http_reply(c, 200, "application/octet-stream", rest, n);
		http_abort(c);
		return;
	}
	http_reply(c, 204, NULL, NULL, 0);
}

/* ---- target 0: raw HTTP ---- */
static int lfd = -1;
static struct sockaddr_un laddr;
static socklen_t laddr_len;

static void http_target(const uint8_t *data, size_t size)
{
	int cfd;
	size_t off = 0;
	char sink[65536];

	if (lfd < 0) {
		lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		laddr.sun_family = AF_UNIX;
		snprintf(laddr.sun_path + 1, sizeof(laddr.sun_path) - 1, "cubicle-fuzz-agent-%d", getpid());
		laddr_len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(laddr.sun_path + 1);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&laddr, laddr_len) || listen(lfd, 4) || http_listen(lfd))
			abort();
	}
	cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (cfd < 0 || connect(cfd, (struct sockaddr *)&laddr, laddr_len))
		abort();
	watches[0]->cb(watches[0], EPOLLIN); /* accept */
	run_deferred();
	/* Feed the input in pieces, letting the agent answer between them. */
	for (int round = 0; round < 2000; round++) {
		bool any = false;
		if (off < size) {
			ssize_t n = send(cfd, data + off, size - off > 4096 ? 4096 : size - off, MSG_NOSIGNAL);
			if (n > 0)
				off += (size_t)n;
			if (off == size)
				shutdown(cfd, SHUT_WR);
		}
		while (recv(cfd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
			;
		for (int i = 1; i < NW; i++) {
			struct watch *w = watches[i];
			if (w && (w->events & (EPOLLIN | EPOLLOUT | EPOLLRDHUP))) {
				w->cb(w, w->events & (EPOLLIN | EPOLLOUT | EPOLLRDHUP));
				any = true;
				run_deferred();
			}
		}
		run_deferred();
		if (!any && off == size)
			break;
	}
	/* Whatever is left open goes now (an error on its socket). */
	for (int i = 1; i < NW; i++)
		if (watches[i]) {
			watches[i]->cb(watches[i], EPOLLERR);
			run_deferred();
		}
	close(cfd);
}

/* ---- target 1: multipart, whole vs. in pieces ---- */
struct trace {
	uint64_t h;
	size_t bytes;
	unsigned parts, ends;
};

static void mix(struct trace *t, const void *d, size_t len)
{
	const unsigned char *p = d;

	for (size_t i = 0; i < len; i++)
		t->h = (t->h ^ p[i]) * 0x100000001b3ULL;
}

static int tr_part(void *arg, const char *name, const char *filename)
{
	struct trace *t = arg;

	t->parts++;
	mix(t, "P", 1);
	mix(t, name, strlen(name) + 1);
	mix(t, filename, strlen(filename) + 1);
	return 0;
}

static int tr_data(void *arg, const char *d, size_t len)
{
	struct trace *t = arg;

	if (!len)
		abort(); /* never empty */
	t->bytes += len;
	mix(t, d, len);
	return 0;
}

static int tr_end(void *arg)
{
	struct trace *t = arg;

	t->ends++;
	mix(t, "E", 1);
	return 0;
}

static const struct mp_ops tr_ops = { .part = tr_part, .data = tr_data, .end = tr_end };

static void multipart_target(const uint8_t *data, size_t size)
{
	static struct multipart a, b;
	char boundary[MP_BOUNDARY_MAX + 1];
	struct trace ta = { .h = 1469598103934665603ULL }, tb = ta;
	size_t blen, step;
	int ra, rb = 0;

	if (size < 2)
		return;
	blen = data[0] % 16 + 1;
	step = data[1] % 7 + 1;
	data += 2;
	size -= 2;
	if (size < blen)
		return;
	for (size_t i = 0; i < blen; i++)
		boundary[i] = (char)("abcXYZ-_'09+=.?"[data[i] % 15]);
	boundary[blen] = 0;
	data += blen;
	size -= blen;
	mp_init(&a, boundary, &tr_ops, &ta);
	mp_init(&b, boundary, &tr_ops, &tb);
	ra = mp_feed(&a, (const char *)data, size);
	for (size_t off = 0; off < size && !rb; off += step)
		rb = mp_feed(&b, (const char *)data + off, size - off < step ? size - off : step);
	if (ra != rb || ta.h != tb.h || ta.bytes != tb.bytes || ta.parts != tb.parts || ta.ends != tb.ends)
		abort(); /* the result depends on how the body was cut */
	if (!ra && mp_finish(&a) != mp_finish(&b))
		abort();
	if (ta.ends > ta.parts || ta.bytes > size)
		abort();
	/* A Content-Type header built from the input must parse or be refused, never overflow. */
	{
		char ct[300], out[MP_BOUNDARY_MAX + 1];
		size_t n = size < sizeof(ct) - 1 ? size : sizeof(ct) - 1;
		memcpy(ct, data, n);
		ct[n] = 0;
		if (!mp_boundary(ct, out, sizeof(out)) && (strlen(out) == 0 || strlen(out) > MP_BOUNDARY_MAX))
			abort();
	}
}

/* ---- target 2: base64 ---- */
static void b64_target(const uint8_t *data, size_t size)
{
	char *dec = malloc(B64_DEC_MAX(size) + 1), *enc, *dec2;
	long n = b64_decode((const char *)data, size, dec, B64_DEC_MAX(size));

	if (n >= 0) {
		/* A valid encoding decodes to at most 3/4 of it and re-encodes to the same bytes' decoding. */
		if ((size_t)n > size * 3 / 4 + 3)
			abort();
		enc = malloc(B64_ENC_LEN((size_t)n) + 1);
		dec2 = malloc(B64_DEC_MAX(B64_ENC_LEN((size_t)n)) + 1);
		if (b64_encode(dec, (size_t)n, enc) != B64_ENC_LEN((size_t)n) ||
				b64_decode(enc, strlen(enc), dec2, B64_DEC_MAX(B64_ENC_LEN((size_t)n))) != n || memcmp(dec, dec2, (size_t)n))
			abort();
		free(enc);
		free(dec2);
	}
	/* Any bytes round-trip through encode and decode. */
	enc = malloc(B64_ENC_LEN(size) + 1);
	dec2 = malloc(B64_DEC_MAX(B64_ENC_LEN(size)) + 1);
	if (b64_encode(data, size, enc) != B64_ENC_LEN(size) || strlen(enc) != B64_ENC_LEN(size) ||
			b64_decode(enc, strlen(enc), dec2, B64_DEC_MAX(B64_ENC_LEN(size))) != (long)size || memcmp(data, dec2, size))
		abort();
	free(enc);
	free(dec2);
	free(dec);
}

/* ---- target 3: a Connect body through rpc_dispatch on a real connection ---- */
static void rpc_target(const uint8_t *data, size_t size)
{
	static const char *const paths[] = { "/process.Process/Start", "/process.Process/SendInput",
		"/process.Process/SendSignal", "/process.Process/List", "/filesystem.Filesystem/Stat",
		"/process.Process/Connect", "/filesystem.Filesystem/Nope" };
	char head[256];
	uint8_t *req;
	int n;
	bool stream;

	if (size < 1)
		return;
	stream = data[0] & 1;
	n = snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
			paths[(data[0] >> 1) % 7], stream ? "application/connect+json" : "application/json", size - 1);
	req = malloc((size_t)n + size);
	memcpy(req, head, (size_t)n);
	memcpy(req + n, data + 1, size - 1);
	http_target(req, (size_t)n + size - 1);
	free(req);
}

#define SEED(dir, name, lit) fuzz_write_seed(dir, name, lit, sizeof(lit) - 1)

int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Seeds for make fuzz-smoke (FUZZ_SEED_DIR): one per target, in its shape. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_SEED_DIR");

	if (!dir)
		return 0;
	SEED(dir, "seed-http", "\x00GET /health HTTP/1.1\r\n\r\n"
	     "POST /process.Process/List HTTP/1.1\r\nContent-Type: application/json\r\n"
	     "Content-Length: 2\r\n\r\n{}"
	     "POST /process.Process/SendInput HTTP/1.1\r\nContent-Type: application/json\r\n"
	     "Transfer-Encoding: chunked\r\n\r\n31\r\n{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"aGk=\"}}\r\n0\r\n\r\n");
	SEED(dir, "seed-upload", "\x00POST /files?path=%2Ftmp%2Fx HTTP/1.1\r\n"
	     "Content-Type: multipart/form-data; boundary=\"b1\"\r\nContent-Length: 70\r\n\r\n"
	     "--b1\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nhello\r\n--b1--\r\n");
	SEED(dir, "seed-multipart", "\x01\x02\x03\x00\x01\x02preamble\r\n--abc\r\n"
	     "Content-Disposition: form-data; name=\"file\"; filename=\"a\\\"b.txt\"\r\n\r\n"
	     "da\r\n--ab\r\n--abcd\r\n--abc\r\nContent-Disposition: form-data; name=x\r\n\r\n\r\n--abc--\r\n");
	SEED(dir, "seed-b64", "\x02aGVsbG8gd29ybGQ=");
	SEED(dir, "seed-b64url", "\x02-_-_YQ");
	SEED(dir, "seed-start", "\x03\x01\x00\x00\x00\x00\x2e{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"echo\"]}}");
	SEED(dir, "seed-signal", "\x03\x04{\"process\":{\"pid\":\"12\"},\"signal\":\"SIGNAL_SIGKILL\"}");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 4) {
	case 0:
		http_target(data + 1, size - 1);
		break;
	case 1:
		multipart_target(data + 1, size - 1);
		break;
	case 2:
		b64_target(data + 1, size - 1);
		break;
	case 3:
		rpc_target(data + 1, size - 1);
		break;
	}
	return 0;
}
