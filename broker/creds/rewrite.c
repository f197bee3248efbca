// SPDX-License-Identifier: MIT
/* Rewriting one request: the header values a plan's secrets give, and the
 * head written with them; the value of an injected header.  The two steps
 * of a request and the property they keep are described in plan.c. */

#include <errno.h>
#include <limits.h>
#include <string.h>

#include <openssl/crypto.h>

#include "broker/creds/creds_internal.h"
#include "common/obuf.h"
#include "common/text.h"
#include "broker/http.h"
#include "policy/policy.h"

/* ---- rewriting ----------------------------------------------------------- */

struct rewriter {
	const struct creds_plan *plan;
	const struct policy *p;
	const struct creds_secret *const *secrets;
	struct obuf w;
	int err;
};

/* The secret for a placeholder the plan found in header @name, or NULL
 * (rw->err set). */
static const struct creds_secret *ph_secret(struct rewriter *r, const char *ph,
					    struct http_slice name)
{
	const struct creds_plan *plan = r->plan;
	const struct creds_secret *s;
	size_t k, u;
	int cred = -1;

	for (k = 0; k < plan->nfound; k++)
		if (memcmp(plan->found[k].ph, ph, CREDS_PLACEHOLDER_LEN) == 0)
			cred = plan->found[k].cred;
	for (u = 0; cred >= 0 && u < plan->nuse; u++)
		if (plan->use[u] == cred)
			break;
	/* The plan checked where it is; checked again, as the one thing
	 * that must never go wrong here. */
	if (cred < 0 || u == plan->nuse ||
	    !creds_carries(policy_credential_get(r->p, (size_t)cred), name)) {
		r->err = -EINVAL;
		return NULL;
	}
	s = r->secrets[cred];
	if (!s || !s->buf || !s->len) {
		r->err = -ENOKEY;
		return NULL;
	}
	return s;
}

/* Appends @s, from a value of header @name, with each placeholder
 * replaced by its secret. */
static void put_subst(struct rewriter *r, const char *s, size_t len, struct http_slice name)
{
	const struct creds_secret *sec;
	const char *p;
	size_t off;

	while (!r->err && (p = creds_find_placeholder(s, len, &off))) {
		obuf_put(&r->w, s, off);
		sec = ph_secret(r, p, name);
		if (!sec)
			return;
		obuf_put(&r->w, sec->buf, sec->len);
		s = p + CREDS_PLACEHOLDER_LEN;
		len -= off + CREDS_PLACEHOLDER_LEN;
	}
	obuf_put(&r->w, s, len);
}

static bool has_placeholder(struct http_slice v)
{
	return creds_find_placeholder(v.ptr, v.len, NULL) != NULL;
}

/* Whether a Connection header of @req lists @name. */
static bool connection_lists(const struct http_request *req, struct http_slice name)
{
	size_t i;

	for (i = 0; i < req->nheaders; i++) {
		const char *p, *end;
		struct http_slice item;

		if (!creds_slice_is(req->headers[i].name, "Connection"))
			continue;
		p = req->headers[i].value.ptr;
		end = p + req->headers[i].value.len;
		while (http_list_next(&p, end, &item))
			if (text_eq_ci(item.ptr, item.len, name.ptr, name.len))
				return true;
	}
	return false;
}

/* Headers the writer drops or rebuilds itself. */
static bool header_untouchable(const struct http_request *req, struct http_slice name)
{
	return creds_is_host(name) || http_is_hop_by_hop(name.ptr, name.len) ||
	       connection_lists(req, name);
}

/*
 * Appends the rewritten value of one client header: a Basic credential
 * with a placeholder inside is decoded, substituted and re-encoded in
 * place at the end of the buffer.
 */
static void put_header_value(struct rewriter *r, const struct http_header *h)
{
	unsigned char basic[CREDS_BASIC_MAX];
	size_t start, plain_len, enc_len;
	int bl = -1, n;

	if (creds_is_authorization(h->name) && !has_placeholder(h->value))
		bl = creds_basic_decode(h->value, basic);
	if (bl <= 0 || !creds_find_placeholder((const char *)basic, (size_t)bl, NULL)) {
		OPENSSL_cleanse(basic, sizeof(basic));
		put_subst(r, h->value.ptr, h->value.len, h->name);
		return;
	}
	/* user:pass with secrets, then its base64 after it, then moved down. */
	start = r->w.len;
	put_subst(r, (const char *)basic, (size_t)bl, h->name);
	OPENSSL_cleanse(basic, sizeof(basic));
	if (r->err || r->w.full)
		return;
	plain_len = r->w.len - start;
	obuf_puts(&r->w, "Basic ");
	if (r->w.full)
		return;
	n = creds_base64_encode(r->w.p + start, plain_len, false, r->w.p + r->w.len,
				r->w.cap - r->w.len);
	if (n < 0) {
		r->w.full = true;
		return;
	}
	enc_len = strlen("Basic ") + (size_t)n;
	memmove(r->w.p + start, r->w.p + start + plain_len, enc_len);
	OPENSSL_cleanse(r->w.p + start + enc_len, plain_len + 1);
	r->w.len = start + enc_len;
}

static bool needs_rewrite(const struct http_header *h)
{
	unsigned char basic[CREDS_BASIC_MAX];
	bool ret = has_placeholder(h->value);
	int bl;

	if (!ret && creds_is_authorization(h->name)) {
		bl = creds_basic_decode(h->value, basic);
		ret = bl > 0 && creds_find_placeholder((const char *)basic, (size_t)bl, NULL);
		OPENSSL_cleanse(basic, sizeof(basic));
	}
	return ret;
}

static bool set_has(const struct creds_rewrite *rw, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < rw->nset; i++)
		if (text_eq_ci(rw->set[i].name, strlen(rw->set[i].name), name, len))
			return true;
	return false;
}

/* Names the head writer refuses in a set, plus Host: a credential there
 * would reach the upstream as its host name. */
static bool bad_inject_name(const char *name)
{
	size_t len = strlen(name);

	return http_is_hop_by_hop(name, len) || text_eq_ci(name, len, "Host", 4) ||
	       text_eq_ci(name, len, "Content-Length", 14);
}

int creds_rewrite_request(const struct creds_plan *plan, const struct policy *p,
			  const struct creds_secret *const *secrets, const struct http_request *req,
			  char *buf, size_t buflen, struct creds_rewrite *rw)
{
	struct rewriter r = {
		.plan = plan, .p = p, .secrets = secrets, .w = { .p = buf, .cap = buflen }
	};
	size_t i, j, u, start;
	int ret = -EINVAL, n;

	if (!rw)
		return -EINVAL;
	memset(rw, 0, sizeof(*rw));
	rw->buf = buf;
	rw->cap = buflen;
	if (!plan || !p || !secrets || !req || !buf || plan->verdict != CREDS_FORWARD)
		return -EINVAL;

	/* 1. Injected headers; the lower policy index wins a name. */
	for (u = 0; u < plan->nuse; u++) {
		const struct policy_credential *c;
		const struct creds_secret *s;

		if (!plan->inject[u])
			continue;
		c = policy_credential_get(p, (size_t)plan->use[u]);
		if (!c || !c->inject_header)
			goto fail;
		if (bad_inject_name(c->inject_header))
			goto fail;
		if (set_has(rw, c->inject_header, strlen(c->inject_header)))
			continue;
		s = secrets[plan->use[u]];
		if (!s || !s->buf || !s->len) {
			ret = -ENOKEY;
			goto fail;
		}
		if (r.w.full)
			break;
		n = creds_build_injection(c, s, r.w.p + r.w.len, r.w.cap - r.w.len);
		if (n < 0) {
			r.w.full = true;
			break;
		}
		rw->set[rw->nset].name = c->inject_header;
		rw->set[rw->nset].value = r.w.p + r.w.len;
		rw->set[rw->nset].value_len = (size_t)n;
		rw->nset++;
		r.w.len += (size_t)n + 1; /* keep the NUL: harmless, simple */
	}

	/* 2. Client headers with placeholders, one line per name. */
	for (i = 0; i < req->nheaders && !r.err && !r.w.full; i++) {
		const struct http_header *h = &req->headers[i];
		const char *name;
		bool first = true;

		if (header_untouchable(req, h->name) || !needs_rewrite(h) ||
		    set_has(rw, h->name.ptr, h->name.len))
			continue;
		if (rw->nset == CREDS_MAX_SET)
			goto fail;
		/* The set wants a NUL-terminated name. */
		name = r.w.p + r.w.len;
		obuf_put(&r.w, h->name.ptr, h->name.len);
		obuf_putc(&r.w, '\0');
		start = r.w.len;
		/* Every line of that name, earlier ones too: they all make
		 * the one line the writer sends. */
		for (j = 0; j < req->nheaders && !r.err; j++) {
			const struct http_header *o = &req->headers[j];

			if (!text_eq_ci(o->name.ptr, o->name.len, h->name.ptr, h->name.len))
				continue;
			if (!first)
				obuf_puts(&r.w, creds_slice_is(h->name, "Cookie") ? "; " : ", ");
			first = false;
			put_header_value(&r, o);
		}
		if (r.err || r.w.full)
			break;
		rw->set[rw->nset].name = name;
		rw->set[rw->nset].value = r.w.p + start;
		rw->set[rw->nset].value_len = r.w.len - start;
		rw->nset++;
	}

	/* 3. Never the target: a plan that forwards has none there. */
	if (has_placeholder(req->path) || (req->has_query && has_placeholder(req->query)))
		r.err = -EINVAL;

	if (r.err) {
		ret = r.err;
		goto fail;
	}
	if (r.w.full) {
		ret = -ENOSPC;
		goto fail;
	}
	rw->len = r.w.len;
	return 0;
fail:
	OPENSSL_cleanse(buf, buflen);
	memset(rw, 0, sizeof(*rw));
	rw->buf = buf;
	rw->cap = buflen;
	return ret;
}

int creds_write_request_head(const struct creds_rewrite *rw, const struct http_request *req,
			     char *out, size_t outlen)
{
	if (!rw || !req)
		return -EINVAL;
	return http_write_request_head(req, out, outlen, rw->set, rw->nset);
}

void creds_rewrite_wipe(struct creds_rewrite *rw)
{
	if (!rw)
		return;
	if (rw->buf && rw->cap)
		OPENSSL_cleanse(rw->buf, rw->cap);
	rw->nset = 0;
	rw->len = 0;
}

/* ---- the injected header ------------------------------------------------- */

int creds_build_injection(const struct policy_credential *c, const struct creds_secret *s,
			  char *out, size_t outlen)
{
	struct obuf w = { .p = out, .cap = outlen ? outlen - 1 : 0 };
	const char *t, *hit;

	if (!c || !c->inject_header || !c->inject_value || !s || !s->buf || !out || !outlen)
		return -EINVAL;
	t = c->inject_value;
	while ((hit = strstr(t, "{secret}"))) {
		obuf_put(&w, t, (size_t)(hit - t));
		obuf_put(&w, s->buf, s->len);
		t = hit + strlen("{secret}");
	}
	obuf_puts(&w, t);
	if (w.full || w.len > INT_MAX) {
		OPENSSL_cleanse(out, outlen);
		return -ENOSPC;
	}
	out[w.len] = '\0';
	return (int)w.len;
}
