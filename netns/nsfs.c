// SPDX-License-Identifier: MIT
/* Named network namespaces the iproute2 way: /run/netns/NAME is a bind
 * mount of the namespace's nsfs file, on a shared mount, so `ip netns`
 * and every other tool sees sluice's sandboxes.
 *
 * Theory of operation: the mount must be made in the mount namespace that
 * owns /run/netns, not necessarily ours. `ip netns exec B sluice create S`
 * runs sluice in a fresh mount namespace where /run/netns is a *slave* of
 * the caller's: a mount made there never propagates back, and S would
 * vanish with sluice (iproute2's own `ip netns exec B ip netns add S` has
 * exactly that flaw). So when our /run/netns is a slave, the mount and the
 * unmount are done by a short-lived child that joined the mount namespace
 * holding the master peer group (found among PID 1 and our ancestors); the
 * result propagates back to us and to every other namespace as usual.
 *
 * Finding that namespace must not cost more with more sandboxes: every
 * sandbox is a mount, and /proc/PID/mountinfo lists them all. Where the
 * kernel has statmount(2) (Linux 6.8; 6.11 to look into another process's
 * mount namespace), one statx() and one statmount() per namespace tell the
 * peer groups of /run/netns; mountinfo is read only where they cannot. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/text.h"
#include "netns/netns.h"
#include "netns/netns_internal.h"

/* Bounds for walking up the process tree and through chains of masters. */
#define ANCESTORS_MAX 64
#define MASTERS_MAX 8
/* A mountinfo larger than this is not read (a million mounts or so). */
#define MOUNTINFO_MAX (256u << 20)

/*
 * statmount(2) and what it needs, declared here for C libraries and
 * kernel headers older than the kernel (include/uapi/linux/mount.h,
 * include/uapi/linux/nsfs.h); a kernel without them says ENOSYS, EINVAL,
 * E2BIG or ENOTTY, and mountinfo is read instead.
 */
/* 457 wherever the new system calls share one number (not alpha, mips). */
#if !defined(__NR_statmount) && !defined(__alpha__) && !defined(__mips__)
// NOLINTNEXTLINE(bugprone-reserved-identifier): the syscall number old headers lack, by its name
#define __NR_statmount 457
#endif
#define SL_STATX_MNT_ID_UNIQUE 0x00004000U
#define SL_STATX_ATTR_MOUNT_ROOT 0x00002000ULL
#define SL_STATMOUNT_MNT_BASIC 0x00000002U
#define SL_MNT_ID_REQ_SIZE_VER1 32

struct sl_mnt_id_req {
	uint32_t size;
	uint32_t spare;
	uint64_t mnt_id;
	uint64_t param;
	uint64_t mnt_ns_id;
};

struct sl_statmount {
	uint32_t size;
	uint32_t mnt_opts;
	uint64_t mask;
	uint32_t sb_dev_major;
	uint32_t sb_dev_minor;
	uint64_t sb_magic;
	uint32_t sb_flags;
	uint32_t fs_type;
	uint64_t mnt_id;
	uint64_t mnt_parent_id;
	uint32_t mnt_id_old;
	uint32_t mnt_parent_id_old;
	uint64_t mnt_attr;
	uint64_t mnt_propagation;
	uint64_t mnt_peer_group;
	uint64_t mnt_master;
	uint64_t propagate_from;
	uint32_t mnt_root;
	uint32_t mnt_point;
	uint64_t mnt_ns_id;
	uint64_t spare2[49];
};

struct sl_mnt_ns_info {
	uint32_t size;
	uint32_t nr_mounts;
	uint64_t mnt_ns_id;
};
#define SL_NS_MNT_GET_INFO _IOR(0xb7, 10, struct sl_mnt_ns_info)
#define SL_NS_GET_MNTNS_ID _IOR(0xb7, 0x5, uint64_t)

/* The new mount API (Linux 5.2), for C libraries older than the kernel. */
#if !defined(SYS_fsopen) && !defined(__alpha__) && !defined(__mips__)
#define SYS_fsopen 430
#define SYS_fsconfig 431
#define SYS_fsmount 432
#endif
#define SL_FSOPEN_CLOEXEC 0x00000001
#define SL_FSCONFIG_CMD_CREATE 6
#define SL_FSMOUNT_CLOEXEC 0x00000001

/* What a mount namespace has on /run/netns: peer groups are 0 for none. */
struct netns_mnt {
	uint64_t shared; /* its own peer group */
	uint64_t master; /* the peer group it receives propagation from */
};

/*
 * The whole of a /proc text file (mountinfo), NUL-terminated, in *@out
 * (the caller frees it; NULL on a failure). Whole, in large reads: each
 * read of a seq_file starts over from where the last one stopped, and
 * small reads multiply that.
 * Return: 0 or a negative errno.
 */
static int read_whole(const char *path, char **out)
{
	size_t cap = 64 << 10, len = 0;
	char *buf = NULL;
	int fd;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t k;

		if (!buf || len + 1 == cap) {
			char *nb;

			if (buf)
				cap *= 2;
			if (cap > MOUNTINFO_MAX || !(nb = realloc(buf, cap))) {
				free(buf);
				close(fd);
				return -ENOMEM;
			}
			buf = nb;
		}
		k = read(fd, buf + len, cap - 1 - len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = -errno;

			free(buf);
			close(fd);
			return e;
		}
		if (k == 0)
			break;
		len += (size_t)k;
	}
	close(fd);
	buf[len] = '\0';
	*out = buf;
	return 0;
}

/*
 * Peer groups of the topmost mount on /run/netns in a mountinfo file.
 * Return: 0; -ENOENT when /run/netns is not a mount point there.
 */
static int groups_mountinfo(const char *mountinfo, struct netns_mnt *m)
{
	char *buf, *line, *next;
	int found = -ENOENT, r = read_whole(mountinfo, &buf);

	if (r < 0)
		return r;
	for (line = buf; line && *line; line = next) {
		char *save = NULL, *tok;
		uint64_t s = 0, ma = 0;
		int field = 0;
		bool ours = false;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		/* Only the mount point (field 5) of most lines is looked at. */
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - ... */
		for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
			field++;
			if (field == 5) {
				ours = strcmp(tok, NETNS_RUN_DIR) == 0;
				if (!ours)
					break;
			}
			if (field < 7)
				continue;
			if (!strcmp(tok, "-"))
				break;
			if (!strncmp(tok, "shared:", 7))
				s = strtoull(tok + 7, NULL, 10);
			else if (!strncmp(tok, "master:", 7))
				ma = strtoull(tok + 7, NULL, 10);
		}
		if (ours) { /* later lines are mounted on top of earlier ones */
			m->shared = s;
			m->master = ma;
			found = 0;
		}
	}
	free(buf);
	return found;
}

/*
 * The same from statx() and statmount(): @path is /run/netns as the
 * namespace sees it, @mnt_ns_id that namespace (0: ours).
 * Return: 0; -ENOENT when it is not a mount point; -ENOSYS when the
 * kernel cannot tell this way; another negative errno.
 */
static int groups_statmount(const char *path, uint64_t mnt_ns_id, struct netns_mnt *m)
{
	struct sl_mnt_id_req req = { .size = SL_MNT_ID_REQ_SIZE_VER1 };
	struct sl_statmount sm;
	struct statx stx;

	if (statx(AT_FDCWD, path, AT_NO_AUTOMOUNT, SL_STATX_MNT_ID_UNIQUE, &stx) < 0)
		return -errno;
	if (!(stx.stx_mask & SL_STATX_MNT_ID_UNIQUE) ||
	    !(stx.stx_attributes_mask & SL_STATX_ATTR_MOUNT_ROOT))
		return -ENOSYS;
	if (!(stx.stx_attributes & SL_STATX_ATTR_MOUNT_ROOT))
		return -ENOENT;
#ifdef __NR_statmount
	req.mnt_id = stx.stx_mnt_id;
	req.param = SL_STATMOUNT_MNT_BASIC;
	req.mnt_ns_id = mnt_ns_id;
	memset(&sm, 0, sizeof(sm));
	if (syscall(__NR_statmount, &req, &sm, sizeof(sm), 0) < 0) {
		/* ENOENT too: a kernel without mnt_ns_id looks in our namespace. */
		if (errno == ENOSYS || errno == EINVAL || errno == E2BIG || errno == EOPNOTSUPP ||
		    errno == ENOENT)
			return -ENOSYS;
		return -errno;
	}
	if (!(sm.mask & SL_STATMOUNT_MNT_BASIC))
		return -ENOSYS;
	m->shared = sm.mnt_propagation & MS_SHARED ? sm.mnt_peer_group : 0;
	m->master = sm.mnt_master;
	return 0;
#else
	(void)req;
	(void)sm;
	(void)mnt_ns_id;
	(void)m;
	return -ENOSYS;
#endif
}

/* The id statmount() knows the mount namespace @mntfd by; 0 if none. */
static uint64_t mnt_ns_id_of(int mntfd)
{
	struct sl_mnt_ns_info info = { .size = sizeof(info) };
	uint64_t id = 0;

	if (ioctl(mntfd, SL_NS_MNT_GET_INFO, &info) == 0)
		return info.mnt_ns_id;
	if (ioctl(mntfd, SL_NS_GET_MNTNS_ID, &id) == 0)
		return id;
	return 0;
}

/*
 * Peer groups of /run/netns in the mount namespace of @pid (0: ours,
 * @mntfd unused), whose mount namespace is open as @mntfd.
 * Return: 0; -ENOENT when /run/netns is not a mount point there; another
 * negative errno.
 */
static int run_netns_groups(pid_t pid, int mntfd, struct netns_mnt *m)
{
	char path[64];
	uint64_t id = 0;
	int r = -ENOSYS;

	if (pid == 0) {
		r = groups_statmount(NETNS_RUN_DIR, 0, m);
	} else if ((id = mnt_ns_id_of(mntfd)) != 0) {
		snprintf(path, sizeof(path), "/proc/%d/root" NETNS_RUN_DIR, (int)pid);
		r = groups_statmount(path, id, m);
	}
	if (r != -ENOSYS)
		return r;
	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/mountinfo");
	else
		snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
	return groups_mountinfo(path, m);
}

/* The parent of @pid, or 0. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *p;
	unsigned long long pp;
	const char *end;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may hold spaces and ')': " STATE PPID " follow the last ')'. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2] || p[3] != ' ' || !text_ull(p + 4, 10, &end, &pp) ||
	    pp == 0 || pp > INT_MAX)
		return 0;
	return (pid_t)pp;
}

/*
 * The mount namespace of a process whose /run/netns is in peer group
 * @group (shared:@group), as an fd, with that mount's own master in
 * *next; a negative errno when no such namespace can be opened. Processes
 * whose namespace cannot be opened (PID 1 under some supervisors) are
 * passed over.
 */
static int holder_of(uint64_t group, uint64_t *next)
{
	pid_t pid = 1;
	int i, fd, r = -ESRCH;

	for (i = 0; i < ANCESTORS_MAX && pid > 0; i++) {
		struct netns_mnt m = { 0 };
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			r = -errno;
		} else if (run_netns_groups(pid, fd, &m) == 0 && m.shared == group) {
			*next = m.master;
			return fd;
		} else {
			close(fd);
		}
		pid = i == 0 ? getppid() : parent_of(pid);
		if (pid == 1)
			break;
	}
	return r;
}

/*
 * The mount namespace where /run/netns mounts must be made: an fd to it;
 * -ENOENT when it is our own; another negative errno when ours is a slave
 * but its master cannot be found or opened. Masters can be chained (`ip
 * netns exec` within `ip netns exec`): the topmost one reachable is taken.
 */
static int mount_ns_of_run_netns(void)
{
	struct netns_mnt self = { 0 };
	uint64_t master, next = 0;
	int i, fd = -1, k;

	if (run_netns_groups(0, -1, &self) < 0 || self.master == 0)
		return -ENOENT;
	master = self.master;
	for (i = 0; i < MASTERS_MAX && master; i++, master = next) {
		k = holder_of(master, &next);
		if (k < 0) {
			if (fd < 0)
				return k;
			break;
		}
		if (fd >= 0)
			close(fd);
		fd = k;
	}
	return fd;
}

struct in_mount_ns {
	int mntfd;
	int (*fn)(void *arg);
	void *arg;
};

/* The child's side of in_run_netns_mount_ns(): its exit status is 0 or
 * the positive errno. */
static int in_mount_ns_child(void *p)
{
	const struct in_mount_ns *c = p;
	int r = setns(c->mntfd, CLONE_NEWNS) < 0 ? -errno : c->fn(c->arg);

	return r < 0 && -r < 256 ? -r : r < 0 ? EIO : 0;
}

/*
 * Runs @fn(@arg) where /run/netns mounts belong (see the top of the file):
 * in this process, or in a child that joined that mount namespace.
 *
 * The child shares this process's memory and runs while this process
 * waits (CLONE_VM | CLONE_VFORK, as posix_spawn() does), on a stack of its
 * own, and on this CPU: no page tables are copied, and no other CPU has to
 * be woken for it, which on a busy machine can take milliseconds. It has
 * its own root and working directory (no CLONE_FS), which setns() to a
 * mount namespace needs, and it only makes system calls, since this
 * process is stopped meanwhile.
 *
 * Return: @fn's result (0 or a negative errno).
 */
static int in_run_netns_mount_ns(int (*fn)(void *), void *arg)
{
	static char stack[64 << 10] __attribute__((aligned(16)));
	struct in_mount_ns c = { .mntfd = mount_ns_of_run_netns(), .fn = fn, .arg = arg };
	cpu_set_t old, here;
	bool pinned = false;
	int cpu, status, e;
	pid_t pid;

	if (c.mntfd == -ENOENT)
		return fn(arg);
	if (c.mntfd < 0) {
		/* A mount made here would die with this mount namespace, and the
		 * sandbox with it: refuse rather than make one that vanishes. */
		log_err("netns: %s here is a slave mount whose master cannot be reached (%s)",
			NETNS_RUN_DIR, strerror(-c.mntfd));
		return c.mntfd;
	}
	cpu = sched_getcpu();
	if (cpu >= 0 && cpu < CPU_SETSIZE && sched_getaffinity(0, sizeof(old), &old) == 0) {
		CPU_ZERO(&here);
		CPU_SET(cpu, &here);
		pinned = sched_setaffinity(0, sizeof(here), &here) == 0;
	}
	/* Returns once the child has exited. */
	pid = clone(in_mount_ns_child, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
	e = pid < 0 ? -errno : 0;
	if (pinned)
		sched_setaffinity(0, sizeof(old), &old);
	close(c.mntfd);
	if (e < 0)
		return e;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	if (!WIFEXITED(status))
		return -EIO;
	return -WEXITSTATUS(status);
}

/**
 * netns_in_host_mount_ns() - run @fn(@arg) where /run/netns mounts belong
 * @fn:  what to do there (system calls only: see in_run_netns_mount_ns())
 * @arg: passed to @fn
 *
 * For a mount that must outlive an `ip netns exec` mount namespace (the
 * runner's template, cli/runner.c), as the sandboxes' own do.
 *
 * Return: @fn's result, or a negative errno.
 */
int netns_in_host_mount_ns(int (*fn)(void *arg), void *arg)
{
	return in_run_netns_mount_ns(fn, arg);
}

/* As iproute2: /run/netns becomes a shared mount point, so that netns
 * mounts and unmounts propagate between mount namespaces. When it is one
 * already, as after the first create, nothing is done: MS_SHARED | MS_REC
 * walks every mount below it, one per sandbox, which with a thousand
 * sandboxes is half a millisecond of each create. */
static int make_run_netns_shared(void)
{
	struct netns_mnt m = { 0 };
	bool made = false;

	if (groups_statmount(NETNS_RUN_DIR, 0, &m) == 0 && m.shared != 0)
		return 0;
	if (mkdir(NETNS_RUN_DIR, 0755) < 0 && errno != EEXIST)
		return -errno;
	while (mount("", NETNS_RUN_DIR, "none", MS_SHARED | MS_REC, NULL) < 0) {
		if (errno != EINVAL || made)
			return -errno;
		if (mount(NETNS_RUN_DIR, NETNS_RUN_DIR, "none", MS_BIND | MS_REC, NULL) < 0)
			return -errno;
		made = true;
	}
	return 0;
}

struct bind_req {
	const char *path;
	int nsfd;
};

static int do_bind(void *arg)
{
	const struct bind_req *b = arg;
	char src[64];
	int fd, r;

	r = make_run_netns_shared();
	if (r < 0)
		return r;
	/* O_EXCL: an existing namespace of that name is never taken over. */
	fd = open(b->path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	close(fd);
	snprintf(src, sizeof(src), "/proc/self/fd/%d", b->nsfd);
	if (mount(src, b->path, "none", MS_BIND, NULL) < 0) {
		r = -errno;
		unlink(b->path);
		return r;
	}
	return 0;
}

/**
 * netns_ns_new() - a new network namespace, and work done inside it
 * @nsfd:   on success, an fd of the namespace (the caller closes it; the
 *          namespace lives as long as something holds it)
 * @inside: called in the new namespace, in this thread; may be NULL
 * @arg:    passed to @inside
 *
 * What @inside opens (a socket) stays in the new namespace when the thread
 * is back in its own, so the new one needs no second visit.
 *
 * Return: 0; @inside's negative errno (the namespace is dropped); another
 * negative errno.
 */
int netns_ns_new(int *nsfd, int (*inside)(void *arg), void *arg)
{
	int self, fd, r;

	self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return -errno;
	if (unshare(CLONE_NEWNET) < 0) {
		r = -errno;
		close(self);
		return r;
	}
	fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	r = fd < 0 ? -errno : 0;
	if (r == 0 && inside)
		r = inside(arg);
	/* Back home before anything else: the rest of sluice runs there. */
	if (setns(self, CLONE_NEWNET) < 0)
		die("sluice: cannot return to the original network namespace: %s", strerror(errno));
	close(self);
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		return r;
	}
	*nsfd = fd;
	return 0;
}

/**
 * netns_ns_name() - name a network namespace /run/netns/@name
 * @name: a valid sandbox name
 * @nsfd: the namespace
 *
 * Return: 0; -EEXIST when the name is taken; another negative errno.
 */
int netns_ns_name(const char *name, int nsfd)
{
	struct bind_req b;
	char path[512];
	int r;

	r = netns_path(path, sizeof(path), NETNS_RUN_DIR, name, NULL);
	if (r < 0)
		return r;
	b.path = path;
	b.nsfd = nsfd;
	return in_run_netns_mount_ns(do_bind, &b);
}

static int do_unbind(void *arg)
{
	const char *path = arg;

	/* EINVAL: not a mount point (a half-made namespace); the file goes anyway. */
	if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return -errno;
	return unlink(path) < 0 ? -errno : 0;
}

/**
 * netns_ns_remove() - unmount and remove /run/netns/@name
 * @name: a valid sandbox name
 *
 * The namespace itself goes when its last user (a process, an open fd)
 * does.
 *
 * Return: 0; -ENOENT when there is no such file; another negative errno.
 */
int netns_ns_remove(const char *name)
{
	char path[512];
	int r = netns_path(path, sizeof(path), NETNS_RUN_DIR, name, NULL);

	if (r < 0)
		return r;
	if (access(path, F_OK) < 0)
		return -errno;
	r = in_run_netns_mount_ns(do_unbind, path);
	/* Should the unmount not have reached us, drop our copy too. */
	umount2(path, MNT_DETACH);
	return r;
}

/**
 * netns_ns_open() - an fd of the namespace named @name
 * @name: a valid sandbox name
 *
 * Return: the fd; -ENOENT; -EINVAL when the file is not a namespace (a
 * leftover file whose mount is gone); another negative errno.
 */
int netns_ns_open(const char *name)
{
	struct statfs sfs;
	char path[512];
	int fd, r = netns_path(path, sizeof(path), NETNS_RUN_DIR, name, NULL);

	if (r < 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != NSFS_MAGIC) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* Is the network namespace @want_dev:@want_ino named by a mount in this
 * mount namespace (a bind mount of its nsfs file, as /run/netns/NAME)?
 * Return: 1, 0, or a negative errno. */
static int ns_mounted(uint64_t want_dev, uint64_t want_ino)
{
	char dev[32], root[48], *buf, *line, *next;
	int r = read_whole("/proc/self/mountinfo", &buf);

	if (r < 0)
		return r;
	snprintf(dev, sizeof(dev), "%u:%u", major(want_dev), minor(want_dev));
	snprintf(root, sizeof(root), "net:[%llu]", (unsigned long long)want_ino);
	for (line = buf; line && *line; line = next) {
		char d[32], rt[48];

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		/* ID PARENT MAJ:MIN ROOT ...: an nsfs mount's root is "net:[INO]". */
		if (sscanf(line, "%*s %*s %31s %47s", d, rt) == 2 && !strcmp(d, dev) &&
		    !strcmp(rt, root)) {
			r = 1;
			break;
		}
	}
	free(buf);
	return r;
}

/*
 * Is a thread of some process in the network namespace @dev:@ino? Every
 * thread is looked at, not only each process's first: a thread may
 * setns() on its own (sluice does). Processes whose namespaces this one
 * may not read (PID 1 under some supervisors, a process of another user
 * namespace) are passed over: the root that made a broker namespace can
 * read whatever it started there.
 * Return: 1; 0; a negative errno when /proc cannot be read.
 */
static int ns_entered(uint64_t dev, uint64_t ino)
{
	struct dirent *pe;
	DIR *proc = opendir("/proc");
	int r = 0;

	if (!proc)
		return -errno;
	for (;;) {
		struct dirent *te;
		char path[64];
		DIR *tasks;

		errno = 0;
		pe = readdir(proc);
		if (!pe) {
			r = -errno;
			break;
		}
		if (pe->d_name[0] < '1' || pe->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%.20s/task", pe->d_name);
		tasks = opendir(path);
		if (!tasks) /* exited meanwhile, or not ours to read */
			continue;
		while ((te = readdir(tasks))) {
			struct stat st;

			if (te->d_name[0] < '1' || te->d_name[0] > '9')
				continue;
			/* Fails for a thread that exited meanwhile, for a zombie
			 * (in no namespace any more), and where reading it is
			 * not allowed. */
			snprintf(path, sizeof(path), "%.20s/ns/net", te->d_name);
			if (fstatat(dirfd(tasks), path, &st, 0) == 0 && st.st_dev == dev &&
			    st.st_ino == ino) {
				r = 1;
				break;
			}
		}
		closedir(tasks);
		if (r)
			break;
	}
	closedir(proc);
	return r;
}

/**
 * netns_ns_in_use() - is a network namespace still entered or named?
 * @dev: the device of its nsfs inode (as netns_self_ns_id() gives it)
 * @ino: that inode's number
 *
 * A namespace that no process is in and no mount names is gone for
 * everyone who reaches namespaces by process or by name, and is so at the
 * moment its last process exits and its last name is unmounted. What may
 * keep its remains in the kernel for a while after (its links, so the far
 * end of a veth pair too) does not count: the kernel tears a namespace
 * down later, from a work queue, after RCU grace periods (tens of
 * milliseconds on a busy machine), and an open fd of it or a socket made
 * in it keeps it as long as that lives. Mounts are looked for in this
 * mount namespace only: /run/netns, where sluice and ip name namespaces,
 * is shared with the others.
 *
 * Return: 1 when a process is in it or a mount names it; 0 when neither;
 * a negative errno when that could not be told.
 */
int netns_ns_in_use(uint64_t dev, uint64_t ino)
{
	int r = ns_mounted(dev, ino);

	if (r != 0)
		return r;
	return ns_entered(dev, ino);
}

/**
 * netns_ns_enter() - move this thread into a network namespace
 * @nsfd:  the namespace
 * @saved: an fd of the namespace left, for netns_ns_leave()
 *
 * Return: 0 or a negative errno (and this thread has not moved).
 */
int netns_ns_enter(int nsfd, int *saved)
{
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC), r;

	if (self < 0)
		return -errno;
	if (setns(nsfd, CLONE_NEWNET) < 0) {
		r = -errno;
		close(self);
		return r;
	}
	*saved = self;
	return 0;
}

/**
 * netns_ns_leave() - back to the namespace netns_ns_enter() left
 * @saved: what netns_ns_enter() gave; closed here
 *
 * sluice cannot go on in the wrong namespace, so failing to return is fatal.
 *
 * Return: 0.
 */
int netns_ns_leave(int saved)
{
	if (setns(saved, CLONE_NEWNET) < 0)
		die("sluice: cannot return to the original network namespace: %s", strerror(errno));
	close(saved);
	return 0;
}

/**
 * netns_enter_broker() - move this process into the broker's network
 * namespace (--broker-netns), as `ip netns exec NAME sluice` would,
 * without a mount namespace of its own
 * @spec:   a name under /run/netns, or a path (it has a '/') to an nsfs
 *          file (/run/netns/NAME, /proc/PID/ns/net)
 * @err:    why not (NULL: not wanted)
 *
 * Why: `ip netns exec` copies the caller's mount namespace, one mount per
 * sandbox included, and tears the copy down when sluice exits; with a
 * thousand sandboxes that is most of a create's time. sluice needs neither
 * a mount namespace nor a sysfs of the broker's namespace; it only needs to
 * run in that network namespace. Called before anything else runs, while
 * the process has one thread.
 *
 * Return: 0 or a negative errno.
 */
int netns_enter_broker(const char *spec, struct sl_err *err)
{
	struct statfs sfs;
	char path[512];
	int fd, r;

	if (strchr(spec, '/')) {
		snprintf(path, sizeof(path), "%s", spec);
	} else if (!netns_name_ok(spec)) {
		return sl_err_set(err, EINVAL, "bad network namespace name `%s`", spec);
	} else {
		netns_path(path, sizeof(path), NETNS_RUN_DIR, spec, NULL);
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sl_err_sys(err, errno, "cannot open network namespace `%s`", path);
	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != NSFS_MAGIC) {
		close(fd);
		return sl_err_set(err, EINVAL, "`%s` is not a namespace", path);
	}
	r = setns(fd, CLONE_NEWNET) < 0 ? -errno : 0;
	close(fd);
	if (r == -EINVAL) /* setns(): not a network namespace's file */
		return sl_err_set(err, r, "`%s` is not a network namespace", path);
	if (r < 0)
		return sl_err_sys(err, r, "cannot enter network namespace `%s`", path);
	return 0;
}

/**
 * netns_procfs_private() - a procfs of this process's own, mounted nowhere
 * (fsopen(), fsmount())
 *
 * Its /proc/sys/net, as every /proc/sys/net, shows the network namespace
 * of whoever looks. Why another procfs: every network namespace that looks
 * up /proc/sys/net in the system's procfs leaves there a dentry of that
 * name, all in one hash chain, which the next look-up from a new namespace
 * walks from end to end, at a spinlock each: with a thousand sandboxes
 * that is milliseconds. A procfs made for one create starts empty, and
 * leaves nothing behind.
 *
 * Return: an fd of its root (the caller closes it); a negative errno when
 * the kernel or the caller's privileges allow none (then /proc will do).
 */
int netns_procfs_private(void)
{
#ifdef SYS_fsopen
	int fs, mnt;

	fs = (int)syscall(SYS_fsopen, "proc", SL_FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	if (syscall(SYS_fsconfig, fs, SL_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		mnt = -errno;
		close(fs);
		return mnt;
	}
	mnt = (int)syscall(SYS_fsmount, fs, SL_FSMOUNT_CLOEXEC, 0);
	if (mnt < 0)
		mnt = -errno;
	close(fs);
	return mnt;
#else
	return -ENOSYS;
#endif
}

/**
 * netns_sysctl_write() - write a /proc/sys file
 * @dfd:   where @path starts: AT_FDCWD, or a procfs root (relative @path)
 * @path:  under sys/net, it is the calling thread's namespace's
 * @value: the text written
 *
 * Return: 0 or a negative errno.
 */
int netns_sysctl_write(int dfd, const char *path, const char *value)
{
	size_t n = strlen(value);
	int fd = openat(dfd, path, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	errno = 0;
	if (write(fd, value, n) != (ssize_t)n)
		r = errno ? -errno : -EIO;
	close(fd);
	return r;
}
