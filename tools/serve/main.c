/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cubicle-serve (`cubicle serve`, `cubicle template`): options, the
 * server's libconfig file, API keys, the listening socket and a thread per
 * client connection.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <getopt.h>
#include <libconfig.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve.h"
#include "template.h"

struct server srv = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.max_sandboxes = 100,
	.max_conns = 1024,
	.default_timeout = 300,
	.max_timeout = 24 * 3600,
	.agent_wait_ms = 30000,
};

/* ---- utilities shared by the parts ---- */

void serve_log(const char *fmt, ...)
{
	static pthread_mutex_t l = PTHREAD_MUTEX_INITIALIZER;
	char when[32];
	time_t t = time(NULL);
	struct tm tm;
	va_list ap;

	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	pthread_mutex_lock(&l);
	fprintf(stderr, "%s cubicle serve: ", when);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	pthread_mutex_unlock(&l);
}

double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void rand_bytes(unsigned char *b, size_t n)
{
	while (n) {
		ssize_t got = getrandom(b, n, 0);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			abort(); /* no randomness: no safe tokens */
		b += got;
		n -= (size_t)got;
	}
}

void rand_hex(char *out, size_t n_chars)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[64];

	if (n_chars > 2 * sizeof(b))
		n_chars = 2 * sizeof(b);
	rand_bytes(b, (n_chars + 1) / 2);
	for (size_t i = 0; i < n_chars; i++)
		out[i] = hex[(b[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	out[n_chars] = '\0';
}

void uuid4(char *out)
{
	unsigned char b[16];

	rand_bytes(b, sizeof(b));
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	sprintf(out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
		b[15]);
}

void iso_time(time_t t, char *out, size_t len)
{
	struct tm tm;

	strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
}

/* ---- connections ---- */

/*
 * A connection serve ends after its answer (an error before the request's
 * body was read): its sending side shut first, then what the client still
 * sends read and dropped until it closes too (1 s, 1 MiB at most). Closing
 * with unread bytes would reset the connection, and a client still
 * sending its body could lose the answer (the reason for the refusal).
 */
static void linger_close(int fd)
{
	char buf[16384];
	size_t dropped = 0;
	double end = now_ms() + 1000, left;

	if (shutdown(fd, SHUT_WR) == 0) {
		while (dropped < (1u << 20) && (left = end - now_ms()) > 0) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			ssize_t n;

			if (poll(&p, 1, (int)left + 1) <= 0)
				break;
			n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN)))
				break;
			if (n > 0)
				dropped += (size_t)n;
		}
	}
	close(fd);
}

static void *conn_main(void *arg)
{
	struct hconn *c = arg;
	struct hreq *r = malloc(sizeof(*r));

	while (r && !srv.stopping) {
		int ret = hio_read_head(c, r);

		if (ret)
			break;
		api_handle(c, r);
		free(r->body);
		r->body = NULL;
		if (c->close)
			break;
	}
	free(r);
	if (c->up_fd >= 0)
		close(c->up_fd);
	if (c->close)
		linger_close(c->fd);
	else
		close(c->fd);
	free(c);
	pthread_mutex_lock(&srv.lock);
	srv.conns--;
	pthread_mutex_unlock(&srv.lock);
	return NULL;
}

static void accept_one(int lfd, pthread_attr_t *attr)
{
	struct timeval idle = { .tv_sec = 120 };
	struct hconn *c;
	pthread_t t;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;
	bool full;

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE)
			usleep(100000); /* nothing to accept with: wait for closes */
		return;
	}
	pthread_mutex_lock(&srv.lock);
	full = srv.conns >= srv.max_conns;
	if (!full)
		srv.conns++;
	pthread_mutex_unlock(&srv.lock);
	if (full) {
		static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
					   "Retry-After: 1\r\nConnection: close\r\nContent-Length: 53\r\n\r\n"
					   "{\"code\":503,\"message\":\"too many open connections\"}  ";
		(void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		close(fd);
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c = calloc(1, sizeof(*c));
	if (c) {
		c->fd = fd;
		c->up_fd = -1;
	}
	if (!c || pthread_create(&t, attr, conn_main, c)) {
		free(c);
		close(fd);
		pthread_mutex_lock(&srv.lock);
		srv.conns--;
		pthread_mutex_unlock(&srv.lock);
	}
}

static int listen_on(const char *spec)
{
	char host[256], *colon;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai;
	const char *port;
	int fd, one = 1, rc;

	snprintf(host, sizeof(host), "%s", spec);
	colon = strrchr(host, ':');
	if (!colon)
		return fprintf(stderr, "cubicle serve: --listen %s: expected ADDR:PORT\n", spec), -1;
	*colon = '\0';
	port = colon + 1;
	if (host[0] == '[' && colon[-1] == ']') {
		colon[-1] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	rc = getaddrinfo(*host ? host : NULL, port, &hints, &ai);
	if (rc)
		return fprintf(stderr, "cubicle serve: --listen %s: %s\n", spec, gai_strerror(rc)), -1;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 512)) {
		fprintf(stderr, "cubicle serve: --listen %s: %s\n", spec, strerror(errno));
		freeaddrinfo(ai);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* ---- options and the config file ---- */

static void usage(FILE *f)
{
	fputs("Usage: cubicle serve [OPTIONS]\n"
	      "\n"
	      "E2B's sandbox API on this host: point the E2B SDK's E2B_API_URL and\n"
	      "E2B_SANDBOX_URL at it. Each sandbox is a clone of a template's snapshot\n"
	      "run by a cubicle VMM process of its own; its guest's cubicle-agent answers\n"
	      "the SDK's in-sandbox calls.\n"
	      "\n"
	      "  -c, --config FILE      a libconfig file with the settings below (options win)\n"
	      "  -L, --listen ADDR:PORT where to answer (default 127.0.0.1:3000; port 0: any)\n"
	      "  -d, --state DIR        the state folder: templates/, sandboxes/ (default\n"
	      "                         /var/lib/cubicle/serve)\n"
	      "  -k, --api-keys FILE    accepted API keys, one a line (default: DIR/api-key,\n"
	      "                         made on first start)\n"
	      "      --no-auth          accept any request without an API key\n"
	      "      --domain NAME      sandboxes also answer at Host PORT-ID.NAME\n"
	      "      --max-sandboxes N  (default 100)\n"
	      "      --seccomp MODE     the VMMs' seccomp mode: enforce (default), log, off\n"
	      "      --jail-user UID:GID  run each VMM jailed (cubicle restore --jail) as\n"
	      "                         UID:GID, in a cgroup of its own (serve as root);\n"
	      "                         FIRST-LAST: each sandbox a uid (and gid) of its own\n"
	      "                         from that range\n"
	      "      --network-subnet CIDR  give each sandbox of a template with a tap device\n"
	      "                         a /30 of CIDR, a tap of its own and an egress policy\n"
	      "                         (serve as root)\n"
	      "\n"
	      "Config file keys: listen, state_dir, api_keys, domain, max_sandboxes,\n"
	      "max_connections, default_timeout and max_timeout (seconds), agent_wait_ms,\n"
	      "seccomp, pool_size (warm clones kept restored and paused, 0),\n"
	      "pool_template (\"base\"), jail_user, jail_cgroup (the parent cgroup,\n"
	      "default /sys/fs/cgroup/cubicle), jail_memory_max, jail_cpu_max and\n"
	      "jail_pids_max (cgroup v2 values for each VMM), network_subnet,\n"
	      "network_interface (the guest's, \"eth0\"), network_default (\"allow\": what\n"
	      "an absent allow_internet_access means; or \"deny\"), dns_upstream (the name\n"
	      "server the sandboxes' lookups go to, \"A.B.C.D[:PORT]\"; the host's first),\n"
	      "image_vm (the VM file a template build's fromImage boots: `cubicle template\n"
	      "build --image`'s CONFIG).\n"
	      "Sandboxes outlive serve:\n"
	      "a restarted serve finds them in the state folder. See cubicle-serve(1).\n",
	      f);
}

static const char *dup_str(const char *s)
{
	char *d = strdup(s);

	if (!d)
		abort();
	return d;
}

struct opts {
	const char *listen, *state, *keys, *config;
	bool no_auth;
};

static int read_config(struct opts *o)
{
	static const char *const known[] = { "listen", "state_dir", "api_keys", "domain",
					     "max_sandboxes", "max_connections", "default_timeout",
					     "max_timeout", "agent_wait_ms", "seccomp", "pool_size",
					     "pool_template", "jail_user", "jail_cgroup",
					     "jail_memory_max", "jail_cpu_max", "jail_pids_max",
					     "network_subnet", "network_interface", "network_default",
					     "dns_upstream", "image_vm", NULL };
	config_t cf;
	config_setting_t *root;
	const char *s;
	int ret = 0;

	config_init(&cf);
	if (!config_read_file(&cf, o->config)) {
		fprintf(stderr, "cubicle serve: %s:%d: %s\n",
			config_error_file(&cf) ? config_error_file(&cf) : o->config,
			config_error_line(&cf), config_error_text(&cf));
		config_destroy(&cf);
		return -1;
	}
	root = config_root_setting(&cf);
	for (int i = 0; i < config_setting_length(root); i++) {
		config_setting_t *e = config_setting_get_elem(root, (unsigned)i);
		const char *name = config_setting_name(e);
		unsigned k = 0;

		while (known[k] && strcmp(known[k], name))
			k++;
		if (!known[k]) {
			fprintf(stderr, "cubicle serve: %s:%d: unknown setting '%s'\n", o->config,
				config_setting_source_line(e), name);
			ret = -1;
			continue;
		}
		bool num = (k >= 4 && k <= 8) || k == 10;

		if (num ? config_setting_type(e) != CONFIG_TYPE_INT || config_setting_get_int(e) < 0
			: config_setting_type(e) != CONFIG_TYPE_STRING) {
			fprintf(stderr, "cubicle serve: %s:%d: '%s' must be %s\n", o->config,
				config_setting_source_line(e), name,
				num ? "a number >= 0" : "a string");
			ret = -1;
			continue;
		}
		s = num ? NULL : config_setting_get_string(e);
		switch (k) {
		case 0: if (!o->listen) o->listen = dup_str(s); break;
		case 1: if (!o->state) o->state = dup_str(s); break;
		case 2: if (!o->keys) o->keys = dup_str(s); break;
		case 3: if (!srv.domain) srv.domain = dup_str(s); break;
		case 4: srv.max_sandboxes = (unsigned)config_setting_get_int(e); break;
		case 5: srv.max_conns = (unsigned)config_setting_get_int(e); break;
		case 6: srv.default_timeout = (unsigned)config_setting_get_int(e); break;
		case 7: srv.max_timeout = (unsigned)config_setting_get_int(e); break;
		case 8: srv.agent_wait_ms = (unsigned)config_setting_get_int(e); break;
		case 9: if (!srv.seccomp) srv.seccomp = dup_str(s); break;
		case 10: srv.pool_size = (unsigned)config_setting_get_int(e); break;
		case 11: srv.pool_template = dup_str(s); break;
		case 12: if (!srv.jail_user) srv.jail_user = dup_str(s); break;
		case 13: srv.jail_cgroup = dup_str(s); break;
		case 14: srv.jail_memory_max = dup_str(s); break;
		case 15: srv.jail_cpu_max = dup_str(s); break;
		case 16: srv.jail_pids_max = dup_str(s); break;
		case 17: if (!srv.net_subnet) srv.net_subnet = dup_str(s); break;
		case 18: srv.net_if = dup_str(s); break;
		case 19:
			if (strcmp(s, "allow") && strcmp(s, "deny")) {
				fprintf(stderr, "cubicle serve: %s:%d: network_default must be \"allow\" or \"deny\"\n",
					o->config, config_setting_source_line(e));
				ret = -1;
			}
			srv.net_deny_default = !strcmp(s, "deny");
			break;
		case 20: srv.dns_upstream = dup_str(s); break;
		case 21: {
			char real[PATH_MAX];

			if (!realpath(s, real)) {
				fprintf(stderr, "cubicle serve: %s:%d: image_vm '%s': %s\n", o->config,
					config_setting_source_line(e), s, strerror(errno));
				ret = -1;
				break;
			}
			srv.image_vm = dup_str(real);
			break;
		}
		}
	}
	config_destroy(&cf);
	return ret;
}

static int load_keys(const char *path, bool make)
{
	FILE *f = fopen(path, "re");
	char line[512];
	unsigned n = 0;

	if (!f && errno == ENOENT && make) {
		char key[45] = "e2b_";
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

		rand_hex(key + 4, 40);
		if (fd < 0 || dprintf(fd, "%s\n", key) < 0 || close(fd)) {
			fprintf(stderr, "cubicle serve: %s: %s\n", path, strerror(errno));
			return -1;
		}
		serve_log("made an API key in %s", path);
		f = fopen(path, "re");
	}
	if (!f)
		return fprintf(stderr, "cubicle serve: API keys %s: %s\n", path, strerror(errno)), -1;
	while (fgets(line, sizeof(line), f)) {
		char *s = line + strspn(line, " \t"), **k;

		s[strcspn(s, " \t\r\n")] = '\0';
		if (!*s || *s == '#')
			continue;
		k = realloc(srv.keys, (n + 1) * sizeof(*k));
		if (!k || !(k[n] = strdup(s)))
			abort();
		srv.keys = k;
		n++;
	}
	fclose(f);
	if (!n)
		return fprintf(stderr, "cubicle serve: %s holds no API key\n", path), -1;
	srv.n_keys = n;
	return 0;
}

static int num_opt(const char *name, const char *v, unsigned *out)
{
	char *end;
	unsigned long n = strtoul(v, &end, 10);

	if (!*v || *end || n > 1000000)
		return fprintf(stderr, "cubicle serve: --%s %s: expected a number\n", name, v), -1;
	*out = (unsigned)n;
	return 0;
}

static void on_stop(int sig)
{
	(void)sig;
	srv.stopping = 1;
}

int serve_jail_check(const char *who)
{
	unsigned long uid, gid;
	char *end;

	errno = 0;
	uid = strtoul(srv.jail_user, &end, 10);
	if (end == srv.jail_user || (*end != ':' && *end != '-') || !end[1])
		goto bad;
	gid = strtoul(end + 1, &end, 10);
	{
		/* UID:GID, or FIRST-LAST (a uid, and the same gid, per sandbox) */
		bool range = srv.jail_user[strspn(srv.jail_user, "0123456789")] == '-';

		if (*end || errno || !uid || !gid || uid > 0xfffffffe || gid > 0xfffffffe ||
		    (range && gid < uid))
			goto bad;
		srv.jail_first = range ? (uint32_t)uid : 0;
		srv.jail_last = range ? (uint32_t)gid : 0;
		srv.jail_uid = range ? 0 : (uint32_t)uid;
		srv.jail_gid = range ? 0 : (uint32_t)gid;
	}
	if (!srv.jail_cgroup)
		srv.jail_cgroup = access("/sys/fs/cgroup/cgroup.controllers", F_OK) &&
					  !access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK)
				  ? "/sys/fs/cgroup/unified/cubicle"
				  : "/sys/fs/cgroup/cubicle";
	if (geteuid()) {
		fprintf(stderr, "%s: jail_user %s: jailed VMMs need %s to run as root\n", who,
			srv.jail_user, who);
		return -1;
	}
	return 0;
bad:
	fprintf(stderr, "%s: jail_user %s: expected UID:GID or FIRST-LAST, numbers other than 0 (FIRST not above LAST)\n",
		who, srv.jail_user);
	return -2;
}

static int serve_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "listen", required_argument, NULL, 'L' },
		{ "state", required_argument, NULL, 'd' },
		{ "api-keys", required_argument, NULL, 'k' },
		{ "no-auth", no_argument, NULL, 'A' },
		{ "domain", required_argument, NULL, 'D' },
		{ "max-sandboxes", required_argument, NULL, 'M' },
		{ "seccomp", required_argument, NULL, 'S' },
		{ "jail-user", required_argument, NULL, 'J' },
		{ "network-subnet", required_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { 0 };
	unsigned maxs = 0;
	bool have_max = false;
	char path[300], *abs;
	pthread_attr_t attr;
	pthread_t reaper;
	struct sigaction sa = { .sa_handler = on_stop };
	int c, lfd, lock;

	while ((c = getopt_long(argc, argv, "c:L:d:k:h", lo, NULL)) != -1) {
		switch (c) {
		case 'c': o.config = optarg; break;
		case 'L': o.listen = optarg; break;
		case 'd': o.state = optarg; break;
		case 'k': o.keys = optarg; break;
		case 'A': o.no_auth = true; break;
		case 'D': srv.domain = optarg; break;
		case 'M':
			if (num_opt("max-sandboxes", optarg, &maxs))
				return 2;
			have_max = true;
			break;
		case 'S': srv.seccomp = optarg; break;
		case 'J': srv.jail_user = optarg; break;
		case 'N': srv.net_subnet = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cubicle serve: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (o.config && read_config(&o))
		return 2;
	if (have_max)
		srv.max_sandboxes = maxs;
	if (!srv.pool_template)
		srv.pool_template = "base";
	if (srv.seccomp && strcmp(srv.seccomp, "enforce") && strcmp(srv.seccomp, "log") &&
	    strcmp(srv.seccomp, "off")) {
		fprintf(stderr, "cubicle serve: seccomp %s: expected enforce, log or off\n", srv.seccomp);
		return 2;
	}
	if (srv.jail_user && serve_jail_check("cubicle serve"))
		return 2;
	{
		char why[300];

		if (net_server_init(why, sizeof(why))) {
			fprintf(stderr, "cubicle serve: %s\n", why);
			return 2;
		}
		if (srv.net_if && (!*srv.net_if || strlen(srv.net_if) >= 16)) {
			fprintf(stderr, "cubicle serve: network_interface '%s' is not an interface name\n",
				srv.net_if);
			return 2;
		}
	}
	srv.cubicle = getenv("CUBICLE_BIN");
	if (!srv.cubicle || access(srv.cubicle, X_OK)) {
		fprintf(stderr, "cubicle serve: run it as `cubicle serve` (CUBICLE_BIN names the cubicle "
				"that runs the VMMs)\n");
		return 1;
	}
	/* the VMMs start in / (vmm_spawn): the path must not be relative */
	srv.cubicle = realpath(srv.cubicle, NULL);
	if (!srv.cubicle) {
		fprintf(stderr, "cubicle serve: CUBICLE_BIN %s: %s\n", getenv("CUBICLE_BIN"),
			strerror(errno));
		return 1;
	}
	if (!o.state)
		o.state = "/var/lib/cubicle/serve";
	if (mkdir(o.state, 0700) && errno != EEXIST) {
		fprintf(stderr, "cubicle serve: state folder %s: %s\n", o.state, strerror(errno));
		return 1;
	}
	abs = realpath(o.state, NULL);
	if (!abs || strlen(abs) > 60) {
		fprintf(stderr, "cubicle serve: state folder %s: %s\n", o.state,
			abs ? "longer than 60 characters (its sockets' paths must fit 108)" : strerror(errno));
		return 1;
	}
	srv.state_dir = abs;
	snprintf(path, sizeof(path), "%s/serve.lock", abs);
	lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB)) {
		fprintf(stderr, "cubicle serve: %s: %s\n", path,
			errno == EWOULDBLOCK ? "another cubicle serve uses this state folder" : strerror(errno));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/templates", abs);
	mkdir(path, 0700);
	if (!o.no_auth) {
		char def[300];

		snprintf(def, sizeof(def), "%s/api-key", abs);
		if (load_keys(o.keys ? o.keys : def, !o.keys))
			return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (srv.net_subnet) {
		char why[300];

		if (dns_start(srv.dns_upstream, why, sizeof(why))) {
			fprintf(stderr, "cubicle serve: %s\n", why);
			return 2;
		}
	}
	if (sbx_adopt_all())
		return 1;
	lfd = listen_on(o.listen ? o.listen : "127.0.0.1:3000");
	if (lfd < 0)
		return 1;
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char h[INET6_ADDRSTRLEN + 8], p[16];

		getsockname(lfd, (struct sockaddr *)&ss, &sl);
		getnameinfo((struct sockaddr *)&ss, sl, h, sizeof(h), p, sizeof(p),
			    NI_NUMERICHOST | NI_NUMERICSERV);
		serve_log("listening on http://%s%s%s:%s (state %s, %s)", ss.ss_family == AF_INET6 ? "[" : "",
			  h, ss.ss_family == AF_INET6 ? "]" : "", p, abs,
			  o.no_auth ? "no API key needed" : "API key needed");
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 << 10);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&reaper, NULL, sbx_reaper, NULL)) {
		fprintf(stderr, "cubicle serve: cannot start a thread\n");
		return 1;
	}
	while (!srv.stopping) {
		struct pollfd pf = { .fd = lfd, .events = POLLIN };

		if (poll(&pf, 1, 500) > 0)
			accept_one(lfd, &attr);
	}
	serve_log("stopping: %u sandboxes keep running; a new cubicle serve on %s finds them", srv.n_sandboxes,
		  abs);
	close(lfd);
	pthread_join(reaper, NULL);
	sbx_pool_drain();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "template"))
		return template_main(argc - 1, argv + 1);
	return serve_main(argc, argv);
}
