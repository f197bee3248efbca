// SPDX-License-Identifier: MIT
/*
 * The broker's seccomp allowlist: after start-up (sockets bound, state
 * read, capabilities dropped: main.c drop_privileges()) the broker, every
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
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "broker/isolation.h"

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

/* __NR_ values the architecture lacks are left out by the #ifdefs. */
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
	 * while the broker runs; glibc's pthread_create uses clone3 (clone
	 * where it is refused), and a thread's exit, its robust list and
	 * rseq area. No exec follows a clone here: exec is not allowed. */
	__NR_clone, __NR_clone3, __NR_exit, __NR_exit_group, __NR_futex, __NR_set_robust_list,
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

/* The calls of every request and datagram, compared first: the filter
 * runs on every call and compares in order. Only an ordering: each is in
 * allowed[] with its reason, and one that is not is left out. */
static const int hot[] = {
	__NR_epoll_pwait, __NR_recvfrom, __NR_sendto, __NR_epoll_ctl, __NR_read, __NR_write,
	__NR_splice, __NR_accept4, __NR_close, __NR_recvmmsg, __NR_sendmmsg, __NR_setsockopt,
	__NR_getsockopt, __NR_shutdown, __NR_recvmsg, __NR_sendmsg, __NR_connect, __NR_socket,
	__NR_futex, __NR_newfstatat, __NR_getpid,
#ifdef __NR_epoll_wait
	__NR_epoll_wait,
#endif
};

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

/* Async-signal-safe: formats with no library call, one write(). */
static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	static const char pre[] = "sluiced: seccomp: system call ";
	static const char post[] = " refused (EPERM): not in broker/isolation.c's allowlist\n";
	char line[sizeof(pre) + 12 + sizeof(post)], num[12];
	int e = errno, n = si->si_syscall, k = 0, len;

	(void)sig;
	atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
	ISO_RET((ucontext_t *)ctx) = -EPERM;
	if (n < 0)
		n = 0;
	do {
		num[k++] = (char)('0' + n % 10);
		n /= 10;
	} while (n && k < (int)sizeof(num));
	memcpy(line, pre, sizeof(pre) - 1);
	len = (int)sizeof(pre) - 1;
	while (k)
		line[len++] = num[--k];
	memcpy(line + len, post, sizeof(post) - 1);
	len += (int)sizeof(post) - 1;
	if (write(STDERR_FILENO, line, (size_t)len) < 0) {
		/* nothing to be done: the count above still says it */
	}
	errno = e;
}

int isolation_seccomp_install(char *err, size_t errlen)
{
	enum { N = sizeof(allowed) / sizeof(allowed[0]), H = sizeof(hot) / sizeof(hot[0]) };
	struct sock_filter f[4 + N + 2];
	int order[N];
	unsigned n = 0;
	struct sock_fprog prog = { .filter = f };
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	unsigned i, k = 0;

	/* The architecture first: a call made through another ABI (x32,
	 * i386 int 0x80) has other numbers, and is refused outright. */
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ISO_ARCH, 1, 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	/* An x32 call has this arch value too, with 0x40000000 set in its
	 * number: it matches no entry, and is refused. */
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
	if (sigaction(SIGSYS, &sa, NULL) < 0) {
		snprintf(err, errlen, "sigaction(SIGSYS): %s", strerror(errno));
		return -errno;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
		return -errno;
	}
	/* Every thread at once (TSYNC): the control thread and the token
	 * fetchers run already; threads started later inherit it. */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0) {
		int e = errno;

		snprintf(err, errlen, "seccomp: %s", e ? strerror(e) : "a thread could not take it");
		return e ? -e : -EAGAIN;
	}
	return 0;
}
