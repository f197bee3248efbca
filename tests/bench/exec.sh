#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# exec.sh - how long `sluice exec NAME -- true` takes as a whole process (the contained runner), alone and with many sandboxes present.
#
#   SLUICE_BIN=DIR bash tests/bench/exec.sh
#
# Theory of operation: one test world whose broker namespace runs sluiced
# (sandbox_pool 10.205.0.0/19). Every command runs as the README shows it,
# `sluice --socket S exec ...` from the host's namespaces (sluice joins the
# sandbox itself), timed from outside ($EPOCHREALTIME around it). Per
# round, EXEC_RUNS (30) times, interleaved: a no-op (`sluice help`:
# sluice's own start), `sluice exec S -- true` (contained: user, PID,
# mount namespaces, seccomp), the same under `ip netns exec BRK` (the old
# form, which copies the whole mount table for every command), and `sluice
# exec --privileged S -- true` (the uncontained path, for the cost of
# containment). "net" is an exec less the no-op of its own iteration.
# Round a: one sandbox; round b: EXEC_SANDBOXES (1000) more present (at
# most EXEC_FILL_SECONDS (900) to create them); then all are deleted.
#
# Target: the contained exec < 10 ms at the median as a whole process
# (raw, sluice's start included), and with the sandboxes present within
# max(25%, 1 ms) of alone. A target missed prints MISS but does not fail
# the run. Report: stdout and build/bench/exec.txt. Sandboxes are named
# "$WORLD_PREFIX-ex*"; the trap removes whatever of them is left.
set -u
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD

. tests/world/isolate.sh "$REPO/tests/bench/exec.sh" "$@"

. tests/world/world.sh
. tests/world/broker.sh

BIN=${SLUICE_BIN:-$REPO/bin}
RUNS=${EXEC_RUNS:-30}
NSB=${EXEC_SANDBOXES:-1000}
FILL_SECONDS=${EXEC_FILL_SECONDS:-900}
OUT=$REPO/build/bench
RESULTS=$OUT/exec.txt
STATE=/run/sluice-sandboxes
CMD_TIMEOUT=30

note() { echo "bench: $*" >&2; }
fail() {
	note "$*"
	exit 1
}
[[ $RUNS =~ ^[0-9]+$ ]] && [ "$RUNS" -ge 1 ] && [ "$RUNS" -le 1000 ] || fail "EXEC_RUNS must be 1..1000"
[[ $NSB =~ ^[0-9]+$ ]] && [ "$NSB" -le 2000 ] || fail "EXEC_SANDBOXES must be 0..2000"
for t in "$BIN/sluiced" "$BIN/sluice"; do
	[ -x "$t" ] || fail "missing $t (make build)"
done
mkdir -p "$OUT" || exit 1
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
MOUNTS0=$(wc -l </proc/self/mountinfo)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

note "building the test world"
world_up || fail "the test world did not come up"
P=$WORLD_PREFIX
D=$WORLD_DIR

our_sandboxes() {
	local f
	for f in /run/netns/"$P"-ex* "$STATE"/"$P"-ex* /etc/netns/"$P"-ex*; do
		[ -e "$f" ] && basename "$f"
	done | sort -u
}
cleanup_sandboxes() {
	local n pid
	for n in $(our_sandboxes); do
		broker_alive && timeout 20 ip netns exec "$WORLD_BRK" "$BIN/sluice" \
			--socket "$BROKER_SOCK" delete "$n" >/dev/null 2>&1
		if [ -e "/run/netns/$n" ]; then
			for pid in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
			ip netns del "$n" 2>/dev/null
		fi
		rm -rf "/etc/netns/$n" "${STATE:?}/$n" "/var/lib/sluice/workspaces/$n"
	done
}
trap 'cleanup_sandboxes; broker_stop; world_down' EXIT

broker_config "sandbox_pool: 10.205.0.0/19" || fail "cannot write the broker config"
printf 'version: 1\negress:\n  allow:\n    - host: echo.world.test\n' >"$D/pol.yaml"
ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# Copied: a rebuild of bin/ during the run must not change what is measured.
mkdir -p "$D/bin" && cp "$BIN/sluiced" "$BIN/sluice" "$D/bin/" || fail "cannot copy the binaries"
BIN=$D/bin
broker_start || fail "sluiced did not come up"

B() { timeout "$CMD_TIMEOUT" ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" "$@"; }
H() { timeout "$CMD_TIMEOUT" "$BIN/sluice" --socket "$BROKER_SOCK" "$@"; }
now_us() { local t=$EPOCHREALTIME; echo "${t/[.,]/}"; }
timed() {
	local __v=$1 t0 t1 rc
	shift
	t0=$EPOCHREALTIME
	"$@" >"$D/cmd.out" 2>"$D/cmd.err"
	rc=$?
	t1=$EPOCHREALTIME
	printf -v "$__v" '%s' $((${t1/[.,]/} - ${t0/[.,]/}))
	return $rc
}
stats() { [ $# = 0 ] && { echo "nan nan nan nan"; return; }
	printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {
	m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
	k = int(NR * 0.99); if (k < NR * 0.99) k++; if (k < 1) k = 1
	printf "%.2f %.2f %.2f %.2f\n", m / 1000, v[k] / 1000, v[1] / 1000, v[NR] / 1000 }'; }
median() { read -r m _ <<<"$(stats "$@")"; echo "$m"; }
verdict() { awk -v v="$1" -v l="$2" 'BEGIN { if (v == "nan" || v == "") print "MISS (no value)";
	else print (v + 0 < l + 0) ? "PASS" : "MISS" }'; }
flat() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan") { print "MISS (no value)"; exit }
	lim = a * 0.25; if (lim < 1) lim = 1
	printf "%+.2f ms: %s\n", b - a, (b - a <= lim) ? "PASS" : "MISS" }'; }

FAILS=0
SB=$P-ex0
B create "$SB" --policy "$D/pol.yaml" >/dev/null 2>&1 || fail "create $SB failed"
# Warm-up: page cache, the workspace made on the first exec.
for _ in 1 2 3; do H exec "$SB" -- true >/dev/null 2>&1 || fail "sluice exec failed: $(H exec "$SB" -- true 2>&1)"; done

# round NAME: RUNS x (no-op, contained exec, the same under ip netns exec,
# privileged exec); sets N_US X_US I_US V_US (raw) and XN_US VN_US (net).
round() {
	local i tn tx ti tv
	N_US=() X_US=() I_US=() V_US=() XN_US=() VN_US=()
	for ((i = 1; i <= RUNS; i++)); do
		timed tn H help || { FAILS=$((FAILS + 1)); continue; }
		if timed tx H exec "$SB" -- true; then
			X_US+=("$tx") XN_US+=($((tx - tn)))
		else
			FAILS=$((FAILS + 1))
			note "$1: exec failed: $(head -c 300 "$D/cmd.err")"
		fi
		if timed ti B exec "$SB" -- true; then
			I_US+=("$ti")
		else
			FAILS=$((FAILS + 1))
			note "$1: ip netns exec ... exec failed: $(head -c 300 "$D/cmd.err")"
		fi
		if timed tv H exec --privileged "$SB" -- true; then
			V_US+=("$tv") VN_US+=($((tv - tn)))
		else
			FAILS=$((FAILS + 1))
		fi
		N_US+=("$tn")
	done
}

note "a. $RUNS runs, one sandbox"
round alone
A_N=("${N_US[@]}") A_X=("${X_US[@]}") A_I=("${I_US[@]}") A_V=("${V_US[@]}") A_XN=("${XN_US[@]}") A_VN=("${VN_US[@]}")

note "b. creating $NSB sandboxes (at most ${FILL_SECONDS}s)"
deadline=$(($(now_us) + FILL_SECONDS * 1000000))
made=0
for ((i = 1; i <= NSB; i++)); do
	[ "$(now_us)" -gt "$deadline" ] && { note "fill: stopped after ${FILL_SECONDS}s"; break; }
	B create "$P-ex$i" --policy "$D/pol.yaml" >/dev/null 2>&1 && made=$((made + 1))
	[ $((i % 100)) = 0 ] && note "  $i created"
done
note "b. $RUNS runs with $made sandboxes present"
round loaded
L_N=("${N_US[@]}") L_X=("${X_US[@]}") L_I=("${I_US[@]}") L_V=("${V_US[@]}") L_XN=("${XN_US[@]}") L_VN=("${VN_US[@]}")
note "deleting them"
for ((i = 1; i <= NSB; i++)); do
	[ -e "$STATE/$P-ex$i" ] && B delete "$P-ex$i" >/dev/null 2>&1
done

row() {
	local -n raw=$2
	printf '   %-34s %4d %8s %8s %8s %8s\n' "$1" "${#raw[@]}" $(stats "${raw[@]}")
}
a_x=$(median "${A_X[@]}")
l_x=$(median "${L_X[@]}")
{
	echo "sluice exec bench, $(date -u '+%Y-%m-%d %H:%M UTC'), sluice $(git -C "$REPO" describe --always --dirty 2>/dev/null)"
	echo "machine: $(nproc) CPUs, kernel $(uname -r), load average $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end;"
	echo "$MOUNTS0 mounts in the host's mount table at the start (other sandboxes on the machine count too)."
	echo "Each command: sluice --socket S ... from the host's namespaces (the README's form), timed from outside;"
	echo "\"ip netns exec\": ip netns exec BROKER sluice --socket S exec .... ms; p99 by nearest rank."
	echo
	printf '   %-34s %4s %8s %8s %8s %8s\n' "" n median p99 min max
	echo "a. one sandbox"
	row "no-op (sluice help)" A_N
	row "exec -- true (contained)" A_X
	row "ip netns exec B sluice exec -- true" A_I
	row "exec --privileged -- true" A_V
	row "contained, net of the no-op" A_XN
	row "privileged, net of the no-op" A_VN
	echo "b. $made more sandboxes present"
	row "no-op (sluice help)" L_N
	row "exec -- true (contained)" L_X
	row "ip netns exec B sluice exec -- true" L_I
	row "exec --privileged -- true" L_V
	row "contained, net of the no-op" L_XN
	row "privileged, net of the no-op" L_VN
	echo
	echo "targets:"
	echo "   contained exec < 10 ms median, whole process, one sandbox: $a_x ms: $(verdict "$a_x" 10)"
	echo "   the same with $made present: $l_x ms: $(verdict "$l_x" 10)"
	echo "   not growing with $made present (within max(25%, 1 ms)): $(flat "$a_x" "$l_x")"
	echo "failures: $FAILS"
} >"$RESULTS.tmp"
mv "$RESULTS.tmp" "$RESULTS"
cat "$RESULTS"
[ "$FAILS" = 0 ]
