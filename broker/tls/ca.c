// SPDX-License-Identifier: MIT
/* The per-sandbox CA: its key and certificate, made, saved and loaded. */

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
 * expected to exist) and cannot sign other CAs (pathlen:0).  The leaves
 * it signs, and their cache, are leaf.c's.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#include "broker/keys/keys.h"
#include "broker/tls/tls_internal.h"
#include "common/file.h"
#include "common/sumfile.h"

#define CA_KEY_FILE "ca.key"
#define CA_CRT_FILE "ca.crt"
#define CA_FILE_MAX (64 * 1024)
/* The checksums of the two, beside them (the PEM files stay plain PEM for
 * whoever reads them): "ca.key HEX" and "ca.crt HEX", framed. */
#define CA_SUM_FILE "ca.sum"
#define CA_SUM_KIND "ca-sums"

/* Appends OpenSSL's newest queued reason, then empties the queue (an
 * error left there would be appended to the next, unrelated message). */
int tls_err_at(struct sl_err *err, const char *file, unsigned line, const char *func, int errnum,
	       const char *fmt, ...)
{
	unsigned long e = ERR_peek_last_error();
	char msg[SL_ERR_MSG_MAX], why[256];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (e) {
		ERR_error_string_n(e, why, sizeof(why));
		r = sl_err_set_at(err, file, line, func, errnum, "%s: %s", msg, why);
	} else {
		r = sl_err_set_at(err, file, line, func, errnum, "%s", msg);
	}
	ERR_clear_error();
	return r;
}

/* 128 random bits, never zero; DER may add a leading zero octet. */
int tls_set_random_serial(X509 *x)
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

int tls_add_ext(X509 *x, X509 *issuer, int nid, const char *value)
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

int tls_set_validity(X509 *x, time_t from, time_t to)
{
	if (!ASN1_TIME_set(X509_getm_notBefore(x), from) ||
	    !ASN1_TIME_set(X509_getm_notAfter(x), to))
		return -ENOMEM;
	return 0;
}

time_t tls_asn1_time(const ASN1_TIME *t)
{
	struct tm tm;

	if (!ASN1_TIME_to_tm(t, &tm))
		return 0;
	return timegm(&tm);
}

X509 *tls_ca_make_cert(EVP_PKEY *key, const char *sandbox_name)
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
		     (int)(sizeof(cn) - 1 - strlen("sluice sandbox  CA")), sandbox_name);
	if (n < 0)
		goto fail;
	name = X509_get_subject_name(x);
	if (!X509_set_version(x, X509_VERSION_3) || tls_set_random_serial(x) < 0 ||
	    tls_set_validity(x, now - TLS_BACKDATE_SEC, now + (time_t)TLS_CA_DAYS * TLS_DAY_SEC) <
		    0 ||
	    !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"sluice",
					-1, -1, 0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
					0) ||
	    !X509_set_issuer_name(x, name) || tls_set_pubkey(x, key) < 0)
		goto fail;
	if (tls_add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
	    tls_add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
	    tls_add_ext(x, x, NID_subject_key_identifier, "hash") < 0 ||
	    tls_add_ext(x, x, NID_authority_key_identifier, "keyid:always") < 0)
		goto fail;
	if (!X509_sign(x, key, EVP_sha256()))
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* A CA of @der (taken: freed here on failure), and with @key (local) also
 * of @cert, its parsed form (taken only on success). */
static struct tls_ca *ca_new(EVP_PKEY *key, X509 *cert, unsigned char *der, size_t der_len,
			     struct sl_err *err)
{
	struct tls_ca *ca = calloc(1, sizeof(*ca));

	if (!ca) {
		tls_err(err, ENOMEM, "out of memory");
		free(der);
		return NULL;
	}
	ca->key = key;
	ca->cert = cert;
	ca->der = der;
	ca->der_len = der_len;
	ca->not_after = cert ? tls_asn1_time(X509_get0_notAfter(cert)) : 0;
	ca->leaf_key = tls_new_p256_key();
	if (!ca->leaf_key || pthread_mutex_init(&ca->lock, NULL) != 0) {
		tls_err(err, 0, "cannot make the leaf key");
		EVP_PKEY_free(ca->leaf_key);
		free(der);
		free(ca);
		return NULL;
	}
	return ca;
}

/* @cert's DER, malloc'd (the caller frees it), its length in *@len; NULL
 * when it cannot be encoded. */
static unsigned char *cert_der(X509 *cert, size_t *len)
{
	unsigned char *der = NULL, *p;
	int n = i2d_X509(cert, NULL);

	if (n > 0)
		der = malloc((size_t)n);
	p = der;
	if (der && i2d_X509(cert, &p) != n) {
		free(der);
		der = NULL;
	}
	ERR_clear_error();
	*len = der ? (size_t)n : 0;
	return der;
}

/* The id of a certificate of @len bytes of DER (tls_cert_id()'s: their
 * SHA-256). Return: true. */
static bool der_id(const unsigned char *der, size_t len, unsigned char id[32])
{
	unsigned int n = 0;
	bool ok = EVP_Digest(der, len, id, &n, EVP_sha256(), NULL) && n == 32;

	ERR_clear_error();
	return ok;
}

/* A local CA of @key and @cert (both taken on success). */
static struct tls_ca *local_ca(EVP_PKEY *key, X509 *cert, struct sl_err *err)
{
	size_t n;
	unsigned char *der = cert_der(cert, &n);

	if (!der) {
		tls_err(err, 0, "cannot encode the CA certificate");
		return NULL;
	}
	return ca_new(key, cert, der, n, err);
}

/* Writes @ca's certificate to @b as PEM, from its DER. Return: true if
 * it did. */
static bool ca_pem_bio(BIO *b, const struct tls_ca *ca)
{
	return ca->der_len <= LONG_MAX &&
	       PEM_write_bio(b, PEM_STRING_X509, "", ca->der, (long)ca->der_len) > 0;
}

static bool name_ok(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

int tls_cert_id(X509 *cert, unsigned char id[32])
{
	unsigned int n = 0;

	if (X509_digest(cert, EVP_sha256(), id, &n) != 1 || n != 32) {
		ERR_clear_error();
		return -EIO;
	}
	return 0;
}

/* A CA whose key the key process holds: @der, its certificate (taken),
 * and its id, @known or else hashed here. */
static struct tls_ca *remote_ca(unsigned char *der, size_t len, const unsigned char *known,
				struct sl_err *err)
{
	unsigned char id[32];
	struct tls_ca *ca;

	if (known) {
		memcpy(id, known, sizeof(id));
	} else if (!der_id(der, len, id)) {
		tls_err(err, 0, "cannot hash the CA certificate");
		free(der);
		return NULL;
	}
	ca = ca_new(NULL, NULL, der, len, err);
	if (!ca)
		return NULL;
	ca->remote = true;
	memcpy(ca->id, id, sizeof(id));
	return ca;
}

/* Is @der one DER SEQUENCE, @len bytes long with its header? What the key
 * process answered is not parsed (see struct tls_ca's @der); this is only
 * to refuse an answer that cannot be a certificate. */
static bool der_one_sequence(const unsigned char *der, size_t len)
{
	const unsigned char *p = der;
	long n = 0;
	int tag = 0, xclass = 0;

	if (len > LONG_MAX || (ASN1_get_object(&p, &n, &tag, &xclass, (long)len) & 0x80) ||
	    tag != V_ASN1_SEQUENCE || xclass != V_ASN1_UNIVERSAL) {
		ERR_clear_error();
		return false;
	}
	return (size_t)(p - der) + (size_t)n == len;
}

static struct tls_ca *remote_create(const char *sandbox_name, struct sl_err *err)
{
	unsigned char *der = NULL, id[32];
	struct tls_ca *ca = NULL;
	size_t len = 0;
	int r;

	r = keys_ca_create(sandbox_name, &der, &len);
	if (r < 0) {
		tls_err(err, r, "the key process made no CA: %s", strerror(-r));
		return NULL;
	}
	/* Its id, to drop the key the key process made, and wrote, should
	 * anything below fail. */
	if (!der_id(der, len, id)) {
		tls_err(err, 0, "cannot hash the CA certificate");
		free(der);
		return NULL;
	}
	if (!der_one_sequence(der, len)) {
		tls_err(err, 0, "the key process answered with no certificate");
		free(der);
	} else {
		ca = remote_ca(der, len, id, err);
	}
	if (!ca)
		(void)keys_ca_drop(id);
	else
		ca->key_file_loose = true;
	return ca;
}

struct tls_ca *tls_ca_create(const char *sandbox_name, struct sl_err *err)
{
	struct tls_ca *ca;
	EVP_PKEY *key;
	X509 *cert;

	if (!sandbox_name || !*sandbox_name || !name_ok(sandbox_name)) {
		tls_err(err, 0, "bad sandbox name for a CA");
		return NULL;
	}
	if (keys_active())
		return remote_create(sandbox_name, err);
	key = tls_new_p256_key();
	if (!key) {
		tls_err(err, 0, "cannot make the CA key");
		return NULL;
	}
	cert = tls_ca_make_cert(key, sandbox_name);
	if (!cert) {
		tls_err(err, 0, "cannot make the CA certificate");
		EVP_PKEY_free(key);
		return NULL;
	}
	ca = local_ca(key, cert, err);
	if (!ca) {
		X509_free(cert);
		EVP_PKEY_free(key);
	}
	return ca;
}

/* ---- files --------------------------------------------------------------- */

/*
 * The CA's files are written with common/file.h's one writer: DIR/NAME.tmp
 * created afresh, written, closed and renamed, each step checked, so a
 * reader sees the old file or the new one whole. Not synced: the CA only
 * has to outlive the broker, not the machine (a sandbox's namespace and
 * bundle live in /run and go with a reboot), and an fsync here was half of
 * what registering a sandbox cost.
 */
static int write_file_in(const char *dir, const char *name, const char *data, size_t len,
			 mode_t mode)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	return file_write_atomic(path, data, len, mode);
}

/* Writes DIR/ca.sum: the sums of the key's (@key_sum; NULL when the key
 * process holds the key, not DIR) and the certificate's bytes. */
static int write_sums(const char *dir, const uint64_t *key_sum, uint64_t crt_sum)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	struct sumfile_writer w;
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/%s", dir, CA_SUM_FILE) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	f = file_create_tmp(path, 0600, tmp, sizeof(tmp));
	if (!f)
		return -errno;
	sumfile_begin(&w, f, CA_SUM_KIND);
	if (key_sum)
		sumfile_line(&w, "%s %016llx", CA_KEY_FILE, (unsigned long long)*key_sum);
	sumfile_line(&w, "%s %016llx", CA_CRT_FILE, (unsigned long long)crt_sum);
	return sumfile_commit(&w, tmp, path);
}

/* The key process writes the key in its own directory (asked first: a
 * certificate without its key is useless); DIR gets the certificate and
 * its sum. */
static int remote_save(struct tls_ca *ca, const char *dir)
{
	BIO *cb = BIO_new(BIO_s_mem());
	char *cp;
	long cl;
	int ret = -ENOMEM;

	if (!cb || !ca_pem_bio(cb, ca))
		goto out;
	cl = BIO_get_mem_data(cb, &cp);
	if (cl <= 0)
		goto out;
	/* A CA made here has its key file already (CA_CREATE wrote it). */
	ret = ca->key_file_loose ? 0 : keys_ca_save(ca->id);
	if (ret == 0)
		ret = write_file_in(dir, CA_CRT_FILE, cp, (size_t)cl, 0640);
	if (ret == 0)
		ret = write_sums(dir, NULL, sumfile_sum(cp, (size_t)cl));
	if (ret == 0)
		ca->key_file_loose = false;
out:
	BIO_free(cb);
	ERR_clear_error();
	return ret;
}

int tls_ca_save(struct tls_ca *ca, const char *dir)
{
	BIO *kb = NULL, *cb = NULL;
	char *kp, *cp;
	long kl, cl;
	int ret = -ENOMEM;

	if (!ca || !dir)
		return -EINVAL;
	if (ca->remote)
		return remote_save(ca, dir);
	/* Secure-heap memory when there is one; cleared on free either way. */
	kb = BIO_new(BIO_s_secmem());
	cb = BIO_new(BIO_s_mem());
	if (!kb || !cb || !PEM_write_bio_PrivateKey(kb, ca->key, NULL, NULL, 0, NULL, NULL) ||
	    !ca_pem_bio(cb, ca))
		goto out;
	kl = BIO_get_mem_data(kb, &kp);
	cl = BIO_get_mem_data(cb, &cp);
	if (kl <= 0 || cl <= 0)
		goto out;
	/* Key first: a certificate on disk without its key is useless, a key
	 * without its certificate is refused by tls_ca_load(). */
	ret = write_file_in(dir, CA_KEY_FILE, kp, (size_t)kl, 0600);
	if (ret == 0)
		ret = write_file_in(dir, CA_CRT_FILE, cp, (size_t)cl, 0640);
	if (ret == 0) {
		uint64_t ks = sumfile_sum(kp, (size_t)kl);

		ret = write_sums(dir, &ks, sumfile_sum(cp, (size_t)cl));
	}
out:
	BIO_free(kb);
	BIO_free(cb);
	ERR_clear_error();
	return ret;
}

/*
 * Reads a small regular file, not through a symlink, into memory from the
 * secure heap (when there is one).  @private refuses a file that group or
 * others may access.  The caller frees *buf with OPENSSL_secure_clear_free.
 */
int tls_read_small_at(int dfd, const char *name, bool private, unsigned char **buf, size_t *len,
		      struct sl_err *err)
{
	struct stat st;
	unsigned char *b;
	size_t got = 0;
	int fd, ret;

	/* O_NONBLOCK: a FIFO planted here must not hang the broker. */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		tls_err(err, ret, "`%s`: %s", name,
			ret == -ELOOP ? "is a symlink" : strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		tls_err(err, ret, "`%s`: %s", name, strerror(-ret));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		tls_err(err, 0, "`%s`: not a regular file", name);
		goto fail;
	}
	if (private && (st.st_mode & 077)) {
		ret = -EPERM;
		tls_err(err, 0, "`%s`: mode %03o lets others read the key", name,
			(unsigned)(st.st_mode & 0777));
		goto fail;
	}
	if (st.st_size <= 0 || st.st_size > CA_FILE_MAX) {
		ret = -EFBIG;
		tls_err(err, 0, "`%s`: empty or larger than %d bytes", name, CA_FILE_MAX);
		goto fail;
	}
	b = OPENSSL_secure_malloc((size_t)st.st_size);
	if (!b) {
		ret = -ENOMEM;
		tls_err(err, ENOMEM, "out of memory");
		goto fail;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, b + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ret = r < 0 ? -errno : -EIO;
			OPENSSL_secure_clear_free(b, (size_t)st.st_size);
			tls_err(err, ret, "`%s`: short read", name);
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

/* An encrypted key is not ours: never prompt on a terminal for it (the
 * key process and the JWT keys use this one too). */
int tls_no_password(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

/* The certificate from DIR, its key in the key process (which checks
 * that the two match, and that it is a CA in date). */
static struct tls_ca *remote_load(int dfd, const char *dir, struct sl_err *err)
{
	unsigned char *cbuf = NULL, *der;
	size_t clen = 0, n;
	X509 *cert = NULL;
	BIO *b;
	int r;

	if (tls_read_small_at(dfd, CA_CRT_FILE, false, &cbuf, &clen, err) < 0)
		return NULL;
	b = BIO_new_mem_buf(cbuf, (int)clen);
	if (b)
		cert = PEM_read_bio_X509(b, NULL, tls_no_password, NULL);
	BIO_free(b);
	OPENSSL_secure_clear_free(cbuf, clen);
	if (!cert) {
		tls_err(err, 0, "`%s/%s`: not a PEM certificate", dir, CA_CRT_FILE);
		return NULL;
	}
	der = cert_der(cert, &n);
	X509_free(cert);
	if (!der) {
		tls_err(err, 0, "`%s/%s`: cannot encode", dir, CA_CRT_FILE);
		return NULL;
	}
	r = keys_ca_load(der, n);
	if (r < 0) {
		/* The key process's answers (broker/keys/keys_internal.h),
		 * not a failed call: errno 0 for them. */
		const char *why = r == -ENOENT ? "holds no key for it"
				  : r == -EKEYREJECTED
					  ? "refuses it (not a CA in date, or not its key's)"
				  : r == -EINVAL ? "cannot use its key file: not a regular file"
				  : r == -ELOOP	 ? "cannot use its key file: a symlink"
				  : r == -EPERM	 ? "cannot use its key file: others may read it"
				  : r == -EFBIG	 ? "cannot use its key file: empty or too large"
						 : NULL;

		tls_err(err, why ? 0 : r, "`%s/%s`: the key process %s", dir, CA_CRT_FILE,
			why ? why : strerror(-r));
		free(der);
		return NULL;
	}
	return remote_ca(der, n, NULL, err);
}

struct tls_ca *tls_ca_load(const char *dir, struct sl_err *err)
{
	unsigned char *kbuf = NULL, *cbuf = NULL;
	size_t klen = 0, clen = 0;
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	struct tls_ca *ca = NULL;
	BIO *b;
	int dfd;

	if (!dir) {
		tls_err(err, 0, "no directory");
		return NULL;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		tls_err(err, errno, "`%s`: %s", dir, strerror(errno));
		return NULL;
	}
	if (keys_active()) {
		ca = remote_load(dfd, dir, err);
		close(dfd);
		return ca;
	}
	if (tls_read_small_at(dfd, CA_KEY_FILE, true, &kbuf, &klen, err) < 0 ||
	    tls_read_small_at(dfd, CA_CRT_FILE, false, &cbuf, &clen, err) < 0)
		goto out;

	b = BIO_new_mem_buf(kbuf, (int)klen);
	if (b)
		key = PEM_read_bio_PrivateKey(b, NULL, tls_no_password, NULL);
	BIO_free(b);
	if (!key || !EVP_PKEY_is_a(key, "EC")) {
		tls_err(err, 0, "`%s/%s`: not an EC private key", dir, CA_KEY_FILE);
		goto out;
	}
	b = BIO_new_mem_buf(cbuf, (int)clen);
	if (b)
		cert = PEM_read_bio_X509(b, NULL, tls_no_password, NULL);
	BIO_free(b);
	if (!cert) {
		tls_err(err, 0, "`%s/%s`: not a PEM certificate", dir, CA_CRT_FILE);
		goto out;
	}
	if (X509_check_private_key(cert, key) != 1) {
		tls_err(err, 0, "`%s`: certificate and key do not match", dir);
		goto out;
	}
	if (X509_check_ca(cert) < 1) {
		tls_err(err, 0, "`%s/%s`: not a CA certificate", dir, CA_CRT_FILE);
		goto out;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
		tls_err(err, 0, "`%s/%s`: the CA certificate has expired", dir, CA_CRT_FILE);
		goto out;
	}
	ca = local_ca(key, cert, err);
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

struct sums {
	unsigned long long key, crt;
	unsigned seen;
};

static int sum_line(const char *s, size_t len, bool ok, void *arg)
{
	struct sums *x = arg;
	char line[64], *sp, *end;
	unsigned long long v;
	const char *name = line;

	if (!ok || len >= sizeof(line))
		return 0;
	memcpy(line, s, len);
	line[len] = '\0';
	sp = strchr(line, ' ');
	if (!sp || strlen(sp + 1) != 16)
		return 0;
	*sp = '\0';
	errno = 0;
	v = strtoull(sp + 1, &end, 16);
	if (errno || *end)
		return 0;
	if (!strcmp(name, CA_KEY_FILE)) {
		x->key = v;
		x->seen |= 1;
	} else if (!strcmp(name, CA_CRT_FILE)) {
		x->crt = v;
		x->seen |= 2;
	}
	return 0;
}

int tls_ca_check_sums(const char *dir, char *what, size_t whatlen)
{
	unsigned char *kbuf = NULL, *cbuf = NULL, *sbuf = NULL;
	size_t klen = 0, clen = 0, slen = 0;
	struct sumfile_result res;
	struct sums x = { 0 };
	bool remote = keys_active();
	int dfd, r;

	what[0] = '\0';
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	r = tls_read_small_at(dfd, CA_SUM_FILE, false, &sbuf, &slen, NULL);
	if (r < 0) {
		close(dfd);
		return r == -ENOENT ? -ENOENT : -EBADMSG;
	}
	sumfile_parse((const char *)sbuf, slen, CA_SUM_KIND, false, sum_line, &x, &res);
	OPENSSL_secure_clear_free(sbuf, slen);
	/* With the key process, the key is not here (an older broker's sum
	 * of it is left unchecked: the key process took the key over). */
	if (res.status != SUMFILE_OK || !(x.seen & 2) || (!remote && x.seen != 3)) {
		close(dfd);
		return -EBADMSG;
	}
	r = 0;
	if (!remote && (tls_read_small_at(dfd, CA_KEY_FILE, false, &kbuf, &klen, NULL) < 0 ||
			sumfile_sum((const char *)kbuf, klen) != x.key)) {
		snprintf(what, whatlen, "%s", CA_KEY_FILE);
		r = -EILSEQ;
	}
	if (tls_read_small_at(dfd, CA_CRT_FILE, false, &cbuf, &clen, NULL) < 0 ||
	    sumfile_sum((const char *)cbuf, clen) != x.crt) {
		size_t n = strlen(what);

		snprintf(what + n, whatlen - n, "%s%s", n ? " and " : "", CA_CRT_FILE);
		r = -EILSEQ;
	}
	if (kbuf)
		OPENSSL_secure_clear_free(kbuf, klen);
	if (cbuf)
		OPENSSL_secure_clear_free(cbuf, clen);
	close(dfd);
	ERR_clear_error();
	return r;
}

int tls_ca_write_sums(const char *dir)
{
	unsigned char *kbuf = NULL, *cbuf = NULL;
	size_t klen = 0, clen = 0;
	int dfd, r;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	r = keys_active() ? 0 : tls_read_small_at(dfd, CA_KEY_FILE, true, &kbuf, &klen, NULL);
	if (r == 0)
		r = tls_read_small_at(dfd, CA_CRT_FILE, false, &cbuf, &clen, NULL);
	if (r == 0) {
		uint64_t ks = kbuf ? sumfile_sum((const char *)kbuf, klen) : 0;

		r = write_sums(dir, kbuf ? &ks : NULL, sumfile_sum((const char *)cbuf, clen));
	}
	if (kbuf)
		OPENSSL_secure_clear_free(kbuf, klen);
	if (cbuf)
		OPENSSL_secure_clear_free(cbuf, clen);
	close(dfd);
	return r;
}

int tls_ca_cert_pem(const struct tls_ca *ca, char **pem)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p, *out;
	long n;

	*pem = NULL;
	if (!b || !ca_pem_bio(b, ca)) {
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

int tls_ca_delete_saved(const char *dir)
{
	unsigned char *cbuf = NULL, id[32];
	size_t clen = 0;
	X509 *cert = NULL;
	BIO *b;
	int dfd, r;

	if (!keys_active())
		return 0;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	r = tls_read_small_at(dfd, CA_CRT_FILE, false, &cbuf, &clen, NULL);
	close(dfd);
	if (r < 0)
		return r;
	b = BIO_new_mem_buf(cbuf, (int)clen);
	if (b)
		cert = PEM_read_bio_X509(b, NULL, tls_no_password, NULL);
	BIO_free(b);
	OPENSSL_secure_clear_free(cbuf, clen);
	r = cert ? tls_cert_id(cert, id) : -EINVAL;
	X509_free(cert);
	ERR_clear_error();
	return r < 0 ? r : keys_ca_drop(id);
}

int tls_ca_delete(const struct tls_ca *ca)
{
	unsigned char id[32];

	/* A local key goes with DIR (sandbox.c removes it). */
	return tls_ca_key_id(ca, id) ? tls_ca_delete_id(id) : 0;
}

bool tls_ca_key_id(const struct tls_ca *ca, unsigned char id[32])
{
	if (!ca || !ca->remote)
		return false;
	memcpy(id, ca->id, sizeof(ca->id));
	return true;
}

int tls_ca_delete_id(const unsigned char id[32])
{
	return keys_ca_drop(id);
}

int tls_ca_sweep(void)
{
	return keys_active() ? keys_ca_sweep() : 0;
}

void tls_ca_free(struct tls_ca *ca)
{
	if (!ca)
		return;
	/* Out of the key process's memory (a saved key stays on its disk;
	 * one that no saved certificate names goes). */
	if (ca->remote)
		(void)(ca->key_file_loose ? keys_ca_drop(ca->id) : keys_ca_forget(ca->id));
	tls_leaf_cache_free(ca);
	pthread_mutex_destroy(&ca->lock);
	EVP_PKEY_free(ca->leaf_key);
	EVP_PKEY_free(ca->key);
	X509_free(ca->cert);
	free(ca->der);
	free(ca);
}
