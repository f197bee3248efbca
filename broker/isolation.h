/* SPDX-License-Identifier: MIT */
/* The broker's isolation: its own user, the opener, the seccomp allowlist. */
#ifndef SLUICE_BROKER_ISOLATION_H
#define SLUICE_BROKER_ISOLATION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>

struct sl_err;

/**
 * isolation_seccomp_install() - confine every thread of this process to the
 * broker's system calls, from now on
 * @err:    on failure, why (NULL: not wanted)
 *
 * Sets no_new_privs (needed without CAP_SYS_ADMIN) and a SIGSYS handler:
 * a call outside the list returns -EPERM, is counted and logged.
 *
 * Return: 0 or a negative errno.
 */
int isolation_seccomp_install(struct sl_err *err);

/* System calls refused since the filter was installed (any thread). */
uint64_t isolation_seccomp_refused(void);

/* For a SIGSYS handler (async-signal-safe: no library call, one write()
 * to stderr): "@pre@nr@post", @pre and @post string literals. */
void isolation_sigsys_say(const char *pre, size_t prelen, int nr, const char *post, size_t postlen);

/* The first steps of a helper process the broker forks as root (the
 * opener, the key process): it ends with the broker (@parent), ignores the
 * signals meant for the broker's process group, keeps only @sock and
 * stdin/out/err of the broker's descriptors, is named @name and is not
 * dumpable. Return: 0, or -1 (the caller exits). */
int isolation_helper_begin(int sock, pid_t parent, const char *name);

/**
 * isolation_opener_start() - fork the reader of root-only files
 * @err:    on failure, why (NULL: not wanted)
 *
 * Call while the process has one thread and is still uid 0, before
 * isolation_switch_user(). The child stays uid 0 with no capability at all
 * and does one thing: open a regular file read-only and hand its descriptor
 * back. From then on common/file.h's readers (policies, secret files) ask it
 * when the broker's own open is refused (EACCES, EPERM). It writes nothing,
 * opens no directory, device, /proc or /sys file, and has a seccomp filter
 * of a dozen calls. It ends when the broker does.
 *
 * Return: 0 or a negative errno.
 */
int isolation_opener_start(struct sl_err *err);

/**
 * isolation_give() - make one file or directory the broker user's
 * @path: what to give; no part of it may be a symlink (openat2
 *        RESOLVE_NO_SYMLINKS), so that nothing swapped in by its owner
 *        since @seen leads root elsewhere
 * @seen: its lstat() when it was found: it must still be that inode
 * @uid:  the broker's user
 * @gid:  its group
 *
 * Only a directory or a regular file with one name is given (a second
 * name may be a link to a file from elsewhere); a regular file loses its
 * permissions for others first.
 *
 * Return: 2 given, 0 already the user's, 1 left alone (not what @seen
 * was, a symlink on the way, another kind of file), or a negative errno.
 */
int isolation_give(const char *path, const struct stat *seen, uid_t uid, gid_t gid);

/**
 * isolation_take_over() - make @dir's tree the broker user's
 * @dir: the state directory; symlinks in it are not followed
 * @uid: the broker's user
 * @gid: its group
 * @n:   set to the number of entries whose owner changed
 * @err: on failure, why; on success, a notice for the log when entries were
 *       left alone (hard links, devices, FIFOs, symlinks), else cleared
 *
 * Return: 0 or a negative errno (the first chown that failed).
 */
int isolation_take_over(const char *dir, uid_t uid, gid_t gid, unsigned *n, struct sl_err *err);

/**
 * isolation_switch_user() - become @uid:@gid, no supplementary group, and
 * no capability left in any set (effective, permitted, inheritable,
 * ambient, bounding), on every thread
 * @uid:    not 0
 * @gid:    not 0
 * @err:    on failure, why (NULL: not wanted)
 *
 * Checked after the switch: the saved ids too, and that no capability
 * remains. Must come before isolation_seccomp_install(), which refuses
 * setresuid and the rest from then on.
 *
 * Return: 0 or a negative errno.
 */
int isolation_switch_user(uid_t uid, gid_t gid, struct sl_err *err);

#endif
