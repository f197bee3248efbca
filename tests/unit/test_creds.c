// SPDX-License-Identifier: MIT
/* Unit tests for broker/creds/: secrets, placeholders,
 * scopes, planning and rewriting requests, JWTs, OAuth2 helpers. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "broker/creds/creds_internal.h"
#include "broker/http.h"
#include "common/err.h"
#include "policy/policy.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define NOW 1700000000ULL

static char tmpdir[64];
static struct policy *pol;
static int i_github, i_wild, i_plain, i_other_auth;

static const char policy_yaml[] =
	"version: 1\n"
	"egress:\n"
	"  allow:\n"
	"    - host: api.github.com\n"
	"    - host: \"*.example.com\"\n"
	"    - host: example.com\n"
	"    - host: plain.example.net\n"
	"credentials:\n"
	"  - name: github\n"
	"    source: { env: SLUICE_TEST_GH }\n"
	"    inject: { header: Authorization, value: \"Bearer {secret}\" }\n"
	"    scope: { hosts: [api.github.com], methods: [GET, POST], paths: [\"/repos/acme/*\"] }\n"
	"    placeholder: GITHUB_TOKEN\n"
	"    ttl: 15m\n"
	"  - name: wild\n"
	"    source: { env: SLUICE_TEST_WILD }\n"
	"    scope: { hosts: [\"*.example.com\"] }\n"
	"    placeholder: WILD_TOKEN\n"
	"    placeholder_headers: [X-Token, Authorization, Cookie]\n"
	"  - name: plain\n"
	"    source: { env: SLUICE_TEST_PLAIN }\n"
	"    inject: { header: X-Api-Key, value: \"{secret}\" }\n"
	"    scope: { hosts: [plain.example.net] }\n"
	"    plaintext: allow\n"
	"  - name: other-auth\n"
	"    source: { env: SLUICE_TEST_OTHER }\n"
	"    inject: { header: authorization, value: \"token {secret}\" }\n"
	"    scope: { hosts: [api.github.com] }\n";

static struct creds_secret sec_github, sec_wild, sec_plain, sec_other;
static const struct creds_secret *secrets[4];

static int find_cred(const char *name)
{
	size_t i;

	for (i = 0; i < policy_credential_count(pol); i++)
		if (strcmp(policy_credential_get(pol, i)->name, name) == 0)
			return (int)i;
	return -1;
}

static int group_setup(void **state)
{
	struct policy_error err;

	(void)state;
	if (policy_load_buffer("test.yaml", policy_yaml, sizeof(policy_yaml) - 1, &pol, &err) < 0) {
		fprintf(stderr, "policy: %s\n", err.msg);
		return -1;
	}
	i_github = find_cred("github");
	i_wild = find_cred("wild");
	i_plain = find_cred("plain");
	i_other_auth = find_cred("other-auth");
	if (i_github < 0 || i_wild < 0 || i_plain < 0 || i_other_auth < 0)
		return -1;
	/* The wild secret has characters that must be encoded in a URL. */
	if (creds_secret_set(&sec_github, "GH-S3CRET-gh", 12) < 0 ||
	    creds_secret_set(&sec_wild, "W/ld+S3cret=x", 13) < 0 ||
	    creds_secret_set(&sec_plain, "PLAIN-S3CRET", 12) < 0 ||
	    creds_secret_set(&sec_other, "OTHER-S3CRET", 12) < 0)
		return -1;
	secrets[i_github] = &sec_github;
	secrets[i_wild] = &sec_wild;
	secrets[i_plain] = &sec_plain;
	secrets[i_other_auth] = &sec_other;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	creds_secret_free(&sec_github);
	creds_secret_free(&sec_wild);
	creds_secret_free(&sec_plain);
	creds_secret_free(&sec_other);
	policy_unref(pol);
	return 0;
}

static int tmp_setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/sluice-cred.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int tmp_teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *name, const void *data, size_t len, char *path, size_t plen)
{
	FILE *f;

	snprintf(path, plen, "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	const char *p = hay;

	while ((p = strstr(p, needle))) {
		n++;
		p++;
	}
	return n;
}

/* ---- placeholders -------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void test_placeholder_format(void **state)
{
	static char ph[1000][CREDS_PLACEHOLDER_LEN + 1];
	size_t i, j, off;

	(void)state;
	for (i = 0; i < 1000; i++) {
		assert_int_equal(creds_placeholder_new(ph[i]), 0);
		assert_int_equal(strlen(ph[i]), 42);
		assert_memory_equal(ph[i], "sluice-ph-", 10);
		for (j = 10; j < 42; j++)
			assert_non_null(strchr("0123456789abcdef", ph[i][j]));
		assert_ptr_equal(creds_find_placeholder(ph[i], 42, &off), ph[i]);
		assert_int_equal(off, 0);
	}
	qsort(ph, 1000, sizeof(ph[0]), cmp_str);
	for (i = 1; i < 1000; i++)
		assert_string_not_equal(ph[i - 1], ph[i]);
}

static void test_find_placeholder(void **state)
{
	static const char hex[] = "0123456789abcdef0123456789abcdef";
	char buf[256];
	size_t off = 99;

	(void)state;
	snprintf(buf, sizeof(buf), "Bearer sluice-ph-%s", hex);
	assert_non_null(creds_find_placeholder(buf, strlen(buf), &off));
	assert_int_equal(off, 7);
	/* Shorter, upper-case, or cut by the length: not one. */
	snprintf(buf, sizeof(buf), "sluice-ph-%.31s", hex);
	assert_null(creds_find_placeholder(buf, strlen(buf), NULL));
	snprintf(buf, sizeof(buf), "sluice-ph-0123456789ABCDEF0123456789abcdef");
	assert_null(creds_find_placeholder(buf, strlen(buf), NULL));
	snprintf(buf, sizeof(buf), "sluice-ph-%s", hex);
	assert_null(creds_find_placeholder(buf, 41, NULL));
	assert_null(creds_find_placeholder("", 0, NULL));
	/* A false start before the real one. */
	snprintf(buf, sizeof(buf), "sluice-ph-sluice-ph-%s;", hex);
	assert_non_null(creds_find_placeholder(buf, strlen(buf), &off));
	assert_int_equal(off, 10);
	/* Anywhere, also inside a longer hex run (the first 32 digits). */
	snprintf(buf, sizeof(buf), "x=sluice-ph-%sff", hex);
	assert_non_null(creds_find_placeholder(buf, strlen(buf), &off));
	assert_int_equal(off, 2);
	/* Not NUL-terminated: only @len bytes are read. */
	memcpy(buf, "sluice-ph-", 10);
	memcpy(buf + 10, hex, 32);
	assert_non_null(creds_find_placeholder(buf, 42, NULL));
}

/* ---- scopes -------------------------------------------------------------- */

static void test_host_match(void **state)
{
	static const struct {
		const char *pattern, *host;
		bool match;
	} tab[] = {
		{ "api.github.com", "api.github.com", true },
		{ "api.github.com", "API.GitHub.COM", true },
		{ "api.github.com", "api.github.com.", true },
		{ "api.github.com.", "api.github.com", true },
		{ "api.github.com", "xapi.github.com", false },
		{ "api.github.com", "api.github.com.evil", false },
		{ "api.github.com", "github.com", false },
		{ "*.example.com", "a.example.com", true },
		{ "*.example.com", "a.b.EXAMPLE.com", true },
		{ "*.example.com", "example.com", false },
		{ "*.example.com", ".example.com", false },
		{ "*.example.com", "badexample.com", false },
		{ "*.example.com", "a.example.com.evil", false },
		{ "*.example.com", "", false },
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(tab); i++)
		if (creds_host_match(tab[i].pattern, tab[i].host, strlen(tab[i].host)) !=
		    tab[i].match)
			fail_msg("%s vs %s", tab[i].pattern, tab[i].host);
}

static void test_path_match(void **state)
{
	static const struct {
		const char *glob, *path;
		bool match;
	} tab[] = {
		{ "/repos/acme/*", "/repos/acme/x", true },
		{ "/repos/acme/*", "/repos/acme/x/y", true },
		{ "/repos/acme/*", "/repos/acme/", true },
		{ "/repos/acme/*", "/repos/acme", false },
		{ "/repos/acme/*", "/repos/acmex/y", false },
		{ "/repos/acme/*", "/repos/%61cme/x", false },
		{ "/repos/acme/*", "/REPOS/acme/x", false },
		{ "/a/*/c", "/a/b/c", true },
		{ "/a/*/c", "/a/b/x/c", true },
		{ "/a/*/c", "/a/b/c/d", false },
		{ "/a*b*c", "/aXXbYYc", true },
		{ "/a*b*c", "/abbbc", true },
		{ "/a*b*c", "/acb", false },
		{ "/exact", "/exact", true },
		{ "/exact", "/exact/", false },
		{ "*", "/anything/at/all", true },
		{ "/**", "/x", true },
		{ "/x*", "/x", true },
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(tab); i++)
		if (creds_path_match(tab[i].glob, tab[i].path, strlen(tab[i].path)) != tab[i].match)
			fail_msg("%s vs %s", tab[i].glob, tab[i].path);
}

static const struct http_request *parse(const char *head)
{
	static struct http_request req;
	int r = http_parse_request(head, strlen(head), HTTP_DEFAULT_MAX_HEAD, &req);

	if (r <= 0)
		fail_msg("parse %d %s: %s", r, req.error ? req.error : "", head);
	return &req;
}

static void test_in_scope(void **state)
{
	const struct policy_credential *gh, *wild;
	const struct http_request *req;

	(void)state;
	gh = policy_credential_get(pol, (size_t)i_github);
	wild = policy_credential_get(pol, (size_t)i_wild);

	req = parse("GET /repos/acme/x/y?page=2 HTTP/1.1\r\nHost: api.github.com\r\n\r\n");
	assert_true(creds_in_scope(gh, NULL, NULL, req));
	assert_true(creds_in_scope(gh, "API.GITHUB.COM.", NULL, req));
	assert_false(creds_in_scope(gh, "github.com", NULL, req));
	assert_false(creds_in_scope(gh, NULL, "DELETE", req));
	assert_true(creds_in_scope(gh, NULL, "POST", req));
	/* Methods are case-sensitive. */
	assert_false(creds_in_scope(gh, NULL, "get", req));

	req = parse("DELETE /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\n\r\n");
	assert_false(creds_in_scope(gh, NULL, NULL, req));
	req = parse("GET /repos/other/x HTTP/1.1\r\nHost: api.github.com\r\n\r\n");
	assert_false(creds_in_scope(gh, NULL, NULL, req));
	/* The query is not part of the path. */
	req = parse("GET /repos/other?x=/repos/acme/ HTTP/1.1\r\nHost: api.github.com\r\n\r\n");
	assert_false(creds_in_scope(gh, NULL, NULL, req));

	/* Paths a server may read as another path never satisfy a path scope. */
	req = parse("GET /repos/acme/../other HTTP/1.1\r\nHost: api.github.com\r\n\r\n");
	assert_true(req->path_ambiguous);
	assert_false(creds_in_scope(gh, NULL, NULL, req));
	req = parse("GET /repos/acme/%2e%2e/other HTTP/1.1\r\nHost: api.github.com\r\n\r\n");
	assert_false(creds_in_scope(gh, NULL, NULL, req));
	req = parse("GET /repos/acme/x%2F..%2Fy HTTP/1.1\r\nHost: api.github.com\r\n\r\n");
	assert_false(creds_in_scope(gh, NULL, NULL, req));
	req = parse("GET /repos/acme/./x HTTP/1.1\r\nHost: api.github.com\r\n\r\n");
	assert_false(creds_in_scope(gh, NULL, NULL, req));
	/* ... but a credential without a path scope does not care. */
	req = parse("GET /x/../y HTTP/1.1\r\nHost: a.example.com\r\n\r\n");
	assert_true(creds_in_scope(wild, NULL, NULL, req));

	/* Wildcard: subdomains, never the apex. */
	req = parse("PUT /anything HTTP/1.1\r\nHost: deep.sub.example.com\r\n\r\n");
	assert_true(creds_in_scope(wild, NULL, NULL, req));
	req = parse("PUT /anything HTTP/1.1\r\nHost: example.com\r\n\r\n");
	assert_false(creds_in_scope(wild, NULL, NULL, req));
	/* Absolute form: the URI's host. */
	req = parse("GET http://a.example.com/x HTTP/1.1\r\nHost: a.example.com\r\n\r\n");
	assert_true(creds_in_scope(wild, NULL, NULL, req));

	/* Without a request: only when no path scope. */
	assert_true(creds_in_scope(wild, "a.example.com", "GET", NULL));
	assert_false(creds_in_scope(gh, "api.github.com", "GET", NULL));
	assert_false(creds_in_scope(NULL, "a.example.com", "GET", NULL));
}

/*
 * Paths a server could read as another path than the glob saw: never in a
 * path scope (github's: "/repos/acme/" then '*').  Each bypass form once
 * matched, since the glob's '*' covers it; the first rows are requests
 * that must still match.
 */
static void test_path_scope_bypass(void **state)
{
	static const struct {
		const char *path;
		bool in_scope;
	} tab[] = {
		{ "/repos/acme/x", true },
		{ "/repos/acme/x/y.json", true },
		{ "/repos/acme/", true },
		{ "/repos/acme/a.b/..c/x...y", true },
		{ "/repos/acme/name%20with%20spaces", true },
		{ "/repos/acme/a%3Ab%40c%2B", true },
		{ "/repos/acme/x?q=..;/%2e%00", true }, /* the query is not the path */
		/* path parameters: "..;" is ".." to a server that strips them */
		{ "/repos/acme/..;/other", false },
		{ "/repos/acme/x;v=1", false },
		{ "/repos/acme/x;/y", false },
		{ "/repos/acme/;/../other", false },
		/* dot segments, literal or encoded in any case, single or double */
		{ "/repos/acme/../other", false },
		{ "/repos/acme/./x", false },
		{ "/repos/acme/x/..", false },
		{ "/repos/acme/%2e%2e/other", false },
		{ "/repos/acme/%2E%2e/other", false },
		{ "/repos/acme/.%2E/other", false },
		{ "/repos/acme/%252e%252e/other", false },
		{ "/repos/acme/%252E%252E/other", false },
		{ "/repos/acme/%25252e%25252e/other", false },
		{ "/repos/acme/x%2ejson", false },
		{ "/repos/acme/.../other", false },
		{ "/repos/acme/..%20/other", false },
		{ "/repos/acme/%20/other", false },
		/* overlong UTF-8 dots and slashes, and other non-ASCII */
		{ "/repos/acme/%c0%ae%c0%ae/other", false },
		{ "/repos/acme/%C0%AE%C0%AE/other", false },
		{ "/repos/acme/%e0%80%ae%e0%80%ae/other", false },
		{ "/repos/acme/..%c0%afother", false },
		{ "/repos/acme/%ef%bc%8e%ef%bc%8e/other", false },
		/* dots followed by a NUL, TAB or another control byte */
		{ "/repos/acme/..%00/other", false },
		{ "/repos/acme/..%09/other", false },
		{ "/repos/acme/.%0a./other", false },
		{ "/repos/acme/x%0d%0a", false },
		{ "/repos/acme/x%7f", false },
		/* separators: backslash, encoded slash or backslash */
		{ "/repos/acme/..\\other", false },
		{ "/repos/acme\\..\\..\\other", false },
		{ "/repos/acme/..%2fother", false },
		{ "/repos/acme/..%2Fother", false },
		{ "/repos/acme/..%5cother", false },
		{ "/repos/acme/%5C..%5Cother", false },
		/* empty segments, encoded '?' or '#' that cut the path */
		{ "/repos/acme//x", false },
		{ "/repos/acme/x//", false },
		{ "/repos/acme/x%3f/../y", false },
		{ "/repos/acme/x%3F", false },
		{ "/repos/acme/x%23", false },
		/* a stray '%' */
		{ "/repos/acme/x%", false },
	};
	const struct policy_credential *gh, *wild;
	char head[512];
	size_t i, bad = 0;

	(void)state;
	gh = policy_credential_get(pol, (size_t)i_github);
	wild = policy_credential_get(pol, (size_t)i_wild);
	for (i = 0; i < ARRAY_SIZE(tab); i++) {
		struct http_request req;
		int n = snprintf(head, sizeof(head),
				 "GET %s HTTP/1.1\r\nHost: api.github.com\r\n\r\n", tab[i].path);
		int r = http_parse_request(head, (size_t)n, HTTP_DEFAULT_MAX_HEAD, &req);

		/* One the parser refuses never reaches a scope: as good. */
		if (r <= 0 ? tab[i].in_scope
			   : creds_in_scope(gh, NULL, NULL, &req) != tab[i].in_scope) {
			print_error("%s: %s, want %s\n", tab[i].path,
				    r <= 0	      ? "parser refused it"
				    : tab[i].in_scope ? "out of scope"
						      : "in scope",
				    tab[i].in_scope ? "in scope" : "out of scope");
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	/* A credential without a path scope is not concerned. */
	assert_true(
		creds_in_scope(wild, "a.example.com", NULL,
			       parse("GET /a/..;/b%00 HTTP/1.1\r\nHost: a.example.com\r\n\r\n")));
}

static void test_build_injection(void **state)
{
	struct policy_credential c = { .name = (char *)"t",
				       .inject_header = (char *)"Authorization",
				       .inject_value = (char *)"Bearer {secret}" };
	struct creds_secret s;
	char out[64];
	size_t i;

	(void)state;
	assert_int_equal(creds_secret_set(&s, "abc123", 6), 0);
	assert_int_equal(creds_build_injection(&c, &s, out, sizeof(out)), 13);
	assert_string_equal(out, "Bearer abc123");
	c.inject_value = (char *)"{secret}:{secret}!";
	assert_int_equal(creds_build_injection(&c, &s, out, sizeof(out)), 14);
	assert_string_equal(out, "abc123:abc123!");
	c.inject_value = (char *)"{secret}";
	assert_int_equal(creds_build_injection(&c, &s, out, 7), 6);
	/* Too small: refused and wiped, no partial secret left. */
	memset(out, 'x', sizeof(out));
	assert_int_equal(creds_build_injection(&c, &s, out, 6), -ENOSPC);
	for (i = 0; i < 6; i++)
		assert_int_equal(out[i], 0);
	c.inject_header = NULL;
	assert_int_equal(creds_build_injection(&c, &s, out, sizeof(out)), -EINVAL);
	creds_secret_free(&s);
	assert_null(s.buf);
	assert_int_equal(s.len, 0);
}

/* ---- secrets ------------------------------------------------------------- */

static void test_secret_load(void **state)
{
	struct policy_credential c = { .name = (char *)"t", .source_kind = POLICY_SOURCE_FILE };
	struct creds_secret s = { 0 };
	struct sl_err err = { 0 };
	char p[256], p2[256];
	static char big[CREDS_SECRET_MAX + 2];

	(void)state;
	write_file("ok", "hunter2\n", 8, p, sizeof(p));
	c.source = p;
	assert_int_equal(creds_secret_load(&c, &s, &err), 0);
	assert_int_equal(s.len, 7);
	assert_memory_equal(s.buf, "hunter2", 7);
	creds_secret_free(&s);

	/* Mode does not matter: the file is the operator's. */
	assert_int_equal(chmod(p, 0644), 0);
	assert_int_equal(creds_secret_load(&c, &s, &err), 0);
	creds_secret_free(&s);

	write_file("crlf", "hunter2\r\n", 9, p, sizeof(p));
	assert_int_equal(creds_secret_load(&c, &s, &err), 0);
	assert_int_equal(s.len, 7);
	creds_secret_free(&s);
	write_file("nonl", "tab\tinside", 10, p, sizeof(p));
	assert_int_equal(creds_secret_load(&c, &s, &err), 0);
	assert_int_equal(s.len, 10);
	creds_secret_free(&s);

	/* Bytes that would split or cut a header; the message never shows
	 * the secret. */
	{
		static const struct {
			const char *data;
			size_t len;
		} bad[] = {
			{ "hunter2\nX-Evil: 1\n", 18 },
			{ "hunter2\rX", 9 },
			{ "hunter2\0X", 9 },
			{ "hunter2\n\n", 9 },
			{ "\n", 1 },
			{ "", 0 },
			{ "del\x7f", 4 },
		};
		size_t i;

		for (i = 0; i < ARRAY_SIZE(bad); i++) {
			write_file("bad", bad[i].data, bad[i].len, p, sizeof(p));
			sl_err_clear(&err);
			assert_int_equal(creds_secret_load(&c, &s, &err), -EINVAL);
			assert_null(s.buf);
			assert_non_null(strstr(sl_err_msg(&err), p));
			assert_null(strstr(sl_err_msg(&err), "hunter2"));
		}
	}

	/* A symlink is refused (O_NOFOLLOW), even to a good file. */
	write_file("target", "hunter2", 7, p2, sizeof(p2));
	snprintf(p, sizeof(p), "%s/link", tmpdir);
	assert_int_equal(symlink(p2, p), 0);
	sl_err_clear(&err);
	assert_int_equal(creds_secret_load(&c, &s, &err), -ELOOP);
	assert_non_null(strstr(sl_err_msg(&err), "symlink"));
	assert_int_equal(sl_err_errno(&err), ELOOP);

	/* Too large, missing, a directory, relative. */
	memset(big, 'a', sizeof(big));
	write_file("big", big, CREDS_SECRET_MAX + 1, p, sizeof(p));
	assert_int_equal(creds_secret_load(&c, &s, &err), -EFBIG);
	assert_int_equal(sl_err_errno(&err), 0); /* a refusal: no call failed */
	write_file("max", big, CREDS_SECRET_MAX, p, sizeof(p));
	assert_int_equal(creds_secret_load(&c, &s, &err), 0);
	assert_int_equal(s.len, CREDS_SECRET_MAX);
	creds_secret_free(&s);
	snprintf(p, sizeof(p), "%s/missing", tmpdir);
	assert_int_equal(creds_secret_load(&c, &s, &err), -ENOENT);
	{
		char want[320];

		snprintf(want, sizeof(want), "secret file `%s`: No such file or directory", p);
		assert_string_equal(sl_err_msg(&err), want);
	}
	assert_int_equal(sl_err_errno(&err), ENOENT);
	c.source = tmpdir;
	assert_int_equal(creds_secret_load(&c, &s, &err), -EINVAL);
	assert_int_equal(sl_err_errno(&err), 0);
	c.source = (char *)"relative/path";
	assert_int_equal(creds_secret_load(&c, &s, &err), -EINVAL);
	assert_string_equal(sl_err_msg(&err),
			    "secret file `relative/path` is not an absolute path");
	assert_int_equal(sl_err_errno(&err), 0);

	/* Environment. */
	c.source_kind = POLICY_SOURCE_ENV;
	c.source = (char *)"SLUICE_TEST_SECRET";
	unsetenv("SLUICE_TEST_SECRET");
	assert_int_equal(creds_secret_load(&c, &s, &err), -ENOENT);
	assert_string_equal(sl_err_msg(&err),
			    "credential `t`: environment variable `SLUICE_TEST_SECRET` is not set");
	assert_int_equal(sl_err_errno(&err), 0); /* -ENOENT is no failed call's here */
	setenv("SLUICE_TEST_SECRET", "env-hunter2", 1);
	assert_int_equal(creds_secret_load(&c, &s, &err), 0);
	assert_int_equal(s.len, 11);
	assert_memory_equal(s.buf, "env-hunter2", 11);
	creds_secret_free(&s);
	setenv("SLUICE_TEST_SECRET", "env-hunter2\r\nX-Evil: 1", 1);
	sl_err_clear(&err);
	assert_int_equal(creds_secret_load(&c, &s, &err), -EINVAL);
	assert_null(strstr(sl_err_msg(&err), "hunter2"));
	setenv("SLUICE_TEST_SECRET", "", 1);
	assert_int_equal(creds_secret_load(&c, &s, &err), -EINVAL);
	unsetenv("SLUICE_TEST_SECRET");

	/* creds_secret_set() has the same checks. */
	assert_int_equal(creds_secret_set(&s, "a\nb", 3), -EINVAL);
	assert_int_equal(creds_secret_set(&s, "", 0), -EINVAL);
	creds_secret_free(NULL);
}

/* ---- the table ----------------------------------------------------------- */

static int count_cb(const char *ph, const char *name, uint64_t exp, bool revoked, void *arg)
{
	size_t *n = arg;

	(void)exp;
	(void)revoked;
	assert_int_equal(strlen(ph), CREDS_PLACEHOLDER_LEN);
	assert_non_null(name);
	(*n)++;
	return 0;
}

static void test_table(void **state)
{
	struct creds_table *t = creds_table_new();
	char a[CREDS_PLACEHOLDER_LEN + 1], b[CREDS_PLACEHOLDER_LEN + 1];
	char c[CREDS_PLACEHOLDER_LEN + 1], name[CREDS_NAME_MAX + 1];
	char unknown[CREDS_PLACEHOLDER_LEN + 1];
	size_t n = 0, i;
	int r;

	(void)state;
	assert_non_null(t);
	assert_int_equal(creds_table_issue(t, "github", NOW, 900, a), 0);
	assert_int_equal(creds_table_issue(t, "wild", NOW, 0, b), 0);
	assert_int_equal(creds_table_issue(t, "github", NOW, 60, c), 0);
	assert_string_not_equal(a, b);

	assert_int_equal(creds_table_lookup(t, a, NOW, name), CREDS_PH_VALID);
	assert_string_equal(name, "github");
	assert_int_equal(creds_table_lookup(t, b, NOW + 1000000, name), CREDS_PH_VALID);
	assert_string_equal(name, "wild");
	/* Expiry at exactly now + ttl. */
	assert_int_equal(creds_table_lookup(t, a, NOW + 899, NULL), CREDS_PH_VALID);
	assert_int_equal(creds_table_lookup(t, a, NOW + 900, NULL), CREDS_PH_EXPIRED);

	assert_int_equal(creds_placeholder_new(unknown), 0);
	assert_int_equal(creds_table_lookup(t, unknown, NOW, NULL), CREDS_PH_UNKNOWN);
	assert_int_equal(creds_table_lookup(t, "not a placeholder at all, no no no no", NOW, NULL),
			 CREDS_PH_UNKNOWN);
	/* One character off is unknown. */
	memcpy(unknown, a, sizeof(a));
	unknown[41] = unknown[41] == '0' ? '1' : '0';
	assert_int_equal(creds_table_lookup(t, unknown, NOW, NULL), CREDS_PH_UNKNOWN);

	/* Revoke one credential's, then all. */
	assert_int_equal(creds_table_revoke(t, "github"), 2);
	assert_int_equal(creds_table_lookup(t, a, NOW, NULL), CREDS_PH_REVOKED);
	assert_int_equal(creds_table_lookup(t, c, NOW, NULL), CREDS_PH_REVOKED);
	assert_int_equal(creds_table_lookup(t, b, NOW, NULL), CREDS_PH_VALID);
	assert_int_equal(creds_table_revoke(t, NULL), 1);
	assert_int_equal(creds_table_lookup(t, b, NOW, NULL), CREDS_PH_REVOKED);

	/* Restore (broker restart): same placeholder, same meaning. */
	assert_int_equal(creds_table_insert(t, unknown, "wild", NOW + 10), 0);
	assert_int_equal(creds_table_insert(t, unknown, "wild", NOW + 10), -EEXIST);
	assert_int_equal(creds_table_lookup(t, unknown, NOW, name), CREDS_PH_VALID);
	assert_string_equal(name, "wild");
	assert_int_equal(creds_table_insert(t, "sluice-ph-XYZ", "wild", 0), -EINVAL);
	assert_int_equal(creds_table_issue(t, "", NOW, 0, a), -EINVAL);

	assert_int_equal(creds_table_foreach(t, count_cb, &n), 0);
	assert_int_equal(n, 4);
	creds_table_free(t);

	/* Full of live entries: refused; dead ones are reused. */
	t = creds_table_new();
	for (i = 0; i < CREDS_TABLE_MAX; i++)
		assert_int_equal(creds_table_issue(t, "wild", NOW, i < 10 ? 5 : 0, a), 0);
	assert_int_equal(creds_table_issue(t, "wild", NOW, 0, a), -ENOSPC);
	r = creds_table_issue(t, "wild", NOW + 5, 0, a);
	assert_int_equal(r, 0);
	assert_int_equal(creds_table_lookup(t, a, NOW + 5, NULL), CREDS_PH_VALID);
	creds_table_free(t);
	creds_table_free(NULL);
}

/* ---- planning and rewriting ---------------------------------------------- */

struct run_result {
	struct creds_plan plan;
	int n; /* head length, or -EACCES for a refused plan */
	char out[16384];
};

/*
 * Plans and, when forwarded, rewrites @head for @host; the written head is
 * parsed again (it must be a head we accept) and kept NUL-terminated.
 */
static void run(struct creds_table *t, const char *head, const char *host, unsigned flags,
		struct run_result *res)
{
	static struct http_request again;
	static char buf[16384];
	struct creds_rewrite rw;
	const struct http_request *req = parse(head);
	int r;

	memset(res->out, 0, sizeof(res->out));
	assert_int_equal(creds_plan_request(t, pol, host, req, NOW, flags, &res->plan), 0);
	if (res->plan.verdict != CREDS_FORWARD) {
		assert_int_equal(res->plan.nuse, 0);
		res->n = -EACCES;
		return;
	}
	r = creds_rewrite_request(&res->plan, pol, secrets, req, buf, sizeof(buf), &rw);
	assert_int_equal(r, 0);
	res->n = creds_write_request_head(&rw, req, res->out, sizeof(res->out) - 1);
	creds_rewrite_wipe(&rw);
	assert_true(res->n > 0);
	res->out[res->n] = '\0';
	assert_int_equal(http_parse_request(res->out, (size_t)res->n, (size_t)res->n, &again),
			 res->n);
}

static bool uses(const struct creds_plan *plan, int cred, bool inject)
{
	size_t i;

	for (i = 0; i < plan->nuse; i++)
		if (plan->use[i] == cred)
			return plan->inject[i] == inject;
	return false;
}

static struct run_result res;

/* Gives the sandbox of @t every credential of the policy at @now, as the
 * broker does when it registers one (creds_sandbox_sync()). */
static void grant_all(struct creds_table *t, uint64_t now)
{
	size_t i;

	for (i = 0; i < policy_credential_count(pol); i++) {
		const struct policy_credential *c = policy_credential_get(pol, i);

		assert_int_equal(creds_table_grant(t, c->name, c->ttl_sec ? now + c->ttl_sec : 0),
				 0);
	}
}

static void test_inject_replaces_client_header(void **state)
{
	struct creds_table *t = creds_table_new();

	(void)state;
	grant_all(t, NOW);
	run(t,
	    "GET /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\n"
	    "authorization: token client-own\r\nAccept: */*\r\n\r\n",
	    NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_FORWARD);
	assert_true(uses(&res.plan, i_github, true));
	/* Both github and other-auth inject Authorization: the first wins. */
	assert_true(uses(&res.plan, i_other_auth, true));
	assert_int_equal(count(res.out, "Authorization: "), 1);
	assert_int_equal(count(res.out, "uthorization"), 1);
	assert_non_null(strstr(res.out, "\r\nAuthorization: Bearer GH-S3CRET-gh\r\n"));
	assert_null(strstr(res.out, "client-own"));
	assert_null(strstr(res.out, "OTHER-S3CRET"));
	assert_non_null(strstr(res.out, "\r\nAccept: */*\r\n"));
	assert_true(strncmp(res.out, "GET /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\n",
			    50) == 0);

	/* Out of github's path scope: other-auth (no path scope) applies. */
	run(t, "GET /repos/other/x HTTP/1.1\r\nHost: api.github.com\r\n\r\n", NULL, 0, &res);
	assert_false(uses(&res.plan, i_github, true));
	assert_non_null(strstr(res.out, "\r\nauthorization: token OTHER-S3CRET\r\n"));
	assert_null(strstr(res.out, "GH-S3CRET"));

	/* Ambiguous path: not github's. */
	run(t, "GET /repos/acme/../other HTTP/1.1\r\nHost: api.github.com\r\n\r\n", NULL, 0, &res);
	assert_null(strstr(res.out, "GH-S3CRET"));

	/* Another host: nothing at all, the head as the client sent it. */
	run(t,
	    "GET /repos/acme/x HTTP/1.1\r\nHost: a.example.com\r\n"
	    "Authorization: token client-own\r\n\r\n",
	    NULL, 0, &res);
	assert_int_equal(res.plan.nuse, 0);
	assert_non_null(strstr(res.out, "Authorization: token client-own"));
	assert_null(strstr(res.out, "S3CRET"));
	creds_table_free(t);
}

static void test_placeholders_in_scope(void **state)
{
	struct creds_table *t = creds_table_new();
	char ph[CREDS_PLACEHOLDER_LEN + 1], head[1024], b64[256], want[320];
	char plain[128];

	(void)state;
	assert_int_equal(creds_table_issue(t, "wild", NOW, 0, ph), 0);

	/* A header value. */
	snprintf(head, sizeof(head),
		 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Token: pre %s post\r\n\r\n", ph);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_FORWARD);
	assert_int_equal(res.plan.nfound, 1);
	assert_int_equal(res.plan.found[0].cred, i_wild);
	assert_true(uses(&res.plan, i_wild, false));
	assert_non_null(strstr(res.out, "\r\nX-Token: pre W/ld+S3cret=x post\r\n"));
	assert_null(creds_find_placeholder(res.out, (size_t)res.n, NULL));

	/* Inside Basic: decoded, replaced, encoded again. */
	snprintf(plain, sizeof(plain), "user:%s", ph);
	assert_true(creds_base64_encode(plain, strlen(plain), false, b64, sizeof(b64)) > 0);
	snprintf(head, sizeof(head),
		 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nAuthorization: Basic %s\r\n\r\n", b64);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_FORWARD);
	assert_true(creds_base64_encode("user:W/ld+S3cret=x", 18, false, b64, sizeof(b64)) > 0);
	snprintf(want, sizeof(want), "\r\nAuthorization: Basic %s\r\n", b64);
	assert_non_null(strstr(res.out, want));

	/* Several lines of one name become one, placeholders replaced. */
	snprintf(head, sizeof(head),
		 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nCookie: a=1\r\n"
		 "Accept: x\r\nCookie: t=%s\r\n\r\n",
		 ph);
	run(t, head, NULL, 0, &res);
	assert_non_null(strstr(res.out, "\r\nCookie: a=1; t=W/ld+S3cret=x\r\n"));
	assert_int_equal(count(res.out, "Cookie:"), 1);

	/* A carrier listed in Connection is dropped by the writer, never
	 * rewritten. */
	snprintf(head, sizeof(head),
		 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nConnection: x-token\r\n"
		 "X-Token: %s\r\n\r\n",
		 ph);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_FORWARD);
	assert_null(strstr(res.out, "S3cret"));
	assert_null(strstr(res.out, "X-Token"));

	/* Secret missing: refused, nothing written. */
	{
		const struct http_request *req;
		const struct creds_secret *none[4] = { 0 };
		struct creds_rewrite rw;
		char buf[2048];

		snprintf(head, sizeof(head),
			 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Token: %s\r\n\r\n", ph);
		req = parse(head);
		assert_int_equal(creds_plan_request(t, pol, NULL, req, NOW, 0, &res.plan), 0);
		assert_int_equal(
			creds_rewrite_request(&res.plan, pol, none, req, buf, sizeof(buf), &rw),
			-ENOKEY);
		/* Too small a buffer: refused and wiped. */
		memset(buf, 'z', sizeof(buf));
		assert_int_equal(creds_rewrite_request(&res.plan, pol, secrets, req, buf, 10, &rw),
				 -ENOSPC);
		assert_int_equal(buf[0], 0);
		assert_int_equal(buf[9], 0);
		assert_int_equal(buf[10], 'z');
	}
	creds_table_free(t);
}

static void test_placeholders_refused(void **state)
{
	struct creds_table *t = creds_table_new();
	char ph[CREDS_PLACEHOLDER_LEN + 1], gh[CREDS_PLACEHOLDER_LEN + 1];
	char exp[CREDS_PLACEHOLDER_LEN + 1], unk[CREDS_PLACEHOLDER_LEN + 1];
	char head[2048], b64[256], plain[128];
	size_t i;

	(void)state;
	grant_all(t, NOW);
	assert_int_equal(creds_table_issue(t, "wild", NOW, 0, ph), 0);
	assert_int_equal(creds_table_issue(t, "github", NOW, 900, gh), 0);
	assert_int_equal(creds_table_issue(t, "wild", NOW - 100, 50, exp), 0);
	assert_int_equal(creds_placeholder_new(unk), 0);

	/* To the apex (outside "*.example.com"). */
	snprintf(head, sizeof(head), "GET /x HTTP/1.1\r\nHost: example.com\r\nX-Token: %s\r\n\r\n",
		 ph);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_OUT_OF_SCOPE);
	assert_int_equal(res.plan.cred, i_wild);
	assert_string_equal(creds_verdict_reason(res.plan.verdict), "placeholder-out-of-scope");

	/* Hidden in Basic, to another host. */
	snprintf(plain, sizeof(plain), "%s:x", ph);
	creds_base64_encode(plain, strlen(plain), false, b64, sizeof(b64));
	snprintf(head, sizeof(head),
		 "GET /x HTTP/1.1\r\nHost: plain.example.net\r\nAuthorization: basic  %s\r\n\r\n",
		 b64);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_OUT_OF_SCOPE);

	/* In a query to another host. */
	snprintf(head, sizeof(head), "GET /x?leak=%s HTTP/1.1\r\nHost: plain.example.net\r\n\r\n",
		 ph);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_OUT_OF_SCOPE);

	/* github's placeholder outside its method or path scope. */
	snprintf(head, sizeof(head),
		 "DELETE /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\nX-T: %s\r\n\r\n", gh);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_OUT_OF_SCOPE);
	assert_int_equal(res.plan.cred, i_github);
	snprintf(head, sizeof(head),
		 "GET /repos/acme/../x HTTP/1.1\r\nHost: api.github.com\r\nX-T: %s\r\n\r\n", gh);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_OUT_OF_SCOPE);
	/* ... and inside it, in its inject header, which the injection
	 * replaces. */
	snprintf(head, sizeof(head),
		 "POST /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\n"
		 "Authorization: Bearer %s\r\nContent-Length: 0\r\n\r\n",
		 gh);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_FORWARD);
	assert_non_null(strstr(res.out, "\r\nAuthorization: Bearer GH-S3CRET-gh\r\n"));
	assert_int_equal(count(res.out, "uthorization"), 1);
	assert_null(creds_find_placeholder(res.out, (size_t)res.n, NULL));

	/* Places no scope ever holds: Host, a header name. */
	snprintf(head, sizeof(head), "GET /x HTTP/1.1\r\nHost: %s.example.com\r\n\r\n", ph);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_OUT_OF_SCOPE);
	snprintf(head, sizeof(head), "GET /x HTTP/1.1\r\nHost: a.example.com\r\n%s: 1\r\n\r\n", ph);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_OUT_OF_SCOPE);
	/* (A placeholder as the method never parses: llhttp knows its
	 * methods.) */

	/* Expired, revoked, unknown. */
	snprintf(head, sizeof(head),
		 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Token: %s\r\n\r\n", exp);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_EXPIRED);
	assert_string_equal(creds_verdict_reason(res.plan.verdict), "placeholder-expired");
	snprintf(head, sizeof(head),
		 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Token: %s\r\n\r\n", unk);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_UNKNOWN);
	assert_int_equal(res.plan.cred, -1);
	/* The first failure decides: valid, then unknown. */
	snprintf(head, sizeof(head),
		 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Token: %s\r\n"
		 "Authorization: Bearer %s\r\n\r\n",
		 ph, unk);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_UNKNOWN);

	/* Too many distinct placeholders in one request. */
	{
		size_t len = (size_t)snprintf(head, sizeof(head),
					      "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Token:");

		for (i = 0; i < CREDS_MAX_FOUND + 1; i++) {
			char p[CREDS_PLACEHOLDER_LEN + 1];

			assert_int_equal(creds_table_issue(t, "wild", NOW, 0, p), 0);
			len += (size_t)snprintf(head + len, sizeof(head) - len, " %s", p);
		}
		snprintf(head + len, sizeof(head) - len, "\r\n\r\n");
		run(t, head, NULL, 0, &res);
		assert_int_equal(res.plan.verdict, CREDS_TOO_MANY);
	}

	/* Deleting the sandbox revokes everything at once. */
	assert_true(creds_table_revoke(t, NULL) >= 3);
	snprintf(head, sizeof(head),
		 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Token: %s\r\n\r\n", ph);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_REVOKED);
	creds_table_free(t);

	/* A placeholder whose credential a reload dropped: as revoked. */
	t = creds_table_new();
	assert_int_equal(creds_table_issue(t, "gone", NOW, 0, ph), 0);
	snprintf(head, sizeof(head),
		 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Token: %s\r\n\r\n", ph);
	run(t, head, NULL, 0, &res);
	assert_int_equal(res.plan.verdict, CREDS_REVOKED);
	creds_table_free(t);
}

/* @tmpl with its '@' replaced by @ph, into @out. */
static void fill(char *out, size_t len, const char *tmpl, const char *ph)
{
	const char *at = strchr(tmpl, '@');

	assert_non_null(at);
	assert_true((size_t)snprintf(out, len, "%.*s%s%s", (int)(at - tmpl), tmpl, ph, at + 1) <
		    len);
}

/*
 * Where a placeholder may be: only in its credential's placeholder
 * headers (wild: X-Token, Authorization, Cookie; github: its inject
 * header, Authorization).  Anywhere else in an in-scope request an
 * origin that reflects the request would hand the secret back: refused.
 * Each head has one '@' for the wild placeholder (github's with @gh).
 */
static void test_placeholder_places(void **state)
{
	static const struct {
		const char *head;
		bool gh;
		enum creds_verdict verdict;
	} tab[] = {
		{ "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Token: @\r\n\r\n", false,
		  CREDS_FORWARD },
		{ "GET /x HTTP/1.1\r\nHost: a.example.com\r\nx-token: @\r\n\r\n", false,
		  CREDS_FORWARD },
		{ "GET /x HTTP/1.1\r\nHost: a.example.com\r\nAuthorization: Bearer @\r\n\r\n",
		  false, CREDS_FORWARD },
		{ "GET /x HTTP/1.1\r\nHost: a.example.com\r\nCookie: t=@\r\n\r\n", false,
		  CREDS_FORWARD },
		{ "GET /x?token=@ HTTP/1.1\r\nHost: a.example.com\r\n\r\n", false,
		  CREDS_OUT_OF_SCOPE },
		{ "GET /x?a=1&b=x@y HTTP/1.1\r\nHost: a.example.com\r\n\r\n", false,
		  CREDS_OUT_OF_SCOPE },
		{ "GET /bot@/send HTTP/1.1\r\nHost: a.example.com\r\n\r\n", false,
		  CREDS_OUT_OF_SCOPE },
		{ "GET http://a.example.com/x?t=@ HTTP/1.1\r\nHost: a.example.com\r\n\r\n", false,
		  CREDS_OUT_OF_SCOPE },
		{ "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Echo: @\r\n\r\n", false,
		  CREDS_OUT_OF_SCOPE },
		{ "GET /x HTTP/1.1\r\nHost: a.example.com\r\nReferer: http://a.example.com/?t=@\r\n\r\n",
		  false, CREDS_OUT_OF_SCOPE },
		{ "GET /x HTTP/1.1\r\nHost: a.example.com\r\nUser-Agent: @\r\n\r\n", false,
		  CREDS_OUT_OF_SCOPE },
		{ "GET /x HTTP/1.1\r\nHost: a.example.com\r\nProxy-Authorization: @\r\n\r\n", false,
		  CREDS_OUT_OF_SCOPE },
		{ "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Token: a\r\nX-Token-2: @\r\n\r\n",
		  false, CREDS_OUT_OF_SCOPE },
		{ "GET /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\nAuthorization: token @\r\n\r\n",
		  true, CREDS_FORWARD },
		{ "GET /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\nX-Token: @\r\n\r\n", true,
		  CREDS_OUT_OF_SCOPE },
		{ "GET /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\nCookie: t=@\r\n\r\n", true,
		  CREDS_OUT_OF_SCOPE },
		{ "GET /repos/acme/x?access_token=@ HTTP/1.1\r\nHost: api.github.com\r\n\r\n", true,
		  CREDS_OUT_OF_SCOPE },
		{ "GET /repos/acme/@ HTTP/1.1\r\nHost: api.github.com\r\n\r\n", true,
		  CREDS_OUT_OF_SCOPE },
	};
	struct creds_table *t = creds_table_new();
	char ph[CREDS_PLACEHOLDER_LEN + 1], gh[CREDS_PLACEHOLDER_LEN + 1], head[1024];
	size_t i, bad = 0;

	(void)state;
	grant_all(t, NOW);
	assert_int_equal(creds_table_issue(t, "wild", NOW, 0, ph), 0);
	assert_int_equal(creds_table_issue(t, "github", NOW, 0, gh), 0);
	for (i = 0; i < ARRAY_SIZE(tab); i++) {
		fill(head, sizeof(head), tab[i].head, tab[i].gh ? gh : ph);
		run(t, head, NULL, 0, &res);
		if (res.plan.verdict != tab[i].verdict) {
			print_error("case %zu: %s, want %s\n", i,
				    res.plan.verdict ? creds_verdict_reason(res.plan.verdict)
						     : "forwarded",
				    tab[i].verdict ? creds_verdict_reason(tab[i].verdict)
						   : "forwarded");
			bad++;
			continue;
		}
		/* Forwarded: the secret replaced it, in that header only. */
		if (res.plan.verdict == CREDS_FORWARD &&
		    (creds_find_placeholder(res.out, (size_t)res.n, NULL) ||
		     !strstr(res.out, tab[i].gh ? "GH-S3CRET-gh" : "W/ld+S3cret=x") ||
		     strstr(res.out, "S3cret%") || strstr(res.out, "W%2F"))) {
			print_error("case %zu: rewritten as %s\n", i, res.out);
			bad++;
		}
		if (res.plan.verdict != CREDS_FORWARD &&
		    res.plan.cred != (tab[i].gh ? i_github : i_wild)) {
			print_error("case %zu: refusal names credential %d\n", i, res.plan.cred);
			bad++;
		}
	}
	assert_int_equal(bad, 0);

	/* A plan that forwards never has one in the target; a rewrite given
	 * one anyway (a plan for another request) is refused. */
	{
		const struct http_request *req;
		struct creds_plan plan;
		struct creds_rewrite rw;
		char buf[2048];

		snprintf(head, sizeof(head),
			 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Token: %s\r\n\r\n", ph);
		assert_int_equal(creds_plan_request(t, pol, NULL, parse(head), NOW, 0, &plan), 0);
		assert_int_equal(plan.verdict, CREDS_FORWARD);
		snprintf(head, sizeof(head), "GET /x?t=%s HTTP/1.1\r\nHost: a.example.com\r\n\r\n",
			 ph);
		req = parse(head);
		assert_int_equal(
			creds_rewrite_request(&plan, pol, secrets, req, buf, sizeof(buf), &rw),
			-EINVAL);
		snprintf(head, sizeof(head),
			 "GET /x HTTP/1.1\r\nHost: a.example.com\r\nX-Echo: %s\r\n\r\n", ph);
		req = parse(head);
		assert_int_equal(
			creds_rewrite_request(&plan, pol, secrets, req, buf, sizeof(buf), &rw),
			-EINVAL);
	}
	creds_table_free(t);
}

static void test_plaintext(void **state)
{
	struct creds_table *t = creds_table_new();
	char gh[CREDS_PLACEHOLDER_LEN + 1], head[1024];

	(void)state;
	grant_all(t, NOW);
	assert_int_equal(creds_table_issue(t, "github", NOW, 0, gh), 0);
	/* github does not allow plaintext: not injected, and said so. */
	run(t, "GET /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\n\r\n", NULL,
	    CREDS_PLAN_PLAINTEXT, &res);
	assert_int_equal(res.plan.verdict, CREDS_FORWARD);
	assert_int_equal(res.plan.plaintext_withheld, i_github);
	assert_null(strstr(res.out, "S3CRET"));
	/* Its placeholder over plaintext: refused. */
	snprintf(head, sizeof(head),
		 "GET /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\nX-T: %s\r\n\r\n", gh);
	run(t, head, NULL, CREDS_PLAN_PLAINTEXT, &res);
	assert_int_equal(res.plan.verdict, CREDS_PLAINTEXT);
	/* plain allows it. */
	run(t, "GET / HTTP/1.1\r\nHost: plain.example.net\r\n\r\n", NULL, CREDS_PLAN_PLAINTEXT,
	    &res);
	assert_int_equal(res.plan.plaintext_withheld, -1);
	assert_non_null(strstr(res.out, "\r\nX-Api-Key: PLAIN-S3CRET\r\n"));
	creds_table_free(t);
}

/*
 * Method overrides are judged as the method they ask for: github's scope
 * is GET and POST, so a GET that asks for DELETE is out of it, whatever
 * the spelling of the override.
 */
static void test_method_override(void **state)
{
	static const struct {
		const char *target, *headers;
		bool in_scope;
	} tab[] = {
		{ "/repos/acme/x", "", true },
		{ "/repos/acme/x", "X-HTTP-Method-Override: POST\r\n", true },
		{ "/repos/acme/x", "X-HTTP-Method-Override:  get \r\n", true },
		{ "/repos/acme/x", "X-HTTP-Method-Override: DELETE\r\n", false },
		{ "/repos/acme/x", "x-http-method-override: delete\r\n", false },
		{ "/repos/acme/x", "X-HTTP-METHOD-OVERRIDE: PUT\r\n", false },
		{ "/repos/acme/x", "X-HTTP-Method: DELETE\r\n", false },
		{ "/repos/acme/x", "X-Method-Override: PATCH\r\n", false },
		{ "/repos/acme/x", "X_HTTP_Method_Override: DELETE\r\n", false },
		{ "/repos/acme/x", "X-HTTP-Method-Override: GET\r\nX-HTTP-Method: DELETE\r\n",
		  false },
		{ "/repos/acme/x", "X-HTTP-Method-Override: GET, DELETE\r\n", false },
		{ "/repos/acme/x", "X-HTTP-Method-Override: GET DELETE\r\n", false },
		{ "/repos/acme/x", "X-HTTP-Method-Override:\r\n", false },
		{ "/repos/acme/x", "X-HTTP-Method-Overrides: DELETE\r\n", true },
		{ "/repos/acme/x?_method=GET", "", true },
		{ "/repos/acme/x?_method=POST&a=1", "", true },
		{ "/repos/acme/x?_method=DELETE", "", false },
		{ "/repos/acme/x?_method=delete", "", false },
		{ "/repos/acme/x?a=1&_method=DELETE", "", false },
		{ "/repos/acme/x?a=1;_method=DELETE", "", false },
		{ "/repos/acme/x?_method=GET&_method=DELETE", "", false },
		{ "/repos/acme/x?_METHOD=DELETE", "", false },
		{ "/repos/acme/x?%5Fmethod=DELETE", "", false },
		{ "/repos/acme/x?%5f%6d%65%74%68%6f%64=DELETE", "", false },
		{ "/repos/acme/x?_method%5B%5D=DELETE", "", false },
		{ "/repos/acme/x?_method[]=DELETE", "", false },
		{ "/repos/acme/x?.method=DELETE", "", false },
		{ "/repos/acme/x?+_method=DELETE", "", false },
		{ "/repos/acme/x?_method=DEL%45TE", "", false },
		{ "/repos/acme/x?_method=GET%00", "", false },
		{ "/repos/acme/x?_method", "", false },
		{ "/repos/acme/x?_method=", "", false },
		{ "/repos/acme/x?_method=AVERYLONGMETHODNAMEMORETHANTHIRTYTWOCHARS", "", false },
		{ "/repos/acme/x?x_method=DELETE", "", true },
		{ "/repos/acme/x?_methods=DELETE", "", true },
		{ "/repos/acme/x?q=_method%3DDELETE", "", true },
	};
	const struct policy_credential *gh, *wild;
	char head[512];
	size_t i, bad = 0;

	(void)state;
	gh = policy_credential_get(pol, (size_t)i_github);
	wild = policy_credential_get(pol, (size_t)i_wild);
	for (i = 0; i < ARRAY_SIZE(tab); i++) {
		struct http_request req;
		int n = snprintf(head, sizeof(head),
				 "GET %s HTTP/1.1\r\nHost: api.github.com\r\n%s\r\n", tab[i].target,
				 tab[i].headers);

		if (http_parse_request(head, (size_t)n, HTTP_DEFAULT_MAX_HEAD, &req) <= 0)
			fail_msg("%s %s: does not parse", tab[i].target, tab[i].headers);
		if (creds_in_scope(gh, NULL, NULL, &req) != tab[i].in_scope) {
			print_error("case %zu (%s): %s, want %s\n", i, tab[i].target,
				    tab[i].in_scope ? "out of scope" : "in scope",
				    tab[i].in_scope ? "in scope" : "out of scope");
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	/* The plan: nothing injected, a placeholder refused. */
	{
		struct creds_table *t = creds_table_new();
		char ph[CREDS_PLACEHOLDER_LEN + 1];

		grant_all(t, NOW);
		assert_int_equal(creds_table_issue(t, "github", NOW, 0, ph), 0);
		run(t,
		    "GET /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\n"
		    "X-HTTP-Method-Override: GET\r\n\r\n",
		    NULL, 0, &res);
		assert_true(uses(&res.plan, i_github, true));
		run(t,
		    "GET /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\n"
		    "X-HTTP-Method-Override: DELETE\r\n\r\n",
		    NULL, 0, &res);
		assert_int_equal(res.plan.verdict, CREDS_FORWARD);
		assert_false(uses(&res.plan, i_github, true));
		assert_null(strstr(res.out, "GH-S3CRET"));
		snprintf(head, sizeof(head),
			 "GET /repos/acme/x?_method=DELETE HTTP/1.1\r\nHost: api.github.com\r\n"
			 "Authorization: Bearer %s\r\n\r\n",
			 ph);
		run(t, head, NULL, 0, &res);
		assert_int_equal(res.plan.verdict, CREDS_OUT_OF_SCOPE);
		assert_int_equal(res.plan.cred, i_github);
		creds_table_free(t);
	}
	/* A credential without a methods scope is not concerned. */
	assert_true(creds_in_scope(wild, NULL, NULL,
				   parse("GET /x?_method=DELETE HTTP/1.1\r\nHost: a.example.com\r\n"
					 "X-HTTP-Method-Override: PURGE\r\n\r\n")));
}

/*
 * A credential's ttl bounds its injection, not only its placeholder:
 * github (ttl 15m) given at NOW is injected until NOW + 899 and never
 * from NOW + 900 on; plain (no ttl) always.  The clock is the plan's.
 */
static void test_ttl_bounds_injection(void **state)
{
	static const char gh_head[] = "GET /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\n\r\n";
	struct creds_table *t = creds_table_new();
	const struct http_request *req;
	char ph[CREDS_PLACEHOLDER_LEN + 1], head[512];
	struct creds_plan plan;
	uint64_t exp = 0;

	(void)state;
	grant_all(t, NOW);
	assert_int_equal(creds_table_grant_state(t, "github", NOW, &exp), CREDS_PH_VALID);
	assert_int_equal(exp, NOW + 900);
	/* The first grant stays: a second one does not extend it. */
	assert_int_equal(creds_table_grant(t, "github", NOW + 5000), -EEXIST);
	assert_int_equal(creds_table_grant_state(t, "github", NOW + 900, NULL), CREDS_PH_EXPIRED);
	assert_int_equal(creds_table_grant_state(t, "plain", NOW + 1000000, NULL), CREDS_PH_VALID);
	assert_int_equal(creds_table_grant_state(t, "nope", NOW, NULL), CREDS_PH_UNKNOWN);
	assert_int_equal(creds_table_grant(t, "", NOW), -EINVAL);
	assert_int_equal(creds_table_issue(t, "github", NOW, 900, ph), 0);

	req = parse(gh_head);
	assert_int_equal(creds_plan_request(t, pol, NULL, req, NOW + 899, 0, &plan), 0);
	assert_true(uses(&plan, i_github, true));
	assert_int_equal(plan.expired_withheld, -1);
	assert_int_equal(creds_plan_request(t, pol, NULL, req, NOW + 900, 0, &plan), 0);
	assert_int_equal(plan.verdict, CREDS_FORWARD);
	assert_false(uses(&plan, i_github, true));
	assert_int_equal(plan.expired_withheld, i_github);
	/* other-auth (no ttl) takes Authorization then. */
	assert_true(uses(&plan, i_other_auth, true));
	assert_int_equal(creds_plan_request(t, pol, NULL, req, NOW + 86400, 0, &plan), 0);
	assert_false(uses(&plan, i_github, true));
	/* Its placeholder too, with the same clock. */
	snprintf(head, sizeof(head),
		 "GET /repos/acme/x HTTP/1.1\r\nHost: api.github.com\r\n"
		 "Authorization: Bearer %s\r\n\r\n",
		 ph);
	req = parse(head);
	assert_int_equal(creds_plan_request(t, pol, NULL, req, NOW + 900, 0, &plan), 0);
	assert_int_equal(plan.verdict, CREDS_EXPIRED);
	/* No ttl: injected whatever the time. */
	req = parse("GET / HTTP/1.1\r\nHost: plain.example.net\r\n\r\n");
	assert_int_equal(creds_plan_request(t, pol, NULL, req, NOW + 100000000, 0, &plan), 0);
	assert_true(uses(&plan, i_plain, true));
	assert_int_equal(plan.expired_withheld, -1);
	/* The sandbox is gone: nothing injected any more. */
	creds_table_revoke(t, NULL);
	assert_int_equal(creds_table_grant_state(t, "plain", NOW, NULL), CREDS_PH_REVOKED);
	assert_int_equal(creds_plan_request(t, pol, NULL, req, NOW, 0, &plan), 0);
	assert_false(uses(&plan, i_plain, true));
	creds_table_free(t);

	/* Never given to this sandbox: never injected. */
	t = creds_table_new();
	assert_int_equal(creds_plan_request(t, pol, NULL, req, NOW, 0, &plan), 0);
	assert_int_equal(plan.nuse, 0);
	assert_int_equal(plan.expired_withheld, i_plain);
	/* Bounded: CREDS_GRANTS_MAX names. */
	for (size_t i = 0; i < CREDS_GRANTS_MAX; i++) {
		snprintf(head, sizeof(head), "c%zu", i);
		assert_int_equal(creds_table_grant(t, head, 0), 0);
	}
	assert_int_equal(creds_table_grant(t, "one-more", 0), -ENOSPC);
	assert_int_equal(creds_table_grant_state(t, "c1023", NOW, NULL), CREDS_PH_VALID);
	creds_table_free(t);
}

static void test_write_target_override(void **state)
{
	const struct http_request *req;
	char out[512];
	int n;

	(void)state;
	req = parse("GET http://a.example.com HTTP/1.1\r\nHost: a.example.com\r\n\r\n");
	n = http_write_request_head_target(req, "/new?q=1", 8, out, sizeof(out), NULL, 0);
	assert_true(n > 0);
	assert_true(strncmp(out, "GET /new?q=1 HTTP/1.1\r\n", 23) == 0);
	n = http_write_request_head_target(req, "?q", 2, out, sizeof(out), NULL, 0);
	assert_true(strncmp(out, "GET /?q HTTP/1.1\r\n", 18) == 0);
	/* NULL keeps the client's; nothing may break the request line. */
	n = http_write_request_head_target(req, NULL, 0, out, sizeof(out), NULL, 0);
	assert_true(strncmp(out, "GET / HTTP/1.1\r\n", 16) == 0);
	assert_int_equal(http_write_request_head_target(req, "/a b", 4, out, sizeof(out), NULL, 0),
			 -EINVAL);
	assert_int_equal(
		http_write_request_head_target(req, "/a\r\nX: y", 8, out, sizeof(out), NULL, 0),
		-EINVAL);
}

/* ---- base64 -------------------------------------------------------------- */

static void test_base64(void **state)
{
	static const struct {
		const char *in, *std, *url;
	} tab[] = {
		{ "", "", "" },
		{ "f", "Zg==", "Zg" },
		{ "fo", "Zm8=", "Zm8" },
		{ "foo", "Zm9v", "Zm9v" },
		{ "foob", "Zm9vYg==", "Zm9vYg" },
		{ "\xfb\xff", "+/8=", "-_8" },
	};
	unsigned char dec[64];
	char enc[64];
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(tab); i++) {
		size_t l = strlen(tab[i].in);

		assert_int_equal(creds_base64_encode(tab[i].in, l, false, enc, sizeof(enc)),
				 (int)strlen(tab[i].std));
		assert_string_equal(enc, tab[i].std);
		assert_int_equal(creds_base64_encode(tab[i].in, l, true, enc, sizeof(enc)),
				 (int)strlen(tab[i].url));
		assert_string_equal(enc, tab[i].url);
		assert_int_equal(
			creds_base64_decode(tab[i].std, strlen(tab[i].std), dec, sizeof(dec)),
			(int)l);
		assert_memory_equal(dec, tab[i].in, l);
	}
	assert_int_equal(creds_base64_decode("Zm9v", 4, dec, 2), -ENOSPC);
	assert_int_equal(creds_base64_encode("foo", 3, false, enc, 4), -ENOSPC);
	/* Unpadded is fine; trailing bits that are not zero are not. */
	assert_int_equal(creds_base64_decode("Zm8", 3, dec, sizeof(dec)), 2);
	assert_int_equal(creds_base64_decode("Zm9", 3, dec, sizeof(dec)), -EINVAL);
	assert_int_equal(creds_base64_decode("Z", 1, dec, sizeof(dec)), -EINVAL);
	assert_int_equal(creds_base64_decode("Zm9=v", 5, dec, sizeof(dec)), -EINVAL);
	assert_int_equal(creds_base64_decode("Zm 9v", 5, dec, sizeof(dec)), -EINVAL);
	assert_int_equal(creds_base64_decode("Zh==", 4, dec, sizeof(dec)), -EINVAL);
	assert_int_equal(creds_base64_decode("Zg=", 3, dec, sizeof(dec)), -EINVAL);
	assert_int_equal(creds_base64_decode("Zm8===", 6, dec, sizeof(dec)), -EINVAL);
}

/* ---- JWT ----------------------------------------------------------------- */

/* base64url (no padding) to bytes, via the standard decoder. */
static int b64url_dec(const char *s, size_t len, unsigned char *out, size_t cap)
{
	char tmp[4096];
	size_t i;

	assert_true(len + 3 < sizeof(tmp));
	for (i = 0; i < len; i++) {
		assert_true(s[i] != '=' && s[i] != '+' && s[i] != '/');
		tmp[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	}
	while (i % 4)
		tmp[i++] = '=';
	return creds_base64_decode(tmp, i, out, cap);
}

static EVP_PKEY *keygen_to_file(const char *type, const char *param, const char *name, char *p,
				size_t plen)
{
	EVP_PKEY *k = param			 ? EVP_PKEY_Q_keygen(NULL, NULL, type, param)
		      : strcmp(type, "RSA") == 0 ? EVP_PKEY_Q_keygen(NULL, NULL, type, (size_t)2048)
						 : EVP_PKEY_Q_keygen(NULL, NULL, type);
	FILE *f;

	assert_non_null(k);
	snprintf(p, plen, "%s/%s", tmpdir, name);
	f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL), 1);
	fclose(f);
	return k;
}

static bool verify_jwt(EVP_PKEY *pub, const char *tok, bool es256)
{
	const char *d2 = strrchr(tok, '.');
	unsigned char sig[128], der[128], *dp = der;
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	int sl, dl = 0;
	bool ok;

	assert_non_null(d2);
	sl = b64url_dec(d2 + 1, strlen(d2 + 1), sig, sizeof(sig));
	assert_int_equal(sl, 64);
	if (es256) {
		/* JWS R||S back into DER for EVP_DigestVerify. */
		ECDSA_SIG *es = ECDSA_SIG_new();

		assert_int_equal(
			ECDSA_SIG_set0(es, BN_bin2bn(sig, 32, NULL), BN_bin2bn(sig + 32, 32, NULL)),
			1);
		dl = i2d_ECDSA_SIG(es, &dp);
		ECDSA_SIG_free(es);
		assert_true(dl > 0);
	}
	assert_int_equal(EVP_DigestVerifyInit(m, NULL, es256 ? EVP_sha256() : NULL, NULL, pub), 1);
	ok = EVP_DigestVerify(m, es256 ? der : sig, es256 ? (size_t)dl : 64,
			      (const unsigned char *)tok, (size_t)(d2 - tok)) == 1;
	EVP_MD_CTX_free(m);
	return ok;
}

static void jwt_part(const char *tok, int part, char *out, size_t cap)
{
	const char *s = tok, *e;
	int n;

	while (part-- > 0)
		s = strchr(s, '.') + 1;
	e = strchr(s, '.');
	n = b64url_dec(s, e ? (size_t)(e - s) : strlen(s), (unsigned char *)out, cap - 1);
	assert_true(n > 0);
	out[n] = '\0';
}

static void check_jwt(const char *kind, const char *param, const char *alg)
{
	struct sl_err err = { 0 };
	char p[256], tok[2048], hdr[512], claims[1024], want[256];
	EVP_PKEY *gen, *key;
	bool es256 = strcmp(alg, "ES256") == 0;
	int n;

	gen = keygen_to_file(kind, param, "jwt.pem", p, sizeof(p));
	assert_int_equal(creds_jwt_key_load(p, &key, &err), 0);
	n = creds_jwt_mint(key, "k1", "sluice", "sandbox-1", "api.example.com", "repo read", NOW,
			   300, tok, sizeof(tok));
	assert_true(n > 0);
	assert_int_equal(strlen(tok), (size_t)n);
	assert_null(strchr(tok, '='));
	assert_int_equal(count(tok, "."), 2);

	jwt_part(tok, 0, hdr, sizeof(hdr));
	snprintf(want, sizeof(want), "{\"alg\":\"%s\",\"typ\":\"JWT\",\"kid\":\"k1\"}", alg);
	assert_string_equal(hdr, want);
	jwt_part(tok, 1, claims, sizeof(claims));
	assert_non_null(strstr(claims, "\"iss\":\"sluice\""));
	assert_non_null(strstr(claims, "\"sub\":\"sandbox-1\""));
	assert_non_null(strstr(claims, "\"aud\":\"api.example.com\""));
	assert_non_null(strstr(claims, "\"iat\":1700000000,"));
	assert_non_null(strstr(claims, "\"exp\":1700000300,"));
	assert_non_null(strstr(claims, "\"scope\":\"repo read\""));
	assert_non_null(strstr(claims, "\"jti\":\""));

	/* Verifies with the generated key's public half, and with the key
	 * loaded back; a changed claim does not. */
	assert_true(verify_jwt(gen, tok, es256));
	assert_true(verify_jwt(key, tok, es256));
	{
		char bad[2048];
		char *dot = strchr(strcpy(bad, tok), '.');

		dot[5] = dot[5] == 'A' ? 'B' : 'A';
		assert_false(verify_jwt(gen, bad, es256));
	}
	/* Two tokens differ (jti). */
	{
		char tok2[2048];

		assert_true(creds_jwt_mint(key, "k1", "sluice", "sandbox-1", "api.example.com",
					   "repo read", NOW, 300, tok2, sizeof(tok2)) > 0);
		assert_string_not_equal(tok, tok2);
	}
	/* JSON escaping in claims. */
	n = creds_jwt_mint(key, NULL, "a\"b\\c\n", "s", "h", NULL, NOW, 60, tok, sizeof(tok));
	assert_true(n > 0);
	jwt_part(tok, 0, hdr, sizeof(hdr));
	assert_null(strstr(hdr, "kid"));
	jwt_part(tok, 1, claims, sizeof(claims));
	assert_non_null(strstr(claims, "\"iss\":\"a\\\"b\\\\c\\u000a\""));
	assert_null(strstr(claims, "scope"));

	/* Bad arguments; too small. */
	assert_int_equal(creds_jwt_mint(key, NULL, "i", "s", "a", NULL, NOW, 0, tok, sizeof(tok)),
			 -EINVAL);
	assert_int_equal(creds_jwt_mint(key, NULL, "i", "s", "a", NULL, NOW, 32ULL * 86400, tok,
					sizeof(tok)),
			 -EINVAL);
	assert_int_equal(creds_jwt_mint(key, NULL, "", "s", "a", NULL, NOW, 60, tok, sizeof(tok)),
			 -EINVAL);
	assert_int_equal(creds_jwt_mint(key, NULL, "i", "s", "a", NULL, NOW, 60, tok, 100),
			 -ENOSPC);
	assert_int_equal(tok[0], 0);

	/* JWKS. */
	{
		char jwks[2048], x[64], y[64];
		unsigned char xb[64], yb[64], pub[80];
		EVP_PKEY *keys[2] = { key, key };
		const char *kids[2] = { "k1", NULL };
		size_t pl = 0;
		const char *s;

		n = creds_jwks_from_keys(keys, kids, 2, jwks, sizeof(jwks));
		assert_true(n > 0);
		assert_true(strncmp(jwks, "{\"keys\":[{", 10) == 0);
		assert_int_equal(count(jwks, "\"use\":\"sig\""), 2);
		assert_int_equal(count(jwks, "\"kid\":\"k1\""), 1);
		snprintf(want, sizeof(want), "\"alg\":\"%s\"", alg);
		assert_int_equal(count(jwks, want), 2);
		s = strstr(jwks, "\"x\":\"");
		assert_non_null(s);
		sscanf(s + 5, "%63[^\"]", x);
		assert_int_equal(b64url_dec(x, strlen(x), xb, sizeof(xb)), 32);
		if (es256) {
			assert_non_null(strstr(jwks, "\"kty\":\"EC\",\"crv\":\"P-256\""));
			s = strstr(jwks, "\"y\":\"");
			assert_non_null(s);
			sscanf(s + 5, "%63[^\"]", y);
			assert_int_equal(b64url_dec(y, strlen(y), yb, sizeof(yb)), 32);
			assert_int_equal(EVP_PKEY_get_octet_string_param(gen,
									 OSSL_PKEY_PARAM_PUB_KEY,
									 pub, sizeof(pub), &pl),
					 1);
			assert_int_equal(pl, 65);
			assert_int_equal(pub[0], 4);
			assert_memory_equal(pub + 1, xb, 32);
			assert_memory_equal(pub + 33, yb, 32);
		} else {
			assert_non_null(strstr(jwks, "\"kty\":\"OKP\",\"crv\":\"Ed25519\""));
			pl = sizeof(pub);
			assert_int_equal(EVP_PKEY_get_raw_public_key(gen, pub, &pl), 1);
			assert_int_equal(pl, 32);
			assert_memory_equal(pub, xb, 32);
		}
		assert_int_equal(creds_jwks_from_keys(keys, kids, 2, jwks, 50), -ENOSPC);
	}
	EVP_PKEY_free(gen);
	EVP_PKEY_free(key);
}

static void test_jwt(void **state)
{
	struct sl_err err = { 0 };
	char p[256];
	EVP_PKEY *k, *key = NULL;

	(void)state;
	check_jwt("EC", "P-256", "ES256");
	check_jwt("ED25519", NULL, "EdDSA");

	/* Other key types are refused, not half-supported. */
	k = keygen_to_file("EC", "P-384", "p384.pem", p, sizeof(p));
	assert_int_equal(creds_jwt_key_load(p, &key, &err), -EINVAL);
	assert_null(key);
	assert_non_null(strstr(sl_err_msg(&err), "P-256"));
	EVP_PKEY_free(k);
	k = keygen_to_file("RSA", NULL, "rsa.pem", p, sizeof(p));
	assert_int_equal(creds_jwt_key_load(p, &key, &err), -EINVAL);
	assert_int_equal(creds_jwt_mint(k, NULL, "i", "s", "a", NULL, NOW, 60, p, sizeof(p)),
			 -EINVAL);
	EVP_PKEY_free(k);
	write_file("junk.pem", "not a key\n", 10, p, sizeof(p));
	assert_int_equal(creds_jwt_key_load(p, &key, &err), -EINVAL);
	assert_int_equal(creds_jwt_key_load("/nonexistent/key.pem", &key, &err), -ENOENT);
}

/* ---- OAuth2 -------------------------------------------------------------- */

static void test_oauth2_body(void **state)
{
	const char *scopes[] = { "read:org", "repo" };
	const char *bad_scopes[] = { "two words" };
	struct creds_secret s;
	char out[256];
	int n;

	(void)state;
	assert_int_equal(creds_secret_set(&s, "p@ss&word=1+2 3~", 16), 0);
	n = creds_oauth2_request_body("my client", &s, scopes, 2, out, sizeof(out));
	assert_true(n > 0);
	assert_string_equal(out, "grant_type=client_credentials&client_id=my+client"
				 "&client_secret=p%40ss%26word%3D1%2B2+3~"
				 "&scope=read%3Aorg+repo");
	n = creds_oauth2_request_body("id", &s, NULL, 0, out, sizeof(out));
	assert_string_equal(out, "grant_type=client_credentials&client_id=id"
				 "&client_secret=p%40ss%26word%3D1%2B2+3~");
	assert_int_equal(creds_oauth2_request_body("id", &s, bad_scopes, 1, out, sizeof(out)),
			 -EINVAL);
	assert_int_equal(creds_oauth2_request_body("", &s, NULL, 0, out, sizeof(out)), -EINVAL);
	assert_int_equal(creds_oauth2_request_body("id", &s, NULL, 0, out, 40), -ENOSPC);
	assert_int_equal(out[0], 0);
	creds_secret_free(&s);
}

static void test_oauth2_parse(void **state)
{
	static const struct {
		const char *json;
		int ret;
		const char *token;
		uint64_t exp;
	} tab[] = {
		{ "{\"access_token\":\"abc.DEF-123\",\"token_type\":\"Bearer\",\"expires_in\":3600}",
		  0, "abc.DEF-123", 3600 },
		{ " {\n \"token_type\" : \"bearer\" , \"access_token\" : \"a\\/b\" ,"
		  " \"scope\":\"x y\", \"extra\":{\"n\":[1,2.5e3,-0,true,false,null,{}]},"
		  " \"expires_in\":\"120\"}\r\n",
		  0, "a/b", 120 },
		{ "{\"access_token\":\"t\",\"token_type\":\"BEARER\"}", 0, "t", 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"expires_in\":0}", 0, "t",
		  0 },
		/* missing or bad members */
		{ "{\"token_type\":\"Bearer\",\"expires_in\":3600}", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"t\",\"expires_in\":3600}", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"\",\"token_type\":\"Bearer\"}", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"has space\",\"token_type\":\"Bearer\"}", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"a\\nb\",\"token_type\":\"Bearer\"}", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"\\u00e9\",\"token_type\":\"Bearer\"}", -EINVAL, NULL, 0 },
		{ "{\"access_token\":42,\"token_type\":\"Bearer\"}", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"t\",\"access_token\":\"u\",\"token_type\":\"Bearer\"}",
		  -EINVAL, NULL, 0 },
		{ "{\"access_token\\u0000x\":\"t\",\"token_type\":\"Bearer\"}", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"mac\"}", -EPROTO, NULL, 0 },
		{ "{\"error\":\"invalid_client\",\"error_description\":\"no\"}", -EACCES, NULL, 0 },
		/* expires_in out of range */
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"expires_in\":99999999999999999999999}",
		  -ERANGE, NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"expires_in\":31708801}",
		  -ERANGE, NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"expires_in\":1e9}", -ERANGE,
		  NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"expires_in\":-1}", -ERANGE,
		  NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"expires_in\":\"12x\"}",
		  -EINVAL, NULL, 0 },
		/* bad JSON */
		{ "", -EINVAL, NULL, 0 },
		{ "[]", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",}", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\"", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\"}x", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"t\" \"token_type\":\"Bearer\"}", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"x\":01}", -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"x\":[1,]}", -EINVAL, NULL,
		  0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"x\":\"\\x\"}", -EINVAL, NULL,
		  0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"x\":\"\\ud800\"}", -EINVAL,
		  NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"x\":tru}", -EINVAL, NULL,
		  0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"x\":\"a\tb\"}", -EINVAL,
		  NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"x\":[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]}",
		  -EINVAL, NULL, 0 },
		{ "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"x\":[[[[[[[[[[[[[[]]]]]]]]]]]]]]}",
		  0, "t", 0 },
	};
	struct creds_secret tok;
	uint64_t exp;
	size_t i;
	int r;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(tab); i++) {
		exp = 12345;
		r = creds_oauth2_parse_response(tab[i].json, strlen(tab[i].json), &tok, &exp);
		if (r != tab[i].ret)
			fail_msg("case %zu: %d != %d: %s", i, r, tab[i].ret, tab[i].json);
		if (r == 0) {
			assert_int_equal(tok.len, strlen(tab[i].token));
			assert_memory_equal(tok.buf, tab[i].token, tok.len);
			assert_int_equal(exp, tab[i].exp);
			creds_secret_free(&tok);
		} else {
			assert_null(tok.buf);
			assert_int_equal(exp, 0);
		}
	}
	/* Only @len bytes are read: a cut document is malformed. */
	r = creds_oauth2_parse_response(tab[0].json, strlen(tab[0].json) - 1, &tok, &exp);
	assert_int_equal(r, -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placeholder_format),
		cmocka_unit_test(test_find_placeholder),
		cmocka_unit_test(test_host_match),
		cmocka_unit_test(test_path_match),
		cmocka_unit_test(test_in_scope),
		cmocka_unit_test(test_path_scope_bypass),
		cmocka_unit_test(test_method_override),
		cmocka_unit_test(test_build_injection),
		cmocka_unit_test_setup_teardown(test_secret_load, tmp_setup, tmp_teardown),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_inject_replaces_client_header),
		cmocka_unit_test(test_placeholders_in_scope),
		cmocka_unit_test(test_placeholders_refused),
		cmocka_unit_test(test_placeholder_places),
		cmocka_unit_test(test_plaintext),
		cmocka_unit_test(test_ttl_bounds_injection),
		cmocka_unit_test(test_write_target_override),
		cmocka_unit_test(test_base64),
		cmocka_unit_test_setup_teardown(test_jwt, tmp_setup, tmp_teardown),
		cmocka_unit_test(test_oauth2_body),
		cmocka_unit_test(test_oauth2_parse),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
