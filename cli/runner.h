/* SPDX-License-Identifier: MIT */
/* The contained runner of `sluice exec` and `sluice run` (cli/runner.c,
 * cli/seccomp.c), and cli_sandbox_enter() (cli/exec.c). */
#ifndef SLUICE_CLI_RUNNER_H
#define SLUICE_CLI_RUNNER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/err.h"
#include "netns/netns_internal.h"

/* At most this many --bind options. */
#define CLI_BINDS_MAX 32

struct cli_bind {
	const char *src;
	const char *dst;
	bool ro;
};

/* The options of `sluice exec` and `sluice run`. */
struct cli_runner {
	bool privileged;
	bool user_set;
	uid_t uid; /* inside */
	gid_t gid;
	unsigned nbinds;
	struct cli_bind binds[CLI_BINDS_MAX];
};

struct sock_filter;

uid_t cli_sandbox_uid(const struct netns_sandbox *sb);
int cli_runner_option(struct cli_runner *o, int argc, char **argv, int *i);
int cli_runner_prepare(const struct netns_sandbox *sb, const struct cli_runner *o);
pid_t cli_runner_spawn(const struct netns_sandbox *sb, const struct cli_runner *o, char **argv,
		       const sigset_t *mask);
int cli_seccomp_build(struct sock_filter *prog, size_t max);
int cli_sandbox_enter(const struct netns_sandbox *sb, struct sl_err *err);

#endif
