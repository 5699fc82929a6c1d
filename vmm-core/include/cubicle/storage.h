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

/*
 * What a backend is and can do; filled by its info op right after open and
 * checked by the host (size a multiple of 512, block_size a power of two
 * 512..65536: otherwise the open fails). Devices read the copy in
 * struct cub_storage; info is not called again.
 *
 * @size:       bytes; a multiple of 512.
 * @block_size: logical block size the device reports to the guest.
 * @read_only:  the backend refuses writes, discards and write-zeroes
 *              (-EROFS). The host also sets it when the device opened the
 *              backend read-only.
 * @can_discard: discard works; virtio-blk offers discard only with it set
 *              and the discard op present.
 * @can_write_zeroes: write_zeroes works; with it clear and the op present,
 *              virtio-blk does not offer write-zeroes at all.
 * @can_flush:  flush makes written data durable: virtio-blk offers
 *              VIRTIO_BLK_F_FLUSH (a volatile write cache) only with it set,
 *              and never calls flush without it.
 */
struct cub_storage_info {
	uint64_t size;
	uint32_t block_size;
	bool read_only;
	bool can_discard;
	bool can_write_zeroes;
	bool can_flush;
};

struct cub_storage_req;
typedef void cub_storage_done_fn(struct cub_storage_req *r, int64_t result);

/* Reserved for an asynchronous submit op (below); no host or device in
 * this tree builds one. */
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
 * struct cub_storage_ops - a storage backend plugin's ops (kind
 * CUB_KIND_STORAGE). Required: open, close, info, readv, writev, flush; the
 * loader refuses a storage plugin lacking one.
 *
 * Threads: open, close and info run on the main thread. The I/O ops
 * (readv, writev, flush, discard, write_zeroes) run on whichever thread the
 * device serves its queue on: with virtio-blk that is the thread that
 * delivers the guest's kick (the event-loop thread with ioeventfd, else a
 * vCPU thread). Several may run at once (one per queue), also at
 * overlapping offsets: the backend does its own locking. They may block
 * (pread/pwrite), but a slow op holds up the thread it runs on, the event
 * loop or a vCPU: slow work belongs on the backend's own helper threads.
 *
 * Bounds: the host does not check offsets or lengths. virtio-blk checks
 * every request against info.size (and refuses writes when read-only)
 * before it calls the backend, but another device plugin may pass any
 * offset: check it, and fail with -EINVAL (or a short read at the end).
 *
 * @open:   open from @cfg (the backend's cfg struct, filled from the device's
 *          `backend` group; read-only, valid until close). @ro: the device
 *          wants read-only. Returns 0 and *@priv, or -errno after
 *          h->fail(). @in names the backend ("raw[disk0]"), not the device;
 *          keep @in and @h: both stay valid until close returns.
 * @close:  free everything (fds included); flush nothing. Main thread: at
 *          the device's request (h->storage->close, in create or destroy)
 *          or by the host after the device's destroy, when no I/O op is
 *          running or will run. The backend's @in and @h are still valid
 *          here (h->log works); the host removes the backend's fd watches
 *          after close returns.
 * @info:   fill @out (struct cub_storage_info). Must not fail.
 * @readv:  read at @off into @iov: bytes read (short only at the end of the
 *          disk) or -errno.
 * @writev: write @iov at @off: bytes written (all of them) or -errno.
 * @flush:  make earlier completed writes durable: 0 or -errno. Called for
 *          a guest flush only when info.can_flush is set; a backend that
 *          leaves can_flush clear still provides the op (it may return 0).
 * @discard:      (optional) the range is no longer needed: 0 or -errno;
 *                -EOPNOTSUPP counts as done (discard is a hint). NULL:
 *                virtio-blk does not offer discard.
 * @write_zeroes: (optional) the range reads as zeroes afterwards; with
 *                @unmap the backend may also deallocate it (a hole), without
 *                it the blocks stay allocated. Called only when
 *                can_write_zeroes is set. NULL: the host writes zero
 *                buffers in bounded chunks through writev.
 * @submit: reserved: never called. Leave it NULL.
 * @snapshot: (optional, ABI 1.2) make @dest, a new file, a point-in-time
 *          copy of the disk (flush first; reflink: an O(1) FICLONE). VM
 *          snapshots call it for each writable disk, main thread, the VM
 *          paused, into the snapshot folder ("disk-ID"); without it a VM
 *          with the disk writable cannot be snapshotted. 0, or -errno after
 *          h->fail() (the reason, which the host reports). A plugin may
 *          reach the same code from its own control methods.
 *          A backend with a snapshot op keeps its disk in the file its
 *          `path` parameter (CUB_P_PATH) names: a restore clones the
 *          snapshot's copy to that path (which must not exist) before it
 *          opens the backend.
 * @rollback: (optional, ABI 1.2) make the disk's content that of @src (a
 *          copy snapshot made) without closing the device: later reads see
 *          @src's bytes, and @src itself never changes (clone it). Called
 *          by rollback in place, main thread, the VM paused; requests
 *          still running on another thread may finish against either
 *          content. 0, or -errno after h->fail().
 *
 * snapshot and rollback are read only from plugins whose abi_minor is 2 or
 * more; for older ones the device sees NULL.
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
 * @open:  open the backend described by the group @key (normally "backend",
 *         declared with a CUB_P_STORAGE param) inside this device's config:
 *         its `type` names a storage plugin, the other keys are that
 *         plugin's parameters, already checked by the plan. @ro forces
 *         read-only (info.read_only is then set). Create time only; main
 *         thread. 0 and *@out, or -errno with the reason already recorded
 *         on the device (FILE:LINE and the backend's name): return the
 *         error as it is, without calling fail() again.
 *         A device config with a `backend` group its plugin never opened is
 *         an error after create ("virtio-rng takes no backend").
 * @close: close it (the backend's close op runs now). Main thread. The host
 *         also closes any left open at destroy, after the device's destroy.
 * @write_zeroes: (ABI 1.4) make [@off, @off + @len) read as zeroes: the
 *         backend's write_zeroes op when it has one, else writev of a zero
 *         buffer in chunks of at most 64 KiB (blocks stay allocated; @unmap
 *         is then ignored). 0 or -errno (-EIO for a short write). Any thread
 *         the backend's I/O ops may run on. Check with CUB_STORAGE_HOST_HAS.
 *         A device calls this rather than the backend's op, so a backend
 *         without write_zeroes still serves the guest's write-zeroes.
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
