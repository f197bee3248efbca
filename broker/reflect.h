/* SPDX-License-Identifier: MIT */
/* Reflection guard: the secrets a request carried, found again in its response. */
#ifndef SLUICE_BROKER_REFLECT_H
#define SLUICE_BROKER_REFLECT_H

#include <stdbool.h>
#include <stddef.h>

/* At most this many secrets per request (a request's credential uses). */
#define REFLECT_MAX 16
/* Shorter secrets are not looked for: a few bytes match anything. */
#define REFLECT_MIN_LEN 8
/* Longer secrets cannot be held back in a response buffer: refused. */
#define REFLECT_MAX_LEN 4096

/**
 * struct reflect - copies of the secrets one request carried upstream
 * @buf:  each secret's bytes (a copy owned here, wiped by reflect_clear())
 * @len:  its length
 * @cred: the credential it belongs to (policy index), for the audit line
 * @n:    how many are set
 * @hits: occurrences redacted so far
 * @hit_cred: the credential of the first occurrence, or -1
 *
 * A zero-filled struct is empty and valid.
 */
struct reflect {
	unsigned char *buf[REFLECT_MAX];
	size_t len[REFLECT_MAX];
	int cred[REFLECT_MAX];
	size_t n;
	size_t hits;
	int hit_cred;
};

/**
 * reflect_add() - look for a secret in the response to come
 * @r:    the guard
 * @s:    the secret's bytes (copied)
 * @len:  their length; below REFLECT_MIN_LEN nothing is added
 * @cred: its credential's policy index
 *
 * A secret already held is not added twice.
 *
 * Return: 0; -E2BIG when @len is over REFLECT_MAX_LEN or the guard is
 * full (the request must not be sent: its response could not be
 * scanned); -ENOMEM.
 */
int reflect_add(struct reflect *r, const unsigned char *s, size_t len, int cred);

/**
 * reflect_scan() - redact the secrets in bytes about to go to the sandbox
 * @r:     the guard
 * @buf:   the bytes, redacted in place ('*' for each byte of a secret)
 * @n:     their number
 * @final: no byte follows these (the response is complete)
 *
 * Bytes are scanned as they pass; a secret split between two calls is
 * found because the caller keeps back the tail this returns and passes it
 * again, at the start of the next call, with what follows.
 *
 * Return: how many bytes at the end of @buf must not be sent yet (the
 * longest tail that begins some secret; 0 when @final). Adds the number of
 * secrets redacted to r->hits.
 */
size_t reflect_scan(struct reflect *r, unsigned char *buf, size_t n, bool final);

/* Wipes and frees the copies; @r is empty after. Accepts NULL. */
void reflect_clear(struct reflect *r);

#endif
