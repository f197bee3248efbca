#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A sandbox made by `sluice create`, used by code that ignores proxy
# variables: names through the DNS filter, connections through the
# transparent path, SNI and Host checked against the name behind the address;
# and what happens when the broker dies and comes back. No decoy is hit.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

broker_world t1
SB=$S1

broker_config "connect_timeout: 2s"
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
      ports: [80, 443]
    - host: echo.world.test
      ports: [22]
      raw_tcp: true
    - host: rebind.world.test
EOF
broker_start
t_ok "sluice create" sl create "$SB" --policy "$D/pol.yaml"
# The contained runner sees only what is bound in: the test world's files
# (CA, scripts) and the repository, read-only.
X() { sl exec --bind "$D:$D:ro" --bind "$PWD:$PWD:ro" "$SB" -- "$@"; }
# Code that ignores proxy variables: env -u drops them.
NOPROXY="env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy"
DNSQ="/usr/bin/python3 $PWD/tests/world/dnsq.py"

t_ok "the filter answers an allowed name" X $NOPROXY getent ahostsv4 echo.world.test
synth=$(echo "$T_OUT" | awk 'NR==1{print $1}')
t_contains "with a synthetic address" "$synth" "198.1"
t_ok "the same address again" X $NOPROXY getent ahostsv4 echo.world.test
t_eq "stable for the sandbox's life" "$synth" "$(echo "$T_OUT" | awk 'NR==1{print $1}')"
t_fails "a name outside policy does not resolve" X $NOPROXY getent ahostsv4 other.world.test
t_ok "dnsmasq saw no query for the blocked name" test -z "$(grep -F 'other.world.test' "$D/dnsmasq.log")"
t_ok "nor for the allowed one (no upstream query at DNS time)" \
	test -z "$(grep -F 'query[A] echo.world.test' "$D/dnsmasq.log")"

t_ok "transparent HTTP without proxy variables" X $NOPROXY curl -sf -m 10 http://echo.world.test/t1
t_contains "reached the echo server" "$T_OUT" '"path": "/t1"'
t_ok "transparent HTTPS without proxy variables" X $NOPROXY curl -sf -m 10 --cacert "$WORLD_CA" https://echo.world.test/t2
t_contains "TLS reached the echo server" "$T_OUT" '"path": "/t2"'
t_ok "SSH-like TCP to an allowed name and port is tunnelled" \
	X $NOPROXY bash -c "exec 3<>/dev/tcp/echo.world.test/22; head -c 20 <&3"
t_contains "the banner came through" "$T_OUT" "SSH-2.0"
t_fails "bytes that are neither HTTP nor TLS to :80 (no raw_tcp) are reset" \
	X $NOPROXY bash -c "exec 3<>/dev/tcp/echo.world.test/80; printf '\\001\\002hi\\n' >&3; head -c 20 <&3 | grep -q ."
t_contains "audit says raw-tcp-not-allowed" "$(cat "$D/audit.log")" '"reason":"raw-tcp-not-allowed"'
t_ok "an allowed name on a port outside policy" X $NOPROXY curl -s -m 5 -o /dev/null -D - http://echo.world.test:8080/
t_contains "403 port-not-allowed" "$T_OUT" "X-Sluice-Reason: port-not-allowed"
t_ok "an address literal" X $NOPROXY curl -s -m 5 -o /dev/null -D - http://11.0.2.10/
t_contains "403 address-literal" "$T_OUT" "X-Sluice-Reason: address-literal"
t_ok "raw /dev/tcp to an address" X $NOPROXY bash -c 'exec 3<>/dev/tcp/11.0.2.10/80; printf "GET / HTTP/1.0\r\n\r\n" >&3; head -c 200 <&3'
t_contains "is refused by the broker, not answered by the host" "$T_OUT" "address-literal"
t_not_contains "no echo server answer" "$T_OUT" '"server"'
t_fails "TLS to an address literal is reset" X $NOPROXY curl -s -m 5 -k https://11.0.2.10/
t_fails "other TCP to an address literal is reset" X $NOPROXY bash -c 'exec 3<>/dev/tcp/11.0.2.10/22; head -c 20 <&3 | grep -q SSH'
t_ok "Host that is not the name behind the address" X $NOPROXY curl -s -m 10 -o /dev/null -D - \
	-H 'Host: other.world.test' http://echo.world.test/
t_contains "403 host-mismatch" "$T_OUT" "host-mismatch"
t_fails "SNI that is not the name behind the address" X $NOPROXY curl -s -m 10 --cacert "$WORLD_CA" \
	--resolve "other.world.test:443:$synth" https://other.world.test/
t_contains "audit says sni-mismatch" "$(cat "$D/audit.log")" '"reason":"sni-mismatch"'
t_ok "an allowed name resolving into a denied range" X $NOPROXY getent ahostsv4 rebind.world.test
t_fails "is refused at connect time" X $NOPROXY curl -sf -m 10 http://rebind.world.test/
t_contains "with address-denied" "$(cat "$D/audit.log")" '"reason":"address-denied"'
t_ok "direct DNS to an outside resolver (UDP) meets the filter" X $NOPROXY $DNSQ --server 11.0.1.53 other.world.test A
t_contains "NXDOMAIN" "$T_OUT" "NXDOMAIN"
t_ok "direct DNS to an outside resolver (TCP) meets the filter" X $NOPROXY $DNSQ --tcp --server 11.0.1.53 other.world.test A
t_contains "NXDOMAIN over TCP" "$T_OUT" "NXDOMAIN"
t_ok "still no query reached dnsmasq" test -z "$(grep -F 'other.world.test' "$D/dnsmasq.log")"
t_contains "DNS decisions are audited" "$(cat "$D/audit.log")" '"proto":"dns"'

# The broker dies: nothing gets out. It comes back: everything works again.
broker_stop
t_fails "broker down: nothing gets through" X $NOPROXY curl -s -m 5 -o /dev/null http://11.0.2.10/
t_fails "broker down: no name resolves" X $NOPROXY $DNSQ --timeout 2 --server 11.0.1.53 echo.world.test A
broker_start
t_ok "broker back: the sandbox works again" X $NOPROXY curl -sf -m 10 http://echo.world.test/t3
t_ok "with the same synthetic address" X $NOPROXY getent ahostsv4 echo.world.test

t_ok "sluice delete" sl delete "$SB"
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
broker_stop
t_done
