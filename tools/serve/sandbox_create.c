/* SPDX-License-Identifier: Apache-2.0 */
/* Making sandboxes: clones of a template's snapshot, their timeout and network, the warm pool; forks of a running sandbox and templates made of one (snapshots). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netpolicy.h"
#include "serve.h"
#include "vmm.h"

/* ---- create ---- */

const char *cfg_text(json_t *v)
{
	if (json_is_string(v))
		return json_string_value(v);
	return json_string_value(json_object_get(v, "="));
}

/*
 * The --set options that give a clone its own files: every device's
 * vsock socket (uds_path), file console (path) and disk (backend.path)
 * named in the template's snapshot moves into the sandbox's folder.
 */
static unsigned clone_sets(const struct sandbox *s, json_t *tree, char **sets, unsigned max)
{
	json_t *devs = json_object_get(tree, "devices"), *d;
	unsigned n = 0;
	size_t i;

	json_array_foreach(devs, i, d) {
		const char *id = cfg_text(json_object_get(d, "id"));
		json_t *b = json_object_get(d, "backend");
		char *set, name[160], path[320];

		if (!id || strpbrk(id, "=/ ") || strlen(id) > 64)
			continue;
		sbx_file(s, "v.sock", true, path, sizeof(path));
		if (cfg_text(json_object_get(d, "uds_path")) && n < max &&
		    asprintf(&set, "devices.%s.uds_path=%s", id, path) > 0)
			sets[n++] = set;
		snprintf(name, sizeof(name), "%s.log", id);
		sbx_file(s, name, true, path, sizeof(path));
		if (cfg_text(json_object_get(d, "path")) && n < max &&
		    asprintf(&set, "devices.%s.path=%s", id, path) > 0)
			sets[n++] = set;
		snprintf(name, sizeof(name), "%s.img", id);
		sbx_file(s, name, true, path, sizeof(path));
		if (json_is_object(b) && cfg_text(json_object_get(b, "path")) && n < max &&
		    asprintf(&set, "devices.%s.backend.path=%s", id, path) > 0)
			sets[n++] = set;
	}
	return n;
}

static void record_latency(double ms)
{
	pthread_mutex_lock(&srv.lock);
	srv.lat[srv.n_lat++ % (sizeof(srv.lat) / sizeof(srv.lat[0]))] = ms;
	pthread_mutex_unlock(&srv.lock);
}

static void set_end(struct sandbox *s, unsigned timeout, bool longer_only)
{
	time_t end;

	if (timeout > srv.max_timeout)
		timeout = srv.max_timeout;
	pthread_mutex_lock(&srv.lock);
	end = time(NULL) + timeout;
	if (!longer_only || end > s->end)
		s->end = end;
	if (!longer_only)
		s->timeout = timeout;
	pthread_mutex_unlock(&srv.lock);
	if (s->state == SBX_RUNNING || s->state == SBX_PAUSED)
		sbx_save(s);
}

void sbx_set_timeout(struct sandbox *s, unsigned timeout)
{
	set_end(s, timeout, false);
}

void sbx_extend_timeout(struct sandbox *s, unsigned timeout)
{
	set_end(s, timeout, true);
}

int sbx_set_network(struct sandbox *s, json_t *req, char *msg, size_t len)
{
	json_t *wrap, *list;
	int st;

	/* the update's members are the create's network ones, with
	 * allow_internet_access beside them */
	wrap = json_pack("{s:O}", "network", req);
	if (!wrap)
		return snprintf(msg, len, "out of memory"), 500;
	if (json_object_get(req, "allow_internet_access"))
		json_object_set(wrap, "allow_internet_access", json_object_get(req, "allow_internet_access"));
	st = net_allow_list(wrap, srv.net_deny_default, &list, msg, len);
	json_decref(wrap);
	if (st)
		return st;
	pthread_mutex_lock(&s->op);
	if (s->state != SBX_RUNNING && s->state != SBX_PAUSED)
		st = 404, snprintf(msg, len, "sandbox %s not found", s->id);
	else if (s->net_slot < 0)
		st = 409, snprintf(msg, len, "sandbox %s has no network (its template has no tap device)",
				   s->id);
	else if (s->state == SBX_RUNNING && net_replace(s, list, msg, len))
		st = 500;
	if (!st) {
		pthread_mutex_lock(&s->net_lock); /* the DNS proxy reads it */
		json_decref(s->net_allow);
		s->net_allow = json_incref(list);
		pthread_mutex_unlock(&s->net_lock);
		sbx_save(s);
		serve_log("sandbox %s: network: %zu allow entries now", s->id, json_array_size(list));
	}
	pthread_mutex_unlock(&s->op);
	json_decref(list);
	return st;
}

/* What a create asks of its sandbox (not of its VMM). */
static void apply_req(struct sandbox *s, json_t *req)
{
	json_t *t = json_object_get(req, "timeout"), *md = json_object_get(req, "metadata");
	json_int_t timeout = srv.default_timeout;
	const char *mask;

	json_decref(s->metadata);
	s->metadata = json_is_object(md) ? json_deep_copy(md) : json_object();
	s->auto_pause = json_is_true(json_object_get(req, "autoPause"));
	s->auto_resume = json_is_true(json_object_get(json_object_get(req, "autoResume"), "enabled"));
	if (json_is_false(json_object_get(json_object_get(req, "network"), "allowPublicTraffic"))) {
		s->public_traffic = false;
		uuid4(s->traffic_token);
	}
	mask = json_string_value(json_object_get(json_object_get(req, "network"), "maskRequestHost"));
	snprintf(s->mask_host, sizeof(s->mask_host), "%s", mask && mask_host_ok(mask) ? mask : "");
	if (json_is_integer(t) && json_integer_value(t) >= 0)
		timeout = json_integer_value(t);
	if (timeout > srv.max_timeout)
		timeout = srv.max_timeout;
	s->started = time(NULL);
	s->end = s->started + timeout;
	s->timeout = (unsigned)timeout;
}

bool template_name_ok(const char *n)
{
	return *n && strlen(n) <= 60 && !strpbrk(n, "/ ") && n[0] != '.';
}

/* The template's snapshot folder and manifest, or NULL with a 404 message. */
static json_t *template_open(const char *tmpl, char *snap, size_t snaplen, char *msg, size_t len)
{
	char mpath[320];
	json_t *m;

	snprintf(snap, snaplen, "%s/templates/%s/snap", srv.state_dir, tmpl);
	snprintf(mpath, sizeof(mpath), "%s/manifest.json", snap);
	m = json_load_file(mpath, 0, NULL);
	if (!m)
		snprintf(msg, len, "template '%s' not found (no %s: `cubicle template build %s` makes it)",
			 tmpl, mpath, tmpl);
	return m;
}

/*
 * A snapshot template's record (STATE/templates/NAME/snapshot.json, made by
 * sbx_snapshot): {"source": sandbox ID, "template": the template it came
 * from at the root, "token": its agent's access token when it was taken,
 * "created", "config": that template's config}. NULL for a built template.
 */
json_t *sbx_snapshot_record(const char *tmpl)
{
	char path[400];

	snprintf(path, sizeof(path), "%s/templates/%s/snapshot.json", srv.state_dir, tmpl);
	return json_load_file(path, 0, NULL);
}

/*
 * A jailed sandbox's uid and gid, fixed when it is made (a later serve
 * with another jail_user resumes it as it was): jail_user's UID:GID, or
 * with FIRST-LAST the lowest uid of the range no other listed sandbox has
 * (running, paused or pooled; a killed one's folder is gone with it), as
 * its uid and gid. 0, or -1 with @msg when every one is taken.
 */
static int jail_ids_take(struct sandbox *s, char *msg, size_t len)
{
	uint32_t uid;

	if (!s->jailed)
		return 0;
	if (!srv.jail_first) {
		s->jail_uid = srv.jail_uid;
		s->jail_gid = srv.jail_gid;
		return 0;
	}
	pthread_mutex_lock(&srv.lock);
	for (uid = srv.jail_first; uid && uid <= srv.jail_last; uid++) {
		struct sandbox *o = srv.list;

		while (o && (o == s || o->jail_uid != uid))
			o = o->next;
		if (!o)
			break;
	}
	if (uid && uid <= srv.jail_last)
		s->jail_uid = s->jail_gid = uid;
	pthread_mutex_unlock(&srv.lock);
	if (!s->jail_uid)
		return snprintf(msg, len, "jail_user %s: every uid of it is another sandbox's",
				srv.jail_user), -1;
	return 0;
}

/*
 * A new clone of template @tmpl (manifest @m, snapshot @snap): listed in
 * state @st, its folder made, its VMM started (--paused when @paused).
 * @tconfig is its template's config (NULL: @m's, the template's own). The
 * caller holds a reference and s->op. NULL, with @msg, when it could not be
 * started (then nothing of it is left).
 */
static struct sandbox *clone_new(const char *tmpl, json_t *m, const char *snap, enum sbx_state st,
				 bool paused, json_t *tconfig, char *msg, size_t len)
{
	char id[ID_LEN + 1], *sets[VMM_SETS_MAX];
	struct sandbox *s;
	unsigned n_sets;
	int ret;

	id[0] = 'i';
	rand_hex(id + 1, ID_LEN - 1);
	s = sbx_new(id);
	if (!s) {
		snprintf(msg, len, "out of memory");
		return NULL;
	}
	snprintf(s->template_id, sizeof(s->template_id), "%s", tmpl);
	rand_hex(s->token, 64);
	s->vcpus = (unsigned)json_integer_value(json_object_get(m, "vcpus"));
	s->memory_mib = (unsigned)json_integer_value(json_object_get(m, "memory_mib"));
	s->metadata = json_object();
	s->started = time(NULL);
	s->end = s->started + srv.default_timeout;
	s->state = st;
	s->jailed = srv.jail_user != NULL;
	if (mkdir(s->dir, 0700)) {
		snprintf(msg, len, "%s: %s", s->dir, strerror(errno));
		sbx_put(s);
		return NULL;
	}
	{
		/* the template's config as it is now: what a resume checks its
		 * pause snapshots against (sandbox.c, pause_check) */
		char tpath[320];

		snprintf(tpath, sizeof(tpath), "%s/template.json", s->dir);
		if (json_dump_file(tconfig ? tconfig : json_object_get(m, "config"), tpath, JSON_COMPACT)) {
			snprintf(msg, len, "%s: cannot be written", tpath);
			unlink(tpath);
			rmdir(s->dir);
			sbx_put(s);
			return NULL;
		}
	}
	sbx_link_in(s);
	pthread_mutex_lock(&srv.lock);
	s->refs++; /* the caller's */
	pthread_mutex_unlock(&srv.lock);
	pthread_mutex_lock(&s->op); /* a kill waits until it is made */
	json_t *tree = json_object_get(json_object_get(m, "config"), "tree");
	char dev[65];

	n_sets = clone_sets(s, tree, sets, VMM_SETS_MAX);
	ret = jail_ids_take(s, msg, len) ? -1 : net_template_dev(tree, dev, sizeof(dev), msg, len);
	if (ret > 0)
		ret = net_clone(s, dev, sets, &n_sets, VMM_SETS_MAX, msg, len);
	if (ret < 0) {
		for (unsigned i = 0; i < n_sets; i++)
			free(sets[i]);
		sbx_destroy(s);
		pthread_mutex_unlock(&s->op);
		sbx_put(s);
		return NULL;
	}
	ret = vmm_spawn(s, snap, sets, n_sets, paused);
	for (unsigned i = 0; i < n_sets; i++)
		free(sets[i]);
	if (ret) {
		snprintf(msg, len, "starting %s: %s", srv.cubicle, strerror(errno));
		sbx_destroy(s);
		pthread_mutex_unlock(&s->op);
		sbx_put(s);
		return NULL;
	}
	return s;
}

/* A warm-pool clone of @tmpl taken for a create (state STARTING, s->op
 * held, a reference), or NULL when the pool has none ready. */
static struct sandbox *pool_take(const char *tmpl)
{
	struct sandbox *s;

	pthread_mutex_lock(&srv.lock);
	for (s = srv.list; s; s = s->next)
		if (s->state == SBX_POOLED && !strcmp(s->template_id, tmpl)) {
			s->state = SBX_STARTING;
			s->refs++;
			break;
		}
	pthread_mutex_unlock(&srv.lock);
	if (s)
		pthread_mutex_lock(&s->op);
	return s;
}

/* The last step of a create (@from: "created from 'TEMPLATE'", "forked
 * from sandbox ID"): the agent answered, /init done (or not). */
static int create_end(struct sandbox *s, const char *from, int ret, double t0, bool pooled,
		      char *msg, size_t len)
{
	if (ret) {
		char why[400];

		snprintf(why, sizeof(why), "%s", msg);
		snprintf(msg, len, "sandbox %s (%s) did not start: %s", s->id, from, why);
		serve_log("%s", msg);
		sbx_destroy(s);
		pthread_mutex_unlock(&s->op);
		sbx_put(s);
		return 500;
	}
	s->create_ms = now_ms() - t0;
	record_latency(s->create_ms);
	sbx_set_state(s, SBX_RUNNING);
	sbx_save(s);
	pthread_mutex_unlock(&s->op);
	serve_log("sandbox %s: %s in %.1f ms (VMM pid %d%s)", s->id, from, s->create_ms,
		  (int)s->pid, pooled ? ", from the warm pool" : "");
	return 0;
}

int sbx_create(const char *tmpl, json_t *req, struct sandbox **out, char *msg, size_t len)
{
	char snap[300], from[100];
	json_t *m, *rec;
	const char *token;
	struct sandbox *s;
	double t0 = now_ms();
	json_t *allow;
	int ret;

	*out = NULL;
	if (!template_name_ok(tmpl))
		return snprintf(msg, len, "templateID '%s' is not a template name", tmpl), 400;
	ret = net_allow_list(req, srv.net_deny_default, &allow, msg, len);
	if (ret)
		return ret;
	snprintf(from, sizeof(from), "created from '%s'", tmpl);
	m = template_open(tmpl, snap, sizeof(snap), msg, len);
	if (!m) {
		json_decref(allow);
		return 404;
	}
	/* a snapshot's agent has its source's token until /init */
	rec = sbx_snapshot_record(tmpl);
	token = json_string_value(json_object_get(rec, "token"));
	/* A warm clone: its VMM has restored the template and waits paused. */
	while ((s = pool_take(tmpl))) {
		apply_req(s, req);
		s->net_allow = json_incref(allow);
		ret = net_attach(s, msg, len);
		if (!ret)
			ret = vmm_api(s, "PATCH", "/vm", "{\"state\":\"Resumed\"}", 10000, msg, len);
		if (!ret)
			ret = vmm_wait_agent(s, token, json_object_get(req, "envVars"), msg, len);
		if (!create_end(s, from, ret, t0, true, msg, len)) {
			json_decref(m);
			json_decref(rec);
			json_decref(allow);
			*out = s;
			return 0;
		}
		/* that one failed (and is gone): another, or a fresh clone */
	}
	pthread_mutex_lock(&srv.lock);
	if (srv.n_sandboxes >= srv.max_sandboxes) {
		pthread_mutex_unlock(&srv.lock);
		json_decref(m);
		json_decref(rec);
		json_decref(allow);
		return snprintf(msg, len, "this server runs its maximum of %u sandboxes",
				srv.max_sandboxes), 429;
	}
	pthread_mutex_unlock(&srv.lock);
	s = clone_new(tmpl, m, snap, SBX_STARTING, false, json_object_get(rec, "config"), msg, len);
	json_decref(m);
	if (!s) {
		json_decref(rec);
		json_decref(allow);
		return 500;
	}
	apply_req(s, req);
	s->net_allow = allow;
	sbx_save(s); /* a restart mid-create finds the VMM to end */
	ret = s->net_slot >= 0 ? vmm_wait_api(s, msg, len) : 0;
	if (!ret)
		ret = net_attach(s, msg, len);
	if (!ret)
		ret = vmm_wait_agent(s, token, json_object_get(req, "envVars"), msg, len);
	json_decref(rec);
	if (create_end(s, from, ret, t0, false, msg, len))
		return 500;
	*out = s;
	return 0;
}

/*
 * The warm pool (pool_size clones of pool_template, restored and paused,
 * ready for a create to resume): topped up one clone at a time by the
 * reaper. Pool clones are not listed and are not saved: a restarted serve
 * removes them and makes new ones.
 */
void sbx_pool_fill(void)
{
	static bool said;
	unsigned have = 0, all;
	char snap[300], msg[600];
	struct sandbox *s;
	json_t *m, *rec;

	if (!srv.pool_size || !srv.pool_template)
		return;
	pthread_mutex_lock(&srv.lock);
	for (s = srv.list; s; s = s->next)
		have += s->state == SBX_POOLED && !strcmp(s->template_id, srv.pool_template);
	all = srv.n_sandboxes;
	pthread_mutex_unlock(&srv.lock);
	if (have >= srv.pool_size || all >= srv.max_sandboxes)
		return;
	m = template_open(srv.pool_template, snap, sizeof(snap), msg, sizeof(msg));
	if (!m) {
		if (!said)
			serve_log("warm pool: %s", msg);
		said = true;
		return;
	}
	said = false;
	rec = sbx_snapshot_record(srv.pool_template);
	s = clone_new(srv.pool_template, m, snap, SBX_STARTING, true, json_object_get(rec, "config"), msg,
		      sizeof(msg));
	json_decref(rec);
	json_decref(m);
	if (!s) {
		serve_log("warm pool: %s", msg);
		return;
	}
	/* ready when its API answers (the VM made, waiting paused) */
	if (vmm_wait_api(s, msg, sizeof(msg))) {
		serve_log("warm pool: a clone of '%s' did not start: %s", srv.pool_template, msg);
		sbx_destroy(s);
	} else {
		sbx_set_state(s, SBX_POOLED);
	}
	pthread_mutex_unlock(&s->op);
	sbx_put(s);
}

void sbx_pool_drain(void)
{
	struct sandbox *s;

	for (;;) {
		pthread_mutex_lock(&srv.lock);
		for (s = srv.list; s && s->state != SBX_POOLED; s = s->next)
			;
		if (s)
			s->refs++;
		pthread_mutex_unlock(&srv.lock);
		if (!s)
			return;
		sbx_destroy(s);
		sbx_put(s);
	}
}

/* ---- fork ---- */

/*
 * A fork's or snapshot's checkpoint of running sandbox @s: its VMM
 * paused, snapshotted into its folder as fork-GEN and resumed
 * (whatever happened); then the snapshot is copied out of the folder the
 * VMM can write (take_copy) into STATE/forks/ID-GEN, which a restart
 * empties. What a fork or a snapshot takes of the sandbox is read under
 * s->op into @f (its token, metadata, network, template config). 0 with
 * @dir, or an HTTP status with @msg.
 */
struct fork_src {
	char id[ID_LEN + 1], template_id[64], token[65], mask_host[256];
	json_t *metadata, *net_allow, *tconfig;
	bool auto_pause, auto_resume, public_traffic;
	unsigned timeout;
};

/* What a checkpoint copied of its source, let go. */
static void fork_src_free(struct fork_src *f)
{
	json_decref(f->metadata);
	json_decref(f->net_allow);
	json_decref(f->tconfig);
}

static int checkpoint(struct sandbox *s, struct fork_src *f, char *dir, size_t dirlen, char *msg,
		      size_t len)
{
	static unsigned gen;
	char name[40], inside[320], outside[320], body[400], why[400];
	unsigned g;
	int ret;

	pthread_mutex_lock(&srv.lock);
	g = ++gen;
	pthread_mutex_unlock(&srv.lock);
	pthread_mutex_lock(&s->op);
	if (s->state == SBX_PAUSED || s->state == SBX_RESUMING) {
		pthread_mutex_unlock(&s->op);
		return snprintf(msg, len, "sandbox %s is paused: connect to it first", s->id), 409;
	}
	if (s->state != SBX_RUNNING) {
		pthread_mutex_unlock(&s->op);
		return snprintf(msg, len, "sandbox %s not found", s->id), 404;
	}
	snprintf(name, sizeof(name), "fork-%u", g);
	sbx_file(s, name, true, inside, sizeof(inside));
	sbx_file(s, name, false, outside, sizeof(outside));
	rm_tree(outside);
	snprintf(body, sizeof(body), "{\"snapshot_path\":\"%s\"}", inside);
	sbx_checkpoint(s, true);
	ret = vmm_api(s, "PATCH", "/vm", "{\"state\":\"Paused\"}", 10000, msg, len) ||
	      vmm_api(s, "PUT", "/snapshot/create", body, 600000, msg, len);
	if (vmm_api(s, "PATCH", "/vm", "{\"state\":\"Resumed\"}", 10000, why, sizeof(why)))
		serve_log("sandbox %s: resuming it after its checkpoint: %s", s->id, why);
	sbx_checkpoint(s, false);
	snprintf(f->id, sizeof(f->id), "%s", s->id);
	snprintf(f->template_id, sizeof(f->template_id), "%s", s->template_id);
	snprintf(f->token, sizeof(f->token), "%s", s->token);
	f->metadata = json_deep_copy(s->metadata);
	pthread_mutex_lock(&s->net_lock);
	f->net_allow = s->net_allow ? json_deep_copy(s->net_allow) : NULL;
	pthread_mutex_unlock(&s->net_lock);
	f->auto_pause = s->auto_pause;
	f->auto_resume = s->auto_resume;
	f->timeout = s->timeout;
	f->public_traffic = s->public_traffic;
	memcpy(f->mask_host, s->mask_host, sizeof(f->mask_host));
	f->tconfig = sbx_template_config(s);
	pthread_mutex_unlock(&s->op);
	if (ret) {
		snprintf(why, sizeof(why), "%s", msg);
		snprintf(msg, len, "sandbox %s: its checkpoint (a snapshot) failed: %s", s->id, why);
		rm_tree(outside);
		return 500;
	}
	snprintf(dir, dirlen, "%s/forks", srv.state_dir);
	mkdir(dir, 0700);
	snprintf(dir, dirlen, "%s/forks/%s-%u", srv.state_dir, s->id, g);
	rm_tree(dir);
	ret = take_copy(outside, dir, why, sizeof(why));
	rm_tree(outside);
	if (!ret && (ret = sbx_snap_check(s, dir, f->tconfig, why, sizeof(why))))
		rm_tree(dir);
	if (ret) {
		snprintf(msg, len, "sandbox %s: its checkpoint is refused: %s", s->id, why);
		return 500;
	}
	return 0;
}

/* One fork's entry of the answer: {"sandbox": ...} or {"error": {code, message}}. */
static json_t *fork_error(int code, const char *msg)
{
	return json_pack("{s:{s:i,s:s}}", "error", "code", code, "message", msg);
}

int sbx_fork(struct sandbox *src, json_t *req, json_t **out, char *msg, size_t len)
{
	json_t *jc = json_object_get(req, "count"), *jt = json_object_get(req, "timeout"), *m = NULL;
	struct sandbox *kids[100] = { NULL };
	struct fork_src f = { .metadata = NULL };
	json_int_t count = 1, timeout = srv.default_timeout;
	char dir[400], path[420], from[100];
	double t0 = now_ms();
	int st;

	*out = NULL;
	if (jc && (!json_is_integer(jc) || json_integer_value(jc) < 1 || json_integer_value(jc) > 100))
		return snprintf(msg, len, "count must be a whole number from 1 to 100"), 400;
	if (jt && (!json_is_integer(jt) || json_integer_value(jt) < 0))
		return snprintf(msg, len, "timeout must be a number of seconds >= 0"), 400;
	if (jc)
		count = json_integer_value(jc);
	if (jt)
		timeout = json_integer_value(jt) > srv.max_timeout ? srv.max_timeout : json_integer_value(jt);
	st = checkpoint(src, &f, dir, sizeof(dir), msg, len);
	if (st) {
		serve_log("%s", msg);
		goto out;
	}
	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	m = json_load_file(path, 0, NULL);
	*out = json_array();
	snprintf(from, sizeof(from), "forked from sandbox %s", f.id);
	/* every VMM started first, then each waited for: they restore at once */
	for (json_int_t i = 0; i < count; i++) {
		struct sandbox *s;
		bool full;

		pthread_mutex_lock(&srv.lock);
		full = srv.n_sandboxes >= srv.max_sandboxes;
		pthread_mutex_unlock(&srv.lock);
		if (full) {
			snprintf(msg, len, "this server runs its maximum of %u sandboxes", srv.max_sandboxes);
			json_array_append_new(*out, fork_error(429, msg));
			continue;
		}
		s = clone_new(f.template_id, m, dir, SBX_STARTING, false, f.tconfig, msg, len);
		if (!s) {
			json_array_append_new(*out, fork_error(500, msg));
			continue;
		}
		json_decref(s->metadata);
		s->metadata = json_deep_copy(f.metadata);
		s->auto_pause = f.auto_pause;
		s->auto_resume = f.auto_resume;
		s->timeout = f.timeout;
		if (!f.public_traffic) {
			s->public_traffic = false;
			uuid4(s->traffic_token);
		}
		memcpy(s->mask_host, f.mask_host, sizeof(s->mask_host));
		s->net_allow = f.net_allow ? json_deep_copy(f.net_allow) : NULL;
		s->started = time(NULL);
		s->end = s->started + timeout;
		sbx_save(s); /* a restart mid-fork finds the VMM to end */
		kids[i] = s;
		json_array_append_new(*out, json_null());
	}
	for (json_int_t i = 0; i < count; i++) {
		struct sandbox *s = kids[i];
		int ret;

		if (!s)
			continue;
		ret = s->net_slot >= 0 ? vmm_wait_api(s, msg, len) : 0;
		if (!ret)
			ret = net_attach(s, msg, len);
		/* its agent holds the source's token until /init gives it its own */
		if (!ret)
			ret = vmm_wait_agent(s, f.token, NULL, msg, len);
		if (create_end(s, from, ret, t0, false, msg, len))
			json_array_set_new(*out, (size_t)i, fork_error(500, msg));
		else
			json_array_set_new(*out, (size_t)i, json_pack("{s:o}", "sandbox", sbx_created_json(s)));
		sbx_put(s);
	}
	/* each fork's VMM has restored from it (its memory mapped, its disks copied) */
	rm_tree(dir);
	serve_log("sandbox %s: forked %lld times in %.1f ms", f.id, (long long)count, now_ms() - t0);
out:
	json_decref(m);
	fork_src_free(&f);
	return st;
}

/* ---- snapshots: templates made of a running sandbox ---- */

int sbx_snapshot(struct sandbox *src, json_t *req, json_t **out, char *msg, size_t len)
{
	json_t *jn = json_object_get(req, "name"), *rec = NULL, *base = NULL;
	struct fork_src f = { .metadata = NULL };
	char dir[400], name[64], tdir[400], final[400], old[420], path[440];
	const char *root_tmpl;
	int st;

	*out = NULL;
	if (jn && !json_is_string(jn))
		return snprintf(msg, len, "name must be a string"), 400;
	if (jn) {
		snprintf(name, sizeof(name), "%s", json_string_value(jn));
		if (!template_name_ok(json_string_value(jn)))
			return snprintf(msg, len, "name '%s' is not a template name (1-60 characters, no '/', ' ' or leading '.')",
					json_string_value(jn)), 400;
	} else {
		name[0] = 's';
		rand_hex(name + 1, ID_LEN - 1);
	}
	snprintf(final, sizeof(final), "%s/templates/%s", srv.state_dir, name);
	snprintf(path, sizeof(path), "%s/snapshot.json", final);
	if (!access(final, F_OK) && access(path, F_OK))
		return snprintf(msg, len, "template '%s' exists and is not a snapshot (`cubicle template build` made it)",
				name), 409;
	st = checkpoint(src, &f, dir, sizeof(dir), msg, len);
	if (st) {
		serve_log("%s", msg);
		goto out;
	}
	/* the template it came from at the root: a snapshot of a sandbox made
	 * of a snapshot names the template that one came from */
	base = sbx_snapshot_record(f.template_id);
	root_tmpl = json_string_value(json_object_get(base, "template")) ?: f.template_id;
	rec = json_pack("{s:s,s:s,s:s,s:I,s:O?}", "source", f.id, "template", root_tmpl, "token", f.token,
			"created", (json_int_t)time(NULL), "config", f.tconfig);
	snprintf(tdir, sizeof(tdir), "%s/templates/.%s.snap-%s", srv.state_dir, name, strrchr(dir, '/') + 1);
	snprintf(path, sizeof(path), "%s/snap", tdir);
	st = 500;
	rm_tree(tdir);
	if (!rec || mkdir(tdir, 0700) || rename(dir, path)) {
		snprintf(msg, len, "%s: %s", tdir, rec ? strerror(errno) : "out of memory");
	} else {
		snprintf(path, sizeof(path), "%s/snapshot.json", tdir);
		if (json_dump_file(rec, path, JSON_COMPACT))
			snprintf(msg, len, "%s: cannot be written", path);
		else
			st = 0;
	}
	/* in place of an older snapshot of that name (E2B: a new build of it) */
	snprintf(old, sizeof(old), "%s.old-%s", tdir, name);
	if (!st && !access(final, F_OK) && rename(final, old))
		st = 500, snprintf(msg, len, "%s: %s", final, strerror(errno));
	if (!st && rename(tdir, final)) {
		st = 500, snprintf(msg, len, "%s: %s", final, strerror(errno));
		rename(old, final);
	}
	rm_tree(old);
	if (st) {
		serve_log("sandbox %s: its snapshot '%s': %s", f.id, name, msg);
		rm_tree(tdir);
		rm_tree(dir);
		goto out;
	}
	serve_log("sandbox %s: snapshot template '%s' made", f.id, name);
	*out = json_pack("{s:s,s:[s]}", "snapshotID", name, "names", name);
out:
	json_decref(rec);
	json_decref(base);
	fork_src_free(&f);
	return st;
}

json_t *sbx_snapshot_list(const char *source, const char *name)
{
	char dir[320];
	json_t *all = json_array();
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/templates", srv.state_dir);
	if (!all || !(d = opendir(dir)))
		return all;
	while ((e = readdir(d))) {
		json_t *rec;
		const char *src;

		if (e->d_name[0] == '.' || (name && *name && strcmp(name, e->d_name) &&
					    (strlen(e->d_name) != strcspn(name, ":") ||
					     strncmp(name, e->d_name, strcspn(name, ":")))))
			continue;
		rec = sbx_snapshot_record(e->d_name);
		src = json_string_value(json_object_get(rec, "source"));
		if (src && (!source || !*source || !strcmp(source, src)))
			json_array_append_new(all, json_pack("{s:s,s:[s],s:s,s:I}", "snapshotID", e->d_name, "names",
							     e->d_name, "sandboxID", src, "created",
							     json_integer_value(json_object_get(rec, "created"))));
		json_decref(rec);
	}
	closedir(d);
	return all;
}

int sbx_snapshot_delete(const char *name, char *msg, size_t len)
{
	char final[400], gone[440];
	json_t *rec;

	if (!template_name_ok(name))
		return snprintf(msg, len, "template '%s' not found", name), 404;
	snprintf(final, sizeof(final), "%s/templates/%s", srv.state_dir, name);
	if (access(final, F_OK))
		return snprintf(msg, len, "template '%s' not found", name), 404;
	rec = sbx_snapshot_record(name);
	if (!rec)
		return snprintf(msg, len, "template '%s' was built by `cubicle template build`: `cubicle template rm %s` removes it",
				name, name), 409;
	json_decref(rec);
	/* away from its name at once; sandboxes made of it keep what they mapped */
	snprintf(gone, sizeof(gone), "%s/templates/.%s.gone-%d", srv.state_dir, name, (int)getpid());
	if (rename(final, gone))
		return snprintf(msg, len, "%s: %s", final, strerror(errno)), 500;
	rm_tree(gone);
	serve_log("snapshot template '%s' deleted", name);
	return 0;
}
