/* SPDX-License-Identifier: Apache-2.0 */
/* The cub_host services every plugin instance gets: logging, failures,
 * guest memory, regions, interrupts, fd watches, exit, raw terminals. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "arch.h"
#include "confine.h"
#include "devices.h"
#include "event.h"
#include "virtio/virtio_dev.h"
#include "vm.h"

/* ---- terminal restore, for raw-mode consoles ---- */

static struct {
	int fd;
	struct termios saved;
	volatile sig_atomic_t active;
} tty = { .fd = -1 };

void devices_tty_restore(void)
{
	if (tty.active) {
		tcsetattr(tty.fd, TCSAFLUSH, &tty.saved);
		tty.active = 0;
	}
}

static void fatal_signal(int sig)
{
	devices_tty_restore(); /* async-signal-safe: tcsetattr only */
	signal(sig, SIG_DFL);
	raise(sig);
}

static int host_tty_raw(struct cub_inst *in, int fd)
{
	static const int fatal[] = { SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGQUIT };
	struct termios raw;

	if (tty.active)
		return tty.fd == fd ? 0 : -EBUSY;
	if (tcgetattr(fd, &tty.saved) < 0)
		return -errno;
	raw = tty.saved;
	cfmakeraw(&raw);
	raw.c_oflag |= OPOST | ONLCR; /* keep host-side newline handling sane */
	tty.fd = fd;
	if (tcsetattr(fd, TCSANOW, &raw) < 0)
		return -errno;
	tty.active = 1;
	atexit(devices_tty_restore);
	for (unsigned i = 0; i < CUB_ARRAY_SIZE(fatal); i++) {
		struct sigaction sa = { .sa_handler = fatal_signal };

		sigaction(fatal[i], &sa, NULL);
	}
	return 0;
}

/* ---- the host services ---- */

static void host_log(struct cub_inst *in, int lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(lvl, in->name, fmt, ap);
	va_end(ap);
}

static void host_log_rl(struct cub_inst *in, int lvl, const char *fmt, ...)
{
	va_list ap;

	if (lvl > log_get_level() || !ratelimit_ok(&in->rl))
		return;
	va_start(ap, fmt);
	log_vmsg(lvl, in->name, fmt, ap);
	va_end(ap);
}

static int host_fail(struct cub_inst *in, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(in->err, sizeof(in->err), fmt, ap);
	va_end(ap);
	in->err_full = false;
	return err;
}

static void *host_gpa_map(struct cub_inst *in, uint64_t gpa, uint64_t len)
{
	return mem_map(&in->vm->mem, gpa, len);
}

static int host_region_add(struct cub_inst *in, struct cub_region *r)
{
	char why[256];
	struct bus *bus;
	int ret;

	if (in->created)
		return host_fail(in, -EBUSY, "regions can be added only at create time");
	if (in->n_regions == INST_MAX_REGIONS)
		return host_fail(in, -ENOSPC, "more than %d regions", INST_MAX_REGIONS);
	if (!r->io || !r->len || !r->class)
		return host_fail(in, -EINVAL, "region needs a class, a length and a handler");
	ret = arch_place(in->vm, r, why, sizeof(why));
	if (ret)
		return host_fail(in, ret, "%s", why);
	bus = r->bus == CUB_BUS_PIO ? &in->vm->pio : &in->vm->mmio;
	ret = bus_add(bus, r->base, r->len, r->io, r->priv, in->name);
	if (ret)
		return host_fail(in, ret, "%s region 0x%" PRIx64 "+0x%" PRIx64 " overlaps another device",
				 bus->name, r->base, r->len);
	in->regions[in->n_regions].bus = bus;
	in->regions[in->n_regions++].base = r->base;
	log_msg(CUB_LOG_DEBUG, in->name, "%s at %s 0x%" PRIx64 "+0x%" PRIx64 " irq %d", r->class,
		bus->name, r->base, r->len, r->irq);
	return 0;
}

static int host_irq_set(struct cub_inst *in, unsigned line, bool level)
{
	return irq_line(in->vm, line, level);
}

static int host_fd_watch(struct cub_inst *in, int fd, uint32_t ev, void (*cb)(void *), void *arg)
{
	int ret;

	if (in->n_watched == INST_MAX_WATCHES)
		return -ENOSPC;
	ret = event_watch(in->vm->ev, fd, ev, cb, arg);
	if (!ret)
		in->watched[in->n_watched++] = fd;
	return ret;
}

static int host_fd_unwatch(struct cub_inst *in, int fd)
{
	for (unsigned i = 0; i < in->n_watched; i++) {
		if (in->watched[i] == fd) {
			in->watched[i] = in->watched[--in->n_watched];
			return event_unwatch(in->vm->ev, fd);
		}
	}
	return -ENOENT;
}

static void host_vm_exit(struct cub_inst *in, int status)
{
	vm_request_exit(in->vm, status, "%s asked the VM to exit with status %d", in->name, status);
}

static uint64_t host_clock_us(struct cub_inst *in)
{
	return clock_since_start_us();
}

/* Name the thread and confine it as a worker (confine.h). */
static int host_thread_enter(struct cub_inst *in, const char *name)
{
	char n[16];

	snprintf(n, sizeof(n), "%s", name ? name : in->name);
	pthread_setname_np(pthread_self(), n);
	return confine_thread(CONFINE_WORKER, n);
}

const struct cub_host devices_host = {
	.size = sizeof(struct cub_host),
	.log = host_log,
	.log_ratelimited = host_log_rl,
	.fail = host_fail,
	.gpa_map = host_gpa_map,
	.region_add = host_region_add,
	.irq_set = host_irq_set,
	.fd_watch = host_fd_watch,
	.fd_unwatch = host_fd_unwatch,
	.vm_exit = host_vm_exit,
	.tty_raw = host_tty_raw,
	.clock_us = host_clock_us,
	.storage = &devices_storage_host,
	.net = &devices_net_host,
	.virtio = &virtio_host,
	.thread_enter = host_thread_enter,
};

