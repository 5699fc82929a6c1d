/* SPDX-License-Identifier: Apache-2.0 */
/* The host end of a guest console (plugins/lib, built into each console device plugin; no ABI). */
#ifndef CUBICLE_HOSTCON_H
#define CUBICLE_HOSTCON_H

#include <stdbool.h>
#include <stddef.h>

#include <cubicle/plugin.h>

/*
 * Consoles:
 *   stdio   guest output to stdout; with input = true, host stdin to the guest.
 *           On a terminal stdin goes raw (the host restores it) and, as in
 *           QEMU, Ctrl-A is an escape: Ctrl-A x ends the VM (status 0),
 *           Ctrl-A a or Ctrl-A Ctrl-A sends one Ctrl-A, Ctrl-A h logs help.
 *   file    guest output appended to path (a regular file, or a character
 *           device such as /dev/null; a FIFO or anything else is refused);
 *           no input.
 *   socket  listen on the Unix socket path (a stale socket is replaced, a
 *           live one or another file type is refused); one client at a time
 *           gets the output and feeds the input. Without a client, output
 *           is discarded.
 *   none    output discarded, no input.
 * Output never blocks its caller for long: a console that stops reading
 * costs one HOSTCON_OUT_WAIT_MS wait, then output is dropped (with a
 * rate-limited warning) until it reads again. Host input waits in a backlog
 * of a size the device picks until the device takes it with hostcon_read;
 * what does not fit is dropped with a rate-limited warning.
 * Output to a regular file (console = "file", or stdio with stdout
 * redirected to one) stops after max_size bytes in this run: one warning
 * names the file, the rest of the guest's output is dropped and the VM
 * keeps running (0: no limit). A guest cannot fill the host's disk.
 *
 * Threads: host input (stdin, the socket's client) is read on the event-loop
 * thread, which then calls the device's @input; writes come from vCPU threads
 * (a register write, a queue kick) or the event loop; hostcon_read,
 * hostcon_pending and hostcon_reset from any of them; open and close only
 * from create and destroy. hostcon has its own lock, taken inside each call
 * and never held while it calls the device, so a device may call in with its
 * own lock held (device lock, then hostcon's) and take that lock in @input.
 * A writer may hold hostcon's lock for one HOSTCON_OUT_WAIT_MS wait; input
 * arriving meanwhile waits as long.
 */

#define HOSTCON_OUT_WAIT_MS 50 /* longest a writer waits for a blocked console */

enum hostcon_kind { HOSTCON_STDIO, HOSTCON_FILE, HOSTCON_SOCKET, HOSTCON_NONE };

/* The "console" choices, in enum hostcon_kind order. */
extern const char *const hostcon_choices[];

/* What HOSTCON_PARAMS fills in: a member of the device's cfg struct. */
struct hostcon_cfg {
	int console; /* enum hostcon_kind */
	const char *path;
	bool input;
	uint64_t max_size; /* bytes of output to a regular file; 0: no limit */
};

/*
 * The console params for a device's cub_param table: cfg_type is its cfg
 * struct, member the struct hostcon_cfg in it, what the device as the docs
 * name it ("the UART"). One definition keeps every console's param names,
 * defaults and docs the same.
 */
#define HOSTCON_PARAMS(cfg_type, member, what) \
	{ .name = "console", .type = CUB_P_ENUM, \
	  .offset = offsetof(cfg_type, member.console), \
	  .def = "stdio", .choices = hostcon_choices, \
	  .doc = "where " what " goes: stdio (Ctrl-A x quits), file, " \
		 "socket (Unix, listening) or none" }, \
	{ .name = "path", .type = CUB_P_PATH, .offset = offsetof(cfg_type, member.path), \
	  .def = "", .doc = "file to append output to, or Unix socket to listen on" }, \
	{ .name = "input", .type = CUB_P_BOOL, .offset = offsetof(cfg_type, member.input), \
	  .def = "true", .doc = "stdio: feed host stdin to the guest (raw mode on a tty)" }, \
	{ .name = "max_size", .type = CUB_P_SIZE, .offset = offsetof(cfg_type, member.max_size), \
	  .def = "64M", .doc = "output to a regular file stops after this many bytes " \
		 "(the VM runs on; 0: no limit)" }

struct hostcon;

/*
 * hostcon_check - validate @cfg: 0, or the error recorded through h->fail.
 * hostcon_open does it too; a device calls it first when it must fail before
 * claiming anything else.
 */
int hostcon_check(struct cub_inst *in, const struct cub_host *h, const struct hostcon_cfg *cfg);

/*
 * hostcon_open - open the console @cfg names, from the device's create.
 * @backlog:  bytes of host input kept until the device takes them (> 0).
 * @input:    (optional) host input entered the backlog: take what the guest
 *            has room for with hostcon_read. Called on the event-loop thread
 *            without hostcon's lock; it may take the device's lock and call
 *            any hostcon function but hostcon_close.
 * @arg:      passed to @input.
 * *@hcp is set before any fd is watched, so @input may reach hostcon through
 * the device's own struct. @cfg (and its path) must outlive the console.
 * Returns 0, or the error recorded through h->fail with *@hcp NULL.
 */
int hostcon_open(struct hostcon **hcp, struct cub_inst *in, const struct cub_host *h,
		 const struct hostcon_cfg *cfg, size_t backlog,
		 void (*input)(void *arg), void *arg);

/* hostcon_close - from destroy or a failing create: unwatch, close, unlink the
 * socket. NULL is fine. */
void hostcon_close(struct hostcon *hc);

/*
 * hostcon_write - guest output, from any thread (vCPUs, the event loop). Waits
 * for a blocked console at most HOSTCON_OUT_WAIT_MS, once; then drops output
 * until it reads again. A stdout whose reader is gone (EPIPE, SIGPIPE
 * ignored) ends output for good.
 */
void hostcon_write(struct hostcon *hc, const void *buf, size_t len);

/* hostcon_read - take up to @len bytes of host input, oldest first; any thread. */
size_t hostcon_read(struct hostcon *hc, void *buf, size_t len);

/* hostcon_pending - bytes of host input waiting; any thread. */
size_t hostcon_pending(struct hostcon *hc);

/* hostcon_reset - forget a half-typed escape and, with @drop_input, the
 * backlog; any thread. */
void hostcon_reset(struct hostcon *hc, bool drop_input);

#endif
