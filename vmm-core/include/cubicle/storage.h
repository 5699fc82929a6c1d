/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle plugin ABI: storage backends (kind CUB_KIND_STORAGE) and how a
 * device opens the one its config names. A disk device never knows which
 * backend sits behind it. */
#ifndef CUBICLE_STORAGE_H
#define CUBICLE_STORAGE_H

#include <sys/uio.h>

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a backend can do; filled by its info op. */
struct cub_storage_info {
	uint64_t size;        /* bytes; a multiple of 512 */
	uint32_t block_size;  /* logical block size the device should report (512, 4096) */
	bool read_only;       /* writes, discards and write-zeroes fail with -EROFS */
	bool can_discard;     /* discard op works (e.g. punches holes) */
	bool can_write_zeroes;
	bool can_flush;       /* flush makes written data durable */
};

struct cub_storage_req;
typedef void cub_storage_done_fn(struct cub_storage_req *r, int64_t result);

/* An asynchronous request (submit op). The backend calls done exactly once,
 * from any thread, with bytes transferred or -errno. */
struct cub_storage_req {
	enum { CUB_SREQ_READ, CUB_SREQ_WRITE, CUB_SREQ_FLUSH, CUB_SREQ_DISCARD,
	       CUB_SREQ_WRITE_ZEROES } op;
	uint64_t offset;
	uint64_t len;             /* DISCARD, WRITE_ZEROES */
	const struct iovec *iov;  /* READ, WRITE */
	int iovcnt;
	cub_storage_done_fn *done;
	void *opaque;             /* the device's */
	bool unmap;               /* WRITE_ZEROES: may deallocate (see write_zeroes) */
};

/*
 * struct cub_storage_ops - a storage backend plugin's ops.
 * All I/O ops may be called from several threads at once.
 *
 * @open:   open from @cfg (the backend's cfg struct). @ro: the device wants
 *          read-only. Returns 0 or -errno after h->fail(). Main thread.
 *          @in names the backend ("raw[disk0]"), not the device.
 * @close:  flush nothing, free everything. Main thread.
 * @info:   fill @out. Never fails after open.
 * @readv:  read at @off into @iov: bytes read (short only at end of disk) or
 *          -errno. Blocking.
 * @writev: write at @off: bytes written or -errno. Blocking.
 * @flush:  make earlier writes durable: 0 or -errno.
 * @discard:      (optional) the range is no longer needed: 0 or -errno.
 *                Default: -EOPNOTSUPP.
 * @write_zeroes: (optional) the range reads as zeroes afterwards; with
 *                @unmap the backend may also deallocate it (a hole), without
 *                it the blocks stay allocated. Default: writev of zero
 *                buffers.
 * @snapshot: (optional, ABI 1.2) make @dest a point-in-time copy of the disk
 *          (flush first; reflink: an O(1) FICLONE). 0 or -errno (-EOPNOTSUPP
 *          by default). Called with the device quiesced.
 * @rollback: (optional, ABI 1.2) make the disk's content that of @src (a
 *          snapshot made earlier) without closing the device: later reads see
 *          @src's bytes. 0 or -errno (-EOPNOTSUPP by default). Device quiesced.
 * @submit: (optional) asynchronous form of all of the above; return 0 if
 *          queued (done is called later) or -errno if not queued. Default:
 *          the host runs the blocking ops on the caller's thread.
 */
struct cub_storage_ops {
	int (*open)(struct cub_inst *in, const struct cub_host *h, const void *cfg, bool ro,
		    void **priv);
	void (*close)(void *priv);
	void (*info)(void *priv, struct cub_storage_info *out);
	int64_t (*readv)(void *priv, uint64_t off, const struct iovec *iov, int iovcnt);
	int64_t (*writev)(void *priv, uint64_t off, const struct iovec *iov, int iovcnt);
	int (*flush)(void *priv);
	int (*discard)(void *priv, uint64_t off, uint64_t len);
	int (*write_zeroes)(void *priv, uint64_t off, uint64_t len, bool unmap);
	int (*submit)(void *priv, struct cub_storage_req *r);
	/* ABI 1.2: */
	int (*snapshot)(void *priv, const char *dest);
	int (*rollback)(void *priv, const char *src);
};

/* An open backend, as a device sees it: call ops with priv. */
struct cub_storage {
	const struct cub_storage_ops *ops;
	void *priv;
	struct cub_storage_info info;
	const char *name; /* "raw[disk0]" for messages */
};

/*
 * struct cub_storage_host - at h->storage (NULL on a host without storage).
 *
 * @open:  open the backend described by the group @key (normally "backend")
 *         inside this device's config: its `type` names a storage plugin,
 *         the other keys are that plugin's parameters. @ro forces read-only.
 *         Create time only. 0 and *@out, or -errno with the reason already
 *         recorded on the device (file:line and the backend's name): return
 *         the error as it is, without calling fail() again.
 *         A device config with a @key group its plugin never opened is an
 *         error after create ("virtio-rng takes no backend").
 * @close: close it (the host also closes any left open at destroy, after
 *         the device's destroy).
 * @write_zeroes: (ABI 1.4) make [@off, @off + @len) read as zeroes: the
 *         backend's write_zeroes op when it has one, else writev of a zero
 *         buffer in chunks of at most 64 KiB (blocks stay allocated; @unmap
 *         is then ignored). 0 or -errno (-EIO for a short write). Any thread
 *         the backend's I/O ops may run on. Check with CUB_STORAGE_HOST_HAS.
 */
struct cub_storage_host {
	uint32_t size;
	int (*open)(struct cub_inst *in, const char *key, bool ro, struct cub_storage **out);
	void (*close)(struct cub_inst *in, struct cub_storage *s);
	/* ABI 1.4: */
	int (*write_zeroes)(struct cub_storage *s, uint64_t off, uint64_t len, bool unmap);
};

#define CUB_STORAGE_HOST_HAS(sh, member) \
	((sh)->size >= offsetof(struct cub_storage_host, member) + sizeof((sh)->member) && \
	 (sh)->member)

#ifdef __cplusplus
}
#endif
#endif
