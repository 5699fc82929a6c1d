/* SPDX-License-Identifier: Apache-2.0 */
#ifndef CUBICLE_SERVE_RMTREE_H
#define CUBICLE_SERVE_RMTREE_H

#include <stddef.h>

/* Removes @path, a file or a folder and all it holds: 0, or -1 with errno
 * (ENOENT when @path is not there). Below the folder that holds @path,
 * everything goes by names relative to an open folder, never through a
 * link (a link is removed, not followed; one swapped in for a folder while
 * it runs, by whoever may write there, is removed as a link) and never
 * onto another file system (a mount in it is left, with its folders). */
int rm_tree(const char *path);
/* Takes over the folder @from, which another uid wrote (a jailed VMM's
 * snapshot, whose guest may have taken that VMM over): moved to @to (same
 * file system), then every entry must be a folder or a regular file with
 * one link (no symbolic link, device, socket or fifo) and is made root's
 * and writable by root alone (the mode's read and execute bits kept). The
 * writer has ended. 0, or -1 with @msg naming the entry; what was taken
 * stays at @to either way. Root only (chown). */
int adopt_tree(const char *from, const char *to, char *msg, size_t len);

/* Copies the flat folder @from, which another uid wrote and may still
 * write (a running VMM's snapshot: its guest may have taken that VMM
 * over, and it may keep descriptors of what it wrote), into a new folder
 * @to made here: each entry must be a regular file with one link, opened
 * without following links and checked on its descriptor; each is copied
 * (a reflink where the file system can) into a new root file of the same
 * name, its mode's read and execute bits kept, and its name in @from
 * removed. At most 256 entries. 0, or -1 with @msg naming the entry (then
 * @to is removed; what was taken from @from is not put back). */
int take_copy(const char *from, const char *to, char *msg, size_t len);

#endif
