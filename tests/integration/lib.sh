# SPDX-License-Identifier: MIT
# lib.sh - tiny assertion library for the integration tests (source it from bash).
#
#   t_ok NAME CMD...              CMD exits 0
#   t_fails NAME CMD...           CMD exits non-zero (prefer t_rc: say which failure)
#   t_rc NAME RC CMD...           CMD exits exactly RC
#   t_eq NAME EXPECTED ACTUAL
#   t_contains NAME HAYSTACK NEEDLE
#   t_not_contains NAME HAYSTACK NEEDLE
#   t_none NAME [PROBLEM...]      passes when no PROBLEM is given; else fails,
#                                 listing them (a check made of several parts)
#   t_skip NAME REASON
#   t_done                        prints "N passed, N failed"; exits 1 if any failed
#   t_status_reason               filter: an HTTP head (curl -D -) on stdin ->
#                                 "STATUS REASON" of its last response
#   t_run CMD...                  runs CMD as the checks do (time limit, T_OUT,
#                                 T_ERR, T_RC) and asserts nothing
#
# The command forms run CMD under a time limit of T_TIMEOUT seconds (default
# 60): external commands through timeout(1), shell functions (brk_exec ...)
# in a subshell that a watchdog ends, with its whole process tree, at the
# limit. A command that hits the limit exits 124 and fails the check.
# After each, T_OUT holds CMD's stdout, T_ERR its stderr and T_RC its exit
# status, for further assertions. The output of a failed check is printed.
#
# Source it before doing anything (see "Isolation" below).

# Isolation: a test's own shell runs in a fresh, empty network namespace
# (only lo), so that a command a test forgets to run inside the world
# (brk_exec, client_exec ...) reaches nothing instead of the machine's real
# network. The world's namespaces are unaffected: ip netns works from here.
# run.sh does this for every test; a test run by hand re-executes itself
# here, before it has done anything but source files.
if [ -z "${SLUICE_TEST_ISOLATED:-}" ]; then
	if [ -f "$0" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
		export SLUICE_TEST_ISOLATED=1
		exec unshare --net -- bash -c 'ip link set lo up && exec bash "$@"' t_isolated "$0" "$@"
	fi
	echo "# warning: not isolated in an empty network namespace (run it via run.sh)" >&2
fi

T_PASS=0
T_FAIL=0
T_SKIP=0
T_TIMEOUT=${T_TIMEOUT:-60}
T_OUT=
T_ERR=
T_RC=0
_T_TMP=$(mktemp -d /tmp/sluice-t.XXXXXX) || exit 1

_t_pass() {
	T_PASS=$((T_PASS + 1))
	echo "ok - $1"
}

_t_fail() {
	T_FAIL=$((T_FAIL + 1))
	echo "not ok - $1"
	shift
	# Bounded (lines cut at 300 characters, 60 lines at most): a failed
	# download must not flood the report.
	[ $# -gt 0 ] && printf '%s\n' "$@" | awk '
		NR > 60 { print "#   ..."; exit }
		{ if (length($0) > 300) $0 = substr($0, 1, 300) "..."; print "#   " $0 }'
	return 0
}

# _t_kill_tree PID: KILL PID and every descendant (by PID, found via /proc).
_t_kill_tree() {
	local pids
	pids=$(ps -e -o pid=,ppid= | awk -v root="$1" '
		{ parent[$1] = $2; order[NR] = $1 }
		END {
			tree[root] = 1
			for (changed = 1; changed; ) {
				changed = 0
				for (i = 1; i <= NR; i++) {
					p = order[i]
					if (!(p in tree) && (parent[p] in tree)) { tree[p] = 1; changed = 1 }
				}
			}
			for (p in tree) print p
		}')
	[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
	return 0
}

# _t_run CMD...: run CMD with the time limit, stdin from /dev/null; sets
# T_OUT, T_ERR, T_RC.
_t_run() {
	local out=$_T_TMP/out err=$_T_TMP/err pid wd
	if [ "$(type -t "$1")" = file ]; then
		timeout -k 5 "$T_TIMEOUT" "$@" </dev/null >"$out" 2>"$err"
		T_RC=$?
	else
		("$@") </dev/null >"$out" 2>"$err" &
		pid=$!
		(
			sleep "$T_TIMEOUT" &
			s=$!
			trap 'kill $s 2>/dev/null; exit 0' TERM
			wait $s
			echo "timed out after ${T_TIMEOUT}s" >>"$err"
			_t_kill_tree "$pid"
		) &
		wd=$!
		wait "$pid"
		T_RC=$?
		kill -TERM "$wd" 2>/dev/null
		wait "$wd" 2>/dev/null
		[ "$T_RC" = 137 ] && grep -q '^timed out after' "$err" && T_RC=124
	fi
	T_OUT=$(cat "$out")
	T_ERR=$(cat "$err")
	return 0
}

# as_user_of PID CMD...: runs CMD as the user and group of process PID, no
# other group. sluiced runs as a user of its own: changing its limits
# (prlimit) as root needs CAP_SYS_RESOURCE, which root may not have; as that
# user it needs nothing.
as_user_of() {
	local pid=$1
	shift
	setpriv --reuid "$(awk '/^Uid:/ { print $3 }' /proc/"$pid"/status)" \
		--regid "$(awk '/^Gid:/ { print $3 }' /proc/"$pid"/status)" --clear-groups "$@"
}

# wait_for N CMD...: until CMD prints at least N lines (polled, at most 10 s).
wait_for() {
	local n=$1 i
	shift
	for ((i = 0; i < 100; i++)); do
		[ "$("$@" | wc -l)" -ge "$n" ] && return 0
		sleep 0.1
	done
	return 1
}

_t_show() {
	_t_fail "$1" "command: ${*:2}" "exit: $T_RC" \
		${T_OUT:+"stdout:" "$T_OUT"} ${T_ERR:+"stderr:" "$T_ERR"}
}

t_ok() {
	local name=$1
	shift
	_t_run "$@"
	if [ "$T_RC" = 0 ]; then _t_pass "$name"; else _t_show "$name" "$@"; fi
}

t_fails() {
	local name=$1
	shift
	_t_run "$@"
	if [ "$T_RC" != 0 ] && [ "$T_RC" != 124 ]; then
		_t_pass "$name"
	else
		_t_show "$name" "$@"
	fi
}

t_rc() {
	local name=$1 want=$2
	shift 2
	_t_run "$@"
	if [ "$T_RC" = "$want" ]; then
		_t_pass "$name"
	else
		_t_show "$name (wanted exit $want)" "$@"
	fi
}

t_eq() {
	if [ "$2" = "$3" ]; then
		_t_pass "$1"
	else
		_t_fail "$1" "expected: $2" "actual:   $3"
	fi
}

t_contains() {
	if [[ $2 == *"$3"* ]] && [ -n "$3" ]; then
		_t_pass "$1"
	else
		_t_fail "$1" "wanted: $3" "in:" "$2"
	fi
}

t_not_contains() {
	if [ -z "$3" ]; then
		_t_fail "$1" "empty needle"
	elif [[ $2 == *"$3"* ]]; then
		_t_fail "$1" "unwanted: $3" "in:" "$2"
	else
		_t_pass "$1"
	fi
}

t_none() {
	local name=$1
	shift
	if [ $# = 0 ]; then _t_pass "$name"; else _t_fail "$name" "$@"; fi
}

t_run() { _t_run "$@"; }

# proc_ticks PID: the CPU the process has used so far, utime + stime of all
# its threads in clock ticks (fields 14 and 15 of stat, counted after the
# last ')', as comm may hold spaces); 0 when it is gone.
proc_ticks() {
	local rest
	rest=$(cat "/proc/$1/stat" 2>/dev/null) || {
		echo 0
		return
	}
	rest=${rest##*) }
	set -- $rest
	echo $((${12} + ${13}))
}

t_skip() {
	T_SKIP=$((T_SKIP + 1))
	echo "ok - $1 # SKIP ${2:-}"
}

t_done() {
	rm -rf "$_T_TMP"
	if [ $((T_PASS + T_FAIL)) = 0 ]; then
		# A test that asserted nothing proved nothing.
		_t_fail "the test made no assertions"
	fi
	[ "$T_SKIP" -gt 0 ] && echo "# $T_SKIP skipped"
	echo "$T_PASS passed, $T_FAIL failed"
	[ "$T_FAIL" = 0 ] || exit 1
	exit 0
}

# t_status_reason: reads HTTP response heads (curl -D -) on stdin and prints
# the status and the X-Sluice-Reason of the last one ("403 not-allowlisted";
# after a CONNECT's 200, the answer inside the tunnel).
t_status_reason() {
	awk '/^HTTP\//{s=$2; r=""} tolower($1)=="x-sluice-reason:"{r=$2} END{gsub("\r","",r); print s, r}'
}

# origin PATH: the test world's origins' own records (JSON lines, oldest
# first) of the requests they got for PATH, path and query as sent. What a
# request carried upstream is read here, not from the answer the sandbox
# got: the broker redacts the secrets a request carried from its answer.
origin() { world_echo_log | grep -F "\"path\": \"$1\""; }

# pattern_sha N: the sha256 of the N bytes spliceserver.py's /cl/N sends.
pattern_sha() {
	python3 -c 'import sys; sys.path.insert(0, sys.argv[2]); import hashlib, spliceserver
print(hashlib.sha256(spliceserver.pattern(int(sys.argv[1]))).hexdigest())' "$1" "$PWD/tests/integration"
}
