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
#define CUB_ABI_MINOR 4 /* bump: members appended / new optional ops */
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
 *      write_zeroes. */

enum cub_kind { CUB_KIND_DEVICE = 1, CUB_KIND_STORAGE, CUB_KIND_NET };

/* Parameter types. Widths in the plugin's cfg struct:
 * BOOL bool, INT int64_t, U64 uint64_t, SIZE uint64_t (bytes; config may say
 * "64M"), STR const char * (owned by the host, valid until destroy),
 * ENUM int (index into choices), STRV (ABI 1.3) const char *const *: a
 * NULL-terminated array from a config list or array of strings
 * ([ "a", "b" ]; a default is written "a,b"; "" is the empty list), owned
 * by the host like STR.
 *
 * A parameter name with one dot (ABI 1.3), "policy.allow", is the key
 * `allow` inside a nested group `policy = { ... };` of the instance's
 * group. The group is optional: without it every "policy.*" slot stays
 * zero (NULL, false, 0), so the plugin can tell it was not given; with it,
 * defaults apply and a param without one is required, as at the top level. */
enum cub_ptype { CUB_P_BOOL, CUB_P_INT, CUB_P_U64, CUB_P_SIZE, CUB_P_STR, CUB_P_ENUM,
		 CUB_P_STRV,
		 /* ABI 1.4: */
		 CUB_P_PATH, CUB_P_STORAGE, CUB_P_NET };

struct cub_param {
	const char *name;           /* key inside the instance's libconfig group */
	enum cub_ptype type;
	size_t offset;              /* offsetof(struct <plugin>_cfg, field) */
	const char *def;            /* default as text; NULL means required */
	const char *const *choices; /* CUB_P_ENUM only, NULL-terminated */
	const char *doc;            /* one line, printed by `cubicle plugins NAME` */
	/* ABI 1.4 (read only from plugins whose param_size covers them): */
	const char *min, *max;      /* INT, U64, SIZE: inclusive bounds as text
				     * ("1", "4K"); NULL: no bound */
};

/* A reply a control method fills: a short text the caller prints. */
struct cub_reply {
	char text[512];
	size_t len;
};

/*
 * A control method, called from the control channel through libffi.
 * sig: the arguments after (priv, reply), one letter each, D-Bus style:
 *   b bool (int), i int32_t, u uint32_t, x int64_t, t uint64_t, s const char *.
 * fn's real type: int fn(void *priv, struct cub_reply *reply, ...args);
 * it returns 0 or a negative errno.
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

/* Exit statuses a device may ask the VM to end with (vm_exit). */
enum { CUB_EXIT_OK = 0, CUB_EXIT_ERROR = 1 };

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
 *              return @err (a negative errno). The core prints it once.
 * @gpa_map:    host pointer to guest physical [gpa, gpa+len), or NULL if any
 *              byte is outside guest RAM or the sum overflows. Any thread.
 * @region_add: claim a PIO or MMIO region of a class; the arch layout picks
 *              base and irq and writes them back into @r. Create time only.
 * @irq_set:    drive interrupt @line to @level. Any thread.
 * @fd_watch:   call @cb(@arg) on the event-loop thread whenever @fd has any of
 *              the epoll events @ev. Returns 0 or -errno.
 * @fd_unwatch: stop watching @fd. Returns 0 or -errno.
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
};

#define CUB_HOST_HAS(h, member) \
	((h)->size >= offsetof(struct cub_host, member) + sizeof((h)->member) && (h)->member)

/*
 * struct cub_device_ops - a device plugin's ops (kind CUB_KIND_DEVICE).
 *
 * @create:  make an instance from @cfg (the plugin's cfg struct, filled by the
 *           host from defaults and config; read-only, valid until destroy).
 *           Claims regions through h->region_add. Main thread. Returns 0 or
 *           -errno after h->fail(). On failure destroy is not called.
 * @destroy: free everything; regions and fd watches are already gone. Main
 *           thread, after all vCPU and event-loop threads have stopped.
 * @reset:   (optional) back to power-on state; default: nothing to do.
 */
struct cub_device_ops {
	int (*create)(struct cub_inst *in, const struct cub_host *h, const void *cfg, void **priv);
	void (*destroy)(void *priv);
	int (*reset)(void *priv);
};

/* The descriptor each plugin exports as `cubicle_plugin`. */
struct cub_plugin {
	uint32_t abi_major, abi_minor;
	uint32_t size; /* sizeof(struct cub_plugin) when built: lets us append */
	enum cub_kind kind;
	const char *name, *version, *license;
	const char *summary; /* one line for `cubicle plugins` */
	size_t cfg_size;     /* host allocates, fills defaults + config, passes const */
	const struct cub_param *params;
	unsigned n_params;
	const struct cub_method *methods;
	unsigned n_methods;
	const void *ops; /* const struct cub_{device,storage,net}_ops * */
	/* ABI 1.4 (read only when size covers them): */
	uint32_t abi_needs;  /* oldest host ABI minor this plugin works with;
			      * 0 means abi_minor */
	uint32_t param_size; /* sizeof(struct cub_param) when built */
	/* (optional) probe what this plugin needs from the host (kernel
	 * features, permissions) for `cubicle check-host`: write one line into
	 * @line and return 0 if usable, or a negative errno if not. Main
	 * thread; no instance exists. */
	int (*host_check)(char *line, size_t len);
};

/* The descriptor's header: ABI version, sizes, and the oldest host minor
 * the plugin needs (the highest "ABI 1.N" feature it uses), so a plugin
 * built against newer headers still loads into an older host. */
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
