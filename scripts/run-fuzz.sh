#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs each libFuzzer target for SECONDS on a scratch copy of its seed corpus.
# Usage: scripts/run-fuzz.sh [-j JOBS] SECONDS TARGET...
#
# JOBS targets run at once (default 1), each one process for SECONDS: on N
# cores, N at a time give every target the time on a core that one by one
# would, in 1/N of the wall time. Each target's result is shown when it
# ends.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pool.sh"
pool_open fuzz "$@"
shift "$POOL_SHIFT"
secs=$1
shift
work=$POOL_DIR
pass=0
fail=0

pool_done() {
	local name=$1 rc=$2 log=$3
	echo "== fuzz $name for ${secs}s"
	if [ "$rc" = 0 ]; then
		pass=$((pass + 1))
		grep -E '^#[0-9]+.*DONE' "$log" | tail -1
	else
		fail=$((fail + 1))
		tail -40 "$log"
		mkdir -p build/fuzz-crashes
		cp "$work/$name"-* build/fuzz-crashes/ 2>/dev/null || true
		echo "FAILED: $name (exit $rc; crash input copied to build/fuzz-crashes/)"
	fi
}

for t in "$@"; do
	name=$(basename "$t")
	mkdir -p "$work/$name"
	seed="tests/fuzz/corpus/$name"
	[ -d "$seed" ] && cp -r "$seed"/. "$work/$name"/
	pool_start "$name" "$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$work/$name-" -print_final_stats=0 "$work/$name"
done
pool_wait
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
