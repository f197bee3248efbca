# SPDX-License-Identifier: MIT
# broker.sh - starts and stops sluiced in the test world's broker namespace (source it after world.sh).
#
#   broker_config [-n NAME] [LINE...]   write the config; sets BROKER_CONF,
#                                       BROKER_SOCK, BROKER_AUDIT, BROKER_LOG
#   broker_start                        start sluiced on BROKER_CONF; sets
#                                       BROKER_PID; waits until it answers
#   broker_stop                         TERM, up to 5 s, KILL; idempotent
#   sl ARGS...                          sluice --socket $BROKER_SOCK ARGS,
#                                       inside the broker namespace
#   broker_world SUFFIX...              a test's preamble: world_up, sandbox
#                                       names S1, S2, ... and an EXIT trap
#
# The config holds what every test world broker needs (control socket,
# state directory, the world's resolver, an audit log, two workers) plus the
# LINEs given, as "key: value"; a LINE naming one of those keys replaces it.
# Its lines stay one key each ("workers: 2", "audit_log: ..."), so that a
# test may edit them with sed and ask for a reload.
#
# Without a NAME the files are $WORLD_DIR/sluiced.yaml, ctl.sock, state/,
# audit.log and sluiced.log; with one they are sluiced-NAME.yaml,
# ctl-NAME.sock, state-NAME/, audit-NAME.log and sluiced-NAME.log, so that
# two brokers (on other ports) can run side by side. The BROKER_* variables
# name the broker configured last; keep BROKER_PID and BROKER_SOCK of the
# first elsewhere before configuring a second.
#
# A started broker is recorded for world_down (world_track_pid), so that a
# test that dies mid-way leaves nothing running; broker_stop drops the
# record again, so that a broker stopped on purpose does not count as a
# server that died. sluiced and sluice come from $SLUICE_BIN, else the
# repository's bin/ (the rule every test uses for its BIN).

BROKER_WAIT_SECS=${BROKER_WAIT_SECS:-10}	# for sluiced to answer, at the most
BROKER_CONF=''
BROKER_SOCK=''
BROKER_LOG=''
BROKER_AUDIT=''
BROKER_PID=''
_BROKER_ST=''

_broker_err() { echo "broker: $*" >&2; }
_broker_bin() { echo "${SLUICE_BIN:-$WORLD_SRC/../../bin}"; }

# broker_config [-n NAME] [LINE...]: write the broker config (see above).
broker_config() {
	local name='' sfx='' k l
	local -a common
	if [ "${1:-}" = -n ]; then
		name=$2
		shift 2
		[[ $name =~ ^[a-z0-9][a-z0-9_-]{0,30}$ ]] || { _broker_err "bad name \`$name'"; return 1; }
		sfx=-$name
	fi
	if [ -z "${WORLD_DIR:-}" ] || [ ! -d "$WORLD_DIR" ]; then
		_broker_err "no world"
		return 1
	fi
	export BROKER_CONF=$WORLD_DIR/sluiced$sfx.yaml
	export BROKER_SOCK=$WORLD_DIR/ctl$sfx.sock
	export BROKER_LOG=$WORLD_DIR/sluiced$sfx.log
	export BROKER_AUDIT=$WORLD_DIR/audit$sfx.log
	common=("control_socket: $BROKER_SOCK" "state_dir: $WORLD_DIR/state$sfx"
		"upstream_resolvers: [$WORLD_RESOLVER]" "upstream_ca: $WORLD_CA"
		"audit_log: $BROKER_AUDIT" "workers: 2")
	for l in "$@"; do
		[[ $l =~ ^([a-z_]+):\ . ]] || { _broker_err "config line \`$l' is not \"key: value\""; return 1; }
		[ "${BASH_REMATCH[1]}" = audit_log ] && BROKER_AUDIT=${l#audit_log: }
	done
	{
		for k in "${common[@]}"; do
			for l in "$@"; do
				[ "${l%%:*}" = "${k%%:*}" ] && continue 2
			done
			echo "$k"
		done
		for l in "$@"; do echo "$l"; done
	} >"$BROKER_CONF"
}

# broker_alive: 0 while the broker started last runs (a zombie counts as gone).
broker_alive() {
	[ -n "$BROKER_PID" ] && _world_alive "$BROKER_PID" "$_BROKER_ST"
}

# _broker_usec: the time in microseconds.
_broker_usec() { echo "${EPOCHREALTIME//[!0-9]/}"; }

# broker_start: start sluiced on BROKER_CONF in the broker namespace, its
# stderr and stdout to BROKER_LOG; sets BROKER_PID (sluiced's own PID).
# Waits up to BROKER_WAIT_SECS until it answers on BROKER_SOCK; returns
# non-zero, with the end of its log, if it exits first (BROKER_PID is then
# empty) or does not answer in time (it is then left running: broker_stop
# ends it). A broker started before (under another name) is left to
# world_down.
broker_start() {
	local bin end
	bin=$(_broker_bin)
	if [ -z "$BROKER_CONF" ] || [ ! -f "$BROKER_CONF" ]; then
		_broker_err "no config (broker_config first)"
		return 1
	fi
	# A simple command, so that $! is sluiced itself (ip netns exec execs it).
	ip netns exec "$WORLD_BRK" "$bin/sluiced" --config "$BROKER_CONF" \
		</dev/null >>"$BROKER_LOG" 2>&1 &
	BROKER_PID=$!
	_BROKER_ST=$(_world_starttime "$BROKER_PID")
	# (Quiet: one that is gone already is reported below.)
	[ -n "$_BROKER_ST" ] && world_track_pid "$BROKER_PID" "$(basename "$BROKER_LOG" .log)" 2>/dev/null
	# Answering, not only the socket file: a socket left by a killed
	# broker is there before the new one has replaced it.
	end=$(($(_broker_usec) + BROKER_WAIT_SECS * 1000000))
	while [ "$(_broker_usec)" -lt "$end" ]; do
		if ! broker_alive; then
			_broker_err "sluiced (pid $BROKER_PID) exited; the end of its log:"
			tail -n 20 "$BROKER_LOG" >&2 2>/dev/null
			broker_stop	# reaps it and drops its record
			return 1
		fi
		[ -S "$BROKER_SOCK" ] && timeout 1 "$bin/sluice" --socket "$BROKER_SOCK" status \
			>/dev/null 2>&1 && return 0
		sleep 0.1
	done
	_broker_err "sluiced (pid $BROKER_PID) did not answer on $BROKER_SOCK; the end of its log:"
	tail -n 20 "$BROKER_LOG" >&2 2>/dev/null
	return 1
}

# broker_stop: end the broker started last: SIGTERM (it drains), up to 5 s,
# then SIGKILL; reap it and drop its world record. Idempotent.
broker_stop() {
	local n
	[ -n "$BROKER_PID" ] || return 0
	if broker_alive; then
		kill -TERM "$BROKER_PID" 2>/dev/null
		for ((n = 0; n < 50; n++)); do
			broker_alive || break
			sleep 0.1
		done
		if broker_alive; then
			_broker_err "sluiced (pid $BROKER_PID) ignored SIGTERM for 5 s; killing"
			kill -KILL "$BROKER_PID" 2>/dev/null
		fi
	fi
	wait "$BROKER_PID" 2>/dev/null
	# A system call outside the broker's seccomp allowlist (isolation.c)
	# failed with EPERM on some path: said where every test shows it.
	grep -h "seccomp: system call" "$BROKER_LOG" 2>/dev/null | sort | uniq -c |
		sed 's/^/# broker log: /' >&2
	if [ -n "${WORLD_DIR:-}" ] && [ -f "$WORLD_DIR/pids" ]; then
		awk -v p="$BROKER_PID" -v s="$_BROKER_ST" '!($1 == p && $2 == s)' \
			"$WORLD_DIR/pids" >"$WORLD_DIR/pids.tmp" && mv "$WORLD_DIR/pids.tmp" "$WORLD_DIR/pids"
	fi
	BROKER_PID=
	_BROKER_ST=
	return 0
}

# sl ARGS...: the sluice command line tool, on the broker's control socket,
# inside the broker namespace (as a user runs it).
sl() { ip netns exec "$WORLD_BRK" "$(_broker_bin)/sluice" --socket "$BROKER_SOCK" "$@"; }

# broker_world SUFFIX...: the preamble of a test with one broker and a few
# sandboxes. world_up (the test ends with "0 passed, 1 failed" when the world
# does not come up); S1, S2, ... = $WORLD_PREFIX-SUFFIX in the order given;
# D=$WORLD_DIR; S = sl; and an EXIT trap that deletes those sandboxes, stops
# the broker and takes the world down. Call it in the test's own shell.
broker_world() {
	local i=1 s
	world_up || { echo "world did not come up"; echo "0 passed, 1 failed"; exit 1; }
	_BROKER_WORLD_SB=()
	for s in "$@"; do
		printf -v "S$i" '%s' "$WORLD_PREFIX-$s"
		_BROKER_WORLD_SB+=("$WORLD_PREFIX-$s")
		i=$((i + 1))
	done
	D=$WORLD_DIR
	trap _broker_world_down EXIT
}
S() { sl "$@"; }
_broker_world_down() {
	local s
	for s in "${_BROKER_WORLD_SB[@]}"; do sl delete "$s" >/dev/null 2>&1; done
	# And any sandbox of this world's prefix that a failed step left
	# (a create that was meant to be refused, say): sluice made each.
	[ -n "${WORLD_PREFIX:-}" ] && for s in /run/sluice-sandboxes/"$WORLD_PREFIX"-*; do
		[ -d "$s" ] && sl delete "${s##*/}" >/dev/null 2>&1
	done
	broker_stop
	world_down
}
