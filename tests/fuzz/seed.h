/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Seeds for the libFuzzer harnesses: built by each harness in its
 * LLVMFuzzerInitialize (so that the tree holds no binary files) and written
 * into FUZZ_SEED_DIR, the corpus folder make fuzz-smoke passes; a seed
 * already there is left as it is.
 */
#ifndef CUBICLE_FUZZ_SEED_H
#define CUBICLE_FUZZ_SEED_H

#include <stdio.h>
#include <unistd.h>

static inline void fuzz_write_seed(const char *dir, const char *name, const void *data,
				   size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!access(path, F_OK))
		return;
	f = fopen(path, "wb");
	if (f) {
		fwrite(data, 1, len, f);
		fclose(f);
	}
}

#endif
