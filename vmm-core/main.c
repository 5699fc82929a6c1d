/* SPDX-License-Identifier: Apache-2.0 */
/* The cubicle command line: run, restore, plugins, check-host, disk, ctl, exec, cp.
 * Only this file decides to exit the process. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <getopt.h>
#include <jansson.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "cubicle-build.h"
#include "arch.h"
#include "devices.h"
#include "event.h"
#include "confine.h"
#include "helper.h"
#include "jail.h"
#include "api/http.h"
#include "hostcheck.h"
#include "loader.h"
#include "log.h"
#include "plan.h"
#include "run.h"
#include "snap/snapshot.h"

#define MAX_OPTS 64

static const char usage_text[] =
	"Usage: cubicle COMMAND [OPTIONS]\n"
	"\n"
	"A KVM microVM monitor for running untrusted code.\n"
	"\n"
	"Commands:\n"
	"  run CONFIG          boot the VM described by a libconfig file\n"
	"  run --api-sock PATH wait on a control socket to be configured (Firecracker's\n"
	"                      API; also `cubicle --api-sock PATH`)\n"
	"  run --config-file F boot Firecracker's JSON VM description F (with\n"
	"                      --api-sock, also serve the API; --no-api: do not)\n"
	"  restore DIR         run the VM a snapshot folder holds, from where it was\n"
	"                      (--api-sock PATH to drive it, --paused to wait there,\n"
	"                      --set devices.ID.backend.KEY=VALUE for a clone's own,\n"
	"                      --mem-backend uffd: RAM filled by a userfaultfd handler)\n"
	"  snapshot SOCKET DIR snapshot the paused VM of a running cubicle into DIR\n"
	"  rollback SOCKET DIR roll a running cubicle's VM back to snapshot DIR in place\n"
	"  compress DIR        compress a snapshot's memory into memory.zst (zstd's\n"
	"                      seekable format; --threads N, --level N)\n"
	"  plugins [NAME|FILE] list plugins, or describe one (a path checks that file;\n"
	"                      --json for programs)\n"
	"  check-host          print what this host's KVM can do; exit status 0 when\n"
	"                      it boots stock kernels, 3 when KVM cannot (PVM, no\n"
	"                      VT-x/AMD-V), 1 without /dev/kvm (--quiet: no output;\n"
	"                      --json: the facts as one JSON object)\n"
	"  disk SUBCOMMAND     create or clone disk images (`cubicle disk help`)\n"
	"  ctl SOCKET VERB     drive a running cubicle's API (`cubicle ctl --help`)\n"
	"  exec VM -- CMD ...  run a command in the guest through cubicle-agent\n"
	"                      (-i stdin, -t pty; `cubicle exec --help`)\n"
	"  cp SRC DST          copy a file into or out of the guest, one side VM:PATH\n"
	"                      (`cubicle cp --help`)\n"
	"  serve               E2B's sandbox API on this host: a VMM per sandbox,\n"
	"                      cloned from a template (`cubicle serve --help`)\n"
	"  template build NAME CONFIG  boot CONFIG, snapshot it as a serve template\n"
	"  help [COMMAND]      show help\n"
	"\n"
	"Run options:\n"
	"  -s, --set PATH=VALUE   override a config value (machine.vcpus=2,\n"
	"                         boot.cmdline=\"...\", devices.ID.PARAM=...); repeatable\n"
	"  -P, --plugin-dir DIR   search DIR for plugins first; repeatable\n"
	"  -l, --log-level LEVEL  err, warn, info or debug (overrides log_level)\n"
	"      --log-file FILE    messages to FILE (appended) instead of stderr; they\n"
	"                         carry the time whenever they do not go to a terminal\n"
	"      --no-host-check    boot even if this host's KVM looks unable to run Linux\n"
	"      --api-sock PATH    serve the control API on this Unix socket (overrides\n"
	"                         the config's api.socket)\n"
	"      --id ID            the instance id the API reports (GET /)\n"
	"      --config-file FILE Firecracker's JSON VM description instead of CONFIG\n"
	"      --no-api           serve no API, even when the config has api.socket\n"
	"      --jail DIR         run jailed: namespaces, DIR as / holding only the\n"
	"                         files the config names, DIR's owner as uid/gid,\n"
	"                         a cgroup; --jail-uid N, --jail-gid N, --jail-cgroup\n"
	"                         PATH, --jail-cpu-max/-memory-max/-pids-max/-io-max\n"
	"                         VALUE, --jail-nofile N, --jail-fsize BYTES (root)\n"
	"      --seccomp MODE     enforce (default: a forbidden system call ends\n"
	"                         cubicle, status 159), log (allowed, the kernel logs\n"
	"                         it) or off; also for restore\n"
	"\n"
	"Plugins are searched in: each --plugin-dir, $CUBICLE_PLUGIN_PATH (colon-\n"
	"separated), then " CUB_PLUGIN_DIR " (or the build tree when uninstalled).\n"
	"\n"
	"Exit status of run: 0 the guest rebooted or powered off; 1 a cubicle error;\n"
	"2 bad usage; 3 the guest kernel panicked; 4 the guest crashed (triple\n"
	"fault, KVM failure); 130 you stopped it at the console (Ctrl-A x); 159 a\n"
	"thread made a system call its seccomp filter forbids; a test device may\n"
	"choose any other status.\n"
	"See cubicle(1) for the config file format.\n";

static int usage(FILE *f, int status)
{
	fputs(usage_text, f);
	return status;
}

static const char help_run[] =
	"Usage: cubicle run CONFIG [OPTIONS]\n"
	"       cubicle run --api-sock PATH [--id ID]\n"
	"       cubicle run --config-file VM.json [--api-sock PATH | --no-api]\n"
	"\n"
	"Boot the VM a libconfig file describes (or wait on a control socket to be\n"
	"configured, Firecracker's way; or boot Firecracker's JSON description).\n"
	"\n"
	"  -s, --set PATH=VALUE   override a config value; repeatable\n"
	"  -P, --plugin-dir DIR   search DIR for plugins first; repeatable\n"
	"  -l, --log-level LEVEL  err, warn, info or debug\n"
	"      --log-file FILE    messages to FILE instead of stderr\n"
	"      --no-host-check    boot even if this host's KVM looks unable to run Linux\n"
	"      --api-sock PATH    serve the control API on this Unix socket\n"
	"      --id ID            the instance id the API reports\n"
	"      --config-file FILE Firecracker's JSON VM description\n"
	"      --no-api           serve no API, even when the config has api.socket\n"
	"      --seccomp MODE     enforce (default), log or off\n"
	"      --jail DIR         run jailed (root; --jail-uid, --jail-gid, --jail-cgroup,\n"
	"                         --jail-cpu-max, --jail-memory-max, --jail-pids-max,\n"
	"                         --jail-io-max, --jail-nofile, --jail-fsize)\n"
	"\n"
	"Exit status: 0 the guest rebooted or powered off; 1 a cubicle error; 2 bad\n"
	"usage; 3 guest panic; 4 guest crash; 130 Ctrl-A x; 159 a forbidden system\n"
	"call. See cubicle(1).\n";

static const char help_restore[] =
	"Usage: cubicle restore DIR [OPTIONS]\n"
	"\n"
	"Run the VM a snapshot folder holds, from where it was, in this process.\n"
	"\n"
	"  -s, --set devices.ID.KEY=VALUE  a clone's own files (its disk copy, its\n"
	"                         vsock socket, its console); repeatable\n"
	"      --api-sock PATH    drive it through the control API\n"
	"      --id ID            the instance id the API reports\n"
	"      --paused           wait paused (PATCH /vm Resumed starts it)\n"
	"      --mem-backend MODE file (default: the memory file mapped privately) or\n"
	"                         uffd (pages filled on demand by a handler thread)\n"
	"  -P, --plugin-dir DIR, -l, --log-level LEVEL, --log-file FILE, --seccomp MODE\n"
	"                         as for run\n"
	"      --jail DIR         run jailed, as for run (the snapshot folder is bound\n"
	"                         in read-only; the files a restore makes, its disk\n"
	"                         copies and sockets, are DIR/PATH from outside)\n"
	"\n"
	"Exit status as for run. See cubicle(1), SNAPSHOTS.\n";

static const char help_plugins[] =
	"Usage: cubicle plugins [NAME | FILE] [--plugin-dir DIR]... [--json]\n"
	"\n"
	"List the plugins found (name, kind, version, summary), or describe one:\n"
	"its parameters (type, default, range, choices), methods and the system\n"
	"calls it needs beyond the seccomp allow-lists. A path (with a '/') loads\n"
	"and checks that one file. --json prints the same as JSON.\n";

static const char help_check_host[] =
	"Usage: cubicle check-host [--dir DIR] [--quiet] [--json]\n"
	"\n"
	"Print what this host can do: KVM and its capabilities, PVM, whether it boots\n"
	"stock Linux kernels, then what each plugin that probes the host says (run\n"
	"in DIR, default the current folder: reflinks there, BPF, libzstd).\n"
	"\n"
	"Exit status: 0 this host boots stock kernels; 3 its KVM cannot (PVM, no\n"
	"VT-x/AMD-V); 1 no usable /dev/kvm. --quiet prints nothing; --json prints\n"
	"the facts and the status as one JSON object.\n";

static const char help_compress[] =
	"Usage: cubicle compress DIR [--threads N] [--level N]\n"
	"\n"
	"Compress a snapshot folder's memory into memory.zst (zstd's seekable format:\n"
	"a restore reads the frames it needs; `zstd -d` reads it too). --threads\n"
	"1 to 64 (default: the CPUs, at most 16), --level 1 to 19 (default: zstd's, 3).\n";

/* `cubicle CMD --help` and `cubicle help CMD` of a built-in command. */
static int cmd_help(const char *cmd)
{
	static const struct { const char *name, *text; } pages[] = {
		{ "run", help_run }, { "restore", help_restore }, { "plugins", help_plugins },
		{ "check-host", help_check_host }, { "compress", help_compress },
	};

	for (unsigned i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		if (!strcmp(cmd, pages[i].name)) {
			fputs(pages[i].text, stdout);
			return 0;
		}
	return usage(stdout, 0);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "cubicle: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'cubicle help'.\n");
	return VM_EXIT_USAGE;
}

/* getopt_long stopped at a bad option: name it (opterr is off). */
static int bad_option(const char *cmd, char **argv)
{
	const char *opt = argv[optind - 1];

	if (optopt && optopt != '?' && opt[0] == '-' && opt[1] == '-')
		return usage_error("%s: option %s needs a value", cmd, opt); /* --set */
	if (optopt && optopt != '?' && (opt[0] != '-' || opt[1] != optopt))
		return usage_error("%s: option -%c needs a value", cmd, optopt);
	if (optopt && opt[1] == optopt && !opt[2])
		return usage_error("%s: option %s needs a value", cmd, opt);
	return usage_error("%s: unknown option %s", cmd, opt);
}

static void scan_warn(const char *msg, void *arg)
{
	log_msg(*(int *)arg, NULL, "skipping plugin %s", msg);
}

static int load_registry(struct registry *reg, char *const *dirs_cli, unsigned n, int warn_lvl)
{
	char **dirs = loader_dirs(dirs_cli, n);
	int ret;

	if (!dirs) {
		log_err("out of memory");
		return -ENOMEM;
	}
	ret = registry_scan(reg, dirs, scan_warn, &warn_lvl);
	loader_dirs_free(dirs);
	return ret;
}

/* -s, -P and -l, which run and restore share. */
struct shared_opts {
	char *sets[MAX_OPTS], *dirs[MAX_OPTS];
	unsigned n_sets, n_dirs;
	int level; /* -1: not given */
	int seccomp; /* enum confine_mode; -1: not given */
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

/* --plugin-dir @dir names a folder: 0, or a usage error's exit status. */
static int plugin_dir_opt(const char *dir)
{
	struct stat sb;

	if (stat(dir, &sb))
		return usage_error("--plugin-dir %s: %s", dir, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return usage_error("--plugin-dir %s: not a folder", dir);
	return 0;
}

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
       OPT_JAIL_PROBE };

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
	{ "jail-probe", no_argument, NULL, OPT_JAIL_PROBE }

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
	default: return 1;
	}
}

/* The seccomp programs from root's cache, which the jail cannot reach:
 * read in the jailed child before its pivot, beside the supervisor's
 * making of the network namespace (jail_cfg.before_pivot). */
static void preload_filters(void *arg)
{
	struct run_ctx *r = arg;

	confine_preload((enum confine_mode)r->seccomp, &r->reg);
}

/* Into the jail once its paths are named (@sock, the API socket, is made
 * inside): what loads lazily loaded now (the jail has no libraries), then
 * jail_enter. Returns only in the jailed child: 0, or a cubicle exit status. */
static int enter_jail(struct run_ctx *r, struct jail_cfg *j, const char *sock)
{
	char err[1024] = "";
	int ret = 0;

	j->before_pivot = preload_filters;
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
	for (char **d = dirs; !ret && *d; d++)
		ret = jail_add_read_only(j, *d, err, sizeof(err));
	strv_free(dirs);
	if (ret) {
		log_err("%s", err);
		return VM_EXIT_ERROR;
	}
	return enter_jail(r, j, sock);
}

static int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "set", required_argument, NULL, 's' },
		{ "plugin-dir", required_argument, NULL, 'P' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "log-file", required_argument, NULL, OPT_LOG_FILE },
		{ "no-host-check", no_argument, NULL, 'H' },
		{ "api-sock", required_argument, NULL, 'a' },
		{ "id", required_argument, NULL, 'i' },
		{ "config-file", required_argument, NULL, 'C' },
		{ "no-api", no_argument, NULL, 'N' },
		{ "seccomp", required_argument, NULL, 'S' },
		JAIL_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct shared_opts o = { .level = -1, .seccomp = -1 };
	struct jail_cfg jail = { 0 };
	bool jail_opts = false;
	const char *sock = NULL, *id = NULL, *config, *json = NULL;
	bool no_api = false;
	int c, ret;
	struct run_ctx r = { .host_check = true };
	struct cnode *root = NULL;
	char err[1024] = "";

	while ((c = getopt_long(argc, argv, "s:P:l:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
		case 'P':
		case 'l':
		case OPT_LOG_FILE:
			if ((ret = shared_opt(c, &o)))
				return ret;
			break;
		case 'H':
			r.host_check = false;
			break;
		case 'a':
			sock = optarg;
			break;
		case 'i':
			id = optarg;
			break;
		case 'C':
			json = optarg;
			break;
		case 'N':
			no_api = true;
			break;
		case 'S':
			if ((ret = seccomp_opt(&o, optarg)))
				return ret;
			break;
		case 'h':
			return cmd_help("run");
		default:
			if (c >= OPT_JAIL && c <= OPT_JAIL_PROBE) {
				if ((ret = jail_opt(c, optarg, &jail)))
					return ret;
				jail_opts = true;
				break;
			}
			return bad_option("run", argv);
		}
	}
	if (sock && no_api)
		return usage_error("%s", "--no-api and --api-sock contradict each other");
	if (optind == argc - 1 && !json)
		config = argv[optind];
	else if (optind == argc && (sock || json))
		config = NULL;
	else if (json)
		return usage_error("--config-file %s: no CONFIG file besides it", json);
	else
		return usage_error("%s", sock ? "'run' takes at most one CONFIG file"
					     : "'run' takes exactly one CONFIG file (or --api-sock, or --config-file)");
	if (!config && o.n_sets)
		return usage_error("%s", "--set needs a CONFIG file (a libconfig one)");
	if ((ret = seccomp_mode(&o, &r.seccomp)))
		return ret;
	if (jail_opts && !jail.dir)
		return usage_error("%s", "the --jail-* options need --jail DIR");
	if (jail.dir && !config)
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
	if (config && !sock && !no_api)
		sock = r.cfg.api_socket;
	if (config && !id)
		id = r.cfg.api_id;
	if (jail.dir && (ret = run_jailed(&r, &jail, sock))) {
		plan_free(&r.cfg);
		registry_free(&r.reg);
		return ret;
	}
	ret = run_prepare(&r, err, sizeof(err));
	if (!ret && (sock || json))
		ret = run_api(&r, sock, id, !config, json, err, sizeof(err));
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

static int cmd_restore(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "plugin-dir", required_argument, NULL, 'P' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "log-file", required_argument, NULL, OPT_LOG_FILE },
		{ "api-sock", required_argument, NULL, 'a' },
		{ "id", required_argument, NULL, 'i' },
		{ "paused", no_argument, NULL, 'p' },
		{ "mem-backend", required_argument, NULL, 'm' },
		{ "set", required_argument, NULL, 's' },
		{ "seccomp", required_argument, NULL, 'S' },
		JAIL_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct shared_opts o = { .level = -1, .seccomp = -1 };
	struct jail_cfg jail = { 0 };
	bool jail_opts = false;
	const char *sock = NULL, *id = NULL;
	bool paused = false;
	int c, ret;
	struct run_ctx r = { .host_check = false };
	char err[1024] = "";

	while ((c = getopt_long(argc, argv, "s:P:l:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
		case 'P':
		case 'l':
		case OPT_LOG_FILE:
			if ((ret = shared_opt(c, &o)))
				return ret;
			break;
		case 'a':
			sock = optarg;
			break;
		case 'i':
			id = optarg;
			break;
		case 'p':
			paused = true;
			break;
		case 'm':
			if (strcmp(optarg, "file") && strcmp(optarg, "uffd"))
				return usage_error("restore: --mem-backend %s: expected file or uffd",
						   optarg);
			r.mem_uffd = !strcmp(optarg, "uffd");
			break;
		case 'S':
			if ((ret = seccomp_opt(&o, optarg)))
				return ret;
			break;
		case 'h':
			return cmd_help("restore");
		default:
			if (c >= OPT_JAIL && c <= OPT_JAIL_PROBE) {
				if ((ret = jail_opt(c, optarg, &jail)))
					return ret;
				jail_opts = true;
				break;
			}
			return bad_option("restore", argv);
		}
	}
	if (optind != argc - 1)
		return usage_error("%s", "'restore' takes exactly one snapshot folder");
	if (paused && !sock)
		return usage_error("%s", "--paused needs --api-sock (nothing could resume the VM)");
	if ((ret = seccomp_mode(&o, &r.seccomp)))
		return ret;
	if (jail_opts && !jail.dir)
		return usage_error("%s", "the --jail-* options need --jail DIR");
	if (o.level >= 0)
		log_set_level(o.level);
	if (load_restore_registry(&r.reg, &o, argv[optind]) < 0)
		return VM_EXIT_ERROR;
	r.sets = o.sets;
	r.n_sets = o.n_sets;
	if (jail.dir && (ret = restore_jailed(&r, &jail, argv[optind], sock))) {
		registry_free(&r.reg);
		return ret;
	}
	ret = run_prepare(&r, err, sizeof(err));
	if (!ret && sock)
		ret = run_api(&r, sock, id, false, NULL, err, sizeof(err));
	return run_go(&r, ret, paused ? make_restored_paused : make_restored, argv[optind],
		      "restore", err, sizeof(err));
}

/* ---- plugins ---- */

/* Levenshtein distance (short names only: longer ones count as far). */
static unsigned edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned row[65];

	if (la > 64 || lb > 64)
		return ~0u;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned diag = row[0], up;

		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned sub = diag + (a[i - 1] != b[j - 1]);

			up = row[j];
			row[j] = sub < up + 1 ? sub : up + 1;
			if (row[j - 1] + 1 < row[j])
				row[j] = row[j - 1] + 1;
			diag = up;
		}
	}
	return row[lb];
}

/* @name is the plugin file's name (virtio_blk.so), or that without .so. */
static bool same_file_name(const char *path, const char *name)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > 3 && !strcmp(base + n - 3, ".so"))
		n -= 3;
	return !strcmp(base, name) || (strlen(name) == n && !strncmp(base, name, n));
}

static void describe(const struct plugin *p)
{
	const struct cub_plugin *d = p->d;

	printf("%s (%s plugin, version %s, %s)\n  %s\n  file: %s\n", d->name,
	       loader_kind_name(d->kind), d->version ? d->version : "?",
	       d->license ? d->license : "license unknown", d->summary ? d->summary : "",
	       p->path);
	if (d->n_params)
		printf("  parameters:\n");
	for (unsigned i = 0; i < d->n_params; i++) {
		const struct cub_param *prm = &p->params[i];
		char def[96];

		if (!prm->def)
			snprintf(def, sizeof(def), "(required)");
		else if (prm->type == CUB_P_STORAGE || prm->type == CUB_P_NET ||
			 prm->type == CUB_P_RATELIMIT)
			snprintf(def, sizeof(def), "(optional)");
		else if (prm->type == CUB_P_STR || prm->type == CUB_P_PATH ||
			 prm->type == CUB_P_ENUM || prm->type == CUB_P_STRV)
			snprintf(def, sizeof(def), "= \"%s\"", prm->def);
		else
			snprintf(def, sizeof(def), "= %s", prm->def);
		printf("    %-14s %-9s %-18s %s\n", prm->name, loader_ptype_name(prm->type), def,
		       prm->doc ? prm->doc : "");
		if (prm->min || prm->max)
			printf("    %-14s range: %s to %s\n", "", prm->min ? prm->min : "-",
			       prm->max ? prm->max : "-");
		if (prm->type == CUB_P_ENUM) {
			printf("    %-14s choices:", "");
			for (int j = 0; prm->choices[j]; j++)
				printf(" %s", prm->choices[j]);
			printf("\n");
		}
	}
	/* read by cubicle itself for each virtio device */
	if (d->kind == CUB_KIND_DEVICE && !strncmp(d->name, "virtio-", 7)) {
		char def[32];

		snprintf(def, sizeof(def), "= \"%s\"", arch_virtio_default_transport());
		printf("    %-14s %-9s %-18s %s\n", "transport", "enum", def,
		       "how the guest finds the device (read by cubicle for every virtio device)");
		printf("    %-14s choices: pci mmio\n", "");
	}
	if (d->n_methods)
		printf("  methods:\n");
	for (unsigned i = 0; i < d->n_methods; i++)
		printf("    %-14s (%s)  %s\n", d->methods[i].name, d->methods[i].sig,
		       d->methods[i].doc ? d->methods[i].doc : "");
	if (d->size >= offsetof(struct cub_plugin, n_syscalls) + sizeof(d->n_syscalls) &&
	    d->n_syscalls) {
		printf("  system calls beyond the seccomp allow-lists:");
		for (unsigned i = 0; i < d->n_syscalls; i++) {
			const struct cub_syscall *c = &d->syscalls[i];

			if (c->arg < 0)
				printf(" %s", c->name);
			else
				printf(" %s(arg%d & 0x%llx == 0x%llx)", c->name, c->arg,
				       (unsigned long long)c->mask, (unsigned long long)c->value);
		}
		printf("\n");
	}
}

/* `plugins NAME --json`: what describe() prints, as one JSON object, the
 * defaults in their own type. */
static void describe_json(const struct plugin *p)
{
	const struct cub_plugin *d = p->d;
	json_t *o = json_pack("{s:s,s:s,s:s?,s:s?,s:s?,s:s,s:[],s:[]}", "name", d->name, "kind",
			      loader_kind_name(d->kind), "version", d->version, "license",
			      d->license, "summary", d->summary, "file", p->path, "parameters",
			      "methods");
	json_t *params = json_object_get(o, "parameters"), *methods = json_object_get(o, "methods");

	for (unsigned i = 0; o && i < d->n_params; i++) {
		const struct cub_param *prm = &p->params[i];
		json_t *e = json_pack("{s:s,s:s,s:b,s:s?}", "name", prm->name, "type",
				      loader_ptype_name(prm->type), "required", !prm->def, "doc",
				      prm->doc);
		json_t *def = NULL;

		if (!e)
			continue;
		if (prm->def && (prm->type == CUB_P_BOOL))
			def = json_boolean(!strcmp(prm->def, "true"));
		else if (prm->def && (prm->type == CUB_P_INT || prm->type == CUB_P_U64) &&
			 *prm->def && strspn(prm->def, "-0123456789") == strlen(prm->def))
			def = json_integer(strtoll(prm->def, NULL, 10));
		else if (prm->def && prm->type != CUB_P_STORAGE && prm->type != CUB_P_NET &&
			 prm->type != CUB_P_RATELIMIT)
			def = json_string(prm->def);
		if (def)
			json_object_set_new(e, "default", def);
		if (prm->min)
			json_object_set_new(e, "min", json_string(prm->min));
		if (prm->max)
			json_object_set_new(e, "max", json_string(prm->max));
		if (prm->type == CUB_P_ENUM) {
			json_t *ch = json_array();

			for (int k = 0; prm->choices[k]; k++)
				json_array_append_new(ch, json_string(prm->choices[k]));
			json_object_set_new(e, "choices", ch);
		}
		json_array_append_new(params, e);
	}
	if (o && d->kind == CUB_KIND_DEVICE && !strncmp(d->name, "virtio-", 7))
		json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:s,s:[s,s],s:s}", "name",
							"transport", "type", "enum", "required", 0,
							"default", arch_virtio_default_transport(),
							"choices", "pci", "mmio", "doc",
							"how the guest finds the device (read by cubicle)"));
	for (unsigned i = 0; o && i < d->n_methods; i++)
		json_array_append_new(methods, json_pack("{s:s,s:s,s:s?}", "name", d->methods[i].name,
							 "signature", d->methods[i].sig, "doc",
							 d->methods[i].doc));
	json_dumpf(o, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(o);
}

static int cmd_plugins(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "plugin-dir", required_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *dirs[MAX_OPTS];
	unsigned n_dirs = 0;
	struct registry reg = { 0 };
	bool json = false;
	int c, status = 0;

	while ((c = getopt_long(argc, argv, "P:jh", opts, NULL)) != -1) {
		if (c == 'j') {
			json = true;
			continue;
		}
		if (c == 'P' && plugin_dir_opt(optarg))
			return 2;
		if (c == 'P' && n_dirs < MAX_OPTS)
			dirs[n_dirs++] = optarg;
		else if (c == 'h')
			return cmd_help("plugins");
		else
			return bad_option("plugins", argv);
	}
	if (argc - optind > 1)
		return usage_error("%s", "'plugins' takes at most one NAME or FILE");
	if (optind < argc && strchr(argv[optind], '/')) {
		struct plugin *p;
		char err[1024];

		if (loader_open(argv[optind], &p, err, sizeof(err)) < 0) {
			log_err("%s", err);
			return VM_EXIT_ERROR;
		}
		json ? describe_json(p) : describe(p);
		loader_close(p);
		return 0;
	}
	if (load_registry(&reg, dirs, n_dirs, CUB_LOG_WARN) < 0)
		return VM_EXIT_ERROR;
	if (optind < argc) {
		unsigned found = 0, best_d = ~0u;
		const char *best = NULL;

		for (unsigned i = 0; i < reg.n; i++) {
			if (!strcmp(reg.p[i]->d->name, argv[optind]) ||
			    same_file_name(reg.p[i]->path, argv[optind])) {
				json ? describe_json(reg.p[i]) : describe(reg.p[i]);
				found++;
			}
		}
		for (unsigned i = 0; !found && i < reg.n; i++) {
			unsigned dist = edit_distance(reg.p[i]->d->name, argv[optind]);

			if (dist < best_d) {
				best_d = dist;
				best = reg.p[i]->d->name;
			}
		}
		if (!found && best && best_d <= 3) {
			log_err("no plugin named '%s'; did you mean %s? (`cubicle plugins` lists them)",
				argv[optind], best);
			status = VM_EXIT_ERROR;
		} else if (!found) {
			log_err("no plugin named '%s' (run `cubicle plugins` to list them)",
				argv[optind]);
			status = VM_EXIT_ERROR;
		}
	} else if (!reg.n) {
		log_err("no plugins found; use --plugin-dir or CUBICLE_PLUGIN_PATH");
		status = VM_EXIT_ERROR;
	} else if (json) {
		json_t *all = json_array();

		for (unsigned i = 0; all && i < reg.n; i++) {
			const struct cub_plugin *d = reg.p[i]->d;

			json_array_append_new(all, json_pack("{s:s,s:s,s:s?,s:s?,s:s}", "name", d->name,
							     "kind", loader_kind_name(d->kind), "version",
							     d->version, "summary", d->summary, "file",
							     reg.p[i]->path));
		}
		json_dumpf(all, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(all);
	} else {
		printf("%-14s %-8s %-8s %s\n", "NAME", "KIND", "VERSION", "SUMMARY");
		for (unsigned i = 0; i < reg.n; i++) {
			const struct cub_plugin *d = reg.p[i]->d;

			printf("%-14s %-8s %-8s %s\n", d->name, loader_kind_name(d->kind),
			       d->version ? d->version : "?", d->summary ? d->summary : "");
		}
		printf("\n`cubicle plugins NAME` shows a plugin's parameters and methods.\n");
	}
	registry_free(&reg);
	return status;
}

static int cmd_check_host(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = ".";
	struct registry reg = { 0 };
	FILE *out = stdout;
	bool quiet = false;
	json_t *j = NULL;
	int c, status;

	while ((c = getopt_long(argc, argv, "d:qjh", opts, NULL)) != -1) {
		if (c == 'd')
			dir = optarg;
		else if (c == 'q')
			quiet = true;
		else if (c == 'j') {
			if (!j && !(j = json_object()))
				return VM_EXIT_ERROR;
		}
		else if (c == 'h')
			return cmd_help("check-host");
		else
			return bad_option("check-host", argv);
	}
	if (optind != argc)
		return usage_error("%s", "'check-host' takes no arguments (use --dir DIR)");
	if (quiet && !(out = fopen("/dev/null", "we")))
		return VM_EXIT_ERROR;
	if (load_registry(&reg, NULL, 0, CUB_LOG_WARN) < 0)
		return VM_EXIT_ERROR;
	/* 0: boots stock kernels; 1: no usable /dev/kvm; 3: KVM, but not for
	 * a stock kernel (PVM, no VT-x/AMD-V) */
	status = hostcheck_report(out, j, dir, &reg);
	if (j) {
		json_object_set_new(j, "status", json_integer(status == 2 ? 3 : status));
		json_dumpf(j, out, JSON_INDENT(2));
		fputc('\n', out);
		json_decref(j);
	}
	if (out != stdout)
		fclose(out);
	registry_free(&reg);
	return status == 2 ? 3 : status ? VM_EXIT_ERROR : 0;
}

/* `cubicle compress DIR`: memory into memory.zst (snap/zst.c). */
static int cmd_compress(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "level", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct snap_zst_opts o = { 0 };
	struct snap_zst_stats st;
	char err[1024], *end;
	long v;
	int c;

	while ((c = getopt_long(argc, argv, "t:L:h", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_help("compress");
		if (c != 't' && c != 'L')
			return bad_option("compress", argv);
		errno = 0;
		v = strtol(optarg, &end, 10);
		if (errno || *end || !*optarg || (c == 't' && (v < 1 || v > 64)) ||
		    (c == 'L' && (v < 1 || v > 19)))
			return usage_error("compress: --%s %s: expected %s", c == 't' ? "threads" : "level",
					   optarg, c == 't' ? "1 .. 64" : "1 .. 19");
		if (c == 't')
			o.threads = (unsigned)v;
		else
			o.level = (int)v;
	}
	if (optind + 1 != argc)
		return usage_error("%s", "'compress' takes exactly one snapshot folder");
	log_set_level(CUB_LOG_WARN);
	if (snap_compress(argv[optind], &o, &st, err, sizeof(err))) {
		log_err("%s", err);
		return VM_EXIT_ERROR;
	}
	printf("%s: memory %" PRIu64 " MiB -> memory.zst %.1f MiB (%u frames, %u thread%s) in %.1f s\n",
	       argv[optind], st.in_bytes >> 20, st.out_bytes / 1048576.0, st.frames, st.threads,
	       st.threads == 1 ? "" : "s", st.us / 1e6);
	return 0;
}

/*
 * Threads (cubicle's and the plugins') get 1 MiB stacks, not RLIMIT_STACK's
 * 8 MiB: where transparent huge pages are "always" (Debian's kernels), a
 * stack mapping of 2 MiB or more may hold a 2 MiB-aligned block, and the
 * first touch there (the stack's first page, when its top is so aligned,
 * or a deeper call later) takes a whole huge page: 2 MiB of the VMM's
 * memory for a few KiB used, which a guest's flood could so add now and
 * then. A mapping under 2 MiB holds no such block.
 */
static void thread_stacks(void)
{
	pthread_attr_t a;

	if (pthread_attr_init(&a))
		return;
	if (pthread_attr_setstacksize(&a, 1u << 20) || pthread_setattr_default_np(&a))
		log_warn("threads keep the default stack size: %s", strerror(errno));
	pthread_attr_destroy(&a);
}

int main(int argc, char **argv)
{
	const char *cmd;

	clock_mark_start();
	thread_stacks();
	/* A console whose reader went away is the device's business (EPIPE). */
	signal(SIGPIPE, SIG_IGN);
	log_check_output();
	if (argc < 2)
		return usage_error("%s", "missing COMMAND: run, plugins, check-host or disk");
	cmd = argv[1];
	if (!strcmp(cmd, "help") && argc == 3) {
		/* `cubicle help CMD`: a command that is a program of its own
		 * answers its own --help; the rest are on the main page. */
		static const char *const own[][3] = {
			{ "ctl", "tools/ctl", "cubicle-ctl" },	   { "disk", "tools/disk", "cubicle-disk" },
			{ "exec", "tools/exec", "cubicle-exec" },   { "cp", "tools/exec", "cubicle-cp" },
			{ "serve", "tools/serve", "cubicle-serve" },
		};
		char help[] = "--help", tmpl[] = "template", *av[] = { argv[2], help, NULL };

		for (unsigned i = 0; i < sizeof(own) / sizeof(own[0]); i++)
			if (!strcmp(argv[2], own[i][0]))
				return helper_exec(own[i][1], own[i][2], 2, av);
		if (!strcmp(argv[2], "template")) {
			char *tv[] = { tmpl, tmpl, help, NULL };

			return helper_exec("tools/serve", "cubicle-serve", 3, tv);
		}
		static const char *const mine[] = { "run", "restore", "snapshot", "rollback",
						    "compress", "plugins", "check-host", "help" };
		unsigned k = 0;

		while (k < sizeof(mine) / sizeof(mine[0]) && strcmp(argv[2], mine[k]))
			k++;
		if (k == sizeof(mine) / sizeof(mine[0]))
			return usage_error("help %s: no such command", argv[2]);
		return cmd_help(argv[2]);
	}
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help"))
		return usage(stdout, 0);
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
		printf("cubicle %s (%s, plugin ABI %d.%d)\n", PACKAGE_VERSION, arch_name,
		       CUB_ABI_MAJOR, CUB_ABI_MINOR);
		return 0;
	}
	optind = 1;
	opterr = 0;
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 1, argv + 1);
	/* Firecracker's form: `cubicle --api-sock PATH` waits to be configured;
	 * `cubicle --no-api --config-file vm.json` boots a JSON description. */
	if (!strncmp(cmd, "--api-sock", 10) || !strncmp(cmd, "--config-file", 13) ||
	    !strcmp(cmd, "--no-api") || !strncmp(cmd, "--id", 4))
		return cmd_run(argc, argv);
	if (!strcmp(cmd, "restore"))
		return cmd_restore(argc - 1, argv + 1);
	if (!strcmp(cmd, "snapshot") || !strcmp(cmd, "rollback")) {
		/* `cubicle snapshot SOCKET DIR` is `cubicle ctl SOCKET snapshot DIR` */
		char ctl[] = "ctl", *args[] = { ctl, NULL, NULL, NULL, NULL };

		if (argc != 4)
			return usage_error("'%s' takes a SOCKET and a snapshot folder", cmd);
		args[1] = argv[2];
		args[2] = argv[1];
		args[3] = argv[3];

		return helper_exec("tools/ctl", "cubicle-ctl", 4, args);
	}
	if (!strcmp(cmd, "compress"))
		return cmd_compress(argc - 1, argv + 1);
	if (!strcmp(cmd, "plugins"))
		return cmd_plugins(argc - 1, argv + 1);
	if (!strcmp(cmd, "check-host"))
		return cmd_check_host(argc - 1, argv + 1);
	if (!strcmp(cmd, "disk"))
		return helper_exec("tools/disk", "cubicle-disk", argc - 1, argv + 1);
	if (!strcmp(cmd, "ctl"))
		return helper_exec("tools/ctl", "cubicle-ctl", argc - 1, argv + 1);
	if (!strcmp(cmd, "exec"))
		return helper_exec("tools/exec", "cubicle-exec", argc - 1, argv + 1);
	if (!strcmp(cmd, "cp"))
		return helper_exec("tools/exec", "cubicle-cp", argc - 1, argv + 1);
	if (!strcmp(cmd, "serve"))
		return helper_exec("tools/serve", "cubicle-serve", argc - 1, argv + 1);
	if (!strcmp(cmd, "template"))
		return helper_exec("tools/serve", "cubicle-serve", argc, argv);
	return usage_error("unknown command '%s'", cmd);
}
