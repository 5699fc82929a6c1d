/* SPDX-License-Identifier: Apache-2.0 */
/* The cubicle command line: usage, help, the dispatch to each command, and
 * check-host and compress; run and restore are in cli_run.c, plugins in
 * cli_plugins.c. Only the command line (these files) decides to exit the
 * process. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubicle-build.h"
#include "arch.h"
#include "helper.h"
#include "hostcheck.h"
#include "jail.h"
#include "log.h"
#include "run.h"
#include "snap/snapshot.h"
#include "cli.h"

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
	"  netns-pool VERB DIR fill, status or drain a pool of network namespaces\n"
	"                      made ahead for jails (--jail-netns-pool; root)\n"
	"  disk SUBCOMMAND     create or clone disk images (`cubicle disk help`)\n"
	"  ctl SOCKET VERB     drive a running cubicle's API (`cubicle ctl --help`)\n"
	"  exec VM -- CMD ...  run a command in the guest through cubicle-agent\n"
	"                      (-i stdin, -t pty; `cubicle exec --help`)\n"
	"  cp SRC DST          copy a file into or out of the guest, one side VM:PATH\n"
	"                      (`cubicle cp --help`)\n"
	"  serve               E2B's sandbox API on this host: a VMM per sandbox,\n"
	"                      cloned from a template (`cubicle serve --help`)\n"
	"  template build NAME CONFIG  boot CONFIG, snapshot it as a serve template\n"
	"  template pull REF DIR  unpack a container image from its registry\n"
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
	"                         VALUE, --jail-nofile N, --jail-fsize BYTES,\n"
	"                         --jail-netns-pool DIR (root)\n"
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
	"      --jail-netns-pool DIR  network namespaces made ahead for jails without\n"
	"                         a tap (--jail-netns-pool-size N, default 4)\n"
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
	"                         copies and sockets, are DIR/PATH from outside)\n"	"      --jail-foreign-ids FIRST-LAST  other jails' uids and gids: a path only\n"
	"                         the snapshot names that one of them owns is refused\n"
	"      --jail-trust DIR   a path only the snapshot names may lie in DIR\n"
	"                         though the jail's uid could not reach it; repeatable\n"
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

static const char help_netns_pool[] =
	"Usage: cubicle netns-pool fill POOL [--size N]\n"
	"       cubicle netns-pool status POOL\n"
	"       cubicle netns-pool drain POOL\n"
	"\n"
	"Keep the pool of network namespaces that jails without a tap take (run or\n"
	"restore --jail DIR --jail-netns-pool POOL; see cubicle(1), JAIL): fill it\n"
	"to N (1 to 64, default 4) ahead of the first start, print how many it\n"
	"holds, or unpin and remove every one and the folder. Root only. POOL is\n"
	"an absolute path of folders only root can change (no symbolic link).\n"
	"\n"
	"Exit status: 0 done; 1 an error (status: 1 also when there is no pool);\n"
	"2 bad usage.\n";

/* `cubicle CMD --help` and `cubicle help CMD` of a built-in command. */
int cmd_help(const char *cmd)
{
	static const struct { const char *name, *text; } pages[] = {
		{ "run", help_run }, { "restore", help_restore }, { "plugins", help_plugins },
		{ "check-host", help_check_host }, { "compress", help_compress },
		{ "netns-pool", help_netns_pool },
	};

	for (unsigned i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		if (!strcmp(cmd, pages[i].name)) {
			fputs(pages[i].text, stdout);
			return 0;
		}
	return usage(stdout, 0);
}

int usage_error(const char *fmt, ...)
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
int bad_option(const char *cmd, char **argv)
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

void scan_warn(const char *msg, void *arg)
{
	log_msg(*(int *)arg, NULL, "skipping plugin %s", msg);
}

int load_registry(struct registry *reg, char *const *dirs_cli, unsigned n, int warn_lvl)
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

/* --plugin-dir @dir names a folder: 0, or a usage error's exit status. */
int plugin_dir_opt(const char *dir)
{
	struct stat sb;

	if (stat(dir, &sb))
		return usage_error("--plugin-dir %s: %s", dir, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return usage_error("--plugin-dir %s: not a folder", dir);
	return 0;
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

/* `cubicle netns-pool fill|status|drain POOL` (jail_netns.c). */
static int cmd_netns_pool(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *verb, *dir;
	unsigned size = 4;
	bool sized = false;
	char err[1024] = "", *end;
	long v;
	int c, ret;

	while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_help("netns-pool");
		if (c != 'n')
			return bad_option("netns-pool", argv);
		errno = 0;
		v = strtol(optarg, &end, 10);
		if (errno || *end || !*optarg || v < 1 || v > 64)
			return usage_error("netns-pool: --size %s: expected 1 .. 64", optarg);
		size = (unsigned)v;
		sized = true;
	}
	if (optind + 2 != argc)
		return usage_error("%s", "'netns-pool' takes fill, status or drain, and the pool's folder");
	verb = argv[optind];
	dir = argv[optind + 1];
	if (strcmp(verb, "fill") && strcmp(verb, "status") && strcmp(verb, "drain"))
		return usage_error("netns-pool %s: expected fill, status or drain", verb);
	if (dir[0] != '/')
		return usage_error("netns-pool %s %s: expected an absolute folder path", verb, dir);
	if (sized && strcmp(verb, "fill"))
		return usage_error("netns-pool %s: --size is for fill", verb);
	if (geteuid() != 0) {
		log_err("netns-pool: root only (it makes and pins network namespaces)");
		return VM_EXIT_ERROR;
	}
	log_set_level(CUB_LOG_WARN);
	if (!strcmp(verb, "fill")) {
		int made = jail_netns_fill(dir, size); /* (its errors are logged) */

		if (made < 0)
			return VM_EXIT_ERROR;
		ret = jail_netns_count(dir, err, sizeof(err));
		if (ret < 0) {
			log_err("%s", err);
			return VM_EXIT_ERROR;
		}
		printf("%s: %d network namespace%s (%d made)\n", dir, ret, ret == 1 ? "" : "s",
		       made);
		return 0;
	}
	ret = !strcmp(verb, "status") ? jail_netns_count(dir, err, sizeof(err))
				       : jail_netns_drain(dir, err, sizeof(err));
	if (ret == -ENOENT) {
		log_err("netns-pool %s: %s: no pool there", verb, dir);
		return VM_EXIT_ERROR;
	}
	if (ret < 0) {
		log_err("%s", err);
		return VM_EXIT_ERROR;
	}
	if (!strcmp(verb, "status"))
		printf("%s: %d network namespace%s\n", dir, ret, ret == 1 ? "" : "s");
	else
		printf("%s: %d network namespace%s unpinned; the folder removed\n", dir, ret,
		       ret == 1 ? "" : "s");
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
	/* what `run --jail` execs itself as, outside the jail (jail.c) */
	if (!strcmp(cmd, "__jail-supervise"))
		return jail_supervise_main(argc, argv);
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
						    "compress", "plugins", "check-host",
						    "netns-pool", "help" };
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
	if (!strcmp(cmd, "netns-pool"))
		return cmd_netns_pool(argc - 1, argv + 1);
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
