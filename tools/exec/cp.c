/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cubicle-cp: `cubicle cp SRC DST`, one file into or out of the guest through
 * cubicle-agent's /files (POST with an octet-stream body, GET), streamed both
 * ways: a file of any size is never whole in memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agentconn.h"

#define PROGRESS_MIN (16 << 20) /* progress shown for copies this large */
#define ERR_KEEP     4096

static const char usage_text[] =
	"Usage: cubicle cp [OPTIONS] SRC DST\n"
	"\n"
	"Copy one file into or out of a VM's guest through cubicle-agent. Exactly one\n"
	"of SRC and DST is VM:PATH, where VM is the VM's vsock socket (uds_path) or\n"
	"its cubicle API socket and PATH the file in the guest. The local side may be\n"
	"- (stdin or stdout) or, for a download, a folder. A guest PATH ending in /\n"
	"gets the local file's name. A download goes to a temporary file beside DST,\n"
	"renamed over it once complete. Progress shows on a terminal for large files.\n"
	"\n"
	"Options:\n"
	"      --user USER     the guest user who owns the file (the agent's default)\n"
	"      --token T       the agent's access token (default: $CUBICLE_AGENT_TOKEN)\n"
	"      --port N        the agent's vsock port (default 49983)\n"
	"      --timeout S     seconds to wait for the agent to answer (default 10)\n"
	"  -q, --quiet         no progress\n"
	"  -h, --help          this text\n"
	"\n"
	"Exit status: 0 copied, 1 failed (the reason is printed), 2 bad usage.\n";

struct xfer {
	struct agent a;
	CURL *curl;
	int fd;                  /* the local side */
	int out;                 /* where a 200 answer's body goes: fd, or -1 to keep it */
	long status;
	char err[ERR_KEEP];
	size_t err_n;
	int werr;                /* errno of a failed local write */
	bool progress;
	bool shown;              /* a progress line is on the terminal */
	long last_ms;
	const char *what;        /* guest path, for messages */
};

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void show(struct xfer *x, double done, double total, bool last)
{
	if (last && !x->shown)
		return;
	x->shown = true;
	if (total > 0)
		fprintf(stderr, "\rcubicle cp: %.1f / %.1f MiB (%d%%)%s", done / 1048576, total / 1048576,
			(int)(done * 100 / total), last ? "\n" : "");
	else
		fprintf(stderr, "\rcubicle cp: %.1f MiB%s", done / 1048576, last ? "\n" : "");
}

/* At most 4 times a second, once the copy is large (known or so far). */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct xfer *x = arg;
	long t = now_ms();
	bool up = ultotal > 0 || ulnow > 0;
	curl_off_t now = up ? ulnow : dlnow, total = up ? ultotal : dltotal;

	if (!x->last_ms)
		x->last_ms = t;
	if (x->progress && t - x->last_ms >= 250 && (total >= PROGRESS_MIN || now >= PROGRESS_MIN)) {
		x->last_ms = t;
		show(x, (double)now, (double)total, false);
	}
	return 0;
}

static size_t on_read(char *d, size_t sz, size_t n, void *arg)
{
	struct xfer *x = arg;

	for (;;) {
		ssize_t r = read(x->fd, d, sz * n);

		if (r >= 0)
			return (size_t)r;
		if (errno != EINTR) {
			x->werr = errno;
			return CURL_READFUNC_ABORT;
		}
	}
}

/* The body: the file when the answer is 200, else kept (bounded) for the message. */
static size_t on_write(char *d, size_t sz, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = sz * n, left = len;

	if (!x->status)
		curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->status);
	if (x->status != 200 || x->out < 0) {
		size_t keep = len < ERR_KEEP - 1 - x->err_n ? len : ERR_KEEP - 1 - x->err_n;

		memcpy(x->err + x->err_n, d, keep);
		x->err_n += keep;
		return len;
	}
	while (left) {
		ssize_t w = write(x->out, d, left);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			x->werr = errno;
			return 0;
		}
		d += w;
		left -= (size_t)w;
	}
	return len;
}

/* After the transfer: 0, or 1 after one message. */
static int report(struct xfer *x, CURLcode rc, const char *local)
{
	char *e;

	if (x->werr) {
		fprintf(stderr, "cubicle cp: %s: %s\n", local, strerror(x->werr));
		return 1;
	}
	if (rc != CURLE_OK) {
		fprintf(stderr, "cubicle cp: %s\n", agent_curl_error(&x->a, rc));
		return 1;
	}
	if (x->status == 200)
		return 0;
	e = agent_error_text(x->err, x->err_n);
	if (x->status == 404)
		fprintf(stderr, "cubicle cp: no such file in the guest: %s%s%s%s\n", x->what,
			e ? " (" : "", e ? e : "", e ? ")" : "");
	else if (x->status == 401)
		fprintf(stderr, "cubicle cp: the agent refused the token: give the right one with --token T "
				"or CUBICLE_AGENT_TOKEN\n");
	else
		fprintf(stderr, "cubicle cp: %s: HTTP %ld%s%s%s\n", x->what, x->status, e ? " (" : "",
			e ? e : "", e ? ")" : "");
	free(e);
	return 1;
}

static CURL *files_curl(struct xfer *x, const char *gpath, const char *const *hdr,
			struct curl_slist **list)
{
	char *enc = agent_urlencode(gpath), *path = NULL;
	CURL *c = NULL;

	if (enc && asprintf(&path, "/files?path=%s", enc) >= 0)
		c = agent_curl(&x->a, path, hdr, list);
	free(enc);
	free(path);
	if (c) {
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		/* Big reads and writes: a file moves in few system calls each way. */
		curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L << 10);
		curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 2L << 20);
		/* A stalled agent fails the copy rather than hanging it. */
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
	}
	x->curl = c;
	return c;
}

static int upload(struct xfer *x, const char *local, const char *gpath)
{
	static const char *const hdr_len[] = { "Content-Type: application/octet-stream", NULL };
	static const char *const hdr_chunked[] = { "Content-Type: application/octet-stream",
						   "Transfer-Encoding: chunked", NULL };
	bool std = !strcmp(local, "-");
	struct curl_slist *list;
	struct stat st;
	CURLcode rc;
	CURL *c;
	int ret;

	x->fd = std ? STDIN_FILENO : open(local, O_RDONLY | O_CLOEXEC);
	if (x->fd < 0 || fstat(x->fd, &st)) {
		fprintf(stderr, "cubicle cp: %s: %s\n", local, strerror(errno));
		return 1;
	}
	if (S_ISDIR(st.st_mode)) {
		fprintf(stderr, "cubicle cp: %s: is a folder (cubicle cp copies one file)\n", local);
		return 1;
	}
	c = files_curl(x, gpath, S_ISREG(st.st_mode) ? hdr_len : hdr_chunked, &list);
	if (!c) {
		fprintf(stderr, "cubicle cp: out of memory\n");
		return 1;
	}
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
	curl_easy_setopt(c, CURLOPT_READDATA, x);
	if (S_ISREG(st.st_mode))
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)st.st_size);
	x->out = -1; /* the answer's body (JSON) is kept, not written anywhere */
	rc = agent_perform(&x->a, c);
	if (rc == CURLE_OK) {
		curl_off_t up = 0;

		curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &up);
		show(x, (double)up, S_ISREG(st.st_mode) ? (double)st.st_size : 0, true);
	} else if (x->shown) {
		fputc('\n', stderr);
	}
	ret = report(x, rc, local);
	curl_slist_free_all(list);
	curl_easy_cleanup(c);
	if (!std)
		close(x->fd);
	return ret;
}

/* A download's temporary file, removed if a signal ends cubicle cp. */
static char tmp_path[4096];
static volatile sig_atomic_t tmp_live;

static void on_fatal(int sig)
{
	if (tmp_live)
		unlink(tmp_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void tmp_track(const char *path)
{
	struct sigaction sa = { .sa_handler = on_fatal };

	if (!path) {
		tmp_live = 0;
		return;
	}
	snprintf(tmp_path, sizeof(tmp_path), "%s", path);
	tmp_live = strlen(path) < sizeof(tmp_path);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

static int download(struct xfer *x, const char *gpath, const char *local)
{
	bool std = !strcmp(local, "-");
	char *dst = NULL, *tmp = NULL, *d1 = NULL, *d2 = NULL;
	struct curl_slist *list = NULL;
	struct stat st;
	mode_t mode, mask;
	CURLcode rc;
	CURL *c;
	int ret = 1;

	if (std) {
		x->fd = STDOUT_FILENO;
	} else {
		/* Into a folder: under the guest file's name. */
		if (!stat(local, &st) && S_ISDIR(st.st_mode)) {
			d1 = strdup(gpath);
			if (!d1 || asprintf(&dst, "%s/%s", local, basename(d1)) < 0)
				dst = NULL;
		} else {
			dst = strdup(local);
		}
		d2 = dst ? strdup(dst) : NULL;
		if (!d2 || asprintf(&tmp, "%s/.%s.cubicle-cp-XXXXXX", dirname(d2),
				    basename(strrchr(dst, '/') ? strrchr(dst, '/') + 1 : dst)) < 0) {
			fprintf(stderr, "cubicle cp: out of memory\n");
			goto out;
		}
		x->fd = mkostemp(tmp, O_CLOEXEC);
		if (x->fd < 0) {
			fprintf(stderr, "cubicle cp: %s: %s\n", tmp, strerror(errno));
			goto out;
		}
		tmp_track(tmp);
	}
	x->out = x->fd;
	c = files_curl(x, gpath, NULL, &list);
	if (!c) {
		fprintf(stderr, "cubicle cp: out of memory\n");
		goto out;
	}
	rc = agent_perform(&x->a, c);
	if (rc == CURLE_OK && x->status == 200) {
		curl_off_t got = 0;

		curl_easy_getinfo(c, CURLINFO_SIZE_DOWNLOAD_T, &got);
		show(x, (double)got, (double)got, true);
	} else if (x->shown) {
		fputc('\n', stderr);
	}
	curl_easy_cleanup(c);
	ret = report(x, rc, std ? "stdout" : dst);
	if (std || ret)
		goto out;
	/* A new file's mode as cp would give it; an old one keeps its own. */
	mask = umask(0);
	umask(mask);
	mode = !stat(dst, &st) ? st.st_mode & 07777 : 0666 & ~mask;
	if (fchmod(x->fd, mode) || fdatasync(x->fd) || close(x->fd) || rename(tmp, dst)) {
		fprintf(stderr, "cubicle cp: %s: %s\n", dst, strerror(errno));
		x->fd = -1;
		ret = 1;
		goto out;
	}
	x->fd = -1;
	free(tmp);
	tmp = NULL;
out:
	tmp_track(NULL);
	if (tmp) {
		if (x->fd >= 0)
			close(x->fd);
		unlink(tmp);
	}
	curl_slist_free_all(list);
	free(tmp);
	free(dst);
	free(d1);
	free(d2);
	return ret;
}

/* "VM:PATH" when the text before a colon names a socket: the VM part in *vm
 * (free it), the guest path returned (inside arg). */
static const char *remote(const char *arg, char **vm)
{
	struct stat st;

	*vm = NULL;
	for (const char *c = strchr(arg, ':'); c; c = strchr(c + 1, ':')) {
		char *v = strndup(arg, (size_t)(c - arg));

		if (v && !stat(v, &st) && S_ISSOCK(st.st_mode)) {
			*vm = v;
			return c + 1;
		}
		free(v);
	}
	return NULL;
}

enum { OPT_USER = 256, OPT_TOKEN, OPT_PORT, OPT_TIMEOUT };

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "user", required_argument, NULL, OPT_USER },
		{ "token", required_argument, NULL, OPT_TOKEN },
		{ "port", required_argument, NULL, OPT_PORT },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct xfer x = { .fd = -1, .out = -1, .progress = isatty(STDERR_FILENO),
			  .a = { .port = AGENT_PORT, .timeout_ms = 10000, .prog = "cubicle cp" } };
	const char *src_g, *dst_g, *gpath, *local;
	char *src_vm, *dst_vm, *end, *full = NULL;
	int c, ret;

	x.a.token = getenv("CUBICLE_AGENT_TOKEN");
	if (x.a.token && !*x.a.token)
		x.a.token = NULL;
	opterr = 0; /* one message, ours */
	while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (c) {
		case OPT_USER: x.a.user = optarg; break;
		case OPT_TOKEN: x.a.token = optarg; break;
		case OPT_PORT:
			x.a.port = (unsigned)strtoul(optarg, &end, 10);
			if (*end || !*optarg || !x.a.port || strlen(optarg) > 10) {
				fprintf(stderr, "cubicle cp: --port wants a port number, not %s\n", optarg);
				return 2;
			}
			break;
		case OPT_TIMEOUT: {
			double s = strtod(optarg, &end);

			if (*end || !*optarg || !(s > 0 && s <= 86400)) {
				fprintf(stderr, "cubicle cp: --timeout wants seconds, not %s\n", optarg);
				return 2;
			}
			x.a.timeout_ms = (long)(s * 1000);
			break;
		}
		case 'q': x.progress = false; break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fprintf(stderr, "cubicle cp: bad option or missing value: %s (see cubicle cp --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (argc - optind != 2) {
		fputs(usage_text, stderr);
		return 2;
	}
	if ((x.a.token && strlen(x.a.token) > 200) ||
	    (x.a.user && (strlen(x.a.user) > 100 || strchr(x.a.user, ':')))) {
		fprintf(stderr, "cubicle cp: the token or user name is too long or malformed\n");
		return 2;
	}
	src_g = remote(argv[optind], &src_vm);
	dst_g = remote(argv[optind + 1], &dst_vm);
	if (!src_g == !dst_g) {
		fprintf(stderr, "cubicle cp: exactly one of SRC and DST must be VM:PATH (VM a socket)%s\n",
			src_g ? ", not both" : "");
		free(src_vm);
		free(dst_vm);
		return 2;
	}
	gpath = src_g ? src_g : dst_g;
	local = src_g ? argv[optind + 1] : argv[optind];
	x.a.vm = src_g ? src_vm : dst_vm;
	if (!*gpath) {
		fprintf(stderr, "cubicle cp: VM:PATH needs a guest PATH\n");
		free(src_vm);
		free(dst_vm);
		return 2;
	}
	if (dst_g && gpath[strlen(gpath) - 1] == '/') {
		char *l = strdup(local);

		if (!strcmp(local, "-") || !l || asprintf(&full, "%s%s", gpath, basename(l)) < 0) {
			fprintf(stderr, "cubicle cp: %s: name the guest file (stdin has no name)\n", gpath);
			free(l);
			free(src_vm);
			free(dst_vm);
			return 2;
		}
		free(l);
		gpath = full;
	}
	x.what = gpath;
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	ret = agent_resolve(&x.a) ? 1 : dst_g ? upload(&x, local, gpath) : download(&x, gpath, local);
	curl_global_cleanup();
	free(x.a.uds);
	free(full);
	free(src_vm);
	free(dst_vm);
	return ret;
}
