// SPDX-License-Identifier: MIT
/* `sluice attach NAME --netns PATH` and `sluice detach NAME`: a sandbox in
 * a network namespace a runtime made (podman, containerd, a CNI plugin, an
 * OCI hook). The work is create's and delete's (netns_sandbox_attach() in
 * create.c, netns_sandbox_detach() in delete.c); this is the command line. */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "netns/netns.h"
#include "netns/netns_internal.h"

/* @s as a JSON string, quotes included. */
static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void print_json(const struct netns_sandbox *sb, const char *nspath, const char *a,
		       const char *g)
{
	printf("{\"name\": ");
	json_str(sb->name);
	printf(", \"netns\": ");
	json_str(nspath);
	printf(", \"ifname\": ");
	json_str(sb->ifname);
	printf(", \"mac\": ");
	json_str(sb->mac);
	printf(", \"host_ifname\": ");
	json_str(sb->link);
	printf(", \"host_mac\": ");
	json_str(sb->host_mac);
	printf(", \"address\": \"%s/30\", \"gateway\": \"%s\", \"nameserver\": \"%s\"}\n", a, g, g);
}

int cmd_attach(int argc, char **argv)
{
	const char *name = NULL, *policy = NULL, *nspath = NULL, *ifname = NULL;
	struct sl_err err = { 0 };
	char a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN];
	struct netns_sandbox sb;
	struct in_addr ia, ig;
	bool json = false, audit = false;
	sigset_t old;
	int i, r;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--policy") && i + 1 < argc)
			policy = argv[++i];
		else if (!strcmp(argv[i], "--netns") && i + 1 < argc)
			nspath = argv[++i];
		else if (!strcmp(argv[i], "--ifname") && i + 1 < argc)
			ifname = argv[++i];
		else if (!strcmp(argv[i], "--audit"))
			audit = true;
		else if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			goto usage;
	}
	if (!name || !policy || !nspath)
		goto usage;
	netns_hold_signals(&old);
	r = netns_sandbox_attach(name, nspath, ifname, policy, audit, &sb, &err);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		/* A policy error is whole: FILE:LINE:COL: message. */
		if (sl_err_errno(&err) == EBADMSG)
			fprintf(stderr, "%s\n", sl_err_msg(&err));
		else
			fprintf(stderr, "sluice: attach `%s`: %s\n", name, sl_err_msg(&err));
		return 1;
	}
	ia.s_addr = htonl(sb.addr);
	ig.s_addr = htonl(sb.gw);
	inet_ntop(AF_INET, &ia, a, sizeof(a));
	inet_ntop(AF_INET, &ig, g, sizeof(g));
	if (json)
		print_json(&sb, nspath, a, g);
	else
		printf("%s %s %s\n", sb.name, a, g);
	return 0;
usage:
	fprintf(stderr,
		"usage: sluice attach NAME --netns PATH [--ifname IF] --policy FILE [--audit] [--json]\n");
	return 2;
}

int cmd_detach(int argc, char **argv)
{
	struct sl_err err = { 0 };
	sigset_t old;
	int r;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: sluice detach NAME\n");
		return 2;
	}
	netns_hold_signals(&old);
	r = netns_sandbox_detach(argv[1], &err);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		fprintf(stderr, "sluice: %s\n", sl_err_msg(&err));
		return 1;
	}
	return 0;
}
