# SPDX-License-Identifier: MIT
# pool.sh - runs commands at most POOL_JOBS at once (source it from bash).
#
#   pool_init JOBS DIR   JOBS at once, kept in POOL_JOBS (1 if JOBS is
#                        not a positive number); each command's output
#                        goes to DIR/KEY.log
#   pool_open NAME ARG...  for a script whose arguments may begin with
#                        "-j JOBS": pool_init with those JOBS (else 1) and
#                        a directory /tmp/sluice-NAME.XXXXXX (POOL_DIR),
#                        removed when the script exits; POOL_SHIFT is the
#                        number of arguments it read
#   pool_start KEY CMD...  starts CMD in the background once fewer than JOBS
#                        run (reaping one that ended first, if need be)
#   pool_wait            reaps every command still running
#
# The caller defines pool_done KEY RC LOG SECS, called once per command as
# it is reaped (in the order they end), with its exit status, its log and
# the seconds from its start (not from pool_start's call) to its end.
POOL_JOBS=1
_pool_dir=''
declare -A _pool_key _pool_t0
_pool_running=()

pool_init() {
	POOL_JOBS=$1
	_pool_dir=$2
	case $POOL_JOBS in '' | *[!0-9]* | 0) POOL_JOBS=1 ;; esac
}

pool_open() {
	local name=$1 jobs=1
	shift
	POOL_SHIFT=0
	if [ "${1:-}" = -j ]; then
		jobs=${2:-}
		POOL_SHIFT=2
	fi
	POOL_DIR=$(mktemp -d "/tmp/sluice-$name.XXXXXX") || exit 1
	trap 'rm -rf "$POOL_DIR"' EXIT
	pool_init "$jobs" "$POOL_DIR"
}

# _pool_reap: waits for one running command to end and hands it to pool_done.
_pool_reap() {
	local pid='' rc i keep=()
	wait -n -p pid "${_pool_running[@]}"
	rc=$?
	if [ -z "$pid" ]; then
		# Not to happen: hand each as failed (127), go on.
		for i in "${_pool_running[@]}"; do
			pool_done "${_pool_key[$i]}" 127 "$_pool_dir/${_pool_key[$i]}.log" \
				$((EPOCHSECONDS - _pool_t0[$i]))
		done
		_pool_running=()
		return
	fi
	for i in "${_pool_running[@]}"; do
		[ "$i" = "$pid" ] || keep+=("$i")
	done
	_pool_running=("${keep[@]}")
	pool_done "${_pool_key[$pid]}" "$rc" "$_pool_dir/${_pool_key[$pid]}.log" \
		$((EPOCHSECONDS - _pool_t0[$pid]))
}

pool_start() {
	local key=$1
	shift
	while [ ${#_pool_running[@]} -ge "$POOL_JOBS" ]; do _pool_reap; done
	"$@" >"$_pool_dir/$key.log" 2>&1 </dev/null &
	_pool_key[$!]=$key
	_pool_t0[$!]=$EPOCHSECONDS
	_pool_running+=("$!")
}

pool_wait() {
	while [ ${#_pool_running[@]} -gt 0 ]; do _pool_reap; done
}
