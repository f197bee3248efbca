// SPDX-License-Identifier: MIT
/* Credential injection: secrets, placeholders, scopes, request rewriting. */

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
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "broker/creds/creds_internal.h"
#include "common/json.h"
#include "common/obuf.h"
#include "common/text.h"
#include "broker/http.h"
#include "policy/policy.h"

/* Largest decoded Basic credential that is searched for placeholders. */
#define BASIC_MAX 4096

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static bool slice_is(struct http_slice s, const char *lit)
{
	return text_eq_ci(s.ptr, s.len, lit, strlen(lit));
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* ---- secrets ------------------------------------------------------------- */

/* No control character but HTAB: CR, LF or NUL would split a header. */
static bool secret_bytes_ok(const unsigned char *p, size_t len)
{
	size_t i;

	if (len == 0)
		return false;
	for (i = 0; i < len; i++)
		if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
			return false;
	return true;
}

void creds_secret_free(struct creds_secret *s)
{
	if (!s)
		return;
	/* Falls back to OPENSSL_cleanse + free for ordinary-heap memory. */
	if (s->buf)
		OPENSSL_secure_clear_free(s->buf, s->len ? s->len : 1);
	s->buf = NULL;
	s->len = 0;
}

int creds_secret_set(struct creds_secret *s, const void *p, size_t len)
{
	s->buf = NULL;
	s->len = 0;
	if (!p || len > CREDS_SECRET_MAX || !secret_bytes_ok(p, len))
		return -EINVAL;
	/* The ordinary heap when no secure heap is initialised. */
	s->buf = OPENSSL_secure_malloc(len);
	if (!s->buf)
		return -ENOMEM;
	memcpy(s->buf, p, len);
	s->len = len;
	return 0;
}

int creds_file_read(const char *path, struct creds_secret *out, char *err,
		   size_t errlen)
{
	struct stat st;
	unsigned char *b;
	size_t cap, got = 0;
	int fd, ret;

	out->buf = NULL;
	out->len = 0;
	if (!path || path[0] != '/') {
		seterr(err, errlen, "secret file `%s` is not an absolute path",
		       path ? path : "");
		return -EINVAL;
	}
	/* O_NONBLOCK: a FIFO must not hang the broker; O_NOFOLLOW: the last
	 * component may not be a symlink someone swapped in. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		seterr(err, errlen, "secret file `%s`: %s", path,
		       ret == -ELOOP ? "is a symlink (refused)" : strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		seterr(err, errlen, "secret file `%s`: %s", path, strerror(-ret));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		seterr(err, errlen, "secret file `%s` is not a regular file", path);
		goto fail;
	}
	if (st.st_size > CREDS_SECRET_MAX) {
		ret = -EFBIG;
		seterr(err, errlen, "secret file `%s` is larger than %d bytes", path,
		       CREDS_SECRET_MAX);
		goto fail;
	}
	/* One byte more than fstat said, to notice a file that grew. */
	cap = (size_t)st.st_size + 1;
	b = OPENSSL_secure_malloc(cap);
	if (!b) {
		ret = -ENOMEM;
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	while (got < cap) {
		ssize_t r = read(fd, b + got, cap - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			OPENSSL_secure_clear_free(b, cap);
			seterr(err, errlen, "secret file `%s`: %s", path,
			       strerror(-ret));
			goto fail;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got == cap) {
		ret = -EAGAIN;
		OPENSSL_secure_clear_free(b, cap);
		seterr(err, errlen, "secret file `%s` changed while read", path);
		goto fail;
	}
	close(fd);
	/* The allocation may be longer than @got, but nothing was written
	 * past it: wiping @got bytes on free wipes everything read. */
	out->buf = b;
	out->len = got;
	return 0;
fail:
	close(fd);
	return ret;
}

int creds_secret_load(const struct policy_credential *c, struct creds_secret *s,
		     char *err, size_t errlen)
{
	struct creds_secret raw;
	const char *v;
	size_t len;
	int ret;

	s->buf = NULL;
	s->len = 0;
	if (!c || !c->source) {
		seterr(err, errlen, "credential without a source");
		return -EINVAL;
	}
	if (c->source_kind == POLICY_SOURCE_ENV) {
		v = getenv(c->source);
		if (!v) {
			seterr(err, errlen,
			       "credential `%s`: environment variable `%s` is not set",
			       c->name ? c->name : "", c->source);
			return -ENOENT;
		}
		len = strlen(v);
		if (len > CREDS_SECRET_MAX) {
			seterr(err, errlen,
			       "credential `%s`: `%s` is longer than %d bytes",
			       c->name ? c->name : "", c->source, CREDS_SECRET_MAX);
			return -EFBIG;
		}
		ret = creds_secret_set(s, v, len);
		if (ret == -EINVAL)
			seterr(err, errlen,
			       "credential `%s`: `%s` is empty or holds a control character (CR, LF, NUL...)",
			       c->name ? c->name : "", c->source);
		else if (ret < 0)
			seterr(err, errlen, "out of memory");
		return ret;
	}

	ret = creds_file_read(c->source, &raw, err, errlen);
	if (ret < 0)
		return ret;
	len = raw.len;
	if (len && raw.buf[len - 1] == '\n') {
		len--;
		if (len && raw.buf[len - 1] == '\r')
			len--;
	}
	if (len == 0 || !secret_bytes_ok(raw.buf, len)) {
		seterr(err, errlen,
		       "secret file `%s` is empty or holds a control character (CR, LF, NUL...)",
		       c->source);
		ret = -EINVAL;
	} else {
		ret = creds_secret_set(s, raw.buf, len);
		if (ret < 0)
			seterr(err, errlen, "out of memory");
	}
	creds_secret_free(&raw);
	return ret;
}

/* ---- placeholders -------------------------------------------------------- */

int creds_placeholder_new(char out[CREDS_PLACEHOLDER_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[CREDS_PLACEHOLDER_HEX / 2];
	size_t i;

	if (RAND_bytes(r, sizeof(r)) != 1)
		return -EIO;
	memcpy(out, CREDS_PLACEHOLDER_PREFIX, CREDS_PLACEHOLDER_PREFIX_LEN);
	for (i = 0; i < sizeof(r); i++) {
		out[CREDS_PLACEHOLDER_PREFIX_LEN + 2 * i] = hex[r[i] >> 4];
		out[CREDS_PLACEHOLDER_PREFIX_LEN + 2 * i + 1] = hex[r[i] & 15];
	}
	out[CREDS_PLACEHOLDER_LEN] = '\0';
	OPENSSL_cleanse(r, sizeof(r));
	return 0;
}

static bool placeholder_shape(const char *p)
{
	size_t i;

	if (memcmp(p, CREDS_PLACEHOLDER_PREFIX, CREDS_PLACEHOLDER_PREFIX_LEN) != 0)
		return false;
	for (i = CREDS_PLACEHOLDER_PREFIX_LEN; i < CREDS_PLACEHOLDER_LEN; i++)
		if (hexval(p[i]) < 0)
			return false;
	return true;
}

const char *creds_find_placeholder(const char *s, size_t len, size_t *off)
{
	const char *p = s, *end = s + len;

	while (p && (size_t)(end - p) >= CREDS_PLACEHOLDER_LEN) {
		p = memmem(p, (size_t)(end - p), CREDS_PLACEHOLDER_PREFIX,
			   CREDS_PLACEHOLDER_PREFIX_LEN);
		if (!p || (size_t)(end - p) < CREDS_PLACEHOLDER_LEN)
			return NULL;
		if (placeholder_shape(p)) {
			if (off)
				*off = (size_t)(p - s);
			return p;
		}
		p++;
	}
	return NULL;
}

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
			hi = hexval(text_lower(p[i + 1]));
			lo = hexval(text_lower(p[i + 2]));
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
static bool method_listed(const struct policy_credential *c, const char *m,
			  size_t len)
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
	static const char *const names[] = { "x-http-method-override",
					     "x-http-method", "x-method-override" };
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
static size_t form_decode(const char *s, size_t len, char *out, size_t cap,
			  bool *cut)
{
	size_t i, o = 0;

	*cut = false;
	for (i = 0; i < len; i++) {
		char ch = s[i];

		if (ch == '%' && len - i >= 3 && hexval(text_lower(s[i + 1])) >= 0 &&
		    hexval(text_lower(s[i + 2])) >= 0) {
			ch = (char)(hexval(text_lower(s[i + 1])) << 4 |
				    hexval(text_lower(s[i + 2])));
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
static bool overrides_in_scope(const struct policy_credential *c,
			       const struct http_request *req)
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
				n = eq ? form_decode(eq + 1, (size_t)(pe - eq - 1), m,
						     sizeof(m), &cut)
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

bool creds_in_scope(const struct policy_credential *c, const char *host,
		   const char *method, const struct http_request *req)
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
			ok = strlen(c->methods[i]) == ml &&
			     memcmp(c->methods[i], m, ml) == 0;
		if (!ok || (req && !overrides_in_scope(c, req)))
			return false;
	}

	if (c->n_paths) {
		if (!req || req->path_ambiguous ||
		    !path_scope_safe(req->path.ptr, req->path.len))
			return false;
		ok = false;
		for (i = 0; i < c->n_paths && !ok; i++)
			ok = creds_path_match(c->paths[i], req->path.ptr,
					     req->path.len);
		if (!ok)
			return false;
	}
	return true;
}

/* ---- output buffers ------------------------------------------------------ */

static void wput_pct(struct obuf *w, const unsigned char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = s[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~') {
			obuf_putc(w, (char)c);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };

			obuf_put(w, e, 3);
		}
	}
}

int creds_build_injection(const struct policy_credential *c,
			 const struct creds_secret *s, char *out, size_t outlen)
{
	struct obuf w = { .p = out, .cap = outlen ? outlen - 1 : 0 };
	const char *t, *hit;

	if (!c || !c->inject_header || !c->inject_value || !s || !s->buf ||
	    !out || !outlen)
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

/* ---- base64 -------------------------------------------------------------- */

int creds_base64_encode(const void *in, size_t len, bool url, char *out,
		       size_t outlen)
{
	static const char std[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static const char b64url[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char *a = url ? b64url : std;
	const unsigned char *p = in;
	size_t i, need, o = 0;

	if (len > (SIZE_MAX / 4) - 4)
		return -ENOSPC;
	need = url ? (len * 4 + 2) / 3 : (len + 2) / 3 * 4;
	if (!out || need + 1 > outlen || need > INT_MAX)
		return -ENOSPC;
	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = a[(v >> 6) & 63];
		out[o++] = a[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		if (i + 1 < len)
			out[o++] = a[(v >> 6) & 63];
		else if (!url)
			out[o++] = '=';
		if (!url)
			out[o++] = '=';
	}
	out[o] = '\0';
	return (int)o;
}

static int b64val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int creds_base64_decode(const char *in, size_t len, unsigned char *out,
		       size_t outlen)
{
	size_t i, o = 0, pad = 0, rem;
	uint32_t acc = 0;
	unsigned bits = 0;

	if (!in)
		return -EINVAL;
	while (pad < 2 && len > 0 && in[len - 1] == '=') {
		len--;
		pad++;
	}
	rem = len % 4;
	/* One leftover character is never valid; padding, when present,
	 * must make a whole quantum. */
	if (rem == 1 || (pad && (len + pad) % 4))
		return -EINVAL;
	if (len / 4 * 3 + (rem ? rem - 1 : 0) > outlen)
		return -ENOSPC;
	if (len > INT_MAX)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		int v = b64val(in[i]);

		if (v < 0)
			return -EINVAL;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	/* Non-zero leftover bits: a second spelling of the same bytes. */
	if (acc != 0)
		return -EINVAL;
	return (int)o;
}

/* ---- the placeholder table ------------------------------------------------ */

/* Bucket selection: the first two hex digits (8 bits) after the prefix. */
#define TABLE_BUCKETS 256

struct ph_entry {
	char ph[CREDS_PLACEHOLDER_LEN];
	char name[CREDS_NAME_MAX + 1];
	uint64_t expires_at; /* 0: never */
	uint64_t seq;	     /* issue order, for reuse of the oldest */
	bool revoked;
	int32_t next;	     /* bucket chain, -1 ends */
};

/* A credential given to the sandbox, and the end of its ttl there. */
struct grant {
	char name[CREDS_NAME_MAX + 1];
	uint64_t expires_at; /* 0: never */
	bool revoked;
};

struct creds_table {
	pthread_rwlock_t lock;
	struct ph_entry *e;
	size_t n, cap;
	uint64_t seq;
	int32_t head[TABLE_BUCKETS];
	/* Few (one per credential name the sandbox ever had): a list. */
	struct grant *g;
	size_t ng, gcap;
};

static unsigned ph_bucket(const char *ph)
{
	/* Callers checked the shape; the masks keep a bad one in range. */
	return ((unsigned)hexval(ph[CREDS_PLACEHOLDER_PREFIX_LEN]) & 15) << 4 |
	       ((unsigned)hexval(ph[CREDS_PLACEHOLDER_PREFIX_LEN + 1]) & 15);
}

struct creds_table *creds_table_new(void)
{
	struct creds_table *t = calloc(1, sizeof(*t));
	size_t i;

	if (!t)
		return NULL;
	if (pthread_rwlock_init(&t->lock, NULL) != 0) {
		free(t);
		return NULL;
	}
	for (i = 0; i < TABLE_BUCKETS; i++)
		t->head[i] = -1;
	return t;
}

void creds_table_free(struct creds_table *t)
{
	if (!t)
		return;
	if (t->e) {
		/* Placeholders are worthless outside, but they are still the
		 * sandbox's capabilities: leave nothing behind. */
		OPENSSL_cleanse(t->e, t->cap * sizeof(*t->e));
		free(t->e);
	}
	free(t->g);
	pthread_rwlock_destroy(&t->lock);
	free(t);
}

/* Callers hold a lock.  Return: entry index or -1. */
static int32_t table_find(const struct creds_table *t, const char *ph)
{
	int32_t i, found = -1;

	/* Walk the whole chain: its length, not the match position, is
	 * what timing shows. */
	for (i = t->head[ph_bucket(ph)]; i >= 0; i = t->e[i].next)
		if (CRYPTO_memcmp(t->e[i].ph, ph, CREDS_PLACEHOLDER_LEN) == 0)
			found = i;
	return found;
}

static void table_unlink(struct creds_table *t, int32_t idx)
{
	int32_t *pp = &t->head[ph_bucket(t->e[idx].ph)];

	while (*pp >= 0 && *pp != idx)
		pp = &t->e[*pp].next;
	if (*pp == idx)
		*pp = t->e[idx].next;
}

/* Write lock held.  A slot for a new entry, or -1 (-ENOSPC). */
static int32_t table_slot(struct creds_table *t, uint64_t now)
{
	int32_t i, best = -1;

	if (t->n == t->cap && t->cap < CREDS_TABLE_MAX) {
		size_t ncap = t->cap ? 2 * t->cap : 16;
		struct ph_entry *ne;

		if (ncap > CREDS_TABLE_MAX)
			ncap = CREDS_TABLE_MAX;
		ne = calloc(ncap, sizeof(*ne));
		if (ne) {
			if (t->e) {
				memcpy(ne, t->e, t->n * sizeof(*ne));
				OPENSSL_cleanse(t->e, t->cap * sizeof(*t->e));
				free(t->e);
			}
			t->e = ne;
			t->cap = ncap;
		}
	}
	if (t->n < t->cap)
		return (int32_t)t->n++;
	/* Full: reuse the oldest dead entry. */
	for (i = 0; i < (int32_t)t->n; i++) {
		const struct ph_entry *e = &t->e[i];

		if ((e->revoked || (e->expires_at && now >= e->expires_at)) &&
		    (best < 0 || e->seq < t->e[best].seq))
			best = i;
	}
	if (best >= 0)
		table_unlink(t, best);
	return best;
}

static int table_put(struct creds_table *t, const char *ph, const char *name,
		     uint64_t expires_at, uint64_t now)
{
	struct ph_entry *e;
	int32_t idx;
	unsigned b;

	if (table_find(t, ph) >= 0)
		return -EEXIST;
	idx = table_slot(t, now);
	if (idx < 0)
		return -ENOSPC;
	e = &t->e[idx];
	memset(e, 0, sizeof(*e));
	memcpy(e->ph, ph, CREDS_PLACEHOLDER_LEN);
	memcpy(e->name, name, strlen(name) + 1);
	e->expires_at = expires_at;
	e->seq = ++t->seq;
	b = ph_bucket(ph);
	e->next = t->head[b];
	t->head[b] = idx;
	return 0;
}

static bool cred_name_ok(const char *name)
{
	return name && name[0] && strlen(name) <= CREDS_NAME_MAX;
}

int creds_table_issue(struct creds_table *t, const char *cred_name, uint64_t now,
		     uint64_t ttl_sec, char out[CREDS_PLACEHOLDER_LEN + 1])
{
	uint64_t exp = 0;
	int ret, tries;

	if (!t || !cred_name_ok(cred_name) || !out)
		return -EINVAL;
	if (ttl_sec) {
		if (now > UINT64_MAX - ttl_sec)
			return -EINVAL;
		exp = now + ttl_sec;
	}
	pthread_rwlock_wrlock(&t->lock);
	/* A collision in 128 bits means a broken generator; do not loop. */
	for (tries = 0; tries < 2; tries++) {
		ret = creds_placeholder_new(out);
		if (ret == 0)
			ret = table_put(t, out, cred_name, exp, now);
		if (ret != -EEXIST)
			break;
	}
	pthread_rwlock_unlock(&t->lock);
	if (ret < 0)
		memset(out, 0, CREDS_PLACEHOLDER_LEN + 1);
	return ret;
}

int creds_table_insert(struct creds_table *t, const char *ph,
		      const char *cred_name, uint64_t expires_at)
{
	int ret;

	if (!t || !ph || strlen(ph) != CREDS_PLACEHOLDER_LEN ||
	    !placeholder_shape(ph) || !cred_name_ok(cred_name))
		return -EINVAL;
	pthread_rwlock_wrlock(&t->lock);
	/* "now" 0: a restore must not push out entries that may be live. */
	ret = table_put(t, ph, cred_name, expires_at, 0);
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

enum creds_ph_state creds_table_lookup(struct creds_table *t, const char *ph,
				     uint64_t now, char *name)
{
	enum creds_ph_state st = CREDS_PH_UNKNOWN;
	int32_t i;

	if (!t || !ph || !placeholder_shape(ph))
		return CREDS_PH_UNKNOWN;
	pthread_rwlock_rdlock(&t->lock);
	i = table_find(t, ph);
	if (i >= 0) {
		const struct ph_entry *e = &t->e[i];

		if (e->revoked)
			st = CREDS_PH_REVOKED;
		else if (e->expires_at && now >= e->expires_at)
			st = CREDS_PH_EXPIRED;
		else
			st = CREDS_PH_VALID;
		if (name)
			memcpy(name, e->name, strlen(e->name) + 1);
	}
	pthread_rwlock_unlock(&t->lock);
	return st;
}

size_t creds_table_revoke(struct creds_table *t, const char *cred_name)
{
	size_t i, n = 0;

	if (!t)
		return 0;
	pthread_rwlock_wrlock(&t->lock);
	for (i = 0; i < t->n; i++) {
		struct ph_entry *e = &t->e[i];

		if (e->revoked || (cred_name && strcmp(e->name, cred_name) != 0))
			continue;
		e->revoked = true;
		n++;
	}
	/* The sandbox is gone: nothing is injected for it any more. */
	for (i = 0; !cred_name && i < t->ng; i++)
		t->g[i].revoked = true;
	pthread_rwlock_unlock(&t->lock);
	return n;
}

/* Lock held.  Return: the grant of @name, or NULL. */
static struct grant *grant_find(const struct creds_table *t, const char *name)
{
	size_t i;

	for (i = 0; i < t->ng; i++)
		if (strcmp(t->g[i].name, name) == 0)
			return &t->g[i];
	return NULL;
}

int creds_table_grant(struct creds_table *t, const char *cred_name,
		     uint64_t expires_at)
{
	struct grant *g;
	int ret = 0;

	if (!t || !cred_name_ok(cred_name))
		return -EINVAL;
	pthread_rwlock_wrlock(&t->lock);
	if (grant_find(t, cred_name)) {
		ret = -EEXIST;
		goto out;
	}
	if (t->ng == t->gcap) {
		size_t ncap = t->gcap ? 2 * t->gcap : 8;

		if (ncap > CREDS_GRANTS_MAX)
			ncap = CREDS_GRANTS_MAX;
		g = ncap > t->gcap ? realloc(t->g, ncap * sizeof(*g)) : NULL;
		if (!g) {
			ret = ncap > t->gcap ? -ENOMEM : -ENOSPC;
			goto out;
		}
		t->g = g;
		t->gcap = ncap;
	}
	g = &t->g[t->ng++];
	memset(g, 0, sizeof(*g));
	memcpy(g->name, cred_name, strlen(cred_name) + 1);
	g->expires_at = expires_at;
out:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

enum creds_ph_state creds_table_grant_state(struct creds_table *t,
					  const char *cred_name, uint64_t now,
					  uint64_t *expires_at)
{
	enum creds_ph_state st = CREDS_PH_UNKNOWN;
	const struct grant *g;

	if (!t || !cred_name)
		return CREDS_PH_UNKNOWN;
	pthread_rwlock_rdlock(&t->lock);
	g = grant_find(t, cred_name);
	if (g) {
		if (g->revoked)
			st = CREDS_PH_REVOKED;
		else if (g->expires_at && now >= g->expires_at)
			st = CREDS_PH_EXPIRED;
		else
			st = CREDS_PH_VALID;
		if (expires_at)
			*expires_at = g->expires_at;
	}
	pthread_rwlock_unlock(&t->lock);
	return st;
}

int creds_table_foreach_grant(struct creds_table *t,
			     int (*fn)(const char *cred_name, uint64_t expires_at,
				       bool revoked, void *arg),
			     void *arg)
{
	size_t i;
	int ret = 0;

	if (!t || !fn)
		return -EINVAL;
	pthread_rwlock_rdlock(&t->lock);
	for (i = 0; i < t->ng && ret == 0; i++)
		ret = fn(t->g[i].name, t->g[i].expires_at, t->g[i].revoked, arg);
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

int creds_table_foreach(struct creds_table *t,
		       int (*fn)(const char *ph, const char *cred_name,
				 uint64_t expires_at, bool revoked, void *arg),
		       void *arg)
{
	char ph[CREDS_PLACEHOLDER_LEN + 1];
	size_t i;
	int ret = 0;

	if (!t || !fn)
		return -EINVAL;
	pthread_rwlock_rdlock(&t->lock);
	for (i = 0; i < t->n && ret == 0; i++) {
		memcpy(ph, t->e[i].ph, CREDS_PLACEHOLDER_LEN);
		ph[CREDS_PLACEHOLDER_LEN] = '\0';
		ret = fn(ph, t->e[i].name, t->e[i].expires_at, t->e[i].revoked,
			 arg);
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

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
static bool carries(const struct policy_credential *c, struct http_slice name)
{
	size_t i;

	for (i = 0; i < c->n_placeholder_headers; i++)
		if (slice_is(name, c->placeholder_headers[i]))
			return true;
	return false;
}

/* One placeholder occurrence; @in_header is the header whose value holds
 * it, or NULL for a place where it never goes (the method, the target,
 * the authority, a header name). */
static void occurrence(struct planner *x, const char *ph,
		       const struct http_slice *in_header)
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
			else if ((x->flags & CREDS_PLAN_PLAINTEXT) &&
				 !c->plaintext_allow)
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
		 !carries(policy_credential_get(x->p, (size_t)plan->found[k].cred),
			  *in_header))
		refuse(x, CREDS_OUT_OF_SCOPE, plan->found[k].cred);
}

static void scan(struct planner *x, const char *s, size_t len,
		 const struct http_slice *ok)
{
	const char *p;
	size_t off;

	while (x->plan->verdict == CREDS_FORWARD &&
	       (p = creds_find_placeholder(s, len, &off))) {
		occurrence(x, p, ok);
		s += off + CREDS_PLACEHOLDER_LEN;
		len -= off + CREDS_PLACEHOLDER_LEN;
	}
}

/*
 * "Basic" SP+ token68, decoded into @out.  Return: decoded length, or -1
 * when @v is not a decodable Basic credential of at most BASIC_MAX bytes.
 */
static int basic_decode(struct http_slice v, unsigned char *out)
{
	size_t i = 5;
	int n;

	if (v.len < 7 || !text_eq_ci(v.ptr, 5, "Basic", 5) ||
	    (v.ptr[5] != ' ' && v.ptr[5] != '\t'))
		return -1;
	while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == '\t'))
		i++;
	n = creds_base64_decode(v.ptr + i, v.len - i, out, BASIC_MAX);
	return n < 0 ? -1 : n;
}

static bool is_host(struct http_slice name)
{
	return slice_is(name, "Host");
}

static bool is_authorization(struct http_slice name)
{
	return slice_is(name, "Authorization");
}

int creds_plan_request(struct creds_table *t, const struct policy *p,
		      const char *host, const struct http_request *req,
		      uint64_t now, unsigned flags, struct creds_plan *plan)
{
	struct planner x = { .t = t, .p = p, .req = req, .now = now,
			     .flags = flags, .plan = plan };
	unsigned char basic[BASIC_MAX];
	size_t i, k, n;
	int bl;

	if (!plan)
		return -EINVAL;
	memset(plan, 0, sizeof(*plan));
	plan->cred = -1;
	plan->plaintext_withheld = -1;
	plan->expired_withheld = -1;
	if (!t || !p || !req ||
	    (req->form != HTTP_FORM_ORIGIN && req->form != HTTP_FORM_ABSOLUTE))
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
		scan(&x, h->value.ptr, h->value.len, is_host(h->name) ? NULL : &h->name);
		if (is_authorization(h->name)) {
			bl = basic_decode(h->value, basic);
			if (bl > 0)
				scan(&x, (const char *)basic, (size_t)bl, &h->name);
		}
	}
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
	    !carries(policy_credential_get(r->p, (size_t)cred), name)) {
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
static void put_subst(struct rewriter *r, const char *s, size_t len,
		      struct http_slice name)
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
static bool connection_lists(const struct http_request *req,
			     struct http_slice name)
{
	size_t i;

	for (i = 0; i < req->nheaders; i++) {
		const char *p, *end, *s, *e;

		if (!slice_is(req->headers[i].name, "Connection"))
			continue;
		p = req->headers[i].value.ptr;
		end = p + req->headers[i].value.len;
		while (p < end) {
			s = p;
			while (p < end && *p != ',')
				p++;
			e = p;
			if (p < end)
				p++;
			while (s < e && (*s == ' ' || *s == '\t'))
				s++;
			while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
				e--;
			if (text_eq_ci(s, (size_t)(e - s), name.ptr, name.len))
				return true;
		}
	}
	return false;
}

/* Headers the writer drops or rebuilds itself. */
static bool header_untouchable(const struct http_request *req,
			       struct http_slice name)
{
	return is_host(name) || http_is_hop_by_hop(name.ptr, name.len) ||
	       connection_lists(req, name);
}

/*
 * Appends the rewritten value of one client header: a Basic credential
 * with a placeholder inside is decoded, substituted and re-encoded in
 * place at the end of the buffer.
 */
static void put_header_value(struct rewriter *r, const struct http_header *h)
{
	unsigned char basic[BASIC_MAX];
	size_t start, plain_len, enc_len;
	int bl = -1, n;

	if (is_authorization(h->name) && !has_placeholder(h->value))
		bl = basic_decode(h->value, basic);
	if (bl <= 0 ||
	    !creds_find_placeholder((const char *)basic, (size_t)bl, NULL)) {
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
	n = creds_base64_encode(r->w.p + start, plain_len, false,
			       r->w.p + r->w.len, r->w.cap - r->w.len);
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
	unsigned char basic[BASIC_MAX];
	bool ret = has_placeholder(h->value);
	int bl;

	if (!ret && is_authorization(h->name)) {
		bl = basic_decode(h->value, basic);
		ret = bl > 0 && creds_find_placeholder((const char *)basic,
						      (size_t)bl, NULL);
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

	return http_is_hop_by_hop(name, len) ||
	       text_eq_ci(name, len, "Host", 4) ||
	       text_eq_ci(name, len, "Content-Length", 14);
}

int creds_rewrite_request(const struct creds_plan *plan, const struct policy *p,
			 const struct creds_secret *const *secrets,
			 const struct http_request *req, char *buf,
			 size_t buflen, struct creds_rewrite *rw)
{
	struct rewriter r = { .plan = plan, .p = p, .secrets = secrets,
			      .w = { .p = buf, .cap = buflen } };
	size_t i, j, u, start;
	int ret = -EINVAL, n;

	if (!rw)
		return -EINVAL;
	memset(rw, 0, sizeof(*rw));
	rw->buf = buf;
	rw->cap = buflen;
	if (!plan || !p || !secrets || !req || !buf ||
	    plan->verdict != CREDS_FORWARD)
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

			if (!text_eq_ci(o->name.ptr, o->name.len, h->name.ptr,
				       h->name.len))
				continue;
			if (!first)
				obuf_puts(&r.w, slice_is(h->name, "Cookie") ? "; " : ", ");
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
	if (has_placeholder(req->path) ||
	    (req->has_query && has_placeholder(req->query)))
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

int creds_write_request_head(const struct creds_rewrite *rw,
			    const struct http_request *req, char *out,
			    size_t outlen)
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

/* ---- OAuth2 client credentials ------------------------------------------- */

/* application/x-www-form-urlencoded: unreserved stay, SP is '+'. */
static void wput_form(struct obuf *w, const unsigned char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] == ' ')
			obuf_putc(w, '+');
		else
			wput_pct(w, s + i, 1);
	}
}

/* RFC 6749 3.3: scope-token = 1*NQCHAR */
static bool scope_token_ok(const char *s)
{
	if (!s || !*s)
		return false;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x21 || c > 0x7e || c == '"' || c == '\\')
			return false;
	}
	return true;
}

int creds_oauth2_request_body(const char *client_id,
			     const struct creds_secret *client_secret,
			     const char *const *scopes, size_t n, char *out,
			     size_t outlen)
{
	struct obuf w = { .p = out, .cap = outlen ? outlen - 1 : 0 };
	size_t i;

	if (!client_id || !*client_id || !client_secret || !client_secret->buf ||
	    !out || !outlen || (n && !scopes))
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (!scope_token_ok(scopes[i]))
			return -EINVAL;
	obuf_puts(&w, "grant_type=client_credentials&client_id=");
	wput_form(&w, (const unsigned char *)client_id, strlen(client_id));
	obuf_puts(&w, "&client_secret=");
	wput_form(&w, client_secret->buf, client_secret->len);
	if (n) {
		obuf_puts(&w, "&scope=");
		for (i = 0; i < n; i++) {
			if (i)
				obuf_putc(&w, '+');
			wput_form(&w, (const unsigned char *)scopes[i],
				  strlen(scopes[i]));
		}
	}
	if (w.full || w.len > INT_MAX) {
		OPENSSL_cleanse(out, outlen);
		return -ENOSPC;
	}
	out[w.len] = '\0';
	return (int)w.len;
}

/* Key names we read are short; a longer key is some other key. */
#define JSON_KEY_MAX 32

/* Compared with its length: "access_token\u0000x" is another key. */
static bool key_is(const struct obuf *k, const char *lit)
{
	return !k->full && k->len == strlen(lit) && memcmp(k->p, lit, k->len) == 0;
}

int creds_oauth2_parse_response(const char *json, size_t len,
			       struct creds_secret *token, uint64_t *expires_in)
{
	struct json j = { .s = json, .len = len };
	char key[JSON_KEY_MAX];
	char ttype[16];
	unsigned char *tok = NULL;
	size_t tok_len = 0, tok_cap = len ? len : 1;
	bool seen_tok = false, seen_type = false, seen_exp = false,
	     seen_err = false, type_bearer = false, exp_range = false;
	uint64_t exp = 0;
	int ret = -EINVAL;

	if (!token || !expires_in)
		return -EINVAL;
	token->buf = NULL;
	token->len = 0;
	*expires_in = 0;
	if (!json)
		return -EINVAL;
	/* The token is never longer than the document it came in. */
	tok = OPENSSL_secure_malloc(tok_cap);
	if (!tok)
		return -ENOMEM;

	json_ws(&j);
	if (j.i >= j.len || j.s[j.i] != '{')
		goto out;
	j.i++;
	json_ws(&j);
	if (j.i < j.len && j.s[j.i] == '}') {
		j.i++;
		goto end;
	}
	for (;;) {
		struct obuf kw = { .p = key, .cap = JSON_KEY_MAX };

		json_ws(&j);
		if (json_string(&j, &kw) < 0)
			goto out;
		json_ws(&j);
		if (j.i >= j.len || j.s[j.i] != ':')
			goto out;
		j.i++;
		json_ws(&j);
		if (j.i >= j.len)
			goto out;

		if (key_is(&kw, "access_token")) {
			struct obuf tw = { .p = (char *)tok, .cap = tok_cap };

			if (seen_tok || j.s[j.i] != '"' ||
			    json_string(&j, &tw) < 0 || tw.full)
				goto out;
			seen_tok = true;
			tok_len = tw.len;
		} else if (key_is(&kw, "token_type")) {
			struct obuf tw = { .p = ttype, .cap = sizeof(ttype) };

			if (seen_type || j.s[j.i] != '"' ||
			    json_string(&j, &tw) < 0)
				goto out;
			seen_type = true;
			type_bearer = !tw.full &&
				      text_eq_ci(ttype, tw.len, "bearer", 6);
		} else if (key_is(&kw, "expires_in")) {
			bool is_int = false;

			if (seen_exp)
				goto out;
			seen_exp = true;
			if (j.s[j.i] == '"') {
				/* Some servers send "3600". */
				char num[24];
				struct obuf nw = { .p = num, .cap = sizeof(num) - 1 };
				struct json nj;

				if (json_string(&j, &nw) < 0)
					goto out;
				if (nw.full) {
					exp_range = true;
					goto next;
				}
				num[nw.len] = '\0';
				nj = (struct json){ .s = num, .len = nw.len };
				if (json_number(&nj, &exp, &is_int) < 0 ||
				    nj.i != nj.len || !is_int)
					goto out;
			} else {
				if (json_number(&j, &exp, &is_int) < 0)
					goto out;
				if (!is_int) {
					/* 3600.5, -1, 1e9: not a count of seconds. */
					exp_range = true;
				}
			}
			if (exp > CREDS_OAUTH2_EXPIRES_MAX)
				exp_range = true;
		} else if (key_is(&kw, "error")) {
			if (seen_err || json_value(&j, 1) < 0)
				goto out;
			seen_err = true;
		} else {
			if (json_value(&j, 1) < 0)
				goto out;
		}
next:
		json_ws(&j);
		if (j.i < j.len && j.s[j.i] == ',') {
			j.i++;
			continue;
		}
		if (j.i < j.len && j.s[j.i] == '}') {
			j.i++;
			break;
		}
		goto out;
	}
end:
	json_ws(&j);
	if (j.i != j.len)
		goto out;

	if (seen_err) {
		ret = -EACCES;
		goto out;
	}
	if (!seen_tok || !seen_type)
		goto out;
	if (!type_bearer) {
		ret = -EPROTO;
		goto out;
	}
	if (exp_range) {
		ret = -ERANGE;
		goto out;
	}
	/* It goes into "Authorization: Bearer ...": visible ASCII only. */
	if (tok_len == 0)
		goto out;
	for (size_t i = 0; i < tok_len; i++)
		if (tok[i] < 0x21 || tok[i] > 0x7e)
			goto out;
	ret = creds_secret_set(token, tok, tok_len);
	if (ret == 0)
		*expires_in = exp;
out:
	OPENSSL_secure_clear_free(tok, tok_cap);
	return ret;
}
