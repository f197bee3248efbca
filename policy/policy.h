/* SPDX-License-Identifier: MIT */
/* The policy engine: YAML policy files compiled into immutable lookup
 * structures, name matching and the address guard. */
#ifndef SLUICE_POLICY_H
#define SLUICE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_addr;
struct policy;

#define POLICY_ERR_MAX 512

/* An error the user sees: "FILE:LINE:COL: message with `value`". */
struct policy_error {
	char msg[POLICY_ERR_MAX];
	unsigned line; /* 1-based; 0 when the error has no position */
	unsigned col;  /* 1-based */
};

enum policy_redirects {
	POLICY_REDIRECTS_WITHIN_POLICY = 0,
	POLICY_REDIRECTS_SAME_HOST,
	POLICY_REDIRECTS_ANY,
};

/* `mode`: enforce refuses what the policy does not allow; audit lets a
 * name outside the allowlist through and logs it `would-deny` (the address
 * guard, literals and credential rules stay enforced). */
enum policy_mode {
	POLICY_MODE_ENFORCE = 0,
	POLICY_MODE_AUDIT,
};

enum policy_source_kind {
	POLICY_SOURCE_FILE,
	POLICY_SOURCE_ENV,
	POLICY_SOURCE_OAUTH2, /* client-credentials grant; source: client_secret_file */
	POLICY_SOURCE_JWT,    /* minted by the broker; source: key_file */
};

/* `source: { oauth2: {...} }`: the broker fetches an access token. */
struct policy_oauth2 {
	char *token_url;     /* as written: https://HOST[:PORT][/PATH[?QUERY]] */
	char *token_host;    /* lower-cased DNS name, or an address literal
			   * (IPv6 without its brackets) */
	uint16_t token_port; /* 443 unless given */
	char *token_path;    /* path and query, "/" when none */
	char *client_id;
	char **scopes; /* scope tokens (RFC 6749 3.3); n_scopes may be 0 */
	size_t n_scopes;
};

/* `source: { jwt: {...} }`: the broker mints a token per request scope. */
struct policy_jwt {
	char *issuer;
	char *kid;	  /* NULL: the broker derives one */
	char *scope;	  /* the "scope" claim, or NULL */
	uint64_t ttl_sec; /* default 300; 1 s to 1 d */
};

/* A credential as the policy file states it; the secret itself is not here
 * (the broker reads it from the source). */
struct policy_credential {
	char *name;
	enum policy_source_kind source_kind;
	/* file: the secret's path; env: a variable name; oauth2: the
	 * client_secret_file; jwt: the key_file (always an absolute path
	 * but for env) */
	char *source;
	struct policy_oauth2 oauth2; /* POLICY_SOURCE_OAUTH2 only, else zero */
	struct policy_jwt jwt;	     /* POLICY_SOURCE_JWT only, else zero */
	char *inject_header;	     /* NULL when the credential injects no header */
	char *inject_value;	     /* template containing "{secret}" */
	char **hosts;		     /* scope; patterns like allow rules */
	size_t n_hosts;
	char **methods; /* upper-case; n_methods == 0 means any method */
	size_t n_methods;
	char **paths; /* globs, '*' matches any run of characters; 0 means any */
	size_t n_paths;
	char *placeholder; /* environment variable name, or NULL */
	/*
	 * The headers a placeholder is replaced in, and the only places it
	 * may appear: `placeholder_headers`, else the inject header, else
	 * Authorization.  None when there is no placeholder.
	 */
	char **placeholder_headers;
	size_t n_placeholder_headers;
	uint64_t ttl_sec; /* 0: no ttl given */
	bool plaintext_allow;
};

struct policy_limits {
	uint32_t connections;	   /* default 256 */
	uint64_t idle_timeout_sec; /* default 300 */
};

/**
 * policy_load_file() - read, validate and compile a policy file
 * @path: the file
 * @out:  on success, a policy holding one reference (policy_unref() it)
 * @err:  on failure, the message with FILE:LINE:COL
 *
 * Return: 0, or a negative errno (-EINVAL for a policy error).
 */
int policy_load_file(const char *path, struct policy **out, struct policy_error *err);

struct sl_err;
/**
 * policy_error_to_err() - @pe into @err, for a caller that reports one type
 * @pe:  as a loader above left it
 * @r:   that loader's return value
 * @err: the message as it is (FILE:LINE:COL in front: the position stays in
 *       the text, which the user reads unchanged); errno 0 for a policy's
 *       error (-EINVAL), -@r for a system call's (an unreadable file)
 *
 * Return: @r.
 */
int policy_error_to_err(const struct policy_error *pe, int r, struct sl_err *err);

/* As policy_load_file(), for a buffer; @name stands for FILE in messages. */
int policy_load_buffer(const char *name, const char *buf, size_t len, struct policy **out,
		       struct policy_error *err);

/* References are atomic: a compiled policy is shared between threads. */
/* A name approved while a sandbox runs (`sluice approve`): an exact host
 * on @port, or on 80 and 443 when @port is 0. */
struct policy_extra_host {
	const char *host;
	uint16_t port;
};
#define POLICY_EXTRA_MAX 64

/* As policy_load_buffer(), with @extra appended to `egress.allow` as exact
 * `host` rules after the file's own (at most POLICY_EXTRA_MAX). */
int policy_load_buffer_extra(const char *name, const char *buf, size_t len,
			     const struct policy_extra_host *extra, size_t n_extra,
			     struct policy **out, struct policy_error *perr);

struct policy *policy_ref(struct policy *p);
void policy_unref(struct policy *p); /* accepts NULL */

enum policy_decision {
	POLICY_ALLOW = 0,
	POLICY_NOT_ALLOWLISTED,
	POLICY_PORT_NOT_ALLOWED,
	POLICY_BAD_NAME,
	POLICY_DECISION_COUNT,
};

/* "allowed", "not-allowlisted", "port-not-allowed", "bad-name" */
const char *policy_decision_reason(enum policy_decision d);

/**
 * policy_match_name() - is NAME:PORT allowed by a host rule?
 * @p:    compiled policy
 * @name: a host name in any case, with or without one trailing dot
 * @len:  its length
 * @port: the destination port
 * @rule: when not NULL, set to the index of the matching rule, or -1
 *
 * Does not allocate. Return: POLICY_ALLOW or the reason for refusal.
 */
enum policy_decision policy_match_name(const struct policy *p, const char *name, size_t len,
				       uint16_t port, int *rule);

/* Is NAME allowed on any port? (The DNS filter's question.) */
bool policy_name_allowed(const struct policy *p, const char *name, size_t len);

enum guard_origin {
	GUARD_FROM_NAME,    /* an answer for an allowed name */
	GUARD_FROM_LITERAL, /* an address the client wrote itself */
};

enum guard_verdict {
	GUARD_ALLOW = 0,
	GUARD_ADDRESS_DENIED,	/* in a deny range, not carved out */
	GUARD_ADDRESS_LITERAL,	/* a literal no cidr rule allows */
	GUARD_PORT_NOT_ALLOWED, /* a literal in a cidr rule, not on its ports */
	GUARD_VERDICT_COUNT,
};

struct guard_result {
	enum guard_verdict verdict;
	const char *reason; /* "allowed", "address-denied", "address-literal", "port-not-allowed" */
	char range[64];	    /* the deciding prefix ("10.0.0.0/8"), or "" */
	int rule;	    /* cidr rule index that allowed it, or -1 */
};

/**
 * policy_guard() - the address guard: may the broker connect to @a:@port?
 * @p:      compiled policy
 * @a:      the address (one embedding a v4 address, v4-mapped,
 *          v4-compatible, v4-translated, NAT64, 6to4 or ISATAP, is judged
 *          as that v4 address too; Teredo is refused: see guard.c)
 * @port:   destination port
 * @origin: whether the address came from resolving an allowed name
 * @res:    the verdict and why
 *
 * Precedence, defined here once: (1) a `cidr` allow rule that holds @a and
 * lists @port allows it, whatever the ranges say (a carve-out for its ports);
 * (2) a literal that no cidr rule allows is refused; (3) otherwise the most
 * specific prefix among deny_ranges and allow_ranges decides, deny winning a
 * tie; an address in neither is allowed.
 *
 * Does not allocate. Return: res->verdict.
 */
enum guard_verdict policy_guard(const struct policy *p, const struct sl_addr *a, uint16_t port,
				enum guard_origin origin, struct guard_result *res);

/**
 * policy_attach() - keep caller data with a compiled policy
 * @p:       a policy not yet shared with other threads
 * @data:    the data (the broker keeps the credentials' secrets here, so
 *           that they live and die with the policy that names them)
 * @free_fn: called with @data when the last reference goes
 */
void policy_attach(struct policy *p, void *data, void (*free_fn)(void *));
void *policy_attachment(const struct policy *p);

/* Read-only views of the compiled policy. */
size_t policy_credential_count(const struct policy *p);
const struct policy_credential *policy_credential_get(const struct policy *p, size_t i);
enum policy_redirects policy_redirects(const struct policy *p);
enum policy_mode policy_mode(const struct policy *p);
const struct policy_limits *policy_limits(const struct policy *p);
/* `egress.unlisted: hold`? Then a name outside the list waits (broker/proxy/hold.c). */
bool policy_unlisted_hold(const struct policy *p);
/* `egress.hold_timeout` in seconds (default 30, 1 to 600). */
uint64_t policy_hold_timeout(const struct policy *p);
size_t policy_rule_count(const struct policy *p);
/* Does rule @i let bytes that are neither HTTP nor TLS through (`raw_tcp`)? */
bool policy_rule_raw_tcp(const struct policy *p, int i);

/* A one-line description of rule @i ("host *.example.com ports 80,443"). */
const char *policy_rule_text(const struct policy *p, int i);

/**
 * policy_check_name() - validate a host name or `*.` pattern
 * @s, @len: the text
 * @wildcard_ok: whether a leading "*." is accepted
 * @why: set to a static message when invalid
 *
 * Return: true when valid.
 */
bool policy_check_name(const char *s, size_t len, bool wildcard_ok, const char **why);

/**
 * policy_normalize_name() - a host name as the policy compares it
 * @in, @len: the name (one trailing dot is dropped)
 * @out:    at least 254 bytes; may be @in
 * @outlen: its length
 *
 * Labels of letters, digits, '-' and '_', 1-63 each, 253 in all;
 * lowercased.
 *
 * Return: 0 or -EINVAL.
 */
int policy_normalize_name(const char *in, size_t len, char *out, size_t *outlen);

#endif
