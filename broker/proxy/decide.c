// SPDX-License-Identifier: MIT
/* The decision on a request: policy, credentials, the host it is bound to. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <llhttp.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "broker/proxy/proxy_internal.h"
#include "broker/audit.h"
#include "broker/creds/creds.h"
#include "broker/broker_internal.h"
#include "broker/http.h"
#include "broker/metrics.h"
#include "broker/reflect.h"
#include "broker/tls/tls.h"
#include "dnsfilter/dnsfilter.h"
#include "common/log.h"
#include "policy/policy.h"

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

static void copy_slice(char *dst, size_t dlen, const struct http_slice *s)
{
	size_t n = s->len < dlen - 1 ? s->len : dlen - 1;

	memcpy(dst, s->ptr, n);
	dst[n] = '\0';
}

/*
 * The policy decision on a parsed request head; then resolution or, for a
 * literal allowed by a cidr rule, a connect.
 */
enum step proxy_decide_target(struct conn *c);

/*
 * The placeholders a request head carries, against the sandbox's table and
 * the credentials' scopes. A CONNECT head carries none in scope: the broker
 * sees nothing inside the tunnel. Fills @plan (when not NULL) for the
 * rewrite. Return: STEP_NEXT to go on, else the refusal's step.
 */
enum step proxy_check_credentials(struct conn *c, struct http_request *req, const char *head,
				   size_t hl, struct creds_plan *plan)
{
	struct creds_plan local;
	size_t off;

	c->cred_name[0] = '\0';
	if (c->is_connect) {
		if (!creds_find_placeholder(head, hl, &off))
			return STEP_NEXT;
		return proxy_deny(c, "placeholder-out-of-scope");
	}
	if (!plan)
		plan = &local;
	/* Credentials go by the destination the broker connects to, never by
	 * what the request's Host says (proxy_decide() makes them agree). */
	creds_plan_request(c->sb->creds, c->pol, c->host[0] ? c->host : NULL, req,
			   (uint64_t)time(NULL), c->cssl ? 0 : CREDS_PLAN_PLAINTEXT, plan);
	if (plan->cred >= 0)
		snprintf(c->cred_name, sizeof(c->cred_name), "%s",
			 policy_credential_get(c->pol, (size_t)plan->cred)->name);
	else if (plan->nuse > 0)
		snprintf(c->cred_name, sizeof(c->cred_name), "%s",
			 policy_credential_get(c->pol, (size_t)plan->use[0])->name);
	else if (plan->expired_withheld >= 0 || plan->plaintext_withheld >= 0)
		/* Sent without it: the audit line still says which one. */
		snprintf(c->cred_name, sizeof(c->cred_name), "%s",
			 policy_credential_get(c->pol, (size_t)(plan->expired_withheld >= 0
									? plan->expired_withheld
									: plan->plaintext_withheld))
				 ->name);
	/* The contract's reasons: an expired placeholder says so; any other
	 * misuse (another host, method, path, plain HTTP, another sandbox's
	 * or a revoked one) is placeholder-out-of-scope. */
	if (plan->verdict == CREDS_EXPIRED)
		return proxy_deny(c, "placeholder-expired");
	if (plan->verdict != CREDS_FORWARD)
		return proxy_deny(c, "placeholder-out-of-scope");
	return STEP_NEXT;
}

/* Decides on the head in @ps: kept in c->parsed (for proxy_start_request())
 * unless the request is refused for its placeholders, when it is freed. */
enum step proxy_decide(struct conn *c, struct parsed *ps)
{
	struct http_request *req = &ps->req;
	const struct http_authority *a = &req->authority;

	const char *head = c->in->data + c->in->pos;
	enum step s;

	c->is_connect = req->method_id == HTTP_METHOD_CONNECT;
	/* A CONNECT head is consumed here; an HTTP head is consumed when it is
	 * rewritten for upstream (proxy_start_request). */
	if (c->is_connect)
		c->in->pos += (size_t)c->head_len;
	c->client_keepalive = req->keep_alive && !c->is_connect;
	c->head_req = req->method_id == HTTP_METHOD_HEAD;
	copy_slice(c->method, sizeof(c->method), &req->method);
	if (!c->is_connect)
		copy_slice(c->path, sizeof(c->path), &req->path);
	else
		c->path[0] = '\0';
	/* The audit line of a refusal below names the host asked for. */
	if (!c->cssl && !c->inner && !c->transparent) {
		if (req->has_authority)
			memcpy(c->host, a->host, a->host_len + 1);
		else
			c->host[0] = '\0'; /* not the last request's */
	}
	/* Placeholders first: one on its way outside its scope is an
	 * exfiltration attempt, and is logged as that whatever else is wrong
	 * with the request. */
	s = proxy_check_credentials(c, req, head, (size_t)c->head_len, &ps->plan);
	if (s != STEP_NEXT || proxy_ending(c)) {
		proxy_parsed_free(ps);
		return s; /* refused: the reply is under way */
	}
	c->parsed = ps; /* @req stays valid; proxy_read_head() drops a CONNECT's */
	if (c->cssl || c->inner) {
		/* Inside intercepted TLS or a CONNECT tunnel: every request is
		 * for the host the tunnel was opened to (no domain fronting). */
		if (c->is_connect || req->form == HTTP_FORM_AUTHORITY)
			return proxy_reply(c, 400, "deny", c->cssl ? "connect-in-tls" : "connect-in-tunnel");
		if (!req->has_authority || !proxy_host_same(a->host, c->host) ||
		    (a->port_given && a->port != c->port))
			return proxy_deny(c, "host-mismatch");
		return proxy_decide_target(c);
	}
	if (c->transparent) {
		/* The destination is what the sandbox connected to; the Host
		 * header must name the same host (no domain fronting). */
		if (c->is_connect || req->form == HTTP_FORM_AUTHORITY)
			return proxy_reply(c, 400, "deny", "connect-on-transparent");
		if (!c->orig_synthetic) {
			/* The address is judged first (proxy_decide_target() does no
			 * I/O for a literal): one no cidr rule allows is refused
			 * as that, whatever the Host says. */
			s = proxy_decide_target(c);
			if (s != STEP_NEXT || proxy_ending(c))
				return s;
		}
		if (!req->has_authority || (a->port_given && a->port != c->orig_port))
			return proxy_deny(c, "host-mismatch");
		/* A literal destination (a cidr rule) takes a Host naming that
		 * address only: a name there would pick a credential or a
		 * virtual host the policy did not judge. */
		if (c->orig_synthetic ? !proxy_host_same(a->host, c->host)
				      : !a->is_literal ||
					memcmp(&a->addr, &c->orig_dst, sizeof(a->addr)) != 0)
			return proxy_deny(c, "host-mismatch");
		return c->orig_synthetic ? proxy_decide_target(c) : STEP_NEXT;
	}
	if (!c->is_connect && req->form != HTTP_FORM_ABSOLUTE)
		return proxy_reply(c, 400, "deny", "origin-form-on-proxy");
	if (!req->has_authority)
		return proxy_reply(c, 400, "deny", "bad-target");
	memcpy(c->host, a->host, a->host_len + 1);
	c->port = a->port;
	c->literal = a->is_literal;
	if (c->literal)
		c->dst = a->addr;
	return proxy_decide_target(c);
}

/*
 * The policy decision on c->host:c->port (a name, or a literal in c->dst);
 * then resolution or, for a literal allowed by a cidr rule, a connect.
 */
enum step proxy_decide_target(struct conn *c)
{
	struct guard_result g;
	enum policy_decision d;

	c->rule = -1;
	if (c->literal) {
		c->naddrs = 0;
		policy_guard(c->pol, &c->dst, c->port, GUARD_FROM_LITERAL, &g);
		if (g.verdict != GUARD_ALLOW)
			return proxy_deny(c, g.reason);
		if (broker_is_local(&c->dst, c->port))
			return proxy_deny(c, "broker-address");
		c->rule = g.rule;
		c->raw_ok = policy_rule_raw_tcp(c->pol, c->rule);
		if (c->need_raw && !c->raw_ok)
			return proxy_deny(c, "raw-tcp-not-allowed");
		/* A kept-alive connection's upstream goes: the new one takes
		 * its place (uev) and must not leave the old fd registered. */
		proxy_close_upstream(c);
		c->addrs[0] = c->dst;
		c->naddrs = 1;
		c->ai = 0;
		c->st = CS_RESOLVE;
		return STEP_NEXT;
	}
	d = policy_match_name(c->pol, c->host, strlen(c->host), c->port, &c->rule);
	if (d != POLICY_ALLOW)
		return proxy_deny(c, policy_decision_reason(d));
	c->raw_ok = policy_rule_raw_tcp(c->pol, c->rule);
	if (c->need_raw && !c->raw_ok)
		return proxy_deny(c, "raw-tcp-not-allowed");
	if (c->is_connect)
		c->intercept = (!c->transparent || !strcmp(c->proto, "tls")) &&
			       proxy_intercepted(c->pol, c->host);
	if (!c->is_connect && c->uev.fd >= 0 && c->upstream_reusable &&
	    strcmp(c->conn_host, c->host) == 0 && c->conn_port == c->port)
		return STEP_NEXT; /* st is set by the caller */
	proxy_close_upstream(c);
	c->st = CS_RESOLVE;
	c->naddrs = 0;
	if (resolver_lookup(c->w->resolver, c->host, &c->rr, proxy_on_resolved, c) < 0)
		return proxy_reply(c, 502, "error", "dns-failure");
	return STEP_AGAIN;
}

/*
 * Does @np still allow what @c is connected to: the host (or literal) and
 * port, the address the broker connected to, raw TCP where the tunnel
 * carries it, and interception where its TLS ends at the broker?
 */
bool proxy_still_allowed(const struct conn *c, const struct policy *np)
{
	struct guard_result g;
	int rule = -1;

	if (c->literal) {
		if (policy_guard(np, &c->dst, c->port, GUARD_FROM_LITERAL, &g) != GUARD_ALLOW)
			return false;
		rule = g.rule;
	} else {
		if (policy_match_name(np, c->host, strlen(c->host), c->port, &rule) !=
		    POLICY_ALLOW)
			return false;
		if (c->uev.fd >= 0 &&
		    policy_guard(np, &c->dst, c->port, GUARD_FROM_NAME, &g) != GUARD_ALLOW)
			return false;
	}
	if (c->proto && !strcmp(c->proto, "tcp") && c->raw_ok && !policy_rule_raw_tcp(np, rule))
		return false;
	if ((c->cssl || c->intercept) && !proxy_intercepted(np, c->host))
		return false;
	return true;
}
