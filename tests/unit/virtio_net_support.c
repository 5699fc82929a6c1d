/* SPDX-License-Identifier: Apache-2.0 */
/* What the virtio-net tests share: the device on a socketpair, guest buffers, the event loop, main. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "virtio_net_support.h"

const struct cub_plugin *netp, *sockp;
static void *net_dl, *sock_dl;
struct fake_host fh;
static void *ncfg, *scfg, *spriv;
void *npriv;
struct cub_net be;
int sv[2] = { -1, -1 };
const struct cub_net_ops *be_ops;

struct cub_vq_chain chains[N_CHAINS];
static unsigned next_chain;
static uint8_t guest[N_CHAINS][20000 + 64] __attribute__((aligned(64)));

/*
 * Where each chain's memory starts in its slot. A received frame follows
 * the 12-byte header: from offset 4 it is 16-byte aligned and the device
 * receives straight into the buffers; main runs the receive tests again
 * from offset 0, Linux's layout, where the frame goes through the bounce
 * buffer first (queues.c, rx_bounce).
 */
static size_t guest_off = 4;

struct cub_vq_chain *chain(void)
{
	struct cub_vq_chain *c = &chains[next_chain % N_CHAINS];

	fake_chain_init(c, (uint16_t)(next_chain % N_CHAINS));
	next_chain++;
	return c;
}

uint8_t *mem_of(const struct cub_vq_chain *c)
{
	return guest[c - chains] + guest_off;
}

void seg(struct cub_vq_chain *c, void *p, size_t len, bool w)
{
	CU_ASSERT_EQUAL_FATAL(fake_chain_add(c, p, len, w), 0);
}

int dev_open(const char *const *kv, uint64_t refused)
{
	char fdtxt[16];
	const char *skv[] = { "fd", fdtxt, NULL };
	const struct cub_net_ops *so = sockp->ops;

	fake_host_init(&fh);
	fh.features_refused = refused;
	next_chain = 0;
	CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	snprintf(fdtxt, sizeof(fdtxt), "%d", sv[0]);
	scfg = fake_cfg_new(sockp, skv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(scfg);
	CU_ASSERT_EQUAL_FATAL(so->open(fake_inst(&fh), &fh.ops, scfg, &spriv), 0);
	be = (struct cub_net){ .ops = be_ops ? be_ops : so, .priv = spriv, .name = "socket[net0]",
			       .dev_id = "net0", .vm_path = "/vms/a.cfg" };
	so->info(spriv, &be.info);
	fh.net = &be;
	ncfg = fake_cfg_new(netp, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ncfg);
	npriv = NULL;
	return fake_create(&fh, netp, ncfg, &npriv);
}

void dev_close(void)
{
	if (npriv)
		((const struct cub_device_ops *)netp->ops)->destroy(npriv);
	npriv = NULL;
	fake_cfg_free(netp, ncfg);
	((const struct cub_net_ops *)sockp->ops)->close(spriv);
	fake_cfg_free(sockp, scfg);
	close(sv[0]);
	close(sv[1]);
	memset(&be, 0, sizeof(be));
	fake_host_fini(&fh);
}

int recreate(void)
{
	for (unsigned i = 0; i < fh.n_watches; i++)
		fh.watches[i].active = false;
	((const struct cub_device_ops *)netp->ops)->destroy(npriv);
	npriv = NULL;
	return fake_create(&fh, netp, ncfg, &npriv);
}

int dev_efd(void)
{
	for (unsigned i = 0; i < fh.n_watches; i++)
		if (fh.watches[i].active)
			return fh.watches[i].fd;
	return -1;
}

bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

void run_loop(void)
{
	int efd = dev_efd(), n = 0;

	while (efd >= 0 && readable(efd) && n++ < 1000)
		fake_watch_fire(&fh, efd);
}

unsigned le16(const uint8_t *p)
{
	return p[0] | p[1] << 8;
}

struct cub_vq_chain *tx_chain(const uint8_t *frame, size_t len, const uint8_t *hd, size_t split)
{
	struct cub_vq_chain *c = chain();
	uint8_t *m = mem_of(c);

	memset(m, 0, HDR);
	if (hd)
		memcpy(m, hd, HDR);
	memcpy(m + HDR, frame, len);
	if (split && split < HDR + len) {
		seg(c, m, split, false);
		seg(c, m + split, HDR + len - split, false);
	} else {
		seg(c, m, HDR + len, false);
	}
	return c;
}

struct cub_vq_chain *rx_chain(size_t len, size_t split)
{
	struct cub_vq_chain *c = chain();
	uint8_t *m = mem_of(c);

	memset(m, 0xee, len);
	if (split && split < len) {
		seg(c, m, split, true);
		seg(c, m + split, len - split, true);
	} else {
		seg(c, m, len, true);
	}
	return c;
}


struct cub_vq_chain *rx_chain_n(unsigned n, size_t len)
{
	struct cub_vq_chain *c = chain();
	uint8_t *m = mem_of(c);

	memset(m, 0xee, n * len);
	for (unsigned i = 0; i < n; i++)
		seg(c, m + i * len, len, true);
	return c;
}

void fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 7 + seed);
}

int net_main(const char *suite, const struct cu_test *once, const struct cu_test *both)
{
	char name[160];
	int ret = 0;

	signal(SIGPIPE, SIG_IGN);
	netp = fake_plugin_open("virtio_net", &net_dl);
	sockp = fake_plugin_open("socket", &sock_dl);
	if (!netp || !sockp)
		return 1;
	if (once)
		ret = cu_run(suite, once);
	if (both) {
		snprintf(name, sizeof(name), "%s receive, frames aligned in the buffers", suite);
		ret |= cu_run(name, both);
		guest_off = 0;
		snprintf(name, sizeof(name), "%s receive, buffers laid out as Linux's", suite);
		ret |= cu_run(name, both);
	}
	fake_plugin_close(net_dl);
	fake_plugin_close(sock_dl);
	return ret;
}
