/* SPDX-License-Identifier: Apache-2.0 */
/* The legacy PC ports a Linux guest touches that KVM does not emulate: the
 * i8042 (its probe and the CPU-reset line), the POST port 0x80, the CMOS
 * RTC and the ACPI PM1 registers. PIC, PIT, ELCR and the speaker port are
 * in-kernel (vm.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bus.h"
#include "mem.h"
#include "vm.h"
#include "x86.h"

/* i8042 status bits and the commands Linux sends (drivers/input/serio/i8042.h). */
#define STR_OBF      0x01 /* output buffer full */
#define STR_SYSFLAG  0x04 /* self-test passed */
#define STR_CMDDAT   0x08 /* last write was a command */
#define STR_KEYLOCK  0x10 /* set: keyboard not inhibited by the key lock */
#define STR_AUXDATA  0x20 /* output byte came from the aux (mouse) port */
#define CMD_RCTR     0x20
#define CMD_WCTR     0x60
#define CMD_AUX_DIS  0xa7
#define CMD_AUX_EN   0xa8
#define CMD_AUX_TEST 0xa9
#define CMD_SELFTEST 0xaa
#define CMD_KBD_TEST 0xab
#define CMD_KBD_DIS  0xad
#define CMD_KBD_EN   0xae
#define CMD_ROUTP    0xd0
#define CMD_WOUTP    0xd1
#define CMD_WKBD     0xd2
#define CMD_WAUX_OUT 0xd3 /* I8042_CMD_AUX_LOOP */
#define CMD_WAUX     0xd4
#define CMD_RESET    0xfe
#define CTR_KBDDIS   0x10
#define CTR_AUXDIS   0x20

/* The BIOS warm-boot flag: Linux stores 0x1234 at physical 0x472 before a
 * warm reset (native_machine_emergency_restart in arch/x86/kernel/reboot.c:
 * "mode = reboot_mode == REBOOT_WARM ? 0x1234 : 0"). On panic, panic() in
 * kernel/panic.c sets reboot_mode = panic_reboot_mode, which "reboot=...,
 * panic_warm" sets to REBOOT_WARM (reboot_setup in kernel/reboot.c); the
 * "k" of reboot=k then makes it pulse the i8042 reset line. So: a reset
 * with 0x1234 there is a panic, any other reset a plain reboot. */
#define WARM_FLAG_GPA 0x472
#define WARM_FLAG     0x1234

static void i8042_reset(struct x86_vm *xv)
{
	struct vm *vm = xv->vm;
	uint16_t flag = 0;

	if (!mem_read(&vm->mem, WARM_FLAG_GPA, &flag, sizeof(flag)) && flag == WARM_FLAG)
		vm_request_exit(vm, VM_EXIT_PANIC,
				"guest kernel panicked (warm reset: 0x1234 at 0x472, then i8042 reset)");
	else
		vm_request_exit(vm, VM_EXIT_OK, "guest requested reset (i8042)");
}

static void i8042_output(struct x86_i8042 *k, uint8_t v, bool aux)
{
	k->out = v;
	k->out_full = true;
	k->out_aux = aux;
}

/* Returns true if the command asks for a CPU reset. */
static bool i8042_command(struct x86_i8042 *k, uint8_t cmd)
{
	switch (cmd) {
	case CMD_RCTR:
		i8042_output(k, k->ctr, false);
		break;
	case CMD_WCTR: case CMD_WOUTP: case CMD_WKBD: case CMD_WAUX_OUT: case CMD_WAUX:
		k->pending = cmd;
		break;
	case CMD_AUX_DIS:
		k->ctr |= CTR_AUXDIS;
		break;
	case CMD_AUX_EN:
		k->ctr &= ~CTR_AUXDIS;
		break;
	case CMD_AUX_TEST:
		/* 0x01 "clock line stuck low": Linux's i8042_check_aux() then
		 * decides there is no mouse port, without waiting for one. */
		i8042_output(k, 0x01, false);
		break;
	case CMD_SELFTEST:
		i8042_output(k, 0x55, false);
		break;
	case CMD_KBD_TEST:
		i8042_output(k, 0x00, false);
		break;
	case CMD_KBD_DIS:
		k->ctr |= CTR_KBDDIS;
		break;
	case CMD_KBD_EN:
		k->ctr &= ~CTR_KBDDIS;
		break;
	case CMD_ROUTP:
		i8042_output(k, k->outport, false);
		break;
	default:
		/* 0xf0-0xff pulse output-port lines for 6 us; bit 0 low
		 * pulses the CPU reset line (0xfe is the usual one). */
		return cmd >= 0xf0 && !(cmd & 1);
	}
	return false;
}

static void i8042_data_write(struct x86_i8042 *k, uint8_t v)
{
	switch (k->pending) {
	case CMD_WCTR:
		k->ctr = v;
		break;
	case CMD_WOUTP:
		k->outport = v;
		break;
	case CMD_WKBD:
		i8042_output(k, v, false);
		break;
	case CMD_WAUX_OUT:
		/* Echo without the aux flag: i8042_check_aux() reads that as
		 * a failed loopback, so no mouse port, and no timeout. */
		i8042_output(k, v, false);
		break;
	default:
		/* A byte for the keyboard (or mouse) itself: there is none,
		 * so no reply; the serio probe times out on its own thread. */
		break;
	}
	k->pending = 0;
}

/* Ports 0x60 (data, cmd false) and 0x64 (status/command, cmd true). */
static void i8042_access(void *priv, bool cmd, void *data, uint32_t len, bool is_write)
{
	struct x86_vm *xv = priv;
	struct x86_i8042 *k = &xv->i8042;
	uint8_t *b = data;
	bool reset = false;

	pthread_mutex_lock(&k->lock);
	if (!cmd && !is_write) {
		b[0] = k->out;
		k->out_full = false;
	} else if (!is_write) {
		b[0] = STR_SYSFLAG | STR_KEYLOCK | (k->out_full ? STR_OBF : 0) | (k->out_aux ? STR_AUXDATA : 0) |
		       (k->last_cmd ? STR_CMDDAT : 0);
	} else if (!cmd) {
		k->last_cmd = false;
		i8042_data_write(k, b[0]);
	} else {
		k->last_cmd = true;
		k->pending = 0;
		reset = i8042_command(k, b[0]);
	}
	if (!is_write && len > 1)
		memset(b + 1, 0xff, len - 1);
	pthread_mutex_unlock(&k->lock);
	if (reset)
		i8042_reset(xv);
}

static void i8042_data_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	i8042_access(priv, false, data, len, is_write);
}

static void i8042_cmd_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	i8042_access(priv, true, data, len, is_write);
}

/* Port 0x80: POST codes, and Linux's default I/O delay (outb to 0x80). */
static void post_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	if (!is_write)
		memset(data, 0xff, len);
}

static uint8_t bcd(int v)
{
	return (uint8_t)(((v / 10) << 4) | (v % 10));
}

/*
 * CMOS: 0x70 selects a register (bit 7 is the NMI mask), 0x71 reads or
 * writes it. The clock registers show host UTC in BCD, 24-hour mode, with
 * update-in-progress always clear: old kernels spin on that bit forever if
 * the port floats to 0xff. Clock writes are ignored; the rest is plain RAM.
 */
static uint8_t cmos_read(struct x86_cmos *c, uint8_t idx)
{
	struct tm tm;
	time_t now;

	if (idx > 0x09 && idx != 0x32)
		switch (idx) {
		case 0x0a: return 0x26; /* 32.768 kHz, 1024 Hz, UIP clear */
		case 0x0b: return 0x02; /* 24-hour, BCD, no interrupts */
		case 0x0c: return 0x00;
		case 0x0d: return 0x80; /* battery good */
		default: return c->ram[idx];
		}
	now = time(NULL);
	gmtime_r(&now, &tm);
	switch (idx) {
	case 0x00: return bcd(tm.tm_sec);
	case 0x02: return bcd(tm.tm_min);
	case 0x04: return bcd(tm.tm_hour);
	case 0x06: return bcd(tm.tm_wday + 1);
	case 0x07: return bcd(tm.tm_mday);
	case 0x08: return bcd(tm.tm_mon + 1);
	case 0x09: return bcd(tm.tm_year % 100);
	case 0x32: return bcd((tm.tm_year + 1900) / 100);
	default: return 0; /* alarm registers */
	}
}

static void cmos_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct x86_cmos *c = &((struct x86_vm *)priv)->cmos;
	uint8_t *b = data;

	pthread_mutex_lock(&c->lock);
	if (off == 0 && is_write)
		c->index = b[0] & 0x7f;
	else if (off == 0)
		b[0] = c->index;
	else if (is_write && c->index > 0x0d && c->index != 0x32)
		c->ram[c->index] = b[0];
	else if (!is_write)
		b[0] = cmos_read(c, c->index);
	if (!is_write && len > 1)
		memset(b + 1, 0xff, len - 1);
	pthread_mutex_unlock(&c->lock);
}

/*
 * ACPI PM1a: status (0x600) reads 0, as no fixed event ever fires; enable
 * (0x602) is plain storage; control (0x604) always shows SCI_EN, since
 * there is no SMI_CMD to switch modes with. Sleep requests are ignored:
 * the DSDT offers no \_S5, so Linux never writes one.
 */
#define PM1_SCI_EN 0x0001

static void pm_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct x86_pm *pm = &((struct x86_vm *)priv)->pm;
	uint8_t regs[6];

	pthread_mutex_lock(&pm->lock);
	memset(regs, 0, 2);
	memcpy(regs + 2, &pm->enable, 2);
	pm->control |= PM1_SCI_EN;
	memcpy(regs + 4, &pm->control, 2);
	if (off + len > sizeof(regs)) {
		if (!is_write)
			memset(data, 0xff, len);
	} else if (!is_write) {
		memcpy(data, regs + off, len);
	} else {
		memcpy(regs + off, data, len);
		memcpy(&pm->enable, regs + 2, 2);
		memcpy(&pm->control, regs + 4, 2);
		pm->control |= PM1_SCI_EN;
	}
	pthread_mutex_unlock(&pm->lock);
}

/*
 * ACPI GPE0 (0x620): status (2 bytes, write 1 to clear), then enable (2
 * bytes). The SCI (IRQ 9, level, active high per the MADT) is asserted
 * while an enabled GPE is pending. Call with pm->lock held.
 */
static void gpe_update(struct x86_vm *xv)
{
	irq_line(xv->vm, X86_ACPI_SCI_IRQ, (xv->pm.gpe_sts & xv->pm.gpe_en) != 0);
}

static void gpe_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct x86_vm *xv = priv;
	struct x86_pm *pm = &xv->pm;
	uint8_t regs[4];

	pthread_mutex_lock(&pm->lock);
	memcpy(regs, &pm->gpe_sts, 2);
	memcpy(regs + 2, &pm->gpe_en, 2);
	if (off + len > sizeof(regs)) {
		if (!is_write)
			memset(data, 0xff, len);
	} else if (!is_write) {
		memcpy(data, regs + off, len);
	} else {
		uint8_t w[4] = { 0 };

		memcpy(w + off, data, len);
		for (uint32_t i = off; i < off + len && i < 2; i++)
			regs[i] &= (uint8_t)~w[i]; /* status: write 1 to clear */
		for (uint32_t i = off > 2 ? off : 2; i < off + len; i++)
			regs[i] = w[i];
		memcpy(&pm->gpe_sts, regs, 2);
		memcpy(&pm->gpe_en, regs + 2, 2);
		gpe_update(xv);
	}
	pthread_mutex_unlock(&pm->lock);
}

void x86_gpe_raise(struct x86_vm *xv, unsigned gpe)
{
	pthread_mutex_lock(&xv->pm.lock);
	xv->pm.gpe_sts |= (uint16_t)(1u << gpe);
	gpe_update(xv);
	pthread_mutex_unlock(&xv->pm.lock);
}

void x86_gpe_sync(struct x86_vm *xv)
{
	pthread_mutex_lock(&xv->pm.lock);
	gpe_update(xv);
	pthread_mutex_unlock(&xv->pm.lock);
}

int x86_platform_setup(struct x86_vm *xv, char *err, size_t errlen)
{
	struct bus *pio = &xv->vm->pio;
	int ret;

	pthread_mutex_init(&xv->i8042.lock, NULL);
	pthread_mutex_init(&xv->cmos.lock, NULL);
	pthread_mutex_init(&xv->pm.lock, NULL);
	xv->locks_ready = true;
	/* Translated scancodes, interrupts off until Linux turns them on. */
	xv->i8042.ctr = 0x44 | CTR_AUXDIS;
	xv->i8042.outport = 0x01; /* reset line released */

	ret = bus_add(pio, 0x60, 1, i8042_data_io, xv, "i8042");
	ret = ret ?: bus_add(pio, 0x64, 1, i8042_cmd_io, xv, "i8042");
	ret = ret ?: bus_add(pio, 0x70, 2, cmos_io, xv, "cmos");
	ret = ret ?: bus_add(pio, 0x80, 1, post_io, xv, "post");
	ret = ret ?: bus_add(pio, X86_PM1A_EVT_PORT, 6, pm_io, xv, "acpi-pm1");
	ret = ret ?: bus_add(pio, X86_GPE0_PORT, 4, gpe_io, xv, "acpi-gpe0");
	if (ret)
		snprintf(err, errlen, "x86 platform ports: bus_add: %s", strerror(-ret));
	return ret;
}

void x86_platform_destroy(struct x86_vm *xv)
{
	if (!xv->locks_ready)
		return;
	pthread_mutex_destroy(&xv->i8042.lock);
	pthread_mutex_destroy(&xv->cmos.lock);
	pthread_mutex_destroy(&xv->pm.lock);
	xv->locks_ready = false;
}
