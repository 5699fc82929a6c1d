/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text to a JSON object of series (promjson.h). */
#include <stdlib.h>
#include <string.h>

#include "promjson.h"

json_t *prom_to_json(const char *text)
{
	json_t *obj = json_object();
	char *copy = strdup(text), *line, *save = NULL;

	if (!obj || !copy) {
		json_decref(obj);
		free(copy);
		return NULL;
	}
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' ');

		if (line[0] == '#' || !sp)
			continue;
		*sp = '\0';
		json_object_set_new(obj, line, json_real(strtod(sp + 1, NULL)));
	}
	free(copy);
	return obj;
}
