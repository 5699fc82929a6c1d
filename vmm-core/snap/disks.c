/* SPDX-License-Identifier: Apache-2.0 */
/* The writable disks of a snapshot (snapshot.h): each one's copy in the
 * snapshot folder, made by its storage backend's snapshot op; a restore's
 * own copy of it; rollback through the backend's rollback op. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubicle/storage.h"
#include "devices.h"
#include "fileclone.h"
#include "log.h"
#include "loader.h"
#include "plan.h"
#include "snap/internal.h"
#include "snap/snapshot.h"

/*
 * A disk's copy is "disk-ID" in the folder ("disk-ID-KEY" for a backend
 * group other than "backend"); the manifest's "disks" lists them:
 *   { "device": ID, "key": KEY, "plugin": NAME, "file": FILE, "bytes": N }
 * A file name read back must begin "disk-" and hold no '/': a manifest
 * never points outside its folder.
 */

static const char *dev_id(const struct cub_inst *in)
{
	return in->pi ? in->pi->id : in->name;
}

/* Device IDs are the config's names; anything else in a file name is
 * replaced, so a name never leaves the folder. */
static char *disk_file(const char *id, const char *key)
{
	char *f;

	if (asprintf(&f, strcmp(key, "backend") ? "disk-%s-%s" : "disk-%s", id, key) < 0)
		return NULL;
	for (char *c = f; *c; c++)
		if (*c == '/' || *c == '\\' || (unsigned char)*c < 0x20)
			*c = '_';
	return f;
}

int snap_disks_check(const struct snap_vm *v, char *err, size_t errlen)
{
	for (unsigned i = 0; i < v->n_insts; i++) {
		const struct cub_storage *s = NULL;
		struct cub_inst *bin;
		const char *key;

		while ((s = storage_next(v->insts[i], s, &key, &bin)))
			if (!s->info.read_only && !s->ops->snapshot)
				return errf(err, errlen, -ENOTSUP,
					    "%s: %s: its disk %s is writable and its plugin (%s %s) has no snapshot op; make it read_only or use raw or reflink",
					    v->insts[i]->pi->where, v->insts[i]->name, bin->name,
					    bin->plugin->d->name, bin->plugin->d->version);
	}
	return 0;
}

int snap_disks_save(const struct snap_vm *v, const char *dir, void **out, char *err,
		    size_t errlen)
{
	json_t *list = json_array();

	*out = NULL;
	if (!list)
		return errf(err, errlen, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < v->n_insts; i++) {
		const struct cub_storage *s = NULL;
		struct cub_inst *bin;
		const char *key;

		while ((s = storage_next(v->insts[i], s, &key, &bin))) {
			char *file, *path;
			int ret;

			if (s->info.read_only)
				continue;
			file = disk_file(dev_id(v->insts[i]), key);
			path = file ? snap_path_in(dir, file) : NULL;
			if (!path) {
				free(file);
				json_decref(list);
				return errf(err, errlen, -ENOMEM, "out of memory");
			}
			bin->err[0] = '\0';
			ret = s->ops->snapshot(s->priv, path);
			free(path);
			if (ret) {
				errf(err, errlen, ret, "%s: snapshot of its disk: %s", bin->name,
				     bin->err[0] ? bin->err : strerror(-ret));
				free(file);
				json_decref(list);
				return ret;
			}
			json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:s, s:I}", "device",
							      dev_id(v->insts[i]), "key", key,
							      "plugin", bin->plugin->d->name,
							      "file", file, "bytes",
							      (json_int_t)s->info.size));
			free(file);
		}
	}
	*out = list;
	return 0;
}

/* The manifest's disk @i: its fields checked; -EINVAL with err. */
static int disk_entry(const struct snap_image *im, size_t i, const char **dev, const char **key,
		      const char **file, uint64_t *bytes, char *err, size_t errlen)
{
	const json_t *d = json_array_get(json_object_get(im->manifest, "disks"), i);
	json_int_t n = json_integer_value(json_object_get(d, "bytes"));

	*dev = json_string_value(json_object_get(d, "device"));
	*key = json_string_value(json_object_get(d, "key"));
	*file = json_string_value(json_object_get(d, "file"));
	if (!*dev || !*key || !*file || strncmp(*file, "disk-", 5) || strchr(*file, '/') ||
	    n <= 0 || n % 512)
		return errf(err, errlen, -EINVAL,
			    "%s/manifest.json: disks[%zu]: 'device', 'key', 'file' (disk-...) or 'bytes' is missing or wrong",
			    im->dir, i);
	*bytes = (uint64_t)n;
	return 0;
}

/* Check the copy @file of @bytes in the snapshot: its path (malloc'd). */
static int disk_copy(const struct snap_image *im, const char *file, uint64_t bytes, char **path,
		     char *err, size_t errlen)
{
	struct stat sb;

	*path = snap_path_in(im->dir, file);
	if (!*path)
		return errf(err, errlen, -ENOMEM, "out of memory");
	if (stat(*path, &sb) < 0)
		return errf(err, errlen, -errno, "%s: %s", *path, strerror(errno));
	if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != bytes)
		return errf(err, errlen, -EINVAL,
			    "%s: %lld bytes; the manifest says %" PRIu64 " (truncated or replaced)",
			    *path, (long long)sb.st_size, bytes);
	return 0;
}

size_t snap_disks_count(const struct snap_image *im)
{
	return json_array_size(json_object_get(im->manifest, "disks"));
}

/* The file a planned backend keeps its disk in: its `path` parameter. */
static const char *backend_path(const struct plan_inst *bi)
{
	const struct plugin *pl = bi->plugin;

	for (unsigned i = 0; i < pl->d->n_params; i++)
		if (!strcmp(pl->params[i].name, "path") && pl->params[i].type == CUB_P_PATH)
			return *(const char *const *)(const void *)((const char *)bi->cfg +
								    pl->params[i].offset);
	return NULL;
}

int snap_disks_restore(const struct snap_image *im, const struct plan *p,
		       struct snap_disks_made *made, char *err, size_t errlen)
{
	size_t n = snap_disks_count(im);

	memset(made, 0, sizeof(*made));
	if (!n)
		return 0;
	made->paths = calloc(n, sizeof(*made->paths));
	if (!made->paths)
		return errf(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const char *dev, *key, *file, *dst = NULL;
		const struct plan_inst *pi = NULL;
		const struct plan_backend *pb;
		struct fc_opts opts = { .fallback = FC_FALLBACK_COPY };
		struct fc_result res;
		char *src = NULL, why[768];
		uint64_t bytes;
		int ret;

		ret = disk_entry(im, i, &dev, &key, &file, &bytes, err, errlen);
		if (!ret)
			ret = disk_copy(im, file, bytes, &src, err, errlen);
		for (unsigned d = 0; !ret && d < p->n_devs && !pi; d++)
			if (!strcmp(p->devs[d].id, dev))
				pi = &p->devs[d];
		pb = pi ? plan_backend(pi, key) : NULL;
		if (!ret && !pb)
			ret = errf(err, errlen, -EINVAL,
				   "%s: its disk %s (device %s, group %s) is not in the VM's config",
				   im->dir, file, dev, key);
		if (!ret && !(dst = backend_path(&pb->inst)))
			ret = errf(err, errlen, -EINVAL,
				   "%s: device %s's %s (%s) has no path parameter to restore its disk to",
				   im->dir, dev, key, pb->inst.plugin->d->name);
		if (!ret && !access(dst, F_OK))
			ret = errf(err, errlen, -EEXIST,
				   "%s: %s exists: a restore gives device %s its own copy of the snapshot's disk in a new file; name one with --set devices.%s.%s.path=FILE (API: drive_overrides), or remove %s",
				   pi->where, dst, dev, dev, key, dst);
		if (!ret) {
			ret = fc_clone_path(src, dst, &opts, &res, why, sizeof(why));
			if (ret)
				errf(err, errlen, ret, "device %s: its disk: %s", dev, why);
		}
		free(src);
		if (ret)
			return ret;
		made->paths[made->n++] = dst;
		if (res.copied)
			log_info("%s: copied the snapshot's disk to %s (no reflink here: %s)", dev,
				 dst, res.why);
	}
	return 0;
}

void snap_disks_undo(struct snap_disks_made *made)
{
	for (size_t i = 0; i < made->n; i++)
		unlink(made->paths[i]);
	made->n = 0;
}

void snap_disks_free(struct snap_disks_made *made)
{
	free(made->paths);
	memset(made, 0, sizeof(*made));
}

/* The open writable backend of device @dev, group @key, in @v. */
static const struct cub_storage *find_disk(const struct snap_vm *v, const char *dev,
					   const char *key, struct cub_inst **bin)
{
	for (unsigned i = 0; i < v->n_insts; i++) {
		const struct cub_storage *s = NULL;
		const char *k;

		if (strcmp(dev_id(v->insts[i]), dev))
			continue;
		while ((s = storage_next(v->insts[i], s, &k, bin)))
			if (!strcmp(k, key) && !s->info.read_only)
				return s;
	}
	return NULL;
}

int snap_disks_rollback(const struct snap_vm *v, const struct snap_image *im, char *err,
			size_t errlen)
{
	size_t n = snap_disks_count(im), writable = 0;

	/* The same writable disks, each with a rollback op and a copy of the
	 * right size: checked before any changes. */
	for (unsigned i = 0; i < v->n_insts; i++) {
		const struct cub_storage *s = NULL;
		struct cub_inst *bin;
		const char *key;

		while ((s = storage_next(v->insts[i], s, &key, &bin)))
			writable += !s->info.read_only;
	}
	if (writable != n)
		return errf(err, errlen, -EINVAL, "%s: %zu writable disk%s; this VM has %zu",
			    im->dir, n, n == 1 ? "" : "s", writable);
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			const char *dev, *key, *file;
			const struct cub_storage *s;
			struct cub_inst *bin;
			char *src = NULL;
			uint64_t bytes;
			int ret;

			ret = disk_entry(im, i, &dev, &key, &file, &bytes, err, errlen);
			if (!ret)
				ret = disk_copy(im, file, bytes, &src, err, errlen);
			s = ret ? NULL : find_disk(v, dev, key, &bin);
			if (!ret && !s)
				ret = errf(err, errlen, -EINVAL,
					   "%s: its disk %s is device %s's, which this VM does not have writable",
					   im->dir, file, dev);
			else if (!ret && !s->ops->rollback)
				ret = errf(err, errlen, -ENOTSUP,
					   "%s: its plugin (%s) has no rollback op", bin->name,
					   bin->plugin->d->name);
			else if (!ret && s->info.size != bytes)
				ret = errf(err, errlen, -EINVAL,
					   "%s: %" PRIu64 " bytes; %s is %" PRIu64, src, bytes,
					   bin->name, s->info.size);
			if (!ret && pass) {
				bin->err[0] = '\0';
				ret = s->ops->rollback(s->priv, src);
				if (ret)
					errf(err, errlen, ret, "%s: rollback of its disk: %s",
					     bin->name, bin->err[0] ? bin->err : strerror(-ret));
			}
			free(src);
			if (ret)
				return ret;
		}
	return 0;
}
