/* SPDX-License-Identifier: MIT */
/* A bounded string-keyed table for the audit log readers (auditlog.h):
 * entries in one growing array, found through an open-addressing index. */
#ifndef SLUICE_CLI_STRTAB_H
#define SLUICE_CLI_STRTAB_H

#include <stddef.h>
#include <stdint.h>

/**
 * struct strtab - entries of @esize bytes, each beginning with its key
 * (a char * the table owns)
 * @max: the most entries it holds; cli_strtab_get() then returns NULL
 *       and counts the key in @over
 */
struct strtab {
	char *ents;
	size_t esize, n, cap, max;
	uint32_t *idx; /* entry + 1, 0 = empty */
	size_t icap;
	uint64_t over;
};

/**
 * struct strtab_spec - one table of a reader's set, for cli_strtabs_init()
 * @t:     the table (its memory the caller's; emptied here)
 * @esize: bytes of each entry, its char * key first
 * @max:   the most entries it holds
 */
struct strtab_spec {
	struct strtab *t;
	size_t esize, max;
};

/* Empties each table of @spec (@n of them) and sets its entry size and bound:
 * the readers' tables start the same way, so they start in one place. */
void cli_strtabs_init(const struct strtab_spec *spec, size_t n);
/* cli_strtab_free() on each of @n tables; NULL entries are skipped. */
void cli_strtabs_free(struct strtab *const *tabs, size_t n);

/* The entry for @key, made (zeroed, its key copied) if new; NULL when the
 * table is full or memory ran out. */
void *cli_strtab_get(struct strtab *t, const char *key);
/* The entry for @key, or NULL. */
void *cli_strtab_find(const struct strtab *t, const char *key);
/* Entry @i (0 <= i < t->n). */
static inline void *cli_strtab_at(const struct strtab *t, size_t i)
{
	return t->ents + i * t->esize;
}
/* Frees the keys, entries and index (not what entries point to). */
void cli_strtab_free(struct strtab *t);

#endif
