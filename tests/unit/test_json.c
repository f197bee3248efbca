// SPDX-License-Identifier: MIT
/* Unit tests for common/json.c: which documents the strict reader takes
 * and which it refuses, string unescaping, integers, the depth bound. */
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

#include "common/json.h"
#include "common/obuf.h"

/* One whole document: a value, then nothing but whitespace. */
static int parse_all(const char *s, size_t len)
{
	struct json j = { .s = s, .len = len };

	if (sl_json_value(&j, 0) < 0)
		return -EINVAL;
	sl_json_ws(&j);
	return j.i == j.len ? 0 : -EINVAL;
}

static void test_documents(void **state)
{
	static const struct {
		const char *doc;
		bool ok;
	} cases[] = {
		{ "{}", true },
		{ " [ ] ", true },
		{ "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\"}}", true },
		{ "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"", true },
		{ "-0.5e+10", true },
		{ "0", true },
		{ "\"\\ud83d\\ude00\"", true }, /* a surrogate pair */
		{ "", false },
		{ "{", false },
		{ "{\"a\":1,}", false }, /* trailing comma */
		{ "[1,]", false },
		{ "{\"a\" 1}", false },
		{ "{a:1}", false }, /* unquoted key */
		{ "'a'", false },
		{ "01", false }, /* leading zero, then a second value */
		{ "1.", false },
		{ ".5", false },
		{ "1e", false },
		{ "+1", false },
		{ "tru", false },
		{ "nul", false },
		{ "\"a", false },     /* unterminated */
		{ "\"\\x\"", false }, /* unknown escape */
		{ "\"\\u12\"", false },
		{ "\"\\udc00\"", false },	 /* a lone low surrogate */
		{ "\"\\ud800\"", false },	 /* a lone high surrogate */
		{ "\"\\ud800\\u0041\"", false }, /* high, then not a low */
		{ "\"a\tb\"", false },		 /* a raw control byte */
		{ "[1 2]", false },
		{ "{} {}", false },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = parse_all(cases[i].doc, strlen(cases[i].doc));

		if ((r == 0) != cases[i].ok)
			fail_msg("`%s`: got %d", cases[i].doc, r);
	}
	/* A NUL inside a string is a control byte; the length bounds reading. */
	assert_int_equal(parse_all("\"a\0b\"", 5), -EINVAL);
	assert_int_equal(parse_all("[1]xxxx", 3), 0);
}

static void test_string_unescape(void **state)
{
	static const char doc[] = "\"a\\n\\u00e9\\ud83d\\ude00\\/\"";
	char buf[32];
	struct obuf w = { .p = buf, .cap = sizeof(buf) };
	struct json j = { .s = doc, .len = sizeof(doc) - 1 };

	(void)state;
	assert_int_equal(sl_json_string(&j, &w), 0);
	assert_int_equal(j.i, j.len);
	assert_false(w.full);
	assert_int_equal(w.len, 1 + 1 + 2 + 4 + 1);
	assert_memory_equal(buf, "a\n\xc3\xa9\xf0\x9f\x98\x80/", w.len);

	/* Too small a buffer: read to the end all the same, flagged full. */
	{
		char small[3];
		struct obuf sw = { .p = small, .cap = sizeof(small) };
		struct json sj = { .s = doc, .len = sizeof(doc) - 1 };

		assert_int_equal(sl_json_string(&sj, &sw), 0);
		assert_int_equal(sj.i, sj.len);
		assert_true(sw.full);
	}
	/* Not at a quote. */
	j = (struct json){ .s = "abc", .len = 3 };
	assert_int_equal(sl_json_string(&j, NULL), -EINVAL);
}

static void test_numbers(void **state)
{
	static const struct {
		const char *s;
		uint64_t u;
		bool is_int;
	} cases[] = {
		{ "0", 0, true },
		{ "3600", 3600, true },
		{ "18446744073709551615", UINT64_MAX, true },
		{ "18446744073709551616", UINT64_MAX, true }, /* saturates */
		{ "99999999999999999999999", UINT64_MAX, true },
		{ "3600.5", 3600, false },
		{ "1e9", 1, false },
		{ "-1", 1, false },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct json j = { .s = cases[i].s, .len = strlen(cases[i].s) };
		uint64_t u = 42;
		bool is_int = !cases[i].is_int;

		assert_int_equal(sl_json_number(&j, &u, &is_int), 0);
		assert_int_equal(j.i, j.len);
		assert_true(u == cases[i].u);
		assert_int_equal(is_int, cases[i].is_int);
	}
}

/* JSON_DEPTH_MAX nested arrays are read; one more is refused. */
static void test_depth(void **state)
{
	char doc[2 * (JSON_DEPTH_MAX + 1) + 1];
	int n;

	(void)state;
	for (n = JSON_DEPTH_MAX; n <= JSON_DEPTH_MAX + 1; n++) {
		memset(doc, '[', (size_t)n);
		memset(doc + n, ']', (size_t)n);
		assert_int_equal(parse_all(doc, 2 * (size_t)n), n <= JSON_DEPTH_MAX ? 0 : -EINVAL);
	}
}

/* sl_json_print_string(): whole, escaped, and read back by the reader as the
 * same bytes, for strings longer than its pieces, with a multi-byte
 * character on every piece boundary. */
static void test_print_string(void **state)
{
	char in[400], *out = NULL, back[400];
	size_t outlen = 0, i, n = 0;
	FILE *f;

	(void)state;
	for (i = 0; n + 4 < sizeof(in) - 1; i++) {
		if (i % 7 == 0) {
			memcpy(in + n, "\xe2\x82\xac", 3); /* U+20AC, 3 bytes */
			n += 3;
		} else {
			in[n++] = "a\"\\\n"[i % 4];
		}
	}
	in[n] = '\0';
	f = open_memstream(&out, &outlen);
	assert_non_null(f);
	sl_json_print_string(f, in);
	assert_int_equal(fclose(f), 0);
	{
		struct json j = { .s = out, .len = outlen, .i = 0 };
		struct obuf w = { .p = back, .cap = sizeof(back) - 1 };

		assert_int_equal(sl_json_string(&j, &w), 0);
		assert_false(w.full);
		assert_int_equal(j.i, outlen); /* one literal, nothing after it */
		back[w.len] = '\0';
		assert_string_equal(back, in);
	}
	free(out);
	/* Invalid UTF-8 and control bytes come out escaped. */
	f = open_memstream(&out, &outlen);
	sl_json_print_string(f, "x\xff\x01\x7f\"\\\xc3\xa9");
	fclose(f);
	/* Valid UTF-8 stays as it is. */
	assert_string_equal(out, "\"x\\ufffd\\u0001\\u007f\\\"\\\\\xc3\xa9\"");
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_documents),    cmocka_unit_test(test_string_unescape),
		cmocka_unit_test(test_numbers),	     cmocka_unit_test(test_depth),
		cmocka_unit_test(test_print_string),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
