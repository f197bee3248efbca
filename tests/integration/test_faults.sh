#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The fault suite (issue 18): the broker survives its environment.
#  1. Its stderr's reader goes away (a `| logger` pipeline ends, a journal
#     restarts), at start-up or later: the broker keeps serving, counts the
#     lost log lines (sluice status), and its audit log goes on.
#  2. Out of file descriptors, it does not spin, and its connection limits
#     follow RLIMIT_NOFILE.
#  3. The policy limits README names give the errors it names.
#  4. A create whose state cannot be saved (state_dir full) fails and
#     leaves nothing behind.
#  5. A delete that cannot remove the registration (read-only state_dir)
#     says so and exits 1; the next start drops registrations whose
#     namespace is gone, and says so.
#  8. A full audit disk: each record whole or not at all, the lost ones
#     counted in sluice status; a deleted audit file is opened anew.
# README's "Failure modes" says what a user sees in each case.
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
trap 'fault_stop; cleanup_sandboxes; world_down' EXIT

# Sandboxes made here with `sluice create` are "$WORLD_PREFIX-f*": the trap
# removes whatever of them is left (as test_sandbox.sh does).
cleanup_sandboxes() {
	local n pid f
	for f in /run/netns/"$WORLD_PREFIX"-f* /run/sluice-sandboxes/"$WORLD_PREFIX"-f* \
		/etc/netns/"$WORLD_PREFIX"-f*; do
		[ -e "$f" ] || continue
		n=$(basename "$f")
		if [ -e "/run/netns/$n" ]; then
			for pid in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
			ip netns del "$n" 2>/dev/null
		fi
		rm -rf "/etc/netns/$n" "/run/sluice-sandboxes/$n" "/var/lib/sluice/workspaces/$n"
	done
}

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

# --- 2. out of file descriptors ------------------------------------------------
# The broker starts under RLIMIT_NOFILE 256 and derives its connection
# limits from it (a proxied connection holds up to 6 descriptors), saying
# so. c1 opens 200 connections and holds them. Then the limit is lowered
# under the broker to what it holds, so that accept() finds no descriptor
# while c1's next connections wait.
#
# The bounds are generous on purpose: this is a check against a spin, not a
# performance assertion. A broker that spins on accept() burns a core
# (3.7 s of CPU per 2 s with 2 workers when this was found, about 400,000
# log lines a second); one that waits uses next to nothing (a few ticks for
# 10 retries a second). 0.5 s of CPU in 2 s and 50 log lines tell the two
# apart on a loaded machine.
cat >"$D/hold.py" <<'EOF2'
# hold.py ADDR PORT N SECS: open N TCP connections (2 s each at most), send
# nothing, print "held N", hold them SECS, exit.
import socket, sys, time
addr, port, n, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
socks = []
for i in range(n):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((addr, port))
    except OSError:
        break
    socks.append(s)
print("held", len(socks), flush=True)
time.sleep(secs)
EOF2
TICK=$(getconf CLK_TCK)
# cpu_ticks: the CPU of FPID so far (proc_ticks).
cpu_ticks() { proc_ticks "$FPID"; }
# fd_lines: the log's lines about descriptors and connection limits.
fd_lines() { grep -cE 'descriptor|cannot accept|connection limit' "$BROKER_LOG"; }
# over_2s WHAT: CPU ticks and new fd_lines of the broker over 2 s, checked.
over_2s() {
	local c0 c1 l0 l1
	c0=$(cpu_ticks) l0=$(fd_lines)
	sleep 2
	c1=$(cpu_ticks) l1=$(fd_lines)
	echo "# $1: $((c1 - c0)) ticks of CPU ($TICK a second) and $((l1 - l0)) log lines in 2 s"
	t_ok "$1: the broker uses under 0.5 s of CPU in 2 s" test $(((c1 - c0) * 1000 / TICK)) -lt 500
	t_ok "$1: and logs under 50 lines about it" test $((l1 - l0)) -lt 50
}
# wait_held FILE: until hold.py said "held" in FILE (10 s at most).
wait_held() {
	for ((i = 0; i < 100; i++)); do
		grep -q '^held' "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

broker_config -n fds "head_timeout: 30s"
ip netns exec "$WORLD_BRK" prlimit --nofile=256:256 "$BIN/sluiced" --config "$BROKER_CONF" \
	</dev/null >>"$BROKER_LOG" 2>&1 &
FPID=$!
world_track_pid "$FPID" sluiced-fds
t_ok "sluiced starts under RLIMIT_NOFILE 256" fault_wait
register
t_contains "its start-up log says what the descriptors allow" "$(cat "$BROKER_LOG")" \
	"sluiced: RLIMIT_NOFILE 256: at most "
ip netns exec "$WORLD_PREFIX-c1" /usr/bin/python3 "$D/hold.py" 10.99.0.1 3128 200 40 >"$D/hold1.out" 2>&1 &
H1=$!
t_ok "c1 opens 200 connections to the broker and holds them" wait_held "$D/hold1.out"
over_2s "c1 holding 200 connections"
t_eq "c2 is served meanwhile" 200 "$(get c2 fds-limit)"
t_ok "and sluice list answers" sl list
t_contains "(c1 was held to its share: connection-limit)" "$(cat "$BROKER_AUDIT")" \
	'"reason":"connection-limit"'

# Now no descriptor is left: the soft limit is the lowest descriptor
# number the broker does not hold (a new descriptor takes the lowest free
# number; the hard limit stays, so that it can be raised again without
# CAP_SYS_RESOURCE).
nfd=$(ls "/proc/$FPID/fd" | sort -n | awk '$1 != NR - 1 { exit } END { print NR - ($1 != NR - 1) }')
# As the broker's own user (it runs as one of its own after start-up):
# root needs CAP_SYS_RESOURCE for another user's limits, which a test
# machine's root may lack.
as_broker() { as_user_of "$FPID" "$@"; }
t_ok "RLIMIT_NOFILE lowered under the broker to $nfd, its lowest free descriptor" \
	as_broker prlimit --pid "$FPID" --nofile="$nfd:256"
ip netns exec "$WORLD_PREFIX-c1" /usr/bin/python3 "$D/hold.py" 10.99.0.1 3128 50 40 >"$D/hold2.out" 2>&1 &
H2=$!
t_ok "c1 opens 50 more, which wait for a descriptor" wait_held "$D/hold2.out"
sleep 0.5
over_2s "no descriptor left"
t_ok "the broker is alive" alive
t_contains "its log says it cannot accept" "$(cat "$BROKER_LOG")" "Too many open files"
t_ok "RLIMIT_NOFILE back to 256" as_broker prlimit --pid "$FPID" --nofile=256:256
t_eq "a descriptor free again, c2 is served" 200 "$(get c2 fds-after)"
t_ok "and sluice list answers" sl list
kill "$H1" "$H2" 2>/dev/null
wait "$H1" "$H2" 2>/dev/null
fault_stop

# --- 3. the policy limits README names, and their errors -----------------------
# Generated files, each one over a limit (and the largest one that is not,
# where the limit is a count a user might reach), checked with
# `sluice policy check` as a user would; the messages are README's.
/usr/bin/python3 - "$D" <<'EOF2'
import sys
d = sys.argv[1]
def w(n, s):
    open(d + '/' + n, 'w').write(s)
w('big.yaml', 'version: 1\n' + '#' * (1 << 20) + '\n')
w('nodes.yaml', 'version: 1\nx: [' + ','.join(['1'] * 100000) + ']\n')
w('deep33.yaml', 'version: 1\nx: ' + '[' * 32 + ']' * 32 + '\n')
w('deep32.yaml', 'version: 1\nx: ' + '[' * 31 + ']' * 31 + '\n')
rules = lambda n: 'version: 1\negress:\n  allow:\n' + ''.join(
    '    - host: h%d.example.com\n' % i for i in range(n))
w('rules4096.yaml', rules(4096))
w('rules4097.yaml', rules(4097))
ranges = lambda n: 'version: 1\negress:\n  allow_ranges:\n' + ''.join(
    '    - 10.%d.%d.0/24\n' % (i // 256, i % 256) for i in range(n))
w('ranges4096.yaml', ranges(4096))
w('ranges4097.yaml', ranges(4097))
EOF2
pc() { "$BIN/sluice" policy check "$@"; }
t_rc "a policy file over 1 MiB is refused" 1 pc "$D/big.yaml"
t_eq "saying so" "$D/big.yaml: not a regular file of at most 1048576 bytes" "$T_ERR$T_OUT"
t_rc "more than 100,000 YAML nodes are refused" 1 pc "$D/nodes.yaml"
t_contains "saying so, where the count is passed" "$T_ERR$T_OUT" \
	"$D/nodes.yaml:2:199995: more than 100000 YAML nodes"
t_rc "nesting deeper than 32 is refused" 1 pc "$D/deep33.yaml"
t_eq "saying so" "$D/deep33.yaml:2:35: nesting deeper than 32" "$T_ERR$T_OUT"
t_rc "nesting 32 deep is read (and its key is then unknown)" 1 pc "$D/deep32.yaml"
t_contains "(so)" "$T_ERR$T_OUT" "$D/deep32.yaml:2:1: unknown key \`x\`"
t_ok "4,096 allow rules are accepted" pc "$D/rules4096.yaml"
t_rc "4,097 are refused" 1 pc "$D/rules4097.yaml"
t_eq "saying so" "$D/rules4097.yaml:4:5: more than 4096 allow rules" "$T_ERR$T_OUT"
t_ok "4,096 allow_ranges are accepted" pc "$D/ranges4096.yaml"
t_rc "4,097 are refused" 1 pc "$D/ranges4097.yaml"
t_eq "saying so" "$D/ranges4097.yaml:4100:7: more than 4096 ranges" "$T_ERR$T_OUT"

# --- 4. a create whose state cannot be saved ------------------------------------
# The broker runs in a mount namespace of its own (unshare -m, private),
# where its state_dir is a tmpfs of 256 KiB: nothing is mounted on the
# host's paths. in_ns runs a command in that mount namespace.
in_ns() { nsenter -t "$FPID" -m -- "$@"; }
# fault_start_private DIR [tmpfs]: sluiced on BROKER_CONF in a private mount
# namespace, DIR a small tmpfs there when asked.
fault_start_private() {
	ip netns exec "$WORLD_BRK" unshare -m --propagation private /bin/sh -c '
		[ "$1" != tmpfs ] || mount -t tmpfs -o size=256k,mode=0700 sluice-faults "$2" || exit 1
		exec "$3" --config "$4"' sh "${2:-}" "$1" "$BIN/sluiced" "$BROKER_CONF" \
		</dev/null >>"$BROKER_LOG" 2>&1 &
	FPID=$!
	world_track_pid "$FPID" "sluiced-$(basename "$1")"
}
# left NAME ADDR: what is left of sandbox NAME at ADDR (nothing: empty).
left() {
	local f
	for f in "/run/netns/$1" "/run/sluice-sandboxes/$1" "/etc/netns/$1"; do
		[ -e "$f" ] && echo "file $f"
	done
	in_ns sh -c 'cd "$1" && ls -d sandboxes/"$2"* synthetic/"$2"* ca/"$2" placeholders/"$2" 2>/dev/null' \
		sh "$SD" "$1" | sed 's/^/state_dir: /'
	ip -n "$WORLD_BRK" -o addr show | grep -F "${2%.2}.1/" | sed 's/^/link: /'
	ip netns exec "$WORLD_BRK" nft list ruleset 2>/dev/null | grep -F "$2" | sed 's/^/element: /'
	sl list 2>/dev/null | grep -F "$1 " | sed 's/^/registered: /'
}
F1=$WORLD_PREFIX-f1
SD=$D/state-small
mkdir -p "$SD"
broker_config -n small "state_dir: $SD" "sandbox_pool: 10.202.0.0/24"
fault_start_private "$SD" tmpfs
t_ok "sluiced starts with its state_dir on a tmpfs of 256 KiB" fault_wait
# Filled a page at a time (bounded) until full; one page is freed, which
# the CA's key takes (the key process writes it when it makes the CA), so
# that a file written after it finds no room (which one depends on the
# file system's accounting: the CA's certificate or the registration).
in_ns sh -c 'i=0; while [ $i -lt 100 ] && dd if=/dev/zero of="$1/fill$i" bs=4k count=1 \
	status=none 2>/dev/null; do i=$((i + 1)); done; rm -f "$1/fill0"' sh "$SD"
t_rc "create with its state_dir nearly full fails" 1 sl create "$F1" --policy "$D/pol.yaml"
ca_full="cannot save the sandbox's CA in $SD/ca/$F1: No space left on device"
reg_full="cannot write registration in $SD/sandboxes: No space left on device"
case $T_ERR in
*"$ca_full"* | *"$reg_full"*) t_ok "saying why" true ;;
*) t_contains "saying why" "$T_ERR" "$ca_full" ;;
esac
t_eq "and nothing of it is left" "" "$(left "$F1" 10.202.0.2)"
t_eq "  ... nor its CA key in state_dir/keys" "" "$(in_ns sh -c 'ls "$1/keys"' sh "$SD")"
# `sluice register` reads the answer whole: it is never sent in two parts
# (only create's, with the netns word, is), so its failure reads as one.
t_rc "register --addr auto with state_dir full fails too" 1 \
	sl register "$F1-r" --addr auto --policy "$D/pol.yaml"
t_contains "  ... saying why" "$T_ERR" "No space left on device"
t_eq "  ... and is not registered" "" "$(sl list | awk -v n="$F1-r" '$1 == n')"
in_ns sh -c 'rm -f "$1"/fill*' sh "$SD"
t_ok "with room again, the same name is created" sl create "$F1" --policy "$D/pol.yaml"
# The failed create was told its address before its CA was made (the wire
# is built meanwhile); the failure let that address go.
t_eq "at the address the failed create had held" 10.202.0.2 \
	"$(sl list | awk -v n="$F1" '$1 == n { print $2 }')"
t_contains "its state is saved" "$(left "$F1" 10.202.0.2)" "state_dir: ca/$F1"
t_ok "and it is deleted" sl delete "$F1"
t_eq "leaving nothing" "" "$(left "$F1" 10.202.0.2)"
fault_stop

# --- 5. a delete that cannot finish ----------------------------------------------
# The broker's state_dir is made read-only under it (a read-only bind mount
# in its own mount namespace) after a create: delete removes the sandbox
# but says it could not remove the registration, and exits 1. The next
# broker, on the same state_dir, drops that registration (its namespace is
# gone) and says so; a registration without a namespace of sluice's
# (`sluice register`, c1 here) is kept.
F2=$WORLD_PREFIX-f2
SD=$D/state-ro
mkdir -p "$SD"
broker_config -n ro "state_dir: $SD" "sandbox_pool: 10.203.0.0/24"
fault_start_private "$SD"
t_ok "sluiced starts" fault_wait
t_ok "create $F2" sl create "$F2" --policy "$D/pol.yaml"
t_ok "register c1 (no namespace of sluice's)" sl register c1 --addr 10.99.0.2 --policy "$D/pol.yaml"
t_ok "state_dir made read-only under the broker" \
	in_ns sh -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"' sh "$SD"
t_rc "delete with a read-only state_dir exits 1" 1 sl delete "$F2"
t_contains "saying what it could not do" "$T_ERR" \
	"unregistered \`$F2\`, but cannot remove $SD/sandboxes/$F2: Read-only file system"
t_eq "the sandbox itself is gone" "" "$(left "$F2" 10.203.0.2 | grep -v state_dir)"
fault_stop
t_ok "(its registration file stays)" test -e "$SD/sandboxes/$F2"
fault_start_private "$SD"
t_ok "a new broker starts on that state_dir" fault_wait
t_ok "sluice list" sl list
t_not_contains "does not list $F2" "$T_OUT" "$F2"
t_contains "but lists c1" "$T_OUT" "c1"
t_contains "its log says what it dropped" "$(cat "$BROKER_LOG")" \
	"sandbox: \`$F2\` at 10.203.0.2 has no namespace (/run/netns/$F2 is gone): dropped its registration $SD/sandboxes/$F2"
t_eq "and nothing of $F2 is left" "" "$(left "$F2" 10.203.0.2)"
t_ok "$F2 can be created again" sl create "$F2" --policy "$D/pol.yaml"
t_ok "and deleted" sl delete "$F2"
fault_stop

# --- 7. a create killed half-way ----------------------------------------------------
# sluice create is SIGKILLed at several points (the signals it holds cover
# the rest). A retried create of the name removes what the killed one left
# and makes the sandbox; where the create had finished before the kill, a
# retry says it exists. Either way one delete leaves nothing.
F3=$WORLD_PREFIX-f3
SD=$D/state-kill
mkdir -p "$SD"
broker_config -n kill "state_dir: $SD" "sandbox_pool: 10.208.0.0/24"
fault_start_private "$SD"
t_ok "sluiced starts" fault_wait
killed=0
for d in 0.001 0.002 0.003 0.004 0.006 0.008; do
	ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" create "$F3" \
		--policy "$D/pol.yaml" >/dev/null 2>&1 &
	pid=$!
	sleep "$d"
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rc=$?
	if [ "$rc" = 137 ] && [ ! -e "/run/sluice-sandboxes/.creating-$F3" ] &&
		[ -e "/run/sluice-sandboxes/$F3/sandbox" ]; then
		# Killed after its work was done (its mark gone, its record
		# there): in its exit, e.g. a sanitizer's leak check.
		t_rc "killed after ${d}s, once it had finished: a retried create says it exists" 1 \
			sl create "$F3" --policy "$D/pol.yaml"
	elif [ "$rc" = 137 ]; then
		killed=$((killed + 1))
		t_ok "killed after ${d}s: a retried create succeeds" sl create "$F3" --policy "$D/pol.yaml"
	else
		t_rc "done within ${d}s: a retried create says it exists" 1 \
			sl create "$F3" --policy "$D/pol.yaml"
	fi
	t_ok "and one delete removes it" sl delete "$F3"
	t_eq "leaving nothing" "" "$(left "$F3" 10.208.0.2; ls -a /run/sluice-sandboxes | grep -F "creating-$F3")"
done
echo "# creates killed (before they ended): $killed of 6"
# The same killed at a known point, whatever the build's speed (a
# sanitizer's start-up is slower than the delays above): once its mark is
# there, and once its namespace is (when it still runs then).
for at in ".creating-$F3" "$F3"; do
	case $at in .*) where=/run/sluice-sandboxes/$at ;; *) where=/run/netns/$at ;; esac
	ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" create "$F3" \
		--policy "$D/pol.yaml" >/dev/null 2>&1 &
	pid=$!
	for ((i = 0; i < 5000; i++)); do
		[ -e "$where" ] && break
		read -r -t 0.001 <> <(:) 2>/dev/null
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rc=$?
	if [ "$rc" = 137 ] && [ -e "/run/sluice-sandboxes/.creating-$F3" ]; then
		t_ok "killed once $where was there: a retried create succeeds" \
			sl create "$F3" --policy "$D/pol.yaml"
		t_contains "saying it removed what was left" "$T_ERR" \
			"a create of \`$F3\` was interrupted; removing what it left"
	else
		t_ok "(it had ended before the kill: rc $rc)" sl delete "$F3"
		t_ok "created again" sl create "$F3" --policy "$D/pol.yaml"
	fi
	t_ok "and one delete removes it" sl delete "$F3"
	t_eq "leaving nothing" "" "$(left "$F3" 10.208.0.2; ls -a /run/sluice-sandboxes | grep -F "creating-$F3")"
done
fault_stop

# --- 8. a full audit disk ----------------------------------------------------------
# The audit log is on a tmpfs of 256 KiB in the broker's own mount
# namespace, filled but for the rest of the log's last page: the requests
# below need more. Every line of the file must be a whole JSON record, the
# lost ones are counted in sluice status, and with room again the log goes
# on. Then the file is deleted under the broker: it opens a new one.
AD=$D/audit-small
mkdir -p "$AD"
broker_config -n aud "audit_log: $AD/audit.log"
fault_start_private "$AD" tmpfs
t_ok "sluiced starts with its audit log on a tmpfs of 256 KiB" fault_wait
register
in_ns sh -c 'i=0; while [ $i -lt 100 ] && dd if=/dev/zero of="$1/fill$i" bs=4k count=1 \
	status=none 2>/dev/null; do i=$((i + 1)); done' sh "$AD"
for ((k = 0; k < 40; k++)); do get c1 "full-$k-$(printf '%0100d' 0)" >/dev/null; done
# torn: the lines of the audit log that are not a whole JSON record.
torn() {
	in_ns cat "$AD/audit.log" | /usr/bin/python3 -c '
import json, sys
for l in sys.stdin:
    try:
        json.loads(l)
    except ValueError:
        print(l.rstrip()[:120])'
}
t_eq "with its disk full, every audit line is a whole record" "" "$(torn)"
t_ok "sluice status" sl status
lost=$(sed -n 's/^audit: \([0-9]*\) lines lost.*/\1/p' <<<"$T_OUT")
echo "# audit lines lost: $lost"
t_ok "counts the lines lost" test "${lost:-0}" -gt 0
in_ns sh -c 'rm -f "$1"/fill*' sh "$AD"
# audited PATH: the audit log's line of the request for /PATH, once there
# (the audit thread writes it a moment after the answer).
audited() { in_ns grep -F "\"path\":\"/$1\"" "$AD/audit.log" 2>/dev/null; }
t_eq "with room again, a client is served" 200 "$(get c1 room-again)"
t_ok "and audited" wait_for 1 audited room-again
t_eq "in whole records" "" "$(torn)"
# The broker runs as its own user: it can make a new file where that user
# may (README, "What it needs": a rotation), so the directory is its.
t_ok "the audit log's directory given to the broker's user" in_ns chown \
	"$(awk '/^Uid:/ { print $3 }' /proc/"$FPID"/status)" "$AD"
t_ok "the audit log deleted under the broker" in_ns rm "$AD/audit.log"
# It looks once a second; its log says when it has opened a new file.
reopened() { grep -F "audit: $AD/audit.log was removed or replaced while open: reopened" "$BROKER_LOG"; }
t_ok "it opens a new file, and its log says so" wait_for 1 reopened
t_eq "a client is served" 200 "$(get c1 after-delete)"
t_ok "and audited in the new file" wait_for 1 audited after-delete
# A directory the broker's user may not write into: it keeps writing to the
# old file, and says so once, not every second it tries again.
t_ok "the directory given back to root (0755)" in_ns sh -c 'chown 0 "$1" && chmod 0755 "$1"' sh "$AD"
t_ok "the audit log deleted again" in_ns rm "$AD/audit.log"
cannot_reopen() { grep -F "audit: $AD/audit.log was removed or replaced while open, and" "$BROKER_LOG"; }
t_ok "it cannot reopen, and says so" wait_for 1 cannot_reopen
sleep 2.5
t_eq "once, in the 2.5 s after (tried every second)" 1 "$(cannot_reopen | wc -l)"
t_eq "a client is still served" 200 "$(get c1 after-second-delete)"
fault_stop

t_done
