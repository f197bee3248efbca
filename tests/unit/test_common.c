// SPDX-License-Identifier: MIT
/* Unit tests for common/: SipHash against the reference vectors, the
 * bounded output buffer, ASCII case folding, the bounded file reader, and
 * the logger: a dead stderr and the once-per-interval warning. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/file.h"
#include "common/log.h"
#include "common/obuf.h"
#include "common/siphash.h"
#include "common/text.h"

/* Key 00..0f; the paper's vectors for messages 00, 00 01, ... (first ones
 * and the 15-byte one from its appendix). */
static void test_siphash_reference(void **state)
{
	static const uint64_t want[] = {
		0x726fdb47dd0e0e31ull, 0x74f839c593dc67fdull, 0x0d6c8009d9a94f5aull,
		0x85676696d7fb7e2dull, 0xcf2794e0277187b7ull, 0x18765564cd99a68dull,
		0xcbc9466e58fee3ceull, 0xab0200f58b01d137ull, 0x93f5f5799a932462ull,
	};
	uint8_t msg[16];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)i;
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_true(siphash24(0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull, msg, i) ==
			    want[i]);
	assert_true(siphash24(0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull, msg, 15) ==
		    0xa129ca6149be45e5ull);
	/* Another key, another hash. */
	assert_true(siphash24(1, 2, msg, 15) != 0xa129ca6149be45e5ull);
}

static void test_obuf(void **state)
{
	char mem[8];
	struct obuf o = { .p = mem, .cap = sizeof(mem) };

	(void)state;
	obuf_puts(&o, "abc");
	obuf_putc(&o, 'd');
	assert_false(o.full);
	assert_int_equal(o.len, 4);
	assert_memory_equal(mem, "abcd", 4);
	obuf_puts(&o, "efghi"); /* one too many: nothing of it is written */
	assert_true(o.full);
	assert_int_equal(o.len, 4);
	obuf_putc(&o, 'x'); /* stays full */
	assert_int_equal(o.len, 4);
}

static void test_text_eq_ci(void **state)
{
	(void)state;
	assert_true(text_eq_ci("Host", 4, "hOST", 4));
	assert_false(text_eq_ci("Host", 4, "Hosts", 5));
	assert_false(text_eq_ci("Ho[t", 4, "Ho{t", 4)); /* only letters fold */
	assert_int_equal(text_lower('Z'), 'z');
	assert_int_equal(text_lower('@'), '@');
}

/* What replaced sscanf's %u: a field starts with its digit, and a number
 * that does not fit is refused, not wrapped. */
static void test_text_numbers(void **state)
{
	unsigned long long v;
	const char *end = NULL;
	unsigned u;

	(void)state;
	assert_true(text_ull("123:45", 10, &end, &v));
	assert_true(v == 123);
	assert_int_equal(*end, ':');
	assert_true(text_ull("ffFF 1", 16, &end, &v));
	assert_true(v == 0xffff);
	assert_int_equal(*end, ' ');
	assert_true(text_ull("18446744073709551615", 10, &end, &v));
	assert_true(v == 18446744073709551615ull);
	assert_false(text_ull("18446744073709551616", 10, &end, &v));
	assert_false(text_ull(" 1", 10, &end, &v));
	assert_false(text_ull("-1", 10, &end, &v));
	assert_false(text_ull("+1", 10, &end, &v));
	assert_false(text_ull("", 10, &end, &v));
	assert_false(text_ull("g", 16, &end, &v));

	assert_true(text_uint("4294967295", &u));
	assert_true(u == 4294967295u);
	assert_false(text_uint("4294967296", &u));
	assert_false(text_uint("12x", &u));
	assert_false(text_uint("-1", &u));
	assert_true(text_uint("0", &u));
	assert_int_equal(u, 0);
}

/* A bounded copy: whole with its NUL, or refused with nothing written. */
static void test_text_copy(void **state)
{
	char b[4] = "xyz";

	(void)state;
	assert_true(text_copy(b, sizeof(b), "abc"));
	assert_string_equal(b, "abc");
	assert_false(text_copy(b, sizeof(b), "abcd"));
	assert_string_equal(b, "abc");
	assert_true(text_copy(b, sizeof(b), ""));
	assert_string_equal(b, "");
}

static void test_file_read_all(void **state)
{
	char path[] = "/tmp/sluice-test-file.XXXXXX";
	char *buf;
	size_t len;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "hello\n", 6), 6);
	close(fd);
	assert_int_equal(file_read_all(path, 6, &buf, &len), 0);
	assert_int_equal(len, 6);
	assert_string_equal(buf, "hello\n");
	free(buf);
	assert_int_equal(file_read_all(path, 5, &buf, &len), -EFBIG);
	assert_null(buf);
	assert_int_equal(file_read_all("/tmp", 100, &buf, &len), -EINVAL);
	unlink(path);
	assert_int_equal(file_read_all(path, 100, &buf, &len), -ENOENT);
}

/* What the loaders branch on: a refused file (errno 0) or a failed call
 * (its errno), with the words they show. */
static void test_file_read_all_err(void **state)
{
	char path[] = "/tmp/sluice-test-file.XXXXXX", want[128];
	struct sl_err e = { 0 };
	char *buf;
	size_t len;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "hello\n", 6), 6);
	close(fd);
	assert_int_equal(file_read_all_err(path, 6, &buf, &len, &e), 0);
	assert_string_equal(buf, "hello\n");
	free(buf);

	assert_int_equal(file_read_all_err(path, 5, &buf, &len, &e), -EFBIG);
	assert_null(buf);
	assert_int_equal(sl_err_errno(&e), 0);
	snprintf(want, sizeof(want), "%s: not a regular file of at most 5 bytes", path);
	assert_string_equal(sl_err_msg(&e), want);

	assert_int_equal(file_read_all_err("/tmp", 100, &buf, &len, &e), -EINVAL);
	assert_int_equal(sl_err_errno(&e), 0);
	assert_string_equal(sl_err_msg(&e), "/tmp: not a regular file of at most 100 bytes");

	unlink(path);
	assert_int_equal(file_read_all_err(path, 100, &buf, &len, &e), -ENOENT);
	assert_int_equal(sl_err_errno(&e), ENOENT);
	snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", path);
	assert_string_equal(sl_err_msg(&e), want);
	assert_int_equal(file_read_all_err(path, 100, &buf, &len, NULL), -ENOENT);
}

/* A stderr whose reader is gone: the first line fails with EPIPE and marks
 * it dead, the next ones are only counted; the process goes on. */
static void test_log_dead_stderr(void **state)
{
	int p[2], saved;
	uint64_t lost;

	(void)state;
	signal(SIGPIPE, SIG_IGN); /* as sluiced does */
	assert_int_equal(pipe(p), 0);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	close(p[0]);
	assert_true(dup2(p[1], STDERR_FILENO) == STDERR_FILENO);
	close(p[1]);
	lost = log_lines_lost();
	assert_false(log_stderr_dead());
	log_warn("test: nobody reads this");
	assert_true(log_stderr_dead());
	log_warn("test: nor this");
	log_err("test: nor this");
	assert_true(log_lines_lost() == lost + 3);
	assert_true(dup2(saved, STDERR_FILENO) == STDERR_FILENO);
	close(saved);
}

static void test_log_every(void **state)
{
	struct log_every le = { 0 };
	uint64_t held = 99;

	(void)state;
	assert_true(log_every_ok(&le, 1000, 10000, &held));
	assert_true(held == 0);
	assert_false(log_every_ok(&le, 1001, 10000, &held));
	assert_false(log_every_ok(&le, 10999, 10000, &held));
	assert_true(log_every_ok(&le, 11000, 10000, &held));
	assert_true(held == 2);
	assert_false(log_every_ok(&le, 11000, 10000, &held));
	assert_true(log_every_ok(&le, 30000, 10000, &held));
	assert_true(held == 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_siphash_reference), cmocka_unit_test(test_obuf),
		cmocka_unit_test(test_text_eq_ci),	  cmocka_unit_test(test_file_read_all),
		cmocka_unit_test(test_file_read_all_err), cmocka_unit_test(test_log_dead_stderr),
		cmocka_unit_test(test_log_every),	  cmocka_unit_test(test_text_numbers),
		cmocka_unit_test(test_text_copy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
