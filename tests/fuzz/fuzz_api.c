/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for the control API's request path (api_dispatch: the
 * routing, body limits, JSON parsing, every Firecracker endpoint and the
 * tree InstanceStart builds). One input is a sequence of requests split at
 * NUL bytes; each is a method byte, a path up to '\n', then the body. The
 * VM is a fake whose start succeeds or fails by the input. Every reply must
 * be well formed: 200 with a body, 204 without, 4xx/5xx with a
 * fault_message string.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "cnode.h"
#include "loader.h"

#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			__builtin_trap(); \
	} while (0)

/* The loader is not part of this harness: no plugin is ever found. */
const char *loader_kind_name(enum cub_kind k)
{
	(void)k;
	return "device";
}
const char *loader_ptype_name(enum cub_ptype t)
{
	(void)t;
	return "int";
}
int loader_call(const struct plugin *p, const char *method, void *priv, struct cub_reply *reply,
		char *const *args, unsigned n_args, char *err, size_t errlen)
{
	(void)p, (void)method, (void)priv, (void)reply, (void)args, (void)n_args, (void)err,
		(void)errlen;
	__builtin_trap(); /* there are no instances to call */
}

static bool fail_start;

/* Walk the tree: every node named where it came from. */
static void walk(const struct cnode *n)
{
	CHECK(n->where && *n->where);
	if (n->type == CN_STR)
		CHECK(n->s != NULL);
	for (unsigned i = 0; i < n->n_kids; i++)
		walk(n->kids[i]);
}

static int fake_start(void *ctx, const struct cnode *root, char *err, size_t errlen)
{
	struct api_vm *vm = ctx;

	walk(root);
	CHECK(cnode_get(root, "devices") && cnode_get(root, "boot"));
	if (fail_start)
		return errf(err, errlen, -EINVAL, "fuzz: refused");
	vm->running = true;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const methods[] = { "GET", "PUT", "PATCH", "DELETE" };
	struct registry reg = { 0 };
	struct arena ar = { 0 };
	struct api_vm vm = { .reg = &reg, .ar = &ar, .start = fake_start, .id = "fuzz" };
	struct api *a;
	size_t off = 0;

	vm.ctx = &vm;
	fail_start = size && (data[0] & 0x80);
	a = api_new_detached(&vm);
	CHECK(a);
	for (unsigned n = 0; n < 16 && off < size; n++) {
		const uint8_t *req = data + off, *end = memchr(req, 0, size - off);
		size_t len = end ? (size_t)(end - req) : size - off;
		const uint8_t *nl = len > 1 ? memchr(req + 1, '\n', len - 1) : NULL;
		size_t ulen = nl ? (size_t)(nl - req - 1) : (len ? len - 1 : 0);
		char url[256];
		const char *body;
		size_t blen;
		json_t *reply;
		int st;

		off += len + 1;
		if (!len)
			continue;
		if (ulen >= sizeof(url))
			ulen = sizeof(url) - 1;
		memcpy(url, req + 1, ulen);
		url[ulen] = '\0';
		body = nl ? (const char *)nl + 1 : "";
		blen = nl ? len - (size_t)(nl - req) - 1 : 0;
		st = api_dispatch(a, methods[req[0] & 3], url, body, blen, &reply);
		CHECK(st == 200 || st == 204 || (st >= 400 && st < 600));
		if (st == 204)
			CHECK(!reply);
		else if (st == 200)
			CHECK(reply);
		else
			CHECK(json_is_string(json_object_get(reply, "fault_message")));
		json_decref(reply);
	}
	api_close(a);
	arena_free(&ar);
	return 0;
}
