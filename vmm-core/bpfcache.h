/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compiled seccomp filters kept between starts. Compiling the lists with
 * libseccomp costs more than the rest of a VM's start on a slow host; the
 * compiled program depends only on the list (every rule, the mode, the
 * architecture and libseccomp's version), so a start whose list was
 * compiled before loads the program instead.
 *
 * The files are cachefile.h's, in $XDG_CACHE_HOME/cubicle/seccomp, else
 * ~/.cache/cubicle/seccomp, made only where that cache folder already
 * exists; CUBICLE_SECCOMP_CACHE names another folder, or "off". A file is
 * used only when the folder is the user's own and writable by nobody else,
 * the file likewise, and it holds the very list asked for (compared byte for
 * byte, not by a hash) and an intact program (checksum); else the list is
 * compiled and the file written again.
 */
#ifndef CUBICLE_BPFCACHE_H
#define CUBICLE_BPFCACHE_H

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

/* A file's checksum: FNV-1a over the description, then the program. */
uint64_t bpfcache_sum(const char *desc, size_t len, const void *prog, size_t plen);
/* The program compiled from the list @desc describes (malloc'd; its
 * length in *n), or NULL when the cache has none that can be trusted. */
struct sock_filter *bpfcache_load(const char *desc, size_t len, unsigned short *n);
/* Keep @prog for the list @desc for later starts (best effort: a failure
 * is logged at debug level only). */
void bpfcache_store(const char *desc, size_t len, const struct sock_filter *prog, unsigned short n);

#endif
