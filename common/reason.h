/* SPDX-License-Identifier: MIT */
/* The reasons sluice gives for a decision: one enum, one string table. */
#ifndef SLUICE_COMMON_REASON_H
#define SLUICE_COMMON_REASON_H

/*
 * Each string is a user contract, seen as X-Sluice-Reason, as the audit
 * log's "reason" and as the reason label of sluice_decisions_total; README
 * ("Answers a client sees", "Troubleshooting by audit reason") lists
 * them all, and tests/unit/test_reason.c fails when the two disagree. A new
 * reason goes here and into README together; renaming one breaks users'
 * alerts and log queries.
 *
 * It lives in common/ because policy/ and dnsfilter/ produce reasons too
 * and must not depend on broker/.
 */
enum sl_reason {
	/* What was allowed, and how an allowed connection ended */
	SL_REASON_ALLOWED,
	SL_REASON_INTERCEPTED,
	SL_REASON_HTTP_IN_TUNNEL,
	SL_REASON_SECRET_REDACTED,
	SL_REASON_IDLE_TIMEOUT,
	SL_REASON_CLIENT_GONE,
	SL_REASON_UPSTREAM_GONE,
	SL_REASON_RESET,
	SL_REASON_CONTROL_REGISTER,
	SL_REASON_CONTROL_UNREGISTER,
	SL_REASON_CONTROL_RELOAD,
	SL_REASON_POLICY_UPDATE,
	SL_REASON_PRIVILEGED_EXEC,
	/* Policy: the target, the source, the bytes */
	SL_REASON_NOT_ALLOWLISTED,
	SL_REASON_PORT_NOT_ALLOWED,
	SL_REASON_ADDRESS_LITERAL,
	SL_REASON_ADDRESS_DENIED,
	SL_REASON_BROKER_ADDRESS,
	SL_REASON_UNKNOWN_SOURCE,
	SL_REASON_UNKNOWN_SYNTHETIC,
	SL_REASON_SANDBOX_DELETED,
	SL_REASON_REDIRECT_OUTSIDE_POLICY,
	SL_REASON_HOST_MISMATCH,
	SL_REASON_SNI_MISMATCH,
	SL_REASON_RAW_TCP_NOT_ALLOWED,
	SL_REASON_ECH_REFUSED,
	SL_REASON_POLICY_WITHDRAWN,
	SL_REASON_HOLD_TIMEOUT,
	SL_REASON_HOLD_REFUSED,
	SL_REASON_HOLD_FULL,
	SL_REASON_HOLD_APPROVED,
	SL_REASON_BAD_CLIENT_HELLO,
	SL_REASON_EARLY_CLIENT_HELLO,
	SL_REASON_CONNECT_IN_TLS,
	SL_REASON_CONNECT_IN_TUNNEL,
	SL_REASON_CONNECT_ON_TRANSPARENT,
	SL_REASON_ORIGIN_FORM_ON_PROXY,
	SL_REASON_NO_ORIGINAL_DESTINATION,
	SL_REASON_CONTROL_REFUSED,
	SL_REASON_STATE_DAMAGED,
	/* Credentials */
	SL_REASON_PLACEHOLDER_OUT_OF_SCOPE,
	SL_REASON_PLACEHOLDER_LOST,
	SL_REASON_PLACEHOLDER_EXPIRED,
	SL_REASON_CREDENTIAL_UNAVAILABLE,
	SL_REASON_REFLECTION_UNSCANNABLE,
	/* TLS interception */
	SL_REASON_CLIENT_TLS,
	SL_REASON_TLS_TIMEOUT,
	SL_REASON_UPSTREAM_TLS,
	SL_REASON_TLS_LEAF_FAILED,
	/* Limits and resources */
	SL_REASON_CONNECTION_LIMIT,
	SL_REASON_BROKER_CONNECTION_LIMIT,
	SL_REASON_BROKER_DRAINING,
	SL_REASON_OUT_OF_MEMORY,
	SL_REASON_OUT_OF_PIPES,
	SL_REASON_RATE_LIMITED,
	SL_REASON_AUDIT_RATE_LIMITED,
	/* Upstream */
	SL_REASON_DNS_FAILURE,
	SL_REASON_DNS_TIMEOUT,
	SL_REASON_CONNECT_FAILED,
	SL_REASON_CONNECT_TIMEOUT,
	SL_REASON_UPSTREAM_RESET,
	SL_REASON_UPSTREAM_TIMEOUT,
	SL_REASON_BAD_RESPONSE,
	SL_REASON_BAD_RESPONSE_BODY,
	/* A malformed or slow request (broker/http.c, broker/authority.c, broker/proxy/) */
	SL_REASON_HEAD_TIMEOUT,
	SL_REASON_HEAD_TOO_LARGE,
	SL_REASON_BAD_REQUEST,
	SL_REASON_BAD_FRAMING,
	SL_REASON_BAD_BODY,
	SL_REASON_BAD_TARGET,
	SL_REASON_BAD_CONTENT_LENGTH,
	SL_REASON_BAD_HOST,
	SL_REASON_BAD_MESSAGE,
	SL_REASON_BAD_METHOD,
	SL_REASON_BAD_REQUEST_LINE,
	SL_REASON_BAD_SCHEME,
	SL_REASON_BAD_TRANSFER_ENCODING,
	SL_REASON_BARE_CR,
	SL_REASON_BARE_LF,
	SL_REASON_CL_AND_TE,
	SL_REASON_DUPLICATE_CONTENT_LENGTH,
	SL_REASON_DUPLICATE_HOST,
	SL_REASON_INVALID_CHARACTER,
	SL_REASON_MISSING_HOST,
	SL_REASON_NUMERIC_HOST,
	SL_REASON_OBS_FOLD,
	SL_REASON_TOO_MANY_HEADERS,
	SL_REASON_UNSUPPORTED_VERSION,
	SL_REASON_USERINFO,
	SL_REASON_BAD_IPV6,
	SL_REASON_BAD_PORT,
	SL_REASON_EMPTY_HOST,
	SL_REASON_EMPTY_LABEL,
	SL_REASON_IPV6_ZONE,
	SL_REASON_LABEL_TOO_LONG,
	SL_REASON_MISSING_PORT,
	SL_REASON_NAME_TOO_LONG,
	SL_REASON_PERCENT_ENCODED_HOST,
	/* DNS (dnsfilter/filter.c, dnsfilter/server.c) */
	SL_REASON_BAD_NAME,
	SL_REASON_NOT_A_QUERY,
	SL_REASON_FORMERR,
	SL_REASON_NOTIMP,
	SL_REASON_BADVERS,
	SL_REASON_REPLY_TOO_LARGE,
	SL_REASON_BAD_RCODE,
	SL_REASON_SYNTHETIC_POOL_FULL,
	SL_REASON_SYNTHETIC_JOURNAL_FAILED,
	SL_REASON_COUNT,
};

/* The decision an audit line names besides "allow", "deny" and "error":
 * audit mode let through what the policy would have refused (its reason
 * is the one it would have got). Spelled here once, for the proxy, the
 * DNS filter and the audit log. */
#define SL_DECISION_WOULD_DENY "would-deny"
/* `unlisted: hold`: the DNS filter answered a name outside the list (a
 * synthetic address) so that its connection comes to the proxy and waits
 * there for approve, refuse or its timeout. */
#define SL_DECISION_HOLD "hold"

/* The reason's string (static), or "unknown" for a value out of range. */
const char *sl_reason_name(enum sl_reason r);

/**
 * sl_reason_from_name() - the reason spelled @name
 * @name: a NUL-terminated reason string, such as "not-allowlisted"
 *
 * Return: its enum value, or -ENOENT if no reason is spelled so.
 */
int sl_reason_from_name(const char *name);

#endif
