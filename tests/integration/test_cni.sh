#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: alone (run.sh): /var/lib/cni and a machine-wide listing of cni-* names
# sluice-cni, as runtimes call it. (1) The CNI contract, by executing the
# plugin directly with the CNI environment and the network config on stdin,
# the config being deploy/kubernetes/10-sluice.conflist (what the
# Kubernetes init container installs) with the test world's socket,
# broker namespace and policy directory: ADD wires a namespace made here as
# a runtime makes one, and inside it the allowed host is reached, another
# is refused, names outside policy are NXDOMAIN and the metadata decoy is
# never hit; the result matches the interface; CHECK passes, and fails
# once the wiring is broken; DEL, DEL again, DEL with neither CNI_NETNS nor
# prevResult, DEL after the namespace vanished all succeed and leave
# nothing; a bad config, a bad or unknown policy name, an unreachable
# broker, a namespace another plugin already wired get the spec's error
# JSON and leave nothing; the pod annotation beats CNI_ARGS, which beats
# the config; a pod named in CNI_ARGS gets its CA bundle and environment
# where deploy/kubernetes/sandbox-pod.yaml mounts them from (HTTPS to an
# intercepted host is trusted with them, the placeholder is there, the
# secret is not), kept for a pod made again under its name, removed by
# DEL. (2) The Kubernetes manifests
# parse, and the conflist their init container writes is (1)'s. (3) podman
# with network_backend "cni" runs sluice-cni from a conflist of this test's
# own: the container meets the policy, the probe passes, and removing the
# container (DEL) leaves nothing.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
CNI=$BIN/sluice-cni
CONFLIST=$PWD/deploy/kubernetes/10-sluice.conflist
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

world_up || { echo "world did not come up"; echo "0 passed, 1 failed"; exit 1; }
D=$WORLD_DIR
P=$WORLD_PREFIX
# Container ids as runtimes make them (64 hex digits); their sandboxes are
# cni- and the first 24.
new_id() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
IDS=()
cleanup() {
	local id
	podman_cleanup
	for id in "${IDS[@]}"; do
		cni DEL "$id" "" "" "$D/net.json" >/dev/null 2>&1
	done
	broker_stop
	world_down
	# The pods' files of this world and its sandboxes' marks (DEL removed
	# them, unless it failed); the directories, if nobody else's are there.
	rm -rf "/run/sluice-pods/${P:-none}"
	for id in "${IDS[@]}"; do rm -f "/run/sluice-pods/.sandboxes/cni-${id:0:24}"; done
	rmdir /run/sluice-pods/.sandboxes /run/sluice-pods 2>/dev/null
}
podman_cleanup() { :; }	# (3) defines it
trap cleanup EXIT

mkdir -p "$D/policies"
cat >"$D/policies/default.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
EOF
# A credential for other.world.test: its HTTPS is intercepted with the
# sandbox's own CA (trusted only through the sandbox's bundle), and the
# sandbox holds a placeholder for it.
SECRET="s3cr3t-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$D/secret"
chmod 600 "$D/secret"
cat >"$D/policies/web.yaml" <<EOF
version: 1
egress:
  allow:
    - host: other.world.test
credentials:
  - name: web-token
    source: { file: $D/secret }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [other.world.test], paths: ["/api/*"] }
    placeholder: WEB_TOKEN
EOF
broker_config "connect_timeout: 2s"
broker_start || { echo "0 passed, 1 failed"; exit 1; }

# The plugin's config as a runtime derives it from the conflist: the one
# plugin's object with the list's cniVersion and name.
t_ok "jq is installed (scripts/deps.sh)" command -v jq
t_ok "the conflist's plugin, with the test world's paths" bash -c \
	'jq --arg s "$1" --arg b "/run/netns/$2" --arg d "$3" \
		".plugins[0] + {cniVersion, name} | .socket = \$s | .brokerNetns = \$b | .policyDir = \$d" \
		"$4" >"$5"' conf "$BROKER_SOCK" "$WORLD_BRK" "$D/policies" "$CONFLIST" "$D/net.json"

# cni COMMAND ID NETNS CNI_ARGS CONFIG: the plugin as a runtime runs it,
# with nothing of this shell's environment.
cni() {
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin CNI_COMMAND="$1" CNI_CONTAINERID="$2" \
		CNI_NETNS="$3" CNI_IFNAME=eth0 CNI_PATH="$BIN" CNI_ARGS="$4" "$CNI" <"$5"
}
# with_prev CONFIG RESULT OUT: CONFIG with prevResult RESULT (DEL, CHECK).
with_prev() { jq --argjson r "$2" '. + {prevResult: $r}' "$1" >"$3"; }
# code: the CNI error code in T_OUT.
code() { jq -r .code <<<"$T_OUT" 2>/dev/null; }
# leftovers ID NETNS ADDRS: what is left of the sandbox of container ID
# (its registration, files and names; interfaces in NETNS; for each of its
# addresses ADDRS, the broker's link, "sl-" and the address in hex, and
# the set element): each thing on its own line (nothing: nothing is left).
leftovers() {
	local sb=cni-${1:0:24} a hex
	sl list 2>/dev/null | awk -v n="$sb" '$1 == n { print "registered: " $0 }'
	[ -e "/run/sluice-sandboxes/$sb" ] && echo "/run/sluice-sandboxes/$sb"
	[ -e "/etc/netns/$sb" ] && echo "/etc/netns/$sb"
	[ -e "/run/netns/$sb" ] && echo "/run/netns/$sb"
	if [ -n "$2" ] && [ -e "$2" ]; then
		ip -n "$(basename "$2")" -o link show 2>/dev/null | awk -F': ' '$2 != "lo" { print "in the namespace: " $2 }'
	fi
	for a in $3; do
		# shellcheck disable=SC2086 # the address's four numbers
		hex=$(printf '%02x' ${a//./ })
		brk_exec ip -o link show "sl-$hex" 2>/dev/null | awk -F': ' '{ print "broker link: " $2 }'
		brk_exec nft list set inet sluice sandbox_src 2>/dev/null | grep -F "$a" | sed 's/^/set element: /'
	done
	return 0
}
# in_ct NETNS RESOLV CMD...: CMD in the container's network namespace, with
# the resolv.conf a runtime writes from the result (a mount namespace of
# its own, so the host's is untouched).
in_ct() {
	local ns=$1 rc=$2
	shift 2
	nsenter --net="$ns" unshare --mount --propagation private -- \
		sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$rc" "$@"
}

# in_pod NETNS RESOLV PODDIR CMD...: in_ct, with PODDIR at
# /etc/sluice-sandbox as deploy/kubernetes/sandbox-pod.yaml mounts it (over
# an overlay of /etc on a tmpfs: nothing is written to the host's /etc).
in_pod() {
	local ns=$1 rc=$2 pd=$3 ov
	shift 3
	ov=$(mktemp -d "$D/ovl.XXXXXX")
	nsenter --net="$ns" unshare --mount --propagation private -- sh -c '
		mount -t tmpfs tmpfs "$2" && mkdir "$2/up" "$2/work" &&
		mount -t overlay overlay -o "lowerdir=/etc,upperdir=$2/up,workdir=$2/work" /etc &&
		mkdir /etc/sluice-sandbox && mount --bind -o ro "$1" /etc/sluice-sandbox &&
		mount --bind "$0" /etc/resolv.conf && shift 2 && exec "$@"' "$rc" "$pd" "$ov" "$@"
}

t_ok "bin/sluice-cni is there" test -x "$CNI"

# --- VERSION, and what is refused before anything is done ------------------------
t_ok "VERSION" env -i CNI_COMMAND=VERSION "$CNI"
t_eq "speaks 1.0.0" '1.0.0 ["1.0.0"]' "$(jq -c -r '.cniVersion + " " + (.supportedVersions | tojson)' <<<"$T_OUT")"
t_rc "no CNI_COMMAND: exit 1" 1 env -i "$CNI"
t_eq "code 4 (environment)" 4 "$(code)"

ID1=$(new_id)
IDS+=("$ID1")
SB1=cni-${ID1:0:24}
t_ok "a runtime's namespace, c1" _world_ns_add "$P-c1"
NS1=/run/netns/$P-c1

bad_conf() { printf '%s' "$1" >"$D/bad.json"; }
bad_conf 'not json'
t_rc "ADD, config not JSON: exit 1" 1 cni ADD "$ID1" "$NS1" "" "$D/bad.json"
t_eq "code 6 (decode)" 6 "$(code)"
t_contains "said on stdout as CNI error JSON" "$(jq -r .msg <<<"$T_OUT")" "not JSON"
jq '.cniVersion = "0.4.0"' "$D/net.json" >"$D/bad.json"
t_rc "ADD, cniVersion 0.4.0: exit 1" 1 cni ADD "$ID1" "$NS1" "" "$D/bad.json"
t_eq "code 1 (version)" 1 "$(code)"
jq '. + {ipam: {type: "host-local"}}' "$D/net.json" >"$D/bad.json"
t_rc "ADD, an ipam section: exit 1" 1 cni ADD "$ID1" "$NS1" "" "$D/bad.json"
t_eq "code 2 (unsupported field)" 2 "$(code)"
jq '.socket = 7' "$D/net.json" >"$D/bad.json"
t_rc "ADD, a socket that is not a string: exit 1" 1 cni ADD "$ID1" "$NS1" "" "$D/bad.json"
t_eq "code 7 (invalid config)" 7 "$(code)"
t_contains "naming the key" "$(jq -r .msg <<<"$T_OUT")" '`socket`'
t_rc "ADD, a container id that is not one: exit 1" 1 cni ADD "../$ID1" "$NS1" "" "$D/net.json"
t_eq "code 4 (environment)" 4 "$(code)"
t_rc "ADD, policy name ../x: exit 1" 1 cni ADD "$ID1" "$NS1" "SLUICE_POLICY=../x" "$D/net.json"
t_eq "code 100 (policy)" 100 "$(code)"
t_contains "naming it" "$(jq -r .msg <<<"$T_OUT")" '`../x`'
t_rc "ADD, a policy name with no file: exit 1" 1 cni ADD "$ID1" "$NS1" "IgnoreUnknown=1;SLUICE_POLICY=nosuch" "$D/net.json"
t_eq "code 100 (policy)" 100 "$(code)"
t_contains "naming the file" "$(jq -r .msg <<<"$T_OUT")" "$D/policies/nosuch.yaml"
jq '.socket = "/run/nobody-listens.sock"' "$D/net.json" >"$D/bad.json"
t_rc "ADD, no broker on the socket: exit 1" 1 cni ADD "$ID1" "$NS1" "" "$D/bad.json"
t_eq "code 11 (try again later)" 11 "$(code)"
t_eq "after all of them, nothing of the sandbox" "" "$(leftovers "$ID1" "$NS1" "")"

# --- ADD, and the policy inside ---------------------------------------------------
t_ok "ADD" cni ADD "$ID1" "$NS1" "IgnoreUnknown=1;K8S_POD_NAME=c1" "$D/net.json"
RES1=$T_OUT
t_eq "the result's cniVersion" "1.0.0" "$(jq -r .cniVersion <<<"$RES1")"
ADDR1=$(jq -r '.ips[0].address' <<<"$RES1")
GW1=$(jq -r '.ips[0].gateway' <<<"$RES1")
CT_IF=$(jq -r '.interfaces[.ips[0].interface].name' <<<"$RES1")
t_eq "the address is on interface eth0, in the namespace" "eth0 $NS1" \
	"$CT_IF $(jq -r '.interfaces[.ips[0].interface].sandbox' <<<"$RES1")"
t_ok "eth0 inside" ip -n "$P-c1" -o -4 addr show dev eth0
t_contains "holds the result's address" "$T_OUT" "inet $ADDR1 "
t_contains "a /30" "$ADDR1" "/30"
t_eq "its MAC is the result's" "$(jq -r '.interfaces[1].mac' <<<"$RES1")" \
	"$(ip -n "$P-c1" -o link show dev eth0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')"
HOST_IF=$(jq -r '.interfaces[0].name' <<<"$RES1")
t_eq "the broker's end and its MAC" "$(jq -r '.interfaces[0].mac' <<<"$RES1")" \
	"$(brk_exec ip -o link show dev "$HOST_IF" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')"
t_ok "the default route" ip -n "$P-c1" route show default
t_contains "via the gateway" "$T_OUT" "default via $GW1 dev eth0"
t_eq "the gateway is the resolver" "$GW1" "$(jq -r '.dns.nameservers[0]' <<<"$RES1")"
t_ok "registered with the broker" sl list
t_contains "as cni- and 24 characters of the id, with the config's policy" "$T_OUT" "$SB1"
t_contains "the policy" "$(grep -F "$SB1" <<<"$T_OUT")" "$D/policies/default.yaml"
printf 'nameserver %s\n' "$(jq -r '.dns.nameservers[0]' <<<"$RES1")" >"$D/c1-resolv.conf"

world_clear_logs
canary=cni-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n').world.test
t_ok "inside: the allowed host" in_ct "$NS1" "$D/c1-resolv.conf" curl -sf -m 10 http://echo.world.test/cni/allowed
t_contains "reached the echo server" "$T_OUT" '"path": "/cni/allowed"'
t_rc "inside: another name does not resolve" 6 in_ct "$NS1" "$D/c1-resolv.conf" curl -s -m 10 http://other.world.test/
t_ok "inside: asked of the gateway" in_ct "$NS1" "$D/c1-resolv.conf" python3 tests/world/dnsq.py --server "$GW1" other.world.test A
t_contains "NXDOMAIN" "$T_OUT" "NXDOMAIN"
t_ok "inside: DNS to the world's resolver meets the filter" in_ct "$NS1" "$D/c1-resolv.conf" \
	python3 tests/world/dnsq.py --server 11.0.1.53 "$canary" A
t_contains "NXDOMAIN" "$T_OUT" "NXDOMAIN"
t_ok "inside: through the proxy, another host" in_ct "$NS1" "$D/c1-resolv.conf" \
	curl -s -m 10 -o /dev/null -D - -x "http://$GW1:3128" http://other.world.test/
t_eq "403 not-allowlisted" "403 not-allowlisted" "$(t_status_reason <<<"$T_OUT")"
t_ok "inside: the metadata address" in_ct "$NS1" "$D/c1-resolv.conf" \
	curl -s -m 10 -o /dev/null -D - http://169.254.169.254/latest/
t_eq "403 address-literal" "403 address-literal" "$(t_status_reason <<<"$T_OUT")"
t_eq "the resolver never saw the canary" "" "$(grep -F "$canary" "$D/dnsmasq.log")"
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_ok "sluice env works on it" sl env "$SB1"
t_contains "the CA bundle is the sandbox's" "$T_OUT" "SSL_CERT_FILE=/run/sluice-sandboxes/$SB1/ca-bundle.crt"

t_rc "ADD of the same container again: refused" 1 cni ADD "$ID1" "$NS1" "" "$D/net.json"
t_ok "and the first is untouched" in_ct "$NS1" "$D/c1-resolv.conf" curl -sf -m 10 http://echo.world.test/cni/again

# --- CHECK --------------------------------------------------------------------------
with_prev "$D/net.json" "$RES1" "$D/prev1.json"
t_ok "CHECK" cni CHECK "$ID1" "$NS1" "" "$D/prev1.json"
t_eq "says nothing" "" "$T_OUT"
jq '.prevResult.ips[0].address = "10.255.255.254/30"' "$D/prev1.json" >"$D/bad.json"
t_rc "CHECK, prevResult with another address: exit 1" 1 cni CHECK "$ID1" "$NS1" "" "$D/bad.json"
t_eq "code 102 (check)" 102 "$(code)"

# --- DEL ----------------------------------------------------------------------------
t_ok "DEL" cni DEL "$ID1" "$NS1" "" "$D/prev1.json"
t_eq "says nothing" "" "$T_OUT"
t_eq "nothing is left" "" "$(leftovers "$ID1" "$NS1" "${ADDR1%/*}")"
t_ok "the runtime's namespace is still there" test -e "$NS1"
t_ok "DEL again" cni DEL "$ID1" "$NS1" "" "$D/prev1.json"
t_ok "DEL with no CNI_NETNS and no prevResult" cni DEL "$ID1" "" "" "$D/net.json"
t_rc "CHECK of a deleted sandbox: exit 1" 1 cni CHECK "$ID1" "$NS1" "" "$D/prev1.json"
t_eq "code 102 (check)" 102 "$(code)"

# --- CHECK that fails on broken wiring; a namespace that vanished ---------------------
ID2=$(new_id)
IDS+=("$ID2")
t_ok "a runtime's namespace, c2" _world_ns_add "$P-c2"
NS2=/run/netns/$P-c2
t_ok "ADD (a second container)" cni ADD "$ID2" "$NS2" "" "$D/net.json"
RES2=$T_OUT
ADDR2=$(jq -r '.ips[0].address' <<<"$RES2")
with_prev "$D/net.json" "$RES2" "$D/prev2.json"
t_ok "CHECK" cni CHECK "$ID2" "$NS2" "" "$D/prev2.json"
ip -n "$P-c2" addr del "$ADDR2" dev eth0
t_rc "CHECK, the address gone from eth0: exit 1" 1 cni CHECK "$ID2" "$NS2" "" "$D/prev2.json"
t_eq "code 102 (check)" 102 "$(code)"
t_contains "saying so" "$(jq -r .msg <<<"$T_OUT")" "does not hold the sandbox's address"
ip -n "$P-c2" addr add "$ADDR2" dev eth0
t_ok "CHECK, the address back" cni CHECK "$ID2" "$NS2" "" "$D/prev2.json"
HOST2=$(jq -r '.interfaces[0].name' <<<"$RES2")
ELEM2="{ \"$HOST2\" . ${ADDR2%/*} }"
t_ok "the firewall's element, taken away" brk_exec nft delete element inet sluice sandbox_src "$ELEM2"
t_rc "CHECK, no element: exit 1" 1 cni CHECK "$ID2" "$NS2" "" "$D/prev2.json"
t_eq "code 102 (check)" 102 "$(code)"
t_contains "saying so" "$(jq -r .msg <<<"$T_OUT")" "no element"
t_ok "the element back" brk_exec nft add element inet sluice sandbox_src "$ELEM2"
t_ok "CHECK" cni CHECK "$ID2" "$NS2" "" "$D/prev2.json"
t_ok "the registration, taken away" sl unregister "cni-${ID2:0:24}"
t_rc "CHECK, not registered: exit 1" 1 cni CHECK "$ID2" "$NS2" "" "$D/prev2.json"
t_eq "code 102 (check)" 102 "$(code)"
t_contains "saying so" "$(jq -r .msg <<<"$T_OUT")" "not registered"
t_ok "the registration back" sl register "cni-${ID2:0:24}" --addr "${ADDR2%/*}" --policy "$D/policies/default.yaml"
t_ok "CHECK" cni CHECK "$ID2" "$NS2" "" "$D/prev2.json"
# The runtime removes its namespace before DEL (a crash, a reboot's leftovers).
ip netns del "$P-c2"
t_ok "DEL after the namespace vanished" cni DEL "$ID2" "$NS2" "" "$D/prev2.json"
t_eq "nothing is left" "" "$(leftovers "$ID2" "" "${ADDR2%/*}")"
t_ok "DEL again" cni DEL "$ID2" "$NS2" "" "$D/prev2.json"

# --- "audit": true, as `sluice create --audit` ------------------------------------------
ID6=$(new_id)
IDS+=("$ID6")
SB6=cni-${ID6:0:24}
t_ok "a runtime's namespace, c6" _world_ns_add "$P-c6"
NS6=/run/netns/$P-c6
jq '.audit = "yes"' "$D/net.json" >"$D/bad.json"
t_rc "ADD, audit not a boolean: exit 1" 1 cni ADD "$ID6" "$NS6" "" "$D/bad.json"
t_eq "code 7 (invalid config)" 7 "$(code)"
t_contains "naming the key" "$(jq -r .msg <<<"$T_OUT")" '`audit` must be true or false'
t_eq "and nothing of the sandbox" "" "$(leftovers "$ID6" "$NS6" "")"
jq '.audit = true' "$D/net.json" >"$D/net-audit.json"
t_ok "ADD, \"audit\": true" cni ADD "$ID6" "$NS6" "" "$D/net-audit.json"
RES6=$T_OUT
GW6=$(jq -r '.ips[0].gateway' <<<"$RES6")
t_contains "list: in audit mode" "$(sl list | awk -v n="$SB6" '$1 == n')" " audit "
t_contains "status counts it" "$(sl status)" "sandboxes_audit 1"
t_ok "an unlisted host through the proxy" ip netns exec "$P-c6" curl -s -m 10 -o /dev/null -D - \
	-x "http://$GW6:3128" http://other.world.test/cni-audit
t_eq "reached (200)" "200 " "$(t_status_reason <<<"$T_OUT")"
t_ok "audited would-deny not-allowlisted" bash -c "grep -F '\"sandbox\":\"$SB6\"' '$BROKER_AUDIT' |
	grep -F '/cni-audit' | grep -qF '\"decision\":\"would-deny\",\"reason\":\"not-allowlisted\"'"
t_ok "the metadata address" ip netns exec "$P-c6" curl -s -m 10 -o /dev/null -D - http://169.254.169.254/latest/
t_eq "still 403 address-literal" "403 address-literal" "$(t_status_reason <<<"$T_OUT")"
with_prev "$D/net-audit.json" "$RES6" "$D/prev6.json"
t_ok "DEL" cni DEL "$ID6" "$NS6" "" "$D/prev6.json"
t_eq "nothing is left" "" "$(leftovers "$ID6" "$NS6" "$(jq -r '.ips[0].address' <<<"$RES6" | cut -d/ -f1)")"
ip netns del "$P-c6"

# --- chained after another plugin: refused ---------------------------------------------
# What a primary plugin leaves: an interface with the default route. sluice
# as a second plugin would be a spare link beside it; ADD refuses.
ID5=$(new_id)
IDS+=("$ID5")
t_ok "a runtime's namespace, c5" _world_ns_add "$P-c5"
NS5=/run/netns/$P-c5
t_ok "another plugin's interface and default route in it" sh -c "ip -n $P-c5 link add p0 type veth peer name p1 &&
	ip -n $P-c5 link set p0 up && ip -n $P-c5 addr add 192.0.2.1/24 dev p0 && ip -n $P-c5 route add default via 192.0.2.254"
t_rc "ADD into a namespace with a default route: exit 1" 1 cni ADD "$ID5" "$NS5" "" "$D/net.json"
t_eq "code 101 (wiring)" 101 "$(code)"
t_contains "saying why" "$(jq -r .msg <<<"$T_OUT")" "has another way out: p1 (veth), p0 (veth)"
t_contains "the namespace's own route is untouched" "$(ip -n "$P-c5" route show default)" "via 192.0.2.254 dev p0"
t_eq "nothing of the sandbox is left" "" "$(leftovers "$ID5" "" "")"
t_ok "DEL of what ADD refused" cni DEL "$ID5" "$NS5" "" "$D/net.json"

# --- the policy's sources, in order ---------------------------------------------------
ID3=$(new_id)
IDS+=("$ID3")
SB3=cni-${ID3:0:24}
t_ok "a runtime's namespace, c3" _world_ns_add "$P-c3"
NS3=/run/netns/$P-c3
jq '. + {runtimeConfig: {"io.kubernetes.cri.pod-annotations": {"sluice.io/policy": "web"}}}' \
	"$D/net.json" >"$D/ann.json"
# As containerd's CRI calls it: the pod's names in CNI_ARGS.
POD_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=$P;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=$ID3"
PODDIR=/run/sluice-pods/$P/web-0
t_ok "ADD, pod annotation web, CNI_ARGS default" cni ADD "$ID3" "$NS3" \
	"$POD_ARGS;SLUICE_POLICY=default" "$D/ann.json"
RES3=$T_OUT
GW3=$(jq -r '.ips[0].gateway' <<<"$RES3")
t_contains "the annotation wins" "$(sl list | grep -F "$SB3")" "$D/policies/web.yaml"
printf 'nameserver %s\n' "$(jq -r '.dns.nameservers[0]' <<<"$RES3")" >"$D/c3-resolv.conf"
t_ok "inside: web's host" in_ct "$NS3" "$D/c3-resolv.conf" curl -sf -m 10 http://other.world.test/cni/web
t_rc "inside: default's host is not web's" 6 in_ct "$NS3" "$D/c3-resolv.conf" curl -s -m 10 http://echo.world.test/

# The pod's files, where deploy/kubernetes/sandbox-pod.yaml mounts them from.
t_ok "the pod's CA bundle is the sandbox's" cmp "$PODDIR/ca-bundle.crt" "/run/sluice-sandboxes/$SB3/ca-bundle.crt"
t_ok "the pod's environment" cat "$PODDIR/env"
t_contains "names the bundle where the pod mounts it" "$T_OUT" "SSL_CERT_FILE=/etc/sluice-sandbox/ca-bundle.crt"
t_contains "the proxy on its gateway" "$T_OUT" "HTTPS_PROXY=http://$GW3:3128"
t_eq "whose they are" "$SB3" "$(cat "$PODDIR/sandbox")"
t_ok "inside, mounted as the pod mounts it: HTTPS through the proxy, trusted by the bundle" \
	in_pod "$NS3" "$D/c3-resolv.conf" "$PODDIR" \
	sh -c 'set -a; . /etc/sluice-sandbox/env; set +a; curl -sf -m 10 -o /dev/null -w "%{http_code}" https://other.world.test/api/cni-pod'
t_eq "200" "200" "$T_OUT"
t_contains "the credential was injected" "$(origin /api/cni-pod | tail -n 1)" "\"Authorization\", \"Bearer $SECRET\""
t_contains "the placeholder is in the pod's environment" "$(cat "$PODDIR/env")" "WEB_TOKEN=sluice-ph-"
t_not_contains "the secret is not in the pod's files" "$(cat "$PODDIR"/*)" "$SECRET"
# The pod made again under its name (a StatefulSet's) before the old DEL.
ID4=$(new_id)
IDS+=("$ID4")
SB4=cni-${ID4:0:24}
t_ok "a runtime's namespace, c4" _world_ns_add "$P-c4"
NS4=/run/netns/$P-c4
t_ok "ADD, the same pod again" cni ADD "$ID4" "$NS4" "$POD_ARGS" "$D/net.json"
t_eq "its files are the new sandbox's" "$SB4" "$(cat "$PODDIR/sandbox")"
t_ok "DEL of the old one, without the pod's names" cni DEL "$ID3" "$NS3" "" "$D/ann.json"
t_eq "leaves the new one's files" "$SB4" "$(cat "$PODDIR/sandbox" 2>&1)"
t_ok "DEL of the new one" cni DEL "$ID4" "$NS4" "$POD_ARGS" "$D/net.json"
t_ok "takes its files" test ! -e "$PODDIR"
t_ok "and its namespace's directory" test ! -e "/run/sluice-pods/$P"
t_ok "and its mark" test ! -e "/run/sluice-pods/.sandboxes/$SB4"
t_rc "ADD, a pod name that is not one: exit 1" 1 cni ADD "$ID4" "$NS4" "K8S_POD_NAMESPACE=$P;K8S_POD_NAME=../x" "$D/net.json"
t_eq "code 4 (environment)" 4 "$(code)"
t_eq "nothing is left" "" "$(leftovers "$ID4" "$NS4" "")"
t_ok "ADD, CNI_ARGS web over the config's default" cni ADD "$ID3" "$NS3" "SLUICE_POLICY=web" "$D/net.json"
t_contains "CNI_ARGS wins" "$(sl list | grep -F "$SB3")" "$D/policies/web.yaml"
t_ok "DEL" cni DEL "$ID3" "$NS3" "" "$D/net.json"
jq '.runtimeConfig."io.kubernetes.cri.pod-annotations"."sluice.io/policy" = "../default"' \
	"$D/ann.json" >"$D/bad.json"
t_rc "ADD, annotation ../default: exit 1" 1 cni ADD "$ID3" "$NS3" "" "$D/bad.json"
t_eq "code 100 (policy)" 100 "$(code)"
t_eq "nothing is left" "" "$(leftovers "$ID3" "$NS3" "$(jq -r '.ips[0].address' <<<"$RES3" | cut -d/ -f1)")"

# --- (2) the Kubernetes manifests ----------------------------------------------------
t_ok "the manifests parse, and their conflist is this test's" python3 tests/integration/k8s_manifests.py \
	deploy/kubernetes "$CONFLIST"
t_contains "every object named" "$T_OUT" "DaemonSet sluice-system/sluice-node"

# --- (3) podman with the CNI backend ---------------------------------------------------
# Podman's own configuration, storage and CNI directories under $D: nothing
# lands in /var/lib/containers, /etc/containers or /etc/cni (libcni's result
# cache, /var/lib/cni, is cleaned below). Its CNI network is the same
# conflist, with the test world's paths and name; its
# plugin directory holds sluice-cni alone. Root here lacks CAP_SYS_RESOURCE
# (explicit ulimits), and crun (podman's runtime) refuses a hybrid cgroup
# layout: podman runs in a mount namespace of its own without
# /sys/fs/cgroup/unified, as test_runtimes.sh runs crun, with
# --cgroups=disabled. Each container is an exploded root of the host's
# binaries (/usr read-only, the merged-/usr links), the test world's tools
# and bin/ at their own paths.
PMD=$D/podman
ROOTFS=$D/rootfs
WT=$PWD/tests/world
CG_HYBRID=0
if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] &&
	[ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then
	CG_HYBRID=1
fi
# The mount namespace keeps the host's propagation (unchanged, not slave
# or private): the network namespace podman names under /run/netns, and
# sluice's name for it, must reach the host and the next podman command
# (which joins the container's network by that path, and runs DEL with
# it). Only the cgroup mount is made private there before it goes.
PM_PRE=(unshare --mount --propagation unchanged sh -c '[ "$0" = 0 ] ||
	{ mount --make-rprivate /sys/fs/cgroup && umount -l /sys/fs/cgroup/unified; } && exec "$@"' "$CG_HYBRID")
pm() {
	CONTAINERS_CONF=$PMD/containers.conf CONTAINERS_STORAGE_CONF=$PMD/storage.conf \
		"${PM_PRE[@]}" podman --root "$PMD/graph" --runroot "$PMD/run" "$@"
}
# libcni caches each result in /var/lib/cni/results/NETWORK-ID-IF, with no
# setting to move it: the network is named after this world, its files are
# removed with it, and /var/lib/cni too if this test made it.
PM_NET=sluice-$P
[ -e /var/lib/cni ] && CNI_CACHE_WAS=1 || CNI_CACHE_WAS=0
podman_cleanup() {
	[ -d "$PMD/graph" ] && timeout 60 pm rm -af >/dev/null 2>&1
	rm -f /var/lib/cni/results/"$PM_NET"-*
	[ "$CNI_CACHE_WAS" = 1 ] || rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null
	return 0
}
PM_RUN=(--cgroups=disabled --ulimit nofile=20000:20000 --ulimit nproc=32768:32768
	--network "$PM_NET" -v /usr:/usr:ro -v "$WT:$WT:ro" -v "$BIN:$BIN:ro" --rootfs "$ROOTFS")

if ! command -v podman >/dev/null; then
	t_skip "podman with the CNI backend" "podman is not installed (scripts/deps.sh installs it)"
else
	mkdir -p "$PMD/net" "$PMD/cni-bin" "$ROOTFS"/etc "$ROOTFS"/proc "$ROOTFS"/sys "$ROOTFS"/dev \
		"$ROOTFS"/tmp "$ROOTFS"/run "$ROOTFS"/usr
	for d in bin sbin lib lib32 lib64; do
		[ -L "/$d" ] && ln -sfn "$(readlink "/$d")" "$ROOTFS/$d"
	done
	touch "$ROOTFS/etc/resolv.conf"
	ln -s "$CNI" "$PMD/cni-bin/sluice-cni"
	printf '[storage]\ndriver = "vfs"\nrunroot = "%s/run"\ngraphroot = "%s/graph"\n' "$PMD" "$PMD" >"$PMD/storage.conf"
	# conmon_env_vars: the container's cleanup (conmon runs `podman
	# container cleanup` when it exits, which runs DEL) reads this file
	# too; podman passes conmon no other environment.
	printf '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "none"\ntmp_dir = "%s/tmp"\nvolume_path = "%s/volumes"\nstatic_dir = "%s/libpod"\nconmon_env_vars = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CONTAINERS_CONF=%s/containers.conf", "CONTAINERS_STORAGE_CONF=%s/storage.conf"]\n[network]\nnetwork_backend = "cni"\ncni_plugin_dirs = ["%s/cni-bin"]\nnetwork_config_dir = "%s/net"\n' \
		"$PMD" "$PMD" "$PMD" "$PMD" "$PMD" "$PMD" "$PMD" >"$PMD/containers.conf"
	t_ok "podman: the conflist, with the test world's paths" bash -c \
		'jq --arg s "$1" --arg b "/run/netns/$2" --arg d "$3" --arg n "$6" \
			".name = \$n | .plugins[0] |= (.socket = \$s | .brokerNetns = \$b | .policyDir = \$d)" \
			"$4" >"$5"' conf "$BROKER_SOCK" "$WORLD_BRK" "$D/policies" "$CONFLIST" "$PMD/net/sluice.conflist" "$PM_NET"
	t_ok "podman: sees the network" pm network ls --format '{{.Name}} {{.Driver}}'
	t_contains "podman: $PM_NET, by sluice-cni" "$T_OUT" "$PM_NET sluice-cni"
	t_ok "podman run -d, network sluice" pm run -d "${PM_RUN[@]}" sleep 300
	CID=$(tail -n 1 <<<"$T_OUT")
	PSB=cni-${CID:0:24}
	t_ok "podman: the namespace it made" pm inspect --format '{{.NetworkSettings.SandboxKey}}' "$CID"
	PNS=$T_OUT
	t_contains "podman: under /run/netns" "$PNS" "/run/netns/netns-"
	t_contains "podman: its sandbox is registered" "$(sl list)" "$PSB"
	pmx() { pm exec "$CID" "$@"; }
	t_ok "podman: the default route" pmx ip route show default
	PGW=$(awk '$1 == "default" { print $3; exit }' <<<"$T_OUT")
	t_ok "podman: resolv.conf" pmx cat /etc/resolv.conf
	t_eq "podman: the result's nameserver, the gateway, comes first" "nameserver $PGW" \
		"$(grep -m1 '^nameserver' <<<"$T_OUT")"
	t_ok "podman: one interface besides lo" pmx ls /sys/class/net
	t_eq "podman: eth0" "eth0 lo" "$(xargs <<<"$T_OUT")"
	world_clear_logs
	canary=pm-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n').world.test
	t_ok "podman: the allowed host" pmx curl -sf -m 10 http://echo.world.test/cni/podman
	t_contains "podman: reached the echo server" "$T_OUT" '"path": "/cni/podman"'
	t_rc "podman: another name does not resolve" 6 pmx curl -s -m 10 http://other.world.test/
	t_ok "podman: DNS to the world's resolver" pmx python3 "$WT/dnsq.py" --server 11.0.1.53 "$canary" A
	t_contains "podman: meets the filter: NXDOMAIN" "$T_OUT" "NXDOMAIN"
	t_ok "podman: the metadata address" pmx curl -s -m 10 -o /dev/null -D - http://169.254.169.254/latest/
	t_eq "podman: 403 address-literal" "403 address-literal" "$(t_status_reason <<<"$T_OUT")"
	t_rc "podman: the probe passes" 0 pmx "$BIN/sluice-probe" --timeout 3 \
		--expect-allow echo.world.test:80 --expect-deny other.world.test:80 \
		--canary canary.world.test --resolver 11.0.1.53 --public-addr 11.0.2.10 \
		--private-addr 10.0.0.5 --metadata-addr 169.254.169.254 --udp-addr 11.0.3.1 \
		--udp-port 9999 --dns-name other.world.test \
		--skip caps-init-userns,control-socket,host-processes,netns-etc,netns-run,secret-files,vsock
	t_eq "podman: the resolver never saw the canary" "" "$(grep -F "$canary" "$D/dnsmasq.log")"
	t_eq "podman: no decoy was hit" "" "$(world_decoy_hits)"
	PADDR=$(sl list | awk -v n="$PSB" '$1 == n { print $2 }')
	t_ok "podman rm -f (DEL)" pm rm -f "$CID"
	t_eq "podman: no container left" "" "$(pm ps -aq 2>&1)"
	t_eq "podman: nothing of the sandbox is left" "" "$(leftovers "$CID" "" "$PADDR")"
	t_ok "podman: its namespace is gone" test ! -e "$PNS"
	t_ok "podman run --rm: ADD and DEL around one command" pm run --rm "${PM_RUN[@]}" curl -sf -m 10 http://echo.world.test/cni/podman-rm
	t_contains "podman run --rm: reached the echo server" "$T_OUT" '"path": "/cni/podman-rm"'
	t_eq "podman run --rm: no sandbox left" "" "$(sl list | awk '$1 ~ /^cni-/')"
	t_eq "podman: no CNI sandbox's files, no name in /run/netns" "" \
		"$(find /run/sluice-sandboxes /run/netns /etc/netns -maxdepth 1 -name 'cni-*' 2>/dev/null)"
	t_eq "podman: no cached result left" "" "$(find /var/lib/cni/results -name "$PM_NET-*" 2>/dev/null)"
fi

t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_done
