/* SPDX-License-Identifier: Apache-2.0 */
/* An out-of-tree device plugin, built by `make installcheck` against the
 * installed SDK only (pkg-config cubicle-plugin): proves the headers suffice. */
#include <cubicle/plugin.h>

struct hello_cfg {
	int64_t greeting;
};

static const struct cub_param params[] = {
	{ "greeting", CUB_P_INT, offsetof(struct hello_cfg, greeting), "42", NULL, "a number", NULL, NULL },
};

static int create(struct cub_inst *in, const struct cub_host *h, const void *cfg, void **priv)
{
	const struct hello_cfg *c = cfg;

	h->log(in, CUB_LOG_INFO, "hello from out of tree, greeting %lld", (long long)c->greeting);
	*priv = NULL;
	return 0;
}

static void destroy(void *priv)
{
}

static const struct cub_device_ops ops = { .create = create, .destroy = destroy };

CUB_PLUGIN({
	CUB_PLUGIN_ABI(4),
	.kind = CUB_KIND_DEVICE,
	.name = "sdk-hello",
	.version = "1",
	.license = "Apache-2.0",
	.summary = "out-of-tree SDK check",
	.cfg_size = sizeof(struct hello_cfg),
	.params = params,
	.n_params = CUB_ARRAY_SIZE(params),
	.ops = &ops,
});
