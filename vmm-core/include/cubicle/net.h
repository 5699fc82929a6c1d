/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle plugin ABI: packet backends (kind CUB_KIND_NET) and how a device
 * opens the one its config names. A network device never knows which
 * backend sits behind it; a backend never knows virtio. */
#ifndef CUBICLE_NET_H
#define CUBICLE_NET_H

#include <sys/uio.h>

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * With the vnet header on (set_vnet_hdr), every frame sent to or received
 * from the backend starts with this many bytes: struct virtio_net_hdr_v1
 * (<linux/virtio_net.h>: flags, gso_type, hdr_len, gso_size, csum_start,
 * csum_offset, num_buffers), little-endian, as a tap with IFF_VNET_HDR and
 * TUNSETVNETHDRSZ 12 reads and writes it. num_buffers means nothing to a
 * backend: it ignores it on send and may leave anything there on receive
 * (the device overwrites it).
 */
#define CUB_NET_HDR_LEN 12

/* The largest Ethernet frame (without vnet header) a device sends or
 * expects: 64 KiB of GSO payload plus link headers, as Firecracker and
 * Linux tap allow. */
#define CUB_NET_MAX_FRAME 65550

/*
 * Offload abilities (cub_net_info.offloads, set_offloads). Each is about
 * frames carrying a vnet header, so none applies while it is off.
 * CSUM: a frame may carry a partial checksum (VIRTIO_NET_HDR_F_NEEDS_CSUM,
 * csum_start/csum_offset); TSO4/TSO6/UFO: a frame may be a GSO frame of
 * that kind (gso_type TCPV4/TCPV6/UDP, gso_size) up to CUB_NET_MAX_FRAME;
 * TSO_ECN: TSO frames may carry the ECN bit (VIRTIO_NET_HDR_GSO_ECN).
 * These match TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6, TUN_F_TSO_ECN, TUN_F_UFO.
 */
#define CUB_NET_OFF_CSUM    (1u << 0)
#define CUB_NET_OFF_TSO4    (1u << 1)
#define CUB_NET_OFF_TSO6    (1u << 2)
#define CUB_NET_OFF_TSO_ECN (1u << 3)
#define CUB_NET_OFF_UFO     (1u << 4)

/* What a backend is and can do; filled by its info op. */
struct cub_net_info {
	uint8_t mac[6];     /* a MAC it suggests for the guest, if has_mac */
	bool has_mac;       /* the device's own `mac` param still wins */
	bool vnet_hdr;      /* set_vnet_hdr(true) works */
	uint32_t offloads;  /* CUB_NET_OFF_*: with the vnet header on, frames
			     * sent may use these and set_offloads may allow
			     * received ones to; 0 unless vnet_hdr */
	uint32_t mtu;       /* largest IP packet it carries; 0: no opinion */
	bool link_up;       /* carrier; info is re-read when the guest looks */
	int rx_fd;          /* readable (level-triggered: EPOLLIN) while recv
			     * may return a frame; the device polls it, never
			     * reads it. Required (>= 0). */
	int tx_fd;          /* writable (EPOLLOUT) once send may take a frame
			     * again after -EAGAIN; -1 if send never returns
			     * -EAGAIN. May equal rx_fd. */
};

/* Counters the backend keeps itself (frames it dropped, e.g. by policy);
 * the device keeps its own guest-side counters. */
struct cub_net_stats {
	uint64_t rx_packets, rx_bytes, rx_dropped, rx_errors; /* toward the guest */
	uint64_t tx_packets, tx_bytes, tx_dropped, tx_errors; /* from the guest */
};

/*
 * struct cub_net_ops - a packet backend plugin's ops (kind CUB_KIND_NET).
 * Frames are whole Ethernet frames (destination MAC first), preceded by a
 * CUB_NET_HDR_LEN vnet header while it is on. Nothing blocks: the device
 * waits on rx_fd and tx_fd through the event loop (no busy polling on
 * either side). Required: open, close, info, send, recv; the loader
 * refuses a net plugin lacking one, and the host refuses an open backend
 * whose info has rx_fd < 0, offloads without set_vnet_hdr and set_offloads,
 * or an mtu outside 68..CUB_NET_MAX_FRAME - 14.
 *
 * Threads: send and recv may run at the same time on different threads;
 * each is called by one thread at a time (virtio-net holds a lock per
 * direction). send runs on the thread that delivers the guest's transmit
 * kick (the event-loop thread with ioeventfd, else a vCPU thread) or on the
 * event loop when tx_fd turns writable; recv on the event-loop thread when
 * rx_fd is readable, or on a vCPU thread when the guest adds receive
 * buffers or starts the device. open, close and set_mac run on the main
 * thread; set_vnet_hdr and set_offloads with no send or recv running.
 *
 * @open:   open from @cfg (the backend's cfg struct, filled from the device's
 *          `backend` group; read-only, valid until close). Returns 0 and
 *          *@priv, or -errno after h->fail(). Main thread. @in names the
 *          backend ("socket[net0]"), not the device; @in and @h stay valid
 *          until close returns.
 * @close:  free everything (fds included). Main thread: at the device's
 *          request (h->net->close) or by the host after the device's
 *          destroy, with no send or recv running. @in and @h are still
 *          valid here; the host removes the backend's fd watches after.
 * @info:   fill @out. Must not fail; cheap: virtio-net calls it again
 *          whenever the guest reads its config space (link state), on a
 *          vCPU thread, concurrently with send and recv.
 * @set_vnet_hdr: (optional; required if info.vnet_hdr) @on: frames in both
 *          directions carry the vnet header from now on; off: plain frames.
 *          0 or -errno. virtio-net calls it only when info.vnet_hdr is set,
 *          at each device start (vCPU thread, before any frame of that
 *          start). NULL with info.vnet_hdr set is a backend bug the host
 *          does not catch: the device would send headers the backend never
 *          agreed to.
 * @set_offloads: (optional; required if info.offloads is not 0) the
 *          offloads (CUB_NET_OFF_*) the guest accepts in received frames;
 *          recv must never return a frame using another (tap:
 *          TUNSETOFFLOAD). Called like set_vnet_hdr, after it, only when
 *          the header is on. NULL: only plain frames are expected.
 * @send:   send one frame gathered from @iov: the bytes taken (the whole
 *          frame; a datagram is never cut), -EAGAIN if the backend cannot
 *          take it now (nothing sent: the device waits for tx_fd, then sends
 *          it again; with tx_fd -1 the frame is dropped instead), or another
 *          -errno (the frame is lost; the device counts a drop).
 * @recv:   receive one frame into @iov: its length in bytes, 0 if none is
 *          waiting, -EMSGSIZE if it was longer than @iov (it is consumed
 *          and dropped), or another -errno. Never blocks.
 * @stats:  (optional) fill @out with the backend's counters. Any thread;
 *          may be slightly stale. NULL: all zero. virtio-net reads it for
 *          its `stats` control method.
 * @set_mac: (optional, ABI 1.4) the guest's MAC address, as the device
 *          presents it to the guest (its own `mac` param, info.mac, or
 *          derived). The device calls it once at create, before any frame
 *          can flow; a backend that checks source addresses (the tap's
 *          policy) drops every frame until it is called. 0, or -errno with
 *          the reason logged by the backend (the device then fails to
 *          create). Main thread. Default: ignored. The host hands devices a
 *          copy of the ops cut to the backend's ABI minor, so a backend
 *          built for 1.3 shows NULL here.
 */
struct cub_net_ops {
	int (*open)(struct cub_inst *in, const struct cub_host *h, const void *cfg, void **priv);
	void (*close)(void *priv);
	void (*info)(void *priv, struct cub_net_info *out);
	int (*set_vnet_hdr)(void *priv, bool on);
	int (*set_offloads)(void *priv, uint32_t offloads);
	int64_t (*send)(void *priv, const struct iovec *iov, int iovcnt);
	int64_t (*recv)(void *priv, const struct iovec *iov, int iovcnt);
	void (*stats)(void *priv, struct cub_net_stats *out);
	/* ABI 1.4: */
	int (*set_mac)(void *priv, const uint8_t mac[6]);
};

/* An open backend, as a device sees it: call ops with priv. */
struct cub_net {
	const struct cub_net_ops *ops;
	void *priv;
	struct cub_net_info info; /* as reported right after open */
	const char *name;         /* "socket[net0]" for messages */
	/* Who the device is, for a MAC that stays the same across runs: */
	const char *dev_id;       /* the device's config id ("net0") */
	const char *vm_path;      /* the VM's config file, absolute; "" if none */
};

/*
 * struct cub_net_host - at h->net (NULL on a host without networking).
 *
 * @open:  open the backend described by the group @key (normally "backend",
 *         declared with a CUB_P_NET param) inside this device's config: its
 *         `type` names a net plugin, the other keys are that plugin's
 *         parameters, already checked by the plan. Create time only; main
 *         thread. 0 and *@out, or -errno with the reason already recorded
 *         on the device (FILE:LINE and the backend's name): return the
 *         error as it is, without calling fail() again.
 * @close: close it (the backend's close op runs now). Main thread. The host
 *         also closes any left open at destroy, after the device's destroy.
 */
struct cub_net_host {
	uint32_t size;
	int (*open)(struct cub_inst *in, const char *key, struct cub_net **out);
	void (*close)(struct cub_inst *in, struct cub_net *n);
};

#ifdef __cplusplus
}
#endif
#endif
