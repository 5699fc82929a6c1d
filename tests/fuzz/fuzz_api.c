/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for the control API's request path, in two modes by
 * the first byte's bit 0x40:
 * - HTTP: the rest is raw bytes a client sends on a socket (a socketpair
 *   served by the API's HTTP layer, http.c, with no event loop). What comes
 *   back must be a sequence of well-formed HTTP/1.1 answers, and the
 *   connection must end once the client has closed its side.
 * - requests (api_dispatch: the routing, body limits, JSON parsing, every
 *   Firecracker endpoint and the tree InstanceStart builds): a sequence of
 *   requests split at NUL bytes; each is a method byte, a path up to '\n',
 *   then the body. Every reply must be well formed: 200 with a body, 204
 *   without, 4xx/5xx with a fault_message string.
 * The VM is a fake whose start succeeds or fails by the first byte.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "cnode.h"
#include "devices.h"
#include "loader.h"
#include "seed.h"

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

/* Nor are devices: the fake VM has none, so GET /metrics lists no I/O. */
void storage_counters(const struct backend *b, struct storage_counters *out)
{
	(void)b, (void)out;
	__builtin_trap();
}
bool net_stats(const struct backend *b, struct cub_net_stats *out)
{
	(void)b, (void)out;
	__builtin_trap();
}

/* PUT /logger and /metrics open files the body names: not from a fuzzer
 * (fcsinks.c is left out; its checks are unit-tested). */
struct fc_sinks;
void fc_sinks_free(struct fc_sinks *s)
{
	CHECK(!s);
}
int fc_put_logger(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		  size_t errlen)
{
	(void)a, (void)id, (void)in, (void)out;
	return errf(err, errlen, 400, "fuzz: no logger");
}
int fc_put_metrics(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		   size_t errlen)
{
	(void)a, (void)id, (void)in, (void)out;
	return errf(err, errlen, 400, "fuzz: no metrics file");
}
int fc_flush_metrics(struct api *a, char *err, size_t errlen)
{
	(void)a;
	return errf(err, errlen, 400, "fuzz: no metrics file");
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

/* The answers in out[0, n): each a status line, headers with a
 * Content-Length (but 100 Continue), the body. */
static void check_answers(const char *out, size_t n)
{
	size_t off = 0;

	while (off < n) {
		const char *a = out + off, *end = memmem(a, n - off, "\r\n\r\n", 4), *cl;
		unsigned status;
		size_t blen = 0;

		CHECK(end && n - off > 13 && !memcmp(a, "HTTP/1.1 ", 9));
		CHECK(sscanf(a + 9, "%3u", &status) == 1 && status >= 100 && status < 600);
		cl = memmem(a, (size_t)(end - a), "\r\nContent-Length: ", 18);
		if (status == 100)
			CHECK(!cl);
		else
			CHECK(cl && sscanf(cl + 18, "%zu", &blen) == 1);
		off = (size_t)(end - out) + 4 + blen;
		CHECK(off <= n);
	}
}

static void raw_http(struct api *a, const uint8_t *d, size_t n)
{
	static char out[1 << 20];
	size_t off = 0, olen = 0;
	bool shut = false;
	unsigned rounds = 0, open = 1;
	int sv[2];

	CHECK(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv));
	CHECK(!api_serve_fd(a, sv[0]));
	while (open || !shut) {
		ssize_t r;

		CHECK(++rounds < 100000); /* the server must not stall */
		if (off < n) {
			r = send(sv[1], d + off, n - off, MSG_NOSIGNAL);
			if (r > 0)
				off += (size_t)r;
			else if (errno != EAGAIN)
				off = n; /* the server closed: nothing more goes */
		}
		if (off == n && !shut) {
			shutdown(sv[1], SHUT_WR);
			shut = true;
		}
		open = api_poll(a);
		while ((r = recv(sv[1], out + olen, sizeof(out) - olen, 0)) > 0) {
			olen += (size_t)r;
			CHECK(olen < sizeof(out));
		}
	}
	close(sv[1]);
	check_answers(out, olen);
}

/* Seeds (seed.h): a keep-alive pipeline with a chunked body, an Expect:
 * 100-continue, and Firecracker's pre-boot sequence. */
#define SEED(dir, name, lit) fuzz_write_seed(dir, name, lit, sizeof(lit) - 1)

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_SEED_DIR");

	(void)argc, (void)argv;
	if (!dir)
		return 0;
	SEED(dir, "seed-http-pipeline",
	     "@GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	     "PUT /machine-config HTTP/1.1\r\nContent-Length: 35\r\n\r\n"
	     "{\"vcpu_count\":1,\"mem_size_mib\":64}"
	     "PUT /drives/root HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
	     "10\r\n{\"drive_id\":\"root\r\n"
	     "2d\r\n\",\"path_on_host\":\"/r\",\"is_root_device\":true}\r\n0\r\n\r\n"
	     "PATCH /vm HTTP/1.0\r\nContent-Length: 18\r\n\r\n{\"state\":\"Paused\"}");
	SEED(dir, "seed-http-expect",
	     "@PUT /boot-source HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 31\r\n\r\n"
	     "{\"kernel_image_path\":\"/vmlinuz\"}");
	SEED(dir, "seed-requests",
	     "\x01/machine-config\n{\"vcpu_count\":2,\"mem_size_mib\":128}\0"
	     "\x01/boot-source\n{\"kernel_image_path\":\"/k\",\"boot_args\":\"console=ttyS0\"}\0"
	     "\x01/drives/rootfs\n{\"drive_id\":\"rootfs\",\"path_on_host\":\"/r\","
	     "\"is_root_device\":true,\"is_read_only\":false}\0"
	     "\x01/network-interfaces/eth0\n{\"iface_id\":\"eth0\",\"host_dev_name\":\"tap0\"}\0"
	     "\x01/actions\n{\"action_type\":\"InstanceStart\"}\0"
	     "\x02/vm\n{\"state\":\"Paused\"}\0\x00/vm/config\n");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
	if (size && (data[0] & 0x40)) {
		raw_http(a, data + 1, size - 1);
		api_close(a);
		arena_free(&ar);
		return 0;
	}
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
