#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: long (run.sh): among the longest scripts, started before the others
# Held requests (`egress.unlisted: hold`): a request through the proxy to a
# name outside the list waits (nothing upstream, no DNS query for it) until
# the policy's hold_timeout, then is refused with hold-timeout; `sluice
# pending` lists it, `sluice approve` lets it go on (and later ones pass;
# with --for, until then), `sluice refuse` refuses it (hold-refused); an
# approval of a name that resolves into a denied range is refused with a
# clear error and the held request gets address-denied; a policy change
# (`sluice update`, `sluice reload` of an edited file) decides what waits at
# once: a name it lists goes on, one it refuses gets its reason
# (not-allowlisted), one it still holds waits on, unchanged; `sluice watch`
# streams decisions and pending requests as JSON lines (a person's form
# without --json), at most 8 watchers, a watcher that does not read is
# dropped while the others go on; bad values
# of the keys are refused with FILE:LINE:COL; over the per-sandbox cap of
# distinct pending names a request is refused at once (hold-full); a held
# client that goes away, and a sandbox deleted while it holds requests, free
# what was held (run it with an ASan build: SLUICE_BIN=build/asan/bin).
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

broker_world h1 h2 h3 h4 h5

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
t_ok "a fourth, hold for 5m" S create "$S4" --policy "$D/long.yaml"

proxy_of() { S env "$1" | sed -n 's|^HTTP_PROXY=http://||p'; }
P1=$(proxy_of "$S1")
P2=$(proxy_of "$S2")
P3=$(proxy_of "$S3")
P4=$(proxy_of "$S4")
# code SANDBOX PROXY URL...: "STATUS REASON" of a request through the proxy.
code() {
	local s=$1 p=$2
	shift 2
	ip netns exec "$s" curl -s -m 30 -o /dev/null -D - -x "http://$p" "$@" | t_status_reason
}
# audited SANDBOX REASON: the audit lines of SANDBOX with that reason.
audited() { grep -F "\"sandbox\":\"$1\"" "$BROKER_AUDIT" | grep -F "\"reason\":\"$2\""; }
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

# --- pending, approve, refuse ---------------------------------------------------------
# bg TAG URL [CURL ARGS...]: a request from sandbox 4 in the background; its
# response head goes to $D/TAG.head, its pid to BG[TAG].
declare -A BG
bg() {
	local tag=$1 url=$2
	shift 2
	rm -f "$D/$tag.head" "$D/$tag.done"
	{
		ip netns exec "$S4" curl -s -m 120 -o /dev/null -D "$D/$tag.head" -x "http://$P4" "$@" "$url"
		: >"$D/$tag.done"
	} &
	BG[$tag]=$!
}
# fg TAG: waits for request TAG to end (bounded by its curl -m; polled, since
# fg runs in a command substitution, a subshell that cannot wait for a job
# of this shell), prints "STATUS REASON".
fg() {
	local i
	for ((i = 0; i < 1300; i++)); do
		[ -e "$D/$1.done" ] && break
		sleep 0.1
	done
	t_status_reason <"$D/$1.head"
}
pending_of() { S pending "$S4" | grep -F " $1 "; }

t_eq "nothing pending at first" "nothing pending" "$(S pending "$S4")"
bg approve http://other.world.test/approve-me
t_ok "pending lists the held request" wait_for 1 pending_of other.world.test
t_contains "with its port, method and path" "$(pending_of other.world.test)" "80    GET     /approve-me"
t_ok "pending --json" S pending "$S4" --json
t_contains "in JSON" "$T_OUT" "\"sandbox\":\"$S4\",\"host\":\"other.world.test\",\"port\":80,\"method\":\"GET\",\"path\":\"/approve-me\""
t_contains "with when it was first seen and how often" "$T_OUT" '"count":1,"held":1}'
t_ok "pending of every sandbox names it too" S pending
t_contains "(all sandboxes)" "$T_OUT" "$S4"
t_eq "nothing reached the origin while held" "" "$(origin /approve-me)"
t_ok "sluice approve NAME other.world.test:80" S approve "$S4" other.world.test:80
t_contains "prints the rule to add to the policy file" "$T_OUT" "    - host: other.world.test
      ports: [80]"
t_eq "the held request goes on: 200" "200 " "$(fg approve)"
t_contains "and reached the origin" "$(origin /approve-me)" "/approve-me"
t_eq "nothing pending after" "nothing pending" "$(S pending "$S4")"
t_contains "the approval is audited with who asked" "$(audited "$S4" hold-approved)" '"decision":"allow"'
t_contains "(pid and uid)" "$(audited "$S4" hold-approved)" '"uid":0'
t_eq "a later request passes at once" "200 " "$(code "$S4" "$P4" http://other.world.test/later)"
t_eq "its audit line names the approved rule" "1" \
	"$(audited "$S4" allowed | grep -F '/later' | grep -c '"rule":"host other.world.test ports 80"')"

# CONNECT: held, approved without a port (80 and 443).
rm -f "$D/tls.out"
ip netns exec "$S4" curl -s -m 120 -o /dev/null -w '%{http_code}' --cacert "$WORLD_CA" \
	-x "http://$P4" https://evil-echo.world.test/approve-tls >"$D/tls.out" &
p=$!
t_ok "a CONNECT is held" wait_for 1 pending_of evil-echo.world.test
t_contains "pending shows CONNECT and no path for it" "$(pending_of evil-echo.world.test)" "443   CONNECT -"
t_ok "sluice approve NAME evil-echo.world.test --for 2s" S approve "$S4" evil-echo.world.test --for 2s
t_contains "prints the rule, both default ports" "$T_OUT" "ports: [80, 443]"
wait "$p"
t_eq "the held tunnel goes on: 200 from the origin" "200" "$(cat "$D/tls.out")"
t_ok "the approval ends after --for (broker log)" \
	wait_for 1 grep -F "approval of evil-echo.world.test:0 ended" "$BROKER_LOG"
bg after-for http://evil-echo.world.test/after-for
t_ok "after it, the name is held again" wait_for 1 pending_of evil-echo.world.test

# refuse
t_ok "sluice refuse NAME evil-echo.world.test" S refuse "$S4" evil-echo.world.test
t_eq "the held request: 403 hold-refused" "403 hold-refused" "$(fg after-for)"
t_contains "audited" "$(audited "$S4" hold-refused | grep -F '"proto":"http"')" '"path":"/after-for"'
t_contains "and the refusal with who asked" "$(audited "$S4" hold-refused | grep -F '"proto":"control"')" '"uid":0'
t_rc "refuse when nothing waits: exit 1" 1 S refuse "$S4" evil-echo.world.test
t_contains "says so" "$T_ERR" "nothing of sandbox \`$S4\` waits for evil-echo.world.test"

# approve of a name in a denied range: refused, and the held request too.
bg rebind http://rebind.world.test/denied
t_ok "a request for rebind.world.test (10.0.0.5) is held" wait_for 1 pending_of rebind.world.test
t_rc "sluice approve of it: exit 1" 1 S approve "$S4" rebind.world.test
t_contains "with a clear error" "$T_ERR" \
	"\`rebind.world.test\` resolves only into denied ranges (10.0.0.5): not approved"
t_eq "the held request: 403 address-denied" "403 address-denied" "$(fg rebind)"
t_contains "audited as a denied approval" "$(audited "$S4" address-denied | grep -F '"proto":"control"')" '"decision":"deny"'
bg rebind2 http://rebind.world.test/denied-again
t_ok "no rule was added: the name is held again" wait_for 1 pending_of rebind.world.test
t_ok "(refused)" S refuse "$S4" rebind.world.test:80
t_eq "(403 hold-refused)" "403 hold-refused" "$(fg rebind2)"

# bad input
t_rc "approve in an unknown sandbox: exit 1" 1 S approve "$WORLD_PREFIX-nosuch" other.world.test
t_contains "says so" "$T_ERR" "no such sandbox \`$WORLD_PREFIX-nosuch\`"
t_rc "pending of an unknown sandbox: exit 1" 1 S pending "$WORLD_PREFIX-nosuch"
t_contains "says so" "$T_ERR" "no such sandbox \`$WORLD_PREFIX-nosuch\`"
t_rc "refuse in an unknown sandbox: exit 1" 1 S refuse "$WORLD_PREFIX-nosuch" other.world.test
t_rc "approve of an address: exit 1" 1 S approve "$S4" 11.0.2.20
t_contains "says it takes a name" "$T_ERR" "is an address: approve and refuse take a name"
t_rc "approve of a wildcard: exit 1" 1 S approve "$S4" '*.world.test'
t_contains "bad host name" "$T_ERR" "bad host name \`*.world.test\`"
t_rc "approve with a bad port: exit 1" 1 S approve "$S4" other.world.test:99999
t_contains "bad port" "$T_ERR" "bad port \`99999\` (1 to 65535)"
t_rc "approve --for 0s: usage, exit 2" 2 S approve "$S4" other.world.test --for 0s
t_contains "bad duration" "$T_ERR" "bad duration \`0s\` for --for"
t_rc "approve without a host: usage, exit 2" 2 S approve "$S4"
t_ok "the broker checks on its own (a client that skips the CLI's checks)" \
	brk_exec python3 tests/integration/ctlclient.py split "$BROKER_SOCK" "approve $S4 10.0.0.5 80 0" 0
t_contains "and refuses an address" "$T_OUT" "error: \`10.0.0.5\` is an address"
t_ok "and a bad duration" \
	brk_exec python3 tests/integration/ctlclient.py split "$BROKER_SOCK" "approve $S4 x.world.test 80 -1" 0
t_contains "(refused)" "$T_OUT" "error: bad duration"
t_eq "the other sandboxes are untouched by the approvals" "403 not-allowlisted" \
	"$(code "$S3" "$P3" http://other.world.test/s3)"

# --- a policy change decides what waits -------------------------------------------------
# Sandbox 5 holds for 60 s: each change below answers what waits at once, so
# each request is waited for at most 10 s.
printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n  unlisted: hold\n  hold_timeout: 60s\n' \
	>"$D/hold60.yaml"
printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n    - host: other.world.test\n  unlisted: hold\n  hold_timeout: 60s\n' \
	>"$D/hold60-other.yaml"
printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n' >"$D/nohold.yaml"
t_ok "a fifth sandbox, hold for 60s" S create "$S5" --policy "$D/hold60.yaml"
P5=$(proxy_of "$S5")
pending5() { S pending "$S5" | grep -F " $1 "; }
# bg5 TAG URL [CURL ARGS...]: as bg, from sandbox 5; the body to $D/TAG.out.
bg5() {
	local tag=$1 url=$2
	shift 2
	rm -f "$D/$tag.head" "$D/$tag.out" "$D/$tag.done"
	{
		ip netns exec "$S5" curl -s -m 120 -o "$D/$tag.out" -D "$D/$tag.head" -x "http://$P5" "$@" "$url"
		: >"$D/$tag.done"
	} &
	BG[$tag]=$!
}
# ended TAG: request TAG has ended (polled for at most 10 s).
ended() {
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "${BG[$1]}" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}
head -c 100000 /dev/urandom >"$D/body5.bin"

bg5 upd http://other.world.test/update-allows -H 'Expect:' --data-binary @"$D/body5.bin"
t_ok "a request to an unlisted name is held" wait_for 1 pending5 other.world.test
t_ok "sluice update to a policy that lists the name" S update "$S5" --policy "$D/hold60-other.yaml"
t_ok "the held request ends at once, not at the 60s timeout" ended upd
t_eq "it went on: 200" "200 " "$(fg upd)"
t_contains "with its body whole" "$(cat "$D/upd.out")" '"body_len": 100000'
t_contains "it reached the origin" "$(origin /update-allows)" "/update-allows"
t_eq "nothing pending after" "nothing pending" "$(S pending "$S5")"

t_ok "sluice update back to hold60.yaml" S update "$S5" --policy "$D/hold60.yaml"
cp "$D/hold60.yaml" "$D/edited.yaml"
t_ok "and to a copy of it, edited below" S update "$S5" --policy "$D/edited.yaml"
bg5 reload http://other.world.test/reload-allows
t_ok "held again" wait_for 1 pending5 other.world.test
cp "$D/hold60-other.yaml" "$D/edited.yaml"
t_ok "the file now lists the name: sluice reload" S reload
t_ok "the held request ends at once" ended reload
t_eq "it went on: 200" "200 " "$(fg reload)"
t_contains "it reached the origin" "$(origin /reload-allows)" "/reload-allows"
t_eq "nothing pending after" "nothing pending" "$(S pending "$S5")"

t_ok "sluice update back to hold60.yaml" S update "$S5" --policy "$D/hold60.yaml"
bg5 deny http://other.world.test/update-refuses
t_ok "held again" wait_for 1 pending5 other.world.test
t_ok "sluice update to a policy without hold" S update "$S5" --policy "$D/nohold.yaml"
t_ok "the held request ends at once" ended deny
t_eq "refused with the new policy's reason, not hold-timeout" "403 not-allowlisted" "$(fg deny)"
t_contains "audited so" "$(audited "$S5" not-allowlisted)" '"path":"/update-refuses"'
t_eq "nothing reached the origin" "" "$(origin /update-refuses)"
t_eq "nothing pending after" "nothing pending" "$(S pending "$S5")"

t_ok "sluice update back to hold60.yaml" S update "$S5" --policy "$D/hold60.yaml"
bg5 other http://other.world.test/listed-now
bg5 still http://evil-echo.world.test/still-held
t_ok "two names held" wait_for 1 pending5 evil-echo.world.test
t_ok "(both)" wait_for 1 pending5 other.world.test
t_ok "sluice update to a policy that lists only one of them" S update "$S5" --policy "$D/hold60-other.yaml"
t_ok "the listed one ends at once" ended other
t_eq "(200)" "200 " "$(fg other)"
t_fails "it is no longer pending" pending5 other.world.test
t_ok "the other one is still held" kill -0 "${BG[still]}"
t_ok "and pending" S pending "$S5" --json
t_contains "as it was: held once, not held anew" "$T_OUT" \
	"\"host\":\"evil-echo.world.test\",\"port\":80,\"method\":\"GET\",\"path\":\"/still-held\""
t_contains "(count 1)" "$T_OUT" '"count":1,"held":1}'
t_ok "sluice approve releases it" S approve "$S5" evil-echo.world.test:80
t_ok "(at once)" ended still
t_eq "(200)" "200 " "$(fg still)"
t_eq "nothing pending after" "nothing pending" "$(S pending "$S5")"

# An approval is a policy change too: what waits for the name on a port it
# does not approve gets what a new request would get.
bg5 port80 http://a.evil.world.test/port80
bg5 port443 https://a.evil.world.test/port443 --cacert "$WORLD_CA"
t_ok "a name held on port 80" wait_for 1 pending5 a.evil.world.test
t_ok "and on 443" wait_for 2 pending5 a.evil.world.test
t_ok "sluice approve NAME a.evil.world.test:80" S approve "$S5" a.evil.world.test:80
t_ok "the request on 80 ends at once" ended port80
t_eq "(200)" "200 " "$(fg port80)"
t_ok "the CONNECT to 443 ends at once too" ended port443
t_eq "refused: the name is listed now, on port 80 only" "403 port-not-allowed" "$(fg port443)"
t_eq "nothing pending after" "nothing pending" "$(S pending "$S5")"
t_eq "no request of sandbox 5 timed out" "" "$(audited "$S5" hold-timeout)"

# --- watch --------------------------------------------------------------------------------
# status_key KEY: the value of KEY in `sluice status`.
status_key() { S status | awk -v k="$1" '$1 == k { print $2 }'; }
# swatch ARGS: `sluice watch ARGS` as this process (run it in a subshell
# with &: $! is then sluice's own pid).
swatch() { exec ip netns exec "$WORLD_BRK" "$(_broker_bin)/sluice" --socket "$BROKER_SOCK" watch "$@"; }
(swatch --json) >"$D/watch.json" 2>"$D/watch.err" &
W1=$!
(swatch) >"$D/watch.txt" 2>&1 &
W2=$!
watching() { [ "$(status_key watchers)" = 2 ] && echo yes; }
t_ok "two watchers connected (sluice status: watchers 2)" wait_for 1 watching
t_eq "a request while they watch" "200 " "$(code "$S4" "$P4" http://echo.world.test/watched)"
t_ok "watch --json: the decision as a JSON line" \
	wait_for 1 grep -F '"event":"decision"' "$D/watch.json"
t_contains "the audit line's fields" "$(grep -F '/watched' "$D/watch.json")" \
	"\"sandbox\":\"$S4\",\"proto\":\"http\",\"name\":\"echo.world.test\""
bg watched-hold http://held.watch.test/w?x=1
t_ok "watch --json: a pending event for a held request" \
	wait_for 1 grep -F '"event":"pending"' "$D/watch.json"
t_contains "with sandbox, host, port, method, path (the query left out, as in the audit log)" "$(grep -F '"event":"pending"' "$D/watch.json")" \
	"\"sandbox\":\"$S4\",\"host\":\"held.watch.test\",\"port\":80,\"method\":\"GET\",\"path\":\"/w\",\"count\":1}"
t_ok "refused" S refuse "$S4" held.watch.test
t_eq "(403 hold-refused)" "403 hold-refused" "$(fg watched-hold)"
t_ok "the refusal is streamed too" wait_for 1 grep -F '"reason":"hold-refused"' "$D/watch.json"
t_ok "every line is JSON" python3 -c '
import json, sys
for l in open(sys.argv[1]):
    json.loads(l)' "$D/watch.json"
t_ok "without --json: a line a person reads" wait_for 1 grep -F "PENDING held.watch.test:80 GET /w " "$D/watch.txt"
t_contains "that says how to answer" "$(cat "$D/watch.txt")" "sluice approve $S4 held.watch.test:80"

# A cap on watchers: 8 at once.
wpids=()
for ((i = 0; i < 6; i++)); do
	(swatch --json) >/dev/null 2>&1 &
	wpids+=($!)
done
eight() { [ "$(status_key watchers)" = 8 ] && echo yes; }
t_ok "8 watchers at once" wait_for 1 eight
t_rc "a 9th is refused: exit 1" 1 sl watch
t_contains "says why" "$T_ERR" "too many watchers (at most 8)"
kill "${wpids[@]}" 2>/dev/null
for p in "${wpids[@]}"; do wait "$p" 2>/dev/null; done
two() { [ "$(status_key watchers)" = 2 ] && echo yes; }
t_ok "watchers that leave are let go" wait_for 1 two

# A watcher that does not read is dropped; nobody waits for it.
rm -f "$D/slow.go"
brk_exec python3 -c '
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(sys.argv[1])
s.sendall(b"watch\n")
for _ in range(1200):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.1)
s.settimeout(20)
got = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            print("closed")
            break
        got += b
except socket.timeout:
    print("open")
' "$BROKER_SOCK" "$D/slow.go" >"$D/slow.out" 2>&1 &
slow=$!
three() { [ "$(status_key watchers)" = 3 ] && echo yes; }
t_ok "a watcher that reads nothing is connected" wait_for 1 three
# Many decisions, in one client (keep-alive): far more than 256 KiB of lines.
long=$(printf 'p%.0s' {1..200})
ip netns exec "$S4" curl -s -m 300 -o /dev/null -x "http://$P4" "http://echo.world.test/slow/[1-1500]/$long"
dropped() { [ "$(status_key watchers_dropped)" -ge 1 ] && echo yes; }
t_ok "it is dropped (sluice status: watchers_dropped)" wait_for 1 dropped
t_ok "and the broker says so" grep -F "watch: a watcher fell 256 KiB behind: dropped" "$BROKER_LOG"
touch "$D/slow.go"
wait "$slow"
t_eq "its connection is closed" "closed" "$(cat "$D/slow.out")"
t_eq "the reading watchers got every request" "1500" "$(grep -c '/slow/' "$D/watch.json")"
t_ok "and are still there" kill -0 "$W1"
kill "$W1" "$W2" 2>/dev/null
wait "$W1" "$W2" 2>/dev/null

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
