#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: alone (run.sh): npm, pip and JVM caches of the machine, and much CPU
# The client matrix: common HTTPS clients trust the sandbox's CA through the
# environment `sluice exec` and `sluice env` give, and nothing else (no -k,
# no CA flag of their own). Against an intercepted host (a leaf from the
# sandbox's CA), each client is run
#   - inside `sluice exec`, and must succeed, with the origin seeing its
#     request;
#   - outside the contained runner (`ip netns exec`, where the host's own
#     system store lacks the sandbox's CA), with the `sluice env`
#     environment only: it must succeed with it, and fail, the origin seeing
#     nothing, when the variables that client reads are taken out. That is
#     the check that each variable does the work (inside the runner the
#     bundle is also the system store, so a client reading only that
#     passes there without any variable).
# A client that is not installed is skipped, saying so.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

# Nothing of the caller's own trust settings may reach a client: what it
# trusts comes from sluice's environment alone.
unset SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS \
	GIT_SSL_CAINFO PIP_CERT npm_config_cafile NPM_CONFIG_CAFILE CARGO_HTTP_CAINFO \
	AWS_CA_BUNDLE DENO_CERT BUNDLE_SSL_CA_CERT NODE_OPTIONS PIP_CONFIG_FILE NPM_CONFIG_USERCONFIG

broker_world cl1
SECRET="s3cr3t-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$D/secret"
chmod 600 "$D/secret"
broker_config
# echo.world.test is in a credential's scope: its TLS is ended at the broker
# with a leaf from the sandbox's CA, whatever the path.
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
      ports: [443]
credentials:
  - name: echo-token
    source: { file: $D/secret }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/api/*"] }
EOF

# --- what the origin serves under /files/ (echo.py --files) ------------------
F=$D/files
mkdir -p "$F/pypi/simple/sluiceprobe" "$F/npm/sluiceprobe"
# A PEP 503 simple index with one release.
cat >"$F/pypi/simple/sluiceprobe/index.html" <<'EOF'
<!DOCTYPE html>
<html><body>
<a href="sluiceprobe-1.0.tar.gz#sha256=0000000000000000000000000000000000000000000000000000000000000000">sluiceprobe-1.0.tar.gz</a>
</body></html>
EOF
# An npm registry document (a packument) with one version.
cat >"$F/npm/sluiceprobe/index.json" <<'EOF'
{"name": "sluiceprobe", "dist-tags": {"latest": "1.0.0"},
 "versions": {"1.0.0": {"name": "sluiceprobe", "version": "1.0.0",
   "dist": {"tarball": "https://echo.world.test/files/npm/sluiceprobe-1.0.0.tgz",
            "shasum": "0000000000000000000000000000000000000000"}}}}
EOF
# A cargo sparse registry: its config.json and the search API's answer (the
# query is not part of the file's name).
mkdir -p "$F/cargo/index" "$F/cargo/api/api/v1"
cat >"$F/cargo/index/config.json" <<'EOF'
{"dl": "https://echo.world.test/files/cargo/dl", "api": "https://echo.world.test/files/cargo/api"}
EOF
cat >"$F/cargo/api/api/v1/crates" <<'EOF'
{"crates": [{"name": "sluiceprobe", "max_version": "1.0.0", "description": "probe"}],
 "meta": {"total": 1}}
EOF
# An S3 ListBuckets answer, for the AWS CLI (--endpoint-url names /files/s3).
mkdir -p "$F/s3"
cat >"$F/s3/index.html" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
<Owner><ID>sluice</ID><DisplayName>sluice</DisplayName></Owner>
<Buckets><Bucket><Name>sluiceprobe</Name><CreationDate>2026-01-01T00:00:00.000Z</CreationDate></Bucket></Buckets>
</ListAllMyBucketsResult>
EOF
# A git repository served over dumb HTTP: info/refs is all ls-remote reads.
GIT_REF=
if command -v git >/dev/null; then
	g=(git -c init.defaultBranch=main -c user.name=t -c user.email=t@t -c commit.gpgsign=false)
	"${g[@]}" init -q "$D/gitsrc" &&
		"${g[@]}" -C "$D/gitsrc" commit -q --allow-empty -m probe &&
		"${g[@]}" clone -q --bare "$D/gitsrc" "$F/repo.git" &&
		git -C "$F/repo.git" update-server-info &&
		GIT_REF=$(git -C "$F/repo.git" rev-parse refs/heads/main)
fi

broker_start || { echo "0 passed, 1 failed"; exit 1; }
t_ok "sluice create" S create "$S1" --policy "$D/pol.yaml"
BUNDLE=/run/sluice-sandboxes/$S1/ca-bundle.crt

# --- the environment ------------------------------------------------------------
CA_VARS="SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO"
CA_VARS+=" PIP_CERT npm_config_cafile NPM_CONFIG_CAFILE CARGO_HTTP_CAINFO AWS_CA_BUNDLE"
CA_VARS+=" DENO_CERT BUNDLE_SSL_CA_CERT"
t_ok "sluice env" S env "$S1"
ENV_OUT=$T_OUT
missing=()
for v in $CA_VARS; do
	grep -qx "$v=$BUNDLE" <<<"$ENV_OUT" || missing+=("$v is not $BUNDLE")
done
t_none "sluice env names the sandbox's bundle in every CA variable" "${missing[@]}"
# shellcheck disable=SC2086 # a list of names
t_ok "sluice exec gives the same" S exec "$S1" -- printenv $CA_VARS
t_eq "every CA variable, inside the runner" \
	"$(for v in $CA_VARS; do echo "$BUNDLE"; done)" "$T_OUT"

# --- the clients ------------------------------------------------------------------
# seen PATH: how many requests for PATH (the start of it) the origins logged.
seen() { world_echo_log | grep -cF "\"path\": \"$1"; }

X() { S exec "$S1" -- "$@"; }
# H [-only] VAR... -- CMD...: CMD in the sandbox's network namespace but
# outside the runner (the host's files, its system store), with the
# `sluice env` environment less the VARs named (with -only: less every CA
# variable but the VARs named), and nothing else but PATH and a fresh HOME
# (so that no cache of an earlier run answers for the network: npm's does).
H() {
	local only=0 kv name home
	local -a names=() envs=()
	[ "$1" = -only ] && { only=1; shift; }
	while [ $# -gt 0 ] && [ "$1" != -- ]; do names+=("$1"); shift; done
	shift
	while IFS= read -r kv; do
		[ -n "$kv" ] || continue
		name=${kv%%=*}
		if [ $only = 1 ]; then
			[[ " $CA_VARS " == *" $name "* ]] && [[ " ${names[*]} " != *" $name "* ]] &&
				continue
		else
			[[ " ${names[*]} " == *" $name "* ]] && continue
		fi
		envs+=("$kv")
	done <<<"$ENV_OUT"
	home=$(mktemp -d "$D/home.XXXXXX") || return 1
	ip netns exec "$S1" env -i PATH=/usr/bin:/bin HOME="$home" "${envs[@]}" "$@"
}

# client NAME PATH WANT "VARS" CMD...: the checks above for one client. PATH
# is what the origin must see (the start of it); WANT, a string its output
# must hold; VARS, the variables it reads, its own first ("" for none: it
# then fails outside the runner even with the whole environment, which is
# shown). Outside the runner it must succeed with the whole environment and
# with its own variable alone of all the CA ones, and fail without VARS.
client() {
	local name=$1 path=$2 want=$3 vars=$4 n
	shift 4
	n=$(seen "$path")
	t_ok "$name, inside sluice exec" X "$@"
	t_contains "$name: its output" "$T_OUT" "$want"
	t_eq "$name: the origin saw its request" "$((n + 1))" "$(seen "$path")"
	if [ -z "$vars" ]; then
		n=$(seen "$path")
		t_fails "$name, outside the runner: no variable to read, the system store lacks the CA" \
			H -- "$@"
		t_eq "$name: the origin saw nothing" "$n" "$(seen "$path")"
		return
	fi
	n=$(seen "$path")
	t_ok "$name, outside the runner, with the sluice env environment" H -- "$@"
	t_contains "$name: its output" "$T_OUT" "$want"
	t_eq "$name: the origin saw its request" "$((n + 1))" "$(seen "$path")"
	n=$(seen "$path")
	t_ok "$name, outside the runner, with ${vars%% *} alone of the CA variables" \
		H -only "${vars%% *}" -- "$@"
	t_eq "$name: the origin saw its request" "$((n + 1))" "$(seen "$path")"
	n=$(seen "$path")
	# shellcheck disable=SC2086 # a list of names
	t_fails "$name, outside the runner, without $vars" H $vars -- "$@"
	t_eq "$name: the origin saw nothing" "$n" "$(seen "$path")"
}

# have CMD: installed (on the host, where the runner's /usr comes from).
have() { command -v "$1" >/dev/null 2>&1; }
PY=/usr/bin/python3
URL=https://echo.world.test

client curl /clients/curl '"path": "/clients/curl"' "CURL_CA_BUNDLE SSL_CERT_FILE" \
	curl -sf -m 10 "$URL/clients/curl"

if have wget; then
	client wget /clients/wget '"path": "/clients/wget"' "" \
		wget -q -O - --timeout=10 --tries=1 "$URL/clients/wget"
else
	t_skip "wget" "not installed (apt-get install wget)"
fi

client "python3 urllib" /clients/urllib 200 "SSL_CERT_FILE" \
	$PY -c 'import urllib.request as u; print(u.urlopen("'"$URL"'/clients/urllib", timeout=10).status)'

if $PY -c 'import requests' 2>/dev/null; then
	client "python3 requests" /clients/requests 200 "REQUESTS_CA_BUNDLE CURL_CA_BUNDLE" \
		$PY -c 'import requests; print(requests.get("'"$URL"'/clients/requests", timeout=10).status_code)'
else
	t_skip "python3 requests" "not installed (apt-get install python3-requests)"
fi

# pip: --retries 0 only so that a refused certificate fails at once.
if $PY -m pip --version >/dev/null 2>&1; then
	# pip's requests also reads REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE.
	client pip /files/pypi/simple/sluiceprobe/ "sluiceprobe (1.0)" \
		"PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE" \
		$PY -m pip index versions sluiceprobe --index-url "$URL/files/pypi/simple/" \
		--retries 0 --timeout 10 --disable-pip-version-check
else
	t_skip "pip" "not installed (apt-get install python3-pip)"
fi

if have npm; then
	client npm /files/npm/sluiceprobe 1.0.0 "npm_config_cafile NPM_CONFIG_CAFILE" \
		npm view sluiceprobe version --registry "$URL/files/npm/" --fetch-retries 0
	# npm's config names are case-insensitive: the upper-case one alone.
	n=$(seen /files/npm/sluiceprobe)
	t_ok "npm, outside the runner, with NPM_CONFIG_CAFILE alone of the CA variables" \
		H -only NPM_CONFIG_CAFILE -- \
		npm view sluiceprobe version --registry "$URL/files/npm/" --fetch-retries 0
	t_eq "npm: the origin saw its request" "$((n + 1))" "$(seen /files/npm/sluiceprobe)"
else
	t_skip "npm" "not installed (apt-get install npm)"
fi

# node's fetch ignores HTTPS_PROXY: the transparent path takes it.
if have node; then
	client "node fetch" /clients/node '"path": "/clients/node"' "NODE_EXTRA_CA_CERTS" \
		node -e 'fetch("'"$URL"'/clients/node").then(async r => {
			if (!r.ok) process.exit(1); console.log(await r.text()) })
			.catch(e => { console.error(e.cause || e); process.exit(1) })'
else
	t_skip "node fetch" "not installed (apt-get install nodejs)"
fi

if [ -n "$GIT_REF" ]; then
	client git /files/repo.git/info/refs "$GIT_REF" "GIT_SSL_CAINFO" \
		git ls-remote "$URL/files/repo.git"
else
	t_skip "git" "not installed, or the test repository could not be made (apt-get install git)"
fi

# cargo: Debian's (under /usr) runs inside the runner too; a rustup one
# (under /root, which the runner does not show) only outside it.
CARGO=$(rustup which cargo 2>/dev/null || command -v cargo)
if [ -n "$CARGO" ] && [ -x "$CARGO" ]; then
	CREG=(env CARGO_REGISTRIES_SLUICE_INDEX="sparse+$URL/files/cargo/index/")
	csearch() { "$@" "${CREG[@]}" "$CARGO" search --registry sluice sluiceprobe; }
	if [[ $CARGO == /usr/* ]]; then
		n=$(seen /files/cargo/api/)
		t_ok "cargo, inside sluice exec" csearch X
		t_eq "cargo: the origin saw its request" "$((n + 1))" "$(seen /files/cargo/api/)"
	else
		t_skip "cargo, inside sluice exec" "$CARGO is not under /usr: the runner does not show it"
	fi
	n=$(seen /files/cargo/api/)
	t_ok "cargo, outside the runner, with the sluice env environment" csearch H --
	t_contains "cargo: its output" "$T_OUT" 'sluiceprobe = "1.0.0"'
	t_eq "cargo: the origin saw its request" "$((n + 1))" "$(seen /files/cargo/api/)"
	n=$(seen /files/cargo/)
	t_ok "cargo, outside the runner, with CARGO_HTTP_CAINFO alone of the CA variables" \
		csearch H -only CARGO_HTTP_CAINFO --
	t_eq "cargo: the origin saw its requests" "$((n + 2))" "$(seen /files/cargo/)"
	n=$(seen /files/cargo/)
	t_fails "cargo, outside the runner, without CARGO_HTTP_CAINFO SSL_CERT_FILE" \
		csearch H CARGO_HTTP_CAINFO SSL_CERT_FILE --
	t_contains "cargo: refuses the sandbox's leaf" "$T_ERR" "SSL certificate problem"
	t_eq "cargo: the origin saw nothing" "$n" "$(seen /files/cargo/)"
else
	t_skip "cargo" "not installed (apt-get install cargo)"
fi

# The AWS CLI (botocore): where installed, outside the runner (a pip one
# lives outside /usr).
AWS=$(pyenv which aws 2>/dev/null || command -v aws)
if [ -n "$AWS" ] && [ -x "$AWS" ]; then
	awsls() {
		"$@" env AWS_ACCESS_KEY_ID=none AWS_SECRET_ACCESS_KEY=none AWS_DEFAULT_REGION=us-east-1 \
			"$AWS" s3api list-buckets --no-sign-request --endpoint-url "$URL/files/s3" \
			--cli-connect-timeout 10 --query 'Buckets[].Name' --output text
	}
	n=$(seen /files/s3)
	t_ok "aws, outside the runner, with the sluice env environment" awsls H --
	t_contains "aws: its output" "$T_OUT" sluiceprobe
	t_eq "aws: the origin saw its request" "$((n + 1))" "$(seen /files/s3)"
	n=$(seen /files/s3)
	t_ok "aws, outside the runner, with AWS_CA_BUNDLE alone of the CA variables" \
		awsls H -only AWS_CA_BUNDLE --
	t_eq "aws: the origin saw its request" "$((n + 1))" "$(seen /files/s3)"
	n=$(seen /files/s3)
	# botocore falls back on REQUESTS_CA_BUNDLE.
	t_fails "aws, outside the runner, without AWS_CA_BUNDLE REQUESTS_CA_BUNDLE" \
		awsls H AWS_CA_BUNDLE REQUESTS_CA_BUNDLE --
	t_contains "aws: refuses the sandbox's leaf" "$T_ERR" "CERTIFICATE_VERIFY_FAILED"
	t_eq "aws: the origin saw nothing" "$n" "$(seen /files/s3)"
else
	t_skip "aws" "not installed"
fi

# Java reads no variable: README's recipe, a keystore with the system's CAs
# and the sandbox's, named by JAVA_TOOL_OPTIONS. Outside the runner only:
# Debian's JVM reads /etc/java-N-openjdk/security/java.security, which the
# runner's /etc does not hold, so no JVM starts inside `sluice exec` today.
# Java ignores HTTPS_PROXY: the transparent path takes it.
JKS=/etc/ssl/certs/java/cacerts
if have java && have keytool && [ -f "$JKS" ] &&
	java --list-modules 2>/dev/null | grep -q '^jdk.compiler'; then
	cat >"$D/Fetch.java" <<'EOF'
import java.net.URL;
import javax.net.ssl.HttpsURLConnection;

public class Fetch {
	public static void main(String[] args) throws Exception {
		HttpsURLConnection c = (HttpsURLConnection) new URL(args[0]).openConnection();
		c.setConnectTimeout(10000);
		c.setReadTimeout(10000);
		System.out.println(c.getResponseCode());
	}
}
EOF
	n=$(seen /clients/java)
	t_fails "java, outside the runner, with the system keystore" \
		H -- java "$D/Fetch.java" "$URL/clients/java"
	t_contains "java: refuses the sandbox's leaf" "$T_ERR" "PKIX path building failed"
	t_eq "java: the origin saw nothing" "$n" "$(seen /clients/java)"
	S ca "$S1" >"$D/sandbox-ca.crt"
	t_ok "README's recipe: the sandbox's CA imported into a copy of the system keystore" \
		bash -c 'cp "$1" "$2" && keytool -importcert -noprompt -alias sluice \
			-keystore "$2" -storepass changeit <"$3"' _ "$JKS" "$D/cacerts" "$D/sandbox-ca.crt"
	t_ok "java, outside the runner, with JAVA_TOOL_OPTIONS naming it" \
		H -- env JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore="$D/cacerts" \
		java "$D/Fetch.java" "$URL/clients/java"
	t_contains "java: its output" "$T_OUT" 200
	t_eq "java: the origin saw its request" "$((n + 1))" "$(seen /clients/java)"
else
	t_skip "java" "no JDK with keytool and Debian's keystore (apt-get install default-jdk-headless)"
fi

# --- nothing leaked ------------------------------------------------------------
t_rc "the secret is in no client's output or the broker's log" 1 grep -qF "$SECRET" "$BROKER_LOG"
t_eq "the decoys saw nothing" "" "$(world_decoy_hits)"
t_done
