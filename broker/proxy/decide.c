// SPDX-License-Identifier: MIT
/* The proxy's checks: policy, address, request form and Host, placeholders,
 * redirects in; a verdict out.
 *
 * Every check here is a function of its arguments: it reads a compiled
 * policy and what the caller says of the request, does no I/O, touches no
 * connection and no global, and fills a struct proxy_verdict (decision,
 * reason, the HTTP status of the answer). The phase that asked acts on the
 * verdict in one place, proxy_refuse(), which ends the connection. So the
 * decision code is tested on its own (tests/unit/test_proxy_decide.c), with
 * a policy loaded from text and addresses written in.
 */
#include <assert.h>
#include <string.h>
#include <strings.h>

#include "broker/proxy/proxy_internal.h"
#include "broker/creds/creds.h"
#include "broker/http.h"
#include "common/reason.h"
#include "policy/policy.h"

static const char *const decision_name[] = {
	[PROXY_ALLOW] = "allow",
	[PROXY_DENY] = "deny",
	[PROXY_ERROR] = "error",
	[PROXY_WOULD_DENY] = SL_DECISION_WOULD_DENY,
};
static_assert(sizeof(decision_name) / sizeof(decision_name[0]) == PROXY_DECISION_COUNT,
	      "a decision without a name");

const char *proxy_decision_name(enum proxy_decision d)
{
	return (unsigned)d < PROXY_DECISION_COUNT ? decision_name[d] : "error";
}

/* The guard's refusals and the name matcher's, as the contract spells them. */
static const enum sl_reason guard_reason[] = {
	[GUARD_ALLOW] = SL_REASON_ALLOWED,
	[GUARD_ADDRESS_DENIED] = SL_REASON_ADDRESS_DENIED,
	[GUARD_ADDRESS_LITERAL] = SL_REASON_ADDRESS_LITERAL,
	[GUARD_PORT_NOT_ALLOWED] = SL_REASON_PORT_NOT_ALLOWED,
};
static_assert(sizeof(guard_reason) / sizeof(guard_reason[0]) == GUARD_VERDICT_COUNT,
	      "a guard verdict without a reason");

static const enum sl_reason match_reason[] = {
	[POLICY_ALLOW] = SL_REASON_ALLOWED,
	[POLICY_NOT_ALLOWLISTED] = SL_REASON_NOT_ALLOWLISTED,
	[POLICY_PORT_NOT_ALLOWED] = SL_REASON_PORT_NOT_ALLOWED,
	[POLICY_BAD_NAME] = SL_REASON_BAD_NAME,
};
static_assert(sizeof(match_reason) / sizeof(match_reason[0]) == POLICY_DECISION_COUNT,
	      "a policy decision without a reason");

/* Sets @v and returns its decision, so that a check can end in one line. */
static enum proxy_decision verdict(struct proxy_verdict *v, enum proxy_decision d,
				   enum sl_reason reason, int status)
{
	v->decision = d;
	v->reason = reason;
	v->status = status;
	return d;
}

static enum proxy_decision allow(struct proxy_verdict *v)
{
	return verdict(v, PROXY_ALLOW, SL_REASON_ALLOWED, 0);
}

static enum proxy_decision deny(struct proxy_verdict *v, enum sl_reason reason)
{
	return verdict(v, PROXY_DENY, reason, 403);
}

/* Audit mode's answer to an allowlist question: it goes on, audited. */
static enum proxy_decision would_deny(struct proxy_verdict *v, enum sl_reason reason)
{
	return verdict(v, PROXY_WOULD_DENY, reason, 0);
}

/* Same host, ignoring case and one trailing dot on either side. */
bool proxy_host_same(const char *a, const char *b)
{
	size_t al = strlen(a), bl = strlen(b);

	if (al && a[al - 1] == '.')
		al--;
	if (bl && b[bl - 1] == '.')
		bl--;
	return al == bl && strncasecmp(a, b, al) == 0;
}

/* Is @host in the scope of any of the policy's credentials? Then its TLS
 * is intercepted, so that requests can be checked and credentials put in. */
bool proxy_intercepted(const struct policy *p, const char *host)
{
	size_t i, j, n = policy_credential_count(p), hl = strlen(host);

	for (i = 0; i < n; i++) {
		const struct policy_credential *pc = policy_credential_get(p, i);

		for (j = 0; j < pc->n_hosts; j++)
			if (creds_host_match(pc->hosts[j], host, hl))
				return true;
	}
	return false;
}

enum proxy_decision proxy_check_address(const struct policy *pol, const struct sl_addr *a,
					uint16_t port, enum guard_origin origin, bool local,
					struct proxy_verdict *v)
{
	struct guard_result g;

	v->rule = -1;
	v->raw_ok = false;
	if (policy_guard(pol, a, port, origin, &g) != GUARD_ALLOW)
		return deny(v, guard_reason[g.verdict]);
	/* Allowed by the policy, but the broker's own: a sandbox must not
	 * reach the broker's listeners, control or DNS through the proxy. */
	if (local)
		return deny(v, SL_REASON_BROKER_ADDRESS);
	v->rule = g.rule;
	return allow(v);
}

enum proxy_decision proxy_check_target(const struct policy *pol, const struct proxy_target *t,
				       struct proxy_verdict *v)
{
	enum policy_decision d;

	if (t->literal) {
		if (proxy_check_address(pol, t->addr, t->port, GUARD_FROM_LITERAL, t->local, v) !=
		    PROXY_ALLOW)
			return v->decision;
	} else {
		v->rule = -1;
		v->raw_ok = false;
		d = policy_match_name(pol, t->host, strlen(t->host), t->port, &v->rule);
		/* Audit mode answers only what a host rule would change: a
		 * name that is no name is refused in any mode. No rule
		 * allowed it, so raw TCP (below) stays refused. */
		if (t->audit && (d == POLICY_NOT_ALLOWLISTED || d == POLICY_PORT_NOT_ALLOWED)) {
			if (t->need_raw)
				return deny(v, SL_REASON_RAW_TCP_NOT_ALLOWED);
			return would_deny(v, match_reason[d]);
		}
		if (d != POLICY_ALLOW)
			return deny(v, (unsigned)d < POLICY_DECISION_COUNT
					       ? match_reason[d]
					       : SL_REASON_NOT_ALLOWLISTED);
	}
	v->raw_ok = policy_rule_raw_tcp(pol, v->rule);
	if (t->need_raw && !v->raw_ok)
		return deny(v, SL_REASON_RAW_TCP_NOT_ALLOWED);
	return allow(v);
}

enum proxy_decision proxy_check_form(enum proxy_mode mode, const struct http_request *req,
				     struct proxy_verdict *v)
{
	bool connect = req->method_id == HTTP_METHOD_CONNECT || req->form == HTTP_FORM_AUTHORITY;

	v->rule = -1;
	v->raw_ok = false;
	switch (mode) {
	case PROXY_MODE_IN_TLS:
		if (connect)
			return verdict(v, PROXY_DENY, SL_REASON_CONNECT_IN_TLS, 400);
		break;
	case PROXY_MODE_IN_TUNNEL:
		if (connect)
			return verdict(v, PROXY_DENY, SL_REASON_CONNECT_IN_TUNNEL, 400);
		break;
	case PROXY_MODE_TRANSPARENT:
		if (connect)
			return verdict(v, PROXY_DENY, SL_REASON_CONNECT_ON_TRANSPARENT, 400);
		break;
	case PROXY_MODE_EXPLICIT:
		if (req->method_id != HTTP_METHOD_CONNECT && req->form != HTTP_FORM_ABSOLUTE)
			return verdict(v, PROXY_DENY, SL_REASON_ORIGIN_FORM_ON_PROXY, 400);
		if (!req->has_authority)
			return verdict(v, PROXY_DENY, SL_REASON_BAD_TARGET, 400);
		break;
	}
	return allow(v);
}

enum proxy_decision proxy_check_host(enum proxy_mode mode, const struct http_request *req,
				     const struct proxy_bound *b, struct proxy_verdict *v)
{
	const struct http_authority *a = &req->authority;

	v->rule = -1;
	v->raw_ok = false;
	if (mode == PROXY_MODE_EXPLICIT)
		return allow(v); /* the request names its own target */
	if (!req->has_authority || (a->port_given && a->port != b->port))
		return deny(v, SL_REASON_HOST_MISMATCH);
	/* A literal destination (a cidr rule, transparent) takes a Host naming
	 * that address only: a name there would pick a credential or a virtual
	 * host the policy did not judge. */
	if (b->addr ? !a->is_literal || memcmp(&a->addr, b->addr, sizeof(a->addr)) != 0
		    : !proxy_host_same(a->host, b->host))
		return deny(v, SL_REASON_HOST_MISMATCH);
	return allow(v);
}

enum proxy_decision proxy_check_placeholders(const struct creds_plan *plan, bool placeholders_lost,
					     struct proxy_verdict *v)
{
	v->rule = -1;
	v->raw_ok = false;
	/* The contract's reasons: an expired placeholder says so; any other
	 * misuse (another host, method, path, plain HTTP, another sandbox's
	 * or a revoked one) is placeholder-out-of-scope. */
	if (plan->verdict == CREDS_EXPIRED)
		return deny(v, SL_REASON_PLACEHOLDER_EXPIRED);
	/* One the broker does not know, from a sandbox whose placeholders
	 * were lost at the last start: most likely one of those, not misuse. */
	if (plan->verdict == CREDS_UNKNOWN && placeholders_lost)
		return deny(v, SL_REASON_PLACEHOLDER_LOST);
	if (plan->verdict != CREDS_FORWARD)
		return deny(v, SL_REASON_PLACEHOLDER_OUT_OF_SCOPE);
	return allow(v);
}

enum proxy_decision proxy_check_audit_credentials(enum sl_reason would_deny,
						  const struct creds_plan *plan,
						  struct proxy_verdict *v)
{
	v->rule = -1;
	v->raw_ok = false;
	if (would_deny != SL_REASON_ALLOWED && plan->nuse > 0)
		return deny(v, would_deny);
	return allow(v);
}

/* Does the Location of a 3xx stay within what the policy allows? */
static bool redirect_allowed(const struct policy *pol, const char *host, uint16_t port, bool tls,
			     const struct http_slice *location)
{
	enum policy_redirects mode = policy_redirects(pol);
	enum http_scheme scheme = tls ? HTTP_SCHEME_HTTPS : HTTP_SCHEME_HTTP;
	struct http_authority base;
	struct http_url url;
	struct guard_result g;

	if (mode == POLICY_REDIRECTS_ANY)
		return true;
	if (http_parse_authority(host, strlen(host), port, &base) < 0)
		return false;
	base.port = port;
	if (http_parse_location(location->ptr, location->len, scheme, &base, &url) < 0)
		return false;
	if (url.relative)
		return true;
	if (mode == POLICY_REDIRECTS_SAME_HOST)
		return http_authority_equal(&url.authority, &base) && url.scheme == scheme;
	if (url.authority.is_literal) {
		policy_guard(pol, &url.authority.addr, url.authority.port, GUARD_FROM_LITERAL, &g);
		return g.verdict == GUARD_ALLOW;
	}
	return policy_match_name(pol, url.authority.host, url.authority.host_len,
				 url.authority.port, NULL) == POLICY_ALLOW;
}

enum proxy_decision proxy_check_redirect(const struct policy *pol, const char *host, uint16_t port,
					 bool tls, int status, const struct http_slice *location,
					 bool audit, struct proxy_verdict *v)
{
	v->rule = -1;
	v->raw_ok = false;
	if (status >= 300 && status < 400 && location &&
	    !redirect_allowed(pol, host, port, tls, location))
		return audit ? would_deny(v, SL_REASON_REDIRECT_OUTSIDE_POLICY)
			     : deny(v, SL_REASON_REDIRECT_OUTSIDE_POLICY);
	return allow(v);
}

enum proxy_decision proxy_check_connect_head(const char *head, size_t len, struct proxy_verdict *v)
{
	size_t off;

	v->rule = -1;
	v->raw_ok = false;
	/* The broker sees nothing inside the tunnel: no placeholder is in
	 * scope there. */
	if (creds_find_placeholder(head, len, &off))
		return deny(v, SL_REASON_PLACEHOLDER_OUT_OF_SCOPE);
	return allow(v);
}
