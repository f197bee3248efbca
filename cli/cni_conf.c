// SPDX-License-Identifier: MIT
/* sluice-cni's words: the network config it reads (jansson), the policy it
 * chooses, the result and error JSON it writes. Nothing here touches a
 * namespace, so that all of it is unit-tested (tests/unit/test_cni.c).
 *
 * common/json.c's functions carry sl_json_ so that none of them shares a
 * name with one of jansson's (a call could otherwise be resolved from
 * libsluice.a before libjansson). */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "cli/cni.h"

/* JSON strings are UTF-8, and a message may quote what a pod or the
 * environment gave (cut at any byte): it is kept to printable ASCII. */
static void printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			*s = '?';
}

int cni_fail(struct cni_error *e, int code, int err_no, const char *details, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	snprintf(e->details, sizeof(e->details), "%s", details ? details : "");
	printable(e->msg);
	printable(e->details);
	return -err_no;
}

/* A string member @key of @o into @out: absent leaves @out alone (0);
 * another type, or one that does not fit, is an invalid config. */
static int get_str(json_t *o, const char *key, char *out, size_t outlen, struct cni_error *e)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return 0;
	if (!json_is_string(v))
		return cni_fail(e, CNI_ERR_CONFIG, EINVAL, NULL,
				"network config: `%s` must be a string", key);
	if (json_string_length(v) >= outlen ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return cni_fail(
			e, CNI_ERR_CONFIG, EINVAL, NULL,
			"network config: `%s` is too long or holds a NUL (at most %zu bytes)", key,
			outlen - 1);
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

/* The pod's sluice.io/policy, from runtimeConfig (the
 * io.kubernetes.cri.pod-annotations capability). */
static int parse_runtime_config(json_t *root, struct cni_conf *c, struct cni_error *e)
{
	json_t *rc = json_object_get(root, "runtimeConfig"), *ann;

	if (!rc)
		return 0;
	if (!json_is_object(rc))
		return cni_fail(e, CNI_ERR_CONFIG, EINVAL, NULL,
				"network config: `runtimeConfig` must be an object");
	ann = json_object_get(rc, "io.kubernetes.cri.pod-annotations");
	if (!ann)
		return 0;
	if (!json_is_object(ann))
		return cni_fail(
			e, CNI_ERR_CONFIG, EINVAL, NULL,
			"network config: `runtimeConfig.io.kubernetes.cri.pod-annotations` must be an object");
	/* Too long for any name: kept cut, and refused by the name check. */
	if (json_is_string(json_object_get(ann, CNI_ANNOTATION_POLICY)))
		snprintf(c->annotation, sizeof(c->annotation), "%s",
			 json_string_value(json_object_get(ann, CNI_ANNOTATION_POLICY)));
	else if (json_object_get(ann, CNI_ANNOTATION_POLICY))
		return cni_fail(e, CNI_ERR_CONFIG, EINVAL, NULL,
				"pod annotation `%s` must be a string", CNI_ANNOTATION_POLICY);
	return 0;
}

/* prevResult (DEL, CHECK): only its first address is used, by CHECK. */
static int parse_prev_result(json_t *root, struct cni_conf *c, struct cni_error *e)
{
	json_t *pr = json_object_get(root, "prevResult"), *ips, *addr;

	if (!pr || json_is_null(pr))
		return 0;
	if (!json_is_object(pr))
		return cni_fail(e, CNI_ERR_DECODE, EINVAL, NULL, "`prevResult` must be an object");
	c->prev_result = true;
	ips = json_object_get(pr, "ips");
	if (!json_is_array(ips) || json_array_size(ips) == 0)
		return 0;
	addr = json_object_get(json_array_get(ips, 0), "address");
	if (json_is_string(addr))
		snprintf(c->prev_addr, sizeof(c->prev_addr), "%s", json_string_value(addr));
	return 0;
}

static bool broker_netns_ok(const char *s)
{
	size_t i;

	if (s[0] == '/')
		return true;
	/* A name under /run/netns, as `sluice --broker-netns` takes. */
	if (!s[0] || s[0] == '.' || s[0] == '-')
		return false;
	for (i = 0; s[i]; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
			return false;
	return true;
}

/* A boolean member @key of @o into @out: absent leaves @out alone (0);
 * another type is an invalid config (a string "true" is not taken: a
 * typo must not leave a sandbox enforcing that its author meant to audit,
 * or the reverse). */
static int get_bool(json_t *o, const char *key, bool *out, struct cni_error *e)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return cni_fail(e, CNI_ERR_CONFIG, EINVAL, NULL,
				"network config: `%s` must be true or false", key);
	*out = json_is_true(v);
	return 0;
}

int cni_conf_parse(const char *text, size_t len, struct cni_conf *c, struct cni_error *e)
{
	json_error_t jerr;
	json_t *root;
	int r;

	memset(c, 0, sizeof(*c));
	snprintf(c->socket, sizeof(c->socket), "%s", CNI_DEFAULT_SOCKET);
	snprintf(c->policy_dir, sizeof(c->policy_dir), "%s", CNI_DEFAULT_POLICY_DIR);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return cni_fail(e, CNI_ERR_DECODE, EINVAL, jerr.text,
				"network config is not JSON (line %d, column %d)", jerr.line,
				jerr.column);
	if (!json_is_object(root)) {
		r = cni_fail(e, CNI_ERR_DECODE, EINVAL, NULL,
			     "network config is not a JSON object");
		goto out;
	}
	if ((r = get_str(root, "cniVersion", c->version, sizeof(c->version), e)) < 0 ||
	    (r = get_str(root, "name", c->name, sizeof(c->name), e)) < 0 ||
	    (r = get_str(root, "socket", c->socket, sizeof(c->socket), e)) < 0 ||
	    (r = get_str(root, "brokerNetns", c->broker_netns, sizeof(c->broker_netns), e)) < 0 ||
	    (r = get_str(root, "policyDir", c->policy_dir, sizeof(c->policy_dir), e)) < 0 ||
	    (r = get_str(root, "policy", c->policy, sizeof(c->policy), e)) < 0 ||
	    (r = get_bool(root, "audit", &c->audit, e)) < 0)
		goto out;
	if (!c->version[0]) {
		r = cni_fail(e, CNI_ERR_CONFIG, EINVAL, NULL, "network config: no `cniVersion`");
		goto out;
	}
	if (strcmp(c->version, CNI_VERSION) != 0) {
		r = cni_fail(e, CNI_ERR_VERSION, EPROTO, NULL,
			     "cniVersion `%s` is not supported (sluice-cni speaks " CNI_VERSION ")",
			     c->version);
		/* The answer is in a version the runtime can read. */
		snprintf(c->version, sizeof(c->version), "%s", CNI_VERSION);
		goto out;
	}
	if (!c->name[0]) {
		r = cni_fail(e, CNI_ERR_CONFIG, EINVAL, NULL, "network config: no `name`");
		goto out;
	}
	/* Addresses come from the broker's pool, one /30 per sandbox: an IPAM
	 * plugin's would not be the ones the broker registers. */
	if (json_object_get(root, "ipam")) {
		r = cni_fail(
			e, CNI_ERR_UNSUPPORTED, EINVAL, NULL,
			"network config: `ipam` is not supported (the broker assigns addresses)");
		goto out;
	}
	if (c->socket[0] != '/') {
		r = cni_fail(e, CNI_ERR_CONFIG, EINVAL, NULL,
			     "network config: `socket` must be an absolute path, not `%s`",
			     c->socket);
		goto out;
	}
	if (c->policy_dir[0] != '/') {
		r = cni_fail(e, CNI_ERR_CONFIG, EINVAL, NULL,
			     "network config: `policyDir` must be an absolute path, not `%s`",
			     c->policy_dir);
		goto out;
	}
	if (c->broker_netns[0] && !broker_netns_ok(c->broker_netns)) {
		r = cni_fail(
			e, CNI_ERR_CONFIG, EINVAL, NULL,
			"network config: `brokerNetns` `%s` is neither a name under /run/netns nor an absolute path",
			c->broker_netns);
		goto out;
	}
	if (c->policy[0] && !cni_policy_name_ok(c->policy)) {
		r = cni_fail(
			e, CNI_ERR_CONFIG, EINVAL, NULL,
			"network config: `policy` `%s` is not a policy name ([A-Za-z0-9._-], no leading '.', no \"..\")",
			c->policy);
		goto out;
	}
	if ((r = parse_runtime_config(root, c, e)) < 0 || (r = parse_prev_result(root, c, e)) < 0)
		goto out;
	r = 0;
out:
	json_decref(root);
	return r;
}

bool cni_policy_name_ok(const char *name)
{
	size_t i, n = strlen(name);

	if (n == 0 || n > CNI_POLICY_NAME_MAX || name[0] == '.' || strstr(name, ".."))
		return false;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			return false;
	return true;
}

int cni_args_get(const char *args, const char *key, char *out, size_t outlen)
{
	size_t klen = strlen(key);
	const char *p = args;

	if (!args)
		return 0;
	while (*p) {
		const char *end = strchr(p, ';'), *eq;
		size_t n = end ? (size_t)(end - p) : strlen(p);

		eq = memchr(p, '=', n);
		/* Empty pairs (";;", a trailing ';') are nobody's mistake. */
		if (n && !eq)
			return -EINVAL;
		if (n && (size_t)(eq - p) == klen && !memcmp(p, key, klen)) {
			size_t vlen = n - klen - 1;

			if (vlen >= outlen)
				return -EINVAL;
			memcpy(out, eq + 1, vlen);
			out[vlen] = '\0';
			return 1;
		}
		p += n;
		if (*p == ';')
			p++;
	}
	return 0;
}

int cni_policy_choose(const struct cni_conf *c, const char *args, char *path, size_t pathlen,
		      struct cni_error *e)
{
	char from_args[256];
	const char *name, *from;
	int r;

	r = cni_args_get(args, CNI_ARGS_POLICY, from_args, sizeof(from_args));
	if (r < 0)
		return cni_fail(e, CNI_ERR_ENV, EINVAL, NULL,
				"CNI_ARGS is not KEY=VALUE;... or its " CNI_ARGS_POLICY
				" is too long");
	if (c->annotation[0]) {
		name = c->annotation;
		from = "pod annotation " CNI_ANNOTATION_POLICY;
	} else if (r == 1) {
		name = from_args;
		from = "CNI_ARGS " CNI_ARGS_POLICY;
	} else if (c->policy[0]) {
		name = c->policy;
		from = "network config `policy`";
	} else {
		return cni_fail(e, CNI_ERR_POLICY, EINVAL, NULL,
				"no policy: set the pod annotation " CNI_ANNOTATION_POLICY
				", CNI_ARGS " CNI_ARGS_POLICY
				", or `policy` in the network config");
	}
	if (!cni_policy_name_ok(name))
		return cni_fail(
			e, CNI_ERR_POLICY, EINVAL, NULL,
			"policy name `%.100s` (%s) is not a name: [A-Za-z0-9._-], at most %d, no leading '.', no \"..\"",
			name, from, CNI_POLICY_NAME_MAX);
	if ((size_t)snprintf(path, pathlen, "%s/%s.yaml", c->policy_dir, name) >= pathlen)
		return cni_fail(e, CNI_ERR_CONFIG, ENAMETOOLONG, NULL, "policyDir `%s` is too long",
				c->policy_dir);
	return 0;
}

static bool k8s_name_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > CNI_K8S_NAME_MAX || s[0] == '.' || s[0] == '-' || strstr(s, ".."))
		return false;
	for (i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) &&
		    !strchr(".-", s[i]))
			return false;
	return true;
}

int cni_pod_names(const char *args, char ns[CNI_K8S_NAME_MAX + 1], char pod[CNI_K8S_NAME_MAX + 1])
{
	int a = cni_args_get(args, "K8S_POD_NAMESPACE", ns, CNI_K8S_NAME_MAX + 1);
	int b = cni_args_get(args, "K8S_POD_NAME", pod, CNI_K8S_NAME_MAX + 1);

	if (a < 0 || b < 0)
		return -EINVAL;
	if (a == 0 || b == 0)
		return 0;
	return k8s_name_ok(ns) && k8s_name_ok(pod) ? 1 : -EINVAL;
}

int cni_sandbox_name(const char *id, char *out, size_t outlen)
{
	size_t i;

	/* The spec's container id: an alphanumeric, then [A-Za-z0-9_.-]. */
	if (!id || !isalnum((unsigned char)id[0]))
		return -EINVAL;
	for (i = 0; id[i]; i++)
		if (!isalnum((unsigned char)id[i]) && !strchr("._-", id[i]))
			return -EINVAL;
	if ((size_t)snprintf(out, outlen, CNI_SANDBOX_PREFIX "%.*s", CNI_SANDBOX_ID_LEN, id) >=
	    outlen)
		return -EINVAL;
	return 0;
}

static void v4(uint32_t a, char out[INET_ADDRSTRLEN])
{
	struct in_addr ia = { .s_addr = htonl(a) };

	inet_ntop(AF_INET, &ia, out, INET_ADDRSTRLEN);
}

/* @o serialised compactly, and dropped. */
static char *dump(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	return s;
}

char *cni_result_json(const char *version, const struct cni_wiring *w)
{
	char addr[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN], cidr[INET_ADDRSTRLEN + 4];

	v4(w->addr, addr);
	v4(w->gw, gw);
	snprintf(cidr, sizeof(cidr), "%s/%u", addr, w->prefix);
	/* Interface 0 is the broker's end (in the broker's namespace, not the
	 * container's: no `sandbox`), 1 the container's; the address is on 1.
	 * The gateway is the container's resolver: the DNS filter listens there. */
	return dump(json_pack("{s:s, s:[{s:s, s:s}, {s:s, s:s, s:s}], s:[{s:i, s:s, s:s}],"
			      " s:[{s:s, s:s}], s:{s:[s]}}",
			      "cniVersion", version, "interfaces", "name", w->host_if, "mac",
			      w->host_mac, "name", w->ct_if, "mac", w->ct_mac, "sandbox", w->netns,
			      "ips", "interface", 1, "address", cidr, "gateway", gw, "routes",
			      "dst", "0.0.0.0/0", "gw", gw, "dns", "nameservers", gw));
}

char *cni_error_json(const char *version, const struct cni_error *e)
{
	json_t *o = json_pack("{s:s, s:i, s:s}", "cniVersion",
			      version && version[0] ? version : CNI_VERSION, "code", e->code, "msg",
			      e->msg);

	if (o && e->details[0] &&
	    json_object_set_new(o, "details", json_stringn(e->details, strlen(e->details))) < 0) {
		json_decref(o);
		return NULL;
	}
	return dump(o);
}

char *cni_version_json(void)
{
	return dump(json_pack("{s:s, s:[s]}", "cniVersion", CNI_VERSION, "supportedVersions",
			      CNI_VERSION));
}
