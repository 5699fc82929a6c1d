/* SPDX-License-Identifier: Apache-2.0 */
/* Files kept between starts (cachefile.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "cachefile.h"
#include "log.h"

#define MAX_FILE (1u << 20)

/* A file: this header, the description, the elements. */
struct file_hdr {
	char magic[8];
	uint32_t desc_len;
	uint32_t n;   /* elements */
	uint64_t sum; /* cachefile_sum */
};

/* XXH3 over the elements, seeded with the description's (@desc_h, which
 * also names the file). */
static uint64_t sum_of(uint64_t desc_h, const void *data, size_t size)
{
	return XXH3_64bits_withSeed(data, size, desc_h);
}

uint64_t cachefile_sum(const char *desc, size_t len, const void *data, size_t size)
{
	return sum_of(XXH3_64bits(desc, len), data, size);
}

/* @k's folder, opened (the user's own, writable by no one else), or -1.
 * With @create, its two last levels are made when missing. */
static int cache_dir(const struct cachefile_kind *k, bool create)
{
	const char *env = getenv(k->env), *x = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char path[PATH_MAX];
	struct stat st;
	int fd, n;

	if (env && !strcmp(env, "off"))
		return -1;
	if (env && *env) {
		if (env[0] != '/' || (n = snprintf(path, sizeof(path), "%s", env)) < 0 ||
		    (size_t)n >= sizeof(path))
			return -1;
		if (create)
			mkdir(path, 0700);
	} else {
		if (x && x[0] == '/')
			n = snprintf(path, sizeof(path), "%s", x);
		else if (home && home[0] == '/')
			n = snprintf(path, sizeof(path), "%s/.cache", home);
		else
			return -1;
		/* only where the user's cache folder exists: never a new ~/.cache */
		if (n < 0 || (size_t)n + sizeof("/cubicle/") + strlen(k->folder) > sizeof(path) ||
		    stat(path, &st) || !S_ISDIR(st.st_mode))
			return -1;
		strcat(path, "/cubicle");
		if (create)
			mkdir(path, 0700);
		strcat(path, "/");
		strcat(path, k->folder);
		if (create)
			mkdir(path, 0700);
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || st.st_uid != geteuid() || (st.st_mode & 022)) {
		log_debug("%s: cache %s is not this user's alone: not used", k->what, path);
		close(fd);
		return -1;
	}
	return fd;
}

static void file_name(const struct cachefile_kind *k, char *name, size_t size, uint64_t desc_h)
{
	snprintf(name, size, "%016llx%s", (unsigned long long)desc_h, k->suffix);
}

void *cachefile_load(const struct cachefile_kind *k, const char *desc, size_t len, uint32_t *n)
{
	struct file_hdr h;
	struct stat st;
	uint8_t *buf = NULL;
	void *data = NULL;
	char name[48];
	size_t size, dlen;
	uint64_t desc_h;
	int dfd, fd;

	if (len > UINT32_MAX || (dfd = cache_dir(k, false)) < 0)
		return NULL;
	desc_h = XXH3_64bits(desc, len);
	file_name(k, name, sizeof(name), desc_h);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022) || st.st_size < (off_t)sizeof(h) || st.st_size > MAX_FILE)
		goto out;
	size = (size_t)st.st_size;
	buf = malloc(size);
	if (!buf || pread(fd, buf, size, 0) != (ssize_t)size)
		goto out;
	memcpy(&h, buf, sizeof(h));
	dlen = (size_t)h.n * k->elem;
	if (memcmp(h.magic, k->magic, sizeof(h.magic)) || h.desc_len != len || !h.n ||
	    h.n > k->max_n || size != sizeof(h) + len + dlen ||
	    memcmp(buf + sizeof(h), desc, len) ||
	    sum_of(desc_h, buf + sizeof(h) + len, dlen) != h.sum) {
		log_debug("%s: cached file %s is not this one's, or damaged: not used", k->what, name);
		goto out;
	}
	data = malloc(dlen);
	if (data) {
		memcpy(data, buf + sizeof(h) + len, dlen);
		*n = h.n;
	}
out:
	free(buf);
	close(fd);
	return data;
}

void cachefile_store(const struct cachefile_kind *k, const char *desc, size_t len,
		     const void *data, uint32_t n)
{
	struct file_hdr h = { .desc_len = (uint32_t)len, .n = n };
	size_t dlen = (size_t)n * k->elem, size = sizeof(h) + len + dlen, done = 0;
	char name[48], tmp[72];
	uint64_t desc_h;
	uint8_t *buf;
	int dfd, fd, err = 0;

	if (len > UINT32_MAX || !n || n > k->max_n || size > MAX_FILE ||
	    (dfd = cache_dir(k, true)) < 0)
		return;
	desc_h = XXH3_64bits(desc, len);
	file_name(k, name, sizeof(name), desc_h);
	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", name, (long)getpid());
	memcpy(h.magic, k->magic, sizeof(h.magic));
	h.sum = sum_of(desc_h, data, dlen);
	buf = malloc(size);
	fd = buf ? openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
	if (fd < 0) {
		log_debug("%s: cannot keep the file: %s", k->what, strerror(buf ? errno : ENOMEM));
		free(buf);
		close(dfd);
		return;
	}
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), desc, len);
	memcpy(buf + sizeof(h) + len, data, dlen);
	while (done < size) {
		ssize_t w = write(fd, buf + done, size - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			err = w < 0 ? errno : EIO;
			break;
		}
		done += (size_t)w;
	}
	if (close(fd) && !err)
		err = errno;
	/* a torn or stale file is refused by the checks of cachefile_load */
	if (!err && renameat(dfd, tmp, dfd, name))
		err = errno;
	if (err) {
		log_debug("%s: cannot keep the file: %s", k->what, strerror(err));
		unlinkat(dfd, tmp, 0);
	}
	free(buf);
	close(dfd);
}
