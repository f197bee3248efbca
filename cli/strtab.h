/* SPDX-License-Identifier: MIT */
/* A bounded string-keyed table for the audit log readers (auditlog.h):
 * entries in one growing array, found through an open-addressing index. */
#ifndef SLUICE_NETNS_STRTAB_H
#define SLUICE_NETNS_STRTAB_H

#include <stddef.h>
#include <stdint.h>

/**
 * struct strtab - entries of @esize bytes, each beginning with its key
 * (a char * the table owns)
 * @max: the most entries it holds; netns_strtab_get() then returns NULL
 *       and counts the key in @over
 */
struct strtab {
	char *ents;
	size_t esize, n, cap, max;
	uint32_t *idx; /* entry + 1, 0 = empty */
	size_t icap;
	uint64_t over;
};

/* The entry for @key, made (zeroed, its key copied) if new; NULL when the
 * table is full or memory ran out. */
void *netns_strtab_get(struct strtab *t, const char *key);
/* The entry for @key, or NULL. */
void *netns_strtab_find(const struct strtab *t, const char *key);
/* Entry @i (0 <= i < t->n). */
static inline void *netns_strtab_at(const struct strtab *t, size_t i)
{
	return t->ents + i * t->esize;
}
/* Frees the keys, entries and index (not what entries point to). */
void netns_strtab_free(struct strtab *t);

#endif
