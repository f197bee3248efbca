// SPDX-License-Identifier: MIT
/* Strict HTTP/1.x head parsing (llhttp), upstream head writing, Location. */

/*
 * Theory of operation
 *
 * Every byte here comes from a sandbox (requests) or from the internet
 * (responses), and a proxy that reads a message differently from the
 * server behind it is how requests get smuggled.  So a head is accepted
 * only if it is unambiguous, in three passes over the bytes:
 *
 *  1. head_scan() finds the blank line that ends the head, looking at no
 *     more than max_head bytes, and refuses framing tricks on the way:
 *     bare CR, bare LF (also LF-only line ends), obs-fold, NUL and other
 *     control characters.  It is a pure function of the prefix it has
 *     seen, so feeding bytes one at a time gives the same answer as
 *     feeding them all at once.
 *  2. The start line is checked by hand (exact single spaces, HTTP/1.0 or
 *     1.1): Debian's llhttp is built without LLHTTP_STRICT_MODE, and its
 *     loose mode accepts extra spaces there.
 *  3. llhttp (no lenient flags) tokenizes exactly the head and nothing
 *     after it; its on_headers_complete pauses it so that a body or a
 *     pipelined request is never touched.  Callbacks record the headers
 *     as slices into the caller's buffer and refuse conflicting framing
 *     headers as soon as their names are seen.
 *
 * Nothing is allocated: the headers live in the caller's struct.
 */

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <llhttp.h>

#include "broker/http.h"
#include "common/obuf.h"
#include "common/text.h"

struct head_ctx {
	struct http_header *hdr;
	size_t *nhdr;
	const char *error;
	bool is_request;
	bool in_field;
	bool in_value;
	bool headers_done;
	enum {
		HK_OTHER,
		HK_CONTENT_LENGTH,
		HK_TRANSFER_ENCODING,
		HK_HOST,
		HK_LOCATION,
	} cur;
	unsigned n_cl, n_te, n_host, n_location;
	bool has_cl;
	uint64_t cl;
	bool chunked;
	size_t host_idx;
	size_t location_idx;
};

static const char empty[] = "";

bool http_is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_hexdig(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool slice_eq_ci(struct http_slice s, const char *lit)
{
	return text_eq_ci(s.ptr, s.len, lit, strlen(lit));
}

bool http_is_token(const char *s, size_t len)
{
	size_t i;

	if (len == 0)
		return false;
	for (i = 0; i < len; i++)
		if (!http_is_tchar((unsigned char)s[i]))
			return false;
	return true;
}

/*
 * Next element of a comma-separated list (RFC 9110 5.6.1), OWS trimmed;
 * empty elements are skipped.  Return: false at the end of the list.
 */
bool http_list_next(const char **pos, const char *end, struct http_slice *item)
{
	const char *p = *pos, *s, *e;

	while (p < end) {
		s = p;
		while (p < end && *p != ',')
			p++;
		e = p;
		if (p < end)
			p++;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (e > s) {
			item->ptr = s;
			item->len = (size_t)(e - s);
			*pos = p;
			return true;
		}
	}
	*pos = p;
	return false;
}

/*
 * Finds the end of the head in buf[0..min(len, max_head)), refusing bad
 * framing on the way.  Return: head length, 0 for more, or -errno with
 * *why set.
 */
static int head_scan(const char *buf, size_t len, size_t max_head, const char *bad_start,
		     const char **why)
{
	size_t lim, i;

	/* Head lengths are returned as int. */
	if (max_head > INT_MAX)
		max_head = INT_MAX;
	lim = len < max_head ? len : max_head;

	/* No empty lines before the start line: a stray CRLF after a body
	 * is how request boundaries get confused. */
	if (lim > 0 && (buf[0] == '\r' || buf[0] == '\n')) {
		*why = bad_start;
		return -EBADMSG;
	}
	for (i = 0; i < lim; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c == '\r') {
			if (i + 1 == lim)
				break;
			if (buf[i + 1] != '\n') {
				*why = "bare-cr";
				return -EBADMSG;
			}
			i++;
			if (i + 1 == lim)
				break;
			c = (unsigned char)buf[i + 1];
			if (c == ' ' || c == '\t') {
				*why = "obs-fold";
				return -EBADMSG;
			}
			if (c == '\r') {
				if (i + 2 == lim)
					break;
				if (buf[i + 2] != '\n') {
					*why = "bare-cr";
					return -EBADMSG;
				}
				return (int)(i + 3);
			}
			continue;
		}
		if (c == '\n') {
			*why = "bare-lf";
			return -EBADMSG;
		}
		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			*why = "invalid-character";
			return -EBADMSG;
		}
	}
	if (len >= max_head) {
		*why = "head-too-large";
		return -EMSGSIZE;
	}
	return 0;
}

/* ---- llhttp callbacks ---------------------------------------------------- */

static int ctx_fail(struct head_ctx *c, const char *why)
{
	if (!c->error)
		c->error = why;
	return HPE_USER;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
	struct head_ctx *c = p->data;
	struct http_header *h;

	if (c->in_field) {
		h = &c->hdr[*c->nhdr - 1];
		h->name.len = (size_t)(at + n - h->name.ptr);
		return 0;
	}
	if (*c->nhdr == HTTP_MAX_HEADERS)
		return ctx_fail(c, "too-many-headers");
	h = &c->hdr[(*c->nhdr)++];
	h->name.ptr = at;
	h->name.len = n;
	h->value.ptr = empty;
	h->value.len = 0;
	c->in_field = true;
	c->in_value = false;
	return 0;
}

/*
 * The name is complete but llhttp has not looked at the value yet: refuse
 * conflicting framing headers here, so the reason is ours, not llhttp's.
 */
static int on_header_field_complete(llhttp_t *p)
{
	struct head_ctx *c = p->data;
	struct http_header *h;

	if (!c->in_field || *c->nhdr == 0)
		return ctx_fail(c, "invalid-character");
	c->in_field = false;
	h = &c->hdr[*c->nhdr - 1];
	if (!http_is_token(h->name.ptr, h->name.len))
		return ctx_fail(c, "invalid-character");

	c->cur = HK_OTHER;
	if (slice_eq_ci(h->name, "Content-Length")) {
		c->cur = HK_CONTENT_LENGTH;
		if (c->n_cl++)
			return ctx_fail(c, "duplicate-content-length");
		if (c->n_te)
			return ctx_fail(c, "cl-and-te");
	} else if (slice_eq_ci(h->name, "Transfer-Encoding")) {
		c->cur = HK_TRANSFER_ENCODING;
		if (c->n_cl)
			return ctx_fail(c, "cl-and-te");
		/* Two lines are a list ("chunked, chunked"), never exactly one
		 * "chunked". */
		if (c->n_te++)
			return ctx_fail(c, "bad-transfer-encoding");
	} else if (c->is_request && slice_eq_ci(h->name, "Host")) {
		c->cur = HK_HOST;
		if (c->n_host++)
			return ctx_fail(c, "duplicate-host");
		c->host_idx = *c->nhdr - 1;
	} else if (!c->is_request && slice_eq_ci(h->name, "Location")) {
		c->cur = HK_LOCATION;
		/* Two Locations: which one the client follows is anyone's
		 * guess, so the redirect check could check the wrong one. */
		if (c->n_location++)
			return ctx_fail(c, "duplicate-location");
		c->location_idx = *c->nhdr - 1;
	}
	return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
	struct head_ctx *c = p->data;
	struct http_header *h;

	if (*c->nhdr == 0)
		return ctx_fail(c, "invalid-character");
	h = &c->hdr[*c->nhdr - 1];
	if (c->in_value) {
		h->value.len = (size_t)(at + n - h->value.ptr);
		return 0;
	}
	h->value.ptr = n ? at : empty;
	h->value.len = n;
	c->in_value = true;
	return 0;
}

static int parse_content_length(struct http_slice v, uint64_t *out)
{
	uint64_t x = 0;
	size_t i;

	if (v.len == 0)
		return -EINVAL;
	for (i = 0; i < v.len; i++) {
		unsigned d;

		if (v.ptr[i] < '0' || v.ptr[i] > '9')
			return -EINVAL;
		d = (unsigned)(v.ptr[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -EINVAL;
		x = x * 10 + d;
	}
	*out = x;
	return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
	struct head_ctx *c = p->data;
	struct http_header *h;
	const char *s, *e;
	size_t i;

	if (*c->nhdr == 0)
		return ctx_fail(c, "invalid-character");
	c->in_value = false;
	h = &c->hdr[*c->nhdr - 1];
	s = h->value.ptr;
	e = s + h->value.len;
	while (s < e && (*s == ' ' || *s == '\t'))
		s++;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	h->value.ptr = e > s ? s : empty;
	h->value.len = (size_t)(e - s);
	/* head_scan() already refused control characters in the whole head;
	 * this keeps the promise local to the value in case llhttp's spans
	 * ever reach outside it. */
	for (i = 0; i < h->value.len; i++) {
		unsigned char ch = (unsigned char)h->value.ptr[i];

		if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			return ctx_fail(c, "invalid-character");
	}

	switch (c->cur) {
	case HK_CONTENT_LENGTH:
		if (parse_content_length(h->value, &c->cl) < 0)
			return ctx_fail(c, "bad-content-length");
		c->has_cl = true;
		break;
	case HK_TRANSFER_ENCODING:
		/* Exactly "chunked": anything else leaves the body length to
		 * interpretation. */
		if (!slice_eq_ci(h->value, "chunked"))
			return ctx_fail(c, "bad-transfer-encoding");
		c->chunked = true;
		break;
	default:
		break;
	}
	return 0;
}

static int on_headers_complete(llhttp_t *p)
{
	struct head_ctx *c = p->data;

	c->headers_done = true;
	/* Stop right after the blank line: the body and any pipelined
	 * request stay the caller's. */
	return HPE_PAUSED;
}

static const llhttp_settings_t head_settings = {
	.on_header_field = on_header_field,
	.on_header_field_complete = on_header_field_complete,
	.on_header_value = on_header_value,
	.on_header_value_complete = on_header_value_complete,
	.on_headers_complete = on_headers_complete,
};

static const char *llhttp_reason(llhttp_errno_t e)
{
	switch (e) {
	case HPE_INVALID_HEADER_TOKEN:
		return "invalid-character";
	case HPE_INVALID_METHOD:
		return "bad-method";
	case HPE_INVALID_URL:
		return "bad-target";
	case HPE_INVALID_VERSION:
		return "unsupported-version";
	case HPE_INVALID_CONTENT_LENGTH:
		return "bad-content-length";
	case HPE_UNEXPECTED_CONTENT_LENGTH:
		return "cl-and-te";
	case HPE_INVALID_TRANSFER_ENCODING:
		return "bad-transfer-encoding";
	case HPE_INVALID_STATUS:
		return "bad-status-line";
	default:
		return "bad-message";
	}
}

/* Runs llhttp over exactly the head. Return: 0, or -EBADMSG with c->error. */
static int run_llhttp(llhttp_type_t type, const char *buf, size_t head_len, struct head_ctx *c)
{
	llhttp_t parser;
	llhttp_errno_t e;

	llhttp_init(&parser, type, &head_settings);
	parser.data = c;
	e = llhttp_execute(&parser, buf, head_len);
	if (c->error)
		return -EBADMSG;
	if (e != HPE_PAUSED && e != HPE_PAUSED_UPGRADE) {
		c->error = llhttp_reason(e);
		return -EBADMSG;
	}
	/* llhttp must agree with head_scan() on where the head ends. */
	if (!c->headers_done || llhttp_get_error_pos(&parser) != buf + head_len) {
		c->error = "bad-message";
		return -EBADMSG;
	}
	return 0;
}

/* ---- request ------------------------------------------------------------- */

static enum http_method method_id(struct http_slice m)
{
	static const struct {
		const char *name;
		enum http_method id;
	} tab[] = {
		{ "CONNECT", HTTP_METHOD_CONNECT }, { "GET", HTTP_METHOD_GET },
		{ "HEAD", HTTP_METHOD_HEAD },	    { "POST", HTTP_METHOD_POST },
		{ "PUT", HTTP_METHOD_PUT },	    { "DELETE", HTTP_METHOD_DELETE },
		{ "PATCH", HTTP_METHOD_PATCH },	    { "OPTIONS", HTTP_METHOD_OPTIONS },
	};
	size_t i;

	/* Methods are case-sensitive (RFC 9110 9.1). */
	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (m.len == strlen(tab[i].name) && memcmp(m.ptr, tab[i].name, m.len) == 0)
			return tab[i].id;
	return HTTP_METHOD_OTHER;
}

/*
 * "HTTP/" DIGIT "." DIGIT, exactly, at @s.  Return: the minor version of
 * 1.0 and 1.1; -ENOTSUP for another well-formed version; -EINVAL otherwise.
 */
static int parse_version(const char *s, size_t len)
{
	if (len != 8 || memcmp(s, "HTTP/", 5) != 0 || s[6] != '.')
		return -EINVAL;
	if (s[5] < '0' || s[5] > '9' || s[7] < '0' || s[7] > '9')
		return -EINVAL;
	if (s[5] != '1' || (s[7] != '0' && s[7] != '1'))
		return -ENOTSUP;
	return s[7] - '0';
}

static int request_line(const char *buf, size_t line_len, struct http_request *req)
{
	size_t i = 0, t;
	int v;

	while (i < line_len && http_is_tchar((unsigned char)buf[i]))
		i++;
	if (i == 0 || i == line_len || buf[i] != ' ')
		return -EINVAL;
	req->method.ptr = buf;
	req->method.len = i;
	req->method_id = method_id(req->method);

	t = ++i;
	while (i < line_len && buf[i] != ' ')
		i++;
	if (i == t || i == line_len)
		return -EINVAL;
	req->target.ptr = buf + t;
	req->target.len = i - t;

	v = parse_version(buf + i + 1, line_len - i - 1);
	if (v == -ENOTSUP) {
		req->error = "unsupported-version";
		return -EBADMSG;
	}
	if (v < 0)
		return -EINVAL;
	req->version_minor = (uint8_t)v;
	return 0;
}

/*
 * Checks a path (no query) and says whether a server might read it as a
 * different path: dot segments, encoded '/' or '\', a raw '\'.
 * Return: 0, or -EINVAL for a '%' not followed by two hex digits.
 */
static int check_path(const char *s, size_t len, bool *ambiguous)
{
	size_t i = 0, seg_start = 0, dots = 0;
	bool only_dots = true;

	for (i = 0; i <= len; i++) {
		if (i == len || s[i] == '/') {
			if (i > seg_start && only_dots && (dots == 1 || dots == 2))
				*ambiguous = true;
			seg_start = i + 1;
			dots = 0;
			only_dots = true;
			continue;
		}
		if (s[i] == '\\') {
			*ambiguous = true;
			only_dots = false;
		} else if (s[i] == '%') {
			if (i + 2 >= len)
				return -EINVAL;
			if (!is_hexdig(s[i + 1]) || !is_hexdig(s[i + 2]))
				return -EINVAL;
			if (s[i + 1] == '2' && text_lower(s[i + 2]) == 'e') {
				dots++;
			} else {
				char h = s[i + 1], l = text_lower(s[i + 2]);

				if ((h == '2' && l == 'f') || (h == '5' && l == 'c'))
					*ambiguous = true;
				only_dots = false;
			}
			i += 2;
		} else if (s[i] == '.') {
			dots++;
		} else {
			only_dots = false;
		}
	}
	return 0;
}

/* Splits path?query into req's slices and checks the path. */
static int split_path_query(const char *s, size_t len, struct http_request *req)
{
	const char *q = memchr(s, '?', len);
	size_t plen = q ? (size_t)(q - s) : len;

	req->path_query.ptr = len ? s : "/";
	req->path_query.len = len ? len : 1;
	req->path.ptr = plen ? s : "/";
	req->path.len = plen ? plen : 1;
	req->query.ptr = empty;
	if (q) {
		req->has_query = true;
		req->query.ptr = q + 1 < s + len ? q + 1 : empty;
		req->query.len = len - plen - 1;
	}
	if (check_path(s, plen, &req->path_ambiguous) < 0) {
		req->error = "bad-target";
		return -EBADMSG;
	}
	return 0;
}

static int authority_fail(struct http_request *req, const struct http_authority *a,
			  const char *generic)
{
	if (a->is_ambiguous_numeric)
		req->error = "numeric-host";
	else if (a->error && strcmp(a->error, "userinfo") == 0)
		req->error = "userinfo";
	else
		req->error = generic ? generic : a->error;
	return -EBADMSG;
}

static int request_target(struct http_request *req)
{
	const char *t = req->target.ptr;
	size_t len = req->target.len, i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)t[i];

		/* Visible ASCII only; a fragment is never sent. */
		if (c <= 0x20 || c >= 0x7f || c == '#') {
			req->error = "bad-target";
			return -EBADMSG;
		}
	}

	if (req->method_id == HTTP_METHOD_CONNECT) {
		req->form = HTTP_FORM_AUTHORITY;
		if (http_parse_authority(t, len, 0, &req->authority) < 0)
			return authority_fail(req, &req->authority, NULL);
		req->has_authority = true;
		return 0;
	}

	if (t[0] == '/') {
		req->form = HTTP_FORM_ORIGIN;
		return split_path_query(t, len, req);
	}

	if (len >= 7 && text_eq_ci(t, 7, "http://", 7)) {
		const char *auth = t + 7;
		size_t alen = 0;

		while (7 + alen < len && auth[alen] != '/' && auth[alen] != '?')
			alen++;
		req->form = HTTP_FORM_ABSOLUTE;
		req->scheme = HTTP_SCHEME_HTTP;
		if (http_parse_authority(auth, alen, 80, &req->authority) < 0)
			return authority_fail(req, &req->authority, NULL);
		req->has_authority = true;
		return split_path_query(auth + alen, len - 7 - alen, req);
	}

	/* Some other scheme ("https://", "ftp://"): not for a plain proxy. */
	for (i = 0; i < len && t[i] != ':'; i++)
		if (!http_is_tchar((unsigned char)t[i]) || t[i] == '/')
			break;
	if (i > 0 && i + 2 < len && t[i] == ':' && t[i + 1] == '/' && t[i + 2] == '/')
		req->error = "bad-scheme";
	else
		req->error = "bad-target";
	return -EBADMSG;
}

/* Host header rules, once the headers are known. */
static int request_host(struct http_request *req, const struct head_ctx *c)
{
	struct http_authority host;
	const struct http_header *h;
	uint16_t def_port;

	if (c->n_host == 0) {
		if (req->version_minor >= 1) {
			req->error = "missing-host";
			return -EBADMSG;
		}
		return 0;
	}
	h = &req->headers[c->host_idx];
	def_port = req->form == HTTP_FORM_AUTHORITY ? req->authority.port : 80;
	if (http_parse_authority(h->value.ptr, h->value.len, def_port, &host) < 0)
		return authority_fail(req, &host, "bad-host");

	switch (req->form) {
	case HTTP_FORM_ABSOLUTE:
		/* The URI wins for routing; a Host that names another host
		 * would let the upstream (or a log) believe a different one. */
		if (!http_authority_equal(&host, &req->authority)) {
			req->error = "host-mismatch";
			return -EBADMSG;
		}
		break;
	case HTTP_FORM_ORIGIN:
		req->authority = host;
		req->has_authority = true;
		break;
	case HTTP_FORM_AUTHORITY:
		/* CONNECT goes to its target; Host is only checked for syntax
		 * (clients disagree on whether it carries the port). */
		break;
	}
	return 0;
}

static void connection_options(const struct http_header *hdr, size_t n, bool *saw_close,
			       bool *saw_keep_alive)
{
	struct http_slice item;
	const char *p, *end;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!slice_eq_ci(hdr[i].name, "Connection"))
			continue;
		p = hdr[i].value.ptr;
		end = p + hdr[i].value.len;
		while (http_list_next(&p, end, &item)) {
			if (slice_eq_ci(item, "close"))
				*saw_close = true;
			else if (slice_eq_ci(item, "keep-alive"))
				*saw_keep_alive = true;
		}
	}
}

static bool keep_alive(const struct http_header *hdr, size_t n, uint8_t minor)
{
	bool saw_close = false, ka = false;

	connection_options(hdr, n, &saw_close, &ka);
	if (saw_close)
		return false;
	return minor >= 1 || ka;
}

int http_parse_request(const char *buf, size_t len, size_t max_head, struct http_request *req)
{
	struct head_ctx c = { 0 };
	const char *eol;
	int head_len, ret;

	memset(req, 0, sizeof(*req));
	req->method.ptr = req->target.ptr = empty;
	req->path_query.ptr = req->path.ptr = req->query.ptr = empty;

	head_len = head_scan(buf, len, max_head, "bad-request-line", &req->error);
	if (head_len <= 0)
		return head_len;

	/* head_scan() guarantees a CRLF in the head and none alone. */
	eol = memchr(buf, '\r', (size_t)head_len);
	ret = request_line(buf, (size_t)(eol - buf), req);
	if (ret < 0) {
		if (!req->error)
			req->error = "bad-request-line";
		return -EBADMSG;
	}
	ret = request_target(req);
	if (ret < 0)
		return ret;

	c.hdr = req->headers;
	c.nhdr = &req->nheaders;
	c.is_request = true;
	if (run_llhttp(HTTP_REQUEST, buf, (size_t)head_len, &c) < 0) {
		req->error = c.error;
		return -EBADMSG;
	}

	/* RFC 9112 6.1: Transfer-Encoding in HTTP/1.0 means broken framing. */
	if (c.n_te && req->version_minor == 0) {
		req->error = "bad-transfer-encoding";
		return -EBADMSG;
	}
	req->has_content_length = c.has_cl;
	req->content_length = c.cl;
	req->chunked = c.chunked;

	ret = request_host(req, &c);
	if (ret < 0)
		return ret;
	req->keep_alive = keep_alive(req->headers, req->nheaders, req->version_minor);
	return head_len;
}

const struct http_header *http_find_header(const struct http_request *req, const char *name)
{
	size_t i;

	for (i = 0; i < req->nheaders; i++)
		if (slice_eq_ci(req->headers[i].name, name))
			return &req->headers[i];
	return NULL;
}

bool http_is_hop_by_hop(const char *name, size_t len)
{
	static const char *const hop[] = {
		"Connection", "Keep-Alive", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
	};
	size_t i;

	/* Proxy-Authorization, Proxy-Authenticate, Proxy-Connection and any
	 * other Proxy-*: meant for us, never for the upstream. */
	if (len >= 6 && text_eq_ci(name, 6, "Proxy-", 6))
		return true;
	for (i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (text_eq_ci(name, len, hop[i], strlen(hop[i])))
			return true;
	return false;
}

/* ---- writing the upstream head ------------------------------------------ */

static void put_header(struct obuf *o, const char *name, size_t nlen, const char *value,
		       size_t vlen)
{
	obuf_put(o, name, nlen);
	obuf_put(o, ": ", 2);
	obuf_put(o, value, vlen);
	obuf_put(o, "\r\n", 2);
}

/* Whether a Connection header of the request lists @name. */
static bool connection_lists(const struct http_request *req, struct http_slice name)
{
	struct http_slice item;
	const char *p, *end;
	size_t i;

	for (i = 0; i < req->nheaders; i++) {
		if (!slice_eq_ci(req->headers[i].name, "Connection"))
			continue;
		p = req->headers[i].value.ptr;
		end = p + req->headers[i].value.len;
		while (http_list_next(&p, end, &item))
			if (text_eq_ci(item.ptr, item.len, name.ptr, name.len))
				return true;
	}
	return false;
}

static bool set_has(const struct http_set_header *set, size_t nset, struct http_slice name)
{
	size_t i;

	for (i = 0; i < nset; i++)
		if (text_eq_ci(set[i].name, strlen(set[i].name), name.ptr, name.len))
			return true;
	return false;
}

static int check_set(const struct http_set_header *set, size_t nset)
{
	size_t i, j, nlen;

	if (nset && !set)
		return -EINVAL;
	for (i = 0; i < nset; i++) {
		if (!set[i].name || (!set[i].value && set[i].value_len))
			return -EINVAL;
		nlen = strlen(set[i].name);
		if (!http_is_token(set[i].name, nlen) || http_is_hop_by_hop(set[i].name, nlen) ||
		    text_eq_ci(set[i].name, nlen, "Content-Length", 14))
			return -EINVAL;
		/* Each name once: "replace" must mean one line upstream. */
		for (j = 0; j < i; j++)
			if (strcasecmp(set[j].name, set[i].name) == 0)
				return -EINVAL;
		/* A secret read from a file with a trailing newline must not
		 * turn into a second header. */
		for (j = 0; j < set[i].value_len; j++) {
			unsigned char ch = (unsigned char)set[i].value[j];

			if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
				return -EINVAL;
		}
	}
	return 0;
}

int http_write_request_head(const struct http_request *req, char *out, size_t outlen,
			    const struct http_set_header *set, size_t nset)
{
	return http_write_request_head_target(req, NULL, 0, out, outlen, set, nset);
}

int http_write_request_head_target(const struct http_request *req, const char *target,
				   size_t target_len, char *out, size_t outlen,
				   const struct http_set_header *set, size_t nset)
{
	struct obuf o = { .p = out, .cap = outlen };
	const struct http_set_header *set_host = NULL;
	size_t i;
	int ret = -EINVAL;

	if (!out)
		outlen = 0;
	o.cap = outlen;
	if (req->form != HTTP_FORM_ORIGIN && req->form != HTTP_FORM_ABSOLUTE)
		goto fail;
	if (!target) {
		target = req->path_query.ptr;
		target_len = req->path_query.len;
	}
	/* The request line must stay one line of three parts. */
	for (i = 0; i < target_len; i++)
		if ((unsigned char)target[i] <= 0x20 || (unsigned char)target[i] == 0x7f)
			goto fail;
	if (check_set(set, nset) < 0)
		goto fail;
	for (i = 0; i < nset; i++)
		if (strcasecmp(set[i].name, "Host") == 0)
			set_host = &set[i];
	if (!set_host && !req->has_authority)
		goto fail;

	obuf_put(&o, req->method.ptr, req->method.len);
	obuf_put(&o, " ", 1);
	if (target_len == 0 || target[0] != '/')
		obuf_put(&o, "/", 1);
	obuf_put(&o, target, target_len);
	obuf_puts(&o, " HTTP/1.1\r\nHost: ");
	if (set_host) {
		obuf_put(&o, set_host->value, set_host->value_len);
	} else {
		const struct http_authority *a = &req->authority;

		if (a->is_v6)
			obuf_put(&o, "[", 1);
		obuf_put(&o, a->host, a->host_len);
		if (a->is_v6)
			obuf_put(&o, "]", 1);
		if (a->port_given && a->port != 80) {
			char port[8];
			int n = snprintf(port, sizeof(port), ":%u", a->port);

			obuf_put(&o, port, (size_t)n);
		}
	}
	obuf_put(&o, "\r\n", 2);

	for (i = 0; i < req->nheaders; i++) {
		const struct http_header *h = &req->headers[i];

		if (slice_eq_ci(h->name, "Host") || http_is_hop_by_hop(h->name.ptr, h->name.len) ||
		    connection_lists(req, h->name) || set_has(set, nset, h->name))
			continue;
		put_header(&o, h->name.ptr, h->name.len, h->value.ptr, h->value.len);
	}
	for (i = 0; i < nset; i++) {
		if (&set[i] == set_host)
			continue;
		put_header(&o, set[i].name, strlen(set[i].name),
			   set[i].value_len ? set[i].value : empty, set[i].value_len);
	}
	if (req->chunked)
		obuf_puts(&o, "Transfer-Encoding: chunked\r\n");
	obuf_puts(&o,
		  req->keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n");

	if (o.full || o.len > INT_MAX) {
		ret = -ENOSPC;
		goto fail;
	}
	return (int)o.len;
fail:
	/* Whatever was written may hold part of a credential. */
	if (outlen)
		explicit_bzero(out, outlen);
	return ret;
}

/* ---- response ------------------------------------------------------------ */

static int status_line(const char *buf, size_t line_len, struct http_response *resp)
{
	int v;
	unsigned code;

	if (line_len < 12 || buf[8] != ' ')
		return -EINVAL;
	v = parse_version(buf, 8);
	if (v == -ENOTSUP) {
		resp->error = "unsupported-version";
		return -EBADMSG;
	}
	if (v < 0)
		return -EINVAL;
	if (buf[9] < '1' || buf[9] > '5' || buf[10] < '0' || buf[10] > '9' || buf[11] < '0' ||
	    buf[11] > '9')
		return -EINVAL;
	code = (unsigned)(buf[9] - '0') * 100 + (unsigned)(buf[10] - '0') * 10 +
	       (unsigned)(buf[11] - '0');
	/* "HTTP/1.1 200" without reason and its space is common enough. */
	if (line_len > 12 && buf[12] != ' ')
		return -EINVAL;
	resp->version_minor = (uint8_t)v;
	resp->status = (uint16_t)code;
	if (line_len > 13) {
		resp->reason.ptr = buf + 13;
		resp->reason.len = line_len - 13;
	}
	return 0;
}

int http_parse_response(const char *buf, size_t len, size_t max_head, bool head_request,
			struct http_response *resp)
{
	struct head_ctx c = { 0 };
	const char *eol;
	int head_len, ret;

	memset(resp, 0, sizeof(*resp));
	resp->reason.ptr = resp->location.ptr = empty;

	head_len = head_scan(buf, len, max_head, "bad-status-line", &resp->error);
	if (head_len <= 0)
		return head_len;
	eol = memchr(buf, '\r', (size_t)head_len);
	ret = status_line(buf, (size_t)(eol - buf), resp);
	if (ret < 0) {
		if (!resp->error)
			resp->error = "bad-status-line";
		return -EBADMSG;
	}

	c.hdr = resp->headers;
	c.nhdr = &resp->nheaders;
	if (run_llhttp(HTTP_RESPONSE, buf, (size_t)head_len, &c) < 0) {
		resp->error = c.error;
		return -EBADMSG;
	}
	if (c.n_te && resp->version_minor == 0) {
		resp->error = "bad-transfer-encoding";
		return -EBADMSG;
	}
	resp->has_content_length = c.has_cl;
	resp->content_length = c.cl;
	resp->chunked = c.chunked;
	if (c.n_location) {
		resp->has_location = true;
		resp->location = resp->headers[c.location_idx].value;
	}
	resp->no_body = head_request || resp->status / 100 == 1 || resp->status == 204 ||
			resp->status == 304;
	resp->body_until_close = !resp->no_body && !resp->chunked && !resp->has_content_length;
	resp->keep_alive = !resp->body_until_close &&
			   keep_alive(resp->headers, resp->nheaders, resp->version_minor);
	return head_len;
}

/* ---- Location ------------------------------------------------------------ */

static uint16_t scheme_port(enum http_scheme s)
{
	return s == HTTP_SCHEME_HTTPS ? 443 : 80;
}

int http_parse_location(const char *loc, size_t len, enum http_scheme base_scheme,
			const struct http_authority *base, struct http_url *out)
{
	const char *hash, *auth;
	size_t i, alen;
	bool has_scheme = false;

	memset(out, 0, sizeof(*out));
	out->path.ptr = empty;
	/*
	 * Browsers drop tabs and newlines from URLs, turn '\' into '/' and
	 * read "/\evil" as "//evil": refuse every such spelling rather than
	 * guess which host the client will go to.
	 */
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)loc[i];

		if (ch <= 0x20 || ch >= 0x7f || ch == '\\')
			return -EINVAL;
	}
	hash = memchr(loc, '#', len);
	if (hash)
		len = (size_t)(hash - loc);

	if (len >= 2 && loc[0] == '/' && loc[1] == '/') {
		out->scheme = base_scheme;
		auth = loc + 2;
	} else {
		if (len && ((loc[0] >= 'a' && loc[0] <= 'z') || (loc[0] >= 'A' && loc[0] <= 'Z'))) {
			for (i = 1; i < len; i++) {
				char ch = loc[i];

				if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
				      (ch >= '0' && ch <= '9') || ch == '+' || ch == '-' ||
				      ch == '.'))
					break;
			}
			has_scheme = i < len && loc[i] == ':';
		}
		if (!has_scheme) {
			if (!base ||
			    (base_scheme != HTTP_SCHEME_HTTP && base_scheme != HTTP_SCHEME_HTTPS))
				return -EINVAL;
			out->scheme = base_scheme;
			out->authority = *base;
			out->path.ptr = len ? loc : empty;
			out->path.len = len;
			out->relative = true;
			return 0;
		}
		if (text_eq_ci(loc, i, "http", 4))
			out->scheme = HTTP_SCHEME_HTTP;
		else if (text_eq_ci(loc, i, "https", 5))
			out->scheme = HTTP_SCHEME_HTTPS;
		else
			return -EPROTONOSUPPORT;
		/* "http:host" and "http:/host" are read as hosts by browsers
		 * when the scheme differs from the base; only "//" is taken. */
		if (len < i + 3 || loc[i + 1] != '/' || loc[i + 2] != '/')
			return -EINVAL;
		auth = loc + i + 3;
	}
	if (out->scheme != HTTP_SCHEME_HTTP && out->scheme != HTTP_SCHEME_HTTPS)
		return -EINVAL;

	alen = 0;
	while (auth + alen < loc + len && auth[alen] != '/' && auth[alen] != '?')
		alen++;
	if (http_parse_authority(auth, alen, scheme_port(out->scheme), &out->authority) < 0)
		return -EINVAL;
	out->path.len = (size_t)(loc + len - (auth + alen));
	out->path.ptr = out->path.len ? auth + alen : empty;
	return 0;
}
