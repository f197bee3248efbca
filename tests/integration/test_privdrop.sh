#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The broker runs as a user of its own after start-up (issue 14, "Least
# privilege"; broker/main.c drop_privileges(), broker/isolation.c). An
# install from before (a broker that stayed uid 0, `user: 0` here) leaves a
# root-owned state_dir; the next start takes it over and says so. Then every
# thread of the broker is uid:gid 65533 (no user `sluice` on the test
# machine: the documented default), with no supplementary group and no
# capability in any set; the opener (what is left of root) is uid 0 with
# CAP_SETUID and CAP_SETGID alone (for a member's file-system identity),
# no_new_privs and seccomp. The state_dir is the broker's, no
# file in it is world-readable, the CA key is 0600. A policy in a root-only
# directory and a 0600 root secret file work at start, at create and after
# `sluice reload` (the secret changed meanwhile); a secret file the opener
# may not give (another user's 0600 file) is refused with a clear error.
# The control socket still refuses a non-root caller, the broker's own uid
# included.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
T_TIMEOUT=30
U=65533

broker_world p1 p2

# Root-only: the directory (0700) and the secret in it (0600).
PRIV=$D/root-only
mkdir -m 0700 "$PRIV"
SECRET="s3cr3t-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$PRIV/secret"
chmod 600 "$PRIV/secret"
cat >"$PRIV/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
credentials:
  - name: echo-token
    source: { file: $PRIV/secret }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/api/*"] }
    plaintext: allow
EOF

started() { if broker_start; then t_ok "$1" true; else t_fails "$1" true; fi; }

# --- an install from before: a broker that stays root -----------------------
broker_config "user: 0"
started "a broker with user: 0 starts (the old behaviour)"
t_contains "  ... and warns that it stays uid 0" "$(cat "$BROKER_LOG")" "the broker stays uid 0"
t_ok "a sandbox on it" S create "$S1" --policy "$PRIV/pol.yaml"
broker_stop
t_eq "it left a root-owned state_dir" "0" "$(stat -c %u "$D/state")"
t_ok "  ... with root-owned files in it" test -n "$(find "$D/state" -type f -user 0)"

# --- the same state_dir, the default user ------------------------------------
broker_config
started "the broker starts on it with the default user"
PID=$BROKER_PID
t_contains "the log says the state_dir was taken over" "$(cat "$BROKER_LOG")" \
	"state_dir \`$D/state\`: "
t_contains "  ... by whom" "$(cat "$BROKER_LOG")" "taken over by user $U:$U"
t_contains "the log says whom it runs as" "$(cat "$BROKER_LOG")" \
	"running as user $U:$U ($U:$U), no capability"

# Every thread, from /proc.
# status_problems PID UID [CAPS]: what of PID's threads is not UID, no
# group, CAPS (default none) permitted, effective and bounding, no_new_privs
# and seccomp.
status_problems() {
	local t f want c=${3:-0000000000000000}
	for t in /proc/"$1"/task/*; do
		f=$(cat "$t/status" 2>/dev/null) || continue
		for want in "Uid:	$2	$2	$2	$2" "Gid:	$2	$2	$2	$2" \
			"CapInh:	0000000000000000" "CapPrm:	$c" \
			"CapEff:	$c" "CapBnd:	$c" \
			"CapAmb:	0000000000000000" "NoNewPrivs:	1" "Seccomp:	2"; do
			grep -qxF "$want" <<<"$f" || echo "${t##*/}: no \`$want\`: $(grep -F "${want%%:*}:" <<<"$f")"
		done
		grep -qx 'Groups:[[:space:]]*' <<<"$f" || echo "${t##*/}: $(grep Groups: <<<"$f")"
	done
}
t_none "every thread of the broker: uid, gid $U, no group, no capability, seccomp" \
	$(status_problems "$PID" "$U" | tr ' ' '_')
t_ok "  ... it has threads (workers, control)" test "$(ls /proc/"$PID"/task | wc -l)" -gt 2

CHILDREN=$(ps -o pid= --ppid "$PID" | tr -d ' ')
t_eq "the broker has two children, the opener and the key process" "2" \
	"$(echo "$CHILDREN" | grep -c .)"
OPENER=$(for c in $CHILDREN; do [ "$(cat /proc/"$c"/comm 2>/dev/null)" = sluiced-opener ] && echo "$c"; done)
t_eq "  ... one named sluiced-opener" "1" "$(echo "$OPENER" | grep -c .)"
# CAP_SETGID and CAP_SETUID (bits 6, 7): for setgroups, setfsgid and
# setfsuid, the only id calls its filter allows (a control_group member's
# files are read as that member).
t_none "  ... uid 0 with CAP_SETUID and CAP_SETGID alone, no_new_privs, seccomp" \
	$( [ -d "/proc/${OPENER:-none}" ] || echo no-opener) $(status_problems "$OPENER" 0 00000000000000c0 | tr ' ' '_')

# The files.
t_eq "the state_dir is the broker's" "$U:$U" "$(stat -c %u:%g "$D/state")"
t_eq "  ... and everything in it but the key process's keys/" "" \
	"$(find "$D/state" -path "$D/state/keys" -prune -o \( ! -user $U -o ! -group $U \) ! -type s -print)"
t_eq "  ... nothing in it is world-readable" "" "$(find "$D/state" -perm /o+rwx ! -type s)"
# The CA key the old broker wrote beside its certificate was taken over by
# the key process (test_keys.sh has the rest of it).
t_eq "no sandbox CA key is left in state_dir/ca" "" "$(find "$D/state/ca" -name ca.key)"
KEY=$(find "$D/state/keys" -name '*.key' | head -n 1)
t_ok "a sandbox CA key is in state_dir/keys" test -n "$KEY"
t_eq "  ... 0600, the key process's (65532)" "600 65532" "$(stat -c '%a %u' "$KEY" 2>/dev/null)"
t_eq "the audit log was taken over too" "$U" "$(stat -c %u "$BROKER_AUDIT")"
t_contains "  ... and the log says so" "$(cat "$BROKER_LOG")" "audit_log \`$BROKER_AUDIT\` taken over"
SOCKMODE=$(stat -c '%a %U' "$BROKER_SOCK")
t_eq "the control socket is root's, 0600, as before" "600 root" "$SOCKMODE"

# The sandbox restored from the old state works, with the root-only secret.
X() { S exec "$1" -- curl -sf -m 10 "http://echo.world.test$2"; }
t_ok "the restored sandbox: in scope" X "$S1" /api/a
t_contains "  ... the 0600 root secret was injected (read at start)" \
	"$(origin /api/a | tail -n 1)" "\"Authorization\", \"Bearer $SECRET\""
# A new sandbox, after the switch: its policy and secret are root-only.
t_ok "a new sandbox with a policy in a root-only directory" S create "$S2" --policy "$PRIV/pol.yaml"
t_ok "  ... in scope" X "$S2" /api/b
t_contains "  ... the secret, read after the switch" "$(origin /api/b | tail -n 1)" \
	"\"Authorization\", \"Bearer $SECRET\""
# The secret changes; a reload reads it again.
SECRET2="s3cr3t2-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET2" >"$PRIV/secret"
t_ok "sluice reload" S reload
t_ok "after the reload, in scope" X "$S2" /api/c
t_contains "  ... the new secret" "$(origin /api/c | tail -n 1)" \
	"\"Authorization\", \"Bearer $SECRET2\""
t_eq "  ... the broker is still $U" "$U" "$(awk '/^Uid:/ { print $3 }' /proc/"$PID"/status)"

# The opener gives nothing a root without capabilities may not read.
OTHER=$D/other-user
mkdir -m 0755 "$OTHER"
printf 'not-yours\n' >"$OTHER/secret"
chown 1234:1234 "$OTHER/secret"
chmod 600 "$OTHER/secret"
sed "s|$PRIV/secret|$OTHER/secret|" "$PRIV/pol.yaml" >"$D/other.yaml"
t_fails "a secret file of another user (0600): refused" S update "$S2" --policy "$D/other.yaml"
t_contains "  ... saying which file and why" "$T_ERR$T_OUT" "secret file \`$OTHER/secret\`: Permission denied"
t_ok "  ... and the old policy stays in force" X "$S2" /api/d
t_contains "  ... with the secret" "$(origin /api/d | tail -n 1)" "\"Authorization\", \"Bearer $SECRET2\""

# The control socket: root only, as before; the broker's own uid too is refused.
for who in 1000 $U; do
	t_fails "the control socket refuses uid $who" ip netns exec "$WORLD_BRK" \
		setpriv --reuid "$who" --regid "$who" --clear-groups \
		"$BIN/sluice" --socket "$BROKER_SOCK" list
	t_contains "  ... for permission" "$T_ERR" "ermission denied"
done
t_ok "root still may" S list
# Past the file mode too: the broker's own uid is not a caller it accepts
# (it was started as root, and only that uid, root, may call).
mode=$(stat -c %a "$BROKER_SOCK")
chmod 0666 "$BROKER_SOCK"
t_fails "with the socket opened to all, the broker still refuses its own uid $U" \
	ip netns exec "$WORLD_BRK" setpriv --reuid "$U" --regid "$U" --clear-groups \
	"$BIN/sluice" --socket "$BROKER_SOCK" list
t_contains "  ... saying it is not root" "$T_ERR" "uid $U is not root"
chmod "$mode" "$BROKER_SOCK"
t_ok "root still may, the mode put back" S list

t_eq "no seccomp refusal in the broker's log" "" "$(grep 'seccomp: system call' "$BROKER_LOG")"
t_not_contains "no secret in the broker's log" "$(cat "$BROKER_LOG")" "$SECRET"

# A configuration naming a user that does not exist: a clear error, no start.
printf 'user: no-such-user-here\n' >"$D/bad.yaml"
t_rc "user: an unknown name is refused" 1 "$BIN/sluiced" --config "$D/bad.yaml" --check-config
t_contains "  ... at FILE:LINE:COL" "$T_ERR$T_OUT" "$D/bad.yaml:1:7: \`user\`: unknown user \`no-such-user-here\`"

# It stops, and the opener with it.
broker_stop
# Gone, or dead and waiting for init to reap it (a zombie), within 5 s.
opener_gone() {
	local n st
	for ((n = 0; n < 50; n++)); do
		st=$(awk '{ print $3 }' /proc/"$OPENER"/stat 2>/dev/null)
		[ -z "$st" ] || [ "$st" = Z ] && return 0
		sleep 0.1
	done
	return 1
}
t_ok "the opener is gone with the broker" opener_gone
t_eq "no sanitizer report in the broker's log (an ASan build)" "" \
	"$(grep -m 1 -A 12 -E 'ERROR: AddressSanitizer|LeakSanitizer|runtime error:' "$BROKER_LOG")"

t_done
