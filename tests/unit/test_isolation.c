// SPDX-License-Identifier: MIT
/* The broker's seccomp allowlist (broker/isolation.c), in a child process
 * of its own: the calls an escape needs fail with EPERM, each one counted
 * and logged, and the process goes on; the calls the broker makes work. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/isolation.h"
#include "common/err.h"
#include "common/file.h"

/* Bits of the child's exit status, one per expectation that failed. */
enum {
	BAD_INSTALL = 1 << 0,
	BAD_EXEC = 1 << 1,
	BAD_BPF = 1 << 2,
	BAD_UNSHARE = 1 << 3,
	BAD_MOUNT = 1 << 4,
	BAD_ALLOWED = 1 << 5,
	BAD_COUNT = 1 << 6,
	BAD_SETID = 1 << 7,
};

static void *thread_noop(void *arg)
{
	return arg;
}

static int child(int logfd)
{
	struct sl_err err = { 0 };
	char *const argv[] = { "true", NULL }, *const envp[] = { NULL };
	int bad = 0, sv[2], fd;

	/* Bounded: a child that hangs dies of SIGALRM, and the parent's read
	 * ends (the timer is set before the filter, which has no alarm). */
	alarm(10);
	/* Its SIGSYS lines go to the pipe the parent reads. */
	if (dup2(logfd, STDERR_FILENO) < 0)
		return 0x7f;
	if (isolation_seccomp_install(&err) < 0)
		return BAD_INSTALL;
	errno = 0;
	if (syscall(SYS_execve, "/bin/true", argv, envp) != -1 || errno != EPERM)
		bad |= BAD_EXEC;
	/* (Not ptrace: sanitizer builds allow it, for LeakSanitizer.) */
	errno = 0;
	if (syscall(SYS_bpf, 0, NULL, 0) != -1 || errno != EPERM)
		bad |= BAD_BPF;
	errno = 0;
	if (syscall(SYS_unshare, CLONE_NEWNET) != -1 || errno != EPERM)
		bad |= BAD_UNSHARE;
	errno = 0;
	if (syscall(SYS_mount, "none", "/", "tmpfs", 0, NULL) != -1 || errno != EPERM)
		bad |= BAD_MOUNT;
	/* clone: a new user and network namespace no (refused and counted);
	 * clone3 ENOSYS, so that threads still start through clone. */
	errno = 0;
	if (syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, NULL) !=
		    -1 ||
	    errno != EPERM)
		bad |= BAD_UNSHARE;
	errno = 0;
	if (syscall(SYS_clone3, NULL, 0) != -1 || errno != ENOSYS)
		bad |= BAD_UNSHARE;
	{
		pthread_t t;

		if (pthread_create(&t, NULL, thread_noop, NULL) != 0 || pthread_join(t, NULL) != 0)
			bad |= BAD_ALLOWED;
	}
	/* What the broker does: sockets, files, pipes. */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || close(fd) < 0 || pipe2(sv, O_CLOEXEC) < 0 || write(sv[1], "x", 1) != 1 ||
	    getpid() <= 0)
		bad |= BAD_ALLOWED;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || close(fd) < 0)
		bad |= BAD_ALLOWED;
	/* The user switch is over by the time the filter is in: setresuid
	 * and the rest are refused (no-op calls, which would succeed). */
	errno = 0;
	if (syscall(SYS_setresuid, -1, -1, -1) != -1 || errno != EPERM)
		bad |= BAD_SETID;
	errno = 0;
	if (syscall(SYS_setresgid, -1, -1, -1) != -1 || errno != EPERM)
		bad |= BAD_SETID;
	errno = 0;
	if (syscall(SYS_setgroups, 0, NULL) != -1 || errno != EPERM)
		bad |= BAD_SETID;
	if (isolation_seccomp_refused() != 8)
		bad |= BAD_COUNT;
	return bad;
}

/* Bits of the opener child's exit status. */
enum {
	OP_SETUP = 1 << 0,  /* a file, the opener or the switch failed */
	OP_DIRECT = 1 << 1, /* the switched process read the root file itself */
	OP_READ = 1 << 2,   /* file_read_all() did not get it through the opener */
	OP_WRITE = 1 << 3,  /* the opener opened something for writing */
	OP_DIR = 1 << 4,    /* ... or a directory */
	OP_PROC = 1 << 5,   /* ... or a /proc file */
	OP_UID = 1 << 6,    /* the process is not the user it switched to */
	OP_LINK = 1 << 7,   /* ... or followed a symlink under O_NOFOLLOW */
};

static int opener_child(const char *dir)
{
	char path[300], link[300], *buf = NULL;
	struct sl_err err = { 0 };
	size_t len = 0;
	int bad = 0, fd;

	alarm(10);
	snprintf(path, sizeof(path), "%s/secret", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	if (file_write_atomic(path, "hush\n", 5, 0600) < 0 || symlink(path, link) < 0 ||
	    isolation_opener_start(&err) < 0 || isolation_switch_user(65533, 65533, &err) < 0)
		return OP_SETUP;
	if (getuid() != 65533 || geteuid() != 65533 || getgid() != 65533)
		bad |= OP_UID;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || errno != EACCES)
		bad |= OP_DIRECT;
	if (fd >= 0)
		close(fd);
	if (file_read_all(path, 100, &buf, &len) < 0 || len != 5 || memcmp(buf, "hush\n", 5))
		bad |= OP_READ;
	free(buf);
	fd = file_open_read(path, O_WRONLY | O_CLOEXEC);
	if (fd != -EINVAL)
		bad |= OP_WRITE;
	if (fd >= 0)
		close(fd);
	fd = file_open_read(dir, O_RDONLY | O_CLOEXEC);
	if (fd != -EINVAL)
		bad |= OP_DIR;
	if (fd >= 0)
		close(fd);
	fd = file_open_read("/proc/1/environ", O_RDONLY | O_CLOEXEC);
	if (fd != -EACCES)
		bad |= OP_PROC;
	if (fd >= 0)
		close(fd);
	fd = file_open_read(link, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd != -ELOOP)
		bad |= OP_LINK;
	if (fd >= 0)
		close(fd);
	return bad;
}

/*
 * As root: isolation_give() gives a file only by a path with no symlink in
 * it, only the inode that was seen, never a file with a second name. The
 * state directory's new owner could otherwise swap a directory of it for a
 * symlink to /etc between the walk's look and root's chown.
 */
static void test_give(void **state)
{
	char dir[] = "/tmp/sluice-give-XXXXXX", p[256], q[256];
	struct stat seen, st;
	int fd;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/d", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/d/f", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(lstat(p, &seen), 0);

	/* Through a symlink in the path (the swapped directory): left alone. */
	snprintf(q, sizeof(q), "%s/l", dir);
	assert_int_equal(symlink("d", q), 0);
	snprintf(q, sizeof(q), "%s/l/f", dir);
	assert_int_equal(isolation_give(q, &seen, 65533, 65533), 1);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_uid, 0);
	/* A second name: left alone. */
	snprintf(q, sizeof(q), "%s/d/g", dir);
	assert_int_equal(link(p, q), 0);
	assert_int_equal(isolation_give(p, &seen, 65533, 65533), 1);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(unlink(q), 0);
	/* Another inode than the one seen: left alone. */
	snprintf(q, sizeof(q), "%s/d", dir);
	{
		struct stat other;

		assert_int_equal(lstat(q, &other), 0);
		assert_int_equal(isolation_give(p, &other, 65533, 65533), 1);
	}
	/* The file itself, by its own path: given, and no longer for others. */
	assert_int_equal(isolation_give(p, &seen, 65533, 65533), 2);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_uid, 65533);
	assert_int_equal(st.st_gid, 65533);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(isolation_give(p, &seen, 65533, 65533), 0);

	unlink(p);
	snprintf(q, sizeof(q), "%s/l", dir);
	unlink(q);
	snprintf(q, sizeof(q), "%s/d", dir);
	rmdir(q);
	rmdir(dir);
}

/* As root: a process switched to 65533 reads a 0600 root file through the
 * opener, and the opener opens nothing else. */
static void test_opener(void **state)
{
	char dir[] = "/tmp/test_isolation.XXXXXX", path[300];
	int status;
	pid_t pid;

	(void)state;
	if (getuid() != 0) {
		skip();
		return;
	}
	assert_non_null(mkdtemp(dir)); /* 0700, root's */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(opener_child(dir));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	snprintf(path, sizeof(path), "%s/secret", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/link", dir);
	unlink(path);
	rmdir(dir);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Files for the member test: made by root in @dir (0711), each with its
 * owner, group and mode. */
static int member_file(const char *dir, const char *name, uid_t uid, gid_t gid, mode_t mode)
{
	char path[300];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (file_write_atomic(path, name, strlen(name), 0600) < 0 || chown(path, uid, gid) < 0 ||
	    chmod(path, mode) < 0)
		return -1;
	return 0;
}

/* Reads @dir/@name with @who's right; 0 when it read @name's contents
 * (each file holds its own name), else the negative errno. */
static int read_as(const struct file_who *who, const char *dir, const char *name)
{
	const struct file_who *was = file_read_as(who);
	char path[300], *buf = NULL;
	size_t len = 0;
	int r;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	r = file_read_all(path, 100, &buf, &len);
	file_read_as(was);
	if (r == 0 && (len != strlen(name) || memcmp(buf, name, len)))
		r = -EIO;
	free(buf);
	return r;
}

/*
 * The member's reads, in a process switched to 65533 as the broker is:
 * each result against what the kernel gives that user, every way a file
 * can be refused (owner, group, a group that denies, a directory on the
 * way) and given, and root's reads go on after. Bit i of the result: the
 * i-th check failed.
 */
static int member_child(const char *dir)
{
	struct file_who m = { .uid = 12345, .gid = 12345 };
	struct file_who other = { .uid = 12346, .gid = 12346 };
	struct file_who grp = {
		.uid = 12346, .gid = 12346, .n_groups = 2, .groups = { 4242, 23456 }
	};
	struct sl_err err = { 0 };
	char sub[300];
	int bad = 0, i = 0;

	alarm(10);
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	if (member_file(dir, "own", 12345, 12345, 0600) < 0 ||
	    member_file(dir, "grp", 0, 23456, 0640) < 0 ||
	    member_file(dir, "deny", 0, 23456, 0604) < 0 ||
	    member_file(dir, "rootonly", 0, 0, 0600) < 0 ||
	    member_file(dir, "broker", 65533, 65533, 0600) < 0 || mkdir(sub, 0700) < 0 ||
	    member_file(sub, "open", 0, 0, 0644) < 0 || isolation_opener_start(&err) < 0 ||
	    isolation_switch_user(65533, 65533, &err) < 0)
		return 1 << 30;
#define CHECK(cond) (bad |= (cond) ? 0 : 1 << i, i++)
	CHECK(read_as(&m, dir, "own") == 0);		/* 0: its owner */
	CHECK(read_as(&other, dir, "own") == -EACCES);	/* 1: another user */
	CHECK(read_as(&grp, dir, "grp") == 0);		/* 2: a supplementary group */
	CHECK(read_as(&other, dir, "grp") == -EACCES);	/* 3: without it */
	CHECK(read_as(&grp, dir, "deny") == -EACCES);	/* 4: a group that denies */
	CHECK(read_as(&other, dir, "deny") == 0);	/* 5: others may */
	CHECK(read_as(&m, dir, "rootonly") == -EACCES); /* 6: root's */
	CHECK(read_as(&m, dir, "broker") == -EACCES);	/* 7: the broker user's own */
	CHECK(read_as(&m, sub, "open") == -EACCES);	/* 8: a closed directory */
	CHECK(read_as(NULL, dir, "rootonly") == 0);	/* 9: root, after all that */
	CHECK(read_as(NULL, sub, "open") == 0);		/* 10 */
	CHECK(read_as(NULL, dir, "broker") == 0);	/* 11: its own, itself */
	/* 12: uid 0 is root, whatever else it says. */
	{
		struct file_who root = { .uid = 0, .gid = 12345 };

		CHECK(read_as(&root, dir, "rootonly") == 0);
	}
	/* 13-14: who counts is this thread's, until put back. */
	CHECK(!file_reading_for_other());
	file_read_as(&m);
	CHECK(file_reading_for_other());
	file_read_as(NULL);
#undef CHECK
	return bad;
}

/* As root: what is read for a control_group member is read with that
 * member's right alone, judged by the kernel. */
static void test_opener_member(void **state)
{
	static const char *const names[] = { "own",    "grp",	   "deny", "rootonly",
					     "broker", "sub/open", "sub" };
	char dir[] = "/tmp/test_isolation.XXXXXX", path[300];
	int status;
	size_t i;
	pid_t pid;

	(void)state;
	if (getuid() != 0) {
		skip();
		return;
	}
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0711), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int bad = member_child(dir);

		if (bad)
			fprintf(stderr, "member checks failed (bit i: check i): 0x%x\n", bad);
		_exit(bad ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		(void)(unlink(path) == 0 || rmdir(path) == 0);
	}
	assert_int_equal(rmdir(dir), 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Switching to root is no switch: refused. */
static void test_switch_refuses_root(void **state)
{
	struct sl_err err = { 0 };

	(void)state;
	assert_int_equal(isolation_switch_user(0, 0, &err), -EINVAL);
	assert_string_equal(sl_err_msg(&err), "switch to 0:0: not an unprivileged user");
	/* A refusal, not a system call's failure. */
	assert_int_equal(sl_err_errno(&err), 0);
}

static void test_allowlist(void **state)
{
	char log[2048] = "";
	int p[2], status;
	ssize_t n, got = 0;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		_exit(child(p[1]));
	}
	close(p[1]);
	while ((n = read(p[0], log + got, sizeof(log) - 1 - (size_t)got)) > 0)
		got += n;
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	/* It lived through every refusal, and each went as expected. */
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* One line per refused call, naming it. */
	{
		char want[120];

		snprintf(want, sizeof(want), "seccomp: system call %d refused (EPERM)", SYS_execve);
		assert_non_null(strstr(log, want));
		snprintf(want, sizeof(want), "seccomp: system call %d refused (EPERM)", SYS_bpf);
		assert_non_null(strstr(log, want));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allowlist),     cmocka_unit_test(test_opener),
		cmocka_unit_test(test_opener_member), cmocka_unit_test(test_switch_refuses_root),
		cmocka_unit_test(test_give),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
