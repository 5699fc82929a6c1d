/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle plugin ABI: the one header a plugin includes; the host reads the
 * descriptor before it runs any plugin code. */
#ifndef CUBICLE_PLUGIN_H
#define CUBICLE_PLUGIN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUB_ABI_MAJOR 1 /* bump: any layout change to existing structs */
#define CUB_ABI_MINOR 8 /* bump: members appended / new optional ops */
/* 1.1: cub_host gained virtio and storage (virtio.h, storage.h).
 * 1.2: cub_host gained net (net.h); cub_storage_ops gained snapshot and
 *      rollback (read by the host only from plugins built for 1.2 or later).
 * 1.3: CUB_P_STRV (a list of strings) and dotted parameter names (a key
 *      inside a nested group); cub_virtio_host gained push_batch.
 * 1.4: CUB_P_PATH (a path the host expands), CUB_P_STORAGE and CUB_P_NET (a
 *      nested backend group the host checks before create); cub_param
 *      gained min and max; cub_plugin gained abi_needs (the oldest host
 *      minor the plugin needs), param_size and host_check; cub_net_ops
 *      gained set_mac (read only from plugins built for 1.4 or later);
 *      cub_virtio_host gained queue_size; cub_storage_host gained
 *      write_zeroes.
 * 1.5: cub_device_ops gained state_version, save and load (snapshots).
 * 1.6: CUB_P_RATELIMIT (a Firecracker-shaped rate limiter); cub_virtio_host
 *      gained rl_take and rl_charge.
 * 1.7: cub_plugin gained syscalls and n_syscalls (what the plugin's code
 *      needs past the host's seccomp allow-lists); cub_host gained
 *      thread_enter.
 * 1.8: cub_virtio_host gained unpop (chains popped ahead go back unused). */

enum cub_kind { CUB_KIND_DEVICE = 1, CUB_KIND_STORAGE, CUB_KIND_NET };

/*
 * Parameter types. The host fills the plugin's cfg struct from the config
 * (defaults first, then the instance's group and --set), checks every value
 * before any plugin code of the VM runs (the plan stage: unknown keys, wrong
 * types, min/max, with FILE:LINE), and hands it over read-only. Slot types:
 *
 * BOOL  bool.
 * INT   int64_t.
 * U64   uint64_t (a negative value is an error).
 * SIZE  uint64_t bytes; the config may also say "64M" (K, M, G, T: powers
 *       of 1024).
 * STR   const char *, owned by the host, valid until destroy/close.
 * ENUM  int: the index of the given text in choices.
 * STRV  (ABI 1.3) const char *const *: a NULL-terminated array from a config
 *       list or array of strings ([ "a", "b" ]; a default is written "a,b";
 *       "" is the empty list), owned by the host like STR.
 * PATH  (ABI 1.4) const char *, like STR, but the host expands a leading
 *       `~`, `${VAR}`, and takes a relative path against the folder of the
 *       config file that set it; "" stays "". Values from the control API
 *       (to come) are used as given. Use it for every file or socket name,
 *       whatever the parameter is called.
 * STORAGE, NET (ABI 1.4) declare a nested backend group under the param's
 *       name (normally "backend"): `backend = { type = "raw"; path = ...; };`.
 *       def NULL: the group is required; def "": optional. Slot:
 *       const char *, the backend plugin's name (the group's `type`), NULL
 *       when an optional group is absent. The plan checks the group's keys
 *       against that backend plugin's parameter table; at create the device
 *       opens it with h->storage->open(in, "backend", ro, &s) or
 *       h->net->open(in, "backend", &n) (storage.h, net.h). On the command
 *       line: --set devices.ID.backend.PARAM=VALUE.
 * RATELIMIT (ABI 1.6) a nested group in Firecracker's rate_limiter shape,
 *       every part optional: `rate_limiter = { bandwidth = { size = "10M";
 *       one_time_burst = 0; refill_time = 100; }; ops = { size = 1000;
 *       refill_time = 1000; }; };` (size: bytes or requests a full bucket
 *       holds; refill_time: ms from empty to full; one_time_burst: tokens
 *       on top, once). Slot: struct cub_rl *, owned by the host and never
 *       NULL (no group: no limit, which the control API may set later).
 *       The device asks h->virtio->rl_take (virtio.h) before serving a
 *       request. Declare it with def "".
 *
 * A parameter name with one dot (ABI 1.3), "policy.allow", is the key
 * `allow` inside a nested group `policy = { ... };` of the instance's
 * group. The group is optional: without it every "policy.*" slot stays
 * zero (NULL, false, 0), so the plugin can tell it was not given; with it,
 * defaults apply and a param without one is required, as at the top level.
 *
 * The names "type", "id" and "transport" (read by the host for virtio
 * devices: "pci" or "mmio") cannot be params; "backend" only as a STORAGE or
 * NET param. STORAGE and NET params belong to devices, at the top level;
 * min and max only to INT, U64 and SIZE. The loader refuses a plugin that
 * breaks these rules.
 */
struct cub_rl; /* a rate limiter (CUB_P_RATELIMIT), the host's; opaque */

enum cub_ptype { CUB_P_BOOL, CUB_P_INT, CUB_P_U64, CUB_P_SIZE, CUB_P_STR, CUB_P_ENUM,
		 CUB_P_STRV,
		 /* ABI 1.4: */
		 CUB_P_PATH, CUB_P_STORAGE, CUB_P_NET,
		 /* ABI 1.6: */
		 CUB_P_RATELIMIT };

/*
 * struct cub_param - one entry of a plugin's parameter table. The host
 * reads it without running plugin code (`cubicle plugins NAME` prints it).
 *
 * @name:    key inside the instance's config group (1-64 of a-z 0-9 - _,
 *           or two such joined by one dot).
 * @type:    enum cub_ptype; decides the slot's C type (above).
 * @offset:  offsetof(struct <plugin>_cfg, field); the loader refuses a
 *           slot that does not fit in cfg_size.
 * @def:     default as config text ("42", "64M", "true", "a,b"); NULL: the
 *           key is required.
 * @choices: CUB_P_ENUM only, NULL-terminated.
 * @doc:     one line for `cubicle plugins NAME`.
 * @min, @max: (ABI 1.4; read only from plugins whose param_size covers
 *           them) INT, U64, SIZE: inclusive bounds as text ("2", "4K");
 *           NULL: no bound. The host checks them, defaults included, and
 *           names the value and the range in its message
 *           ("'queue_size' is 3; expected 2 to 32768").
 */
struct cub_param {
	const char *name;
	enum cub_ptype type;
	size_t offset;
	const char *def;
	const char *const *choices;
	const char *doc;
	/* ABI 1.4: */
	const char *min, *max;
};

/* A reply a control method fills: a short text the caller prints. */
struct cub_reply {
	char text[512];
	size_t len;
};

/*
 * A control method: a named function the host can call through libffi
 * with arguments given as text, for a method it has never heard of.
 * sig: the arguments after (priv, reply), one letter each, D-Bus style:
 *   b bool (int), i int32_t, u uint32_t, x int64_t, t uint64_t, s const char *.
 * fn's real type: int fn(void *priv, struct cub_reply *reply, ...args);
 * it returns 0 or a negative errno. At most 8 arguments; the loader checks
 * every signature at load time. `cubicle plugins NAME` lists methods; this
 * host has no command that calls them yet (the control API will, on its own
 * thread, concurrently with vCPUs and the event loop).
 */
struct cub_method {
	const char *name;
	const char *sig;
	const char *doc;
	void (*fn)(void);
};

struct cub_inst; /* the host's record of one plugin instance; opaque */
struct cub_virtio_host;  /* virtio.h */
struct cub_storage_host; /* storage.h */
struct cub_net_host;     /* net.h */

/* Which bus a device region wants; CUB_BUS_ANY lets the arch layout decide. */
enum cub_bus { CUB_BUS_ANY = 0, CUB_BUS_PIO, CUB_BUS_MMIO };

/*
 * I/O handler, one signature for both buses. off is relative to the region
 * base; data holds len (1, 2, 4 or 8) bytes in guest (little-endian) order.
 * Called on a vCPU thread, concurrently with other vCPUs and with the event
 * loop: the device does its own locking.
 */
typedef void cub_io_fn(void *priv, uint64_t off, void *data, uint32_t len, bool is_write);

struct cub_region {
	enum cub_bus want;   /* CUB_BUS_ANY unless the device truly needs one */
	const char *class;   /* "uart", "boot-timer", "testdev": looked up in arch layout */
	uint64_t len;        /* bytes (MMIO) or ports (PIO) */
	cub_io_fn *io;
	void *priv;
	/* Filled by the host on success: where the arch layout placed it. */
	enum cub_bus bus;
	uint64_t base;
	int irq;             /* interrupt line for the region's class, -1 if none */
};

enum cub_log_level { CUB_LOG_ERR = 0, CUB_LOG_WARN, CUB_LOG_INFO, CUB_LOG_DEBUG };

/* Exit statuses a device may ask the VM to end with (vm_exit);
 * CUB_EXIT_STOPPED: the user stopped it at the console (Ctrl-A x), 128 + SIGINT. */
enum { CUB_EXIT_OK = 0, CUB_EXIT_ERROR = 1, CUB_EXIT_STOPPED = 130 };

/*
 * struct cub_host - services the host hands each instance at create time.
 * Plugins never link against the executable; everything comes through here.
 * Members may be appended (size tells how many exist); none is removed.
 *
 * @size:       sizeof(struct cub_host) in the host that built it.
 * @log:        log one line at @lvl, prefixed by the instance name. Any thread.
 *              Not for hot paths: use log_ratelimited there.
 * @log_ratelimited: as @log, but drops lines beyond a few per second per
 *              instance (a hostile guest must not flood the host log).
 * @fail:       record a human-readable reason for @err on the instance and
 *              return @err (a negative errno). The core prints it once,
 *              prefixed with FILE:LINE and the instance name, when create
 *              or open returns @err. Do not also log it.
 * @gpa_map:    host pointer to guest physical [gpa, gpa+len), or NULL if
 *              @len is 0, any byte is outside guest RAM or the sum
 *              overflows. Any thread.
 * @region_add: claim a PIO or MMIO region of a class; the arch layout picks
 *              base and irq and writes them back into @r. Create time only.
 * @irq_set:    drive interrupt @line to @level. Any thread.
 * @fd_watch:   call @cb(@arg) on the event-loop thread whenever @fd has any of
 *              the epoll events @ev (level-triggered unless @ev has
 *              EPOLLET). Returns 0 or -errno (-ENOSPC past 16 watches per
 *              instance). The host removes watches left at destroy/close;
 *              it never closes @fd.
 * @fd_unwatch: stop watching @fd. Returns 0 or -errno. A callback the
 *              event loop already picked up may still be running (or
 *              start) on the event-loop thread when this returns: free
 *              what @arg points to only once no callback can run (at
 *              destroy/close the event loop has stopped).
 * @vm_exit:    ask the VM to stop; the process exits with @status once every
 *              thread has stopped. Any thread; the first request wins.
 * @tty_raw:    put terminal @fd in raw mode; the host restores it at exit,
 *              on fatal signals and at destroy. Returns 0 or -errno.
 * @clock_us:   microseconds since the VMM process started (monotonic).
 * @virtio:     (ABI 1.1) virtio services, see virtio.h; NULL if absent.
 * @storage:    (ABI 1.1) storage backends for devices, see storage.h; NULL
 *              if absent.
 * @net:        (ABI 1.2) packet backends for devices, see net.h; NULL if
 *              absent.
 * @thread_enter: (ABI 1.7) call it first in every thread the plugin
 *              starts: names the thread @name (up to 15 characters) and
 *              confines it with the host's seccomp allow-list for helper
 *              threads (read/write on fds it has, waits, timers, memory)
 *              plus the plugin's declared @syscalls. 0, or -errno: end the
 *              thread (the host has logged why). A thread the plugin
 *              starts without it keeps the filter of the thread that
 *              started it (a vCPU's, during I/O handlers).
 *
 * A plugin reading a member added after 1.0 first checks that @size covers
 * it (CUB_HOST_HAS(h, member)).
 */
struct cub_host {
	uint32_t size;
	void (*log)(struct cub_inst *in, int lvl, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	void (*log_ratelimited)(struct cub_inst *in, int lvl, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	int (*fail)(struct cub_inst *in, int err, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	void *(*gpa_map)(struct cub_inst *in, uint64_t gpa, uint64_t len);
	int (*region_add)(struct cub_inst *in, struct cub_region *r);
	int (*irq_set)(struct cub_inst *in, unsigned line, bool level);
	int (*fd_watch)(struct cub_inst *in, int fd, uint32_t ev, void (*cb)(void *), void *arg);
	int (*fd_unwatch)(struct cub_inst *in, int fd);
	void (*vm_exit)(struct cub_inst *in, int status);
	int (*tty_raw)(struct cub_inst *in, int fd);
	uint64_t (*clock_us)(struct cub_inst *in);
	const struct cub_virtio_host *virtio;
	const struct cub_storage_host *storage;
	const struct cub_net_host *net;
	/* ABI 1.7: */
	int (*thread_enter)(struct cub_inst *in, const char *name);
};

#define CUB_HOST_HAS(h, member) \
	((h)->size >= offsetof(struct cub_host, member) + sizeof((h)->member) && (h)->member)

/*
 * struct cub_device_ops - a device plugin's ops (kind CUB_KIND_DEVICE).
 *
 * @create:  (required) make an instance from @cfg (the plugin's cfg
 *           struct, filled and checked by the host; read-only, valid until
 *           destroy). Claims regions (h->region_add), becomes a virtio
 *           device (h->virtio->add), opens backends (h->storage->open,
 *           h->net->open): all of that only here. Main thread, devices in
 *           config order, before any vCPU or the event loop runs. Returns 0
 *           and *@priv, or -errno after h->fail(). On failure destroy is not
 *           called: free what you made; the host removes regions and
 *           watches and closes backends left open.
 * @destroy: free everything (NULL: nothing is called). Main thread,
 *           after every vCPU and the event-loop thread have stopped; the
 *           host has removed the instance's regions and fd watches and
 *           stopped its virtio queues (stop) first, and closes backends
 *           still open after it returns.
 * @reset:   reserved: this host never calls it. A guest reset (x86 i8042 /
 *           `reboot=k`, a triple fault; ARM64 PSCI SYSTEM_RESET) ends the VM
 *           (exit statuses in cubicle(1)); the control API will reset a VM
 *           in place and call it then. Leave it NULL or make it bring the
 *           device back to its power-on state (0 or -errno).
 *
 * Snapshots (ABI 1.5; read only from plugins built for 1.5 or later). A
 * device's state is a plain-data blob of the plugin's own layout (fixed-
 * width fields, little-endian), versioned by the plugin: the host stores
 * it in the snapshot with @state_version and refuses, with a message naming
 * the device and both versions, to hand a blob of another major version to
 * load. A VM with a device whose plugin has no save cannot be snapshotted
 * (the host names the device). A virtio device saves only its own state:
 * the host saves its transport and queues.
 * @state_version: CUB_STATE_VERSION(major, minor) of the blobs save writes.
 * @save:    (optional) write the device's state into @buf (@cap bytes) and
 *           its length into *@len; 0, or -ENOSPC with the length needed in
 *           *@len (the host calls again with a larger buffer), or -errno
 *           after h->fail(). Called with the VM paused: no vCPU runs, the
 *           event loop serves no fd of the device, no I/O is in flight.
 *           Any thread; must not block on the guest.
 * @load:    (with save) make the device's state the blob's: @len bytes
 *           written by a save of the same major version, @minor the
 *           minor it was written with. A blob comes from a file: check
 *           every field (lengths, indices, enums) and return -EINVAL after
 *           h->fail() naming the bad field, leaving the device as it was.
 *           Called after create, before any vCPU runs (restore), or with
 *           the VM paused (rollback in place).
 */
#define CUB_STATE_VERSION(major, minor) (((uint32_t)(major) << 16) | (uint16_t)(minor))

/* save and load for a device with no state of its own beyond what the host
 * saves (a virtio device whose queues, features and transport registers
 * the host keeps): an empty blob, and only an empty blob loads. */
static inline int cub_state_none_save(void *priv, void *buf, size_t cap, size_t *len)
{
	(void)priv, (void)buf, (void)cap;
	*len = 0;
	return 0;
}

static inline int cub_state_none_load(void *priv, const void *buf, size_t len, uint32_t minor)
{
	(void)priv, (void)buf, (void)minor;
	return len ? -22 /* -EINVAL */ : 0;
}

struct cub_device_ops {
	int (*create)(struct cub_inst *in, const struct cub_host *h, const void *cfg, void **priv);
	void (*destroy)(void *priv);
	int (*reset)(void *priv);
	/* ABI 1.5: */
	uint32_t state_version;
	int (*save)(void *priv, void *buf, size_t cap, size_t *len);
	int (*load)(void *priv, const void *buf, size_t len, uint32_t minor);
};

/*
 * struct cub_syscall - one system call a plugin needs once the VM runs.
 *
 * cubicle confines each of its threads with a seccomp filter before the
 * guest's first instruction (cubicle(1), SECCOMP): a vCPU thread (where
 * I/O handlers run), the event loop (fd callbacks) and helper threads
 * (thread_enter) may make only the calls their kind needs: reads and
 * writes on fds already open, waits, timers, memory, KVM's ioctls. A
 * plugin whose code makes another call once the VM runs declares it here;
 * the host adds it to every thread kind but the signal thread's. Setup
 * (create, open) runs before any filter and needs no declaration.
 *
 * @name:  the kernel's name of the call: "socket", "ioctl". The loader
 *         refuses a plugin naming a call the host's libseccomp does not
 *         know on any of its architectures.
 * @arg:   -1: any arguments. 0-5: allowed only when argument @arg, masked
 *         with @mask, equals @value (ioctl numbers: CUB_SYSCALL_IOCTL).
 *         Several entries for one call allow any of them.
 */
struct cub_syscall {
	const char *name;
	int arg;
	uint64_t mask, value;
};

#define CUB_SYSCALL(n) { .name = (n), .arg = -1, .mask = 0, .value = 0 }
#define CUB_SYSCALL_ARG(n, i, m, v) { .name = (n), .arg = (i), .mask = (m), .value = (v) }
/* An ioctl with request @req, whatever fd it is made on. */
#define CUB_SYSCALL_IOCTL(req) CUB_SYSCALL_ARG("ioctl", 1, 0xffffffffu, (uint32_t)(req))

/*
 * struct cub_plugin - the descriptor each plugin exports as `cubicle_plugin`
 * (CUB_PLUGIN). The host reads it after dlopen and before running any
 * plugin code; a plugin has no constructors.
 *
 * @abi_major, @abi_minor: the headers it was built with (CUB_PLUGIN_ABI).
 * @size:      sizeof(struct cub_plugin) when built; members past it are
 *             read as absent.
 * @kind:      CUB_KIND_DEVICE, _STORAGE or _NET: which ops @ops points to.
 * @name:      what configs say in `type = "..."`: 1-64 of a-z 0-9 - _.
 *             Plugins are found by this name, not by file name (below).
 * @version, @license, @summary: shown by `cubicle plugins`.
 * @cfg_size:  the size of the cfg struct the host allocates, zeroes, fills
 *             from @params and passes to create/open read-only.
 * @params, @n_params:   the parameter table (struct cub_param).
 * @methods, @n_methods: control methods (struct cub_method); may be 0.
 * @ops:       const struct cub_{device,storage,net}_ops *; required.
 * @abi_needs: (ABI 1.4) the oldest host ABI minor the plugin works with:
 *             the highest "ABI 1.N" feature it uses. 0 means abi_minor.
 * @param_size: (ABI 1.4) sizeof(struct cub_param) when built, so the host
 *             can walk the tables of plugins built with other headers.
 * @syscalls, @n_syscalls: (ABI 1.7) the system calls the plugin's code
 *             makes once the VM runs beyond the host's allow-lists (see
 *             struct cub_syscall); may be 0.
 * @host_check: (ABI 1.4; optional) probe what the plugin needs from the
 *             host (kernel features, permissions; tap: BPF) for
 *             `cubicle check-host`: write one line into @line and return 0
 *             if usable, or a negative errno if not. Main thread; no
 *             instance exists. NULL: nothing to check.
 *
 * The loader refuses a file (with one message naming it) unless
 * abi_major == the host's major and needs <= the host's minor, where needs
 * is abi_needs when @size covers it and it is nonzero, else abi_minor; then
 * it checks @size, @kind, @name, that @ops has the ops its kind must have
 * (device: create; storage: open, close, info, readv, writev, flush; net:
 * open, close, info, send, recv), every param (name, type, slot inside
 * @cfg_size, enum choices, the rules above) and every method signature.
 *
 * Search order: each --plugin-dir, the folders of CUBICLE_PLUGIN_PATH
 * (colon-separated), then the build tree's plugins when cubicle runs from
 * its build folder, else the installed folder (`pkg-config
 * --variable=plugindir cubicle-plugin`). Every *.so there is read, in
 * alphabetical order per folder. When two plugins of one kind share a name,
 * the first found wins and the later one is skipped with a warning.
 */
struct cub_plugin {
	uint32_t abi_major, abi_minor;
	uint32_t size;
	enum cub_kind kind;
	const char *name, *version, *license;
	const char *summary;
	size_t cfg_size;
	const struct cub_param *params;
	unsigned n_params;
	const struct cub_method *methods;
	unsigned n_methods;
	const void *ops;
	/* ABI 1.4 (read only when size covers them): */
	uint32_t abi_needs;
	uint32_t param_size;
	int (*host_check)(char *line, size_t len);
	/* ABI 1.7: */
	const struct cub_syscall *syscalls;
	unsigned n_syscalls;
};

/* The descriptor's header: ABI version, sizes, and the oldest host minor
 * the plugin needs (the highest "ABI 1.N" feature it uses), so a plugin
 * built against newer headers still loads into an older host:
 *   CUB_PLUGIN({ CUB_PLUGIN_ABI(4), .kind = ..., .name = ..., ... });
 * Pass at least 1: 0 means "abi_minor", i.e. the headers' own minor. Hosts
 * older than 1.4 do not read abi_needs and refuse any abi_minor above
 * theirs, so it pays from 1.4 on: a plugin built against 1.5 headers with
 * CUB_PLUGIN_ABI(4) still loads into a 1.4 host. */
#define CUB_PLUGIN_ABI(needs)                                                       \
	.abi_major = CUB_ABI_MAJOR, .abi_minor = CUB_ABI_MINOR, .abi_needs = (needs), \
	.size = sizeof(struct cub_plugin), .param_size = sizeof(struct cub_param)

#define CUB_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define CUB_PLUGIN(...)                                                                      \
	__attribute__((visibility("default"), used)) const struct cub_plugin cubicle_plugin = \
		__VA_ARGS__

#ifdef __cplusplus
}
#endif
#endif
