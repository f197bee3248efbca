// SPDX-License-Identifier: MIT
/*
 * `sluice create` and `sluice delete`: the arguments, what is printed and
 * the exit status around the netns/ library's netns_sandbox_create() and
 * netns_sandbox_delete(). Each process exits right after, so the slow
 * frees (the procfs's close, the trash) are left to a child that outlives
 * it (netns/linger.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "netns/netns.h"
#include "netns/netns_internal.h"

int cmd_create(int argc, char **argv)
{
	const char *name = NULL, *policy = NULL;
	bool audit = false;
	struct netns_sandbox sb;
	struct sl_err err = { 0 };
	char a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN];
	struct in_addr ia, ig;
	sigset_t old;
	int i, r;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--policy") && i + 1 < argc)
			policy = argv[++i];
		else if (!strcmp(argv[i], "--audit"))
			audit = true;
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			goto usage;
	}
	if (!name || !policy)
		goto usage;
	netns_hold_signals(&old);
	r = netns_sandbox_create_exiting(name, policy, audit, &sb, &err);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		/* A policy error is whole: FILE:LINE:COL: message. */
		if (sl_err_errno(&err) == EBADMSG)
			fprintf(stderr, "%s\n", sl_err_msg(&err));
		else
			fprintf(stderr, "sluice: create `%s`: %s\n", name, sl_err_msg(&err));
		return 1;
	}
	ia.s_addr = htonl(sb.addr);
	ig.s_addr = htonl(sb.gw);
	inet_ntop(AF_INET, &ia, a, sizeof(a));
	inet_ntop(AF_INET, &ig, g, sizeof(g));
	printf("%s %s %s\n", sb.name, a, g);
	return 0;
usage:
	fprintf(stderr, "usage: sluice create NAME --policy FILE [--audit]\n");
	return 2;
}

static void sweep(void)
{
	netns_trash_sweep();
}

int cmd_delete(int argc, char **argv)
{
	struct sl_err err = { 0 };
	sigset_t old;
	int r;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: sluice delete NAME\n");
		return 2;
	}
	netns_hold_signals(&old);
	r = netns_sandbox_delete_exiting(argv[1], &err);
	sigprocmask(SIG_SETMASK, &old, NULL);
	/* Its directories' removal (slow on some file systems) is left to a
	 * child that does it once this process has answered. */
	fflush(stderr);
	if (netns_linger_then(-1, sweep) < 0)
		sweep();
	if (r < 0) {
		fprintf(stderr, "sluice: %s\n", sl_err_msg(&err));
		return 1;
	}
	return 0;
}
