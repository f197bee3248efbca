#!/bin/bash
# SPDX-License-Identifier: MIT
# test_world.sh - smoke test of the test world itself: DNS, echo servers, TLS, decoys, teardown.
#
# Runs without sluice: it proves that the harness other tests rely on answers
# what it promises, that its decoy recorder does record, and that world_down
# leaves nothing behind.

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/../world/world.sh"

# The world must be reached directly, whatever the caller's environment says.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
unset CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR

if ! world_up; then
	echo "not ok - world_up"
	echo "0 passed, 1 failed"
	exit 1
fi
trap world_down EXIT
echo "# world $WORLD_PREFIX in $WORLD_DIR"

DNSQ=$WORLD_SRC/dnsq.py
CURL="curl -sS --max-time 10"

# jget JSON EXPR: evaluate a Python expression over the parsed object d.
jget() {
	printf '%s' "$1" | /usr/bin/python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    print(eval(sys.argv[1], {"d": d}))
except Exception as e:
    print("<bad json: %s>" % e)' "$2"
}

# --- DNS, from the broker namespace, through its resolv.conf -----------------
t_ok "getent ahostsv4 echo.world.test" brk_exec getent ahostsv4 echo.world.test
t_eq "echo.world.test is 11.0.2.10 via dnsmasq" "11.0.2.10" "$(awk 'NR==1{print $1}' <<<"$T_OUT")"
t_ok "getent ahostsv6 echo.world.test" brk_exec getent ahostsv6 echo.world.test
t_eq "echo.world.test AAAA is 2600:1::10" "2600:1::10" "$(awk 'NR==1{print $1}' <<<"$T_OUT")"
# getent: exit 2 is "not found" (1 would be a usage error, a time-out is 124).
t_rc "an unknown name does not resolve" 2 brk_exec getent hosts nosuch.world.test
t_rc "a name outside world.test does not resolve" 2 brk_exec getent hosts example.com

# name type -> the exact answer lines expected from dnsmasq
while IFS='|' read -r qname qtype want; do
	t_ok "dns $qname $qtype" brk_exec /usr/bin/python3 "$DNSQ" "$qname" "$qtype"
	got=$(grep -v '^flags' <<<"$T_OUT" | paste -sd' ')
	t_eq "dns $qname $qtype answer" "$want" "$got"
done <<'EOF'
echo.world.test|A|rcode NOERROR A 11.0.2.10
echo.world.test|AAAA|rcode NOERROR AAAA 2600:1::10
echo.world.test|TXT|rcode NOERROR TXT "sluice-world echo"
other.world.test|A|rcode NOERROR A 11.0.2.20
rebind.world.test|A|rcode NOERROR A 10.0.0.5
metadata.world.test|A|rcode NOERROR A 169.254.169.254
loop.world.test|A|rcode NOERROR A 127.0.0.1
mixed.world.test|A|rcode NOERROR A 10.0.0.5 A 11.0.2.10
v6only.world.test|A|rcode NOERROR
v6only.world.test|AAAA|rcode NOERROR AAAA fd00::5
compat.world.test|A|rcode NOERROR
compat.world.test|AAAA|rcode NOERROR AAAA ::a9fe:a9fe
x-7f3a.canary.world.test|A|rcode NOERROR A 11.0.2.10
nosuch.world.test|A|rcode NXDOMAIN
example.com|A|rcode NXDOMAIN
EOF

# --- HTTP echo ---------------------------------------------------------------
tok=probe-$RANDOM$RANDOM
t_ok "curl http://echo.world.test/" brk_exec $CURL -H "X-World-Probe: $tok" "http://echo.world.test/some/path?q=1"
t_contains "echo returns our custom header" "$T_OUT" "[\"X-World-Probe\", \"$tok\"]"
t_eq "echo reports method and path" "GET /some/path?q=1" "$(jget "$T_OUT" 'd["method"] + " " + d["path"]')"
t_contains "echo.log shows what the upstream saw" "$(world_echo_log)" "[\"X-World-Probe\", \"$tok\"]"
t_ok "curl -4 http://echo.world.test:8080/" brk_exec $CURL -4 http://echo.world.test:8080/
t_eq "v4 echo server answers" "11.0.2.10:8080" "$(jget "$T_OUT" 'd["server"]')"
t_ok "curl -6 http://echo.world.test/" brk_exec $CURL -6 http://echo.world.test/
t_eq "v6 echo server answers" "[2600:1::10]:80" "$(jget "$T_OUT" 'd["server"]')"
t_ok "curl http://other.world.test/" brk_exec $CURL http://other.world.test/
t_eq "other.world.test is the second echo host" "11.0.2.20:80" "$(jget "$T_OUT" 'd["server"]')"

t_ok "POST a body" brk_exec bash -c "head -c 1000 /dev/zero | $CURL --data-binary @- http://11.0.2.10/post"
t_eq "echo counts a Content-Length body" "POST 1000" "$(jget "$T_OUT" 'd["method"] + " " + str(d["body_len"])')"
t_ok "PUT a chunked body" brk_exec bash -c "printf 'hello chunks' | $CURL -X PUT -H 'Transfer-Encoding: chunked' --data-binary @- http://11.0.2.10/put"
t_eq "echo decodes a chunked body" "PUT 12 hello chunks" \
	"$(jget "$T_OUT" 'd["method"] + " " + str(d["body_len"]) + " " + d["body_head"]')"
t_ok "any method" brk_exec $CURL -X FROB http://11.0.2.10/
t_eq "echo accepts method FROB" "FROB" "$(jget "$T_OUT" 'd["method"]')"

t_ok "two requests, one connection" brk_exec $CURL -o /dev/null -o /dev/null -w '%{num_connects}\n' \
	http://11.0.2.10/a http://11.0.2.10/b
t_eq "keep-alive: the second request reuses the connection" "1 0" "$(tr '\n' ' ' <<<"$T_OUT" | sed 's/ $//')"

t_ok "redirect" brk_exec $CURL -o /dev/null -w '%{http_code} %{redirect_url}' \
	"http://echo.world.test/redirect?to=http://other.world.test/landing&code=302"
t_eq "/redirect answers 302 with the Location" "302 http://other.world.test/landing" "$T_OUT"
t_ok "redirect 307" brk_exec $CURL -o /dev/null -w '%{http_code}' \
	"http://echo.world.test/redirect?to=https://echo.world.test/&code=307"
t_eq "/redirect honours code=307" "307" "$T_OUT"
t_ok "status" brk_exec $CURL -o /dev/null -w '%{http_code}' http://echo.world.test/status/418
t_eq "/status/418 answers 418" "418" "$T_OUT"
t_ok "bytes" brk_exec $CURL -o /dev/null -w '%{http_code} %{size_download}' http://echo.world.test/bytes/3000000
t_eq "/bytes/3000000 sends 3000000 bytes" "200 3000000" "$T_OUT"

# --- TLS -----------------------------------------------------------------------
t_ok "https with the test CA" brk_exec $CURL --cacert "$WORLD_CA" https://echo.world.test/tls
t_eq "https echo answers over TLS" "https /tls" "$(jget "$T_OUT" 'd["scheme"] + " " + d["path"]')"
t_ok "https over v6" brk_exec $CURL -6 --cacert "$WORLD_CA" https://echo.world.test/
t_eq "v6 https echo answers" "[2600:1::10]:443" "$(jget "$T_OUT" 'd["server"]')"
t_ok "https by address (IP SAN)" brk_exec $CURL --cacert "$WORLD_CA" https://11.0.2.20/
# curl exit 60: the peer's certificate could not be verified.
t_rc "https without the test CA fails verification" 60 brk_exec $CURL https://echo.world.test/
t_rc "11.0.2.20:8443 (self-signed) fails verification" 60 brk_exec $CURL --cacert "$WORLD_CA" https://11.0.2.20:8443/
t_ok "11.0.2.20:8443 is up (it is the cert that fails)" brk_exec $CURL -k https://11.0.2.20:8443/
t_eq "the bad-cert server is an echo server" "11.0.2.20:8443" "$(jget "$T_OUT" 'd["server"]')"

# --- SSH-like banner -----------------------------------------------------------
t_ok "banner on 11.0.2.10:22" brk_exec bash -c '
	exec 3<>/dev/tcp/11.0.2.10/22
	IFS= read -r -t 5 banner <&3 || exit 1
	printf "ping\n" >&3
	IFS= read -r -t 5 back <&3 || exit 1
	printf "%s|%s\n" "$banner" "$back"'
t_eq "banner then echo" $'SSH-2.0-sluice-world\r|ping' "$T_OUT"

# --- decoys ----------------------------------------------------------------------
t_eq "no decoy hit after all the above" "" "$(world_decoy_hits)"

t_ok "connect to 10.0.0.5:80" brk_exec $CURL http://10.0.0.5/
t_eq "a decoy answers like a server" "DECOY" "$T_OUT"
t_ok "connect to 169.254.169.254:80" brk_exec $CURL http://169.254.169.254/latest/meta-data/
t_ok "connect to [fd00::5]:443" brk_exec bash -c 'exec 3<>/dev/tcp/fd00::5/443; cat <&3'
t_ok "connect to the broker's own 127.0.0.1:80" brk_exec $CURL http://127.0.0.1/
t_ok "UDP datagram to 11.0.3.1:9999" brk_exec bash -c 'printf leak >/dev/udp/11.0.3.1/9999'
# The datagram is recorded when the decoy reads it: wait for it, bounded.
for ((i = 0; i < 50; i++)); do
	[[ $(world_decoy_hits) == *"HIT udp 11.0.3.1 9999 "* ]] && break
	sleep 0.1
done
hits=$(world_decoy_hits)
echo "$hits" | sed 's/^/# /'
t_contains "hit recorded: tcp 10.0.0.5:80 from the broker ns" "$hits" "HIT tcp 10.0.0.5 80 11.0.0.2:"
t_contains "hit recorded: tcp 169.254.169.254:80" "$hits" "HIT tcp 169.254.169.254 80 11.0.0.2:"
t_contains "hit recorded: tcp [fd00::5]:443" "$hits" "HIT tcp fd00::5 443 [fd11:1::2]:"
t_contains "hit recorded: the brk-ns loopback decoy" "$hits" "HIT tcp 127.0.0.1 80 127.0.0.1:"
t_contains "hit recorded: udp 11.0.3.1:9999" "$hits" "HIT udp 11.0.3.1 9999 11.0.0.2:"
t_eq "exactly those five hits" "5" "$(grep -c '^HIT ' <<<"$hits")"

# --- DNS query log -------------------------------------------------------------
t_ok "dnsmasq logged the query for echo.world.test" world_dns_queried echo.world.test
t_ok "dnsmasq logged the canary query" world_dns_queried X-7F3A.Canary.World.Test.
t_fails "a name never asked is not in the log" world_dns_queried never-asked.world.test

# --- a client namespace behind the broker namespace ------------------------------
t_ok "world_add_client c1" world_add_client c1 10.99.0.2/30 10.99.0.1
t_ok "client has its default route via the broker side" client_exec c1 ip route show default
t_contains "client default route" "$T_OUT" "default via 10.99.0.1 dev eth0"
t_ok "client resolv.conf names its gateway" client_exec c1 cat /etc/resolv.conf
t_contains "client resolv.conf" "$T_OUT" "nameserver 10.99.0.1"
world_spawn brk gwhttp /usr/bin/python3 -m http.server --bind 10.99.0.1 8000 --directory "$WORLD_DIR/pki"
gw_up=no
for ((i = 0; i < 50; i++)); do
	timeout 2 ip netns exec "$WORLD_PREFIX-c1" curl -sf --noproxy '*' -o /dev/null http://10.99.0.1:8000/ca.crt && { gw_up=yes; break; }
	sleep 0.1
done
t_eq "client reaches a server in the broker ns" "yes" "$gw_up"
# With no broker, the broker namespace does not forward (the kernel drops the
# packet): the client reaches nothing beyond it.
t_fails "client cannot reach the internet without a broker" \
	client_exec c1 $CURL --connect-timeout 2 http://11.0.2.10/from-client
t_not_contains "the echo server never saw the client's request" "$(world_echo_log)" "/from-client"
t_eq "still no decoy hit from the client" "5" "$(world_decoy_hits | grep -c '^HIT ')"

# --- teardown ------------------------------------------------------------------
prefix=$WORLD_PREFIX
dir=$WORLD_DIR
pids=$(awk '{print $1}' "$WORLD_DIR/pids")
world_down
world_down	# idempotent
left=$(ip netns list | awk -v p="$prefix-" 'index($1, p) == 1 {print $1}')
t_eq "world_down removed every namespace" "" "$left"
alive=
for p in $pids; do
	[ -e "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && alive="$alive $p"
done
t_eq "world_down ended every server" "" "$alive"
t_eq "world_down removed WORLD_DIR" "no" "$([ -e "$dir" ] && echo yes || echo no)"
t_eq "world_down removed /etc/netns entries" "" "$(ls -d /etc/netns/"$prefix"-* 2>/dev/null)"

t_done
