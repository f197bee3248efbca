#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: alone (run.sh): /etc/sluice and /usr/local, which other scripts' CLI would read
# make install and make uninstall into a DESTDIR under a temporary folder:
# the exact file list (binaries, sluice-uplink, systemd units with the
# prefix's paths in them, the sample configuration, man pages, bash
# completion) with PREFIX=/usr/local and with PREFIX=/usr, modes, the
# installed programs run; then uninstall leaves no file, and a sluiced.yaml
# of the user's own in /etc/sluice is neither overwritten nor removed.
# Installs the binaries of SLUICE_BIN (install-files: no build is made).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
# Run from `make check` or `make asan`: none of the outer make's flags and
# variables (BIN=, a jobserver) reach the makes below.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
D=$(mktemp -d /tmp/sluice-install.XXXXXX) || exit 1
trap 'rm -rf "$D"' EXIT
T_TIMEOUT=120

# mk TARGET DESTDIR [VAR=VALUE...]: make TARGET quietly. `install` is
# `build` then `install-files`; the test runs install-files on the
# binaries it was given, so that it never builds (nor relinks bin/ under
# the other tests' feet); `make -n install` below checks the rest.
mk() {
	local target=$1 dest=$2
	shift 2
	[ "$target" = install ] && target=install-files
	make --no-print-directory -s "$target" DESTDIR="$dest" BIN="$BIN" "$@"
}

files() { (cd "$1" && find . -type f -o -type l | sed 's|^\./|/|' | sort); }

want_local="/etc/sluice/sluiced.yaml.sample
/usr/local/bin/sluice
/usr/local/bin/sluice-cni
/usr/local/bin/sluice-oci-hook
/usr/local/bin/sluice-probe
/usr/local/bin/sluiced
/usr/local/lib/sluice/sluice-uplink
/usr/local/lib/systemd/system/sluice-netns.service
/usr/local/lib/systemd/system/sluiced.service
/usr/local/lib/sysusers.d/sluice.conf
/usr/local/share/bash-completion/completions/sluice
/usr/local/share/man/man1/sluice.1
/usr/local/share/man/man5/sluice-policy.5
/usr/local/share/man/man8/sluiced.8"

R=$D/root
t_ok "make install DESTDIR=... (default PREFIX)" mk install "$R"
t_eq "the files installed" "$want_local" "$(files "$R")"
t_eq "binaries are 0755" "755 755 755 755 755 755" \
	"$(stat -c %a "$R"/usr/local/bin/sluice{,d,-probe,-cni,-oci-hook} "$R/usr/local/lib/sluice/sluice-uplink" | xargs)"
t_eq "the rest is 0644" "644" \
	"$(find "$R" -type f ! -path '*/bin/*' ! -name sluice-uplink -exec stat -c %a {} + | sort -u | xargs)"
t_rc "the installed sluice runs" 0 "$R/usr/local/bin/sluice" --version
t_eq "  ... the same version as the one given" "$("$BIN/sluice" --version)" "$T_OUT"
t_ok "the installed sample is valid" "$R/usr/local/bin/sluiced" --check-config \
	--config "$R/etc/sluice/sluiced.yaml.sample"
unit=$(cat "$R/usr/local/lib/systemd/system/sluiced.service")
t_contains "sluiced.service runs the installed sluiced" "$unit" "ExecStart=/usr/local/bin/sluiced"
t_not_contains "  ... no placeholder is left in the units" \
	"$unit$(cat "$R/usr/local/lib/systemd/system/sluice-netns.service")" "@"
t_contains "sluice-netns.service runs the installed sluice-uplink" \
	"$(cat "$R/usr/local/lib/systemd/system/sluice-netns.service")" \
	"ExecStart=/usr/local/lib/sluice/sluice-uplink up"
# systemd-analyze checks the units' syntax (it also wants their programs
# at the paths named, which are in the DESTDIR only: those complaints are
# left out).
if command -v systemd-analyze >/dev/null; then
	t_run systemd-analyze verify --man=no "$R"/usr/local/lib/systemd/system/*.service
	t_eq "systemd-analyze verify: no complaint but the programs outside DESTDIR" "" \
		"$(grep -vE '^[a-z-]+\.service: Command /usr/local/[a-z/-]+ is not executable: No such file or directory$' <<<"$T_ERR")"
else
	t_skip "systemd-analyze verify" "no systemd-analyze"
fi

# A configuration of the user's own stays through install and uninstall.
echo "workers: 1" >"$R/etc/sluice/sluiced.yaml"
t_ok "make install again (over an installed tree)" mk install "$R"
t_eq "  ... the user's sluiced.yaml is untouched" "workers: 1" "$(cat "$R/etc/sluice/sluiced.yaml")"
t_ok "make uninstall" mk uninstall "$R"
t_eq "uninstall leaves only the user's sluiced.yaml" "/etc/sluice/sluiced.yaml" "$(files "$R")"
rm -f "$R/etc/sluice/sluiced.yaml"
t_ok "make install, then uninstall once more" mk install "$R"
t_ok "  ... uninstall" mk uninstall "$R"
t_eq "  ... nothing is left" "" "$(files "$R")"
t_ok "  ... nor sluice's own folders" test ! -e "$R/usr/local/lib/sluice" -a ! -e "$R/etc/sluice"

# PREFIX=/usr: the units name /usr paths; the sample still goes to /etc.
R=$D/usr
t_ok "make install PREFIX=/usr" mk install "$R" PREFIX=/usr
t_eq "the files installed under /usr" "$(sed 's|^/usr/local/|/usr/|' <<<"$want_local")" "$(files "$R")"
t_contains "sluiced.service runs /usr/bin/sluiced" \
	"$(cat "$R/usr/lib/systemd/system/sluiced.service")" "ExecStart=/usr/bin/sluiced"
t_ok "make uninstall PREFIX=/usr" mk uninstall "$R" PREFIX=/usr
t_eq "  ... nothing is left" "" "$(files "$R")"

# install builds, then installs what install-files does; never packages.
t_run make -n install DESTDIR="$D/dry" BIN="$BIN"
t_contains "make -n install: install-files after the build" "$T_OUT" "install-files"
t_not_contains "make -n install runs no apt-get" "$T_OUT" "apt-get"
t_not_contains "  ... nor scripts/deps.sh" "$T_OUT" "deps.sh"

t_done
