// SPDX-License-Identifier: MIT
/* libFuzzer target: bytes into dns_parse_query(), and every query it
 * accepts (or would answer with an error) through the reply builders. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/addr.h"
#include "dnsfilter/dnsfilter.h"

#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			__builtin_trap(); \
	} while (0)

static uint16_t g16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* What every reply must say, whatever the builder. */
static void check_reply(const struct dns_query *q, const uint8_t *r, int n, size_t outlen,
			uint16_t rcode)
{
	if (n == -ENOSPC)
		return;
	CHECK(n >= 12 && (size_t)n <= outlen);
	CHECK(g16(r) == q->id);
	CHECK(r[2] & 0x80);			 /* QR */
	CHECK(((r[2] >> 3) & 0xf) == q->opcode); /* OPCODE echoed */
	CHECK(!(r[2] & 0x04));			 /* AA clear */
	CHECK((r[3] & 0x0f) == (rcode & 0x0f));
	CHECK(g16(r + 4) == (q->has_question ? 1 : 0));
	CHECK(g16(r + 10) == (q->edns ? 1 : 0));
	if (q->has_question) {
		CHECK((size_t)n >= 12u + q->qwire_len);
		CHECK(memcmp(r + 12, q->qwire, q->qwire_len) == 0);
	}
}

/* Build into a heap buffer of exactly @outlen bytes so ASan sees any
 * write past it. */
static void build_all(const struct dns_query *q, size_t outlen, size_t naddr)
{
	static struct sl_addr addrs[300];
	uint8_t *out = malloc(outlen ? outlen : 1);
	int n;

	CHECK(out != NULL);
	for (size_t i = 0; i < naddr; i++) {
		memset(&addrs[i], 0, sizeof(addrs[i]));
		addrs[i].b[10] = addrs[i].b[11] = 0xff;
		addrs[i].b[12] = 10;
		addrs[i].b[15] = (uint8_t)i;
	}

	n = dns_build_a(q, addrs, naddr, 60, true, out, outlen);
	check_reply(q, out, n, outlen, 0);
	if (n > 0) {
		CHECK((size_t)n <= q->udp_size);
		/* either all answers or, truncated, none */
		CHECK(g16(out + 6) == ((out[2] & 0x02) ? 0 : naddr));
	}
	n = dns_build_a(q, addrs, naddr, 60, false, out, outlen);
	check_reply(q, out, n, outlen, 0);
	if (n > 0)
		CHECK(!(out[2] & 0x02) && g16(out + 6) == naddr);

	n = dns_build_nodata(q, 300, out, outlen);
	check_reply(q, out, n, outlen, 0);
	if (n > 0)
		CHECK(g16(out + 8) == 1);

	n = dns_build_error(q, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED, "blocked by policy", out,
			    outlen);
	check_reply(q, out, n, outlen, DNS_RCODE_NXDOMAIN);
	n = dns_build_error(q, DNS_RCODE_REFUSED, 0, NULL, out, outlen);
	check_reply(q, out, n, outlen, DNS_RCODE_REFUSED);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_query q;
	ssize_t fl;
	int r;

	fl = dns_tcp_frame_len(data, size);
	CHECK(fl == 0 || fl == -EBADMSG || (fl >= 12 && (size_t)fl <= size - 2));

	r = dns_parse_query(data, size, &q);
	CHECK(r == 0 || r == -EINVAL || r == -EBADMSG || r == -EOPNOTSUPP || r == -EPROTONOSUPPORT);
	if (r == -EINVAL)
		return 0;
	CHECK(strlen(q.name) <= DNS_NAME_TEXT_MAX);
	CHECK(q.udp_size >= DNS_UDP_MIN && q.udp_size <= DNS_UDP_MAX);
	CHECK(dns_type_name(q.qtype) != NULL);
	if (q.has_question) {
		CHECK(q.qwire_len >= 5 && q.qwire_len <= DNS_QUESTION_MAX);
		CHECK(memcmp(q.qwire, data + DNS_HDR_LEN, q.qwire_len) == 0);
	}

	if (r < 0) {
		uint8_t *out;
		int n;

		CHECK(q.rcode_hint == DNS_RCODE_FORMERR || q.rcode_hint == DNS_RCODE_NOTIMP ||
		      q.rcode_hint == DNS_RCODE_BADVERS);
		CHECK((q.rcode_hint == DNS_RCODE_BADVERS) == q.edns_badvers ||
		      q.rcode_hint == DNS_RCODE_FORMERR);
		for (size_t len = 0; len <= 600; len += 600) {
			out = malloc(len ? len : 1);
			CHECK(out != NULL);
			n = dns_build_error(&q, q.rcode_hint, 0, NULL, out, len);
			check_reply(&q, out, n, len, q.rcode_hint);
			/* an error reply always fits a 512-byte datagram */
			CHECK(len == 0 ? n == -ENOSPC : (n > 0 && n <= 512));
			free(out);
		}
		return 0;
	}

	CHECK(q.has_question && !q.edns_badvers);
	/* A small buffer (from the input's first byte, so the fuzzer steers
	 * it), and a large one; the address count from the ID. */
	build_all(&q, data[0], q.id % 300);
	build_all(&q, 65535, q.id % 300);
	return 0;
}
