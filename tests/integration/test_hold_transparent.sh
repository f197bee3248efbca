#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: long (run.sh): among the longest scripts, started before the others
# Held requests on the transparent path (`egress.unlisted: hold`): a client
# that ignores the proxy variables resolves an unlisted name and gets a
# synthetic address (no upstream DNS query for it), and its connection waits
# in hold until `sluice approve` (HTTPS: the ClientHello read before the hold
# reaches the origin intact, the request succeeds), `sluice refuse` (plain
# HTTP: 403 hold-refused) or the timeout (hold-timeout; TLS: a reset).
# `sluice pending` lists them, with method and path for plain HTTP. A
# `sluice update` that lists the held name lets the held HTTPS connection go
# on at once, its body whole.
# Approvals are kept across a broker restart (on top of an updated policy,
# as `sluice update` keeps them), a `--for` approval with the time it has
# left; one that ended while the broker was down is not restored.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

broker_world ht1 ht2 ht3 ht4

printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n  unlisted: hold\n  hold_timeout: 5m\n' \
	>"$D/long.yaml"
printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n  unlisted: hold\n  hold_timeout: 2s\n' \
	>"$D/short.yaml"
printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n' >"$D/refuse.yaml"
printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n  unlisted: hold\n  hold_timeout: 60s\n' \
	>"$D/hold60.yaml"
printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n    - host: evil-echo.world.test\n  unlisted: hold\n  hold_timeout: 60s\n' \
	>"$D/listed.yaml"

broker_config "audit_fold: 0"
broker_start || { echo "0 passed, 1 failed"; exit 1; }

t_ok "sluice create, hold for 5m" S create "$S1" --policy "$D/long.yaml"
t_ok "sluice create, hold for 2s" S create "$S2" --policy "$D/short.yaml"
t_ok "sluice create, without hold" S create "$S3" --policy "$D/refuse.yaml"
t_ok "sluice create, hold for 60s" S create "$S4" --policy "$D/hold60.yaml"

# N SANDBOX CMD...: CMD in the sandbox, as code that ignores proxy variables.
N() {
	local s=$1
	shift
	ip netns exec "$s" env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy "$@"
}
DNSQ="python3 $PWD/tests/world/dnsq.py"
audited() { grep -F "\"sandbox\":\"$1\"" "$BROKER_AUDIT" | grep -F "\"reason\":\"$2\""; }
pending_of() { S pending "$1" | grep -F " $2 "; }

# --- DNS: an unlisted name under hold ----------------------------------------------
t_ok "DNS for an unlisted name under hold" N "$S1" $DNSQ held-dns.world.test A
t_contains "is answered NOERROR" "$T_OUT" "rcode NOERROR"
t_contains "with a synthetic address" "$(echo "$T_OUT" | grep '^A ')" "A 198.1"
t_ok "AAAA for it" N "$S1" $DNSQ held-dns.world.test AAAA
t_contains "is NODATA (NOERROR, no record), as for an allowed name" "$T_OUT" "rcode NOERROR"
t_not_contains "(no AAAA record)" "$T_OUT" "AAAA "
t_fails "no upstream query for it (no connection came)" world_dns_queried held-dns.world.test
t_contains "audited: decision hold, not-allowlisted" \
	"$(grep -F '"proto":"dns"' "$BROKER_AUDIT" | grep -F '"name":"held-dns.world.test"' | head -1)" \
	'"decision":"hold","reason":"not-allowlisted"'
t_ok "without hold, the same name" N "$S3" $DNSQ held-dns.world.test A
t_contains "is NXDOMAIN as before" "$T_OUT" "rcode NXDOMAIN"
t_ok "a bad name under hold" N "$S1" $DNSQ 'bad_name!.world.test' A
t_contains "is NXDOMAIN still" "$T_OUT" "rcode NXDOMAIN"

# --- transparent HTTPS: held, then approved ---------------------------------------------
head -c 100000 /dev/urandom >"$D/body.bin"
rm -f "$D/tls.out"
N "$S1" curl -s -m 120 --cacert "$WORLD_CA" --data-binary @"$D/body.bin" \
	-o "$D/tls.out" -w '%{http_code}' https://evil-echo.world.test/held-tls >"$D/tls.code" &
p=$!
t_ok "a transparent HTTPS connection to an unlisted name is held" \
	wait_for 1 pending_of "$S1" evil-echo.world.test
t_contains "pending shows its port, and no method or path (TLS)" \
	"$(pending_of "$S1" evil-echo.world.test)" "443   -"
t_eq "nothing reached the origin while held" "" "$(origin /held-tls)"
t_fails "no upstream DNS query while held" world_dns_queried evil-echo.world.test
t_ok "sluice approve NAME evil-echo.world.test:443" S approve "$S1" evil-echo.world.test:443
wait "$p"
t_eq "the held request goes on: 200" "200" "$(cat "$D/tls.code")"
t_contains "reached the origin over TLS" "$(origin /held-tls)" '"scheme": "https"'
t_contains "with its body whole" "$(cat "$D/tls.out")" '"body_len": 100000'
t_contains "audited allowed, by the approved rule" \
	"$(audited "$S1" allowed | grep -F '"name":"evil-echo.world.test"')" \
	'"rule":"host evil-echo.world.test ports 443"'
t_ok "a later connection passes at once" \
	N "$S1" curl -sf -m 10 --cacert "$WORLD_CA" https://evil-echo.world.test/later-tls
t_contains "(reached the origin)" "$(origin /later-tls)" "/later-tls"

# --- transparent HTTPS: held, then a policy update lists the name -------------------------
# Sandbox 4 holds for 60 s; the update answers at once (waited for at most 10 s).
rm -f "$D/upd.out"
N "$S4" curl -s -m 120 --cacert "$WORLD_CA" --data-binary @"$D/body.bin" \
	-o "$D/upd.out" -w '%{http_code}' https://evil-echo.world.test/held-update >"$D/upd.code" &
p=$!
t_ok "a transparent HTTPS connection to an unlisted name is held (hold_timeout 60s)" \
	wait_for 1 pending_of "$S4" evil-echo.world.test
t_ok "sluice update to a policy that lists the name" S update "$S4" --policy "$D/listed.yaml"
ended() {
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}
t_ok "the held connection ends at once, not at the timeout" ended "$p"
wait "$p"
t_eq "it went on: 200" "200" "$(cat "$D/upd.code")"
t_contains "with its body whole" "$(cat "$D/upd.out")" '"body_len": 100000'
t_contains "audited allowed, by the listed rule" \
	"$(audited "$S4" allowed | grep -F '"name":"evil-echo.world.test"')" \
	'"rule":"host evil-echo.world.test'
t_eq "nothing pending after" "nothing pending" "$(S pending "$S4")"

# --- transparent HTTP: held, then refused -------------------------------------------------
rm -f "$D/http.head"
N "$S1" curl -s -m 120 -o /dev/null -D "$D/http.head" http://other.world.test/held-http &
p=$!
t_ok "a transparent HTTP request to an unlisted name is held" \
	wait_for 1 pending_of "$S1" other.world.test
t_contains "pending shows its port, method and path" "$(pending_of "$S1" other.world.test)" \
	"80    GET     /held-http"
t_ok "sluice refuse NAME other.world.test" S refuse "$S1" other.world.test
wait "$p"
t_eq "the held request: 403 hold-refused" "403 hold-refused" "$(t_status_reason <"$D/http.head")"
t_eq "nothing reached the origin" "" "$(origin /held-http)"
t_contains "audited" "$(audited "$S1" hold-refused | grep -F '"proto":"http"')" '"path":"/held-http"'

# --- transparent TLS: held, then the timeout ---------------------------------------------
t_fails "transparent HTTPS to an unlisted name, hold_timeout 2s: reset" \
	N "$S2" curl -s -m 60 --cacert "$WORLD_CA" -o /dev/null https://other.world.test/held-timeout
t_ok "held first (broker log)" grep -F "proxy: $S2: holding other.world.test:443" "$BROKER_LOG"
t_contains "audited hold-timeout" "$(audited "$S2" hold-timeout)" '"proto":"tls"'
t_contains "(deny, for the name)" "$(audited "$S2" hold-timeout)" '"name":"other.world.test"'
t_eq "transparent HTTP, hold_timeout 2s: 403 hold-timeout" "403 hold-timeout" \
	"$(N "$S2" curl -s -m 60 -o /dev/null -D - http://other.world.test/held-timeout2 | t_status_reason)"
t_eq "nothing reached the origin" "" "$(origin /held-timeout)$(origin /held-timeout2)"

t_ok "the allowed name still passes, transparent" N "$S1" curl -sf -m 10 http://echo.world.test/after
t_ok "the broker is still up" broker_alive

# --- approvals across a broker restart -------------------------------------------------
P3=$(S env "$S3" | sed -n 's|^HTTP_PROXY=http://||p')
code3() { ip netns exec "$S3" curl -s -m 30 -o /dev/null -D - -x "http://$P3" "$1" | t_status_reason; }
t_ok "approve in a sandbox without hold, --for 1s" S approve "$S3" other.world.test:80 --for 1s
t_ok "approve there, --for 40s" S approve "$S3" evil-echo.world.test:80 --for 40s
t_ok "approve there, for its life" S approve "$S3" kept.evil.world.test:80
t_eq "(the 40s approval is in force)" "200 " "$(code3 http://evil-echo.world.test/before-restart)"
# `sluice update` keeps approvals on top of the new file; so does a restart.
t_ok "sluice update sandbox 1 to a policy without hold" S update "$S1" --policy "$D/refuse.yaml"
t_eq "the registration keeps the three approvals" "3" \
	"$(grep -c ' approve ' "$WORLD_DIR/state/sandboxes/$S3")"
broker_stop
sleep 2 # the 1s approval ends while the broker is down
broker_start
t_ok "the broker starts again" broker_alive
t_ok "an approval of sandbox 1 is kept across the restart (transparent HTTPS)" \
	N "$S1" curl -sf -m 20 --cacert "$WORLD_CA" https://evil-echo.world.test/after-restart
t_contains "(reached the origin)" "$(origin /after-restart)" "/after-restart"
t_ok "on top of its updated policy: an unlisted name is NXDOMAIN now (no hold)" \
	N "$S1" $DNSQ other.world.test A
t_contains "(NXDOMAIN)" "$T_OUT" "rcode NXDOMAIN"
t_eq "an approval for the sandbox's life is kept" "200 " \
	"$(code3 http://kept.evil.world.test/kept)"
t_eq "a --for approval with time left is kept" "200 " \
	"$(code3 http://evil-echo.world.test/after-restart)"
t_eq "a --for approval that ended while the broker was down is not restored" \
	"403 not-allowlisted" "$(code3 http://other.world.test/expired)"
t_ok "(the broker log says so)" grep -F \
	"\`$S3\`: approval of other.world.test:80 ended while the broker was down: not restored" \
	"$BROKER_LOG"
# ended_40s: the restored --for 40s approval ended (at most 60 s).
ended_40s() {
	local i
	for ((i = 0; i < 600; i++)); do
		grep -qF "\`$S3\`: approval of evil-echo.world.test:80 ended" "$BROKER_LOG" && return 0
		sleep 0.1
	done
	return 1
}
t_ok "a restored --for approval still ends on time" ended_40s
t_eq "(then refused)" "403 not-allowlisted" "$(code3 http://evil-echo.world.test/ended)"
t_ok "sluice delete" S delete "$S3"
t_fails "its registration (and approvals) went with it" test -e "$WORLD_DIR/state/sandboxes/$S3"
t_ok "the broker is still up" broker_alive
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
broker_stop
t_eq "no sanitizer report in the broker's log" "" \
	"$(grep -m 1 -A 12 -E 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$BROKER_LOG")"
t_done
