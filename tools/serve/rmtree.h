/* SPDX-License-Identifier: Apache-2.0 */
#ifndef CUBICLE_SERVE_RMTREE_H
#define CUBICLE_SERVE_RMTREE_H

/* Removes @path, a file or a folder and all it holds (not following
 * links): 0, or -1 with errno (ENOENT when @path is not there). */
int rm_tree(const char *path);

#endif
