#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Who the control socket answers: never a caller inside a sandbox's network
# namespace (root included, as `ip netns exec SANDBOX` gives it); root, or a
# uid holding control_group, from outside. A refusal says why, exits
# non-zero and is audited (`control-refused`, with pid and uid); every
# request that changes something is audited with pid and uid. The sandbox a
# refused request named stays registered and working. An unknown
# control_group is a configuration error.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

broker_world c1 c2 c3
# A throwaway group, named after this world, removed on the way out.
GRP=${WORLD_PREFIX}ctl
ctl_down() {
	getent group "$GRP" >/dev/null && groupdel "$GRP"
	_broker_world_down
}
trap ctl_down EXIT
groupadd -r "$GRP" || { echo "0 passed, 1 failed"; exit 1; }
GID=$(getent group "$GRP" | cut -d: -f3)
U=65534 # nobody; never in $GRP

broker_config "control_group: $GRP"
printf 'ctl-secret-%s\n' "$WORLD_PREFIX" >"$D/secret"
chmod 600 "$D/secret"
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
credentials:
  - name: ctl-token
    source: { file: $D/secret }
    scope: { hosts: [echo.world.test] }
    placeholder: CTL_TOKEN
EOF
broker_start || { echo "0 passed, 1 failed"; exit 1; }
t_ok "sluice create" S create "$S1" --policy "$D/pol.yaml"
t_ok "the sandbox reaches what its policy allows" S exec "$S1" -- curl -sf -m 10 http://echo.world.test/ctl-before
# sluice exec runs the command inside the sandbox: what it asks of the
# broker (the placeholders) it must ask from outside, before it enters.
t_ok "sluice exec" S exec "$S1" -- sh -c 'echo "token=$CTL_TOKEN"'
t_contains "gives the command its placeholder" "$T_OUT" "token=sluice-ph-"
t_not_contains "and is not refused on the way" "$T_ERR" "refused"
sock_mode=$(stat -c '%a %G' "$BROKER_SOCK")
t_eq "with control_group, the socket is 0660 and of that group" "660 $GRP" "$sock_mode"

# audit_of PID REASON: the audit lines of that reason and caller pid.
audit_of() { grep -F "\"reason\":\"$2\"" "$BROKER_AUDIT" | grep -F "\"pid\":$1,"; }
# bg PID_VAR CMD...: CMD in the background (ip netns exec and setpriv exec,
# so that $! is the process that connects: no timeout(1) in between, a
# watchdog KILLs it after 20 s instead, and ends with it), its status in RC, its stderr in ERR.
bg() {
	local v=$1 p w
	shift
	"$@" >"$D/bg.out" 2>"$D/bg.err" &
	p=$!
	(for ((i = 0; i < 200; i++)); do
		kill -0 "$p" 2>/dev/null || exit 0
		sleep 0.1
	done
	kill -KILL "$p") >/dev/null 2>&1 &
	w=$!
	wait "$p"
	RC=$?
	wait "$w" 2>/dev/null
	printf -v "$v" '%s' "$p"
	ERR=$(cat "$D/bg.err")
}

# --- from inside the sandbox's namespace, as root -------------------------
# A control line's keys between "reason" and "pid", null (docs/audit.schema.json),
# and those between "name" and "decision".
NULLS_TO_PID='"mode":null,"rule":null,"credential":null,"method":null,"path":null,"status":null,"dns_type":null,"dns_answer":null,'
NULLS_TO_DECISION='"target":null,"src_addr":null,"src_port":null,"dst_addr":null,"dst_port":null,'
for req in status "unregister $S1" "register ${S1}x --addr 10.200.255.2 --policy $D/pol.yaml" reload; do
	# shellcheck disable=SC2086 # the request's words
	bg pid ip netns exec "$S1" "$BIN/sluice" --socket "$BROKER_SOCK" $req
	t_eq "in the sandbox as root, \`${req%% *}\` fails" "1" "$RC"
	t_contains "and says why" "$ERR" "refused: the caller is in the network namespace of sandbox \`$S1\`"
	line=$(audit_of "$pid" control-refused)
	t_contains "audited: deny, control-refused, from the sandbox, with pid $pid" "$line" \
		"\"sandbox\":\"$S1\",\"proto\":\"control\",\"name\":\"${req%% *}\",$NULLS_TO_DECISION\"decision\":\"deny\""
	t_contains "and the caller's uid" "$line" "\"pid\":$pid,\"uid\":0,"
done
t_ok "sluice list" S list
t_eq "the sandbox is still registered, and nothing else" "$S1" "$(echo "$T_OUT" | awk '{ print $1 }' | grep -F "$S1")"
t_ok "and still works" S exec "$S1" -- curl -sf -m 10 http://echo.world.test/ctl-after
t_ok "the policy in force is still its own" S exec "$S1" -- sh -c \
	'test "$(curl -s -m 10 -o /dev/null -w "%{http_code}" http://other.world.test/)" = 403'

# --- uids, from the broker's namespace -------------------------------------
bg pid ip netns exec "$WORLD_BRK" setpriv --reuid=$U --regid=$U --clear-groups \
	"$BIN/sluice" --socket "$BROKER_SOCK" status
t_eq "a uid outside control_group is refused" "1" "$RC"
t_contains "(the socket's mode keeps it off)" "$ERR" "Permission denied"
bg pid ip netns exec "$WORLD_BRK" setpriv --reuid=$U --regid="$GID" --clear-groups \
	"$BIN/sluice" --socket "$BROKER_SOCK" status
t_eq "a uid holding control_group as its group is answered" "0" "$RC"
bg pid ip netns exec "$WORLD_BRK" setpriv --reuid=$U --regid=$U --groups="$GID" \
	"$BIN/sluice" --socket "$BROKER_SOCK" reload
t_eq "as a supplementary group too (reload)" "0" "$RC"
t_contains "its reload is audited with its pid and uid" "$(audit_of "$pid" control-reload)" \
	"\"name\":\"reload\",$NULLS_TO_DECISION\"decision\":\"allow\",\"reason\":\"control-reload\",$NULLS_TO_PID\"pid\":$pid,\"uid\":$U,"
# Root from the broker's namespace: answered, and each mutating request
# audited with its pid and uid.
bg pid ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" status
t_eq "root from the broker's namespace is answered" "0" "$RC"
t_eq "a read-only request is not audited" "" "$(grep -F "\"pid\":$pid," "$BROKER_AUDIT")"
bg pid ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" create "$S2" --policy "$D/pol.yaml"
t_eq "root creates a sandbox" "0" "$RC"
# create registers from a child or from itself: the line names a pid and uid 0.
line=$(grep -F '"reason":"control-register"' "$BROKER_AUDIT" | grep -F "\"sandbox\":\"$S2\"")
t_contains "its register is audited, allow, with a pid and uid 0" "$line" \
	"\"decision\":\"allow\",\"reason\":\"control-register\",$NULLS_TO_PID\"pid\":"
t_contains "(uid 0)" "$line" '"uid":0,'
# The broker learns a new sandbox's namespace (it caches what it learnt).
bg pid ip netns exec "$S2" "$BIN/sluice" --socket "$BROKER_SOCK" list
t_eq "a sandbox created later is refused from its namespace too" "1" "$RC"
t_contains "naming it" "$ERR" "refused: the caller is in the network namespace of sandbox \`$S2\`"
bg pid ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" delete "$S2"
t_eq "root deletes it" "0" "$RC"
line=$(grep -F '"reason":"control-unregister"' "$BROKER_AUDIT" | grep -F "\"sandbox\":\"$S2\"")
t_contains "its unregister is audited, allow, with a pid and uid 0" "$line" \
	"\"decision\":\"allow\",\"reason\":\"control-unregister\",$NULLS_TO_PID\"pid\":"
bg pid ip netns exec "$S1" "$BIN/sluice" --socket "$BROKER_SOCK" status
t_contains "after that one is deleted, the first is still refused" "$ERR" \
	"refused: the caller is in the network namespace of sandbox \`$S1\`"
bg pid ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" reload
t_eq "root reloads" "0" "$RC"
t_contains "audited with its pid and uid" "$(audit_of "$pid" control-reload)" \
	"\"pid\":$pid,\"uid\":0,"
# From a namespace that is no sandbox's (this test's own): answered.
t_ok "root from a namespace that is no sandbox's is answered" "$BIN/sluice" --socket "$BROKER_SOCK" status

# --- from the namespace behind the broker's way out ------------------------
# The world's internet namespace is where the broker's default route leads,
# as the host's is in Layout 1 (`uplink`). It is no sandbox's: an address
# reached over that link is refused at register (root's and a member's), and
# neither a sandbox registered before it is wired, nor one that cut its own
# wire, makes the broker refuse its callers (it refuses them everywhere else,
# since that sandbox's namespace cannot be told from theirs).
UPLINK=$WORLD_PREFIX-bi
HOST_SIDE=11.0.0.1 # the internet namespace's end of it
from_host() { bg pid ip netns exec "$WORLD_INET" "$BIN/sluice" --socket "$BROKER_SOCK" "$@"; }
from_host status
t_eq "root from the namespace behind the broker's way out is answered" "0" "$RC"
bg pid ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" register "${S3}u" \
	--addr "$HOST_SIDE" --policy "$D/pol.yaml"
t_eq "root's register of that namespace's address ($HOST_SIDE) fails" "1" "$RC"
t_contains "saying why" "$ERR" \
	"refused: address $HOST_SIDE is reached over the link of the broker's default route (its way out), not over a wire of its own"
t_contains "audited: deny, control-refused, naming the sandbox" "$(audit_of "$pid" control-refused)" \
	"\"sandbox\":\"${S3}u\",\"proto\":\"control\",\"name\":\"register\","
bg pid ip netns exec "$WORLD_BRK" setpriv --reuid=$U --regid="$GID" --clear-groups \
	"$BIN/sluice" --socket "$BROKER_SOCK" register "${S3}v" --addr "$HOST_SIDE" --policy "$D/pol.yaml"
t_eq "a member's fails too" "1" "$RC"
t_contains "saying why" "$ERR" "refused: address $HOST_SIDE is reached over the link of the broker's default route"
t_ok "sluice list" S list
t_not_contains "neither is registered" "$T_OUT" "${S3}u"
t_not_contains "(the member's)" "$T_OUT" "${S3}v"
from_host status
t_eq "and callers there are still answered" "0" "$RC"
t_ok "root registers an address with no wire yet" S register "${S3}w" --addr 10.200.255.9 --policy "$D/pol.yaml"
from_host list
t_eq "callers behind the way out are still answered" "0" "$RC"
# A route that later takes its address over that link does not make the
# namespace behind it this sandbox's.
t_ok "a route takes 10.200.255.9 over the way-out link" ip -n "$WORLD_BRK" route add 10.200.255.9/32 dev "$UPLINK"
from_host list
t_eq "callers behind the way out are still answered then" "0" "$RC"
t_contains "with the list" "$(cat "$D/bg.out")" "${S3}w"
ip -n "$WORLD_BRK" route del 10.200.255.9/32 dev "$UPLINK"
t_ok "root unregisters it" S unregister "${S3}w"
# Root in a sandbox can delete its own wire (eth0: the veth goes with it).
t_ok "sluice create" S create "$S3" --policy "$D/pol.yaml"
t_ok "code in the sandbox deletes its own wire" ip netns exec "$S3" ip link del eth0
bg pid ip netns exec "$S3" "$BIN/sluice" --socket "$BROKER_SOCK" status
t_eq "a caller in that sandbox is still refused" "1" "$RC"
t_contains "(its namespace cannot be told from an unknown sandbox's)" "$ERR" "refused: "
from_host status
t_eq "callers behind the way out are still answered" "0" "$RC"
bg pid ip netns exec "$S1" "$BIN/sluice" --socket "$BROKER_SOCK" status
t_contains "callers in another sandbox are still refused" "$ERR" \
	"refused: the caller is in the network namespace of sandbox \`$S1\`"
t_ok "root deletes the cut-off sandbox" S delete "$S3"
from_host list
t_eq "once it is gone, callers behind the way out are answered" "0" "$RC"
# IPv6: the namespace is learnt from an IPv6 wire too, and the way out's
# IPv6 address is refused as its IPv4 one is. Each refusal is counted in
# the metrics (the audit log folds repeats of a kind into a later line).
refused_metric() {
	sl status --metrics | awk '$1 == "sluice_decisions_total{proto=\"control\",decision=\"deny\",reason=\"control-refused\"}" { v = $2 }
		END { print (v == "" ? "none" : v) }'
}
m0=$(refused_metric)
bg pid ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" register "${S3}u" \
	--addr fd11:1::1 --policy "$D/pol.yaml"
t_contains "root's register of the way out's IPv6 address (fd11:1::1) is refused" "$ERR" \
	"refused: address fd11:1::1 is reached over the link of the broker's default route"
t_eq "the refusal is counted (sluice_decisions_total of control-refused, $m0 before)" \
	"$((m0 + 1))" "$(refused_metric)"
t_ok "a namespace wired by IPv6 only" world_add_client v6w fd12:5::2/64 fd12:5::1
t_ok "registered by root" S register "${S3}6" --addr fd12:5::2 --policy "$D/pol.yaml"
bg pid ip netns exec "$WORLD_PREFIX-v6w" "$BIN/sluice" --socket "$BROKER_SOCK" status
t_contains "a caller in it is refused, the sandbox named (learnt from its IPv6 wire)" "$ERR" \
	"refused: the caller is in the network namespace of sandbox \`${S3}6\`"
from_host status
t_eq "callers behind the way out are answered" "0" "$RC"
t_eq "two refusals, two more counted" "$((m0 + 2))" "$(refused_metric)"
t_ok "root unregisters it" S unregister "${S3}6"
# Without an IPv4 default route, the way out is the IPv6 one's link.
t_ok "root registers an address with no wire yet" S register "${S3}w" --addr 10.200.255.9 --policy "$D/pol.yaml"
t_ok "the broker's IPv4 default route is taken away" ip -n "$WORLD_BRK" route del default via 11.0.0.1
from_host status
t_eq "callers behind the IPv6 way out are answered" "0" "$RC"
t_ok "the IPv4 default route is back" ip -n "$WORLD_BRK" route add default via 11.0.0.1
t_ok "root unregisters it" S unregister "${S3}w"
# Dual stack, the two default routes by links of their own: the namespace
# behind the IPv6 one is no sandbox's either, while the IPv4 one's stays so.
t_ok "a second namespace, wired to the broker" world_add_client v6o fd13:7::2/64 fd13:7::1
t_ok "the broker's IPv6 default route goes there" ip -n "$WORLD_BRK" -6 route replace default via fd13:7::2
bg pid ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" register "${S3}x" \
	--addr fd13:7::2 --policy "$D/pol.yaml"
t_eq "root's register of its address (fd13:7::2) fails" "1" "$RC"
t_contains "saying why" "$ERR" \
	"refused: address fd13:7::2 is reached over the link of the broker's default route"
bg pid ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" register "${S3}y" \
	--addr "$HOST_SIDE" --policy "$D/pol.yaml"
t_contains "so does a register of the IPv4 way out's ($HOST_SIDE)" "$ERR" \
	"refused: address $HOST_SIDE is reached over the link of the broker's default route"
t_ok "root registers an address with no wire yet" S register "${S3}w" --addr 10.200.255.9 --policy "$D/pol.yaml"
bg pid ip netns exec "$WORLD_PREFIX-v6o" "$BIN/sluice" --socket "$BROKER_SOCK" status
t_eq "callers behind the IPv6 way out are answered" "0" "$RC"
from_host status
t_eq "and so are those behind the IPv4 one" "0" "$RC"
t_ok "sluice list" S list
t_not_contains "neither refused register took" "$T_OUT" "${S3}x"
t_not_contains "(the IPv4 one)" "$T_OUT" "${S3}y"
# A default route the kernel learnt from a router advertisement is no way
# out: a neighbour put it there (a sandbox on a hand-wired link that takes
# them could).
t_ok "the IPv6 default route, as a router advertisement would put it" \
	ip -n "$WORLD_BRK" -6 route replace default via fd13:7::2 proto ra
bg pid ip netns exec "$WORLD_PREFIX-v6o" "$BIN/sluice" --socket "$BROKER_SOCK" status
t_eq "callers behind it are refused then (an unwired sandbox is registered)" "1" "$RC"
t_contains "(their namespace cannot be told from that sandbox's)" "$ERR" \
	"have no wire in the broker's namespace"
from_host status
t_eq "those behind the IPv4 way out are still answered" "0" "$RC"
t_ok "root unregisters it" S unregister "${S3}w"
t_ok "the IPv6 default route is back" ip -n "$WORLD_BRK" -6 route replace default via fd11:1::1

# --- a request that came while the broker's loop was held up -------------
# The loop runs its timers before it reads its sockets again. A caller
# connected, then the loop was held past that caller's 2 s deadline (here:
# a register waits for the opener, which is stopped) while its request
# came: it is answered, not told "no complete request within 2 s" (a
# clean-clone make check failed so on a `create`, whose config request
# came while the broker worked on its register).
OPENER=$(for c in $(ps -o pid= --ppid "$BROKER_PID"); do
	[ "$(cat /proc/"$c"/comm 2>/dev/null)" = sluiced-opener ] && echo "$c"; done)
rm -f "$D/late.connected" "$D/late.go" "$D/late.out"
python3 -c '
import os, socket, sys, time
sock, connected, go, out = sys.argv[1:5]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock)
open(connected, "w").close()
for _ in range(200):
    if os.path.exists(go): break
    time.sleep(0.05)
s.sendall(b"ping\n")
s.settimeout(20)
got = b""
while True:
    d = s.recv(4096)
    if not d: break
    got += d
open(out, "w").write(got.decode(errors="replace").split("\n")[0])' \
	"$BROKER_SOCK" "$D/late.connected" "$D/late.go" "$D/late.out" &
late=$!
late_in() { [ -e "$D/late.connected" ] && echo yes; }
t_ok "a caller connects and says nothing yet" wait_for 1 late_in
sleep 0.3 # the broker accepts it (its deadline starts)
t_ok "the broker's opener is stopped" kill -STOP "$OPENER"
S register "${S3}l" --addr 10.200.255.77 --policy "$D/pol.yaml" >"$D/late.reg" 2>&1 &
reg=$!
sleep 0.5 # the register waits for the opener, and the loop with it
touch "$D/late.go"
sleep 2.5 # past the caller's deadline, its request in the socket
t_ok "the opener goes on" kill -CONT "$OPENER"
wait "$reg"
t_eq "the register that held the loop is done" "0" "$?"
wait "$late"
t_eq "the caller whose request came meanwhile is answered" "ok" "$(cat "$D/late.out" 2>/dev/null)"
t_ok "root unregisters it" S unregister "${S3}l"

# --- a member's sandbox: its files are read with the member's right --------
# What a control_group member registers or updates is read as that member
# (uid, gid, groups; the kernel judges it), never with the broker user's
# right or root's: root's 0600 secret, a JWT key only root may read and the
# broker's environment are refused; the member's own secret works, at
# reload and after a restart too. Root's update makes root the reader.
M=$D/member
mkdir -m 0755 "$M"
printf 'member-secret-%s\n' "$WORLD_PREFIX" >"$M/mine"
chown "$U:$GID" "$M/mine"
chmod 600 "$M/mine"
printf 'root-secret-%s\n' "$WORLD_PREFIX" >"$M/roots"
chmod 600 "$M/roots"
openssl genpkey -algorithm ed25519 -out "$M/jwt.pem" 2>/dev/null
chmod 600 "$M/jwt.pem"
# mpol FILE SOURCE: a policy whose one credential comes from SOURCE.
mpol() {
	cat >"$1" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
credentials:
  - name: m-token
    source: $2
    scope: { hosts: [echo.world.test] }
    placeholder: M_TOKEN
EOF
	chmod 644 "$1"
}
mpol "$M/roots.yaml" "{ file: $M/roots }"
mpol "$M/mine.yaml" "{ file: $M/mine }"
mpol "$M/env.yaml" "{ env: PATH }"
mpol "$M/jwt.yaml" "{ jwt: { key_file: $M/jwt.pem, issuer: sluice-test } }"
as_member() {
	bg pid ip netns exec "$WORLD_BRK" setpriv --reuid=$U --regid="$GID" --clear-groups \
		"$BIN/sluice" --socket "$BROKER_SOCK" "$@"
}
MS=${S1}m
MREG=$D/state/sandboxes/$MS
as_member register "$MS" --addr 10.200.255.6 --policy "$M/roots.yaml"
t_eq "a member's register naming root's 0600 secret fails" "1" "$RC"
t_contains "read as the member: permission denied" "$ERR" "secret file \`$M/roots\`: Permission denied"
# Straight to the socket (sluice itself reads the policy first, as the member;
# the system python3: a per-user one may not be the member's to run).
bg pid ip netns exec "$WORLD_BRK" setpriv --reuid=$U --regid="$GID" --clear-groups \
	/usr/bin/python3 tests/integration/ctlclient.py split "$BROKER_SOCK" "register $MS 10.200.255.6 $M/roots" 0
t_eq "so does one naming root's 0600 file as its policy" \
	"error: $M/roots: cannot open: Permission denied" "$(cat "$D/bg.out")"
as_member register "$MS" --addr 10.200.255.6 --policy "$M/jwt.yaml"
t_eq "so does one naming a JWT key only root may read" "1" "$RC"
t_contains "(not handed to the key process instead)" "$ERR" "JWT key \`$M/jwt.pem\`: Permission denied"
as_member register "$MS" --addr 10.200.255.6 --policy "$M/env.yaml"
t_eq "and one naming the broker's environment" "1" "$RC"
t_contains "saying why" "$ERR" "an \`env\` source is read only for a sandbox registered by root"
t_ok "sluice list" S list
t_not_contains "none of them is registered" "$T_OUT" "$MS"
as_member register "$MS" --addr 10.200.255.6 --policy "$M/mine.yaml"
t_eq "a member's register naming its own secret works" "0" "$RC"
t_contains "the registration keeps whose right its files are read with" "$(cat "$MREG")" " reader $U $GID"
as_member update "$MS" --policy "$M/roots.yaml"
t_eq "the member's update to root's secret fails" "1" "$RC"
t_contains "(permission denied)" "$ERR" "secret file \`$M/roots\`: Permission denied"
t_contains "and the old policy stays" "$(cat "$MREG")" " policy $M/mine.yaml"

# --- a member changes only its own sandboxes --------------------------------
# unregister, update, approve and refuse: a control_group member only of the
# sandboxes it registered or last updated; root of any. A refusal says why,
# is audited (control-refused, with the sandbox) and changes nothing.
U2=65533 # another member
as_other() {
	bg pid ip netns exec "$WORLD_BRK" setpriv --reuid=$U2 --regid="$GID" --clear-groups \
		"$BIN/sluice" --socket "$BROKER_SOCK" "$@"
}
reg_before=$(cat "$MREG")
for req in "update $MS --policy $M/mine.yaml" "unregister $MS" "approve $MS echo.world.test" \
	"refuse $MS echo.world.test"; do
	# shellcheck disable=SC2086 # the request's words
	as_other $req
	t_eq "another member's \`${req%% *}\` of the member's sandbox fails" "1" "$RC"
	t_contains "and says why" "$ERR" \
		"refused: uid $U2 may not ${req%% *} sandbox \`$MS\`: it is uid $U's"
	t_contains "audited: deny, control-refused, naming the sandbox" "$(audit_of "$pid" control-refused)" \
		"\"sandbox\":\"$MS\",\"proto\":\"control\",\"name\":\"${req%% *}\","
done
t_eq "its registration is as it was" "$reg_before" "$(cat "$MREG")"
for req in "update $S1 --policy $M/mine.yaml" "unregister $S1" "approve $S1 other.world.test"; do
	# shellcheck disable=SC2086 # the request's words
	as_member $req
	t_eq "a member's \`${req%% *}\` of root's sandbox fails" "1" "$RC"
	t_contains "and says why" "$ERR" "refused: uid $U may not ${req%% *} sandbox \`$S1\`: it is uid 0's"
done
t_ok "root's sandbox is still registered" S list
t_contains "(listed)" "$T_OUT" "$S1"
t_ok "with its own policy: what it allows works" S exec "$S1" -- curl -sf -m 10 http://echo.world.test/ctl-owner
t_ok "and nothing was approved into it" S exec "$S1" -- sh -c \
	'test "$(curl -s -m 10 -o /dev/null -w "%{http_code}" http://other.world.test/)" = 403'
as_member approve "$MS" echo.world.test
t_eq "the member approves a host into its own sandbox" "0" "$RC"
as_member refuse "$MS" echo.world.test
t_contains "its refuse is not refused for whose it is (nothing waits)" "$ERR" \
	"nothing of sandbox \`$MS\` waits for echo.world.test"
as_member register "${MS}2" --addr 10.200.255.7 --policy "$M/mine.yaml"
t_eq "a second sandbox of the member's" "0" "$RC"
as_member unregister "${MS}2"
t_eq "it unregisters its own" "0" "$RC"
t_ok "sluice list" S list
t_not_contains "(gone)" "$T_OUT" "${MS}2"

# --- a member sees only its own sandboxes -----------------------------------
# list, pending, placeholders and watch: a member gets what is of its own
# sandboxes, root of all.
as_member list
t_eq "a member's list works" "0" "$RC"
t_contains "and shows its sandbox" "$(cat "$D/bg.out")" "$MS "
t_not_contains "not root's" "$(cat "$D/bg.out")" "$S1 "
as_other list
t_not_contains "another member's list does not show it" "$(cat "$D/bg.out")" "$MS "
as_member pending "$S1"
t_eq "a member's pending of root's sandbox fails" "1" "$RC"
t_contains "and says why" "$ERR" "refused: uid $U may not see what waits in sandbox \`$S1\`: it is uid 0's"
as_member pending
t_eq "its pending of all works" "0" "$RC"
mctl() {
	bg pid ip netns exec "$WORLD_BRK" setpriv --reuid=$U --regid="$GID" --clear-groups \
		/usr/bin/python3 tests/integration/ctlclient.py split "$BROKER_SOCK" "$1" 0
}
mctl "placeholders $S1"
t_eq "the placeholders of root's sandbox are refused to a member" \
	"error: refused: uid $U may not read the placeholders of sandbox \`$S1\`: it is uid 0's (a control_group member sees and changes only the sandboxes it registered; root, any)" \
	"$(cat "$D/bg.out")"
mctl "placeholders $MS"
t_contains "those of its own are not" "$(cat "$D/bg.out")" "M_TOKEN=sluice-ph-"
# Two watchers, the member's and root's; traffic of root's sandbox, and an
# approval in the member's.
(exec ip netns exec "$WORLD_BRK" setpriv --reuid=$U --regid="$GID" --clear-groups \
	"$BIN/sluice" --socket "$BROKER_SOCK" watch --json) >"$D/mwatch.json" 2>&1 &
MW=$!
(exec ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" watch --json) \
	>"$D/rwatch.json" 2>&1 &
RW=$!
watching() { S status | awk '$1 == "watchers" && $2 == 2'; }
t_ok "two watchers, a member's and root's" wait_for 1 watching
t_ok "traffic of root's sandbox" S exec "$S1" -- curl -sf -m 10 http://echo.world.test/ctl-watched
as_member approve "$MS" echo.world.test
t_eq "an approval in the member's" "0" "$RC"
t_ok "root's watcher gets root's sandbox's line" wait_for 1 grep -F '/ctl-watched' "$D/rwatch.json"
t_ok "the member's gets its own sandbox's" wait_for 1 grep -F "\"sandbox\":\"$MS\"" "$D/mwatch.json"
t_ok "(and root's gets that too)" wait_for 1 grep -F "\"sandbox\":\"$MS\"" "$D/rwatch.json"
kill "$MW" "$RW" 2>/dev/null
wait "$MW" "$RW" 2>/dev/null
t_not_contains "the member's watcher got nothing of root's sandbox" "$(cat "$D/mwatch.json")" \
	"\"sandbox\":\"$S1\""
t_not_contains "(nor its path)" "$(cat "$D/mwatch.json")" "/ctl-watched"

chown 0:0 "$M/mine"
t_fails "once its secret is root's alone, a reload (by root) fails" S reload
t_contains "reading it as the member, naming the sandbox" "$T_ERR" \
	"secret file \`$M/mine\`: Permission denied (sandbox \`$MS\`)"
broker_stop
broker_start
t_none "the broker restarts" $(broker_alive || echo "sluiced is not running")
t_contains "a restart reads it as the member too: not restored" "$(cat "$BROKER_LOG")" \
	"cannot restore \`$MS\`: secret file \`$M/mine\`: Permission denied"
chown "$U:$GID" "$M/mine"
broker_stop
broker_start
t_ok "sluice list" S list
t_contains "given back to the member, it is restored" "$T_OUT" "$MS"
t_ok "and its reload works" S reload
t_ok "root's update of the member's sandbox works" S update "$MS" --policy "$M/roots.yaml"
t_contains "and makes root the reader" "$(cat "$MREG")" " reader 0 0"
as_member update "$MS" --policy "$M/mine.yaml"
t_eq "the member's update of it is refused from then on" "1" "$RC"
t_contains "saying it is root's now" "$ERR" "refused: uid $U may not update sandbox \`$MS\`: it is uid 0's"
t_contains "and root's policy stays" "$(cat "$MREG")" " policy $M/roots.yaml"
t_ok "root unregisters it" S unregister "$MS"

# --- control_group changes on reload; the broker itself refuses -----------
sed -i "s/^control_group: .*/control_group: \"\"/" "$BROKER_CONF"
t_ok "reload without control_group" S reload
bg pid ip netns exec "$WORLD_BRK" setpriv --reuid=$U --regid="$GID" --clear-groups \
	"$BIN/sluice" --socket "$BROKER_SOCK" status
t_eq "a former member is refused by the broker" "1" "$RC"
t_contains "which says why" "$ERR" "refused: uid $U is not root (and no control_group is set)"
t_contains "audited: deny, control-refused, with its pid and uid" "$(audit_of "$pid" control-refused)" \
	"\"decision\":\"deny\",\"reason\":\"control-refused\",$NULLS_TO_PID\"pid\":$pid,\"uid\":$U,"

# --- an unknown group is a configuration error -----------------------------
sed -i "s/^control_group: .*/control_group: ${GRP}-none/" "$BROKER_CONF"
t_rc "--check-config refuses an unknown control_group" 1 "$BIN/sluiced" --config "$BROKER_CONF" --check-config
t_contains "with FILE:LINE:COL" "$T_ERR" "$BROKER_CONF:"
t_contains "naming the group" "$T_ERR" "unknown group \`${GRP}-none\`"
t_fails "a reload refuses it too" S reload
t_contains "saying why" "$T_ERR" "unknown group \`${GRP}-none\`"
t_ok "the broker still answers" S status

# --- slow, silent and too many clients --------------------------------------
# Control connections are served side by side: clients that never finish
# their request hold up no one else; each has a deadline (2 s) and at most
# 64 are kept (the oldest silent one makes room, told why).
CC="python3 tests/integration/ctlclient.py"
ms_since() { echo $((($(_broker_usec) - $1) / 1000)); }
log0=$(wc -l <"$BROKER_LOG")
t0=$(_broker_usec)
S list >/dev/null
echo "# sluice list alone took $(ms_since "$t0") ms (load: $(cut -d' ' -f1-3 /proc/loadavg))"
$CC flood "$BROKER_SOCK" 10 200 5 >"$D/flood.out" 2>"$D/flood.err" &
FLOOD=$!
for ((i = 0; i < 100; i++)); do
	grep -q '^ready' "$D/flood.out" 2>/dev/null && break
	sleep 0.1
done
t_contains "210 clients connect, 10 of them half-writing a request" "$(cat "$D/flood.out")" ready
t0=$(_broker_usec)
T_TIMEOUT=15 t_ok "meanwhile sluice list answers" S list
ms=$(ms_since "$t0")
echo "# sluice list took $ms ms beside 210 silent clients (load: $(cut -d' ' -f1-3 /proc/loadavg))"
slow=$( ((ms < 1000)) || echo "took $ms ms")
t_none "within 1 s (it waits for none of them)" ${slow:+"$slow"}
T_TIMEOUT=15 t_ok "and a sandbox is created" S create "$S2" --policy "$D/pol.yaml"
T_TIMEOUT=15 t_ok "and deleted" S delete "$S2"
wait "$FLOOD"
flood=$(cat "$D/flood.out" "$D/flood.err")
echo "# flood: $(tail -n +2 "$D/flood.out" | head -2)"
# Every one of them was answered: the ones over the bound "busy", the rest
# when their deadline passed (within the 5 s the script held them).
t_contains "and none is left waiting, nor given another answer" "$flood" "other=0 open=0"
busy=$(sed -n 's/.*busy=\([0-9]*\).*/\1/p' "$D/flood.out")
t_none "over 64 connections, the oldest silent ones are told the broker is busy (146 of 210 at least)" $( ((busy >= 146)) || echo "busy=$busy")
t_run $CC silent "$BROKER_SOCK" 10
secs=$(echo "$T_OUT" | head -1)
t_contains "a silent client is closed at its deadline, told why" "$T_OUT" \
	"error: no complete request within 2 s"
t_none "after about 2 s" $(awk -v s="$secs" 'BEGIN { exit !(s >= 1.5 && s < 4) }' || echo "after $secs s")
t_run $CC split "$BROKER_SOCK" list 0.2
t_eq "a request written in pieces, with pauses, is answered" "ok" "$(echo "$T_OUT" | head -1)"
t_contains "with the list" "$T_OUT" "$S1"
t_ok "sluice status" S status
t_contains "counts the deadlines" "$T_OUT" "control_timeouts "
t_contains "and the clients refused as over the bound" "$T_OUT" "control_busy "
n=$(tail -n +$((log0 + 1)) "$BROKER_LOG" | grep -c 'control: ')
t_none "the broker's log says so a bounded number of times" $( ((n < 20)) || echo "$n control lines")

t_none "the broker is still running" $(broker_alive || echo "sluiced exited")

# --- without control_group the socket is root's alone ----------------------
sed -i "s/^control_group: .*/control_group: \"\"/" "$BROKER_CONF"
broker_stop
broker_start
t_none "the broker restarts without control_group" $(broker_alive || echo "sluiced is not running")
t_eq "without control_group, the socket is 0600" "600" "$(stat -c '%a' "$BROKER_SOCK")"
t_done
