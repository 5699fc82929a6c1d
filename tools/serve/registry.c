/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Images pulled from a container registry: the OCI distribution API that
 * Docker Hub, ghcr.io, quay.io, a `registry:2` and the clouds' registries
 * speak, with libcurl (registry.h).
 *
 *   GET /v2/PATH/manifests/REF   an image index (or docker manifest list),
 *                                followed to linux/this architecture, or
 *                                an image manifest
 *   GET /v2/PATH/blobs/DIGEST    the config and each layer (a registry may
 *                                redirect to its storage: followed, without
 *                                the credentials, which curl sends to the
 *                                registry's own host alone)
 *
 * A 401 names how to authenticate (WWW-Authenticate): Bearer (a token from
 * its realm for "repository:PATH:pull", anonymous or with the credentials)
 * or Basic (the credentials). Every blob is written to WORK/blobs/ALG/HEX
 * through its digest, and refused when its bytes do not match it or run
 * past the size its descriptor gives; a manifest is read whole (at most
 * 4 MiB) and checked the same way. What a registry sends is not trusted
 * further than that: descriptors' digests are checked as ALG:HEX before
 * they name a file, and the layer count is bounded.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cubicle-build.h"
#include "registry.h"

#define MANIFEST_MAX (4u << 20)
#define LAYERS_MAX 256
#define BLOB_MAX (64ull << 30)

static const char accept_all[] =
	"Accept: application/vnd.oci.image.index.v1+json, "
	"application/vnd.docker.distribution.manifest.list.v2+json, "
	"application/vnd.oci.image.manifest.v1+json, "
	"application/vnd.docker.distribution.manifest.v2+json";

static int fail(char *msg, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- references ---- */

static bool tag_ok(const char *t)
{
	size_t n = strlen(t);

	return n && n <= 128 && (isalnum((unsigned char)t[0]) || t[0] == '_') &&
	       strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/* ALG:HEX with ALG sha256 (64 hex digits) or sha512 (128). */
static bool digest_ok(const char *d)
{
	size_t want = !strncmp(d, "sha256:", 7) ? 64 : !strncmp(d, "sha512:", 7) ? 128 : 0;

	return want && strlen(d + 7) == want && strspn(d + 7, "0123456789abcdef") == want;
}

/* Components of lower-case letters, digits and '.', '_', '-' (each
 * beginning and ending with a letter or digit) joined by '/'. */
static bool path_ok(const char *p)
{
	size_t n = strlen(p);

	if (!n || n >= 255 || strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789._-/") != n)
		return false;
	for (const char *c = p; *c;) {
		size_t k = strcspn(c, "/");

		if (!k || !isalnum((unsigned char)c[0]) || !isalnum((unsigned char)c[k - 1]))
			return false;
		c += k;
		if (*c == '/' && !*++c)
			return false;
	}
	return true;
}

int registry_parse(const char *ref, struct reg_ref *r, char *msg, size_t len)
{
	char name[512], *rest, *slash, *colon;
	const char *at = strchr(ref, '@');
	size_t n = at ? (size_t)(at - ref) : strlen(ref);

	memset(r, 0, sizeof(*r));
	if (!n || n >= sizeof(name))
		return fail(msg, len, "image '%s': empty or too long", ref);
	memcpy(name, ref, n);
	name[n] = 0;
	if (at) {
		if (!digest_ok(at + 1))
			return fail(msg, len, "image '%s': the digest after '@' is not sha256:HEX (64) or sha512:HEX (128)",
				    ref);
		snprintf(r->ref, sizeof(r->ref), "%s", at + 1);
	}
	slash = strchr(name, '/');
	rest = name;
	if (slash && (memchr(name, '.', (size_t)(slash - name)) || memchr(name, ':', (size_t)(slash - name)) ||
		      (slash - name == 9 && !strncmp(name, "localhost", 9)))) {
		*slash = 0;
		snprintf(r->host, sizeof(r->host), "%s", name);
		rest = slash + 1;
	} else {
		snprintf(r->host, sizeof(r->host), "docker.io");
	}
	colon = strrchr(rest, ':');
	if (colon) {
		*colon = 0;
		if (!tag_ok(colon + 1))
			return fail(msg, len, "image '%s': tag '%s' is not 1-128 letters, digits, '_', '.' and '-'", ref,
				    colon + 1);
		if (!at) /* name:tag@digest: the digest decides, as docker's */
			snprintf(r->ref, sizeof(r->ref), "%s", colon + 1);
	}
	if (!r->ref[0])
		snprintf(r->ref, sizeof(r->ref), "latest");
	if (!strcmp(r->host, "docker.io") || !strcmp(r->host, "index.docker.io") ||
	    !strcmp(r->host, "registry-1.docker.io")) {
		snprintf(r->host, sizeof(r->host), "registry-1.docker.io");
		if (!strchr(rest, '/')) { /* official images */
			if (strlen(rest) + 8 >= sizeof(r->path))
				return fail(msg, len, "image '%s': name too long", ref);
			snprintf(r->path, sizeof(r->path), "library/%s", rest);
		}
	}
	if (!r->path[0])
		snprintf(r->path, sizeof(r->path), "%s", rest);
	if (!path_ok(r->path))
		return fail(msg, len, "image '%s': repository '%s' is not lower-case letters and digits joined by "
				      "'.', '_', '-' and '/'", ref, r->path);
	if (strspn(r->host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != strlen(r->host))
		return fail(msg, len, "image '%s': registry host '%s' is not a host name[:port]", ref, r->host);
	r->http = !strcmp(r->host, "localhost") || !strncmp(r->host, "localhost:", 10) ||
		  !strncmp(r->host, "127.", 4) || !strcmp(r->host, "[::1]") || !strncmp(r->host, "[::1]:", 6);
	return 0;
}

/* ---- HTTP ---- */

struct puller {
	CURL *c;
	struct reg_ref r;
	const char *user, *password;
	char *bearer;       /* "Authorization: Bearer ..." once a token is had */
	bool basic;         /* the registry asked for Basic: the credentials go along */
	char www[2048];     /* the last answer's WWW-Authenticate */
	char ctype[160];    /* and its Content-Type */
	char cerr[CURL_ERROR_SIZE];
};

/* Where an answer's body goes: a buffer (at most MAX) or FD; hashed as it
 * comes; more than LIMIT bytes (when not 0) end the transfer. */
struct sink {
	char *buf;
	size_t len, max;
	int fd;
	uint64_t got, limit;
	bool over, werr;
	int alg; /* 256, 512, or 0 */
	struct sha256_ctx s256;
	struct sha512_ctx s512;
};

static size_t on_body(char *p, size_t sz, size_t nm, void *arg)
{
	struct sink *k = arg;
	size_t n = sz * nm;

	if ((k->limit && k->got + n > k->limit) || (k->fd < 0 && k->len + n > k->max)) {
		k->over = true;
		return 0;
	}
	if (k->fd >= 0) {
		for (size_t off = 0; off < n;) {
			ssize_t w = write(k->fd, p + off, n - off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				k->werr = true;
				return 0;
			}
			off += (size_t)w;
		}
	} else {
		char *b = realloc(k->buf, k->len + n + 1);

		if (!b)
			return 0;
		k->buf = b;
		memcpy(b + k->len, p, n);
		k->len += n;
		b[k->len] = 0;
	}
	if (k->alg == 256)
		sha256_update(&k->s256, n, (const uint8_t *)p);
	else if (k->alg == 512)
		sha512_update(&k->s512, n, (const uint8_t *)p);
	k->got += n;
	return n;
}

/* The two headers kept: each answer (a redirect's too) starts them anew. */
static size_t on_header(char *p, size_t sz, size_t nm, void *arg)
{
	struct puller *pl = arg;
	size_t n = sz * nm, k;

	if (n >= 5 && !strncmp(p, "HTTP/", 5)) {
		pl->www[0] = pl->ctype[0] = 0;
		return n;
	}
	for (k = n; k && (p[k - 1] == '\r' || p[k - 1] == '\n'); k--)
		;
	if (k > 17 && !strncasecmp(p, "WWW-Authenticate:", 17)) {
		size_t sp = 17 + strspn(p + 17, " \t");

		snprintf(pl->www, sizeof(pl->www), "%.*s", (int)(k > sp ? k - sp : 0), p + sp);
	} else if (k > 13 && !strncasecmp(p, "Content-Type:", 13)) {
		size_t sp = 13 + strspn(p + 13, " \t");

		snprintf(pl->ctype, sizeof(pl->ctype), "%.*s", (int)(k > sp ? k - sp : 0), p + sp);
	}
	return n;
}

/* GET URL into K with the puller's credentials; the status, or -1 (MSG). */
static long get(struct puller *pl, const char *url, const char *accept, struct sink *k, bool creds, char *msg,
		size_t len)
{
	struct curl_slist *h = NULL;
	long status = 0;
	CURLcode rc;

	curl_easy_reset(pl->c);
	if (accept)
		h = curl_slist_append(h, accept);
	if (pl->bearer && !creds)
		h = curl_slist_append(h, pl->bearer);
	curl_easy_setopt(pl->c, CURLOPT_URL, url);
	curl_easy_setopt(pl->c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(pl->c, CURLOPT_USERAGENT, "cubicle/" PACKAGE_VERSION);
	curl_easy_setopt(pl->c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(pl->c, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(pl->c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(pl->c, CURLOPT_REDIR_PROTOCOLS_STR, pl->r.http ? "http,https" : "https");
	curl_easy_setopt(pl->c, CURLOPT_CONNECTTIMEOUT, 30L);
	/* a registry that stops sending for a minute is given up on */
	curl_easy_setopt(pl->c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(pl->c, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(pl->c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(pl->c, CURLOPT_WRITEDATA, k);
	curl_easy_setopt(pl->c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(pl->c, CURLOPT_HEADERDATA, pl);
	curl_easy_setopt(pl->c, CURLOPT_ERRORBUFFER, pl->cerr);
	if ((creds || pl->basic) && pl->user) {
		curl_easy_setopt(pl->c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(pl->c, CURLOPT_USERNAME, pl->user);
		curl_easy_setopt(pl->c, CURLOPT_PASSWORD, pl->password);
	}
	pl->cerr[0] = 0;
	rc = curl_easy_perform(pl->c);
	curl_slist_free_all(h);
	curl_easy_getinfo(pl->c, CURLINFO_RESPONSE_CODE, &status);
	if (k->over)
		return fail(msg, len, "%s: the answer is larger than %s", url,
			    k->limit ? "its descriptor's size" : "a manifest may be (4 MiB)");
	if (k->werr)
		return fail(msg, len, "%s: writing it: %s", url, strerror(errno));
	if (rc != CURLE_OK)
		return fail(msg, len, "%s: %s", url, pl->cerr[0] ? pl->cerr : curl_easy_strerror(rc));
	return status;
}

/* VALUE of KEY="VALUE" in a WWW-Authenticate's parameters, or "". */
static void auth_param(const char *www, const char *key, char *out, size_t len)
{
	size_t kl = strlen(key);
	const char *p = www;

	out[0] = 0;
	while ((p = strcasestr(p, key))) {
		bool start = p == www || p[-1] == ' ' || p[-1] == ',';

		p += kl;
		if (!start || p[0] != '=' || p[1] != '"')
			continue;
		p += 2;
		size_t n = strcspn(p, "\"");

		snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), p);
		return;
	}
}

static char *escaped(CURL *c, const char *s)
{
	char *e = curl_easy_escape(c, s, 0), *d = e ? strdup(e) : NULL;

	curl_free(e);
	return d;
}

/* After a 401: a Bearer token from the realm the registry named, or Basic
 * with the credentials. 0, or -1 (MSG). */
static int authenticate(struct puller *pl, const char *what, char *msg, size_t len)
{
	char realm[1024], service[256], scope[512], url[2200];
	char *es, *esc_scope;
	struct sink k = { .fd = -1, .max = 1u << 20 };
	json_t *j, *t;
	long st;

	if (!strncasecmp(pl->www, "Basic", 5)) {
		if (!pl->user)
			return fail(msg, len, "%s: the registry %s wants a user name and password (Basic); give them "
					      "in CUBICLE_REGISTRY_USER and CUBICLE_REGISTRY_PASSWORD", what, pl->r.host);
		if (pl->basic)
			return fail(msg, len, "%s: the registry %s refused the user name and password", what, pl->r.host);
		pl->basic = true;
		return 0;
	}
	if (strncasecmp(pl->www, "Bearer", 6))
		return fail(msg, len, "%s: 401, and the registry %s names no way to authenticate that cubicle knows "
				      "(WWW-Authenticate: %s)", what, pl->r.host, pl->www[0] ? pl->www : "none");
	/* a token had before may have expired (Docker Hub's last 5 minutes,
	 * less than a long pull): a new one, once per request (v2_get's tries) */
	free(pl->bearer);
	pl->bearer = NULL;
	auth_param(pl->www, "realm", realm, sizeof(realm));
	auth_param(pl->www, "service", service, sizeof(service));
	auth_param(pl->www, "scope", scope, sizeof(scope));
	if (strncmp(realm, "https://", 8) && !(pl->r.http && !strncmp(realm, "http://", 7)))
		return fail(msg, len, "%s: the registry's token realm '%s' is not an https URL", what, realm);
	if (!scope[0])
		snprintf(scope, sizeof(scope), "repository:%s:pull", pl->r.path);
	es = escaped(pl->c, service);
	esc_scope = escaped(pl->c, scope);
	if (!es || !esc_scope) {
		free(es);
		free(esc_scope);
		return fail(msg, len, "out of memory");
	}
	snprintf(url, sizeof(url), "%s%cservice=%s&scope=%s", realm, strchr(realm, '?') ? '&' : '?', es, esc_scope);
	free(es);
	free(esc_scope);
	st = get(pl, url, NULL, &k, true, msg, len);
	if (st < 0) {
		free(k.buf);
		return -1;
	}
	if (st != 200) {
		free(k.buf);
		return fail(msg, len, "%s: the token service %s answered %ld%s", what, realm, st,
			    st == 401 ? (pl->user ? " (the credentials were refused)" : " (it wants credentials)") : "");
	}
	j = json_loads(k.buf ? k.buf : "", 0, NULL);
	free(k.buf);
	t = json_object_get(j, "token");
	if (!json_string_length(t))
		t = json_object_get(j, "access_token");
	if (!json_string_length(t) || json_string_length(t) > 16384 ||
	    strcspn(json_string_value(t), "\r\n") != json_string_length(t)) {
		json_decref(j);
		return fail(msg, len, "%s: the token service %s gave no token", what, realm);
	}
	if (asprintf(&pl->bearer, "Authorization: Bearer %s", json_string_value(t)) < 0)
		pl->bearer = NULL;
	json_decref(j);
	return pl->bearer ? 0 : fail(msg, len, "out of memory");
}

/* GET /v2/PATH/KIND/REF, authenticating once when asked: the status, or -1. */
static long v2_get(struct puller *pl, const char *kind, const char *ref, const char *accept, struct sink *k,
		   char *msg, size_t len)
{
	char url[1024];
	long st;

	snprintf(url, sizeof(url), "%s://%s/v2/%s/%s/%s", pl->r.http ? "http" : "https", pl->r.host, pl->r.path, kind,
		 ref);
	for (int tries = 0;; tries++) {
		off_t at = k->fd >= 0 ? lseek(k->fd, 0, SEEK_CUR) : 0;

		st = get(pl, url, accept, k, false, msg, len);
		if (st == 401 && tries == 2)
			return fail(msg, len, "%s: the registry %s refused its own token (%s)", url, pl->r.host,
				    pl->user ? "are the credentials allowed to pull it?"
					     : "a private image? give credentials");
		if (st != 401)
			return st;
		if (authenticate(pl, url, msg, len))
			return -1;
		/* the 401's body is not the blob's */
		free(k->buf);
		k->buf = NULL;
		k->len = 0;
		k->got = 0;
		sha256_init(&k->s256);
		sha512_init(&k->s512);
		if (k->fd >= 0 && (ftruncate(k->fd, at) || lseek(k->fd, at, SEEK_SET) < 0))
			return fail(msg, len, "%s: %s", url, strerror(errno));
	}
}

static void sink_hex(struct sink *k, char *hex)
{
	uint8_t sum[SHA512_DIGEST_SIZE];
	size_t n = k->alg == 512 ? SHA512_DIGEST_SIZE : SHA256_DIGEST_SIZE;

	if (k->alg == 512)
		sha512_digest(&k->s512, SHA512_DIGEST_SIZE, sum);
	else
		sha256_digest(&k->s256, SHA256_DIGEST_SIZE, sum);
	for (size_t i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", sum[i]);
}

static void sink_start(struct sink *k, const char *digest)
{
	k->alg = digest && !strncmp(digest, "sha512:", 7) ? 512 : 256;
	sha256_init(&k->s256);
	sha512_init(&k->s512);
}

/* ---- the layout ---- */

static int write_file(const char *work, const char *rel, const char *data, size_t n, char *msg, size_t len)
{
	char p[4096];
	int fd;
	bool ok;

	snprintf(p, sizeof(p), "%s/%s", work, rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(msg, len, "%s: %s", p, strerror(errno));
	ok = write(fd, data, n) == (ssize_t)n;
	if (close(fd) || !ok)
		return fail(msg, len, "%s: %s", p, strerror(errno ? errno : EIO));
	return 0;
}

static int mkdirs(const char *work, const char *alg, char *msg, size_t len)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/blobs", work);
	if (mkdir(p, 0755) && errno != EEXIST)
		return fail(msg, len, "%s: %s", p, strerror(errno));
	snprintf(p, sizeof(p), "%s/blobs/%s", work, alg);
	if (mkdir(p, 0755) && errno != EEXIST)
		return fail(msg, len, "%s: %s", p, strerror(errno));
	return 0;
}

static const char *host_arch(void)
{
	struct utsname u;

	return !uname(&u) && !strcmp(u.machine, "aarch64") ? "arm64" : "amd64";
}

/* A manifest by REF (a tag or digest): its bytes in *BODY, its digest in
 * DIGEST (checked against REF when that is one). The parsed JSON, or NULL. */
static json_t *manifest(struct puller *pl, const char *ref, char **body, size_t *blen, char *digest,
			char *msg, size_t len)
{
	struct sink k = { .fd = -1, .max = MANIFEST_MAX };
	char hex[2 * SHA512_DIGEST_SIZE + 1];
	json_error_t je;
	json_t *j;
	long st;

	sink_start(&k, digest_ok(ref) ? ref : NULL);
	st = v2_get(pl, "manifests", ref, accept_all, &k, msg, len);
	if (st < 0 || st != 200) {
		if (st == 404)
			fail(msg, len, "%s/%s: no manifest '%s' (404): is the name or tag right?", pl->r.host, pl->r.path,
			     ref);
		else if (st >= 0)
			fail(msg, len, "%s/%s: manifest '%s': the registry answered %ld", pl->r.host, pl->r.path, ref, st);
		free(k.buf);
		return NULL;
	}
	sink_hex(&k, hex);
	snprintf(digest, 8 + sizeof(hex), "sha%d:%s", k.alg, hex);
	if (digest_ok(ref) && strcmp(ref, digest)) {
		free(k.buf);
		fail(msg, len, "%s/%s: the manifest sent for %s has digest %s: refused", pl->r.host, pl->r.path, ref,
		     digest);
		return NULL;
	}
	j = json_loadb(k.buf ? k.buf : "", k.len, 0, &je);
	if (!json_is_object(j)) {
		free(k.buf);
		json_decref(j);
		fail(msg, len, "%s/%s: manifest '%s' is not a JSON object (%s)", pl->r.host, pl->r.path, ref, je.text);
		return NULL;
	}
	*body = k.buf;
	*blen = k.len;
	return j;
}

/* A descriptor's digest and size, checked. */
static int descriptor(json_t *d, const char *what, const char **digest, uint64_t *size, char *msg, size_t len)
{
	json_t *sz = json_object_get(d, "size");

	*digest = json_string_value(json_object_get(d, "digest"));
	if (!*digest || !digest_ok(*digest))
		return fail(msg, len, "the image's %s has no digest cubicle can check (sha256 or sha512): '%s'", what,
			    *digest ? *digest : "(none)");
	if (!json_is_integer(sz) || json_integer_value(sz) < 0 || (uint64_t)json_integer_value(sz) > BLOB_MAX)
		return fail(msg, len, "the image's %s has no size (or one over 64 GiB)", what);
	*size = (uint64_t)json_integer_value(sz);
	return 0;
}

/* Blob DIGEST (SIZE bytes) into WORK/blobs/ALG/HEX, checked. */
static int blob(struct puller *pl, const char *work, const char *digest, uint64_t size, char *msg, size_t len)
{
	char path[4096], tmp[4200], alg[8], hex[2 * SHA512_DIGEST_SIZE + 1];
	struct sink k = { .fd = -1, .limit = size };
	long st;

	snprintf(alg, sizeof(alg), "%.6s", digest);
	if (mkdirs(work, alg, msg, len))
		return -1;
	snprintf(path, sizeof(path), "%s/blobs/%s/%s", work, alg, digest + 7);
	snprintf(tmp, sizeof(tmp), "%s.part", path);
	k.fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (k.fd < 0)
		return fail(msg, len, "%s: %s", tmp, strerror(errno));
	sink_start(&k, digest);
	k.limit = size ? size : 1; /* an empty blob: a byte is already too many */
	st = v2_get(pl, "blobs", digest, NULL, &k, msg, len);
	if (close(k.fd) && st == 200)
		st = fail(msg, len, "%s: %s", tmp, strerror(errno));
	if (st == 200) {
		sink_hex(&k, hex);
		if (k.got != size)
			st = fail(msg, len, "blob %s: %llu bytes came, its descriptor says %llu", digest,
				  (unsigned long long)k.got, (unsigned long long)size);
		else if (strcmp(hex, digest + 7))
			st = fail(msg, len, "blob %s: its bytes have digest %s:%s: refused (damaged or altered)", digest,
				  alg, hex);
		else if (rename(tmp, path))
			st = fail(msg, len, "%s: %s", path, strerror(errno));
		else
			return 0;
	} else if (st >= 0) {
		fail(msg, len, "blob %s: the registry answered %ld", digest, st);
	}
	unlink(tmp);
	return -1;
}

/* The image manifest for linux and this architecture in index IDX. */
static json_t *pick(json_t *idx, char *msg, size_t len)
{
	json_t *ms = json_object_get(idx, "manifests"), *m;
	char seen[512] = "";
	size_t i, o = 0;

	json_array_foreach(ms, i, m) {
		json_t *pf = json_object_get(m, "platform");
		const char *os = json_string_value(json_object_get(pf, "os"));
		const char *arch = json_string_value(json_object_get(pf, "architecture"));

		if (os && arch && !strcmp(os, "linux") && !strcmp(arch, host_arch()))
			return m;
		if (o < sizeof(seen))
			o += (size_t)snprintf(seen + o, sizeof(seen) - o, "%s%s/%s", o ? ", " : "", os ? os : "?",
					      arch ? arch : "?");
	}
	fail(msg, len, "the image has no linux/%s manifest (it has: %s)", host_arch(), seen[0] ? seen : "none");
	return NULL;
}

int registry_pull(const char *ref, const char *user, const char *password, const char *work, char *digest,
		  char *msg, size_t len)
{
	struct puller pl = { .user = user && *user ? user : NULL, .password = password ? password : "" };
	char *body = NULL, mdig[8 + 2 * SHA512_DIGEST_SIZE + 1], rel[300];
	json_t *m = NULL, *layers, *l, *idx;
	const char *d, *mt;
	uint64_t sz, total = 0;
	size_t blen = 0, i;
	int ret = -1;

	if (registry_parse(ref, &pl.r, msg, len))
		return -1;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) || !(pl.c = curl_easy_init()))
		return fail(msg, len, "libcurl could not start");
	fprintf(stderr, "cubicle template: pulling %s/%s:%s\n", pl.r.host, pl.r.path, pl.r.ref);
	m = manifest(&pl, pl.r.ref, &body, &blen, mdig, msg, len);
	for (int depth = 0; m && json_is_array(json_object_get(m, "manifests")); depth++) {
		char *b2 = NULL;

		free(body);
		body = NULL;
		if (depth == 2 || !(idx = pick(m, msg, len)) || descriptor(idx, "manifest", &d, &sz, msg, len)) {
			if (depth == 2)
				fail(msg, len, "%s: image indexes nested too deep", ref);
			json_decref(m);
			m = NULL;
			break;
		}
		char want[8 + 2 * SHA512_DIGEST_SIZE + 1];

		snprintf(want, sizeof(want), "%s", d);
		json_decref(m);
		m = manifest(&pl, want, &b2, &blen, mdig, msg, len);
		body = b2;
	}
	if (!m)
		goto out;
	layers = json_object_get(m, "layers");
	mt = json_string_value(json_object_get(m, "mediaType"));
	if (!mt) /* OCI's may leave it out: the answer's Content-Type says it */
		mt = !strncmp(pl.ctype, "application/vnd.", 16) ? pl.ctype : "application/vnd.oci.image.manifest.v1+json";
	if (!json_is_array(layers) || !json_array_size(layers) || json_array_size(layers) > LAYERS_MAX) {
		fail(msg, len, "%s: the image manifest has no layer list (or over %d layers)%s", ref, LAYERS_MAX,
		     json_object_get(m, "fsLayers") ? ": a docker schema 1 manifest, which cubicle does not read" : "");
		goto out;
	}
	/* the manifest itself, then index.json naming it */
	snprintf(rel, sizeof(rel), "blobs/%.6s/%s", mdig, mdig + 7);
	if (mkdirs(work, "sha256", msg, len) || mkdirs(work, "sha512", msg, len) ||
	    write_file(work, rel, body, blen, msg, len))
		goto out;
	{
		json_t *ix = json_pack("{s:i,s:[{s:s,s:s,s:I,s:{s:s}}]}", "schemaVersion", 2, "manifests", "mediaType", mt,
				       "digest", mdig, "size", (json_int_t)blen, "annotations",
				       "org.opencontainers.image.ref.name", ref);
		char *s = ix ? json_dumps(ix, JSON_COMPACT) : NULL;
		static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";

		json_decref(ix);
		if (!s || write_file(work, "index.json", s, strlen(s), msg, len) ||
		    write_file(work, "oci-layout", layout, sizeof(layout) - 1, msg, len)) {
			if (!s)
				fail(msg, len, "out of memory");
			free(s);
			goto out;
		}
		free(s);
	}
	if (descriptor(json_object_get(m, "config"), "config", &d, &sz, msg, len) ||
	    blob(&pl, work, d, sz, msg, len))
		goto out;
	json_array_foreach(layers, i, l) {
		char what[32];

		snprintf(what, sizeof(what), "layer %zu", i + 1);
		if (descriptor(l, what, &d, &sz, msg, len))
			goto out;
		fprintf(stderr, "cubicle template: layer %zu of %zu: %s (%.1f MiB)\n", i + 1, json_array_size(layers), d,
			sz / 1048576.0);
		if (blob(&pl, work, d, sz, msg, len))
			goto out;
		total += sz;
	}
	fprintf(stderr, "cubicle template: pulled %s (%s, %.1f MiB in %zu layers)\n", ref, mdig, total / 1048576.0,
		json_array_size(layers));
	snprintf(digest, 8 + 2 * SHA512_DIGEST_SIZE + 1, "%s", mdig);
	ret = 0;
out:
	json_decref(m);
	free(body);
	free(pl.bearer);
	curl_easy_cleanup(pl.c);
	return ret;
}
