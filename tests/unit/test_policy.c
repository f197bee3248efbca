// SPDX-License-Identifier: MIT
/* Unit tests for policy/load.c and policy/match.c: broken policies and the
 * exact FILE:LINE:COL a user is shown, the example policies, defaults,
 * credential fields, name matching and reference counting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/ytree.h"
#include "policy/policy.h"
#include "policy/policy_internal.h" /* struct policy's refs, for the refcount test */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define L61 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define L62 L61 "a"
#define L63 L62 "a"
#define L64 L63 "a"
#define N253 L63 "." L63 "." L63 "." L61 /* the longest name */
#define N254 L63 "." L63 "." L63 "." L62
#define B8 "[[[[[[[["
#define E8 "]]]]]]]]"

/* ---- broken policies ----------------------------------------------------
 * Positions by the rules of policy.h: unknown or duplicate key -> the key;
 * wrong type or bad value -> the value (a list item: the item); missing
 * required key -> the enclosing mapping; YAML errors -> libyaml's mark.
 * The building blocks below state the line each of their lines is on. */

#define V "version: 1\n" /* line 1 */
/* Rules start on line 4; "    - host: " puts the value in column 13 and
 * "      ports: [" the first port in column 15. */
#define RULES V "egress:\n  allow:\n"
/* Lines 1-5: two host rules; credentials from line 6, the first credential's
 * mapping at 7:5, its name value at 7:11; then SRC (8), INJ (9), SCOPE (10). */
#define EG                                \
	V "egress:\n"                     \
	  "  allow:\n"                    \
	  "    - host: api.example.com\n" \
	  "    - host: \"*.x.com\"\n"
#define CREDS EG "credentials:\n  - name: c\n"
#define SRC "    source: { env: TOK }\n"
#define INJ "    inject: { header: Authorization, value: \"Bearer {secret}\" }\n"
#define SCOPE "    scope: { hosts: [api.example.com] }\n"

/* Sources of short-lived credentials, in block style from line 8:
 * "    source:" (8), "      oauth2:" or "      jwt:" (9), then the source's
 * keys from line 10, column 9. */
#define O2 "    source:\n      oauth2:\n"
#define O2_URL "        token_url: https://auth.example.com/token\n" /* value at 20 */
#define O2_ID "        client_id: sluice\n"			     /* value at 20 */
#define O2_SEC "        client_secret_file: /etc/sluice/cs\n"	     /* value at 29 */
#define O2_URLV(u) "        token_url: " u "\n"
#define JW "    source:\n      jwt:\n"
#define JW_KEY "        key_file: /etc/sluice/jwt.pem\n"  /* value at 19 */
#define JW_ISS "        issuer: https://sluice.example\n" /* value at 17 */

struct bad_row {
	const char *yaml;
	unsigned line, col;
	const char *msg; /* a substring of the message */
};

static const struct bad_row bad_rows[] = {
	/* unknown keys, at every level */
	{ V "egres:\n  allow: []\n", 2, 1, "unknown key `egres` in the policy" },
	{ V "egress:\n  allow: []\n  redirect: any\n", 4, 3, "unknown key `redirect` in `egress`" },
	{ RULES "    - host: a.example.com\n      portz: [443]\n", 5, 7,
	  "unknown key `portz` in an allow rule" },
	{ CREDS SRC INJ SCOPE "    expires: 15m\n", 11, 5,
	  "unknown key `expires` in a credential" },
	{ CREDS SRC INJ "    scope: { hosts: [api.example.com], verbs: [GET] }\n", 10, 40,
	  "unknown key `verbs` in `scope`" },
	{ CREDS "    source: { path: /x }\n" INJ SCOPE, 8, 15, "unknown key `path` in `source`" },
	{ CREDS SRC "    inject: { header: X, value: \"{secret}\", to: body }\n" SCOPE, 9, 45,
	  "unknown key `to` in `inject`" },
	{ V "limits:\n  connections: 10\n  conns: 5\n", 4, 3, "unknown key `conns` in `limits`" },
	{ "Version: 1\n", 1, 1, "unknown key `Version`" },

	/* duplicate keys */
	{ V "egress:\n  allow: []\n  allow: []\n", 4, 3, "duplicate key `allow` in `egress`" },
	{ V "version: 1\n", 2, 1, "duplicate key `version` in the policy" },
	{ RULES "    - host: a.example.com\n      ports: [443]\n      ports: [80]\n", 6, 7,
	  "duplicate key `ports` in an allow rule" },
	{ V "egress: { allow: [], \"allow\": [] }\n", 2, 22, "duplicate key `allow`" },

	/* wrong types */
	{ RULES "    - host: a.example.com\n      ports: 443\n", 5, 14,
	  "`ports` must be a list, not a scalar" },
	{ V "egress:\n  allow:\n    host: a.example.com\n", 4, 5,
	  "`allow` must be a list, not a mapping" },
	{ V "egress:\n  - host: a.example.com\n", 3, 3, "`egress` must be a mapping, not a list" },
	{ CREDS SRC INJ "    scope: { hosts: api.example.com }\n", 10, 21,
	  "`hosts` must be a list, not a scalar" },
	{ RULES "    - host: [a.example.com]\n", 4, 13,
	  "`host` must be a single value, not a list" },
	{ RULES "    - a.example.com\n", 4, 7, "must be a mapping, not a scalar" },
	{ V "limits: 5\n", 2, 9, "`limits` must be a mapping, not a scalar" },
	{ V "credentials: {}\n", 2, 14, "`credentials` must be a list, not a mapping" },
	{ "- version: 1\n", 1, 1, "must be a mapping, not a list" },
	{ "just words\n", 1, 1, "must be a mapping, not a scalar" },

	/* CIDRs */
	{ RULES "    - cidr: 10.0.0/8\n", 4, 13, "bad CIDR `10.0.0/8` in `cidr`" },
	{ RULES "    - cidr: 10.0.0.0/33\n", 4, 13, "bad CIDR `10.0.0.0/33`" },
	{ RULES "    - cidr: 2001:db8::/129\n", 4, 13, "bad CIDR `2001:db8::/129`" },
	{ RULES "    - cidr: 10.0.0.1/8\n", 4, 13, "bad CIDR `10.0.0.1/8`: host bits are set" },
	{ RULES "    - cidr: \"2001:db8::1/32\"\n", 4, 13,
	  "bad CIDR `2001:db8::1/32`: host bits are set" },
	{ RULES "    - cidr: api.example.com\n", 4, 13, "bad CIDR `api.example.com`" },
	{ V "egress:\n  deny_ranges: [8.8.8.0/24, 10.0.0.1/8]\n", 3, 29,
	  "bad CIDR `10.0.0.1/8`: host bits are set" },
	{ V "egress:\n  allow_ranges: [300.0.0.0/8]\n", 3, 18,
	  "bad CIDR `300.0.0.0/8` in `allow_ranges`" },
	{ V "egress:\n  deny_ranges: [\"10.0.0.0/08\"]\n", 3, 17, "bad CIDR `10.0.0.0/08`" },
	{ V "egress:\n  deny_ranges:\n    - 8.8.8.0/24\n    - 127.1/8\n", 5, 7,
	  "bad CIDR `127.1/8` in `deny_ranges`" },

	/* ports */
	{ RULES "    - host: a.example.com\n      ports: [0]\n", 5, 15,
	  "port `0` out of range 1-65535" },
	{ RULES "    - host: a.example.com\n      ports: [65536]\n", 5, 15,
	  "port `65536` out of range 1-65535" },
	{ RULES "    - host: a.example.com\n      ports: [99999999999999999999999]\n", 5, 15,
	  "port `99999999999999999999999`" },
	{ RULES "    - host: a.example.com\n      ports: [-1]\n", 5, 15, "bad port `-1`" },
	{ RULES "    - host: a.example.com\n      ports: [443, http]\n", 5, 20, "bad port `http`" },
	{ RULES "    - host: a.example.com\n      ports: [0443]\n", 5, 15, "bad port `0443`" },
	{ RULES "    - host: a.example.com\n      ports: [443, 443]\n", 5, 20,
	  "duplicate port `443`" },
	{ RULES "    - host: a.example.com\n      ports: []\n", 5, 14, "`ports` is empty" },
	{ RULES "    - host: a.example.com\n      raw_tcp: yes\n", 5, 16,
	  "bad value `yes` for `raw_tcp` (true or false)" },
	{ RULES "    - host: a.example.com\n      raw_tcp: [true]\n", 5, 16, "raw_tcp" },
	{ RULES "    - host: a.example.com\n      ports: [443, [80]]\n", 5, 20,
	  "a port must be a number, not a list" },
	{ RULES "    - host: a.example.com\n      ports:\n        - 443\n        - 99999\n", 7, 11,
	  "port `99999` out of range" },

	/* host patterns */
	{ RULES "    - host: a..b.com\n", 4, 13, "bad host pattern `a..b.com`: empty label" },
	{ RULES "    - host: .a.com\n", 4, 13, "empty label" },
	{ RULES "    - host: a.com..\n", 4, 13, "empty label" },
	{ RULES "    - host: " L64 ".com\n", 4, 13, "label longer than 63 characters" },
	{ RULES "    - host: " N254 "\n", 4, 13, "name longer than 253 characters" },
	{ RULES "    - host: a.*.com\n", 4, 13,
	  "bad host pattern `a.*.com`: `*` is allowed only as a leading `*.`" },
	{ RULES "    - host: \"**.com\"\n", 4, 13, "`*` is allowed only as a leading `*.`" },
	{ RULES "    - host: \"*a.com\"\n", 4, 13, "`*` is allowed only as a leading `*.`" },
	{ RULES "    - host: a.com*\n", 4, 13, "`*` is allowed only as a leading `*.`" },
	{ RULES "    - host: \"*\"\n", 4, 13, "`*` is allowed only as a leading `*.`" },
	{ RULES "    - host: \"*.\"\n", 4, 13, "empty name" },
	{ RULES "    - host: \"*.*.com\"\n", 4, 13, "`*` is allowed only as a leading `*.`" },
	{ RULES "    - host: b\xc3\xbc"
		"cher.de\n",
	  4, 13, "non-ASCII name: write it in punycode" },
	{ RULES "    - host: 1.2.3.4\n", 4, 13,
	  "bad host pattern `1.2.3.4`: an address literal is not a host name" },
	{ RULES "    - host: \"*.10.0.0\"\n", 4, 13, "an address literal is not a host name" },
	{ RULES "    - host: \"2001:db8::1\"\n", 4, 13, "invalid character in name" },
	{ RULES "    - host: exa mple.com\n", 4, 13, "invalid character in name" },
	{ RULES "    - host: \"\"\n", 4, 13, "empty value for `host`" },
	{ RULES "    - host: \"a\\0b.com\"\n", 4, 13, "NUL byte in `host`" },
	{ RULES "    - host: a.example.com\n      cidr: 8.8.8.0/24\n", 4, 7,
	  "an allow rule has `host` or `cidr`, not both" },
	{ RULES "    - ports: [443]\n", 4, 7, "an allow rule needs `host` or `cidr`" },

	/* credentials */
	{ CREDS SRC "    placeholder: TOK_A\n" SCOPE "  - name: c\n"
		    "    source: { env: TOK2 }\n    placeholder: TOK_B\n" SCOPE,
	  11, 11, "duplicate credential name `c`" },
	{ CREDS SRC "    placeholder: TOK_A\n" SCOPE "  - name: d\n"
		    "    source: { env: TOK2 }\n    placeholder: TOK_A\n" SCOPE,
	  13, 18, "placeholder `TOK_A` is used by credential `c` too" },
	{ CREDS SRC "    placeholder: 1ABC\n" SCOPE, 9, 18,
	  "placeholder `1ABC` is not a valid environment variable name" },
	{ CREDS SRC "    placeholder: A-B\n" SCOPE, 9, 18,
	  "placeholder `A-B` is not a valid environment variable name" },
	{ CREDS SRC INJ "    scope: { hosts: [evil.com] }\n", 10, 22,
	  "credential scope host `evil.com` is not allowed by egress.allow" },
	{ CREDS SRC INJ "    scope: { hosts: [api.example.com, evil.com] }\n", 10, 39,
	  "credential scope host `evil.com` is not allowed" },
	{ CREDS SRC INJ "    scope: { hosts: [\"*.y.com\"] }\n", 10, 22,
	  "credential scope host `*.y.com` is not allowed" },
	{ CREDS SRC INJ "    scope: { hosts: [x.com] }\n", 10, 22,
	  "credential scope host `x.com` is not allowed" },
	{ CREDS SRC INJ "    scope: { hosts: [\"*.com\"] }\n", 10, 22,
	  "credential scope host `*.com` is not allowed" },
	{ CREDS SRC INJ "    scope: { hosts: [\"*.example.com\"] }\n", 10, 22,
	  "credential scope host `*.example.com` is not allowed" },
	{ CREDS SRC INJ "    scope: { hosts: [\"a..x.com\"] }\n", 10, 22,
	  "bad host pattern `a..x.com`: empty label" },
	{ CREDS SRC INJ "    scope: { hosts: [] }\n", 10, 21, "`hosts` is empty" },
	{ CREDS SRC INJ "    scope: { methods: [GET] }\n", 10, 12, "`scope` needs `hosts`" },
	{ CREDS SRC INJ "    scope: { hosts: [api.example.com], paths: [repos] }\n", 10, 48,
	  "path `repos` must start with `/`" },
	{ CREDS SRC INJ "    scope: { hosts: [api.example.com], methods: [] }\n", 10, 49,
	  "`methods` is empty" },
	{ CREDS SRC INJ "    scope: { hosts: [api.example.com], methods: [\"GE T\"] }\n", 10, 50,
	  "bad method `GE T`" },
	{ CREDS SRC INJ SCOPE "    ttl: 15x\n", 11, 10, "bad duration `15x` for `ttl`" },
	{ CREDS SRC INJ SCOPE "    ttl: 15\n", 11, 10, "bad duration `15` for `ttl`" },
	{ CREDS SRC INJ SCOPE "    ttl: 0s\n", 11, 10, "duration `0s` for `ttl` out of range" },
	{ CREDS SRC INJ SCOPE "    ttl: 367d\n", 11, 10, "duration `367d` for `ttl` out of range" },
	{ CREDS SRC INJ SCOPE "    ttl: 1h 30m\n", 11, 10, "bad duration `1h 30m`" },
	{ CREDS SRC INJ SCOPE "    ttl: -5m\n", 11, 10, "bad duration `-5m`" },
	{ CREDS SRC INJ SCOPE "    plaintext: maybe\n", 11, 16, "unknown plaintext value `maybe`" },
	{ CREDS SRC "    inject: { header: Authorization, value: Bearer }\n" SCOPE, 9, 45,
	  "inject value `Bearer` has no `{secret}`" },
	{ CREDS SRC "    inject: { value: \"Bearer {secret}\" }\n" SCOPE, 9, 13,
	  "`inject` needs `header` and `value`" },
	{ CREDS SRC "    inject: { header: \"Auth orization\", value: \"{secret}\" }\n" SCOPE, 9,
	  23, "bad header name `Auth orization`" },
	{ CREDS SRC "    inject: { header: Content-Length, value: \"{secret}\" }\n" SCOPE, 9, 23,
	  "header `Content-Length` cannot be injected" },
	{ CREDS SRC "    inject: { header: Proxy-Authorization, value: \"{secret}\" }\n" SCOPE, 9,
	  23, "header `Proxy-Authorization` cannot be injected" },
	{ CREDS SRC "    inject: { header: host, value: \"{secret}\" }\n" SCOPE, 9, 23,
	  "header `host` cannot be injected" },
	{ CREDS SRC "    inject: { header: Authorization, value: \"{secret}\\r\\nX: y\" }\n" SCOPE,
	  9, 45, "control character in inject value" },
	{ CREDS "    source: { env: TOK, file: /x }\n" INJ SCOPE, 8, 13,
	  "`source` needs exactly one of `file`, `env`, `oauth2` or `jwt`" },
	{ CREDS "    source: {}\n" INJ SCOPE, 8, 13,
	  "`source` needs exactly one of `file`, `env`" },
	{ CREDS "    source: { env: TOK, jwt: { key_file: /k, issuer: i } }\n" INJ SCOPE, 8, 13,
	  "`source` needs exactly one of" },
	{ CREDS "    source: { env: [TOK] }\n" INJ SCOPE, 8, 20, "`env` must be a single value" },

	/* oauth2 sources */
	{ CREDS O2 O2_URLV("http://auth.example.com/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "token_url `http://auth.example.com/token` must be https:// (the request carries" },
	{ CREDS O2 O2_URLV("ftp://auth.example.com/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "token_url `ftp://auth.example.com/token` is not an https:// URL" },
	{ CREDS O2 O2_URLV("auth.example.com/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "is not an https:// URL" },
	{ CREDS O2 O2_URLV("https://u:p@auth.example.com/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "token_url `https://u:p@auth.example.com/token` must not hold user information" },
	{ CREDS O2 O2_URLV("https:///token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "token_url `https:///token` has no host" },
	{ CREDS O2 O2_URLV("https://auth..example.com/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "bad host in token_url `https://auth..example.com/token`: empty label" },
	{ CREDS O2 O2_URLV("https://auth_ex ample.com/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "bad host in token_url" },
	{ CREDS O2 O2_URLV("https://auth.example.com:0/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "bad port in token_url `https://auth.example.com:0/token` (a number 1-65535)" },
	{ CREDS O2 O2_URLV("https://auth.example.com:65536/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "bad port in token_url" },
	{ CREDS O2 O2_URLV("https://auth.example.com:44x/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "bad port in token_url" },
	{ CREDS O2 O2_URLV("https://auth.example.com:/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "bad port in token_url" },
	{ CREDS O2 O2_URLV("https://[::1/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "bad IPv6 address in token_url `https://[::1/token`" },
	{ CREDS O2 O2_URLV("https://[11.0.2.20]/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "bad IPv6 address in token_url" },
	{ CREDS O2 O2_URLV("https://[::1]x/token") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "bad port in token_url" },
	{ CREDS O2 O2_URLV("https://auth.example.com/token#x") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "token_url `https://auth.example.com/token#x` must not have a fragment" },
	{ CREDS O2 O2_URLV("https://auth.example.com/to ken") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "bad character in token_url `https://auth.example.com/to ken`" },
	{ CREDS O2 O2_URLV("[https://auth.example.com/token]") O2_ID O2_SEC INJ SCOPE, 10, 20,
	  "`token_url` must be a single value, not a list" },
	{ CREDS O2 O2_ID O2_SEC INJ SCOPE, 10, 9, "`oauth2` needs `token_url`" },
	{ CREDS O2 O2_URL O2_SEC INJ SCOPE, 10, 9, "`oauth2` needs `client_id`" },
	{ CREDS O2 O2_URL O2_ID INJ SCOPE, 10, 9, "`oauth2` needs `client_secret_file`" },
	{ CREDS O2 O2_URL O2_ID "        client_secret_file: cs\n" INJ SCOPE, 12, 29,
	  "`client_secret_file` `cs` must be an absolute path" },
	{ CREDS O2 O2_URL "        client_id: \"a\\nb\"\n" O2_SEC INJ SCOPE, 11, 20,
	  "bad `client_id` `a?b` (printable ASCII, at most 256 characters)" },
	{ CREDS O2 O2_URL "        client_id: [a]\n" O2_SEC INJ SCOPE, 11, 20,
	  "`client_id` must be a single value, not a list" },
	{ CREDS O2 O2_URL O2_ID O2_SEC "        scopes: [read, \"a b\"]\n" INJ SCOPE, 13, 24,
	  "bad scope `a b` (visible ASCII without space" },
	{ CREDS O2 O2_URL O2_ID O2_SEC "        scopes: []\n" INJ SCOPE, 13, 17,
	  "`scopes` is empty" },
	{ CREDS O2 O2_URL O2_ID O2_SEC "        scopes: read\n" INJ SCOPE, 13, 17,
	  "`scopes` must be a list, not a scalar" },
	{ CREDS O2 O2_URL O2_ID O2_SEC "        audience: api\n" INJ SCOPE, 13, 9,
	  "unknown key `audience` in `oauth2` (expected one of: token_url, client_id" },
	{ CREDS "    source: { oauth2: https://auth.example.com/token }\n" INJ SCOPE, 8, 23,
	  "`oauth2` must be a mapping, not a scalar" },

	/* jwt sources */
	{ CREDS JW "        key_file: jwt.pem\n" JW_ISS INJ SCOPE, 10, 19,
	  "`key_file` `jwt.pem` must be an absolute path" },
	{ CREDS JW JW_KEY INJ SCOPE, 10, 9, "`jwt` needs `issuer`" },
	{ CREDS JW JW_ISS INJ SCOPE, 10, 9, "`jwt` needs `key_file`" },
	{ CREDS JW JW_KEY JW_ISS "        ttl: 2d\n" INJ SCOPE, 12, 14,
	  "duration `2d` for `ttl` out of range (1s to 1d)" },
	{ CREDS JW JW_KEY JW_ISS "        ttl: 24h1s\n" INJ SCOPE, 12, 14,
	  "duration `24h1s` for `ttl` out of range (1s to 1d)" },
	{ CREDS JW JW_KEY JW_ISS "        ttl: 0s\n" INJ SCOPE, 12, 14,
	  "duration `0s` for `ttl` out of range (1s to 1d)" },
	{ CREDS JW JW_KEY JW_ISS "        ttl: soon\n" INJ SCOPE, 12, 14,
	  "bad duration `soon` for `ttl`" },
	{ CREDS JW JW_KEY JW_ISS "        alg: RS256\n" INJ SCOPE, 12, 9,
	  "unknown key `alg` in `jwt` (expected one of: key_file, issuer, ttl, kid, scope)" },
	{ CREDS JW JW_KEY "        issuer: \"a\\tb\"\n" INJ SCOPE, 11, 17, "bad `issuer` `a?b`" },
	{ CREDS JW JW_KEY JW_ISS "        kid: \"\"\n" INJ SCOPE, 12, 14, "empty value for `kid`" },
	{ CREDS JW JW_KEY JW_ISS "        kid: " L64 L64 "k\n" INJ SCOPE, 12, 14,
	  "(printable ASCII, at most 128 characters)" },
	{ CREDS JW JW_KEY JW_ISS "        scope: [repo]\n" INJ SCOPE, 12, 16,
	  "`scope` must be a single value, not a list" },
	{ CREDS JW JW_KEY JW_KEY JW_ISS INJ SCOPE, 11, 9, "duplicate key `key_file` in `jwt`" },
	{ CREDS "    source: { jwt: [] }\n" INJ SCOPE, 8, 20,
	  "`jwt` must be a mapping, not a list" },
	{ CREDS "    source: { file: secrets/tok }\n" INJ SCOPE, 8, 21,
	  "secret file `secrets/tok` must be an absolute path" },
	{ CREDS "    source: { env: A-B }\n" INJ SCOPE, 8, 20,
	  "`A-B` is not a valid environment variable name" },
	{ CREDS SRC SCOPE, 7, 5, "credential `c` needs `inject` or `placeholder`" },
	{ CREDS SRC INJ SCOPE "    placeholder_headers: [X-T]\n", 11, 26,
	  "`placeholder_headers` needs a `placeholder`" },
	{ CREDS SRC "    placeholder: TOK_A\n" SCOPE "    placeholder_headers: [X-T, Host]\n", 11,
	  32, "header `Host` cannot carry a placeholder (it frames or routes the request)" },
	{ CREDS SRC "    placeholder: TOK_A\n" SCOPE "    placeholder_headers: [content-length]\n",
	  11, 27, "header `content-length` cannot carry a placeholder" },
	{ CREDS SRC "    placeholder: TOK_A\n" SCOPE
		    "    placeholder_headers: [Proxy-Authorization]\n",
	  11, 27, "header `Proxy-Authorization` cannot carry a placeholder" },
	{ CREDS SRC "    placeholder: TOK_A\n" SCOPE "    placeholder_headers: [X:T]\n", 11, 27,
	  "bad header name `X:T`" },
	{ CREDS SRC "    placeholder: TOK_A\n" SCOPE "    placeholder_headers: []\n", 11, 26,
	  "`placeholder_headers` is empty" },
	{ CREDS SRC "    placeholder: TOK_A\n" SCOPE "    placeholder_headers: X-T\n", 11, 26,
	  "`placeholder_headers` must be a list, not a scalar" },
	{ CREDS INJ SCOPE, 7, 5, "credential `c` needs a `source`" },
	{ CREDS SRC INJ, 7, 5, "credential `c` needs a `scope` with `hosts`" },
	{ EG "credentials:\n  - source: { env: TOK }\n" INJ SCOPE, 7, 5,
	  "a credential needs a `name`" },
	{ EG "credentials:\n  - name: \"my cred\"\n" SRC INJ SCOPE, 7, 11,
	  "bad credential name `my cred`" },

	/* mode */
	{ V "mode: permissive\n", 2, 7, "unknown mode `permissive` (expected enforce or audit)" },
	{ V "mode: [audit]\n", 2, 7, "`mode` must be a single value, not a list" },
	{ V "mode: Audit\n", 2, 7, "unknown mode `Audit`" },

	/* egress values */
	{ V "egress:\n  redirects: maybe\n", 3, 14, "unknown redirects value `maybe`" },
	{ V "egress:\n  unlisted: ask\n", 3, 13,
	  "unknown unlisted value `ask` (expected refuse or hold)" },
	{ V "egress:\n  unlisted: [hold]\n", 3, 13,
	  "`unlisted` must be a single value, not a list" },
	{ V "egress:\n  hold_timeout: 11m\n", 3, 17,
	  "duration `11m` for `hold_timeout` out of range (1s to 10m)" },
	{ V "egress:\n  hold_timeout: 0s\n", 3, 17,
	  "duration `0s` for `hold_timeout` out of range (1s to 10m)" },
	{ V "egress:\n  hold_timeout: soon\n", 3, 17, "bad duration `soon` for `hold_timeout`" },
	{ V "egress:\n  deny_ranges: none\n", 3, 16,
	  "`deny_ranges` is `default` or a list of CIDRs, not `none`" },
	{ V "egress:\n  allow_ranges: default\n", 3, 17,
	  "`allow_ranges` must be a list, not a scalar" },

	/* limits */
	{ V "limits:\n  idle_timeout: 5 minutes\n", 3, 17,
	  "bad duration `5 minutes` for `idle_timeout`" },
	{ V "limits:\n  idle_timeout: 0m\n", 3, 17,
	  "duration `0m` for `idle_timeout` out of range" },
	{ V "limits:\n  connections: 0\n", 3, 16,
	  "`connections` must be a number 1-1000000, not `0`" },
	{ V "limits:\n  connections: 1000001\n", 3, 16, "not `1000001`" },
	{ V "limits:\n  connections: -5\n", 3, 16, "not `-5`" },
	{ V "limits:\n  connections: lots\n", 3, 16, "not `lots`" },

	/* version */
	{ "# a comment\negress: {}\n", 2, 1, "missing key `version` (write `version: 1`)" },
	{ "version: 2\n", 1, 10, "unsupported version `2`" },
	{ "version: \"one\"\n", 1, 10, "unsupported version `one`" },
	{ "version: 1.0\n", 1, 10, "unsupported version `1.0`" },
	{ "version: [1]\n", 1, 10, "unsupported version `[...]`" },

	/* empty documents */
	{ "", 1, 1, "empty policy: `version: 1` is required" },
	{ "# nothing but a comment\n", 1, 1, "empty policy" },

	/* YAML itself */
	{ "version: 1\negress: { allow: [\n", 3, 1, "YAML syntax error" },
	{ "version: [1, 2\n", 2, 1, "YAML syntax error" },
	{ "version: 1\n\tegress: {}\n", 2, 1, "YAML syntax error" },
	{ "version: &v 1\n", 1, 10, "YAML anchors are not supported" },
	{ V "egress: &e\n  allow: []\n", 2, 9, "YAML anchors are not supported" },
	{ V "limits: *a\n", 2, 9, "YAML aliases are not supported" },
	{ "version: !!str 1\n", 1, 10, "YAML tags are not supported" },
	{ V "egress: !custom\n  allow: []\n", 2, 9, "YAML tags are not supported" },
	{ V "---\nversion: 1\n", 2, 1, "more than one YAML document" },
	{ V "x: " B8 B8 B8 B8 B8 E8 E8 E8 E8 E8 "\n", 2, 35, "nesting deeper than 32" },
	/* The message names the section once, in backticks (not ``egress``). */
	{ V "egress: { [a]: 1 }\n", 2, 11, "keys in `egress` must be plain words" },
};

static void test_bad_policies(void **state)
{
	size_t i, bad = 0;

	(void)state;
	assert_true(ARRAY_SIZE(bad_rows) >= 30);
	for (i = 0; i < ARRAY_SIZE(bad_rows); i++) {
		const struct bad_row *r = &bad_rows[i];
		struct policy_error err;
		struct policy *p = (struct policy *)&err; /* must be reset to NULL */
		char prefix[64];
		int ret;

		memset(&err, 0x41, sizeof(err));
		ret = policy_load_buffer("t.yaml", r->yaml, strlen(r->yaml), &p, &err);
		snprintf(prefix, sizeof(prefix), "t.yaml:%u:%u: ", r->line, r->col);
		if (ret != -EINVAL || p != NULL || err.line != r->line || err.col != r->col ||
		    !memchr(err.msg, '\0', sizeof(err.msg)) ||
		    strncmp(err.msg, prefix, strlen(prefix)) != 0 || !strstr(err.msg, r->msg)) {
			print_error("row %zu: want %s...%s\n        got %d %u:%u \"%.*s\"\n", i,
				    prefix, r->msg, ret, err.line, err.col, (int)sizeof(err.msg),
				    err.msg);
			bad++;
		}
		if (ret == 0)
			policy_unref(p);
	}
	assert_int_equal(bad, 0);
}

/*
 * A key with no value: the value node has no text of its own; the user must
 * be sent to the key's line, not to the next key's (or past the end of the
 * file).
 */
static void test_empty_value_position(void **state)
{
	static const struct {
		const char *yaml;
		unsigned line, col;
		const char *msg;
	} rows[] = {
		/* Just after the colon, where the value is missing. */
		{ V "egress:\nlimits: {}\n", 2, 8, "`egress` must be a mapping, not a scalar" },
		{ V "egress:\n", 2, 8, "`egress` must be a mapping, not a scalar" },
		{ RULES "    - host:\n      ports: [443]\n", 4, 12, "empty value for `host`" },
	};
	size_t i, bad = 0;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(rows); i++) {
		struct policy_error err;
		struct policy *p;
		int ret =
			policy_load_buffer("t.yaml", rows[i].yaml, strlen(rows[i].yaml), &p, &err);

		if (ret != -EINVAL || err.line != rows[i].line || err.col != rows[i].col ||
		    !strstr(err.msg, rows[i].msg)) {
			print_error("row %zu: want %u:%u, got %d \"%s\"\n", i, rows[i].line,
				    rows[i].col, ret, err.msg);
			bad++;
		}
		if (ret == 0)
			policy_unref(p);
	}
	assert_int_equal(bad, 0);
}

/* A long bad value is cut in the message, and the message stays bounded. */
static void test_long_value_is_cut(void **state)
{
	char yaml[1200], key[1001];
	struct policy_error err;
	struct policy *p;

	(void)state;
	memset(key, 'k', 1000);
	key[1000] = '\0';
	snprintf(yaml, sizeof(yaml), "version: 1\n%s: 1\n", key);
	assert_int_equal(policy_load_buffer("t.yaml", yaml, strlen(yaml), &p, &err), -EINVAL);
	assert_null(p);
	assert_int_equal(err.line, 2);
	assert_int_equal(err.col, 1);
	assert_non_null(strstr(err.msg, "unknown key `kkkk"));
	assert_non_null(strstr(err.msg, "...`"));
	assert_true(strlen(err.msg) < 200);

	/* Control characters in a value are not echoed to the terminal. */
	snprintf(yaml, sizeof(yaml), "version: 1\negress:\n  redirects: \"a\\e[31mb\"\n");
	assert_int_equal(policy_load_buffer("t.yaml", yaml, strlen(yaml), &p, &err), -EINVAL);
	assert_null(strchr(err.msg, '\033'));
	assert_non_null(strstr(err.msg, "`a?[31mb`"));
}

/* A policy's or a YAML document's error into the one error type: the text
 * as the user reads it (FILE:LINE:COL in it), errno 0 for a document's
 * error, the errno of an unreadable file. */
static void test_error_to_err(void **state)
{
	const char *yaml = "version: 1\negress:\n  bogus: 1\n";
	struct policy_error perr;
	struct ytree_error yerr;
	struct ynode *root = NULL;
	struct sl_err e;
	struct policy *p;
	int r;

	(void)state;
	r = policy_load_buffer("t.yaml", yaml, strlen(yaml), &p, &perr);
	assert_int_equal(r, -EINVAL);
	memset(&e, 0, sizeof(e));
	assert_int_equal(policy_error_to_err(&perr, r, &e), -EINVAL);
	assert_string_equal(sl_err_msg(&e), perr.msg);
	assert_true(strncmp(sl_err_msg(&e), "t.yaml:3:3: ", 12) == 0);
	assert_int_equal(sl_err_errno(&e), 0);

	r = policy_load_file("/nonexistent/sluice-test.yaml", &p, &perr);
	assert_int_equal(r, -ENOENT);
	assert_int_equal(policy_error_to_err(&perr, r, &e), -ENOENT);
	assert_string_equal(sl_err_msg(&e), perr.msg);
	assert_int_equal(sl_err_errno(&e), ENOENT);
	assert_int_equal(policy_error_to_err(&perr, r, NULL), -ENOENT);
	assert_string_equal(
		perr.msg, "/nonexistent/sluice-test.yaml: cannot open: No such file or directory");
	/* A directory is refused, not failed: -EINVAL, errno 0. */
	r = policy_load_file("/tmp", &p, &perr);
	assert_int_equal(r, -EINVAL);
	assert_string_equal(perr.msg, "/tmp: not a regular file of at most 1048576 bytes");
	assert_int_equal(policy_error_to_err(&perr, r, &e), -EINVAL);
	assert_int_equal(sl_err_errno(&e), 0);

	r = ytree_load("y.yaml", "a: [1\n", 6, &root, &yerr);
	assert_int_equal(r, -EINVAL);
	memset(&e, 0, sizeof(e));
	assert_int_equal(ytree_error_to_err(&yerr, &e), -EINVAL);
	assert_string_equal(sl_err_msg(&e), yerr.msg);
	assert_true(strncmp(sl_err_msg(&e), "y.yaml:", 7) == 0);
	assert_int_equal(sl_err_errno(&e), 0);
	ytree_free(root);
}

/* ---- good policies ------------------------------------------------------- */

static struct policy *load(const char *yaml)
{
	struct policy_error err;
	struct policy *p = NULL;
	int r = policy_load_buffer("t.yaml", yaml, strlen(yaml), &p, &err);

	if (r != 0)
		print_error("policy did not load: %s\n", err.msg);
	assert_int_equal(r, 0);
	assert_non_null(p);
	return p;
}

static void test_example_files_load(void **state)
{
	glob_t g;
	size_t i, bad = 0;

	(void)state;
	/* Tests run from the repository root. */
	assert_int_equal(glob("policies/*.yaml", 0, NULL, &g), 0);
	assert_true(g.gl_pathc >= 4);
	for (i = 0; i < g.gl_pathc; i++) {
		struct policy_error err;
		struct policy *p;

		if (policy_load_file(g.gl_pathv[i], &p, &err) != 0) {
			print_error("%s: %s\n", g.gl_pathv[i], err.msg);
			bad++;
			continue;
		}
		policy_unref(p);
	}
	globfree(&g);
	assert_int_equal(bad, 0);
}

static void test_github_api(void **state)
{
	const struct policy_credential *c;
	struct policy_error err;
	struct policy *p;

	(void)state;
	assert_int_equal(policy_load_file("policies/github-api.yaml", &p, &err), 0);
	assert_int_equal(policy_rule_count(p), 3);
	assert_string_equal(policy_rule_text(p, 0), "host api.github.com ports 443");
	assert_string_equal(policy_rule_text(p, 1), "host github.com ports 443,22");
	assert_string_equal(policy_rule_text(p, 2), "host *.githubusercontent.com ports 443");
	assert_int_equal(policy_redirects(p), POLICY_REDIRECTS_WITHIN_POLICY);
	assert_int_equal(policy_limits(p)->connections, 128);
	assert_int_equal(policy_limits(p)->idle_timeout_sec, 300);

	assert_int_equal(policy_credential_count(p), 1);
	c = policy_credential_get(p, 0);
	assert_non_null(c);
	assert_null(policy_credential_get(p, 1));
	assert_string_equal(c->name, "github");
	assert_int_equal(c->source_kind, POLICY_SOURCE_FILE);
	assert_string_equal(c->source, "/etc/sluice/secrets/github");
	assert_string_equal(c->inject_header, "Authorization");
	assert_string_equal(c->inject_value, "Bearer {secret}");
	assert_int_equal(c->n_hosts, 1);
	assert_string_equal(c->hosts[0], "api.github.com");
	assert_int_equal(c->n_methods, 2);
	assert_string_equal(c->methods[0], "GET");
	assert_string_equal(c->methods[1], "POST");
	assert_int_equal(c->n_paths, 1);
	assert_string_equal(c->paths[0], "/repos/acme/*");
	assert_string_equal(c->placeholder, "GITHUB_TOKEN");
	/* Where the placeholder may go: by default, the inject header. */
	assert_int_equal(c->n_placeholder_headers, 1);
	assert_string_equal(c->placeholder_headers[0], "Authorization");
	assert_int_equal(c->ttl_sec, 15 * 60);
	assert_false(c->plaintext_allow);

	assert_int_equal(policy_match_name(p, "github.com", 10, 22, NULL), POLICY_ALLOW);
	assert_int_equal(policy_match_name(p, "github.com", 10, 80, NULL), POLICY_PORT_NOT_ALLOWED);
	policy_unref(p);
}

static void test_python_packages(void **state)
{
	struct policy_error err;
	struct policy *p;

	(void)state;
	assert_int_equal(policy_load_file("policies/python-packages.yaml", &p, &err), 0);
	assert_int_equal(policy_rule_count(p), 2);
	assert_string_equal(policy_rule_text(p, 0), "host pypi.org ports 443");
	assert_string_equal(policy_rule_text(p, 1), "host files.pythonhosted.org ports 443");
	assert_int_equal(policy_credential_count(p), 0);
	assert_int_equal(policy_limits(p)->connections, 64);
	assert_int_equal(policy_limits(p)->idle_timeout_sec, 120);
	assert_true(policy_name_allowed(p, "files.pythonhosted.org", 22));
	assert_false(policy_name_allowed(p, "pythonhosted.org", 16));
	policy_unref(p);
}

static void test_reference(void **state)
{
	const struct policy_credential *c;
	struct policy_error err;
	struct policy *p;

	(void)state;
	assert_int_equal(policy_load_file("policies/reference.yaml", &p, &err), 0);
	assert_int_equal(policy_rule_count(p), 3);
	assert_string_equal(policy_rule_text(p, 0), "host api.example.com ports 443");
	assert_string_equal(policy_rule_text(p, 1), "host *.cdn.example.com ports 80,443");
	assert_string_equal(policy_rule_text(p, 2), "cidr 203.0.113.0/24 ports 5432");
	assert_int_equal(policy_redirects(p), POLICY_REDIRECTS_WITHIN_POLICY);
	assert_int_equal(policy_mode(p), POLICY_MODE_ENFORCE);
	assert_int_equal(policy_limits(p)->connections, 256);
	assert_int_equal(policy_limits(p)->idle_timeout_sec, 300);
	assert_int_equal(policy_credential_count(p), 1);
	c = policy_credential_get(p, 0);
	assert_string_equal(c->name, "example");
	assert_int_equal(c->source_kind, POLICY_SOURCE_ENV);
	assert_string_equal(c->source, "EXAMPLE_TOKEN");
	assert_string_equal(c->paths[0], "/v1/*");
	assert_int_equal(c->ttl_sec, 900);
	assert_false(c->plaintext_allow);
	policy_unref(p);
}

static void test_deny_all(void **state)
{
	struct policy_error err;
	struct policy *p;

	(void)state;
	assert_int_equal(policy_load_file("policies/deny-all.yaml", &p, &err), 0);
	assert_int_equal(policy_rule_count(p), 0);
	assert_int_equal(policy_credential_count(p), 0);
	assert_false(policy_name_allowed(p, "example.com", 11));
	assert_int_equal(policy_match_name(p, "example.com", 11, 443, NULL),
			 POLICY_NOT_ALLOWLISTED);
	policy_unref(p);
}

static void test_load_file_errors(void **state)
{
	struct policy_error err;
	struct policy *p = (struct policy *)&err;

	(void)state;
	assert_int_equal(policy_load_file("policies/no-such-file.yaml", &p, &err), -ENOENT);
	assert_null(p);
	assert_non_null(strstr(err.msg, "policies/no-such-file.yaml"));
	assert_int_equal(err.line, 0); /* no position to give */
	/* A directory is not a policy. */
	assert_true(policy_load_file("policies", &p, &err) < 0);
	assert_null(p);
	assert_non_null(strstr(err.msg, "policies"));
}

static void test_defaults(void **state)
{
	struct policy *p = load(V "egress:\n  allow:\n    - host: a.example.com\n");

	(void)state;
	assert_int_equal(policy_rule_count(p), 1);
	assert_string_equal(policy_rule_text(p, 0), "host a.example.com ports 80,443");
	assert_int_equal(policy_match_name(p, "a.example.com", 13, 80, NULL), POLICY_ALLOW);
	assert_int_equal(policy_match_name(p, "a.example.com", 13, 443, NULL), POLICY_ALLOW);
	assert_int_equal(policy_match_name(p, "a.example.com", 13, 8080, NULL),
			 POLICY_PORT_NOT_ALLOWED);
	assert_int_equal(policy_limits(p)->connections, 256);
	assert_int_equal(policy_limits(p)->idle_timeout_sec, 300);
	assert_int_equal(policy_redirects(p), POLICY_REDIRECTS_WITHIN_POLICY);
	assert_int_equal(policy_credential_count(p), 0);
	policy_unref(p);

	/* Only a version: nothing allowed, every default. */
	p = load(V);
	assert_int_equal(policy_rule_count(p), 0);
	assert_int_equal(policy_limits(p)->connections, 256);
	assert_int_equal(policy_limits(p)->idle_timeout_sec, 300);
	assert_int_equal(policy_redirects(p), POLICY_REDIRECTS_WITHIN_POLICY);
	policy_unref(p);
}

/* raw_tcp is per rule: off unless a rule says so, and only on that rule. */
static void test_raw_tcp(void **state)
{
	struct policy *p =
		load(V "egress:\n  allow:\n    - host: a.example.com\n"
		       "    - host: a.example.com\n      ports: [22]\n      raw_tcp: true\n"
		       "    - cidr: 203.0.113.0/24\n      ports: [5432]\n      raw_tcp: false\n");
	int rule = -1;

	(void)state;
	assert_int_equal(policy_match_name(p, "a.example.com", 13, 443, &rule), POLICY_ALLOW);
	assert_false(policy_rule_raw_tcp(p, rule));
	assert_int_equal(policy_match_name(p, "a.example.com", 13, 22, &rule), POLICY_ALLOW);
	assert_true(policy_rule_raw_tcp(p, rule));
	assert_string_equal(policy_rule_text(p, rule), "host a.example.com ports 22 raw_tcp");
	assert_false(policy_rule_raw_tcp(p, 2));
	assert_string_equal(policy_rule_text(p, 2), "cidr 203.0.113.0/24 ports 5432");
	assert_false(policy_rule_raw_tcp(p, -1));
	assert_false(policy_rule_raw_tcp(p, 3));
	policy_unref(p);
}

static void test_values_parsed(void **state)
{
	static const struct {
		const char *yaml;
		enum policy_redirects redirects;
		uint32_t connections;
		uint64_t idle;
	} rows[] = {
		{ V "egress:\n  redirects: same-host\n", POLICY_REDIRECTS_SAME_HOST, 256, 300 },
		{ V "egress:\n  redirects: any\n", POLICY_REDIRECTS_ANY, 256, 300 },
		{ V "egress:\n  redirects: within-policy\n", POLICY_REDIRECTS_WITHIN_POLICY, 256,
		  300 },
		{ V "limits: { connections: 1, idle_timeout: 1s }\n", 0, 1, 1 },
		{ V "limits: { connections: 1000000, idle_timeout: 366d }\n", 0, 1000000,
		  366 * 86400 },
		{ V "limits: { idle_timeout: 1h30m }\n", 0, 256, 5400 },
		{ V "limits: { idle_timeout: 90s }\n", 0, 256, 90 },
		{ V "limits: { idle_timeout: 2d }\n", 0, 256, 172800 },
		{ V "limits: { idle_timeout: 1d1h1m1s }\n", 0, 256, 90061 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(rows); i++) {
		struct policy *p = load(rows[i].yaml);

		assert_int_equal(policy_redirects(p), rows[i].redirects);
		assert_int_equal(policy_limits(p)->connections, rows[i].connections);
		assert_int_equal(policy_limits(p)->idle_timeout_sec, rows[i].idle);
		policy_unref(p);
	}
}

/* `mode`: enforce unless the policy says audit; either order of keys. */
static void test_mode(void **state)
{
	static const struct {
		const char *yaml;
		enum policy_mode mode;
	} rows[] = {
		{ V, POLICY_MODE_ENFORCE },
		{ V "mode: enforce\n", POLICY_MODE_ENFORCE },
		{ V "mode: audit\n", POLICY_MODE_AUDIT },
		{ "mode: audit\n" V "egress:\n  allow:\n    - host: a.example.com\n",
		  POLICY_MODE_AUDIT },
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(rows); i++) {
		struct policy *p = load(rows[i].yaml);

		assert_int_equal(policy_mode(p), rows[i].mode);
		policy_unref(p);
	}
}

static void test_hold_keys(void **state)
{
	static const struct {
		const char *yaml;
		bool hold;
		uint64_t timeout;
	} rows[] = {
		{ V, false, 30 },
		{ V "egress:\n  unlisted: refuse\n", false, 30 },
		{ V "egress:\n  unlisted: hold\n", true, 30 },
		{ V "egress:\n  unlisted: hold\n  hold_timeout: 1s\n", true, 1 },
		{ V "egress:\n  unlisted: hold\n  hold_timeout: 10m\n", true, 600 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(rows); i++) {
		struct policy *p = load(rows[i].yaml);

		assert_int_equal(policy_unlisted_hold(p), rows[i].hold);
		assert_int_equal(policy_hold_timeout(p), rows[i].timeout);
		policy_unref(p);
	}
}

static void test_extra_hosts(void **state)
{
	static const char yaml[] = RULES "    - host: a.example\n";
	static const struct policy_extra_host extra[] = {
		{ "Approved.Example.", 8443 },
		{ "both.example", 0 },
	};
	static const struct policy_extra_host bad[] = { { "*.wild.example", 0 } };
	struct policy_error err;
	struct policy *p;
	int rule = -1;

	(void)state;
	if (policy_load_buffer_extra("t.yaml", yaml, strlen(yaml), extra, 2, &p, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(policy_rule_count(p), 3);
	assert_int_equal(policy_match_name(p, "a.example", 9, 443, &rule), POLICY_ALLOW);
	assert_int_equal(rule, 0); /* the file's rules keep their indices */
	assert_int_equal(policy_match_name(p, "approved.example", 16, 8443, &rule), POLICY_ALLOW);
	assert_string_equal(policy_rule_text(p, rule), "host approved.example ports 8443");
	assert_int_equal(policy_match_name(p, "approved.example", 16, 443, NULL),
			 POLICY_PORT_NOT_ALLOWED);
	assert_int_equal(policy_match_name(p, "both.example", 12, 80, NULL), POLICY_ALLOW);
	assert_int_equal(policy_match_name(p, "both.example", 12, 443, NULL), POLICY_ALLOW);
	assert_int_equal(policy_match_name(p, "x.both.example", 14, 443, NULL),
			 POLICY_NOT_ALLOWLISTED);
	policy_unref(p);
	assert_true(policy_load_buffer_extra("t.yaml", yaml, strlen(yaml), bad, 1, &p, &err) < 0);
	assert_null(p);
	assert_non_null(strstr(err.msg, "bad approved host `*.wild.example`"));
}

static void test_credential_fields(void **state)
{
	const struct policy_credential *c;
	struct policy *p;

	(void)state;
	p = load(
		EG
		"    - host: \"*.com\"\n" /* line 6 */
		"credentials:\n"
		"  - name: lower-methods\n"
		"    source: { env: TOK }\n"
		"    placeholder: TOK_P\n"
		"    scope:\n"
		"      hosts: [api.example.com, \"*.x.com\", \"*.a.x.com\", \"*.y.com\", b.x.com]\n"
		"      methods: [get, Post, delete]\n"
		"      paths: [\"/v1/*\", /v2]\n"
		"    ttl: 1h30m\n"
		"    plaintext: allow\n"
		"  - name: second\n"
		"    source: { file: /run/secrets/second }\n"
		"    inject: { header: X-Api-Key, value: \"{secret}\" }\n"
		"    scope: { hosts: [API.Example.com.] }\n"
		"  - name: third\n"
		"    source: { env: TOK3 }\n"
		"    inject: { header: X-Api-Key, value: \"{secret}\" }\n"
		"    scope: { hosts: [api.example.com] }\n"
		"    placeholder: TOK_3\n"
		"  - name: fourth\n"
		"    source: { env: TOK4 }\n"
		"    inject: { header: X-Api-Key, value: \"{secret}\" }\n"
		"    scope: { hosts: [api.example.com] }\n"
		"    placeholder: TOK_4\n"
		"    placeholder_headers: [X-Token, cookie]\n");
	assert_int_equal(policy_credential_count(p), 4);
	c = policy_credential_get(p, 0);
	assert_string_equal(c->name, "lower-methods");
	assert_int_equal(c->source_kind, POLICY_SOURCE_ENV);
	assert_string_equal(c->source, "TOK");
	assert_null(c->inject_header);
	assert_null(c->inject_value);
	assert_int_equal(c->n_hosts, 5);
	assert_string_equal(c->hosts[1], "*.x.com");
	assert_int_equal(c->n_methods, 3);
	assert_string_equal(c->methods[0], "GET");
	assert_string_equal(c->methods[1], "POST");
	assert_string_equal(c->methods[2], "DELETE");
	assert_int_equal(c->n_paths, 2);
	assert_string_equal(c->paths[1], "/v2");
	assert_string_equal(c->placeholder, "TOK_P");
	/* No inject header: the placeholder goes in Authorization. */
	assert_int_equal(c->n_placeholder_headers, 1);
	assert_string_equal(c->placeholder_headers[0], "Authorization");
	assert_int_equal(c->ttl_sec, 5400);
	assert_true(c->plaintext_allow);

	c = policy_credential_get(p, 1);
	assert_string_equal(c->name, "second");
	assert_int_equal(c->source_kind, POLICY_SOURCE_FILE);
	assert_string_equal(c->source, "/run/secrets/second");
	assert_string_equal(c->inject_header, "X-Api-Key");
	assert_string_equal(c->inject_value, "{secret}");
	assert_int_equal(c->n_methods, 0); /* any method */
	assert_int_equal(c->n_paths, 0);   /* any path */
	assert_null(c->placeholder);
	assert_int_equal(c->n_placeholder_headers, 0);
	assert_int_equal(c->ttl_sec, 0);
	assert_false(c->plaintext_allow);
	/* The inject header by default; or the headers given. */
	c = policy_credential_get(p, 2);
	assert_int_equal(c->n_placeholder_headers, 1);
	assert_string_equal(c->placeholder_headers[0], "X-Api-Key");
	c = policy_credential_get(p, 3);
	assert_int_equal(c->n_placeholder_headers, 2);
	assert_string_equal(c->placeholder_headers[0], "X-Token");
	assert_string_equal(c->placeholder_headers[1], "cookie");
	policy_unref(p);
}

static void test_token_sources(void **state)
{
	const struct policy_credential *c;
	struct policy *p;

	(void)state;
	p = load(EG "credentials:\n"
		    "  - name: o\n"
		    "    source:\n"
		    "      oauth2:\n"
		    "        token_url: HTTPS://Auth.Example.COM.:8443/oauth/token?tenant=a\n"
		    "        client_id: \"sluice broker\"\n"
		    "        client_secret_file: /etc/sluice/cs\n"
		    "        scopes: [\"repo:read\", write]\n"
		    "    inject: { header: Authorization, value: \"Bearer {secret}\" }\n"
		    "    scope: { hosts: [api.example.com] }\n"
		    "  - name: o4\n"
		    "    source: { oauth2: { token_url: \"https://11.0.2.20\", client_id: i,"
		    " client_secret_file: /cs } }\n"
		    "    placeholder: O4\n"
		    "    scope: { hosts: [api.example.com] }\n"
		    "  - name: o6\n"
		    "    source: { oauth2: { token_url: \"https://[2001:DB8::1]:9443?x=1\","
		    " client_id: i, client_secret_file: /cs } }\n"
		    "    placeholder: O6\n"
		    "    scope: { hosts: [api.example.com] }\n"
		    "  - name: j\n"
		    "    source: { jwt: { key_file: /etc/sluice/jwt.pem, issuer: sluice } }\n"
		    "    inject: { header: Authorization, value: \"Bearer {secret}\" }\n"
		    "    scope: { hosts: [a.x.com] }\n"
		    "  - name: j2\n"
		    "    source:\n"
		    "      jwt: { key_file: /k.pem, issuer: \"https://iss\", ttl: 1d, kid: k1,"
		    " scope: \"repo read\" }\n"
		    "    placeholder: J2\n"
		    "    scope: { hosts: [a.x.com] }\n");
	assert_int_equal(policy_credential_count(p), 5);

	c = policy_credential_get(p, 0);
	assert_int_equal(c->source_kind, POLICY_SOURCE_OAUTH2);
	assert_string_equal(c->source, "/etc/sluice/cs");
	assert_string_equal(c->oauth2.token_url,
			    "HTTPS://Auth.Example.COM.:8443/oauth/token?tenant=a");
	assert_string_equal(c->oauth2.token_host, "auth.example.com");
	assert_int_equal(c->oauth2.token_port, 8443);
	assert_string_equal(c->oauth2.token_path, "/oauth/token?tenant=a");
	assert_string_equal(c->oauth2.client_id, "sluice broker");
	assert_int_equal(c->oauth2.n_scopes, 2);
	assert_string_equal(c->oauth2.scopes[0], "repo:read");
	assert_string_equal(c->oauth2.scopes[1], "write");
	assert_null(c->jwt.issuer);

	c = policy_credential_get(p, 1);
	assert_int_equal(c->source_kind, POLICY_SOURCE_OAUTH2);
	assert_string_equal(c->oauth2.token_host, "11.0.2.20");
	assert_int_equal(c->oauth2.token_port, 443);
	assert_string_equal(c->oauth2.token_path, "/");
	assert_int_equal(c->oauth2.n_scopes, 0);
	assert_null(c->oauth2.scopes);

	c = policy_credential_get(p, 2);
	assert_string_equal(c->oauth2.token_host, "2001:DB8::1");
	assert_int_equal(c->oauth2.token_port, 9443);
	assert_string_equal(c->oauth2.token_path, "/?x=1");

	c = policy_credential_get(p, 3);
	assert_int_equal(c->source_kind, POLICY_SOURCE_JWT);
	assert_string_equal(c->source, "/etc/sluice/jwt.pem");
	assert_string_equal(c->jwt.issuer, "sluice");
	assert_int_equal(c->jwt.ttl_sec, 300); /* the default, 5m */
	assert_null(c->jwt.kid);
	assert_null(c->jwt.scope);
	assert_null(c->oauth2.token_url);

	c = policy_credential_get(p, 4);
	assert_int_equal(c->source_kind, POLICY_SOURCE_JWT);
	assert_string_equal(c->source, "/k.pem");
	assert_string_equal(c->jwt.issuer, "https://iss");
	assert_int_equal(c->jwt.ttl_sec, 86400);
	assert_string_equal(c->jwt.kid, "k1");
	assert_string_equal(c->jwt.scope, "repo read");
	policy_unref(p);

	/* The shortest jwt ttl. */
	p = load(EG "credentials:\n  - name: j\n"
		    "    source: { jwt: { key_file: /k.pem, issuer: i, ttl: 1s } }\n" INJ SCOPE);
	assert_int_equal(policy_credential_get(p, 0)->jwt.ttl_sec, 1);
	policy_unref(p);
}

/* Shapes that are valid and must keep loading. */
static void test_good_edge_cases(void **state)
{
	static const char *const yamls[] = {
		RULES "    - host: " N253 "\n",
		RULES "    - host: " L63 ".com\n",
		RULES "    - host: _dmarc.example.com\n",
		RULES "    - host: a.example.com.\n",
		RULES "    - host: \"*.com\"\n",
		RULES "    - host: xn--bcher-kva.de\n",
		RULES "    - host: a.example.com\n      ports: [1, 65535]\n",
		RULES "    - cidr: 0.0.0.0/0\n      ports: [443]\n",
		RULES "    - cidr: \"::/0\"\n      ports: [443]\n",
		RULES "    - cidr: 8.8.8.8\n      ports: [53]\n",
		V "egress:\n  allow: []\n  deny_ranges: [default]\n  allow_ranges: []\n",
		V "egress:\n  deny_ranges: []\n",
		V "egress: {}\n",
		"---\n" V "...\n",
		"# comment first\n" V,
		"version: 1 # trailing comment\n",
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(yamls); i++)
		policy_unref(load(yamls[i]));

	/* Names are stored normalised: lower case, no trailing dot. */
	{
		struct policy *p = load(RULES "    - host: API.Example.COM.\n"
					      "    - host: \"*.CDN.Example.com\"\n");

		assert_string_equal(policy_rule_text(p, 0), "host api.example.com ports 80,443");
		assert_string_equal(policy_rule_text(p, 1), "host *.cdn.example.com ports 80,443");
		policy_unref(p);
	}
	/* Wildcard scopes inside wildcard rules load. */
	policy_unref(
		load(CREDS SRC INJ "    scope: { hosts: [\"*.x.com\", \"*.deep.a.x.com\"] }\n"));
	policy_unref(load(RULES "    - host: \"*.com\"\ncredentials:\n  - name: c\n" SRC INJ
				"    scope: { hosts: [\"*.x.com\", y.com] }\n"));
}

/* ---- name matching ------------------------------------------------------- */

static const char match_policy[] =
	V "egress:\n"
	  "  allow:\n"
	  "    - host: api.github.com\n" /* 0 */
	  "      ports: [443]\n"
	  "    - host: \"*.githubusercontent.com\"\n" /* 1 */
	  "      ports: [443]\n"
	  "    - host: x.com\n"		  /* 2 */
	  "    - host: API.github.com.\n" /* 3: same name, another port */
	  "      ports: [8080]\n"
	  "    - host: \"*.cdn.example.com\"\n" /* 4 */
	  "      ports: [443]\n"
	  "    - host: \"*.example.com\"\n" /* 5 */
	  "      ports: [80]\n"
	  "    - cidr: 8.8.8.0/24\n" /* 6 */
	  "      ports: [53]\n";

static const char *const match_rule_text[] = {
	"host api.github.com ports 443",    "host *.githubusercontent.com ports 443",
	"host x.com ports 80,443",	    "host api.github.com ports 8080",
	"host *.cdn.example.com ports 443", "host *.example.com ports 80",
	"cidr 8.8.8.0/24 ports 53",
};

struct match_row {
	const char *name;
	size_t len; /* 0: strlen(name) */
	uint16_t port;
	enum policy_decision want;
	int rule;
};

#define M(n, port, want, rule) { n, 0, port, want, rule }
#define ALLOW POLICY_ALLOW
#define NOTLISTED POLICY_NOT_ALLOWLISTED
#define BADPORT POLICY_PORT_NOT_ALLOWED
#define BADNAME POLICY_BAD_NAME

static const struct match_row match_rows[] = {
	/* exact names */
	M("api.github.com", 443, ALLOW, 0),
	M("API.GitHub.com", 443, ALLOW, 0),
	M("api.github.com.", 443, ALLOW, 0),
	M("api.github.com", 8080, ALLOW, 3),
	M("api.github.com", 80, BADPORT, -1),
	M("api.github.com.evil.com", 443, NOTLISTED, -1),
	M("evilapi.github.com", 443, NOTLISTED, -1),
	M("a.api.github.com", 443, NOTLISTED, -1),
	M("github.com", 443, NOTLISTED, -1),
	M("api.github.co", 443, NOTLISTED, -1),
	/* wildcards: any depth below, never the apex */
	M("raw.githubusercontent.com", 443, ALLOW, 1),
	M("a.b.githubusercontent.com", 443, ALLOW, 1),
	M("RAW.GitHubUserContent.COM.", 443, ALLOW, 1),
	M("githubusercontent.com", 443, NOTLISTED, -1),
	M("evilgithubusercontent.com", 443, NOTLISTED, -1),
	M("githubusercontent.com.evil.com", 443, NOTLISTED, -1),
	M("raw.githubusercontent.com", 80, BADPORT, -1),
	/* an exact rule is only that name */
	M("x.com", 80, ALLOW, 2),
	M("x.com", 443, ALLOW, 2),
	M("X.COM.", 443, ALLOW, 2),
	M("x.com", 22, BADPORT, -1),
	M("x.com.evil.com", 443, NOTLISTED, -1),
	M("evilx.com", 443, NOTLISTED, -1),
	M("a.x.com", 443, NOTLISTED, -1),
	/* nested wildcards: the longer suffix first, then the shorter */
	M("a.cdn.example.com", 443, ALLOW, 4),
	M("a.cdn.example.com", 80, ALLOW, 5),
	M("cdn.example.com", 80, ALLOW, 5),
	M("cdn.example.com", 443, BADPORT, -1),
	M("example.com", 80, NOTLISTED, -1),
	/* cidr rules are for addresses, not names */
	M("8.8.8.8", 53, NOTLISTED, -1),
	/* bad names */
	M("", 443, BADNAME, -1),
	M(".", 443, BADNAME, -1),
	M("..", 443, BADNAME, -1),
	M("x.com..", 443, BADNAME, -1),
	M(".x.com", 443, BADNAME, -1),
	M("a..x.com", 443, BADNAME, -1),
	M("raw .githubusercontent.com", 443, BADNAME, -1),
	M("*.githubusercontent.com", 443, BADNAME, -1),
	M("b\xc3\xbc"
	  "cher.githubusercontent.com",
	  443, BADNAME, -1),
	M(L64 ".githubusercontent.com", 443, BADNAME, -1),
	M(L63 ".githubusercontent.com", 443, ALLOW, 1),
	/* the length is what counts: an embedded NUL is part of the name, and
	 * bytes past @len are not */
	{ "x.com\0.evil", 11, 443, BADNAME, -1 },
	{ "raw.githubusercontent.com\0", 26, 443, BADNAME, -1 },
	{ "api.github.comXXX", 14, 443, ALLOW, 0 },
	{ "x.com.evil.com", 5, 443, ALLOW, 2 },
	{ "x.com.evil.com", 6, 443, ALLOW, 2 },
};

static enum policy_decision match_row(const struct policy *p, const struct match_row *r, int *rule)
{
	return policy_match_name(p, r->name, r->len ? r->len : strlen(r->name), r->port, rule);
}

static void test_match_name(void **state)
{
	struct policy *p = load(match_policy);
	size_t i, bad = 0;

	(void)state;
	assert_int_equal(policy_rule_count(p), ARRAY_SIZE(match_rule_text));
	for (i = 0; i < ARRAY_SIZE(match_rule_text); i++)
		assert_string_equal(policy_rule_text(p, (int)i), match_rule_text[i]);

	for (i = 0; i < ARRAY_SIZE(match_rows); i++) {
		const struct match_row *r = &match_rows[i];
		int rule = 12345;
		enum policy_decision d = match_row(p, r, &rule);
		bool allowed;

		if (d != r->want || rule != r->rule ||
		    (r->rule >= 0 &&
		     strcmp(policy_rule_text(p, rule), match_rule_text[r->rule]) != 0)) {
			print_error("row %zu \"%s\":%u: got %s rule %d, want %s rule %d\n", i,
				    r->name, r->port, policy_decision_reason(d), rule,
				    policy_decision_reason(r->want), r->rule);
			bad++;
		}
		/* The rule out-parameter is optional. */
		if (match_row(p, r, NULL) != d) {
			print_error("row %zu: differs without the rule argument\n", i);
			bad++;
		}
		/* On any port: allowed exactly when some port is. */
		allowed = policy_name_allowed(p, r->name, r->len ? r->len : strlen(r->name));
		if (allowed != (r->want == ALLOW || r->want == BADPORT)) {
			print_error("row %zu \"%s\": policy_name_allowed = %d\n", i, r->name,
				    allowed);
			bad++;
		}
	}
	policy_unref(p);
	assert_int_equal(bad, 0);
}

static void test_match_name_lengths(void **state)
{
	/* 253 characters is the longest name (254 with its trailing dot). */
	static const char sfx[] = ".githubusercontent.com"; /* 22 */
	char name[400];
	struct policy *p = load(match_policy);
	size_t n;

	(void)state;
	memset(name, 'a', sizeof(name));
	for (n = 24; n < 300; n++) {
		enum policy_decision d;
		size_t k;

		/* Labels of 50 so that only the total length matters. */
		memset(name, 'a', n);
		for (k = 50; k < n - 22; k += 51)
			name[k] = '.';
		memcpy(name + n - 22, sfx, 22);
		if (name[n - 23] == '.')
			continue;
		d = policy_match_name(p, name, n, 443, NULL);
		assert_int_equal(d, n <= 253 ? POLICY_ALLOW : POLICY_BAD_NAME);
		name[n] = '.';
		d = policy_match_name(p, name, n + 1, 443, NULL);
		assert_int_equal(d, n <= 253 ? POLICY_ALLOW : POLICY_BAD_NAME);
	}
	/* Megabytes of name are refused, not copied. */
	{
		size_t big = 1 << 20;
		char *huge = malloc(big);

		assert_non_null(huge);
		memset(huge, 'a', big);
		assert_int_equal(policy_match_name(p, huge, big, 443, NULL), POLICY_BAD_NAME);
		assert_false(policy_name_allowed(p, huge, big));
		free(huge);
	}
	policy_unref(p);
}

static void test_match_null_policy(void **state)
{
	int rule = 7;

	(void)state;
	/* No policy, no name. */
	assert_int_equal(policy_match_name(NULL, "x.com", 5, 443, &rule), POLICY_BAD_NAME);
	assert_int_equal(rule, -1);
	assert_false(policy_name_allowed(NULL, "x.com", 5));
}

static void test_reasons(void **state)
{
	struct policy *p = load(match_policy);

	(void)state;
	assert_string_equal(policy_decision_reason(POLICY_ALLOW), "allowed");
	assert_string_equal(policy_decision_reason(POLICY_NOT_ALLOWLISTED), "not-allowlisted");
	assert_string_equal(policy_decision_reason(POLICY_PORT_NOT_ALLOWED), "port-not-allowed");
	assert_string_equal(policy_decision_reason(POLICY_BAD_NAME), "bad-name");
	assert_string_equal(policy_decision_reason(POLICY_DECISION_COUNT), "unknown");
	assert_string_equal(policy_decision_reason((enum policy_decision) - 1), "unknown");
	assert_string_equal(policy_rule_text(p, -1), "");
	assert_string_equal(policy_rule_text(p, 7), "");
	assert_string_equal(policy_rule_text(p, 1000000), "");
	policy_unref(p);
}

/* Many rules: the hash tables hold them all, and duplicates chain. */
static void test_many_rules(void **state)
{
	size_t n = 1000, i, len = 0, cap = n * 64 + 64;
	char *yaml = malloc(cap), name[64];
	struct policy *p;
	int rule;

	(void)state;
	assert_non_null(yaml);
	len += (size_t)snprintf(yaml + len, cap - len, "version: 1\negress:\n  allow:\n");
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(yaml + len, cap - len,
					"    - { host: \"%sh%zu.example.com\", ports: [%zu] }\n",
					i % 2 ? "*." : "", i / 2, 1000 + i);
	p = load(yaml);
	assert_int_equal(policy_rule_count(p), n);
	for (i = 0; i < n; i++) {
		int k = snprintf(name, sizeof(name), "%sh%zu.example.com", i % 2 ? "a." : "",
				 i / 2);

		assert_int_equal(policy_match_name(p, name, (size_t)k, (uint16_t)(1000 + i), &rule),
				 POLICY_ALLOW);
		assert_int_equal(rule, (int)i);
	}
	/* Exact h0 (rule 0, port 1000) and wildcard *.h0 (rule 1, port 1001)
	 * are different names: the exact one is not a subdomain of itself. */
	assert_int_equal(policy_match_name(p, "h0.example.com", 14, 1001, NULL),
			 POLICY_PORT_NOT_ALLOWED);
	assert_int_equal(policy_match_name(p, "a.h0.example.com", 16, 1000, NULL),
			 POLICY_PORT_NOT_ALLOWED);
	assert_int_equal(policy_match_name(p, "h999.example.com", 16, 1000, NULL),
			 POLICY_NOT_ALLOWLISTED);
	policy_unref(p);
	free(yaml);
}

/* policy_check_name() directly: what the loader and the CLI call. */
static void test_check_name(void **state)
{
	static const struct {
		const char *s;
		bool wildcard_ok, ok;
		const char *why;
	} rows[] = {
		{ "a.example.com", false, true, NULL },
		{ "a.example.com.", false, true, NULL },
		{ "A-B_c.Example.com", false, true, NULL },
		{ "*.example.com", true, true, NULL },
		{ "*.example.com", false, false, "a wildcard is not allowed here" },
		{ "example", false, true, NULL },
		{ "", false, false, "empty name" },
		{ ".", false, false, "empty name" },
		{ "*.", true, false, "empty name" },
		{ "a..b", false, false, "empty label" },
		{ L63 ".com", false, true, NULL },
		{ L64 ".com", false, false, "label longer than 63 characters" },
		{ N253, false, true, NULL },
		{ N253 ".", false, true, NULL },
		{ N254, false, false, "name longer than 253 characters" },
		{ "*." N253, true, true, NULL },
		{ "a.*.com", true, false, "`*` is allowed only as a leading `*.`" },
		{ "1.2.3.4", false, false,
		  "an address literal is not a host name: use a `cidr` rule" },
		{ "a.123", false, false,
		  "an address literal is not a host name: use a `cidr` rule" },
		{ "123.a", false, true, NULL },
		{ "b\xc3\xbc"
		  "cher.de",
		  false, false, "non-ASCII name: write it in punycode (xn--)" },
		{ "a/b.com", false, false, "invalid character in name" },
	};
	size_t i, bad = 0;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(rows); i++) {
		const char *why = NULL;
		bool ok =
			policy_check_name(rows[i].s, strlen(rows[i].s), rows[i].wildcard_ok, &why);

		if (ok != rows[i].ok || (!ok && (!why || strcmp(why, rows[i].why) != 0))) {
			print_error("policy_check_name(\"%.40s\") = %d (%s)\n", rows[i].s, ok,
				    why ? why : "-");
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

/* ---- reference counting -------------------------------------------------- */

static void test_refcount(void **state)
{
	struct policy *p = load(match_policy);

	(void)state;
	assert_int_equal(atomic_load(&p->refs), 1);
	assert_ptr_equal(policy_ref(p), p);
	assert_int_equal(atomic_load(&p->refs), 2);
	policy_unref(p);
	assert_int_equal(atomic_load(&p->refs), 1);
	/* Still usable after the other holder let go. */
	assert_int_equal(policy_match_name(p, "x.com", 5, 80, NULL), POLICY_ALLOW);
	policy_unref(p); /* frees: valgrind sees any leak or later use */
	policy_unref(NULL);
}

#define REF_THREADS 4
#define REF_ROUNDS 20000

static void *ref_worker(void *arg)
{
	struct policy *p = arg;
	int i;

	for (i = 0; i < REF_ROUNDS; i++) {
		struct policy *q = policy_ref(p);

		if (policy_match_name(q, "api.github.com", 14, 443, NULL) != POLICY_ALLOW)
			return (void *)1;
		policy_unref(q);
	}
	return NULL;
}

static void test_refcount_threads(void **state)
{
	struct policy *p = load(match_policy);
	pthread_t t[REF_THREADS];
	int i;

	(void)state;
	for (i = 0; i < REF_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, ref_worker, p), 0);
	for (i = 0; i < REF_THREADS; i++) {
		void *ret;

		assert_int_equal(pthread_join(t[i], &ret), 0);
		assert_null(ret);
	}
	/* No increment or decrement was lost. */
	assert_int_equal(atomic_load(&p->refs), 1);
	policy_unref(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_policies),
		cmocka_unit_test(test_empty_value_position),
		cmocka_unit_test(test_long_value_is_cut),
		cmocka_unit_test(test_error_to_err),
		cmocka_unit_test(test_example_files_load),
		cmocka_unit_test(test_github_api),
		cmocka_unit_test(test_python_packages),
		cmocka_unit_test(test_reference),
		cmocka_unit_test(test_deny_all),
		cmocka_unit_test(test_load_file_errors),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_raw_tcp),
		cmocka_unit_test(test_values_parsed),
		cmocka_unit_test(test_hold_keys),
		cmocka_unit_test(test_extra_hosts),
		cmocka_unit_test(test_credential_fields),
		cmocka_unit_test(test_token_sources),
		cmocka_unit_test(test_good_edge_cases),
		cmocka_unit_test(test_match_name),
		cmocka_unit_test(test_match_name_lengths),
		cmocka_unit_test(test_match_null_policy),
		cmocka_unit_test(test_reasons),
		cmocka_unit_test(test_mode),
		cmocka_unit_test(test_many_rules),
		cmocka_unit_test(test_check_name),
		cmocka_unit_test(test_refcount),
		cmocka_unit_test(test_refcount_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
