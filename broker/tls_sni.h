/* SPDX-License-Identifier: MIT */
/* TLS ClientHello parsing for the transparent path: the SNI, ALPN and
 * version facts of a connection, read from peeked bytes. */
#ifndef SLUICE_BROKER_TLS_SNI_H
#define SLUICE_BROKER_TLS_SNI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest ClientHello handshake message (header included) we reassemble. */
#define TLS_HELLO_MAX 16384
/* Longest SNI host name we accept, without a trailing dot. */
#define TLS_SNI_MAX 253
/* ALPN protocols kept, and the longest one kept whole. */
#define TLS_ALPN_KEEP 4
#define TLS_ALPN_NAME_MAX 31

#define TLS_VERSION_1_2 0x0303
#define TLS_VERSION_1_3 0x0304

/**
 * struct tls_hello - what the broker needs from a ClientHello
 * @legacy_version:  ClientHello.legacy_version (0x0303 for TLS 1.2 and 1.3)
 * @tls13:           supported_versions lists TLS 1.3
 * @sni_present:     a server_name extension with a host_name was sent
 * @sni_invalid:     that name is not a DNS host name: not LDH labels of
 *                   1..63 bytes, longer than 253, or an IP literal (RFC 6066
 *                   forbids literals); the broker must refuse the connection
 * @sni:             the host name, lowercased, no trailing dot, NUL
 *                   terminated; when @sni_invalid, a printable rendering
 *                   for the log (other bytes read '?', cut at 253)
 * @has_alpn:        an ALPN extension was sent
 * @alpn_count:      protocols in it (saturates at 255)
 * @alpn:            the first min(@alpn_count, TLS_ALPN_KEEP) of them as
 *                   printable text (other bytes read '?'); a name longer
 *                   than TLS_ALPN_NAME_MAX is cut and flags @alpn_cut
 * @alpn_cut:        see @alpn
 * @has_ech:         an Encrypted Client Hello extension (0xfe0d or an
 *                   earlier draft's code point, or ESNI 0xffce) was sent.
 *                   Clients that GREASE ECH send it on every connection;
 *                   the outer SNI is still what they connect with.
 * @record_bytes:    bytes of TLS records the ClientHello spans, from the
 *                   start of the buffer (the caller peeked at least these)
 * @records:         how many records it spans
 * @hs_len:          length of the reassembled handshake message in @hs
 * @hs:              the ClientHello handshake message (type, length, body)
 */
struct tls_hello {
	uint16_t legacy_version;
	bool tls13;
	bool sni_present;
	bool sni_invalid;
	char sni[TLS_SNI_MAX + 1];
	bool has_alpn;
	uint8_t alpn_count;
	bool alpn_cut;
	char alpn[TLS_ALPN_KEEP][TLS_ALPN_NAME_MAX + 1];
	bool has_ech;
	size_t record_bytes;
	unsigned records;
	size_t hs_len;
	uint8_t hs[TLS_HELLO_MAX];
};

/**
 * tls_parse_client_hello() - parse the first bytes of a TLS connection
 * @buf: bytes peeked from the start of the connection; untrusted
 * @len: how many
 * @h:   filled in when the return is 1; a struct of ~16 KiB, so give it
 *       static or heap storage rather than a small stack
 *
 * The ClientHello may span several handshake records; it is reassembled
 * into @h->hs. Every length is checked against its container, duplicate
 * extensions are refused, pre_shared_key must come last (RFC 8446).
 *
 * Return: 1 when a complete ClientHello was parsed; 0 when the bytes so
 * far are a valid beginning and more are needed; -ENOTSUP when this is
 * not TLS (first byte not a handshake record, or record version major not
 * 3): treat the connection as another protocol; -EMSGSIZE when the
 * ClientHello is longer than TLS_HELLO_MAX; -EBADMSG when it is
 * malformed.
 */
int tls_parse_client_hello(const uint8_t *buf, size_t len,
			   struct tls_hello *h);

#endif
