// SPDX-License-Identifier: MIT
/* Broker-minted JWTs (ES256, EdDSA) and the JWK Set that verifies them. */

/*
 * A credential of the JWT kind is a token the broker signs per request
 * or per sandbox: sub names the sandbox, aud the host, exp is minutes
 * away.  The upstream verifies it against the broker's JWKS.  Only two
 * algorithms: ES256 (P-256, what most verifiers support) and EdDSA
 * (Ed25519); RSA keys are refused rather than half-supported.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include "broker/creds/creds_internal.h"
#include "broker/keys/keys.h"
#include "broker/tls/tls.h"
#include "common/err.h"
#include "common/file.h"

/* Longest claim or kid accepted (a host name is 253). */
#define JWT_FIELD_MAX 1024
#define JWT_TTL_MAX (31ULL * 86400)

enum jwt_alg { JWT_NONE, JWT_ES256, JWT_EDDSA };

static enum jwt_alg key_alg(EVP_PKEY *key)
{
	char group[32];
	size_t glen = 0;

	if (!key)
		return JWT_NONE;
	if (EVP_PKEY_is_a(key, "ED25519"))
		return JWT_EDDSA;
	if (EVP_PKEY_is_a(key, "EC") &&
	    EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
					   &glen) == 1 &&
	    (strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0))
		return JWT_ES256;
	return JWT_NONE;
}

static const char *alg_name(enum jwt_alg a)
{
	return a == JWT_ES256 ? "ES256" : "EdDSA";
}

/*
 * With the key process (broker/keys/), a key is held there: the broker
 * keeps its public half, marked with the key process's handle, and asks
 * for each signature (JWT_SIGN). Minted tokens are cached per (sandbox,
 * host) as before (creds.c), so a round trip is paid per token, not per
 * request.
 */
static int ex_index = -1;
static pthread_once_t ex_once = PTHREAD_ONCE_INIT;

static void ex_init(void)
{
	ex_index = EVP_PKEY_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* The key process's handle of @key, or 0 for a key held here. */
static uint32_t remote_handle(EVP_PKEY *key)
{
	if (!keys_active() || !key)
		return 0;
	pthread_once(&ex_once, ex_init);
	return ex_index < 0 ? 0 : (uint32_t)(uintptr_t)EVP_PKEY_get_ex_data(key, ex_index);
}

/*
 * The broker opens the file (itself, or through its opener for a root-only
 * one) and hands the descriptor over unread. One that neither may read is
 * opened by the key process as its own user: a key file given to the key
 * user (0600) is out of the broker's reach altogether. Not for a sandbox a
 * control_group member registered: its files are read with the member's
 * right alone (common/file.h file_read_as()).
 */
static int remote_load(const char *pem_file, EVP_PKEY **key, struct sl_err *err)
{
	unsigned char *spki = NULL;
	const unsigned char *p;
	uint32_t handle = 0;
	EVP_PKEY *k = NULL;
	size_t len = 0;
	int fd, r;

	if (!pem_file || pem_file[0] != '/') {
		sl_err_set(err, 0, "JWT key `%s` is not an absolute path",
			   pem_file ? pem_file : "");
		return -EINVAL;
	}
	fd = file_open_read(pem_file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	/* The key process's own right is not for a control_group member:
	 * what the member may not read, no sandbox of its signs with. */
	if (fd < 0 && ((fd != -EACCES && fd != -EPERM) || file_reading_for_other())) {
		if (fd == -ELOOP)
			sl_err_set(err, ELOOP, "JWT key `%s`: is a symlink (refused)", pem_file);
		else
			sl_err_sys(err, fd, "JWT key `%s`", pem_file);
		return fd;
	}
	r = keys_jwt_load(pem_file, fd, &handle, &spki, &len);
	if (fd >= 0)
		close(fd);
	if (r == 0) {
		p = spki;
		k = d2i_PUBKEY(NULL, &p, (long)len);
		pthread_once(&ex_once, ex_init);
		if (!k || p != spki + len || key_alg(k) == JWT_NONE || ex_index < 0 ||
		    EVP_PKEY_set_ex_data(k, ex_index, (void *)(uintptr_t)handle) != 1) {
			(void)keys_jwt_drop(handle);
			EVP_PKEY_free(k);
			k = NULL;
			r = -EIO;
		}
	}
	free(spki);
	ERR_clear_error();
	if (r < 0) {
		/* The key process's refusals, no failed call: errno 0 for
		 * them (broker/keys/keys_internal.h). */
		if (r == -EKEYREJECTED)
			sl_err_set(err, 0,
				   "JWT key `%s`: not a PEM private key, EC P-256 (ES256) or "
				   "Ed25519 (EdDSA)",
				   pem_file);
		else if (r == -EINVAL)
			sl_err_set(err, 0, "JWT key `%s`: not a regular file", pem_file);
		else if (r == -EFBIG)
			sl_err_set(err, 0, "JWT key `%s`: empty or too large", pem_file);
		else if (r == -EPIPE)
			sl_err_set(err, EPIPE, "JWT key `%s`: the key process is gone", pem_file);
		else
			sl_err_sys(err, r, "JWT key `%s`", pem_file);
		return r;
	}
	*key = k;
	return 0;
}

void creds_jwt_key_free(EVP_PKEY *key)
{
	uint32_t h = remote_handle(key);

	if (h)
		(void)keys_jwt_drop(h);
	EVP_PKEY_free(key);
}

int creds_jwt_key_load(const char *pem_file, EVP_PKEY **key, struct sl_err *err)
{
	struct creds_secret pem;
	EVP_PKEY *k = NULL;
	BIO *b;
	int ret;

	*key = NULL;
	if (keys_active())
		return remote_load(pem_file, key, err);
	ret = creds_file_read(pem_file, &pem, err);
	if (ret < 0)
		return ret;
	b = pem.len <= INT_MAX ? BIO_new_mem_buf(pem.buf, (int)pem.len) : NULL;
	if (b)
		k = PEM_read_bio_PrivateKey(b, NULL, tls_no_password, NULL);
	BIO_free(b);
	creds_secret_free(&pem);
	ERR_clear_error();
	if (!k) {
		sl_err_set(err, 0, "JWT key `%s`: not a PEM private key", pem_file);
		return -EINVAL;
	}
	if (key_alg(k) == JWT_NONE) {
		sl_err_set(err, 0, "JWT key `%s`: want an EC P-256 (ES256) or Ed25519 (EdDSA) key",
			   pem_file);
		EVP_PKEY_free(k);
		return -EINVAL;
	}
	*key = k;
	return 0;
}

/* ---- a bounded writer ---------------------------------------------------- */

struct jbuf {
	char *p;
	size_t cap, len;
	bool full;
};

static void jput(struct jbuf *b, const char *s, size_t n)
{
	if (b->full || n > b->cap - b->len) {
		b->full = true;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void jputs(struct jbuf *b, const char *s)
{
	jput(b, s, strlen(s));
}

/* A JSON string literal; control characters and non-ASCII escaped. */
static void jput_str(struct jbuf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	jput(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };

			jput(b, e, 2);
		} else if (c < 0x20 || c == 0x7f) {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

			jput(b, e, 6);
		} else {
			/* UTF-8 passes through; JSON is UTF-8. */
			jput(b, (const char *)&c, 1);
		}
	}
	jput(b, "\"", 1);
}

static void jput_u64(struct jbuf *b, uint64_t v)
{
	char n[24];
	int l = snprintf(n, sizeof(n), "%llu", (unsigned long long)v);

	jput(b, n, (size_t)l);
}

static void jput_b64url(struct jbuf *b, const void *data, size_t len)
{
	int n;

	if (b->full) {
		return;
	}
	n = creds_base64_encode(data, len, true, b->p + b->len, b->cap - b->len);
	if (n < 0) {
		b->full = true;
		return;
	}
	b->len += (size_t)n;
}

/* ---- minting ------------------------------------------------------------- */

/* ES256 per RFC 7518 3.4: R and S, 32 bytes each, not DER. */
static int sign(EVP_PKEY *key, enum jwt_alg alg, const char *tbs, size_t len, unsigned char sig[64])
{
	EVP_MD_CTX *mctx = EVP_MD_CTX_new();
	unsigned char der[80];
	const unsigned char *dp = der;
	size_t dlen = sizeof(der), slen = 64;
	ECDSA_SIG *es = NULL;
	const BIGNUM *r, *s;
	int ret = -EIO;

	if (!mctx)
		return -ENOMEM;
	if (alg == JWT_EDDSA) {
		if (EVP_DigestSignInit(mctx, NULL, NULL, NULL, key) == 1 &&
		    EVP_DigestSign(mctx, sig, &slen, (const unsigned char *)tbs, len) == 1 &&
		    slen == 64)
			ret = 0;
		goto out;
	}
	if (EVP_DigestSignInit(mctx, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(mctx, der, &dlen, (const unsigned char *)tbs, len) != 1)
		goto out;
	es = d2i_ECDSA_SIG(NULL, &dp, (long)dlen);
	if (!es)
		goto out;
	ECDSA_SIG_get0(es, &r, &s);
	if (BN_bn2binpad(r, sig, 32) == 32 && BN_bn2binpad(s, sig + 32, 32) == 32)
		ret = 0;
out:
	ECDSA_SIG_free(es);
	EVP_MD_CTX_free(mctx);
	ERR_clear_error();
	return ret;
}

bool creds_jwt_key_ok(EVP_PKEY *key)
{
	return key_alg(key) != JWT_NONE;
}

int creds_jwt_sign_raw(EVP_PKEY *key, const unsigned char *tbs, size_t len, unsigned char sig[64])
{
	enum jwt_alg alg = key_alg(key);

	if (alg == JWT_NONE)
		return -EINVAL;
	return sign(key, alg, (const char *)tbs, len, sig);
}

static bool field_ok(const char *s, bool optional)
{
	if (!s)
		return optional;
	return *s && strlen(s) <= JWT_FIELD_MAX;
}

int creds_jwt_mint(EVP_PKEY *key, const char *kid, const char *iss, const char *sub,
		   const char *aud, const char *scope, uint64_t iat, uint64_t ttl, char *out,
		   size_t outlen)
{
	enum jwt_alg alg = key_alg(key);
	/* Six bytes per character is the worst JSON escaping. */
	size_t jcap = 6 * (5 * JWT_FIELD_MAX) + 512;
	struct jbuf o = { .p = out, .cap = outlen ? outlen - 1 : 0 };
	struct jbuf j = { 0 };
	unsigned char jti[16], sig[64];
	char jti_hex[33];
	size_t i;
	int ret = -EINVAL;

	if (alg == JWT_NONE || !out || !outlen || !field_ok(kid, true) || !field_ok(iss, false) ||
	    !field_ok(sub, false) || !field_ok(aud, false) || !field_ok(scope, true) || ttl == 0 ||
	    ttl > JWT_TTL_MAX || iat > UINT64_MAX - ttl)
		return -EINVAL;
	if (RAND_bytes(jti, sizeof(jti)) != 1)
		return -EIO;
	for (i = 0; i < sizeof(jti); i++)
		snprintf(jti_hex + 2 * i, 3, "%02x", jti[i]);
	j.p = malloc(jcap);
	if (!j.p)
		return -ENOMEM;
	j.cap = jcap;

	/* header */
	jputs(&j, "{\"alg\":\"");
	jputs(&j, alg_name(alg));
	jputs(&j, "\",\"typ\":\"JWT\"");
	if (kid) {
		jputs(&j, ",\"kid\":");
		jput_str(&j, kid);
	}
	jputs(&j, "}");
	if (j.full)
		goto out;
	jput_b64url(&o, j.p, j.len);
	jput(&o, ".", 1);

	/* claims */
	j.len = 0;
	jputs(&j, "{\"iss\":");
	jput_str(&j, iss);
	jputs(&j, ",\"sub\":");
	jput_str(&j, sub);
	jputs(&j, ",\"aud\":");
	jput_str(&j, aud);
	jputs(&j, ",\"iat\":");
	jput_u64(&j, iat);
	jputs(&j, ",\"exp\":");
	jput_u64(&j, iat + ttl);
	jputs(&j, ",\"jti\":\"");
	jputs(&j, jti_hex);
	jputs(&j, "\"");
	if (scope) {
		jputs(&j, ",\"scope\":");
		jput_str(&j, scope);
	}
	jputs(&j, "}");
	if (j.full)
		goto out;
	jput_b64url(&o, j.p, j.len);
	if (o.full) {
		ret = -ENOSPC;
		goto out;
	}

	if (remote_handle(key))
		ret = keys_jwt_sign(remote_handle(key), (const unsigned char *)o.p, o.len, sig);
	else
		ret = sign(key, alg, o.p, o.len, sig);
	if (ret < 0)
		goto out;
	jput(&o, ".", 1);
	jput_b64url(&o, sig, sizeof(sig));
	ret = o.full ? -ENOSPC : (o.len > INT_MAX ? -ENOSPC : (int)o.len);
out:
	free(j.p);
	if (ret < 0)
		OPENSSL_cleanse(out, outlen);
	else
		out[o.len] = '\0';
	return ret;
}

/* ---- JWKS ---------------------------------------------------------------- */

static int jwk(struct jbuf *b, EVP_PKEY *key, const char *kid)
{
	enum jwt_alg alg = key_alg(key);
	unsigned char x[32], y[32];
	BIGNUM *bx = NULL, *by = NULL;
	size_t xl = sizeof(x);
	int ret = -EINVAL;

	if (alg == JWT_EDDSA) {
		if (EVP_PKEY_get_raw_public_key(key, x, &xl) != 1 || xl != 32)
			goto out;
		jputs(b, "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"");
		jput_b64url(b, x, 32);
	} else if (alg == JWT_ES256) {
		if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &bx) != 1 ||
		    EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &by) != 1 ||
		    BN_bn2binpad(bx, x, 32) != 32 || BN_bn2binpad(by, y, 32) != 32)
			goto out;
		jputs(b, "{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"");
		jput_b64url(b, x, 32);
		jputs(b, "\",\"y\":\"");
		jput_b64url(b, y, 32);
	} else {
		goto out;
	}
	jputs(b, "\"");
	if (kid) {
		jputs(b, ",\"kid\":");
		jput_str(b, kid);
	}
	jputs(b, ",\"alg\":\"");
	jputs(b, alg_name(alg));
	jputs(b, "\",\"use\":\"sig\"}");
	ret = 0;
out:
	BN_free(bx);
	BN_free(by);
	ERR_clear_error();
	return ret;
}

int creds_jwks_from_keys(EVP_PKEY *const *keys, const char *const *kids, size_t n, char *out,
			 size_t outlen)
{
	struct jbuf b = { .p = out, .cap = outlen ? outlen - 1 : 0 };
	size_t i;
	int ret;

	if (!out || !outlen || (n && !keys))
		return -EINVAL;
	jputs(&b, "{\"keys\":[");
	for (i = 0; i < n; i++) {
		const char *kid = kids ? kids[i] : NULL;

		if (kid && !field_ok(kid, true))
			return -EINVAL;
		if (i)
			jputs(&b, ",");
		ret = jwk(&b, keys[i], kid);
		if (ret < 0)
			return ret;
	}
	jputs(&b, "]}");
	if (b.full || b.len > INT_MAX)
		return -ENOSPC;
	out[b.len] = '\0';
	return (int)b.len;
}
