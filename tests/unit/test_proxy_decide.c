// SPDX-License-Identifier: MIT
/* Unit tests for broker/proxy/decide.c: a policy, an address, a request in;
 * the verdict (decision, reason, status) out. No broker, no sockets: the
 * checks do no I/O, so they run on a policy loaded from text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "broker/creds/creds.h"
#include "broker/http.h"
#include "broker/proxy/proxy_internal.h"
#include "common/addr.h"
#include "common/reason.h"
#include "policy/policy.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char policy_text[] = "version: 1\n"
				  "egress:\n"
				  "  allow:\n"
				  "    - host: api.example.com\n"
				  "    - host: \"*.cdn.example.com\"\n"
				  "      ports: [443]\n"
				  "    - host: git.example.com\n"
				  "      ports: [22]\n"
				  "      raw_tcp: true\n"
				  "    - cidr: 8.8.8.0/24\n"
				  "      ports: [53, 443]\n"
				  "    - cidr: 10.9.0.0/16\n"
				  "      ports: [5432]\n";

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

static int setup(void **state)
{
	*state = load(policy_text);
	return 0;
}

static int teardown(void **state)
{
	policy_unref(*state);
	return 0;
}

/* What a row expects: the decision, the reason and the status. */
struct want {
	enum proxy_decision decision;
	enum sl_reason reason;
	int status;
};

/* It would spread each initializer over four lines: */
// clang-format off
#define ALLOWED { PROXY_ALLOW, SL_REASON_ALLOWED, 0 }
#define DENIED(r) { PROXY_DENY, SL_REASON_##r, 403 }
#define BAD(r) { PROXY_DENY, SL_REASON_##r, 400 }
#define WOULD(r) { PROXY_WOULD_DENY, SL_REASON_##r, 0 }
// clang-format on

/* Compares, and says which row went wrong in the contract's words. */
static int verdict_differs(const char *what, const struct proxy_verdict *v, const struct want *w)
{
	if (v->decision == w->decision && v->reason == w->reason && v->status == w->status)
		return 0;
	print_error("%s: got %s %s %d, want %s %s %d\n", what, proxy_decision_name(v->decision),
		    sl_reason_name(v->reason), v->status, proxy_decision_name(w->decision),
		    sl_reason_name(w->reason), w->status);
	return 1;
}

/*
 * The loop every table below shares: @check runs one row (@rows + i * @size)
 * on @ctx (the policy, for the checks that need one), says what went wrong
 * (verdict_differs()) and returns how many things did. Every row runs before
 * the test fails, so that one run lists all the rows that went wrong.
 */
static void check_rows(const void *ctx, const void *rows, size_t n, size_t size,
		       int (*check)(const void *ctx, const void *row))
{
	size_t i, bad = 0;

	for (i = 0; i < n; i++)
		bad += (size_t)check(ctx, (const char *)rows + i * size);
	assert_int_equal(bad, 0);
}

#define CHECK_ROWS(ctx, rows, check) \
	check_rows(ctx, rows, ARRAY_SIZE(rows), sizeof((rows)[0]), check)

/* ---- names and literals: proxy_check_target() ---------------------------- */

struct target_row {
	const char *host; /* a name, or a literal's text when literal */
	uint16_t port;
	bool literal;
	bool local;
	bool need_raw;
	struct want want;
	bool raw_ok; /* expected, when allowed */
};

static const struct target_row target_rows[] = {
	/* Allowed names, on their ports. */
	{ "api.example.com", 443, false, false, false, ALLOWED, false },
	{ "API.Example.COM.", 80, false, false, false, ALLOWED, false },
	{ "a.b.cdn.example.com", 443, false, false, false, ALLOWED, false },
	{ "git.example.com", 22, false, false, true, ALLOWED, true },
	/* Not in the policy. */
	{ "evil.example.net", 443, false, false, false, DENIED(NOT_ALLOWLISTED), false },
	{ "example.com", 443, false, false, false, DENIED(NOT_ALLOWLISTED), false },
	{ "cdn.example.com", 443, false, false, false, DENIED(NOT_ALLOWLISTED), false },
	/* Allowed, not on this port. */
	{ "api.example.com", 8443, false, false, false, DENIED(PORT_NOT_ALLOWED), false },
	{ "x.cdn.example.com", 80, false, false, false, DENIED(PORT_NOT_ALLOWED), false },
	/* Bytes that are neither HTTP nor TLS need raw_tcp on the rule. */
	{ "api.example.com", 443, false, false, true, DENIED(RAW_TCP_NOT_ALLOWED), false },
	/* Literals: only a cidr rule, on its ports, allows one. */
	{ "8.8.8.8", 53, true, false, false, ALLOWED, false },
	{ "8.8.8.8", 80, true, false, false, DENIED(PORT_NOT_ALLOWED), false },
	{ "8.8.4.4", 53, true, false, false, DENIED(ADDRESS_LITERAL), false },
	{ "93.184.216.34", 443, true, false, false, DENIED(ADDRESS_LITERAL), false },
	{ "2606:4700::1111", 443, true, false, false, DENIED(ADDRESS_LITERAL), false },
	/* A private range carved out by a cidr rule, on its port only. */
	{ "10.9.1.2", 5432, true, false, false, ALLOWED, false },
	{ "10.9.1.2", 443, true, false, false, DENIED(PORT_NOT_ALLOWED), false },
	/* Literals the guard refuses whatever the allow rules say. */
	{ "169.254.169.254", 80, true, false, false, DENIED(ADDRESS_LITERAL), false },
	{ "127.0.0.1", 443, true, false, false, DENIED(ADDRESS_LITERAL), false },
	{ "::ffff:127.0.0.1", 443, true, false, false, DENIED(ADDRESS_LITERAL), false },
	/* Allowed by the policy, but the broker's own address. */
	{ "8.8.8.1", 443, true, true, false, DENIED(BROKER_ADDRESS), false },
	/* Raw TCP to a literal: the cidr rule does not allow it. */
	{ "8.8.8.8", 443, true, false, true, DENIED(RAW_TCP_NOT_ALLOWED), false },
};

/* One row of target_rows or audit_rows, in the sandbox mode @audit says.
 * Beyond the verdict: an allowed target names its rule and whether raw TCP
 * may follow; a would-deny names no rule and allows no raw TCP. */
static int check_target(const struct policy *pol, const struct target_row *r, bool audit)
{
	struct sl_addr a;
	struct proxy_target t = { .host = r->host,
				  .addr = &a,
				  .port = r->port,
				  .literal = r->literal,
				  .local = r->local,
				  .need_raw = r->need_raw,
				  .audit = audit };
	struct proxy_verdict v;
	enum proxy_decision d;
	char what[300];
	int bad;

	memset(&a, 0, sizeof(a));
	if (r->literal)
		assert_int_equal(addr_parse(r->host, &a), 0);
	memset(&v, 0x5a, sizeof(v));
	snprintf(what, sizeof(what), "%s%s:%u%s%s", audit ? "audit " : "", r->host, r->port,
		 r->local ? " (local)" : "", r->need_raw ? " (raw)" : "");
	d = proxy_check_target(pol, &t, &v);
	assert_int_equal(d, v.decision);
	bad = verdict_differs(what, &v, &r->want);
	if ((v.decision == PROXY_ALLOW && (v.rule < 0 || v.raw_ok != r->raw_ok)) ||
	    (v.decision == PROXY_WOULD_DENY && (v.rule != -1 || v.raw_ok))) {
		print_error("%s: rule %d raw_ok %d\n", what, v.rule, v.raw_ok);
		bad++;
	}
	return bad;
}

static int check_target_enforce(const void *pol, const void *row)
{
	return check_target(pol, row, false);
}

static int check_target_audit(const void *pol, const void *row)
{
	return check_target(pol, row, true);
}

static void test_target(void **state)
{
	CHECK_ROWS(*state, target_rows, check_target_enforce);
}

/* ---- audit mode: proxy_check_target() with t->audit -----------------------
 * Only what a host rule would change goes on (would-deny, with the reason
 * it would have got); literals, the guard, raw TCP and bad names stay
 * refused. */

static const struct target_row audit_rows[] = {
	{ "api.example.com", 443, false, false, false, ALLOWED, false },
	{ "git.example.com", 22, false, false, true, ALLOWED, true },
	{ "evil.example.net", 443, false, false, false, WOULD(NOT_ALLOWLISTED), false },
	{ "cdn.example.com", 80, false, false, false, WOULD(NOT_ALLOWLISTED), false },
	{ "api.example.com", 8443, false, false, false, WOULD(PORT_NOT_ALLOWED), false },
	{ "x.cdn.example.com", 80, false, false, false, WOULD(PORT_NOT_ALLOWED), false },
	/* No rule allowed it: raw TCP stays refused, listed name or not. */
	{ "evil.example.net", 22, false, false, true, DENIED(RAW_TCP_NOT_ALLOWED), false },
	{ "api.example.com", 443, false, false, true, DENIED(RAW_TCP_NOT_ALLOWED), false },
	/* A name that is no name. */
	{ "bad_name..example", 443, false, false, false, DENIED(BAD_NAME), false },
	/* Literals and the guard: as in enforce mode. */
	{ "93.184.216.34", 443, true, false, false, DENIED(ADDRESS_LITERAL), false },
	{ "8.8.8.8", 80, true, false, false, DENIED(PORT_NOT_ALLOWED), false },
	{ "169.254.169.254", 80, true, false, false, DENIED(ADDRESS_LITERAL), false },
	{ "127.0.0.1", 443, true, false, false, DENIED(ADDRESS_LITERAL), false },
	{ "10.1.2.3", 80, true, false, false, DENIED(ADDRESS_LITERAL), false },
	{ "8.8.8.1", 443, true, true, false, DENIED(BROKER_ADDRESS), false },
	{ "8.8.8.8", 53, true, false, false, ALLOWED, false },
};

static void test_target_audit(void **state)
{
	CHECK_ROWS(*state, audit_rows, check_target_audit);
}

/* ---- a name's answers: proxy_check_address() -------------------------------
 * What the resolver said for an allowed name: every answer passes the guard
 * (private, metadata, loopback, the v4 address inside a v6 one). */

struct address_row {
	const char *addr;
	uint16_t port;
	bool local;
	struct want want;
};

static const struct address_row address_rows[] = {
	{ "93.184.216.34", 443, false, ALLOWED },
	{ "2606:2800:220:1::1", 443, false, ALLOWED },
	{ "10.0.0.5", 443, false, DENIED(ADDRESS_DENIED) },
	{ "192.168.1.1", 443, false, DENIED(ADDRESS_DENIED) },
	{ "172.16.0.1", 443, false, DENIED(ADDRESS_DENIED) },
	{ "169.254.169.254", 80, false, DENIED(ADDRESS_DENIED) },
	{ "fd00:ec2::254", 80, false, DENIED(ADDRESS_DENIED) },
	{ "127.0.0.1", 443, false, DENIED(ADDRESS_DENIED) },
	{ "::1", 443, false, DENIED(ADDRESS_DENIED) },
	{ "::ffff:10.0.0.5", 443, false, DENIED(ADDRESS_DENIED) },
	{ "::ffff:169.254.169.254", 80, false, DENIED(ADDRESS_DENIED) },
	{ "64:ff9b::7f00:1", 443, false, DENIED(ADDRESS_DENIED) },
	{ "fe80::1", 443, false, DENIED(ADDRESS_DENIED) },
	/* The cidr carve-out holds for answers too, on its port. */
	{ "10.9.0.1", 5432, false, ALLOWED },
	{ "10.9.0.1", 443, false, DENIED(ADDRESS_DENIED) },
	/* Public, but the broker's own. */
	{ "93.184.216.34", 443, true, DENIED(BROKER_ADDRESS) },
};

static int check_address(const void *pol, const void *row)
{
	const struct address_row *r = row;
	struct proxy_verdict v;
	enum proxy_decision d;
	struct sl_addr a;
	char what[200];

	assert_int_equal(addr_parse(r->addr, &a), 0);
	memset(&v, 0x5a, sizeof(v));
	snprintf(what, sizeof(what), "answer %s:%u%s", r->addr, r->port,
		 r->local ? " (local)" : "");
	d = proxy_check_address(pol, &a, r->port, GUARD_FROM_NAME, r->local, &v);
	assert_int_equal(d, v.decision);
	return verdict_differs(what, &v, &r->want);
}

static void test_address(void **state)
{
	CHECK_ROWS(*state, address_rows, check_address);
}

/* ---- request form and Host: proxy_check_form(), proxy_check_host() -------- */

struct request_row {
	enum proxy_mode mode;
	const char *head;
	const char *bound_host; /* what the connection is bound to */
	const char *bound_addr; /* a transparent literal destination, or NULL */
	uint16_t bound_port;
	struct want want;
};

static const struct request_row request_rows[] = {
	/* The proxy port: absolute-form and CONNECT; the target names itself. */
	{ PROXY_MODE_EXPLICIT,
	  "GET http://api.example.com/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", NULL, NULL, 0,
	  ALLOWED },
	{ PROXY_MODE_EXPLICIT,
	  "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n", NULL, NULL,
	  0, ALLOWED },
	{ PROXY_MODE_EXPLICIT, "GET /x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", NULL, NULL, 0,
	  BAD(ORIGIN_FORM_ON_PROXY) },
	/* Inside intercepted TLS: origin-form for the tunnel's host only. */
	{ PROXY_MODE_IN_TLS, "GET /x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "api.example.com",
	  NULL, 443, ALLOWED },
	{ PROXY_MODE_IN_TLS, "GET /x HTTP/1.1\r\nHost: API.example.com.:443\r\n\r\n",
	  "api.example.com", NULL, 443, ALLOWED },
	{ PROXY_MODE_IN_TLS, "GET /x HTTP/1.1\r\nHost: evil.example.net\r\n\r\n", "api.example.com",
	  NULL, 443, DENIED(HOST_MISMATCH) },
	{ PROXY_MODE_IN_TLS, "GET /x HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n",
	  "api.example.com", NULL, 443, DENIED(HOST_MISMATCH) },
	{ PROXY_MODE_IN_TLS,
	  "CONNECT evil.example.net:443 HTTP/1.1\r\nHost: evil.example.net:443\r\n\r\n",
	  "api.example.com", NULL, 443, BAD(CONNECT_IN_TLS) },
	/* Plain HTTP inside a CONNECT tunnel: bound the same way. */
	{ PROXY_MODE_IN_TUNNEL, "GET /x HTTP/1.1\r\nHost: evil.example.net\r\n\r\n",
	  "api.example.com", NULL, 80, DENIED(HOST_MISMATCH) },
	{ PROXY_MODE_IN_TUNNEL,
	  "CONNECT api.example.com:80 HTTP/1.1\r\nHost: api.example.com:80\r\n\r\n",
	  "api.example.com", NULL, 80, BAD(CONNECT_IN_TUNNEL) },
	/* Transparent: the Host names the name behind the synthetic address... */
	{ PROXY_MODE_TRANSPARENT, "GET /x HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
	  "api.example.com", NULL, 80, ALLOWED },
	{ PROXY_MODE_TRANSPARENT, "GET /x HTTP/1.1\r\nHost: evil.example.net\r\n\r\n",
	  "api.example.com", NULL, 80, DENIED(HOST_MISMATCH) },
	{ PROXY_MODE_TRANSPARENT,
	  "CONNECT api.example.com:80 HTTP/1.1\r\nHost: api.example.com:80\r\n\r\n",
	  "api.example.com", NULL, 80, BAD(CONNECT_ON_TRANSPARENT) },
	/* ... or, to a literal destination, that address and nothing else. */
	{ PROXY_MODE_TRANSPARENT, "GET /x HTTP/1.1\r\nHost: 8.8.8.8\r\n\r\n", "8.8.8.8", "8.8.8.8",
	  80, ALLOWED },
	{ PROXY_MODE_TRANSPARENT, "GET /x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "8.8.8.8",
	  "8.8.8.8", 80, DENIED(HOST_MISMATCH) },
	{ PROXY_MODE_TRANSPARENT, "GET /x HTTP/1.1\r\nHost: 8.8.4.4\r\n\r\n", "8.8.8.8", "8.8.8.8",
	  80, DENIED(HOST_MISMATCH) },
};

static int check_request(const void *unused, const void *row)
{
	const struct request_row *r = row;
	struct http_request req;
	struct sl_addr a;
	struct proxy_bound b = { .host = r->bound_host, .port = r->bound_port };
	struct proxy_verdict v;
	char what[300];
	int n = http_parse_request(r->head, strlen(r->head), HTTP_DEFAULT_MAX_HEAD, &req);

	(void)unused;
	assert_true(n > 0);
	if (r->bound_addr) {
		assert_int_equal(addr_parse(r->bound_addr, &a), 0);
		b.addr = &a;
	}
	snprintf(what, sizeof(what), "mode %d: %.*s", r->mode, (int)strcspn(r->head, "\r"),
		 r->head);
	memset(&v, 0x5a, sizeof(v));
	if (proxy_check_form(r->mode, &req, &v) == PROXY_ALLOW)
		proxy_check_host(r->mode, &req, &b, &v);
	return verdict_differs(what, &v, &r->want);
}

static void test_request(void **state)
{
	(void)state;
	CHECK_ROWS(NULL, request_rows, check_request);
}

/* ---- redirects: proxy_check_redirect() ------------------------------------ */

struct redirect_row {
	const char *redirects; /* the policy's mode, or NULL for the default */
	int status;
	const char *location;
	bool tls;
	struct want want;
};

static const struct redirect_row redirect_rows[] = {
	{ NULL, 302, "/elsewhere", false, ALLOWED },
	{ NULL, 301, "https://a.cdn.example.com/x", false, ALLOWED },
	{ NULL, 302, "http://evil.example.net/x", false, DENIED(REDIRECT_OUTSIDE_POLICY) },
	{ NULL, 302, "http://169.254.169.254/latest/meta-data/", false,
	  DENIED(REDIRECT_OUTSIDE_POLICY) },
	{ NULL, 307, "http://127.0.0.1:8080/", false, DENIED(REDIRECT_OUTSIDE_POLICY) },
	{ NULL, 302, "https://api.example.com:8443/", false, DENIED(REDIRECT_OUTSIDE_POLICY) },
	{ NULL, 302, "https://8.8.8.8/", false, ALLOWED },
	/* Only a 3xx is judged. */
	{ NULL, 200, "http://evil.example.net/x", false, ALLOWED },
	{ "same-host", 302, "http://api.example.com/y", false, ALLOWED },
	{ "same-host", 302, "https://api.example.com/y", false, DENIED(REDIRECT_OUTSIDE_POLICY) },
	{ "same-host", 302, "http://a.cdn.example.com/y", false, DENIED(REDIRECT_OUTSIDE_POLICY) },
	{ "any", 302, "http://169.254.169.254/", false, ALLOWED },
};

/* Each row loads its own policy (the redirects mode is the policy's), and
 * runs in both modes: in audit mode what enforce refuses goes on, would-deny. */
static int check_redirect(const void *unused, const void *row)
{
	const struct redirect_row *r = row;
	struct http_slice loc = { r->location, strlen(r->location) };
	char yaml[sizeof(policy_text) + 64];
	struct policy *pol;
	struct proxy_verdict v;
	struct want w = r->want;
	char what[300];
	int bad;

	(void)unused;
	snprintf(yaml, sizeof(yaml), "%s%s%s%s", policy_text, r->redirects ? "  redirects: " : "",
		 r->redirects ? r->redirects : "", r->redirects ? "\n" : "");
	pol = load(yaml);
	snprintf(what, sizeof(what), "%s %d %s", r->redirects ? r->redirects : "default", r->status,
		 r->location);
	memset(&v, 0x5a, sizeof(v));
	proxy_check_redirect(pol, "api.example.com", 80, r->tls, r->status, &loc, false, &v);
	bad = verdict_differs(what, &v, &r->want);

	if (w.decision == PROXY_DENY)
		w = (struct want)WOULD(REDIRECT_OUTSIDE_POLICY);
	strncat(what, " (audit)", sizeof(what) - strlen(what) - 1);
	memset(&v, 0x5a, sizeof(v));
	proxy_check_redirect(pol, "api.example.com", 80, r->tls, r->status, &loc, true, &v);
	bad += verdict_differs(what, &v, &w);
	policy_unref(pol);
	return bad;
}

static void test_redirect(void **state)
{
	(void)state;
	CHECK_ROWS(NULL, redirect_rows, check_redirect);
}

/* ---- placeholders: proxy_check_placeholders(), proxy_check_connect_head() - */

struct placeholder_row {
	enum creds_verdict in;
	struct want want;
};

static int check_placeholders(const void *unused, const void *row)
{
	const struct placeholder_row *r = row;
	struct creds_plan plan;
	struct proxy_verdict v;

	(void)unused;
	memset(&plan, 0, sizeof(plan));
	plan.verdict = r->in;
	memset(&v, 0x5a, sizeof(v));
	proxy_check_placeholders(&plan, false, &v);
	return verdict_differs(creds_verdict_reason(r->in), &v, &r->want);
}

static void test_placeholders(void **state)
{
	static const struct placeholder_row rows[] = {
		{ CREDS_FORWARD, ALLOWED },
		{ CREDS_EXPIRED, DENIED(PLACEHOLDER_EXPIRED) },
		{ CREDS_OUT_OF_SCOPE, DENIED(PLACEHOLDER_OUT_OF_SCOPE) },
		{ CREDS_REVOKED, DENIED(PLACEHOLDER_OUT_OF_SCOPE) },
		{ CREDS_UNKNOWN, DENIED(PLACEHOLDER_OUT_OF_SCOPE) },
		{ CREDS_PLAINTEXT, DENIED(PLACEHOLDER_OUT_OF_SCOPE) },
		{ CREDS_TOO_MANY, DENIED(PLACEHOLDER_OUT_OF_SCOPE) },
	};
	static const char plain[] = "CONNECT api.example.com:443 HTTP/1.1\r\n\r\n";
	/* A placeholder in a CONNECT head would leave inside the tunnel, unseen. */
	static const char carrying[] = "CONNECT api.example.com:443 HTTP/1.1\r\n"
				       "Proxy-Authorization: Bearer "
				       "sluice-ph-0123456789abcdef0123456789abcdef\r\n\r\n";
	static const struct want out_of_scope = DENIED(PLACEHOLDER_OUT_OF_SCOPE);
	struct proxy_verdict v;

	(void)state;
	CHECK_ROWS(NULL, rows, check_placeholders);
	/* A sandbox whose placeholders were lost at the broker's start: an
	 * unknown one is most likely one of those; the rest as before. */
	{
		static const struct want lost = DENIED(PLACEHOLDER_LOST);
		struct creds_plan plan;

		memset(&plan, 0, sizeof(plan));
		plan.verdict = CREDS_UNKNOWN;
		proxy_check_placeholders(&plan, true, &v);
		assert_int_equal(verdict_differs("unknown, placeholders lost", &v, &lost), 0);
		plan.verdict = CREDS_OUT_OF_SCOPE;
		proxy_check_placeholders(&plan, true, &v);
		assert_int_equal(
			verdict_differs("out of scope, placeholders lost", &v, &out_of_scope), 0);
	}
	assert_int_equal(proxy_check_connect_head(plain, strlen(plain), &v), PROXY_ALLOW);
	assert_int_equal(proxy_check_connect_head(carrying, strlen(carrying), &v), PROXY_DENY);
	assert_int_equal(verdict_differs("CONNECT with a placeholder", &v, &out_of_scope), 0);
}

/* ---- audit mode and credentials: proxy_check_audit_credentials() ---------- */

static void test_audit_credentials(void **state)
{
	static const struct want allowed = ALLOWED, port = DENIED(PORT_NOT_ALLOWED),
				 unlisted = DENIED(NOT_ALLOWLISTED);
	struct creds_plan plan;
	struct proxy_verdict v;

	(void)state;
	memset(&plan, 0, sizeof(plan));
	plan.cred = plan.plaintext_withheld = plan.expired_withheld = -1;
	/* No credential in the request: audit mode lets it through. */
	proxy_check_audit_credentials(SL_REASON_PORT_NOT_ALLOWED, &plan, &v);
	assert_int_equal(verdict_differs("would-deny, no credential", &v, &allowed), 0);
	/* One injected, or a placeholder replaced: as in enforce mode. */
	plan.use[0] = 0;
	plan.inject[0] = true;
	plan.nuse = 1;
	proxy_check_audit_credentials(SL_REASON_PORT_NOT_ALLOWED, &plan, &v);
	assert_int_equal(verdict_differs("would-deny, injected", &v, &port), 0);
	plan.inject[0] = false;
	proxy_check_audit_credentials(SL_REASON_NOT_ALLOWLISTED, &plan, &v);
	assert_int_equal(verdict_differs("would-deny, placeholder", &v, &unlisted), 0);
	/* Allowed by the policy: the credential rules alone decide. */
	proxy_check_audit_credentials(SL_REASON_ALLOWED, &plan, &v);
	assert_int_equal(verdict_differs("allowed, placeholder", &v, &allowed), 0);
}

/* ---- the names the audit line and metrics use ----------------------------- */

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(proxy_decision_name(PROXY_ALLOW), "allow");
	assert_string_equal(proxy_decision_name(PROXY_DENY), "deny");
	assert_string_equal(proxy_decision_name(PROXY_ERROR), "error");
	assert_string_equal(proxy_decision_name(PROXY_WOULD_DENY), "would-deny");
	assert_string_equal(proxy_decision_name((enum proxy_decision)99), "error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_target, setup, teardown),
		cmocka_unit_test_setup_teardown(test_target_audit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_address, setup, teardown),
		cmocka_unit_test(test_request),
		cmocka_unit_test(test_redirect),
		cmocka_unit_test(test_placeholders),
		cmocka_unit_test(test_audit_credentials),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
