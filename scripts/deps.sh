#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the Debian packages sluice needs that are missing; does nothing when all are there.
# Usage: scripts/deps.sh [build|bench]
set -eu

# clang-format-19, not Debian's default clang-format (14): the version
# `make format-check` is pinned to (Makefile, CLANG_FORMAT).
pkgs="gcc make pkg-config clang libclang-rt-14-dev libssl-dev openssl libyaml-dev
libc-ares-dev libmnl-dev libnftables-dev nftables
libcmocka-dev node-llhttp dnsmasq-base curl iproute2 python3 python3-cryptography procps ca-certificates
bubblewrap crun jq libjansson-dev podman containerd
wget git python3-requests python3-pip gpg python3-jsonschema
clang-format-19"
# The clients tests/integration/test_clients.sh and test_recipes.sh run (one
# that is missing is skipped there; gpg signs test_recipes.sh's apt repository;
# python3-jsonschema checks every audit line against docs/audit.schema.json, tests/integration/run.sh). node and npm only where there are none: a node from
# elsewhere carries its own npm, which Debian's npm package would fight.
command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
if [ "${1:-build}" = bench ]; then
	pkgs="$pkgs squid-openssl wrk nginx-light"
fi

missing=""
for p in $pkgs; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$st" in
	*" installed") ;;
	*) missing="$missing $p" ;;
	esac
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing Debian packages:$missing (run as root, or install them)" >&2
	exit 1
fi
echo "deps: installing$missing"
# Packages such as squid start a system service on install; sluice runs its
# own instances inside test namespaces only, so keep installs from starting any.
prc=/usr/sbin/policy-rc.d
made_prc=0
if [ ! -e "$prc" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$prc"
	chmod 755 "$prc"
	made_prc=1
fi
trap '[ "$made_prc" = 1 ] && rm -f "$prc"' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
