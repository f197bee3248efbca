/* SPDX-License-Identifier: MIT */
/* Credential injection: secrets, placeholders and their table, scopes,
 * request rewriting, broker-minted JWTs, OAuth2 client-credentials. */
#ifndef SLUICE_BROKER_CRED_H
#define SLUICE_BROKER_CRED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* struct cred_rewrite holds http_set_header entries by value. */
#include "broker/http.h"

struct policy;
struct policy_credential;
struct evp_pkey_st; /* OpenSSL's EVP_PKEY */

/* "sluice-ph-" and 32 lowercase hex digits: 128 random bits. */
#define CRED_PLACEHOLDER_PREFIX "sluice-ph-"
#define CRED_PLACEHOLDER_PREFIX_LEN 10
#define CRED_PLACEHOLDER_HEX 32
#define CRED_PLACEHOLDER_LEN (CRED_PLACEHOLDER_PREFIX_LEN + CRED_PLACEHOLDER_HEX)

/* Largest secret (or file read by cred_file_read()). */
#define CRED_SECRET_MAX (64 * 1024)
/* Longest credential name (the policy allows 64). */
#define CRED_NAME_MAX 64

/*
 * A secret in memory the sandbox never reaches: from the secure heap when
 * one is initialised (CRYPTO_secure_malloc_init), else the ordinary heap;
 * wiped by cred_secret_free().  Not NUL-terminated.
 */
struct cred_secret {
	unsigned char *buf;
	size_t len;
};

/**
 * cred_secret_load() - read a credential's secret from its source
 * @c:      the credential (file path or environment variable)
 * @s:      filled on success; cred_secret_free() it
 * @err:    on failure, a message naming the source, never the secret
 * @errlen: its size
 *
 * A file is opened O_RDONLY|O_NOFOLLOW|O_CLOEXEC (a symlink is refused;
 * the mode is not checked: the file is the operator's), must be a regular
 * file of at most CRED_SECRET_MAX bytes; one trailing "\n" (or "\r\n")
 * is dropped.  The secret must be non-empty and hold no control character
 * other than HTAB (CR, LF or NUL would split or cut the header it goes
 * into).
 *
 * Return: 0; -ENOENT, -ELOOP (symlink), -EFBIG, -EINVAL (bad content or
 * not a regular file), -ENOMEM, or another negative errno.
 */
int cred_secret_load(const struct policy_credential *c, struct cred_secret *s,
		     char *err, size_t errlen);

/**
 * cred_secret_set() - copy bytes into a secret, with cred_secret_load()'s
 *                     content checks
 * @s:   filled on success; cred_secret_free() it
 * @p:   the bytes
 * @len: their number, 1..CRED_SECRET_MAX
 *
 * Return: 0, -EINVAL or -ENOMEM.
 */
int cred_secret_set(struct cred_secret *s, const void *p, size_t len);

/* Wipes and frees; @s is left empty. Accepts NULL and an empty secret. */
void cred_secret_free(struct cred_secret *s);

/**
 * cred_file_read() - read a small file the broker owns, raw
 * @path:   absolute path; a symlink is refused (O_NOFOLLOW)
 * @out:    the bytes, in secret memory; cred_secret_free() it
 * @err:    on failure, a message
 * @errlen: its size
 *
 * No content checks (for PEM keys and the like).
 *
 * Return: 0 or a negative errno (-ELOOP for a symlink, -EFBIG above
 * CRED_SECRET_MAX, -EAGAIN when the file grew while read).
 */
int cred_file_read(const char *path, struct cred_secret *out, char *err,
		   size_t errlen);

/* ---- placeholders -------------------------------------------------------- */

/**
 * cred_placeholder_new() - a fresh placeholder
 * @out: CRED_PLACEHOLDER_LEN characters and a NUL
 *
 * Return: 0, or -EIO when the random generator fails.
 */
int cred_placeholder_new(char out[CRED_PLACEHOLDER_LEN + 1]);

/**
 * cred_find_placeholder() - first thing shaped like a placeholder
 * @s:   text, not NUL-terminated
 * @len: its length
 * @off: when not NULL, set to its offset
 *
 * Finds CRED_PLACEHOLDER_PREFIX followed by 32 lowercase hex digits
 * anywhere in @s, known to any table or not.  Does not allocate.
 *
 * Return: a pointer to it in @s, or NULL.
 */
const char *cred_find_placeholder(const char *s, size_t len, size_t *off);

/* ---- scopes -------------------------------------------------------------- */

/**
 * cred_host_match() - does @host match a scope host pattern?
 * @pattern: "name" (exact) or "*.name" (any subdomain, never the apex)
 * @host:    the host, not NUL-terminated
 * @len:     its length
 *
 * Case-insensitive; one trailing dot on either side is ignored.
 *
 * Return: true on a match.
 */
bool cred_host_match(const char *pattern, const char *host, size_t len);

/**
 * cred_path_match() - does a raw request path match a scope path glob?
 * @glob: a policy path; '*' matches any run of characters, '/' included
 *        (the glob "/repos/acme/" followed by '*' matches "/repos/acme/x/y"
 *        and "/repos/acme/", not "/repos/acme"); every other character
 *        matches itself
 * @path: the path without its query, as sent (not decoded)
 * @len:  its length
 *
 * Paths are compared raw: "/repos/%61cme/x" does not match that glob.
 * Decoding here would mean guessing how the origin
 * decodes (once? twice? '+'?), and a wrong guess injects into a path the
 * scope did not name; raw comparison can only fail closed.
 *
 * Return: true on a match.
 */
bool cred_path_match(const char *glob, const char *path, size_t len);

/**
 * cred_in_scope() - is a request inside a credential's scope?
 * @c:      the credential
 * @host:   the host the request goes to (NUL-terminated); NULL means
 *          @req's authority
 * @method: NUL-terminated method; NULL means @req's
 * @req:    the parsed request; may be NULL only when @method is given
 *          and @c has no path scope
 *
 * Host in c->hosts; method in c->methods (any when none; methods are
 * case-sensitive), and so is every method an override asks for
 * (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override, '_' read as
 * '-', or a "_method" query parameter, compared in any case); an override
 * that does not read as one method is never in scope; path matching one
 * of c->paths (any when none).  A path some server could read as another
 * path never satisfies a path scope: "/repos/acme/../other" must not get
 * the credential meant for /repos/acme/.  Refused in any segment: '.'
 * and '..' segments (and segments of only dots and encoded spaces), empty
 * segments ("//"), ';' (path parameters: "/repos/acme/..;/other"), '\',
 * and percent-escapes of '.', '/', '\', '%' (so "%252e%252e"), ';', '?',
 * '#', control bytes ("%00", "%09") and non-ASCII bytes (overlong UTF-8
 * "%c0%ae").
 *
 * Return: true when in scope.
 */
bool cred_in_scope(const struct policy_credential *c, const char *host,
		   const char *method, const struct http_request *req);

/**
 * cred_build_injection() - the value of a credential's injected header
 * @c:      the credential (c->inject_value holds "{secret}")
 * @s:      its secret
 * @out:    receives the value with every "{secret}" replaced, NUL-terminated
 * @outlen: size of @out
 *
 * The output is a secret: the caller wipes it (OPENSSL_cleanse).
 *
 * Return: the value's length; -EINVAL when @c injects nothing; -ENOSPC
 * (and @out wiped) when it does not fit.
 */
int cred_build_injection(const struct policy_credential *c,
			 const struct cred_secret *s, char *out, size_t outlen);

/* ---- the placeholder table ------------------------------------------------ */

/* Placeholders one sandbox may hold at a time. */
#define CRED_TABLE_MAX 1024

enum cred_ph_state {
	CRED_PH_VALID = 0,
	CRED_PH_UNKNOWN,  /* not issued to this sandbox (or long gone) */
	CRED_PH_EXPIRED,  /* its ttl has run out */
	CRED_PH_REVOKED,  /* revoked (sandbox deleted, credential dropped) */
};

/*
 * One sandbox's placeholders: placeholder -> credential name, expiry,
 * revoked flag.  Names, not policy indices, so that entries survive a
 * policy reload that reorders credentials.  Lookups take a read lock
 * (workers); issue and revoke take the write lock (control thread).
 */
struct cred_table;

struct cred_table *cred_table_new(void);
/* Wipes and frees. NULL is fine. */
void cred_table_free(struct cred_table *t);

/**
 * cred_table_issue() - a new placeholder for a credential
 * @t:         the sandbox's table
 * @cred_name: the credential (at most CRED_NAME_MAX characters)
 * @now:       current time, seconds since the epoch
 * @ttl_sec:   lifetime; 0 for none
 * @out:       the placeholder, NUL-terminated
 *
 * When the table is full, an expired or revoked entry is reused (the
 * oldest first); a later request carrying that one is then "unknown".
 *
 * Return: 0; -ENOSPC when every entry is live; -EINVAL; -EIO.
 */
int cred_table_issue(struct cred_table *t, const char *cred_name, uint64_t now,
		     uint64_t ttl_sec, char out[CRED_PLACEHOLDER_LEN + 1]);

/**
 * cred_table_insert() - put back a placeholder issued before (state restore)
 * @t:          the table
 * @ph:         the placeholder (checked for shape)
 * @cred_name:  its credential
 * @expires_at: absolute expiry, seconds since the epoch; 0 for none
 *
 * Return: 0; -EEXIST; -ENOSPC; -EINVAL.
 */
int cred_table_insert(struct cred_table *t, const char *ph,
		      const char *cred_name, uint64_t expires_at);

/**
 * cred_table_lookup() - what a placeholder means for this sandbox
 * @t:    the table
 * @ph:   CRED_PLACEHOLDER_LEN characters (not necessarily NUL-terminated)
 * @now:  current time
 * @name: when not NULL and the placeholder is known, its credential's
 *        name (CRED_NAME_MAX + 1 bytes)
 *
 * Entries are selected by the first 8 bits of the placeholder's hex
 * digits, then every entry of that bucket is compared in full with
 * CRYPTO_memcmp: timing tells at most those 8 bits (and the bucket's
 * size), which are no help in guessing the other 120.
 *
 * Return: the state.
 */
enum cred_ph_state cred_table_lookup(struct cred_table *t, const char *ph,
				     uint64_t now, char *name);

/* Revokes every placeholder of @cred_name, or when NULL (the sandbox is
 * gone) every placeholder and every grant.
 * Return: how many placeholders were revoked. */
size_t cred_table_revoke(struct cred_table *t, const char *cred_name);

/* Credential names one sandbox may have been given over its life. */
#define CRED_GRANTS_MAX 1024

/**
 * cred_table_grant() - give a credential to the sandbox, until its ttl ends
 * @t:          the sandbox's table
 * @cred_name:  the credential (at most CRED_NAME_MAX characters)
 * @expires_at: the end of its ttl, seconds since the epoch; 0 for none
 *
 * A credential's ttl bounds its injection as well as its placeholders:
 * cred_plan_request() injects a credential's header only while the
 * sandbox holds a valid grant of it.  The first grant stays: a credential
 * given already keeps its expiry (its ttl counts from the first time).
 *
 * Return: 0; -EEXIST when granted already (left as it was); -ENOSPC
 * beyond CRED_GRANTS_MAX names; -ENOMEM; -EINVAL.
 */
int cred_table_grant(struct cred_table *t, const char *cred_name,
		     uint64_t expires_at);

/**
 * cred_table_grant_state() - a credential's grant in this sandbox, now
 * @t:          the table
 * @cred_name:  the credential
 * @now:        current time
 * @expires_at: when not NULL and granted, set to the end of its ttl
 *
 * Return: CRED_PH_VALID, CRED_PH_EXPIRED, CRED_PH_REVOKED, or
 * CRED_PH_UNKNOWN when never granted.
 */
enum cred_ph_state cred_table_grant_state(struct cred_table *t,
					  const char *cred_name, uint64_t now,
					  uint64_t *expires_at);

/* Calls @fn for each grant (for saving state); stops at a non-zero
 * return and returns it. */
int cred_table_foreach_grant(struct cred_table *t,
			     int (*fn)(const char *cred_name, uint64_t expires_at,
				       bool revoked, void *arg),
			     void *arg);

/* Calls @fn for each entry (for saving state); stops at a non-zero
 * return and returns it. */
int cred_table_foreach(struct cred_table *t,
		       int (*fn)(const char *ph, const char *cred_name,
				 uint64_t expires_at, bool revoked, void *arg),
		       void *arg);

/* ---- one request: decide, then rewrite ------------------------------------ */

enum cred_verdict {
	CRED_FORWARD = 0,	/* forward; rewrite first when plan->nuse */
	CRED_OUT_OF_SCOPE,	/* placeholder-out-of-scope */
	CRED_EXPIRED,		/* placeholder-expired */
	CRED_REVOKED,		/* placeholder-revoked */
	CRED_UNKNOWN,		/* placeholder-unknown */
	CRED_PLAINTEXT,		/* placeholder-plaintext */
	CRED_TOO_MANY,		/* too-many-placeholders */
	CRED_VERDICT_COUNT,
};

/* The X-Sluice-Reason / audit reason of a verdict ("" for CRED_FORWARD). */
const char *cred_verdict_reason(enum cred_verdict v);

/* Distinct placeholders in one request, and credentials used by one. */
#define CRED_MAX_FOUND 8
#define CRED_MAX_USES 16

/* cred_plan_request() flags */
#define CRED_PLAN_PLAINTEXT 0x1 /* the request came over plain HTTP */

struct cred_plan {
	enum cred_verdict verdict;
	/* The credential a refusal concerns (policy index), or -1. */
	int cred;
	/* Placeholders found in the request, in order of appearance. */
	struct {
		char ph[CRED_PLACEHOLDER_LEN + 1];
		enum cred_ph_state state;
		int cred; /* policy index, or -1 */
	} found[CRED_MAX_FOUND];
	size_t nfound;
	/*
	 * Credentials the rewrite needs a secret for, by policy index in
	 * ascending order: those whose placeholder the request carries and
	 * those whose header is injected (@inject).  Their names go into the
	 * audit line.
	 */
	int use[CRED_MAX_USES];
	bool inject[CRED_MAX_USES];
	size_t nuse;
	/* A credential in scope that was not injected because the request
	 * is plaintext and the credential does not allow it, or -1. */
	int plaintext_withheld;
	/* A credential in scope that was not injected because its ttl in
	 * this sandbox has run out (or the sandbox holds no grant of it:
	 * cred_table_grant()), or -1. */
	int expired_withheld;
};

/**
 * cred_plan_request() - what credentials do to one request
 * @t:     the sandbox's placeholder table
 * @p:     its compiled policy
 * @host:  the host the request goes to; NULL for req->authority's
 * @req:   a non-CONNECT request http_parse_request() accepted
 * @now:   current time (placeholder expiry)
 * @flags: CRED_PLAN_PLAINTEXT when the request is not inside TLS
 * @plan:  the decision
 *
 * Looks for placeholders in the method, the target (path, query and an
 * absolute-form authority), every header name and value, and inside
 * "Authorization: Basic" credentials (decoded).  Each must be valid for
 * this sandbox, its credential's scope must hold the request, and it must
 * be in the value of one of its credential's placeholder_headers (the
 * inject header or Authorization unless the policy names others): in the
 * path, the query, another header, the method, a header name, Host or the
 * authority it is out of scope, since an origin that reflects the request
 * (an echo, a redirect keeping the query, an error page) would hand the
 * secret back to the sandbox.  A credential that allows no plaintext
 * refuses its placeholder over plain HTTP.  The first failure decides the
 * verdict.
 * Otherwise the verdict is CRED_FORWARD and plan->use lists the
 * credentials to apply: every credential with an inject header whose
 * scope holds the request and whose grant in @t is valid at @now (its
 * ttl: see cred_table_grant()), and every credential whose placeholder
 * appears.
 *
 * Placeholders are found as literal text only: percent-, base64- (other
 * than Basic) or otherwise encoded ones, and those in a body, are not
 * seen; they are not replaced either, so they travel as the worthless
 * strings they are.  The secret itself is only ever written into
 * requests this function found in scope.
 *
 * Does not allocate.  Return: 0, or -EINVAL for bad arguments.
 */
int cred_plan_request(struct cred_table *t, const struct policy *p,
		      const char *host, const struct http_request *req,
		      uint64_t now, unsigned flags, struct cred_plan *plan);

/* Set entries one rewrite may produce: every client header, the injections. */
#define CRED_MAX_SET (HTTP_MAX_HEADERS + CRED_MAX_USES)

/*
 * A rewritten request head, ready for http_write_request_head(): headers
 * to set, each replacing client headers of that name.  Values point into
 * the caller's buffer and hold secrets: cred_rewrite_wipe() it.
 */
struct cred_rewrite {
	struct http_set_header set[CRED_MAX_SET];
	size_t nset;
	char *buf;
	size_t cap, len;
};

/**
 * cred_rewrite_request() - apply a CRED_FORWARD plan
 * @plan:    from cred_plan_request() on the same @req
 * @p:       the same policy
 * @secrets: indexed by policy credential index; entries named by
 *           plan->use must be set (others may be NULL)
 * @req:     the request
 * @buf:     storage for rewritten values (they hold secrets)
 * @buflen:  its size.  Each placeholder occurrence grows by its secret's
 *           length (4/3 of it inside Basic), so no fixed size fits every
 *           request: -ENOSPC is an answered refusal, like a head that is
 *           too large
 * @rw:      the result
 *
 * Injected headers: each used credential's inject header, value from its
 * template; two credentials injecting one name: the lower policy index
 * wins.  Client headers carrying a placeholder (only ever one of its
 * credential's placeholder_headers) get the raw secret in its place
 * (inside Basic: decoded, replaced, re-encoded); several client lines of
 * that name are joined into one (", ", or "; " for Cookie), unless an
 * injected header of that name replaces them all.  The target is never
 * rewritten.  Hop-by-hop headers, names listed in Connection and Host
 * are left alone: the head writer drops or rebuilds them.
 *
 * Return: 0; -ENOSPC (buffer wiped); -ENOKEY when a secret is missing;
 * -EINVAL when the plan does not fit the request (a placeholder in the
 * target or in a header its credential does not name) or an inject
 * header is a name the head writer refuses (hop-by-hop, Host, framing).
 */
int cred_rewrite_request(const struct cred_plan *plan, const struct policy *p,
			 const struct cred_secret *const *secrets,
			 const struct http_request *req, char *buf,
			 size_t buflen, struct cred_rewrite *rw);

/**
 * cred_write_request_head() - the upstream head for a rewritten request
 * @rw:     from cred_rewrite_request()
 * @req:    the request
 * @out:    output (holds secrets: the caller wipes it)
 * @outlen: its size
 *
 * Return: as http_write_request_head().
 */
int cred_write_request_head(const struct cred_rewrite *rw,
			    const struct http_request *req, char *out,
			    size_t outlen);

/* Wipes the values a rewrite wrote. */
void cred_rewrite_wipe(struct cred_rewrite *rw);

/* ---- encodings ------------------------------------------------------------ */

/**
 * cred_base64_encode() - base64 (RFC 4648 section 4, padded) or base64url
 *                        (section 5, unpadded)
 * @in, @len: the bytes
 * @url:      base64url without padding instead of base64
 * @out:      NUL-terminated result
 * @outlen:   its size
 *
 * Return: the length written, or -ENOSPC.
 */
int cred_base64_encode(const void *in, size_t len, bool url, char *out,
		       size_t outlen);

/**
 * cred_base64_decode() - strict base64 (padding optional, nothing else
 *                        but the alphabet; non-zero trailing bits refused)
 * @in, @len: the text
 * @out:      the bytes
 * @outlen:   its size
 *
 * Return: the number of bytes, -EINVAL or -ENOSPC.
 */
int cred_base64_decode(const char *in, size_t len, unsigned char *out,
		       size_t outlen);

/* ---- broker-minted JWTs (jwt.c) ------------------------------------------ */

/**
 * cred_jwt_key_load() - read a JWT signing key
 * @pem_file: PEM private key, EC P-256 (ES256) or Ed25519 (EdDSA); a
 *            symlink is refused
 * @key:      the key (EVP_PKEY_free() it)
 * @err:      on failure, a message
 * @errlen:   its size
 *
 * Return: 0; -EINVAL for another key type or an unreadable PEM; or a
 * negative errno from reading the file.
 */
int cred_jwt_key_load(const char *pem_file, struct evp_pkey_st **key,
		      char *err, size_t errlen);

/**
 * cred_jwt_mint() - sign a short-lived JWT
 * @key:   from cred_jwt_key_load() (or any EC P-256 / Ed25519 key)
 * @kid:   key id for the header, or NULL
 * @iss:   issuer claim
 * @sub:   subject (the sandbox)
 * @aud:   audience (the host)
 * @scope: "scope" claim, or NULL
 * @iat:   issued-at, seconds since the epoch
 * @ttl:   lifetime in seconds (exp = iat + ttl), 1..31 days
 * @out:   NUL-terminated token (a bearer secret: the caller wipes it)
 * @outlen: its size
 *
 * Header {"alg":"ES256"|"EdDSA","typ":"JWT","kid"}; claims iss, sub, aud,
 * iat, exp, a random 128-bit jti, and scope.  base64url without padding;
 * an ES256 signature is R||S, 64 bytes (JWS, RFC 7518 3.4), not DER.
 *
 * Return: the token's length; -ENOSPC; -EINVAL; -EIO.
 */
int cred_jwt_mint(struct evp_pkey_st *key, const char *kid, const char *iss,
		  const char *sub, const char *aud, const char *scope,
		  uint64_t iat, uint64_t ttl, char *out, size_t outlen);

/**
 * cred_jwks() - the public keys as a JWK Set (RFC 7517)
 * @keys:   the keys
 * @kids:   their key ids (may be NULL, or hold NULLs)
 * @n:      how many
 * @out:    NUL-terminated JSON
 * @outlen: its size
 *
 * {"keys":[{"kty":"EC","crv":"P-256","x","y",...} or
 * {"kty":"OKP","crv":"Ed25519","x",...}, each with "kid", "alg" and
 * "use":"sig"]}.
 *
 * Return: the length written; -ENOSPC; -EINVAL for another key type.
 */
int cred_jwks(struct evp_pkey_st *const *keys, const char *const *kids,
	      size_t n, char *out, size_t outlen);

/* ---- OAuth2 client credentials (RFC 6749 4.4), pure helpers -------------- */

/**
 * cred_oauth2_request_body() - the token request's form body
 * @client_id:     the client id
 * @client_secret: its secret
 * @scopes:        scope tokens (none holding a space), may be NULL if @n is 0
 * @n:             how many
 * @out:           NUL-terminated application/x-www-form-urlencoded body
 *                 (holds the secret: the caller wipes it)
 * @outlen:        its size
 *
 * "grant_type=client_credentials&client_id=..&client_secret=..[&scope=..]"
 * (RFC 6749 2.3.1 body authentication), values form-encoded.
 *
 * Return: the length; -ENOSPC (@out wiped); -EINVAL for an empty id or a
 * bad scope token.
 */
int cred_oauth2_request_body(const char *client_id,
			     const struct cred_secret *client_secret,
			     const char *const *scopes, size_t n, char *out,
			     size_t outlen);

/* Largest expires_in accepted (a year); more is taken as a broken server. */
#define CRED_OAUTH2_EXPIRES_MAX (366ULL * 86400)

/**
 * cred_oauth2_parse_response() - the token from a token endpoint's answer
 * @json:       the response body (not NUL-terminated)
 * @len:        its length
 * @token:      the access_token (cred_secret_free() it)
 * @expires_in: seconds, or 0 when the server did not say
 *
 * A strict JSON scan: one object, no duplicate keys, nesting at most 16,
 * no trailing bytes.  access_token: a non-empty string of visible ASCII
 * (it goes into a header); token_type: "bearer" in any case, required;
 * expires_in: a non-negative integer (a string of digits is accepted too,
 * as some servers send it) at most CRED_OAUTH2_EXPIRES_MAX.
 *
 * Return: 0; -EINVAL for malformed JSON or a missing/bad member; -EACCES
 * when the server answered an "error" object; -ERANGE for expires_in;
 * -EPROTO for another token_type; -ENOMEM.
 */
int cred_oauth2_parse_response(const char *json, size_t len,
			       struct cred_secret *token, uint64_t *expires_in);

#endif
