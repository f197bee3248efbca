/* SPDX-License-Identifier: MIT */
/* The compiled policy, shared by the files of policy/. */
#ifndef SLUICE_POLICY_INTERNAL_H
#define SLUICE_POLICY_INTERNAL_H

#include <stdatomic.h>

#include "common/addr.h"
#include "policy/policy.h"

struct sl_err;

enum rule_kind { RULE_HOST, RULE_WILDCARD, RULE_CIDR };

struct policy_rule {
	enum rule_kind kind;
	char *pattern; /* normalised name, suffix without "*.", or NULL */
	struct sl_addr net;
	unsigned plen; /* 128-bit space */
	uint16_t *ports;
	size_t n_ports;
	char *text;   /* for audit lines and errors */
	bool raw_tcp; /* bytes neither HTTP nor TLS may pass to its ports */
};

/* Open-addressing hash of normalised names to a chain of rule indices. */
struct name_slot {
	uint64_t hash;
	const char *key; /* NULL: empty slot */
	size_t klen;
	int head; /* first rule; policy->rule_next[] continues */
};

struct name_table {
	struct name_slot *slots;
	size_t mask; /* slots - 1; 0 when empty */
};

/* A binary trie over the 128-bit space; a node's value is an index or -1. */
struct ptrie_node {
	int32_t child[2];
	int32_t value;
};

struct ptrie {
	struct ptrie_node *nodes;
	size_t n, cap;
};

struct range {
	struct sl_addr net;
	unsigned plen;
	bool allow;
	bool user; /* from the policy, not the built-in default list */
	char text[ADDR_STRLEN + 8];
};

struct policy {
	atomic_int refs;
	struct policy_rule *rules;
	size_t n_rules;
	int *rule_next; /* chains in name tables and the cidr trie */
	struct name_table exact, wild;
	struct ptrie cidr_trie; /* value: first cidr rule at that prefix */
	struct range *ranges;
	size_t n_ranges;
	struct ptrie range_trie; /* value: index into ranges */
	struct policy_credential *creds;
	size_t n_creds;
	enum policy_redirects redirects;
	enum policy_mode mode;
	/* `egress.unlisted: hold`: a name outside the list waits for approve
	 * or refuse, at most hold_timeout_sec (then hold-timeout). */
	bool unlisted_hold;
	uint64_t hold_timeout_sec;
	struct policy_limits limits;
	void *attachment;
	void (*attachment_free)(void *);
};

/* match.c */
uint64_t policy_name_hash(const char *s, size_t len);
int policy_names_build(struct policy *p);
int policy_ptrie_insert(struct ptrie *t, const struct sl_addr *net, unsigned plen, int32_t value,
			int32_t *old);

/* guard.c */
int policy_ranges_build(struct policy *p, const struct range *user, size_t n_user,
			struct sl_err *err);
extern const char *const policy_default_deny[];
extern const size_t policy_default_deny_count;

void policy_free(struct policy *p);

#endif
