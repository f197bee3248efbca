// SPDX-License-Identifier: MIT
/* Reflection guard: redacts the secrets a request carried from its response.
 *
 * Theory of operation: an origin in a credential's scope may hand back what
 * it was sent (an endpoint that echoes headers, an error page quoting a
 * parameter, a redirect that keeps the query). The broker injected the
 * secret, so the sandbox would read it there. Each request that carries
 * secrets keeps copies of them (struct reflect) until its response has been
 * relayed; every byte of the response (head and body, as relayed) passes
 * reflect_scan() before it is sent, and each whole occurrence of a secret is
 * overwritten with '*' of the same length, so that framing (Content-Length,
 * chunk sizes) stays true. A secret split across two reads is found because
 * the caller holds back the tail that could begin one and scans it again
 * with the bytes that follow. The cost is one memmem() per secret over the
 * bytes, plus a look at the last few bytes for a beginning: linear in the
 * response (see tests/bench/reflect.c). What it cannot see: a secret the
 * origin re-encodes (base64, percent- or JSON-escaped, compressed: the
 * broker asks for identity encoding and refuses any other), or one split by
 * chunked framing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "broker/reflect.h"

int reflect_add(struct reflect *r, const unsigned char *s, size_t len, int cred)
{
	size_t i;

	if (len < REFLECT_MIN_LEN)
		return 0;
	if (len > REFLECT_MAX_LEN)
		return -E2BIG;
	for (i = 0; i < r->n; i++)
		if (r->len[i] == len && CRYPTO_memcmp(r->buf[i], s, len) == 0)
			return 0;
	if (r->n == REFLECT_MAX)
		return -E2BIG;
	r->buf[r->n] = malloc(len);
	if (!r->buf[r->n])
		return -ENOMEM;
	memcpy(r->buf[r->n], s, len);
	r->len[r->n] = len;
	r->cred[r->n] = cred;
	if (r->n == 0 && r->hits == 0)
		r->hit_cred = -1;
	r->n++;
	return 0;
}

/* The longest tail of @buf (shorter than @s) that @s begins with. */
static size_t open_tail(const unsigned char *buf, size_t n, const unsigned char *s, size_t len)
{
	size_t k = len - 1 < n ? len - 1 : n;
	const unsigned char *p;

	/* Candidates start where the secret's first byte is. */
	for (p = buf + n - k; k > 0; k--, p++) {
		if (*p == s[0] && memcmp(p, s, k) == 0)
			return k;
	}
	return 0;
}

size_t reflect_scan(struct reflect *r, unsigned char *buf, size_t n, bool final)
{
	size_t i, hold = 0;

	for (i = 0; i < r->n; i++) {
		const unsigned char *s = r->buf[i];
		size_t len = r->len[i], off = 0;

		while (off + len <= n) {
			unsigned char *m = memmem(buf + off, n - off, s, len);

			if (!m)
				break;
			memset(m, '*', len);
			if (r->hits++ == 0)
				r->hit_cred = r->cred[i];
			off = (size_t)(m - buf) + len;
		}
		if (!final) {
			size_t t = open_tail(buf, n, s, len);

			if (t > hold)
				hold = t;
		}
	}
	return hold;
}

void reflect_clear(struct reflect *r)
{
	size_t i;

	if (!r)
		return;
	for (i = 0; i < r->n; i++) {
		OPENSSL_cleanse(r->buf[i], r->len[i]);
		free(r->buf[i]);
		r->buf[i] = NULL;
		r->len[i] = 0;
	}
	r->n = 0;
	r->hits = 0;
	r->hit_cred = -1;
}
