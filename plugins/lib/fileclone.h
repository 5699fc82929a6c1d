/* SPDX-License-Identifier: Apache-2.0 */
/* Make a file a copy-on-write clone of another (FICLONE) or, where the filesystem cannot, a sparse copy; shared by the reflink backend and `cubicle disk clone`. */
#ifndef CUBICLE_FILECLONE_H
#define CUBICLE_FILECLONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What to do when FICLONE is refused with EOPNOTSUPP, EXDEV or EINVAL. */
enum fc_fallback { FC_FALLBACK_FAIL, FC_FALLBACK_COPY };

/* Called during a copy (never for a reflink) with bytes done of total. */
typedef void fc_progress_fn(void *arg, uint64_t done, uint64_t total);

struct fc_opts {
	enum fc_fallback fallback;
	const char *hint;         /* ends a refusal: "set fallback = \"copy\" to copy instead" */
	fc_progress_fn *progress; /* (optional) */
	void *arg;
	/* fc_clone_path: sync the new file and its folder before returning
	 * (a clone that must outlive a crash: templates, `disk clone
	 * --durable`). Without it a reflink is made in place, created and
	 * cloned and nothing more: the cost of the FICLONE ioctl itself. */
	bool durable;
};

struct fc_result {
	bool copied;          /* FICLONE was refused and the data copied */
	uint64_t size;        /* bytes in the clone */
	uint64_t data_bytes;  /* bytes a copy moved (holes are skipped) */
	uint64_t clone_us;    /* the FICLONE ioctl, or the copy */
	uint64_t total_us;    /* everything, including fsync and rename */
	char why[400];        /* when copied: why FICLONE could not be used */
};

/*
 * Whether FICLONE works in the current folder (tried between two new files):
 * one line into buf, "yes (in DIR, xfs)" or "no (in DIR: why)". 0 if it
 * does, else -errno.
 */
int fc_probe(char *buf, size_t len);

/* A filesystem's name for messages ("xfs", "ext4", "tmpfs", ...). */
const char *fc_fs_name(int fd, char *buf, size_t len);

/*
 * Clone src_fd (named src in messages) into a new file beside dst
 * ("DST.tmp-XXXXXX"), reflinked or copied per o, and fsync it (always:
 * snapshots use it, with fc_commit). 0 with its
 * name in tmp and its O_RDWR descriptor in *tmp_fd; or -errno with one
 * line in err (nothing is left behind).
 */
int fc_clone_tmp(int src_fd, const char *src, const char *dst, const struct fc_opts *o,
		 char *tmp, size_t tmplen, int *tmp_fd, struct fc_result *res, char *err,
		 size_t errlen);

/* Rename tmp to dst (atomically; with noreplace, -EEXIST if dst exists) and
 * fsync dst's folder. On failure tmp is left for the caller to remove. */
int fc_commit(const char *tmp, const char *dst, bool noreplace, char *err, size_t errlen);

/* src to a new file dst, refusing an existing dst: fc_clone_tmp +
 * fc_commit when o->durable; else dst is created and reflinked in place
 * (a refused reflink, or a copy, still goes through a temporary file, so
 * dst never appears half-copied). */
int fc_clone_path(const char *src, const char *dst, const struct fc_opts *o,
		  struct fc_result *res, char *err, size_t errlen);

#endif
