/* SPDX-License-Identifier: Apache-2.0 */
/* `cubicle check-host`: KVM, its capabilities, PVM, and what each plugin that asks needs from the host. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/kvm.h>

#include <jansson.h>

#include "arch.h"
#include "hostcheck.h"
#include "loader.h"

/* Where the facts go: text lines, or members of a JSON object. */
struct sink {
	FILE *f;
	json_t *j;
};

static void line(const char *key, const char *val, void *arg)
{
	struct sink *s = arg;

	if (s->j)
		json_object_set_new(s->j, key, json_string(val));
	else
		fprintf(s->f, "%-28s %s\n", key, val);
}

static void cap(struct sink *out, int fd, const char *name, int c)
{
	char buf[32];
	int r = ioctl(fd, KVM_CHECK_EXTENSION, c);

	snprintf(buf, sizeof(buf), "%s", r > 1 ? "" : r == 1 ? "yes" : "no");
	if (r > 1)
		snprintf(buf, sizeof(buf), "%d", r);
	line(name, buf, out);
}

/* The descriptor carries member m (it was built against a header that has it). */
#define DESC_HAS(d, m) ((d)->size >= offsetof(struct cub_plugin, m) + sizeof((d)->m))

/* One line per plugin that probes the host (cub_plugin.host_check), run in
 * dir: a probe that needs a folder (reflinks) uses the current one. */
static void plugin_lines(struct sink *out, const char *dir, const struct registry *reg)
{
	char buf[512];

	if (chdir(dir) < 0) {
		snprintf(buf, sizeof(buf), "not run (cannot enter %s: %s)", dir, strerror(errno));
		line("plugin checks", buf, out);
		return;
	}
	for (unsigned i = 0; i < reg->n; i++) {
		const struct cub_plugin *d = reg->p[i]->d;

		if (!DESC_HAS(d, host_check) || !d->host_check)
			continue;
		buf[0] = '\0';
		d->host_check(buf, sizeof(buf));
		buf[sizeof(buf) - 1] = '\0';
		line(d->name, buf[0] ? buf : "(the plugin said nothing)", out);
	}
}

int hostcheck_report(FILE *f, json_t *j, const char *dir, const struct registry *reg)
{
	struct sink sk = { f, j }, *out = &sk;
	char why[256], buf[512];
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	bool linux_ok;

	line("arch", arch_name, out);
	if (fd < 0) {
		snprintf(buf, sizeof(buf), "unusable (%s)", strerror(errno));
		line("/dev/kvm", buf, out);
	} else {
		snprintf(buf, sizeof(buf), "ok (API %d)", ioctl(fd, KVM_GET_API_VERSION, 0));
		line("/dev/kvm", buf, out);
		cap(out, fd, "kvm.max_vcpus", KVM_CAP_MAX_VCPUS);
		cap(out, fd, "kvm.nr_memslots", KVM_CAP_NR_MEMSLOTS);
		cap(out, fd, "kvm.irqchip", KVM_CAP_IRQCHIP);
		cap(out, fd, "kvm.irqfd", KVM_CAP_IRQFD);
		cap(out, fd, "kvm.ioeventfd", KVM_CAP_IOEVENTFD);
		cap(out, fd, "kvm.immediate_exit", KVM_CAP_IMMEDIATE_EXIT);
		cap(out, fd, "kvm.dirty_log", KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2);
		arch_host_report(fd, line, out);
	}
	/* The module can be loaded where it made no /dev/kvm: it does not
	 * bind in a kernel that is itself a PVM guest. */
	line("pvm (paravirtual KVM)",
	     access("/sys/module/kvm_pvm", F_OK) ? "no"
	     : fd < 0 ? "the kvm_pvm module is loaded, but there is no usable /dev/kvm"
		      : "yes",
	     out);
	if (fd < 0) {
		linux_ok = false;
		snprintf(why, sizeof(why), "no: there is no usable /dev/kvm");
	} else {
		linux_ok = arch_host_can_boot_linux(why, sizeof(why));
	}
	line("boots stock Linux kernels", linux_ok ? "yes" : why, out);
	plugin_lines(out, dir, reg);
	if (fd < 0)
		return 1;
	close(fd);
	return linux_ok ? 0 : 2;
}
