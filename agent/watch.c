/* SPDX-License-Identifier: Apache-2.0 */
/*
 * filesystem.Filesystem's watches, on inotify: WatchDir (a server stream:
 * a start message, then one message an event, keepalives while idle) and
 * the polled CreateWatcher, GetWatcherEvents and RemoveWatcher. An event
 * names its entry relative to the watched directory ("a.txt", "sub/b.txt")
 * and has one type: CREATE (made or moved in), WRITE (written), REMOVE,
 * RENAME (moved away) or CHMOD (attributes). A recursive watch follows the
 * directories below, and those made or moved in later (entries made in one
 * before its watch is in place are not seen, as with any inotify watcher).
 * A directory on a network file system (network_fs) is refused unless the
 * request says allowNetworkMounts (envd 0.6.4). Bounded: WATCH_MAX watchers, WATCH_DIRS_MAX directories each, and a
 * polled watcher keeps WATCH_EVENTS_MAX events until asked; past that, or
 * while a stream's client does not read, the watcher stops reading inotify,
 * whose own queue then drops events (the kernel's overflow).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "agent.h"
#include "http.h"

#define WATCH_MAX 64
#define WATCH_DIRS_MAX 8192
#define WATCH_EVENTS_MAX 4096
#define WATCH_DEPTH_MAX 128 /* folders below the watched one a recursive watcher goes down */
#define WATCH_MASK                                                                           \
	(IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_ATTRIB | IN_ONLYDIR | \
	 IN_DONT_FOLLOW | IN_EXCL_UNLINK)

struct wdir {
	int wd;
	char *rel; /* "" for the watched directory itself */
};

struct watcher {
	struct watcher *next;
	struct watch w; /* the inotify fd */
	char *root;
	bool recursive, include_entry;
	struct wdir *dirs;
	unsigned n_dirs, cap_dirs;
	/* a stream's */
	struct conn *c;
	bool gone; /* its stream's connection closed: freed once the event loop's callback returns */
	struct rpc_pace pace;
	/* a folder moved away, until the next event says where to (its cookie) */
	char *moved_from;
	uint32_t move_cookie;
	/* a polled one's */
	char id[24];
	json_t *events;
};

static struct watcher *watchers;
static unsigned n_watchers, next_id;

/* Out of the list and the event loop: no event reaches it any more. */
static void watcher_unlink(struct watcher *x)
{
	struct watcher **pp;

	for (pp = &watchers; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			n_watchers--;
			break;
		}
	if (x->w.fd >= 0) {
		loop_del(&x->w);
		close(x->w.fd);
		x->w.fd = -1;
	}
}

static void watcher_destroy(void *arg)
{
	struct watcher *x = arg;

	for (unsigned i = 0; i < x->n_dirs; i++)
		free(x->dirs[i].rel);
	free(x->dirs);
	free(x->root);
	free(x->moved_from);
	json_decref(x->events);
	free(x);
}

static void watcher_free(struct watcher *x)
{
	watcher_unlink(x);
	watcher_destroy(x);
}

/* Whether what inotify says has somewhere to go: the stream's client
 * reads, or the polled watcher's events are under their bound. */
static bool has_room(const struct watcher *x)
{
	return x->c ? http_can_write(x->c) : json_array_size(x->events) < WATCH_EVENTS_MAX;
}

/* Reading inotify only while it has room. */
static void watcher_pace(struct watcher *x)
{
	uint32_t ev = has_room(x) ? EPOLLIN : 0;

	if (x->w.events != ev)
		loop_mod(&x->w, ev);
}

static struct wdir *dir_of(struct watcher *x, int wd)
{
	for (unsigned i = 0; i < x->n_dirs; i++)
		if (x->dirs[i].wd == wd)
			return &x->dirs[i];
	return NULL;
}

/* Watch the directory @rel, @depth folders below the root (and, recursive,
 * those below it down to WATCH_DEPTH_MAX): 0 or -errno (-ENOSPC past
 * WATCH_DIRS_MAX). A directory that went away meanwhile, or is not one, or
 * is followed already, is skipped. */
static int add_dir(struct watcher *x, const char *rel, unsigned depth)
{
	char path[PATH_MAX], sub[PATH_MAX];
	struct wdir *d;
	DIR *dh;
	struct dirent *de;
	int wd, rc = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s%s%s", x->root, *rel ? "/" : "", rel) >=
	    sizeof(path))
		return 0;
	wd = inotify_add_watch(x->w.fd, path, WATCH_MASK);
	if (wd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == EACCES ? 0 : -errno;
	if (dir_of(x, wd))
		return 0; /* followed already (a bind mount of a folder above: no loop) */
	if (x->n_dirs == WATCH_DIRS_MAX)
		return -ENOSPC;
	if (x->n_dirs == x->cap_dirs) {
		unsigned cap = x->cap_dirs ? 2 * x->cap_dirs : 8;
		struct wdir *nd = realloc(x->dirs, cap * sizeof(*nd));

		if (!nd)
			return -ENOMEM;
		x->dirs = nd;
		x->cap_dirs = cap;
	}
	d = &x->dirs[x->n_dirs];
	d->wd = wd;
	if (!(d->rel = strdup(rel)))
		return -ENOMEM;
	x->n_dirs++;
	if (!x->recursive || depth >= WATCH_DEPTH_MAX || !(dh = opendir(path)))
		return 0;
	while (!rc && (de = readdir(dh))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", de->d_name) <
		    sizeof(sub))
			rc = add_dir(x, sub, depth + 1);
	}
	closedir(dh);
	return rc;
}

/* Whether @rel is the folder @top or below it. */
static bool below(const char *rel, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(rel, top, n) && (!rel[n] || rel[n] == '/');
}

/* The folder @rel (and those below it) moved out of the tree: no longer
 * followed (moved back in, it is watched again). */
static void drop_dirs(struct watcher *x, const char *rel)
{
	for (unsigned i = 0; i < x->n_dirs;) {
		struct wdir *d = &x->dirs[i];

		if (!below(d->rel, rel)) {
			i++;
			continue;
		}
		inotify_rm_watch(x->w.fd, d->wd);
		free(d->rel);
		*d = x->dirs[--x->n_dirs];
	}
}

/* The folder @from moved to @to within the tree: it and those below it
 * keep their watches under the new names (what happens in them meanwhile
 * is already queued under their watches, and is named the new way). */
static void rename_dirs(struct watcher *x, const char *from, const char *to)
{
	size_t n = strlen(from);

	for (unsigned i = 0; i < x->n_dirs; i++) {
		struct wdir *d = &x->dirs[i];
		char *r;

		if (!below(d->rel, from))
			continue;
		if (asprintf(&r, "%s%s", to, d->rel + n) < 0)
			continue; /* out of memory: it keeps its old name */
		free(d->rel);
		d->rel = r;
	}
}

/* How many folders below the root @rel is ("a/b": 2). */
static unsigned depth_of(const char *rel)
{
	unsigned n = 1;

	for (; *rel; rel++)
		n += *rel == '/';
	return n;
}

static const char *event_type(uint32_t mask)
{
	if (mask & (IN_CREATE | IN_MOVED_TO))
		return "EVENT_TYPE_CREATE";
	if (mask & IN_MODIFY)
		return "EVENT_TYPE_WRITE";
	if (mask & IN_DELETE)
		return "EVENT_TYPE_REMOVE";
	if (mask & IN_MOVED_FROM)
		return "EVENT_TYPE_RENAME";
	if (mask & IN_ATTRIB)
		return "EVENT_TYPE_CHMOD";
	return NULL;
}

static void deliver(struct watcher *x, const char *name, const char *type)
{
	json_t *ev = json_pack("{s:s,s:s}", "name", name, "type", type);
	char path[PATH_MAX];
	json_t *e;

	if (!ev)
		return;
	if (x->include_entry &&
	    (size_t)snprintf(path, sizeof(path), "%s/%s", x->root, name) < sizeof(path) &&
	    (e = fs_entry(path)))
		json_object_set_new(ev, "entry", e);
	if (x->c)
		rpc_stream_msg(x->c, json_pack("{s:o}", "filesystem", ev));
	else
		json_array_append_new(x->events, ev);
}

/* The stream is over: its last message, the connection's next request. */
static void stream_end(struct watcher *x, const char *code, const char *msg)
{
	struct conn *c = x->c;

	http_set_ops(c, NULL, NULL);
	x->c = NULL;
	watcher_free(x);
	rpc_stream_end(c, code, msg);
}

/* A recursive watcher's folders as the event @ie (on the folder @name)
 * changes them: one made or moved in is followed; one moved away waits
 * for the next event, its move's other half when it stayed in the tree. */
static void follow(struct watcher *x, const struct inotify_event *ie, const char *name)
{
	if (ie->mask & IN_MOVED_TO && x->moved_from && ie->cookie == x->move_cookie) {
		rename_dirs(x, x->moved_from, name);
		free(x->moved_from);
		x->moved_from = NULL;
	} else if (ie->mask & (IN_CREATE | IN_MOVED_TO)) {
		add_dir(x, name, depth_of(name)); /* at a bound: not followed */
	} else if (ie->mask & IN_MOVED_FROM) {
		x->moved_from = strdup(name);
		x->move_cookie = ie->cookie;
		if (!x->moved_from)
			drop_dirs(x, name);
	}
}

static void inotify_cb(struct watch *w, uint32_t evs)
{
	struct watcher *x = (struct watcher *)((char *)w - offsetof(struct watcher, w));
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	(void)evs;
	/* an event sent to a client that has gone closes its connection, and
	 * that the watcher (x->gone): nothing of it is used after */
	while (!x->gone && has_room(x) && (n = read(w->fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n && !x->gone;) {
			const struct inotify_event *ie = (const struct inotify_event *)(void *)p;
			struct wdir *d = dir_of(x, ie->wd);
			const char *type = event_type(ie->mask);
			char name[PATH_MAX];

			p += sizeof(*ie) + ie->len;
			/* a folder moved away and not back in (the two come together) */
			if (x->moved_from && !((ie->mask & IN_MOVED_TO) && ie->cookie == x->move_cookie)) {
				drop_dirs(x, x->moved_from);
				free(x->moved_from);
				x->moved_from = NULL;
			}
			if (ie->mask & IN_IGNORED) { /* its directory is gone */
				if (d && !*d->rel) {
					if (x->c) {
						stream_end(x, NULL, NULL);
						return;
					}
				} else if (d) {
					free(d->rel);
					*d = x->dirs[--x->n_dirs];
				}
				continue;
			}
			if (!d || !ie->len || !type)
				continue;
			if ((size_t)snprintf(name, sizeof(name), "%s%s%s", d->rel, *d->rel ? "/" : "",
					     ie->name) >= sizeof(name))
				continue;
			if (x->recursive && (ie->mask & IN_ISDIR))
				follow(x, ie, name);
			deliver(x, name, type);
		}
	}
	if (!x->gone)
		watcher_pace(x);
}

/* The stream's connection closed: perhaps while one of its events was
 * being sent, inside inotify_cb, which must not find the watcher freed. */
static void stream_closed(struct conn *c)
{
	struct watcher *x = http_ctx(c);

	if (x) {
		x->c = NULL;
		x->gone = true;
		watcher_unlink(x);
		loop_defer(watcher_destroy, x);
	}
}

static void stream_writable(struct conn *c)
{
	struct watcher *x = http_ctx(c);

	if (x)
		watcher_pace(x);
}

static const struct conn_ops stream_ops = { .writable = stream_writable,
					    .closed = stream_closed };

/*
 * The network file system @path is on (inotify sees only what this guest
 * does there, not what other machines change), or NULL: NFS, SMB and CIFS,
 * FUSE (as envd counts them) and 9P, Ceph, AFS and Coda.
 */
static const char *network_fs(const char *path)
{
	static const struct {
		unsigned long magic;
		const char *name;
	} nets[] = {
		{ NFS_SUPER_MAGIC, "nfs" },   { SMB_SUPER_MAGIC, "smb" },   { CIFS_SUPER_MAGIC, "cifs" },
		{ SMB2_SUPER_MAGIC, "smb2" }, { FUSE_SUPER_MAGIC, "fuse" }, { V9FS_MAGIC, "9p" },
		{ CEPH_SUPER_MAGIC, "ceph" }, { AFS_SUPER_MAGIC, "afs" },   { CODA_SUPER_MAGIC, "coda" },
	};
	struct statfs sf;

	if (statfs(path, &sf))
		return NULL; /* the watch's own calls then say why */
	for (size_t i = 0; i < sizeof(nets) / sizeof(nets[0]); i++)
		if ((unsigned long)(unsigned int)sf.f_type == nets[i].magic)
			return nets[i].name;
	return NULL;
}

/* A watcher of the request's path: NULL after replying with the error. */
static struct watcher *watcher_new(struct conn *c, json_t *req, const struct user *u)
{
	char path[PATH_MAX];
	const char *net;
	struct watcher *x;
	struct stat st;
	int rc;

	if (fs_req_path(c, req, "path", u, path, sizeof(path)))
		return NULL;
	if (stat(path, &st)) {
		rpc_error(c, rpc_errno_code(errno), "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (!S_ISDIR(st.st_mode)) {
		rpc_error(c, "invalid_argument", "%s is not a directory", path);
		return NULL;
	}
	if (!json_is_true(json_object_get(req, "allowNetworkMounts")) && (net = network_fs(path))) {
		rpc_error(c, "invalid_argument",
			  "cannot watch %s: it is on a network file system (%s), where changes made elsewhere "
			  "send no events; allowNetworkMounts watches it anyway", path, net);
		return NULL;
	}
	if (n_watchers >= WATCH_MAX) {
		rpc_error(c, "resource_exhausted", "%d watchers already", WATCH_MAX);
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x || !(x->root = strdup(path))) {
		free(x);
		rpc_error(c, "resource_exhausted", "out of memory");
		return NULL;
	}
	x->recursive = json_is_true(json_object_get(req, "recursive"));
	x->include_entry = json_is_true(json_object_get(req, "includeEntry"));
	x->w.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	x->next = watchers;
	watchers = x;
	n_watchers++;
	rc = x->w.fd < 0 ? -errno : add_dir(x, "", 0);
	if (!rc && !x->n_dirs)
		rc = -ENOENT; /* gone since the stat */
	if (!rc)
		rc = loop_add(&x->w, x->w.fd, EPOLLIN, inotify_cb);
	else if (x->w.fd >= 0) {
		close(x->w.fd);
		x->w.fd = -1;
	}
	if (rc) {
		watcher_free(x);
		rpc_error(c, rc == -ENOSPC || rc == -EMFILE || rc == -ENOMEM ? "resource_exhausted" :
			  rpc_errno_code(-rc), "watching %s: %s", path,
			  rc == -ENOSPC ? "too many directories (the watcher's or the kernel's bound)" :
			  strerror(-rc));
		return NULL;
	}
	return x;
}

void fs_watch_dir(struct conn *c, json_t *req, const struct user *u)
{
	struct watcher *x = watcher_new(c, req, u);

	if (!x)
		return;
	x->c = c;
	rpc_pace_init(c, &x->pace, now_ms());
	http_set_ops(c, &stream_ops, x);
	rpc_stream_begin(c);
	rpc_stream_msg(c, json_pack("{s:{}}", "start"));
}

void fs_create_watcher(struct conn *c, json_t *req, const struct user *u)
{
	struct watcher *x = watcher_new(c, req, u);

	if (!x)
		return;
	if (!(x->events = json_array())) {
		watcher_free(x);
		rpc_error(c, "resource_exhausted", "out of memory");
		return;
	}
	snprintf(x->id, sizeof(x->id), "w%u", ++next_id);
	rpc_reply(c, json_pack("{s:s}", "watcherId", x->id));
}

static struct watcher *polled(struct conn *c, json_t *req)
{
	const char *id = json_string_value(json_object_get(req, "watcherId"));

	if (!id) {
		rpc_error(c, "invalid_argument", "watcherId is required");
		return NULL;
	}
	for (struct watcher *x = watchers; x; x = x->next)
		if (!x->c && !strcmp(x->id, id))
			return x;
	rpc_error(c, "not_found", "watcher %.64s not found", id);
	return NULL;
}

void fs_get_watcher_events(struct conn *c, json_t *req)
{
	struct watcher *x = polled(c, req);

	if (!x)
		return;
	inotify_cb(&x->w, EPOLLIN); /* what happened up to this request */
	rpc_reply(c, json_pack("{s:o}", "events", x->events));
	x->events = json_array();
	if (!x->events) { /* cannot keep more: it ends here */
		watcher_free(x);
		return;
	}
	watcher_pace(x);
}

void fs_remove_watcher(struct conn *c, json_t *req)
{
	struct watcher *x = polled(c, req);

	if (!x)
		return;
	watcher_free(x);
	rpc_reply(c, json_object());
}

void watch_tick(uint64_t now)
{
	struct watcher *x, *next;

	for (x = watchers; x; x = next) {
		next = x->next;
		if (!x->c)
			continue;
		switch (rpc_pace_tick(&x->pace, x->c, now)) {
		case RPC_PACE_END:
			stream_end(x, "deadline_exceeded", "Connect-Timeout-Ms passed");
			break;
		case RPC_PACE_KEEPALIVE:
			rpc_stream_msg(x->c, json_pack("{s:{}}", "keepalive"));
			break;
		case RPC_PACE_NONE:
			break;
		}
	}
}
