// SPDX-License-Identifier: MIT
/* Unit tests for broker/tls/ca.c, leaf.c and upstream.c: the per-sandbox
 * CA, its leaves, in-memory TLS handshakes through them, and the upstream
 * client context. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "broker/tls/tls.h"
#include "broker/tls/tls_internal.h"
#include "common/err.h"

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/sluice-tls.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

static X509 *ca_cert(const struct tls_ca *ca)
{
	char *pem = NULL;
	BIO *b;
	X509 *x;

	assert_int_equal(tls_ca_cert_pem(ca, &pem), 0);
	b = BIO_new_mem_buf(pem, -1);
	x = PEM_read_bio_X509(b, NULL, NULL, NULL);
	BIO_free(b);
	free(pem);
	assert_non_null(x);
	return x;
}

static char *cert_cn(X509 *x, char *buf, size_t len)
{
	X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, buf, (int)len);
	return buf;
}

/* Seconds from now to @t (negative in the past). */
static long secs_from_now(const ASN1_TIME *t)
{
	int days = 0, secs = 0;

	assert_int_equal(ASN1_TIME_diff(&days, &secs, NULL, t), 1);
	return (long)days * 86400 + secs;
}

/* tls_set_pubkey()'s direct path writes what X509_set_pubkey() writes,
 * and a certificate made with it verifies with the key; a key of another
 * curve or kind goes the slow way and comes out the same too. */
static void spki_same(EVP_PKEY *key)
{
	X509 *fast = X509_new(), *slow = X509_new();
	unsigned char *a = NULL, *b = NULL;
	int la, lb;

	assert_non_null(fast);
	assert_non_null(slow);
	assert_int_equal(tls_set_pubkey(fast, key), 0);
	assert_int_equal(X509_set_pubkey(slow, key), 1);
	la = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(fast), &a);
	lb = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(slow), &b);
	assert_true(la > 0);
	assert_int_equal(la, lb);
	assert_memory_equal(a, b, (size_t)la);
	/* The key read back from the certificate is the key. */
	assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(fast), key), 1);
	OPENSSL_free(a);
	OPENSSL_free(b);
	X509_free(fast);
	X509_free(slow);
}

/* A CA certificate made with @key verifies with @pub, which is its key. */
static void ca_made_with(EVP_PKEY *key, EVP_PKEY *pub, const char *name)
{
	X509 *ca = tls_ca_make_cert(key, name);

	assert_non_null(ca);
	assert_int_equal(X509_verify(ca, pub), 1);
	assert_int_equal(X509_check_private_key(ca, pub), 1);
	X509_free(ca);
}

static void test_set_pubkey(void **state)
{
	EVP_PKEY *p256 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	EVP_PKEY *p384 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
	EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");

	(void)state;
	assert_non_null(p256);
	assert_non_null(p384);
	assert_non_null(ed);
	spki_same(p256);
	spki_same(p384);
	spki_same(ed);
	ca_made_with(p256, p256, "fast");
	EVP_PKEY_free(p256);
	EVP_PKEY_free(p384);
	EVP_PKEY_free(ed);
}

/* tls_new_p256_key(): a P-256 key in the legacy form, whose PEM reads
 * back as the same key, and that makes a CA that verifies. */
static void test_new_p256_key(void **state)
{
	EVP_PKEY *k = tls_new_p256_key(), *back;
	char name[32];
	BIO *b;

	(void)state;
	assert_non_null(k);
	assert_true(EVP_PKEY_is_a(k, "EC"));
	assert_int_equal(EVP_PKEY_get_bits(k), 256);
	assert_int_equal(EVP_PKEY_get_group_name(k, name, sizeof(name), NULL), 1);
	assert_string_equal(name, "prime256v1");
	b = BIO_new(BIO_s_mem());
	assert_int_equal(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL), 1);
	back = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
	BIO_free(b);
	assert_non_null(back);
	assert_int_equal(EVP_PKEY_eq(k, back), 1);
	spki_same(k);
	ca_made_with(k, back, "legacy");
	EVP_PKEY_free(back);
	EVP_PKEY_free(k);
}

static void test_ca_fields(void **state)
{
	struct sl_err err = { 0 };
	char cn[128];
	struct tls_ca *ca;
	BASIC_CONSTRAINTS *bc;
	ASN1_BIT_STRING *ku;
	X509 *x;
	int crit = -1;

	(void)state;
	ca = tls_ca_create("demo-1", &err);
	assert_non_null(ca);
	x = ca_cert(ca);
	assert_string_equal(cert_cn(x, cn, sizeof(cn)), "sluice sandbox demo-1 CA");
	/* Self-signed, a CA that signs leaves only. */
	assert_int_equal(X509_check_issued(x, x), X509_V_OK);
	bc = X509_get_ext_d2i(x, NID_basic_constraints, &crit, NULL);
	assert_non_null(bc);
	assert_int_equal(crit, 1);
	assert_true(bc->ca);
	assert_non_null(bc->pathlen);
	assert_int_equal(ASN1_INTEGER_get(bc->pathlen), 0);
	BASIC_CONSTRAINTS_free(bc);
	ku = X509_get_ext_d2i(x, NID_key_usage, &crit, NULL);
	assert_non_null(ku);
	assert_int_equal(crit, 1);
	assert_int_equal(X509_get_key_usage(x), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	ASN1_BIT_STRING_free(ku);
	assert_non_null(X509_get0_subject_key_id(x));
	/* Serial: random, not 0 or 1, at least 120 bits most of the time. */
	{
		BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);

		assert_true(BN_num_bits(bn) > 64);
		BN_free(bn);
	}
	/* Back-dated an hour, 397 days ahead. */
	assert_in_range(secs_from_now(X509_get0_notBefore(x)), -3600 - 5, -3600 + 5);
	assert_in_range(secs_from_now(X509_get0_notAfter(x)), 397L * 86400 - 5, 397L * 86400 + 5);
	X509_free(x);
	tls_ca_free(ca);

	/* A long name is cut to fit the CN; a control character refused. */
	ca = tls_ca_create("a-very-long-sandbox-name-that-goes-on-and-on-and-on-forever", &err);
	assert_non_null(ca);
	x = ca_cert(ca);
	cert_cn(x, cn, sizeof(cn));
	assert_int_equal(strlen(cn), 64);
	assert_string_equal(cn + 61, " CA");
	X509_free(x);
	tls_ca_free(ca);
	assert_null(tls_ca_create("bad\nname", &err));
	assert_null(tls_ca_create("", &err));
}

static void test_save_load(void **state)
{
	struct sl_err err = { 0 };
	char p[256], p2[256];
	struct tls_ca *ca, *ca2;
	char *pem1, *pem2;
	struct stat st;

	(void)state;
	ca = tls_ca_create("roundtrip", &err);
	assert_non_null(ca);
	assert_int_equal(tls_ca_save(ca, tmpdir), 0);

	path(p, sizeof(p), "ca.key");
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	path(p, sizeof(p), "ca.crt");
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	path(p, sizeof(p), "ca.key.tmp");
	assert_int_equal(lstat(p, &st), -1);

	ca2 = tls_ca_load(tmpdir, &err);
	if (!ca2)
		fail_msg("load: %s", sl_err_msg(&err));
	assert_int_equal(tls_ca_cert_pem(ca, &pem1), 0);
	assert_int_equal(tls_ca_cert_pem(ca2, &pem2), 0);
	assert_string_equal(pem1, pem2);
	assert_non_null(strstr(pem1, "-----BEGIN CERTIFICATE-----"));
	free(pem1);
	free(pem2);

	/* The loaded CA signs leaves the saved certificate verifies. */
	{
		SSL_CTX *ctx = tls_leaf_ctx(ca2, "x.example");
		X509 *leaf, *cax = ca_cert(ca);
		EVP_PKEY *pub = X509_get0_pubkey(cax);

		assert_non_null(ctx);
		leaf = SSL_CTX_get0_certificate(ctx);
		assert_int_equal(X509_verify(leaf, pub), 1);
		X509_free(cax);
		SSL_CTX_free(ctx);
	}
	tls_ca_free(ca2);

	/* Saving again replaces both files (a new CA here). */
	ca2 = tls_ca_create("other", &err);
	assert_int_equal(tls_ca_save(ca2, tmpdir), 0);
	tls_ca_free(ca2);
	ca2 = tls_ca_load(tmpdir, &err);
	assert_non_null(ca2);
	assert_int_equal(tls_ca_cert_pem(ca2, &pem2), 0);
	assert_int_equal(tls_ca_cert_pem(ca, &pem1), 0);
	assert_string_not_equal(pem1, pem2);
	free(pem1);
	free(pem2);
	tls_ca_free(ca2);

	/* A key readable by others is refused. */
	path(p, sizeof(p), "ca.key");
	assert_int_equal(chmod(p, 0644), 0);
	sl_err_clear(&err);
	assert_null(tls_ca_load(tmpdir, &err));
	assert_string_equal(sl_err_msg(&err), "`ca.key`: mode 644 lets others read the key");
	assert_int_equal(sl_err_errno(&err), 0); /* a refusal, no failed call */
	assert_int_equal(chmod(p, 0600), 0);

	/* A key that is a symlink is refused (not followed). */
	path(p2, sizeof(p2), "real.key");
	assert_int_equal(rename(p, p2), 0);
	assert_int_equal(symlink(p2, p), 0);
	sl_err_clear(&err);
	assert_null(tls_ca_load(tmpdir, &err));
	assert_string_equal(sl_err_msg(&err), "`ca.key`: is a symlink");
	assert_int_equal(sl_err_errno(&err), ELOOP);

	/* tls_ca_save() replaces the symlink, never writes through it. */
	assert_int_equal(tls_ca_save(ca, tmpdir), 0);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	ca2 = tls_ca_load(tmpdir, &err);
	assert_non_null(ca2);
	tls_ca_free(ca2);
	{
		/* The symlink's target kept the other CA's key. */
		char buf[4096];
		FILE *f = fopen(p2, "r");
		size_t n;

		assert_non_null(f);
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		assert_non_null(strstr(buf, "PRIVATE KEY"));
	}
	unlink(p2);

	/* A stale temporary file from a crash does not block a save; a
	 * symlink there is removed, not followed. */
	path(p, sizeof(p), "ca.key.tmp");
	path(p2, sizeof(p2), "victim");
	assert_int_equal(symlink(p2, p), 0);
	assert_int_equal(tls_ca_save(ca, tmpdir), 0);
	assert_int_equal(lstat(p2, &st), -1);
	assert_int_equal(lstat(p, &st), -1);

	/* Certificate and key of different CAs. */
	{
		struct tls_ca *ca3 = tls_ca_create("third", &err);
		char sub[256];

		snprintf(sub, sizeof(sub), "%s/sub", tmpdir);
		assert_int_equal(mkdir(sub, 0700), 0);
		assert_int_equal(tls_ca_save(ca3, sub), 0);
		path(p, sizeof(p), "sub/ca.crt");
		path(p2, sizeof(p2), "ca.crt");
		assert_int_equal(rename(p2, p), 0);
		assert_null(tls_ca_load(sub, &err));
		assert_non_null(strstr(sl_err_msg(&err), "do not match"));
		tls_ca_free(ca3);
	}
	assert_null(tls_ca_load("/nonexistent-sluice-dir", &err));
	assert_int_equal(tls_ca_save(ca, "/nonexistent-sluice-dir"), -ENOENT);
	tls_ca_free(ca);
}

static X509_STORE *store_of(const struct tls_ca *ca)
{
	X509_STORE *st = X509_STORE_new();
	X509 *x = ca_cert(ca);

	assert_int_equal(X509_STORE_add_cert(st, x), 1);
	X509_free(x);
	return st;
}

/* X509_verify_cert() of @leaf against @ca for TLS server use and @host. */
static int verify_leaf(const struct tls_ca *ca, X509 *leaf, const char *host)
{
	X509_STORE *st = store_of(ca);
	X509_STORE_CTX *sc = X509_STORE_CTX_new();
	X509_VERIFY_PARAM *vp;
	int ok, e;

	assert_int_equal(X509_STORE_CTX_init(sc, st, leaf, NULL), 1);
	vp = X509_STORE_CTX_get0_param(sc);
	X509_VERIFY_PARAM_set_purpose(vp, X509_PURPOSE_SSL_SERVER);
	if (host)
		X509_VERIFY_PARAM_set1_host(vp, host, 0);
	ok = X509_verify_cert(sc);
	e = X509_STORE_CTX_get_error(sc);
	X509_STORE_CTX_free(sc);
	X509_STORE_free(st);
	return ok == 1 ? X509_V_OK : (e ? e : -1);
}

static void test_leaf(void **state)
{
	struct sl_err err = { 0 };
	char cn[128];
	struct tls_ca *ca = tls_ca_create("leafy", &err), *other;
	SSL_CTX *ctx;
	X509 *leaf;
	EXTENDED_KEY_USAGE *eku;
	BASIC_CONSTRAINTS *bc;
	long left;

	(void)state;
	assert_non_null(ca);
	ctx = tls_leaf_ctx(ca, "API.Example.COM.");
	assert_non_null(ctx);
	leaf = SSL_CTX_get0_certificate(ctx);
	assert_non_null(leaf);
	assert_int_equal(verify_leaf(ca, leaf, "api.example.com"), X509_V_OK);
	assert_int_equal(X509_check_host(leaf, "api.example.com", 0, 0, NULL), 1);
	assert_int_equal(X509_check_host(leaf, "other.example.com", 0, 0, NULL), 0);
	assert_int_equal(X509_check_host(leaf, "x.api.example.com", 0, 0, NULL), 0);
	assert_int_equal(verify_leaf(ca, leaf, "other.example.com"), X509_V_ERR_HOSTNAME_MISMATCH);
	assert_string_equal(cert_cn(leaf, cn, sizeof(cn)), "api.example.com");

	/* serverAuth, not a CA, about 7 days, back-dated an hour. */
	eku = X509_get_ext_d2i(leaf, NID_ext_key_usage, NULL, NULL);
	assert_non_null(eku);
	assert_int_equal(sk_ASN1_OBJECT_num(eku), 1);
	assert_int_equal(OBJ_obj2nid(sk_ASN1_OBJECT_value(eku, 0)), NID_server_auth);
	EXTENDED_KEY_USAGE_free(eku);
	bc = X509_get_ext_d2i(leaf, NID_basic_constraints, NULL, NULL);
	assert_non_null(bc);
	assert_false(bc->ca);
	BASIC_CONSTRAINTS_free(bc);
	left = secs_from_now(X509_get0_notAfter(leaf));
	assert_in_range(left, 7L * 86400 - 5, 7L * 86400 + 5);
	assert_in_range(secs_from_now(X509_get0_notBefore(leaf)), -3605, -3595);

	/* Another sandbox's CA does not vouch for it. */
	other = tls_ca_create("other", &err);
	assert_int_not_equal(verify_leaf(other, leaf, "api.example.com"), X509_V_OK);
	tls_ca_free(other);
	SSL_CTX_free(ctx);

	/* Address literals get an IP SAN. */
	ctx = tls_leaf_ctx(ca, "192.0.2.7");
	assert_non_null(ctx);
	leaf = SSL_CTX_get0_certificate(ctx);
	assert_int_equal(X509_check_ip_asc(leaf, "192.0.2.7", 0), 1);
	assert_int_equal(X509_check_ip_asc(leaf, "192.0.2.8", 0), 0);
	SSL_CTX_free(ctx);
	ctx = tls_leaf_ctx(ca, "[2001:DB8::1]");
	assert_non_null(ctx);
	leaf = SSL_CTX_get0_certificate(ctx);
	assert_int_equal(X509_check_ip_asc(leaf, "2001:db8::1", 0), 1);
	SSL_CTX_free(ctx);

	/* Nothing that could put another name into a certificate. */
	assert_null(tls_leaf_ctx(ca, ""));
	assert_null(tls_leaf_ctx(ca, "."));
	assert_null(tls_leaf_ctx(ca, "a..b"));
	assert_null(tls_leaf_ctx(ca, "a.example.com, DNS:evil.com"));
	assert_null(tls_leaf_ctx(ca, "*.example.com"));
	assert_null(tls_leaf_ctx(ca, "a b"));
	assert_null(tls_leaf_ctx(ca, "[not-v6]"));
	assert_null(tls_leaf_ctx(ca, NULL));
	tls_ca_free(ca);
}

static void test_cache(void **state)
{
	struct sl_err err = { 0 };
	char host[64];
	struct tls_ca *ca = tls_ca_create("cache", &err);
	struct tls_leaf_stats st;
	SSL_CTX *a, *b, *c;
	int i;

	(void)state;
	a = tls_leaf_ctx(ca, "a.example");
	b = tls_leaf_ctx(ca, "A.EXAMPLE.");
	c = tls_leaf_ctx(ca, "b.example");
	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_ptr_not_equal(a, c);
	tls_leaf_stats(ca, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.misses, 2);
	assert_int_equal(st.entries, 2);
	SSL_CTX_free(b);

	/* Fill past the bound: the least recently used go, "a" stays because
	 * it is used again half-way. */
	for (i = 0; i < TLS_LEAF_CACHE_MAX + 10; i++) {
		SSL_CTX *x;

		snprintf(host, sizeof(host), "h%d.example", i);
		x = tls_leaf_ctx(ca, host);
		assert_non_null(x);
		SSL_CTX_free(x);
		if (i == TLS_LEAF_CACHE_MAX / 2) {
			x = tls_leaf_ctx(ca, "a.example");
			assert_ptr_equal(x, a);
			SSL_CTX_free(x);
		}
	}
	tls_leaf_stats(ca, &st);
	assert_int_equal(st.entries, TLS_LEAF_CACHE_MAX);
	assert_int_equal(st.evictions, 12);
	assert_int_equal(st.misses, 2 + TLS_LEAF_CACHE_MAX + 10);
	b = tls_leaf_ctx(ca, "a.example");
	assert_ptr_equal(a, b);
	SSL_CTX_free(b);
	/* "b.example" was evicted: a new context. */
	b = tls_leaf_ctx(ca, "b.example");
	assert_ptr_not_equal(b, c);
	SSL_CTX_free(b);
	/* The evicted one is still usable by whoever holds it. */
	assert_non_null(SSL_CTX_get0_certificate(c));
	SSL_CTX_free(c);
	tls_ca_free(ca);
	/* ... and so is one handed out before the CA was freed. */
	assert_int_equal(X509_check_host(SSL_CTX_get0_certificate(a), "a.example", 0, 0, NULL), 1);
	SSL_CTX_free(a);
}

struct thr_arg {
	struct tls_ca *ca;
	int id;
	int fails;
};

static void *thr_main(void *p)
{
	struct thr_arg *a = p;
	char host[64];
	int i;

	for (i = 0; i < 200; i++) {
		SSL_CTX *x;

		snprintf(host, sizeof(host), "t%d.example", (i * 7 + a->id) % 40);
		x = tls_leaf_ctx(a->ca, host);
		if (!x || X509_check_host(SSL_CTX_get0_certificate(x), host, 0, 0, NULL) != 1)
			a->fails++;
		SSL_CTX_free(x);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct sl_err err = { 0 };
	struct tls_ca *ca = tls_ca_create("threads", &err);
	struct thr_arg args[4];
	pthread_t th[4];
	struct tls_leaf_stats st;
	int i;

	(void)state;
	for (i = 0; i < 4; i++) {
		args[i] = (struct thr_arg){ .ca = ca, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(args[i].fails, 0);
	}
	tls_leaf_stats(ca, &st);
	assert_int_equal(st.hits + st.misses, 800);
	assert_int_equal(st.entries, 40);
	assert_in_range(st.misses, 40, 40 + 4 * 40);
	tls_ca_free(ca);
}

/* ---- in-memory handshakes ------------------------------------------------ */

/* Drives both ends over a BIO pair. Return: 0 when both finished. */
static int handshake(SSL *c, SSL *s)
{
	bool cd = false, sd = false;
	int i, r, e;

	for (i = 0; i < 100 && !(cd && sd); i++) {
		if (!cd) {
			r = SSL_do_handshake(c);
			if (r == 1) {
				cd = true;
			} else {
				e = SSL_get_error(c, r);
				if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
					return -1;
			}
		}
		if (!sd) {
			r = SSL_do_handshake(s);
			if (r == 1) {
				sd = true;
			} else {
				e = SSL_get_error(s, r);
				if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
					return -1;
			}
		}
	}
	return cd && sd ? 0 : -1;
}

static void pair(SSL *c, SSL *s)
{
	BIO *bc, *bs;

	assert_int_equal(BIO_new_bio_pair(&bc, 0, &bs, 0), 1);
	SSL_set_bio(c, bc, bc);
	SSL_set_bio(s, bs, bs);
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
}

/* A client trusting @trust (or nothing), checking @host, offering @alpn. */
static SSL *client(const struct tls_ca *trust, const char *host, const unsigned char *alpn,
		   size_t alpn_len, int max_version)
{
	SSL_CTX *cc = SSL_CTX_new(TLS_client_method());
	SSL *c;

	assert_non_null(cc);
	if (trust)
		SSL_CTX_set_cert_store(cc, store_of(trust));
	SSL_CTX_set_verify(cc, SSL_VERIFY_PEER, NULL);
	if (max_version)
		SSL_CTX_set_max_proto_version(cc, max_version);
	if (alpn)
		assert_int_equal(SSL_CTX_set_alpn_protos(cc, alpn, (unsigned)alpn_len), 0);
	c = SSL_new(cc);
	SSL_CTX_free(cc);
	SSL_set_tlsext_host_name(c, host);
	SSL_set1_host(c, host);
	return c;
}

static void test_handshake(void **state)
{
	static const unsigned char both[] = "\x02h2\x08http/1.1";
	static const unsigned char h2[] = "\x02h2";
	struct sl_err err = { 0 };
	char buf[64];
	struct tls_ca *ca = tls_ca_create("hs", &err);
	struct tls_ca *other = tls_ca_create("other", &err);
	SSL_CTX *sctx = tls_leaf_ctx(ca, "api.example.com");
	const unsigned char *sel;
	unsigned sel_len;
	SSL *c, *s;
	int n;

	(void)state;
	assert_non_null(sctx);

	/* TLS 1.3, http/1.1 chosen over h2, verified, data flows. */
	c = client(ca, "api.example.com", both, sizeof(both) - 1, 0);
	s = SSL_new(sctx);
	pair(c, s);
	assert_int_equal(handshake(c, s), 0);
	assert_int_equal(SSL_version(c), TLS1_3_VERSION);
	assert_int_equal(SSL_get_verify_result(c), X509_V_OK);
	SSL_get0_alpn_selected(c, &sel, &sel_len);
	assert_int_equal(sel_len, 8);
	assert_memory_equal(sel, "http/1.1", 8);
	assert_int_equal(SSL_write(c, "GET / HTTP/1.1\r\n", 16), 16);
	n = SSL_read(s, buf, sizeof(buf));
	assert_int_equal(n, 16);
	assert_memory_equal(buf, "GET / HTTP/1.1\r\n", 16);
	SSL_free(c);
	SSL_free(s);

	/* h2 only: no ALPN answer, the handshake still succeeds. */
	c = client(ca, "api.example.com", h2, sizeof(h2) - 1, 0);
	s = SSL_new(sctx);
	pair(c, s);
	assert_int_equal(handshake(c, s), 0);
	SSL_get0_alpn_selected(c, &sel, &sel_len);
	assert_int_equal(sel_len, 0);
	SSL_free(c);
	SSL_free(s);

	/* TLS 1.2 works (ECDHE-ECDSA AEAD); TLS 1.1 does not. */
	c = client(ca, "api.example.com", NULL, 0, TLS1_2_VERSION);
	s = SSL_new(sctx);
	pair(c, s);
	assert_int_equal(handshake(c, s), 0);
	assert_int_equal(SSL_version(c), TLS1_2_VERSION);
	assert_non_null(strstr(SSL_get_cipher_name(c), "ECDHE-ECDSA"));
	SSL_free(c);
	SSL_free(s);
	c = client(ca, "api.example.com", NULL, 0, TLS1_1_VERSION);
	s = SSL_new(sctx);
	pair(c, s);
	assert_int_equal(handshake(c, s), -1);
	SSL_free(c);
	SSL_free(s);

	/* A client trusting another CA refuses the leaf. */
	c = client(other, "api.example.com", both, sizeof(both) - 1, 0);
	s = SSL_new(sctx);
	pair(c, s);
	assert_int_equal(handshake(c, s), -1);
	assert_int_not_equal(SSL_get_verify_result(c), X509_V_OK);
	SSL_free(c);
	SSL_free(s);

	/* A client asking for another name refuses it too. */
	c = client(ca, "www.example.com", both, sizeof(both) - 1, 0);
	s = SSL_new(sctx);
	pair(c, s);
	assert_int_equal(handshake(c, s), -1);
	assert_int_equal(SSL_get_verify_result(c), X509_V_ERR_HOSTNAME_MISMATCH);
	SSL_free(c);
	SSL_free(s);

	SSL_CTX_free(sctx);
	tls_ca_free(ca);
	tls_ca_free(other);
	ERR_clear_error();
}

/* ---- upstream ------------------------------------------------------------ */

static void write_ca_file(const struct tls_ca *ca, char *p, size_t len)
{
	char *pem;
	FILE *f;

	path(p, len, "upstream-ca.pem");
	assert_int_equal(tls_ca_cert_pem(ca, &pem), 0);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(pem, f);
	fclose(f);
	free(pem);
}

/* Upstream client (from @uctx, prepared for @want) against a server with
 * a leaf for @have.  Return: handshake result, verify result in *vr. */
static int upstream_try(SSL_CTX *uctx, struct tls_ca *server_ca, const char *have, const char *want,
			long *vr, char *sni_seen, size_t sni_len)
{
	SSL_CTX *sctx = tls_leaf_ctx(server_ca, have);
	SSL *c = SSL_new(uctx), *s = SSL_new(sctx);
	const char *sni;
	int r;

	assert_int_equal(tls_upstream_prepare(c, want), 0);
	pair(c, s);
	r = handshake(c, s);
	*vr = SSL_get_verify_result(c);
	sni = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
	if (sni_seen)
		snprintf(sni_seen, sni_len, "%s", sni ? sni : "");
	SSL_free(c);
	SSL_free(s);
	SSL_CTX_free(sctx);
	ERR_clear_error();
	return r;
}

static void test_upstream(void **state)
{
	struct sl_err err = { 0 };
	char p[256], sni[300];
	struct tls_ca *ca = tls_ca_create("upstream", &err);
	SSL_CTX *uctx;
	long vr;

	(void)state;
	write_ca_file(ca, p, sizeof(p));
	uctx = tls_upstream_ctx(p, &err);
	if (!uctx)
		fail_msg("%s", sl_err_msg(&err));
	assert_int_equal(SSL_CTX_get_verify_mode(uctx), SSL_VERIFY_PEER);
	assert_int_equal(SSL_CTX_get_min_proto_version(uctx), TLS1_2_VERSION);

	/* The right name: verified; SNI sent. */
	assert_int_equal(upstream_try(uctx, ca, "a.example", "a.example", &vr, sni, sizeof(sni)),
			 0);
	assert_int_equal(vr, X509_V_OK);
	assert_string_equal(sni, "a.example");

	/* The server proves a.example, the broker wanted b.example. */
	assert_int_equal(upstream_try(uctx, ca, "a.example", "b.example", &vr, NULL, 0), -1);
	assert_int_equal(vr, X509_V_ERR_HOSTNAME_MISMATCH);

	/* Literals: IP check, and no SNI (RFC 6066). */
	assert_int_equal(upstream_try(uctx, ca, "192.0.2.7", "192.0.2.7", &vr, sni, sizeof(sni)),
			 0);
	assert_int_equal(vr, X509_V_OK);
	assert_string_equal(sni, "");
	assert_int_equal(upstream_try(uctx, ca, "192.0.2.7", "192.0.2.8", &vr, NULL, 0), -1);
	assert_int_equal(vr, X509_V_ERR_IP_ADDRESS_MISMATCH);
	/* A name certificate does not satisfy an address, nor the reverse. */
	assert_int_equal(upstream_try(uctx, ca, "a.example", "192.0.2.7", &vr, NULL, 0), -1);
	{
		SSL *x = SSL_new(uctx);

		assert_int_equal(tls_upstream_prepare(x, "bad name"), -EINVAL);
		assert_int_equal(tls_upstream_prepare(x, ""), -EINVAL);
		SSL_free(x);
	}
	SSL_CTX_free(uctx);

	/* An upstream the system store does not know fails. */
	setenv("SSL_CERT_FILE", "/nonexistent-sluice-bundle.pem", 1);
	setenv("SSL_CERT_DIR", "/nonexistent-sluice-dir", 1);
	uctx = tls_upstream_ctx(NULL, &err);
	assert_non_null(uctx);
	assert_int_equal(upstream_try(uctx, ca, "a.example", "a.example", &vr, NULL, 0), -1);
	assert_int_not_equal(vr, X509_V_OK);
	SSL_CTX_free(uctx);
	/* ... and SSL_CERT_FILE is honoured for the system store. */
	setenv("SSL_CERT_FILE", p, 1);
	uctx = tls_upstream_ctx("", &err);
	assert_non_null(uctx);
	assert_int_equal(upstream_try(uctx, ca, "a.example", "a.example", &vr, NULL, 0), 0);
	SSL_CTX_free(uctx);
	unsetenv("SSL_CERT_FILE");
	unsetenv("SSL_CERT_DIR");

	sl_err_clear(&err);
	assert_null(tls_upstream_ctx("/nonexistent-sluice-bundle.pem", &err));
	assert_non_null(strstr(sl_err_msg(&err), "nonexistent-sluice-bundle.pem"));
	tls_ca_free(ca);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_pubkey),
		cmocka_unit_test(test_new_p256_key),
		cmocka_unit_test(test_ca_fields),
		cmocka_unit_test_setup_teardown(test_save_load, setup, teardown),
		cmocka_unit_test(test_leaf),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_handshake),
		cmocka_unit_test_setup_teardown(test_upstream, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
