#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sluice policy suggest` and `sluice report` on a real audit log: a
# workload runs in a sandbox whose policy allows next to nothing (every
# refusal on its own line, audit_fold: 0); the policy suggested from its
# audit log passes `sluice policy check`, leaves out what was refused for
# an address reason, and lets the same workload run in a new sandbox with
# nothing refused. `sluice report` gives the numbers the test generated.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

broker_world sg1 sg2
BIN=${SLUICE_BIN:-$PWD/bin}

broker_config "audit_fold: 0" "connect_timeout: 2s"
# Next to nothing: one name, which resolves into a private range.
cat >"$D/little.yaml" <<EOF
version: 1
egress:
  allow:
    - host: rebind.world.test
      ports: [80]
EOF
broker_start || { echo "0 passed, 1 failed"; exit 1; }

NOPROXY="env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy"
# The workload: requests that a right policy lets through, each one curl
# that fails on any refusal (-f); prints "N sent, N ok".
workload() {
	local sb=$1 sent=0 ok=0 u
	local -a reqs=(
		"curl -sf -m 10 -o /dev/null http://echo.world.test/w1"
		"curl -sf -m 10 -o /dev/null --cacert $WORLD_CA https://echo.world.test/w2"
		"curl -sf -m 10 -o /dev/null http://echo.world.test:8080/w3"
		"curl -sf -m 10 -o /dev/null http://a.canary.world.test/w4"
		"curl -sf -m 10 -o /dev/null http://b.canary.world.test/w5"
		"curl -sf -m 10 -o /dev/null http://c.canary.world.test/w6"
		"$NOPROXY curl -sf -m 10 -o /dev/null http://other.world.test/w7"
		"curl -sf -m 10 -o /dev/null http://11.0.2.10/w8"
	)
	for u in "${reqs[@]}"; do
		sent=$((sent + 1))
		# shellcheck disable=SC2086 # each entry is a command line
		sl exec --bind "$D:$D:ro" "$sb" -- $u && ok=$((ok + 1))
	done
	echo "$sent sent, $ok ok"
}
# Refused for an address reason, whatever the policy says.
address_refused() {
	sl exec "$1" -- curl -s -m 10 -o /dev/null http://rebind.world.test/a1
	sl exec "$1" -- curl -s -m 10 -o /dev/null http://169.254.169.254/a2
	return 0
}

t_ok "create a sandbox that allows next to nothing" sl create "$S1" --policy "$D/little.yaml"
t_run workload "$S1"
t_eq "with next to nothing allowed, the workload is refused" "8 sent, 0 ok" "$T_OUT"
t_run address_refused "$S1"
t_ok "delete it" sl delete "$S1"
cp "$D/audit.log" "$D/audit1.log"

t_ok "policy suggest" "$BIN/sluice" policy suggest --sandbox "$S1" --wildcards 3 "$D/audit1.log"
SUG=$T_OUT
printf '%s\n' "$SUG" >"$D/suggested.yaml"
t_eq "no line was skipped" "" "$T_ERR"
t_ok "sluice policy check accepts the suggestion" "$BIN/sluice" policy check "$D/suggested.yaml"
t_contains "exact names, with the ports used" "$SUG" "$(printf '    - host: "echo.world.test"\n      ports: [80, 443, 8080]')"
t_contains "three siblings make a wildcard (--wildcards 3)" "$SUG" '- host: "*.canary.world.test"'
t_not_contains "the siblings are not listed one by one" "$SUG" 'host: "a.canary.world.test"'
t_contains "a name refused only in DNS gets the default ports" "$SUG" "$(printf '; no port seen (a DNS query): the default ports\n    - host: "other.world.test"')"
t_contains "an address literal outside the denied ranges: a cidr rule" "$SUG" "$(printf '    - cidr: "11.0.2.10/32"\n      ports: [80]')"
t_contains "a comment per rule: how often, first and last" "$SUG" "time (0 allowed, 1 refused), first 20"
t_not_contains "a name refused for an address reason is not suggested" "$SUG" 'host: "rebind.world.test"'
t_not_contains "nor is the metadata address" "$SUG" 'cidr: "169.254'
t_contains "both are listed as refused for address reasons" "$SUG" "$(printf '# refused for address reasons, not suggested:\n')"
t_contains "rebind.world.test among them" "$SUG" "#   rebind.world.test  address-denied"
t_contains "169.254.169.254 among them" "$SUG" "#   169.254.169.254  address-literal, in 169.254.0.0/16"
t_not_contains "no wildcard over world.test, which would cover rebind.world.test" "$SUG" 'host: "*.world.test"'
t_not_contains "no credentials" "$SUG" "credentials"

t_ok "a new sandbox with the suggested policy" sl create "$S2" --policy "$D/suggested.yaml"
: >"$D/mark"
lines_before=$(wc -l <"$D/audit.log")
t_run workload "$S2"
t_eq "the same workload: nothing refused" "8 sent, 8 ok" "$T_OUT"
# What sluice report must count for it: a POST of a known size and a
# download whose size curl reports.
t_ok "an upload of 20000 bytes" sl exec "$S2" -- sh -c \
	'head -c 20000 /dev/zero | tr "\0" x | curl -sf -m 10 -o /dev/null --data-binary @- http://echo.world.test/up'
t_ok "a download" sl exec "$S2" -- curl -sf -m 10 -o /dev/null -w '%{size_download} %{size_header}' \
	http://echo.world.test/down
read -r dl_body dl_head <<<"$T_OUT"
t_ok "delete it" sl delete "$S2"
denies=$(tail -n +"$((lines_before + 1))" "$D/audit.log" | grep -F "\"sandbox\":\"$S2\"" |
	grep -vF '"decision":"allow"')
t_eq "the audit log has no refusal for it" "" "$denies"

# sluice report: the numbers of what the test did.
t_ok "sluice report --json" "$BIN/sluice" report "$S2" --json "$D/audit.log"
REP=$T_OUT
J() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$REP"; }
host_field() { # HOST PORT FIELD
	J "" "[h['$3'] for s in d['sandboxes'] for h in s['hosts'] if h['host']=='$1' and h['port']==$2][0]"
}
t_eq "one sandbox in the report" "1" "$(J "" "len(d['sandboxes'])")"
t_eq "echo.world.test:80: w1, the upload and the download" "3" "$(host_field echo.world.test 80 requests)"
t_eq "echo.world.test:443: one tunnel" "1" "$(host_field echo.world.test 443 requests)"
t_eq "echo.world.test:8080: one request" "1" "$(host_field echo.world.test 8080 requests)"
t_eq "a.canary.world.test: one request" "1" "$(host_field a.canary.world.test 80 requests)"
t_eq "other.world.test (transparent): one request" "1" "$(host_field other.world.test 80 requests)"
t_eq "nothing refused" "0" "$(J "" "d['sandboxes'][0]['refused']")"
t_eq "requests in all: 8 + upload + download" "10" "$(J "" "d['sandboxes'][0]['requests']")"
up=$(host_field echo.world.test 80 bytes_up)
down=$(host_field echo.world.test 80 bytes_down)
t_ok "bytes up to echo.world.test:80 hold the 20000 uploaded ($up)" test "$up" -ge 20000 -a "$up" -le 23000
t_ok "bytes down hold the download ($down >= $dl_body + $dl_head)" test "$down" -ge $((dl_body + dl_head))

t_ok "sluice report of the first sandbox" "$BIN/sluice" report "$S1" --json "$D/audit1.log"
REP=$T_OUT
ref() { J "" "sum(r['count'] for r in d['sandboxes'][0]['refusals'] if r['reason']=='$1' and r['host']=='$2')"; }
t_eq "not-allowlisted a.canary.world.test: 1" "1" "$(ref not-allowlisted a.canary.world.test)"
t_eq "not-allowlisted echo.world.test (w1, w2, w3): 3" "3" "$(ref not-allowlisted echo.world.test)"
t_eq "address-denied rebind.world.test: 1" "1" "$(ref address-denied rebind.world.test)"
t_eq "address-literal 169.254.169.254: 1" "1" "$(ref address-literal 169.254.169.254)"
t_eq "no request got through" "0" "$(J "" "d['sandboxes'][0]['requests']")"
t_ok "the table for a person" "$BIN/sluice" report "$S1" "$D/audit1.log"
t_contains "names the refusals by reason and host" "$T_OUT" "address-denied"
t_contains "with the host and port" "$T_OUT" "rebind.world.test:80"

# Bad input: hostile and malformed lines are skipped, counted, escaped.
{
	head -n 3 "$D/audit1.log"
	echo 'not json'
	echo '{"time":"2026-12-01T21:00:00Z","sandbox":"'"$S1"'","proto":"http","name":"evil\u001b[2J\nx.test","port":80,"decision":"deny","reason":"not-allowlisted","repeated":5}'
	echo '{"time":"2026-12-01T21:00:00Z","sandbox":"'"$S1"'","proto":"http","name":"a\u0000.evil.test","port":80,"decision":"deny","reason":"not-allowlisted"}'
	head -c 20000 /dev/zero | tr '\0' '{'
	echo
} >"$D/hostile.log"
t_ok "suggest over a hostile log" "$BIN/sluice" policy suggest "$D/hostile.log"
t_contains "says how many lines it skipped" "$T_ERR" "skipped 2 of 7 lines"
t_not_contains "no escape byte reaches the output" "$T_OUT" $'\e'
t_not_contains "a name with a NUL is no rule" "$T_OUT" 'evil.test"'
printf '%s\n' "$T_OUT" >"$D/hostile.yaml"
t_ok "and what it prints still loads" "$BIN/sluice" policy check "$D/hostile.yaml"
# More names than one policy holds: what suggest prints still loads, the
# most used kept (4,096 allow rules at most, 1 MiB at most).
python3 - "$D" "$S1" <<'PY'
import json, sys
d, sb = sys.argv[1:3]
def line(f, name, port, n=1):
    f.write(json.dumps({"time": "2026-12-01T21:00:00Z", "sandbox": sb, "proto": "http" if port else "dns",
                        "name": name, "dst_port": port, "decision": "deny", "reason": "not-allowlisted",
                        "repeated": n}, separators=(",", ":")) + "\n")
with open(d + "/many.log", "w") as f:
    for i in range(4200):
        line(f, "h%d.example%d.com" % (i, i), None, 100 if i == 4199 else 1)
with open(d + "/wide.log", "w") as f:
    for i in range(1750):
        name = ("n%d-" % i).ljust(60, "a") + "." + "b" * 60 + "." + "c" * 60 + ".example.com"
        for p in range(64):
            line(f, name, 1000 + p)
PY
t_ok "suggest over 4,200 names" "$BIN/sluice" policy suggest "$D/many.log"
printf '%s\n' "$T_OUT" >"$D/many.yaml"
t_ok "what it prints loads" "$BIN/sluice" policy check "$D/many.yaml"
t_contains "4,096 rules" "$T_OUT" "(4096 rules, 0 credentials)"
t_contains "the rest counted in a comment" "$(cat "$D/many.yaml")" "# 104 more rules not suggested, the least used"
t_contains "the most used is kept" "$(cat "$D/many.yaml")" 'host: "h4199.example4199.com"'
t_ok "suggest over 1,750 long names on 64 ports each" "$BIN/sluice" policy suggest "$D/wide.log"
printf '%s\n' "$T_OUT" >"$D/wide.yaml"
t_ok "what it prints loads (under 1 MiB)" "$BIN/sluice" policy check "$D/wide.yaml"
t_contains "the rest counted in a comment" "$(cat "$D/wide.yaml")" "more rules not suggested, the least used"
t_ok "report over a hostile log" "$BIN/sluice" report "$D/hostile.log"
t_not_contains "no escape byte reaches the table" "$T_OUT" $'\e'
t_contains "the name is shown escaped" "$T_OUT" 'evil\x1b[2J\x0ax.test'
t_rc "an unknown sandbox is an error" 1 "$BIN/sluice" report nosuch-sandbox "$D/audit1.log"
t_contains "that says so" "$T_ERR" "no audit line of sandbox \`nosuch-sandbox\`"
t_rc "a bad --since is a usage error" 2 "$BIN/sluice" policy suggest --since yesterday "$D/audit1.log"
t_contains "that names the value" "$T_ERR" "--since \`yesterday\`: not an RFC 3339 time or a duration"
t_rc "--since in the future keeps nothing" 1 "$BIN/sluice" report "$S1" --since 2999-01-01T00:00:00Z "$D/audit1.log"
t_ok "--since 1h keeps this run" "$BIN/sluice" report "$S1" --since 1h "$D/audit1.log"
t_rc "a missing file is an error" 1 "$BIN/sluice" policy suggest "$D/no-such.log"
# No AUDIT_LOG: the broker names its audit log (config), and report reads it.
t_ok "no AUDIT_LOG: report reads the broker's audit log" sl report "$S1"
t_eq "the same report as with the file named" "$("$BIN/sluice" report "$S1" "$BROKER_AUDIT")" "$T_OUT"

t_eq "no decoy was hit" "" "$(world_decoy_hits)"
broker_stop
t_done
