// SPDX-License-Identifier: MIT
/* A bounded string-keyed table (strtab.h). The bound on entries is what
 * stops a hostile log from costing memory; the keys (names a sandbox chose)
 * are hashed with SipHash under a key drawn at random once per process, so
 * that nobody can pick names that all fall in one run of the index and make
 * a reader's every lookup walk it (an unkeyed hash's low bits are easy to
 * collide on purpose). */
#include "cli/strtab.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/siphash.h"

static uint64_t hash(const char *s)
{
	static uint64_t k[2];
	static bool keyed;

	if (!keyed) {
		if (getrandom(k, sizeof(k), 0) != (ssize_t)sizeof(k)) {
			/* No randomness: a key of this run all the same. */
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			k[0] = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32);
			k[1] = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL ^
			       (uint64_t)(uintptr_t)&ts;
		}
		keyed = true;
	}
	return siphash24(k[0], k[1], s, strlen(s));
}

static const char *key_of(const struct strtab *t, size_t i)
{
	return *(char **)cli_strtab_at(t, i);
}

/* The slot of @key in the index: where it is, or the empty one it would take. */
static size_t slot(const struct strtab *t, const char *key)
{
	size_t m = t->icap - 1, i = hash(key) & m;

	while (t->idx[i] && strcmp(key_of(t, t->idx[i] - 1), key) != 0)
		i = (i + 1) & m;
	return i;
}

static int grow_index(struct strtab *t)
{
	size_t ncap = t->icap ? t->icap * 2 : 64, i, m = ncap - 1;
	uint32_t *idx = calloc(ncap, sizeof(*idx));

	if (!idx)
		return -1;
	for (i = 0; i < t->n; i++) {
		size_t s = hash(key_of(t, i)) & m;

		while (idx[s])
			s = (s + 1) & m;
		idx[s] = (uint32_t)(i + 1);
	}
	free(t->idx);
	t->idx = idx;
	t->icap = ncap;
	return 0;
}

void *cli_strtab_find(const struct strtab *t, const char *key)
{
	size_t s;

	if (!t->icap)
		return NULL;
	s = slot(t, key);
	return t->idx[s] ? cli_strtab_at(t, t->idx[s] - 1) : NULL;
}

void *cli_strtab_get(struct strtab *t, const char *key)
{
	size_t s;
	void *e;

	e = cli_strtab_find(t, key);
	if (e)
		return e;
	if (t->n >= t->max || t->n >= UINT32_MAX - 1) {
		t->over++;
		return NULL;
	}
	if ((t->n + 1) * 2 > t->icap && grow_index(t) < 0)
		return NULL;
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 16;
		char *ents = realloc(t->ents, ncap * t->esize);

		if (!ents)
			return NULL;
		t->ents = ents;
		t->cap = ncap;
	}
	e = cli_strtab_at(t, t->n);
	memset(e, 0, t->esize);
	*(char **)e = strdup(key);
	if (!*(char **)e)
		return NULL;
	s = slot(t, key);
	t->idx[s] = (uint32_t)(t->n + 1);
	t->n++;
	return e;
}

void cli_strtab_free(struct strtab *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free(*(char **)cli_strtab_at(t, i));
	free(t->ents);
	free(t->idx);
	t->ents = NULL;
	t->idx = NULL;
	t->n = t->cap = t->icap = 0;
}

void cli_strtabs_init(const struct strtab_spec *spec, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		*spec[i].t = (struct strtab){ .esize = spec[i].esize, .max = spec[i].max };
}

void cli_strtabs_free(struct strtab *const *tabs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (tabs[i])
			cli_strtab_free(tabs[i]);
}
