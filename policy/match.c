// SPDX-License-Identifier: MIT
/* Compiled name matchers: exact names and `*.` suffixes in two hash tables,
 * looked up without allocation; and the prefix trie used for CIDR sets. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_internal.h"

#define NAME_MAX_LEN 253

uint64_t policy_name_hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (uint8_t)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static bool label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/*
 * Lower-case @in into @out (at least NAME_MAX_LEN + 1 bytes), drop one
 * trailing dot, and check the name's shape. Returns 0 or -EINVAL.
 */
int policy_normalize_name(const char *in, size_t len, char *out, size_t *outlen)
{
	size_t i, label = 0;

	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0 || len > NAME_MAX_LEN)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		char c = in[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c == '.') {
			if (label == 0)
				return -EINVAL;
			label = 0;
		} else if (!label_char(c) || ++label > 63) {
			return -EINVAL;
		}
		out[i] = c;
	}
	if (label == 0)
		return -EINVAL;
	out[len] = '\0';
	*outlen = len;
	return 0;
}

bool policy_check_name(const char *s, size_t len, bool wildcard_ok, const char **why)
{
	size_t i, label = 0;
	bool last_numeric = true;

	if (len >= 2 && s[0] == '*' && s[1] == '.') {
		if (!wildcard_ok) {
			*why = "a wildcard is not allowed here";
			return false;
		}
		s += 2;
		len -= 2;
	}
	if (len > 0 && s[len - 1] == '.')
		len--;
	if (len == 0) {
		*why = "empty name";
		return false;
	}
	if (len > NAME_MAX_LEN) {
		*why = "name longer than 253 characters";
		return false;
	}
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '.') {
			if (label == 0) {
				*why = "empty label";
				return false;
			}
			label = 0;
			last_numeric = true;
			continue;
		}
		if (c == '*') {
			*why = "`*` is allowed only as a leading `*.`";
			return false;
		}
		if (c >= 0x80) {
			*why = "non-ASCII name: write it in punycode (xn--)";
			return false;
		}
		if (!label_char((char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c))) {
			*why = "invalid character in name";
			return false;
		}
		if (c < '0' || c > '9')
			last_numeric = false;
		if (++label > 63) {
			*why = "label longer than 63 characters";
			return false;
		}
	}
	if (label == 0) {
		*why = "empty label";
		return false;
	}
	if (last_numeric) {
		*why = "an address literal is not a host name: use a `cidr` rule";
		return false;
	}
	return true;
}

static int table_insert(struct policy *p, struct name_table *t, const char *key, size_t klen,
			int rule)
{
	uint64_t h = policy_name_hash(key, klen);
	size_t i;

	for (i = h & t->mask;; i = (i + 1) & t->mask) {
		struct name_slot *s = &t->slots[i];

		if (!s->key) {
			s->key = key;
			s->klen = klen;
			s->hash = h;
			s->head = rule;
			p->rule_next[rule] = -1;
			return 0;
		}
		if (s->hash == h && s->klen == klen && memcmp(s->key, key, klen) == 0) {
			int *last = &s->head;

			while (*last >= 0)
				last = &p->rule_next[*last];
			*last = rule;
			p->rule_next[rule] = -1;
			return 0;
		}
	}
}

static const struct name_slot *table_find(const struct name_table *t, const char *key, size_t klen)
{
	uint64_t h;
	size_t i;

	if (!t->mask)
		return NULL;
	h = policy_name_hash(key, klen);
	for (i = h & t->mask;; i = (i + 1) & t->mask) {
		const struct name_slot *s = &t->slots[i];

		if (!s->key)
			return NULL;
		if (s->hash == h && s->klen == klen && memcmp(s->key, key, klen) == 0)
			return s;
	}
}

static int table_alloc(struct name_table *t, size_t n)
{
	size_t size = 8;

	while (size < n * 2)
		size *= 2;
	t->slots = calloc(size, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	t->mask = size - 1;
	return 0;
}

int policy_names_build(struct policy *p)
{
	size_t i, n_exact = 0, n_wild = 0;
	int r;

	for (i = 0; i < p->n_rules; i++) {
		if (p->rules[i].kind == RULE_HOST)
			n_exact++;
		else if (p->rules[i].kind == RULE_WILDCARD)
			n_wild++;
	}
	r = table_alloc(&p->exact, n_exact);
	if (r == 0)
		r = table_alloc(&p->wild, n_wild);
	for (i = 0; r == 0 && i < p->n_rules; i++) {
		struct policy_rule *ru = &p->rules[i];

		if (ru->kind == RULE_HOST)
			r = table_insert(p, &p->exact, ru->pattern, strlen(ru->pattern), (int)i);
		else if (ru->kind == RULE_WILDCARD)
			r = table_insert(p, &p->wild, ru->pattern, strlen(ru->pattern), (int)i);
	}
	return r;
}

static bool rule_has_port(const struct policy_rule *ru, uint16_t port)
{
	size_t i;

	for (i = 0; i < ru->n_ports; i++) {
		if (ru->ports[i] == port)
			return true;
	}
	return false;
}

/* Walks one chain; returns ALLOW with the rule, or PORT_NOT_ALLOWED. */
static enum policy_decision chain_match(const struct policy *p, int head, uint16_t port, int *rule)
{
	int i;

	for (i = head; i >= 0; i = p->rule_next[i]) {
		if (rule_has_port(&p->rules[i], port)) {
			if (rule)
				*rule = i;
			return POLICY_ALLOW;
		}
	}
	return POLICY_PORT_NOT_ALLOWED;
}

/*
 * Any port matches when @any_port; otherwise the first rule, exact before
 * wildcard and longer suffixes before shorter, that lists @port.
 */
static enum policy_decision match(const struct policy *p, const char *name, size_t len,
				  uint16_t port, bool any_port, int *rule)
{
	char buf[NAME_MAX_LEN + 1];
	const struct name_slot *s;
	enum policy_decision d = POLICY_NOT_ALLOWLISTED;
	size_t n, i;

	if (rule)
		*rule = -1;
	if (!p || policy_normalize_name(name, len, buf, &n) < 0)
		return POLICY_BAD_NAME;
	s = table_find(&p->exact, buf, n);
	if (s) {
		if (any_port)
			return POLICY_ALLOW;
		if (chain_match(p, s->head, port, rule) == POLICY_ALLOW)
			return POLICY_ALLOW;
		d = POLICY_PORT_NOT_ALLOWED;
	}
	/* "*.example.com" matches "a.example.com" and "a.b.example.com", never
	 * "example.com": try every proper suffix that starts after a dot. */
	for (i = 0; i < n; i++) {
		if (buf[i] != '.')
			continue;
		s = table_find(&p->wild, buf + i + 1, n - i - 1);
		if (!s)
			continue;
		if (any_port)
			return POLICY_ALLOW;
		if (chain_match(p, s->head, port, rule) == POLICY_ALLOW)
			return POLICY_ALLOW;
		d = POLICY_PORT_NOT_ALLOWED;
	}
	return d;
}

enum policy_decision policy_match_name(const struct policy *p, const char *name, size_t len,
				       uint16_t port, int *rule)
{
	return match(p, name, len, port, false, rule);
}

bool policy_name_allowed(const struct policy *p, const char *name, size_t len)
{
	return match(p, name, len, 0, true, NULL) == POLICY_ALLOW;
}

static const char *const decision_reason[] = {
	[POLICY_ALLOW] = "allowed",
	[POLICY_NOT_ALLOWLISTED] = "not-allowlisted",
	[POLICY_PORT_NOT_ALLOWED] = "port-not-allowed",
	[POLICY_BAD_NAME] = "bad-name",
};
_Static_assert(sizeof(decision_reason) / sizeof(decision_reason[0]) == POLICY_DECISION_COUNT,
	       "decision_reason covers every decision");

const char *policy_decision_reason(enum policy_decision d)
{
	return (unsigned)d < POLICY_DECISION_COUNT ? decision_reason[d] : "unknown";
}

static int32_t trie_node(struct ptrie *t)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct ptrie_node *nn = realloc(t->nodes, cap * sizeof(*nn));

		if (!nn)
			return -ENOMEM;
		t->nodes = nn;
		t->cap = cap;
	}
	t->nodes[t->n] = (struct ptrie_node){ { -1, -1 }, -1 };
	return (int32_t)t->n++;
}

/*
 * Insert @net/@plen with @value. When the prefix already holds a value, it
 * is returned in *@old (else -1) and replaced only if @old is NULL.
 */
int policy_ptrie_insert(struct ptrie *t, const struct sl_addr *net, unsigned plen, int32_t value,
			int32_t *old)
{
	int32_t cur;
	unsigned i;

	if (t->n == 0 && trie_node(t) < 0)
		return -ENOMEM;
	cur = 0;
	for (i = 0; i < plen; i++) {
		int bit = (net->b[i / 8] >> (7 - i % 8)) & 1;

		if (t->nodes[cur].child[bit] < 0) {
			int32_t nn = trie_node(t);

			if (nn < 0)
				return -ENOMEM;
			t->nodes[cur].child[bit] = nn;
		}
		cur = t->nodes[cur].child[bit];
	}
	if (old) {
		*old = t->nodes[cur].value;
		if (*old >= 0)
			return 0;
	}
	t->nodes[cur].value = value;
	return 0;
}
