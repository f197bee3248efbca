// SPDX-License-Identifier: MIT
/* TLS ClientHello parsing: reassembles the hello from peeked handshake
 * records and extracts SNI, ALPN, supported_versions and ECH presence. */
#include "broker/tls/tls.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#define TLS_CT_HANDSHAKE 0x16
#define TLS_HS_CLIENT_HELLO 1
#define TLS_RECORD_HDR 5
#define TLS_RECORD_MAX 16384 /* 2^14, RFC 8446 5.1 */
#define TLS_RANDOM_LEN 32
#define TLS_SESSION_ID_MAX 32

#define TLS_EXT_SERVER_NAME 0
#define TLS_EXT_ALPN 16
#define TLS_EXT_PRE_SHARED_KEY 41
#define TLS_EXT_SUPPORTED_VERSIONS 43
#define TLS_EXT_ECH 0xfe0d
#define TLS_EXT_ECH_DRAFT_FIRST 0xfe08 /* draft-ietf-tls-esni-08 .. -12 */
#define TLS_EXT_ECH_DRAFT_LAST 0xfe0c
#define TLS_EXT_ESNI 0xffce /* the ESNI drafts before ECH */
#define TLS_SNI_HOST_NAME 0

/* A read cursor over a bounded slice; every read checks what is left. */
struct cur {
	const uint8_t *p;
	size_t n;
};

static int get8(struct cur *c, unsigned *v)
{
	if (c->n < 1)
		return -EBADMSG;
	*v = c->p[0];
	c->p++;
	c->n--;
	return 0;
}

static int get16(struct cur *c, unsigned *v)
{
	if (c->n < 2)
		return -EBADMSG;
	*v = (unsigned)c->p[0] << 8 | c->p[1];
	c->p += 2;
	c->n -= 2;
	return 0;
}

/* Carve the next @len bytes off @c into @sub. */
static int take(struct cur *c, size_t len, struct cur *sub)
{
	if (c->n < len)
		return -EBADMSG;
	sub->p = c->p;
	sub->n = len;
	c->p += len;
	c->n -= len;
	return 0;
}

/* Carve a vector with an 8- or 16-bit length prefix off @c. */
static int take_vec8(struct cur *c, struct cur *sub)
{
	unsigned len;

	if (get8(c, &len) < 0)
		return -EBADMSG;
	return take(c, len, sub);
}

static int take_vec16(struct cur *c, struct cur *sub)
{
	unsigned len;

	if (get16(c, &len) < 0)
		return -EBADMSG;
	return take(c, len, sub);
}

static char printable_lower(uint8_t c)
{
	if (c >= 'A' && c <= 'Z')
		return (char)(c + ('a' - 'A'));
	if (c < 0x21 || c > 0x7e)
		return '?';
	return (char)c;
}

/* Is @s (length @n, lowercase) a host name: LDH labels of 1..63 bytes,
 * at most 253 in all, and not an IP literal? No top-level domain is all
 * digits, so an all-digit last label catches 192.0.2.1 and its short
 * forms; v6 literals fail the LDH test on ':'. */
static bool sni_is_hostname(const char *s, size_t n)
{
	size_t label = 0;
	bool all_digits = true;

	if (n == 0 || n > TLS_SNI_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
			all_digits = true;
			continue;
		}
		if (++label > 63)
			return false;
		if (c >= '0' && c <= '9')
			continue;
		all_digits = false;
		if ((c >= 'a' && c <= 'z') || c == '-')
			continue;
		return false;
	}
	return label > 0 && !all_digits;
}

static int parse_sni(struct cur ext, struct tls_hello *h)
{
	struct cur list;
	bool got_host = false;

	if (take_vec16(&ext, &list) < 0 || ext.n != 0 || list.n == 0)
		return -EBADMSG;
	while (list.n) {
		unsigned type;
		struct cur name;
		size_t n, keep;

		if (get8(&list, &type) < 0 || take_vec16(&list, &name) < 0 || name.n == 0)
			return -EBADMSG;
		if (type != TLS_SNI_HOST_NAME)
			continue;
		/* RFC 6066 3: one name per name_type. */
		if (got_host)
			return -EBADMSG;
		got_host = true;

		h->sni_raw_len = name.n < sizeof(h->sni_raw) ? name.n : sizeof(h->sni_raw);
		memcpy(h->sni_raw, name.p, h->sni_raw_len);
		n = name.n;
		/* "example.com." is the name "example.com"; drop the dot. */
		if (n > 1 && name.p[n - 1] == '.')
			n--;
		keep = n < TLS_SNI_MAX ? n : TLS_SNI_MAX;
		for (size_t i = 0; i < keep; i++)
			h->sni[i] = printable_lower(name.p[i]);
		h->sni[keep] = '\0';
		h->sni_present = true;
		h->sni_invalid = n > TLS_SNI_MAX || !sni_is_hostname(h->sni, n);
		/* A NUL or other control byte became '?', which the LDH
		 * test refuses, so the kept text cannot hide one. */
	}
	return 0;
}

static int parse_alpn(struct cur ext, struct tls_hello *h)
{
	struct cur list;

	if (take_vec16(&ext, &list) < 0 || ext.n != 0 || list.n == 0)
		return -EBADMSG;
	h->has_alpn = true;
	while (list.n) {
		struct cur proto;
		char *dst;
		size_t keep;

		if (take_vec8(&list, &proto) < 0 || proto.n == 0)
			return -EBADMSG;
		if (h->alpn_count < TLS_ALPN_KEEP) {
			dst = h->alpn[h->alpn_count];
			keep = proto.n;
			if (keep > TLS_ALPN_NAME_MAX) {
				keep = TLS_ALPN_NAME_MAX;
				h->alpn_cut = true;
			}
			for (size_t i = 0; i < keep; i++) {
				uint8_t c = proto.p[i];

				dst[i] = (c < 0x21 || c > 0x7e) ? '?' : (char)c;
			}
			dst[keep] = '\0';
		}
		if (h->alpn_count < UINT8_MAX)
			h->alpn_count++;
	}
	return 0;
}

static int parse_supported_versions(struct cur ext, struct tls_hello *h)
{
	struct cur list;

	if (take_vec8(&ext, &list) < 0 || ext.n != 0 || list.n < 2 || list.n % 2)
		return -EBADMSG;
	while (list.n) {
		unsigned v;

		if (get16(&list, &v) < 0)
			return -EBADMSG;
		if (v == TLS_VERSION_1_3)
			h->tls13 = true;
	}
	return 0;
}

static bool is_ech(unsigned type)
{
	return type == TLS_EXT_ECH || type == TLS_EXT_ESNI ||
	       (type >= TLS_EXT_ECH_DRAFT_FIRST && type <= TLS_EXT_ECH_DRAFT_LAST);
}

static int parse_extensions(struct cur exts, struct tls_hello *h)
{
	/* One bit per extension type: 8 KiB, and O(1) duplicate checks
	 * however many (up to ~4000) extensions a hello packs. */
	uint64_t seen[65536 / 64];
	bool after_psk = false;

	memset(seen, 0, sizeof(seen));
	while (exts.n) {
		unsigned type;
		struct cur ext;
		int r = 0;

		if (get16(&exts, &type) < 0 || take_vec16(&exts, &ext) < 0)
			return -EBADMSG;
		/* RFC 8446 4.2.11: pre_shared_key MUST be the last one. */
		if (after_psk)
			return -EBADMSG;
		if (seen[type / 64] & (UINT64_C(1) << (type % 64)))
			return -EBADMSG;
		seen[type / 64] |= UINT64_C(1) << (type % 64);

		switch (type) {
		case TLS_EXT_SERVER_NAME:
			r = parse_sni(ext, h);
			break;
		case TLS_EXT_ALPN:
			r = parse_alpn(ext, h);
			break;
		case TLS_EXT_SUPPORTED_VERSIONS:
			r = parse_supported_versions(ext, h);
			break;
		case TLS_EXT_PRE_SHARED_KEY:
			after_psk = true;
			break;
		default:
			if (is_ech(type))
				h->has_ech = true;
			break;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_body(struct cur body, struct tls_hello *h)
{
	struct cur skip, exts;
	unsigned v;

	if (get16(&body, &v) < 0 || (v >> 8) != 3)
		return -EBADMSG;
	h->legacy_version = (uint16_t)v;
	if (take(&body, TLS_RANDOM_LEN, &skip) < 0)
		return -EBADMSG;
	if (take_vec8(&body, &skip) < 0 || skip.n > TLS_SESSION_ID_MAX)
		return -EBADMSG;
	/* cipher_suites<2..2^16-2>, compression_methods<1..2^8-1> */
	if (take_vec16(&body, &skip) < 0 || skip.n < 2 || skip.n % 2)
		return -EBADMSG;
	if (take_vec8(&body, &skip) < 0 || skip.n < 1)
		return -EBADMSG;
	/* Before TLS 1.3 a hello may end here, without extensions. */
	if (body.n == 0)
		return 0;
	if (take_vec16(&body, &exts) < 0 || body.n != 0)
		return -EBADMSG;
	return parse_extensions(exts, h);
}

/*
 * Theory: the hello is one handshake message (type, 24-bit length, body)
 * cut into records of at most 2^14 bytes each. Copy each record's
 * fragment into h->hs until the announced length is reached; a record
 * that carries more than the hello (another handshake message before the
 * server has spoken) is malformed. Only then is the body parsed, so any
 * prefix of a valid hello reads as "need more".
 */
int tls_parse_client_hello(const uint8_t *buf, size_t len, struct tls_hello *h)
{
	size_t off = 0, need = 0;
	int r;

	memset(h, 0, offsetof(struct tls_hello, hs));
	if (!buf || len == 0)
		return 0;
	if (buf[0] != TLS_CT_HANDSHAKE)
		return -ENOTSUP;
	if (len < 2)
		return 0;
	if (buf[1] != 3)
		return -ENOTSUP;

	for (;;) {
		const uint8_t *frag;
		size_t rlen, avail, i = 0, n;

		if (len - off < TLS_RECORD_HDR)
			return 0;
		if (buf[off] != TLS_CT_HANDSHAKE || buf[off + 1] != 3)
			return -EBADMSG;
		rlen = (size_t)buf[off + 3] << 8 | buf[off + 4];
		/* Zero-length handshake fragments are forbidden (8446 5.1). */
		if (rlen == 0 || rlen > TLS_RECORD_MAX)
			return -EBADMSG;
		frag = buf + off + TLS_RECORD_HDR;
		avail = len - off - TLS_RECORD_HDR;
		if (avail > rlen)
			avail = rlen;

		/* The 4-byte handshake header may itself be split. */
		while (h->hs_len < 4 && i < avail)
			h->hs[h->hs_len++] = frag[i++];
		if (h->hs_len < 4) {
			if (avail < rlen)
				return 0;
			off += TLS_RECORD_HDR + rlen;
			h->records++;
			continue;
		}
		if (!need) {
			if (h->hs[0] != TLS_HS_CLIENT_HELLO)
				return -EBADMSG;
			need = 4 + ((size_t)h->hs[1] << 16 | (size_t)h->hs[2] << 8 | h->hs[3]);
			if (need > TLS_HELLO_MAX)
				return -EMSGSIZE;
		}
		if (rlen - i > need - h->hs_len)
			return -EBADMSG;
		n = avail - i;
		memcpy(h->hs + h->hs_len, frag + i, n);
		h->hs_len += n;
		if (avail < rlen)
			return 0;
		off += TLS_RECORD_HDR + rlen;
		h->records++;
		if (h->hs_len == need)
			break;
	}
	h->record_bytes = off;

	r = parse_body((struct cur){ .p = h->hs + 4, .n = h->hs_len - 4 }, h);
	return r < 0 ? r : 1;
}
