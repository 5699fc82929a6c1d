/* SPDX-License-Identifier: Apache-2.0 */
/* memory.zst (snapshot.h): a snapshot's guest RAM compressed in zstd's
 * seekable format (independent frames and a seek table: the stock `zstd -d`
 * gives back the raw bytes), made from its memory file by several threads
 * and decompressed by several into a memfd that the VM then maps private. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cnode.h"
#include "log.h"
#include "snap/internal.h"
#include "snap/snapshot.h"
#include "zseek.h"

#define ZST_FRAME (1u << 20)      /* decompressed bytes per frame */
#define ZST_MAX_THREADS 16
#define ZST_PROGRESS_MIN (256ull << 20)
#define ZST_SMALL_FRAME 4096u     /* a frame this small may be all zeroes */

unsigned snap_zst_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > ZST_MAX_THREADS ? ZST_MAX_THREADS : (unsigned)n;
}

/* A line that redraws itself on a terminal; elsewhere nothing (the caller
 * logs the result). */
struct zprog {
	const char *what;
	unsigned last;
};

static void zprog(void *arg, uint64_t done, uint64_t total)
{
	struct zprog *p = arg;
	unsigned pct = total ? (unsigned)(done * 100 / total) : 100;

	if (total < ZST_PROGRESS_MIN || pct == p->last || !isatty(STDERR_FILENO))
		return;
	fprintf(stderr, "\r%s %3u%% of %" PRIu64 " MiB%s", p->what, pct, total >> 20,
		pct == 100 ? "\n" : "");
	p->last = pct;
}

/* manifest.json replaced by @m: written beside, fsync'd, renamed. */
static int manifest_replace(const char *dir, json_t *m, char *err, size_t errlen)
{
	char *path = snap_path_in(dir, "manifest.json"), *tmp = snap_path_in(dir, "manifest.json.tmp");
	int ret = 0;

	if (!path || !tmp)
		ret = errf(err, errlen, -ENOMEM, "out of memory");
	else if (json_dump_file(m, tmp, JSON_INDENT(2) | JSON_SORT_KEYS) < 0)
		ret = errf(err, errlen, -EIO, "%s: cannot write it", tmp);
	if (!ret) {
		int fd = open(tmp, O_RDONLY | O_CLOEXEC);

		if (fd < 0 || fsync(fd) < 0)
			ret = errf(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	if (!ret && rename(tmp, path) < 0)
		ret = errf(err, errlen, -errno, "renaming %s: %s", tmp, strerror(errno));
	if (ret && tmp)
		unlink(tmp);
	free(path);
	free(tmp);
	return ret;
}

int snap_compress(const char *dir, const struct snap_zst_opts *o, struct snap_zst_stats *st,
		  char *err, size_t errlen)
{
	struct zprog pr = { "compressing memory:", ~0u };
	struct zseek_wopts zo = { .level = o->level, .frame_size = ZST_FRAME,
				  .threads = o->threads ? o->threads : snap_zst_threads(),
				  .progress = zprog, .arg = &pr };
	struct zseek_wstats zs;
	char *mpath = snap_path_in(dir, "manifest.json"), *raw = snap_path_in(dir, "memory"),
	     *zst = snap_path_in(dir, "memory.zst"), *tmp = snap_path_in(dir, "memory.zst.tmp");
	const char *file, *type;
	json_t *m = NULL, *mem;
	json_error_t je;
	struct stat sb;
	uint64_t t0 = snap_now_us();
	int in = -1, out = -1, ret = 0;
	char why[512];

	memset(st, 0, sizeof(*st));
	if (!mpath || !raw || !zst || !tmp) {
		ret = errf(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	m = json_load_file(mpath, JSON_REJECT_DUPLICATES, &je);
	if (!m) {
		ret = errf(err, errlen, -EINVAL, "%s:%d: %s", mpath, je.line, je.text);
		goto out;
	}
	mem = json_object_get(m, "memory");
	file = json_string_value(json_object_get(mem, "file"));
	type = json_string_value(json_object_get(m, "type"));
	if (file && !strcmp(file, "memory.zst")) {
		ret = errf(err, errlen, -EALREADY, "%s: its memory is compressed already (memory.zst)",
			   dir);
		goto out;
	}
	if (!file || strcmp(file, "memory") || !json_is_integer(json_object_get(mem, "bytes"))) {
		ret = errf(err, errlen, -EINVAL, "%s: 'memory' is missing or wrong (not a cubicle snapshot?)",
			   mpath);
		goto out;
	}
	if (type && strcmp(type, "Full")) {
		ret = errf(err, errlen, -EINVAL,
			   "%s: a %s snapshot's memory holds only what changed since its parent: compress the Full one it comes from",
			   dir, type);
		goto out;
	}
	in = open(raw, O_RDONLY | O_CLOEXEC);
	if (in < 0 || fstat(in, &sb) < 0) {
		ret = errf(err, errlen, -errno, "%s: %s", raw, strerror(errno));
		goto out;
	}
	if ((json_int_t)sb.st_size != json_integer_value(json_object_get(mem, "bytes"))) {
		ret = errf(err, errlen, -EINVAL, "%s: %lld bytes; the manifest says %" JSON_INTEGER_FORMAT
			   " (truncated or replaced)", raw, (long long)sb.st_size,
			   json_integer_value(json_object_get(mem, "bytes")));
		goto out;
	}
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		ret = errf(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	ret = zseek_write(in, out, &zo, &zs, why, sizeof(why));
	if (ret) {
		errf(err, errlen, ret, "%s: %s", raw, why);
		goto out;
	}
	if (fsync(out) < 0 || rename(tmp, zst) < 0) {
		ret = errf(err, errlen, -errno, "%s: %s", zst, strerror(errno));
		goto out;
	}
	/* The manifest names memory.zst before memory goes: a crash between
	 * the two leaves a file too many, never a snapshot without memory. */
	json_object_set_new(mem, "file", json_string("memory.zst"));
	json_object_set_new(mem, "format", json_string("zstd-seekable"));
	json_object_set_new(mem, "compressed", json_integer((json_int_t)zs.out_bytes));
	ret = manifest_replace(dir, m, err, errlen);
	if (ret) {
		unlink(zst);
		goto out;
	}
	if (unlink(raw) < 0)
		log_warn("%s: cannot remove it: %s", raw, strerror(errno));
	snap_fsync_path(dir);
	st->in_bytes = zs.in_bytes;
	st->out_bytes = zs.out_bytes;
	st->frames = zs.n_frames;
	st->threads = zo.threads;
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (ret && tmp)
		unlink(tmp);
	json_decref(m);
	free(mpath);
	free(raw);
	free(zst);
	free(tmp);
	st->us = snap_now_us() - t0;
	return ret;
}

/* Decompression: threads take frames in turn and write them into the
 * memfd's shared mapping; an all-zero frame is skipped (the memfd reads
 * zeroes), so a sparse RAM stays sparse. */
struct unz {
	const struct zseek *z;
	uint8_t *dst;
	uint32_t next;           /* the next frame to take (atomic) */
	int err;                 /* the first error (under lock) */
	char why[512];
	pthread_mutex_t lock;
	struct zprog pr;
	uint64_t done;           /* decompressed bytes (under lock) */
};

static bool all_zero(const uint8_t *p, size_t n)
{
	static const uint8_t z[256];

	for (; n >= sizeof(z); p += sizeof(z), n -= sizeof(z))
		if (memcmp(p, z, sizeof(z)))
			return false;
	return !n || !memcmp(p, z, n);
}

static void *unz_run(void *arg)
{
	struct unz *u = arg;
	struct zseek_dctx *d = zseek_dctx_new();
	uint8_t *scratch = malloc(u->z->frame_max);
	char why[512];

	if (!d || !scratch) {
		pthread_mutex_lock(&u->lock);
		if (!u->err) {
			u->err = -ENOMEM;
			snprintf(u->why, sizeof(u->why), "out of memory");
		}
		pthread_mutex_unlock(&u->lock);
	}
	while (d && scratch && !__atomic_load_n(&u->err, __ATOMIC_RELAXED)) {
		uint32_t i = __atomic_fetch_add(&u->next, 1, __ATOMIC_RELAXED);
		const struct zseek_frame *f;
		int ret;

		if (i >= u->z->n_frames)
			break;
		f = &u->z->f[i];
		/* A frame that small is likely zeroes: look before writing. */
		if (f->csize <= ZST_SMALL_FRAME) {
			ret = zseek_frame_read(u->z, d, i, scratch, why, sizeof(why));
			if (!ret && !all_zero(scratch, f->dsize))
				memcpy(u->dst + f->doff, scratch, f->dsize);
		} else {
			ret = zseek_frame_read(u->z, d, i, u->dst + f->doff, why, sizeof(why));
		}
		pthread_mutex_lock(&u->lock);
		if (ret && !u->err) {
			u->err = ret;
			snprintf(u->why, sizeof(u->why), "%s", why);
		}
		u->done += f->dsize;
		zprog(&u->pr, u->done, u->z->size);
		pthread_mutex_unlock(&u->lock);
	}
	zseek_dctx_free(d);
	free(scratch);
	return NULL;
}

int snap_zst_memfd(const char *path, uint64_t bytes, unsigned threads, int *out, char *err,
		   size_t errlen)
{
	struct zseek z;
	struct unz u;
	pthread_t t[ZST_MAX_THREADS];
	unsigned nt = threads ? threads : snap_zst_threads(), started = 0;
	char why[512];
	int fd, mfd = -1, ret;

	*out = -1;
	if (nt > ZST_MAX_THREADS)
		nt = ZST_MAX_THREADS;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW); /* (a snapshot's own: never a link) */
	if (fd < 0)
		return errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
	memset(&z, 0, sizeof(z));
	ret = zseek_open(&z, fd, why, sizeof(why));
	if (ret) {
		close(fd);
		return errf(err, errlen, ret, "%s: %s", path, why);
	}
	if (z.size != bytes) {
		ret = errf(err, errlen, -EINVAL,
			   "%s: %" PRIu64 " bytes decompressed; the manifest says %" PRIu64 " (truncated or replaced)",
			   path, z.size, bytes);
		goto out;
	}
	mfd = memfd_create("cubicle-snapshot-memory", MFD_CLOEXEC);
	if (mfd < 0 || ftruncate(mfd, (off_t)bytes) < 0) {
		ret = errf(err, errlen, -errno, "guest RAM for %s: %s", path, strerror(errno));
		goto out;
	}
	memset(&u, 0, sizeof(u));
	u.z = &z;
	u.pr = (struct zprog){ "decompressing memory.zst:", ~0u };
	pthread_mutex_init(&u.lock, NULL);
	u.dst = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (u.dst == MAP_FAILED) {
		ret = errf(err, errlen, -errno, "guest RAM for %s: %s", path, strerror(errno));
		pthread_mutex_destroy(&u.lock);
		goto out;
	}
	for (unsigned i = 1; i < nt && i < z.n_frames; i++)
		if (!pthread_create(&t[started], NULL, unz_run, &u))
			started++;
	unz_run(&u);
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	munmap(u.dst, bytes);
	pthread_mutex_destroy(&u.lock);
	if (u.err)
		ret = errf(err, errlen, u.err, "%s: %s", path, u.why);
out:
	zseek_close(&z);
	close(fd);
	if (ret && mfd >= 0)
		close(mfd);
	else
		*out = mfd;
	return ret;
}
