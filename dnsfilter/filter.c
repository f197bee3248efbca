// SPDX-License-Identifier: MIT
/* The DNS filter's decision: one sandbox query in, one reply out, from the
 * sandbox's policy and synthetic map alone (never an upstream query); and
 * the per-sandbox query rate limit. */
#include "dnsfilter/dnsfilter.h"

#include "common/addr.h"
#include "common/reason.h"
#include "policy/policy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* EXTRA-TEXT of the Extended DNS Errors we send (RFC 8914). */
#define EDE_TEXT_BLOCKED "blocked by sluice policy"
#define EDE_TEXT_BAD_NAME "not a valid host name"
/* QCLASS * (RFC 1035 3.2.5): a question for any class. */
#define DNS_CLASS_ANY 255

static const char *rcode_text(uint16_t rcode)
{
	switch (rcode) {
	case DNS_RCODE_NOERROR:
		return "NOERROR";
	case DNS_RCODE_FORMERR:
		return "FORMERR";
	case DNS_RCODE_SERVFAIL:
		return "SERVFAIL";
	case DNS_RCODE_NXDOMAIN:
		return "NXDOMAIN";
	case DNS_RCODE_NOTIMP:
		return "NOTIMP";
	case DNS_RCODE_REFUSED:
		return "REFUSED";
	case DNS_RCODE_BADVERS:
		return "BADVERS";
	default:
		return "ERROR";
	}
}

static void res_set(struct dns_filter_result *res, const char *decision, const char *reason,
		    const char *metric, uint16_t rcode)
{
	res->decision = decision;
	res->reason = reason;
	res->metric = metric;
	res->rcode = rcode;
	snprintf(res->answer, sizeof(res->answer), "%s", rcode_text(rcode));
}

/* The question as far as the parser read it; nothing otherwise. */
static void res_question(struct dns_filter_result *res, const struct dns_query *q)
{
	memset(res, 0, sizeof(*res));
	if (q->has_question) {
		memcpy(res->name, q->name, sizeof(res->name));
		dns_qname_text(q->qwire, q->qwire_len, res->qname, sizeof(res->qname));
		res->type = dns_type_name(q->qtype);
	}
}

/* No reply: a message too short for a header, a response (answering one
 * could start a loop between two DNS speakers), or no room for the reply. */
static int drop(struct dns_filter_result *res, const char *decision, const char *reason)
{
	res->decision = decision;
	res->reason = reason;
	res->metric = "dropped";
	res->rcode = 0;
	snprintf(res->answer, sizeof(res->answer), "DROPPED");
	return 0;
}

/* Turn a builder's result into ours: a reply length, or 0 to drop. */
static int built(int n, struct dns_filter_result *res)
{
	if (n > 0)
		return n;
	/* Only a buffer smaller than the documented 512 bytes gets here. */
	return drop(res, "error", "reply-too-large");
}

static int parse_error(const struct dns_query *q, int r, uint8_t *out, size_t outlen,
		       struct dns_filter_result *res)
{
	switch (r) {
	case -EOPNOTSUPP:
		res_set(res, "deny", "notimp", "notimp", DNS_RCODE_NOTIMP);
		break;
	case -EPROTONOSUPPORT:
		res_set(res, "deny", "badvers", "badvers", DNS_RCODE_BADVERS);
		break;
	default:
		res_set(res, "deny", "formerr", "formerr", DNS_RCODE_FORMERR);
		break;
	}
	return built(dns_build_error(q, q->rcode_hint, 0, NULL, out, outlen), res);
}

int dns_filter_answer(const struct policy *p, struct dns_synth *s, const uint8_t *msg, size_t len,
		      bool udp, uint8_t *out, size_t outlen, struct dns_filter_result *res)
{
	return dns_filter_answer_mode(p, s, false, msg, len, udp, out, outlen, res);
}

int dns_filter_answer_mode(const struct policy *p, struct dns_synth *s, bool audit,
			   const uint8_t *msg, size_t len, bool udp, uint8_t *out, size_t outlen,
			   struct dns_filter_result *res)
{
	return dns_filter_answer_unlisted(p, s, audit ? DNS_UNLISTED_AUDIT : DNS_UNLISTED_REFUSE,
					  msg, len, udp, out, outlen, res);
}

int dns_filter_answer_unlisted(const struct policy *p, struct dns_synth *s,
			       enum dns_unlisted unlisted, const uint8_t *msg, size_t len, bool udp,
			       uint8_t *out, size_t outlen, struct dns_filter_result *res)
{
	const char *decision = "allow", *reason = "allowed";
	struct dns_query q;
	struct sl_addr a;
	size_t nlen;
	int r;

	r = dns_parse_query(msg, len, &q);
	res_question(res, &q);
	if (r == -EINVAL)
		return drop(res, "deny", "not-a-query");
	if (r < 0)
		return parse_error(&q, r, out, outlen, res);

	/* A label holding a dot, a space or a control byte reads '?' in
	 * q.name: it must not be matched as the name it resembles. (The
	 * policy would refuse the '?' too; this does not rely on it.) */
	if (q.name_weird) {
		res_set(res, "deny", "bad-name", "nxdomain", DNS_RCODE_NXDOMAIN);
		return built(dns_build_error(&q, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED,
					     EDE_TEXT_BAD_NAME, out, outlen),
			     res);
	}
	nlen = strlen(q.name);
	if (!policy_name_allowed(p, q.name, nlen)) {
		const char *why;
		/* Bad: not a host name, an address literal among them
		 * ("11.0.2.10", "0177.0.0.1"): the resolver would answer it
		 * with the address itself, which no cidr rule allowed. */
		bool bad = policy_match_name(p, q.name, nlen, 0, NULL) == POLICY_BAD_NAME ||
			   !policy_check_name(q.name, nlen, false, &why);

		/* Audit mode, and `unlisted: hold`: answered as an allowed
		 * name is, so that the client connects and the proxy sees
		 * what it wanted (audits it, or holds it until a person
		 * answers); a synthetic address reveals nothing and asks
		 * nobody upstream. */
		if (unlisted != DNS_UNLISTED_REFUSE && !bad) {
			decision = unlisted == DNS_UNLISTED_AUDIT ? SL_DECISION_WOULD_DENY
								  : SL_DECISION_HOLD;
			reason = "not-allowlisted";
			goto answer;
		}
		res_set(res, "deny", bad ? "bad-name" : "not-allowlisted", "nxdomain",
			DNS_RCODE_NXDOMAIN);
		return built(dns_build_error(&q, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED,
					     bad ? EDE_TEXT_BAD_NAME : EDE_TEXT_BLOCKED, out,
					     outlen),
			     res);
	}

answer:
	/* Allowed. Only A in class IN (or ANY) has data: the synthetic
	 * address. Everything else (AAAA: sandboxes have no IPv6; TXT, MX,
	 * HTTPS, ANY, ...) is NODATA, which clients cache and move on from;
	 * the real records are the broker's business when it connects. */
	if (q.qtype != DNS_TYPE_A || (q.qclass != DNS_CLASS_IN && q.qclass != DNS_CLASS_ANY)) {
		res_set(res, decision, reason, "nodata", DNS_RCODE_NOERROR);
		snprintf(res->answer, sizeof(res->answer), "NODATA");
		return built(dns_build_nodata(&q, DNS_FILTER_TTL, out, outlen), res);
	}
	r = dns_synth_get(s, q.name, &a);
	if (r < 0) {
		/* The sandbox has used up its map, memory ran out, or the
		 * journal cannot reserve the address (state_dir full): a
		 * server failure, not a verdict on the name. */
		res_set(res, "error",
			r == -ENOSPC ? "synthetic-pool-full"
			: r == -EIO  ? "synthetic-journal-failed"
				     : "out-of-memory",
			"servfail", DNS_RCODE_SERVFAIL);
		return built(dns_build_error(&q, DNS_RCODE_SERVFAIL, 0, NULL, out, outlen), res);
	}
	res_set(res, decision, reason, "synthetic", DNS_RCODE_NOERROR);
	addr_format(&a, res->answer, sizeof(res->answer));
	return built(dns_build_a(&q, &a, 1, DNS_FILTER_TTL, udp, out, outlen), res);
}

int dns_filter_error(const uint8_t *msg, size_t len, uint16_t rcode, uint16_t ede_code,
		     const char *decision, const char *reason, uint8_t *out, size_t outlen,
		     struct dns_filter_result *res)
{
	struct dns_query q;
	int r;

	r = dns_parse_query(msg, len, &q);
	res_question(res, &q);
	if (r == -EINVAL)
		return drop(res, decision, reason);
	res_set(res, decision, reason, rcode == DNS_RCODE_FORMERR ? "formerr" : "refused", rcode);
	/* Only the 4-bit RCODEs: a larger one needs EDNS the query may lack. */
	if (rcode > 0xf)
		return drop(res, "error", "bad-rcode");
	return built(dns_build_error(&q, rcode, ede_code, NULL, out, outlen), res);
}

bool dns_bucket_take(struct dns_bucket *b, uint64_t now_ms, uint32_t rate, uint32_t burst)
{
	uint64_t cap = (uint64_t)burst * 1000;

	if (!b->primed) {
		b->primed = true;
		b->milli = cap;
		b->last_ms = now_ms;
	} else if (now_ms > b->last_ms) {
		/* rate tokens a second is rate thousandths a millisecond; a
		 * long pause only fills the bucket, so clamp before adding. */
		uint64_t dt = now_ms - b->last_ms;

		if (dt > cap / (rate ? rate : 1) + 1)
			b->milli = cap;
		else
			b->milli += dt * rate;
		if (b->milli > cap)
			b->milli = cap;
		b->last_ms = now_ms;
	}
	if (b->milli < 1000)
		return false;
	b->milli -= 1000;
	return true;
}
