/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /files (a file streamed out as the connection takes it) and POST /files
 * (multipart/form-data parts named "file", or a raw application/octet-stream
 * body, streamed to disk as it arrives). Neither holds a file in memory.
 * Errors are envd's REST shape: {"code": <HTTP status>, "message": "..."}.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "fsutil.h"
#include "http.h"
#include "iov.h"
#include "multipart.h"

#define DL_CHUNK (256u << 10) /* a download: few reads and sends (HTTP_OUT_SLACK holds one) */

static void rest_error(struct conn *c, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void rest_error(struct conn *c, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	http_reply_json(c, status, json_pack("{s:i,s:s}", "code", status, "message", msg));
}

static int errno_status(int err)
{
	switch (err < 0 ? -err : err) {
	case ENOENT:
		return 404;
	case EACCES:
	case EPERM:
	case EROFS:
		return 403;
	case ENOSPC:
	case EDQUOT:
		return 507;
	case ENOTDIR:
	case EISDIR:
	case ENAMETOOLONG:
	case EINVAL:
	case ELOOP:
		return 400;
	default:
		return 500;
	}
}

/* The target path and user of a /files request; replies and returns -1 on errors. */
static int target(struct conn *c, const char *query, const char *auth_user, struct user *u,
		char *path, size_t len, bool required)
{
	char uname[128], raw[PATH_MAX];
	int rc;

	rc = http_query(query, "username", uname, sizeof(uname));
	if (rc == -ENOENT || !uname[0])
		snprintf(uname, sizeof(uname), "%s", auth_user ? auth_user : "");
	else if (rc) {
		rest_error(c, 400, "bad username parameter");
		return -1;
	}
	user_resolve(uname, u);
	rc = http_query(query, "path", raw, sizeof(raw));
	if (rc == -ENOENT || (!rc && !raw[0])) {
		if (required) {
			rest_error(c, 400, "the path parameter is required");
			return -1;
		}
		path[0] = 0;
		return 0;
	}
	if (rc || user_path(u, raw, path, len)) {
		rest_error(c, 400, "bad path parameter");
		return -1;
	}
	return 0;
}

/* ---- download ---- */

struct download {
	int fd;
	off_t left, off;
	bool busy; /* http_write may flush and call dl_pump back */
};

static void dl_closed(struct conn *c)
{
	struct download *d = http_ctx(c);

	if (!d)
		return;
	close(d->fd);
	free(d);
}

static void dl_pump(struct conn *c)
{
	struct download *d = http_ctx(c);
	char *buf;

	if (!d || d->busy)
		return;
	buf = malloc(DL_CHUNK);
	if (!buf) {
		http_abort(c);
		return;
	}
	d->busy = true;
	while (d->left > 0 && http_can_write(c)) {
		size_t want = d->left < (off_t)DL_CHUNK ? (size_t)d->left : DL_CHUNK;
		ssize_t n = pread(d->fd, buf, want, d->off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) { /* shrank or failed under us: the length we sent is a lie now */
			free(buf);
			http_abort(c);
			return;
		}
		d->off += n;
		d->left -= n;
		http_write(c, buf, (size_t)n);
		if (http_dead(c)) { /* dl_closed freed d */
			free(buf);
			return;
		}
	}
	free(buf);
	d->busy = false;
	if (d->left == 0) {
		http_set_ops(c, NULL, NULL);
		close(d->fd);
		free(d);
		http_end(c);
	}
}

static const struct conn_ops dl_ops = { .writable = dl_pump, .closed = dl_closed };

void files_get(struct conn *c, const char *query, const char *auth_user)
{
	char path[PATH_MAX];
	struct download *d;
	struct user u;
	struct stat st;
	int fd;

	if (target(c, query, auth_user, &u, path, sizeof(path), true))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		rest_error(c, errno_status(e), "%s: %s", path, strerror(e));
		return;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		rest_error(c, 400, "%s is not a regular file", path);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		close(fd);
		rest_error(c, 500, "out of memory");
		return;
	}
	d->fd = fd;
	d->left = st.st_size;
	http_begin(c, 200, "application/octet-stream", (int64_t)st.st_size);
	http_set_ops(c, &dl_ops, d);
	dl_pump(c);
}

/* ---- upload ---- */

struct upload {
	struct multipart mp;
	bool multipart, failed;
	struct user u;
	char qpath[PATH_MAX];  /* from ?path=, may be empty for multipart */
	char cur[PATH_MAX];    /* the file being written */
	int fd;
	json_t *written;
	json_t *meta; /* X-Metadata-* headers, NULL when none */
};

static void up_free(struct upload *up)
{
	if (up->fd >= 0)
		close(up->fd);
	json_decref(up->written);
	json_decref(up->meta);
	free(up);
}

static void up_closed(struct conn *c)
{
	struct upload *up = http_ctx(c);

	if (up)
		up_free(up);
}

static int up_fail(struct conn *c, struct upload *up, int status, const char *what, int err)
{
	up->failed = true;
	if (up->fd >= 0) {
		close(up->fd);
		up->fd = -1;
	}
	rest_error(c, status, "%s%s%s", what, err ? ": " : "", err ? strerror(err) : "");
	return -1;
}

static int up_open(struct upload *up, const char *path)
{
	int rc = fsu_mkdirs(path, &up->u, false);

	if (rc)
		return rc;
	up->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
	if (up->fd < 0)
		return -errno;
	fsu_own(up->fd, NULL, &up->u);
	snprintf(up->cur, sizeof(up->cur), "%s", path);
	return 0;
}

static int up_done_file(struct upload *up)
{
	const char *base = strrchr(up->cur, '/');
	int rc = 0;

	if (up->fd >= 0 && close(up->fd))
		rc = -errno;
	up->fd = -1;
	/* Each upload replaces the file's metadata (none sent: none kept). */
	if (!rc) {
		rc = fsu_meta_set(up->cur, up->meta);
		if (rc == -ENOTSUP && !up->meta)
			rc = 0;
	}
	if (!rc)
		json_array_append_new(up->written, json_pack("{s:s,s:s,s:s}", "name", base ? base + 1 : up->cur,
				"type", "file", "path", up->cur));
	return rc;
}

/* multipart callbacks: ARG is the connection */
static bool printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return false;
	return true;
}

/* X-Metadata-<key>: <value> headers as envd takes them; -1 with WHY on a bad one. */
static int read_meta(struct conn *c, json_t **out, const char **why)
{
	size_t total = 0;
	const char *name, *value;
	char key[256];
	json_t *meta = NULL;

	for (unsigned i = 0; !http_header_at(c, i, &name, &value); i++) {
		size_t kl;
		if (strncasecmp(name, "X-Metadata-", 11))
			continue;
		kl = strlen(name + 11);
		if (!kl || kl > 246 || !printable(name + 11) || !printable(value)) {
			*why = "metadata keys (1..246 bytes) and values must be printable ASCII";
			goto bad;
		}
		for (size_t j = 0; j <= kl; j++)
			key[j] = (char)(name[11 + j] >= 'A' && name[11 + j] <= 'Z' ? name[11 + j] + 32 : name[11 + j]);
		if (!meta)
			meta = json_object();
		if (json_object_get(meta, key))
			continue; /* the first value counts */
		total += strlen(FSU_META_PREFIX) + kl + strlen(value);
		if (total > 4096) {
			*why = "metadata over 4096 bytes";
			goto bad;
		}
		json_object_set_new(meta, key, json_string(value));
	}
	*out = meta;
	return 0;
bad:
	json_decref(meta);
	return -1;
}

static int mp_part(void *arg, const char *name, const char *filename)
{
	struct conn *c = arg;
	struct upload *up = http_ctx(c);
	char path[PATH_MAX];
	int rc;

	if (strcmp(name, "file"))
		return 0; /* other form fields are skipped */
	if (up->qpath[0])
		snprintf(path, sizeof(path), "%s", up->qpath);
	else if (!filename[0] || user_path(&up->u, filename, path, sizeof(path)))
		return up_fail(c, up, 400, "a file part needs ?path= or a filename", 0);
	rc = up_open(up, path);
	if (rc)
		return up_fail(c, up, errno_status(rc), path, -rc);
	return 0;
}

static int mp_data(void *arg, const char *data, size_t len)
{
	struct conn *c = arg;
	struct upload *up = http_ctx(c);
	int rc;

	if (up->fd < 0)
		return 0;
	rc = fullio_write(up->fd, data, len);
	return rc ? up_fail(c, up, errno_status(rc), up->cur, -rc) : 0;
}

static int mp_end(void *arg)
{
	struct conn *c = arg;
	struct upload *up = http_ctx(c);
	int rc;

	if (up->fd < 0)
		return 0;
	rc = up_done_file(up);
	return rc ? up_fail(c, up, errno_status(rc), up->cur, -rc) : 0;
}

static const struct mp_ops up_mp_ops = { .part = mp_part, .data = mp_data, .end = mp_end };

static int up_body(struct conn *c, const char *data, size_t len)
{
	struct upload *up = http_ctx(c);
	int rc;

	if (up->failed)
		return -1;
	if (up->multipart) {
		rc = mp_feed(&up->mp, data, len);
		if (rc && !up->failed)
			return up_fail(c, up, 400, up->mp.error ? up->mp.error : "bad multipart body", 0);
		return rc ? -1 : 0;
	}
	rc = fullio_write(up->fd, data, len);
	return rc ? up_fail(c, up, errno_status(rc), up->cur, -rc) : 0;
}

static void up_complete(struct conn *c)
{
	struct upload *up = http_ctx(c);
	json_t *written;
	int rc;

	if (up->failed)
		return;
	if (up->multipart) {
		if (mp_finish(&up->mp)) {
			up_fail(c, up, 400, up->mp.error ? up->mp.error : "bad multipart body", 0);
			return;
		}
		if (!json_array_size(up->written)) {
			up_fail(c, up, 400, "no part named \"file\"", 0);
			return;
		}
	} else if ((rc = up_done_file(up))) {
		up_fail(c, up, errno_status(rc), up->cur, -rc);
		return;
	}
	written = json_incref(up->written);
	http_set_ops(c, NULL, NULL);
	up_free(up);
	http_reply_json(c, 200, written);
}

static const struct conn_ops up_ops = { .body = up_body, .complete = up_complete, .closed = up_closed };

void files_post_begin(struct conn *c, const char *query, const char *auth_user)
{
	const char *ctype = http_header(c, "Content-Type");
	char boundary[MP_BOUNDARY_MAX + 1];
	struct upload *up = calloc(1, sizeof(*up));
	const char *why;
	int rc;

	if (!up || !(up->written = json_array())) {
		free(up);
		rest_error(c, 500, "out of memory");
		return;
	}
	up->fd = -1;
	up->multipart = ctype && !strncasecmp(ctype, "multipart/", 10);
	if (target(c, query, auth_user, &up->u, up->qpath, sizeof(up->qpath), !up->multipart)) {
		up_free(up);
		return;
	}
	if (read_meta(c, &up->meta, &why)) {
		up_free(up);
		rest_error(c, 400, "%s", why);
		return;
	}
	if (up->multipart) {
		if (mp_boundary(ctype, boundary, sizeof(boundary))) {
			up_free(up);
			rest_error(c, 400, "multipart/form-data needs a valid boundary");
			return;
		}
		mp_init(&up->mp, boundary, &up_mp_ops, c);
	} else if ((rc = up_open(up, up->qpath))) {
		rest_error(c, errno_status(rc), "%s: %s", up->qpath, strerror(-rc));
		up_free(up);
		return;
	}
	http_stream_body(c, &up_ops, up);
}
