/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `cubicle template build NAME CONFIG`: boot a VM whose guest runs
 * cubicle-agent, wait until the agent answers, pause, snapshot: the
 * snapshot is the template sandboxes of `cubicle serve` are cloned from.
 * Also `template list` and `template rm`.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <libconfig.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileclone.h"
#include "oci.h"
#include "registry.h"
#include "plancheck.h"
#include "serve.h"
#include "template.h"
#include "unixconn.h"
#include "vmm.h"

static void tusage(FILE *f)
{
	fputs("Usage: cubicle template build NAME CONFIG [--rootfs DIR | --ext4 IMAGE | --oci ARCHIVE |\n"
	      "                                             --image REF] [OPTIONS]\n"
	      "       cubicle template pull REF DIR\n"
	      "       cubicle template list [--state DIR]\n"
	      "       cubicle template rm NAME [--state DIR]\n"
	      "\n"
	      "build boots the VM of CONFIG (a libconfig VM file whose guest runs\n"
	      "cubicle-agent without a token, with a virtio-vsock device), waits until\n"
	      "the agent answers, pauses it and snapshots it into\n"
	      "DIR/templates/NAME: `cubicle serve` clones its sandboxes from there\n"
	      "(templateID NAME; \"base\" when a create names none).\n"
	      "\n"
	      "With a root file system, CONFIG gives the kernel, the initramfs (one\n"
	      "scripts/build-initramfs.sh --agent made, with virtio_blk) and the machine;\n"
	      "the template's root is then an ext4 disk (virtio-blk \"root\", cloned per\n"
	      "sandbox) and the agent runs from it (cubicle.root= on the command line):\n"
	      "      --rootfs DIR     an ext4 image made of folder DIR (mke2fs -d; owners kept)\n"
	      "      --ext4 IMAGE     a copy of an ext4 image\n"
	      "      --oci ARCHIVE    an OCI image archive (oci-archive) or `docker save`\n"
	      "                       tarball, its layers unpacked (whiteouts honoured, owners\n"
	      "                       kept; needs root)\n"
	      "      --image REF      image REF pulled from its registry (as `pull` below),\n"
	      "                       then unpacked as --oci\n"
	      "      --disk-size MIB  the image made for --rootfs/--oci/--image (default: its\n"
	      "                       files\n"
	      "                       plus a quarter plus 256 MiB)\n"
	      "\n"
	      "  -d, --state DIR     serve's state folder (default /var/lib/cubicle/serve)\n"
	      "  -s, --set PATH=VAL  override a value of CONFIG (as cubicle run)\n"
	      "      --wait SECONDS  how long the agent may take to answer (default 300)\n"
	      "      --force         replace a template of that name\n"
	      "      --jail-user UID:GID  boot it jailed (cubicle run --jail) as UID:GID\n"
	      "                       (numbers, not 0; needs root), as `cubicle serve\n"
	      "                       --jail-user` runs its sandboxes; the snapshot it\n"
	      "                       writes is checked and made root's\n"
	      "      --jail-cgroup DIR  the jailed VMM's parent cgroup (default\n"
	      "                       /sys/fs/cgroup/cubicle)\n"
	      "\n"
	      "pull unpacks image REF ([HOST[:PORT]/]NAME[:TAG][@DIGEST], as docker names\n"
	      "it: debian:12 is registry-1.docker.io's library/debian:12) into DIR, an\n"
	      "empty or new folder, for linux and this machine's architecture, every blob\n"
	      "checked against its digest (needs root: owners are kept). The registry's\n"
	      "user name and password, when it wants them, come from the environment:\n"
	      "CUBICLE_REGISTRY_USER and CUBICLE_REGISTRY_PASSWORD. A registry on this\n"
	      "machine (localhost, 127.x, [::1]) is asked over plain HTTP, others over\n"
	      "HTTPS.\n",
	      f);
}

/* The uds_path of the VM's vsock device, from its API (GET /vm/config),
 * asked again until the VM is made (at most a minute). */
static int vsock_path(struct sandbox *s, char *out, size_t len)
{
	char sock[300];
	double t0 = now_ms();

	sbx_file(s, "api.sock", false, sock, sizeof(sock));
	for (; now_ms() - t0 < 60000 && vmm_alive(s); usleep(100000)) {
		char *body = NULL;
		const char *p;
		unsigned st = 0;
		json_t *j = NULL;
		int fd = unix_connect(sock), ret;

		if (fd < 0)
			continue;
		ret = hio_call(fd, "GET", "/vm/config", NULL, NULL, 5000, &st, &body);
		close(fd);
		if (!ret && st == 200)
			j = json_loads(body ? body : "", 0, NULL);
		free(body);
		p = json_string_value(json_object_get(json_object_get(j, "vsock"), "uds_path"));
		if (p && strlen(p) < len) {
			strcpy(out, p);
			json_decref(j);
			return 0;
		}
		json_decref(j);
	}
	return -1;
}

/* ---- root file systems: an ext4 image in the build folder ---- */

static unsigned long long tree_bytes;

static int du_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)p, (void)flag, (void)f;
	tree_bytes += (((unsigned long long)st->st_size + 4095) & ~4095ULL) + 512;
	return 0;
}

/* Runs ARGV (argv[0] searched in /sbin, /usr/sbin, then PATH) with its
 * output to LOG; 0 when it exits 0. */
static int run_tool(char *const argv[], int log, char *msg, size_t len)
{
	const struct spawn_opts o = { .out = log, .group = SPAWN_SAME_GROUP };
	const char *const dirs[] = { "/sbin/", "/usr/sbin/", "" };
	char p[64];
	pid_t pid;
	int st, ret = ENOENT;

	for (unsigned i = 0; ret == ENOENT && i < sizeof(dirs) / sizeof(*dirs); i++) {
		snprintf(p, sizeof(p), "%s%s", dirs[i], argv[0]);
		ret = spawn_child(&pid, p, argv, &o);
	}
	if (ret)
		return snprintf(msg, len, "%s: %s%s", argv[0], strerror(ret),
				ret == ENOENT ? " (is e2fsprogs installed?)" : ""), -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	snprintf(msg, len, "%s failed (%s %d; its output is in the build log)", argv[0],
		 WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return -1;
}

/* IMG: an ext4 file system of MIB (0: sized from the files) holding DIR. */
static int make_ext4(const char *dir, const char *img, unsigned mib, int log, char *msg, size_t len)
{
	char size[32];
	char *argv[] = { "mke2fs", "-q", "-F", "-t", "ext4", "-m", "0", "-L", "cubicle-root",
			 "-d", (char *)dir, (char *)img, size, NULL };
	struct stat st;

	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return snprintf(msg, len, "%s: %s", dir, errno ? strerror(errno) : "not a folder"), -1;
	tree_bytes = 0;
	if (nftw(dir, du_one, 64, FTW_PHYS))
		return snprintf(msg, len, "%s: %s", dir, strerror(errno)), -1;
	if (!mib)
		mib = (unsigned)((tree_bytes + tree_bytes / 4) >> 20) + 256;
	else if (((unsigned long long)mib << 20) < tree_bytes + (8u << 20))
		return snprintf(msg, len, "--disk-size %u MiB is too small for %s (%llu MiB of files)", mib, dir,
				tree_bytes >> 20), -1;
	snprintf(size, sizeof(size), "%uM", mib);
	fprintf(stderr, "cubicle template: making a %u MiB ext4 image of %s (%llu MiB of files)\n", mib, dir,
		tree_bytes >> 20);
	return run_tool(argv, log, msg, len);
}

/* IMG: a reflink or sparse copy of SRC, which must hold an ext2/3/4 file system. */
static int copy_ext4(const char *src, const char *img, char *msg, size_t len)
{
	unsigned char magic[2];
	int in = open(src, O_RDONLY | O_CLOEXEC);
	struct fc_opts o = { .fallback = FC_FALLBACK_COPY, .durable = true }; /* a template lasts */
	struct fc_result res;
	struct stat st;
	bool ok;

	if (in < 0)
		return snprintf(msg, len, "%s: %s", src, strerror(errno)), -1;
	ok = !fstat(in, &st) && S_ISREG(st.st_mode) && pread(in, magic, 2, 1024 + 56) == 2 &&
	     magic[0] == 0x53 && magic[1] == 0xef;
	close(in);
	if (!ok)
		return snprintf(msg, len, "%s is not an ext4 image (no ext2/3/4 superblock magic at byte 1080)",
				src), -1;
	fprintf(stderr, "cubicle template: copying %s (%lld MiB)\n", src, (long long)st.st_size >> 20);
	return fc_clone_path(src, img, &o, &res, msg, len) ? -1 : 0;
}

/* Whether a setting of a VM file names a file (and so is relative to the file's folder). */
static bool path_key(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n && (!strcmp(name, "kernel") || !strcmp(name, "initrd") || !strcmp(name, "socket") ||
		     !strcmp(name, "dtb") || !strcmp(name, "firmware") ||
		     (n >= 4 && !strcmp(name + n - 4, "path")) || (n >= 4 && !strcmp(name + n - 4, "file")));
}

/* The relative paths of S's tree made absolute against DIR: the derived
 * file lives in another folder. */
static void absolute_paths(config_setting_t *s, const char *dir)
{
	for (int i = 0; i < config_setting_length(s); i++) {
		config_setting_t *c = config_setting_get_elem(s, (unsigned)i);
		const char *v;

		if (config_setting_is_aggregate(c)) {
			absolute_paths(c, dir);
			continue;
		}
		v = config_setting_type(c) == CONFIG_TYPE_STRING ? config_setting_get_string(c) : NULL;
		if (v && *v && *v != '/' && *v != '~' && strncmp(v, "${", 2) && path_key(config_setting_name(c))) {
			char *abs;

			if (asprintf(&abs, "%s/%s", dir, v) > 0) {
				config_setting_set_string(c, abs);
				free(abs);
			}
		}
	}
}

/* OUT: CONFIG with a virtio-blk device "root" on IMG (raw) and
 * cubicle.root=/dev/vdX on the kernel command line. */
static int root_config(const char *cfg, const char *out, const char *img, char *msg, size_t len)
{
	config_t cf;
	config_setting_t *devs, *d, *b, *boot, *cl;
	char real[PATH_MAX], *dir, *line = NULL;
	unsigned blks = 0;
	int ret = -1;

	config_init(&cf);
	if (!realpath(cfg, real)) {
		snprintf(msg, len, "%s: %s", cfg, strerror(errno));
		goto out;
	}
	if (!config_read_file(&cf, real)) {
		snprintf(msg, len, "%s:%d: %s", config_error_file(&cf) ? config_error_file(&cf) : cfg,
			 config_error_line(&cf), config_error_text(&cf));
		goto out;
	}
	dir = strrchr(real, '/');
	*dir = 0;
	absolute_paths(config_root_setting(&cf), *real ? real : "/");
	devs = config_lookup(&cf, "devices");
	if (!devs)
		devs = config_setting_add(config_root_setting(&cf), "devices", CONFIG_TYPE_LIST);
	if (!devs || !config_setting_is_aggregate(devs) || config_setting_is_group(devs)) {
		snprintf(msg, len, "%s: devices is not a list", cfg);
		goto out;
	}
	for (int i = 0; i < config_setting_length(devs); i++) {
		const char *t = NULL, *id = NULL;

		d = config_setting_get_elem(devs, (unsigned)i);
		config_setting_lookup_string(d, "type", &t);
		config_setting_lookup_string(d, "id", &id);
		if (id && !strcmp(id, "root")) {
			snprintf(msg, len, "%s:%d: a device is called \"root\" already (the root disk's name)", cfg,
				 config_setting_source_line(d));
			goto out;
		}
		blks += t && !strcmp(t, "virtio-blk");
	}
	if (blks >= 26) {
		snprintf(msg, len, "%s: too many virtio-blk devices", cfg);
		goto out;
	}
	boot = config_lookup(&cf, "boot");
	cl = boot ? config_setting_get_member(boot, "cmdline") : NULL;
	if (!cl || config_setting_type(cl) != CONFIG_TYPE_STRING) {
		snprintf(msg, len, "%s: boot.cmdline is needed (the initramfs reads cubicle.root= there)", cfg);
		goto out;
	}
	if (strstr(config_setting_get_string(cl), "cubicle.root=")) {
		snprintf(msg, len, "%s:%d: boot.cmdline has a cubicle.root= already", cfg, config_setting_source_line(cl));
		goto out;
	}
	/* the root disk is the last virtio-blk device: the blks before it come first */
	if (asprintf(&line, "%s cubicle.root=/dev/vd%c", config_setting_get_string(cl), 'a' + blks) < 0)
		goto oom;
	config_setting_set_string(cl, line);
	d = config_setting_add(devs, NULL, CONFIG_TYPE_GROUP);
	if (!d || !config_setting_set_string(config_setting_add(d, "type", CONFIG_TYPE_STRING), "virtio-blk") ||
	    !config_setting_set_string(config_setting_add(d, "id", CONFIG_TYPE_STRING), "root") ||
	    !(b = config_setting_add(d, "backend", CONFIG_TYPE_GROUP)) ||
	    !config_setting_set_string(config_setting_add(b, "type", CONFIG_TYPE_STRING), "raw") ||
	    !config_setting_set_string(config_setting_add(b, "path", CONFIG_TYPE_STRING), img))
		goto oom;
	if (!config_write_file(&cf, out)) {
		snprintf(msg, len, "%s: %s", out, strerror(errno));
		goto out;
	}
	ret = 0;
	goto out;
oom:
	snprintf(msg, len, "out of memory");
out:
	free(line);
	config_destroy(&cf);
	return ret;
}

static int build(int argc, char **argv, const char *state)
{
	static const struct option lo[] = {
		{ "state", required_argument, NULL, 'd' },
		{ "set", required_argument, NULL, 's' },
		{ "wait", required_argument, NULL, 'w' },
		{ "force", no_argument, NULL, 'f' },
		{ "rootfs", required_argument, NULL, 'r' },
		{ "ext4", required_argument, NULL, 'e' },
		{ "oci", required_argument, NULL, 'o' },
		{ "image", required_argument, NULL, 'i' },
		{ "disk-size", required_argument, NULL, 'z' },
		{ "jail-user", required_argument, NULL, 'J' },
		{ "jail-cgroup", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *av[80], tdir[300], final[300], old[320], vs[256], snap[320], msg[600], body[400];
	char *sets[30];
	unsigned n_sets = 0;
	char api[320], jroot[300], jids[32], host_vs[600];
	unsigned n = 0, wait_s = 300, disk_mib = 0, cfg_at;
	bool force = false;
	const char *rootsrc = NULL;
	char root_kind = 0, img[PATH_MAX] = "";
	struct sandbox s = { .child = true, .log_name = "build.log" };
	const char *name, *cfg;
	double t0 = now_ms();
	pid_t vpid;
	int c, lfd;

	av[n++] = (char *)srv.cubicle;
	av[n++] = "run";
	while ((c = getopt_long(argc, argv, "d:s:h", lo, NULL)) != -1) {
		switch (c) {
		case 'd': state = optarg; break;
		case 's':
			if (n + 4 >= 60)
				return fprintf(stderr, "cubicle template: too many --set\n"), 2;
			av[n++] = "--set";
			av[n++] = optarg;
			sets[n_sets++] = optarg;
			break;
		case 'w': wait_s = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'f': force = true; break;
		case 'r':
		case 'e':
		case 'o':
		case 'i':
			if (root_kind)
				return fprintf(stderr, "cubicle template: one of --rootfs, --ext4, --oci and --image\n"), 2;
			root_kind = (char)c;
			rootsrc = optarg;
			break;
		case 'z': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || !v || v > (1ul << 22))
				return fprintf(stderr, "cubicle template: --disk-size '%s' is not a size in MiB\n",
					       optarg), 2;
			disk_mib = (unsigned)v;
			break;
		}
		case 'J': srv.jail_user = optarg; break;
		case 'C': srv.jail_cgroup = optarg; break;
		case 'h': tusage(stdout); return 0;
		default: tusage(stderr); return 2;
		}
	}
	if (srv.jail_cgroup && !srv.jail_user)
		return fprintf(stderr, "cubicle template: --jail-cgroup goes with --jail-user\n"), 2;
	if (srv.jail_user && (c = serve_jail_check("cubicle template")))
		return c == -2 ? 2 : 1;
	if (srv.jail_first)
		return fprintf(stderr, "cubicle template: --jail-user %s: one UID:GID here (a range is serve's, a uid per sandbox)\n",
			       srv.jail_user), 2;
	if (argc - optind != 2) {
		tusage(stderr);
		return 2;
	}
	name = argv[optind];
	cfg = argv[optind + 1];
	if (!template_name_ok(name))
		return fprintf(stderr, "cubicle template: '%s' is not a template name (no '/', ' ' or leading '.')\n",
			       name), 2;
	if (disk_mib && root_kind != 'r' && root_kind != 'o' && root_kind != 'i')
		return fprintf(stderr, "cubicle template: --disk-size goes with --rootfs, --oci or --image\n"), 2;
	if (root_kind == 'i') {
		struct reg_ref rr;

		if (registry_parse(rootsrc, &rr, msg, sizeof(msg)))
			return fprintf(stderr, "cubicle template: --image: %s\n", msg), 2;
	}
	if ((root_kind == 'o' || root_kind == 'i') && !oci_available)
		return fprintf(stderr, "cubicle template: --%s: this cubicle was built without libarchive and nettle "
			       "(install libarchive-dev and nettle-dev and configure again)\n",
			       root_kind == 'o' ? "oci" : "image"), 1;
	if ((root_kind == 'o' || root_kind == 'i') && geteuid() != 0)
		return fprintf(stderr, "cubicle template: --%s needs root (the image's files keep their owners; "
			       "its layers are written in a chroot)\n", root_kind == 'o' ? "oci" : "image"), 1;
	if (mkdir(state, 0700) && errno != EEXIST)
		return fprintf(stderr, "cubicle template: %s: %s\n", state, strerror(errno)), 1;
	snprintf(final, sizeof(final), "%s/templates", state);
	mkdir(final, 0700);
	snprintf(final, sizeof(final), "%s/templates/%s", state, name);
	if (!access(final, F_OK) && !force)
		return fprintf(stderr, "cubicle template: %s exists (--force replaces it)\n", final), 1;
	snprintf(tdir, sizeof(tdir), "%s/templates/.%s.build-%d", state, name, (int)getpid());
	if (mkdir(tdir, 0700))
		return fprintf(stderr, "cubicle template: %s: %s\n", tdir, strerror(errno)), 1;
	snprintf(s.dir, sizeof(s.dir), "%s", tdir);
	snprintf(s.id, sizeof(s.id), "template");
	if (srv.jail_user) {
		/* the jail needs its folder's absolute path */
		char real[PATH_MAX];

		errno = 0;
		if (!realpath(tdir, real) || strlen(real) >= sizeof(s.dir) - 16) {
			fprintf(stderr, "cubicle template: %s: %s\n", tdir,
				strerror(errno ? errno : ENAMETOOLONG));
			rmdir(tdir);
			return 1;
		}
		snprintf(s.dir, sizeof(s.dir), "%s", real);
		s.jailed = true;
	}
	/* where the VMM writes the snapshot (inside its jail: /vm/snap) */
	sbx_file(&s, "snap", true, snap, sizeof(snap));
	cfg_at = n;
	av[n++] = (char *)cfg;
	av[n++] = "--api-sock";
	sbx_file(&s, "api.sock", true, api, sizeof(api));
	av[n++] = api;
	if (s.jailed) {
		snprintf(jroot, sizeof(jroot), "%s/j", s.dir);
		vmm_jail_args(av, &n, jroot, 0, 0, jids, sizeof(jids));
	}
	av[n] = NULL;
	snprintf(msg, sizeof(msg), "%s/build.log", tdir);
	lfd = open(msg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (lfd < 0) {
		fprintf(stderr, "cubicle template: %s: %s\n", msg, strerror(errno));
		goto fail;
	}
	if (root_kind) {
		static char tcfg[PATH_MAX];
		char real[PATH_MAX], sub[PATH_MAX + 8], work[PATH_MAX + 8];
		int r;

		if (!realpath(tdir, real)) {
			fprintf(stderr, "cubicle template: %s: %s\n", tdir, strerror(errno));
			goto fail;
		}
		snprintf(img, sizeof(img), "%s/root.ext4", real);
		snprintf(sub, sizeof(sub), "%s/rootfs", real);
		snprintf(work, sizeof(work), "%s/oci", real);
		/* the derived VM file first: its errors come before any long work */
		snprintf(tcfg, sizeof(tcfg), "%s/vm.cfg", real);
		r = root_config(cfg, tcfg, img, msg, sizeof(msg));
		if (!r && root_kind == 'e') {
			r = copy_ext4(rootsrc, img, msg, sizeof(msg));
		} else if (!r && (root_kind == 'o' || root_kind == 'i')) {
			char dg[REG_DIGEST_MAX];

			if (root_kind == 'o')
				fprintf(stderr, "cubicle template: unpacking %s\n", rootsrc);
			r = mkdir(sub, 0755) || mkdir(work, 0700) ? (snprintf(msg, sizeof(msg), "%s: %s", sub,
									       strerror(errno)), -1)
			    : root_kind == 'i' ? registry_pull(rootsrc, getenv("CUBICLE_REGISTRY_USER"),
								getenv("CUBICLE_REGISTRY_PASSWORD"), work, dg, msg,
								sizeof(msg))
					       : 0;
			if (!r)
				r = oci_unpack(root_kind == 'o' ? rootsrc : NULL, sub, work, msg, sizeof(msg));
			if (!r) { /* the image's Env, WorkingDir...: what a build from it starts with (serve) */
				char ip[PATH_MAX + 16];
				json_t *ic;

				msg[0] = 0;
				ic = oci_image_config(work, msg, sizeof(msg));
				snprintf(ip, sizeof(ip), "%s/image.json", real);
				if (!ic)
					fprintf(stderr, "cubicle template: the image's config is not kept: %s\n", msg);
				else if (json_dump_file(ic, ip, JSON_INDENT(1)))
					fprintf(stderr, "cubicle template: %s: cannot write it\n", ip);
				json_decref(ic);
			}
			rm_tree(work);
			if (!r)
				r = make_ext4(sub, img, disk_mib, lfd, msg, sizeof(msg));
			rm_tree(sub);
		} else if (!r) {
			r = make_ext4(rootsrc, img, disk_mib, lfd, msg, sizeof(msg));
		}
		if (r) {
			/* nothing booted: nothing worth keeping */
			fprintf(stderr, "cubicle template: %s\n", msg);
			close(lfd);
			rm_tree(tdir);
			return 1;
		}
		cfg = tcfg;
		av[cfg_at] = tcfg;
		snprintf(msg, sizeof(msg), "%s/build.log", tdir);
		/* the jailed VMM writes to its root disk as the jail's uid */
		if (s.jailed && chown(img, srv.jail_uid, srv.jail_gid)) {
			fprintf(stderr, "cubicle template: %s: %s\n", img, strerror(errno));
			goto fail;
		}
	}
	fprintf(stderr, "cubicle template: booting %s (log %s)\n", cfg, msg);
	if ((c = spawn_child(&s.pid, srv.cubicle, av,
			     &(struct spawn_opts){ .out = lfd, .group = SPAWN_SAME_GROUP }))) {
		s.pid = -1;
		fprintf(stderr, "cubicle template: %s: %s\n", srv.cubicle, strerror(c));
		goto fail;
	}
	s.pid_start = proc_start_time(s.pid, NULL);
	if (vsock_path(&s, vs, sizeof(vs))) {
		vmm_log_tail(&s, msg, sizeof(msg));
		fprintf(stderr, "cubicle template: the VM of %s has no vsock device or its API did not answer%s%s\n",
			cfg, *msg ? ": " : "", msg);
		goto fail;
	}
	/* the agent's /health, through the config's own vsock socket (from
	 * outside a jail: where the jail made it) */
	snprintf(host_vs, sizeof(host_vs), "%s%s%s", s.jailed ? s.dir : "", s.jailed ? "/j" : "", vs);
	srv.agent_wait_ms = wait_s * 1000;
	if (vmm_wait_health(&s, host_vs, msg, sizeof(msg))) {
		fprintf(stderr, "cubicle template: %s\n", msg);
		goto fail;
	}
	fprintf(stderr, "cubicle template: the agent answered after %.1f s; snapshotting\n",
		(now_ms() - t0) / 1e3);
	snprintf(body, sizeof(body), "{\"snapshot_path\":\"%s\"}", snap);
	if (vmm_api(&s, "PATCH", "/vm", "{\"state\":\"Paused\"}", 10000, msg, sizeof(msg)) ||
	    vmm_api(&s, "PUT", "/snapshot/create", body, 600000, msg, sizeof(msg))) {
		fprintf(stderr, "cubicle template: %s\n", msg);
		goto fail;
	}
	vpid = s.pid;
	vmm_end(&s);
	if (s.jailed) {
		/* out of the jail, once its VMM is gone (its cgroup removed: no
		 * process of the jail is left): DIR/j/vm/snap -> DIR/snap */
		char jsnap[320], out[320], cg[300];

		snprintf(cg, sizeof(cg), "%s/vm-%d", srv.jail_cgroup, (int)vpid);
		if (!access(cg, F_OK)) {
			fprintf(stderr, "cubicle template: %s is still there: a process of the jail may live\n", cg);
			goto fail;
		}
		sbx_file(&s, "snap", false, jsnap, sizeof(jsnap));
		snprintf(out, sizeof(out), "%s/snap", s.dir);
		if (adopt_tree(jsnap, out, msg, sizeof(msg))) {
			fprintf(stderr, "cubicle template: %s\n", msg);
			goto fail;
		}
		/* and what it names: what the build's VM file and --set named */
		snprintf(out, sizeof(out), "%s/snap/manifest.json", s.dir);
		json_t *m = json_load_file(out, 0, NULL);
		int bad = m ? plan_check_config(m, av[cfg_at], sets, n_sets, msg, sizeof(msg)) != 0
			    : (snprintf(msg, sizeof(msg), "not JSON"), 1);

		json_decref(m);
		if (bad) {
			fprintf(stderr, "cubicle template: %s: %s\n", out, msg);
			goto fail;
		}
		rm_tree(jroot);
	} else {
		unlink(api);
	}
	if (*img)
		unlink(img); /* the snapshot holds its own copy of the root disk */
	if (!access(final, F_OK)) {
		snprintf(old, sizeof(old), "%s.old-%d", final, (int)getpid());
		if (rename(final, old))
			return fprintf(stderr, "cubicle template: %s: %s\n", final, strerror(errno)), 1;
		if (rename(tdir, final)) {
			rename(old, final);
			fprintf(stderr, "cubicle template: %s: %s\n", final, strerror(errno));
			goto fail;
		}
		rm_tree(old);
	} else if (rename(tdir, final)) {
		fprintf(stderr, "cubicle template: %s: %s\n", final, strerror(errno));
		goto fail;
	}
	printf("template %s: %s/snap (%.1f s)\n", name, final, (now_ms() - t0) / 1e3);
	return 0;
fail:
	vmm_end(&s);
	if (lfd >= 0)
		close(lfd);
	fprintf(stderr, "cubicle template: the build's files are kept in %s\n", tdir);
	return 1;
}

/* `cubicle template pull REF DIR`: the image's files in DIR. */
static int pull(int argc, char **argv)
{
	char msg[1200], dg[REG_DIGEST_MAX], dir[PATH_MAX], work[PATH_MAX + 16];
	struct reg_ref rr;
	DIR *d;
	struct dirent *e;
	int r;

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		tusage(stdout);
		return 0;
	}
	if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') {
		fprintf(stderr, "Usage: cubicle template pull REF DIR (cubicle template --help says more)\n");
		return 2;
	}
	if (registry_parse(argv[1], &rr, msg, sizeof(msg)))
		return fprintf(stderr, "cubicle template pull: %s\n", msg), 2;
	if (!oci_available)
		return fprintf(stderr, "cubicle template pull: this cubicle was built without libarchive and nettle "
			       "(install libarchive-dev and nettle-dev and configure again)\n"), 1;
	if (geteuid() != 0)
		return fprintf(stderr, "cubicle template pull: needs root (the image's files keep their owners; "
			       "its layers are written in a chroot)\n"), 1;
	if (mkdir(argv[2], 0755) && errno != EEXIST)
		return fprintf(stderr, "cubicle template pull: %s: %s\n", argv[2], strerror(errno)), 1;
	if (!realpath(argv[2], dir) || !(d = opendir(dir)))
		return fprintf(stderr, "cubicle template pull: %s: %s\n", argv[2], strerror(errno)), 1;
	while ((e = readdir(d)) && (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")))
		;
	closedir(d);
	if (e)
		return fprintf(stderr, "cubicle template pull: %s is not empty\n", argv[2]), 1;
	/* the blobs beside DIR, not in it: DIR holds the image's files alone */
	snprintf(work, sizeof(work), "%s.pull-%d", dir, (int)getpid());
	if (mkdir(work, 0700))
		return fprintf(stderr, "cubicle template pull: %s: %s\n", work, strerror(errno)), 1;
	r = registry_pull(argv[1], getenv("CUBICLE_REGISTRY_USER"), getenv("CUBICLE_REGISTRY_PASSWORD"), work, dg,
			  msg, sizeof(msg));
	if (!r && (r = oci_unpack(NULL, dir, work, msg, sizeof(msg))) && (rm_tree(dir) || mkdir(dir, 0755)))
		fprintf(stderr, "cubicle template pull: %s: part of the image is left in it\n", dir);
	rm_tree(work);
	if (r)
		return fprintf(stderr, "cubicle template pull: %s\n", msg), 1;
	printf("%s\n", dg);
	return 0;
}

int template_main(int argc, char **argv)
{
	const char *state = "/var/lib/cubicle/serve";
	const char *verb = argc > 1 ? argv[1] : NULL;

	srv.cubicle = getenv("CUBICLE_BIN");
	if (!verb || !strcmp(verb, "--help") || !strcmp(verb, "-h") || !strcmp(verb, "help")) {
		tusage(verb ? stdout : stderr);
		return verb ? 0 : 2;
	}
	if (!strcmp(verb, "build")) {
		if (!srv.cubicle)
			return fprintf(stderr, "cubicle template: run it as `cubicle template`\n"), 1;
		optind = 1;
		return build(argc - 1, argv + 1, state);
	}
	if (!strcmp(verb, "pull"))
		return pull(argc - 1, argv + 1);
	if (!strcmp(verb, "list") || !strcmp(verb, "rm")) {
		char dir[300];
		const char *name = NULL;
		DIR *d;
		struct dirent *e;

		for (int i = 2; i < argc; i++) {
			if ((!strcmp(argv[i], "--state") || !strcmp(argv[i], "-d")) && i + 1 < argc)
				state = argv[++i];
			else if (!name && argv[i][0] != '-')
				name = argv[i];
			else
				return fprintf(stderr, "cubicle template %s: unexpected '%s'\n", verb, argv[i]), 2;
		}
		if (!strcmp(verb, "rm")) {
			if (!name || strchr(name, '/') || name[0] == '.')
				return fprintf(stderr, "cubicle template rm: which template?\n"), 2;
			snprintf(dir, sizeof(dir), "%s/templates/%s", state, name);
			if (access(dir, F_OK))
				return fprintf(stderr, "cubicle template rm: %s: %s\n", dir, strerror(errno)), 1;
			/* running sandboxes keep what they map of it: the files go, their inodes stay */
			return rm_tree(dir) ? 1 : 0;
		}
		snprintf(dir, sizeof(dir), "%s/templates", state);
		if (!(d = opendir(dir)))
			return fprintf(stderr, "cubicle template list: %s: %s\n", dir, strerror(errno)), 1;
		while ((e = readdir(d))) {
			char rp[600];
			json_t *rec;

			if (e->d_name[0] == '.')
				continue;
			/* a snapshot of a sandbox (serve's POST /sandboxes/ID/snapshots) or
			 * a build through the SDK (build.c) says so */
			snprintf(rp, sizeof(rp), "%s/%s/snapshot.json", dir, e->d_name);
			rec = json_load_file(rp, 0, NULL);
			if (rec && json_object_get(rec, "build"))
				printf("%s\tbuilt through the SDK from %s (build %s)\n", e->d_name,
				       json_string_value(json_object_get(json_object_get(rec, "build"), "from")) ?: "?",
				       json_string_value(json_object_get(json_object_get(rec, "build"), "buildID")) ?: "?");
			else if (rec)
				printf("%s\tsnapshot of sandbox %s (template %s)\n", e->d_name,
				       json_string_value(json_object_get(rec, "source")) ?: "?",
				       json_string_value(json_object_get(rec, "template")) ?: "?");
			else
				printf("%s\n", e->d_name);
			json_decref(rec);
		}
		closedir(d);
		return 0;
	}
	fprintf(stderr, "cubicle template: unknown verb '%s' (build, pull, list, rm)\n", verb);
	return 2;
}
