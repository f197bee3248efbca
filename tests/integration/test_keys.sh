#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The sandbox CA keys live in sluiced-keys, a process of their own (issue 14,
# "Least privilege"; broker/keys/). A state_dir from before (a broker with
# `user: 0` kept the key beside the certificate in state_dir/ca/NAME) is
# taken over at the next start: the key moves to state_dir/keys, the
# certificate stays byte for byte, and the sandbox's interception keeps
# verifying with the bundle it has. The key process is uid 65532 (no user
# `sluice-keys` here: the documented default) without capabilities, with
# no_new_privs and seccomp; the broker's uid can neither open the key
# directory nor a key in it, nor read the key process's memory. When the key
# process dies, the broker stays up, says so once, and fails closed: a host
# whose leaf is not cached is refused (audit reason tls-leaf-failed), no
# sandbox can be created. A restart brings it back.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
T_TIMEOUT=30
U=65533
KU=65532

broker_world k1 k2 k3 k4 k5

SECRET="s3cr3t-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$D/secret"
chmod 600 "$D/secret"
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
      ports: [80, 443]
    - host: other.world.test
      ports: [443]
credentials:
  - name: echo-token
    source: { file: $D/secret }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/api/*"] }
  - name: other-token
    source: { file: $D/secret }
    inject: { header: X-Other, value: "{secret}" }
    scope: { hosts: [other.world.test] }
EOF
started() { if broker_start; then t_ok "$1" true; else t_fails "$1" true; fi; }
X() { S exec --bind "$D:$D:ro" "$1" -- curl -sf -m 10 "https://$2"; }
STATE=$D/state

# --- a state_dir from before: the key beside the certificate ------------------
broker_config "user: 0"
started "a broker with user: 0 (keys kept in the broker, as before)"
t_ok "a sandbox on it" S create "$S1" --policy "$D/pol.yaml"
t_ok "  ... its CA key is beside the certificate, as before" test -f "$STATE/ca/$S1/ca.key"
cp "$STATE/ca/$S1/ca.crt" "$D/ca1.crt"
t_ok "  ... it intercepts" X "$S1" echo.world.test/api/before
t_ok "sluice status" S status
t_contains "  ... says there is no key process" "$T_OUT" "key_process none"
broker_stop

# --- the next start: the key process takes the key over -------------------------
broker_config
started "the broker starts with the default users"
PID=$BROKER_PID
t_contains "the log says the key was taken over" "$(cat "$BROKER_LOG")" \
	"took over 1 CA keys from state_dir/ca"
t_contains "  ... and who holds the keys" "$(cat "$BROKER_LOG")" \
	"CA keys held by sluiced-keys (pid "
t_rc "the key is no longer beside the certificate" 1 test -e "$STATE/ca/$S1/ca.key"
t_ok "the certificate is the same, byte for byte" cmp "$D/ca1.crt" "$STATE/ca/$S1/ca.crt"
ID1=$(openssl x509 -in "$D/ca1.crt" -outform DER | sha256sum | cut -d' ' -f1)
t_eq "the key is in state_dir/keys, 0600, the key process's" "600 $KU:$KU" \
	"$(stat -c '%a %u:%g' "$STATE/keys/$ID1.key" 2>/dev/null)"
t_eq "  ... the directory 0700, the key process's" "700 $KU:$KU" \
	"$(stat -c '%a %u:%g' "$STATE/keys" 2>/dev/null)"
t_ok "the sandbox from before intercepts, verified with the bundle it has" \
	X "$S1" echo.world.test/api/after
t_contains "  ... and injects" "$(origin /api/after)" "Bearer $SECRET"
t_ok "sluice ca prints the same certificate" S ca "$S1"
t_eq "  ... byte for byte" "$(cat "$D/ca1.crt")" "$T_OUT"

# The process.
KP=$(for c in $(ps -o pid= --ppid "$PID"); do
	[ "$(cat /proc/"$c"/comm 2>/dev/null)" = sluiced-keys ] && echo "$c"
done)
t_eq "the broker has one key process, sluiced-keys" "1" "$(echo "$KP" | grep -c .)"
kp_problems() {
	local f want
	f=$(cat /proc/"$1"/status 2>/dev/null) || { echo "no process $1"; return; }
	for want in "Uid:	$KU	$KU	$KU	$KU" "Gid:	$KU	$KU	$KU	$KU" \
		"CapInh:	0000000000000000" "CapPrm:	0000000000000000" \
		"CapEff:	0000000000000000" "CapBnd:	0000000000000000" \
		"CapAmb:	0000000000000000" "NoNewPrivs:	1" "Seccomp:	2"; do
		grep -qxF "$want" <<<"$f" || echo "no \`$want\`: $(grep -F "${want%%:*}:" <<<"$f")"
	done
	grep -qx 'Groups:[[:space:]]*' <<<"$f" || echo "$(grep Groups: <<<"$f")"
}
t_none "  ... uid, gid $KU, no group, no capability, no_new_privs, seccomp" \
	$(kp_problems "$KP" | tr ' ' '_')

# What the broker's uid can reach.
t_eq "the broker runs as $U" "$U" "$(awk '/^Uid:/ { print $3 }' /proc/"$PID"/status)"
t_fails "the broker's uid cannot list state_dir/keys" as_user_of "$PID" ls "$STATE/keys"
t_fails "  ... nor open a key in it" as_user_of "$PID" cat "$STATE/keys/$ID1.key"
t_fails "  ... nor read the key process's memory" \
	as_user_of "$PID" dd if=/proc/"$KP"/mem of=/dev/null bs=1 count=1 skip=4096
t_fails "  ... nor its environment" as_user_of "$PID" cat /proc/"$KP"/environ
t_eq "no key anywhere the broker's uid owns" "" \
	"$(find "$STATE" -user $U -type f -exec grep -l 'PRIVATE KEY' {} + 2>/dev/null)"

# A new sandbox: its key is the key process's from the start.
t_ok "a new sandbox" S create "$S2" --policy "$D/pol.yaml"
ID2=$(openssl x509 -in "$STATE/ca/$S2/ca.crt" -outform DER | sha256sum | cut -d' ' -f1)
t_eq "  ... its key is in state_dir/keys, 0600" "600 $KU" \
	"$(stat -c '%a %u' "$STATE/keys/$ID2.key" 2>/dev/null)"
t_ok "  ... it intercepts" X "$S2" echo.world.test/api/new
t_contains "  ... and injects" "$(origin /api/new)" "Bearer $SECRET"
# The key process writes a new CA's key when it makes it; a registration
# refused after that (the name is taken: the broker finds out once the CA
# is made) must not leave the key behind.
keys_before=$(find "$STATE/keys" -name '*.key' | sort)
t_fails "a second registration of the same name is refused" \
	S register "$S2" --addr 10.200.255.2 --policy "$D/pol.yaml"
t_eq "  ... and leaves no key in state_dir/keys" "$keys_before" \
	"$(find "$STATE/keys" -name '*.key' | sort)"

# --- a JWT signing key only the key user may read ----------------------------------
# Neither the broker nor its opener (root without capabilities) may read a
# 0600 file of uid 65532: the key process opens it itself and signs.
mkdir -m 0711 "$D/kdir"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$D/kdir/jwt.pem" 2>/dev/null
openssl pkey -in "$D/kdir/jwt.pem" -pubout -out "$D/jwt-pub.pem"
chown $KU:$KU "$D/kdir/jwt.pem"
chmod 600 "$D/kdir/jwt.pem"
cat >"$D/pol-jwt.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
credentials:
  - name: svc-jwt
    source: { jwt: { key_file: $D/kdir/jwt.pem, issuer: "https://sluice.test", ttl: 1h } }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/jwt/*"] }
    plaintext: allow
EOF
t_fails "the broker's uid cannot read the JWT key file" as_user_of "$PID" cat "$D/kdir/jwt.pem"
t_ok "a sandbox with a jwt credential on that key" S create "$S3" --policy "$D/pol-jwt.yaml"
t_ok "  ... and another (its tokens not minted yet)" S create "$S4" --policy "$D/pol-jwt.yaml"
ID4=$(openssl x509 -in "$STATE/ca/$S4/ca.crt" -outform DER | sha256sum | cut -d" " -f1)
t_ok "a request in the credential's scope" \
	S exec "$S3" -- curl -sf -m 10 -o /dev/null http://echo.world.test/jwt/a
TOKEN=$(origin /jwt/a | grep -o '"Bearer [^"]*"' | tail -n 1 | tr -d '"' | cut -d' ' -f2)
t_ok "  ... carries a JWT" test -n "$TOKEN"
# ES256: the signature is R||S (RFC 7518 3.4); openssl verifies DER.
jwt_verify() {
	python3 - "$1" "$D/jwt-tbs" "$D/jwt-sig.der" <<'PY'
import base64, sys
tok, tbs_path, sig_path = sys.argv[1:4]
h, c, s = tok.split(".")
sig = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
def der_int(b):
    b = b.lstrip(b"\0") or b"\0"
    if b[0] & 0x80:
        b = b"\0" + b
    return b"\x02" + bytes([len(b)]) + b
body = der_int(sig[:32]) + der_int(sig[32:])
open(sig_path, "wb").write(b"\x30" + bytes([len(body)]) + body)
open(tbs_path, "wb").write((h + "." + c).encode())
PY
	openssl dgst -sha256 -verify "$D/jwt-pub.pem" -signature "$D/jwt-sig.der" "$D/jwt-tbs"
}
t_ok "  ... signed by that key (the key process signed it)" jwt_verify "$TOKEN"
t_ok "sluice status --jwks lists its public half" S status --jwks
t_contains "  ... an EC P-256 key" "$T_OUT" '"crv":"P-256"'

t_ok "sluice status" S status
t_contains "  ... says the key process is up" "$T_OUT" "key_process ok"
t_eq "no seccomp refusal in the log (broker or key process)" "" "$(grep "seccomp: system call" "$BROKER_LOG")"

# --- the key process dies --------------------------------------------------------
kill -KILL "$KP"
for ((i = 0; i < 100; i++)); do
	[ "$(cat /proc/"$KP"/comm 2>/dev/null)" = sluiced-keys ] || break
	sleep 0.1
done
t_ok "sluice status" S status
t_contains "  ... says the key process is gone (before any request needed it)" "$T_OUT" "key_process gone"
t_ok "a host whose leaf is cached still intercepts (no key needed)" X "$S1" echo.world.test/api/cached
t_rc "a host whose leaf is not cached is refused (fail closed)" 35 \
	S exec --bind "$D:$D:ro" "$S1" -- curl -s -m 10 -o /dev/null https://other.world.test/
t_ok "  ... with an audit line, reason tls-leaf-failed" \
	grep -q "\"sandbox\":\"$S1\".*\"name\":\"other.world.test\".*\"reason\":\"tls-leaf-failed\"" \
	"$BROKER_AUDIT"
t_rc "  ... and again (another sandbox)" 35 \
	S exec --bind "$D:$D:ro" "$S2" -- curl -s -m 10 -o /dev/null https://other.world.test/
t_ok "a token minted before is still used (kept for reuse)" \
	S exec "$S3" -- curl -sf -m 10 -o /dev/null http://echo.world.test/jwt/b
t_run S exec "$S4" -- curl -s -m 10 -o /dev/null -w '%{http_code}' http://echo.world.test/jwt/c
t_eq "a token to mint is refused (fail closed): 502" "502" "$T_OUT"
t_ok "  ... with an audit line, reason credential-unavailable" \
	grep -q "\"sandbox\":\"$S4\".*\"reason\":\"credential-unavailable\"" "$BROKER_AUDIT"
t_eq "  ... and nothing reached the origin without it" "" "$(origin /jwt/c)"
t_eq "the broker said it once" "1" "$(grep -c 'the key process (pid .*) is gone' "$BROKER_LOG")"
t_ok "the broker is still up" kill -0 "$PID"
t_ok "  ... and answers" S status
t_fails "a sandbox cannot be created without it" S create "$S5" --policy "$D/pol.yaml"
t_contains "  ... said so" "$T_ERR$T_OUT" "key process"
t_rc "  ... nothing of it is left" 1 test -e "$STATE/ca/$S5"
t_ok "a plain HTTP request still works" \
	S exec "$S1" -- curl -sf -m 10 -o /dev/null http://echo.world.test/plain

# --- a restart brings it back ----------------------------------------------------
broker_stop
started "the broker restarts"
t_ok "the sandbox from before still intercepts, the same CA" X "$S1" other.world.test/
t_ok "  ... its certificate unchanged" cmp "$D/ca1.crt" "$STATE/ca/$S1/ca.crt"
t_ok "delete the second sandbox" S delete "$S2"
t_rc "  ... its key is gone from state_dir/keys" 1 test -e "$STATE/keys/$ID2.key"
# Its file's inode is kept for the next key (common/file.c: spares), emptied.
t_ok "  ... its file kept as a spare, in state_dir/keys/.spare" \
	test -n "$(find "$STATE/keys/.spare" -type f 2>/dev/null)"
t_eq "  ... empty: no key material is left there, nor in state_dir/.spare" "" \
	"$(find "$STATE/keys/.spare" "$STATE/.spare" -type f -size +0c 2>&1)"
t_eq "  ... whose directory is the key process's alone" "700 $KU" \
	"$(stat -c '%a %u' "$STATE/keys/.spare" 2>/dev/null)"
# The next create takes them. The CA directory is emptied on a thread of
# the broker's: its files and itself are spares once that is done.
for ((i = 0; i < 50; i++)); do
	[ -z "$(find "$STATE/ca" -maxdepth 1 -name '.gone.*')" ] && break
	sleep 0.1
done
spare_n() { find "$1" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
t_eq "  ... the broker keeps its record, journal, mark, CA files and directory" 6 \
	"$(spare_n "$STATE/.spare")"
t_ok "a new sandbox" S create "$S5" --policy "$D/pol.yaml"
t_eq "  ... takes the broker's spares" 0 "$(spare_n "$STATE/.spare")"
t_eq "  ... and the key process's" 0 "$(spare_n "$STATE/keys/.spare")"
t_ok "  ... and intercepts with the CA written into them" X "$S5" other.world.test/
t_ok "  ... deleted again" S delete "$S5"
t_ok "  ... the first's is still there" test -e "$STATE/keys/$ID1.key"
t_eq "no seccomp refusal in the log after the restart" "" "$(grep "seccomp: system call" "$BROKER_LOG")"
# A sandbox deleted while the broker is down: the broker drops its
# registration at the next start (its namespace is gone), and its key.
broker_stop
t_ok "  (a sandbox's key, before)" test -e "$STATE/keys/$ID4.key"
t_rc "a delete with the broker down" 1 S delete "$S4"
started "the broker starts again"
t_contains "  ... drops the registration whose namespace is gone" "$(cat "$BROKER_LOG")" \
	"has no namespace (/run/netns/$S4 is gone): dropped its registration"
t_rc "  ... and its CA key" 1 test -e "$STATE/keys/$ID4.key"
t_ok "  ... not the others'" test -e "$STATE/keys/$ID1.key"
broker_stop

# --- keys no sandbox has go at the next start ---------------------------------------
# A key file whose CA no registration names (its sandbox deleted while the
# key process was gone, or a crash between the CA's making and its saving),
# and a temporary a crash cut short: deleted once every CA is loaded; but
# not while a registration could not be restored (its key stays for the
# operator).
ORPH=0011223344556677889900aabbccddeeff0011223344556677889900aabbccdd
install -o $KU -g $KU -m 0600 /dev/null "$STATE/keys/$ORPH.key"
install -o $KU -g $KU -m 0600 /dev/null "$STATE/keys/$ORPH.tmp"
install -o $KU -g $KU -m 0600 /dev/null "$STATE/keys/notes.txt"
install -o $U -g $U -m 0600 /dev/null "$STATE/sandboxes/$WORLD_PREFIX-broken"
echo "not a registration" >"$STATE/sandboxes/$WORLD_PREFIX-broken"
from=$(($(wc -l <"$BROKER_LOG") + 1))
started "the broker starts with a registration it cannot restore"
t_ok "  ... keeps a key no sandbox has" test -e "$STATE/keys/$ORPH.key"
t_contains "  ... and says why" "$(tail -n +"$from" "$BROKER_LOG")" \
	"CA keys kept: 1 registrations could not be restored"
broker_stop
rm -f "$STATE/sandboxes/$WORLD_PREFIX-broken"
from=$(($(wc -l <"$BROKER_LOG") + 1))
started "the broker starts with every registration restored"
t_rc "  ... deletes the key no sandbox has" 1 test -e "$STATE/keys/$ORPH.key"
t_rc "  ... and the temporary" 1 test -e "$STATE/keys/$ORPH.tmp"
t_contains "  ... and says so" "$(tail -n +"$from" "$BROKER_LOG")" "deleted 2 CA keys no sandbox has"
t_ok "  ... keeps the keys of the sandboxes" test -e "$STATE/keys/$ID1.key"
t_ok "  ... and a file of another name" test -e "$STATE/keys/notes.txt"
t_ok "  ... the first sandbox still intercepts" X "$S1" echo.world.test/api/after-sweep
broker_stop
t_done
