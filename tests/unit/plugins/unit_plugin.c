/* SPDX-License-Identifier: Apache-2.0 */
/* Plugins for the loader tests: one good one and one per failure the loader
 * must report. VARIANT (set by the build) picks which. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubicle/storage.h"

/* #defines, not an enum: #if must see them. */
#define GOOD 1
#define BAD_ABI 2
#define NEWER_MINOR 3
#define NO_SYMBOL 4
#define BAD_PARAM 5
#define BAD_SIG 6
#define NEEDS_OLDER 7 /* built for a newer minor, needs only this host's */

struct good_cfg {
	bool flag;
	int64_t count;
	uint64_t big;
	uint64_t size;
	const char *label;
	int colour;
	const char *image;
	int64_t level;
	const char *disk;
};

static unsigned creates, destroys; /* the "creates" and "destroys" methods */

static const char *const colours[] = { "red", "green", "blue", NULL };

static const struct cub_param params[] __attribute__((unused)) = {
	{ "flag", CUB_P_BOOL, offsetof(struct good_cfg, flag), "false", NULL, "a bool", NULL, NULL },
	{ "count", CUB_P_INT, offsetof(struct good_cfg, count), "-3", NULL, "an int", NULL, NULL },
	{ "big", CUB_P_U64, offsetof(struct good_cfg, big), NULL, NULL, "required u64", NULL, NULL },
	{ "size", CUB_P_SIZE, offsetof(struct good_cfg, size), "64K", NULL, "a size", NULL, NULL },
	{ "label", CUB_P_STR, offsetof(struct good_cfg, label), "none", NULL, "a string", NULL, NULL },
	{ "colour", CUB_P_ENUM, offsetof(struct good_cfg, colour), "green", colours, "an enum", NULL, NULL },
	{ "image", CUB_P_PATH, offsetof(struct good_cfg, image), "", NULL, "a path", NULL, NULL },
	{ "level", CUB_P_INT, offsetof(struct good_cfg, level), "5", NULL, "1 to 10", "1", "10" },
	{ "disk", CUB_P_STORAGE, offsetof(struct good_cfg, disk), "", NULL, "an optional disk", NULL, NULL },
};

static int m_add(void *priv, struct cub_reply *r, int64_t a, uint64_t b)
{
	r->len = (size_t)snprintf(r->text, sizeof(r->text), "%lld", (long long)(a + (int64_t)b));
	return 0;
}

static int m_echo(void *priv, struct cub_reply *r, const char *s)
{
	r->len = (size_t)snprintf(r->text, sizeof(r->text), "%s|%s", (const char *)priv, s);
	return 0;
}

static int m_fail(void *priv, struct cub_reply *r, int flag, uint32_t code)
{
	return flag ? -(int)code : 0;
}

static int m_creates(void *priv, struct cub_reply *r)
{
	r->len = (size_t)snprintf(r->text, sizeof(r->text), "%u", creates);
	return 0;
}

static int m_destroys(void *priv, struct cub_reply *r)
{
	r->len = (size_t)snprintf(r->text, sizeof(r->text), "%u", destroys);
	return 0;
}

static const struct cub_method methods[] __attribute__((unused)) = {
	{ "add", "xt", "a + b", (void (*)(void))m_add },
	{ "echo", "s", "priv|s", (void (*)(void))m_echo },
	{ "fail", VARIANT == BAD_SIG ? "bq" : "bu", "-code if flag", (void (*)(void))m_fail },
	{ "creates", "", "how often create ran", (void (*)(void))m_creates },
	{ "destroys", "", "how often destroy ran", (void (*)(void))m_destroys },
};

static int create(struct cub_inst *in, const struct cub_host *h, const void *cfg, void **priv)
{
	const struct good_cfg *c = cfg;
	struct cub_storage *s;

	creates++;
	*priv = NULL;
	if (c->disk && h->storage)
		return h->storage->open(in, "disk", true, &s);
	return 0;
}

static void destroy(void *priv)
{
	destroys++;
}

static const struct cub_device_ops ops = { .create = create, .destroy = destroy };

#if VARIANT == NO_SYMBOL
__attribute__((visibility("default"))) const struct cub_device_ops *not_a_plugin = &ops;
#else
CUB_PLUGIN({
	.abi_major = VARIANT == BAD_ABI ? CUB_ABI_MAJOR + 1 : CUB_ABI_MAJOR,
	.abi_minor = VARIANT == NEWER_MINOR || VARIANT == NEEDS_OLDER ? CUB_ABI_MINOR + 1 :
		CUB_ABI_MINOR,
	.abi_needs = VARIANT == NEWER_MINOR ? CUB_ABI_MINOR + 1 : CUB_ABI_MINOR,
	.param_size = sizeof(struct cub_param),
	.size = sizeof(struct cub_plugin),
	.kind = CUB_KIND_DEVICE,
	.name = VARIANT == NEEDS_OLDER ? "unit-needs-older" : "unit-good",
	.version = "1",
	.license = "Apache-2.0",
	.summary = "loader test plugin",
	.cfg_size = VARIANT == BAD_PARAM ? offsetof(struct good_cfg, colour) : sizeof(struct good_cfg),
	.params = params,
	.n_params = CUB_ARRAY_SIZE(params),
	.methods = methods,
	.n_methods = CUB_ARRAY_SIZE(methods),
	.ops = &ops,
});
#endif
