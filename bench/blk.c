/* SPDX-License-Identifier: Apache-2.0 */
/* bench/blk: the virtio-blk request path on the host (a split virtqueue in
 * guest RAM, the virtio-blk plugin and its worker thread, the storage host,
 * the raw plugin) against plain pread/pwrite on the same file, same run.
 * Usage: blk [FILE_MIB [RUNS]]; the image goes to $TMPDIR (default /var/tmp). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "cubicle/storage.h"
#include "cubicle/virtio.h"
#include "devices.h"
#include "loader.h"
#include "mem.h"
#include "virtio/virtqueue.h"

/* The driver's side of the wire (virtio 1.x split ring). */
#define QSIZE	  256u
#define DESC_GPA  0x0
#define AVAIL_GPA 0x1000
#define USED_GPA  0x2000
#define HDR_GPA	  0x4000  /* 32 bytes per request slot */
#define STAT_GPA  0x8000  /* 1 byte per slot */
#define DATA_GPA  0x100000
#define RAM	  (64u << 20)
#define SEG	  (64u << 10) /* data segment size for big requests */
#define F_NEXT	  1
#define F_WRITE	  2

struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

static struct guest_mem m;
static struct desc *dt;
static uint16_t *avail, *used_idx;
static uint16_t avail_next;
static struct virtq *vq;
static const struct cub_virtio_ops *vops;
static void *vpriv;

static pthread_mutex_t irq_lock = PTHREAD_MUTEX_INITIALIZER;
static bool use_iothread; /* serve the queue on the plugin's worker thread */
static pthread_cond_t irq_cond = PTHREAD_COND_INITIALIZER;
static unsigned irqs;

/* ---- a minimal host for the plugin ---- */

static void b_log(struct cub_inst *in, int lvl, const char *fmt, ...)
{
	va_list ap;

	if (lvl > CUB_LOG_WARN)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "blk: %s: ", in->name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int b_fail(struct cub_inst *in, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(in->err, sizeof(in->err), fmt, ap);
	va_end(ap);
	return err;
}

static int b_add(struct cub_inst *in, const struct cub_virtio_ops *ops, void *priv)
{
	vops = ops;
	vpriv = priv;
	return 0;
}

static int b_pop(struct cub_vq *q, struct cub_vq_chain *c)
{
	return virtq_pop((struct virtq *)q, c);
}

static void b_push(struct cub_vq *q, const struct cub_vq_chain *c, uint32_t written)
{
	virtq_push((struct virtq *)q, c->head, written);
}

static void b_notify(struct cub_vq *q)
{
	if (!virtq_should_notify((struct virtq *)q))
		return;
	pthread_mutex_lock(&irq_lock);
	irqs++;
	pthread_cond_signal(&irq_cond);
	pthread_mutex_unlock(&irq_lock);
}

static void b_broken(struct cub_inst *in, const char *why)
{
	fprintf(stderr, "blk: device broken: %s\n", why);
	exit(1);
}

static uint64_t b_clock(struct cub_inst *in)
{
	return clock_since_start_us();
}

static const struct cub_virtio_host vhost = {
	.size = sizeof(vhost), .add = b_add, .pop = b_pop, .push = b_push,
	.notify = b_notify, .broken = b_broken,
};

static const struct cub_host host = {
	.size = sizeof(host), .log = b_log, .log_ratelimited = b_log, .fail = b_fail,
	.clock_us = b_clock, .virtio = &vhost, .storage = &devices_storage_host,
};

/* ---- the driver ---- */

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Post one request in slot s: header, data in SEG-sized segments, status;
 * each slot owns the descriptors one such request needs. */
static void post(unsigned s, uint32_t type, uint64_t sector, uint64_t data_gpa, uint32_t len)
{
	unsigned d = s * (2 + (len + SEG - 1) / SEG), first = d;
	uint8_t *h = mem_map(&m, HDR_GPA + s * 32, 16);

	memcpy(h, &type, 4);
	memset(h + 4, 0, 4);
	memcpy(h + 8, &sector, 8);
	dt[d] = (struct desc){ HDR_GPA + s * 32, 16, F_NEXT, (uint16_t)(d + 1) };
	d++;
	for (uint32_t off = 0; off < len; off += SEG, d++) {
		uint32_t l = len - off < SEG ? len - off : SEG;

		dt[d] = (struct desc){ data_gpa + off, l,
				       (uint16_t)(F_NEXT | (type == 0 ? F_WRITE : 0)),
				       (uint16_t)(d + 1) };
	}
	dt[d] = (struct desc){ STAT_GPA + s, 1, F_WRITE, 0 };
	avail[2 + avail_next % QSIZE] = (uint16_t)first;
	avail_next++;
}

/* Publish, kick, wait for every posted request; check their status bytes. */
static void kick_and_wait(unsigned n_slots)
{
	__atomic_store_n(&avail[1], avail_next, __ATOMIC_RELEASE);
	vops->notify(vpriv, 0);
	pthread_mutex_lock(&irq_lock);
	while (__atomic_load_n(used_idx, __ATOMIC_ACQUIRE) != avail_next)
		pthread_cond_wait(&irq_cond, &irq_lock);
	pthread_mutex_unlock(&irq_lock);
	for (unsigned s = 0; s < n_slots; s++) {
		if (*(uint8_t *)mem_map(&m, STAT_GPA + s, 1)) {
			fprintf(stderr, "blk: request failed with status %u\n",
				*(uint8_t *)mem_map(&m, STAT_GPA + s, 1));
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

static double run_blk(const struct work *w)
{
	uint32_t len = op_len(w), type = w->kind == SEQ_WRITE ? 1 : 0;
	double t0 = now_s();

	for (unsigned i = 0; i < w->n_ops; i += w->qd) {
		unsigned n = w->n_ops - i < w->qd ? w->n_ops - i : w->qd;

		for (unsigned s = 0; s < n; s++)
			post(s, type, op_off(w, i + s) / 512, DATA_GPA + (uint64_t)s * len, len);
		kick_and_wait(n);
	}
	return now_s() - t0;
}

static double run_plain(const struct work *w, int fd)
{
	uint32_t len = op_len(w);
	uint8_t *buf = mem_map(&m, DATA_GPA, len);
	double t0 = now_s();

	for (unsigned i = 0; i < w->n_ops; i++) {
		ssize_t n = w->kind == SEQ_WRITE ? pwrite(fd, buf, len, (off_t)op_off(w, i))
						 : pread(fd, buf, len, (off_t)op_off(w, i));

		if (n != (ssize_t)len) {
			perror("blk: plain I/O");
			exit(1);
		}
	}
	return now_s() - t0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void measure(const char *name, const struct work *w, int fd, unsigned runs)
{
	double tb[32], tp[32], mb = (double)w->n_ops * op_len(w) / (1 << 20), b, p;

	for (unsigned r = 0; r < runs; r++) {
		tp[r] = run_plain(w, fd);
		tb[r] = run_blk(w);
	}
	qsort(tb, runs, sizeof(double), cmp_d);
	qsort(tp, runs, sizeof(double), cmp_d);
	b = tb[runs / 2];
	p = tp[runs / 2];
	if (w->kind == RAND4K)
		printf("%-26s virtio-blk %8.0f IOPS  plain %8.0f IOPS  ratio %.2f\n", name,
		       w->n_ops / b, w->n_ops / p, p / b);
	else
		printf("%-26s virtio-blk %8.0f MiB/s plain %8.0f MiB/s ratio %.2f\n", name, mb / b,
		       mb / p, p / b);
}

/* ---- setup ---- */

static int setup_device(const char *img, struct cub_inst *in, struct registry *reg,
			struct vm_config *c, struct dev_cfg *dc, void **priv)
{
	char text[600], err[512];
	char *dirs[] = { CUB_BUILD_DIR "/plugins/devices/.libs", CUB_BUILD_DIR "/plugins/storage/.libs",
			 NULL };
	const struct plugin *p;
	struct virtq_addr a = { QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA };
	struct cub_vq *q;
	char **strs = NULL;
	unsigned n = 0;
	uint64_t f;

	if (registry_scan(reg, dirs, NULL, NULL) ||
	    !(p = registry_find(reg, CUB_KIND_DEVICE, "virtio-blk"))) {
		fprintf(stderr, "blk: plugins not built (run make first)\n");
		return -1;
	}
	snprintf(text, sizeof(text),
		 "devices = ( { type = \"virtio-blk\"; iothread = %s; backend = { type = \"raw\"; path = \"%s\"; }; } );",
		 use_iothread ? "true" : "false", img);
	config_init(&c->lc);
	c->path = "bench";
	c->dir = ".";
	if (!config_read_string(&c->lc, text))
		return -1;
	*dc = (struct dev_cfg){ .type = "virtio-blk", .id = "bench",
				.group = config_setting_get_elem(config_lookup(&c->lc, "devices"), 0) };
	in->name = "virtio-blk[bench]";
	in->plugin = p;
	in->reg = reg;
	in->conf = c;
	in->dc = dc;
	in->cfg = calloc(1, p->d->cfg_size);
	if (devices_fill_cfg(p, c, dc->group, in->name, in->cfg, &strs, &n, err, sizeof(err)) ||
	    ((const struct cub_device_ops *)p->d->ops)->create(in, &host, in->cfg, priv)) {
		fprintf(stderr, "blk: %s%s\n", err, in->err);
		return -1;
	}
	if (virtq_create(&m, &a, 1ull << VIRTIO_F_VERSION_1, &vq, err, sizeof(err))) {
		fprintf(stderr, "blk: %s\n", err);
		return -1;
	}
	f = vops->features(vpriv);
	if (vops->set_features)
		vops->set_features(vpriv, f);
	q = (struct cub_vq *)vq;
	return vops->start(vpriv, &q, 1);
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
	use_iothread = argc > 3 && !strcmp(argv[3], "iothread");
	struct mem_bank bank = { .gpa = 0, .size = RAM };
	static struct cub_inst in;
	struct registry reg = { 0 };
	struct vm_config conf = { 0 };
	struct dev_cfg dc;
	char img[256];
	void *priv;
	int fd;

	if (mib < 16 || runs < 1 || runs > 32) {
		fprintf(stderr, "usage: blk [FILE_MIB >= 16 [RUNS 1..32 [inline|iothread]]]\n");
		return 2;
	}
	clock_mark_start();
	if (mem_create(&m, RAM, &bank, 1)) {
		perror("blk: guest RAM");
		return 1;
	}
	dt = mem_map(&m, DESC_GPA, 16 * QSIZE);
	avail = mem_map(&m, AVAIL_GPA, 4 + 2 * QSIZE);
	used_idx = (uint16_t *)mem_map(&m, USED_GPA, 4 + 8 * QSIZE) + 1;
	fd = make_image(img, mib << 20);
	if (fd < 0) {
		perror("blk: image");
		return 1;
	}
	if (setup_device(img, &in, &reg, &conf, &dc, &priv)) {
		unlink(img);
		return 1;
	}
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
		printf("virtio-blk (%s) host path vs plain pread/pwrite, %" PRIu64
		       " MiB image in the page cache, median of %u runs (ratio = plain time / virtio-blk time)\n",
		       use_iothread ? "iothread = true" : "inline, the default", mib, runs);
		measure("4 KiB random read, QD1", &rnd, fd, runs);
		measure("4 KiB random read, QD32", &rnd32, fd, runs);
		measure("1 MiB sequential read", &sr, fd, runs);
		measure("1 MiB sequential write", &sw, fd, runs);
		printf("interrupts: %u\n", irqs);
		free(offs);
	}
	vops->stop(vpriv);
	((const struct cub_device_ops *)in.plugin->d->ops)->destroy(priv);
	storage_close_all(&in);
	virtq_free(vq);
	close(fd);
	unlink(img);
	config_destroy(&conf.lc);
	registry_free(&reg);
	mem_destroy(&m);
	return 0;
}
