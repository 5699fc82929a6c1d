/* SPDX-License-Identifier: Apache-2.0 */
/* The 16550A-compatible UART device plugin; its host console (stdio, file, socket) is hostcon's. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cubicle/plugin.h>

#include "hostcon.h"

/*
 * The console (stdio with the Ctrl-A escape, file, socket, none) is
 * described in hostcon.h. Transmission is instantaneous (THRE is always
 * set); a console that stops reading costs a vCPU one HOSTCON_OUT_WAIT_MS
 * wait, then output is dropped until it reads again. Host input waits in
 * the console's backlog and enters the receive FIFO as the guest drains
 * it, so pastes are not lost to overruns.
 */

/* Register offsets; 0 and 1 are the divisor latch while LCR.DLAB is set. */
enum {
	UART_RX = 0, UART_TX = 0, UART_DLL = 0,
	UART_IER = 1, UART_DLM = 1,
	UART_IIR = 2, UART_FCR = 2,
	UART_LCR = 3, UART_MCR = 4, UART_LSR = 5, UART_MSR = 6, UART_SCR = 7,
};

#define IER_RDI		0x01	/* received data available */
#define IER_THRI	0x02	/* transmitter holding register empty */
#define IER_RLSI	0x04	/* receiver line status */
#define IER_MSI		0x08	/* modem status */

#define IIR_NO_INT	0x01
#define IIR_MSI		0x00
#define IIR_THRI	0x02
#define IIR_RDI		0x04
#define IIR_RLSI	0x06
#define IIR_FIFO_BITS	0xc0	/* "FIFOs enabled", as a 16550A reports them */

#define FCR_ENABLE	0x01
#define FCR_CLEAR_RX	0x02
#define FCR_CLEAR_TX	0x04

#define LCR_DLAB	0x80

#define MCR_DTR		0x01
#define MCR_RTS		0x02
#define MCR_OUT1	0x04
#define MCR_OUT2	0x08
#define MCR_LOOP	0x10

#define LSR_DR		0x01
#define LSR_OE		0x02
#define LSR_THRE	0x20
#define LSR_TEMT	0x40

#define MSR_DCTS	0x01
#define MSR_DDSR	0x02
#define MSR_TERI	0x04
#define MSR_DDCD	0x08
#define MSR_DELTA	0x0f
#define MSR_CTS		0x10
#define MSR_DSR		0x20
#define MSR_RI		0x40
#define MSR_DCD		0x80
/* With nothing attached to the modem lines we report a ready peer. */
#define MSR_IDLE	(MSR_DCD | MSR_DSR | MSR_CTS)

#define FIFO_LEN	16	/* the 16550A's receive FIFO */
#define BACKLOG_LEN	4096	/* host input not yet "on the wire" */

struct serial_cfg {
	struct hostcon_cfg con;
};

struct ring {
	unsigned head, count, size;
	uint8_t *buf;
};

struct serial {
	struct cub_inst *in;
	const struct cub_host *h;
	const struct serial_cfg *cfg;
	struct hostcon *hc;  /* takes its own lock, inside ours */
	int irq;

	/* lock guards everything below: vCPU threads and the event loop. */
	pthread_mutex_t lock;
	uint8_t ier, fcr, lcr, mcr, lsr_err, msr, scr, dll, dlm;
	bool thri_pending, irq_level;
	uint8_t fifo_buf[FIFO_LEN];
	struct ring fifo;    /* what the guest sees (capacity 1 with FIFOs off) */
};

static bool ring_push(struct ring *r, uint8_t c)
{
	if (r->count == r->size)
		return false;
	r->buf[(r->head + r->count++) % r->size] = c;
	return true;
}

static int ring_pop(struct ring *r)
{
	uint8_t c;

	if (!r->count)
		return -1;
	c = r->buf[r->head];
	r->head = (r->head + 1) % r->size;
	r->count--;
	return c;
}

static void ring_clear(struct ring *r)
{
	r->head = r->count = 0;
}

static unsigned fifo_capacity(const struct serial *s)
{
	return (s->fcr & FCR_ENABLE) ? FIFO_LEN : 1;
}

/* Move host input into the receive FIFO while it has room. Lock held. */
static void fifo_refill(struct serial *s)
{
	uint8_t buf[FIFO_LEN];
	size_t n;

	if ((s->mcr & MCR_LOOP) || s->fifo.count >= fifo_capacity(s))
		return; /* the serial input is disconnected in loopback */
	n = hostcon_read(s->hc, buf, fifo_capacity(s) - s->fifo.count);
	for (size_t i = 0; i < n; i++)
		ring_push(&s->fifo, buf[i]);
}

/* A byte arriving at the receiver; a full FIFO overruns. Lock held. */
static void rx_byte(struct serial *s, uint8_t c)
{
	if (s->fifo.count < fifo_capacity(s))
		ring_push(&s->fifo, c);
	else
		s->lsr_err |= LSR_OE;
}

static uint8_t lsr_value(const struct serial *s)
{
	/* Transmission is instantaneous: the holding register is always empty. */
	return s->lsr_err | LSR_THRE | LSR_TEMT | (s->fifo.count ? LSR_DR : 0);
}

static uint8_t iir_id(const struct serial *s)
{
	if ((s->ier & IER_RLSI) && s->lsr_err)
		return IIR_RLSI;
	if ((s->ier & IER_RDI) && s->fifo.count)
		return IIR_RDI;
	if ((s->ier & IER_THRI) && s->thri_pending)
		return IIR_THRI;
	if ((s->ier & IER_MSI) && (s->msr & MSR_DELTA))
		return IIR_MSI;
	return IIR_NO_INT;
}

/* Drive the line to "any enabled interrupt pending". Lock held, so the
 * levels reach the host in the order the state changed. */
static void irq_update(struct serial *s)
{
	bool level = iir_id(s) != IIR_NO_INT;

	if (level == s->irq_level)
		return;
	s->irq_level = level;
	if (s->irq >= 0)
		s->h->irq_set(s->in, (unsigned)s->irq, level);
}

/* The modem status inputs: looped back from MCR, or an idle ready peer. */
static void msr_update(struct serial *s)
{
	uint8_t st, old = s->msr;

	if (s->mcr & MCR_LOOP) {
		st = (s->mcr & MCR_RTS ? MSR_CTS : 0) | (s->mcr & MCR_DTR ? MSR_DSR : 0) |
		     (s->mcr & MCR_OUT1 ? MSR_RI : 0) | (s->mcr & MCR_OUT2 ? MSR_DCD : 0);
	} else {
		st = MSR_IDLE;
	}
	s->msr = st | (old & MSR_DELTA);
	if ((st ^ old) & MSR_CTS)
		s->msr |= MSR_DCTS;
	if ((st ^ old) & MSR_DSR)
		s->msr |= MSR_DDSR;
	if ((st ^ old) & MSR_DCD)
		s->msr |= MSR_DDCD;
	if ((old & MSR_RI) && !(st & MSR_RI))
		s->msr |= MSR_TERI;
}

static void regs_reset(struct serial *s)
{
	s->ier = s->fcr = s->lcr = s->mcr = s->lsr_err = s->scr = 0;
	s->dll = 0x0c; /* 9600 baud, what firmware usually leaves behind */
	s->dlm = 0;
	s->thri_pending = false;
	s->msr = MSR_IDLE;
	ring_clear(&s->fifo);
}

/* ---- guest register access ---- */

static uint8_t serial_read(struct serial *s, unsigned off)
{
	uint8_t v, id;
	int c;

	switch (off) {
	case UART_RX:
		if (s->lcr & LCR_DLAB)
			return s->dll;
		c = ring_pop(&s->fifo);
		fifo_refill(s);
		return c < 0 ? 0 : (uint8_t)c;
	case UART_IER:
		return (s->lcr & LCR_DLAB) ? s->dlm : s->ier;
	case UART_IIR:
		id = iir_id(s);
		if (id == IIR_THRI)
			s->thri_pending = false;
		return id | ((s->fcr & FCR_ENABLE) ? IIR_FIFO_BITS : 0);
	case UART_LCR:
		return s->lcr;
	case UART_MCR:
		return s->mcr;
	case UART_LSR:
		v = lsr_value(s);
		s->lsr_err = 0;
		return v;
	case UART_MSR:
		v = s->msr;
		s->msr &= ~MSR_DELTA;
		return v;
	default:
		return s->scr;
	}
}

static void serial_write(struct serial *s, unsigned off, uint8_t v)
{
	uint8_t old;

	switch (off) {
	case UART_TX:
		if (s->lcr & LCR_DLAB) {
			s->dll = v;
		} else {
			if (s->mcr & MCR_LOOP)
				rx_byte(s, v);
			else
				hostcon_write(s->hc, &v, 1);
			s->thri_pending = true; /* sent at once: THR empty again */
		}
		break;
	case UART_IER:
		if (s->lcr & LCR_DLAB) {
			s->dlm = v;
			break;
		}
		old = s->ier;
		s->ier = v & 0x0f;
		/* Enabling THRI while THR is empty interrupts at once, as the
		 * 16550 does; Linux's startup probes exactly this. */
		if ((s->ier & IER_THRI) && !(old & IER_THRI))
			s->thri_pending = true;
		break;
	case UART_FCR:
		if ((v ^ s->fcr) & FCR_ENABLE)
			ring_clear(&s->fifo);
		if (v & FCR_CLEAR_RX)
			ring_clear(&s->fifo);
		s->fcr = v & 0xc9; /* enable, DMA mode, trigger level */
		fifo_refill(s);
		break;
	case UART_LCR:
		s->lcr = v;
		break;
	case UART_MCR:
		s->mcr = v & 0x1f;
		msr_update(s);
		fifo_refill(s);
		break;
	case UART_LSR:
	case UART_MSR:
		break; /* factory test registers: writes ignored */
	default:
		s->scr = v;
		break;
	}
}

static void serial_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct serial *s = priv;
	uint8_t *b = data;

	if (!is_write)
		memset(b, 0, len);
	if (off >= 8 || !len)
		return;
	pthread_mutex_lock(&s->lock);
	/* The registers are bytes; a wider access uses its low byte. */
	if (is_write)
		serial_write(s, (unsigned)off, b[0]);
	else
		b[0] = serial_read(s, (unsigned)off);
	irq_update(s);
	pthread_mutex_unlock(&s->lock);
}

/* ---- host input ---- */

/* Host input entered the console's backlog. Event loop, no lock held. */
static void serial_input(void *arg)
{
	struct serial *s = arg;

	pthread_mutex_lock(&s->lock);
	fifo_refill(s);
	irq_update(s);
	pthread_mutex_unlock(&s->lock);
}

/* ---- lifecycle ---- */

static void serial_free(struct serial *s)
{
	hostcon_close(s->hc);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int serial_create(struct cub_inst *in, const struct cub_host *h, const void *cfgp,
			 void **priv)
{
	const struct serial_cfg *cfg = cfgp;
	struct serial *s;
	struct cub_region r = {
		.want = CUB_BUS_ANY, .class = "uart", .len = 8, .io = serial_io,
	};
	int err;

	err = hostcon_check(in, h, &cfg->con); /* before the region is claimed */
	if (err)
		return err;
	s = calloc(1, sizeof(*s));
	if (!s)
		return h->fail(in, -ENOMEM, "out of memory");
	s->fifo.buf = s->fifo_buf;
	s->fifo.size = FIFO_LEN;
	s->in = in;
	s->h = h;
	s->cfg = cfg;
	s->irq = -1;
	pthread_mutex_init(&s->lock, NULL);
	regs_reset(s);

	r.priv = s;
	err = h->region_add(in, &r);
	if (err)
		goto fail;
	s->irq = r.irq;

	err = hostcon_open(&s->hc, in, h, &cfg->con, BACKLOG_LEN, serial_input, s);
	if (err)
		goto fail;
	*priv = s;
	return 0;
fail:
	serial_free(s);
	return err;
}

static void serial_destroy(void *priv)
{
	serial_free(priv);
}

static int serial_reset(void *priv)
{
	struct serial *s = priv;

	pthread_mutex_lock(&s->lock);
	regs_reset(s);
	hostcon_reset(s->hc, true);
	irq_update(s);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static const struct cub_param serial_params[] = {
	HOSTCON_PARAMS(struct serial_cfg, con, "the UART"),
};

/*
 * Snapshot state 1.0, 32 bytes: IER FCR LCR MCR LSR-errors MSR SCR DLL DLM,
 * thri_pending, irq_level, the receive FIFO's count, 4 zero bytes, then the
 * FIFO's bytes oldest first (zero-padded to 16). Host input not yet in the
 * FIFO belongs to the host side and is not saved.
 */
#define SERIAL_STATE_LEN 32

static int serial_save(void *priv, void *buf, size_t cap, size_t *len)
{
	struct serial *s = priv;
	uint8_t *b = buf;

	*len = SERIAL_STATE_LEN;
	if (cap < SERIAL_STATE_LEN)
		return -ENOSPC;
	memset(b, 0, SERIAL_STATE_LEN);
	pthread_mutex_lock(&s->lock);
	b[0] = s->ier, b[1] = s->fcr, b[2] = s->lcr, b[3] = s->mcr, b[4] = s->lsr_err;
	b[5] = s->msr, b[6] = s->scr, b[7] = s->dll, b[8] = s->dlm;
	b[9] = s->thri_pending, b[10] = s->irq_level, b[11] = (uint8_t)s->fifo.count;
	for (unsigned i = 0; i < s->fifo.count; i++)
		b[16 + i] = s->fifo.buf[(s->fifo.head + i) % s->fifo.size];
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int serial_load(void *priv, const void *buf, size_t len, uint32_t minor)
{
	struct serial *s = priv;
	const uint8_t *b = buf;

	(void)minor;
	if (len != SERIAL_STATE_LEN)
		return s->h->fail(s->in, -EINVAL, "state: %zu bytes, expected %d", len,
				  SERIAL_STATE_LEN);
	if (b[9] > 1 || b[10] > 1)
		return s->h->fail(s->in, -EINVAL, "state: a flag byte is neither 0 nor 1");
	if (b[11] > ((b[1] & FCR_ENABLE) ? FIFO_LEN : 1))
		return s->h->fail(s->in, -EINVAL, "state: %u bytes in the receive FIFO (FCR %#x)",
				  b[11], b[1]);
	pthread_mutex_lock(&s->lock);
	s->ier = b[0] & 0x0f, s->fcr = b[1], s->lcr = b[2], s->mcr = b[3] & 0x1f;
	s->lsr_err = b[4] & LSR_OE, s->msr = b[5], s->scr = b[6], s->dll = b[7], s->dlm = b[8];
	s->thri_pending = b[9];
	ring_clear(&s->fifo);
	for (unsigned i = 0; i < b[11]; i++)
		ring_push(&s->fifo, b[16 + i]);
	/* Drive the line to the saved level (the irqchip's own state is put
	 * back after the devices'). */
	s->irq_level = b[10];
	if (s->irq >= 0)
		s->h->irq_set(s->in, (unsigned)s->irq, s->irq_level);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static const struct cub_device_ops serial_ops = {
	.create = serial_create,
	.destroy = serial_destroy,
	.reset = serial_reset,
	.state_version = CUB_STATE_VERSION(1, 0),
	.save = serial_save,
	.load = serial_load,
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(5),
	.kind = CUB_KIND_DEVICE,
	.name = "serial8250",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "16550A-compatible UART with a stdio, file or socket console",
	.cfg_size = sizeof(struct serial_cfg),
	.params = serial_params,
	.n_params = CUB_ARRAY_SIZE(serial_params),
	.ops = &serial_ops,
});
