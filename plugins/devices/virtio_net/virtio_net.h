/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-net's insides shared by its two files: the device state, the wire constants. */
#ifndef CUBICLE_VIRTIO_NET_H
#define CUBICLE_VIRTIO_NET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <cubicle/net.h>
#include <cubicle/plugin.h>
#include <cubicle/virtio.h>

#define VIRTIO_ID_NET 1

#define VIRTIO_NET_F_CSUM	 0
#define VIRTIO_NET_F_GUEST_CSUM	 1
#define VIRTIO_NET_F_MTU	 3
#define VIRTIO_NET_F_MAC	 5
#define VIRTIO_NET_F_GUEST_TSO4	 7
#define VIRTIO_NET_F_GUEST_TSO6	 8
#define VIRTIO_NET_F_GUEST_ECN	 9
#define VIRTIO_NET_F_GUEST_UFO	 10
#define VIRTIO_NET_F_HOST_TSO4	 11
#define VIRTIO_NET_F_HOST_TSO6	 12
#define VIRTIO_NET_F_HOST_ECN	 13
#define VIRTIO_NET_F_HOST_UFO	 14
#define VIRTIO_NET_F_MRG_RXBUF	 15
#define VIRTIO_NET_F_STATUS	 16

#define VIRTIO_NET_S_LINK_UP	 1

#define VIRTIO_NET_HDR_F_NEEDS_CSUM 1
#define VIRTIO_NET_HDR_F_DATA_VALID 2
#define VIRTIO_NET_HDR_GSO_NONE	 0
#define VIRTIO_NET_HDR_GSO_TCPV4 1
#define VIRTIO_NET_HDR_GSO_UDP	 3
#define VIRTIO_NET_HDR_GSO_TCPV6 4
#define VIRTIO_NET_HDR_GSO_ECN	 0x80

#define F(b) (1ull << (b))

#define Q_RX 0
#define Q_TX 1
#define QUEUE_MAX 256
#define RX_BUDGET 256   /* frames per readiness callback: the event loop serves others too */
#define TX_BUDGET 64    /* frames per kick, then the rest on the next round (kfd) */
#define TX_BUDGET_BYTES (1u << 20) /* bytes per kick, likewise */
#define BATCH_NOTIFY 32 /* interrupt at least every this many frames */
#define ETH_HLEN 14
#define HDR CUB_NET_HDR_LEN
#define NUM_BUFFERS_OFF 10
/* The bounce buffer: 64-byte aligned, a frame received whole into it
 * starting BOUNCE_LEAD bytes in (its vnet header, if any, just before). */
#define BOUNCE_LEAD 64
#define BOUNCE_SIZE ((BOUNCE_LEAD + CUB_NET_MAX_FRAME + HDR + 63) / 64 * 64)
#define MAX_SEGS 1023   /* UIO_MAXIOV, less one for a header or the bounce buffer */
#define RX_WAIT_MS 100  /* a half-placed frame waits this long for more buffers */

/* struct virtio_net_config: mac, status, max_virtqueue_pairs, mtu */
enum { CFG_MAC = 0, CFG_STATUS = 6, CFG_MAX_PAIRS = 8, CFG_MTU = 10, CFG_SIZE = 12 };

/* struct virtio_net_hdr_v1, little-endian. */
struct vnet_hdr {
	uint8_t flags, gso_type;
	uint16_t hdr_len, gso_size, csum_start, csum_offset, num_buffers;
};
_Static_assert(sizeof(struct vnet_hdr) == HDR, "virtio_net_hdr_v1 is 12 bytes");

struct net_cfg {
	const char *backend; /* the net plugin's name; the host opens it */
	const char *mac;
	int64_t mtu;
	struct cub_rl *rx_rl, *tx_rl;
};

/* Epoll data tags for the device's own set. */
enum { TAG_RX = 1, TAG_TX = 2, TAG_TIMER = 4, TAG_KICK = 8, TAG_RL = 16 };

struct net {
	struct cub_inst *in;
	const struct cub_host *h;
	const struct cub_virtio_host *v;
	struct cub_net *be;
	uint8_t mac[6];
	bool mac_set;         /* the config named the MAC (else backend's or derived) */
	uint16_t mtu;
	uint64_t offered;
	_Atomic uint64_t acked;
	bool batch;           /* host has push_batch */

	int efd;              /* the device's epoll set: rx_fd, tx_fd, tfd */
	int tfd;              /* timerfd: how long a half-placed frame may wait */
	int kfd;              /* eventfd: transmit work left when a budget ran out */
	int lfd;              /* timerfd: a rate limiter's tokens are due (-1: no limiters) */
	struct cub_rl *rx_rl, *tx_rl; /* the host's limiters, NULL on an older host */
	pthread_mutex_t ev_lock;
	bool rx_want, tx_want;
	uint32_t rx_reg, tx_reg; /* events registered for each fd (0: not in the set) */

	pthread_mutex_t rx_lock; /* everything rx_ */
	struct cub_vq *rxq;
	bool rx_running, mrg, vnet;
	bool rx_held;         /* rxc popped and not pushed */
	bool rx_pend;         /* a frame half placed in mergeable buffers */
	bool rx_dead;         /* the backend's receive side failed for good */
	uint16_t rx_qsize;    /* the receive queue's size (QUEUE_MAX if unknown) */
	unsigned held_desc;   /* segments of the chains the pending frame holds */
	unsigned min_desc;    /* segments of the smallest of them */
	bool rx_waiting;      /* tfd armed: the pending frame waits for buffers */
	unsigned rx_errs;     /* recv errors in a row */
	struct cub_vq_chain *rxc, *rxm;
	uint8_t *bounce;      /* BOUNCE_SIZE bytes */
	uint8_t *pend_buf;    /* where in bounce the pending frame's bytes are */
	size_t pend_len, pend_off;
	size_t last_frame;    /* bytes the last recv brought (for the rx limiter) */
	uint32_t pend_frame;  /* bytes of the frame, for the counters */
	struct cub_vq_used used[QUEUE_MAX];
	unsigned n_used;
	struct iovec rx_iov[CUB_VQ_MAX_SEGS + 1];
	bool unpop;           /* host has unpop: receive buffers are popped ahead */
	size_t rx_target;     /* bytes to have buffers for before a recv (recent frames' size) */
	unsigned n_sp;        /* buffers popped ahead for this recv, after rxc: */
	uint16_t sp_head[QUEUE_MAX], sp_nseg[QUEUE_MAX];
	uint32_t sp_len[QUEUE_MAX];

	pthread_mutex_t tx_lock; /* everything tx_ */
	struct cub_vq *txq;
	bool tx_running;
	bool tx_held;         /* txc waits for the backend to take it */
	bool tx_charged;      /* txc has its tokens from the tx limiter */
	struct cub_vq_chain *txc;
	struct iovec tx_iov[CUB_VQ_MAX_SEGS + 1];

	_Atomic uint64_t rx_packets, rx_bytes, rx_dropped;
	_Atomic uint64_t rx_nobuf; /* of rx_dropped: the guest's buffers could not hold it */
	_Atomic uint64_t tx_packets, tx_bytes, tx_dropped;
};

static inline void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* queues.c: the data path. Each takes the locks it needs. */
void vnet_tx_process(struct net *n);
/* @hup: the backend's fd reported a hang-up. @expired: the wait timer
 * fired: a frame still short of buffers is dropped. */
void vnet_rx_process(struct net *n, bool hup, bool expired);
/* The device's epoll set is readable (the event loop's callback). */
void vnet_event(void *arg);
/* Watch rx_fd for input (@rx), tx_fd for room (@tx); -1 leaves one as is. */
void vnet_interest(struct net *n, int rx, int tx);
/* Arm lfd to fire within @us (an earlier deadline stands). */
void vnet_rl_arm(struct net *n, uint64_t us);

#endif
