/* SPDX-License-Identifier: Apache-2.0 */
/* Template builds through E2B's SDK (Template.build): requests, uploads, the build thread (build.c). */
#ifndef CUBICLE_SERVE_BUILD_H
#define CUBICLE_SERVE_BUILD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "hio.h"

/* The template a create or a build's fromTemplate names: @in itself, or
 * for "NAME:TAG" with no template of that name, NAME when TAG is "default"
 * or one of the tags its SDK build was given. */
void template_resolve(const char *in, char *out, size_t len);
/* POST /v3/templates {name "NAME[:TAG]", tags, cpuCount, memoryMB}: a build
 * waiting for its files and start; 0 with *@out {templateID, buildID,
 * names, tags, public, aliases}, or an HTTP status with @msg. */
int build_request(json_t *req, json_t **out, char *msg, size_t len);
/* GET /templates/TID/files/HASH: {present, url} (@host: the request's Host). */
int build_file_link(const char *tid, const char *hash, const char *host, json_t **out, char *msg, size_t len);
/* The upload link's token is a waiting build's of @tid. */
bool build_upload_ok(const char *tid, const char *token);
/* PUT of a COPY step's archive (its body still to come) into
 * STATE/build-files/HASH: 0, or an HTTP status with @msg. */
int build_upload(struct hconn *c, struct hreq *r, const char *hash, char *msg, size_t len);
/* POST /v2/templates/TID/builds/BID (@spec: fromTemplate, steps, startCmd,
 * readyCmd): checked, then built by a thread of its own. 0, or an HTTP
 * status with @msg. */
int build_start(const char *tid, const char *bid, json_t *spec, char *msg, size_t len);
/* GET /templates/TID/builds/BID/status?logsOffset=N. */
int build_status(const char *tid, const char *bid, long offset, json_t **out, char *msg, size_t len);

/* Tags of a snapshot template (one of a build's name is NAME:TAG in a
 * create): POST /templates/tags {target: NAME[:TAG], tags} adds them
 * (*@out {tags, buildID}); DELETE /templates/tags {name, tags} removes
 * them; GET /templates/NAME/tags lists them (*@out [{tag, buildID,
 * createdAt}], "default" first). 0, or an HTTP status with @msg. */
int template_tags_assign(json_t *req, json_t **out, char *msg, size_t len);
int template_tags_remove(json_t *req, char *msg, size_t len);
int template_tags_list(const char *tid, json_t **out, char *msg, size_t len);

#endif
