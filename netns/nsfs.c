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
 * result propagates back to us and to every other namespace as usual. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "netns/netns_internal.h"

/* Bounds for walking up the process tree and through chains of masters. */
#define ANCESTORS_MAX 64
#define MASTERS_MAX 8

/*
 * Peer groups of the topmost mount on /run/netns in a mountinfo file:
 * *shared and *master are 0 when the mount has none.
 * Return: 0; -ENOENT when /run/netns is not a mount point there.
 */
static int run_netns_groups(const char *mountinfo, unsigned *shared, unsigned *master)
{
	FILE *f = fopen(mountinfo, "re");
	char *line = NULL;
	size_t cap = 0;
	int found = -ENOENT;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *tok;
		unsigned s = 0, m = 0;
		int field = 0;
		bool ours = false;

		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - ... */
		for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
			field++;
			if (field == 5)
				ours = strcmp(tok, NETNS_RUN_DIR) == 0;
			if (field < 7)
				continue;
			if (!strcmp(tok, "-"))
				break;
			if (!strncmp(tok, "shared:", 7))
				s = (unsigned)strtoul(tok + 7, NULL, 10);
			else if (!strncmp(tok, "master:", 7))
				m = (unsigned)strtoul(tok + 7, NULL, 10);
		}
		if (ours) { /* later lines are mounted on top of earlier ones */
			*shared = s;
			*master = m;
			found = 0;
		}
	}
	free(line);
	fclose(f);
	return found;
}

/* The parent of @pid, or 0. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;
	long pp;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may hold spaces and ')': the state and ppid follow the last ')'. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %ld", &pp) != 1 || pp <= 0)
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
static int holder_of(unsigned group, unsigned *next)
{
	pid_t pid = 1;
	int i, fd, r = -ESRCH;

	for (i = 0; i < ANCESTORS_MAX && pid > 0; i++) {
		char path[64];
		unsigned s, m;

		snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
		if (run_netns_groups(path, &s, &m) == 0 && s == group) {
			snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				*next = m;
				return fd;
			}
			r = -errno;
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
	unsigned shared, master, next = 0;
	int i, fd = -1, k;

	if (run_netns_groups("/proc/self/mountinfo", &shared, &master) < 0 || master == 0)
		return -ENOENT;
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

/*
 * Runs @fn(@arg) where /run/netns mounts belong (see the top of the file):
 * in this process, or in a child that joined that mount namespace (setns
 * to a mount namespace needs a single-threaded caller; a child is one).
 * Return: @fn's result (0 or a negative errno).
 */
static int in_run_netns_mount_ns(int (*fn)(void *), void *arg)
{
	int mntfd = mount_ns_of_run_netns(), status;
	pid_t pid;

	if (mntfd == -ENOENT)
		return fn(arg);
	if (mntfd < 0) {
		/* A mount made here would die with this mount namespace, and the
		 * sandbox with it: refuse rather than make one that vanishes. */
		log_err("netns: %s here is a slave mount whose master cannot be reached (%s)",
			NETNS_RUN_DIR, strerror(-mntfd));
		return mntfd;
	}
	pid = fork();
	if (pid < 0) {
		int e = -errno;

		close(mntfd);
		return e;
	}
	if (pid == 0) {
		int r = setns(mntfd, CLONE_NEWNS) < 0 ? -errno : fn(arg);

		_exit(r < 0 && -r < 256 ? -r : r < 0 ? EIO : 0);
	}
	close(mntfd);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	if (!WIFEXITED(status))
		return -EIO;
	return -WEXITSTATUS(status);
}

/* As iproute2: /run/netns becomes a shared mount point, so that netns
 * mounts and unmounts propagate between mount namespaces. */
static int make_run_netns_shared(void)
{
	bool made = false;

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
 * netns_ns_create() - a new network namespace, named /run/netns/@name
 * @name:  a valid sandbox name
 * @nsfd:  on success, an fd of the namespace (the caller closes it)
 *
 * Return: 0; -EEXIST when the name is taken; another negative errno.
 */
int netns_ns_create(const char *name, int *nsfd)
{
	struct bind_req b;
	char path[512];
	int self, fd, r;

	r = netns_path(path, sizeof(path), NETNS_RUN_DIR, name, NULL);
	if (r < 0)
		return r;
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
	/* Back home before anything else: the rest of sluice runs there. */
	if (setns(self, CLONE_NEWNET) < 0)
		die("sluice: cannot return to the original network namespace: %s",
		    strerror(errno));
	close(self);
	if (r < 0)
		return r;
	b.path = path;
	b.nsfd = fd;
	r = in_run_netns_mount_ns(do_bind, &b);
	if (r < 0) {
		close(fd);
		return r;
	}
	*nsfd = fd;
	return 0;
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
		die("sluice: cannot return to the original network namespace: %s",
		    strerror(errno));
	close(saved);
	return 0;
}

/**
 * netns_sysctl_write() - write a /proc/sys file
 * @path:  under /proc/sys/net, it is the calling thread's namespace's
 * @value: the text written
 *
 * Return: 0 or a negative errno.
 */
int netns_sysctl_write(const char *path, const char *value)
{
	size_t n = strlen(value);
	int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	errno = 0;
	if (write(fd, value, n) != (ssize_t)n)
		r = errno ? -errno : -EIO;
	close(fd);
	return r;
}
