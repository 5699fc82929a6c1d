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
/* [off, off+len) of a file in memory, for reading in place (bootfile_view). */
struct bootfile_span {
	const uint8_t *p; /* the range's first byte */
	void *base;       /* what to unmap or free */
	size_t base_len;
	bool mapped;      /* base is the file's pages (read them under bootfile_guard) */
};
/* [off, off+len) of the file without a copy: mapped read-only, its pages
 * mapped ahead (MAP_POPULATE), so that reading it costs neither a copy
 * into fresh memory nor that memory's zeroing (a 14 MiB payload: ~30 ms
 * on a paravirtual host, ~150 ms in the nested harness). Read into a
 * buffer where the file cannot be mapped. 0, or -errno with "FILE:
 * reason" in err. Release with bootfile_span_free. */
int bootfile_view(const struct bootfile *f, uint64_t off, uint64_t len, struct bootfile_span *s,
		  char *err, size_t errlen);
void bootfile_span_free(struct bootfile_span *s);
/* fn(arg) with a file's mapped pages made safe to read: a file truncated
 * meanwhile would make their reads fault (SIGBUS, the process killed);
 * here such a fault on this thread ends fn and the call returns -EIO with
 * "FILE: read: file shrank while loading" in err. fn is abandoned where
 * it faulted: it must take no lock, and what it allocated stays (the
 * start fails, the process ends). One guarded call at a time in the
 * process; another thread's SIGBUS meanwhile gets the disposition SIGBUS
 * had. */
int bootfile_guard(const struct bootfile *f, int (*fn)(void *arg), void *arg, char *err,
		   size_t errlen);
/* The whole file at gpa (bootfile_copy of [0, size)). */
int bootfile_read_to(struct bootfile *f, const struct guest_mem *m, uint64_t gpa, char *err,
		     size_t errlen);

#endif
