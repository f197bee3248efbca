// SPDX-License-Identifier: MIT
/* A strict JSON reader over a bounded buffer: validates values and
 * unescapes the strings and integers a caller asks for, allocating
 * nothing.  It was written for an OAuth2 token endpoint's answer
 * (broker/creds/oauth2.c), which is what it is sized for. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/obuf.h"
#include "common/text.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

void sl_json_ws(struct json *j)
{
	while (j->i < j->len && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' ||
				 j->s[j->i] == '\r'))
		j->i++;
}

static int json_hex4(struct json *j, unsigned *v)
{
	size_t k;

	*v = 0;
	if (j->len - j->i < 4)
		return -EINVAL;
	for (k = 0; k < 4; k++) {
		char c = text_lower(j->s[j->i + k]);
		int h = hexval(c);

		if (h < 0)
			return -EINVAL;
		*v = *v << 4 | (unsigned)h;
	}
	j->i += 4;
	return 0;
}

static void wput_utf8(struct obuf *w, unsigned cp)
{
	char b[4];

	if (cp < 0x80) {
		b[0] = (char)cp;
		obuf_put(w, b, 1);
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | cp >> 6);
		b[1] = (char)(0x80 | (cp & 0x3f));
		obuf_put(w, b, 2);
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | cp >> 12);
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		obuf_put(w, b, 3);
	} else {
		b[0] = (char)(0xf0 | cp >> 18);
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (char)(0x80 | (cp & 0x3f));
		obuf_put(w, b, 4);
	}
}

int sl_json_string(struct json *j, struct obuf *w)
{
	struct obuf sink = { 0 };

	if (!w)
		w = &sink;
	if (j->i >= j->len || j->s[j->i] != '"')
		return -EINVAL;
	j->i++;
	while (j->i < j->len) {
		unsigned char c = (unsigned char)j->s[j->i++];
		unsigned cp, lo;

		if (c == '"')
			return 0;
		if (c < 0x20)
			return -EINVAL;
		if (c != '\\') {
			obuf_putc(w, (char)c);
			continue;
		}
		if (j->i >= j->len)
			return -EINVAL;
		c = (unsigned char)j->s[j->i++];
		switch (c) {
		case '"':
		case '\\':
		case '/':
			obuf_putc(w, (char)c);
			break;
		case 'b':
			obuf_putc(w, '\b');
			break;
		case 'f':
			obuf_putc(w, '\f');
			break;
		case 'n':
			obuf_putc(w, '\n');
			break;
		case 'r':
			obuf_putc(w, '\r');
			break;
		case 't':
			obuf_putc(w, '\t');
			break;
		case 'u':
			if (json_hex4(j, &cp) < 0)
				return -EINVAL;
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return -EINVAL;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (j->len - j->i < 6 || j->s[j->i] != '\\' ||
				    j->s[j->i + 1] != 'u')
					return -EINVAL;
				j->i += 2;
				if (json_hex4(j, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
					return -EINVAL;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			wput_utf8(w, cp);
			break;
		default:
			return -EINVAL;
		}
	}
	return -EINVAL;
}

int sl_json_number(struct json *j, uint64_t *u, bool *is_int)
{
	size_t start = j->i;
	uint64_t v = 0;
	bool integer = true, sat = false;

	if (j->i < j->len && j->s[j->i] == '-') {
		j->i++;
		integer = false;
	}
	if (j->i >= j->len)
		return -EINVAL;
	if (j->s[j->i] == '0') {
		j->i++;
	} else if (j->s[j->i] >= '1' && j->s[j->i] <= '9') {
		while (j->i < j->len && j->s[j->i] >= '0' && j->s[j->i] <= '9') {
			unsigned d = (unsigned)(j->s[j->i] - '0');

			if (v > (UINT64_MAX - d) / 10)
				sat = true;
			else
				v = v * 10 + d;
			j->i++;
		}
	} else {
		return -EINVAL;
	}
	if (j->i < j->len && j->s[j->i] == '.') {
		integer = false;
		j->i++;
		if (j->i >= j->len || j->s[j->i] < '0' || j->s[j->i] > '9')
			return -EINVAL;
		while (j->i < j->len && j->s[j->i] >= '0' && j->s[j->i] <= '9')
			j->i++;
	}
	if (j->i < j->len && (j->s[j->i] == 'e' || j->s[j->i] == 'E')) {
		integer = false;
		j->i++;
		if (j->i < j->len && (j->s[j->i] == '+' || j->s[j->i] == '-'))
			j->i++;
		if (j->i >= j->len || j->s[j->i] < '0' || j->s[j->i] > '9')
			return -EINVAL;
		while (j->i < j->len && j->s[j->i] >= '0' && j->s[j->i] <= '9')
			j->i++;
	}
	if (j->i == start)
		return -EINVAL;
	if (is_int)
		*is_int = integer;
	if (u)
		*u = sat ? UINT64_MAX : v;
	return 0;
}

static int json_literal(struct json *j, const char *lit)
{
	size_t n = strlen(lit);

	if (j->len - j->i < n || memcmp(j->s + j->i, lit, n) != 0)
		return -EINVAL;
	j->i += n;
	return 0;
}

static int json_container(struct json *j, int depth, char close)
{
	if (depth > JSON_DEPTH_MAX)
		return -EINVAL;
	j->i++;
	sl_json_ws(j);
	if (j->i < j->len && j->s[j->i] == close) {
		j->i++;
		return 0;
	}
	for (;;) {
		sl_json_ws(j);
		if (close == '}') {
			if (sl_json_string(j, NULL) < 0)
				return -EINVAL;
			sl_json_ws(j);
			if (j->i >= j->len || j->s[j->i] != ':')
				return -EINVAL;
			j->i++;
		}
		if (sl_json_value(j, depth) < 0)
			return -EINVAL;
		sl_json_ws(j);
		if (j->i >= j->len)
			return -EINVAL;
		if (j->s[j->i] == ',') {
			j->i++; /* a trailing comma fails on the next value */
			continue;
		}
		if (j->s[j->i] == close) {
			j->i++;
			return 0;
		}
		return -EINVAL;
	}
}

int sl_json_value(struct json *j, int depth)
{
	sl_json_ws(j);
	if (j->i >= j->len)
		return -EINVAL;
	switch (j->s[j->i]) {
	case '"':
		return sl_json_string(j, NULL);
	case '{':
		return json_container(j, depth + 1, '}');
	case '[':
		return json_container(j, depth + 1, ']');
	case 't':
		return json_literal(j, "true");
	case 'f':
		return json_literal(j, "false");
	case 'n':
		return json_literal(j, "null");
	default:
		return sl_json_number(j, NULL, NULL);
	}
}

/* --- writing ------------------------------------------------------------ */

/*
 * utf8_seq() - length of the UTF-8 sequence at @s, and whether it is valid
 *
 * Valid means shortest form, no surrogates, at most U+10FFFF (RFC 3629).
 * When invalid, the length is that of the "maximal subpart" (Unicode 15,
 * 3.9): the bytes that could have begun a valid sequence, at least one, so
 * that one bad sequence becomes one U+FFFD. At most @avail bytes of @s are
 * read (at least 1): a sequence they cut is invalid (@s need not be
 * NUL-terminated: the caller's length bounds it).
 */
static size_t utf8_seq(const unsigned char *s, size_t avail, bool *ok)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t need, i;

	*ok = false;
	if (c < 0x80) {
		*ok = true;
		return 1;
	}
	if (c < 0xc2) /* continuation byte, or overlong C0/C1 */
		return 1;
	if (c < 0xe0) {
		need = 1;
	} else if (c < 0xf0) {
		need = 2;
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		else if (c == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (c < 0xf5) {
		need = 3;
		if (c == 0xf0)
			lo = 0x90; /* overlong */
		else if (c == 0xf4)
			hi = 0x8f; /* above U+10FFFF */
	} else {
		return 1;
	}
	for (i = 1; i <= need; i++) {
		if (i >= avail || s[i] < lo || s[i] > hi)
			return i;
		lo = 0x80;
		hi = 0xbf;
	}
	*ok = true;
	return need + 1;
}

/* The code point of the valid sequence of @len (2 or 3) bytes at @s. */
static uint32_t utf8_cp(const unsigned char *s, size_t len)
{
	if (len == 2)
		return ((uint32_t)(s[0] & 0x1f) << 6) | (s[1] & 0x3f);
	return ((uint32_t)(s[0] & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) | (s[2] & 0x3f);
}

/* "\uXXXX" of @cp (below U+10000) into @tmp, a counted piece (never a C
 * string). Return: its length, 6. */
static size_t u_escape(char tmp[6], uint32_t cp)
{
	static const char hex[] = "0123456789abcdef";

	tmp[0] = '\\';
	tmp[1] = 'u';
	tmp[2] = hex[(cp >> 12) & 0xf];
	tmp[3] = hex[(cp >> 8) & 0xf];
	tmp[4] = hex[(cp >> 4) & 0xf];
	tmp[5] = hex[cp & 0xf];
	return 6;
}

/*
 * Whether code point @cp is a character that acts
 * on a terminal or on how text around it reads, yet shows nothing: the C1
 * controls (U+0080-U+009F: CSI is U+009B), the bidirectional marks,
 * embeddings, overrides and isolates (U+061C, U+200E, U+200F,
 * U+202A-U+202E, U+2066-U+2069: "Trojan Source") and the line and
 * paragraph separators (U+2028, U+2029). A client can put them in a name;
 * escaped, the JSON means the same and whoever prints it sees them.
 */
static bool unseen_control(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
	       (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

size_t sl_json_escape(char *dst, size_t dstlen, const char *src, size_t srclen)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t i = 0, o = 0;

	if (dstlen == 0)
		return 0;
	while (i < srclen && s[i]) {
		char tmp[6];
		const char *piece = tmp;
		size_t plen, adv, run = 0;
		bool ok;

		/* Printable ASCII needs no escape: copied as a run, as far as
		 * there is room (one byte is one whole character). */
		while (i + run < srclen && s[i + run] >= 0x20 && s[i + run] < 0x7f &&
		       s[i + run] != '"' && s[i + run] != '\\')
			run++;
		if (run) {
			if (run > dstlen - 1 - o)
				run = dstlen - 1 - o;
			memcpy(dst + o, s + i, run);
			o += run;
			i += run;
			if (o == dstlen - 1)
				break;
			continue;
		}
		if (s[i] == '"' || s[i] == '\\') {
			tmp[0] = '\\';
			tmp[1] = (char)s[i];
			plen = 2;
			adv = 1;
		} else if (s[i] < 0x20 || s[i] == 0x7f) {
			plen = u_escape(tmp, s[i]);
			adv = 1;
		} else {
			uint32_t cp;

			/* A sequence cut by @srclen is cut, hence invalid. */
			adv = utf8_seq(s + i, srclen - i, &ok);
			cp = ok && (adv == 2 || adv == 3) ? utf8_cp(s + i, adv) : 0;
			if (cp && unseen_control(cp)) {
				plen = u_escape(tmp, cp);
			} else if (ok) {
				piece = (const char *)s + i;
				plen = adv;
			} else {
				piece = "\\ufffd";
				plen = 6;
			}
		}
		/* Whole characters only, and room for the NUL. */
		if (plen >= dstlen - o)
			break;
		memcpy(dst + o, piece, plen);
		o += plen;
		i += adv;
	}
	dst[o] = '\0';
	return o;
}

void sl_json_print_string(FILE *f, const char *s)
{
	size_t n = strlen(s);

	fputc('"', f);
	/* A bounded buffer per piece: each input byte becomes at most 6. */
	while (n > 0) {
		char out[6 * 64 + 1];
		size_t take = n < 64 ? n : 64, w;

		/* Keep a UTF-8 sequence whole: cut before a continuation byte. */
		while (take < n && take > 1 && ((unsigned char)s[take] & 0xc0) == 0x80)
			take--;
		w = sl_json_escape(out, sizeof(out), s, take);
		fwrite(out, 1, w, f);
		s += take;
		n -= take;
	}
	fputc('"', f);
}
