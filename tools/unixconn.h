/* SPDX-License-Identifier: Apache-2.0 */
/* A client connection to a Unix stream socket that never waits (cubicle
 * serve, template, exec and cp reach VMM and vsock sockets so). */
#ifndef CUBICLE_TOOLS_UNIXCONN_H
#define CUBICLE_TOOLS_UNIXCONN_H

/* A connected, blocking Unix socket, or -1 (errno; EAGAIN: the listener's
 * backlog is full, it is not accepting). Never waits. */
int unix_connect(const char *path);

#endif
