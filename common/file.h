/* SPDX-License-Identifier: MIT */
/* Reading a whole small file, bounded; writing one whole or not at all. */
#ifndef SLUICE_COMMON_FILE_H
#define SLUICE_COMMON_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* At most this many supplementary groups in a struct file_who. */
#define FILE_WHO_GROUPS_MAX 64

/*
 * Whose right to read a file counts: a user, its group and supplementary
 * groups (as the kernel had them for a control socket's caller). uid 0 is
 * root, which reads as the process does.
 */
struct file_who {
	uint32_t uid, gid;
	uint32_t n_groups; /* of @groups */
	uint32_t groups[FILE_WHO_GROUPS_MAX];
};

/**
 * file_set_opener() - who else may open a file the caller may not read
 * @fn: given the path, open(2)'s flags (O_RDONLY and at most O_CLOEXEC,
 *      O_NONBLOCK, O_NOFOLLOW, O_NOCTTY) and whose right counts (NULL:
 *      root's), returns a descriptor or a negative errno; NULL: nobody
 *
 * The broker, started as root, sets its opener here (a child that stayed
 * root: broker/isolation.c), so that a policy or secret file readable by
 * root alone still works once it runs as its own user, and so that what is
 * read for a control_group member is read with that member's rights. Set
 * once, before other threads read.
 */
void file_set_opener(int (*fn)(const char *path, int flags, const struct file_who *who));

/**
 * file_read_as() - whose right counts for this thread's file_open_read()
 * from now on
 * @who: the user (kept by pointer: it must live until the next call);
 *       NULL, or uid 0: the process's own right, then root's through the
 *       opener, as before
 *
 * For any other user, file_open_read() opens only through the opener, as
 * that user: a file the broker's own user or root may read and @who may
 * not is refused (-EACCES). Without an opener (a broker not started as
 * root) only the process's own uid is read for.
 *
 * Return: the one in force before, for the caller to put back.
 */
const struct file_who *file_read_as(const struct file_who *who);

/* Whether this thread reads for a user other than root and the process's
 * own (file_read_as()): then what only the process has (its environment,
 * its key process's own files) is not for it either. */
bool file_reading_for_other(void);

/**
 * file_open_read() - open(@path, @flags), and where that is refused for
 * permission (EACCES, EPERM), through the opener of file_set_opener();
 * only through the opener, as that user, while file_read_as() names one
 * @path:  the file
 * @flags: as file_set_opener() says
 *
 * Return: a descriptor, or a negative errno.
 */
int file_open_read(const char *path, int flags);

/**
 * file_read_all() - read a regular file of at most @max bytes
 * @path: the file (opened non-blocking: a FIFO never hangs the caller)
 * @max:  the largest size accepted
 * @buf:  on success, the contents plus a NUL (free() it)
 * @len:  on success, the length read (what fstat promised, no more)
 *
 * Return: 0; -EINVAL for something that is not a regular file; -EFBIG when
 * larger than @max; another negative errno from open or read.
 */
int file_read_all(const char *path, size_t max, char **buf, size_t *len);

struct sl_err;
/**
 * file_read_all_err() - file_read_all(), and @err saying why it failed
 * @err: NULL, or on failure "PATH: not a regular file of at most MAX
 *       bytes" with errno 0 when the file is refused (not a regular file,
 *       larger than @max), "PATH: cannot open: <strerror>" with the errno
 *       when a call failed
 *
 * The return value is file_read_all()'s. A caller that treats a refusal
 * apart reads sl_err_errno(@err) == 0, not -EINVAL or -EFBIG: open(2) and
 * read(2) have those errnos of their own.
 */
int file_read_all_err(const char *path, size_t max, char **buf, size_t *len, struct sl_err *err);

/* The spares' directory's name where sluice keeps one: in state_dir for
 * the broker, in state_dir/keys for its key process. */
#define FILE_SPARE_DIR ".spare"

/**
 * file_spare_init_at() - keep the inodes of removed files for new ones
 * @dirfd: where @name is (AT_FDCWD: the working directory)
 * @name:  the directory of spares: made 0700 when missing; it must be this
 *         process's user's and closed to others. What is in it is removed.
 *
 * From then on file_unlink_at(), file_unlink() and file_rmdir() move what
 * they remove (emptied) into it, up to 64 files and 64 directories, and
 * file_new_at(), file_create_tmp(), file_write_atomic() and file_mkdir()
 * take from it before they allocate (file.c says why). For one process:
 * another that shares the directory would take spares this one counts.
 *
 * Return: 0, or a negative errno (-EPERM: the directory is another's or
 * open to others); without it nothing is kept, as before.
 */
int file_spare_init_at(int dirfd, const char *name);

/* No more spares (those in the directory stay there until the next
 * file_spare_init_at()). */
void file_spare_end(void);

/* How many spare files (@dir: directories) the pool holds. */
unsigned file_spare_count(int dir);

/**
 * file_new_at() - open(DIRFD/@name, O_WRONLY | O_CREAT | O_EXCL |
 * O_NOFOLLOW | O_CLOEXEC) with @mode exactly, from a spare when there is one
 *
 * Return: a descriptor, or a negative errno (-EEXIST: @name is taken).
 */
int file_new_at(int dirfd, const char *name, mode_t mode);

/* unlinkat(DIRFD, @name, 0) / unlink(@path), keeping a regular file that
 * is this user's and has no other name as a spare. 0 or a negative errno. */
int file_unlink_at(int dirfd, const char *name);
int file_unlink(const char *path);

/* mkdir(@path, @mode) / rmdir(@path), through the spares' directories
 * (an empty directory of this user's is kept). 0 or a negative errno. */
int file_mkdir(const char *path, mode_t mode);
int file_rmdir(const char *path);

/**
 * file_commit() - finish a file written as @tmp and put it at @path
 * @f:    the stream @tmp was written through (closed here, in every case)
 * @tmp:  its temporary name, beside @path
 * @path: where it goes, by rename(2): a reader sees the old file or the
 *        new one whole, never a part
 *
 * Every step is checked: a write that failed when the buffer filled
 * (ferror), the flush, the close (what the flush left to report; a full
 * disk fails here at the latest on file systems that reserve space when
 * written), the rename. Not synced: sluice's state files must outlive the
 * broker, not the machine. On failure @tmp is removed.
 *
 * Return: 0, or a negative errno.
 */
int file_commit(FILE *f, const char *tmp, const char *path);

/**
 * file_create_tmp() - start writing a whole file through a stream
 * @path:   where it will go (file_commit() puts it there)
 * @mode:   the file's mode, set whatever the umask
 * @tmp:    filled with the temporary's name, @path.tmp, for file_commit()
 * @tmplen: its size
 *
 * The temporary is created afresh (a stale one is removed; O_EXCL and
 * O_NOFOLLOW: nothing planted there is written through).
 *
 * Return: the stream, or NULL with errno set (nothing left behind).
 */
FILE *file_create_tmp(const char *path, mode_t mode, char *tmp, size_t tmplen);

/**
 * file_write_atomic() - put @len bytes of @data at @path, whole or not at all
 * @path: the file; written as @path.tmp (created afresh, as
 *        file_create_tmp()) and renamed over @path, so a reader sees the
 *        old file or the new
 * @data: the contents
 * @len:  their length
 * @mode: the file's mode, set whatever the umask
 *
 * Not synced (as file_commit()). On failure the temporary file is removed.
 *
 * Return: 0, or a negative errno.
 */
int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

#endif
