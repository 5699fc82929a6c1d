/* SPDX-License-Identifier: Apache-2.0 */
/* A client connection to a Unix stream socket that never waits. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "unixconn.h"

int unix_connect_nofollow(const char *path)
{
	char via[64];
	struct stat st;
	int pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC), fd, e;

	if (pfd < 0)
		return -1;
	if (fstat(pfd, &st) < 0)
		e = errno;
	else
		e = S_ISSOCK(st.st_mode) ? 0 : S_ISLNK(st.st_mode) ? ELOOP : ENOTSOCK;
	if (e) {
		close(pfd);
		return errno = e, -1;
	}
	/* the socket the fd holds, through its /proc/self/fd link: not a name
	 * that can be swapped for a link in between */
	snprintf(via, sizeof(via), "/proc/self/fd/%d", pfd);
	fd = unix_connect(via);
	e = errno;
	close(pfd);
	errno = e;
	return fd;
}

int unix_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return errno = ENAMETOOLONG, -1;
	strcpy(a.sun_path, path);
	/* Non-blocking: a stream socket's connect() waits, with no limit, while
	 * the listener's backlog is full, and a VMM that stopped accepting
	 * fills it with the connections each retry gives up on. Then connect()
	 * fails at once with EAGAIN, and the socket is made blocking again. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		int e = errno;

		close(fd);
		return errno = e, -1;
	}
	return fd;
}
