/* SPDX-License-Identifier: Apache-2.0 */
/* Packet backends for devices (h->net): what backend.c does, with a net
 * plugin's ops and info checked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubicle/net.h"
#include "devices.h"

/* One open net backend. */
struct net_inst {
	struct backend b;    /* first: backend.c allocates and frees it */
	struct cub_net n;    /* what the device holds */
	struct cub_net_ops ops; /* n.ops: the plugin's, cut to its ABI minor */
	char *vm_path;       /* n.vm_path */
};

/* Devices call a backend through a copy of its ops holding only the
 * members its ABI minor defines (as storage.c does): set_mac (1.4) is read
 * only from plugins built for 1.4 or later, NULL for older ones. */
static void ops_copy(struct cub_net_ops *dst, const struct cub_plugin *d)
{
	size_t n = offsetof(struct cub_net_ops, set_mac); /* 1.0 .. 1.3 */

	if (d->abi_minor >= 4) /* a minor that appends ops adds its own step here */
		n = offsetof(struct cub_net_ops, set_mac) + sizeof(dst->set_mac);
	memset(dst, 0, sizeof(*dst));
	memcpy(dst, d->ops, n);
}

static int ni_init(struct backend *b, const struct cub_inst *in)
{
	struct net_inst *ni = (struct net_inst *)b;
	const char *path = in->plan && in->plan->path ? in->plan->path : "";

	ni->vm_path = *path ? realpath(path, NULL) : NULL;
	if (!ni->vm_path)
		ni->vm_path = strdup(path);
	if (!ni->vm_path)
		return -ENOMEM;
	ops_copy(&ni->ops, b->bin.plugin->d);
	ni->n.ops = &ni->ops;
	ni->n.name = b->bin.name;
	ni->n.dev_id = in->pi ? in->pi->id : in->name;
	ni->n.vm_path = ni->vm_path;
	return 0;
}

static int ni_open(struct backend *b, const void *arg)
{
	struct net_inst *ni = (struct net_inst *)b;

	(void)arg;
	return ni->n.ops->open(&b->bin, &devices_host, b->bin.cfg, &b->bin.priv);
}

/* Read what a backend says about itself and check it before a device
 * relies on it. */
static int ni_info(struct backend *b, char *why, size_t len)
{
	struct net_inst *ni = (struct net_inst *)b;
	const struct cub_net_info *i = &ni->n.info;

	ni->n.priv = b->bin.priv;
	ni->n.ops->info(ni->n.priv, &ni->n.info);
	if (i->rx_fd < 0) {
		snprintf(why, len, "backend reports no receive fd");
		return -EINVAL;
	}
	if (i->vnet_hdr && !ni->n.ops->set_vnet_hdr) {
		snprintf(why, len, "backend reports a vnet header without the set_vnet_hdr op");
		return -EINVAL;
	}
	if (i->offloads && (!i->vnet_hdr || !ni->n.ops->set_vnet_hdr || !ni->n.ops->set_offloads)) {
		snprintf(why, len, "backend reports offloads without the vnet header ops");
		return -EINVAL;
	}
	if (i->mtu && (i->mtu < 68 || i->mtu > CUB_NET_MAX_FRAME - 14)) {
		snprintf(why, len, "backend reports MTU %u; expected 68..%u", i->mtu,
			 CUB_NET_MAX_FRAME - 14);
		return -EINVAL;
	}
	return 0;
}

static void ni_release(struct backend *b)
{
	struct net_inst *ni = (struct net_inst *)b;

	if (b->opened)
		ni->n.ops->close(b->bin.priv);
	free(ni->vm_path);
}

static const struct backend_kind net_kind = {
	.kind = CUB_KIND_NET,
	.noun = "net",
	.size = sizeof(struct net_inst),
	.init = ni_init,
	.open = ni_open,
	.info = ni_info,
	.release = ni_release,
};

static int net_open(struct cub_inst *in, const char *key, struct cub_net **out)
{
	struct net_inst *ni;
	struct backend *b;
	int ret;

	*out = NULL;
	ret = backend_open(in, key, &net_kind, &in->nets, NULL, &b);
	if (ret)
		return ret;
	ni = (struct net_inst *)b;
	log_msg(CUB_LOG_DEBUG, b->bin.name, "vnet header %s, offloads %#x, mtu %u, link %s",
		ni->n.info.vnet_hdr ? "yes" : "no", ni->n.info.offloads, ni->n.info.mtu,
		ni->n.info.link_up ? "up" : "down");
	*out = &ni->n;
	return 0;
}

static void net_close(struct cub_inst *in, struct cub_net *n)
{
	if (n)
		backend_close(&in->nets,
			      (struct backend *)((char *)n - offsetof(struct net_inst, n)));
}

void net_close_all(struct cub_inst *in)
{
	backend_close_all(&in->nets);
}

const struct cub_net_host devices_net_host = {
	.size = sizeof(struct cub_net_host),
	.open = net_open,
	.close = net_close,
};

bool net_stats(const struct backend *b, struct cub_net_stats *out)
{
	const struct net_inst *ni = (const struct net_inst *)b;

	memset(out, 0, sizeof(*out));
	if (!b->opened || !ni->ops.stats)
		return false;
	ni->ops.stats(b->bin.priv, out);
	return true;
}
