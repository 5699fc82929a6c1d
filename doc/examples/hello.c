/* SPDX-License-Identifier: Apache-2.0 */
/* Example device plugin "hello": two 32-bit registers in an MMIO window
 * (greeting, read-only; scratch, read-write) and a control method. Built out
 * of tree against the installed SDK; see plugin-guide.md. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cubicle/plugin.h>

enum { REG_GREETING = 0, REG_SCRATCH = 4, REG_LEN = 8 };

/* Filled by the host from the parameter table below; read-only for us. */
struct hello_cfg {
	int64_t greeting;
	const char *who;
};

struct hello {
	struct cub_inst *in;
	const struct cub_host *h;
	uint32_t greeting;
	_Atomic uint32_t scratch; /* vCPUs and the control method race on it */
};

/* Guest access to the window: any vCPU thread, so no unlocked shared state. */
static void hello_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct hello *hd = priv;
	uint32_t v = 0;

	if (len != 4 || (off != REG_GREETING && off != REG_SCRATCH)) {
		if (!is_write)
			memset(data, 0, len); /* reads outside the registers see zeroes */
		return;
	}
	if (is_write) {
		memcpy(&v, data, 4); /* little-endian guest, little-endian host */
		if (off == REG_SCRATCH)
			atomic_store(&hd->scratch, v);
		else /* the guest decides how often this runs: rate-limit */
			hd->h->log_ratelimited(hd->in, CUB_LOG_WARN,
					       "guest wrote 0x%x to the read-only greeting", v);
		return;
	}
	v = off == REG_GREETING ? hd->greeting : atomic_load(&hd->scratch);
	memcpy(data, &v, 4);
}

static int hello_create(struct cub_inst *in, const struct cub_host *h, const void *cfgp,
			void **priv)
{
	const struct hello_cfg *cfg = cfgp;
	struct hello *hd;
	struct cub_region r = {
		.want = CUB_BUS_ANY,
		.class = "hello", /* a class the arch layout does not know: an MMIO window */
		.len = REG_LEN,
		.io = hello_io,
	};
	int err;

	/* The host already checked 0 <= greeting <= 65535 (min/max below). */
	hd = calloc(1, sizeof(*hd));
	if (!hd)
		return h->fail(in, -ENOMEM, "out of memory");
	hd->in = in;
	hd->h = h;
	hd->greeting = (uint32_t)cfg->greeting;
	r.priv = hd;
	err = h->region_add(in, &r); /* the host recorded why on failure */
	if (err) {
		free(hd);
		return err;
	}
	h->log(in, CUB_LOG_INFO, "hello, %s: greeting %u at 0x%llx", cfg->who, hd->greeting,
	       (unsigned long long)r.base);
	*priv = hd;
	return 0;
}

static void hello_destroy(void *priv)
{
	free(priv); /* the host removed the region before calling us */
}

/* `greet NAME`: int fn(void *priv, struct cub_reply *reply, const char *name) */
static int hello_greet(void *priv, struct cub_reply *reply, const char *name)
{
	struct hello *hd = priv;
	int n;

	if (!*name)
		return -EINVAL;
	n = snprintf(reply->text, sizeof(reply->text), "hello, %s: greeting %u, scratch 0x%x",
		     name, hd->greeting, atomic_load(&hd->scratch));
	reply->len = n < 0 ? 0 : (size_t)n < sizeof(reply->text) ? (size_t)n
								  : sizeof(reply->text) - 1;
	return 0;
}

static const struct cub_param hello_params[] = {
	{ .name = "greeting", .type = CUB_P_INT, .offset = offsetof(struct hello_cfg, greeting),
	  .def = "42", .min = "0", .max = "65535",
	  .doc = "what the guest reads at offset 0" },
	{ .name = "who", .type = CUB_P_STR, .offset = offsetof(struct hello_cfg, who),
	  .def = "world", .doc = "who the startup line greets" },
};

static const struct cub_method hello_methods[] = {
	{ .name = "greet", .sig = "s", .doc = "greet NAME and show the registers",
	  .fn = (void (*)(void))hello_greet },
};

static const struct cub_device_ops hello_ops = {
	.create = hello_create,
	.destroy = hello_destroy,
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(4), /* min/max are ABI 1.4 */
	.kind = CUB_KIND_DEVICE,
	.name = "hello",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "example device: a greeting register and a scratch register",
	.cfg_size = sizeof(struct hello_cfg),
	.params = hello_params,
	.n_params = CUB_ARRAY_SIZE(hello_params),
	.methods = hello_methods,
	.n_methods = CUB_ARRAY_SIZE(hello_methods),
	.ops = &hello_ops,
});
