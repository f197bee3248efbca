// SPDX-License-Identifier: MIT
/*
 * The contained runner: how `sluice exec` and `sluice run` start a command.
 *
 * Theory of operation. sluice (root) forks (exec.c: the parent stays, to
 * pass signals on and wait); the child joins the sandbox's network
 * namespace and a private mount namespace of its own (netns_sandbox_enter():
 * the sandbox's /sys), builds there, as root, what bubblewrap will bind
 * (stage(): /etc, /run, /dev, the workspace, --bind sources), drops to the
 * sandbox's unprivileged uid and execs bubblewrap, which, without privilege:
 *   - makes a user namespace mapping the inside identity (root, or --user)
 *     to that uid: root inside owns nothing outside;
 *   - keeps the network namespace (--share-net), makes new PID, IPC, UTS
 *     and cgroup namespaces; its pid 1 reaps and passes the exit status on;
 *   - builds the mount namespace from an allowlist: /usr and the /bin, /lib
 *     links read-only, the staged /etc (the sandbox's resolv.conf and CA
 *     bundle in it), /run and /dev, a /proc of its PID namespace, a
 *     private /tmp, the workspace as cwd and HOME, the --bind directories;
 *   - sets no_new_privs, drops every capability, loads the seccomp filter
 *     of seccomp.c, and execs the command's first program, sluice
 *     --runner-exec (netns_runner_init()), which execs the command.
 * `--privileged` skips all of it: today's root command in the sandbox's
 * network namespace, for trusted tooling.
 *
 * The sandbox's uid outside is NETNS_UID_BASE plus the low 24 bits of its
 * address: unprivileged, unused by the host, distinct per sandbox of a
 * broker. Its workspace is NETNS_WORKSPACE_DIR/NAME, owned by that uid.
 * bubblewrap opens every source as that uid, so sluice binds as root what
 * that uid could not reach (the workspace, --bind sources) where it can.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/close_range.h>

#include "netns/netns.h"
#include "netns/netns_internal.h"

/* Removing a workspace: one descriptor per level down to RM_DEPTH_MAX; at
 * most RM_MOVES_MAX deeper directories moved up (a tree 2 million levels
 * deep), each pass of the removal moving at least one. */
#define RM_DEPTH_MAX 200
#define RM_MOVES_MAX 10000
/* NETNS_STATE_DIR (under /run) as a path within /run. */
#define STATE_UNDER_RUN (&NETNS_STATE_DIR[sizeof("/run/") - 1])

uid_t netns_sandbox_uid(const struct netns_sandbox *sb)
{
	return NETNS_UID_BASE + (sb->addr & 0xffffffu);
}

/* A uid or gid: digits, or a name through @lookup; -1 when neither. */
static long parse_id(const char *s, size_t len, bool group, gid_t *primary)
{
	char buf[256], *end;
	unsigned long v;

	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (buf[0] >= '0' && buf[0] <= '9') {
		errno = 0;
		v = strtoul(buf, &end, 10);
		/* (uid_t)-1 means "no change" to the kernel; 65535 and up are
		 * fine but must fit what bubblewrap maps. */
		if (errno || *end || v >= 0x7fffffffUL)
			return -1;
		if (!group && primary) {
			struct passwd *pw = getpwuid((uid_t)v);

			*primary = pw ? pw->pw_gid : (gid_t)v;
		}
		return (long)v;
	}
	if (group) {
		struct group *gr = getgrnam(buf);

		return gr ? (long)gr->gr_gid : -1;
	} else {
		struct passwd *pw = getpwnam(buf);

		if (!pw)
			return -1;
		if (primary)
			*primary = pw->pw_gid;
		return (long)pw->pw_uid;
	}
}

/**
 * netns_runner_option() - one option of `sluice exec` / `sluice run`
 * @o:    the options so far
 * @argc: the words
 * @argv: ...
 * @i:    the word at hand; advanced past a value it takes
 *
 * Return: 1 when argv[*i] was a runner option, 0 when it is not one, -1
 * for a bad one (the error is printed).
 */
int netns_runner_option(struct netns_runner *o, int argc, char **argv, int *i)
{
	const char *a = argv[*i], *v;

	if (!strcmp(a, "--privileged")) {
		o->privileged = true;
		return 1;
	}
	if (strcmp(a, "--user") && strcmp(a, "--bind"))
		return 0;
	if (*i + 1 >= argc) {
		fprintf(stderr, "sluice: %s needs a value\n", a);
		return -1;
	}
	v = argv[++*i];
	if (!strcmp(a, "--user")) {
		const char *colon = strchr(v, ':');
		size_t ul = colon ? (size_t)(colon - v) : strlen(v);
		gid_t primary = 0;
		long u = parse_id(v, ul, false, &primary), g;

		if (u < 0) {
			fprintf(stderr, "sluice: --user `%.*s`: no such user\n", (int)ul, v);
			return -1;
		}
		g = colon ? parse_id(colon + 1, strlen(colon + 1), true, NULL) : (long)primary;
		if (g < 0) {
			fprintf(stderr, "sluice: --user `%s`: no such group `%s`\n", v, colon + 1);
			return -1;
		}
		o->uid = (uid_t)u;
		o->gid = (gid_t)g;
		o->user_set = true;
		return 1;
	}
	/* --bind SRC:DST[:ro] */
	{
		char *s = strdup(v), *c1, *c2;
		struct netns_bind *b;

		if (!s) {
			fprintf(stderr, "sluice: out of memory\n");
			return -1;
		}
		c1 = strchr(s, ':');
		c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c1)
			*c1 = '\0';
		if (c2)
			*c2 = '\0';
		if (!c1 || !s[0] || c1[1] != '/' ||
		    (c2 && strcmp(c2 + 1, "ro") && strcmp(c2 + 1, "rw"))) {
			fprintf(stderr,
				"sluice: --bind `%s`: expected SRC:DST[:ro], DST an absolute path\n",
				v);
			free(s);
			return -1;
		}
		if (o->nbinds >= NETNS_BINDS_MAX) {
			fprintf(stderr, "sluice: more than %d --bind\n", NETNS_BINDS_MAX);
			free(s);
			return -1;
		}
		b = &o->binds[o->nbinds++];
		b->src = s;
		b->dst = c1 + 1;
		b->ro = c2 && !strcmp(c2 + 1, "ro");
		return 1;
	}
}

/* Removing a workspace: where a deeper directory goes (a descriptor per
 * level is held down to RM_DEPTH_MAX), and how many it may move. */
struct rm_ctx {
	int topfd;
	unsigned moved;
};

/* Removes @name in @dfd and, for a directory, all it holds, without
 * following a symbolic link anywhere: the tree was written by the sandbox.
 * A directory deeper than RM_DEPTH_MAX is moved up into the top directory
 * (as .sluice-deep-N), for a later pass: no depth stops a removal. */
static int rm_at(struct rm_ctx *c, int dfd, const char *name, int depth)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd, r = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 ? -errno : 0;
	if (depth >= RM_DEPTH_MAX) {
		char to[40];

		if (c->moved >= RM_MOVES_MAX)
			return -ELOOP;
		snprintf(to, sizeof(to), ".sluice-deep-%u", c->moved++);
		return renameat(dfd, name, c->topfd, to) < 0 ? -errno : -EAGAIN;
	}
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((de = readdir(d))) {
		int k;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		k = rm_at(c, fd, de->d_name, depth + 1);
		if (k < 0 && k != -ENOENT && (r == 0 || r == -EAGAIN))
			r = k;
	}
	closedir(d);
	if (r == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		r = -errno;
	return r;
}

/**
 * netns_workspace_remove() - remove a sandbox's workspace and all in it
 * @name: the sandbox
 *
 * Return: 0, -ENOENT when it has none, or another negative errno.
 */
int netns_workspace_remove(const char *name)
{
	struct rm_ctx c = { .topfd = -1 };
	int dfd, r, pass;

	if (!netns_name_ok(name))
		return -EINVAL;
	dfd = open(NETNS_WORKSPACE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	c.topfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c.topfd < 0) {
		r = -errno;
		if (r == -ENOTDIR || r == -ELOOP) /* not a directory: a file, a link */
			r = unlinkat(dfd, name, 0) < 0 ? -errno : 0;
		close(dfd);
		return r;
	}
	/* Each pass removes what is within RM_DEPTH_MAX and moves up what is
	 * deeper; the moves are bounded, and so the passes. */
	for (pass = 0, r = -EAGAIN; r == -EAGAIN && pass <= RM_MOVES_MAX; pass++)
		r = rm_at(&c, dfd, name, 0);
	close(c.topfd);
	close(dfd);
	return r;
}

/* The workspace of @sb, made if missing, owned by @uid: an open
 * descriptor (close-on-exec), or a negative errno. */
static int workspace_open(const struct netns_sandbox *sb, uid_t uid, char *err, size_t errlen)
{
	char path[512];
	struct stat st;
	int fd, r;

	/* The parent is root's and closed: sluice binds a workspace in as
	 * root (stage()); a sandbox sees only its own, each 0700. */
	if (mkdir(NETNS_WORKSPACE_PARENT, 0755) < 0 && errno != EEXIST)
		goto fail_parent;
	if (mkdir(NETNS_WORKSPACE_DIR, 0700) < 0 && errno != EEXIST)
		goto fail_parent;
	netns_path(path, sizeof(path), NETNS_WORKSPACE_DIR, sb->name, NULL);
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		snprintf(err, errlen, "cannot make the workspace `%s`: %s", path, strerror(-r));
		return r;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open the workspace `%s`: %s", path, strerror(-r));
		if (fd >= 0)
			close(fd);
		return r;
	}
	if ((st.st_uid != uid || st.st_gid != uid) && fchown(fd, uid, uid) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot give the workspace `%s` to uid %u: %s", path,
			 (unsigned)uid, strerror(-r));
		close(fd);
		return r;
	}
	return fd;
fail_parent:
	r = -errno;
	snprintf(err, errlen, "cannot make `%s`: %s", NETNS_WORKSPACE_DIR, strerror(-r));
	return r;
}

/* Files of the host's /etc a command may need and that say nothing about
 * the host beyond its distribution: names, users (no shadow), libraries,
 * time zone, trust store. Missing ones are skipped. */
static const char *const etc_files[] = {
	"passwd", "group", "nsswitch.conf", "hosts", "host.conf", "services",
	"protocols", "gai.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"localtime", "timezone", "alternatives", "ssl", "ca-certificates",
	"ca-certificates.conf", "pki", "crypto-policies", "os-release",
	"debian_version", "bash.bashrc", "profile", "profile.d", "inputrc",
	"shells", "login.defs", "mime.types", "terminfo", "python3", "gitconfig",
};

/* Makes an empty file or directory @path to mount over, like @st. */
static int mount_point(const char *path, const struct stat *st)
{
	int fd;

	if (S_ISDIR(st->st_mode))
		return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* Binds @from on @to (made like @from); 0, or a negative errno. */
static int bind_into(const char *from, const char *to)
{
	struct stat st;
	int r;

	if (stat(from, &st) < 0)
		return -errno;
	r = mount_point(to, &st);
	if (r == 0 && mount(from, to, NULL, MS_BIND | MS_REC, NULL) < 0)
		r = -errno;
	return r;
}

/* Copies the regular file @from to @to (at most 1 MiB: what /etc holds);
 * 0, or a negative errno. */
static int copy_file(const char *from, const char *to)
{
	char buf[16384];
	ssize_t n = 0;
	size_t total = 0;
	int in, out, r = 0;

	in = open(from, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (in < 0)
		return -errno;
	out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out < 0) {
		r = -errno;
		close(in);
		return r;
	}
	while (r == 0 && (n = read(in, buf, sizeof(buf))) > 0) {
		total += (size_t)n;
		if (total > (1u << 20))
			r = -EFBIG;
		else if (write(out, buf, (size_t)n) != n)
			r = -EIO;
	}
	if (r == 0 && n < 0)
		r = -errno;
	close(in);
	if (close(out) < 0 && r == 0)
		r = -errno;
	return r;
}

/*
 * NETNS_RUNNER_STAGE/dev: what bubblewrap's --dev makes (the harmless
 * devices, bound from the host; a devpts of its own; the /proc/self/fd
 * links), made here with mounts that cost nothing much, for bubblewrap to
 * bind in one (its --dev costs it a walk of the mount table per device).
 * /dev/shm is a sticky directory anyone may write, as on the host.
 */
static int stage_dev(void)
{
	static const char *const devs[] = { "null", "zero", "full", "random", "urandom", "tty" };
	static const char *const links[][2] = {
		{ "/proc/self/fd", "fd" },	   { "/proc/self/fd/0", "stdin" },
		{ "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
		{ "/proc/kcore", "core" },	   { "pts/ptmx", "ptmx" },
	};
	char from[64], to[128];
	size_t i;
	int r;

	if (mkdir(NETNS_RUNNER_STAGE "/dev", 0755) < 0 ||
	    mount("tmpfs", NETNS_RUNNER_STAGE "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
		  "mode=0755,size=64k") < 0)
		return -errno;
	for (i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		snprintf(from, sizeof(from), "/dev/%s", devs[i]);
		snprintf(to, sizeof(to), NETNS_RUNNER_STAGE "/dev/%s", devs[i]);
		r = bind_into(from, to);
		if (r < 0 && r != -ENOENT)
			return r;
	}
	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(to, sizeof(to), NETNS_RUNNER_STAGE "/dev/%s", links[i][1]);
		if (symlink(links[i][0], to) < 0)
			return -errno;
	}
	if (mkdir(NETNS_RUNNER_STAGE "/dev/shm", 01777) < 0 ||
	    chmod(NETNS_RUNNER_STAGE "/dev/shm", 01777) < 0 ||
	    mkdir(NETNS_RUNNER_STAGE "/dev/pts", 0755) < 0 ||
	    mount("devpts", NETNS_RUNNER_STAGE "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=620") < 0)
		return -errno;
	return 0;
}

/*
 * In sluice's own private mount namespace (netns_sandbox_enter()), as root:
 * what bubblewrap then binds in two mounts, not forty. bubblewrap reads all
 * of /proc/self/mountinfo for every bind it makes, so its cost is binds
 * times mounts: a curated /etc bound file by file took 20 ms, and 200 ms
 * more with 1,000 sandboxes' mounts under /run/netns. So:
 *   - /run/netns goes (detached here only): the command has joined its
 *     network namespace, and bubblewrap copies and walks what is left;
 *   - NETNS_RUNNER_STAGE gets a tmpfs holding etc/, the command's /etc
 *     (the regular files of etc_files copied, their directories bound,
 *     their symbolic links made again; the sandbox's resolv.conf; its CA
 *     bundle over the system store), and run/, its /run (sluice itself as
 *     NETNS_RUNNER_INSIDE; the CA bundle where the environment names it),
 *     and, bound as root, the workspace @ws and each --bind source (as
 *     bind-N): bubblewrap, as the sandbox's uid, could not pass a
 *     directory only root may; what the command may do with the files in
 *     them, its uid decides.
 * @o:    the options (the binds)
 * @self: sluice's own path
 * Return: 0 or a negative errno, with @err.
 */
static int stage(const struct netns_sandbox *sb, const struct netns_runner *o, const char *self,
		 const char *ws, char *err, size_t errlen)
{
	char from[512], to[600], link[PATH_MAX], bundle[512];
	const char *what = NETNS_RUNNER_STAGE;
	struct stat st;
	size_t i;
	int r, k;

	for (k = 0; k < 8 && umount2(NETNS_RUN_DIR, MNT_DETACH) == 0; k++)
		;
	if (mkdir(NETNS_RUNNER_STAGE, 0755) < 0 && errno != EEXIST)
		goto fail;
	if (mount("tmpfs", NETNS_RUNNER_STAGE, "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=0755,size=8m") < 0)
		goto fail;
	if (mkdir(NETNS_RUNNER_STAGE "/etc", 0755) < 0 || mkdir(NETNS_RUNNER_STAGE "/run", 0755) < 0)
		goto fail;
	for (i = 0; i < sizeof(etc_files) / sizeof(etc_files[0]); i++) {
		ssize_t n;

		snprintf(from, sizeof(from), "/etc/%s", etc_files[i]);
		snprintf(to, sizeof(to), NETNS_RUNNER_STAGE "/etc/%s", etc_files[i]);
		if (lstat(from, &st) < 0)
			continue;
		what = from;
		/* A link stays a link (to /usr, as most are, or within /etc):
		 * it resolves inside the sandbox as on the host. */
		if (S_ISLNK(st.st_mode)) {
			n = readlink(from, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = '\0';
			if (symlink(link, to) < 0)
				goto fail;
		} else if (S_ISREG(st.st_mode)) {
			/* A copy costs less than a mount (and each mount costs
			 * bubblewrap a walk of the mount table). */
			r = copy_file(from, to);
			if (r < 0)
				goto fail_r;
		} else if (S_ISDIR(st.st_mode)) {
			r = bind_into(from, to);
			if (r < 0)
				goto fail_r;
		}
	}
	what = NETNS_RUNNER_STAGE;
	if (symlink("/proc/self/mounts", NETNS_RUNNER_STAGE "/etc/mtab") < 0)
		goto fail;
	/* The sandbox's resolver; without it names still resolve, through
	 * the broker (netns_sandbox_enter() warned already). */
	netns_path(from, sizeof(from), NETNS_ETC_DIR, sb->name, "resolv.conf");
	bind_into(from, NETNS_RUNNER_STAGE "/etc/resolv.conf");
	/* The trust bundle, for the path the environment names and over the
	 * system store (for programs that ignore the variables). */
	netns_path(bundle, sizeof(bundle), NETNS_STATE_DIR, sb->name, "ca-bundle.crt");
	snprintf(to, sizeof(to), NETNS_RUNNER_STAGE "/run/%s", STATE_UNDER_RUN);
	if (stat(bundle, &st) == 0) {
		if (mkdir(to, 0755) < 0)
			goto fail;
		snprintf(to, sizeof(to), NETNS_RUNNER_STAGE "/run/%s/%s", STATE_UNDER_RUN,
			 sb->name);
		if (mkdir(to, 0755) < 0)
			goto fail;
		snprintf(to, sizeof(to), NETNS_RUNNER_STAGE "/run/%s/%s/ca-bundle.crt",
			 STATE_UNDER_RUN, sb->name);
		r = bind_into(bundle, to);
		if (r < 0)
			goto fail_r;
		if (stat(NETNS_RUNNER_STAGE "/etc/ssl/certs/ca-certificates.crt", &st) == 0 &&
		    mount(bundle, NETNS_RUNNER_STAGE "/etc/ssl/certs/ca-certificates.crt", NULL,
			  MS_BIND, NULL) < 0)
			goto fail;
	}
	if (self[0]) {
		r = bind_into(self, NETNS_RUNNER_STAGE "/run/" NETNS_RUNNER_NAME);
		if (r < 0)
			goto fail_r;
	}
	r = stage_dev();
	if (r < 0) {
		what = NETNS_RUNNER_STAGE "/dev";
		goto fail_r;
	}
	what = ws;
	r = bind_into(ws, NETNS_RUNNER_STAGE "/workspace");
	if (r < 0)
		goto fail_r;
	for (k = 0; k < (int)o->nbinds; k++) {
		what = o->binds[k].src;
		snprintf(to, sizeof(to), NETNS_RUNNER_STAGE "/bind-%d", k);
		r = bind_into(o->binds[k].src, to);
		if (r < 0)
			goto fail_r;
	}
	return 0;
fail:
	r = -errno;
fail_r:
	snprintf(err, errlen, "cannot prepare the sandbox's /etc and /run (`%s`): %s", what,
		 strerror(-r));
	return r;
}

/* The top-level system directories: a link (merged /usr) or a directory. */
static const char *const root_dirs[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

/* bubblewrap's command line: its options (fewer than ARGV_FIXED words) and
 * the command's. Never freed: the process execs or exits. */
#define ARGV_FIXED 256

struct argv_buf {
	char **v;
	size_t n, cap;
	bool overflow;
};

static void add(struct argv_buf *a, const char *s)
{
	if (a->n + 1 >= a->cap) {
		a->overflow = true;
		return;
	}
	a->v[a->n++] = (char *)s;
}

/* Text kept for the life of the process (it execs): numbers, paths. */
static const char *keep(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *keep(const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s ? s : "";
}

static void no_cloexec(int fd)
{
	int f = fcntl(fd, F_GETFD);

	if (f >= 0)
		fcntl(fd, F_SETFD, f & ~FD_CLOEXEC);
}

static void put_env(const char *key, const char *value, void *arg)
{
	int *r = arg;

	if (setenv(key, value, 1) < 0 && *r == 0)
		*r = -errno;
}

/**
 * netns_runner_exec() - run @argv contained in @sb (see the top of the file)
 * @sb:   the sandbox
 * @o:    the options (not --privileged)
 * @argv: the command
 *
 * Return: only on failure, with the exit status to give (1: nothing ran).
 */
int netns_runner_exec(const struct netns_sandbox *sb, const struct netns_runner *o, char **argv)
{
	const char *bwrap = getenv("SLUICE_BWRAP");
	uid_t uid = netns_sandbox_uid(sb);
	char err[700], link[PATH_MAX];
	struct argv_buf a = { .n = 0 };
	size_t argc;
	size_t init_at;
	char ws_path[512], self[PATH_MAX];
	ssize_t sl;
	bool use_init;
	int ws, sc, r = 0;
	unsigned k;
	size_t i;

	if (!bwrap || !*bwrap)
		bwrap = NETNS_BWRAP;
	if (access(bwrap, X_OK) < 0) {
		fprintf(stderr,
			"sluice: bubblewrap (`%s`) is needed to contain the command: %s (install "
			"the Debian package bubblewrap: `make deps`; or run it uncontained with "
			"--privileged)\n",
			bwrap, strerror(errno));
		return 1;
	}
	for (k = 0; k < o->nbinds; k++) {
		struct stat st;

		if (stat(o->binds[k].src, &st) < 0) {
			fprintf(stderr, "sluice: --bind `%s`: %s\n", o->binds[k].src,
				strerror(errno));
			return 1;
		}
	}
	ws = workspace_open(sb, uid, err, sizeof(err));
	if (ws < 0) {
		fprintf(stderr, "sluice: %s\n", err);
		return 1;
	}
	close(ws);
	netns_path(ws_path, sizeof(ws_path), NETNS_WORKSPACE_DIR, sb->name, NULL);
	/* sluice itself is the command's first program (--runner-exec), read
	 * from where it is now, before the mount namespace changes. */
	sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[sl > 0 ? sl : 0] = '\0';
	sc = netns_seccomp_fd();
	if (sc < 0) {
		fprintf(stderr, "sluice: cannot build the seccomp filter: %s\n", strerror(-sc));
		return 1;
	}
	/* The environment before the sandbox's namespace: its placeholders
	 * come from the broker's control socket, which need not answer a
	 * caller inside a sandbox. */
	netns_env_each(sb, put_env, &r);
	if (r == 0 && setenv("HOME", NETNS_WORKSPACE_INSIDE, 1) < 0)
		r = -errno;
	if (r < 0) {
		fprintf(stderr, "sluice: cannot set the environment: %s\n", strerror(-r));
		return 1;
	}
	r = netns_sandbox_enter(sb, err, sizeof(err));
	if (r == 0)
		r = stage(sb, o, self, ws_path, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "sluice: %s\n", err);
		return 1;
	}

	for (argc = 0; argv[argc]; argc++)
		;
	a.cap = ARGV_FIXED + 3 * (size_t)o->nbinds + argc;
	a.v = calloc(a.cap, sizeof(*a.v));
	if (!a.v) {
		fprintf(stderr, "sluice: out of memory\n");
		return 1;
	}
	add(&a, "bwrap");
	add(&a, "--unshare-user");
	add(&a, "--uid");
	add(&a, keep("%u", o->user_set ? (unsigned)o->uid : 0u));
	add(&a, "--gid");
	add(&a, keep("%u", o->user_set ? (unsigned)o->gid : 0u));
	add(&a, "--unshare-pid");
	add(&a, "--unshare-ipc");
	add(&a, "--unshare-uts");
	add(&a, "--hostname");
	add(&a, sb->name);
	add(&a, "--unshare-cgroup-try");
	add(&a, "--share-net");
	add(&a, "--die-with-parent");
	add(&a, "--cap-drop");
	add(&a, "ALL");
	add(&a, "--ro-bind");
	add(&a, "/usr");
	add(&a, "/usr");
	for (i = 0; i < sizeof(root_dirs) / sizeof(root_dirs[0]); i++) {
		const char *p = keep("/%s", root_dirs[i]);
		struct stat st;
		ssize_t n;

		if (lstat(p, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(p, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = '\0';
			add(&a, "--symlink");
			add(&a, keep("%s", link));
			add(&a, p);
		} else if (S_ISDIR(st.st_mode)) {
			add(&a, "--ro-bind");
			add(&a, p);
			add(&a, p);
		}
	}
	add(&a, "--ro-bind");
	add(&a, NETNS_RUNNER_STAGE "/etc");
	add(&a, "/etc");
	add(&a, "--ro-bind");
	add(&a, NETNS_RUNNER_STAGE "/run");
	add(&a, "/run");
	/* The sysfs netns_sandbox_enter() mounted: the sandbox's links. */
	add(&a, "--ro-bind");
	add(&a, "/sys");
	add(&a, "/sys");
	add(&a, "--proc");
	add(&a, "/proc");
	add(&a, "--dev-bind");
	add(&a, NETNS_RUNNER_STAGE "/dev");
	add(&a, "/dev");
	add(&a, "--perms");
	add(&a, "1777");
	add(&a, "--tmpfs");
	add(&a, "/tmp");
	add(&a, "--bind");
	add(&a, NETNS_RUNNER_STAGE "/workspace");
	add(&a, NETNS_WORKSPACE_INSIDE);
	for (k = 0; k < o->nbinds; k++) {
		add(&a, o->binds[k].ro ? "--ro-bind" : "--bind");
		add(&a, keep(NETNS_RUNNER_STAGE "/bind-%u", k));
		add(&a, o->binds[k].dst);
	}
	add(&a, "--chdir");
	add(&a, NETNS_WORKSPACE_INSIDE);
	add(&a, "--seccomp");
	add(&a, keep("%d", sc));
	/* The command's first program: sluice --runner-exec (netns_runner_init())
	 * where the sandbox's uid can run it, else sh's exec (for a shell's 127
	 * and 126; bubblewrap would say 1), which cannot undo an ignored SIGINT
	 * or SIGQUIT (so then bubblewrap keeps them, and a Ctrl-C ends the
	 * command outright). Checked below, once that uid is ours. */
	init_at = a.n;
	add(&a, "--");
	add(&a, NETNS_RUNNER_INSIDE);
	add(&a, "--runner-exec");
	for (i = 0; argv[i]; i++)
		add(&a, argv[i]);
	a.v[a.n] = NULL;
	if (a.overflow) {
		fprintf(stderr, "sluice: the command has too many words\n");
		return 1;
	}

	/* The last privileged step is behind: from here on, sluice is the
	 * sandbox's uid, with no supplementary group and no capability (a
	 * change of uid from 0 clears them), so bubblewrap makes its user
	 * namespace unprivileged and the mapping cannot name uid 0. */
	if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
	    setresuid(uid, uid, uid) < 0) {
		fprintf(stderr, "sluice: cannot drop to uid %u: %s\n", (unsigned)uid,
			strerror(errno));
		return 1;
	}
	if (getuid() != uid || geteuid() != uid) {
		fprintf(stderr, "sluice: still uid %u, not %u\n", (unsigned)geteuid(),
			(unsigned)uid);
		return 1;
	}
	/* The change of uid cleared the parent-death signal: set it again,
	 * so that bubblewrap (and, --die-with-parent, the command) does not
	 * outlive the sluice that waits for it. */
	if (o->parent > 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != o->parent)
			return 1;
	}
	use_init = access(NETNS_RUNNER_STAGE "/run/" NETNS_RUNNER_NAME, X_OK) == 0;
	if (!use_init) {
		static char *const sh[] = { "--", "/bin/sh", "-c", "exec \"$@\"", "sluice" };

		a.n = init_at;
		for (k = 0; k < sizeof(sh) / sizeof(sh[0]); k++)
			add(&a, sh[k]);
		for (i = 0; argv[i]; i++)
			add(&a, argv[i]);
		a.v[a.n] = NULL;
		if (a.overflow) {
			fprintf(stderr, "sluice: the command has too many words\n");
			return 1;
		}
	}
	/* A terminal's SIGINT and SIGQUIT go to the whole foreground process
	 * group: the command handles them, and bubblewrap, which passes
	 * nothing on, must not die of them and take the command with it
	 * (--die-with-parent). netns_runner_init() undoes this for the command;
	 * sluice, the parent, passes on the same signals sent to it alone. */
	if (use_init) {
		signal(SIGINT, SIG_IGN);
		signal(SIGQUIT, SIG_IGN);
	}
	/* Nothing the caller left open goes in but stdin, stdout and stderr:
	 * a descriptor of a host file or directory is a way around the mount
	 * namespace (openat() from it). Only the filter's, for bubblewrap. */
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
		fprintf(stderr, "sluice: cannot close inherited descriptors: %s\n",
			strerror(errno));
		return 1;
	}
	no_cloexec(sc);
	execv(bwrap, a.v);
	fprintf(stderr, "sluice: %s: %s\n", bwrap, strerror(errno));
	return 1;
}

int netns_runner_init(char **argv)
{
	sigset_t none;
	int e;

	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execvp(argv[0], argv);
	e = errno;
	fprintf(stderr, "sluice: %s: %s\n", argv[0], strerror(e));
	/* _exit: nothing of sluice's to clean up, and no exit handler (a
	 * sanitizer's leak check, say) to run under the seccomp filter. */
	_exit(e == ENOENT ? 127 : 126);
}
