/* SPDX-License-Identifier: Apache-2.0 */
/* The tap policy through libbpf: load the built-in program (a bpftool skeleton) or a given object, attach it to a tap's clsact ingress, keep its maps in step with the allow list, read its counters. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "policy.h"
#include "policy.skel.h"

#define TC_HANDLE 1
#define TC_PRIO 1
#define TAIL_LINES 24 /* libbpf lines kept for a failure report (verifier log tail) */

struct tp_bpf {
	struct policy_bpf *skel;
	void *elf;                /* the object file's bytes, when o->program */
	struct bpf_tc_hook hook;
	bool hook_created, attached;
	char *pin;                /* folder the maps are pinned in, or NULL */
	struct tp_entry *cur;     /* what the maps hold now */
	uint32_t *ids;            /* cur[i]'s prefix id */
	unsigned n_cur;
	bool dirty;               /* an update failed half way: rewrite all next time */
	tp_log_fn *log;
	void *log_arg;
};

/* ---- libbpf's messages: kept, not printed (plugins write no stderr) ---- */

static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;
static char *tail[TAIL_LINES];
static unsigned n_tail;
static libbpf_print_fn_t old_print;

static int print_cb(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	char *text, *line, *save = NULL;

	if (lvl == LIBBPF_DEBUG || vasprintf(&text, fmt, ap) < 0)
		return 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		free(tail[n_tail % TAIL_LINES]);
		tail[n_tail++ % TAIL_LINES] = strdup(line);
	}
	free(text);
	return 0;
}

static void print_begin(void)
{
	pthread_mutex_lock(&print_lock);
	n_tail = 0;
	old_print = libbpf_set_print(print_cb);
}

/* Hand what libbpf said to log when the step failed; forget it either way. */
static void print_end(const struct tp_bpf *b, int failed)
{
	unsigned first = n_tail > TAIL_LINES ? n_tail - TAIL_LINES : 0;

	libbpf_set_print(old_print);
	for (unsigned i = first; i < n_tail; i++) {
		char **l = &tail[i % TAIL_LINES];

		if (failed && b->log && *l)
			b->log(b->log_arg, 1, *l);
		free(*l);
		*l = NULL;
	}
	n_tail = 0;
	pthread_mutex_unlock(&print_lock);
}

/* ---- load ---- */

static int read_file(const char *path, void **buf, size_t *len)
{
	struct stat st;
	ssize_t n;
	/* O_NONBLOCK: a FIFO must not hang the open; only a regular file loads. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    st.st_size > (64 << 20)) {
		err = errno ? -errno : -EINVAL;
		goto out;
	}
	*buf = malloc((size_t)st.st_size);
	if (!*buf) {
		err = -ENOMEM;
		goto out;
	}
	n = read(fd, *buf, (size_t)st.st_size);
	if (n != st.st_size) {
		err = n < 0 ? -errno : -EIO;
		free(*buf);
		*buf = NULL;
		goto out;
	}
	*len = (size_t)n;
out:
	close(fd);
	return err;
}

static int pin_maps(struct tp_bpf *b, const char *dir, char *why, size_t len)
{
	struct bpf_map *maps[] = { b->skel->maps.prefixes, b->skel->maps.ports,
				   b->skel->maps.stats, b->skel->maps.guest };
	char path[4096];
	int err;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(why, len, "cannot create the pin folder %s: %s", dir, strerror(errno));
		return -errno;
	}
	b->pin = strdup(dir);
	if (!b->pin)
		return -ENOMEM;
	for (unsigned i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, bpf_map__name(maps[i]));
		unlink(path); /* left by a VM that died */
		err = bpf_map__pin(maps[i], path);
		if (err) {
			snprintf(why, len, "cannot pin map %s at %s: %s (is %s on a bpf file system?)",
				 bpf_map__name(maps[i]), path, strerror(-err), dir);
			return err;
		}
	}
	return 0;
}

int tp_bpf_load(struct tp_bpf **out, const struct tp_bpf_opts *o, char *why, size_t len)
{
	struct tp_bpf *b = calloc(1, sizeof(*b));
	int err;

	*out = NULL;
	if (!b || !(b->skel = calloc(1, sizeof(*b->skel)))) {
		free(b);
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	b->log = o->log;
	b->log_arg = o->log_arg;
	print_begin();
	err = policy_bpf__create_skeleton(b->skel);
	if (err) {
		snprintf(why, len, "cannot set up the BPF skeleton: %s", strerror(-err));
		goto fail;
	}
	if (o->program) {
		size_t n = 0;

		err = read_file(o->program, &b->elf, &n);
		if (err) {
			snprintf(why, len, "cannot read the BPF program %s: %s", o->program,
				 strerror(-err));
			goto fail;
		}
		b->skel->skeleton->data = b->elf;
		b->skel->skeleton->data_sz = n;
	}
	err = bpf_object__open_skeleton(b->skel->skeleton, NULL);
	if (err) {
		snprintf(why, len, "cannot open the BPF object%s%s: %s (errno %d)",
			 o->program ? " " : "", o->program ? o->program : "", strerror(-err), -err);
		goto fail;
	}
	b->skel->rodata->tp_cfg = o->cfg;
	err = policy_bpf__load(b->skel);
	if (err) {
		snprintf(why, len, "the kernel refused the BPF program: %s (errno %d)%s",
			 strerror(-err), -err,
			 err == -EPERM ? "; loading BPF needs root (CAP_BPF and CAP_NET_ADMIN)" :
			 "; the libbpf and verifier log tail is above");
		goto fail;
	}
	if (o->pin && *o->pin && (err = pin_maps(b, o->pin, why, len)))
		goto fail;
	print_end(b, 0);
	*out = b;
	return 0;
fail:
	print_end(b, 1);
	tp_bpf_free(b);
	return err < 0 ? err : -EINVAL;
}

/* ---- attach ---- */

int tp_bpf_attach(struct tp_bpf *b, int ifindex, char *why, size_t len)
{
	struct bpf_tc_opts tc = { .sz = sizeof(tc), .handle = TC_HANDLE, .priority = TC_PRIO,
				  .prog_fd = bpf_program__fd(b->skel->progs.tap_policy),
				  .flags = BPF_TC_F_REPLACE };
	int err;

	print_begin();
	b->hook = (struct bpf_tc_hook){ .sz = sizeof(b->hook), .ifindex = ifindex,
					.attach_point = BPF_TC_INGRESS };
	err = bpf_tc_hook_create(&b->hook);
	if (err && err != -EEXIST) {
		snprintf(why, len, "cannot add a clsact qdisc: %s (errno %d; the kernel needs CONFIG_NET_SCH_INGRESS, module sch_ingress)",
			 strerror(-err), -err);
		goto out;
	}
	b->hook_created = !err;
	/* direct action: the program's return value is the verdict (no act_bpf) */
	err = bpf_tc_attach(&b->hook, &tc);
	if (err) {
		snprintf(why, len, "cannot attach the classifier to clsact ingress: %s (errno %d; the kernel needs CONFIG_NET_CLS_BPF, module cls_bpf)",
			 strerror(-err), -err);
		goto out;
	}
	b->attached = true;
out:
	print_end(b, !!err);
	return err;
}

/* ---- maps ---- */

static struct tp_prefix_key pkey(const struct tp_entry *e)
{
	return (struct tp_prefix_key){ .prefixlen = e->plen, .addr = htonl(e->addr) };
}

static struct tp_port_key portkey(uint32_t id, const struct tp_port *p)
{
	return (struct tp_port_key){ .id = id, .port = p->port, .proto = p->proto };
}

static int find(const struct tp_entry *v, unsigned n, const struct tp_entry *e)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i].addr == e->addr && v[i].plen == e->plen)
			return (int)i;
	return -1;
}

static bool has_port(const struct tp_entry *e, const struct tp_port *p)
{
	for (unsigned i = 0; i < e->n_ports; i++)
		if (e->ports[i].port == p->port && e->ports[i].proto == p->proto)
			return true;
	return false;
}

static uint32_t free_id(const struct tp_bpf *b, const uint32_t *ids, unsigned n)
{
	for (uint32_t id = 1;; id++) {
		bool used = false;

		for (unsigned i = 0; i < b->n_cur && !used; i++)
			used = b->ids[i] == id;
		for (unsigned i = 0; i < n && !used; i++)
			used = ids[i] == id;
		if (!used)
			return id;
	}
}

/* Ports first, then the prefixes that lead to them. */
static int write_all(struct tp_bpf *b, const struct tp_entry *nw, const uint32_t *ids, unsigned n)
{
	int pfd = bpf_map__fd(b->skel->maps.prefixes), qfd = bpf_map__fd(b->skel->maps.ports);
	uint8_t one = 1;

	for (unsigned i = 0; i < n; i++) {
		for (unsigned k = 0; k < nw[i].n_ports; k++) {
			struct tp_port_key pk = portkey(ids[i], &nw[i].ports[k]);

			if (bpf_map_update_elem(qfd, &pk, &one, BPF_ANY))
				return -errno;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		struct tp_prefix_key k = pkey(&nw[i]);
		struct tp_prefix v = { .id = ids[i], .flags = nw[i].any ? TP_ANY : 0 };

		if (bpf_map_update_elem(pfd, &k, &v, BPF_ANY))
			return -errno;
	}
	return 0;
}

/* Remove what cur has and nw lacks: prefixes first, then their ports. */
static int remove_stale(struct tp_bpf *b, const struct tp_entry *nw, unsigned n)
{
	int pfd = bpf_map__fd(b->skel->maps.prefixes), qfd = bpf_map__fd(b->skel->maps.ports);

	for (unsigned j = 0; j < b->n_cur; j++) {
		int i = find(nw, n, &b->cur[j]);
		struct tp_prefix_key k = pkey(&b->cur[j]);

		if (i < 0 && bpf_map_delete_elem(pfd, &k) && errno != ENOENT)
			return -errno;
		for (unsigned p = 0; p < b->cur[j].n_ports; p++) {
			struct tp_port_key pk = portkey(b->ids[j], &b->cur[j].ports[p]);

			if (i >= 0 && !nw[i].any && has_port(&nw[i], &b->cur[j].ports[p]))
				continue;
			if (bpf_map_delete_elem(qfd, &pk) && errno != ENOENT)
				return -errno;
		}
	}
	return 0;
}

static int clear_map(int fd, size_t key_size)
{
	uint8_t key[16];

	if (key_size > sizeof(key))
		return -EINVAL;
	while (!bpf_map_get_next_key(fd, NULL, key))
		if (bpf_map_delete_elem(fd, key))
			return -errno;
	return errno == ENOENT ? 0 : -errno;
}

int tp_bpf_sync(struct tp_bpf *b, const struct tp_rules *rs, char *why, size_t len)
{
	struct tp_entry *nw;
	uint32_t *ids;
	unsigned n, ports = 0;
	int err = tp_normalise(rs, &nw, &n);

	if (err) {
		snprintf(why, len, "out of memory");
		return err;
	}
	for (unsigned i = 0; i < n; i++)
		ports += nw[i].n_ports;
	if (n > TP_MAX_PREFIXES || ports > TP_MAX_PORTS) {
		snprintf(why, len, "the allow list has %u prefixes and %u port rules; at most %u and %u fit",
			 n, ports, TP_MAX_PREFIXES, TP_MAX_PORTS);
		tp_entries_free(nw, n);
		return -ENOSPC;
	}
	ids = calloc(n ? n : 1, sizeof(*ids));
	if (!ids) {
		tp_entries_free(nw, n);
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		int j = find(b->cur, b->n_cur, &nw[i]);

		ids[i] = j < 0 ? 0 : b->ids[j];
	}
	for (unsigned i = 0; i < n; i++)
		if (!ids[i])
			ids[i] = free_id(b, ids, n);
	if (!b->dirty) {
		/* New ports and prefixes first, stale ones after: an update never
		 * denies, even for an instant, what both lists allow. */
		err = write_all(b, nw, ids, n);
		if (!err)
			err = remove_stale(b, nw, n);
	}
	if (b->dirty || err) {
		b->dirty = true;
		err = clear_map(bpf_map__fd(b->skel->maps.prefixes), sizeof(struct tp_prefix_key));
		if (!err)
			err = clear_map(bpf_map__fd(b->skel->maps.ports), sizeof(struct tp_port_key));
		if (!err)
			err = write_all(b, nw, ids, n);
		b->dirty = err != 0;
	}
	if (err) {
		snprintf(why, len, "cannot update the policy maps: %s", strerror(-err));
		tp_entries_free(nw, n);
		free(ids);
		return err;
	}
	tp_entries_free(b->cur, b->n_cur);
	free(b->ids);
	b->cur = nw;
	b->ids = ids;
	b->n_cur = n;
	return 0;
}

int tp_bpf_guest(struct tp_bpf *b, const uint8_t *mac, uint32_t ip)
{
	struct tp_guest g = { .flags = (mac ? TP_GUEST_MAC : 0) | (ip ? TP_GUEST_IP : 0),
			      .ip = htonl(ip) };
	uint32_t zero = 0;

	if (mac)
		memcpy(g.mac, mac, sizeof(g.mac));
	if (bpf_map_update_elem(bpf_map__fd(b->skel->maps.guest), &zero, &g, BPF_ANY))
		return -errno;
	return 0;
}

int tp_bpf_stats(struct tp_bpf *b, uint64_t out[TP_NSTATS])
{
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(b->skel->maps.stats);
	uint64_t *v;

	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t k = 0; k < TP_NSTATS; k++) {
		out[k] = 0;
		if (bpf_map_lookup_elem(fd, &k, v)) {
			int err = -errno;

			free(v);
			return err;
		}
		for (int c = 0; c < ncpu; c++)
			out[k] += v[c];
	}
	free(v);
	return 0;
}

int tp_bpf_prog_fd(struct tp_bpf *b)
{
	return bpf_program__fd(b->skel->progs.tap_policy);
}

void tp_bpf_free(struct tp_bpf *b)
{
	if (!b)
		return;
	if (b->attached || b->hook_created) {
		struct bpf_tc_opts tc = { .sz = sizeof(tc), .handle = TC_HANDLE, .priority = TC_PRIO };

		print_begin();
		if (b->attached)
			bpf_tc_detach(&b->hook, &tc); /* the tap may be gone already */
		if (b->hook_created) { /* ours: remove the whole clsact qdisc */
			b->hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
			bpf_tc_hook_destroy(&b->hook);
		}
		print_end(b, 0);
	}
	if (b->pin) {
		struct bpf_map *maps[] = { b->skel->maps.prefixes, b->skel->maps.ports,
					   b->skel->maps.stats, b->skel->maps.guest };

		for (unsigned i = 0; i < sizeof(maps) / sizeof(maps[0]); i++)
			bpf_map__unpin(maps[i], NULL);
		rmdir(b->pin);
		free(b->pin);
	}
	policy_bpf__destroy(b->skel);
	free(b->elf);
	tp_entries_free(b->cur, b->n_cur);
	free(b->ids);
	free(b);
}
