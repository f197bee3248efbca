// SPDX-License-Identifier: MIT
/*
 * The seccomp filter of the contained runner (`sluice exec`, `sluice run`),
 * as a classic BPF program that the sandbox's init loads (runner.c) once it
 * has built the sandbox and dropped every privilege, before it forks the
 * command. Written by hand
 * rather than with libseccomp: the list is short, and one fewer library is
 * one fewer thing for `make deps` and for the reader.
 *
 * It refuses what a workload never needs and an escape always does: every
 * entry says why. The namespace, user and capability limits of the runner
 * already make most of these fail; the filter is the second wall, and the
 * one that also holds against a kernel bug reachable through them.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli/runner.h"
#include "netns/netns_internal.h"

#if defined(__x86_64__)
#define SECCOMP_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SECCOMP_ARCH AUDIT_ARCH_AARCH64
#else
#error "cli/seccomp.c: add this architecture's AUDIT_ARCH_ value"
#endif

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

/* Refused with EPERM; __NR_ values the architecture lacks are left out. */
static const int refused[] = {
	/* Joining another namespace: the way into another sandbox or the
	 * host's network (nsenter --net=...). */
	__NR_setns,
	/* New namespaces of any kind: a new user namespace is where most
	 * kernel privilege-escalation bugs are reached from, and a new network
	 * namespace is a network the broker does not see. */
	__NR_unshare,
	/* Mounting after setup: the mount namespace is an allowlist that
	 * the runner built; changing it could uncover what it hides. */
	__NR_mount,
	__NR_umount2,
	__NR_pivot_root,
#ifdef __NR_move_mount
	__NR_move_mount,
	__NR_open_tree,
	__NR_fsopen,
	__NR_fsconfig,
	__NR_fsmount,
	__NR_fspick,
#endif
#ifdef __NR_mount_setattr
	__NR_mount_setattr,
#endif
	/* File handles bypass path-based access (the "shocker" escape). */
	__NR_name_to_handle_at,
	__NR_open_by_handle_at,
	/* eBPF: a large kernel attack surface no workload here needs. */
	__NR_bpf,
	/* Kernel keyrings are not namespaced by the sandbox: they could hold or
	 * leak keys of the host's users. */
	__NR_keyctl,
	__NR_add_key,
	__NR_request_key,
	/* Debugging other processes: a sandbox has no business reading another
	 * process's memory (debuggers are trusted tooling: --privileged). */
	__NR_ptrace,
	__NR_process_vm_readv,
	__NR_process_vm_writev,
	/* Performance counters leak host-wide information and have a long
	 * history of kernel bugs. */
	__NR_perf_event_open,
	/* Replacing the kernel, loading modules: host-wide, never a workload's. */
	__NR_kexec_load,
#ifdef __NR_kexec_file_load
	__NR_kexec_file_load,
#endif
	__NR_init_module,
	__NR_finit_module,
	__NR_delete_module,
	/* userfaultfd turns kernel races into reliable exploits. */
	__NR_userfaultfd,
#if defined(__x86_64__)
	/* Raw I/O port access. */
	__NR_iopl,
	__NR_ioperm,
#endif
	/* Host-wide administration: swap, reboot, process accounting, quotas,
	 * the kernel log, the clock. */
	__NR_swapon,
	__NR_swapoff,
	__NR_reboot,
	__NR_acct,
	__NR_quotactl,
#ifdef __NR_quotactl_fd
	__NR_quotactl_fd,
#endif
	__NR_syslog,
	__NR_settimeofday,
	__NR_clock_settime,
	__NR_clock_adjtime,
	__NR_adjtimex,
};

/* The calls that make a socket of a family (cli_seccomp_build()). */
static const int socket_calls[] = { __NR_socket, __NR_socketpair };

/* Namespace flags of clone(2): the same reasons as unshare. */
#define CLONE_NS_FLAGS                                                                             \
	(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | \
	 CLONE_NEWCGROUP)

#define ARG_LO(n) (offsetof(struct seccomp_data, args) + (n) * sizeof(__u64))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define EPERM_RET RET(SECCOMP_RET_ERRNO | EPERM)

/**
 * cli_seccomp_build() - the filter program
 * @prog: room for it
 * @max:  the number of instructions it holds
 *
 * Return: the number of instructions, or -ENOSPC.
 */
int cli_seccomp_build(struct sock_filter *prog, size_t max)
{
	size_t n = 0, i;

/* @ins is a brace initializer (BPF_STMT, BPF_JUMP), valid only as an
 * initializer: not in parentheses, nor after a cast without them. */
#define EMIT(ins)                              \
	do {                                   \
		struct sock_filter one_ = ins; \
		if (n >= max)                  \
			return -ENOSPC;        \
		prog[n++] = one_;              \
	} while (0)

	/* Another architecture's syscall numbers mean other syscalls: a
	 * process that switches (int 0x80 on x86_64) is killed, not filtered
	 * by the wrong table. */
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_ARCH, 1, 0));
	EMIT(RET(SECCOMP_RET_KILL_PROCESS));
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
#if defined(__x86_64__)
	/* x32 shares AUDIT_ARCH_X86_64 with other numbers (bit 30 set): no
	 * workload here is x32, and the table above would not match them. */
	EMIT(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1));
	EMIT(EPERM_RET);
#endif
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (__u32)refused[i], 0, 1));
		EMIT(EPERM_RET);
	}
	/* clone3 passes its flags in memory, where a filter cannot look:
	 * ENOSYS makes the C library fall back to clone, whose flags it can. */
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1));
	EMIT(RET(SECCOMP_RET_ERRNO | ENOSYS));
#ifdef __NR_io_uring_setup
	/* io_uring performs its operations where this filter does not see
	 * them, and has been a rich source of kernel bugs: ENOSYS, as on a
	 * kernel without it, so that programs take their ordinary path. */
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1));
	EMIT(RET(SECCOMP_RET_ERRNO | ENOSYS));
#endif
	/* clone: threads and processes yes, new namespaces no (the flags are
	 * the low 32 bits of the first argument; the kernel ignores the rest). */
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4));
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NS_FLAGS, 0, 1));
	EMIT(EPERM_RET);
	EMIT(RET(SECCOMP_RET_ALLOW));
	/* socket and socketpair: the families a workload uses (Unix, IPv4,
	 * IPv6, and netlink, which the C library asks for the interfaces'
	 * addresses), no other. AF_VSOCK above all: vsock is not network
	 * namespaced, so on a virtual machine with a vsock transport a
	 * socket of it reaches the hypervisor's host (CID 2) and other
	 * guests' listeners without passing the broker's veth. The rest
	 * (TIPC, RDS, CAN, Bluetooth, AF_ALG, XDP, KCM, ...) are kernel
	 * attack surface no workload here needs. EAFNOSUPPORT, as on a
	 * kernel without them. The family is the low 32 bits of the first
	 * argument (the kernel's type for it is int). */
	for (i = 0; i < sizeof(socket_calls) / sizeof(socket_calls[0]); i++) {
		EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (__u32)socket_calls[i], 0, 7));
		EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)));
		EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 3, 0));
		EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 2, 0));
		EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 1, 0));
		EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 0, 1));
		EMIT(RET(SECCOMP_RET_ALLOW));
		EMIT(RET(SECCOMP_RET_ERRNO | EAFNOSUPPORT));
	}
	/* TIOCSTI pushes characters into the terminal's input: a command that
	 * shares the caller's terminal could type into the caller's shell once
	 * it exits. Refused here instead of a new session (setsid), which
	 * would cost interactive commands their job control. TIOCLINUX can do
	 * the same on a virtual console. The command is the low 32 bits (the
	 * kernel's type for it is unsigned int). */
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 5));
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 2, 0));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 1, 0));
	EMIT(RET(SECCOMP_RET_ALLOW));
	EMIT(EPERM_RET);
	EMIT(RET(SECCOMP_RET_ALLOW));
#undef EMIT
	return (int)n;
}
