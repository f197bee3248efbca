// SPDX-License-Identifier: MIT
/* The broker's seccomp allowlist (broker/isolation.c), in a child process
 * of its own: the calls an escape needs fail with EPERM, each one counted
 * and logged, and the process goes on; the calls the broker makes work. */
#include <errno.h>
#include <fcntl.h>
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/isolation.h"

/* Bits of the child's exit status, one per expectation that failed. */
enum {
	BAD_INSTALL = 1 << 0,
	BAD_EXEC = 1 << 1,
	BAD_BPF = 1 << 2,
	BAD_UNSHARE = 1 << 3,
	BAD_MOUNT = 1 << 4,
	BAD_ALLOWED = 1 << 5,
	BAD_COUNT = 1 << 6,
};

static int child(int logfd)
{
	char err[200];
	char *const argv[] = { "true", NULL }, *const envp[] = { NULL };
	int bad = 0, sv[2], fd;

	/* Bounded: a child that hangs dies of SIGALRM, and the parent's read
	 * ends (the timer is set before the filter, which has no alarm). */
	alarm(10);
	/* Its SIGSYS lines go to the pipe the parent reads. */
	if (dup2(logfd, STDERR_FILENO) < 0)
		return 0x7f;
	if (isolation_seccomp_install(err, sizeof(err)) < 0)
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
	/* What the broker does: sockets, files, pipes. */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || close(fd) < 0 || pipe2(sv, O_CLOEXEC) < 0 || write(sv[1], "x", 1) != 1 ||
	    getpid() <= 0)
		bad |= BAD_ALLOWED;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || close(fd) < 0)
		bad |= BAD_ALLOWED;
	if (isolation_seccomp_refused() != 4)
		bad |= BAD_COUNT;
	return bad;
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
		cmocka_unit_test(test_allowlist),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
