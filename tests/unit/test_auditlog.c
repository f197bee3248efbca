// SPDX-License-Identifier: MIT
/* Unit tests for cli/auditlog.c, cmd_suggest.c and cmd_report.c: which
 * audit lines the reader takes, times and --since, what `policy suggest`
 * makes of lines (ports, DNS-only names, literals, address refusals,
 * wildcards and their limits) and what `report` counts. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/auditlog.h"

static int parse(const char *line, struct auditlog_rec *r)
{
	return cli_auditlog_parse(line, strlen(line), r);
}

#define T0 "\"time\":\"2026-12-01T21:00:00.250Z\""

static void test_parse(void **state)
{
	static const struct {
		const char *line;
		bool ok;
	} cases[] = {
		{ "{" T0 "}", true },
		{ "{" T0 ",\"sandbox\":\"s\",\"proto\":\"http\",\"name\":\"a.test\",\"port\":80,"
		  "\"decision\":\"allow\",\"reason\":\"allowed\",\"bytes_up\":1,\"bytes_down\":2}",
		  true },
		{ " {" T0 ",\"new_key\":{\"nested\":[1,2,{\"x\":null}]},\"other\":true} ", true },
		{ "{" T0 ",\"port\":65535}", true },
		{ "{" T0 ",\"port\":65536}", false },
		{ "{" T0 ",\"port\":-1}", false },
		{ "{" T0 ",\"port\":\"80\"}", false },
		{ "{" T0 ",\"bytes_up\":1.5}", false },
		{ "{" T0 ",\"name\":1}", false },
		{ "{\"sandbox\":\"s\"}", false }, /* no time */
		{ "{\"time\":\"yesterday\"}", false },
		{ "{" T0 "} x", false },
		{ "{" T0 ",}", false },
		{ "{" T0, false },
		{ "[" T0 "]", false },
		{ "", false },
		{ "not json", false },
		{ "{" T0 ",\"name\":\"a\\x\"}", false }, /* a bad escape */
	};
	struct auditlog_rec r;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ret = parse(cases[i].line, &r);

		if ((ret == 0) != cases[i].ok)
			fail_msg("case %zu `%s`: got %d", i, cases[i].line, ret);
	}
	assert_int_equal(parse(cases[1].line, &r), 0);
	assert_string_equal(r.sandbox, "s");
	assert_string_equal(r.name, "a.test");
	assert_int_equal(r.port, 80);
	assert_int_equal(r.bytes_down, 2);
	assert_int_equal(r.t_ms, 1796158800250LL);
	assert_false(r.suspect);
}

/* The fixed schema's line (every key, null where it does not apply), and
 * the lines of a broker before it ("addr"/"port": the client's without a
 * sandbox, the destination's with one) read to the same record. */
#define NEW_LINE(sb, name, target, src, sport, dst, dport, decision, reason)                      \
	"{" T0 ",\"sandbox\":" sb ",\"proto\":\"http\",\"name\":" name ",\"target\":" target      \
	",\"src_addr\":" src ",\"src_port\":" sport ",\"dst_addr\":" dst ",\"dst_port\":" dport   \
	",\"decision\":\"" decision "\",\"reason\":\"" reason "\",\"mode\":null,\"rule\":null,"   \
	"\"credential\":null,\"method\":\"GET\",\"path\":\"/\",\"status\":403,\"dns_type\":null," \
	"\"dns_answer\":null,\"pid\":null,\"uid\":null,\"old_policy\":null,\"old_sha256\":null,"  \
	"\"new_policy\":null,\"new_sha256\":null,\"bytes_up\":0,\"bytes_down\":0,"                \
	"\"duration_ms\":1,\"repeated\":null,\"dropped\":null}"

static void test_parse_schema_versions(void **state)
{
	struct auditlog_rec r;
	struct report *rep = cli_report_new(), *old = cli_report_new();
	struct report_totals a, b;

	(void)state;
	assert_non_null(rep);
	assert_non_null(old);
	/* a refused literal: no name, the raw target, both ends */
	assert_int_equal(
		parse(NEW_LINE("\"s\"", "null", "\"http://2852039166/\"", "\"10.0.0.2\"", "40000",
			       "\"169.254.169.254\"", "80", "deny", "address-literal"),
		      &r),
		0);
	assert_string_equal(r.sandbox, "s");
	assert_string_equal(r.name, "");
	assert_string_equal(r.target, "http://2852039166/");
	assert_string_equal(r.src_addr, "10.0.0.2");
	assert_int_equal(r.src_port, 40000);
	assert_string_equal(r.addr, "169.254.169.254");
	assert_int_equal(r.port, 80);
	assert_int_equal(r.bytes_up, 0);
	assert_int_equal(r.repeated, 0);
	cli_report_add(rep, &r);

	/* an old line of a sandbox: its addr and port are the destination */
	assert_int_equal(parse("{" T0 ",\"sandbox\":\"s\",\"proto\":\"http\",\"addr\":"
			       "\"169.254.169.254\",\"port\":80,\"decision\":\"deny\","
			       "\"reason\":\"address-literal\",\"bytes_up\":0,\"bytes_down\":0}",
			       &r),
			 0);
	assert_string_equal(r.addr, "169.254.169.254");
	assert_int_equal(r.port, 80);
	assert_string_equal(r.src_addr, "");
	assert_string_equal(r.target, "");
	cli_report_add(old, &r);
	assert_int_equal(cli_report_totals(rep, "s", &a), 0);
	assert_int_equal(cli_report_totals(old, "s", &b), 0);
	assert_int_equal(a.refused, 1);
	assert_int_equal(b.refused, 1);
	assert_int_equal(cli_report_refused(rep, "s", "address-literal", "169.254.169.254"), 1);
	assert_int_equal(cli_report_refused(old, "s", "address-literal", "169.254.169.254"), 1);

	/* an old unknown-source line: its addr and port are the client's */
	assert_int_equal(parse("{" T0 ",\"proto\":\"connect\",\"addr\":\"10.99.0.6\",\"port\":"
			       "51000,\"decision\":\"deny\",\"reason\":\"unknown-source\"}",
			       &r),
			 0);
	assert_string_equal(r.src_addr, "10.99.0.6");
	assert_int_equal(r.src_port, 51000);
	assert_string_equal(r.addr, "");
	assert_int_equal(r.port, 0);
	/* the same in the new schema */
	assert_int_equal(parse(NEW_LINE("null", "null", "null", "\"10.99.0.6\"", "51000", "null",
					"null", "deny", "unknown-source"),
			       &r),
			 0);
	assert_string_equal(r.src_addr, "10.99.0.6");
	assert_int_equal(r.src_port, 51000);
	assert_string_equal(r.addr, "");
	assert_int_equal(r.port, 0);
	assert_string_equal(r.sandbox, "");

	/* null is no value of a key that must have one */
	assert_int_equal(parse("{\"time\":null}", &r), -EINVAL);
	/* nor does "null" pass for a string or a number elsewhere */
	assert_int_equal(parse("{" T0 ",\"dst_port\":nul}", &r), -EINVAL);
	assert_int_equal(parse("{" T0 ",\"dst_port\":65536}", &r), -EINVAL);
	cli_report_free(rep);
	cli_report_free(old);
}

static void test_parse_hostile(void **state)
{
	struct auditlog_rec r;
	char line[2048];

	(void)state;
	/* A NUL cannot cut a name short: it becomes '?' and marks the line. */
	assert_int_equal(parse("{" T0 ",\"name\":\"good.test\\u0000.evil\"}", &r), 0);
	assert_string_equal(r.name, "good.test?.evil");
	assert_true(r.suspect);
	/* A name longer than the buffer is cut, and marked. */
	snprintf(line, sizeof(line), "{" T0 ",\"name\":\"%0999d\"}", 0);
	assert_int_equal(parse(line, &r), 0);
	assert_true(r.suspect);
	assert_int_equal(strlen(r.name), sizeof(r.name) - 1);
	/* Escapes come back as the bytes they stand for. */
	assert_int_equal(parse("{" T0 ",\"name\":\"a\\u001b\\n\"}", &r), 0);
	assert_string_equal(r.name, "a\x1b\n");
	assert_false(r.suspect);
}

static void test_put_safe(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	(void)state;
	cli_auditlog_put_safe(m, "a b\x1b[2J\n\\\xff.test", 100);
	fputc('|', m);
	cli_auditlog_put_safe(m, "abcdef", 3);
	fclose(m);
	assert_string_equal(buf, "a\\x20b\\x1b[2J\\x0a\\x5c\\xff.test|abc...");
	free(buf);
}

static void test_time(void **state)
{
	static const struct {
		const char *s;
		int64_t ms; /* -1: refused */
	} cases[] = {
		{ "1970-01-01T00:00:00Z", 0 },
		{ "1970-01-01T00:00:01.5Z", 1500 },
		{ "1970-01-01t00:00:01.123456z", 1123 },
		{ "1970-01-01T01:00:00+01:00", 0 },
		{ "1970-01-01T00:00:00-00:30", 1800000 },
		{ "2026-12-01T21:00:00.250Z", 1796158800250LL },
		{ "2026-12-01 21:00:00Z", -1 },
		{ "2026-12-01T21:00:00", -1 },
		{ "2026-13-01T21:00:00Z", -1 },
		{ "2026-12-01T24:00:00Z", -1 },
		{ "2026-12-01T21:00:00.Z", -1 },
		{ "2026-12-01T21:00:00Zx", -1 },
		{ "", -1 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t ms = -1;
		int ret = cli_auditlog_time(cases[i].s, &ms);

		if (cases[i].ms < 0 ? ret == 0 : (ret != 0 || ms != cases[i].ms))
			fail_msg("case `%s`: ret %d, ms %lld", cases[i].s, ret, (long long)ms);
	}
}

static void test_since(void **state)
{
	const int64_t now = 100000000000LL;
	int64_t ms;

	(void)state;
	assert_int_equal(cli_auditlog_since("1h", now, &ms), 0);
	assert_int_equal(ms, now - 3600000);
	assert_int_equal(cli_auditlog_since("1h30m", now, &ms), 0);
	assert_int_equal(ms, now - 5400000);
	assert_int_equal(cli_auditlog_since("90s", now, &ms), 0);
	assert_int_equal(ms, now - 90000);
	assert_int_equal(cli_auditlog_since("2d", now, &ms), 0);
	assert_int_equal(ms, now - 2 * 86400000LL);
	assert_int_equal(cli_auditlog_since("1970-01-01T00:00:10Z", now, &ms), 0);
	assert_int_equal(ms, 10000);
	assert_int_equal(cli_auditlog_since("", now, &ms), -EINVAL);
	assert_int_equal(cli_auditlog_since("1", now, &ms), -EINVAL);
	assert_int_equal(cli_auditlog_since("h", now, &ms), -EINVAL);
	assert_int_equal(cli_auditlog_since("1w", now, &ms), -EINVAL);
	assert_int_equal(cli_auditlog_since("-1h", now, &ms), -EINVAL);
	assert_int_equal(cli_auditlog_since("99999999999999h", now, &ms), -EINVAL);
}

/* --- suggest ---------------------------------------------------------------- */

/* One audit line for the aggregations, written as the broker writes it. */
static void add_line(struct suggest *s, struct report *rep, const char *fmt, ...)
{
	struct auditlog_rec r;
	char line[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (parse(line, &r) != 0)
		fail_msg("test line does not parse: %s", line);
	if (s)
		cli_suggest_add(s, &r);
	if (rep)
		cli_report_add(rep, &r);
}

#define CONN(proto, name, port, decision, reason)                                                 \
	"{" T0 ",\"sandbox\":\"s\",\"proto\":\"" proto "\",\"name\":\"" name "\",\"port\":" #port \
	",\"decision\":\"" decision "\",\"reason\":\"" reason "\"}"

static char *suggest_text(struct suggest *s, unsigned wildcards, int *rules)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	assert_non_null(m);
	*rules = cli_suggest_print(s, wildcards, m);
	fclose(m);
	return buf;
}

static void test_suggest_rules(void **state)
{
	struct suggest *s = cli_suggest_new();
	char *out;
	int n;

	(void)state;
	assert_non_null(s);
	add_line(s, NULL, CONN("http", "API.Example.com.", 80, "allow", "allowed"));
	add_line(s, NULL, CONN("connect", "api.example.com", 443, "allow", "allowed"));
	add_line(s, NULL, CONN("http", "api.example.com", 8080, "deny", "port-not-allowed"));
	add_line(s, NULL, CONN("http", "new.example.org", 80, "deny", "not-allowlisted"));
	add_line(s, NULL, CONN("http", "would.example.org", 80, "would-deny", "not-allowlisted"));
	add_line(s, NULL, CONN("tcp", "db.example.org", 5432, "deny", "raw-tcp-not-allowed"));
	add_line(s, NULL, CONN("http", "down.example.org", 80, "error", "connect-failed"));
	/* Not about the policy: no rule. */
	add_line(s, NULL, CONN("http", "front.example.org", 80, "deny", "host-mismatch"));
	add_line(s, NULL, CONN("http", "bad.example.org", 80, "deny", "bad-request"));
	add_line(s, NULL,
		 "{" T0 ",\"sandbox\":\"s\",\"proto\":\"control\",\"name\":\"register\","
		 "\"decision\":\"allow\",\"reason\":\"control-register\"}");
	/* DNS: a refused name gets the default ports. */
	add_line(s, NULL,
		 "{" T0 ",\"sandbox\":\"s\",\"proto\":\"dns\",\"name\":\"dns.example.net\","
		 "\"decision\":\"deny\",\"reason\":\"not-allowlisted\",\"dns_type\":\"A\"}");
	/* Address reasons: never suggested, even where also seen otherwise. */
	add_line(s, NULL, CONN("http", "rebind.example.net", 80, "deny", "not-allowlisted"));
	add_line(s, NULL, CONN("http", "rebind.example.net", 80, "deny", "address-denied"));
	add_line(s, NULL, CONN("http", "10.0.0.5", 80, "deny", "address-literal"));
	add_line(s, NULL, CONN("http", "169.254.169.254", 80, "deny", "address-literal"));
	add_line(s, NULL, CONN("http", "203.0.113.9", 80, "deny", "address-literal"));
	/* Outside the denied ranges: a cidr rule. */
	add_line(s, NULL, CONN("http", "11.0.2.10", 8080, "deny", "address-literal"));
	add_line(s, NULL, CONN("connect", "2600::1", 443, "deny", "address-literal"));
	/* Port 0 is no port (a line without one): never `ports: [0]`. */
	add_line(s, NULL, CONN("tcp", "zero.example.org", 0, "deny", "raw-tcp-not-allowed"));
	/* Not host names. */
	add_line(s, NULL, CONN("http", "a b.test", 80, "deny", "not-allowlisted"));
	add_line(s, NULL, CONN("http", "*.example.com", 80, "deny", "not-allowlisted"));
	out = suggest_text(s, 0, &n);
	assert_non_null(out);
	assert_int_equal(n, 9);
	assert_null(strstr(out, "[0]"));
	assert_non_null(strstr(out, "no port seen (a DNS query): the default ports\n"
				    "    - host: \"zero.example.org\"\n"));
	assert_non_null(
		strstr(out, "    - host: \"api.example.com\"\n      ports: [80, 443, 8080]\n"));
	assert_non_null(strstr(out, "    - host: \"new.example.org\"\n      ports: [80]\n"));
	assert_non_null(strstr(out, "    - host: \"would.example.org\"\n      ports: [80]\n"));
	assert_non_null(strstr(out, "    - host: \"db.example.org\"\n      ports: [5432]\n"
				    "      raw_tcp: true\n"));
	assert_non_null(strstr(out, "    - host: \"down.example.org\"\n"));
	assert_non_null(strstr(out, "no port seen (a DNS query): the default ports\n"
				    "    - host: \"dns.example.net\"\n    #"));
	assert_non_null(strstr(out, "    - cidr: \"11.0.2.10/32\"\n      ports: [8080]\n"));
	assert_non_null(strstr(out, "    - cidr: \"2600::1/128\"\n      ports: [443]\n"));
	assert_null(strstr(out, "front.example.org"));
	assert_null(strstr(out, "bad.example.org"));
	assert_null(strstr(out, "register"));
	assert_null(strstr(out, "host: \"rebind"));
	assert_null(strstr(out, "cidr: \"10."));
	assert_null(strstr(out, "cidr: \"169."));
	assert_null(strstr(out, "cidr: \"203."));
	assert_non_null(strstr(out, "# refused for address reasons, not suggested:\n"));
	assert_non_null(strstr(out, "#   rebind.example.net  address-denied  (2 times)\n"));
	assert_non_null(strstr(out, "#   10.0.0.5  address-literal, in 10.0.0.0/8  (1 time)\n"));
	assert_non_null(strstr(out, "#   203.0.113.9  address-literal, in 203.0.113.0/24"));
	assert_non_null(strstr(out, "# names that are not host names, not suggested (2):\n"));
	assert_non_null(strstr(out, "#   a\\x20b.test  (1)\n"));
	free(out);
	cli_suggest_free(s);
}

static void test_suggest_counts(void **state)
{
	struct suggest *s = cli_suggest_new();
	char *out;
	int n;

	(void)state;
	add_line(
		s, NULL,
		"{\"time\":\"2026-12-01T21:00:00.100Z\",\"sandbox\":\"s\",\"proto\":\"http\","
		"\"name\":\"a.test\",\"port\":80,\"decision\":\"deny\",\"reason\":\"not-allowlisted\"}");
	add_line(
		s, NULL,
		"{\"time\":\"2026-12-01T21:00:05.000Z\",\"sandbox\":\"s\",\"proto\":\"http\","
		"\"name\":\"a.test\",\"port\":80,\"decision\":\"deny\",\"reason\":\"not-allowlisted\","
		"\"repeated\":41}");
	add_line(s, NULL,
		 "{\"time\":\"2026-12-01T21:00:09.999Z\",\"sandbox\":\"s\",\"proto\":\"http\","
		 "\"name\":\"a.test\",\"port\":80,\"decision\":\"allow\",\"reason\":\"allowed\"}");
	add_line(s, NULL,
		 "{\"time\":\"2026-12-01T21:00:10Z\",\"sandbox\":\"s\",\"decision\":\"deny\","
		 "\"reason\":\"audit-rate-limited\",\"dropped\":7}");
	out = suggest_text(s, 0, &n);
	assert_int_equal(n, 1);
	assert_non_null(strstr(out, "    # 43 times (1 allowed, 42 refused), first "
				    "2026-12-01T21:00:00.100Z, last 2026-12-01T21:00:09.999Z\n"));
	assert_non_null(strstr(out, "# 7 refusals were dropped by the broker's audit rate"));
	free(out);
	cli_suggest_free(s);

	/* Nothing seen: a policy that allows nothing, and still loads. */
	s = cli_suggest_new();
	out = suggest_text(s, 3, &n);
	assert_int_equal(n, 0);
	assert_non_null(strstr(out, "version: 1\negress:\n  allow: []\n"));
	free(out);
	cli_suggest_free(s);
}

static void test_suggest_wildcards(void **state)
{
	static const char *const names[] = { "a.cdn.example.com",
					     "b.cdn.example.com",
					     "c.cdn.example.com",
					     "x.y.cdn.example.com",
					     "one.github.io",
					     "two.github.io",
					     "three.github.io",
					     "p.test",
					     "q.test",
					     "r.test",
					     "m.lab.example.org",
					     "n.lab.example.org",
					     "o.lab.example.org",
					     "metadata.lab.example.org" };
	struct suggest *s = cli_suggest_new();
	char line[512], *out;
	size_t i;
	int n;

	(void)state;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(line, sizeof(line),
			 "{" T0 ",\"sandbox\":\"s\",\"proto\":\"http\",\"name\":\"%s\",\"port\":%d,"
			 "\"decision\":\"deny\",\"reason\":\"%s\"}",
			 names[i], i == 1 ? 8443 : 443,
			 strncmp(names[i], "metadata.", 9) ? "not-allowlisted" : "address-denied");
		add_line(s, NULL, "%s", line);
	}
	/* The apex is not under its own wildcard. */
	add_line(s, NULL, CONN("http", "cdn.example.com", 443, "allow", "allowed"));

	/* Without --wildcards: exact names only. */
	out = suggest_text(s, 0, &n);
	assert_null(strstr(out, "\"*."));
	assert_int_equal(n, 14);
	free(out);
	/* Below the count: no wildcard either. */
	out = suggest_text(s, 4, &n);
	assert_null(strstr(out, "\"*."));
	free(out);

	out = suggest_text(s, 3, &n);
	/* Three siblings: one rule, with every port, and the name one level
	 * deeper folded into it. */
	assert_non_null(
		strstr(out, "    - host: \"*.cdn.example.com\"\n      ports: [443, 8443]\n"));
	assert_non_null(strstr(out, "4 names (a.cdn.example.com, b.cdn.example.com, "
				    "c.cdn.example.com, ...)"));
	assert_null(strstr(out, "host: \"a.cdn.example.com\""));
	assert_null(strstr(out, "host: \"x.y.cdn.example.com\""));
	assert_non_null(strstr(out, "    - host: \"cdn.example.com\"\n"));
	/* Never over a public suffix, nor one label. */
	assert_null(strstr(out, "\"*.github.io\""));
	assert_non_null(strstr(out, "    - host: \"one.github.io\"\n"));
	assert_null(strstr(out, "\"*.test\""));
	assert_non_null(strstr(out, "    - host: \"p.test\"\n"));
	/* Nor over a name refused for an address reason. */
	assert_null(strstr(out, "host: \"*.lab.example.org\""));
	assert_non_null(strstr(out, "    - host: \"m.lab.example.org\"\n"));
	assert_non_null(strstr(out, "# no \"*.lab.example.org\": it would cover a name refused "
				    "for an address reason\n"));
	assert_null(strstr(out, "host: \"metadata.lab.example.org\""));
	free(out);
	cli_suggest_free(s);

	assert_true(cli_suggest_public_suffix("com"));
	assert_true(cli_suggest_public_suffix("co.uk"));
	assert_true(cli_suggest_public_suffix("github.io"));
	assert_false(cli_suggest_public_suffix("example.com"));
	assert_false(cli_suggest_public_suffix("cdn.example.co.uk"));
	/* Below a shared platform: every suffix is another tenant's too. */
	assert_true(cli_suggest_public_suffix("s3.amazonaws.com"));
	assert_true(cli_suggest_public_suffix("s3.us-east-1.amazonaws.com"));
	assert_true(cli_suggest_public_suffix("storage.googleapis.com"));
	assert_true(cli_suggest_public_suffix("blob.core.windows.net"));
	assert_true(cli_suggest_public_suffix("my-bucket.s3.amazonaws.com"));
	assert_false(cli_suggest_public_suffix("amazonaws.com.example.com"));
}

/* --- report ------------------------------------------------------------------ */

#define BYTES(proto, name, port, decision, reason, up, down)                                      \
	"{" T0 ",\"sandbox\":\"s\",\"proto\":\"" proto "\",\"name\":\"" name "\",\"port\":" #port \
	",\"decision\":\"" decision "\",\"reason\":\"" reason "\",\"bytes_up\":" #up              \
	",\"bytes_down\":" #down "}"

static void test_report_counts(void **state)
{
	struct report *r = cli_report_new();
	struct report_totals t;
	uint64_t req, up, down;

	(void)state;
	assert_non_null(r);
	add_line(NULL, r, BYTES("http", "a.test", 80, "allow", "allowed", 10, 100));
	add_line(NULL, r, BYTES("http", "a.test", 80, "allow", "client-gone", 5, 0));
	/* An intercepted tunnel: its opening line is no request; the requests
	 * inside are, each with its bytes. */
	add_line(NULL, r, BYTES("connect", "a.test", 443, "allow", "intercepted", 300, 2000));
	add_line(NULL, r,
		 "{" T0 ",\"sandbox\":\"s\",\"proto\":\"https\",\"name\":\"a.test\",\"port\":443,"
		 "\"decision\":\"allow\",\"reason\":\"allowed\",\"credential\":\"gh\","
		 "\"bytes_up\":50,\"bytes_down\":70}");
	add_line(
		NULL, r,
		"{" T0 ",\"sandbox\":\"s\",\"proto\":\"https\",\"name\":\"a.test\",\"port\":443,"
		"\"decision\":\"deny\",\"reason\":\"placeholder-out-of-scope\",\"credential\":\"gh\","
		"\"bytes_up\":0,\"bytes_down\":0}");
	add_line(NULL, r, BYTES("http", "b.test", 80, "deny", "not-allowlisted", 0, 0));
	add_line(
		NULL, r,
		"{" T0 ",\"sandbox\":\"s\",\"proto\":\"http\",\"name\":\"b.test\","
		"\"port\":80,\"decision\":\"deny\",\"reason\":\"not-allowlisted\",\"repeated\":9}");
	add_line(NULL, r,
		 "{" T0 ",\"sandbox\":\"s\",\"decision\":\"deny\","
		 "\"reason\":\"audit-rate-limited\",\"dropped\":5}");
	add_line(NULL, r,
		 "{" T0 ",\"sandbox\":\"s\",\"proto\":\"dns\",\"name\":\"a.test\","
		 "\"decision\":\"allow\",\"reason\":\"allowed\"}");
	add_line(NULL, r,
		 "{" T0 ",\"sandbox\":\"s\",\"proto\":\"dns\",\"name\":\"c.test\","
		 "\"decision\":\"deny\",\"reason\":\"not-allowlisted\"}");
	add_line(NULL, r,
		 "{" T0 ",\"sandbox\":\"s\",\"proto\":\"control\",\"name\":\"register\","
		 "\"decision\":\"allow\",\"reason\":\"control-register\"}");
	add_line(NULL, r, BYTES("http", "a.test", 80, "allow", "allowed", 1000, 1000)
		 /* another sandbox's line counts for that one only */);
	add_line(NULL, r,
		 "{" T0 ",\"sandbox\":\"other\",\"proto\":\"http\",\"name\":\"a.test\",\"port\":80,"
		 "\"decision\":\"allow\",\"reason\":\"allowed\",\"bytes_up\":7,\"bytes_down\":7}");

	assert_int_equal(cli_report_totals(r, "s", &t), 0);
	assert_int_equal(t.requests, 4);
	assert_int_equal(t.bytes_up, 10 + 5 + 300 + 50 + 1000);
	assert_int_equal(t.bytes_down, 100 + 2000 + 70 + 1000);
	assert_int_equal(t.refused, 1 + 1 + 9 + 5 + 1);
	assert_int_equal(t.dns_answered, 1);
	assert_int_equal(t.dns_refused, 1);
	assert_int_equal(t.hosts, 2);
	cli_report_host(r, "s", "a.test", 80, &req, &up, &down);
	assert_int_equal(req, 3);
	assert_int_equal(up, 1015);
	assert_int_equal(down, 1100);
	cli_report_host(r, "s", "a.test", 443, &req, &up, &down);
	assert_int_equal(req, 1);
	assert_int_equal(up, 350);
	assert_int_equal(down, 2070);
	assert_int_equal(cli_report_refused(r, "s", "not-allowlisted", "b.test"), 10);
	assert_int_equal(cli_report_refused(r, "s", "audit-rate-limited", NULL), 5);
	assert_int_equal(cli_report_refused(r, "s", NULL, NULL), 17);
	assert_int_equal(cli_report_totals(r, "other", &t), 0);
	assert_int_equal(t.requests, 1);
	assert_int_equal(t.bytes_up, 7);
	assert_int_equal(cli_report_totals(r, "nobody", &t), -ENOENT);
	cli_report_free(r);
}

static void test_report_print(void **state)
{
	struct report *r = cli_report_new();
	struct auditlog_stats st = { .lines = 4 };
	char *buf = NULL;
	size_t len = 0;
	FILE *m;

	(void)state;
	add_line(NULL, r, BYTES("http", "a.test", 80, "allow", "allowed", 10, 2048));
	add_line(NULL, r,
		 BYTES("http", "evil\\u001b[2J\\\"x", 80, "deny", "not-allowlisted", 0, 0));
	/* Audit mode: let through, and grouped apart from the refusals. */
	add_line(NULL, r, BYTES("http", "w.test", 80, "would-deny", "not-allowlisted", 5, 5));
	add_line(NULL, r,
		 "{" T0 ",\"sandbox\":\"s\",\"proto\":\"http\",\"name\":\"a.test\",\"port\":80,"
		 "\"decision\":\"allow\",\"reason\":\"allowed\",\"credential\":\"gh\"}");
	m = open_memstream(&buf, &len);
	assert_int_equal(cli_report_print(r, false, &st, m), 0);
	fclose(m);
	assert_non_null(strstr(
		buf, "sandbox s: 2026-12-01T21:00:00Z to 2026-12-01T21:00:00Z, 4 audit lines\n"));
	assert_non_null(strstr(buf, "  a.test:80 "));
	assert_non_null(strstr(buf, "2.0 KiB"));
	assert_non_null(strstr(buf, "evil\\x1b[2J\"x:80"));
	assert_null(strchr(buf, '\x1b'));
	assert_non_null(strstr(buf, "CREDENTIALS (NAME)"));
	assert_non_null(strstr(buf, "  not-allowlisted (would-deny) "));
	free(buf);

	buf = NULL;
	m = open_memstream(&buf, &len);
	assert_int_equal(cli_report_print(r, true, &st, m), 0);
	fclose(m);
	assert_non_null(strstr(buf, "\"host\":\"evil\\u001b[2J\\\"x\""));
	assert_non_null(strstr(buf,
			       "\"credentials\":[{\"name\":\"gh\",\"host\":\"a.test\",\"port\":80,"
			       "\"requests\":1,\"refused\":0}]"));
	assert_null(strchr(buf, '\x1b'));
	free(buf);
	cli_report_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_hostile),
		cmocka_unit_test(test_parse_schema_versions),
		cmocka_unit_test(test_put_safe),
		cmocka_unit_test(test_time),
		cmocka_unit_test(test_since),
		cmocka_unit_test(test_suggest_rules),
		cmocka_unit_test(test_suggest_counts),
		cmocka_unit_test(test_suggest_wildcards),
		cmocka_unit_test(test_report_counts),
		cmocka_unit_test(test_report_print),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
