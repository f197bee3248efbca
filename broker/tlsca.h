/* SPDX-License-Identifier: MIT */
/* The per-sandbox CA: its key and certificate, leaf certificates for
 * intercepted hosts, and the client context for the upstream side. */
#ifndef SLUICE_BROKER_TLSCA_H
#define SLUICE_BROKER_TLSCA_H

#include <stddef.h>
#include <stdint.h>

/* OpenSSL's SSL_CTX and SSL, without pulling <openssl/ssl.h> into every
 * file that includes this header. */
struct ssl_ctx_st;
struct ssl_st;

struct tlsca;

/* Leaf contexts kept per CA; the least recently used one goes first. */
#define TLSCA_CACHE_MAX 1024
/* CA validity: the longest a sandbox is expected to live, and no more. */
#define TLSCA_CA_DAYS 397
/* Leaf validity; a cached leaf is re-minted a day before it ends. */
#define TLSCA_LEAF_DAYS 7
/* notBefore is back-dated by this much for clocks slightly behind ours. */
#define TLSCA_BACKDATE_SEC 3600

struct tlsca_stats {
	uint64_t hits;	    /* tlsca_leaf_ctx() answered from the cache */
	uint64_t misses;    /* ... had to mint a leaf */
	uint64_t evictions; /* leaves dropped for room (not for age) */
	size_t entries;	    /* leaves cached now */
};

/**
 * tlsca_create() - a new CA for one sandbox
 * @sandbox_name: names the CA ("sluice sandbox NAME CA"; cut to fit the
 *                64 characters of a CN); printable ASCII only
 * @err:          on failure, a message
 * @errlen:       its size
 *
 * The CA key is EC P-256.  The certificate is self-signed X509v3:
 * basicConstraints critical CA:TRUE pathlen:0, keyUsage critical
 * keyCertSign+cRLSign, subject key identifier, random 128-bit serial,
 * valid from TLSCA_BACKDATE_SEC ago for TLSCA_CA_DAYS.  A leaf key (also
 * EC P-256, never written to disk) is made alongside: one per CA.
 *
 * Return: the CA (tlsca_free() it), or NULL.
 */
struct tlsca *tlsca_create(const char *sandbox_name, char *err, size_t errlen);

/**
 * tlsca_save() - write DIR/ca.key (0600) and DIR/ca.crt (0644)
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
int tlsca_save(const struct tlsca *ca, const char *dir);

/**
 * tlsca_load() - read a CA tlsca_save() wrote
 * @dir:    the directory
 * @err:    on failure, a message (never key material)
 * @errlen: its size
 *
 * Refuses a key file that is a symlink, not a regular file, larger than
 * 64 KiB or accessible to group or others; a certificate that is not a
 * CA, has expired, or does not match the key.  A fresh leaf key is made.
 *
 * Return: the CA (tlsca_free() it), or NULL.
 */
struct tlsca *tlsca_load(const char *dir, char *err, size_t errlen);

/**
 * tlsca_cert_pem() - the CA certificate in PEM, for the sandbox's bundle
 * @ca:  the CA
 * @pem: set to a NUL-terminated string the caller free()s
 *
 * Return: 0, or -ENOMEM.
 */
int tlsca_cert_pem(const struct tlsca *ca, char **pem);

/**
 * tlsca_leaf_ctx() - the server context for an intercepted connection
 * @ca:   the sandbox's CA
 * @host: the host the sandbox asked for: a DNS name (any case, one
 *        trailing dot ignored) or an IPv4/IPv6 literal (brackets allowed)
 *
 * The leaf certificate names @host alone (subjectAltName DNS:host or
 * IP:addr), has extendedKeyUsage serverAuth, is valid from
 * TLSCA_BACKDATE_SEC ago for TLSCA_LEAF_DAYS (never past the CA's end)
 * and is signed by @ca.  The context speaks TLS 1.2 and 1.3 only and
 * selects ALPN "http/1.1" when the client offers it; a client offering
 * only h2 gets no ALPN answer and falls back to HTTP/1.1.  No
 * server-side session cache (tickets still resume).
 *
 * Contexts are cached per CA (TLSCA_CACHE_MAX, LRU).  Thread-safe.
 *
 * Return: a context holding one reference for the caller (SSL_CTX_free()
 * it), or NULL for an invalid @host or an OpenSSL failure.
 */
struct ssl_ctx_st *tlsca_leaf_ctx(struct tlsca *ca, const char *host);

/* A snapshot of the leaf cache's counters. Thread-safe. */
void tlsca_stats(struct tlsca *ca, struct tlsca_stats *st);

/**
 * tlsca_upstream_ctx() - the client context for the broker's upstream side
 * @ca_file: a PEM bundle to trust; NULL or "" for the system store
 *           (SSL_CERT_FILE and SSL_CERT_DIR are honoured)
 * @err:     on failure, a message
 * @errlen:  its size
 *
 * SSL_VERIFY_PEER, TLS 1.2 or later, ALPN "http/1.1".  Every SSL made
 * from it must go through tlsca_upstream_prepare() before the handshake.
 *
 * Return: a context (SSL_CTX_free() it), or NULL.
 */
struct ssl_ctx_st *tlsca_upstream_ctx(const char *ca_file, char *err,
				      size_t errlen);

/**
 * tlsca_upstream_prepare() - name the server an upstream SSL must prove
 * @ssl:  a client SSL from tlsca_upstream_ctx()
 * @host: a DNS name (SNI and host name check) or an address literal (IP
 *        check, no SNI: RFC 6066 forbids literals there)
 *
 * Return: 0, or -EINVAL for an unusable @host, -ENOMEM.
 */
int tlsca_upstream_prepare(struct ssl_st *ssl, const char *host);

/* Frees the CA and its cache; contexts handed out stay valid. NULL is fine. */
void tlsca_free(struct tlsca *ca);

#endif
