/* SPDX-License-Identifier: Apache-2.0 */
/* The agent protocol's byte codecs: Connect's stream envelopes (base64 is agent/b64.c's). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

void env_header(uint8_t flags, uint32_t len, uint8_t hdr[ENV_HDR_LEN])
{
	hdr[0] = flags;
	hdr[1] = (uint8_t)(len >> 24);
	hdr[2] = (uint8_t)(len >> 16);
	hdr[3] = (uint8_t)(len >> 8);
	hdr[4] = (uint8_t)len;
}

void env_init(struct env_reader *r, uint32_t max)
{
	memset(r, 0, sizeof(*r));
	r->max = max;
}

void env_free(struct env_reader *r)
{
	free(r->buf);
	r->buf = NULL;
}

bool env_idle(const struct env_reader *r)
{
	return r->hdr_got == 0;
}

int env_feed(struct env_reader *r, const void *data, size_t n, env_msg_fn *fn, void *arg)
{
	const uint8_t *p = data;

	/* A zero-length message is whole as soon as its header is. */
	while (n || (r->hdr_got == ENV_HDR_LEN && r->got == r->len)) {
		size_t take;
		int ret;

		if (r->hdr_got < ENV_HDR_LEN) {
			take = ENV_HDR_LEN - r->hdr_got;
			take = take < n ? take : n;
			memcpy(r->hdr + r->hdr_got, p, take);
			r->hdr_got += (unsigned)take;
			p += take;
			n -= take;
			if (r->hdr_got < ENV_HDR_LEN)
				break;
			r->flags = r->hdr[0];
			r->len = (uint32_t)r->hdr[1] << 24 | (uint32_t)r->hdr[2] << 16 |
				 (uint32_t)r->hdr[3] << 8 | r->hdr[4];
			r->got = 0;
			if (r->len > r->max)
				return -EMSGSIZE;
			free(r->buf);
			r->buf = malloc(r->len ? r->len : 1);
			if (!r->buf)
				return -ENOMEM;
		}
		take = r->len - r->got;
		take = take < n ? take : n;
		memcpy(r->buf + r->got, p, take);
		r->got += (uint32_t)take;
		p += take;
		n -= take;
		if (r->got < r->len)
			break;
		r->hdr_got = 0;
		ret = fn(arg, r->flags, r->buf, r->len);
		if (ret)
			return ret;
	}
	return 0;
}
