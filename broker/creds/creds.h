/* SPDX-License-Identifier: MIT */
/* Credentials, the module's public side: what the proxy and the rest of
 * the broker call.  Secrets and placeholders, a sandbox's placeholder
 * table, the two steps of a request (plan, then rewrite), and the
 * broker-level calls that load a policy's credentials (creds.c).  What the
 * files of broker/creds/ share among themselves is in creds_internal.h. */
#ifndef SLUICE_BROKER_CREDS_H
#define SLUICE_BROKER_CREDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* struct creds_rewrite holds http_set_header entries by value. */
#include "broker/http.h"

struct policy;
struct policy_credential;
struct sandbox;
struct sl_err; /* common/err.h */

/* "sluice-ph-" and 32 lowercase hex digits: 128 random bits. */
#define CREDS_PLACEHOLDER_PREFIX "sluice-ph-"
#define CREDS_PLACEHOLDER_PREFIX_LEN 10
#define CREDS_PLACEHOLDER_HEX 32
#define CREDS_PLACEHOLDER_LEN (CREDS_PLACEHOLDER_PREFIX_LEN + CREDS_PLACEHOLDER_HEX)

/* Largest secret (or file read by creds_file_read()). */
#define CREDS_SECRET_MAX (64 * 1024)
/* Longest credential name (the policy allows 64). */
#define CREDS_NAME_MAX 64

/*
 * A secret in memory the sandbox never reaches: from the secure heap when
 * one is initialised (CRYPTO_secure_malloc_init), else the ordinary heap;
 * wiped by creds_secret_free().  Not NUL-terminated.
 */
struct creds_secret {
	unsigned char *buf;
	size_t len;
};

/**
 * creds_secret_set() - copy bytes into a secret, with creds_secret_load()'s
 *                     content checks
 * @s:   filled on success; creds_secret_free() it
 * @p:   the bytes
 * @len: their number, 1..CREDS_SECRET_MAX
 *
 * Return: 0, -EINVAL or -ENOMEM.
 */
int creds_secret_set(struct creds_secret *s, const void *p, size_t len);

/* Wipes and frees; @s is left empty. Accepts NULL and an empty secret. */
void creds_secret_free(struct creds_secret *s);

/* ---- placeholders -------------------------------------------------------- */

/**
 * creds_placeholder_new() - a fresh placeholder
 * @out: CREDS_PLACEHOLDER_LEN characters and a NUL
 *
 * Return: 0, or -EIO when the random generator fails.
 */
int creds_placeholder_new(char out[CREDS_PLACEHOLDER_LEN + 1]);

/**
 * creds_find_placeholder() - first thing shaped like a placeholder
 * @s:   text, not NUL-terminated
 * @len: its length
 * @off: when not NULL, set to its offset
 *
 * Finds CREDS_PLACEHOLDER_PREFIX followed by 32 lowercase hex digits
 * anywhere in @s, known to any table or not.  Does not allocate.
 *
 * Return: a pointer to it in @s, or NULL.
 */
const char *creds_find_placeholder(const char *s, size_t len, size_t *off);

/* ---- scopes -------------------------------------------------------------- */

/**
 * creds_host_match() - does @host match a scope host pattern?
 * @pattern: "name" (exact) or "*.name" (any subdomain, never the apex)
 * @host:    the host, not NUL-terminated
 * @len:     its length
 *
 * Case-insensitive; one trailing dot on either side is ignored.
 *
 * Return: true on a match.
 */
bool creds_host_match(const char *pattern, const char *host, size_t len);

/* ---- the placeholder table ------------------------------------------------ */

/* Placeholders one sandbox may hold at a time. */
#define CREDS_TABLE_MAX 1024

enum creds_ph_state {
	CREDS_PH_VALID = 0,
	CREDS_PH_UNKNOWN, /* not issued to this sandbox (or long gone) */
	CREDS_PH_EXPIRED, /* its ttl has run out */
	CREDS_PH_REVOKED, /* revoked (sandbox deleted, credential dropped) */
};

/*
 * One sandbox's placeholders: placeholder -> credential name, expiry,
 * revoked flag.  Names, not policy indices, so that entries survive a
 * policy reload that reorders credentials.  Lookups take a read lock
 * (workers); issue and revoke take the write lock (control thread).
 */
struct creds_table;

struct creds_table *creds_table_new(void);
/* Wipes and frees. NULL is fine. */
void creds_table_free(struct creds_table *t);

/**
 * creds_table_issue() - a new placeholder for a credential
 * @t:         the sandbox's table
 * @cred_name: the credential (at most CREDS_NAME_MAX characters)
 * @now:       current time, seconds since the epoch
 * @ttl_sec:   lifetime; 0 for none
 * @out:       the placeholder, NUL-terminated
 *
 * When the table is full, an expired or revoked entry is reused (the
 * oldest first); a later request carrying that one is then "unknown".
 *
 * Return: 0; -ENOSPC when every entry is live; -EINVAL; -EIO.
 */
int creds_table_issue(struct creds_table *t, const char *cred_name, uint64_t now, uint64_t ttl_sec,
		      char out[CREDS_PLACEHOLDER_LEN + 1]);

/**
 * creds_table_insert() - put back a placeholder issued before (state restore)
 * @t:          the table
 * @ph:         the placeholder (checked for shape)
 * @cred_name:  its credential
 * @expires_at: absolute expiry, seconds since the epoch; 0 for none
 *
 * Return: 0; -EEXIST; -ENOSPC; -EINVAL.
 */
int creds_table_insert(struct creds_table *t, const char *ph, const char *cred_name,
		       uint64_t expires_at);

/**
 * creds_table_lookup() - what a placeholder means for this sandbox
 * @t:    the table
 * @ph:   CREDS_PLACEHOLDER_LEN characters (not necessarily NUL-terminated)
 * @now:  current time
 * @name: when not NULL and the placeholder is known, its credential's
 *        name (CREDS_NAME_MAX + 1 bytes)
 *
 * Entries are selected by the first 8 bits of the placeholder's hex
 * digits, then every entry of that bucket is compared in full with
 * CRYPTO_memcmp: timing tells at most those 8 bits (and the bucket's
 * size), which are no help in guessing the other 120.
 *
 * Return: the state.
 */
enum creds_ph_state creds_table_lookup(struct creds_table *t, const char *ph, uint64_t now,
				       char *name);

/* Revokes every placeholder of @cred_name, or when NULL (the sandbox is
 * gone) every placeholder and every grant.
 * Return: how many placeholders were revoked. */
size_t creds_table_revoke(struct creds_table *t, const char *cred_name);

/* Credential names one sandbox may have been given over its life. */
#define CREDS_GRANTS_MAX 1024

/**
 * creds_table_grant() - give a credential to the sandbox, until its ttl ends
 * @t:          the sandbox's table
 * @cred_name:  the credential (at most CREDS_NAME_MAX characters)
 * @expires_at: the end of its ttl, seconds since the epoch; 0 for none
 *
 * A credential's ttl bounds its injection as well as its placeholders:
 * creds_plan_request() injects a credential's header only while the
 * sandbox holds a valid grant of it.  The first grant stays: a credential
 * given already keeps its expiry (its ttl counts from the first time).
 *
 * Return: 0; -EEXIST when granted already (left as it was); -ENOSPC
 * beyond CREDS_GRANTS_MAX names; -ENOMEM; -EINVAL.
 */
int creds_table_grant(struct creds_table *t, const char *cred_name, uint64_t expires_at);

/**
 * creds_table_grant_state() - a credential's grant in this sandbox, now
 * @t:          the table
 * @cred_name:  the credential
 * @now:        current time
 * @expires_at: when not NULL and granted, set to the end of its ttl
 *
 * Return: CREDS_PH_VALID, CREDS_PH_EXPIRED, CREDS_PH_REVOKED, or
 * CREDS_PH_UNKNOWN when never granted.
 */
enum creds_ph_state creds_table_grant_state(struct creds_table *t, const char *cred_name,
					    uint64_t now, uint64_t *expires_at);

/* Calls @fn for each grant (for saving state); stops at a non-zero
 * return and returns it. */
int creds_table_foreach_grant(struct creds_table *t,
			      int (*fn)(const char *cred_name, uint64_t expires_at, bool revoked,
					void *arg),
			      void *arg);

/* Calls @fn for each entry (for saving state); stops at a non-zero
 * return and returns it. */
int creds_table_foreach(struct creds_table *t,
			int (*fn)(const char *ph, const char *cred_name, uint64_t expires_at,
				  bool revoked, void *arg),
			void *arg);

/* ---- one request: decide, then rewrite ------------------------------------ */

enum creds_verdict {
	CREDS_FORWARD = 0,  /* forward; rewrite first when plan->nuse */
	CREDS_OUT_OF_SCOPE, /* placeholder-out-of-scope */
	CREDS_EXPIRED,	    /* placeholder-expired */
	CREDS_REVOKED,	    /* placeholder-revoked */
	CREDS_UNKNOWN,	    /* placeholder-unknown */
	CREDS_PLAINTEXT,    /* placeholder-plaintext */
	CREDS_TOO_MANY,	    /* too-many-placeholders */
	CREDS_VERDICT_COUNT,
};

/* The X-Sluice-Reason / audit reason of a verdict ("" for CREDS_FORWARD). */
const char *creds_verdict_reason(enum creds_verdict v);

/* Distinct placeholders in one request, and credentials used by one. */
#define CREDS_MAX_FOUND 8
#define CREDS_MAX_USES 16

/* creds_plan_request() flags */
#define CREDS_PLAN_PLAINTEXT 0x1 /* the request came over plain HTTP */

struct creds_plan {
	enum creds_verdict verdict;
	/* The credential a refusal concerns (policy index), or -1. */
	int cred;
	/* Placeholders found in the request, in order of appearance. */
	struct {
		char ph[CREDS_PLACEHOLDER_LEN + 1];
		enum creds_ph_state state;
		int cred; /* policy index, or -1 */
	} found[CREDS_MAX_FOUND];
	size_t nfound;
	/*
	 * Credentials the rewrite needs a secret for, by policy index in
	 * ascending order: those whose placeholder the request carries and
	 * those whose header is injected (@inject).  Their names go into the
	 * audit line.
	 */
	int use[CREDS_MAX_USES];
	bool inject[CREDS_MAX_USES];
	size_t nuse;
	/* A credential in scope that was not injected because the request
	 * is plaintext and the credential does not allow it, or -1. */
	int plaintext_withheld;
	/* A credential in scope that was not injected because its ttl in
	 * this sandbox has run out (or the sandbox holds no grant of it:
	 * creds_table_grant()), or -1. */
	int expired_withheld;
};

/**
 * creds_plan_request() - what credentials do to one request
 * @t:     the sandbox's placeholder table
 * @p:     its compiled policy
 * @host:  the host the request goes to; NULL for req->authority's
 * @req:   a non-CONNECT request http_parse_request() accepted
 * @now:   current time (placeholder expiry)
 * @flags: CREDS_PLAN_PLAINTEXT when the request is not inside TLS
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
 * Otherwise the verdict is CREDS_FORWARD and plan->use lists the
 * credentials to apply: every credential with an inject header whose
 * scope holds the request and whose grant in @t is valid at @now (its
 * ttl: see creds_table_grant()), and every credential whose placeholder
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
int creds_plan_request(struct creds_table *t, const struct policy *p, const char *host,
		       const struct http_request *req, uint64_t now, unsigned flags,
		       struct creds_plan *plan);

/* Set entries one rewrite may produce: every client header, the injections. */
#define CREDS_MAX_SET (HTTP_MAX_HEADERS + CREDS_MAX_USES)

/*
 * A rewritten request head, ready for http_write_request_head(): headers
 * to set, each replacing client headers of that name.  Values point into
 * the caller's buffer and hold secrets: creds_rewrite_wipe() it.
 */
struct creds_rewrite {
	struct http_set_header set[CREDS_MAX_SET];
	size_t nset;
	char *buf;
	size_t cap, len;
};

/**
 * creds_rewrite_request() - apply a CREDS_FORWARD plan
 * @plan:    from creds_plan_request() on the same @req
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
int creds_rewrite_request(const struct creds_plan *plan, const struct policy *p,
			  const struct creds_secret *const *secrets, const struct http_request *req,
			  char *buf, size_t buflen, struct creds_rewrite *rw);

/**
 * creds_write_request_head() - the upstream head for a rewritten request
 * @rw:     from creds_rewrite_request()
 * @req:    the request
 * @out:    output (holds secrets: the caller wipes it)
 * @outlen: its size
 *
 * Return: as http_write_request_head().
 */
int creds_write_request_head(const struct creds_rewrite *rw, const struct http_request *req,
			     char *out, size_t outlen);

/* Wipes the values a rewrite wrote. */
void creds_rewrite_wipe(struct creds_rewrite *rw);

/* ---- the broker's credentials (creds.c) ---------------------------------- */

struct broker_config;
/* @cfg: the broker's, kept (it outlives the module): its state_dir, and
 * the fetcher's upstream trust, resolvers and timeouts. */
int creds_init(const struct broker_config *cfg);
/* Reads the secrets of @p's credentials and attaches them to @p; @err
 * (common/err.h) names the credential and its source, never a value. */
int creds_load_secrets(struct policy *p, struct sl_err *err);
/* The secrets attached to @p, by credential index (NULL: none). */
const struct creds_secret *const *creds_secrets(const struct policy *p);
/* Largest number of credentials in a policy (policy/load.c refuses more). */
#define CREDS_MAX 256
/**
 * creds_acquire() - the secrets one request's plan needs, now
 * @p:    the policy the plan was made with
 * @sb:   the sandbox sending the request (a minted token's subject)
 * @host: the host the request goes to (a minted token's audience)
 * @plan: a CREDS_FORWARD plan with nuse > 0
 * @out:  CREDS_MAX pointers; the entries plan->use names are set, the
 *        others left alone
 * @held: CREDS_MAX_USES secrets owned by the caller, empty on entry: room
 *        for values made for this request (a copy of an OAuth2 token, a
 *        minted JWT); creds_release() them once the head is written
 *
 * Return: 0; -EAGAIN when a credential cannot be had now (a token not yet
 * fetched or its endpoint failing: the request is refused with 502
 * credential-unavailable, never sent without it); -ENOKEY; -ENOMEM.
 */
int creds_acquire(const struct policy *p, const struct sandbox *sb, const char *host,
		  const struct creds_plan *plan, const struct creds_secret **out,
		  struct creds_secret *held);
/* Wipes what creds_acquire() put in @held (CREDS_MAX_USES entries). */
void creds_release(struct creds_secret *held);
int creds_sandbox_init(struct sandbox *sb, struct policy *p, bool restore);
int creds_sandbox_sync(struct sandbox *sb, struct policy *p, bool issue_expired);
void creds_sandbox_forget(struct sandbox *sb);
/* Revokes the placeholders of credentials @p does not have (and saves the
 * sandbox's placeholders): an update removed them. */
int creds_sandbox_revoke_dropped(struct sandbox *sb, const struct policy *p);
/* Removes state_dir/placeholders/@name, of a sandbox not registered. */
void creds_sandbox_remove_state(const char *name);
/* "VAR=placeholder" lines for the sandbox's environment. */
int creds_env(struct sandbox *sb, const struct policy *p, char *out, size_t len);
/* The JWK Set (JSON) of every jwt key of the loaded policies; its length,
 * or -ENOSPC, -ENOMEM. A key's kid is the policy's, else its RFC 7638
 * thumbprint; a key loaded by several policies is listed once. */
int creds_jwks(char *out, size_t len);
/* Minted JWTs kept for reuse, over every sandbox (`sluice status`). */
size_t creds_jwt_cached(void);
/* Stops the OAuth2 token fetcher and wipes its tokens (at shutdown). */
void creds_shutdown(void);

#endif
