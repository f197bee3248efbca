#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One broker per state_dir, per control socket and per port set (issue 17,
# item 2). A second sluiced in the same network namespace is refused, with
# what to do, and leaves the first one as it was: with the same
# configuration (state_dir locked), with its own state_dir and control
# socket but the same ports (its SO_REUSEPORT listeners would have joined
# the first's and taken about half of the sandboxes' connections), and with
# the same control socket only. With ports, state_dir and socket of its own
# it starts. A configuration giving two listeners one port is refused at
# FILE:LINE:COL, by --check-config and by a reload. The lock goes with the
# broker: a restart on the same state_dir starts.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
T_TIMEOUT=15

broker_world lk1
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
EOF

# broker_start sets BROKER_PID: run in this shell, not under t_ok's subshell.
started() { if broker_start; then t_ok "$1" true; else t_fails "$1" true; fi; }
broker_config
started "the first broker starts"
FIRST_PID=$BROKER_PID
FIRST_ST=$_BROKER_ST
FIRST_SOCK=$BROKER_SOCK
FIRST_CONF=$BROKER_CONF
t_ok "a sandbox on it" S create "$S1" --policy "$D/pol.yaml"
sock_inode=$(stat -c %i "$FIRST_SOCK")

# second NAME: sluiced on $WORLD_DIR/sluiced-NAME.yaml in the broker's namespace.
second() { brk_exec "$BIN/sluiced" --config "$WORLD_DIR/sluiced-$1.yaml"; }
first_intact() {
	t_ok "  ... the first broker still runs" _world_alive "$FIRST_PID" "$FIRST_ST"
	t_eq "  ... its control socket is the same file" "$sock_inode" "$(stat -c %i "$FIRST_SOCK")"
	t_ok "  ... and answers" "$BIN/sluice" --socket "$FIRST_SOCK" status
}

# The same configuration: its state_dir is the first one's.
cp "$FIRST_CONF" "$WORLD_DIR/sluiced-same.yaml"
t_rc "a second sluiced with the same configuration: refused" 1 second same
t_contains "  ... another sluiced holds the state_dir, with its pid" "$T_ERR" \
	"another sluiced (pid $FIRST_PID) uses state_dir \`$WORLD_DIR/state\`"
first_intact

# Its own state_dir and control socket, the same ports.
broker_config -n ports
t_rc "a second sluiced on the same ports: refused" 1 second ports
t_contains "  ... saying which port" "$T_ERR" "proxy_port 3128 (TCP) is taken in this network namespace"
t_ok "  ... its control socket was never made" test ! -e "$WORLD_DIR/ctl-ports.sock"
first_intact
# Every connection of the sandbox is still the first broker's.
sl_first() { ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$FIRST_SOCK" "$@"; }
codes=$(for i in 1 2 3 4 5 6 7 8; do
	sl_first exec "$S1" -- curl -s -m 10 -o /dev/null -w '%{http_code}\n' "http://echo.world.test/lock-$i"
done | sort | uniq -c | xargs)
t_eq "  ... 8 requests of the sandbox: 8 answered 200" "8 200" "$codes"

# The same control socket, its own state_dir and ports.
broker_config -n sock "control_socket: $FIRST_SOCK" "proxy_port: 4128" "transparent_port: 4129" \
	"dns_port: 4153"
t_rc "a second sluiced on the same control socket: refused" 1 second sock
t_contains "  ... another sluiced answers on it" "$T_ERR" \
	"control socket \`$FIRST_SOCK\`: another sluiced answers on it"
first_intact

# Everything of its own: two brokers side by side are fine.
broker_config -n own "proxy_port: 4128" "transparent_port: 4129" "dns_port: 4153"
started "a second sluiced with ports, state_dir and socket of its own starts"
t_ok "  ... and answers" "$BIN/sluice" --socket "$BROKER_SOCK" status
broker_stop
first_intact

# Two listeners on one port.
printf 'proxy_port: 4000\ntransparent_port: 4000\n' >"$D/dup.yaml"
t_rc "--check-config: two listeners on one port are refused" 1 "$BIN/sluiced" --check-config \
	--config "$D/dup.yaml"
t_eq "  ... at FILE:LINE:COL" \
	"$D/dup.yaml:2:19: \`proxy_port\` and \`transparent_port\` are both 4000: each listener needs a port of its own" \
	"$T_ERR"
printf 'dns_port: 3128\n' >"$D/dup2.yaml"
t_rc "  ... dns_port on the default proxy_port too" 1 "$BIN/sluiced" --check-config --config "$D/dup2.yaml"
t_contains "  ... named" "$T_ERR" "\`proxy_port\` and \`dns_port\` are both 3128"
cp "$FIRST_CONF" "$D/first.yaml.bak"
echo "dns_port: 3129" >>"$FIRST_CONF"
t_rc "a reload with two listeners on one port: refused" 1 "$BIN/sluice" --socket "$FIRST_SOCK" reload
t_contains "  ... saying why" "$T_ERR" "\`transparent_port\` and \`dns_port\` are both 3129"
cp "$D/first.yaml.bak" "$FIRST_CONF"

# The lock goes with the broker.
BROKER_PID=$FIRST_PID
_BROKER_ST=$FIRST_ST
BROKER_SOCK=$FIRST_SOCK
BROKER_CONF=$FIRST_CONF
BROKER_LOG=$WORLD_DIR/sluiced.log
broker_stop
t_ok "the lock file stays, with the old pid" test -s "$WORLD_DIR/state/.sluiced.lock"
started "a broker restarted on the same state_dir starts"
t_ok "  ... and restored the sandbox" S exec "$S1" -- curl -s -m 10 -o /dev/null http://echo.world.test/lock-after

t_done
