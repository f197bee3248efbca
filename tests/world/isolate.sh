# SPDX-License-Identifier: MIT
# isolate.sh - re-runs the calling script in an empty network namespace, so
# that nothing it does can reach the machine's own network (only the world's
# namespaces, entered explicitly). Source it first, with the script and its
# arguments:   . tests/world/isolate.sh "$REPO/tests/bench/run.sh" "$@"
if [ -z "${SLUICE_BENCH_ISOLATED:-}" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "bench: needs root (network namespaces)" >&2
		exit 1
	fi
	export SLUICE_BENCH_ISOLATED=1
	exec unshare --net -- bash -c 'ip link set lo up && exec bash "$0" "$@"' "$@"
fi
