// SPDX-License-Identifier: MIT
/* `sluice policy check FILE...`: one line per good file, errors with
 * FILE:LINE:COL for bad ones; exit 1 if any is bad.
 * `sluice policy test FILE TARGET...`: what the policy decides for each
 * NAME[:PORT] or ADDR[:PORT] ([V6]:PORT), as the broker would before it
 * resolves anything; exit 1 if any target is refused.
 * `sluice policy suggest ... AUDIT_LOG...`: see cmd_suggest.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/addr.h"
#include "netns/auditlog.h"
#include "netns/netns.h"
#include "policy/policy.h"

static int check(int argc, char **argv)
{
	int i, bad = 0;

	for (i = 0; i < argc; i++) {
		struct policy_error err;
		struct policy *p;

		if (policy_load_file(argv[i], &p, &err) < 0) {
			fprintf(stderr, "%s\n", err.msg);
			bad = 1;
			continue;
		}
		printf("%s: ok (%zu rules, %zu credentials)\n", argv[i], policy_rule_count(p),
		       policy_credential_count(p));
		policy_unref(p);
	}
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

static int test(const char *file, int argc, char **argv)
{
	struct policy_error err;
	struct policy *p;
	int i, refused = 0;

	if (policy_load_file(file, &p, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	for (i = 0; i < argc; i++) {
		char host[300];
		uint16_t port;
		struct sl_addr a;

		if (split_target(argv[i], host, sizeof(host), &port) < 0) {
			printf("%-40s error    bad target (NAME[:PORT] or ADDR[:PORT])\n", argv[i]);
			refused = 1;
			continue;
		}
		if (addr_parse(host, &a) == 0) {
			struct guard_result g;

			policy_guard(p, &a, port, GUARD_FROM_LITERAL, &g);
			printf("%-40s %-8s %s%s%s\n", argv[i], g.verdict ? "deny" : "allow",
			       g.reason, g.rule >= 0 ? "  " : "",
			       g.rule >= 0 ? policy_rule_text(p, g.rule) : "");
			refused |= g.verdict != GUARD_ALLOW;
		} else {
			int rule;
			enum policy_decision d =
				policy_match_name(p, host, strlen(host), port, &rule);

			printf("%-40s %-8s %s%s%s\n", argv[i], d ? "deny" : "allow",
			       policy_decision_reason(d), rule >= 0 ? "  " : "",
			       rule >= 0 ? policy_rule_text(p, rule) : "");
			refused |= d != POLICY_ALLOW;
		}
	}
	policy_unref(p);
	return refused;
}

int cmd_policy(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "check") == 0)
		return check(argc - 2, argv + 2);
	if (argc >= 4 && strcmp(argv[1], "test") == 0)
		return test(argv[2], argc - 3, argv + 3);
	if (argc >= 2 && strcmp(argv[1], "suggest") == 0)
		return netns_cmd_policy_suggest(argc - 2, argv + 2);
	fprintf(stderr, "usage: sluice policy check FILE...\n"
			"       sluice policy test FILE NAME[:PORT]|ADDR[:PORT]...\n"
			"       sluice policy suggest [--sandbox NAME] [--since TIME] [--wildcards N] AUDIT_LOG...\n");
	return 2;
}
