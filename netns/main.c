// SPDX-License-Identifier: MIT
/* sluice: the command-line tool. Subcommands are cmd_<name> in one table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netns/netns.h"
#include "probe/probe.h"

static int cmd_help(int argc, char **argv);

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *usage;
} commands[] = {
	{ "policy", cmd_policy, "policy check FILE...        validate policies\n  policy test FILE TARGET...  what a policy decides for NAME[:PORT] or ADDR[:PORT]" },
	{ "register", cmd_register,
	  "register NAME --addr ADDR --policy FILE   attach a namespace you wired yourself" },
	{ "unregister", cmd_unregister, "unregister NAME             detach it" },
	{ "create", cmd_create, "create NAME --policy FILE   a sandbox wired to this namespace's broker" },
	{ "exec", cmd_exec, "exec [OPTIONS] NAME [--] CMD [ARG...]\n"
			    "                              run CMD in the sandbox, contained (its own user, PID and\n"
			    "                              mount namespaces; cwd and HOME its workspace); OPTIONS:\n"
			    "                              --user UID[:GID]     the identity inside (default root)\n"
			    "                              --bind SRC:DST[:ro]  a host path inside (repeatable)\n"
			    "                              --privileged         uncontained: root with the host's files" },
	{ "env", cmd_env, "env NAME                    the sandbox's environment, KEY=VALUE lines" },
	{ "run", cmd_run, "run --policy FILE [--name NAME] [OPTIONS] -- CMD [ARG...]\n"
			  "                              create, exec, delete; exits with CMD's status" },
	{ "delete", cmd_delete, "delete NAME                 remove the sandbox and everything made for it\n"
				"                              (an attached sandbox: as detach)" },
	{ "attach", cmd_attach, "attach NAME --netns PATH [--ifname IF] --policy FILE [--json]\n"
				"                              wire a network namespace a runtime made\n"
				"                              (/run/netns/X, /proc/PID/ns/net)" },
	{ "detach", cmd_detach, "detach NAME                 undo attach (or create); the namespace stays" },
	{ "list", cmd_list, "list [--json]               registered sandboxes" },
	{ "status", cmd_status, "status [--metrics|--jwks]   broker counters (Prometheus text with --metrics; JWK Set of minted JWTs with --jwks)" },
	{ "probe", probe_main, "probe [OPTIONS]             what this network allows (see sluice probe --help)" },
	{ "ca", cmd_ca, "ca NAME                     the sandbox CA's certificate (PEM), for its trust store" },
	{ "reload", cmd_reload, "reload                      reload configuration and policies" },
	{ "help", cmd_help, "help                        this text" },
};

static int cmd_help(int argc, char **argv)
{
	size_t i;

	(void)argc;
	(void)argv;
	printf("usage: sluice [--socket PATH] [--broker-netns NAME|PATH] COMMAND [ARGS]\n\n"
	       "  --broker-netns NAME|PATH  run in that network namespace, the broker's, as\n"
	       "                            `ip netns exec NAME sluice` does, at less cost\n\n"
	       "commands:\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		printf("  %s\n", commands[i].usage);
	return 0;
}

int main(int argc, char **argv)
{
	const char *env = getenv("SLUICE_SOCKET"), *ns = NULL;
	char err[600];
	size_t i;
	int a, o;

	if (env && *env)
		netns_socket_path = env;
	/* --socket PATH and --broker-netns NS may stand anywhere before a "--"
	 * (after it, the words are a sandboxed command's: `sluice run ... --
	 * prog --socket x`). Not --netns: `attach` has one of its own. */
	for (a = 1, o = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--")) {
			while (a < argc)
				argv[o++] = argv[a++];
			break;
		}
		if (!strcmp(argv[a], "--socket") && a + 1 < argc) {
			netns_socket_path = argv[++a];
			continue;
		}
		if (!strcmp(argv[a], "--broker-netns") && a + 1 < argc) {
			ns = argv[++a];
			continue;
		}
		argv[o++] = argv[a];
	}
	argc = o;
	argv[argc] = NULL;

	if (argc < 2) {
		cmd_help(0, NULL);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return cmd_help(0, NULL);
	if (ns && netns_enter_broker(ns, err, sizeof(err)) < 0) {
		fprintf(stderr, "sluice: %s\n", err);
		return 1;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	}
	fprintf(stderr, "sluice: unknown command `%s` (try `sluice help`)\n", argv[1]);
	return 2;
}
