/* SPDX-License-Identifier: Apache-2.0 */
/* The arch-neutral part of arch_boot_load: opening a kernel or initrd,
 * copying it into guest RAM, and the "FILE: reason" messages on failure. */
#ifndef CUBICLE_BOOTFILE_H
#define CUBICLE_BOOTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mem.h"

/* A file opened for reading: its fd, size and (for a kernel) its head. */
struct bootfile {
	const char *path;
	int fd;        /* -1 when closed */
	uint64_t size;
	void *map;     /* the first min(head, size) bytes, read at open (or by
			* bootfile_head); NULL when none were asked for */
};

/* What every kernel header cubicle parses fits in: the x86 setup header
 * ends below 0x300, the arm64 Image header is 64 bytes. */
#define BOOTFILE_HEAD 4096u

/* Write "FILE: reason" to err (when err and errlen) and return e. */
int bootfile_fail(int e, char *err, size_t errlen, const char *file, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Open a non-empty regular file of at most limit bytes, and read its first
 * min(head, size) bytes into f->map (head 0: none). ram names what limit is
 * in the message ("guest RAM"). 0, or -errno with "FILE: reason" in err and
 * f closed. Read, not mapped: a file truncated meanwhile gives a message,
 * not SIGBUS. */
int bootfile_open(struct bootfile *f, const char *path, uint64_t limit, const char *ram,
		  uint64_t head, char *err, size_t errlen);
/* Read the first min(head, size) bytes into f->map again (an ELF kernel:
 * all of it). 0, or -errno with "FILE: reason" in err (f stays open). */
int bootfile_head(struct bootfile *f, uint64_t head, char *err, size_t errlen);
/* Free the head and close; safe on a closed file ({ .fd = -1 }). */
void bootfile_close(struct bootfile *f);
/* Read [off, off+len) of the file into guest RAM at gpa: one copy, from
 * the page cache straight into guest RAM. 0, or -errno with "FILE: reason"
 * in err (a range outside the file or RAM, a read error, a file that shrank). */
int bootfile_copy(const struct bootfile *f, const struct guest_mem *m, uint64_t gpa, uint64_t off,
		  uint64_t len, char *err, size_t errlen);
/* Read [off, off+len) of the file into dst. 0, or -errno with
 * "FILE: reason" in err. */
int bootfile_read(const struct bootfile *f, void *dst, uint64_t off, uint64_t len, char *err,
		  size_t errlen);
/* The whole file at gpa (bootfile_copy of [0, size)). */
int bootfile_read_to(struct bootfile *f, const struct guest_mem *m, uint64_t gpa, char *err,
		     size_t errlen);

#endif
