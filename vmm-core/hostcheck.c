/* SPDX-License-Identifier: Apache-2.0 */
/* `cubicle check-host`: KVM, its capabilities, PVM, reflink and BPF. */
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <zstd.h>

#include <linux/kvm.h>

#include "arch.h"
#include "hostcheck.h"

static void line(const char *key, const char *val, void *arg)
{
	fprintf(arg, "%-28s %s\n", key, val);
}

static void cap(FILE *out, int fd, const char *name, int c)
{
	char buf[32];
	int r = ioctl(fd, KVM_CHECK_EXTENSION, c);

	snprintf(buf, sizeof(buf), "%s", r > 1 ? "" : r == 1 ? "yes" : "no");
	if (r > 1)
		snprintf(buf, sizeof(buf), "%d", r);
	line(name, buf, out);
}

/* Try FICLONE between two temporary files in dir. */
static const char *reflink_probe(const char *dir, char *buf, size_t len)
{
	char a[4096], b[4096];
	int fa, fb, r;

	snprintf(a, sizeof(a), "%s/.cubicle-reflink-XXXXXX", dir);
	snprintf(b, sizeof(b), "%s/.cubicle-reflink-XXXXXX", dir);
	fa = mkstemp(a);
	if (fa < 0) {
		snprintf(buf, len, "unknown (cannot create a file in %s: %s)", dir, strerror(errno));
		return buf;
	}
	fb = mkstemp(b);
	if (fb < 0) {
		snprintf(buf, len, "unknown (cannot create a file in %s: %s)", dir, strerror(errno));
		close(fa);
		unlink(a);
		return buf;
	}
	r = write(fa, "cubicle", 7) == 7 ? ioctl(fb, FICLONE, fa) : -1;
	snprintf(buf, len, r == 0 ? "yes (in %s)" : "no (in %s: %s)", dir, strerror(errno));
	close(fa);
	close(fb);
	unlink(a);
	unlink(b);
	return buf;
}

int hostcheck_report(FILE *out, const char *dir)
{
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
	line("pvm (paravirtual KVM)", access("/sys/module/kvm_pvm", F_OK) == 0 ? "yes" : "no",
	     out);
	linux_ok = arch_host_can_boot_linux(why, sizeof(why));
	line("boots stock Linux kernels", linux_ok ? "yes" : why, out);
	line("xfs reflink", reflink_probe(dir, buf, sizeof(buf)), out);
	snprintf(buf, sizeof(buf), "%s",
		 libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_SCHED_CLS, NULL) == 1 ?
		 "yes (tc programs load)" : "no (cannot load a tc BPF program: need root/CAP_BPF)");
	line("bpf network policy", buf, out);
	line("zstd", ZSTD_versionString(), out);
	if (fd < 0)
		return 1;
	close(fd);
	return 0;
}
