/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OCI and `docker save` image archives unpacked with libarchive (oci.h).
 *
 * The archive's files (index.json or manifest.json, the blobs) go to WORK;
 * an entry that is not a file, folder or link, or whose name is absolute or
 * climbs out with "..", is refused. The layer list comes from the OCI
 * layout's index.json (an image index followed to the manifest for this
 * host's architecture, else the first) or from docker's manifest.json.
 * Every blob an OCI layout names (image index, manifest, layer) is checked
 * against its sha256 or sha512 digest (nettle) before it is used.
 * Each layer is then read twice by a child chrooted into ROOT: its
 * whiteouts first (they hide what lower layers made; files of the same
 * layer stay), then its entries, written with their numeric owners.
 */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "oci.h"
#include "rmtree.h"

const int oci_available = 1;

#define MAX_LAYERS 256

static int fail(char *msg, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* NAME made relative ("./a//b/" -> "a/b"); -1 when absolute after all,
 * empty, or with a ".." component. */
static int rel_name(const char *name, char *out, size_t len)
{
	size_t n = 0;
	const char *p = name;

	while (*p) {
		const char *e;
		size_t cl;

		while (*p == '/')
			p++;
		e = strchrnul(p, '/');
		cl = (size_t)(e - p);
		if (cl == 2 && !strncmp(p, "..", 2))
			return -1;
		if (cl && !(cl == 1 && *p == '.')) {
			if (n + cl + 2 > len)
				return -1;
			if (n)
				out[n++] = '/';
			memcpy(out + n, p, cl);
			n += cl;
		}
		p = e;
	}
	out[n] = 0;
	return n ? 0 : -1;
}

static struct archive *reader(void)
{
	struct archive *a = archive_read_new();

	if (a) {
		archive_read_support_filter_all(a);
		archive_read_support_format_tar(a);
	}
	return a;
}

/* The archive's regular files, folders and links into WORK. */
static int unpack_outer(const char *archive, const char *work, char *msg, size_t len)
{
	struct archive *a = reader(), *w = archive_write_disk_new();
	struct archive_entry *e;
	int r, ret = -1;

	if (!a || !w)
		return fail(msg, len, "out of memory");
	/* names are made relative (rel_name) and put under WORK, an absolute
	 * path with no link in it (the caller's realpath) */
	archive_write_disk_set_options(w, ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS);
	if (archive_read_open_filename(a, archive, 65536) != ARCHIVE_OK) {
		fail(msg, len, "%s: %s", archive, archive_error_string(a));
		goto out;
	}
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		char rel[PATH_MAX], path[PATH_MAX];
		mode_t t = archive_entry_filetype(e);
		const void *buf;
		size_t sz;
		la_int64_t off;

		if (t != AE_IFREG && t != AE_IFDIR && t != AE_IFLNK)
			continue;
		if (rel_name(archive_entry_pathname(e), rel, sizeof(rel)) ||
		    snprintf(path, sizeof(path), "%s/%s", work, rel) >= (int)sizeof(path)) {
			fail(msg, len, "%s: entry '%s' has a name that leaves the archive", archive,
			     archive_entry_pathname(e));
			goto out;
		}
		archive_entry_set_pathname(e, path);
		archive_entry_set_perm(e, t == AE_IFDIR ? 0700 : 0600);
		if (archive_write_header(w, e) != ARCHIVE_OK) {
			fail(msg, len, "%s: %s: %s", archive, rel, archive_error_string(w));
			goto out;
		}
		while ((r = archive_read_data_block(a, &buf, &sz, &off)) == ARCHIVE_OK)
			if (archive_write_data_block(w, buf, sz, off) != ARCHIVE_OK) {
				fail(msg, len, "%s: %s: %s", archive, rel, archive_error_string(w));
				goto out;
			}
		if (r != ARCHIVE_EOF) {
			fail(msg, len, "%s: %s: %s", archive, rel, archive_error_string(a));
			goto out;
		}
		archive_write_finish_entry(w);
	}
	if (r != ARCHIVE_EOF)
		fail(msg, len, "%s: %s", archive, archive_error_string(a));
	else
		ret = 0;
out:
	archive_read_free(a);
	archive_write_free(w);
	return ret;
}

/* Whether FD's bytes (read from 0) have DIGEST ("sha256:HEX" or
 * "sha512:HEX"); left at offset 0. */
static int check_digest(int fd, const char *digest, const char *rel, char *msg, size_t len)
{
	struct sha256_ctx c256;
	struct sha512_ctx c512;
	bool is256 = !strncmp(digest, "sha256:", 7), is512 = !strncmp(digest, "sha512:", 7);
	uint8_t sum[SHA512_DIGEST_SIZE], buf[65536];
	char hex[2 * SHA512_DIGEST_SIZE + 1];
	size_t n = is256 ? SHA256_DIGEST_SIZE : SHA512_DIGEST_SIZE;
	ssize_t got;

	if (!is256 && !is512)
		return fail(msg, len, "%s: digest algorithm of '%s' is not sha256 or sha512", rel, digest);
	sha256_init(&c256);
	sha512_init(&c512);
	if (lseek(fd, 0, SEEK_SET) < 0)
		return fail(msg, len, "%s: %s", rel, strerror(errno));
	while ((got = read(fd, buf, sizeof(buf))) > 0) {
		if (is256)
			sha256_update(&c256, (size_t)got, buf);
		else
			sha512_update(&c512, (size_t)got, buf);
	}
	if (got < 0)
		return fail(msg, len, "%s: %s", rel, strerror(errno));
	if (is256)
		sha256_digest(&c256, SHA256_DIGEST_SIZE, sum);
	else
		sha512_digest(&c512, SHA512_DIGEST_SIZE, sum);
	for (size_t i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", sum[i]);
	if (strcmp(hex, digest + 7))
		return fail(msg, len, "%s does not match its digest %s (sha: %s): a damaged or altered archive", rel,
			    digest, hex);
	lseek(fd, 0, SEEK_SET);
	return 0;
}

/* WORK/REL opened for reading when it resolves inside WORK (the archive's
 * links are its own to follow, but not out of it). */
static int open_in(const char *work, const char *rel, char *msg, size_t len)
{
	char p[PATH_MAX], real[PATH_MAX], wreal[PATH_MAX];
	size_t wl;
	int fd;

	if (snprintf(p, sizeof(p), "%s/%s", work, rel) >= (int)sizeof(p) || !realpath(work, wreal))
		return fail(msg, len, "%s: path too long", rel);
	if (!realpath(p, real))
		return fail(msg, len, "the archive has no %s", rel);
	wl = strlen(wreal);
	if (strncmp(real, wreal, wl) || real[wl] != '/')
		return fail(msg, len, "%s leads out of the archive", rel);
	fd = open(real, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(msg, len, "%s: %s", rel, strerror(errno));
	return fd;
}

/* The JSON at WORK/REL, checked against DIGEST when one is given. */
static json_t *load_in(const char *work, const char *rel, const char *digest, char *msg, size_t len)
{
	json_error_t je;
	json_t *j;
	int fd = open_in(work, rel, msg, len);

	if (fd < 0)
		return NULL;
	if (digest && check_digest(fd, digest, rel, msg, len)) {
		close(fd);
		return NULL;
	}
	j = json_loadfd(fd, 0, &je);
	close(fd);
	if (!j)
		fail(msg, len, "%s: line %d: %s", rel, je.line, je.text);
	return j;
}

/* "sha256:HEX" -> "blobs/sha256/HEX". */
static int blob_rel(json_t *desc, char *out, size_t len, char *msg, size_t mlen)
{
	const char *d = json_string_value(json_object_get(desc, "digest"));
	const char *colon = d ? strchr(d, ':') : NULL;

	if (!colon || colon == d || (size_t)(colon - d) > 16 || strlen(colon + 1) < 32 ||
	    strspn(colon + 1, "0123456789abcdef") != strlen(colon + 1) || strspn(d, "abcdefghijklmnopqrstuvwxyz0123456789") != (size_t)(colon - d))
		return fail(msg, mlen, "a descriptor's digest '%s' is not ALGORITHM:HEX", d ? d : "(none)");
	snprintf(out, len, "blobs/%.*s/%s", (int)(colon - d), d, colon + 1);
	return 0;
}

static const char *host_arch(void)
{
	struct utsname u;

	if (uname(&u))
		return "amd64";
	return !strcmp(u.machine, "aarch64") ? "arm64" : "amd64";
}

/* The OCI layout's image manifest: index.json, an image index followed
 * to this host's architecture (or its first manifest). */
static json_t *oci_manifest(const char *work, char *msg, size_t len)
{
	json_t *idx = load_in(work, "index.json", NULL, msg, len);

	for (int depth = 0; idx && depth < 4; depth++) {
		json_t *ms = json_object_get(idx, "manifests"), *m, *pick = NULL, *next;
		char rel[PATH_MAX];
		size_t i;

		if (json_is_array(json_object_get(idx, "layers")))
			return idx;
		json_array_foreach(ms, i, m) {
			const char *arch = json_string_value(json_object_get(json_object_get(m, "platform"), "architecture"));

			if (!pick || (arch && !strcmp(arch, host_arch())))
				pick = m;
			if (arch && !strcmp(arch, host_arch()))
				break;
		}
		if (!pick) {
			json_decref(idx);
			fail(msg, len, "index.json lists no image manifest");
			return NULL;
		}
		if (blob_rel(pick, rel, sizeof(rel), msg, len)) {
			json_decref(idx);
			return NULL;
		}
		next = load_in(work, rel, json_string_value(json_object_get(pick, "digest")), msg, len);
		json_decref(idx);
		idx = next;
	}
	if (idx) {
		json_decref(idx);
		fail(msg, len, "index.json: image indexes nested too deep");
	}
	return NULL;
}

/* The layers' files under WORK, bottom first, opened. */
static int layer_fds(const char *work, int *fds, unsigned *n, char *msg, size_t len)
{
	char rel[PATH_MAX], p[PATH_MAX];
	json_t *m = NULL, *layers, *l;
	size_t i;
	bool docker;
	int fd;

	*n = 0;
	snprintf(p, sizeof(p), "%s/index.json", work);
	docker = access(p, F_OK) != 0;
	if (docker) {
		snprintf(p, sizeof(p), "%s/manifest.json", work);
		if (access(p, F_OK))
			return fail(msg, len, "neither index.json (an OCI image layout) nor manifest.json (docker save) is in it");
		m = load_in(work, "manifest.json", NULL, msg, len);
		layers = json_object_get(json_array_get(m, 0), "Layers");
	} else {
		m = oci_manifest(work, msg, len);
		layers = json_object_get(m, "layers");
	}
	if (!m)
		return -1;
	if (!json_is_array(layers) || !json_array_size(layers) || json_array_size(layers) > MAX_LAYERS) {
		json_decref(m);
		return fail(msg, len, "%s: no layer list (or over %d layers)",
			    docker ? "manifest.json" : "the image manifest", MAX_LAYERS);
	}
	json_array_foreach(layers, i, l) {
		if (docker) {
			const char *s = json_string_value(l);

			if (!s || rel_name(s, rel, sizeof(rel))) {
				fail(msg, len, "manifest.json: layer %zu is not a path inside the archive", i + 1);
				break;
			}
		} else if (blob_rel(l, rel, sizeof(rel), msg, len)) {
			break;
		}
		if ((fd = open_in(work, rel, msg, len)) < 0)
			break;
		/* docker's legacy layers are named by path, not digest */
		if (!docker && check_digest(fd, json_string_value(json_object_get(l, "digest")), rel, msg, len)) {
			close(fd);
			break;
		}
		fds[(*n)++] = fd;
	}
	i = json_array_size(layers);
	json_decref(m);
	if (*n != i) {
		while (*n)
			close(fds[--*n]);
		return -1;
	}
	return 0;
}

/* Everything in folder DIR (itself stays); DIR "" is the root. */
static int empty_dir(const char *dir)
{
	DIR *d = opendir(*dir ? dir : ".");
	struct dirent *e;
	int ret = 0;

	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	while (!ret && (e = readdir(d))) {
		char p[PATH_MAX];

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s%s%s", dir, *dir ? "/" : "", e->d_name);
		if (rm_tree(p) && errno != ENOENT)
			ret = -1;
	}
	closedir(d);
	return ret;
}

/* In the child, in ROOT: one pass over a layer, whiteouts (WH) or the rest. */
static int layer_pass(int fd, unsigned no, bool wh, FILE *err)
{
	struct archive *a = reader(), *w = NULL;
	struct archive_entry *e;
	int r, ret = -1;

	if (!a || lseek(fd, 0, SEEK_SET) < 0) {
		fprintf(err, "layer %u: %s", no, strerror(errno));
		goto out;
	}
	if (!wh) {
		w = archive_write_disk_new();
		if (!w) {
			fprintf(err, "out of memory");
			goto out;
		}
		/* numeric owners: no name lookup (it would read the image's /etc) */
		archive_write_disk_set_options(w, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM |
						  ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR |
						  ARCHIVE_EXTRACT_UNLINK | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
						  ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
	}
	if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
		fprintf(err, "layer %u: %s", no, archive_error_string(a));
		goto out;
	}
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		char rel[PATH_MAX], link[PATH_MAX];
		const char *base, *hl = archive_entry_hardlink(e);
		char *slash;
		bool is_wh;

		if (rel_name(archive_entry_pathname(e), rel, sizeof(rel))) {
			if (!strcmp(archive_entry_pathname(e), ".") || !strcmp(archive_entry_pathname(e), "./") ||
			    !strcmp(archive_entry_pathname(e), "/"))
				continue; /* the root itself */
			fprintf(err, "layer %u: entry '%s' leaves the root", no, archive_entry_pathname(e));
			goto out;
		}
		slash = strrchr(rel, '/');
		base = slash ? slash + 1 : rel;
		is_wh = !strncmp(base, ".wh.", 4);
		if (wh != is_wh)
			continue;
		if (wh) {
			char target[PATH_MAX];

			if (slash)
				*slash = 0;
			if (!strcmp(base, ".wh..wh..opq")) {
				if (empty_dir(slash ? rel : "")) {
					fprintf(err, "layer %u: opaque %s: %s", no, rel, strerror(errno));
					goto out;
				}
				continue;
			}
			if (!base[4] || !strcmp(base + 4, ".") || !strcmp(base + 4, ".."))
				continue;
			snprintf(target, sizeof(target), "%s%s%s", slash ? rel : "", slash ? "/" : "", base + 4);
			if (rm_tree(target) && errno != ENOENT) {
				fprintf(err, "layer %u: whiteout %s: %s", no, target, strerror(errno));
				goto out;
			}
			continue;
		}
		archive_entry_set_pathname(e, rel);
		if (hl) {
			if (rel_name(hl, link, sizeof(link))) {
				fprintf(err, "layer %u: %s: hard link to '%s' leaves the root", no, rel, hl);
				goto out;
			}
			archive_entry_set_hardlink(e, link);
		}
		r = archive_write_header(w, e);
		if (r < ARCHIVE_WARN) {
			fprintf(err, "layer %u: %s: %s", no, rel, archive_error_string(w));
			goto out;
		}
		if (r == ARCHIVE_OK && archive_entry_size(e) > 0) {
			const void *buf;
			size_t sz;
			la_int64_t off;

			while ((r = archive_read_data_block(a, &buf, &sz, &off)) == ARCHIVE_OK)
				if (archive_write_data_block(w, buf, sz, off) < ARCHIVE_WARN) {
					fprintf(err, "layer %u: %s: %s", no, rel, archive_error_string(w));
					goto out;
				}
			if (r != ARCHIVE_EOF) {
				fprintf(err, "layer %u: %s: %s", no, rel, archive_error_string(a));
				goto out;
			}
		}
		if (archive_write_finish_entry(w) < ARCHIVE_WARN) {
			fprintf(err, "layer %u: %s: %s", no, rel, archive_error_string(w));
			goto out;
		}
	}
	if (r != ARCHIVE_EOF)
		fprintf(err, "layer %u: %s", no, archive_error_string(a));
	else
		ret = 0;
out:
	archive_read_free(a);
	if (w)
		archive_write_free(w);
	return ret;
}

json_t *oci_image_config(const char *work, char *msg, size_t len)
{
	char p[PATH_MAX], rel[PATH_MAX];
	json_t *m, *cfg = NULL, *c;

	snprintf(p, sizeof(p), "%s/index.json", work);
	if (access(p, F_OK)) { /* docker save: manifest.json names the config by path */
		const char *cp;

		m = load_in(work, "manifest.json", NULL, msg, len);
		cp = json_string_value(json_object_get(json_array_get(m, 0), "Config"));
		if (m && (!cp || rel_name(cp, rel, sizeof(rel))))
			fail(msg, len, "manifest.json names no config inside the archive");
		else if (m)
			cfg = load_in(work, rel, NULL, msg, len);
	} else {
		m = oci_manifest(work, msg, len);
		c = json_object_get(m, "config");
		if (m && !blob_rel(c, rel, sizeof(rel), msg, len))
			cfg = load_in(work, rel, json_string_value(json_object_get(c, "digest")), msg, len);
	}
	json_decref(m);
	c = json_incref(json_object_get(cfg, "config"));
	json_decref(cfg);
	if (!c && !msg[0])
		fail(msg, len, "the image's config has no \"config\" object");
	return c;
}

int oci_unpack(const char *archive, const char *root, const char *work, char *msg, size_t len)
{
	int fds[MAX_LAYERS], pfd[2], st = 0;
	unsigned n = 0;
	pid_t pid;
	ssize_t got;

	if (geteuid() != 0)
		return fail(msg, len, "unpacking an image needs root (its files keep their owners; layers are written in a chroot)");
	if ((archive && unpack_outer(archive, work, msg, len)) || layer_fds(work, fds, &n, msg, len))
		return -1;
	if (pipe2(pfd, O_CLOEXEC)) {
		while (n)
			close(fds[--n]);
		return fail(msg, len, "pipe: %s", strerror(errno));
	}
	pid = fork();
	if (pid == 0) {
		FILE *err = fdopen(pfd[1], "w");

		close(pfd[0]);
		if (!err)
			_exit(1);
		umask(0);
		if (chroot(root) || chdir("/")) {
			fprintf(err, "chroot %s: %s", root, strerror(errno));
			_exit(1);
		}
		for (unsigned i = 0; i < n; i++) {
			fprintf(stderr, "cubicle template: unpacking layer %u of %u\n", i + 1, n);
			if (layer_pass(fds[i], i + 1, true, err) || layer_pass(fds[i], i + 1, false, err)) {
				fclose(err);
				_exit(1);
			}
		}
		fclose(err);
		_exit(0);
	}
	close(pfd[1]);
	while (n)
		close(fds[--n]);
	if (pid < 0) {
		close(pfd[0]);
		return fail(msg, len, "fork: %s", strerror(errno));
	}
	got = read(pfd[0], msg, len - 1);
	msg[got > 0 ? got : 0] = 0;
	close(pfd[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (got <= 0)
		fail(msg, len, "unpacking %s failed (status %d)", archive ? archive : "the image", st);
	return -1;
}
