#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dns.sh - the DNS filter's query rate against dnsmasq's, in the test world.
#
#   SLUICE_BIN=DIR bash tests/bench/dns.sh
#
# Theory of operation: one test world plus one client namespace (dnsb,
# 10.98.0.2/22, gateway 10.98.0.1) holding DNS_BENCH_SANDBOXES (512)
# addresses, each registered with sluiced as its own sandbox: the filter
# bounds every sandbox to 500 queries/s (burst 1000), so one source could
# never show the filter's own rate. dnsload (tests/bench/dnsload.c, C,
# single-threaded, epoll) keeps one A query for echo.world.test in flight
# per socket, one socket per source, for DNS_BENCH_SECONDS (5) and counts
# answers by RCODE. Four targets, DNS_BENCH_RUNS (3) runs each, interleaved,
# the median counts:
#
#   sluiced        the filter (workers: 2) on 10.98.0.1:3153, asked from the
#                  client namespace; audit log to a file, every query a line
#   sluiced-noaudit  a second sluiced, the same but with audit_log:
#                  /dev/null, on port 3154 (both run side by side, so that
#                  every run can go through the four targets in turn)
#   dnsmasq        the world's own (11.0.1.53), answering from its
#                  --host-record config, as the world runs it: with
#                  --log-queries to a file; asked from the broker namespace
#   dnsmasq-nolog  a second dnsmasq with the same records on 11.0.1.55
#                  (11.0.1.54 is the world's silent resolver),
#                  without query logging
#
# Each load crosses one veth pair. The load tool, the servers and everything
# else share the machine's CPUs: the server CPU time per query (from
# /proc/PID/stat) is reported next to the rate, and the load tool's own CPU
# use, so that a tool-bound figure shows as one. The report goes to stdout
# and build/bench/dns-results.txt. Exit status non-zero only when the bench
# could not run. Everything runs inside world namespaces; this shell itself
# runs in an empty network namespace.
set -u
cd "$(dirname "$0")/../.."
REPO=$PWD

. tests/world/isolate.sh "$REPO/tests/bench/dns.sh" "$@"

. tests/world/world.sh
. tests/world/broker.sh

BIN=${SLUICE_BIN:-$REPO/bin}
SECS=${DNS_BENCH_SECONDS:-5}
RUNS=${DNS_BENCH_RUNS:-3}
NSB=${DNS_BENCH_SANDBOXES:-512}
OUT=$REPO/build/bench
RESULTS=$OUT/dns-results.txt
LOAD=$OUT/dnsload
GW=10.98.0.1
FIRST=10.98.0.2
PORT=3153
NAME=echo.world.test

note() { echo "bench: $*" >&2; }
fail() {
	note "$*"
	exit 1
}
[ "$NSB" -ge 1 ] && [ "$NSB" -le 1000 ] || fail "DNS_BENCH_SANDBOXES must be 1..1000"

mkdir -p "$OUT" || exit 1
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
note "compiling dnsload"
cc -std=gnu11 -O2 -Wall -Wextra -Werror -Wshadow -Wformat=2 -D_GNU_SOURCE \
	-o "$LOAD" "$REPO/tests/bench/dnsload.c" || fail "dnsload did not compile"
for t in "$BIN/sluiced" "$BIN/sluice" "$WORLD_DNSMASQ"; do
	[ -x "$t" ] || fail "missing $t"
done

note "building the test world"
world_up || fail "the test world did not come up"
LOGS=$OUT/dns-logs
rm -rf "$LOGS"
# Keep what explains a bad figure after the world is gone.
save_logs() {
	[ -n "${WORLD_DIR:-}" ] && [ -d "$WORLD_DIR" ] || return 0
	mkdir -p "$LOGS" && cp "$WORLD_DIR"/sluiced-*.log "$WORLD_DIR"/load-*.out \
		"$WORLD_DIR"/load-*.time "$LOGS"/ 2>/dev/null
	grep -v '"reason":"allowed"' "$WORLD_DIR/audit.log" 2>/dev/null | head -n 200 >"$LOGS/audit-unusual.log"
}
trap 'save_logs; world_down' EXIT
D=$WORLD_DIR
C=$WORLD_PREFIX-dnsb
world_add_client dnsb "$FIRST/22" "$GW" || fail "client dnsb did not come up"

# ip4 N: the N-th address from FIRST (0-based).
ip4() { awk -v n="$1" 'BEGIN { v = 10 * 16777216 + 98 * 65536 + 2 + n;
	printf "%d.%d.%d.%d\n", int(v / 16777216), int(v / 65536) % 256, int(v / 256) % 256, v % 256 }'; }
for ((i = 1; i < NSB; i++)); do echo "addr add $(ip4 "$i")/22 dev eth0"; done |
	ip -n "$C" -batch - || fail "cannot add the client's addresses"

printf 'version: 1\negress:\n  allow:\n    - host: %s\n' "$NAME" >"$D/bench-policy.yaml"

# wait_for DESC TRIES(x0.1s) CMD...: bounded wait.
wait_for() {
	local desc=$1 tries=$2 n
	shift 2
	for ((n = 0; n < tries; n++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	note "timed out waiting for $desc"
	return 1
}
ask() { # NS SERVER PORT SOURCE: one query (not more: a sandbox's rate budget), NOERROR
	ip netns exec "$1" timeout 5 "$LOAD" -s "$2:$3" -b "$4" -n 1 -d 2 -c 1 -q "$NAME" |
		grep -q ' noerror [1-9]'
}
# start_sluiced TAG DNS-PORT OTHER-PORTS-BASE AUDIT-TARGET: a broker with
# its own control socket, state and ports, so that two run side by side
# and their runs can be interleaved; registers every sandbox with it. Sets
# PID_<TAG>. world_down ends both.
start_sluiced() {
	local tag=$1 port=$2 base=$3 audit=$4 i
	broker_config -n "$tag" "audit_log: $audit" "dns_port: $port" "proxy_port: $base" \
		"transparent_port: $((base + 1))" || fail "cannot write sluiced's ($tag) config"
	broker_start || fail "sluiced ($tag) did not come up"
	printf -v "PID_$tag" '%s' "$BROKER_PID"
	note "registering $NSB sandboxes with sluiced ($tag)"
	# Not through sl: the control socket needs no namespace, and this is
	# NSB calls.
	for ((i = 0; i < NSB; i++)); do
		"$BIN/sluice" --socket "$BROKER_SOCK" register "sb$i" --addr "$(ip4 "$i")" \
			--policy "$D/bench-policy.yaml" >/dev/null || fail "sluice register sb$i ($tag) failed"
	done
	# the first and the last sandbox are answered
	wait_for "the DNS filter on $GW:$port" 20 ask "$C" "$GW" "$port" "$FIRST" &&
		ask "$C" "$GW" "$port" "$(ip4 $((NSB - 1)))" ||
		fail "the DNS filter ($tag) does not answer (is broker_dns_start() called by main.c?)"
}
start_sluiced audit "$PORT" 3128 "$D/audit.log"
start_sluiced noaudit $((PORT + 1)) 3228 /dev/null

# A second dnsmasq, the world's records without query logging.
ip -n "$WORLD_INET" addr add 11.0.1.55/32 dev lo || fail "cannot add 11.0.1.55"
world_spawn inet dnsmasq-nolog "$WORLD_DNSMASQ" --keep-in-foreground \
	--conf-file=/dev/null --no-resolv --no-hosts --user=root \
	--bind-interfaces --listen-address=11.0.1.55 --pid-file="$D/dnsmasq-nolog.pid" \
	--local=/#/ --host-record=echo.world.test,11.0.2.10,2600:1::10 ||
	fail "the second dnsmasq did not start"
NPID=$WORLD_LAST_PID
wait_for "dnsmasq on 11.0.1.53" 50 ask "$WORLD_BRK" 11.0.1.53 53 11.0.0.2 || fail "dnsmasq does not answer"
wait_for "dnsmasq on 11.0.1.55" 50 ask "$WORLD_BRK" 11.0.1.55 53 11.0.0.2 || fail "dnsmasq-nolog does not answer"
DPID=$(cat "$D/dnsmasq.pid" 2>/dev/null)
[ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null || fail "no pid for the world's dnsmasq"
note "world $WORLD_PREFIX up: sluiced (pids $PID_audit, $PID_noaudit) with $NSB sandboxes each, dnsmasq (pid $DPID), dnsmasq-nolog (pid $NPID)"

# cpu_ticks PID: user + system clock ticks so far.
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
HZ=$(getconf CLK_TCK)

# rcvbuf_drops NS: datagrams the kernel dropped in NS for a full socket
# receive buffer so far (Udp RcvbufErrors).
rcvbuf_drops() {
	ip netns exec "$1" awk '$1 == "Udp:" { if (++n == 1) { for (i = 2; i <= NF; i++) h[i] = $i }
		else for (i = 2; i <= NF; i++) if (h[i] == "RcvbufErrors") print $i }' /proc/net/snmp
}

# run TARGET: one measurement; prints "qps noerror_qps refused lost p50 p99
# srv_us_per_q tool_cpu% srv_drops".
run() {
	local t=$1 ns sns server src step pid c0 c1 d0 d1 line out tf
	case $t in
	sluiced) ns=$C sns=$WORLD_BRK server=$GW:$PORT src=$FIRST step=1 pid=$PID_audit ;;
	sluiced-noaudit) ns=$C sns=$WORLD_BRK server=$GW:$((PORT + 1)) src=$FIRST step=1 pid=$PID_noaudit ;;
	dnsmasq) ns=$WORLD_BRK sns=$WORLD_INET server=11.0.1.53 src=11.0.0.2 step=0 pid=$DPID ;;
	dnsmasq-nolog) ns=$WORLD_BRK sns=$WORLD_INET server=11.0.1.55 src=11.0.0.2 step=0 pid=$NPID ;;
	esac
	out=$D/load-$t.out
	tf=$D/load-$t.time
	d0=$(rcvbuf_drops "$sns")
	c0=$(cpu_ticks "$pid")
	{
		TIMEFORMAT='%R %U %S'
		time timeout -k 5 $((SECS + 30)) ip netns exec "$ns" "$LOAD" -s "$server" -b "$src" \
			-n "$NSB" -i "$step" -w 1 -d "$SECS" -q "$NAME" >"$out"
	} 2>"$tf"
	c1=$(cpu_ticks "$pid")
	d1=$(rcvbuf_drops "$sns")
	line=$(grep '^sent ' "$out")
	[ -n "$line" ] || { note "$t: no result: $(tail -n 3 "$out" "$tf" | tr '\n' ' ')"; echo "nan nan nan nan nan nan nan nan nan"; return; }
	awk -v c="$((c1 - c0))" -v hz="$HZ" -v tm="$(tail -n 1 "$tf")" -v dr="$((d1 - d0))" '{
		for (i = 1; i < NF; i += 2) v[$i] = $(i + 1)
		split(tm, T, " ")
		us = v["answered"] > 0 ? c / hz * 1e6 / v["answered"] : 0
		printf "%d %d %d %d %d %d %.2f %.0f %d\n", v["qps"], v["noerror_qps"], v["refused"], v["lost"],
			v["p50_us"], v["p99_us"], us, (T[1] > 0 ? (T[2] + T[3]) / T[1] * 100 : 0), dr }' <<<"$line"
}

median() { tr ' ' '\n' | grep -v -e '^$' -e nan | sort -g | awk '{v[NR] = $1} END {
	if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
	else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A R
TARGETS="sluiced sluiced-noaudit dnsmasq dnsmasq-nolog"
note "measuring: $RUNS x ${SECS}s per target, $NSB sockets, one query in flight each"
for ((r = 1; r <= RUNS; r++)); do
	for t in $TARGETS; do
		res=$(run "$t")
		R[$t]="${R[$t]:-}|$res"
		note "  run $r $t: $res (qps noerror_qps refused lost p50us p99us srv-us/q tool-cpu% srv-drops)"
	done
done
for p in "$PID_audit" "$PID_noaudit"; do
	kill -0 "$p" 2>/dev/null || note "PROBLEM: sluiced (pid $p) died"
done
# Rate-limit reports are expected now and then (see the refused column).
n_warn=$(cat "$D"/sluiced-*.log 2>/dev/null | grep -i -E 'err|warn' | grep -v -c 'queries/s')

# col TARGET N: the median of field N over the runs.
col() { tr '|' '\n' <<<"${R[$1]}" | awk -v n="$2" 'NF { print $n }' | median; }
{
	echo "sluice DNS bench, $(date -u '+%Y-%m-%d %H:%M UTC'), sluice $(git -C "$REPO" describe --always --dirty 2>/dev/null)"
	echo "load average when the bench started: $LOAD0"
	echo "machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), kernel $(uname -r);"
	echo "  the load tool and the server share these CPUs."
	echo "load: dnsload (C, one thread), $NSB UDP sockets (sluiced: one per sandbox address),"
	echo "  one A query for $NAME in flight per socket, ${SECS}s, median of $RUNS runs."
	echo "sluiced: workers 2, per-sandbox limit 500 q/s (burst 1000), so $NSB sandboxes allow $((NSB * 500)) q/s."
	echo "dnsmasq $("$WORLD_DNSMASQ" --version | awk 'NR == 1 { print $3 }'): one process; 'dnsmasq' logs every query to a file (the world's setup), 'dnsmasq-nolog' does not."
	echo
	printf '   %-16s %9s %9s %8s %6s %7s %7s %9s %9s %9s\n' target "q/s" "NOERROR/s" refused lost "p50 us" "p99 us" "srv us/q" "tool CPU" "srv drops"
	for t in sluiced sluiced-noaudit dnsmasq dnsmasq-nolog; do
		printf '   %-16s %9s %9s %8s %6s %7s %7s %9s %8s%% %9s\n' "$t" "$(col "$t" 1)" "$(col "$t" 2)" \
			"$(col "$t" 3)" "$(col "$t" 4)" "$(col "$t" 5)" "$(col "$t" 6)" "$(col "$t" 7)" "$(col "$t" 8)" "$(col "$t" 9)"
	done
	s=$(col sluiced 2)
	m=$(col dnsmasq 2)
	mn=$(col dnsmasq-nolog 2)
	awk -v s="$s" -v m="$m" -v mn="$mn" 'BEGIN {
		if (m + 0 > 0) printf "   sluiced / dnsmasq (both logging every query): %.2f\n", s / m
		if (mn + 0 > 0) printf "   sluiced / dnsmasq-nolog: %.2f\n", s / mn }'
	echo "   srv us/q: the server's CPU time (user + system) per answered query."
	echo "   tool CPU near 100%: the load tool, not the server, set the pace."
	echo "   srv drops: queries the kernel dropped at the server's full receive buffer (lost: unanswered after 1 s)."
	echo "   each column is its own median over the runs."
	echo "   sluiced warning/error lines other than rate-limit reports: ${n_warn:-0}"
	echo "   refused: a sandbox that a fast socket drove past 500 q/s; NOERROR/s is the figure that counts."
} >"$RESULTS.tmp"
mv "$RESULTS.tmp" "$RESULTS"
cat "$RESULTS"
note "results written to $RESULTS"
exit 0
