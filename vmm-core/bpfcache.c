/* SPDX-License-Identifier: Apache-2.0 */
/* Compiled seccomp filters kept between starts (bpfcache.h). */
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

#include "bpfcache.h"
#include "log.h"

#define MAGIC	 "CUBBPF1\n"
#define MAX_FILE (1u << 20)

/* A file: this header, the list's description, the program. */
struct file_hdr {
	char magic[8];
	uint32_t desc_len;
	uint32_t n;   /* instructions */
	uint64_t sum; /* FNV-1a over the description, then the program */
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#define FNV0 0xcbf29ce484222325ull

uint64_t bpfcache_sum(const char *desc, size_t len, const void *prog, size_t plen)
{
	return fnv(fnv(FNV0, desc, len), prog, plen);
}

/* The cache folder, opened (the user's own, writable by no one else), or
 * -1. With @create, its two last levels are made when missing. */
static int cache_dir(bool create)
{
	const char *env = getenv("CUBICLE_SECCOMP_CACHE"), *x = getenv("XDG_CACHE_HOME");
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
		if (n < 0 || (size_t)n + sizeof("/cubicle/seccomp") > sizeof(path) || stat(path, &st) ||
		    !S_ISDIR(st.st_mode))
			return -1;
		strcat(path, "/cubicle");
		if (create)
			mkdir(path, 0700);
		strcat(path, "/seccomp");
		if (create)
			mkdir(path, 0700);
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || st.st_uid != geteuid() || (st.st_mode & 022)) {
		log_debug("seccomp: cache %s is not this user's alone: not used", path);
		close(fd);
		return -1;
	}
	return fd;
}

static void file_name(char *name, size_t size, const char *desc, size_t len)
{
	snprintf(name, size, "%016llx.bpf", (unsigned long long)fnv(FNV0, desc, len));
}

struct sock_filter *bpfcache_load(const char *desc, size_t len, unsigned short *n)
{
	struct sock_filter *prog = NULL;
	struct file_hdr h;
	struct stat st;
	uint8_t *buf = NULL;
	char name[32];
	size_t size, plen;
	int dfd, fd;

	if (len > UINT32_MAX || (dfd = cache_dir(false)) < 0)
		return NULL;
	file_name(name, sizeof(name), desc, len);
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
	plen = (size_t)h.n * sizeof(struct sock_filter);
	if (memcmp(h.magic, MAGIC, sizeof(h.magic)) || h.desc_len != len || !h.n ||
	    h.n > BPF_MAXINSNS || size != sizeof(h) + len + plen ||
	    memcmp(buf + sizeof(h), desc, len) ||
	    bpfcache_sum(desc, len, buf + sizeof(h) + len, plen) != h.sum) {
		log_debug("seccomp: cached filter %s is not this list's, or damaged: compiling", name);
		goto out;
	}
	prog = malloc(plen);
	if (prog) {
		memcpy(prog, buf + sizeof(h) + len, plen);
		*n = (unsigned short)h.n;
	}
out:
	free(buf);
	close(fd);
	return prog;
}

void bpfcache_store(const char *desc, size_t len, const struct sock_filter *prog, unsigned short n)
{
	struct file_hdr h = { .desc_len = (uint32_t)len, .n = n };
	size_t plen = (size_t)n * sizeof(*prog), size = sizeof(h) + len + plen, done = 0;
	char name[32], tmp[48];
	uint8_t *buf;
	int dfd, fd, err = 0;

	if (len > UINT32_MAX || size > MAX_FILE || (dfd = cache_dir(true)) < 0)
		return;
	file_name(name, sizeof(name), desc, len);
	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", name, (long)getpid());
	memcpy(h.magic, MAGIC, sizeof(h.magic));
	h.sum = bpfcache_sum(desc, len, prog, plen);
	buf = malloc(size);
	fd = buf ? openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
	if (fd < 0) {
		log_debug("seccomp: cannot keep the compiled filter: %s", strerror(buf ? errno : ENOMEM));
		free(buf);
		close(dfd);
		return;
	}
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), desc, len);
	memcpy(buf + sizeof(h) + len, prog, plen);
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
	/* a torn or stale file is refused by the checks of bpfcache_load */
	if (!err && renameat(dfd, tmp, dfd, name))
		err = errno;
	if (err) {
		log_debug("seccomp: cannot keep the compiled filter: %s", strerror(err));
		unlinkat(dfd, tmp, 0);
	}
	free(buf);
	close(dfd);
}
