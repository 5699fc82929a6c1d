/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle-api.so's one exported symbol: its entry points for main.c. */
#include "api.h"

extern const struct api_module cubicle_api_module;

const struct api_module cubicle_api_module = {
	.size = sizeof(struct api_module),
	.new_detached = api_new_detached,
	.set_loop = api_set_loop,
	.load_fc_json = api_load_fc_json,
	.listen = api_listen,
	.close = api_close,
};
