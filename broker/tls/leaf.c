// SPDX-License-Identifier: MIT
/* Leaf certificates for intercepted hosts, and their per-CA cache. */

/*
 * Theory of operation
 *
 * For every host the sandbox connects to, tls_leaf_ctx() mints a leaf
 * for exactly that name, valid TLS_LEAF_DAYS, signed by the sandbox's CA
 * (ca.c), and wraps it in a server SSL_CTX.  All leaves of one CA share
 * one EC P-256 key made when the CA is created or loaded and never
 * written: a key per leaf would cost a keygen per host and buy nothing,
 * since any leaf key's compromise means the broker's memory is
 * compromised, CA key included.
 *
 * Minting costs a signature and an SSL_CTX (most of the time), so
 * contexts are kept in a per-CA LRU of TLS_LEAF_CACHE_MAX hosts behind a
 * mutex; the minting itself runs outside the lock so that one slow mint
 * does not stall other workers' hits.  A cached leaf is re-minted a day
 * before it expires.  Evicted contexts live on in the connections that
 * hold a reference.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "broker/keys/keys.h"
#include "broker/tls/tls_internal.h"
#include "policy/policy.h"

/*
 * Canonical host: an IPv4 or IPv6 literal (brackets dropped), or DNS
 * labels of letters, digits, '-' and '_' (1..63 each, 253 in all),
 * lowercased, one trailing dot dropped.  Anything else is refused: the
 * name goes into a certificate.
 */
int tls_host_parse(const char *in, struct tls_host *h)
{
	size_t len, i, given;

	memset(h, 0, sizeof(*h));
	if (!in)
		return -EINVAL;
	len = strlen(in);
	if (len >= 2 && in[0] == '[' && in[len - 1] == ']') {
		in++;
		len -= 2;
		if (len > TLS_HOST_MAX)
			return -EINVAL;
		memcpy(h->name, in, len);
		h->name[len] = '\0';
		if (inet_pton(AF_INET6, h->name, h->ip) != 1)
			return -EINVAL;
		h->is_ip = true;
		h->ip_len = 16;
		goto lower;
	}
	given = len;
	if (len && in[len - 1] == '.')
		len--;
	if (len == 0 || len > TLS_HOST_MAX)
		return -EINVAL;
	memcpy(h->name, in, len);
	h->name[len] = '\0';
	if (inet_pton(AF_INET, h->name, h->ip) == 1) {
		h->is_ip = true;
		h->ip_len = 4;
		return 0;
	}
	if (inet_pton(AF_INET6, h->name, h->ip) == 1) {
		h->is_ip = true;
		h->ip_len = 16;
		goto lower;
	}
	/* A name: the policy's rules for names, and lowercased. */
	return policy_normalize_name(in, given, h->name, &len) < 0 ? -EINVAL : 0;
lower:
	for (i = 0; h->name[i]; i++)
		if (h->name[i] >= 'A' && h->name[i] <= 'Z')
			h->name[i] = (char)(h->name[i] - 'A' + 'a');
	return 0;
}

static int add_san(X509 *x, const struct tls_host *h)
{
	GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
	GENERAL_NAME *gen = GENERAL_NAME_new();
	ASN1_OCTET_STRING *os = NULL;
	ASN1_IA5STRING *ia5 = NULL;
	int ret = -ENOMEM;

	if (!gens || !gen)
		goto out;
	/* Built from parts, not from a "DNS:..." config string, so that no
	 * host can smuggle a second name in. */
	if (h->is_ip) {
		os = ASN1_OCTET_STRING_new();
		if (!os || !ASN1_OCTET_STRING_set(os, h->ip, h->ip_len))
			goto out;
		GENERAL_NAME_set0_value(gen, GEN_IPADD, os);
		os = NULL;
	} else {
		ia5 = ASN1_IA5STRING_new();
		if (!ia5 || !ASN1_STRING_set(ia5, h->name, -1))
			goto out;
		GENERAL_NAME_set0_value(gen, GEN_DNS, ia5);
		ia5 = NULL;
	}
	if (!sk_GENERAL_NAME_push(gens, gen))
		goto out;
	gen = NULL;
	if (X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT) == 1)
		ret = 0;
out:
	ASN1_OCTET_STRING_free(os);
	ASN1_IA5STRING_free(ia5);
	GENERAL_NAME_free(gen);
	sk_GENERAL_NAME_pop_free(gens, GENERAL_NAME_free);
	return ret;
}

X509 *tls_leaf_make(EVP_PKEY *ca_key, X509 *ca_cert, time_t ca_not_after, EVP_PKEY *pub,
		    const struct tls_host *h, time_t now, time_t *not_after)
{
	X509 *x = X509_new();
	X509_NAME *name;
	time_t end = now + (time_t)TLS_LEAF_DAYS * TLS_DAY_SEC;

	if (!x)
		return NULL;
	if (ca_not_after && end > ca_not_after)
		end = ca_not_after;
	name = X509_get_subject_name(x);
	/* The SAN is what clients check; the CN is for people, and holds
	 * 64 characters at most. */
	if (!X509_set_version(x, X509_VERSION_3) || tls_set_random_serial(x) < 0 ||
	    tls_set_validity(x, now - TLS_BACKDATE_SEC, end) < 0 ||
	    !X509_NAME_add_entry_by_txt(
		    name, "CN", MBSTRING_ASC,
		    (const unsigned char *)(strlen(h->name) <= 64 ? h->name
								  : "sluice intercepted host"),
		    -1, -1, 0) ||
	    !X509_set_issuer_name(x, X509_get_subject_name(ca_cert)) || tls_set_pubkey(x, pub) < 0)
		goto fail;
	if (tls_add_ext(x, ca_cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
	    tls_add_ext(x, ca_cert, NID_key_usage, "critical,digitalSignature") < 0 ||
	    tls_add_ext(x, ca_cert, NID_ext_key_usage, "serverAuth") < 0 ||
	    tls_add_ext(x, ca_cert, NID_subject_key_identifier, "hash") < 0 ||
	    tls_add_ext(x, ca_cert, NID_authority_key_identifier, "keyid:always") < 0 ||
	    add_san(x, h) < 0)
		goto fail;
	if (!X509_sign(x, ca_key, EVP_sha256()))
		goto fail;
	*not_after = end;
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* "http/1.1" if the client offers it; otherwise no ALPN at all (not an
 * alert): an h2-only client then speaks HTTP/1.1 or gives up itself. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	unsigned int i = 0;

	(void)ssl;
	(void)arg;
	while (i < inlen) {
		unsigned int n = in[i];

		if (n == 0 || n > inlen - i - 1)
			break;
		if (n == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + n;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

/*
 * A leaf signed by the key process (broker/keys/): the leaf's public key
 * goes there, the certificate comes back. Its end is the certificate's
 * own, whatever the key process chose (never past the CA's).
 */
static X509 *remote_leaf(const struct tls_ca *ca, const struct tls_host *h, time_t *end)
{
	unsigned char *pub = NULL, *der = NULL;
	const unsigned char *p;
	size_t len = 0;
	X509 *x = NULL;
	int n;

	n = i2d_PUBKEY(ca->leaf_key, &pub);
	if (n <= 0)
		return NULL;
	if (keys_leaf_sign(ca->id, h->name, pub, (size_t)n, &der, &len) == 0) {
		p = der;
		x = d2i_X509(NULL, &p, (long)len);
		if (x && p != der + len) {
			X509_free(x);
			x = NULL;
		}
	}
	OPENSSL_free(pub);
	free(der);
	if (x)
		*end = tls_asn1_time(X509_get0_notAfter(x));
	return x;
}

static SSL_CTX *make_leaf_ctx(const struct tls_ca *ca, const struct tls_host *h, time_t now,
			      time_t *refresh_at)
{
	SSL_CTX *ctx;
	time_t end = 0;
	X509 *leaf = ca->remote ? remote_leaf(ca, h, &end)
				: tls_leaf_make(ca->key, ca->cert, ca->not_after, ca->leaf_key, h,
						now, &end);

	if (!leaf)
		return NULL;
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx)
		goto fail;
	/* Only ECDHE AEAD suites for 1.2 (the leaf is ECDSA anyway); 1.3 keeps
	 * its defaults.  The server-side session cache is off: 1024 contexts
	 * each caching up to 20480 sessions is memory without a bound worth
	 * having; stateless tickets still resume. */
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20") ||
	    SSL_CTX_use_certificate(ctx, leaf) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, ca->leaf_key) != 1 || SSL_CTX_check_private_key(ctx) != 1)
		goto fail;
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
					 SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	X509_free(leaf);
	/* A leaf capped by a CA in its last day is kept to its end rather
	 * than re-minted on every connection. */
	*refresh_at = end - TLS_DAY_SEC > now ? end - TLS_DAY_SEC : end;
	return ctx;
fail:
	SSL_CTX_free(ctx);
	X509_free(leaf);
	return NULL;
}

static uint64_t host_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Callers hold ca->lock. */
static struct tls_leaf *cache_find(struct tls_ca *ca, const char *host, uint64_t hash)
{
	struct tls_leaf *e;

	for (e = ca->buckets[hash & (TLS_CACHE_BUCKETS - 1)]; e; e = e->hnext)
		if (e->hash == hash && strcmp(e->host, host) == 0)
			return e;
	return NULL;
}

static void lru_unlink(struct tls_ca *ca, struct tls_leaf *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		ca->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		ca->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push_front(struct tls_ca *ca, struct tls_leaf *e)
{
	e->prev = NULL;
	e->next = ca->head;
	if (ca->head)
		ca->head->prev = e;
	ca->head = e;
	if (!ca->tail)
		ca->tail = e;
}

static void cache_remove(struct tls_ca *ca, struct tls_leaf *e)
{
	struct tls_leaf **pp = &ca->buckets[e->hash & (TLS_CACHE_BUCKETS - 1)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	lru_unlink(ca, e);
	ca->n--;
}

SSL_CTX *tls_leaf_ctx(struct tls_ca *ca, const char *host)
{
	struct tls_host h;
	struct tls_leaf *e;
	SSL_CTX *ctx, *ret = NULL;
	time_t now = time(NULL), refresh_at = 0;
	uint64_t hash;

	if (!ca || tls_host_parse(host, &h) < 0)
		return NULL;
	hash = host_hash(h.name);

	pthread_mutex_lock(&ca->lock);
	e = cache_find(ca, h.name, hash);
	if (e && now < e->refresh_at) {
		ca->hits++;
		lru_unlink(ca, e);
		lru_push_front(ca, e);
		if (SSL_CTX_up_ref(e->ctx))
			ret = e->ctx;
		pthread_mutex_unlock(&ca->lock);
		return ret;
	}
	ca->misses++;
	pthread_mutex_unlock(&ca->lock);

	/* Minting takes a signature and an SSL_CTX: outside the lock. */
	ctx = make_leaf_ctx(ca, &h, now, &refresh_at);
	if (!ctx) {
		ERR_clear_error();
		return NULL;
	}

	pthread_mutex_lock(&ca->lock);
	e = cache_find(ca, h.name, hash);
	if (e && now < e->refresh_at) {
		/* Another worker minted the same host meanwhile: keep one. */
		SSL_CTX_free(ctx);
		ctx = e->ctx;
	} else if (e) {
		SSL_CTX_free(e->ctx);
		e->ctx = ctx;
		e->refresh_at = refresh_at;
	} else {
		if (ca->n >= TLS_LEAF_CACHE_MAX && ca->tail) {
			e = ca->tail;
			cache_remove(ca, e);
			SSL_CTX_free(e->ctx);
			ca->evictions++;
		} else {
			e = malloc(sizeof(*e));
			if (!e) {
				pthread_mutex_unlock(&ca->lock);
				/* Still usable, just not cached. */
				return ctx;
			}
		}
		memset(e, 0, sizeof(*e));
		memcpy(e->host, h.name, strlen(h.name) + 1);
		e->hash = hash;
		e->ctx = ctx;
		e->refresh_at = refresh_at;
		e->hnext = ca->buckets[hash & (TLS_CACHE_BUCKETS - 1)];
		ca->buckets[hash & (TLS_CACHE_BUCKETS - 1)] = e;
		lru_push_front(ca, e);
		ca->n++;
	}
	if (e->prev) {
		lru_unlink(ca, e);
		lru_push_front(ca, e);
	}
	if (SSL_CTX_up_ref(ctx))
		ret = ctx;
	pthread_mutex_unlock(&ca->lock);
	return ret;
}

void tls_leaf_stats(struct tls_ca *ca, struct tls_leaf_stats *st)
{
	pthread_mutex_lock(&ca->lock);
	st->hits = ca->hits;
	st->misses = ca->misses;
	st->evictions = ca->evictions;
	st->entries = ca->n;
	pthread_mutex_unlock(&ca->lock);
}

void tls_leaf_cache_free(struct tls_ca *ca)
{
	struct tls_leaf *e, *next;

	for (e = ca->head; e; e = next) {
		next = e->next;
		SSL_CTX_free(e->ctx);
		free(e);
	}
	ca->head = ca->tail = NULL;
	ca->n = 0;
}
