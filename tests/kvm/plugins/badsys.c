/* SPDX-License-Identifier: Apache-2.0 */
/*
 * badsys: a test-only device plugin standing for a device plugin a guest
 * has taken over. It sits where the MMIO testdev does (class "testdev");
 * the first guest write to it makes a system call no thread of cubicle may
 * make once the VM runs, execve("/bin/false"), on the thread its @thread
 * parameter names:
 *   vcpu    in the I/O handler (a vCPU thread);
 *   event   in an fd callback on the event loop (the handler wakes it);
 *   worker  on a thread of its own, started at create and confined with
 *           thread_enter (the handler wakes it).
 * With cubicle's seccomp filters enforced the process ends with status
 * 159 and a line naming execve and the thread; without them it becomes
 * /bin/false (status 1). Never installed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cubicle/plugin.h>

static const char *const thread_choices[] = { "vcpu", "event", "worker", NULL };
enum { T_VCPU, T_EVENT, T_WORKER };

struct badsys_cfg {
	int thread;
};

struct badsys {
	struct cub_inst *in;
	const struct cub_host *h;
	int thread, efd;
	pthread_t worker;
	bool have_worker;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool go, quit, fired;
};

static void forbidden(void)
{
	char *const argv[] = { "false", NULL };
	char *const envp[] = { NULL };

	execve("/bin/false", argv, envp);
}

static void on_event(void *arg)
{
	struct badsys *b = arg;
	uint64_t n;

	if (read(b->efd, &n, sizeof(n)) == sizeof(n))
		forbidden();
}

static void *worker(void *arg)
{
	struct badsys *b = arg;

	if (b->h->thread_enter(b->in, "badsys-io"))
		return NULL;
	pthread_mutex_lock(&b->lock);
	while (!b->go && !b->quit)
		pthread_cond_wait(&b->cond, &b->lock);
	if (b->go)
		forbidden();
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

static void badsys_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct badsys *b = priv;
	uint64_t one = 1;
	bool first;

	(void)off, (void)len;
	if (!is_write) {
		for (uint32_t i = 0; i < len; i++)
			((uint8_t *)data)[i] = 0;
		return;
	}
	pthread_mutex_lock(&b->lock);
	first = !b->fired;
	b->fired = true;
	if (first && b->thread == T_WORKER) {
		b->go = true;
		pthread_cond_broadcast(&b->cond);
	}
	pthread_mutex_unlock(&b->lock);
	if (!first)
		return;
	b->h->log(b->in, CUB_LOG_INFO, "the guest wrote: making a forbidden system call on the %s thread",
		  thread_choices[b->thread]);
	if (b->thread == T_VCPU) {
		forbidden();
		return;
	}
	if (b->thread == T_EVENT && write(b->efd, &one, sizeof(one)) != sizeof(one))
		b->h->log(b->in, CUB_LOG_ERR, "cannot wake the event loop");
	/* Hold the guest here (it would end the VM next) while the other
	 * thread makes its call: 20 s, long past any test's patience. */
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 20;
		pthread_mutex_lock(&b->lock);
		while (!b->quit && pthread_cond_timedwait(&b->cond, &b->lock, &ts) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&b->lock);
	}
}

static void badsys_destroy(void *priv)
{
	struct badsys *b = priv;

	if (b->have_worker) {
		pthread_mutex_lock(&b->lock);
		b->quit = true;
		pthread_cond_broadcast(&b->cond);
		pthread_mutex_unlock(&b->lock);
		pthread_join(b->worker, NULL);
	}
	if (b->efd >= 0)
		close(b->efd);
	free(b);
}

static int badsys_create(struct cub_inst *in, const struct cub_host *h, const void *cfgp,
			 void **priv)
{
	const struct badsys_cfg *cfg = cfgp;
	struct cub_region r = { .want = CUB_BUS_MMIO, .class = "testdev", .len = 0x10,
				.io = badsys_io };
	struct badsys *b;
	int err = 0;

	if (!CUB_HOST_HAS(h, thread_enter))
		return h->fail(in, -ENOTSUP, "this host has no thread_enter (ABI 1.7)");
	b = calloc(1, sizeof(*b));
	if (!b)
		return h->fail(in, -ENOMEM, "out of memory");
	b->in = in;
	b->h = h;
	b->thread = cfg->thread;
	b->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	r.priv = b;
	err = b->efd < 0 ? -errno : h->fd_watch(in, b->efd, EPOLLIN, on_event, b);
	if (!err)
		err = h->region_add(in, &r);
	if (err) {
		badsys_destroy(b);
		return h->fail(in, err, "setup failed (%d)", err);
	}
	if (b->thread == T_WORKER) {
		err = pthread_create(&b->worker, NULL, worker, b);
		if (err) {
			badsys_destroy(b);
			return h->fail(in, -err, "cannot start its thread");
		}
		b->have_worker = true;
	}
	*priv = b;
	return 0;
}

static const struct cub_param badsys_params[] = {
	{ .name = "thread", .type = CUB_P_ENUM, .offset = offsetof(struct badsys_cfg, thread),
	  .def = "vcpu", .choices = thread_choices,
	  .doc = "where the forbidden call is made: vcpu, event or worker" },
};

static const struct cub_device_ops badsys_ops = {
	.create = badsys_create,
	.destroy = badsys_destroy,
};

CUB_PLUGIN({
	CUB_PLUGIN_ABI(7),
	.kind = CUB_KIND_DEVICE,
	.name = "badsys",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "test only: makes a forbidden system call when the guest writes to it",
	.cfg_size = sizeof(struct badsys_cfg),
	.params = badsys_params,
	.n_params = CUB_ARRAY_SIZE(badsys_params),
	.ops = &badsys_ops,
});
