// SPDX-License-Identifier: MIT
/* Policy loading: YAML tree -> validated, compiled, immutable policy.
 *
 * Theory of operation: common/yaml.c builds a tree with positions; this file
 * walks it once, checking every key and value and reporting the first
 * error as FILE:LINE:COL with the value in backticks; then it compiles the
 * rules into the lookup structures of match.c and guard.c. The result is
 * never changed after policy_load_*() returns: holders share it by
 * reference and a reload swaps in a new one. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"
#include "common/ytree.h"
#include "policy/policy_internal.h"

#define MAX_RULES 4096
#define MAX_PORTS 64
#define MAX_RANGES 4096
#define MAX_CREDS 256 /* CREDS_MAX in broker/broker_internal.h */

struct loader {
	const char *file;
	struct ytree_error *err;
	struct policy *p;
	struct range *user_ranges; /* grown by each list, to at most MAX_RANGES */
	size_t n_user_ranges;
	/* Rules appended after the file's own (policy_load_buffer_extra()). */
	const struct policy_extra_host *extra;
	size_t n_extra;
};

static int fail(struct loader *ld, const struct ynode *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct loader *ld, const struct ynode *at, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ytree_fail(ld->err, ld->file, at, "%s", msg);
}

/* Values shown in messages are cut and made printable: they come from files
 * users are still writing, and from fuzzers. */
static const char *shown(const struct ynode *n, char *buf, size_t len)
{
	size_t i, o = 0;

	if (n->type != YNODE_SCALAR)
		return n->type == YNODE_MAP ? "{...}" : "[...]";
	for (i = 0; i < n->len && o + 4 < len; i++) {
		unsigned char c = (unsigned char)n->str[i];

		buf[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	if (i < n->len && o + 4 <= len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}
#define SHOW(n) shown((n), (char[80]){ 0 }, 80)

static const char *type_name(const struct ynode *n)
{
	switch (n->type) {
	case YNODE_MAP:
		return "a mapping";
	case YNODE_SEQ:
		return "a list";
	default:
		return "a scalar";
	}
}

static int want(struct loader *ld, const struct ynode *n, enum ynode_type t, const char *key)
{
	static const char *const want_name[] = {
		[YNODE_SCALAR] = "a single value",
		[YNODE_SEQ] = "a list",
		[YNODE_MAP] = "a mapping",
	};

	if (n->type == t)
		return 0;
	return fail(ld, n, "`%s` must be %s, not %s", key, want_name[t], type_name(n));
}

static int want_scalar(struct loader *ld, const struct ynode *n, const char *key)
{
	int r = want(ld, n, YNODE_SCALAR, key);

	if (r == 0 && n->len == 0)
		return fail(ld, n, "empty value for `%s`", key);
	if (r == 0 && strlen(n->str) != n->len)
		return fail(ld, n, "NUL byte in `%s`", key);
	return r;
}

/*
 * Checks that every key of map @n is one of @keys (NULL-terminated), and
 * that none repeats.
 */
static int check_keys(struct loader *ld, const struct ynode *n, const char *what,
		      const char *const *keys)
{
	size_t i, j;

	for (i = 0; i + 1 < n->n; i += 2) {
		const struct ynode *k = n->kids[i];
		bool known = false;

		if (k->type != YNODE_SCALAR)
			return fail(ld, k, "keys in %s must be plain words", what);
		for (j = 0; keys[j]; j++) {
			if (strlen(keys[j]) == k->len && memcmp(keys[j], k->str, k->len) == 0)
				known = true;
		}
		if (!known) {
			char list[200] = "";
			size_t o = 0;

			for (j = 0; keys[j] && o < sizeof(list); j++)
				o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s",
						      j ? ", " : "", keys[j]);
			return fail(ld, k, "unknown key `%s` in %s (expected one of: %s)", SHOW(k),
				    what, list);
		}
		for (j = 0; j < i; j += 2) {
			const struct ynode *o2 = n->kids[j];

			if (o2->len == k->len && memcmp(o2->str, k->str, k->len) == 0)
				return fail(ld, k, "duplicate key `%s` in %s", SHOW(k), what);
		}
	}
	return 0;
}

static int parse_uint(const struct ynode *n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n->type != YNODE_SCALAR || n->len == 0 || n->len > 20)
		return -EINVAL;
	for (i = 0; i < n->len; i++) {
		if (!isdigit((unsigned char)n->str[i]))
			return -EINVAL;
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(n->str[i] - '0');
	}
	if (n->len > 1 && n->str[0] == '0')
		return -EINVAL;
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/* "15m", "30s", "1h30m", "2d": a run of NUMBER UNIT with units s, m, h, d. */
static int parse_duration(const char *s, uint64_t *sec)
{
	uint64_t total = 0;
	const char *p = s;

	if (!*p)
		return -EINVAL;
	while (*p) {
		uint64_t v = 0, mul;
		const char *start = p;

		while (isdigit((unsigned char)*p)) {
			if (v > 1000000000ull)
				return -ERANGE;
			v = v * 10 + (uint64_t)(*p++ - '0');
		}
		if (p == start)
			return -EINVAL;
		switch (*p++) {
		case 's':
			mul = 1;
			break;
		case 'm':
			mul = 60;
			break;
		case 'h':
			mul = 3600;
			break;
		case 'd':
			mul = 86400;
			break;
		default:
			return -EINVAL;
		}
		total += v * mul;
		if (total > 366ull * 86400)
			return -ERANGE;
	}
	if (total == 0)
		return -ERANGE;
	*sec = total;
	return 0;
}

/* A duration of 1 s to @max_sec (at most 366 d); @max_text says @max_sec. */
static int duration_max(struct loader *ld, const struct ynode *n, const char *key, uint64_t max_sec,
			const char *max_text, uint64_t *sec)
{
	int r = want_scalar(ld, n, key);

	if (r < 0)
		return r;
	r = parse_duration(n->str, sec);
	if (r == -ERANGE || (r == 0 && *sec > max_sec))
		return fail(ld, n, "duration `%s` for `%s` out of range (1s to %s)", SHOW(n), key,
			    max_text);
	if (r < 0)
		return fail(ld, n, "bad duration `%s` for `%s` (write e.g. 30s, 15m, 1h, 1h30m)",
			    SHOW(n), key);
	return 0;
}

static int duration(struct loader *ld, const struct ynode *n, const char *key, uint64_t *sec)
{
	return duration_max(ld, n, key, 366ull * 86400, "366d", sec);
}

static int ports(struct loader *ld, const struct ynode *n, struct policy_rule *ru)
{
	size_t i, j;
	int r = want(ld, n, YNODE_SEQ, "ports");

	if (r < 0)
		return r;
	if (n->n == 0)
		return fail(ld, n, "`ports` is empty: list at least one port");
	if (n->n > MAX_PORTS)
		return fail(ld, n, "more than %d ports in one rule", MAX_PORTS);
	ru->ports = calloc(n->n, sizeof(*ru->ports));
	if (!ru->ports)
		return -ENOMEM;
	for (i = 0; i < n->n; i++) {
		const struct ynode *it = n->kids[i];
		uint64_t v;

		if (it->type != YNODE_SCALAR)
			return fail(ld, it, "a port must be a number, not %s", type_name(it));
		r = parse_uint(it, 65535, &v);
		if (r == -ERANGE || (r == 0 && v == 0))
			return fail(ld, it, "port `%s` out of range 1-65535", SHOW(it));
		if (r < 0)
			return fail(ld, it, "bad port `%s` (a number 1-65535)", SHOW(it));
		for (j = 0; j < ru->n_ports; j++) {
			if (ru->ports[j] == v)
				return fail(ld, it, "duplicate port `%s`", SHOW(it));
		}
		ru->ports[ru->n_ports++] = (uint16_t)v;
	}
	return 0;
}

static int cidr(struct loader *ld, const struct ynode *n, const char *key, struct sl_addr *net,
		unsigned *plen)
{
	int r = want_scalar(ld, n, key);

	if (r < 0)
		return r;
	r = addr_parse_cidr(n->str, net, plen);
	if (r == -ERANGE)
		return fail(ld, n, "bad CIDR `%s`: host bits are set", SHOW(n));
	if (r < 0)
		return fail(ld, n, "bad CIDR `%s` in `%s`", SHOW(n), key);
	return 0;
}

static void rule_text(struct policy_rule *ru, const char *what)
{
	char buf[400];
	size_t o, i;

	o = (size_t)snprintf(buf, sizeof(buf), "%s ports ", what);
	for (i = 0; i < ru->n_ports && o < sizeof(buf); i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%u", i ? "," : "", ru->ports[i]);
	if (ru->raw_tcp && o < sizeof(buf))
		snprintf(buf + o, sizeof(buf) - o, " raw_tcp");
	ru->text = strdup(buf);
}

static int allow_rule(struct loader *ld, const struct ynode *n, struct policy_rule *ru)
{
	static const char *const keys[] = { "host", "cidr", "ports", "raw_tcp", NULL };
	const struct ynode *host, *cn, *pn, *rn;
	char what[300];
	int r;

	r = want(ld, n, YNODE_MAP, "allow entry");
	if (r == 0)
		r = check_keys(ld, n, "an allow rule", keys);
	if (r < 0)
		return r;
	host = ytree_map_get(n, "host");
	cn = ytree_map_get(n, "cidr");
	pn = ytree_map_get(n, "ports");
	rn = ytree_map_get(n, "raw_tcp");
	if (rn) {
		r = want_scalar(ld, rn, "raw_tcp");
		if (r < 0)
			return r;
		if (!strcmp(rn->str, "true"))
			ru->raw_tcp = true;
		else if (strcmp(rn->str, "false"))
			return fail(ld, rn, "bad value `%s` for `raw_tcp` (true or false)",
				    SHOW(rn));
	}
	if (host && cn)
		return fail(ld, n, "an allow rule has `host` or `cidr`, not both");
	if (!host && !cn)
		return fail(ld, n, "an allow rule needs `host` or `cidr`");
	if (pn) {
		r = ports(ld, pn, ru);
		if (r < 0)
			return r;
	} else {
		ru->ports = calloc(2, sizeof(*ru->ports));
		if (!ru->ports)
			return -ENOMEM;
		ru->ports[0] = 80;
		ru->ports[1] = 443;
		ru->n_ports = 2;
	}
	if (host) {
		const char *why;
		char norm[256];
		size_t nl;

		r = want_scalar(ld, host, "host");
		if (r < 0)
			return r;
		if (!policy_check_name(host->str, host->len, true, &why))
			return fail(ld, host, "bad host pattern `%s`: %s", SHOW(host), why);
		ru->kind = host->str[0] == '*' ? RULE_WILDCARD : RULE_HOST;
		if (policy_normalize_name(host->str + (ru->kind == RULE_WILDCARD ? 2 : 0),
					  host->len - (ru->kind == RULE_WILDCARD ? 2 : 0), norm,
					  &nl) < 0)
			return fail(ld, host, "bad host pattern `%s`", SHOW(host));
		ru->pattern = strdup(norm);
		snprintf(what, sizeof(what), "host %s%s", ru->kind == RULE_WILDCARD ? "*." : "",
			 norm);
	} else {
		char t[ADDR_STRLEN + 8];

		r = cidr(ld, cn, "cidr", &ru->net, &ru->plen);
		if (r < 0)
			return r;
		ru->kind = RULE_CIDR;
		addr_format_cidr(&ru->net, ru->plen, t, sizeof(t));
		snprintf(what, sizeof(what), "cidr %s", t);
	}
	rule_text(ru, what);
	if (!ru->text || (host && !ru->pattern))
		return -ENOMEM;
	return 0;
}

/*
 * Appends ld->extra (names approved while a sandbox runs) after the file's
 * rules, each an exact `host` rule on its port (0: the default 80 and 443),
 * so that the file's rules keep their indices and win where both match.
 */
static int extra_rules(struct loader *ld)
{
	struct policy *p = ld->p;
	size_t i, n = p->n_rules + ld->n_extra;
	struct policy_rule *rules;
	int *next;

	if (n > MAX_RULES + POLICY_EXTRA_MAX)
		return ytree_fail(ld->err, ld->file, NULL, "too many rules");
	rules = realloc(p->rules, n * sizeof(*rules));
	if (!rules)
		return -ENOMEM;
	p->rules = rules;
	next = realloc(p->rule_next, n * sizeof(*next));
	if (!next)
		return -ENOMEM;
	p->rule_next = next;
	for (i = 0; i < ld->n_extra; i++) {
		const struct policy_extra_host *e = &ld->extra[i];
		struct policy_rule *ru = &p->rules[p->n_rules];
		const char *why;
		char norm[256], what[300];
		size_t nl;

		memset(ru, 0, sizeof(*ru));
		p->n_rules++; /* counted now, so that policy_free() frees it */
		if (!policy_check_name(e->host, strlen(e->host), false, &why) ||
		    policy_normalize_name(e->host, strlen(e->host), norm, &nl) < 0)
			return ytree_fail(ld->err, ld->file, NULL, "bad approved host `%.253s`",
					  e->host);
		ru->kind = RULE_HOST;
		ru->pattern = strdup(norm);
		ru->n_ports = e->port ? 1 : 2;
		ru->ports = calloc(ru->n_ports, sizeof(*ru->ports));
		if (!ru->pattern || !ru->ports)
			return -ENOMEM;
		ru->ports[0] = e->port ? e->port : 80;
		if (!e->port)
			ru->ports[1] = 443;
		snprintf(what, sizeof(what), "host %s", norm);
		rule_text(ru, what);
		if (!ru->text)
			return -ENOMEM;
	}
	return 0;
}

static int ranges(struct loader *ld, const struct ynode *n, const char *key, bool allow)
{
	size_t i, room;
	int r;

	if (!allow && n->type == YNODE_SCALAR) {
		if (n->len == 7 && memcmp(n->str, "default", 7) == 0)
			return 0;
		return fail(ld, n, "`deny_ranges` is `default` or a list of CIDRs, not `%s`",
			    SHOW(n));
	}
	r = want(ld, n, YNODE_SEQ, key);
	if (r < 0)
		return r;
	/* Room for this list's entries (the limit is checked one by one). */
	room = ld->n_user_ranges + n->n < MAX_RANGES ? ld->n_user_ranges + n->n : MAX_RANGES;
	if (room > ld->n_user_ranges) {
		struct range *v = realloc(ld->user_ranges, room * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ld->user_ranges = v;
	}
	for (i = 0; i < n->n; i++) {
		const struct ynode *it = n->kids[i];
		struct range *rg;

		/* The defaults always apply; `default` in the list says so. */
		if (!allow && it->type == YNODE_SCALAR && strcmp(it->str, "default") == 0)
			continue;
		if (ld->n_user_ranges >= MAX_RANGES)
			return fail(ld, it, "more than %d ranges", MAX_RANGES);
		rg = &ld->user_ranges[ld->n_user_ranges];
		memset(rg, 0, sizeof(*rg));
		r = cidr(ld, it, key, &rg->net, &rg->plen);
		if (r < 0)
			return r;
		rg->allow = allow;
		rg->user = true;
		addr_format_cidr(&rg->net, rg->plen, rg->text, sizeof(rg->text));
		ld->n_user_ranges++;
	}
	return 0;
}

static int egress(struct loader *ld, const struct ynode *n)
{
	static const char *const keys[] = { "allow",	 "deny_ranges", "allow_ranges",
					    "redirects", "unlisted",	"hold_timeout",
					    NULL };
	const struct ynode *v;
	struct policy *p = ld->p;
	size_t i;
	int r;

	r = want(ld, n, YNODE_MAP, "egress");
	if (r == 0)
		r = check_keys(ld, n, "`egress`", keys);
	if (r < 0)
		return r;
	v = ytree_map_get(n, "allow");
	if (v) {
		r = want(ld, v, YNODE_SEQ, "allow");
		if (r < 0)
			return r;
		if (v->n > MAX_RULES)
			return fail(ld, v, "more than %d allow rules", MAX_RULES);
		p->rules = calloc(v->n ? v->n : 1, sizeof(*p->rules));
		p->rule_next = calloc(v->n ? v->n : 1, sizeof(*p->rule_next));
		if (!p->rules || !p->rule_next)
			return -ENOMEM;
		for (i = 0; i < v->n; i++) {
			p->n_rules++;
			r = allow_rule(ld, v->kids[i], &p->rules[i]);
			if (r < 0)
				return r;
		}
	}
	v = ytree_map_get(n, "deny_ranges");
	if (v && (r = ranges(ld, v, "deny_ranges", false)) < 0)
		return r;
	v = ytree_map_get(n, "allow_ranges");
	if (v && (r = ranges(ld, v, "allow_ranges", true)) < 0)
		return r;
	v = ytree_map_get(n, "redirects");
	if (v) {
		r = want_scalar(ld, v, "redirects");
		if (r < 0)
			return r;
		if (strcmp(v->str, "within-policy") == 0)
			p->redirects = POLICY_REDIRECTS_WITHIN_POLICY;
		else if (strcmp(v->str, "same-host") == 0)
			p->redirects = POLICY_REDIRECTS_SAME_HOST;
		else if (strcmp(v->str, "any") == 0)
			p->redirects = POLICY_REDIRECTS_ANY;
		else
			return fail(
				ld, v,
				"unknown redirects value `%s` (expected within-policy, same-host or any)",
				SHOW(v));
	}
	v = ytree_map_get(n, "unlisted");
	if (v) {
		r = want_scalar(ld, v, "unlisted");
		if (r < 0)
			return r;
		if (strcmp(v->str, "refuse") == 0)
			p->unlisted_hold = false;
		else if (strcmp(v->str, "hold") == 0)
			p->unlisted_hold = true;
		else
			return fail(ld, v, "unknown unlisted value `%s` (expected refuse or hold)",
				    SHOW(v));
	}
	/* Bounded: a held connection keeps a client and a slot waiting, and
	 * a person is expected to answer within minutes. */
	v = ytree_map_get(n, "hold_timeout");
	if (v && (r = duration_max(ld, v, "hold_timeout", 600, "10m", &p->hold_timeout_sec)) < 0)
		return r;
	return 0;
}

static bool env_name_ok(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > 128 || isdigit((unsigned char)s[0]))
		return false;
	for (i = 0; i < len; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	}
	return true;
}

static bool token_ok(const char *s, size_t len)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";
	size_t i;

	if (len == 0)
		return false;
	for (i = 0; i < len; i++) {
		if (!isalnum((unsigned char)s[i]) && !strchr(extra, s[i]))
			return false;
	}
	return true;
}

static int str_list(struct loader *ld, const struct ynode *n, const char *key, char ***out,
		    size_t *count)
{
	size_t i;
	int r = want(ld, n, YNODE_SEQ, key);

	if (r < 0)
		return r;
	if (n->n == 0)
		return fail(ld, n, "`%s` is empty", key);
	if (n->n > 256)
		return fail(ld, n, "more than 256 entries in `%s`", key);
	*out = calloc(n->n, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (i = 0; i < n->n; i++) {
		r = want_scalar(ld, n->kids[i], key);
		if (r < 0)
			return r;
		(*out)[i] = strdup(n->kids[i]->str);
		if (!(*out)[i])
			return -ENOMEM;
		*count = i + 1;
	}
	return 0;
}

/* Headers that frame, route or hop: a credential may not set them. */
static bool header_injectable(const char *h)
{
	static const char *const fixed[] = {
		"host",	      "connection", "content-length", "transfer-encoding",
		"keep-alive", "te",	    "trailer",	      "upgrade",
		NULL
	};
	size_t i;

	if (strncasecmp(h, "proxy-", 6) == 0)
		return false;
	for (i = 0; fixed[i]; i++) {
		if (strcasecmp(h, fixed[i]) == 0)
			return false;
	}
	return true;
}

/* Is scope host @h (a name or `*.` pattern) inside what egress.allow allows? */
static bool scope_host_allowed(const struct policy *p, const char *h)
{
	size_t i, hl;

	if (h[0] != '*')
		return policy_name_allowed(p, h, strlen(h));
	h += 2;
	hl = strlen(h);
	if (hl && h[hl - 1] == '.')
		hl--;
	for (i = 0; i < p->n_rules; i++) {
		const struct policy_rule *ru = &p->rules[i];
		size_t sl;

		if (ru->kind != RULE_WILDCARD)
			continue;
		sl = strlen(ru->pattern);
		if (hl == sl && strncasecmp(h, ru->pattern, sl) == 0)
			return true;
		if (hl > sl && h[hl - sl - 1] == '.' &&
		    strncasecmp(h + hl - sl, ru->pattern, sl) == 0)
			return true;
	}
	return false;
}

/* Printable ASCII, SP included (values that go into JSON or a form). */
static bool printable(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	}
	return true;
}

/* A scope-token of RFC 6749 3.3: %x21 / %x23-5B / %x5D-7E. */
static bool scope_token_ok(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch < 0x21 || ch > 0x7e || ch == '"' || ch == '\\')
			return false;
	}
	return len > 0;
}

/* A printable value of at most @max characters into *@out. */
static int text_value(struct loader *ld, const struct ynode *n, const char *key, size_t max,
		      char **out)
{
	int r = want_scalar(ld, n, key);

	if (r < 0)
		return r;
	if (n->len > max || !printable(n->str, n->len))
		return fail(ld, n, "bad `%s` `%s` (printable ASCII, at most %zu characters)", key,
			    SHOW(n), max);
	*out = strdup(n->str);
	return *out ? 0 : -ENOMEM;
}

static int abs_path(struct loader *ld, const struct ynode *n, const char *key, char **out)
{
	int r = want_scalar(ld, n, key);

	if (r < 0)
		return r;
	if (n->str[0] != '/')
		return fail(ld, n, "`%s` `%s` must be an absolute path", key, SHOW(n));
	*out = strdup(n->str);
	return *out ? 0 : -ENOMEM;
}

/*
 * token_url: https://HOST[:PORT][/PATH][?QUERY], HOST a DNS name, a dotted
 * IPv4 address or a bracketed IPv6 one. Only https: the request carries
 * the client secret.
 */
static int token_url(struct loader *ld, const struct ynode *n, struct policy_oauth2 *o)
{
	const char *s, *auth, *rest, *hp, *why;
	char host[256], norm[256];
	size_t alen, hl, nl, i;
	struct sl_addr a;
	uint64_t port = 443;
	int r = want_scalar(ld, n, "token_url");

	if (r < 0)
		return r;
	s = n->str;
	if (strncasecmp(s, "https://", 8) != 0)
		return fail(
			ld, n,
			strncasecmp(s, "http://", 7) == 0
				? "token_url `%s` must be https:// (the request carries the client secret)"
				: "token_url `%s` is not an https:// URL",
			SHOW(n));
	auth = s + 8;
	alen = strcspn(auth, "/?#");
	rest = auth + alen;
	if (memchr(auth, '@', alen))
		return fail(ld, n, "token_url `%s` must not hold user information", SHOW(n));
	if (alen && auth[0] == '[') {
		const char *end = memchr(auth, ']', alen);

		if (!end || (size_t)(end - auth - 1) >= sizeof(host))
			return fail(ld, n, "bad IPv6 address in token_url `%s`", SHOW(n));
		hl = (size_t)(end - auth - 1);
		memcpy(host, auth + 1, hl);
		host[hl] = '\0';
		if (addr_parse(host, &a) < 0 || addr_is_v4(&a))
			return fail(ld, n, "bad IPv6 address in token_url `%s`", SHOW(n));
		hp = end + 1;
	} else {
		const char *colon = memchr(auth, ':', alen);

		hl = colon ? (size_t)(colon - auth) : alen;
		if (hl == 0)
			return fail(ld, n, "token_url `%s` has no host", SHOW(n));
		if (hl >= sizeof(host))
			return fail(ld, n,
				    "bad host in token_url `%s`: name longer than 253 characters",
				    SHOW(n));
		memcpy(host, auth, hl);
		host[hl] = '\0';
		if (addr_parse(host, &a) < 0) {
			if (!policy_check_name(host, hl, false, &why))
				return fail(ld, n, "bad host in token_url `%s`: %s", SHOW(n), why);
			if (policy_normalize_name(host, hl, norm, &nl) < 0 || nl >= sizeof(host))
				return fail(ld, n, "bad host in token_url `%s`", SHOW(n));
			memcpy(host, norm, nl);
			host[nl] = '\0';
		}
		hp = auth + hl;
	}
	if (hp < rest) {
		/* ":PORT" */
		const char *d = hp + 1;
		size_t dl = (size_t)(rest - d);

		port = 0;
		if (*hp != ':' || dl == 0 || dl > 5 || d[0] == '0')
			return fail(ld, n, "bad port in token_url `%s` (a number 1-65535)",
				    SHOW(n));
		for (i = 0; i < dl; i++) {
			if (d[i] < '0' || d[i] > '9')
				return fail(ld, n, "bad port in token_url `%s` (a number 1-65535)",
					    SHOW(n));
			port = port * 10 + (uint64_t)(d[i] - '0');
		}
		if (port == 0 || port > 65535)
			return fail(ld, n, "bad port in token_url `%s` (a number 1-65535)",
				    SHOW(n));
	}
	if (strchr(rest, '#'))
		return fail(ld, n, "token_url `%s` must not have a fragment", SHOW(n));
	for (i = 0; rest[i]; i++) {
		if ((unsigned char)rest[i] <= 0x20 || (unsigned char)rest[i] >= 0x7f)
			return fail(ld, n, "bad character in token_url `%s`", SHOW(n));
	}
	o->token_url = strdup(s);
	o->token_host = strdup(host);
	o->token_port = (uint16_t)port;
	/* "https://h?q" asks for "/?q". */
	if (asprintf(&o->token_path, "%s%s", *rest == '/' ? "" : "/", rest) < 0)
		o->token_path = NULL;
	if (!o->token_url || !o->token_host || !o->token_path)
		return -ENOMEM;
	return 0;
}

static int source_oauth2(struct loader *ld, const struct ynode *n, struct policy_credential *c)
{
	static const char *const keys[] = { "token_url", "client_id", "client_secret_file",
					    "scopes", NULL };
	struct policy_oauth2 *o = &c->oauth2;
	const struct ynode *v;
	size_t i;
	int r;

	if ((r = want(ld, n, YNODE_MAP, "oauth2")) < 0 ||
	    (r = check_keys(ld, n, "`oauth2`", keys)) < 0)
		return r;
	for (i = 0; keys[i + 1]; i++) {
		if (!ytree_map_get(n, keys[i]))
			return fail(ld, n, "`oauth2` needs `%s`", keys[i]);
	}
	if ((r = token_url(ld, ytree_map_get(n, "token_url"), o)) < 0 ||
	    (r = text_value(ld, ytree_map_get(n, "client_id"), "client_id", 256, &o->client_id)) <
		    0 ||
	    (r = abs_path(ld, ytree_map_get(n, "client_secret_file"), "client_secret_file",
			  &c->source)) < 0)
		return r;
	v = ytree_map_get(n, "scopes");
	if (!v)
		return 0;
	if ((r = str_list(ld, v, "scopes", &o->scopes, &o->n_scopes)) < 0)
		return r;
	for (i = 0; i < o->n_scopes; i++) {
		if (!scope_token_ok(o->scopes[i], strlen(o->scopes[i])))
			return fail(ld, v->kids[i],
				    "bad scope `%s` (visible ASCII without space, `\"` or `\\`)",
				    SHOW(v->kids[i]));
	}
	return 0;
}

static int source_jwt(struct loader *ld, const struct ynode *n, struct policy_credential *c)
{
	static const char *const keys[] = { "key_file", "issuer", "ttl", "kid", "scope", NULL };
	struct policy_jwt *j = &c->jwt;
	const struct ynode *v;
	int r;

	if ((r = want(ld, n, YNODE_MAP, "jwt")) < 0 || (r = check_keys(ld, n, "`jwt`", keys)) < 0)
		return r;
	if (!ytree_map_get(n, "key_file"))
		return fail(ld, n, "`jwt` needs `key_file`");
	if (!ytree_map_get(n, "issuer"))
		return fail(ld, n, "`jwt` needs `issuer`");
	if ((r = abs_path(ld, ytree_map_get(n, "key_file"), "key_file", &c->source)) < 0 ||
	    (r = text_value(ld, ytree_map_get(n, "issuer"), "issuer", 256, &j->issuer)) < 0)
		return r;
	j->ttl_sec = 300;
	v = ytree_map_get(n, "ttl");
	if (v && (r = duration_max(ld, v, "ttl", 86400, "1d", &j->ttl_sec)) < 0)
		return r;
	v = ytree_map_get(n, "kid");
	if (v && (r = text_value(ld, v, "kid", 128, &j->kid)) < 0)
		return r;
	v = ytree_map_get(n, "scope");
	if (v && (r = text_value(ld, v, "scope", 1024, &j->scope)) < 0)
		return r;
	return 0;
}

/* `source`: exactly one of file: PATH, env: NAME, oauth2: {...}, jwt: {...}. */
static int source(struct loader *ld, const struct ynode *v, struct policy_credential *c)
{
	static const char *const src_keys[] = { "file", "env", "oauth2", "jwt", NULL };
	const struct ynode *s;
	const char *kind;
	int r;

	if ((r = want(ld, v, YNODE_MAP, "source")) < 0 ||
	    (r = check_keys(ld, v, "`source`", src_keys)) < 0)
		return r;
	if (v->n != 2)
		return fail(ld, v,
			    "`source` needs exactly one of `file`, `env`, `oauth2` or `jwt`");
	kind = v->kids[0]->str;
	s = v->kids[1];
	if (strcmp(kind, "oauth2") == 0) {
		c->source_kind = POLICY_SOURCE_OAUTH2;
		return source_oauth2(ld, s, c);
	}
	if (strcmp(kind, "jwt") == 0) {
		c->source_kind = POLICY_SOURCE_JWT;
		return source_jwt(ld, s, c);
	}
	if ((r = want_scalar(ld, s, kind)) < 0)
		return r;
	if (strcmp(kind, "file") == 0) {
		c->source_kind = POLICY_SOURCE_FILE;
		if (s->str[0] != '/')
			return fail(ld, s, "secret file `%s` must be an absolute path", SHOW(s));
	} else {
		c->source_kind = POLICY_SOURCE_ENV;
		if (!env_name_ok(s->str, s->len))
			return fail(ld, s, "`%s` is not a valid environment variable name",
				    SHOW(s));
	}
	c->source = strdup(s->str);
	return c->source ? 0 : -ENOMEM;
}

static int credential(struct loader *ld, const struct ynode *n, struct policy_credential *c)
{
	static const char *const keys[] = { "name",  "source",	    "inject",
					    "scope", "placeholder", "placeholder_headers",
					    "ttl",   "plaintext",   NULL };
	static const char *const inj_keys[] = { "header", "value", NULL };
	static const char *const scope_keys[] = { "hosts", "methods", "paths", NULL };
	const struct ynode *v, *s;
	size_t i;
	int r;

	r = want(ld, n, YNODE_MAP, "credentials entry");
	if (r == 0)
		r = check_keys(ld, n, "a credential", keys);
	if (r < 0)
		return r;

	v = ytree_map_get(n, "name");
	if (!v)
		return fail(ld, n, "a credential needs a `name`");
	if ((r = want_scalar(ld, v, "name")) < 0)
		return r;
	if (!token_ok(v->str, v->len) || v->len > 64)
		return fail(ld, v, "bad credential name `%s` (letters, digits, - and _)", SHOW(v));
	c->name = strdup(v->str);

	v = ytree_map_get(n, "source");
	if (!v)
		return fail(ld, n, "credential `%s` needs a `source`", c->name);
	if ((r = source(ld, v, c)) < 0)
		return r;

	v = ytree_map_get(n, "inject");
	if (v) {
		const struct ynode *h, *val;

		if ((r = want(ld, v, YNODE_MAP, "inject")) < 0 ||
		    (r = check_keys(ld, v, "`inject`", inj_keys)) < 0)
			return r;
		h = ytree_map_get(v, "header");
		val = ytree_map_get(v, "value");
		if (!h || !val)
			return fail(ld, v, "`inject` needs `header` and `value`");
		if ((r = want_scalar(ld, h, "header")) < 0 ||
		    (r = want_scalar(ld, val, "value")) < 0)
			return r;
		if (!token_ok(h->str, h->len))
			return fail(ld, h, "bad header name `%s`", SHOW(h));
		if (!header_injectable(h->str))
			return fail(
				ld, h,
				"header `%s` cannot be injected (it frames or routes the request)",
				SHOW(h));
		if (!strstr(val->str, "{secret}"))
			return fail(ld, val, "inject value `%s` has no `{secret}`", SHOW(val));
		for (i = 0; i < val->len; i++) {
			unsigned char ch = (unsigned char)val->str[i];

			if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
				return fail(ld, val, "control character in inject value `%s`",
					    SHOW(val));
		}
		c->inject_header = strdup(h->str);
		c->inject_value = strdup(val->str);
	}

	v = ytree_map_get(n, "scope");
	if (!v)
		return fail(ld, n, "credential `%s` needs a `scope` with `hosts`", c->name);
	if ((r = want(ld, v, YNODE_MAP, "scope")) < 0 ||
	    (r = check_keys(ld, v, "`scope`", scope_keys)) < 0)
		return r;
	s = ytree_map_get(v, "hosts");
	if (!s)
		return fail(ld, v, "`scope` needs `hosts`");
	if ((r = str_list(ld, s, "hosts", &c->hosts, &c->n_hosts)) < 0)
		return r;
	for (i = 0; i < c->n_hosts; i++) {
		const char *why;

		if (!policy_check_name(c->hosts[i], strlen(c->hosts[i]), true, &why))
			return fail(ld, s->kids[i], "bad host pattern `%s`: %s", SHOW(s->kids[i]),
				    why);
		if (!scope_host_allowed(ld->p, c->hosts[i]))
			return fail(ld, s->kids[i],
				    "credential scope host `%s` is not allowed by egress.allow",
				    SHOW(s->kids[i]));
	}
	s = ytree_map_get(v, "methods");
	if (s && (r = str_list(ld, s, "methods", &c->methods, &c->n_methods)) < 0)
		return r;
	/* `s &&`: n_methods is 0 without the key; said for the analyzer. */
	for (i = 0; s && i < c->n_methods; i++) {
		char *m = c->methods[i];
		size_t k;

		for (k = 0; m[k]; k++)
			m[k] = (char)toupper((unsigned char)m[k]);
		if (!token_ok(m, strlen(m)))
			return fail(ld, s->kids[i], "bad method `%s`", SHOW(s->kids[i]));
	}
	s = ytree_map_get(v, "paths");
	if (s && (r = str_list(ld, s, "paths", &c->paths, &c->n_paths)) < 0)
		return r;
	for (i = 0; s && i < c->n_paths; i++) {
		const char *pt = c->paths[i];
		size_t k;

		if (pt[0] != '/')
			return fail(ld, s->kids[i], "path `%s` must start with `/`",
				    SHOW(s->kids[i]));
		for (k = 0; pt[k]; k++) {
			if ((unsigned char)pt[k] <= 0x20 || (unsigned char)pt[k] >= 0x7f)
				return fail(ld, s->kids[i], "bad character in path `%s`",
					    SHOW(s->kids[i]));
		}
	}

	v = ytree_map_get(n, "placeholder");
	if (v) {
		if ((r = want_scalar(ld, v, "placeholder")) < 0)
			return r;
		if (!env_name_ok(v->str, v->len))
			return fail(ld, v,
				    "placeholder `%s` is not a valid environment variable name",
				    SHOW(v));
		c->placeholder = strdup(v->str);
	}
	if (!c->inject_header && !c->placeholder)
		return fail(ld, n, "credential `%s` needs `inject` or `placeholder`", c->name);
	/* Where the placeholder may go: never the path or the query, where
	 * an origin reflecting the request would hand the secret back. */
	v = ytree_map_get(n, "placeholder_headers");
	if (v) {
		if (!c->placeholder)
			return fail(ld, v, "`placeholder_headers` needs a `placeholder`");
		if ((r = str_list(ld, v, "placeholder_headers", &c->placeholder_headers,
				  &c->n_placeholder_headers)) < 0)
			return r;
		for (i = 0; i < c->n_placeholder_headers; i++) {
			const char *h = c->placeholder_headers[i];

			if (!token_ok(h, strlen(h)))
				return fail(ld, v->kids[i], "bad header name `%s`",
					    SHOW(v->kids[i]));
			if (!header_injectable(h))
				return fail(
					ld, v->kids[i],
					"header `%s` cannot carry a placeholder (it frames or routes the request)",
					SHOW(v->kids[i]));
		}
	} else if (c->placeholder) {
		c->placeholder_headers = calloc(1, sizeof(char *));
		if (!c->placeholder_headers)
			return -ENOMEM;
		c->placeholder_headers[0] =
			strdup(c->inject_header ? c->inject_header : "Authorization");
		if (!c->placeholder_headers[0])
			return -ENOMEM;
		c->n_placeholder_headers = 1;
	}
	v = ytree_map_get(n, "ttl");
	if (v && (r = duration(ld, v, "ttl", &c->ttl_sec)) < 0)
		return r;
	v = ytree_map_get(n, "plaintext");
	if (v) {
		if ((r = want_scalar(ld, v, "plaintext")) < 0)
			return r;
		if (strcmp(v->str, "allow") == 0)
			c->plaintext_allow = true;
		else if (strcmp(v->str, "deny") != 0)
			return fail(ld, v, "unknown plaintext value `%s` (expected allow or deny)",
				    SHOW(v));
	}
	if (!c->name || !c->source || (c->inject_header && !c->inject_value) ||
	    (ytree_map_get(n, "inject") && !c->inject_header) ||
	    (ytree_map_get(n, "placeholder") && !c->placeholder))
		return -ENOMEM;
	return 0;
}

static int credentials(struct loader *ld, const struct ynode *n)
{
	struct policy *p = ld->p;
	size_t i, j;
	int r = want(ld, n, YNODE_SEQ, "credentials");

	if (r < 0)
		return r;
	if (n->n > MAX_CREDS)
		return fail(ld, n, "more than %d credentials", MAX_CREDS);
	p->creds = calloc(n->n ? n->n : 1, sizeof(*p->creds));
	if (!p->creds)
		return -ENOMEM;
	for (i = 0; i < n->n; i++) {
		p->n_creds++;
		r = credential(ld, n->kids[i], &p->creds[i]);
		if (r < 0)
			return r;
		for (j = 0; j < i; j++) {
			const struct ynode *nm = ytree_map_get(n->kids[i], "name");

			if (strcmp(p->creds[j].name, p->creds[i].name) == 0)
				return fail(ld, nm, "duplicate credential name `%s`",
					    p->creds[i].name);
			if (p->creds[i].placeholder && p->creds[j].placeholder &&
			    strcmp(p->creds[j].placeholder, p->creds[i].placeholder) == 0)
				return fail(ld, ytree_map_get(n->kids[i], "placeholder"),
					    "placeholder `%s` is used by credential `%s` too",
					    p->creds[i].placeholder, p->creds[j].name);
		}
	}
	return 0;
}

static int limits(struct loader *ld, const struct ynode *n)
{
	static const char *const keys[] = { "connections", "idle_timeout", NULL };
	const struct ynode *v;
	uint64_t x;
	int r;

	r = want(ld, n, YNODE_MAP, "limits");
	if (r == 0)
		r = check_keys(ld, n, "`limits`", keys);
	if (r < 0)
		return r;
	v = ytree_map_get(n, "connections");
	if (v) {
		if ((r = want_scalar(ld, v, "connections")) < 0)
			return r;
		r = parse_uint(v, 1000000, &x);
		if (r < 0 || x == 0)
			return fail(ld, v, "`connections` must be a number 1-1000000, not `%s`",
				    SHOW(v));
		ld->p->limits.connections = (uint32_t)x;
	}
	v = ytree_map_get(n, "idle_timeout");
	if (v && (r = duration(ld, v, "idle_timeout", &ld->p->limits.idle_timeout_sec)) < 0)
		return r;
	return 0;
}

/* `mode: enforce | audit`; enforce when absent. */
static int mode(struct loader *ld, const struct ynode *v)
{
	int r = want_scalar(ld, v, "mode");

	if (r < 0)
		return r;
	if (strcmp(v->str, "enforce") == 0)
		ld->p->mode = POLICY_MODE_ENFORCE;
	else if (strcmp(v->str, "audit") == 0)
		ld->p->mode = POLICY_MODE_AUDIT;
	else
		return fail(ld, v, "unknown mode `%s` (expected enforce or audit)", SHOW(v));
	return 0;
}

static int load_tree(struct loader *ld, const struct ynode *root)
{
	static const char *const keys[] = { "version", "egress", "credentials",
					    "limits",  "mode",	 NULL };
	const struct ynode *v;
	uint64_t ver;
	int r;

	if (!root)
		return ytree_fail(ld->err, ld->file, NULL,
				  "empty policy: `version: 1` is required");
	r = want(ld, root, YNODE_MAP, "policy");
	if (r == 0)
		r = check_keys(ld, root, "the policy", keys);
	if (r < 0)
		return r;
	v = ytree_map_get(root, "version");
	if (!v)
		return fail(ld, root, "missing key `version` (write `version: 1`)");
	if (v->type != YNODE_SCALAR || parse_uint(v, 1000, &ver) < 0 || ver != 1)
		return fail(ld, v, "unsupported version `%s` (this sluice reads version 1)",
			    SHOW(v));
	v = ytree_map_get(root, "mode");
	if (v && (r = mode(ld, v)) < 0)
		return r;
	v = ytree_map_get(root, "egress");
	if (v && (r = egress(ld, v)) < 0)
		return r;
	if (!ld->p->rules) {
		ld->p->rules = calloc(1, sizeof(*ld->p->rules));
		ld->p->rule_next = calloc(1, sizeof(*ld->p->rule_next));
		if (!ld->p->rules || !ld->p->rule_next)
			return -ENOMEM;
	}
	if (ld->n_extra && (r = extra_rules(ld)) < 0)
		return r;
	/* Credentials come after egress: their scope hosts are checked against it. */
	r = policy_names_build(ld->p);
	if (r < 0)
		return r;
	v = ytree_map_get(root, "credentials");
	if (v && (r = credentials(ld, v)) < 0)
		return r;
	v = ytree_map_get(root, "limits");
	if (v && (r = limits(ld, v)) < 0)
		return r;
	return 0;
}

static void cred_free(struct policy_credential *c)
{
	size_t i;

	free(c->name);
	free(c->source);
	free(c->inject_header);
	free(c->inject_value);
	for (i = 0; i < c->n_hosts; i++)
		free(c->hosts[i]);
	free(c->hosts);
	for (i = 0; i < c->n_methods; i++)
		free(c->methods[i]);
	free(c->methods);
	for (i = 0; i < c->n_paths; i++)
		free(c->paths[i]);
	free(c->paths);
	free(c->placeholder);
	for (i = 0; i < c->n_placeholder_headers; i++)
		free(c->placeholder_headers[i]);
	free(c->placeholder_headers);
	free(c->oauth2.token_url);
	free(c->oauth2.token_host);
	free(c->oauth2.token_path);
	free(c->oauth2.client_id);
	for (i = 0; i < c->oauth2.n_scopes; i++)
		free(c->oauth2.scopes[i]);
	free(c->oauth2.scopes);
	free(c->jwt.issuer);
	free(c->jwt.kid);
	free(c->jwt.scope);
}

void policy_free(struct policy *p)
{
	size_t i;

	if (!p)
		return;
	if (p->attachment_free)
		p->attachment_free(p->attachment);
	for (i = 0; i < p->n_rules; i++) {
		free(p->rules[i].pattern);
		free(p->rules[i].ports);
		free(p->rules[i].text);
	}
	free(p->rules);
	free(p->rule_next);
	free(p->exact.slots);
	free(p->wild.slots);
	free(p->cidr_trie.nodes);
	free(p->range_trie.nodes);
	free(p->ranges);
	for (i = 0; i < p->n_creds; i++)
		cred_free(&p->creds[i]);
	free(p->creds);
	free(p);
}

int policy_load_buffer(const char *name, const char *buf, size_t len, struct policy **out,
		       struct policy_error *perr)
{
	return policy_load_buffer_extra(name, buf, len, NULL, 0, out, perr);
}

int policy_load_buffer_extra(const char *name, const char *buf, size_t len,
			     const struct policy_extra_host *extra, size_t n_extra,
			     struct policy **out, struct policy_error *perr)
{
	struct ytree_error yerr = { .msg = "" };
	struct ynode *root = NULL;
	struct loader ld = { .file = name, .err = &yerr, .extra = extra, .n_extra = n_extra };
	struct sl_err cerr = { 0 };
	int r;

	*out = NULL;
	memset(perr, 0, sizeof(*perr));
	r = ytree_load(name, buf, len, &root, &yerr);
	if (r < 0)
		goto out;
	ld.p = calloc(1, sizeof(*ld.p));
	if (!ld.p) {
		r = -ENOMEM;
		goto out;
	}
	atomic_init(&ld.p->refs, 1);
	ld.p->limits.connections = 256;
	ld.p->limits.idle_timeout_sec = 300;
	ld.p->redirects = POLICY_REDIRECTS_WITHIN_POLICY;
	ld.p->hold_timeout_sec = 30;
	r = load_tree(&ld, root);
	if (r < 0)
		goto out;
	r = policy_ranges_build(ld.p, ld.user_ranges, ld.n_user_ranges, &cerr);
	if (r < 0) {
		ytree_fail(&yerr, name, NULL, "%s",
			   sl_err_msg(&cerr)[0] ? sl_err_msg(&cerr) : "out of memory");
		goto out;
	}
	*out = ld.p;
	ld.p = NULL;
out:
	if (r < 0) {
		if (!yerr.msg[0])
			ytree_fail(&yerr, name, NULL, "%s", strerror(-r));
		snprintf(perr->msg, sizeof(perr->msg), "%s", yerr.msg);
		perr->line = yerr.line;
		perr->col = yerr.col;
	}
	free(ld.user_ranges);
	policy_free(ld.p);
	ytree_free(root);
	return r;
}

int policy_error_to_err(const struct policy_error *pe, int r, struct sl_err *err)
{
	sl_err_set(err, r == -EINVAL ? 0 : r, "%s", pe->msg);
	return r;
}

int policy_load_file(const char *path, struct policy **out, struct policy_error *err)
{
	struct sl_err fe = { 0 };
	char *buf;
	size_t len;
	int r;

	*out = NULL;
	memset(err, 0, sizeof(*err));
	/* A refusal of the file (not regular, too big: errno 0) is -EINVAL
	 * to the caller, a call's failure its errno. */
	r = file_read_all_err(path, YTREE_MAX_BYTES, &buf, &len, &fe);
	if (r < 0) {
		snprintf(err->msg, sizeof(err->msg), "%s", sl_err_msg(&fe));
		return sl_err_errno(&fe) ? r : -EINVAL;
	}
	r = policy_load_buffer(path, buf, len, out, err);
	free(buf);
	return r;
}

struct policy *policy_ref(struct policy *p)
{
	atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
	return p;
}

void policy_unref(struct policy *p)
{
	if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
		policy_free(p);
}

void policy_attach(struct policy *p, void *data, void (*free_fn)(void *))
{
	p->attachment = data;
	p->attachment_free = free_fn;
}

void *policy_attachment(const struct policy *p)
{
	return p->attachment;
}

size_t policy_credential_count(const struct policy *p)
{
	return p->n_creds;
}

const struct policy_credential *policy_credential_get(const struct policy *p, size_t i)
{
	return i < p->n_creds ? &p->creds[i] : NULL;
}

enum policy_redirects policy_redirects(const struct policy *p)
{
	return p->redirects;
}

enum policy_mode policy_mode(const struct policy *p)
{
	return p->mode;
}

const struct policy_limits *policy_limits(const struct policy *p)
{
	return &p->limits;
}

bool policy_unlisted_hold(const struct policy *p)
{
	return p->unlisted_hold;
}

uint64_t policy_hold_timeout(const struct policy *p)
{
	return p->hold_timeout_sec;
}

size_t policy_rule_count(const struct policy *p)
{
	return p->n_rules;
}

bool policy_rule_raw_tcp(const struct policy *p, int i)
{
	return i >= 0 && (size_t)i < p->n_rules && p->rules[i].raw_tcp;
}

const char *policy_rule_text(const struct policy *p, int i)
{
	return i >= 0 && (size_t)i < p->n_rules ? p->rules[i].text : "";
}
