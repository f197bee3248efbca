// SPDX-License-Identifier: MIT
/* The address guard: the one function every connect path calls to decide
 * whether the broker may connect to an address.
 *
 * Precedence (documented in policy.h and README, defined only here):
 *  1. a `cidr` allow rule holding the address and listing the port allows it;
 *  2. an address literal that no cidr rule allows is refused;
 *  3. the most specific prefix among deny_ranges and allow_ranges decides,
 *     deny winning a tie; an address in neither is allowed.
 * Addresses that embed an IPv4 address (v4-mapped, NAT64 64:ff9b::/96 and
 * 64:ff9b:1::/48, 6to4 2002::/16) are judged as that IPv4 address. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_internal.h"

/* IANA special-purpose ranges that are not globally reachable (v4 and v6
 * registries), plus broadcast and the deprecated site-local range. The
 * embedding ranges above are not listed: they are judged by their v4. */
const char *const policy_default_deny[] = {
	"0.0.0.0/8",	   "10.0.0.0/8",      "100.64.0.0/10",	  "127.0.0.0/8",
	"169.254.0.0/16",  "172.16.0.0/12",   "192.0.0.0/24",	  "192.0.2.0/24",
	"192.88.99.0/24",  "192.168.0.0/16",  "198.18.0.0/15",	  "198.51.100.0/24",
	"203.0.113.0/24",  "224.0.0.0/4",     "240.0.0.0/4",	  "255.255.255.255/32",
	"::/128",	   "::1/128",	      "100::/64",	  "100:0:0:1::/64",
	"2001::/23",	   "2001:db8::/32",   "3fff::/20",	  "5f00::/16",
	"fc00::/7",	   "fe80::/10",	      "fec0::/10",	  "ff00::/8",
};
const size_t policy_default_deny_count =
	sizeof(policy_default_deny) / sizeof(policy_default_deny[0]);

static int add_range(struct policy *p, const struct range *rg, char *err, size_t errlen)
{
	int32_t old;
	int r;

	p->ranges[p->n_ranges] = *rg;
	r = policy_ptrie_insert(&p->range_trie, &rg->net, rg->plen, (int32_t)p->n_ranges, &old);
	if (r < 0) {
		snprintf(err, errlen, "out of memory");
		return r;
	}
	if (old >= 0) {
		struct range *o = &p->ranges[old];

		/* The same prefix twice. A policy's allow_ranges entry carves a
		 * whole default range out; within the policy's own lists, deny
		 * wins a tie. */
		if (!o->user && rg->user)
			*o = *rg;
		else if (o->allow && !rg->allow)
			o->allow = false;
		o->user = true;
		return 0;
	}
	p->n_ranges++;
	return 0;
}

/*
 * Build the range trie from the default deny list plus @user (deny_ranges
 * entries and allow_ranges carve-outs), and the cidr-rule trie.
 */
int policy_ranges_build(struct policy *p, const struct range *user, size_t n_user,
			char *err, size_t errlen)
{
	size_t i;
	int r;

	p->ranges = calloc(policy_default_deny_count + n_user, sizeof(*p->ranges));
	if (!p->ranges)
		return -ENOMEM;
	for (i = 0; i < policy_default_deny_count; i++) {
		struct range rg = { .allow = false };

		if (addr_parse_cidr(policy_default_deny[i], &rg.net, &rg.plen) < 0) {
			snprintf(err, errlen, "internal: bad default range `%s`",
				 policy_default_deny[i]);
			return -EINVAL;
		}
		snprintf(rg.text, sizeof(rg.text), "%s", policy_default_deny[i]);
		r = add_range(p, &rg, err, errlen);
		if (r < 0)
			return r;
	}
	for (i = 0; i < n_user; i++) {
		r = add_range(p, &user[i], err, errlen);
		if (r < 0)
			return r;
	}
	for (i = 0; i < p->n_rules; i++) {
		struct policy_rule *ru = &p->rules[i];
		int32_t old;

		if (ru->kind != RULE_CIDR)
			continue;
		r = policy_ptrie_insert(&p->cidr_trie, &ru->net, ru->plen, (int32_t)i, &old);
		if (r < 0)
			return r;
		p->rule_next[i] = -1;
		if (old >= 0) {
			int32_t j = old;

			/* Same prefix in several rules: chain them. */
			while (p->rule_next[j] >= 0)
				j = p->rule_next[j];
			p->rule_next[j] = (int)i;
		}
	}
	return 0;
}

static bool bit_at(const struct sl_addr *a, unsigned i)
{
	return (a->b[i / 8] >> (7 - i % 8)) & 1;
}

/* The deciding range for @a (longest prefix), or -1. */
static int32_t longest_range(const struct policy *p, const struct sl_addr *a)
{
	const struct ptrie *t = &p->range_trie;
	int32_t cur = 0, best = -1;
	unsigned i;

	if (t->n == 0)
		return -1;
	for (i = 0;; i++) {
		if (t->nodes[cur].value >= 0)
			best = t->nodes[cur].value;
		if (i == 128)
			break;
		cur = t->nodes[cur].child[bit_at(a, i)];
		if (cur < 0)
			break;
	}
	return best;
}

/* Any cidr rule holding @a; *port_ok tells whether one also lists @port. */
static int cidr_rule(const struct policy *p, const struct sl_addr *a, uint16_t port,
		     bool *held)
{
	const struct ptrie *t = &p->cidr_trie;
	int32_t cur = 0;
	unsigned i;
	int j;
	size_t k;

	*held = false;
	if (t->n == 0)
		return -1;
	for (i = 0;; i++) {
		for (j = t->nodes[cur].value; j >= 0; j = p->rule_next[j]) {
			const struct policy_rule *ru = &p->rules[j];

			*held = true;
			for (k = 0; k < ru->n_ports; k++) {
				if (ru->ports[k] == port)
					return j;
			}
		}
		if (i == 128)
			break;
		cur = t->nodes[cur].child[bit_at(a, i)];
		if (cur < 0)
			break;
	}
	return -1;
}

static const uint8_t nat64_wkp[12] = { 0x00, 0x64, 0xff, 0x9b };
static const uint8_t nat64_local[6] = { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 };

/*
 * The address to judge: the embedded v4 for the translation ranges. For
 * 64:ff9b:1::/48 the v4 is taken from the last 32 bits (a /96 within the
 * /48, as NAT64 deployments use); other layouts are refused outright
 * (*refuse set) rather than guessed at.
 */
static void judged_address(const struct sl_addr *a, struct sl_addr *out, bool *refuse)
{
	static const uint8_t zero[10];

	*refuse = false;
	*out = *a;
	if (memcmp(a->b, nat64_wkp, 12) == 0) {
		addr_from_v4(out, (uint32_t)a->b[12] << 24 | (uint32_t)a->b[13] << 16 |
					  (uint32_t)a->b[14] << 8 | a->b[15]);
	} else if (memcmp(a->b, nat64_local, 6) == 0) {
		if (memcmp(a->b + 6, zero, 6) != 0) {
			*refuse = true;
			return;
		}
		addr_from_v4(out, (uint32_t)a->b[12] << 24 | (uint32_t)a->b[13] << 16 |
					  (uint32_t)a->b[14] << 8 | a->b[15]);
	} else if (a->b[0] == 0x20 && a->b[1] == 0x02) {
		addr_from_v4(out, (uint32_t)a->b[2] << 24 | (uint32_t)a->b[3] << 16 |
					  (uint32_t)a->b[4] << 8 | a->b[5]);
	}
}

static const char *const verdict_reason[] = {
	[GUARD_ALLOW] = "allowed",
	[GUARD_ADDRESS_DENIED] = "address-denied",
	[GUARD_ADDRESS_LITERAL] = "address-literal",
	[GUARD_PORT_NOT_ALLOWED] = "port-not-allowed",
};
_Static_assert(sizeof(verdict_reason) / sizeof(verdict_reason[0]) == GUARD_VERDICT_COUNT,
	       "verdict_reason covers every verdict");

static enum guard_verdict verdict(struct guard_result *res, enum guard_verdict v)
{
	res->verdict = v;
	res->reason = verdict_reason[v];
	return v;
}

enum guard_verdict policy_guard(const struct policy *p, const struct sl_addr *a,
				uint16_t port, enum guard_origin origin,
				struct guard_result *res)
{
	struct sl_addr j;
	bool held, refuse;
	int32_t rg;
	int rule;

	res->range[0] = '\0';
	res->rule = -1;
	if (!p) {
		snprintf(res->range, sizeof(res->range), "no policy");
		return verdict(res, GUARD_ADDRESS_DENIED);
	}
	rule = cidr_rule(p, a, port, &held);
	if (rule >= 0) {
		res->rule = rule;
		return verdict(res, GUARD_ALLOW);
	}
	if (origin == GUARD_FROM_LITERAL)
		return verdict(res, held ? GUARD_PORT_NOT_ALLOWED : GUARD_ADDRESS_LITERAL);

	/* The address as written first (a policy may deny 2002::/16 itself),
	 * then the v4 address it embeds. */
	rg = longest_range(p, a);
	if (rg >= 0 && !p->ranges[rg].allow) {
		snprintf(res->range, sizeof(res->range), "%s", p->ranges[rg].text);
		return verdict(res, GUARD_ADDRESS_DENIED);
	}
	judged_address(a, &j, &refuse);
	if (refuse) {
		snprintf(res->range, sizeof(res->range), "64:ff9b:1::/48");
		return verdict(res, GUARD_ADDRESS_DENIED);
	}
	if (memcmp(&j, a, sizeof(j)) != 0)
		rg = longest_range(p, &j);
	if (rg >= 0 && !p->ranges[rg].allow) {
		snprintf(res->range, sizeof(res->range), "%s", p->ranges[rg].text);
		return verdict(res, GUARD_ADDRESS_DENIED);
	}
	if (rg >= 0)
		snprintf(res->range, sizeof(res->range), "%s", p->ranges[rg].text);
	return verdict(res, GUARD_ALLOW);
}
