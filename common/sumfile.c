// SPDX-License-Identifier: MIT
/* Checked state files: framing lines with checksums, and reading them back
 * keeping what verifies (the format is described in common/sumfile.h). */
#include "common/sumfile.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "common/file.h"
#include "common/siphash.h"

/* A fixed key: the sum detects damage, it does not authenticate (whoever
 * can write state_dir is root or the broker). */
#define SUM_K0 0x736c756963652d73ull /* "sluice-s" */
#define SUM_K1 0x746174652d763100ull /* "tate-v1" */

static const char hexd[] = "0123456789abcdef";

uint64_t sumfile_sum(const char *payload, size_t len)
{
	return siphash24(SUM_K0, SUM_K1, payload, len);
}

/* The chain over content lines: each step hashes the previous value and
 * the line's sum, so order and count are part of it. */
static uint64_t chain_step(uint64_t chain, uint64_t sum)
{
	uint8_t b[16];
	int i;

	for (i = 0; i < 8; i++) {
		b[i] = (uint8_t)(chain >> (8 * i));
		b[8 + i] = (uint8_t)(sum >> (8 * i));
	}
	return siphash24(SUM_K0, SUM_K1, b, sizeof(b));
}

static void put_hex(char *out, uint64_t v)
{
	int i;

	for (i = SUMFILE_HEX - 1; i >= 0; i--, v >>= 4)
		out[i] = hexd[v & 15];
}

static int get_hex(const char *in, uint64_t *v)
{
	uint64_t x = 0;
	int i;

	for (i = 0; i < SUMFILE_HEX; i++) {
		const char *p = strchr(hexd, in[i]);

		if (!in[i] || !p)
			return -EINVAL;
		x = x << 4 | (uint64_t)(p - hexd);
	}
	*v = x;
	return 0;
}

int sumfile_frame(char *out, size_t outlen, const char *payload, size_t len)
{
	if (memchr(payload, '\n', len) || memchr(payload, '\0', len))
		return -EINVAL;
	if (outlen < len + SUMFILE_HEX + 3)
		return -ENOSPC;
	put_hex(out, sumfile_sum(payload, len));
	out[SUMFILE_HEX] = ' ';
	memcpy(out + SUMFILE_HEX + 1, payload, len);
	out[SUMFILE_HEX + 1 + len] = '\n';
	out[SUMFILE_HEX + 2 + len] = '\0';
	return (int)(len + SUMFILE_HEX + 2);
}

/* Writes one framed line of @payload to @w, chained when @content. */
static void put_line(struct sumfile_writer *w, const char *payload, size_t len, bool content)
{
	char hex[SUMFILE_HEX];
	uint64_t s = sumfile_sum(payload, len);

	put_hex(hex, s);
	fwrite(hex, 1, sizeof(hex), w->f);
	fputc(' ', w->f);
	fwrite(payload, 1, len, w->f);
	fputc('\n', w->f);
	if (content) {
		w->chain = chain_step(w->chain, s);
		w->n++;
	}
}

void sumfile_begin(struct sumfile_writer *w, FILE *f, const char *kind)
{
	char h[128];
	int n = snprintf(h, sizeof(h), SUMFILE_MAGIC "%s", kind);

	w->f = f;
	w->chain = 0;
	w->n = 0;
	w->err = 0;
	put_line(w, h, n < 0 ? 0 : (size_t)n >= sizeof(h) ? sizeof(h) - 1 : (size_t)n, false);
}

void sumfile_line(struct sumfile_writer *w, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line) || memchr(line, '\n', (size_t)n)) {
		/* Never write a line the reader would take for damage:
		 * the file is not committed. */
		explicit_bzero(line, sizeof(line));
		w->err = -EINVAL;
		return;
	}
	put_line(w, line, (size_t)n, true);
	explicit_bzero(line, sizeof(line));
}

int sumfile_end(struct sumfile_writer *w)
{
	char e[64], hex[SUMFILE_HEX + 1];
	int n;

	if (w->err)
		return w->err;
	put_hex(hex, w->chain);
	hex[SUMFILE_HEX] = '\0';
	n = snprintf(e, sizeof(e), "end %u %s", w->n, hex);
	put_line(w, e, (size_t)n, false);
	return 0;
}

int sumfile_commit(struct sumfile_writer *w, const char *tmp, const char *path)
{
	int r = sumfile_end(w);

	if (r < 0) {
		fclose(w->f);
		unlink(tmp);
		return r;
	}
	return file_commit(w->f, tmp, path);
}

const char *sumfile_status_name(enum sumfile_status st)
{
	switch (st) {
	case SUMFILE_OK:
		return "ok";
	case SUMFILE_EMPTY:
		return "empty";
	case SUMFILE_LEGACY:
		return "old format";
	case SUMFILE_DAMAGED:
		return "damaged";
	}
	return "?";
}

/* Whether @line (@len bytes, no newline) starts like a framed line. */
static bool looks_framed(const char *line, size_t len)
{
	size_t i;

	if (len < SUMFILE_HEX + 1 || line[SUMFILE_HEX] != ' ')
		return false;
	for (i = 0; i < SUMFILE_HEX; i++)
		if (!strchr(hexd, line[i]) || !line[i])
			return false;
	return true;
}

/*
 * Framed or not: a file whose first line is a framed line, or says
 * "sluice-state" (a header with a damaged sum), or any of whose lines
 * looks framed, or which has no newline and is a prefix of a header (one
 * cut inside its first line) is framed; only a file with none of these is
 * taken for the old format, whose lines (addresses, names, placeholders,
 * "key value") never start with 16 hex digits and a space.
 */
static bool is_framed(const char *buf, size_t len)
{
	const char *nl = memchr(buf, '\n', len), *p = buf, *end = buf + len;
	size_t first = nl ? (size_t)(nl - buf) : len, i;

	if (memmem(buf, first, "sluice-state", 12))
		return true;
	if (!nl) {
		static const char pat[] = " " SUMFILE_MAGIC;

		for (i = 0; i < len && i < SUMFILE_HEX + sizeof(pat) - 1; i++) {
			if (i < SUMFILE_HEX ? !strchr(hexd, buf[i]) || !buf[i]
					    : buf[i] != pat[i - SUMFILE_HEX])
				return false;
		}
		return true;
	}
	while (p < end) {
		const char *q = memchr(p, '\n', (size_t)(end - p));
		size_t l = q ? (size_t)(q - p) : (size_t)(end - p);

		if (looks_framed(p, l))
			return true;
		p += l + 1;
	}
	return false;
}

int sumfile_parse(const char *buf, size_t len, const char *kind, bool open_ended,
		  int (*fn)(const char *payload, size_t len, bool ok, void *arg), void *arg,
		  struct sumfile_result *res)
{
	const char *p = buf, *end = buf + len;
	char header[128];
	uint64_t chain = 0;
	bool first = true, ended = false;
	int hl, r = 0;

	memset(res, 0, sizeof(*res));
	if (len == 0) {
		res->status = SUMFILE_EMPTY;
		return 0;
	}
	if (!is_framed(buf, len)) {
		res->status = SUMFILE_LEGACY;
		return 0;
	}
	hl = snprintf(header, sizeof(header), SUMFILE_MAGIC "%s", kind);
	while (p < end && r == 0) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
		const char *pl = p + SUMFILE_HEX + 1;
		size_t plen = l > SUMFILE_HEX ? l - SUMFILE_HEX - 1 : 0;
		uint64_t want;
		/* A line verifies when it is whole (its newline is there),
		 * framed, and its sum matches; a NUL inside is damage. */
		bool ok = nl && looks_framed(p, l) && get_hex(p, &want) == 0 &&
			  !memchr(pl, '\0', plen) && sumfile_sum(pl, plen) == want;

		p += l + (nl ? 1 : 0);
		if (first) {
			first = false;
			if (ok && plen == (size_t)hl && !memcmp(pl, header, plen))
				continue;
			res->header_bad = true;
			/* A header of another kind or version is not ours: it
			 * is not read as content. */
			if (ok)
				continue;
			r = fn ? fn(p - l - (nl ? 1 : 0), l, false, arg) : 0;
			continue;
		}
		if (ended) { /* anything after the end line */
			res->end_bad = true;
			continue;
		}
		if (!open_ended && ok && plen > 4 && !memcmp(pl, "end ", 4)) {
			char e[64], hex[SUMFILE_HEX + 1];
			int n;

			ended = true;
			put_hex(hex, chain);
			hex[SUMFILE_HEX] = '\0';
			n = snprintf(e, sizeof(e), "end %u %s", res->kept, hex);
			if (res->lost || n < 0 || (size_t)n != plen || memcmp(pl, e, plen))
				res->end_bad = true;
			continue;
		}
		if (ok) {
			res->kept++;
			chain = chain_step(chain, want);
			r = fn ? fn(pl, plen, true, arg) : 0;
		} else {
			res->lost++;
			r = fn ? fn(p - l - (nl ? 1 : 0), l, false, arg) : 0;
		}
	}
	if (!open_ended && !ended)
		res->end_bad = res->end_missing = true;
	res->status = res->lost || res->header_bad || res->end_bad ? SUMFILE_DAMAGED : SUMFILE_OK;
	return r;
}
