/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /metrics: Prometheus' text exposition format (version 0.0.4). What a
 * VMM's operator graphs: the VM's state and uptimes, vCPU exits by reason,
 * the boot timer, memory (guest RAM, the VMM's own resident pages), and
 * per-device I/O: storage requests and bytes as the device asked them of
 * its backend (storage.c counts them), net packets and bytes as the net
 * backend counts them (its stats op).
 */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "cnode.h"
#include "cubicle-build.h"
#include "cubicle/net.h"
#include "devices.h"
#include "loader.h"
#include "plan.h"
#include "vm.h"

/* KVM's exit reasons by number, as label values (<linux/kvm.h>). */
static const char *exit_name(unsigned r)
{
	static const char *const names[] = {
		[KVM_EXIT_UNKNOWN] = "unknown",
		[KVM_EXIT_EXCEPTION] = "exception",
		[KVM_EXIT_IO] = "io",
		[KVM_EXIT_HYPERCALL] = "hypercall",
		[KVM_EXIT_DEBUG] = "debug",
		[KVM_EXIT_HLT] = "hlt",
		[KVM_EXIT_MMIO] = "mmio",
		[KVM_EXIT_IRQ_WINDOW_OPEN] = "irq_window_open",
		[KVM_EXIT_SHUTDOWN] = "shutdown",
		[KVM_EXIT_FAIL_ENTRY] = "fail_entry",
		[KVM_EXIT_INTR] = "intr",
		[KVM_EXIT_SET_TPR] = "set_tpr",
		[KVM_EXIT_TPR_ACCESS] = "tpr_access",
		[KVM_EXIT_NMI] = "nmi",
		[KVM_EXIT_INTERNAL_ERROR] = "internal_error",
		[KVM_EXIT_SYSTEM_EVENT] = "system_event",
	};

	if (r == VCPU_EXIT_SLOTS - 1)
		return "other";
	return r < sizeof(names) / sizeof(names[0]) && names[r] ? names[r] : NULL;
}

/* A label value: backslash, double quote and newline escaped. */
static void label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static double since_s(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

/* /proc/self/status's RssAnon, RssFile and RssShmem in bytes, one read of
 * the file; 0 when all three were there, else -1. */
static int rss_bytes(long long out[3])
{
	static const char *const key[3] = { "RssAnon:", "RssFile:", "RssShmem:" };
	FILE *s = fopen("/proc/self/status", "r");
	char line[256];
	int seen = 0;

	if (!s)
		return -1;
	while (seen != 7 && fgets(line, sizeof(line), s))
		for (int k = 0; k < 3; k++)
			if (!strncmp(line, key[k], strlen(key[k]))) {
				out[k] = strtoll(line + strlen(key[k]), NULL, 10) * 1024;
				seen |= 1 << k;
			}
	fclose(s);
	return seen == 7 ? 0 : -1;
}

/* The boot-timer's reading, in microseconds (0: the guest has not said). */
static int boot_us(const struct cub_inst *d, unsigned long long *us)
{
	struct cub_reply reply;
	char why[256];

	if (loader_call(d->plugin, "elapsed_us", d->priv, &reply, NULL, 0, why, sizeof(why)) < 0)
		return -1;
	reply.text[reply.len < sizeof(reply.text) ? reply.len : sizeof(reply.text) - 1] = '\0';
	return sscanf(reply.text, "%llu", us) == 1 ? 0 : -1;
}

static void dev_labels(FILE *f, const struct cub_inst *d, const struct backend *b)
{
	fputs("{device=\"", f);
	label(f, d->pi->id);
	fputs("\",backend=\"", f);
	label(f, b->bin.plugin->d->name);
	fputs("\"}", f);
}

/* One family of per-backend counters: the storage backends' (@net false,
 * struct storage_counters) or the net backends' that count (struct
 * cub_net_stats); @field is the offset of the uint64_t in it. */
static void backend_family(FILE *f, const struct api_vm *v, bool net, const char *name,
			   const char *help, size_t field)
{
	family(f, name, "counter", help);
	for (unsigned i = 0; i < v->n_insts; i++)
		for (const struct backend *b = net ? v->insts[i]->nets : v->insts[i]->storages; b;
		     b = b->next) {
			union {
				struct storage_counters s;
				struct cub_net_stats n;
			} c;

			if (net ? !net_stats(b, &c.n) : (storage_counters(b, &c.s), false))
				continue;
			fputs(name, f);
			dev_labels(f, v->insts[i], b);
			fprintf(f, " %" PRIu64 "\n", *(const uint64_t *)((const char *)&c + field));
		}
}

int api_metrics_text(const struct api_vm *v, char **text, size_t *len)
{
	static const char *const states[] = { "Not started", "Running", "Paused" };
	unsigned state = !v->running ? 0 : v->paused ? 2 : 1;
	const struct vm *m = v->machine;
	FILE *f = open_memstream(text, len);
	long long rss[3];

	if (!f)
		return -ENOMEM;
	family(f, "cubicle_info", "gauge", "The VMM: its version and the VM's id (always 1).");
	fputs("cubicle_info{version=\"" PACKAGE_VERSION "\",id=\"", f);
	label(f, v->id ? v->id : "");
	fputs("\"} 1\n", f);
	family(f, "cubicle_vm_state", "gauge", "1 for the VM's state, 0 for the others.");
	for (unsigned s = 0; s < 3; s++)
		fprintf(f, "cubicle_vm_state{state=\"%s\"} %d\n", states[s], s == state);
	family(f, "cubicle_uptime_seconds", "gauge", "Seconds since the VMM started.");
	fprintf(f, "cubicle_uptime_seconds %.3f\n", since_s(&v->started));
	if (v->running) {
		family(f, "cubicle_vm_uptime_seconds", "gauge",
		       "Seconds since the VM was created (pauses included).");
		fprintf(f, "cubicle_vm_uptime_seconds %.3f\n", since_s(&v->live));
	}
	if (m) {
		family(f, "cubicle_vcpu_exits_total", "counter",
		       "KVM_RUN returns by exit reason (intr: a signal or kick; other: a reason "
		       "cubicle has no name for).");
		for (unsigned c = 0; c < m->n_vcpus; c++)
			for (unsigned r = 0; r < VCPU_EXIT_SLOTS; r++) {
				uint64_t n = __atomic_load_n(&m->vcpus[c].exits[r], __ATOMIC_RELAXED);
				const char *name = exit_name(r);

				if (!n)
					continue;
				fprintf(f, "cubicle_vcpu_exits_total{vcpu=\"%u\",reason=\"", c);
				if (name)
					fputs(name, f);
				else
					fprintf(f, "kvm_exit_%u", r);
				fprintf(f, "\"} %" PRIu64 "\n", n);
			}
		family(f, "cubicle_guest_memory_bytes", "gauge", "The guest's RAM as configured.");
		fprintf(f, "cubicle_guest_memory_bytes %llu\n",
			(unsigned long long)m->cfg->memory_mib << 20);
	}
	if (!rss_bytes(rss)) {
		family(f, "cubicle_resident_bytes", "gauge",
		       "The process's resident memory by kind: anon and file are the VMM's own, "
		       "shmem is guest RAM the guest has touched.");
		fprintf(f, "cubicle_resident_bytes{kind=\"anon\"} %lld\n", rss[0]);
		fprintf(f, "cubicle_resident_bytes{kind=\"file\"} %lld\n", rss[1]);
		fprintf(f, "cubicle_resident_bytes{kind=\"shmem\"} %lld\n", rss[2]);
	}
	for (unsigned i = 0, first = 1; i < v->n_insts; i++) {
		const struct cub_inst *d = v->insts[i];
		unsigned long long us;

		if (strcmp(d->plugin->d->name, "boot-timer") || boot_us(d, &us) || !us)
			continue;
		if (first)
			family(f, "cubicle_boot_seconds", "gauge",
			       "From the VMM's start to the guest's boot-done write (boot-timer).");
		first = 0;
		fputs("cubicle_boot_seconds{device=\"", f);
		label(f, d->pi->id);
		fprintf(f, "\"} %.6f\n", (double)us / 1e6);
	}
#define SF(name, field, help) \
	backend_family(f, v, false, name, help, offsetof(struct storage_counters, field))
	SF("cubicle_storage_reads_total", reads, "Read requests a device made of its storage backend.");
	SF("cubicle_storage_read_bytes_total", read_bytes, "Bytes read from a storage backend.");
	SF("cubicle_storage_writes_total", writes, "Write requests to a storage backend.");
	SF("cubicle_storage_write_bytes_total", write_bytes, "Bytes written to a storage backend.");
	SF("cubicle_storage_flushes_total", flushes, "Flushes of a storage backend.");
	SF("cubicle_storage_discards_total", discards, "Discard requests to a storage backend.");
	SF("cubicle_storage_write_zeroes_total", write_zeroes,
	   "Write-zeroes requests to a storage backend.");
	SF("cubicle_storage_errors_total", errors, "Storage requests that failed.");
#undef SF
#define NF(name, field, help) \
	backend_family(f, v, true, name, help, offsetof(struct cub_net_stats, field))
	NF("cubicle_net_rx_packets_total", rx_packets, "Frames toward the guest.");
	NF("cubicle_net_rx_bytes_total", rx_bytes, "Bytes toward the guest.");
	NF("cubicle_net_rx_dropped_total", rx_dropped, "Frames toward the guest dropped.");
	NF("cubicle_net_tx_packets_total", tx_packets, "Frames from the guest.");
	NF("cubicle_net_tx_bytes_total", tx_bytes, "Bytes from the guest.");
	NF("cubicle_net_tx_dropped_total", tx_dropped,
	   "Frames from the guest dropped (the eBPF policy's refusals among them).");
#undef NF
	if (fclose(f)) {
		free(*text);
		*text = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int get_metrics(struct api *a, const char *id, json_t *in, json_t **out, char *err,
		       size_t errlen)
{
	char *text = NULL;
	size_t len = 0;

	(void)id, (void)in;
	if (api_metrics_text(api_vm(a), &text, &len))
		return errf(err, errlen, 500, "out of memory");
	/* A JSON string: sent as text/plain (server.c). */
	*out = json_stringn(text, len);
	free(text);
	return *out ? 200 : errf(err, errlen, 500, "out of memory");
}

const struct api_route metrics_routes[] = {
	{ "GET", "/metrics", false, false, get_metrics, false },
};
const unsigned metrics_n_routes = sizeof(metrics_routes) / sizeof(metrics_routes[0]);
