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

int bootfile_open(struct bootfile *f, const char *path, uint64_t limit, const char *ram,
		  bool map, char *err, size_t errlen)
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
		goto out;
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
	if (!map)
		return 0;
	/* Read, not mmap: a file truncated while we load it must give a short
	 * read and a message, not SIGBUS. */
	f->map = malloc(f->size);
	if (!f->map) {
		e = -ENOMEM;
		goto out;
	}
	for (uint64_t done = 0; done < f->size;) {
		ssize_t r = pread(f->fd, (uint8_t *)f->map + done, f->size - done, (off_t)done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			e = r ? -errno : -EIO;
			bootfile_fail(e, err, errlen, path, "read: %s",
				      r ? strerror(errno) : "file shrank while loading");
			free(f->map);
			f->map = NULL;
			goto out_close;
		}
		done += (uint64_t)r;
	}
	return 0;
out:
	bootfile_fail(e, err, errlen, path, "%s", strerror(-e));
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

int bootfile_read_to(struct bootfile *f, const struct guest_mem *m, uint64_t gpa, char *err,
		     size_t errlen)
{
	uint8_t *dst = mem_map(m, gpa, f->size);
	uint64_t done = 0;
	ssize_t r;

	if (!dst)
		return bootfile_fail(-EFAULT, err, errlen, f->path,
				     "[0x%llx, +%llu) is not in guest RAM", (unsigned long long)gpa,
				     (unsigned long long)f->size);
	while (done < f->size) {
		r = pread(f->fd, dst + done, f->size - done, done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return bootfile_fail(r ? -errno : -EIO, err, errlen, f->path, "read: %s",
					     r ? strerror(errno) : "file shrank while loading");
		done += r;
	}
	return 0;
}

int bootfile_copy(const struct bootfile *f, const struct guest_mem *m, uint64_t gpa, uint64_t off,
		  uint64_t len, char *err, size_t errlen)
{
	int ret = -EFAULT;

	if (f->map && off <= f->size && len <= f->size - off)
		ret = mem_write(m, gpa, (const uint8_t *)f->map + off, len);
	if (ret)
		return bootfile_fail(ret, err, errlen, f->path, "cannot copy the kernel to 0x%llx",
				     (unsigned long long)gpa);
	return 0;
}
