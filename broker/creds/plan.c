// SPDX-License-Identifier: MIT
/* Planning one request: which credentials apply, or why it is refused. */

/*
 * Theory of operation
 *
 * The broker holds the secrets; a sandbox holds at most placeholders,
 * "sluice-ph-" and 128 random bits in hex, one table of them per sandbox
 * (placeholder -> credential name, expiry, revoked).  For each request
 * the proxy asks two questions, in two steps, so that it can fetch what
 * the second step needs (an OAuth2 token, a minted JWT) in between:
 *
 *  1. creds_plan_request(): is the request allowed to leave, and which
 *     credentials apply?  Every placeholder-shaped string in the head is
 *     looked up; an unknown, expired or revoked one, or one whose
 *     credential's scope (host, method, path) does not hold the request,
 *     refuses the request (an exfiltration attempt, or a stale sandbox),
 *     and so does a valid one anywhere but in a header its credential
 *     names (never the path or the query: an origin reflecting those
 *     would give the secret back).  Credentials with an inject header
 *     apply to every request in their scope, placeholder or not.
 *  2. creds_rewrite_request(): with the secrets of the credentials the
 *     plan named, produce the header values to set;
 *     creds_write_request_head() writes the head.
 *
 * The one property everything here keeps: a secret is only ever copied
 * into a request that step 1 found in that credential's scope.  Finding
 * placeholders is best effort (only literal text is seen), but the
 * secret never depends on it: an unseen placeholder is simply not
 * replaced.
 *
 * Secrets live in OpenSSL's secure heap when the broker set one up, are
 * wiped on free, and never appear in an error message.
 */

#include <errno.h>
#include <limits.h>
#include <string.h>

#include <openssl/crypto.h>

#include "broker/creds/creds_internal.h"
#include "common/text.h"
#include "broker/http.h"
#include "policy/policy.h"

/* ---- planning ------------------------------------------------------------ */

static const char *const verdict_reason[] = {
	[CREDS_FORWARD] = "",
	[CREDS_OUT_OF_SCOPE] = "placeholder-out-of-scope",
	[CREDS_EXPIRED] = "placeholder-expired",
	[CREDS_REVOKED] = "placeholder-revoked",
	[CREDS_UNKNOWN] = "placeholder-unknown",
	[CREDS_PLAINTEXT] = "placeholder-plaintext",
	[CREDS_TOO_MANY] = "too-many-placeholders",
};
_Static_assert(sizeof(verdict_reason) / sizeof(verdict_reason[0]) == CREDS_VERDICT_COUNT,
	       "a reason for every verdict");

const char *creds_verdict_reason(enum creds_verdict v)
{
	return (unsigned)v < CREDS_VERDICT_COUNT ? verdict_reason[v] : "unknown";
}

struct planner {
	struct creds_table *t;
	const struct policy *p;
	const char *host;
	const struct http_request *req;
	uint64_t now;
	unsigned flags;
	struct creds_plan *plan;
	enum creds_verdict ph_verdict[CREDS_MAX_FOUND]; /* if used in scope */
};

static int policy_index(const struct policy *p, const char *name)
{
	size_t i, n = policy_credential_count(p);

	for (i = 0; i < n && i < INT_MAX; i++)
		if (strcmp(policy_credential_get(p, i)->name, name) == 0)
			return (int)i;
	return -1;
}

static void refuse(struct planner *x, enum creds_verdict v, int cred)
{
	if (x->plan->verdict != CREDS_FORWARD)
		return;
	x->plan->verdict = v;
	x->plan->cred = cred;
}

/* May @c's placeholder be in (and be replaced in) header @name? */
bool creds_carries(const struct policy_credential *c, struct http_slice name)
{
	size_t i;

	for (i = 0; i < c->n_placeholder_headers; i++)
		if (creds_slice_is(name, c->placeholder_headers[i]))
			return true;
	return false;
}

/* One placeholder occurrence; @in_header is the header whose value holds
 * it, or NULL for a place where it never goes (the method, the target,
 * the authority, a header name). */
static void occurrence(struct planner *x, const char *ph, const struct http_slice *in_header)
{
	struct creds_plan *plan = x->plan;
	char name[CREDS_NAME_MAX + 1];
	const struct policy_credential *c;
	size_t k;
	int idx;

	if (plan->verdict != CREDS_FORWARD)
		return;
	for (k = 0; k < plan->nfound; k++)
		if (memcmp(plan->found[k].ph, ph, CREDS_PLACEHOLDER_LEN) == 0)
			break;
	if (k == plan->nfound) {
		if (k == CREDS_MAX_FOUND) {
			refuse(x, CREDS_TOO_MANY, -1);
			return;
		}
		memcpy(plan->found[k].ph, ph, CREDS_PLACEHOLDER_LEN);
		plan->found[k].ph[CREDS_PLACEHOLDER_LEN] = '\0';
		plan->found[k].cred = -1;
		plan->found[k].state = creds_table_lookup(x->t, ph, x->now, name);
		idx = -1;
		if (plan->found[k].state != CREDS_PH_UNKNOWN) {
			idx = policy_index(x->p, name);
			/* Dropped from the policy by a reload: as revoked. */
			if (idx < 0)
				plan->found[k].state = CREDS_PH_REVOKED;
		}
		plan->found[k].cred = idx;
		plan->nfound++;

		switch (plan->found[k].state) {
		case CREDS_PH_UNKNOWN:
			x->ph_verdict[k] = CREDS_UNKNOWN;
			break;
		case CREDS_PH_EXPIRED:
			x->ph_verdict[k] = CREDS_EXPIRED;
			break;
		case CREDS_PH_REVOKED:
			x->ph_verdict[k] = CREDS_REVOKED;
			break;
		case CREDS_PH_VALID:
			c = policy_credential_get(x->p, (size_t)idx);
			if (!creds_in_scope(c, x->host, NULL, x->req))
				x->ph_verdict[k] = CREDS_OUT_OF_SCOPE;
			else if ((x->flags & CREDS_PLAN_PLAINTEXT) && !c->plaintext_allow)
				x->ph_verdict[k] = CREDS_PLAINTEXT;
			else
				x->ph_verdict[k] = CREDS_FORWARD;
			break;
		}
	}
	/* Valid and in scope, but only where its credential says: anywhere
	 * else (the path, the query, another header) an origin that
	 * reflects the request would hand the secret back. */
	if (x->ph_verdict[k] != CREDS_FORWARD)
		refuse(x, x->ph_verdict[k], plan->found[k].cred);
	else if (!in_header ||
		 !creds_carries(policy_credential_get(x->p, (size_t)plan->found[k].cred),
				*in_header))
		refuse(x, CREDS_OUT_OF_SCOPE, plan->found[k].cred);
}

static void scan(struct planner *x, const char *s, size_t len, const struct http_slice *ok)
{
	const char *p;
	size_t off;

	while (x->plan->verdict == CREDS_FORWARD && (p = creds_find_placeholder(s, len, &off))) {
		occurrence(x, p, ok);
		s += off + CREDS_PLACEHOLDER_LEN;
		len -= off + CREDS_PLACEHOLDER_LEN;
	}
}

/*
 * "Basic" SP+ token68, decoded into @out.  Return: decoded length, or -1
 * when @v is not a decodable Basic credential of at most CREDS_BASIC_MAX bytes.
 */
int creds_basic_decode(struct http_slice v, unsigned char *out)
{
	size_t i = 5;
	int n;

	if (v.len < 7 || !text_eq_ci(v.ptr, 5, "Basic", 5) || (v.ptr[5] != ' ' && v.ptr[5] != '\t'))
		return -1;
	while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == '\t'))
		i++;
	n = creds_base64_decode(v.ptr + i, v.len - i, out, CREDS_BASIC_MAX);
	return n < 0 ? -1 : n;
}

int creds_plan_request(struct creds_table *t, const struct policy *p, const char *host,
		       const struct http_request *req, uint64_t now, unsigned flags,
		       struct creds_plan *plan)
{
	struct planner x = { .t = t, .p = p, .req = req, .now = now, .flags = flags, .plan = plan };
	unsigned char basic[CREDS_BASIC_MAX];
	bool basic_used = false; /* 4 KiB to wipe: only once written to */
	size_t i, k, n;
	int bl;

	if (!plan)
		return -EINVAL;
	memset(plan, 0, sizeof(*plan));
	plan->cred = -1;
	plan->plaintext_withheld = -1;
	plan->expired_withheld = -1;
	if (!t || !p || !req || (req->form != HTTP_FORM_ORIGIN && req->form != HTTP_FORM_ABSOLUTE))
		return -EINVAL;
	if (!host)
		host = req->has_authority ? req->authority.host : "";
	x.host = host;

	scan(&x, req->method.ptr, req->method.len, NULL);
	if (req->has_authority)
		scan(&x, req->authority.host, req->authority.host_len, NULL);
	scan(&x, host, strlen(host), NULL);
	scan(&x, req->path.ptr, req->path.len, NULL);
	if (req->has_query)
		scan(&x, req->query.ptr, req->query.len, NULL);
	for (i = 0; i < req->nheaders; i++) {
		const struct http_header *h = &req->headers[i];

		scan(&x, h->name.ptr, h->name.len, NULL);
		/* Host never carries one (the policy refuses it as a
		 * placeholder header; this says so again). */
		scan(&x, h->value.ptr, h->value.len, creds_is_host(h->name) ? NULL : &h->name);
		if (creds_is_authorization(h->name)) {
			basic_used = true;
			bl = creds_basic_decode(h->value, basic);
			if (bl > 0)
				scan(&x, (const char *)basic, (size_t)bl, &h->name);
		}
	}
	if (basic_used)
		OPENSSL_cleanse(basic, sizeof(basic));
	if (plan->verdict != CREDS_FORWARD) {
		plan->nuse = 0;
		return 0;
	}

	/* Credentials to apply, in policy order. */
	n = policy_credential_count(p);
	for (i = 0; i < n && i < INT_MAX; i++) {
		const struct policy_credential *c = policy_credential_get(p, i);
		bool inject = false, has_ph = false;

		for (k = 0; k < plan->nfound; k++)
			if (plan->found[k].cred == (int)i)
				has_ph = true;
		if (c->inject_header && creds_in_scope(c, host, NULL, req)) {
			inject = true;
			if ((flags & CREDS_PLAN_PLAINTEXT) && !c->plaintext_allow) {
				inject = false;
				if (plan->plaintext_withheld < 0)
					plan->plaintext_withheld = (int)i;
			} else if (creds_table_grant_state(t, c->name, now, NULL) !=
				   CREDS_PH_VALID) {
				/* Its ttl in this sandbox is over (or it was
				 * never given to it): the ttl bounds the
				 * injection, not only the placeholder. */
				inject = false;
				if (plan->expired_withheld < 0)
					plan->expired_withheld = (int)i;
			}
		}
		if (!inject && !has_ph)
			continue;
		if (plan->nuse == CREDS_MAX_USES) {
			refuse(&x, CREDS_TOO_MANY, (int)i);
			plan->nuse = 0;
			return 0;
		}
		plan->use[plan->nuse] = (int)i;
		plan->inject[plan->nuse] = inject;
		plan->nuse++;
	}
	return 0;
}
