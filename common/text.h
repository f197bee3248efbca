/* SPDX-License-Identifier: MIT */
/* ASCII case folding for protocol text (header names, hosts): never the
 * locale's idea of case. */
#ifndef SLUICE_COMMON_TEXT_H
#define SLUICE_COMMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>

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

#endif
