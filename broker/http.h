/* SPDX-License-Identifier: MIT */
/* Strict parsers of untrusted HTTP/1.x heads, authorities and Locations. */
#ifndef SLUICE_BROKER_HTTP_H
#define SLUICE_BROKER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* struct http_authority holds an address by value, so it needs the type. */
#include "common/addr.h"

/* More header lines than this in one head is refused ("too-many-headers"). */
#define HTTP_MAX_HEADERS 100
/* Default for the broker's head buffer (configurable). */
#define HTTP_DEFAULT_MAX_HEAD (16 * 1024)

/*
 * A view into the caller's buffer: never NUL-terminated, valid only while
 * that buffer is.  An empty slice points at a static "" (never NULL).
 */
struct http_slice {
	const char *ptr;
	size_t len;
};

struct http_header {
	struct http_slice name;	 /* as sent (case preserved), a valid token */
	struct http_slice value; /* leading and trailing SP/HTAB trimmed */
};

enum http_method {
	HTTP_METHOD_OTHER = 0, /* another method llhttp knows (PROPFIND...) */
	HTTP_METHOD_CONNECT,
	HTTP_METHOD_GET,
	HTTP_METHOD_HEAD,
	HTTP_METHOD_POST,
	HTTP_METHOD_PUT,
	HTTP_METHOD_DELETE,
	HTTP_METHOD_PATCH,
	HTTP_METHOD_OPTIONS,
};

enum http_scheme {
	HTTP_SCHEME_NONE = 0,
	HTTP_SCHEME_HTTP,
	HTTP_SCHEME_HTTPS,
};

enum http_target_form {
	HTTP_FORM_AUTHORITY = 1, /* CONNECT host:port */
	HTTP_FORM_ABSOLUTE,	 /* http://host[:port]/path?query (explicit) */
	HTTP_FORM_ORIGIN,	 /* /path?query (transparent; Host names it) */
};

/*
 * A checked host and port.  @host is NUL-terminated and canonical: a DNS
 * name lowercased without its trailing dot, a strict dotted-quad IPv4
 * literal, or an IPv6 literal lowercased WITHOUT its brackets (see @is_v6).
 */
struct http_authority {
	char host[256];
	size_t host_len;
	uint16_t port;	 /* the given port, else the default port */
	bool port_given; /* the text carried ":port" */
	bool is_literal; /* an address literal: @addr is set */
	bool is_v6;	 /* it was a bracketed IPv6 literal */
	/*
	 * Set on failure when the host is a number in disguise (127.1,
	 * 0x7f.0.0.1, 2130706433, 0177.0.0.1, 1.2.3.4., any name whose last
	 * label is numeric): resolvers would treat it as an address, so the
	 * broker refuses it as an address literal (403), never resolves it.
	 */
	bool is_ambiguous_numeric;
	struct sl_addr addr;
	const char *error; /* static reason on failure, else NULL */
};

struct http_request {
	struct http_slice method;
	enum http_method method_id;
	struct http_slice target; /* the raw request-target */
	uint8_t version_minor;	  /* HTTP/1.<minor>: 0 or 1 */
	enum http_target_form form;
	enum http_scheme scheme; /* HTTP_SCHEME_HTTP for absolute-form */
	/*
	 * The host the request is for: the CONNECT target, the absolute URI's
	 * authority (port default 80), or for origin-form the Host header
	 * (port 80 unless given: on an intercepted TLS connection the caller
	 * applies 443 when !port_given).  Not set (has_authority false) for an
	 * origin-form HTTP/1.0 request without Host.
	 */
	struct http_authority authority;
	bool has_authority;
	/*
	 * Not CONNECT: @path_query is the target's path and query as sent
	 * (for absolute-form, what follows the authority; "/" when nothing
	 * does; it starts with '?' for "http://h?q").  @path is the path
	 * alone ("/" if empty), @query the text after '?' (@has_query).
	 */
	struct http_slice path_query;
	struct http_slice path;
	struct http_slice query;
	bool has_query;
	/*
	 * The path holds a "." or ".." segment, or an encoded '/' or '\',
	 * (literal or percent-encoded): an origin server may resolve it to
	 * another path than it reads as, so path-scoped decisions (credential
	 * scopes) must not trust a prefix match on it.
	 */
	bool path_ambiguous;
	struct http_header headers[HTTP_MAX_HEADERS];
	size_t nheaders;
	bool has_content_length;
	uint64_t content_length;
	bool chunked;
	bool keep_alive;
	const char *error; /* static reason on failure or NULL */
};

struct http_response {
	uint16_t status;
	uint8_t version_minor;
	struct http_slice reason; /* reason phrase, may be empty */
	struct http_header headers[HTTP_MAX_HEADERS];
	size_t nheaders;
	struct http_slice location; /* trimmed value, if @has_location */
	bool has_location;
	bool has_content_length;
	uint64_t content_length;
	bool chunked;
	bool keep_alive;
	/* 1xx, 204, 304, or an answer to HEAD: no body, whatever the headers */
	bool no_body;
	/* a body that ends when the server closes (no length, not chunked) */
	bool body_until_close;
	const char *error;
};

/* A Location resolved against the request it answers. */
struct http_url {
	enum http_scheme scheme;
	struct http_authority authority; /* port defaulted by scheme */
	struct http_slice path;		 /* path and query as written, no #frag */
	bool relative;			 /* no authority: @authority is the base */
};

/*
 * A header the broker sets on the upstream request; it replaces any
 * client header of the same name.  @value may be a secret: it is copied
 * into the output only, never logged.
 */
struct http_set_header {
	const char *name; /* NUL-terminated token */
	const char *value;
	size_t value_len;
};

/**
 * http_parse_request() - parse and check one request head, strictly
 * @buf:      bytes received so far (not NUL-terminated); read only below @len
 * @len:      number of bytes in @buf
 * @max_head: largest head accepted, blank line included
 * @req:      filled with slices into @buf; req->error names a failure
 *
 * Bytes after the head (a body, a pipelined request) are left alone.
 * The result depends only on the bytes, not on how they were split
 * across calls.  Reasons include bad-request-line, bad-method, bad-target,
 * bad-scheme, unsupported-version, bare-cr, bare-lf, obs-fold,
 * invalid-character, too-many-headers, cl-and-te,
 * duplicate-content-length, bad-content-length, bad-transfer-encoding,
 * missing-host, duplicate-host, bad-host, host-mismatch, numeric-host,
 * userinfo, head-too-large.
 *
 * Return: the head's length (> 0) when complete; 0 when more bytes are
 * needed; -EMSGSIZE when the head exceeds @max_head; -EBADMSG when malformed.
 */
int http_parse_request(const char *buf, size_t len, size_t max_head, struct http_request *req);

/**
 * http_parse_response() - parse and check one response head, strictly
 * @buf:          bytes received so far (not NUL-terminated)
 * @len:          number of bytes in @buf
 * @max_head:     largest head accepted
 * @head_request: the request was HEAD (the response then has no body)
 * @resp:         filled with slices into @buf; resp->error names a failure
 *
 * Return: as http_parse_request().
 */
int http_parse_response(const char *buf, size_t len, size_t max_head, bool head_request,
			struct http_response *resp);

/**
 * http_find_header() - first header of a name, case-insensitively
 * @req:  a request http_parse_request() accepted
 * @name: NUL-terminated header name
 *
 * Return: the header, or NULL.
 */
const struct http_header *http_find_header(const struct http_request *req, const char *name);

/* RFC 9110 5.6.2: is @c a tchar; is @s (@len bytes, at least one) a token? */
bool http_is_tchar(unsigned char c);
bool http_is_token(const char *s, size_t len);

/* The next element of a comma-separated list (RFC 9110 5.6.1) from *@pos
 * up to @end, OWS trimmed, empty elements skipped, into @item; false at the
 * end of the list. */
bool http_list_next(const char **pos, const char *end, struct http_slice *item);

/**
 * http_is_hop_by_hop() - whether a header must not be forwarded
 * @name: header name (not NUL-terminated)
 * @len:  its length
 *
 * Return: true for Connection, Keep-Alive, TE, Trailer, Transfer-Encoding,
 * Upgrade and every Proxy-* name (case-insensitive).
 */
bool http_is_hop_by_hop(const char *name, size_t len);

/**
 * http_write_request_head() - the head to send upstream, in origin-form
 * @req:    a non-CONNECT request http_parse_request() accepted
 * @out:    output buffer (not NUL-terminated on return)
 * @outlen: its size
 * @set:    headers to set, replacing client headers of the same names
 *          (case-insensitive); may be NULL when @nset is 0.  A "Host"
 *          entry replaces the Host line.  Framing and hop-by-hop names
 *          (Content-Length, Transfer-Encoding, Connection, Proxy-*, ...)
 *          are refused.
 * @nset:   number of entries in @set
 *
 * Writes "METHOD path?query HTTP/1.1", Host first, the client's headers
 * except hop-by-hop ones, Proxy-*, names listed in Connection and names
 * in @set, then @set, "Transfer-Encoding: chunked" for a chunked body and
 * "Connection: keep-alive" or "close".  The output may hold a secret from
 * @set: the caller wipes it after use.  On failure @out is wiped.
 *
 * Return: the length written; -ENOSPC when @outlen is too small; -EINVAL
 * for CONNECT, no known host, or a bad @set entry (a value with CR, LF,
 * NUL or another control character, a name that is not a token).
 */
int http_write_request_head(const struct http_request *req, char *out, size_t outlen,
			    const struct http_set_header *set, size_t nset);

/**
 * http_write_request_head_target() - http_write_request_head() with
 *                                    another request target
 * @req:        as for http_write_request_head()
 * @target:     path and query to send instead of req->path_query (a '/' is
 *              put before it when it does not start with one); NULL keeps
 *              req->path_query
 * @target_len: its length
 * @out, @outlen, @set, @nset: as for http_write_request_head()
 *
 * For credential injection, which may put a secret into the path or the
 * query.  @target must hold no space or control character.
 *
 * Return: as http_write_request_head(); -EINVAL for a bad @target.
 */
int http_write_request_head_target(const struct http_request *req, const char *target,
				   size_t target_len, char *out, size_t outlen,
				   const struct http_set_header *set, size_t nset);

/**
 * http_parse_authority() - parse host[:port] strictly (authority.c)
 * @s:            text, not NUL-terminated
 * @len:          its length
 * @default_port: port when none is given; 0 makes the port required
 * @a:            result; a->error names a failure
 *
 * Accepts an LDH DNS name (labels 1..63, total <= 253, one trailing dot
 * dropped, lowercased), a strict dotted-quad IPv4 literal, or a bracketed
 * IPv6 literal without zone.  Port: 1..65535, decimal digits, no leading
 * zero.  Refuses userinfo, percent-encoding, underscores and numeric
 * spellings other than a strict dotted quad (is_ambiguous_numeric,
 * "numeric-host").
 *
 * Return: 0, or -EINVAL.
 */
int http_parse_authority(const char *s, size_t len, uint16_t default_port,
			 struct http_authority *a);

/**
 * http_authority_equal() - same host and port
 * @a: an authority http_parse_authority() accepted
 * @b: another
 *
 * Names compare as their canonical text, literals as addresses.
 *
 * Return: true when equal.
 */
bool http_authority_equal(const struct http_authority *a, const struct http_authority *b);

/**
 * http_parse_location() - resolve a Location value against its request
 * @loc:         the value (trimmed), not NUL-terminated
 * @len:         its length
 * @base_scheme: scheme of the request (HTTP_SCHEME_HTTP or _HTTPS)
 * @base:        authority of the request; may be NULL if unknown
 * @out:         the target's scheme, authority (port defaulted by scheme)
 *               and path; out->path points into @loc
 *
 * Takes http(s)://host[:port]/..., //host/... and relative references.
 * Anything a browser could read as another host is refused: backslashes,
 * whitespace or control characters, "http:host" without "//", userinfo.
 *
 * Return: 0; -EPROTONOSUPPORT for a well-formed non-HTTP scheme; -EINVAL
 * when malformed (or relative with no @base).
 */
int http_parse_location(const char *loc, size_t len, enum http_scheme base_scheme,
			const struct http_authority *base, struct http_url *out);

#endif
