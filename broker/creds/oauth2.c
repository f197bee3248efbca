// SPDX-License-Identifier: MIT
/* OAuth2 client credentials (RFC 6749 4.4), pure helpers: the token
 * request's body and the token endpoint's answer. */

#include <errno.h>
#include <limits.h>
#include <string.h>

#include <openssl/crypto.h>

#include "broker/creds/creds_internal.h"
#include "common/json.h"
#include "common/obuf.h"
#include "common/text.h"

/* ---- output buffers ------------------------------------------------------ */

static void wput_pct(struct obuf *w, const unsigned char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = s[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			obuf_putc(w, (char)c);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };

			obuf_put(w, e, 3);
		}
	}
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

int creds_oauth2_request_body(const char *client_id, const struct creds_secret *client_secret,
			      const char *const *scopes, size_t n, char *out, size_t outlen)
{
	struct obuf w = { .p = out, .cap = outlen ? outlen - 1 : 0 };
	size_t i;

	if (!client_id || !*client_id || !client_secret || !client_secret->buf || !out || !outlen ||
	    (n && !scopes))
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
			wput_form(&w, (const unsigned char *)scopes[i], strlen(scopes[i]));
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

int creds_oauth2_parse_response(const char *json, size_t len, struct creds_secret *token,
				uint64_t *expires_in)
{
	struct json j = { .s = json, .len = len };
	char key[JSON_KEY_MAX];
	char ttype[16];
	unsigned char *tok = NULL;
	size_t tok_len = 0, tok_cap = len ? len : 1;
	bool seen_tok = false, seen_type = false, seen_exp = false, seen_err = false,
	     type_bearer = false, exp_range = false;
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

	sl_json_ws(&j);
	if (j.i >= j.len || j.s[j.i] != '{')
		goto out;
	j.i++;
	sl_json_ws(&j);
	if (j.i < j.len && j.s[j.i] == '}') {
		j.i++;
		goto end;
	}
	for (;;) {
		struct obuf kw = { .p = key, .cap = JSON_KEY_MAX };

		sl_json_ws(&j);
		if (sl_json_string(&j, &kw) < 0)
			goto out;
		sl_json_ws(&j);
		if (j.i >= j.len || j.s[j.i] != ':')
			goto out;
		j.i++;
		sl_json_ws(&j);
		if (j.i >= j.len)
			goto out;

		if (key_is(&kw, "access_token")) {
			struct obuf tw = { .p = (char *)tok, .cap = tok_cap };

			if (seen_tok || j.s[j.i] != '"' || sl_json_string(&j, &tw) < 0 || tw.full)
				goto out;
			seen_tok = true;
			tok_len = tw.len;
		} else if (key_is(&kw, "token_type")) {
			struct obuf tw = { .p = ttype, .cap = sizeof(ttype) };

			if (seen_type || j.s[j.i] != '"' || sl_json_string(&j, &tw) < 0)
				goto out;
			seen_type = true;
			type_bearer = !tw.full && text_eq_ci(ttype, tw.len, "bearer", 6);
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

				if (sl_json_string(&j, &nw) < 0)
					goto out;
				if (nw.full) {
					exp_range = true;
					goto next;
				}
				num[nw.len] = '\0';
				nj = (struct json){ .s = num, .len = nw.len };
				if (sl_json_number(&nj, &exp, &is_int) < 0 || nj.i != nj.len ||
				    !is_int)
					goto out;
			} else {
				if (sl_json_number(&j, &exp, &is_int) < 0)
					goto out;
				if (!is_int) {
					/* 3600.5, -1, 1e9: not a count of seconds. */
					exp_range = true;
				}
			}
			if (exp > CREDS_OAUTH2_EXPIRES_MAX)
				exp_range = true;
		} else if (key_is(&kw, "error")) {
			if (seen_err || sl_json_value(&j, 1) < 0)
				goto out;
			seen_err = true;
		} else {
			if (sl_json_value(&j, 1) < 0)
				goto out;
		}
next:
		sl_json_ws(&j);
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
	sl_json_ws(&j);
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
