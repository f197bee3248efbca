#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The recipes in policies/: each passes `sluice policy check`, and each lets
# its client do its job inside `sluice exec` with that policy alone, against
# stand-ins for the real hosts, while a host outside the recipe is refused.
#
# The test world has no internet: dnsmasq answers the recipes' real names
# (pypi.org, registry.npmjs.org, github.com ...) with the echo origin, whose
# certificate names them (tests/world/world.sh), and the origin serves what
# each client reads from files under /files/ (echo.py --files). So the
# client meets the real name, SNI and Host; only the URL's path starts with
# /files/ (the index URL, registry or sources line a user would write, with
# that prefix). The stand-in origins' certificates come from the test
# world's CA, which stands in for the public CAs a client trusts: it is
# added to the sandbox's own bundle, inside the sandbox, for the clients
# whose hosts are spliced (not intercepted).
#
#   pip   python-packages.yaml  pip download of a wheel: the index on
#                               pypi.org, the file on files.pythonhosted.org
#   npm   npm-registry.yaml     npm install of a tiny package (document and
#                               tarball on registry.npmjs.org)
#   git   git-clone.yaml        git clone of a tiny repository on github.com
#                               (dumb HTTP: what a static origin can serve)
#   apt   apt-debian.yaml       apt-get update against a small repository on
#                               deb.debian.org, port 80, signed with a key
#                               made here (signed-by): apt checks the
#                               signature as it would Debian's; the same
#                               repository with its Release changed after
#                               signing is refused
#   API   github-api.yaml       curl with $GITHUB_TOKEN (the placeholder):
#                               the origin sees the token; out of scope, the
#                               placeholder is refused
# A client that is not installed is skipped, saying so.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
PY=/usr/bin/python3
# Nothing of the caller's own trust or proxy settings reaches a client.
unset SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS \
	GIT_SSL_CAINFO PIP_CERT npm_config_cafile NPM_CONFIG_CAFILE PIP_CONFIG_FILE \
	NPM_CONFIG_USERCONFIG PIP_INDEX_URL npm_config_registry

# --- every recipe is a valid policy ---------------------------------------------
for f in policies/*.yaml; do
	t_ok "sluice policy check $f" "$BIN/sluice" policy check "$f"
done
missing=()
for r in python-packages npm-registry git-clone apt-debian github-api; do
	[ -f "policies/$r.yaml" ] || missing+=("policies/$r.yaml")
done
t_none "every recipe is in policies/" "${missing[@]}"

broker_world rpip rnpm rgit rapt rapi
SB_PIP=$S1 SB_NPM=$S2 SB_GIT=$S3 SB_APT=$S4 SB_API=$S5
broker_config
broker_start || { echo "0 passed, 1 failed"; exit 1; }

F=$D/files	# what the origin serves under /files/
C=$D/client	# bound read-only into the sandboxes
mkdir -p "$F" "$C"
cp "$WORLD_CA" "$C/world-ca.crt"
# with-world-ca CMD...: inside the sandbox, CMD with the sandbox's bundle
# plus the test world's CA in every variable a client here reads.
cat >"$C/with-world-ca" <<'EOF'
#!/bin/sh
b=$HOME/trust.pem
cat "$SSL_CERT_FILE" "$(dirname "$0")/world-ca.crt" >"$b" || exit 1
export SSL_CERT_FILE="$b" REQUESTS_CA_BUNDLE="$b" CURL_CA_BUNDLE="$b" PIP_CERT="$b" \
	npm_config_cafile="$b" NPM_CONFIG_CAFILE="$b" NODE_EXTRA_CA_CERTS="$b" GIT_SSL_CAINFO="$b"
exec "$@"
EOF
chmod 755 "$C/with-world-ca"

# X SANDBOX CMD...: CMD inside `sluice exec`, trusting the world's CA too.
X() {
	local sb=$1
	shift
	S exec --bind "$C:$C:ro" "$sb" -- "$C/with-world-ca" "$@"
}
# seen PATH: how many requests for PATH (its start) the origin logged.
seen() { world_echo_log | grep -cF "\"path\": \"$1"; }
# hosts PATH: the Host of each request for PATH (its start) the origin logged.
hosts() {
	world_echo_log | jq -r --arg p "$1" 'select(.path | startswith($p)) |
		.headers[] | select(.[0] | ascii_downcase == "host") | .[1]' | sort -u
}
# refused SANDBOX URL [REASON]: a request to URL, outside the sandbox's
# recipe, is refused by the broker (403 REASON, default not-allowlisted, on
# the explicit proxy) and the origin sees nothing.
refused() {
	local n
	n=$(seen /recipes/outside)
	t_run X "$1" curl -s -m 10 -o /dev/null -D - "$2/recipes/outside"
	t_eq "$1: $2, outside the recipe, is refused" "403 ${3:-not-allowlisted}" \
		"$(t_status_reason <<<"$T_OUT")"
	t_eq "$1: the origin saw nothing of it" "$n" "$(seen /recipes/outside)"
}
have() { command -v "$1" >/dev/null 2>&1; }

# --- pip: python-packages.yaml --------------------------------------------------
if $PY -m pip --version >/dev/null 2>&1; then
	t_ok "pip: sluice create with python-packages.yaml" \
		S create "$SB_PIP" --policy policies/python-packages.yaml
	# A wheel (pip downloads it without building anything), linked from a
	# PEP 503 index on pypi.org to files.pythonhosted.org, as PyPI does.
	mkdir -p "$F/pypi/simple/sluiceprobe" "$F/pythonhosted/packages"
	WHL=sluiceprobe-1.0-py3-none-any.whl
	$PY - "$F/pythonhosted/packages/$WHL" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("sluiceprobe/__init__.py", "")
    z.writestr("sluiceprobe-1.0.dist-info/METADATA",
               "Metadata-Version: 2.1\nName: sluiceprobe\nVersion: 1.0\n")
    z.writestr("sluiceprobe-1.0.dist-info/WHEEL",
               "Wheel-Version: 1.0\nGenerator: sluice\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("sluiceprobe-1.0.dist-info/RECORD", "")
EOF
	sum=$(sha256sum "$F/pythonhosted/packages/$WHL" | cut -d' ' -f1)
	cat >"$F/pypi/simple/sluiceprobe/index.html" <<EOF
<!DOCTYPE html>
<html><body>
<a href="https://files.pythonhosted.org/files/pythonhosted/packages/$WHL#sha256=$sum">$WHL</a>
</body></html>
EOF
	PIP=($PY -m pip download --no-deps --only-binary=:all: --no-cache-dir -d dl
		--retries 0 --timeout 10 --disable-pip-version-check)
	t_ok "pip download, inside sluice exec with python-packages.yaml" \
		X "$SB_PIP" "${PIP[@]}" --index-url https://pypi.org/files/pypi/simple/ sluiceprobe
	t_contains "pip: saved the wheel" "$T_OUT" "Saved ./dl/$WHL"
	t_eq "pip: the index came from pypi.org" pypi.org "$(hosts /files/pypi/simple/)"
	t_eq "pip: the wheel came from files.pythonhosted.org" files.pythonhosted.org \
		"$(hosts /files/pythonhosted/)"
	n=$(seen /files/pypi/)
	t_fails "pip: an index outside the recipe fails" \
		X "$SB_PIP" "${PIP[@]}" --index-url https://echo.world.test/files/pypi/simple/ sluiceprobe
	t_eq "pip: the origin saw nothing of it" "$n" "$(seen /files/pypi/)"
	refused "$SB_PIP" https://registry.npmjs.org
else
	t_skip "pip" "not installed for $PY (apt-get install python3-pip)"
fi

# --- npm: npm-registry.yaml -----------------------------------------------------
if have npm; then
	t_ok "npm: sluice create with npm-registry.yaml" \
		S create "$SB_NPM" --policy policies/npm-registry.yaml
	# A package document and its tarball, at the registry's own layout.
	mkdir -p "$D/npmsrc/package" "$F/npm/sluiceprobe/-"
	cat >"$D/npmsrc/package/package.json" <<'EOF'
{"name": "sluiceprobe", "version": "1.0.0", "main": "index.js"}
EOF
	echo 'module.exports = "sluiceprobe";' >"$D/npmsrc/package/index.js"
	TGZ=$F/npm/sluiceprobe/-/sluiceprobe-1.0.0.tgz
	tar -C "$D/npmsrc" -czf "$TGZ" package
	sha1=$(sha1sum "$TGZ" | cut -d' ' -f1)
	sri=sha512-$(openssl dgst -sha512 -binary "$TGZ" | base64 -w0)
	cat >"$F/npm/sluiceprobe/index.json" <<EOF
{"name": "sluiceprobe", "dist-tags": {"latest": "1.0.0"},
 "versions": {"1.0.0": {"name": "sluiceprobe", "version": "1.0.0", "main": "index.js",
   "dist": {"tarball": "https://registry.npmjs.org/files/npm/sluiceprobe/-/sluiceprobe-1.0.0.tgz",
            "shasum": "$sha1", "integrity": "$sri"}}}}
EOF
	NPM=(npm install --no-audit --no-fund --fetch-retries 0 --cache "./npm-cache")
	t_ok "npm install, inside sluice exec with npm-registry.yaml" \
		X "$SB_NPM" "${NPM[@]}" --registry https://registry.npmjs.org/files/npm/ sluiceprobe
	t_ok "npm: the package is installed" \
		S exec "$SB_NPM" -- node -e 'console.log(require("sluiceprobe"))'
	t_eq "npm: it is the package served" sluiceprobe "$T_OUT"
	t_eq "npm: document and tarball came from registry.npmjs.org" registry.npmjs.org \
		"$(hosts /files/npm/)"
	n=$(seen /files/npm/)
	t_fails "npm: a registry outside the recipe fails" \
		X "$SB_NPM" npm view sluiceprobe version --fetch-retries 0 --cache ./npm-cache2 \
		--registry https://echo.world.test/files/npm/
	t_eq "npm: the origin saw nothing of it" "$n" "$(seen /files/npm/)"
	refused "$SB_NPM" https://pypi.org
else
	t_skip "npm" "not installed (apt-get install npm)"
fi

# --- git: git-clone.yaml --------------------------------------------------------
if have git; then
	t_ok "git: sluice create with git-clone.yaml" \
		S create "$SB_GIT" --policy policies/git-clone.yaml
	g=(git -c init.defaultBranch=main -c user.name=t -c user.email=t@t -c commit.gpgsign=false)
	GIT_REF=
	"${g[@]}" init -q "$D/gitsrc" &&
		echo "sluice recipe" >"$D/gitsrc/README" &&
		"${g[@]}" -C "$D/gitsrc" add README &&
		"${g[@]}" -C "$D/gitsrc" commit -q -m probe &&
		"${g[@]}" clone -q --bare "$D/gitsrc" "$F/acme/widget.git" &&
		git -C "$F/acme/widget.git" update-server-info &&
		GIT_REF=$(git -C "$F/acme/widget.git" rev-parse refs/heads/main)
	t_ok "git: the test repository is made" test -n "$GIT_REF"
	t_ok "git clone, inside sluice exec with git-clone.yaml" \
		X "$SB_GIT" git clone -q https://github.com/files/acme/widget.git widget
	t_ok "git: the clone is at the commit served" \
		S exec "$SB_GIT" -- git -C widget rev-parse HEAD
	t_eq "git: the commit" "$GIT_REF" "$T_OUT"
	t_ok "git: its file" S exec "$SB_GIT" -- cat widget/README
	t_eq "git: the file's content" "sluice recipe" "$T_OUT"
	t_eq "git: it came from github.com" github.com "$(hosts /files/acme/)"
	n=$(seen /files/acme/)
	t_fails "git: a clone from a host outside the recipe fails" \
		X "$SB_GIT" git clone -q https://echo.world.test/files/acme/widget.git w2
	t_eq "git: the origin saw nothing of it" "$n" "$(seen /files/acme/)"
	refused "$SB_GIT" https://api.github.com
else
	t_skip "git" "not installed (apt-get install git)"
fi

# --- apt: apt-debian.yaml -------------------------------------------------------
# A repository with one package's index, its Release signed with a key made
# here (InRelease), and a second suite whose Release was changed after it was
# signed. The sources line names the key (signed-by): apt checks the
# signature exactly as it checks Debian's with the archive keyring. apt runs
# on its own directories in the workspace (the system's are read-only in the
# runner), as root in the sandbox's user namespace.
if have apt-get && have gpg; then
	t_ok "apt: sluice create with apt-debian.yaml" \
		S create "$SB_APT" --policy policies/apt-debian.yaml
	export GNUPGHOME=$D/gnupg
	mkdir -m 700 "$GNUPGHOME"
	t_ok "apt: a signing key" gpg --batch --pinentry-mode loopback --passphrase '' \
		--quick-gen-key "sluice test repository" ed25519 sign 1d
	gpg --batch --export >"$C/repo-key.gpg"
	A=$F/debian
	for suite in stable tampered; do
		mkdir -p "$A/dists/$suite/main/binary-all"
		cat >"$A/dists/$suite/main/binary-all/Packages" <<'EOF'
Package: sluiceprobe
Version: 1.0
Architecture: all
Maintainer: sluice <dev@sluice>
Filename: pool/main/s/sluiceprobe/sluiceprobe_1.0_all.deb
Size: 1000
SHA256: 0000000000000000000000000000000000000000000000000000000000000000
Description: sluice recipe test package

EOF
		gzip -9nk "$A/dists/$suite/main/binary-all/Packages"
		(
			cd "$A/dists/$suite" || exit 1
			printf 'Origin: sluice\nLabel: sluice\nSuite: %s\nCodename: %s\n' "$suite" "$suite"
			printf 'Date: %s\n' "$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S UTC')"
			printf 'Architectures: all amd64 arm64\nComponents: main\nSHA256:\n'
			for f in main/binary-all/Packages main/binary-all/Packages.gz; do
				printf ' %s %s %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$(stat -c %s "$f")" "$f"
			done
		) >"$A/dists/$suite/Release"
		gpg --batch --yes --clearsign -o "$A/dists/$suite/InRelease" "$A/dists/$suite/Release"
	done
	# Changed after signing, as a mirror or anyone on the path of plain
	# HTTP could: the signature no longer holds.
	sed -i 's/^Label: sluice$/Label: changed/' "$A/dists/tampered/InRelease"
	unset GNUPGHOME
	for suite in stable tampered; do
		echo "deb [signed-by=$C/repo-key.gpg] http://deb.debian.org/files/debian $suite main" \
			>"$C/$suite.list"
	done
	mkdir -p "$C/empty.d"
	# apt_get [-cache] SUITE ARGS...: apt-get (apt-cache) on the
	# workspace's own state.
	apt_get() {
		local prog=apt-get suite
		[ "$1" = -cache ] && { prog=apt-cache; shift; }
		suite=$1
		shift
		S exec --bind "$C:$C:ro" "$SB_APT" -- bash -c '
			mkdir -p "apt-$0/lists/partial" "apt-$0/cache/archives/partial" &&
			exec "$2" -q -o Dir::Etc::SourceList="$1/$0.list" \
				-o Dir::Etc::SourceParts="$1/empty.d" \
				-o Dir::State::Lists="$PWD/apt-$0/lists" -o Dir::Cache="$PWD/apt-$0/cache" \
				-o Debug::NoLocking=1 -o APT::Sandbox::User=root \
				-o Acquire::Retries=0 -o Acquire::http::Timeout=10 "${@:3}"' \
			"$suite" "$C" "$prog" "$@"
	}
	t_ok "apt-get update, inside sluice exec with apt-debian.yaml" apt_get stable update
	t_not_contains "apt: no signature warning" "$T_OUT$T_ERR" "GPG error"
	t_not_contains "apt: the repository counts as signed" "$T_OUT$T_ERR" "not signed"
	t_ok "apt: the package is known" apt_get -cache stable show sluiceprobe
	t_contains "apt: its index" "$T_OUT" "Description: sluice recipe test package"
	t_eq "apt: it came from deb.debian.org" deb.debian.org "$(hosts /files/debian/dists/stable/)"
	t_fails "apt: a Release changed after signing is refused" apt_get tampered update
	t_contains "apt: says why" "$T_OUT$T_ERR" "signature"
	n=$(seen /files/debian/)
	echo "deb [signed-by=$C/repo-key.gpg] http://echo.world.test/files/debian stable main" \
		>"$C/outside.list"
	t_run apt_get outside update
	t_contains "apt: a repository outside the recipe fails" "$T_OUT$T_ERR" "echo.world.test"
	t_eq "apt: the origin saw nothing of it" "$n" "$(seen /files/debian/)"
	refused "$SB_APT" http://pypi.org
	# Port 80 only: the recipe's hosts over HTTPS are not in it.
	refused "$SB_APT" https://deb.debian.org port-not-allowed
else
	t_skip "apt" "apt-get or gpg not installed (apt-get install apt gpg)"
fi

# --- an API with a token: github-api.yaml ---------------------------------------
# The recipe as written, but for where the broker reads the secret.
SECRET="ghp_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$D/github-token"
chmod 600 "$D/github-token"
sed "s#/etc/sluice/secrets/github#$D/github-token#" policies/github-api.yaml >"$D/github-api.yaml"
t_ok "API: sluice create with github-api.yaml" S create "$SB_API" --policy "$D/github-api.yaml"
t_ok "API: the sandbox holds a placeholder" S exec "$SB_API" -- printenv GITHUB_TOKEN
PH=$T_OUT
t_not_contains "API: not the token" "$PH" "$SECRET"
API() {
	X "$SB_API" sh -c 'curl -s -m 10 -D - -o /dev/null -X "$0" \
		-H "Authorization: Bearer $GITHUB_TOKEN" "https://api.github.com$1"' "$@"
}
t_ok "API: curl with the placeholder, in scope" API GET /repos/acme/widget
t_eq "API: answered" "200 " "$(t_status_reason <<<"$T_OUT")"
t_contains "API: the origin saw the token" "$(origin /repos/acme/widget)" "Bearer $SECRET"
t_not_contains "API: and not the placeholder" "$(origin /repos/acme/widget)" "$PH"
t_ok "API: a path outside the scope" API GET /user
t_eq "API: is refused" "403 placeholder-out-of-scope" "$(t_status_reason <<<"$T_OUT")"
t_ok "API: a method outside the scope" API DELETE /repos/acme/widget
t_eq "API: is refused" "403 placeholder-out-of-scope" "$(t_status_reason <<<"$T_OUT")"
t_eq "API: the origin saw neither" "" "$(origin /user)$(world_echo_log | grep -F '"DELETE"')"
refused "$SB_API" https://pypi.org

# --- nothing leaked ---------------------------------------------------------------
t_rc "the token is in no log of the broker" 1 grep -qrF "$SECRET" "$BROKER_LOG" "$BROKER_AUDIT"
t_eq "the decoys saw nothing" "" "$(world_decoy_hits)"
t_done
