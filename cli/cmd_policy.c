// SPDX-License-Identifier: MIT
/* `sluice policy check [--json] FILE...`: one line per good file (and a
 * warning per credential whose secret file cannot be read, which the broker
 * would refuse), errors with FILE:LINE:COL for bad ones; exit 1 if any is
 * bad.
 * `sluice policy test [--json] FILE [--resolve NAME=ADDR]... TARGET...`:
 * what the policy decides for each NAME[:PORT] or ADDR[:PORT] ([V6]:PORT),
 * as the broker would: for a name, the allowlist, then the address guard
 * on each address --resolve gives it (without one, the verdict is the
 * allowlist's and says the guard is still to come); exit 1 if any target
 * is refused. --json prints one document instead of the table.
 * `sluice policy suggest ... AUDIT_LOG...`: see cmd_suggest.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/addr.h"
#include "common/json.h"
#include "cli/auditlog.h"
#include "policy/policy.h"

/* The credentials of @p whose secret file cannot be read now, one warning
 * each: the broker reads them when it loads the policy, and refuses a
 * policy whose secret it cannot read. Environment sources are the
 * broker's environment, not this one's: not checked. Return: how many. */
static int secret_warnings(const char *file, const struct policy *p, bool json, bool *first)
{
	size_t i, n = policy_credential_count(p);
	int warned = 0;

	for (i = 0; i < n; i++) {
		const struct policy_credential *c = policy_credential_get(p, i);
		char msg[600];

		if (c->source_kind == POLICY_SOURCE_ENV || !c->source ||
		    access(c->source, R_OK) == 0)
			continue;
		snprintf(msg, sizeof(msg),
			 "credential `%s`: cannot read %s: %s (the broker refuses "
			 "the policy until it can)",
			 c->name, c->source, strerror(errno));
		if (json) {
			printf("%s", *first ? "" : ",");
			sl_json_print_string(stdout, msg);
			*first = false;
		} else {
			fprintf(stderr, "%s: warning: %s\n", file, msg);
		}
		warned++;
	}
	return warned;
}

static int check(int argc, char **argv, bool json)
{
	int i, bad = 0;

	if (json)
		printf("{\"files\":[");
	for (i = 0; i < argc; i++) {
		struct policy_error err;
		struct policy *p;
		bool first = true;

		if (json) {
			printf("%s\n{\"file\":", i ? "," : "");
			sl_json_print_string(stdout, argv[i]);
		}
		if (policy_load_file(argv[i], &p, &err) < 0) {
			if (json) {
				printf(",\"ok\":false,\"line\":%u,\"col\":%u,\"error\":", err.line,
				       err.col);
				sl_json_print_string(stdout, err.msg);
				printf("}");
			} else {
				fprintf(stderr, "%s\n", err.msg);
			}
			bad = 1;
			continue;
		}
		if (json) {
			printf(",\"ok\":true,\"rules\":%zu,\"credentials\":%zu,\"warnings\":[",
			       policy_rule_count(p), policy_credential_count(p));
			secret_warnings(argv[i], p, true, &first);
			printf("]}");
		} else {
			printf("%s: ok (%zu rules, %zu credentials)\n", argv[i],
			       policy_rule_count(p), policy_credential_count(p));
			secret_warnings(argv[i], p, false, &first);
		}
		policy_unref(p);
	}
	if (json)
		printf("\n],\"ok\":%s}\n", bad ? "false" : "true");
	return bad;
}

/* Splits "host:port", "[v6]:port", "v6" or "host" into @host and @port. */
static int split_target(const char *t, char *host, size_t hlen, uint16_t *port)
{
	const char *colon = NULL;
	size_t n;

	*port = 443;
	if (t[0] == '[') {
		const char *end = strchr(t, ']');

		if (!end)
			return -EINVAL;
		n = (size_t)(end - t - 1);
		if (n >= hlen)
			return -EINVAL;
		memcpy(host, t + 1, n);
		host[n] = '\0';
		colon = end[1] == ':' ? end + 1 : NULL;
		if (!colon && end[1])
			return -EINVAL;
	} else {
		colon = strchr(t, ':');
		if (colon && strchr(colon + 1, ':'))
			colon = NULL; /* a bare v6 address */
		n = colon ? (size_t)(colon - t) : strlen(t);
		if (n >= hlen)
			return -EINVAL;
		memcpy(host, t, n);
		host[n] = '\0';
	}
	if (colon) {
		char *end;
		unsigned long v = strtoul(colon + 1, &end, 10);

		if (*end || v == 0 || v > 65535)
			return -EINVAL;
		*port = (uint16_t)v;
	}
	return 0;
}

/* --resolve NAME=ADDR, as many as given: the addresses a name is taken
 * to resolve to. */
struct resolved {
	const char *name;
	size_t len;
	struct sl_addr addr;
};

/* One verdict, as a table row or a JSON object. */
static void row(bool json, bool *first, const char *target, const char *decision,
		const char *reason, const char *rule, const char *note)
{
	if (!json) {
		printf("%-40s %-8s %s%s%s%s%s\n", target, decision, reason, rule ? "  " : "",
		       rule ? rule : "", note ? "  " : "", note ? note : "");
		return;
	}
	printf("%s\n{\"target\":", *first ? "" : ",");
	sl_json_print_string(stdout, target);
	printf(",\"decision\":\"%s\",\"reason\":", decision);
	sl_json_print_string(stdout, reason);
	printf(",\"rule\":");
	if (rule)
		sl_json_print_string(stdout, rule);
	else
		printf("null");
	printf(",\"note\":");
	if (note)
		sl_json_print_string(stdout, note);
	else
		printf("null");
	printf("}");
	*first = false;
}

/* A name the allowlist allows: the guard on every address --resolve gives
 * it; the first one refused decides (the broker tries them in turn and
 * refuses those the guard does). Return: whether it is refused. */
static bool judge_name(const struct policy *p, const char *target, const char *host, uint16_t port,
		       int rule, const struct resolved *rs, size_t nrs, bool json, bool *first)
{
	const char *rtext = rule >= 0 ? policy_rule_text(p, rule) : NULL;
	size_t i, seen = 0;

	for (i = 0; i < nrs; i++) {
		struct guard_result g;
		char as[ADDR_STRLEN], note[ADDR_STRLEN + 80];

		if (rs[i].len != strlen(host) || strncasecmp(rs[i].name, host, rs[i].len))
			continue;
		seen++;
		if (policy_guard(p, &rs[i].addr, port, GUARD_FROM_NAME, &g) == GUARD_ALLOW)
			continue;
		addr_format(&rs[i].addr, as, sizeof(as));
		snprintf(note, sizeof(note), "resolved to %s%s%s", as, g.range[0] ? ", in " : "",
			 g.range);
		row(json, first, target, "deny", g.reason, rtext, note);
		return true;
	}
	row(json, first, target, "allow", policy_decision_reason(POLICY_ALLOW), rtext,
	    seen ? "every --resolve address passes the address guard"
		 : "the address guard still applies to what the name resolves to "
		   "(--resolve NAME=ADDR checks an address)");
	return false;
}

static int test(const char *file, int argc, char **argv, bool json)
{
	struct policy_error err;
	struct resolved rs[64];
	struct policy *p;
	size_t nrs = 0;
	int i, refused = 0;
	bool first = true;

	for (i = 0; i < argc; i++) {
		const char *v = NULL, *eq;

		if (!strcmp(argv[i], "--resolve") && i + 1 < argc)
			v = argv[i + 1];
		else if (!strncmp(argv[i], "--resolve=", 10))
			v = argv[i] + 10;
		if (!v)
			continue;
		eq = strchr(v, '=');
		if (!eq || eq == v || nrs == sizeof(rs) / sizeof(rs[0]) ||
		    addr_parse(eq + 1, &rs[nrs].addr) < 0) {
			fprintf(stderr, "sluice: --resolve `%s`: want NAME=ADDR (at most %zu)\n", v,
				sizeof(rs) / sizeof(rs[0]));
			return 2;
		}
		rs[nrs].name = v;
		rs[nrs].len = (size_t)(eq - v);
		nrs++;
	}
	if (policy_load_file(file, &p, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	if (json)
		printf("{\"targets\":[");
	for (i = 0; i < argc; i++) {
		char host[300];
		uint16_t port;
		struct sl_addr a;

		if (!strcmp(argv[i], "--resolve")) {
			i++;
			continue;
		}
		if (!strncmp(argv[i], "--resolve=", 10))
			continue;
		if (split_target(argv[i], host, sizeof(host), &port) < 0) {
			row(json, &first, argv[i], "error",
			    "bad target (NAME[:PORT] or ADDR[:PORT])", NULL, NULL);
			refused = 1;
			continue;
		}
		if (addr_parse(host, &a) == 0) {
			struct guard_result g;

			policy_guard(p, &a, port, GUARD_FROM_LITERAL, &g);
			row(json, &first, argv[i], g.verdict ? "deny" : "allow", g.reason,
			    g.rule >= 0 ? policy_rule_text(p, g.rule) : NULL,
			    g.range[0] && g.verdict ? g.range : NULL);
			refused |= g.verdict != GUARD_ALLOW;
		} else {
			int rule;
			enum policy_decision d =
				policy_match_name(p, host, strlen(host), port, &rule);

			if (d == POLICY_ALLOW) {
				refused |= judge_name(p, argv[i], host, port, rule, rs, nrs, json,
						      &first);
				continue;
			}
			row(json, &first, argv[i], "deny", policy_decision_reason(d),
			    rule >= 0 ? policy_rule_text(p, rule) : NULL, NULL);
			refused = 1;
		}
	}
	if (json)
		printf("\n],\"refused\":%s}\n", refused ? "true" : "false");
	policy_unref(p);
	return refused;
}

int cmd_policy(int argc, char **argv)
{
	bool json = false;
	int i, n = 0;

	if (argc >= 2 && strcmp(argv[1], "suggest") == 0)
		return cmd_policy_suggest(argc - 2, argv + 2);
	/* --json may come anywhere after the subcommand: taken out here. */
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else
			argv[++n] = argv[i];
	}
	argc = n + 1;
	if (argc >= 3 && strcmp(argv[1], "check") == 0)
		return check(argc - 2, argv + 2, json);
	if (argc >= 4 && strcmp(argv[1], "test") == 0)
		return test(argv[2], argc - 3, argv + 3, json);
	fprintf(stderr,
		"usage: sluice policy check [--json] FILE...\n"
		"       sluice policy test [--json] FILE [--resolve NAME=ADDR]... "
		"NAME[:PORT]|ADDR[:PORT]...\n"
		"       sluice policy suggest [--sandbox NAME] [--since TIME] [--wildcards N] "
		"AUDIT_LOG...\n");
	return 2;
}
