// SPDX-License-Identifier: MIT
/* The broker's side of the DNS filter server (dnsfilter/server.c): what
 * the server asks of it (a sandbox by source address, an audit line, a
 * metric), on the worker's thread. The server keeps no copy of the
 * sandbox table: each query looks its sandbox up here, in the table. */
#include <errno.h>
#include <stddef.h>

#include "broker/audit.h"
#include "broker/broker_internal.h"
#include "broker/metrics.h"
#include "dnsfilter/dnsfilter.h"
#include "policy/policy.h"

/* @ctx: the struct broker. A reference on the sandbox and on its policy. */
static int dns_lookup(void *ctx, const struct sl_addr *src, struct dns_client *c)
{
	struct broker *b = ctx;
	struct policy *pol = NULL;
	struct sandbox *sb = sandbox_lookup(b->sandboxes, src, &pol);

	if (!sb)
		return -ENOENT;
	*c = (struct dns_client){
		.handle = sb,
		.name = sb->name,
		.policy = pol,
		.synth = sb->synth,
		.state = &sb->dns,
		.audit = sandbox_audit(sb, pol),
	};
	return 0;
}

static void dns_put(void *ctx, struct dns_client *c)
{
	(void)ctx;
	policy_unref(c->policy);
	c->policy = NULL;
	sandbox_put(c->handle);
}

static void dns_audit(void *ctx, const struct dns_client *c, const struct sl_addr *src,
		      uint16_t sport, const struct dns_filter_result *res)
{
	struct audit_event ev = {
		.sandbox = c ? c->name : NULL,
		.proto = "dns",
		.name = res->name[0] ? res->name : NULL,
		.target = res->qname[0] ? res->qname : NULL,
		.src_addr = src,
		.src_port = sport,
		.decision = res->decision,
		.reason = res->reason,
		.dns_type = res->type,
		.dns_answer = res->answer,
		.mode = c && c->audit ? "audit" : NULL,
	};

	(void)ctx;
	audit_log(&ev);
}

static void dns_count(void *ctx, const char *answer, const char *decision, const char *reason)
{
	(void)ctx;
	metrics_dns_query(answer);
	metrics_decision("dns", decision, reason);
}

static const struct dns_server_ops broker_dns_ops = {
	.lookup = dns_lookup,
	.put = dns_put,
	.audit = dns_audit,
	.count = dns_count,
};

int broker_dns_start(struct worker *w)
{
	return dns_server_start(w->loop, w->id, w->b->cfg.dns_port, &broker_dns_ops, w->b, &w->dns);
}

void broker_dns_stop(struct worker *w)
{
	struct dns_server *srv = w->dns;

	w->dns = NULL;
	dns_server_stop(srv);
}
