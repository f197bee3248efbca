#!/bin/bash
# SPDX-License-Identifier: MIT
# run.sh - runs the integration tests (tests/integration/test_*.sh) and sums their results.
#
#   SLUICE_BIN=DIR bash tests/integration/run.sh [test_NAME.sh ...]
#
# SLUICE_BIN names the directory holding bin/sluiced and bin/sluice; it is
# passed on to every test. Each test runs under `timeout 600`, its own shell
# in an empty network namespace (unshare --net, lo up: see lib.sh).
# SLUICE_TEST_JOBS=N (default 1) runs up to N at once (see below). A test's result is its last
# "N passed, N failed" line; a test that has no such line, or that exits
# non-zero while claiming no failure, counts one more failure. The last line
# is "integration: N passed, N failed"; the exit status is 1 if any failed.
#
# Every broker's audit log is collected as the tests end (world_down, in
# tests/world/world.sh) into SLUICE_AUDIT_COLLECT (a directory made here
# unless given, then kept), and after the tests every collected line is
# validated against docs/audit.schema.json (audit_schema.py, which first
# checks that it refuses known-bad lines); its result counts like a test's.
# A run of every test must validate some line; a run of named tests that
# started no broker validates none and says so.

set -u
here=$(cd "$(dirname "$0")" && pwd)
# Passed on as given (exported); not defaulted here, so a test's own default applies.
[ -n "${SLUICE_BIN:-}" ] && export SLUICE_BIN

if [ "$(id -u)" != 0 ]; then
	echo "integration: needs root (network namespaces)" >&2
	echo "integration: 0 passed, 1 failed"
	exit 1
fi

tests=()
if [ $# -gt 0 ]; then
	for t in "$@"; do
		[ -f "$t" ] || t=$here/$(basename "$t")
		tests+=("$t")
	done
else
	for t in "$here"/test_*.sh; do
		[ -e "$t" ] && tests+=("$t")
	done
fi

log=$(mktemp /tmp/sluice-integration.XXXXXX) || exit 1
collect_own=''
if [ -z "${SLUICE_AUDIT_COLLECT:-}" ]; then
	SLUICE_AUDIT_COLLECT=$(mktemp -d /tmp/sluice-audit.XXXXXX) || exit 1
	collect_own=1
fi
export SLUICE_AUDIT_COLLECT
pass=0
fail=0
# SLUICE_TEST_JOBS=N runs up to N scripts at once (make check: 2). Each has
# its own namespaces and prefix; a script that uses something of the whole
# machine (a runtime's state, /etc/sluice, a machine-wide listing, a
# time-bound check that load could upset) says `# sluice-test: alone` in its
# first 40 lines and runs with no other beside it. With one job a script's
# output is shown as it comes; with more, each script's output is shown
# whole when it ends, in the order they end.
jobs=${SLUICE_TEST_JOBS:-1}
case $jobs in '' | *[!0-9]* | 0) jobs=1 ;; esac
logdir=$(mktemp -d /tmp/sluice-integration-logs.XXXXXX) || exit 1
trap 'rm -f "$log"; rm -rf "$logdir"; [ -n "$collect_own" ] && rm -rf "$SLUICE_AUDIT_COLLECT"' EXIT
declare -A name_of start_of
running=()

# tally NAME RC LOG SECONDS: adds a script's result line to the sums.
tally() {
	local name=$1 rc=$2 lg=$3 secs=$4 line p f
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$lg" | tail -n 1)
	if [ -z "$line" ]; then
		echo "# $name: exited $rc without a result line after $secs s: counted as 1 failed"
		fail=$((fail + 1))
		return
	fi
	read -r p _ f _ <<<"$line"
	pass=$((pass + p))
	fail=$((fail + f))
	echo "# $name: $p passed, $f failed in $secs s"
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		echo "# $name: exited $rc after reporting no failure: counted as 1 failed"
		fail=$((fail + 1))
	fi
}

# launch T LOG: starts script T in the background (its pid in $!).
launch() {
	# Each test's own shell runs in an empty network namespace (see
	# lib.sh): what it forgets to run inside the world goes nowhere.
	SLUICE_TEST_ISOLATED=1 timeout -k 60 600 unshare --net -- \
		bash -c 'ip link set lo up && exec bash "$1"' t_isolated "$1" \
		>"$2" 2>&1 </dev/null &
}

# reap_one: waits for one running script to end, shows its output, sums it.
reap_one() {
	local pid='' rc i keep=()
	wait -n -p pid "${running[@]}"
	rc=$?
	if [ -z "$pid" ]; then
		# Not to happen: count what was running as failed, go on.
		for i in "${running[@]}"; do
			echo "# ${name_of[$i]}: lost track of it (wait: $rc): counted as 1 failed"
			fail=$((fail + 1))
		done
		running=()
		return 1
	fi
	for i in "${running[@]}"; do
		[ "$i" = "$pid" ] || keep+=("$i")
	done
	running=("${keep[@]}")
	echo "# --- ${name_of[$pid]}"
	cat "$logdir/${name_of[$pid]}.log"
	tally "${name_of[$pid]}" "$rc" "$logdir/${name_of[$pid]}.log" $(($(date +%s) - ${start_of[$pid]}))
}

for t in "${tests[@]}"; do
	name=$(basename "$t")
	if [ ! -f "$t" ]; then
		echo "# --- $name"
		echo "# $name: no such test"
		fail=$((fail + 1))
		continue
	fi
	alone=''
	head -n 40 "$t" | grep -q '^# sluice-test: alone' && alone=1
	if [ "$jobs" = 1 ] || [ -n "$alone" ]; then
		# Alone: wait for the others, then show its output as it comes.
		while [ ${#running[@]} -gt 0 ]; do reap_one || break; done
		echo "# --- $name"
		: >"$log"
		t0=$(date +%s)
		launch "$t" "$log"
		tpid=$!
		# Followed with tail --pid, not piped: a stray process holding
		# a pipe open could otherwise hang the run.
		tail -n +1 -s 0.2 -f --pid="$tpid" "$log"
		wait "$tpid"
		tally "$name" $? "$log" $(($(date +%s) - t0))
		continue
	fi
	while [ ${#running[@]} -ge "$jobs" ]; do reap_one || break; done
	launch "$t" "$logdir/$name.log"
	name_of[$!]=$name
	start_of[$!]=$(date +%s)
	running+=("$!")
done
while [ ${#running[@]} -gt 0 ]; do reap_one || break; done
if [ ${#tests[@]} = 0 ]; then
	echo "# no tests found in $here"
	fail=1
fi

echo "# --- audit schema ($SLUICE_AUDIT_COLLECT)"
py=''
# Debian's python3 has python3-jsonschema (scripts/deps.sh); another on PATH may too.
for p in /usr/bin/python3 python3; do
	"$p" -c 'import jsonschema' 2>/dev/null && { py=$p; break; }
done
require=()
[ $# = 0 ] && require=(--require-lines)
if [ -z "$py" ]; then
	echo "not ok - no python3 here imports jsonschema (install python3-jsonschema: scripts/deps.sh)"
	fail=$((fail + 1))
else
	"$py" "$here/audit_schema.py" "$here/../../docs/audit.schema.json" --self-test \
		"${require[@]}" "$SLUICE_AUDIT_COLLECT" >"$log" 2>&1
	rc=$?
	cat "$log"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
	if [ -z "$line" ]; then
		echo "# audit schema: exited $rc without a result line: counted as 1 failed"
		fail=$((fail + 1))
	else
		read -r p _ f _ <<<"$line"
		pass=$((pass + p))
		fail=$((fail + f))
		[ "$rc" != 0 ] && [ "$f" = 0 ] && fail=$((fail + 1))
	fi
fi
echo "integration: $pass passed, $fail failed"
[ "$fail" = 0 ]
