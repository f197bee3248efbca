// SPDX-License-Identifier: MIT
/* Scopes: is a request inside a credential's hosts, methods and paths? */

#include <string.h>

#include "broker/creds/creds_internal.h"
#include "common/text.h"
#include "broker/http.h"
#include "policy/policy.h"

/* ---- scopes -------------------------------------------------------------- */

bool creds_host_match(const char *pattern, const char *host, size_t len)
{
	size_t pl;
	bool wild;

	if (!pattern || !host)
		return false;
	pl = strlen(pattern);
	wild = pl >= 2 && pattern[0] == '*' && pattern[1] == '.';
	if (wild) {
		pattern += 2;
		pl -= 2;
	}
	if (pl && pattern[pl - 1] == '.')
		pl--;
	if (len && host[len - 1] == '.')
		len--;
	if (pl == 0 || len == 0)
		return false;
	if (!wild)
		return text_eq_ci(host, len, pattern, pl);
	/* At least one label before ".suffix": the apex is not a subdomain. */
	return len > pl + 1 && host[len - pl - 1] == '.' &&
	       text_eq_ci(host + len - pl, pl, pattern, pl);
}

bool creds_path_match(const char *glob, const char *path, size_t len)
{
	const char *g = glob, *star = NULL;
	size_t i = 0, mark = 0;

	if (!glob || !path)
		return false;
	/* Greedy with one backtrack point: enough when '*' is the only
	 * wildcard, and linear in practice, O(len * strlen(glob)) at worst. */
	while (i < len) {
		if (*g == '*') {
			while (*g == '*')
				g++;
			star = g;
			mark = i;
			continue;
		}
		if (*g && *g == path[i]) {
			g++;
			i++;
			continue;
		}
		if (star) {
			g = star;
			i = ++mark;
			continue;
		}
		return false;
	}
	while (*g == '*')
		g++;
	return *g == '\0';
}

/*
 * Could an origin, or a front end before it, read @path as a path other
 * than the one a glob was compared with?  Raw comparison already fails
 * closed on anything encoded inside the part a glob names literally; what
 * is left is the part a '*' covers, where "/api/..;/admin",
 * "/api/%252e%252e/admin" or "/api/..%00/admin" matches "/api/" followed
 * by '*' and a server reads /admin.  So, anywhere in the path: no ';'
 * (servers that strip path parameters), no '\' (Windows separators), no
 * empty segment ("//", merged by many), no segment made only of dots and
 * spaces (".", "..", and "..." or "..%20", which Windows trims into ".."
 * or nothing), and no percent-escape for a byte a server could decode
 * into another path: '.', '/', '\', '%' (decoded twice), ';', '?', '#',
 * controls (NUL cuts, TAB and others are trimmed) and every non-ASCII
 * byte (overlong UTF-8 such as %c0%ae, and characters that best-fit or
 * NFKC mappings fold into '.' or '/').  Strict on purpose: a legitimate
 * path this refuses only goes without the credential.
 */
static bool path_scope_safe(const char *p, size_t len)
{
	size_t i, seg_start = 0;
	bool trimmable = true; /* the segment so far is dots and spaces */

	if (len == 0 || p[0] != '/')
		return false;
	for (i = 1; i <= len; i++) {
		unsigned char ch;

		if (i == len || p[i] == '/') {
			/* seg_start is the '/' before the segment: an empty
			 * one is refused but for a trailing '/'. */
			if (i == seg_start + 1 ? i < len : trimmable)
				return false;
			seg_start = i;
			trimmable = true;
			continue;
		}
		ch = (unsigned char)p[i];
		if (ch == '%') {
			int hi, lo;

			if (len - i < 3)
				return false;
			hi = creds_hexval(text_lower(p[i + 1]));
			lo = creds_hexval(text_lower(p[i + 2]));
			if (hi < 0 || lo < 0)
				return false;
			ch = (unsigned char)(hi << 4 | lo);
			i += 2;
			if (ch < 0x20 || ch >= 0x7f || strchr("./\\%;?#", ch))
				return false;
			if (ch != ' ')
				trimmable = false;
			continue;
		}
		if (ch <= 0x20 || ch >= 0x7f || ch == ';' || ch == '\\')
			return false;
		if (ch != '.')
			trimmable = false;
	}
	return true;
}

/* Is @m (@len bytes, compared in upper case) one of @c's methods? */
static bool method_listed(const struct policy_credential *c, const char *m, size_t len)
{
	size_t i, k;

	for (i = 0; i < c->n_methods; i++) {
		const char *w = c->methods[i];

		if (strlen(w) != len)
			continue;
		for (k = 0; k < len; k++)
			if (text_lower(w[k]) != text_lower(m[k]))
				break;
		if (k == len)
			return true;
	}
	return false;
}

/* An override header's name, '_' read as '-' (CGI maps both to one
 * variable): X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override. */
static bool is_override_header(struct http_slice name)
{
	static const char *const names[] = { "x-http-method-override", "x-http-method",
					     "x-method-override" };
	size_t i, k;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *w = names[i];

		if (name.len != strlen(w))
			continue;
		for (k = 0; k < name.len; k++) {
			char ch = text_lower(name.ptr[k]);

			if ((ch == '_' ? '-' : ch) != w[k])
				break;
		}
		if (k == name.len)
			return true;
	}
	return false;
}

/*
 * Percent-decodes @s into @out, '+' as a space, at most @cap bytes (*cut
 * says whether more followed).  A '%' without two hex digits stays as it
 * is, as most decoders leave it.  Return: the decoded length.
 */
static size_t form_decode(const char *s, size_t len, char *out, size_t cap, bool *cut)
{
	size_t i, o = 0;

	*cut = false;
	for (i = 0; i < len; i++) {
		char ch = s[i];

		if (ch == '%' && len - i >= 3 && creds_hexval(text_lower(s[i + 1])) >= 0 &&
		    creds_hexval(text_lower(s[i + 2])) >= 0) {
			ch = (char)(creds_hexval(text_lower(s[i + 1])) << 4 |
				    creds_hexval(text_lower(s[i + 2])));
			i += 2;
		} else if (ch == '+') {
			ch = ' ';
		}
		if (o == cap) {
			*cut = true;
			break;
		}
		out[o++] = ch;
	}
	return o;
}

/*
 * Is a query parameter named @key (raw) a "_method" override?  Read as
 * the most lenient framework would: decoded, ASCII case folded, leading
 * spaces dropped, ' ' and '.' as '_' (PHP's names), an array suffix
 * ("_method[]") allowed.
 */
static bool is_override_param(const char *key, size_t len)
{
	char k[64];
	bool cut;
	size_t n = form_decode(key, len, k, sizeof(k), &cut), i = 0, j;

	while (i < n && k[i] == ' ')
		i++;
	/* Cut before the name could be read: cannot tell, so it counts. */
	if (n - i < 7)
		return cut;
	for (j = 0; j < 7; j++) {
		char ch = text_lower(k[i + j]);

		if (ch == ' ' || ch == '.')
			ch = '_';
		if (ch != "_method"[j])
			return false;
	}
	return n - i == 7 || k[i + 7] == '[';
}

/*
 * Method overrides: origins that honour X-HTTP-Method-Override and its
 * siblings, or a "_method" parameter, do what they name, not what the
 * request line says.  Each one must name a method of the scope too (the
 * origin may honour it or not: both must be in scope); one that does not
 * read as a single method is never in scope.  Only the query is seen: a
 * "_method" in a form body is not (README says so).
 */
static bool overrides_in_scope(const struct policy_credential *c, const struct http_request *req)
{
	size_t i;

	for (i = 0; i < req->nheaders; i++) {
		const struct http_header *h = &req->headers[i];
		const char *v = h->value.ptr;
		size_t vl = h->value.len;

		if (!is_override_header(h->name))
			continue;
		while (vl && (*v == ' ' || *v == '\t')) {
			v++;
			vl--;
		}
		while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		if (!http_is_token(v, vl) || !method_listed(c, v, vl))
			return false;
	}
	if (req->has_query) {
		const char *q = req->query.ptr, *end = q + req->query.len;

		while (q < end) {
			const char *pe = q, *eq;
			char m[32];
			bool cut = false;
			size_t n;

			/* '&', and ';' which some frameworks split on too. */
			while (pe < end && *pe != '&' && *pe != ';')
				pe++;
			eq = memchr(q, '=', (size_t)(pe - q));
			if (is_override_param(q, (size_t)((eq ? eq : pe) - q))) {
				n = eq ? form_decode(eq + 1, (size_t)(pe - eq - 1), m, sizeof(m),
						     &cut)
				       : 0;
				if (cut || !http_is_token(m, n) || !method_listed(c, m, n))
					return false;
			}
			if (pe == end)
				break;
			q = pe + 1;
		}
	}
	return true;
}

bool creds_in_scope(const struct policy_credential *c, const char *host, const char *method,
		    const struct http_request *req)
{
	size_t i, hl;
	bool ok;

	if (!c)
		return false;
	if (!host) {
		if (!req || !req->has_authority)
			return false;
		host = req->authority.host;
	}
	hl = strlen(host);
	ok = false;
	for (i = 0; i < c->n_hosts && !ok; i++)
		ok = creds_host_match(c->hosts[i], host, hl);
	if (!ok)
		return false;

	if (c->n_methods) {
		const char *m = method;
		size_t ml;

		if (m) {
			ml = strlen(m);
		} else {
			if (!req)
				return false;
			m = req->method.ptr;
			ml = req->method.len;
		}
		ok = false;
		for (i = 0; i < c->n_methods && !ok; i++)
			ok = strlen(c->methods[i]) == ml && memcmp(c->methods[i], m, ml) == 0;
		if (!ok || (req && !overrides_in_scope(c, req)))
			return false;
	}

	if (c->n_paths) {
		if (!req || req->path_ambiguous || !path_scope_safe(req->path.ptr, req->path.len))
			return false;
		ok = false;
		for (i = 0; i < c->n_paths && !ok; i++)
			ok = creds_path_match(c->paths[i], req->path.ptr, req->path.len);
		if (!ok)
			return false;
	}
	return true;
}
