// SPDX-License-Identifier: MIT
/* sluice: the command-line tool. Subcommands are cmd_<name> in one table. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/version.h"
#include "cli/auditlog.h"
#include "netns/netns.h"
#include "probe/probe.h"

static int cmd_help(int argc, char **argv);

/*
 * @words: where `--help`/`-h` stops being sluice's: after this many
 * words that are no option (exec: NAME, then the command's own words).
 * 0: up to a "--" only. @own_help: the command parses --help itself.
 */
static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *usage;
	int words;
	bool own_help;
} commands[] = {
	{ "policy", cmd_policy,
	  "policy check [--json] FILE...   validate policies (warns of unreadable secret files)\n"
	  "  policy test [--json] FILE [--resolve NAME=ADDR]... TARGET...\n"
	  "                              what a policy decides for NAME[:PORT] or ADDR[:PORT]\n"
	  "  policy suggest [--sandbox NAME] [--since TIME] [--wildcards N] AUDIT_LOG...\n"
	  "                              the smallest policy that allows what an audit log shows" },
	{ "register", cmd_register,
	  "register NAME --addr ADDR --policy FILE [--audit]\n"
	  "                              attach a namespace you wired yourself; --audit as create" },
	{ "unregister", cmd_unregister, "unregister NAME             detach it" },
	{ "create", cmd_create,
	  "create NAME --policy FILE [--audit]\n"
	  "                              a sandbox wired to this namespace's broker; --audit:\n"
	  "                              names outside the policy pass, audited would-deny" },
	{ "exec", cmd_exec,
	  "exec [OPTIONS] NAME [--] CMD [ARG...]\n"
	  "                              run CMD in the sandbox, contained (its own user, PID and\n"
	  "                              mount namespaces; cwd and HOME its workspace); OPTIONS:\n"
	  "                              --user UID[:GID]     the identity inside (default root)\n"
	  "                              --bind SRC:DST[:ro]  a host path inside (repeatable)\n"
	  "                              --privileged         uncontained: root with the host's files",
	  .words = 2 },
	{ "env", cmd_env,
	  "env NAME                    the sandbox's environment, KEY=VALUE lines" },
	{ "run", cmd_run,
	  "run --policy FILE [--audit] [--name NAME] [OPTIONS] -- CMD [ARG...]\n"
	  "                              create (--audit as create), exec, delete; exits with\n"
	  "                              CMD's status" },
	{ "delete", cmd_delete,
	  "delete NAME                 remove the sandbox and everything made for it\n"
	  "                              (an attached sandbox: as detach)" },
	{ "attach", cmd_attach,
	  "attach NAME --netns PATH [--ifname IF] --policy FILE [--audit] [--json]\n"
	  "                              wire a network namespace a runtime made\n"
	  "                              (/run/netns/X, /proc/PID/ns/net); --audit as create" },
	{ "detach", cmd_detach,
	  "detach NAME                 undo attach (or create); the namespace stays" },
	{ "list", cmd_list, "list [--json]               registered sandboxes" },
	{ "status", cmd_status,
	  "status [--json|--metrics|--jwks]   broker counters (one JSON document with --json; Prometheus text with --metrics; JWK Set of minted JWTs with --jwks)" },
	{ "probe", probe_main,
	  "probe [OPTIONS]             what this network allows (see sluice probe --help)",
	  .own_help = true },
	{ "report", cmd_report,
	  "report [NAME] [--since TIME] [--json] [AUDIT_LOG...]\n"
	  "                              what a sandbox did: hosts, bytes, refusals, credentials" },
	{ "ca", cmd_ca,
	  "ca NAME                     the sandbox CA's certificate (PEM), for its trust store" },
	{ "update", cmd_update,
	  "update NAME --policy FILE [--keep-open]\n"
	  "                              swap a running sandbox's policy; --keep-open: leave\n"
	  "                              open the connections FILE no longer allows" },
	{ "pending", cmd_pending,
	  "pending [NAME] [--json]     requests held for approval (egress.unlisted: hold)" },
	{ "approve", cmd_approve,
	  "approve NAME HOST[:PORT] [--for DURATION]\n"
	  "                              allow HOST in the sandbox's live policy; what waits\n"
	  "                              for it goes on (prints the rule for the policy file)" },
	{ "refuse", cmd_refuse,
	  "refuse NAME HOST[:PORT]     refuse at once what waits for HOST (hold-refused)" },
	{ "watch", cmd_watch,
	  "watch [--json]              decisions and held requests as they happen (JSON lines with --json)" },
	{ "reload", cmd_reload, "reload                      reload configuration and policies" },
	{ "help", cmd_help, "help                        this text" },
};

/* Options of any subcommand that take a value: the value is no word. */
static bool takes_value(const char *arg)
{
	static const char *const opts[] = { "--policy", "--name",  "--addr", "--user",
					    "--bind",	"--netns", "--for",  NULL };
	size_t i;

	for (i = 0; opts[i]; i++) {
		if (!strcmp(arg, opts[i]))
			return true;
	}
	return false;
}

/*
 * Whether `sluice CMD ARGS` asks for CMD's usage: a `--help` or `-h`
 * among ARGS before "--" (and, for @words, before the words that are a
 * sandboxed command's). Checked here, before any subcommand runs, so that
 * none takes it for a file or a sandbox name (`policy check --help` once
 * opened a file named --help).
 */
static bool wants_help(int argc, char **argv, int words)
{
	int i, seen = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return false;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return true;
		if (takes_value(argv[i])) {
			i++;
			continue;
		}
		if (argv[i][0] != '-' && words && ++seen >= words)
			return false;
	}
	return false;
}

static int cmd_help(int argc, char **argv)
{
	size_t i;

	(void)argc;
	(void)argv;
	printf("usage: sluice [--socket PATH] [--broker-netns NAME|PATH] COMMAND [ARGS]\n"
	       "       sluice --version\n"
	       "       sluice COMMAND --help\n\n"
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
	struct sl_err err = { 0 };
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
	if (!strcmp(argv[1], "--version")) {
		printf("sluice %s\n", sluice_version);
		return 0;
	}
	/* Usage needs no broker and no namespace: before --broker-netns. */
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(argv[1], commands[i].name) && !commands[i].own_help &&
		    wants_help(argc - 1, argv + 1, commands[i].words)) {
			printf("usage: sluice %s\n\nsee sluice(1) for more.\n", commands[i].usage);
			return 0;
		}
	}
	if (ns && netns_enter_broker(ns, &err) < 0) {
		fprintf(stderr, "sluice: %s\n", sl_err_msg(&err));
		return 1;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	}
	fprintf(stderr, "sluice: unknown command `%s` (try `sluice help`)\n", argv[1]);
	return 2;
}
