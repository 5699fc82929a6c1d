/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot folders, the writing half (snapshot.h): create one from a paused
 * VM, and pause to disk. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cubicle-build.h"
#include "arch.h"
#include "config.h"
#include "confine.h"
#include "devices.h"
#include "log.h"
#include "plan.h"
#include "snap/internal.h"
#include "snap/snapshot.h"
#include "virtio/virtio_dev.h"
#include "vm.h"

#define DEV_STATE_MAX (16u << 20)

static const char *const snap_files[] = { "memory", "state", "manifest.json", "memory.zst",
					   "memory.zst.tmp", "manifest.json.tmp" };

static int check_savable(const struct snap_vm *v, char *err, size_t errlen)
{
	for (unsigned i = 0; i < v->n_insts; i++) {
		const struct cub_inst *in = v->insts[i];
		const struct cub_plugin *d = in->plugin->d;

		if (!snap_state_ops(in))
			return errf(err, errlen, -ENOTSUP,
				    "%s: %s: its plugin (%s %s, ABI %u.%u) cannot save its state",
				    in->pi->where, in->name, d->name, d->version, d->abi_major,
				    d->abi_minor);
	}
	return snap_disks_check(v, err, errlen);
}

static int save_devices(const struct snap_vm *v, struct snap_w *w, char *err, size_t errlen)
{
	size_t cap = 4096, len;
	uint8_t *buf = malloc(cap);
	int ret = 0;

	if (!buf)
		return errf(err, errlen, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < v->n_insts && !ret; i++) {
		struct cub_inst *in = v->insts[i];
		const struct cub_device_ops *o = snap_state_ops(in);

		if (in->virtio && (ret = virtio_dev_save(in->virtio, w, i, err, errlen)))
			break;
		in->err[0] = '\0';
		len = 0;
		ret = o->save(in->priv, buf, cap, &len);
		if (ret == -ENOSPC && len > cap && len <= DEV_STATE_MAX) {
			uint8_t *n = realloc(buf, len);

			if (!n) {
				ret = errf(err, errlen, -ENOMEM, "out of memory");
				break;
			}
			buf = n;
			cap = len;
			ret = o->save(in->priv, buf, cap, &len);
		}
		if (!ret && len > cap)
			ret = -EOVERFLOW;
		if (ret) {
			errf(err, errlen, ret, "%s: saving its state: %s", in->name,
			     in->err[0] ? in->err : strerror(-ret));
			break;
		}
		ret = snap_w_put(w, SNAP_K_DEVICE, in->plugin->d->name, i, o->state_version, buf, len);
		if (ret)
			errf(err, errlen, ret, "state: %s", strerror(-ret));
	}
	free(buf);
	return ret;
}

static int write_all(int fd, const void *p, size_t n, uint64_t off)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = pwrite(fd, b, n > (1u << 30) ? (1u << 30) : n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		b += w;
		off += (uint64_t)w;
		n -= (size_t)w;
	}
	return 0;
}

static bool page_zero(const uint8_t *p)
{
	const uint64_t *q = (const uint64_t *)(const void *)p;
	uint64_t acc = 0;

	for (unsigned i = 0; i < PAGE / 8; i++)
		acc |= q[i];
	return !acc;
}

/* Pages of one chunk that write_memory scans at a time. */
#define CHUNK_PAGES 512u

/* pagemap (Documentation/admin-guide/mm/pagemap.rst): bit 63 present,
 * 62 swapped, 61 a file page or shared anonymous. */
#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)
#define PM_FILE (1ull << 61)

/*
 * Which pages of the chunk at @off might hold something. In a memfd, all
 * (its holes are skipped before). In anonymous RAM (machine.thp), the pages
 * present or swapped: one never touched reads as zero, and reading it would
 * only map the zero page for nothing. In a private mapping of a snapshot's
 * memory file, the pages where the file has data and those the guest wrote
 * (copied on write: anonymous in pagemap); any other page would be read
 * from a hole of the file, which faults it in (on tmpfs: allocates it in
 * the file every clone shares).
 */
static void chunk_wanted(const struct guest_mem *m, int pm, uint64_t off, unsigned n, bool *want)
{
	uint64_t e[CHUNK_PAGES], end = off + (uint64_t)n * PAGE, at = off;

	for (unsigned i = 0; i < n; i++)
		want[i] = true;
	if ((!m->private_file && !m->anon) || pm < 0 ||
	    pread(pm, e, n * sizeof(e[0]), (off_t)((uintptr_t)(m->host + off) / PAGE * 8)) !=
		    (ssize_t)(n * sizeof(e[0])))
		return; /* read them all */
	for (unsigned i = 0; i < n; i++)
		want[i] = (e[i] & (PM_PRESENT | PM_SWAPPED)) && (m->anon || !(e[i] & PM_FILE));
	while (m->private_file && at < end) { /* the file's data extents in the chunk */
		off_t d = lseek(m->fd, (off_t)at, SEEK_DATA), h;

		if (d < 0 || (uint64_t)d >= end)
			break;
		h = lseek(m->fd, d, SEEK_HOLE);
		at = h < 0 || (uint64_t)h > end ? end : (uint64_t)h;
		for (uint64_t p = (uint64_t)d & ~(uint64_t)(PAGE - 1); p < at; p += PAGE)
			want[(p - off) / PAGE] = true;
	}
}

/* Progress of a long memory write (1 GiB of RAM or more): a line that
 * redraws itself on a terminal, else a log line at each quarter. */
#define PROGRESS_MIN (1ull << 30)

static void progress(uint64_t done, uint64_t size, unsigned *last)
{
	unsigned pct = (unsigned)(done * 100 / size);

	if (size < PROGRESS_MIN || pct == *last)
		return;
	if (isatty(STDERR_FILENO)) {
		fprintf(stderr, "\rsnapshot: memory %3u%% of %llu MiB%s", pct,
			(unsigned long long)(size >> 20), pct == 100 ? "\n" : "");
	} else if (pct / 25 != *last / 25 || *last == ~0u) {
		log_info("snapshot: memory %u%% of %llu MiB", pct / 25 * 25,
			 (unsigned long long)(size >> 20));
	}
	*last = pct;
}

/* Guest RAM into @fd, sparse: zero pages stay holes, and pages that were
 * never written are not read at all (see chunk_wanted). */
static int write_memory(const struct vm *vm, int fd, uint64_t *written)
{
	const struct guest_mem *m = &vm->mem;
	uint64_t off = 0, run = 0, run_at = 0;
	int pm = m->private_file || m->anon ? open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) : -1;
	bool want[CHUNK_PAGES];
	unsigned last = ~0u;
	int ret = 0;

	*written = 0;
	if (ftruncate(fd, (off_t)m->size) < 0) {
		ret = -errno;
		goto out;
	}
	while (off < m->size && !ret) {
		unsigned n = CHUNK_PAGES;

		if (run) { /* runs end at chunk boundaries: the next may jump */
			ret = write_all(fd, m->host + run_at, run, run_at);
			*written += run;
			run = 0;
			if (ret)
				break;
		}
		if (!m->private_file && m->fd >= 0) { /* a memfd: skip its holes */
			off_t d = lseek(m->fd, (off_t)off, SEEK_DATA);

			if (d < 0)
				break; /* ENXIO: only holes from here */
			off = (uint64_t)d & ~(uint64_t)(PAGE - 1);
		}
		progress(off, m->size, &last);
		if ((m->size - off) / PAGE < n)
			n = (unsigned)((m->size - off) / PAGE);
		if (!n)
			break;
		chunk_wanted(m, pm, off, n, want);
		for (unsigned i = 0; i < n && !ret; i++, off += PAGE) {
			if (want[i] && !page_zero(m->host + off)) {
				if (!run)
					run_at = off;
				run += PAGE;
				if (run < (64u << 20))
					continue;
			}
			if (run) {
				ret = write_all(fd, m->host + run_at, run, run_at);
				*written += run;
				run = 0;
			}
		}
	}
	if (run && !ret) {
		ret = write_all(fd, m->host + run_at, run, run_at);
		*written += run;
	}
	if (!ret)
		progress(m->size, m->size, &last);
out:
	if (pm >= 0)
		close(pm);
	return ret;
}

static bool bit(const uint64_t *b, uint64_t i)
{
	return b[i / 64] & (1ull << (i % 64));
}

/* A Diff's memory: the pages in @dirty, zero or not (a page the guest
 * cleared must overwrite its parent's), at their offsets; the rest holes. */
static int write_diff(const struct vm *vm, int fd, const uint64_t *dirty, uint64_t *written)
{
	const struct guest_mem *m = &vm->mem;
	uint64_t pages = m->size / PAGE, max = (64u << 20) / PAGE;
	int ret = 0;

	*written = 0;
	if (ftruncate(fd, (off_t)m->size) < 0)
		return -errno;
	for (uint64_t p = 0; p < pages && !ret;) {
		uint64_t n = 0;

		while (p + n < pages && n < max && bit(dirty, p + n))
			n++;
		if (!n) {
			p++;
			continue;
		}
		ret = write_all(fd, m->host + p * PAGE, n * PAGE, p * PAGE);
		*written += n * PAGE;
		p += n;
	}
	return ret;
}

/* Remove a snapshot folder: its own files, then the folder (which fails,
 * leaving it, if anything else is in it). */
static int remove_snapshot(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	/* The disks' copies (disks.c): "disk-..." */
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "disk-", 5))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) < 0 && errno != ENOENT) {
			int ret = -errno;

			closedir(d);
			return ret;
		}
	}
	if (d)
		closedir(d);
	for (unsigned i = 0; i < sizeof(snap_files) / sizeof(snap_files[0]); i++) {
		char *p = snap_path_in(dir, snap_files[i]);

		if (!p)
			return -ENOMEM;
		if (unlink(p) < 0 && errno != ENOENT) {
			free(p);
			return -errno;
		}
		free(p);
	}
	return rmdir(dir) < 0 && errno != ENOENT ? -errno : 0;
}

int snap_fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECTORY), ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* Write @n bytes as the new file @dir/@name, fsync'd. */
static int write_file(const char *dir, const char *name, const void *p, size_t n)
{
	char *path = snap_path_in(dir, name);
	int fd, ret;

	if (!path)
		return -ENOMEM;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	free(path);
	if (fd < 0)
		return -errno;
	ret = write_all(fd, p, n, 0);
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static json_t *manifest_new(const struct snap_vm *v, const char *parent, uint64_t mem_written,
			    size_t state_len, uint32_t state_crc, json_t *disks)
{
	const struct plan *p = v->plan;
	json_t *m, *devs = json_array(), *tree = snap_tree_to_json(p->root);
	char cpu[96], when[32];
	time_t t = time(NULL);
	struct tm tm;

	arch_cpu_id(cpu, sizeof(cpu));
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	for (unsigned i = 0; devs && i < v->n_insts; i++) {
		const struct cub_inst *in = v->insts[i];
		const struct cub_plugin *d = in->plugin->d;
		const struct cub_device_ops *o = d->ops;
		char ver[24];

		snprintf(ver, sizeof(ver), "%u.%u", SNAP_VER_MAJOR(o->state_version),
			 SNAP_VER_MINOR(o->state_version));
		json_array_append_new(devs, json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", in->pi->id,
						      "name", in->name, "plugin", d->name,
						      "plugin_version", d->version, "state_version",
						      ver));
	}
	if (!devs || !tree) {
		json_decref(devs);
		json_decref(tree);
		json_decref(disks);
		return NULL;
	}
	m = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s, s:s, s:s, s:i, s:I, "
		      "s:{s:s, s:I, s:I}, s:{s:s, s:I, s:I}, s:{s:s, s:s?, s:o}, s:o, s:o}",
		      "format", "cubicle-snapshot", "version", "1.0", "type",
		      parent ? "Diff" : "Full", "parent", parent, "arch",
		      arch_name, "cpu", cpu, "cubicle", PACKAGE_VERSION, "created", when, "vcpus",
		      (int)v->vm->n_vcpus, "memory_mib", (json_int_t)p->memory_mib, "memory",
		      "file", "memory", "bytes", (json_int_t)v->vm->mem.size, "written",
		      (json_int_t)mem_written, "state", "file", "state", "bytes",
		      (json_int_t)state_len, "crc32", (json_int_t)state_crc, "config", "source",
		      p->path, "dir", p->dir, "tree", tree, "devices", devs, "disks", disks);
	return m;
}

/* The absolute path @dir will have (its parent folder must exist). */
static char *abs_path(const char *dir)
{
	char *copy = strdup(dir), *slash = copy ? strrchr(copy, '/') : NULL, *real, *out = NULL;
	const char *name = slash ? slash + 1 : dir;

	if (!copy)
		return NULL;
	if (slash)
		*slash = '\0';
	real = realpath(slash ? (*copy ? copy : "/") : ".", NULL);
	if (real && asprintf(&out, "%s/%s", strcmp(real, "/") ? real : "", name) < 0)
		out = NULL;
	free(real);
	free(copy);
	return out;
}

int snap_create(const struct snap_vm *v, const char *dir, bool diff, struct snap_stats *st,
		char *err, size_t errlen)
{
	struct guest_mem *m = &v->vm->mem;
	uint64_t words = (m->size / PAGE + 63) / 64, *dirty = NULL;
	struct snap_w w;
	struct stat sb;
	char *tmp = NULL, *mpath = NULL, *js = NULL, *abs = NULL;
	json_t *man = NULL;
	void *disks = NULL;
	uint64_t t0 = snap_now_us(), t1;
	bool made = false, taken = false;
	int fd = -1, ret;

	memset(st, 0, sizeof(*st));
	memset(&w, 0, sizeof(w));
	if (!vm_paused(v->vm))
		return errf(err, errlen, -EINVAL, "the VM is running; pause it first");
	if (!*dir)
		return errf(err, errlen, -EINVAL, "no snapshot folder given");
	abs = abs_path(dir);
	if (!abs)
		return errf(err, errlen, -errno ? -errno : -ENOMEM, "%s: its folder: %s", dir,
			    strerror(errno ? errno : ENOMEM));
	if (diff && !m->dirty) {
		free(abs);
		return errf(err, errlen, -EINVAL,
			    "Diff snapshots need dirty-page tracking: machine.track_dirty_pages = true (Firecracker: track_dirty_pages)");
	}
	if (diff && !v->vm->snap_last) {
		free(abs);
		return errf(err, errlen, -EINVAL,
			    "a Diff snapshot needs a parent: take a Full one first (or restore or roll back to one)");
	}
	if (diff && !strcmp(abs, v->vm->snap_last)) {
		free(abs);
		return errf(err, errlen, -EINVAL,
			    "%s is the parent of this Diff snapshot: give it another folder", dir);
	}
	if (stat(dir, &sb) == 0) {
		char *mf = snap_path_in(dir, "manifest.json");
		bool ok = mf && S_ISDIR(sb.st_mode) && access(mf, F_OK) == 0;

		free(mf);
		if (!ok)
			return errf(err, errlen, -EEXIST,
				    "%s exists and is not a cubicle snapshot: not replacing it", dir);
	}
	ret = check_savable(v, err, errlen);
	if (ret) {
		free(abs);
		return ret;
	}
	/* What changed since the last snapshot (and, for a Full one, the logs
	 * start afresh); put back if this one fails. */
	if (m->dirty) {
		dirty = calloc(words, sizeof(*dirty));
		if (!dirty || (ret = vm_take_dirty(v->vm, dirty, err, errlen))) {
			ret = dirty ? ret : errf(err, errlen, -ENOMEM, "out of memory");
			free(dirty);
			free(abs);
			return ret;
		}
		taken = true;
	}
	ret = snap_w_begin(&w, arch_name);
	if (!ret)
		ret = save_devices(v, &w, err, errlen);
	if (!ret)
		ret = arch_snap_save(v->vm, &w, err, errlen);
	if (!ret && (ret = snap_w_end(&w)))
		errf(err, errlen, ret, "state: %s", strerror(-ret));
	if (ret)
		goto out;
	t1 = snap_now_us();
	st->us_state = t1 - t0;
	st->state_bytes = w.len;
	st->mem_bytes = v->vm->mem.size;
	if (asprintf(&tmp, "%s.tmp", dir) < 0 || !(mpath = snap_path_in(tmp, "memory"))) {
		tmp = NULL;
		ret = errf(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	/* A DIR.tmp left by a create that died part way. */
	ret = remove_snapshot(tmp);
	if (ret) {
		errf(err, errlen, ret, "%s: left from an earlier snapshot, cannot remove it: %s", tmp,
		     strerror(-ret));
		goto out;
	}
	if (mkdir(tmp, 0755) < 0) {
		ret = errf(err, errlen, -errno, "%s: %s%s", tmp, strerror(errno), confine_hint(errno));
		goto out;
	}
	made = true;
	fd = open(mpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 ||
	    (ret = diff ? write_diff(v->vm, fd, dirty, &st->mem_written)
			: write_memory(v->vm, fd, &st->mem_written)) ||
	    (fsync(fd) < 0 && (ret = -errno))) {
		ret = errf(err, errlen, ret ? ret : -errno, "%s: %s", mpath,
			   strerror(ret ? -ret : errno));
		goto out;
	}
	st->us_memory = snap_now_us() - t1;
	ret = write_file(tmp, "state", w.p, w.len);
	if (ret) {
		errf(err, errlen, ret, "%s/state: %s", tmp, strerror(-ret));
		goto out;
	}
	ret = snap_disks_save(v, tmp, &disks, err, errlen);
	if (ret)
		goto out;
	man = manifest_new(v, diff ? v->vm->snap_last : NULL, st->mem_written, w.len,
			   snap_crc32(w.p, w.len), disks);
	js = man ? json_dumps(man, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	if (!js) {
		ret = errf(err, errlen, -ENOMEM, "manifest: out of memory");
		goto out;
	}
	ret = write_file(tmp, "manifest.json", js, strlen(js));
	if (!ret)
		ret = snap_fsync_path(tmp);
	if (ret) {
		errf(err, errlen, ret, "%s/manifest.json: %s", tmp, strerror(-ret));
		goto out;
	}
	/* Into place: a new name, or swapped whole with the snapshot there. */
	if (rename(tmp, dir) < 0) {
		if ((errno != EEXIST && errno != ENOTEMPTY) ||
		    renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) < 0) {
			ret = errf(err, errlen, -errno, "renaming %s to %s: %s", tmp, dir,
				   strerror(errno));
			goto out;
		}
	}
	{
		char *parent = strdup(dir), *slash = parent ? strrchr(parent, '/') : NULL;

		if (parent)
			snap_fsync_path(slash ? (slash == parent ? "/" : (*slash = '\0', parent)) : ".");
		free(parent);
	}
	/* The next Diff's parent is this one; what held device buffers will
	 * still write goes into the next Diff. */
	free(v->vm->snap_last);
	v->vm->snap_last = abs;
	abs = NULL;
	taken = false;
	for (unsigned i = 0; i < v->n_insts; i++)
		if (v->insts[i]->virtio)
			virtio_dev_mark_held(v->insts[i]->virtio);
out:
	if (taken)
		mem_put_dirty(m, dirty);
	free(dirty);
	free(abs);
	if (fd >= 0)
		close(fd);
	if (made)
		remove_snapshot(tmp); /* on success: the old snapshot swapped out, if any */
	free(js);
	json_decref(man);
	free(mpath);
	free(tmp);
	snap_w_free(&w);
	st->us_total = snap_now_us() - t0;
	return ret;
}

int snap_release_memory(const struct snap_vm *v, const char *dir, char *err, size_t errlen)
{
	char *path = snap_path_in(dir, "memory");
	struct stat sb;
	int fd, ret;

	if (!path)
		return errf(err, errlen, -ENOMEM, "out of memory");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0 || (uint64_t)sb.st_size != v->vm->mem.size) {
		ret = errf(err, errlen, fd < 0 ? -errno : -EINVAL, "%s: %s", path,
			   fd < 0 ? strerror(errno) : "not this VM's size");
		if (fd >= 0)
			close(fd);
		free(path);
		return ret;
	}
	free(path);
	ret = mem_remap_file(&v->vm->mem, fd);
	return ret ? errf(err, errlen, ret, "%s/memory: mapping it: %s", dir, strerror(-ret)) : 0;
}
