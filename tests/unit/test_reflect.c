// SPDX-License-Identifier: MIT
/* Unit tests for broker/reflect.c: secrets redacted from responses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/reflect.h"

#define SECRET "s3cr3t-0123456789abcdef"

/* Scans @in in pieces of @step bytes, as the relay does: each call gets
 * what was held back plus the next piece; returns what reached the sandbox. */
static char *relay(struct reflect *r, const char *in, size_t step)
{
	size_t n = strlen(in), sent = 0, have = 0;
	unsigned char *buf = malloc(n + 1);
	char *out = calloc(1, n + 1);

	assert_non_null(buf);
	assert_non_null(out);
	while (sent < n) {
		size_t add = n - sent - have < step ? n - sent - have : step;
		bool final;
		size_t hold;

		memcpy(buf + have, in + sent + have, add);
		have += add;
		final = sent + have == n;
		hold = reflect_scan(r, buf, have, final);
		assert_true(hold <= have);
		if (final)
			assert_int_equal(hold, 0);
		memcpy(out + sent, buf, have - hold);
		sent += have - hold;
		memmove(buf, buf + have - hold, hold);
		have = hold;
	}
	free(buf);
	return out;
}

static void test_redacts_whole_and_split(void **state)
{
	static const struct {
		const char *in, *want;
		size_t hits;
	} rows[] = {
		{ "nothing here", "nothing here", 0 },
		{ SECRET, "***********************", 1 },
		{ "{\"X-Token\": \"" SECRET "\"}", "{\"X-Token\": \"***********************\"}",
		  1 },
		{ SECRET SECRET, "**********************************************", 2 },
		{ "a" SECRET "b" SECRET "c", "a***********************b***********************c",
		  2 },
		/* a beginning that does not go on is sent as it is */
		{ "s3cr3t-0123 and s3cr3t-", "s3cr3t-0123 and s3cr3t-", 0 },
		{ "ss3cr3t-0123456789abcdefs", "s***********************s", 1 },
	};
	static const size_t steps[] = { 1, 2, 3, 5, 7, 16, 1000 };
	size_t i, j;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		for (j = 0; j < sizeof(steps) / sizeof(steps[0]); j++) {
			struct reflect r = { 0 };
			char *out;

			assert_int_equal(
				reflect_add(&r, (const unsigned char *)SECRET, strlen(SECRET), 3),
				0);
			out = relay(&r, rows[i].in, steps[j]);
			if (strcmp(out, rows[i].want) != 0)
				fail_msg("row %zu step %zu: got `%s`", i, steps[j], out);
			assert_int_equal(r.hits, rows[i].hits);
			if (rows[i].hits)
				assert_int_equal(r.hit_cred, 3);
			free(out);
			reflect_clear(&r);
		}
	}
}

static void test_several_secrets(void **state)
{
	struct reflect r = { 0 };
	char *out;

	(void)state;
	assert_int_equal(reflect_add(&r, (const unsigned char *)"alpha-secret", 12, 0), 0);
	assert_int_equal(reflect_add(&r, (const unsigned char *)"beta-secret-2", 13, 1), 0);
	/* the same bytes twice are held once */
	assert_int_equal(reflect_add(&r, (const unsigned char *)"alpha-secret", 12, 2), 0);
	assert_int_equal(r.n, 2);
	out = relay(&r, "x beta-secret-2 y alpha-secret z", 4);
	assert_string_equal(out, "x ************* y ************ z");
	assert_int_equal(r.hits, 2);
	assert_int_equal(r.hit_cred, 1);
	free(out);
	reflect_clear(&r);
	assert_int_equal(r.n, 0);
	assert_null(r.buf[0]);
	reflect_clear(NULL);
}

static void test_limits(void **state)
{
	struct reflect r = { 0 };
	unsigned char big[REFLECT_MAX_LEN + 1];
	char name[32];
	size_t i;
	unsigned char b[] = "x";

	(void)state;
	/* too short to look for: not held, not an error */
	assert_int_equal(reflect_add(&r, (const unsigned char *)"short", 5, 0), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(reflect_scan(&r, b, 1, false), 0);
	memset(big, 'a', sizeof(big));
	assert_int_equal(reflect_add(&r, big, sizeof(big), 0), -E2BIG);
	assert_int_equal(reflect_add(&r, big, REFLECT_MAX_LEN, 0), 0);
	reflect_clear(&r);
	for (i = 0; i < REFLECT_MAX; i++) {
		snprintf(name, sizeof(name), "secret-number-%02zu", i);
		assert_int_equal(reflect_add(&r, (const unsigned char *)name, strlen(name), 0), 0);
	}
	assert_int_equal(reflect_add(&r, (const unsigned char *)"one-too-many", 12, 0), -E2BIG);
	reflect_clear(&r);
}

/* The held-back tail is exactly the part that could still become a secret. */
static void test_hold_is_tight(void **state)
{
	struct reflect r = { 0 };
	unsigned char a[] = "hello s3cr3t-01";
	unsigned char b[] = "hello world";
	unsigned char c[] = "hello s3cr3t-01";

	(void)state;
	assert_int_equal(reflect_add(&r, (const unsigned char *)SECRET, strlen(SECRET), 0), 0);
	assert_int_equal(reflect_scan(&r, a, strlen((char *)a), false), 9);
	assert_int_equal(reflect_scan(&r, b, strlen((char *)b), false), 0);
	assert_int_equal(reflect_scan(&r, c, strlen((char *)c), true), 0);
	assert_int_equal(r.hits, 0);
	reflect_clear(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redacts_whole_and_split),
		cmocka_unit_test(test_several_secrets),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_hold_is_tight),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
