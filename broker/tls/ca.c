// SPDX-License-Identifier: MIT
/* The per-sandbox CA, leaf certificates for interception, upstream TLS. */

/*
 * Theory of operation
 *
 * Credential injection needs the plaintext of a request, so for hosts
 * with credentials the broker terminates the sandbox's TLS itself.  Each
 * sandbox gets its own CA: its certificate goes into that sandbox's trust
 * bundle only, its key stays in the broker (DIR/ca.key, 0600), so a CA
 * leaked from one sandbox is worth nothing against another.
 *
 * The CA is short-lived (TLS_CA_DAYS, about the longest a sandbox is
 * expected to exist) and cannot sign other CAs (pathlen:0).  For every
 * host the sandbox connects to, tls_leaf_ctx() mints a leaf for exactly
 * that name, valid TLS_LEAF_DAYS, and wraps it in a server SSL_CTX.
 * All leaves of one CA share one EC P-256 key made when the CA is created
 * or loaded and never written: a key per leaf would cost a keygen per
 * host and buy nothing, since any leaf key's compromise means the
 * broker's memory is compromised, CA key included.
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
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "broker/tls/tls.h"
#include "policy/policy.h"

#define CA_KEY_FILE "ca.key"
#define CA_CRT_FILE "ca.crt"
#define CA_FILE_MAX (64 * 1024)
#define HOST_MAX 253
#define DAY_SEC 86400
/* Buckets of the leaf cache: a power of two, twice the entries. */
#define CACHE_BUCKETS (2 * TLS_LEAF_CACHE_MAX)

struct leaf {
	char host[HOST_MAX + 1];
	uint64_t hash;
	SSL_CTX *ctx;
	time_t refresh_at; /* re-mint from then on */
	struct leaf *hnext;		/* bucket chain */
	struct leaf *prev, *next;	/* LRU: head is the most recent */
};

struct tls_ca {
	EVP_PKEY *key;
	X509 *cert;
	time_t not_after; /* the CA's; no leaf outlives it */
	EVP_PKEY *leaf_key;

	pthread_mutex_t lock; /* guards everything below */
	struct leaf *buckets[CACHE_BUCKETS];
	struct leaf *head, *tail;
	size_t n;
	uint64_t hits, misses, evictions;
};

/* A host name or literal as the leaf and the cache see it. */
struct host {
	char name[HOST_MAX + 1]; /* lowercased, no dot, no brackets */
	bool is_ip;
	unsigned char ip[16];
	int ip_len;
};

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Appends OpenSSL's newest queued reason, then empties the queue. */
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	unsigned long e = ERR_peek_last_error();
	va_list ap;
	size_t n;

	if (!err || !errlen) {
		ERR_clear_error();
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	n = strlen(err);
	if (e && n + 3 < errlen) {
		snprintf(err + n, errlen - n, ": ");
		ERR_error_string_n(e, err + n + 2, errlen - n - 2);
	}
	ERR_clear_error();
}

static EVP_PKEY *new_p256_key(void)
{
	return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

/* 128 random bits, never zero; DER may add a leading zero octet. */
static int set_random_serial(X509 *x)
{
	unsigned char b[16];
	BIGNUM *bn = NULL;
	int ret = -EIO;

	do {
		if (RAND_bytes(b, sizeof(b)) != 1)
			return -EIO;
		bn = BN_bin2bn(b, sizeof(b), bn);
		if (!bn)
			return -ENOMEM;
	} while (BN_is_zero(bn));
	if (BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)))
		ret = 0;
	BN_free(bn);
	return ret;
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (!ext)
		return -EINVAL;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : -ENOMEM;
}

static int set_validity(X509 *x, time_t from, time_t to)
{
	if (!ASN1_TIME_set(X509_getm_notBefore(x), from) ||
	    !ASN1_TIME_set(X509_getm_notAfter(x), to))
		return -ENOMEM;
	return 0;
}

static time_t asn1_time_to_time(const ASN1_TIME *t)
{
	struct tm tm;

	if (!ASN1_TIME_to_tm(t, &tm))
		return 0;
	return timegm(&tm);
}

static X509 *make_ca_cert(EVP_PKEY *key, const char *sandbox_name)
{
	char cn[65];
	X509_NAME *name;
	X509 *x = X509_new();
	time_t now = time(NULL);
	int n;

	if (!x)
		return NULL;
	/* A CN holds 64 characters; the name is cut, the " CA" kept. */
	n = snprintf(cn, sizeof(cn), "sluice sandbox %.*s CA",
		     (int)(sizeof(cn) - 1 - strlen("sluice sandbox  CA")),
		     sandbox_name);
	if (n < 0)
		goto fail;
	name = X509_get_subject_name(x);
	if (!X509_set_version(x, X509_VERSION_3) || set_random_serial(x) < 0 ||
	    set_validity(x, now - TLS_BACKDATE_SEC,
			 now + (time_t)TLS_CA_DAYS * DAY_SEC) < 0 ||
	    !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
					(const unsigned char *)"sluice", -1, -1, 0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
					(const unsigned char *)cn, -1, -1, 0) ||
	    !X509_set_issuer_name(x, name) || !X509_set_pubkey(x, key))
		goto fail;
	if (add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
	    add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
	    add_ext(x, x, NID_subject_key_identifier, "hash") < 0 ||
	    add_ext(x, x, NID_authority_key_identifier, "keyid:always") < 0)
		goto fail;
	if (!X509_sign(x, key, EVP_sha256()))
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

static struct tls_ca *ca_new(EVP_PKEY *key, X509 *cert, char *err, size_t errlen)
{
	struct tls_ca *ca = calloc(1, sizeof(*ca));

	if (!ca) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	ca->key = key;
	ca->cert = cert;
	ca->not_after = asn1_time_to_time(X509_get0_notAfter(cert));
	ca->leaf_key = new_p256_key();
	if (!ca->leaf_key || pthread_mutex_init(&ca->lock, NULL) != 0) {
		seterr(err, errlen, "cannot make the leaf key");
		EVP_PKEY_free(ca->leaf_key);
		free(ca);
		return NULL;
	}
	return ca;
}

static bool name_ok(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

struct tls_ca *tls_ca_create(const char *sandbox_name, char *err, size_t errlen)
{
	struct tls_ca *ca;
	EVP_PKEY *key;
	X509 *cert;

	if (!sandbox_name || !*sandbox_name || !name_ok(sandbox_name)) {
		seterr(err, errlen, "bad sandbox name for a CA");
		return NULL;
	}
	key = new_p256_key();
	if (!key) {
		seterr(err, errlen, "cannot make the CA key");
		return NULL;
	}
	cert = make_ca_cert(key, sandbox_name);
	if (!cert) {
		seterr(err, errlen, "cannot make the CA certificate");
		EVP_PKEY_free(key);
		return NULL;
	}
	ca = ca_new(key, cert, err, errlen);
	if (!ca) {
		X509_free(cert);
		EVP_PKEY_free(key);
	}
	return ca;
}

/* ---- files --------------------------------------------------------------- */

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/*
 * Writes @name in @dfd through "@name.tmp": created exclusively (a stale
 * temporary from a crash is removed first; O_NOFOLLOW|O_EXCL mean a
 * planted symlink is never written through), renamed. Not synced: the
 * CA only has to outlive the broker, not the machine (a sandbox's
 * namespace and bundle live in /run and go with a reboot), and an fsync
 * here was half of what registering a sandbox cost.
 */
static int write_file_at(int dfd, const char *name, const char *data,
			 size_t len, mode_t mode)
{
	char tmp[64];
	int fd, ret;

	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	if (unlinkat(dfd, tmp, 0) < 0 && errno != ENOENT)
		return -errno;
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    mode);
	if (fd < 0)
		return -errno;
	/* The umask may have taken bits off; set exactly what is meant. */
	if (fchmod(fd, mode) < 0) {
		ret = -errno;
		goto fail;
	}
	ret = write_all(fd, data, len);
	if (ret < 0)
		goto fail;
	if (close(fd) < 0) {
		fd = -1;
		ret = -errno;
		goto fail;
	}
	fd = -1;
	if (renameat(dfd, tmp, dfd, name) < 0) {
		ret = -errno;
		goto fail;
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlinkat(dfd, tmp, 0);
	return ret;
}

int tls_ca_save(const struct tls_ca *ca, const char *dir)
{
	BIO *kb = NULL, *cb = NULL;
	char *kp, *cp;
	long kl, cl;
	int dfd, ret = -ENOMEM;

	if (!ca || !dir)
		return -EINVAL;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	/* Secure-heap memory when there is one; cleared on free either way. */
	kb = BIO_new(BIO_s_secmem());
	cb = BIO_new(BIO_s_mem());
	if (!kb || !cb ||
	    !PEM_write_bio_PrivateKey(kb, ca->key, NULL, NULL, 0, NULL, NULL) ||
	    !PEM_write_bio_X509(cb, ca->cert))
		goto out;
	kl = BIO_get_mem_data(kb, &kp);
	cl = BIO_get_mem_data(cb, &cp);
	if (kl <= 0 || cl <= 0)
		goto out;
	/* Key first: a certificate on disk without its key is useless, a key
	 * without its certificate is refused by tls_ca_load(). */
	ret = write_file_at(dfd, CA_KEY_FILE, kp, (size_t)kl, 0600);
	if (ret == 0)
		ret = write_file_at(dfd, CA_CRT_FILE, cp, (size_t)cl, 0644);
out:
	BIO_free(kb);
	BIO_free(cb);
	close(dfd);
	ERR_clear_error();
	return ret;
}

/*
 * Reads a small regular file, not through a symlink, into memory from the
 * secure heap (when there is one).  @private refuses a file that group or
 * others may access.  The caller frees *buf with OPENSSL_secure_clear_free.
 */
static int read_small_at(int dfd, const char *name, bool private,
			 unsigned char **buf, size_t *len, char *err,
			 size_t errlen)
{
	struct stat st;
	unsigned char *b;
	size_t got = 0;
	int fd, ret;

	/* O_NONBLOCK: a FIFO planted here must not hang the broker. */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
				       O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		seterr(err, errlen, "`%s`: %s", name,
		       ret == -ELOOP ? "is a symlink" : strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		seterr(err, errlen, "`%s`: %s", name, strerror(-ret));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		seterr(err, errlen, "`%s`: not a regular file", name);
		goto fail;
	}
	if (private && (st.st_mode & 077)) {
		ret = -EPERM;
		seterr(err, errlen, "`%s`: mode %03o lets others read the key",
		       name, (unsigned)(st.st_mode & 0777));
		goto fail;
	}
	if (st.st_size <= 0 || st.st_size > CA_FILE_MAX) {
		ret = -EFBIG;
		seterr(err, errlen, "`%s`: empty or larger than %d bytes", name,
		       CA_FILE_MAX);
		goto fail;
	}
	b = OPENSSL_secure_malloc((size_t)st.st_size);
	if (!b) {
		ret = -ENOMEM;
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, b + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ret = r < 0 ? -errno : -EIO;
			OPENSSL_secure_clear_free(b, (size_t)st.st_size);
			seterr(err, errlen, "`%s`: short read", name);
			goto fail;
		}
		got += (size_t)r;
	}
	close(fd);
	*buf = b;
	*len = got;
	return 0;
fail:
	close(fd);
	return ret;
}

/* An encrypted key is not ours: never prompt on a terminal for it. */
static int no_password(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

struct tls_ca *tls_ca_load(const char *dir, char *err, size_t errlen)
{
	unsigned char *kbuf = NULL, *cbuf = NULL;
	size_t klen = 0, clen = 0;
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	struct tls_ca *ca = NULL;
	BIO *b;
	int dfd;

	if (!dir) {
		seterr(err, errlen, "no directory");
		return NULL;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		seterr(err, errlen, "`%s`: %s", dir, strerror(errno));
		return NULL;
	}
	if (read_small_at(dfd, CA_KEY_FILE, true, &kbuf, &klen, err, errlen) < 0 ||
	    read_small_at(dfd, CA_CRT_FILE, false, &cbuf, &clen, err, errlen) < 0)
		goto out;

	b = BIO_new_mem_buf(kbuf, (int)klen);
	if (b)
		key = PEM_read_bio_PrivateKey(b, NULL, no_password, NULL);
	BIO_free(b);
	if (!key || !EVP_PKEY_is_a(key, "EC")) {
		seterr(err, errlen, "`%s/%s`: not an EC private key", dir, CA_KEY_FILE);
		goto out;
	}
	b = BIO_new_mem_buf(cbuf, (int)clen);
	if (b)
		cert = PEM_read_bio_X509(b, NULL, no_password, NULL);
	BIO_free(b);
	if (!cert) {
		seterr(err, errlen, "`%s/%s`: not a PEM certificate", dir, CA_CRT_FILE);
		goto out;
	}
	if (X509_check_private_key(cert, key) != 1) {
		seterr(err, errlen, "`%s`: certificate and key do not match", dir);
		goto out;
	}
	if (X509_check_ca(cert) < 1) {
		seterr(err, errlen, "`%s/%s`: not a CA certificate", dir, CA_CRT_FILE);
		goto out;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
		seterr(err, errlen, "`%s/%s`: the CA certificate has expired", dir,
		       CA_CRT_FILE);
		goto out;
	}
	ca = ca_new(key, cert, err, errlen);
	if (ca)
		key = NULL, cert = NULL;
out:
	EVP_PKEY_free(key);
	X509_free(cert);
	if (kbuf)
		OPENSSL_secure_clear_free(kbuf, klen);
	if (cbuf)
		OPENSSL_secure_clear_free(cbuf, clen);
	close(dfd);
	ERR_clear_error();
	return ca;
}

int tls_ca_cert_pem(const struct tls_ca *ca, char **pem)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p, *out;
	long n;

	*pem = NULL;
	if (!b || !PEM_write_bio_X509(b, ca->cert)) {
		BIO_free(b);
		return -ENOMEM;
	}
	n = BIO_get_mem_data(b, &p);
	out = n > 0 ? malloc((size_t)n + 1) : NULL;
	if (!out) {
		BIO_free(b);
		return -ENOMEM;
	}
	memcpy(out, p, (size_t)n);
	out[n] = '\0';
	BIO_free(b);
	*pem = out;
	return 0;
}

/* ---- leaves -------------------------------------------------------------- */

/*
 * Canonical host: an IPv4 or IPv6 literal (brackets dropped), or DNS
 * labels of letters, digits, '-' and '_' (1..63 each, 253 in all),
 * lowercased, one trailing dot dropped.  Anything else is refused: the
 * name goes into a certificate.
 */
static int host_parse(const char *in, struct host *h)
{
	size_t len, i, given;

	memset(h, 0, sizeof(*h));
	if (!in)
		return -EINVAL;
	len = strlen(in);
	if (len >= 2 && in[0] == '[' && in[len - 1] == ']') {
		in++;
		len -= 2;
		if (len > HOST_MAX)
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
	if (len == 0 || len > HOST_MAX)
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

static int add_san(X509 *x, const struct host *h)
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

static X509 *make_leaf(const struct tls_ca *ca, const struct host *h,
		       time_t now, time_t *not_after)
{
	X509 *x = X509_new();
	X509_NAME *name;
	time_t end = now + (time_t)TLS_LEAF_DAYS * DAY_SEC;

	if (!x)
		return NULL;
	if (ca->not_after && end > ca->not_after)
		end = ca->not_after;
	name = X509_get_subject_name(x);
	/* The SAN is what clients check; the CN is for people, and holds
	 * 64 characters at most. */
	if (!X509_set_version(x, X509_VERSION_3) || set_random_serial(x) < 0 ||
	    set_validity(x, now - TLS_BACKDATE_SEC, end) < 0 ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
					(const unsigned char *)(strlen(h->name) <= 64
						? h->name : "sluice intercepted host"),
					-1, -1, 0) ||
	    !X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) ||
	    !X509_set_pubkey(x, ca->leaf_key))
		goto fail;
	if (add_ext(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
	    add_ext(x, ca->cert, NID_key_usage, "critical,digitalSignature") < 0 ||
	    add_ext(x, ca->cert, NID_ext_key_usage, "serverAuth") < 0 ||
	    add_ext(x, ca->cert, NID_subject_key_identifier, "hash") < 0 ||
	    add_ext(x, ca->cert, NID_authority_key_identifier, "keyid:always") < 0 ||
	    add_san(x, h) < 0)
		goto fail;
	if (!X509_sign(x, ca->key, EVP_sha256()))
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

static SSL_CTX *make_leaf_ctx(const struct tls_ca *ca, const struct host *h,
			      time_t now, time_t *refresh_at)
{
	SSL_CTX *ctx;
	time_t end = 0;
	X509 *leaf = make_leaf(ca, h, now, &end);

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
	    SSL_CTX_use_PrivateKey(ctx, ca->leaf_key) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1)
		goto fail;
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
				 SSL_OP_CIPHER_SERVER_PREFERENCE |
				 SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	X509_free(leaf);
	/* A leaf capped by a CA in its last day is kept to its end rather
	 * than re-minted on every connection. */
	*refresh_at = end - DAY_SEC > now ? end - DAY_SEC : end;
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
static struct leaf *cache_find(struct tls_ca *ca, const char *host, uint64_t hash)
{
	struct leaf *e;

	for (e = ca->buckets[hash & (CACHE_BUCKETS - 1)]; e; e = e->hnext)
		if (e->hash == hash && strcmp(e->host, host) == 0)
			return e;
	return NULL;
}

static void lru_unlink(struct tls_ca *ca, struct leaf *e)
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

static void lru_push_front(struct tls_ca *ca, struct leaf *e)
{
	e->prev = NULL;
	e->next = ca->head;
	if (ca->head)
		ca->head->prev = e;
	ca->head = e;
	if (!ca->tail)
		ca->tail = e;
}

static void cache_remove(struct tls_ca *ca, struct leaf *e)
{
	struct leaf **pp = &ca->buckets[e->hash & (CACHE_BUCKETS - 1)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	lru_unlink(ca, e);
	ca->n--;
}

SSL_CTX *tls_leaf_ctx(struct tls_ca *ca, const char *host)
{
	struct host h;
	struct leaf *e;
	SSL_CTX *ctx, *ret = NULL;
	time_t now = time(NULL), refresh_at = 0;
	uint64_t hash;

	if (!ca || host_parse(host, &h) < 0)
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
		e->hnext = ca->buckets[hash & (CACHE_BUCKETS - 1)];
		ca->buckets[hash & (CACHE_BUCKETS - 1)] = e;
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

void tls_ca_free(struct tls_ca *ca)
{
	struct leaf *e, *next;

	if (!ca)
		return;
	for (e = ca->head; e; e = next) {
		next = e->next;
		SSL_CTX_free(e->ctx);
		free(e);
	}
	pthread_mutex_destroy(&ca->lock);
	EVP_PKEY_free(ca->leaf_key);
	EVP_PKEY_free(ca->key);
	X509_free(ca->cert);
	free(ca);
}

/* ---- upstream ------------------------------------------------------------ */

SSL_CTX *tls_upstream_ctx(const char *ca_file, char *err, size_t errlen)
{
	static const unsigned char alpn[] = "\x08http/1.1";
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx) {
		seterr(err, errlen, "cannot make a TLS client context");
		return NULL;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
		seterr(err, errlen, "cannot set the TLS version");
		goto fail;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (ca_file && *ca_file) {
		if (SSL_CTX_load_verify_file(ctx, ca_file) != 1) {
			seterr(err, errlen, "upstream CA bundle `%s`", ca_file);
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		/* Reads SSL_CERT_FILE / SSL_CERT_DIR when set. */
		seterr(err, errlen, "system trust store");
		goto fail;
	}
	/* Returns 0 on success, unlike the rest of the API. */
	if (SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) != 0) {
		seterr(err, errlen, "cannot set ALPN");
		goto fail;
	}
	ERR_clear_error();
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

int tls_upstream_prepare(SSL *ssl, const char *host)
{
	struct host h;

	if (!ssl || host_parse(host, &h) < 0)
		return -EINVAL;
	if (h.is_ip) {
		if (X509_VERIFY_PARAM_set1_ip(SSL_get0_param(ssl), h.ip,
					      (size_t)h.ip_len) != 1)
			goto fail;
		return 0;
	}
	/* No partial wildcards ("f*.example.com"): RFC 6125 leaves them to
	 * the client's taste, and ours is no. */
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (SSL_set_tlsext_host_name(ssl, h.name) != 1 ||
	    SSL_set1_host(ssl, h.name) != 1)
		goto fail;
	return 0;
fail:
	ERR_clear_error();
	return -ENOMEM;
}
