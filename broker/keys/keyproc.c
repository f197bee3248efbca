// SPDX-License-Identifier: MIT
/* sluiced-keys: the process that holds the sandboxes' CA keys and signs
 * with them, and nothing else. */

/*
 * Theory of operation
 *
 * The broker parses what hostile sandboxes send (HTTP heads, TLS, DNS);
 * a bug there that ran an attacker's code used to reach every sandbox's
 * CA key, in the broker's memory and in files its user reads. Here, as
 * relayd's CA process does, the keys live in a process of their own:
 * forked at start-up while the broker is root and has one thread, it
 * becomes a user of its own (`key_user`, default `sluice-keys`, else
 * 65532:65532) with no capability, is not dumpable (its memory is not
 * readable through /proc, not even by its own uid without the ptrace
 * capability), and keeps its keys in state_dir/keys, 0700 and its own.
 * Its seccomp filter allows the dozen calls of its loop (keyproc_allowed).
 *
 * The broker keeps what it writes into connections: the CA certificate
 * (public), the leaf key (it serves the sandbox's TLS) and the leaves in
 * its cache. A cache miss costs one round trip (LEAF_SIGN: the leaf's
 * public key in, the certificate out); a hit none.
 *
 * Every request is hostile (the broker may be the one compromised):
 * proto.c checks lengths, names and ops; a host is checked here as a DNS
 * name or an address literal (tls_host_parse) before it goes into a
 * certificate; a leaf is CA:FALSE, serverAuth, for TLS_LEAF_DAYS at most
 * and never past its CA; only a CA held here signs. What a broker taken
 * over can still get: leaves of its choice for the CAs it names, which it
 * could have made from the leaf key it holds anyway for as long as the
 * key process lives; not the CA keys, so not any leaf after it is gone,
 * nor a sub-CA (pathlen:0, and no request makes a CA:TRUE certificate
 * from a key the broker chose).
 *
 * A CA is named by its id, the SHA-256 of its certificate: a sandbox
 * re-created under the same name has another CA, and a refused register
 * cannot overwrite the key of a sandbox of that name. Keys on disk are
 * state_dir/keys/HEX(id).key, PEM, 0600.
 *
 * Start-up (keys_start(), as root): the keys an older broker kept in
 * state_dir/ca/NAME/ca.key are moved here (checked against ca.crt beside
 * them, which stays: it is public), so that existing sandboxes keep their
 * CA. Then the switch to the key user, the filter, and the loop.
 *
 * A small pool of CA keys made ahead (KEYS_POOL), refilled when no
 * request is waiting, so that CA_CREATE costs a signature, not a keygen.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "broker/creds/creds_internal.h"
#include "broker/isolation.h"
#include "broker/keys/keys_internal.h"
#include "broker/tls/tls_internal.h"
#include "common/err.h"
#include "common/file.h"
#include "common/log.h"

#if defined(__x86_64__)
#define KEYS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define KEYS_ARCH AUDIT_ARCH_AARCH64
#else
#error "broker/keys/keyproc.c: add this architecture's AUDIT_ARCH_"
#endif

#define KEYS_BUCKETS 4096
/* Every sandbox (SANDBOX_MAX) and some being created. */
#define KEYS_HELD_MAX (65536 + 256)
#define KEYS_POOL 4
#define KEY_FILE_MAX (64 * 1024)

struct held {
	struct held *next;
	unsigned char id[KEYS_ID_LEN];
	EVP_PKEY *key;
	X509 *cert;
	time_t not_after;
};

/* A JWT signing key (creds/jwt.c), named by a handle of the key process's
 * choosing: a key file's path names no key (it may change on disk). */
struct jwt_held {
	struct jwt_held *next;
	uint32_t handle;
	EVP_PKEY *key;
};

/* Each sandbox loads its own copy of its policy's keys. */
#define KEYS_JWT_MAX (4 * 65536)

static struct {
	struct held *bucket[KEYS_BUCKETS];
	size_t n;
	int dirfd;
	EVP_PKEY *pool[KEYS_POOL];
	unsigned npool;
	struct jwt_held *jwt[KEYS_BUCKETS];
	size_t njwt;
	uint32_t next_handle;
} S = { .dirfd = -1, .next_handle = 1 };

static size_t bucket_of(const unsigned char id[KEYS_ID_LEN])
{
	/* The id is a SHA-256: any of its bytes are spread enough. */
	return ((size_t)id[0] << 8 | id[1]) % KEYS_BUCKETS;
}

static struct held **find(const unsigned char id[KEYS_ID_LEN])
{
	struct held **pp = &S.bucket[bucket_of(id)];

	while (*pp && memcmp((*pp)->id, id, KEYS_ID_LEN))
		pp = &(*pp)->next;
	return pp;
}

static void held_free(struct held *h)
{
	if (!h)
		return;
	EVP_PKEY_free(h->key);
	X509_free(h->cert);
	free(h);
}

/* Lets go of the CA *@pp, if one is held, and unlinks it from its bucket. */
static void unhold(struct held **pp)
{
	struct held *h = *pp;

	if (!h)
		return;
	*pp = h->next;
	S.n--;
	held_free(h);
}

/* Takes @key and @cert on success; *@held (if not NULL) is then the CA
 * held as @id. */
static int hold(EVP_PKEY *key, X509 *cert, unsigned char id[KEYS_ID_LEN], struct held **held)
{
	struct held *h, **pp;

	if (tls_cert_id(cert, id) < 0)
		return -EIO;
	pp = find(id);
	if (*pp) {
		/* Held already (a CA_LOAD again): the one held stays. */
		EVP_PKEY_free(key);
		X509_free(cert);
		if (held)
			*held = *pp;
		return 0;
	}
	if (S.n >= KEYS_HELD_MAX)
		return -ENOSPC;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	memcpy(h->id, id, KEYS_ID_LEN);
	h->key = key;
	h->cert = cert;
	h->not_after = tls_asn1_time(X509_get0_notAfter(cert));
	h->next = S.bucket[bucket_of(id)];
	S.bucket[bucket_of(id)] = h;
	S.n++;
	if (held)
		*held = h;
	return 0;
}

static void key_name(const unsigned char id[KEYS_ID_LEN], char name[2 * KEYS_ID_LEN + 8],
		     const char *suffix)
{
	static const char hex[] = "0123456789abcdef";
	int i;

	for (i = 0; i < KEYS_ID_LEN; i++) {
		name[2 * i] = hex[id[i] >> 4];
		name[2 * i + 1] = hex[id[i] & 15];
	}
	snprintf(name + 2 * KEYS_ID_LEN, 8, "%s", suffix);
}

/* Writes @key as DIRFD/HEX(id).key, 0600, through a temporary created
 * afresh and renamed; with @owner >= 0, the file is given to it (the
 * migration runs as root). Not synced, as tls_ca_save(). */
static int write_key(int dirfd, const unsigned char id[KEYS_ID_LEN], EVP_PKEY *key, int owner_uid,
		     int owner_gid)
{
	char name[2 * KEYS_ID_LEN + 8], tmp[2 * KEYS_ID_LEN + 8];
	BIO *b = BIO_new(BIO_s_secmem());
	char *p;
	long len;
	size_t done = 0;
	int fd = -1, r = -ENOMEM;

	key_name(id, name, ".key");
	key_name(id, tmp, ".tmp");
	if (!b || !PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL))
		goto out;
	len = BIO_get_mem_data(b, &p);
	if (len <= 0)
		goto out;
	(void)unlinkat(dirfd, tmp, 0);
	/* (A spare inode when there is one: keyproc_main().) */
	fd = file_new_at(dirfd, tmp, 0600);
	if (fd < 0) {
		r = fd;
		goto out;
	}
	if (owner_uid >= 0 && fchown(fd, (uid_t)owner_uid, (gid_t)owner_gid) < 0) {
		r = -errno;
		goto out;
	}
	while (done < (size_t)len) {
		ssize_t w = write(fd, p + done, (size_t)len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			r = w < 0 ? -errno : -EIO;
			goto out;
		}
		done += (size_t)w;
	}
	r = close(fd) < 0 ? -errno : 0;
	fd = -1;
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = -errno;
out:
	if (fd >= 0)
		close(fd);
	if (r < 0)
		(void)unlinkat(dirfd, tmp, 0);
	BIO_free(b);
	ERR_clear_error();
	return r;
}

static EVP_PKEY *key_from_pem(const unsigned char *buf, size_t len)
{
	BIO *b = len <= INT_MAX ? BIO_new_mem_buf(buf, (int)len) : NULL;
	EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, tls_no_password, NULL) : NULL;

	BIO_free(b);
	if (k && !EVP_PKEY_is_a(k, "EC")) {
		EVP_PKEY_free(k);
		k = NULL;
	}
	ERR_clear_error();
	return k;
}

/* A CA certificate, in date, that @key signs for. */
static bool ca_pair_ok(X509 *cert, EVP_PKEY *key)
{
	bool ok = X509_check_private_key(cert, key) == 1 && X509_check_ca(cert) >= 1 &&
		  X509_cmp_current_time(X509_get0_notAfter(cert)) > 0;

	ERR_clear_error();
	return ok;
}

/* ---- the operations ------------------------------------------------------ */

static EVP_PKEY *new_key(void)
{
	if (S.npool)
		return S.pool[--S.npool];
	return tls_new_p256_key();
}

/* Return: bytes of DER in @out, or a negative errno. */
static int put_der(X509 *x, unsigned char *out, size_t cap)
{
	unsigned char *p = out;
	int n = i2d_X509(x, NULL);

	if (n <= 0 || (size_t)n > cap)
		return n <= 0 ? -EIO : -EMSGSIZE;
	return i2d_X509(x, &p);
}

static int op_ca_create(const struct keys_req *q, unsigned char *out, size_t cap)
{
	unsigned char id[KEYS_ID_LEN];
	EVP_PKEY *key = new_key();
	X509 *cert = key ? tls_ca_make_cert(key, q->name) : NULL;
	struct held *h;
	int n, r;

	if (!cert) {
		EVP_PKEY_free(key);
		ERR_clear_error();
		return -EIO;
	}
	n = put_der(cert, out, cap);
	if (n < 0) {
		EVP_PKEY_free(key);
		X509_free(cert);
		return n;
	}
	r = hold(key, cert, id, &h);
	if (r < 0) {
		EVP_PKEY_free(key);
		X509_free(cert);
		return r;
	}
	/* Its key file now, not at a CA_SAVE: the broker's registration
	 * then waits for no second round trip. Until the broker has written
	 * the certificate beside its sandbox's state, nothing names the file:
	 * the broker drops it (CA_DROP) if the registration fails. Without a
	 * directory (the process is always started with one: only unit tests
	 * and the fuzzer serve without), the key is held only. */
	r = S.dirfd < 0 ? 0 : write_key(S.dirfd, id, h->key, -1, -1);
	if (r < 0) {
		unhold(find(id));
		return r;
	}
	return n;
}

static int op_ca_load(const struct keys_req *q)
{
	const unsigned char *p = q->data;
	unsigned char id[KEYS_ID_LEN], *buf = NULL;
	char name[2 * KEYS_ID_LEN + 8];
	X509 *cert = d2i_X509(NULL, &p, (long)q->len);
	EVP_PKEY *key = NULL;
	size_t len = 0;
	int r;

	if (!cert || p != q->data + q->len) {
		X509_free(cert);
		ERR_clear_error();
		return -EINVAL;
	}
	if (tls_cert_id(cert, id) < 0) {
		X509_free(cert);
		return -EIO;
	}
	if (*find(id)) {
		X509_free(cert);
		return 0;
	}
	key_name(id, name, ".key");
	r = S.dirfd < 0 ? -EBADF : tls_read_small_at(S.dirfd, name, true, &buf, &len, NULL);
	if (r < 0) {
		X509_free(cert);
		return r;
	}
	key = key_from_pem(buf, len);
	OPENSSL_secure_clear_free(buf, len);
	/* An answer of its own, so that the broker does not take it for
	 * tls_read_small_at()'s -EINVAL (a key file that is not a regular
	 * file) or for a request it sent wrong. */
	if (!key || !ca_pair_ok(cert, key)) {
		EVP_PKEY_free(key);
		X509_free(cert);
		return -EKEYREJECTED;
	}
	r = hold(key, cert, id, NULL);
	if (r < 0) {
		EVP_PKEY_free(key);
		X509_free(cert);
	}
	return r;
}

static int op_ca_save(const struct keys_req *q)
{
	struct held *h = *find(q->id);

	if (!h)
		return -ENOENT;
	if (S.dirfd < 0)
		return -EBADF;
	return write_key(S.dirfd, h->id, h->key, -1, -1);
}

static int op_ca_forget(const struct keys_req *q, bool drop)
{
	struct held **pp = find(q->id), *h = *pp;
	char name[2 * KEYS_ID_LEN + 8];
	int r = 0;

	if (h)
		unhold(pp);
	if (drop) {
		/* Named by the id, in hex: no path of the broker's choosing. */
		key_name(q->id, name, ".key");
		if (S.dirfd < 0)
			r = -EBADF;
		else
			r = file_unlink_at(S.dirfd, name);
		return r == -ENOENT && h ? 0 : r;
	}
	return h ? 0 : -ENOENT;
}

/* The id that NAME, 64 hex digits then @suffix, names; false if it is not
 * such a name. */
static bool key_file_id(const char *name, const char *suffix, unsigned char id[KEYS_ID_LEN])
{
	size_t i;

	if (strlen(name) != 2 * KEYS_ID_LEN + strlen(suffix) ||
	    strcmp(name + 2 * KEYS_ID_LEN, suffix))
		return false;
	for (i = 0; i < KEYS_ID_LEN; i++) {
		unsigned v = 0;
		int k;

		for (k = 0; k < 2; k++) {
			char c = name[2 * i + (size_t)k];

			if (c >= '0' && c <= '9')
				v = v << 4 | (unsigned)(c - '0');
			else if (c >= 'a' && c <= 'f')
				v = v << 4 | (unsigned)(c - 'a' + 10);
			else
				return false;
		}
		id[i] = (unsigned char)v;
	}
	return true;
}

/*
 * Removes the key files of CAs it does not hold, and the temporaries of
 * writes a crash cut short: the broker asks once it has loaded every CA of
 * the sandboxes it restored (a key whose sandbox was deleted while this
 * process was gone, or whose registration never got saved, has no other
 * way out). Files of any other name are left alone. Single-threaded, so
 * no write_key() is half-way meanwhile. Return: bytes of the count in
 * @out (a uint32), or a negative errno.
 */
static int op_ca_sweep(unsigned char *out, size_t cap)
{
	/* getdents64() by hand (glibc's struct dirent64 is the kernel's
	 * record): readdir()'s fdopendir() wants fcntl(), which this
	 * process's filter does not allow for this alone. */
	unsigned char id[KEYS_ID_LEN];
	char buf[4096] __attribute__((aligned(8)));
	uint32_t n = 0;
	long got, at;
	int fd, r = 0;

	if (S.dirfd < 0)
		return -EBADF;
	if (cap < sizeof(n))
		return -EMSGSIZE;
	fd = openat(S.dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while ((got = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (at = 0; at < got;) {
			const struct dirent64 *de = (const void *)(buf + at);
			bool tmp;

			at += de->d_reclen;
			tmp = key_file_id(de->d_name, ".tmp", id);
			if (!tmp && (!key_file_id(de->d_name, ".key", id) || *find(id)))
				continue;
			if (unlinkat(S.dirfd, de->d_name, 0) == 0)
				n++;
		}
	}
	if (got < 0)
		r = -errno;
	close(fd);
	if (r < 0)
		return r;
	memcpy(out, &n, sizeof(n));
	return sizeof(n);
}

static int op_leaf_sign(const struct keys_req *q, unsigned char *out, size_t cap)
{
	struct held *h = *find(q->id);
	const unsigned char *p = q->data;
	struct tls_host host;
	EVP_PKEY *pub;
	X509 *leaf;
	time_t end;
	int n;

	if (!h)
		return -ENOENT;
	if (tls_host_parse(q->host, &host) < 0)
		return -EINVAL;
	pub = d2i_PUBKEY(NULL, &p, (long)q->len);
	if (!pub || p != q->data + q->len || !EVP_PKEY_is_a(pub, "EC")) {
		EVP_PKEY_free(pub);
		ERR_clear_error();
		return -EINVAL;
	}
	leaf = tls_leaf_make(h->key, h->cert, h->not_after, pub, &host, time(NULL), &end);
	EVP_PKEY_free(pub);
	if (!leaf) {
		ERR_clear_error();
		return -EIO;
	}
	n = put_der(leaf, out, cap);
	X509_free(leaf);
	return n;
}

/* ---- JWT signing keys ------------------------------------------------------ */

static struct jwt_held **jwt_find(uint32_t handle)
{
	struct jwt_held **pp = &S.jwt[handle % KEYS_BUCKETS];

	while (*pp && (*pp)->handle != handle)
		pp = &(*pp)->next;
	return pp;
}

/* Reads the key file on @fd (regular, at most KEY_FILE_MAX) into *@key:
 * an EC P-256 or Ed25519 private key, as creds/jwt.c takes. */
static int jwt_read_key(int fd, EVP_PKEY **key)
{
	unsigned char *b;
	struct stat st;
	size_t got = 0;
	BIO *bio;
	int r = 0;

	*key = NULL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL; /* a FIFO or a device never blocks it */
	if (st.st_size <= 0 || st.st_size > KEY_FILE_MAX)
		return -EFBIG;
	b = OPENSSL_secure_malloc((size_t)st.st_size);
	if (!b)
		return -ENOMEM;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, b + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			break;
		}
		got += (size_t)n;
	}
	if (r == 0) {
		bio = BIO_new_mem_buf(b, (int)got);
		*key = bio ? PEM_read_bio_PrivateKey(bio, NULL, tls_no_password, NULL) : NULL;
		BIO_free(bio);
		if (!*key || !creds_jwt_key_ok(*key)) {
			EVP_PKEY_free(*key);
			*key = NULL;
			r = -EKEYREJECTED; /* not -EINVAL: a file that is not regular */
		}
	}
	OPENSSL_secure_clear_free(b, (size_t)st.st_size);
	ERR_clear_error();
	return r;
}

/*
 * Is the file open at @fd one of the key directory's (a sandbox CA's key)?
 * Judged by the directory it is in, as the kernel names it: a path through
 * /proc/self/fd/N (this process's own descriptor of the directory) or
 * through state_dir lands there all the same. Unknown counts as yes.
 */
static bool in_key_dir(int fd)
{
	char self[40], path[PATH_MAX];
	struct stat d, k;
	ssize_t n;
	char *slash;

	if (S.dirfd < 0)
		return false;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	n = readlinkat(AT_FDCWD, self, path, sizeof(path) - 1);
	if (n <= 0 || path[0] != '/')
		return true;
	path[n] = '\0';
	slash = strrchr(path, '/');
	*slash = '\0';
	if (stat(slash == path ? "/" : path, &d) < 0 || fstat(S.dirfd, &k) < 0)
		return true;
	return d.st_dev == k.st_dev && d.st_ino == k.st_ino;
}

/*
 * @fd: the file as the broker opened it (its own right to read it, or its
 * opener's), or -1: then opened here by path, as the key user, which is
 * how a key file that only the key user may read works (neither the broker
 * nor its opener can read it then). Never a file of the key directory: a
 * sandbox CA's key loaded as a JWT key would sign whatever the broker asks
 * (an X.509 certificate's body among them), and the key process's limits
 * on what it signs with a CA key would be gone.
 */
static int op_jwt_load(const struct keys_req *q, int fd, unsigned char *out, size_t cap)
{
	struct jwt_held *h;
	unsigned char *p;
	EVP_PKEY *key;
	int own = -1, n, r;

	if (fd < 0) {
		char self[40];
		struct stat st;
		int pfd;

		/* O_PATH first: a path of the broker's choosing is opened for
		 * reading only once it is seen to be a regular file (a
		 * device's open could act). */
		pfd = open(q->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0)
			return -errno;
		if (fstat(pfd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(pfd);
			return -EINVAL;
		}
		snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
		fd = own = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		r = -errno;
		close(pfd);
		if (fd < 0)
			return r;
	}
	if (in_key_dir(fd)) {
		if (own >= 0)
			close(own);
		return -EPERM;
	}
	r = jwt_read_key(fd, &key);
	if (own >= 0)
		close(own);
	if (r < 0)
		return r;
	n = i2d_PUBKEY(key, NULL);
	if (S.njwt >= KEYS_JWT_MAX || n <= 0 || (size_t)n + 4 > cap) {
		EVP_PKEY_free(key);
		ERR_clear_error();
		return S.njwt >= KEYS_JWT_MAX ? -ENOSPC : -EIO;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		EVP_PKEY_free(key);
		return -ENOMEM;
	}
	do
		h->handle = S.next_handle++;
	while (h->handle == 0 || *jwt_find(h->handle));
	h->key = key;
	h->next = S.jwt[h->handle % KEYS_BUCKETS];
	S.jwt[h->handle % KEYS_BUCKETS] = h;
	S.njwt++;
	memcpy(out, &h->handle, 4);
	p = out + 4;
	return 4 + i2d_PUBKEY(key, &p);
}

static int op_jwt_sign(const struct keys_req *q, unsigned char *out, size_t cap)
{
	struct jwt_held *h = *jwt_find(q->handle);
	int r;

	if (!h)
		return -ENOENT;
	if (cap < 64)
		return -EMSGSIZE;
	r = creds_jwt_sign_raw(h->key, q->data, q->len, out);
	return r < 0 ? r : 64;
}

static int op_jwt_drop(const struct keys_req *q)
{
	struct jwt_held **pp = jwt_find(q->handle), *h = *pp;

	if (!h)
		return -ENOENT;
	*pp = h->next;
	S.njwt--;
	EVP_PKEY_free(h->key);
	free(h);
	return 0;
}

size_t keys_serve_one(const unsigned char *buf, size_t len, int fd, unsigned char *out, size_t cap)
{
	struct keys_req q;
	int32_t r;
	int n = 0;

	if (cap < sizeof(r))
		return 0;
	r = keys_req_parse(buf, len, &q);
	if (r == 0) {
		switch (q.op) {
		case KEYS_CA_CREATE:
			n = op_ca_create(&q, out + sizeof(r), cap - sizeof(r));
			break;
		case KEYS_CA_LOAD:
			n = op_ca_load(&q);
			break;
		case KEYS_CA_SAVE:
			n = op_ca_save(&q);
			break;
		case KEYS_CA_FORGET:
			n = op_ca_forget(&q, false);
			break;
		case KEYS_CA_DROP:
			n = op_ca_forget(&q, true);
			break;
		case KEYS_LEAF_SIGN:
			n = op_leaf_sign(&q, out + sizeof(r), cap - sizeof(r));
			break;
		case KEYS_PING:
			n = 0;
			break;
		case KEYS_JWT_LOAD:
			n = op_jwt_load(&q, fd, out + sizeof(r), cap - sizeof(r));
			break;
		case KEYS_JWT_SIGN:
			n = op_jwt_sign(&q, out + sizeof(r), cap - sizeof(r));
			break;
		case KEYS_JWT_DROP:
			n = op_jwt_drop(&q);
			break;
		case KEYS_CA_SWEEP:
			n = op_ca_sweep(out + sizeof(r), cap - sizeof(r));
			break;
		default:
			n = -EOPNOTSUPP;
			break;
		}
		r = n < 0 ? n : 0;
	}
	memcpy(out, &r, sizeof(r));
	return sizeof(r) + (r == 0 && n > 0 ? (size_t)n : 0);
}

void keys_server_init(int dirfd)
{
	S.dirfd = dirfd;
}

void keys_server_reset(void)
{
	size_t b;

	for (b = 0; b < KEYS_BUCKETS; b++) {
		while (S.bucket[b]) {
			struct held *h = S.bucket[b];

			S.bucket[b] = h->next;
			held_free(h);
		}
	}
	S.n = 0;
	while (S.npool)
		EVP_PKEY_free(S.pool[--S.npool]);
	for (b = 0; b < KEYS_BUCKETS; b++) {
		while (S.jwt[b]) {
			struct jwt_held *h = S.jwt[b];

			S.jwt[b] = h->next;
			EVP_PKEY_free(h->key);
			free(h);
		}
	}
	S.njwt = 0;
}

/* ---- start-up: taking over an older broker's keys ------------------------ */

/*
 * As root, before the switch: for each state_dir/ca/NAME with a ca.key,
 * the key is checked against ca.crt, written here (given to the key user)
 * and removed there. Nothing is followed through a symlink (the broker's
 * user owns that tree); a file that is not a regular one, or does not
 * parse, is left as it is and said.
 */
static void migrate(int state_fd, int keys_fd, uid_t uid, gid_t gid)
{
	unsigned moved = 0, left = 0;
	struct dirent *de;
	int ca_fd, d2;
	DIR *d;

	ca_fd = openat(state_fd, "ca", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ca_fd < 0)
		return;
	d2 = dup(ca_fd);
	d = d2 >= 0 ? fdopendir(d2) : NULL;
	if (!d) {
		if (d2 >= 0)
			close(d2);
		close(ca_fd);
		return;
	}
	while ((de = readdir(d))) {
		unsigned char *kb = NULL, *cb = NULL, id[KEYS_ID_LEN];
		size_t kl = 0, cl = 0;
		EVP_PKEY *key = NULL;
		X509 *cert = NULL;
		BIO *b;
		int sub;

		if (!keys_name_ok(de->d_name, strlen(de->d_name)))
			continue;
		sub = openat(ca_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		if (tls_read_small_at(sub, "ca.key", false, &kb, &kl, NULL) < 0) {
			close(sub);
			continue; /* none: taken over already, or never saved */
		}
		if (tls_read_small_at(sub, "ca.crt", false, &cb, &cl, NULL) == 0) {
			key = key_from_pem(kb, kl);
			b = BIO_new_mem_buf(cb, (int)cl);
			cert = b ? PEM_read_bio_X509(b, NULL, tls_no_password, NULL) : NULL;
			BIO_free(b);
		}
		if (key && cert && X509_check_private_key(cert, key) == 1 &&
		    tls_cert_id(cert, id) == 0 &&
		    write_key(keys_fd, id, key, (int)uid, (int)gid) == 0 &&
		    unlinkat(sub, "ca.key", 0) == 0) {
			moved++;
		} else {
			left++;
			log_err("sluiced-keys: `%s`: ca.key is left where it is (not a key for "
				"ca.crt beside it, or cannot be moved); its sandbox's interception "
				"fails until it is re-created",
				de->d_name);
		}
		ERR_clear_error();
		EVP_PKEY_free(key);
		X509_free(cert);
		OPENSSL_secure_clear_free(kb, kl);
		if (cb)
			OPENSSL_secure_clear_free(cb, cl);
		close(sub);
	}
	closedir(d);
	close(ca_fd);
	if (moved)
		log_info("sluiced-keys: took over %u CA keys from state_dir/ca (the certificates "
			 "stay there)",
			 moved);
	(void)left;
}

/* ---- the process ---------------------------------------------------------- */

/* The key process's whole filter; anything else ends it (keyproc_sigsys). */
static const int keyproc_allowed[] = {
	/* Requests in, answers out; the poll before refilling the pool. */
	__NR_recvfrom,
	__NR_recvmsg,
	__NR_sendto,
	__NR_sendmsg,
	__NR_ppoll,
#ifdef __NR_poll
	__NR_poll,
#endif
	/* Key files in state_dir/keys: read at CA_LOAD, written (temporary,
	 * renamed) at CA_SAVE, removed at CA_DROP; log lines to stderr. */
	__NR_openat,
	__NR_read,
	__NR_write,
	__NR_close,
	__NR_fstat,
	__NR_newfstatat,
	__NR_lseek,
	/* (A key file removed is emptied and kept as a spare, and a new one
	 * gets its mode exactly: file.c.) */
	__NR_ftruncate,
	__NR_fchmod,
	__NR_renameat,
	__NR_unlinkat,
	/* CA_SWEEP lists its directory (readdir). */
	__NR_getdents64,
	/* JWT_LOAD reads where the file it opened is (/proc/self/fd/N): never
	 * in the key directory (in_key_dir()). */
	__NR_readlinkat,
#ifdef __NR_renameat2
	__NR_renameat2,
#endif
	/* OpenSSL: keys and serials (getrandom), its heap and locks, the
	 * certificates' dates. */
	__NR_getrandom,
	__NR_mmap,
	__NR_munmap,
	__NR_mremap,
	__NR_mprotect,
	__NR_madvise,
	__NR_brk,
	__NR_futex,
	__NR_clock_gettime,
	__NR_gettimeofday,
	__NR_getpid,
	/* Ending, and signal returns (SIGSYS's handler). */
	__NR_exit,
	__NR_exit_group,
	__NR_rt_sigreturn,
	__NR_restart_syscall,
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* Sanitizer builds only: their allocator, reports and leak check. */
	__NR_gettid,
	__NR_sched_yield,
	__NR_rt_sigprocmask,
	__NR_tgkill,
	__NR_sigaltstack,
	__NR_rt_sigaction,
	__NR_prctl,
	__NR_ptrace,
	__NR_wait4,
	__NR_getppid,
	__NR_kill,
	__NR_clone,
	__NR_clone3,
	__NR_getdents64,
	__NR_sched_getaffinity,
	__NR_set_robust_list,
	__NR_rseq,
	__NR_uname,
#ifdef __NR_getrlimit
	__NR_getrlimit,
#endif
	__NR_prlimit64,
#endif
};

/* Async-signal-safe: says which call, then ends the process (the broker
 * sees EOF and refuses what needs a key from then on). */
static void keyproc_sigsys(int sig, siginfo_t *si, void *ctx)
{
	static const char pre[] = "sluiced-keys: seccomp: system call ";
	static const char post[] = " is not in broker/keys/keyproc.c's allowlist: exiting\n";

	(void)sig;
	(void)ctx;
	isolation_sigsys_say(pre, sizeof(pre) - 1, si->si_syscall, post, sizeof(post) - 1);
	_exit(70);
}

static int keyproc_filter(void)
{
	enum { N = sizeof(keyproc_allowed) / sizeof(keyproc_allowed[0]) };
	struct sock_filter f[4 + N + 2];
	struct sock_fprog prog = { .filter = f };
	struct sigaction sa = { .sa_sigaction = keyproc_sigsys, .sa_flags = SA_SIGINFO };
	unsigned i, k = 0;

	/* The architecture first (another ABI has other numbers), then the
	 * call's number, as isolation.c's filters. */
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, KEYS_ARCH, 1, 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	for (i = 0; i < N; i++)
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
						      (unsigned)keyproc_allowed[i],
						      (unsigned char)(N - i), 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog.len = (unsigned short)k;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) < 0)
		return -errno;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

static void refill_pool(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };

	/* Only while no request waits: a request is never behind a keygen
	 * it did not ask for. */
	while (S.npool < KEYS_POOL && poll(&p, 1, 0) == 0) {
		EVP_PKEY *k = tls_new_p256_key();
		EVP_PKEY_CTX *c;

		if (!k)
			break;
		/* A key in the legacy form is handed to OpenSSL's provider at
		 * its first signature, and kept there: done now, the CA's
		 * signature does not wait for it (0.05 ms). */
		c = EVP_PKEY_CTX_new_from_pkey(NULL, k, NULL);
		if (c)
			(void)EVP_PKEY_sign_init(c);
		EVP_PKEY_CTX_free(c);
		ERR_clear_error();
		S.pool[S.npool++] = k;
	}
}

static void __attribute__((noreturn)) keyproc_main(int sock, pid_t parent, const char *state_dir,
						   uid_t uid, gid_t gid)
{
	static unsigned char in[KEYS_MSG_MAX + 1], out[KEYS_MSG_MAX];
	struct sl_err serr = { 0 };
	int state_fd, keys_fd, spare;
	char ready = 1;

	if (isolation_helper_begin(sock, parent, "sluiced-keys") < 0)
		_exit(1);
	/* The key directory, made or taken (chown, 0700) as root. */
	state_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (state_fd < 0 || (mkdirat(state_fd, KEYS_DIR, 0700) < 0 && errno != EEXIST)) {
		log_err("sluiced-keys: `%s/%s`: %s", state_dir, KEYS_DIR, strerror(errno));
		_exit(1);
	}
	keys_fd = openat(state_fd, KEYS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (keys_fd < 0 || fchown(keys_fd, uid, gid) < 0 || fchmod(keys_fd, 0700) < 0) {
		log_err("sluiced-keys: `%s/%s`: %s", state_dir, KEYS_DIR, strerror(errno));
		_exit(1);
	}
	migrate(state_fd, keys_fd, uid, gid);
	close(state_fd);
	if (isolation_switch_user(uid, gid, &serr) < 0) {
		log_err("sluiced-keys: %s", sl_err_msg(&serr));
		_exit(1);
	}
	/* Spare inodes for its key files (common/file.c), as its user and
	 * before the filter: a CA dropped leaves its file's inode to the next
	 * CA made. Without them the files are made afresh. */
	spare = file_spare_init_at(keys_fd, FILE_SPARE_DIR);
	if (spare < 0)
		log_warn("sluiced-keys: `%s/%s/%s`: %s; key files are made afresh each time",
			 state_dir, KEYS_DIR, FILE_SPARE_DIR, strerror(-spare));
	/* The switch may have made it dumpable again (suid_dumpable). */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    keyproc_filter() < 0) {
		log_err("sluiced-keys: cannot confine itself: %s", strerror(errno));
		_exit(1);
	}
	keys_server_init(keys_fd);
	if (send(sock, &ready, 1, MSG_NOSIGNAL) != 1)
		_exit(1);
	refill_pool(sock);
	for (;;) {
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} c;
		struct iovec iov = { .iov_base = in, .iov_len = sizeof(in) };
		struct msghdr m = { .msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = c.buf,
				    .msg_controllen = sizeof(c.buf) };
		struct cmsghdr *cm;
		ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
		int fd = -1;
		size_t a;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); /* the broker closed its end, or is gone */
		/* One descriptor at most, with JWT_LOAD; any other is closed
		 * unread (MSG_CTRUNC: the kernel closed what did not fit). */
		cm = CMSG_FIRSTHDR(&m);
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
		if (fd >= 0 && (m.msg_flags & MSG_CTRUNC || (size_t)n < sizeof(uint32_t) ||
				*(const uint32_t *)in != KEYS_JWT_LOAD)) {
			close(fd);
			fd = -1;
		}
		a = keys_serve_one(in, (size_t)n, fd, out, sizeof(out));
		if (fd >= 0)
			close(fd);
		while (send(sock, out, a, MSG_NOSIGNAL) < 0 && errno == EINTR)
			;
		OPENSSL_cleanse(in, sizeof(in));
		refill_pool(sock);
	}
}

int keys_start(const char *state_dir, uid_t uid, gid_t gid, struct sl_err *err)
{
	struct timeval tv = { .tv_sec = 30 };
	pid_t parent = getpid(), pid;
	char ready = 0;
	int sv[2], e;

	if (uid == 0 || gid == 0)
		return sl_err_set(err, 0, "key process: %u:%u is not an unprivileged user",
				  (unsigned)uid, (unsigned)gid);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return sl_err_sys(err, errno, "key process: socketpair");
	/* What the parent has buffered is not written twice. */
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		e = errno;
		close(sv[0]);
		close(sv[1]);
		return sl_err_sys(err, e, "key process: fork");
	}
	if (pid == 0) {
		close(sv[0]);
		keyproc_main(sv[1], parent, state_dir, uid, gid);
	}
	close(sv[1]);
	/* The take-over of old keys may take a while (a keygen-free read and
	 * write per sandbox); then each answer within the opener's 5 s. */
	if (setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    recv(sv[0], &ready, 1, 0) != 1 || ready != 1) {
		close(sv[0]);
		/* Errno 0: the child's own line says why, not this recv(). */
		sl_err_set(err, 0, "key process: it did not start (its own line above says why)");
		return -EIO;
	}
	tv.tv_sec = 5;
	if (setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		e = errno;
		close(sv[0]);
		return sl_err_sys(err, e, "key process: setsockopt");
	}
	keys_client_set(sv[0], pid);
	return 0;
}
