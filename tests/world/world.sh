# SPDX-License-Identifier: MIT
# world.sh - builds and tears down the integration "test world" (source it from bash).
#
# Theory of operation
#
#   [client ns $P-NAME]        [broker ns $P-brk]                [internet ns $P-inet]
#    eth0 ADDR  == veth ==  ${P}cN GWADDR
#                            $P-bi 11.0.0.2/24  ==== veth ====  $P-ib 11.0.0.1/24
#                                  fd11:1::2/64                       fd11:1::1/64
#                            default via 11.0.0.1 / fd11:1::1   default back via brk
#                            decoy on 127.0.0.1, ::1 :80,:443   lo: every server address
#
# The internet namespace holds dnsmasq (11.0.1.53, the only resolver; no
# upstream, so any name it does not know is NXDOMAIN), the echo servers
# (11.0.2.10, 11.0.2.20, 2600:1::10: 80 http, 443 https, 8080 http;
# 11.0.2.20:8443 https with a self-signed cert; 11.0.2.10:22 SSH-like
# banner; /files/PATH answered from $WORLD_DIR/files/PATH, which a test
# fills), and decoys on private, CGNAT, link-local/metadata, documentation
# and ULA addresses plus a UDP listener on 11.0.3.1 (53, 443, 9999). For the
# probe's allowlist-edge checks dnsmasq also answers *.evil.world.test and
# evil-echo.world.test (11.0.2.20), echo.world.test has a NULL record
# next to its TXT one, and compat.world.test has only the AAAA
# ::169.254.169.254 (a v4-compatible address, on a decoy). For upstream
# failures that must not take long to provoke: noanswer.world.test is
# forwarded to 11.0.1.54, where nothing listens, so that a query for it is
# never answered (a resolver times out); nosyn.world.test is 11.0.9.9, an
# address nobody holds, so that a SYN to it is dropped (a connect times
# out). dnsmasq's answers carry TTL 0 (WORLD_DNS_TTL, set before
# world_up, gives another). world_add_routed gives a namespace plain routed
# access to the internet namespace, with no broker. A decoy
# answers like a real server, so that a leak looks like success to the code
# under test, and writes a HIT line that the test then finds.
#
# Nothing is routed out of these namespaces and the root namespace is never
# touched: veth pairs are created directly inside the world's namespaces,
# forwarding stays off everywhere (the inet namespace only answers for its
# own addresses). Everything is keyed on the prefix P, so several worlds can
# exist side by side: the fixed addresses live in per-world namespaces.
#
# Every process started is recorded in $WORLD_DIR/pids as "PID STARTTIME NAME"
# and every namespace in $WORLD_DIR/netns; world_down undoes exactly those
# (the start time guards against killing a recycled PID).
#
# Use:   . tests/world/world.sh; world_up || exit 1; trap world_down EXIT
# world_up must run in the test's own shell (not in "$(...)"): it exports
# WORLD_* and its servers are that shell's children. It also makes TERM, INT
# and HUP (when the caller has no trap for them) exit the shell, so that the
# EXIT trap, and world_down, run when a test is killed by timeout.

WORLD_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORLD_PY=/usr/bin/python3
WORLD_DNSMASQ=/usr/sbin/dnsmasq
WORLD_WAIT_TRIES=${WORLD_WAIT_TRIES:-100}	# x 0.1 s for each wait

# Fixed addresses (per world namespace, so they never collide across worlds).
WORLD_ECHO4=11.0.2.10
WORLD_OTHER4=11.0.2.20
WORLD_ECHO6=2600:1::10
WORLD_UDP4=11.0.3.1
WORLD_DECOYS4="10.0.0.5 172.16.0.5 192.168.1.5 100.64.0.5 169.254.169.254 169.254.170.2 192.0.2.5 198.51.100.5 203.0.113.5 100.100.100.200"
# ::169.254.169.254 (v4-compatible: Linux's sit0 tunnels ::/96 to the v4)
WORLD_DECOYS6="fd00::5 fd00:ec2::254 2001:db8::5 ::169.254.169.254"
# The real hosts the recipes in policies/ allow (test_recipes.sh): dnsmasq
# answers them with the echo origin, whose certificate names them too, so
# that a client meets the same name, SNI and Host as on the internet.
WORLD_RECIPE_HOSTS="pypi.org files.pythonhosted.org registry.npmjs.org github.com api.github.com codeload.github.com objects.githubusercontent.com deb.debian.org security.debian.org"
WORLD_RECIPE_SANS=$(printf 'DNS:%s,' $WORLD_RECIPE_HOSTS)
WORLD_RECIPE_SANS=${WORLD_RECIPE_SANS%,}

_world_err() { echo "world: $*" >&2; }

# _world_starttime PID: the process start time (field 22 of /proc/PID/stat),
# empty if there is no such process. comm may hold spaces and ')', so cut
# after the last ')'.
_world_starttime() {
	local stat rest
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	rest=${stat##*) }
	set -- $rest
	echo "${20}"
}

# _world_alive PID STARTTIME: 0 if that very process still runs (zombies count as gone).
_world_alive() {
	local want=$2 stat rest
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	rest=${stat##*) }
	set -- $rest
	[ "$1" != Z ] && [ "${20}" = "$want" ]
}

# world_track_pid PID NAME: have world_down end PID (a process the test started).
world_track_pid() {
	local st
	[ -n "${WORLD_DIR:-}" ] && [ -d "$WORLD_DIR" ] || { _world_err "no world"; return 1; }
	st=$(_world_starttime "$1")
	[ -n "$st" ] || { _world_err "track: no process $1"; return 1; }
	echo "$1 $st ${2:-proc}" >>"$WORLD_DIR/pids"
}

# world_spawn NS NAME CMD...: start CMD in the background inside world
# namespace NS (inet, brk or a client name), output to $WORLD_DIR/NAME.log,
# stdin from /dev/null; record it for world_down. Sets WORLD_LAST_PID.
world_spawn() {
	local ns=$1 name=$2 pid st
	shift 2
	case $ns in
	inet) ns=$WORLD_INET ;;
	brk) ns=$WORLD_BRK ;;
	*) ns=$WORLD_PREFIX-$ns ;;
	esac
	ip netns exec "$ns" "$@" </dev/null >>"$WORLD_DIR/$name.log" 2>&1 &
	pid=$!
	# shellcheck disable=SC2034 # for the caller
	WORLD_LAST_PID=$pid
	st=$(_world_starttime "$pid")
	if [ -z "$st" ]; then
		_world_err "$name (pid $pid) exited at once; its log:"
		tail -n 20 "$WORLD_DIR/$name.log" >&2 2>/dev/null
		return 1
	fi
	echo "$pid $st $name" >>"$WORLD_DIR/pids"
}

# _world_ns_add NAME: create netns NAME (recorded first, so a half-made world
# is still torn down), loopback up.
_world_ns_add() {
	echo "$1" >>"$WORLD_DIR/netns"
	ip netns add "$1" || return 1
	ip -n "$1" link set lo up
}

_world_resolv() {
	mkdir -p "/etc/netns/$1" &&
		printf 'nameserver %s\noptions timeout:2 attempts:2\n' "$2" >"/etc/netns/$1/resolv.conf"
}

_world_certs() {
	local d=$WORLD_DIR/pki o="openssl"
	mkdir -p "$d" || return 1
	{
		$o req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
			-keyout "$d/ca.key" -out "$d/ca.crt" -days 3 \
			-subj "/CN=sluice test world CA $WORLD_PREFIX" \
			-addext "basicConstraints=critical,CA:TRUE" \
			-addext "keyUsage=critical,keyCertSign,cRLSign" &&
		$o req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
			-keyout "$d/server.key" -out "$d/server.csr" \
			-subj "/CN=echo.world.test" &&
		printf '%s\n' \
			"basicConstraints=critical,CA:FALSE" \
			"keyUsage=critical,digitalSignature" \
			"extendedKeyUsage=serverAuth" \
			"subjectAltName=DNS:echo.world.test,DNS:other.world.test,DNS:*.world.test,IP:11.0.2.10,IP:11.0.2.20,IP:2600:1::10,$WORLD_RECIPE_SANS" \
			>"$d/server.ext" &&
		$o x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" \
			-CAcreateserial -days 3 -extfile "$d/server.ext" -out "$d/server.crt" &&
		# The "bad" upstream: names match, but nobody vouches for it.
		$o req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
			-keyout "$d/bad.key" -out "$d/bad.crt" -days 3 \
			-subj "/CN=other.world.test" \
			-addext "subjectAltName=DNS:other.world.test,DNS:*.world.test,IP:11.0.2.20"
	} >"$d/openssl.log" 2>&1 || { cat "$d/openssl.log" >&2; return 1; }
	export WORLD_CA=$d/ca.crt
}

_world_net() {
	local i=$WORLD_INET b=$WORLD_BRK a
	_world_ns_add "$i" && _world_ns_add "$b" || return 1
	# Created inside the namespaces: the root namespace never sees this pair.
	ip -n "$i" link add "$WORLD_PREFIX-ib" type veth peer name "$WORLD_PREFIX-bi" netns "$b" || return 1
	ip -n "$i" addr add 11.0.0.1/24 dev "$WORLD_PREFIX-ib" &&
	ip -n "$i" addr add fd11:1::1/64 dev "$WORLD_PREFIX-ib" nodad &&
	ip -n "$i" link set "$WORLD_PREFIX-ib" up &&
	ip -n "$b" addr add 11.0.0.2/24 dev "$WORLD_PREFIX-bi" &&
	ip -n "$b" addr add fd11:1::2/64 dev "$WORLD_PREFIX-bi" nodad &&
	ip -n "$b" link set "$WORLD_PREFIX-bi" up &&
	ip -n "$b" route add default via 11.0.0.1 &&
	ip -n "$b" -6 route add default via fd11:1::1 &&
	# Replies to whatever source the broker uses go back to it (a leaked,
	# forwarded sandbox packet then gets its answer, and the leak shows).
	ip -n "$i" route add default via 11.0.0.2 &&
	ip -n "$i" -6 route add default via fd11:1::2 || return 1
	# 11.0.1.54: the silent resolver noanswer.world.test is forwarded to.
	for a in 11.0.1.53 11.0.1.54 "$WORLD_ECHO4" "$WORLD_OTHER4" "$WORLD_UDP4" $WORLD_DECOYS4; do
		ip -n "$i" addr add "$a/32" dev lo || return 1
	done
	for a in "$WORLD_ECHO6" $WORLD_DECOYS6; do
		ip -n "$i" addr add "$a/128" dev lo nodad || return 1
	done
	_world_resolv "$i" "$WORLD_RESOLVER" && _world_resolv "$b" "$WORLD_RESOLVER"
}

_world_servers() {
	local d=$WORLD_DIR pki=$WORLD_DIR/pki a p
	local -a echo_args=() decoy_args=() recipe_args=()

	# The real names policies/ recipes allow, standing in on the echo origin.
	for a in $WORLD_RECIPE_HOSTS; do recipe_args+=(--host-record="$a,$WORLD_ECHO4"); done

	world_spawn inet dnsmasq "$WORLD_DNSMASQ" --keep-in-foreground \
		--conf-file=/dev/null --no-resolv --no-hosts --user=root \
		--bind-interfaces --listen-address="$WORLD_RESOLVER" \
		--pid-file="$d/dnsmasq.pid" --log-queries --log-facility="$d/dnsmasq.log" \
		--local=/#/ --local-ttl="${WORLD_DNS_TTL:-0}" \
		--host-record=echo.world.test,11.0.2.10,2600:1::10 \
		--host-record=other.world.test,11.0.2.20 \
		--host-record=rebind.world.test,10.0.0.5 \
		--host-record=metadata.world.test,169.254.169.254 \
		--host-record=loop.world.test,127.0.0.1 \
		--host-record=mixed.world.test,10.0.0.5 \
		--host-record=mixed.world.test,11.0.2.10 \
		--host-record=v6only.world.test,fd00::5 \
		--host-record=compat.world.test,::169.254.169.254 \
		--server=/noanswer.world.test/11.0.1.54 \
		--host-record=nosyn.world.test,11.0.9.9 \
		--address=/canary.world.test/11.0.2.10 \
		--txt-record=echo.world.test,"sluice-world echo" \
		--txt-record=ready.world.test,ready \
		--dns-rr=echo.world.test,10,736c75696365 \
		--address=/evil.world.test/11.0.2.20 \
		--host-record=evil-echo.world.test,11.0.2.20 \
		"${recipe_args[@]}" || return 1

	for a in "$WORLD_ECHO4" "$WORLD_OTHER4" "[$WORLD_ECHO6]"; do
		echo_args+=(--listen "http:$a:80" --listen "https:$a:443" --listen "http:$a:8080")
	done
	echo_args+=(--listen "https-bad:$WORLD_OTHER4:8443" --listen "banner:$WORLD_ECHO4:22")
	world_spawn inet echo "$WORLD_PY" "$WORLD_SRC/echo.py" --log "$d/echo.log" \
		--ready "$d/ready.echo" --cert "$pki/server.crt" --key "$pki/server.key" \
		--bad-cert "$pki/bad.crt" --bad-key "$pki/bad.key" --files "$d/files" \
		"${echo_args[@]}" || return 1

	for a in $WORLD_DECOYS4; do
		for p in 80 443 22 8080; do decoy_args+=(--tcp "$a:$p"); done
	done
	for a in $WORLD_DECOYS6; do
		for p in 80 443 22 8080; do decoy_args+=(--tcp "[$a]:$p"); done
	done
	for p in 53 443 9999; do decoy_args+=(--udp "$WORLD_UDP4:$p"); done
	world_spawn inet decoy "$WORLD_PY" "$WORLD_SRC/decoy.py" --log "$d/decoy-hits.log" \
		--ready "$d/ready.decoy" "${decoy_args[@]}" || return 1

	# The broker's own loopback: a broker that connects to 127.0.0.1 or ::1
	# (loop.world.test) lands here.
	world_spawn brk decoy-brk "$WORLD_PY" "$WORLD_SRC/decoy.py" --log "$d/decoy-hits.log" \
		--ready "$d/ready.decoy-brk" --tcp 127.0.0.1:80 --tcp 127.0.0.1:443 \
		--tcp "[::1]:80" --tcp "[::1]:443" || return 1
}

# _world_all_alive: 0 if every recorded process runs; else names the dead one.
_world_all_alive() {
	local pid st name
	while read -r pid st name; do
		_world_alive "$pid" "$st" || {
			_world_err "$name (pid $pid) exited; its log:"
			tail -n 20 "$WORLD_DIR/$name.log" >&2 2>/dev/null
			return 1
		}
	done <"$WORLD_DIR/pids"
}

# _world_wait DESC CMD...: retry CMD (bounded) until it succeeds or a server dies.
_world_wait() {
	local desc=$1 n
	shift
	for ((n = 0; n < WORLD_WAIT_TRIES; n++)); do
		"$@" >/dev/null 2>&1 && return 0
		_world_all_alive || return 1
		sleep 0.1
	done
	_world_err "timed out waiting for $desc"
	return 1
}

_world_tcp_probe() {	# NS ADDR PORT: connect and close, sends nothing (logs nothing)
	timeout 1 ip netns exec "$1" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$2" "$3"
}

# _world_link_running NS DEV: the kernel publishes a veth's carrier
# asynchronously (linkwatch, up to ~1 s); code that checks IFF_RUNNING should
# not see a link that is still coming up.
_world_link_running() {
	ip -n "$1" link show dev "$2" 2>/dev/null | grep -q 'state UP'
}

_world_ready() {
	local f
	_world_wait "link $WORLD_PREFIX-bi" _world_link_running "$WORLD_BRK" "$WORLD_PREFIX-bi" &&
	_world_wait "link $WORLD_PREFIX-ib" _world_link_running "$WORLD_INET" "$WORLD_PREFIX-ib" || return 1
	for f in echo decoy decoy-brk; do
		_world_wait "$f to bind" test -s "$WORLD_DIR/ready.$f" || return 1
	done
	# dnsmasq, asked from the broker namespace: this also proves the veth
	# and routes. ready.world.test is a name no test asserts on.
	_world_wait "dnsmasq" timeout 2 ip netns exec "$WORLD_BRK" "$WORLD_PY" \
		"$WORLD_SRC/dnsq.py" --timeout 0.5 ready.world.test TXT || return 1
	# Connect without sending a request, so echo.log stays empty.
	_world_wait "echo 11.0.2.10:80" _world_tcp_probe "$WORLD_BRK" "$WORLD_ECHO4" 80 &&
	_world_wait "echo [2600:1::10]:443" _world_tcp_probe "$WORLD_BRK" "$WORLD_ECHO6" 443 &&
	_world_wait "echo 11.0.2.20:8443" _world_tcp_probe "$WORLD_BRK" "$WORLD_OTHER4" 8443 &&
	_world_wait "banner 11.0.2.10:22" _world_tcp_probe "$WORLD_BRK" "$WORLD_ECHO4" 22
	# The decoys are not probed (a probe would be a hit): their ready files
	# are written after every socket is bound and listening.
}

# world_up [PREFIX]: build a world; exports WORLD_PREFIX, WORLD_DIR,
# WORLD_INET, WORLD_BRK, WORLD_CA, WORLD_RESOLVER. Returns non-zero (after
# tearing down what it made) if any part fails to come up.
world_up() {
	local p=${1:-} n hex sig
	# _WORLD_OWNED is not exported: WORLD_* inherited from a parent shell's
	# world neither blocks this one nor gets torn down by this shell.
	if [ -n "${_WORLD_OWNED:-}" ] && [ -d "${WORLD_DIR:-/nonexistent}" ]; then
		_world_err "a world ($WORLD_PREFIX) is already up in this shell"
		return 1
	fi
	if [ -z "$p" ]; then
		for ((n = 0; n < 16; n++)); do
			hex=$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
			p=sw$hex
			[ -e "/run/netns/$p-inet" ] || [ -e "/run/netns/$p-brk" ] ||
				[ -e "/tmp/sluice-world-$p" ] || break
			p=
		done
		[ -n "$p" ] || { _world_err "no free prefix"; return 1; }
	fi
	# Link names are PREFIX plus up to 5 characters; IFNAMSIZ allows 15.
	if ! [[ $p =~ ^[a-z][a-z0-9]{1,7}$ ]]; then
		_world_err "prefix \`$p' must be 2-8 of [a-z0-9], starting with a letter"
		return 1
	fi
	_WORLD_OWNED=1
	export WORLD_PREFIX=$p
	export WORLD_DIR=/tmp/sluice-world-$p
	export WORLD_INET=$p-inet
	export WORLD_BRK=$p-brk
	export WORLD_RESOLVER=11.0.1.53
	export WORLD_CA=$WORLD_DIR/pki/ca.crt
	if ! mkdir -m 0755 "$WORLD_DIR"; then
		_world_err "$WORLD_DIR exists: prefix $p is in use"
		unset WORLD_PREFIX WORLD_DIR WORLD_INET WORLD_BRK WORLD_RESOLVER WORLD_CA _WORLD_OWNED
		return 1
	fi
	# A non-interactive bash killed by an untrapped signal skips its EXIT
	# trap, and so would skip world_down (timeout(1) sends TERM). Turn
	# those signals into an exit, unless the caller handles them already.
	for sig in TERM INT HUP; do
		# shellcheck disable=SC2064 # the exit status is fixed now, on purpose
		[ -n "$(trap -p "$sig")" ] || trap "exit $((128 + $(kill -l "$sig")))" "$sig"
	done
	: >"$WORLD_DIR/pids"
	: >"$WORLD_DIR/netns"
	: >"$WORLD_DIR/decoy-hits.log"
	: >"$WORLD_DIR/echo.log"
	if ! _world_certs; then
		_world_err "test CA setup failed"
	elif ! _world_net; then
		_world_err "network setup failed"
	elif ! _world_servers; then
		_world_err "server start failed"
	elif ! _world_ready; then
		_world_err "a server did not come up"
	else
		return 0
	fi
	world_down
	return 1
}

# _world_kill_recorded: TERM every recorded live process, wait (bounded),
# then KILL what is left.
_world_kill_recorded() {
	local pid st name n left
	[ -f "$WORLD_DIR/pids" ] || return 0
	while read -r pid st name; do
		_world_alive "$pid" "$st" && kill -TERM "$pid" 2>/dev/null
	done <"$WORLD_DIR/pids"
	for ((n = 0; n < 50; n++)); do
		left=0
		while read -r pid st name; do
			_world_alive "$pid" "$st" && left=1
		done <"$WORLD_DIR/pids"
		[ $left = 0 ] && break
		sleep 0.1
	done
	while read -r pid st name; do
		if _world_alive "$pid" "$st"; then
			_world_err "$name (pid $pid) ignored SIGTERM; killing"
			kill -KILL "$pid" 2>/dev/null
		fi
	done <"$WORLD_DIR/pids"
	# Reap our own children (no-op for others), but only those that are
	# gone: wait must never block on a live process.
	for ((n = 0; n < 20; n++)); do
		left=0
		while read -r pid st name; do
			if _world_alive "$pid" "$st"; then
				left=1
			else
				wait "$pid" 2>/dev/null
			fi
		done <"$WORLD_DIR/pids"
		[ $left = 0 ] && break
		sleep 0.1
	done
}

# _world_collect_audit: with SLUICE_AUDIT_COLLECT (a directory;
# tests/integration/run.sh sets it), a copy of each audit log a broker of
# this world wrote (audit_log: in $WORLD_DIR/sluiced*.yaml, and its rotated
# FILE.N; and broker_config's own $WORLD_DIR/audit*.log, which a test may
# have pointed audit_log away from since), for the run's check against
# docs/audit.schema.json. Called by world_down once the brokers are
# stopped, so every line is written.
_world_collect_audit() {
	local conf f r n=0 base
	local -A seen=()
	[ -n "${SLUICE_AUDIT_COLLECT:-}" ] && [ -d "$SLUICE_AUDIT_COLLECT" ] || return 0
	base=$(basename "${0:-test}" .sh)
	for conf in "$WORLD_DIR"/sluiced*.yaml; do
		[ -f "$conf" ] || continue
		f=$(sed -n 's/^audit_log: //p' "$conf" | tail -n 1)
		case $f in /*) ;; *) continue ;; esac
		for r in "$f" "$f".[0-9]* "$WORLD_DIR"/audit*.log; do
			[ -f "$r" ] && [ -s "$r" ] && [ -z "${seen[$r]:-}" ] || continue
			seen[$r]=1
			n=$((n + 1))
			cp -- "$r" "$SLUICE_AUDIT_COLLECT/$base-$WORLD_PREFIX-$n.log" ||
				_world_err "cannot collect $r for the audit schema check"
		done
	done
	return 0
}

# world_down: undo world_up and world_add_client. Idempotent; safe in a trap.
world_down() {
	local ns pid n
	[ -n "${_WORLD_OWNED:-}" ] || return 0
	[ -n "${WORLD_PREFIX:-}" ] && [ -n "${WORLD_DIR:-}" ] && [ -d "$WORLD_DIR" ] || return 0
	_world_kill_recorded
	if [ -f "$WORLD_DIR/netns" ]; then
		while read -r ns; do
			[ -n "$ns" ] || continue
			# A process a test started inside the world and did not
			# register would keep the namespace alive after its name is
			# gone. It can only have been started by this test: say so
			# and end it.
			for pid in $(ip netns pids "$ns" 2>/dev/null); do
				_world_err "stray process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)) in $ns; killing"
				kill -KILL "$pid" 2>/dev/null
			done
			for ((n = 0; n < 20; n++)); do
				[ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
				sleep 0.1
			done
			[ -e "/run/netns/$ns" ] && ip netns del "$ns" 2>/dev/null
			rm -f "/etc/netns/$ns/resolv.conf"
			rmdir "/etc/netns/$ns" 2>/dev/null
		done <"$WORLD_DIR/netns"
	fi
	_world_collect_audit
	rm -rf "$WORLD_DIR"
	unset WORLD_PREFIX WORLD_DIR WORLD_INET WORLD_BRK WORLD_CA WORLD_RESOLVER WORLD_LAST_PID _WORLD_OWNED
	return 0
}

# world_add_client NAME ADDR/PLEN GWADDR: netns $WORLD_PREFIX-NAME whose eth0
# (ADDR/PLEN, default via GWADDR) is wired by veth to the broker namespace,
# whose end (${WORLD_PREFIX}cN) gets GWADDR/PLEN. Its resolv.conf names
# GWADDR (where a broker's DNS filter would answer). Torn down by world_down.
world_add_client() {
	local name=$1 cidr=$2 gw=$3 ns n link plen extra=
	[ -n "${WORLD_DIR:-}" ] && [ -d "$WORLD_DIR" ] || { _world_err "no world"; return 1; }
	if ! [[ $name =~ ^[a-z0-9][a-z0-9_-]{0,30}$ ]] || [[ $cidr != */* ]] || [ -z "$gw" ]; then
		_world_err "usage: world_add_client NAME ADDR/PLEN GWADDR"
		return 1
	fi
	ns=$WORLD_PREFIX-$name
	[ -e "/run/netns/$ns" ] && { _world_err "client $name exists"; return 1; }
	n=$(($(wc -l <"$WORLD_DIR/netns") + 1))
	link=${WORLD_PREFIX}c$n
	plen=${cidr#*/}
	[[ $gw == *:* ]] && extra=nodad
	_world_ns_add "$ns" &&
	ip -n "$WORLD_BRK" link add "$link" type veth peer name eth0 netns "$ns" &&
	ip -n "$WORLD_BRK" addr add "$gw/$plen" dev "$link" $extra &&
	ip -n "$WORLD_BRK" link set "$link" up &&
	ip -n "$ns" addr add "$cidr" dev eth0 $extra &&
	ip -n "$ns" link set eth0 up &&
	ip -n "$ns" route add default via "$gw" &&
	_world_resolv "$ns" "$gw" &&
	_world_wait "link $link" _world_link_running "$WORLD_BRK" "$link" &&
	_world_wait "link eth0 in $ns" _world_link_running "$ns" eth0 ||
		{ _world_err "client $name setup failed"; return 1; }
}

# world_add_routed NAME ADDR/PLEN GWADDR [ADDR6/PLEN GW6]: netns
# $WORLD_PREFIX-NAME with plain routed access to the internet namespace and
# no broker at all: its eth0 (ADDR/PLEN, default via GWADDR; optionally
# ADDR6/PLEN, default via GW6) is wired by veth straight to the internet
# namespace, whose end (${WORLD_PREFIX}rN) gets GWADDR (and GW6). Every
# server address there is one hop away; its resolv.conf names the world's
# resolver. This is the "open network" a sandbox must not be: what leaks
# from here shows that a check can fail. Torn down by world_down.
world_add_routed() {
	local name=$1 cidr=$2 gw=$3 cidr6=${4:-} gw6=${5:-} ns n link
	[ -n "${WORLD_DIR:-}" ] && [ -d "$WORLD_DIR" ] || { _world_err "no world"; return 1; }
	if ! [[ $name =~ ^[a-z0-9][a-z0-9_-]{0,30}$ ]] || [[ $cidr != */* ]] || [ -z "$gw" ] ||
		{ [ -n "$cidr6" ] && { [[ $cidr6 != */* ]] || [ -z "$gw6" ]; }; }; then
		_world_err "usage: world_add_routed NAME ADDR/PLEN GWADDR [ADDR6/PLEN GW6]"
		return 1
	fi
	ns=$WORLD_PREFIX-$name
	[ -e "/run/netns/$ns" ] && { _world_err "namespace $name exists"; return 1; }
	n=$(($(wc -l <"$WORLD_DIR/netns") + 1))
	link=${WORLD_PREFIX}r$n
	_world_ns_add "$ns" &&
	ip -n "$WORLD_INET" link add "$link" type veth peer name eth0 netns "$ns" &&
	ip -n "$WORLD_INET" addr add "$gw/${cidr#*/}" dev "$link" &&
	ip -n "$WORLD_INET" link set "$link" up &&
	ip -n "$ns" addr add "$cidr" dev eth0 &&
	ip -n "$ns" link set eth0 up &&
	ip -n "$ns" route add default via "$gw" || { _world_err "routed $name setup failed"; return 1; }
	if [ -n "$cidr6" ]; then
		ip -n "$WORLD_INET" addr add "$gw6/${cidr6#*/}" dev "$link" nodad &&
		ip -n "$ns" addr add "$cidr6" dev eth0 nodad &&
		ip -n "$ns" -6 route add default via "$gw6" ||
			{ _world_err "routed $name IPv6 setup failed"; return 1; }
	fi
	_world_resolv "$ns" "$WORLD_RESOLVER" &&
	_world_wait "link $link" _world_link_running "$WORLD_INET" "$link" &&
	_world_wait "link eth0 in $ns" _world_link_running "$ns" eth0 ||
		{ _world_err "routed $name setup failed"; return 1; }
}

# Run a command in a world namespace (no timeout: wrap it yourself, or use t_ok).
brk_exec() { ip netns exec "$WORLD_BRK" "$@"; }
inet_exec() { ip netns exec "$WORLD_INET" "$@"; }
client_exec() { local c=$1; shift; ip netns exec "$WORLD_PREFIX-$c" "$@"; }

# world_decoy_hits: the decoy hit log (empty when nothing leaked).
world_decoy_hits() { cat "$WORLD_DIR/decoy-hits.log" 2>/dev/null; }

# world_echo_log: the echo servers' request log, one JSON object per line.
world_echo_log() { cat "$WORLD_DIR/echo.log" 2>/dev/null; }

# world_clear_logs: empty the decoy, echo and dnsmasq logs (between phases).
world_clear_logs() {
	: >"$WORLD_DIR/decoy-hits.log"
	: >"$WORLD_DIR/echo.log"
	: >"$WORLD_DIR/dnsmasq.log"
}

# world_dns_queried NAME: 0 if dnsmasq logged a query (any type) for NAME.
world_dns_queried() {
	local want
	want=$(printf '%s' "${1%.}" | tr 'A-Z' 'a-z')
	awk -v want="$want" '
		{ for (i = 1; i < NF; i++)
			if ($i ~ /^query\[[A-Za-z0-9]+\]$/ && tolower($(i + 1)) == want) { found = 1; exit } }
		END { exit !found }' "$WORLD_DIR/dnsmasq.log" 2>/dev/null
}

# Run as a program: `bash tests/world/world.sh down PREFIX` tears down a world
# whose test died without doing so; `list` shows the worlds that exist.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	case ${1:-} in
	down)
		[[ ${2:-} =~ ^[a-z][a-z0-9]{1,7}$ ]] && [ -d "/tmp/sluice-world-$2" ] ||
			{ _world_err "usage: $0 down PREFIX (an existing world)"; exit 1; }
		_WORLD_OWNED=1 WORLD_PREFIX=$2 WORLD_DIR=/tmp/sluice-world-$2 world_down
		;;
	list)
		for d in /tmp/sluice-world-*; do
			[ -d "$d" ] && echo "${d#/tmp/sluice-world-}"
		done
		;;
	*)
		echo "usage: $0 down PREFIX | list   (or source it from a test)" >&2
		exit 1
		;;
	esac
fi
