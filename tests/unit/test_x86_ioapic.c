/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the split irqchip's IOAPIC (arch/x86_64/ioapic.c), driven
 * through its MMIO page the way a guest programs it, its messages and
 * KVM routes caught by fakes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../arch/x86_64/x86.h"
#include "cunit_main.h"

#define SEL 0x00
#define WIN 0x10
#define EOI 0x40

static struct {
	unsigned n;
	uint64_t addr;
	uint32_t data;
	unsigned route_calls, n_routes;
	struct x86_ioapic_route routes[X86_IOAPIC_PINS];
} got;

static int deliver(void *ctx, uint64_t addr, uint32_t data)
{
	(void)ctx;
	got.n++;
	got.addr = addr;
	got.data = data;
	return 0;
}

static int routes(void *ctx, const struct x86_ioapic_route *r, unsigned n)
{
	(void)ctx;
	got.route_calls++;
	got.n_routes = n;
	memcpy(got.routes, r, n * sizeof(*r));
	return 0;
}

static void wr(struct x86_ioapic *io, uint64_t off, uint32_t v)
{
	x86_ioapic_mmio(io, off, &v, 4, true);
}

static uint32_t rd(struct x86_ioapic *io, uint32_t reg)
{
	uint32_t v = 0xdeadbeef;

	wr(io, SEL, reg);
	x86_ioapic_mmio(io, WIN, &v, 4, false);
	return v;
}

static void set_rte(struct x86_ioapic *io, unsigned pin, uint64_t e)
{
	wr(io, SEL, 0x11 + 2 * pin);
	wr(io, WIN, (uint32_t)(e >> 32));
	wr(io, SEL, 0x10 + 2 * pin);
	wr(io, WIN, (uint32_t)e);
}

static uint64_t get_rte(struct x86_ioapic *io, unsigned pin)
{
	return rd(io, 0x10 + 2 * pin) | (uint64_t)rd(io, 0x11 + 2 * pin) << 32;
}

static void fresh(struct x86_ioapic *io)
{
	memset(&got, 0, sizeof(got));
	x86_ioapic_init(io, 2, deliver, routes, NULL);
}

static void test_reset(void)
{
	struct x86_ioapic io;

	fresh(&io);
	CU_ASSERT_EQUAL(rd(&io, 0x00), 2u << 24);     /* id, as the tables say */
	CU_ASSERT_EQUAL(rd(&io, 0x01), 0x00170011u);  /* 24 pins, version 0x11 */
	for (unsigned i = 0; i < X86_IOAPIC_PINS; i++)
		CU_ASSERT_EQUAL(get_rte(&io, i), 1ull << 16); /* masked */
	CU_ASSERT_EQUAL(rd(&io, 0x10 + 2 * X86_IOAPIC_PINS), 0u); /* past the last pin */
	CU_ASSERT_EQUAL(rd(&io, 0xff), 0u);
	/* IOREGSEL reads back, a byte at a time too */
	{
		uint8_t b = 0;

		wr(&io, SEL, 0x1234);
		x86_ioapic_mmio(&io, SEL, &b, 1, false);
		CU_ASSERT_EQUAL(b, 0x34);
	}
	/* nothing asserted, nothing sent; version is read-only */
	wr(&io, SEL, 0x01);
	wr(&io, WIN, 0);
	CU_ASSERT_EQUAL(rd(&io, 0x01), 0x00170011u);
	CU_ASSERT_EQUAL(got.n, 0u);
	CU_ASSERT_EQUAL(x86_ioapic_line(&io, X86_IOAPIC_PINS, true), -EINVAL);
	CU_ASSERT_EQUAL(x86_ioapic_line(&io, 4, true), 0); /* masked: nothing */
	CU_ASSERT_EQUAL(got.n, 0u);
	x86_ioapic_destroy(&io);
}

static void test_edge(void)
{
	struct x86_ioapic io;

	fresh(&io);
	set_rte(&io, 4, 0x40 | (1ull << 56)); /* vector 0x40, fixed, physical, APIC 1 */
	CU_ASSERT_EQUAL(got.route_calls, 0u); /* no level pin: KVM needs no route */
	x86_ioapic_line(&io, 4, true);
	CU_ASSERT_EQUAL(got.n, 1u);
	CU_ASSERT_EQUAL(got.addr, 0xfee01000ull);
	CU_ASSERT_EQUAL(got.data, 0x40u);
	x86_ioapic_line(&io, 4, true); /* still high: no edge */
	CU_ASSERT_EQUAL(got.n, 1u);
	x86_ioapic_line(&io, 4, false);
	x86_ioapic_line(&io, 4, true);
	CU_ASSERT_EQUAL(got.n, 2u);
	/* an EOI does nothing to an edge pin; no remote IRR is ever shown */
	x86_ioapic_eoi(&io, 0x40);
	CU_ASSERT_EQUAL(got.n, 2u);
	CU_ASSERT_EQUAL(get_rte(&io, 4) & (1ull << 14), 0ull);
	/* masked, an edge is lost (as on the part) */
	x86_ioapic_line(&io, 4, false);
	set_rte(&io, 4, 0x40 | (1ull << 16));
	x86_ioapic_line(&io, 4, true);
	CU_ASSERT_EQUAL(got.n, 2u);
	set_rte(&io, 4, 0x40);
	CU_ASSERT_EQUAL(got.n, 2u);
	x86_ioapic_destroy(&io);
}

static void test_level(void)
{
	struct x86_ioapic io;
	uint64_t e = 0x51 | (1ull << 15) | (3ull << 56); /* level, APIC 3 */

	fresh(&io);
	set_rte(&io, 9, e);
	/* KVM learns the level pin's message, to report its EOI */
	CU_ASSERT_EQUAL(got.n_routes, 1u);
	CU_ASSERT_EQUAL(got.routes[0].pin, 9u);
	CU_ASSERT_EQUAL(got.routes[0].addr, 0xfee03000ull);
	CU_ASSERT_EQUAL(got.routes[0].data, 0x51u | (1u << 15) | (1u << 14));
	x86_ioapic_line(&io, 9, true);
	CU_ASSERT_EQUAL(got.n, 1u);
	CU_ASSERT_EQUAL(got.data, 0x51u | (1u << 15) | (1u << 14));
	CU_ASSERT(get_rte(&io, 9) & (1ull << 14)); /* remote IRR */
	x86_ioapic_line(&io, 9, true);             /* waits for the EOI */
	CU_ASSERT_EQUAL(got.n, 1u);
	x86_ioapic_eoi(&io, 0x52); /* another vector: nothing */
	CU_ASSERT_EQUAL(got.n, 1u);
	x86_ioapic_eoi(&io, 0x51); /* still asserted: again */
	CU_ASSERT_EQUAL(got.n, 2u);
	x86_ioapic_line(&io, 9, false);
	wr(&io, EOI, 0x51); /* the version 0x20 EOI register */
	CU_ASSERT_EQUAL(got.n, 2u);
	CU_ASSERT_EQUAL(get_rte(&io, 9) & (1ull << 14), 0ull);
	/* the guest cannot set remote IRR or delivery status */
	set_rte(&io, 9, e | (1ull << 14) | (1ull << 12));
	CU_ASSERT_EQUAL(get_rte(&io, 9), e);
	/* masked while high, then unmasked: it goes at the unmask */
	set_rte(&io, 9, e | (1ull << 16));
	x86_ioapic_line(&io, 9, true);
	CU_ASSERT_EQUAL(got.n, 2u);
	set_rte(&io, 9, e);
	CU_ASSERT_EQUAL(got.n, 3u);
	x86_ioapic_destroy(&io);
}

static void test_routes(void)
{
	struct x86_ioapic io;
	unsigned calls;

	fresh(&io);
	set_rte(&io, 5, 0x60 | (1ull << 15));
	set_rte(&io, 7, 0x61 | (1ull << 15));
	calls = got.route_calls;
	CU_ASSERT_EQUAL(got.n_routes, 2u);
	/* masking a level pin changes nothing KVM needs: no new routes */
	set_rte(&io, 5, 0x60 | (1ull << 15) | (1ull << 16));
	set_rte(&io, 5, 0x60 | (1ull << 15));
	CU_ASSERT_EQUAL(got.route_calls, calls);
	/* a new vector does; an edge pin leaves the list */
	set_rte(&io, 5, 0x62 | (1ull << 15));
	CU_ASSERT_EQUAL(got.route_calls, calls + 1);
	set_rte(&io, 7, 0x61);
	CU_ASSERT_EQUAL(got.n_routes, 1u);
	CU_ASSERT_EQUAL(got.routes[0].pin, 5u);
	/* a vector below 16 is no interrupt KVM could report */
	set_rte(&io, 7, 0x05 | (1ull << 15));
	CU_ASSERT_EQUAL(got.n_routes, 1u);
	x86_ioapic_destroy(&io);
}

static void test_modes(void)
{
	uint64_t addr;
	uint32_t data;
	struct x86_ioapic io;

	/* logical destination 0x0f, lowest priority: hint and mode bits */
	x86_ioapic_msi(0x70 | (1ull << 8) | (1ull << 11) | (0x0full << 56), &addr, &data);
	CU_ASSERT_EQUAL(addr, 0xfee0f00cull);
	CU_ASSERT_EQUAL(data, 0x170u);
	/* NMI */
	x86_ioapic_msi(4ull << 8, &addr, &data);
	CU_ASSERT_EQUAL(data, 0x400u);
	/* ExtINT: no 8259 here to give a vector, nothing is sent */
	fresh(&io);
	set_rte(&io, 0, 7ull << 8);
	x86_ioapic_line(&io, 0, true);
	CU_ASSERT_EQUAL(got.n, 0u);
	x86_ioapic_destroy(&io);
}

static void test_state(void)
{
	struct x86_ioapic a, b;
	struct x86_ioapic_state st;
	char err[160];

	fresh(&a);
	set_rte(&a, 9, 0x51 | (1ull << 15));
	x86_ioapic_line(&a, 9, true); /* in flight: remote IRR set */
	wr(&a, SEL, 0x13);
	x86_ioapic_get(&a, &st);
	memset(&got, 0, sizeof(got));
	x86_ioapic_init(&b, 0, deliver, routes, NULL);
	CU_ASSERT_EQUAL(x86_ioapic_set(&b, &st, err, sizeof(err)), 0);
	/* KVM gets the level pin's route again (a fresh VM has none) */
	CU_ASSERT_EQUAL(got.n_routes, 1u);
	CU_ASSERT_EQUAL(got.routes[0].pin, 9u);
	CU_ASSERT_EQUAL(got.n, 0u); /* nothing sent by the load itself */
	CU_ASSERT_EQUAL(get_rte(&b, 9), get_rte(&a, 9));
	CU_ASSERT_EQUAL(rd(&b, 0x00), 2u << 24);
	x86_ioapic_eoi(&b, 0x51); /* the EOI the snapshot's guest still owes */
	CU_ASSERT_EQUAL(got.n, 1u);
	/* out of range: refused with a line, the state kept */
	st.regsel = 0x100;
	CU_ASSERT_EQUAL(x86_ioapic_set(&b, &st, err, sizeof(err)), -EINVAL);
	CU_ASSERT(strstr(err, "ioapic") != NULL);
	st.regsel = 0;
	st.lines = 1u << X86_IOAPIC_PINS;
	CU_ASSERT_EQUAL(x86_ioapic_set(&b, &st, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(get_rte(&b, 9), get_rte(&a, 9));
	x86_ioapic_destroy(&a);
	x86_ioapic_destroy(&b);
}

/* Accesses a guest may make that the part does not define: no crash,
 * no state change beyond the register named. */
static void test_odd_accesses(void)
{
	struct x86_ioapic io;
	uint8_t big[16] = { 0 };
	uint16_t h = 0;

	fresh(&io);
	x86_ioapic_mmio(&io, WIN, big, 16, false); /* too long: ignored */
	x86_ioapic_mmio(&io, WIN, big, 0, true);
	x86_ioapic_mmio(&io, 0xffc, big, 4, true); /* nothing there */
	x86_ioapic_mmio(&io, 0x20, big, 4, false);
	CU_ASSERT_EQUAL(big[0], 0);
	wr(&io, SEL, 0x01);
	x86_ioapic_mmio(&io, WIN + 2, &h, 2, false); /* the upper half */
	CU_ASSERT_EQUAL(h, 0x17);
	wr(&io, SEL, 0x00);
	wr(&io, WIN, 0xff000000u); /* the id is 4 bits */
	CU_ASSERT_EQUAL(rd(&io, 0x00), 0x0f000000u);
	CU_ASSERT_EQUAL(got.n, 0u);
	x86_ioapic_destroy(&io);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "reset state, registers, refusals", test_reset },
		{ "edge pins: one message a rising edge, lost while masked", test_edge },
		{ "level pins: remote IRR, EOI, again while asserted, at unmask", test_level },
		{ "KVM's routes: level pins only, sent when they change", test_routes },
		{ "messages: logical, lowest priority, NMI; ExtINT sends nothing", test_modes },
		{ "snapshot state: saved, loaded, routes again; bad state refused", test_state },
		{ "odd accesses", test_odd_accesses },
		{ NULL, NULL },
	};

	return cu_run("x86_ioapic", tests);
}
