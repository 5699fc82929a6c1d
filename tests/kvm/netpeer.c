/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netpeer: the far end of a socket net backend for the payload tests.
 *
 *   netpeer OWN_PATH PEER_PATH BIG SMALL
 *
 * Binds a Unix datagram socket at OWN_PATH, waits (up to 2 minutes) until
 * PEER_PATH (the VM's socket) exists, then sends frames to it forever, one
 * of BIG bytes then one of SMALL bytes, with blocking sends: when the VM
 * stops taking frames, netpeer stops too. On SIGTERM or SIGINT it prints
 * "sent N frames" and exits 0; 1 when the socket could not be set up.
 *
 *   netpeer --sink OWN_PATH
 *
 * Binds OWN_PATH and prints "frame LEN" (flushed) for every frame that
 * arrives, until killed: the far end that counts what a guest sends.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int addr_of(const char *path, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(a->sun_path)) {
		fprintf(stderr, "netpeer: %s: path too long for a Unix socket\n", path);
		return -1;
	}
	strcpy(a->sun_path, path);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_un own, peer;
	struct sigaction sa;
	unsigned long sent = 0;
	size_t big, small;
	static unsigned char frame[65550];
	int fd, tries = 0;

	if (argc == 3 && !strcmp(argv[1], "--sink")) {
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		unlink(argv[2]);
		if (fd < 0 || addr_of(argv[2], &own) || bind(fd, (struct sockaddr *)&own, sizeof(own))) {
			fprintf(stderr, "netpeer: %s: %s\n", argv[2], strerror(errno));
			return 1;
		}
		for (;;) {
			ssize_t n = recv(fd, frame, sizeof(frame), 0);

			if (n < 0 && errno != EINTR)
				return 1;
			if (n >= 0) {
				printf("frame %zd\n", n);
				fflush(stdout);
			}
		}
	}
	if (argc != 5) {
		fprintf(stderr, "usage: netpeer OWN_PATH PEER_PATH BIG SMALL\n");
		return 1;
	}
	big = strtoul(argv[3], NULL, 0);
	small = strtoul(argv[4], NULL, 0);
	if (big < 14 || small < 14 || big > 65550 || small > 65550) {
		fprintf(stderr, "netpeer: frame sizes must be 14..65550 bytes\n");
		return 1;
	}
	if (addr_of(argv[1], &own) || addr_of(argv[2], &peer))
		return 1;
	memset(frame, 0xff, 6);		     /* broadcast */
	memcpy(frame + 6, "\x02\0\0\0\0\x01", 6); /* a local unicast source */
	frame[12] = 0x88;		     /* an experimental EtherType */
	frame[13] = 0xb5;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: a blocked send ends */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	unlink(argv[1]);
	if (fd < 0 || bind(fd, (struct sockaddr *)&own, sizeof(own))) {
		fprintf(stderr, "netpeer: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	while (!stop && connect(fd, (struct sockaddr *)&peer, sizeof(peer))) {
		if (++tries > 12000) {
			fprintf(stderr, "netpeer: %s never appeared\n", argv[2]);
			return 1;
		}
		usleep(10000);
	}
	while (!stop) {
		size_t len = sent % 2 ? small : big;

		if (send(fd, frame, len, 0) < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ECONNREFUSED || errno == ENOENT) /* the VM went away */
				break;
			fprintf(stderr, "netpeer: send: %s\n", strerror(errno));
			return 1;
		}
		sent++;
	}
	/* Flushed here: should anything end the process early (a sanitizer's
	 * report), the count is written already. */
	printf("sent %lu frames\n", sent);
	fflush(stdout);
	close(fd);
	unlink(argv[1]);
	return 0;
}
