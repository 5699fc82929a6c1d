/* SPDX-License-Identifier: Apache-2.0 */
/* The testdev device: exit code, scratch, log line and magic for tiny test guests. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cubicle/plugin.h>

/* Register offsets; each register is 32 bits wide. */
enum {
	TD_EXIT = 0x0,    /* W: end the VM with status value & 0xff */
	TD_SCRATCH = 0x4, /* RW: reads back the last value written */
	TD_PUTC = 0x8,    /* W: append the low byte to the log line */
	TD_MAGIC = 0xc,   /* R: TD_MAGIC_VALUE; writes ignored */
	TD_LEN = 0x10,
};

#define TD_MAGIC_VALUE 0x49425543u /* "CUBI" in little-endian byte order */
#define TD_LINE_MAX 120

static const char *const bus_choices[] = { "any", "pio", "mmio", NULL };

struct testdev_cfg {
	int bus;
	uint64_t max_log;
};

struct testdev {
	struct cub_inst *in;
	const struct cub_host *h;
	pthread_mutex_t lock; /* guards scratch and line: vCPUs, control channel */
	uint32_t scratch;
	unsigned line_len;
	char line[TD_LINE_MAX + 1];
	uint64_t logged, max_log; /* guest log bytes so far, and the cap (0: none) */
	bool capped;
};

/* May the guest log @n more bytes? Past max_log it may not (the host log
 * may be a file: a guest must not fill the disk); one warning says so. */
static bool log_room(struct testdev *td, unsigned n)
{
	if (!td->capped && (!td->max_log || td->logged + n <= td->max_log)) {
		td->logged += n;
		return true;
	}
	if (!td->capped)
		td->h->log(td->in, CUB_LOG_WARN,
			   "guest log reached max_log (%llu bytes): further lines are dropped",
			   (unsigned long long)td->max_log);
	td->capped = true;
	return false;
}

/* Log the pending line, if any. Lock held. */
static void line_flush(struct testdev *td)
{
	if (!td->line_len)
		return;
	td->line[td->line_len] = '\0';
	if (log_room(td, td->line_len))
		td->h->log(td->in, CUB_LOG_INFO, "guest: %s", td->line);
	td->line_len = 0;
}

static void line_putc(struct testdev *td, uint8_t c)
{
	if (c == '\n') {
		if (!td->line_len && log_room(td, 1))
			td->h->log(td->in, CUB_LOG_INFO, "guest: ");
		line_flush(td);
		return;
	}
	if (c == '\r')
		return;
	/* Keep terminal control sequences from the guest out of the host log. */
	td->line[td->line_len++] = (c >= 0x20 && c < 0x7f) ? (char)c : '.';
	if (td->line_len == TD_LINE_MAX)
		line_flush(td);
}

static uint32_t le32(const uint8_t *b, uint32_t len)
{
	uint32_t v = 0;

	for (uint32_t i = 0; i < len; i++)
		v |= (uint32_t)b[i] << (8 * i);
	return v;
}

/* Lock held. Returns the exit status the guest asked for, or -1. */
static int testdev_write(struct testdev *td, unsigned reg, unsigned sub, uint32_t v,
			 uint32_t len)
{
	uint32_t mask;

	if (reg == TD_SCRATCH) {
		/* A narrow write replaces just those bytes. */
		mask = (len == 4 ? 0xffffffffu : ((1u << (8 * len)) - 1)) << (8 * sub);
		td->scratch = (td->scratch & ~mask) | ((v << (8 * sub)) & mask);
		return -1;
	}
	if (sub) {
		td->h->log_ratelimited(td->in, CUB_LOG_WARN,
				       "write to register 0x%x at byte %u ignored", reg, sub);
		return -1;
	}
	if (reg == TD_EXIT)
		return (int)(v & 0xff);
	if (reg == TD_PUTC)
		line_putc(td, (uint8_t)v);
	return -1; /* MAGIC is read-only */
}

static uint32_t testdev_read(struct testdev *td, unsigned reg)
{
	switch (reg) {
	case TD_SCRATCH:
		return td->scratch;
	case TD_MAGIC:
		return TD_MAGIC_VALUE;
	default:
		return 0;
	}
}

static void testdev_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct testdev *td = priv;
	uint8_t *b = data;
	unsigned reg, sub;
	int status = -1;
	uint32_t v;

	if ((len != 1 && len != 2 && len != 4) || off % len || off >= TD_LEN) {
		td->h->log_ratelimited(td->in, CUB_LOG_WARN, "bad %s of %u bytes at 0x%llx ignored",
				       is_write ? "write" : "read", len, (unsigned long long)off);
		if (!is_write)
			memset(b, 0, len);
		return;
	}
	reg = (unsigned)off & ~3u;
	sub = (unsigned)off & 3u;
	pthread_mutex_lock(&td->lock);
	if (is_write) {
		status = testdev_write(td, reg, sub, le32(b, len), len);
	} else {
		v = testdev_read(td, reg) >> (8 * sub);
		for (uint32_t i = 0; i < len; i++)
			b[i] = (uint8_t)(v >> (8 * i));
	}
	pthread_mutex_unlock(&td->lock);
	if (status >= 0) {
		td->h->log(td->in, CUB_LOG_INFO, "guest exit code %d", status);
		td->h->vm_exit(td->in, status);
	}
}

static int testdev_set_scratch(void *priv, struct cub_reply *reply, uint32_t v)
{
	struct testdev *td = priv;

	pthread_mutex_lock(&td->lock);
	td->scratch = v;
	pthread_mutex_unlock(&td->lock);
	reply->len = 0;
	reply->text[0] = '\0';
	return 0;
}

static int testdev_get_scratch(void *priv, struct cub_reply *reply)
{
	struct testdev *td = priv;
	uint32_t v;
	int n;

	pthread_mutex_lock(&td->lock);
	v = td->scratch;
	pthread_mutex_unlock(&td->lock);
	n = snprintf(reply->text, sizeof(reply->text), "%u", v);
	reply->len = n < 0 ? 0 : (size_t)n;
	return 0;
}

static int testdev_create(struct cub_inst *in, const struct cub_host *h, const void *cfgp,
			  void **priv)
{
	static const enum cub_bus want[] = { CUB_BUS_ANY, CUB_BUS_PIO, CUB_BUS_MMIO };
	const struct testdev_cfg *cfg = cfgp;
	struct cub_region r = { .class = "testdev", .len = TD_LEN, .io = testdev_io };
	struct testdev *td;
	int err;

	if (cfg->bus < 0 || (unsigned)cfg->bus >= CUB_ARRAY_SIZE(want))
		return h->fail(in, -EINVAL, "bus: unknown choice %d", cfg->bus);
	td = calloc(1, sizeof(*td));
	if (!td)
		return h->fail(in, -ENOMEM, "out of memory");
	td->in = in;
	td->h = h;
	td->max_log = cfg->max_log;
	pthread_mutex_init(&td->lock, NULL);
	r.want = want[cfg->bus];
	r.priv = td;
	err = h->region_add(in, &r);
	if (err) {
		pthread_mutex_destroy(&td->lock);
		free(td);
		return err;
	}
	*priv = td;
	return 0;
}

static void testdev_destroy(void *priv)
{
	struct testdev *td = priv;

	line_flush(td); /* a last line without '\n' */
	pthread_mutex_destroy(&td->lock);
	free(td);
}

static int testdev_reset(void *priv)
{
	struct testdev *td = priv;

	pthread_mutex_lock(&td->lock);
	line_flush(td);
	td->scratch = 0;
	pthread_mutex_unlock(&td->lock);
	return 0;
}

static const struct cub_param testdev_params[] = {
	{ .name = "bus", .type = CUB_P_ENUM, .offset = offsetof(struct testdev_cfg, bus),
	  .def = "any", .choices = bus_choices,
	  .doc = "bus to ask for: any (the arch decides), pio or mmio" },
	{ .name = "max_log", .type = CUB_P_SIZE, .offset = offsetof(struct testdev_cfg, max_log),
	  .def = "1M", .doc = "guest log bytes to pass on, then lines are dropped (0: no limit)" },
};

static const struct cub_method testdev_methods[] = {
	{ .name = "scratch", .sig = "u", .doc = "set the scratch register",
	  .fn = (void (*)(void))testdev_set_scratch },
	{ .name = "get_scratch", .sig = "", .doc = "print the scratch register (decimal)",
	  .fn = (void (*)(void))testdev_get_scratch },
};

/* Snapshot state 1.0: u32 scratch, u32 line_len, u64 logged, u8 capped,
 * 7 zero bytes, then line_len bytes of the pending line; little-endian. */
#define TD_STATE_FIXED 24

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static int testdev_save(void *priv, void *buf, size_t cap, size_t *len)
{
	struct testdev *td = priv;
	uint8_t *b = buf;
	int ret = 0;

	pthread_mutex_lock(&td->lock);
	*len = TD_STATE_FIXED + td->line_len;
	if (cap < *len) {
		ret = -ENOSPC;
	} else {
		memset(b, 0, TD_STATE_FIXED);
		put_le(b, td->scratch, 4);
		put_le(b + 4, td->line_len, 4);
		put_le(b + 8, td->logged, 8);
		b[16] = td->capped;
		memcpy(b + TD_STATE_FIXED, td->line, td->line_len);
	}
	pthread_mutex_unlock(&td->lock);
	return ret;
}

static int testdev_load(void *priv, const void *buf, size_t len, uint32_t minor)
{
	struct testdev *td = priv;
	const uint8_t *b = buf;
	uint64_t n;

	(void)minor; /* 1.0 is the only layout so far */
	if (len < TD_STATE_FIXED)
		return td->h->fail(td->in, -EINVAL, "state: %zu bytes, at least %d expected", len,
				   TD_STATE_FIXED);
	n = get_le(b + 4, 4);
	if (n > TD_LINE_MAX || len != TD_STATE_FIXED + n)
		return td->h->fail(td->in, -EINVAL,
				   "state: line_len %llu in %zu bytes (at most %d, and the line after it)",
				   (unsigned long long)n, len, TD_LINE_MAX);
	if (b[16] > 1)
		return td->h->fail(td->in, -EINVAL, "state: capped is %u, expected 0 or 1", b[16]);
	pthread_mutex_lock(&td->lock);
	td->scratch = (uint32_t)get_le(b, 4);
	td->line_len = (unsigned)n;
	memcpy(td->line, b + TD_STATE_FIXED, n);
	td->logged = get_le(b + 8, 8);
	td->capped = b[16];
	pthread_mutex_unlock(&td->lock);
	return 0;
}

static const struct cub_device_ops testdev_ops = {
	.create = testdev_create,
	.destroy = testdev_destroy,
	.reset = testdev_reset,
	.state_version = CUB_STATE_VERSION(1, 0),
	.save = testdev_save,
	.load = testdev_load,
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(5),
	.kind = CUB_KIND_DEVICE,
	.name = "testdev",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "exit code, scratch register and log line for tiny test guests",
	.cfg_size = sizeof(struct testdev_cfg),
	.params = testdev_params,
	.n_params = CUB_ARRAY_SIZE(testdev_params),
	.methods = testdev_methods,
	.n_methods = CUB_ARRAY_SIZE(testdev_methods),
	.ops = &testdev_ops,
});
