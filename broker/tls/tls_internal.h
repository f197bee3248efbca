/* SPDX-License-Identifier: MIT */
/* What the files of broker/tls/ share: the CA with its leaf cache, the
 * canonical host, and the certificate helpers of ca.c. */
#ifndef SLUICE_BROKER_TLS_INTERNAL_H
#define SLUICE_BROKER_TLS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "broker/tls/tls.h"
#include "common/err.h"

#define TLS_HOST_MAX 253
#define TLS_DAY_SEC 86400
/* Buckets of the leaf cache: a power of two, twice the entries. */
#define TLS_CACHE_BUCKETS (2 * TLS_LEAF_CACHE_MAX)

struct tls_leaf {
	char host[TLS_HOST_MAX + 1];
	uint64_t hash;
	SSL_CTX *ctx;
	time_t refresh_at;	      /* re-mint from then on */
	struct tls_leaf *hnext;	      /* bucket chain */
	struct tls_leaf *prev, *next; /* LRU: head is the most recent */
};

struct tls_ca {
	/* NULL when the key process holds it (@remote): then @id names it
	 * there (broker/keys/keys.h). */
	EVP_PKEY *key;
	bool remote;
	/* @remote, and the key process wrote the key's file when it made the
	 * CA, but no saved certificate names it yet: tls_ca_save() clears
	 * it, tls_ca_free() removes the file while it is set. */
	bool key_file_loose;
	unsigned char id[32];
	/* The certificate's DER: what is saved, answered and hashed. @cert is
	 * its parsed form, only where the broker signs leaves itself
	 * (!@remote): a parse costs more than making the CA (OpenSSL 3.0
	 * decodes the public key through its decoders), and the key process
	 * signs a remote CA's leaves. */
	unsigned char *der;
	size_t der_len;
	X509 *cert;	  /* NULL when @remote */
	time_t not_after; /* the CA's; no leaf outlives it (0 when @remote) */
	EVP_PKEY *leaf_key;

	pthread_mutex_t lock; /* guards everything below */
	struct tls_leaf *buckets[TLS_CACHE_BUCKETS];
	struct tls_leaf *head, *tail;
	size_t n;
	uint64_t hits, misses, evictions;
};

/* A host name or literal as the leaf and the cache see it. */
struct tls_host {
	char name[TLS_HOST_MAX + 1]; /* lowercased, no dot, no brackets */
	bool is_ip;
	unsigned char ip[16];
	int ip_len;
};

/* ca.c: sl_err_set() with OpenSSL's newest queued reason appended to the
 * message; the queue is emptied. Returns what sl_err_set() does. */
int tls_err_at(struct sl_err *err, const char *file, unsigned line, const char *func, int errnum,
	       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define tls_err(err, errnum, ...) \
	tls_err_at((err), __FILE__, __LINE__, __func__, (errnum), __VA_ARGS__)
/* ca.c: certificate fields that the CA and its leaves both set. */
int tls_set_random_serial(X509 *x);
int tls_add_ext(X509 *x, X509 *issuer, int nid, const char *value);
int tls_set_validity(X509 *x, time_t from, time_t to);
/* pubkey.c: X509_set_pubkey(), without OpenSSL 3.0's encoder for an EC
 * key. 0 or -errno. */
int tls_set_pubkey(X509 *x, EVP_PKEY *key);
/* pubkey.c: a new P-256 key, in the form that is cheap to encode (see
 * there), or NULL. */
EVP_PKEY *tls_new_p256_key(void);
time_t tls_asn1_time(const ASN1_TIME *t);
/* ca.c: the self-signed CA certificate of tls_ca_create() for @key. */
X509 *tls_ca_make_cert(EVP_PKEY *key, const char *sandbox_name);
/* ca.c: a CA's id, the SHA-256 of its certificate's DER. 0 or -errno. */
int tls_cert_id(X509 *cert, unsigned char id[32]);
/* ca.c: reads the small regular file @name in @dfd, never through a
 * symlink, into OPENSSL_secure memory (OPENSSL_secure_clear_free it);
 * @private refuses one that group or others may access. 0 or -errno; the
 * refusals (not a regular file, its mode, its size) keep their return
 * codes (-EINVAL, -EPERM, -EFBIG) for the key process's answers but have
 * errno 0 in @err. */
int tls_read_small_at(int dfd, const char *name, bool private, unsigned char **buf, size_t *len,
		      struct sl_err *err);

/* leaf.c: a leaf for @h with the public key of @pub, signed by @ca_key for
 * @ca_cert, valid from TLS_BACKDATE_SEC before @now for TLS_LEAF_DAYS but
 * never past @ca_not_after (0: no cap); *@not_after set to its end.
 * basicConstraints CA:FALSE, EKU serverAuth, one SAN. NULL on failure. */
X509 *tls_leaf_make(EVP_PKEY *ca_key, X509 *ca_cert, time_t ca_not_after, EVP_PKEY *pub,
		    const struct tls_host *h, time_t now, time_t *not_after);

/* leaf.c: see the comment at its definition. */
int tls_host_parse(const char *in, struct tls_host *h);
/* leaf.c: drops every cached leaf of @ca (tls_ca_free() calls it). */
void tls_leaf_cache_free(struct tls_ca *ca);

#endif
