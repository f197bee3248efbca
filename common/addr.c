// SPDX-License-Identifier: MIT
/* Address parsing, formatting and prefix tests in the one 128-bit form. */
#include "common/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const uint8_t v4_mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

bool addr_is_v4(const struct sl_addr *a)
{
	return memcmp(a->b, v4_mapped_prefix, sizeof(v4_mapped_prefix)) == 0;
}

void addr_from_v4(struct sl_addr *a, uint32_t v4)
{
	memcpy(a->b, v4_mapped_prefix, sizeof(v4_mapped_prefix));
	a->b[12] = (uint8_t)(v4 >> 24);
	a->b[13] = (uint8_t)(v4 >> 16);
	a->b[14] = (uint8_t)(v4 >> 8);
	a->b[15] = (uint8_t)v4;
}

uint32_t addr_v4(const struct sl_addr *a)
{
	return (uint32_t)a->b[12] << 24 | (uint32_t)a->b[13] << 16 | (uint32_t)a->b[14] << 8 |
	       a->b[15];
}

int addr_parse(const char *s, struct sl_addr *out)
{
	struct in_addr v4;

	if (inet_pton(AF_INET, s, &v4) == 1) {
		addr_from_v4(out, ntohl(v4.s_addr));
		return 0;
	}
	if (inet_pton(AF_INET6, s, out->b) == 1)
		return 0;
	return -EINVAL;
}

bool addr_in_prefix(const struct sl_addr *a, const struct sl_addr *net, unsigned plen)
{
	unsigned full = plen / 8, rest = plen % 8;

	if (plen > 128)
		return false;
	if (memcmp(a->b, net->b, full) != 0)
		return false;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		if ((a->b[full] & mask) != (net->b[full] & mask))
			return false;
	}
	return true;
}

int addr_parse_cidr(const char *s, struct sl_addr *net, unsigned *plen)
{
	char buf[64];
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	unsigned len, max, i;
	char *end;
	unsigned long v;

	if (alen == 0 || alen >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	if (addr_parse(buf, net) < 0)
		return -EINVAL;
	/* A v4 prefix must be written in v4: "::ffff:10.0.0.0/104" is refused
	 * so that lengths always mean what the reader thinks. */
	max = strchr(buf, ':') ? 128 : 32;
	if (slash) {
		const char *p = slash + 1;

		if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '\0'))
			return -EINVAL;
		errno = 0;
		v = strtoul(p, &end, 10);
		if (errno || *end != '\0' || v > max)
			return -EINVAL;
		len = (unsigned)v;
	} else {
		len = max;
	}
	if (max == 128 && addr_is_v4(net))
		return -EINVAL;
	if (max == 32)
		len += 96;
	for (i = len; i < 128; i++) {
		if (net->b[i / 8] & (0x80 >> (i % 8)))
			return -ERANGE;
	}
	*plen = len;
	return 0;
}

/* RFC 5952 text for v6. glibc's inet_ntop writes the deprecated
 * v4-compatible form (::a00:1 as "::10.0.0.1"), which reads like an IPv4
 * address in an audit line; this never does. */
static void format_v6(const uint8_t *b, char *buf, size_t len)
{
	int best = -1, best_len = 0, i, o = 0;
	char tmp[ADDR_STRLEN];

	for (i = 0; i < 8;) {
		int j = i;

		while (j < 8 && b[2 * j] == 0 && b[2 * j + 1] == 0)
			j++;
		if (j - i > best_len && j - i >= 2) {
			best = i;
			best_len = j - i;
		}
		i = j > i ? j : i + 1;
	}
	for (i = 0; i < 8; i++) {
		if (i == best) {
			o += snprintf(tmp + o, sizeof(tmp) - (size_t)o, "::");
			i += best_len - 1;
			continue;
		}
		o += snprintf(tmp + o, sizeof(tmp) - (size_t)o, "%s%x",
			      (i == 0 || i == best + best_len) ? "" : ":",
			      (unsigned)(b[2 * i] << 8 | b[2 * i + 1]));
	}
	/* Too small: an empty string, never a cut address. */
	if ((size_t)o >= len) {
		if (len)
			buf[0] = '\0';
		return;
	}
	memcpy(buf, tmp, (size_t)o + 1);
}

/* Dotted quad. By hand: glibc's inet_ntop goes through sprintf, and the
 * proxy formats two addresses for every audit line. */
static void format_v4(uint32_t v, char *buf, size_t len)
{
	char tmp[sizeof("255.255.255.255")];
	size_t o = 0;
	int shift;

	for (shift = 24; shift >= 0; shift -= 8) {
		unsigned octet = (v >> shift) & 0xff;

		if (octet >= 100)
			tmp[o++] = (char)('0' + octet / 100);
		if (octet >= 10)
			tmp[o++] = (char)('0' + octet / 10 % 10);
		tmp[o++] = (char)('0' + octet % 10);
		tmp[o++] = shift ? '.' : '\0';
	}
	/* Too small: an empty string, never a cut address. */
	if (o > len) {
		if (len)
			buf[0] = '\0';
		return;
	}
	memcpy(buf, tmp, o);
}

void addr_format(const struct sl_addr *a, char *buf, size_t len)
{
	if (addr_is_v4(a)) {
		format_v4(addr_v4(a), buf, len);
	} else {
		format_v6(a->b, buf, len);
	}
}

void addr_format_cidr(const struct sl_addr *net, unsigned plen, char *buf, size_t len)
{
	char a[ADDR_STRLEN];
	bool v4 = addr_is_v4(net) && plen >= 96;

	addr_format(net, a, sizeof(a));
	if (!v4 && addr_is_v4(net))
		format_v6(net->b, a, sizeof(a)); /* a v6 prefix around the mapped range */
	snprintf(buf, len, "%s/%u", a, v4 ? plen - 96 : plen);
}

int addr_from_sockaddr(const struct sockaddr *sa, struct sl_addr *a, uint16_t *port)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		addr_from_v4(a, ntohl(sin->sin_addr.s_addr));
		if (port)
			*port = ntohs(sin->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		memcpy(a->b, sin6->sin6_addr.s6_addr, 16);
		if (port)
			*port = ntohs(sin6->sin6_port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

unsigned addr_to_sockaddr(const struct sl_addr *a, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (addr_is_v4(a)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		sin->sin_addr.s_addr = htonl(addr_v4(a));
		return sizeof(*sin);
	}
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(port);
	memcpy(sin6->sin6_addr.s6_addr, a->b, 16);
	return sizeof(*sin6);
}
