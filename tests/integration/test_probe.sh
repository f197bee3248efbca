#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice probe, proven both ways. Inside a sluice sandbox, with every target
# pointed into the test world, every check that runs passes (the exact set
# is asserted), no decoy is hit and dnsmasq never hears of the canary. In a
# namespace with plain routed access to the world's "internet" (no broker),
# the same probe fails, by id, every check whose leak that network has;
# with a naive open proxy there, every proxy check fails too. Together the
# runs show each check failing somewhere: none of them can only pass.
# Also: misuse exits 2, --only/--skip/--list/--json, the binary is static
# and runs from a copy elsewhere, and a credential's value is never printed.
# The containment checks (host processes, the control socket, /run/netns,
# /etc/netns, capabilities over the initial user namespace, secret files)
# fail under plain `ip netns exec SANDBOX` as root, and pass in the same
# namespace under a bubblewrap runner that contains the code.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
PROBE=$BIN/sluice-probe
PY=/usr/bin/python3
# The sandbox's traffic must be judged by sluice, never by the caller's proxy.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

# --- the binary, and misuse (these send nothing) -----------------------------------
t_ok "bin/sluice-probe is there" test -x "$PROBE"
t_ok "file(1) on it" file -b "$PROBE"
# Inside the contained runner, whose seccomp filter refuses ptrace,
# LeakSanitizer cannot stop the world at exit (it fails, exit 1): a
# sanitizer build runs there without the leak check, which make asan
# runs everywhere else.
SAN_ENV=
if readelf -d "$PROBE" 2>/dev/null | grep -q 'NEEDED.*libasan'; then
	SAN_ENV=ASAN_OPTIONS=detect_leaks=0
	# make asan links it dynamically: sanitizers need their runtime.
	for c in "it is statically linked" "ldd finds no shared library in it" \
		"readelf: no dynamic section needs a library" "and no program interpreter"; do
		t_skip "$c" "a sanitizer build (make asan) is linked dynamically"
	done
else
	t_contains "it is statically linked" "$T_OUT" "static"
	t_ok "ldd finds no shared library in it" sh -c \
		"ldd '$PROBE' 2>&1 | grep -Eq 'statically linked|not a dynamic executable'"
	t_ok "readelf: no dynamic section needs a library" sh -c "! readelf -d '$PROBE' | grep -q NEEDED"
	t_ok "and no program interpreter" sh -c "! readelf -l '$PROBE' | grep -q 'program interpreter'"
fi

t_rc "an unknown option is misuse" 2 "$PROBE" --bogus
t_contains "and says which" "$T_ERR" "unknown option \`--bogus\`"
t_rc "a bad value is misuse" 2 "$PROBE" --public-addr 1.2.3
t_contains "and says which" "$T_ERR" "--public-addr: \`1.2.3\` is not an IPv4 address"
t_rc "a bad timeout is misuse" 2 "$PROBE" --timeout 5min
t_rc "an option without its value is misuse" 2 "$PROBE" --canary
t_rc "a stray argument is misuse" 2 "$PROBE" extra
t_rc "an unknown id in --only is misuse" 2 "$PROBE" --only tcp-public-literal,no-such-check
t_contains "and names it" "$T_ERR" "unknown check id \`no-such-check\`"
t_rc "an unknown id in --skip is misuse" 2 "$PROBE" --skip nope
t_rc "--only and --skip leaving nothing is misuse" 2 "$PROBE" --only dns-txt --skip dns-txt
t_rc "a bad --broker-pid is misuse" 2 "$PROBE" --broker-pid 0
t_contains "and says which" "$T_ERR" "--broker-pid: \`0\` is not a PID"
t_rc "an empty --secret-file is misuse" 2 "$PROBE" --secret-file=
t_ok "--help" "$PROBE" --help
for o in --expect-allow --expect-deny --canary --resolver --timeout --json --only --skip \
	--public-addr --public-addr6 --private-addr --private-addr6 --metadata-addr --doh-host \
	--dot-addr --redirect-url --allowed-addr --control-socket --secret-file --broker-pid; do
	t_contains "--help names $o" "$T_OUT" "$o"
done
t_ok "--list" "$PROBE" --list
LIST=$T_OUT
IDS=$(awk '{print $1}' <<<"$LIST" | sort)
NIDS=$(wc -l <<<"$IDS")
t_ok "at least 30 checks ($NIDS)" test "$NIDS" -ge 30
t_eq "check ids are unique" "$NIDS" "$(uniq <<<"$IDS" | wc -l)"
t_eq "every check has a description" "" "$(awk 'NF < 3' <<<"$LIST")"
t_ok "--list --only" "$PROBE" --list --only dns-txt,tcp-public-literal
t_eq "lists those two" "dns-txt tcp-public-literal" "$(awk '{print $1}' <<<"$T_OUT" | sort | paste -sd' ')"
t_ok "--list --skip" "$PROBE" --list --skip dns-txt --skip=dns-any
t_eq "lists all but two" "$((NIDS - 2))" "$(wc -l <<<"$T_OUT")"
t_ok "--list --json" "$PROBE" --list --json
t_eq "is one JSON document with the same ids, each with its description" "$IDS" \
	"$(python3 -c 'import json, sys
d = json.load(sys.stdin)
assert all(c["description"] for c in d["checks"])
print("\n".join(sorted(c["id"] for c in d["checks"])))' <<<"$T_OUT")"
t_ok "--list --json --only" "$PROBE" --list --json --only dns-txt
t_eq "lists that one" '[{"id": "dns-txt"}]' "$(python3 -c 'import json, sys
print(json.dumps([{"id": c["id"]} for c in json.load(sys.stdin)["checks"]]))' <<<"$T_OUT")"
# The containment checks: what a runtime keeps from the code besides the network.
CONTAIN_IDS="caps-init-userns control-socket host-processes netns-etc netns-run secret-files vsock"
t_ok "--list has the containment checks" "$PROBE" --list --only "${CONTAIN_IDS// /,}"
t_eq "all seven" "$CONTAIN_IDS" "$(awk '{print $1}' <<<"$T_OUT" | sort | paste -sd' ')"
NNET=$((NIDS - 7))
# Whether this machine has vsock (a virtual machine with a vsock transport:
# a process without a seccomp filter makes an AF_VSOCK socket). Only the
# socket is made, here in the test's own namespace; nothing is connected.
if python3 -c 'import socket; socket.socket(40, socket.SOCK_STREAM).close()' 2>/dev/null; then
	HOST_VSOCK=vsock
else
	HOST_VSOCK=
fi
# but_vsock LIST: LIST without vsock.
but_vsock() { xargs -n1 <<<"$1" | grep -vx vsock | paste -sd' '; }
if [ -x "$BIN/sluice" ]; then
	t_ok "sluice probe --list (the same code in the CLI)" "$BIN/sluice" probe --list
	t_eq "lists the same checks" "$LIST" "$T_OUT"
	t_rc "sluice probe: misuse exits 2" 2 "$BIN/sluice" probe --only nope
else
	t_skip "sluice probe --list" "no $BIN/sluice"
fi

# --- the world ----------------------------------------------------------------------
world_up || { echo "world did not come up"; echo "$T_PASS passed, $((T_FAIL + 1)) failed"; exit 1; }
D=$WORLD_DIR
SB=$WORLD_PREFIX-pb
RT=$WORLD_PREFIX-rt
cleanup() {
	sl delete "$SB" >/dev/null 2>&1
	broker_stop
	world_down
}
trap cleanup EXIT

# A DNS-over-TLS server for dns-dot (the echo server's TLS on 11.0.1.53:853).
world_spawn inet dot "$PY" tests/world/echo.py --log "$D/dot.log" --ready "$D/ready.dot" \
	--cert "$D/pki/server.crt" --key "$D/pki/server.key" --listen "https:11.0.1.53:853"
for _ in $(seq 100); do [ -s "$D/ready.dot" ] && break; sleep 0.1; done
t_ok "a DoT server listens on 11.0.1.53:853" test -s "$D/ready.dot"

echo "s3cret-of-the-broker" >"$D/secret"
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
      ports: [80, 443]
credentials:
  - name: demo
    source: { file: $D/secret }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/api/*"] }
    placeholder: DEMO_TOKEN
    plaintext: allow
EOF
broker_config "connect_timeout: 2s"
broker_start || { echo "broker did not start"; echo "$T_PASS passed, $((T_FAIL + 1)) failed"; exit 1; }
t_ok "sluice create" sl create "$SB" --policy "$D/pol.yaml"
# Unprivileged ping sockets allowed in the sandbox's own namespace, so that
# icmp-echo has something to send with (the sandbox's sysctl, not the machine's).
ip netns exec "$SB" sysctl -qw net.ipv4.ping_group_range="0 2147483647"
t_ok "sluice env" sl env "$SB"
SBENV=$T_OUT
PH=$(sed -n 's/^DEMO_TOKEN=//p' <<<"$SBENV")
t_contains "the sandbox holds a placeholder" "$PH" "sluice-ph-"

# Every target points into the test world: never at a real outside address.
# shellcheck disable=SC2054 # --gateway-ports takes a comma list
CANARY=canary.world.test
ARGS=(--timeout 3
	--expect-allow echo.world.test:443 --expect-allow echo.world.test:80
	--expect-deny other.world.test:443 --expect-deny other.world.test:80
	--canary "$CANARY" --resolver 11.0.1.53 --resolver 11.0.3.1
	--public-addr 11.0.2.10 --public-addr6 2600:1::10
	--private-addr 10.0.0.5 --private-addr 172.16.0.5 --private-addr 192.168.1.5
	--private-addr 100.64.0.5 --private-addr6 fd00::5
	--metadata-addr 169.254.169.254 --metadata-addr6 fd00:ec2::254 --ecs-addr 169.254.170.2
	--alibaba-addr 100.100.100.200 --metadata-name metadata.world.test
	--udp-addr 11.0.3.1 --udp-port 9999 --dns-name other.world.test
	--doh-host other.world.test --doh-addr 11.0.2.20 --dot-addr 11.0.1.53:853
	--allowed-addr 11.0.2.10 --blocked-port 8080
	--redirect-url "http://echo.world.test/redirect?to=http://10.0.0.5/"
	--edge-suffix evil.world.test --edge-prefix evil- --gateway-ports 22,80,443,8080,9090)
# The network runs below leave the containment checks out: section 4 tests
# them under each runner, with what they must look for.
NETARGS=("${ARGS[@]}" --skip "${CONTAIN_IDS// /,}")

# The sandbox as `sluice exec` makes it, with only the environment sluice gives.
# shellcheck disable=SC2086 # sluice env prints KEY=VALUE words
IN_SB() { sl exec --bind "$BIN:$BIN:ro" "$SB" -- env -i PATH=/usr/bin:/bin $SAN_ENV $SBENV "$@"; }
# verdicts JSON: "verdict id" lines of a --json report.
verdicts() { $PY -c 'import json,sys
for c in json.load(sys.stdin)["checks"]: print(c["verdict"], c["id"])' <<<"$1"; }
ids_of() { awk -v v="$2" '$1 == v {print $2}' <<<"$1" | sort | paste -sd' '; }
detail_of() { $PY -c 'import json,sys
for c in json.load(sys.stdin)["checks"]:
    if c["id"] == sys.argv[1]: print(c["detail"])' "$2" <<<"$1"; }
has_line() { grep -Eq "$2" <<<"$1"; }
all_but() { comm -23 <(tr ' ' '\n' <<<"$IDS" | sort) <(tr ' ' '\n' <<<"$*" | sort) | paste -sd' '; }

# --- 1. inside a sluice sandbox: everything passes ----------------------------------------
world_clear_logs
T0=$(date +%s%N)
t_rc "in the sandbox: the probe exits 0" 0 IN_SB "$PROBE" "${NETARGS[@]}" --json
echo "# the sandbox run took $((($(date +%s%N) - T0) / 1000000)) ms"
SBJSON=$T_OUT
t_ok "its --json is valid JSON" sh -c 'printf "%s" "$1" | python3 -m json.tool >/dev/null' _ "$SBJSON"
V=$(verdicts "$SBJSON")
t_eq "every network check ran" "$NNET" "$(wc -l <<<"$V")"
# No IPv6 in a sluice sandbox: these have nothing to send on. And no raw
# socket under the contained runner (no CAP_NET_RAW over the sandbox's
# network): icmp-raw is skipped (what the firewall does with raw ICMP from
# a sandbox's root is checked in test_sandbox, through ip netns exec).
SKIP_SB="icmp6-echo meta-imds-v6 tcp-private-v6 tcp-public-v6"
t_eq "failed in the sandbox" "" "$(ids_of "$V" fail)"
t_eq "skipped in the sandbox (no IPv6 route, no raw socket)" "$(xargs -n1 <<<"icmp-raw $SKIP_SB" | sort | paste -sd' ')" "$(ids_of "$V" skip)"
t_eq "passed in the sandbox: all the others" "$(all_but icmp-raw $SKIP_SB $CONTAIN_IDS)" \
	"$(ids_of "$V" pass)"
t_eq "the JSON summary agrees" "$((NNET - 5)) 0 5" \
	"$($PY -c 'import json,sys; s=json.load(sys.stdin)["summary"]; print(s["pass"], s["fail"], s["skip"])' <<<"$SBJSON")"
t_contains "skipped with the reason" "$(detail_of "$SBJSON" tcp-public-v6)" "no IPv6 route"
t_contains "a literal: 403 address-literal" "$(detail_of "$SBJSON" tcp-public-literal)" \
	"HTTP 403 X-Sluice-Reason: address-literal"
t_contains "metadata: 403 address-literal" "$(detail_of "$SBJSON" meta-imds-v4)" "address-literal"
t_contains "an allowed host on another port: port-not-allowed" \
	"$(detail_of "$SBJSON" tcp-allowed-port)" "port-not-allowed"
t_contains "another Host: host-mismatch" "$(detail_of "$SBJSON" tcp-host-mismatch)" "host-mismatch"
t_contains "UDP out: ICMP admin-prohibited" "$(detail_of "$SBJSON" udp-443-quic)" "admin-prohibited"
t_contains "raw ICMP: no raw socket in the contained runner" "$(detail_of "$SBJSON" icmp-raw)" "no CAP_NET_RAW"
t_contains "direct DNS meets the filter" "$(detail_of "$SBJSON" dns-direct-udp)" "NXDOMAIN"
t_contains "the canary label: NXDOMAIN, EDE 15 (Blocked)" "$(detail_of "$SBJSON" dns-canary-exfil)" \
	"NXDOMAIN (EDE 15: blocked by sluice policy)"
t_contains "the redirect is refused" "$(detail_of "$SBJSON" redirect-private)" "redirect-outside-policy"
t_contains "the proxy refuses 127.1" "$(detail_of "$SBJSON" proxy-loop-127-1)" "X-Sluice-Reason"
t_contains "the placeholder counts as one" "$(detail_of "$SBJSON" env-credentials)" "1 holding a placeholder"
t_contains "expected hosts work through the proxy" "$(detail_of "$SBJSON" expect-allow)" "TLS ServerHello"
t_not_contains "the placeholder's value is not printed" "$SBJSON" "$PH"
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_eq "dnsmasq heard nothing of the canary" "" "$(grep -i "$CANARY" "$D/dnsmasq.log")"
t_contains "the canary label the probe asked is in its report" "$SBJSON" "sluice-probe-"

SB_RC=$(verdicts "$SBJSON" | grep -q '^fail' && echo 1 || echo 0)
SB_SUM=$($PY -c 'import json,sys; s=json.load(sys.stdin)["summary"]; print("%d passed, %d failed, %d skipped" % (s["pass"], s["fail"], s["skip"]))' <<<"$SBJSON")
t_rc "the readable table, in the sandbox: the same exit status" "$SB_RC" IN_SB "$PROBE" "${NETARGS[@]}"
TABLE=$T_OUT
t_contains "has a header" "$TABLE" "CHECK"
t_ok "one line per check, with its verdict" has_line "$TABLE" '^tcp-public-literal +pass +HTTP to a public'
t_contains "and the same summary as the JSON" "$TABLE" "$NNET checks: $SB_SUM"

# The same with the proxy variables unset: the transparent path, alone.
NOPROXY_ENV=$(grep -v -i '_proxy=' <<<"$SBENV")
# shellcheck disable=SC2086
t_rc "in the sandbox without proxy variables: exits 0" 0 \
	sl exec --bind "$BIN:$BIN:ro" "$SB" -- env -i PATH=/usr/bin:/bin $SAN_ENV $NOPROXY_ENV "$PROBE" "${NETARGS[@]}" --json
V=$(verdicts "$T_OUT")
PROXY_IDS=$(grep -E '^proxy-' <<<"$IDS" | paste -sd' ')
t_eq "every proxy check is skipped, and the IPv6 ones and icmp-raw" \
	"$(xargs -n1 <<<"$PROXY_IDS icmp-raw $SKIP_SB" | sort | paste -sd' ')" "$(ids_of "$V" skip)"
t_contains "no proxy variable" "$(detail_of "$T_OUT" proxy-private)" "no proxy variable is set"
t_eq "nothing failed" "" "$(ids_of "$V" fail)"
t_contains "expected hosts work directly (transparent path)" "$(detail_of "$T_OUT" expect-allow)" \
	"echo.world.test:443: TLS ServerHello"

t_rc "--only runs just those" 0 IN_SB "$PROBE" "${NETARGS[@]}" --json --only tcp-public-literal,dns-txt
t_eq "--only: the two ids" "pass dns-txt pass tcp-public-literal" "$(verdicts "$T_OUT" | sort | paste -sd' ')"
t_rc "--skip leaves them out (the same exit status)" "$SB_RC" IN_SB "$PROBE" "${NETARGS[@]}" --json \
	--skip tcp-public-literal,dns-txt
SKIPPED=$(verdicts "$T_OUT")
t_eq "--skip: two fewer" "$((NNET - 2))" "$(wc -l <<<"$SKIPPED")"
t_not_contains "--skip: not that one" "$SKIPPED" "tcp-public-literal"
t_rc "sluice probe (the CLI) in the sandbox" 0 IN_SB "$BIN/sluice" probe "${NETARGS[@]}" --json \
	--only tcp-public-literal,dns-canary-exfil,udp-443-quic,expect-allow
t_eq "the same code, the same verdicts" \
	"pass dns-canary-exfil pass expect-allow pass tcp-public-literal pass udp-443-quic" \
	"$(verdicts "$T_OUT" | sort | paste -sd' ')"
t_rc "a host expected to work that does not: exit 1" 1 IN_SB "$PROBE" "${NETARGS[@]}" \
	--only expect-allow --expect-allow other.world.test:443 --json
t_eq "expect-allow fails" "fail expect-allow" "$(verdicts "$T_OUT")"
t_contains "naming it" "$(detail_of "$T_OUT" expect-allow)" "other.world.test:443"
t_eq "still no decoy hit" "" "$(world_decoy_hits)"
t_eq "still nothing of the canary at dnsmasq" "" "$(grep -i "$CANARY" "$D/dnsmasq.log")"

# --- 4. containment: the same sandbox's network, two runners ------------------------------
# What the containment checks are told to look for: the test broker's
# control socket and PID, and the secret file its policy reads.
CARGS=(--control-socket "$BROKER_SOCK" --secret-file "$D/secret" --broker-pid "$BROKER_PID")
SECRET_VALUE=$(cat "$D/secret")
# (a) Today's uncontained way in: root in the host's namespaces, in the
# sandbox's network namespace only. Every containment check must fail.
t_rc "ip netns exec as root: the containment checks fail (exit 1)" 1 \
	ip netns exec "$SB" env -i PATH=/usr/bin:/bin "$PROBE" --only "${CONTAIN_IDS// /,}" "${CARGS[@]}" --json
CJSON=$T_OUT
V=$(verdicts "$CJSON")
CONTAIN_FAILED=$(ids_of "$V" fail)
# (vsock fails where the machine has it: nothing but a seccomp filter
# refuses the family.)
t_eq "ip netns exec: all seven fail (vsock where the machine has it)" \
	"$(but_vsock "$CONTAIN_IDS")${HOST_VSOCK:+ $HOST_VSOCK}" "$CONTAIN_FAILED"
t_contains "host processes: the host's PID namespace" "$(detail_of "$CJSON" host-processes)" \
	"it runs in the host's PID namespace"
t_contains "host processes: the broker is named" "$(detail_of "$CJSON" host-processes)" \
	"the broker's pid $BROKER_PID (--broker-pid) is visible: \`sluiced\`"
t_contains "control socket: connected (reachable, which fails the check)" \
	"$(detail_of "$CJSON" control-socket)" "$BROKER_SOCK: connected"
t_contains "though the broker refuses a caller inside a sandbox" "$(detail_of "$CJSON" control-socket)" \
	"the broker refused a read-only \`status\`"
t_contains "/run/netns: lists namespaces" "$(detail_of "$CJSON" netns-run)" "/run/netns lists"
t_contains "/etc/netns: lists settings" "$(detail_of "$CJSON" netns-etc)" "/etc/netns lists"
t_contains "capabilities: in the initial user namespace" "$(detail_of "$CJSON" caps-init-userns)" \
	"in the initial user namespace (uid_map \`0 0 4294967295\`"
t_contains "the secret file can be opened" "$(detail_of "$CJSON" secret-files)" \
	"$D/secret can be opened for reading"
t_not_contains "and its value is never printed" "$CJSON" "$SECRET_VALUE"
t_ok "the broker still serves the sandbox (status changed nothing)" sl list
t_contains "listing it" "$T_OUT" "$SB"

# (b) A runner that contains the code: bubblewrap, entered after
# `ip netns exec SANDBOX` (--share-net keeps the sandbox's network), with
# its own user, PID, mount, IPC and UTS namespaces, /usr read-only, the
# sandbox's resolv.conf and nothing else of the host. Everything passes:
# the network checks as under sluice exec, and the containment checks.
if command -v bwrap >/dev/null; then
	# shellcheck disable=SC2086 # sluice env prints KEY=VALUE words
	IN_BWRAP() {
		ip netns exec "$SB" env -i PATH=/usr/bin:/bin $SBENV \
			bwrap --unshare-all --share-net --die-with-parent \
			--ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
			--symlink usr/bin /bin --symlink usr/sbin /sbin \
			--proc /proc --dev /dev --tmpfs /tmp \
			--ro-bind /etc/resolv.conf /etc/resolv.conf \
			--ro-bind "$PROBE" /probe "$@"
	}
	world_clear_logs
	# Exit 1 where the machine has vsock: bubblewrap leaves it open (below).
	BW_RC=0
	[ -n "$HOST_VSOCK" ] && BW_RC=1
	t_rc "bubblewrap in the sandbox: every check passes or skips but vsock (exit $BW_RC)" "$BW_RC" \
		IN_BWRAP /probe "${ARGS[@]}" "${CARGS[@]}" --json
	BWJSON=$T_OUT
	V=$(verdicts "$BWJSON")
	t_eq "bubblewrap: every check ran" "$NIDS" "$(wc -l <<<"$V")"
	# Bubblewrap without --seccomp leaves AF_VSOCK open: on a machine with
	# vsock that check fails, as it should.
	t_eq "bubblewrap: nothing failed (but vsock, where the machine has it)" "$HOST_VSOCK" \
		"$(ids_of "$V" fail)"
	# CAP_NET_RAW over its own user namespace is none over the sandbox's
	# network namespace: no raw socket, so icmp-raw has nothing to send.
	t_eq "bubblewrap: skipped, the IPv6 ones and icmp-raw" \
		"$(xargs -n1 <<<"icmp-raw $SKIP_SB" | sort | paste -sd' ')" "$(ids_of "$V" skip)"
	t_contains "icmp-raw: no raw socket" "$(detail_of "$BWJSON" icmp-raw)" "raw sockets are not permitted here"
	t_eq "bubblewrap: the containment checks pass (vsock: above)" "$(but_vsock "$CONTAIN_IDS")" \
		"$(comm -12 <(ids_of "$V" pass | tr ' ' '\n') <(tr ' ' '\n' <<<"$CONTAIN_IDS") | paste -sd' ')"
	t_contains "host processes: only its own PID namespace" "$(detail_of "$BWJSON" host-processes)" \
		"all in its own PID namespace"
	t_contains "the broker's socket is not there" "$(detail_of "$BWJSON" control-socket)" \
		"$BROKER_SOCK: cannot connect (No such file or directory)"
	t_contains "nor the default one" "$(detail_of "$BWJSON" control-socket)" \
		"/run/sluice/sluiced.sock: cannot connect"
	t_contains "/run/netns is not there" "$(detail_of "$BWJSON" netns-run)" "cannot be listed"
	t_contains "/etc/netns is not there" "$(detail_of "$BWJSON" netns-etc)" "cannot be listed"
	t_contains "capabilities: over its own user namespace only" \
		"$(detail_of "$BWJSON" caps-init-userns)" "over its own user namespace only"
	t_contains "the secret file cannot be opened" "$(detail_of "$BWJSON" secret-files)" \
		"$D/secret: cannot open"
	t_eq "bubblewrap: no decoy was hit" "" "$(world_decoy_hits)"
	t_eq "bubblewrap: dnsmasq heard nothing of the canary" "" "$(grep -i "$CANARY" "$D/dnsmasq.log")"
	# The check judges by connect(2), not by the path: the broker's socket
	# bound into the same runner is reachable again.
	t_rc "bubblewrap with the control socket bound in: control-socket fails" 1 \
		IN_BWRAP --bind "$BROKER_SOCK" /run/ctl.sock /probe --only control-socket \
		--control-socket /run/ctl.sock --json
	t_contains "connected there" "$(detail_of "$T_OUT" control-socket)" "/run/ctl.sock: connected"
else
	t_skip "bubblewrap runner" "no bwrap (scripts/deps.sh installs bubblewrap)"
fi
# (c) sluice exec, the contained runner: every containment check passes.
t_rc "sluice exec: the containment checks pass (exit 0)" 0 \
	IN_SB "$PROBE" --only "${CONTAIN_IDS// /,}" "${CARGS[@]}" --json
t_eq "sluice exec: all seven pass" "$CONTAIN_IDS" "$(ids_of "$(verdicts "$T_OUT")" pass)"
t_contains "vsock: its seccomp filter refuses the family" "$(detail_of "$T_OUT" vsock)" \
	"socket(AF_VSOCK) is refused (Address family not supported by protocol)"
sl delete "$SB" >/dev/null 2>&1

# --- 2. plain routed access, no broker: the leaks show, by id -----------------------------
world_clear_logs
t_ok "a namespace routed straight into the world" \
	world_add_routed rt 11.0.9.2/24 11.0.9.1 fd11:9::2/64 fd11:9::1
ip netns exec "$RT" sysctl -qw net.ipv4.ping_group_range="0 2147483647"
# Something listening on the gateway, on one of the ports that must be closed.
world_spawn inet decoy-gw "$PY" tests/world/decoy.py --log "$D/decoy-gw.log" \
	--ready "$D/ready.decoy-gw" --tcp 11.0.9.1:9090
for _ in $(seq 100); do [ -s "$D/ready.decoy-gw" ] && break; sleep 0.1; done
TOKEN=ghp_routed0secret0value0must0not0show
# From a copy elsewhere: the static binary needs nothing of its build tree.
mkdir -p "$D/elsewhere" && cp "$PROBE" "$D/elsewhere/probe"
RUN_RT() { ip netns exec "$RT" env -i GITHUB_TOKEN=$TOKEN "$@"; }
t_rc "routed: the probe (a copy, no PATH) exits 1" 1 RUN_RT "$D/elsewhere/probe" "${NETARGS[@]}" --json
RTJSON=$T_OUT
t_ok "its --json is valid JSON" sh -c 'printf "%s" "$1" | python3 -m json.tool >/dev/null' _ "$RTJSON"
V=$(verdicts "$RTJSON")
LEAKS="dns-any dns-canary-direct dns-canary-exfil dns-direct-tcp dns-direct-udp dns-doh dns-dot
	dns-null dns-txt env-credentials expect-deny gw-direct-ports icmp-echo icmp-raw icmp6-echo
	meta-alibaba meta-ecs meta-imds-v2 meta-imds-v4 meta-imds-v6 meta-name name-mixed-case
	name-prefix name-suffix name-trailing-dot redirect-private tcp-allowed-literal
	tcp-allowed-port tcp-host-mismatch tcp-private-v4 tcp-private-v6 tcp-public-literal
	tcp-public-other tcp-public-v6 tls-public-literal tls-sni-mismatch udp-443-quic udp-53-out
	udp-random-port"
LEAKS=$(xargs -n1 <<<"$LEAKS" | sort | paste -sd' ')
t_eq "routed: exactly these checks fail" "$LEAKS" "$(ids_of "$V" fail)"
t_eq "routed: the expected hosts still work" "expect-allow" "$(ids_of "$V" pass)"
t_eq "routed: the proxy checks are skipped (no proxy)" "$PROXY_IDS" "$(ids_of "$V" skip)"
t_contains "a literal: the echo server answered" "$(detail_of "$RTJSON" tcp-public-literal)" "HTTP 200"
t_contains "TLS: a ServerHello came back" "$(detail_of "$RTJSON" tls-public-literal)" "ServerHello"
t_contains "UDP: the responder replied" "$(detail_of "$RTJSON" udp-random-port)" "a reply"
t_contains "ICMP: an echo reply" "$(detail_of "$RTJSON" icmp-raw)" "echo reply"
t_contains "the canary was answered" "$(detail_of "$RTJSON" dns-canary-exfil)" "reached the canary"
t_contains "the credential is named" "$(detail_of "$RTJSON" env-credentials)" "GITHUB_TOKEN"
t_not_contains "its value is never printed" "$RTJSON" "$TOKEN"
t_ok "dnsmasq did hear the canary labels here" grep -q "sluice-probe-.*\.$CANARY" "$D/dnsmasq.log"
t_contains "the metadata decoy was hit" "$(world_decoy_hits)" "169.254.169.254 80"
t_contains "the gateway decoy was hit" "$(cat "$D/decoy-gw.log")" "11.0.9.1 9090"
RT_FAILED=$(ids_of "$V" fail)
t_rc "routed, the table: exit 1" 1 RUN_RT "$D/elsewhere/probe" "${NETARGS[@]}"
TABLE=$T_OUT
t_ok "names a leak by id" has_line "$TABLE" '^meta-imds-v4 +fail'
t_not_contains "the table never prints the value either" "$TABLE" "$TOKEN"

# --- 3. routed, with a naive open proxy: every proxy check fails --------------------------
# What a proxy without a policy does: connect wherever it is asked.
cat >"$D/naive.py" <<'EOF'
import select, socket, sys, threading
from urllib.parse import urlsplit
ME = (sys.argv[1], int(sys.argv[2]))

def relay(a, b):
    try:
        while True:
            r, _, _ = select.select([a, b], [], [], 5)
            if not r:
                return
            for s in r:
                d = s.recv(65536)
                if not d:
                    return
                (b if s is a else a).sendall(d)
    except OSError:
        pass

def handle(c):
    up = None
    try:
        c.settimeout(5)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            d = c.recv(4096)
            if not d:
                return
            head += d
        method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            host, port = host.strip("[]"), int(port)
        else:
            u = urlsplit(target)
            host, port = u.hostname, u.port or 80
        if (host, port) == ME:  # asked for itself: answers
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nnaive\n")
            return
        up = socket.create_connection((host, port), timeout=5)
        if method == "CONNECT":
            c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            path = (u.path or "/") + ("?" + u.query if u.query else "")
            head = head.replace(target.encode("latin-1"), path.encode("latin-1"), 1)
        rest = head.split(b"\r\n\r\n", 1)[1] if method == "CONNECT" else head
        if rest:
            up.sendall(rest)
        relay(c, up)
    except Exception:
        try:
            c.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        except OSError:
            pass
    finally:
        c.close()
        if up:
            up.close()

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(ME)
s.listen(64)
open(sys.argv[3], "w").write("ready\n")
while True:
    conn, _ = s.accept()
    threading.Thread(target=handle, args=(conn,), daemon=True).start()
EOF
world_spawn inet naive "$PY" "$D/naive.py" 11.0.9.1 3128 "$D/ready.naive"
# The internet namespace's own loopback, where such a proxy lands for 127.1 & co.
world_spawn inet decoy-lo "$PY" tests/world/decoy.py --log "$D/decoy-lo.log" \
	--ready "$D/ready.decoy-lo" --tcp 127.0.0.1:80 --tcp "[::1]:80"
for _ in $(seq 100); do [ -s "$D/ready.naive" ] && [ -s "$D/ready.decoy-lo" ] && break; sleep 0.1; done
t_ok "a naive proxy listens on 11.0.9.1:3128" test -s "$D/ready.naive"
NAIVE=http://11.0.9.1:3128
t_rc "routed with a naive proxy: exit 1" 1 ip netns exec "$RT" env -i HTTP_PROXY=$NAIVE \
	HTTPS_PROXY=$NAIVE "$PROBE" "${NETARGS[@]}" --json
NPJSON=$T_OUT
V=$(verdicts "$NPJSON")
NP_FAILED=$(ids_of "$V" fail)
for id in $PROXY_IDS; do
	t_contains "naive proxy: $id fails" " $NP_FAILED " " $id "
done
t_contains "the proxy fetched 127.1" "$(detail_of "$NPJSON" proxy-loop-127-1)" "HTTP 200"
t_contains "loopback was reached" "$(cat "$D/decoy-lo.log")" "HIT tcp 127.0.0.1 80"
t_contains "the SNI check saw a ServerHello" "$(detail_of "$NPJSON" proxy-sni-mismatch)" "ServerHello"
t_contains "the redirect was followed to the decoy" "$(detail_of "$NPJSON" redirect-private)" "HTTP 200"
t_eq "expected hosts work through it" "pass expect-allow" "$(verdicts "$NPJSON" | grep -w expect-allow)"

# Every check failed somewhere (expect-allow above, in the sandbox run
# with a host that does not work): none of them can only pass.
t_eq "every check has been seen failing" "" \
	"$(all_but $RT_FAILED $NP_FAILED $CONTAIN_FAILED expect-allow)"

t_done
