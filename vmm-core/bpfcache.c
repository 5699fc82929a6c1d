/* SPDX-License-Identifier: Apache-2.0 */
/* Compiled seccomp filters kept between starts (bpfcache.h), in the files
 * of cachefile.h. */
#include "bpfcache.h"
#include "cachefile.h"

static const struct cachefile_kind bpf_files = {
	.folder = "seccomp",
	.env = "CUBICLE_SECCOMP_CACHE",
	.magic = "CUBBPF2\n",
	.suffix = ".bpf",
	.what = "seccomp",
	.elem = sizeof(struct sock_filter),
	.max_n = BPF_MAXINSNS,
};

uint64_t bpfcache_sum(const char *desc, size_t len, const void *prog, size_t plen)
{
	return cachefile_sum(desc, len, prog, plen);
}

struct sock_filter *bpfcache_load(const char *desc, size_t len, unsigned short *n)
{
	uint32_t got;
	struct sock_filter *prog = cachefile_load(&bpf_files, desc, len, &got);

	if (prog)
		*n = (unsigned short)got; /* at most BPF_MAXINSNS */
	return prog;
}

void bpfcache_store(const char *desc, size_t len, const struct sock_filter *prog, unsigned short n)
{
	cachefile_store(&bpf_files, desc, len, prog, n);
}
