/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot folders, the reading half (snapshot.h): open and check one, plan
 * and load it into a VM, roll a VM back in place; and what both halves
 * share (internal.h). */
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

#define MANIFEST_MAX (16u << 20)

/* What create.c and this file share (internal.h). */
uint64_t snap_now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

/* The device ops of an instance whose plugin can save its state, or NULL. */
const struct cub_device_ops *snap_state_ops(const struct cub_inst *in)
{
	const struct cub_plugin *d = in->plugin->d;
	const struct cub_device_ops *o = d->ops;

	if (d->kind != CUB_KIND_DEVICE || d->abi_minor < 5 || !o->save || !o->load)
		return NULL;
	return o;
}

char *snap_path_in(const char *dir, const char *name)
{
	char *p;

	return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

/* The whole of a regular file of at most @max bytes, NUL-terminated. A
 * snapshot's own files are never links: one there (left by a VMM that
 * wrote the folder and was taken over) is refused, not followed to a host
 * file whose size or first word an error would then tell. */
static int read_small(const char *path, size_t max, void **out, size_t *len)
{
	struct stat sb;
	uint8_t *b;
	ssize_t n;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), ret;

	*out = NULL;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > max) {
		ret = fstat(fd, &sb) < 0 ? -errno : !S_ISREG(sb.st_mode) ? -EINVAL : -EFBIG;
		close(fd);
		return ret;
	}
	b = malloc((size_t)sb.st_size + 1);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)sb.st_size) {
		n = read(fd, b + got, (size_t)sb.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	b[got] = 0;
	*out = b;
	*len = got;
	return 0;
}

static json_int_t jint(const json_t *o, const char *a, const char *b)
{
	const json_t *v = json_object_get(o, a);

	if (b)
		v = json_object_get(v, b);
	return json_is_integer(v) ? json_integer_value(v) : -1;
}

static int open_at(struct snap_image *im, const char *dir, unsigned depth, char *err,
		   size_t errlen);

/* A Diff: its parent chain down to a Full snapshot. RAM is the Full's
 * memory, then each Diff's pages over it, oldest first. */
static int open_parents(struct snap_image *im, unsigned depth, char *err, size_t errlen)
{
	const char *type = json_string_value(json_object_get(im->manifest, "type"));
	const char *parent = json_string_value(json_object_get(im->manifest, "parent"));
	struct snap_image p;
	int *fds, ret;

	if (!type || !strcmp(type, "Full"))
		return 0;
	if (strcmp(type, "Diff") || !parent || parent[0] != '/')
		return errf(err, errlen, -EINVAL,
			    "%s/manifest.json: 'type' is neither Full nor a Diff with an absolute 'parent'",
			    im->dir);
	if (depth >= SNAP_DIFF_DEPTH_MAX)
		return errf(err, errlen, -ELOOP, "%s: more than %d Diff snapshots over one Full",
			    im->dir, SNAP_DIFF_DEPTH_MAX);
	ret = open_at(&p, parent, depth + 1, err, errlen);
	if (!ret && (p.mem_bytes != im->mem_bytes || p.vcpus != im->vcpus))
		ret = errf(err, errlen, -EINVAL, "%s: its parent %s is of another machine", im->dir,
			   parent);
	fds = ret ? NULL : realloc(p.diffs, (p.n_diffs + 1) * sizeof(*fds));
	if (!ret && !fds)
		ret = errf(err, errlen, -ENOMEM, "out of memory");
	if (ret) {
		char why[512];

		snprintf(why, sizeof(why), "%s", err);
		errf(err, errlen, ret, "%s is a Diff: %s", im->dir, why);
		snap_close(&p);
		return ret;
	}
	fds[p.n_diffs] = im->mem_fd; /* this Diff's pages go last */
	im->diffs = fds;
	im->n_diffs = p.n_diffs + 1;
	im->mem_fd = snap_take_mem_fd(&p);
	p.diffs = NULL;
	p.n_diffs = 0;
	snap_close(&p);
	return 0;
}

int snap_apply_diffs(const struct snap_image *im, struct guest_mem *m, char *err, size_t errlen)
{
	for (unsigned i = 0; i < im->n_diffs; i++) {
		off_t off = 0, d, h;

		while ((d = lseek(im->diffs[i], off, SEEK_DATA)) >= 0 && (uint64_t)d < m->size) {
			h = lseek(im->diffs[i], d, SEEK_HOLE);
			if (h < 0 || (uint64_t)h > m->size)
				h = (off_t)m->size;
			for (off = d; off < h;) {
				ssize_t n = pread(im->diffs[i], m->host + off, (size_t)(h - off), off);

				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0)
					return errf(err, errlen, n < 0 ? -errno : -EIO,
						    "%s: reading a Diff's memory: %s", im->dir,
						    n < 0 ? strerror(errno) : "short file");
				off += n;
			}
		}
	}
	return 0;
}

int snap_open(struct snap_image *im, const char *dir, char *err, size_t errlen)
{
	return open_at(im, dir, 0, err, errlen);
}

static int open_at(struct snap_image *im, const char *dir, unsigned depth, char *err,
		   size_t errlen)
{
	json_error_t je;
	json_t *m;
	const char *fmt, *ver, *arch, *cpu, *mfile;
	char here[96], *path = NULL;
	size_t len = 0;
	struct stat sb;
	json_int_t state_bytes, state_crc, vcpus, mib, mem_bytes;
	int ret;

	memset(im, 0, sizeof(*im));
	im->mem_fd = -1;
	im->dir = strdup(dir);
	if (!im->dir || !(path = snap_path_in(dir, "manifest.json")))
		return errf(err, errlen, -ENOMEM, "out of memory");
	if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
		ret = errf(err, errlen, -ENOENT, "%s: %s", dir,
			   stat(dir, &sb) < 0 ? strerror(errno) : "not a folder (a snapshot is one)");
		free(path);
		return ret;
	}
	ret = read_small(path, MANIFEST_MAX, &im->state_buf, &len);
	if (ret) {
		ret = errf(err, errlen, ret, "%s: %s%s", path, strerror(-ret),
			   ret == -ENOENT ? " (not a cubicle snapshot, or an unfinished one)" : confine_hint(ret));
		free(path);
		return ret;
	}
	m = json_loadb(im->state_buf, len, JSON_REJECT_DUPLICATES, &je);
	free(im->state_buf);
	im->state_buf = NULL;
	if (!m) {
		ret = errf(err, errlen, -EINVAL, "%s:%d: %s", path, je.line, je.text);
		free(path);
		return ret;
	}
	im->manifest = m;
	fmt = json_string_value(json_object_get(m, "format"));
	ver = json_string_value(json_object_get(m, "version"));
	arch = json_string_value(json_object_get(m, "arch"));
	cpu = json_string_value(json_object_get(m, "cpu"));
	state_bytes = jint(m, "state", "bytes");
	state_crc = jint(m, "state", "crc32");
	vcpus = jint(m, "vcpus", NULL);
	mib = jint(m, "memory_mib", NULL);
	mem_bytes = jint(m, "memory", "bytes");
	arch_cpu_id(here, sizeof(here));
	if (!fmt || strcmp(fmt, "cubicle-snapshot"))
		ret = errf(err, errlen, -EINVAL, "%s: 'format' is not \"cubicle-snapshot\"", path);
	else if (!ver || strncmp(ver, "1.", 2))
		ret = errf(err, errlen, -EINVAL,
			   "%s: snapshot format version %s; this cubicle reads 1.x", path,
			   ver ? ver : "(none)");
	else if (!arch || strcmp(arch, arch_name))
		ret = errf(err, errlen, -EINVAL, "%s: made on %s; this cubicle runs %s guests", path,
			   arch ? arch : "(no arch)", arch_name);
	else if (!cpu || strcmp(cpu, here))
		ret = errf(err, errlen, -EINVAL, "%s: made on a %s CPU; this host has a %s", path,
			   cpu ? cpu : "(unnamed)", here);
	else if (vcpus < 1 || vcpus > PLAN_MAX_VCPUS || mib < 1 || mib > (1 << 24) ||
		 mem_bytes != mib << 20 || state_bytes < 0 || state_bytes > SNAP_STATE_MAX ||
		 state_crc < 0 || state_crc > UINT32_MAX)
		ret = errf(err, errlen, -EINVAL,
			   "%s: 'vcpus', 'memory_mib', 'memory.bytes' or 'state' is missing or out of range",
			   path);
	free(path);
	if (ret)
		return ret;
	im->vcpus = (unsigned)vcpus;
	im->memory_mib = (uint64_t)mib;
	im->mem_bytes = (uint64_t)mem_bytes;
	path = snap_path_in(dir, "state");
	if (!path)
		return errf(err, errlen, -ENOMEM, "out of memory");
	ret = read_small(path, SNAP_STATE_MAX, &im->state_buf, &len);
	if (ret)
		ret = errf(err, errlen, ret, "%s: %s", path, strerror(-ret));
	else if ((json_int_t)len != state_bytes)
		ret = errf(err, errlen, -EINVAL, "%s: %zu bytes; the manifest says %" JSON_INTEGER_FORMAT
			   " (truncated or replaced)", path, len, state_bytes);
	else if (snap_crc32(im->state_buf, len) != (uint32_t)state_crc)
		ret = errf(err, errlen, -EINVAL, "%s: checksum mismatch (the file is corrupt)", path);
	else if ((ret = snap_r_parse(&im->r, im->state_buf, len, arch_name, err, errlen))) {
		char why[512];

		snprintf(why, sizeof(why), "%s", err);
		errf(err, errlen, ret, "%s: %s", path, why);
	}
	free(path);
	if (ret)
		return ret;
	mfile = json_string_value(json_object_get(json_object_get(m, "memory"), "file"));
	if (mfile && strcmp(mfile, "memory") && strcmp(mfile, "memory.zst"))
		return errf(err, errlen, -EINVAL,
			    "%s/manifest.json: 'memory.file' is \"%s\"; expected \"memory\" or \"memory.zst\"",
			    dir, mfile);
	path = snap_path_in(dir, mfile ? mfile : "memory");
	if (!path)
		return errf(err, errlen, -ENOMEM, "out of memory");
	if (mfile && !strcmp(mfile, "memory.zst")) {
		/* Decompressed here, into a memfd mapped like a memory file. */
		ret = snap_zst_memfd(path, im->mem_bytes, 0, &im->mem_fd, err, errlen);
		free(path);
		return ret ? ret : open_parents(im, depth, err, errlen);
	}
	im->mem_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW); /* (as read_small) */
	if (im->mem_fd < 0)
		ret = errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
	else if (fstat(im->mem_fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
		 (uint64_t)sb.st_size != im->mem_bytes)
		ret = errf(err, errlen, -EINVAL,
			   "%s: %lld bytes; the manifest says %" PRIu64 " (truncated or replaced)", path,
			   (long long)sb.st_size, im->mem_bytes);
	free(path);
	return ret ? ret : open_parents(im, depth, err, errlen);
}

int snap_take_mem_fd(struct snap_image *im)
{
	int fd = im->mem_fd;

	im->mem_fd = -1;
	return fd;
}

int snap_plan(struct snap_image *im, struct plan *p, const struct registry *reg,
	      char *const *sets, unsigned n_sets, char *err, size_t errlen)
{
	const json_t *cfg = json_object_get(im->manifest, "config");
	const char *dir = json_string_value(json_object_get(cfg, "dir"));
	/* In the plan's arena: the plan and its messages keep pointing at it. */
	char *where = arena_printf(&p->ar, "%s/manifest.json", im->dir);
	struct cnode *root;
	int ret;

	if (!where)
		return errf(err, errlen, -ENOMEM, "out of memory");
	root = snap_tree_from_json(&p->ar, json_object_get(cfg, "tree"), where, err, errlen);
	if (!root)
		return -EINVAL;
	for (unsigned i = 0; i < n_sets; i++) {
		ret = config_apply_set(&p->ar, root, sets[i], err, errlen);
		if (ret)
			return ret;
	}
	p->restoring = true; /* the kernel and initrd are not read again */
	ret = plan_build(p, root, where, dir, reg, err, errlen);
	if (!ret && (p->vcpus != im->vcpus || p->memory_mib != im->memory_mib))
		ret = errf(err, errlen, -EINVAL,
			   "%s: the config says %u vCPUs and %" PRIu64 " MiB; the snapshot has %u and %" PRIu64,
			   where, p->vcpus, p->memory_mib, im->vcpus, im->memory_mib);
	return ret;
}

int snap_load_state(const struct snap_vm *v, const struct snap_image *im, char *err,
		    size_t errlen)
{
	unsigned n_dev = 0;
	int ret;

	for (unsigned i = 0; i < im->r.n; i++)
		n_dev += im->r.secs[i].kind == SNAP_K_DEVICE && im->r.secs[i].name[0] != '@';
	if (n_dev != v->n_insts)
		return errf(err, errlen, -EINVAL, "%s/state: %u devices; this VM has %u", im->dir,
			    n_dev, v->n_insts);
	/* Devices first: the lines they drive are then overwritten by the
	 * irqchip's saved state. */
	for (unsigned i = 0; i < v->n_insts; i++) {
		struct cub_inst *in = v->insts[i];
		const struct cub_plugin *d = in->plugin->d;
		const struct cub_device_ops *o = snap_state_ops(in);
		const struct snap_sec *s = snap_r_find(&im->r, SNAP_K_DEVICE, d->name, i);

		if (!o)
			return errf(err, errlen, -ENOTSUP, "%s: its plugin (%s %s) cannot load state",
				    in->name, d->name, d->version);
		if (!s)
			return errf(err, errlen, -EINVAL, "%s/state: no state for device %u (%s)",
				    im->dir, i, in->name);
		if (SNAP_VER_MAJOR(s->ver) != SNAP_VER_MAJOR(o->state_version))
			return errf(err, errlen, -EINVAL,
				    "%s: the snapshot holds state version %u.%u; plugin %s %s reads %u.x",
				    in->name, SNAP_VER_MAJOR(s->ver), SNAP_VER_MINOR(s->ver), d->name,
				    d->version, SNAP_VER_MAJOR(o->state_version));
		if (in->virtio && (ret = virtio_dev_load(in->virtio, &im->r, i, err, errlen)))
			return ret;
		in->err[0] = '\0';
		ret = o->load(in->priv, s->data, s->len, SNAP_VER_MINOR(s->ver));
		if (ret)
			return errf(err, errlen, ret, "%s/state: %s: %s", im->dir, in->name,
				    in->err[0] ? in->err : strerror(-ret));
	}
	ret = arch_snap_load(v->vm, &im->r, err, errlen);
	if (ret) {
		char why[512];

		snprintf(why, sizeof(why), "%s", err);
		return errf(err, errlen, ret, "%s/state: %s", im->dir, why);
	}
	/* RAM is the snapshot's now: a Diff made next is over it, and the
	 * dirty logs start afresh. */
	free(v->vm->snap_last);
	v->vm->snap_last = realpath(im->dir, NULL);
	if (v->vm->mem.dirty) {
		uint64_t *scratch = calloc((v->vm->mem.size / PAGE + 63) / 64, sizeof(uint64_t));

		if (!scratch || vm_take_dirty(v->vm, scratch, err, errlen)) {
			free(scratch);
			return errf(err, errlen, -ENOMEM, "%s: starting the dirty logs afresh failed",
				    im->dir);
		}
		free(scratch);
	}
	/* Queues start once the vCPUs and the irqchip are back: a device that
	 * finds work at once interrupts a LAPIC that is already restored. */
	for (unsigned i = 0; i < v->n_insts; i++)
		if (v->insts[i]->virtio)
			virtio_dev_resume_loaded(v->insts[i]->virtio);
	return 0;
}

void snap_close(struct snap_image *im)
{
	if (im->mem_fd >= 0)
		close(im->mem_fd);
	for (unsigned i = 0; i < im->n_diffs; i++)
		close(im->diffs[i]);
	free(im->diffs);
	snap_r_free(&im->r);
	free(im->state_buf);
	json_decref(im->manifest);
	free(im->dir);
	memset(im, 0, sizeof(*im));
	im->mem_fd = -1;
}

/* Is @im a snapshot of the VM @v: the same vCPUs, RAM and devices? */
static int same_machine(const struct snap_vm *v, const struct snap_image *im, char *err,
			size_t errlen)
{
	const json_t *devs = json_object_get(im->manifest, "devices");

	if (im->vcpus != v->vm->n_vcpus || im->mem_bytes != v->vm->mem.size)
		return errf(err, errlen, -EINVAL,
			    "%s: a VM of %u vCPUs and %" PRIu64 " MiB; this one has %u and %" PRIu64,
			    im->dir, im->vcpus, im->memory_mib, v->vm->n_vcpus, v->vm->mem.size >> 20);
	if (json_array_size(devs) != v->n_insts)
		return errf(err, errlen, -EINVAL, "%s: %zu devices; this VM has %u", im->dir,
			    json_array_size(devs), v->n_insts);
	for (unsigned i = 0; i < v->n_insts; i++) {
		const json_t *d = json_array_get(devs, i);
		const char *name = json_string_value(json_object_get(d, "name"));

		if (!name || strcmp(name, v->insts[i]->name))
			return errf(err, errlen, -EINVAL, "%s: device %u is %s; this VM's is %s",
				    im->dir, i, name ? name : "(unnamed)", v->insts[i]->name);
	}
	return 0;
}

int snap_rollback(const struct snap_vm *v, const char *dir, struct snap_stats *st, char *err,
		  size_t errlen)
{
	struct snap_image im;
	uint64_t t0 = snap_now_us();
	int ret;

	memset(st, 0, sizeof(*st));
	if (!vm_paused(v->vm))
		return errf(err, errlen, -EINVAL, "the VM is running; pause it first");
	ret = snap_open(&im, dir, err, errlen);
	if (!ret)
		ret = same_machine(v, &im, err, errlen);
	/* Disks first: their checks come before anything changes. */
	if (!ret)
		ret = snap_disks_rollback(v, &im, err, errlen);
	if (!ret) {
		ret = mem_remap_file(&v->vm->mem, snap_take_mem_fd(&im));
		if (ret)
			errf(err, errlen, ret, "%s/memory: mapping it: %s", dir, strerror(-ret));
	}
	if (!ret)
		ret = snap_apply_diffs(&im, &v->vm->mem, err, errlen);
	if (!ret)
		ret = snap_load_state(v, &im, err, errlen);
	st->mem_bytes = im.mem_bytes;
	st->state_bytes = im.r.n ? (uint64_t)json_integer_value(json_object_get(
					   json_object_get(im.manifest, "state"), "bytes"))
				 : 0;
	snap_close(&im);
	st->us_total = snap_now_us() - t0;
	return ret;
}
