// SPDX-License-Identifier: MIT
/* Unit tests for the proxy's spare buffers (broker/proxy/io.c, built into
 * this test, so that it can count the spares a thread keeps): a parked
 * buffer comes back to the next taker of its size, empty; a thread keeps a
 * bounded number; the rest are freed, and at the end all (the
 * AddressSanitizer build, `make asan`, reports a lost one as a leak). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "broker/proxy/io.c"

enum { SIZE_A = 16384, SIZE_B = 33792, KEPT = PROXY_SPARE_BUFS, MORE = 6 };

static bool in_set(struct buf *const *set, size_t n, const struct buf *b)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (set[i] == b)
			return true;
	}
	return false;
}

/* Parked, then taken again: the same buffer, empty, for its own size only. */
static void test_reuse_by_size(void **state)
{
	struct buf *a, *b, *p, *q;

	(void)state;
	a = proxy_buf_new(SIZE_A);
	b = proxy_buf_new(SIZE_B);
	assert_non_null(a);
	assert_non_null(b);
	memcpy(a->data, "GET / HTTP/1.1", 14);
	a->pos = 4;
	a->len = 14;
	p = a;
	q = b;
	proxy_buf_park(&a);
	proxy_buf_park(&b);
	assert_null(a); /* the caller's pointer is cleared */
	assert_null(b);
	a = proxy_buf_new(SIZE_B);
	assert_ptr_equal(a, q); /* the one of that size, not the last parked */
	assert_int_equal(a->cap, SIZE_B);
	b = proxy_buf_new(SIZE_A);
	assert_ptr_equal(b, p);
	assert_int_equal(b->cap, SIZE_A);
	assert_int_equal(b->pos, 0);
	assert_int_equal(b->len, 0);
	/* Nothing of another size is handed out: a fresh one. */
	proxy_buf_park(&b);
	p = proxy_buf_new(SIZE_A + 1);
	assert_non_null(p);
	assert_int_equal(p->cap, SIZE_A + 1);
	free(p);
	free(a);
	b = NULL;
	proxy_buf_park(&b); /* NULL: nothing */
	proxy_buf_spare_drop();
}

/* A thread keeps KEPT; what is parked beyond them is freed. */
static void test_bounded(void **state)
{
	struct buf *made[KEPT + MORE], *taken[KEPT];
	size_t i;

	(void)state;
	for (i = 0; i < KEPT + MORE; i++) {
		made[i] = proxy_buf_new(SIZE_A);
		assert_non_null(made[i]);
	}
	for (i = 0; i < KEPT + MORE; i++) {
		struct buf *b = made[i];

		proxy_buf_park(&b);
	}
	assert_int_equal(n_spare, KEPT);
	/* The first KEPT parked are the ones kept, each handed out once. */
	for (i = 0; i < KEPT; i++) {
		taken[i] = proxy_buf_new(SIZE_A);
		assert_true(in_set(made, KEPT, taken[i]));
		assert_false(in_set(taken, i, taken[i]));
	}
	assert_int_equal(n_spare, 0);
	for (i = 0; i < KEPT; i++)
		proxy_buf_park(&taken[i]);
	assert_int_equal(n_spare, KEPT);
	/* At the end of a worker: all of them freed, none kept. */
	proxy_buf_spare_drop();
	assert_int_equal(n_spare, 0);
	taken[0] = proxy_buf_new(SIZE_A);
	assert_non_null(taken[0]);
	free(taken[0]);
	assert_int_equal(n_spare, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reuse_by_size),
		cmocka_unit_test(test_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
