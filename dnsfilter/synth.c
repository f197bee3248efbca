// SPDX-License-Identifier: MIT
/* The per-sandbox synthetic address map: one stable address of
 * synthetic_pool per allowed name, and back from the address to the name.
 *
 * Theory of operation: names are handed out addresses in order, the n-th
 * new name getting pool offset n (offset 0, the network address, is never
 * used). So the reverse map needs no table: an address's offset is the
 * index of its entry. The forward map is an open-addressing hash table of
 * entry indices, keyed by SipHash-2-4 with a random key per map, because
 * the names come from the sandbox (under a wildcard rule it picks them
 * freely) and must not be able to force long probe chains. Nothing is ever
 * removed (an address stays its name's for the sandbox's life), so there
 * are no tombstones. Names live in an arena of fixed-size chunks; the
 * entry array and the table grow by doubling up to the bound set at
 * creation. A read-write lock makes the map safe to share between the
 * worker threads that answer DNS and those that look up a connection's
 * destination. */
#include "dnsfilter/dnsfilter.h"

#include "common/addr.h"
#include "common/siphash.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* Offsets are 32-bit: a pool larger than that uses its first 2^32 - 1. */
#define SYNTH_OFFSET_MAX 0xffffffffu
/* Whatever max_names says: keeps the slot count (2 per name) in 32 bits. */
#define SYNTH_CAPACITY_MAX (1u << 30)
#define SYNTH_MIN_SLOTS 64u
#define ARENA_CHUNK (16 * 1024)

struct synth_entry {
	uint64_t hash;
	const char *name; /* in the arena, NUL-terminated */
	uint32_t len;
};

struct arena_chunk {
	struct arena_chunk *next;
	size_t used;
	char data[ARENA_CHUNK];
};

struct dns_synth {
	pthread_rwlock_t lock;
	struct sl_addr base; /* the pool's network address, host bits clear */
	unsigned plen;
	uint32_t capacity; /* names that can ever get an address */
	uint32_t n;	   /* names that have one; entry i holds offset i + 1 */
	uint32_t n_alloc;  /* entries allocated */
	struct synth_entry *entries;
	uint32_t *slots; /* entry index + 1; 0 is an empty slot */
	uint32_t mask;	 /* number of slots - 1; 0 while there is no table */
	struct arena_chunk *arena;
	uint64_t k0, k1; /* SipHash key */
	int journal;	 /* fd, or -1: each new name appended, in order */
	uint64_t journal_errors;
};

/* ---- helpers ------------------------------------------------------------ */

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Lower-case @in into @out (DNS_NAME_TEXT_MAX + 1 bytes), one trailing dot
 * dropped. Returns the length, or -EINVAL. */
static int normalize(const char *in, char *out)
{
	size_t n = strnlen(in, DNS_NAME_TEXT_MAX + 2);

	if (n > 0 && in[n - 1] == '.')
		n--;
	if (n == 0 || n > DNS_NAME_TEXT_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c <= ' ' || c > '~')
			return -EINVAL;
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		out[i] = (char)c;
	}
	out[n] = '\0';
	return (int)n;
}

/* Index of the entry for @name, or -1. Caller holds the lock. */
static int64_t find(const struct dns_synth *s, uint64_t h, const char *name, uint32_t len)
{
	uint32_t i;

	if (!s->mask)
		return -1;
	for (i = (uint32_t)h & s->mask;; i = (i + 1) & s->mask) {
		uint32_t e = s->slots[i];
		const struct synth_entry *en;

		if (!e)
			return -1;
		en = &s->entries[e - 1];
		if (en->hash == h && en->len == len && memcmp(en->name, name, len) == 0)
			return e - 1;
	}
}

static void offset_addr(const struct dns_synth *s, uint32_t off, struct sl_addr *out)
{
	uint32_t v = be32(&s->base.b[12]) + off;

	*out = s->base;
	out->b[12] = (uint8_t)(v >> 24);
	out->b[13] = (uint8_t)(v >> 16);
	out->b[14] = (uint8_t)(v >> 8);
	out->b[15] = (uint8_t)v;
}

/* Make room for one more entry. Caller holds the write lock. */
static int grow(struct dns_synth *s)
{
	uint32_t want = s->n + 1;

	if (want > s->n_alloc) {
		uint64_t na = s->n_alloc ? s->n_alloc : 16;
		struct synth_entry *ne;

		while (na < want)
			na *= 2;
		if (na > s->capacity)
			na = s->capacity;
		ne = realloc(s->entries, (size_t)na * sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		s->entries = ne;
		s->n_alloc = (uint32_t)na;
	}
	/* Keep the table at most half full: probes stay short. */
	if ((uint64_t)want * 2 > (uint64_t)s->mask + 1 || !s->mask) {
		uint64_t size = s->mask ? (uint64_t)s->mask + 1 : SYNTH_MIN_SLOTS;
		uint32_t *ns;

		while ((uint64_t)want * 2 > size)
			size *= 2;
		ns = calloc(size, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		for (uint32_t e = 0; e < s->n; e++) {
			uint32_t i = (uint32_t)s->entries[e].hash & (uint32_t)(size - 1);

			while (ns[i])
				i = (i + 1) & (uint32_t)(size - 1);
			ns[i] = e + 1;
		}
		free(s->slots);
		s->slots = ns;
		s->mask = (uint32_t)(size - 1);
	}
	return 0;
}

/* A copy of @name in the arena. Caller holds the write lock. */
static const char *arena_copy(struct dns_synth *s, const char *name, uint32_t len)
{
	struct arena_chunk *c = s->arena;
	char *p;

	if (!c || ARENA_CHUNK - c->used < len + 1) {
		c = malloc(sizeof(*c));
		if (!c)
			return NULL;
		c->next = s->arena;
		c->used = 0;
		s->arena = c;
	}
	p = c->data + c->used;
	memcpy(p, name, len);
	p[len] = '\0';
	c->used += len + 1;
	return p;
}

/* ---- public ------------------------------------------------------------- */

struct dns_synth *dns_synth_new(const struct sl_addr *net, unsigned plen, size_t max_names)
{
	struct dns_synth *s;
	uint64_t pool, cap;
	uint64_t key[2];

	if (!net || plen > 128) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (getrandom(key, sizeof(key), 0) != sizeof(key)) {
		int e = errno;

		free(s);
		errno = e ? e : EIO;
		return NULL;
	}
	s->k0 = key[0];
	s->k1 = key[1];
	s->plen = plen;
	s->base = *net;
	for (unsigned bit = plen; bit < 128; bit++)
		s->base.b[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));

	/* Addresses at offsets 1 .. pool - 1, within the low 32 bits. */
	pool = 128 - plen >= 32 ? (uint64_t)SYNTH_OFFSET_MAX + 1 : (uint64_t)1 << (128 - plen);
	cap = pool - 1;
	if (max_names < cap)
		cap = max_names;
	if (cap > SYNTH_CAPACITY_MAX)
		cap = SYNTH_CAPACITY_MAX;
	s->capacity = (uint32_t)cap;
	if (pthread_rwlock_init(&s->lock, NULL) != 0) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->journal = -1;
	return s;
}

void dns_synth_free(struct dns_synth *s)
{
	struct arena_chunk *c, *next;

	if (!s)
		return;
	for (c = s->arena; c; c = next) {
		next = c->next;
		free(c);
	}
	if (s->journal >= 0)
		close(s->journal);
	free(s->entries);
	free(s->slots);
	pthread_rwlock_destroy(&s->lock);
	free(s);
}

int dns_synth_get(struct dns_synth *s, const char *name, struct sl_addr *out)
{
	char buf[DNS_NAME_TEXT_MAX + 1];
	struct synth_entry *en;
	uint32_t len;
	uint64_t h;
	int64_t e;
	int r;

	if (!s || !name || !out)
		return -EINVAL;
	r = normalize(name, buf);
	if (r < 0)
		return r;
	len = (uint32_t)r;
	h = siphash24(s->k0, s->k1, buf, len);

	pthread_rwlock_rdlock(&s->lock);
	e = find(s, h, buf, len);
	pthread_rwlock_unlock(&s->lock);
	if (e >= 0) {
		/* Entry e holds offset e + 1 for good: no lock needed here. */
		offset_addr(s, (uint32_t)e + 1, out);
		return 0;
	}

	pthread_rwlock_wrlock(&s->lock);
	/* Another thread may have added it between the two locks. */
	e = find(s, h, buf, len);
	if (e >= 0)
		goto found;
	if (s->n >= s->capacity) {
		r = -ENOSPC;
		goto out;
	}
	r = grow(s);
	if (r < 0)
		goto out;
	en = &s->entries[s->n];
	en->name = arena_copy(s, buf, len);
	if (!en->name) {
		r = -ENOMEM;
		goto out;
	}
	en->hash = h;
	en->len = len;
	{
		uint32_t i = (uint32_t)h & s->mask;

		while (s->slots[i])
			i = (i + 1) & s->mask;
		s->slots[i] = s->n + 1;
	}
	e = s->n++;
	if (s->journal >= 0) {
		/* Under the write lock, so lines keep the order of offsets: a
		 * replay in order rebuilds the same addresses. A failed write
		 * only costs stability across a broker restart. */
		char line[DNS_NAME_TEXT_MAX + 2];

		memcpy(line, buf, len);
		line[len] = '\n';
		if (write(s->journal, line, len + 1) != (ssize_t)len + 1)
			s->journal_errors++;
	}
found:
	offset_addr(s, (uint32_t)e + 1, out);
	r = 0;
out:
	pthread_rwlock_unlock(&s->lock);
	return r;
}

int dns_synth_name(struct dns_synth *s, const struct sl_addr *a, char *name, size_t len)
{
	uint32_t off;
	int r = 0;

	if (!s || !a || !name)
		return -EINVAL;
	/* Offsets live in the low 32 bits: the rest must be the base's. */
	if (!addr_in_prefix(a, &s->base, s->plen) || memcmp(a->b, s->base.b, 12) != 0)
		return -ENOENT;
	off = be32(&a->b[12]) - be32(&s->base.b[12]);

	pthread_rwlock_rdlock(&s->lock);
	if (off == 0 || off > s->n) {
		r = -ENOENT;
	} else {
		const struct synth_entry *en = &s->entries[off - 1];

		if (en->len + 1 > len)
			r = -ENOSPC;
		else
			memcpy(name, en->name, en->len + 1);
	}
	pthread_rwlock_unlock(&s->lock);
	return r;
}

size_t dns_synth_count(struct dns_synth *s)
{
	size_t n;

	if (!s)
		return 0;
	pthread_rwlock_rdlock(&s->lock);
	n = s->n;
	pthread_rwlock_unlock(&s->lock);
	return n;
}

int dns_synth_journal(struct dns_synth *s, const char *path, bool replay)
{
	char line[DNS_NAME_TEXT_MAX + 2];
	struct sl_addr a;
	FILE *f;
	int fd;

	if (replay) {
		f = fopen(path, "re");
		if (f) {
			while (fgets(line, sizeof(line), f)) {
				line[strcspn(line, "\n")] = '\0';
				/* A bad line (torn write) still takes its offset, so
				 * later names keep theirs. */
				if (dns_synth_get(s, line, &a) < 0)
					dns_synth_get(s, "invalid.sluice.invalid", &a);
			}
			fclose(f);
		}
	}
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (replay ? 0 : O_TRUNC), 0600);
	if (fd < 0)
		return -errno;
	pthread_rwlock_wrlock(&s->lock);
	if (s->journal >= 0)
		close(s->journal);
	s->journal = fd;
	pthread_rwlock_unlock(&s->lock);
	return 0;
}
