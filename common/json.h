/* SPDX-License-Identifier: MIT */
/* A strict JSON reader (RFC 8259) over a bounded buffer: no allocation,
 * no recursion past JSON_DEPTH_MAX; the caller walks an object itself and
 * reads the members it wants. */
#ifndef SLUICE_COMMON_JSON_H
#define SLUICE_COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct obuf;

/* Nesting of arrays and objects sl_json_value() follows before refusing. */
#define JSON_DEPTH_MAX 16

/**
 * struct json - a read position in a document
 * @s:   the document, not NUL-terminated; untrusted
 * @len: its length
 * @i:   the next byte to read; every function below advances it
 */
struct json {
	const char *s;
	size_t len, i;
};

/* Skips JSON whitespace (space, HTAB, LF, CR) at j->i. */
void sl_json_ws(struct json *j);

/**
 * sl_json_string() - read a string at j->i (its opening quote)
 * @j: the position; left after the closing quote
 * @w: when not NULL, receives the unescaped bytes (\uXXXX as UTF-8,
 *     surrogate pairs joined); w->full then means "did not fit", not an
 *     error
 *
 * Refuses raw control bytes, unknown escapes and lone surrogates.
 *
 * Return: 0 or -EINVAL.
 */
int sl_json_string(struct json *j, struct obuf *w);

/**
 * sl_json_number() - read a number at j->i, per the JSON grammar
 * @j:      the position; left after the number
 * @u:      when not NULL and the number is a plain non-negative integer,
 *          its value, saturating at UINT64_MAX
 * @is_int: when not NULL, whether it is one (no sign, fraction or
 *          exponent)
 *
 * Return: 0 or -EINVAL.
 */
int sl_json_number(struct json *j, uint64_t *u, bool *is_int);

/**
 * sl_json_value() - read (validate and skip) any value at j->i
 * @j:     the position; leading whitespace is skipped, the position is
 *         left after the value
 * @depth: the nesting the value is at; containers deeper than
 *         JSON_DEPTH_MAX are refused
 *
 * Return: 0 or -EINVAL.
 */
int sl_json_value(struct json *j, int depth);

/**
 * sl_json_escape() - escape a string for a JSON string literal
 * @dst:    output (NUL-terminated when @dstlen > 0); quotes are not added
 * @dstlen: size of @dst; output stops at a character boundary so that it,
 *          plus its NUL, fits
 * @src:    input, any bytes; invalid UTF-8 becomes U+FFFD, control bytes
 *          \u00XX, and the characters that act on a terminal or on the
 *          direction of text without showing (C1 controls, bidirectional
 *          controls, U+2028 and U+2029) \uXXXX
 * @srclen: at most this many bytes of @src are read (fewer at a NUL)
 *
 * Return: bytes written to @dst, NUL not counted.
 */
size_t sl_json_escape(char *dst, size_t dstlen, const char *src, size_t srclen);

/**
 * sl_json_print_string() - print @s to @f as a JSON string literal, quotes
 * included, escaped as sl_json_escape() does, however long it is
 */
void sl_json_print_string(FILE *f, const char *s);

#endif
