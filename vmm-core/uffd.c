/* SPDX-License-Identifier: Apache-2.0 */
/* Guest RAM filled on demand by a userfaultfd handler (uffd.h): restore's
 * Uffd memory backend. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cnode.h"
#include "confine.h"
#include "log.h"
#include "uffd.h"
#include "vm.h"

#define UPAGE 4096u

struct uffd {
	struct vm *vm;
	int uffd, src, stop;
	uint8_t *base;       /* the registered range */
	uint64_t size;
	pthread_t thread;
	uint64_t copied, zeroed; /* pages served (handler thread only; read after join) */
	uint8_t page[UPAGE] __attribute__((aligned(UPAGE)));
};

static bool zero_page(const uint8_t *p)
{
	const uint64_t *q = (const uint64_t *)(const void *)p;

	for (unsigned i = 0; i < UPAGE / 8; i++)
		if (q[i])
			return false;
	return true;
}

/* Fill the page at @off: the source's bytes, or the zero page for zeroes. */
static int serve(struct uffd *u, uint64_t off)
{
	ssize_t n;

	do
		n = pread(u->src, u->page, UPAGE, (off_t)off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n < (ssize_t)UPAGE)
		memset(u->page + n, 0, UPAGE - (size_t)n);
	if (zero_page(u->page)) {
		struct uffdio_zeropage z = { .range = { (uintptr_t)(u->base + off), UPAGE } };

		if (ioctl(u->uffd, UFFDIO_ZEROPAGE, &z) < 0 && errno != EEXIST)
			return -errno;
		u->zeroed++;
	} else {
		struct uffdio_copy c = { .dst = (uintptr_t)(u->base + off),
					 .src = (uintptr_t)u->page, .len = UPAGE };

		if (ioctl(u->uffd, UFFDIO_COPY, &c) < 0 && errno != EEXIST)
			return -errno;
		u->copied++;
	}
	return 0;
}

static void *handler(void *arg)
{
	struct uffd *u = arg;
	bool failed = false;

	pthread_setname_np(pthread_self(), "uffd");
	if (confine_thread(CONFINE_WORKER, "uffd")) {
		vm_request_exit(u->vm, VM_EXIT_ERROR, "the Uffd thread could not be confined");
		return NULL;
	}
	for (;;) {
		struct pollfd p[2] = { { u->uffd, POLLIN, 0 }, { u->stop, POLLIN, 0 } };
		struct uffd_msg msg;
		uint64_t off;
		ssize_t n;
		int ret;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		n = read(u->uffd, &msg, sizeof(msg));
		if (n != (ssize_t)sizeof(msg) || msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		off = (msg.arg.pagefault.address - (uintptr_t)u->base) & ~(uint64_t)(UPAGE - 1);
		if (off >= u->size)
			continue; /* not ours: cannot happen with one registered range */
		ret = failed ? -EIO : serve(u, off);
		if (ret) {
			struct uffdio_zeropage z = { .range = { (uintptr_t)(u->base + off), UPAGE } };

			/* The page cannot be had: the VM stops, and the faulting
			 * thread gets zeroes meanwhile rather than waiting forever. */
			if (!failed)
				vm_request_exit(u->vm, 1, "guest RAM: reading its page at %#" PRIx64
						" from the snapshot: %s; the VM stops", off,
						strerror(-ret));
			failed = true;
			ioctl(u->uffd, UFFDIO_ZEROPAGE, &z);
		}
	}
	return NULL;
}

int uffd_start(struct vm *vm, char *err, size_t errlen)
{
	struct guest_mem *m = &vm->mem;
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { .range = { (uintptr_t)m->host, m->size },
				       .mode = UFFDIO_REGISTER_MODE_MISSING };
	struct uffd *u;
	void *p;
	int ret = 0;

	u = aligned_alloc(UPAGE, (sizeof(*u) + UPAGE - 1) / UPAGE * UPAGE);
	if (!u)
		return errf(err, errlen, -ENOMEM, "out of memory");
	memset(u, 0, sizeof(*u));
	u->vm = vm;
	u->src = m->fd;
	u->stop = -1;
	u->base = m->host;
	u->size = m->size;
	u->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (u->uffd < 0) {
		ret = errf(err, errlen, -errno,
			   "the Uffd memory backend: userfaultfd: %s%s", strerror(errno),
			   errno == EPERM ? " (it needs root, CAP_SYS_PTRACE or vm.unprivileged_userfaultfd = 1)" : "");
		free(u);
		return ret;
	}
	/* The anonymous private pages the handler fills, over the mapping of
	 * the file that mem_create_file made. */
	p = mmap(m->host, m->size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	if (p == MAP_FAILED || ioctl(u->uffd, UFFDIO_API, &api) < 0 ||
	    ioctl(u->uffd, UFFDIO_REGISTER, &reg) < 0) {
		ret = errf(err, errlen, -errno, "the Uffd memory backend: %s: %s",
			   p == MAP_FAILED ? "mmap" : "registering guest RAM", strerror(errno));
		goto fail;
	}
	u->stop = eventfd(0, EFD_CLOEXEC);
	if (u->stop < 0 || (ret = -pthread_create(&u->thread, NULL, handler, u))) {
		ret = errf(err, errlen, u->stop < 0 ? -errno : ret,
			   "the Uffd memory backend: its thread: %s",
			   strerror(u->stop < 0 ? errno : -ret));
		goto fail;
	}
	m->private_file = false; /* anonymous now: a snapshot reads it all */
	m->fd = -1;              /* the handler's source from now on */
	vm->uffd = u;
	return 0;
fail:
	if (u->stop >= 0)
		close(u->stop);
	close(u->uffd);
	free(u);
	return ret;
}

void uffd_stop(struct vm *vm)
{
	struct uffd *u = vm->uffd;
	uint64_t one = 1;

	if (!u)
		return;
	/* A blocking eventfd written once: the write cannot fail or wait
	 * (not pthread_cancel: glibc would load libgcc_s to unwind the
	 * thread, a library a jail does not hold). */
	if (write(u->stop, &one, sizeof(one)) != sizeof(one))
		log_err("Uffd memory backend: cannot stop its thread: %s", strerror(errno));
	pthread_join(u->thread, NULL);
	log_debug("Uffd memory backend: %" PRIu64 " pages copied, %" PRIu64 " zero pages",
		  u->copied, u->zeroed);
	close(u->stop);
	close(u->uffd);
	close(u->src);
	free(u);
	vm->uffd = NULL;
}
