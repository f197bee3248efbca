// SPDX-License-Identifier: MIT
/* Unit tests for the pure parts of the probe (probe/): option parsing, address
 * spellings, DNS wire encoding and decoding, HTTP heads, URLs, the hand-built
 * TLS ClientHello, JSON escaping and verdict accumulation. Where the broker
 * has a parser for the same bytes (DNS queries, ClientHellos), the probe's
 * output is read back with it: two implementations must agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/tls/tls.h"
#include "common/addr.h"
#include "common/err.h"
#include "dnsfilter/dnsfilter.h"
#include "probe/probe_internal.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- addresses --------------------------------------------------------------
 */

static void test_ip_parse(void **state)
{
	static const struct {
		const char *in;
		int af; /* 0: rejected */
	} rows[] = {
		{ "1.2.3.4", AF_INET },
		{ "255.255.255.255", AF_INET },
		{ "::1", AF_INET6 },
		{ "[::1]", AF_INET6 },
		{ "::ffff:127.0.0.1", AF_INET6 },
		{ "fd00:ec2::254", AF_INET6 },
		{ "127.1", 0 },
		{ "0177.0.0.1", 0 },
		{ "0x7f.0.0.1", 0 },
		{ "2130706433", 0 },
		{ "01.2.3.4", 0 },
		{ "1.2.3.4.5", 0 },
		{ "", 0 },
		{ "[1.2.3.4]", 0 },
		{ "[::1", 0 },
		{ "example.com", 0 },
	};
	struct probe_ip ip;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		int r = probe_ip_parse(rows[i].in, &ip);

		if (rows[i].af) {
			assert_int_equal(r, 0);
			assert_int_equal(ip.af, rows[i].af);
		} else {
			assert_int_equal(r, -EINVAL);
			assert_int_equal(ip.af, 0);
		}
	}
}

static void test_ip_str(void **state)
{
	struct probe_ip ip;
	char b[64];

	(void)state;
	assert_int_equal(probe_ip_parse("2600:1::10", &ip), 0);
	probe_ip_url(&ip, b, sizeof(b));
	assert_string_equal(b, "[2600:1::10]");
	probe_ip_str(&ip, b, sizeof(b));
	assert_string_equal(b, "2600:1::10");
	assert_int_equal(probe_ip_parse("11.0.2.10", &ip), 0);
	probe_ip_url(&ip, b, sizeof(b));
	assert_string_equal(b, "11.0.2.10");
}

static void test_hostport_parse(void **state)
{
	static const struct {
		const char *in;
		int ret;
		const char *host;
		uint16_t port;
	} rows[] = {
		{ "echo.world.test", 0, "echo.world.test", 443 },
		{ "echo.world.test:80", 0, "echo.world.test", 80 },
		{ "Echo.World.Test.", 0, "Echo.World.Test.", 443 },
		{ "1.2.3.4:8443", 0, "1.2.3.4", 8443 },
		{ "[::1]:8443", 0, "::1", 8443 },
		{ "[2600:1::10]", 0, "2600:1::10", 443 },
		{ "::1", 0, "::1", 443 },
		{ "a.b:0", -EINVAL, NULL, 0 },
		{ "a.b:65536", -EINVAL, NULL, 0 },
		{ "a.b:", -EINVAL, NULL, 0 },
		{ "a.b:8x", -EINVAL, NULL, 0 },
		{ "a..b", -EINVAL, NULL, 0 },
		{ ":80", -EINVAL, NULL, 0 },
		{ "[::1", -EINVAL, NULL, 0 },
		{ "[1.2.3.4]:80", -EINVAL, NULL, 0 },
		{ "bad host", -EINVAL, NULL, 0 },
		{ "", -EINVAL, NULL, 0 },
	};
	struct probe_hostport hp;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		assert_int_equal(probe_hostport_parse(rows[i].in, 443, &hp), rows[i].ret);
		if (rows[i].ret == 0) {
			assert_string_equal(hp.host, rows[i].host);
			assert_int_equal(hp.port, rows[i].port);
		}
	}
}

static void test_timeout_parse(void **state)
{
	static const struct {
		const char *in;
		int ms; /* -1: rejected */
	} rows[] = {
		{ "3", 3000 },	{ "2.5", 2500 }, { "500ms", 500 }, { "3s", 3000 }, { "60", 60000 },
		{ "0.1", 100 }, { "0", -1 },	 { "61", -1 },	   { "99ms", -1 }, { "abc", -1 },
		{ "5min", -1 }, { "-1", -1 },	 { "", -1 },	   { "3 s", -1 },
	};
	int ms;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		ms = 12345;
		assert_int_equal(probe_timeout_parse(rows[i].in, &ms),
				 rows[i].ms < 0 ? -EINVAL : 0);
		if (rows[i].ms >= 0)
			assert_int_equal(ms, rows[i].ms);
	}
}

static void test_spellings(void **state)
{
	char sp[PROBE_N_SPELL][40];
	struct in_addr a, back;

	(void)state;
	inet_pton(AF_INET, "127.0.0.1", &a);
	probe_v4_spellings(&a, sp);
	assert_string_equal(sp[PROBE_SPELL_DEC], "2130706433");
	assert_string_equal(sp[PROBE_SPELL_OCT], "0177.0.0.01");
	assert_string_equal(sp[PROBE_SPELL_HEX], "0x7f.0x0.0x0.0x1");
	assert_string_equal(sp[PROBE_SPELL_HEXWORD], "0x7f000001");
	assert_string_equal(sp[PROBE_SPELL_OCTWORD], "017700000001");
	assert_string_equal(sp[PROBE_SPELL_SHORT], "127.1");
	assert_string_equal(sp[PROBE_SPELL_OCT1], "0177.0.0.1");
	assert_string_equal(sp[PROBE_SPELL_HEX1], "0x7f.0.0.1");
	inet_pton(AF_INET, "169.254.169.254", &a);
	probe_v4_spellings(&a, sp);
	assert_string_equal(sp[PROBE_SPELL_DEC], "2852039166");
	assert_string_equal(sp[PROBE_SPELL_OCT], "0251.0376.0251.0376");
	/* Every spelling means the address to inet_aton(3), as to a lax parser.
	 */
	for (int i = 0; i < PROBE_N_SPELL; i++) {
		assert_int_equal(inet_aton(sp[i], &back), 1);
		assert_int_equal(back.s_addr, a.s_addr);
	}
}

/* ---- options
 * ------------------------------------------------------------------ */

static int parse(struct probe_opts *o, char *err, size_t n, ...)
{
	char *argv[32] = { "probe" };
	struct sl_err e = { 0 };
	int argc = 1, r;
	va_list ap;
	char *a;

	va_start(ap, n);
	while ((a = va_arg(ap, char *)) && argc < 31)
		argv[argc++] = a;
	va_end(ap);
	r = probe_opts_parse(argc, argv, o, &e);
	snprintf(err, n, "%s", sl_err_msg(&e));
	return r;
}

static void test_opts_defaults(void **state)
{
	struct probe_opts *o = calloc(1, sizeof(*o));
	char err[256], b[64];

	(void)state;
	assert_non_null(o);
	assert_int_equal(parse(o, err, sizeof(err), NULL), 0);
	assert_int_equal(o->timeout_ms, 3000);
	assert_int_equal(o->n_resolvers, 2);
	probe_ip_str(&o->public4, b, sizeof(b));
	assert_string_equal(b, "1.1.1.1");
	probe_ip_str(&o->meta4, b, sizeof(b));
	assert_string_equal(b, "169.254.169.254");
	probe_ip_str(&o->meta6, b, sizeof(b));
	assert_string_equal(b, "fd00:ec2::254");
	assert_string_equal(o->metadata_name, "metadata.google.internal");
	assert_string_equal(o->doh_host, "dns.google");
	assert_int_equal(o->n_private4, 4);
	for (size_t i = 0; i < probe_n_checks; i++)
		assert_true(o->selected[i]);
	assert_false(o->json);
	free(o);
}

static void test_opts_values(void **state)
{
	struct probe_opts *o = calloc(1, sizeof(*o));
	char err[256], b[64];
	int a = probe_check_index("dns-txt", 7), t = probe_check_index("tcp-public-literal", 18);

	(void)state;
	assert_non_null(o);
	assert_int_equal(
		parse(o, err, sizeof(err), "--resolver", "11.0.1.53", "--resolver=11.0.3.1",
		      "--timeout", "500ms", "--json", "--expect-allow", "echo.world.test:80",
		      "--expect-allow=other.world.test", "--only", "dns-txt,tcp-public-literal",
		      "--only", "dns-any", "--skip", "dns-any", "--dot-addr", "11.0.1.53",
		      "--gateway-ports", "22,9090", NULL),
		0);
	assert_int_equal(o->n_resolvers, 2); /* given ones replace the defaults */
	probe_ip_str(&o->resolvers[1], b, sizeof(b));
	assert_string_equal(b, "11.0.3.1");
	assert_int_equal(o->timeout_ms, 500);
	assert_true(o->json);
	assert_int_equal(o->n_allow, 2);
	assert_int_equal(o->allow[0].port, 80);
	assert_int_equal(o->allow[1].port, 443);
	assert_int_equal(o->n_dot, 1);
	assert_int_equal(o->dot[0].port, 853);
	assert_int_equal(o->n_gw_ports, 2);
	assert_int_equal(o->gw_ports[1], 9090);
	for (size_t i = 0; i < probe_n_checks; i++)
		assert_int_equal(o->selected[i], (int)i == a || (int)i == t);
	free(o);
}

static void test_opts_errors(void **state)
{
	static const struct {
		const char *a1, *a2;
		const char *msg;
	} rows[] = {
		{ "--bogus", NULL, "unknown option `--bogus`" },
		{ "--canary", NULL, "--canary needs a value" },
		{ "--json=yes", NULL, "--json takes no value" },
		{ "--only", "nope", "unknown check id `nope`" },
		{ "--skip", "dns-txt,", "empty check id" },
		{ "--public-addr", "2600::1", "not an IPv4 address" },
		{ "--public-addr6", "1.2.3.4", "not an IPv6 address" },
		{ "--timeout", "0", "not a duration" },
		{ "--jobs", "0", "not a number from 1 to 32" },
		{ "--udp-port", "70000", "not a port" },
		{ "--redirect-url", "ftp://x/", "not an http://" },
		{ "--expect-allow", "a b", "not HOST[:PORT]" },
		{ "--edge-prefix", "a.b", "not a label prefix" },
		{ "extra", NULL, "unexpected argument `extra`" },
		{ "-x", NULL, "unexpected argument `-x`" },
	};
	struct probe_opts *o = calloc(1, sizeof(*o));
	char err[256];

	(void)state;
	assert_non_null(o);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		err[0] = '\0';
		assert_int_equal(parse(o, err, sizeof(err), rows[i].a1, rows[i].a2, NULL), -EINVAL);
		if (!strstr(err, rows[i].msg))
			fail_msg("%s: error `%s` lacks `%s`", rows[i].a1, err, rows[i].msg);
	}
	free(o);
}

static void test_check_table(void **state)
{
	(void)state;
	assert_true(probe_n_checks >= 30);
	assert_true(probe_n_checks <= PROBE_MAX_CHECKS);
	for (size_t i = 0; i < probe_n_checks; i++) {
		const char *id = probe_checks[i].id;

		assert_non_null(probe_checks[i].fn);
		assert_true(strlen(probe_checks[i].desc) > 10);
		assert_int_equal(probe_check_index(id, strlen(id)), (int)i);
		for (const char *p = id; *p; p++)
			assert_true((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
				    *p == '-');
	}
	assert_int_equal(probe_check_index("dns-tx", 6), -1);
}

/* ---- DNS
 * ------------------------------------------------------------------------ */

static void test_dns_build_read_back(void **state)
{
	static const struct {
		const char *name;
		uint16_t type;
		const char *parsed;
	} rows[] = {
		{ "echo.world.test", PROBE_DNS_A, "echo.world.test" },
		{ "Echo.World.Test.", PROBE_DNS_TXT, "echo.world.test" },
		{ "sluice-probe-0011223344556677.canary.world.test", PROBE_DNS_NULL,
		  "sluice-probe-0011223344556677.canary.world.test" },
		{ "x", PROBE_DNS_ANY, "x" },
	};
	struct dns_query *q = calloc(1, sizeof(*q));
	uint8_t buf[300];

	(void)state;
	assert_non_null(q);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		int n = probe_dns_build(buf, sizeof(buf), (uint16_t)(0x1234 + i), rows[i].name,
					rows[i].type);

		assert_true(n > 12);
		/* The broker's own query parser accepts it, as it accepts
		 * glibc's. */
		assert_int_equal(dns_parse_query(buf, (size_t)n, q), 0);
		assert_int_equal(q->id, 0x1234 + i);
		assert_true(q->rd);
		assert_int_equal(q->qtype, rows[i].type);
		assert_int_equal(q->qclass, 1);
		assert_string_equal(q->name, rows[i].parsed);
		assert_true(q->edns);
		assert_int_equal(q->udp_size, 1232);
	}
	assert_int_equal(probe_dns_build(buf, sizeof(buf), 1, "a..b", 1), -EINVAL);
	assert_int_equal(probe_dns_build(buf, sizeof(buf), 1, "", 1), -EINVAL);
	assert_int_equal(probe_dns_build(buf, sizeof(buf), 1, ".", 1), -EINVAL);
	assert_int_equal(probe_dns_build(buf, 40, 1, "echo.world.test", 1), -ENOSPC);
	{
		char label[70];

		memset(label, 'a', 64);
		strcpy(label + 64, ".x");
		assert_int_equal(probe_dns_build(buf, sizeof(buf), 1, label, 1), -EINVAL);
	}
	free(q);
}

/* Replies written by the broker's DNS filter, read by the probe. */
static void test_dns_parse_filter_replies(void **state)
{
	struct dns_query *q = calloc(1, sizeof(*q));
	struct probe_dns_answer a;
	struct sl_addr addrs[2];
	uint8_t qb[300], rb[600];
	char d[200];
	int n, rn;

	(void)state;
	assert_non_null(q);
	n = probe_dns_build(qb, sizeof(qb), 0xbeef, "echo.world.test", PROBE_DNS_A);
	assert_int_equal(dns_parse_query(qb, (size_t)n, q), 0);
	assert_int_equal(addr_parse("198.18.0.1", &addrs[0]), 0);
	assert_int_equal(addr_parse("198.18.0.2", &addrs[1]), 0);
	rn = dns_build_a(q, addrs, 2, 60, true, rb, sizeof(rb));
	assert_true(rn > 0);
	assert_int_equal(probe_dns_parse(rb, (size_t)rn, 0xbeef, PROBE_DNS_A, &a), 0);
	assert_int_equal(a.rcode, 0);
	assert_int_equal(a.n_addr, 2);
	assert_int_equal(a.n_data, 0);
	probe_dns_describe(&a, d, sizeof(d));
	assert_string_equal(d, "NOERROR, A (198.18.0.1, ...)");
	/* Another id: not an answer to our query. */
	assert_int_equal(probe_dns_parse(rb, (size_t)rn, 0xbeee, PROBE_DNS_A, &a), -EBADMSG);
	/* Cut anywhere: malformed up to the end of the answers (never a
	 * partial answer, never a read past the end); a cut in the OPT record
	 * after them only loses the detail it adds. */
	for (int cut = 0; cut < rn; cut++) {
		int r = probe_dns_parse(rb, (size_t)cut, 0xbeef, PROBE_DNS_A, &a);

		assert_true(r == -EBADMSG || (r == 0 && a.n_addr == 2));
	}
	rn = dns_build_nodata(q, 60, rb, sizeof(rb));
	assert_int_equal(probe_dns_parse(rb, (size_t)rn, 0xbeef, PROBE_DNS_A, &a), 0);
	assert_int_equal(a.ancount, 0);
	probe_dns_describe(&a, d, sizeof(d));
	assert_string_equal(d, "NOERROR, no records");
	rn = dns_build_error(q, 3, 15, "blocked", rb, sizeof(rb));
	assert_int_equal(probe_dns_parse(rb, (size_t)rn, 0xbeef, PROBE_DNS_A, &a), 0);
	assert_int_equal(a.rcode, 3);
	assert_int_equal(a.ede, 15); /* the filter says why: Blocked */
	probe_dns_describe(&a, d, sizeof(d));
	assert_string_equal(d, "NXDOMAIN (EDE 15: blocked)");
	rn = dns_build_error(q, 5, 0, NULL, rb, sizeof(rb));
	assert_int_equal(probe_dns_parse(rb, (size_t)rn, 0xbeef, PROBE_DNS_A, &a), 0);
	assert_int_equal(a.ede, -1);
	probe_dns_describe(&a, d, sizeof(d));
	assert_string_equal(d, "REFUSED");
	/* A query is not an answer. */
	assert_int_equal(probe_dns_parse(qb, (size_t)n, 0xbeef, PROBE_DNS_A, &a), -EBADMSG);
	free(q);
}

/* A hand-written answer with compression and data records: TXT, NULL, A. */
static void test_dns_parse_data(void **state)
{
	static const uint8_t msg[] = {
		0x00,
		0x07,
		0x81,
		0x80,
		0,
		1,
		0,
		3,
		0,
		0,
		0,
		0,
		/* question: echo.world.test ANY IN */
		4,
		'e',
		'c',
		'h',
		'o',
		5,
		'w',
		'o',
		'r',
		'l',
		'd',
		4,
		't',
		'e',
		's',
		't',
		0,
		0,
		255,
		0,
		1,
		/* TXT "hi" (owner: pointer to 12) */
		0xc0,
		12,
		0,
		16,
		0,
		1,
		0,
		0,
		0,
		60,
		0,
		3,
		2,
		'h',
		'i',
		/* NULL 2 bytes */
		0xc0,
		12,
		0,
		10,
		0,
		1,
		0,
		0,
		0,
		60,
		0,
		2,
		0xab,
		0xcd,
		/* A 11.0.2.10 */
		0xc0,
		12,
		0,
		1,
		0,
		1,
		0,
		0,
		0,
		60,
		0,
		4,
		11,
		0,
		2,
		10,
	};
	struct probe_dns_answer a;
	char d[200];

	(void)state;
	assert_int_equal(probe_dns_parse(msg, sizeof(msg), 7, PROBE_DNS_ANY, &a), 0);
	assert_int_equal(a.n_addr, 1);
	assert_int_equal(a.n_data, 2);
	assert_int_equal(a.n_types, 3);
	probe_dns_describe(&a, d, sizeof(d));
	assert_string_equal(d, "NOERROR, TXT, NULL, A (11.0.2.10)");
	assert_int_equal(probe_dns_parse(msg, sizeof(msg), 7, PROBE_DNS_TXT, &a), 0);
	assert_int_equal(a.n_data, 1);
	assert_int_equal(probe_dns_parse(msg, sizeof(msg), 7, PROBE_DNS_A, &a), 0);
	assert_int_equal(a.n_data, 0);
	assert_int_equal(a.n_addr, 1);
	/* A pointer to itself as owner name: skipped, never followed (no loop).
	 */
	{
		uint8_t loop[sizeof(msg)];

		memcpy(loop, msg, sizeof(msg));
		loop[33] = 0xc0;
		loop[34] = 33;
		assert_int_equal(probe_dns_parse(loop, sizeof(loop), 7, PROBE_DNS_ANY, &a), 0);
	}
	/* An rdlength past the end. */
	{
		uint8_t bad[sizeof(msg)];

		memcpy(bad, msg, sizeof(msg));
		bad[sizeof(msg) - 5] = 9;
		assert_int_equal(probe_dns_parse(bad, sizeof(bad), 7, PROBE_DNS_ANY, &a), -EBADMSG);
	}
}

static void test_resolv_conf(void **state)
{
	char path[] = "/tmp/probe-resolv-XXXXXX";
	struct probe_ip ns;
	char b[64];
	int fd = mkstemp(path);
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("# comment\nsearch example\nnameserver "
	      "not-an-address\nnameserver fe80::1%eth0\n"
	      "nameserver 10.0.0.1\n",
	      f);
	fclose(f);
	assert_int_equal(probe_resolv_conf(path, &ns), 0);
	probe_ip_str(&ns, b, sizeof(b));
	assert_string_equal(b, "fe80::1");
	f = fopen(path, "w");
	fputs("options ndots:1\n", f);
	fclose(f);
	assert_int_equal(probe_resolv_conf(path, &ns), -ENOENT);
	unlink(path);
	assert_int_equal(probe_resolv_conf("/nonexistent/resolv.conf", &ns), -ENOENT);
}

/* ---- HTTP, URLs, proxies
 * ------------------------------------------------------------- */

static void test_http_parse(void **state)
{
	static const char refused[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 3\r\n"
				      "x-sluice-reason:  address-literal \r\n\r\nno\n";
	static const char redirect[] = "HTTP/1.0 302 Found\r\nLocation: http://10.0.0.5/\r\n\r\n";
	struct probe_http_resp h;

	(void)state;
	assert_int_equal(probe_http_parse(refused, strlen(refused), &h), 0);
	assert_int_equal(h.status, 403);
	assert_string_equal(h.reason_phrase, "Forbidden");
	assert_string_equal(h.sluice_reason, "address-literal");
	assert_string_equal(h.location, "");
	assert_int_equal(probe_http_parse(redirect, strlen(redirect), &h), 0);
	assert_int_equal(h.status, 302);
	assert_string_equal(h.location, "http://10.0.0.5/");
	assert_string_equal(h.sluice_reason, "");
	/* A header after the end of the head is body, not a header. */
	{
		static const char body[] = "HTTP/1.1 200 OK\r\n\r\nX-Sluice-Reason: x\r\n";

		assert_int_equal(probe_http_parse(body, strlen(body), &h), 0);
		assert_string_equal(h.sluice_reason, "");
	}
	assert_int_equal(probe_http_parse("SSH-2.0-sluice-world\r\n", 22, &h), -EBADMSG);
	assert_int_equal(probe_http_parse("HTTP/1.1 20", 11, &h), -EBADMSG);
	assert_int_equal(probe_http_parse("HTTP/1.1 2000 x\r\n", 17, &h), -EBADMSG);
	assert_int_equal(probe_http_parse("HTTP/1.1 099 x\r\n", 16, &h), -EBADMSG);
	assert_int_equal(probe_http_parse("DECOY\n", 6, &h), -EBADMSG);
}

static void test_url_parse(void **state)
{
	struct probe_url u;

	(void)state;
	assert_int_equal(probe_url_parse("http://echo.world.test/redirect?to=http://10.0.0.5/", &u),
			 0);
	assert_false(u.https);
	assert_string_equal(u.host, "echo.world.test");
	assert_int_equal(u.port, 80);
	assert_string_equal(u.path, "/redirect?to=http://10.0.0.5/");
	assert_false(u.host_is_ip);
	assert_int_equal(probe_url_parse("HTTPS://[2600:1::10]:8443", &u), 0);
	assert_true(u.https && u.host_is_ip);
	assert_int_equal(u.ip.af, AF_INET6);
	assert_int_equal(u.port, 8443);
	assert_string_equal(u.path, "/");
	assert_int_equal(probe_url_parse("http://10.0.0.5?x", &u), 0);
	assert_string_equal(u.path, "/?x");
	assert_int_equal(probe_url_parse("ftp://x/", &u), -EINVAL);
	assert_int_equal(probe_url_parse("http://user@host/", &u), -EINVAL);
	assert_int_equal(probe_url_parse("http://host:0/", &u), -EINVAL);
	assert_int_equal(probe_url_parse("http:///", &u), -EINVAL);
	assert_int_equal(probe_url_parse("http://h/a b", &u), -EINVAL);
}

static void test_proxy_parse(void **state)
{
	static const struct {
		const char *in;
		int ret;
		const char *host;
		uint16_t port;
	} rows[] = {
		{ "http://10.200.0.1:3128", 0, "10.200.0.1", 3128 },
		{ "http://10.200.0.1:3128/", 0, "10.200.0.1", 3128 },
		{ "HTTP://user:pw@proxy.example:8080/", 0, "proxy.example", 8080 },
		{ "10.0.0.1:3128", 0, "10.0.0.1", 3128 },
		{ "http://[fd00::1]:3128", 0, "fd00::1", 3128 },
		{ "http://proxy.example", 0, "proxy.example", 80 },
		{ "https://proxy.example:443", -ENOTSUP, NULL, 0 },
		{ "socks5://127.0.0.1:1080", -ENOTSUP, NULL, 0 },
		{ "http://:3128", -EINVAL, NULL, 0 },
		{ "http://h:99999", -EINVAL, NULL, 0 },
	};
	char host[256];
	uint16_t port;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		assert_int_equal(probe_proxy_parse(rows[i].in, host, sizeof(host), &port),
				 rows[i].ret);
		if (rows[i].ret == 0) {
			assert_string_equal(host, rows[i].host);
			assert_int_equal(port, rows[i].port);
		}
	}
}

/* ---- TLS
 * -----------------------------------------------------------------------------
 */

static void test_client_hello(void **state)
{
	struct tls_hello *h = calloc(1, sizeof(*h));
	uint8_t buf[800];
	size_t n;

	(void)state;
	assert_non_null(h);
	/* The broker's ClientHello parser reads the probe's hand-built one. */
	n = probe_tls_client_hello(buf, sizeof(buf), "Other.World.Test.");
	assert_true(n > 100);
	assert_int_equal(buf[0], 0x16);
	assert_int_equal((size_t)(buf[3] << 8 | buf[4]) + 5, n);
	assert_int_equal(tls_parse_client_hello(buf, n, h), 1);
	assert_true(h->sni_present);
	assert_false(h->sni_invalid);
	assert_string_equal(h->sni, "other.world.test");
	assert_true(h->tls13);
	assert_true(h->has_alpn);
	assert_string_equal(h->alpn[0], "http/1.1");
	assert_int_equal(h->record_bytes, n);
	n = probe_tls_client_hello(buf, sizeof(buf), NULL);
	assert_int_equal(tls_parse_client_hello(buf, n, h), 1);
	assert_false(h->sni_present);
	/* Too small a buffer: nothing. */
	assert_int_equal(probe_tls_client_hello(buf, 100, "x"), 0);
	free(h);
}

static void test_tls_classify(void **state)
{
	static const uint8_t hello[] = { 0x16, 3, 3, 0, 90, 2, 0, 0, 86 };
	static const uint8_t alert[] = { 0x15, 3, 3, 0, 2, 2, 40 };
	static const uint8_t other[] = { 0x16, 3, 3, 0, 4, 11, 0 };

	(void)state;
	assert_int_equal(probe_tls_classify(hello, sizeof(hello)), PT_SERVER_HELLO);
	assert_int_equal(probe_tls_classify(alert, sizeof(alert)), PT_ALERT);
	assert_int_equal(probe_tls_classify(other, sizeof(other)), PT_OTHER_TLS);
	assert_int_equal(probe_tls_classify((const uint8_t *)"HTTP/1.1 403", 12), PT_NOT_TLS);
	assert_int_equal(probe_tls_classify(hello, 0), PT_NOTHING);
	assert_int_equal(probe_tls_classify(hello, 3), PT_NOT_TLS);
}

/* ---- output
 * -----------------------------------------------------------------------------
 */

static void test_sanitize(void **state)
{
	char b[16];

	(void)state;
	probe_sanitize(b, sizeof(b), "SSH-2.0\x01x\r\nrest", 14);
	assert_string_equal(b, "SSH-2.0?x");
	probe_sanitize(b, 4, "abcdef", 6);
	assert_string_equal(b, "abc");
	probe_sanitize(b, sizeof(b), "\xff\x80", 2);
	assert_string_equal(b, "??");
}

static void test_res_add(void **state)
{
	struct probe_result r;

	(void)state;
	memset(&r, 0, sizeof(r));
	probe_res_add(&r, PROBE_SKIP, "no v6");
	assert_int_equal(r.v, PROBE_SKIP);
	probe_res_add(&r, PROBE_PASS, "a refused");
	assert_int_equal(r.v, PROBE_PASS);
	assert_string_equal(r.detail, "a refused"); /* a pass drops the skip */
	probe_res_add(&r, PROBE_PASS, "b refused");
	assert_string_equal(r.detail, "a refused; b refused");
	probe_res_add(&r, PROBE_FAIL, "c leaked");
	assert_int_equal(r.v, PROBE_FAIL);
	assert_string_equal(r.detail, "c leaked"); /* the leak comes first, alone */
	probe_res_add(&r, PROBE_PASS, "d refused");
	probe_res_add(&r, PROBE_SKIP, "e skipped");
	assert_string_equal(r.detail, "c leaked");
	probe_res_add(&r, PROBE_FAIL, "f leaked");
	assert_string_equal(r.detail, "c leaked; f leaked");
	/* Bounded, whatever is added. */
	for (int i = 0; i < 100; i++)
		probe_res_add(&r, PROBE_FAIL, "another leak that is rather long %d", i);
	assert_true(strlen(r.detail) < sizeof(r.detail));
	assert_string_equal(probe_verdict_name(PROBE_PASS), "pass");
	assert_string_equal(probe_verdict_name(PROBE_FAIL), "fail");
	assert_string_equal(probe_verdict_name(PROBE_SKIP), "skip");
}

static void test_name_check(void **state)
{
	char long_label[80];

	(void)state;
	assert_int_equal(probe_name_check("echo.world.test"), 0);
	assert_int_equal(probe_name_check("echo.world.test."), 0);
	assert_int_equal(probe_name_check("_dmarc.x"), 0);
	assert_int_equal(probe_name_check(""), -EINVAL);
	assert_int_equal(probe_name_check("."), -EINVAL);
	assert_int_equal(probe_name_check("a..b"), -EINVAL);
	assert_int_equal(probe_name_check("a b"), -EINVAL);
	assert_int_equal(probe_name_check("a/b"), -EINVAL);
	memset(long_label, 'a', 64);
	long_label[64] = '\0';
	assert_int_equal(probe_name_check(long_label), -EINVAL);
}

/* ---- containment ------------------------------------------------------------
 */

static void test_opts_containment(void **state)
{
	struct probe_opts *o = calloc(1, sizeof(*o));
	char err[256];

	(void)state;
	assert_non_null(o);
	assert_int_equal(parse(o, err, sizeof(err), NULL), 0);
	assert_int_equal(o->n_control_sockets, 0);
	assert_int_equal(o->n_secret_files, 0);
	assert_int_equal(o->broker_pid, 0);
	assert_int_equal(parse(o, err, sizeof(err), "--control-socket", "/run/x/ctl.sock",
			       "--control-socket=/tmp/b", "--secret-file", "/etc/sluice/token",
			       "--secret-file=/root/.aws/credentials", "--broker-pid", "4242",
			       NULL),
			 0);
	assert_int_equal(o->n_control_sockets, 2);
	assert_string_equal(o->control_sockets[0], "/run/x/ctl.sock");
	assert_string_equal(o->control_sockets[1], "/tmp/b");
	assert_int_equal(o->n_secret_files, 2);
	assert_string_equal(o->secret_files[1], "/root/.aws/credentials");
	assert_int_equal(o->broker_pid, 4242);
	free(o);
}

static void test_opts_containment_errors(void **state)
{
	static const struct {
		const char *a1, *a2;
		const char *msg;
	} rows[] = {
		{ "--broker-pid", "0", "not a PID" },
		{ "--broker-pid", "-1", "not a PID" },
		{ "--broker-pid", "12x", "not a PID" },
		{ "--broker-pid", "4194305", "not a PID" },
		{ "--broker-pid", "99999999999999999999", "not a PID" },
		{ "--control-socket", "", "not a socket path" },
		{ "--control-socket",
		  "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "a"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		  "not a socket path" },
		{ "--secret-file", "", "not a path" },
		{ "--secret-file", NULL, "--secret-file needs a value" },
	};
	struct probe_opts *o = calloc(1, sizeof(*o));
	char err[256];

	(void)state;
	assert_non_null(o);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		err[0] = '\0';
		assert_int_equal(parse(o, err, sizeof(err), rows[i].a1, rows[i].a2, NULL), -EINVAL);
		if (!strstr(err, rows[i].msg))
			fail_msg("%s %s: error `%s` lacks `%s`", rows[i].a1,
				 rows[i].a2 ? rows[i].a2 : "", err, rows[i].msg);
	}
	/* A repeatable option is bounded. */
	{
		char *argv[2 * PROBE_LIST_MAX + 3] = { "probe" };
		int argc = 1;

		for (int k = 0; k <= PROBE_LIST_MAX; k++) {
			argv[argc++] = "--secret-file";
			argv[argc++] = "/x";
		}
		struct sl_err e = { 0 };

		assert_int_equal(probe_opts_parse(argc, argv, o, &e), -EINVAL);
		assert_non_null(strstr(sl_err_msg(&e), "at most"));
	}
	free(o);
}

static void test_idmap(void **state)
{
	static const struct {
		const char *text;
		int r, n;
		bool initial;
		int root_out; /* -1: uid 0 is not mapped */
	} rows[] = {
		/* The initial namespace, as the kernel prints it. */
		{ "         0          0 4294967295\n", 0, 1, true, 0 },
		{ "0 0 4294967295", 0, 1, true, 0 },
		/* bwrap run as root: root to root, one ID. */
		{ "         0          0          1\n", 0, 1, false, 0 },
		/* rootless: root is the caller's uid outside. */
		{ "         0       1000          1\n", 0, 1, false, 1000 },
		/* a subordinate range, and root on its own */
		{ "0 100000 65536\n", 0, 1, false, 100000 },
		{ "1000 1000 1\n0 100000 1000\n", 0, 2, false, 100000 },
		/* nearly the identity, but not all of it */
		{ "0 0 4294967294\n", 0, 1, false, 0 },
		{ "0 0 4294967295\n1 1 1\n", 0, 2, false, 0 },
		{ "1 1 4294967294\n", 0, 1, false, -1 },
		/* no mapping written yet */
		{ "", 0, 0, false, -1 },
		{ "0 0\n", -EINVAL, 0, false, -1 },
		{ "0 0 0\n", -EINVAL, 0, false, -1 },
		{ "0 0 4294967296\n", -EINVAL, 0, false, -1 },
		{ "0 0 1 2\n", -EINVAL, 0, false, -1 },
		{ "a b c\n", -EINVAL, 0, false, -1 },
		{ "-1 0 1\n", -EINVAL, 0, false, -1 },
	};
	struct probe_idmap m;
	uint32_t out;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		int r = probe_idmap_parse(rows[i].text, &m);

		if (r != rows[i].r)
			fail_msg("`%s`: %d, expected %d", rows[i].text, r, rows[i].r);
		if (r < 0)
			continue;
		assert_int_equal(m.n, rows[i].n);
		if (probe_idmap_is_initial(&m) != rows[i].initial)
			fail_msg("`%s`: initial is wrong", rows[i].text);
		r = probe_idmap_outside(&m, 0, &out);
		if (rows[i].root_out < 0) {
			assert_int_equal(r, -ENOENT);
		} else {
			assert_int_equal(r, 0);
			assert_int_equal(out, (uint32_t)rows[i].root_out);
		}
	}
	/* An ID inside a range maps with its offset; past it, not at all. */
	assert_int_equal(probe_idmap_parse("0 100000 65536\n", &m), 0);
	assert_int_equal(probe_idmap_outside(&m, 65535, &out), 0);
	assert_int_equal(out, 165535);
	assert_int_equal(probe_idmap_outside(&m, 65536, &out), -ENOENT);
	/* Lines past the bound are counted, not kept: never "initial". */
	{
		char big[64 * (PROBE_IDMAP_MAX + 2)] = "";

		for (int k = 0; k < PROBE_IDMAP_MAX + 1; k++)
			snprintf(big + strlen(big), sizeof(big) - strlen(big), "%d %d 1\n", k, k);
		assert_int_equal(probe_idmap_parse(big, &m), 0);
		assert_int_equal(m.n, PROBE_IDMAP_MAX);
		assert_true(m.more);
		assert_false(probe_idmap_is_initial(&m));
	}
}

static void test_ns_inode(void **state)
{
	unsigned long long ino;

	(void)state;
	assert_int_equal(probe_ns_inode("user:[4026531837]", "user", &ino), 0);
	assert_true(ino == 0xEFFFFFFDULL); /* the initial user namespace */
	assert_int_equal(probe_ns_inode("pid:[4026531836]", "pid", &ino), 0);
	assert_true(ino == 0xEFFFFFFCULL);
	assert_int_equal(probe_ns_inode("pid:[4026531836]", "user", &ino), -EINVAL);
	assert_int_equal(probe_ns_inode("user:[]", "user", &ino), -EINVAL);
	assert_int_equal(probe_ns_inode("user:[12", "user", &ino), -EINVAL);
	assert_int_equal(probe_ns_inode("user:[12]x", "user", &ino), -EINVAL);
	assert_int_equal(probe_ns_inode("user[12]", "user", &ino), -EINVAL);
}

static void test_status_fields(void **state)
{
	static const char status[] = "Name:\tsluice-probe\n"
				     "NSpid:\t4242\t3\n"
				     "CapEff:\t000001fffeffffff\n";
	char b[64];
	int ppid;

	(void)state;
	assert_int_equal(probe_status_field(status, "NSpid", b, sizeof(b)), 0);
	assert_string_equal(b, "4242\t3");
	assert_int_equal(probe_status_field(status, "CapEff", b, sizeof(b)), 0);
	assert_string_equal(b, "000001fffeffffff");
	assert_int_equal(probe_status_field(status, "Cap", b, sizeof(b)), -ENOENT);
	assert_int_equal(probe_status_field(status, "Pid", b, sizeof(b)), -ENOENT);
	assert_int_equal(probe_status_field(status, "Name", b, 5), 0);
	assert_string_equal(b, "slui"); /* cut at the buffer */

	assert_int_equal(probe_status_ppid("12 (sh) S 7 12 12 0", &ppid), 0);
	assert_int_equal(ppid, 7);
	/* A command name with spaces and parentheses. */
	assert_int_equal(probe_status_ppid("12 (a) b (c)) R 99 1 1", &ppid), 0);
	assert_int_equal(ppid, 99);
	assert_int_equal(probe_status_ppid("12 sh S 7", &ppid), -EINVAL);
	assert_int_equal(probe_status_ppid("12 (sh) S", &ppid), -EINVAL);
	assert_int_equal(probe_status_ppid("12 (sh) S x", &ppid), -EINVAL);
}

static void test_cap_names(void **state)
{
	char b[1024];

	(void)state;
	probe_cap_names(0, b, sizeof(b));
	assert_string_equal(b, "");
	probe_cap_names(1ULL << 13, b, sizeof(b));
	assert_string_equal(b, "CAP_NET_RAW");
	/* The furthest-reaching first, then by number. */
	probe_cap_names((1ULL << 0) | (1ULL << 21) | (1ULL << 5), b, sizeof(b));
	assert_string_equal(b, "CAP_SYS_ADMIN, CAP_CHOWN, CAP_KILL");
	probe_cap_names(1ULL << 50, b, sizeof(b));
	assert_string_equal(b, "cap50");
	/* The full set of a root shell: cut, never overrun. */
	probe_cap_names(0x000001fffeffffffULL, b, 40);
	assert_int_equal(strncmp(b, "CAP_SYS_ADMIN, CAP_NET_ADMIN", 28), 0);
	assert_true(strlen(b) < 40);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ip_parse),
		cmocka_unit_test(test_ip_str),
		cmocka_unit_test(test_hostport_parse),
		cmocka_unit_test(test_timeout_parse),
		cmocka_unit_test(test_spellings),
		cmocka_unit_test(test_opts_defaults),
		cmocka_unit_test(test_opts_values),
		cmocka_unit_test(test_opts_errors),
		cmocka_unit_test(test_check_table),
		cmocka_unit_test(test_dns_build_read_back),
		cmocka_unit_test(test_dns_parse_filter_replies),
		cmocka_unit_test(test_dns_parse_data),
		cmocka_unit_test(test_resolv_conf),
		cmocka_unit_test(test_http_parse),
		cmocka_unit_test(test_url_parse),
		cmocka_unit_test(test_proxy_parse),
		cmocka_unit_test(test_client_hello),
		cmocka_unit_test(test_tls_classify),
		cmocka_unit_test(test_sanitize),
		cmocka_unit_test(test_res_add),
		cmocka_unit_test(test_name_check),
		cmocka_unit_test(test_opts_containment),
		cmocka_unit_test(test_opts_containment_errors),
		cmocka_unit_test(test_idmap),
		cmocka_unit_test(test_ns_inode),
		cmocka_unit_test(test_status_fields),
		cmocka_unit_test(test_cap_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
