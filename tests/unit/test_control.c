// SPDX-License-Identifier: MIT
/* Unit tests for the control handler (broker/control.c) on a sandbox
 * table of its own: no socket, no worker and no stub of the broker, the
 * handler's context is made here (control_new() over a struct broker with
 * a configuration and a table). A register, list and unregister round,
 * refused requests that change nothing, and the configuration answer. */

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

#include "broker/audit.h"
#include "broker/broker_internal.h"
#include "common/ctlproto.h"
#include "common/log.h"

static char dir[64], policy_path[128], audit_path[128];
static struct broker *B;
static struct control *C;
static char out[CTL_RESP_MAX];

static int setup(void **state)
{
	FILE *f;

	(void)state;
	log_threshold = LOG_LVL_WARN;
	snprintf(dir, sizeof(dir), "/tmp/sluice-unit-control-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(policy_path, sizeof(policy_path), "%s/p.yaml", dir);
	f = fopen(policy_path, "w");
	assert_non_null(f);
	fputs("version: 1\negress:\n  allow:\n    - host: example.com\n", f);
	fclose(f);
	/* The audit lines of requests, where a test can read them. */
	snprintf(audit_path, sizeof(audit_path), "%s/audit.log", dir);
	assert_int_equal(audit_open(audit_path, NULL), 0);
	B = calloc(1, sizeof(*B));
	assert_non_null(B);
	broker_config_defaults(&B->cfg);
	snprintf(B->cfg.state_dir, sizeof(B->cfg.state_dir), "%s/state", dir);
	assert_int_equal(addr_parse_cidr("10.78.0.0/24", &B->cfg.pool_net, &B->cfg.pool_plen), 0);
	assert_int_equal(sandbox_table_new(&B->cfg, &B->sandboxes), 0);
	C = control_new(B);
	assert_non_null(C);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	control_free(C);
	sandbox_table_free(B->sandboxes);
	audit_close();
	free(B);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* The handler's answer to @fmt..., in out[]. */
static const char *ask(const char *fmt, ...)
{
	char line[CTL_REQ_MAX + 1];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	out[0] = '\0';
	control_handle(C, line, out, sizeof(out));
	return out;
}

static void assert_prefix(const char *s, const char *prefix)
{
	if (strncmp(s, prefix, strlen(prefix)))
		fail_msg("answer `%s` does not start with `%s`", s, prefix);
}

/* How many audit lines hold both @a and @b. */
static unsigned audited(const char *a, const char *b)
{
	char line[4096];
	unsigned n = 0;
	FILE *f;

	audit_flush();
	f = fopen(audit_path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, a) && strstr(line, b);
	fclose(f);
	return n;
}

static void test_ping(void **state)
{
	(void)state;
	assert_string_equal(ask(CTL_PING), CTL_OK);
}

static void test_register_list_unregister(void **state)
{
	char want[512];

	(void)state;
	assert_string_equal(ask(CTL_LIST), CTL_OK);
	/* The first /30 of the pool: its .2, and the sandbox's CA. */
	assert_prefix(ask(CTL_REGISTER " sb-a auto %s", policy_path),
		      CTL_OK "10.78.0.2\n-----BEGIN CERTIFICATE-----\n");
	snprintf(want, sizeof(want), CTL_OK "sb-a 10.78.0.2 %s 0 ok enforce\n", policy_path);
	assert_string_equal(ask(CTL_LIST), want);
	assert_int_equal(sandbox_count(B->sandboxes), 1);
	/* Its CA, by name. */
	assert_prefix(ask(CTL_CA " sb-a"), CTL_OK "-----BEGIN CERTIFICATE-----\n");

	/* The same name again: refused, the table as it was. */
	assert_prefix(ask(CTL_REGISTER " sb-a auto %s", policy_path), CTL_ERR);
	assert_string_equal(ask(CTL_LIST), want);

	/* An audit-mode sandbox at an address given by hand. */
	assert_prefix(ask(CTL_REGISTER " sb-b 10.78.0.6 %s " CTL_REGISTER_AUDIT, policy_path),
		      CTL_OK "10.78.0.6\n");
	assert_int_equal(sandbox_count(B->sandboxes), 2);
	assert_int_equal(sandbox_audit_count(B->sandboxes), 1);

	assert_string_equal(ask(CTL_UNREGISTER " sb-a"), CTL_OK);
	snprintf(want, sizeof(want), CTL_OK "sb-b 10.78.0.6 %s 0 ok audit\n", policy_path);
	assert_string_equal(ask(CTL_LIST), want);
	assert_prefix(ask(CTL_CA " sb-a"), CTL_ERR "no such sandbox `sb-a`");
	/* Gone already: an error, and sb-b stays. */
	assert_prefix(ask(CTL_UNREGISTER " sb-a"), CTL_ERR);
	assert_string_equal(ask(CTL_LIST), want);

	assert_string_equal(ask(CTL_UNREGISTER " sb-b"), CTL_OK);
	assert_string_equal(ask(CTL_LIST), CTL_OK);
	assert_int_equal(sandbox_count(B->sandboxes), 0);

	/* Each request that changes something is audited, with who asked. */
	assert_int_equal(audited("\"sandbox\":\"sb-a\"", "\"reason\":\"control-register\""), 2);
	assert_int_equal(audited("\"sandbox\":\"sb-a\"", "\"reason\":\"control-unregister\""), 2);
	assert_int_equal(audited("\"sandbox\":\"sb-b\"", "\"reason\":\"control-unregister\""), 1);
}

/* Requests that are refused change nothing. */
static void test_refused(void **state)
{
	char missing[160];

	(void)state;
	snprintf(missing, sizeof(missing), "%s/none.yaml", dir);
	assert_string_equal(ask(""), CTL_ERR "empty request\n");
	assert_string_equal(ask("frobnicate"), CTL_ERR "unknown request `frobnicate`\n");
	/* Too few words is no register at all. */
	assert_string_equal(ask(CTL_REGISTER " sb-c"), CTL_ERR "unknown request `register`\n");
	assert_prefix(ask(CTL_REGISTER " sb-c auto %s", missing), CTL_ERR);
	assert_prefix(ask(CTL_REGISTER " sb-c 10.78.0.999 %s", policy_path), CTL_ERR);
	assert_prefix(ask(CTL_REGISTER " bad/name auto %s", policy_path), CTL_ERR);
	assert_string_equal(ask(CTL_LIST), CTL_OK);
	assert_int_equal(sandbox_count(B->sandboxes), 0);
}

/* `config` says what the context's configuration holds. */
static void test_config(void **state)
{
	char want[256];

	(void)state;
	snprintf(want, sizeof(want),
		 CTL_OK "proxy_port %u\ntransparent_port %u\ndns_port %u\n"
			"sandbox_pool 10.78.0.0/24\n",
		 B->cfg.proxy_port, B->cfg.transparent_port, B->cfg.dns_port);
	assert_prefix(ask(CTL_CONFIG), want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ping),
		cmocka_unit_test(test_register_list_unregister),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_config),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
