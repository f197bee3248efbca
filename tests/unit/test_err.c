// SPDX-License-Identifier: MIT
/* Unit tests for common/err.c, the error type: the errno and the place are
 * kept, context goes in front, a long message is cut without overflow or a
 * split character, and NULL is an error nobody reads. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/err.h"

static void set_keeps_errno_and_place(void **state)
{
	struct sl_err e = { 0 };
	int line;

	(void)state;
	line = __LINE__ + 1;
	assert_int_equal(sl_err_set(&e, EACCES, "cannot open `%s`", "/x"), -EACCES);
	assert_string_equal(sl_err_msg(&e), "cannot open `/x`");
	assert_int_equal(sl_err_errno(&e), EACCES);
	assert_int_equal(e.line, line);
	assert_non_null(e.file);
	assert_non_null(strstr(e.file, "test_err.c"));
	assert_string_equal(e.func, "set_keeps_errno_and_place");

	/* A negative errno is the same errno. */
	assert_int_equal(sl_err_set(&e, -ENOENT, "gone"), -ENOENT);
	assert_int_equal(sl_err_errno(&e), ENOENT);

	/* No system call failed: errno 0 kept, -EINVAL returned. */
	assert_int_equal(sl_err_set(&e, 0, "bad value `%d`", 7), -EINVAL);
	assert_int_equal(sl_err_errno(&e), 0);
	assert_string_equal(sl_err_msg(&e), "bad value `7`");
}

static void sys_appends_strerror(void **state)
{
	struct sl_err e = { 0 };

	(void)state;
	assert_int_equal(sl_err_sys(&e, -EACCES, "reading %s", "/x"), -EACCES);
	assert_string_equal(sl_err_msg(&e), "reading /x: Permission denied");
	assert_int_equal(sl_err_errno(&e), EACCES);
}

static void wrap_prepends_context(void **state)
{
	struct sl_err e = { 0 };
	unsigned line;

	(void)state;
	sl_err_set(&e, EACCES, "permission denied");
	line = e.line;
	sl_err_wrap(&e, "reading %s", "/x");
	assert_string_equal(sl_err_msg(&e), "reading /x: permission denied");
	sl_err_wrap(&e, "policy `%s`", "a");
	assert_string_equal(sl_err_msg(&e), "policy `a`: reading /x: permission denied");
	/* The errno and the place stay the innermost ones. */
	assert_int_equal(sl_err_errno(&e), EACCES);
	assert_int_equal(e.line, line);
	assert_string_equal(e.func, "wrap_prepends_context");

	/* An empty error gets the context alone. */
	sl_err_clear(&e);
	sl_err_wrap(&e, "context");
	assert_string_equal(sl_err_msg(&e), "context");
}

static void clear_empties(void **state)
{
	struct sl_err e = { 0 };

	(void)state;
	sl_err_set(&e, EIO, "x");
	sl_err_clear(&e);
	assert_string_equal(sl_err_msg(&e), "");
	assert_int_equal(sl_err_errno(&e), 0);
	assert_null(e.file);
	assert_int_equal(e.line, 0);
}

static void null_is_allowed(void **state)
{
	(void)state;
	assert_int_equal(sl_err_set(NULL, EIO, "x %s", "y"), -EIO);
	assert_int_equal(sl_err_sys(NULL, EIO, "x"), -EIO);
	assert_int_equal(sl_err_set(NULL, 0, "x"), -EINVAL);
	sl_err_wrap(NULL, "ctx %d", 1);
	sl_err_clear(NULL);
	assert_string_equal(sl_err_msg(NULL), "");
	assert_int_equal(sl_err_errno(NULL), 0);
}

static void long_message_is_cut(void **state)
{
	static char big[3 * SL_ERR_MSG_MAX];
	struct sl_err e;

	(void)state;
	memset(&e, 'Z', sizeof(e)); /* no NUL anywhere before the set */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(sl_err_set(&e, E2BIG, "%s", big), -E2BIG);
	assert_int_equal(strlen(sl_err_msg(&e)), SL_ERR_MSG_MAX - 1);
	assert_memory_equal(sl_err_msg(&e), big, SL_ERR_MSG_MAX - 1);

	/* Nothing goes after a cut: not the strerror, not the inner message
	 * after a long context (the context comes first). */
	sl_err_sys(&e, EIO, "%s", big);
	assert_int_equal(strlen(sl_err_msg(&e)), SL_ERR_MSG_MAX - 1);
	assert_null(strstr(sl_err_msg(&e), "Input/output"));
	sl_err_set(&e, EIO, "inner");
	sl_err_wrap(&e, "%s", big);
	assert_int_equal(strlen(sl_err_msg(&e)), SL_ERR_MSG_MAX - 1);
	assert_null(strstr(sl_err_msg(&e), "inner"));

	/* A long inner message under a short context: cut at the end. */
	sl_err_set(&e, EIO, "%s", big);
	sl_err_wrap(&e, "ctx");
	assert_int_equal(strlen(sl_err_msg(&e)), SL_ERR_MSG_MAX - 1);
	assert_memory_equal(sl_err_msg(&e), "ctx: aaa", 8);
}

/* A cut that falls inside a UTF-8 sequence drops the sequence's head. */
static void cut_keeps_utf8_whole(void **state)
{
	static char big[SL_ERR_MSG_MAX + 8];
	struct sl_err e;
	size_t pad;

	(void)state;
	/* "é" is 2 bytes, "€" 3, "😀" 4: put each so the cut splits it after
	 * each possible byte, and check what is left. */
	static const char *const chars[] = { "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80" };
	for (size_t c = 0; c < 3; c++) {
		size_t clen = strlen(chars[c]);

		for (size_t kept = 0; kept <= clen; kept++) {
			/* @kept bytes of the character fit before the cut */
			pad = SL_ERR_MSG_MAX - 1 - kept;
			memset(big, 'a', pad);
			memcpy(big + pad, chars[c], clen);
			strcpy(big + pad + clen, "tail");
			sl_err_set(&e, 0, "%s", big);
			if (kept == clen) {
				assert_int_equal(strlen(e.msg), SL_ERR_MSG_MAX - 1);
				assert_memory_equal(e.msg + pad, chars[c], clen);
			} else {
				assert_int_equal(strlen(e.msg), pad);
			}
		}
	}

	/* Bytes that are not UTF-8 are left as they were cut. */
	memset(big, 'a', SL_ERR_MSG_MAX - 2);
	big[SL_ERR_MSG_MAX - 2] = (char)0xff;
	strcpy(big + SL_ERR_MSG_MAX - 1, "tail");
	sl_err_set(&e, 0, "%s", big);
	assert_int_equal(strlen(e.msg), SL_ERR_MSG_MAX - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(set_keeps_errno_and_place), cmocka_unit_test(sys_appends_strerror),
		cmocka_unit_test(wrap_prepends_context),     cmocka_unit_test(clear_empties),
		cmocka_unit_test(null_is_allowed),	     cmocka_unit_test(long_message_is_cut),
		cmocka_unit_test(cut_keeps_utf8_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
