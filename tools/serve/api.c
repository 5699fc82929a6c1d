/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a request is for: the data plane (a sandbox named by the headers
 * E2b-Sandbox-Id/-Port or by a Host PORT-ID.DOMAIN), E2B's control plane
 * (REST + JSON, v1 and v2 paths, an API key), or the status page.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "build.h"
#include <nettle/base64.h>
#include <nettle/sha2.h>

#include "serve.h"

#define BODY_MAX (1u << 20)

/* ---- small helpers ---- */

static bool same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;

	for (size_t i = 0; i < la; i++)
		d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
	return !d;
}

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

/* Percent-decodes @n bytes of @s into @out (@out may be @s: it is never
 * ahead of what it reads); @plus: a '+' is a space too (a query's). */
static void pct_decode(const char *s, size_t n, char *out, size_t len, bool plus)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 1 < len; i++) {
		if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else {
			out[o++] = plus && s[i] == '+' ? ' ' : s[i];
		}
	}
	out[o] = '\0';
}

/* Calls @fn for each name=value of a query string (decoded). */
static void query_each(const char *q, void (*fn)(void *, const char *, const char *), void *arg)
{
	while (q && *q) {
		size_t n = strcspn(q, "&"), k = strcspn(q, "=");
		char name[256], value[4096];

		if (k > n)
			k = n;
		pct_decode(q, k, name, sizeof(name), true);
		pct_decode(q + k + (k < n), k < n ? n - k - 1 : 0, value, sizeof(value), true);
		fn(arg, name, value);
		q += n + (q[n] == '&');
	}
}

struct qkey {
	char key[256];
};

static void find_key(void *arg, const char *k, const char *v)
{
	if (!strcmp(k, "api_key"))
		snprintf(((struct qkey *)arg)->key, sizeof(((struct qkey *)arg)->key), "%s", v);
}

/* The API key in X-API-Key or Authorization: Bearer; for the status page
 * (GET /, which a browser opens) also ?api_key=KEY. */
static bool key_ok(const struct hreq *r)
{
	const char *k = hreq_header(r, "X-API-Key"), *a = hreq_header(r, "Authorization");
	struct qkey q = { "" };
	bool ok = false;

	if (!srv.n_keys)
		return true;
	if ((!k || !*k) && a && !strncasecmp(a, "Bearer ", 7))
		k = a + 7;
	if ((!k || !*k) && r->method == HTTP_GET && !strcmp(r->path, "/")) {
		query_each(r->query, find_key, &q);
		k = q.key;
	}
	if (!k || !*k)
		return false;
	for (unsigned i = 0; i < srv.n_keys; i++)
		ok |= same(k, srv.keys[i]);
	return ok;
}

/* ---- JSON of a sandbox ---- */

static json_t *sbx_json(struct sandbox *s, bool created)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s}", "sandboxID", s->id, "templateID",
			      s->template_id, "alias", s->template_id, "clientID", "cubicle",
			      "envdVersion", ENVD_VERSION);

	if (!j)
		return NULL;
	json_object_set_new(j, "domain", srv.domain ? json_string(srv.domain) : json_null());
	if (created) {
		json_object_set_new(j, "envdAccessToken", json_string(s->token));
		json_object_set_new(j, "trafficAccessToken",
				    s->public_traffic ? json_null() : json_string(s->traffic_token));
	}
	return j;
}

json_t *sbx_created_json(struct sandbox *s)
{
	return sbx_json(s, true);
}

static json_t *listed_json(struct sandbox *s, bool detail)
{
	unsigned long long disk_used, disk_total;
	char a[40], b[40];
	json_t *j;

	sbx_disk_usage(s, &disk_used, &disk_total);
	pthread_mutex_lock(&srv.lock);
	iso_time(s->started, a, sizeof(a));
	iso_time(s->end, b, sizeof(b));
	j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:O,s:s,s:s}", "sandboxID", s->id,
		      "templateID", s->template_id, "alias", s->template_id, "clientID", "cubicle",
		      "startedAt", a, "endAt", b, "cpuCount", (int)s->vcpus, "memoryMB",
		      (int)s->memory_mib, "diskSizeMB", (int)(disk_total >> 20), "metadata", s->metadata, "state",
		      s->state == SBX_PAUSED || s->state == SBX_RESUMING ? "paused" : "running",
		      "envdVersion", ENVD_VERSION);
	pthread_mutex_unlock(&srv.lock);
	if (j && detail) {
		json_object_set_new(j, "envdAccessToken", json_string(s->token));
		json_object_set_new(j, "domain", srv.domain ? json_string(srv.domain) : json_null());
		json_object_set_new(j, "network", json_pack("{s:b}", "allowPublicTraffic",
							    s->public_traffic));
		if (s->mask_host[0])
			json_object_set_new(json_object_get(j, "network"), "maskRequestHost",
					    json_string(s->mask_host));
		if (s->net_slot >= 0 && s->net_allow)
			json_object_set(json_object_get(j, "network"), "cubicleAllowList",
					s->net_allow);
		json_object_set_new(j, "lifecycle", json_pack("{s:b,s:s}", "autoResume", s->auto_resume,
							      "onTimeout",
							      s->auto_pause ? "pause" : "kill"));
	}
	return j;
}

/* ---- list ---- */

struct filter {
	json_t *meta;        /* key -> value that must match */
	bool running, paused;
	long limit, from;
	bool bad;
};

static void filter_meta(void *arg, const char *k, const char *v)
{
	struct filter *f = arg;
	char kk[256], vv[2048];

	/* the SDK percent-encodes each key and value before it encodes the pairs */
	pct_decode(k, strlen(k), kk, sizeof(kk), true);
	pct_decode(v, strlen(v), vv, sizeof(vv), true);
	json_object_set_new(f->meta, kk, json_string(vv));
}

/* A listing's paging: limit (1-1000) and nextToken (the offset a former
 * page's X-Next-Token gave). True when @k is one of them (*@bad set when
 * its value is wrong). */
static bool page_param(const char *k, const char *v, long *limit, long *from, bool *bad)
{
	char *end;

	if (!strcmp(k, "limit")) {
		*limit = strtol(v, &end, 10);
		*bad |= *end || *limit < 1 || *limit > 1000;
	} else if (!strcmp(k, "nextToken")) {
		*from = strtol(v, &end, 10);
		*bad |= *end || *from < 0;
	} else {
		return false;
	}
	return true;
}

static void filter_param(void *arg, const char *k, const char *v)
{
	struct filter *f = arg;

	if (page_param(k, v, &f->limit, &f->from, &f->bad)) {
		return;
	} else if (!strcmp(k, "metadata")) {
		query_each(v, filter_meta, f);
	} else if (!strcmp(k, "state")) {
		for (const char *p = v; *p;) {
			size_t n = strcspn(p, ",");

			if (n == 7 && !strncmp(p, "running", 7))
				f->running = true;
			else if (n == 6 && !strncmp(p, "paused", 6))
				f->paused = true;
			else
				f->bad = true;
			p += n + (p[n] == ',');
		}
	}
}

static bool matches(struct sandbox *s, const struct filter *f)
{
	const char *k;
	json_t *v;
	bool paused = s->state == SBX_PAUSED || s->state == SBX_RESUMING;

	if (s->state == SBX_STARTING || s->state == SBX_GONE || s->state == SBX_POOLED)
		return false;
	if (paused ? !f->paused : !f->running)
		return false;
	json_object_foreach(f->meta, k, v) {
		const char *have = json_string_value(json_object_get(s->metadata, k));

		if (!have || strcmp(have, json_string_value(v)))
			return false;
	}
	return true;
}

static int by_start(const void *a, const void *b)
{
	const struct sandbox *x = *(struct sandbox *const *)a, *y = *(struct sandbox *const *)b;

	if (x->started != y->started)
		return x->started < y->started ? 1 : -1;
	return strcmp(x->id, y->id);
}

static void list(struct hconn *c, struct hreq *r, bool v2)
{
	struct filter f = { .meta = json_object(), .limit = 100 };
	struct sandbox **all;
	unsigned n = 0, cap;
	json_t *out = json_array();
	char hdr[64] = "";

	query_each(r->query, filter_param, &f);
	if (!f.running && !f.paused) {
		f.running = true;
		f.paused = v2; /* v1 lists running sandboxes */
	}
	if (f.bad) {
		json_decref(f.meta);
		json_decref(out);
		hio_error(c, 400, "bad query: state is running and/or paused, limit 1-1000, nextToken from X-Next-Token");
		return;
	}
	pthread_mutex_lock(&srv.lock);
	cap = srv.n_sandboxes;
	all = calloc(cap + 1, sizeof(*all));
	for (struct sandbox *s = srv.list; all && s; s = s->next)
		if (matches(s, &f) && n < cap) {
			s->refs++;
			all[n++] = s;
		}
	pthread_mutex_unlock(&srv.lock);
	qsort(all, n, sizeof(*all), by_start);
	for (unsigned i = 0; i < n; i++) {
		if (i >= f.from && i < f.from + f.limit)
			json_array_append_new(out, listed_json(all[i], false));
		sbx_put(all[i]);
	}
	if (f.from + f.limit < n)
		snprintf(hdr, sizeof(hdr), "X-Next-Token: %ld\r\n", f.from + f.limit);
	free(all);
	json_decref(f.meta);
	hio_reply_json(c, 200, out, hdr);
}

/* ---- one sandbox ---- */

static json_t *body_json(struct hconn *c, struct hreq *r, bool need)
{
	json_error_t e;
	json_t *j;
	int st = hio_read_body(c, r, BODY_MAX);

	if (st == 413) {
		hio_error(c, 413, "the body is larger than %u bytes", BODY_MAX);
		return NULL;
	}
	if (st) {
		c->close = true;
		return NULL;
	}
	if (!r->body_len && !need)
		return json_object();
	j = json_loadb(r->body, r->body_len, 0, &e);
	if (!json_is_object(j)) {
		hio_error(c, 400, "malformed JSON body: %s", j ? "not an object" : e.text);
		json_decref(j);
		return NULL;
	}
	return j;
}

/* A create's autoResume: absent, null, or {"enabled": BOOL}; enabled
 * only with autoPause (what is paused at its timeout is what wakes). */
static bool auto_resume_ok(json_t *req, char *msg, size_t len)
{
	json_t *a = json_object_get(req, "autoResume"), *e = json_object_get(a, "enabled");

	if (!a || json_is_null(a))
		return true;
	if (!json_is_object(a) || !json_is_boolean(e)) {
		snprintf(msg, len, "autoResume must be {\"enabled\": true or false}");
		return false;
	}
	if (json_is_true(e) && !json_is_true(json_object_get(req, "autoPause"))) {
		snprintf(msg, len, "autoResume.enabled needs autoPause true: only a sandbox paused at "
				   "its timeout can be resumed by its traffic");
		return false;
	}
	return true;
}

/* What a create's (@create) or an update's network asks that serve has not
 * built: 501 naming it; a maskRequestHost it cannot take: 400; else 0. */
static int network_check(json_t *net, bool create, char *msg, size_t len)
{
	json_t *rules = json_object_get(net, "rules"), *m = json_object_get(net, "maskRequestHost");

	if (!json_is_object(net))
		return 0;
	if (!json_is_null(json_object_get(net, "egressProxy")) && json_object_get(net, "egressProxy"))
		return snprintf(msg, len, "network.egressProxy: cubicle serve has no egress proxy (a SOCKS5 tunnel "
				   "for a sandbox's outbound TCP is not built); allowOut and denyOut filter "
				   "its egress"), 501;
	if (json_object_size(rules) || (rules && !json_is_object(rules) && !json_is_null(rules)))
		return snprintf(msg, len, "network.rules: cubicle serve does not transform a sandbox's HTTP(S) "
				   "requests (per-domain header rules are not built)"), 501;
	if (create && json_array_size(json_object_get(net, "httpsPorts")))
		return snprintf(msg, len, "network.httpsPorts: cubicle serve speaks plain HTTP to a sandbox's "
				   "ports (TLS toward them is not built)"), 501;
	if (create && m && !json_is_null(m) && (!json_is_string(m) || !mask_host_ok(json_string_value(m))))
		return snprintf(msg, len, "network.maskRequestHost must be a host[:port] of at most 200 "
				   "characters (letters, digits, \"-._:[]%%~\"; \"${PORT}\" for the port)"), 400;
	return 0;
}

static void create(struct hconn *c, struct hreq *r)
{
	json_t *req = body_json(c, r, true), *t;
	struct sandbox *s;
	char msg[600], tmpl[80];
	int st;

	if (!req)
		return;
	t = json_object_get(req, "templateID");
	if (t && !json_is_string(t)) {
		json_decref(req);
		hio_error(c, 400, "templateID must be a string");
		return;
	}
	if (!auto_resume_ok(req, msg, sizeof(msg))) {
		json_decref(req);
		hio_error(c, 400, "%s", msg);
		return;
	}
	if (json_array_size(json_object_get(req, "volumeMounts"))) {
		json_decref(req);
		hio_error(c, 501, "volumeMounts: cubicle serve has no volumes (a file system shared by running sandboxes is not built)");
		return;
	}
	if ((st = network_check(json_object_get(req, "network"), true, msg, sizeof(msg)))) {
		json_decref(req);
		hio_error(c, (unsigned)st, "%s", msg);
		return;
	}
	/* NAME:TAG of a template built through the SDK is NAME */
	template_resolve(t ? json_string_value(t) : "base", tmpl, sizeof(tmpl));
	st = sbx_create(tmpl, req, &s, msg, sizeof(msg));
	json_decref(req);
	if (st) {
		hio_error(c, (unsigned)st, "%s", msg);
		return;
	}
	hio_reply_json(c, 201, sbx_json(s, true), NULL);
	sbx_put(s);
}

/* POST /sandboxes/ID/refreshes (E2B's keep-alive): its duration, seconds,
 * at most REFRESH_MAX, at least (and by default) REFRESH_MIN; never
 * shortens what the sandbox has left. */
#define REFRESH_MIN 15
#define REFRESH_MAX 3600

static unsigned timeout_of(json_t *req, bool *bad)
{
	json_t *t = json_object_get(req, "timeout");

	*bad = t && (!json_is_integer(t) || json_integer_value(t) < 0);
	return json_is_integer(t) && json_integer_value(t) >= 0
		       ? (unsigned)(json_integer_value(t) > 1000000000 ? 1000000000 : json_integer_value(t))
		       : srv.default_timeout;
}

/* One SandboxMetric of E2B's. */
static json_t *sample_json(const struct sandbox *s, const struct sbx_sample *x)
{
	char stamp[32];
	struct tm tm;

	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&x->t, &tm));
	/* timestamp: deprecated in E2B's API, still required, and what SDK 2.51 reads */
	return json_pack("{s:s,s:I,s:i,s:f,s:I,s:I,s:I,s:I,s:I}", "timestamp", stamp, "timestampUnix",
			 (json_int_t)x->t, "cpuCount", (int)s->vcpus, "cpuUsedPct", x->cpu_pct, "memUsed",
			 (json_int_t)x->mem, "memTotal", (json_int_t)s->memory_mib << 20, "memCache",
			 (json_int_t)0, "diskUsed", (json_int_t)x->disk_used, "diskTotal",
			 (json_int_t)x->disk_total);
}

/* A sample of @s now (not kept), as E2B's SandboxMetric. */
static json_t *metric_json(struct sandbox *s)
{
	struct sbx_sample x;

	sbx_sample(s, &x, false);
	return sample_json(s, &x);
}

/* GET /sandboxes/ID/metrics?start=&end= (Unix seconds; default: all kept,
 * up to now): the samples kept (one each SBX_SAMPLE_S while it runs, the
 * last hour), then one taken now when it runs and now is in range. */
struct range_param {
	long long v[2];
	bool has[2];
	char bad[80];
};

static void range_param(void *arg, const char *k, const char *v)
{
	struct range_param *p = arg;
	int i = !strcmp(k, "start") ? 0 : !strcmp(k, "end") ? 1 : -1;
	char *end;

	if (i < 0 || *p->bad)
		return;
	errno = 0;
	p->v[i] = strtoll(v, &end, 10);
	p->has[i] = true;
	if (!*v || *end || p->v[i] < 0 || errno)
		snprintf(p->bad, sizeof(p->bad), "%s must be Unix seconds (an integer >= 0)", k);
}

static void metrics(struct hconn *c, struct hreq *r, struct sandbox *s)
{
	struct range_param p = { { 0, 0 }, { false, false }, "" };
	struct sbx_sample *kept;
	time_t now = time(NULL);
	json_t *all;
	unsigned n;

	query_each(r->query, range_param, &p);
	if (!p.has[1])
		p.v[1] = now;
	if (!*p.bad && p.v[0] > p.v[1])
		snprintf(p.bad, sizeof(p.bad), "start is after end");
	if (*p.bad) {
		hio_error(c, 400, "%s", p.bad);
		return;
	}
	kept = malloc(SBX_SAMPLES * sizeof(*kept));
	all = json_array();
	if (!kept || !all) {
		free(kept);
		json_decref(all);
		hio_error(c, 500, "out of memory");
		return;
	}
	n = sbx_samples(s, (time_t)p.v[0], (time_t)p.v[1], kept, SBX_SAMPLES);
	for (unsigned i = 0; i < n; i++)
		json_array_append_new(all, sample_json(s, &kept[i]));
	free(kept);
	if (s->state == SBX_RUNNING && now >= p.v[0] && now <= p.v[1])
		json_array_append_new(all, metric_json(s));
	hio_reply_json(c, 200, all, NULL);
}

/* GET /sandboxes/metrics?sandbox_ids=A,B: {"sandboxes": {ID: metric}} for
 * those of them that run (E2B: at most 100; an unknown or paused one is
 * left out). */
#define METRICS_IDS_MAX 100

struct ids_param {
	char ids[sizeof(((struct hreq *)0)->url)]; /* as long as a URL can be */
};

static void ids_param(void *arg, const char *k, const char *v)
{
	struct ids_param *p = arg;

	if (!strcmp(k, "sandbox_ids"))
		snprintf(p->ids, sizeof(p->ids), "%s", v);
}

static void metrics_of(struct hconn *c, struct hreq *r)
{
	struct ids_param p = { "" };
	json_t *all = json_object();
	unsigned n = 0;
	char *save, *id;

	query_each(r->query, ids_param, &p);
	if (!all) {
		hio_error(c, 500, "out of memory");
		return;
	}
	if (!*p.ids) {
		json_decref(all);
		hio_error(c, 400, "sandbox_ids (IDs separated by commas) is required");
		return;
	}
	for (id = strtok_r(p.ids, ",", &save); id; id = strtok_r(NULL, ",", &save)) {
		struct sandbox *s;
		json_t *m;

		if (++n > METRICS_IDS_MAX) {
			json_decref(all);
			hio_error(c, 400, "sandbox_ids: at most %d IDs", METRICS_IDS_MAX);
			return;
		}
		s = sbx_get(id);
		if (!s)
			continue;
		if (s->state == SBX_RUNNING && (m = metric_json(s)))
			json_object_set_new(all, s->id, m);
		sbx_put(s);
	}
	hio_reply_json(c, 200, json_pack("{s:o}", "sandboxes", all), NULL);
}

/* GET /sandboxes/ID/logs?start=&limit= and /v2/...?cursor=&limit=&direction=&level=&search= */
struct logs_param {
	struct logs_query q;
	char bad[120];
};

static void logs_param(void *arg, const char *k, const char *v)
{
	struct logs_param *p = arg;
	char *end;

	if (*p->bad)
		return;
	errno = 0;
	if (!strcmp(k, "start") || !strcmp(k, "cursor")) {
		p->q.start = strtoll(v, &end, 10);
		p->q.has_start = true;
		if (!*v || *end || p->q.start < 0 || errno)
			snprintf(p->bad, sizeof(p->bad), "%s must be a time in ms since 1970", k);
	} else if (!strcmp(k, "limit")) {
		long l = strtol(v, &end, 10);

		if (!*v || *end || l < 0 || l > 1000)
			snprintf(p->bad, sizeof(p->bad), "limit must be 0 to 1000");
		p->q.limit = (unsigned)l;
	} else if (!strcmp(k, "direction")) {
		if (strcmp(v, "forward") && strcmp(v, "backward"))
			snprintf(p->bad, sizeof(p->bad), "direction must be forward or backward");
		p->q.backward = !strcmp(v, "backward");
	} else if (!strcmp(k, "level")) {
		if ((p->q.min_level = logs_level(v)) < 0)
			snprintf(p->bad, sizeof(p->bad), "level must be debug, info, warn or error");
	} else if (!strcmp(k, "search")) {
		if (strlen(v) >= sizeof(p->q.search))
			snprintf(p->bad, sizeof(p->bad), "search is longer than 256 bytes");
		snprintf(p->q.search, sizeof(p->q.search), "%s", v);
	}
}

static void logs(struct hconn *c, struct hreq *r, const struct sandbox *s, bool v2)
{
	struct logs_param p = { .q = { .limit = 1000 } };
	char msg[400];
	json_t *out;
	int st;

	query_each(r->query, logs_param, &p);
	if (*p.bad)
		hio_error(c, 400, "%s", p.bad);
	else if ((st = sbx_logs(s, &p.q, v2, &out, msg, sizeof(msg))))
		hio_error(c, (unsigned)st, "%s", msg);
	else
		hio_reply_json(c, 200, out, NULL);
}

static void one(struct hconn *c, struct hreq *r, const char *id, const char *verb, bool v2)
{
	struct sandbox *s = sbx_get(id);
	json_t *req;
	char msg[600];
	bool bad;
	int st;

	if (!s) {
		c->close = !r->done;
		hio_error(c, 404, "sandbox %s not found", id);
		return;
	}
	if (!verb && r->method == HTTP_GET) {
		hio_reply_json(c, 200, listed_json(s, true), NULL);
	} else if (!verb && r->method == HTTP_DELETE) {
		st = sbx_kill(s, msg, sizeof(msg));
		st ? hio_error(c, (unsigned)st, "%s", msg) : hio_reply(c, 204, NULL, NULL, 0, NULL);
	} else if (verb && !strcmp(verb, "metrics") && r->method == HTTP_GET) {
		metrics(c, r, s);
	} else if (verb && !strcmp(verb, "logs") && r->method == HTTP_GET) {
		logs(c, r, s, v2);
	} else if (verb && r->method == HTTP_POST && !strcmp(verb, "timeout")) {
		if ((req = body_json(c, r, true))) {
			unsigned t = timeout_of(req, &bad);

			if (bad || !json_object_get(req, "timeout"))
				hio_error(c, 400, "timeout must be a number of seconds >= 0");
			else if (s->state != SBX_RUNNING && s->state != SBX_PAUSED)
				hio_error(c, 404, "sandbox %s not found", id);
			else
				sbx_set_timeout(s, t), hio_reply(c, 204, NULL, NULL, 0, NULL);
			json_decref(req);
		}
	} else if (verb && r->method == HTTP_POST && !strcmp(verb, "refreshes")) {
		if ((req = body_json(c, r, false))) {
			json_t *d = json_object_get(req, "duration");

			if (d && !json_is_null(d) &&
			    (!json_is_integer(d) || json_integer_value(d) < 0 ||
			     json_integer_value(d) > REFRESH_MAX))
				hio_error(c, 400, "duration must be a number of seconds from 0 to %d",
					  REFRESH_MAX);
			else if (s->state != SBX_RUNNING && s->state != SBX_PAUSED)
				hio_error(c, 404, "sandbox %s not found", id);
			else
				sbx_extend_timeout(s, json_is_integer(d) &&
							      json_integer_value(d) > REFRESH_MIN
						      ? (unsigned)json_integer_value(d)
						      : REFRESH_MIN),
					hio_reply(c, 204, NULL, NULL, 0, NULL);
			json_decref(req);
		}
	} else if (verb && r->method == HTTP_POST && !strcmp(verb, "pause")) {
		if ((req = body_json(c, r, false))) {
			st = sbx_pause(s, msg, sizeof(msg));
			st ? hio_error(c, (unsigned)st, "%s", msg) : hio_reply(c, 204, NULL, NULL, 0, NULL);
			json_decref(req);
		}
	} else if (verb && r->method == HTTP_POST &&
		   (!strcmp(verb, "connect") || !strcmp(verb, "resume"))) {
		if ((req = body_json(c, r, false))) {
			unsigned t = timeout_of(req, &bad);

			if (bad)
				hio_error(c, 400, "timeout must be a number of seconds >= 0");
			else if (!strcmp(verb, "resume") && s->state == SBX_RUNNING)
				hio_error(c, 409, "sandbox %s is already running", id);
			else if ((st = sbx_resume(s, t, msg, sizeof(msg))) && st != 201)
				hio_error(c, (unsigned)st, "%s", msg);
			else
				hio_reply_json(c, st ? 201 : 200, sbx_json(s, true), NULL);
			json_decref(req);
		}
	} else if (verb && r->method == HTTP_POST && (!strcmp(verb, "fork") || !strcmp(verb, "snapshots"))) {
		/* both checkpoint it and answer 201 with what they made of that */
		if ((req = body_json(c, r, false))) {
			json_t *made;

			st = (!strcmp(verb, "fork") ? sbx_fork : sbx_snapshot)(s, req, &made, msg, sizeof(msg));
			st ? hio_error(c, (unsigned)st, "%s", msg) : hio_reply_json(c, 201, made, NULL);
			json_decref(req);
		}
	} else if (verb && r->method == HTTP_PUT && !strcmp(verb, "network")) {
		if ((req = body_json(c, r, true))) {
			if (!(st = network_check(req, false, msg, sizeof(msg))))
				st = sbx_set_network(s, req, msg, sizeof(msg));
			st ? hio_error(c, (unsigned)st, "%s", msg) : hio_reply(c, 204, NULL, NULL, 0, NULL);
			json_decref(req);
		}
	} else {
		c->close = !r->done;
		hio_error(c, verb && strcmp(verb, "metrics") && strcmp(verb, "timeout") &&
				     strcmp(verb, "pause") && strcmp(verb, "connect") &&
				     strcmp(verb, "resume") && strcmp(verb, "network") && strcmp(verb, "fork") &&
				     strcmp(verb, "snapshots") && strcmp(verb, "logs") &&
				     strcmp(verb, "refreshes") ? 404 : 405,
			  "no %s %s%s here", http_method_str((enum http_method)r->method), r->path,
			  v2 ? "" : "");
	}
	sbx_put(s);
}

/* ---- snapshot templates ---- */

struct snapq {
	char sandbox[64], name[128];
	long limit, from;
	bool bad;
};

static void snap_param(void *arg, const char *k, const char *v)
{
	struct snapq *q = arg;

	if (page_param(k, v, &q->limit, &q->from, &q->bad)) {
		return;
	} else if (!strcmp(k, "sandboxID")) {
		snprintf(q->sandbox, sizeof(q->sandbox), "%s", v);
	} else if (!strcmp(k, "name")) {
		/* "NAME", "TEAM/NAME" or "NAME:TAG": serve has no teams (a tag is
		 * matched with or without: sbx_snapshot_list) */
		const char *n = strrchr(v, '/') ? strrchr(v, '/') + 1 : v;

		snprintf(q->name, sizeof(q->name), "%s", n);
	}
}

static int by_created(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "created")),
		   y = json_integer_value(json_object_get(*(json_t *const *)b, "created"));

	if (x != y)
		return x < y ? 1 : -1;
	return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "snapshotID")),
		      json_string_value(json_object_get(*(json_t *const *)b, "snapshotID")));
}

static void snapshot_list(struct hconn *c, struct hreq *r)
{
	struct snapq q = { .limit = 100 };
	json_t *all, *out = json_array(), **v;
	char hdr[64] = "";
	size_t n;

	query_each(r->query, snap_param, &q);
	if (q.bad) {
		json_decref(out);
		hio_error(c, 400, "bad query: limit 1-1000, nextToken from X-Next-Token");
		return;
	}
	all = sbx_snapshot_list(q.sandbox, q.name);
	n = json_array_size(all);
	v = calloc(n + 1, sizeof(*v));
	for (size_t i = 0; v && i < n; i++)
		v[i] = json_array_get(all, i);
	if (v)
		qsort(v, n, sizeof(*v), by_created);
	for (size_t i = 0; v && i < n; i++)
		if ((long)i >= q.from && (long)i < q.from + q.limit)
			json_array_append(out, v[i]);
	if (q.from + q.limit < (long)n)
		snprintf(hdr, sizeof(hdr), "X-Next-Token: %ld\r\n", q.from + q.limit);
	free(v);
	json_decref(all);
	hio_reply_json(c, 200, out, hdr);
}

/* ---- template builds (build.c) ---- */

struct buildq {
	char upload[64];
	long offset;
	bool bad;
};

static void build_param(void *arg, const char *k, const char *v)
{
	struct buildq *q = arg;
	char *end;

	if (!strcmp(k, "upload")) {
		snprintf(q->upload, sizeof(q->upload), "%s", v);
	} else if (!strcmp(k, "logsOffset")) {
		q->offset = strtol(v, &end, 10);
		q->bad |= *end || q->offset < 0;
	}
}

/* @p split at '/' into at most @max non-empty parts (in @buf, each
 * percent-decoded): their count, or -1 when there are more or one is empty. */
static int split_path(const char *p, char *buf, size_t len, char **part, int max)
{
	int n = 0;
	char *save = NULL, *t;

	snprintf(buf, len, "%s", p);
	if (*p != '/' || strstr(p, "//") || p[strlen(p) - 1] == '/')
		return -1;
	for (t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		if (n == max)
			return -1;
		part[n++] = t;
		/* decoded in place (the SDK encodes a NAME:TAG's ':'); a '+'
		 * in a path is a '+' */
		pct_decode(t, strlen(t), t, strlen(t) + 1, false);
	}
	return n;
}

/* PUT /templates/TID/files/HASH?upload=TOKEN (the link build_file_link
 * gave): answers to its token (the SDK sends no API key with it) or the
 * key. False when @r is not one. */
static bool upload_route(struct hconn *c, struct hreq *r)
{
	char buf[512], *part[5], msg[600];
	struct buildq q = { .offset = 0 };
	int st;

	if (r->method != HTTP_PUT || split_path(r->path, buf, sizeof(buf), part, 5) != 4 ||
	    strcmp(part[0], "templates") || strcmp(part[2], "files"))
		return false;
	query_each(r->query, build_param, &q);
	if (!build_upload_ok(part[1], q.upload) && !key_ok(r)) {
		c->close = !r->done;
		hio_error(c, 401, "not a valid upload link: GET /templates/%s/files/%s gives one", part[1], part[3]);
		return true;
	}
	st = build_upload(c, r, part[3], msg, sizeof(msg));
	st ? hio_error(c, (unsigned)st, "%s", msg) : hio_reply(c, 200, NULL, NULL, 0, NULL);
	return true;
}

/* /v3/templates and /templates/...: builds, their files and status, aliases,
 * tags, a snapshot template's deletion. */
static void templates_route(struct hconn *c, struct hreq *r, const char *p)
{
	char buf[512], *part[6], msg[600];
	struct buildq q = { .offset = 0 };
	json_t *req, *out = NULL;
	int n = split_path(p, buf, sizeof(buf), part, 6), st = 404;
	int m = r->method;

	snprintf(msg, sizeof(msg), "no %s %s here", http_method_str((enum http_method)m), r->path);
	if (!strcmp(p, "/v3/templates") && m == HTTP_POST) {
		if (!(req = body_json(c, r, true)))
			return;
		st = build_request(req, &out, msg, sizeof(msg));
		json_decref(req);
		st ? hio_error(c, (unsigned)st, "%s", msg) : hio_reply_json(c, 202, out, NULL);
		return;
	}
	if (n == 2 && !strcmp(part[1], "tags") && (m == HTTP_POST || m == HTTP_DELETE)) {
		if (!(req = body_json(c, r, true)))
			return;
		if (m == HTTP_POST)
			st = template_tags_assign(req, &out, msg, sizeof(msg));
		else
			st = template_tags_remove(req, msg, sizeof(msg));
		json_decref(req);
		if (st)
			hio_error(c, (unsigned)st, "%s", msg);
		else if (m == HTTP_POST)
			hio_reply_json(c, 201, out, NULL);
		else
			hio_reply(c, 204, NULL, NULL, 0, NULL);
		return;
	}
	if (n == 3 && m == HTTP_GET && !strcmp(part[2], "tags")) {
		st = template_tags_list(part[1], &out, msg, sizeof(msg));
		c->close = !r->done;
		st ? hio_error(c, (unsigned)st, "%s", msg) : hio_reply_json(c, 200, out, NULL);
		return;
	}
	if (n == 2 && m == HTTP_DELETE) {
		st = sbx_snapshot_delete(part[1], msg, sizeof(msg));
		c->close = !r->done;
		st ? hio_error(c, (unsigned)st, "%s", msg) : hio_reply(c, 204, NULL, NULL, 0, NULL);
		return;
	}
	if (n == 3 && m == HTTP_GET && !strcmp(part[1], "aliases")) {
		char path[400], name[64];

		template_resolve(part[2], name, sizeof(name));
		snprintf(path, sizeof(path), "%s/templates/%s/snap", srv.state_dir, name);
		c->close = !r->done;
		if (template_name_ok(name) && !access(path, F_OK))
			hio_reply_json(c, 200, json_pack("{s:s,s:b}", "templateID", name, "public", 0), NULL);
		else
			hio_error(c, 404, "template '%s' not found", part[2]);
		return;
	}
	if (n == 4 && m == HTTP_GET && !strcmp(part[2], "files")) {
		st = build_file_link(part[1], part[3], hreq_header(r, "Host"), &out, msg, sizeof(msg));
		c->close = !r->done;
		st ? hio_error(c, (unsigned)st, "%s", msg) : hio_reply_json(c, 201, out, NULL);
		return;
	}
	if (n == 4 && m == HTTP_POST && !strcmp(part[2], "builds")) {
		if (!(req = body_json(c, r, true)))
			return;
		st = build_start(part[1], part[3], req, msg, sizeof(msg));
		json_decref(req);
		st ? hio_error(c, (unsigned)st, "%s", msg) : hio_reply(c, 202, NULL, NULL, 0, NULL);
		return;
	}
	if (n == 5 && m == HTTP_GET && !strcmp(part[2], "builds") && !strcmp(part[4], "status")) {
		query_each(r->query, build_param, &q);
		c->close = !r->done;
		if (q.bad)
			st = 400, snprintf(msg, sizeof(msg), "bad query: logsOffset is a count of entries");
		else
			st = build_status(part[1], part[3], q.offset, &out, msg, sizeof(msg));
		st ? hio_error(c, (unsigned)st, "%s", msg) : hio_reply_json(c, 200, out, NULL);
		return;
	}
	c->close = !r->done;
	hio_error(c, (unsigned)st, "%s", msg);
}

/* ---- routing ---- */

/* @v as a guest TCP port (the agent's is one too): 1-65535, else 0. */
static unsigned tcp_port(unsigned long v)
{
	return v && v <= 65535 ? (unsigned)v : 0;
}

/* The sandbox and port a request is for: from the headers, or from a Host
 * PORT-ID.DOMAIN. False when it is for the server itself. */
static bool target(const struct hreq *r, char *id, size_t idlen, unsigned *port)
{
	const char *h = hreq_header(r, "E2b-Sandbox-Id"), *p = hreq_header(r, "E2b-Sandbox-Port");
	char *end;

	*port = AGENT_PORT;
	if (h) {
		snprintf(id, idlen, "%s", h);
		if (p) {
			unsigned long v = strtoul(p, &end, 10);

			*port = *end ? 0 : tcp_port(v);
		}
		return true;
	}
	h = hreq_header(r, "Host");
	if (!h || !srv.domain || !isdigit((unsigned char)h[0]))
		return false;
	unsigned long v = strtoul(h, &end, 10);
	size_t dl = strlen(srv.domain), n;
	const char *dot;

	if (*end != '-' || !(dot = strchr(end + 1, '.')))
		return false;
	n = (size_t)(dot - end - 1);
	if (strncasecmp(dot + 1, srv.domain, dl) || (dot[1 + dl] && dot[1 + dl] != ':') || n >= idlen)
		return false;
	memcpy(id, end + 1, n);
	id[n] = '\0';
	*port = tcp_port(v);
	return true;
}

/* ---- signed file URLs (the SDK's uploadUrl and downloadUrl) ---- */

/* What a GET or POST /files?path=&username=&signature=&signature_expiration=
 * says (decoded). */
struct signed_q {
	char path[2048], user[256], sig[128], exp[32];
	bool has_sig, has_exp;
	const char *op; /* "read" (GET, HEAD) or "write" */
};

static void signed_fn(void *arg, const char *k, const char *v)
{
	struct signed_q *q = arg;

	if (!strcmp(k, "path"))
		snprintf(q->path, sizeof(q->path), "%s", v);
	else if (!strcmp(k, "username"))
		snprintf(q->user, sizeof(q->user), "%s", v);
	else if (!strcmp(k, "signature"))
		q->has_sig = true, snprintf(q->sig, sizeof(q->sig), "%s", v);
	else if (!strcmp(k, "signature_expiration"))
		q->has_exp = true, snprintf(q->exp, sizeof(q->exp), "%s", v);
}

/* @r is a request of the agent's /files carrying a signature instead of an
 * access token: true, with @q filled. */
static bool signed_files(const struct hreq *r, struct signed_q *q)
{
	memset(q, 0, sizeof(*q));
	if (strcmp(r->path, "/files") || hreq_header(r, "X-Access-Token"))
		return false;
	query_each(r->query, signed_fn, q);
	q->op = r->method == HTTP_GET || r->method == HTTP_HEAD ? "read" : "write";
	return q->has_sig;
}

/* envd's signature of a file URL for access token @token: "v1_", then the
 * SHA-256 of PATH:OP:USER:TOKEN[:EXPIRATION] in base64 without its '='. */
static void file_signature(const struct signed_q *q, const char *token, char *out, size_t len)
{
	const char *part[] = { q->path, q->op, q->user, token, q->has_exp ? q->exp : NULL };
	char b64[BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE) + 1];
	uint8_t d[SHA256_DIGEST_SIZE];
	struct sha256_ctx h;

	sha256_init(&h);
	for (unsigned i = 0; i < sizeof(part) / sizeof(*part) && part[i]; i++) {
		if (i)
			sha256_update(&h, 1, (const uint8_t *)":");
		sha256_update(&h, strlen(part[i]), (const uint8_t *)part[i]);
	}
	sha256_digest(&h, sizeof(d), d);
	base64_encode_raw(b64, sizeof(d), d);
	b64[sizeof(b64) - 1] = '\0';
	b64[strcspn(b64, "=")] = '\0';
	snprintf(out, len, "v1_%s", b64);
}

/* 0 when @q's signature is @token's and has not expired, else 401 with @msg
 * (envd's words). */
static int signature_check(const struct signed_q *q, const char *token, char *msg, size_t len)
{
	char want[64], *end;

	if (q->has_exp) {
		long long e = strtoll(q->exp, &end, 10);

		if (!*q->exp || *end || e < 0)
			return snprintf(msg, len, "signature_expiration '%s' is not a time", q->exp), 401;
		if (e < (long long)time(NULL))
			return snprintf(msg, len, "signature is already expired"), 401;
	}
	file_signature(q, token, want, sizeof(want));
	if (!same(q->sig, want))
		return snprintf(msg, len, "invalid signature"), 401;
	return 0;
}

static bool signed_by(const struct sandbox *s, void *arg)
{
	char want[64];

	file_signature(arg, s->token, want, sizeof(want));
	return same(((const struct signed_q *)arg)->sig, want);
}

/* Whether request @r may resume paused sandbox @s (E2B's autoResume): one
 * its guest would take, by the credentials serve can check for it (the
 * agent's access token or a signed link; a port's traffic token when its
 * traffic is not public), so that no stranger's request wakes it. */
static bool may_wake(struct hreq *r, const struct sandbox *s, unsigned port, struct signed_q *q)
{
	const char *t;
	char msg[200];

	if (port != AGENT_PORT)
		return s->public_traffic ||
		       ((t = hreq_header(r, "E2b-Traffic-Access-Token")) && same(t, s->traffic_token));
	if ((t = hreq_header(r, "X-Access-Token")) && same(t, s->token))
		return true;
	return signed_files(r, q) && !signature_check(q, s->token, msg, sizeof(msg));
}

/* Request @r to sandbox @id's @port; @q: room for a signed URL's query (the
 * caller's: it is 2.5 KiB). */
static void data_plane(struct hconn *c, struct hreq *r, const char *id, unsigned port,
		       struct signed_q *q)
{
	struct sandbox *s = sbx_get(id);
	const char *t, *host = NULL;
	char masked[256];

	c->close = c->close || !r->done; /* an error answer leaves a body unread */
	if (!s) {
		hio_error(c, 502, "sandbox %s not found", id);
		return;
	}
	if (s->mask_host[0]) { /* set before its ID was given out, then kept */
		mask_host_expand(s->mask_host, port, masked, sizeof(masked));
		host = masked;
	}
	/* a fork's or snapshot's checkpoint pauses it briefly: its requests
	 * wait for it (at most a minute) instead of failing */
	sbx_checkpoint_wait(s, 60000);
	if (port && s->auto_resume && s->state != SBX_RUNNING && may_wake(r, s, port, q)) {
		char msg[400];
		int st = sbx_resume(s, s->timeout, msg, sizeof(msg));

		if (st && st != 201) {
			hio_error(c, st == 404 ? 502 : (unsigned)st, "sandbox %s: resuming it for this request: %s",
				  id, msg);
			sbx_put(s);
			return;
		}
		serve_log("sandbox %s: resumed by a request to its port %u", id, port);
	}
	if (!port) {
		hio_error(c, 400, "E2b-Sandbox-Port is not a port");
	} else if (s->state != SBX_RUNNING) {
		hio_error(c, 502, "sandbox %s is %s", id, sbx_state_name(s->state));
	} else if (port != AGENT_PORT && !s->public_traffic &&
		   (!(t = hreq_header(r, "E2b-Traffic-Access-Token")) || !same(t, s->traffic_token))) {
		hio_error(c, 403, "sandbox %s: port %u wants its traffic access token", id, port);
	} else if (port == AGENT_PORT && signed_files(r, q)) {
		/* a signed URL, handed to a client without the token: the
		 * agent gets the token once the signature is good */
		char msg[200], hdr[120];
		int st = signature_check(q, s->token, msg, sizeof(msg));

		if (st) {
			hio_error(c, (unsigned)st, "%s", msg);
		} else {
			c->close = false;
			snprintf(hdr, sizeof(hdr), "X-Access-Token: %s\r\n", s->token);
			proxy_request(c, r, s, port, hdr, host);
		}
	} else {
		c->close = false;
		proxy_request(c, r, s, port, NULL, host);
	}
	sbx_put(s);
}

/* GET or POST /files?...&signature=... with no sandbox named: an SDK given
 * a sandboxUrl makes its signed URLs so (every sandbox shares that URL);
 * the sandbox is the one whose token signed it. */
static void signed_route(struct hconn *c, struct hreq *r, struct signed_q *q)
{
	struct sandbox *s = sbx_find(signed_by, q);
	char id[ID_LEN + 1];

	if (!s) {
		c->close = !r->done;
		hio_error(c, 401, "invalid signature: no running sandbox (nor a paused one with autoResume) signed it");
		return;
	}
	snprintf(id, sizeof(id), "%s", s->id);
	sbx_put(s);
	data_plane(c, r, id, AGENT_PORT, q);
}

void status_page(struct hconn *c);

void api_handle(struct hconn *c, struct hreq *r)
{
	char id[64], path[512];
	struct signed_q q;
	unsigned port;
	const char *p;
	bool v2 = false;

	if (target(r, id, sizeof(id), &port)) {
		data_plane(c, r, id, port, &q);
		return;
	}
	if (upload_route(c, r))
		return;
	if (signed_files(r, &q)) {
		signed_route(c, r, &q);
		return;
	}
	if (!key_ok(r) && !(r->method == HTTP_GET && !strcmp(r->path, "/health"))) {
		c->close = !r->done;
		hio_error(c, 401, "Invalid API key: send it in X-API-Key (or Authorization: Bearer)");
		return;
	}
	snprintf(path, sizeof(path), "%s", r->path);
	p = path;
	if (!strncmp(p, "/v2/", 4) || !strncmp(p, "/v1/", 4)) {
		v2 = p[2] == '2';
		p += 3;
	}
	if (!strcmp(p, "/") && r->method == HTTP_GET) {
		status_page(c);
	} else if (!strcmp(p, "/health") && r->method == HTTP_GET) {
		hio_reply(c, 204, NULL, NULL, 0, NULL);
	} else if (!strcmp(p, "/sandboxes")) {
		if (r->method == HTTP_POST)
			create(c, r);
		else if (r->method == HTTP_GET)
			list(c, r, v2);
		else
			c->close = !r->done, hio_error(c, 405, "GET or POST %s", r->path);
	} else if (!strcmp(p, "/sandboxes/metrics")) {
		if (r->method == HTTP_GET)
			metrics_of(c, r);
		else
			c->close = !r->done, hio_error(c, 405, "GET %s", r->path);
	} else if (!strcmp(p, "/snapshots")) {
		if (r->method == HTTP_GET)
			snapshot_list(c, r);
		else
			c->close = !r->done, hio_error(c, 405, "GET %s", r->path);
	} else if (!strcmp(path, "/v3/templates") || !strncmp(p, "/templates/", 11)) {
		templates_route(c, r, p);
	} else if (!strcmp(p, "/volumes") || !strncmp(p, "/volumes/", 9)) {
		c->close = !r->done;
		hio_error(c, 501, "volumes are not built in cubicle serve (they need a file system shared by running sandboxes)");
	} else if (!strcmp(p, "/secrets") || !strncmp(p, "/secrets/", 9)) {
		c->close = !r->done;
		hio_error(c, 501, "secrets are not built in cubicle serve (E2B resolves them in its egress proxy's network.rules transforms, which serve has not)");
	} else if (!strncmp(p, "/sandboxes/", 11) && p[11]) {
		char *sid = (char *)p + 11, *verb = strchr(sid, '/');

		if (verb)
			*verb++ = '\0';
		if (verb && strchr(verb, '/'))
			c->close = !r->done, hio_error(c, 404, "no %s here", r->path);
		else
			one(c, r, sid, verb, v2);
	} else {
		c->close = !r->done;
		hio_error(c, 404, "no %s %s here", http_method_str((enum http_method)r->method), r->path);
	}
}
