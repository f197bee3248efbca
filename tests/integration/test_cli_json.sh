#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What tools read from the CLI: `policy check` and `policy test` as text and
# --json (with the secret-file warning and the address guard of --resolve),
# `status --json` against the text and Prometheus forms, and `list --json`
# with a policy path that JSON must escape. Every JSON document is parsed.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
broker_world j1
# j(PY-EXPR): evaluates PY-EXPR on the JSON document in $T_OUT (as `d`).
j() { python3 -c "import json, sys; d = json.loads(sys.stdin.read()); print($1)" <<<"$T_OUT"; }

printf 'tok\n' >"$D/secret"
chmod 600 "$D/secret"
cat >"$D/good.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
    - host: rebind.world.test
    - cidr: 11.0.2.0/24
      ports: [443]
credentials:
  - name: there
    source: { file: $D/secret }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test] }
  - name: missing
    source: { file: $D/no-such-secret }
    inject: { header: X-Token, value: "{secret}" }
    scope: { hosts: [echo.world.test] }
EOF
printf 'version: 1\negress:\n  allow:\n    - hots: x\n' >"$D/bad.yaml"
pol() { "$BIN/sluice" policy "$@"; }

# --- policy check -----------------------------------------------------------------
t_ok "policy check: a good file" pol check "$D/good.yaml"
t_contains "says ok" "$T_OUT" "good.yaml: ok (3 rules, 2 credentials)"
t_contains "warns of the secret file it cannot read" "$T_ERR" \
	"warning: credential \`missing\`: cannot read $D/no-such-secret: No such file or directory"
t_not_contains "and not of the one it can" "$T_ERR" "credential \`there\`"
t_rc "policy check --json: a good and a bad file" 1 pol check --json "$D/good.yaml" "$D/bad.yaml"
t_eq "one document, ok false" "False" "$(j 'd["ok"]')"
t_eq "the good file: ok, its counts and one warning" "True 3 2 1" \
	"$(j '" ".join(str(x) for x in (d["files"][0]["ok"], d["files"][0]["rules"], d["files"][0]["credentials"], len(d["files"][0]["warnings"])))')"
t_contains "the warning names the credential" "$(j 'd["files"][0]["warnings"][0]')" "credential \`missing\`"
t_eq "the bad file: its line and column" "False 4 7" \
	"$(j '" ".join(str(x) for x in (d["files"][1]["ok"], d["files"][1]["line"], d["files"][1]["col"]))')"
t_contains "and its message" "$(j 'd["files"][1]["error"]')" "unknown key \`hots\`"
t_eq "nothing on stderr with --json" "" "$T_ERR"

# --- policy test --------------------------------------------------------------------
t_rc "policy test: a name that resolves into a private range is refused" 1 \
	pol test "$D/good.yaml" --resolve rebind.world.test=10.0.0.5 rebind.world.test
t_contains "by the address guard" "$T_OUT" "deny     address-denied"
t_contains "saying where it resolved" "$T_OUT" "resolved to 10.0.0.5, in 10.0.0.0/8"
t_ok "a name that resolves to a public address is allowed" \
	pol test "$D/good.yaml" --resolve echo.world.test=11.0.2.10 echo.world.test:443
t_contains "saying its addresses passed the guard" "$T_OUT" "every --resolve address passes"
t_ok "without --resolve the verdict is the allowlist's" pol test "$D/good.yaml" echo.world.test
t_contains "and says the guard is still to come" "$T_OUT" "the address guard still applies"
t_rc "the metadata address, as a literal" 1 pol test "$D/good.yaml" 169.254.169.254:80
t_rc "a literal in a cidr rule on another port" 1 pol test "$D/good.yaml" 11.0.2.10:80
t_contains "is refused for its port" "$T_OUT" "port-not-allowed"
t_rc "policy test --json" 1 pol test --json "$D/good.yaml" --resolve rebind.world.test=10.0.0.5 \
	rebind.world.test echo.world.test other.world.test 11.0.2.10:443
t_eq "one verdict per target" "deny allow deny allow" "$(j '" ".join(t["decision"] for t in d["targets"])')"
t_eq "with reasons" "address-denied allowed not-allowlisted allowed" \
	"$(j '" ".join(t["reason"] for t in d["targets"])')"
t_eq "and refused: true" "True" "$(j 'd["refused"]')"
t_rc "--resolve without an address is misuse" 2 pol test "$D/good.yaml" --resolve x echo.world.test

# --- status --json and list --json against a broker ---------------------------------
broker_config
# A policy path with a double quote and a backslash: JSON must escape both.
QP="$D/we\"ird\\pol.yaml"
cp "$D/good.yaml" "$QP"
sed -i '/name: missing/,$d' "$QP"
broker_start || { echo "0 passed, 1 failed"; exit 1; }
t_ok "create $S1 with that policy" S create "$S1" --policy "$QP"
t_ok "list --json" S list --json
t_eq "parses, with the path as it is" "$S1 $QP" "$(j '" ".join((d[0]["name"], d[0]["policy"]))')"
t_ok "status --json" S status --json
t_eq "the status's figures are numbers" "1" "$(j 'd["status"]["sandboxes"]')"
t_eq "every metric sample is there, with its labels" \
	"$(S status --metrics | grep -vc '^#')" "$(j 'len(d["metrics"])')"
t_ok "a labelled sample" test "$(j '[m["value"] for m in d["metrics"] if m["name"] == "sluice_bytes_total" and m["labels"] == {"direction": "up"}][0] >= 0')" = True
t_rc "status with a bad option is misuse" 2 S status --nope
t_contains "whose usage names --json" "$T_ERR" "--json"

t_done
