/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cubicle-agent: the in-guest daemon that answers E2B's envd protocol
 * (Connect RPC + JSON over HTTP/1.1) on vsock port 49983: options, the
 * listening socket, the ready signal to the host, and request routing.
 */
#include <errno.h>
#include <getopt.h>
#include <http_parser.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <linux/vm_sockets.h> /* after sys/socket.h: it uses sa_family_t */
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "b64.h"
#include "http.h"

const char *agent_token;
char agent_default_workdir[4096];

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cubicle-agent [OPTIONS]\n"
		"The in-guest agent of cubicle: runs processes and moves files for the host,\n"
		"speaking E2B's envd protocol (Connect RPC, JSON, HTTP/1.1).\n\n"
		"  --listen ADDR        where to listen (default vsock:%d); ADDR is\n"
		"                       vsock:PORT, unix:PATH or tcp:HOST:PORT (tests)\n"
		"  --token T            require X-Access-Token: T (default: kernel command line\n"
		"                       cubicle.agent_token=T; none: no check)\n"
		"  --ready-port N       after listening, tell the host on vsock CID 2 port N\n"
		"                       (default %d or cubicle.agent_ready_port=N; 0: off)\n"
		"  --cmdline FILE       read the kernel command line from FILE (default /proc/cmdline)\n"
		"  --version            print the version\n"
		"  --help               this text\n", AGENT_DEFAULT_PORT, AGENT_READY_PORT);
}

/* Reads KEY=value from the kernel command line into OUT. */
static int cmdline_get(const char *file, const char *key, char *out, size_t len)
{
	char buf[8192];
	size_t klen = strlen(key);
	FILE *f = fopen(file, "re");
	size_t n;
	char *tok, *save;

	if (!f)
		return -ENOENT;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	for (tok = strtok_r(buf, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
		if (!strncmp(tok, key, klen) && tok[klen] == '=') {
			snprintf(out, len, "%s", tok + klen + 1);
			return 0;
		}
	return -ENOENT;
}

static int parse_port(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || !*s || *end || v > 0xffffffffUL)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

static int listen_on(const char *addr)
{
	int fd, one = 1;

	if (!strncmp(addr, "vsock:", 6)) {
		struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY };
		unsigned port;
		if (parse_port(addr + 6, &port))
			return -EINVAL;
		sa.svm_port = port;
		fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
			goto fail;
		/* Accepted connections inherit it: a receive buffer (the credit the
		 * host gets) of 1 MiB rather than 256 KiB, so an upload waits for a
		 * credit update less often. Best effort. */
		{
			unsigned long long sz = 1u << 20;

			setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_BUFFER_MAX_SIZE, &sz, sizeof(sz));
			setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_BUFFER_SIZE, &sz, sizeof(sz));
		}
	} else if (!strncmp(addr, "unix:", 5)) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		if (strlen(addr + 5) >= sizeof(sa.sun_path) || !addr[5])
			return -ENAMETOOLONG;
		strcpy(sa.sun_path, addr + 5);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			goto fail;
		unlink(sa.sun_path);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
			goto fail;
	} else if (!strncmp(addr, "tcp:", 4)) {
		/* numeric only: a static binary has no NSS for getaddrinfo */
		char host[64];
		const char *colon = strrchr(addr + 4, ':');
		struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
		struct sockaddr_in s4 = { .sin_family = AF_INET };
		size_t hl = colon ? (size_t)(colon - addr - 4) : 0;
		unsigned port;
		bool v6;
		if (!colon || hl >= sizeof(host) || parse_port(colon + 1, &port) || port > 65535)
			return -EINVAL;
		memcpy(host, addr + 4, hl);
		host[hl] = 0;
		if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
			memmove(host, host + 1, hl - 2);
			host[hl - 2] = 0;
		}
		v6 = strchr(host, ':') != NULL;
		if (v6 ? inet_pton(AF_INET6, host, &s6.sin6_addr) != 1 : inet_pton(AF_INET, host, &s4.sin_addr) != 1)
			return -EINVAL;
		s6.sin6_port = s4.sin_port = htons((uint16_t)port);
		fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd >= 0)
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (fd < 0 || (v6 ? bind(fd, (struct sockaddr *)&s6, sizeof(s6)) :
				bind(fd, (struct sockaddr *)&s4, sizeof(s4))))
			goto fail;
	} else {
		return -EINVAL;
	}
	if (listen(fd, SOMAXCONN))
		goto fail;
	return fd;
fail:
	{
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
}

/* Tells the host we are up: one line on a guest-initiated vsock connection. */
static void ready_signal(unsigned port)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = port };
	struct timeval tv = { .tv_sec = 2 };
	char line[64];
	int fd, n;

	fprintf(stderr, "cubicle-agent: ready\n");
	if (!port)
		return;
	fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "cubicle-agent: no ready signal (vsock: %s)\n", strerror(errno));
		return;
	}
	setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_CONNECT_TIMEOUT_OLD, &tv, sizeof(tv));
	n = snprintf(line, sizeof(line), "READY cubicle-agent %s\n", AGENT_VERSION);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) || send(fd, line, (size_t)n, MSG_NOSIGNAL) != n)
		fprintf(stderr, "cubicle-agent: no ready signal to the host port %u: %s\n", port, strerror(errno));
	close(fd);
}

/* ---- routing ---- */

static bool token_ok(struct conn *c)
{
	const char *t = http_header(c, "X-Access-Token");
	size_t a, b;
	unsigned char diff = 0;

	if (!agent_token)
		return true;
	if (!t)
		return false;
	a = strlen(agent_token);
	b = strlen(t);
	for (size_t i = 0; i < b; i++)
		diff |= (unsigned char)t[i] ^ (unsigned char)agent_token[i % (a ? a : 1)];
	return a == b && !diff;
}

static void rpc_body(struct conn *c, const char *body, size_t len)
{
	const char *ct = http_header(c, "Content-Type");
	bool stream = ct && !strncasecmp(ct, "application/connect+json", 24);

	rpc_dispatch(c, http_path(c), body, len, stream);
}

/*
 * POST /init (envd's, sent by `cubicle serve` to a fresh clone and to a
 * resumed sandbox): {"accessToken": T} makes T the token from now on,
 * {"envVars": {K: V}} adds to every later process's environment, and
 * {"timestamp": RFC 3339} sets the clock (a restored guest's is the
 * snapshot's), {"defaultUser": NAME} the user a request that names none
 * acts as, {"defaultWorkdir": DIR} where a process that names no cwd
 * starts ("" puts either back: `user` if the guest has one, and the
 * user's home). cubicle's own {"cubicleNetwork": {"interface", "address":
 * "A.B.C.D/N", "gateway", "mac"}} gives the guest its address and MAC (each clone of a
 * template its own); it is done first, and its failure is a 500 with
 * nothing else applied. Other members are ignored.
 */
static void init_body(struct conn *c, const char *body, size_t len)
{
	static char *token;
	json_error_t jerr;
	json_t *j = json_loadb(body, len, 0, &jerr), *envs, *v;
	const char *k, *tok, *ts, *du, *dw;
	struct tm tm;
	char *rest;

	if (!json_is_object(j)) {
		http_reply_json(c, 400, json_pack("{s:i,s:s}", "code", 400, "message",
						  "/init: the body is not a JSON object"));
		json_decref(j);
		return;
	}
	if (json_object_get(j, "cubicleNetwork")) {
		char why[200];

		if (net_configure(json_object_get(j, "cubicleNetwork"), why, sizeof(why))) {
			fprintf(stderr, "cubicle-agent: /init: %s\n", why);
			http_reply_json(c, 500, json_pack("{s:i,s:s}", "code", 500, "message", why));
			json_decref(j);
			return;
		}
	}
	envs = json_object_get(j, "envVars");
	json_object_foreach(envs, k, v)
		if (json_is_string(v) && *k && !strchr(k, '='))
			setenv(k, json_string_value(v), 1);
	ts = json_string_value(json_object_get(j, "timestamp"));
	memset(&tm, 0, sizeof(tm));
	if (ts && (rest = strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm))) {
		struct timespec now = { .tv_sec = timegm(&tm) };

		if (*rest == '.') {
			long ns = 0, scale = 100000000;

			for (rest++; *rest >= '0' && *rest <= '9'; rest++, scale /= 10)
				ns += (*rest - '0') * scale;
			now.tv_nsec = ns;
		}
		if (now.tv_sec > 0 && clock_settime(CLOCK_REALTIME, &now) < 0)
			fprintf(stderr, "cubicle-agent: /init: setting the clock: %s\n", strerror(errno));
	}
	du = json_string_value(json_object_get(j, "defaultUser"));
	if (du && strlen(du) < sizeof(agent_default_user))
		snprintf(agent_default_user, sizeof(agent_default_user), "%s", du);
	dw = json_string_value(json_object_get(j, "defaultWorkdir"));
	if (dw && (!*dw || *dw == '/') && strlen(dw) < sizeof(agent_default_workdir))
		snprintf(agent_default_workdir, sizeof(agent_default_workdir), "%s", dw);
	tok = json_string_value(json_object_get(j, "accessToken"));
	if (tok && *tok) {
		char *t = strdup(tok);

		if (!t) {
			http_reply_json(c, 500, json_pack("{s:i,s:s}", "code", 500, "message", "out of memory"));
			json_decref(j);
			return;
		}
		free(token);
		agent_token = token = t;
	}
	json_decref(j);
	http_reply(c, 204, NULL, NULL, 0);
}

/* The user named by Authorization: Basic (for /files; RPC reads it itself). */
static void basic_user(struct conn *c, char *out, size_t len)
{
	const char *a = http_header(c, "Authorization");
	char dec[B64_DEC_MAX(128) + 1];
	long n;

	out[0] = 0;
	if (!a || strncasecmp(a, "Basic ", 6) || strlen(a + 6) > 128)
		return;
	n = b64_decode(a + 6, strlen(a + 6), dec, sizeof(dec) - 1);
	if (n < 0 || memchr(dec, 0, (size_t)n))
		return;
	dec[n] = 0;
	dec[strcspn(dec, ":")] = 0;
	snprintf(out, len, "%s", dec);
}

void http_route(struct conn *c, int method, const char *path, const char *query)
{
	char user[128];

	if (!strcmp(path, "/health")) {
		if (method != HTTP_GET && method != HTTP_HEAD)
			http_reply(c, 405, "text/plain", "GET /health\n", 12);
		else
			http_reply(c, 204, NULL, NULL, 0);
		return;
	}
	if (!token_ok(c)) {
		if (!strcmp(path, "/files"))
			http_reply_json(c, 401, json_pack("{s:i,s:s}", "code", 401, "message", "invalid access token"));
		else
			http_reply_json(c, 401, json_pack("{s:s,s:s}", "code", "unauthenticated",
					"message", "invalid access token"));
		return;
	}
	if (!strcmp(path, "/init")) {
		if (method != HTTP_POST)
			http_reply_json(c, 405, json_pack("{s:i,s:s}", "code", 405, "message", "POST /init"));
		else
			http_buffer_body(c, init_body);
		return;
	}
	if (!strcmp(path, "/files")) {
		basic_user(c, user, sizeof(user));
		if (method == HTTP_GET)
			files_get(c, query, user);
		else if (method == HTTP_POST)
			files_post_begin(c, query, user);
		else
			http_reply_json(c, 405, json_pack("{s:i,s:s}", "code", 405, "message", "GET or POST /files"));
		return;
	}
	if (!strncmp(path, "/process.Process/", 17) || !strncmp(path, "/filesystem.Filesystem/", 23)) {
		if (method != HTTP_POST) {
			http_reply_json(c, 405, json_pack("{s:s,s:s}", "code", "unimplemented", "message", "Connect wants POST"));
			return;
		}
		http_buffer_body(c, rpc_body);
		return;
	}
	if (!strcmp(path, "/cubicle/port")) {
		if (method != HTTP_GET)
			http_reply_json(c, 405, json_pack("{s:i,s:s}", "code", 405, "message", "GET /cubicle/port"));
		else
			bridge_port(c, query);
		return;
	}
	http_reply_json(c, 404, json_pack("{s:i,s:s}", "code", 404, "message", "no such endpoint"));
}

static void tick(uint64_t now)
{
	proc_tick(now);
	watch_tick(now);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "token", required_argument, NULL, 't' },
		{ "ready-port", required_argument, NULL, 'r' },
		{ "cmdline", required_argument, NULL, 'c' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *listen_addr = NULL, *cmdline = "/proc/cmdline";
	char addrbuf[80], tokbuf[512], portbuf[32];
	const char *ready_arg = NULL;
	unsigned ready_port = AGENT_READY_PORT;
	int o, fd, rc;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'l':
			listen_addr = optarg;
			break;
		case 't':
			agent_token = optarg;
			break;
		case 'r':
			ready_arg = optarg;
			break;
		case 'c':
			cmdline = optarg;
			break;
		case 'V':
			printf("cubicle-agent %s\n", AGENT_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cubicle-agent: unexpected argument '%s' (see --help)\n", argv[optind]);
		return 2;
	}
	if (!agent_token && !cmdline_get(cmdline, "cubicle.agent_token", tokbuf, sizeof(tokbuf)) && tokbuf[0])
		agent_token = tokbuf;
	if (!ready_arg && !cmdline_get(cmdline, "cubicle.agent_ready_port", portbuf, sizeof(portbuf)))
		ready_arg = portbuf;
	if (ready_arg && parse_port(ready_arg, &ready_port)) {
		fprintf(stderr, "cubicle-agent: bad ready port '%s'\n", ready_arg);
		return 2;
	}
	if (!listen_addr) {
		snprintf(addrbuf, sizeof(addrbuf), "vsock:%d", AGENT_DEFAULT_PORT);
		listen_addr = addrbuf;
	}
	if ((rc = loop_init()) || (rc = proc_init())) {
		fprintf(stderr, "cubicle-agent: setting up the event loop: %s\n", strerror(-rc));
		return 1;
	}
	fd = listen_on(listen_addr);
	if (fd < 0) {
		fprintf(stderr, "cubicle-agent: cannot listen on %s: %s\n", listen_addr,
				fd == -EINVAL ? "want vsock:PORT, unix:PATH or tcp:HOST:PORT" : strerror(-fd));
		return 1;
	}
	if ((rc = http_listen(fd))) {
		fprintf(stderr, "cubicle-agent: %s\n", strerror(-rc));
		return 1;
	}
	if (!strncmp(listen_addr, "tcp:", 4)) {
		/* name the port the kernel picked for tcp:HOST:0 */
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char host[INET6_ADDRSTRLEN];
		if (!getsockname(fd, (struct sockaddr *)&ss, &sl)) {
			bool v6 = ss.ss_family == AF_INET6;
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
			inet_ntop(ss.ss_family, v6 ? (void *)&s6->sin6_addr : (void *)&s4->sin_addr, host, sizeof(host));
			snprintf(addrbuf, sizeof(addrbuf), v6 ? "tcp:[%s]:%u" : "tcp:%s:%u", host,
					ntohs(v6 ? s6->sin6_port : s4->sin_port));
			listen_addr = addrbuf;
		}
	}
	fprintf(stderr, "cubicle-agent %s: listening on %s%s\n", AGENT_VERSION, listen_addr,
			agent_token ? " (access token required)" : "");
	net_lo_up();
	ready_signal(ready_port);
	rc = loop_run(tick);
	fprintf(stderr, "cubicle-agent: event loop failed: %s\n", strerror(-rc));
	return 1;
}
