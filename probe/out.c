// SPDX-License-Identifier: MIT
/* sluice probe: verdicts, and the two ways to show them (a table, one JSON
 * document). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "probe/probe_internal.h"

static const char *const verdict_names[] = {
	[PROBE_SKIP] = "skip",
	[PROBE_PASS] = "pass",
	[PROBE_FAIL] = "fail",
};
_Static_assert(sizeof(verdict_names) / sizeof(verdict_names[0]) == PROBE_FAIL + 1,
	       "one name per verdict");

/**
 * probe_verdict_name() - "pass", "fail" or "skip".
 * @v: the verdict
 *
 * Return: a static string.
 */
const char *probe_verdict_name(enum probe_verdict v)
{
	return (unsigned)v <= PROBE_FAIL ? verdict_names[v] : "?";
}

/**
 * probe_res_add() - add one part (one target tried) to a check's result.
 * @r: the result
 * @v: this part's verdict
 * @fmt: what happened, printf-style
 *
 * A failing part drops the detail of passing and skipped parts, so that
 * the detail names the leaks; a passing part drops skipped ones; parts of
 * the same verdict are joined with "; " (cut at the detail's size).
 */
void probe_res_add(struct probe_result *r, enum probe_verdict v, const char *fmt, ...)
{
	char part[PROBE_DETAIL_MAX];
	size_t len;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(part, sizeof(part), fmt, ap);
	va_end(ap);
	if (r->touched && v < r->v)
		return;
	if (!r->touched || v > r->v) {
		r->v = v;
		r->detail[0] = '\0';
	}
	r->touched = true;
	len = strlen(r->detail);
	if (len && len + 2 < sizeof(r->detail)) {
		memcpy(r->detail + len, "; ", 3);
		len += 2;
	}
	if (len < sizeof(r->detail) - 1)
		snprintf(r->detail + len, sizeof(r->detail) - len, "%s", part);
}

/**
 * probe_sanitize() - printable ASCII of untrusted bytes (a header, a banner).
 * @dst: out, NUL-terminated
 * @n: its size
 * @src: the bytes
 * @len: their count
 *
 * Control and non-ASCII bytes become '?'; the copy stops at a line end.
 */
void probe_sanitize(char *dst, size_t n, const char *src, size_t len)
{
	size_t i, o = 0;

	if (!n)
		return;
	for (i = 0; i < len && o + 1 < n; i++) {
		unsigned char c = (unsigned char)src[i];

		if (c == '\r' || c == '\n')
			break;
		dst[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	dst[o] = '\0';
}

static void counts(const struct probe_result *res, size_t n, int c[3])
{
	size_t i;

	c[0] = c[1] = c[2] = 0;
	for (i = 0; i < n; i++)
		c[res[i].v]++;
}

/**
 * probe_print_table() - the readable report.
 * @f: where to
 * @idx: the checks run, as indices into probe_checks
 * @res: their results
 * @n: how many
 */
void probe_print_table(FILE *f, const size_t *idx, const struct probe_result *res, size_t n)
{
	size_t i;
	int c[3];

	fprintf(f, "%-26s %-6s %s\n", "CHECK", "RESULT", "WHAT / WHAT HAPPENED");
	for (i = 0; i < n; i++) {
		const struct probe_check *ck = &probe_checks[idx[i]];

		fprintf(f, "%-26s %-6s %s\n", ck->id, probe_verdict_name(res[i].v), ck->desc);
		fprintf(f, "%-26s %-6s   %s\n", "", "", res[i].detail);
	}
	counts(res, n, c);
	fprintf(f, "\n%zu checks: %d passed, %d failed, %d skipped\n", n, c[PROBE_PASS],
		c[PROBE_FAIL], c[PROBE_SKIP]);
}

/**
 * probe_print_json() - the report as one JSON document:
 * {"checks":[{"id","description","verdict","detail"}...],
 *  "summary":{"pass","fail","skip"}}
 * @f: where to
 * @idx: the checks run, as indices into probe_checks
 * @res: their results
 * @n: how many
 */
void probe_print_json(FILE *f, const size_t *idx, const struct probe_result *res, size_t n)
{
	size_t i;
	int c[3];

	fputs("{\"checks\":[", f);
	for (i = 0; i < n; i++) {
		const struct probe_check *ck = &probe_checks[idx[i]];

		fputs(i ? ",\n{\"id\":" : "\n{\"id\":", f);
		sl_json_print_string(f, ck->id);
		fputs(",\"description\":", f);
		sl_json_print_string(f, ck->desc);
		fputs(",\"verdict\":", f);
		sl_json_print_string(f, probe_verdict_name(res[i].v));
		fputs(",\"detail\":", f);
		sl_json_print_string(f, res[i].detail);
		fputc('}', f);
	}
	counts(res, n, c);
	fprintf(f, "\n],\"summary\":{\"pass\":%d,\"fail\":%d,\"skip\":%d}}\n", c[PROBE_PASS],
		c[PROBE_FAIL], c[PROBE_SKIP]);
}
