/* SPDX-License-Identifier: MIT */
/* ASCII case folding for protocol text (header names, hosts): never the
 * locale's idea of case. Unsigned numbers in such text, strictly. Names. */
#ifndef SLUICE_COMMON_TEXT_H
#define SLUICE_COMMON_TEXT_H

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static inline char text_lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Equal lengths and equal bytes but for ASCII case. */
static inline bool text_eq_ci(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t i;

	if (alen != blen)
		return false;
	for (i = 0; i < alen; i++) {
		if (text_lower(a[i]) != text_lower(b[i]))
			return false;
	}
	return true;
}

/* All of @src, its NUL included, into @dst of @cap bytes; false (and
 * nothing copied) when it does not fit. */
static inline bool text_copy(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		return false;
	memcpy(dst, src, n + 1);
	return true;
}

/* A sandbox's name, the @n bytes at @s (no NUL needed), as `sluice
 * create`, the broker and its key process take it: 1 to @max of A-Z a-z
 * 0-9 . _ -, not starting with . or - (it names files and directories, a
 * network namespace, a line of the control protocol). */
static inline bool text_name_ok(const char *s, size_t n, size_t max)
{
	size_t i;

	if (n == 0 || n > max || s[0] == '.' || s[0] == '-')
		return false;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

/* Whether @s ends in ".tmp": state files are written as NAME.tmp first, so
 * a new sandbox of such a name would be another's temporary. */
static inline bool text_tmp_name(const char *s)
{
	size_t n = strlen(s);

	return n >= 4 && !strcmp(s + n - 4, ".tmp");
}

/*
 * The unsigned number in @base at @s into *@v, and the byte after it into
 * *@end. Unlike strtoull() (and sscanf's %u), no space or sign before it:
 * a field such text holds starts with its first digit. Return: false when
 * @s does not start with a digit, or the number does not fit.
 */
static inline bool text_ull(const char *s, int base, const char **end, unsigned long long *v)
{
	char *e;
	bool digit = (*s >= '0' && *s <= '9') ||
		     (base == 16 && ((*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F')));

	if (!digit)
		return false;
	errno = 0;
	*v = strtoull(s, &e, base);
	if (errno)
		return false;
	*end = e;
	return true;
}

/* All of @s, a decimal, as an unsigned int. */
static inline bool text_uint(const char *s, unsigned *v)
{
	unsigned long long x;
	const char *end;

	if (!text_ull(s, 10, &end, &x) || *end || x > UINT_MAX)
		return false;
	*v = (unsigned)x;
	return true;
}

#endif
