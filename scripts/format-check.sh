#!/bin/sh
# SPDX-License-Identifier: MIT
# Lists the files that differ from what clang-format makes of them (the
# repository's .clang-format) and fails if there is any; changes nothing.
# A clang-format that fails or crashes on a file fails the check too, named
# as such: a file it could not read is not a file that passed.
# Usage: scripts/format-check.sh CLANG_FORMAT FILE...
set -u

cf=${1:?usage: format-check.sh CLANG_FORMAT FILE...}
shift
if ! command -v "$cf" >/dev/null 2>&1; then
	echo "format-check: $cf is not installed: run \`make deps\` as root" >&2
	exit 2
fi
tmp=$(mktemp) || exit 2
trap 'rm -f "$tmp"' EXIT

bad=0
for f in "$@"; do
	if ! "$cf" --style=file "$f" >"$tmp"; then
		echo "format-check: $cf failed on $f" >&2
		exit 2
	fi
	if ! cmp -s "$f" "$tmp"; then
		n=$(diff "$f" "$tmp" | grep -c '^<')
		echo "format-check: $f: $n lines differ" >&2
		bad=$((bad + 1))
	fi
done
if [ "$bad" -ne 0 ]; then
	echo "format-check: $bad of $# files differ from .clang-format;" \
		"\`make format\` rewrites them, \`$cf --style=file FILE | diff FILE -\` shows how" >&2
	exit 1
fi
