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
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serve.h"
#include "template.h"
#include "vmm.h"

static void tusage(FILE *f)
{
	fputs("Usage: cubicle template build NAME CONFIG [OPTIONS]\n"
	      "       cubicle template list [--state DIR]\n"
	      "       cubicle template rm NAME [--state DIR]\n"
	      "\n"
	      "build boots the VM of CONFIG (a libconfig VM file whose guest runs\n"
	      "cubicle-agent without a token, with a virtio-vsock device), waits until\n"
	      "the agent answers, pauses it and snapshots it into\n"
	      "DIR/templates/NAME: `cubicle serve` clones its sandboxes from there\n"
	      "(templateID NAME; \"base\" when a create names none).\n"
	      "\n"
	      "  -d, --state DIR     serve's state folder (default /var/lib/cubicle/serve)\n"
	      "  -s, --set PATH=VAL  override a value of CONFIG (as cubicle run)\n"
	      "      --wait SECONDS  how long the agent may take to answer (default 300)\n"
	      "      --force         replace a template of that name\n",
	      f);
}

/* The uds_path of the VM's vsock device, from its API (GET /vm/config),
 * asked again until the VM is made (at most a minute). */
static int vsock_path(struct sandbox *s, char *out, size_t len)
{
	char sock[300];

	snprintf(sock, sizeof(sock), "%s/api.sock", s->dir);
	for (int i = 0; i < 600 && vmm_alive(s); i++, usleep(100000)) {
		char *body = NULL;
		const char *p;
		unsigned st = 0;
		json_t *j = NULL;
		int fd = unix_connect(sock), ret;

		if (fd < 0)
			continue;
		ret = hio_call(fd, "GET", "/vm/config", NULL, NULL, 10000, &st, &body);
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

static int build(int argc, char **argv, const char *state)
{
	static const struct option lo[] = {
		{ "state", required_argument, NULL, 'd' },
		{ "set", required_argument, NULL, 's' },
		{ "wait", required_argument, NULL, 'w' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *av[64], tdir[300], final[300], old[320], vs[256], snap[320], msg[600], body[400];
	unsigned n = 0, wait_s = 300;
	bool force = false;
	struct sandbox s = { .child = true };
	const char *name, *cfg;
	double t0 = now_ms();
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
			break;
		case 'w': wait_s = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'f': force = true; break;
		case 'h': tusage(stdout); return 0;
		default: tusage(stderr); return 2;
		}
	}
	if (argc - optind != 2) {
		tusage(stderr);
		return 2;
	}
	name = argv[optind];
	cfg = argv[optind + 1];
	if (!*name || strlen(name) > 60 || strpbrk(name, "/ ") || name[0] == '.')
		return fprintf(stderr, "cubicle template: '%s' is not a template name (no '/', ' ' or leading '.')\n",
			       name), 2;
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
	snprintf(snap, sizeof(snap), "%s/snap", tdir);
	av[n++] = (char *)cfg;
	av[n++] = "--api-sock";
	char api[320];

	snprintf(api, sizeof(api), "%s/api.sock", tdir);
	av[n++] = api;
	av[n] = NULL;
	snprintf(msg, sizeof(msg), "%s/build.log", tdir);
	lfd = open(msg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	fprintf(stderr, "cubicle template: booting %s (log %s)\n", cfg, msg);
	s.pid = lfd < 0 ? -1 : fork();
	if (s.pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		if (null < 0 || dup2(null, 0) < 0 || dup2(lfd, 1) < 0 || dup2(lfd, 2) < 0)
			_exit(127);
		execv(srv.cubicle, av);
		_exit(127);
	}
	if (s.pid < 0) {
		fprintf(stderr, "cubicle template: %s\n", strerror(errno));
		goto fail;
	}
	s.pid_start = proc_start_time(s.pid, NULL);
	if (vsock_path(&s, vs, sizeof(vs))) {
		vmm_log_tail(&s, msg, sizeof(msg));
		fprintf(stderr, "cubicle template: the VM of %s has no vsock device or its API did not answer%s%s\n",
			cfg, *msg ? ": " : "", msg);
		goto fail;
	}
	/* the agent's /health, through the config's own vsock socket */
	srv.agent_wait_ms = wait_s * 1000;
	if (vmm_wait_health(&s, vs, msg, sizeof(msg))) {
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
	vmm_end(&s);
	unlink(api);
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
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				printf("%s\n", e->d_name);
		closedir(d);
		return 0;
	}
	fprintf(stderr, "cubicle template: unknown verb '%s' (build, list, rm)\n", verb);
	return 2;
}
