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
 * destination.
 *
 * The journal (state_dir/synthetic/NAME.names, framed by common/sumfile.h)
 * keeps the map across broker restarts. Each record names its address
 * ("N OFFSET NAME"), so a lost or damaged record never moves the names
 * after it; and before an offset above the journalled high-water mark is
 * handed out, a new mark ("H OFFSET", SYNTH_HWM_STEP further) is written,
 * so that a replay never hands out again an offset that may have been
 * given, even when the records of the last names are lost. An offset a
 * replay cannot account for stays a hole: never given to any name. */
#include "dnsfilter/dnsfilter.h"

#include "common/addr.h"
#include "common/file.h"
#include "common/siphash.h"
#include "common/sumfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* Offsets are 32-bit: a pool larger than that uses its first 2^32 - 1. */
#define SYNTH_OFFSET_MAX 0xffffffffu
/* Whatever max_names says: keeps the slot count (2 per name) in 32 bits. */
#define SYNTH_CAPACITY_MAX (1u << 30)
#define SYNTH_MIN_SLOTS 64u
#define ARENA_CHUNK (16 * 1024)
/* Offsets reserved by one high-water mark record: one record per this many
 * new names, and at most this many offsets burnt per damaged line. */
#define SYNTH_HWM_STEP 16u
#define JOURNAL_KIND "names"
/* The largest journal replayed: every name of a full map, twice. */
#define JOURNAL_MAX ((size_t)DNS_SYNTH_MAX_NAMES * 2 * (DNS_NAME_TEXT_MAX + 32))

struct synth_entry {
	uint64_t hash;
	const char *name; /* in the arena, NUL-terminated; NULL: a hole */
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
	uint32_t n;	   /* offsets used (names and holes); entry i: offset i + 1 */
	uint32_t named;	   /* names that have an address */
	uint32_t hwm;	   /* journalled: offsets up to it may have been given */
	uint32_t floor;	   /* a replay's: offsets up to it are never handed out */
	uint32_t n_alloc;  /* entries allocated */
	struct synth_entry *entries;
	uint32_t *slots; /* entry index + 1; 0 is an empty slot */
	uint32_t mask;	 /* number of slots - 1; 0 while there is no table */
	struct arena_chunk *arena;
	uint64_t k0, k1; /* SipHash key */
	int journal;	 /* fd, or -1: each new name appended, in order */
	off_t jsize;	 /* its length, to cut a torn append off again */
	char *hwm_path;	 /* the journal's path + ".hwm": the mark again */
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

/* Make room for @want entries. Caller holds the write lock. */
static int grow(struct dns_synth *s, uint32_t want)
{
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

			if (!s->entries[e].name)
				continue; /* a hole: no name to find */

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
		s->base.b[bit / 8] &= (uint8_t)~(0x80u >> (bit % 8));

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
	free(s->hwm_path);
	free(s->entries);
	free(s->slots);
	pthread_rwlock_destroy(&s->lock);
	free(s);
}

/* Appends @line (@len bytes, framed) to the journal, whole or not at all:
 * a short write (a full disk) is cut off again, so that the next record
 * does not start inside a torn one. Caller holds the write lock. */
static int journal_append(struct dns_synth *s, const char *line, size_t len)
{
	ssize_t k = write(s->journal, line, len);
	int r = k < 0 ? -errno : 0;

	if (k == (ssize_t)len) {
		s->jsize += (off_t)len;
		return 0;
	}
	if (k > 0 && ftruncate(s->journal, s->jsize) < 0)
		s->jsize += k; /* left torn: the replay reads it as lost */
	s->journal_errors++;
	return r ? r : -ENOSPC;
}

/* Writes the mark @hwm to the journal's side file too, whole (through a
 * rename): a journal that loses its last lines whole (cut at a line's end,
 * which no checksum can see) still has its mark there. */
static int side_hwm(struct dns_synth *s, uint32_t hwm)
{
	char tmp[PATH_MAX];
	struct sumfile_writer w;
	FILE *f;

	if (!s->hwm_path)
		return 0;
	f = file_create_tmp(s->hwm_path, 0600, tmp, sizeof(tmp));
	if (!f)
		return -errno;
	sumfile_begin(&w, f, JOURNAL_KIND "-hwm");
	sumfile_line(&w, "H %u", hwm);
	return sumfile_commit(&w, tmp, s->hwm_path);
}

/* The mark in the side file, or 0 (*@bad set when there is a file that
 * does not verify). */
static uint32_t read_side_hwm(const char *path, bool *bad)
{
	struct sumfile_result res;
	unsigned long v = 0;
	char *buf, *p;
	size_t len;

	*bad = false;
	if (file_read_all(path, 4096, &buf, &len) < 0)
		return 0;
	sumfile_parse(buf, len, JOURNAL_KIND "-hwm", false, NULL, NULL, &res);
	p = strstr(buf, " H ");
	if (res.status == SUMFILE_OK && p)
		v = strtoul(p + 3, NULL, 10);
	else
		*bad = true;
	free(buf);
	return v > UINT32_MAX ? 0 : (uint32_t)v;
}

/* Journals the high-water mark @hwm. Caller holds the write lock. */
static int journal_hwm(struct dns_synth *s, uint32_t hwm)
{
	char rec[32], line[64];
	int n = snprintf(rec, sizeof(rec), "H %u", hwm);

	n = sumfile_frame(line, sizeof(line), rec, (size_t)n);
	if (n < 0)
		return n;
	/* -EIO whatever the cause: -ENOSPC would read as a full pool. */
	if (journal_append(s, line, (size_t)n) < 0)
		return -EIO;
	if (side_hwm(s, hwm) < 0)
		s->journal_errors++; /* the journal's own mark holds */
	s->hwm = hwm;
	return 0;
}

/* Gives @name (normalized, @len bytes, hash @h) the next offset, or
 * offset @at when not 0 (a replay: the offsets between stay holes).
 * Caller holds the write lock. Return: the entry index, or a negative
 * errno. */
static int64_t add(struct dns_synth *s, uint64_t h, const char *name, uint32_t len, uint32_t at)
{
	uint32_t off = at ? at : (s->n > s->floor ? s->n : s->floor) + 1, i;
	struct synth_entry *en;
	int r;

	if (off <= s->n || off > s->capacity)
		return off <= s->n ? -EEXIST : -ENOSPC;
	if (!at && s->journal >= 0 && off > s->hwm) {
		/* Reserve before handing out: an offset that a restart could
		 * not account for must never be given. A mark that cannot be
		 * written refuses the name (fail closed), rather than risk
		 * giving its address to another name after a restart. */
		uint64_t hwm = (uint64_t)off - 1 + SYNTH_HWM_STEP;

		r = journal_hwm(s, hwm > s->capacity ? s->capacity : (uint32_t)hwm);
		if (r < 0)
			return r;
	}
	r = grow(s, off);
	if (r < 0)
		return r;
	en = &s->entries[off - 1];
	en->name = arena_copy(s, name, len);
	if (!en->name)
		return -ENOMEM;
	for (i = s->n; i < off - 1; i++)
		memset(&s->entries[i], 0, sizeof(s->entries[i]));
	en->hash = h;
	en->len = len;
	i = (uint32_t)h & s->mask;
	while (s->slots[i])
		i = (i + 1) & s->mask;
	s->slots[i] = off;
	s->n = off;
	s->named++;
	if (!at && s->journal >= 0) {
		/* Under the write lock, in the order of offsets. A record that
		 * fails costs the name its address after a restart (the mark
		 * keeps the address from anyone else). */
		char rec[DNS_NAME_TEXT_MAX + 16], line[DNS_NAME_TEXT_MAX + 40];
		int n = snprintf(rec, sizeof(rec), "N %u %s", off, en->name);

		n = sumfile_frame(line, sizeof(line), rec, (size_t)n);
		if (n > 0)
			journal_append(s, line, (size_t)n);
	}
	return off - 1;
}

int dns_synth_get(struct dns_synth *s, const char *name, struct sl_addr *out)
{
	char buf[DNS_NAME_TEXT_MAX + 1];
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
	if (e < 0)
		e = add(s, h, buf, len, 0);
	if (e >= 0)
		offset_addr(s, (uint32_t)e + 1, out);
	pthread_rwlock_unlock(&s->lock);
	return e < 0 ? (int)e : 0;
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
	if (off == 0 || off > s->n || !s->entries[off - 1].name) {
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
	n = s->named;
	pthread_rwlock_unlock(&s->lock);
	return n;
}

/* ---- the journal's replay ------------------------------------------------ */

struct replay {
	struct dns_synth *s;
	struct dns_synth_replay *rep;
	uint32_t max_seen;	 /* the highest offset any good record names */
	uint32_t hwm;		 /* the highest good mark */
	uint32_t lost_since_hwm; /* damaged lines after the last good mark */
	unsigned conflicts;	 /* good records naming a taken name or offset */
};

/* Places @name at offset @off, when both are free. */
static int place(struct replay *rp, const char *name, size_t nlen, uint32_t off)
{
	char buf[DNS_NAME_TEXT_MAX + 1], raw[DNS_NAME_TEXT_MAX + 2];
	uint64_t h;
	int r;

	if (nlen >= sizeof(raw))
		return -EINVAL;
	memcpy(raw, name, nlen);
	raw[nlen] = '\0';
	r = normalize(raw, buf);
	if (r < 0)
		return r;
	h = siphash24(rp->s->k0, rp->s->k1, buf, (uint32_t)r);
	if (find(rp->s, h, buf, (uint32_t)r) >= 0)
		return -EEXIST;
	return add(rp->s, h, buf, (uint32_t)r, off) < 0 ? -EEXIST : 0;
}

static int replay_line(const char *p, size_t len, bool ok, void *arg)
{
	struct replay *rp = arg;
	unsigned long v;
	char *end, num[16];
	size_t k;

	/* A line that does not verify is lost; it may have been a mark, so
	 * the next offset handed out stays a step above for each. */
	if (!ok)
		goto lost;
	if (len < 3 || p[1] != ' ' || (p[0] != 'N' && p[0] != 'H'))
		goto lost;
	for (k = 2; k < len && k - 2 < sizeof(num) - 1 && p[k] >= '0' && p[k] <= '9'; k++)
		num[k - 2] = p[k];
	num[k - 2] = '\0';
	errno = 0;
	v = strtoul(num, &end, 10);
	if (!num[0] || errno || v > rp->s->capacity || (p[0] == 'N' && v == 0))
		goto lost;
	if (p[0] == 'H') {
		if (k != len)
			goto lost;
		if (v > rp->hwm)
			rp->hwm = (uint32_t)v;
		rp->lost_since_hwm = 0;
		return 0;
	}
	if (k >= len || p[k] != ' ')
		goto lost;
	if (v > rp->max_seen)
		rp->max_seen = (uint32_t)v;
	/* A name or an offset already placed (records out of order) keeps
	 * its first record; this one is lost, its offset kept from anyone. */
	if (place(rp, p + k + 1, len - k - 1, (uint32_t)v) < 0) {
		rp->conflicts++;
		return 0;
	}
	rp->rep->kept++;
	return 0;
lost:
	rp->lost_since_hwm++;
	return 0;
}

/* The journal of sluice 0.x: one name a line, the n-th line offset n. */
static void replay_legacy(struct replay *rp, const char *buf, size_t len)
{
	const char *p = buf, *endp = buf + len;
	uint32_t off = 0;

	while (p < endp && off < rp->s->capacity) {
		const char *nl = memchr(p, '\n', (size_t)(endp - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(endp - p);

		off++;
		/* A torn or bad line still takes its offset (a hole), so
		 * later names keep theirs. */
		if (!nl || place(rp, p, l, off) < 0)
			rp->rep->lost++;
		else
			rp->rep->kept++;
		rp->max_seen = off;
		p += l + 1;
	}
}

/* Writes the map whole as a new journal at @path (through @path.tmp):
 * every name with its offset, then the mark. Caller holds the lock. */
static int journal_rewrite(struct dns_synth *s, const char *path)
{
	char tmp[PATH_MAX];
	struct sumfile_writer w;
	uint32_t i;
	FILE *f;

	f = file_create_tmp(path, 0600, tmp, sizeof(tmp));
	if (!f)
		return -errno;
	sumfile_begin(&w, f, JOURNAL_KIND);
	for (i = 0; i < s->n; i++)
		if (s->entries[i].name)
			sumfile_line(&w, "N %u %s", i + 1, s->entries[i].name);
	sumfile_line(&w, "H %u", s->hwm);
	if (w.err) {
		fclose(f);
		unlink(tmp);
		return w.err;
	}
	/* Open-ended: no end line; the journal goes on with appends. */
	return file_commit(f, tmp, path);
}

void dns_synth_journal_end(struct dns_synth *s)
{
	if (!s)
		return;
	pthread_rwlock_wrlock(&s->lock);
	if (s->journal >= 0)
		close(s->journal);
	s->journal = -1;
	free(s->hwm_path); /* nor the mark's */
	s->hwm_path = NULL;
	pthread_rwlock_unlock(&s->lock);
}

int dns_synth_journal(struct dns_synth *s, const char *path, bool replay,
		      struct dns_synth_replay *rep)
{
	struct dns_synth_replay dummy;
	struct sumfile_result res;
	struct replay rp;
	char *buf = NULL;
	size_t len = 0;
	uint64_t next;
	struct stat st;
	int fd, r;

	if (!rep)
		rep = &dummy;
	memset(rep, 0, sizeof(*rep));
	rp = (struct replay){ .s = s, .rep = rep };
	free(s->hwm_path);
	if (asprintf(&s->hwm_path, "%s.hwm", path) < 0)
		s->hwm_path = NULL;
	pthread_rwlock_wrlock(&s->lock);
	if (s->journal >= 0)
		close(s->journal);
	s->journal = -1; /* no appends while replaying */
	if (replay) {
		r = file_read_all(path, JOURNAL_MAX, &buf, &len);
		if (r == -ENOENT) {
			rep->missing = true;
		} else if (r < 0) {
			/* Left as it is, for whoever looks into it; the map
			 * goes on unjournalled, above the mark kept beside. */
			bool bad;

			s->floor = s->hwm_path ? read_side_hwm(s->hwm_path, &bad) : 0;
			if (s->floor > s->capacity)
				s->floor = s->capacity;
			rep->next = s->floor + 1;
			pthread_rwlock_unlock(&s->lock);
			return r;
		}
	}
	if (buf) {
		sumfile_parse(buf, len, JOURNAL_KIND, true, replay_line, &rp, &res);
		rep->legacy = res.status == SUMFILE_LEGACY;
		rep->damaged = res.status == SUMFILE_DAMAGED || rp.conflicts;
		if (rep->legacy)
			replay_legacy(&rp, buf, len);
		else
			rep->lost = res.lost + rp.conflicts + (res.header_bad ? 1 : 0);
		free(buf);
	}
	/* The next offset: above every name and mark seen, and a step above
	 * the last good mark for each line lost after it (each may have been
	 * a mark). Offsets in between stay holes. */
	next = rp.hwm + (uint64_t)SYNTH_HWM_STEP * rp.lost_since_hwm;
	if (next < rp.max_seen)
		next = rp.max_seen;
	if (next < s->n)
		next = s->n;
	if (replay && s->hwm_path) {
		bool bad;
		uint32_t side = read_side_hwm(s->hwm_path, &bad);

		rep->hwm_damaged = bad;
		if (next < side)
			next = side;
	}
	if (next > s->capacity)
		next = s->capacity;
	/* Not allocated now: the next name's entry fills the holes. */
	if (next > s->floor)
		s->floor = (uint32_t)next;
	if (s->floor < s->n)
		s->floor = s->n;
	rep->next = s->floor + 1;
	s->hwm = s->floor;
	r = journal_rewrite(s, path);
	if (r == 0)
		r = side_hwm(s, s->hwm);
	fd = r < 0 ? -1 : open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	if (r == 0 && fd < 0)
		r = -errno;
	if (fd >= 0 && fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		s->journal = fd;
		s->jsize = st.st_size;
	}
	pthread_rwlock_unlock(&s->lock);
	return r;
}
