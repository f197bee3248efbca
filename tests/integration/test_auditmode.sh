#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Audit mode (`sluice create --audit`, or `mode: audit` in the policy):
# names outside the allowlist are reached and audited would-deny with the
# reason they would have got; the address guard, address literals and
# credential rules stay enforced (no decoy is hit); the DNS filter answers
# an unlisted name with a synthetic address and asks nobody upstream until
# a connection is made; `sluice list` and `status` show the mode. Then
# audit then enforce: the same workload under the same policy in enforce
# mode is refused. A broker restart keeps the mode.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

broker_world acli apol enf arun

SECRET="s-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$D/secret"
chmod 600 "$D/secret"
# E: enforce (no mode), echo.world.test only, a placeholder in scope on
# echo.world.test/keep/*. A: the same with `mode: audit`.
policy() {
	cat <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
credentials:
  - name: keep
    source: { file: $D/secret }
    scope: { hosts: [echo.world.test], paths: ["/keep/*"] }
    placeholder: KEEP_TOKEN
    plaintext: allow
EOF
}
policy >"$D/enforce.yaml"
{ policy; echo "mode: audit"; } >"$D/audit.yaml"
# Line 2, column 7: the value.
printf 'version: 1\nmode: permissive\n' >"$D/badmode.yaml"
broker_config "audit_fold: 0"
broker_start || { echo "0 passed, 1 failed"; exit 1; }

# --- bad input ----------------------------------------------------------------------
t_rc "policy check of an unknown mode: exit 1" 1 S policy check "$D/badmode.yaml"
t_contains "says FILE:LINE:COL and what it expects" "$T_ERR$T_OUT" \
	"$D/badmode.yaml:2:7: unknown mode \`permissive\` (expected enforce or audit)"
t_rc "create with it: refused" 1 S create "$S3" --policy "$D/badmode.yaml"
t_not_contains "and not registered" "$(S list)" "$S3"
t_ok "the broker refuses an unknown register word itself" \
	brk_exec python3 tests/integration/ctlclient.py split "$BROKER_SOCK" \
	"register $S3 auto $D/enforce.yaml netns permissive" 0
t_contains "with an error" "$T_OUT" "error:"
t_not_contains "registering nothing" "$(S list)" "$S3"

t_ok "sluice create --audit (enforce policy)" S create "$S1" --policy "$D/enforce.yaml" --audit
t_ok "sluice create, policy with mode: audit" S create "$S2" --policy "$D/audit.yaml"

# Per sandbox: its proxy, its placeholder, a client in its namespace.
declare -A PROXY PH
for s in "$S1" "$S2"; do
	env=$(S env "$s")
	PROXY[$s]=$(sed -n 's|^HTTP_PROXY=http://||p' <<<"$env")
	PH[$s]=$(sed -n 's/^KEEP_TOKEN=//p' <<<"$env")
done
# N SB CMD...: CMD in SB's namespace with the explicit proxy; T SB CMD...: without.
N() { local s=$1; shift; ip netns exec "$s" env "http_proxy=http://${PROXY[$s]}" "https_proxy=http://${PROXY[$s]}" "$@"; }
T() { local s=$1; shift; ip netns exec "$s" "$@"; }
code() { local s=$1; shift; N "$s" curl -s -m 10 -o /dev/null -D - "$@" | t_status_reason; }
tcode() { local s=$1; shift; T "$s" curl -s -m 10 -o /dev/null -w '%{http_code}' "$@"; }
addr() { T "$1" getent ahostsv4 "$2" | awk 'NR == 1 { print $1 }'; }
# audited SB NAME: the audit lines of SB's connections (not DNS) for NAME.
audited() {
	grep -F "\"sandbox\":\"$1\"" "$BROKER_AUDIT" | grep -F "\"name\":\"$2\"" | grep -vF '"proto":"dns"'
}
# wait_audited SB NAME TEXT: until a line of audited SB NAME holds TEXT (5 s at most).
wait_audited() {
	local i
	for ((i = 0; i < 50; i++)); do
		audited "$1" "$2" | grep -qF -- "$3" && return 0
		sleep 0.1
	done
	return 1
}

t_contains "list: the --audit sandbox is in audit mode" "$(S list | awk -v n="$S1" '$1 == n')" " audit "
t_contains "list: the mode: audit one too" "$(S list | awk -v n="$S2" '$1 == n')" " audit "
t_ok "list --json" S list --json
t_contains "list --json says the mode" "$T_OUT" "\"name\":\"$S1\",\"address\""
t_eq "list --json: both audit" "2" "$(grep -o '"mode":"audit"' <<<"$T_OUT" | wc -l)"
t_contains "status counts them" "$(S status)" "sandboxes_audit 2"

# The workload, run in each audit sandbox: $1 the sandbox, $2 a tag for paths.
workload_audit() {
	local s=$1 tag=$2 dn
	# A host outside the allowlist: reached, audited would-deny not-allowlisted.
	t_eq "$tag: explicit HTTP to an unlisted host reaches it" "200 " "$(code "$s" "http://other.world.test/$tag-http")"
	t_contains "$tag: the origin got it" "$(origin "/$tag-http")" "/$tag-http"
	t_ok "$tag: audited would-deny not-allowlisted, mode audit" \
		wait_audited "$s" other.world.test '"decision":"would-deny","reason":"not-allowlisted","mode":"audit"'
	# A listed host on a port its rule does not list.
	t_eq "$tag: an allowed host on another port reaches it" "200 " "$(code "$s" "http://echo.world.test:8080/$tag-port")"
	t_contains "$tag: the origin got it" "$(origin "/$tag-port")" "/$tag-port"
	t_ok "$tag: audited would-deny port-not-allowed" \
		wait_audited "$s" echo.world.test '"decision":"would-deny","reason":"port-not-allowed"'
	# CONNECT, end to end TLS (no credential scope there).
	t_eq "$tag: CONNECT to an unlisted host" "200" \
		"$(N "$s" curl -s -m 10 --cacert "$WORLD_CA" -o /dev/null -w '%{http_code}' "https://other.world.test/$tag-connect")"
	t_contains "$tag: the origin got it" "$(origin "/$tag-connect")" "/$tag-connect"
	t_ok "$tag: audited would-deny (connect)" \
		wait_audited "$s" other.world.test '"proto":"connect"'
	# Transparent: the DNS filter's synthetic address, then the Host / SNI.
	t_eq "$tag: transparent HTTP to an unlisted host" "200" "$(tcode "$s" "http://other.world.test/$tag-thttp")"
	t_contains "$tag: the origin got it" "$(origin "/$tag-thttp")" "/$tag-thttp"
	t_eq "$tag: transparent TLS (SNI) to an unlisted host" "200" \
		"$(tcode "$s" --cacert "$WORLD_CA" "https://other.world.test/$tag-tsni")"
	t_contains "$tag: the origin got it" "$(origin "/$tag-tsni")" "/$tag-tsni"
	t_ok "$tag: audited would-deny (tls)" wait_audited "$s" other.world.test '"proto":"tls"'
	t_eq "$tag: no allow line for the unlisted host" "" \
		"$(audited "$s" other.world.test | grep -F '"decision":"allow"')"

	# The address guard and literals stay enforced.
	t_eq "$tag: metadata name refused" "403 address-denied" "$(code "$s" "http://metadata.world.test/$tag-meta")"
	t_eq "$tag: loopback name refused" "403 address-denied" "$(code "$s" "http://loop.world.test/$tag-loop")"
	t_eq "$tag: private name refused" "403 address-denied" "$(code "$s" "http://rebind.world.test/$tag-priv")"
	t_eq "$tag: metadata literal refused" "403 address-literal" "$(code "$s" "http://169.254.169.254/$tag-lit")"
	t_eq "$tag: loopback literal refused" "403 address-literal" "$(code "$s" "http://127.0.0.1/$tag-lit")"
	t_eq "$tag: private literal refused" "403 address-literal" "$(code "$s" "http://10.0.0.5/$tag-lit")"
	t_eq "$tag: a public literal no cidr rule allows refused" "403 address-literal" \
		"$(code "$s" "http://11.0.2.10/$tag-lit")"
	t_eq "$tag: transparent metadata name refused" "403" "$(tcode "$s" "http://metadata.world.test/$tag-tmeta")"
	t_ok "$tag: audited deny address-denied" \
		wait_audited "$s" metadata.world.test '"decision":"deny","reason":"address-denied"'
	t_eq "$tag: no literal reached the origin" "" "$(origin "/$tag-lit")"

	# A redirect leaving the policy is an allowlist question: relayed, would-deny;
	# where it leads is judged as any request is, the address guard first.
	t_eq "$tag: a redirect out of the policy is relayed" "302 " \
		"$(code "$s" "http://echo.world.test/redirect?to=http://169.254.169.254/$tag-redir")"
	t_ok "$tag: audited would-deny redirect-outside-policy" \
		wait_audited "$s" echo.world.test '"decision":"would-deny","reason":"redirect-outside-policy"'
	t_eq "$tag: following it to the metadata address: refused" "403 address-literal" \
		"$(code "$s" -L "http://echo.world.test/redirect?to=http://169.254.169.254/$tag-redir")"
	t_eq "$tag: following one to an unlisted host: reached" "200 " \
		"$(code "$s" -L "http://echo.world.test/redirect?to=http://other.world.test/$tag-redir2")"
	t_contains "$tag: the origin got it" "$(origin "/$tag-redir2")" "/$tag-redir2"

	# A placeholder outside its scope stays refused, on a listed host and an unlisted one.
	t_eq "$tag: placeholder out of scope (unlisted host)" "403 placeholder-out-of-scope" \
		"$(code "$s" -H "Authorization: Bearer ${PH[$s]}" "http://other.world.test/$tag-ph")"
	t_eq "$tag: placeholder out of scope (listed host, other path)" "403 placeholder-out-of-scope" \
		"$(code "$s" -H "Authorization: Bearer ${PH[$s]}" "http://echo.world.test/$tag-ph2")"
	t_eq "$tag: neither reached an origin" "" "$(origin "/$tag-ph")$(origin "/$tag-ph2")"
	# In scope, but on a port the policy does not list: no secret goes
	# where enforce mode would not let the request go.
	t_eq "$tag: placeholder in scope on an unlisted port: refused as enforce would" "403 port-not-allowed" \
		"$(code "$s" -H "Authorization: Bearer ${PH[$s]}" "http://echo.world.test:8080/keep/$tag-port")"
	t_eq "$tag: it reached no origin" "" "$(origin "/keep/$tag-port")"
	t_eq "$tag: placeholder in scope: reached" "200 " \
		"$(code "$s" -H "Authorization: Bearer ${PH[$s]}" "http://echo.world.test/keep/$tag")"
	t_contains "$tag: with the secret in place" "$(origin "/keep/$tag")" "$SECRET"

	# DNS: an unlisted name gets a synthetic address, nobody upstream is asked
	# until a connection is made.
	dn="$tag.evil.world.test"
	t_contains "$tag: DNS answers an unlisted name" "$(addr "$s" "$dn")" "198.18."
	t_fails "$tag: dnsmasq was not asked about it" world_dns_queried "$dn"
	t_contains "$tag: the DNS line is would-deny with its synthetic answer" \
		"$(grep -F "\"sandbox\":\"$s\"" "$BROKER_AUDIT" | grep -F '"proto":"dns"' | grep -F "\"name\":\"$dn\"")" \
		'"decision":"would-deny","reason":"not-allowlisted","mode":"audit"'
	t_eq "$tag: a connection to it is made" "200" "$(tcode "$s" "http://$dn/$tag-dns")"
	t_ok "$tag: then dnsmasq was asked" world_dns_queried "$dn"
}

workload_audit "$S1" a1
workload_audit "$S2" a2
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_contains "metrics count would-deny decisions" "$(S status --metrics)" 'decision="would-deny"'
t_contains "status summary too" "$(S status)" "would-deny"

# --- audit then enforce -----------------------------------------------------------------
# The same policy without audit: a sandbox created without --audit, and the
# mode: audit sandbox updated to it.
t_ok "create the enforcing sandbox" S create "$S3" --policy "$D/enforce.yaml"
env=$(S env "$S3")
PROXY[$S3]=$(sed -n 's|^HTTP_PROXY=http://||p' <<<"$env")
t_ok "update the mode: audit sandbox to the enforce policy" S update "$S2" --policy "$D/enforce.yaml"
t_ok "update the --audit sandbox to it too" S update "$S1" --policy "$D/enforce.yaml"
t_contains "list: the --audit sandbox stays in audit mode" "$(S list | awk -v n="$S1" '$1 == n')" " audit "
t_contains "list: the updated one enforces" "$(S list | awk -v n="$S2" '$1 == n')" " enforce "
t_contains "list: the new one enforces" "$(S list | awk -v n="$S3" '$1 == n')" " enforce "
t_contains "status counts one" "$(S status)" "sandboxes_audit 1"
for s in "$S3" "$S2"; do
	tag=e-${s##*-}
	t_eq "$tag: explicit HTTP to the unlisted host refused" "403 not-allowlisted" \
		"$(code "$s" "http://other.world.test/$tag-http")"
	t_eq "$tag: the port refused" "403 port-not-allowed" "$(code "$s" "http://echo.world.test:8080/$tag-port")"
	t_eq "$tag: CONNECT refused" "403 not-allowlisted" \
		"$(N "$s" curl -s -m 10 -o /dev/null -D - "https://other.world.test/$tag-connect" | t_status_reason)"
	t_eq "$tag: a redirect out of the policy refused" "403 redirect-outside-policy" \
		"$(code "$s" "http://echo.world.test/redirect?to=http://other.world.test/$tag-redir")"
	t_eq "$tag: DNS refuses the unlisted name" "" "$(addr "$s" "$tag.evil.world.test")"
	t_eq "$tag: transparent to it refused" "000" "$(tcode "$s" "http://other.world.test/$tag-thttp")"
	t_eq "$tag: nothing reached an origin" "" \
		"$(origin "/$tag-http")$(origin "/$tag-port")$(origin "/$tag-connect")$(origin "/$tag-thttp")"
	t_eq "$tag: nothing audited would-deny" "" \
		"$(grep -F "\"sandbox\":\"$s\"" "$BROKER_AUDIT" | grep -F "/$tag-" | grep -F would-deny)"
	t_eq "$tag: audit lines carry no mode" "" \
		"$(grep -F "\"sandbox\":\"$s\"" "$BROKER_AUDIT" | grep -F "/$tag-" | grep -F '"mode":"')"
done

# --- a restart keeps the mode -------------------------------------------------------
broker_stop
broker_start
t_contains "after a restart: --audit sandbox still audit" "$(S list | awk -v n="$S1" '$1 == n')" " audit "
t_contains "the enforcing one still enforces" "$(S list | awk -v n="$S3" '$1 == n')" " enforce "
t_eq "audit mode still lets the unlisted host through" "200 " "$(code "$S1" "http://other.world.test/restart")"
t_ok "audited would-deny" wait_audited "$S1" other.world.test '"path":"/restart"'
t_contains "as would-deny" "$(audited "$S1" other.world.test | grep -F '"/restart"')" '"decision":"would-deny"'
t_eq "enforce still refuses it" "403 not-allowlisted" "$(code "$S3" "http://other.world.test/restart3")"

# --- register --audit: the enforcing sandbox registered again, in audit mode ---------
A3=$(S list | awk -v n="$S3" '$1 == n { print $2 }')
t_ok "unregister the enforcing sandbox" S unregister "$S3"
t_ok "register it again with --audit" S register "$S3" --addr "$A3" --policy "$D/enforce.yaml" --audit
t_contains "register --audit: list says audit" "$(S list | awk -v n="$S3" '$1 == n')" " audit "
t_contains "register --audit: status counts it" "$(S status)" "sandboxes_audit 2"
t_eq "register --audit: the unlisted host is reached" "200 " "$(code "$S3" "http://other.world.test/reg-audit")"
t_ok "register --audit: audited would-deny" wait_audited "$S3" other.world.test '"path":"/reg-audit"'
t_contains "as would-deny not-allowlisted" "$(audited "$S3" other.world.test | grep -F '"/reg-audit"')" \
	'"decision":"would-deny","reason":"not-allowlisted"'
t_eq "register --audit: the metadata literal still refused" "403 address-literal" \
	"$(code "$S3" "http://169.254.169.254/reg-lit")"

# --- run --audit: the sandbox it makes for the command is in audit mode -------------
# The command says it runs (a file in a bound directory) and waits (bounded)
# for the word to go on, so that list and status are asked while it lives.
mkdir -p "$D/runsync"
chmod 0777 "$D/runsync"
S run --audit --policy "$D/enforce.yaml" --name "$S4" --bind "$D/runsync:/sync" -- sh -c '
	touch /sync/ready
	i=0
	while [ ! -e /sync/go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	curl -s -m 10 -o /dev/null -w "%{http_code}" http://other.world.test/run-audit' >"$D/run.out" 2>"$D/run.err" &
RUNPID=$!
for ((i = 0; i < 300; i++)); do
	[ -e "$D/runsync/ready" ] && break
	sleep 0.1
done
t_ok "run --audit: the command runs" test -e "$D/runsync/ready"
t_contains "run --audit: list says audit" "$(S list | awk -v n="$S4" '$1 == n')" " audit "
t_contains "run --audit: status counts it" "$(S status)" "sandboxes_audit 3"
touch "$D/runsync/go"
wait "$RUNPID"
t_eq "run --audit: the command exits 0" 0 "$?"
t_eq "run --audit: the unlisted host is reached" "200" "$(cat "$D/run.out")"
t_ok "run --audit: audited would-deny" wait_audited "$S4" other.world.test '"path":"/run-audit"'
t_contains "as would-deny not-allowlisted" "$(audited "$S4" other.world.test | grep -F '"/run-audit"')" \
	'"decision":"would-deny","reason":"not-allowlisted"'
t_not_contains "run --audit: the sandbox is gone after" "$(S list)" "$S4"
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_not_contains "no secret in the audit log" "$(cat "$BROKER_AUDIT")" "$SECRET"
t_not_contains "no secret in the broker log" "$(cat "$BROKER_LOG")" "$SECRET"

t_done
