/* SPDX-License-Identifier: Apache-2.0 */
/* Reaching a VM's cubicle-agent: the vsock socket (or the API socket that names it), curl over it. */
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agentconn.h"
#include "unixconn.h"
#include "codec.h"

#define REPLY_MAX (1u << 20) /* unary replies and error bodies kept */

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* unix_connect, with the reason in a->why when it fails. */
static int connect_vm(struct agent *a, const char *path)
{
	int fd = unix_connect(path);

	if (fd < 0) {
		int e = errno;

		snprintf(a->why, sizeof(a->why), "cannot connect to %s: %s", path,
			 e == EAGAIN ? "it takes no more connections (is its VMM stuck?)" : strerror(e));
		errno = e;
	}
	return fd;
}

/* Read the handshake's reply line a byte at a time (what follows it is the
 * agent's). 1: "OK ...", 0: closed (nothing listens in the guest), -1: an
 * error. The reason in a->why. */
static int read_reply(struct agent *a, int fd, long deadline)
{
	char line[64];
	size_t n = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = deadline - now_ms();
		ssize_t r;

		if (left <= 0) {
			snprintf(a->why, sizeof(a->why), "%s: no answer to CONNECT %u in time", a->uds,
				 a->port);
			return -1;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			return -1;
		r = recv(fd, line + n, 1, 0);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0) {
			snprintf(a->why, sizeof(a->why),
				 "%s: nothing listens on guest port %u (is cubicle-agent running in the guest?)",
				 a->uds, a->port);
			return 0;
		}
		if (line[n] == '\n')
			break;
		if (++n == sizeof(line) - 1) {
			snprintf(a->why, sizeof(a->why), "%s: the answer to CONNECT is too long", a->uds);
			return -1;
		}
	}
	line[n] = '\0';
	if (!strncmp(line, "OK ", 3))
		return 1;
	for (size_t i = 0; i < n; i++)
		if (!isprint((unsigned char)line[i]))
			line[i] = '?';
	snprintf(a->why, sizeof(a->why), "%s: CONNECT %u was answered \"%.64s\"", a->uds, a->port, line);
	return -1;
}

/* The vsock device's handshake on a connected (non-blocking) socket. */
static int handshake(struct agent *a, int fd)
{
	long deadline = now_ms() + a->timeout_ms;
	char req[32];
	int len = snprintf(req, sizeof(req), "CONNECT %u\n", a->port), off = 0;

	while (off < len) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		ssize_t w = send(fd, req + off, (size_t)(len - off), MSG_NOSIGNAL);

		if (w > 0) {
			off += (int)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			snprintf(a->why, sizeof(a->why), "%s: %s", a->uds, strerror(errno));
			return errno == EPIPE || errno == ECONNRESET ? 0 : -1;
		}
		if (now_ms() >= deadline || poll(&p, 1, 100) < 0) {
			snprintf(a->why, sizeof(a->why), "%s: cannot send CONNECT", a->uds);
			return -1;
		}
	}
	return read_reply(a, fd, deadline);
}

/*
 * curl connects to the vsock socket (CURLOPT_UNIX_SOCKET_PATH) on a socket
 * made here, so that the handshake can run on it before the request goes
 * (the prereq callback). libcurl 7.88's CURL_SOCKOPT_ALREADY_CONNECTED is
 * broken (curl issue 10626: it connects anyway), hence not a pre-connected
 * socket.
 */
static curl_socket_t open_cb(void *arg, curlsocktype purpose, struct curl_sockaddr *addr)
{
	struct agent *a = arg;
	int fd = socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);

	(void)purpose;
	if (fd >= 0)
		a->fd_new = fd;
	return fd < 0 ? CURL_SOCKET_BAD : fd;
}

static int close_cb(void *arg, curl_socket_t fd)
{
	struct agent *a = arg;

	if (a->fd_new == fd)
		a->fd_new = -1;
	return close(fd);
}

/* Before each request: a new connection gets its handshake (a reused one
 * had it). */
static int prereq_cb(void *arg, char *rip, char *lip, int rport, int lport)
{
	struct agent *a = arg;
	int fd = a->fd_new, r;

	(void)rip, (void)lip, (void)rport, (void)lport;
	if (fd < 0)
		return CURL_PREREQFUNC_OK;
	a->fd_new = -1;
	r = handshake(a, fd);
	a->refused = r == 0;
	return r == 1 ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT;
}

CURLcode agent_perform(struct agent *a, CURL *c)
{
	long deadline = now_ms() + a->timeout_ms;

	for (;;) {
		struct timespec pause = { 0, 100 * 1000 * 1000 };
		CURLcode rc;

		a->why[0] = '\0';
		a->refused = false;
		rc = curl_easy_perform(c);
		/* Nothing listens yet: the agent may still be starting. */
		if (rc != CURLE_ABORTED_BY_CALLBACK || !a->refused || now_ms() + 100 >= deadline)
			return rc;
		nanosleep(&pause, NULL);
	}
}

struct body {
	char *p;
	size_t n;
};

static size_t keep_body(char *d, size_t sz, size_t n, void *arg)
{
	struct body *b = arg;
	size_t len = sz * n;
	char *p;

	if (b->n + len > REPLY_MAX)
		return 0;
	p = realloc(b->p, b->n + len + 1);
	if (!p)
		return 0;
	memcpy(p + b->n, d, len);
	b->p = p;
	b->n += len;
	p[b->n] = '\0';
	return len;
}

static void no_proxy(CURL *c)
{
	/* The environment's http_proxy must not take these requests elsewhere. */
	curl_easy_setopt(c, CURLOPT_PROXY, "");
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (getenv("CUBICLE_EXEC_DEBUG"))
		curl_easy_setopt(c, CURLOPT_VERBOSE, 1L);
}

/*
 * What is on the other end of fd: "CONNECT <port>\n\n" goes to it. The vsock
 * device reads the first line alone and answers OK (the blank line then
 * reaches the agent, whose HTTP parser skips blank lines before a request,
 * and the connection is closed unused) or closes at once (nothing listens);
 * cubicle's API takes the two lines for an HTTP/0.9 request and answers 505.
 * 1: the vsock device, 2: an HTTP server, 0: no answer in time. Closes fd.
 */
static int probe(struct agent *a, int fd)
{
	char req[32], line[8];
	int len = snprintf(req, sizeof(req), "CONNECT %u\n\n", a->port), ret = 0;
	long deadline = now_ms() + (a->timeout_ms < 5000 ? a->timeout_ms : 5000);
	size_t n = 0;

	if (send(fd, req, (size_t)len, MSG_NOSIGNAL) != len) {
		close(fd);
		return 1; /* closed at once: not an HTTP server */
	}
	while (n < sizeof(line)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = deadline - now_ms();
		ssize_t r;

		if (left <= 0 || (poll(&p, 1, (int)left) < 0 && errno != EINTR))
			break;
		r = recv(fd, line + n, sizeof(line) - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ret = n ? 0 : 1; /* closed: the device found no listener */
			break;
		}
		n += (size_t)r;
		if (n >= 3 && !memcmp(line, "OK ", 3)) {
			ret = 1;
			break;
		}
		if (n >= 5 && !memcmp(line, "HTTP/", 5)) {
			ret = 2;
			break;
		}
	}
	close(fd);
	return ret;
}

int agent_resolve(struct agent *a)
{
	CURL *c = curl_easy_init();
	struct body b = { 0 };
	long status = 0;
	CURLcode rc;
	int fd;

	if (!c)
		return fprintf(stderr, "%s: libcurl failed to start\n", a->prog), -1;
	/* A VMM starting (or restoring) has not bound its socket yet, or a
	 * stale one from the process before it is still there: wait for it,
	 * as for an agent still starting. */
	for (long deadline = now_ms() + a->timeout_ms;;) {
		struct timespec pause = { 0, 50 * 1000 * 1000 };

		fd = connect_vm(a, a->vm);
		if (fd >= 0 || (errno != ENOENT && errno != ECONNREFUSED && errno != EAGAIN) ||
		    now_ms() + 50 >= deadline)
			break;
		nanosleep(&pause, NULL);
	}
	if (fd < 0) {
		curl_easy_cleanup(c);
		return fprintf(stderr, "%s: %s\n", a->prog, a->why), -1;
	}
	if (probe(a, fd) == 1) { /* the vsock device */
		curl_easy_cleanup(c);
		a->uds = strdup(a->vm);
		return a->uds ? 0 : -1;
	}
	/* HTTP, or no answer in time: the API's answer decides. */
	no_proxy(c);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, a->vm);
	curl_easy_setopt(c, CURLOPT_URL, "http://localhost/vm/config");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, a->timeout_ms < 3000 ? a->timeout_ms : 3000L);
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	if (rc != CURLE_OK) {
		/* Not HTTP: the vsock device (with a guest slow to answer) closed
		 * a connection that did not begin with CONNECT. */
		free(b.p);
		a->uds = strdup(a->vm);
		return a->uds ? 0 : -1;
	}
	if (status == 200) {
		json_t *cfg = b.p ? json_loadb(b.p, b.n, 0, NULL) : NULL;
		const char *p = json_string_value(
			json_object_get(json_object_get(cfg, "vsock"), "uds_path"));

		a->uds = p ? strdup(p) : NULL;
		json_decref(cfg);
		free(b.p);
		if (!a->uds) {
			fprintf(stderr,
				"%s: %s is a cubicle API socket, but its VM has no vsock device "
				"(PUT /vsock before boot, or a virtio-vsock device in the config)\n",
				a->prog, a->vm);
			return -1;
		}
		return 0;
	}
	fprintf(stderr, "%s: %s answered GET /vm/config with HTTP %ld: not a VM's API or vsock socket\n",
		a->prog, a->vm, status);
	free(b.p);
	return -1;
}

CURL *agent_curl(struct agent *a, const char *path, const char *const *hdr,
		 struct curl_slist **list)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL, *t;
	char *url = NULL, line[300];

	*list = NULL;
	if (!c || asprintf(&url, "http://127.0.0.1:%u%s", a->port, path) < 0)
		goto fail;
	no_proxy(c);
	curl_easy_setopt(c, CURLOPT_URL, url); /* curl keeps a copy */
	free(url);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, a->uds);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_cb);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, a);
	curl_easy_setopt(c, CURLOPT_CLOSESOCKETFUNCTION, close_cb);
	curl_easy_setopt(c, CURLOPT_CLOSESOCKETDATA, a);
	curl_easy_setopt(c, CURLOPT_PREREQFUNCTION, prereq_cb);
	curl_easy_setopt(c, CURLOPT_PREREQDATA, a);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, a->timeout_ms);
	a->fd_new = -1;
	a->why[0] = '\0';
	/* No "Expect: 100-continue": bodies go at once. */
	t = curl_slist_append(h, "Expect:");
	if (!t)
		goto fail;
	h = t;
	if (a->token) {
		if (strlen(a->token) > 200)
			goto fail;
		snprintf(line, sizeof(line), "X-Access-Token: %s", a->token);
		if (!(t = curl_slist_append(h, line)))
			goto fail;
		h = t;
	}
	if (a->user) {
		char cred[160], enc[220];
		size_t n = (size_t)snprintf(cred, sizeof(cred), "%s:", a->user);

		if (n >= sizeof(cred))
			goto fail;
		b64_encode(cred, n, enc);
		snprintf(line, sizeof(line), "Authorization: Basic %s", enc);
		if (!(t = curl_slist_append(h, line)))
			goto fail;
		h = t;
	}
	for (; hdr && *hdr; hdr++) {
		if (!(t = curl_slist_append(h, *hdr)))
			goto fail;
		h = t;
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	*list = h;
	return c;
fail:
	curl_slist_free_all(h);
	if (c)
		curl_easy_cleanup(c);
	return NULL;
}

const char *agent_curl_error(struct agent *a, CURLcode rc)
{
	if (rc == CURLE_ABORTED_BY_CALLBACK && a->why[0])
		return a->why;
	if (rc == CURLE_COULDNT_CONNECT)
		return "cannot connect to the vsock socket";
	if (rc == CURLE_GOT_NOTHING || rc == CURLE_RECV_ERROR || rc == CURLE_PARTIAL_FILE)
		return "the connection to the agent was cut";
	return curl_easy_strerror(rc);
}

int agent_unary(struct agent *a, const char *method, json_t *req, json_t **out, long timeout_ms)
{
	static const char *const hdr[] = { "Content-Type: application/json",
					   "Connect-Protocol-Version: 1", NULL };
	struct curl_slist *list;
	struct body b = { 0 };
	char path[128], *body = json_dumps(req, JSON_COMPACT);
	CURL *c;
	CURLcode rc;
	long status = 0;
	int ret = -1;

	if (out)
		*out = NULL;
	snprintf(path, sizeof(path), "/%s", method);
	c = body ? agent_curl(a, path, hdr, &list) : NULL;
	if (!c) {
		free(body);
		return fprintf(stderr, "%s: out of memory\n", a->prog), -1;
	}
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	rc = agent_perform(a, c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK) {
		snprintf(a->err, sizeof(a->err), "%s: %s: %s", a->prog, method, agent_curl_error(a, rc));
	} else if (status != 200) {
		char *e = agent_error_text(b.p, b.n);

		snprintf(a->err, sizeof(a->err), "%s: %s: HTTP %ld%s%s%s%s", a->prog, method, status,
			 e ? " (" : "", e ? e : "", e ? ")" : "",
			 status == 401 ? "; the agent wants its token: --token T or CUBICLE_AGENT_TOKEN" : "");
		free(e);
	} else {
		if (out && b.n)
			*out = json_loadb(b.p, b.n, 0, NULL);
		ret = 0;
	}
	if (ret && !a->quiet)
		fprintf(stderr, "%s\n", a->err);
	free(b.p);
	free(body);
	curl_slist_free_all(list);
	curl_easy_cleanup(c);
	return ret;
}

char *agent_urlencode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (isalnum(c) || strchr("-._~/", c)) {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return out;
}
