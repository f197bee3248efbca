// SPDX-License-Identifier: MIT
/* Unit tests for broker/config.c's errors: what sluiced prints for a
 * configuration it refuses (the message, byte for byte, and its errno), and
 * that a refused file leaves the configuration as it was. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/config.h"
#include "common/err.h"
#include "common/file.h"
#include "common/ytree.h"

static char dir[] = "/tmp/test_config.XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char path[128];

	(void)state;
	snprintf(path, sizeof(path), "%s/c.yaml", dir);
	unlink(path);
	return rmdir(dir);
}

/* Writes @text to DIR/c.yaml; @path gets its name. */
static void write_conf(char *path, size_t n, const char *text)
{
	snprintf(path, n, "%s/c.yaml", dir);
	assert_int_equal(file_write_atomic(path, text, strlen(text), 0600), 0);
}

static void test_missing_file(void **state)
{
	struct broker_config c;
	struct sl_err err = { 0 };
	char path[128], want[256];

	(void)state;
	broker_config_defaults(&c);
	snprintf(path, sizeof(path), "%s/none.yaml", dir);
	assert_int_equal(broker_config_load(path, &c, &err), -ENOENT);
	snprintf(want, sizeof(want), "%s: cannot open: %s", path, strerror(ENOENT));
	assert_string_equal(sl_err_msg(&err), want);
	assert_int_equal(sl_err_errno(&err), ENOENT);
	/* Nobody listening: allowed. */
	assert_int_equal(broker_config_load(path, &c, NULL), -ENOENT);
}

static void test_not_a_file(void **state)
{
	struct broker_config c;
	struct sl_err err = { 0 };
	char want[256];

	(void)state;
	broker_config_defaults(&c);
	assert_int_equal(broker_config_load(dir, &c, &err), -EINVAL);
	snprintf(want, sizeof(want), "%s: not a regular file of at most %u bytes", dir,
		 YTREE_MAX_BYTES);
	assert_string_equal(sl_err_msg(&err), want);
	assert_int_equal(sl_err_errno(&err), 0);
}

static void test_yaml_error_has_position(void **state)
{
	struct broker_config c, before;
	struct sl_err err = { 0 };
	char path[128], want[256];

	(void)state;
	broker_config_defaults(&c);
	before = c;
	write_conf(path, sizeof(path), "proxy_port: 3129\nportz: 1\n");
	assert_int_equal(broker_config_load(path, &c, &err), -EINVAL);
	snprintf(want, sizeof(want), "%s:2:1: unknown key `portz`", path);
	assert_string_equal(sl_err_msg(&err), want);
	/* A refusal of the text, not a system call's failure. */
	assert_int_equal(sl_err_errno(&err), 0);
	/* Untouched on failure. */
	assert_memory_equal(&c, &before, sizeof(c));
}

static void test_good_file(void **state)
{
	struct broker_config c;
	struct sl_err err = { 0 };
	char path[128];

	(void)state;
	broker_config_defaults(&c);
	write_conf(path, sizeof(path), "proxy_port: 3130\n");
	assert_int_equal(broker_config_load(path, &c, &err), 0);
	assert_int_equal(c.proxy_port, 3130);
}

/* resolve_timeout: 5 s unless set; a duration like the other timeouts, and
 * one out of range is refused at its position with nothing changed. */
static void test_resolve_timeout(void **state)
{
	struct broker_config c, before;
	struct sl_err err = { 0 };
	char path[128], want[256];

	(void)state;
	broker_config_defaults(&c);
	assert_int_equal(c.resolve_timeout_ms, 5000);
	write_conf(path, sizeof(path), "resolve_timeout: 1500ms\n");
	assert_int_equal(broker_config_load(path, &c, &err), 0);
	assert_int_equal(c.resolve_timeout_ms, 1500);
	before = c;
	write_conf(path, sizeof(path), "connect_timeout: 2s\nresolve_timeout: 0s\n");
	assert_int_equal(broker_config_load(path, &c, &err), -EINVAL);
	snprintf(
		want, sizeof(want),
		"%s:2:18: bad duration `0s` for `resolve_timeout` (e.g. 500ms, 10s, 2m; at most 1h)",
		path);
	assert_string_equal(sl_err_msg(&err), want);
	assert_memory_equal(&c, &before, sizeof(c));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_not_a_file),
		cmocka_unit_test(test_yaml_error_has_position),
		cmocka_unit_test(test_good_file),
		cmocka_unit_test(test_resolve_timeout),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
