// SPDX-License-Identifier: MIT
/* libFuzzer target: http_parse_authority() on arbitrary bytes. */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/http.h"

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t ports[4] = { 0, 80, 443, 8080 };
	struct http_authority a, b;
	char canon[300];
	uint16_t def;
	size_t i, last;
	int r, n;

	if (size < 1)
		return 0;
	def = ports[data[0] & 3];
	r = http_parse_authority((const char *)data + 1, size - 1, def, &a);
	if (r < 0) {
		if (r != -EINVAL || !a.error)
			abort();
		if (a.is_ambiguous_numeric && strcmp(a.error, "numeric-host"))
			abort();
		return 0;
	}
	if (r != 0 || a.error || a.is_ambiguous_numeric || a.port == 0 ||
	    (!a.port_given && a.port != def))
		abort();
	if (a.host_len == 0 || a.host_len > 253 || strlen(a.host) != a.host_len)
		abort();
	if (a.is_v6) {
		if (!a.is_literal || a.host_len > 45)
			abort();
	} else {
		for (i = 0; i < a.host_len; i++)
			if (!name_char(a.host[i]))
				abort();
		if (a.host[a.host_len - 1] == '.' || a.host[0] == '.')
			abort();
		last = a.host_len;
		while (last > 0 && a.host[last - 1] != '.')
			last--;
		/* A name never ends in a number: that is an address. */
		if (!a.is_literal && a.host[last] >= '0' && a.host[last] <= '9' &&
		    strspn(a.host + last, "0123456789") == a.host_len - last)
			abort();
		if (a.is_literal && !addr_is_v4(&a.addr))
			abort();
	}

	/* The canonical spelling parses to the same authority. */
	n = snprintf(canon, sizeof(canon), "%s%s%s:%u", a.is_v6 ? "[" : "", a.host,
		     a.is_v6 ? "]" : "", a.port);
	if (n <= 0 || (size_t)n >= sizeof(canon))
		abort();
	if (http_parse_authority(canon, (size_t)n, 0, &b) != 0 || !http_authority_equal(&a, &b) ||
	    strcmp(a.host, b.host))
		abort();
	return 0;
}
