// SPDX-License-Identifier: MIT
/* Placeholders: making them, finding them in text, and the table of those
 * one sandbox holds (placeholder -> credential, expiry, revoked). */

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "broker/creds/creds_internal.h"

/* ---- placeholders -------------------------------------------------------- */

int creds_placeholder_new(char out[CREDS_PLACEHOLDER_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[CREDS_PLACEHOLDER_HEX / 2];
	size_t i;

	if (RAND_bytes(r, sizeof(r)) != 1)
		return -EIO;
	memcpy(out, CREDS_PLACEHOLDER_PREFIX, CREDS_PLACEHOLDER_PREFIX_LEN);
	for (i = 0; i < sizeof(r); i++) {
		out[CREDS_PLACEHOLDER_PREFIX_LEN + 2 * i] = hex[r[i] >> 4];
		out[CREDS_PLACEHOLDER_PREFIX_LEN + 2 * i + 1] = hex[r[i] & 15];
	}
	out[CREDS_PLACEHOLDER_LEN] = '\0';
	OPENSSL_cleanse(r, sizeof(r));
	return 0;
}

static bool placeholder_shape(const char *p)
{
	size_t i;

	if (memcmp(p, CREDS_PLACEHOLDER_PREFIX, CREDS_PLACEHOLDER_PREFIX_LEN) != 0)
		return false;
	for (i = CREDS_PLACEHOLDER_PREFIX_LEN; i < CREDS_PLACEHOLDER_LEN; i++)
		if (creds_hexval(p[i]) < 0)
			return false;
	return true;
}

const char *creds_find_placeholder(const char *s, size_t len, size_t *off)
{
	const char *p = s, *end = s + len;

	while (p && (size_t)(end - p) >= CREDS_PLACEHOLDER_LEN) {
		p = memmem(p, (size_t)(end - p), CREDS_PLACEHOLDER_PREFIX,
			   CREDS_PLACEHOLDER_PREFIX_LEN);
		if (!p || (size_t)(end - p) < CREDS_PLACEHOLDER_LEN)
			return NULL;
		if (placeholder_shape(p)) {
			if (off)
				*off = (size_t)(p - s);
			return p;
		}
		p++;
	}
	return NULL;
}

/* ---- the placeholder table ------------------------------------------------ */

/* Bucket selection: the first two hex digits (8 bits) after the prefix. */
#define TABLE_BUCKETS 256

struct ph_entry {
	char ph[CREDS_PLACEHOLDER_LEN];
	char name[CREDS_NAME_MAX + 1];
	uint64_t expires_at; /* 0: never */
	uint64_t seq;	     /* issue order, for reuse of the oldest */
	bool revoked;
	int32_t next; /* bucket chain, -1 ends */
};

/* A credential given to the sandbox, and the end of its ttl there. */
struct grant {
	char name[CREDS_NAME_MAX + 1];
	uint64_t expires_at; /* 0: never */
	bool revoked;
};

struct creds_table {
	pthread_rwlock_t lock;
	struct ph_entry *e;
	size_t n, cap;
	uint64_t seq;
	int32_t head[TABLE_BUCKETS];
	/* Few (one per credential name the sandbox ever had): a list. */
	struct grant *g;
	size_t ng, gcap;
};

static unsigned ph_bucket(const char *ph)
{
	/* Callers checked the shape; the masks keep a bad one in range. */
	return ((unsigned)creds_hexval(ph[CREDS_PLACEHOLDER_PREFIX_LEN]) & 15) << 4 |
	       ((unsigned)creds_hexval(ph[CREDS_PLACEHOLDER_PREFIX_LEN + 1]) & 15);
}

struct creds_table *creds_table_new(void)
{
	struct creds_table *t = calloc(1, sizeof(*t));
	size_t i;

	if (!t)
		return NULL;
	if (pthread_rwlock_init(&t->lock, NULL) != 0) {
		free(t);
		return NULL;
	}
	for (i = 0; i < TABLE_BUCKETS; i++)
		t->head[i] = -1;
	return t;
}

void creds_table_free(struct creds_table *t)
{
	if (!t)
		return;
	if (t->e) {
		/* Placeholders are worthless outside, but they are still the
		 * sandbox's capabilities: leave nothing behind. */
		OPENSSL_cleanse(t->e, t->cap * sizeof(*t->e));
		free(t->e);
	}
	free(t->g);
	pthread_rwlock_destroy(&t->lock);
	free(t);
}

/* Callers hold a lock.  Return: entry index or -1. */
static int32_t table_find(const struct creds_table *t, const char *ph)
{
	int32_t i, found = -1;

	/* Walk the whole chain: its length, not the match position, is
	 * what timing shows. */
	for (i = t->head[ph_bucket(ph)]; i >= 0; i = t->e[i].next)
		if (CRYPTO_memcmp(t->e[i].ph, ph, CREDS_PLACEHOLDER_LEN) == 0)
			found = i;
	return found;
}

static void table_unlink(struct creds_table *t, int32_t idx)
{
	int32_t *pp = &t->head[ph_bucket(t->e[idx].ph)];

	while (*pp >= 0 && *pp != idx)
		pp = &t->e[*pp].next;
	if (*pp == idx)
		*pp = t->e[idx].next;
}

/* Write lock held.  A slot for a new entry, or -1 (-ENOSPC). */
static int32_t table_slot(struct creds_table *t, uint64_t now)
{
	int32_t i, best = -1;

	if (t->n == t->cap && t->cap < CREDS_TABLE_MAX) {
		size_t ncap = t->cap ? 2 * t->cap : 16;
		struct ph_entry *ne;

		if (ncap > CREDS_TABLE_MAX)
			ncap = CREDS_TABLE_MAX;
		ne = calloc(ncap, sizeof(*ne));
		if (ne) {
			if (t->e) {
				memcpy(ne, t->e, t->n * sizeof(*ne));
				OPENSSL_cleanse(t->e, t->cap * sizeof(*t->e));
				free(t->e);
			}
			t->e = ne;
			t->cap = ncap;
		}
	}
	if (t->n < t->cap)
		return (int32_t)t->n++;
	/* Full: reuse the oldest dead entry. */
	for (i = 0; i < (int32_t)t->n; i++) {
		const struct ph_entry *e = &t->e[i];

		if ((e->revoked || (e->expires_at && now >= e->expires_at)) &&
		    (best < 0 || e->seq < t->e[best].seq))
			best = i;
	}
	if (best >= 0)
		table_unlink(t, best);
	return best;
}

static int table_put(struct creds_table *t, const char *ph, const char *name, uint64_t expires_at,
		     uint64_t now)
{
	struct ph_entry *e;
	int32_t idx;
	unsigned b;

	if (table_find(t, ph) >= 0)
		return -EEXIST;
	idx = table_slot(t, now);
	if (idx < 0)
		return -ENOSPC;
	e = &t->e[idx];
	memset(e, 0, sizeof(*e));
	memcpy(e->ph, ph, CREDS_PLACEHOLDER_LEN);
	memcpy(e->name, name, strlen(name) + 1);
	e->expires_at = expires_at;
	e->seq = ++t->seq;
	b = ph_bucket(ph);
	e->next = t->head[b];
	t->head[b] = idx;
	return 0;
}

static bool cred_name_ok(const char *name)
{
	return name && name[0] && strlen(name) <= CREDS_NAME_MAX;
}

int creds_table_issue(struct creds_table *t, const char *cred_name, uint64_t now, uint64_t ttl_sec,
		      char out[CREDS_PLACEHOLDER_LEN + 1])
{
	uint64_t exp = 0;
	int ret, tries;

	if (!t || !cred_name_ok(cred_name) || !out)
		return -EINVAL;
	if (ttl_sec) {
		if (now > UINT64_MAX - ttl_sec)
			return -EINVAL;
		exp = now + ttl_sec;
	}
	pthread_rwlock_wrlock(&t->lock);
	/* A collision in 128 bits means a broken generator; do not loop. */
	for (tries = 0; tries < 2; tries++) {
		ret = creds_placeholder_new(out);
		if (ret == 0)
			ret = table_put(t, out, cred_name, exp, now);
		if (ret != -EEXIST)
			break;
	}
	pthread_rwlock_unlock(&t->lock);
	if (ret < 0)
		memset(out, 0, CREDS_PLACEHOLDER_LEN + 1);
	return ret;
}

int creds_table_insert(struct creds_table *t, const char *ph, const char *cred_name,
		       uint64_t expires_at)
{
	int ret;

	if (!t || !ph || strlen(ph) != CREDS_PLACEHOLDER_LEN || !placeholder_shape(ph) ||
	    !cred_name_ok(cred_name))
		return -EINVAL;
	pthread_rwlock_wrlock(&t->lock);
	/* "now" 0: a restore must not push out entries that may be live. */
	ret = table_put(t, ph, cred_name, expires_at, 0);
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

enum creds_ph_state creds_table_lookup(struct creds_table *t, const char *ph, uint64_t now,
				       char *name)
{
	enum creds_ph_state st = CREDS_PH_UNKNOWN;
	int32_t i;

	if (!t || !ph || !placeholder_shape(ph))
		return CREDS_PH_UNKNOWN;
	pthread_rwlock_rdlock(&t->lock);
	i = table_find(t, ph);
	if (i >= 0) {
		const struct ph_entry *e = &t->e[i];

		if (e->revoked)
			st = CREDS_PH_REVOKED;
		else if (e->expires_at && now >= e->expires_at)
			st = CREDS_PH_EXPIRED;
		else
			st = CREDS_PH_VALID;
		if (name)
			memcpy(name, e->name, strlen(e->name) + 1);
	}
	pthread_rwlock_unlock(&t->lock);
	return st;
}

size_t creds_table_revoke(struct creds_table *t, const char *cred_name)
{
	size_t i, n = 0;

	if (!t)
		return 0;
	pthread_rwlock_wrlock(&t->lock);
	for (i = 0; i < t->n; i++) {
		struct ph_entry *e = &t->e[i];

		if (e->revoked || (cred_name && strcmp(e->name, cred_name) != 0))
			continue;
		e->revoked = true;
		n++;
	}
	/* The sandbox is gone: nothing is injected for it any more. */
	for (i = 0; !cred_name && i < t->ng; i++)
		t->g[i].revoked = true;
	pthread_rwlock_unlock(&t->lock);
	return n;
}

/* Lock held.  Return: the grant of @name, or NULL. */
static struct grant *grant_find(const struct creds_table *t, const char *name)
{
	size_t i;

	for (i = 0; i < t->ng; i++)
		if (strcmp(t->g[i].name, name) == 0)
			return &t->g[i];
	return NULL;
}

int creds_table_grant(struct creds_table *t, const char *cred_name, uint64_t expires_at)
{
	struct grant *g;
	int ret = 0;

	if (!t || !cred_name_ok(cred_name))
		return -EINVAL;
	pthread_rwlock_wrlock(&t->lock);
	if (grant_find(t, cred_name)) {
		ret = -EEXIST;
		goto out;
	}
	if (t->ng == t->gcap) {
		size_t ncap = t->gcap ? 2 * t->gcap : 8;

		if (ncap > CREDS_GRANTS_MAX)
			ncap = CREDS_GRANTS_MAX;
		g = ncap > t->gcap ? realloc(t->g, ncap * sizeof(*g)) : NULL;
		if (!g) {
			ret = ncap > t->gcap ? -ENOMEM : -ENOSPC;
			goto out;
		}
		t->g = g;
		t->gcap = ncap;
	}
	g = &t->g[t->ng++];
	memset(g, 0, sizeof(*g));
	memcpy(g->name, cred_name, strlen(cred_name) + 1);
	g->expires_at = expires_at;
out:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

enum creds_ph_state creds_table_grant_state(struct creds_table *t, const char *cred_name,
					    uint64_t now, uint64_t *expires_at)
{
	enum creds_ph_state st = CREDS_PH_UNKNOWN;
	const struct grant *g;

	if (!t || !cred_name)
		return CREDS_PH_UNKNOWN;
	pthread_rwlock_rdlock(&t->lock);
	g = grant_find(t, cred_name);
	if (g) {
		if (g->revoked)
			st = CREDS_PH_REVOKED;
		else if (g->expires_at && now >= g->expires_at)
			st = CREDS_PH_EXPIRED;
		else
			st = CREDS_PH_VALID;
		if (expires_at)
			*expires_at = g->expires_at;
	}
	pthread_rwlock_unlock(&t->lock);
	return st;
}

int creds_table_foreach_grant(struct creds_table *t,
			      int (*fn)(const char *cred_name, uint64_t expires_at, bool revoked,
					void *arg),
			      void *arg)
{
	size_t i;
	int ret = 0;

	if (!t || !fn)
		return -EINVAL;
	pthread_rwlock_rdlock(&t->lock);
	for (i = 0; i < t->ng && ret == 0; i++)
		ret = fn(t->g[i].name, t->g[i].expires_at, t->g[i].revoked, arg);
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

int creds_table_foreach(struct creds_table *t,
			int (*fn)(const char *ph, const char *cred_name, uint64_t expires_at,
				  bool revoked, void *arg),
			void *arg)
{
	char ph[CREDS_PLACEHOLDER_LEN + 1];
	size_t i;
	int ret = 0;

	if (!t || !fn)
		return -EINVAL;
	pthread_rwlock_rdlock(&t->lock);
	for (i = 0; i < t->n && ret == 0; i++) {
		memcpy(ph, t->e[i].ph, CREDS_PLACEHOLDER_LEN);
		ph[CREDS_PLACEHOLDER_LEN] = '\0';
		ret = fn(ph, t->e[i].name, t->e[i].expires_at, t->e[i].revoked, arg);
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}
