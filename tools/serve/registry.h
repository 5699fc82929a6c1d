/* SPDX-License-Identifier: Apache-2.0 */
/* Images pulled from a container registry (registry.c, libcurl). */
#ifndef CUBICLE_SERVE_REGISTRY_H
#define CUBICLE_SERVE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

/* An image reference taken apart: [HOST[:PORT]/]PATH[:TAG][@DIGEST]. */
struct reg_ref {
	char host[256];  /* registry-1.docker.io when the reference names none */
	char path[256];  /* library/NAME for Docker Hub's official images */
	char ref[160];   /* the digest when given, else the tag (latest) */
	bool http;       /* plain HTTP: a registry on this machine (localhost, 127.x, [::1]) */
};

/* Takes REF apart as docker does; 0, or -1 with a message in MSG. */
int registry_parse(const char *ref, struct reg_ref *r, char *msg, size_t len);

/*
 * Pulls image REF into WORK (an empty folder) as an OCI image layout
 * (oci-layout, index.json naming the image manifest, blobs/ALG/HEX): for
 * an image index or docker manifest list, the manifest of linux and this
 * host's architecture. Every manifest and blob is checked against its
 * digest as it arrives. USER and PASSWORD (both or neither) are the
 * registry's credentials, for its token service or Basic authentication;
 * without them an anonymous token is asked where the registry wants one.
 * One progress line per layer goes to stderr. Writes the image manifest's
 * digest to DIGEST (REG_DIGEST_MAX bytes). 0, or -1 with a message in MSG.
 */
#define REG_DIGEST_MAX 137 /* "sha512:" and 128 hex digits */
int registry_pull(const char *ref, const char *user, const char *password, const char *work, char *digest,
		  char *msg, size_t len);

#endif
