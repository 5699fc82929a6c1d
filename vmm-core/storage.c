/* SPDX-License-Identifier: Apache-2.0 */
/* Storage backends for devices (h->storage): what backend.c does, with a
 * storage plugin's ops and info checked. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubicle/storage.h"
#include "devices.h"

/* One open storage backend. */
struct storage_inst {
	struct backend b;           /* first: backend.c allocates and frees it */
	struct cub_storage s;       /* what the device holds */
	struct cub_storage_ops ops; /* s.ops: the plugin's, cut to its ABI minor */
};

/*
 * Devices call a backend through a copy of its ops holding only the members
 * its ABI minor defines: a plugin built for 1.0 or 1.1 has a shorter table,
 * so snapshot and rollback (1.2) are read only from plugins built for 1.2 or
 * later, and are NULL (-EOPNOTSUPP for the caller) for older ones.
 */
static void ops_copy(struct cub_storage_ops *dst, const struct cub_plugin *d)
{
	size_t n = offsetof(struct cub_storage_ops, snapshot); /* 1.0, 1.1 */

	if (d->abi_minor >= 2) /* a minor that appends ops adds its own step here */
		n = offsetof(struct cub_storage_ops, rollback) + sizeof(dst->rollback);
	memset(dst, 0, sizeof(*dst));
	memcpy(dst, d->ops, n);
}

/* Read what a backend says about itself and check it before a device
 * relies on it. */
static int si_info(struct backend *b, char *why, size_t len)
{
	struct storage_inst *si = (struct storage_inst *)b;
	const struct cub_storage_info *i = &si->s.info;

	si->s.priv = b->bin.priv;
	si->s.ops->info(si->s.priv, &si->s.info);
	if (i->size % 512) {
		snprintf(why, len, "backend reports %llu bytes, not a multiple of 512",
			 (unsigned long long)i->size);
		return -EINVAL;
	}
	if (i->block_size < 512 || i->block_size > 65536 ||
	    (i->block_size & (i->block_size - 1))) {
		snprintf(why, len, "backend reports block size %u; expected a power of two 512..65536",
			 i->block_size);
		return -EINVAL;
	}
	return 0;
}

static int si_init(struct backend *b, const struct cub_inst *in)
{
	struct storage_inst *si = (struct storage_inst *)b;

	(void)in;
	ops_copy(&si->ops, b->bin.plugin->d);
	si->s.ops = &si->ops;
	si->s.name = b->bin.name;
	return 0;
}

static int si_open(struct backend *b, const void *arg)
{
	struct storage_inst *si = (struct storage_inst *)b;

	return si->s.ops->open(&b->bin, &devices_host, b->bin.cfg, *(const bool *)arg,
			       &b->bin.priv);
}

static void si_release(struct backend *b)
{
	struct storage_inst *si = (struct storage_inst *)b;

	if (b->opened)
		si->s.ops->close(b->bin.priv);
}

static const struct backend_kind storage_kind = {
	.kind = CUB_KIND_STORAGE,
	.noun = "storage",
	.size = sizeof(struct storage_inst),
	.init = si_init,
	.open = si_open,
	.info = si_info,
	.release = si_release,
};

static int storage_open(struct cub_inst *in, const char *key, bool ro, struct cub_storage **out)
{
	struct storage_inst *si;
	struct backend *b;
	int ret;

	*out = NULL;
	ret = backend_open(in, key, &storage_kind, &in->storages, &ro, &b);
	if (ret)
		return ret;
	si = (struct storage_inst *)b;
	si->s.info.read_only |= ro;
	log_msg(CUB_LOG_DEBUG, b->bin.name, "%llu bytes, block %u%s%s%s",
		(unsigned long long)si->s.info.size, si->s.info.block_size,
		si->s.info.read_only ? ", read-only" : "",
		si->s.info.can_discard ? ", discard" : "",
		si->s.info.can_write_zeroes ? ", write-zeroes" : "");
	*out = &si->s;
	return 0;
}

static void storage_close(struct cub_inst *in, struct cub_storage *s)
{
	if (s)
		backend_close(&in->storages, (struct backend *)((char *)s -
								 offsetof(struct storage_inst, s)));
}

void storage_close_all(struct cub_inst *in)
{
	backend_close_all(&in->storages);
}

const struct cub_storage_host devices_storage_host = {
	.size = sizeof(struct cub_storage_host),
	.open = storage_open,
	.close = storage_close,
	.write_zeroes = storage_write_zeroes,
};
