/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cubicle-exec: `cubicle exec VM -- CMD [ARG...]`, a command run in the guest
 * by cubicle-agent (process.Process/Start, E2B's envd protocol), its output
 * streamed as it comes, its exit status returned. The main thread reads the
 * Start stream; a signal thread forwards Ctrl-C, SIGTERM, SIGHUP and window
 * sizes; with -i an input thread sends stdin.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "agentconn.h"
#include "codec.h"
#include "stream.h"

#define EXIT_OWN    125         /* cubicle exec's own failure (docker exec's choice) */
#define FRAME_MAX   (16u << 20) /* the longest stream message accepted */
#define INPUT_CHUNK (48u << 10) /* stdin bytes per SendInput */
#define CALL_MS     10000L      /* SendInput, SendSignal, Update */

static const char usage_text[] =
	"Usage: cubicle exec [OPTIONS] VM -- CMD [ARG...]\n"
	"\n"
	"Run CMD in the VM's guest through cubicle-agent (E2B's envd protocol over\n"
	"vsock port 49983): its stdout and stderr arrive as they are written, and\n"
	"cubicle exec exits with its status (128+N when signal N ended it).\n"
	"VM is the VM's vsock socket (uds_path) or its cubicle API socket.\n"
	"\n"
	"Options:\n"
	"  -i, --interactive   send stdin to the command (end of input closes its stdin)\n"
	"  -t, --tty           run it on a pseudo-terminal sized like this one (and\n"
	"                      resized with it); with -i, this terminal is raw meanwhile\n"
	"  -e, --env K=V       set an environment variable; repeatable\n"
	"      --cwd DIR       the working directory in the guest\n"
	"      --user USER     the guest user to run as (the agent's default: root)\n"
	"      --token T       the agent's access token (default: $CUBICLE_AGENT_TOKEN)\n"
	"      --port N        the agent's vsock port (default 49983)\n"
	"      --timeout S     seconds to wait for the agent to answer (default 10)\n"
	"  -h, --help          this text\n"
	"\n"
	"Ctrl-C (SIGINT), SIGTERM, SIGHUP and SIGQUIT are passed to the guest command;\n"
	"cubicle exec goes on until it ends. Ctrl-C again 2 s after the first sends\n"
	"SIGKILL. With -it, Ctrl-C is a key for the guest's terminal instead.\n"
	"\n"
	"Exit status: the command's; 125 when cubicle exec itself failed (bad usage,\n"
	"no agent, a broken stream; the reason is printed).\n";

struct run {
	struct agent a;          /* the main thread's (the stream's) */
	struct agent sig_a, in_a; /* the signal and input threads' own copies */
	bool tty, interactive;
	CURL *curl;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	long pid;                /* -1 until the start event */
	bool done;               /* the stream is over, one way or another */
	int stop_pipe[2];        /* written when done: wakes the input thread */

	/* the response, read on the main thread */
	struct stream st;
	long http_status;
	struct { char *p; size_t n; } errbody;
	atomic_bool abort;
};

static struct termios saved_tio;
static volatile sig_atomic_t tio_saved;

static void tty_restore(void)
{
	if (tio_saved)
		tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio);
	tio_saved = 0;
}

static void tty_raw(void)
{
	struct termios t;

	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tio))
		return;
	t = saved_tio;
	cfmakeraw(&t);
	if (!tcsetattr(STDIN_FILENO, TCSADRAIN, &t)) {
		tio_saved = 1;
		atexit(tty_restore);
	}
}

static void win_size(unsigned *cols, unsigned *rows)
{
	struct winsize w;

	*cols = 80;
	*rows = 24;
	if ((!ioctl(STDIN_FILENO, TIOCGWINSZ, &w) || !ioctl(STDOUT_FILENO, TIOCGWINSZ, &w)) &&
	    w.ws_col && w.ws_row) {
		*cols = w.ws_col;
		*rows = w.ws_row;
	}
}

static json_t *pty_json(void)
{
	unsigned cols, rows;

	win_size(&cols, &rows);
	return json_pack("{s:{s:i,s:i}}", "size", "cols", (int)cols, "rows", (int)rows);
}

static long get_pid(struct run *r)
{
	long pid;

	pthread_mutex_lock(&r->lock);
	pid = r->pid;
	pthread_mutex_unlock(&r->lock);
	return pid;
}

static int send_signal(struct agent *a, long pid, int sig)
{
	json_t *req = json_pack("{s:{s:I},s:i}", "process", "pid", (json_int_t)pid, "signal", sig);
	int ret = req ? agent_unary(a, "process.Process/SendSignal", req, NULL, CALL_MS) : -1;

	json_decref(req);
	return ret;
}

/* ---- the Start stream ---- */

/* The stream's callbacks, on the main thread. */
static void stream_started(void *arg, long pid)
{
	struct run *r = arg;

	pthread_mutex_lock(&r->lock);
	r->pid = pid;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* Like a pipe's writer, the command gets SIGPIPE when stdout is gone. */
static void stream_out_closed(void *arg)
{
	struct run *r = arg;
	struct agent a = r->a; /* r->a is the stream's */
	long pid = get_pid(r);

	if (pid > 0)
		send_signal(&a, pid, SIGPIPE);
}

static size_t on_stream(char *d, size_t sz, size_t n, void *arg)
{
	struct run *r = arg;
	size_t len = sz * n;

	if (!r->http_status)
		curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &r->http_status);
	if (r->http_status != 200) {
		/* An error before the stream: keep (some of) the body to show. */
		size_t keep = len < 4096 - r->errbody.n ? len : 4096 - r->errbody.n;
		char *p = keep ? realloc(r->errbody.p, r->errbody.n + keep) : NULL;

		if (p) {
			memcpy(p + r->errbody.n, d, keep);
			r->errbody.p = p;
			r->errbody.n += keep;
		}
		return len;
	}
	return stream_feed(&r->st, d, len) ? 0 : len;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct run *r = arg;

	(void)a, (void)b, (void)c, (void)d;
	return atomic_load(&r->abort) ? 1 : 0;
}

/* ---- signals and input ---- */

static void sig_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGQUIT);
	sigaddset(set, SIGWINCH);
	sigaddset(set, SIGUSR1); /* from main: the stream is over */
}

static long mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Forward signals to the guest command: the first as it is; Ctrl-C again at
 * least 2 s after the first becomes SIGKILL. One that comes before the pid is
 * known waits for it; a second one then gives up on the command. */
static void *signal_thread(void *arg)
{
	struct run *r = arg;
	struct agent *a = &r->sig_a;
	struct timespec tick = { 0, 200 * 1000 * 1000 };
	int sent = 0, queued = 0;
	long sent_ms = 0;
	sigset_t set;

	sig_set(&set);
	for (;;) {
		int sig = sigtimedwait(&set, NULL, &tick);
		long pid;
		bool done;

		pthread_mutex_lock(&r->lock);
		pid = r->pid;
		done = r->done;
		pthread_mutex_unlock(&r->lock);
		if (done)
			return NULL;
		if (sig == SIGWINCH && r->tty && pid > 0) {
			json_t *req = json_pack("{s:{s:I},s:o}", "process", "pid", (json_int_t)pid,
						"pty", pty_json());

			if (req)
				agent_unary(a, "process.Process/Update", req, NULL, CALL_MS);
			json_decref(req);
		} else if (sig > 0 && sig != SIGWINCH && sig != SIGUSR1) {
			if (pid <= 0) {
				if (queued)
					atomic_store(&r->abort, true);
				queued = sig;
				continue;
			}
			if (sig == SIGINT && sent && mono_ms() - sent_ms >= 2000) {
				fprintf(stderr, "\r\ncubicle exec: sending SIGKILL to the guest command\r\n");
				sig = SIGKILL;
			}
			if (!sent)
				sent_ms = mono_ms();
			sent = sig;
			send_signal(a, pid, sig);
		}
		if (queued && pid > 0) {
			send_signal(a, pid, queued);
			sent = queued;
			sent_ms = mono_ms();
			queued = 0;
		}
	}
}

/* Input the command no longer takes is no error when it has ended (its end
 * event may be on its way): give the stream a second to say so. */
static void input_failed(struct run *r, const struct agent *a)
{
	struct timespec t;
	bool done;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += 1;
	pthread_mutex_lock(&r->lock);
	while (!r->done && !pthread_cond_timedwait(&r->cond, &r->lock, &t))
		;
	done = r->done;
	pthread_mutex_unlock(&r->lock);
	if (!done)
		fprintf(stderr, "%s\n", a->err);
}

static void *input_thread(void *arg)
{
	struct run *r = arg;
	struct agent *a = &r->in_a;
	uint8_t *buf = malloc(INPUT_CHUNK);
	char *enc = malloc(b64_encoded_len(INPUT_CHUNK) + 1);
	bool last = false;
	long pid;

	pthread_mutex_lock(&r->lock);
	while (r->pid < 0 && !r->done)
		pthread_cond_wait(&r->cond, &r->lock);
	pid = r->pid;
	pthread_mutex_unlock(&r->lock);
	while (pid > 0 && buf && enc) {
		struct pollfd p[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
				       { .fd = r->stop_pipe[0], .events = POLLIN } };
		ssize_t n;
		json_t *req;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		n = read(STDIN_FILENO, buf, INPUT_CHUNK);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0 && r->tty) {
			/* A pty has no stdin to close: ^D is its end of input. */
			buf[0] = 4;
			n = 1;
			last = true;
		} else if (n <= 0) {
			req = json_pack("{s:{s:I}}", "process", "pid", (json_int_t)pid);
			if (req && agent_unary(a, "process.Process/CloseStdin", req, NULL, CALL_MS))
				input_failed(r, a);
			json_decref(req);
			break;
		}
		b64_encode(buf, (size_t)n, enc);
		req = json_pack("{s:{s:I},s:{s:s}}", "process", "pid", (json_int_t)pid, "input",
				r->tty ? "pty" : "stdin", enc);
		if (!req || agent_unary(a, "process.Process/SendInput", req, NULL, CALL_MS)) {
			if (req)
				input_failed(r, a);
			json_decref(req);
			break;
		}
		json_decref(req);
		if (last)
			break;
	}
	free(buf);
	free(enc);
	return NULL;
}

/* ---- main ---- */

/* JSON text for s, or NULL after a message (JSON carries UTF-8 only). */
static json_t *text(const char *s)
{
	json_t *j = json_string(s);

	if (!j)
		fprintf(stderr, "cubicle exec: not UTF-8 text, which the protocol cannot carry: %s\n", s);
	return j;
}

static json_t *start_request(struct run *r, char **cmd, char **envs, int n_envs, const char *cwd)
{
	json_t *args = json_array(), *env = json_object(), *proc = json_object(), *req = NULL, *v;
	bool ok = args && env && proc;

	for (int i = 1; ok && cmd[i]; i++)
		ok = (v = text(cmd[i])) && !json_array_append_new(args, v);
	for (int i = 0; ok && i < n_envs; i++) {
		char *eq = strchr(envs[i], '=');

		json_t *key;

		*eq = '\0';
		key = text(envs[i]); /* a key must be UTF-8 too */
		ok = key && (v = text(eq + 1)) && !json_object_set_new(env, envs[i], v);
		json_decref(key);
		*eq = '=';
	}
	ok = ok && (v = text(cmd[0])) && !json_object_set_new(proc, "cmd", v) &&
	     !json_object_set(proc, "args", args) && !json_object_set(proc, "envs", env);
	if (ok && cwd)
		ok = (v = text(cwd)) && !json_object_set_new(proc, "cwd", v);
	if (ok)
		req = json_pack("{s:O,s:b}", "process", proc, "stdin", r->interactive);
	if (req && r->tty)
		json_object_set_new(req, "pty", pty_json());
	json_decref(args);
	json_decref(env);
	json_decref(proc);
	return req;
}

static int finish(struct run *r, CURLcode rc)
{
	if (r->st.fail) {
		fprintf(stderr, "cubicle exec: %s\n", r->st.fail);
		return EXIT_OWN;
	}
	if (atomic_load(&r->abort)) {
		fprintf(stderr, "cubicle exec: interrupted before the command started\n");
		return 130;
	}
	if (r->http_status && r->http_status != 200) {
		char *e = agent_error_text(r->errbody.p, r->errbody.n);

		fprintf(stderr, "cubicle exec: the agent refused to start the command: HTTP %ld%s%s%s\n",
			r->http_status, e ? " (" : "", e ? e : "", e ? ")" : "");
		if (r->http_status == 401)
			fprintf(stderr, "cubicle exec: the agent wants its token: --token T or CUBICLE_AGENT_TOKEN\n");
		free(e);
		return EXIT_OWN;
	}
	if (rc != CURLE_OK && !r->st.got_eos) {
		if (r->st.got_end) {
			fprintf(stderr, "cubicle exec: warning: the stream was cut after the command ended (%s)\n",
				agent_curl_error(&r->a, rc));
			return r->st.status;
		}
		fprintf(stderr, "cubicle exec: %s%s\n", agent_curl_error(&r->a, rc),
			r->st.pid > 0 ? " (the stream was cut before the command ended)" : "");
		return EXIT_OWN;
	}
	if (r->st.eos_error) {
		fprintf(stderr, "cubicle exec: the agent ended the stream with an error: %s\n",
			r->st.eos_error);
		return EXIT_OWN;
	}
	if (!r->st.got_eos || !stream_idle(&r->st)) {
		fprintf(stderr, "cubicle exec: the agent's stream ended without its end message\n");
		return r->st.got_end ? r->st.status : EXIT_OWN;
	}
	if (!r->st.got_end) {
		fprintf(stderr, "cubicle exec: the stream ended without the command's exit status\n");
		return EXIT_OWN;
	}
	return r->st.status;
}

static int run_start(struct run *r, json_t *req)
{
	static const char *const hdr[] = { "Content-Type: application/connect+json",
					   "Connect-Protocol-Version: 1", NULL };
	struct curl_slist *list;
	char *js = json_dumps(req, JSON_COMPACT);
	size_t n = js ? strlen(js) : 0;
	uint8_t *body = js ? malloc(n + ENV_HDR_LEN) : NULL;
	CURLcode rc;

	r->curl = body ? agent_curl(&r->a, "/process.Process/Start", hdr, &list) : NULL;
	if (!r->curl) {
		free(js);
		free(body);
		fprintf(stderr, "cubicle exec: out of memory\n");
		return EXIT_OWN;
	}
	env_header(0, (uint32_t)n, body);
	memcpy(body + ENV_HDR_LEN, js, n);
	free(js);
	curl_easy_setopt(r->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(r->curl, CURLOPT_POSTFIELDSIZE, (long)(n + ENV_HDR_LEN));
	curl_easy_setopt(r->curl, CURLOPT_WRITEFUNCTION, on_stream);
	/* Output comes in messages of up to ~350 KiB: take them in few reads. */
	curl_easy_setopt(r->curl, CURLOPT_BUFFERSIZE, 512L << 10);
	curl_easy_setopt(r->curl, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(r->curl, CURLOPT_XFERINFODATA, r);
	curl_easy_setopt(r->curl, CURLOPT_NOPROGRESS, 0L);
	rc = agent_perform(&r->a, r->curl);
	curl_slist_free_all(list);
	curl_easy_cleanup(r->curl);
	free(body);
	return finish(r, rc);
}

enum { OPT_CWD = 256, OPT_USER, OPT_TOKEN, OPT_PORT, OPT_TIMEOUT };

static int exec_main(struct run *rp, int argc, char **argv, char **envs)
{
	static const struct option opts[] = {
		{ "interactive", no_argument, NULL, 'i' }, { "tty", no_argument, NULL, 't' },
		{ "env", required_argument, NULL, 'e' },   { "cwd", required_argument, NULL, OPT_CWD },
		{ "user", required_argument, NULL, OPT_USER },
		{ "token", required_argument, NULL, OPT_TOKEN },
		{ "port", required_argument, NULL, OPT_PORT },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "help", no_argument, NULL, 'h' },	   { NULL, 0, NULL, 0 },
	};
	struct run r = *rp;
	char *end;
	const char *cwd = NULL;
	int n_envs = 0, c, status;
	pthread_t sig_tid, in_tid;
	sigset_t set;
	json_t *req;

	r.a.token = getenv("CUBICLE_AGENT_TOKEN");
	if (r.a.token && !*r.a.token)
		r.a.token = NULL;
	opterr = 0; /* one message, ours */
	/* '+': options end at VM; what follows "--" is the command's. */
	while (envs && (c = getopt_long(argc, argv, "+ite:h", opts, NULL)) != -1) {
		switch (c) {
		case 'i': r.interactive = true; break;
		case 't': r.tty = true; break;
		case 'e':
			if (!strchr(optarg, '=') || optarg[0] == '=') {
				fprintf(stderr, "cubicle exec: -e wants KEY=VALUE, not %s\n", optarg);
				return EXIT_OWN;
			}
			envs[n_envs++] = optarg;
			break;
		case OPT_CWD: cwd = optarg; break;
		case OPT_USER: r.a.user = optarg; break;
		case OPT_TOKEN: r.a.token = optarg; break;
		case OPT_PORT:
			r.a.port = (unsigned)strtoul(optarg, &end, 10);
			if (*end || !*optarg || !r.a.port || strlen(optarg) > 10) {
				fprintf(stderr, "cubicle exec: --port wants a port number, not %s\n", optarg);
				return EXIT_OWN;
			}
			break;
		case OPT_TIMEOUT: {
			double s = strtod(optarg, &end);

			if (*end || !*optarg || !(s > 0 && s <= 86400)) {
				fprintf(stderr, "cubicle exec: --timeout wants seconds, not %s\n", optarg);
				return EXIT_OWN;
			}
			r.a.timeout_ms = (long)(s * 1000);
			break;
		}
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fprintf(stderr, "cubicle exec: bad option or missing value: %s (see cubicle exec --help)\n",
				argv[optind - 1]);
			return EXIT_OWN;
		}
	}
	if (!envs || argc - optind < 3 || strcmp(argv[optind + 1], "--")) {
		fputs(usage_text, stderr);
		return EXIT_OWN;
	}
	if (r.a.token && strlen(r.a.token) > 200) {
		fprintf(stderr, "cubicle exec: the token is too long\n");
		return EXIT_OWN;
	}
	if (r.a.user && (strlen(r.a.user) > 100 || strchr(r.a.user, ':'))) {
		fprintf(stderr, "cubicle exec: --user wants a user name\n");
		return EXIT_OWN;
	}
	r.a.vm = argv[optind];
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (agent_resolve(&r.a))
		return EXIT_OWN;
	rp->a.uds = r.a.uds; /* main frees it */
	req = start_request(&r, argv + optind + 2, envs, n_envs, cwd);
	if (!req)
		return EXIT_OWN;
	if (pthread_mutex_init(&r.lock, NULL) || pthread_cond_init(&r.cond, NULL) ||
	    pipe(r.stop_pipe)) {
		fprintf(stderr, "cubicle exec: out of resources\n");
		return EXIT_OWN;
	}
	stream_init(&r.st, STDOUT_FILENO, STDERR_FILENO, FRAME_MAX);
	r.st.on_start = stream_started;
	r.st.on_out_closed = stream_out_closed;
	r.st.arg = &r;
	/* Every thread blocks the forwarded signals; the signal thread takes them. */
	sig_set(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	r.sig_a = r.a;
	r.in_a = r.a;
	r.in_a.quiet = true;
	if (pthread_create(&sig_tid, NULL, signal_thread, &r) ||
	    (r.interactive && pthread_create(&in_tid, NULL, input_thread, &r))) {
		fprintf(stderr, "cubicle exec: cannot start a thread\n");
		return EXIT_OWN;
	}
	if (r.tty && r.interactive)
		tty_raw();
	status = run_start(&r, req);
	json_decref(req);
	pthread_mutex_lock(&r.lock);
	r.done = true;
	pthread_cond_broadcast(&r.cond);
	pthread_mutex_unlock(&r.lock);
	if (write(r.stop_pipe[1], "x", 1) < 0)
		status = status ? status : EXIT_OWN;
	pthread_kill(sig_tid, SIGUSR1);
	if (r.interactive)
		pthread_join(in_tid, NULL);
	pthread_join(sig_tid, NULL);
	tty_restore();
	stream_free(&r.st);
	free(r.errbody.p);
	curl_global_cleanup();
	return status;
}

int main(int argc, char **argv)
{
	struct run r = { .pid = -1, .a = { .port = AGENT_PORT, .timeout_ms = 10000,
					   .prog = "cubicle exec" } };
	char **envs = calloc((size_t)argc, sizeof(*envs));
	int status = exec_main(&r, argc, argv, envs);

	free(r.a.uds);
	free(envs);
	return status;
}
