#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# TLS interception: a host in a credential's scope has its TLS ended at the
# broker (a leaf from the sandbox's own CA, which is in the sandbox's bundle),
# on the explicit (CONNECT) and the transparent path; requests inside go
# through the same checks as plain HTTP and get the credential; the upstream
# side is verified (a bad certificate or name is a 502 upstream-tls); hosts
# outside every scope are spliced, and the sandbox sees the origin's own
# certificate. A ClientHello whose SNI is not the CONNECT's host is reset.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

broker_world i1 i2

SECRET="s3cr3t-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$D/secret"
chmod 600 "$D/secret"
broker_config
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
      ports: [80, 443, 8444, 8445]
    - host: other.world.test
      ports: [443, 8443]
    - host: canary.world.test
      ports: [443]
    - host: "*.canary.world.test"
      ports: [443]
  redirects: within-policy
credentials:
  - name: echo-token
    source: { file: $D/secret }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/api/*"] }
    placeholder: ECHO_TOKEN
  - name: other-token
    source: { file: $D/secret }
    inject: { header: X-Other, value: "{secret}" }
    scope: { hosts: [other.world.test, bad.canary.world.test] }
EOF
broker_start || { echo "0 passed, 1 failed"; exit 1; }
t_ok "sluice create" S create "$S1" --policy "$D/pol.yaml"
BUNDLE=/run/sluice-sandboxes/$S1/ca-bundle.crt
STATE=$D/state
t_ok "the sandbox CA is in its bundle" grep -q "BEGIN CERTIFICATE" "$BUNDLE"
t_ok "its certificate is the broker's saved one" \
	bash -c "grep -qF \"\$(sed -n 2p '$STATE/ca/$S1/ca.crt')\" '$BUNDLE'"
t_ok "sluice ca prints the sandbox CA's certificate" S ca "$S1"
t_eq "the same as the broker's" "$(cat "$STATE/ca/$S1/ca.crt")" "$T_OUT"
t_rc "sluice ca for no such sandbox" 1 S ca "$WORLD_PREFIX-nope"
# The key is the key process's (broker/keys/): state_dir/keys/ID.key, ID the
# SHA-256 of the certificate's DER; state_dir/ca holds the certificate only.
KEY1=$STATE/keys/$(openssl x509 -in "$STATE/ca/$S1/ca.crt" -outform DER | sha256sum | cut -d' ' -f1).key
t_eq "the CA key is kept 0600 by the key process" "600" "$(stat -c %a "$KEY1")"
t_rc "  ... not beside the certificate" 1 test -e "$STATE/ca/$S1/ca.key"
t_rc "and is not in the sandbox's bundle" 1 grep -q "PRIVATE KEY" "$BUNDLE"
t_ok "the CA cert is an EC P-256 CA" \
	bash -c "openssl x509 -in '$STATE/ca/$S1/ca.crt' -noout -text | grep -q 'prime256v1' &&
		openssl x509 -in '$STATE/ca/$S1/ca.crt' -noout -text | grep -q 'CA:TRUE'"

# The contained runner sees only what is bound in: the test world's files
# (CA, scripts) and the repository, read-only.
X() { S exec --bind "$D:$D:ro" "$S1" -- "$@"; }
NOPROXY="env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy"
reason() {
	X "$@" -s -m 10 -o /dev/null -D - |
		t_status_reason
}

# --- explicit path (CONNECT) ---------------------------------------------------
t_ok "HTTPS in scope, explicit proxy" X curl -sf -m 10 https://echo.world.test/api/x
t_contains "the echo server saw the injected header" "$(origin /api/x)" "\"Authorization\", \"Bearer $SECRET\""
# The echo server answers with what it got: an origin reflecting the request.
t_not_contains "its answer, reflecting the header, reaches the sandbox without the secret" \
	"$T_OUT" "$SECRET"
t_contains "redacted where it stood" "$T_OUT" "\"Authorization\", \"Bearer ******"
t_ok "the audit line says secret-redacted" \
	grep -q '"reason":"secret-redacted".*"credential":"echo-token"' "$BROKER_AUDIT"
t_contains "asked upstream in an encoding the broker can scan" "$(origin /api/x)" \
	'["Accept-Encoding", "identity"]'
t_ok "a client asking for gzip" X curl -sf -m 10 -H 'Accept-Encoding: gzip' https://echo.world.test/api/gz
t_contains "is answered in identity, scanned" "$(origin /api/gz)" '["Accept-Encoding", "identity"]'
t_not_contains "and redacted" "$T_OUT" "$SECRET"
t_contains "over TLS to the origin" "$T_OUT" '"scheme": "https"'
t_ok "the sandbox sees a leaf from its own CA" X openssl s_client -connect echo.world.test:443 \
	-servername echo.world.test -CAfile "$BUNDLE" -verify_return_error </dev/null
t_contains "issued by the sandbox's CA" "$T_OUT" "sluice sandbox $S1 CA"
t_contains "and naming the host" "$T_OUT" "CN = echo.world.test"
t_ok "the client's own Authorization" X curl -sf -m 10 -H 'Authorization: Bearer mine' https://echo.world.test/api/z
t_eq "is replaced, never kept beside it" "1" "$(echo "$T_OUT" | grep -o '"Authorization"' | wc -l)"
t_not_contains "the client's value is gone" "$T_OUT" "Bearer mine"
PH=$(S env "$S1" | sed -n 's/^ECHO_TOKEN=//p')
t_contains "the sandbox holds a placeholder" "$PH" "sluice-ph-"
t_ok "the placeholder in its header over HTTPS, in scope" X curl -sf -m 10 -H "Authorization: Bearer $PH" https://echo.world.test/api/q
t_contains "gets the secret (no plaintext: allow needed inside TLS)" "$(origin /api/q)" \
	"\"Authorization\", \"Bearer $SECRET\""
t_eq "the placeholder in the query over HTTPS, in scope (an echo would reflect it)" \
	"403 placeholder-out-of-scope" "$(reason curl "https://echo.world.test/api/q?t=$PH")"
t_eq "the placeholder over HTTPS outside its path" "403 placeholder-out-of-scope" \
	"$(reason curl -H "Authorization: Bearer $PH" https://echo.world.test/other)"
t_eq "the placeholder over plain HTTP (no plaintext: allow)" "403 placeholder-out-of-scope" \
	"$(reason curl -H "Authorization: Bearer $PH" http://echo.world.test/api/x)"
t_eq "the placeholder to another intercepted host" "403 placeholder-out-of-scope" \
	"$(reason curl -H "Authorization: Bearer $PH" https://other.world.test/)"
t_ok "outside the path scope: no injection" X curl -sf -m 10 https://echo.world.test/nothing
t_not_contains "no secret" "$T_OUT" "$SECRET"

# Keep-alive: several requests on one intercepted connection, one handshake.
t_ok "three requests on one kept-alive connection" \
	X curl -sf -m 10 https://echo.world.test/api/1 https://echo.world.test/api/2 https://echo.world.test/nothing
t_eq "each in scope one got the secret" "2" \
	"$({ origin /api/1 | tail -n 1; origin /api/2 | tail -n 1; } | grep -c "Bearer $SECRET")"
n0=$(grep -c '"reason":"intercepted"' "$BROKER_AUDIT")
X curl -sf -m 10 -o /dev/null https://echo.world.test/api/1 -o /dev/null https://echo.world.test/api/2 >/dev/null
t_eq "... over a single TLS connection (one interception for two requests)" "1" \
	"$(($(grep -c '"reason":"intercepted"' "$BROKER_AUDIT") - n0))"

# Domain fronting inside the tunnel.
t_eq "a request inside TLS naming another Host" "403 host-mismatch" \
	"$(reason curl -H 'Host: other.world.test' https://echo.world.test/api/x)"
t_eq "a redirect inside TLS leaving the policy" "403 redirect-outside-policy" \
	"$(reason curl "https://echo.world.test/redirect?to=https://evil.example/")"
t_ok "a redirect inside TLS within the policy passes" \
	X curl -s -m 10 -o /dev/null -w '%{http_code}' "https://echo.world.test/redirect?to=https://other.world.test/"
t_eq "as a 302" "302" "$T_OUT"

# The upstream side is verified.
t_eq "an upstream with a self-signed certificate" "502 upstream-tls" \
	"$(reason curl https://other.world.test:8443/)"
t_eq "an upstream whose certificate names another host" "502 upstream-tls" \
	"$(reason curl https://bad.canary.world.test/)"
t_ok "an intercepted host that verifies" X curl -sf -m 10 https://other.world.test/
t_contains "gets its header" "$(origin / | grep '"server": "11.0.2.20:443"' | tail -n 1)" \
	"\"X-Other\", \"$SECRET\""

# Hosts outside every scope are spliced: the origin's own certificate.
t_ok "a host outside every scope is spliced" X curl -sf -m 10 --cacert "$WORLD_CA" https://canary.world.test/
t_not_contains "nothing is injected" "$T_OUT" "$SECRET"
t_ok "with the origin's certificate (the world CA), not the sandbox's" \
	bash -c "ip netns exec '$S1' env -u HTTPS_PROXY curl -sv -m 10 --cacert '$WORLD_CA' \
		https://canary.world.test/ 2>&1 | grep -q 'issuer: CN=sluice test world CA'"

# SNI must name the CONNECT's host.
t_fails "a ClientHello whose SNI is not the CONNECT host is reset" \
	X curl -sf -m 10 --cacert "$WORLD_CA" --connect-to canary.world.test:443:echo.world.test:443 \
	-p -x "http://$(X printenv HTTPS_PROXY | sed 's|http://||')" https://canary.world.test/
t_ok "logged as sni-mismatch" grep -q '"reason":"sni-mismatch"' "$BROKER_AUDIT"

# A kept-alive TLS upstream is used again only if it said nothing while it
# idled: the TLS 1.3 session tickets it sends are no reason for a new
# connection; an answer nobody asked for (/late: a second one 0.3 s after the
# first) is, or it would pass for the next request's answer.
kept_alive() { # [PORT=N] kept_alive PATH1 PATH2
	X env PORT="${PORT:-443}" timeout 20 python3 -c '
import http.client, json, os, ssl, sys, time
h, p = os.environ["HTTPS_PROXY"].split("//")[1].rstrip("/").rsplit(":", 1)
c = http.client.HTTPSConnection(h, int(p), context=ssl.create_default_context(), timeout=10)
c.set_tunnel("echo.world.test", int(os.environ["PORT"]))
def get(path):
    c.request("GET", path)
    b = c.getresponse().read()
    try:
        return json.loads(b)["path"]
    except ValueError:
        return b.decode(errors="replace")
a = get(sys.argv[1])
time.sleep(0.8)
print(a, get(sys.argv[2]))' "$@"
}
t_eq "an HTTPS answer, another 0.3 s after it, then a second request 0.8 s later" \
	"/api/late /api/after-late" "$(kept_alive /api/late /api/after-late)"
t_eq "two requests 0.8 s apart on one kept-alive connection" "/api/k1 /api/k2" "$(kept_alive /api/k1 /api/k2)"
peer() { origin "$1" | python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["peer"].rsplit(":", 1)[1])'; }
t_eq "go over one upstream connection (the broker's port as the origin saw it)" "$(peer /api/k1)" "$(peer /api/k2)"
PL=$(peer /api/late) PA=$(peer /api/after-late)
t_ok "  ... and the request after /late a new one ($PL, then $PA)" test -n "$PL" -a -n "$PA" -a "$PL" != "$PA"
# Records an origin sends while it idles that are not data (a session ticket,
# a key update) are taken in: the next request goes over the same connection.
# tests/world/tlsidle.c sends both 0.2 s after each answer, which says how
# many connections it accepted.
if t_ok "compile the idle-records origin (tests/world/tlsidle.c)" cc -std=gnu11 -O2 -Wall -Wextra \
	-Werror -D_GNU_SOURCE -o "$D/tlsidle" tests/world/tlsidle.c -lssl -lcrypto &&
	world_spawn inet tlsidle "$D/tlsidle" "$WORLD_ECHO4" 8444 "$WORLD_DIR/pki/server.crt" \
		"$WORLD_DIR/pki/server.key" "$D/tlsidle.ready" 60 &&
	t_ok "  ... it listens" wait_for 1 ls "$D/tlsidle.ready"; then
	t_eq "a ticket and a key update while idle: the next request over the same connection" \
		"/api/i1 conn=1 /api/i2 conn=1" "$(PORT=8444 kept_alive /api/i1 /api/i2)"
	t_ok "  ... the origin sent both after the first answer" \
		grep -q "conn 1: /api/i1 answered; ticket and key update sent" "$WORLD_DIR/tlsidle.log"
fi
# A key update that asks the broker to update its keys too: the broker owes
# one of its own, which OpenSSL sends with the next request; whether that
# goes over the same connection or a new one, it is answered.
if world_spawn inet tlsidle-rq "$D/tlsidle" "$WORLD_ECHO4" 8445 "$WORLD_DIR/pki/server.crt" \
	"$WORLD_DIR/pki/server.key" "$D/tlsidle-rq.ready" 60 requested &&
	t_ok "  ... the origin that asks for a key update listens" wait_for 1 ls "$D/tlsidle-rq.ready"; then
	KU=$(PORT=8445 kept_alive /api/j1 /api/j2)
	t_ok "a key update requested while idle: the next request is answered ($KU)" \
		bash -c '[[ $1 =~ ^"/api/j1 conn=1 /api/j2 conn="[12]$ ]]' _ "$KU"
	t_ok "  ... the origin saw no error" bash -c "! grep -q failed '$WORLD_DIR/tlsidle-rq.log'"
fi

# Plain HTTP inside a CONNECT tunnel goes through the HTTP path, each request
# bound to the tunnel's host.
t_ok "plain HTTP through a CONNECT tunnel (curl -p)" X curl -sf -m 10 -p http://echo.world.test/tunnel
t_ok "is logged as http-in-tunnel" grep -q '"reason":"http-in-tunnel"' "$BROKER_AUDIT"
t_eq "a request in the tunnel naming another Host" "403 host-mismatch" \
	"$(reason curl -p -H 'Host: other.world.test' http://echo.world.test/)"
t_ok "the credential applies inside the tunnel as over plain HTTP (no plaintext: allow: none)" \
	X curl -sf -m 10 -p http://echo.world.test/api/p
t_not_contains "no secret over plain HTTP" "$T_OUT" "$SECRET"

# --- transparent path -----------------------------------------------------------
t_ok "HTTPS in scope, transparent path" X $NOPROXY curl -sf -m 10 https://echo.world.test/api/t
t_contains "the echo server saw the injected header" "$(origin /api/t)" "\"Authorization\", \"Bearer $SECRET\""
t_not_contains "its reflecting answer reaches the sandbox redacted" "$T_OUT" "$SECRET"
t_eq "transparent, upstream with a bad certificate" "502 upstream-tls" \
	"$(reason $NOPROXY curl https://other.world.test:8443/)"
t_ok "transparent, a host outside every scope is spliced" \
	X $NOPROXY curl -sf -m 10 --cacert "$WORLD_CA" https://canary.world.test/

# A client that does not trust the sandbox CA gets nothing through.
t_fails "a client trusting only the world CA cannot talk to an intercepted host" \
	X curl -sf -m 10 --cacert "$WORLD_CA" https://echo.world.test/api/x
# The broker logs it when it reads the client's alert: a moment after curl.
audit_has() { local i; for i in $(seq 30); do grep -q "$1" "$BROKER_AUDIT" && return 0; sleep 0.1; done; return 1; }
t_ok "logged as client-tls" audit_has '"reason":"client-tls"'

# --- audit and secrets ------------------------------------------------------------
t_ok "the CONNECT is logged as intercepted" grep -q '"reason":"intercepted"' "$BROKER_AUDIT"
t_ok "requests inside are logged as https with the credential's name" \
	grep -q '"proto":"https".*"credential":"echo-token"' "$BROKER_AUDIT"
t_rc "the secret is not in the audit log" 1 grep -qF "$SECRET" "$BROKER_AUDIT"
t_rc "nor in the broker's output" 1 grep -qF "$SECRET" "$BROKER_LOG"
t_rc "nor in state_dir" 1 grep -rqF "$SECRET" "$STATE"
t_rc "nor in the sandbox's files" 1 grep -rqF "$SECRET" "/run/sluice-sandboxes/$S1" "/etc/netns/$S1"
t_not_contains "nor in its environment" "$(S env "$S1")" "$SECRET"

# --- restart, a second sandbox, delete ----------------------------------------------
broker_stop
broker_start
t_ok "after a broker restart, interception still verifies with the bundle" \
	X curl -sf -m 10 https://echo.world.test/api/r
t_contains "and injects" "$(origin /api/r)" "Bearer $SECRET"
t_ok "a second sandbox" S create "$S2" --policy "$D/pol.yaml"
CA1=$(sed -n 2p "$STATE/ca/$S1/ca.crt")
t_ok "has a CA of its own" test -f "$STATE/ca/$S2/ca.crt"
t_rc "the first sandbox's CA is not in its bundle" 1 grep -qF "$CA1" "/run/sluice-sandboxes/$S2/ca-bundle.crt"
t_ok "delete the first" S delete "$S1"
t_rc "its CA is gone from state_dir" 1 test -e "$STATE/ca/$S1"
t_rc "  ... and its key from the key process's directory" 1 test -e "$KEY1"
# Its emptied directory is renamed out of the way, then removed by a thread.
ca_gone_left() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ -z "$(find "$STATE/ca" -mindepth 1 -maxdepth 1 -name '.gone.*')" ] && return 1
		sleep 0.05
	done
	return 0
}
t_rc "and its directory is removed, not only moved aside (within 5 s)" 1 ca_gone_left
t_eq "the decoys saw nothing" "" "$(world_decoy_hits)"
t_done
