#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The command line as a user first meets it, with no broker and no world:
# `--help`/`-h` on every subcommand of netns/main.c's dispatch table prints
# that subcommand's usage on stdout, exits 0, asks no broker and opens no
# file (`policy check --help` once opened a file named --help, `unregister
# --help` asked the broker for a sandbox named --help); a sandboxed
# command's own -h stays its own; `--version` on every program in
# SLUICE_BIN gives one version.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
D=$(mktemp -d /tmp/sluice-cli.XXXXXX) || exit 1
trap 'rm -rf "$D"' EXIT
# A socket path nothing listens on: a subcommand that asked the broker
# would say "cannot reach sluiced".
export SLUICE_SOCKET=$D/no-broker.sock

# --- --help on every subcommand ----------------------------------------------
# The names come from the dispatch table itself, so that a command added
# later is tested too.
mapfile -t cmds < <(sed -n 's/^[[:space:]]*{ "\([a-z-]*\)", [a-z_]*,.*/\1/p' netns/main.c)
t_ok "the dispatch table lists commands (${#cmds[@]})" test "${#cmds[@]}" -ge 10
t_run "$BIN/sluice" help
for c in "${cmds[@]}"; do
	t_contains "sluice help lists $c" "$T_OUT" "  $c"
done

mkdir -p "$D/cwd"
for c in "${cmds[@]}"; do
	for h in --help -h; do
		case $c in
		probe) want="usage: sluice probe" ;;
		*) want="usage: sluice $c" ;;
		esac
		t_rc "sluice $c $h exits 0" 0 bash -c 'cd "$1" && shift && exec "$@"' _ "$D/cwd" \
			"$BIN/sluice" "$c" "$h"
		t_contains "sluice $c $h: its usage on stdout" "$T_OUT" "$want"
		t_eq "sluice $c $h: nothing on stderr" "" "$T_ERR"
	done
done
# Where --help stood after other words, as users type it.
for args in "policy check --help" "policy test --help" "policy check x.yaml --help" \
	"unregister --help" "delete --help" "create box --policy p.yaml --help" \
	"register box --addr 10.0.0.2 --help" "exec --help" "exec box --help" \
	"exec --user 1 box -h" "run --policy p.yaml --help" "ca -h" "env --help" \
	"status --help" "list --help" "reload --help"; do
	# shellcheck disable=SC2086
	t_rc "sluice $args exits 0" 0 bash -c 'cd "$1" && shift && exec "$@"' _ "$D/cwd" \
		"$BIN/sluice" $args
	t_contains "sluice $args: usage" "$T_OUT" "usage: sluice ${args%% *}"
	t_not_contains "sluice $args: asks no broker" "$T_ERR$T_OUT" "cannot reach"
	t_not_contains "sluice $args: opens no file" "$T_ERR$T_OUT" "cannot open"
done
t_eq "no subcommand wrote a file" "" "$(ls -A "$D/cwd")"
t_rc "sluice --broker-netns NAME X --help needs no namespace" 0 \
	"$BIN/sluice" --broker-netns no-such-ns-$$ policy check --help

# A sandboxed command's words are its own: exec goes on to look for the
# sandbox (and does not find it), run waits for its "--".
t_rc "sluice exec NAME CMD -h runs CMD's -h (no such sandbox here)" 1 \
	"$BIN/sluice" exec no-such-box-$$ echo -h
t_not_contains "  ... and prints no usage" "$T_OUT" "usage:"
t_rc "sluice exec NAME -- CMD --help: the same" 1 \
	"$BIN/sluice" exec no-such-box-$$ -- echo --help
t_not_contains "  ... and prints no usage" "$T_OUT" "usage:"
t_rc "sluice probe --help: the probe's own, longer usage" 0 "$BIN/sluice" probe --help
t_contains "  ... its options" "$T_OUT" "--only"
t_rc "an unknown subcommand still exits 2" 2 "$BIN/sluice" no-such-command
t_rc "sluiced -h exits 0" 0 "$BIN/sluiced" -h
t_contains "  ... its usage on stdout" "$T_OUT" "usage: sluiced"

# --- --version -----------------------------------------------------------------
versions=()
for p in "$BIN"/*; do
	[ -x "$p" ] && [ -f "$p" ] || continue
	n=$(basename "$p")
	t_rc "$n --version exits 0" 0 "$p" --version
	out=$T_OUT
	t_ok "$n --version: \"$n VERSION\" ($out)" \
		bash -c '[[ $1 =~ ^$2\ [0-9]+\.[0-9]+\.[0-9]+ ]]' _ "$out" "$n"
	versions+=("${out#"$n "}")
done
t_eq "every program has the same version" 1 \
	"$(printf '%s\n' "${versions[@]}" | sort -u | wc -l)"
t_eq "it is VERSION's" "$(cat VERSION)" "$(printf '%s\n' "${versions[0]}" | cut -d+ -f1)"

t_done
