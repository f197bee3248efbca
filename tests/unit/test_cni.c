// SPDX-License-Identifier: MIT
/* Unit tests for sluice-cni's words (cli/cni_conf.c): which network configs
 * are taken and with which CNI error code the others are refused; policy
 * names that could leave policyDir; CNI_ARGS; the order of the policy
 * sources; the sandbox name; the ADD result, error and VERSION JSON, read
 * back with jansson as a runtime reads them. */

#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cni.h"

#define BASE "\"cniVersion\":\"1.0.0\",\"name\":\"sluice\",\"type\":\"sluice-cni\""

static int parse(const char *text, struct cni_conf *c, struct cni_error *e)
{
	memset(e, 0, sizeof(*e));
	return cni_conf_parse(text, strlen(text), c, e);
}

static void test_conf_full(void **state)
{
	static const char text[] =
		"{" BASE ",\"socket\":\"/run/x/ctl.sock\",\"brokerNetns\":\"/run/netns/brk\","
		"\"policyDir\":\"/etc/p\",\"policy\":\"default\",\"audit\":true,"
		"\"capabilities\":{\"io.kubernetes.cri.pod-annotations\":true},"
		"\"runtimeConfig\":{\"io.kubernetes.cri.pod-annotations\":{\"sluice.io/policy\":\"web\",\"other\":\"x\"}},"
		"\"prevResult\":{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"10.200.0.2/30\",\"interface\":1}]},"
		"\"somethingElse\":[1,2]}";
	struct cni_conf c;
	struct cni_error e;

	(void)state;
	assert_int_equal(parse(text, &c, &e), 0);
	assert_string_equal(c.version, "1.0.0");
	assert_string_equal(c.name, "sluice");
	assert_string_equal(c.socket, "/run/x/ctl.sock");
	assert_string_equal(c.broker_netns, "/run/netns/brk");
	assert_string_equal(c.policy_dir, "/etc/p");
	assert_string_equal(c.policy, "default");
	assert_string_equal(c.annotation, "web");
	assert_true(c.audit);
	assert_true(c.prev_result);
	assert_string_equal(c.prev_addr, "10.200.0.2/30");
}

static void test_conf_defaults(void **state)
{
	struct cni_conf c;
	struct cni_error e;

	(void)state;
	assert_int_equal(parse("{" BASE "}", &c, &e), 0);
	assert_string_equal(c.socket, CNI_DEFAULT_SOCKET);
	assert_string_equal(c.policy_dir, CNI_DEFAULT_POLICY_DIR);
	assert_string_equal(c.broker_netns, "");
	assert_string_equal(c.policy, "");
	assert_string_equal(c.annotation, "");
	assert_false(c.audit);
	assert_false(c.prev_result);
	/* A name under /run/netns, as `sluice --broker-netns` takes. */
	assert_int_equal(parse("{" BASE ",\"brokerNetns\":\"sluice-broker\"}", &c, &e), 0);
	assert_string_equal(c.broker_netns, "sluice-broker");
}

/* Each refused config, with its code and a word of its message. */
static void test_conf_refused(void **state)
{
	static const struct {
		const char *text;
		int code;
		const char *word;
	} cases[] = {
		{ "", CNI_ERR_DECODE, "not JSON" },
		{ "{" BASE, CNI_ERR_DECODE, "not JSON" },
		{ "[1]", CNI_ERR_DECODE, "not a JSON object" },
		{ "{" BASE ",\"name\":\"again\"}", CNI_ERR_DECODE, "not JSON" },
		{ "{\"name\":\"sluice\"}", CNI_ERR_CONFIG, "cniVersion" },
		{ "{\"cniVersion\":\"0.4.0\",\"name\":\"sluice\"}", CNI_ERR_VERSION, "0.4.0" },
		{ "{\"cniVersion\":1,\"name\":\"sluice\"}", CNI_ERR_CONFIG,
		  "`cniVersion` must be a string" },
		{ "{\"cniVersion\":\"1.0.0\"}", CNI_ERR_CONFIG, "`name`" },
		{ "{" BASE ",\"ipam\":{\"type\":\"host-local\"}}", CNI_ERR_UNSUPPORTED, "ipam" },
		{ "{" BASE ",\"socket\":\"ctl.sock\"}", CNI_ERR_CONFIG, "`socket`" },
		{ "{" BASE ",\"socket\":42}", CNI_ERR_CONFIG, "`socket`" },
		{ "{" BASE ",\"policyDir\":\"etc/p\"}", CNI_ERR_CONFIG, "`policyDir`" },
		{ "{" BASE ",\"brokerNetns\":\"../x\"}", CNI_ERR_CONFIG, "`brokerNetns`" },
		{ "{" BASE ",\"brokerNetns\":\"\"}", 0, NULL },
		{ "{" BASE ",\"policy\":\"../x\"}", CNI_ERR_CONFIG, "`policy`" },
		{ "{" BASE ",\"policy\":\"a/b\"}", CNI_ERR_CONFIG, "`policy`" },
		{ "{" BASE ",\"policy\":[]}", CNI_ERR_CONFIG, "`policy`" },
		{ "{" BASE ",\"audit\":\"true\"}", CNI_ERR_CONFIG,
		  "`audit` must be true or false" },
		{ "{" BASE ",\"audit\":1}", CNI_ERR_CONFIG, "`audit`" },
		{ "{" BASE ",\"audit\":false}", 0, NULL },
		{ "{" BASE ",\"runtimeConfig\":[]}", CNI_ERR_CONFIG, "runtimeConfig" },
		{ "{" BASE ",\"runtimeConfig\":{\"io.kubernetes.cri.pod-annotations\":\"x\"}}",
		  CNI_ERR_CONFIG, "pod-annotations" },
		{ "{" BASE
		  ",\"runtimeConfig\":{\"io.kubernetes.cri.pod-annotations\":{\"sluice.io/policy\":1}}}",
		  CNI_ERR_CONFIG, "sluice.io/policy" },
		{ "{" BASE ",\"prevResult\":\"x\"}", CNI_ERR_DECODE, "prevResult" },
		{ "{" BASE ",\"prevResult\":null}", 0, NULL },
		/* A NUL inside a string would cut the path the broker is given
		 * (jansson refuses it without JSON_ALLOW_NUL). */
		{ "{" BASE ",\"policyDir\":\"/etc/p\\u0000/x\"}", CNI_ERR_DECODE, "not JSON" },
	};
	struct cni_conf c;
	struct cni_error e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = parse(cases[i].text, &c, &e);

		if (cases[i].code == 0) {
			assert_int_equal(r, 0);
			continue;
		}
		if (r == 0 || e.code != cases[i].code || !strstr(e.msg, cases[i].word))
			fail_msg("case %zu `%s`: r %d code %d msg `%s`", i, cases[i].text, r,
				 e.code, e.msg);
	}
}

static void test_policy_names(void **state)
{
	static const struct {
		const char *name;
		bool ok;
	} cases[] = {
		{ "default", true },
		{ "web-2.prod_x", true },
		{ "a", true },
		{ "", false },
		{ ".", false },
		{ "..", false },
		{ "../x", false },
		{ "x/../../etc/passwd", false },
		{ "a..b", false },
		{ ".hidden", false },
		{ "a/b", false },
		{ "/etc/passwd", false },
		{ "a b", false },
		{ "a\nb", false },
		{ "caf\xc3\xa9", false },
		{ "012345678901234567890123456789012345678901234567890123456789012", true },
		{ "0123456789012345678901234567890123456789012345678901234567890123", false },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (cni_policy_name_ok(cases[i].name) != cases[i].ok)
			fail_msg("`%s`: wanted %d", cases[i].name, cases[i].ok);
}

static void test_args(void **state)
{
	static const struct {
		const char *args;
		int r;
		const char *value;
	} cases[] = {
		{ NULL, 0, NULL },
		{ "", 0, NULL },
		{ "IgnoreUnknown=1;K8S_POD_NAME=web", 0, NULL },
		{ "SLUICE_POLICY=web", 1, "web" },
		{ "IgnoreUnknown=1;SLUICE_POLICY=web;K8S_POD_NAME=x", 1, "web" },
		{ "X_SLUICE_POLICY=no;SLUICE_POLICYX=no;SLUICE_POLICY=yes", 1, "yes" },
		{ "SLUICE_POLICY=", 1, "" },
		{ "a=1;;SLUICE_POLICY=web;", 1, "web" },
		{ "garbage", -EINVAL, NULL },
		{ "a=1;garbage;SLUICE_POLICY=web", -EINVAL, NULL },
	};
	char out[32];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = cni_args_get(cases[i].args, CNI_ARGS_POLICY, out, sizeof(out));

		assert_int_equal(r, cases[i].r);
		if (r == 1)
			assert_string_equal(out, cases[i].value);
	}
	/* A value that does not fit is refused, not cut. */
	assert_int_equal(cni_args_get("SLUICE_POLICY=0123456789", CNI_ARGS_POLICY, out, 10),
			 -EINVAL);
}

/* The annotation, then CNI_ARGS, then the config; every source checked. */
static void test_policy_choice(void **state)
{
	struct cni_conf c;
	struct cni_error e;
	char path[256];

	(void)state;
	assert_int_equal(
		parse("{" BASE ",\"policyDir\":\"/p\",\"policy\":\"conf\","
		      "\"runtimeConfig\":{\"io.kubernetes.cri.pod-annotations\":{\"sluice.io/policy\":\"ann\"}}}",
		      &c, &e),
		0);
	assert_int_equal(cni_policy_choose(&c, "SLUICE_POLICY=args", path, sizeof(path), &e), 0);
	assert_string_equal(path, "/p/ann.yaml");
	c.annotation[0] = '\0';
	assert_int_equal(
		cni_policy_choose(&c, "K8S_POD_NAME=x;SLUICE_POLICY=args", path, sizeof(path), &e),
		0);
	assert_string_equal(path, "/p/args.yaml");
	assert_int_equal(cni_policy_choose(&c, "K8S_POD_NAME=x", path, sizeof(path), &e), 0);
	assert_string_equal(path, "/p/conf.yaml");
	assert_int_equal(cni_policy_choose(&c, NULL, path, sizeof(path), &e), 0);
	assert_string_equal(path, "/p/conf.yaml");

	/* A bad name from the pod or the environment is refused, and the
	 * message says where it came from. */
	snprintf(c.annotation, sizeof(c.annotation), "../x");
	assert_int_equal(cni_policy_choose(&c, NULL, path, sizeof(path), &e), -EINVAL);
	assert_int_equal(e.code, CNI_ERR_POLICY);
	assert_non_null(strstr(e.msg, "`../x`"));
	assert_non_null(strstr(e.msg, "pod annotation"));
	c.annotation[0] = '\0';
	assert_int_equal(
		cni_policy_choose(&c, "SLUICE_POLICY=../../etc/shadow", path, sizeof(path), &e),
		-EINVAL);
	assert_int_equal(e.code, CNI_ERR_POLICY);
	assert_non_null(strstr(e.msg, "CNI_ARGS"));
	/* An empty SLUICE_POLICY is a name that is not one, not "unset". */
	assert_int_equal(cni_policy_choose(&c, "SLUICE_POLICY=", path, sizeof(path), &e), -EINVAL);
	assert_int_equal(cni_policy_choose(&c, "nokey", path, sizeof(path), &e), -EINVAL);
	assert_int_equal(e.code, CNI_ERR_ENV);

	/* Nothing names one. */
	c.policy[0] = '\0';
	assert_int_equal(cni_policy_choose(&c, "IgnoreUnknown=1", path, sizeof(path), &e), -EINVAL);
	assert_int_equal(e.code, CNI_ERR_POLICY);
	assert_non_null(strstr(e.msg, "no policy"));

	/* What a pod gave is quoted as printable ASCII only. */
	snprintf(c.annotation, sizeof(c.annotation), "a\x01\xc3\xa9\"");
	assert_int_equal(cni_policy_choose(&c, NULL, path, sizeof(path), &e), -EINVAL);
	assert_non_null(strstr(e.msg, "`a???\"`"));
}

static void test_sandbox_name(void **state)
{
	static const char id[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char out[64];

	(void)state;
	assert_int_equal(cni_sandbox_name(id, out, sizeof(out)), 0);
	assert_string_equal(out, "cni-0123456789abcdef01234567");
	assert_int_equal(cni_sandbox_name("short", out, sizeof(out)), 0);
	assert_string_equal(out, "cni-short");
	assert_int_equal(cni_sandbox_name("a.b_c-d", out, sizeof(out)), 0);
	assert_int_equal(cni_sandbox_name("", out, sizeof(out)), -EINVAL);
	assert_int_equal(cni_sandbox_name(NULL, out, sizeof(out)), -EINVAL);
	assert_int_equal(cni_sandbox_name("-x", out, sizeof(out)), -EINVAL);
	assert_int_equal(cni_sandbox_name("../x", out, sizeof(out)), -EINVAL);
	assert_int_equal(cni_sandbox_name("a/b", out, sizeof(out)), -EINVAL);
	assert_int_equal(cni_sandbox_name("a b", out, sizeof(out)), -EINVAL);
}

/* The pod whose files ADD writes: both names or none, each a Kubernetes
 * name, since they become a path. */
static void test_pod_names(void **state)
{
	static const struct {
		const char *args;
		int r;
	} cases[] = {
		{ NULL, 0 },
		{ "IgnoreUnknown=1;K8S_POD_NAME=web", 0 },
		{ "K8S_POD_NAMESPACE=default", 0 },
		{ "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0", 1 },
		{ "K8S_POD_NAMESPACE=a.b-c;K8S_POD_NAME=9x.y", 1 },
		{ "K8S_POD_NAMESPACE=default;K8S_POD_NAME=..", -EINVAL },
		{ "K8S_POD_NAMESPACE=..;K8S_POD_NAME=web", -EINVAL },
		{ "K8S_POD_NAMESPACE=default;K8S_POD_NAME=a/b", -EINVAL },
		{ "K8S_POD_NAMESPACE=default;K8S_POD_NAME=.x", -EINVAL },
		{ "K8S_POD_NAMESPACE=default;K8S_POD_NAME=-x", -EINVAL },
		{ "K8S_POD_NAMESPACE=default;K8S_POD_NAME=Web", -EINVAL },
		{ "K8S_POD_NAMESPACE=;K8S_POD_NAME=web", -EINVAL },
		{ "K8S_POD_NAMESPACE=default;K8S_POD_NAME=a..b", -EINVAL },
		{ "K8S_POD_NAMESPACE=default;garbage", -EINVAL },
	};
	char ns[CNI_K8S_NAME_MAX + 1], pod[CNI_K8S_NAME_MAX + 1], args[600];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (cni_pod_names(cases[i].args, ns, pod) != cases[i].r)
			fail_msg("`%s`: wanted %d", cases[i].args, cases[i].r);
	assert_int_equal(cni_pod_names("K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p", ns, pod), 1);
	assert_string_equal(ns, "ns");
	assert_string_equal(pod, "p");
	/* 253 characters, and one more. */
	snprintf(args, sizeof(args), "K8S_POD_NAMESPACE=n;K8S_POD_NAME=%0253d", 0);
	assert_int_equal(cni_pod_names(args, ns, pod), 1);
	snprintf(args, sizeof(args), "K8S_POD_NAMESPACE=n;K8S_POD_NAME=%0254d", 0);
	assert_int_equal(cni_pod_names(args, ns, pod), -EINVAL);
}

static const char *str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	assert_true(json_is_string(v));
	return json_string_value(v);
}

static void test_result_json(void **state)
{
	struct cni_wiring w = {
		.host_if = "sl-0ac80002",
		.host_mac = "aa:bb:cc:00:00:01",
		.ct_if = "eth0",
		.ct_mac = "aa:bb:cc:00:00:02",
		.netns = "/run/netns/netns-1234",
		.addr = 0x0ac80002,
		.gw = 0x0ac80001,
		.prefix = 30,
	};
	json_t *o, *ifs, *ip, *route, *ns;
	char *s = cni_result_json("1.0.0", &w);

	(void)state;
	assert_non_null(s);
	o = json_loads(s, 0, NULL);
	assert_non_null(o);
	assert_string_equal(str(o, "cniVersion"), "1.0.0");
	ifs = json_object_get(o, "interfaces");
	assert_int_equal(json_array_size(ifs), 2);
	assert_string_equal(str(json_array_get(ifs, 0), "name"), "sl-0ac80002");
	assert_string_equal(str(json_array_get(ifs, 0), "mac"), "aa:bb:cc:00:00:01");
	assert_null(json_object_get(json_array_get(ifs, 0), "sandbox"));
	assert_string_equal(str(json_array_get(ifs, 1), "name"), "eth0");
	assert_string_equal(str(json_array_get(ifs, 1), "mac"), "aa:bb:cc:00:00:02");
	assert_string_equal(str(json_array_get(ifs, 1), "sandbox"), "/run/netns/netns-1234");
	assert_int_equal(json_array_size(json_object_get(o, "ips")), 1);
	ip = json_array_get(json_object_get(o, "ips"), 0);
	assert_string_equal(str(ip, "address"), "10.200.0.2/30");
	assert_string_equal(str(ip, "gateway"), "10.200.0.1");
	assert_int_equal(json_integer_value(json_object_get(ip, "interface")), 1);
	route = json_array_get(json_object_get(o, "routes"), 0);
	assert_string_equal(str(route, "dst"), "0.0.0.0/0");
	assert_string_equal(str(route, "gw"), "10.200.0.1");
	ns = json_object_get(json_object_get(o, "dns"), "nameservers");
	assert_int_equal(json_array_size(ns), 1);
	assert_string_equal(json_string_value(json_array_get(ns, 0)), "10.200.0.1");
	json_decref(o);
	free(s);
}

static void test_error_json(void **state)
{
	struct cni_error e;
	json_t *o;
	char *s;

	(void)state;
	cni_fail(&e, CNI_ERR_TRY_AGAIN, EAGAIN, "connect: refused", "cannot reach `%s`", "/x.sock");
	s = cni_error_json(NULL, &e);
	o = json_loads(s, 0, NULL);
	assert_non_null(o);
	assert_string_equal(str(o, "cniVersion"), CNI_VERSION);
	assert_int_equal(json_integer_value(json_object_get(o, "code")), 11);
	assert_string_equal(str(o, "msg"), "cannot reach `/x.sock`");
	assert_string_equal(str(o, "details"), "connect: refused");
	json_decref(o);
	free(s);

	cni_fail(&e, CNI_ERR_CONFIG, EINVAL, NULL, "quote \" and \\ and \t tab");
	s = cni_error_json("1.0.0", &e);
	o = json_loads(s, 0, NULL);
	assert_non_null(o);
	assert_string_equal(str(o, "msg"), "quote \" and \\ and ? tab");
	assert_null(json_object_get(o, "details"));
	json_decref(o);
	free(s);

	s = cni_version_json();
	o = json_loads(s, 0, NULL);
	assert_non_null(o);
	assert_string_equal(str(o, "cniVersion"), "1.0.0");
	assert_int_equal(json_array_size(json_object_get(o, "supportedVersions")), 1);
	assert_string_equal(
		json_string_value(json_array_get(json_object_get(o, "supportedVersions"), 0)),
		"1.0.0");
	json_decref(o);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conf_full),    cmocka_unit_test(test_conf_defaults),
		cmocka_unit_test(test_conf_refused), cmocka_unit_test(test_policy_names),
		cmocka_unit_test(test_args),	     cmocka_unit_test(test_policy_choice),
		cmocka_unit_test(test_sandbox_name), cmocka_unit_test(test_result_json),
		cmocka_unit_test(test_error_json),   cmocka_unit_test(test_pod_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
