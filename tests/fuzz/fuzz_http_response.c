// SPDX-License-Identifier: MIT
/* libFuzzer target: http_parse_response() and http_parse_location() on arbitrary bytes. */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/http.h"

static void check_location(const struct http_response *resp, enum http_scheme scheme)
{
	struct http_authority base, again;
	struct http_url url;
	const char *loc = resp->location.ptr;
	char canon[300];
	int r, n;

	if (http_parse_authority("base.example:8080", 17, 80, &base))
		abort();
	r = http_parse_location(loc, resp->location.len, scheme, &base, &url);
	if (r < 0) {
		if (r != -EINVAL && r != -EPROTONOSUPPORT)
			abort();
		return;
	}
	if (url.scheme != HTTP_SCHEME_HTTP && url.scheme != HTTP_SCHEME_HTTPS)
		abort();
	if (url.path.len &&
	    (url.path.ptr < loc || url.path.ptr + url.path.len > loc + resp->location.len))
		abort();
	if (url.relative) {
		if (!http_authority_equal(&url.authority, &base))
			abort();
		return;
	}
	if (url.authority.error || url.authority.port == 0)
		abort();
	/* What we resolved is what a strict parse of its spelling gives. */
	n = snprintf(canon, sizeof(canon), "%s%s%s:%u", url.authority.is_v6 ? "[" : "",
		     url.authority.host, url.authority.is_v6 ? "]" : "", url.authority.port);
	if (n <= 0 || (size_t)n >= sizeof(canon) ||
	    http_parse_authority(canon, (size_t)n, 0, &again) ||
	    !http_authority_equal(&again, &url.authority))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_response resp, part;
	size_t max_head, i;
	bool head;
	int r, pr;

	if (size < 1)
		return 0;
	head = data[0] & 1;
	max_head = 8 + (size_t)(data[0] >> 1) * 8;
	data++;
	size--;

	r = http_parse_response((const char *)data, size, max_head, head, &resp);
	if (r > (int)size || r > (int)max_head || (r == 0 && size >= max_head))
		abort();
	if (r < 0 && ((r != -EBADMSG && r != -EMSGSIZE) || !resp.error))
		abort();
	pr = http_parse_response((const char *)data, size / 2, max_head, head, &part);
	if (pr != 0 && (pr != r || (r < 0 && strcmp(part.error, resp.error))))
		abort();
	if (r <= 0)
		return 0;

	if (resp.error || resp.nheaders > HTTP_MAX_HEADERS || resp.status < 100 ||
	    resp.status > 599)
		abort();
	if (resp.no_body && resp.body_until_close)
		abort();
	if (resp.body_until_close && resp.keep_alive)
		abort();
	if (resp.chunked && resp.has_content_length)
		abort();
	for (i = 0; i < resp.nheaders; i++)
		if (resp.headers[i].name.len == 0 ||
		    resp.headers[i].name.ptr < (const char *)data ||
		    resp.headers[i].value.ptr + resp.headers[i].value.len > (const char *)data + r)
			abort();
	if (resp.has_location) {
		check_location(&resp, HTTP_SCHEME_HTTP);
		check_location(&resp, HTTP_SCHEME_HTTPS);
	}
	return 0;
}
