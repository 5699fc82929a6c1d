/* SPDX-License-Identifier: Apache-2.0 */
/* The arch-neutral part of arch_boot_load: opening a kernel or initrd,
 * copying it into guest RAM, and the "FILE: reason" messages on failure. */
#ifndef CUBICLE_BOOTFILE_H
#define CUBICLE_BOOTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mem.h"

/* A file opened for reading: its fd, size and (for the kernel) its bytes. */
struct bootfile {
	const char *path;
	int fd;        /* -1 when closed */
	uint64_t size;
	void *map;     /* a copy of the whole file read at open; NULL unless opened
			* with map (read, not mapped: truncation cannot SIGBUS us) */
};

/* Write "FILE: reason" to err (when err and errlen) and return e. */
int bootfile_fail(int e, char *err, size_t errlen, const char *file, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Open a non-empty regular file of at most limit bytes, and read it into
 * f->map when map is set. ram names what limit is in the message ("guest RAM").
 * 0, or -errno with "FILE: reason" in err and f closed. */
int bootfile_open(struct bootfile *f, const char *path, uint64_t limit, const char *ram,
		  bool map, char *err, size_t errlen);
/* Free the copy and close; safe on a closed file ({ .fd = -1 }). */
void bootfile_close(struct bootfile *f);
/* Read the whole file into guest RAM at gpa: one copy, no bounce buffer.
 * Does not need the mapping. */
int bootfile_read_to(struct bootfile *f, const struct guest_mem *m, uint64_t gpa, char *err,
		     size_t errlen);
/* Copy [off, off+len) of the file read at open into guest RAM at gpa: 0, or
 * -EFAULT with "FILE: cannot copy the kernel to GPA" in err. */
int bootfile_copy(const struct bootfile *f, const struct guest_mem *m, uint64_t gpa, uint64_t off,
		  uint64_t len, char *err, size_t errlen);

#endif
