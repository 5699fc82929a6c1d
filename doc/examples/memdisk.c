/* SPDX-License-Identifier: Apache-2.0 */
/* Example storage backend "memdisk": a disk held in memory, optionally
 * preloaded from an image file; its content is gone when the VM exits.
 * Built out of tree against the installed SDK; see plugin-guide.md. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cubicle/storage.h>

struct memdisk_cfg {
	uint64_t size;
	const char *image; /* CUB_P_PATH: already expanded by the host */
	int64_t block_size;
	bool read_only;
};

struct memdisk {
	struct cub_inst *in;
	const struct cub_host *h;
	uint8_t *data;
	uint64_t size;
	uint32_t block_size;
	bool ro;
	pthread_rwlock_t lock; /* I/O ops run on several threads at once */
};

/*
 * The host does not bounds-check: virtio-blk keeps within info.size, but
 * another device may send anything. Accept [off, off + len) only inside.
 */
static bool in_disk(const struct memdisk *m, uint64_t off, uint64_t len)
{
	return off <= m->size && len <= m->size - off;
}

static uint64_t iov_total(const struct iovec *iov, int iovcnt)
{
	uint64_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

static int64_t md_readv(void *priv, uint64_t off, const struct iovec *iov, int iovcnt)
{
	struct memdisk *m = priv;
	uint64_t done = 0;

	if (off > m->size)
		return -EINVAL;
	pthread_rwlock_rdlock(&m->lock);
	for (int i = 0; i < iovcnt && off + done < m->size; i++) {
		uint64_t n = iov[i].iov_len;

		if (n > m->size - (off + done))
			n = m->size - (off + done); /* short only at the end of the disk */
		memcpy(iov[i].iov_base, m->data + off + done, n);
		done += n;
	}
	pthread_rwlock_unlock(&m->lock);
	return (int64_t)done;
}

static int64_t md_writev(void *priv, uint64_t off, const struct iovec *iov, int iovcnt)
{
	struct memdisk *m = priv;
	uint64_t len = iov_total(iov, iovcnt), done = 0;

	if (m->ro)
		return -EROFS;
	if (!in_disk(m, off, len))
		return -EINVAL; /* never a partial write */
	pthread_rwlock_wrlock(&m->lock);
	for (int i = 0; i < iovcnt; i++) {
		memcpy(m->data + off + done, iov[i].iov_base, iov[i].iov_len);
		done += iov[i].iov_len;
	}
	pthread_rwlock_unlock(&m->lock);
	return (int64_t)done;
}

/* Called for every guest flush (whatever can_flush says): nothing to do. */
static int md_flush(void *priv)
{
	return 0;
}

static int md_zero(struct memdisk *m, uint64_t off, uint64_t len)
{
	if (m->ro)
		return -EROFS;
	if (!in_disk(m, off, len))
		return -EINVAL;
	pthread_rwlock_wrlock(&m->lock);
	memset(m->data + off, 0, len);
	pthread_rwlock_unlock(&m->lock);
	return 0;
}

static int md_discard(void *priv, uint64_t off, uint64_t len)
{
	return md_zero(priv, off, len);
}

static int md_write_zeroes(void *priv, uint64_t off, uint64_t len, bool unmap)
{
	return md_zero(priv, off, len);
}

static void md_info(void *priv, struct cub_storage_info *out)
{
	const struct memdisk *m = priv;

	*out = (struct cub_storage_info){
		.size = m->size,
		.block_size = m->block_size,
		.read_only = m->ro,
		.can_discard = !m->ro,
		.can_write_zeroes = !m->ro,
		.can_flush = true, /* nothing is ever more durable than now */
	};
}

static void md_close(void *priv)
{
	struct memdisk *m = priv;

	/* Main thread, no I/O running; m->in and m->h are still valid here. */
	m->h->log(m->in, CUB_LOG_DEBUG, "dropping %llu bytes", (unsigned long long)m->size);
	pthread_rwlock_destroy(&m->lock);
	free(m->data);
	free(m);
}

static int load_image(struct memdisk *m, const char *path)
{
	struct stat st;
	uint64_t done = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return m->h->fail(m->in, -errno, "image %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0)
		err = m->h->fail(m->in, -errno, "image %s: %s", path, strerror(errno));
	else if ((uint64_t)st.st_size > m->size)
		err = m->h->fail(m->in, -EFBIG, "image %s is %lld bytes; size is %llu", path,
				 (long long)st.st_size, (unsigned long long)m->size);
	while (!err && done < (uint64_t)st.st_size) {
		ssize_t n = pread(fd, m->data + done, (size_t)((uint64_t)st.st_size - done),
				  (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			err = m->h->fail(m->in, n ? -errno : -EIO, "image %s: read failed", path);
		else
			done += (uint64_t)n;
	}
	close(fd);
	return err;
}

static int md_open(struct cub_inst *in, const struct cub_host *h, const void *cfgp, bool ro,
		   void **priv)
{
	const struct memdisk_cfg *cfg = cfgp;
	struct memdisk *m;
	int err;

	/* size and block_size are in range (min/max); what the table cannot say: */
	if (cfg->block_size & (cfg->block_size - 1))
		return h->fail(in, -EINVAL, "block_size %lld is not a power of two",
			       (long long)cfg->block_size);
	if (cfg->size % (uint64_t)cfg->block_size)
		return h->fail(in, -EINVAL, "size %llu is not a multiple of block_size %lld",
			       (unsigned long long)cfg->size, (long long)cfg->block_size);
	m = calloc(1, sizeof(*m));
	if (!m)
		return h->fail(in, -ENOMEM, "out of memory");
	m->in = in;
	m->h = h;
	m->size = cfg->size;
	m->block_size = (uint32_t)cfg->block_size;
	m->ro = ro || cfg->read_only;
	pthread_rwlock_init(&m->lock, NULL);
	m->data = calloc(1, (size_t)m->size);
	if (!m->data) {
		err = h->fail(in, -ENOMEM, "cannot hold %llu bytes", (unsigned long long)m->size);
		goto fail;
	}
	if (*cfg->image && (err = load_image(m, cfg->image)))
		goto fail;
	*priv = m;
	return 0;
fail:
	pthread_rwlock_destroy(&m->lock);
	free(m->data);
	free(m);
	return err;
}

static const struct cub_param md_params[] = {
	{ .name = "size", .type = CUB_P_SIZE, .offset = offsetof(struct memdisk_cfg, size),
	  .def = "64M", .min = "1M", .max = "4G", .doc = "disk size (held in RAM)" },
	{ .name = "image", .type = CUB_P_PATH, .offset = offsetof(struct memdisk_cfg, image),
	  .def = "", .doc = "file whose bytes the disk starts with (relative: to the config file)" },
	{ .name = "block_size", .type = CUB_P_INT,
	  .offset = offsetof(struct memdisk_cfg, block_size), .def = "512", .min = "512",
	  .max = "4096", .doc = "logical block size, a power of two" },
	{ .name = "read_only", .type = CUB_P_BOOL,
	  .offset = offsetof(struct memdisk_cfg, read_only), .def = "false",
	  .doc = "refuse writes" },
};

static const struct cub_storage_ops md_ops = {
	.open = md_open,
	.close = md_close,
	.info = md_info,
	.readv = md_readv,
	.writev = md_writev,
	.flush = md_flush,
	.discard = md_discard,
	.write_zeroes = md_write_zeroes,
	/* .submit is reserved; snapshot and rollback are optional. */
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(4), /* CUB_P_PATH and min/max are ABI 1.4 */
	.kind = CUB_KIND_STORAGE,
	.name = "memdisk",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "example storage backend: a disk in memory, optionally preloaded from a file",
	.cfg_size = sizeof(struct memdisk_cfg),
	.params = md_params,
	.n_params = CUB_ARRAY_SIZE(md_params),
	.ops = &md_ops,
});
