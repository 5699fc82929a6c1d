/* SPDX-License-Identifier: Apache-2.0 */
/* bench/microvm: a stock kernel and the example busybox initramfs, exec to the /init's
 * "CUBICLE-GUEST ready" line on the serial console, cubicle beside QEMU's microvm machine
 * (Debian's qemu-system-x86_64 -M microvm) with the same kernel, initramfs, memory, vCPUs
 * and command line, runs interleaved, medians. cubicle runs twice: as configured (it
 * decompresses the kernel itself, boot.decompress = "vmm") and with the kernel's own
 * decompressor in the guest (boot.decompress = "guest"), what it did before.
 * Usage: microvm CUBICLE QEMU KERNEL INITRD [RUNS]; BENCH_VERBOSE=1 also prints every run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snap_proc.h" /* start_all, median, fail */

#define MARKER "CUBICLE-GUEST ready"
#define CMDLINE "console=ttyS0 reboot=t panic=-1 quiet"

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	char cfg[PATH_MAX];
	double *c, *g, *q, rc[1000], rg[1000], rq[1000];
	int runs;
	FILE *f;

	if (argc < 5 || argc > 6) {
		fprintf(stderr, "usage: microvm CUBICLE QEMU KERNEL INITRD [RUNS]\n");
		return 2;
	}
	runs = argc == 6 ? atoi(argv[5]) : 5;
	if (runs < 1 || runs > 1000) {
		fprintf(stderr, "microvm: RUNS must be 1..1000\n");
		return 2;
	}
	timeout_s = 600; /* a nested boot can take minutes */
	snprintf(cfg, sizeof(cfg), "%s/cubicle-microvm-%d.cfg", tmp && *tmp ? tmp : "/tmp", (int)getpid());
	f = fopen(cfg, "w");
	if (!f) {
		perror(cfg);
		return 1;
	}
	fprintf(f,
		"machine = { vcpus = 1; memory_mib = 256; };\n"
		"boot = { kernel = \"%s\"; initrd = \"%s\"; cmdline = \"" CMDLINE "\"; };\n"
		"devices = ( { type = \"serial8250\"; id = \"com1\"; console = \"stdio\"; input = false; } );\n",
		argv[3], argv[4]);
	fclose(f);
	{
		char *vmm[] = { argv[1], "run", cfg, NULL };
		char *vmm_guest[] = { argv[1], "run", "--set", "boot.decompress=guest", cfg, NULL };
		char *qemu[] = { argv[2], "-M", "microvm", "-enable-kvm", "-cpu", "host", "-m", "256",
				 "-smp", "1", "-nodefaults", "-no-user-config", "-display", "none",
				 "-serial", "stdio", "-no-reboot", "-kernel", argv[3], "-initrd",
				 argv[4], "-append", CMDLINE, NULL };

		c = calloc((size_t)runs, sizeof(*c));
		g = calloc((size_t)runs, sizeof(*g));
		q = calloc((size_t)runs, sizeof(*q));
		if (!c || !g || !q)
			fail();
		for (int i = 0; i < runs; i++) {
			c[i] = start_all(vmm, 1, MARKER, false);
			rc[i] = marker_rss_kib / 1024.0;
			q[i] = start_all(qemu, 1, MARKER, false);
			rq[i] = marker_rss_kib / 1024.0;
			g[i] = start_all(vmm_guest, 1, MARKER, false);
			rg[i] = marker_rss_kib / 1024.0;
		}
	}
	unlink(cfg);
	if (getenv("BENCH_VERBOSE"))
		for (int i = 0; i < runs; i++)
			fprintf(stderr, "run %d: cubicle %.1f, decompress=guest %.1f, QEMU %.1f ms; RSS %.1f / %.1f / %.1f MiB\n",
				i + 1, c[i], g[i], q[i], rc[i], rg[i], rq[i]);
	printf("stock kernel + busybox initramfs, exec to the init's marker on the serial console,\n"
	       "1 vCPU, 256 MiB, \"" CMDLINE "\", median of %d, interleaved:\n", runs);
	{
		double mc = median(c, (unsigned)runs), mg = median(g, (unsigned)runs),
		       mq = median(q, (unsigned)runs);

		printf("  cubicle                           %9.1f ms\n", mc);
		printf("  cubicle, boot.decompress=guest    %9.1f ms\n", mg);
		printf("  QEMU microvm                      %9.1f ms\n", mq);
		printf("  ratio                             %9.2fx QEMU microvm (the goal: 0.45x or less)\n",
		       mc / mq);
		printf("  ratio, boot.decompress=guest      %9.2fx QEMU microvm\n", mg / mq);
		printf("  process RSS at the marker (guest RAM included), medians:\n");
		printf("  cubicle                           %9.1f MiB\n", median(rc, (unsigned)runs));
		printf("  cubicle, boot.decompress=guest    %9.1f MiB\n", median(rg, (unsigned)runs));
		printf("  QEMU microvm                      %9.1f MiB\n", median(rq, (unsigned)runs));
	}
	free(c);
	free(g);
	free(q);
	return 0;
}
