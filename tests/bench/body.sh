#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# body.sh - bulk download throughput: direct, CONNECT tunnel, explicit proxy and transparent plain HTTP.
#
#   SLUICE_BIN=DIR [BENCH_BYTES=N] [BENCH_RUNS=N] bash tests/bench/body.sh
#
# A standalone measurement beside run.sh (which it does not replace): one
# test world, blast (tests/bench/blast.c) on 11.0.2.20:8081
# (other.world.test), a client namespace c1 routed through the broker
# namespace (the direct path; ip_forward on there only) and registered with
# sluiced, and a sandbox made by `sluice create` for the transparent path.
# Each round downloads BENCH_BYTES (2 GiB) once per path, rounds alternate
# the paths; the medians are printed with the ratio to direct and sluiced's
# CPU seconds per GiB (user + system of the whole process, /proc/PID/stat),
# and the load average at the start and end.
#
# BENCH_HELD=N opens N HTTPS tunnels from c1 to echo.world.test
# (tests/bench/tunnels.py) before the rounds and holds them through them,
# each carrying a small GET every BENCH_TRICKLE seconds (0.6; 0: idle): the
# download then runs beside that many live tunnels, as on a broker that
# serves many sandboxes.
#
# BENCH_PROFILE=perf|strace attaches `perf stat` (counters of the whole
# sluiced process) or `strace -c -f` (syscall counts) to sluiced for each
# proxied download; the output goes to build/bench/body-PATH-ROUND.{perf,strace}.
set -u
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD

. tests/world/isolate.sh "$REPO/tests/bench/body.sh" "$@"
. tests/world/world.sh
. tests/world/broker.sh

BIN=${SLUICE_BIN:-$REPO/bin}
BYTES=${BENCH_BYTES:-2147483648}
RUNS=${BENCH_RUNS:-3}
PATHS=${BENCH_PATHS:-direct tunnel explicit transparent}
OUT=$REPO/build/bench
BLAST=$OUT/blast
SRV=11.0.2.20
SRVNAME=other.world.test
SRVPORT=8081
GW=10.99.0.1
HZ=$(getconf CLK_TCK)

note() { echo "body: $*" >&2; }
fail() {
	note "$*"
	exit 1
}
mkdir -p "$OUT" || exit 1
cc -std=gnu11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -o "$BLAST" \
	tests/bench/blast.c || fail "blast did not compile"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

world_up || fail "the test world did not come up"
SB=$WORLD_PREFIX-bt
trap 'sl delete "$SB" >/dev/null 2>&1; broker_stop; world_down' EXIT
D=$WORLD_DIR
C=$WORLD_PREFIX-c1
world_add_client c1 10.99.0.2/30 "$GW" || fail "client c1 did not come up"
brk_exec sysctl -qw net.ipv4.ip_forward=1 || fail "cannot enable forwarding in $WORLD_BRK"
world_spawn inet blast "$BLAST" -t 2 -r "$D/ready.blast" "$SRV:$SRVPORT" || fail "blast did not start"
for ((n = 0; n < 50; n++)); do [ -s "$D/ready.blast" ] && break; sleep 0.1; done

broker_config "max_connections: 3000"
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: $SRVNAME
      ports: [$SRVPORT]
    - host: echo.world.test
      ports: [443]
limits: { connections: 2000 }
EOF
broker_start || fail "sluiced did not come up"
sl register c1 --addr 10.99.0.2 --policy "$D/pol.yaml" >/dev/null || fail "register failed"
sl create "$SB" --policy "$D/pol.yaml" >/dev/null || fail "sluice create failed"

HELD=${BENCH_HELD:-0}
if [ "$HELD" -gt 0 ]; then
	ip netns exec "$C" /usr/bin/python3 tests/bench/tunnels.py "$GW" 3128 echo.world.test 443 \
		"$HELD" --ready "$D/held.ready" --release "$D/held.release" --hold-max 1800 \
		--trickle "${BENCH_TRICKLE:-0.6}" --tls "$WORLD_DIR/pki/ca.crt" >"$D/held.log" 2>&1 &
	HELD_PID=$!
	world_track_pid "$HELD_PID" held-tunnels
	for ((n = 0; n < 1500; n++)); do [ -s "$D/held.ready" ] && break; sleep 0.1; done
	[ -s "$D/held.ready" ] || fail "the $HELD held tunnels did not open: $(cat "$D/held.log")"
	note "held tunnels: $(cat "$D/held.ready"); sluiced holds $(ls "/proc/$BROKER_PID/fd" | wc -l) descriptors"
fi

cpu_ticks() {
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
	set -- ${st##*) }
	echo $((${12} + ${13}))
}
# one PATH: prints "Gbit/s CPU-s/GiB", or "nan nan".
one() {
	local ns=$C t0 t1 out code size secs
	local -a args
	case $1 in
	direct) args=("http://$SRV:$SRVPORT/bytes/$BYTES") ;;
	tunnel) args=(-p -x "http://$GW:3128" "http://$SRVNAME:$SRVPORT/bytes/$BYTES") ;;
	explicit) args=(-x "http://$GW:3128" "http://$SRVNAME:$SRVPORT/bytes/$BYTES") ;;
	transparent) ns=$SB args=("http://$SRVNAME:$SRVPORT/bytes/$BYTES") ;;
	esac
	local prof=''
	if [ "$1" != direct ] && [ -n "${BENCH_PROFILE:-}" ]; then
		case $BENCH_PROFILE in
		perf) perf stat -e task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions \
			-p "$BROKER_PID" -o "$OUT/body-$1-$r.perf" & ;;
		strace) strace -c -f -q -p "$BROKER_PID" -o "$OUT/body-$1-$r.strace" & ;;
		esac
		prof=$!
		sleep 0.5
	fi
	t0=$(cpu_ticks "$BROKER_PID")
	out=$(timeout -k 5 300 ip netns exec "$ns" curl -sS -m 240 -o /dev/null \
		-w '%{http_code} %{size_download} %{time_total}' "${args[@]}" 2>"$D/curl.err")
	t1=$(cpu_ticks "$BROKER_PID")
	if [ -n "$prof" ]; then
		kill -INT "$prof" 2>/dev/null
		wait "$prof" 2>/dev/null
	fi
	read -r code size secs <<<"$out"
	if [ "$code" != 200 ] || [ "$size" != "$BYTES" ]; then
		note "$1: status ${code:-?}, ${size:-0} bytes: $(tr '\n' ' ' <"$D/curl.err")"
		echo nan nan
		return
	fi
	awk -v b="$size" -v s="$secs" -v t="$((t1 - t0))" -v hz="$HZ" \
		'BEGIN { printf "%.2f %.2f\n", b * 8 / s / 1e9, t / hz / (b / 2^30) }'
}
median() { tr ' ' '\n' | grep -v -e '^$' -e nan | sort -g | awk '{v[NR] = $1} END {
	if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
	else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A G CPU
for ((r = 1; r <= RUNS; r++)); do
	line="round $r:"
	for p in $PATHS; do
		read -r g c <<<"$(one "$p")"
		G[$p]="${G[$p]:-} $g" CPU[$p]="${CPU[$p]:-} $c"
		line="$line $p $g ($c s/GiB)"
	done
	note "$line"
done
if [ "$HELD" -gt 0 ]; then
	note "with $HELD held tunnels, sluiced holds $(ls "/proc/$BROKER_PID/fd" | wc -l) descriptors"
	touch "$D/held.release"
	wait "$HELD_PID"
	note "held tunnels: exit $? $(tr '\n' ' ' <"$D/held.log")"
fi
md=$(echo "${G[direct]:-}" | median)
echo "bulk download of $((BYTES >> 20)) MiB, $RUNS rounds, load average $LOAD0 -> $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %8s %9s %14s  %s\n' path Gbit/s "vs direct" "sluiced s/GiB" "runs (Gbit/s)"
for p in $PATHS; do
	m=$(echo "${G[$p]}" | median)
	printf '%-12s %8s %9s %14s  %s\n' "$p" "$m" \
		"$(awk -v a="$m" -v b="$md" 'BEGIN { if (b + 0 == 0 || a == "nan") print "n/a"; else printf "%.2f\n", a / b }')" \
		"$(echo "${CPU[$p]}" | median)" "$(echo ${G[$p]})"
done
