/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshots of a whole VM: a folder holding `memory` (guest RAM, raw and
 * sparse), `state` (state.h: machine, vCPUs, devices) and `manifest.json`
 * (format, arch, CPU, the VM's description, sizes and checksums). Created
 * from a paused VM, restored into a new process (the memory file mapped
 * private: lazy, shared page cache between clones), or rolled back in
 * place. */
#ifndef CUBICLE_SNAPSHOT_H
#define CUBICLE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snap/state.h"

struct vm;
struct cub_inst;
struct plan;
struct registry;

/* What a snapshot needs of a VM. */
struct snap_vm {
	struct vm *vm;
	struct cub_inst *const *insts;
	unsigned n_insts;
	const struct plan *plan;
};

/* What a create or a load did, for the API's reply and the benchmarks. */
struct snap_stats {
	uint64_t mem_bytes;      /* guest RAM */
	uint64_t mem_written;    /* bytes of it that were not zero (written) */
	uint64_t state_bytes;
	uint64_t us_state, us_memory, us_total; /* microseconds */
};

/*
 * Write a snapshot of the paused VM @v into the folder @dir, Full, or with
 * @diff only the pages written since the last snapshot it made, restored
 * or rolled back to (its parent, which the manifest names; needs
 * machine.track_dirty_pages). Made as
 * DIR.tmp (every file and the folder fsync'd), then renamed to DIR; an
 * existing DIR is swapped out whole and removed. 0, or -errno with one line
 * in err (nothing at DIR changed then). Every device must be able to save
 * its state: the first that cannot is named.
 */
int snap_create(const struct snap_vm *v, const char *dir, bool diff, struct snap_stats *st,
		char *err, size_t errlen);

/* An opened snapshot: its manifest and state read and checked, its memory
 * file open. */
struct snap_image {
	char *dir;
	void *state_buf;     /* the state file, which r points into */
	struct snap_r r;
	int mem_fd;
	uint64_t mem_bytes;
	unsigned vcpus;
	uint64_t memory_mib;
	void *manifest;      /* json_t * */
	int *diffs;          /* a Diff's chain: the memory files to lay over mem_fd's, oldest first */
	unsigned n_diffs;
};

/* Open @dir: read and check manifest.json and state (format, arch, CPU,
 * checksums, the memory file's size). 0, or -errno with one line in err
 * naming the file and what is wrong. snap_close in every case. */
int snap_open(struct snap_image *im, const char *dir, char *err, size_t errlen);
/* The VM description the snapshot recorded, as a plan (p zeroed), with
 * @sets applied first ("devices.ID.backend.path=...", as --set): a clone's
 * own socket or tap. The machine must stay the snapshot's. */
int snap_plan(struct snap_image *im, struct plan *p, const struct registry *reg,
	      char *const *sets, unsigned n_sets, char *err, size_t errlen);
/* Hand over the memory file's fd (vm_create_restored takes it): a Full
 * snapshot's, or a Diff's Full ancestor's. */
int snap_take_mem_fd(struct snap_image *im);
/* A Diff: copy each Diff's pages of the chain into @m, oldest first (its
 * cost is the pages that changed, not RAM). 0 or -errno with err. */
struct guest_mem;
int snap_apply_diffs(const struct snap_image *im, struct guest_mem *m, char *err, size_t errlen);
/* Put the snapshot's device, machine and vCPU state into @v: a VM made by
 * vm_create_restored from it, or (rollback) the same VM paused. */
int snap_load_state(const struct snap_vm *v, const struct snap_image *im, char *err,
		    size_t errlen);
void snap_close(struct snap_image *im);

/* Pause to disk, after snap_create(@dir) of the same paused VM: guest RAM
 * becomes a private mapping of @dir/memory (the same bytes), so the pages
 * it held are freed. 0 or -errno with err (RAM unchanged). */
int snap_release_memory(const struct snap_vm *v, const char *dir, char *err, size_t errlen);

/* Roll the paused VM @v back to snapshot @dir in place: its RAM becomes a
 * private mapping of the snapshot's memory (O(1)), its state the
 * snapshot's. The snapshot must be of this VM (same machine and devices).
 * 0, or -errno with err (the VM is then unchanged, or its state partly
 * loaded when a device refused its blob: err says which). */
int snap_rollback(const struct snap_vm *v, const char *dir, struct snap_stats *st, char *err,
		  size_t errlen);

/*
 * disks.c: writable disks. A snapshot holds a copy of each writable disk
 * ("disk-ID"), made by its storage backend's snapshot op (a reflink where
 * the file system can, else a copy); read-only disks are the config's own
 * files, as they are.
 *
 * snap_disks_check: every writable disk's backend has a snapshot op (else
 *   -ENOTSUP naming it). snap_disks_save: make the copies in @dir; *@out
 *   the manifest's "disks" (json_t *).
 * snap_disks_restore: each disk's copy cloned to the file its backend's
 *   `path` names in @p (after --set): a restore's own disk. That file must
 *   not exist (-EEXIST, saying how to name another): nothing is
 *   overwritten. @made lists the files made; snap_disks_undo removes them
 *   (a restore that failed later), snap_disks_free forgets them.
 * snap_disks_rollback: each disk's backend rollback op with the copy (the
 *   same writable disks checked first, before any changes).
 */
struct snap_disks_made {
	const char **paths;
	size_t n;
};
int snap_disks_check(const struct snap_vm *v, char *err, size_t errlen);
int snap_disks_save(const struct snap_vm *v, const char *dir, void **out, char *err,
		    size_t errlen);
size_t snap_disks_count(const struct snap_image *im);
int snap_disks_restore(const struct snap_image *im, const struct plan *p,
		       struct snap_disks_made *made, char *err, size_t errlen);
void snap_disks_undo(struct snap_disks_made *made);
void snap_disks_free(struct snap_disks_made *made);
int snap_disks_rollback(const struct snap_vm *v, const struct snap_image *im, char *err,
			size_t errlen);

/*
 * zst.c: memory.zst, the memory file compressed (zstd's seekable format,
 * 1 MiB frames: `zstd -d memory.zst` gives the raw file back).
 * snap_compress: DIR's memory into memory.zst by @o->threads threads (0:
 *   one per CPU, at most 16) at zstd level @o->level (0: 3); the manifest
 *   then names it and memory is removed. Full snapshots only. A progress
 *   line on a terminal for 256 MiB or more.
 * snap_zst_memfd: decompress @path (which must hold @bytes) by @threads
 *   threads into a new memfd, *@fd (all-zero frames are not written: the
 *   memfd stays sparse). snap_open does this for a snapshot whose manifest
 *   names memory.zst, so a restore or rollback maps it like a memory file.
 */
struct snap_zst_opts {
	unsigned threads;
	int level;
};
struct snap_zst_stats {
	uint64_t in_bytes, out_bytes, us;
	uint32_t frames;
	unsigned threads;
};
unsigned snap_zst_threads(void);
int snap_compress(const char *dir, const struct snap_zst_opts *o, struct snap_zst_stats *st,
		  char *err, size_t errlen);
int snap_zst_memfd(const char *path, uint64_t bytes, unsigned threads, int *fd, char *err,
		   size_t errlen);

/* The most Diff snapshots over one Full. */
#define SNAP_DIFF_DEPTH_MAX 64

/* manifest.c: the VM description tree as JSON and back (tagged: a text
 * value given on the command line is {"=": "..."}). */
struct cnode;
struct arena;
void *snap_tree_to_json(const struct cnode *n);
struct cnode *snap_tree_from_json(struct arena *ar, const void *json, const char *where,
				  char *err, size_t errlen);
/* The plugins the VM description in DIR/manifest.json names (every "type"),
 * NULL-ended and malloc'd (strv_free), or NULL when it cannot be read
 * (snap_open then says why): a restore loads only those. */
char **snap_plugin_names(const char *dir);
/* @dir and, for a Diff, each parent down to its Full (what a restore of it
 * reads): NULL-ended and malloc'd (strv_free), or NULL when a manifest
 * on the way cannot be read (the restore then says why). */
char **snap_chain_dirs(const char *dir);

#endif
