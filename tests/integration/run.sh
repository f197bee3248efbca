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
# The order: the scripts that run alone first, one by one (started among
# the others, each would wait for all that run to end, a core idle
# meanwhile); then those that say `# sluice-test: long` (the longest ones,
# so that none of them starts last and runs on alone); then the rest, each
# group in the order given.
logdir=$(mktemp -d /tmp/sluice-integration-logs.XXXXXX) || exit 1
trap 'rm -f "$log"; rm -rf "$logdir"; [ -n "$collect_own" ] && rm -rf "$SLUICE_AUDIT_COLLECT"' EXIT
. "$here/../../scripts/pool.sh"
pool_init "${SLUICE_TEST_JOBS:-1}" "$logdir"

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

# isolated T: runs script T (exec: call it in a subshell or in the background).
isolated() {
	# Each test's own shell runs in an empty network namespace (see
	# lib.sh): what it forgets to run inside the world goes nowhere.
	SLUICE_TEST_ISOLATED=1 exec timeout -k 60 600 unshare --net -- \
		bash -c 'ip link set lo up && exec bash "$1"' t_isolated "$1"
}

# pool_done NAME RC LOG SECS: a script run beside others ended: its output, its sums.
pool_done() {
	echo "# --- $1"
	cat "$3"
	tally "$@"
}

# marked T WORD: whether script T says `# sluice-test: WORD` in its first 40 lines.
marked() { head -n 40 "$1" 2>/dev/null | grep -q "^# sluice-test: $2"; }
ordered=()
for group in alone long rest; do
	for t in "${tests[@]}"; do
		if marked "$t" alone; then
			[ "$group" = alone ] || continue
		elif marked "$t" long; then
			[ "$group" = long ] || continue
		else
			[ "$group" = rest ] || continue
		fi
		ordered+=("$t")
	done
done

for t in "${ordered[@]}"; do
	name=$(basename "$t")
	if [ ! -f "$t" ]; then
		echo "# --- $name"
		echo "# $name: no such test"
		fail=$((fail + 1))
		continue
	fi
	if [ "$POOL_JOBS" = 1 ] || marked "$t" alone; then
		# Alone: wait for the others, then show its output as it comes.
		pool_wait
		echo "# --- $name"
		: >"$log"
		t0=$(date +%s)
		isolated "$t" >"$log" 2>&1 </dev/null &
		tpid=$!
		# Followed with tail --pid, not piped: a stray process holding
		# a pipe open could otherwise hang the run.
		tail -n +1 -s 0.2 -f --pid="$tpid" "$log"
		wait "$tpid"
		tally "$name" $? "$log" $(($(date +%s) - t0))
		continue
	fi
	pool_start "$name" isolated "$t"
done
pool_wait
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
