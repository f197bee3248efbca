#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# lifecycle.sh - how long `sluice create` and `sluice delete` take, alone and with 1,000 sandboxes present.
#
#   SLUICE_BIN=DIR bash tests/bench/lifecycle.sh
#
# Theory of operation: one test world (tests/world/world.sh) whose broker
# namespace runs sluiced (sandbox_pool 10.204.0.0/19: 2,048 /30s). Every
# command runs as a user runs it, `ip netns exec BRK sluice ...`, and is
# timed from outside by tests/bench/timed.c, from its fork to its reaping,
# with nothing around it (before, each ran under timeout(1), a process of
# its own that no caller pays for). The fixed cost of `ip netns exec` and of starting sluice (a
# mount namespace, the dynamic loader and sluice's libraries) is timed the
# same way with a no-op, `sluice help`, run just before each create; "net"
# is a create or a delete less the no-op of its own cycle, so that other
# load on the machine, as it comes and goes, mostly cancels out.
#
#   a. LIFECYCLE_CYCLES (50) create + delete cycles with no other sandbox;
#      each cycle also creates and deletes once with sluice --broker-netns
#      BROKER run from this shell (no ip netns exec: reported beside;
#      LIFECYCLE_DIRECT=0 leaves it out, for a sluice without the option).
#   b. LIFECYCLE_SANDBOXES (1000) sandboxes created one after the other (at
#      most LIFECYCLE_FILL_SECONDS (900) for all of them; the time is
#      reported, and the median of the first and last hundred creates);
#      then LIFECYCLE_CYCLES cycles on top of them; then all are deleted
#      (timed too);
#   c. LIFECYCLE_CYCLES cycles with no other sandbox again, so that a drift
#      of the machine's load over the run shows as a difference between a
#      and c rather than as growth; then the script checks that nothing is
#      left: no sl-* link
#      in the broker namespace, no /run/netns, /etc/netns or
#      /run/sluice-sandboxes entry, no element of the nftables set, no
#      registration in the broker (its list and its state_dir). `sluice
#      delete` returns with the sandbox's wire cut (set element gone, link
#      marked) and leaves the deletion of the veth pair to a child, which
#      waits out the kernel's grace periods: the links are waited for, at
#      most LINK_SETTLE_SECONDS (10), and how many were left, when, is
#      reported.
#
# Targets (issue 13): create < 5 ms and delete < 5 ms at the median, each
# a whole process as a caller pays it (ip netns exec and the process start
# included, nothing subtracted), and the median with 1,000 sandboxes present
# within max(25%, 1 ms) of the median with none (a and c together). The
# net figures stand beside them, for what sluice itself adds. Where perf is
# there, a last pass (d) measures the CPU time of each command (perf stat
# task-clock: ip, sluice and its children), with none and with the
# sandboxes present, so that a figure can be read on a loaded machine too
# (what a command leaves to a child that outlives it, delete's link
# deletion and the frees of netns/linger.c, counts only as far as it is
# done when the command exits); the load average is printed with each
# phase. p99 is by nearest rank: of
# 50 samples, the largest. A target missed prints MISS but does not fail
# the run; the exit status is non-zero
# only when the bench could not run, a create or delete failed, or
# something was left behind. It takes about ten minutes. The
# report goes to stdout and build/bench/lifecycle.txt; every raw sample to
# build/bench/lifecycle-samples.txt. This shell runs in an empty network
# namespace; sandboxes are named "$WORLD_PREFIX-lc*" and the trap removes
# whatever of them is left.
set -u
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD

. tests/world/isolate.sh "$REPO/tests/bench/lifecycle.sh" "$@"

. tests/world/world.sh
. tests/world/broker.sh

BIN=${SLUICE_BIN:-$REPO/bin}
CYCLES=${LIFECYCLE_CYCLES:-50}
NSB=${LIFECYCLE_SANDBOXES:-1000}
FILL_SECONDS=${LIFECYCLE_FILL_SECONDS:-900}
DIRECT=${LIFECYCLE_DIRECT:-1}
OUT=$REPO/build/bench
RESULTS=$OUT/lifecycle.txt
SAMPLES=$OUT/lifecycle-samples.txt
STATE=/run/sluice-sandboxes
# Per command: a create or delete that hangs ends here and counts as failed.
CMD_TIMEOUT=30

note() { echo "bench: $*" >&2; }
fail() {
	note "$*"
	exit 1
}
[[ $CYCLES =~ ^[0-9]+$ ]] && [ "$CYCLES" -ge 1 ] && [ "$CYCLES" -le 1000 ] ||
	fail "LIFECYCLE_CYCLES must be 1..1000"
[[ $NSB =~ ^[0-9]+$ ]] && [ "$NSB" -ge 1 ] && [ "$NSB" -le 2000 ] ||
	fail "LIFECYCLE_SANDBOXES must be 1..2000 (the pool holds 2048)"
[[ $FILL_SECONDS =~ ^[0-9]+$ ]] || fail "LIFECYCLE_FILL_SECONDS must be a number"
[[ $DIRECT =~ ^[01]$ ]] || fail "LIFECYCLE_DIRECT must be 0 or 1"
for t in "$BIN/sluiced" "$BIN/sluice"; do
	[ -x "$t" ] || fail "missing $t (make build)"
done
[ -n "${EPOCHREALTIME:-}" ] || fail "bash without \$EPOCHREALTIME (5.0 or later needed)"
mkdir -p "$OUT" || exit 1
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

note "building the test world"
world_up || fail "the test world did not come up"
P=$WORLD_PREFIX
D=$WORLD_DIR

# Every sandbox of this bench, by name, whatever state it is in.
our_sandboxes() {
	local f
	for f in /run/netns/"$P"-lc* "$STATE"/"$P"-lc* /etc/netns/"$P"-lc*; do
		[ -e "$f" ] && basename "$f"
	done | sort -u
}
# What sluice did not remove goes by hand (links and set elements go with
# the broker namespace in world_down). Bounded: one timeout per command.
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

broker_config "sandbox_pool: 10.204.0.0/19" || fail "cannot write the broker config"
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
EOF
# 1,000 sandboxes: the broker keeps a journal file open per sandbox.
ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# The binaries are copied first: a rebuild of bin/ during the run must
# not change, or break, what is measured.
mkdir -p "$D/bin" && cp "$BIN/sluiced" "$BIN/sluice" "$D/bin/" || fail "cannot copy the binaries"
BIN=$D/bin
broker_start || fail "sluiced did not come up"
BPID=$BROKER_PID

# The two forms a caller runs: through ip netns exec (B), and without it,
# sluice entering the broker's namespace itself (--broker-netns) from this
# shell's namespace (BD). timed runs them bare; B and BD, for what is not
# timed, with a time limit: a create or delete that hangs fails.
B_CMD=(ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK")
BD_CMD=("$BIN/sluice" --socket "$BROKER_SOCK" --broker-netns "$WORLD_BRK")
B() { timeout "$CMD_TIMEOUT" "${B_CMD[@]}" "$@"; }
BD() { timeout "$CMD_TIMEOUT" "${BD_CMD[@]}" "$@"; }
# tests/bench/timed.c: times one command from its fork to its reaping,
# with no process around it (see there why not timeout(1)).
TIMED=$D/timed
cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$TIMED" tests/bench/timed.c || fail "timed did not compile"
elements() { ip netns exec "$WORLD_BRK" nft -j list set inet sluice sandbox_src 2>/dev/null |
	python3 -c 'import json,sys; d=json.load(sys.stdin)
for o in d["nftables"]:
    if "set" in o: print(len(o["set"].get("elem", [])))'; }
sl_links() { ip -n "$WORLD_BRK" -o link show | awk -F': ' '$2 ~ /^sl-/' | wc -l; }
now_us() { local t=$EPOCHREALTIME; echo "${t/[.,]/}"; }
PROBLEMS=$D/problems
: >"$PROBLEMS"
problem() { echo "$*" >>"$PROBLEMS"; note "PROBLEM: $*"; }

# timed VAR FORM ARGS...: runs sluice ARGS in FORM (B or BD: ip netns
# exec, or --broker-netns), output to $D/cmd.out and $D/cmd.err; VAR gets
# its wall time in microseconds, as tests/bench/timed.c measures it (fork
# to reaping, nothing around the command: a caller's view; killed after
# CMD_TIMEOUT seconds); returns its status.
timed() {
	local __v=$1 form=$2 rc us
	shift 2
	case $form in
	B) set -- "${B_CMD[@]}" "$@" ;;
	BD) set -- "${BD_CMD[@]}" "$@" ;;
	*) fail "timed: no form $form" ;;
	esac
	: >"$D/timed.out"
	"$TIMED" "$D/timed.out" "$CMD_TIMEOUT" "$@" >"$D/cmd.out" 2>"$D/cmd.err"
	read -r rc us <"$D/timed.out" || { rc=2 us=0; }
	printf -v "$__v" '%s' "$us"
	return "$rc"
}

# stats US...: "median p99 min max" in ms (nearest-rank p99).
stats() { [ $# = 0 ] && { echo "nan nan nan nan"; return; }
	printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {
	if (NR == 0) { print "nan nan nan nan"; exit }
	m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
	k = int(NR * 0.99); if (k < NR * 0.99) k++; if (k < 1) k = 1
	printf "%.2f %.2f %.2f %.2f\n", m / 1000, v[k] / 1000, v[1] / 1000, v[NR] / 1000 }'; }
# median US...: in ms.
median() { read -r m _ <<<"$(stats "$@")"; echo "$m"; }
# verdict VALUE LIMIT: MET when VALUE < LIMIT.
verdict() { awk -v v="$1" -v l="$2" 'BEGIN { if (v == "nan" || v == "") print "MISS (no value)";
	else print (v + 0 < l + 0) ? "MET" : "MISS" }'; }
# flat A B: MET when B (with many sandboxes) is within max(25% of A, 1 ms) of A.
flat() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan") { print "MISS (no value)"; exit }
	lim = a * 0.25; if (lim < 1) lim = 1
	printf "%+.2f ms: %s\n", b - a, (b - a <= lim) ? "MET" : "MISS" }'; }

: >"$SAMPLES"
# cycles PHASE NAME: CYCLES x (no-op, create NAME, delete NAME); sets the
# arrays N_US C_US D_US (microseconds) and C_NET D_NET (each create and
# delete less the no-op of its own cycle, so that a load that comes and
# goes on the machine cancels out); counts failures in FAILS.
cycles() {
	local phase=$1 name=$2 i tn tc td tx ty nok
	N_US=() C_US=() D_US=() C_NET=() D_NET=() X_US=() Y_US=()
	for ((i = 1; i <= CYCLES; i++)); do
		nok=0
		if timed tn B help; then
			N_US+=("$tn")
			nok=1
		else
			problem "$phase: sluice help failed: $(head -c 300 "$D/cmd.err")"
			FAILS=$((FAILS + 1))
		fi
		if timed tc B create "$name" --policy "$D/pol.yaml"; then
			C_US+=("$tc")
			[ $nok = 1 ] && C_NET+=($((tc - tn)))
		else
			problem "$phase: create $name failed: $(head -c 300 "$D/cmd.err")"
			FAILS=$((FAILS + 1))
		fi
		if timed td B delete "$name"; then
			D_US+=("$td")
			[ $nok = 1 ] && D_NET+=($((td - tn)))
		else
			problem "$phase: delete $name failed: $(head -c 300 "$D/cmd.err")"
			FAILS=$((FAILS + 1))
		fi
		tx=- ty=-
		[ "$DIRECT" = 1 ] || { echo "$phase $i noop $tn create $tc delete $td" >>"$SAMPLES"; continue; }
		if timed tx BD create "$name" --policy "$D/pol.yaml"; then
			X_US+=("$tx")
		else
			problem "$phase: create --broker-netns $name failed: $(head -c 300 "$D/cmd.err")"
			FAILS=$((FAILS + 1))
		fi
		if timed ty BD delete "$name"; then
			Y_US+=("$ty")
		else
			problem "$phase: delete --broker-netns $name failed: $(head -c 300 "$D/cmd.err")"
			FAILS=$((FAILS + 1))
		fi
		echo "$phase $i noop $tn create $tc delete $td direct-create $tx direct-delete $ty" >>"$SAMPLES"
	done
}
FAILS=0
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
# sluiced's CPU time so far (user + system), in clock ticks: a create and a
# delete wait for its answers, so what it spends on them is theirs too.
TCK=$(getconf CLK_TCK)
broker_ticks() { awk '{ print $14 + $15 }' "/proc/$BPID/stat" 2>/dev/null || echo 0; }
# broker_ms T0 T1: its CPU per create + delete pair of a phase (each cycle
# creates and deletes twice: ip netns exec, --broker-netns; once without
# the second), in ms.
broker_ms() { awk -v a="$1" -v b="$2" -v t="$TCK" -v n="$(((1 + DIRECT) * CYCLES))" \
	'BEGIN { printf "%.2f", (b - a) * 1000 / t / n }'; }
# cpu_ms VAR ARGS...: VAR gets the CPU time in microseconds of
# `ip netns exec BRK sluice ARGS` (perf stat task-clock, the process and its
# children; timeout outside what is counted); returns sluice's status.
cpu_ms() {
	local __v=$1 rc
	shift
	timeout "$CMD_TIMEOUT" perf stat -x, -e task-clock -o "$D/perf.out" -- \
		ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" "$@" \
		>"$D/cmd.out" 2>"$D/cmd.err"
	rc=$?
	printf -v "$__v" '%s' "$(awk -F, '/task-clock/ { printf "%d", $1 * 1000 }' "$D/perf.out")"
	return $rc
}
# cpu_cycles PHASE NAME: CPU_CYCLES x (no-op, create, delete) under perf
# stat; sets U_N U_C U_D (microseconds of CPU).
CPU_CYCLES=${LIFECYCLE_CPU_CYCLES:-20}
HAVE_PERF=no
perf stat -x, -e task-clock -o /dev/null -- true >/dev/null 2>&1 && HAVE_PERF=yes
cpu_cycles() {
	local phase=$1 name=$2 i tn tc td
	U_N=() U_C=() U_D=()
	for ((i = 1; i <= CPU_CYCLES; i++)); do
		tn=- tc=- td=-
		cpu_ms tn help && U_N+=("$tn")
		if cpu_ms tc create "$name" --policy "$D/pol.yaml"; then
			U_C+=("$tc")
		else
			problem "$phase (cpu): create $name failed: $(head -c 300 "$D/cmd.err")"
			FAILS=$((FAILS + 1))
		fi
		if cpu_ms td delete "$name"; then
			U_D+=("$td")
		else
			problem "$phase (cpu): delete $name failed: $(head -c 300 "$D/cmd.err")"
			FAILS=$((FAILS + 1))
		fi
		echo "$phase-cpu $i noop $tn create $tc delete $td" >>"$SAMPLES"
	done
}

# --- warm-up: the first create installs the table ----------------------------
timed t_first B create "$P-lcw" --policy "$D/pol.yaml" || fail "the first create failed: $(cat "$D/cmd.err")"
B delete "$P-lcw" >/dev/null 2>&1 || fail "the first delete failed"
for _ in 1 2 3; do B help >/dev/null; done
links0=$(ip -n "$WORLD_BRK" -o link show | wc -l)

# --- a. alone ---------------------------------------------------------------------
note "a. $CYCLES create + delete cycles, no other sandbox"
LOAD_A=$(loadavg)
bt0=$(broker_ticks)
cycles alone "$P-lcz"
BRK_A=$(broker_ms "$bt0" "$(broker_ticks)")
A_C=("${C_US[@]}") A_D=("${D_US[@]}") A_N=("${N_US[@]}") A_CN=("${C_NET[@]}") A_DN=("${D_NET[@]}")
A_X=("${X_US[@]}") A_Y=("${Y_US[@]}")

# --- b. with NSB sandboxes -----------------------------------------------------------
note "b. creating $NSB sandboxes (at most ${FILL_SECONDS}s)"
F_US=()
fill_t0=$(now_us)
deadline=$((fill_t0 + FILL_SECONDS * 1000000))
made=0
for ((i = 1; i <= NSB; i++)); do
	if [ "$(now_us)" -gt "$deadline" ]; then
		problem "fill: stopped after ${FILL_SECONDS}s with $made of $NSB sandboxes"
		break
	fi
	if timed t B create "$P-lc$i" --policy "$D/pol.yaml"; then
		F_US+=("$t")
		made=$((made + 1))
	else
		problem "fill: create $P-lc$i failed: $(head -c 300 "$D/cmd.err")"
		FAILS=$((FAILS + 1))
		[ "$FAILS" -ge 20 ] && { problem "fill: 20 failures, giving up"; break; }
	fi
	[ $((i % 100)) = 0 ] && note "  $i created"
done
fill_us=$(($(now_us) - fill_t0))
echo "fill ${F_US[*]}" >>"$SAMPLES"
present=$(ls -d /run/netns/"$P"-lc* 2>/dev/null | wc -l)
n_elem=$(elements)
n_links=$(sl_links)
[ "$present" = "$made" ] || problem "fill: $made creates succeeded but $present namespaces exist"
[ "${n_elem:-0}" = "$made" ] || problem "fill: ${n_elem:-0} set elements for $made sandboxes"
[ "$n_links" = "$made" ] || problem "fill: $n_links sl-* links for $made sandboxes"
fds=$(find "/proc/$BPID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$BPID/status" 2>/dev/null)

note "b. $CYCLES create + delete cycles with $made sandboxes present"
LOAD_B=$(loadavg)
bt0=$(broker_ticks)
cycles loaded "$P-lcz"
BRK_B=$(broker_ms "$bt0" "$(broker_ticks)")
L_C=("${C_US[@]}") L_D=("${D_US[@]}") L_N=("${N_US[@]}") L_CN=("${C_NET[@]}") L_DN=("${D_NET[@]}")
L_X=("${X_US[@]}") L_Y=("${Y_US[@]}")
UL_N=() UL_C=() UL_D=()
if [ $HAVE_PERF = yes ]; then
	note "d. CPU time: $CPU_CYCLES cycles under perf stat with $made sandboxes present"
	LOAD_DL=$(loadavg)
	cpu_cycles loaded "$P-lcz"
	UL_N=("${U_N[@]}") UL_C=("${U_C[@]}") UL_D=("${U_D[@]}")
fi

note "b. deleting the $made sandboxes"
E_US=()
drain_t0=$(now_us)
for ((i = 1; i <= NSB; i++)); do
	[ -e "$STATE/$P-lc$i" ] || [ -e "/run/netns/$P-lc$i" ] || continue
	if timed t B delete "$P-lc$i"; then
		E_US+=("$t")
	else
		problem "drain: delete $P-lc$i failed: $(head -c 300 "$D/cmd.err")"
		FAILS=$((FAILS + 1))
	fi
	[ $((i % 100)) = 0 ] && note "  $i deleted"
done
drain_us=$(($(now_us) - drain_t0))
note "c. $CYCLES create + delete cycles, no other sandbox again"
LOAD_C=$(loadavg)
bt0=$(broker_ticks)
cycles again "$P-lcz"
BRK_C=$(broker_ms "$bt0" "$(broker_ticks)")
C_C=("${C_US[@]}") C_D=("${D_US[@]}") C_N=("${N_US[@]}") C_CN=("${C_NET[@]}") C_DN=("${D_NET[@]}")
C_X=("${X_US[@]}") C_Y=("${Y_US[@]}")
UA_N=() UA_C=() UA_D=()
if [ $HAVE_PERF = yes ]; then
	note "d. CPU time: $CPU_CYCLES cycles under perf stat, no other sandbox"
	LOAD_DA=$(loadavg)
	cpu_cycles alone "$P-lcz"
	UA_N=("${U_N[@]}") UA_C=("${U_C[@]}") UA_D=("${U_D[@]}")
fi
# The first look is at the time of one `ip link` run after the last delete.
settle_t0=$(now_us)
settle_deadline=$((settle_t0 + ${LINK_SETTLE_SECONDS:-10} * 1000000))
links_at_end=$(sl_links)
links_seen_us=$(($(now_us) - settle_t0))
links_left=$links_at_end
while [ "$links_left" != 0 ] && [ "$(now_us)" -lt "$settle_deadline" ]; do
	sleep 0.01
	links_left=$(sl_links)
done
settle_us=$(($(now_us) - settle_t0))
echo "drain ${E_US[*]}" >>"$SAMPLES"

# --- nothing left ---------------------------------------------------------------------
left_links=$(sl_links)
left_all_links=$(ip -n "$WORLD_BRK" -o link show | wc -l)
left_netns=$(ls -d /run/netns/"$P"-lc* 2>/dev/null | wc -l)
left_etc=$(ls -d /etc/netns/"$P"-lc* 2>/dev/null | wc -l)
left_state=$(ls -d "$STATE/$P"-lc* 2>/dev/null | wc -l)
left_elem=$(elements)
left_reg=$(B list 2>/dev/null | grep -c -- "$P-lc")
left_files=$(find "$D/state/sandboxes" -mindepth 1 2>/dev/null | wc -l)
left_mounts=$(grep -c " /run/netns/$P-lc" /proc/self/mountinfo)
leftovers="sl-* links $left_links (all links $left_all_links, $links0 before), netns $left_netns,"
leftovers="$leftovers /etc/netns $left_etc, $STATE $left_state, set elements ${left_elem:-?},"
leftovers="$leftovers broker registrations $left_reg, broker state files $left_files, /run/netns mounts $left_mounts"
clean=yes
[ "$left_links" = 0 ] && [ "$left_all_links" = "$links0" ] && [ "$left_netns" = 0 ] &&
	[ "$left_etc" = 0 ] && [ "$left_state" = 0 ] && [ "${left_elem:-x}" = 0 ] &&
	[ "$left_reg" = 0 ] && [ "$left_files" = 0 ] && [ "$left_mounts" = 0 ] || clean=no
[ $clean = yes ] || problem "left behind: $leftovers"
broker_alive || problem "sluiced (pid $BPID) is not running at the end"

# --- report -----------------------------------------------------------------------------
# row LABEL RAW-ARRAY [NET-ARRAY]: median, p99, min, max of each (ms).
row() {
	local -n raw=$2
	local m p lo hi nm=- np=-
	read -r m p lo hi <<<"$(stats "${raw[@]}")"
	if [ $# -gt 2 ]; then
		local -n net=$3
		read -r nm np _ _ <<<"$(stats "${net[@]}")"
	fi
	printf '   %-26s %4d %8s %8s %8s %8s   %8s %8s\n' "$1" "${#raw[@]}" "$m" "$p" "$lo" "$hi" "$nm" "$np"
}
# None present: a and c together, so that a load that came or went
# during the run weighs on both sides of the comparison alike.
N_CN=("${A_CN[@]}" "${C_CN[@]}") N_DN=("${A_DN[@]}" "${C_DN[@]}")
N_C=("${A_C[@]}" "${C_C[@]}") N_D=("${A_D[@]}" "${C_D[@]}") N_N=("${A_N[@]}" "${C_N[@]}")
N_X=("${A_X[@]}" "${C_X[@]}") N_Y=("${A_Y[@]}" "${C_Y[@]}")
a_xw=$(median "${N_X[@]}")
a_yw=$(median "${N_Y[@]}")
l_xw=$(median "${L_X[@]}")
l_yw=$(median "${L_Y[@]}")
# Whole process (the targets) and net of the no-op (beside them).
a_cw=$(median "${N_C[@]}")
a_dw=$(median "${N_D[@]}")
l_cw=$(median "${L_C[@]}")
l_dw=$(median "${L_D[@]}")
a_cm=$(median "${N_CN[@]}")
a_dm=$(median "${N_DN[@]}")
l_cm=$(median "${L_CN[@]}")
l_dm=$(median "${L_DN[@]}")
nf=${#F_US[@]}
ne=${#E_US[@]}
F_FIRST=("${F_US[@]:0:100}") F_LAST=("${F_US[@]: -100}")
E_FIRST=("${E_US[@]:0:100}") E_LAST=("${E_US[@]: -100}")
{
	echo "sluice lifecycle bench, $(date -u '+%Y-%m-%d %H:%M UTC'), sluice $(git -C "$REPO" describe --always --dirty 2>/dev/null)"
	echo "machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), kernel $(uname -r)," \
		"load average $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end."
	echo "  /run is on $(stat -f -c %T /run), the broker's state_dir ($D/state) on $(stat -f -c %T "$D")."
	echo "Each command: ip netns exec BROKER sluice --socket S create|delete NAME, timed from outside"
	echo "(tests/bench/timed.c: its fork to its reaping, nothing around it). no-op: ip netns exec BROKER sluice help, timed the same way just before"
	echo "each create, is the fixed cost of ip netns exec (a mount namespace, /sys remounted) and of starting"
	echo "sluice (the dynamic loader, libraries). net: each create and delete less the no-op of its own cycle."
	echo "All figures in ms; p99 by nearest rank (of $CYCLES samples: the largest)."
	echo "Load average (1, 5, 15 min) at the start of a: $LOAD_A; of b: $LOAD_B; of c: $LOAD_C."
	echo "The first create of the world (installs table inet sluice): $(awk -v t="$t_first" 'BEGIN { printf "%.2f", t / 1000 }') ms."
	echo
	printf '   %-26s %4s %8s %8s %8s %8s   %8s %8s\n' "" n median p99 min max "net med" "net p99"
	echo "a. no other sandbox present"
	row "no-op (sluice help)" A_N
	row "create" A_C A_CN
	row "delete" A_D A_DN
	row "create, --broker-netns" A_X
	row "delete, --broker-netns" A_Y
	echo "b. $made sandboxes present"
	row "no-op (sluice help)" L_N
	row "create" L_C L_CN
	row "delete" L_D L_DN
	row "create, --broker-netns" L_X
	row "delete, --broker-netns" L_Y
	echo "c. no other sandbox present, after deleting them"
	row "no-op (sluice help)" C_N
	row "create" C_C C_CN
	row "delete" C_D C_DN
	row "create, --broker-netns" C_X
	row "delete, --broker-netns" C_Y
	echo "a and c together"
	row "no-op (sluice help)" N_N
	row "create" N_C N_CN
	row "delete" N_D N_DN
	row "create, --broker-netns" N_X
	row "delete, --broker-netns" N_Y
	if [ $HAVE_PERF = yes ]; then
		echo "d. CPU time of each command (perf stat task-clock: ip netns exec, sluice, its children)"
		echo "   with $made present (load $LOAD_DL), then none (load $LOAD_DA)"
		row "no-op, $made present" UL_N
		row "create, $made present" UL_C
		row "delete, $made present" UL_D
		row "no-op, none present" UA_N
		row "create, none present" UA_C
		row "delete, none present" UA_D
	else
		echo "d. (no CPU times: perf stat cannot run here)"
	fi
	echo
	printf '   creating the %d: %.1f s in all (%.1f creates/s)\n' "$made" \
		"$(awk -v u="$fill_us" 'BEGIN { print u / 1e6 }')" \
		"$(awk -v u="$fill_us" -v n="$nf" 'BEGIN { print u ? n * 1e6 / u : 0 }')"
	if [ "$nf" -ge 200 ]; then
		row "creates 1-100" F_FIRST
		row "creates $((nf - 99))-$nf" F_LAST
	fi
	printf '   deleting them: %.1f s in all (%.1f deletes/s)\n' \
		"$(awk -v u="$drain_us" 'BEGIN { print u / 1e6 }')" \
		"$(awk -v u="$drain_us" -v n="$ne" 'BEGIN { print u ? n * 1e6 / u : 0 }')"
	printf '   sl-* links after the last delete returned: %s at +%.0f ms (one `ip link` run), %s at +%.0f ms\n' \
		"$links_at_end" "$(awk -v u="$links_seen_us" 'BEGIN { print u / 1e3 }')" \
		"$links_left" "$(awk -v u="$settle_us" 'BEGIN { print u / 1e3 }')"
	if [ "$ne" -ge 200 ]; then
		row "deletes 1-100" E_FIRST
		row "deletes $((ne - 99))-$ne" E_LAST
	fi
	echo "   (these rows are raw, without a no-op to pair with)"
	echo "   sluiced with $made sandboxes: $fds fds, VmRSS ${rss:-?} KiB"
	echo "   sluiced's CPU per create + delete (its answers to them): a $BRK_A ms, b ($made present) $BRK_B ms, c $BRK_C ms"
	echo
	echo "targets (median of whole processes, ip netns exec included; net of the no-op beside):"
	echo "   create < 5 ms, none present (a and c): $a_cw ms: $(verdict "$a_cw" 5)   (net $a_cm)"
	echo "   create < 5 ms, $made present: $l_cw ms: $(verdict "$l_cw" 5)   (net $l_cm)"
	echo "   delete < 5 ms, none present (a and c): $a_dw ms: $(verdict "$a_dw" 5)   (net $a_dm)"
	echo "   delete < 5 ms, $made present: $l_dw ms: $(verdict "$l_dw" 5)   (net $l_dm)"
	echo "   create flat with $made present (within max(25%, 1 ms)): $(flat "$a_cw" "$l_cw")   (net $(flat "$a_cm" "$l_cm"))"
	echo "   delete flat with $made present (within max(25%, 1 ms)): $(flat "$a_dw" "$l_dw")   (net $(flat "$a_dm" "$l_dm"))"
	echo "the same as whole processes of sluice --broker-netns BROKER, without ip netns exec (the form README scripts: --broker-netns):"
	echo "   create < 5 ms, none present: $a_xw ms: $(verdict "$a_xw" 5); $made present: $l_xw ms: $(verdict "$l_xw" 5)"
	echo "   delete < 5 ms, none present: $a_yw ms: $(verdict "$a_yw" 5); $made present: $l_yw ms: $(verdict "$l_yw" 5)"
	echo "   create flat: $(flat "$a_xw" "$l_xw"); delete flat: $(flat "$a_yw" "$l_yw")"
	echo
	echo "after deleting all: $leftovers: $([ $clean = yes ] && echo "nothing left" || echo "LEFT BEHIND")"
	if [ -s "$PROBLEMS" ]; then
		echo "problems seen during the run:"
		sed 's/^/   - /' "$PROBLEMS" | head -n 40
	else
		echo "problems seen during the run: none ($(((6 + 4 * DIRECT) * CYCLES + nf + ne + ${#UL_C[@]} + ${#UL_D[@]} + ${#UA_C[@]} + ${#UA_D[@]})) creates and deletes, all succeeded)"
	fi
} >"$RESULTS.tmp"
mv "$RESULTS.tmp" "$RESULTS"
cat "$RESULTS"
note "results written to $RESULTS; samples in $SAMPLES"
[ $clean = yes ] && [ "$FAILS" = 0 ]
