#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: alone (run.sh): the host's default paths, as README's layouts use them
# README's "Run your own", both layouts, inside a namespace that stands in
# for the host ($P-host: plain routed access to the test world's internet,
# as a server has to the real one). The root namespace is never touched:
# deploy/sluice-uplink runs under nsenter --net into $P-host only (a guard
# refuses to run it anywhere else).
#
#  1. The broker in its own namespace, reached through a veth uplink with
#     NAT on the host: deploy/sluice-uplink up (what sluice-netns.service
#     runs, with the namespace's name changed to $P-sbrk), sluiced in it,
#     `sluice create` and `exec` there. A sandbox reaches an origin beyond
#     the host, which sees the host's address (NAT). Then: the host's
#     nftables hold only `table ip sluice-uplink` (sluice's own table is
#     in the broker's namespace); without the NAT table the origin is not
#     reached; nothing new is forwarded into the broker's namespace (its
#     proxy port is not reachable from outside even with a route to it);
#     sluice-uplink down removes the namespace, the veth, the table and the
#     resolv.conf it wrote; the commands it ran are README's.
#  2. The broker in the host's own namespace: `table inet sluice` is then
#     in the host's nftables, and the sandbox reaches the origin directly.
# Also: sluice status names the broker's version, and sluiced's start-up
# line names it and the configuration file.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
STATE=/run/sluice-sandboxes
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

world_up || { echo "world did not come up"; echo "0 passed, 1 failed"; exit 1; }
P=$WORLD_PREFIX
D=$WORLD_DIR
HOST=$P-host
BNS=$P-sbrk
SB1=$P-dep1
SB2=$P-dep2
HOST_ADDR=11.0.50.2
WORLD_BRK_ORIG=$WORLD_BRK
B1PID=

cleanup() {
	local n
	for n in "$SB1" "$SB2"; do
		[ -e "/run/netns/$n" ] || [ -e "$STATE/$n" ] || continue
		if [ -n "$BROKER_PID" ]; then
			timeout 20 "$BIN/sluice" --broker-netns "$WORLD_BRK" --socket "$BROKER_SOCK" \
				delete "$n" >/dev/null 2>&1
		fi
		ip netns del "$n" 2>/dev/null
		rm -rf "/etc/netns/$n" "${STATE:?}/$n" "/var/lib/sluice/workspaces/$n"
	done
	broker_stop
	if [ -n "$B1PID" ]; then
		BROKER_PID=$B1PID
		_BROKER_ST=$B1ST
		broker_stop
	fi
	[ -e "/run/netns/$HOST" ] && uplink down >/dev/null 2>&1
	rm -rf "/etc/netns/$BNS"
	world_down
}
trap cleanup EXIT

# The "host": a namespace routed to the internet namespace, no broker.
world_add_routed host "$HOST_ADDR/24" 11.0.50.1 || { echo "0 passed, 1 failed"; exit 1; }
# world_down removes the broker namespace too, whatever happens below.
echo "$BNS" >>"$WORLD_DIR/netns"

# uplink ARGS...: deploy/sluice-uplink in the host namespace's network, and
# only there: its sysctl, links and nftables are that namespace's. (Not
# `ip netns exec`: the namespace it adds must be visible to all, and ip
# netns exec runs in a mount namespace of its own.)
uplink() {
	local here
	here=$(nsenter --net="/run/netns/$HOST" readlink /proc/self/ns/net) || return 1
	if [ "$here" = "$(readlink /proc/1/ns/net)" ] || [ "$here" = "$(readlink /proc/$$/ns/net)" ]; then
		echo "refusing: $HOST is not a namespace of its own" >&2
		return 1
	fi
	nsenter --net="/run/netns/$HOST" env SLUICE_NETNS="$BNS" SLUICE_RESOLVERS="$WORLD_RESOLVER" \
		sh deploy/sluice-uplink "$@"
}
in_host() { ip netns exec "$HOST" "$@"; }

cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
EOF

# --- 1. the broker in its own namespace, with a veth uplink and NAT ---------------
t_ok "sluice-uplink up (in the host namespace)" uplink up
uplink_log=$T_ERR
t_ok "  ... made the broker's namespace" test -e "/run/netns/$BNS"
t_eq "  ... the host's end of the veth" "10.199.0.1/30" \
	"$(in_host ip -br -4 addr show dev sluice-up | awk '{print $3}')"
t_eq "  ... the broker's end" "10.199.0.2/30" \
	"$(ip -n "$BNS" -br -4 addr show dev uplink | awk '{print $3}')"
t_eq "  ... the broker's default route" "default via 10.199.0.1 dev uplink" \
	"$(ip -n "$BNS" route show default | xargs)"
t_eq "  ... its resolv.conf" "nameserver $WORLD_RESOLVER" "$(cat "/etc/netns/$BNS/resolv.conf")"
t_eq "  ... forwarding on, in the host namespace" 1 "$(in_host sysctl -n net.ipv4.ip_forward)"
t_eq "  ... the host's nftables: sluice-uplink's table only" "table ip sluice-uplink" \
	"$(in_host nft list tables)"
t_rc "sluice-uplink up again: refused, the namespace exists" 1 uplink up
t_contains "  ... saying so" "$T_ERR" "exists already"
t_ok "  ... and the first one is intact" test -e "/run/netns/$BNS"

# The commands README gives are the ones it runs: README's block (marked
# <!-- sluice-uplink up -->), with this test's namespace name; its nft
# ruleset is the one the script loads.
block=$(awk '/^<!-- sluice-uplink up -->$/ { f = 1; next } f && /^```/ { if (n++) exit; next } f' README.md |
	sed "s/sluice-broker/$BNS/g")
readme_cmds=$(grep -E '^(ip|sysctl|mkdir) ' <<<"$block")
ran_cmds=$(sed -n 's/^+ //p' <<<"$uplink_log" | grep -E '^(ip|sysctl|mkdir) ')
t_ok "README lists sluice-uplink's commands" test -n "$readme_cmds"
t_eq "  ... exactly those it ran" "$readme_cmds" "$ran_cmds"
norm() { sed 's/#.*//; s/^[[:space:]]*//; s/[[:space:]]*$//' | grep -v '^$'; }
readme_nft=$(sed -n '/^nft -f - <</,/^EOF$/p' <<<"$block" | sed '1d;$d' | norm)
script_nft=$(sed -n '/^\tnft -f - <<-NFT$/,/^\tNFT$/p' deploy/sluice-uplink | sed '1d;$d' |
	sed 's/\$TABLE/sluice-uplink/; s/\$BROKER/10.199.0.2/; s/"\$DEV"/"sluice-up"/g' | norm)
t_ok "README gives the nft ruleset" test -n "$readme_nft"
t_eq "  ... the one it loads" "$script_nft" "$readme_nft"

# sluiced in it, as sluiced.service runs it (upstream_resolvers empty: the
# resolv.conf sluice-uplink wrote).
WORLD_BRK=$BNS
broker_config "upstream_resolvers: []" "connect_timeout: 2s"
t_ok "sluiced starts in the broker's namespace" broker_start
B1PID=$BROKER_PID
B1ST=$_BROKER_ST
version=$("$BIN/sluiced" --version)
t_contains "its start-up line names its version and its configuration" "$(cat "$BROKER_LOG")" \
	"$version: ready: config $BROKER_CONF"
t_run sl status
t_contains "sluice status names the broker's version" "$T_OUT" "version ${version#sluiced }"
t_ok "sluice create, in the broker's namespace" sl create "$SB1" --policy "$D/pol.yaml"
t_eq "sluice's table is in the broker's namespace" "table inet sluice" \
	"$(ip netns exec "$BNS" nft list tables | grep -x 'table inet sluice')"
t_eq "  ... and the host's nftables still hold only the uplink's" "table ip sluice-uplink" \
	"$(in_host nft list tables)"
t_run sl exec "$SB1" -- curl -s -m 20 -o /dev/null -w '%{http_code}' http://echo.world.test/deploy-nat
t_eq "the sandbox reaches an origin beyond the host" 200 "$T_OUT"
t_contains "  ... which sees the host's address (NAT)" "$(origin /deploy-nat)" "\"peer\": \"$HOST_ADDR:"

# Without the NAT table the origin cannot answer the broker's address.
in_host nft delete table ip sluice-uplink
t_run sl exec "$SB1" -- curl -s -m 20 -o /dev/null -w '%{http_code}' http://echo.world.test/deploy-nonat
t_ok "without NAT the sandbox gets no answer from the origin (HTTP $T_OUT)" test "$T_OUT" != 200
t_eq "  ... and the origin saw nothing" "" "$(origin /deploy-nonat)"

# Put the table back as README has it, then try to reach the
# broker's proxy port from the internet side, with a route to it.
nft_load() { in_host nft -f - <<<"$1"; }
t_ok "the uplink's table, back, as README gives it" nft_load "$readme_nft"
t_ok "  ... it is there" in_host nft list table ip sluice-uplink
# (The host itself reaches it: the port is open, only forwarding is refused.)
t_ok "the broker's proxy port answers the host" \
	in_host timeout 3 bash -c 'exec 3<>/dev/tcp/10.199.0.2/3128'
ip -n "$WORLD_INET" route add 10.199.0.0/30 via "$HOST_ADDR"
t_run ip netns exec "$WORLD_INET" timeout 3 bash -c 'exec 3<>/dev/tcp/10.199.0.2/3128'
t_ok "nothing new is forwarded into the broker's namespace: its proxy port, from outside (exit $T_RC)" \
	test "$T_RC" != 0
ip -n "$WORLD_INET" route del 10.199.0.0/30 via "$HOST_ADDR"
t_run sl exec "$SB1" -- curl -s -m 20 -o /dev/null -w '%{http_code}' http://echo.world.test/deploy-again
t_eq "with the table back the origin is reached again" 200 "$T_OUT"

t_ok "sluice delete" sl delete "$SB1"
broker_stop
B1PID=
t_ok "sluice-uplink down" uplink down
t_ok "  ... the broker's namespace is gone" test ! -e "/run/netns/$BNS"
t_eq "  ... so is the veth" "" "$(in_host ip -br link show dev sluice-up 2>/dev/null)"
t_eq "  ... and the host's nftables are empty again" "" "$(in_host nft list tables)"
t_ok "  ... and its resolv.conf" test ! -e "/etc/netns/$BNS/resolv.conf"
t_ok "sluice-uplink down again: nothing to do, no error" uplink down

# --- 2. the broker in the host's own namespace --------------------------------------
WORLD_BRK=$HOST
broker_config -n host "upstream_resolvers: []" "connect_timeout: 2s"
t_ok "sluiced starts in the host's namespace" broker_start
t_ok "sluice create there" sl create "$SB2" --policy "$D/pol.yaml"
t_eq "sluice's table is then in the host's own nftables" "table inet sluice" \
	"$(in_host nft list tables | grep -x 'table inet sluice')"
t_run sl exec "$SB2" -- curl -s -m 20 -o /dev/null -w '%{http_code}' http://echo.world.test/deploy-host
t_eq "the sandbox reaches the origin" 200 "$T_OUT"
t_contains "  ... from the host's address" "$(origin /deploy-host)" "\"peer\": \"$HOST_ADDR:"
t_ok "sluice delete" sl delete "$SB2"
broker_stop
WORLD_BRK=$WORLD_BRK_ORIG

t_done
