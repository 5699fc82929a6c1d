/* SPDX-License-Identifier: Apache-2.0 */
/* A client connection to a Unix stream socket that never waits (cubicle
 * serve, template, exec and cp reach VMM and vsock sockets so). */
#ifndef CUBICLE_TOOLS_UNIXCONN_H
#define CUBICLE_TOOLS_UNIXCONN_H

/* A connected, blocking Unix socket, or -1 (errno; EAGAIN: the listener's
 * backlog is full, it is not accepting). Never waits. */
int unix_connect(const char *path);
/* The same for a socket whose name others may replace (a jailed VMM's, in a
 * folder its uid writes): a symbolic link there is refused (ELOOP), as is
 * anything but a socket (ENOTSOCK); the socket opened is the one connected
 * to. */
int unix_connect_nofollow(const char *path);

#endif
