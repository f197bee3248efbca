// SPDX-License-Identifier: MIT
/* Reading a whole small file (policies, configuration, bundles), bounded;
 * the one atomic writer of whole files (state, keys, journals' snapshots). */
#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

static int (*opener)(const char *path, int flags);

void file_set_opener(int (*fn)(const char *path, int flags))
{
	opener = fn;
}

int file_open_read(const char *path, int flags)
{
	int fd = open(path, flags);

	if (fd >= 0)
		return fd;
	/* Only a refusal for permission is asked again: a file that is not
	 * there is not there for root either. */
	if ((errno == EACCES || errno == EPERM) && opener)
		return opener(path, flags);
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

/* The temporary beside @path, created afresh: a stale one (a crash) is
 * removed first and O_EXCL|O_NOFOLLOW mean that neither a planted symlink
 * nor a hard link is ever written through. The mode is set exactly,
 * whatever the umask took from open's. */
static int create_tmp(const char *path, mode_t mode, char *tmp, size_t tmplen)
{
	int fd;

	if ((size_t)snprintf(tmp, tmplen, "%s.tmp", path) >= tmplen)
		return -ENAMETOOLONG;
	if (unlink(tmp) < 0 && errno != ENOENT)
		return -errno;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, mode) < 0) {
		int e = -errno;

		close(fd);
		unlink(tmp);
		return e;
	}
	return fd;
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
