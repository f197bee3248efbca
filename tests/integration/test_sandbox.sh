#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: long (run.sh): among the longest scripts, started before the others
# The sandbox lifecycle in the test world: create, exec, env, run, delete;
# what a sandbox can and cannot reach (the explicit proxy yes; anything not
# TCP or DNS refused at once with admin-prohibited; no forwarding, also with
# ip_forward=1; no spoofed sources; no way around by changing its own
# routes; no IPv6); failed creates and 100 create/delete cycles leave
# nothing behind; no decoy hit and no sandbox packet in the "internet".
#
# Every sluice command runs inside the broker namespace, as a user would
# run it (`ip netns exec BROKER sluice create ...`), but those that check
# --broker-netns (sluice enters the broker's namespace itself). Sandbox
# names are "$WORLD_PREFIX-x*": the trap removes whatever of them is left.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
PY=/usr/bin/python3
STATE=/run/sluice-sandboxes
# The sandboxes' own traffic must be judged by sluice, never by a proxy the
# caller happens to have configured.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

world_up || { echo "world did not come up"; echo "0 passed, 1 failed"; exit 1; }
P=$WORLD_PREFIX
D=$WORLD_DIR

# Every sandbox of this test, by name, whatever state it is in.
our_sandboxes() {
	local f
	for f in /run/netns/"$P"-x* "$STATE"/"$P"-x* /etc/netns/"$P"-x*; do
		[ -e "$f" ] && basename "$f"
	done | sort -u
}

cleanup_sandboxes() {
	local n pid
	for n in $(our_sandboxes); do
		if [ -n "$BROKER_PID" ]; then
			timeout 20 ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" \
				delete "$n" >/dev/null 2>&1
		fi
		# What sluice could not remove (the links and set elements go with
		# the broker namespace in world_down).
		if [ -e "/run/netns/$n" ]; then
			for pid in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
			ip netns del "$n" 2>/dev/null
		fi
		rm -rf "/etc/netns/$n" "${STATE:?}/$n" "/var/lib/sluice/workspaces/$n"
	done
}
# running PID: 0 while a thread of PID is not yet a zombie (a zombie is in
# no namespace any more). kill_gone PID: SIGKILL a child of this shell, wait
# up to 5 s until no thread of it runs, then reap it (quietly: no "Killed"
# notice); non-zero if one still runs.
running() {
	local f s
	for f in /proc/"$1"/task/*/stat; do
		s=$(cat "$f" 2>/dev/null) || continue
		s=${s##*) }
		[ "${s%% *}" != Z ] && return 0
	done
	return 1
}
kill_gone() {
	local i
	kill -KILL "$1"
	for ((i = 0; i < 100; i++)); do
		running "$1" || break
		sleep 0.05
	done
	running "$1" && return 1
	wait "$1"
	return 0
} 2>/dev/null
# The second broker, and the processes that hold its namespace.
B2PID=
B2HOLD=
B2IN=
stop_broker2() {
	[ -n "$B2PID" ] && kill_gone "$B2PID"
	B2PID=
	[ -e "/run/netns/$WORLD_PREFIX-brk2" ] && ip netns del "$WORLD_PREFIX-brk2"
	local p
	for p in $B2IN $B2HOLD; do kill_gone "$p"; done
	B2IN=
	B2HOLD=
	return 0
}
trap 'cleanup_sandboxes; stop_broker2; broker_stop; world_down' EXIT

broker_config "sandbox_pool: 10.201.0.0/22"
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
EOF
printf 'version: 1\negress:\n  allow:\n    - host: a..b\n' >"$D/bad.yaml"

# A probe run inside a sandbox: how a datagram, a ping or a forged TCP
# segment fares, and how fast. Prints one line; exit 0 when the expected
# admin-prohibited (ICMP type 3 code 13) came back.
cat >"$D/probe.py" <<'EOF'
import errno, select, socket, struct, sys, time

IP_RECVERR = 11
mode, t0 = sys.argv[1], time.monotonic()

def done(what, ok):
    print("%s %dms" % (what, (time.monotonic() - t0) * 1000))
    sys.exit(0 if ok else 1)

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF

if mode == "udp":  # udp ADDR PORT
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
    s.connect((sys.argv[2], int(sys.argv[3])))
    s.send(b"sluice-probe\n")
    if not select.select([s], [], [], 3)[0]:
        done("timeout", False)
    try:
        _, anc, _, _ = s.recvmsg(512, 512, socket.MSG_ERRQUEUE)
    except BlockingIOError:
        done("answered", False)
    for lvl, typ, data in anc:
        if lvl == socket.IPPROTO_IP and typ == IP_RECVERR:
            ee_errno, origin, ee_type, ee_code = struct.unpack("=IBBB", data[:7])
            done("icmp type %d code %d (%s)" % (ee_type, ee_code, errno.errorcode.get(ee_errno)),
                 ee_type == 3 and ee_code == 13)
    done("no error", False)
elif mode == "icmp":  # icmp ADDR: one echo request
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    pkt = struct.pack("!BBHHH", 8, 0, 0, 0x5ca1, 1) + b"sluice-probe"
    pkt = pkt[:2] + struct.pack("!H", csum(pkt)) + pkt[4:]
    s.sendto(pkt, (sys.argv[2], 0))
    end = time.monotonic() + 3
    while time.monotonic() < end:
        if not select.select([s], [], [], end - time.monotonic())[0]:
            break
        data = s.recv(2048)
        ihl = (data[0] & 15) * 4
        t, c = data[ihl], data[ihl + 1]
        if t == 0:
            done("echo reply", False)
        if t == 3:
            done("icmp type 3 code %d" % c, c == 13)
    done("timeout", False)
elif mode == "synfin":  # synfin SRC DST PORT: a segment conntrack calls invalid
    src, dst, port = sys.argv[2], sys.argv[3], int(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    hdr = struct.pack("!HHIIBBHHH", 40001, port, 4242, 0, 5 << 4, 0x03, 8192, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(hdr))
    hdr = hdr[:16] + struct.pack("!H", csum(pseudo + hdr)) + hdr[18:]
    s.sendto(hdr, (dst, 0))
    done("sent", True)
elif mode == "frag":  # frag SRC DST N: N first fragments of UDP datagrams to DST:53
    src, dst, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for i in range(n):
        udp = struct.pack("!HHHH", 40002, 53, 8 + 1400, 0) + b"f" * 64
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0x1000 + i, 0x2000, 64, 17, 0,
                         socket.inet_aton(src), socket.inet_aton(dst))
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        s.sendto(ip + udp, (dst, 0))
    done("sent", True)
EOF

# IN NAME CMD...: CMD as root inside sandbox NAME, bypassing sluice exec (the
# sandbox's own root, who may change its routes and addresses).
IN() { local n=$1; shift; ip netns exec "$n" "$@"; }
# EX NAME CMD...: through sluice exec.
EX() { local n=$1; shift; sl exec "$n" -- "$@"; }
nft_brk() { ip netns exec "$WORLD_BRK" nft "$@"; }
counter() { nft_brk list counter inet sluice "$1" 2>/dev/null | awk '/packets/ {print $2}'; }
elements() { nft_brk -j list set inet sluice sandbox_src 2>/dev/null |
	$PY -c 'import json,sys; d=json.load(sys.stdin)
for o in d["nftables"]:
    if "set" in o: print(len(o["set"].get("elem", [])))'; }
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
# `sluice delete` cuts a sandbox's wire before it returns (set element gone,
# broker-side link marked for removal); the veth pair itself goes a moment
# later (a child of sluice waits out the kernel's grace periods). link_up
# LINK: the link's line if it is there and up. link_unmarked LINK: its line
# if it is there and not marked. links_settle N: waits up to 5 s for the
# broker namespace to hold N links (or link LINK to be gone); 0 when it does.
link_up() { ip -n "$WORLD_BRK" -o link show dev "$1" up 2>/dev/null; }
link_unmarked() { ip -n "$WORLD_BRK" -o link show dev "$1" 2>/dev/null | grep -v 'alias sluice: deleted'; }
links_settle() {
	local i
	for ((i = 0; i < 100; i++)); do
		if [[ $1 =~ ^[0-9]+$ ]]; then
			[ "$(ip -n "$WORLD_BRK" -o link show | wc -l)" = "$1" ] && return 0
		else
			ip -n "$WORLD_BRK" link show dev "$1" >/dev/null 2>&1 || return 0
		fi
		sleep 0.05
	done
	return 1
}
# A delete renames the sandbox's emptied directories into $TRASH (the names
# are free when it returns) and a child of it removes them once it has
# exited. trash_settles: waits up to 5 s for the trash to be empty; 0 when
# it is. Only sluice's delete writes there, and another test world's
# delete empties it just the same.
TRASH=$STATE/.deleted
trash_settles() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ -z "$(ls -A "$TRASH" 2>/dev/null)" ] && return 0
		sleep 0.05
	done
	return 1
}

# The "internet" counts every packet whose source is a sandbox address: the
# broker's own connections come from 11.0.0.2, so any count is a leak.
ip netns exec "$WORLD_INET" nft -f - <<'EOF'
table inet leakwatch {
	chain pre {
		type filter hook prerouting priority -300; policy accept;
		ip saddr 10.201.0.0/16 counter
		ip6 saddr fd00:99::/64 counter
	}
}
EOF
leaks() { ip netns exec "$WORLD_INET" nft list chain inet leakwatch pre |
	awk '/counter/ {n += $(NF-2)} END {print n + 0}'; }

broker_start
t_ok "broker starts" test -S "$BROKER_SOCK"

# --- create --------------------------------------------------------------------
S1=$P-x1
t0=$(date +%s%N)
t_ok "create $S1" sl create "$S1" --policy "$D/pol.yaml"
echo "# create took $(ms_since "$t0") ms (first: installs the table)"
read -r n1 A1 G1 <<<"$T_OUT"
t_eq "create prints NAME ADDR GW" "$S1 10.201.0.2 10.201.0.1" "$n1 $A1 $G1"
L1=sl-0ac90002
t_contains "ip netns list shows it" "$(ip netns list)" "$S1"
t_eq "/etc/netns/NAME holds resolv.conf only (ip netns exec binds every file there)" \
	"resolv.conf" "$(ls "/etc/netns/$S1" 2>&1)"
t_eq "resolv.conf names the gateway" "nameserver $G1" "$(cat "/etc/netns/$S1/resolv.conf" 2>&1)"
t_ok "broker side $L1 exists" ip -n "$WORLD_BRK" -4 addr show dev "$L1"
t_contains "broker side holds the gateway /30" "$T_OUT" "inet $G1/30"
t_contains "broker side is up" "$(ip -n "$WORLD_BRK" link show dev "$L1")" "state UP"
t_eq "broker side answers ARP for its own address only (arp_ignore)" "1" \
	"$(ip netns exec "$WORLD_BRK" cat "/proc/sys/net/ipv4/conf/$L1/arp_ignore")"
t_contains "sandbox eth0 holds ADDR/30" "$(IN "$S1" ip -4 addr show dev eth0)" "inet $A1/30"
t_contains "sandbox eth0 is up" "$(IN "$S1" ip link show dev eth0)" "state UP"
t_eq "sandbox has one route out: default via the gateway" "default via $G1 dev eth0" \
	"$(IN "$S1" ip route show default | sed 's/ *proto [a-z]*//; s/ *$//')"
t_eq "sandbox has only lo and eth0" "lo eth0" \
	"$(IN "$S1" ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | paste -sd' ')"
t_eq "IPv6 is off in the sandbox" "1 1 1" \
	"$(IN "$S1" cat /proc/sys/net/ipv6/conf/{all,default,eth0}/disable_ipv6 | paste -sd' ')"
t_eq "and no IPv6 address is there" "" "$(IN "$S1" ip -6 addr show)"
t_eq "the broker side has no IPv6 address either" "" "$(ip -n "$WORLD_BRK" -6 addr show dev "$L1")"
# IPv6 off on the broker side too: with it on, even without an address,
# each link has a multicast route, and every link's up and down walks all
# of them (a create that grows with the number of sandboxes).
t_eq "IPv6 is off on the broker side" "1" \
	"$(ip netns exec "$WORLD_BRK" cat "/proc/sys/net/ipv6/conf/$L1/disable_ipv6")"
t_eq "and the broker side has no IPv6 route" "" "$(ip -n "$WORLD_BRK" -6 route show table all dev "$L1")"
t_contains "its set element is in table inet sluice" \
	"$(nft_brk list set inet sluice sandbox_src)" "\"$L1\" . $A1"
t_contains "the broker lists it" "$(sl list)" "$S1"
t_ok "ip netns exec works and says nothing (no stray files to bind)" IN "$S1" true
t_eq "ip netns exec stderr" "" "$T_ERR"
t_rc "create the same name again is refused" 1 sl create "$S1" --policy "$D/pol.yaml"
t_contains "saying it exists" "$T_ERR" "exists"
t_rc "an invalid policy is refused" 1 sl create "$P-xbad" --policy "$D/bad.yaml"
t_contains "with FILE:LINE:COL" "$T_ERR" "bad.yaml:4:13"
t_eq "printed as it is (no \`sluice: create\` before it)" "$D/bad.yaml" "${T_ERR%%:4:13:*}"
t_eq "and nothing of it exists" "" "$(our_sandboxes | grep -x "$P-xbad")"

# --- exec and env ----------------------------------------------------------------
t_ok "sluice exec: resolv.conf" EX "$S1" cat /etc/resolv.conf
t_eq "sluice exec sees the gateway as its resolver" "nameserver $G1" "$T_OUT"
t_ok "sluice exec runs in the sandbox namespace" EX "$S1" ip -4 -o addr show dev eth0
t_contains "with the sandbox address" "$T_OUT" "$A1/30"
t_ok "sluice exec: /sys shows the sandbox's links" EX "$S1" ls /sys/class/net
t_eq "/sys/class/net" "eth0 lo" "$(echo $T_OUT)"
t_ok "sluice env" sl env "$S1"
ENV_OUT=$T_OUT
for kv in "HTTP_PROXY=http://$G1:3128" "HTTPS_PROXY=http://$G1:3128" "http_proxy=http://$G1:3128" \
	"https_proxy=http://$G1:3128" "NO_PROXY=$G1" "no_proxy=$G1" \
	"SSL_CERT_FILE=$STATE/$S1/ca-bundle.crt" "REQUESTS_CA_BUNDLE=$STATE/$S1/ca-bundle.crt" \
	"CURL_CA_BUNDLE=$STATE/$S1/ca-bundle.crt" "NODE_EXTRA_CA_CERTS=$STATE/$S1/ca-bundle.crt" \
	"GIT_SSL_CAINFO=$STATE/$S1/ca-bundle.crt"; do
	t_eq "env has $kv" "$kv" "$(grep -x "$kv" <<<"$ENV_OUT")"
done
t_ok "the CA bundle starts with the system trust store" \
	cmp -n "$(stat -c %s /etc/ssl/certs/ca-certificates.crt)" "$STATE/$S1/ca-bundle.crt" /etc/ssl/certs/ca-certificates.crt
t_eq "and ends with the sandbox's own CA" "$(sl ca "$S1")" \
	"$(tail -c "$(sl ca "$S1" | wc -c)" "$STATE/$S1/ca-bundle.crt")"
t_ok "sluice exec gives the same environment" EX "$S1" sh -c 'echo "$HTTPS_PROXY $NO_PROXY $SSL_CERT_FILE"'
t_eq "exec environment" "http://$G1:3128 $G1 $STATE/$S1/ca-bundle.crt" "$T_OUT"
t_ok "the command's arguments are its own (--socket after --)" EX "$S1" echo --socket x
t_eq "echo --socket x" "--socket x" "$T_OUT"
t_rc "sluice exec: the command's exit status" 7 EX "$S1" sh -c 'exit 7'
t_rc "sluice exec: a missing command is 127" 127 EX "$S1" /nonexistent/cmd
t_rc "sluice exec of no such sandbox" 1 sl exec "$P-xnone" -- true
t_contains "says no such sandbox" "$T_ERR" "no such sandbox \`$P-xnone\`"

# --- the explicit proxy through the gateway ---------------------------------------
t_ok "curl through HTTP_PROXY from sluice exec" EX "$S1" curl -sf -m 10 http://echo.world.test/sandbox-hello
t_contains "reached the echo server" "$T_OUT" '"path": "/sandbox-hello"'
t_contains "the echo server logged it" "$(world_echo_log)" "/sandbox-hello"
t_ok "HTTPS through CONNECT from sluice exec" sl exec --bind "$D/pki:$D/pki:ro" "$S1" -- curl -sf -m 10 --cacert "$WORLD_CA" \
	https://echo.world.test/sandbox-tls
t_contains "TLS reached the echo server" "$T_OUT" '"path": "/sandbox-tls"'
t_contains "the broker's audit names the sandbox" "$(grep sandbox-hello "$D/audit.log")" "\"sandbox\":\"$S1\""
t_ok "a name outside the policy is refused by the broker" EX "$S1" curl -s -m 10 -o /dev/null -w '%{http_code}' http://other.world.test/
t_eq "403" "403" "$T_OUT"

# --- isolation -------------------------------------------------------------------------
refused0=$(counter refused)
t_ok "ICMP echo to the gateway: admin-prohibited at once" IN "$S1" $PY "$D/probe.py" icmp "$G1"
echo "# $T_OUT"
t_ok "UDP to an outside address: admin-prohibited at once" IN "$S1" $PY "$D/probe.py" udp "$WORLD_UDP4" 9999
echo "# $T_OUT"
t_ok "UDP to the gateway: admin-prohibited at once" IN "$S1" $PY "$D/probe.py" udp "$G1" 9999
t_ok "the refusals were counted" test "$(counter refused)" -ge $((refused0 + 3))
# TCP is the broker's to judge (the transparent port): whatever it answers,
# these must not reach the echo server as the sandbox asked.
IN "$S1" curl -s -m 5 -o /dev/null -x "http://11.0.0.2:3128" http://echo.world.test/via-uplink
t_not_contains "the proxy port of the broker's other address is not the proxy" \
	"$(world_echo_log)" "/via-uplink"

# Forwarding on in the broker namespace (this world's, never the machine's).
t_ok "ip_forward=1 in the broker namespace" ip netns exec "$WORLD_BRK" sysctl -qw net.ipv4.ip_forward=1
t_ok "with forwarding, UDP out is still refused at once" IN "$S1" $PY "$D/probe.py" udp "$WORLD_UDP4" 9999
fwd0=$(counter forward_refused)
t_ok "a segment conntrack calls invalid (SYN+FIN, never NATed)" \
	IN "$S1" $PY "$D/probe.py" synfin "$A1" "$WORLD_ECHO4" 80
refused_since() { [ "$(counter forward_refused)" -gt "$1" ] && echo yes; }
t_ok "hits the forward chain and is refused there" wait_for 1 refused_since "$fwd0"
IN "$S1" curl -s -m 5 -o /dev/null http://11.0.2.10:8080/direct-literal
t_not_contains "direct TCP to an address literal is not forwarded" "$(world_echo_log)" "/direct-literal"
t_eq "no sandbox packet reached the internet namespace" "0" "$(leaks)"
ip netns exec "$WORLD_BRK" sysctl -qw net.ipv4.ip_forward=0

# Anti-spoofing: a second address inside the sandbox, used as the source.
S2=$P-x2
t_ok "create a second sandbox" sl create "$S2" --policy "$D/pol.yaml"
read -r _ A2 G2 <<<"$T_OUT"
spoofed0=$(counter spoofed)
t_ok "the sandbox's root adds an address of its own choosing" IN "$S1" ip addr add 10.201.0.77/32 dev eth0
t_rc "from that source, the proxy is unreachable" 28 \
	IN "$S1" curl -s -m 3 -o /dev/null --interface 10.201.0.77 -x "http://$G1:3128" http://echo.world.test/spoof
t_ok "and the drops were counted" test "$(counter spoofed)" -gt "$spoofed0"
t_ok "the sandbox's root adds the other sandbox's address" IN "$S1" ip addr add "$A2/32" dev eth0
t_rc "from the other sandbox's address, through its own link: nothing" 28 \
	IN "$S1" curl -s -m 3 -o /dev/null --interface "$A2" -x "http://$G1:3128" http://echo.world.test/spoof2
t_not_contains "no spoofed request reached the echo server" "$(world_echo_log)" "/spoof"
t_ok "its own address still works" IN "$S1" curl -sf -m 10 -o /dev/null --interface "$A1" \
	-x "http://$G1:3128" http://echo.world.test/own-address
IN "$S1" ip addr del 10.201.0.77/32 dev eth0
IN "$S1" ip addr del "$A2/32" dev eth0

# The sandbox's root rewrites its routes: still only the broker. Whatever
# the sandbox does, its one wire ends at the broker side.
MAC1=$(ip -n "$WORLD_BRK" link show dev "$L1" | awk '/link\/ether/ {print $2}')
t_ok "the sandbox's root points its default route at a made-up neighbour" IN "$S1" sh -c \
	"ip route del default && ip route add default via 10.201.0.77 dev eth0 onlink"
IN "$S1" curl -s -m 3 -o /dev/null http://11.0.2.10:8080/reroute-a
IN "$S1" $PY "$D/probe.py" udp "$WORLD_UDP4" 9999 >/dev/null
t_ok "the sandbox's root routes via the broker's uplink address" IN "$S1" sh -c \
	"ip route del default && ip route add default via 11.0.0.2 dev eth0 onlink"
# The link answers ARP for the gateway's address only (arp_ignore 1): the
# uplink address is no neighbour there, and nothing is sent at all.
t_rc "UDP out: nothing goes (no neighbour 11.0.0.2 on the link)" 1 \
	IN "$S1" $PY "$D/probe.py" udp "$WORLD_UDP4" 9999
t_contains "no answer at all" "$T_OUT" "timeout"
IN "$S1" curl -s -m 5 -o /dev/null http://11.0.2.10:8080/reroute-b
t_ok "the sandbox's root sends everything straight onto the wire, to the broker's MAC" IN "$S1" sh -c \
	"ip route del default && ip route add default dev eth0 &&
	 ip neigh replace $WORLD_UDP4 lladdr $MAC1 dev eth0 nud permanent &&
	 ip neigh replace $WORLD_ECHO4 lladdr $MAC1 dev eth0 nud permanent"
t_ok "UDP out is still refused at once" IN "$S1" $PY "$D/probe.py" udp "$WORLD_UDP4" 9999
IN "$S1" curl -s -m 5 -o /dev/null http://11.0.2.10:8080/reroute-c
t_ok "the explicit proxy on the gateway still answers" IN "$S1" curl -sf -m 10 -o /dev/null \
	-x "http://$G1:3128" http://echo.world.test/proxied-after-reroute
t_not_contains "no rerouted request reached the echo server directly" "$(world_echo_log)" "/reroute-"
t_eq "no sandbox packet reached the internet namespace" "0" "$(leaks)"
IN "$S1" sh -c "ip route del default; ip route add default via $G1; ip neigh flush dev eth0"

# IPv6: off, and turning it on inside the sandbox does not help.
t_fails "IPv6 to the echo server fails" EX "$S1" curl -s -m 3 -o /dev/null --noproxy '*' "http://[$WORLD_ECHO6]/v6"
t_ok "the sandbox's root turns IPv6 on and routes it" IN "$S1" sh -c \
	"sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.eth0.disable_ipv6=0 &&
	 ip -6 addr add fd00:99::2/64 dev eth0 nodad && ip -6 route add default via fd00:99::1 dev eth0"
t_fails "IPv6 to the echo server still fails" IN "$S1" curl -s -m 3 -o /dev/null "http://[$WORLD_ECHO6]/v6"
t_fails "IPv6 to a decoy fails too" IN "$S1" curl -s -m 3 -o /dev/null "http://[fd00::5]/v6"
t_not_contains "no IPv6 request reached the echo server" "$(world_echo_log)" "/v6"

# --- delete ------------------------------------------------------------------------
t_ok "delete $S2" sl delete "$S2"
t0=$(date +%s%N)
t_ok "delete $S1" sl delete "$S1"
echo "# delete took $(ms_since "$t0") ms"
t_eq "its link is marked for removal (or gone) when delete returns" "" "$(link_unmarked "$L1")"
t_eq "its netns is gone" "" "$(ip netns list | grep -w -- "$S1")"
t_ok "its /etc/netns directory is gone" test ! -e "/etc/netns/$S1"
t_ok "its state directory is gone" test ! -e "$STATE/$S1"
t_ok "its directories are removed, not only moved aside, within 5 s" trash_settles
t_ok "its link goes within 5 s" links_settle "$L1"
t_fails "its link is gone" ip -n "$WORLD_BRK" link show dev "$L1"
t_eq "no set element is left" "0" "$(elements)"
t_not_contains "the broker forgot it" "$(sl list)" "$S1"
t_rc "a second delete" 1 sl delete "$S1"
t_contains "says no such sandbox" "$T_ERR" "no such sandbox \`$S1\`"
t_rc "delete never touches a namespace sluice did not make" 1 sl delete "$WORLD_INET"
t_ok "the world's namespace is still there" test -e "/run/netns/$WORLD_INET"

# A process still inside: delete goes on; the process keeps no network.
t_ok "create $P-xp" sl create "$P-xp" --policy "$D/pol.yaml"
read -r _ AP _ <<<"$T_OUT"
ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" exec "$P-xp" -- sleep 30 </dev/null >/dev/null 2>&1 &
XPID=$!
for _ in $(seq 100); do ip netns pids "$P-xp" 2>/dev/null | grep -q . && break; sleep 0.05; done
# sluice stays outside, as the parent that passes signals on: a process of
# the sandbox is one of those ip netns pids lists.
INPID=$(ip netns pids "$P-xp" 2>/dev/null | head -n 1)
t_ok "delete with a process still in the sandbox" sl delete "$P-xp"
t_eq "its sandbox is gone" "" "$(our_sandboxes)"
t_eq "its link is marked for removal (or gone) when delete returns" "" \
	"$(link_unmarked "sl-$(printf '%02x' ${AP//./ })")"
t_ok "its link goes within 5 s, though the process holds the namespace" \
	links_settle "sl-$(printf '%02x' ${AP//./ })"
t_fails "its link is gone" ip -n "$WORLD_BRK" link show dev "sl-$(printf '%02x' ${AP//./ })"
t_eq "the process is left with lo only" "lo" \
	"$(nsenter --net="/proc/$INPID/ns/net" ip -o link show | awk -F': ' '{print $2}' | paste -sd' ')"
kill -KILL "$XPID" 2>/dev/null
wait "$XPID" 2>/dev/null

# A sandbox belongs to the broker namespace it was created in.
ip netns add "$P-brk2" && ip -n "$P-brk2" link set lo up
sed "s|^control_socket: .*|control_socket: $D/ctl2.sock|; s|^state_dir: .*|state_dir: $D/state2|" \
	"$BROKER_CONF" >"$D/sluiced2.yaml"
ip netns exec "$P-brk2" "$BIN/sluiced" --config "$D/sluiced2.yaml" 2>>"$D/sluiced2.log" &
B2PID=$!
for _ in $(seq 50); do [ -S "$D/ctl2.sock" ] && break; sleep 0.1; done
B2() { ip netns exec "$P-brk2" "$BIN/sluice" --socket "$D/ctl2.sock" "$@"; }
t_ok "create $P-xo at a second broker, in another namespace" B2 create "$P-xo" --policy "$D/pol.yaml"
t_rc "delete from the first broker's namespace is refused" 1 sl delete "$P-xo"
t_contains "saying where it belongs" "$T_ERR" "another network namespace"
t_ok "and nothing of it was touched" test -e "/run/netns/$P-xo" -a -e "$STATE/$P-xo"
t_contains "the second broker still holds it" "$(B2 list)" "$P-xo"
# That namespace lives while it has a name or a process in it, whether or
# not its broker runs. What is left of it after (here an fd a process
# outside holds, as a runtime may; otherwise the kernel's teardown, which
# runs a while later) keeps the sandbox's wire, and must not matter.
B2NS=$(readlink "/proc/$B2PID/ns/net")
sleep 60 9<"/run/netns/$P-brk2" </dev/null >/dev/null 2>&1 &
B2HOLD=$!
kill_gone "$B2PID" && B2PID=
t_eq "its broker is gone" "" "$B2PID"
t_rc "delete is still refused while that namespace has a name" 1 sl delete "$P-xo"
t_contains "saying so" "$T_ERR" "another network namespace"
ip netns exec "$P-brk2" sleep 60 </dev/null >/dev/null 2>&1 &
B2IN=$!
for _ in $(seq 100); do [ "$(readlink "/proc/$B2IN/ns/net")" = "$B2NS" ] && break; sleep 0.05; done
ip netns del "$P-brk2"
t_eq "a process is in it" "$B2NS" "$(readlink "/proc/$B2IN/ns/net")"
t_rc "delete is still refused while a process is in it, though it has no name" 1 sl delete "$P-xo"
t_contains "saying so too" "$T_ERR" "another network namespace"
t_ok "and again nothing of it was touched" test -e "/run/netns/$P-xo" -a -e "$STATE/$P-xo"
kill_gone "$B2IN" && B2IN=
t_eq "that process is gone" "" "$B2IN"
t_ok "the sandbox's wire is still there, its far end held by an fd" \
	ip -n "$P-xo" link show dev eth0
t_ok "once that namespace is gone, delete from here removes what is left" sl delete "$P-xo"
t_contains "saying the broker namespace is gone" "$T_ERR" "broker namespace of \`$P-xo\` is gone"
t_eq "nothing of it is left" "" "$(our_sandboxes)"
stop_broker2
cleanup_sandboxes	# should that have failed: the checks below start clean

# --- sluice run ----------------------------------------------------------------------
t_rc "run: the command's exit status" 3 sl run --policy "$D/pol.yaml" --name "$P-xr1" -- sh -c 'exit 3'
t_ok "run: the sandbox is gone after" test ! -e "/run/netns/$P-xr1"
t_ok "run: the command reaches the proxy" sl run --policy "$D/pol.yaml" --name "$P-xr2" -- \
	curl -sf -m 10 http://echo.world.test/from-run
t_contains "run: through the sandbox" "$T_OUT" '"path": "/from-run"'
t_rc "run: a command killed by SIGTERM gives 143" 143 sl run --policy "$D/pol.yaml" --name "$P-xr3" -- \
	sh -c 'kill -TERM $$'
# SIGTERM to sluice itself reaches the command, and the sandbox still goes.
# (ip netns exec execs sluice, so $! is sluice itself.)
ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" run --policy "$D/pol.yaml" --name "$P-xr4" -- \
	sleep 30 </dev/null >/dev/null 2>&1 &
RPID=$!
for _ in $(seq 100); do ip netns pids "$P-xr4" 2>/dev/null | grep -q . && break; sleep 0.05; done
t_ok "run: the command runs in the sandbox" test -n "$(ip netns pids "$P-xr4" 2>/dev/null)"
kill -TERM "$RPID"
rc=0
for _ in $(seq 100); do kill -0 "$RPID" 2>/dev/null || break; sleep 0.1; done
wait "$RPID" || rc=$?
t_eq "run: kill -TERM sluice run gives 143" "143" "$rc"
t_eq "run: and no sandbox is left" "" "$(our_sandboxes)"
t_rc "run with an invalid policy" 1 sl run --policy "$D/bad.yaml" --name "$P-xr5" -- true
t_contains "run: FILE:LINE:COL" "$T_ERR" "bad.yaml:4:13"
t_eq "run: printed as it is" "$D/bad.yaml" "${T_ERR%%:4:13:*}"

# --- a failed create leaves nothing -------------------------------------------------------
# The next address is 10.201.0.2 again; its link name is taken by another link, so
# create fails late, after the registration, the namespace and the files.
ip -n "$WORLD_BRK" link add sl-0ac90002 type veth peer name "${P}zz"
t_rc "create fails when its link name is taken" 1 sl create "$P-xf1" --policy "$D/pol.yaml"
t_contains "and says why" "$T_ERR" "sl-0ac90002"
t_eq "nothing of it is left" "" "$(our_sandboxes)"
t_not_contains "the broker does not hold it" "$(sl list)" "$P-xf1"
t_eq "no set element" "0" "$(elements)"
t_eq "the link in the way is not touched" "1" "$(ip -n "$WORLD_BRK" -o link show dev sl-0ac90002 | wc -l)"
ip -n "$WORLD_BRK" link del sl-0ac90002
# A link that `sluice delete` marked for removal but that is still there
# (its deletion was cut short) is in nobody's way: a create of its address
# removes it, after waiting a moment for it to go by itself.
ip -n "$WORLD_BRK" link add sl-0ac90002 type veth peer name "${P}zz"
ip -n "$WORLD_BRK" link set sl-0ac90002 alias "sluice: deleted"
t_ok "create removes a deleted sandbox's link left in its way" sl create "$P-xf3" --policy "$D/pol.yaml"
t_contains "and takes that address" "$T_OUT" " 10.201.0.2 "
t_fails "the old pair is gone" ip -n "$WORLD_BRK" link show dev "${P}zz"
t_contains "the new link is up" "$(link_up sl-0ac90002)" "sl-0ac90002"
t_ok "delete $P-xf3" sl delete "$P-xf3"
t_ok "its link goes" links_settle sl-0ac90002
mkdir -p "/etc/netns/$P-xf2" && echo keep >"/etc/netns/$P-xf2/mine"
t_rc "create refuses a name whose /etc/netns directory exists" 1 sl create "$P-xf2" --policy "$D/pol.yaml"
t_eq "and leaves that directory as it was" "mine" "$(ls "/etc/netns/$P-xf2")"
t_not_contains "the broker does not hold it" "$(sl list)" "$P-xf2"
rm -rf "/etc/netns/$P-xf2"

# --- the broker lost its state; the broker is down -------------------------------------------
t_ok "create $P-xl" sl create "$P-xl" --policy "$D/pol.yaml"
broker_stop
rm -f "$D/state/sandboxes/$P-xl"
broker_start
t_ok "delete of a sandbox the broker forgot cleans up" sl delete "$P-xl"
t_contains "and says so" "$T_ERR" "did not know"
t_eq "nothing of it is left" "" "$(our_sandboxes)"
t_ok "create $P-xd" sl create "$P-xd" --policy "$D/pol.yaml"
broker_stop
# With the broker down the sandbox has no egress: exec does not start the
# command (which would fail later, at its first connection) and env gives
# nothing; both say why.
rm -f "$D/ran.xd"
t_rc "exec with the broker down fails" 1 sl exec --bind "$D:$D" "$P-xd" -- touch "$D/ran.xd"
t_contains "saying the broker is not running" "$T_ERR" "the broker of sandbox \`$P-xd\` is not running"
t_ok "and the command did not run" test ! -e "$D/ran.xd"
t_rc "env with the broker down fails" 1 sl env "$P-xd"
t_eq "and prints no partial environment" "" "$T_OUT"
t_contains "saying the broker is not running" "$T_ERR" "is not running"
t_rc "delete with the broker down fails" 1 sl delete "$P-xd"
t_contains "says the broker could not be told" "$T_ERR" "cannot reach sluiced"
t_eq "but removes the sandbox's network here" "" "$(our_sandboxes)"
t_rc "create with the broker down fails" 1 sl create "$P-xe" --policy "$D/pol.yaml"
t_eq "and leaves nothing" "" "$(our_sandboxes)"
broker_start
# Its namespace is gone: the broker drops the registration as it starts
# (before, it listed the sandbox until `sluice unregister`).
t_not_contains "the restarted broker does not hold it" "$(sl list)" "$P-xd"
t_contains "and its log says it dropped it" "$(cat "$BROKER_LOG")" \
	"has no namespace (/run/netns/$P-xd is gone): dropped its registration"
t_rc "so unregister has nothing left to do" 1 sl unregister "$P-xd"
t_contains "(saying so)" "$T_ERR" "no such sandbox"

# --- concurrent creates ------------------------------------------------------------------------
pids=()
for i in 1 2 3 4 5 6; do
	sl create "$P-xc$i" --policy "$D/pol.yaml" >"$D/conc.$i" 2>&1 &
	pids+=($!)
done
bad=0
for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
t_eq "6 concurrent creates succeed" "0" "$bad"
t_eq "with 6 different addresses" "6" "$(cat "$D"/conc.* | awk '{print $2}' | sort -u | grep -c '^10\.201\.')"
t_eq "6 set elements" "6" "$(elements)"
pids=()
for i in 1 2 3 4 5 6; do
	sl delete "$P-xc$i" >"$D/cdel.$i" 2>&1 &
	pids+=($!)
done
bad=0
for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
t_eq "6 concurrent deletes succeed" "0" "$bad"
[ "$bad" = 0 ] || { echo "# what the deletes said:"; sed 's/^/#   /' "$D"/cdel.*; }
t_eq "concurrent deletes leave nothing" "" "$(our_sandboxes)"
t_eq "and no set element" "0" "$(elements)"

# --- --broker-netns: sluice enters the broker's namespace itself -------------------------------
# From this shell (an empty namespace of its own, no broker): the sandbox
# must be wired to the broker's namespace all the same, and be the same
# sandbox to the `ip netns exec` form.
SN() { "$BIN/sluice" --socket "$BROKER_SOCK" --broker-netns "$WORLD_BRK" "$@"; }
t_ok "create $P-xn with --broker-netns, from outside the broker namespace" \
	SN create "$P-xn" --policy "$D/pol.yaml"
read -r _ AN _ <<<"$T_OUT"
LN="sl-$(printf '%02x' ${AN//./ })"
t_ok "its broker side $LN is in the broker namespace" ip -n "$WORLD_BRK" -4 addr show dev "$LN"
t_eq "its set element is in the broker's firewall" "1" "$(elements)"
t_ok "it reaches the echo server through the broker" \
	IN "$P-xn" curl -sf -m 10 -o /dev/null -x "http://${AN%.*}.$((${AN##*.} - 1)):3128" \
	http://echo.world.test/broker-netns
t_ok "and the ip netns exec form deletes it" sl delete "$P-xn"
t_eq "nothing of it is left" "" "$(our_sandboxes)"
t_eq "no set element is left" "0" "$(elements)"
t_rc "--broker-netns with no such namespace" 1 "$BIN/sluice" --broker-netns "$WORLD_BRK-none" list
t_contains "says which" "$T_ERR" "cannot open network namespace \`/run/netns/$WORLD_BRK-none\`"
t_rc "--broker-netns naming no namespace" 1 "$BIN/sluice" --broker-netns /etc/hostname list
t_contains "says so" "$T_ERR" "\`/etc/hostname\` is not a namespace"

# --- another tool flushes the ruleset ------------------------------------------------------------
# Layout 2's hazard, played in the broker's namespace: table inet sluice is
# deleted under a sandbox (an nftables.service restart flushes the whole
# ruleset). The next create installs the table again with the elements of
# the sandboxes made before, which then reach the broker again (without
# their element the table drops all they send).
t_ok "create $P-xt1" sl create "$P-xt1" --policy "$D/pol.yaml"
read -r _ AF _ <<<"$T_OUT"
GF=${AF%.*}.$((${AF##*.} - 1))
t_ok "it reaches the echo server through the broker" \
	IN "$P-xt1" curl -sf -m 10 -o /dev/null -x "http://$GF:3128" http://echo.world.test/flush-before
t_ok "another tool deletes table inet sluice" nft_brk delete table inet sluice
t_ok "the next create installs it again" sl create "$P-xt2" --policy "$D/pol.yaml"
t_eq "with the element of the sandbox made before, and its own" "2" "$(elements)"
t_ok "the sandbox made before reaches the echo server again" \
	IN "$P-xt1" curl -sf -m 10 -o /dev/null -x "http://$GF:3128" http://echo.world.test/flush-after
t_ok "delete them" sl delete "$P-xt1"
t_ok "  ... both" sl delete "$P-xt2"
t_eq "no set element is left" "0" "$(elements)"

# --- 100 creates and deletes ---------------------------------------------------------------------
links0=$(ip -n "$WORLD_BRK" -o link show | wc -l)
# Counted by this world's prefix: other worlds may come and go meanwhile.
netns0=$(ip netns list | grep -c "^$WORLD_PREFIX")
etc0=$(ls /etc/netns | grep -c "^$WORLD_PREFIX")
ctime=0 dtime=0 fails=0
for i in $(seq 100); do
	t0=$(date +%s%N)
	sl create "$P-xz" --policy "$D/pol.yaml" >/dev/null 2>>"$D/cycle.err" || fails=$((fails + 1))
	t1=$(date +%s%N)
	sl delete "$P-xz" 2>>"$D/cycle.err" || fails=$((fails + 1))
	t2=$(date +%s%N)
	ctime=$((ctime + t1 - t0))
	dtime=$((dtime + t2 - t1))
done
echo "# 100 cycles: create $((ctime / 100000000)) ms, delete $((dtime / 100000000)) ms on average (each through ip netns exec)"
t_eq "100 creates and deletes all succeed" "0" "$fails"
[ "$fails" = 0 ] || head -5 "$D/cycle.err"
links_settle "$links0"
t_eq "no link left (within 5 s)" "$links0" "$(ip -n "$WORLD_BRK" -o link show | wc -l)"
t_eq "no netns left" "$netns0" "$(ip netns list | grep -c "^$WORLD_PREFIX")"
t_eq "no /etc/netns entry left" "$etc0" "$(ls /etc/netns | grep -c "^$WORLD_PREFIX")"
t_eq "no set element left" "0" "$(elements)"
t_eq "no state directory left" "" "$(our_sandboxes)"
t_ok "no directory left in the trash (within 5 s)" trash_settles
t_not_contains "the broker holds none" "$(sl list)" "$P-x"
t_eq "the ruleset was installed once, not per sandbox" "1" \
	"$(nft_brk list ruleset | grep -c 'comment "sluice ruleset')"

# --- fragments: dropped before the kernel holds them for reassembly -------------------------
# IPv4 fragments from a sandbox link are dropped ahead of defragmentation:
# held for reassembly they would fill the broker namespace's reassembly
# memory, and every fragmented datagram there would be dropped with them.
S3=$P-x3
t_ok "a sandbox for the fragments" sl create "$S3" --policy "$D/pol.yaml"
read -r _ A3 G3 <<<"$T_OUT"
reasm() { ip netns exec "$WORLD_BRK" awk '$1 == "Ip:" && !h { for (i = 1; i <= NF; i++) k[i] = $i; h = 1; next }
	$1 == "Ip:" { for (i = 1; i <= NF; i++) if (k[i] == "ReasmReqds") print $i }' /proc/net/snmp; }
r0=$(reasm)
t_ok "first fragments of 20 UDP datagrams to the gateway's port 53" IN "$S3" $PY "$D/probe.py" frag "$A3" "$G3" 20
sleep 0.3
t_eq "none was taken for reassembly (ReasmReqds $r0)" "$r0" "$(reasm)"

sl delete "$S3" >/dev/null 2>&1

# --- nothing leaked ---------------------------------------------------------------------------------
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_eq "no sandbox packet reached the internet namespace" "0" "$(leaks)"
cleanup_sandboxes
broker_stop
t_done
