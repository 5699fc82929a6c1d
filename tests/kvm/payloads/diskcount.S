/* SPDX-License-Identifier: Apache-2.0 */
/* The counter payload with a virtio-blk disk (see counter.S). */
#define DISK 1
#include "counter.S"
