// SPDX-License-Identifier: MIT
/* libFuzzer target: request head -> placeholder detection, scope decision,
 * rewrite and upstream head, with a fixed policy and placeholder table;
 * and the OAuth2 token-response parser. */

/*
 * Input: one flag byte, then the bytes.
 *   flags & 0x80: the bytes are a token endpoint's JSON answer.
 *   otherwise:    the bytes are a request head; bit 0 marks it plaintext,
 *                 bits 1-2 pick the rewrite buffer size (small ones reach
 *                 -ENOSPC), bits 3-4 the output size.
 *
 * Invariants: a secret appears in the upstream head only if the plan used
 * its credential (or the client sent those bytes itself), and never in
 * the request line; a refused plan uses nothing; no placeholder survives
 * into a forwarded head; the head parses again; buffers are wiped on
 * failure.
 */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker/creds/creds_internal.h"
#include "broker/http.h"
#include "policy/policy.h"

#define NOW 1700000000ULL

static const char policy_yaml[] =
	"version: 1\n"
	"egress:\n"
	"  allow:\n"
	"    - host: api.github.com\n"
	"    - host: \"*.example.com\"\n"
	"    - host: example.com\n"
	"    - host: plain.example.net\n"
	"credentials:\n"
	"  - name: github\n"
	"    source: { env: FUZZ_GH }\n"
	"    inject: { header: Authorization, value: \"Bearer {secret}\" }\n"
	"    scope: { hosts: [api.github.com], methods: [GET, POST], paths: [\"/repos/acme/*\"] }\n"
	"    placeholder: GITHUB_TOKEN\n"
	"  - name: wild\n"
	"    source: { env: FUZZ_WILD }\n"
	"    scope: { hosts: [\"*.example.com\"], paths: [\"/api/*\", \"/bot*\"] }\n"
	"    placeholder: WILD_TOKEN\n"
	"    placeholder_headers: [X-Token, Authorization, Cookie]\n"
	"  - name: plain\n"
	"    source: { env: FUZZ_PLAIN }\n"
	"    inject: { header: X-Api-Key, value: \"k={secret}\" }\n"
	"    scope: { hosts: [plain.example.net, \"*.example.com\"] }\n"
	"    placeholder: PLAIN_TOKEN\n"
	"    plaintext: allow\n"
	"  - name: other\n"
	"    source: { env: FUZZ_OTHER }\n"
	"    inject: { header: authorization, value: \"token {secret}\" }\n"
	"    scope: { hosts: [api.github.com] }\n";

/* Placeholders the seeds carry. */
#define PH_GH "sluice-ph-00112233445566778899aabbccddeeff"
#define PH_WILD "sluice-ph-ffeeddccbbaa99887766554433221100"
#define PH_EXPIRED "sluice-ph-0123456789abcdef0123456789abcdef"
#define PH_REVOKED "sluice-ph-fedcba9876543210fedcba9876543210"
#define PH_PLAIN "sluice-ph-a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0"

#define NCRED 4
static const char *const secret_text[NCRED] = {
	"GHSECRETq7",
	"W/ld+SECRETz9",
	"PLAINSECRETk3",
	"OTHERSECRETx5",
};
/* How each would appear percent-encoded in a path or query (where it
 * must never go). */
static const char *const secret_pct[NCRED] = {
	"GHSECRETq7",
	"W%2Fld%2BSECRETz9",
	"PLAINSECRETk3",
	"OTHERSECRETx5",
};

static struct policy *pol;
static struct creds_table *table;
static struct creds_secret sec[NCRED];
static const struct creds_secret *secrets[NCRED];
static int idx[NCRED]; /* policy index of secret_text[i]'s credential */

static void init(void)
{
	static const char *const names[NCRED] = { "github", "wild", "plain", "other" };
	struct policy_error err;
	size_t i, j;

	if (policy_load_buffer("fuzz.yaml", policy_yaml, sizeof(policy_yaml) - 1, &pol, &err) < 0)
		abort();
	if (policy_credential_count(pol) != NCRED)
		abort();
	for (i = 0; i < NCRED; i++) {
		for (j = 0; j < NCRED; j++)
			if (strcmp(policy_credential_get(pol, j)->name, names[i]) == 0)
				idx[i] = (int)j;
		if (creds_secret_set(&sec[i], secret_text[i], strlen(secret_text[i])) < 0)
			abort();
		secrets[idx[i]] = &sec[i];
	}
	table = creds_table_new();
	if (!table || creds_table_insert(table, PH_GH, "github", 0) < 0 ||
	    creds_table_insert(table, PH_WILD, "wild", NOW + 3600) < 0 ||
	    creds_table_insert(table, PH_EXPIRED, "wild", NOW - 1) < 0 ||
	    creds_table_insert(table, PH_PLAIN, "plain", 0) < 0 ||
	    creds_table_insert(table, PH_REVOKED, "other", 0) < 0 ||
	    creds_table_revoke(table, "other") != 1)
		abort();
	/* Given to the sandbox (injected while their ttl runs); other's ttl
	 * is over, so it is never injected. */
	for (i = 0; i < NCRED; i++)
		if (creds_table_grant(table, names[i], i == 3 ? NOW : 0) < 0)
			abort();
}

static bool plan_uses(const struct creds_plan *plan, int cred)
{
	size_t i;

	for (i = 0; i < plan->nuse; i++)
		if (plan->use[i] == cred)
			return true;
	return false;
}

static void check_plan(const struct http_request *req, const struct creds_plan *plan,
		       unsigned flags)
{
	size_t i, k;

	if ((unsigned)plan->verdict >= CREDS_VERDICT_COUNT || plan->nfound > CREDS_MAX_FOUND ||
	    plan->nuse > CREDS_MAX_USES)
		abort();
	if (plan->cred < -1 || plan->cred >= NCRED)
		abort();
	if (plan->verdict != CREDS_FORWARD) {
		if (plan->nuse != 0)
			abort();
		return;
	}
	/* Forwarded: every placeholder valid, its credential in scope and
	 * in use. */
	for (k = 0; k < plan->nfound; k++) {
		const struct policy_credential *c;

		if (plan->found[k].state != CREDS_PH_VALID || plan->found[k].cred < 0 ||
		    !plan_uses(plan, plan->found[k].cred))
			abort();
		c = policy_credential_get(pol, (size_t)plan->found[k].cred);
		if (!creds_in_scope(c, NULL, NULL, req))
			abort();
		if ((flags & CREDS_PLAN_PLAINTEXT) && !c->plaintext_allow)
			abort();
	}
	for (i = 0; i < plan->nuse; i++) {
		const struct policy_credential *c =
			policy_credential_get(pol, (size_t)plan->use[i]);

		if (!creds_in_scope(c, NULL, NULL, req))
			abort();
		if (plan->inject[i] &&
		    (!c->inject_header || ((flags & CREDS_PLAN_PLAINTEXT) && !c->plaintext_allow) ||
		     creds_table_grant_state(table, c->name, NOW, NULL) != CREDS_PH_VALID))
			abort();
		if (i && plan->use[i] <= plan->use[i - 1])
			abort();
	}
}

static bool all_zero(const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void fuzz_head(const uint8_t *data, size_t size, unsigned flags)
{
	static const size_t buf_sizes[] = { 16, 200, 4096, 65536 };
	static const size_t out_sizes[] = { 64, 512, 8192, 70000 };
	static struct http_request req, again;
	static struct creds_rewrite rw;
	static char buf[65536], out[70000];
	struct creds_plan plan;
	unsigned pflags = (flags & 1) ? CREDS_PLAN_PLAINTEXT : 0;
	size_t blen = buf_sizes[(flags >> 1) & 3], olen = out_sizes[(flags >> 3) & 3];
	int r, n, i;

	r = http_parse_request((const char *)data, size, HTTP_DEFAULT_MAX_HEAD, &req);
	if (r <= 0)
		return;
	r = creds_plan_request(table, pol, NULL, &req, NOW, pflags, &plan);
	if (req.form == HTTP_FORM_AUTHORITY) {
		if (r != -EINVAL)
			abort();
		return;
	}
	if (r != 0)
		abort();
	check_plan(&req, &plan, pflags);
	if (plan.verdict != CREDS_FORWARD) {
		/* A refused plan cannot be applied. */
		if (creds_rewrite_request(&plan, pol, secrets, &req, buf, blen, &rw) != -EINVAL)
			abort();
		return;
	}

	r = creds_rewrite_request(&plan, pol, secrets, &req, buf, blen, &rw);
	if (r == -ENOSPC) {
		if (!all_zero(buf, blen))
			abort();
		return;
	}
	if (r != 0 || rw.nset > CREDS_MAX_SET || rw.len > blen)
		abort();

	n = creds_write_request_head(&rw, &req, out, olen);
	creds_rewrite_wipe(&rw);
	if (!all_zero(buf, blen))
		abort();
	if (n == -ENOSPC) {
		if (!all_zero(out, olen))
			abort();
		return;
	}
	if (n < 0) {
		/* Only a request with no host to write is refused. */
		if (n != -EINVAL || req.has_authority)
			abort();
		return;
	}
	if ((size_t)n > olen)
		abort();

	/* The secret only where its credential was used. */
	for (i = 0; i < NCRED; i++) {
		bool in_out = memmem(out, (size_t)n, secret_text[i], strlen(secret_text[i])) ||
			      memmem(out, (size_t)n, secret_pct[i], strlen(secret_pct[i]));
		bool in_in = memmem(data, size, secret_text[i], strlen(secret_text[i])) ||
			     memmem(data, size, secret_pct[i], strlen(secret_pct[i]));

		const char *eol = memchr(out, '\n', (size_t)n);
		size_t line = eol ? (size_t)(eol - out) : (size_t)n;

		if (in_out && !plan_uses(&plan, idx[i]) && !in_in)
			abort();
		/* Never in the target, where an origin may reflect it. */
		if (!in_in && (memmem(out, line, secret_text[i], strlen(secret_text[i])) ||
			       memmem(out, line, secret_pct[i], strlen(secret_pct[i]))))
			abort();
	}
	/* Every placeholder was replaced or dropped. */
	if (creds_find_placeholder(out, (size_t)n, NULL))
		abort();
	/* github's injection wins Authorization over other's. */
	for (i = 0; i < (int)plan.nuse; i++)
		if (plan.use[i] == idx[0] && plan.inject[i] &&
		    !memmem(out, (size_t)n, "\r\nAuthorization: Bearer GHSECRETq7\r\n", 36))
			abort();

	r = http_parse_request(out, (size_t)n, (size_t)n, &again);
	if (r < 0 && again.error && strcmp(again.error, "too-many-headers") == 0)
		goto done;
	if (r != n || again.method_id != req.method_id || again.form != HTTP_FORM_ORIGIN)
		abort();
	if (strcmp(again.authority.host, req.authority.host) != 0)
		abort();
	/* An injected Authorization replaced the client's: one line. */
	for (i = 0; i < (int)plan.nuse; i++) {
		const struct policy_credential *c = policy_credential_get(pol, (size_t)plan.use[i]);
		size_t a = 0, h;

		if (!plan.inject[i] || strcasecmp(c->inject_header, "Authorization"))
			continue;
		for (h = 0; h < again.nheaders; h++)
			if (again.headers[h].name.len == 13 &&
			    strncasecmp(again.headers[h].name.ptr, "Authorization", 13) == 0)
				a++;
		if (a != 1)
			abort();
	}
done:
	explicit_bzero(out, (size_t)n);
}

static void fuzz_json(const uint8_t *data, size_t size)
{
	struct creds_secret tok;
	uint64_t exp = 1;
	size_t i;
	int r;

	r = creds_oauth2_parse_response((const char *)data, size, &tok, &exp);
	if (r == 0) {
		if (!tok.buf || tok.len == 0 || tok.len > size || exp > CREDS_OAUTH2_EXPIRES_MAX)
			abort();
		for (i = 0; i < tok.len; i++)
			if (tok.buf[i] < 0x21 || tok.buf[i] > 0x7e)
				abort();
		creds_secret_free(&tok);
		return;
	}
	if (tok.buf || exp != 0)
		abort();
	if (r != -EINVAL && r != -EACCES && r != -ERANGE && r != -EPROTO && r != -ENOMEM)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	unsigned flags;

	if (!ready) {
		init();
		ready = true;
	}
	if (size < 1)
		return 0;
	flags = data[0];
	if (flags & 0x80)
		fuzz_json(data + 1, size - 1);
	else
		fuzz_head(data + 1, size - 1, flags);
	return 0;
}
