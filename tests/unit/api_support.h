/* SPDX-License-Identifier: Apache-2.0 */
/* What both control API tests share: a detached API on a fake VM, requests checked against Firecracker's schema subset. */
#ifndef CUBICLE_API_SUPPORT_H
#define CUBICLE_API_SUPPORT_H

#include <jansson.h>
#include <stdbool.h>

#include "api/api.h"
#include "cnode.h"

/* The fake VM's start hook: the tree it was handed, and its result (a knob). */
extern const struct cnode *started_tree;
extern int start_ret;
/* The pause hook: its result (a knob), and pauses less resumes. */
extern int pause_ret, pauses;
/* The snapshot hooks: what they were asked, last. */
extern char snap_dir[256], snap_sets[256];
extern bool snap_flag, snap_diff, snap_uffd;
extern int snap_calls;

/* The fake VM and the API on it (setup makes a fresh one). */
extern struct api_vm vm;
extern struct api *a;

/* v is valid against the schema's definition def. */
void expect_valid(const json_t *v, const char *def);
/* One request; returns the status, the reply (owned by the caller) in *out
 * or NULL. Every fault is checked against the Error schema, every body
 * the API accepted against the request's schema. */
int req(const char *method, const char *url, const char *body, json_t **out);
/* The request fails with status and a fault_message containing what. */
void expect_fault(const char *method, const char *url, const char *body, int status,
		  const char *what);
/* A fresh API on a VM not started; loads the schema the first time. */
void setup(void);
/* The API, its arena and the schema freed (test_api.c's last test). */
void test_teardown(void);

#endif
