// SPDX-License-Identifier: MIT
/* DNS wire format: strict parsing of a sandbox's queries and the replies
 * the filter sends back (A, NODATA with SOA, errors with EDNS and EDE). */
#include "dnsfilter/dnsfilter.h"

#include "common/addr.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Header flag bits, in the 16-bit flags word. */
#define DNS_F_QR 0x8000
#define DNS_F_AA 0x0400
#define DNS_F_TC 0x0200
#define DNS_F_RD 0x0100
#define DNS_F_RA 0x0080
#define DNS_F_AD 0x0020
#define DNS_F_CD 0x0010
#define DNS_OPCODE_SHIFT 11
#define DNS_OPCODE_QUERY 0

#define DNS_EDNS_DO 0x8000
#define DNS_OPT_EDE 15
/* An OPT RR without options: root name, TYPE, CLASS, TTL, RDLENGTH. */
#define DNS_OPT_FIXED_LEN 11
/* One answer: name pointer, TYPE, CLASS, TTL, RDLENGTH, an IPv4 address. */
#define DNS_A_RR_LEN 16
#define DNS_MSG_MAX 65535
/* Compression pointer to the question's name, right after the header. */
#define DNS_PTR_QNAME 0xc00c

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/*
 * Decode the QNAME at @off into @q->name. Compression pointers and the
 * extended label types (top bits 01 and 10) are refused: a query has no
 * earlier name to point to, and accepting them would only open loops.
 * On success *@off is past the name's root label.
 */
static int parse_qname(const uint8_t *msg, size_t len, size_t *off, struct dns_query *q)
{
	size_t p = *off, wire = 0, t = 0;

	for (;;) {
		uint8_t l;

		if (p >= len)
			return -EBADMSG;
		l = msg[p++];
		if (l & 0xc0)
			return -EBADMSG;
		wire += 1u + l;
		if (wire > 255)
			return -EBADMSG;
		if (l == 0)
			break;
		if (l > len - p)
			return -EBADMSG;
		/* wire <= 255 keeps t + l + 1 <= 253; this guards the buffer
		 * should that arithmetic ever change. */
		if (t + 1u + l > DNS_NAME_TEXT_MAX)
			return -EBADMSG;
		if (t)
			q->name[t++] = '.';
		for (size_t i = 0; i < l; i++) {
			uint8_t c = msg[p + i];

			if (c >= 'A' && c <= 'Z')
				c = (uint8_t)(c + ('a' - 'A'));
			else if (c == '.' || c <= ' ' || c > '~') {
				q->name_weird = true;
				c = '?';
			}
			q->name[t++] = (char)c;
		}
		p += l;
	}
	q->name[t] = '\0';
	*off = p;
	return 0;
}

static int parse_question(const uint8_t *msg, size_t len, size_t *off, struct dns_query *q)
{
	size_t start = *off, p = *off;
	int r;

	r = parse_qname(msg, len, &p, q);
	if (r < 0)
		goto bad;
	if (len - p < 4) {
		r = -EBADMSG;
		goto bad;
	}
	q->qtype = rd16(msg + p);
	q->qclass = rd16(msg + p + 2);
	p += 4;
	/* parse_qname() bounds the name to 255 bytes, so this fits. */
	q->qwire_len = (uint16_t)(p - start);
	memcpy(q->qwire, msg + start, q->qwire_len);
	q->has_question = true;
	*off = p;
	return 0;
bad:
	q->name[0] = '\0';
	q->name_weird = false;
	return r;
}

/* The one additional record a query may carry: an OPT RR (RFC 6891). */
static int parse_opt(const uint8_t *msg, size_t len, size_t *off, struct dns_query *q)
{
	size_t p = *off;
	uint16_t payload, rdlen;
	uint32_t ttl;

	if (len - p < DNS_OPT_FIXED_LEN)
		return -EBADMSG;
	if (msg[p] != 0 || rd16(msg + p + 1) != DNS_TYPE_OPT)
		return -EBADMSG;
	payload = rd16(msg + p + 3);
	ttl = rd32(msg + p + 5);
	rdlen = rd16(msg + p + 9);
	p += DNS_OPT_FIXED_LEN;
	if (rdlen > len - p)
		return -EBADMSG;

	q->edns_version = (uint8_t)(ttl >> 16);
	/* Options of a later version may be laid out differently; their
	 * requester only gets BADVERS from us, so leave them unread. */
	if (q->edns_version == 0) {
		size_t o = p, end = p + rdlen;

		while (o < end) {
			uint16_t olen;

			if (end - o < 4)
				return -EBADMSG;
			olen = rd16(msg + o + 2);
			o += 4;
			if (olen > end - o)
				return -EBADMSG;
			o += olen;
		}
	}

	q->edns = true;
	q->edns_do = (ttl & DNS_EDNS_DO) != 0;
	q->edns_badvers = q->edns_version > 0;
	if (payload < DNS_UDP_MIN)
		payload = DNS_UDP_MIN;
	else if (payload > DNS_UDP_MAX)
		payload = DNS_UDP_MAX;
	q->udp_size = payload;
	*off = p + rdlen;
	return 0;
}

static int formerr(struct dns_query *q)
{
	q->rcode_hint = DNS_RCODE_FORMERR;
	return -EBADMSG;
}

int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *q)
{
	uint16_t flags, qdcount, ancount, nscount, arcount;
	size_t off = DNS_HDR_LEN;

	memset(q, 0, sizeof(*q));
	q->udp_size = DNS_UDP_MIN;
	if (!msg || len < DNS_HDR_LEN)
		return -EINVAL;

	q->id = rd16(msg);
	flags = rd16(msg + 2);
	if (flags & DNS_F_QR)
		return -EINVAL;
	q->opcode = (flags >> DNS_OPCODE_SHIFT) & 0xf;
	q->rd = (flags & DNS_F_RD) != 0;
	q->cd = (flags & DNS_F_CD) != 0;
	qdcount = rd16(msg + 4);
	ancount = rd16(msg + 6);
	nscount = rd16(msg + 8);
	arcount = rd16(msg + 10);

	if (q->opcode != DNS_OPCODE_QUERY) {
		/* Echo the question when it reads as one; the rest of an
		 * UPDATE or NOTIFY is not ours to judge. */
		if (qdcount == 1)
			(void)parse_question(msg, len, &off, q);
		q->rcode_hint = DNS_RCODE_NOTIMP;
		return -EOPNOTSUPP;
	}
	if (qdcount != 1)
		return formerr(q);
	if (parse_question(msg, len, &off, q) < 0)
		return formerr(q);
	if (ancount != 0 || nscount != 0 || arcount > 1)
		return formerr(q);
	if (arcount == 1 && parse_opt(msg, len, &off, q) < 0)
		return formerr(q);
	if (off != len)
		return formerr(q);
	if (q->edns_badvers) {
		q->rcode_hint = DNS_RCODE_BADVERS;
		return -EPROTONOSUPPORT;
	}
	return 0;
}

/* ---- reply writer ------------------------------------------------------ */

/* A bounded writer: the first write that does not fit sets @err and every
 * later one is dropped, so builders check once at the end. */
struct wbuf {
	uint8_t *p;
	size_t len;
	size_t cap;
	bool err;
};

static void put(struct wbuf *w, const void *src, size_t n)
{
	if (n == 0)
		return;
	if (w->err || n > w->cap - w->len) {
		w->err = true;
		return;
	}
	memcpy(w->p + w->len, src, n);
	w->len += n;
}

static void put8(struct wbuf *w, uint8_t v)
{
	put(w, &v, 1);
}

static void put16(struct wbuf *w, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };

	put(w, b, sizeof(b));
}

static void put32(struct wbuf *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };

	put(w, b, sizeof(b));
}

static int wbuf_done(const struct wbuf *w)
{
	if (w->err || w->len > DNS_MSG_MAX)
		return -ENOSPC;
	return (int)w->len;
}

/* Header and question. RA is set because to the sandbox we are its
 * recursive resolver; AA stays clear because we are no zone's authority. */
static void put_header(struct wbuf *w, const struct dns_query *q, uint16_t rcode, bool tc,
		       uint16_t ancount, uint16_t nscount)
{
	uint16_t flags = DNS_F_QR | DNS_F_RA;

	flags |= (uint16_t)((q->opcode & 0xf) << DNS_OPCODE_SHIFT);
	if (q->rd)
		flags |= DNS_F_RD;
	if (q->cd)
		flags |= DNS_F_CD;
	if (tc)
		flags |= DNS_F_TC;
	flags |= rcode & 0xf;

	put16(w, q->id);
	put16(w, flags);
	put16(w, q->has_question ? 1 : 0);
	put16(w, ancount);
	put16(w, nscount);
	put16(w, q->edns ? 1 : 0);
	if (q->has_question)
		put(w, q->qwire, q->qwire_len);
}

/* Our OPT RR, with an optional Extended DNS Error option (RFC 8914). */
static void put_opt(struct wbuf *w, const struct dns_query *q, uint16_t rcode, uint16_t ede_code,
		    const char *ede_text)
{
	size_t tlen = 0;
	uint32_t ttl;

	if (ede_code && ede_text)
		tlen = strnlen(ede_text, DNS_EDE_TEXT_MAX);
	/* Extended RCODE upper 8 bits, version 0, DO echoed (RFC 3225). */
	ttl = (uint32_t)((rcode >> 4) & 0xff) << 24;
	if (q->edns_do)
		ttl |= DNS_EDNS_DO;

	put8(w, 0);
	put16(w, DNS_TYPE_OPT);
	put16(w, DNS_OUR_UDP_SIZE);
	put32(w, ttl);
	if (!ede_code) {
		put16(w, 0);
		return;
	}
	put16(w, (uint16_t)(4 + 2 + tlen));
	put16(w, DNS_OPT_EDE);
	put16(w, (uint16_t)(2 + tlen));
	put16(w, ede_code);
	put(w, ede_text, tlen);
}

static bool addr_v4_mapped(const struct sl_addr *a)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(a->b, prefix, sizeof(prefix)) == 0;
}

int dns_build_a(const struct dns_query *q, const struct sl_addr *addrs, size_t n, uint32_t ttl,
		bool udp, uint8_t *out, size_t outlen)
{
	struct wbuf w = { .p = out, .cap = out ? outlen : 0 };
	size_t full;
	bool tc = false;

	if (!q || !q->has_question || (n && !addrs))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!addr_v4_mapped(&addrs[i]))
			return -EINVAL;

	if (n > (DNS_MSG_MAX - DNS_HDR_LEN) / DNS_A_RR_LEN) {
		full = DNS_MSG_MAX + 1;
	} else {
		full = DNS_HDR_LEN + q->qwire_len + n * DNS_A_RR_LEN +
		       (q->edns ? DNS_OPT_FIXED_LEN : 0);
	}
	if (udp && full > q->udp_size)
		tc = true;
	else if (full > DNS_MSG_MAX)
		return -ENOSPC;

	put_header(&w, q, DNS_RCODE_NOERROR, tc, tc ? 0 : (uint16_t)n, 0);
	for (size_t i = 0; !tc && i < n; i++) {
		put16(&w, DNS_PTR_QNAME);
		put16(&w, DNS_TYPE_A);
		put16(&w, DNS_CLASS_IN);
		put32(&w, ttl);
		put16(&w, 4);
		put(&w, &addrs[i].b[12], 4);
	}
	if (q->edns)
		put_opt(&w, q, DNS_RCODE_NOERROR, 0, NULL);
	return wbuf_done(&w);
}

int dns_build_nodata(const struct dns_query *q, uint32_t ttl, uint8_t *out, size_t outlen)
{
	/* MNAME sluice.invalid. (RFC 6761: can never be a real name). */
	static const uint8_t mname[] = "\6sluice\7invalid";
	static const uint8_t rname_label[] = "\12hostmaster";
	struct wbuf w = { .p = out, .cap = out ? outlen : 0 };
	size_t soa_rdata_at, mname_at;

	if (!q || !q->has_question)
		return -EINVAL;

	put_header(&w, q, DNS_RCODE_NOERROR, false, 0, 1);
	put16(&w, DNS_PTR_QNAME);
	put16(&w, DNS_TYPE_SOA);
	put16(&w, DNS_CLASS_IN);
	put32(&w, ttl);
	soa_rdata_at = w.len;
	put16(&w, 0); /* RDLENGTH, patched below */
	mname_at = w.len;
	put(&w, mname, sizeof(mname)); /* with its root label */
	/* RNAME hostmaster.sluice.invalid., its tail a pointer to MNAME */
	put(&w, rname_label, sizeof(rname_label) - 1);
	put16(&w, (uint16_t)(0xc000 | mname_at));
	put32(&w, 1);	  /* SERIAL */
	put32(&w, 3600);  /* REFRESH */
	put32(&w, 600);	  /* RETRY */
	put32(&w, 86400); /* EXPIRE */
	put32(&w, ttl);	  /* MINIMUM: the negative-caching TTL (RFC 2308) */
	if (!w.err) {
		size_t rdlen = w.len - soa_rdata_at - 2;

		out[soa_rdata_at] = (uint8_t)(rdlen >> 8);
		out[soa_rdata_at + 1] = (uint8_t)rdlen;
	}
	if (q->edns)
		put_opt(&w, q, DNS_RCODE_NOERROR, 0, NULL);
	return wbuf_done(&w);
}

int dns_build_error(const struct dns_query *q, uint16_t rcode, uint16_t ede_code,
		    const char *ede_text, uint8_t *out, size_t outlen)
{
	struct wbuf w = { .p = out, .cap = out ? outlen : 0 };

	if (!q || rcode > 0xfff || (rcode > 0xf && !q->edns))
		return -EINVAL;
	put_header(&w, q, rcode, false, 0, 0);
	if (q->edns)
		put_opt(&w, q, rcode, ede_code, ede_text);
	return wbuf_done(&w);
}

ssize_t dns_tcp_frame_len(const uint8_t *buf, size_t len)
{
	uint16_t mlen;

	if (!buf || len < 2)
		return 0;
	mlen = rd16(buf);
	if (mlen < DNS_HDR_LEN)
		return -EBADMSG;
	if (len - 2 < mlen)
		return 0;
	return mlen;
}

static const char *const dns_type_names[] = {
	[DNS_TYPE_A] = "A",	    [DNS_TYPE_NS] = "NS",	  [DNS_TYPE_CNAME] = "CNAME",
	[DNS_TYPE_SOA] = "SOA",	    [DNS_TYPE_NULL] = "NULL",	  [DNS_TYPE_PTR] = "PTR",
	[DNS_TYPE_HINFO] = "HINFO", [DNS_TYPE_MX] = "MX",	  [DNS_TYPE_TXT] = "TXT",
	[DNS_TYPE_AAAA] = "AAAA",   [DNS_TYPE_SRV] = "SRV",	  [DNS_TYPE_NAPTR] = "NAPTR",
	[DNS_TYPE_DNAME] = "DNAME", [DNS_TYPE_OPT] = "OPT",	  [DNS_TYPE_DS] = "DS",
	[DNS_TYPE_RRSIG] = "RRSIG", [DNS_TYPE_DNSKEY] = "DNSKEY", [DNS_TYPE_TLSA] = "TLSA",
	[DNS_TYPE_SVCB] = "SVCB",   [DNS_TYPE_HTTPS] = "HTTPS",	  [DNS_TYPE_IXFR] = "IXFR",
	[DNS_TYPE_AXFR] = "AXFR",   [DNS_TYPE_ANY] = "ANY",	  [DNS_TYPE_CAA] = "CAA",
};
_Static_assert(ARRAY_SIZE(dns_type_names) == DNS_TYPE_CAA + 1,
	       "dns_type_names ends at the highest type in enum dns_type");

int dns_qname_text(const uint8_t *qwire, size_t len, char *out, size_t outlen)
{
	size_t p = 0, o = 0;

	if (outlen < DNS_QNAME_RAW_MAX)
		return -EBADMSG;
	out[0] = '\0';
	for (;;) {
		uint8_t l;

		if (p >= len || p >= 255)
			goto bad;
		l = qwire[p++];
		if (l & 0xc0)
			goto bad;
		if (l == 0)
			break;
		if (l > len - p)
			goto bad;
		if (o)
			out[o++] = '.';
		for (size_t i = 0; i < l; i++) {
			uint8_t c = qwire[p + i];

			/* 4 bytes a wire byte at most, and the wire is at
			 * most 255 bytes: @out cannot overflow. */
			if (c == '.' || c == '\\') {
				out[o++] = '\\';
				out[o++] = (char)c;
			} else if (c <= ' ' || c > '~') {
				o += (size_t)snprintf(out + o, outlen - o, "\\%03u", c);
			} else {
				out[o++] = (char)c;
			}
		}
		p += l;
	}
	if (!o)
		out[o++] = '.';
	out[o] = '\0';
	return (int)o;
bad:
	out[0] = '\0';
	return -EBADMSG;
}

const char *dns_type_name(uint16_t qtype)
{
	if (qtype < ARRAY_SIZE(dns_type_names) && dns_type_names[qtype])
		return dns_type_names[qtype];
	return "OTHER";
}
