#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs each cmocka unit-test binary and sums their results.
set -u
pass=0
fail=0
for t in "$@"; do
	echo "== $t"
	if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t"; fi
done
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
