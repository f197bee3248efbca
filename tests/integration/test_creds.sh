#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: alone (run.sh): a 6 s credential ttl that a loaded machine has outrun
# Credentials over plain HTTP: the sandbox holds placeholders only; the
# broker injects the secret in scope (plaintext: allow), replaces the
# client's own header, and refuses a placeholder outside its scope, expired,
# over plain HTTP when not allowed, or from another sandbox. The secret's
# bytes appear nowhere the sandbox or the logs can show.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

broker_world c1 c2

SECRET="s3cr3t-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
STRICT="strict-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$D/secret"
chmod 600 "$D/secret"
broker_config
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
    - host: other.world.test
credentials:
  - name: echo-token
    source: { file: $D/secret }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], methods: [GET], paths: ["/api/*"] }
    placeholder: ECHO_TOKEN
    plaintext: allow
  - name: strict
    source: { env: SLUICE_TEST_STRICT }
    scope: { hosts: [echo.world.test], paths: ["/strict/*"] }
    placeholder: STRICT_TOKEN
  - name: short
    source: { file: $D/secret }
    scope: { hosts: [echo.world.test], paths: ["/short/*"] }
    placeholder: SHORT_TOKEN
    placeholder_headers: [X-Short]
    plaintext: allow
    ttl: 6s
  - name: short-inject
    source: { file: $D/secret }
    inject: { header: X-Ttl, value: "{secret}" }
    scope: { hosts: [echo.world.test], paths: ["/ttl/*"] }
    plaintext: allow
    ttl: 6s
EOF
# The env-sourced secret is in the broker's environment only.
SLUICE_TEST_STRICT=$STRICT broker_start || { echo "0 passed, 1 failed"; exit 1; }
t_ok "sluice create" S create "$S1" --policy "$D/pol.yaml"
created=$(date +%s%N)
t_ok "sluice env" S env "$S1"
ENV1=$T_OUT
PH=$(echo "$ENV1" | sed -n 's/^ECHO_TOKEN=//p')
PH_STRICT=$(echo "$ENV1" | sed -n 's/^STRICT_TOKEN=//p')
PH_SHORT=$(echo "$ENV1" | sed -n 's/^SHORT_TOKEN=//p')
t_contains "the sandbox gets a placeholder" "$PH" "sluice-ph-"
t_eq "of 42 characters (128 random bits)" "42" "${#PH}"
t_not_contains "the environment holds no secret" "$ENV1" "$SECRET"
t_not_contains "nor the env-sourced one" "$ENV1" "$STRICT"
X() { S exec "$S1" -- "$@"; }
NOPROXY="env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy"
# First, while the short-lived placeholder (ttl 6s) is young.
t_ok "a short-lived placeholder works in time" X curl -sf -m 10 -H "X-Short: $PH_SHORT" http://echo.world.test/short/x
t_contains "and is swapped" "$(origin '/short/x' | tail -n 1)" "\"X-Short\", \"$SECRET\""
t_ok "a short-lived inject credential in time" X curl -sf -m 10 http://echo.world.test/ttl/x
t_contains "is injected" "$(origin '/ttl/x' | tail -n 1)" "\"X-Ttl\", \"$SECRET\""

t_ok "in scope: the header is injected (explicit proxy)" X curl -sf -m 10 http://echo.world.test/api/x
t_contains "the echo server saw the secret" "$(origin '/api/x' | tail -n 1)" "\"Authorization\", \"Bearer $SECRET\""
t_ok "in scope, transparent path" X $NOPROXY curl -sf -m 10 http://echo.world.test/api/y
t_contains "the echo server saw the secret" "$(origin '/api/y' | tail -n 1)" "\"Authorization\", \"Bearer $SECRET\""
t_ok "the client's own Authorization" X curl -sf -m 10 -H 'Authorization: Bearer mine' http://echo.world.test/api/z
t_eq "is replaced, never kept beside it" "1" "$(origin /api/z | tail -n 1 | grep -o '"Authorization"' | wc -l)"
t_not_contains "the client's value is gone" "$(origin '/api/z' | tail -n 1)" "Bearer mine"
t_ok "the placeholder in its inject header, in scope" X curl -sf -m 10 -H "Authorization: Bearer $PH" http://echo.world.test/api/h
t_contains "gets the secret" "$(origin '/api/h' | tail -n 1)" "\"Authorization\", \"Bearer $SECRET\""
t_not_contains "and no placeholder" "$(origin '/api/h' | tail -n 1)" "sluice-ph-"
t_ok "outside the path scope: nothing injected" X curl -sf -m 10 http://echo.world.test/other
t_not_contains "no secret" "$(origin '/other' | tail -n 1)" "$SECRET"
reason() {
	X "$@" -s -m 10 -o /dev/null -D - |
		t_status_reason
}
# Paths a server may read as another path (outside /api/) never match.
for p in '/api/..;/x' '/api/%252e%252e/x' '/api/%c0%ae%c0%ae/x' '/api/..%00/x' '/api/..%09/x'; do
	t_ok "path $p: forwarded" X curl -sf -m 10 --path-as-is "http://echo.world.test$p"
	t_ok "path $p: the origin got it" test -n "$(origin "$p")"
	t_not_contains "path $p: without the secret" "$(origin "$p" | tail -n 1)" "$SECRET"
	t_eq "path $p: its placeholder is refused" "403 placeholder-out-of-scope" \
		"$(reason curl --path-as-is -H "Authorization: Bearer $PH" "http://echo.world.test$p")"
done
t_eq "the placeholder sent to another allowed host" "403 placeholder-out-of-scope" \
	"$(reason curl -H "Authorization: Bearer $PH" http://other.world.test/)"
t_eq "the placeholder with a method outside scope" "403 placeholder-out-of-scope" \
	"$(reason curl -X POST -H "Authorization: Bearer $PH" http://echo.world.test/api/x)"
# A method override is judged by the method it asks for (the scope is GET).
t_ok "a GET overridden to GET" X curl -sf -m 10 -H "X-HTTP-Method-Override: get" http://echo.world.test/api/o
t_contains "is in scope" "$(origin '/api/o' | tail -n 1)" "\"Authorization\", \"Bearer $SECRET\""
t_ok "a GET overridden to DELETE: forwarded" X curl -sf -m 10 -H "x-http-method-override: DELETE" http://echo.world.test/api/o
t_not_contains "without the secret" "$(origin '/api/o' | tail -n 1)" "$SECRET"
t_ok "X-HTTP-Method: forwarded" X curl -sf -m 10 -H "X-HTTP-Method: PUT" http://echo.world.test/api/o
t_not_contains "without the secret" "$(origin '/api/o' | tail -n 1)" "$SECRET"
t_eq "the placeholder with ?_method=DELETE" "403 placeholder-out-of-scope" \
	"$(reason curl -H "Authorization: Bearer $PH" "http://echo.world.test/api/x?a=1&_method=DELETE")"
t_eq "the placeholder with X-Method-Override: POST" "403 placeholder-out-of-scope" \
	"$(reason curl -H "Authorization: Bearer $PH" -H "X-Method-Override: POST" http://echo.world.test/api/x)"
t_eq "the placeholder inside Basic credentials to another host" "403 placeholder-out-of-scope" \
	"$(reason curl -u "user:$PH" http://other.world.test/)"
t_eq "a credential without plaintext: allow, over plain HTTP" "403 placeholder-out-of-scope" \
	"$(reason curl -H "Authorization: Bearer $PH_STRICT" http://echo.world.test/strict/x)"
# Placeholders are replaced only in the headers their credential names:
# anywhere else an origin that reflects the request (this echo server)
# would hand the secret back, so they are refused even in scope.
t_eq "the placeholder in the query, in scope" "403 placeholder-out-of-scope" \
	"$(reason curl "http://echo.world.test/api/q?token=$PH")"
t_eq "the placeholder in the path, in scope" "403 placeholder-out-of-scope" \
	"$(reason curl "http://echo.world.test/api/$PH")"
t_eq "the placeholder in another header, in scope" "403 placeholder-out-of-scope" \
	"$(reason curl -H "X-Token: $PH" http://echo.world.test/api/h)"
t_eq "the placeholder in Referer, in scope" "403 placeholder-out-of-scope" \
	"$(reason curl -H "Referer: http://echo.world.test/?t=$PH" http://echo.world.test/api/h)"
t_eq "a placeholder-only credential's outside its header" "403 placeholder-out-of-scope" \
	"$(reason curl -H "X-Other: $PH_SHORT" http://echo.world.test/short/x)"
t_eq "... or in Authorization, when it names another" "403 placeholder-out-of-scope" \
	"$(reason curl -H "Authorization: Bearer $PH_SHORT" http://echo.world.test/short/x)"
t_eq "the placeholder in a CONNECT head" "403 placeholder-out-of-scope" \
	"$(reason curl -s --proxy-header "X-T: $PH" --cacert "$WORLD_CA" https://echo.world.test/)"
# Wait (bounded) until 7 s after the create: past the ttl.
for _ in $(seq 80); do [ $(($(date +%s%N) - created)) -gt 7000000000 ] && break; sleep 0.1; done
t_eq "and is refused after its ttl" "403 placeholder-expired" \
	"$(reason curl -H "X-Short: $PH_SHORT" http://echo.world.test/short/x)"
# The ttl bounds the injection too, not only the placeholder.
t_ok "after its ttl, a request in the inject credential's scope" X curl -sf -m 10 http://echo.world.test/ttl/x
t_not_contains "goes without it" "$(origin '/ttl/x' | tail -n 1)" "X-Ttl"
t_not_contains "(no secret)" "$(origin '/ttl/x' | tail -n 1)" "$SECRET"
t_ok "its audit line names the credential it went without" \
	bash -c "grep '\"path\":\"/ttl/x\"' '$BROKER_AUDIT' | tail -n 1 | grep -q '\"credential\":\"short-inject\"'"

t_ok "a second sandbox" S create "$S2" --policy "$D/pol.yaml"
t_eq "another sandbox's placeholder is refused" "403 placeholder-out-of-scope" \
	"$(S exec "$S2" -- curl -s -m 10 -o /dev/null -D - -H "X-Token: $PH" http://echo.world.test/api/x |
		t_status_reason)"
broker_stop
SLUICE_TEST_STRICT=$STRICT broker_start
t_ok "the broker restarts" test -n "$BROKER_PID"
t_eq "the same placeholder after a restart" "$PH" "$(S env "$S1" | sed -n 's/^ECHO_TOKEN=//p')"
t_ok "and it still works" X curl -sf -m 10 http://echo.world.test/api/r
t_contains "injected after the restart" "$(origin '/api/r' | tail -n 1)" "Bearer $SECRET"
t_ok "a restart does not restart a ttl" X curl -sf -m 10 http://echo.world.test/ttl/x
t_not_contains "(still not injected)" "$(origin '/ttl/x' | tail -n 1)" "X-Ttl"
t_eq "nor the expired placeholder's" "403 placeholder-expired" \
	"$(reason curl -H "X-Short: $PH_SHORT" http://echo.world.test/short/x)"
t_ok "delete the first sandbox" S delete "$S1"
t_eq "its placeholder, from the second sandbox, after delete" "403 placeholder-out-of-scope" \
	"$(S exec "$S2" -- curl -s -m 10 -o /dev/null -D - -H "X-Token: $PH" http://echo.world.test/api/x |
		t_status_reason)"

t_contains "refusals are audited with the credential's name" "$(cat "$BROKER_AUDIT")" '"credential":"echo-token"'
t_not_contains "the secret is nowhere in the audit log" "$(cat "$BROKER_AUDIT")" "$SECRET"
t_not_contains "nor the env secret" "$(cat "$BROKER_AUDIT")" "$STRICT"
t_not_contains "nor in the broker's output" "$(cat "$BROKER_LOG")" "$SECRET"
t_ok "nor in the broker's state_dir" bash -c "! grep -rqF '$SECRET' '$WORLD_DIR/state'"
t_ok "nor in the sandbox's files" bash -c "! grep -rqF '$SECRET' /run/sluice-sandboxes/$S2 /etc/netns/$S2"

# --- JWT kids: one key per kid, across every loaded policy ---------------------------------
# A verifier picks the key of the JWK Set by kid: a second key under a kid
# that names a key already is refused, in the same policy or another
# sandbox's; the same key under the same kid is one key.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$D/k1.pem" 2>/dev/null
openssl genpkey -algorithm ED25519 -out "$D/k2.pem" 2>/dev/null
chmod 600 "$D/k1.pem" "$D/k2.pem"
jwt_policy() { # FILE KEY... : one jwt credential per key, all with kid team-1
	local f=$1 i=0 k
	shift
	printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\ncredentials:\n' >"$f"
	for k in "$@"; do
		i=$((i + 1))
		printf '  - name: jwt-%s\n    source: { jwt: { key_file: %s, issuer: "https://sluice.test", kid: team-1 } }\n    inject: { header: Authorization, value: "Bearer {secret}" }\n    scope: { hosts: [echo.world.test], paths: ["/j%s/*"] }\n' \
			"$i" "$k" "$i" >>"$f"
	done
}
jwt_policy "$D/jwt-a.yaml" "$D/k1.pem"
jwt_policy "$D/jwt-b.yaml" "$D/k2.pem"
jwt_policy "$D/jwt-ab.yaml" "$D/k1.pem" "$D/k2.pem"
J1=$WORLD_PREFIX-j1 J2=$WORLD_PREFIX-j2 J3=$WORLD_PREFIX-j3
_BROKER_WORLD_SB+=("$J1" "$J2" "$J3")
t_rc "a policy with two keys under one kid is refused" 1 S create "$J1" --policy "$D/jwt-ab.yaml"
t_contains "and says which kid and which credentials" "$T_ERR" \
	"credential \`jwt-2\`: kid \`team-1\` names another key already (credential \`jwt-1\`)"
t_ok "and leaves nothing behind" bash -c "test ! -e /run/netns/$J1 && test ! -e /etc/netns/$J1 &&
	test ! -e /run/sluice-sandboxes/$J1"
t_eq "nor a registration" "" "$(S list | grep -F "$J1")"
t_ok "a sandbox with kid team-1 for one key" S create "$J1" --policy "$D/jwt-a.yaml"
t_ok "another with the same key and kid" S create "$J3" --policy "$D/jwt-a.yaml"
t_rc "another key under that kid, in another sandbox, is refused" 1 \
	S create "$J2" --policy "$D/jwt-b.yaml"
t_contains "naming the credential of the loaded policy" "$T_ERR" \
	"kid \`team-1\` names another key already (credential \`jwt-1\` of a loaded policy)"
t_eq "the JWK Set has the one key" "1" \
	"$(S status --jwks | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["keys"]))')"
t_ok "once both sandboxes of the first key are gone" S delete "$J1"
t_ok "(and the other)" S delete "$J3"
t_ok "the kid is free for another key" S create "$J2" --policy "$D/jwt-b.yaml"
t_ok "(delete it)" S delete "$J2"
t_not_contains "no private key in the broker's output" "$(cat "$BROKER_LOG")" "PRIVATE KEY"

t_eq "no decoy was hit" "" "$(world_decoy_hits)"
broker_stop
t_done
