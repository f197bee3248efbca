/* SPDX-License-Identifier: MIT */
/* A bounded output buffer: writes past the end set a flag instead of
 * overflowing, so a writer checks once, at the end. */
#ifndef SLUICE_COMMON_OBUF_H
#define SLUICE_COMMON_OBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct obuf {
	char *p;
	size_t cap, len;
	bool full; /* something did not fit; the contents are incomplete */
};

static inline void obuf_put(struct obuf *o, const void *s, size_t n)
{
	if (n == 0)
		return;
	if (o->full || n > o->cap - o->len) {
		o->full = true;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

static inline void obuf_puts(struct obuf *o, const char *s)
{
	obuf_put(o, s, strlen(s));
}

static inline void obuf_putc(struct obuf *o, char c)
{
	obuf_put(o, &c, 1);
}

#endif
