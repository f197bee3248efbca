#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh - `make bench`: sluiced's explicit proxy against a routed path and squid, in the test world.
#
#   SLUICE_BIN=DIR bash tests/bench/run.sh
#
# Theory of operation: one test world (tests/world/world.sh) plus one client
# namespace c1 (10.99.0.2, gateway 10.99.0.1 in the broker namespace). In
# the broker namespace run sluiced (:3128, workers: 2) and squid (:3130, one
# process, caching off, its own config, pid and logs in WORLD_DIR); in the
# inet namespace blast (tests/bench/blast.c) serves 11.0.2.20:8081
# (other.world.test). IPv4 forwarding is switched on in the broker namespace
# only (never in the root namespace), so c1 also reaches 11.0.2.20 by plain
# routing: that is the "direct" baseline. Three measurements:
#
#   1. CONNECT tunnel throughput: curl downloads BENCH_BYTES (4 GiB) direct,
#      through sluiced and through squid (--proxytunnel), BENCH_RUNS (5)
#      times each, interleaved; the median counts; ratio to direct.
#   2. Small requests, keep-alive: wrk (-t1 -c1, -t2 -c50, BENCH_DURATION
#      (10) seconds each, after a short warm-up) against the three; wrk.lua
#      sends absolute-form targets to the proxies; ratio to squid.
#   3. Memory per idle tunnel: VmRSS of the proxy before, with BENCH_TUNNELS
#      (1000) idle CONNECT tunnels open (tunnels.py; each carried one GET),
#      and after they closed; twice, so that a second round shows whether the
#      first round's memory is reused or leaked.
#
# The report goes to stdout and to build/bench/results.txt; the daemons' logs,
# wrk's output and an audit summary stay in build/bench/logs/. A target missed is
# printed MISS but does not fail the run: this is a measurement. The exit
# status is non-zero only when the bench itself could not run (world, broker,
# squid or blast did not come up). Everything runs inside world namespaces;
# this shell itself runs in an empty network namespace (like the integration
# tests), so nothing it forgets to place reaches the machine's network.
set -u
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD

. tests/world/isolate.sh "$REPO/tests/bench/run.sh" "$@"

. tests/world/world.sh
. tests/world/broker.sh

BIN=${SLUICE_BIN:-$REPO/bin}
BYTES=${BENCH_BYTES:-4294967296}
RUNS=${BENCH_RUNS:-5}
DUR=${BENCH_DURATION:-10}
TUNNELS=${BENCH_TUNNELS:-1000}
OUT=$REPO/build/bench
RESULTS=$OUT/results.txt
BLAST=$OUT/blast
HERE=$REPO/tests/bench

GW=10.99.0.1
CADDR=10.99.0.2
SRV=11.0.2.20
SRVNAME=other.world.test
SRVPORT=8081
SPORT=3128 # sluiced
QPORT=3130 # squid

note() { echo "bench: $*" >&2; }
fail() {
	note "$*"
	exit 1
}

mkdir -p "$OUT" || exit 1
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
note "compiling blast"
cc -std=gnu11 -O2 -Wall -Wextra -Werror -Wshadow -Wformat=2 -D_GNU_SOURCE -pthread \
	-o "$BLAST" "$HERE/blast.c" || fail "blast did not compile"
for t in "$BIN/sluiced" "$BIN/sluice" /usr/sbin/squid /usr/bin/wrk /usr/bin/curl; do
	[ -x "$t" ] || fail "missing $t (make bench installs squid and wrk and builds sluiced)"
done

# 1000 tunnels: the client holds 1000 sockets, squid 2000, blast 2000;
# sluiced raises its own soft limit to the hard one.
ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)"

note "building the test world"
world_up || fail "the test world did not come up"
LOGS=$OUT/logs
rm -rf "$LOGS"
# save_logs: keep what explains a bad figure after the world is gone: the
# daemons' logs, wrk's and the tunnel clients' output, and the audit log
# summed up by decision, reason and status (plus its first 200 lines that
# are not a plain allowed 200).
save_logs() {
	[ -n "${WORLD_DIR:-}" ] && [ -d "$WORLD_DIR" ] || return 0
	mkdir -p "$LOGS" || return 0
	cp "$WORLD_DIR"/sluiced.log "$WORLD_DIR"/squid.log "$WORLD_DIR"/blast.log \
		"$WORLD_DIR"/wrk-*.out "$WORLD_DIR"/tun-*.log "$WORLD_DIR"/squid/cache.log \
		"$LOGS"/ 2>/dev/null
	[ -f "$WORLD_DIR/audit.log" ] && timeout 60 python3 - "$WORLD_DIR/audit.log" \
		"$LOGS/audit-summary.txt" "$LOGS/audit-unusual.log" <<'PY'
import collections, json, sys
counts = collections.Counter()
unusual = []
with open(sys.argv[1], errors="replace") as f:
    for line in f:
        try:
            e = json.loads(line)
        except ValueError:
            counts[("unparsable",)] += 1
            continue
        k = (e.get("proto"), e.get("decision"), e.get("reason"), e.get("status"))
        counts[k] += 1
        if (e.get("reason") != "allowed" or e.get("status") not in (None, 200)) and len(unusual) < 200:
            unusual.append(line)
with open(sys.argv[2], "w") as o:
    for k, n in counts.most_common():
        o.write("%8d  proto=%s decision=%s reason=%s status=%s\n" % ((n,) + tuple(k) + (None,) * (4 - len(k))))
with open(sys.argv[3], "w") as o:
    o.writelines(unusual)
PY
}
trap 'save_logs; world_down' EXIT
D=$WORLD_DIR
C=$WORLD_PREFIX-c1
world_add_client c1 "$CADDR/30" "$GW" || fail "client c1 did not come up"
# The direct path: c1 -> broker namespace -> inet by routing. Only this
# world's broker namespace forwards; the inet namespace already routes its
# replies back via the broker namespace.
brk_exec sysctl -qw net.ipv4.ip_forward=1 || fail "cannot enable forwarding in $WORLD_BRK"

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
tcp_open() { timeout 1 ip netns exec "$C" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2"; }

# --- servers ----------------------------------------------------------------
world_spawn inet blast "$BLAST" -t 2 -r "$D/ready.blast" "$SRV:$SRVPORT" ||
	fail "blast did not start"
wait_for "blast" 50 test -s "$D/ready.blast" || fail "blast did not come up"
wait_for "the routed path to blast" 50 tcp_open "$SRV" "$SRVPORT" ||
	fail "c1 does not reach $SRV:$SRVPORT by routing"

broker_config
cat >"$D/bench-policy.yaml" <<EOF
version: 1
egress:
  allow:
    - host: $SRVNAME
      ports: [$SRVPORT]
limits: { connections: 2000 }
EOF
broker_start || fail "sluiced did not come up"
sl register c1 --addr "$CADDR" --policy "$D/bench-policy.yaml" >/dev/null || fail "sluice register failed"
wait_for "sluiced on $GW:$SPORT" 50 tcp_open "$GW" "$SPORT" || fail "sluiced does not listen"

SQ=$D/squid
mkdir -p "$SQ" && chown proxy:proxy "$SQ" || fail "cannot make $SQ"
cat >"$SQ/squid.conf" <<EOF
# A plain forward proxy for the bench: no caching, everything allowed (it is
# reachable only from inside this test world).
http_port $GW:$QPORT
http_access allow all
cache deny all
cache_mem 0 MB
maximum_object_size_in_memory 0 KB
pid_filename $SQ/squid.pid
cache_log $SQ/cache.log
access_log stdio:$SQ/access.log
cache_store_log none
coredump_dir $SQ
netdb_filename none
pinger_enable off
icp_port 0
htcp_port 0
dns_nameservers 11.0.1.53
hosts_file none
visible_hostname bench-squid
max_filedescriptors 16384
shutdown_lifetime 0 seconds
cache_effective_user proxy
EOF
world_spawn brk squid /usr/sbin/squid -N -f "$SQ/squid.conf" || fail "squid did not start"
QPID=$WORLD_LAST_PID
wait_for "squid on $GW:$QPORT" 100 tcp_open "$GW" "$QPORT" || {
	tail -n 20 "$SQ/cache.log" "$D/squid.log" >&2 2>/dev/null
	fail "squid did not come up"
}

for p in "direct" "-p -x http://$GW:$SPORT" "-p -x http://$GW:$QPORT"; do
	if [ "$p" = direct ]; then u=http://$SRV:$SRVPORT/bytes/5; p=; else u=http://$SRVNAME:$SRVPORT/bytes/5; fi
	# shellcheck disable=SC2086
	got=$(timeout 20 ip netns exec "$C" curl -sS -m 10 $p "$u" 2>&1)
	[ "$got" = abcde ] || fail "smoke test ${p:-direct} $u: got \`$got\`"
done
note "world $WORLD_PREFIX up: blast, sluiced (pid $BROKER_PID), squid (pid $QPID); smoke tests passed"

# --- helpers ------------------------------------------------------------------
median() { tr ' ' '\n' | grep -v -e '^$' -e nan | sort -g | awk '{v[NR] = $1} END {
	if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
	else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || b + 0 == 0) print "n/a";
	else printf "%.2f\n", a / b }'; }
# verdict VALUE OP LIMIT: PASS or MISS (n/a when there is no value)
verdict() { awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
	if (v == "n/a" || v == "nan" || v == "") { print "MISS (no value)"; exit }
	ok = (op == ">=") ? v + 0 >= l + 0 : v + 0 < l + 0; print ok ? "PASS" : "MISS" }'; }
alive() { kill -0 "$1" 2>/dev/null; }
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
# Kernel memory is not in VmRSS; the system-wide slab is a rough view of it.
slab() { awk '/^Slab:/ { print $2 }' /proc/meminfo; }
# cpu_ticks PID: user + system clock ticks of the whole process (all threads).
cpu_ticks() { local st; st=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
	set -- ${st##*) }; echo $((${12} + ${13})); }
HZ=$(getconf CLK_TCK)
nfds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
PROBLEMS=$D/problems
: >"$PROBLEMS"
problem() { echo "$*" >>"$PROBLEMS"; note "PROBLEM: $*"; }

# --- 1. CONNECT tunnel throughput ------------------------------------------------
# curl_gbps NAME PID CURL-ARGS... URL: one download of BYTES; prints "Gbit/s
# CPU-seconds-per-GiB" (the CPU time of proxy PID; "-" for none), or "nan -"
# after recording what went wrong.
curl_gbps() {
	local name=$1 pid=$2 out rc code conn size secs t0=0 t1=0
	shift 2
	[ "$pid" != - ] && t0=$(cpu_ticks "$pid")
	out=$(timeout -k 5 300 ip netns exec "$C" curl -sS -m 240 -o /dev/null \
		-w '%{http_code} %{http_connect} %{size_download} %{time_total}' "$@" 2>"$D/curl.err")
	rc=$?
	[ "$pid" != - ] && t1=$(cpu_ticks "$pid")
	read -r code conn size secs <<<"$out"
	if [ $rc != 0 ] || [ "$code" != 200 ] || [ "$size" != "$BYTES" ]; then
		problem "throughput $name: curl exit $rc, status ${code:-?}, CONNECT ${conn:-?}," \
			"${size:-0} of $BYTES bytes; curl said: $(tr '\n' ' ' <"$D/curl.err")"
		echo nan -
		return
	fi
	awk -v b="$size" -v s="$secs" -v p="$pid" -v t="$((t1 - t0))" -v hz="$HZ" 'BEGIN {
		printf "%.2f ", b * 8 / s / 1e9
		if (p == "-") print "-"; else printf "%.2f\n", t / hz / (b / 2^30) }'
}

note "1. throughput: $RUNS x $((BYTES >> 20)) MiB per path"
tp_direct="" tp_sluiced="" tp_squid="" cpu_sluiced="" cpu_squid=""
for ((r = 1; r <= RUNS; r++)); do
	read -r g _ <<<"$(curl_gbps direct - "http://$SRV:$SRVPORT/bytes/$BYTES")"
	tp_direct="$tp_direct $g"
	read -r g cs <<<"$(curl_gbps sluiced "$BROKER_PID" -p -x "http://$GW:$SPORT" "http://$SRVNAME:$SRVPORT/bytes/$BYTES")"
	tp_sluiced="$tp_sluiced $g" cpu_sluiced="$cpu_sluiced $cs"
	read -r g cq <<<"$(curl_gbps squid "$QPID" -p -x "http://$GW:$QPORT" "http://$SRVNAME:$SRVPORT/bytes/$BYTES")"
	tp_squid="$tp_squid $g" cpu_squid="$cpu_squid $cq"
	note "  run $r: direct ${tp_direct##* }, sluiced ${tp_sluiced##* } ($cs CPU s/GiB)," \
		"squid ${tp_squid##* } ($cq CPU s/GiB) Gbit/s"
done
md_direct=$(echo "$tp_direct" | median)
md_sluiced=$(echo "$tp_sluiced" | median)
md_squid=$(echo "$tp_squid" | median)
mc_sluiced=$(echo "$cpu_sluiced" | tr - ' ' | median)
mc_squid=$(echo "$cpu_squid" | tr - ' ' | median)
alive "$BROKER_PID" || problem "sluiced (pid $BROKER_PID) died during the throughput test"

# --- 2. small requests ---------------------------------------------------------------
# wrk_run NAME PID CONC URL TARGET: prints "rps p50_ms p99_ms errors
# cpu_us_per_request" (the CPU time of proxy PID; "-" for none); the whole wrk
# output is kept in $D/wrk-NAME-CONC.out.
wrk_run() {
	local name=$1 pid=$2 conc=$3 url=$4 target=$5 thr=2 out line errs rc t0=0 t1=0
	[ "$conc" -lt 2 ] && thr=1 # wrk needs connections >= threads
	out=$D/wrk-$name-$conc.out
	[ "$pid" != - ] && t0=$(cpu_ticks "$pid")
	timeout -k 5 $((DUR + 60)) ip netns exec "$C" env BENCH_TARGET="$target" \
		wrk -t"$thr" -c"$conc" -d"${DUR}s" --timeout 5s --latency \
		-s "$HERE/wrk.lua" "$url" >"$out" 2>&1
	rc=$?
	[ "$pid" != - ] && t1=$(cpu_ticks "$pid")
	line=$(grep '^WRKRESULT' "$out" | tail -n 1)
	if [ $rc != 0 ] || [ -z "$line" ]; then
		problem "wrk $name c=$conc: exit $rc: $(tail -n 5 "$out" | tr '\n' ' ')"
		echo "nan nan nan n/a -"
		return
	fi
	local requests=0 rps=0 p50_us=0 p99_us=0 connect=0 read=0 write=0 status=0 timeout=0 kv
	for kv in ${line#WRKRESULT }; do
		case ${kv%%=*} in
		requests | rps | p50_us | p99_us | connect | read | write | status | timeout)
			printf -v "${kv%%=*}" '%s' "${kv#*=}" ;;
		esac
	done
	errs=$((connect + read + write + status + timeout))
	[ "$errs" -gt 0 ] && problem "wrk $name c=$conc: $errs errors of $requests requests" \
		"(connect $connect, read $read, write $write, status $status, timeout $timeout)"
	awk -v r="$rps" -v a="$p50_us" -v b="$p99_us" -v e="$errs" -v n="$requests" \
		-v p="$pid" -v t="$((t1 - t0))" -v hz="$HZ" 'BEGIN {
		printf "%.0f %.3f %.3f %d ", r, a / 1000, b / 1000, e
		if (p == "-" || n == 0) print "-"; else printf "%.1f\n", t / hz * 1e6 / n }'
}

declare -A RATE
note "2. small requests: wrk ${DUR}s at concurrency 1 and 50"
for name in direct sluiced squid; do
	case $name in
	direct) url=http://$SRV:$SRVPORT/x target="" pid=- ;;
	sluiced) url=http://$GW:$SPORT target=http://$SRVNAME:$SRVPORT/x pid=$BROKER_PID ;;
	squid) url=http://$GW:$QPORT target=http://$SRVNAME:$SRVPORT/x pid=$QPID ;;
	esac
	# Warm-up (DNS caches, connection pools, page faults); not reported.
	timeout -k 5 30 ip netns exec "$C" env BENCH_TARGET="$target" \
		wrk -t2 -c50 -d2s -s "$HERE/wrk.lua" "$url" >"$D/wrk-$name-warmup.out" 2>&1
	for conc in 1 50; do
		RATE[$name,$conc]=$(wrk_run "$name" "$pid" "$conc" "$url" "$target")
		note "  $name c=$conc: ${RATE[$name,$conc]} (req/s p50ms p99ms errors proxy-CPU-us/req)"
	done
done
alive "$BROKER_PID" || problem "sluiced (pid $BROKER_PID) died during the request-rate test"

# --- 3. memory per idle tunnel -------------------------------------------------------------
# mem_round NAME PID PORT ROUND: opens TUNNELS tunnels through PORT, samples
# PID's VmRSS and fds; sets M_BEFORE M_OPEN M_AFTER F_BEFORE F_OPEN M_OK.
mem_round() {
	local name=$1 pid=$2 port=$3 round=$4 ready=$D/tun-$1-$4.ready rel=$D/tun-$1-$4.release
	local hp n est
	rm -f "$ready" "$rel"
	sleep 1
	M_BEFORE=$(rss "$pid")
	F_BEFORE=$(nfds "$pid")
	K_BEFORE=$(slab)
	ip netns exec "$C" /usr/bin/python3 "$HERE/tunnels.py" "$GW" "$port" "$SRVNAME" "$SRVPORT" \
		"$TUNNELS" --ready "$ready" --release "$rel" --hold-max 120 >"$D/tun-$name-$round.log" 2>&1 &
	hp=$!
	world_track_pid "$hp" "tunnels-$name-$round"
	wait_for "$name round $round: $TUNNELS tunnels" 1500 test -s "$ready"
	sleep 1 # let the proxy settle
	M_OPEN=$(rss "$pid")
	F_OPEN=$(nfds "$pid")
	K_OPEN=$(slab)
	M_OK=$(python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); print(d["established"], d["get_ok"], json.dumps(d["errors"], separators=(",", ":")))' "$ready" 2>/dev/null)
	touch "$rel"
	for ((n = 0; n < 300; n++)); do alive "$hp" || break; sleep 0.1; done
	alive "$hp" && kill -KILL "$hp"
	wait "$hp" 2>/dev/null
	# The proxy closes its side as the EOFs arrive: wait (bounded) until
	# its descriptor count is back to where it was.
	for ((n = 0; n < 100; n++)); do [ "$(nfds "$pid")" -le "$F_BEFORE" ] && break; sleep 0.1; done
	sleep 1
	M_AFTER=$(rss "$pid")
	F_AFTER=$(nfds "$pid")
	K_AFTER=$(slab)
	read -r est n _ <<<"$M_OK"
	if [ "${est:-0}" != "$TUNNELS" ] || [ "${n:-0}" != "$TUNNELS" ]; then
		problem "memory $name round $round: $TUNNELS tunnels wanted, ${est:-0} established," \
			"${n:-0} carried their GET; errors ${M_OK#* * }"
	fi
	[ "$F_AFTER" -gt "$F_BEFORE" ] &&
		problem "memory $name round $round: $F_AFTER fds after closing, $F_BEFORE before"
	note "  $name round $round: RSS $M_BEFORE -> $M_OPEN -> $M_AFTER KiB," \
		"fds $F_BEFORE -> $F_OPEN -> $F_AFTER, system slab $K_BEFORE -> $K_OPEN -> $K_AFTER KiB," \
		"established/GET ok: ${M_OK% *}"
}

declare -A MEM
note "3. memory: $TUNNELS idle tunnels, two rounds per proxy"
for name in sluiced squid; do
	if [ $name = sluiced ]; then pid=$BROKER_PID port=$SPORT; else pid=$QPID port=$QPORT; fi
	for round in 1 2; do
		mem_round "$name" "$pid" "$port" "$round"
		MEM[$name,$round]="$M_BEFORE $M_OPEN $M_AFTER $F_BEFORE $F_OPEN $K_BEFORE $K_OPEN"
	done
done

# --- health -------------------------------------------------------------------------------
alive "$BROKER_PID" || problem "sluiced (pid $BROKER_PID) is not running at the end; its log: $(tail -n 5 "$D/sluiced.log" | tr '\n' ' ')"
alive "$QPID" || problem "squid (pid $QPID) is not running at the end"
n_err=$(grep -c -i -E 'error|err:|warn|fatal|abort' "$D/sluiced.log" 2>/dev/null)
if [ "${n_err:-0}" -gt 0 ]; then
	problem "sluiced logged $n_err error/warning lines; the first: $(grep -i -E 'error|err:|warn|fatal|abort' \
		"$D/sluiced.log" | head -n 5 | tr '\n' '|')"
fi

# --- report ------------------------------------------------------------------------------
# per_tunnel FROM TO: (TO - FROM) / TUNNELS, one decimal.
per_tunnel() { awk -v a="$1" -v b="$2" -v n="$TUNNELS" 'BEGIN { printf "%.1f\n", (b - a) / n }'; }
{
	echo "sluice bench, $(date -u '+%Y-%m-%d %H:%M UTC'), sluice $(git -C "$REPO" describe --always --dirty 2>/dev/null)"
	echo "machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), kernel $(uname -r)," \
		"load average $LOAD0 at the start."
	echo "  NOTE: client (curl, wrk), proxy and server (blast) share these $(nproc) CPUs; each proxy competes with"
	echo "  its own load, and other work on the machine skews every figure."
	echo "sluiced: workers 2, audit log on. squid $(/usr/sbin/squid -v | awk 'NR == 1 { print $4 }'): one process (its default)," \
		"caching off, access log on."
	echo "server: blast (tests/bench/blast.c: epoll, 2 threads, sendfile from a memfd) on $SRV:$SRVPORT ($SRVNAME), inet namespace."
	echo "direct: the client namespace routed through the broker namespace (ip_forward on there only), no proxy."
	echo
	echo "1. CONNECT tunnel throughput: curl --proxytunnel download of $((BYTES >> 20)) MiB, median of $RUNS runs (interleaved)"
	printf '   %-8s %7s  %-34s %9s %12s  %s\n' path Gbit/s "runs (Gbit/s)" "vs direct" "CPU s/GiB" target
	printf '   %-8s %7s  %-34s %9s %12s\n' direct "$md_direct" "$(echo $tp_direct)" 1.00 "-"
	r=$(ratio "$md_sluiced" "$md_direct")
	printf '   %-8s %7s  %-34s %9s %12s  >= 0.85 of direct: %s\n' sluiced "$md_sluiced" "$(echo $tp_sluiced)" "$r" \
		"$mc_sluiced" "$(verdict "$r" '>=' 0.85)"
	printf '   %-8s %7s  %-34s %9s %12s\n' squid "$md_squid" "$(echo $tp_squid)" "$(ratio "$md_squid" "$md_direct")" "$mc_squid"
	echo "   (CPU s/GiB: user+system time of the proxy process per GiB carried, median)"
	echo
	echo "2. Small requests over keep-alive (2-byte answers), wrk ${DUR}s per row; c=1: -t1 -c1 (wrk needs threads <= connections),"
	echo "   c=50: -t2 -c50; the proxies get absolute-form targets (tests/bench/wrk.lua)"
	printf '   %-8s %4s %9s %9s %9s %7s %9s %14s\n' path conc "req/s" "p50 ms" "p99 ms" errors "vs squid" "proxy CPU us/req"
	for conc in 1 50; do
		read -r q_rps _ <<<"${RATE[squid,$conc]}"
		for name in direct sluiced squid; do
			read -r rps p50 p99 errs cpu <<<"${RATE[$name,$conc]}"
			printf '   %-8s %4s %9s %9s %9s %7s %9s %14s\n' "$name" "$conc" "$rps" "$p50" "$p99" "$errs" \
				"$(ratio "$rps" "$q_rps")" "$cpu"
		done
	done
	read -r s_rps _ <<<"${RATE[sluiced,50]}"
	read -r q_rps _ <<<"${RATE[squid,50]}"
	r=$(ratio "$s_rps" "$q_rps")
	echo "   target: sluiced >= 3x squid's rate at c=50: ${r}x: $(verdict "$r" '>=' 3)"
	read -r _ _ s_p99 _ <<<"${RATE[sluiced,1]}"
	echo "   target: sluiced p99 < 1 ms at c=1: $s_p99 ms: $(verdict "$s_p99" '<' 1)"
	echo
	echo "3. Memory per idle CONNECT tunnel: $TUNNELS tunnels, each carried one GET and then idled; twice per proxy"
	echo "   (RSS = the proxy's VmRSS in KiB: before opening, with all open, after all closed)"
	printf '   %-8s %5s %8s %8s %8s %10s %12s %10s %10s\n' proxy round before open closed "KiB/tunnel" "held KiB/tun" "fds/tunnel" "slab/tun*"
	for name in sluiced squid; do
		for round in 1 2; do
			read -r mb mo ma fb fo kb ko <<<"${MEM[$name,$round]}"
			printf '   %-8s %5s %8s %8s %8s %10s %12s %10s %10s\n' "$name" "$round" "$mb" "$mo" "$ma" \
				"$(per_tunnel "$mb" "$mo")" "$(per_tunnel "$mb" "$ma")" "$(per_tunnel "$fb" "$fo")" \
				"$(per_tunnel "$kb" "$ko")"
		done
	done
	echo "   * slab/tun: growth of the system-wide kernel slab (KiB) per tunnel while open: the sockets at all three hops"
	echo "     (client, proxy, server) plus, for sluiced, its two splice pipes per tunnel; rough (other work on the"
	echo "     machine shows up in it). VmRSS counts user-space memory only."
	read -r mb mo ma _ <<<"${MEM[sluiced,1]}"
	read -r _ o2 _ <<<"${MEM[sluiced,2]}"
	per=$(per_tunnel "$mb" "$mo")
	echo "   target: sluiced < 10 KiB per idle tunnel (VmRSS): $per KiB: $(verdict "$per" '<' 10)"
	# Returned: after the close, at most 10% of what the tunnels took stays
	# held, or under 1 KiB per tunnel (a tenth of the budget), and a second
	# round does not grow the peak by more than that either (reused, not leaked).
	v=$(awk -v a="$mb" -v b="$mo" -v c="$ma" -v o2="$o2" -v n="$TUNNELS" 'BEGIN {
		g = b - a; k = c - a; if (k < 0) k = 0; r2 = o2 - b
		ok = (k <= g * 0.1 || k / n < 1) && r2 / n < 1
		printf "%d of %d KiB still held after close (%.2f KiB/tunnel), round 2 peak %+d KiB over round 1: %s\n",
			k, g, k / n, r2, ok ? "PASS" : "MISS" }')
	echo "   target: memory returned when tunnels close: $v"
	echo
	if [ -s "$PROBLEMS" ]; then
		echo "problems seen during the run (details in build/bench/logs/):"
		sed 's/^/   - /' "$PROBLEMS"
	else
		echo "problems seen during the run: none (no curl or wrk errors, every tunnel answered 200, sluiced and squid alive)"
	fi
} >"$RESULTS.tmp"
mv "$RESULTS.tmp" "$RESULTS"
cat "$RESULTS"
note "results written to $RESULTS; logs kept in $LOGS"
exit 0
