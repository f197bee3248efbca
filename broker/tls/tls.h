/* SPDX-License-Identifier: MIT */
/* TLS, both sides: the per-sandbox CA (ca.c) and its leaf certificates
 * for intercepted hosts (leaf.c), the client for the upstream side
 * (upstream.c), and ClientHello parsing for the transparent path
 * (clienthello.c). */
#ifndef SLUICE_BROKER_TLS_TLS_H
#define SLUICE_BROKER_TLS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* OpenSSL's SSL_CTX and SSL, without pulling <openssl/ssl.h> into every
 * file that includes this header. */
struct ssl_ctx_st;
struct ssl_st;
struct sl_err; /* common/err.h */

struct tls_ca;

/* Leaf contexts kept per CA; the least recently used one goes first. */
#define TLS_LEAF_CACHE_MAX 1024
/* CA validity: the longest a sandbox is expected to live, and no more. */
#define TLS_CA_DAYS 397
/* Leaf validity; a cached leaf is re-minted a day before it ends. */
#define TLS_LEAF_DAYS 7
/* notBefore is back-dated by this much for clocks slightly behind ours. */
#define TLS_BACKDATE_SEC 3600

struct tls_leaf_stats {
	uint64_t hits;	    /* tls_leaf_ctx() answered from the cache */
	uint64_t misses;    /* ... had to mint a leaf */
	uint64_t evictions; /* leaves dropped for room (not for age) */
	size_t entries;	    /* leaves cached now */
};

/**
 * tls_ca_create() - a new CA for one sandbox
 * @sandbox_name: names the CA ("sluice sandbox NAME CA"; cut to fit the
 *                64 characters of a CN); printable ASCII only
 * @err:          on failure, a message (common/err.h), or NULL
 *
 * The CA key is EC P-256.  The certificate is self-signed X509v3:
 * basicConstraints critical CA:TRUE pathlen:0, keyUsage critical
 * keyCertSign+cRLSign, subject key identifier, random 128-bit serial,
 * valid from TLS_BACKDATE_SEC ago for TLS_CA_DAYS.  A leaf key (also
 * EC P-256, never written to disk) is made alongside: one per CA.
 *
 * Return: the CA (tls_ca_free() it), or NULL.
 */
struct tls_ca *tls_ca_create(const char *sandbox_name, struct sl_err *err);

/**
 * tls_ca_save() - write DIR/ca.key (0600) and DIR/ca.crt (0644)
 * @ca:  the CA
 * @dir: an existing directory owned by the broker
 *
 * Each file is written under a temporary name created with
 * O_EXCL|O_NOFOLLOW, then renamed over the final name, so a broker that
 * dies half-way leaves the old pair or the new one, and a symlink planted
 * in @dir is never followed.  Not fsync()ed: the pair must outlive the
 * broker, not the machine (the sandbox itself lives in /run).
 *
 * Return: 0, or a negative errno.
 */
int tls_ca_save(struct tls_ca *ca, const char *dir);

/**
 * tls_ca_load() - read a CA tls_ca_save() wrote
 * @dir:    the directory
 * @err:    on failure, a message (never key material), or NULL
 *
 * Refuses a key file that is a symlink, not a regular file, larger than
 * 64 KiB or accessible to group or others; a certificate that is not a
 * CA, has expired, or does not match the key.  A fresh leaf key is made.
 *
 * Return: the CA (tls_ca_free() it), or NULL.
 */
struct tls_ca *tls_ca_load(const char *dir, struct sl_err *err);

/**
 * tls_ca_check_sums() - do DIR/ca.key and DIR/ca.crt match DIR/ca.sum?
 * @dir:     the directory tls_ca_save() wrote
 * @what:    on -EILSEQ, the file(s) that do not match
 * @whatlen: its size
 *
 * tls_ca_save() writes ca.sum (checksums, common/sumfile.h) beside the two
 * PEM files, which stay plain PEM.
 *
 * Return: 0 when both match; -ENOENT when there is no ca.sum (written
 * before checksums); -EBADMSG when ca.sum itself does not verify;
 * -EILSEQ when a file is missing or does not match its sum.
 */
int tls_ca_check_sums(const char *dir, char *what, size_t whatlen);

/* Writes DIR/ca.sum for the pair in DIR as it is (an upgrade). 0 or -errno. */
int tls_ca_write_sums(const char *dir);

/* OpenSSL's pem_password_cb that refuses: an encrypted key is never
 * prompted for on a terminal, it fails to load. */
int tls_no_password(char *buf, int size, int rwflag, void *u);

/**
 * tls_ca_cert_pem() - the CA certificate in PEM, for the sandbox's bundle
 * @ca:  the CA
 * @pem: set to a NUL-terminated string the caller free()s
 *
 * Return: 0, or -ENOMEM.
 */
int tls_ca_cert_pem(const struct tls_ca *ca, char **pem);

/**
 * tls_leaf_ctx() - the server context for an intercepted connection
 * @ca:   the sandbox's CA
 * @host: the host the sandbox asked for: a DNS name (any case, one
 *        trailing dot ignored) or an IPv4/IPv6 literal (brackets allowed)
 *
 * The leaf certificate names @host alone (subjectAltName DNS:host or
 * IP:addr), has extendedKeyUsage serverAuth, is valid from
 * TLS_BACKDATE_SEC ago for TLS_LEAF_DAYS (never past the CA's end)
 * and is signed by @ca.  The context speaks TLS 1.2 and 1.3 only and
 * selects ALPN "http/1.1" when the client offers it; a client offering
 * only h2 gets no ALPN answer and falls back to HTTP/1.1.  No
 * server-side session cache (tickets still resume).
 *
 * Contexts are cached per CA (TLS_LEAF_CACHE_MAX, LRU).  Thread-safe.
 *
 * Return: a context holding one reference for the caller (SSL_CTX_free()
 * it), or NULL for an invalid @host or an OpenSSL failure.
 */
struct ssl_ctx_st *tls_leaf_ctx(struct tls_ca *ca, const char *host);

/* A snapshot of the leaf cache's counters. Thread-safe. */
void tls_leaf_stats(struct tls_ca *ca, struct tls_leaf_stats *st);

/**
 * tls_upstream_ctx() - the client context for the broker's upstream side
 * @ca_file: a PEM bundle to trust; NULL or "" for the system store
 *           (SSL_CERT_FILE and SSL_CERT_DIR are honoured)
 * @err:     on failure, a message, or NULL
 *
 * SSL_VERIFY_PEER, TLS 1.2 or later, ALPN "http/1.1".  Every SSL made
 * from it must go through tls_upstream_prepare() before the handshake.
 *
 * Return: a context (SSL_CTX_free() it), or NULL.
 */
struct ssl_ctx_st *tls_upstream_ctx(const char *ca_file, struct sl_err *err);

/**
 * tls_upstream_prepare() - name the server an upstream SSL must prove
 * @ssl:  a client SSL from tls_upstream_ctx()
 * @host: a DNS name (SNI and host name check) or an address literal (IP
 *        check, no SNI: RFC 6066 forbids literals there)
 *
 * Return: 0, or -EINVAL for an unusable @host, -ENOMEM.
 */
int tls_upstream_prepare(struct ssl_st *ssl, const char *host);

/* Frees the CA and its cache; contexts handed out stay valid. NULL is fine.
 * A CA the key process holds is forgotten there (its saved key stays). */
void tls_ca_free(struct tls_ca *ca);

/**
 * tls_ca_delete() - the sandbox is gone: its CA key too
 * @ca: the CA (still to be tls_ca_free()d); NULL is fine
 *
 * With the key process (broker/keys/), it deletes the key it saved; a key
 * in the broker's own state_dir goes with the directory (sandbox.c).
 *
 * Return: 0 or a negative errno.
 */
int tls_ca_delete(const struct tls_ca *ca);

/* tls_ca_delete() in two halves, for a caller that deletes the key later,
 * on another thread, when @ca may be freed: tls_ca_key_id() copies the id
 * the key process knows @ca by into @id (false: no key process key, as
 * tls_ca_delete() would have nothing to do); tls_ca_delete_id() deletes
 * it (0 or a negative errno). */
bool tls_ca_key_id(const struct tls_ca *ca, unsigned char id[32]);
/* Once every sandbox's CA is loaded: the key process deletes the keys of
 * CAs it does not hold. How many went (0 without a key process), or a
 * negative errno. */
int tls_ca_sweep(void);
int tls_ca_delete_id(const unsigned char id[32]);

/* The same for a CA not loaded, by the certificate tls_ca_save() left in
 * @dir (a registration dropped at start-up). 0 or a negative errno. */
int tls_ca_delete_saved(const char *dir);

/* ---- ClientHello (clienthello.c) ---------------------------------------- */

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
	/* The name as sent (its first TLS_SNI_MAX + 2 bytes, a trailing dot
	 * kept, nothing folded), for the audit log: not NUL-terminated. */
	char sni_raw[TLS_SNI_MAX + 2];
	size_t sni_raw_len;
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
int tls_parse_client_hello(const uint8_t *buf, size_t len, struct tls_hello *h);

#endif
