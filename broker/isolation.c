// SPDX-License-Identifier: MIT
/*
 * The broker's isolation: the switch to its own user (isolation_switch_user,
 * after isolation_take_over of its state), the opener that is all that
 * stays root (below, "the opener"), and the seccomp allowlist.
 *
 * The allowlist: after start-up (sockets bound, user switched, state
 * read: main.c drop_privileges(), confine()) the broker, every
 * thread of it, may make the system calls below and no other. The broker
 * parses what hostile sandboxes send; if a bug in that code is ever made to
 * run the attacker's code, this is what that code can ask the kernel for:
 * no exec, no ptrace, no namespaces or mounts, no bpf, no keyrings, no
 * module or kexec loading, no perf events, no io_uring.
 *
 * Theory of operation: a classic BPF program, written by hand as the
 * runner's is (netns/seccomp.c; no libseccomp to install), checks the
 * architecture, then compares the call's number with each allowed one. A
 * call outside the list is not made: SECCOMP_RET_TRAP raises SIGSYS in the
 * calling thread, whose handler writes one line to stderr naming the call,
 * counts it (`sluice status`: seccomp_refused) and makes the call return
 * -EPERM, so that a code path the list missed fails the way an unprivileged
 * process's would, visibly, rather than killing every sandbox's egress. No
 * thread may block SIGSYS: the kernel kills a process whose thread meets
 * the filter with it blocked (creds/tokens.c leaves it open for that).
 * The list was taken from the calls the broker makes under the whole
 * integration suite (strace -f of each test's broker), plus those of the
 * same families that glibc, OpenSSL and c-ares use on paths the suite does
 * not reach (error paths, the fallbacks of older kernels); every entry
 * says why it is there.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#include "broker/isolation.h"
#include "broker/keys/keys.h"
#include "common/err.h"
#include "common/file.h"

#if defined(__x86_64__)
#define ISO_ARCH AUDIT_ARCH_X86_64
#define ISO_RET(uc) ((uc)->uc_mcontext.gregs[REG_RAX])
#elif defined(__aarch64__)
#define ISO_ARCH AUDIT_ARCH_AARCH64
#define ISO_RET(uc) ((uc)->uc_mcontext.regs[0])
#else
#error "broker/isolation.c: add this architecture's AUDIT_ARCH_ and return register"
#endif

#ifndef SECCOMP_FILTER_FLAG_TSYNC
#define SECCOMP_FILTER_FLAG_TSYNC 1
#endif

/* __NR_ values the architecture lacks are left out by the #ifdefs. One row
 * per group its comment explains, which clang-format would undo: one call a
 * line around the comments and #ifdefs. */
/* clang-format off */
static const int allowed[] = {
	/* Files and descriptors: the state_dir (registrations, CAs,
	 * placeholders, journals: written to a temporary file, synced,
	 * renamed), the audit log (written whole or cut back: ftruncate),
	 * policy and secret files read at register and reload, /etc/group
	 * and nsswitch for control_group, the signalfd and eventfds. */
	__NR_read, __NR_write, __NR_readv, __NR_writev, __NR_pread64, __NR_pwrite64,
	__NR_openat, __NR_close, __NR_lseek, __NR_fcntl, __NR_dup, __NR_dup3,
	__NR_newfstatat, __NR_fstat, __NR_statx, __NR_readlinkat, __NR_faccessat,
#ifdef __NR_faccessat2
	__NR_faccessat2,
#endif
	__NR_getdents64, __NR_fsync, __NR_fdatasync, __NR_ftruncate, __NR_fchmod,
	__NR_unlinkat, __NR_mkdirat, __NR_flock, __NR_umask,
#ifdef __NR_renameat
	__NR_renameat,
#endif
#ifdef __NR_renameat2
	__NR_renameat2,
#endif
#ifdef __NR_open /* the legacy path calls, where the architecture has them */
	__NR_open, __NR_stat, __NR_lstat, __NR_access, __NR_rename, __NR_unlink,
	__NR_mkdir, __NR_rmdir, __NR_readlink,
#endif
	/* Tunnels and body relays move bytes between sockets through pipes. */
	__NR_pipe2, __NR_splice,
	/* Sockets: accepting sandboxes' connections, connecting upstream
	 * (proxy, resolver, token endpoints), the DNS filter's datagrams
	 * (recvmmsg/sendmmsg), the control socket and its peer checks (a
	 * netlink socket, the peer's pidfd). */
	__NR_socket, __NR_connect, __NR_accept4, __NR_bind, __NR_listen, __NR_shutdown,
	__NR_getsockname, __NR_getpeername, __NR_setsockopt, __NR_getsockopt,
	__NR_sendto, __NR_recvfrom, __NR_sendmsg, __NR_recvmsg, __NR_sendmmsg,
	__NR_recvmmsg,
#ifdef __NR_pidfd_open
	__NR_pidfd_open,
#endif
	/* The event loops (the main loop's signals come through a signalfd),
	 * and the control thread's waits. */
#ifdef __NR_epoll_wait
	__NR_epoll_wait,
#endif
	__NR_epoll_pwait, __NR_epoll_ctl, __NR_epoll_create1, __NR_eventfd2, __NR_signalfd4,
	__NR_ppoll,
#ifdef __NR_poll
	__NR_poll,
#endif
#ifdef __NR_epoll_pwait2
	__NR_epoll_pwait2,
#endif
	/* Memory: malloc, thread stacks, OpenSSL. */
	__NR_mmap, __NR_munmap, __NR_mremap, __NR_mprotect, __NR_madvise, __NR_brk,
	/* Threads: the CA maker and token fetchers start and end threads
	 * while the broker runs; a thread's exit, its robust list and rseq
	 * area. clone and clone3 are judged before this list
	 * (isolation_seccomp_install()): threads yes, namespaces no. No exec
	 * follows a clone here: exec is not allowed. */
	__NR_exit, __NR_exit_group, __NR_futex, __NR_set_robust_list,
	__NR_rseq, __NR_sched_yield, __NR_sched_getaffinity, __NR_set_tid_address,
#ifdef __NR_futex_waitv
	__NR_futex_waitv,
#endif
	/* Signals: the signal mask of each thread, SIGSYS and SIGPIPE
	 * handlers, their return, and abort()'s tgkill. */
	__NR_rt_sigprocmask, __NR_rt_sigaction, __NR_rt_sigreturn, __NR_sigaltstack,
	__NR_tgkill, __NR_restart_syscall,
	/* Time and identity: clocks where the vDSO falls back, sleeps, the
	 * pid in log and audit lines, thread names, RLIMIT_NOFILE at reload,
	 * the kernel's name and CPU count (OpenSSL, glibc). */
	__NR_clock_gettime, __NR_clock_getres, __NR_gettimeofday, __NR_nanosleep,
	__NR_clock_nanosleep, __NR_getpid, __NR_gettid, __NR_getuid, __NR_geteuid,
	__NR_getgid, __NR_getegid, __NR_prlimit64, __NR_prctl, __NR_uname, __NR_sysinfo,
	/* Randomness: keys, placeholders, DNS ids, siphash keys. */
	__NR_getrandom,
	/* Token fetcher threads drop their own capabilities as they start
	 * (capabilities are per thread; creds/tokens.c). capset only ever
	 * lowers what a thread holds: none is left to raise. */
	__NR_capget, __NR_capset,
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* Sanitizer builds only (make asan, make tsan): LeakSanitizer stops
	 * the world at exit with ptrace from a cloned thread and reads
	 * /proc/self/maps; the sanitizers' reports use these too. Never in a
	 * release build. */
	__NR_ptrace, __NR_wait4, __NR_getppid, __NR_kill,
#ifdef __NR_getdents
	__NR_getdents, /* the sanitizers' own directory reader (/proc/self/task) */
#endif
#ifdef __NR_getrlimit
	__NR_getrlimit,
#endif
	__NR_sched_setaffinity,
#endif
};
/* clang-format on */

/* The calls of every request and datagram, compared first: the filter
 * runs on every call and compares in order. Only an ordering: each is in
 * allowed[] with its reason, and one that is not is left out. Kept in
 * rows: clang-format's columns would read as an order down them. */
/* clang-format off */
static const int hot[] = {
	__NR_epoll_pwait, __NR_recvfrom, __NR_sendto, __NR_epoll_ctl, __NR_read, __NR_write,
	__NR_splice, __NR_accept4, __NR_close, __NR_recvmmsg, __NR_sendmmsg, __NR_setsockopt,
	__NR_getsockopt, __NR_shutdown, __NR_recvmsg, __NR_sendmsg, __NR_connect, __NR_socket,
	__NR_futex, __NR_newfstatat, __NR_getpid,
#ifdef __NR_epoll_wait
	__NR_epoll_wait,
#endif
};
/* clang-format on */

/* Calls the filter refused, counted in the SIGSYS handler (no context but
 * the signal's): one seccomp filter per process, so one count. */
static atomic_uint_fast64_t refused;

static bool listed(const int *list, size_t n, int nr)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (list[i] == nr)
			return true;
	return false;
}

uint64_t isolation_seccomp_refused(void)
{
	return atomic_load_explicit(&refused, memory_order_relaxed);
}

void isolation_sigsys_say(const char *pre, size_t prelen, int nr, const char *post, size_t postlen)
{
	char line[256], num[12];
	size_t len = 0;
	int k = 0;

	if (prelen + sizeof(num) + postlen > sizeof(line))
		return;
	if (nr < 0)
		nr = 0;
	do {
		num[k++] = (char)('0' + nr % 10);
		nr /= 10;
	} while (nr && k < (int)sizeof(num));
	memcpy(line, pre, prelen);
	len = prelen;
	while (k)
		line[len++] = num[--k];
	memcpy(line + len, post, postlen);
	len += postlen;
	if (write(STDERR_FILENO, line, len) < 0) {
		/* nothing to be done: the caller's count or exit still says it */
	}
}

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	static const char pre[] = "sluiced: seccomp: system call ";
	static const char post[] = " refused (EPERM): not in broker/isolation.c's allowlist\n";
	int e = errno;

	(void)sig;
	atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
	ISO_RET((ucontext_t *)ctx) = -EPERM;
	isolation_sigsys_say(pre, sizeof(pre) - 1, si->si_syscall, post, sizeof(post) - 1);
	errno = e;
}

/*
 * The first 4 instructions of both filters (the broker's, the opener's): the
 * architecture first, since a call made through another ABI (i386 int 0x80)
 * has other numbers, and is refused outright; then the call's number. An
 * x32 call has this arch value too, with 0x40000000 set in its number: it
 * matches no entry, and is refused. Return: how many were written.
 */
/* clone(2)'s namespace flags. */
#define ISO_CLONE_NS_FLAGS                                                                         \
	(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | \
	 CLONE_NEWCGROUP)

static unsigned filter_head(struct sock_filter *f)
{
	unsigned k = 0;

	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ISO_ARCH, 1, 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	return k;
}

int isolation_seccomp_install(struct sl_err *err)
{
	enum { N = sizeof(allowed) / sizeof(allowed[0]), H = sizeof(hot) / sizeof(hot[0]) };
	struct sock_filter f[4 + 7 + N + 2];
	int order[N];
	unsigned n = 0;
	struct sock_fprog prog = { .filter = f };
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	unsigned i, k;

	k = filter_head(f);
	/* clone3 passes its flags in memory, where a filter cannot look:
	 * ENOSYS makes glibc's pthread_create fall back to clone. clone: a
	 * thread yes, a new namespace no (a user and network namespace of
	 * its own would hand a compromised broker CAP_NET_ADMIN there, and
	 * the nf_tables and netlink surface with it); refused as any call
	 * off the list is, logged and counted. The flags are the low 32 bits
	 * of the first argument. */
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, args[0]));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, ISO_CLONE_NS_FLAGS, 0, 1);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	/* The hot calls first, then the rest, each once. */
	for (i = 0; i < H; i++)
		if (listed(allowed, N, hot[i]) && !listed(order, n, hot[i]))
			order[n++] = hot[i];
	for (i = 0; i < N; i++)
		if (!listed(order, n, allowed[i]))
			order[n++] = allowed[i];
	for (i = 0; i < n; i++)
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)order[i],
						      (unsigned char)(n - i), 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog.len = (unsigned short)k;

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) < 0)
		return sl_err_sys(err, errno, "sigaction(SIGSYS)");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return sl_err_sys(err, errno, "prctl(PR_SET_NO_NEW_PRIVS)");
	/* Every thread at once (TSYNC): the control thread and the token
	 * fetchers run already; threads started later inherit it. */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0) {
		int e = errno;

		if (e)
			return sl_err_sys(err, e, "seccomp");
		/* TSYNC failed without an errno: the id of the thread that
		 * could not take the filter came back instead. */
		return sl_err_set(err, EAGAIN, "seccomp: a thread could not take it");
	}
	return 0;
}

/* ---- the opener -----------------------------------------------------------
 *
 * Once the broker runs as its own user it may no longer read a policy or a
 * secret file that root alone may read (secret files are 0600 root as a
 * rule, and `sluice create --policy` names files wherever the operator
 * keeps them). They are read at register, update and reload, long after
 * start-up, so reading them before the switch does not do; the CLI does
 * not send them either (a SIGHUP reload has no CLI behind it). The opener
 * is what is left of root: a child forked at start-up, uid 0 with no
 * capability at all, so that it reads what root owns or may read by the
 * file's mode, and never another user's private file (that would take
 * CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH, which it does not hold). It
 * opens a regular file read-only and hands the descriptor back
 * (SCM_RIGHTS). It never writes, opens no directory, device or FIFO (the
 * path is opened O_PATH and checked before it is opened for reading, so a
 * device's open has no effect), nothing on /proc or /sys, and its seccomp
 * filter lets it do nothing else.
 *
 * It also reads for a control_group member (common/file.h
 * file_read_as()): the files of a sandbox a member registered are opened
 * with that member's file-system identity (setgroups, setfsgid, setfsuid:
 * it keeps CAP_SETUID and CAP_SETGID for that, and its filter allows no
 * other id call), so that the kernel judges every directory on the way and
 * the file itself as for the member, ACLs included; then it is root again.
 * What a broker taken over could still get from it: the contents of a file
 * root or some user may read. Before the switch the broker could also
 * write every root-owned file; that is gone.
 *
 * Protocol, on a SOCK_SEQPACKET pair: the request is open's flags (an
 * int32), whether it is for a user (an int32, 0 or 1), that user and the
 * path with its NUL; the answer an int32 (0 or a negative errno) and, with
 * 0, the descriptor. One request at a time (opener_lock), each answered
 * within OPENER_WAIT_S or the opener counts as gone.
 */
#define OPENER_FLAGS (O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY)
#define OPENER_WAIT_S 5

struct opener_req {
	int32_t flags;
	int32_t as; /* 1: as @who; 0: as root */
	struct file_who who;
	char path[PATH_MAX];
};

/* Process-wide on purpose, not a member of struct broker: there is one
 * opener child per process (forked while the broker is the only thread),
 * and what reaches it is common/file.c's file_set_opener() hook, a plain
 * function with no context, called from any thread that reads a policy or
 * a secret. */
static int opener_sock = -1;
static pthread_mutex_t opener_lock = PTHREAD_MUTEX_INITIALIZER;

/* The opener's whole filter: anything else kills it (the broker then reads
 * only what its own user may). In rows, as allowed[]. */
/* clang-format off */
static const int opener_allowed[] = {
	/* Requests in, answers and descriptors out. */
	__NR_recvfrom, __NR_recvmsg, __NR_sendmsg,
	/* The open (O_PATH, then through /proc/self/fd), its checks, the close. */
	__NR_openat, __NR_fstat, __NR_newfstatat, __NR_fstatfs, __NR_close,
	/* A member's file-system identity, and back: no other id call. */
	__NR_setgroups, __NR_setfsgid, __NR_setfsuid,
#ifdef __NR_open
	__NR_open,
#endif
	__NR_exit, __NR_exit_group, __NR_rt_sigreturn, __NR_restart_syscall,
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* Sanitizer builds only: their allocator and reports. */
	__NR_mmap, __NR_munmap, __NR_madvise, __NR_mprotect, __NR_write, __NR_getpid,
	__NR_gettid, __NR_futex, __NR_sched_yield, __NR_rt_sigprocmask, __NR_tgkill,
#endif
};
/* clang-format on */

static int opener_filter(void)
{
	enum { N = sizeof(opener_allowed) / sizeof(opener_allowed[0]) };
	struct sock_filter f[4 + N + 2];
	struct sock_fprog prog = { .filter = f };
	unsigned i, k;

	k = filter_head(f);
	for (i = 0; i < N; i++)
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
						      (unsigned)opener_allowed[i],
						      (unsigned char)(N - i), 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog.len = (unsigned short)k;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/*
 * Empties the calling thread's bounding set but @keep. Only what is in it is
 * dropped: under a service manager that bounded it already (systemd's
 * CapabilityBoundingSet), a drop of what is not there would fail for want
 * of CAP_SETPCAP. Return: -1 when empty, else the capability left.
 */
static int capbset_clear(uint32_t keep)
{
	int cap;

	for (cap = 0; cap <= 63; cap++) {
		int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

		if (in < 0)
			break; /* past the kernel's last capability */
		if (cap < 32 && (keep & (1u << cap)))
			continue;
		if (in == 1 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return cap;
	}
	return -1;
}

/* Every capability out of every set of the calling thread but @keep
 * (permitted and effective; a mask of capabilities below 32); the uid
 * stays. */
static int drop_caps_but(uint32_t keep)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	int cap;

	/* The bounding set first: dropping from it takes CAP_SETPCAP. */
	cap = capbset_clear(keep);
	if (cap >= 0)
		return -EPERM;
	data[0].permitted = keep;
	data[0].effective = keep;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

/* One answer: @r, and with 0 the descriptor @fd. */
static void opener_reply(int sock, int32_t r, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} c;
	struct iovec iov = { .iov_base = &r, .iov_len = sizeof(r) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	memset(&c, 0, sizeof(c));
	if (r == 0) {
		m.msg_control = c.buf;
		m.msg_controllen = sizeof(c.buf);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	while (sendmsg(sock, &m, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* Opens @path for reading as the request says; sets *@fd. Return: 0 or -errno. */
static int opener_open_one(const struct opener_req *q, int *fd)
{
	char self[40];
	struct statfs sfs;
	struct stat st;
	int p, r = 0;

	*fd = -1;
	/* O_PATH: nothing of the file is opened yet (a device's open would act). */
	p = open(q->path, O_PATH | O_CLOEXEC | (q->flags & O_NOFOLLOW));
	if (p < 0)
		return -errno;
	if (fstat(p, &st) < 0 || fstatfs(p, &sfs) < 0)
		r = -errno;
	else if (S_ISLNK(st.st_mode))
		r = -ELOOP; /* O_NOFOLLOW asked, and the path is a symlink */
	else if (!S_ISREG(st.st_mode))
		r = -EINVAL;
	else if (sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC)
		r = -EACCES; /* other processes' environ, kernel knobs */
	if (r == 0) {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", p);
		*fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (*fd < 0)
			r = -errno;
	}
	close(p);
	return r;
}

int isolation_helper_begin(int sock, pid_t parent, const char *name)
{
	int i;

	/* It ends with the broker, however the broker ends. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		return -1;
	/* Signals for the broker's process group (^C, a HUP) are not for it. */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	/* Of the broker's descriptors it keeps its socket and stderr. */
	for (i = 3; i < 4096; i++)
		if (i != sock)
			close(i);
	prctl(PR_SET_NAME, name, 0, 0, 0);
	return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ? -1 : 0;
}

/* The file-system identity of @w (setgroups, setfsgid, setfsuid: this
 * thread's, which is the process's), or root's again with NULL. The
 * opener cannot go on as anyone else than it meant: it exits when one
 * does not take. Return: 0, or -EINVAL for an identity it refuses. */
static int opener_become(const struct file_who *w)
{
	gid_t g[FILE_WHO_GROUPS_MAX];
	uint32_t uid = w ? w->uid : 0, gid = w ? w->gid : 0, n = w ? w->n_groups : 0, i;

	if (n > FILE_WHO_GROUPS_MAX || uid == (uint32_t)-1 || gid == (uint32_t)-1)
		return -EINVAL;
	/* (n is 0 without @w; the test of @w is for cppcheck, which does not
	 * follow that.) */
	for (i = 0; w && i < n; i++) {
		if (w->groups[i] == (uint32_t)-1)
			return -EINVAL;
		g[i] = (gid_t)w->groups[i];
	}
	/* Groups and gid first: setfsuid away from 0 leaves the id calls'
	 * capabilities alone, but the order keeps them needed only once. */
	if (syscall(SYS_setgroups, (size_t)n, g) < 0)
		_exit(1);
	(void)syscall(SYS_setfsgid, gid);
	(void)syscall(SYS_setfsuid, uid);
	/* Each returns the id before the call: -1 changes nothing and says
	 * what is in force. */
	if ((uint32_t)syscall(SYS_setfsgid, (gid_t)-1) != gid ||
	    (uint32_t)syscall(SYS_setfsuid, (uid_t)-1) != uid)
		_exit(1);
	return 0;
}

#ifndef CAP_SETUID
#define CAP_SETUID 7
#endif
#ifndef CAP_SETGID
#define CAP_SETGID 6
#endif

static void __attribute__((noreturn)) opener_main(int sock, pid_t parent)
{
	struct opener_req q;
	int fd, r;

	if (isolation_helper_begin(sock, parent, "sluiced-opener") < 0 ||
	    drop_caps_but((1u << CAP_SETUID) | (1u << CAP_SETGID)) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || opener_filter() < 0)
		_exit(1);
	for (;;) {
		ssize_t n = recv(sock, &q, sizeof(q), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); /* the broker closed its end, or is gone */
		fd = -1;
		/* Malformed, asking for more than reading, or as an identity
		 * it refuses. */
		if ((size_t)n <= offsetof(struct opener_req, path) || ((char *)&q)[n - 1] != '\0' ||
		    (q.flags & ~OPENER_FLAGS) != O_RDONLY || (q.as != 0 && q.as != 1) ||
		    (q.as && opener_become(&q.who) < 0))
			r = -EINVAL;
		else
			r = opener_open_one(&q, &fd);
		if (q.as)
			(void)opener_become(NULL);
		opener_reply(sock, r, fd);
		if (fd >= 0)
			close(fd);
	}
}

/* The opener's side in the broker: file_set_opener()'s function. */
static int opener_open(const char *path, int flags, const struct file_who *who)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} c;
	struct opener_req q;
	int32_t v = 0;
	struct iovec iov = { .iov_base = &v, .iov_len = sizeof(v) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	size_t len = strlen(path);
	ssize_t n;
	int fd = -1, r;

	if (len >= sizeof(q.path))
		return -ENAMETOOLONG;
	if ((flags & ~OPENER_FLAGS) != O_RDONLY)
		return -EINVAL;
	q.flags = flags;
	q.as = who != NULL;
	if (who)
		q.who = *who;
	else
		memset(&q.who, 0, sizeof(q.who));
	memcpy(q.path, path, len + 1);
	pthread_mutex_lock(&opener_lock);
	if (opener_sock < 0) {
		r = -EACCES; /* as the broker's own open said */
		goto out;
	}
	if (send(opener_sock, &q, offsetof(struct opener_req, path) + len + 1, MSG_NOSIGNAL) < 0) {
		r = -EIO;
		goto gone;
	}
	do {
		m.msg_control = c.buf;
		m.msg_controllen = sizeof(c.buf);
		n = recvmsg(opener_sock, &m, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(v)) {
		r = -EIO;
		goto gone;
	}
	cm = CMSG_FIRSTHDR(&m);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (v == 0 && fd >= 0) {
		r = fd;
		goto out;
	}
	if (fd >= 0)
		close(fd);
	r = v < 0 ? v : -EIO;
	goto out;
gone:
	/* No answer in time, or none at all: a late one would answer the
	 * next request, so the opener is given up (it exits on EOF). */
	fprintf(stderr, "sluiced: the opener of root-only files does not answer; from now on "
			"the broker reads only what its own user may\n");
	close(opener_sock);
	opener_sock = -1;
out:
	pthread_mutex_unlock(&opener_lock);
	return r;
}

int isolation_opener_start(struct sl_err *err)
{
	struct timeval tv = { .tv_sec = OPENER_WAIT_S };
	pid_t parent = getpid(), pid;
	int sv[2], e;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return sl_err_sys(err, errno, "opener: socketpair");
	pid = fork();
	if (pid < 0) {
		e = errno;
		close(sv[0]);
		close(sv[1]);
		return sl_err_sys(err, e, "opener: fork");
	}
	if (pid == 0) {
		close(sv[0]);
		opener_main(sv[1], parent);
	}
	close(sv[1]);
	if (setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		e = errno;
		close(sv[0]); /* the child exits on EOF */
		return sl_err_sys(err, e, "opener: setsockopt");
	}
	opener_sock = sv[0];
	file_set_opener(opener_open);
	return 0;
}

/* ---- taking over an old state_dir ----------------------------------------- */

/* nftw() has no argument for its callback: these, set by the one caller
 * (start-up, one thread). */
static uid_t take_uid;
static gid_t take_gid;
static unsigned take_n, take_skipped;
static int take_err;
static char take_where[PATH_MAX];
static char take_keys[PATH_MAX + 8];
static size_t take_keys_len;

int isolation_give(const char *path, const struct stat *seen, uid_t uid, gid_t gid)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	char self[64];
	struct stat st;
	int fd, r = 0;

	/* By descriptor, opened without following a symlink in any part of
	 * the path: a directory its new owner swapped for a symlink (to /etc)
	 * after the walk saw it cannot lead root elsewhere. */
	fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	if (fd < 0)
		return errno == ENOSYS ? -ENOSYS : (errno == ELOOP || errno == EXDEV) ? 1 : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	/* What the walk saw, still (else: left alone). A file with a second
	 * name may be one someone linked in from elsewhere (/etc/shadow, where
	 * protected_hardlinks is off): never given away. Devices, FIFOs,
	 * sockets (the control socket, which stays root's) and symlinks have
	 * no business here. */
	if (st.st_dev != seen->st_dev || st.st_ino != seen->st_ino ||
	    !(S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) && st.st_nlink == 1))) {
		r = 1;
		goto out;
	}
	if (st.st_uid == uid && st.st_gid == gid)
		goto out;
	/* Nothing of the broker's is for everyone (an older broker wrote its
	 * CA certificates 0644). Before the chown, while root owns it (no
	 * CAP_FOWNER needed then); through the descriptor's own inode. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	if (S_ISREG(st.st_mode) && (st.st_mode & S_IRWXO) && chmod(self, st.st_mode & 07770) < 0) {
		r = -errno;
		goto out;
	}
	if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0) {
		r = -errno;
		goto out;
	}
	r = 2;
out:
	close(fd);
	return r;
}

static int take_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	int r;

	(void)ftw;
	if (type == FTW_NS || (st->st_uid == take_uid && st->st_gid == take_gid) ||
	    S_ISSOCK(st->st_mode))
		return 0;
	/* state_dir/keys and what is in it are the key process's. */
	if (!strncmp(path, take_keys, take_keys_len) &&
	    (path[take_keys_len] == '\0' || path[take_keys_len] == '/'))
		return 0;
	r = isolation_give(path, st, take_uid, take_gid);
	if (r < 0) {
		take_err = r;
		snprintf(take_where, sizeof(take_where), "%s", path);
		return 1;
	}
	if (r == 1)
		take_skipped++;
	else if (r == 2)
		take_n++;
	return 0;
}

int isolation_take_over(const char *dir, uid_t uid, gid_t gid, unsigned *n, struct sl_err *err)
{
	take_uid = uid;
	take_gid = gid;
	take_keys_len = strlen(dir);
	while (take_keys_len > 1 && dir[take_keys_len - 1] == '/')
		take_keys_len--; /* as nftw() names what is in it */
	snprintf(take_keys, sizeof(take_keys), "%.*s/%s", (int)take_keys_len, dir, KEYS_DIR);
	take_keys_len = strlen(take_keys);
	take_n = take_skipped = 0;
	take_err = 0;
	/* FTW_PHYS: no symlink is followed; FTW_MOUNT: no other file system;
	 * FTW_DEPTH: a directory is given away after what is in it, so that
	 * nothing in it can be swapped by its new owner while root works there. */
	if (nftw(dir, take_one, 16, FTW_PHYS | FTW_MOUNT | FTW_DEPTH) < 0 && !take_err) {
		take_err = errno ? -errno : -EIO;
		snprintf(take_where, sizeof(take_where), "%s", dir);
	}
	*n = take_n;
	if (take_err)
		return sl_err_sys(err, take_err, "chown `%s` to %u:%u", take_where, (unsigned)uid,
				  (unsigned)gid);
	/* Not an error: a notice for the log, in the one place the caller
	 * looks (isolation.h). */
	if (take_skipped)
		sl_err_set(
			err, 0,
			"%u entries left as they were (hard-linked files, devices, FIFOs, symlinks)",
			take_skipped);
	else
		sl_err_clear(err);
	return 0;
}

/* ---- the switch ------------------------------------------------------------ */

int isolation_switch_user(uid_t uid, gid_t gid, struct sl_err *err)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	int cap;

	if (uid == 0 || gid == 0)
		return sl_err_set(err, 0, "switch to %u:%u: not an unprivileged user",
				  (unsigned)uid, (unsigned)gid);
	/* No capability is kept: the broker needs none after start-up (its
	 * listeners are bound, the transparent path reads SO_ORIGINAL_DST
	 * of a redirect, which needs no IP_TRANSPARENT, and it changes no
	 * nftables or link at run time: the CLI does). KEEPCAPS stays off,
	 * so the kernel clears permitted and effective as the uids leave 0;
	 * the bounding and ambient sets go first, while CAP_SETPCAP is held. */
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
		return sl_err_sys(err, errno, "prctl(PR_SET_KEEPCAPS)");
	cap = capbset_clear(0);
	if (cap >= 0)
		return sl_err_set(err, EPERM,
				  "capability %d stays in the bounding set: dropping it needs "
				  "CAP_SETPCAP",
				  cap);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return sl_err_sys(err, errno, "prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
	/* Groups before the uid (setgroups takes CAP_SETGID), and on every
	 * thread: glibc makes each of these process-wide. */
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0) {
		return sl_err_sys(err, errno, "switch to %u:%u", (unsigned)uid, (unsigned)gid);
	}
	/* The inheritable set survives a uid change: emptied here. */
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return sl_err_sys(err, errno, "capset");
	/* Checked, not assumed: a kernel or libc that did less fails the start. */
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0 || ru != uid ||
	    eu != uid || su != uid || rg != gid || eg != gid || sg != gid ||
	    getgroups(0, NULL) != 0 || syscall(SYS_capget, &hdr, data) < 0 || data[0].effective ||
	    data[0].permitted || data[0].inheritable || data[1].effective || data[1].permitted ||
	    data[1].inheritable || prctl(PR_CAPBSET_READ, CAP_NET_ADMIN, 0, 0, 0) != 0 ||
	    prctl(PR_CAPBSET_READ, CAP_SETUID, 0, 0, 0) != 0) {
		/* A check that failed, not a call: errno 0 in @err. */
		sl_err_set(err, 0, "switch to %u:%u: the process still holds something of root",
			   (unsigned)uid, (unsigned)gid);
		return -EPERM;
	}
	return 0;
}
