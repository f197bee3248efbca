#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: alone (run.sh): /etc/sluice/sluiced.yaml, the default configuration every other sluice reads
# The command line as a user first meets it, with no broker and no world:
# `--help`/`-h` on every subcommand of cli/main.c's dispatch table prints
# that subcommand's usage on stdout, exits 0, asks no broker and opens no
# file (`policy check --help` once opened a file named --help, `unregister
# --help` asked the broker for a sandbox named --help); a sandboxed
# command's own -h stays its own; `--version` on every program in
# SLUICE_BIN gives one version; sluiced reads /etc/sluice/sluiced.yaml when
# no --config is given (tested under an overlay of /etc in a private mount
# namespace: the real /etc is never written) and says so when there is
# none; the sample configuration in deploy/ is valid.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
# matches REGEX TEXT: a line of TEXT matches the extended REGEX (t_ok gives
# commands no stdin, so no here-string).
matches() { grep -qE -- "$1" <<<"$2"; }
D=$(mktemp -d /tmp/sluice-cli.XXXXXX) || exit 1
trap 'rm -rf "$D"' EXIT
# A socket path nothing listens on: a subcommand that asked the broker
# would say "cannot reach sluiced".
export SLUICE_SOCKET=$D/no-broker.sock

# --- --help on every subcommand ----------------------------------------------
# The names come from the dispatch table itself, so that a command added
# later is tested too.
mapfile -t cmds < <(sed -n 's/^[[:space:]]*{ "\([a-z-]*\)", [a-z_]*,.*/\1/p' cli/main.c)
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

# --- man pages ----------------------------------------------------------------------
for m in docs/man/sluice.1 docs/man/sluiced.8 docs/man/sluice-policy.5; do
	t_ok "$m is there" test -s "$m"
	if command -v groff >/dev/null; then
		t_rc "groff -man -ww -z $m" 0 groff -man -ww -z "$m"
		t_eq "  ... no warning" "" "$T_ERR"
	else
		t_skip "groff -man -ww $m" "no groff"
	fi
	if command -v man >/dev/null; then
		t_rc "man --warnings -l $m" 0 env MANWIDTH=200 man --warnings -l "$m"
		t_eq "  ... no warning" "" "$T_ERR"
	else
		t_skip "man --warnings -l $m" "no man-db"
	fi
done
if command -v man >/dev/null; then
	page=$(MANWIDTH=200 man -l docs/man/sluice.1 2>/dev/null)
	for c in "${cmds[@]}"; do
		t_ok "sluice(1) describes sluice $c" matches "^ {7}$c( |$)" "$page"
	done
fi

# --- bash completion ---------------------------------------------------------------------
# complete WORD...: what the completion offers for the last WORD (the
# command line so far), one per line; sluice is $BIN's.
complete_words() {
	PATH=$BIN:$PATH bash -c '. deploy/bash-completion/sluice || exit 1
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		complete -p "$1" >/dev/null || exit 1
		"$(complete -p "$1" | sed -n "s/.*-F \([^ ]*\) .*/\1/p")"
		printf "%s\n" "${COMPREPLY[@]}"' _ "$@"
}
t_run complete_words sluice ""
offered=$T_OUT
t_eq "completion: sluice TAB, no error" "0 " "$T_RC $T_ERR"
for c in "${cmds[@]}"; do
	t_ok "completion: sluice TAB offers $c" matches "^$c\$" "$offered"
done
t_run complete_words sluice --broker-netns x st
t_eq "completion: after a global option, the subcommand" "status" "$T_OUT"
t_run complete_words sluice status --
t_eq "completion: sluice status --" "$(printf '%s\n' --json --metrics --jwks --help)" "$T_OUT"
t_run complete_words sluice policy ""
t_eq "completion: sluice policy" "$(printf '%s\n' check test --help)" "$T_OUT"
t_run complete_words sluice exec --p
t_eq "completion: sluice exec --p" "--privileged" "$T_OUT"
t_run complete_words sluice probe --on
t_eq "completion: sluice probe's own options" "--only" "$T_OUT"
t_run complete_words sluiced --check
t_eq "completion: sluiced" "--check-config" "$T_OUT"
t_run complete_words sluiced --config deploy/sluiced.yaml.sa
t_eq "completion: sluiced --config FILE" "deploy/sluiced.yaml.sample" "$T_OUT"

# --- --version -----------------------------------------------------------------
versions=()
for p in "$BIN"/*; do
	[ -x "$p" ] && [ -f "$p" ] || continue
	n=$(basename "$p")
	t_rc "$n --version exits 0" 0 "$p" --version
	out=$T_OUT
	t_ok "$n --version: \"$n VERSION\" ($out)" matches "^$n [0-9]+\.[0-9]+\.[0-9]+" "$out"
	versions+=("${out#"$n "}")
done
t_eq "every program has the same version" 1 \
	"$(printf '%s\n' "${versions[@]}" | sort -u | wc -l)"
t_eq "it is VERSION's" "$(cat VERSION)" "$(printf '%s\n' "${versions[0]}" | cut -d+ -f1)"

# --- the default configuration file -----------------------------------------------
# /etc seen through an overlay in a private mount namespace: what is
# written there lands in $D/upper and nowhere else.
in_etc_overlay() {
	unshare -m -- bash -c '
		mount --make-rprivate / &&
		mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc &&
		rm -rf /etc/sluice && shift && eval "$1"' _ "$D" "$1"
}
mkdir -p "$D/upper" "$D/work"
if in_etc_overlay true 2>/dev/null; then
	t_rc "no /etc/sluice/sluiced.yaml: --check-config passes" 0 \
		in_etc_overlay "$BIN/sluiced --check-config"
	t_contains "  ... and says the defaults are used" "$T_OUT" \
		"no /etc/sluice/sluiced.yaml and no --config: the built-in defaults are used"
	t_rc "/etc/sluice/sluiced.yaml is read when it exists" 1 in_etc_overlay \
		"mkdir -p /etc/sluice && echo 'proxy_portz: 1' >/etc/sluice/sluiced.yaml && $BIN/sluiced --check-config"
	t_contains "  ... an error in it names it" "$T_ERR" \
		"/etc/sluice/sluiced.yaml:1:1: unknown key \`proxy_portz\`"
	t_rc "a valid one: ok, with its name" 0 in_etc_overlay \
		"mkdir -p /etc/sluice && echo 'proxy_port: 4128' >/etc/sluice/sluiced.yaml && $BIN/sluiced --check-config"
	t_eq "  ... the file is named" "/etc/sluice/sluiced.yaml: ok" "$T_OUT"
	t_rc "an unreadable one is an error, not the defaults" 1 in_etc_overlay \
		"mkdir -p /etc/sluice/sluiced.yaml && $BIN/sluiced --check-config"
	t_contains "  ... naming it" "$T_ERR" "/etc/sluice/sluiced.yaml"
	t_rc "--config wins over the default file" 0 in_etc_overlay \
		"mkdir -p /etc/sluice && echo 'x: 1' >/etc/sluice/sluiced.yaml && echo 'workers: 1' >$D/c.yaml && $BIN/sluiced --check-config --config $D/c.yaml"
else
	t_skip "the default configuration file" "no overlayfs for a private /etc here"
fi

# --- the sample configuration ---------------------------------------------------------
t_rc "deploy/sluiced.yaml.sample is valid" 0 "$BIN/sluiced" --check-config --config deploy/sluiced.yaml.sample
t_eq "  ... ok" "deploy/sluiced.yaml.sample: ok" "$T_OUT"
# Every key broker/config.c knows is in the sample, so the sample documents them all.
mapfile -t keys < <(sed -n '/known_keys\[\] = {/,/NULL/p' broker/config.c | grep -o '"[a-z_]*"' | tr -d '"')
t_ok "config.c's keys were found (${#keys[@]})" test "${#keys[@]}" -ge 15
missing=()
for k in "${keys[@]}"; do
	grep -qE "^#?$k:" deploy/sluiced.yaml.sample || missing+=("$k")
done
t_none "the sample names every key" "${missing[@]}"
# Uncommented, every key at its documented default: the sample's values are the defaults.
sed -E 's/^#([a-z_]+:)/\1/' deploy/sluiced.yaml.sample >"$D/all.yaml"
t_rc "every key uncommented (at its default) is valid too" 0 "$BIN/sluiced" --check-config --config "$D/all.yaml"

# --- no broker: a failed call, not a broker's refusal -----------------------------
# (netns_ctl_err(): the CLI tells the two apart by the errno, not by -EPROTO;
# `sluice report`'s "names none" is an answer, not -ENODATA.)
t_rc "sluice list with no broker exits 1" 1 "$BIN/sluice" list
t_eq "  ... says it cannot reach it, with the errno's words" \
	"sluice: cannot reach sluiced at $D/no-broker.sock: No such file or directory" "$T_ERR"
t_rc "sluice pending with no broker exits 1" 1 "$BIN/sluice" pending
t_eq "  ... says so the same way" \
	"sluice: cannot reach sluiced at $D/no-broker.sock: No such file or directory" "$T_ERR"
t_rc "sluice report with no log and no broker exits 2" 2 "$BIN/sluice" report
t_eq "  ... the broker could not be asked" \
	"sluice: report: name the audit log (sluice report [NAME] AUDIT_LOG...): the broker could not be asked where it writes it" \
	"$T_ERR"

t_done
