#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: long (run.sh): among the longest scripts, started before the others
# `sluice update NAME --policy FILE [--keep-open]`: one running sandbox's
# policy swapped. The new policy is in force for new connections and DNS at
# once; an open tunnel it withdraws is closed (kept with --keep-open); a
# name that stays allowed keeps its synthetic address; placeholders of
# credentials that stay keep their value, removed ones are revoked, new
# ones appear in `sluice env`; one audit line per update; a broken policy
# or an unknown sandbox is refused and changes nothing; a restart keeps the
# new policy. Under load: a client running through 20 updates sees every
# request answered, none refused.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

broker_world u1 u2

SECRET_KEEP="keep-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
SECRET_GONE="gone-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
SECRET_NEW="new-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
for s in keep gone new; do
	v=SECRET_${s^^}
	printf '%s\n' "${!v}" >"$D/secret-$s"
	chmod 600 "$D/secret-$s"
done
# cred NAME PATHPREFIX VAR: a credential injected in scope on echo.world.test.
cred() {
	cat <<EOF
  - name: $1
    source: { file: $D/secret-$1 }
    scope: { hosts: [echo.world.test], paths: ["/$1/*"] }
    placeholder: $2
    plaintext: allow
EOF
}
# A: echo and other; credentials keep and gone. B: echo and evil-echo;
# credentials keep and new. echo.world.test is allowed by both.
{
	printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n'
	printf '    - host: other.world.test\ncredentials:\n'
	cred keep KEEP_TOKEN
	cred gone GONE_TOKEN
} >"$D/a.yaml"
{
	printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n'
	printf '    - host: evil-echo.world.test\ncredentials:\n'
	cred keep KEEP_TOKEN
	cred new NEW_TOKEN
} >"$D/b.yaml"
# Line 4, column 7: `hostz`.
printf 'version: 1\negress:\n  allow:\n    - hostz: other.world.test\n' >"$D/broken.yaml"
broker_config "audit_fold: 0"
broker_start || { echo "0 passed, 1 failed"; exit 1; }

t_ok "sluice create with policy A" S create "$S1" --policy "$D/a.yaml"
t_ok "a second sandbox, also on A" S create "$S2" --policy "$D/a.yaml"
t_ok "sluice env" S env "$S1"
ENV1=$T_OUT
PH_KEEP=$(sed -n 's/^KEEP_TOKEN=//p' <<<"$ENV1")
PH_GONE=$(sed -n 's/^GONE_TOKEN=//p' <<<"$ENV1")
PROXY=$(sed -n 's|^HTTP_PROXY=http://||p' <<<"$ENV1")
BUNDLE=$(sed -n 's|^SSL_CERT_FILE=||p' <<<"$ENV1")
PADDR=${PROXY%:*}
PPORT=${PROXY##*:}
t_contains "A's credentials have placeholders" "$PH_KEEP $PH_GONE" "sluice-ph-"
t_not_contains "B's new one has none yet" "$ENV1" "NEW_TOKEN="

# N CMD...: CMD in sandbox u1's network namespace (its resolv.conf too), with
# the explicit proxy in the environment; T: without it (transparent path).
N() { ip netns exec "$S1" env "http_proxy=http://$PROXY" "https_proxy=http://$PROXY" "$@"; }
T() { ip netns exec "$S1" "$@"; }
code() { N curl -s -m 10 -o /dev/null -D - "$@" | t_status_reason; }
# addr NAME: the address the sandbox's DNS gives NAME (empty: none).
addr() { T getent ahostsv4 "$1" | awk 'NR == 1 { print $1 }'; }
# audited REASON: the audit lines of sandbox u1 with that reason.
audited() { grep -F "\"sandbox\":\"$S1\"" "$BROKER_AUDIT" | grep -F "\"reason\":\"$1\""; }
# wait_audit REASON N: until u1 has N lines of REASON (at most 5 s).
wait_audit() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(audited "$1" | wc -l)" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

t_eq "before: A's host reached" "200 " "$(code http://other.world.test/before)"
t_eq "before: B's host refused" "403 not-allowlisted" "$(code http://evil-echo.world.test/before)"
ECHO_ADDR=$(addr echo.world.test)
t_contains "before: echo.world.test has a synthetic address" "$ECHO_ADDR" "."
t_contains "before: other.world.test resolves" "$(addr other.world.test)" "."
t_eq "before: evil-echo.world.test does not" "" "$(addr evil-echo.world.test)"

# --- bad input: nothing changes ---------------------------------------------------
t_rc "update of an unknown sandbox: exit 1" 1 S update "$WORLD_PREFIX-nosuch" --policy "$D/b.yaml"
t_contains "says so" "$T_ERR" "no such sandbox \`$WORLD_PREFIX-nosuch\`"
t_rc "update with a broken policy: exit 1" 1 S update "$S1" --policy "$D/broken.yaml"
t_contains "with FILE:LINE:COL" "$T_ERR" "$D/broken.yaml:4:7: "
t_rc "update with a missing policy file: exit 1" 1 S update "$S1" --policy "$D/missing.yaml"
t_contains "names the file" "$T_ERR" "$D/missing.yaml"
t_rc "update without --policy: usage, exit 2" 2 S update "$S1"
t_ok "update --help" S update --help
t_contains "prints the usage" "$T_OUT" "usage: sluice update NAME --policy FILE [--keep-open]"
# The broker checks on its own too (a client that skips the CLI's check).
t_ok "the broker itself, asked with a broken policy" \
	brk_exec python3 tests/integration/ctlclient.py split "$BROKER_SOCK" "update $S1 $D/broken.yaml" 0
t_contains "refuses it with FILE:LINE:COL" "$T_OUT" "error: $D/broken.yaml:4:7: "
t_ok "and a relative path" \
	brk_exec python3 tests/integration/ctlclient.py split "$BROKER_SOCK" "update $S1 b.yaml" 0
t_contains "says it must be absolute" "$T_OUT" "must be absolute"
t_eq "after the refusals: A still in force" "200 " "$(code http://other.world.test/still)"
t_eq "and B's host still refused" "403 not-allowlisted" "$(code http://evil-echo.world.test/still)"
t_contains "the registration still names A" "$(S list)" "$D/a.yaml"
t_eq "the refused updates are audited as errors" "3" \
	"$(grep -F '"reason":"policy-update"' "$BROKER_AUDIT" | grep -c '"decision":"error"')"

# --- update A -> B, with a tunnel open to A's host ------------------------------------
rm -f "$D/ready" "$D/go"
T python3 tests/integration/holdtunnel.py "$PADDR" "$PPORT" other.world.test "$WORLD_CA" \
	"$D/ready" "$D/go" >"$D/hold.out" 2>&1 &
hold=$!
for ((i = 0; i < 100; i++)); do [ -f "$D/ready" ] && break; sleep 0.1; done
t_ok "a TLS tunnel to other.world.test is open" test -f "$D/ready"
t_ok "sluice update A -> B" S update "$S1" --policy "$D/b.yaml"
t_ok "the tunnel A's host had is closed (audit policy-withdrawn)" wait_audit policy-withdrawn 1
touch "$D/go"
wait "$hold"
t_eq "the client sees it closed" "open closed" "$(tr '\n' ' ' <"$D/hold.out" | sed 's/ $//')"
t_eq "after: A's host refused" "403 not-allowlisted" "$(code http://other.world.test/after)"
t_eq "after: B's host reached" "200 " "$(code http://evil-echo.world.test/after)"
t_eq "after: on the transparent path too" "200" \
	"$(T curl -s -m 10 -o /dev/null -w '%{http_code}' http://evil-echo.world.test/after-t)"
t_eq "the other sandbox, still on A, is untouched" "200" \
	"$(ip netns exec "$S2" curl -s -m 10 -o /dev/null -w '%{http_code}' -x "http://$(S env "$S2" | sed -n 's|^HTTP_PROXY=http://||p')" http://other.world.test/s2)"
t_eq "DNS: echo.world.test keeps its synthetic address" "$ECHO_ADDR" "$(addr echo.world.test)"
t_eq "DNS: other.world.test is refused now" "" "$(addr other.world.test)"
t_contains "DNS: evil-echo.world.test resolves now" "$(addr evil-echo.world.test)" "."
t_contains "the registration names B" "$(S list)" "$D/b.yaml"

# The audit line: who asked, the policies before and after, and their content.
line=$(grep -F '"reason":"policy-update"' "$BROKER_AUDIT" | grep -F '"decision":"allow"')
t_eq "one audit line for the update" "1" "$(grep -c . <<<"$line")"
t_contains "names the sandbox" "$line" "\"sandbox\":\"$S1\""
t_contains "the old policy" "$line" "\"old_policy\":\"$D/a.yaml\""
t_contains "its content hash" "$line" "\"old_sha256\":\"$(sha256sum "$D/a.yaml" | cut -c1-64)\""
t_contains "the new policy" "$line" "\"new_policy\":\"$D/b.yaml\""
t_contains "its content hash" "$line" "\"new_sha256\":\"$(sha256sum "$D/b.yaml" | cut -c1-64)\""
t_contains "who asked (uid)" "$line" '"uid":0'
t_contains "who asked (pid)" "$line" '"pid":'

# Credentials: kept, revoked, new.
t_ok "sluice env after the update" S env "$S1"
ENV2=$T_OUT
t_eq "a credential that stays keeps its placeholder" "$PH_KEEP" "$(sed -n 's/^KEEP_TOKEN=//p' <<<"$ENV2")"
t_not_contains "a removed one is gone from the environment" "$ENV2" "GONE_TOKEN="
PH_NEW=$(sed -n 's/^NEW_TOKEN=//p' <<<"$ENV2")
t_contains "a new one appears" "$PH_NEW" "sluice-ph-"
t_ok "the kept placeholder still works" N curl -sf -m 10 -H "Authorization: Bearer $PH_KEEP" http://echo.world.test/keep/x
t_contains "the origin got its secret" "$(origin /keep/x | tail -n 1)" "Bearer $SECRET_KEEP"
t_eq "the removed one is refused" "403 placeholder-out-of-scope" \
	"$(code -H "Authorization: Bearer $PH_GONE" http://echo.world.test/gone/x)"
t_eq "and never reached the origin" "" "$(origin /gone/x)"
t_ok "the new one works" N curl -sf -m 10 -H "Authorization: Bearer $PH_NEW" http://echo.world.test/new/x
t_contains "the origin got its secret" "$(origin /new/x | tail -n 1)" "Bearer $SECRET_NEW"

# --- --keep-open ------------------------------------------------------------------------
t_ok "back to A" S update "$S1" --policy "$D/a.yaml"
t_eq "a credential that comes back gets a new placeholder" "" \
	"$(S env "$S1" | grep -F "GONE_TOKEN=$PH_GONE")"
withdrawn=$(audited policy-withdrawn | wc -l)
rm -f "$D/ready" "$D/go"
T python3 tests/integration/holdtunnel.py "$PADDR" "$PPORT" other.world.test "$WORLD_CA" \
	"$D/ready" "$D/go" >"$D/hold.out" 2>&1 &
hold=$!
for ((i = 0; i < 100; i++)); do [ -f "$D/ready" ] && break; sleep 0.1; done
t_ok "a tunnel to other.world.test is open again" test -f "$D/ready"
t_ok "sluice update A -> B --keep-open" S update "$S1" --policy "$D/b.yaml" --keep-open
# The workers act on an update a moment after it is answered: give them
# that moment, so that a tunnel they would close is closed first.
sleep 1
touch "$D/go"
wait "$hold"
t_eq "the tunnel stays open and works" "open alive" "$(tr '\n' ' ' <"$D/hold.out" | sed 's/ $//')"
t_eq "nothing withdrawn" "$withdrawn" "$(audited policy-withdrawn | wc -l)"
t_eq "yet a new connection to A's host is refused" "403 not-allowlisted" "$(code http://other.world.test/new)"

# --- a kept-alive upstream meets the new policy's address ranges --------------------------
# Sandbox u2 (policy A) holds one keep-alive plain-HTTP connection to the
# explicit proxy; its first request to echo.world.test leaves the broker's
# upstream open for the next. The update keeps the name allowed but puts
# its addresses in deny_ranges: the second request on the same connection
# must not go out over the upstream kept from before.
{
	printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n'
	printf '    - host: other.world.test\n'
	printf '  deny_ranges: [%s/32, %s/128]\ncredentials:\n' "$WORLD_ECHO4" "$WORLD_ECHO6"
	cred keep KEEP_TOKEN
	cred gone GONE_TOKEN
} >"$D/a-denied.yaml"
t_ok "policy A with echo.world.test's addresses denied checks" S policy check "$D/a-denied.yaml"
PROXY2=$(S env "$S2" | sed -n 's|^HTTP_PROXY=http://||p')
cp "$D/a.yaml" "$D/a-again.yaml"
# hold2 TAG POLICY: the two requests, sluice update u2 to POLICY between them.
hold2() {
	rm -f "$D/ready" "$D/go"
	ip netns exec "$S2" python3 tests/integration/holdtunnel.py "${PROXY2%:*}" "${PROXY2##*:}" \
		echo.world.test - "$D/ready" "$D/go" --plain "$1" >"$D/hold.out" 2>&1 &
	local hold=$! i
	for ((i = 0; i < 100; i++)); do [ -f "$D/ready" ] && break; sleep 0.1; done
	t_ok "u2 ($1): a keep-alive connection's first request answered" test -f "$D/ready"
	t_ok "u2 ($1): sluice update to $(basename "$2")" S update "$S2" --policy "$2"
	touch "$D/go"
	wait "$hold"
}
# peers TAG: the addresses and ports the origin saw the two requests from.
peers() { for n in 1 2; do origin "/hold/$1/$n" | sed -n 's/.*"peer": "\([^"]*\)".*/\1/p'; done | tr '\n' ' '; }
hold2 same "$D/a-again.yaml"
t_eq "an update that allows the address: the second request answered" "open alive" \
	"$(tr '\n' ' ' <"$D/hold.out" | sed 's/ $//')"
read -r p1 p2 _ <<<"$(peers same)"
t_ok "over the upstream kept from the first ($p1, $p2)" test -n "$p1" -a "$p1" = "$p2"
hold2 denied "$D/a-denied.yaml"
t_eq "the second request on it is refused by the new ranges" "open refused 403 address-denied" \
	"$(tr '\n' ' ' <"$D/hold.out" | sed 's/ $//')"
t_eq "and audited as address-denied" 1 \
	"$(grep -F "\"sandbox\":\"$S2\"" "$BROKER_AUDIT" | grep -F '"reason":"address-denied"' | grep -cF '/hold/denied/2')"
t_eq "the origin saw only the first" "1 0" "$(origin /hold/denied/1 | wc -l) $(origin /hold/denied/2 | wc -l)"
t_ok "sluice update u2 back to A" S update "$S2" --policy "$D/a.yaml"

# --- under load: a client running through 20 updates ------------------------------------
# Each round: explicit proxy (two requests on one keep-alive connection), the
# transparent path, and a CONNECT tunnel with TLS (intercepted: the host
# is in a credential's scope, so the sandbox's bundle is the trust);
# echo.world.test is allowed by A and B alike. The client runs until told to stop (at most
# 3000 rounds) and writes one status code per request.
rm -f "$D/stop"
: >"$D/load.out"
T bash -c '
	for ((i = 0; i < 3000; i++)); do
		[ -f "$1/stop" ] && break
		curl -s -m 10 -x "http://$2" -o /dev/null -o /dev/null -w "%{http_code}\n" \
			"http://echo.world.test/load/$i/a" "http://echo.world.test/load/$i/b"
		curl -s -m 10 -o /dev/null -w "%{http_code}\n" "http://echo.world.test/load/$i/t"
		curl -s -m 10 -x "http://$2" --cacert "$3" -o /dev/null -w "%{http_code}\n" \
			"https://echo.world.test/load/$i/s"
	done >"$1/load.out" 2>&1' load "$D" "$PROXY" "$BUNDLE" &
load=$!
for ((i = 0; i < 200; i++)); do [ "$(wc -l <"$D/load.out" 2>/dev/null || echo 0)" -ge 8 ] && break; sleep 0.1; done
deny_before=$(grep -F "\"sandbox\":\"$S1\"" "$BROKER_AUDIT" | grep -vc '"decision":"allow"')
fails=()
for ((u = 1; u <= 20; u++)); do
	p=$D/a.yaml
	((u % 2 == 0)) && p=$D/b.yaml
	out=$(S update "$S1" --policy "$p" 2>&1) || fails+=("update $u: $out")
	sleep 0.1
done
touch "$D/stop"
wait "$load"
t_none "20 updates while the client runs" "${fails[@]}"
sent=$(grep -c . "$D/load.out")
ok=$(grep -cx 200 "$D/load.out")
t_ok "the client sent requests through the updates ($sent)" test "$sent" -ge 8
t_eq "every request answered 200 ($sent sent, $ok ok: $(sort "$D/load.out" | uniq -c | tr -s ' \n' ' '))" "$sent" "$ok"
t_eq "no refusal or error in the audit log for the sandbox meanwhile" "$deny_before" \
	"$(grep -F "\"sandbox\":\"$S1\"" "$BROKER_AUDIT" | grep -vc '"decision":"allow"')"
t_eq "one policy-update audit line per update of u1 (23 in all)" "23" \
	"$(audited policy-update | grep -c '"decision":"allow"')"

# --- a restart keeps the new policy -----------------------------------------------------
broker_stop
broker_start
t_contains "after a restart: the registration names B" "$(S list)" "$D/b.yaml"
t_eq "B is in force" "200 " "$(code http://evil-echo.world.test/restart)"
t_eq "A's host refused" "403 not-allowlisted" "$(code http://other.world.test/restart)"
t_eq "the kept placeholder survives" "$PH_KEEP" "$(S env "$S1" | sed -n 's/^KEEP_TOKEN=//p')"
t_eq "echo.world.test keeps its synthetic address" "$ECHO_ADDR" "$(addr echo.world.test)"

# --- nothing leaked -------------------------------------------------------------------------
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
for s in "$SECRET_KEEP" "$SECRET_GONE" "$SECRET_NEW"; do
	t_not_contains "no secret in the audit log" "$(cat "$BROKER_AUDIT")" "$s"
	t_not_contains "nor in the broker's log" "$(cat "$BROKER_LOG")" "$s"
done
# With an ASan build (SLUICE_BIN=build/asan/bin): the swaps freed nothing in
# use; the broker's stderr, over both runs, holds no report.
broker_stop
t_eq "no sanitizer report in the broker's log" "" \
	"$(grep -m 1 -A 12 -E 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$BROKER_LOG")"
t_done
