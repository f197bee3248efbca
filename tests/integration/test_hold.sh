#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Held requests (`egress.unlisted: hold`): a request through the proxy to a
# name outside the list waits (nothing upstream, no DNS query for it) until
# the policy's hold_timeout, then is refused with hold-timeout; bad values
# of the keys are refused with FILE:LINE:COL; over the per-sandbox cap of
# distinct pending names a request is refused at once (hold-full); a held
# client that goes away, and a sandbox deleted while it holds requests, free
# what was held (run it with an ASan build: SLUICE_BIN=build/asan/bin).
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

broker_world h1 h2 h3

printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n  unlisted: hold\n  hold_timeout: 2s\n' \
	>"$D/hold.yaml"
printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n  unlisted: hold\n  hold_timeout: 5m\n' \
	>"$D/long.yaml"
printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n' >"$D/refuse.yaml"
# Line 3, column 13: `ask`; line 4, column 17: `11m`.
printf 'version: 1\negress:\n  unlisted: ask\n' >"$D/bad-unlisted.yaml"
printf 'version: 1\negress:\n  unlisted: hold\n  hold_timeout: 11m\n' >"$D/bad-timeout.yaml"

broker_config "audit_fold: 0"
broker_start || { echo "0 passed, 1 failed"; exit 1; }

# --- bad policy values ------------------------------------------------------------
t_rc "policy check: unlisted: ask is refused" 1 S policy check "$D/bad-unlisted.yaml"
t_contains "with FILE:LINE:COL and the values it takes" "$T_ERR$T_OUT" \
	"$D/bad-unlisted.yaml:3:13: unknown unlisted value \`ask\` (expected refuse or hold)"
t_rc "policy check: hold_timeout: 11m is refused" 1 S policy check "$D/bad-timeout.yaml"
t_contains "with FILE:LINE:COL and the bounds" "$T_ERR$T_OUT" \
	"$D/bad-timeout.yaml:4:17: duration \`11m\` for \`hold_timeout\` out of range (1s to 10m)"
t_rc "and sluice create with it" 1 S create "$S1" --policy "$D/bad-timeout.yaml"

t_ok "sluice create with unlisted: hold" S create "$S1" --policy "$D/hold.yaml"
t_ok "a second sandbox, hold for 5m" S create "$S2" --policy "$D/long.yaml"
t_ok "a third, without hold" S create "$S3" --policy "$D/refuse.yaml"

proxy_of() { S env "$1" | sed -n 's|^HTTP_PROXY=http://||p'; }
P1=$(proxy_of "$S1")
P2=$(proxy_of "$S2")
P3=$(proxy_of "$S3")
# code SANDBOX PROXY URL...: "STATUS REASON" of a request through the proxy.
code() {
	local s=$1 p=$2
	shift 2
	ip netns exec "$s" curl -s -m 30 -o /dev/null -D - -x "http://$p" "$@" | t_status_reason
}
# audited SANDBOX REASON: the audit lines of SANDBOX with that reason.
audited() { grep -F "\"sandbox\":\"$1\"" "$BROKER_AUDIT" | grep -F "\"reason\":\"$2\""; }
# wait_for N CMD...: until CMD prints at least N lines (at most 10 s).
wait_for() {
	local n=$1 i
	shift
	for ((i = 0; i < 100; i++)); do
		[ "$("$@" | wc -l)" -ge "$n" ] && return 0
		sleep 0.1
	done
	return 1
}
holding() { grep -F "proxy: $1: holding " "$BROKER_LOG"; }

# --- allowed names are not held; without hold, refused as before ---------------
t_eq "an allowed name passes" "200 " "$(code "$S1" "$P1" http://echo.world.test/allowed)"
t_eq "without hold: not-allowlisted at once" "403 not-allowlisted" \
	"$(code "$S3" "$P3" http://other.world.test/refused)"

# --- hold, then the timeout -----------------------------------------------------------
t_eq "HTTP to an unlisted name: held, then 403 hold-timeout" "403 hold-timeout" \
	"$(code "$S1" "$P1" http://evil-echo.world.test/held-timeout)"
t_eq "nothing reached the origin" "" "$(origin /held-timeout)"
t_fails "no DNS query upstream for the held name" world_dns_queried evil-echo.world.test
t_ok "it was held first (broker log)" holding "$S1"
t_contains "one audit line: deny hold-timeout" "$(audited "$S1" hold-timeout)" \
	'"name":"evil-echo.world.test"'
t_contains "with the method and path" "$(audited "$S1" hold-timeout)" '"path":"/held-timeout"'
t_eq "CONNECT to an unlisted name: 403 hold-timeout" "403" \
	"$(ip netns exec "$S1" curl -s -m 30 -o /dev/null -w '%{http_connect}' -x "http://$P1" \
		https://other.world.test/held-connect)"
t_eq "two audit lines of hold-timeout now" "2" "$(audited "$S1" hold-timeout | wc -l)"
t_eq "an allowed name still passes after" "200 " "$(code "$S1" "$P1" http://echo.world.test/after)"

# --- caps: distinct pending names -----------------------------------------------------
pids=()
for ((i = 1; i <= 32; i++)); do
	ip netns exec "$S2" curl -s -m 120 -o /dev/null -x "http://$P2" "http://n$i.held.test/" &
	pids+=($!)
done
t_ok "32 distinct names held at once" wait_for 32 holding "$S2"
t_eq "the 33rd name: refused at once, hold-full" "403 hold-full" \
	"$(code "$S2" "$P2" http://n33.held.test/)"
kill "${pids[@]}" 2>/dev/null
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
t_ok "clients that went away are let go (32 client-gone lines)" \
	wait_for 32 audited "$S2" client-gone
t_contains "audited as denied, never decided" "$(audited "$S2" client-gone | head -1)" \
	'"decision":"deny"'
t_eq "and a new name is held again (not full)" "ok" \
	"$(ip netns exec "$S2" curl -s -m 120 -o /dev/null -x "http://$P2" http://again.held.test/ &
	   p=$!; wait_for 33 holding "$S2" && echo ok; kill $p 2>/dev/null; wait $p 2>/dev/null)"

# --- a sandbox deleted while it holds requests ------------------------------------------
ip netns exec "$S2" curl -s -m 120 -o /dev/null -D "$D/del.head" -x "http://$P2" http://gone.held.test/ &
p=$!
t_ok "a request held" wait_for 1 grep -F "holding gone.held.test" "$BROKER_LOG"
t_ok "sluice delete while it is held" S delete "$S2"
t_ok "the held connection is closed (audit sandbox-deleted)" wait_for 1 audited "$S2" sandbox-deleted
# The client's own wire went with its sandbox: it hears nothing more.
kill "$p" 2>/dev/null
wait "$p" 2>/dev/null
t_ok "the broker is still up" broker_alive
t_eq "the other sandbox still works" "200 " "$(code "$S1" "$P1" http://echo.world.test/last)"

t_eq "no decoy was hit" "" "$(world_decoy_hits)"
broker_stop
t_eq "no sanitizer report in the broker's log" "" \
	"$(grep -m 1 -A 12 -E 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$BROKER_LOG")"
t_done
