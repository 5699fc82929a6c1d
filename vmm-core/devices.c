/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin instances from the plan: create every device in order, destroy
 * them in reverse. Parameters were filled and checked by the plan stage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "event.h"
#include "virtio/virtio_dev.h"
#include "vm.h"

static void inst_free(struct cub_inst *in)
{
	const struct cub_device_ops *ops = in->plugin->d->ops;

	while (in->n_watched)
		devices_host.fd_unwatch(in, in->watched[in->n_watched - 1]);
	for (unsigned i = 0; i < in->n_regions; i++)
		bus_del(in->regions[i].bus, in->regions[i].base);
	virtio_dev_free(in->virtio); /* stops the queues: before destroy frees priv */
	if (in->created && ops->destroy)
		ops->destroy(in->priv);
	storage_close_all(in);
	net_close_all(in);
	free(in);
}

static int inst_create(struct vm *vm, const struct plan *p, const struct plan_inst *pi,
		       struct cub_inst **out, char *err, size_t errlen)
{
	const struct cub_device_ops *ops = pi->plugin->d->ops;
	struct cub_inst *in = calloc(1, sizeof(*in));
	int ret;

	if (!in)
		return errf(err, errlen, -ENOMEM, "out of memory");
	in->vm = vm;
	in->plugin = pi->plugin;
	in->name = pi->name;
	in->cfg = pi->cfg;
	in->plan = p;
	in->pi = pi;
	ret = ops->create(in, &devices_host, in->cfg, &in->priv);
	if (ret) {
		if (in->err_full)
			snprintf(err, errlen, "%s", in->err);
		else
			snprintf(err, errlen, "%s: %s: %s", pi->where, in->name,
				 in->err[0] ? in->err : strerror(ret < 0 ? -ret : EINVAL));
		goto fail;
	}
	in->created = true;
	if (pi->transport && !in->virtio) {
		ret = errf(err, errlen, -EINVAL, "%s: %s: 'transport' applies to virtio devices only",
			   pi->where, in->name);
		goto fail;
	}
	ret = backend_check_unused(in, err, errlen);
	if (ret)
		goto fail;
	*out = in;
	return 0;
fail:
	inst_free(in);
	return ret < 0 ? ret : -EINVAL;
}

int devices_create_all(struct vm *vm, const struct plan *p, struct cub_inst ***out,
		       unsigned *n_out, char *err, size_t errlen)
{
	struct cub_inst **v = calloc(p->n_devs + 1, sizeof(*v));
	int ret;

	*out = v;
	*n_out = 0;
	if (!v)
		return -ENOMEM;
	for (unsigned i = 0; i < p->n_devs; i++) {
		ret = inst_create(vm, p, &p->devs[i], &v[i], err, errlen);
		if (ret)
			return ret;
		(*n_out)++;
	}
	return 0;
}

void devices_destroy_all(struct cub_inst **insts, unsigned n)
{
	if (!insts)
		return;
	while (n--)
		inst_free(insts[n]);
	free(insts);
}
