/* SPDX-License-Identifier: Apache-2.0 */
/* Reaching a VM's cubicle-agent: the vsock socket (or the API socket that names it), curl over it. */
#ifndef CUBICLE_EXEC_AGENTCONN_H
#define CUBICLE_EXEC_AGENTCONN_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>

#include "stream.h"

#define AGENT_PORT 49983

struct agent {
	const char *vm;      /* the path given: a vsock socket or an API socket */
	char *uds;           /* the vsock socket, once agent_resolve found it */
	unsigned port;       /* the guest port the agent listens on */
	long timeout_ms;     /* for reaching the agent (not for the calls) */
	const char *token;   /* X-Access-Token, or NULL */
	const char *user;    /* the guest user (Authorization: Basic), or NULL */
	const char *prog;    /* "cubicle exec", for messages */
	bool quiet;
	bool refused;        /* the last handshake found no listener */
	int fd_new;          /* a connection curl opened, not handshaken yet */          /* agent_unary: keep its message in err, do not print it */
	char why[256];       /* why the last connection failed */
	char err[512];       /* why the last agent_unary failed */
};

/*
 * Find the vsock socket: the VM path is the vsock socket when it answers the
 * CONNECT handshake (OK, or closed: nothing listens yet), an API socket when
 * it answers HTTP (then GET /vm/config names vsock.uds_path). Prints one
 * message and returns -1 when neither works.
 */
int agent_resolve(struct agent *a);

/*
 * A curl handle for http://agent<path> whose connections to the vsock socket
 * begin with its handshake (CONNECT port / OK), with the token and user headers and
 * extra header lines hdr (NULL-terminated, may be NULL). *list receives the
 * header list to free after the transfer.
 */
CURL *agent_curl(struct agent *a, const char *path, const char *const *hdr,
		 struct curl_slist **list);

/* curl_easy_perform, again while nothing listens in the guest (the agent may
 * be starting) until a->timeout_ms has passed. */
CURLcode agent_perform(struct agent *a, CURL *c);

/* After a failed transfer: a message for curl's code (the handshake's own
 * reason when the connection could not be made). */
const char *agent_curl_error(struct agent *a, CURLcode rc);

/*
 * A unary Connect call (POST /service/Method, JSON both ways) with a
 * timeout. Returns 0 with *out the reply (may be NULL), or -1 with the
 * reason (the agent's code and message when it refused) in a->err, also
 * printed unless a->quiet.
 */
int agent_unary(struct agent *a, const char *method, json_t *req, json_t **out, long timeout_ms);

/* percent-encode s for a query string (free it); NULL when out of memory */
char *agent_urlencode(const char *s);

#endif
