// SPDX-License-Identifier: MIT
/* Unit tests for common/reason.c: the reasons enum against README's tables. */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/reason.h"

#define MAX_DOC_REASONS 512
#define MAX_LINE 4096
#define MAX_CELLS 16

/* The reasons README names, with the line of their first mention. */
struct doc {
	char *name[MAX_DOC_REASONS];
	unsigned line[MAX_DOC_REASONS];
	size_t n;
	unsigned tables;
};

static struct doc doc;
static const char *readme_path;

static bool is_reason_word(const char *s, size_t len)
{
	if (len == 0 || !islower((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '-')
			return false;
	return true;
}

static void doc_add(const char *s, size_t len, unsigned line)
{
	for (size_t i = 0; i < doc.n; i++)
		if (strlen(doc.name[i]) == len && memcmp(doc.name[i], s, len) == 0)
			return;
	assert_true(doc.n < MAX_DOC_REASONS);
	doc.name[doc.n] = strndup(s, len);
	assert_non_null(doc.name[doc.n]);
	doc.line[doc.n++] = line;
}

/* Splits a table row "| a | b |" into cells, in place; returns their count. */
static int split_row(char *row, char *cell[MAX_CELLS])
{
	int n = 0;
	char *p = strchr(row, '|');

	while (p && n < MAX_CELLS) {
		char *end = strchr(p + 1, '|');

		if (!end)
			break;
		*end = '\0';
		cell[n++] = p + 1;
		p = end;
	}
	for (int i = 0; i < n; i++) {
		while (*cell[i] == ' ')
			cell[i]++;
	}
	return n;
}

/*
 * The reasons of a cell are its backticked words before the first " (":
 * "`control-refused` (`proto` `control`, with `pid`)" names one reason,
 * the rest is commentary.
 */
static void cell_reasons(const char *cell, unsigned line)
{
	const char *stop = strstr(cell, " (");
	const char *p = cell;

	if (!stop)
		stop = cell + strlen(cell);
	while ((p = memchr(p, '`', (size_t)(stop - p))) != NULL) {
		const char *q = memchr(p + 1, '`', (size_t)(stop - p - 1));

		if (!q)
			break;
		if (is_reason_word(p + 1, (size_t)(q - p - 1)))
			doc_add(p + 1, (size_t)(q - p - 1), line);
		p = q + 1;
	}
}

/*
 * Collects the reason column of every README table whose header has a
 * column starting with "reason": "Answers a client sees" and
 * "Troubleshooting by audit reason".
 */
static int load_readme(void **state)
{
	const char *path = getenv("SLUICE_README") ? getenv("SLUICE_README") : "README.md";
	FILE *f = fopen(path, "r");
	char line[MAX_LINE], header[MAX_LINE] = "";
	unsigned lineno = 0;
	int col = -1;

	(void)state;
	readme_path = path;
	if (!f) {
		fprintf(stderr,
			"test_reason: cannot open %s (run from the source tree, or set "
			"SLUICE_README): %s\n",
			path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *cell[MAX_CELLS];
		int n;

		lineno++;
		if (line[0] != '|') {
			col = -1;
			header[0] = '\0';
			continue;
		}
		if (strncmp(line, "|---", 4) == 0) {
			/* The row before was a header: find its reason column. */
			n = split_row(header, cell);
			col = -1;
			for (int i = 0; i < n; i++)
				if (strncmp(cell[i], "reason", 6) == 0) {
					col = i;
					doc.tables++;
					break;
				}
			continue;
		}
		if (col < 0) {
			snprintf(header, sizeof(header), "%s", line);
			continue;
		}
		n = split_row(line, cell);
		if (col < n)
			cell_reasons(cell[col], lineno);
	}
	fclose(f);
	return 0;
}

static int free_readme(void **state)
{
	(void)state;
	for (size_t i = 0; i < doc.n; i++)
		free(doc.name[i]);
	return 0;
}

/* A parser that finds nothing would pass both directions vacuously. */
static void test_readme_parsed(void **state)
{
	(void)state;
	assert_true(doc.tables >= 2);
	assert_true(doc.n >= 40);
}

static void test_table_whole(void **state)
{
	(void)state;
	for (int i = 0; i < SL_REASON_COUNT; i++) {
		const char *s = sl_reason_name((enum sl_reason)i);

		assert_string_not_equal(s, "unknown");
		assert_true(is_reason_word(s, strlen(s)));
		/* Round trip: also catches a string given to two values. */
		assert_int_equal(sl_reason_from_name(s), i);
	}
	assert_string_equal(sl_reason_name(SL_REASON_COUNT), "unknown");
	assert_string_equal(sl_reason_name((enum sl_reason) - 1), "unknown");
	assert_int_equal(sl_reason_from_name("no-such-reason"), -ENOENT);
	assert_int_equal(sl_reason_from_name(""), -ENOENT);
}

/* Every reason README promises is one the code can give. */
static void test_readme_in_enum(void **state)
{
	int missing = 0;

	(void)state;
	for (size_t i = 0; i < doc.n; i++) {
		if (sl_reason_from_name(doc.name[i]) >= 0)
			continue;
		fprintf(stderr, "%s:%u: reason `%s` is not in enum sl_reason (common/reason.h)\n",
			readme_path, doc.line[i], doc.name[i]);
		missing++;
	}
	assert_int_equal(missing, 0);
}

/* Every reason the code can give is in README. */
static void test_enum_in_readme(void **state)
{
	int missing = 0;

	(void)state;
	for (int i = 0; i < SL_REASON_COUNT; i++) {
		const char *s = sl_reason_name((enum sl_reason)i);
		bool found = false;

		for (size_t j = 0; j < doc.n && !found; j++)
			found = strcmp(doc.name[j], s) == 0;
		if (found)
			continue;
		fprintf(stderr, "reason `%s` (common/reason.h) is in no README reason table\n", s);
		missing++;
	}
	assert_int_equal(missing, 0);
}

/*
 * docs/audit.schema.json lists the reasons an audit line may carry (its
 * "$defs" "reason" enum): exactly the table's, so that a new reason is
 * not refused by the schema check of every audit line (run.sh), nor one
 * the code dropped still promised. Read plainly: the enum is the only
 * "enum" after "$defs", one string after another.
 */
static void test_schema_reasons(void **state)
{
	const char *path = getenv("SLUICE_AUDIT_SCHEMA") ? getenv("SLUICE_AUDIT_SCHEMA")
							 : "docs/audit.schema.json";
	static char buf[1 << 16];
	bool seen[SL_REASON_COUNT] = { false };
	FILE *f = fopen(path, "r");
	size_t len, n = 0;
	char *p, *end;
	int bad = 0;

	(void)state;
	if (!f)
		fail_msg("cannot open %s (run from the repository, or set SLUICE_AUDIT_SCHEMA)",
			 path);
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	p = strstr(buf, "\"$defs\"");
	assert_non_null(p);
	p = strstr(p, "\"enum\"");
	assert_non_null(p);
	p = strchr(p, '[');
	end = p ? strchr(p, ']') : NULL;
	assert_non_null(end);
	while ((p = strchr(p + 1, '"')) && p < end) {
		char *q = strchr(p + 1, '"');
		int i;

		assert_non_null(q);
		*q = '\0';
		for (i = 0; i < SL_REASON_COUNT; i++)
			if (!strcmp(sl_reason_name((enum sl_reason)i), p + 1))
				break;
		if (i == SL_REASON_COUNT) {
			fprintf(stderr, "%s: reason `%s` is not in common/reason.h\n", path, p + 1);
			bad++;
		} else {
			seen[i] = true;
		}
		n++;
		p = q;
	}
	for (int i = 0; i < SL_REASON_COUNT; i++) {
		if (!seen[i]) {
			fprintf(stderr, "reason `%s` (common/reason.h) is not in %s\n",
				sl_reason_name((enum sl_reason)i), path);
			bad++;
		}
	}
	assert_true(n > 0);
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_readme_parsed),  cmocka_unit_test(test_table_whole),
		cmocka_unit_test(test_readme_in_enum), cmocka_unit_test(test_enum_in_readme),
		cmocka_unit_test(test_schema_reasons),
	};

	return cmocka_run_group_tests(tests, load_readme, free_readme);
}
