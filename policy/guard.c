// SPDX-License-Identifier: MIT
/* The address guard: the one function every connect path calls to decide
 * whether the broker may connect to an address.
 *
 * Precedence (documented in policy.h and README, defined only here):
 *  1. a `cidr` allow rule holding the address and listing the port allows it;
 *  2. an address literal that no cidr rule allows is refused;
 *  3. the most specific prefix among deny_ranges and allow_ranges decides,
 *     deny winning a tie; an address in neither is allowed.
 * Addresses that embed an IPv4 address (v4-mapped, v4-compatible, SIIT,
 * NAT64, 6to4, ISATAP) are judged as that IPv4 address too; Teredo and odd
 * 64:ff9b:1::/48 layouts are refused (see judged_address()). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "policy/policy_internal.h"

/* IANA special-purpose ranges that are not globally reachable (v4 and v6
 * registries), plus broadcast and the deprecated site-local range. The
 * embedding ranges are not listed: they are judged by their v4. */
const char *const policy_default_deny[] = {
	"0.0.0.0/8",	  "10.0.0.0/8",	    "100.64.0.0/10", "127.0.0.0/8",
	"169.254.0.0/16", "172.16.0.0/12",  "192.0.0.0/24",  "192.0.2.0/24",
	"192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
	"203.0.113.0/24", "224.0.0.0/4",    "240.0.0.0/4",   "255.255.255.255/32",
	"::/128",	  "::1/128",	    "100::/64",	     "100:0:0:1::/64",
	"2001::/23",	  "2001:db8::/32",  "3fff::/20",     "5f00::/16",
	"fc00::/7",	  "fe80::/10",	    "fec0::/10",     "ff00::/8",
};
const size_t policy_default_deny_count =
	sizeof(policy_default_deny) / sizeof(policy_default_deny[0]);

static int add_range(struct policy *p, const struct range *rg, struct sl_err *err)
{
	int32_t old;
	int r;

	p->ranges[p->n_ranges] = *rg;
	r = policy_ptrie_insert(&p->range_trie, &rg->net, rg->plen, (int32_t)p->n_ranges, &old);
	if (r < 0)
		return sl_err_set(err, r, "out of memory");
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
			struct sl_err *err)
{
	size_t i;
	int r;

	p->ranges = calloc(policy_default_deny_count + n_user, sizeof(*p->ranges));
	if (!p->ranges)
		return -ENOMEM;
	for (i = 0; i < policy_default_deny_count; i++) {
		struct range rg = { .allow = false };

		if (addr_parse_cidr(policy_default_deny[i], &rg.net, &rg.plen) < 0)
			return sl_err_set(err, 0, "internal: bad default range `%s`",
					  policy_default_deny[i]);
		snprintf(rg.text, sizeof(rg.text), "%s", policy_default_deny[i]);
		r = add_range(p, &rg, err);
		if (r < 0)
			return r;
	}
	for (i = 0; i < n_user; i++) {
		r = add_range(p, &user[i], err);
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
static int cidr_rule(const struct policy *p, const struct sl_addr *a, uint16_t port, bool *held)
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

/*
 * The forms that embed an IPv4 address, and what the guard does with each.
 * The rule: wherever some stack, tunnel or translator on the path could send
 * the packet to the embedded v4 address, the address is judged as that v4
 * (as well as as written); a form that embeds more than the guard can judge
 * is refused outright. Only a cidr rule, checked before any of this, opens
 * either kind.
 *
 *  - v4-mapped ::ffff:0:0/96: common/addr.c stores every v4 address this
 *    way, so it *is* the v4 address; nothing to do here.
 *  - v4-compatible ::/96, but not :: and ::1 (RFC 4291 gives those their own
 *    meaning, and they have their own default ranges): deprecated, yet Linux
 *    routes ::/96 into sit0's automatic tunnel once sit0 is up, which sends
 *    to the embedded v4, so `::169.254.169.254` can reach the metadata
 *    service. Judged as v4.
 *  - v4-translated ::ffff:0:0:0/96 (RFC 2765 SIIT): a translator turns it
 *    into the v4 address. Judged as v4.
 *  - NAT64 64:ff9b::/96: the translator connects to the v4. Judged as v4.
 *  - local-use NAT64 64:ff9b:1::/48: the v4 in the last 32 bits (a /96 in
 *    the /48, as deployments use); other layouts are refused rather than
 *    guessed at.
 *  - 6to4 2002::/16: a 6to4 host or relay encapsulates to bits 16-47.
 *    Judged as v4.
 *  - ISATAP interface ids (RFC 5214) in the low 64 bits of any prefix,
 *    0000:5efe:V4 and 0200:5efe:V4 (the u bit), and the same with the g bit
 *    set, which costs nothing to catch: a host with an ISATAP interface on
 *    that prefix encapsulates straight to V4. Under another prefix the
 *    address is also an ordinary v6 one, so it is judged both as written
 *    and as V4, which refuses `<prefix>::5efe:169.254.169.254` while an
 *    ISATAP host on a public v4 stays reachable. With 2002::/16 it embeds
 *    two v4 addresses; both are judged.
 *  - Teredo 2001::/32 (RFC 4380): refused outright. It embeds two v4
 *    addresses (the server in bits 32-63, the client's NAT mapping in the
 *    last 32 bits XOR 0xffffffff) and a UDP port; reaching it means UDP to
 *    what those say through a relay, never a server a policy means. The
 *    default 2001::/23 holds it already; this keeps it refused when
 *    allow_ranges carves 2001::/23 out.
 *
 * Not recognisable here: a network-specific NAT64 prefix or a 6rd prefix
 * is chosen by each operator; deny_ranges (checked as written) covers them.
 */
#define EMBEDDED_MAX 2

struct judged {
	struct sl_addr v4[EMBEDDED_MAX]; /* the embedded v4 addresses, v4-mapped */
	size_t n;
	const char *refuse; /* the prefix refused outright, or NULL */
};

static const uint8_t nat64_wkp[12] = { 0x00, 0x64, 0xff, 0x9b };
static const uint8_t nat64_local[6] = { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 };
static const uint8_t v4_translated[12] = { [8] = 0xff, [9] = 0xff };
static const uint8_t teredo[4] = { 0x20, 0x01, 0x00, 0x00 };
static const uint8_t zero[12];

static void embed(struct judged *j, const uint8_t *b)
{
	addr_from_v4(&j->v4[j->n++],
		     (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
}

static bool is_isatap_id(const struct sl_addr *a)
{
	return (a->b[8] & ~0x03) == 0 && a->b[9] == 0 && a->b[10] == 0x5e && a->b[11] == 0xfe;
}

/* What @a embeds, per the list above. */
static void judged_address(const struct sl_addr *a, struct judged *j)
{
	j->n = 0;
	j->refuse = NULL;
	if (addr_is_v4(a))
		return;
	if (memcmp(a->b, zero, 12) == 0) {
		/* :: and ::1 are not v4-compatible */
		if (a->b[12] || a->b[13] || a->b[14] || a->b[15] > 1)
			embed(j, a->b + 12);
		return;
	}
	if (memcmp(a->b, v4_translated, 12) == 0 || memcmp(a->b, nat64_wkp, 12) == 0) {
		embed(j, a->b + 12);
		return;
	}
	if (memcmp(a->b, nat64_local, 6) == 0) {
		if (memcmp(a->b + 6, zero, 6) != 0) {
			j->refuse = "64:ff9b:1::/48";
			return;
		}
		embed(j, a->b + 12);
		return;
	}
	if (memcmp(a->b, teredo, 4) == 0) {
		j->refuse = "2001::/32";
		return;
	}
	if (a->b[0] == 0x20 && a->b[1] == 0x02)
		embed(j, a->b + 2);
	if (is_isatap_id(a))
		embed(j, a->b + 12);
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

enum guard_verdict policy_guard(const struct policy *p, const struct sl_addr *a, uint16_t port,
				enum guard_origin origin, struct guard_result *res)
{
	struct judged j;
	bool held;
	int32_t rg;
	size_t i;
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
	 * then every v4 address it embeds: each must pass. */
	rg = longest_range(p, a);
	if (rg >= 0 && !p->ranges[rg].allow) {
		snprintf(res->range, sizeof(res->range), "%s", p->ranges[rg].text);
		return verdict(res, GUARD_ADDRESS_DENIED);
	}
	judged_address(a, &j);
	if (j.refuse) {
		snprintf(res->range, sizeof(res->range), "%s", j.refuse);
		return verdict(res, GUARD_ADDRESS_DENIED);
	}
	for (i = 0; i < j.n; i++) {
		/* The v4 range names the decision: for ::ffff:10.1.2.3 under
		 * allow_ranges [10.1.0.0/16], that carve-out. */
		rg = longest_range(p, &j.v4[i]);
		if (rg >= 0 && !p->ranges[rg].allow) {
			snprintf(res->range, sizeof(res->range), "%s", p->ranges[rg].text);
			return verdict(res, GUARD_ADDRESS_DENIED);
		}
	}
	if (rg >= 0)
		snprintf(res->range, sizeof(res->range), "%s", p->ranges[rg].text);
	return verdict(res, GUARD_ALLOW);
}
