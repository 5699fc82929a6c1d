/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The IOAPIC of machine.irqchip = "split": KVM keeps each vCPU's LAPIC,
 * cubicle keeps the I/O APIC (82093AA: 24 pins, IOREGSEL at 0x00, IOWIN
 * at 0x10, the EOI register of version 0x20 parts at 0x40) and turns each
 * pin's interrupt into the message its redirection entry describes, sent
 * with KVM_SIGNAL_MSI. A level-triggered pin waits for its EOI (remote
 * IRR): KVM reports the EOI of a vector only when an MSI route of a pin
 * below the reserved count (KVM_CAP_SPLIT_IRQCHIP's argument) names it
 * with level trigger, so every level pin's entry is mirrored into KVM's
 * GSI routing (the routes callback) when its vector, destination or
 * trigger changes. There is no 8259 behind it: ExtINT entries deliver
 * nothing.
 *
 * Everything the guest writes is taken as given and checked only where it
 * indexes something: IOREGSEL picks among 0x00-0x3f, an unknown register
 * reads 0 and ignores writes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "x86.h"

#define REG_SEL 0x00
#define REG_WIN 0x10
#define REG_EOI 0x40

#define IOAPIC_ID 0x00
#define IOAPIC_VER 0x01
#define IOAPIC_ARB 0x02
#define IOAPIC_RTE0 0x10

#define RTE_VECTOR 0xffull
#define RTE_DELMODE(e) (((e) >> 8) & 7)
#define RTE_DESTMODE (1ull << 11)
#define RTE_DELIVS (1ull << 12)
#define RTE_REMOTE_IRR (1ull << 14)
#define RTE_LEVEL (1ull << 15)
#define RTE_MASK (1ull << 16)
#define RTE_DEST(e) ((uint32_t)((e) >> 56))
/* what the guest can write: all but delivery status and remote IRR */
#define RTE_WRITABLE (~(RTE_DELIVS | RTE_REMOTE_IRR))

#define DELMODE_LOWEST 1
#define DELMODE_EXTINT 7

void x86_ioapic_init(struct x86_ioapic *io, uint8_t id,
		     int (*deliver)(void *ctx, uint64_t addr, uint32_t data),
		     int (*routes)(void *ctx, const struct x86_ioapic_route *r, unsigned n),
		     void *ctx)
{
	memset(io, 0, sizeof(*io));
	pthread_mutex_init(&io->lock, NULL);
	io->deliver = deliver;
	io->routes = routes;
	io->ctx = ctx;
	io->st.id = id;
	for (unsigned i = 0; i < X86_IOAPIC_PINS; i++)
		io->st.rte[i] = RTE_MASK;
}

void x86_ioapic_destroy(struct x86_ioapic *io)
{
	pthread_mutex_destroy(&io->lock);
}

/* The MSI an entry sends (Intel SDM vol. 3, 11.11: address 0xfee00000
 * with the destination in 19:12, logical mode in bit 2 and the
 * redirection hint in bit 3 for lowest priority; data the vector,
 * delivery mode in 10:8, assert and trigger mode in bits 14 and 15). */
void x86_ioapic_msi(uint64_t rte, uint64_t *addr, uint32_t *data)
{
	*addr = X86_LAPIC_ADDR | ((uint64_t)RTE_DEST(rte) << 12) |
		((rte & RTE_DESTMODE) ? 1u << 2 : 0) |
		(RTE_DELMODE(rte) == DELMODE_LOWEST ? 1u << 3 : 0);
	*data = (uint32_t)(rte & RTE_VECTOR) | (uint32_t)(RTE_DELMODE(rte) << 8) |
		((rte & RTE_LEVEL) ? (1u << 15) | (1u << 14) : 0);
}

/* Send pin @pin's interrupt if it may go now. Lock held. */
static void fire(struct x86_ioapic *io, unsigned pin)
{
	uint64_t *e = &io->st.rte[pin], addr;
	uint32_t data;

	if ((*e & RTE_MASK) || ((*e & RTE_LEVEL) && (*e & RTE_REMOTE_IRR)))
		return;
	if (RTE_DELMODE(*e) == DELMODE_EXTINT) /* no 8259 to ask for a vector */
		return;
	if (*e & RTE_LEVEL)
		*e |= RTE_REMOTE_IRR;
	x86_ioapic_msi(*e, &addr, &data);
	io->deliver(io->ctx, addr, data); /* (an error is KVM's, and rare) */
}

/* The level pins' routes, given to KVM when they differ from the last.
 * Each KVM_SET_GSI_ROUTING waits for a grace period of the VM's own
 * interrupt SRCU: a guest that rewrites its level entries in a loop slows
 * only its own vCPU (and its devices' lines, which wait on the lock). */
static void sync_routes(struct x86_ioapic *io)
{
	struct x86_ioapic_route r[X86_IOAPIC_PINS];
	unsigned n = 0;

	for (unsigned i = 0; i < X86_IOAPIC_PINS; i++) {
		uint64_t e = io->st.rte[i];

		if (!(e & RTE_LEVEL) || (e & RTE_VECTOR) < 16)
			continue;
		r[n].pin = i;
		x86_ioapic_msi(e, &r[n].addr, &r[n].data);
		n++;
	}
	if (n == io->n_routes && !memcmp(r, io->last_routes, n * sizeof(*r)))
		return;
	memcpy(io->last_routes, r, n * sizeof(*r));
	io->n_routes = n;
	if (io->routes)
		io->routes(io->ctx, r, n); /* (it logs what KVM refused) */
}

static uint32_t read_reg(struct x86_ioapic *io)
{
	uint32_t sel = io->st.regsel;

	switch (sel) {
	case IOAPIC_ID:
	case IOAPIC_ARB:
		return (uint32_t)io->st.id << 24;
	case IOAPIC_VER:
		return X86_IOAPIC_VERSION | ((X86_IOAPIC_PINS - 1) << 16);
	}
	if (sel >= IOAPIC_RTE0 && sel < IOAPIC_RTE0 + 2 * X86_IOAPIC_PINS) {
		uint64_t e = io->st.rte[(sel - IOAPIC_RTE0) / 2];

		return (sel & 1) ? (uint32_t)(e >> 32) : (uint32_t)e;
	}
	return 0;
}

static void write_reg(struct x86_ioapic *io, uint32_t v)
{
	uint32_t sel = io->st.regsel;
	unsigned pin;
	uint64_t *e, old;

	if (sel == IOAPIC_ID) {
		io->st.id = (uint8_t)((v >> 24) & 0xf);
		return;
	}
	if (sel < IOAPIC_RTE0 || sel >= IOAPIC_RTE0 + 2 * X86_IOAPIC_PINS)
		return; /* version, arbitration: read-only */
	pin = (sel - IOAPIC_RTE0) / 2;
	e = &io->st.rte[pin];
	old = *e;
	if (sel & 1)
		*e = (*e & 0xffffffffull) | ((uint64_t)v << 32);
	else
		*e = (*e & ~0xffffffffull) | v;
	*e = (*e & RTE_WRITABLE) | (old & (RTE_DELIVS | RTE_REMOTE_IRR));
	if (!(*e & RTE_LEVEL))
		*e &= ~RTE_REMOTE_IRR; /* an edge pin has none */
	sync_routes(io);
	/* unmasked (or made level) with the line up: it goes now */
	if ((io->st.lines >> pin & 1) && (*e & RTE_LEVEL) && !(*e & RTE_MASK))
		fire(io, pin);
}

/* The EOI of @vector: its level pins' remote IRR cleared. Lock held. */
static void eoi(struct x86_ioapic *io, uint8_t vector)
{
	for (unsigned i = 0; i < X86_IOAPIC_PINS; i++) {
		uint64_t *e = &io->st.rte[i];

		if ((*e & RTE_VECTOR) != vector || !(*e & RTE_REMOTE_IRR))
			continue;
		*e &= ~RTE_REMOTE_IRR;
		/* still asserted: once more (a level pin's second look) */
		if (io->st.lines >> i & 1)
			fire(io, i);
	}
}

void x86_ioapic_mmio(struct x86_ioapic *io, uint64_t off, void *data, uint32_t len, bool is_write)
{
	uint32_t v = 0;

	if (len == 0 || len > 8)
		return;
	pthread_mutex_lock(&io->lock);
	if (is_write) {
		uint8_t b[8] = { 0 };

		memcpy(b, data, len);
		memcpy(&v, b, sizeof(v));
		if (len == 1)
			v &= 0xff;
		else if (len == 2)
			v &= 0xffff;
		switch (off) {
		case REG_SEL:
			io->st.regsel = v & 0xff;
			break;
		case REG_WIN:
			write_reg(io, v);
			break;
		case REG_EOI:
			eoi(io, v & 0xff);
			break;
		}
	} else {
		uint8_t b[8] = { 0 };

		if (off < REG_SEL + 4)
			v = io->st.regsel >> (8 * (off - REG_SEL));
		else if (off >= REG_WIN && off < REG_WIN + 4)
			v = read_reg(io) >> (8 * (off - REG_WIN));
		memcpy(b, &v, sizeof(v));
		memcpy(data, b, len);
	}
	pthread_mutex_unlock(&io->lock);
}

int x86_ioapic_line(struct x86_ioapic *io, unsigned pin, bool level)
{
	uint32_t bit;
	bool was;

	if (pin >= X86_IOAPIC_PINS)
		return -EINVAL;
	bit = 1u << pin;
	pthread_mutex_lock(&io->lock);
	was = io->st.lines & bit;
	if (level)
		io->st.lines |= bit;
	else
		io->st.lines &= ~bit;
	/* an edge pin on a rising edge; a level pin whenever it is up */
	if (level && (!was || (io->st.rte[pin] & RTE_LEVEL)))
		fire(io, pin);
	pthread_mutex_unlock(&io->lock);
	return 0;
}

void x86_ioapic_eoi(struct x86_ioapic *io, uint8_t vector)
{
	pthread_mutex_lock(&io->lock);
	eoi(io, vector);
	pthread_mutex_unlock(&io->lock);
}

void x86_ioapic_get(struct x86_ioapic *io, struct x86_ioapic_state *st)
{
	pthread_mutex_lock(&io->lock);
	*st = io->st;
	pthread_mutex_unlock(&io->lock);
}

int x86_ioapic_set(struct x86_ioapic *io, const struct x86_ioapic_state *st, char *err,
		   size_t errlen)
{
	if (st->regsel > 0xff || st->id > 0xf ||
	    (X86_IOAPIC_PINS < 32 && (st->lines >> X86_IOAPIC_PINS))) {
		snprintf(err, errlen, "ioapic: register select %#x, id %u or lines %#x out of range",
			 st->regsel, st->id, st->lines);
		return -EINVAL;
	}
	pthread_mutex_lock(&io->lock);
	io->st = *st;
	for (unsigned i = 0; i < X86_IOAPIC_PINS; i++)
		if (!(io->st.rte[i] & RTE_LEVEL))
			io->st.rte[i] &= ~RTE_REMOTE_IRR;
	io->n_routes = ~0u; /* whatever KVM has: set them all */
	sync_routes(io);
	pthread_mutex_unlock(&io->lock);
	return 0;
}
