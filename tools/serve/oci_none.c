/* SPDX-License-Identifier: Apache-2.0 */
/* oci.h when cubicle was configured without libarchive. */
#include <stdio.h>

#include "oci.h"

const int oci_available = 0;

int oci_unpack(const char *archive, const char *root, const char *work, char *msg, size_t len)
{
	(void)root, (void)work;
	snprintf(msg, len, "%s: this cubicle was built without libarchive and nettle, so it cannot unpack image "
		 "archives (install libarchive-dev and nettle-dev and configure again)", archive ? archive : "the image");
	return -1;
}

json_t *oci_image_config(const char *work, char *msg, size_t len)
{
	(void)work;
	snprintf(msg, len, "this cubicle was built without libarchive and nettle");
	return NULL;
}
