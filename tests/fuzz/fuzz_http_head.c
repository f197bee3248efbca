// SPDX-License-Identifier: MIT
/* libFuzzer target: http_parse_request() on arbitrary bytes, then http_write_request_head(). */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker/http.h"

static const char secret[] = "Bearer fuzz-secret-0123456789";

static void check_slice(struct http_slice s, const uint8_t *base, size_t len)
{
	const char *b = (const char *)base;

	if (!s.ptr)
		abort();
	/* Either inside the head or one of the parser's static strings. */
	if (s.len && (s.ptr < b || s.ptr + s.len > b + len) && strncmp(s.ptr, "/", s.len) != 0)
		abort();
}

/* The written head must be a head we accept ourselves, with the same meaning. */
static void check_written(const struct http_request *req, const char *out, int n)
{
	static struct http_request again;
	size_t count = 0, i;
	int r;

	r = http_parse_request(out, (size_t)n, (size_t)n, &again);
	if (r < 0 && strcmp(again.error, "too-many-headers") == 0)
		return;
	if (r != n)
		abort();
	if (again.method_id != req->method_id || again.form != HTTP_FORM_ORIGIN ||
	    again.keep_alive != req->keep_alive || again.chunked != req->chunked ||
	    again.has_content_length != req->has_content_length ||
	    again.content_length != req->content_length)
		abort();
	if (again.method.len != req->method.len ||
	    memcmp(again.method.ptr, req->method.ptr, req->method.len))
		abort();
	if (req->path_query.ptr[0] == '/' &&
	    (again.path_query.len != req->path_query.len ||
	     memcmp(again.path_query.ptr, req->path_query.ptr, req->path_query.len)))
		abort();
	if (!again.has_authority || strcmp(again.authority.host, req->authority.host) ||
	    again.authority.is_literal != req->authority.is_literal)
		abort();
	/* The injected header replaced every client copy: exactly one
	 * Authorization, ours, and nothing meant for the proxy. */
	for (i = 0; i < again.nheaders; i++) {
		const struct http_header *h = &again.headers[i];

		if (h->name.len == 13 && !strncasecmp(h->name.ptr, "Authorization", 13)) {
			if (h->value.len != sizeof(secret) - 1 ||
			    memcmp(h->value.ptr, secret, h->value.len))
				abort();
			count++;
		}
		if (h->name.len >= 6 && !strncasecmp(h->name.ptr, "Proxy-", 6))
			abort();
	}
	if (count != 1)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_request req, part;
	static char out[20000];
	const struct http_set_header set[] = {
		{ "Authorization", secret, sizeof(secret) - 1 },
		{ "X-Sluice", "1", 1 },
	};
	size_t max_head, i, outlen;
	int r, pr, n;

	if (size < 2)
		return 0;
	/* A small limit, so that head-too-large is reached often. */
	max_head = 8 + (size_t)data[0] * 4;
	outlen = data[1] == 0xff ? sizeof(out) : (size_t)data[1] * 8;
	data += 2;
	size -= 2;

	r = http_parse_request((const char *)data, size, max_head, &req);
	if (r > (int)size || r > (int)max_head)
		abort();
	if (r == 0 && size >= max_head)
		abort();
	if (r < 0) {
		if ((r != -EBADMSG && r != -EMSGSIZE) || !req.error)
			abort();
	}
	/* The answer must not depend on where the bytes were split. */
	pr = http_parse_request((const char *)data, size / 2, max_head, &part);
	if (pr != 0 && (pr != r || (r < 0 && strcmp(part.error, req.error))))
		abort();
	if (r <= 0)
		return 0;

	if (req.error || req.nheaders > HTTP_MAX_HEADERS)
		abort();
	check_slice(req.method, data, (size_t)r);
	check_slice(req.target, data, (size_t)r);
	check_slice(req.path_query, data, (size_t)r);
	check_slice(req.path, data, (size_t)r);
	check_slice(req.query, data, (size_t)r);
	for (i = 0; i < req.nheaders; i++) {
		check_slice(req.headers[i].name, data, (size_t)r);
		check_slice(req.headers[i].value, data, (size_t)r);
		if (req.headers[i].name.len == 0)
			abort();
	}
	if (req.has_authority &&
	    (req.authority.port == 0 || strlen(req.authority.host) != req.authority.host_len))
		abort();

	n = http_write_request_head(&req, out, outlen, set, 2);
	if (n > (int)outlen)
		abort();
	if (n == -ENOSPC) {
		for (i = 0; i < outlen; i++)
			if (out[i])
				abort();
		return 0;
	}
	if (n < 0) {
		if (n != -EINVAL || (req.form != HTTP_FORM_AUTHORITY && req.has_authority))
			abort();
		return 0;
	}
	check_written(&req, out, n);
	return 0;
}
