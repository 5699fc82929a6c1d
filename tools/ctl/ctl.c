/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cubicle-ctl: `cubicle ctl SOCKET VERB ...`, a client of the control API
 * (libcurl over the Unix socket, jansson for the bodies). A program of its
 * own, exec'd by cubicle, so that cubicle itself links no HTTP client.
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/promjson.h"

static const char usage_text[] =
	"Usage: cubicle ctl [--json] SOCKET VERB [ARG...]\n"
	"\n"
	"Drive a running cubicle through its control API (cubicle run --api-sock SOCKET).\n"
	"\n"
	"Verbs:\n"
	"  info                       the instance: id, state, version\n"
	"  devices                    the VM's devices, their backends and methods\n"
	"  plugins                    the plugins that cubicle found\n"
	"  call ID METHOD [ARG...]    call a device's (or its backend's) control method;\n"
	"                             arguments are typed by the method's signature\n"
	"  pause, resume              pause the VM (vCPUs and devices stop, its clocks\n"
	"                             hold) or resume it (PATCH /vm)\n"
	"  snapshot DIR [--diff|--release]  write a snapshot of the paused VM into the\n"
	"                             folder DIR (PUT /snapshot/create): Full, or --diff\n"
	"                             only what changed since the last one (needs\n"
	"                             machine.track_dirty_pages); --release: then free\n"
	"                             guest RAM, mapped from DIR until written (pause to disk)\n"
	"  rollback DIR               roll the VM back to snapshot DIR in place, pausing\n"
	"                             it meanwhile (PUT /snapshot/rollback)\n"
	"  load DIR [--resume]        make the VM of a cubicle started with --api-sock\n"
	"                             alone from snapshot DIR (PUT /snapshot/load)\n"
	"  config                     the VM as the API knows it (GET /vm/config)\n"
	"  metrics                    counters and gauges in Prometheus' text format\n"
	"                             (GET /metrics); --json: an object of series\n"
	"  stop                       end the VM and cubicle (PUT /stop), then wait up\n"
	"                             to 30 s for the socket to go away\n"
	"  get PATH                   GET any endpoint, print the JSON\n"
	"  put|patch PATH JSON        PUT or PATCH any endpoint with a JSON body\n"
	"\n"
	"  --json   print the API's JSON instead of text\n"
	"\n"
	"Exit status: 0 done, 1 the API refused (its fault_message is printed) or\n"
	"could not be reached, 2 bad usage.\n";

struct buf {
	char *p;
	size_t n;
};

static size_t on_data(char *d, size_t sz, size_t n, void *arg)
{
	struct buf *b = arg;
	char *p = realloc(b->p, b->n + sz * n + 1);

	if (!p)
		return 0;
	memcpy(p + b->n, d, sz * n);
	b->p = p;
	b->n += sz * n;
	b->p[b->n] = '\0';
	return sz * n;
}

static bool json_out;

/* One request; the reply's JSON (or NULL) in *out, its text in *raw when
 * raw is not NULL (free it); the HTTP status, or -1 when the socket could
 * not be reached (message printed). */
static long request_raw(const char *sock, const char *method, const char *path, const char *body,
			json_t **out, char **raw)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	struct buf b = { 0 };
	char url[1024];
	long status = -1;
	CURLcode rc;

	*out = NULL;
	if (!c)
		return fprintf(stderr, "cubicle ctl: libcurl failed to start\n"), -1;
	snprintf(url, sizeof(url), "http://localhost%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	if (body) {
		h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	}
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK)
		fprintf(stderr, "cubicle ctl: %s: %s\n", sock, curl_easy_strerror(rc));
	else
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (b.n)
		*out = json_loadb(b.p, b.n, 0, NULL);
	if (raw)
		*raw = b.p ? b.p : strdup("");
	else
		free(b.p);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return status;
}

static long request(const char *sock, const char *method, const char *path, const char *body,
		    json_t **out)
{
	return request_raw(sock, method, path, body, out, NULL);
}

/* Print the reply (or its fault) and turn the status into an exit status. */
static int finish(long status, json_t *r, void (*text)(json_t *))
{
	int ret = 0;

	if (status < 0) {
		ret = 1;
	} else if (status >= 400) {
		const char *m = json_string_value(json_object_get(r, "fault_message"));

		fprintf(stderr, "cubicle ctl: %ld: %s\n", status, m ? m : "(no message)");
		ret = 1;
	} else if (r && (json_out || !text)) {
		json_dumpf(r, stdout, JSON_INDENT(2));
		putchar('\n');
	} else if (r) {
		text(r);
	}
	json_decref(r);
	return ret;
}

static void text_info(json_t *r)
{
	printf("%s: %s (%s %s)\n", json_string_value(json_object_get(r, "id")),
	       json_string_value(json_object_get(r, "state")),
	       json_string_value(json_object_get(r, "app_name")),
	       json_string_value(json_object_get(r, "vmm_version")));
}

static void print_methods(const char *indent, json_t *ms)
{
	size_t i;
	json_t *m;

	json_array_foreach(ms, i, m)
		printf("%s%-16s (%s)  %s\n", indent, json_string_value(json_object_get(m, "name")),
		       json_string_value(json_object_get(m, "signature")),
		       json_string_value(json_object_get(m, "doc")));
}

static void text_devices(json_t *r)
{
	size_t i, k;
	json_t *d, *b;

	json_array_foreach(r, i, d) {
		printf("%s\n", json_string_value(json_object_get(d, "name")));
		print_methods("    ", json_object_get(d, "methods"));
		json_array_foreach(json_object_get(d, "backends"), k, b) {
			printf("  %s = %s\n", json_string_value(json_object_get(b, "key")),
			       json_string_value(json_object_get(b, "name")));
			print_methods("      ", json_object_get(b, "methods"));
		}
	}
	if (!json_array_size(r))
		printf("(no devices: the VM has not started)\n");
}

static void text_plugins(json_t *r)
{
	size_t i;
	json_t *p;

	json_array_foreach(r, i, p)
		printf("%-16s %-8s %s\n", json_string_value(json_object_get(p, "name")),
		       json_string_value(json_object_get(p, "kind")),
		       json_string_value(json_object_get(p, "summary")));
}

static void text_reply(json_t *r)
{
	printf("%s\n", json_string_value(json_object_get(r, "reply")));
}

/* The signature of device id's method name (its backends' too), from GET /devices. */
static const char *signature(json_t *devs, const char *id, const char *name)
{
	const char *dot = strchr(name, '.');
	size_t i, k, j;
	json_t *d, *b, *m;

	json_array_foreach(devs, i, d) {
		if (strcmp(json_string_value(json_object_get(d, "id")), id))
			continue;
		if (!dot)
			json_array_foreach(json_object_get(d, "methods"), j, m)
				if (!strcmp(json_string_value(json_object_get(m, "name")), name))
					return json_string_value(json_object_get(m, "signature"));
		json_array_foreach(json_object_get(d, "backends"), k, b) {
			const char *key = json_string_value(json_object_get(b, "key"));
			const char *n = name;

			if (dot) {
				if (strncmp(key, name, (size_t)(dot - name)) || key[dot - name])
					continue;
				n = dot + 1;
			}
			json_array_foreach(json_object_get(b, "methods"), j, m)
				if (!strcmp(json_string_value(json_object_get(m, "name")), n))
					return json_string_value(json_object_get(m, "signature"));
		}
	}
	return NULL;
}

static int call(const char *sock, int argc, char **argv)
{
	char path[512], *body;
	const char *sig;
	json_t *devs, *args, *r;
	long st;
	int ret;

	if (argc < 2)
		return fprintf(stderr, "cubicle ctl: call needs ID METHOD [ARG...]\n"), 2;
	st = request(sock, "GET", "/devices", NULL, &devs);
	if (st != 200)
		return finish(st, devs, NULL);
	sig = signature(devs, argv[0], argv[1]);
	if (!sig) {
		/* Let the API say what is wrong (no such device or method). */
		sig = "";
	} else if (strlen(sig) != (size_t)(argc - 2)) {
		fprintf(stderr, "cubicle ctl: %s %s takes %zu argument%s (signature \"%s\"), not %d\n",
			argv[0], argv[1], strlen(sig), strlen(sig) == 1 ? "" : "s", sig, argc - 2);
		json_decref(devs);
		return 2;
	}
	args = json_array();
	for (int i = 2; i < argc; i++) {
		char c = sig[0] ? sig[i - 2] : 's', *end;
		json_t *v;

		if (c == 'b' && (!strcmp(argv[i], "true") || !strcmp(argv[i], "false")))
			v = json_boolean(!strcmp(argv[i], "true"));
		else if (c == 's' || c == 'b')
			v = json_string(argv[i]);
		else if (c == 't')
			v = json_string(argv[i]); /* the API takes u64 beyond 2^63 as text */
		else {
			long long x;

			errno = 0;
			x = strtoll(argv[i], &end, 0);
			v = errno || *end || !*argv[i] ? json_string(argv[i]) : json_integer(x);
		}
		json_array_append_new(args, v);
	}
	r = json_pack("{s:o}", "args", args);
	body = r ? json_dumps(r, JSON_COMPACT) : NULL;
	json_decref(r);
	if (!body) {
		json_decref(devs);
		return fprintf(stderr, "cubicle ctl: out of memory\n"), 1;
	}
	snprintf(path, sizeof(path), "/devices/%s/methods/%s", argv[0], argv[1]);
	st = request(sock, "PUT", path, body, &r);
	free(body);
	json_decref(devs);
	ret = finish(st, r, text_reply);
	return ret;
}

/* One request, its reply printed (text, or JSON when text is NULL). */
static int simple(const char *sock, const char *method, const char *path, const char *body,
		  void (*text)(json_t *))
{
	json_t *r;
	long st = request(sock, method, path, body, &r);

	return finish(st, r, text);
}

/* GET /metrics: the text as it comes, or (--json) an object of series. */
static int metrics(const char *sock)
{
	char *text = NULL;
	json_t *r, *obj;
	long st = request_raw(sock, "GET", "/metrics", NULL, &r, &text);

	if (st != 200) {
		free(text);
		return finish(st, r, NULL);
	}
	json_decref(r);
	if (!json_out) {
		fputs(text, stdout);
		free(text);
		return 0;
	}
	obj = prom_to_json(text);
	free(text);
	if (!obj)
		return fprintf(stderr, "cubicle ctl: out of memory\n"), 1;
	json_dumpf(obj, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
	putchar('\n');
	json_decref(obj);
	return 0;
}

static void text_rollback(json_t *r)
{
	printf("rolled back to %s in %.3f ms\n", json_string_value(json_object_get(r, "snapshot_path")),
	       json_real_value(json_object_get(r, "ms")));
}

/* PUT /snapshot/{create,load,rollback} with the folder (an absolute path:
 * cubicle may run elsewhere), timed. */
static int snap_verb(const char *sock, const char *verb, const char *dir, const char *flag)
{
	char *abs = realpath(dir, NULL), *parent, *slash, *body;
	json_t *r, *req;
	struct timespec t0, t1;
	long st;
	int ret;

	if (!abs && !strcmp(verb, "snapshot")) { /* a new folder: its parent must exist */
		parent = strdup(dir);
		slash = parent ? strrchr(parent, '/') : NULL;
		if (slash)
			*slash = '\0';
		abs = parent ? realpath(slash ? (*parent ? parent : "/") : ".", NULL) : NULL;
		if (abs) {
			char *full;

			if (asprintf(&full, "%s/%s", abs, slash ? slash + 1 : dir) < 0)
				full = NULL;
			free(abs);
			abs = full;
		}
		free(parent);
	}
	if (!abs)
		return fprintf(stderr, "cubicle ctl: %s: %s\n", dir, strerror(errno)), 1;
	req = json_pack("{s:s}", "snapshot_path", abs);
	if (req && flag && !strcmp(flag, "--diff"))
		json_object_set_new(req, "snapshot_type", json_string("Diff"));
	else if (req && flag)
		json_object_set_new(req, !strcmp(verb, "load") ? "resume_vm" : "release_memory",
				    json_true());
	body = req ? json_dumps(req, 0) : NULL;
	json_decref(req);
	free(abs);
	if (!body)
		return fprintf(stderr, "cubicle ctl: out of memory\n"), 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	st = request(sock, "PUT",
		     !strcmp(verb, "snapshot") ? "/snapshot/create"
		     : !strcmp(verb, "load") ? "/snapshot/load" : "/snapshot/rollback",
		     body, &r);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	free(body);
	ret = finish(st, r, text_rollback);
	if (!ret && !json_out && st == 204)
		printf("%s %s: done in %.1f ms\n", verb, dir,
		       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	return ret;
}

/* PUT /stop, then wait for cubicle to remove its socket. */
static int stop(const char *sock)
{
	json_t *r;
	long st = request(sock, "PUT", "/stop", NULL, &r);
	struct timespec t = { 0, 50 * 1000 * 1000 };

	if (st != 204)
		return finish(st, r, NULL);
	json_decref(r);
	for (int i = 0; i < 600; i++) {
		if (access(sock, F_OK))
			return 0;
		nanosleep(&t, NULL);
	}
	fprintf(stderr, "cubicle ctl: %s: stop was accepted, but the socket is still there after 30 s\n",
		sock);
	return 1;
}

int main(int argc, char **argv)
{
	const char *sock, *verb;
	int i = 1, ret;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--json")) {
		json_out = true;
		i++;
	}
	if (argc - i < 2) {
		fputs(usage_text, stderr);
		return 2;
	}
	sock = argv[i];
	verb = argv[i + 1];
	argc -= i + 2;
	argv += i + 2;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!strcmp(verb, "info") && !argc)
		ret = simple(sock, "GET", "/", NULL, text_info);
	else if (!strcmp(verb, "devices") && !argc)
		ret = simple(sock, "GET", "/devices", NULL, text_devices);
	else if (!strcmp(verb, "plugins") && !argc)
		ret = simple(sock, "GET", "/plugins", NULL, text_plugins);
	else if (!strcmp(verb, "pause") && !argc)
		ret = simple(sock, "PATCH", "/vm", "{\"state\":\"Paused\"}", NULL);
	else if (!strcmp(verb, "resume") && !argc)
		ret = simple(sock, "PATCH", "/vm", "{\"state\":\"Resumed\"}", NULL);
	else if (!strcmp(verb, "snapshot") &&
		 (argc == 1 || (argc == 2 && (!strcmp(argv[1], "--release") || !strcmp(argv[1], "--diff")))))
		ret = snap_verb(sock, verb, argv[0], argc == 2 ? argv[1] : NULL);
	else if (!strcmp(verb, "rollback") && argc == 1)
		ret = snap_verb(sock, verb, argv[0], NULL);
	else if (!strcmp(verb, "load") && (argc == 1 || (argc == 2 && !strcmp(argv[1], "--resume"))))
		ret = snap_verb(sock, verb, argv[0], argc == 2 ? argv[1] : NULL);
	else if (!strcmp(verb, "config") && !argc)
		ret = simple(sock, "GET", "/vm/config", NULL, NULL);
	else if (!strcmp(verb, "call"))
		ret = call(sock, argc, argv);
	else if (!strcmp(verb, "metrics") && !argc)
		ret = metrics(sock);
	else if (!strcmp(verb, "stop") && !argc)
		ret = stop(sock);
	else if (!strcmp(verb, "get") && argc == 1)
		ret = simple(sock, "GET", argv[0], NULL, NULL);
	else if ((!strcmp(verb, "put") || !strcmp(verb, "patch")) && argc == 2)
		ret = simple(sock, !strcmp(verb, "put") ? "PUT" : "PATCH", argv[0], argv[1], NULL);
	else {
		fprintf(stderr, "cubicle ctl: unknown verb or wrong arguments: %s (see --help)\n", verb);
		ret = 2;
	}
	curl_global_cleanup();
	return ret;
}
