/* SPDX-License-Identifier: Apache-2.0 */
/* What both virtio-vsock tests share: the fake guest's queues, the device's setup and the host's Unix socket clients. */
#ifndef CUBICLE_VSOCK_SUPPORT_H
#define CUBICLE_VSOCK_SUPPORT_H

#include <linux/virtio_vsock.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cunit_main.h"
#include "fake_host.h"

#define RXQ 0
#define TXQ 1
#define EVQ 2
#define GCID 3
#define HDR 44
#define G_BUF (256u << 10) /* the guest's buf_alloc unless a test says otherwise */

/* The built plugin, and the device dev_open made on fh with cfg. */
extern const struct cub_plugin *plug;
extern struct fake_host fh;
extern void *cfg, *priv;
/* The device's folder and its uds_path in it. */
extern char dir[64], uds[128];

/* ---- the fake guest ---- */

#define NRX 256
#define RXLEN (4096 + HDR)
extern struct cub_vq_chain rxc[NRX];
extern uint8_t rxmem[NRX][RXLEN];
extern unsigned rx_posted, rx_seen, rx_len; /* the length post_rx gives */

#define NTX 16
extern struct cub_vq_chain txc[NTX];
extern uint8_t txmem[NTX][HDR + 65536 + 16];
extern unsigned tx_n;

extern struct cub_vq_chain evc;
extern uint8_t evmem[8];

struct pkt {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len, flags, buf_alloc, fwd_cnt;
	uint16_t type, op;
	uint8_t *data;
};

void pump(void);
void post_rx(unsigned n);
/* The next packet the device gave the guest, if any. */
bool next_pkt(struct pkt *p);
/* Skip to the next packet with op, or fail. */
bool expect_op(struct pkt *p, uint16_t op);
void send_raw(const struct virtio_vsock_hdr *h, const void *data, uint32_t dlen);
void mkhdr(struct virtio_vsock_hdr *h, uint16_t op, uint32_t sport, uint32_t dport,
	   uint32_t len, uint32_t flags, uint32_t buf_alloc, uint32_t fwd);
/* A guest packet from its port sport to our dport. */
void gsend(uint16_t op, uint32_t sport, uint32_t dport, const void *data, uint32_t len,
	   uint32_t flags, uint32_t buf_alloc, uint32_t fwd);

/* ---- the device ---- */

/* A device with guest_cid 3 on a fresh uds_path, extra params (key, value
 * pairs, NULL-terminated) after; started, its event buffer queued. */
int dev_open(const char *const *extra);
void dev_close(void);
/* A number from the stats method's reply. */
unsigned long long stat_of(const char *key);

/* ---- host clients ---- */

int client(void);
/* Read up to n bytes within ms: how many came (0 on EOF, -1 on an error,
 * -2 on timeout). */
ssize_t read_some(int fd, void *buf, size_t n, int ms);
/* The device closed its end (a reset if it left our bytes unread). */
bool is_eof(int fd);
/* A host client connected to guest port @port through the handshake; the
 * guest answers with credit buf_alloc. The host port in *hport. */
int client_to(uint32_t port, uint32_t buf_alloc, uint32_t *hport);

/* main() of both programs: the plugin opened, the tests run, the plugin closed. */
int vsock_run(const char *suite, const struct cu_test *tests);

#endif
