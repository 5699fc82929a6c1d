/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Files kept between starts: what a start would otherwise compute or ask
 * the kernel for again (compiled seccomp filters, bpfcache.h; KVM's
 * supported CPUID, arch/x86_64/cpuid.c), each kind in a folder of its own
 * under $XDG_CACHE_HOME/cubicle, else ~/.cache/cubicle, made only where
 * that cache folder already exists; a variable of the kind's names another
 * folder (an absolute path, made if missing), or "off".
 *
 * A file holds a description of what it answers (every input the answer
 * depends on, as text) and the answer, an array of fixed-size elements. It
 * is used only when the folder is the user's own and writable by nobody
 * else, the file likewise, it holds the very description asked for
 * (compared byte for byte, not by a hash: the name is one) and its content
 * is intact (checksum); else the caller computes the answer and the file is
 * written again (to a temporary name, then renamed over).
 */
#ifndef CUBICLE_CACHEFILE_H
#define CUBICLE_CACHEFILE_H

#include <stddef.h>
#include <stdint.h>

struct cachefile_kind {
	const char *folder; /* under the user's cubicle cache folder */
	const char *env;    /* names another folder, or "off" */
	const char *magic;  /* 8 bytes: the file format and the element's */
	const char *suffix; /* of the file names */
	const char *what;   /* in the debug log lines */
	size_t elem;	    /* bytes per element */
	uint32_t max_n;	    /* the most elements a file may hold */
};

/* A file's checksum: XXH3 over the description, then the elements. */
uint64_t cachefile_sum(const char *desc, size_t len, const void *data, size_t size);
/* The elements kept for @desc (malloc'd; their count, at least 1, in *n),
 * or NULL when there are none that can be trusted. */
void *cachefile_load(const struct cachefile_kind *k, const char *desc, size_t len, uint32_t *n);
/* Keep @n elements for @desc for later starts (best effort: a failure is
 * logged at debug level only). */
void cachefile_store(const struct cachefile_kind *k, const char *desc, size_t len,
		     const void *data, uint32_t n);

#endif
