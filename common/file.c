// SPDX-License-Identifier: MIT
/* Reading a whole small file (policies, configuration, bundles), bounded;
 * the one atomic writer of whole files (state, keys, journals' snapshots). */
#include "common/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

static int (*opener)(const char *path, int flags, const struct file_who *who);
/* This thread's file_read_as(). */
static __thread const struct file_who *reading_as;

void file_set_opener(int (*fn)(const char *path, int flags, const struct file_who *who))
{
	opener = fn;
}

const struct file_who *file_read_as(const struct file_who *who)
{
	const struct file_who *old = reading_as;

	reading_as = who;
	return old;
}

bool file_reading_for_other(void)
{
	return reading_as && reading_as->uid != 0 && reading_as->uid != (uint32_t)getuid();
}

int file_open_read(const char *path, int flags)
{
	int fd;

	/* Another user's read: the kernel judges it, as that user, in the
	 * opener; never the broker's own right, nor root's. */
	if (file_reading_for_other())
		return opener ? opener(path, flags, reading_as) : -EACCES;
	fd = open(path, flags);
	if (fd >= 0)
		return fd;
	/* Only a refusal for permission is asked again: a file that is not
	 * there is not there for root either. */
	if ((errno == EACCES || errno == EPERM) && opener)
		return opener(path, flags, NULL);
	return -errno;
}

/* file_read_all(); *@refused says the file was refused (not regular, too
 * big), which its -EINVAL or -EFBIG alone cannot: a call can fail so too. */
static int read_all(const char *path, size_t max, char **out, size_t *len, bool *refused)
{
	struct stat st;
	size_t got = 0;
	char *buf;
	int fd, r = 0;

	*out = NULL;
	*len = 0;
	*refused = false;
	fd = file_open_read(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISREG(st.st_mode))
		r = -EINVAL;
	else if ((uint64_t)st.st_size > max)
		r = -EFBIG;
	*refused = r == -EINVAL || r == -EFBIG;
	if (r < 0) {
		close(fd);
		return r;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	/* Read what fstat promised, no more: a file that grows meanwhile is cut. */
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			break;
		}
		if (k == 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

int file_read_all(const char *path, size_t max, char **out, size_t *len)
{
	bool refused;

	return read_all(path, max, out, len, &refused);
}

int file_read_all_err(const char *path, size_t max, char **out, size_t *len, struct sl_err *err)
{
	bool refused;
	int r = read_all(path, max, out, len, &refused);

	/* The words the policy and configuration loaders have always shown. */
	if (r < 0 && refused)
		sl_err_set(err, 0, "%s: not a regular file of at most %zu bytes", path, max);
	else if (r < 0)
		sl_err_sys(err, r, "%s: cannot open", path);
	return r;
}

int file_commit(FILE *f, const char *tmp, const char *path)
{
	int r = 0;

	if (fflush(f) != 0 || ferror(f))
		r = errno ? -errno : -EIO;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

/*
 * Spare inodes (file_spare_init_at()). A process that writes state files may
 * keep the inodes of those it removes, emptied, in a directory of its own,
 * and give them to the next files it makes: the spare is renamed to the new
 * file's name (RENAME_NOREPLACE: the name is as exclusive as O_EXCL makes
 * it), which allocates nothing. A new inode can cost far more than the
 * bytes written into it: ext4 without a journal passes over every inode
 * freed in the last minute (five while the inode table's block is not
 * written back) when it looks for a free one, a buffer lookup each, so in
 * a directory where files come and go every new one searches its block
 * group whole. On such a machine, in a perf profile of 100 `sluice create`s,
 * that search was half of the CPU of the broker (3,100 us per create) and
 * of its key process (1,400 us).
 *
 * The pool holds files (f<N>) and directories (d<N>), each at most
 * SPARE_MAX; the numbers of those present are kept here, so that taking
 * one reads no directory. Only regular files and directories that this
 * process's user owns, with one link, go in or come out; a file is emptied
 * before it goes in (ftruncate), a directory only when it is empty, and
 * what comes out must be so still.
 */
#define SPARE_MAX 64

static struct {
	pthread_mutex_t lock;
	int fd;	       /* the directory of spares, or -1: no pool */
	unsigned next; /* the next spare's number */
	uid_t uid;     /* this process's user, when the pool was made */
	unsigned n[2], busy[2];
	unsigned id[2][SPARE_MAX]; /* [0] files, [1] directories */
} spare = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static void spare_name(char *buf, size_t len, int dir, unsigned id)
{
	snprintf(buf, len, "%c%u", dir ? 'd' : 'f', id);
}

int file_spare_init_at(int dirfd, const char *name)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd, e;

	if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Ours and no one else's, or not used. */
	e = fstat(fd, &st) < 0				    ? -errno
	    : st.st_uid != geteuid() || (st.st_mode & 0077) ? -EPERM
							    : 0;
	if (e < 0) {
		close(fd);
		return e;
	}
	/* What an earlier run left: spares whose numbers are not known here,
	 * or anything else. Removed, and the pool starts empty. */
	e = dup(fd);
	d = e < 0 ? NULL : fdopendir(e);
	if (!d) {
		int err = -errno;

		if (e >= 0)
			close(e);
		close(fd);
		return err;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(fd, de->d_name, 0) < 0 && errno == EISDIR)
			(void)unlinkat(fd, de->d_name, AT_REMOVEDIR);
	}
	closedir(d);
	pthread_mutex_lock(&spare.lock);
	if (spare.fd >= 0)
		close(spare.fd);
	__atomic_store_n(&spare.fd, fd, __ATOMIC_RELAXED);
	spare.uid = st.st_uid;
	spare.n[0] = spare.n[1] = 0;
	pthread_mutex_unlock(&spare.lock);
	return 0;
}

void file_spare_end(void)
{
	pthread_mutex_lock(&spare.lock);
	if (spare.fd >= 0)
		close(spare.fd);
	__atomic_store_n(&spare.fd, -1, __ATOMIC_RELAXED);
	spare.n[0] = spare.n[1] = 0;
	pthread_mutex_unlock(&spare.lock);
}

unsigned file_spare_count(int dir)
{
	unsigned n;

	pthread_mutex_lock(&spare.lock);
	n = spare.n[dir != 0];
	pthread_mutex_unlock(&spare.lock);
	return n;
}

/* Whether there is a pool (a hint: the calls below check under the lock). */
static bool spare_on(void)
{
	return __atomic_load_n(&spare.fd, __ATOMIC_RELAXED) >= 0;
}

/*
 * Moves a spare (a directory with @dir) to DIRFD/@name (@take), or
 * DIRFD/@name into the pool, by a rename that replaces nothing. Return: 0;
 * -EEXIST when @name is taken (a spare not taken stays); when there is
 * none to take, or it went meanwhile, -ENOENT; when the pool is full,
 * -ENOSPC; the rename's error otherwise.
 */
static int spare_move(int dir, bool take, int dirfd, const char *name)
{
	char sname[16];
	unsigned id;
	int pfd, e;

	pthread_mutex_lock(&spare.lock);
	if (spare.fd < 0 || (take && !spare.n[dir])) {
		pthread_mutex_unlock(&spare.lock);
		return -ENOENT;
	}
	if (!take && spare.n[dir] + spare.busy[dir] >= SPARE_MAX) {
		pthread_mutex_unlock(&spare.lock);
		return -ENOSPC;
	}
	id = take ? spare.id[dir][--spare.n[dir]] : spare.next++;
	spare.busy[dir]++; /* its place kept while the lock is let go */
	pfd = spare.fd;
	pthread_mutex_unlock(&spare.lock);
	spare_name(sname, sizeof(sname), dir, id);
	if (take)
		e = renameat2(pfd, sname, dirfd, name, RENAME_NOREPLACE);
	else
		e = renameat2(dirfd, name, pfd, sname, RENAME_NOREPLACE);
	e = e < 0 ? -errno : 0;
	pthread_mutex_lock(&spare.lock);
	spare.busy[dir]--;
	/* In the pool: one put there, or one not taken since NAME is. */
	if ((take ? e == -EEXIST : e == 0) && spare.n[dir] < SPARE_MAX)
		spare.id[dir][spare.n[dir]++] = id;
	pthread_mutex_unlock(&spare.lock);
	return take && e < 0 && e != -EEXIST ? -ENOENT : e;
}

/* Whether @st is what a spare may be: ours, one name, the right type.
 * (The user as it was at file_spare_init_at(): geteuid() is not among the
 * key process's system calls.) */
static bool spare_ok(const struct stat *st, int dir)
{
	return (dir ? S_ISDIR(st->st_mode) : S_ISREG(st->st_mode) && st->st_nlink == 1) &&
	       st->st_uid == spare.uid;
}

int file_new_at(int dirfd, const char *name, mode_t mode)
{
	struct stat st;
	int fd, e;

	e = spare_move(0, true, dirfd, name);
	if (e == -EEXIST)
		return e;
	if (e == 0) {
		/* Not truncated: a spare is empty, and one that is not, or has
		 * a second name, is not one this process put there. (O_NONBLOCK:
		 * nothing for a regular file; a FIFO would not block the open.) */
		fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd >= 0 && fstat(fd, &st) == 0 && spare_ok(&st, 0) && st.st_size == 0 &&
		    ((st.st_mode & 07777) == mode || fchmod(fd, mode) == 0))
			return fd;
		/* Not what was put there: gone, and a file made anew. */
		if (fd >= 0)
			close(fd);
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT &&
		    (errno != EISDIR || unlinkat(dirfd, name, AT_REMOVEDIR) < 0))
			return -errno;
	}
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	/* The mode exactly, whatever the umask took from open's (fchmod only
	 * when it took something). */
	if (fstat(fd, &st) < 0 || ((st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)) {
		e = -errno;
		close(fd);
		unlinkat(dirfd, name, 0);
		return e;
	}
	return fd;
}

int file_unlink_at(int dirfd, const char *name)
{
	struct stat st;
	int fd;

	/* Emptied once it is known to be a file with no other name. */
	fd = !spare_on() ? -1 : openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd >= 0) {
		bool ok = fstat(fd, &st) == 0 && spare_ok(&st, 0) && ftruncate(fd, 0) == 0;

		close(fd);
		if (ok && spare_move(0, false, dirfd, name) == 0)
			return 0;
	}
	return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
}

int file_unlink(const char *path)
{
	return file_unlink_at(AT_FDCWD, path);
}

/* Whether the directory @fd holds nothing. */
static bool dir_empty(int fd)
{
	struct dirent *de;
	bool empty = true;
	int d2 = dup(fd);
	DIR *d = d2 < 0 ? NULL : fdopendir(d2);

	if (!d) {
		if (d2 >= 0)
			close(d2);
		return false;
	}
	while (empty && (de = readdir(d)))
		empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
	closedir(d);
	return empty;
}

int file_mkdir(const char *path, mode_t mode)
{
	struct stat st;
	int fd, e;

	e = spare_move(1, true, AT_FDCWD, path);
	if (e == -EEXIST)
		return e;
	if (e == 0) {
		fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		e = fd < 0 || fstat(fd, &st) < 0 || !spare_ok(&st, 1) || !dir_empty(fd) ? -EPERM
											: 0;
		if (e == 0 && (st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)
			e = -errno;
		if (fd >= 0)
			close(fd);
		if (e == 0)
			return 0;
		if (rmdir(path) < 0)
			return -errno;
	}
	return mkdir(path, mode) < 0 ? -errno : 0;
}

int file_rmdir(const char *path)
{
	struct stat st;
	int fd;

	fd = !spare_on() ? -1 : open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		bool ok = fstat(fd, &st) == 0 && spare_ok(&st, 1) && dir_empty(fd);

		close(fd);
		if (ok && spare_move(1, false, AT_FDCWD, path) == 0)
			return 0;
	}
	return rmdir(path) < 0 ? -errno : 0;
}

/* The temporary beside @path, created afresh: a stale one (a crash) is
 * removed first and O_EXCL|O_NOFOLLOW mean that neither a planted symlink
 * nor a hard link is ever written through (a spare taken instead is
 * renamed there with RENAME_NOREPLACE, and checked). The mode is set
 * exactly, whatever the umask took from open's. */
static int create_tmp(const char *path, mode_t mode, char *tmp, size_t tmplen)
{
	if ((size_t)snprintf(tmp, tmplen, "%s.tmp", path) >= tmplen)
		return -ENAMETOOLONG;
	if (unlink(tmp) < 0 && errno != ENOENT)
		return -errno;
	return file_new_at(AT_FDCWD, tmp, mode);
}

FILE *file_create_tmp(const char *path, mode_t mode, char *tmp, size_t tmplen)
{
	FILE *f;
	int fd = create_tmp(path, mode, tmp, tmplen);

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	f = fdopen(fd, "we");
	if (!f) {
		int e = errno;

		close(fd);
		unlink(tmp);
		errno = e;
	}
	return f;
}

int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
	const char *d = data;
	char tmp[PATH_MAX + 8];
	int fd, r = 0;

	fd = create_tmp(path, mode, tmp, sizeof(tmp));
	if (fd < 0)
		return fd;
	while (len && r == 0) {
		ssize_t k = write(fd, d, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			r = k < 0 ? -errno : -EIO;
		else
			d += k, len -= (size_t)k;
	}
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}
