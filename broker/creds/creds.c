// SPDX-License-Identifier: MIT
/* The broker's credentials: secrets and token sources loaded with each
 * policy, and each sandbox's placeholders.
 *
 * Theory of operation: a policy's credentials are read when the policy is
 * loaded or reloaded and attached to the compiled policy, so a connection
 * that holds the policy holds what it may inject, and it is wiped when the
 * last holder lets go. A file or env secret is read there and then; an
 * oauth2 credential reads its client secret and holds a reference on a
 * shared token cache entry (tokens.c: fetched and refreshed by a
 * background thread); a jwt credential loads its signing key. For each
 * request, creds_acquire() hands the proxy the current value of each
 * credential it needs: the secret itself, a copy of the cached access
 * token, or a JWT minted for (sandbox, host), kept for reuse until
 * shortly before it expires. A sandbox's placeholders, and its grants
 * (when each credential's ttl ends for it: the ttl bounds injection as
 * well as placeholders), live in its creds_table; they are written to
 * state_dir/placeholders/NAME (mode 0600: placeholders and expiries,
 * never secrets) so that a broker restart keeps the sandbox's
 * environment valid and its ttls running, and revoked with the sandbox,
 * as are its minted JWTs. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "broker/broker_internal.h"
#include "broker/creds/creds_internal.h"
#include "common/err.h"
#include "common/file.h"
#include "common/log.h"
#include "common/siphash.h"
#include "common/sumfile.h"
#include "policy/policy.h"

/* What one credential of a loaded policy draws its value from. */
struct source {
	struct creds_secret secret;	  /* file, env */
	struct creds_tokens_entry *token; /* oauth2 */
	EVP_PKEY *key;			  /* jwt */
	char *kid;			  /* jwt: given, else the key's thumbprint */
	char thumb[48];			  /* jwt: RFC 7638 thumbprint, base64url */
	const char *name;		  /* the credential's (its policy outlives this) */
};

struct secrets {
	size_t n;
	struct source *src;		 /* by policy credential index */
	const struct creds_secret **ptr; /* file/env secrets, as creds_secrets() gives them */
	uint64_t id;			 /* this load, in the JWT cache */
	bool has_jwt;
	struct secrets *next, *prev; /* the jwt list, for creds_jwks() */
};

static char ph_dir[300];
/* The broker's configuration (creds_init()), which outlives this module:
 * what the token fetcher is started with. */
static const struct broker_config *fetch_cfg;
#define PH_KIND "placeholders"
/* A placeholders file is a few lines per credential. */
#define PH_FILE_MAX (1 << 20)

/* Loaded policies that hold jwt keys; their keys make the JWK Set. */
static struct {
	pthread_mutex_t lock;
	struct secrets *head;
	uint64_t next_id;
} jwt_keys = { .lock = PTHREAD_MUTEX_INITIALIZER, .next_id = 1 };

/* ---- minted JWTs, kept per (credential of one load, sandbox, host) ---------- */

#define JWT_CACHE_BUCKETS 1024
/* Tokens kept at most; beyond, expired ones are swept, else none is kept. */
#define JWT_CACHE_MAX 8192
/* A minted token, signed with field lengths the policy bounds, fits. */
#define JWT_MAX_LEN (16 * 1024)

struct jwt_cached {
	struct jwt_cached *next;
	uint64_t owner; /* secrets->id */
	size_t idx;	/* credential index */
	char sandbox[SANDBOX_NAME_MAX + 1];
	char host[256];
	struct creds_secret token;
	uint64_t reuse_until; /* wall clock, seconds */
};

static struct {
	pthread_mutex_t lock;
	struct jwt_cached *bucket[JWT_CACHE_BUCKETS];
	size_t n;
	uint64_t k0, k1;
} jwt_cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

static size_t jwt_bucket(uint64_t owner, size_t idx, const char *sandbox, const char *host)
{
	char key[sizeof(uint64_t) * 2 + SANDBOX_NAME_MAX + 1 + 256 + 1];
	size_t sl = strlen(sandbox), hl = strlen(host), o = 0;
	uint64_t ix = idx;

	if (sl > SANDBOX_NAME_MAX)
		sl = SANDBOX_NAME_MAX;
	if (hl > 255)
		hl = 255;
	memcpy(key, &owner, sizeof(owner));
	o += sizeof(owner);
	memcpy(key + o, &ix, sizeof(ix));
	o += sizeof(ix);
	memcpy(key + o, sandbox, sl);
	o += sl;
	key[o++] = '\0';
	memcpy(key + o, host, hl);
	o += hl;
	return (size_t)(siphash24(jwt_cache.k0, jwt_cache.k1, key, o) % JWT_CACHE_BUCKETS);
}

static void jwt_cached_free(struct jwt_cached *c)
{
	creds_secret_free(&c->token);
	free(c);
}

/* Drops the entries @match selects; with the cache's lock held. */
static void jwt_cache_drop(bool (*match)(const struct jwt_cached *, const void *), const void *arg)
{
	size_t b;

	for (b = 0; b < JWT_CACHE_BUCKETS; b++) {
		struct jwt_cached **pp = &jwt_cache.bucket[b];

		while (*pp) {
			struct jwt_cached *c = *pp;

			if (match(c, arg)) {
				*pp = c->next;
				jwt_cached_free(c);
				jwt_cache.n--;
			} else {
				pp = &c->next;
			}
		}
	}
}

static bool by_owner(const struct jwt_cached *c, const void *arg)
{
	return c->owner == *(const uint64_t *)arg;
}

static bool by_sandbox(const struct jwt_cached *c, const void *arg)
{
	return strcmp(c->sandbox, arg) == 0;
}

static bool stale(const struct jwt_cached *c, const void *arg)
{
	return c->reuse_until <= *(const uint64_t *)arg;
}

/*
 * How long a minted token is reused: until a tenth of its life (1 s to
 * 60 s) before it expires, so that a token handed out is never about to
 * expire on its way. A 1 s token is never reused.
 */
static uint64_t jwt_reuse_sec(uint64_t ttl)
{
	uint64_t early = ttl / 10;

	if (early < 1)
		early = 1;
	if (early > 60)
		early = 60;
	return ttl > early ? ttl - early : 0;
}

/* A token for credential @idx of @sec, for @sandbox calling @host, in @out. */
static int jwt_get(const struct secrets *sec, const struct policy_credential *c, size_t idx,
		   const char *sandbox, const char *host, struct creds_secret *out)
{
	const struct source *src = &sec->src[idx];
	uint64_t now = (uint64_t)time(NULL), reuse = jwt_reuse_sec(c->jwt.ttl_sec);
	struct jwt_cached *e, *fresh = NULL;
	size_t b = jwt_bucket(sec->id, idx, sandbox, host);
	char *buf;
	int n, r;

	pthread_mutex_lock(&jwt_cache.lock);
	for (e = jwt_cache.bucket[b]; e; e = e->next) {
		if (e->owner == sec->id && e->idx == idx && strcmp(e->sandbox, sandbox) == 0 &&
		    strcmp(e->host, host) == 0)
			break;
	}
	if (e && now < e->reuse_until) {
		r = creds_secret_set(out, e->token.buf, e->token.len);
		pthread_mutex_unlock(&jwt_cache.lock);
		return r;
	}
	pthread_mutex_unlock(&jwt_cache.lock);

	/* Signing takes tens of microseconds: outside the lock. */
	buf = malloc(JWT_MAX_LEN);
	if (!buf)
		return -ENOMEM;
	n = creds_jwt_mint(src->key, src->kid, c->jwt.issuer, sandbox, host, c->jwt.scope, now,
			   c->jwt.ttl_sec, buf, JWT_MAX_LEN);
	r = n < 0 ? n : creds_secret_set(out, buf, (size_t)n);
	if (r == 0 && reuse > 0 && strlen(sandbox) <= SANDBOX_NAME_MAX && strlen(host) < 256) {
		fresh = calloc(1, sizeof(*fresh));
		if (fresh && creds_secret_set(&fresh->token, buf, (size_t)n) == 0) {
			fresh->owner = sec->id;
			fresh->idx = idx;
			snprintf(fresh->sandbox, sizeof(fresh->sandbox), "%s", sandbox);
			snprintf(fresh->host, sizeof(fresh->host), "%s", host);
			fresh->reuse_until = now + reuse;
		} else {
			free(fresh);
			fresh = NULL;
		}
	}
	OPENSSL_cleanse(buf, JWT_MAX_LEN);
	free(buf);
	if (!fresh)
		return r;

	pthread_mutex_lock(&jwt_cache.lock);
	/* Replace the stale one (or one another worker minted meanwhile). */
	{
		struct jwt_cached **pp = &jwt_cache.bucket[b];

		while (*pp) {
			struct jwt_cached *o = *pp;

			if (o->owner == sec->id && o->idx == idx &&
			    strcmp(o->sandbox, sandbox) == 0 && strcmp(o->host, host) == 0) {
				*pp = o->next;
				jwt_cached_free(o);
				jwt_cache.n--;
				break;
			}
			pp = &o->next;
		}
	}
	if (jwt_cache.n >= JWT_CACHE_MAX)
		jwt_cache_drop(stale, &now);
	if (jwt_cache.n < JWT_CACHE_MAX) {
		fresh->next = jwt_cache.bucket[b];
		jwt_cache.bucket[b] = fresh;
		jwt_cache.n++;
		fresh = NULL;
	}
	pthread_mutex_unlock(&jwt_cache.lock);
	if (fresh)
		jwt_cached_free(fresh);
	return r;
}

/* ---- loading a policy's credentials ----------------------------------------- */

static void secrets_free(void *arg)
{
	struct secrets *sec = arg;
	size_t i;

	if (!sec)
		return;
	if (sec->has_jwt) {
		pthread_mutex_lock(&jwt_keys.lock);
		if (sec->prev)
			sec->prev->next = sec->next;
		else if (jwt_keys.head == sec)
			jwt_keys.head = sec->next;
		if (sec->next)
			sec->next->prev = sec->prev;
		pthread_mutex_unlock(&jwt_keys.lock);
		pthread_mutex_lock(&jwt_cache.lock);
		jwt_cache_drop(by_owner, &sec->id);
		pthread_mutex_unlock(&jwt_cache.lock);
	}
	for (i = 0; sec->src && i < sec->n; i++) {
		struct source *src = &sec->src[i];

		creds_secret_free(&src->secret);
		creds_tokens_put(src->token);
		creds_jwt_key_free(src->key);
		free(src->kid);
	}
	free(sec->src);
	free(sec->ptr);
	free(sec);
}

int creds_init(const struct broker_config *cfg)
{
	const char *state_dir = cfg->state_dir;

	fetch_cfg = cfg;
	/* The JWT cache's hash key: the hosts hashed come from sandboxes. */
	if (RAND_bytes((unsigned char *)&jwt_cache.k0, sizeof(jwt_cache.k0)) != 1 ||
	    RAND_bytes((unsigned char *)&jwt_cache.k1, sizeof(jwt_cache.k1)) != 1)
		return -EIO;
	snprintf(ph_dir, sizeof(ph_dir), "%s/placeholders", state_dir);
	if (mkdir(ph_dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

void creds_shutdown(void)
{
	creds_tokens_stop();
}

/* The fetcher starts with the first oauth2 credential, on the broker's
 * upstream trust, resolvers and timeouts (as they are then). */
static int start_fetcher(struct sl_err *err)
{
	struct creds_tokens_config tc = {
		.upstream_ca = fetch_cfg->upstream_ca,
		.resolvers = fetch_cfg->upstream_resolvers,
		.connect_timeout_ms = fetch_cfg->connect_timeout_ms,
		.resolve_timeout_ms = fetch_cfg->resolve_timeout_ms,
		.fetch_timeout_ms = fetch_cfg->response_timeout_ms,
	};

	return creds_tokens_start(&tc, err);
}

/* RFC 7638: SHA-256 of the required members, in order, without spaces. */
static int jwk_thumbprint(EVP_PKEY *key, char out[48])
{
	unsigned char x[32], y[32], md[SHA256_DIGEST_LENGTH];
	char xs[48], ys[48], json[200];
	BIGNUM *bx = NULL, *by = NULL;
	size_t xl = sizeof(x);
	int n = -1;

	if (EVP_PKEY_is_a(key, "ED25519")) {
		if (EVP_PKEY_get_raw_public_key(key, x, &xl) == 1 && xl == 32 &&
		    creds_base64_encode(x, 32, true, xs, sizeof(xs)) > 0)
			n = snprintf(json, sizeof(json),
				     "{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"%s\"}", xs);
	} else if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &bx) == 1 &&
		   EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &by) == 1 &&
		   BN_bn2binpad(bx, x, 32) == 32 && BN_bn2binpad(by, y, 32) == 32 &&
		   creds_base64_encode(x, 32, true, xs, sizeof(xs)) > 0 &&
		   creds_base64_encode(y, 32, true, ys, sizeof(ys)) > 0) {
		n = snprintf(json, sizeof(json),
			     "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}", xs,
			     ys);
	}
	BN_free(bx);
	BN_free(by);
	ERR_clear_error();
	if (n <= 0 || (size_t)n >= sizeof(json))
		return -EINVAL;
	SHA256((const unsigned char *)json, (size_t)n, md);
	return creds_base64_encode(md, sizeof(md), true, out, 48) < 0 ? -EINVAL : 0;
}

static int load_one(const struct policy_credential *c, struct source *src, bool *new_token,
		    struct sl_err *err)
{
	struct creds_secret cs = { 0 };
	int r;

	switch (c->source_kind) {
	case POLICY_SOURCE_FILE:
	case POLICY_SOURCE_ENV:
		return creds_secret_load(c, &src->secret, err);
	case POLICY_SOURCE_OAUTH2:
		/* The client secret, read at every load: a rotated file
		 * takes effect with the reload. */
		r = creds_secret_load(c, &cs, err);
		if (r < 0) {
			sl_err_wrap(err, "credential `%s`: client_secret_file", c->name);
			return r;
		}
		r = start_fetcher(err);
		if (r < 0) {
			creds_secret_free(&cs);
			sl_err_wrap(err, "credential `%s`", c->name);
			return r;
		}
		src->token = creds_tokens_get(c, &cs);
		r = src->token ? 0 : -errno;
		creds_secret_free(&cs);
		if (r < 0)
			return sl_err_sys(err, r, "credential `%s`", c->name);
		*new_token = true;
		return 0;
	case POLICY_SOURCE_JWT:
		r = creds_jwt_key_load(c->source, &src->key, err);
		if (r < 0) {
			sl_err_wrap(err, "credential `%s`: key_file", c->name);
			return r;
		}
		r = jwk_thumbprint(src->key, src->thumb);
		if (r < 0) {
			sl_err_set(err, 0, "credential `%s`: key_file: unusable key", c->name);
			return r;
		}
		src->kid = strdup(c->jwt.kid ? c->jwt.kid : src->thumb);
		if (!src->kid)
			return sl_err_set(err, ENOMEM, "out of memory");
		return 0;
	}
	return sl_err_set(err, 0, "credential `%s`: unknown source", c->name);
}

/* Does @a's kid name another key than @b's? */
static bool kid_clash_one(const struct source *a, const struct source *b)
{
	return a->key && b->key && !strcmp(a->kid, b->kid) && strcmp(a->thumb, b->thumb);
}

/*
 * A kid is what a verifier picks a key of the JWK Set by: two keys under
 * one kid (in this policy, or in one loaded already, another sandbox's or
 * the one a reload replaces) would make tokens of one of them fail to
 * verify, or a verifier trust the wrong key. Refused; a new key takes a
 * new kid. Caller holds jwt_keys.lock. Return: 0 or -EEXIST (@err says, with
 * errno 0: a refusal).
 */
static int kid_clash(const struct secrets *sec, struct sl_err *err)
{
	const struct secrets *o;
	size_t i, j;

	for (i = 0; i < sec->n; i++) {
		const struct source *a = &sec->src[i];

		for (j = 0; j < i; j++) {
			if (kid_clash_one(a, &sec->src[j]))
				goto clash_here;
		}
		for (o = jwt_keys.head; o; o = o->next) {
			for (j = 0; j < o->n; j++) {
				if (kid_clash_one(a, &o->src[j])) {
					sl_err_set(err, 0,
						   "credential `%s`: kid `%s` names another key "
						   "already (credential `%s` of a loaded policy); "
						   "give each key its own kid",
						   a->name, a->kid, o->src[j].name);
					return -EEXIST;
				}
			}
		}
		continue;
clash_here:
		sl_err_set(err, 0,
			   "credential `%s`: kid `%s` names another key already (credential `%s`); "
			   "give each key its own kid",
			   a->name, a->kid, sec->src[j].name);
		return -EEXIST;
	}
	return 0;
}

int creds_load_secrets(struct policy *p, struct sl_err *err)
{
	size_t i, n = policy_credential_count(p);
	uint64_t waited_from;
	struct secrets *sec;
	bool tokens = false;
	int r;

	if (n == 0)
		return 0;
	sec = calloc(1, sizeof(*sec));
	if (!sec)
		return sl_err_set(err, ENOMEM, "out of memory");
	sec->n = n;
	sec->src = calloc(n, sizeof(*sec->src));
	sec->ptr = calloc(n, sizeof(*sec->ptr));
	if (!sec->src || !sec->ptr) {
		secrets_free(sec);
		return sl_err_set(err, ENOMEM, "out of memory");
	}
	for (i = 0; i < n; i++) {
		const struct policy_credential *c = policy_credential_get(p, i);

		/* Fail closed: a credential that cannot be had makes the
		 * policy unusable, rather than requests without it. */
		r = load_one(c, &sec->src[i], &tokens, err);
		if (r < 0) {
			secrets_free(sec);
			return r;
		}
		sec->src[i].name = c->name;
		if (c->source_kind == POLICY_SOURCE_FILE || c->source_kind == POLICY_SOURCE_ENV)
			sec->ptr[i] = &sec->src[i].secret;
		if (c->source_kind == POLICY_SOURCE_JWT)
			sec->has_jwt = true;
	}
	if (sec->has_jwt) {
		pthread_mutex_lock(&jwt_keys.lock);
		r = kid_clash(sec, err);
		if (r < 0) {
			pthread_mutex_unlock(&jwt_keys.lock);
			secrets_free(sec);
			return r;
		}
		sec->id = jwt_keys.next_id++;
		sec->next = jwt_keys.head;
		if (jwt_keys.head)
			jwt_keys.head->prev = sec;
		jwt_keys.head = sec;
		pthread_mutex_unlock(&jwt_keys.lock);
	}
	policy_attach(p, sec, secrets_free);
	if (!tokens)
		return 0;
	/*
	 * A token endpoint seen for the first time: wait (bounded, on the
	 * control thread, never a worker) for its first answer, so that the
	 * new sandbox's first request finds the token. One already cached
	 * (a reload, another sandbox) returns at once.
	 */
	{
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		waited_from = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	}
	for (i = 0; i < n; i++) {
		struct timespec ts;
		uint64_t now;

		if (!sec->src[i].token)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
		if (now - waited_from >= CREDS_TOKENS_FIRST_WAIT_MS)
			break;
		creds_tokens_wait_first(sec->src[i].token, (unsigned)(CREDS_TOKENS_FIRST_WAIT_MS -
								      (now - waited_from)));
	}
	return 0;
}

const struct creds_secret *const *creds_secrets(const struct policy *p)
{
	const struct secrets *sec = policy_attachment(p);

	return sec ? sec->ptr : NULL;
}

int creds_acquire(const struct policy *p, const struct sandbox *sb, const char *host,
		  const struct creds_plan *plan, const struct creds_secret **out,
		  struct creds_secret *held)
{
	const struct secrets *sec = policy_attachment(p);
	size_t i, nheld = 0;
	int r;

	if (!sec || plan->nuse > CREDS_MAX_USES)
		return -ENOKEY;
	for (i = 0; i < plan->nuse; i++) {
		int idx = plan->use[i];
		const struct policy_credential *c;
		const struct source *src;

		if (idx < 0 || idx >= CREDS_MAX || (size_t)idx >= sec->n)
			return -ENOKEY;
		c = policy_credential_get(p, (size_t)idx);
		src = &sec->src[idx];
		switch (c->source_kind) {
		case POLICY_SOURCE_FILE:
		case POLICY_SOURCE_ENV:
			if (!src->secret.len)
				return -ENOKEY;
			out[idx] = &src->secret;
			continue;
		case POLICY_SOURCE_OAUTH2:
			if (!src->token)
				return -ENOKEY;
			r = creds_tokens_copy(src->token, &held[nheld]);
			break;
		case POLICY_SOURCE_JWT:
			/* sub = the sandbox, aud = the host the request goes to. */
			if (!src->key || !sb || !host || !*host)
				return -ENOKEY;
			r = jwt_get(sec, c, (size_t)idx, sb->name, host, &held[nheld]);
			break;
		default:
			return -ENOKEY;
		}
		if (r < 0)
			return r == -ENOMEM ? r : r == -EAGAIN ? r : -ENOKEY;
		out[idx] = &held[nheld++];
	}
	return 0;
}

void creds_release(struct creds_secret *held)
{
	size_t i;

	for (i = 0; i < CREDS_MAX_USES; i++)
		creds_secret_free(&held[i]);
}

struct jwk_ref {
	EVP_PKEY *key;
	const char *kid;
	const char *thumb;
};

static int jwk_cmp(const void *a, const void *b)
{
	const struct jwk_ref *x = a, *y = b;
	int c = strcmp(x->thumb, y->thumb);

	return c ? c : strcmp(x->kid, y->kid);
}

size_t creds_jwt_cached(void)
{
	size_t n;

	pthread_mutex_lock(&jwt_cache.lock);
	n = jwt_cache.n;
	pthread_mutex_unlock(&jwt_cache.lock);
	return n;
}

int creds_jwks(char *out, size_t len)
{
	struct jwk_ref *refs = NULL;
	EVP_PKEY **keys = NULL;
	const char **kids = NULL;
	struct secrets *sec;
	size_t i, n = 0, m = 0;
	int r;

	pthread_mutex_lock(&jwt_keys.lock);
	for (sec = jwt_keys.head; sec; sec = sec->next) {
		for (i = 0; i < sec->n; i++)
			n += sec->src[i].key != NULL;
	}
	refs = calloc(n ? n : 1, sizeof(*refs));
	keys = calloc(n ? n : 1, sizeof(*keys));
	kids = calloc(n ? n : 1, sizeof(*kids));
	if (!refs || !keys || !kids) {
		r = -ENOMEM;
		goto out;
	}
	n = 0;
	for (sec = jwt_keys.head; sec; sec = sec->next) {
		for (i = 0; i < sec->n; i++) {
			if (sec->src[i].key)
				refs[n++] = (struct jwk_ref){ sec->src[i].key, sec->src[i].kid,
							      sec->src[i].thumb };
		}
	}
	/* Every sandbox loads its own copy of a policy: one key, one entry. */
	qsort(refs, n, sizeof(*refs), jwk_cmp);
	for (i = 0; i < n; i++) {
		if (m && jwk_cmp(&refs[i], &refs[i - 1]) == 0)
			continue;
		keys[m] = refs[i].key;
		kids[m++] = refs[i].kid;
	}
	r = creds_jwks_from_keys(keys, kids, m, out, len);
out:
	pthread_mutex_unlock(&jwt_keys.lock);
	free(refs);
	free(keys);
	free(kids);
	return r;
}

static int save_one(const char *ph, const char *cred, uint64_t expires, bool revoked, void *arg)
{
	struct sumfile_writer *w = arg;

	if (!revoked)
		sumfile_line(w, "%s %s %llu", ph, cred, (unsigned long long)expires);
	return 0;
}

/* "grant NAME EXPIRES": never a placeholder. */
static int save_grant(const char *cred, uint64_t expires, bool revoked, void *arg)
{
	struct sumfile_writer *w = arg;

	if (!revoked)
		sumfile_line(w, "grant %s %llu", cred, (unsigned long long)expires);
	return 0;
}

/* Writes state_dir/placeholders/NAME whole (common/sumfile.h framing,
 * kind "placeholders"), through NAME.tmp. */
static int save(struct sandbox *sb)
{
	char path[600], tmp[620];
	struct sumfile_writer w;
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", ph_dir, sb->name) >= sizeof(path))
		return -ENAMETOOLONG;
	f = file_create_tmp(path, 0600, tmp, sizeof(tmp));
	if (!f)
		return -errno;
	sumfile_begin(&w, f, PH_KIND);
	creds_table_foreach_grant(sb->creds, save_grant, &w);
	creds_table_foreach(sb->creds, save_one, &w);
	return sumfile_commit(&w, tmp, path);
}

struct has_arg {
	const char *cred;
	uint64_t now;
	bool found;
	bool forever;	 /* one of them never expires */
	uint64_t latest; /* the latest expiry among them */
};

static int has_live(const char *ph, const char *cred, uint64_t expires, bool revoked, void *arg)
{
	struct has_arg *h = arg;

	(void)ph;
	if (revoked || strcmp(cred, h->cred) != 0 || (expires != 0 && expires <= h->now))
		return 0;
	h->found = true;
	if (expires == 0)
		h->forever = true;
	else if (expires > h->latest)
		h->latest = expires;
	return 0;
}

/*
 * Gives every credential of @p to the sandbox once (a grant: the end of
 * its ttl, counted from now, which is the sandbox's creation or the
 * reload that added the credential) and every credential with a
 * placeholder one live placeholder; called at registration (after a
 * restore too) and after a reload. The ttl bounds both the injection and
 * the placeholder, so neither is renewed here: a grant stays as first
 * given, whatever a reload does to the ttl, and a placeholder issued
 * later expires with the grant. A new sandbox starts anew.
 */
int creds_sandbox_sync(struct sandbox *sb, struct policy *p, bool issue_expired)
{
	uint64_t now = (uint64_t)time(NULL);
	size_t i;
	bool changed = false;
	int r;

	for (i = 0; i < policy_credential_count(p); i++) {
		const struct policy_credential *c = policy_credential_get(p, i);
		struct has_arg h = { .cred = c->name, .now = now };
		char ph[CREDS_PLACEHOLDER_LEN + 1];
		enum creds_ph_state st;
		uint64_t exp = 0;

		st = creds_table_grant_state(sb->creds, c->name, now, &exp);
		if (st == CREDS_PH_UNKNOWN) {
			/* State saved before grants were: a placeholder's
			 * expiry was the ttl's end. */
			struct has_arg any = { .cred = c->name, .now = 0 };

			creds_table_foreach(sb->creds, has_live, &any);
			if (any.found)
				exp = any.forever ? 0 : any.latest;
			else if (c->ttl_sec && now <= UINT64_MAX - c->ttl_sec)
				exp = now + c->ttl_sec;
			else
				exp = 0;
			r = creds_table_grant(sb->creds, c->name, exp);
			if (r < 0)
				return r;
			changed = true;
			st = exp && exp <= now ? CREDS_PH_EXPIRED : CREDS_PH_VALID;
		}
		if (!c->placeholder)
			continue;
		creds_table_foreach(sb->creds, has_live, &h);
		if (h.found)
			continue;
		if (!issue_expired) {
			/* Known but expired: it stays expired. */
			struct has_arg any = { .cred = c->name, .now = 0 };

			creds_table_foreach(sb->creds, has_live, &any);
			if (any.found)
				continue;
		}
		/* Over (or revoked): no placeholder to outlive it. */
		if (st != CREDS_PH_VALID)
			continue;
		r = creds_table_issue(sb->creds, c->name, now, exp ? exp - now : 0, ph);
		explicit_bzero(ph, sizeof(ph));
		if (r < 0)
			return r;
		changed = true;
	}
	return changed ? save(sb) : 0;
}

struct dropped_arg {
	const struct policy *p;
	char names[CREDS_MAX][CREDS_NAME_MAX + 1];
	size_t n;
};

/* Collects the credentials of live placeholders that @arg's policy has no
 * more (each once; at most CREDS_MAX a pass). */
static int find_dropped(const char *ph, const char *cred, uint64_t expires, bool revoked, void *arg)
{
	struct dropped_arg *d = arg;
	size_t i, n = policy_credential_count(d->p);

	(void)ph;
	(void)expires;
	if (revoked)
		return 0;
	for (i = 0; i < n; i++)
		if (strcmp(policy_credential_get(d->p, i)->name, cred) == 0)
			return 0;
	for (i = 0; i < d->n; i++)
		if (strcmp(d->names[i], cred) == 0)
			return 0;
	if (d->n == CREDS_MAX)
		return 1;
	snprintf(d->names[d->n++], sizeof(d->names[0]), "%s", cred);
	return 0;
}

/*
 * After `sluice update` (never a reload, whose dropped credentials only
 * read as revoked): the placeholders of credentials @p no longer has are
 * revoked for good, so that a later update that brings the credential
 * back issues a new placeholder instead of reviving the old one, and the
 * saved state forgets them. The grants stay: a credential that comes back
 * keeps the ttl it was first given.
 */
int creds_sandbox_revoke_dropped(struct sandbox *sb, const struct policy *p)
{
	struct dropped_arg *d;
	size_t i, n = 0;
	int more, r = 0;

	if (!sb->creds)
		return 0;
	d = malloc(sizeof(*d));
	if (!d)
		return -ENOMEM;
	do {
		d->p = p;
		d->n = 0;
		more = creds_table_foreach(sb->creds, find_dropped, d);
		for (i = 0; i < d->n; i++)
			n += creds_table_revoke(sb->creds, d->names[i]);
	} while (more && d->n);
	free(d);
	if (n)
		r = save(sb);
	return r;
}

/* One line of a placeholders file into the sandbox's table: "grant NAME
 * EXPIRES" or "PLACEHOLDER NAME EXPIRES". Return: 0, or -EINVAL. */
static int restore_line(struct creds_table *t, const char *s, size_t len)
{
	char line[256], *w[3], *end, *save = NULL;
	unsigned long long exp;
	int i, r = -EINVAL;

	if (len >= sizeof(line))
		return -EINVAL;
	memcpy(line, s, len);
	line[len] = '\0';
	/* Three words: "grant" or the placeholder, the credential, a time. */
	for (i = 0; i < 3; i++)
		w[i] = strtok_r(i ? NULL : line, " ", &save);
	if (w[2] && !strtok_r(NULL, " ", &save) && strlen(w[1]) <= CREDS_NAME_MAX &&
	    w[2][0] >= '0' && w[2][0] <= '9') {
		errno = 0;
		exp = strtoull(w[2], &end, 10);
		if (!errno && !*end)
			r = strcmp(w[0], "grant") == 0 ? creds_table_grant(t, w[1], exp)
						       : creds_table_insert(t, w[0], w[1], exp);
	}
	explicit_bzero(line, sizeof(line));
	return r < 0 ? -EINVAL : 0;
}

struct restore_arg {
	struct creds_table *t;
	unsigned kept; /* lines read into the table */
	unsigned bad;  /* lines that verified (or, in the old format, were
			* there) but did not parse */
};

static void restore_one(struct restore_arg *ra, const char *s, size_t len)
{
	if (restore_line(ra->t, s, len) < 0)
		ra->bad++;
	else
		ra->kept++;
}

static int restore_framed(const char *s, size_t len, bool ok, void *arg)
{
	struct restore_arg *ra = arg;

	/* A line that does not verify is not read at all: a damaged
	 * placeholder must not become a valid one. */
	if (ok)
		restore_one(ra, s, len);
	return 0;
}

/* The file of sluice 0.x: the same lines, without checksums. */
static void restore_legacy(struct restore_arg *ra, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (l)
			restore_one(ra, p, l);
		p += l + 1;
	}
}

/* Whether @p has a credential: then the sandbox had a placeholders file
 * (its grants are saved at creation and at every reload that adds one). */
static bool has_credentials(const struct policy *p)
{
	return policy_credential_count(p) > 0;
}

int creds_sandbox_init(struct sandbox *sb, struct policy *p, bool restore)
{
	struct restore_arg ra = { 0 };
	struct sumfile_result res = { .status = SUMFILE_OK };
	char path[600], *buf = NULL;
	size_t len = 0;
	int r;

	sb->creds = creds_table_new();
	if (!sb->creds)
		return -ENOMEM;
	ra.t = sb->creds;
	snprintf(path, sizeof(path), "%s/%s", ph_dir, sb->name);
	if (!restore) {
		unlink(path);
		return creds_sandbox_sync(sb, p, true);
	}
	r = file_read_all(path, PH_FILE_MAX, &buf, &len);
	if (r == 0) {
		sumfile_parse(buf, len, PH_KIND, false, restore_framed, &ra, &res);
		if (res.status == SUMFILE_LEGACY)
			restore_legacy(&ra, buf, len);
		OPENSSL_cleanse(buf, len);
		free(buf);
	}
	/*
	 * Lost placeholders are not quietly replaced: the log and the audit
	 * say what was kept and what was lost, the sandbox is marked (its
	 * `sluice list` line, and a placeholder it sends that the broker does
	 * not know is refused as placeholder-lost rather than out of scope).
	 * Credentials left without a live placeholder get new ones below, so
	 * that a process started from now on works.
	 */
	if (r == -ENOENT && has_credentials(p)) {
		log_err("creds: `%s`: placeholders file %s is missing: its placeholders and "
			"credential ttls are lost; new ones are issued (ttls counted from now); "
			"processes holding an old placeholder get 403 placeholder-lost until "
			"they are started again",
			sb->name, path);
		sb->placeholders_lost = true;
		sandbox_state_audit(sb->name, path, "missing");
	} else if (r < 0 && r != -ENOENT) {
		log_err("creds: `%s`: cannot read placeholders file %s: %s: new placeholders "
			"are issued; processes holding an old one get 403 placeholder-lost",
			sb->name, path, strerror(-r));
		sb->placeholders_lost = true;
		sandbox_state_audit(sb->name, path, "unreadable");
	} else if (r == 0 &&
		   (res.status == SUMFILE_DAMAGED || res.status == SUMFILE_EMPTY || ra.bad)) {
		log_err("creds: `%s`: placeholders file %s is %s: kept %u lines that verify, lost "
			"%u%s; credentials left without a placeholder get new ones; processes "
			"holding a lost one get 403 placeholder-lost",
			sb->name, path, res.status == SUMFILE_EMPTY ? "empty" : "damaged", ra.kept,
			res.lost + ra.bad,
			res.end_missing ? " and its end (lines after those may be lost too)" : "");
		sb->placeholders_lost = true;
		sandbox_state_audit(sb->name, path, "damaged");
	} else if (r == 0 && res.status == SUMFILE_LEGACY) {
		log_info("creds: `%s`: %s is in the format from before checksums: read once, "
			 "rewritten in the checked format",
			 sb->name, path);
	}
	r = creds_sandbox_sync(sb, p, false);
	/* Rewritten in the current format (sync saves only what changed). */
	if (r == 0 && (res.status != SUMFILE_OK || ra.bad) && has_credentials(p))
		r = save(sb);
	return r;
}

void creds_sandbox_forget(struct sandbox *sb)
{
	char path[600];

	if (sb->creds)
		creds_table_revoke(sb->creds, NULL);
	/* Its minted tokens go too: a sandbox of the same name made later
	 * gets new ones. */
	pthread_mutex_lock(&jwt_cache.lock);
	jwt_cache_drop(by_sandbox, sb->name);
	pthread_mutex_unlock(&jwt_cache.lock);
	snprintf(path, sizeof(path), "%s/%s", ph_dir, sb->name);
	unlink(path);
}

void creds_sandbox_remove_state(const char *name)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s", ph_dir, name);
	unlink(path);
}

struct env_arg {
	const struct policy *p;
	uint64_t now;
	char *out;
	size_t len, o;
	bool full;
};

static int env_one(const char *ph, const char *cred, uint64_t expires, bool revoked, void *arg)
{
	struct env_arg *e = arg;
	size_t i;

	if (revoked || (expires && expires <= e->now))
		return 0;
	for (i = 0; i < policy_credential_count(e->p); i++) {
		const struct policy_credential *c = policy_credential_get(e->p, i);
		int k;

		if (!c->placeholder || strcmp(c->name, cred) != 0)
			continue;
		k = snprintf(e->out + e->o, e->len - e->o, "%s=%s\n", c->placeholder, ph);
		if (k < 0 || (size_t)k >= e->len - e->o) {
			e->full = true;
			return 1;
		}
		e->o += (size_t)k;
	}
	return 0;
}

int creds_env(struct sandbox *sb, const struct policy *p, char *out, size_t len)
{
	struct env_arg e = { .p = p, .now = (uint64_t)time(NULL), .out = out, .len = len };

	if (len)
		out[0] = '\0';
	if (sb->creds)
		creds_table_foreach(sb->creds, env_one, &e);
	return e.full ? -ENOSPC : (int)e.o;
}
