#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: long (run.sh): among the longest scripts, started before the others
# The explicit proxy in the test world: every answer and reason, the limits,
# reload, restart with restored registrations, audit and metrics; and no decoy
# hit at the end.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

RAWPY=$PWD/tests/integration/rawhttp.py

world_up || { echo "world did not come up"; echo "0 passed, 1 failed"; exit 1; }
trap 'broker_stop; world_down' EXIT

D=$WORLD_DIR
broker_config "max_head_bytes: 4096" "head_timeout: 1s" "connect_timeout: 1s" \
	"response_timeout: 2s" "drain_timeout: 2s"
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
    - host: rebind.world.test
    - host: metadata.world.test
    - host: loop.world.test
    - host: compat.world.test
    - host: mixed.world.test
    - host: nx.world.test
    - host: closed.echo.world.test
    - host: "*.canary.world.test"
    - host: echo.world.test
      ports: [8443]
    - host: echo.world.test
      ports: [22]
      raw_tcp: true
    - cidr: 11.0.2.20/32
      ports: [80]
    - cidr: 11.0.9.0/24
      ports: [80]
    - cidr: 11.0.0.0/24
      ports: [3128]
limits: { connections: 4, idle_timeout: 2s }
EOF

broker_start
t_ok "broker starts and answers on its control socket" test -S "$BROKER_SOCK"

world_add_client c1 10.99.0.2/30 10.99.0.1 || echo "client c1 failed"
world_add_client c2 10.99.0.6/30 10.99.0.5 || echo "client c2 failed"
t_ok "register c1" sl register c1 --addr 10.99.0.2 --policy "$D/pol.yaml"
t_rc "register twice is refused" 1 sl register c1 --addr 10.99.0.2 --policy "$D/pol.yaml"
t_contains "list shows c1" "$(sl list)" "c1"
t_contains "list --json" "$(sl list --json)" '"name":"c1"'

P="-x http://10.99.0.1:3128"
c1() { client_exec c1 "$@"; }
# Raw bytes to the proxy, always from inside the client namespace.
raw() { client_exec c1 /usr/bin/python3 "$RAWPY" 10.99.0.1 3128 "$@"; }
# The broker's open connections (its gauge), and a line when at least $1
# (wait_for counts lines): the state a check needs, waited for, not a
# fixed sleep that a slower machine outlasts.
open_conns() { sl status --metrics | awk '$1 == "sluice_open_connections" { print $2 }'; }
conns_at_least() { [ "$(open_conns)" -ge "$1" ] 2>/dev/null && echo yes; }
conns_at_most() { [ "$(open_conns)" -le "$1" ] 2>/dev/null && echo yes; }
reason() { # URL [curl args...]: prints "STATUS REASON"
	local url=$1
	shift
	c1 curl -s -m 10 -o /dev/null -D - $P "$@" "$url" |
		t_status_reason
}

# --- allowed -----------------------------------------------------------------
t_ok "GET through the proxy" c1 curl -sf -m 10 $P -H 'X-Test: 1' --proxy-user u:p \
	-H 'Proxy-Connection: keep-alive' http://echo.world.test/hello
t_contains "the echo server saw our header" "$T_OUT" '"X-Test", "1"'
t_not_contains "Proxy-Authorization is not forwarded" "$(echo "$T_OUT" | tr A-Z a-z)" 'proxy-authorization'
t_not_contains "Proxy-Connection is not forwarded" "$(echo "$T_OUT" | tr A-Z a-z)" 'proxy-connection'
t_contains "origin-form upstream" "$T_OUT" '"path": "/hello"'
t_ok "CONNECT tunnel to HTTPS" c1 curl -sf -m 10 $P --cacert "$WORLD_CA" https://echo.world.test/tls
t_contains "TLS through the tunnel reached the echo server" "$T_OUT" '"path": "/tls"'
t_ok "keep-alive: two requests, one connection" c1 curl -s -m 10 $P -o /dev/null -o /dev/null \
	-w '%{http_code} %{num_connects}\n' http://echo.world.test/a http://echo.world.test/b
t_eq "second request reused the connection" "200 1
200 0" "$T_OUT"
t_ok "POST body is relayed" c1 curl -sf -m 10 $P --data-binary "@$PWD/README.md" http://echo.world.test/post
t_contains "upstream got the whole body" "$T_OUT" "\"body_len\": $(stat -c %s README.md)"
t_ok "chunked upload is relayed" c1 curl -sf -m 10 $P -H 'Transfer-Encoding: chunked' --data-binary 'hello' http://echo.world.test/chunked
t_contains "upstream got the chunked body" "$T_OUT" '"body_len": 5'
t_ok "large download" c1 curl -sf -m 30 $P -o /dev/null -w '%{size_download}' http://echo.world.test/bytes/20000000
t_eq "20 MB arrived whole" "20000000" "$T_OUT"
t_ok "a name with an address in a denied range and one allowed: the allowed one" \
	c1 curl -sf -m 10 $P http://mixed.world.test/
t_contains "mixed name reached the echo server" "$T_OUT" '11.0.2.10'
t_ok "cidr rule allows a literal on its port" c1 curl -sf -m 10 $P http://11.0.2.20/
t_ok "pipelined requests are answered in order" raw \
	'GET http://echo.world.test/p1 HTTP/1.1\r\nHost: echo.world.test\r\n\r\nGET http://echo.world.test/p2 HTTP/1.1\r\nHost: echo.world.test\r\nConnection: close\r\n\r\n'
t_eq "both answers, p1 first" "/p1 /p2" "$(echo "$T_OUT" | grep -o '"path": "/p[12]"' | cut -d'"' -f4 | tr '\n' ' ' | sed 's/ $//')"
t_ok "a 100 Continue, then a second request on the same connection" raw \
	'GET http://echo.world.test/interim/100 HTTP/1.1\r\nHost: echo.world.test\r\n\r\nGET http://echo.world.test/i2 HTTP/1.1\r\nHost: echo.world.test\r\nConnection: close\r\n\r\n'
t_eq "the interim answer, then each request's own answer in order" "100 200 200" \
	"$(echo "$T_OUT" | grep -o '^HTTP/1.1 [0-9]*' | cut -d' ' -f2 | tr '\n' ' ' | sed 's/ $//')"
t_eq "the final answers belong to /interim/100 and /i2" "/interim/100 /i2" \
	"$(echo "$T_OUT" | grep -o '"path": "/[a-z0-9/]*"' | cut -d'"' -f4 | tr '\n' ' ' | sed 's/ $//')"
t_ok "a 103 Early Hints inside an intercepted or plain request" c1 curl -sf -m 10 $P \
	http://echo.world.test/interim/103
t_contains "ends with the final answer" "$T_OUT" '"path": "/interim/103"'
t_ok "SSH-like TCP through CONNECT on an allowed port" raw \
	'CONNECT echo.world.test:22 HTTP/1.1\r\nHost: echo.world.test:22\r\n\r\nping\n' --hold 2
t_contains "tunnel carried the banner and the echo" "$T_OUT" "SSH-2.0-sluice-world"

# --- refused -------------------------------------------------------------------
t_eq "not allowlisted" "403 not-allowlisted" "$(reason http://other.world.test/)"
t_eq "CONNECT not allowlisted" "403 not-allowlisted" "$(reason https://other.world.test/ --cacert "$WORLD_CA")"
# The body says what was refused and why, in words an agent can act on.
t_eq "the refusal names the host and port" \
	"sluice: other.world.test:80 is not in this sandbox's egress policy (not-allowlisted)" \
	"$(c1 curl -s -m 10 $P http://other.world.test/x)"
t_eq "and a port outside the rule" \
	"sluice: echo.world.test:8080: the host is in this sandbox's egress policy, not on port 8080 (port-not-allowed)" \
	"$(c1 curl -s -m 10 $P http://echo.world.test:8080/x)"
t_eq "and a name that resolves into a denied range" \
	"sluice: rebind.world.test:80 resolves into a denied range (private, loopback, metadata or other special-purpose addresses) (address-denied)" \
	"$(c1 curl -s -m 10 $P http://rebind.world.test/x)"
t_eq "and an address literal" \
	"sluice: 11.0.2.10:8080 is an address no cidr rule of this sandbox's policy allows; use the host name (address-literal)" \
	"$(c1 curl -s -m 10 $P http://11.0.2.10:8080/x)"
t_eq "port not allowed" "403 port-not-allowed" "$(reason http://echo.world.test:8080/)"
t_eq "address literal" "403 address-literal" "$(reason http://11.0.2.10/)"
t_eq "address literal via CONNECT" "403 address-literal" "$(reason https://11.0.2.10/ -k)"
t_eq "numeric spelling of an address" "403 address-literal" "$(reason http://0x0b.0.2.10/)"
t_eq "decimal spelling of an address" "403 address-literal" "$(reason http://184549898/)"
# A disguised address literal is refused before it has a name or an address:
# its audit line carries the target as the client wrote it (raw bytes:
# curl would rewrite the URL first), and a query string never (it can carry
# a placeholder).
for u in http://2852039166/ http://0x7f000001/ http://127.1/; do
	h=${u#http://}
	t_ok "disguised literal $u: sent" raw "GET ${u}x?k=qs-$h HTTP/1.1\r\nHost: ${h%/}\r\nConnection: close\r\n\r\n"
	t_contains "disguised literal $u: 403 address-literal" "$T_OUT" "X-Sluice-Reason: address-literal"
	for _ in $(seq 50); do # bounded: the line is written within AUDIT_FLUSH_MS
		line=$(grep '"reason":"address-literal"' "$D/audit.log" | grep -F "\"target\":\"${u}x\"" | tail -1)
		[ -n "$line" ] && break
		sleep 0.1
	done
	t_contains "disguised literal $u: its audit line names the sandbox and the raw target" \
		"$line" "\"sandbox\":\"c1\",\"proto\":\"http\",\"name\":null,\"target\":\"${u}x\",\"src_addr\":\"10.99.0."
	t_eq "disguised literal $u: no query string in the log" "" "$(grep -F "qs-$h" "$D/audit.log")"
done
t_eq "cidr rule on another port" "403 port-not-allowed" "$(reason http://11.0.2.20:8080/)"
t_eq "allowed name resolving into 10/8 (rebinding)" "403 address-denied" "$(reason http://rebind.world.test/)"
t_eq "allowed name resolving to metadata" "403 address-denied" "$(reason http://metadata.world.test/)"
t_eq "allowed name resolving to loopback" "403 address-denied" "$(reason http://loop.world.test/)"
# Its only answer is AAAA ::169.254.169.254, judged as 169.254.169.254.
t_eq "allowed name resolving to v4-compatible ::169.254.169.254" "403 address-denied" \
	"$(reason http://compat.world.test/)"
t_eq "... via CONNECT" "403 address-denied" "$(reason https://compat.world.test/ -k)"
t_eq "... and the decoy there saw nothing" "" "$(world_decoy_hits | grep -F '::169.254.169.254')"
t_eq "the broker's own address and port" "403 broker-address" "$(reason http://11.0.0.2:3128/)"
t_eq "redirect to a host outside policy" "403 redirect-outside-policy" \
	"$(reason 'http://echo.world.test/redirect?to=http://other.world.test/&code=302')"
t_eq "redirect to a private address" "403 redirect-outside-policy" \
	"$(reason 'http://echo.world.test/redirect?to=http://10.0.0.5/&code=301')"
t_eq "redirect within policy passes" "302 " \
	"$(reason 'http://echo.world.test/redirect?to=http://echo.world.test/x&code=302')"
t_eq "relative redirect passes" "307 " "$(reason 'http://echo.world.test/redirect?to=/y&code=307')"
t_eq "name that does not resolve" "502 dns-failure" "$(reason http://nx.world.test/)"
t_eq "connection refused upstream" "502 connect-failed" "$(reason http://echo.world.test:8443/ --proxy-header 'X: y')"
t_eq "upstream that never answers the SYN" "504 connect-timeout" "$(reason http://11.0.9.9/)"
# An upstream that accepts and never answers (response_timeout: 2s).
ip -n "$WORLD_INET" addr add 11.0.9.1/32 dev lo
world_spawn inet silent /usr/bin/python3 -c '
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("11.0.9.1", 80)); s.listen(16)
held = []
deadline = time.time() + 300
while time.time() < deadline:
    s.settimeout(1)
    try:
        held.append(s.accept()[0])
    except socket.timeout:
        pass'
sleep 0.5
t_eq "upstream that accepts and never answers" "504 upstream-timeout" "$(reason http://11.0.9.1/)"
t_ok "unregistered source" client_exec c2 curl -s -m 10 -o /dev/null -D - -x http://10.99.0.5:3128 http://echo.world.test/
t_contains "unknown source gets 403 unknown-source" "$T_OUT" "unknown-source"

# --- malformed input: 400 and the broker goes on ---------------------------------
bad() { # NAME PAYLOAD EXPECTED-REASON
	t_ok "$1: answered" raw "$2"
	t_contains "$1: 400 $3" "$T_OUT" "X-Sluice-Reason: $3"
}
bad "Content-Length with Transfer-Encoding" \
	'POST http://echo.world.test/ HTTP/1.1\r\nHost: echo.world.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n' cl-and-te
bad "duplicate Content-Length" \
	'POST http://echo.world.test/ HTTP/1.1\r\nHost: echo.world.test\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc' duplicate-content-length
bad "obsolete line folding" \
	'GET http://echo.world.test/ HTTP/1.1\r\nHost: echo.world.test\r\nX-A: 1\r\n folded\r\n\r\n' obs-fold
bad "Host disagreeing with the URI" \
	'GET http://echo.world.test/ HTTP/1.1\r\nHost: other.world.test\r\n\r\n' host-mismatch
bad "NUL in a header value" \
	'GET http://echo.world.test/ HTTP/1.1\r\nHost: echo.world.test\r\nX-A: a\x00b\r\n\r\n' invalid-character
bad "origin-form on the proxy port" 'GET / HTTP/1.1\r\nHost: echo.world.test\r\n\r\n' origin-form-on-proxy
big=$(printf 'X-Pad: %04000d\\r\\n' 0)
bad "oversized head" "GET http://echo.world.test/ HTTP/1.1\\r\\nHost: echo.world.test\\r\\n$big$big\\r\\n" head-too-large
t_ok "slow client gets 408 after head_timeout" raw 'GET http://echo.world.test/ HTTP/1.1\r\nHo' --slow 0.05 --hold 4
t_contains "408 head-timeout" "$T_OUT" "head-timeout"
t_ok "broker still serves after all that" c1 curl -sf -m 10 $P http://echo.world.test/after

# --- a broker held up ----------------------------------------------------------
# The broker accepts a connection, then is stopped (SIGSTOP: its loop held up,
# as a starved CPU would) while the request comes in. It is resumed only after
# head_timeout (1 s) has passed since the accept: the request came in time and
# sits in the socket, so it is answered, not refused with a 408.
queued() { brk_exec ss -Htn 'sport = :3128' | awk '$2 > 0 { print }'; }
base=$(open_conns)
rm -f "$D/held-go"
client_exec c1 /usr/bin/python3 "$RAWPY" 10.99.0.1 3128 \
	'GET http://echo.world.test/held HTTP/1.1\r\nHost: echo.world.test\r\nConnection: close\r\n\r\n' \
	--after "$D/held-go" --hold 8 >"$D/held.out" 2>&1 &
held=$!
t_ok "the held-up broker's connection is accepted" wait_for 1 conns_at_least $((base + 1))
kill -STOP "$BROKER_PID"
touch "$D/held-go"
t_ok "its request is in the stopped broker's socket" wait_for 1 queued
sleep 1.5
kill -CONT "$BROKER_PID"
wait "$held"
t_contains "it is answered once the broker runs again" "$(head -1 "$D/held.out")" "HTTP/1.1 200"
t_contains "by the origin" "$(cat "$D/held.out")" '"path": "/held"'

# --- limits --------------------------------------------------------------------------
holders=()
for i in 1 2 3 4; do
	raw 'CONNECT echo.world.test:22 HTTP/1.1\r\nHost: echo.world.test:22\r\n\r\n' --hold 3 >/dev/null 2>&1 &
	holders+=($!)
done
t_ok "four tunnels open" wait_for 1 conns_at_least 4
t_eq "a fifth connection over limits.connections" "429 connection-limit" "$(reason http://echo.world.test/)"
wait "${holders[@]}" 2>/dev/null
t_ok "and closed" wait_for 1 conns_at_most 0
# The total limit, lowered by a reload of the configuration.
sed -i 's/^workers: 2$/workers: 2\nmax_connections: 2/' "$BROKER_CONF"
t_ok "reload with max_connections: 2" sl reload
holders=()
for i in 1 2; do
	raw 'CONNECT echo.world.test:22 HTTP/1.1\r\nHost: echo.world.test:22\r\n\r\n' --hold 3 >/dev/null 2>&1 &
	holders+=($!)
done
t_ok "two tunnels open" wait_for 1 conns_at_least 2
t_eq "a third connection over max_connections" "503 broker-connection-limit" "$(reason http://echo.world.test/)"
wait "${holders[@]}" 2>/dev/null
t_ok "and closed" wait_for 1 conns_at_most 0
sed -i '/^max_connections: 2$/d' "$BROKER_CONF"
t_ok "reload back to the default limit" sl reload
# A key that waits for a restart is named in the log; one in force now is not.
sed -i 's/^workers: 2$/workers: 2\ndns_cache_size: 100\nmax_connections: 10000\nresolve_timeout: 2s/' "$BROKER_CONF"
t_ok "reload with dns_cache_size, max_connections and resolve_timeout changed" sl reload
said=$T_OUT
t_contains "sluice reload says what is in force now" "$said" \
	"changed, in force now: max_connections, resolve_timeout"
t_contains "and what waits for a restart" "$said" "changed, in force after a restart only: dns_cache_size"
t_contains "and which configuration it read" "$said" "configuration: $BROKER_CONF"
t_ok "the log names dns_cache_size as waiting for a restart" \
	grep -q "in force after a restart only: dns_cache_size$" "$BROKER_LOG"
# max_connections never promises more connections than descriptors allow
# (6 per tunnel; 64, and per worker 16 + 64 for its kept pipes + 256 for
# DNS over TCP, for the rest): 2048 with 2 workers holds
# (2048 - 736) / 6 = 218.
t_ok "RLIMIT_NOFILE of the broker lowered to 2048 (as its user)" \
	as_user_of "$BROKER_PID" prlimit --pid "$BROKER_PID" --nofile=2048:2048
t_ok "reload with max_connections 10000" sl reload
t_ok "the log says it is lowered to what the descriptors hold" \
	grep -q "max_connections 10000 lowered to 218: RLIMIT_NOFILE is 2048" "$BROKER_LOG"
sed -i '/^dns_cache_size: 100$/d; /^max_connections: 10000$/d; /^resolve_timeout: 2s$/d' "$BROKER_CONF"
t_ok "reload back" sl reload
t_contains "a reload that changes no key says so" "$T_OUT" "changed, in force after a restart only: nothing"
sleep 0.3
t_eq "connections accepted again" "200 " "$(reason http://echo.world.test/)"

t0=$(date +%s%N)
t_ok "tunnel idle past idle_timeout is closed" raw \
	'CONNECT echo.world.test:22 HTTP/1.1\r\nHost: echo.world.test:22\r\n\r\n' --hold 8
t1=$(date +%s%N)
t_ok "closed by the broker (2s idle_timeout) before the client's 8s" test $(((t1 - t0) / 1000000)) -lt 6000
t_contains "audit says idle-timeout" "$(cat "$D/audit.log")" '"reason":"idle-timeout"'

# --- audit and metrics -------------------------------------------------------------
t_ok "every audit line is JSON" /usr/bin/python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    for k in ("time", "decision", "reason"):
        assert k in e, (k, line)
    n += 1
assert n > 20, n
print(n)' "$D/audit.log"
t_contains "audit names the sandbox and the rule" "$(grep '"reason":"allowed"' "$D/audit.log" | head -1)" '"sandbox":"c1"'
t_contains "audit has bytes each way" "$(grep '"proto":"connect"' "$D/audit.log" | grep '"reason":"allowed"' | head -1)" '"bytes_down":'
t_ok "status prints counters" sl status
t_ok "status --metrics" sl status --metrics
t_contains "Prometheus decisions by reason" "$T_OUT" 'sluice_decisions_total{proto="http",decision="deny",reason="not-allowlisted"}'
t_contains "connect latency histogram" "$T_OUT" 'sluice_upstream_connect_seconds_bucket'

# --- audit: refusals folded and bounded per sandbox ----------------------------------
# 1000 refused requests for one name, 1000 for another, one for a third:
# each name's first refusal is a line of its own, the repeats one line with
# "repeated":999. Then 250 refusals of 250 names (no two alike): beyond the
# sandbox's audit rate (burst 200, 20/s) they are dropped, and one line says
# how many. Each refusal is still answered 403.
cat >"$D/refuse.py" <<'PY'
import socket, sys
def ask(name):
    s = socket.create_connection(("10.99.0.1", 3128), timeout=5)
    s.sendall(("GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
               % (name, name)).encode())
    head = b""
    while b"\r\n" not in head:
        b = s.recv(4096)
        if not b:
            break
        head += b
    s.close()
    return head.split(b" ")[1:2] == [b"403"]
names = ["fold-a.world.test"] * 1000 + ["fold-b.world.test"] * 1000 + ["fold-c.world.test"]
names += ["rl-%d.world.test" % i for i in range(250)]
print("403 %d of %d" % (sum(ask(n) for n in names), len(names)))
PY
amark=$(wc -l <"$D/audit.log")
t0=$(date +%s%N)
t_ok "2251 refused requests from c1" c1 /usr/bin/python3 "$D/refuse.py"
secs=$((($(date +%s%N) - t0) / 1000000000 + 1))
t_eq "each answered 403" "403 2251 of 2251" "$T_OUT"
new_lines() { tail -n +$((amark + 1)) "$D/audit.log"; }
fold_lines() { new_lines | grep "\"name\":\"fold-$1.world.test\""; }
t_eq "fold-a: its first refusal, then one line with the count" \
	"1 1" "$(fold_lines a | grep -vc '"repeated":[0-9]') $(fold_lines a | grep -c '"repeated":999[,}]')"
t_contains "the first is a whole line" "$(fold_lines a | head -1)" '"decision":"deny","reason":"not-allowlisted"'
t_contains "the count line says what it counts" "$(fold_lines a | tail -1)" \
	'"sandbox":"c1","proto":"http","name":"fold-a.world.test","target":null,"src_addr":null,"src_port":null,"dst_addr":null,"dst_port":80,"decision":"deny","reason":"not-allowlisted","mode":null,"rule":null,"credential":null,"method":null,"path":null,"status":null,"dns_type":null,"dns_answer":null,"pid":null,"uid":null,"old_policy":null,"old_sha256":null,"new_policy":null,"new_sha256":null,"bytes_up":null,"bytes_down":null,"duration_ms":null,"repeated":999,"dropped":null}'
t_eq "fold-b: the same (its count written when fold-c came)" \
	"1 1" "$(fold_lines b | grep -vc '"repeated":[0-9]') $(fold_lines b | grep -c '"repeated":999[,}]')"
t_eq "fold-c: its first refusal" 1 "$(fold_lines c | wc -l)"
n_rl=$(new_lines | grep -c '"name":"rl-')
max_rl=$((200 + 20 * secs))
t_ok "250 refusals of 250 names: at most the rate's share written ($n_rl <= $max_rl)" \
	test "$n_rl" -le "$max_rl" -a "$n_rl" -lt 250
t_eq "the first of them is there" 1 "$(new_lines | grep -c '"name":"rl-0.world.test"')"
# The count of those dropped comes when 10 s have passed since the first.
for _ in $(seq 150); do new_lines | grep -q '"reason":"audit-rate-limited"' && break; sleep 0.1; done
drop_line=$(new_lines | grep '"reason":"audit-rate-limited"')
echo "# $n_rl of 250 written in ${secs} s; $drop_line"
dropped=$(sed -n 's/.*"dropped":\([0-9]*\).*/\1/p' <<<"$drop_line")
t_eq "one line counts the dropped ones, and every refusal is accounted for" \
	"1 250" "$(grep -c . <<<"$drop_line") $((n_rl + ${dropped:-0}))"
t_contains "it names the sandbox" "$drop_line" '"sandbox":"c1","proto":null,"name":null,"target":null,"src_addr":null,"src_port":null,"dst_addr":null,"dst_port":null,"decision":"deny","reason":"audit-rate-limited",'
n_new=$(new_lines | grep -c '"sandbox":"c1"')
t_ok "2251 refusals made $n_new audit lines" test "$n_new" -le $((n_rl + 10))
t_ok "metrics" sl status --metrics
m_folded=$(awk '$1 == "sluice_audit_refusals_folded_total" { print $2 }' <<<"$T_OUT")
m_dropped=$(awk '$1 == "sluice_audit_refusals_dropped_total" { print $2 }' <<<"$T_OUT")
t_ok "metrics count the folded refusals (${m_folded:-?} >= 1998)" test "${m_folded:-0}" -ge 1998
t_ok "and the dropped ones (${m_dropped:-?} >= ${dropped:-?})" test "${m_dropped:-0}" -ge "${dropped:-1}"

# --- reload ------------------------------------------------------------------------
cp "$D/pol.yaml" "$D/pol.good"
sed -i 's/    - host: rebind.world.test/    - host: other.world.test\n    - host: rebind.world.test/' "$D/pol.yaml"
# A SIGHUP's reload is done when the log says so (one line per reload).
reloads() { grep -c -e '^.*reload: configuration and [0-9]* policies in force' -e 'reload: policy refused' "$D/sluiced.log"; }
reloaded_since() { [ "$(reloads)" -gt "$1" ] && echo yes; }
n_rel=$(reloads)
kill -HUP "$BROKER_PID"
t_ok "SIGHUP: the reload is logged" wait_for 1 reloaded_since "$n_rel"
t_eq "SIGHUP with a good policy: new rule in force" "200 " "$(reason http://other.world.test/)"
printf 'version: 1\negress:\n  allow:\n    - host: a..b\n' >"$D/pol.yaml"
n_rel=$(reloads)
kill -HUP "$BROKER_PID"
t_ok "SIGHUP: the refusal is logged" wait_for 1 reloaded_since "$n_rel"
t_eq "SIGHUP with a broken policy: old policy stays" "200 " "$(reason http://other.world.test/)"
t_contains "the refusal is logged with its position" "$(cat "$D/sluiced.log")" "pol.yaml:4:13"
t_rc "sluice reload reports the broken policy" 1 sl reload
t_contains "with FILE:LINE:COL" "$T_ERR" "pol.yaml:4:13: bad host pattern"
t_contains "and the sandbox whose policy it is" "$T_ERR" "(sandbox \`c1\`)"
cp "$D/pol.good" "$D/pol.yaml"
t_ok "reload with the good policy" sl reload

# --- drain on SIGTERM ---------------------------------------------------------------------
c1 curl -s -m 10 $P --limit-rate 20M -o /dev/null -w '%{size_download}' \
	http://echo.world.test/bytes/30000000 >"$D/drain.out" 2>&1 &
dl=$!
t_ok "the download is under way" wait_for 1 conns_at_least 1
kill -TERM "$BROKER_PID"
listening() { ip netns exec "$WORLD_BRK" ss -Hltn 'sport = :3128'; }
no_listener() { [ -z "$(listening)" ] && echo yes; }
t_ok "the draining broker stops listening" wait_for 1 no_listener
t_rc "a draining broker takes no new connection" 7 c1 curl -s -m 5 -o /dev/null $P http://echo.world.test/
wait "$dl"
t_eq "a download open at SIGTERM finishes" "30000000" "$(cat "$D/drain.out")"
for _ in $(seq 50); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
t_rc "the broker exits after draining" 1 kill -0 "$BROKER_PID"
broker_stop

# --- restart -----------------------------------------------------------------------
t_rc "broker down: nothing gets through" 7 c1 curl -s -m 5 -o /dev/null $P http://echo.world.test/
broker_start
t_contains "restart restores registrations" "$(sl list)" "c1"
t_ok "and the sandbox works again" c1 curl -sf -m 10 $P http://echo.world.test/again
t_ok "unregister" sl unregister c1
t_rc "unregister twice says so" 1 sl unregister c1
t_contains "no such sandbox" "$T_ERR" "no such sandbox"
t_contains "unregistered source refused" "$(reason http://echo.world.test/)" "unknown-source"

# --- audit write failures do not stop the broker -----------------------------------------
broker_stop
sed -i "s|^audit_log: .*|audit_log: /dev/full|" "$BROKER_CONF"
broker_start
sl register c1 --addr 10.99.0.2 --policy "$D/pol.yaml" >/dev/null
t_ok "with audit writes failing, requests still work" c1 curl -sf -m 10 $P http://echo.world.test/full
t_contains "and the failures are counted" "$(sl status --metrics | grep '^sluice_audit_write_failures_total')" "total "
t_not_contains "counter is not zero" "$(sl status --metrics | grep '^sluice_audit_write_failures_total')" "total 0"

# --- nothing leaked --------------------------------------------------------------------
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_not_contains "no secret-looking proxy credential in the audit log" "$(cat "$D/audit.log")" "u:p"
broker_stop
t_done
