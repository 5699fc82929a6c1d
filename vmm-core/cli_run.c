/* SPDX-License-Identifier: Apache-2.0 */
/* `cubicle run` and `cubicle restore`: their options (the shared -s, -P, -l,
 * --log-file, --seccomp and the --jail* ones), the plugins a VM names, the
 * jail's entry, then run.c's prepare / make / wait. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "confine.h"
#include "jail.h"
#include "api/http.h"
#include "loader.h"
#include "log.h"
#include "plan.h"
#include "run.h"
#include "snap/snapshot.h"
#include "cli.h"

/* -s, -P and -l, which run and restore share. */
struct shared_opts {
	char *sets[MAX_OPTS], *dirs[MAX_OPTS];
	unsigned n_sets, n_dirs;
	int level; /* -1: not given */
	int seccomp; /* enum confine_mode; -1: not given */
	const char *sock, *id; /* --api-sock, --id */
	struct jail_cfg jail; /* --jail DIR and the --jail-* options */
	bool jail_opts;       /* a --jail-* option given */
};

/* Only the plugins @names names (NULL-ended, malloc'd, freed here), for a
 * VM whose description names them: scanning every plugin file (each a
 * dlopen, some pulling in libbpf or libzstd) is most of what a start costs
 * before the VM exists, and each stays mapped. Every plugin when @names is
 * NULL or a name was not found in a file named after it (the plan then says
 * what is wrong, with every name known). */
static int load_named_registry(struct registry *reg, const struct shared_opts *o, char **names)
{
	char **dirs;
	int warn_lvl = CUB_LOG_WARN, ret;

	if (!names)
		return load_registry(reg, o->dirs, o->n_dirs, CUB_LOG_WARN);
	dirs = loader_dirs(o->dirs, o->n_dirs);
	if (!dirs) {
		strv_free(names);
		log_err("out of memory");
		return -ENOMEM;
	}
	ret = registry_scan_names(reg, dirs, names, scan_warn, &warn_lvl);
	for (char **p = names; !ret && *p; p++)
		if (!registry_has(reg, *p)) {
			registry_free(reg);
			ret = registry_scan(reg, dirs, scan_warn, &warn_lvl);
			break;
		}
	loader_dirs_free(dirs);
	strv_free(names);
	return ret;
}

/* --seccomp MODE: 0, or a usage error's exit status. */
static int seccomp_opt(struct shared_opts *o, const char *arg)
{
	o->seccomp = confine_mode_parse(arg);
	if (o->seccomp < 0)
		return usage_error("--seccomp %s: expected enforce, log or off", arg);
	return 0;
}

/* The mode: --seccomp, else $CUBICLE_SECCOMP, else enforce. */
static int seccomp_mode(const struct shared_opts *o, int *mode)
{
	const char *env = getenv("CUBICLE_SECCOMP");

	if (o->seccomp >= 0)
		*mode = o->seccomp;
	else if (env && *env && (*mode = confine_mode_parse(env)) < 0)
		return usage_error("CUBICLE_SECCOMP=%s: expected enforce, log or off", env);
	else if (!env || !*env)
		*mode = confine_default_mode();
	return 0;
}

enum { OPT_LOG_FILE = 900 };

/* 0, or a usage error's exit status. */
static int shared_opt(int c, struct shared_opts *o)
{
	if (c == OPT_LOG_FILE) {
		/* stderr itself becomes the file: every message, a plugin's or a
		 * library's too, goes there, and a jail keeps it (fd 2) */
		int fd = open(optarg, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);

		if (fd < 0)
			return usage_error("--log-file %s: %s", optarg, strerror(errno));
		fflush(stderr);
		if (dup2(fd, 2) < 0) {
			close(fd);
			return usage_error("--log-file %s: %s", optarg, strerror(errno));
		}
		close(fd);
		log_check_output();
		return 0;
	}
	if (c == 'P' && plugin_dir_opt(optarg))
		return 2;
	/* the form is the command line's business (2); what it names, the config's (1) */
	if (c == 's' && (!strchr(optarg, '=') || optarg[0] == '=' || optarg[0] == '.'))
		return usage_error("--set %s: expected PATH=VALUE, e.g. machine.vcpus=2", optarg);
	if (c == 's' || c == 'P') {
		unsigned *n = c == 's' ? &o->n_sets : &o->n_dirs;

		if (*n == MAX_OPTS)
			return usage_error("too many %s options (%s)",
					   c == 's' ? "--set" : "--plugin-dir", optarg);
		(c == 's' ? o->sets : o->dirs)[(*n)++] = optarg;
		return 0;
	}
	o->level = log_level_parse(optarg);
	if (o->level < 0)
		return usage_error("--log-level %s: expected err, warn, info or debug", optarg);
	return 0;
}

/* How run and restore make their VM (under r->lock). */
static int make_booted(struct run_ctx *r, const char *arg, char *err, size_t errlen)
{
	(void)arg;
	return run_setup(r, err, errlen);
}

static int make_restored(struct run_ctx *r, const char *dir, char *err, size_t errlen)
{
	return run_restore(r, dir, true, err, errlen);
}

static int make_restored_paused(struct run_ctx *r, const char *dir, char *err, size_t errlen)
{
	return run_restore(r, dir, false, err, errlen);
}

/*
 * The end of run and restore: @ret is how the preparation went; then
 * @make the VM (NULL: the API will), then wait for the end. A failure is
 * said, and what was made is taken down.
 */
static int run_go(struct run_ctx *r, int ret,
		  int (*make)(struct run_ctx *r, const char *arg, char *err, size_t errlen),
		  const char *arg, const char *what, char *err, size_t errlen)
{
	if (!ret && make) {
		pthread_mutex_lock(&r->lock);
		ret = make(r, arg, err, errlen);
		if (!ret)
			run_mark_live(r);
		pthread_mutex_unlock(&r->lock);
	}
	if (ret) {
		log_err("%s", err);
		if (r->have_vm)
			vm_request_exit(&r->vm, VM_EXIT_ERROR, "%s failed", what);
		run_teardown(r);
		return VM_EXIT_ERROR;
	}
	return run_finish(r);
}

enum { OPT_JAIL = 1000, OPT_JAIL_UID, OPT_JAIL_GID, OPT_JAIL_CGROUP, OPT_JAIL_CPU,
       OPT_JAIL_MEM, OPT_JAIL_PIDS, OPT_JAIL_IO, OPT_JAIL_NOFILE, OPT_JAIL_FSIZE,
       OPT_JAIL_PROBE, OPT_JAIL_FOREIGN, OPT_JAIL_TRUST, OPT_JAIL_POOL, OPT_JAIL_POOL_SIZE };

/* The --jail* options of run and restore (jail_opt reads them). */
#define JAIL_OPTIONS                                                              \
	{ "jail", required_argument, NULL, OPT_JAIL },                            \
	{ "jail-uid", required_argument, NULL, OPT_JAIL_UID },                    \
	{ "jail-gid", required_argument, NULL, OPT_JAIL_GID },                    \
	{ "jail-cgroup", required_argument, NULL, OPT_JAIL_CGROUP },              \
	{ "jail-cpu-max", required_argument, NULL, OPT_JAIL_CPU },                \
	{ "jail-memory-max", required_argument, NULL, OPT_JAIL_MEM },             \
	{ "jail-pids-max", required_argument, NULL, OPT_JAIL_PIDS },              \
	{ "jail-io-max", required_argument, NULL, OPT_JAIL_IO },                  \
	{ "jail-nofile", required_argument, NULL, OPT_JAIL_NOFILE },              \
	{ "jail-fsize", required_argument, NULL, OPT_JAIL_FSIZE },                \
	{ "jail-probe", no_argument, NULL, OPT_JAIL_PROBE },                      \
	{ "jail-foreign-ids", required_argument, NULL, OPT_JAIL_FOREIGN },        \
	{ "jail-trust", required_argument, NULL, OPT_JAIL_TRUST },                \
	{ "jail-netns-pool", required_argument, NULL, OPT_JAIL_POOL },            \
	{ "jail-netns-pool-size", required_argument, NULL, OPT_JAIL_POOL_SIZE }

/* A --jail* option into @j: 0, 1 when @c is not one, or a usage error's
 * exit status. */
static int jail_opt(int c, const char *arg, struct jail_cfg *j)
{
	char *end;
	unsigned long long v = 0;

	if (c == OPT_JAIL_UID || c == OPT_JAIL_GID || c == OPT_JAIL_NOFILE || c == OPT_JAIL_FSIZE) {
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (errno || end == arg || *end || (c != OPT_JAIL_FSIZE && v > 0xffffffffull))
			return usage_error("--%s %s: expected a number",
					   c == OPT_JAIL_UID ? "jail-uid" : c == OPT_JAIL_GID ? "jail-gid"
					   : c == OPT_JAIL_NOFILE ? "jail-nofile" : "jail-fsize", arg);
	}
	if (c == OPT_JAIL_POOL_SIZE) {
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (errno || end == arg || *end || v < 1 || v > 64)
			return usage_error("--jail-netns-pool-size %s: expected a number from 1 to 64",
					   arg);
	}
	switch (c) {
	case OPT_JAIL: j->dir = arg; return 0;
	case OPT_JAIL_UID: j->uid = (uid_t)v; j->have_uid = true; return 0;
	case OPT_JAIL_GID: j->gid = (gid_t)v; j->have_gid = true; return 0;
	case OPT_JAIL_CGROUP: j->cgroup = arg; return 0;
	case OPT_JAIL_CPU: j->cpu_max = arg; return 0;
	case OPT_JAIL_MEM: j->memory_max = arg; return 0;
	case OPT_JAIL_PIDS: j->pids_max = arg; return 0;
	case OPT_JAIL_IO: j->io_max = arg; return 0;
	case OPT_JAIL_NOFILE: j->nofile = v; return 0;
	case OPT_JAIL_FSIZE: j->fsize = v; return 0;
	case OPT_JAIL_PROBE: j->probe = true; return 0;
	case OPT_JAIL_POOL:
		if (arg[0] != '/')
			return usage_error("--jail-netns-pool %s: expected an absolute folder path", arg);
		j->netns_pool = arg;
		return 0;
	case OPT_JAIL_POOL_SIZE: j->netns_pool_size = (unsigned)v; return 0;
	case OPT_JAIL_TRUST:
		if (arg[0] != '/')
			return usage_error("--jail-trust %s: expected an absolute folder path", arg);
		if (j->n_trusted == JAIL_MAX_TRUSTED)
			return usage_error("--jail-trust %s: at most %d folders", arg, JAIL_MAX_TRUSTED);
		j->trusted[j->n_trusted++] = arg;
		return 0;
	case OPT_JAIL_FOREIGN: {
		unsigned long long a, b;
		char *dash;

		errno = 0;
		a = strtoull(arg, &dash, 10);
		if (errno || dash == arg || *dash != '-' || !dash[1])
			return usage_error("--jail-foreign-ids %s: expected FIRST-LAST, two numbers", arg);
		b = strtoull(dash + 1, &end, 10);
		if (errno || *end || a == 0 || a > b || b > 0xfffffffeull)
			return usage_error("--jail-foreign-ids %s: expected FIRST-LAST, two numbers from 1 to 4294967294, FIRST not above LAST",
					   arg);
		j->foreign_first = (uint32_t)a;
		j->foreign_last = (uint32_t)b;
		j->have_foreign = true;
		return 0;
	}
	default: return 1;
	}
}

/* The seccomp programs and KVM's CPUID table from root's cache, which the
 * jail cannot reach: read in the jailed child before its pivot, beside the
 * supervisor's making of the network namespace (jail_cfg.before_pivot). */
static void preload_cached(void *arg)
{
	struct run_ctx *r = arg;

	confine_preload((enum confine_mode)r->seccomp, &r->reg);
	vm_kvm_preload();
}

/* Into the jail once its paths are named (@sock, the API socket, is made
 * inside): what loads lazily loaded now (the jail has no libraries), then
 * jail_enter. Returns only in the jailed child: 0, or a cubicle exit status. */
static int enter_jail(struct run_ctx *r, struct jail_cfg *j, const char *sock)
{
	char err[1024] = "";
	int ret = 0;

	j->before_pivot = preload_cached;
	j->before_pivot_arg = r;
	if (sock && !(ret = jail_add(j, sock, err, sizeof(err))))
		j->skip = j->paths[j->n_paths - 1];
	if (!ret && sock)
		ret = http_load(err, sizeof(err));
	tzset(); /* /etc/localtime, which the jail has not */
	if (!ret)
		ret = jail_enter(j, err, sizeof(err));
	if (ret) {
		log_err("%s", err);
		return VM_EXIT_ERROR;
	}
	return 0;
}

/* `run CONFIG --jail DIR`: the host check first (the jail has no /sys),
 * then the paths the plan names. */
static int run_jailed(struct run_ctx *r, struct jail_cfg *j, const char *sock)
{
	char err[1024] = "";

	if (r->host_check && r->cfg.host_check && r->cfg.boot.format != BOOT_FLAT &&
	    !arch_host_can_boot_linux(err, sizeof(err))) {
		log_err("%s (or pass --no-host-check to try anyway)", err);
		return VM_EXIT_ERROR;
	}
	r->host_check = false;
	if (jail_add_plan(j, &r->cfg, err, sizeof(err))) {
		log_err("%s", err);
		return VM_EXIT_ERROR;
	}
	return enter_jail(r, j, sock);
}

/* `restore DIR --jail ROOT`: the paths of the plan the snapshot holds (with
 * the --set overrides), the snapshot folder and a Diff's parents. A restore
 * makes its disk copies inside: from outside they are ROOT/PATH. */
static int restore_jailed(struct run_ctx *r, struct jail_cfg *j, const char *dir,
			  const char *sock)
{
	struct snap_image im;
	struct plan p = { 0 };
	char err[1024] = "", **dirs;
	int ret = snap_open(&im, dir, err, sizeof(err));

	/* what the snapshot alone names is checked once the jail's uid is
	 * known (jail_check_untrusted): a jailed VMM may have written it */
	j->confirmed = r->sets;
	j->n_confirmed = r->n_sets;
	j->snap_dir = dir;
	j->adding_untrusted = true;
	if (!ret) {
		ret = snap_plan(&im, &p, &r->reg, r->sets, r->n_sets, err, sizeof(err));
		if (!ret)
			ret = jail_add_plan(j, &p, err, sizeof(err));
		snap_close(&im);
	}
	plan_free(&p);
	dirs = ret ? NULL : snap_chain_dirs(dir);
	if (!ret && !dirs)
		ret = errf(err, sizeof(err), -EINVAL, "%s: its Diff chain cannot be read", dir);
	j->adding_snapshot = true;
	for (char **d = dirs; !ret && *d; d++) {
		j->adding_untrusted = d != dirs; /* the first is @dir itself */
		ret = jail_add_read_only(j, *d, err, sizeof(err));
	}
	j->adding_untrusted = j->adding_snapshot = false;
	strv_free(dirs);
	if (ret) {
		log_err("%s", err);
		return VM_EXIT_ERROR;
	}
	return enter_jail(r, j, sock);
}

/* The options run and restore share (common_opt reads them). */
#define COMMON_OPTIONS                                                   \
	{ "set", required_argument, NULL, 's' },                         \
	{ "plugin-dir", required_argument, NULL, 'P' },                  \
	{ "log-level", required_argument, NULL, 'l' },                   \
	{ "log-file", required_argument, NULL, OPT_LOG_FILE },           \
	{ "api-sock", required_argument, NULL, 'a' },                    \
	{ "id", required_argument, NULL, 'i' },                          \
	{ "seccomp", required_argument, NULL, 'S' },                     \
	{ "help", no_argument, NULL, 'h' },                              \
	JAIL_OPTIONS

/* Option @c into @o if it is a shared one: 0, a usage error's exit
 * status, or -1 when @c is the command's own (--help is). */
static int common_opt(int c, struct shared_opts *o)
{
	switch (c) {
	case 's':
	case 'P':
	case 'l':
	case OPT_LOG_FILE:
		return shared_opt(c, o);
	case 'a':
		o->sock = optarg;
		return 0;
	case 'i':
		o->id = optarg;
		return 0;
	case 'S':
		return seccomp_opt(o, optarg);
	}
	if (c < OPT_JAIL || c > OPT_JAIL_POOL_SIZE)
		return -1;
	o->jail_opts = true;
	return jail_opt(c, optarg, &o->jail);
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		COMMON_OPTIONS,
		{ "no-host-check", no_argument, NULL, 'H' },
		{ "config-file", required_argument, NULL, 'C' },
		{ "no-api", no_argument, NULL, 'N' },
		{ NULL, 0, NULL, 0 },
	};
	struct shared_opts o = { .level = -1, .seccomp = -1 };
	const char *config, *json = NULL;
	bool no_api = false;
	int c, ret;
	struct run_ctx r = { .host_check = true };
	struct cnode *root = NULL;
	char err[1024] = "";

	while ((c = getopt_long(argc, argv, "s:P:l:h", opts, NULL)) != -1) {
		if ((ret = common_opt(c, &o)) >= 0) {
			if (ret)
				return ret;
			continue;
		}
		switch (c) {
		case 'H':
			r.host_check = false;
			break;
		case 'C':
			json = optarg;
			break;
		case 'N':
			no_api = true;
			break;
		case 'h':
			return cmd_help("run");
		default:
			return bad_option("run", argv);
		}
	}
	if (o.sock && no_api)
		return usage_error("%s", "--no-api and --api-sock contradict each other");
	if (optind == argc - 1 && !json)
		config = argv[optind];
	else if (optind == argc && (o.sock || json))
		config = NULL;
	else if (json)
		return usage_error("--config-file %s: no CONFIG file besides it", json);
	else
		return usage_error("%s", o.sock ? "'run' takes at most one CONFIG file"
					     : "'run' takes exactly one CONFIG file (or --api-sock, or --config-file)");
	if (!config && o.n_sets)
		return usage_error("%s", "--set needs a CONFIG file (a libconfig one)");
	if ((ret = seccomp_mode(&o, &r.seccomp)))
		return ret;
	if (o.jail_opts && !o.jail.dir)
		return usage_error("%s", "the --jail-* options need --jail DIR");
	if (o.jail.dir && !config)
		return usage_error("%s", "--jail needs a CONFIG file: the jail holds the files its plan names, which an API-built VM names only later");
	if (o.level >= 0)
		log_set_level(o.level);
	/* A config file: read first, then only the plugins it names load
	 * (an API-built VM may name any, later). */
	if (config && plan_read(&r.cfg, config, o.sets, o.n_sets, &root, err, sizeof(err))) {
		log_err("%s", err);
		plan_free(&r.cfg);
		return VM_EXIT_ERROR;
	}
	if (load_named_registry(&r.reg, &o, config ? plan_type_names(root) : NULL) < 0) {
		plan_free(&r.cfg);
		return VM_EXIT_ERROR;
	}
	/* The whole VM description is checked before any plugin code runs. */
	if (config && plan_build_file(&r.cfg, root, config, &r.reg, err, sizeof(err))) {
		log_err("%s", err);
		plan_free(&r.cfg);
		registry_free(&r.reg);
		return VM_EXIT_ERROR;
	}
	if (config)
		log_set_level(o.level >= 0 ? o.level : r.cfg.log_level);
	/* The config's api group, unless the command line says otherwise. */
	if (config && !o.sock && !no_api)
		o.sock = r.cfg.api_socket;
	if (config && !o.id)
		o.id = r.cfg.api_id;
	if (o.jail.dir && (ret = run_jailed(&r, &o.jail, o.sock))) {
		jail_paths_free(&o.jail);
		plan_free(&r.cfg);
		registry_free(&r.reg);
		return ret;
	}
	ret = run_prepare(&r, err, sizeof(err));
	if (!ret && (o.sock || json))
		ret = run_api(&r, o.sock, o.id, !config, json, err, sizeof(err));
	return run_go(&r, ret, config ? make_booted : NULL, NULL, "setup", err, sizeof(err));
}

/* A restore loads the plugins its snapshot names (and any type a --set
 * gives); every one when the manifest cannot be read (the restore then
 * says why). */
static int load_restore_registry(struct registry *reg, const struct shared_opts *o,
				 const char *dir)
{
	char **names = snap_plugin_names(dir);
	unsigned n = 0;

	for (char **p = names; p && *p; p++)
		n++;
	for (unsigned i = 0; names && i < o->n_sets; i++) {
		const char *eq = strchr(o->sets[i], '=');
		char **grown;

		if (!eq || eq - o->sets[i] < 4 || strncmp(eq - 4, "type", 4))
			continue;
		grown = realloc(names, (n + 2) * sizeof(*names));
		if (!grown || !(grown[n] = strdup(eq + 1))) {
			strv_free(grown ? grown : names);
			names = NULL;
			break;
		}
		names = grown;
		names[++n] = NULL;
	}
	return load_named_registry(reg, o, names);
}

int cmd_restore(int argc, char **argv)
{
	static const struct option opts[] = {
		COMMON_OPTIONS,
		{ "paused", no_argument, NULL, 'p' },
		{ "mem-backend", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	struct shared_opts o = { .level = -1, .seccomp = -1 };
	bool paused = false;
	int c, ret;
	struct run_ctx r = { .host_check = false };
	char err[1024] = "";

	while ((c = getopt_long(argc, argv, "s:P:l:h", opts, NULL)) != -1) {
		if ((ret = common_opt(c, &o)) >= 0) {
			if (ret)
				return ret;
			continue;
		}
		switch (c) {
		case 'p':
			paused = true;
			break;
		case 'm':
			if (strcmp(optarg, "file") && strcmp(optarg, "uffd"))
				return usage_error("restore: --mem-backend %s: expected file or uffd",
						   optarg);
			r.mem_uffd = !strcmp(optarg, "uffd");
			break;
		case 'h':
			return cmd_help("restore");
		default:
			return bad_option("restore", argv);
		}
	}
	if (optind != argc - 1)
		return usage_error("%s", "'restore' takes exactly one snapshot folder");
	if (paused && !o.sock)
		return usage_error("%s", "--paused needs --api-sock (nothing could resume the VM)");
	if ((ret = seccomp_mode(&o, &r.seccomp)))
		return ret;
	if (o.jail_opts && !o.jail.dir)
		return usage_error("%s", "the --jail-* options need --jail DIR");
	if (o.level >= 0)
		log_set_level(o.level);
	if (load_restore_registry(&r.reg, &o, argv[optind]) < 0)
		return VM_EXIT_ERROR;
	r.sets = o.sets;
	r.n_sets = o.n_sets;
	if (o.jail.dir && (ret = restore_jailed(&r, &o.jail, argv[optind], o.sock))) {
		jail_paths_free(&o.jail);
		registry_free(&r.reg);
		return ret;
	}
	ret = run_prepare(&r, err, sizeof(err));
	if (!ret && o.sock)
		ret = run_api(&r, o.sock, o.id, false, NULL, err, sizeof(err));
	return run_go(&r, ret, paused ? make_restored_paused : make_restored, argv[optind],
		      "restore", err, sizeof(err));
}
