/* SPDX-License-Identifier: Apache-2.0 */
/* The cubicle command line: run, plugins, check-host, disk. Only this file
 * decides to exit the process. */
#include <errno.h>
#include <getopt.h>
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
#include "helper.h"
#include "hostcheck.h"
#include "loader.h"
#include "log.h"
#include "plan.h"
#include "api/api.h"
#include "vm.h"

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
	"  plugins [NAME|FILE] list plugins, or describe one (a path checks that file)\n"
	"  check-host          print what this host's KVM can do\n"
	"  disk SUBCOMMAND     create or clone disk images (`cubicle disk help`)\n"
	"  ctl SOCKET VERB     drive a running cubicle's API (`cubicle ctl --help`)\n"
	"  help [COMMAND]      show help\n"
	"\n"
	"Run options:\n"
	"  -s, --set PATH=VALUE   override a config value (machine.vcpus=2,\n"
	"                         boot.cmdline=\"...\", devices.ID.PARAM=...); repeatable\n"
	"  -P, --plugin-dir DIR   search DIR for plugins first; repeatable\n"
	"  -l, --log-level LEVEL  err, warn, info or debug (overrides log_level)\n"
	"      --no-host-check    boot even if this host's KVM looks unable to run Linux\n"
	"      --api-sock PATH    serve the control API on this Unix socket (overrides\n"
	"                         the config's api.socket)\n"
	"      --id ID            the instance id the API reports (GET /)\n"
	"      --config-file FILE Firecracker's JSON VM description instead of CONFIG\n"
	"      --no-api           serve no API, even when the config has api.socket\n"
	"\n"
	"Plugins are searched in: each --plugin-dir, $CUBICLE_PLUGIN_PATH (colon-\n"
	"separated), then " CUB_PLUGIN_DIR " (or the build tree when uninstalled).\n"
	"\n"
	"Exit status of run: 0 the guest rebooted or powered off; 1 a cubicle error;\n"
	"2 bad usage; 3 the guest kernel panicked; 4 the guest crashed (triple\n"
	"fault, KVM failure); a test device may choose any other status.\n"
	"See cubicle(1) for the config file format.\n";

static int usage(FILE *f, int status)
{
	fputs(usage_text, f);
	return status;
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

	if (optopt && optopt != '?' && (opt[0] != '-' || opt[1] == '-' || opt[1] != optopt))
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

/* ---- run ---- */

struct run_ctx {
	struct plan cfg;
	struct vm vm;
	struct registry reg;
	struct cub_inst **insts;
	unsigned n_insts;
	sigset_t sigs;
	pthread_t sig_thread;
	struct event_loop *ev;
	bool have_vm, have_sig_thread, ev_started;
	bool host_check;
	/* The control API (--api-sock), and what it sees of the VM. */
	struct api *api;
	struct api_vm avm;
	/* Before the VM runs (the API waits for InstanceStart), an exit request
	 * is kept here; once it runs, vm_request_exit takes it. lock also keeps
	 * a signal out while the API builds the VM. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool vm_live, pre_exit, start_failed;
	int pre_status;
	char pre_reason[160];
	struct timespec pre_at;
};

/* End the run with status: the VM's exit once it runs, else the wait for
 * InstanceStart's. */
static void run_exit(struct run_ctx *r, int status, const char *reason)
{
	pthread_mutex_lock(&r->lock);
	if (r->vm_live) {
		pthread_mutex_unlock(&r->lock);
		vm_request_exit(&r->vm, status, "%s", reason);
		return;
	}
	if (!r->pre_exit) {
		r->pre_exit = true;
		r->pre_status = status;
		snprintf(r->pre_reason, sizeof(r->pre_reason), "%s", reason);
		clock_gettime(CLOCK_MONOTONIC, &r->pre_at);
		pthread_cond_broadcast(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
}

/*
 * Termination signals are taken by a thread of their own, not the event
 * loop: a guest that keeps a device busy delays the loop's callbacks, never
 * the exit request (issue 10). Every other thread has them blocked.
 */
static void *signal_thread(void *arg)
{
	struct run_ctx *r = arg;
	siginfo_t si;

	pthread_setname_np(pthread_self(), "signals");
	for (;;) {
		int sig = sigwaitinfo(&r->sigs, &si), old;
		char why[64];

		if (sig < 0)
			continue; /* EINTR; cancellation ends us at teardown */
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
		snprintf(why, sizeof(why), "stopped by signal %s", strsignal(sig));
		run_exit(r, 128 + sig, why);
		pthread_setcancelstate(old, NULL);
	}
	return NULL;
}

/* Signals to their thread (blocked here, before any other thread exists to
 * inherit them: they never interrupt a vCPU) and the event loop. */
static int run_prepare(struct run_ctx *r, char *err, size_t errlen)
{
	int ret;

	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	sigemptyset(&r->sigs);
	sigaddset(&r->sigs, SIGINT);
	sigaddset(&r->sigs, SIGTERM);
	sigaddset(&r->sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &r->sigs, NULL);
	ret = pthread_create(&r->sig_thread, NULL, signal_thread, r);
	if (ret) {
		snprintf(err, errlen, "signal thread: %s", strerror(ret));
		return -ret;
	}
	r->have_sig_thread = true;
	r->ev = event_new();
	if (!r->ev) {
		snprintf(err, errlen, "cannot create the event loop: %s", strerror(errno));
		return -ENOMEM;
	}
	return 0;
}

static int run_setup(struct run_ctx *r, char *err, size_t errlen)
{
	const struct boot_cfg *b = &r->cfg.boot;
	int ret;

	log_debug("config loaded, %u plugins found", r->reg.n);
	if (r->host_check && r->cfg.host_check && b->format != BOOT_FLAT &&
	    !arch_host_can_boot_linux(err, errlen)) {
		snprintf(err + strlen(err), errlen - strlen(err),
			 " (or pass --no-host-check to try anyway)");
		return -ENODEV;
	}
	ret = vm_create(&r->vm, &r->cfg, err, errlen);
	r->have_vm = true;
	r->vm.ev = r->ev;
	if (ret)
		return ret;
	log_debug("VM created with %" PRIu64 " MiB of RAM", r->cfg.memory_mib);
	ret = devices_create_all(&r->vm, &r->cfg, &r->insts, &r->n_insts, err, errlen);
	if (ret)
		return ret;
	log_debug("%u devices created", r->n_insts);
	ret = arch_boot_load(&r->vm, b, err, errlen);
	if (ret)
		return ret;
	ret = vm_create_vcpus(&r->vm, err, errlen);
	if (ret)
		return ret;
	log_debug("%u vCPUs set up", r->cfg.vcpus);
	/* After the vCPUs: arm64's FDT needs their MPIDRs, its vGIC all of them. */
	ret = arch_describe(&r->vm, err, errlen);
	if (ret)
		return ret;
	if (!r->ev_started) {
		ret = event_start(r->ev);
		if (ret) {
			snprintf(err, errlen, "event loop thread: %s", strerror(-ret));
			return ret;
		}
		r->ev_started = true;
	}
	log_info("booting %s: %u vCPU%s, %" PRIu64 " MiB, %u device%s", b->kernel, r->cfg.vcpus,
		 r->cfg.vcpus == 1 ? "" : "s", r->cfg.memory_mib, r->n_insts,
		 r->n_insts == 1 ? "" : "s");
	if (b->format != BOOT_FLAT)
		log_info("kernel command line: %s", b->cmdline);
	return vm_start(&r->vm, err, errlen);
}

static void run_teardown(struct run_ctx *r)
{
	if (r->have_sig_thread) {
		pthread_cancel(r->sig_thread); /* sigwaitinfo is a cancellation point */
		pthread_join(r->sig_thread, NULL);
	}
	if (r->have_vm)
		vm_stop_vcpus(&r->vm);
	if (r->ev)
		event_stop(r->ev);
	api_close(r->api); /* the loop is stopped: no request is being served */
	devices_destroy_all(r->insts, r->n_insts);
	devices_tty_restore();
	if (r->ev)
		event_free(r->ev);
	if (r->have_vm)
		vm_destroy(&r->vm);
	plan_free(&r->cfg);
	registry_free(&r->reg);
}

/*
 * InstanceStart (the API, on the event-loop thread): plan the tree the API
 * built, then create and boot the VM as `cubicle run` does. A plan error
 * changes nothing (the client may fix its objects and start again); a
 * failure after that leaves a VM half made, so later starts are refused.
 */
static int api_start(void *ctx, const struct cnode *root, char *err, size_t errlen)
{
	struct run_ctx *r = ctx;
	int ret;

	pthread_mutex_lock(&r->lock);
	if (r->start_failed || r->pre_exit) {
		pthread_mutex_unlock(&r->lock);
		return errf(err, errlen, -EBUSY, "%s",
			    r->pre_exit ? "cubicle is stopping"
					: "an earlier InstanceStart failed part way; start a new cubicle");
	}
	ret = plan_build(&r->cfg, root, "", NULL, &r->reg, err, errlen);
	if (ret) {
		/* The arena keeps the failed tree until exit; a retry builds
		 * anew beside it. */
		memset(&r->cfg.boot, 0, sizeof(r->cfg.boot));
		r->cfg.devs = NULL;
		r->cfg.n_devs = 0;
		pthread_mutex_unlock(&r->lock);
		return ret;
	}
	ret = run_setup(r, err, errlen);
	if (ret) {
		r->start_failed = r->have_vm; /* else nothing was made: try again */
		pthread_mutex_unlock(&r->lock);
		log_err("InstanceStart: %s", err);
		return ret;
	}
	r->vm_live = true;
	r->avm.insts = r->insts;
	r->avm.n_insts = r->n_insts;
	r->avm.machine = &r->vm;
	clock_gettime(CLOCK_MONOTONIC, &r->avm.live);
	r->avm.running = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static int api_set_paused(void *ctx, bool on, char *err, size_t errlen)
{
	struct run_ctx *r = ctx;
	int ret;

	if (!r->vm_live)
		return errf(err, errlen, -EINVAL, "no VM is running");
	if (!on) {
		ret = vm_resume(&r->vm, err, errlen);
		event_pause(r->ev, false);
		if (!ret)
			log_info("resumed through the API");
		return ret;
	}
	ret = vm_pause(&r->vm, err, errlen);
	if (ret)
		return ret;
	event_pause(r->ev, true);
	log_info("paused through the API");
	return 0;
}

static void api_stop(void *ctx, int status)
{
	run_exit(ctx, status, "stopped through the API");
}

/*
 * The control API: with json (Firecracker's --config-file), its sections
 * are applied and the VM started first; then, with sock, the API is served
 * there (the loop starts now if no VM started it). Without sock the API
 * serves nothing (--no-api) and exists only for the JSON file.
 */
static int run_api(struct run_ctx *r, const char *sock, const char *id, bool preboot,
		   const char *json, char *err, size_t errlen)
{
	int ret;

	r->avm.reg = &r->reg;
	r->avm.ar = &r->cfg.ar;
	r->avm.start = preboot ? api_start : NULL;
	r->avm.stop = api_stop;
	r->avm.set_paused = api_set_paused;
	r->avm.ctx = r;
	r->avm.id = id;
	clock_gettime(CLOCK_MONOTONIC, &r->avm.started);
	r->api = api_new_detached(&r->avm);
	if (!r->api)
		return errf(err, errlen, -ENOMEM, "API: out of memory");
	api_set_loop(r->api, r->ev); /* PUT /metrics' timer, before or after it serves */
	if (json) {
		ret = api_load_fc_json(r->api, json, err, errlen);
		if (ret)
			return ret;
	}
	if (!sock)
		return 0;
	if (!r->ev_started) {
		ret = event_start(r->ev);
		if (ret)
			return errf(err, errlen, ret, "event loop thread: %s", strerror(-ret));
		r->ev_started = true;
	}
	return api_listen(r->api, sock, r->ev, err, errlen);
}

/* Milliseconds from *t (CLOCK_MONOTONIC) to now. */
static long ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)(now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

static int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "set", required_argument, NULL, 's' },
		{ "plugin-dir", required_argument, NULL, 'P' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "no-host-check", no_argument, NULL, 'H' },
		{ "api-sock", required_argument, NULL, 'a' },
		{ "id", required_argument, NULL, 'i' },
		{ "config-file", required_argument, NULL, 'C' },
		{ "no-api", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *sets[MAX_OPTS], *dirs[MAX_OPTS];
	const char *sock = NULL, *id = NULL, *config, *json = NULL;
	bool no_api = false;
	unsigned n_sets = 0, n_dirs = 0;
	int cli_level = -1, c, status;
	struct run_ctx r = { .host_check = true };
	char err[1024] = "", exit_reason[sizeof(r.vm.exit_reason)];
	struct timespec exit_at;

	while ((c = getopt_long(argc, argv, "s:P:l:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (n_sets == MAX_OPTS)
				return usage_error("too many --set options (%s)", optarg);
			sets[n_sets++] = optarg;
			break;
		case 'P':
			if (n_dirs == MAX_OPTS)
				return usage_error("too many --plugin-dir options (%s)", optarg);
			dirs[n_dirs++] = optarg;
			break;
		case 'l':
			cli_level = log_level_parse(optarg);
			if (cli_level < 0)
				return usage_error("--log-level %s: expected err, warn, info or debug",
						   optarg);
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
		case 'h':
			return usage(stdout, 0);
		default:
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
	if (!config && n_sets)
		return usage_error("%s", "--set needs a CONFIG file (a libconfig one)");
	if (cli_level >= 0)
		log_set_level(cli_level);
	if (load_registry(&r.reg, dirs, n_dirs, CUB_LOG_WARN) < 0)
		return VM_EXIT_ERROR;
	/* The whole VM description is checked before any plugin code runs. */
	if (config && plan_load(&r.cfg, config, sets, n_sets, &r.reg, err, sizeof(err))) {
		log_err("%s", err);
		plan_free(&r.cfg);
		registry_free(&r.reg);
		return VM_EXIT_ERROR;
	}
	if (config)
		log_set_level(cli_level >= 0 ? cli_level : r.cfg.log_level);
	/* The config's api group, unless the command line says otherwise. */
	if (config && !sock && !no_api)
		sock = r.cfg.api_socket;
	if (config && !id)
		id = r.cfg.api_id;
	if (run_prepare(&r, err, sizeof(err)) ||
	    ((sock || json) && run_api(&r, sock, id, !config, json, err, sizeof(err)))) {
		log_err("%s", err);
		run_teardown(&r);
		return VM_EXIT_ERROR;
	}
	if (config) {
		int ret;

		pthread_mutex_lock(&r.lock);
		ret = run_setup(&r, err, sizeof(err));
		if (!ret) {
			r.vm_live = true;
			r.avm.insts = r.insts;
			r.avm.n_insts = r.n_insts;
			r.avm.machine = &r.vm;
			clock_gettime(CLOCK_MONOTONIC, &r.avm.live);
			r.avm.running = true;
		}
		pthread_mutex_unlock(&r.lock);
		if (ret) {
			log_err("%s", err);
			if (r.have_vm)
				vm_request_exit(&r.vm, VM_EXIT_ERROR, "setup failed");
			run_teardown(&r);
			return VM_EXIT_ERROR;
		}
	}
	/* A signal before the VM ran is kept as pre_exit; after, the VM's. */
	pthread_mutex_lock(&r.lock);
	while (!r.vm_live && !r.pre_exit)
		pthread_cond_wait(&r.cond, &r.lock);
	if (r.vm_live && r.pre_exit)
		vm_request_exit(&r.vm, r.pre_status, "%s", r.pre_reason);
	pthread_mutex_unlock(&r.lock);
	if (r.vm_live) {
		status = vm_wait(&r.vm);
		snprintf(exit_reason, sizeof(exit_reason), "%s", r.vm.exit_reason);
		exit_at = r.vm.exit_at;
	} else {
		status = r.pre_status;
		snprintf(exit_reason, sizeof(exit_reason), "%s", r.pre_reason);
		exit_at = r.pre_at;
	}
	run_teardown(&r);
	/* After the teardown, so that the line tells how long stopping took:
	 * from the request (a signal, the guest, a device) to every vCPU
	 * joined and every device destroyed. */
	log_msg(status ? CUB_LOG_WARN : CUB_LOG_INFO, NULL, "%s: exit status %d (stopped in %ld ms)",
		exit_reason, status, ms_since(&exit_at));
	return status;
}

/* ---- plugins ---- */

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
		else if (prm->type == CUB_P_STORAGE || prm->type == CUB_P_NET)
			snprintf(def, sizeof(def), "(optional)");
		else if (prm->type == CUB_P_STR || prm->type == CUB_P_PATH ||
			 prm->type == CUB_P_ENUM || prm->type == CUB_P_STRV)
			snprintf(def, sizeof(def), "= \"%s\"", prm->def);
		else
			snprintf(def, sizeof(def), "= %s", prm->def);
		printf("    %-14s %-7s %-18s %s\n", prm->name, loader_ptype_name(prm->type), def,
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
	if (d->n_methods)
		printf("  methods:\n");
	for (unsigned i = 0; i < d->n_methods; i++)
		printf("    %-14s (%s)  %s\n", d->methods[i].name, d->methods[i].sig,
		       d->methods[i].doc ? d->methods[i].doc : "");
}

static int cmd_plugins(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "plugin-dir", required_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *dirs[MAX_OPTS];
	unsigned n_dirs = 0;
	struct registry reg = { 0 };
	int c, status = 0;

	while ((c = getopt_long(argc, argv, "P:h", opts, NULL)) != -1) {
		if (c == 'P' && n_dirs < MAX_OPTS)
			dirs[n_dirs++] = optarg;
		else if (c == 'h')
			return usage(stdout, 0);
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
		describe(p);
		loader_close(p);
		return 0;
	}
	if (load_registry(&reg, dirs, n_dirs, CUB_LOG_WARN) < 0)
		return VM_EXIT_ERROR;
	if (optind < argc) {
		unsigned found = 0;

		for (unsigned i = 0; i < reg.n; i++) {
			if (!strcmp(reg.p[i]->d->name, argv[optind])) {
				describe(reg.p[i]);
				found++;
			}
		}
		if (!found) {
			log_err("no plugin named '%s' (run `cubicle plugins` to list them)",
				argv[optind]);
			status = VM_EXIT_ERROR;
		}
	} else if (!reg.n) {
		log_err("no plugins found; use --plugin-dir or CUBICLE_PLUGIN_PATH");
		status = VM_EXIT_ERROR;
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
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = ".";
	struct registry reg = { 0 };
	int c, status;

	while ((c = getopt_long(argc, argv, "d:h", opts, NULL)) != -1) {
		if (c == 'd')
			dir = optarg;
		else if (c == 'h')
			return usage(stdout, 0);
		else
			return bad_option("check-host", argv);
	}
	if (optind != argc)
		return usage_error("%s", "'check-host' takes no arguments (use --dir DIR)");
	if (load_registry(&reg, NULL, 0, CUB_LOG_WARN) < 0)
		return VM_EXIT_ERROR;
	status = hostcheck_report(stdout, dir, &reg) ? VM_EXIT_ERROR : 0;
	registry_free(&reg);
	return status;
}

int main(int argc, char **argv)
{
	const char *cmd;

	clock_mark_start();
	/* A console whose reader went away is the device's business (EPIPE). */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2)
		return usage_error("%s", "missing COMMAND: run, plugins, check-host or disk");
	cmd = argv[1];
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
	if (!strcmp(cmd, "plugins"))
		return cmd_plugins(argc - 1, argv + 1);
	if (!strcmp(cmd, "check-host"))
		return cmd_check_host(argc - 1, argv + 1);
	if (!strcmp(cmd, "disk"))
		return helper_exec("tools/disk", "cubicle-disk", argc - 1, argv + 1);
	if (!strcmp(cmd, "ctl"))
		return helper_exec("tools/ctl", "cubicle-ctl", argc - 1, argv + 1);
	return usage_error("unknown command '%s'", cmd);
}
