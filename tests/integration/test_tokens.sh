#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: long (run.sh): among the longest scripts, started before the others
# Short-lived credentials over plain HTTP (plaintext: allow): an OAuth2
# client-credentials token fetched by the broker over verified TLS from a
# token endpoint in the test world (tests/world/tokens.py), fetched once
# for many requests, refreshed in the background, and a 502
# credential-unavailable when the endpoint refuses; an endpoint that
# accepts and never answers holds up no other credential's token (the
# fetches run on several threads) and no stop; JWTs minted by the
# broker (ES256 and EdDSA), verified by a service in the test world with
# the JWK Set `sluice status --jwks` prints, and refused once expired.
# Neither the client secret nor a token appears in the audit log, the
# broker's output, state_dir or the sandbox.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

broker_world c1 c2 c3

# The endpoints: OAuth2 over HTTPS on other.world.test:9443 (the world's
# certificate names *.world.test and 11.0.2.20), the JWT service over HTTP
# on other.world.test:8081. Free ports of a world address.
TOKEN_URL=https://other.world.test:9443/token
CLIENT_SECRET="cs-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$CLIENT_SECRET" >"$D/client_secret"
printf 'wrong-%s\n' "$CLIENT_SECRET" >"$D/wrong_secret"
chmod 600 "$D/client_secret" "$D/wrong_secret"
: >"$D/issued"
: >"$D/jwt-seen"
echo '{"keys":[]}' >"$D/jwks.json"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$D/es.pem" 2>/dev/null &&
	openssl genpkey -algorithm ED25519 -out "$D/ed.pem" 2>/dev/null &&
	chmod 600 "$D/es.pem" "$D/ed.pem" ||
	{ echo "openssl genpkey failed"; echo "0 passed, 1 failed"; exit 1; }
world_spawn inet tokens /usr/bin/python3 tests/world/tokens.py --log "$D/tokens.log" \
	--ready "$D/ready.tokens" \
	--oauth 11.0.2.20:9443 --cert "$D/pki/server.crt" --key "$D/pki/server.key" \
	--client-id sluice-test --client-secret-file "$D/client_secret" --tokens-file "$D/issued" \
	--jwt 11.0.2.20:8081 --jwks "$D/jwks.json" --issuer https://sluice.test \
	--jwt-log "$D/jwt-seen" ||
	{ echo "0 passed, 1 failed"; exit 1; }
_world_wait "tokens.py" test -s "$D/ready.tokens" || { echo "0 passed, 1 failed"; exit 1; }

# The endpoint's own counters and switches, asked from inside the world.
ep() { inet_exec curl -sf -m 5 --cacert "$WORLD_CA" --resolve other.world.test:9443:11.0.2.20 \
	"https://other.world.test:9443/$1"; }
issued() {	# SCOPE: tokens issued for it
	ep count | python3 -c 'import json,sys; print(json.load(sys.stdin)["by_scope"].get(sys.argv[1], 0))' "$1"
}
last_token() { awk -F '\t' -v s="$1" '$2 == s { t = $1 } END { print t }' "$D/issued"; }

# response_timeout bounds a token fetch too (at most 15 s): 8 s, so that
# the hanging endpoint below fails within the test's time.
broker_config "upstream_ca: $WORLD_CA" "response_timeout: 8s"
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
    - host: other.world.test
      ports: [8081]
credentials:
  - name: api
    source:
      oauth2:
        token_url: $TOKEN_URL
        client_id: sluice-test
        client_secret_file: $D/client_secret
        scopes: [read, write]
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/oauth/*"] }
    plaintext: allow
  - name: api-literal
    source:
      oauth2: { token_url: "https://11.0.2.20:9443/token", client_id: sluice-test,
                client_secret_file: $D/client_secret, scopes: [literal] }
    scope: { hosts: [echo.world.test], paths: ["/lit/*"] }
    placeholder: LIT_TOKEN
    placeholder_headers: [X-Token]
    plaintext: allow
  - name: api-refused
    source:
      oauth2: { token_url: $TOKEN_URL, client_id: sluice-test,
                client_secret_file: $D/wrong_secret, scopes: [refused] }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/refused/*"] }
    plaintext: allow
  - name: api-badtls
    source:
      oauth2: { token_url: "https://other.world.test:8443/token", client_id: sluice-test,
                client_secret_file: $D/client_secret, scopes: [badtls] }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/badtls/*"] }
    plaintext: allow
  - name: api-chunked
    source:
      oauth2: { token_url: "https://other.world.test:9443/token-chunked", client_id: sluice-test,
                client_secret_file: $D/client_secret, scopes: [chunked] }
    inject: { header: X-Chunked, value: "{secret}" }
    scope: { hosts: [echo.world.test], paths: ["/framing/*"] }
    plaintext: allow
  - name: api-close
    source:
      oauth2: { token_url: "https://other.world.test:9443/token-close", client_id: sluice-test,
                client_secret_file: $D/client_secret, scopes: [close] }
    inject: { header: X-Close, value: "{secret}" }
    scope: { hosts: [echo.world.test], paths: ["/framing/*"] }
    plaintext: allow
  - name: svc-es
    source: { jwt: { key_file: $D/es.pem, issuer: "https://sluice.test", ttl: 2s, scope: "svc:read" } }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [other.world.test], paths: ["/es/*"] }
    plaintext: allow
  - name: svc-ed
    source: { jwt: { key_file: $D/ed.pem, issuer: "https://sluice.test", ttl: 2s, kid: ed-1 } }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [other.world.test], paths: ["/ed/*"] }
    plaintext: allow
  - name: svc-long
    source: { jwt: { key_file: $D/ed.pem, issuer: "https://sluice.test", ttl: 1h, kid: ed-1 } }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [other.world.test], paths: ["/long/*"] }
    plaintext: allow
EOF
broker_start || { echo "0 passed, 1 failed"; exit 1; }

# ---- oauth2 -----------------------------------------------------------------
t_ok "sluice create with oauth2 and jwt credentials" S create "$S1" --policy "$D/pol.yaml"
t_eq "the endpoint issued one token for the credential" "1" "$(issued 'read write')"
t_eq "and one for the one with an address literal in token_url" "1" "$(issued literal)"
TOK=$(last_token 'read write')
t_contains "a token was issued" "$TOK" "tok-"
X() { S exec "$S1" -- "$@"; }
NOPROXY="env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy"
ok=0
for i in $(seq 20); do
	X curl -sf -m 10 -o /dev/null "http://echo.world.test/oauth/$i" && [ -n "$TOK" ] &&
		[[ $(origin "/oauth/$i") == *"\"Authorization\", \"Bearer $TOK\""* ]] && ok=$((ok + 1))
done
t_eq "20 requests: each carried the token (explicit proxy)" "20" "$ok"
t_ok "the transparent path" X $NOPROXY curl -sf -m 10 http://echo.world.test/oauth/t
t_contains "carries it too" "$(origin /oauth/t)" "\"Authorization\", \"Bearer $TOK\""
t_not_contains "which the sandbox's copy of the echo does not show" "$T_OUT" "$TOK"
t_ok "over intercepted HTTPS (explicit proxy)" X curl -sf -m 10 https://echo.world.test/oauth/s
t_contains "the token is injected inside TLS" "$(origin /oauth/s)" "\"Authorization\", \"Bearer $TOK\""
t_contains "and reaches the origin over TLS" "$T_OUT" '"scheme": "https"'
t_ok "over intercepted HTTPS (transparent path)" X $NOPROXY curl -sf -m 10 https://echo.world.test/oauth/st
t_contains "the token is injected too" "$(origin /oauth/st)" "\"Authorization\", \"Bearer $TOK\""
t_ok "the client's own Authorization" X curl -sf -m 10 -H 'Authorization: Bearer mine' http://echo.world.test/oauth/m
t_not_contains "is replaced" "$T_OUT" "Bearer mine"
t_eq "still one token issued after 24 requests" "1" "$(issued 'read write')"
t_ok "sluice env" S env "$S1"
ENV1=$T_OUT
PH=$(echo "$ENV1" | sed -n 's/^LIT_TOKEN=//p')
t_contains "an oauth2 credential can have a placeholder" "$PH" "sluice-ph-"
t_ok "the placeholder in scope" X curl -sf -m 10 -H "X-Token: $PH" http://echo.world.test/lit/x
t_contains "is swapped for the current token" "$(origin /lit/x)" "\"X-Token\", \"$(last_token literal)\""

t_ok "token answers in chunks and ended by the close" X curl -sf -m 10 http://echo.world.test/framing/x
t_contains "are read (chunked)" "$(origin /framing/x)" "\"X-Chunked\", \"$(last_token chunked)\""
t_contains "are read (until the close)" "$(origin /framing/x)" "\"X-Close\", \"$(last_token close)\""

reason() {
	X "$@" -s -m 10 -o /dev/null -D - |
		t_status_reason
}
world_clear_logs
t_eq "an endpoint that refuses the client: 502" "502 credential-unavailable" \
	"$(reason curl http://echo.world.test/refused/x)"
t_eq "an endpoint whose certificate is not trusted: 502" "502 credential-unavailable" \
	"$(reason curl http://echo.world.test/badtls/x)"
t_eq "the echo server saw no request without the credential" "" "$(world_echo_log)"
t_eq "the refused client got no token" "0" "$(issued refused)"
LOG=$(cat "$BROKER_LOG")
t_contains "the broker says which credential and host failed, and why" "$LOG" \
	"credential \`api-refused\`: token from other.world.test failed: HTTP 401"
t_contains "a TLS failure is named" "$LOG" "credential \`api-badtls\`: token from other.world.test failed: TLS: certificate not trusted"
t_contains "the audit line names the credential-unavailable refusal" "$(cat "$BROKER_AUDIT")" \
	'"reason":"credential-unavailable"'

# A policy whose secret or key file cannot be read does not load.
sed "s#$D/wrong_secret#$D/missing_secret#" "$D/pol.yaml" >"$D/pol-nosecret.yaml"
t_fails "a missing client_secret_file: sluice create fails" S create "$S2" --policy "$D/pol-nosecret.yaml"
t_contains "naming the credential" "$T_ERR$T_OUT" "credential \`api-refused\`: client_secret_file"
sed "s#$D/ed.pem#$D/missing.pem#" "$D/pol.yaml" >"$D/pol-nokey.yaml"
t_fails "a missing jwt key_file: sluice create fails" S create "$S2" --policy "$D/pol-nokey.yaml"
t_contains "naming the credential" "$T_ERR$T_OUT" "credential \`svc-ed\`: key_file"

# A reload keeps the cached token: no new fetch.
t_ok "sluice reload" S reload
t_ok "a request after the reload" X curl -sf -m 10 http://echo.world.test/oauth/r
t_contains "carries the same token" "$(origin /oauth/r)" "\"Authorization\", \"Bearer $TOK\""
t_eq "and nothing was fetched again" "1" "$(issued 'read write')"

# ---- jwt ----------------------------------------------------------------------
t_ok "sluice status --jwks" S status --jwks
JWKS=$T_OUT
printf '%s\n' "$JWKS" >"$D/jwks.json"
t_eq "the JWK Set holds the two keys (one listed once for two credentials)" "2 EC:P-256:ES256 OKP:Ed25519:EdDSA" \
	"$(python3 -c 'import json,sys; k=json.load(sys.stdin)["keys"]; print(len(k), " ".join(sorted("%s:%s:%s" % (j["kty"], j["crv"], j["alg"]) for j in k)))' <<<"$JWKS")"
t_eq "no private key material in it" "" \
	"$(python3 -c 'import json,sys; print(" ".join(j for k in json.load(sys.stdin)["keys"] for j in k if j in ("d", "p", "q")))' <<<"$JWKS")"
t_eq "the ES256 key's kid is its RFC 7638 thumbprint" "ok" "$(python3 -c '
import base64, hashlib, json, sys
for k in json.load(sys.stdin)["keys"]:
    if k["kty"] == "EC":
        c = json.dumps({"crv": k["crv"], "kty": k["kty"], "x": k["x"], "y": k["y"]}, separators=(",", ":"), sort_keys=True)
        t = base64.urlsafe_b64encode(hashlib.sha256(c.encode()).digest()).rstrip(b"=").decode()
        print("ok" if t == k["kid"] else "kid %s, thumbprint %s" % (k["kid"], t))' <<<"$JWKS")"
t_contains "the EdDSA key has the kid the policy gives" "$JWKS" '"kid":"ed-1"'

claim() {	# JSON KEY...: print the claims named, space-separated
	python3 -c 'import json,sys; d=json.loads(sys.argv[1]); c=d["claims"]; print(" ".join(str(c.get(k)) for k in sys.argv[2:]))' "$@"
}
for alg in es ed; do
	t_ok "a request in the $alg credential's scope" X curl -sf -m 10 "http://other.world.test:8081/$alg/x"
	R=$T_OUT
	t_contains "the service verified the minted token with the printed JWK Set ($alg)" "$R" '"ok": true'
	t_eq "sub = the sandbox, aud = the host, iss ($alg)" "$S1 other.world.test https://sluice.test" \
		"$(claim "$R" sub aud iss)"
	t_eq "exp - iat = the ttl, 2 s ($alg)" "2" "$(python3 -c 'import json,sys; c=json.loads(sys.argv[1])["claims"]; print(c["exp"] - c["iat"])' "$R")"
done
t_eq "the scope claim" "svc:read" "$(claim "$(X curl -sf -m 10 http://other.world.test:8081/es/s)" scope)"
t_eq "the ES256 header" "ES256" "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["header"]["alg"])' \
	"$(X curl -sf -m 10 http://other.world.test:8081/es/h)")"

# Expiry: a token minted now is refused by the service after its 2 s.
t_ok "a fresh token" X curl -sf -m 10 http://other.world.test:8081/ed/old
OLD=$(tail -n 1 "$D/jwt-seen")
OLD_JTI=$(claim "$T_OUT" jti)
OLD_EXP=$(claim "$T_OUT" exp)
for _ in $(seq 50); do [ "$(date +%s)" -gt "$OLD_EXP" ] && break; sleep 0.1; done
t_rc "after its ttl, the old token is refused by the service" 22 \
	inet_exec curl -sf -m 5 -H "Authorization: Bearer $OLD" http://11.0.2.20:8081/ed/replay
t_contains "as expired" "$(inet_exec curl -s -m 5 -H "Authorization: Bearer $OLD" http://11.0.2.20:8081/ed/replay)" \
	'"error": "expired"'
t_ok "while a new request" X curl -sf -m 10 http://other.world.test:8081/ed/new
t_contains "gets a new, valid token" "$T_OUT" '"ok": true'
t_not_contains "(another jti)" "$T_OUT" "$OLD_JTI"
A=$(X curl -sf -m 10 http://other.world.test:8081/long/a)
B=$(X curl -sf -m 10 http://other.world.test:8081/long/b)
t_eq "a long-lived token is reused for the same sandbox and host" "$(claim "$A" jti)" "$(claim "$B" jti)"
t_ok "a second sandbox" S create "$S2" --policy "$D/pol.yaml"
t_eq "gets its own token (sub = its name)" "$S2" \
	"$(claim "$(S exec "$S2" -- curl -sf -m 10 http://other.world.test:8081/long/c)" sub)"
t_eq "the JWK Set still lists each key once" "2" \
	"$(S status --jwks | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["keys"]))')"
t_eq "the second sandbox shared the cached oauth2 token" "1" "$(issued 'read write')"
jwt_cached() { S status | awk '$1 == "jwt_cached" { print $2 }'; }
J0=$(jwt_cached)
t_ok "sluice status counts cached JWTs (${J0:-none}, both sandboxes')" test "${J0:-0}" -ge 2
t_ok "delete the second sandbox" S delete "$S2"
t_eq "its one cached JWT is dropped with it" "$((${J0:-0} - 1))" "$(jwt_cached)"

# A token is shared only with the same client secret. A policy that names
# the same endpoint, client and scopes with a secret of its own (here one
# the endpoint refuses) gets a fetch of its own, never the cached token
# (which its scope could send to a host of its choosing), and the first
# sandbox's entry, token and secret stay as they were.
sed "s|^        client_secret_file: .*|        client_secret_file: $D/wrong_secret|" "$D/pol.yaml" >"$D/pol-other.yaml"
refused() { ep count | python3 -c 'import json,sys; print(json.load(sys.stdin)["refused"])'; }
R0=$(refused)
t_ok "a sandbox whose policy has the same endpoint, client and scopes, another secret" \
	S create "$S2" --policy "$D/pol-other.yaml"
t_eq "does not get the cached token: 502" "502 credential-unavailable" \
	"$(S exec "$S2" -- curl -s -m 10 -o /dev/null -D - http://echo.world.test/oauth/other | t_status_reason)"
t_eq "the origin saw no request from it" "" "$(origin /oauth/other)"
t_ok "its own fetch was made, with its secret, and refused (${R0:-?} before, $(refused) now)" \
	test "$(refused)" -gt "${R0:-0}"
t_ok "the first sandbox" X curl -sf -m 10 http://echo.world.test/oauth/after-other
t_contains "still gets its token" "$(origin /oauth/after-other)" "\"Authorization\", \"Bearer $TOK\""
t_eq "which was not fetched again" "1" "$(issued 'read write')"
t_ok "delete that sandbox" S delete "$S2"

# ---- oauth2: an endpoint that hangs --------------------------------------------
# other.world.test:9444 accepts connections and never answers (not even the
# TLS handshake). A fetch from it holds one fetcher thread until its
# deadline (8 s); another credential's first fetch must not wait for it.
HANG_PY='
import select, socket, sys, time
addr, port, log, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(16)
open(ready, "w").write("ready\n")
held = []
end = time.monotonic() + 120  # bounded, whatever the test does
while time.monotonic() < end:
    if select.select([s], [], [], 1)[0]:
        held.append(s.accept()[0])  # held open, never read, never answered
        with open(log, "a") as f:
            f.write("accepted %d\n" % len(held))
'
: >"$D/hang-accepted"
world_spawn inet hang /usr/bin/python3 -c "$HANG_PY" 11.0.2.20 9444 "$D/hang-accepted" "$D/ready.hang" ||
	{ echo "0 passed, 1 failed"; exit 1; }
HANG_PID=$WORLD_LAST_PID
HANG_ST=$(_world_starttime "$HANG_PID")
_world_wait "the hanging endpoint" test -s "$D/ready.hang" || { echo "0 passed, 1 failed"; exit 1; }
hang_stop() {	# ends the listener by its PID; once gone, drops its world record
	if _world_alive "$HANG_PID" "$HANG_ST"; then
		kill "$HANG_PID"
		for _ in $(seq 50); do _world_alive "$HANG_PID" "$HANG_ST" || break; sleep 0.1; done
	fi
	_world_alive "$HANG_PID" "$HANG_ST" && return 1	# left to world_down
	awk -v p="$HANG_PID" -v s="$HANG_ST" '!($1 == p && $2 == s)' "$D/pids" >"$D/pids.tmp" &&
		mv "$D/pids.tmp" "$D/pids"
}
accepted() { grep -c '^accepted' "$D/hang-accepted"; }
hang_lines() { grep -F "credential \`api-hang\`" "$BROKER_LOG"; }
cat >"$D/pol-hang.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
credentials:
  - name: api-hang
    source:
      oauth2: { token_url: "https://other.world.test:9444/token", client_id: sluice-test,
                client_secret_file: $D/client_secret, scopes: [hang] }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/hang/*"] }
    plaintext: allow
EOF
cat "$D/pol-hang.yaml" - >"$D/pol-both.yaml" <<EOF
  - name: api-healthy
    source:
      oauth2: { token_url: $TOKEN_URL, client_id: sluice-test,
                client_secret_file: $D/client_secret, scopes: [healthy] }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/healthy/*"] }
    plaintext: allow
EOF
# First a sandbox with the hanging credential alone: its fetch is in flight
# (the endpoint took the connection) before the second sandbox asks for a
# new token from a healthy endpoint.
t_ok "a sandbox with a credential whose endpoint hangs" S create "$S2" --policy "$D/pol-hang.yaml"
for _ in $(seq 50); do [ "$(accepted)" -ge 1 ] && break; sleep 0.1; done
t_eq "the hanging endpoint took the broker's connection" "1" "$(accepted)"
t_ok "a sandbox with both credentials" S create "$S3" --policy "$D/pol-both.yaml"
out=$(S exec "$S3" -- curl -s -m 10 -o - -w '\n%{http_code}' http://echo.world.test/healthy/first)
HLOG=$(hang_lines)
t_eq "its first request to the healthy credential's host: 200" "200" "${out##*$'\n'}"
HTOK=$(last_token healthy)
t_contains "with the healthy credential's token" "$(origin /healthy/first)" \
	"\"Authorization\", \"Bearer ${HTOK:-none}\""
t_eq "while the hanging fetch had not ended yet" "" "$HLOG"
world_clear_logs
t_eq "the hanging credential's host: 502" "502 credential-unavailable" \
	"$(S exec "$S3" -- curl -s -m 10 -o /dev/null -D - http://echo.world.test/hang/x | t_status_reason)"
t_eq "the echo server saw no request without it" "" "$(world_echo_log)"
for _ in $(seq 120); do [ -n "$(hang_lines)" ] && break; sleep 0.1; done
HLOG=$(hang_lines)
t_contains "the broker logs the hanging endpoint's failure" "$HLOG" \
	"credential \`api-hang\`: token from other.world.test failed: TLS handshake failed: timed out"
t_not_contains "without the client secret" "$HLOG" "$CLIENT_SECRET"
# The retry (after 1 s) hangs again: the broker must stop at once anyway.
for _ in $(seq 50); do [ "$(accepted)" -ge 2 ] && break; sleep 0.1; done
t_eq "a retry is in flight (the endpoint took it; one failure logged)" "2 1" \
	"$(accepted) $(hang_lines | wc -l)"
t_ok "delete the two sandboxes" S delete "$S3"
t_ok "(the second)" S delete "$S2"
broker_stop
t_contains "the broker stops at once, the hanging fetch in flight" "$(tail -n 3 "$BROKER_LOG")" \
	"sluiced: stopped"
hang_stop

# ---- oauth2 refresh -------------------------------------------------------------
# Tokens now live 2 s; a restarted broker fetches a fresh one (the cache
# is in memory) and must refresh it in the background, without a 502.
t_ok "the endpoint issues 2 s tokens now" ep "control?expires_in=2"
broker_stop
broker_start
t_ok "the broker restarts" test -n "$BROKER_PID"
# The fetcher started during the restore, before the broker dropped its
# capabilities: it must have dropped its own (capabilities are per thread).
caps=$(cat /proc/"$BROKER_PID"/task/*/status 2>/dev/null | awk '$1 == "CapEff:" || $1 == "CapPrm:" { print $2 }' | sort -u)
t_eq "no thread of the broker keeps a capability ($(ls /proc/"$BROKER_PID"/task | wc -l) threads)" \
	"0000000000000000" "$caps"
before=$(issued 'read write')
end=$(($(date +%s%N) + 6500000000))
n=0 good=0 bad=''
declare -A seen=()
while [ "$(date +%s%N)" -lt "$end" ] && [ $n -lt 100 ]; do
	n=$((n + 1))
	out=$(X curl -s -m 10 -o - -w '\n%{http_code}' "http://echo.world.test/oauth/refresh$n")
	code=${out##*$'\n'}
	if [ "$code" = 200 ]; then
		good=$((good + 1))
		t=$(origin "/oauth/refresh$n" | sed -n 's/.*"Authorization", "Bearer \(tok-[0-9a-f]*\)".*/\1/p')
		[ -n "$t" ] && seen[$t]=1
	else
		bad="$bad $code"
	fi
	sleep 0.2
done
after=$(issued 'read write')
t_eq "requests for 6.5 s while tokens expire every 2 s: none refused" "" "$bad"
t_ok "($good requests, spread over the 6.5 s)" test "$good" -ge 5
t_ok "the token was refreshed in the background (fetches: $((after - before)))" test $((after - before)) -ge 3
t_ok "the requests saw several tokens (${#seen[@]})" test "${#seen[@]}" -ge 2

t_ok "the endpoint fails from now" ep "control?fail=1"
for _ in $(seq 40); do
	[ "$(reason curl http://echo.world.test/oauth/down)" = "502 credential-unavailable" ] && break
	sleep 0.1
done
world_clear_logs
t_eq "once the last token expired: 502" "502 credential-unavailable" \
	"$(reason curl http://echo.world.test/oauth/down)"
t_eq "again" "502 credential-unavailable" "$(reason curl http://echo.world.test/oauth/down)"
t_eq "never a request without it: the echo server saw none" "" "$(world_echo_log)"
t_ok "the endpoint works again" ep "control?fail=0&expires_in=3600"
for _ in $(seq 80); do
	X curl -sf -m 5 -o /dev/null http://echo.world.test/oauth/up && break
	sleep 0.1
done
t_ok "and after the backoff the credential is back" X curl -sf -m 10 http://echo.world.test/oauth/up

# ---- hygiene ----------------------------------------------------------------------
ALL_TOKENS=$(cut -f 1 "$D/issued")
t_ok "tokens were issued ($(echo "$ALL_TOKENS" | wc -l))" test -n "$ALL_TOKENS"
leak() {	# WHERE: every file there, for the secret, any issued token, any seen JWT
	local f
	for f in "$@"; do
		[ -e "$f" ] || continue
		grep -rqF -e "$CLIENT_SECRET" "$f" && { echo "client secret in $f"; return 0; }
		grep -rqF -f <({ echo "$ALL_TOKENS"; cat "$D/jwt-seen"; } | grep -v "^$") "$f" &&
			{ echo "a token in $f"; return 0; }
	done
	return 1
}
t_fails "neither the client secret nor a token in the audit log" leak "$BROKER_AUDIT"
t_fails "nor in the broker's output" leak "$BROKER_LOG"
t_fails "nor in state_dir" leak "$D/state"
t_fails "nor in the sandbox's files" leak "/run/sluice-sandboxes/$S1" "/etc/netns/$S1"
t_ok "sluice env" S env "$S1"
t_not_contains "nor in its environment (secret)" "$T_OUT" "$CLIENT_SECRET"
t_not_contains "nor in its environment (token)" "$T_OUT" "tok-"
t_contains "audit lines name the credential" "$(cat "$BROKER_AUDIT")" '"credential":"api"'
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
broker_stop
t_contains "the broker stops cleanly, fetcher and all, within 5 s" "$(tail -n 3 "$BROKER_LOG")" "sluiced: stopped"
t_done
