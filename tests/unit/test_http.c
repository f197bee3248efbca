// SPDX-License-Identifier: MIT
/* Unit tests for broker/http.c and broker/authority.c: heads, authorities, Location. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/http.h"

/* A literal with its length, so that embedded NULs count. */
#define S(x) x, sizeof(x) - 1

#define MAX_HEAD 16384

static bool slice_is(struct http_slice s, const char *want)
{
	return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

#define assert_slice(s, want)                                                            \
	do {                                                                             \
		if (!slice_is((s), (want)))                                              \
			fail_msg("slice '%.*s' != '%s'", (int)(s).len, (s).ptr, (want)); \
	} while (0)

/*
 * Parses @s (copied into a buffer of exactly @len bytes, so ASan sees any
 * read past it) and checks that every prefix gives 0 until the answer,
 * then the same answer as the whole input: the result must not depend on
 * how the bytes arrived.
 */
static int parse_split(const char *s, size_t len, size_t max_head, struct http_request *req)
{
	static struct http_request part;
	int whole, r;
	size_t k;
	bool decided = false;
	char *copy = malloc(len ? len : 1);

	assert_non_null(copy);
	memcpy(copy, s, len);
	whole = http_parse_request(copy, len, max_head, req);
	for (k = 0; k <= len; k++) {
		char *p = malloc(k ? k : 1);

		assert_non_null(p);
		memcpy(p, s, k);
		r = http_parse_request(p, k, max_head, &part);
		free(p);
		if (r == 0 && !decided)
			continue;
		if (r != whole || (r < 0 && strcmp(part.error, req->error)))
			fail_msg("prefix %zu of '%.*s': %d (%s), whole: %d (%s)", k, (int)len, s, r,
				 part.error ? part.error : "", whole, req->error ? req->error : "");
		decided = true;
	}
	free(copy);
	/* @req's slices point into the freed copy: re-parse into @s. */
	return http_parse_request(s, len, max_head, req);
}

/* ---- good requests ------------------------------------------------------- */

struct good_req {
	const char *in;
	size_t len;
	size_t head_len; /* 0: the whole input */
	enum http_method method;
	enum http_target_form form;
	const char *host;
	uint16_t port;
	const char *path_query;
	const char *path;
	const char *query; /* NULL: none */
	bool keep_alive;
	bool chunked;
	int64_t content_length; /* -1: none */
};

static const struct good_req good_reqs[] = {
	{ S("GET http://Example.COM./a/b?x=1 HTTP/1.1\r\nHost: example.com\r\n"
	    "User-Agent: t\r\n\r\n"),
	  0, HTTP_METHOD_GET, HTTP_FORM_ABSOLUTE, "example.com", 80, "/a/b?x=1", "/a/b", "x=1",
	  true, false, -1 },
	{ S("GET http://example.com:8080 HTTP/1.1\r\nHost: EXAMPLE.com:8080\r\n\r\n"), 0,
	  HTTP_METHOD_GET, HTTP_FORM_ABSOLUTE, "example.com", 8080, "/", "/", NULL, true, false,
	  -1 },
	/* Host with the default port spelled out matches a URI without it. */
	{ S("HEAD http://example.com/ HTTP/1.1\r\nHost: example.com:80\r\n\r\n"), 0,
	  HTTP_METHOD_HEAD, HTTP_FORM_ABSOLUTE, "example.com", 80, "/", "/", NULL, true, false,
	  -1 },
	{ S("GET http://example.com?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"), 0, HTTP_METHOD_GET,
	  HTTP_FORM_ABSOLUTE, "example.com", 80, "?q=1", "/", "q=1", true, false, -1 },
	{ S("CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n"), 0,
	  HTTP_METHOD_CONNECT, HTTP_FORM_AUTHORITY, "api.github.com", 443, "", "", NULL, true,
	  false, -1 },
	{ S("CONNECT [2001:DB8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n"), 0,
	  HTTP_METHOD_CONNECT, HTTP_FORM_AUTHORITY, "2001:db8::1", 443, "", "", NULL, true, false,
	  -1 },
	{ S("CONNECT 203.0.113.7:5432 HTTP/1.0\r\n\r\n"), 0, HTTP_METHOD_CONNECT,
	  HTTP_FORM_AUTHORITY, "203.0.113.7", 5432, "", "", NULL, false, false, -1 },
	{ S("GET /index.html HTTP/1.1\r\nHost: www.example.org\r\n\r\n"), 0, HTTP_METHOD_GET,
	  HTTP_FORM_ORIGIN, "www.example.org", 80, "/index.html", "/index.html", NULL, true, false,
	  -1 },
	{ S("GET / HTTP/1.1\r\nHost: www.example.org:443\r\n\r\n"), 0, HTTP_METHOD_GET,
	  HTTP_FORM_ORIGIN, "www.example.org", 443, "/", "/", NULL, true, false, -1 },
	/* Keep-alive: 1.0 closes unless asked, 1.1 stays unless told. */
	{ S("GET http://example.com/ HTTP/1.0\r\n\r\n"), 0, HTTP_METHOD_GET, HTTP_FORM_ABSOLUTE,
	  "example.com", 80, "/", "/", NULL, false, false, -1 },
	{ S("GET http://example.com/ HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), 0,
	  HTTP_METHOD_GET, HTTP_FORM_ABSOLUTE, "example.com", 80, "/", "/", NULL, true, false, -1 },
	{ S("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"), 0, HTTP_METHOD_GET,
	  HTTP_FORM_ORIGIN, "h", 80, "/", "/", NULL, false, false, -1 },
	{ S("GET / HTTP/1.1\r\nHost: h\r\nConnection: x-foo, ,CLOSE\r\n\r\n"), 0, HTTP_METHOD_GET,
	  HTTP_FORM_ORIGIN, "h", 80, "/", "/", NULL, false, false, -1 },
	{ S("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\n\r\n"), 0,
	  HTTP_METHOD_GET, HTTP_FORM_ORIGIN, "h", 80, "/", "/", NULL, true, false, -1 },
	{ S("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"), 0,
	  HTTP_METHOD_GET, HTTP_FORM_ORIGIN, "", 0, "/", "/", NULL, false, false, -1 },
	/* A body and a pipelined request after the head are left alone. */
	{ S("POST http://example.com/up HTTP/1.1\r\nHost: example.com\r\n"
	    "Content-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\nHost: x\r\n\r\n"),
	  sizeof("POST http://example.com/up HTTP/1.1\r\nHost: example.com\r\n"
		 "Content-Length: 5\r\n\r\n") -
		  1,
	  HTTP_METHOD_POST, HTTP_FORM_ABSOLUTE, "example.com", 80, "/up", "/up", NULL, true, false,
	  5 },
	{ S("PUT /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"
	    "5\r\nhello\r\n0\r\n\r\n"),
	  sizeof("PUT /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n") - 1,
	  HTTP_METHOD_PUT, HTTP_FORM_ORIGIN, "h", 80, "/x", "/x", NULL, true, true, -1 },
	{ S("DELETE /r HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"), 0, HTTP_METHOD_DELETE,
	  HTTP_FORM_ORIGIN, "h", 80, "/r", "/r", NULL, true, false, 0 },
	{ S("PATCH /r?a=1&b HTTP/1.1\r\nHost: h\r\nContent-Length: 007\r\n\r\n"), 0,
	  HTTP_METHOD_PATCH, HTTP_FORM_ORIGIN, "h", 80, "/r?a=1&b", "/r", "a=1&b", true, false, 7 },
	{ S("OPTIONS http://h/ HTTP/1.1\r\nHost: h\r\n\r\n"), 0, HTTP_METHOD_OPTIONS,
	  HTTP_FORM_ABSOLUTE, "h", 80, "/", "/", NULL, true, false, -1 },
	{ S("PROPFIND /dav/ HTTP/1.1\r\nHost: h\r\nDepth: 1\r\n\r\n"), 0, HTTP_METHOD_OTHER,
	  HTTP_FORM_ORIGIN, "h", 80, "/dav/", "/dav/", NULL, true, false, -1 },
	{ S("GET http://192.0.2.1/ HTTP/1.1\r\nHost: 192.0.2.1\r\n\r\n"), 0, HTTP_METHOD_GET,
	  HTTP_FORM_ABSOLUTE, "192.0.2.1", 80, "/", "/", NULL, true, false, -1 },
	/* Field values may carry obs-text and inner whitespace. */
	{ S("GET / HTTP/1.1\r\nHost: h\r\nX-Name: caf\xc3\xa9 au\tlait\r\n\r\n"), 0,
	  HTTP_METHOD_GET, HTTP_FORM_ORIGIN, "h", 80, "/", "/", NULL, true, false, -1 },
};

static void test_good_requests(void **state)
{
	struct http_request req;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good_reqs) / sizeof(good_reqs[0]); i++) {
		const struct good_req *t = &good_reqs[i];
		size_t want = t->head_len ? t->head_len : t->len;
		int r = parse_split(t->in, t->len, MAX_HEAD, &req);

		if (r != (int)want)
			fail_msg("case %zu: got %d (%s), want %zu", i, r,
				 req.error ? req.error : "", want);
		assert_null(req.error);
		assert_int_equal(req.method_id, t->method);
		assert_int_equal(req.form, t->form);
		if (t->host[0]) {
			assert_true(req.has_authority);
			assert_string_equal(req.authority.host, t->host);
			assert_int_equal(req.authority.host_len, strlen(t->host));
			assert_int_equal(req.authority.port, t->port);
		} else {
			assert_false(req.has_authority);
		}
		if (t->form != HTTP_FORM_AUTHORITY) {
			assert_slice(req.path_query, t->path_query);
			assert_slice(req.path, t->path);
			assert_int_equal(req.has_query, t->query != NULL);
			if (t->query)
				assert_slice(req.query, t->query);
			assert_int_equal(req.scheme, t->form == HTTP_FORM_ABSOLUTE
							     ? HTTP_SCHEME_HTTP
							     : HTTP_SCHEME_NONE);
		}
		if (req.keep_alive != t->keep_alive)
			fail_msg("case %zu: keep_alive %d", i, req.keep_alive);
		assert_int_equal(req.chunked, t->chunked);
		assert_int_equal(req.has_content_length, t->content_length >= 0);
		if (t->content_length >= 0)
			assert_int_equal(req.content_length, t->content_length);
	}
}

static void test_request_details(void **state)
{
	static const char in[] = "GET /a HTTP/1.1\r\nHost: h\r\nX-A:   v  \t\r\nX-Empty:\r\n"
				 "x-a: second\r\n\r\n";
	struct http_request req;
	const struct http_header *h;

	(void)state;
	assert_int_equal(http_parse_request(in, sizeof(in) - 1, MAX_HEAD, &req), sizeof(in) - 1);
	assert_slice(req.method, "GET");
	assert_slice(req.target, "/a");
	assert_int_equal(req.version_minor, 1);
	assert_int_equal(req.nheaders, 4);
	assert_slice(req.headers[0].name, "Host");
	assert_slice(req.headers[1].value, "v");
	assert_slice(req.headers[2].name, "X-Empty");
	assert_int_equal(req.headers[2].value.len, 0);
	assert_non_null(req.headers[2].value.ptr);
	h = http_find_header(&req, "x-A");
	assert_ptr_equal(h, &req.headers[1]);
	assert_null(http_find_header(&req, "X-Missing"));
	assert_false(req.authority.port_given);
	assert_false(req.path_ambiguous);
}

static void test_pipelined(void **state)
{
	static const char in[] = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
				 "GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
	struct http_request req;
	int first, second;

	(void)state;
	first = parse_split(in, sizeof(in) - 1, MAX_HEAD, &req);
	assert_int_equal(first, sizeof("GET /a HTTP/1.1\r\nHost: h\r\n\r\n") - 1);
	assert_slice(req.path, "/a");
	assert_true(req.keep_alive);
	second = http_parse_request(in + first, sizeof(in) - 1 - (size_t)first, MAX_HEAD, &req);
	assert_int_equal(second, sizeof(in) - 1 - (size_t)first);
	assert_slice(req.path, "/b");
	assert_false(req.keep_alive);
}

static void test_path_ambiguous(void **state)
{
	static const struct {
		const char *target;
		bool ambiguous;
	} cases[] = {
		{ "/repos/acme/x", false },
		{ "/a.b/..c/...", false },
		{ "/repos/acme/../other", true },
		{ "/repos/./x", true },
		{ "/a/%2e%2E/b", true },
		{ "/a/.%2e", true },
		{ "/a%2fb", true },
		{ "/a%5Cb", true },
		{ "/a\\b", true },
		{ "/..", true },
		{ "/x?y=/../", false },
		{ "/%41%42", false },
	};
	char buf[256];
	struct http_request req;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n = snprintf(buf, sizeof(buf), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n",
				 cases[i].target);

		assert_int_equal(http_parse_request(buf, (size_t)n, MAX_HEAD, &req), n);
		if (req.path_ambiguous != cases[i].ambiguous)
			fail_msg("%s: path_ambiguous %d", cases[i].target, req.path_ambiguous);
	}
}

/* ---- rejected requests --------------------------------------------------- */

struct bad_req {
	const char *in;
	size_t len;
	int ret;
	const char *reason;
};

#define HOST "Host: h\r\n"

static const struct bad_req bad_reqs[] = {
	/* framing */
	{ S("GET / HTTP/1.1\nHost: h\n\n"), -EBADMSG, "bare-lf" },
	{ S("GET / HTTP/1.1\r\nHost: h\n\r\n"), -EBADMSG, "bare-lf" },
	{ S("GET / HTTP/1.1\r\nHost: h\r\n\n"), -EBADMSG, "bare-lf" },
	{ S("GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n"), -EBADMSG, "bare-cr" },
	{ S("GET / HTTP/1.1\r\n" HOST "\rX\r\n"), -EBADMSG, "bare-cr" },
	{ S("GET / HTTP/1.1\r\n" HOST "X: a\r\n b\r\n\r\n"), -EBADMSG, "obs-fold" },
	{ S("GET / HTTP/1.1\r\n" HOST "X: a\r\n\tb\r\n\r\n"), -EBADMSG, "obs-fold" },
	{ S("GET / HTTP/1.1\r\n Host: h\r\n\r\n"), -EBADMSG, "obs-fold" },
	{ S("\r\nGET / HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-request-line" },
	/* framing headers */
	{ S("POST / HTTP/1.1\r\n" HOST "Content-Length: 3\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"),
	  -EBADMSG, "cl-and-te" },
	{ S("POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n"
	    "Content-Length: 3\r\n\r\n"),
	  -EBADMSG, "cl-and-te" },
	{ S("POST / HTTP/1.1\r\n" HOST "Content-Length: 3\r\n"
	    "Content-Length: 3\r\n\r\n"),
	  -EBADMSG, "duplicate-content-length" },
	{ S("POST / HTTP/1.1\r\n" HOST "Content-Length: 3, 3\r\n\r\n"), -EBADMSG,
	  "bad-content-length" },
	{ S("POST / HTTP/1.1\r\n" HOST "Content-Length: -1\r\n\r\n"), -EBADMSG,
	  "bad-content-length" },
	{ S("POST / HTTP/1.1\r\n" HOST "Content-Length: +1\r\n\r\n"), -EBADMSG,
	  "bad-content-length" },
	{ S("POST / HTTP/1.1\r\n" HOST "Content-Length:\r\n\r\n"), -EBADMSG, "bad-content-length" },
	{ S("POST / HTTP/1.1\r\n" HOST "Content-Length: 99999999999999999999999\r\n\r\n"), -EBADMSG,
	  "bad-content-length" },
	{ S("POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: gzip\r\n\r\n"), -EBADMSG,
	  "bad-transfer-encoding" },
	{ S("POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: gzip, chunked\r\n\r\n"), -EBADMSG,
	  "bad-transfer-encoding" },
	{ S("POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"),
	  -EBADMSG, "bad-transfer-encoding" },
	{ S("POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked, chunked\r\n\r\n"), -EBADMSG,
	  "bad-transfer-encoding" },
	{ S("POST / HTTP/1.0\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n"), -EBADMSG,
	  "bad-transfer-encoding" },
	/* characters */
	{ S("GET / HTTP/1.1\r\n" HOST "X: a\0b\r\n\r\n"), -EBADMSG, "invalid-character" },
	{ S("GET / HTTP/1.1\r\n" HOST "X: a\x01"
	    "b\r\n\r\n"),
	  -EBADMSG, "invalid-character" },
	{ S("GET / HTTP/1.1\r\n" HOST "X: a\x7f\r\n\r\n"), -EBADMSG, "invalid-character" },
	{ S("GET /\0 HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "invalid-character" },
	{ S("GET / HTTP/1.1\r\nHost : h\r\n\r\n"), -EBADMSG, "invalid-character" },
	{ S("GET / HTTP/1.1\r\n" HOST "X(Y): 1\r\n\r\n"), -EBADMSG, "invalid-character" },
	{ S("GET / HTTP/1.1\r\n" HOST ": 1\r\n\r\n"), -EBADMSG, "invalid-character" },
	{ S("GET / HTTP/1.1\r\n" HOST "X-No-Colon\r\n\r\n"), -EBADMSG, "invalid-character" },
	/* Host */
	{ S("GET / HTTP/1.1\r\n\r\n"), -EBADMSG, "missing-host" },
	{ S("CONNECT h:443 HTTP/1.1\r\n\r\n"), -EBADMSG, "missing-host" },
	{ S("GET / HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n"), -EBADMSG, "duplicate-host" },
	{ S("GET / HTTP/1.1\r\nHost:\r\n\r\n"), -EBADMSG, "bad-host" },
	{ S("GET / HTTP/1.1\r\nHost: a_b.example\r\n\r\n"), -EBADMSG, "bad-host" },
	{ S("GET / HTTP/1.1\r\nHost: h, i\r\n\r\n"), -EBADMSG, "bad-host" },
	{ S("GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n"), -EBADMSG,
	  "host-mismatch" },
	{ S("GET http://a.example/ HTTP/1.1\r\nHost: a.example:8080\r\n\r\n"), -EBADMSG,
	  "host-mismatch" },
	{ S("GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example\r\n\r\n"), -EBADMSG,
	  "host-mismatch" },
	{ S("GET http://a.example/ HTTP/1.0\r\nHost: evil.example\r\n\r\n"), -EBADMSG,
	  "host-mismatch" },
	{ S("GET http://[::1]/ HTTP/1.1\r\nHost: [::2]\r\n\r\n"), -EBADMSG, "host-mismatch" },
	/* request line */
	{ S("GET / HTTP/1.2\r\n" HOST "\r\n"), -EBADMSG, "unsupported-version" },
	{ S("GET / HTTP/2.0\r\n" HOST "\r\n"), -EBADMSG, "unsupported-version" },
	{ S("GET / HTTP/0.9\r\n" HOST "\r\n"), -EBADMSG, "unsupported-version" },
	{ S("GET / http/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-request-line" },
	{ S("GET / HTTP/1.1 \r\n" HOST "\r\n"), -EBADMSG, "bad-request-line" },
	{ S("GET / HTTP/11\r\n" HOST "\r\n"), -EBADMSG, "bad-request-line" },
	{ S("GET /\r\n" HOST "\r\n"), -EBADMSG, "bad-request-line" },
	{ S("GET  / HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-request-line" },
	{ S("GET\t/ HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-request-line" },
	{ S("GET /a b HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-request-line" },
	{ S(" GET / HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-request-line" },
	{ S("get / HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-method" },
	{ S("FOO / HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-method" },
	/* target */
	{ S("GET https://h/ HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-scheme" },
	{ S("GET ftp://h/ HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-scheme" },
	{ S("OPTIONS * HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-target" },
	{ S("GET h/ HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-target" },
	{ S("GET h:80 HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-target" },
	{ S("GET /a#frag HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-target" },
	{ S("GET /caf\xc3\xa9 HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-target" },
	{ S("GET /a%zz HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-target" },
	{ S("GET /a% HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-target" },
	{ S("GET http:// HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "empty-host" },
	{ S("GET http://user:pw@h/ HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "userinfo" },
	{ S("GET http:///x HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "empty-host" },
	{ S("GET http://h:0/ HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-port" },
	{ S("GET http://127.1/ HTTP/1.1\r\nHost: 127.1\r\n\r\n"), -EBADMSG, "numeric-host" },
	{ S("GET / HTTP/1.1\r\nHost: 0x7f.0.0.1\r\n\r\n"), -EBADMSG, "numeric-host" },
	{ S("CONNECT 2130706433:443 HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "numeric-host" },
	{ S("CONNECT h HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "missing-port" },
	{ S("CONNECT h:443/x HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "bad-port" },
	{ S("CONNECT user@h:443 HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "userinfo" },
	{ S("CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "ipv6-zone" },
	{ S("CONNECT h%2eexample:443 HTTP/1.1\r\n" HOST "\r\n"), -EBADMSG, "percent-encoded-host" },
};

static void test_bad_requests(void **state)
{
	struct http_request req;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad_reqs) / sizeof(bad_reqs[0]); i++) {
		const struct bad_req *t = &bad_reqs[i];
		int r = parse_split(t->in, t->len, MAX_HEAD, &req);

		if (r != t->ret || !req.error || strcmp(req.error, t->reason))
			fail_msg("case %zu '%.*s': got %d (%s), want %d (%s)", i, (int)t->len,
				 t->in, r, req.error ? req.error : "-", t->ret, t->reason);
	}
}

static void test_too_many_headers(void **state)
{
	static char buf[8192];
	struct http_request req;
	size_t n, i;
	int r;

	(void)state;
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: h\r\n");
	for (i = 1; i < HTTP_MAX_HEADERS; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X-%zu: v\r\n", i);
	memcpy(buf + n, "\r\n", 2);
	r = http_parse_request(buf, n + 2, sizeof(buf), &req);
	assert_int_equal(r, n + 2);
	assert_int_equal(req.nheaders, HTTP_MAX_HEADERS);
	assert_slice(req.headers[HTTP_MAX_HEADERS - 1].name, "X-99");

	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X-100: v\r\n\r\n");
	r = http_parse_request(buf, n, sizeof(buf), &req);
	assert_int_equal(r, -EBADMSG);
	assert_string_equal(req.error, "too-many-headers");
}

static void test_head_size(void **state)
{
	static const char in[] = "GET /0123456789 HTTP/1.1\r\nHost: h\r\n\r\n";
	const size_t len = sizeof(in) - 1;
	struct http_request req;

	(void)state;
	/* Exactly max_head bytes is fine, one more is not. */
	assert_int_equal(parse_split(in, len, len, &req), len);
	assert_int_equal(parse_split(in, len, len - 1, &req), -EMSGSIZE);
	assert_string_equal(req.error, "head-too-large");
	/* Incomplete and below the limit: more please; at the limit: refuse. */
	assert_int_equal(http_parse_request(in, len - 1, len, &req), 0);
	assert_int_equal(http_parse_request(in, 10, 11, &req), 0);
	assert_int_equal(http_parse_request(in, 10, 10, &req), -EMSGSIZE);
	assert_int_equal(http_parse_request(in, 0, 10, &req), 0);
	assert_int_equal(http_parse_request(in, 0, 0, &req), -EMSGSIZE);
	/* Bytes beyond max_head are not even looked at. */
	assert_int_equal(http_parse_request("GET / HTTP/1.1\r\nHost: h\r\n\r\n"
					    "\0\0\n",
					    30, 17, &req),
			 -EMSGSIZE);
	/* A framing error inside the limit is reported as such. */
	assert_int_equal(http_parse_request("GET / HTTP/1.1\n", 15, 12, &req), -EMSGSIZE);
	assert_int_equal(http_parse_request("GET /\n", 6, 12, &req), -EBADMSG);
	assert_string_equal(req.error, "bare-lf");
}

/* ---- writing the upstream head ------------------------------------------- */

static int parse_str(const char *s, struct http_request *req)
{
	return http_parse_request(s, strlen(s), MAX_HEAD, req);
}

static void test_write_filters_and_replaces(void **state)
{
	static const char in[] = "GET http://api.example/repos/x?y=1 HTTP/1.1\r\n"
				 "Host: api.example\r\n"
				 "authorization: Bearer PLACEHOLDER\r\n"
				 "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
				 "Proxy-Connection: keep-alive\r\n"
				 "Connection: X-Hop-Me, keep-alive\r\n"
				 "X-Hop-Me: 1\r\n"
				 "Keep-Alive: timeout=5\r\n"
				 "TE: trailers\r\n"
				 "Trailer: X-T\r\n"
				 "Upgrade: h2c\r\n"
				 "Accept: */*\r\n"
				 "Authorization: Bearer SECOND\r\n"
				 "\r\n";
	static const char want[] = "GET /repos/x?y=1 HTTP/1.1\r\n"
				   "Host: api.example\r\n"
				   "Accept: */*\r\n"
				   "Authorization: Bearer REAL\r\n"
				   "Connection: keep-alive\r\n"
				   "\r\n";
	const struct http_set_header set[] = {
		{ "Authorization", "Bearer REAL", 11 },
	};
	struct http_request req;
	char out[1024];
	int n;

	(void)state;
	assert_int_equal(parse_str(in, &req), sizeof(in) - 1);
	n = http_write_request_head(&req, out, sizeof(out), set, 1);
	assert_int_equal(n, sizeof(want) - 1);
	assert_memory_equal(out, want, sizeof(want) - 1);
	/* Replaced, never duplicated. */
	assert_null(memmem(out, (size_t)n, "PLACEHOLDER", 11));
	assert_null(memmem(out, (size_t)n, "SECOND", 6));

	/* Without a set header the client's own are kept, in order. */
	n = http_write_request_head(&req, out, sizeof(out), NULL, 0);
	assert_true(n > 0);
	assert_non_null(memmem(out, (size_t)n,
			       "Accept: */*\r\n"
			       "Authorization: Bearer SECOND\r\n",
			       43));
	assert_non_null(memmem(out, (size_t)n, "authorization: Bearer PLACEHOLDER\r\n", 35));
	assert_null(memmem(out, (size_t)n, "Proxy-", 6));
	assert_null(memmem(out, (size_t)n, "X-Hop-Me", 8));
	assert_null(memmem(out, (size_t)n, "Upgrade", 7));
}

static void test_write_forms(void **state)
{
	static const struct {
		const char *in;
		const char *want;
	} cases[] = {
		{ "POST /up HTTP/1.1\r\nHost: Up.Example:8443\r\n"
		  "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
		  "POST /up HTTP/1.1\r\nHost: up.example:8443\r\n"
		  "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" },
		{ "GET http://[2001:db8::1]:8080?q HTTP/1.1\r\n"
		  "Host: [2001:DB8::1]:8080\r\nContent-Length: 0\r\n\r\n",
		  "GET /?q HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n"
		  "Content-Length: 0\r\nConnection: keep-alive\r\n\r\n" },
		{ "GET http://h.example:80/ HTTP/1.0\r\nUser-Agent: x\r\n\r\n",
		  "GET / HTTP/1.1\r\nHost: h.example\r\nUser-Agent: x\r\n"
		  "Connection: close\r\n\r\n" },
	};
	struct http_request req;
	char out[512];
	size_t i;
	int n;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_true(parse_str(cases[i].in, &req) > 0);
		n = http_write_request_head(&req, out, sizeof(out), NULL, 0);
		if (n != (int)strlen(cases[i].want) || memcmp(out, cases[i].want, (size_t)n))
			fail_msg("case %zu: got %d '%.*s'", i, n, n > 0 ? n : 0, out);
	}
}

static void test_write_errors(void **state)
{
	static const char in[] = "GET / HTTP/1.1\r\nHost: h\r\nX: y\r\n\r\n";
	static const char want[] = "GET / HTTP/1.1\r\nHost: h\r\nX: y\r\nAuthorization: s3cret\r\n"
				   "Connection: keep-alive\r\n\r\n";
	static const char want_host[] = "GET / HTTP/1.1\r\nHost: other.example\r\nX: y\r\n"
					"Connection: keep-alive\r\n\r\n";
	const struct http_set_header auth = { "Authorization", "s3cret", 6 };
	const struct http_set_header nl = { "Authorization", "s3cret\r\nX: 1", 12 };
	const struct http_set_header nul = { "Authorization", "s3\0cret", 7 };
	const struct http_set_header cl = { "Content-Length", "5", 1 };
	const struct http_set_header pa = { "Proxy-Authorization", "x", 1 };
	const struct http_set_header badname = { "Bad Name", "x", 1 };
	const struct http_set_header host = { "Host", "other.example", 13 };
	const struct http_set_header twice[] = {
		{ "Host", "a.example", 9 },
		{ "host", "b.example", 9 },
	};
	struct http_request req;
	char out[512];
	size_t exact = sizeof(want) - 1, i;
	int n;

	(void)state;
	assert_true(parse_str(in, &req) > 0);
	assert_int_equal(http_write_request_head(&req, out, exact, &auth, 1), exact);
	assert_memory_equal(out, want, exact);
	/* One byte short: refused, and nothing of the secret is left. */
	memset(out, 'Z', sizeof(out));
	assert_int_equal(http_write_request_head(&req, out, exact - 1, &auth, 1), -ENOSPC);
	for (i = 0; i < exact - 1; i++)
		assert_int_equal(out[i], 0);
	assert_int_equal(out[exact - 1], 'Z');
	assert_int_equal(http_write_request_head(&req, NULL, 0, NULL, 0), -ENOSPC);

	assert_int_equal(http_write_request_head(&req, out, sizeof(out), &nl, 1), -EINVAL);
	assert_int_equal(http_write_request_head(&req, out, sizeof(out), &nul, 1), -EINVAL);
	assert_int_equal(http_write_request_head(&req, out, sizeof(out), &cl, 1), -EINVAL);
	assert_int_equal(http_write_request_head(&req, out, sizeof(out), &pa, 1), -EINVAL);
	assert_int_equal(http_write_request_head(&req, out, sizeof(out), &badname, 1), -EINVAL);

	assert_int_equal(http_write_request_head(&req, out, sizeof(out), twice, 2), -EINVAL);

	n = http_write_request_head(&req, out, sizeof(out), &host, 1);
	assert_int_equal(n, strlen(want_host));
	assert_memory_equal(out, want_host, (size_t)n);

	/* CONNECT has no origin-form; HTTP/1.0 without Host names no host. */
	assert_true(parse_str("CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", &req) > 0);
	assert_int_equal(http_write_request_head(&req, out, sizeof(out), NULL, 0), -EINVAL);
	assert_true(parse_str("GET /x HTTP/1.0\r\n\r\n", &req) > 0);
	assert_int_equal(http_write_request_head(&req, out, sizeof(out), NULL, 0), -EINVAL);
	n = http_write_request_head(&req, out, sizeof(out), &host, 1);
	assert_int_equal(n, strlen("GET /x HTTP/1.1\r\nHost: other.example\r\n"
				   "Connection: close\r\n\r\n"));
}

static void test_hop_by_hop(void **state)
{
	static const struct {
		const char *name;
		bool hop;
	} cases[] = {
		{ "Connection", true },
		{ "keep-alive", true },
		{ "Proxy-Authenticate", true },
		{ "PROXY-AUTHORIZATION", true },
		{ "Proxy-Connection", true },
		{ "Proxy-Anything", true },
		{ "TE", true },
		{ "Trailer", true },
		{ "transfer-encoding", true },
		{ "Upgrade", true },
		{ "Authorization", false },
		{ "Content-Length", false },
		{ "Proxy", false },
		{ "Trailers", false },
		{ "Host", false },
		{ "Tea", false },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (http_is_hop_by_hop(cases[i].name, strlen(cases[i].name)) != cases[i].hop)
			fail_msg("%s", cases[i].name);
}

/* ---- authority ----------------------------------------------------------- */

struct auth_case {
	const char *in;
	uint16_t def_port;
	int ret;
	const char *host;   /* on success */
	uint16_t port;	    /* on success */
	int literal;	    /* 0 name, 4 v4, 6 v6 */
	const char *reason; /* on failure */
	bool numeric;	    /* is_ambiguous_numeric */
};

#define L63 "abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abc"
/* 250 characters: three full labels and one of 58 */
#define N250                    \
	L63 "." L63 "." L63 "." \
	    "abcdefghij0123456789abcdefghij0123456789abcdefghij01234567"

static const struct auth_case auth_cases[] = {
	{ "example.com", 80, 0, "example.com", 80, 0, NULL, false },
	{ "Example.COM.", 443, 0, "example.com", 443, 0, NULL, false },
	{ "API.GitHub.com:443", 0, 0, "api.github.com", 443, 0, NULL, false },
	{ "xn--bcher-kva.example:8080", 80, 0, "xn--bcher-kva.example", 8080, 0, NULL, false },
	{ "a-b.c-d.e1", 80, 0, "a-b.c-d.e1", 80, 0, NULL, false },
	{ "localhost", 80, 0, "localhost", 80, 0, NULL, false },
	{ "1a.example", 80, 0, "1a.example", 80, 0, NULL, false },
	{ "h:1", 80, 0, "h", 1, 0, NULL, false },
	{ "h:65535", 80, 0, "h", 65535, 0, NULL, false },
	{ L63 ".example", 80, 0, L63 ".example", 80, 0, NULL, false },
	{ N250 ".ab", 80, 0, N250 ".ab", 80, 0, NULL, false },
	{ N250 ".ab.", 80, 0, N250 ".ab", 80, 0, NULL, false },
	{ "192.0.2.1", 80, 0, "192.0.2.1", 80, 4, NULL, false },
	{ "0.0.0.0:8080", 80, 0, "0.0.0.0", 8080, 4, NULL, false },
	{ "255.255.255.255", 80, 0, "255.255.255.255", 80, 4, NULL, false },
	{ "[::1]", 80, 0, "::1", 80, 6, NULL, false },
	{ "[2001:DB8::A]:443", 0, 0, "2001:db8::a", 443, 6, NULL, false },
	{ "[::ffff:127.0.0.1]:80", 0, 0, "::ffff:127.0.0.1", 80, 6, NULL, false },
	/* rejected */
	{ "", 80, -EINVAL, NULL, 0, 0, "empty-host", false },
	{ ":80", 80, -EINVAL, NULL, 0, 0, "empty-host", false },
	{ "user@example.com", 80, -EINVAL, NULL, 0, 0, "userinfo", false },
	{ "user:pw@example.com:80", 80, -EINVAL, NULL, 0, 0, "userinfo", false },
	{ "exa%6dple.com", 80, -EINVAL, NULL, 0, 0, "percent-encoded-host", false },
	{ "a_b.example", 80, -EINVAL, NULL, 0, 0, "bad-host", false },
	{ "-a.example", 80, -EINVAL, NULL, 0, 0, "bad-host", false },
	{ "a-.example", 80, -EINVAL, NULL, 0, 0, "bad-host", false },
	{ "a b.example", 80, -EINVAL, NULL, 0, 0, "bad-host", false },
	{ "caf\xc3\xa9.example", 80, -EINVAL, NULL, 0, 0, "bad-host", false },
	{ "a..example", 80, -EINVAL, NULL, 0, 0, "empty-label", false },
	{ ".example", 80, -EINVAL, NULL, 0, 0, "empty-label", false },
	{ ".", 80, -EINVAL, NULL, 0, 0, "empty-label", false },
	{ "example..", 80, -EINVAL, NULL, 0, 0, "empty-label", false },
	{ L63 "d.example", 80, -EINVAL, NULL, 0, 0, "label-too-long", false },
	{ N250 ".abc", 80, -EINVAL, NULL, 0, 0, "name-too-long", false },
	{ N250 "." N250, 80, -EINVAL, NULL, 0, 0, "name-too-long", false },
	{ "h", 0, -EINVAL, NULL, 0, 0, "missing-port", false },
	{ "h:", 80, -EINVAL, NULL, 0, 0, "bad-port", false },
	{ "h:0", 80, -EINVAL, NULL, 0, 0, "bad-port", false },
	{ "h:65536", 80, -EINVAL, NULL, 0, 0, "bad-port", false },
	{ "h:+80", 80, -EINVAL, NULL, 0, 0, "bad-port", false },
	{ "h:-1", 80, -EINVAL, NULL, 0, 0, "bad-port", false },
	{ "h:080", 80, -EINVAL, NULL, 0, 0, "bad-port", false },
	{ "h:123456", 80, -EINVAL, NULL, 0, 0, "bad-port", false },
	{ "h:8a", 80, -EINVAL, NULL, 0, 0, "bad-port", false },
	{ "h:80:80", 80, -EINVAL, NULL, 0, 0, "bad-port", false },
	{ "::1", 80, -EINVAL, NULL, 0, 0, "empty-host", false },
	{ "[::1", 80, -EINVAL, NULL, 0, 0, "bad-ipv6", false },
	{ "[::1]x", 80, -EINVAL, NULL, 0, 0, "bad-host", false },
	{ "[::1]:", 80, -EINVAL, NULL, 0, 0, "bad-port", false },
	{ "[::g]", 80, -EINVAL, NULL, 0, 0, "bad-ipv6", false },
	{ "[1.2.3.4]", 80, -EINVAL, NULL, 0, 0, "bad-ipv6", false },
	{ "[v1.fe]", 80, -EINVAL, NULL, 0, 0, "bad-ipv6", false },
	{ "[]", 80, -EINVAL, NULL, 0, 0, "bad-ipv6", false },
	{ "[1:2:3:4:5:6:7:8:9]", 80, -EINVAL, NULL, 0, 0, "bad-ipv6", false },
	{ "[fe80::1%25eth0]", 80, -EINVAL, NULL, 0, 0, "ipv6-zone", false },
	{ "[fe80::1%eth0]:80", 80, -EINVAL, NULL, 0, 0, "ipv6-zone", false },
	/* numbers in disguise */
	{ "127.1", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "0x7f.0.0.1", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "0x7F000001", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "2130706433", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "2130706433:443", 0, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "0177.0.0.1", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "127.000.000.001", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "127.0.0.01", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "1.2.3.4.", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "1.2.3.256", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "1.2.3.4.5", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "1.2.3.0x4", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "example.123", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "metadata.0x", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
	{ "0", 80, -EINVAL, NULL, 0, 0, "numeric-host", true },
};

static void test_authority(void **state)
{
	struct http_authority a;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(auth_cases) / sizeof(auth_cases[0]); i++) {
		const struct auth_case *t = &auth_cases[i];
		int r = http_parse_authority(t->in, strlen(t->in), t->def_port, &a);

		if (r != t->ret)
			fail_msg("'%s': got %d (%s)", t->in, r, a.error ? a.error : "");
		if (a.is_ambiguous_numeric != t->numeric)
			fail_msg("'%s': numeric %d", t->in, a.is_ambiguous_numeric);
		if (r < 0) {
			if (!a.error || strcmp(a.error, t->reason))
				fail_msg("'%s': reason %s, want %s", t->in, a.error ? a.error : "-",
					 t->reason);
			continue;
		}
		assert_null(a.error);
		assert_string_equal(a.host, t->host);
		assert_int_equal(a.host_len, strlen(t->host));
		assert_int_equal(a.port, t->port);
		assert_int_equal(a.is_literal, t->literal != 0);
		assert_int_equal(a.is_v6, t->literal == 6);
		if (t->literal) {
			char text[ADDR_STRLEN];

			addr_format(&a.addr, text, sizeof(text));
			if (t->literal == 4)
				assert_string_equal(text, t->host);
			assert_int_equal(addr_is_v4(&a.addr),
					 t->literal == 4 || strncmp(t->host, "::ffff:", 7) == 0);
		}
	}
}

static void test_authority_not_terminated(void **state)
{
	/* Only @len bytes are read: the rest of the buffer is no part of it. */
	static const char buf[] = "example.com:8080garbage";
	struct http_authority a, b;

	(void)state;
	assert_int_equal(http_parse_authority(buf, 11, 80, &a), 0);
	assert_string_equal(a.host, "example.com");
	assert_int_equal(a.port, 80);
	assert_false(a.port_given);
	assert_int_equal(http_parse_authority(buf, 16, 80, &b), 0);
	assert_int_equal(b.port, 8080);
	assert_true(b.port_given);
	assert_false(http_authority_equal(&a, &b));
	assert_int_equal(http_parse_authority("EXAMPLE.com.:80", 15, 443, &b), 0);
	assert_true(http_authority_equal(&a, &b));
	assert_int_equal(http_parse_authority("[::1]", 5, 80, &a), 0);
	assert_int_equal(http_parse_authority("[0:0::1]:80", 11, 443, &b), 0);
	assert_true(http_authority_equal(&a, &b));
}

/* ---- responses ----------------------------------------------------------- */

struct resp_case {
	const char *in;
	size_t len;
	bool head_request;
	int ret; /* >0: head length; 0 in the table means "whole input" */
	const char *reason;
	uint16_t status;
	const char *location; /* NULL: none */
	int64_t content_length;
	bool chunked, keep_alive, no_body, until_close;
};

static const struct resp_case resp_cases[] = {
	{ S("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"), false,
	  (int)sizeof("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n") - 1, NULL, 200, NULL, 3,
	  false, true, false, false },
	{ S("HTTP/1.1 302 Found\r\nLocation:  http://evil.example/ \r\n"
	    "Content-Length: 0\r\n\r\n"),
	  false, 0, NULL, 302, "http://evil.example/", 0, false, true, false, false },
	{ S("HTTP/1.0 200 OK\r\n\r\n"), false, 0, NULL, 200, NULL, -1, false, false, false, true },
	{ S("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n"), false, 0,
	  NULL, 200, NULL, 1, false, true, false, false },
	{ S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	    "Connection: close\r\n\r\n"),
	  false, 0, NULL, 200, NULL, -1, true, false, false, false },
	{ S("HTTP/1.1 204 No Content\r\n\r\n"), false, 0, NULL, 204, NULL, -1, false, true, true,
	  false },
	{ S("HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n"), false, 0, NULL, 304, NULL,
	  99, false, true, true, false },
	{ S("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"), true, 0, NULL, 200, NULL, 1000,
	  false, true, true, false },
	{ S("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"), false,
	  (int)sizeof("HTTP/1.1 100 Continue\r\n\r\n") - 1, NULL, 100, NULL, -1, false, true, true,
	  false },
	{ S("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"), false, 0, NULL, 200, NULL, 0, false, true,
	  false, false },
	{ S("HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n"), false, 0, NULL, 404, NULL, 0, false,
	  true, false, false },
	/* rejected */
	{ S("HTTP/1.1 302 Found\r\nLocation: /a\r\nLocation: http://evil/\r\n\r\n"), false,
	  -EBADMSG, "duplicate-location" },
	{ S("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"), false,
	  -EBADMSG, "cl-and-te" },
	{ S("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), false, -EBADMSG,
	  "duplicate-content-length" },
	{ S("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"), false, -EBADMSG,
	  "bad-transfer-encoding" },
	{ S("HTTP/1.1 20 OK\r\n\r\n"), false, -EBADMSG, "bad-status-line" },
	{ S("HTTP/1.1 2000 OK\r\n\r\n"), false, -EBADMSG, "bad-status-line" },
	{ S("HTTP/1.1 600 Odd\r\n\r\n"), false, -EBADMSG, "bad-status-line" },
	{ S("HTTP/1.1 099 Odd\r\n\r\n"), false, -EBADMSG, "bad-status-line" },
	{ S("HTTP/2 200 OK\r\n\r\n"), false, -EBADMSG, "bad-status-line" },
	{ S("HTTP/2.0 200 OK\r\n\r\n"), false, -EBADMSG, "unsupported-version" },
	{ S("\r\nHTTP/1.1 200 OK\r\n\r\n"), false, -EBADMSG, "bad-status-line" },
	{ S("HTTP/1.1 200 OK\nContent-Length: 0\n\n"), false, -EBADMSG, "bare-lf" },
	{ S("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n"), false, -EBADMSG, "obs-fold" },
	{ S("HTTP/1.1 200 OK\r\nLocation: /a\0b\r\n\r\n"), false, -EBADMSG, "invalid-character" },
};

static void test_responses(void **state)
{
	struct http_response resp;
	size_t i, k;

	(void)state;
	for (i = 0; i < sizeof(resp_cases) / sizeof(resp_cases[0]); i++) {
		const struct resp_case *t = &resp_cases[i];
		int want = t->ret ? t->ret : (int)t->len;
		int r = http_parse_response(t->in, t->len, MAX_HEAD, t->head_request, &resp);

		if (r != want || (r < 0 && strcmp(resp.error, t->reason)))
			fail_msg("case %zu: got %d (%s), want %d (%s)", i, r,
				 resp.error ? resp.error : "-", want, t->reason ? t->reason : "-");
		/* Every prefix: 0, or already the final answer. */
		for (k = 0; k < t->len; k++) {
			struct http_response part;
			int pr = http_parse_response(t->in, k, MAX_HEAD, t->head_request, &part);

			if (pr != 0 && pr != want)
				fail_msg("case %zu prefix %zu: %d", i, k, pr);
		}
		if (r < 0)
			continue;
		assert_null(resp.error);
		assert_int_equal(resp.status, t->status);
		assert_int_equal(resp.has_location, t->location != NULL);
		if (t->location)
			assert_slice(resp.location, t->location);
		assert_int_equal(resp.has_content_length, t->content_length >= 0);
		if (t->content_length >= 0)
			assert_int_equal(resp.content_length, t->content_length);
		assert_int_equal(resp.chunked, t->chunked);
		if (resp.keep_alive != t->keep_alive || resp.no_body != t->no_body ||
		    resp.body_until_close != t->until_close)
			fail_msg("case %zu: keep_alive %d no_body %d until_close %d", i,
				 resp.keep_alive, resp.no_body, resp.body_until_close);
	}
	assert_int_equal(http_parse_response("HTTP/1.1 200 OK\r\n", 17, 17, false, &resp),
			 -EMSGSIZE);
	assert_string_equal(resp.error, "head-too-large");
}

/* ---- Location ------------------------------------------------------------ */

struct loc_case {
	const char *in;
	enum http_scheme base_scheme;
	int ret;
	enum http_scheme scheme;
	const char *host;
	uint16_t port;
	const char *path;
	bool relative;
};

static const struct loc_case loc_cases[] = {
	{ "http://other.example/x", HTTP_SCHEME_HTTP, 0, HTTP_SCHEME_HTTP, "other.example", 80,
	  "/x", false },
	{ "https://Other.Example:8443/y?z#frag", HTTP_SCHEME_HTTP, 0, HTTP_SCHEME_HTTPS,
	  "other.example", 8443, "/y?z", false },
	{ "HTTPS://other.example", HTTP_SCHEME_HTTP, 0, HTTP_SCHEME_HTTPS, "other.example", 443, "",
	  false },
	{ "http://other.example?q", HTTP_SCHEME_HTTPS, 0, HTTP_SCHEME_HTTP, "other.example", 80,
	  "?q", false },
	{ "//cdn.example/a", HTTP_SCHEME_HTTP, 0, HTTP_SCHEME_HTTP, "cdn.example", 80, "/a",
	  false },
	{ "//cdn.example/a", HTTP_SCHEME_HTTPS, 0, HTTP_SCHEME_HTTPS, "cdn.example", 443, "/a",
	  false },
	{ "//[2001:db8::1]:81", HTTP_SCHEME_HTTP, 0, HTTP_SCHEME_HTTP, "2001:db8::1", 81, "",
	  false },
	{ "/login?next=http://evil/", HTTP_SCHEME_HTTP, 0, HTTP_SCHEME_HTTP, "api.example", 8080,
	  "/login?next=http://evil/", true },
	{ "next?page=2", HTTP_SCHEME_HTTPS, 0, HTTP_SCHEME_HTTPS, "api.example", 8080,
	  "next?page=2", true },
	{ "./a:b", HTTP_SCHEME_HTTP, 0, HTTP_SCHEME_HTTP, "api.example", 8080, "./a:b", true },
	{ "", HTTP_SCHEME_HTTP, 0, HTTP_SCHEME_HTTP, "api.example", 8080, "", true },
	{ "#top", HTTP_SCHEME_HTTP, 0, HTTP_SCHEME_HTTP, "api.example", 8080, "", true },
	/* refused: spellings a browser reads as another host */
	{ "/\\evil.example", HTTP_SCHEME_HTTP, -EINVAL },
	{ "\\\\evil.example", HTTP_SCHEME_HTTP, -EINVAL },
	{ "http:\\\\evil.example", HTTP_SCHEME_HTTP, -EINVAL },
	{ "/\t/evil.example", HTTP_SCHEME_HTTP, -EINVAL },
	{ " //evil.example", HTTP_SCHEME_HTTP, -EINVAL },
	{ "http:evil.example", HTTP_SCHEME_HTTP, -EINVAL },
	{ "https:/evil.example", HTTP_SCHEME_HTTP, -EINVAL },
	{ "http:///evil.example", HTTP_SCHEME_HTTP, -EINVAL },
	{ "///evil.example", HTTP_SCHEME_HTTP, -EINVAL },
	{ "http://user@evil.example/", HTTP_SCHEME_HTTP, -EINVAL },
	{ "http://good.example@evil.example/", HTTP_SCHEME_HTTP, -EINVAL },
	{ "http://127.1/", HTTP_SCHEME_HTTP, -EINVAL },
	{ "http://evil%2eexample/", HTTP_SCHEME_HTTP, -EINVAL },
	{ "http://evil.example:0/", HTTP_SCHEME_HTTP, -EINVAL },
	{ "http://\xe2\x80\xa8"
	  "evil/",
	  HTTP_SCHEME_HTTP, -EINVAL },
	{ "ftp://evil.example/", HTTP_SCHEME_HTTP, -EPROTONOSUPPORT },
	{ "javascript:alert(1)", HTTP_SCHEME_HTTP, -EPROTONOSUPPORT },
	{ "/relative", HTTP_SCHEME_NONE, -EINVAL },
};

static void test_location(void **state)
{
	struct http_authority base;
	struct http_url url;
	size_t i;
	int r;

	(void)state;
	assert_int_equal(http_parse_authority("api.example:8080", 16, 80, &base), 0);
	for (i = 0; i < sizeof(loc_cases) / sizeof(loc_cases[0]); i++) {
		const struct loc_case *t = &loc_cases[i];

		r = http_parse_location(t->in, strlen(t->in), t->base_scheme, &base, &url);
		if (r != t->ret)
			fail_msg("'%s': got %d want %d", t->in, r, t->ret);
		if (r < 0)
			continue;
		assert_int_equal(url.scheme, t->scheme);
		assert_string_equal(url.authority.host, t->host);
		assert_int_equal(url.authority.port, t->port);
		assert_slice(url.path, t->path);
		assert_int_equal(url.relative, t->relative);
	}
	/* A numeric host is flagged for the address-literal answer. */
	assert_int_equal(http_parse_location("http://0x7f.1/", 14, HTTP_SCHEME_HTTP, &base, &url),
			 -EINVAL);
	assert_true(url.authority.is_ambiguous_numeric);
	/* No base: a relative Location cannot be placed. */
	assert_int_equal(http_parse_location("/x", 2, HTTP_SCHEME_HTTP, NULL, &url), -EINVAL);
	assert_int_equal(http_parse_location("http://h/", 9, HTTP_SCHEME_HTTP, NULL, &url), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_requests),
		cmocka_unit_test(test_request_details),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_path_ambiguous),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_too_many_headers),
		cmocka_unit_test(test_head_size),
		cmocka_unit_test(test_write_filters_and_replaces),
		cmocka_unit_test(test_write_forms),
		cmocka_unit_test(test_write_errors),
		cmocka_unit_test(test_hop_by_hop),
		cmocka_unit_test(test_authority),
		cmocka_unit_test(test_authority_not_terminated),
		cmocka_unit_test(test_responses),
		cmocka_unit_test(test_location),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
