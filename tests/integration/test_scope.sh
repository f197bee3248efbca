#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: long (run.sh): among the longest scripts, started before the others
# What the broker connects to decides, and the policy in force decides: a
# credential is chosen by the destination, never by a Host header that
# names another host (a cidr-allowed address with `Host: in-scope-name`
# gets no secret); and a reload reaches connections already open (a
# kept-alive connection's next request meets the new policy, a tunnel the
# new policy withdrew is closed, a withdrawn credential is not injected
# any more); a connection's end is audited once, even when a reload
# closes it while its refusal lingers. The clients run with `ip netns exec`
# in the sandbox's network namespace, so that they can wait for the test's
# flag file.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

T_TIMEOUT=30
broker_world sc

SECRET="s3cr3t-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$D/secret"
chmod 600 "$D/secret"
broker_config "connect_timeout: 2s"
# Policy A: echo and other, a cidr rule for echo's own address, raw TCP
# to echo's :22 and a credential for echo.world.test.
pol_a() {
	cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
    - host: echo.world.test
      ports: [22]
      raw_tcp: true
    - host: other.world.test
    - cidr: $WORLD_ECHO4/32
      ports: [80]
credentials:
  - name: echo-token
    source: { file: $D/secret }
    inject: { header: X-Token, value: "{secret}" }
    scope: { hosts: [echo.world.test] }
    plaintext: allow
EOF
}
# Policy B: echo.world.test on 80 and 443 only, nothing else, no credential.
pol_b() {
	cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
EOF
}
pol_a
broker_start || { echo "0 passed, 1 failed"; exit 1; }
t_ok "sluice create" S create "$S1" --policy "$D/pol.yaml"
t_ok "sluice env" S env "$S1"
PROXY=$(echo "$T_OUT" | sed -n 's|^HTTP_PROXY=http://||p' | tr -d /)
NX() { ip netns exec "$S1" "$@"; }

# ka.py PROXY FLAG STEP...: one connection to the proxy (HOST:PORT).
# Steps: get:URL (an absolute-form GET, kept alive; prints "STATUS
# REASON-HEADER" of its answer), connect:HOST:PORT (prints the first line
# of the answer and then what the server sent first), flag (waits up to
# 10 s for FLAG to exist), eof (waits up to 5 s: prints "closed" when the
# broker ends the connection, "open" otherwise).
cat >"$D/ka.py" <<'PY'
import os, socket, sys, time
proxy, flag, steps = sys.argv[1], sys.argv[2], sys.argv[3:]
host, port = proxy.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
buf = b""

def read_answer():
    global buf
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return "eof", ""
        buf += d
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    hdr = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    n = int(hdr.get("content-length", "0"))
    while len(buf) < n:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    body, buf = buf[:n], buf[n:]
    return lines[0].split(" ")[1] + " " + hdr.get("x-sluice-reason", ""), body.decode("latin-1")

for step in steps:
    kind, _, arg = step.partition(":")
    if kind == "get":
        h = arg.split("/")[2]
        s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (arg.encode(), h.encode()))
        try:
            st, body = read_answer()
        except OSError as e:
            st, body = "error " + type(e).__name__, ""
        print("ANSWER", st)
        print("BODY", body.strip())
    elif kind == "connect":
        s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (arg.encode(), arg.encode()))
        st, _ = read_answer()
        print("ANSWER", st)
        while b"\n" not in buf:
            d = s.recv(4096)
            if not d:
                break
            buf += d
        print("FIRST", buf.decode("latin-1").strip())
        buf = b""
    elif kind == "flag":
        end = time.monotonic() + 10
        while not os.path.exists(flag) and time.monotonic() < end:
            time.sleep(0.05)
    elif kind == "eof":
        s.settimeout(5)
        try:
            d = s.recv(4096)
            print("closed" if not d else "open")
        except socket.timeout:
            print("open")
        except OSError:
            print("closed")
    sys.stdout.flush()
PY
# got PATH: the echo server's log line for PATH (the headers it received).
got() { world_echo_log | grep -F "\"path\": \"$1\""; }

# --- item: a credential goes by the destination ---------------------------------
NOPROXY="env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy"
t_ok "transparent: to echo's address (a cidr rule) with Host naming the credential's host" \
	NX $NOPROXY curl -s -m 10 -D - -o - -H 'Host: echo.world.test' "http://$WORLD_ECHO4/sc-lit-name"
t_contains "is refused: 403 host-mismatch" "$T_OUT" "X-Sluice-Reason: host-mismatch"
t_not_contains "the answer holds no secret" "$T_OUT" "$SECRET"
t_eq "the origin never saw it" "" "$(got /sc-lit-name)"
t_ok "transparent: the same address with its own Host" \
	NX $NOPROXY curl -sf -m 10 "http://$WORLD_ECHO4/sc-lit-own"
t_ok "reaches the origin" test -n "$(got /sc-lit-own)"
t_not_contains "without the credential (the address is not in its scope)" "$(got /sc-lit-own)" "X-Token"
t_ok "explicit: the address with Host naming the credential's host" \
	NX curl -s -m 10 -x "http://$PROXY" -H 'Host: echo.world.test' "http://$WORLD_ECHO4/sc-lit-x"
t_not_contains "gets no credential either" "$(got /sc-lit-x)" "X-Token"
t_ok "by its name, the credential is injected" NX curl -sf -m 10 -x "http://$PROXY" \
	http://echo.world.test/sc-name
t_contains "the origin has it" "$(got /sc-name)" "X-Token"

# --- item: a reload reaches open connections -----------------------------------
rm -f "$D/flag"
NX /usr/bin/python3 "$D/ka.py" "$PROXY" "$D/flag" get:http://other.world.test/sc-ka1 \
	get:http://echo.world.test/sc-cred1 flag get:http://echo.world.test/sc-cred2 \
	get:http://other.world.test/sc-ka2 >"$D/ka.out" 2>&1 &
ka=$!
NX /usr/bin/python3 "$D/ka.py" "$PROXY" "$D/flag" connect:echo.world.test:22 flag eof \
	>"$D/tun.out" 2>&1 &
tun=$!
# Both clients have had their first answers before the policy changes.
for ((i = 0; i < 100; i++)); do
	[ "$(grep -c '^ANSWER' "$D/ka.out")" -ge 2 ] && grep -q '^FIRST' "$D/tun.out" && break
	sleep 0.1
done
t_eq "kept-alive: the first request to other.world.test" "200 " \
	"$(grep '^ANSWER' "$D/ka.out" | sed -n 1p | cut -d' ' -f2-)"
t_contains "the tunnel to :22 carries the banner" "$(cat "$D/tun.out")" "SSH-2.0-sluice-world"
t_contains "the credential was injected before the reload" "$(got /sc-cred1)" "X-Token"
pol_b
AMARK=$(wc -l <"$BROKER_AUDIT")
t_ok "reload with policy B (other.world.test, :22 and the credential withdrawn)" S reload
touch "$D/flag"
wait "$ka" "$tun"
t_eq "the same connection's next request to echo is answered" "200 " \
	"$(grep '^ANSWER' "$D/ka.out" | sed -n 3p | cut -d' ' -f2-)"
t_ok "and reached the origin" test -n "$(got /sc-cred2)"
t_not_contains "without the withdrawn credential" "$(got /sc-cred2)" "X-Token"
t_eq "its next request, to the withdrawn host, meets the new policy" "403 not-allowlisted" \
	"$(grep '^ANSWER' "$D/ka.out" | sed -n 4p | cut -d' ' -f2-)"
t_eq "the origin never saw it" "" "$(got /sc-ka2)"
t_eq "the withdrawn tunnel is closed by the broker" "closed" "$(tail -n 1 "$D/tun.out")"
t_contains "audit says policy-withdrawn" "$(tail -n +$((AMARK + 1)) "$BROKER_AUDIT")" \
	'"reason":"policy-withdrawn"'

# --- item: a connection's end is audited once --------------------------------
# A refusal inside a CONNECT tunnel (plain HTTP naming another host) is
# answered, then the connection lingers (2 s) until the client closes. A
# reload that withdraws the tunnel's host meanwhile closes it, without a
# second audit line for the same request.
cat >"$D/once.py" <<'PY'
import os, socket, sys, time
proxy, flag = sys.argv[1], sys.argv[2]
host, port = proxy.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)

def head():
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            break
        buf += d
    lines = buf.decode("latin-1").split("\r\n")
    why = [l.split(":", 1)[1].strip() for l in lines if l.lower().startswith("x-sluice-reason:")]
    return (lines[0].split(" ")[1] if " " in lines[0] else "eof"), (why[0] if why else "")

s.sendall(b"CONNECT echo.world.test:80 HTTP/1.1\r\nHost: echo.world.test:80\r\n\r\n")
print("CONNECT", head()[0])
s.sendall(b"GET /sc-once HTTP/1.1\r\nHost: other.world.test\r\n\r\n")
print("ANSWER", *head())
sys.stdout.flush()
end = time.monotonic() + 10
while not os.path.exists(flag) and time.monotonic() < end:
    time.sleep(0.05)
PY
rm -f "$D/flag"
OMARK=$(wc -l <"$BROKER_AUDIT")
NX /usr/bin/python3 "$D/once.py" "$PROXY" "$D/flag" >"$D/once.out" 2>&1 &
once=$!
for ((i = 0; i < 100; i++)); do
	grep -q '^ANSWER' "$D/once.out" && break
	sleep 0.05
done
t_eq "in a tunnel, a request naming another host" "ANSWER 403 host-mismatch" \
	"$(grep '^ANSWER' "$D/once.out")"
printf 'version: 1\negress:\n  allow:\n    - host: other.world.test\n' >"$D/pol.yaml"
t_ok "reload withdrawing the tunnel's host while the refusal lingers" S reload
touch "$D/flag"
wait "$once"
t_eq "the refused request has one audit line" 1 \
	"$(tail -n +$((OMARK + 1)) "$BROKER_AUDIT" | grep -c '"path":"/sc-once"')"
t_not_contains "and no policy-withdrawn for it" "$(tail -n +$((OMARK + 1)) "$BROKER_AUDIT")" \
	'"reason":"policy-withdrawn"'

t_ok "the broker still runs" broker_alive
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_rc "the secret is not in the audit log" 1 grep -qF "$SECRET" "$BROKER_AUDIT"
t_rc "nor in the broker's log" 1 grep -qF "$SECRET" "$BROKER_LOG"
t_ok "sluice delete" S delete "$S1"
broker_stop
t_done
