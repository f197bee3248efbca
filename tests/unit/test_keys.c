// SPDX-License-Identifier: MIT
/* Unit tests for broker/keys/: the request parser (every message hostile)
 * and the key process's answers, in this process, on a scratch key
 * directory. */

#include <errno.h>
#include <fcntl.h>
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

#include <cmocka.h>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "broker/keys/keys_internal.h"

static char tmpdir[64];
static int dirfd_ = -1;

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/sluice-keys.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	dirfd_ = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	keys_server_init(dirfd_);
	return dirfd_ < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	keys_server_reset();
	keys_server_init(-1);
	close(dirfd_);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* A message: the op, then @n bytes of @body. */
static size_t msg(unsigned char *out, uint32_t op, const void *body, size_t n)
{
	memcpy(out, &op, 4);
	if (n)
		memcpy(out + 4, body, n);
	return 4 + n;
}

static void test_parse_refusals(void **state)
{
	static unsigned char big[KEYS_MSG_MAX + 2];
	static const unsigned char zeros[KEYS_TBS_MAX + 8];
	unsigned char m[600] = { 0 }, id[KEYS_ID_LEN + 1] = { 1 };
	struct keys_req q;
	char name[KEYS_NAME_MAX + 2];
	size_t n;
	uint16_t hl;

	(void)state;
	assert_int_equal(keys_req_parse(m, 0, &q), -EINVAL);
	assert_int_equal(keys_req_parse(m, 3, &q), -EINVAL);
	assert_int_equal(keys_req_parse(m, msg(m, 0, NULL, 0), &q), -EOPNOTSUPP);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_OP_END, NULL, 0), &q), -EOPNOTSUPP);
	assert_int_equal(keys_req_parse(m, msg(m, 0xffffffffu, NULL, 0), &q), -EOPNOTSUPP);
	assert_int_equal(keys_req_parse(big, sizeof(big), &q), -EMSGSIZE);
	/* PING: nothing after the op. */
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_PING, NULL, 0), &q), 0);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_PING, "x", 1), &q), -EINVAL);

	/* CA_CREATE: a sandbox name as the broker takes it. */
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_CREATE, "demo-1", 6), &q), 0);
	assert_string_equal(q.name, "demo-1");
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_CREATE, "", 0), &q), -EINVAL);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_CREATE, "a/b", 3), &q), -EINVAL);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_CREATE, "a\0b", 3), &q), -EINVAL);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_CREATE, "-a", 2), &q), -EINVAL);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_CREATE, "..", 2), &q), -EINVAL);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_CREATE, "a b", 3), &q), -EINVAL);
	memset(name, 'a', sizeof(name));
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_CREATE, name, KEYS_NAME_MAX), &q), 0);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_CREATE, name, KEYS_NAME_MAX + 1), &q),
			 -EMSGSIZE);

	/* An id is exactly KEYS_ID_LEN bytes. */
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_SAVE, id, KEYS_ID_LEN), &q), 0);
	assert_memory_equal(q.id, id, KEYS_ID_LEN);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_DROP, id, KEYS_ID_LEN - 1), &q), -EINVAL);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_FORGET, id, KEYS_ID_LEN + 1), &q),
			 -EINVAL);
	/* CA_LOAD: some DER, bounded. */
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_LOAD, NULL, 0), &q), -EINVAL);
	assert_int_equal(keys_req_parse(big, msg(big, KEYS_CA_LOAD, zeros, KEYS_DER_MAX + 1), &q),
			 -EMSGSIZE);

	/* LEAF_SIGN: id, host length, host, public key. */
	n = msg(m, KEYS_LEAF_SIGN, id, KEYS_ID_LEN);
	hl = 5;
	memcpy(m + n, &hl, 2);
	memcpy(m + n + 2, "a.com", 5);
	memcpy(m + n + 7, "PUB", 3);
	assert_int_equal(keys_req_parse(m, n + 10, &q), 0);
	assert_string_equal(q.host, "a.com");
	assert_int_equal(q.len, 3);
	assert_memory_equal(q.data, "PUB", 3);
	assert_int_equal(keys_req_parse(m, n + 7, &q), -EINVAL); /* no key */
	assert_int_equal(keys_req_parse(m, n + 5, &q), -EINVAL); /* host cut */
	assert_int_equal(keys_req_parse(m, n + 1, &q), -EINVAL); /* length cut */
	m[n + 3] = '\0';
	assert_int_equal(keys_req_parse(m, n + 10, &q), -EINVAL); /* a NUL in the host */
	hl = 0;
	memcpy(m + n, &hl, 2);
	assert_int_equal(keys_req_parse(m, n + 10, &q), -EINVAL);
	hl = KEYS_HOST_MAX + 1;
	memcpy(m + n, &hl, 2);
	assert_int_equal(keys_req_parse(m, n + 10, &q), -EMSGSIZE);
	hl = 0xffff;
	memcpy(m + n, &hl, 2);
	assert_int_equal(keys_req_parse(m, n + 10, &q), -EMSGSIZE);

	/* JWT_LOAD: an absolute path, no NUL in it, bounded. */
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_JWT_LOAD, "/k.pem", 6), &q), 0);
	assert_string_equal(q.path, "/k.pem");
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_JWT_LOAD, "k.pem", 5), &q), -EINVAL);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_JWT_LOAD, "/", 1), &q), -EINVAL);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_JWT_LOAD, "/a\0b", 4), &q), -EINVAL);
	memset(big + 4, '/', KEYS_PATH_MAX + 1);
	memcpy(big, &(uint32_t){ KEYS_JWT_LOAD }, 4);
	assert_int_equal(keys_req_parse(big, 4 + KEYS_PATH_MAX + 1, &q), -EMSGSIZE);
	assert_int_equal(keys_req_parse(big, 4 + KEYS_PATH_MAX, &q), 0);
	/* JWT_SIGN: a handle and some input; JWT_DROP: a handle alone. */
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_JWT_SIGN, "\1\0\0\0a.b", 7), &q), 0);
	assert_int_equal(q.handle, 1);
	assert_int_equal(q.len, 3);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_JWT_SIGN, "\1\0\0\0", 4), &q), -EINVAL);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_JWT_SIGN, "\1\0\0", 3), &q), -EINVAL);
	assert_int_equal(
		keys_req_parse(big, msg(big, KEYS_JWT_SIGN, zeros, 4 + KEYS_TBS_MAX + 1), &q),
		-EMSGSIZE);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_JWT_DROP, "\1\0\0\0", 4), &q), 0);
	assert_int_equal(keys_req_parse(m, msg(m, KEYS_JWT_DROP, "\1\0\0\0x", 5), &q), -EINVAL);
}

static void test_build_roundtrip(void **state)
{
	unsigned char buf[KEYS_MSG_MAX], pub[KEYS_PUB_MAX + 1] = { 0 };
	struct keys_req q = { .op = KEYS_LEAF_SIGN, .data = pub, .len = 70 }, p;
	int n;

	(void)state;
	memset(q.id, 7, sizeof(q.id));
	snprintf(q.host, sizeof(q.host), "[2001:db8::1]");
	n = keys_req_build(&q, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(keys_req_parse(buf, (size_t)n, &p), 0);
	assert_int_equal(p.op, KEYS_LEAF_SIGN);
	assert_memory_equal(p.id, q.id, KEYS_ID_LEN);
	assert_string_equal(p.host, q.host);
	assert_int_equal(p.len, 70);
	q.len = KEYS_PUB_MAX + 1;
	assert_int_equal(keys_req_build(&q, buf, sizeof(buf)), -EMSGSIZE);
	q.op = KEYS_CA_CREATE;
	snprintf(q.name, sizeof(q.name), "bad name");
	assert_int_equal(keys_req_build(&q, buf, sizeof(buf)), -EINVAL);
	q.op = KEYS_OP_END;
	assert_int_equal(keys_req_build(&q, buf, sizeof(buf)), -EINVAL);
}

/* Sends @req to the key process's handler; returns the status, and any
 * certificate in *@x. */
static int32_t ask(const unsigned char *req, size_t len, X509 **x)
{
	static unsigned char out[KEYS_MSG_MAX];
	const unsigned char *p = out + 4;
	size_t n = keys_serve_one(req, len, -1, out, sizeof(out));
	int32_t st;

	assert_true(n >= 4);
	memcpy(&st, out, 4);
	if (x) {
		*x = n > 4 ? d2i_X509(NULL, &p, (long)(n - 4)) : NULL;
		if (n > 4)
			assert_ptr_equal(p, out + n);
	} else {
		assert_int_equal(n, 4);
	}
	return st;
}

static size_t leaf_req(unsigned char *m, const unsigned char id[KEYS_ID_LEN], const char *host,
		       EVP_PKEY *pub)
{
	struct keys_req q = { .op = KEYS_LEAF_SIGN };
	unsigned char *der = NULL;
	int n = i2d_PUBKEY(pub, &der), r;

	assert_true(n > 0);
	memcpy(q.id, id, KEYS_ID_LEN);
	snprintf(q.host, sizeof(q.host), "%s", host);
	q.data = der;
	q.len = (size_t)n;
	r = keys_req_build(&q, m, KEYS_MSG_MAX);
	OPENSSL_free(der);
	assert_true(r > 0);
	return (size_t)r;
}

static void id_of(X509 *x, unsigned char id[KEYS_ID_LEN])
{
	unsigned int n = 0;

	assert_int_equal(X509_digest(x, EVP_sha256(), id, &n), 1);
	assert_int_equal(n, KEYS_ID_LEN);
}

static void test_ca_and_leaves(void **state)
{
	unsigned char m[KEYS_MSG_MAX], id[KEYS_ID_LEN], *der = NULL;
	EVP_PKEY *leaf_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	EVP_PKEY *rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	char path[200], hex[2 * KEYS_ID_LEN + 1];
	X509 *ca = NULL, *leaf = NULL;
	GENERAL_NAMES *san;
	const GENERAL_NAME *g;
	struct stat st;
	time_t end;
	int n, i;

	(void)state;
	assert_non_null(leaf_key);
	assert_int_equal(ask(m, msg(m, KEYS_CA_CREATE, "demo-1", 6), &ca), 0);
	assert_non_null(ca);
	assert_int_equal(X509_check_ca(ca), 1);
	assert_int_equal(X509_get_pathlen(ca), 0);
	id_of(ca, id);
	for (i = 0; i < KEYS_ID_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	snprintf(path, sizeof(path), "%s/%s.key", tmpdir, hex);

	/* A leaf: that host alone, never a CA, signed by the CA, 7 days. */
	assert_int_equal(ask(m, leaf_req(m, id, "API.Example.COM.", leaf_key), &leaf), 0);
	assert_non_null(leaf);
	assert_int_equal(X509_check_ca(leaf), 0);
	assert_int_equal(X509_verify(leaf, X509_get0_pubkey(ca)), 1);
	assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(leaf), leaf_key), 1);
	san = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
	assert_non_null(san);
	assert_int_equal(sk_GENERAL_NAME_num(san), 1);
	g = sk_GENERAL_NAME_value(san, 0);
	assert_int_equal(g->type, GEN_DNS);
	assert_string_equal((const char *)ASN1_STRING_get0_data(g->d.dNSName), "api.example.com");
	GENERAL_NAMES_free(san);
	end = time(NULL) + 7 * 86400 + 60;
	assert_true(X509_cmp_time(X509_get0_notAfter(leaf), &end) < 0);
	X509_free(leaf);
	assert_int_equal(ask(m, leaf_req(m, id, "192.0.2.7", leaf_key), &leaf), 0);
	X509_free(leaf);

	/* Not a host: refused, nothing signed. */
	assert_int_equal(ask(m, leaf_req(m, id, "a.example.com, DNS:evil.com", leaf_key), &leaf),
			 -EINVAL);
	assert_null(leaf);
	assert_int_equal(ask(m, leaf_req(m, id, "*.example.com", leaf_key), &leaf), -EINVAL);
	assert_int_equal(ask(m, leaf_req(m, id, "a b", leaf_key), &leaf), -EINVAL);
	assert_int_equal(ask(m, leaf_req(m, id, "[not-v6]", leaf_key), &leaf), -EINVAL);
	/* Only EC keys for leaves (what the broker makes). */
	assert_int_equal(ask(m, leaf_req(m, id, "a.example", rsa), &leaf), -EINVAL);
	/* Only for a CA held. */
	id[0] ^= 1;
	assert_int_equal(ask(m, leaf_req(m, id, "a.example", leaf_key), &leaf), -ENOENT);
	id[0] ^= 1;
	/* A public key that is not one. */
	n = (int)leaf_req(m, id, "a.example", leaf_key);
	m[n - 1] ^= 0xff;
	assert_int_equal(ask(m, (size_t)n, &leaf), -EINVAL);

	/* Saved when made: 0600, in the directory, named by the id; a
	 * CA_SAVE writes it again, the same. */
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(ask(m, msg(m, KEYS_CA_SAVE, id, KEYS_ID_LEN), NULL), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	/* Forgotten, it signs nothing; loaded again from its certificate, it does. */
	assert_int_equal(ask(m, msg(m, KEYS_CA_FORGET, id, KEYS_ID_LEN), NULL), 0);
	assert_int_equal(ask(m, msg(m, KEYS_CA_FORGET, id, KEYS_ID_LEN), NULL), -ENOENT);
	assert_int_equal(ask(m, leaf_req(m, id, "a.example", leaf_key), &leaf), -ENOENT);
	n = i2d_X509(ca, &der);
	assert_true(n > 0);
	assert_int_equal(ask(m, msg(m, KEYS_CA_LOAD, der, (size_t)n), NULL), 0);
	assert_int_equal(ask(m, leaf_req(m, id, "a.example", leaf_key), &leaf), 0);
	assert_int_equal(X509_verify(leaf, X509_get0_pubkey(ca)), 1);
	X509_free(leaf);
	/* A certificate with a byte changed: another id, no key for it. */
	der[n - 1] ^= 1;
	assert_int_equal(ask(m, msg(m, KEYS_CA_LOAD, der, (size_t)n), NULL), -ENOENT);
	der[n - 1] ^= 1;
	/* Not DER at all, or DER with bytes after it. */
	assert_int_equal(ask(m, msg(m, KEYS_CA_LOAD, "junk", 4), NULL), -EINVAL);
	memcpy(m, &(uint32_t){ KEYS_CA_LOAD }, 4);
	memcpy(m + 4, der, (size_t)n);
	m[4 + n] = 0;
	assert_int_equal(ask(m, 4 + (size_t)n + 1, NULL), -EINVAL);

	/* Dropped: the file goes, and the CA. */
	assert_int_equal(ask(m, msg(m, KEYS_CA_DROP, id, KEYS_ID_LEN), NULL), 0);
	assert_int_equal(stat(path, &st), -1);
	assert_int_equal(ask(m, leaf_req(m, id, "a.example", leaf_key), &leaf), -ENOENT);
	assert_int_equal(ask(m, msg(m, KEYS_CA_LOAD, der, (size_t)n), NULL), -ENOENT);

	/* A key file that is not this certificate's: refused. */
	assert_int_equal(ask(m, msg(m, KEYS_CA_CREATE, "other", 5), &leaf), 0);
	{
		unsigned char oid[KEYS_ID_LEN];
		char opath[200], ohex[2 * KEYS_ID_LEN + 1];

		id_of(leaf, oid);
		for (i = 0; i < KEYS_ID_LEN; i++)
			snprintf(ohex + 2 * i, 3, "%02x", oid[i]);
		snprintf(opath, sizeof(opath), "%s/%s.key", tmpdir, ohex);
		assert_int_equal(ask(m, msg(m, KEYS_CA_SAVE, oid, KEYS_ID_LEN), NULL), 0);
		assert_int_equal(rename(opath, path), 0);
	}
	X509_free(leaf);
	assert_int_equal(ask(m, msg(m, KEYS_CA_LOAD, der, (size_t)n), NULL), -EKEYREJECTED);
	/* A key file that cannot be used says why, each in its own way: a
	 * FIFO (never opened to block), a symlink. */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(ask(m, msg(m, KEYS_CA_LOAD, der, (size_t)n), NULL), -EINVAL);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/etc/hostname", path), 0);
	assert_int_equal(ask(m, msg(m, KEYS_CA_LOAD, der, (size_t)n), NULL), -ELOOP);
	assert_int_equal(unlink(path), 0);

	/* An unknown op is answered, not obeyed. */
	assert_int_equal(ask(m, msg(m, 99, NULL, 0), NULL), -EOPNOTSUPP);
	assert_int_equal(ask(m, msg(m, KEYS_PING, NULL, 0), NULL), 0);

	OPENSSL_free(der);
	X509_free(ca);
	EVP_PKEY_free(leaf_key);
	EVP_PKEY_free(rsa);
}

/* CA_SWEEP: the key files of CAs not held, and temporaries, go; the held
 * CA's key and files of other names stay; it asks for no payload. */
static void touch(const char *name)
{
	char path[400];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
}

static bool there(const char *name)
{
	char path[400];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	return access(path, F_OK) == 0;
}

static void test_sweep(void **state)
{
	static const char orphan[] =
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	unsigned char m[600], out[64], id[KEYS_ID_LEN];
	char held[2 * KEYS_ID_LEN + 8], name[200];
	X509 *ca = NULL;
	uint32_t swept;
	int32_t st;
	size_t n;
	int i;

	(void)state;
	assert_int_equal(ask(m, msg(m, KEYS_CA_CREATE, "sweep-1", 7), &ca), 0);
	id_of(ca, id);
	for (i = 0; i < KEYS_ID_LEN; i++)
		snprintf(held + 2 * i, 3, "%02x", id[i]);
	snprintf(held + 2 * KEYS_ID_LEN, 5, ".key");
	assert_true(there(held));
	snprintf(name, sizeof(name), "%s.key", orphan);
	touch(name);
	snprintf(name, sizeof(name), "%s.tmp", orphan);
	touch(name);
	touch("README");
	touch("0011.key");				    /* not an id */
	snprintf(name, sizeof(name), "%.63sG.key", orphan); /* not hex */
	touch(name);
	snprintf(name, sizeof(name), "%s.key.bak", orphan);
	touch(name);

	assert_int_equal(keys_req_parse(m, msg(m, KEYS_CA_SWEEP, "x", 1), &(struct keys_req){ 0 }),
			 -EINVAL);
	n = keys_serve_one(m, msg(m, KEYS_CA_SWEEP, NULL, 0), -1, out, sizeof(out));
	assert_int_equal(n, sizeof(st) + sizeof(swept));
	memcpy(&st, out, sizeof(st));
	memcpy(&swept, out + sizeof(st), sizeof(swept));
	assert_int_equal(st, 0);
	assert_int_equal(swept, 2);
	assert_true(there(held));
	snprintf(name, sizeof(name), "%s.key", orphan);
	assert_false(there(name));
	snprintf(name, sizeof(name), "%s.tmp", orphan);
	assert_false(there(name));
	assert_true(there("README"));
	assert_true(there("0011.key"));
	snprintf(name, sizeof(name), "%.63sG.key", orphan);
	assert_true(there(name));
	snprintf(name, sizeof(name), "%s.key.bak", orphan);
	assert_true(there(name));
	/* Once it is forgotten, its key is no CA's it holds: swept too. */
	assert_int_equal(ask(m, msg(m, KEYS_CA_FORGET, id, KEYS_ID_LEN), NULL), 0);
	n = keys_serve_one(m, msg(m, KEYS_CA_SWEEP, NULL, 0), -1, out, sizeof(out));
	memcpy(&swept, out + sizeof(st), sizeof(swept));
	assert_int_equal(swept, 1);
	assert_false(there(held));
	X509_free(ca);
}

/* Writes @key as PEM (private) at DIR/@name; returns the path. */
static const char *write_pem(const char *name, EVP_PKEY *key)
{
	static char path[200];
	FILE *f;

	/* Not in the key directory (tmpdir): the key process refuses those. */
	snprintf(path, sizeof(path), "%s/jwt", tmpdir);
	assert_true(mkdir(path, 0700) == 0 || errno == EEXIST);
	snprintf(path, sizeof(path), "%s/jwt/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL), 1);
	fclose(f);
	return path;
}

/* JWT_LOAD of @path (by path, or with @fd); returns the status, sets
 * *@handle and checks the public half is @key's. */
static int32_t jwt_load(const char *path, int fd, EVP_PKEY *key, uint32_t *handle)
{
	static unsigned char m[KEYS_MSG_MAX], out[KEYS_MSG_MAX];
	struct keys_req q = { .op = KEYS_JWT_LOAD };
	const unsigned char *p = out + 8;
	EVP_PKEY *pub;
	size_t n;
	int32_t st;
	int len;

	snprintf(q.path, sizeof(q.path), "%s", path);
	len = keys_req_build(&q, m, sizeof(m));
	assert_true(len > 0);
	n = keys_serve_one(m, (size_t)len, fd, out, sizeof(out));
	memcpy(&st, out, 4);
	if (st < 0) {
		assert_int_equal(n, 4);
		return st;
	}
	assert_true(n > 8);
	memcpy(handle, out + 4, 4);
	pub = d2i_PUBKEY(NULL, &p, (long)(n - 8));
	assert_non_null(pub);
	assert_ptr_equal(p, out + n);
	assert_int_equal(EVP_PKEY_eq(pub, key), 1);
	EVP_PKEY_free(pub);
	return 0;
}

static int32_t jwt_sign(uint32_t handle, const char *tbs, unsigned char sig[64])
{
	static unsigned char m[KEYS_MSG_MAX], out[KEYS_MSG_MAX];
	struct keys_req q = { .op = KEYS_JWT_SIGN,
			      .handle = handle,
			      .data = (const unsigned char *)tbs,
			      .len = strlen(tbs) };
	int len = keys_req_build(&q, m, sizeof(m));
	size_t n;
	int32_t st;

	assert_true(len > 0);
	n = keys_serve_one(m, (size_t)len, -1, out, sizeof(out));
	memcpy(&st, out, 4);
	if (st == 0) {
		assert_int_equal(n, 4 + 64);
		memcpy(sig, out + 4, 64);
	}
	return st;
}

/* Does @sig (JWS: R||S for EC) verify @tbs with @key? */
static bool jws_ok(EVP_PKEY *key, const char *tbs, const unsigned char sig[64])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned char der[80], *dp = der;
	ECDSA_SIG *es = NULL;
	size_t dl = 64;
	bool ok;

	if (EVP_PKEY_is_a(key, "ED25519")) {
		ok = EVP_DigestVerifyInit(c, NULL, NULL, NULL, key) == 1 &&
		     EVP_DigestVerify(c, sig, 64, (const unsigned char *)tbs, strlen(tbs)) == 1;
	} else {
		es = ECDSA_SIG_new();
		ECDSA_SIG_set0(es, BN_bin2bn(sig, 32, NULL), BN_bin2bn(sig + 32, 32, NULL));
		dl = (size_t)i2d_ECDSA_SIG(es, &dp);
		ok = EVP_DigestVerifyInit(c, NULL, EVP_sha256(), NULL, key) == 1 &&
		     EVP_DigestVerify(c, der, dl, (const unsigned char *)tbs, strlen(tbs)) == 1;
	}
	ECDSA_SIG_free(es);
	EVP_MD_CTX_free(c);
	return ok;
}

static void test_jwt(void **state)
{
	EVP_PKEY *es = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	EVP_PKEY *p384 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
	unsigned char sig[64], m[64];
	uint32_t hes = 0, hed = 0, h = 0;
	char es_path[200], fifo[200];
	int fd;

	(void)state;
	snprintf(es_path, sizeof(es_path), "%s", write_pem("es.pem", es));
	/* By path (a file of the key user's), and by a descriptor the broker
	 * opened. */
	assert_int_equal(jwt_load(es_path, -1, es, &hes), 0);
	fd = open(write_pem("ed.pem", ed), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(jwt_load("/the/path/is/not/used/then", fd, ed, &hed), 0);
	close(fd);
	assert_true(hes != 0 && hed != 0 && hes != hed);

	assert_int_equal(jwt_sign(hes, "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0", sig), 0);
	assert_true(jws_ok(es, "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0", sig));
	assert_false(jws_ok(es, "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ5In0", sig));
	assert_int_equal(jwt_sign(hed, "header.claims", sig), 0);
	assert_true(jws_ok(ed, "header.claims", sig));

	/* Keys jwt.c refuses, here too; and files that are not keys. */
	assert_int_equal(jwt_load(write_pem("p384.pem", p384), -1, p384, &h), -EKEYREJECTED);
	assert_int_equal(jwt_load("/nonexistent-sluice-key", -1, es, &h), -ENOENT);
	snprintf(fifo, sizeof(fifo), "%s/fifo", tmpdir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(jwt_load(fifo, -1, es, &h), -EINVAL); /* never opened for reading */
	assert_int_equal(jwt_load(tmpdir, -1, es, &h), -EINVAL);
	/* A relative path is not even a request. */
	assert_int_equal(ask(m, msg(m, KEYS_JWT_LOAD, "es.pem", 6), NULL), -EINVAL);
	/* A sandbox CA's key is no JWT key: not by its path, not through
	 * this process's descriptor of the key directory, not passed open. */
	{
		unsigned char id[KEYS_ID_LEN];
		char hex[2 * KEYS_ID_LEN + 1], kpath[300];
		X509 *ca = NULL;
		int i;

		assert_int_equal(ask(m, msg(m, KEYS_CA_CREATE, "jwt-ca", 6), &ca), 0);
		assert_non_null(ca);
		id_of(ca, id);
		for (i = 0; i < KEYS_ID_LEN; i++)
			snprintf(hex + 2 * i, 3, "%02x", id[i]);
		snprintf(kpath, sizeof(kpath), "%s/%s.key", tmpdir, hex);
		assert_int_equal(access(kpath, R_OK), 0);
		assert_int_equal(jwt_load(kpath, -1, es, &h), -EPERM);
		snprintf(kpath, sizeof(kpath), "/proc/self/fd/%d/%s.key", dirfd_, hex);
		assert_int_equal(jwt_load(kpath, -1, es, &h), -EPERM);
		fd = open(kpath, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(jwt_load("/not/used", fd, es, &h), -EPERM);
		close(fd);
		X509_free(ca);
	}

	/* Unknown and dropped handles sign nothing. */
	assert_int_equal(jwt_sign(hes + hed + 1, "x", sig), -ENOENT);
	assert_int_equal(ask(m, msg(m, KEYS_JWT_DROP, &hes, 4), NULL), 0);
	assert_int_equal(jwt_sign(hes, "x", sig), -ENOENT);
	assert_int_equal(ask(m, msg(m, KEYS_JWT_DROP, &hes, 4), NULL), -ENOENT);
	assert_int_equal(jwt_sign(hed, "x", sig), 0);

	EVP_PKEY_free(es);
	EVP_PKEY_free(ed);
	EVP_PKEY_free(p384);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_refusals),
		cmocka_unit_test(test_build_roundtrip),
		cmocka_unit_test_setup_teardown(test_ca_and_leaves, setup, teardown),
		cmocka_unit_test_setup_teardown(test_jwt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
