// SPDX-License-Identifier: MIT
/* Unit tests for the contained runner (cli/runner.c, cli/seccomp.c) and the
 * workspace removal it relies on (netns/workspace.c):
 * the options of `sluice exec` / `sluice run`; the seccomp filter, loaded
 * in a child: what it refuses (and with which errno) and that what a
 * workload needs (threads, fork, ordinary syscalls) still works; and the
 * removal of a workspace, however deep the sandbox made it. */

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/runner.h"
#include "netns/netns_internal.h"

static int opt(struct cli_runner *o, int argc, char **argv)
{
	int i = 0;

	return cli_runner_option(o, argc, argv, &i);
}

static void test_user_option(void **state)
{
	struct cli_runner o = { 0 };
	char *a1[] = { "--user", "1000:1001" }, *a2[] = { "--user", "root" },
	     *a3[] = { "--user", "no-such-user-x" }, *a4[] = { "--user", "0:no-such-group-x" },
	     *a5[] = { "--user" }, *a6[] = { "--user", "12x" }, *a7[] = { "--nope", "x" };

	(void)state;
	assert_int_equal(opt(&o, 2, a1), 1);
	assert_true(o.user_set);
	assert_int_equal(o.uid, 1000);
	assert_int_equal(o.gid, 1001);
	assert_int_equal(opt(&o, 2, a2), 1);
	assert_int_equal(o.uid, 0);
	assert_int_equal(o.gid, 0);
	assert_int_equal(opt(&o, 2, a3), -1);
	assert_int_equal(opt(&o, 2, a4), -1);
	assert_int_equal(opt(&o, 1, a5), -1);
	assert_int_equal(opt(&o, 2, a6), -1);
	assert_int_equal(opt(&o, 2, a7), 0);
}

static void test_bind_option(void **state)
{
	static const struct {
		const char *arg;
		int r;
		const char *src, *dst;
		bool ro;
	} cases[] = {
		{ "/a:/b", 1, "/a", "/b", false },     { "/a:/b:ro", 1, "/a", "/b", true },
		{ "/a:/b:rw", 1, "/a", "/b", false },  { "rel:/b", 1, "rel", "/b", false },
		{ "/a", -1, NULL, NULL, false },       { "/a:b", -1, NULL, NULL, false },
		{ "/a:/b:xx", -1, NULL, NULL, false }, { ":/b", -1, NULL, NULL, false },
		{ "/a:", -1, NULL, NULL, false },
	};
	size_t k;

	(void)state;
	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct cli_runner o = { 0 };
		char *argv[] = { "--bind", (char *)cases[k].arg };

		assert_int_equal(opt(&o, 2, argv), cases[k].r);
		if (cases[k].r < 0)
			continue;
		assert_int_equal(o.nbinds, 1);
		assert_string_equal(o.binds[0].src, cases[k].src);
		assert_string_equal(o.binds[0].dst, cases[k].dst);
		assert_int_equal(o.binds[0].ro, cases[k].ro);
		/* The option owns its copy of the argument (src; dst points into
		 * it) for the life of a process that then execs. */
		free((char *)o.binds[0].src);
	}
}

static void *thread_fn(void *arg)
{
	return arg;
}

/* In the child, with the filter loaded: one bit per expectation not met. */
static int filtered_checks(void)
{
	int bad = 0, status;
	static int token;
	pthread_t t;
	void *ret = NULL;
	pid_t p;

	errno = 0;
	if (unshare(CLONE_NEWNET) != -1 || errno != EPERM)
		bad |= 1 << 0;
	errno = 0;
	if (setns(-1, 0) != -1 || errno != EPERM) /* not EBADF: refused first */
		bad |= 1 << 1;
	errno = 0;
	if (syscall(SYS_clone3, NULL, (size_t)0) != -1 || errno != ENOSYS)
		bad |= 1 << 2;
	errno = 0;
	if (syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL, 0) !=
		    -1 ||
	    errno != EPERM)
		bad |= 1 << 3;
	errno = 0;
	if (mount("none", "/tmp", "tmpfs", 0, NULL) != -1 || errno != EPERM)
		bad |= 1 << 4;
	errno = 0;
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != -1 || errno != EPERM)
		bad |= 1 << 5;
	errno = 0;
	if (syscall(SYS_bpf, 0, NULL, 0) != -1 || errno != EPERM)
		bad |= 1 << 6;
	errno = 0;
	if (ioctl(0, TIOCSTI, "x") != -1 || errno != EPERM)
		bad |= 1 << 7;
	errno = 0;
	if (syscall(SYS_io_uring_setup, 1, NULL) != -1 || errno != ENOSYS)
		bad |= 1 << 12;
	/* What a workload needs: threads (clone3 refused, glibc falls back
	 * to clone), fork, an ordinary ioctl's errno unchanged. */
	if (pthread_create(&t, NULL, thread_fn, &token) != 0 || pthread_join(t, &ret) != 0 ||
	    ret != (void *)&token)
		bad |= 1 << 8;
	p = fork();
	if (p == 0)
		_exit(7);
	if (p < 0 || waitpid(p, &status, 0) != p || !WIFEXITED(status) || WEXITSTATUS(status) != 7)
		bad |= 1 << 9;
	errno = 0;
	if (ioctl(-1, TIOCGWINSZ, NULL) != -1 || errno != EBADF)
		bad |= 1 << 10;
	if (getpid() <= 0)
		bad |= 1 << 11;
	return bad;
}

static void test_seccomp_filter(void **state)
{
	struct sock_filter prog[200];
	int n, status;
	pid_t pid;

	(void)state;
	n = cli_seccomp_build(prog, sizeof(prog) / sizeof(prog[0]));
	assert_true(n > 10);
	assert_int_equal(cli_seccomp_build(prog, 5), -ENOSPC);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sock_fprog fp = { .len = (unsigned short)n, .filter = prog };

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) < 0)
			_exit(255);
		_exit(filtered_checks() ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status)) {
		/* Again, to say which: the exit status holds 8 bits only. */
		int fds[2], bad = -1;

		assert_int_equal(pipe(fds), 0);
		pid = fork();
		if (pid == 0) {
			struct sock_fprog fp = { .len = (unsigned short)n, .filter = prog };

			prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
			syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp);
			bad = filtered_checks();
			if (write(fds[1], &bad, sizeof(bad)) != sizeof(bad))
				_exit(2);
			_exit(0);
		}
		close(fds[1]);
		assert_int_equal(read(fds[0], &bad, sizeof(bad)), (ssize_t)sizeof(bad));
		waitpid(pid, &status, 0);
		print_error("failed checks: %#x\n", bad);
		fail();
	}
}

/* A workspace 450 levels deep, with files and a link to a file outside at
 * every level, goes whole; the link's target stays. Needs root (the
 * workspace directory is root's); skipped otherwise. */
static void test_workspace_remove_deep(void **state)
{
	char name[64], path[256], outside[] = "/tmp/sluice-test-outside-XXXXXX";
	struct stat st;
	int fd, dfd, i, ofd;

	(void)state;
	snprintf(name, sizeof(name), "unit-test-%d", (int)getpid());
	if (geteuid() != 0 || (mkdir("/var/lib/sluice", 0755) < 0 && errno != EEXIST) ||
	    (mkdir(NETNS_WORKSPACE_DIR, 0711) < 0 && errno != EEXIST)) {
		skip();
		return;
	}
	ofd = mkstemp(outside);
	assert_true(ofd >= 0);
	close(ofd);
	snprintf(path, sizeof(path), NETNS_WORKSPACE_DIR "/%s", name);
	assert_int_equal(mkdir(path, 0700), 0);
	dfd = open(path, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	for (i = 0; i < 450; i++) {
		fd = openat(dfd, "f", O_WRONLY | O_CREAT, 0600);
		assert_true(fd >= 0);
		close(fd);
		assert_int_equal(symlinkat(outside, dfd, "l"), 0);
		assert_int_equal(mkdirat(dfd, "d", 0700), 0);
		fd = openat(dfd, "d", O_RDONLY | O_DIRECTORY);
		assert_true(fd >= 0);
		close(dfd);
		dfd = fd;
	}
	close(dfd);
	assert_int_equal(netns_workspace_remove(name), 0);
	assert_int_equal(stat(path, &st), -1);
	assert_int_equal(stat(outside, &st), 0);
	unlink(outside);
	assert_int_equal(netns_workspace_remove(name), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_user_option),
		cmocka_unit_test(test_bind_option),
		cmocka_unit_test(test_seccomp_filter),
		cmocka_unit_test(test_workspace_remove_deep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
