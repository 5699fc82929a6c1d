/* SPDX-License-Identifier: Apache-2.0 */
/* bench/blk: the virtio-blk request path on the host (a split virtqueue in
 * guest RAM, the virtio-blk plugin served on the kicking thread, the storage host,
 * the raw plugin) against plain pread/pwrite on the same file, same run.
 * Usage: blk [FILE_MIB [RUNS]]; the image goes to $TMPDIR (default /var/tmp). */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubicle/storage.h"
#include "harness.h"

/* The driver's side of the wire (virtio 1.x split ring). */
#define QSIZE	  BENCH_QSIZE
#define DESC_GPA  0x0
#define AVAIL_GPA 0x1000
#define USED_GPA  0x2000
#define HDR_GPA	  0x4000  /* 32 bytes per request slot */
#define STAT_GPA  0x8000  /* 1 byte per slot */
#define DATA_GPA  0x100000
#define SEG	  (64u << 10) /* data segment size for big requests */
#define F_NEXT	  1
#define F_WRITE	  2

static struct bench_desc *dt;
static uint16_t *avail, *used_idx;
static uint16_t avail_next;
static struct virtq *vq;

static const struct cub_host host = {
	.size = sizeof(host), .log = bench_log, .log_ratelimited = bench_log, .fail = bench_fail,
	.fd_watch = bench_fd_watch, .fd_unwatch = bench_fd_unwatch, .clock_us = bench_clock,
	.virtio = &bench_vhost, .storage = &devices_storage_host,
};

/* ---- the driver ---- */

/* Post one request in slot s: header, data in SEG-sized segments, status;
 * each slot owns the descriptors one such request needs. */
static void post(unsigned s, uint32_t type, uint64_t sector, uint64_t data_gpa, uint32_t len)
{
	unsigned d = s * (2 + (len + SEG - 1) / SEG), first = d;
	uint8_t *h = mem_map(&bench_mem, HDR_GPA + s * 32, 16);

	memcpy(h, &type, 4);
	memset(h + 4, 0, 4);
	memcpy(h + 8, &sector, 8);
	dt[d] = (struct bench_desc){ HDR_GPA + s * 32, 16, F_NEXT, (uint16_t)(d + 1) };
	d++;
	for (uint32_t off = 0; off < len; off += SEG, d++) {
		uint32_t l = len - off < SEG ? len - off : SEG;

		dt[d] = (struct bench_desc){ data_gpa + off, l,
				       (uint16_t)(F_NEXT | (type == 0 ? F_WRITE : 0)),
				       (uint16_t)(d + 1) };
	}
	dt[d] = (struct bench_desc){ STAT_GPA + s, 1, F_WRITE, 0 };
	avail[2 + avail_next % QSIZE] = (uint16_t)first;
	avail_next++;
}

/* Publish, kick, wait for every posted request; check their status bytes. */
static void kick_and_wait(unsigned n_slots)
{
	__atomic_store_n(&avail[1], avail_next, __ATOMIC_RELEASE);
	bench_vops->notify(bench_vpriv, 0);
	pthread_mutex_lock(&bench_irq_lock);
	while (__atomic_load_n(used_idx, __ATOMIC_ACQUIRE) != avail_next)
		pthread_cond_wait(&bench_irq_cond, &bench_irq_lock);
	pthread_mutex_unlock(&bench_irq_lock);
	for (unsigned s = 0; s < n_slots; s++) {
		if (*(uint8_t *)mem_map(&bench_mem, STAT_GPA + s, 1)) {
			fprintf(stderr, "blk: request failed with status %u\n",
				*(uint8_t *)mem_map(&bench_mem, STAT_GPA + s, 1));
			exit(1);
		}
	}
}

/* ---- the workloads ---- */

enum kind { RAND4K, SEQ_READ, SEQ_WRITE };

struct work {
	enum kind kind;
	unsigned qd;
	uint64_t file_size;
	unsigned n_ops;
	uint64_t *offs; /* RAND4K */
};

static uint32_t op_len(const struct work *w)
{
	return w->kind == RAND4K ? 4096 : 1u << 20;
}

static uint64_t op_off(const struct work *w, unsigned i)
{
	return w->kind == RAND4K ? w->offs[i] : ((uint64_t)i << 20) % w->file_size;
}

/* Ops [from, to) through the device, QD at a time: seconds taken. */
static double run_blk(const struct work *w, unsigned from, unsigned to)
{
	uint32_t len = op_len(w), type = w->kind == SEQ_WRITE ? 1 : 0;
	double t0 = bench_now_s();

	for (unsigned i = from; i < to; i += w->qd) {
		unsigned n = to - i < w->qd ? to - i : w->qd;

		for (unsigned s = 0; s < n; s++)
			post(s, type, op_off(w, i + s) / 512, DATA_GPA + (uint64_t)s * len, len);
		kick_and_wait(n);
	}
	return bench_now_s() - t0;
}

/* As many ops by plain pread/pwrite, half the list further on: not the
 * bytes the device has just read, which the CPU's caches would still hold. */
static double run_plain(const struct work *w, int fd, unsigned from, unsigned to)
{
	uint32_t len = op_len(w);
	uint8_t *buf = mem_map(&bench_mem, DATA_GPA, len);
	double t0 = bench_now_s();

	for (unsigned i = from; i < to; i++) {
		off_t at = (off_t)op_off(w, (i + w->n_ops / 2) % w->n_ops);
		ssize_t n = w->kind == SEQ_WRITE ? pwrite(fd, buf, len, at) : pread(fd, buf, len, at);

		if (n != (ssize_t)len) {
			perror("blk: plain I/O");
			exit(1);
		}
	}
	return bench_now_s() - t0;
}

/*
 * Each run does the ops both ways, in slices that alternate (plain, then the
 * device, slice after slice): this host's speed drifts over tens of
 * milliseconds, and a drift then weighs on both sides alike. The ratio is
 * the median over runs of plain time / device time; the IOPS and MiB/s are
 * each side's median.
 */
static void measure(const char *name, const struct work *w, int fd, unsigned runs)
{
	double tb[32], tp[32], rt[32], mb = (double)w->n_ops * op_len(w) / (1 << 20), b, p;
	unsigned slice = w->kind == RAND4K ? 1024 : 8;

	for (unsigned r = 0; r < runs; r++) {
		tp[r] = tb[r] = 0;
		for (unsigned i = 0; i < w->n_ops; i += slice) {
			unsigned to = w->n_ops - i < slice ? w->n_ops : i + slice;

			tp[r] += run_plain(w, fd, i, to);
			tb[r] += run_blk(w, i, to);
		}
		rt[r] = tp[r] / tb[r];
	}
	b = bench_median(tb, runs);
	p = bench_median(tp, runs);
	if (w->kind == RAND4K)
		printf("%-26s virtio-blk %8.0f IOPS  plain %8.0f IOPS  ratio %.2f\n", name,
		       w->n_ops / b, w->n_ops / p, bench_median(rt, runs));
	else
		printf("%-26s virtio-blk %8.0f MiB/s plain %8.0f MiB/s ratio %.2f\n", name, mb / b,
		       mb / p, bench_median(rt, runs));
}

/* ---- setup ---- */

static int setup_device(const char *img, struct bench_dev *d)
{
	char text[600];
	struct cub_vq *q;

	snprintf(text, sizeof(text),
		 "devices = ( { type = \"virtio-blk\"; backend = { type = \"raw\"; path = \"%s\"; }; } );",
		 img);
	if (bench_dev_create(d, "virtio-blk", CUB_BUILD_DIR "/plugins/storage/.libs", text, &host) ||
	    !(vq = bench_virtq(DESC_GPA, AVAIL_GPA, USED_GPA, 1ull << VIRTIO_F_VERSION_1)))
		return -1;
	if (bench_vops->set_features)
		bench_vops->set_features(bench_vpriv, bench_vops->features(bench_vpriv));
	q = (struct cub_vq *)vq;
	return bench_vops->start(bench_vpriv, &q, 1);
}

static int make_image(char *path, uint64_t size)
{
	static uint8_t buf[1 << 20];
	const char *tmp = getenv("TMPDIR");
	int fd;

	snprintf(path, 256, "%s/cubicle-bench-blk-XXXXXX", tmp ? tmp : "/var/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131);
	for (uint64_t off = 0; off < size; off += sizeof(buf))
		if (pwrite(fd, buf, sizeof(buf), (off_t)off) != (ssize_t)sizeof(buf))
			return -1;
	fsync(fd);
	return fd;
}

int main(int argc, char **argv)
{
	uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 0) : 256;
	unsigned runs = argc > 2 ? (unsigned)atoi(argv[2]) : 5;
	static struct bench_dev dev;
	pthread_t loop;
	char img[256];
	int fd;

	if (mib < 16 || runs < 1 || runs > 32) {
		fprintf(stderr, "usage: blk [FILE_MIB >= 16 [RUNS 1..32]]\n");
		return 2;
	}
	if (bench_init("blk")) {
		perror("blk: guest RAM");
		return 1;
	}
	dt = mem_map(&bench_mem, DESC_GPA, 16 * QSIZE);
	avail = mem_map(&bench_mem, AVAIL_GPA, 4 + 2 * QSIZE);
	used_idx = (uint16_t *)mem_map(&bench_mem, USED_GPA, 4 + 8 * QSIZE) + 1;
	fd = make_image(img, mib << 20);
	if (fd < 0) {
		perror("blk: image");
		return 1;
	}
	if (setup_device(img, &dev)) {
		unlink(img);
		return 1;
	}
	/* a round that ends at its budget goes on from the event loop (the
	 * queue's re-arm eventfd, the one fd it watches) */
	bench_loop_start(&loop);
	{
		struct work rnd = { RAND4K, 1, mib << 20, 20000, NULL };
		struct work rnd32 = { RAND4K, 32, mib << 20, 20000, NULL };
		struct work sr = { SEQ_READ, 1, mib << 20, (unsigned)mib, NULL };
		struct work sw = { SEQ_WRITE, 1, mib << 20, (unsigned)mib, NULL };
		uint64_t *offs = malloc(rnd.n_ops * sizeof(*offs));

		srand(1);
		for (unsigned i = 0; i < rnd.n_ops; i++)
			offs[i] = ((uint64_t)rand() % ((mib << 20) / 4096)) * 4096;
		rnd.offs = rnd32.offs = offs;
		printf("virtio-blk host path vs plain pread/pwrite, %" PRIu64
		       " MiB image in the page cache, median of %u runs (ratio = plain time / virtio-blk time)\n",
		       mib, runs);
		measure("4 KiB random read, QD1", &rnd, fd, runs);
		measure("4 KiB random read, QD32", &rnd32, fd, runs);
		measure("1 MiB sequential read", &sr, fd, runs);
		measure("1 MiB sequential write", &sw, fd, runs);
		printf("interrupts: %u\n", bench_irqs);
		free(offs);
	}
	bench_loop_stop(loop);
	bench_vops->stop(bench_vpriv);
	bench_dev_destroy(&dev, storage_close_all);
	virtq_free(vq);
	close(fd);
	unlink(img);
	mem_destroy(&bench_mem);
	return 0;
}
