#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Reloads under load: 50 SIGHUPs, each changing the reloadable configuration
# (timeouts, max_connections) and the sandbox's policy, while a few hundred
# requests flow from a sandbox on every path the workers serve (explicit
# HTTP with an injected secret, transparent HTTP, intercepted HTTPS through
# CONNECT, OAuth2 tokens from the fetcher threads, minted JWTs, refusals
# after resolution). Every request gets its expected answer, every reload
# takes effect, the broker stays up, and, with a ThreadSanitizer build
# (`make tsan` runs this with SLUICE_TSAN=1 on build/tsan/bin), the broker's
# stderr holds no "WARNING: ThreadSanitizer".
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

RELOADS=${TSAN_RELOADS:-50}
ROUNDS=${TSAN_ROUNDS:-8}
BIN=${SLUICE_BIN:-$PWD/bin}
# Reported, not fatal, so that every race of the run is in the log; the
# broker's own exit status is not what this test reads.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0 second_deadlock_stack=1 history_size=4}

if [ "${SLUICE_TSAN:-}" = 1 ]; then
	t_ok "sluiced is built with ThreadSanitizer" grep -q __tsan_init "$BIN/sluiced"
fi

broker_world c1

TOKEN_URL=https://other.world.test:9443/token
printf 'cs-%s\n' "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$D/client_secret"
printf 's3cr3t-%s\n' "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$D/secret"
openssl genpkey -algorithm ED25519 -out "$D/ed.pem" 2>/dev/null &&
	chmod 600 "$D/client_secret" "$D/secret" "$D/ed.pem" ||
	{ echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
: >"$D/issued"
# Tokens live 5 s, so that the fetchers refresh them during the run.
world_spawn inet tokens /usr/bin/python3 tests/world/tokens.py --log "$D/tokens.log" \
	--ready "$D/ready.tokens" --expires-in 5 \
	--oauth 11.0.2.20:9443 --cert "$D/pki/server.crt" --key "$D/pki/server.key" \
	--client-id sluice-test --client-secret-file "$D/client_secret" --tokens-file "$D/issued" ||
	{ echo "0 passed, 1 failed"; exit 1; }
_world_wait "tokens.py" test -s "$D/ready.tokens" || { echo "0 passed, 1 failed"; exit 1; }

# policy VARIANT: variant a allows other.world.test and has a second oauth2
# credential (a token cache entry made and dropped by alternate reloads);
# variant b has neither. echo.world.test and its credentials are in both.
policy() {
	cat <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
    - host: rebind.world.test
EOF
	[ "$1" = a ] && echo "    - host: other.world.test"
	cat <<EOF
credentials:
  - name: file
    source: { file: $D/secret }
    inject: { header: X-File, value: "{secret}" }
    scope: { hosts: [echo.world.test], paths: ["/api/*"] }
    plaintext: allow
  - name: oauth
    source:
      oauth2: { token_url: $TOKEN_URL, client_id: sluice-test,
                client_secret_file: $D/client_secret, scopes: [load] }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/oauth/*"] }
    plaintext: allow
  - name: jwt
    source: { jwt: { key_file: $D/ed.pem, issuer: "https://sluice.test", ttl: 2s } }
    inject: { header: X-Jwt, value: "{secret}" }
    scope: { hosts: [echo.world.test], paths: ["/jwt/*"] }
    plaintext: allow
EOF
	[ "$1" = a ] && cat <<EOF
  - name: oauth-toggle
    source:
      oauth2: { token_url: $TOKEN_URL, client_id: sluice-test,
                client_secret_file: $D/client_secret, scopes: [toggle] }
    inject: { header: X-Toggle, value: "{secret}" }
    scope: { hosts: [echo.world.test], paths: ["/toggle/*"] }
    plaintext: allow
EOF
	return 0
}
# set_variant VARIANT: the configuration and policy of that variant, each
# file replaced whole (a reload never reads half a file).
set_variant() {
	local head=5s conn=4s resp=8s max=300
	[ "$1" = b ] && { head=6s; conn=5s; resp=9s; max=200; }
	policy "$1" >"$D/pol.yaml.tmp" && mv "$D/pol.yaml.tmp" "$D/pol.yaml"
	sed -e "s/^head_timeout: .*/head_timeout: $head/" \
		-e "s/^connect_timeout: .*/connect_timeout: $conn/" \
		-e "s/^response_timeout: .*/response_timeout: $resp/" \
		-e "s/^max_connections: .*/max_connections: $max/" \
		"$BROKER_CONF" >"$BROKER_CONF.tmp" && mv "$BROKER_CONF.tmp" "$BROKER_CONF"
}
reloads_done() { grep -c 'reload: configuration and' "$BROKER_LOG"; }

broker_config "upstream_ca: $WORLD_CA" "head_timeout: 5s" "connect_timeout: 4s" \
	"response_timeout: 8s" "max_connections: 300"
policy a >"$D/pol.yaml"
broker_start || { echo "0 passed, 1 failed"; exit 1; }
t_ok "sluice create" S create "$S1" --policy "$D/pol.yaml"
X() { S exec "$S1" -- "$@"; }
# The first token is fetched when the policy loads: wait for it (bounded).
for _ in $(seq 50); do
	X curl -sf -m 5 -o /dev/null http://echo.world.test/oauth/first && break
	sleep 0.2
done
t_ok "an oauth2 token is there before the load starts" X curl -sf -m 10 http://echo.world.test/oauth/x
t_contains "and injected" "$(origin /oauth/x | tail -n 1)" '"Authorization", "Bearer tok-'

# load NAME CURL-ARGS...: ROUNDS curl runs in the sandbox, "URL CODE" per
# request to $D/load-NAME.out. Bounded: ROUNDS runs of at most 10 s per
# request, and 150 s for the whole loop.
load() {
	local name=$1 i end=$((SECONDS + 150))
	shift
	for ((i = 0; i < ROUNDS && SECONDS < end; i++)); do
		X curl -sS -m 10 -w '%{url_effective} %{http_code}\n' "$@"
	done >"$D/load-$name.out" 2>"$D/load-$name.err"
}
# rounds of 10, 10, 5, 10 and 6 requests (41 per round: 328 with 8 rounds)
start=$SECONDS
pids=()
load explicit -o /dev/null "http://echo.world.test/api/e[1-10]" & pids+=($!)
load transparent --noproxy '*' -o /dev/null "http://echo.world.test/t[1-10]" & pids+=($!)
load connect -o /dev/null "https://echo.world.test/api/s[1-5]" & pids+=($!)
load tokens -o /dev/null "http://echo.world.test/oauth/o[1-5]" \
	-o /dev/null "http://echo.world.test/jwt/j[1-5]" & pids+=($!)
load refused -o /dev/null "http://other.world.test/r[1-3]" \
	-o /dev/null "http://rebind.world.test/b[1-3]" & pids+=($!)
# (Each wait below is bounded by load's own deadline.)

# The reloads, each waited for (bounded) so that none is merged with the next.
bad=0
for ((n = 1; n <= RELOADS; n++)); do
	if ((n % 2)); then set_variant b; else set_variant a; fi
	kill -HUP "$BROKER_PID" 2>/dev/null || { bad=1; break; }
	for ((k = 0; k < 100; k++)); do
		[ "$(reloads_done)" -ge "$n" ] && break
		sleep 0.05
	done
	[ "$(reloads_done)" -ge "$n" ] || { bad=1; break; }
	sleep 0.1
done
t_eq "$RELOADS reloads, each in force" "0 $RELOADS" "$bad $(reloads_done)"
t_eq "none refused" "" "$(grep 'reload: .*refused' "$BROKER_LOG")"
for p in "${pids[@]}"; do wait "$p"; done
echo "# load and reloads took $((SECONDS - start)) s"

# expect NAME COUNT AWK-CONDITION: COUNT lines, each meeting the condition
# (on $1 the URL, $2 the status), else the lines that do not.
expect() {
	local f=$D/load-$1.out
	t_eq "$1: $2 requests answered as expected" "$2 " \
		"$(wc -l <"$f") $(awk "!($3)" "$f" | head -n 5 | paste -sd ' ')"
}
expect explicit $((ROUNDS * 10)) '$2 == 200'
expect transparent $((ROUNDS * 10)) '$2 == 200'
expect connect $((ROUNDS * 5)) '$2 == 200'
expect tokens $((ROUNDS * 10)) '$2 == 200'
# other.world.test comes and goes with the variant; rebind stays refused.
expect refused $((ROUNDS * 6)) '($1 ~ /other/ && ($2 == 200 || $2 == 403)) || ($1 ~ /rebind/ && $2 == 403)'
t_eq "no curl errors" "" "$(cat "$D"/load-*.err)"

# The last reload is in force, and the next one too.
if ((RELOADS % 2)); then last=b; next=a; else last=a; next=b; fi
want() { [ "$1" = a ] && echo 200 || echo 403; }
t_eq "the last variant ($last) is in force" "$(want $last)" \
	"$(X curl -s -m 10 -o /dev/null -w '%{http_code}' http://other.world.test/)"
set_variant $next
kill -HUP "$BROKER_PID"
for _ in $(seq 100); do [ "$(reloads_done)" -gt "$RELOADS" ] && break; sleep 0.05; done
t_eq "one more reload ($next) takes effect" "$(want $next)" \
	"$(X curl -s -m 10 -o /dev/null -w '%{http_code}' http://other.world.test/)"
t_ok "the broker is alive" broker_alive
t_ok "the secret was injected under load" X curl -sf -m 10 http://echo.world.test/api/last
t_contains "(the echo server saw it)" "$(origin /api/last | tail -n 1)" "\"X-File\", \"$(cat "$D/secret")\""

t_ok "sluice delete" S delete "$S1"
broker_stop
# After the stop, so that what TSan reports at exit counts too. Every
# distinct report is listed; TSAN_KEEP_LOG=FILE keeps the whole log.
grep 'SUMMARY: ThreadSanitizer' "$BROKER_LOG" | sort | uniq -c | sed 's/^/# /'
[ -n "${TSAN_KEEP_LOG:-}" ] && cp "$BROKER_LOG" "$TSAN_KEEP_LOG"
t_eq "no ThreadSanitizer report in the broker's stderr" "" \
	"$(grep -A 40 -m 1 'WARNING: ThreadSanitizer' "$BROKER_LOG")"
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_done
