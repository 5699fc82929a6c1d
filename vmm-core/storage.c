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

/*
 * One open storage backend. The device calls counting wrappers (s.ops is
 * wrap, s.priv this record) which call the plugin's ops with its priv: the
 * counts are GET /metrics' per-device I/O.
 */
struct storage_inst {
	struct backend b;            /* first: backend.c allocates and frees it */
	struct cub_storage s;        /* what the device holds */
	struct cub_storage_ops ops;  /* the plugin's, cut to its ABI minor */
	struct cub_storage_ops wrap; /* s.ops: ops' non-NULL members, counted */
	struct storage_counters n;   /* relaxed atomics: any I/O thread adds */
};

static void add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static uint64_t iov_bytes(const struct iovec *iov, int iovcnt)
{
	uint64_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* Count one op with its result: bytes (when @bytes) or an error. */
static int64_t counted(struct storage_inst *si, int64_t r, uint64_t *ops, uint64_t *bytes)
{
	add(ops, 1);
	if (r < 0)
		add(&si->n.errors, 1);
	else if (bytes)
		add(bytes, (uint64_t)r);
	return r;
}

static int64_t w_readv(void *priv, uint64_t off, const struct iovec *iov, int iovcnt)
{
	struct storage_inst *si = priv;

	return counted(si, si->ops.readv(si->b.bin.priv, off, iov, iovcnt), &si->n.reads,
		       &si->n.read_bytes);
}

static int64_t w_writev(void *priv, uint64_t off, const struct iovec *iov, int iovcnt)
{
	struct storage_inst *si = priv;

	return counted(si, si->ops.writev(si->b.bin.priv, off, iov, iovcnt), &si->n.writes,
		       &si->n.write_bytes);
}

static int w_flush(void *priv)
{
	struct storage_inst *si = priv;

	return (int)counted(si, si->ops.flush(si->b.bin.priv), &si->n.flushes, NULL);
}

static int w_discard(void *priv, uint64_t off, uint64_t len)
{
	struct storage_inst *si = priv;

	return (int)counted(si, si->ops.discard(si->b.bin.priv, off, len), &si->n.discards, NULL);
}

static int w_write_zeroes(void *priv, uint64_t off, uint64_t len, bool unmap)
{
	struct storage_inst *si = priv;

	return (int)counted(si, si->ops.write_zeroes(si->b.bin.priv, off, len, unmap),
			    &si->n.write_zeroes, NULL);
}

/* Asynchronous requests are counted when submitted (bytes asked for). */
static int w_submit(void *priv, struct cub_storage_req *r)
{
	struct storage_inst *si = priv;

	switch (r->op) {
	case CUB_SREQ_READ:
		add(&si->n.reads, 1);
		add(&si->n.read_bytes, iov_bytes(r->iov, r->iovcnt));
		break;
	case CUB_SREQ_WRITE:
		add(&si->n.writes, 1);
		add(&si->n.write_bytes, iov_bytes(r->iov, r->iovcnt));
		break;
	case CUB_SREQ_FLUSH:
		add(&si->n.flushes, 1);
		break;
	case CUB_SREQ_DISCARD:
		add(&si->n.discards, 1);
		break;
	case CUB_SREQ_WRITE_ZEROES:
		add(&si->n.write_zeroes, 1);
		break;
	}
	return si->ops.submit(si->b.bin.priv, r);
}

static int w_snapshot(void *priv, const char *dest)
{
	struct storage_inst *si = priv;

	return si->ops.snapshot(si->b.bin.priv, dest);
}

static int w_rollback(void *priv, const char *src)
{
	struct storage_inst *si = priv;

	return si->ops.rollback(si->b.bin.priv, src);
}

static void wrap_ops(struct storage_inst *si)
{
	const struct cub_storage_ops *o = &si->ops;
	struct cub_storage_ops *w = &si->wrap;

	*w = *o; /* open, close, info: the host calls them itself, with the plugin's priv */
	w->readv = w_readv;
	w->writev = w_writev;
	w->flush = w_flush;
	w->discard = o->discard ? w_discard : NULL;
	w->write_zeroes = o->write_zeroes ? w_write_zeroes : NULL;
	w->submit = o->submit ? w_submit : NULL;
	w->snapshot = o->snapshot ? w_snapshot : NULL;
	w->rollback = o->rollback ? w_rollback : NULL;
}

void storage_counters(const struct backend *b, struct storage_counters *out)
{
	const struct storage_inst *si = (const struct storage_inst *)b;
	const uint64_t *from = (const uint64_t *)&si->n;
	uint64_t *to = (uint64_t *)out;

	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

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

	si->ops.info(b->bin.priv, &si->s.info);
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
	wrap_ops(si);
	si->s.ops = &si->wrap;
	si->s.priv = si;
	si->s.name = b->bin.name;
	return 0;
}

static int si_open(struct backend *b, const void *arg)
{
	struct storage_inst *si = (struct storage_inst *)b;

	return si->ops.open(&b->bin, &devices_host, b->bin.cfg, *(const bool *)arg,
			       &b->bin.priv);
}

static void si_release(struct backend *b)
{
	struct storage_inst *si = (struct storage_inst *)b;

	if (b->opened)
		si->ops.close(b->bin.priv);
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

const char *storage_writable(const struct cub_inst *in)
{
	for (const struct backend *b = in->storages; b; b = b->next) {
		const struct storage_inst *si = (const struct storage_inst *)(const void *)b;

		if (b->opened && !si->s.info.read_only)
			return b->bin.name;
	}
	return NULL;
}

struct cub_storage *storage_next(const struct cub_inst *in, const struct cub_storage *prev,
				 const char **key, struct cub_inst **bin)
{
	struct backend *b = in->storages;

	if (prev) {
		while (b && &((struct storage_inst *)(void *)b)->s != prev)
			b = b->next;
		b = b ? b->next : NULL;
	}
	while (b && !b->opened)
		b = b->next;
	if (!b)
		return NULL;
	*key = b->key;
	*bin = &b->bin;
	return &((struct storage_inst *)(void *)b)->s;
}
