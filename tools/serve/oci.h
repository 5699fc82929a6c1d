/* SPDX-License-Identifier: Apache-2.0 */
/* Root file systems for `cubicle template build`: an OCI image archive
 * unpacked (oci.c, libarchive), an ext4 image made of a folder. */
#ifndef CUBICLE_SERVE_OCI_H
#define CUBICLE_SERVE_OCI_H

#include <stddef.h>

#include <jansson.h>

/*
 * Unpacks the image in ARCHIVE, an OCI image layout tarball (`podman save
 * --format oci-archive`, `skopeo copy ... oci-archive:`) or a `docker save`
 * tarball, into ROOT (an empty folder): its layers in order, whiteouts
 * (.wh.NAME, .wh..wh..opq) honoured, modes, owners (numeric uid/gid),
 * times and extended attributes kept. WORK is a folder for the archive's
 * blobs (emptied by the caller). Layers are written by a child process
 * chrooted into ROOT, so no entry or link in an image reaches outside it:
 * needs root. ARCHIVE NULL: WORK already holds an OCI image layout
 * (registry_pull's). Returns 0, or -1 with a message in MSG.
 */
int oci_unpack(const char *archive, const char *root, const char *work, char *msg, size_t len);

/* The image's run-time config (the config blob's "config": Env, WorkingDir,
 * User, Cmd...) of the image oci_unpack unpacked from WORK (still there),
 * checked against its digest; NULL with a message in MSG. */
json_t *oci_image_config(const char *work, char *msg, size_t len);

/* Whether oci_unpack is built (libarchive found at configure time). */
extern const int oci_available;

#endif
