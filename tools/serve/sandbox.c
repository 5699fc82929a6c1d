/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sandboxes: create (a clone of a template's snapshot), kill, pause (a
 * snapshot to disk, the VMM ended), resume, timeouts, and the state folder
 * that lets a restarted serve find them again. Each sandbox has its folder
 * STATE/sandboxes/ID holding everything it owns (sockets, logs, disk
 * clones, pause snapshots): removing the folder removes the sandbox.
 * Making them (and the warm pool) is sandbox_create.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netpolicy.h"
#include "plancheck.h"
#include "serve.h"
#include "vmm.h"

const char *sbx_state_name(enum sbx_state st)
{
	switch (st) {
	case SBX_STARTING: return "starting";
	case SBX_RUNNING: return "running";
	case SBX_PAUSING: return "pausing";
	case SBX_PAUSED: return "paused";
	case SBX_RESUMING: return "resuming";
	case SBX_POOLED: return "pooled";
	default: return "gone";
	}
}

/* ---- the state file ---- */

int sbx_save(const struct sandbox *s)
{
	char path[300], tmp[310];
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:I,s:i,s:I,s:I,s:b,s:b,s:b,s:i,s:i,s:i,s:b,s:I,s:I,s:O,s:i,s:s,s:O,s:s}",
			      "id", s->id, "template", s->template_id, "token", s->token,
			      "traffic_token", s->traffic_token, "state",
			      /* one still being made (or resumed) is not adopted by a
			       * restarted serve: its agent may not have its token yet */
			      s->state == SBX_PAUSED ? "paused"
			      : s->state == SBX_RESUMING ? "resuming"
			      : s->state == SBX_RUNNING || s->state == SBX_PAUSING ? "running"
										 : "starting",
			      "pid", (int)s->pid,
			      "pid_start", (json_int_t)s->pid_start, "pause_gen", (int)s->pause_gen,
			      "started", (json_int_t)s->started, "end", (json_int_t)s->end,
			      "auto_pause", s->auto_pause, "public_traffic", s->public_traffic,
			      "auto_resume", s->auto_resume, "timeout", (int)s->timeout,
			      "vcpus", (int)s->vcpus, "memory_mib", (int)s->memory_mib, "jailed",
			      s->jailed, "jail_uid", (json_int_t)s->jail_uid, "jail_gid",
			      (json_int_t)s->jail_gid, "metadata", s->metadata ? s->metadata : json_object(),
			      "net_slot", s->net_slot, "net_dev", s->net_dev, "net_allow",
			      s->net_allow ? s->net_allow : json_array(), "mask_host", s->mask_host);
	int ret;

	if (!j)
		return -1;
	snprintf(path, sizeof(path), "%s/sandbox.json", s->dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	ret = json_dump_file(j, tmp, JSON_COMPACT);
	json_decref(j);
	if (!ret) {
		int fd = open(tmp, O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			fsync(fd);
			close(fd);
		}
		ret = rename(tmp, path);
	}
	if (ret)
		serve_log("sandbox %s: cannot write %s: %s", s->id, path, strerror(errno));
	return ret;
}

struct sandbox *sbx_new(const char *id)
{
	struct sandbox *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->op, NULL);
	pthread_mutex_init(&s->net_lock, NULL);
	s->dns_fd = s->dns_tcp_fd = -1;
	s->refs = 1;
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->dir, sizeof(s->dir), "%s/sandboxes/%s", srv.state_dir, id);
	s->public_traffic = true;
	s->net_slot = -1;
	return s;
}

void sbx_link_in(struct sandbox *s)
{
	pthread_mutex_lock(&srv.lock);
	s->next = srv.list;
	srv.list = s;
	srv.n_sandboxes++;
	pthread_mutex_unlock(&srv.lock);
}

static void sbx_free(struct sandbox *s)
{
	dns_close(s);
	json_decref(s->metadata);
	json_decref(s->net_allow);
	json_decref(s->net_learned);
	free(s->samples);
	pthread_mutex_destroy(&s->net_lock);
	pthread_mutex_destroy(&s->op);
	free(s);
}

/* Off the list (its reference with it): under srv.lock. */
static void unlink_locked(struct sandbox *s)
{
	for (struct sandbox **pp = &srv.list; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			srv.n_sandboxes--;
			s->state = SBX_GONE;
			if (!--s->refs)
				sbx_free(s);
			return;
		}
}

/* The first sandbox @match accepts, a reference taken; or NULL. */
static struct sandbox *walk(bool (*match)(const struct sandbox *, const void *), const void *arg)
{
	struct sandbox *s;

	pthread_mutex_lock(&srv.lock);
	for (s = srv.list; s; s = s->next)
		if (s->state != SBX_GONE && match(s, arg)) {
			s->refs++;
			break;
		}
	pthread_mutex_unlock(&srv.lock);
	return s;
}

static bool by_id(const struct sandbox *s, const void *id)
{
	return s->state != SBX_POOLED && !strcmp(s->id, id);
}

struct sandbox *sbx_get(const char *id)
{
	return walk(by_id, id);
}

struct find {
	bool (*match)(const struct sandbox *, void *);
	void *arg;
};

static bool running_and(const struct sandbox *s, const void *f)
{
	const struct find *x = f;

	/* or paused, to be woken by what it is found for (autoResume) */
	return (s->state == SBX_RUNNING || (s->auto_resume && s->state == SBX_PAUSED)) &&
	       x->match(s, x->arg);
}

struct sandbox *sbx_find(bool (*match)(const struct sandbox *, void *), void *arg)
{
	struct find f = { match, arg };

	return walk(running_and, &f);
}

static bool by_slot(const struct sandbox *s, const void *slot)
{
	return s->net_slot == *(const int *)slot;
}

struct sandbox *sbx_get_slot(int slot)
{
	return walk(by_slot, &slot);
}

void sbx_put(struct sandbox *s)
{
	bool last;

	pthread_mutex_lock(&srv.lock);
	last = !--s->refs;
	pthread_mutex_unlock(&srv.lock);
	if (last)
		sbx_free(s);
}

void sbx_set_state(struct sandbox *s, enum sbx_state st)
{
	pthread_mutex_lock(&srv.lock);
	s->state = st;
	pthread_mutex_unlock(&srv.lock);
}

/* Signalled (under srv.lock) when a checkpoint ends; on the monotonic clock. */
static pthread_cond_t checkpoint_cond;
static pthread_once_t checkpoint_once = PTHREAD_ONCE_INIT;

static void checkpoint_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&checkpoint_cond, &a);
	pthread_condattr_destroy(&a);
}

void sbx_checkpoint(struct sandbox *s, bool on)
{
	pthread_once(&checkpoint_once, checkpoint_init);
	pthread_mutex_lock(&srv.lock);
	s->checkpointing = on;
	s->state = on ? SBX_PAUSING : SBX_RUNNING;
	if (!on)
		pthread_cond_broadcast(&checkpoint_cond);
	pthread_mutex_unlock(&srv.lock);
}

bool sbx_checkpoint_wait(struct sandbox *s, int ms)
{
	struct timespec end;
	bool busy;
	int ret = 0;

	pthread_once(&checkpoint_once, checkpoint_init);
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (long)(ms % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&srv.lock);
	while (s->checkpointing && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&checkpoint_cond, &srv.lock, &end);
	busy = s->checkpointing;
	pthread_mutex_unlock(&srv.lock);
	return !busy;
}

/* Everything of @s gone: its VMM, its folder, its place in the list. */
void sbx_destroy(struct sandbox *s)
{
	dns_close(s); /* its /30 may be another's next */
	vmm_end(s);
	if (rm_tree(s->dir) && errno != ENOENT)
		serve_log("sandbox %s: removing %s: %s", s->id, s->dir, strerror(errno));
	pthread_mutex_lock(&srv.lock);
	unlink_locked(s);
	pthread_mutex_unlock(&srv.lock);
}

/* ---- kill, pause, resume ---- */

int sbx_kill(struct sandbox *s, char *msg, size_t len)
{
	pthread_mutex_lock(&s->op);
	if (s->state == SBX_GONE) {
		pthread_mutex_unlock(&s->op);
		return snprintf(msg, len, "sandbox %s not found", s->id), 404;
	}
	sbx_destroy(s);
	pthread_mutex_unlock(&s->op);
	serve_log("sandbox %s: killed", s->id);
	return 0;
}

/* Its paused snapshot @gen, as serve (@inside false) or its VMM sees it. */
static void pause_dir(const struct sandbox *s, unsigned gen, bool inside, char *out, size_t len)
{
	char name[32];

	snprintf(name, sizeof(name), "pause-%u", gen);
	sbx_file(s, name, inside, out, len);
}

/* Calls FN for each of the running VMM's disk copies (clone_sets' ID.img
 * files, in its files folder). */
static void each_disk(const struct sandbox *s, void (*fn)(const char *path, void *arg), void *arg)
{
	char dir[320], p[600];
	struct dirent *e;
	DIR *d;

	sbx_file(s, ".", false, dir, sizeof(dir));
	if (!(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (e->d_type == DT_REG && n > 4 && !strcmp(e->d_name + n - 4, ".img")) {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			fn(p, arg);
		}
	}
	closedir(d);
}

static void unlink_one(const char *path, void *arg)
{
	(void)arg;
	unlink(path);
}

static void add_usage(const char *path, void *arg)
{
	unsigned long long *u = arg;
	struct stat st;

	if (lstat(path, &st) || !S_ISREG(st.st_mode)) /* (the VMM may swap it for a link) */
		return;
	u[0] += (unsigned long long)st.st_blocks * 512 < (unsigned long long)st.st_size
			? (unsigned long long)st.st_blocks * 512
			: (unsigned long long)st.st_size;
	u[1] += (unsigned long long)st.st_size;
}

void sbx_disk_usage(const struct sandbox *s, unsigned long long *used, unsigned long long *total)
{
	unsigned long long u[2] = { 0, 0 };

	each_disk(s, add_usage, u);
	*used = u[0];
	*total = u[1];
}

int sbx_pause(struct sandbox *s, char *msg, size_t len)
{
	char dir[320], body[400], old[320];
	int ret = 0;

	pthread_mutex_lock(&s->op);
	if (s->state == SBX_PAUSED) {
		pthread_mutex_unlock(&s->op);
		return snprintf(msg, len, "sandbox %s is already paused", s->id), 409;
	}
	if (s->state != SBX_RUNNING) {
		pthread_mutex_unlock(&s->op);
		return snprintf(msg, len, "sandbox %s not found", s->id), 404;
	}
	sbx_set_state(s, SBX_PAUSING);
	pause_dir(s, s->pause_gen + 1, true, dir, sizeof(dir));
	snprintf(body, sizeof(body), "{\"snapshot_path\":\"%s\"}", dir);
	pause_dir(s, s->pause_gen + 1, false, dir, sizeof(dir));
	if (vmm_api(s, "PATCH", "/vm", "{\"state\":\"Paused\"}", 10000, msg, len) ||
	    vmm_api(s, "PUT", "/snapshot/create", body, 600000, msg, len)) {
		char why[400];

		snprintf(why, sizeof(why), "%s", msg);
		snprintf(msg, len, "sandbox %s: pausing failed: %s", s->id, why);
		serve_log("%s", msg);
		vmm_api(s, "PATCH", "/vm", "{\"state\":\"Resumed\"}", 10000, why, sizeof(why));
		sbx_set_state(s, SBX_RUNNING);
		pthread_mutex_unlock(&s->op);
		return 500;
	}
	vmm_end(s);
	/* the pause snapshot holds its own copy of each disk: the running
	 * copies go (a resume makes them again from it; a restore never
	 * writes over a file) */
	each_disk(s, unlink_one, NULL);
	if (s->pause_gen) {
		pause_dir(s, s->pause_gen, false, old, sizeof(old));
		rm_tree(old);
	}
	s->pause_gen++;
	sbx_set_state(s, SBX_PAUSED);
	sbx_save(s);
	pthread_mutex_unlock(&s->op);
	serve_log("sandbox %s: paused to %s", s->id, dir);
	return ret;
}

/*
 * A pause snapshot's config is what its VMM wrote, and one its guest took
 * over could name any file there for the resume to bind into its jail.
 * So, before a resume: the snapshot is Full (no parent to bind), its
 * config's folder (what relative paths are taken against) is the
 * template's, and every path in its tree (a string that starts with '/'
 * or climbs with "..") is the template's at the same place, or one serve
 * gives the sandbox: /vm/NAME in its jail (DIR/NAME unjailed). The
 * template's config was saved in DIR/template.json when the sandbox was
 * made (else the template's own is read). 0, or -1 with @msg.
 */
static bool own_path(const struct sandbox *s, const char *v)
{
	char pre[300];
	const char *rest;

	sbx_file(s, "", true, pre, sizeof(pre)); /* "/vm/", or "DIR/" unjailed */
	if (strncmp(v, pre, strlen(pre)))
		return false;
	rest = v + strlen(pre);
	return *rest && !strchr(rest, '/') && strcmp(rest, ".") && strcmp(rest, "..");
}

static int tree_check(const struct sandbox *s, json_t *v, json_t *t, char *where, size_t wlen,
		      unsigned depth, char *msg, size_t len)
{
	size_t at = strlen(where), i;
	const char *k;
	json_t *e;

	if (depth > 64)
		return snprintf(msg, len, "%s: nested too deep", where), -1;
	if (json_is_string(v)) {
		const char *x = json_string_value(v);

		if (!path_like(x) || (json_is_string(t) && !strcmp(x, json_string_value(t))) ||
		    own_path(s, x))
			return 0;
		return snprintf(msg, len, "%s = \"%s\": neither its template's nor one serve gave it", where,
				x), -1;
	}
	json_object_foreach(v, k, e) {
		snprintf(where + at, wlen - at, "%s%s", at ? "." : "", k);
		if (tree_check(s, e, json_object_get(t, k), where, wlen, depth + 1, msg, len))
			return -1;
	}
	json_array_foreach(v, i, e) {
		snprintf(where + at, wlen - at, "[%zu]", i);
		if (tree_check(s, e, json_array_get(t, i), where, wlen, depth + 1, msg, len))
			return -1;
	}
	where[at] = '\0';
	return 0;
}

json_t *sbx_template_config(const struct sandbox *s)
{
	char path[400];
	json_t *tc, *tm;

	snprintf(path, sizeof(path), "%s/template.json", s->dir);
	if ((tc = json_load_file(path, 0, NULL)))
		return tc;
	snprintf(path, sizeof(path), "%s/templates/%s/snap/manifest.json", srv.state_dir, s->template_id);
	tm = json_load_file(path, 0, NULL);
	tc = json_incref(json_object_get(tm, "config"));
	json_decref(tm);
	return tc;
}

int sbx_snap_check(const struct sandbox *s, const char *dir, json_t *tc, char *msg, size_t len)
{
	char path[400], where[512] = "";
	json_t *m, *cfg;
	const char *d1, *d2;
	int ret = -1;

	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	m = json_load_file(path, 0, NULL);
	cfg = json_object_get(m, "config");
	d1 = json_string_value(json_object_get(cfg, "dir"));
	d2 = json_string_value(json_object_get(tc, "dir"));
	if (!m || !json_is_object(cfg))
		snprintf(msg, len, "%s/manifest.json: not a snapshot manifest with a config", dir);
	else if (!tc)
		snprintf(msg, len, "its template's config is gone (no %s/template.json, no template %s)",
			 s->dir, s->template_id);
	else if ((json_object_get(m, "parent") && !json_is_null(json_object_get(m, "parent"))) ||
		 (json_string_value(json_object_get(m, "type")) &&
		  strcmp(json_string_value(json_object_get(m, "type")), "Full")))
		snprintf(msg, len, "%s/manifest.json: not a Full snapshot (serve makes Full ones)", dir);
	else if ((d1 || d2) && (!d1 || !d2 || strcmp(d1, d2)))
		snprintf(msg, len, "%s/manifest.json: config.dir \"%s\" is not its template's", dir,
			 d1 ? d1 : "");
	else if (!tree_check(s, json_object_get(cfg, "tree"), json_object_get(tc, "tree"), where,
			     sizeof(where), 0, msg, len))
		ret = 0;
	else {
		char why[600];

		snprintf(why, sizeof(why), "%s", msg);
		snprintf(msg, len, "%s/manifest.json: %s", dir, why);
	}
	json_decref(m);
	return ret;
}

static int pause_check(const struct sandbox *s, const char *dir, char *msg, size_t len)
{
	json_t *tc = sbx_template_config(s);
	int ret = sbx_snap_check(s, dir, tc, msg, len);

	json_decref(tc);
	return ret;
}

int sbx_resume(struct sandbox *s, unsigned timeout, char *msg, size_t len)
{
	char dir[320];
	double t0 = now_ms();
	struct stat st;
	int ret;

	pthread_mutex_lock(&s->op);
	if (s->state == SBX_RUNNING) {
		pthread_mutex_unlock(&s->op);
		sbx_set_timeout(s, timeout);
		return 0;
	}
	if (s->state != SBX_PAUSED) {
		pthread_mutex_unlock(&s->op);
		return snprintf(msg, len, "sandbox %s not found", s->id), 404;
	}
	sbx_set_state(s, SBX_RESUMING);
	pause_dir(s, s->pause_gen, false, dir, sizeof(dir));
	msg[0] = '\0';
	errno = 0;
	/* its VMM made that folder: a link left there (to another sandbox's
	 * snapshot) would be bound into this one's jail */
	if (lstat(dir, &st) < 0) {
		ret = -1;
	} else if (!S_ISDIR(st.st_mode)) {
		snprintf(msg, len, "%s is not a folder (a symbolic link?): not followed", dir);
		ret = -1;
	} else if (!(ret = pause_check(s, dir, msg, len))) {
		ret = vmm_spawn(s, dir, NULL, 0, false);
	}
	if (!ret) {
		sbx_save(s); /* a restart meanwhile ends this VMM and keeps the snapshot */
		/* a new tap: its host side and the allow list again */
		if (s->net_slot >= 0 && !(ret = vmm_wait_api(s, msg, len)))
			ret = net_attach(s, msg, len);
		if (!ret)
			ret = vmm_wait_agent(s, s->token, NULL, msg, len);
	}
	if (ret) {
		char why[400];

		snprintf(why, sizeof(why), "%s", errno && !*msg ? strerror(errno) : msg);
		snprintf(msg, len, "sandbox %s: resuming from %s failed: %s", s->id, dir, why);
		serve_log("%s", msg);
		vmm_end(s);
		sbx_set_state(s, SBX_PAUSED); /* the snapshot is still there: try again later */
		sbx_save(s);
		pthread_mutex_unlock(&s->op);
		return 500;
	}
	s->create_ms = now_ms() - t0;
	sbx_set_state(s, SBX_RUNNING);
	sbx_set_timeout(s, timeout);
	pthread_mutex_unlock(&s->op);
	serve_log("sandbox %s: resumed in %.1f ms (VMM pid %d)", s->id, s->create_ms, (int)s->pid);
	return 201;
}

/* ---- usage ---- */

/* @pid's number in its own pid namespace (the last field of NSpid), or 0. */
static int ns_pid(int pid)
{
	char path[64], buf[256], *save = NULL;
	int last = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(buf, sizeof(buf), f))
		if (!strncmp(buf, "NSpid:", 6)) {
			for (char *t = strtok_r(buf + 6, " \t\n", &save); t;
			     t = strtok_r(NULL, " \t\n", &save))
				last = atoi(t);
			break;
		}
	fclose(f);
	return last;
}

void sbx_usage(const struct sandbox *s, unsigned long long *rss_kib, double *cpu_s)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	int pid = (int)s->pid, child;
	FILE *f;

	*rss_kib = 0;
	*cpu_s = 0;
	if (pid <= 0)
		return;
	/* jailed: s->pid is the jail's supervisor; its children are the pid
	 * namespace's init (pid 1 there) and the VMM (pid 2 there) */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	if (s->jailed && (f = fopen(path, "re"))) {
		while (fscanf(f, "%d", &child) == 1)
			if (child > 0 && ns_pid(child) == 2) {
				pid = child;
				break;
			}
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((f = fopen(path, "re"))) {
		while (fgets(buf, sizeof(buf), f))
			if (sscanf(buf, "VmRSS: %llu", rss_kib) == 1)
				break;
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((f = fopen(path, "re"))) {
		if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) &&
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
			*cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
		fclose(f);
	}
}

/* Seconds since process @s->pid started (its /proc stat's start time), or 0. */
static double vmm_age(const struct sandbox *s)
{
	double up = 0;
	FILE *f = fopen("/proc/uptime", "re");

	if (f) {
		if (fscanf(f, "%lf", &up) != 1)
			up = 0;
		fclose(f);
	}
	up -= (double)s->pid_start / (double)sysconf(_SC_CLK_TCK);
	return up > 0 ? up : 0;
}

void sbx_sample(struct sandbox *s, struct sbx_sample *out, bool keep)
{
	unsigned long long rss;
	double cpu, now = now_ms(), span, used;
	pid_t pid = s->pid;

	sbx_usage(s, &rss, &cpu);
	sbx_disk_usage(s, &out->disk_used, &out->disk_total);
	out->t = time(NULL);
	out->mem = rss << 10;
	pthread_mutex_lock(&srv.lock);
	if (s->sample_pid == pid && s->sample_ms > 0 && now > s->sample_ms) {
		span = (now - s->sample_ms) / 1000;
		used = cpu - s->sample_cpu_s;
	} else {
		span = vmm_age(s); /* the first of this VMM: since it started */
		used = cpu;
	}
	out->cpu_pct = span > 0 && s->vcpus && used > 0 ? 100 * used / span / s->vcpus : 0;
	if (out->cpu_pct > 100)
		out->cpu_pct = 100;
	if (keep && (s->samples || (s->samples = calloc(SBX_SAMPLES, sizeof(*s->samples))))) {
		s->samples[s->next_sample] = *out;
		s->next_sample = (s->next_sample + 1) % SBX_SAMPLES;
		if (s->n_samples < SBX_SAMPLES)
			s->n_samples++;
		s->sample_cpu_s = cpu;
		s->sample_ms = now;
		s->sample_pid = pid;
	}
	pthread_mutex_unlock(&srv.lock);
}

unsigned sbx_samples(const struct sandbox *s, time_t from, time_t to, struct sbx_sample *out,
		     unsigned max)
{
	unsigned n = 0;

	pthread_mutex_lock(&srv.lock);
	for (unsigned i = 0; i < s->n_samples && n < max; i++) {
		const struct sbx_sample *x =
			&s->samples[(s->next_sample + SBX_SAMPLES - s->n_samples + i) % SBX_SAMPLES];

		if (x->t >= from && x->t <= to)
			out[n++] = *x;
	}
	pthread_mutex_unlock(&srv.lock);
	return n;
}

/* ---- the reaper ---- */

void *sbx_reaper(void *arg)
{
	double sampled = 0;

	(void)arg;
	while (!srv.stopping) {
		struct sandbox **live;
		unsigned n = 0;
		time_t now = time(NULL);
		bool sample = now_ms() - sampled >= SBX_SAMPLE_S * 1000.0;

		if (sample)
			sampled = now_ms();
		/* every one of them, however many (a reference each) */
		pthread_mutex_lock(&srv.lock);
		live = malloc((srv.n_sandboxes + 1) * sizeof(*live));
		for (struct sandbox *s = srv.list; live && s; s = s->next)
			if (s->state == SBX_RUNNING || s->state == SBX_POOLED) {
				s->refs++;
				live[n++] = s;
			}
		pthread_mutex_unlock(&srv.lock);
		for (unsigned i = 0; i < n; i++) {
			struct sandbox *s = live[i];
			char msg[512];
			struct sbx_sample x;

			if (sample && s->state == SBX_RUNNING)
				sbx_sample(s, &x, true);

			if (pthread_mutex_trylock(&s->op) == 0) {
				if ((s->state == SBX_RUNNING || s->state == SBX_POOLED) && !vmm_alive(s)) {
					char tail[300];

					vmm_log_tail(s, tail, sizeof(tail));
					serve_log("sandbox %s: its VMM (pid %d) ended on its own%s%s; removed",
						  s->id, (int)s->pid, *tail ? ": " : "", tail);
					sbx_destroy(s);
				}
				pthread_mutex_unlock(&s->op);
			}
			if (s->state == SBX_RUNNING && s->end <= now) {
				if (s->auto_pause && !sbx_pause(s, msg, sizeof(msg)))
					serve_log("sandbox %s: its timeout passed: paused", s->id);
				else if (!sbx_kill(s, msg, sizeof(msg)))
					serve_log("sandbox %s: its timeout passed: killed", s->id);
			}
			sbx_put(s);
		}
		free(live);
		sbx_pool_fill();
		usleep(250000);
	}
	return NULL;
}

/* ---- a restart: find what the state folder holds ---- */

static struct sandbox *load(const char *id)
{
	char path[320];
	json_t *j, *md;
	struct sandbox *s = sbx_new(id);
	const char *st;

	if (!s)
		return NULL;
	snprintf(path, sizeof(path), "%s/sandbox.json", s->dir);
	j = json_load_file(path, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		return s; /* state 0 (starting): cleaned up */
	}
#define STR(f, k) snprintf(s->f, sizeof(s->f), "%s", json_string_value(json_object_get(j, k)) ?: "")
	STR(template_id, "template");
	STR(token, "token");
	STR(traffic_token, "traffic_token");
	STR(mask_host, "mask_host");
#undef STR
	if (!mask_host_ok(s->mask_host))
		s->mask_host[0] = '\0'; /* (none, or not one a create takes) */
	st = json_string_value(json_object_get(j, "state"));
	s->pid = (pid_t)json_integer_value(json_object_get(j, "pid"));
	s->pid_start = (unsigned long long)json_integer_value(json_object_get(j, "pid_start"));
	s->pause_gen = (unsigned)json_integer_value(json_object_get(j, "pause_gen"));
	s->started = (time_t)json_integer_value(json_object_get(j, "started"));
	s->end = (time_t)json_integer_value(json_object_get(j, "end"));
	s->auto_pause = json_is_true(json_object_get(j, "auto_pause"));
	s->auto_resume = json_is_true(json_object_get(j, "auto_resume"));
	s->timeout = json_is_integer(json_object_get(j, "timeout"))
			     ? (unsigned)json_integer_value(json_object_get(j, "timeout"))
			     : srv.default_timeout;
	s->public_traffic = !json_is_false(json_object_get(j, "public_traffic"));
	s->vcpus = (unsigned)json_integer_value(json_object_get(j, "vcpus"));
	s->memory_mib = (unsigned)json_integer_value(json_object_get(j, "memory_mib"));
	s->jailed = json_is_true(json_object_get(j, "jailed"));
	{
		json_int_t u = json_integer_value(json_object_get(j, "jail_uid")),
			   g = json_integer_value(json_object_get(j, "jail_gid"));

		if (u > 0 && u <= 0xfffffffe && g > 0 && g <= 0xfffffffe) {
			s->jail_uid = (uint32_t)u;
			s->jail_gid = (uint32_t)g;
		}
	}
	if (json_is_integer(json_object_get(j, "net_slot")))
		s->net_slot = (int)json_integer_value(json_object_get(j, "net_slot"));
	snprintf(s->net_dev, sizeof(s->net_dev), "%s",
		 json_string_value(json_object_get(j, "net_dev")) ?: "");
	if (json_is_array(json_object_get(j, "net_allow")))
		s->net_allow = json_incref(json_object_get(j, "net_allow"));
	md = json_object_get(j, "metadata");
	s->metadata = json_is_object(md) ? json_incref(md) : json_object();
	/* "resuming": paused, with a VMM that may still be starting (ended below) */
	s->state = st && (!strcmp(st, "paused") || !strcmp(st, "resuming")) ? SBX_PAUSED
		   : st && !strcmp(st, "running")			       ? SBX_RUNNING
									       : SBX_STARTING;
	json_decref(j);
	return s;
}

int sbx_adopt_all(void)
{
	char dir[300];
	struct dirent *e;
	DIR *d;
	unsigned kept = 0, gone = 0;

	/* forks' snapshots copied out of their sources' folders: a fork that
	 * was being made when serve stopped was removed with its sandbox */
	snprintf(dir, sizeof(dir), "%s/forks", srv.state_dir);
	rm_tree(dir);
	snprintf(dir, sizeof(dir), "%s/sandboxes", srv.state_dir);
	if (mkdir(dir, 0700) && errno != EEXIST)
		return serve_log("%s: %s", dir, strerror(errno)), -1;
	d = opendir(dir);
	if (!d)
		return serve_log("%s: %s", dir, strerror(errno)), -1;
	while ((e = readdir(d))) {
		struct sandbox *s;

		if (e->d_name[0] == '.' || strlen(e->d_name) != ID_LEN)
			continue;
		s = load(e->d_name);
		if (!s)
			continue;
		sbx_link_in(s);
		if (s->state == SBX_PAUSED) {
			kept++;
			if (s->pid > 0 && vmm_alive(s)) {
				serve_log("sandbox %s: a resume was under way when serve stopped: its VMM (pid %d) ended; the sandbox stays paused",
					  s->id, (int)s->pid);
				s->child = false;
				vmm_end(s);
			}
			s->pid = 0;
			sbx_save(s);
			continue;
		}
		if (s->state == SBX_RUNNING && vmm_alive(s)) {
			char msg[200];

			kept++;
			serve_log("sandbox %s: found running (VMM pid %d)", s->id, (int)s->pid);
			/* its name server again (what its lookups allowed stays in its
			 * VMM's policy; serve forgets which names those were), over
			 * TCP too (a serve before that allowed UDP only) */
			if (net_dns_open(s, msg, sizeof(msg)))
				serve_log("sandbox %s: %s", s->id, msg);
			continue;
		}
		serve_log("sandbox %s: %s; removed", s->id,
			  s->state == SBX_RUNNING ? "its VMM ended while serve was away"
						  : "it was being made when serve stopped");
		sbx_destroy(s);
		gone++;
	}
	closedir(d);
	if (kept || gone)
		serve_log("state %s: %u sandboxes found again, %u removed", srv.state_dir, kept, gone);
	return 0;
}
