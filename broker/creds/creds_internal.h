/* SPDX-License-Identifier: MIT */
/* What the files of broker/creds/ share: reading secrets, scope checks,
 * encodings, broker-minted JWTs (jwt.c), OAuth2 client credentials
 * (oauth2.c) and the token cache with its fetchers (tokens.c).  Only this
 * module and its tests include it. */
#ifndef SLUICE_BROKER_CREDS_INTERNAL_H
#define SLUICE_BROKER_CREDS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <string.h>

#include "broker/creds/creds.h"
#include "broker/http.h"
#include "common/text.h"

struct evp_pkey_st; /* OpenSSL's EVP_PKEY */

/* ---- helpers the files share ---------------------------------------------- */

/* Largest decoded Basic credential that is searched for placeholders. */
#define CREDS_BASIC_MAX 4096

static inline bool creds_slice_is(struct http_slice s, const char *lit)
{
	return text_eq_ci(s.ptr, s.len, lit, strlen(lit));
}

/* A lowercase hex digit's value, or -1. */
static inline int creds_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static inline bool creds_is_host(struct http_slice name)
{
	return creds_slice_is(name, "Host");
}

static inline bool creds_is_authorization(struct http_slice name)
{
	return creds_slice_is(name, "Authorization");
}

/* plan.c: may @c's placeholder be in (and be replaced in) header @name? */
bool creds_carries(const struct policy_credential *c, struct http_slice name);
/* plan.c: "Basic" SP+ token68, decoded into @out (CREDS_BASIC_MAX bytes).
 * Return: decoded length, or -1 when @v is not a decodable Basic
 * credential of at most CREDS_BASIC_MAX bytes. */
int creds_basic_decode(struct http_slice v, unsigned char *out);

/* ---- secret sources ------------------------------------------------------- */

/**
 * creds_secret_load() - read a credential's secret from its source
 * @c:      the credential (file path or environment variable)
 * @s:      filled on success; creds_secret_free() it
 * @err:    on failure, a message naming the source, never the secret
 *          (errno 0 for a refusal: unset, too long, bad bytes)
 *
 * A file is opened O_RDONLY|O_NOFOLLOW|O_CLOEXEC (a symlink is refused;
 * the mode is not checked: the file is the operator's), must be a regular
 * file of at most CREDS_SECRET_MAX bytes; one trailing "\n" (or "\r\n")
 * is dropped.  The secret must be non-empty and hold no control character
 * other than HTAB (CR, LF or NUL would split or cut the header it goes
 * into).
 *
 * Return: 0; -ENOENT, -ELOOP (symlink), -EFBIG, -EINVAL (bad content or
 * not a regular file), -ENOMEM, or another negative errno.
 */
int creds_secret_load(const struct policy_credential *c, struct creds_secret *s,
		      struct sl_err *err);

/**
 * creds_file_read() - read a small file the broker owns, raw
 * @path:   absolute path; a symlink is refused (O_NOFOLLOW)
 * @out:    the bytes, in secret memory; creds_secret_free() it
 * @err:    on failure, a message (errno 0 for a refusal: not absolute,
 *          not a regular file, too big, changed while read)
 *
 * No content checks (for PEM keys and the like).
 *
 * Return: 0 or a negative errno (-ELOOP for a symlink, -EFBIG above
 * CREDS_SECRET_MAX, -EAGAIN when the file grew while read).
 */
int creds_file_read(const char *path, struct creds_secret *out, struct sl_err *err);

/* ---- scopes -------------------------------------------------------------- */

/**
 * creds_path_match() - does a raw request path match a scope path glob?
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
bool creds_path_match(const char *glob, const char *path, size_t len);

/**
 * creds_in_scope() - is a request inside a credential's scope?
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
bool creds_in_scope(const struct policy_credential *c, const char *host, const char *method,
		    const struct http_request *req);

/**
 * creds_build_injection() - the value of a credential's injected header
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
int creds_build_injection(const struct policy_credential *c, const struct creds_secret *s,
			  char *out, size_t outlen);

/* ---- encodings ------------------------------------------------------------ */

/**
 * creds_base64_encode() - base64 (RFC 4648 section 4, padded) or base64url
 *                        (section 5, unpadded)
 * @in, @len: the bytes
 * @url:      base64url without padding instead of base64
 * @out:      NUL-terminated result
 * @outlen:   its size
 *
 * Return: the length written, or -ENOSPC.
 */
int creds_base64_encode(const void *in, size_t len, bool url, char *out, size_t outlen);

/**
 * creds_base64_decode() - strict base64 (padding optional, nothing else
 *                        but the alphabet; non-zero trailing bits refused)
 * @in, @len: the text
 * @out:      the bytes
 * @outlen:   its size
 *
 * Return: the number of bytes, -EINVAL or -ENOSPC.
 */
int creds_base64_decode(const char *in, size_t len, unsigned char *out, size_t outlen);

/* ---- broker-minted JWTs (jwt.c) ------------------------------------------ */

/**
 * creds_jwt_key_load() - read a JWT signing key
 * @pem_file: PEM private key, EC P-256 (ES256) or Ed25519 (EdDSA); a
 *            symlink is refused
 * @key:      the key (EVP_PKEY_free() it)
 * @err:      on failure, a message
 *
 * Return: 0; -EINVAL for another key type or an unreadable PEM; or a
 * negative errno from reading the file.
 */
int creds_jwt_key_load(const char *pem_file, struct evp_pkey_st **key, struct sl_err *err);

/* Frees a key of creds_jwt_key_load(): one the key process holds is
 * dropped there too. NULL is fine. */
void creds_jwt_key_free(struct evp_pkey_st *key);

/* Is @key one creds_jwt_mint() signs with (EC P-256, Ed25519)? */
bool creds_jwt_key_ok(struct evp_pkey_st *key);

/* The JWS signature of @len bytes of @tbs: ES256 R||S or Ed25519, 64
 * bytes (the key process's JWT_SIGN). 0, -EINVAL, -ENOMEM or -EIO. */
int creds_jwt_sign_raw(struct evp_pkey_st *key, const unsigned char *tbs, size_t len,
		       unsigned char sig[64]);

/**
 * creds_jwt_mint() - sign a short-lived JWT
 * @key:   from creds_jwt_key_load() (or any EC P-256 / Ed25519 key)
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
int creds_jwt_mint(struct evp_pkey_st *key, const char *kid, const char *iss, const char *sub,
		   const char *aud, const char *scope, uint64_t iat, uint64_t ttl, char *out,
		   size_t outlen);

/**
 * creds_jwks_from_keys() - the public keys as a JWK Set (RFC 7517)
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
int creds_jwks_from_keys(struct evp_pkey_st *const *keys, const char *const *kids, size_t n,
			 char *out, size_t outlen);

/* ---- OAuth2 client credentials (RFC 6749 4.4), pure helpers -------------- */

/**
 * creds_oauth2_request_body() - the token request's form body
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
int creds_oauth2_request_body(const char *client_id, const struct creds_secret *client_secret,
			      const char *const *scopes, size_t n, char *out, size_t outlen);

/* Largest expires_in accepted (a year); more is taken as a broken server. */
#define CREDS_OAUTH2_EXPIRES_MAX (366ULL * 86400)

/**
 * creds_oauth2_parse_response() - the token from a token endpoint's answer
 * @json:       the response body (not NUL-terminated)
 * @len:        its length
 * @token:      the access_token (creds_secret_free() it)
 * @expires_in: seconds, or 0 when the server did not say
 *
 * A strict JSON scan: one object, no duplicate keys, nesting at most 16,
 * no trailing bytes.  access_token: a non-empty string of visible ASCII
 * (it goes into a header); token_type: "bearer" in any case, required;
 * expires_in: a non-negative integer (a string of digits is accepted too,
 * as some servers send it) at most CREDS_OAUTH2_EXPIRES_MAX.
 *
 * Return: 0; -EINVAL for malformed JSON or a missing/bad member; -EACCES
 * when the server answered an "error" object; -ERANGE for expires_in;
 * -EPROTO for another token_type; -ENOMEM.
 */
int creds_oauth2_parse_response(const char *json, size_t len, struct creds_secret *token,
				uint64_t *expires_in);

/* ---- OAuth2 tokens: the cache and its fetchers (tokens.c) ----------------- */

/* OAuth2 client-credentials tokens: one cache for the broker, filled and
 * refreshed by a small pool of background threads, read by workers without
 * waiting. */

struct creds_tokens_entry;

/* Fetcher threads: fetches of this many entries run at once, so that an
 * endpoint that hangs holds up one thread, never the others' tokens. */
#define CREDS_TOKENS_FETCHERS 4
/* A token endpoint's answer: at most this many bytes, head included. */
#define CREDS_TOKENS_RESPONSE_MAX (64 * 1024)
/* A whole fetch (resolve, connect, TLS, request, answer) ends by then. */
#define CREDS_TOKENS_FETCH_MAX_MS 15000u
/* expires_in 0 or absent: the token is taken to live this long. */
#define CREDS_TOKENS_DEFAULT_EXPIRES_SEC 300u
/* Retries after a failure: 1 s, 2 s, 4 s ... at most this. */
#define CREDS_TOKENS_BACKOFF_MAX_MS 60000u
/* creds_load_secrets() waits at most this for a new token's first fetch. */
#define CREDS_TOKENS_FIRST_WAIT_MS 2000u

struct creds_tokens_config {
	const char *upstream_ca;     /* PEM bundle; NULL or "": the system store */
	const char *resolvers;	     /* as resolver_new(): NULL or "": resolv.conf */
	uint32_t connect_timeout_ms; /* per address; 0: 10 s */
	uint32_t resolve_timeout_ms; /* a name's lookup; 0: RESOLVE_DEADLINE_MS */
	uint32_t fetch_timeout_ms;   /* whole fetch; 0 or more than
				       * CREDS_TOKENS_FETCH_MAX_MS: that */
};

/* What one fetch needs; strings stay valid during the call. */
struct creds_tokens_request {
	const char *cred_name; /* for messages */
	const char *host;      /* DNS name or address literal (no brackets) */
	uint16_t port;
	const char *path; /* path and query */
	const char *client_id;
	const char *const *scopes;
	size_t n_scopes;
	const struct creds_secret *client_secret;
	int cancel_fd; /* readable (POLLIN) once the fetch must end: poll it
			* with the fetch's own fds, never read it */
};

/**
 * typedef creds_tokens_fetch_fn - get one token (the HTTPS fetch, or a test's)
 * @ctx:        the pointer given with it
 * @rq:         what to ask for
 * @token:      on success, the access token (the cache takes it over)
 * @expires_in: on success, seconds; 0 when the server did not say
 * @err:        on failure, why (an HTTP status, a parse error; never a
 *              secret or a token; errno 0 when no call failed)
 *
 * Called on a fetcher thread, without the cache's lock; up to
 * CREDS_TOKENS_FETCHERS calls (for different entries, never two for one) may
 * run at once, so it must be thread-safe. It must end promptly once
 * @rq->cancel_fd is readable (creds_tokens_stop() waits for it), returning
 * -ECANCELED.
 *
 * Return: 0 or a negative errno (-ECANCELED when cancelled).
 */
typedef int creds_tokens_fetch_fn(void *ctx, const struct creds_tokens_request *rq,
				  struct creds_secret *token, uint64_t *expires_in,
				  struct sl_err *err);

/**
 * creds_tokens_start() - start the CREDS_TOKENS_FETCHERS fetcher threads (once; later
 * calls return 0)
 * @cfg:    TLS trust, resolvers and timeouts (copied)
 * @err:    on failure, a message
 *
 * Each thread drops every capability of its own before it fetches (they
 * may be started while the broker still holds them) and takes no
 * signal. All start or none does.
 *
 * Return: 0, or a negative errno (-EINVAL for an unusable upstream_ca).
 */
int creds_tokens_start(const struct creds_tokens_config *cfg, struct sl_err *err);

/**
 * creds_tokens_stop() - end the fetcher threads and wipe every cached token
 *
 * Every fetch in flight is abandoned at once (its socket closed), then
 * every thread is joined. Entries stay
 * allocated for the policies that hold them; creds_tokens_copy() answers
 * -EAGAIN from now on. Safe to call when never started, and twice.
 */
void creds_tokens_stop(void);

/**
 * creds_tokens_set_fetch() - replace the HTTPS fetch (unit tests)
 * @fn:  the function, or NULL for the HTTPS fetch
 * @ctx: its argument (shared by the fetcher threads)
 *
 * Call before creds_tokens_start(). Each fetch reads the pair under the cache's
 * lock, so a fetch never sees one without the other.
 */
void creds_tokens_set_fetch(creds_tokens_fetch_fn *fn, void *ctx);

/**
 * creds_tokens_get() - the cache entry for an oauth2 credential, made or shared
 * @c:             an oauth2 credential of a loaded policy
 * @client_secret: its client secret, as just read (copied: a reload that
 *                 reads a rotated secret updates the entry)
 *
 * Entries are keyed by (token_url, client_id, scopes), so a policy reload
 * or another sandbox with the same credential shares the token already
 * fetched. A new entry is fetched at once (creds_tokens_start() first).
 *
 * Return: a reference (creds_tokens_put() it), or NULL with errno set.
 */
struct creds_tokens_entry *creds_tokens_get(const struct policy_credential *c,
					    const struct creds_secret *client_secret);

/* Drops a reference; the last one wipes the token and the secret. NULL is fine. */
void creds_tokens_put(struct creds_tokens_entry *e);

/**
 * creds_tokens_copy() - the current access token, for one request
 * @e:   the entry
 * @out: on success, a copy (creds_secret_free() it)
 *
 * Never waits for the network: takes the cache's lock for a copy. When no
 * token is usable, asks the fetchers for one (unless it is backing off
 * after a failure, so that requests cannot hammer a failing endpoint).
 *
 * Return: 0; -EAGAIN when no token is usable now; -ENOMEM.
 */
int creds_tokens_copy(struct creds_tokens_entry *e, struct creds_secret *out);

/**
 * creds_tokens_wait_first() - wait for an entry's first fetch to end
 * @e:  the entry
 * @ms: at most this long
 *
 * For the control thread (a new sandbox's first request then finds its
 * token), never for a worker.
 *
 * Return: true when a token is there.
 */
bool creds_tokens_wait_first(struct creds_tokens_entry *e, unsigned ms);

/* Counters since start. */
struct creds_tokens_stats {
	uint64_t fetch_ok;
	uint64_t fetch_failed;
	size_t entries;
};
void creds_tokens_stats(struct creds_tokens_stats *st);

/* ---- the schedule (pure, for tests) --------------------------------------- */

/*
 * A token fetched now with @expires_in_sec (0: CREDS_TOKENS_DEFAULT_EXPIRES_SEC)
 * is handed out for creds_tokens_usable_ms() and refreshed after
 * creds_tokens_refresh_ms(): 80% of its life plus up to 5% more (@jitter, any
 * value), so that tokens fetched together do not all refresh together.
 * Handing out stops a tenth of the life (at most 30 s) early, for the
 * clock skew and the time a request takes to arrive.
 */
uint64_t creds_tokens_usable_ms(uint64_t expires_in_sec);
uint64_t creds_tokens_refresh_ms(uint64_t expires_in_sec, uint32_t jitter);
/* The wait before retry number @failures (1 s doubling, capped). */
uint64_t creds_tokens_backoff_ms(unsigned failures);

/**
 * creds_tokens_dechunk() - decode a chunked body (RFC 9112 7.1) in place
 * @buf: the body as received; decoded into its own start
 * @len: its length
 *
 * Chunk extensions are skipped; trailers are ignored.
 *
 * Return: the decoded length; -EAGAIN when the body is not complete;
 * -EBADMSG when malformed.
 */
long creds_tokens_dechunk(char *buf, size_t len);

#endif
