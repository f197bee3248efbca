// SPDX-License-Identifier: MIT
/*
 * The contained runner: how `sluice exec` and `sluice run` start a command.
 *
 * Theory of operation. sluice (root) stays as the parent that passes
 * signals on and waits (exec.c). Before anything runs it prepares, as root
 * and in the host's mount namespace (cli_runner_prepare()): the
 * workspace, an fd of the sandbox's network namespace, detached copies
 * (open_tree()) of what is bound in (the workspace, the --bind sources, the
 * sandbox's resolv.conf and CA bundle: bound as root, so that a directory
 * only root may pass is no obstacle; what the command may do with the files
 * in them, its uid decides), the seccomp filter, and the template.
 *
 * The template is a mount namespace that holds only what every contained
 * command sees alike: /usr and the /bin, /lib links or directories
 * read-only, a curated /etc (regular files copied, directories bound) and
 * a /dev of the harmless devices. It is built once (by a child that
 * pivots into it) and kept by a bind mount of its nsfs file at
 * RUNNER_TEMPLATE, made where /run/netns mounts are made (nsfs.c), with
 * RUNNER_STAMP saying which host files it was built from: a change to
 * any of them builds a new one. A new mount namespace copies the one it is
 * made from, so one made from the host's copies every mount there is (one
 * per sandbox under /run/netns): one made from the template copies a
 * dozen, whatever the number of sandboxes.
 *
 * cli_runner_spawn() then clones the sandbox's pid 1 into new PID, IPC,
 * UTS and cgroup namespaces. As root still, it joins the sandbox's network
 * namespace and the template, makes a mount namespace of its own from it,
 * and there a fresh root: the template's pieces bound in, a sysfs of the
 * sandbox's links, a /proc of its PID namespace, a private /tmp, /dev/shm
 * and devpts, /run holding the CA bundle only, the workspace as cwd and
 * HOME, the --bind directories; then pivot_root() leaves everything else
 * behind. Then, in named stages (run_init()), it drops to the sandbox's
 * unprivileged uid, makes a user namespace mapping the inside identity
 * (root, or --user) to that uid alone, empties the bounding set and every
 * capability, sets no_new_privs and loads the seccomp filter of seccomp.c.
 * It forks the command and stays as its init: it reaps, passes on the
 * signals sluice passes to it, and exits with the command's status (128+N
 * for a signal). The namespaces other than the network's belong to the
 * initial user namespace, where the command holds nothing: it can change
 * none of them.
 *
 * This was bubblewrap's work. bubblewrap reads the whole mount table for
 * every bind it makes, and exec'ing it and then sluice inside it cost two
 * program starts: 22 ms a command, 32 ms with 1,000 sandboxes present.
 * `--privileged` skips all of it: today's root command in the sandbox's
 * network namespace, for trusted tooling.
 *
 * The sandbox's uid outside is NETNS_UID_BASE plus the low 24 bits of its
 * address: unprivileged, unused by the host, distinct per sandbox of a
 * broker. Its workspace is NETNS_WORKSPACE_DIR/NAME, owned by that uid.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <linux/seccomp.h>

#include "common/err.h"
#include "common/text.h"
#include "netns/netns.h"
#include "cli/runner.h"
#include "netns/netns_internal.h"

uid_t cli_sandbox_uid(const struct netns_sandbox *sb)
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
		 * fine but must fit a user namespace's map. */
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
 * cli_runner_option() - one option of `sluice exec` / `sluice run`
 * @o:    the options so far
 * @argc: the words
 * @argv: ...
 * @i:    the word at hand; advanced past a value it takes
 *
 * Return: 1 when argv[*i] was a runner option, 0 when it is not one, -1
 * for a bad one (the error is printed).
 */
int cli_runner_option(struct cli_runner *o, int argc, char **argv, int *i)
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
		struct cli_bind *b;

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
		if (o->nbinds >= CLI_BINDS_MAX) {
			fprintf(stderr, "sluice: more than %d --bind\n", CLI_BINDS_MAX);
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

/* The workspace of @sb, made if missing, owned by @uid: an open
 * descriptor (close-on-exec), or a negative errno. */
static int workspace_open(const struct netns_sandbox *sb, uid_t uid, struct sl_err *err)
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
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return sl_err_sys(err, errno, "cannot make the workspace `%s`", path);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = sl_err_sys(err, errno, "cannot open the workspace `%s`", path);
		if (fd >= 0)
			close(fd);
		return r;
	}
	if ((st.st_uid != uid || st.st_gid != uid) && fchown(fd, uid, uid) < 0) {
		r = sl_err_sys(err, errno, "cannot give the workspace `%s` to uid %u", path,
			       (unsigned)uid);
		close(fd);
		return r;
	}
	return fd;
fail_parent:
	return sl_err_sys(err, errno, "cannot make `%s`", NETNS_WORKSPACE_DIR);
}

/* Files of the host's /etc a command may need and that say nothing about
 * the host beyond its distribution: names, users (no shadow), libraries,
 * time zone, trust store. Missing ones are skipped. */
static const char *const etc_files[] = {
	"passwd",
	"group",
	"nsswitch.conf",
	"hosts",
	"host.conf",
	"services",
	"protocols",
	"gai.conf",
	"ld.so.cache",
	"ld.so.conf",
	"ld.so.conf.d",
	"localtime",
	"timezone",
	"alternatives",
	"ssl",
	"ca-certificates",
	"ca-certificates.conf",
	"pki",
	"crypto-policies",
	"os-release",
	"debian_version",
	"bash.bashrc",
	"profile",
	"profile.d",
	"inputrc",
	"shells",
	"login.defs",
	"mime.types",
	"terminfo",
	"python3",
	"gitconfig",
	/* apt's configuration (apt/apt.conf.d: etc_filtered below), sources
	 * and archive keys (apt warns without them), not its credentials: no
	 * auth.conf, no auth.conf.d. */
	"apt/preferences.d",
	"apt/sources.list",
	"apt/sources.list.d",
	"apt/trusted.gpg",
	"apt/trusted.gpg.d",
	"apt/keyrings",
};

/* Directories of the host's /etc whose files are copied one by one, and
 * only those that hold no credentials (etc_clean()): an admin may put an
 * apt proxy's password in apt.conf.d (Acquire::http::Proxy
 * "http://user:secret@host"), in a file every user may read. At most
 * ETC_FILTERED_MAX files each; links and subdirectories are left out. */
static const char *const etc_filtered[] = { "apt/apt.conf.d" };
#define ETC_FILTERED_MAX 256

/* Directories of the host's /etc named by a pattern: a JDK's configuration
 * is /etc/java-N-openjdk for each N installed (Debian's JVM does not start
 * without its java.security, which /usr/lib/jvm/NAME/conf links to). */
static const char *const etc_globs[] = { "java-*-openjdk" };
#define ETC_GLOB_MAX 16

/* The top-level system directories: a link (merged /usr) or a directory. */
static const char *const root_dirs[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

/* The template (see the top of the file): its nsfs file, the stamp of
 * what it was built from, and the lock its builders take. The root of a
 * command is made at TEMPLATE_ROOT within it. Bump RUNNER_LAYOUT when
 * what the template holds changes, so that an older one is rebuilt. */
#define RUNNER_TEMPLATE NETNS_STATE_DIR "/.runner-ns"
#define RUNNER_STAMP NETNS_STATE_DIR "/.runner-stamp"
#define RUNNER_LOCK NETNS_STATE_DIR "/.runner-lock"
#define RUNNER_LAYOUT 3u
#define TEMPLATE_ROOT "/.root"
/* Mounts that a command's root is built on: bounded, as each is a loop. */
#define UNMOUNT_MAX 8

/* glibc has no wrapper. */
static int pivot_root(const char *new_root, const char *put_old)
{
	return (int)syscall(SYS_pivot_root, new_root, put_old);
}

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

/* Makes the tree at @path and under it read-only (and nosuid, nodev for
 * all but /dev); 0 or a negative errno. */
static int make_ro(const char *path, bool dev)
{
	struct mount_attr a = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | (dev ? 0 : MOUNT_ATTR_NODEV),
	};

	return mount_setattr(AT_FDCWD, path, AT_RECURSIVE, &a, sizeof(a)) < 0 ? -errno : 0;
}

/* Copies the regular file @from to @to (at most 1 MiB: what /etc holds);
 * 0, or a negative errno. */
static int copy_file(const char *from, const char *to);

/* Whether the @len bytes at @s name a URL with a user in it
 * (scheme://user[:password]@host): what an apt proxy's password looks like. */
static bool has_url_user(const char *s, size_t len)
{
	const char *p = s, *end = s + len, *q;

	while ((q = memmem(p, (size_t)(end - p), "://", 3))) {
		for (q += 3; q < end && !strchr("/\"' \t\r\n;", *q); q++)
			if (*q == '@')
				return true;
		p = q;
	}
	return false;
}

/* Copies the regular file @from to @to, as copy_file(), unless it may hold
 * a credential: not readable by every user (its owner means it private), a
 * URL with a user in it, more than 1 MiB or unreadable. Such a file is left
 * out (0): the sandbox gets less of the host's configuration, never a
 * secret. */
static int etc_clean(const char *from, const char *to)
{
	size_t max = 1u << 20, len = 0;
	struct stat st;
	char *buf;
	ssize_t n = 1;
	int in, out, r = 0;

	in = open(from, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	if (in < 0)
		return 0;
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & S_IROTH) ||
	    (size_t)st.st_size > max || !(buf = malloc(max + 1))) {
		close(in);
		return 0;
	}
	while (len <= max && (n = read(in, buf + len, max + 1 - len)) > 0)
		len += (size_t)n;
	close(in);
	if (n < 0 || len > max || has_url_user(buf, len)) {
		free(buf);
		return 0;
	}
	out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out < 0)
		r = -errno;
	else if (write(out, buf, len) != (ssize_t)len)
		r = -EIO;
	if (out >= 0 && close(out) < 0 && r == 0)
		r = -errno;
	free(buf);
	return r;
}

/* Makes @to a symbolic link with the target of the link @from (an empty
 * or unreadable one is left out); 0 or a negative errno. */
static int copy_link(const char *from, const char *to)
{
	char link[PATH_MAX];
	ssize_t n = readlink(from, link, sizeof(link) - 1);

	if (n <= 0)
		return 0;
	link[n] = '\0';
	return symlink(link, to) < 0 ? -errno : 0;
}

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

/* 64-bit FNV-1a over @len bytes at @p, on from @h. */
static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
	const unsigned char *c = p;

	while (len--)
		h = (h ^ *c++) * 0x100000001b3ULL;
	return h;
}

typedef char etc_name[NAME_MAX + 1];

static int etc_name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The names in the host's /etc that etc_globs match, at most ETC_GLOB_MAX,
 * sorted (the fingerprint must not depend on readdir's order); their
 * number. */
static size_t etc_glob(etc_name *out)
{
	DIR *d = opendir("/etc");
	struct dirent *e;
	size_t n = 0, i;

	if (!d)
		return 0;
	while (n < ETC_GLOB_MAX && (e = readdir(d)))
		for (i = 0; i < sizeof(etc_globs) / sizeof(etc_globs[0]); i++)
			if (fnmatch(etc_globs[i], e->d_name, FNM_PERIOD) == 0) {
				snprintf(out[n++], sizeof(*out), "%s", e->d_name);
				break;
			}
	closedir(d);
	qsort(out, n, sizeof(*out), etc_name_cmp);
	return n;
}

/* A file's identity, size and times, as a template's fingerprint takes
 * them (v[0..5]). */
static void stat_words(const struct stat *st, uint64_t *v)
{
	v[0] = st->st_dev;
	v[1] = st->st_ino;
	v[2] = st->st_mode;
	v[3] = (uint64_t)st->st_size;
	v[4] = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
	v[5] = (uint64_t)st->st_ctim.tv_sec * 1000000000u + (uint64_t)st->st_ctim.tv_nsec;
}

/* The fingerprint of the files of the etc_filtered directory @name (their
 * names, identities, sizes and times), whatever readdir's order. */
static uint64_t etc_filtered_fingerprint(const char *name)
{
	char path[PATH_MAX];
	struct dirent *e;
	struct stat st;
	uint64_t sum = 0;
	unsigned n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/etc/%s", name);
	d = opendir(path);
	if (!d)
		return 0;
	while (n < ETC_FILTERED_MAX && (e = readdir(d))) {
		uint64_t v[6] = { 0 };

		if (e->d_name[0] == '.')
			continue;
		n++;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			stat_words(&st, v);
		sum += fnv(fnv(0xcbf29ce484222325ULL, e->d_name, strlen(e->d_name) + 1), v,
			   sizeof(v));
	}
	closedir(d);
	return sum + n;
}

/* What the template was built from: the layout, and the identity and
 * times of each host file it copies or links (directories are bound, so
 * live), and the names etc_globs match (a JDK installed or removed).
 * Some 40 lstat() calls and one read of /etc, microseconds. */
static uint64_t template_fingerprint(void)
{
	uint64_t h = fnv(0xcbf29ce484222325ULL, &(unsigned){ RUNNER_LAYOUT }, sizeof(unsigned));
	char path[NAME_MAX + 8];
	etc_name globbed[ETC_GLOB_MAX];
	struct stat st;
	size_t i, n = sizeof(etc_files) / sizeof(etc_files[0]), g = etc_glob(globbed);

	for (i = 0; i < g; i++)
		h = fnv(h, globbed[i], strlen(globbed[i]) + 1);
	for (i = 0; i < sizeof(etc_filtered) / sizeof(etc_filtered[0]); i++)
		h = fnv(h, &(uint64_t){ etc_filtered_fingerprint(etc_filtered[i]) },
			sizeof(uint64_t));
	for (i = 0; i < n + sizeof(root_dirs) / sizeof(root_dirs[0]); i++) {
		uint64_t v[7] = { 0 };

		if (i < n)
			snprintf(path, sizeof(path), "/etc/%s", etc_files[i]);
		else
			snprintf(path, sizeof(path), "/%s", root_dirs[i - n]);
		if (lstat(path, &st) == 0) {
			stat_words(&st, v);
			v[6] = 1;
		}
		h = fnv(h, v, sizeof(v));
	}
	return h;
}

/*
 * The template's /dev: the harmless devices, bound from the host, and the
 * /proc/self/fd links; empty shm and pts, where each command gets a tmpfs
 * and a devpts of its own (one shared /dev/shm would be a channel between
 * sandboxes).
 */
static int template_dev(const char *dev)
{
	static const char *const devs[] = { "null", "zero", "full", "random", "urandom", "tty" };
	static const char *const links[][2] = {
		{ "/proc/self/fd", "fd" },	 { "/proc/self/fd/0", "stdin" },
		{ "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
		{ "/proc/kcore", "core" },	 { "pts/ptmx", "ptmx" },
	};
	char from[64], to[128];
	size_t i;
	int r;

	if (mkdir(dev, 0755) < 0 ||
	    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
		return -errno;
	for (i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		snprintf(from, sizeof(from), "/dev/%s", devs[i]);
		snprintf(to, sizeof(to), "%s/%s", dev, devs[i]);
		r = bind_into(from, to);
		if (r < 0 && r != -ENOENT)
			return r;
	}
	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(to, sizeof(to), "%s/%s", dev, links[i][1]);
		if (symlink(links[i][0], to) < 0)
			return -errno;
	}
	snprintf(to, sizeof(to), "%s/shm", dev);
	if (mkdir(to, 0755) < 0)
		return -errno;
	snprintf(to, sizeof(to), "%s/pts", dev);
	if (mkdir(to, 0755) < 0)
		return -errno;
	/* The tmpfs itself read-only; the bound devices keep their flags. */
	return mount(NULL, dev, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
		     NULL) < 0
		       ? -errno
		       : 0;
}

/* /etc/@name of the host into the template's @etc: a regular file copied
 * (a copy costs less than a mount), a directory bound, a link made again
 * (to /usr, as most are, or within /etc: it resolves inside as on the
 * host); a missing one skipped. A @name within a directory (apt/...) gets
 * that directory made, holding only what is named. */
static int etc_entry(const char *etc, const char *name)
{
	char from[NAME_MAX + 8], to[PATH_MAX];
	const char *slash = strchr(name, '/');
	struct stat st;

	snprintf(from, sizeof(from), "/etc/%s", name);
	if (lstat(from, &st) < 0)
		return 0;
	if (slash) {
		snprintf(to, sizeof(to), "%s/%.*s", etc, (int)(slash - name), name);
		if (mkdir(to, 0755) < 0 && errno != EEXIST)
			return -errno;
	}
	snprintf(to, sizeof(to), "%s/%s", etc, name);
	if (S_ISLNK(st.st_mode))
		return copy_link(from, to);
	if (S_ISREG(st.st_mode))
		return copy_file(from, to);
	if (S_ISDIR(st.st_mode))
		return bind_into(from, to);
	return 0;
}

/* The etc_filtered directory /etc/@name into the template's @etc: made
 * (and its parents), holding a copy of each file etc_clean() lets in; a
 * missing one skipped. */
static int etc_filtered_dir(const char *etc, const char *name)
{
	char from[PATH_MAX], to[PATH_MAX], f[PATH_MAX + NAME_MAX + 2], t[PATH_MAX + NAME_MAX + 2];
	struct dirent *e;
	unsigned n = 0;
	size_t i;
	DIR *d;
	int r = 0;

	snprintf(from, sizeof(from), "/etc/%s", name);
	d = opendir(from);
	if (!d)
		return 0;
	snprintf(to, sizeof(to), "%s/%s", etc, name);
	for (i = strlen(etc) + 1; to[i] && r == 0; i++)
		if (to[i] == '/') {
			to[i] = '\0';
			if (mkdir(to, 0755) < 0 && errno != EEXIST)
				r = -errno;
			to[i] = '/';
		}
	if (r == 0 && mkdir(to, 0755) < 0 && errno != EEXIST)
		r = -errno;
	while (r == 0 && n < ETC_FILTERED_MAX && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		n++;
		snprintf(f, sizeof(f), "%s/%s", from, e->d_name);
		snprintf(t, sizeof(t), "%s/%s", to, e->d_name);
		r = etc_clean(f, t);
	}
	closedir(d);
	return r;
}

/* The template's /etc at @etc: etc_files and what etc_globs match, as
 * etc_entry() brings them in, the etc_filtered directories; an empty resolv.conf for each command's to
 * be bound on; all of it read-only. */
static int template_etc(const char *etc, const char **what)
{
	static etc_name globbed[ETC_GLOB_MAX];
	char to[600];
	size_t i, g;
	int r;

	if (mkdir(etc, 0755) < 0 ||
	    mount("tmpfs", etc, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=8m") < 0)
		return -errno;
	for (i = 0; i < sizeof(etc_files) / sizeof(etc_files[0]); i++) {
		*what = etc_files[i];
		r = etc_entry(etc, etc_files[i]);
		if (r < 0)
			return r;
	}
	g = etc_glob(globbed);
	for (i = 0; i < g; i++) {
		*what = globbed[i];
		r = etc_entry(etc, globbed[i]);
		if (r < 0)
			return r;
	}
	for (i = 0; i < sizeof(etc_filtered) / sizeof(etc_filtered[0]); i++) {
		*what = etc_filtered[i];
		r = etc_filtered_dir(etc, etc_filtered[i]);
		if (r < 0)
			return r;
	}
	*what = "mtab";
	snprintf(to, sizeof(to), "%s/mtab", etc);
	if (symlink("/proc/self/mounts", to) < 0)
		return -errno;
	snprintf(to, sizeof(to), "%s/resolv.conf", etc);
	r = mount_point(to, &(struct stat){ .st_mode = S_IFREG });
	if (r < 0)
		return r;
	return make_ro(etc, false);
}

/*
 * The builder's side: in a mount namespace of its own (a copy of the
 * host's, private), a tmpfs at NETNS_RUNNER_STAGE gets the template's
 * tree; pivot_root() into it and the host's mounts are let go. Reports on
 * @ready (a byte 0, or the positive errno and a message) and waits for EOF
 * on @hold, so that the parent can open its namespace. Never returns.
 */
static void template_build(int ready, int hold)
{
	char msg[300], to[128];
	const char *what = NETNS_RUNNER_STAGE;
	struct stat st;
	size_t i;
	int r = 0;

	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		goto fail;
	if (mkdir(NETNS_RUNNER_STAGE, 0755) < 0 && errno != EEXIST)
		goto fail;
	if (mount("tmpfs", NETNS_RUNNER_STAGE, "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=0755,size=64k") < 0)
		goto fail;
	what = "/usr";
	r = bind_into("/usr", NETNS_RUNNER_STAGE "/usr");
	if (r == 0)
		r = make_ro(NETNS_RUNNER_STAGE "/usr", false);
	if (r < 0)
		goto fail_r;
	for (i = 0; i < sizeof(root_dirs) / sizeof(root_dirs[0]); i++) {
		snprintf(to, sizeof(to), "/%s", root_dirs[i]);
		what = root_dirs[i];
		if (lstat(to, &st) < 0)
			continue;
		snprintf(to, sizeof(to), NETNS_RUNNER_STAGE "/%s", root_dirs[i]);
		if (S_ISLNK(st.st_mode)) {
			r = copy_link(to + sizeof(NETNS_RUNNER_STAGE) - 1, to);
			if (r < 0)
				goto fail_r;
		} else if (S_ISDIR(st.st_mode)) {
			r = bind_into(to + sizeof(NETNS_RUNNER_STAGE) - 1, to);
			if (r == 0)
				r = make_ro(to, false);
			if (r < 0)
				goto fail_r;
		}
	}
	r = template_etc(NETNS_RUNNER_STAGE "/etc", &what);
	if (r < 0)
		goto fail_r;
	what = "/dev";
	r = template_dev(NETNS_RUNNER_STAGE "/dev");
	if (r < 0)
		goto fail_r;
	what = NETNS_RUNNER_STAGE;
	if (mkdir(NETNS_RUNNER_STAGE TEMPLATE_ROOT, 0755) < 0 || chdir(NETNS_RUNNER_STAGE) < 0 ||
	    pivot_root(".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0 ||
	    mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
		    0)
		goto fail;
	msg[0] = 0;
	if (write(ready, msg, 1) != 1)
		_exit(1);
	/* Until the parent has opened /proc/PID/ns/mnt (bounded by it). */
	while (read(hold, msg, 1) < 0 && errno == EINTR)
		;
	_exit(0);
fail:
	r = -errno;
fail_r:
	msg[0] = (char)(-r < 256 && -r > 0 ? -r : EIO);
	snprintf(msg + 1, sizeof(msg) - 1, "%s", what);
	if (write(ready, msg, 1 + strlen(msg + 1)) < 0)
		_exit(1);
	_exit(1);
}

/* Keeps the template's namespace (fd @arg) at RUNNER_TEMPLATE; run where
 * /run/netns mounts are made, system calls only. */
static int template_pin(void *arg)
{
	char src[40];
	int k, fd, nsfd = *(int *)arg;

	for (k = 0; k < UNMOUNT_MAX && umount2(RUNNER_TEMPLATE, MNT_DETACH) == 0; k++)
		;
	fd = open(RUNNER_TEMPLATE, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0400);
	if (fd < 0)
		return -errno;
	close(fd);
	snprintf(src, sizeof(src), "/proc/self/fd/%d", nsfd);
	return mount(src, RUNNER_TEMPLATE, NULL, MS_BIND, NULL) < 0 ? -errno : 0;
}

/* The template if RUNNER_STAMP says it was built from @fp: its fd, or a
 * negative errno. */
static int template_open(uint64_t fp)
{
	unsigned long long ino, sfp;
	struct statfs sfs;
	struct stat st;
	const char *p;
	char buf[64];
	ssize_t n;
	int fd, sf, k;

	sf = open(RUNNER_STAMP, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (sf < 0)
		return -errno;
	n = read(sf, buf, sizeof(buf) - 1);
	close(sf);
	if (n <= 0)
		return -ESTALE;
	buf[n] = '\0';
	/* "%llx %llx\n", as cli_runner_template() writes it. */
	if (!text_ull(buf, 16, &p, &ino) || *p != ' ' || !text_ull(p + 1, 16, &p, &sfp) ||
	    sfp != fp)
		return -ESTALE;
	fd = open(RUNNER_TEMPLATE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	/* A new mount namespace never copies the bind mount of a mount
	 * namespace's file (a loop could follow): under `ip netns exec`, ours
	 * is such a copy, and the template is seen through the root of the
	 * process that ran it (or of PID 1). */
	for (k = 0; k < 2 && fstatfs(fd, &sfs) == 0 && sfs.f_type != NSFS_MAGIC; k++) {
		char path[sizeof("/proc//root") + 12 + sizeof(RUNNER_TEMPLATE)];

		close(fd);
		snprintf(path, sizeof(path), "/proc/%d/root%s", k == 0 ? (int)getppid() : 1,
			 RUNNER_TEMPLATE);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			return -errno;
	}
	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != NSFS_MAGIC || fstat(fd, &st) < 0 ||
	    st.st_ino != ino || ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNS) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/**
 * cli_runner_template() - the template's mount namespace (see the top)
 * @err:    why not (NULL: not wanted)
 *
 * Builds it when there is none, or when a host file it holds a copy of
 * has changed since. Return: an fd (close-on-exec), or a negative errno.
 */
static int cli_runner_template(struct sl_err *err)
{
	uint64_t fp = template_fingerprint();
	int ready[2] = { -1, -1 }, hold[2] = { -1, -1 };
	char msg[300], path[64], stamp[64];
	int fd, lock, r, status;
	bool said = false;
	ssize_t n;
	pid_t pid;

	fd = template_open(fp);
	if (fd >= 0)
		return fd;
	/* One builder at a time; the others take what it built. */
	lock = open(RUNNER_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		r = sl_err_sys(err, errno, "cannot lock `%s`", RUNNER_LOCK);
		if (lock >= 0)
			close(lock);
		return r;
	}
	fd = template_open(fp);
	if (fd >= 0)
		goto out;
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(hold, O_CLOEXEC) < 0) {
		fd = sl_err_sys(err, errno, "cannot build the runner's template");
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(ready[0]);
		close(hold[1]);
		template_build(ready[1], hold[0]);
	}
	close(ready[1]);
	close(hold[0]);
	ready[1] = hold[0] = -1;
	if (pid < 0) {
		fd = sl_err_sys(err, errno, "cannot fork");
		goto out;
	}
	n = read(ready[0], msg, sizeof(msg) - 1);
	if (n == 1 && msg[0] == 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
	} else {
		msg[n > 0 ? n : 0] = '\0';
		fd = n > 0 ? -(int)(unsigned char)msg[0] : -EIO;
		sl_err_sys(err, fd, "cannot build the runner's template (`%s`)",
			   n > 1 ? msg + 1 : "?");
		said = true;
	}
	close(hold[1]);
	hold[1] = -1;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (fd < 0) {
		if (!said)
			sl_err_sys(err, fd, "cannot open the runner's template");
		goto out;
	}
	/* Kept for the next command; if that fails, this one still runs. */
	r = netns_in_host_mount_ns(template_pin, &fd);
	if (r == 0) {
		struct stat st;
		int sf;

		fstat(fd, &st);
		n = snprintf(stamp, sizeof(stamp), "%llx %llx\n", (unsigned long long)st.st_ino,
			     (unsigned long long)fp);
		sf = open(RUNNER_STAMP ".tmp",
			  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (sf < 0 || write(sf, stamp, (size_t)n) != n || close(sf) < 0 ||
		    rename(RUNNER_STAMP ".tmp", RUNNER_STAMP) < 0)
			r = -errno;
	}
	if (r < 0)
		fprintf(stderr, "sluice: warning: cannot keep the runner's template at %s: %s\n",
			RUNNER_TEMPLATE, strerror(-r));
out:
	if (ready[0] >= 0)
		close(ready[0]);
	if (hold[1] >= 0)
		close(hold[1]);
	close(lock);
	return fd;
}

/* What cli_runner_prepare() readies for cli_runner_spawn(): open
 * descriptors (close-on-exec) and the filter. One command per process. */
static struct {
	int netfd, tmplfd, ws, resolv, bundle;
	int binds[CLI_BINDS_MAX];
	bool bind_dir[CLI_BINDS_MAX];
	uid_t uid;
	struct sock_filter prog[160];
	unsigned short nprog;
} prep;

/* A detached copy of the tree at @path (from @at; "" is @at itself),
 * read-only if @ro: an fd, or a negative errno. */
static int tree_at(int at, const char *path, bool ro)
{
	struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY };
	int fd = open_tree(at, path,
			   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
				   (path[0] ? 0 : AT_EMPTY_PATH));

	if (fd < 0)
		return -errno;
	if (ro && mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

static int tree_of(const char *path, bool ro)
{
	return tree_at(AT_FDCWD, path, ro);
}

/* The most links bind_source_open() follows, as the kernel's MAXSYMLINKS. */
#define BIND_LINKS_MAX 40

/*
 * Opens a --bind source (O_PATH) one component at a time, following only
 * symbolic links that root owns. A link that is not root's is one a
 * sandbox may have made (in its workspace, or in a directory it was given
 * to write), and root following it would bind what it names, the host's
 * `/` say, into the new sandbox. Each link is read through a descriptor of
 * it, so the link that was judged is the link that is followed.
 * Return: the descriptor; -ELOOP for a link that is not root's or more
 * than BIND_LINKS_MAX links; another negative errno.
 */
static int bind_source_open(const char *path)
{
	char buf[2 * PATH_MAX], link[PATH_MAX], *rest = buf;
	int dfd, links = 0;

	if (snprintf(buf, sizeof(buf), "%s", path) >= PATH_MAX)
		return -ENAMETOOLONG;
	dfd = open(buf[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	for (;;) {
		char *comp, *slash;
		struct stat st;
		ssize_t n;
		int fd, r;

		while (*rest == '/')
			rest++;
		if (!*rest)
			return dfd;
		comp = rest;
		slash = strchr(comp, '/');
		if (slash) {
			*slash = '\0';
			rest = slash + 1;
		} else {
			rest = comp + strlen(comp);
		}
		fd = openat(dfd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0) {
			r = -errno;
			if (fd >= 0)
				close(fd);
			close(dfd);
			return r;
		}
		if (!S_ISLNK(st.st_mode)) {
			close(dfd);
			dfd = fd;
			continue;
		}
		n = st.st_uid == 0 && ++links <= BIND_LINKS_MAX
			    ? readlinkat(fd, "", link, sizeof(link) - 1)
			    : (errno = ELOOP, -1);
		r = -errno;
		close(fd);
		if (n <= 0) {
			close(dfd);
			return n < 0 ? r : -ENOENT;
		}
		link[n] = '\0';
		/* The rest of the path now follows what the link says. */
		{
			char next[2 * PATH_MAX];

			if (snprintf(next, sizeof(next), "%s/%s", link, rest) >= PATH_MAX) {
				close(dfd);
				return -ENAMETOOLONG;
			}
			memcpy(buf, next, strlen(next) + 1);
			rest = buf;
		}
		if (link[0] == '/') {
			close(dfd);
			dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (dfd < 0)
				return -errno;
		}
	}
}

static void put_env(const char *key, const char *value, void *arg)
{
	int *r = arg;

	if (setenv(key, value, 1) < 0 && *r == 0)
		*r = -errno;
}

/**
 * cli_runner_prepare() - ready a contained command of @sb (see the top)
 * @sb: the sandbox
 * @o:  the options (not --privileged)
 *
 * In the caller, as root: sets the command's environment (placeholders from
 * the broker's control socket), opens what cli_runner_spawn() binds in.
 * Return: 0, or -1 with the error printed (nothing has run).
 */
int cli_runner_prepare(const struct netns_sandbox *sb, const struct cli_runner *o)
{
	struct sl_err err = { 0 };
	char path[512];
	struct stat st;
	unsigned k;
	int r = 0;

	prep.uid = cli_sandbox_uid(sb);
	prep.ws = prep.resolv = prep.bundle = prep.netfd = prep.tmplfd = -1;
	for (k = 0; k < o->nbinds; k++)
		prep.binds[k] = -1;
	for (k = 0; k < o->nbinds; k++) {
		/* An O_PATH descriptor until the tree is cloned from it below. */
		prep.binds[k] = bind_source_open(o->binds[k].src);
		if (prep.binds[k] == -ELOOP) {
			fprintf(stderr,
				"sluice: --bind `%s`: a symbolic link on the way is not root's "
				"(a sandbox may have made it), or there are more than %d: refused\n",
				o->binds[k].src, BIND_LINKS_MAX);
			return -1;
		}
		if (prep.binds[k] < 0 || fstat(prep.binds[k], &st) < 0) {
			fprintf(stderr, "sluice: --bind `%s`: %s\n", o->binds[k].src,
				strerror(prep.binds[k] < 0 ? -prep.binds[k] : errno));
			return -1;
		}
		prep.bind_dir[k] = S_ISDIR(st.st_mode);
	}
	r = workspace_open(sb, prep.uid, &err);
	if (r < 0) {
		fprintf(stderr, "sluice: %s\n", sl_err_msg(&err));
		return -1;
	}
	close(r);
	r = cli_seccomp_build(prep.prog, sizeof(prep.prog) / sizeof(prep.prog[0]));
	if (r < 0) {
		fprintf(stderr, "sluice: cannot build the seccomp filter: %s\n", strerror(-r));
		return -1;
	}
	prep.nprog = (unsigned short)r;
	/* The environment before anything else: its placeholders come from
	 * the broker's control socket. */
	r = 0;
	if (netns_env_each(sb, put_env, &r) < 0)
		return -1; /* said why */
	if (r == 0 && setenv("HOME", NETNS_WORKSPACE_INSIDE, 1) < 0)
		r = -errno;
	if (r < 0) {
		fprintf(stderr, "sluice: cannot set the environment: %s\n", strerror(-r));
		return -1;
	}
	prep.netfd = netns_ns_open(sb->name);
	if (prep.netfd < 0) {
		fprintf(stderr, "sluice: cannot open %s/%s: %s\n", NETNS_RUN_DIR, sb->name,
			prep.netfd == -EINVAL ? "not a network namespace" : strerror(-prep.netfd));
		return -1;
	}
	netns_path(path, sizeof(path), NETNS_WORKSPACE_DIR, sb->name, NULL);
	prep.ws = tree_of(path, false);
	if (prep.ws < 0) {
		fprintf(stderr, "sluice: cannot bind the workspace `%s`: %s\n", path,
			strerror(-prep.ws));
		return -1;
	}
	for (k = 0; k < o->nbinds; k++) {
		int src = prep.binds[k];

		prep.binds[k] = tree_at(src, "", o->binds[k].ro);
		close(src);
		if (prep.binds[k] < 0) {
			fprintf(stderr, "sluice: --bind `%s`: %s\n", o->binds[k].src,
				strerror(-prep.binds[k]));
			return -1;
		}
	}
	/* Names still resolve without the sandbox's resolv.conf (DNS to any
	 * server is the broker's), if less conveniently: warn and go on. */
	netns_path(path, sizeof(path), NETNS_ETC_DIR, sb->name, "resolv.conf");
	prep.resolv = tree_of(path, true);
	if (prep.resolv < 0)
		fprintf(stderr, "sluice: warning: cannot bind %s over /etc/resolv.conf: %s\n", path,
			strerror(-prep.resolv));
	netns_path(path, sizeof(path), NETNS_STATE_DIR, sb->name, "ca-bundle.crt");
	prep.bundle = tree_of(path, true);
	prep.tmplfd = cli_runner_template(&err);
	if (prep.tmplfd < 0) {
		fprintf(stderr, "sluice: %s\n", sl_err_msg(&err));
		return -1;
	}
	return 0;
}

/* Binds the detached tree @fd on the mount point @to (a descriptor: the
 * place make_path() opened, never a path looked up again). */
static int attach_at(int fd, int to)
{
	return move_mount(fd, "", to, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0
		       ? -errno
		       : 0;
}

/* Attaches the detached tree @fd at @to; 0 or a negative errno. */
static int attach(int fd, const char *to)
{
	return move_mount(fd, "", AT_FDCWD, to, MOVE_MOUNT_F_EMPTY_PATH) < 0 ? -errno : 0;
}

/*
 * mkdir -p of @path (absolute, below TEMPLATE_ROOT), the last part a
 * directory or (@dir false) an empty file to bind on; *@fdp is then a
 * descriptor of it to mount on (attach_at()). No symbolic link is
 * followed and no `..` taken on the way: below the workspace the sandbox
 * writes the tree, and a link it left there must not steer root, which
 * makes these before the pivot, to a place of its choosing (another
 * --bind's host directory, say). What is made in the workspace is given
 * to the sandbox's uid, as anything else there is: it may remove it later.
 * Return: 0; -ELOOP for a link on the way; another negative errno.
 */
static int make_path(const char *path, bool dir, int *fdp)
{
	static const char ws[] = TEMPLATE_ROOT NETNS_WORKSPACE_INSIDE "/";
	char buf[600], *comp, *next, *save = NULL;
	int cur, fd = -1;

	*fdp = -1;
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return -errno;
	for (comp = strtok_r(buf, "/", &save); comp; comp = next) {
		bool last, in_ws;
		int made;

		next = strtok_r(NULL, "/", &save);
		last = !next;
		in_ws = !strncmp(path, ws, sizeof(ws) - 1) &&
			(size_t)(comp - buf) >= sizeof(ws) - 1;
		if (!strcmp(comp, "."))
			continue;
		if (!strcmp(comp, "..")) {
			close(cur);
			return -EINVAL;
		}
		if (!last || dir) {
			made = mkdirat(cur, comp, 0755) == 0;
			if (!made && errno != EEXIST)
				goto fail;
			fd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		} else {
			fd = openat(cur, comp,
				    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK |
					    O_CLOEXEC,
				    0644);
			made = fd >= 0;
			if (fd < 0 && errno == EEXIST)
				fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd < 0)
			goto fail;
		if (made && in_ws) {
			/* Best effort: a root-owned mount point is only untidy. */
			int ign = fchownat(fd, "", prep.uid, prep.uid, AT_EMPTY_PATH);

			(void)ign;
		}
		close(cur);
		cur = fd;
	}
	if (!dir) {
		struct stat st;

		/* O_PATH with O_NOFOLLOW opens a link itself: refused here. */
		int e = fstat(cur, &st) < 0    ? -errno
			: S_ISLNK(st.st_mode)  ? -ELOOP
			: !S_ISREG(st.st_mode) ? -EINVAL
					       : 0;

		if (e < 0) {
			close(cur);
			return e;
		}
	}
	*fdp = cur;
	return 0;
fail:
	fd = errno == ENOTDIR ? -ELOOP : -errno; /* O_DIRECTORY|O_NOFOLLOW on a link */
	close(cur);
	return fd;
}

/*
 * In the new namespaces, as root, joined to the sandbox's network and to
 * a copy of the template: the command's root at TEMPLATE_ROOT, then
 * pivot_root() into it. @what says where it failed.
 */
static int build_root(const struct netns_sandbox *sb, const struct cli_runner *o, const char **what)
{
	char to[600];
	struct stat st;
	unsigned k;
	size_t i;
	int r, fd = -1;

#define R TEMPLATE_ROOT
	*what = R;
	if (mount("tmpfs", R, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
		return -errno;
	if (mkdir(R "/usr", 0755) < 0 || mkdir(R "/etc", 0755) < 0 || mkdir(R "/dev", 0755) < 0 ||
	    mkdir(R "/proc", 0755) < 0 || mkdir(R "/sys", 0755) < 0 || mkdir(R "/tmp", 01777) < 0 ||
	    mkdir(R "/run", 0755) < 0 || mkdir(R NETNS_WORKSPACE_INSIDE, 0755) < 0)
		return -errno;
	if (mount("/usr", R "/usr", NULL, MS_BIND | MS_REC, NULL) < 0 ||
	    mount("/etc", R "/etc", NULL, MS_BIND | MS_REC, NULL) < 0 ||
	    mount("/dev", R "/dev", NULL, MS_BIND | MS_REC, NULL) < 0)
		return -errno;
	for (i = 0; i < sizeof(root_dirs) / sizeof(root_dirs[0]); i++) {
		const char *from = to + sizeof(R) - 1;
		snprintf(to, sizeof(to), R "/%s", root_dirs[i]);
		if (lstat(from, &st) < 0)
			continue;
		*what = from;
		if (S_ISLNK(st.st_mode)) {
			r = copy_link(from, to);
			if (r < 0)
				return r;
		} else if (mkdir(to, 0755) < 0 ||
			   mount(from, to, NULL, MS_BIND | MS_REC, NULL) < 0) {
			return -errno;
		}
	}
	*what = "/dev";
	if (mount("tmpfs", R "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=01777") < 0 ||
	    mount("devpts", R "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=620") < 0)
		return -errno;
	/* A sysfs mount shows the links of the namespace that mounted it. */
	*what = "/sys";
	if (mount("sysfs", R "/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) <
	    0)
		return -errno;
	*what = "/tmp";
	if (mount("tmpfs", R "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=01777") < 0)
		return -errno;
	/* /run holds this sandbox's CA bundle, where the environment names it,
	 * and nothing else; it is also the system store, for programs that
	 * ignore the variables. */
	if (prep.bundle >= 0) {
		*what = "the CA bundle";
		snprintf(to, sizeof(to), R "%s/%s/ca-bundle.crt", NETNS_STATE_DIR, sb->name);
		r = make_path(to, false, &fd);
		if (r == 0)
			r = attach_at(prep.bundle, fd);
		if (fd >= 0)
			close(fd);
		if (r < 0)
			return r;
		if (stat(R NETNS_SYSTEM_CA, &st) == 0 &&
		    mount(to, R NETNS_SYSTEM_CA, NULL, MS_BIND, NULL) < 0)
			return -errno;
	}
	if (prep.resolv >= 0) {
		*what = "/etc/resolv.conf";
		r = attach(prep.resolv, R "/etc/resolv.conf");
		if (r < 0)
			return r;
	}
	*what = "the workspace";
	r = attach(prep.ws, R NETNS_WORKSPACE_INSIDE);
	if (r < 0)
		return r;
	for (k = 0; k < o->nbinds; k++) {
		*what = o->binds[k].dst;
		snprintf(to, sizeof(to), R "%s", o->binds[k].dst);
		r = make_path(to, prep.bind_dir[k], &fd);
		if (r == 0)
			r = attach_at(prep.binds[k], fd);
		if (fd >= 0)
			close(fd);
		if (r < 0)
			return r;
	}
	/* Of this PID namespace: mounted by its pid 1, which this is. */
	*what = "/proc";
	if (mount("proc", R "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return -errno;
	/* Everything else is left behind: the template's own root too. */
	*what = "pivot_root";
	if (chdir(R) < 0 || pivot_root(".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
	    chdir("/") < 0)
		return -errno;
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
	    0)
		return -errno;
#undef R
	return 0;
}

/* Writes @s to the file @path of /proc/self; 0 or a negative errno. */
static int write_proc(const char *path, const char *s)
{
	size_t len = strlen(s);
	int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, len) != (ssize_t)len)
		r = -errno;
	close(fd);
	return r;
}

/*
 * From root in the new namespaces to the command's identity, in stages:
 *  1. the sandbox's uid and gid outside, no supplementary group: every
 *     capability in the initial user namespace goes with the change of uid;
 *  2. a user namespace of its own, whose only mapping is the inside
 *     identity (root, or --user) to that uid: root inside owns nothing
 *     outside. The process writes the maps itself, allowed for its own
 *     uid; dumpable meanwhile, as /proc/self is its uid's only then;
 *  3. the bounding set emptied (CAP_SETPCAP, held in the new namespace
 *     until the next stage), so that an exec as root inside gains nothing;
 *  4. the inside identity, and no capability left at all;
 *  5. no_new_privs, then the seccomp filter (which needs it).
 */
static int drop(const struct cli_runner *o, const char **what)
{
	uid_t uid = prep.uid, in_uid = o->user_set ? o->uid : 0;
	gid_t in_gid = o->user_set ? o->gid : 0;
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };
	struct sock_fprog fprog = { .len = prep.nprog, .filter = prep.prog };
	char map[64];
	int c, r;

	*what = "uid";
	if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
		return -errno;
	if (getuid() != uid || geteuid() != uid)
		return -EPERM;
	*what = "user namespace";
	if (unshare(CLONE_NEWUSER) < 0 || prctl(PR_SET_DUMPABLE, 1) < 0)
		return -errno;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)in_uid, (unsigned)uid);
	r = write_proc("/proc/self/uid_map", map);
	if (r == 0)
		r = write_proc("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)in_gid, (unsigned)uid);
	if (r == 0)
		r = write_proc("/proc/self/gid_map", map);
	if (prctl(PR_SET_DUMPABLE, 0) < 0 && r == 0)
		r = -errno;
	if (r < 0)
		return r;
	*what = "capabilities";
	for (c = 0; c <= 63; c++) {
		if (prctl(PR_CAPBSET_DROP, c) < 0) {
			if (errno == EINVAL)
				break;
			return -errno;
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
	    setresgid(in_gid, in_gid, in_gid) < 0 || setresuid(in_uid, in_uid, in_uid) < 0 ||
	    syscall(SYS_capset, &h, d) < 0)
		return -errno;
	*what = "seccomp";
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) < 0)
		return -errno;
	return 0;
}

/* The command, once forked (0 until then), and the signals init passes on. */
static volatile pid_t init_cmd;
static const int init_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

/*
 * Passes a signal sluice sent to the command. One from the terminal
 * (SI_KERNEL) went to the whole foreground process group, the command
 * included: sending it again would deliver it twice. Before there is a
 * command, it ends the sandbox.
 */
static void init_forward(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	if (si->si_code == SI_KERNEL)
		return;
	if (init_cmd > 0)
		kill(init_cmd, sig);
	else
		_exit(128 + sig);
}

/* The command could not be started: says why, and ends with the status a
 * shell gives (127: not found, 126: found but not runnable). */
__attribute__((noreturn)) static void command_failed(const char *cmd, int e)
{
	fprintf(stderr, "sluice: %s: %s\n", cmd, strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

/*
 * Starts the command from init, as execvp() finds and runs it, with
 * init's signal mask and the signals init passes on at their defaults.
 * By posix_spawnp(): a vfork, with no copy of init's memory to make and
 * fault in (0.8 ms less per command where page faults go through a
 * hypervisor). A file in no executable format (ENOEXEC: a script without
 * "#!"), which execvp() hands to /bin/sh and posix_spawnp() does not, is
 * started by fork() and execvp(). Returns the command's pid; when it
 * cannot start, says why and ends init: 127 when there is no such
 * command, 126 when it cannot run (or posix_spawnp() found no process to
 * run it in), 1 when fork() failed.
 */
static pid_t start_command(char **argv)
{
	posix_spawnattr_t attr;
	sigset_t dfl;
	pid_t pid = -1;
	size_t k;
	int e;

	sigemptyset(&dfl);
	for (k = 0; k < sizeof(init_signals) / sizeof(init_signals[0]); k++)
		sigaddset(&dfl, init_signals[k]);
	e = posix_spawnattr_init(&attr);
	if (e == 0) {
		e = posix_spawnattr_setsigdefault(&attr, &dfl);
		if (e == 0)
			e = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
		if (e == 0)
			e = posix_spawnp(&pid, argv[0], NULL, &attr, argv, environ);
		posix_spawnattr_destroy(&attr);
	}
	if (e == 0)
		return pid;
	if (e != ENOEXEC)
		command_failed(argv[0], e);
	pid = fork();
	if (pid == 0) {
		for (k = 0; k < sizeof(init_signals) / sizeof(init_signals[0]); k++)
			signal(init_signals[k], SIG_DFL);
		execvp(argv[0], argv);
		command_failed(argv[0], errno);
	}
	if (pid < 0) {
		fprintf(stderr, "sluice: cannot fork: %s\n", strerror(errno));
		_exit(1);
	}
	return pid;
}

/* The sandbox's pid 1 (see the top). Never returns. */
static void run_init(const struct netns_sandbox *sb, const struct cli_runner *o, char **argv,
		     const sigset_t *mask)
{
	struct sigaction sa = { .sa_sigaction = init_forward, .sa_flags = SA_SIGINFO | SA_RESTART };
	const char *what = "";
	size_t k;
	int r, status;
	pid_t pid;

	/* Dies with the sluice that waits for it; the kernel then ends every
	 * process of the PID namespace. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sigemptyset(&sa.sa_mask);
	for (k = 0; k < sizeof(init_signals) / sizeof(init_signals[0]); k++)
		sigaction(init_signals[k], &sa, NULL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	what = "the sandbox's network namespace";
	r = setns(prep.netfd, CLONE_NEWNET) < 0 ? -errno : 0;
	if (r == 0) {
		what = "the runner's template";
		r = setns(prep.tmplfd, CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0 ? -errno : 0;
	}
	if (r == 0)
		r = build_root(sb, o, &what);
	if (r == 0) {
		what = "hostname";
		r = sethostname(sb->name, strlen(sb->name)) < 0 ? -errno : 0;
	}
	if (r == 0)
		r = drop(o, &what);
	/* The identity change cleared the parent-death signal. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (r == 0 && chdir(NETNS_WORKSPACE_INSIDE) < 0) {
		what = NETNS_WORKSPACE_INSIDE;
		r = -errno;
	}
	if (r < 0) {
		fprintf(stderr, "sluice: cannot contain the command (%s): %s\n", what,
			strerror(-r));
		_exit(1);
	}
	/* Nothing the caller left open goes in but stdin, stdout and stderr:
	 * a descriptor of a host file or directory is a way around the mount
	 * namespace (openat() from it). Nor does init keep any (the sandbox's
	 * network namespace, the template): it needs none from here on. */
	close_range(3, ~0U, 0);
	fflush(NULL);
	init_cmd = pid = start_command(argv);
	/* Reaps whatever is orphaned here until the command ends; then the
	 * kernel ends the rest with this process. */
	for (;;) {
		pid_t w = waitpid(-1, &status, 0);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			_exit(1);
	}
	_exit(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status));
}

/**
 * cli_runner_spawn() - start @argv contained in @sb, prepared
 * @sb:   the sandbox (cli_runner_prepare() done)
 * @o:    the options
 * @argv: the command
 * @mask: the signal mask for the command (the caller holds the forwarded
 *        signals meanwhile)
 *
 * Return: the pid of the sandbox's init (whose exit status is the
 * command's), or a negative errno.
 */
pid_t cli_runner_spawn(const struct netns_sandbox *sb, const struct cli_runner *o, char **argv,
		       const sigset_t *mask)
{
	pid_t pid;

	fflush(NULL);
	/* As fork(), into new PID, IPC, UTS and cgroup namespaces. */
	pid = (pid_t)syscall(SYS_clone,
			     CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | SIGCHLD,
			     NULL, NULL, NULL, 0);
	if (pid == 0)
		run_init(sb, o, argv, mask);
	return pid < 0 ? -errno : pid;
}
