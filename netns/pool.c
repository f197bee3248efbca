// SPDX-License-Identifier: MIT
/* A pool of bare network namespaces made ahead, so that `sluice create`
 * takes one instead of paying unshare(CLONE_NEWNET) and the sysctl writes
 * (about 1.25 ms of a create on 2 cores).
 *
 * Theory of operation: the pool is a directory, NETNS_POOL_DIR, root's and
 * 0700, made a private mount of its own (bound on itself): an entry's
 * unmount then propagates nowhere (under the shared /run/netns it reaches
 * every mount namespace sharing it: 1.3 ms of a delete in one measurement).
 * A mount namespace made while an entry is here (`ip netns exec`, a
 * service's private mounts) has a copy of its mount all the same; the
 * entry's unlink detaches that too (the kernel drops the mounts on a
 * removed file in every mount namespace), so no copy keeps a namespace
 * taken from the pool. In its versioned
 * subdirectory (NETNS_POOL_VERSION: a binary takes only entries of its own
 * making) each entry is a file ID, bind-mounted with a namespace's nsfs
 * file as /run/netns/NAME is, holding nothing but lo, IPv6 off for all,
 * default and lo; ID.ready, made after the mount, says it may be taken.
 *
 * A taker claims an entry by renaming ID.ready to ID.taken (of two takers,
 * one rename succeeds), opens it and checks it is a network namespace; the
 * unmount and removal of ID, then of ID.taken (netns_pool_release()), wait
 * until the create has answered: the claim keeps every other taker away
 * meanwhile, and the namespace lives on in the taker's descriptor and then
 * in /run/netns/NAME. Nothing ties an entry to a broker: one
 * pool serves every broker of the machine. After a plain `sluice create`
 * has answered and exited, its lingering child (linger.c) adds one entry
 * while the pool holds fewer than NETNS_POOL_MAX, under a lock that also
 * makes it the only maker: so, under that lock, an entry with no marker
 * is a maker's that died half-way, and one whose ID.taken is older than
 * NETNS_POOL_STALE_S a taker's that did; both are removed then (a taker
 * still at work loses the entry, never the namespace it holds).
 *
 * Nothing here may make a create fail: whatever is wrong with an entry, it
 * is dropped and the create makes its namespace as before. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <libmnl/libmnl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "netns/netns_internal.h"

/* The bound of one scan of the pool: far more than it ever holds. */
#define POOL_SCAN_MAX 64
#define SUFFIX_READY ".ready"
#define SUFFIX_TAKEN ".taken"
#define SL_STATX_ATTR_MOUNT_ROOT 0x00002000ULL

/**
 * netns_pool_enabled() - may this process use the pool?
 *
 * Return: false when the environment says SLUICE_NETNS_POOL=0.
 */
bool netns_pool_enabled(void)
{
	const char *v = getenv("SLUICE_NETNS_POOL");

	return !v || strcmp(v, "0") != 0;
}

/**
 * netns_pool_dir() - the pool's directory
 *
 * NETNS_POOL_DIR, or for tests SLUICE_NETNS_POOL_DIR when sluice runs as
 * root (real and effective) and it names a dot entry directly under
 * NETNS_STATE_DIR (so that no scan of that directory sees it either).
 *
 * Return: the path (static or the environment's).
 */
const char *netns_pool_dir(void)
{
	const char *v = getenv("SLUICE_NETNS_POOL_DIR");
	size_t n = strlen(NETNS_STATE_DIR "/.");

	if (!v || getuid() != 0 || geteuid() != 0 || strncmp(v, NETNS_STATE_DIR "/.", n) != 0 ||
	    !v[n] || strchr(v + n, '/') || strstr(v, "..") || strlen(v) > 200)
		return NETNS_POOL_DIR;
	return v;
}

static bool has_suffix(const char *name, const char *suffix, size_t *base)
{
	size_t n = strlen(name), k = strlen(suffix);

	if (n <= k || strcmp(name + n - k, suffix) != 0)
		return false;
	*base = n - k;
	return true;
}

/**
 * netns_pool_claim() - claim one ready entry of the pool
 * @dfd: the pool's versioned directory
 * @id:  on success, the entry's name
 * @len: room in @id
 *
 * Renames ID.ready to ID.taken: of two claims of one entry, one succeeds.
 *
 * Return: 0; -ENOENT when no entry is ready; another negative errno.
 */
int netns_pool_claim(int dfd, char *id, size_t len)
{
	struct dirent *de;
	unsigned n = 0;
	DIR *d;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = -ENOENT;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		close(fd);
		return r;
	}
	while (n++ < POOL_SCAN_MAX && (de = readdir(d))) {
		char taken[NAME_MAX + 16];
		size_t base;

		if (de->d_name[0] == '.' || !has_suffix(de->d_name, SUFFIX_READY, &base) ||
		    base >= len || base + sizeof(SUFFIX_TAKEN) > sizeof(taken))
			continue;
		snprintf(taken, sizeof(taken), "%.*s" SUFFIX_TAKEN, (int)base, de->d_name);
		/* RENAME_NOREPLACE: a stale ID.taken is the sweep's, not ours. */
		if (renameat2(dfd, de->d_name, dfd, taken, RENAME_NOREPLACE) < 0)
			continue;
		snprintf(id, len, "%.*s", (int)base, de->d_name);
		r = 0;
		break;
	}
	closedir(d);
	return r;
}

/* Is there a file @name@suffix in @dfd, made (or renamed) at or after
 * @since (0: whenever)? */
static bool marker(int dfd, const char *name, size_t base, const char *suffix, time_t since)
{
	char path[NAME_MAX + 1];
	struct stat st;
	int n = snprintf(path, sizeof(path), "%.*s%s", (int)base, name, suffix);

	if (n < 0 || (size_t)n >= sizeof(path))
		return false;
	if (fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	/* A rename sets the ctime: when the entry was claimed. */
	return st.st_ctime >= since;
}

/**
 * netns_pool_sweep() - count the ready entries, drop what is left half-way
 * @dfd:  the pool's versioned directory
 * @now:  the time
 * @drop: removes entry @id of @dfd (unmount, unlink)
 * @arg:  passed to @drop
 *
 * Only for the holder of the pool's lock (see the file's top): an entry
 * with no marker, or whose ID.taken is NETNS_POOL_STALE_S old, is
 * dropped, and so is a marker without its entry. Bounded by POOL_SCAN_MAX.
 *
 * Return: the number of ready entries, or a negative errno.
 */
int netns_pool_sweep(int dfd, time_t now, void (*drop)(int dfd, const char *id, void *arg),
		     void *arg)
{
	struct dirent *de;
	unsigned n = 0;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), ready = 0;
	time_t stale = now - NETNS_POOL_STALE_S;
	DIR *d;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		ready = -errno;
		close(fd);
		return ready;
	}
	while (n++ < POOL_SCAN_MAX && (de = readdir(d))) {
		const char *name = de->d_name;
		char entry[NAME_MAX + 16];
		size_t base;
		bool is_ready, ready_m, taken_m;

		if (name[0] == '.')
			continue;
		is_ready = has_suffix(name, SUFFIX_READY, &base);
		if (is_ready || has_suffix(name, SUFFIX_TAKEN, &base)) {
			/* A marker whose entry is gone: the entry's end went
			 * wrong, or a taker died between its two unlinks. */
			snprintf(entry, sizeof(entry), "%.*s", (int)base, name);
			if (faccessat(dfd, entry, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
			    errno != ENOENT)
				ready += is_ready;
			else if (is_ready || !marker(dfd, name, strlen(name), "", stale))
				unlinkat(dfd, name, 0);
			continue;
		}
		base = strlen(name);
		ready_m = marker(dfd, name, base, SUFFIX_READY, 0);
		taken_m = marker(dfd, name, base, SUFFIX_TAKEN, stale);
		if (ready_m || taken_m)
			continue;
		drop(dfd, name, arg);
		snprintf(entry, sizeof(entry), "%s" SUFFIX_TAKEN, name);
		unlinkat(dfd, entry, 0);
	}
	closedir(d);
	return ready;
}

/* Unmounts and removes the entry @id of @dir, whose fd is @dfd. In the
 * mount namespace of the pool's mounts. */
static void drop_entry(int dfd, const char *id, void *arg)
{
	const char *dir = arg;
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, id);
	umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
	unlinkat(dfd, id, 0);
}

/* Opens the pool's versioned directory @dir, checked: a directory (not a
 * symlink), root's, 0700. Return: the fd or a negative errno. */
static int open_checked(const char *dir)
{
	struct stat st;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 07777) != 0700) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

struct take {
	char dir[300]; /* the versioned directory */
	int dfd;       /* its fd: one directory, seen from any mount namespace */
	char id[NAME_MAX + 1];
	int fd; /* the namespace, on success */
};

/* Is @fd a network namespace's nsfs file, a regular file as nsfs shows it? */
static bool is_netns(int fd)
{
	struct statfs sfs;
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fstatfs(fd, &sfs) == 0 &&
	       sfs.f_type == NSFS_MAGIC && ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWNET;
}

/* In the pool's mount namespace, with this process's descriptors: open the
 * entry claimed (system calls only). */
static int open_there(void *arg)
{
	struct take *t = arg;

	t->fd = openat(t->dfd, t->id, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return t->fd < 0 ? -errno : 0;
}

struct release {
	char dir[300];
	const char *id;
};

/* In the pool's mount namespace: unmount and remove an entry taken, then
 * its claim (system calls only). */
static int release_there(void *arg)
{
	const struct release *rl = arg;
	char path[600], taken[NAME_MAX + 16];
	int dfd = open_checked(rl->dir);

	if (dfd < 0)
		return dfd;
	snprintf(path, sizeof(path), "%s/%s", rl->dir, rl->id);
	umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
	unlinkat(dfd, rl->id, 0);
	snprintf(taken, sizeof(taken), "%s" SUFFIX_TAKEN, rl->id);
	unlinkat(dfd, taken, 0);
	close(dfd);
	return 0;
}

/**
 * netns_pool_release() - remove the entry of a namespace taken from the pool
 * @mntfd: the pool's mount namespace (netns_host_mount_ns()); not closed
 * @id:    the entry, as netns_pool_take() named it
 *
 * The namespace lives on in whatever holds it. What is slow (an unmount,
 * two unlinks) need not be done before the create answers: its claim keeps
 * the entry from every other taker meanwhile.
 */
void netns_pool_release(int mntfd, const char *id)
{
	struct release rl = { .id = id };

	snprintf(rl.dir, sizeof(rl.dir), "%s/" NETNS_POOL_VERSION, netns_pool_dir());
	netns_in_mount_ns(mntfd, release_there, &rl);
}

/**
 * netns_pool_take() - a network namespace from the pool
 * @nsfd: on success, the namespace (the caller closes it)
 * @id:   on success, its entry, still there, for netns_pool_release()
 * @len:  room in @id (NAME_MAX + 1)
 *
 * The namespace is as the pool's maker left it, if nobody has been at it:
 * the caller checks what it holds (netns_pool_only_lo()) before using it.
 *
 * Return: 0; -ENOENT when the pool is off, absent or empty; another
 * negative errno when the entry taken was no network namespace (then it is
 * removed here).
 */
int netns_pool_take(int *nsfd, char *id, size_t len)
{
	struct take t = { .fd = -1 };
	int r, mntfd;

	if (!netns_pool_enabled())
		return -ENOENT;
	snprintf(t.dir, sizeof(t.dir), "%s/" NETNS_POOL_VERSION, netns_pool_dir());
	t.dfd = open_checked(t.dir);
	if (t.dfd < 0)
		return t.dfd == -EPERM ? -EPERM : -ENOENT;
	/* Claimed here: the directory is the same in every mount namespace;
	 * its mounts are not, and the entry is opened where they are. */
	r = netns_pool_claim(t.dfd, t.id, sizeof(t.id) - sizeof(SUFFIX_TAKEN));
	if (r == 0)
		r = netns_in_host_mount_ns_files(open_there, &t);
	close(t.dfd);
	if (r == -ENOENT && !t.id[0])
		return r;
	if (r == 0 && is_netns(t.fd) && strlen(t.id) < len) {
		snprintf(id, len, "%s", t.id);
		*nsfd = t.fd;
		return 0;
	}
	if (t.fd >= 0)
		close(t.fd);
	mntfd = netns_host_mount_ns();
	netns_pool_release(mntfd, t.id);
	if (mntfd >= 0)
		close(mntfd);
	return r < 0 ? r : -EINVAL;
}

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
	unsigned *others = data;

	if (nlh->nlmsg_type == RTM_NEWLINK && ifm->ifi_index != 1)
		(*others)++;
	return MNL_CB_OK;
}

/**
 * netns_pool_only_lo() - does the namespace of @r hold no link but lo?
 * @r: an rtnetlink socket in it
 *
 * One dump of its links: a namespace someone has added to is not used.
 *
 * Return: 1, 0, or a negative errno.
 */
int netns_pool_only_lo(struct netns_rtnl *r)
{
	char buf[8192];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtgenmsg *g;
	unsigned others = 0, rounds;
	uint32_t seq;

	nlh->nlmsg_type = RTM_GETLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = seq = ++r->seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->rtgen_family = AF_UNSPEC;
	if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	/* A handful of links at most; more rounds than that is a no. */
	for (rounds = 0; rounds < 64; rounds++) {
		ssize_t n = mnl_socket_recvfrom(r->nl, buf, sizeof(buf));
		int k;

		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		k = mnl_cb_run(buf, (size_t)n, seq, r->portid, link_cb, &others);
		if (k == MNL_CB_ERROR)
			return errno ? -errno : -EIO;
		if (k == MNL_CB_STOP)
			return others == 0;
	}
	return 0;
}

/* The most half-made entries one refill removes. */
#define DROP_MAX 8

struct fill {
	char top[256]; /* the pool directory */
	char dir[300]; /* its versioned subdirectory */
	int lock;      /* the versioned directory, flock()ed */
	int nsfd;
	char id[48]; /* unique over time: inode numbers of namespaces are reused */
	unsigned ndrop;
	char drop[DROP_MAX][NAME_MAX + 1]; /* entries the sweep found half-made */
};

/* Makes the pool directory, a private mount of its own the first time, and
 * its versioned subdirectory. System calls only. */
static int fill_dirs(void *arg)
{
	struct fill *f = arg;
	struct statx stx;
	int fd;

	if (mkdir(NETNS_STATE_DIR, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (mkdir(f->top, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = open_checked(f->top);
	if (fd < 0)
		return fd;
	close(fd);
	if (statx(AT_FDCWD, f->top, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) < 0)
		return -errno;
	if (!(stx.stx_attributes_mask & SL_STATX_ATTR_MOUNT_ROOT))
		return -ENOSYS;
	if (!(stx.stx_attributes & SL_STATX_ATTR_MOUNT_ROOT)) {
		/* The entries' unmounts then propagate to no other namespace. */
		if (mount(f->top, f->top, NULL, MS_BIND, NULL) < 0)
			return -errno;
		if (mount(NULL, f->top, NULL, MS_PRIVATE, NULL) < 0) {
			fd = -errno;
			umount2(f->top, MNT_DETACH);
			return fd;
		}
	}
	if (mkdir(f->dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* The sweep's drop in this process: noted, for fill_end() to do where the
 * mounts are. */
static void note_drop(int dfd, const char *id, void *arg)
{
	struct fill *f = arg;

	(void)dfd;
	if (f->ndrop < DROP_MAX)
		snprintf(f->drop[f->ndrop++], sizeof(f->drop[0]), "%s", id);
}

/* Drops what the sweep found, then names the namespace f->nsfd (if any)
 * f->id in the pool and marks it ready. System calls only. */
static int fill_end(void *arg)
{
	struct fill *f = arg;
	char src[64], path[400];
	unsigned i;
	int fd, r;

	for (i = 0; i < f->ndrop; i++)
		drop_entry(f->lock, f->drop[i], f->dir);
	if (f->nsfd < 0)
		return 0;

	fd = openat(f->lock, f->id, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd < 0)
		return -errno;
	close(fd);
	snprintf(src, sizeof(src), "/proc/self/fd/%d", f->nsfd);
	snprintf(path, sizeof(path), "%s/%s", f->dir, f->id);
	if (mount(src, path, NULL, MS_BIND, NULL) < 0) {
		r = -errno;
		unlinkat(f->lock, f->id, 0);
		return r;
	}
	snprintf(path, sizeof(path), "%s" SUFFIX_READY, f->id);
	fd = openat(f->lock, path, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd < 0) {
		r = -errno;
		drop_entry(f->lock, f->id, f->dir);
		return r;
	}
	close(fd);
	return 0;
}

/* Inside the pool's new namespace: IPv6 off, as sandbox_inside() leaves it. */
static int fill_inside(void *arg)
{
	static const char *const v6[] = { "all", "default", "lo" };
	int proc = netns_procfs_private(), r = 0;
	size_t i;

	(void)arg;
	for (i = 0; i < sizeof(v6) / sizeof(v6[0]) && r == 0; i++)
		r = netns_ipv6_off(proc, v6[i]);
	if (proc >= 0)
		close(proc);
	return r;
}

/**
 * netns_pool_refill() - add one namespace to the pool, if it holds fewer
 * than NETNS_POOL_MAX
 * @mntfd: the mount namespace of the pool's mounts (netns_host_mount_ns(),
 *         found before the parent exited); closed here
 *
 * For a process that has answered already (a lingering child, linger.c):
 * it costs about as much as the unshare() the pool saves. Errors are not
 * the caller's business: at most a debug line.
 */
void netns_pool_refill(int mntfd)
{
	struct fill f = { .lock = -1, .nsfd = -1 };
	struct stat st;
	struct timespec now;
	int r, ready;

	snprintf(f.top, sizeof(f.top), "%s", netns_pool_dir());
	snprintf(f.dir, sizeof(f.dir), "%s/" NETNS_POOL_VERSION, f.top);
	r = netns_in_mount_ns(mntfd, fill_dirs, &f);
	if (r == 0) {
		f.lock = open_checked(f.dir);
		r = f.lock < 0 ? f.lock : 0;
	}
	/* Another maker at work: one is enough. */
	if (r == 0 && flock(f.lock, LOCK_EX | LOCK_NB) < 0)
		r = -errno;
	ready = r == 0 ? netns_pool_sweep(f.lock, time(NULL), note_drop, &f) : 0;
	if (ready < 0)
		r = ready;
	if (r == 0 && ready < NETNS_POOL_MAX) {
		r = netns_ns_new(&f.nsfd, fill_inside, NULL);
		if (r == 0)
			r = fstat(f.nsfd, &st) < 0 || clock_gettime(CLOCK_REALTIME, &now) < 0
				    ? -errno
				    : 0;
		if (r == 0)
			snprintf(f.id, sizeof(f.id), "%llx-%llx", (unsigned long long)st.st_ino,
				 (unsigned long long)now.tv_sec * 1000000000ull +
					 (unsigned long long)now.tv_nsec);
		else if (f.nsfd >= 0)
			close(f.nsfd), f.nsfd = -1;
	}
	if (f.lock >= 0 && (f.ndrop || f.nsfd >= 0)) {
		int k = netns_in_mount_ns(mntfd, fill_end, &f);

		r = r < 0 ? r : k;
	}
	if (r < 0)
		log_debug("netns: pool: no namespace added: %s", strerror(-r));
	if (f.nsfd >= 0)
		close(f.nsfd);
	if (f.lock >= 0)
		close(f.lock);
	if (mntfd >= 0)
		close(mntfd);
}
