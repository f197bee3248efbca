// SPDX-License-Identifier: MIT
/* The subcommands that only talk to the broker: register, unregister, list,
 * status, reload, update, ca. The client they talk through is
 * netns/ctl.c's, which the lifecycle library uses too. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/ctlproto.h"
#include "common/err.h"
#include "common/json.h"
#include "common/text.h"
#include "netns/netns.h"
#include "policy/policy.h"

/* Runs a request and prints the answer or the error; returns an exit status. */
static int ctl_print(const char *line, bool print_body)
{
	struct sl_err e = { 0 };
	char *resp;
	int r = netns_ctl_err(line, &resp, &e);

	if (r < 0 && sl_err_errno(&e) == 0) {
		fprintf(stderr, "sluice: %s\n", resp); /* the broker's, uncut */
		free(resp);
		return 1;
	}
	if (r < 0) {
		fprintf(stderr, "sluice: %s\n", sl_err_msg(&e));
		return 1;
	}
	if (print_body)
		fputs(resp, stdout);
	free(resp);
	return 0;
}

/* A policy file given on the command line, checked here as the broker will
 * check it (the same FILE:LINE:COL message), and its absolute path in @abs
 * (PATH_MAX), which the control line carries: without whitespace. Says why
 * not on stderr. Return: 0 or -1. */
static int policy_arg(const char *policy, char *abs)
{
	struct policy_error err;
	struct policy *p;

	if (policy_load_file(policy, &p, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	policy_unref(p);
	if (!realpath(policy, abs)) {
		fprintf(stderr, "sluice: %s: %s\n", policy, strerror(errno));
		return -1;
	}
	if (strpbrk(abs, " \t\n")) {
		fprintf(stderr, "sluice: policy path `%s` has whitespace\n", abs);
		return -1;
	}
	return 0;
}

int cmd_register(int argc, char **argv)
{
	const char *addr = NULL, *policy = NULL, *name = NULL;
	char abs[PATH_MAX], line[PATH_MAX + 200];
	bool audit = false;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--addr") && i + 1 < argc)
			addr = argv[++i];
		else if (!strcmp(argv[i], "--audit"))
			audit = true;
		else if (!strcmp(argv[i], "--policy") && i + 1 < argc)
			policy = argv[++i];
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			goto usage;
	}
	if (!name || !addr || !policy)
		goto usage;
	if (policy_arg(policy, abs) < 0)
		return 1;
	snprintf(line, sizeof(line), CTL_REGISTER " %s %s %s%s", name, addr, abs,
		 audit ? " " CTL_REGISTER_AUDIT : "");
	return ctl_print(line, false);
usage:
	fprintf(stderr, "usage: sluice register NAME --addr ADDR --policy FILE [--audit]\n");
	return 2;
}

int cmd_unregister(int argc, char **argv)
{
	char line[200];

	if (argc != 2 || strlen(argv[1]) > 100) {
		fprintf(stderr, "usage: sluice unregister NAME\n");
		return 2;
	}
	snprintf(line, sizeof(line), CTL_UNREGISTER " %s", argv[1]);
	return ctl_print(line, false);
}

int cmd_list(int argc, char **argv)
{
	bool json = argc == 2 && !strcmp(argv[1], "--json");
	char *resp, *line, *save = NULL;
	int r, n = 0;

	if (argc > 2 || (argc == 2 && !json)) {
		fprintf(stderr, "usage: sluice list [--json]\n");
		return 2;
	}
	r = netns_ctl(CTL_LIST, &resp);
	if (r < 0)
		return ctl_print(CTL_LIST, true);
	if (!json)
		printf("%-24s %-16s %-8s %-8s %s\n", "NAME", "ADDRESS", "CONNS", "MODE", "POLICY");
	else
		printf("[");
	for (line = strtok_r(resp, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[64], addr[64], pol[PATH_MAX], cw[24], state[64] = "ok",
								mode[16] = "enforce";
		unsigned conns;

		/* The state and mode words are new: an older broker does not
		 * send them. */
		if (sscanf(line, "%63s %63s %4095s %23s %63s %15s", name, addr, pol, cw, state,
			   mode) < 4 ||
		    !text_uint(cw, &conns))
			continue;
		if (json) {
			printf("%s{\"name\":", n ? "," : "");
			sl_json_print_string(stdout, name);
			printf(",\"address\":");
			sl_json_print_string(stdout, addr);
			printf(",\"policy\":");
			sl_json_print_string(stdout, pol);
			printf(",\"connections\":%u,\"state\":", conns);
			sl_json_print_string(stdout, state);
			printf(",\"mode\":");
			sl_json_print_string(stdout, mode);
			printf("}");
		} else if (strcmp(state, "ok"))
			printf("%-24s %-16s %-8u %-8s %s  (state lost at the broker's start: %s)\n",
			       name, addr, conns, mode, pol, state);
		else
			printf("%-24s %-16s %-8u %-8s %s\n", name, addr, conns, mode, pol);
		n++;
	}
	if (json)
		printf("]\n");
	free(resp);
	return 0;
}

/* Prints @v as a JSON number when it is one (a Prometheus value may also
 * be +Inf, -Inf or NaN: those as strings). */
static void json_value_of(const char *v)
{
	char *end;

	errno = 0;
	(void)strtod(v, &end);
	if (*v && !*end && !errno && strspn(v, "0123456789.eE+-") == strlen(v))
		fputs(v, stdout);
	else
		sl_json_print_string(stdout, v);
}

/* One Prometheus sample line, `NAME{K="V",...} VALUE`, as a JSON object;
 * false when the line is not one. */
static bool print_sample(char *l, bool first)
{
	char *name = l, *labels = NULL, *value, *sp;
	bool lfirst = true;

	sp = strpbrk(l, "{ ");
	if (!sp)
		return false;
	if (*sp == '{') {
		*sp = '\0';
		labels = sp + 1;
		sp = strstr(labels, "} ");
		if (!sp)
			return false;
		*sp = '\0';
		value = sp + 2;
	} else {
		*sp = '\0';
		value = sp + 1;
	}
	printf("%s\n{\"name\":", first ? "" : ",");
	sl_json_print_string(stdout, name);
	printf(",\"labels\":{");
	while (labels && *labels) {
		char *eq = strchr(labels, '='), *v, *w;

		if (!eq || eq[1] != '"')
			break;
		*eq = '\0';
		/* The value, unescaped in place: \\, \" and \n. */
		for (v = w = eq + 2; *v && *v != '"'; v++) {
			if (*v == '\\' && v[1]) {
				v++;
				*w++ = *v == 'n' ? '\n' : *v;
			} else {
				*w++ = *v;
			}
		}
		if (*v != '"')
			break;
		*w = '\0';
		printf("%s", lfirst ? "" : ",");
		sl_json_print_string(stdout, labels);
		putchar(':');
		sl_json_print_string(stdout, eq + 2);
		lfirst = false;
		labels = v + 1;
		if (*labels == ',')
			labels++;
	}
	printf("},\"value\":");
	json_value_of(value);
	putchar('}');
	return true;
}

/* `sluice status --json`: the status's KEY VALUE lines and every metric
 * sample, one document, for tools (the text forms are for people). */
static int status_json(void)
{
	char *st, *me, *l, *save = NULL;
	bool first = true;
	int r;

	r = netns_ctl(CTL_STATUS, &st);
	if (r < 0)
		return ctl_print(CTL_STATUS, true); /* says why */
	r = netns_ctl(CTL_METRICS, &me);
	if (r < 0) {
		free(st);
		return ctl_print(CTL_METRICS, true);
	}
	printf("{\"status\":{");
	for (l = strtok_r(st, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(l, ' ');

		/* KEY VALUE lines only; the rest is the text form of the
		 * metrics below. */
		if (!sp || strchr(sp + 1, ' ') || strchr(l, ':') || sp == l)
			continue;
		*sp = '\0';
		printf("%s", first ? "" : ",");
		sl_json_print_string(stdout, l);
		putchar(':');
		json_value_of(sp + 1);
		first = false;
	}
	printf("},\"metrics\":[");
	first = true;
	save = NULL;
	for (l = strtok_r(me, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (l[0] == '#')
			continue;
		if (print_sample(l, first))
			first = false;
	}
	printf("\n]}\n");
	free(st);
	free(me);
	return 0;
}

int cmd_status(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--json"))
		return status_json();
	if (argc == 2 && !strcmp(argv[1], "--metrics"))
		return ctl_print(CTL_METRICS, true);
	/* The JWK Set that verifies the broker's minted JWTs (public keys). */
	if (argc == 2 && !strcmp(argv[1], "--jwks"))
		return ctl_print(CTL_JWKS, true);
	if (argc != 1) {
		fprintf(stderr, "usage: sluice status [--json | --metrics | --jwks]\n");
		return 2;
	}
	return ctl_print(CTL_STATUS, true);
}

int cmd_reload(int argc, char **argv)
{
	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: sluice reload\n");
		return 2;
	}
	return ctl_print(CTL_RELOAD, true);
}

#define UPDATE_USAGE "usage: sluice update NAME --policy FILE [--keep-open]\n"

/*
 * `sluice update NAME --policy FILE [--keep-open]`: swaps a running
 * sandbox's policy. The file is checked here first, as create does, so that
 * a broken one says FILE:LINE:COL as `sluice policy check` would; the broker
 * checks it again (it reads the file itself) and keeps the old policy on
 * any error. The CLI keeps no copy of the policy path
 * (NETNS_STATE_DIR/NAME/sandbox has none): the broker's registration is
 * the only one, and the broker rewrites it.
 */
int cmd_update(int argc, char **argv)
{
	const char *name = NULL, *policy = NULL;
	char abs[PATH_MAX], line[PATH_MAX + 200];
	bool keep_open = false;
	int i;

	for (i = 1; i < argc; i++) {
		/* --help is main()'s (cli/main.c), from the dispatch table. */
		if (!strcmp(argv[i], "--policy") && i + 1 < argc) {
			policy = argv[++i];
		} else if (!strcmp(argv[i], "--keep-open")) {
			keep_open = true;
		} else if (!name && argv[i][0] != '-') {
			name = argv[i];
		} else {
			goto usage;
		}
	}
	if (!name || !policy)
		goto usage;
	if (strlen(name) > 100 || strpbrk(name, " \t\n")) {
		fprintf(stderr, "sluice: bad sandbox name `%.100s`\n", name);
		return 1;
	}
	if (policy_arg(policy, abs) < 0)
		return 1;
	snprintf(line, sizeof(line), CTL_UPDATE " %s %s%s", name, abs,
		 keep_open ? " " CTL_UPDATE_KEEP_OPEN : "");
	return ctl_print(line, false);
usage:
	fprintf(stderr, UPDATE_USAGE);
	return 2;
}

/* The sandbox CA's certificate (PEM), for a namespace wired with `sluice
 * register` or a runtime with its own trust store. */
int cmd_ca(int argc, char **argv)
{
	char line[200];

	if (argc != 2 || strlen(argv[1]) > 100) {
		fprintf(stderr, "usage: sluice ca NAME\n");
		return 2;
	}
	snprintf(line, sizeof(line), CTL_CA " %s", argv[1]);
	return ctl_print(line, true);
}
