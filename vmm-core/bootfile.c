/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel and initrd files for arch_boot_load: open with size limits, copy
 * into guest RAM, and say what went wrong as "FILE: reason". */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootfile.h"

int bootfile_fail(int e, char *err, size_t errlen, const char *file, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (err && errlen) {
		n = snprintf(err, errlen, "%s: ", file);
		if (n >= 0 && (size_t)n < errlen) {
			va_start(ap, fmt);
			vsnprintf(err + n, errlen - n, fmt, ap);
			va_end(ap);
		}
	}
	return e;
}

/* [off, off+len) of the file into dst, or -errno with a message. */
static int read_at(const struct bootfile *f, uint8_t *dst, uint64_t off, uint64_t len, char *err,
		   size_t errlen)
{
	for (uint64_t done = 0; done < len;) {
		ssize_t r = pread(f->fd, dst + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return bootfile_fail(r ? -errno : -EIO, err, errlen, f->path, "read: %s",
					     r ? strerror(errno) : "file shrank while loading");
		done += (uint64_t)r;
	}
	return 0;
}

int bootfile_head(struct bootfile *f, uint64_t head, char *err, size_t errlen)
{
	uint64_t n = head < f->size ? head : f->size;
	int ret;

	free(f->map);
	f->map = n ? malloc(n) : NULL;
	if (n && !f->map)
		return bootfile_fail(-ENOMEM, err, errlen, f->path, "%s", strerror(ENOMEM));
	ret = n ? read_at(f, f->map, 0, n, err, errlen) : 0;
	if (ret) {
		free(f->map);
		f->map = NULL;
	}
	return ret;
}

int bootfile_open(struct bootfile *f, const char *path, uint64_t limit, const char *ram,
		  uint64_t head, char *err, size_t errlen)
{
	struct stat st;
	int e;

	f->path = path;
	f->size = 0;
	f->map = NULL;
	/* O_NONBLOCK: a FIFO must not hang the open; the type check refuses it. */
	f->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (f->fd < 0)
		return bootfile_fail(-errno, err, errlen, path, "%s", strerror(errno));
	if (fstat(f->fd, &st) < 0) {
		e = -errno;
		bootfile_fail(e, err, errlen, path, "%s", strerror(-e));
		goto out_close;
	}
	e = -EINVAL;
	if (!S_ISREG(st.st_mode)) {
		bootfile_fail(e, err, errlen, path, "not a regular file");
		goto out_close;
	}
	if (!st.st_size) {
		bootfile_fail(e, err, errlen, path, "empty file");
		goto out_close;
	}
	if ((uint64_t)st.st_size > limit) {
		e = -EFBIG;
		bootfile_fail(e, err, errlen, path, "%llu bytes do not fit in %llu MiB of %s",
			      (unsigned long long)st.st_size, (unsigned long long)(limit >> 20),
			      ram);
		goto out_close;
	}
	f->size = st.st_size;
	fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) & ~O_NONBLOCK);
	e = bootfile_head(f, head, err, errlen);
	if (!e)
		return 0;
out_close:
	close(f->fd);
	f->fd = -1;
	return e;
}

void bootfile_close(struct bootfile *f)
{
	free(f->map);
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	f->map = NULL;
}

int bootfile_copy(const struct bootfile *f, const struct guest_mem *m, uint64_t gpa, uint64_t off,
		  uint64_t len, char *err, size_t errlen)
{
	uint8_t *dst = mem_map(m, gpa, len);

	if (off > f->size || len > f->size - off)
		return bootfile_fail(-EINVAL, err, errlen, f->path,
				     "[%llu, +%llu) is not in the file's %llu bytes",
				     (unsigned long long)off, (unsigned long long)len,
				     (unsigned long long)f->size);
	if (!dst)
		return bootfile_fail(-EFAULT, err, errlen, f->path,
				     "[0x%llx, +%llu) is not in guest RAM", (unsigned long long)gpa,
				     (unsigned long long)len);
	return read_at(f, dst, off, len, err, errlen);
}

int bootfile_read(const struct bootfile *f, void *dst, uint64_t off, uint64_t len, char *err,
		  size_t errlen)
{
	if (off > f->size || len > f->size - off)
		return bootfile_fail(-EINVAL, err, errlen, f->path,
				     "[%llu, +%llu) is not in the file's %llu bytes",
				     (unsigned long long)off, (unsigned long long)len,
				     (unsigned long long)f->size);
	return read_at(f, dst, off, len, err, errlen);
}

int bootfile_read_to(struct bootfile *f, const struct guest_mem *m, uint64_t gpa, char *err,
		     size_t errlen)
{
	return bootfile_copy(f, m, gpa, 0, f->size, err, errlen);
}
