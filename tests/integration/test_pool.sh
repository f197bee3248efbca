#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The pool of network namespaces made ahead (netns/pool.c): a plain create
# leaves one behind once it has exited, the next create takes it (the
# sandbox's namespace is the pooled one, and it works: DNS and a request
# through the broker); two creates at once both succeed with their own
# namespaces; a pooled namespace someone added a link to, or an entry that
# is no namespace, is dropped and the create still succeeds;
# SLUICE_NETNS_POOL=0 neither takes nor makes one; an entry left without
# its marker is removed by the next refill; nothing of a sandbox is left.
#
# The test's pool is its own (SLUICE_NETNS_POOL_DIR), so that other tests
# running at the same time neither take its entries nor see them. Sandbox
# names are "$WORLD_PREFIX-q*": the trap removes whatever of them is left,
# and the pool with its mounts.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

BIN=${SLUICE_BIN:-$PWD/bin}
STATE=/run/sluice-sandboxes
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

world_up || { echo "world did not come up"; echo "0 passed, 1 failed"; exit 1; }
P=$WORLD_PREFIX
D=$WORLD_DIR
export SLUICE_NETNS_POOL_DIR=$STATE/.pool-$P
POOL=$SLUICE_NETNS_POOL_DIR
V=$POOL/v1

our_sandboxes() {
	local f
	for f in /run/netns/"$P"-q* "$STATE"/"$P"-q* /etc/netns/"$P"-q*; do
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
		if [ -e "/run/netns/$n" ]; then
			for pid in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
			ip netns del "$n" 2>/dev/null
		fi
		rm -rf "/etc/netns/$n" "${STATE:?}/$n" "/var/lib/sluice/workspaces/$n"
	done
}
# The pool as README says an admin removes it: its mounts, then the files.
cleanup_pool() {
	[ -d "$POOL" ] || return 0
	umount -R -l "$POOL" 2>/dev/null
	rm -rf "${POOL:?}"
}
trap 'cleanup_sandboxes; cleanup_pool; broker_stop; world_down' EXIT

broker_config "sandbox_pool: 10.209.0.0/24"
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
EOF
broker_start || { echo "broker did not start"; echo "0 passed, 1 failed"; exit 1; }

IN() { local n=$1; shift; ip netns exec "$n" "$@"; }
EX() { local n=$1; shift; sl exec "$n" -- "$@"; }
# The pool's ready entries, one ID a line.
ready() { for f in "$V"/*.ready; do [ -e "$f" ] && basename "$f" .ready; done; }
# The ready entries, none but these once a refill may have run: waits (at
# most 10 s) until some entry is ready, then prints them.
wait_ready() { wait_for 1 ready; ready; }
# The network namespace (its inode) of a sandbox, or of a pool entry.
ns_of() { stat -L -c %i "/run/netns/$1" 2>/dev/null; }
entry_ns() { stat -L -c %i "$V/$1" 2>/dev/null; }
# After a create, a wait (at most 10 s) until its lingering child has made
# the pool's next entry or given up: until no sluice process of this test's
# pool (its environment says so) is left.
SLBIN=$(readlink -f "$BIN/sluice")
pool_procs() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/exe" 2>/dev/null)" = "$SLBIN" ] || continue
		tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qxF "SLUICE_NETNS_POOL_DIR=$POOL" &&
			echo "${p#/proc/}"
	done
}
settled() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ -z "$(pool_procs)" ] && return 0
		sleep 0.1
	done
	return 1
}

# --- the first create fills the pool ----------------------------------------
t_eq "no pool before the first create" "" "$(ls -d "$POOL" 2>/dev/null)"
t_ok "create $P-q1" sl create "$P-q1" --policy "$D/pol.yaml"
E1=$(wait_ready | head -n 1)
t_ok "then a namespace is in the pool" test -n "$E1"
t_eq "the pool directory is root's, 0700" "0 700" "$(stat -c '%u %a' "$POOL" 2>&1)"
t_eq "so is its versioned directory" "0 700" "$(stat -c '%u %a' "$V" 2>&1)"
t_ok "the pool directory is a mount of its own" mountpoint -q "$POOL"
t_contains "a private one" "$(findmnt -n -o PROPAGATION --target "$POOL" 2>&1)" "private"
t_eq "the entry is a namespace's nsfs file" "nsfs" "$(stat -f -c %T "$V/$E1" 2>&1)"
t_eq "its marker is root's, 0400" "0 400" "$(stat -c '%u %a' "$V/$E1.ready" 2>&1)"
t_eq "it holds lo and nothing else" "lo" \
	"$(nsenter --net="$V/$E1" ip -o link show | awk -F': ' '{print $2}' | paste -sd' ')"
t_eq "with IPv6 off" "1 1 1" \
	"$(nsenter --net="$V/$E1" cat /proc/sys/net/ipv6/conf/{all,default,lo}/disable_ipv6 | paste -sd' ')"
t_eq "it is in no scan of $STATE (a dot entry)" "" "$(ls "$STATE" | grep -F "pool")"
t_eq "nor a named namespace" "" "$(ip netns list | grep -F "pool")"

# --- the next create takes it -----------------------------------------------
N1=$(entry_ns "$E1")
# A mount namespace made now holds a copy of the entry's mount.
unshare -m --propagation unchanged sleep 60 &
HOLD=$!
wait_for 1 grep -F "net:[$N1]" "/proc/$HOLD/mountinfo"
t_eq "a mount namespace made meanwhile has a copy of the entry" "1" \
	"$(grep -F "net:[$N1]" "/proc/$HOLD/mountinfo" | grep -cF " $V/")"
t_ok "create $P-q2" sl create "$P-q2" --policy "$D/pol.yaml"
read -r _ A2 G2 <<<"$T_OUT"
t_eq "its namespace is the pooled one" "$N1" "$(ns_of "$P-q2")"
t_ok "the pool made its next entry" settled
t_eq "and the entry taken is gone" "" "$(ls "$V" | grep -F "$E1")"
# (/run/netns/NAME, shared, reaches it: only the pool's copy is looked for.)
t_eq "so is that copy (it keeps no namespace taken)" "0" \
	"$(grep -F "net:[$N1]" "/proc/$HOLD/mountinfo" | grep -cF " $V/")"
kill "$HOLD"
wait "$HOLD" 2>/dev/null
t_eq "the sandbox has lo and eth0" "lo eth0" \
	"$(IN "$P-q2" ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | paste -sd' ')"
t_contains "eth0 holds its address" "$(IN "$P-q2" ip -4 addr show dev eth0)" "inet $A2/30"
t_eq "IPv6 is off in it" "1 1 1" \
	"$(IN "$P-q2" cat /proc/sys/net/ipv6/conf/{all,default,eth0}/disable_ipv6 | paste -sd' ')"
t_ok "its DNS answers through the broker" IN "$P-q2" getent ahostsv4 echo.world.test
t_ok "an allowed request goes through the broker" EX "$P-q2" curl -sf -m 10 http://echo.world.test/pool-hello
t_contains "and reaches the echo server" "$T_OUT" '"path": "/pool-hello"'
t_contains "the broker's audit names the sandbox" "$(grep pool-hello "$D/audit.log")" "\"sandbox\":\"$P-q2\""

# --- two creates at once -----------------------------------------------------
sl create "$P-q3" --policy "$D/pol.yaml" >"$D/q3.out" 2>&1 &
J3=$!
sl create "$P-q4" --policy "$D/pol.yaml" >"$D/q4.out" 2>&1 &
J4=$!
wait "$J3"
R3=$?
wait "$J4"
R4=$?
t_eq "two creates at once both succeed" "0 0" "$R3 $R4"
t_ok "with namespaces of their own" test -n "$(ns_of "$P-q3")" -a "$(ns_of "$P-q3")" != "$(ns_of "$P-q4")"
t_ok "both work" EX "$P-q3" curl -sf -m 10 -o /dev/null http://echo.world.test/pool-q3
t_ok "both work (2)" EX "$P-q4" curl -sf -m 10 -o /dev/null http://echo.world.test/pool-q4
t_ok "the pool settles" settled

# --- a namespace someone has been at is not used ----------------------------
TAMPERED=$(wait_ready | sort | paste -sd' ')
t_ok "an entry is ready" test -n "$TAMPERED"
NT=
for e in $TAMPERED; do
	NT="$NT $(entry_ns "$e")"
	t_ok "a veth pair added inside pooled namespace $e" \
		nsenter --net="$V/$e" ip link add qa type veth peer name qb
done
t_ok "create $P-q5 all the same" sl create "$P-q5" --policy "$D/pol.yaml"
for n in $NT; do
	t_ok "not in the tampered namespace $n" test "$(ns_of "$P-q5")" != "$n"
done
t_ok "the pool settles" settled
t_eq "one tampered entry was taken and dropped" "$(($(wc -w <<<"$TAMPERED") - 1))" \
	"$(for e in $TAMPERED; do [ -e "$V/$e" ] && echo "$e"; done | wc -l)"
t_eq "the sandbox has lo and eth0 only" "lo eth0" \
	"$(IN "$P-q5" ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | paste -sd' ')"
t_ok "and works" EX "$P-q5" curl -sf -m 10 -o /dev/null http://echo.world.test/pool-q5
t_ok "the pool settles" settled
# An entry that is no namespace at all (a plain file, marked ready).
for e in $(ready); do
	umount -l "$V/$e" 2>/dev/null
done
t_ok "the entries made plain files" test -z "$(for e in $(ready); do
	[ "$(stat -f -c %T "$V/$e")" = nsfs ] && echo "$e"; done)"
PLAIN=$(ready | paste -sd' ')
t_ok "create $P-q6 all the same" sl create "$P-q6" --policy "$D/pol.yaml"
t_ok "the pool settles" settled
t_eq "one plain entry was taken and dropped" "$(($(wc -w <<<"$PLAIN") - 1))" \
	"$(for e in $PLAIN; do [ -e "$V/$e" ] && echo "$e"; done | wc -l)"
t_eq "in a namespace of its own making: lo and eth0" "lo eth0" \
	"$(IN "$P-q6" ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | paste -sd' ')"
t_ok "the pool settles" settled

# --- SLUICE_NETNS_POOL=0 --------------------------------------------------------
BEFORE=$(wait_ready | sort | paste -sd' ')
t_ok "entries are ready" test -n "$BEFORE"
t_ok "create $P-q7 with SLUICE_NETNS_POOL=0" env SLUICE_NETNS_POOL=0 \
	ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" create "$P-q7" --policy "$D/pol.yaml"
t_ok "its child is gone" settled
t_eq "it took no entry and made none" "$BEFORE" "$(ready | sort | paste -sd' ')"
for e in $BEFORE; do
	t_ok "its namespace is not pool entry $e" test "$(ns_of "$P-q7")" != "$(entry_ns "$e")"
done

# --- an entry without its marker ----------------------------------------------
touch "$V/deadbeef" && chmod 0400 "$V/deadbeef"
t_ok "a half-made entry (a namespace, no marker)" unshare --net="$V/deadbeef" true
t_eq "is a namespace" "nsfs" "$(stat -f -c %T "$V/deadbeef" 2>&1)"
# The pool must have room for the refill to run: take what is there.
t_ok "create $P-q8" sl create "$P-q8" --policy "$D/pol.yaml"
t_ok "the pool settles" settled
t_eq "the next refill removed it" "" "$(ls "$V" | grep -F deadbeef)"
t_ok "and its mount" test "$(stat -f -c %T "$V" 2>&1)" = "$(stat -f -c %T "$POOL" 2>&1)"

# --- a create that fails after taking one -----------------------------------------
# The broker refuses the registration (the name is registered already): the
# create has taken its namespace by then, and removes the entry at once.
BEFORE=$(wait_ready | sort | paste -sd' ')
t_ok "entries are ready" test -n "$BEFORE"
t_ok "the broker holds a registration of $P-qr" sl register "$P-qr" --addr 10.209.0.250 \
	--policy "$D/pol.yaml"
t_rc "so create $P-qr fails" 1 sl create "$P-qr" --policy "$D/pol.yaml"
t_eq "one entry fewer" "$(($(wc -w <<<"$BEFORE") - 1))" \
	"$(for e in $BEFORE; do [ -e "$V/$e" ] && echo "$e"; done | wc -l)"
t_eq "nothing of it left in the pool: no claim, no entry without its marker" "" \
	"$(ls "$V" | grep -v '\.ready$' | while read -r e; do [ -e "$V/$e.ready" ] || echo "$e"; done)"
t_ok "unregister $P-qr" sl unregister "$P-qr"
t_ok "the pool settles" settled

# --- delete, and nothing left ---------------------------------------------------
for n in $(our_sandboxes); do
	t_ok "delete $n" sl delete "$n"
done
t_eq "no sandbox of this test is left" "" "$(our_sandboxes)"
t_eq "none is listed" "" "$(sl list | grep -F "$P-q")"
t_eq "a delete makes no entry (the pool is as before)" "$(ready | sort | paste -sd' ')" \
	"$(settled; ready | sort | paste -sd' ')"
t_ok "README's removal of the pool" cleanup_pool
t_eq "leaves nothing" "" "$(ls -d "$POOL" 2>/dev/null; grep -F "$POOL" /proc/self/mountinfo)"

t_done
