/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus' text format as a JSON object: {"name{labels}": value, ...}
 * (the control API's metrics file and `cubicle ctl --json metrics`). */
#ifndef CUBICLE_PROMJSON_H
#define CUBICLE_PROMJSON_H

#include <jansson.h>

/* Every sample line of @text (comments skipped); NULL when out of memory. */
json_t *prom_to_json(const char *text);

#endif
