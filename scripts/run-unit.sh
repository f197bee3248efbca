#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs each cmocka unit-test binary and sums their results.
# Usage: scripts/run-unit.sh [-j JOBS] TEST...
#
# JOBS binaries run at once (default 1); each one's output is shown whole
# when it ends, in the order they end.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pool.sh"
pool_open unit "$@"
shift "$POOL_SHIFT"
pass=0
fail=0

pool_done() {
	local t=${path_of[$1]} rc=$2 log=$3
	echo "== $t"
	cat "$log"
	if [ "$rc" = 0 ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "FAILED: $t (exit $rc)"
	fi
}

declare -A path_of
n=0
for t in "$@"; do
	n=$((n + 1))
	path_of[$n]=$t
	pool_start "$n" "$t"
done
pool_wait
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
