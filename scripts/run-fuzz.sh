#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs each libFuzzer target for SECONDS on a scratch copy of its seed corpus.
# Usage: scripts/run-fuzz.sh SECONDS TARGET...
set -u
secs=$1
shift
work=$(mktemp -d /tmp/sluice-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
for t in "$@"; do
	name=$(basename "$t")
	mkdir -p "$work/$name"
	seed="tests/fuzz/corpus/$name"
	[ -d "$seed" ] && cp -r "$seed"/. "$work/$name"/
	echo "== fuzz $name for ${secs}s"
	if "$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$work/$name-" -print_final_stats=0 \
		"$work/$name" >"$work/$name.log" 2>&1; then
		pass=$((pass + 1))
		grep -E '^#[0-9]+.*DONE' "$work/$name.log" | tail -1
	else
		fail=$((fail + 1))
		tail -40 "$work/$name.log"
		mkdir -p build/fuzz-crashes
		cp "$work/$name"-* build/fuzz-crashes/ 2>/dev/null || true
		echo "FAILED: $name (crash input copied to build/fuzz-crashes/)"
	fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
