/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Template builds through E2B's SDK (`Template.build`): POST /v3/templates
 * names the template and gets a build ID; each COPY step's files are
 * uploaded (GET /templates/ID/files/HASH says whether serve has them and
 * where to PUT them); POST /v2/templates/ID/builds/BUILD starts the build;
 * GET /templates/ID/builds/BUILD/status?logsOffset=N reports it.
 *
 * A build is a sandbox of its fromTemplate whose steps run through its
 * cubicle-agent: RUN and COPY as `cubicle exec` (COPY's archive brought in
 * by `cubicle cp` first), ENV, USER and WORKDIR as the agent's POST /init
 * (which every later process, the sandboxes of the template too, inherits);
 * the start command is left running and the ready command is tried until it
 * succeeds; then the sandbox is kept as a snapshot template of the build's
 * name, as POST /sandboxes/ID/snapshots keeps one, and ended. The steps run
 * in the guest, which is the build's own: what they print is the build's
 * log, bounded and made valid UTF-8, and nothing of the guest's is trusted
 * on the host.
 *
 * A build whose request (but its force flags), machine and base snapshot
 * are those of the template's last build is not run again: the template is
 * kept and only its tags are added (E2B's layer cache, for the whole build
 * at once). `force` (the SDK's skipCache) builds it again.
 */
#include <ctype.h>
#include <errno.h>
#include <nettle/sha2.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "build.h"
#include "oci.h"
#include "registry.h"
#include "serve.h"
#include "vmm.h"

extern char **environ;

#define LOG_KEEP      10000        /* log entries one build keeps */
#define LOG_BYTES     (4u << 20)   /* and their messages' bytes */
#define BUILDS_KEEP   16           /* finished builds remembered */
#define LINE_MAX_B    2048         /* a log line (longer ones are split) */
#define UPLOAD_MAX    (4ULL << 30) /* one COPY step's archive */
#define READY_S       300          /* the ready command's time to succeed */
#define BUILD_TIMEOUT 3600         /* the build sandbox's */

enum bstate { B_WAITING, B_BUILDING, B_READY, B_ERROR };
static const char *const bstate_name[] = { "waiting", "building", "ready", "error" };

struct build {
	struct build *next;
	char id[37], name[64], token[33];
	json_t *tags;               /* strings */
	unsigned cpus, mem;         /* asked for; 0: the base template's */
	enum bstate st;
	json_t *logs;               /* [{timestamp, level, message, step}] */
	json_t *reason;             /* {message, step} once it failed */
	json_t *spec;               /* the start request */
	unsigned dropped;           /* log entries past LOG_KEEP or LOG_BYTES */
	size_t log_bytes;
	time_t asked;               /* when it was requested */
	/* the build thread's own */
	struct sandbox *s;
	char step[16];              /* "base", "1", ..., "finalize" */
	char user[64];
};

static pthread_mutex_t blk = PTHREAD_MUTEX_INITIALIZER;
static struct build *builds;

/* ---- the log ---- */

static void now_iso(char *out, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	strftime(out, len, "%Y-%m-%dT%H:%M:%S", gmtime_r(&ts.tv_sec, &tm));
	snprintf(out + strlen(out), len - strlen(out), ".%03ldZ", ts.tv_nsec / 1000000);
}

static void blog(struct build *b, const char *level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void blog(struct build *b, const char *level, const char *fmt, ...)
{
	char msg[LINE_MAX_B + 256], when[40];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	now_iso(when, sizeof(when));
	pthread_mutex_lock(&blk);
	if (strcmp(level, "info") || (json_array_size(b->logs) < LOG_KEEP && b->log_bytes < LOG_BYTES)) {
		/* warnings and errors (the count of lines dropped, why it failed) always go in */
		json_array_append_new(b->logs, json_pack("{s:s,s:s,s:o,s:s}", "timestamp", when, "level", level,
							 "message", text_json(msg), "step", b->step));
		b->log_bytes += strlen(msg);
	} else {
		b->dropped++;
	}
	pthread_mutex_unlock(&blk);
}

/* ---- running cubicle exec and cubicle cp ---- */

/*
 * Starts @argv (argv[0] is srv.cubicle) with serve's environment but the
 * variables whose names start with @drop, and @add (NULL-terminated), stdin
 * /dev/null, stdout and stderr @out, in a process group of its own: its
 * pid, or -1 with @msg.
 */
static pid_t spawn_env(char **argv, int out, const char *drop, char *const *add, char *msg, size_t len)
{
	size_t n = 0, a = 0, k = 0;
	char **env;
	pid_t pid;
	int ret;

	while (environ[n])
		n++;
	while (add[a])
		a++;
	env = calloc(n + a + 1, sizeof(*env));
	if (!env)
		return snprintf(msg, len, "out of memory"), -1;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], drop, strlen(drop)))
			env[k++] = environ[i];
	for (size_t i = 0; i < a; i++)
		env[k++] = add[i];
	env[k] = NULL;
	ret = spawn_child(&pid, srv.cubicle, argv,
			  &(struct spawn_opts){ .out = out, .group = SPAWN_OWN_GROUP, .env = env });
	free(env);
	if (ret)
		return snprintf(msg, len, "starting %s: %s", srv.cubicle, strerror(ret)), -1;
	return pid;
}

#define TOKEN_VAR "CUBICLE_AGENT_TOKEN="
#define TOKEN_VAR_SIZE 100

/* The build sandbox's agent token as the variable @tok (TOKEN_VAR_SIZE bytes). */
static char *token_var(struct build *b, char *tok)
{
	snprintf(tok, TOKEN_VAR_SIZE, TOKEN_VAR "%s", b->s->token);
	return tok;
}

/* spawn_env with the build sandbox's agent token in CUBICLE_AGENT_TOKEN. */
static pid_t spawn_cubicle(struct build *b, char **argv, int out, char *msg, size_t len)
{
	char tok[TOKEN_VAR_SIZE], *add[] = { token_var(b, tok), NULL };

	return spawn_env(argv, out, TOKEN_VAR, add, msg, len);
}

/* Each line of what @fd gives until its end into the build log (a line
 * longer than LINE_MAX_B in pieces); while it waits, a stopping serve
 * sends @pid SIGTERM (cubicle exec passes it on to the guest's command). */
static void log_lines(struct build *b, int fd, pid_t pid)
{
	char line[LINE_MAX_B + 1];
	bool killed = false;
	size_t ln = 0;

	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t got;

		if (srv.stopping && !killed && pid > 0) {
			kill(pid, SIGTERM);
			killed = true;
		}
		if (poll(&pf, 1, 250) <= 0)
			continue;
		got = read(fd, line + ln, sizeof(line) - 1 - ln);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		ln += (size_t)got;
		for (;;) {
			char *nl = memchr(line, '\n', ln);
			size_t one = nl ? (size_t)(nl - line) : ln == sizeof(line) - 1 ? ln : 0;

			if (!one && !nl)
				break;
			line[one] = 0;
			if (one && line[one - 1] == '\r')
				line[one - 1] = 0;
			blog(b, "info", "%s", line);
			one += nl != NULL;
			memmove(line, line + one, ln - one);
			ln -= one;
		}
	}
	if (ln) {
		line[ln] = 0;
		blog(b, "info", "%s", line);
	}
}

static int wait_code(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 125;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs @argv as spawn_env does, its output line by line into the build
 * log: 0 with *@code its exit status (128+N for signal N), or -1 with @msg. */
static int run_env(struct build *b, char **argv, const char *drop, char *const *add, int *code, char *msg,
		   size_t len)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return snprintf(msg, len, "%s", strerror(errno)), -1;
	pid = spawn_env(argv, p[1], drop, add, msg, len);
	close(p[1]);
	if (pid > 0)
		log_lines(b, p[0], pid);
	close(p[0]);
	if (pid < 0)
		return -1;
	*code = wait_code(pid);
	return 0;
}

/* run_env with the build sandbox's agent token, as spawn_cubicle. */
static int run_cubicle(struct build *b, char **argv, int *code, char *msg, size_t len)
{
	char tok[TOKEN_VAR_SIZE], *add[] = { token_var(b, tok), NULL };

	return run_env(b, argv, TOKEN_VAR, add, code, msg, len);
}

/* The argv of `cubicle exec` of @cmd (NULL-terminated) as @user (NULL: the
 * agent's default) into @argv (40 entries), @uds its socket's path. */
static void exec_argv(struct build *b, const char *user, const char *const *cmd, char **argv, char *uds,
		      size_t ulen)
{
	unsigned n = 0;

	sbx_file(b->s, "v.sock", false, uds, ulen);
	argv[n++] = (char *)srv.cubicle;
	argv[n++] = "exec";
	argv[n++] = "--timeout";
	argv[n++] = "30";
	if (user && *user) {
		argv[n++] = "--user";
		argv[n++] = (char *)user;
	}
	argv[n++] = uds;
	argv[n++] = "--";
	while (*cmd && n < 39)
		argv[n++] = (char *)*cmd++;
	argv[n] = NULL;
}

/* `cubicle exec` of @cmd in the guest as @user: 0 when it exits 0, else -1
 * with @msg. */
static int guest(struct build *b, const char *user, const char *const *cmd, char *msg, size_t len)
{
	char uds[300], *argv[40];
	int code;

	exec_argv(b, user, cmd, argv, uds, sizeof(uds));
	if (run_cubicle(b, argv, &code, msg, len))
		return -1;
	if (code == 125)
		return snprintf(msg, len, "cubicle exec could not run it (its reason is in the log above)"), -1;
	if (code)
		return snprintf(msg, len, "exited with status %d", code), -1;
	return 0;
}

/* ---- the steps ---- */

/* A COPY in the guest: $1 the uploaded archive, $2 the source (a path or
 * pattern the SDK resolved against its context folder, as the archive's
 * entries are named), $3 the destination, $4 the owner, $5 the mode, $6 "z"
 * for a gzip archive. Docker's rules: one file to a destination not ending
 * in '/' is that file; otherwise everything (a folder's contents) goes into
 * the destination folder. */
static const char copy_sh[] =
	"set -e\n"
	"a=$1 src=$2 dest=$3 owner=$4 mode=$5 z=$6\n"
	"t=$(mktemp -d /tmp/.cubicle-copy.XXXXXX)\n"
	"tar -x${z}f \"$a\" -C \"$t\"\n"
	"rm -f \"$a\"\n"
	"cd \"$t\"\n"
	"set --\n"
	"n=0 one=\n"
	"for f in $src; do\n"
	"  [ -e \"$f\" ] || [ -L \"$f\" ] || { echo \"COPY: nothing in the upload is $src\" >&2; exit 1; }\n"
	"  n=$((n + 1)) one=$f\n"
	"done\n"
	"case $dest in */) into=1 ;; *) into= ;; esac\n"
	"if [ $n = 1 ] && { [ -L \"$one\" ] || [ ! -d \"$one\" ]; } && [ -z \"$into\" ]; then\n"
	"  mkdir -p \"$(dirname \"$dest\")\"\n"
	"  cp -a \"$one\" \"$dest\"\n"
	"  set -- \"$dest\"\n"
	"else\n"
	"  mkdir -p \"$dest\"\n"
	"  for f in $src; do\n"
	"    if [ -d \"$f\" ] && [ ! -L \"$f\" ]; then\n"
	"      for c in \"$f\"/* \"$f\"/.[!.]* \"$f\"/..?*; do\n"
	"        [ -e \"$c\" ] || [ -L \"$c\" ] || continue\n"
	"        cp -a \"$c\" \"$dest/\"\n"
	"        set -- \"$@\" \"${dest%/}/${c##*/}\"\n"
	"      done\n"
	"    else\n"
	"      cp -a \"$f\" \"$dest/\"\n"
	"      set -- \"$@\" \"${dest%/}/${f##*/}\"\n"
	"    fi\n"
	"  done\n"
	"fi\n"
	"cd /\n"
	"rm -rf \"$t\"\n"
	"[ -z \"$owner\" ] || [ $# = 0 ] || chown -R \"$owner\" \"$@\"\n"
	"[ -z \"$mode\" ] || [ $# = 0 ] || chmod -R \"$mode\" \"$@\"\n";

static void files_path(const char *hash, char *out, size_t len)
{
	snprintf(out, len, "%s/build-files/%s", srv.state_dir, hash);
}

static int step_copy(struct build *b, json_t *args, const char *hash, char *msg, size_t len)
{
	const char *src = json_string_value(json_array_get(args, 0)),
		   *dest = json_string_value(json_array_get(args, 1)),
		   *owner = json_string_value(json_array_get(args, 2)) ?: "",
		   *mode = json_string_value(json_array_get(args, 3)) ?: "";
	char file[400], uds[300], to[360], gpath[80];
	unsigned char magic[2] = { 0 };
	int fd, code;

	files_path(hash, file, sizeof(file));
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return snprintf(msg, len, "its files (%s) were not uploaded", hash), -1;
	if (read(fd, magic, 2) != 2)
		magic[0] = 0;
	close(fd);
	snprintf(gpath, sizeof(gpath), "/tmp/.cubicle-copy-%.16s", hash);
	sbx_file(b->s, "v.sock", false, uds, sizeof(uds));
	snprintf(to, sizeof(to), "%s:%s", uds, gpath);
	{
		char *argv[] = { (char *)srv.cubicle, "cp", "--quiet", "--user", "root", "--timeout", "30",
				 file, to, NULL };

		if (run_cubicle(b, argv, &code, msg, len))
			return -1;
		if (code)
			return snprintf(msg, len, "cubicle cp of its files into the guest failed (status %d)", code), -1;
	}
	{
		const char *cmd[] = { "/bin/sh", "-c", copy_sh, "copy", gpath, src, dest, *owner ? owner : "",
				      mode, magic[0] == 0x1f && magic[1] == 0x8b ? "z" : "", NULL };

		return guest(b, "root", cmd, msg, len);
	}
}

/*
 * The start command is started as a process of the agent's own (as a
 * command the SDK runs in the background: `commands.list` shows it, in
 * every sandbox of the template too, whose memory holds it) by a
 * `cubicle exec` left running meanwhile, its output in a file beside; then
 * the ready command is tried once a second until it exits 0 (READY_S at
 * most). That client is then ended with SIGKILL (a SIGTERM it would pass
 * on to the command) and what the command said is put in the build log.
 */
static int finalize(struct build *b, const char *start, const char *ready, char *msg, size_t len)
{
	char out[420], uds[300], *argv[40];
	const char *cmd[] = { "/bin/bash", "-l", "-c", start, NULL };
	double t0 = now_ms();
	pid_t pid = -1;
	int fd = -1, ret = 0, code = -1;

	if (start && *start) {
		blog(b, "info", "start command: %s", start);
		snprintf(out, sizeof(out), "%s/start.log", b->s->dir);
		fd = open(out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0)
			return snprintf(msg, len, "%s: %s", out, strerror(errno)), -1;
		exec_argv(b, b->user, cmd, argv, uds, sizeof(uds));
		pid = spawn_cubicle(b, argv, fd, msg, len);
		if (pid < 0) {
			close(fd);
			return -1;
		}
	}
	if (ready && *ready)
		blog(b, "info", "ready command: %s (tried once a second, %u s at most)", ready, READY_S);
	else if (pid > 0)
		sleep(2); /* no ready command: a moment for the start command to start */
	while (ready && *ready) {
		const char *rcmd[] = { "/bin/bash", "-l", "-c", ready, NULL };
		char why[300];

		if (!guest(b, b->user, rcmd, why, sizeof(why))) {
			blog(b, "info", "ready");
			break;
		}
		if (pid > 0 && waitpid(pid, &code, WNOHANG) == pid) {
			code = WIFEXITED(code) ? WEXITSTATUS(code) : 128 + WTERMSIG(code);
			pid = -1;
			if (code) {
				ret = -1;
				snprintf(msg, len, "the start command ended with status %d before the ready command succeeded",
					 code);
				break;
			}
		}
		if (srv.stopping) {
			ret = -1;
			snprintf(msg, len, "serve is stopping");
			break;
		}
		if (now_ms() - t0 > READY_S * 1000.0) {
			ret = -1;
			snprintf(msg, len, "the ready command did not succeed within %u s", READY_S);
			break;
		}
		sleep(1);
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		code = wait_code(pid);
	}
	if (fd >= 0) {
		lseek(fd, 0, SEEK_SET);
		log_lines(b, fd, -1);
		close(fd);
		unlink(out);
		if (code == 125 && !ret)
			ret = -1, snprintf(msg, len, "cubicle exec could not start it (its reason is in the log above)");
	}
	return ret;
}

/* A user's name or a tag: 1 to 32 letters, digits, '.', '_' or '-'. */
static bool word_ok(const char *u)
{
	if (!*u || strlen(u) > 32)
		return false;
	for (; *u; u++)
		if (!isalnum((unsigned char)*u) && !strchr("._-", *u))
			return false;
	return true;
}

/* One step (validated by build_start). */
static int step(struct build *b, json_t *st, char *msg, size_t len)
{
	const char *type = json_string_value(json_object_get(st, "type"));
	json_t *args = json_object_get(st, "args"), *init = NULL;
	const char *a0 = json_string_value(json_array_get(args, 0));
	int ret;

	if (!strcmp(type, "RUN")) {
		const char *user = json_string_value(json_array_get(args, 1));
		const char *cmd[] = { "/bin/bash", "-l", "-c", a0, NULL };

		blog(b, "info", "RUN %s%s%s%s", a0, user && *user ? " (as " : "", user && *user ? user : "",
		     user && *user ? ")" : "");
		return guest(b, user && *user ? user : b->user, cmd, msg, len);
	}
	if (!strcmp(type, "COPY")) {
		blog(b, "info", "COPY %s %s", a0, json_string_value(json_array_get(args, 1)));
		return step_copy(b, args, json_string_value(json_object_get(st, "filesHash")), msg, len);
	}
	if (!strcmp(type, "WORKDIR")) {
		/* made by root, given to the USER set (if any), as Docker does */
		const char *cmd[] = { "/bin/sh", "-c", "mkdir -p \"$1\" && { [ -z \"$2\" ] || chown \"$2\" \"$1\"; }",
				      "workdir", a0, b->user, NULL };

		blog(b, "info", "WORKDIR %s", a0);
		if (guest(b, "root", cmd, msg, len))
			return -1;
		init = json_pack("{s:s}", "defaultWorkdir", a0);
	} else if (!strcmp(type, "USER")) {
		const char *cmd[] = { "id", a0, NULL };

		blog(b, "info", "USER %s", a0);
		if (guest(b, "root", cmd, msg, len))
			return snprintf(msg, len, "the guest has no user '%s'", a0), -1;
		snprintf(b->user, sizeof(b->user), "%s", a0);
		init = json_pack("{s:s}", "defaultUser", a0);
	} else { /* ENV */
		json_t *envs = json_object();

		for (size_t i = 0; i + 1 < json_array_size(args); i += 2) {
			blog(b, "info", "ENV %s=%s", json_string_value(json_array_get(args, i)),
			     json_string_value(json_array_get(args, i + 1)));
			json_object_set(envs, json_string_value(json_array_get(args, i)), json_array_get(args, i + 1));
		}
		init = json_pack("{s:o}", "envVars", envs);
	}
	ret = init ? vmm_agent_init(b->s, init, msg, len) : (snprintf(msg, len, "out of memory"), -1);
	json_decref(init);
	return ret;
}

/* snapshot.json's read-modify-write (a build's record, tags) */
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;

/* @rec as STATE/templates/@name/snapshot.json (a new file renamed over). */
static int record_write(const char *name, json_t *rec)
{
	char path[400], tmp[420];

	snprintf(path, sizeof(path), "%s/templates/%s/snapshot.json", srv.state_dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (json_dump_file(rec, tmp, JSON_COMPACT) || rename(tmp, path)) {
		serve_log("%s: cannot be written", path);
		unlink(tmp);
		return -1;
	}
	return 0;
}

/*
 * What decides a build's result (its cache key): the request but its force
 * flags, the machine asked for, and the base template's snapshot as it is
 * (its manifest's device, inode, time and size: a base built again is
 * another). NULL when the base's manifest cannot be read.
 */
static json_t *build_key(const struct build *b, const char *from)
{
	char path[400], base[256];
	json_t *spec, *s;
	struct stat st;
	size_t i;

	snprintf(path, sizeof(path), "%s/templates/%s/snap/manifest.json", srv.state_dir, from);
	if (stat(path, &st))
		return NULL;
	snprintf(base, sizeof(base), "%s %llu:%llu %lld.%09ld %lld", from, (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
		 (long long)st.st_size);
	spec = json_deep_copy(b->spec);
	json_object_del(spec, "force");
	json_object_del(spec, "fromImageRegistry"); /* the key is kept on disk: no password in it */
	json_array_foreach(json_object_get(spec, "steps"), i, s)
		json_object_del(s, "force");
	return json_pack("{s:o,s:s,s:I,s:I}", "spec", spec, "base", base, "cpus", (json_int_t)b->cpus, "mem",
			 (json_int_t)b->mem);
}

/* The request asks for a build past the cache (force, on it or a step). */
static bool build_forced(json_t *spec)
{
	json_t *s;
	size_t i;

	if (json_is_true(json_object_get(spec, "force")))
		return true;
	json_array_foreach(json_object_get(spec, "steps"), i, s)
		if (json_is_true(json_object_get(s, "force")))
			return true;
	return false;
}

/*
 * Adds the build's own facts (@key: its cache key, may be NULL) and its tags
 * to its template's snapshot.json; @cached: the template was kept, its tags
 * are added to (a build that ran replaces them). With @cached, false when
 * the template is no longer the one @key names (removed or replaced since).
 */
static bool record_build(struct build *b, const char *from, json_t *key, bool cached)
{
	json_t *rec, *spec = b->spec, *t;
	bool ok = false;
	size_t i;

	pthread_mutex_lock(&rec_lock);
	rec = sbx_snapshot_record(b->name);
	if (rec && (!cached || json_equal(json_object_get(json_object_get(rec, "build"), "key"), key))) {
		json_t *tags = cached ? json_object_get(rec, "tags") : NULL;

		if (json_is_array(tags)) {
			json_array_foreach(b->tags, i, t) {
				size_t j;
				json_t *u;
				bool have = false;

				json_array_foreach(tags, j, u)
					have |= json_equal(t, u);
				if (!have)
					json_array_append(tags, t);
			}
		} else {
			json_object_set(rec, "tags", b->tags);
		}
		json_object_set_new(rec, "build", json_pack("{s:s,s:s,s:s?,s:s?,s:I,s:O?}", "buildID", b->id, "from", from,
							    "startCmd", json_string_value(json_object_get(spec, "startCmd")),
							    "readyCmd", json_string_value(json_object_get(spec, "readyCmd")),
							    "steps",
							    (json_int_t)json_array_size(json_object_get(spec, "steps")),
							    "key", key));
		ok = !record_write(b->name, rec);
	}
	pthread_mutex_unlock(&rec_lock);
	json_decref(rec);
	return ok;
}

/* The template's last build had @key, and it is still there: its build ID. */
static bool build_cached(const struct build *b, json_t *key, char *last, size_t len)
{
	json_t *rec = key ? sbx_snapshot_record(b->name) : NULL, *bl = json_object_get(rec, "build");
	char snap[400];
	bool hit;

	snprintf(snap, sizeof(snap), "%s/templates/%s/snap/manifest.json", srv.state_dir, b->name);
	hit = bl && json_equal(json_object_get(bl, "key"), key) && !access(snap, F_OK);
	if (hit)
		snprintf(last, len, "%s", json_string_value(json_object_get(bl, "buildID")) ?: "?");
	json_decref(rec);
	return hit;
}

/* ---- fromImage: a template of the image, made once ---- */

static pthread_mutex_t image_lock = PTHREAD_MUTEX_INITIALIZER;

/* The template of image @ref in @from ("image-" and 16 hex digits of the
 * reference's sha256): made with `cubicle template build --image` (booting
 * srv.image_vm, jailed as serve's sandboxes are) unless one is there and
 * the build is not forced, its output in the build log. 0, or -1 (@msg). */
static int image_template(struct build *b, const char *ref, bool forced, char *from, size_t flen, char *msg,
			  size_t len)
{
	json_t *cred = json_object_get(b->spec, "fromImageRegistry");
	const char *user = json_string_value(json_object_get(cred, "username"));
	const char *pass = json_string_value(json_object_get(cred, "password"));
	struct sha256_ctx c;
	uint8_t sum[SHA256_DIGEST_SIZE];
	char snap[400], ju[32], *av[16], *eu = NULL, *ep = NULL, *add[3] = { NULL };
	size_t n = 0, k = 0;
	int code = 0, ret = -1;

	sha256_init(&c);
	sha256_update(&c, strlen(ref), (const uint8_t *)ref);
	sha256_digest(&c, sizeof(sum), sum);
	k = (size_t)snprintf(from, flen, "image-");
	for (size_t i = 0; i < 8 && k + 2 < flen; i++, k += 2)
		snprintf(from + k, flen - k, "%02x", sum[i]);
	snprintf(snap, sizeof(snap), "%s/templates/%s/snap", srv.state_dir, from);
	pthread_mutex_lock(&image_lock);
	if (!forced && !access(snap, F_OK)) {
		blog(b, "info", "image %s: its template '%s' is there (made before); skipCache() pulls it again", ref,
		     from);
		pthread_mutex_unlock(&image_lock);
		return 0;
	}
	blog(b, "info", "image %s: pulling it and making its template '%s' (cubicle template build --image)", ref,
	     from);
	av[n++] = (char *)srv.cubicle;
	av[n++] = "template";
	av[n++] = "build";
	av[n++] = from;
	av[n++] = (char *)srv.image_vm;
	av[n++] = "--image";
	av[n++] = (char *)ref;
	av[n++] = "--state";
	av[n++] = (char *)srv.state_dir;
	av[n++] = "--force";
	if (srv.jail_user) { /* one uid for the build: a range's first */
		snprintf(ju, sizeof(ju), "%u:%u", srv.jail_first ? srv.jail_first : srv.jail_uid,
			 srv.jail_first ? srv.jail_first : srv.jail_gid);
		av[n++] = "--jail-user";
		av[n++] = ju;
		if (srv.jail_cgroup) {
			av[n++] = "--jail-cgroup";
			av[n++] = (char *)srv.jail_cgroup;
		}
	}
	av[n] = NULL;
	/* the build's credentials go to the child alone; serve's own never */
	if (user && pass) {
		if (asprintf(&eu, "CUBICLE_REGISTRY_USER=%s", user) < 0)
			eu = NULL;
		if (asprintf(&ep, "CUBICLE_REGISTRY_PASSWORD=%s", pass) < 0)
			ep = NULL;
		if (!eu || !ep) {
			snprintf(msg, len, "out of memory");
			goto out;
		}
	}
	add[0] = eu; /* NULL without credentials: none added */
	add[1] = ep;
	if (!run_env(b, av, "CUBICLE_REGISTRY_", add, &code, msg, len)) {
		if (code)
			snprintf(msg, len, "image %s: cubicle template build --image failed (status %d): its "
					   "output is in the build's logs", ref, code);
		else
			ret = 0;
	}
out:
	free(eu);
	free(ep);
	pthread_mutex_unlock(&image_lock);
	return ret;
}

/* The image's own Env and WorkingDir (its config, kept by `cubicle template
 * build --image` in image.json) set in the build's sandbox as ENV and
 * WORKDIR steps would, before the build's steps: 0, or -1 (@msg). */
static int image_steps(struct build *b, const char *from, char *msg, size_t len)
{
	char p[400];
	json_t *cfg, *env, *e, *args;
	const char *wd;
	size_t i;
	int ret = 0;

	snprintf(p, sizeof(p), "%s/templates/%s/image.json", srv.state_dir, from);
	if (!(cfg = json_load_file(p, 0, NULL)))
		return 0; /* none kept: nothing to set */
	env = json_object_get(cfg, "Env");
	args = json_array();
	json_array_foreach(env, i, e) {
		const char *kv = json_string_value(e), *eq = kv ? strchr(kv, '=') : NULL;

		if (!eq || eq == kv || (size_t)(eq - kv) > 255)
			continue;
		json_array_append_new(args, json_stringn(kv, (size_t)(eq - kv)));
		json_array_append_new(args, json_string(eq + 1));
	}
	if (json_array_size(args)) {
		json_t *st = json_pack("{s:s,s:O}", "type", "ENV", "args", args);

		blog(b, "info", "the image's Env:");
		ret = st ? step(b, st, msg, len) : -1;
		json_decref(st);
	}
	wd = json_string_value(json_object_get(cfg, "WorkingDir"));
	if (!ret && wd && wd[0] == '/') {
		json_t *st = json_pack("{s:s,s:[s]}", "type", "WORKDIR", "args", wd);

		blog(b, "info", "the image's WorkingDir:");
		ret = st ? step(b, st, msg, len) : -1;
		json_decref(st);
	}
	json_decref(args);
	json_decref(cfg);
	return ret;
}

static void *build_main(void *arg)
{
	struct build *b = arg;
	json_t *spec = b->spec, *steps = json_object_get(spec, "steps"), *key;
	char from[64], msg[700] = "", last[40];
	bool cached = false;
	json_t *req;
	int st;

	snprintf(b->step, sizeof(b->step), "base");
	if (json_string_value(json_object_get(spec, "fromImage"))) {
		if (image_template(b, json_string_value(json_object_get(spec, "fromImage")), build_forced(spec), from,
				   sizeof(from), msg, sizeof(msg))) {
			st = 500;
			goto done; /* (no key yet, no sandbox) */
		}
	} else {
		template_resolve(json_string_value(json_object_get(spec, "fromTemplate")) ?: "base", from, sizeof(from));
	}
	key = build_key(b, from);
	if (!build_forced(spec) && build_cached(b, key, last, sizeof(last)) && record_build(b, from, key, true)) {
		blog(b, "info", "template '%s': nothing changed since its build %s (the same base '%s' as it is, steps, files, "
				"start and ready commands, machine): it is kept as it is; skipCache() builds it again",
		     b->name, last, from);
		json_decref(key);
		st = 0;
		cached = true;
		goto done;
	}
	blog(b, "info", "building template '%s' (build %s) from template '%s'", b->name, b->id, from);
	req = json_pack("{s:s,s:i,s:{s:s}}", "templateID", from, "timeout", BUILD_TIMEOUT, "metadata",
			"cubicle.build", b->name);
	st = req ? sbx_create(from, req, &b->s, msg, sizeof(msg)) : 500;
	json_decref(req);
	if (!st && ((b->cpus && b->cpus != b->s->vcpus) || (b->mem && b->mem != b->s->memory_mib))) {
		snprintf(msg, sizeof(msg),
			 "cpuCount %u, memoryMB %u: a template built from '%s' keeps its machine (%u vCPUs, %u MiB): "
			 "build the base template with the machine wanted",
			 b->cpus ? b->cpus : b->s->vcpus, b->mem ? b->mem : b->s->memory_mib, from, b->s->vcpus,
			 b->s->memory_mib);
		st = 400;
	}
	if (!st)
		blog(b, "info", "sandbox %s runs the build", b->s->id);
	if (!st && json_object_get(spec, "fromImage") && image_steps(b, from, msg, sizeof(msg)))
		st = 500;
	for (size_t i = 0; !st && i < json_array_size(steps); i++) {
		snprintf(b->step, sizeof(b->step), "%zu", i + 1);
		sbx_set_timeout(b->s, BUILD_TIMEOUT);
		if (srv.stopping)
			st = 503, snprintf(msg, sizeof(msg), "serve is stopping");
		else if (step(b, json_array_get(steps, i), msg, sizeof(msg)))
			st = 500;
	}
	if (!st) {
		snprintf(b->step, sizeof(b->step), "finalize");
		if (finalize(b, json_string_value(json_object_get(spec, "startCmd")),
			     json_string_value(json_object_get(spec, "readyCmd")), msg, sizeof(msg)))
			st = 500;
	}
	if (!st) {
		json_t *sreq = json_pack("{s:s}", "name", b->name), *made = NULL;

		blog(b, "info", "snapshotting sandbox %s as template '%s'", b->s->id, b->name);
		st = sbx_snapshot(b->s, sreq, &made, msg, sizeof(msg));
		json_decref(sreq);
		json_decref(made);
		if (!st)
			record_build(b, from, key, false);
	}
	json_decref(key);
	if (b->s) {
		char why[300];

		if (sbx_kill(b->s, why, sizeof(why)))
			blog(b, "warn", "ending the build sandbox %s: %s", b->s->id, why);
		sbx_put(b->s);
		b->s = NULL;
	}
done:
	if (b->dropped)
		blog(b, "warn", "%u lines of output were dropped: a build keeps %u lines, %u MiB", b->dropped, LOG_KEEP,
		     LOG_BYTES >> 20);
	if (st) {
		blog(b, "error", "step %s: %s", b->step, msg);
		serve_log("build %s of template '%s': step %s failed: %s", b->id, b->name, b->step, msg);
	} else {
		snprintf(b->step, sizeof(b->step), "finalize");
		blog(b, "info", "template '%s' is ready", b->name);
		serve_log("build %s: template '%s' %s", b->id, b->name, cached ? "kept (nothing changed)" : "made");
	}
	pthread_mutex_lock(&blk);
	if (st) {
		/* the SDK shows the message with the step's place in the user's code */
		char why[900];
		const char *type = json_string_value(json_object_get(json_array_get(steps, strtoul(b->step, NULL, 10) - 1), "type"));

		if (!strcmp(b->step, "base"))
			snprintf(why, sizeof(why), "the build's sandbox of '%s': %s", from, msg);
		else if (!strcmp(b->step, "finalize"))
			snprintf(why, sizeof(why), "the start or ready command: %s", msg);
		else
			snprintf(why, sizeof(why), "step %s (%s): %s", b->step, type ? type : "?", msg);
		b->reason = json_pack("{s:s,s:s}", "message", why, "step", b->step);
	}
	b->st = st ? B_ERROR : B_READY;
	pthread_mutex_unlock(&blk);
	return NULL;
}

/* ---- requests ---- */

static bool hash_ok(const char *h)
{
	size_t n = strspn(h, "0123456789abcdef");

	return n == 64 && !h[n];
}

/* The tags in @req's "tags" (an array of good tags, not empty): 0, or 400 with @msg. */
static int tags_of(json_t *req, json_t **tags, char *msg, size_t len)
{
	json_t *t;
	size_t i;

	*tags = json_object_get(req, "tags");
	if (!json_is_array(*tags) || !json_array_size(*tags))
		return snprintf(msg, len, "tags: a list of tags is required"), 400;
	json_array_foreach(*tags, i, t)
		if (!json_is_string(t) || !word_ok(json_string_value(t)) || !strcmp(json_string_value(t), "default"))
			return snprintf(msg, len, "tag %s: letters, digits, '.', '_' and '-' (1-32), not 'default'",
					json_is_string(t) ? json_string_value(t) : "(not a string)"), 400;
	return 0;
}

/* The record of template @name (rec_lock held), or NULL with a status. */
static json_t *tag_record(const char *name, int *st, char *msg, size_t len)
{
	char path[400];
	json_t *rec = template_name_ok(name) ? sbx_snapshot_record(name) : NULL;

	snprintf(path, sizeof(path), "%s/templates/%s", srv.state_dir, name);
	if (!rec && template_name_ok(name) && !access(path, F_OK))
		*st = 409, snprintf(msg, len, "template '%s' was made by `cubicle template build`: it keeps no tags", name);
	else if (!rec)
		*st = 404, snprintf(msg, len, "template '%s' not found", name);
	return rec;
}

static const char *build_id_of(json_t *rec, const char *name)
{
	return json_string_value(json_object_get(json_object_get(rec, "build"), "buildID")) ?: name;
}

/* POST /templates/tags {target, tags} (@add) or DELETE {name, tags}: the
 * tags added to or removed from the template's record; *@out (when
 * adding) {tags, buildID}. */
static int tags_change(json_t *req, bool add, json_t **out, char *msg, size_t len)
{
	const char *n = json_string_value(json_object_get(req, add ? "target" : "name"));
	json_t *tags, *rec, *have, *t;
	char name[80];
	int st = 0;
	size_t i;

	if (out)
		*out = NULL;
	if (!n || !*n)
		return snprintf(msg, len, "%s", add ? "target (NAME or NAME:TAG) is required" : "name is required"), 400;
	if ((st = tags_of(req, &tags, msg, len)))
		return st;
	template_resolve(n, name, sizeof(name));
	pthread_mutex_lock(&rec_lock);
	rec = tag_record(name, &st, msg, len);
	have = json_object_get(rec, "tags");
	if (rec && !json_is_array(have))
		json_object_set_new(rec, "tags", have = json_array());
	json_array_foreach(tags, i, t) {
		size_t j = json_array_size(have);

		/* from the end: a removal leaves the entries still to look at in place */
		while (j-- > 0)
			if (json_equal(json_array_get(have, j), t))
				break;
		if (add && j == (size_t)-1)
			json_array_append(have, t);
		else if (!add && j != (size_t)-1)
			json_array_remove(have, j);
	}
	if (rec && record_write(name, rec))
		st = 500, snprintf(msg, len, "template '%s': its record cannot be written", name);
	else if (rec && add)
		*out = json_pack("{s:O,s:s}", "tags", tags, "buildID", build_id_of(rec, name));
	pthread_mutex_unlock(&rec_lock);
	json_decref(rec);
	if (!st)
		serve_log("template '%s': tags %s", name, add ? "assigned" : "removed");
	return st;
}

int template_tags_assign(json_t *req, json_t **out, char *msg, size_t len)
{
	return tags_change(req, true, out, msg, len);
}

int template_tags_remove(json_t *req, char *msg, size_t len)
{
	return tags_change(req, false, NULL, msg, len);
}

int template_tags_list(const char *tid, json_t **out, char *msg, size_t len)
{
	char name[80], when[32];
	json_t *rec, *t;
	int st = 0;
	size_t i;

	*out = NULL;
	template_resolve(tid, name, sizeof(name));
	pthread_mutex_lock(&rec_lock);
	rec = tag_record(name, &st, msg, len);
	pthread_mutex_unlock(&rec_lock);
	if (!rec)
		return st;
	iso_time((time_t)json_integer_value(json_object_get(rec, "created")), when, sizeof(when));
	/* "default": NAME alone is the newest build (template_resolve) */
	*out = json_pack("[{s:s,s:s,s:s}]", "tag", "default", "buildID", build_id_of(rec, name), "createdAt", when);
	json_array_foreach(json_object_get(rec, "tags"), i, t)
		if (json_is_string(t) && strcmp(json_string_value(t), "default"))
			json_array_append_new(*out, json_pack("{s:O,s:s,s:s}", "tag", t, "buildID", build_id_of(rec, name),
							      "createdAt", when));
	json_decref(rec);
	return *out ? 0 : (snprintf(msg, len, "out of memory"), 500);
}

/* A build of template @tid with id @bid (NULL: the newest of @tid), locked. */
static struct build *find(const char *tid, const char *bid)
{
	struct build *b;

	for (b = builds; b; b = b->next)
		if (!strcmp(b->name, tid) && (!bid || !strcmp(b->id, bid)))
			return b;
	return NULL;
}

static void build_free(struct build *b)
{
	json_decref(b->tags);
	json_decref(b->logs);
	json_decref(b->reason);
	json_decref(b->spec);
	free(b);
}

void template_resolve(const char *in, char *out, size_t len)
{
	char path[400], name[64];
	const char *colon = strchr(in, ':');
	json_t *rec, *tags, *t;
	size_t i;

	snprintf(out, len, "%s", in);
	snprintf(path, sizeof(path), "%s/templates/%s", srv.state_dir, in);
	if (!colon || colon == in || (size_t)(colon - in) >= sizeof(name) || !access(path, F_OK))
		return;
	snprintf(name, sizeof(name), "%.*s", (int)(colon - in), in);
	if (!template_name_ok(name))
		return;
	if (!strcmp(colon + 1, "default")) {
		snprintf(out, len, "%s", name);
		return;
	}
	rec = sbx_snapshot_record(name);
	tags = json_object_get(rec, "tags");
	json_array_foreach(tags, i, t)
		if (json_is_string(t) && !strcmp(json_string_value(t), colon + 1))
			snprintf(out, len, "%s", name);
	json_decref(rec);
}

int build_request(json_t *req, json_t **out, char *msg, size_t len)
{
	const char *full = json_string_value(json_object_get(req, "name")) ?:
			   json_string_value(json_object_get(req, "alias"));
	json_t *tags = json_array(), *t, *cpu = json_object_get(req, "cpuCount"),
	       *mem = json_object_get(req, "memoryMB");
	char name[64], path[400];
	struct build *b, **pp;
	unsigned done = 0;
	size_t i;

	*out = NULL;
	if (!full || !*full)
		return json_decref(tags), snprintf(msg, len, "name is required"), 400;
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(full, ":"), full);
	if (strlen(full) > 128 || !template_name_ok(name) || strchr(name, ':'))
		return json_decref(tags), snprintf(msg, len, "name '%s' is not a template name (1-60 characters, no '/', ' ' or leading '.', then :TAG)", full), 400;
	if (full[strlen(name)] == ':')
		json_array_append_new(tags, json_string(full + strlen(name) + 1));
	json_array_foreach(json_object_get(req, "tags"), i, t)
		json_array_append(tags, t);
	json_array_foreach(tags, i, t)
		if (!json_is_string(t) || !word_ok(json_string_value(t)))
			return json_decref(tags), snprintf(msg, len, "tag %s: letters, digits, '.', '_' and '-' (1-32)",
							  json_is_string(t) ? json_string_value(t) : "(not a string)"), 400;
	if ((cpu && (!json_is_integer(cpu) || json_integer_value(cpu) < 1 || json_integer_value(cpu) > 64)) ||
	    (mem && (!json_is_integer(mem) || json_integer_value(mem) < 1 || json_integer_value(mem) > 1 << 20)))
		return json_decref(tags), snprintf(msg, len, "cpuCount and memoryMB must be positive integers"), 400;
	snprintf(path, sizeof(path), "%s/templates/%s", srv.state_dir, name);
	{
		json_t *rec = sbx_snapshot_record(name);

		if (!rec && !access(path, F_OK))
			return json_decref(tags),
			       snprintf(msg, len, "template '%s' exists and is not a snapshot (`cubicle template build` made it)",
					name), 409;
		json_decref(rec);
	}
	b = calloc(1, sizeof(*b));
	if (!b || !(b->logs = json_array()))
		return free(b), json_decref(tags), snprintf(msg, len, "out of memory"), 500;
	uuid4(b->id);
	rand_hex(b->token, 32);
	snprintf(b->name, sizeof(b->name), "%s", name);
	snprintf(b->step, sizeof(b->step), "base");
	b->tags = tags;
	b->asked = time(NULL);
	b->cpus = (unsigned)json_integer_value(cpu);
	b->mem = (unsigned)json_integer_value(mem);
	pthread_mutex_lock(&blk);
	b->next = builds;
	builds = b;
	/* the oldest finished builds beyond BUILDS_KEEP are forgotten */
	for (pp = &builds; *pp;) {
		struct build *o = *pp;

		/* and those never started within a day */
		if (((o->st == B_READY || o->st == B_ERROR) && ++done > BUILDS_KEEP) ||
		    (o->st == B_WAITING && o->asked + 86400 < b->asked)) {
			*pp = o->next;
			build_free(o);
		} else {
			pp = &o->next;
		}
	}
	pthread_mutex_unlock(&blk);
	serve_log("build %s of template '%s' requested", b->id, name);
	*out = json_pack("{s:s,s:s,s:b,s:[s],s:[s],s:O}", "templateID", name, "buildID", b->id, "public", 0,
			 "names", name, "aliases", name, "tags", tags);
	if (*out && !json_array_size(tags))
		json_object_set_new(*out, "tags", json_pack("[s]", "default"));
	return *out ? 0 : (snprintf(msg, len, "out of memory"), 500);
}

int build_file_link(const char *tid, const char *hash, const char *host, json_t **out, char *msg, size_t len)
{
	char file[400], url[700], tok[33];
	struct build *b;

	*out = NULL;
	if (!hash_ok(hash))
		return snprintf(msg, len, "files hash '%s' is not a SHA-256 in hex", hash), 400;
	if (!host || !*host || strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") !=
					 strlen(host) || strlen(host) > 200)
		return snprintf(msg, len, "the request has no usable Host header to make the upload link of"), 400;
	tok[0] = 0;
	pthread_mutex_lock(&blk);
	for (b = builds; b && !tok[0]; b = b->next)
		if (!strcmp(b->name, tid) && b->st == B_WAITING)
			snprintf(tok, sizeof(tok), "%s", b->token);
	pthread_mutex_unlock(&blk);
	if (!tok[0])
		return snprintf(msg, len, "template '%s' has no build waiting for its files (POST /v3/templates first)",
				tid), 404;
	files_path(hash, file, sizeof(file));
	snprintf(url, sizeof(url), "http://%s/templates/%s/files/%s?upload=%s", host, tid, hash, tok);
	*out = json_pack("{s:b,s:s}", "present", !access(file, F_OK), "url", url);
	return *out ? 0 : (snprintf(msg, len, "out of memory"), 500);
}

bool build_upload_ok(const char *tid, const char *token)
{
	struct build *b;
	bool ok = false;

	pthread_mutex_lock(&blk);
	for (b = builds; b && !ok; b = b->next)
		ok = !strcmp(b->name, tid) && b->st == B_WAITING && strlen(token) == 32 && !strcmp(b->token, token);
	pthread_mutex_unlock(&blk);
	return ok;
}

int build_upload(struct hconn *c, struct hreq *r, const char *hash, char *msg, size_t len)
{
	const char *cl = hreq_header(r, "Content-Length"), *te = hreq_header(r, "Transfer-Encoding");
	char dir[320], file[400], tmp[420];
	unsigned long long n;
	char *end;
	int fd;

	if (!hash_ok(hash))
		return c->close = true, snprintf(msg, len, "files hash '%s' is not a SHA-256 in hex", hash), 400;
	if (te || !cl)
		return c->close = true, snprintf(msg, len, "an upload needs a Content-Length (and no Transfer-Encoding)"), 411;
	n = strtoull(cl, &end, 10);
	if (*end || n > UPLOAD_MAX)
		return c->close = true, snprintf(msg, len, "an upload is at most %llu bytes", UPLOAD_MAX), 413;
	snprintf(dir, sizeof(dir), "%s/build-files", srv.state_dir);
	if (mkdir(dir, 0700) && errno != EEXIST)
		return c->close = true, snprintf(msg, len, "%s: %s", dir, strerror(errno)), 500;
	files_path(hash, file, sizeof(file));
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d.%lx", dir, hash, (int)getpid(), (unsigned long)pthread_self());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return c->close = true, snprintf(msg, len, "%s: %s", tmp, strerror(errno)), 500;
	if (hio_forward_body(c, r, fd, true)) {
		close(fd);
		unlink(tmp);
		c->close = true;
		return snprintf(msg, len, "the upload broke off"), 400;
	}
	if (close(fd) || rename(tmp, file)) {
		unlink(tmp);
		return snprintf(msg, len, "%s: %s", file, strerror(errno)), 500;
	}
	serve_log("build files %s uploaded (%llu bytes)", hash, n);
	return 0;
}

int build_start(const char *tid, const char *bid, json_t *spec, char *msg, size_t len)
{
	json_t *steps = json_object_get(spec, "steps"), *st;
	const char *from = json_string_value(json_object_get(spec, "fromTemplate"));
	char tmpl[64], path[400];
	struct build *b;
	pthread_t th;
	size_t i;

	if (json_object_get(spec, "fromImage") && json_object_get(spec, "fromTemplate"))
		return snprintf(msg, len, "fromImage and fromTemplate: give one"), 400;
	if (json_object_get(spec, "fromImage")) {
		const char *img = json_string_value(json_object_get(spec, "fromImage"));
		json_t *reg = json_object_get(spec, "fromImageRegistry");
		const char *rt = json_string_value(json_object_get(reg, "type"));
		struct reg_ref rr;

		if (!img)
			return snprintf(msg, len, "fromImage must be a string"), 400;
		if (registry_parse(img, &rr, msg, len))
			return 400;
		if (reg && !json_is_null(reg) && (!rt || strcmp(rt, "registry")))
			return snprintf(msg, len, "fromImageRegistry type '%s': cubicle serve signs in to a registry with a "
					"user name and password (type \"registry\"); AWS's and GCP's are not built",
					rt ? rt : "?"), 501;
		if (rt && (!json_is_string(json_object_get(reg, "username")) ||
			   !json_is_string(json_object_get(reg, "password"))))
			return snprintf(msg, len, "fromImageRegistry: username and password, both strings"), 400;
		if (!srv.image_vm)
			return snprintf(msg, len, "fromImage '%s': this serve has no image_vm (the VM file an image's "
					"template boots: a kernel and an initramfs of scripts/build-initramfs.sh --agent); "
					"set it in serve's config, or make a template of the image with `cubicle template "
					"build NAME CONFIG --image REF` and build from it with fromTemplate", img), 400;
		if (!oci_available)
			return snprintf(msg, len, "fromImage: this cubicle was built without libarchive and nettle"), 501;
		snprintf(tmpl, sizeof(tmpl), "(image)");
	} else {
		if (json_object_get(spec, "fromTemplate") && !from)
			return snprintf(msg, len, "fromTemplate must be a string"), 400;
		template_resolve(from ? from : "base", tmpl, sizeof(tmpl));
		snprintf(path, sizeof(path), "%s/templates/%s/snap", srv.state_dir, tmpl);
		if (!template_name_ok(tmpl) || access(path, F_OK))
			return snprintf(msg, len, "fromTemplate: template '%s' not found", from ? from : "base"), 400;
	}
	if (!strcmp(tmpl, tid))
		return snprintf(msg, len, "template '%s' cannot be built from itself", tid), 400;
	if (steps && !json_is_array(steps))
		return snprintf(msg, len, "steps must be an array"), 400;
	for (const char *k = "startCmd"; k; k = strcmp(k, "startCmd") ? NULL : "readyCmd")
		if (json_object_get(spec, k) && !json_is_string(json_object_get(spec, k)))
			return snprintf(msg, len, "%s must be a string", k), 400;
	json_array_foreach(steps, i, st) {
		const char *type = json_string_value(json_object_get(st, "type"));
		json_t *args = json_object_get(st, "args"), *a;
		size_t n = json_array_size(args), j;
		const char *hash = json_string_value(json_object_get(st, "filesHash"));

		if (!type)
			return snprintf(msg, len, "step %zu: no type", i + 1), 400;
		json_array_foreach(args, j, a)
			if (!json_is_string(a))
				return snprintf(msg, len, "step %zu (%s): every argument is a string", i + 1, type), 400;
		if (args && !json_is_array(args))
			return snprintf(msg, len, "step %zu (%s): args must be an array", i + 1, type), 400;
		if (!strcmp(type, "RUN")) {
			if (n < 1 || n > 2 || !*json_string_value(json_array_get(args, 0)))
				return snprintf(msg, len, "step %zu: RUN takes a command and a user", i + 1), 400;
		} else if (!strcmp(type, "COPY")) {
			char file[400];

			if (n < 2 || n > 4 || !hash || !hash_ok(hash))
				return snprintf(msg, len, "step %zu: COPY takes a source, a destination, a user, a mode and a filesHash",
						i + 1), 400;
			files_path(hash, file, sizeof(file));
			if (access(file, F_OK))
				return snprintf(msg, len, "step %zu: COPY %s: its files (%s) were not uploaded", i + 1,
						json_string_value(json_array_get(args, 0)), hash), 400;
		} else if (!strcmp(type, "ENV")) {
			if (!n || n % 2)
				return snprintf(msg, len, "step %zu: ENV takes names and values", i + 1), 400;
			for (j = 0; j < n; j += 2) {
				const char *k = json_string_value(json_array_get(args, j));

				if (!*k || strchr(k, '='))
					return snprintf(msg, len, "step %zu: ENV name '%s'", i + 1, k), 400;
			}
		} else if (!strcmp(type, "WORKDIR")) {
			if (n != 1 || json_string_value(json_array_get(args, 0))[0] != '/')
				return snprintf(msg, len, "step %zu: WORKDIR takes one absolute path", i + 1), 400;
		} else if (!strcmp(type, "USER")) {
			if (n != 1 || !word_ok(json_string_value(json_array_get(args, 0))))
				return snprintf(msg, len, "step %zu: USER takes a user name", i + 1), 400;
		} else {
			return snprintf(msg, len, "step %zu: type '%s' is not one cubicle serve builds (RUN, COPY, ENV, WORKDIR, USER)",
					i + 1, type), 400;
		}
	}
	pthread_mutex_lock(&blk);
	b = find(tid, bid);
	if (b && b->st == B_WAITING) {
		b->st = B_BUILDING;
		b->spec = json_incref(spec);
	}
	pthread_mutex_unlock(&blk);
	if (!b)
		return snprintf(msg, len, "template '%s' has no build %s", tid, bid), 404;
	if (b->spec != spec)
		return snprintf(msg, len, "build %s has started already", bid), 409;
	if (pthread_create(&th, NULL, build_main, b)) {
		pthread_mutex_lock(&blk);
		b->st = B_ERROR;
		b->reason = json_pack("{s:s,s:s}", "message", "no thread for the build", "step", "base");
		pthread_mutex_unlock(&blk);
		return snprintf(msg, len, "no thread for the build"), 500;
	}
	pthread_detach(th);
	serve_log("build %s of template '%s' started (%zu steps, from '%s')", bid, tid, json_array_size(steps), tmpl);
	return 0;
}

int build_status(const char *tid, const char *bid, long offset, json_t **out, char *msg, size_t len)
{
	struct build *b;
	json_t *logs, *entries;

	pthread_mutex_lock(&blk);
	b = find(tid, bid);
	if (!b) {
		pthread_mutex_unlock(&blk);
		return snprintf(msg, len, "template '%s' has no build %s (serve forgets builds when it restarts)", tid,
				bid), 404;
	}
	logs = json_array();
	entries = json_array();
	for (size_t i = offset > 0 ? (size_t)offset : 0; i < json_array_size(b->logs); i++) {
		json_t *e = json_array_get(b->logs, i);

		json_array_append(entries, e);
		json_array_append_new(logs, json_sprintf("%s %s", json_string_value(json_object_get(e, "timestamp")),
							 json_string_value(json_object_get(e, "message"))));
	}
	*out = json_pack("{s:s,s:s,s:s,s:o,s:o}", "templateID", b->name, "buildID", b->id, "status",
			 bstate_name[b->st], "logs", logs, "logEntries", entries);
	if (*out && b->reason)
		json_object_set(*out, "reason", b->reason);
	pthread_mutex_unlock(&blk);
	return *out ? 0 : (snprintf(msg, len, "out of memory"), 500);
}
