// SPDX-License-Identifier: MIT
/* host[:port] parsing for CONNECT targets, absolute URIs, Host and Location. */

/*
 * Every host the sandbox names passes through here before the policy sees
 * it, so the rules are narrow on purpose: what is accepted is exactly one
 * of a DNS name, a dotted-quad IPv4 literal or a bracketed IPv6 literal,
 * and what is accepted has one canonical spelling.  The dangerous middle
 * ground is numbers that look like names: resolvers and URL parsers read
 * "127.1", "0x7f.1" or "2130706433" as addresses, so a policy that saw a
 * "name" would be bypassed.  Any name whose last label is a number (decimal
 * or 0x-hex, as the WHATWG URL parser decides) is flagged and refused.
 */

#include <errno.h>
#include <string.h>

#include "broker/http.h"
#include "common/addr.h"

#define DNS_NAME_MAX 253
#define DNS_LABEL_MAX 63
/* "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255" is 45 characters. */
#define V6_TEXT_MAX 45

static int fail(struct http_authority *a, const char *why)
{
	a->error = why;
	return -EINVAL;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static char to_lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Decimal 1..65535, no sign, no leading zero. */
static int parse_port(const char *s, size_t len, uint16_t *port)
{
	unsigned v = 0;
	size_t i;

	if (len == 0 || len > 5 || s[0] == '0')
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

/*
 * A label the WHATWG URL parser would read as a number: all decimal
 * digits, or "0x"/"0X" and hex digits (possibly none).
 */
static bool label_is_numeric(const char *s, size_t len)
{
	size_t i = 0;

	if (len == 0)
		return false;
	if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < len; i++)
			if (!is_hex(s[i]))
				return false;
		return true;
	}
	for (i = 0; i < len; i++)
		if (!is_digit(s[i]))
			return false;
	return true;
}

/* Exactly four decimal parts 0..255 without leading zeros. */
static bool is_strict_dotted_quad(const char *s, size_t len)
{
	unsigned parts = 0, v = 0, digits = 0;
	size_t i;

	for (i = 0; i <= len; i++) {
		if (i == len || s[i] == '.') {
			if (digits == 0 || v > 255 || ++parts > 4)
				return false;
			v = 0;
			digits = 0;
			continue;
		}
		if (!is_digit(s[i]))
			return false;
		if (digits == 1 && v == 0)
			return false; /* leading zero: octal to inet_aton */
		if (++digits > 3)
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	return parts == 4;
}

static int parse_v6(const char *s, size_t len, struct http_authority *a)
{
	char tmp[V6_TEXT_MAX + 1];
	bool colon = false;
	size_t i;

	if (len < 2 || len > V6_TEXT_MAX)
		return fail(a, "bad-ipv6");
	for (i = 0; i < len; i++) {
		if (s[i] == '%')
			return fail(a, "ipv6-zone");
		if (s[i] == ':')
			colon = true;
		else if (!is_hex(s[i]) && s[i] != '.')
			return fail(a, "bad-ipv6");
		tmp[i] = to_lower(s[i]);
	}
	/* "[1.2.3.4]" is not an IPv6 literal, and inet_pton would take it. */
	if (!colon)
		return fail(a, "bad-ipv6");
	tmp[len] = '\0';
	if (addr_parse(tmp, &a->addr) < 0)
		return fail(a, "bad-ipv6");
	memcpy(a->host, tmp, len + 1);
	a->host_len = len;
	a->is_literal = true;
	a->is_v6 = true;
	return 0;
}

static int parse_name(const char *s, size_t len, struct http_authority *a)
{
	size_t i, label_start, last_start;
	bool trailing_dot = false;

	if (len == 0)
		return fail(a, "empty-host");
	for (i = 0; i < len; i++) {
		char c = s[i];

		if (c == '%')
			return fail(a, "percent-encoded-host");
		if (!is_alpha(c) && !is_digit(c) && c != '-' && c != '.')
			return fail(a, "bad-host");
	}
	if (len > 1 && s[len - 1] == '.') {
		trailing_dot = true;
		len--;
	}

	last_start = len;
	while (last_start > 0 && s[last_start - 1] != '.')
		last_start--;
	if (label_is_numeric(s + last_start, len - last_start)) {
		if (!trailing_dot && is_strict_dotted_quad(s, len)) {
			char tmp[16];

			memcpy(tmp, s, len);
			tmp[len] = '\0';
			if (addr_parse(tmp, &a->addr) < 0)
				return fail(a, "bad-host");
			memcpy(a->host, tmp, len + 1);
			a->host_len = len;
			a->is_literal = true;
			return 0;
		}
		a->is_ambiguous_numeric = true;
		return fail(a, "numeric-host");
	}

	if (len > DNS_NAME_MAX)
		return fail(a, "name-too-long");
	label_start = 0;
	for (i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (i == label_start)
			return fail(a, "empty-label");
		if (i - label_start > DNS_LABEL_MAX)
			return fail(a, "label-too-long");
		if (s[label_start] == '-' || s[i - 1] == '-')
			return fail(a, "bad-host");
		label_start = i + 1;
	}
	for (i = 0; i < len; i++)
		a->host[i] = to_lower(s[i]);
	a->host[len] = '\0';
	a->host_len = len;
	return 0;
}

int http_parse_authority(const char *s, size_t len, uint16_t default_port, struct http_authority *a)
{
	const char *port = NULL;
	size_t host_len, port_len = 0, i;
	int ret;

	memset(a, 0, sizeof(*a));
	if (len == 0)
		return fail(a, "empty-host");
	for (i = 0; i < len; i++) {
		if (s[i] == '@')
			return fail(a, "userinfo");
	}

	if (s[0] == '[') {
		const char *close = memchr(s, ']', len);

		if (!close)
			return fail(a, "bad-ipv6");
		host_len = (size_t)(close - s) + 1;
		if (host_len < len) {
			if (s[host_len] != ':')
				return fail(a, "bad-host");
			port = s + host_len + 1;
			port_len = len - host_len - 1;
		}
		ret = parse_v6(s + 1, host_len - 2, a);
	} else {
		const char *colon = memchr(s, ':', len);

		host_len = colon ? (size_t)(colon - s) : len;
		if (colon) {
			port = colon + 1;
			port_len = len - host_len - 1;
		}
		ret = parse_name(s, host_len, a);
	}
	if (ret < 0)
		return ret;

	if (port) {
		if (parse_port(port, port_len, &a->port) < 0)
			return fail(a, "bad-port");
		a->port_given = true;
	} else if (default_port == 0) {
		return fail(a, "missing-port");
	} else {
		a->port = default_port;
	}
	return 0;
}

bool http_authority_equal(const struct http_authority *a, const struct http_authority *b)
{
	if (a->port != b->port || a->is_literal != b->is_literal)
		return false;
	if (a->is_literal)
		return memcmp(a->addr.b, b->addr.b, sizeof(a->addr.b)) == 0;
	return a->host_len == b->host_len && memcmp(a->host, b->host, a->host_len) == 0;
}
