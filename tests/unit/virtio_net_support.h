/* SPDX-License-Identifier: Apache-2.0 */
/* What the virtio-net tests share: the device on a socketpair, guest buffers, the event loop, main. */
#ifndef CUBICLE_TESTS_VIRTIO_NET_SUPPORT_H
#define CUBICLE_TESTS_VIRTIO_NET_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cunit_main.h"
#include "fake_host.h"

#define RXQ 0
#define TXQ 1
#define HDR 12
#define F(bit) (1ull << (bit))
#define F_CSUM 0
#define F_GUEST_CSUM 1
#define F_MTU 3
#define F_MAC 5
#define F_GUEST_TSO4 7
#define F_HOST_TSO4 11
#define F_MRG_RXBUF 15
#define F_STATUS 16

extern const struct cub_plugin *netp, *sockp;
extern struct fake_host fh;
extern void *npriv;
extern struct cub_net be;
extern int sv[2]; /* sv[1]: the test's end of the wire */
extern const struct cub_net_ops *be_ops; /* the backend's ops as the device sees them; NULL: the socket's */

/* Guest memory: chains keep pointers to these until popped. */
#define N_CHAINS 128
extern struct cub_vq_chain chains[N_CHAINS];

/* The next chain (dev_open starts again from chains[0]) and its memory. */
struct cub_vq_chain *chain(void);
uint8_t *mem_of(const struct cub_vq_chain *c);
/* Append a segment to c (fatal on failure). */
void seg(struct cub_vq_chain *c, void *p, size_t len, bool w);

/* The device with the socket backend on a socketpair: kv its params,
 * refused the feature bits the fake driver refuses; create's result. */
int dev_open(const char *const *kv, uint64_t refused);
void dev_close(void);
/* Destroy the device and create it again on the same backend, as the host
 * would: its watches go first. */
int recreate(void);

/* The device's epoll set, as the event loop watches it. */
int dev_efd(void);
bool readable(int fd);
/* The event loop: fire the device's watch while its set is readable. */
void run_loop(void);

unsigned le16(const uint8_t *p);
/* A transmit chain: header (zeroes unless hd) and frame, split as asked. */
struct cub_vq_chain *tx_chain(const uint8_t *frame, size_t len, const uint8_t *hd, size_t split);
/* A receive buffer of len bytes (one segment, or two if split). */
struct cub_vq_chain *rx_chain(size_t len, size_t split);
/* A receive chain of n segments of len bytes each. */
struct cub_vq_chain *rx_chain_n(unsigned n, size_t len);
void fill(uint8_t *p, size_t len, unsigned seed);

/*
 * A test program's main: open the plugins, run the tests in once, then
 * those in both twice, the receive tests that hold whichever way a frame is
 * received: on buffers whose frame is 16-byte aligned (straight in), then
 * on Linux's layout (through the bounce buffer), see guest_off. Either list
 * may be NULL; non-zero if a test failed.
 */
int net_main(const char *suite, const struct cu_test *once, const struct cu_test *both);

#endif
