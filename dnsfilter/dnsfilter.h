/* SPDX-License-Identifier: MIT */
/* The DNS filter: answers a sandbox's queries itself, from its policy and
 * its synthetic address map, and never forwards a query upstream. */
#ifndef SLUICE_DNSFILTER_H
#define SLUICE_DNSFILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sl_addr;

/* ------------------------------------------------------------------------
 * DNS wire format (dnsfilter/wire.c)
 *
 * Pure functions over byte buffers: dns_parse_query() reads one query
 * message from a sandbox (untrusted, strictly checked), the dns_build_*()
 * functions write the reply into a caller buffer. Nothing here allocates,
 * logs or keeps state.
 * ------------------------------------------------------------------------ */

#define DNS_HDR_LEN 12
/* Longest name in text form, without the trailing dot (255 wire bytes). */
#define DNS_NAME_TEXT_MAX 253
/* Longest question section: a 255-byte QNAME plus QTYPE and QCLASS. */
#define DNS_QUESTION_MAX (255 + 4)
/* UDP payload limits: without EDNS, and the clamp applied to a requester's. */
#define DNS_UDP_MIN 512
#define DNS_UDP_MAX 4096
/* The payload size we advertise in our OPT RR (the DNS flag day 2020 value). */
#define DNS_OUR_UDP_SIZE 1232
/* Longest EXTRA-TEXT we put in an Extended DNS Error; longer text is cut. */
#define DNS_EDE_TEXT_MAX 128

enum dns_rcode {
	DNS_RCODE_NOERROR = 0,
	DNS_RCODE_FORMERR = 1,
	DNS_RCODE_SERVFAIL = 2,
	DNS_RCODE_NXDOMAIN = 3,
	DNS_RCODE_NOTIMP = 4,
	DNS_RCODE_REFUSED = 5,
	DNS_RCODE_BADVERS = 16, /* extended: needs an OPT RR in the reply */
};

enum dns_type {
	DNS_TYPE_A = 1,
	DNS_TYPE_NS = 2,
	DNS_TYPE_CNAME = 5,
	DNS_TYPE_SOA = 6,
	DNS_TYPE_NULL = 10,
	DNS_TYPE_PTR = 12,
	DNS_TYPE_HINFO = 13,
	DNS_TYPE_MX = 15,
	DNS_TYPE_TXT = 16,
	DNS_TYPE_AAAA = 28,
	DNS_TYPE_SRV = 33,
	DNS_TYPE_NAPTR = 35,
	DNS_TYPE_DNAME = 39,
	DNS_TYPE_OPT = 41,
	DNS_TYPE_DS = 43,
	DNS_TYPE_RRSIG = 46,
	DNS_TYPE_DNSKEY = 48,
	DNS_TYPE_TLSA = 52,
	DNS_TYPE_SVCB = 64,
	DNS_TYPE_HTTPS = 65,
	DNS_TYPE_IXFR = 251,
	DNS_TYPE_AXFR = 252,
	DNS_TYPE_ANY = 255,
	DNS_TYPE_CAA = 257,
};

#define DNS_CLASS_IN 1

/* RFC 8914 Extended DNS Error INFO-CODEs we use. */
#define DNS_EDE_BLOCKED 15
#define DNS_EDE_PROHIBITED 18

/**
 * struct dns_query - one parsed query
 * @id:           message ID, echoed in the reply
 * @opcode:       OPCODE of the query (only 0, QUERY, is answered normally)
 * @rd:           RD flag, echoed
 * @cd:           CD flag, echoed (RFC 4035 3.2.2)
 * @has_question: @name, @qtype, @qclass and @qwire are valid; a reply
 *                carries the question only when this is set
 * @qtype:        QTYPE
 * @qclass:       QCLASS
 * @name_weird:   a label held a '.', a space or a byte outside printable
 *                ASCII; such bytes read '?' in @name and the filter must
 *                refuse the name rather than match it
 * @edns:         the query carried a valid OPT RR; the reply carries one
 * @edns_do:      DNSSEC OK bit, echoed in our OPT RR
 * @edns_badvers: the OPT RR asked for an EDNS version above 0
 * @edns_version: that version
 * @udp_size:     the requester's UDP payload size clamped to
 *                [DNS_UDP_MIN, DNS_UDP_MAX]; DNS_UDP_MIN without EDNS
 * @rcode_hint:   when dns_parse_query() fails with an answerable error,
 *                the RCODE to answer with
 * @qwire_len:    length of the question section (QNAME, QTYPE, QCLASS);
 *                in the query it starts at offset DNS_HDR_LEN
 * @qwire:        a verbatim copy of it, so that the reply echoes the
 *                requester's spelling (0x20 case randomisation survives)
 * @name:         QNAME as lowercased dotted text, no trailing dot, NUL
 *                terminated; "" for the root
 */
struct dns_query {
	uint16_t id;
	uint8_t opcode;
	bool rd;
	bool cd;
	bool has_question;
	uint16_t qtype;
	uint16_t qclass;
	bool name_weird;
	bool edns;
	bool edns_do;
	bool edns_badvers;
	uint8_t edns_version;
	uint16_t udp_size;
	uint16_t rcode_hint;
	uint16_t qwire_len;
	uint8_t qwire[DNS_QUESTION_MAX];
	char name[DNS_NAME_TEXT_MAX + 1];
};

/**
 * dns_parse_query() - parse and check one DNS query message
 * @msg: the message (a UDP payload, or a TCP message without its length
 *       prefix); untrusted
 * @len: its length
 * @q:   filled in; see the return values for which fields are valid
 *
 * Accepted: QR=0, OPCODE QUERY, exactly one question with an uncompressed
 * QNAME (labels of 1..63 bytes, at most 255 wire bytes), no answer or
 * authority records, at most one additional record and that an OPT RR
 * owned by the root, and nothing after the records.
 *
 * Return: 0 when @q is a query to answer (all fields valid);
 * -EINVAL when the message is not worth an answer (shorter than a header,
 * or a response): drop it;
 * -EBADMSG (@q->rcode_hint = FORMERR) or -EOPNOTSUPP (NOTIMP, an OPCODE
 * other than QUERY) or -EPROTONOSUPPORT (BADVERS, also flagged in
 * @q->edns_badvers): answer with dns_build_error(q, q->rcode_hint, ...);
 * @q->id and the flags are valid, and the question when
 * @q->has_question is set.
 */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *q);

/**
 * dns_build_a() - write a NOERROR reply with A records for the question
 * @q:      a query dns_parse_query() accepted (needs @q->has_question)
 * @addrs:  IPv4 addresses (::ffff:a.b.c.d form)
 * @n:      how many; 0 gives an answerless NOERROR reply
 * @ttl:    TTL of each record
 * @udp:    the reply goes over UDP: when it would exceed the requester's
 *          limit (512 bytes, or its EDNS payload size) it is cut to the
 *          question alone with TC set, so that the client retries over TCP
 * @out:    reply buffer
 * @outlen: its size
 *
 * Each answer's owner is a compression pointer to the question's name.
 *
 * Return: length written, -ENOSPC when @out is too small, -EINVAL when @q
 * has no question or an address is not IPv4.
 */
int dns_build_a(const struct dns_query *q, const struct sl_addr *addrs,
		size_t n, uint32_t ttl, bool udp, uint8_t *out, size_t outlen);

/**
 * dns_build_nodata() - write a NOERROR reply without answers (NODATA)
 * @q:      a query dns_parse_query() accepted (needs @q->has_question)
 * @ttl:    how long the client may cache the absence
 * @out:    reply buffer
 * @outlen: its size
 *
 * For an allowed name asked with a type we do not serve (AAAA, TXT, ...).
 * The authority section holds a synthetic SOA so that clients cache the
 * answer (RFC 2308): its owner is the queried name itself (we answer as if
 * every allowed name were the apex of its own zone, and name no real
 * zone), MNAME "sluice.invalid.", RNAME "hostmaster.sluice.invalid.", and
 * both its TTL and its MINIMUM are @ttl.
 *
 * Return: length written, -ENOSPC, or -EINVAL when @q has no question.
 */
int dns_build_nodata(const struct dns_query *q, uint32_t ttl, uint8_t *out,
		     size_t outlen);

/**
 * dns_build_error() - write an error reply
 * @q:        the query (parsed, or failed to parse with an answerable error)
 * @rcode:    DNS_RCODE_*; above 15 only when @q->edns (the upper bits go
 *            into the OPT RR)
 * @ede_code: RFC 8914 INFO-CODE (DNS_EDE_BLOCKED for a name outside the
 *            policy), 0 for none; sent only when @q->edns
 * @ede_text: optional EXTRA-TEXT (UTF-8, cut at DNS_EDE_TEXT_MAX bytes),
 *            or NULL
 * @out:      reply buffer
 * @outlen:   its size
 *
 * The question is echoed when @q->has_question. No SOA is added, so an
 * NXDOMAIN is not cached negatively (RFC 2308 section 5): a policy reload
 * that allows the name takes effect on the client's next query.
 *
 * Return: length written, -ENOSPC, or -EINVAL for an RCODE that cannot be
 * expressed for this query.
 */
int dns_build_error(const struct dns_query *q, uint16_t rcode,
		    uint16_t ede_code, const char *ede_text, uint8_t *out,
		    size_t outlen);

/**
 * dns_tcp_frame_len() - find the next message in a DNS-over-TCP stream
 * @buf: bytes received so far, starting at a two-byte length prefix
 * @len: how many
 *
 * Return: the length of the next message, which starts at @buf + 2, when
 * all of it is in @buf (consume 2 + that many bytes); 0 when more bytes
 * are needed; -EBADMSG when the prefix announces less than a DNS header
 * (close the connection). A caller whose buffer is full while this
 * returns 0 must close the connection as well.
 */
ssize_t dns_tcp_frame_len(const uint8_t *buf, size_t len);

/**
 * dns_type_name() - QTYPE mnemonic for the audit log
 * @qtype: the type
 *
 * Return: a static string such as "A" or "HTTPS"; "OTHER" for a type not
 * in our table.
 */
const char *dns_type_name(uint16_t qtype);

#endif
