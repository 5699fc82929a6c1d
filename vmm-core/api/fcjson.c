/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Firecracker's JSON VM description (`--config-file vm.json`): an object
 * whose sections are the bodies of the pre-boot PUT endpoints, the drives
 * and network interfaces as arrays. Each goes through api_dispatch, so a
 * file is checked exactly as the same requests on the socket would be,
 * and ends with InstanceStart.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cnode.h"

static const struct section {
	const char *key, *path, *id_field;
} sections[] = {
	/* In this order: the machine first, the start last. */
	{ "machine-config", "/machine-config", NULL },
	{ "cpu-config", "/cpu-config", NULL },
	{ "boot-source", "/boot-source", NULL },
	{ "drives", "/drives/", "drive_id" },
	{ "pmem", "/pmem/", "id" },
	{ "network-interfaces", "/network-interfaces/", "iface_id" },
	{ "vsock", "/vsock", NULL },
	{ "balloon", "/balloon", NULL },
	{ "entropy", "/entropy", NULL },
	{ "logger", "/logger", NULL },
	{ "metrics", "/metrics", NULL },
	{ "mmds-config", "/mmds/config", NULL },
	{ "serial", "/serial", NULL },
};
#define N_SECTIONS (sizeof(sections) / sizeof(sections[0]))

/* PUT url with body; 0, or -EINVAL with the API's fault message in err. */
static int put(struct api *a, const char *url, json_t *body, const char *file, const char *what,
	       char *err, size_t errlen)
{
	char *text = json_dumps(body, JSON_COMPACT);
	json_t *reply = NULL;
	const char *msg;
	int status;

	if (!text)
		return errf(err, errlen, -ENOMEM, "%s: out of memory", file);
	status = api_dispatch(a, "PUT", url, text, strlen(text), &reply);
	free(text);
	msg = json_string_value(json_object_get(reply, "fault_message"));
	if (status >= 400)
		errf(err, errlen, -EINVAL, "%s: %s: %s", file, what, msg ? msg : "refused");
	json_decref(reply);
	return status >= 400 ? -EINVAL : 0;
}

int api_load_fc_json(struct api *a, const char *file, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root = json_load_file(file, JSON_REJECT_DUPLICATES, &je), *v, *start;
	const char *key;
	int ret = 0;

	if (!root && je.line < 1) /* not read at all */
		return errf(err, errlen, -EINVAL, "%s", je.text);
	if (!root)
		return errf(err, errlen, -EINVAL, "%s:%d:%d: %s", file, je.line, je.column,
				je.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return errf(err, errlen, -EINVAL,
				"%s: expected a JSON object of sections (boot-source, drives, ...)",
				file);
	}
	json_object_foreach(root, key, v) {
		unsigned i;

		for (i = 0; i < N_SECTIONS && strcmp(sections[i].key, key); i++)
			;
		if (i == N_SECTIONS) {
			char list[512] = "";
			size_t o = 0;

			for (unsigned k = 0; k < N_SECTIONS && o < sizeof(list); k++)
				o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s",
						      k ? ", " : "", sections[k].key);
			ret = errf(err, errlen, -EINVAL, "%s: unknown section \"%s\"; expected one of %s",
				       file, key, list);
			goto out;
		}
	}
	for (unsigned i = 0; i < N_SECTIONS && !ret; i++) {
		const struct section *s = &sections[i];
		char url[300], what[300];
		size_t k;
		json_t *e;

		v = json_object_get(root, s->key);
		if (!v)
			continue;
		if (!s->id_field) {
			ret = put(a, s->path, v, file, s->key, err, errlen);
			continue;
		}
		if (!json_is_array(v)) {
			ret = errf(err, errlen, -EINVAL, "%s: \"%s\" must be an array of objects",
				       file, s->key);
			break;
		}
		json_array_foreach(v, k, e) {
			const char *id = json_string_value(json_object_get(e, s->id_field));

			if (!json_is_object(e) || !id) {
				ret = errf(err, errlen, -EINVAL,
					       "%s: %s[%zu]: expected an object with a string \"%s\"",
					       file, s->key, k, s->id_field);
				break;
			}
			snprintf(url, sizeof(url), "%s%.200s", s->path, id);
			snprintf(what, sizeof(what), "%s[%zu] (\"%.200s\")", s->key, k, id);
			ret = put(a, url, e, file, what, err, errlen);
			if (ret)
				break;
		}
	}
	if (!ret) {
		start = json_pack("{s:s}", "action_type", "InstanceStart");
		ret = start ? put(a, "/actions", start, file, "InstanceStart", err, errlen)
			    : errf(err, errlen, -ENOMEM, "out of memory");
		json_decref(start);
	}
out:
	json_decref(root);
	return ret;
}
