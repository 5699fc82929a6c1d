/* SPDX-License-Identifier: Apache-2.0 */
/* The plan: one VM description (config file + --set today, the control API
 * next) resolved and checked as a whole before any plugin code runs: the
 * machine, the boot files, and every device and nested backend with its
 * plugin and its filled cfg struct. Nothing after the plan sees libconfig. */
#ifndef CUBICLE_PLAN_H
#define CUBICLE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "cnode.h"
#include "cubicle/plugin.h"

struct plugin;
struct registry;

enum boot_format { BOOT_AUTO = 0, BOOT_BZIMAGE, BOOT_ELF, BOOT_FLAT };
enum boot_mode { BOOT_MODE_REAL = 0, BOOT_MODE_PROTECTED, BOOT_MODE_LONG };
/* Who decompresses a compressed kernel (x86 bzImage): cubicle, before the
 * guest starts, or the kernel's own decompressor in the guest. */
enum boot_decompress { BOOT_DECOMPRESS_VMM = 0, BOOT_DECOMPRESS_GUEST };

struct boot_cfg {
	const char *kernel;  /* path, ~ and ${VAR} expanded, relative to the config */
	const char *initrd;  /* NULL if none */
	const char *cmdline; /* "" if none */
	enum boot_format format;
	enum boot_mode mode; /* flat payloads only */
	enum boot_decompress decompress;
	uint64_t load_addr;  /* flat payloads only: where the image goes */
	uint64_t entry;      /* flat payloads only: first instruction (default load_addr) */
	/* Where the keys were given, for arch checks; NULL when absent. */
	const char *where, *where_format, *where_mode;
};

struct plan_backend;

/* One plugin instance: a device, or a backend nested in one. */
struct plan_inst {
	const struct plugin *plugin;
	const char *name;       /* "virtio-blk[disk0]", "raw[disk0]" */
	const char *id;         /* the device's id ("disk0") */
	const char *where;      /* "vm.cfg:12": its group */
	void *cfg;              /* the plugin's cfg struct, filled and checked */
	const char *transport;  /* devices: "pci", "mmio", or NULL for the arch default */
	struct plan_backend *backends;
	unsigned n_backends;
};

/* A backend group of a device: its key ("backend"), kind and instance. */
struct plan_backend {
	const char *key;
	enum cub_kind kind;
	struct plan_inst inst;
};

struct plan {
	struct arena ar;      /* owns everything below */
	const char *path;     /* the config file as given; "" for an API-built plan */
	const char *dir;      /* its folder (relative paths); NULL: paths stay as given */
	unsigned vcpus;
	uint64_t memory_mib;
	int log_level;
	bool host_check;
	bool track_dirty;     /* machine.track_dirty_pages: log dirty pages (Diff snapshots) */
	bool no_pit;          /* machine.pit = false: x86 gets no in-kernel PIT */
	bool split_irqchip;   /* machine.irqchip = "split": x86's LAPICs in KVM, the
			       * IOAPIC in cubicle, no 8259 and no PIT */
	bool thp;             /* machine.thp: RAM on transparent huge pages (mem_create_thp);
			       * default: true but for a flat payload */
	struct boot_cfg boot;
	struct plan_inst *devs;
	unsigned n_devs;
	const char *api_socket; /* api.socket (relative: to dir), or NULL */
	const char *api_id;     /* api.id, or NULL */
	const char *api_paths;  /* api.paths: folders the API may use, ':'-separated (absolute), or NULL */
	const struct cnode *root; /* the tree it was built from (a snapshot records it) */
	bool restoring;       /* set before plan_build by snap_plan: the boot files are
			       * named, not looked at (a restore reads neither, and a
			       * jailed one has them not) */
};

#define PLAN_MAX_VCPUS 64

/*
 * Build p from the tree root (a whole VM description), resolving plugins in
 * reg. path names the source in messages; dir is the base of relative paths
 * (NULL: keep them as given). 0, or -errno with one line "WHERE: what is
 * wrong; what was expected" in err. p->ar must be set up (zeroed) and owns
 * root's memory too, or not: the plan copies nothing it does not need.
 */
int plan_build(struct plan *p, const struct cnode *root, const char *path, const char *dir,
	       const struct registry *reg, char *err, size_t errlen);
/* Only the devices list (tests, and the API's device endpoints). */
int plan_devices(struct plan *p, const struct cnode *list, const struct registry *reg, char *err,
		 size_t errlen);
/* A config file with --set overrides: config_load_file + plan_build. */
int plan_load(struct plan *p, const char *path, char *const *sets, unsigned n_sets,
	      const struct registry *reg, char *err, size_t errlen);
/* plan_load in two steps, for a caller that loads only the plugins the
 * file names: read the file and overrides into *root (in p's arena), then
 * build the plan from it. */
int plan_read(struct plan *p, const char *path, char *const *sets, unsigned n_sets,
	      struct cnode **root, char *err, size_t errlen);
int plan_build_file(struct plan *p, const struct cnode *root, const char *path,
		    const struct registry *reg, char *err, size_t errlen);
/* Every "type" a tree names, at any depth (the plugins it needs): NULL-ended
 * and malloc'd (strv_free), or NULL when out of memory or the tree names
 * none. */
char **plan_type_names(const struct cnode *root);
/* The devices list of a config text alone (unit tests, benchmarks). */
int plan_devices_text(struct plan *p, const char *text, const char *path, const char *dir,
		      const struct registry *reg, char *err, size_t len);
void plan_free(struct plan *p);

/* The backend group key of a planned instance, or NULL. */
const struct plan_backend *plan_backend(const struct plan_inst *pi, const char *key);

#endif
