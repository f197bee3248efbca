/* SPDX-License-Identifier: MIT */
/* The broker's seccomp allowlist (isolation.c). */
#ifndef SLUICE_BROKER_ISOLATION_H
#define SLUICE_BROKER_ISOLATION_H

#include <stddef.h>
#include <stdint.h>

/**
 * isolation_seccomp_install() - confine every thread of this process to the
 * broker's system calls, from now on
 * @err:    on failure, why
 * @errlen: its size
 *
 * Sets no_new_privs (needed without CAP_SYS_ADMIN) and a SIGSYS handler:
 * a call outside the list returns -EPERM, is counted and logged.
 *
 * Return: 0 or a negative errno.
 */
int isolation_seccomp_install(char *err, size_t errlen);

/* System calls refused since the filter was installed (any thread). */
uint64_t isolation_seccomp_refused(void);

#endif
