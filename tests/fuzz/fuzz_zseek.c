/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness for the zstd seekable reader (plugins/lib/zseek.c): the input is a whole .zst file; whatever zseek_open accepts must be self-consistent, and reading any frame must fail cleanly or give exactly its size. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zseek.h"

#define MAX_READ (1u << 20) /* frames larger than this are not decompressed here */
#define MAX_FRAMES_READ 64

#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			__builtin_trap(); \
	} while (0)

static int fd = -1;
static uint8_t *out;
static struct zseek_dctx *dctx;

static void setup(void)
{
	fd = memfd_create("fuzz-zseek", MFD_CLOEXEC);
	out = malloc(MAX_READ);
	dctx = zseek_dctx_new();
	if (fd < 0 || !out || !dctx)
		abort();
}

static void load(const uint8_t *data, size_t size)
{
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
}

/*
 * Seeds: small seekable files made by the writer itself (so the tree holds
 * no binary files), with and without checksums, one with a short last frame.
 */
static void write_seed(const char *dir, const char *name, size_t len, uint32_t fsz, bool sums)
{
	struct zseek_wopts o = { .level = 1, .frame_size = fsz, .no_checksums = !sums };
	struct zseek_wstats st;
	char path[4096], why[256];
	uint8_t *raw = malloc(len);
	int in, dst;

	if (!raw)
		return;
	for (size_t i = 0; i < len; i++)
		raw[i] = (uint8_t)(i % 251 < 100 ? i / 4096 : i * 2654435761u >> 24);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	in = memfd_create("seed-in", MFD_CLOEXEC);
	dst = access(path, F_OK) ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
	if (in >= 0 && dst >= 0 && pwrite(in, raw, len, 0) == (ssize_t)len)
		zseek_write(in, dst, &o, &st, why, sizeof(why));
	if (in >= 0)
		close(in);
	if (dst >= 0)
		close(dst);
	free(raw);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_SEED_DIR");

	setup();
	if (dir) {
		write_seed(dir, "seed-sums", 3 * 4096, 4096, true);
		write_seed(dir, "seed-nosums", 2 * 4096 + 700, 4096, false);
		write_seed(dir, "seed-one", 5000, 8192, true);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zmap_hdr h;
	struct zseek z;
	uint64_t coff = 0, doff = 0;
	char why[512];

	if (fd < 0)
		setup();
	/* The map header check on the same bytes. */
	if (size >= sizeof(h)) {
		memcpy(&h, data, sizeof(h));
		(void)zmap_hdr_check(&h, size, why, sizeof(why));
	}
	load(data, size);
	if (zseek_open(&z, fd, why, sizeof(why))) {
		CHECK(why[0]);
		return 0;
	}
	/* What open accepted is consistent with the file. */
	CHECK(z.file_size == size && z.n_frames <= ZSEEK_MAX_FRAMES);
	for (uint32_t i = 0; i < z.n_frames; i++) {
		CHECK(z.f[i].coff == coff && z.f[i].doff == doff);
		CHECK(z.f[i].dsize <= z.frame_max && z.f[i].dsize <= ZSEEK_MAX_FRAME_SIZE);
		coff += z.f[i].csize;
		doff += z.f[i].dsize;
	}
	CHECK(coff == z.table_off && doff == z.size && z.table_off < size);
	if (z.size) {
		uint64_t probe[3] = { 0, z.size / 2, z.size - 1 };

		for (int k = 0; k < 3; k++) {
			const struct zseek_frame *f = &z.f[zseek_frame_of(&z, probe[k])];

			CHECK(f->doff <= probe[k] && probe[k] < f->doff + f->dsize);
		}
	}
	for (uint32_t i = 0; i < z.n_frames && i < MAX_FRAMES_READ; i++) {
		int err;

		if (z.f[i].dsize > MAX_READ)
			continue;
		err = zseek_frame_read(&z, dctx, i, out, why, sizeof(why));
		CHECK(!err || (err < 0 && why[0]));
	}
	zseek_close(&z);
	return 0;
}
