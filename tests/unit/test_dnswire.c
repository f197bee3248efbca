// SPDX-License-Identifier: MIT
/* Unit tests for dnsfilter/wire.c: query parsing against real queries
 * (glibc, c-ares) and crafted bad ones, and replies read back by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/addr.h"
#include "dnsfilter/dnsfilter.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- real queries --------------------------------------------------------
 * Captured from glibc's stub resolver (getaddrinfo, with and without
 * "options edns0") and made by c-ares's ares_create_query(). Twelve bytes a
 * row, the header's length, which clang-format would not keep. */

/* clang-format off */
static const uint8_t q_glibc_a[] = {
	0x68, 0xaa, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x03, 0x77, 0x77, 0x77, 0x07, 0x45, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65,
	0x03, 0x6f, 0x72, 0x67, 0x00, 0x00, 0x01, 0x00, 0x01,
};

static const uint8_t q_glibc_aaaa[] = {
	0x21, 0x96, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x03, 0x77, 0x77, 0x77, 0x07, 0x45, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65,
	0x03, 0x6f, 0x72, 0x67, 0x00, 0x00, 0x1c, 0x00, 0x01,
};

static const uint8_t q_glibc_a_edns[] = {
	0x3c, 0x87, 0x01, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	0x03, 0x77, 0x77, 0x77, 0x07, 0x45, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65,
	0x03, 0x6f, 0x72, 0x67, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x29,
	0x04, 0xb0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static const uint8_t q_glibc_aaaa_edns[] = {
	0x82, 0x83, 0x01, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	0x03, 0x77, 0x77, 0x77, 0x07, 0x45, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65,
	0x03, 0x6f, 0x72, 0x67, 0x00, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x29,
	0x04, 0xb0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static const uint8_t q_cares_txt[] = {
	0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x06, 0x5f, 0x44, 0x6d, 0x61, 0x72, 0x63, 0x07, 0x45, 0x78, 0x61, 0x6d,
	0x70, 0x6c, 0x65, 0x03, 0x6e, 0x65, 0x74, 0x00, 0x00, 0x10, 0x00, 0x01,
};

static const uint8_t q_cares_txt_edns[] = {
	0x12, 0x35, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	0x06, 0x5f, 0x64, 0x6d, 0x61, 0x72, 0x63, 0x07, 0x65, 0x78, 0x61, 0x6d,
	0x70, 0x6c, 0x65, 0x03, 0x6e, 0x65, 0x74, 0x00, 0x00, 0x10, 0x00, 0x01,
	0x00, 0x00, 0x29, 0x04, 0xd0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static const uint8_t q_cares_aaaa_edns[] = {
	0x12, 0x36, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	0x03, 0x61, 0x70, 0x69, 0x06, 0x47, 0x69, 0x74, 0x48, 0x75, 0x62, 0x03,
	0x63, 0x6f, 0x6d, 0x00, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x29, 0x10,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* clang-format on */

struct real_query {
	const char *what;
	const uint8_t *msg;
	size_t len;
	uint16_t id;
	uint16_t qtype;
	bool edns;
	uint16_t udp_size;
	const char *name;
};

#define REAL(m) .what = #m, .msg = m, .len = sizeof(m)

static const struct real_query real_queries[] = {
	{ REAL(q_glibc_a), 0x68aa, DNS_TYPE_A, false, 512, "www.example.org" },
	{ REAL(q_glibc_aaaa), 0x2196, DNS_TYPE_AAAA, false, 512, "www.example.org" },
	{ REAL(q_glibc_a_edns), 0x3c87, DNS_TYPE_A, true, 1200, "www.example.org" },
	{ REAL(q_glibc_aaaa_edns), 0x8283, DNS_TYPE_AAAA, true, 1200, "www.example.org" },
	{ REAL(q_cares_txt), 0x1234, DNS_TYPE_TXT, false, 512, "_dmarc.example.net" },
	{ REAL(q_cares_txt_edns), 0x1235, DNS_TYPE_TXT, true, 1232, "_dmarc.example.net" },
	{ REAL(q_cares_aaaa_edns), 0x1236, DNS_TYPE_AAAA, true, 4096, "api.github.com" },
};

/* Parse from a heap copy of exactly @n bytes, so that under ASan
 * (make asan) a read past the end is caught, not hidden by the array. */
static int parse_exact(const uint8_t *msg, size_t n, struct dns_query *q)
{
	uint8_t *c = malloc(n ? n : 1);
	int r;

	assert_non_null(c);
	if (n)
		memcpy(c, msg, n);
	r = dns_parse_query(c, n, q);
	free(c);
	return r;
}

static void test_real_queries(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(real_queries); i++) {
		const struct real_query *t = &real_queries[i];
		struct dns_query q;
		size_t qlen = t->len - DNS_HDR_LEN - (t->edns ? 11 : 0);

		printf("# %s\n", t->what);
		assert_int_equal(parse_exact(t->msg, t->len, &q), 0);
		assert_int_equal(q.id, t->id);
		assert_true(q.rd);
		assert_false(q.cd);
		assert_int_equal(q.opcode, 0);
		assert_true(q.has_question);
		assert_int_equal(q.qtype, t->qtype);
		assert_int_equal(q.qclass, DNS_CLASS_IN);
		assert_string_equal(q.name, t->name);
		assert_false(q.name_weird);
		assert_int_equal(q.edns, t->edns);
		assert_false(q.edns_do);
		assert_false(q.edns_badvers);
		assert_int_equal(q.udp_size, t->udp_size);
		assert_int_equal(q.qwire_len, qlen);
		assert_memory_equal(q.qwire, t->msg + DNS_HDR_LEN, qlen);
	}
}

/* Every proper prefix of a valid query is an error, never a query. */
static void test_real_queries_truncated(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(real_queries); i++) {
		const struct real_query *t = &real_queries[i];

		for (size_t n = 0; n < t->len; n++) {
			struct dns_query q;
			int r = parse_exact(t->msg, n, &q);

			if (n < DNS_HDR_LEN) {
				assert_int_equal(r, -EINVAL);
				continue;
			}
			assert_int_equal(r, -EBADMSG);
			assert_int_equal(q.rcode_hint, DNS_RCODE_FORMERR);
			assert_int_equal(q.id, t->id);
		}
	}
}

/* ---- crafted queries ---------------------------------------------------- */

#define HDR(fl, qd, an, ns, ar) 0xbe, 0xef, (fl) >> 8, (fl) & 0xff, 0, qd, 0, an, 0, ns, 0, ar
#define NAME_EX 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0
#define QA 0, 1, 0, 1
/* OPT RR: root owner, TYPE 41, payload 1232, TTL (ext rcode, version,
 * flags), RDLENGTH. */
#define OPT(ver, rdlen) 0, 0, 41, 0x04, 0xd0, 0, ver, 0, 0, 0, rdlen
#define BYTES(...) \
	.msg = (const uint8_t[]){ __VA_ARGS__ }, .len = sizeof((const uint8_t[]){ __VA_ARGS__ })

struct bad_query {
	const char *what;
	const uint8_t *msg;
	size_t len;
	int ret;
	uint16_t hint;
	bool has_question;
	bool edns;
};

static const struct bad_query bad_queries[] = {
	{ "response (QR set)", BYTES(HDR(0x8100, 1, 0, 0, 0), NAME_EX, QA), -EINVAL, 0, false,
	  false },
	{ "11-byte message", BYTES(0xbe, 0xef, 1, 0, 0, 1, 0, 0, 0, 0, 0), -EINVAL, 0, false,
	  false },
	{ "QDCOUNT 0", BYTES(HDR(0x0100, 0, 0, 0, 0)), -EBADMSG, DNS_RCODE_FORMERR, false, false },
	{ "QDCOUNT 2", BYTES(HDR(0x0100, 2, 0, 0, 0), NAME_EX, QA, NAME_EX, QA), -EBADMSG,
	  DNS_RCODE_FORMERR, false, false },
	{ "compression pointer as QNAME", BYTES(HDR(0x0100, 1, 0, 0, 0), 0xc0, 0x0c, QA), -EBADMSG,
	  DNS_RCODE_FORMERR, false, false },
	{ "compression pointer after a label",
	  BYTES(HDR(0x0100, 1, 0, 0, 0), 3, 'w', 'w', 'w', 0xc0, 0x0c, QA), -EBADMSG,
	  DNS_RCODE_FORMERR, false, false },
	{ "extended label type 01", BYTES(HDR(0x0100, 1, 0, 0, 0), 0x41, 'a', 0, QA), -EBADMSG,
	  DNS_RCODE_FORMERR, false, false },
	{ "label longer than the message", BYTES(HDR(0x0100, 1, 0, 0, 0), 5, 'a', 'b'), -EBADMSG,
	  DNS_RCODE_FORMERR, false, false },
	{ "QNAME without QTYPE/QCLASS", BYTES(HDR(0x0100, 1, 0, 0, 0), NAME_EX, 0, 1), -EBADMSG,
	  DNS_RCODE_FORMERR, false, false },
	{ "ANCOUNT 1", BYTES(HDR(0x0100, 1, 1, 0, 0), NAME_EX, QA), -EBADMSG, DNS_RCODE_FORMERR,
	  true, false },
	{ "NSCOUNT 1", BYTES(HDR(0x0100, 1, 0, 1, 0), NAME_EX, QA), -EBADMSG, DNS_RCODE_FORMERR,
	  true, false },
	{ "two OPT RRs", BYTES(HDR(0x0100, 1, 0, 0, 2), NAME_EX, QA, OPT(0, 0), OPT(0, 0)),
	  -EBADMSG, DNS_RCODE_FORMERR, true, false },
	{ "additional record that is not OPT",
	  BYTES(HDR(0x0100, 1, 0, 0, 1), NAME_EX, QA, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4),
	  -EBADMSG, DNS_RCODE_FORMERR, true, false },
	{ "OPT owned by a non-root name",
	  BYTES(HDR(0x0100, 1, 0, 0, 1), NAME_EX, QA, 1, 'a', 0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0,
		0),
	  -EBADMSG, DNS_RCODE_FORMERR, true, false },
	{ "OPT RDLENGTH past the end",
	  BYTES(HDR(0x0100, 1, 0, 0, 1), NAME_EX, QA, OPT(0, 8), 0, 10, 0, 4), -EBADMSG,
	  DNS_RCODE_FORMERR, true, false },
	{ "OPT option longer than RDATA",
	  BYTES(HDR(0x0100, 1, 0, 0, 1), NAME_EX, QA, OPT(0, 6), 0, 10, 0, 4, 1, 2), -EBADMSG,
	  DNS_RCODE_FORMERR, true, false },
	{ "OPT option header cut", BYTES(HDR(0x0100, 1, 0, 0, 1), NAME_EX, QA, OPT(0, 3), 0, 10, 0),
	  -EBADMSG, DNS_RCODE_FORMERR, true, false },
	{ "ARCOUNT 1 without a record", BYTES(HDR(0x0100, 1, 0, 0, 1), NAME_EX, QA), -EBADMSG,
	  DNS_RCODE_FORMERR, true, false },
	{ "trailing byte after the question", BYTES(HDR(0x0100, 1, 0, 0, 0), NAME_EX, QA, 0),
	  -EBADMSG, DNS_RCODE_FORMERR, true, false },
	{ "trailing bytes after the OPT RR",
	  BYTES(HDR(0x0100, 1, 0, 0, 1), NAME_EX, QA, OPT(0, 0), 0xde, 0xad), -EBADMSG,
	  DNS_RCODE_FORMERR, true, true },
	{ "OPCODE STATUS", BYTES(HDR(0x1100, 1, 0, 0, 0), NAME_EX, QA), -EOPNOTSUPP,
	  DNS_RCODE_NOTIMP, true, false },
	{ "OPCODE NOTIFY with an unreadable question",
	  BYTES(HDR(0x2000, 1, 0, 0, 0), 0xc0, 0x0c, QA), -EOPNOTSUPP, DNS_RCODE_NOTIMP, false,
	  false },
	{ "OPCODE UPDATE with records", BYTES(HDR(0x2800, 1, 1, 1, 0), NAME_EX, 0, 6, 0, 1),
	  -EOPNOTSUPP, DNS_RCODE_NOTIMP, true, false },
	{ "EDNS version 1", BYTES(HDR(0x0100, 1, 0, 0, 1), NAME_EX, QA, OPT(1, 0)),
	  -EPROTONOSUPPORT, DNS_RCODE_BADVERS, true, true },
	{ "EDNS version 1 with options we cannot read",
	  BYTES(HDR(0x0100, 1, 0, 0, 1), NAME_EX, QA, OPT(1, 3), 1, 2, 3), -EPROTONOSUPPORT,
	  DNS_RCODE_BADVERS, true, true },
};

static void test_bad_queries(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad_queries); i++) {
		const struct bad_query *t = &bad_queries[i];
		struct dns_query q;

		printf("# %s\n", t->what);
		assert_int_equal(parse_exact(t->msg, t->len, &q), t->ret);
		if (t->ret == -EINVAL)
			continue;
		assert_int_equal(q.id, 0xbeef);
		assert_int_equal(q.rcode_hint, t->hint);
		assert_int_equal(q.has_question, t->has_question);
		assert_int_equal(q.edns, t->edns);
		if (t->has_question) {
			assert_string_equal(q.name, "example.com");
			assert_int_equal(q.qwire_len, 13 + 4);
		} else {
			assert_string_equal(q.name, "");
		}
		if (t->hint == DNS_RCODE_BADVERS) {
			assert_true(q.edns_badvers);
			assert_int_equal(q.edns_version, 1);
		}
	}
}

/* ---- query builder for names and EDNS fields ---------------------------- */

struct mq {
	uint8_t b[1024];
	size_t n;
};

static void mq_raw(struct mq *m, const void *p, size_t n)
{
	assert_true(m->n + n <= sizeof(m->b));
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void mq_u8(struct mq *m, uint8_t v)
{
	mq_raw(m, &v, 1);
}

static void mq_u16(struct mq *m, uint16_t v)
{
	mq_u8(m, (uint8_t)(v >> 8));
	mq_u8(m, (uint8_t)v);
}

static void mq_u32(struct mq *m, uint32_t v)
{
	mq_u16(m, (uint16_t)(v >> 16));
	mq_u16(m, (uint16_t)v);
}

static void mq_header(struct mq *m, uint16_t flags, uint16_t ar)
{
	m->n = 0;
	mq_u16(m, 0x4242);
	mq_u16(m, flags);
	mq_u16(m, 1);
	mq_u16(m, 0);
	mq_u16(m, 0);
	mq_u16(m, ar);
}

/* Labels of the given lengths, each filled with @fill. */
static void mq_name_lengths(struct mq *m, const unsigned *lens, size_t n, char fill)
{
	for (size_t i = 0; i < n; i++) {
		mq_u8(m, (uint8_t)lens[i]);
		for (unsigned j = 0; j < lens[i]; j++)
			mq_u8(m, (uint8_t)fill);
	}
	mq_u8(m, 0);
}

static void mq_opt(struct mq *m, uint16_t payload, uint32_t ttl, const uint8_t *rdata,
		   uint16_t rdlen)
{
	mq_u8(m, 0);
	mq_u16(m, DNS_TYPE_OPT);
	mq_u16(m, payload);
	mq_u32(m, ttl);
	mq_u16(m, rdlen);
	if (rdlen)
		mq_raw(m, rdata, rdlen);
}

static void mq_qa(struct mq *m)
{
	mq_u16(m, DNS_TYPE_A);
	mq_u16(m, DNS_CLASS_IN);
}

static void test_edns_fields(void **state)
{
	static const uint8_t cookie[] = { 0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8 };
	static const struct {
		uint16_t payload;
		uint32_t ttl;
		uint16_t udp_size;
		bool do_bit;
	} t[] = {
		{ 1232, 0x00008000, 1232, true }, { 1232, 0x00000000, 1232, false },
		{ 100, 0, 512, false },		  { 0, 0, 512, false },
		{ 512, 0, 512, false },		  { 4096, 0, 4096, false },
		{ 4097, 0, 4096, false },	  { 65535, 0x00008000, 4096, true },
	};
	(void)state;

	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		struct dns_query q;
		struct mq m;

		mq_header(&m, 0x0100, 1);
		mq_raw(&m, (const uint8_t[]){ NAME_EX }, 13);
		mq_qa(&m);
		mq_opt(&m, t[i].payload, t[i].ttl, cookie, sizeof(cookie));
		assert_int_equal(parse_exact(m.b, m.n, &q), 0);
		assert_true(q.edns);
		assert_int_equal(q.udp_size, t[i].udp_size);
		assert_int_equal(q.edns_do, t[i].do_bit);
		assert_int_equal(q.edns_version, 0);
	}
}

/* The audit log's "target" of a query: the name as sent, nothing folded. */
static void test_qname_text(void **state)
{
	static const struct {
		const char *wire; /* a question's QNAME */
		size_t len;
		const char *text; /* NULL: malformed */
	} cases[] = {
		/* A name's length bytes and labels side by side, which clang-format
		 * would put a line each. */
		/* clang-format off */
		{ "\x03" "WwW" "\x07" "Example" "\x04" "TEST" "\x00", 19, "WwW.Example.TEST" },
		{ "\x0a" "2852039166" "\x00", 12, "2852039166" },
		{ "\x03" "a.b" "\x01" "\\" "\x00", 8, "a\\.b.\\\\" },
		{ "\x02" "\x00\x1b" "\x01" "\xff" "\x00", 7, "\\000\\027.\\255" },
		{ "\x00", 1, "." },
		{ "\x05" "ab", 3, NULL },	 /* the label runs past the end */
		{ "\x03" "abc", 4, NULL },	 /* no root label */
		{ "\xc0\x0c", 2, NULL },	 /* a pointer: never in a question we keep */
		/* clang-format on */
	};
	char out[DNS_QNAME_RAW_MAX];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n = dns_qname_text((const uint8_t *)cases[i].wire, cases[i].len, out,
				       sizeof(out));

		if (!cases[i].text) {
			assert_int_equal(n, -EBADMSG);
			assert_string_equal(out, "");
			continue;
		}
		assert_string_equal(out, cases[i].text);
		assert_int_equal(n, (int)strlen(cases[i].text));
	}
	/* the longest name, every byte escaped, fits */
	{
		uint8_t wire[256];
		size_t p = 0;

		while (p + 64 <= 255) {
			wire[p++] = 63;
			memset(wire + p, 0x01, 63);
			p += 63;
		}
		wire[p++] = 0;
		assert_true(dns_qname_text(wire, p, out, sizeof(out)) > 0);
		assert_true(strlen(out) < sizeof(out));
	}
}

static void test_name_case_and_flags(void **state)
{
	/* clang-format would give each byte a line of its own */
	/* clang-format off */
	static const uint8_t msg[] = { HDR(0x0110, 1, 0, 0, 0),
				       3, 'W', 'w', 'W', 7, 'E', 'X', 'A', 'M',
				       'P', 'L', 'E', 3, 'C', 'o', 'M', 0, QA };
	/* clang-format on */
	struct dns_query q;
	(void)state;

	assert_int_equal(parse_exact(msg, sizeof(msg), &q), 0);
	assert_string_equal(q.name, "www.example.com");
	assert_true(q.rd);
	assert_true(q.cd);
	/* The question is kept as sent, for the reply to echo. */
	assert_memory_equal(q.qwire, msg + 12, sizeof(msg) - 12);
}

struct name_case {
	const char *what;
	unsigned lens[130];
	size_t nlabels;
	int ret;
	size_t text_len;
};

static void test_name_limits(void **state)
{
	static struct name_case t[] = {
		{ "one 63-byte label", { 63 }, 1, 0, 63 },
		{ "one 64-byte label", { 64 }, 1, -EBADMSG, 0 },
		{ "63+63+63+61 = 255 wire bytes", { 63, 63, 63, 61 }, 4, 0, 253 },
		{ "63+63+63+62 = 256 wire bytes", { 63, 63, 63, 62 }, 4, -EBADMSG, 0 },
		{ "root", { 0 }, 0, 0, 0 },
	};
	struct name_case ones[2] = {
		{ "127 one-byte labels = 255 wire bytes", { 0 }, 127, 0, 253 },
		{ "128 one-byte labels = 257 wire bytes", { 0 }, 128, -EBADMSG, 0 },
	};
	(void)state;

	for (size_t k = 0; k < 2; k++)
		for (size_t i = 0; i < ones[k].nlabels; i++)
			ones[k].lens[i] = 1;

	for (size_t k = 0; k < ARRAY_SIZE(t) + ARRAY_SIZE(ones); k++) {
		const struct name_case *c = k < ARRAY_SIZE(t) ? &t[k] : &ones[k - ARRAY_SIZE(t)];
		struct dns_query q;
		struct mq m;

		printf("# %s\n", c->what);
		mq_header(&m, 0x0100, 0);
		mq_name_lengths(&m, c->lens, c->nlabels, 'X');
		mq_qa(&m);
		assert_int_equal(parse_exact(m.b, m.n, &q), c->ret);
		if (c->ret == 0) {
			assert_int_equal(strlen(q.name), c->text_len);
			/* lowercased, labels joined with dots */
			assert_true(c->nlabels == 0 || q.name[0] == 'x');
			assert_int_equal(q.qwire_len, m.n - 12);
		} else {
			assert_int_equal(q.rcode_hint, DNS_RCODE_FORMERR);
		}
	}
}

/* Length bytes with the top bits set are pointers (11) or extended label
 * types (01, 10), even when enough bytes follow to read them as lengths. */
static void test_label_type_bits(void **state)
{
	static const uint8_t tops[] = { 0x40, 0x80, 0xbf, 0xc0, 0xc1 };
	(void)state;

	for (size_t i = 0; i < ARRAY_SIZE(tops); i++) {
		struct dns_query q;
		struct mq m;

		mq_header(&m, 0x0100, 0);
		mq_u8(&m, tops[i]);
		for (unsigned j = 0; j < tops[i]; j++)
			mq_u8(&m, 'a');
		mq_u8(&m, 0);
		mq_qa(&m);
		assert_int_equal(parse_exact(m.b, m.n, &q), -EBADMSG);
		assert_int_equal(q.rcode_hint, DNS_RCODE_FORMERR);
		assert_false(q.has_question);
	}
}

static void test_weird_names(void **state)
{
	static const struct {
		const char *what;
		uint8_t label[8];
		uint8_t len;
		const char *name;
		bool weird;
	} t[] = {
		{ "dot inside a label", { 'a', '.', 'b' }, 3, "a?b.com", true },
		{ "space", { 'a', ' ', 'b' }, 3, "a?b.com", true },
		{ "NUL byte", { 'a', 0, 'b' }, 3, "a?b.com", true },
		{ "DEL", { 0x7f }, 1, "?.com", true },
		{ "high byte", { 0xc3, 0xa9 }, 2, "??.com", true },
		{ "underscore", { '_', 'x' }, 2, "_x.com", false },
		{ "wildcard", { '*' }, 1, "*.com", false },
		{ "hyphen and digits", { '-', '0', 'Z' }, 3, "-0z.com", false },
	};
	(void)state;

	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		struct dns_query q;
		struct mq m;

		printf("# %s\n", t[i].what);
		mq_header(&m, 0x0100, 0);
		mq_u8(&m, t[i].len);
		mq_raw(&m, t[i].label, t[i].len);
		mq_raw(&m, (const uint8_t[]){ 3, 'c', 'o', 'm', 0 }, 5);
		mq_qa(&m);
		assert_int_equal(parse_exact(m.b, m.n, &q), 0);
		assert_string_equal(q.name, t[i].name);
		assert_int_equal(q.name_weird, t[i].weird);
	}
}

/* ---- reading replies back ----------------------------------------------- */

struct rr {
	size_t owner; /* offset of the owner name */
	uint16_t type;
	uint16_t class;
	uint32_t ttl;
	uint16_t rdlen;
	size_t rdata; /* offset */
};

struct reply {
	uint16_t id, flags, qd, an, ns, ar;
	size_t qlen;
	struct rr rr[128];
	size_t nrr;
};

static uint16_t g16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t g32(const uint8_t *p)
{
	return (uint32_t)g16(p) << 16 | g16(p + 2);
}

/* Decode the name at @off into dotted text, following pointers (a few at
 * most); returns the offset after the name at @off. */
static size_t read_name(const uint8_t *b, size_t n, size_t off, char *text, size_t tlen)
{
	size_t p = off, after = 0, t = 0;
	int jumps = 0;

	for (;;) {
		uint8_t l;

		assert_true(p < n);
		l = b[p];
		if ((l & 0xc0) == 0xc0) {
			assert_true(p + 1 < n);
			if (!after)
				after = p + 2;
			p = (size_t)(l & 0x3f) << 8 | b[p + 1];
			assert_true(++jumps < 8);
			continue;
		}
		assert_true(l < 64);
		p++;
		if (l == 0)
			break;
		assert_true(p + l <= n);
		if (t)
			text[t++] = '.';
		assert_true(t + l < tlen);
		memcpy(text + t, b + p, l);
		t += l;
		p += l;
	}
	text[t] = '\0';
	return after ? after : p;
}

static void read_reply(const uint8_t *b, size_t n, struct reply *r)
{
	size_t p = 12;
	char name[300];

	memset(r, 0, sizeof(*r));
	assert_true(n >= 12);
	r->id = g16(b);
	r->flags = g16(b + 2);
	r->qd = g16(b + 4);
	r->an = g16(b + 6);
	r->ns = g16(b + 8);
	r->ar = g16(b + 10);
	assert_true(r->qd <= 1);
	if (r->qd) {
		p = read_name(b, n, p, name, sizeof(name)) + 4;
		assert_true(p <= n);
		r->qlen = p - 12;
	}
	assert_true((size_t)r->an + r->ns + r->ar <= ARRAY_SIZE(r->rr));
	for (size_t i = 0; i < (size_t)r->an + r->ns + r->ar; i++) {
		struct rr *rr = &r->rr[r->nrr++];

		rr->owner = p;
		p = read_name(b, n, p, name, sizeof(name));
		assert_true(p + 10 <= n);
		rr->type = g16(b + p);
		rr->class = g16(b + p + 2);
		rr->ttl = g32(b + p + 4);
		rr->rdlen = g16(b + p + 8);
		p += 10;
		rr->rdata = p;
		assert_true(p + rr->rdlen <= n);
		p += rr->rdlen;
	}
	/* Nothing after the records. */
	assert_int_equal(p, n);
}

#define F_QR 0x8000
#define F_AA 0x0400
#define F_TC 0x0200
#define F_RD 0x0100
#define F_RA 0x0080
#define F_CD 0x0010

static struct dns_query parsed(const uint8_t *msg, size_t len)
{
	struct dns_query q;

	assert_int_equal(dns_parse_query(msg, len, &q), 0);
	return q;
}

static struct sl_addr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	struct sl_addr x = {
		.b = { [10] = 0xff, [11] = 0xff, [12] = a, [13] = b, [14] = c, [15] = d }
	};
	return x;
}

/* The OPT RR of a reply: owner root, payload 1232, version 0. */
static void check_opt(const uint8_t *b, const struct rr *rr, uint8_t ext_rcode, bool do_bit)
{
	assert_int_equal(b[rr->owner], 0);
	assert_int_equal(rr->type, DNS_TYPE_OPT);
	assert_int_equal(rr->class, DNS_OUR_UDP_SIZE);
	assert_int_equal(rr->ttl >> 24, ext_rcode);
	assert_int_equal((rr->ttl >> 16) & 0xff, 0);
	assert_int_equal(rr->ttl & 0xffff, do_bit ? 0x8000 : 0);
}

static void test_build_a(void **state)
{
	struct dns_query q = parsed(q_glibc_a, sizeof(q_glibc_a));
	struct sl_addr a = v4(10, 200, 0, 5);
	uint8_t out[512];
	struct reply r;
	int n;
	(void)state;

	n = dns_build_a(&q, &a, 1, 60, true, out, sizeof(out));
	assert_int_equal(n, 12 + 21 + 16);
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.id, 0x68aa);
	assert_int_equal(r.flags, F_QR | F_RD | F_RA); /* NOERROR, AA=0 */
	assert_int_equal(r.qd, 1);
	assert_int_equal(r.an, 1);
	assert_int_equal(r.ns, 0);
	assert_int_equal(r.ar, 0);
	/* question echoed byte for byte, "Example" keeps its capital */
	assert_memory_equal(out + 12, q_glibc_a + 12, 21);
	/* owner is a pointer to the question's name */
	assert_int_equal(g16(out + r.rr[0].owner), 0xc00c);
	assert_int_equal(r.rr[0].type, DNS_TYPE_A);
	assert_int_equal(r.rr[0].class, DNS_CLASS_IN);
	assert_int_equal(r.rr[0].ttl, 60);
	assert_int_equal(r.rr[0].rdlen, 4);
	assert_memory_equal(out + r.rr[0].rdata, "\x0a\xc8\x00\x05", 4);
}

static void test_build_a_edns(void **state)
{
	struct dns_query q = parsed(q_glibc_a_edns, sizeof(q_glibc_a_edns));
	struct sl_addr a[2] = { v4(10, 200, 0, 5), v4(10, 200, 0, 6) };
	uint8_t out[512];
	struct reply r;
	int n;
	(void)state;

	n = dns_build_a(&q, a, 2, 30, true, out, sizeof(out));
	assert_int_equal(n, 12 + 21 + 32 + 11);
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.flags, F_QR | F_RD | F_RA);
	assert_int_equal(r.an, 2);
	assert_int_equal(r.ar, 1);
	assert_memory_equal(out + r.rr[1].rdata, "\x0a\xc8\x00\x06", 4);
	assert_int_equal(r.rr[1].ttl, 30);
	check_opt(out, &r.rr[2], 0, false);
	assert_int_equal(r.rr[2].rdlen, 0);

	/* DO echoed; CD echoed */
	q.edns_do = true;
	q.cd = true;
	n = dns_build_a(&q, a, 1, 30, true, out, sizeof(out));
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.flags, F_QR | F_RD | F_RA | F_CD);
	check_opt(out, &r.rr[1], 0, true);
}

static void test_build_a_truncation(void **state)
{
	static struct sl_addr many[100];
	static const struct {
		const char *what;
		const uint8_t *msg;
		size_t len;
		size_t n;
		bool udp;
		bool tc;
	} t[] = {
		{ "29 answers fit 512", q_glibc_a, sizeof(q_glibc_a), 29, true, false },
		{ "30 answers do not fit 512", q_glibc_a, sizeof(q_glibc_a), 30, true, true },
		{ "30 answers over TCP", q_glibc_a, sizeof(q_glibc_a), 30, false, false },
		{ "40 answers fit EDNS 1200", q_glibc_a_edns, sizeof(q_glibc_a_edns), 40, true,
		  false },
		{ "72 answers fit EDNS 1200", q_glibc_a_edns, sizeof(q_glibc_a_edns), 72, true,
		  false },
		{ "73 answers do not fit EDNS 1200", q_glibc_a_edns, sizeof(q_glibc_a_edns), 73,
		  true, true },
		{ "100 answers over TCP", q_glibc_a_edns, sizeof(q_glibc_a_edns), 100, false,
		  false },
	};
	(void)state;

	for (size_t i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = v4(10, 200, 1, (uint8_t)i);

	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		struct dns_query q = parsed(t[i].msg, t[i].len);
		uint8_t out[4096];
		struct reply r;
		int n;

		printf("# %s\n", t[i].what);
		n = dns_build_a(&q, many, t[i].n, 5, t[i].udp, out, sizeof(out));
		assert_true(n > 0);
		read_reply(out, (size_t)n, &r);
		assert_int_equal(!!(r.flags & F_TC), t[i].tc);
		assert_int_equal(r.qd, 1);
		assert_int_equal(r.an, t[i].tc ? 0 : t[i].n);
		assert_int_equal(r.ar, q.edns ? 1 : 0);
		if (t[i].udp)
			assert_true((size_t)n <= q.udp_size);
		if (t[i].tc)
			assert_int_equal(n, 12 + 21 + (q.edns ? 11 : 0));
	}
}

static void test_build_a_bad_input(void **state)
{
	struct dns_query q = parsed(q_glibc_a, sizeof(q_glibc_a));
	struct dns_query noq;
	struct sl_addr v6 = { .b = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 } };
	uint8_t out[512];
	(void)state;

	assert_int_equal(dns_build_a(&q, &v6, 1, 60, true, out, sizeof(out)), -EINVAL);
	assert_int_equal(
		dns_parse_query((const uint8_t[]){ HDR(0x0100, 1, 0, 0, 0), 0xc0, 0x0c, QA }, 16,
				&noq),
		-EBADMSG);
	assert_int_equal(dns_build_a(&noq, NULL, 0, 60, true, out, sizeof(out)), -EINVAL);
	assert_int_equal(dns_build_nodata(&noq, 60, out, sizeof(out)), -EINVAL);
}

static void test_build_nodata(void **state)
{
	struct dns_query q = parsed(q_glibc_aaaa_edns, sizeof(q_glibc_aaaa_edns));
	uint8_t out[512];
	char name[300];
	struct reply r;
	const struct rr *soa;
	size_t p;
	int n;
	(void)state;

	n = dns_build_nodata(&q, 300, out, sizeof(out));
	assert_true(n > 0);
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.id, 0x8283);
	assert_int_equal(r.flags, F_QR | F_RD | F_RA); /* NOERROR */
	assert_int_equal(r.qd, 1);
	assert_int_equal(r.an, 0);
	assert_int_equal(r.ns, 1);
	assert_int_equal(r.ar, 1);
	soa = &r.rr[0];
	assert_int_equal(soa->type, DNS_TYPE_SOA);
	assert_int_equal(soa->class, DNS_CLASS_IN);
	assert_int_equal(soa->ttl, 300);
	read_name(out, (size_t)n, soa->owner, name, sizeof(name));
	assert_string_equal(name, "www.Example.org");
	p = read_name(out, (size_t)n, soa->rdata, name, sizeof(name));
	assert_string_equal(name, "sluice.invalid");
	p = read_name(out, (size_t)n, p, name, sizeof(name));
	assert_string_equal(name, "hostmaster.sluice.invalid");
	assert_int_equal(p + 20, soa->rdata + soa->rdlen);
	assert_int_equal(g32(out + p + 16), 300); /* MINIMUM */
	check_opt(out, &r.rr[1], 0, false);
}

static void test_build_error_nxdomain_ede(void **state)
{
	static const char text[] = "blocked by sluice policy";
	struct dns_query q = parsed(q_cares_txt_edns, sizeof(q_cares_txt_edns));
	uint8_t out[512];
	struct reply r;
	const struct rr *opt;
	size_t tl = strlen(text);
	int n;
	(void)state;

	n = dns_build_error(&q, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED, text, out, sizeof(out));
	assert_true(n > 0);
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.id, 0x1235);
	assert_int_equal(r.flags, F_QR | F_RD | F_RA | DNS_RCODE_NXDOMAIN);
	assert_int_equal(r.qd, 1);
	assert_int_equal(r.an, 0);
	assert_int_equal(r.ns, 0);
	assert_int_equal(r.ar, 1);
	opt = &r.rr[0];
	check_opt(out, opt, 0, false);
	assert_int_equal(opt->rdlen, 4 + 2 + tl);
	assert_int_equal(g16(out + opt->rdata), 15);	     /* OPTION-CODE EDE */
	assert_int_equal(g16(out + opt->rdata + 2), 2 + tl); /* OPTION-LENGTH */
	assert_int_equal(g16(out + opt->rdata + 4), 15);     /* INFO-CODE Blocked */
	assert_memory_equal(out + opt->rdata + 6, text, tl);
}

static void test_build_error_variants(void **state)
{
	struct dns_query plain = parsed(q_cares_txt, sizeof(q_cares_txt));
	struct dns_query edns = parsed(q_cares_txt_edns, sizeof(q_cares_txt_edns));
	char longtext[300];
	uint8_t out[512];
	struct reply r;
	int n;
	(void)state;

	/* No EDNS in the query: NXDOMAIN without OPT, EDE dropped. */
	n = dns_build_error(&plain, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED, "x", out, sizeof(out));
	assert_int_equal(n, 12 + (int)sizeof(q_cares_txt) - 12);
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.flags, F_QR | F_RD | F_RA | DNS_RCODE_NXDOMAIN);
	assert_int_equal(r.ar, 0);

	/* No EDE asked: an empty OPT. */
	n = dns_build_error(&edns, DNS_RCODE_REFUSED, 0, "ignored", out, sizeof(out));
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.flags & 0xf, DNS_RCODE_REFUSED);
	assert_int_equal(r.rr[0].rdlen, 0);

	/* SERVFAIL with an EDE code and no text. */
	n = dns_build_error(&edns, DNS_RCODE_SERVFAIL, DNS_EDE_PROHIBITED, NULL, out, sizeof(out));
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.flags & 0xf, DNS_RCODE_SERVFAIL);
	assert_int_equal(r.rr[0].rdlen, 6);
	assert_int_equal(g16(out + r.rr[0].rdata + 4), DNS_EDE_PROHIBITED);

	/* Long text is cut at DNS_EDE_TEXT_MAX. */
	memset(longtext, 'x', sizeof(longtext) - 1);
	longtext[sizeof(longtext) - 1] = '\0';
	n = dns_build_error(&edns, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED, longtext, out, sizeof(out));
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.rr[0].rdlen, 6 + DNS_EDE_TEXT_MAX);

	/* BADVERS only with EDNS; rcodes past 12 bits never. */
	assert_int_equal(dns_build_error(&plain, DNS_RCODE_BADVERS, 0, NULL, out, sizeof(out)),
			 -EINVAL);
	assert_int_equal(dns_build_error(&edns, 0x1000, 0, NULL, out, sizeof(out)), -EINVAL);
}

static void test_build_error_from_failed_parse(void **state)
{
	static const uint8_t compressed[] = { HDR(0x0100, 1, 0, 0, 0), 0xc0, 0x0c, QA };
	static const uint8_t status[] = { HDR(0x1100, 1, 0, 0, 0), NAME_EX, QA };
	static const uint8_t v1[] = {
		HDR(0x0000, 1, 0, 0, 1), NAME_EX, QA, 0, 0, 41, 0x10, 0x00, 0, 1, 0x80, 0, 0, 0
	};
	struct dns_query q;
	uint8_t out[512];
	struct reply r;
	int n;
	(void)state;

	/* FORMERR: no question to echo. */
	assert_int_equal(dns_parse_query(compressed, sizeof(compressed), &q), -EBADMSG);
	n = dns_build_error(&q, q.rcode_hint, 0, NULL, out, sizeof(out));
	assert_int_equal(n, 12);
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.id, 0xbeef);
	assert_int_equal(r.flags, F_QR | F_RD | F_RA | DNS_RCODE_FORMERR);
	assert_int_equal(r.qd, 0);

	/* NOTIMP: opcode echoed, question echoed. */
	assert_int_equal(dns_parse_query(status, sizeof(status), &q), -EOPNOTSUPP);
	n = dns_build_error(&q, q.rcode_hint, 0, NULL, out, sizeof(out));
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.flags, F_QR | (2 << 11) | F_RD | F_RA | DNS_RCODE_NOTIMP);
	assert_int_equal(r.qd, 1);
	assert_memory_equal(out + 12, status + 12, 17);

	/* BADVERS: 16 = header RCODE 0 + extended RCODE 1 in our OPT, which
	 * says version 0; DO echoed. */
	assert_int_equal(dns_parse_query(v1, sizeof(v1), &q), -EPROTONOSUPPORT);
	assert_true(q.edns_badvers);
	n = dns_build_error(&q, q.rcode_hint, 0, NULL, out, sizeof(out));
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.flags, F_QR | F_RA);
	assert_int_equal(r.qd, 1);
	assert_int_equal(r.ar, 1);
	check_opt(out, &r.rr[0], 1, true);
}

/* Every builder: any buffer shorter than the reply gives -ENOSPC and
 * writes nothing past its end (heap buffers of the exact size, for ASan). */
static void test_builders_enospc(void **state)
{
	struct dns_query q = parsed(q_glibc_a_edns, sizeof(q_glibc_a_edns));
	struct sl_addr a[3] = { v4(1, 2, 3, 4), v4(5, 6, 7, 8), v4(9, 10, 11, 12) };
	(void)state;

	for (int b = 0; b < 3; b++) {
		uint8_t big[1024];
		int need;

		if (b == 0)
			need = dns_build_a(&q, a, 3, 1, false, big, sizeof(big));
		else if (b == 1)
			need = dns_build_nodata(&q, 1, big, sizeof(big));
		else
			need = dns_build_error(&q, DNS_RCODE_NXDOMAIN, 15, "blocked", big,
					       sizeof(big));
		assert_true(need > 12);
		for (int len = 0; len <= need; len++) {
			uint8_t *out = malloc(len ? (size_t)len : 1);
			int n;

			assert_non_null(out);
			if (b == 0)
				n = dns_build_a(&q, a, 3, 1, false, out, (size_t)len);
			else if (b == 1)
				n = dns_build_nodata(&q, 1, out, (size_t)len);
			else
				n = dns_build_error(&q, DNS_RCODE_NXDOMAIN, 15, "blocked", out,
						    (size_t)len);
			if (len < need) {
				assert_int_equal(n, -ENOSPC);
			} else {
				assert_int_equal(n, need);
				assert_memory_equal(out, big, (size_t)need);
			}
			free(out);
		}
	}
}

static void test_tcp_frame_len(void **state)
{
	uint8_t buf[2 + sizeof(q_glibc_a) + 5];
	(void)state;

	buf[0] = 0;
	buf[1] = sizeof(q_glibc_a);
	memcpy(buf + 2, q_glibc_a, sizeof(q_glibc_a));
	memset(buf + 2 + sizeof(q_glibc_a), 0xaa, 5);

	assert_int_equal(dns_tcp_frame_len(buf, 0), 0);
	assert_int_equal(dns_tcp_frame_len(buf, 1), 0);
	assert_int_equal(dns_tcp_frame_len(buf, 2), 0);
	assert_int_equal(dns_tcp_frame_len(buf, 1 + sizeof(q_glibc_a)), 0);
	assert_int_equal(dns_tcp_frame_len(buf, 2 + sizeof(q_glibc_a)), sizeof(q_glibc_a));
	/* the next message's first bytes do not matter */
	assert_int_equal(dns_tcp_frame_len(buf, sizeof(buf)), sizeof(q_glibc_a));
	/* too short to be a DNS message */
	assert_int_equal(dns_tcp_frame_len((const uint8_t[]){ 0, 11 }, 2), -EBADMSG);
	assert_int_equal(dns_tcp_frame_len((const uint8_t[]){ 0, 0 }, 2), -EBADMSG);
	/* a 65535-byte message is announced, not yet there */
	assert_int_equal(dns_tcp_frame_len((const uint8_t[]){ 0xff, 0xff, 0 }, 3), 0);
}

static void test_type_names(void **state)
{
	static const struct {
		uint16_t type;
		const char *name;
	} t[] = {
		{ 1, "A" },	    { 28, "AAAA" },  { 16, "TXT" },   { 10, "NULL" },
		{ 255, "ANY" },	    { 65, "HTTPS" }, { 64, "SVCB" },  { 15, "MX" },
		{ 5, "CNAME" },	    { 12, "PTR" },   { 33, "SRV" },   { 257, "CAA" },
		{ 0, "OTHER" },	    { 3, "OTHER" },  { 99, "OTHER" }, { 258, "OTHER" },
		{ 65535, "OTHER" },
	};
	(void)state;

	for (size_t i = 0; i < ARRAY_SIZE(t); i++)
		assert_string_equal(dns_type_name(t[i].type), t[i].name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_queries),
		cmocka_unit_test(test_real_queries_truncated),
		cmocka_unit_test(test_bad_queries),
		cmocka_unit_test(test_edns_fields),
		cmocka_unit_test(test_qname_text),
		cmocka_unit_test(test_name_case_and_flags),
		cmocka_unit_test(test_name_limits),
		cmocka_unit_test(test_label_type_bits),
		cmocka_unit_test(test_weird_names),
		cmocka_unit_test(test_build_a),
		cmocka_unit_test(test_build_a_edns),
		cmocka_unit_test(test_build_a_truncation),
		cmocka_unit_test(test_build_a_bad_input),
		cmocka_unit_test(test_build_nodata),
		cmocka_unit_test(test_build_error_nxdomain_ede),
		cmocka_unit_test(test_build_error_variants),
		cmocka_unit_test(test_build_error_from_failed_parse),
		cmocka_unit_test(test_builders_enospc),
		cmocka_unit_test(test_tcp_frame_len),
		cmocka_unit_test(test_type_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
