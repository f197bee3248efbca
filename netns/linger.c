// SPDX-License-Identifier: MIT
/* A child that outlives a sluice command by a moment, so that what is slow
 * to free is freed after the command has answered.
 *
 * Theory of operation: a file, a mount or a namespace is freed by the last
 * close or exit that drops it, and some of them make that close or exit
 * wait for the kernel: a detached procfs mount (netns_procfs_private())
 * waits for an RCU grace period, and the mount namespace that `ip netns
 * exec` made for this process is torn down mount by mount when its last
 * process exits (one mount per sandbox under /run/netns: milliseconds with
 * a thousand sandboxes). The caller of `ip netns exec B sluice create`
 * waits for all of it. netns_linger() starts a child that holds a copy of
 * the descriptors it is given, this process's memory and mount namespace,
 * and that waits until this process has exited (a pidfd of it becomes
 * readable once it is a zombie, after it has let go of its namespaces);
 * then the child exits in turn and pays for what is slow. The CPU spent is
 * the same; the caller's wait ends sooner. Only for a process about to
 * exit: the child keeps what it holds until then (at most LINGER_MAX_MS). */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "netns/netns_internal.h"

/* A process that does not exit within this is left behind, not waited for. */
#define LINGER_MAX_MS 10000

/* The child's, set before it starts and only read after (it shares this
 * process's memory, CLONE_VM, as netns_link_del_begin()'s does). */
static struct {
	int pidfd;
	void (*after)(void);
	char stack[64 << 10] __attribute__((aligned(16)));
} lg = { .pidfd = -1 };

/*
 * It makes no call that can fail in practice, and looks at no errno (which
 * it would share with the parent): every signal is blocked, and the poll
 * ends with the parent or the time limit. Only once the parent is gone,
 * and the memory this child shares with it is its own (errno, the heap;
 * a link-deleting child of netns_link_del_begin() that may still run
 * touches neither, but for an errno nobody reads), does it call @after,
 * which may then use the C library as any process does.
 */
static int linger_main(void *arg)
{
	struct pollfd p = { .fd = lg.pidfd, .events = POLLIN };
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	/* Nothing of the caller's output is held open: a reader of it (a
	 * shell's $(...)) would wait for this child too. */
	close(STDIN_FILENO);
	close(STDOUT_FILENO);
	close(STDERR_FILENO);
	if (poll(&p, 1, LINGER_MAX_MS) == 1 && lg.after)
		lg.after();
	return 0;
}

/**
 * netns_linger() - leave what is slow to free to a child that ends after
 *                  this process
 * @fd: a descriptor whose last close waits (-1: none); closed here either
 *      way
 *
 * Call it last, just before the process exits (see the file's top). When
 * no child can be started, @fd is closed here, and the exit frees the rest
 * as before.
 *
 * Return: 0, or a negative errno (no child).
 */
int netns_linger(int fd)
{
	return netns_linger_then(fd, NULL);
}

/**
 * netns_linger_then() - netns_linger(), and @after called by the child
 *                       once this process has exited
 * @fd:    as netns_linger()'s
 * @after: what is slow and need not be waited for (NULL: nothing); not
 *         called when this process outlives LINGER_MAX_MS
 *
 * Return: 0, or a negative errno (no child: @after is the caller's to call).
 */
int netns_linger_then(int fd, void (*after)(void))
{
	pid_t pid;
	int e;

	lg.after = after;
	lg.pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (lg.pidfd < 0) {
		e = -errno;
		goto out;
	}
	pid = clone(linger_main, lg.stack + sizeof(lg.stack), CLONE_VM | SIGCHLD, NULL);
	e = pid < 0 ? -errno : 0;
	close(lg.pidfd);
out:
	if (fd >= 0)
		close(fd);
	return e;
}
