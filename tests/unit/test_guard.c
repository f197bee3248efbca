// SPDX-License-Identifier: MIT
/* Unit tests for policy/guard.c, the address guard: every default deny range
 * at its edges, embedded v4 forms, literals against cidr rules, and the
 * precedence of cidr rules, deny_ranges and allow_ranges.
 * The tables follow smokescreen's TestClassifyAddr: one row per address. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/addr.h"
#include "policy/policy.h"
#include "policy/policy_internal.h" /* policy_default_deny[], for the coverage check */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define NAME GUARD_FROM_NAME
#define LIT GUARD_FROM_LITERAL
#define ALLOW GUARD_ALLOW
#define DENIED GUARD_ADDRESS_DENIED
#define LITERAL GUARD_ADDRESS_LITERAL
#define PORT GUARD_PORT_NOT_ALLOWED

struct row {
	const char *addr;
	uint16_t port;
	enum guard_origin origin;
	enum guard_verdict verdict;
	const char *range; /* expected res.range */
	int rule;	   /* expected res.rule */
};

static const char *const reason_of[] = {
	[GUARD_ALLOW] = "allowed",
	[GUARD_ADDRESS_DENIED] = "address-denied",
	[GUARD_ADDRESS_LITERAL] = "address-literal",
	[GUARD_PORT_NOT_ALLOWED] = "port-not-allowed",
};

static struct policy *load(const char *yaml)
{
	struct policy_error err;
	struct policy *p = NULL;
	int r = policy_load_buffer("t.yaml", yaml, strlen(yaml), &p, &err);

	if (r != 0)
		print_error("policy did not load: %s\n", err.msg);
	assert_int_equal(r, 0);
	assert_non_null(p);
	return p;
}

/* Runs every row against @yaml's policy; reports every wrong row, returns their count. */
static size_t count_bad_rows(const char *what, const char *yaml, const struct row *rows, size_t n)
{
	struct policy *p = load(yaml);
	size_t i, bad = 0;

	for (i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		struct guard_result res;
		struct sl_addr a;
		enum guard_verdict v;

		if (addr_parse(r->addr, &a) != 0) {
			print_error("%s: row %zu: bad test address %s\n", what, i, r->addr);
			bad++;
			continue;
		}
		memset(&res, 0x5a, sizeof(res));
		v = policy_guard(p, &a, r->port, r->origin, &res);
		if (v != r->verdict || res.verdict != r->verdict ||
		    strcmp(res.range, r->range) != 0 || res.rule != r->rule || !res.reason ||
		    strcmp(res.reason, reason_of[r->verdict]) != 0) {
			print_error("%s: %s port %u from %s: got %s range \"%.64s\" rule %d; "
				    "want %s range \"%s\" rule %d\n",
				    what, r->addr, r->port, r->origin == NAME ? "name" : "literal",
				    (unsigned)v < GUARD_VERDICT_COUNT ? reason_of[v] : "?",
				    res.range, res.rule, reason_of[r->verdict], r->range, r->rule);
			bad++;
		}
	}
	policy_unref(p);
	return bad;
}

static void check_rows(const char *what, const char *yaml, const struct row *rows, size_t n)
{
	assert_int_equal(count_bad_rows(what, yaml, rows, n), 0);
}

/* ---- the default deny ranges, at their edges ------------------------------
 * For each range: its first and last address (denied, naming the range) and
 * the address just outside on each side (allowed, unless that neighbour is in
 * another denied range, which is then named). Where the v4 space ends, the
 * neighbour is the next address of the 128-bit space, which is v6. */

#define D(a, r) { a, 443, NAME, DENIED, r, -1 }
#define OK(a) { a, 443, NAME, ALLOW, "", -1 }

static const struct row default_rows[] = {
	/* 0.0.0.0/8 */
	OK("::fffe:ffff:ffff"),
	D("0.0.0.0", "0.0.0.0/8"),
	D("0.255.255.255", "0.0.0.0/8"),
	OK("1.0.0.0"),
	/* 10.0.0.0/8 */
	OK("9.255.255.255"),
	D("10.0.0.0", "10.0.0.0/8"),
	D("10.255.255.255", "10.0.0.0/8"),
	OK("11.0.0.0"),
	/* 100.64.0.0/10 */
	OK("100.63.255.255"),
	D("100.64.0.0", "100.64.0.0/10"),
	D("100.127.255.255", "100.64.0.0/10"),
	OK("100.128.0.0"),
	/* 127.0.0.0/8 */
	OK("126.255.255.255"),
	D("127.0.0.0", "127.0.0.0/8"),
	D("127.255.255.255", "127.0.0.0/8"),
	OK("128.0.0.0"),
	/* 169.254.0.0/16 */
	OK("169.253.255.255"),
	D("169.254.0.0", "169.254.0.0/16"),
	D("169.254.169.254", "169.254.0.0/16"),
	D("169.254.255.255", "169.254.0.0/16"),
	OK("169.255.0.0"),
	/* 172.16.0.0/12 */
	OK("172.15.255.255"),
	D("172.16.0.0", "172.16.0.0/12"),
	D("172.31.255.255", "172.16.0.0/12"),
	OK("172.32.0.0"),
	/* 192.0.0.0/24 */
	OK("191.255.255.255"),
	D("192.0.0.0", "192.0.0.0/24"),
	D("192.0.0.255", "192.0.0.0/24"),
	OK("192.0.1.0"),
	/* 192.0.2.0/24 */
	OK("192.0.1.255"),
	D("192.0.2.0", "192.0.2.0/24"),
	D("192.0.2.255", "192.0.2.0/24"),
	OK("192.0.3.0"),
	/* 192.88.99.0/24 */
	OK("192.88.98.255"),
	D("192.88.99.0", "192.88.99.0/24"),
	D("192.88.99.255", "192.88.99.0/24"),
	OK("192.88.100.0"),
	/* 192.168.0.0/16 */
	OK("192.167.255.255"),
	D("192.168.0.0", "192.168.0.0/16"),
	D("192.168.255.255", "192.168.0.0/16"),
	OK("192.169.0.0"),
	/* 198.18.0.0/15 */
	OK("198.17.255.255"),
	D("198.18.0.0", "198.18.0.0/15"),
	D("198.19.255.255", "198.18.0.0/15"),
	OK("198.20.0.0"),
	/* 198.51.100.0/24 */
	OK("198.51.99.255"),
	D("198.51.100.0", "198.51.100.0/24"),
	D("198.51.100.255", "198.51.100.0/24"),
	OK("198.51.101.0"),
	/* 203.0.113.0/24 */
	OK("203.0.112.255"),
	D("203.0.113.0", "203.0.113.0/24"),
	D("203.0.113.255", "203.0.113.0/24"),
	OK("203.0.114.0"),
	/* 224.0.0.0/4: the next address up is in 240.0.0.0/4 */
	OK("223.255.255.255"),
	D("224.0.0.0", "224.0.0.0/4"),
	D("239.255.255.255", "224.0.0.0/4"),
	/* 240.0.0.0/4: its last address is the more specific broadcast /32 */
	D("240.0.0.0", "240.0.0.0/4"),
	D("255.255.255.254", "240.0.0.0/4"),
	/* 255.255.255.255/32, then the v4 space ends */
	D("255.255.255.255", "255.255.255.255/32"),
	OK("::1:0:0:0"),
	/* ::/128 (nothing below it) and ::1/128 */
	D("::", "::/128"),
	D("::1", "::1/128"),
	/* ::2 is v4-compatible ::0.0.0.2, judged as 0.0.0.2 */
	D("::2", "0.0.0.0/8"),
	/* 100::/64 */
	OK("ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
	D("100::", "100::/64"),
	D("100::ffff:ffff:ffff:ffff", "100::/64"),
	/* 100:0:0:1::/64 (RFC 9780, the dummy prefix), right after it */
	D("100:0:0:1::", "100:0:0:1::/64"),
	D("100:0:0:1:ffff:ffff:ffff:ffff", "100:0:0:1::/64"),
	OK("100:0:0:2::"),
	/* 2001::/23 */
	OK("2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
	D("2001::", "2001::/23"),
	D("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "2001::/23"),
	OK("2001:200::"),
	/* 2001:db8::/32 */
	OK("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff"),
	D("2001:db8::", "2001:db8::/32"),
	D("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db8::/32"),
	OK("2001:db9::"),
	/* 3fff::/20 */
	OK("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
	D("3fff::", "3fff::/20"),
	D("3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "3fff::/20"),
	OK("3fff:1000::"),
	/* 5f00::/16 */
	OK("5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
	D("5f00::", "5f00::/16"),
	D("5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "5f00::/16"),
	OK("5f01::"),
	/* fc00::/7 */
	OK("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
	D("fc00::", "fc00::/7"),
	D("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fc00::/7"),
	OK("fe00::"),
	/* fe80::/10, fec0::/10 and ff00::/8 touch each other */
	OK("fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
	D("fe80::", "fe80::/10"),
	D("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fe80::/10"),
	D("fec0::", "fec0::/10"),
	D("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fec0::/10"),
	D("ff00::", "ff00::/8"),
	D("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ff00::/8"),
	/* Public addresses. */
	OK("8.8.8.8"),
	OK("1.1.1.1"),
	OK("2606:4700::1"),
	OK("2a00:1450:4001:80b::200e"),
};

static void test_default_ranges(void **state)
{
	(void)state;
	check_rows("default", "version: 1\n", default_rows, ARRAY_SIZE(default_rows));
	/* A policy that allows nothing has the same defaults. */
	check_rows("deny-all", "version: 1\negress:\n  allow: []\n  deny_ranges: default\n",
		   default_rows, ARRAY_SIZE(default_rows));
}

static bool have_row(const struct sl_addr *a)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(default_rows); i++) {
		struct sl_addr b;

		if (addr_parse(default_rows[i].addr, &b) == 0 && memcmp(a, &b, sizeof(b)) == 0)
			return true;
	}
	return false;
}

static bool step(struct sl_addr *a, int dir)
{
	int i;

	for (i = 15; i >= 0; i--) {
		if (dir > 0 ? a->b[i]++ != 0xff : a->b[i]-- != 0x00)
			return true;
	}
	return false; /* wrapped: no neighbour */
}

/*
 * The table above must keep up with policy_default_deny[]: every range needs
 * rows for its first and last address and for both neighbours. (A range
 * added to guard.c without rows fails here.)
 */
static void test_default_ranges_covered(void **state)
{
	size_t i, bad = 0;

	(void)state;
	assert_int_equal(policy_default_deny_count, 28);
	for (i = 0; i < policy_default_deny_count; i++) {
		struct sl_addr first, last, below, above;
		unsigned plen, k;

		assert_int_equal(addr_parse_cidr(policy_default_deny[i], &first, &plen), 0);
		last = first;
		for (k = plen; k < 128; k++)
			last.b[k / 8] |= (uint8_t)(0x80 >> (k % 8));
		below = first;
		above = last;
		if (!have_row(&first) || !have_row(&last) ||
		    (step(&below, -1) && !have_row(&below)) ||
		    (step(&above, +1) && !have_row(&above))) {
			print_error("default range %s lacks edge rows\n", policy_default_deny[i]);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

/* ---- addresses embedding a v4 address are judged as that v4 address ---- */

static const struct row embedded_rows[] = {
	D("::ffff:10.0.0.1", "10.0.0.0/8"),
	OK("::ffff:8.8.8.8"),
	D("::ffff:127.0.0.1", "127.0.0.0/8"),
	D("::ffff:169.254.169.254", "169.254.0.0/16"),
	/* NAT64 well-known prefix 64:ff9b::/96 */
	D("64:ff9b::a00:1", "10.0.0.0/8"),
	D("64:ff9b::7f00:1", "127.0.0.0/8"),
	D("64:ff9b::a9fe:a9fe", "169.254.0.0/16"),
	OK("64:ff9b::808:808"),
	/* Local-use NAT64 64:ff9b:1::/48, v4 in the last 32 bits */
	D("64:ff9b:1::a00:1", "10.0.0.0/8"),
	OK("64:ff9b:1::808:808"),
	/* ... any other layout in the /48 is refused outright */
	D("64:ff9b:1:1::808:808", "64:ff9b:1::/48"),
	D("64:ff9b:1:0:1::808:808", "64:ff9b:1::/48"),
	D("64:ff9b:1:0:0:1:808:808", "64:ff9b:1::/48"),
	/* 6to4 2002::/16, v4 in bits 16-47 */
	D("2002:a00:1::", "10.0.0.0/8"),
	D("2002:7f00:1::1", "127.0.0.0/8"),
	D("2002:a9fe:a9fe::", "169.254.0.0/16"),
	OK("2002:808:808::"),
	OK("2002:808:808:1:2:3:4:5"),
	/* IPv4-compatible ::/96 (deprecated, but Linux's sit0 still tunnels
	 * it to the v4 address), other than :: and ::1 */
	D("::169.254.169.254", "169.254.0.0/16"),
	D("::127.0.0.1", "127.0.0.0/8"),
	D("::10.0.0.1", "10.0.0.0/8"),
	D("::0.0.0.2", "0.0.0.0/8"),
	D("::255.255.255.255", "255.255.255.255/32"),
	OK("::8.8.8.8"),
	OK("::1.0.0.0"),
	/* IPv4-translated ::ffff:0:0:0/96 (RFC 2765 SIIT) */
	D("::ffff:0:169.254.169.254", "169.254.0.0/16"),
	D("::ffff:0:127.0.0.1", "127.0.0.0/8"),
	D("::ffff:0:10.0.0.1", "10.0.0.0/8"),
	OK("::ffff:0:8.8.8.8"),
	/* ISATAP interface ids 0000:5efe and 0200:5efe (u bit; the g bit
	 * too) in the low 64 bits, under any prefix */
	D("2606:4700:1::5efe:169.254.169.254", "169.254.0.0/16"),
	D("2606:4700:1::200:5efe:127.0.0.1", "127.0.0.0/8"),
	D("2606:4700:1::100:5efe:10.0.0.1", "10.0.0.0/8"),
	D("2606:4700:1::300:5efe:10.0.0.1", "10.0.0.0/8"),
	D("::5efe:169.254.169.254", "169.254.0.0/16"),
	D("::200:5efe:10.0.0.1", "10.0.0.0/8"),
	OK("2606:4700:1::5efe:8.8.8.8"),
	OK("2606:4700:1::200:5efe:8.8.8.8"),
	OK("::5efe:8.8.8.8"),
	/* ... the prefix as written still counts */
	D("fe80::5efe:8.8.8.8", "fe80::/10"),
	D("fd00::200:5efe:8.8.8.8", "fc00::/7"),
	/* ... near misses are not ISATAP */
	OK("2606:4700:1::400:5efe:a00:1"),
	OK("2606:4700:1::5eff:a00:1"),
	OK("2606:4700:1:0:1:5efe:a00:1"),
	/* 6to4 with an ISATAP id embeds two v4 addresses: both are judged */
	D("2002:808:808::5efe:10.0.0.1", "10.0.0.0/8"),
	D("2002:a00:1::200:5efe:8.8.8.8", "10.0.0.0/8"),
	OK("2002:808:808::5efe:8.8.4.4"),
	/* Teredo 2001::/32 is in the default 2001::/23 (see
	 * test_teredo_refused for a policy that carves that out) */
	D("2001:0:a9fe:a9fe::", "2001::/23"),
	/* Public v6 */
	OK("2606:4700::1"),
};

static void test_embedded(void **state)
{
	(void)state;
	check_rows("embedded", "version: 1\n", embedded_rows, ARRAY_SIZE(embedded_rows));
}

/*
 * Teredo 2001::/32 is refused outright, even where allow_ranges carves the
 * default 2001::/23 out: it embeds two v4 addresses (the server in bits
 * 32-63, the client's NAT mapping as the last 32 bits XOR 0xffffffff) and a
 * port, and reaching it means UDP to whatever those say. Only a cidr rule
 * (precedence 1) opens it.
 */
static void test_teredo_refused(void **state)
{
	static const struct row rows[] = {
		/* server 169.254.169.254, client 8.8.8.8 */
		D("2001:0:a9fe:a9fe::f7f7:f7f7", "2001::/32"),
		/* server 8.8.8.8, client 127.0.0.1 */
		D("2001:0:808:808::80ff:fffe", "2001::/32"),
		/* server 8.8.8.8, client 10.0.0.1 */
		D("2001:0:808:808::f5ff:fffe", "2001::/32"),
		/* server 8.8.8.8, client 8.8.8.8: public, still refused */
		D("2001:0:808:808:8000:ffff:f7f7:f7f7", "2001::/32"),
		D("2001::", "2001::/32"),
		D("2001:0:ffff:ffff:ffff:ffff:ffff:ffff", "2001::/32"),
		/* The rest of the carve-out is open, as the policy says. */
		{ "2001:1::1", 443, NAME, ALLOW, "2001::/23", -1 },
		{ "2001:1ff::1", 443, NAME, ALLOW, "2001::/23", -1 },
		/* A cidr rule still opens Teredo, for its ports. */
		{ "2001:0:808:808::1", 443, NAME, ALLOW, "", 0 },
		{ "2001:0:808:808::1", 443, LIT, ALLOW, "", 0 },
		{ "2001:0:808:808::1", 80, NAME, DENIED, "2001::/32", -1 },
	};

	(void)state;
	check_rows("allow_ranges 2001::/23",
		   "version: 1\n"
		   "egress:\n"
		   "  allow:\n"
		   "    - { cidr: \"2001:0:808:808::1/128\", ports: [443] }\n"
		   "  allow_ranges: [\"2001::/23\"]\n",
		   rows, ARRAY_SIZE(rows));
}

/* ---- literals and cidr rules --------------------------------------------- */

static const char cidr_policy[] = "version: 1\n"
				  "egress:\n"
				  "  allow:\n"
				  "    - host: api.example.com\n"
				  "    - cidr: 8.8.8.0/24\n"
				  "      ports: [53, 853]\n"
				  "    - cidr: 2606:4700::/32\n"
				  "      ports: [443]\n"
				  "    - cidr: 203.0.113.0/24\n"
				  "      ports: [5432]\n";

static const struct row cidr_rows[] = {
	/* A literal no cidr rule holds is refused, public or not. */
	{ "1.1.1.1", 443, LIT, LITERAL, "", -1 },
	{ "10.0.0.1", 443, LIT, LITERAL, "", -1 },
	{ "2606:4701::1", 443, LIT, LITERAL, "", -1 },
	/* The same public address from an allowed name is fine. */
	{ "1.1.1.1", 443, NAME, ALLOW, "", -1 },
	/* A literal in a cidr rule, on its ports */
	{ "8.8.8.8", 53, LIT, ALLOW, "", 1 },
	{ "8.8.8.0", 853, LIT, ALLOW, "", 1 },
	{ "8.8.8.255", 53, LIT, ALLOW, "", 1 },
	{ "::ffff:8.8.8.8", 53, LIT, ALLOW, "", 1 },
	{ "2606:4700::1", 443, LIT, ALLOW, "", 2 },
	{ "2606:4700:ffff::1", 443, LIT, ALLOW, "", 2 },
	/* ... and on another port */
	{ "8.8.8.8", 443, LIT, PORT, "", -1 },
	{ "8.8.8.8", 54, LIT, PORT, "", -1 },
	{ "2606:4700::1", 80, LIT, PORT, "", -1 },
	/* Just outside the rule's prefix */
	{ "8.8.7.255", 53, LIT, LITERAL, "", -1 },
	{ "8.8.9.0", 53, LIT, LITERAL, "", -1 },
	/* From a name, a cidr rule allows on its ports too */
	{ "8.8.8.8", 53, NAME, ALLOW, "", 1 },
	{ "8.8.8.8", 443, NAME, ALLOW, "", -1 },
	/* A cidr rule is a carve-out from the deny ranges, for its ports only */
	{ "203.0.113.7", 5432, NAME, ALLOW, "", 3 },
	{ "203.0.113.7", 5432, LIT, ALLOW, "", 3 },
	{ "203.0.113.7", 443, NAME, DENIED, "203.0.113.0/24", -1 },
	{ "203.0.113.7", 443, LIT, PORT, "", -1 },
	{ "203.0.112.255", 5432, NAME, ALLOW, "", -1 },
	{ "203.0.112.255", 5432, LIT, LITERAL, "", -1 },
};

static void test_cidr_rules(void **state)
{
	(void)state;
	check_rows("cidr rules", cidr_policy, cidr_rows, ARRAY_SIZE(cidr_rows));
}

/* Several cidr rules on one prefix or nested prefixes: any that lists the
 * port allows, and res.rule names it. */
static void test_cidr_rules_chained(void **state)
{
	static const struct row rows[] = {
		{ "8.8.8.8", 53, LIT, ALLOW, "", 0 },  { "8.8.8.8", 853, LIT, ALLOW, "", 1 },
		{ "8.8.8.8", 443, LIT, ALLOW, "", 2 }, { "8.8.4.4", 443, LIT, ALLOW, "", 2 },
		{ "8.8.4.4", 53, LIT, PORT, "", -1 },  { "8.8.8.8", 80, LIT, PORT, "", -1 },
	};

	(void)state;
	check_rows("chained",
		   "version: 1\n"
		   "egress:\n"
		   "  allow:\n"
		   "    - { cidr: 8.8.8.0/24, ports: [53] }\n"
		   "    - { cidr: 8.8.8.0/24, ports: [853] }\n"
		   "    - { cidr: 8.8.0.0/16, ports: [443] }\n",
		   rows, ARRAY_SIZE(rows));
}

/* ---- deny_ranges and allow_ranges ---------------------------------------- */

static void test_allow_ranges_carve_out(void **state)
{
	static const struct row rows[] = {
		D("10.0.255.255", "10.0.0.0/8"),
		{ "10.1.0.0", 443, NAME, ALLOW, "10.1.0.0/16", -1 },
		{ "10.1.2.3", 443, NAME, ALLOW, "10.1.0.0/16", -1 },
		{ "10.1.255.255", 443, NAME, ALLOW, "10.1.0.0/16", -1 },
		D("10.2.0.0", "10.0.0.0/8"),
		D("10.2.0.1", "10.0.0.0/8"),
		/* Embedded forms reach the carve-out the same way. */
		{ "::ffff:10.1.2.3", 443, NAME, ALLOW, "10.1.0.0/16", -1 },
		{ "64:ff9b::a01:203", 443, NAME, ALLOW, "10.1.0.0/16", -1 },
		{ "2002:a01:203::", 443, NAME, ALLOW, "10.1.0.0/16", -1 },
		{ "::10.1.2.3", 443, NAME, ALLOW, "10.1.0.0/16", -1 },
		{ "2606:4700:1::5efe:10.1.2.3", 443, NAME, ALLOW, "10.1.0.0/16", -1 },
		D("::10.2.0.1", "10.0.0.0/8"),
		/* A carve-out does not open literals. */
		{ "10.1.2.3", 443, LIT, LITERAL, "", -1 },
		/* Other defaults stay. */
		D("127.0.0.1", "127.0.0.0/8"),
	};

	(void)state;
	check_rows("allow_ranges 10.1/16", "version: 1\negress:\n  allow_ranges: [10.1.0.0/16]\n",
		   rows, ARRAY_SIZE(rows));
}

static void test_deny_inside_allow(void **state)
{
	/* A deny /32 inside an allow /24 inside the default deny /16. */
	static const struct row rows[] = {
		D("192.168.1.5", "192.168.1.5/32"),
		{ "192.168.1.4", 443, NAME, ALLOW, "192.168.1.0/24", -1 },
		{ "192.168.1.6", 443, NAME, ALLOW, "192.168.1.0/24", -1 },
		D("192.168.2.1", "192.168.0.0/16"),
	};

	(void)state;
	check_rows("deny /32 in allow /24",
		   "version: 1\n"
		   "egress:\n"
		   "  deny_ranges: [192.168.1.5/32]\n"
		   "  allow_ranges: [192.168.1.0/24]\n",
		   rows, ARRAY_SIZE(rows));
}

/*
 * allow_ranges naming exactly a default range: the user's carve-out of the
 * whole 192.168.0.0/16 (an internal mirror) must take effect. "Deny wins a
 * tie" is for a prefix the user lists in both deny_ranges and allow_ranges
 * (test_same_prefix_deny_wins); if it also applied against the defaults,
 * allow_ranges: [192.168.0.0/16] would load and silently do nothing.
 * (BUG: fails while guard.c lets the default deny win this tie.)
 */
static void test_allow_ranges_whole_default(void **state)
{
	static const struct row rows[] = {
		D("192.168.1.5", "192.168.1.5/32"),
		{ "192.168.1.6", 443, NAME, ALLOW, "192.168.0.0/16", -1 },
		{ "192.168.200.1", 443, NAME, ALLOW, "192.168.0.0/16", -1 },
		D("10.0.0.1", "10.0.0.0/8"),
	};
	static const struct row rows_v6[] = {
		{ "fd00::1", 443, NAME, ALLOW, "fc00::/7", -1 },
	};

	size_t bad;

	(void)state;
	bad = count_bad_rows("allow_ranges 192.168/16",
			     "version: 1\n"
			     "egress:\n"
			     "  allow_ranges: [192.168.0.0/16]\n"
			     "  deny_ranges: [192.168.1.5/32]\n",
			     rows, ARRAY_SIZE(rows));
	bad += count_bad_rows("allow_ranges fc00::/7",
			      "version: 1\negress:\n  allow_ranges: [\"fc00::/7\"]\n", rows_v6,
			      ARRAY_SIZE(rows_v6));
	assert_int_equal(bad, 0);
}

static void test_same_prefix_deny_wins(void **state)
{
	static const struct row rows[] = {
		D("8.8.8.8", "8.8.8.0/24"),
		OK("8.8.9.1"),
	};

	(void)state;
	/* Whichever the order in the file. */
	check_rows("deny then allow",
		   "version: 1\n"
		   "egress:\n"
		   "  deny_ranges: [8.8.8.0/24]\n"
		   "  allow_ranges: [8.8.8.0/24]\n",
		   rows, ARRAY_SIZE(rows));
	check_rows("allow then deny",
		   "version: 1\n"
		   "egress:\n"
		   "  allow_ranges: [8.8.8.0/24]\n"
		   "  deny_ranges: [8.8.8.0/24]\n",
		   rows, ARRAY_SIZE(rows));
}

static void test_deny_ranges_add_to_defaults(void **state)
{
	static const struct row rows[] = {
		D("10.0.0.1", "10.0.0.0/8"),
		D("169.254.169.254", "169.254.0.0/16"),
		D("8.8.8.8", "8.8.8.0/24"),
		D("8.8.8.0", "8.8.8.0/24"),
		D("8.8.8.255", "8.8.8.0/24"),
		OK("8.8.7.255"),
		OK("8.8.9.0"),
		OK("8.8.4.4"),
		/* A user v4 range catches the embedded forms too. */
		D("::ffff:8.8.8.8", "8.8.8.0/24"),
		D("64:ff9b::808:808", "8.8.8.0/24"),
		D("2002:808:808::", "8.8.8.0/24"),
		D("::8.8.8.8", "8.8.8.0/24"),
		D("::ffff:0:8.8.8.8", "8.8.8.0/24"),
		D("2606:4701::5efe:8.8.8.8", "8.8.8.0/24"),
		/* v6 user ranges */
		D("2606:4700::1", "2606:4700::/32"),
		OK("2606:4701::1"),
	};

	(void)state;
	check_rows("deny_ranges list",
		   "version: 1\negress:\n  deny_ranges: [8.8.8.0/24, \"2606:4700::/32\"]\n", rows,
		   ARRAY_SIZE(rows));
	check_rows("deny_ranges list with default",
		   "version: 1\n"
		   "egress:\n"
		   "  deny_ranges: [default, 8.8.8.0/24, \"2606:4700::/32\"]\n",
		   rows, ARRAY_SIZE(rows));
}

/*
 * A user deny range over an embedding prefix must deny what it names:
 * "deny_ranges: [2002::/16]" (no 6to4) or "[64:ff9b::/96]" (no NAT64) load
 * without complaint, so the broker must never connect there.
 * (BUG: fails while guard.c looks ranges up only by the embedded v4.)
 */
static void test_deny_ranges_over_embedding_prefix(void **state)
{
	static const struct row rows[] = {
		D("2002:808:808::", "2002::/16"),
		D("64:ff9b::808:808", "64:ff9b::/96"),
		OK("8.8.8.8"),
	};

	(void)state;
	check_rows("deny_ranges over 2002::/16 and 64:ff9b::/96",
		   "version: 1\negress:\n  deny_ranges: [\"2002::/16\", \"64:ff9b::/96\"]\n", rows,
		   ARRAY_SIZE(rows));
}

/* ---- many ranges -----------------------------------------------------------
 * The loader grows its list of ranges as it reads them: each of 300
 * deny_ranges (and 300 allow_ranges inside them) decides, as when they
 * were few, up to the limit of 4096; one more is refused where it is. */

static void test_many_ranges(void **state)
{
	size_t cap = 64 * 1024, o, i;
	char *yaml = malloc(cap);
	struct policy_error err;
	struct policy *p = NULL;

	(void)state;
	assert_non_null(yaml);
	o = (size_t)snprintf(yaml, cap, "version: 1\negress:\n  deny_ranges:\n");
	for (i = 0; i < 300; i++)
		o += (size_t)snprintf(yaml + o, cap - o, "    - 100.%zu.%zu.0/24\n", 100 + i / 200,
				      i % 200);
	o += (size_t)snprintf(yaml + o, cap - o, "  allow_ranges:\n");
	for (i = 0; i < 300; i++)
		o += (size_t)snprintf(yaml + o, cap - o, "    - 100.%zu.%zu.128/25\n",
				      100 + i / 200, i % 200);
	assert_true(o < cap);
	p = load(yaml);
	for (i = 0; i < 300; i++) {
		struct guard_result res;
		char a[32], want[32];
		struct sl_addr in;

		snprintf(a, sizeof(a), "100.%zu.%zu.7", 100 + i / 200, i % 200);
		snprintf(want, sizeof(want), "100.%zu.%zu.0/24", 100 + i / 200, i % 200);
		assert_int_equal(addr_parse(a, &in), 0);
		assert_int_equal(policy_guard(p, &in, 443, NAME, &res), GUARD_ADDRESS_DENIED);
		assert_string_equal(res.range, want);
		snprintf(a, sizeof(a), "100.%zu.%zu.200", 100 + i / 200, i % 200);
		assert_int_equal(addr_parse(a, &in), 0);
		assert_int_equal(policy_guard(p, &in, 443, NAME, &res), GUARD_ALLOW);
	}
	policy_unref(p);

	/* 4096 load; the 4097th is refused at its line. */
	cap = 4200 * 24;
	yaml = realloc(yaml, cap);
	assert_non_null(yaml);
	for (i = 4096; i <= 4097; i++) {
		size_t k;
		int r;

		o = (size_t)snprintf(yaml, cap, "version: 1\negress:\n  deny_ranges:\n");
		for (k = 0; k < i; k++)
			o += (size_t)snprintf(yaml + o, cap - o, "    - 100.%zu.%zu.0/24\n",
					      64 + k / 256, k % 256);
		assert_true(o < cap);
		p = NULL;
		r = policy_load_buffer("t.yaml", yaml, o, &p, &err);
		if (i == 4096) {
			assert_int_equal(r, 0);
			policy_unref(p);
			continue;
		}
		assert_true(r < 0);
		assert_null(p);
		assert_int_equal(err.line, 4 + 4096);
		assert_int_equal(err.col, 7);
		assert_non_null(strstr(err.msg, "more than 4096 ranges"));
	}
	free(yaml);
}

static void test_no_policy(void **state)
{
	struct guard_result res;
	struct sl_addr a;

	(void)state;
	/* Fail closed. */
	assert_int_equal(addr_parse("8.8.8.8", &a), 0);
	assert_int_equal(policy_guard(NULL, &a, 443, GUARD_FROM_NAME, &res), GUARD_ADDRESS_DENIED);
	assert_int_equal(res.verdict, GUARD_ADDRESS_DENIED);
	assert_string_equal(res.reason, "address-denied");
	assert_int_equal(res.rule, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_ranges),
		cmocka_unit_test(test_default_ranges_covered),
		cmocka_unit_test(test_embedded),
		cmocka_unit_test(test_teredo_refused),
		cmocka_unit_test(test_cidr_rules),
		cmocka_unit_test(test_cidr_rules_chained),
		cmocka_unit_test(test_allow_ranges_carve_out),
		cmocka_unit_test(test_deny_inside_allow),
		cmocka_unit_test(test_allow_ranges_whole_default),
		cmocka_unit_test(test_same_prefix_deny_wins),
		cmocka_unit_test(test_deny_ranges_add_to_defaults),
		cmocka_unit_test(test_deny_ranges_over_embedding_prefix),
		cmocka_unit_test(test_many_ranges),
		cmocka_unit_test(test_no_policy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
