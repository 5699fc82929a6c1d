/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-vsock's insides shared by its files: the device and connection state, the limits. */
#ifndef CUBICLE_VIRTIO_VSOCK_H
#define CUBICLE_VIRTIO_VSOCK_H

#include <linux/virtio_vsock.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cubicle/plugin.h>
#include <cubicle/virtio.h>

#include "iov.h" /* plugins/lib: iov_to_buf, iov_from_buf */

#define VIRTIO_ID_VSOCK_DEV 19
#define HOST_CID	    2
#define Q_RX		    0
#define Q_TX		    1
#define Q_EVENT		    2
#define QUEUE_MAX	    256
#define HDR_LEN		    ((uint32_t)sizeof(struct virtio_vsock_hdr)) /* 44 */
#define PKT_MAX		    (64u << 10) /* the longest payload one packet may carry */
#define TX_BUDGET	    256 /* guest packets per round, then the event loop goes on */
#define RX_BUDGET	    (QUEUE_MAX / 2) /* packets to the guest per round, likewise */
#define RX_GATHER	    16  /* receive chains one read of a host socket may fill */
#define RST_RING	    256 /* RSTs waiting for a receive buffer; tx pauses when half full */
#define LINE_MAX_LEN	    32  /* "CONNECT 4294967295\n" is 19 */
#define HANDSHAKE_MS	    5000 /* a host client has this long to send its CONNECT line */
#define CONNECT_MS	    2000 /* the guest has this long to answer a REQUEST */
#define CLOSE_MS	    4000 /* a closing connection has this long to finish */
#define TICK_MS		    100
#define RL_CHUNK	    (16u << 10) /* bytes to the guest per rate limiter grant */
#define HOST_PORT_FIRST	    (1u << 30) /* local ports of host-initiated connections */

/* What a connection owes the guest (bits of conn.pend). */
enum {
	P_REQUEST = 1, P_RESPONSE = 2, P_SHUTDOWN = 4, P_CREDIT_UPDATE = 8, P_CREDIT_REQUEST = 16,
	P_DATA = 32,
};

enum conn_state {
	C_HANDSHAKE,  /* host client: reading its CONNECT line */
	C_CONNECTING, /* host client: REQUEST sent (or queued), waiting for RESPONSE */
	C_OPEN,       /* data flows */
	C_CLOSING,    /* shut down both ways, waiting for the last bytes or an RST */
};

/* Epoll tags: the first member of whatever data.ptr points to. */
enum { T_CONN = 1, T_LISTEN, T_TIMER, T_KICK, T_RL };

struct conn {
	int tag;              /* T_CONN */
	int fd;               /* the host end, -1 once closed */
	enum conn_state st;
	bool dead;            /* killed: freed at the end of the locked section */
	bool guest_knows;     /* the guest has seen a packet about it */
	bool from_host;       /* made by a host client's CONNECT */
	bool in_ready;
	bool hup;             /* the host end reported a hang-up */
	bool stalled;         /* no credit: a CREDIT_REQUEST went */
	bool hashed;          /* in the hash (has its ports) */
	bool wr_shut;         /* shutdown(SHUT_WR) done on the host end */
	uint32_t reg;         /* events registered in the device's epoll set */
	uint32_t local_port, peer_port; /* on CID 2, on the guest */
	unsigned pend;        /* P_* */
	uint32_t shut_flags;  /* SHUTDOWN flags to send */
	uint32_t guest_shut;  /* SHUTDOWN flags the guest sent */
	bool host_eof;        /* the host end sent EOF */
	uint64_t deadline_us; /* 0: none */
	/* guest -> host: bytes the host end did not take yet */
	uint8_t *buf;         /* buf_size bytes, allocated when first needed */
	uint32_t head, len;
	uint32_t rx_cnt, fwd_cnt, fwd_sent;
	/* host -> guest */
	uint32_t tx_cnt, peer_buf_alloc, peer_fwd_cnt;
	char line[LINE_MAX_LEN];
	unsigned line_len;
	struct conn *hnext;   /* hash chain */
	struct conn *next, *prev;  /* all connections */
	struct conn *rnext, *rprev; /* ready list */
	struct conn *dnext;   /* dead list */
};

struct vsock_cfg {
	uint64_t guest_cid;
	const char *uds_path;
	uint64_t max_conns;
	uint64_t buf_size;
	struct cub_rl *rl;
};

struct rst_entry {
	uint32_t src_port, dst_port; /* as sent: ours, the guest's */
};

#define HASH_SIZE 1024

struct vsock {
	struct cub_inst *in;
	const struct cub_host *h;
	const struct cub_virtio_host *v;
	uint64_t cid;
	const char *path;
	uint32_t max_conns, buf_size;

	int efd;       /* the device's epoll set */
	int lfd;       /* the listening socket */
	int tfd;       /* timerfd: deadlines */
	int kfd;       /* eventfd: work left when a budget ran out */
	int rfd;       /* timerfd: the rate limiter's tokens are due (-1: no limiter) */
	int ltag, ttag, ktag, rtag;
	struct cub_rl *rl; /* the host's limiter (data bytes, packets), NULL: none */
	dev_t l_dev;
	ino_t l_ino;
	bool timer_on;
	bool listen_paused; /* at max_conns: accept waits for a free slot */
	bool bound;         /* l_dev, l_ino: our socket file */
	uint64_t accept_retry_us; /* accept failed (EMFILE): try again then */

	pthread_mutex_t lock; /* everything below */
	struct cub_vq *vq[3];
	bool running;
	bool reset_pending; /* a TRANSPORT_RESET event is owed (after load) */
	bool tx_blocked;    /* the RST ring is too full to go on */
	bool rl_blocked;    /* data to the guest waits for the rate limiter (rfd armed) */
	struct conn *hash[HASH_SIZE];
	struct conn *all;
	struct conn *ready_head, *ready_tail;
	struct conn *dead;
	unsigned n_conns;
	uint32_t next_port;
	struct rst_entry rst[RST_RING];
	unsigned rst_head, rst_n;
	unsigned n_held;    /* rch[0..n_held-1]: popped receive chains, not pushed yet */
	struct cub_vq_chain *rch[RX_GATHER], *tchain;
	struct iovec riov[CUB_VQ_MAX_SEGS], tiov[CUB_VQ_MAX_SEGS];

	/* counters (under lock) */
	uint64_t st_rx_pkts, st_rx_bytes, st_tx_pkts, st_tx_bytes, st_rst, st_bad, st_conns;
	uint64_t st_rst_dropped;
};

/* conn.c, tx.c (vsock_tx), rx.c (vsock_rx, vsock_event_q) */
struct conn *conn_find(struct vsock *s, uint32_t local, uint32_t peer);
struct conn *conn_new(struct vsock *s, int fd, uint32_t local, uint32_t peer);
void conn_hash_add(struct vsock *s, struct conn *c);
/* Close the host end, forget the connection (freed by conn_reap); with
 * @rst, and if the guest knows it, tell the guest with an RST. */
void conn_kill(struct vsock *s, struct conn *c, bool rst);
void conn_reap(struct vsock *s);
void conn_kill_all(struct vsock *s);
/* Add @pend to what @c owes the guest; on the ready list if it owes any. */
void conn_ready(struct vsock *s, struct conn *c, unsigned pend);
void ready_del(struct vsock *s, struct conn *c);
/* sendmsg without blocking or SIGPIPE: bytes sent or -1 (errno). */
ssize_t send_iov(int fd, struct iovec *iov, unsigned n);
/* Which events the host end is watched for, from the state. */
void conn_interest(struct vsock *s, struct conn *c);
/* The host end has events @ev. */
void conn_event(struct vsock *s, struct conn *c, uint32_t ev);
/* Queue an RST for a packet from the guest port @gport to our @hport. */
void rst_queue(struct vsock *s, uint32_t hport, uint32_t gport);
/* Guest -> host: serve the transmit queue (bounded). */
void vsock_tx(struct vsock *s);
/* Host -> guest: fill receive buffers (bounded). */
void vsock_rx(struct vsock *s);
/* The event queue: deliver a TRANSPORT_RESET if one is owed. */
void vsock_event_q(struct vsock *s);
/* Ask the event loop for another round. */
void vsock_kick(struct vsock *s);
/* The rate limiter's say on @bytes and an op now (what turns out more or
 * less is settled with vsock_rl_charge): false if it must wait, rfd then
 * armed. */
bool vsock_rl_take(struct vsock *s, uint64_t bytes);
void vsock_rl_charge(struct vsock *s, int64_t bytes, int64_t ops);
/* Credit the guest has left for us to send. */
uint32_t conn_peer_free(const struct conn *c);
/* Write what the connection's buffer holds to the host end (without
 * waiting); may kill the connection. */
void conn_flush(struct vsock *s, struct conn *c);
/* Queue a CREDIT_UPDATE if the guest should hear of new room. */
void credit_check(struct vsock *s, struct conn *c);
/* The host end took the last bytes: finish a close or a half close. */
void close_check(struct vsock *s, struct conn *c);
/* dst = at most max bytes of src from offset skip on; the segment count. */
unsigned iov_slice(const struct iovec *src, unsigned n, size_t skip, size_t max,
		   struct iovec *dst);

/* virtio_vsock.c: host clients */
void hs_read(struct vsock *s, struct conn *c);
/* The guest answered a host client's REQUEST. */
void hs_done(struct vsock *s, struct conn *c);
void timer_need(struct vsock *s);
/* A connection ended: accept again if max_conns held the listener back. */
void vsock_listen_resume(struct vsock *s);

#endif
