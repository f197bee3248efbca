// SPDX-License-Identifier: MIT
/* The string table of enum sl_reason (common/reason.h). */
#include "common/reason.h"

#include <errno.h>
#include <string.h>

static const char *const reason_name[] = {
	[SL_REASON_ALLOWED] = "allowed",
	[SL_REASON_INTERCEPTED] = "intercepted",
	[SL_REASON_HTTP_IN_TUNNEL] = "http-in-tunnel",
	[SL_REASON_SECRET_REDACTED] = "secret-redacted",
	[SL_REASON_IDLE_TIMEOUT] = "idle-timeout",
	[SL_REASON_CLIENT_GONE] = "client-gone",
	[SL_REASON_UPSTREAM_GONE] = "upstream-gone",
	[SL_REASON_RESET] = "reset",
	[SL_REASON_CONTROL_REGISTER] = "control-register",
	[SL_REASON_CONTROL_UNREGISTER] = "control-unregister",
	[SL_REASON_CONTROL_RELOAD] = "control-reload",
	[SL_REASON_POLICY_UPDATE] = "policy-update",
	[SL_REASON_PRIVILEGED_EXEC] = "privileged-exec",
	[SL_REASON_NOT_ALLOWLISTED] = "not-allowlisted",
	[SL_REASON_PORT_NOT_ALLOWED] = "port-not-allowed",
	[SL_REASON_ADDRESS_LITERAL] = "address-literal",
	[SL_REASON_ADDRESS_DENIED] = "address-denied",
	[SL_REASON_BROKER_ADDRESS] = "broker-address",
	[SL_REASON_UNKNOWN_SOURCE] = "unknown-source",
	[SL_REASON_UNKNOWN_SYNTHETIC] = "unknown-synthetic",
	[SL_REASON_SANDBOX_DELETED] = "sandbox-deleted",
	[SL_REASON_REDIRECT_OUTSIDE_POLICY] = "redirect-outside-policy",
	[SL_REASON_HOST_MISMATCH] = "host-mismatch",
	[SL_REASON_SNI_MISMATCH] = "sni-mismatch",
	[SL_REASON_RAW_TCP_NOT_ALLOWED] = "raw-tcp-not-allowed",
	[SL_REASON_ECH_REFUSED] = "ech-refused",
	[SL_REASON_POLICY_WITHDRAWN] = "policy-withdrawn",
	[SL_REASON_HOLD_TIMEOUT] = "hold-timeout",
	[SL_REASON_HOLD_REFUSED] = "hold-refused",
	[SL_REASON_HOLD_FULL] = "hold-full",
	[SL_REASON_HOLD_APPROVED] = "hold-approved",
	[SL_REASON_BAD_CLIENT_HELLO] = "bad-client-hello",
	[SL_REASON_EARLY_CLIENT_HELLO] = "early-client-hello",
	[SL_REASON_CONNECT_IN_TLS] = "connect-in-tls",
	[SL_REASON_CONNECT_IN_TUNNEL] = "connect-in-tunnel",
	[SL_REASON_CONNECT_ON_TRANSPARENT] = "connect-on-transparent",
	[SL_REASON_ORIGIN_FORM_ON_PROXY] = "origin-form-on-proxy",
	[SL_REASON_NO_ORIGINAL_DESTINATION] = "no-original-destination",
	[SL_REASON_CONTROL_REFUSED] = "control-refused",
	[SL_REASON_STATE_DAMAGED] = "state-damaged",
	[SL_REASON_PLACEHOLDER_OUT_OF_SCOPE] = "placeholder-out-of-scope",
	[SL_REASON_PLACEHOLDER_LOST] = "placeholder-lost",
	[SL_REASON_PLACEHOLDER_EXPIRED] = "placeholder-expired",
	[SL_REASON_CREDENTIAL_UNAVAILABLE] = "credential-unavailable",
	[SL_REASON_REFLECTION_UNSCANNABLE] = "reflection-unscannable",
	[SL_REASON_CLIENT_TLS] = "client-tls",
	[SL_REASON_TLS_TIMEOUT] = "tls-timeout",
	[SL_REASON_UPSTREAM_TLS] = "upstream-tls",
	[SL_REASON_TLS_LEAF_FAILED] = "tls-leaf-failed",
	[SL_REASON_CONNECTION_LIMIT] = "connection-limit",
	[SL_REASON_BROKER_CONNECTION_LIMIT] = "broker-connection-limit",
	[SL_REASON_BROKER_DRAINING] = "broker-draining",
	[SL_REASON_OUT_OF_MEMORY] = "out-of-memory",
	[SL_REASON_OUT_OF_PIPES] = "out-of-pipes",
	[SL_REASON_RATE_LIMITED] = "rate-limited",
	[SL_REASON_AUDIT_RATE_LIMITED] = "audit-rate-limited",
	[SL_REASON_DNS_FAILURE] = "dns-failure",
	[SL_REASON_DNS_TIMEOUT] = "dns-timeout",
	[SL_REASON_CONNECT_FAILED] = "connect-failed",
	[SL_REASON_CONNECT_TIMEOUT] = "connect-timeout",
	[SL_REASON_UPSTREAM_RESET] = "upstream-reset",
	[SL_REASON_UPSTREAM_TIMEOUT] = "upstream-timeout",
	[SL_REASON_BAD_RESPONSE] = "bad-response",
	[SL_REASON_BAD_RESPONSE_BODY] = "bad-response-body",
	[SL_REASON_HEAD_TIMEOUT] = "head-timeout",
	[SL_REASON_HEAD_TOO_LARGE] = "head-too-large",
	[SL_REASON_BAD_REQUEST] = "bad-request",
	[SL_REASON_BAD_FRAMING] = "bad-framing",
	[SL_REASON_BAD_BODY] = "bad-body",
	[SL_REASON_BAD_TARGET] = "bad-target",
	[SL_REASON_BAD_CONTENT_LENGTH] = "bad-content-length",
	[SL_REASON_BAD_HOST] = "bad-host",
	[SL_REASON_BAD_MESSAGE] = "bad-message",
	[SL_REASON_BAD_METHOD] = "bad-method",
	[SL_REASON_BAD_REQUEST_LINE] = "bad-request-line",
	[SL_REASON_BAD_SCHEME] = "bad-scheme",
	[SL_REASON_BAD_TRANSFER_ENCODING] = "bad-transfer-encoding",
	[SL_REASON_BARE_CR] = "bare-cr",
	[SL_REASON_BARE_LF] = "bare-lf",
	[SL_REASON_CL_AND_TE] = "cl-and-te",
	[SL_REASON_DUPLICATE_CONTENT_LENGTH] = "duplicate-content-length",
	[SL_REASON_DUPLICATE_HOST] = "duplicate-host",
	[SL_REASON_INVALID_CHARACTER] = "invalid-character",
	[SL_REASON_MISSING_HOST] = "missing-host",
	[SL_REASON_NUMERIC_HOST] = "numeric-host",
	[SL_REASON_OBS_FOLD] = "obs-fold",
	[SL_REASON_TOO_MANY_HEADERS] = "too-many-headers",
	[SL_REASON_UNSUPPORTED_VERSION] = "unsupported-version",
	[SL_REASON_USERINFO] = "userinfo",
	[SL_REASON_BAD_IPV6] = "bad-ipv6",
	[SL_REASON_BAD_PORT] = "bad-port",
	[SL_REASON_EMPTY_HOST] = "empty-host",
	[SL_REASON_EMPTY_LABEL] = "empty-label",
	[SL_REASON_IPV6_ZONE] = "ipv6-zone",
	[SL_REASON_LABEL_TOO_LONG] = "label-too-long",
	[SL_REASON_MISSING_PORT] = "missing-port",
	[SL_REASON_NAME_TOO_LONG] = "name-too-long",
	[SL_REASON_PERCENT_ENCODED_HOST] = "percent-encoded-host",
	[SL_REASON_BAD_NAME] = "bad-name",
	[SL_REASON_NOT_A_QUERY] = "not-a-query",
	[SL_REASON_FORMERR] = "formerr",
	[SL_REASON_NOTIMP] = "notimp",
	[SL_REASON_BADVERS] = "badvers",
	[SL_REASON_REPLY_TOO_LARGE] = "reply-too-large",
	[SL_REASON_BAD_RCODE] = "bad-rcode",
	[SL_REASON_SYNTHETIC_POOL_FULL] = "synthetic-pool-full",
	[SL_REASON_SYNTHETIC_JOURNAL_FAILED] = "synthetic-journal-failed",
};

/* A reason added to the enum without a string fails the build here; the
 * unit test catches a hole in the middle (a NULL entry). */
_Static_assert(sizeof(reason_name) / sizeof(reason_name[0]) == SL_REASON_COUNT,
	       "a string for every reason");

const char *sl_reason_name(enum sl_reason r)
{
	return (unsigned)r < SL_REASON_COUNT && reason_name[r] ? reason_name[r] : "unknown";
}

int sl_reason_from_name(const char *name)
{
	/* About a hundred short strings, looked up by tests and tools, not per
	 * request: a linear scan is enough. */
	for (unsigned i = 0; i < SL_REASON_COUNT; i++)
		if (reason_name[i] && strcmp(reason_name[i], name) == 0)
			return (int)i;
	return -ENOENT;
}
