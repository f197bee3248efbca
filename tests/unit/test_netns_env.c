// SPDX-License-Identifier: MIT
/* Unit tests for netns_env_each(), the environment `sluice exec` and
 * `sluice env` give a sandbox: every CA variable a common client reads
 * (README, "Clients") names the sandbox's one bundle, once; the proxy
 * variables name the gateway. No broker is asked: the control socket named
 * does not exist, so there are no placeholders (and a warning on stderr). */

#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "netns/netns.h"
#include "netns/netns_internal.h"

#define ENV_MAX 64

struct env {
	size_t n;
	char key[ENV_MAX][64];
	char value[ENV_MAX][600];
};

static void collect(const char *key, const char *value, void *arg)
{
	struct env *e = arg;

	assert_true(e->n < ENV_MAX);
	snprintf(e->key[e->n], sizeof(e->key[0]), "%s", key);
	snprintf(e->value[e->n], sizeof(e->value[0]), "%s", value);
	e->n++;
}

/* The value of @key, failing the test unless it is there exactly once. */
static const char *get(const struct env *e, const char *key)
{
	const char *found = NULL;
	size_t i;

	for (i = 0; i < e->n; i++) {
		if (strcmp(e->key[i], key) != 0)
			continue;
		if (found)
			fail_msg("`%s` given twice", key);
		found = e->value[i];
	}
	if (!found)
		fail_msg("`%s` not given", key);
	return found;
}

static void sandbox(struct netns_sandbox *sb)
{
	memset(sb, 0, sizeof(*sb));
	snprintf(sb->name, sizeof(sb->name), "envtest");
	sb->addr = 0x0ac80006; /* 10.200.0.6, gateway 10.200.0.5 */
	sb->gw = 0x0ac80005;
	sb->ports.proxy = 3128;
	snprintf(sb->socket, sizeof(sb->socket), "/nonexistent/sluice-test.sock");
}

static void test_ca_variables(void **state)
{
	static const char *const want[] = {
		"SSL_CERT_FILE",       "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
		"NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO",     "PIP_CERT",
		"npm_config_cafile",   "NPM_CONFIG_CAFILE",  "CARGO_HTTP_CAINFO",
		"AWS_CA_BUNDLE",       "DENO_CERT",	     "BUNDLE_SSL_CA_CERT",
	};
	struct netns_sandbox sb;
	struct env *e = calloc(1, sizeof(*e));
	size_t i;

	(void)state;
	assert_non_null(e);
	sandbox(&sb);
	netns_env_each(&sb, collect, e);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_string_equal(get(e, want[i]), NETNS_STATE_DIR "/envtest/ca-bundle.crt");
	free(e);
}

static void test_proxy_variables(void **state)
{
	static const char *const want[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
					    "https_proxy" };
	struct netns_sandbox sb;
	struct env *e = calloc(1, sizeof(*e));
	size_t i;

	(void)state;
	assert_non_null(e);
	sandbox(&sb);
	netns_env_each(&sb, collect, e);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_string_equal(get(e, want[i]), "http://10.200.0.5:3128");
	assert_string_equal(get(e, "NO_PROXY"), "10.200.0.5");
	assert_string_equal(get(e, "no_proxy"), "10.200.0.5");
	/* Nothing but these and the CA variables: no placeholders without a broker. */
	assert_int_equal(e->n, 6 + 12);
	free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ca_variables),
		cmocka_unit_test(test_proxy_variables),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
