#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: alone (run.sh): podman and containerd: machine-wide runtime state, /etc/sluice/oci-hook.json
# `sluice attach` and `sluice detach`: a sandbox in a network namespace
# somebody else made. One made with `ip netns add` (its own name, which
# sluice leaves alone), one reached only as /proc/PID/ns/net of a process in
# an unshared namespace (sluice names it /run/netns/NAME and unnames it on
# detach), with another interface name. Through each: the allowed host is
# reached, another is refused, a name outside the policy is NXDOMAIN, the
# metadata address is refused, no decoy is hit. Attach failures (bad
# policy, a busy name, a taken interface, no such namespace, a namespace
# whose default route is taken: a failure after the broker, the files and
# the veth are made) leave nothing: no link, no set element, no files, no
# registration, and the namespace as it was (IPv6, lo). Detach leaves the
# namespace and nothing else, and says so when run twice; `sluice delete`
# of an attached sandbox is a detach. Then the runtimes: podman --network
# ns:, containerd's ctr run --with-ns, and sluice-oci-hook under podman.
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
NS1=$P-an	# made by ip netns add; attached under its own name
SB2=$P-ap	# attached through /proc/PID/ns/net
NSX=$P-ax	# for the failures
HOLDER=

# Everything of this test, by name: sandboxes first (while the broker
# runs), then the namespaces it made itself, then the holder process.
cleanup() {
	local n pid
	for n in $(ls -d /run/netns/"$P"-a* "$STATE"/"$P"-a* 2>/dev/null | xargs -r -n1 basename | sort -u); do
		timeout 20 ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" \
			detach "$n" >/dev/null 2>&1
		rm -rf "/etc/netns/$n" "${STATE:?}/$n"
	done
	# The namespaces it made itself, and any other of its prefix left: a
	# create meant to be refused that made a sandbox, which detach leaves.
	for n in $(ls -d /run/netns/"$P"-a* 2>/dev/null | xargs -r -n1 basename); do
		if [ -e "/run/netns/$n" ]; then
			for pid in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
			ip netns del "$n" 2>/dev/null
		fi
	done
	[ -n "$HOLDER" ] && kill -KILL "$HOLDER" 2>/dev/null && wait "$HOLDER" 2>/dev/null
	runtime_cleanup 2>/dev/null
	broker_stop
	world_down
}
runtime_cleanup() { :; }
trap cleanup EXIT

cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
EOF
printf 'version: 1\negress:\n  allow:\n    - hots: echo.world.test\n' >"$D/bad.yaml"
broker_config "connect_timeout: 2s"
broker_start || { echo "0 passed, 1 failed"; exit 1; }

nft_brk() { ip netns exec "$WORLD_BRK" nft "$@"; }
# elements: how many sandboxes the broker's firewall lets in (0 before the
# first attach has made the table).
elements() {
	local j
	j=$(nft_brk -j list set inet sluice sandbox_src 2>/dev/null) || { echo 0; return; }
	jq '[.nftables[] | select(.set) | .set.elem // [] | length] | add // 0' <<<"$j"
}
brk_links() { ip -n "$WORLD_BRK" -o link show 2>/dev/null | grep -c ': sl-'; }
status_reason() { t_status_reason <<<"$1"; }
DNSQ="python3 $PWD/tests/world/dnsq.py"
NOPROXY="env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy"
# v6state NETNS-RUNNER...: disable_ipv6 of all, default, lo, and lo's UP flag.
ns_state() {
	"$@" sh -c 'cat /proc/sys/net/ipv6/conf/all/disable_ipv6 /proc/sys/net/ipv6/conf/default/disable_ipv6 \
		/proc/sys/net/ipv6/conf/lo/disable_ipv6; ip -o link show lo | grep -o "[<,]UP[,>]" || echo down' | tr '\n' ' '
}

# left NAME IFNAME NETNS-RUNNER...: what of sandbox NAME is left: the
# record, /etc/netns/NAME, its registration, its interface in the namespace.
left() {
	local n=$1 i=$2 p=()
	shift 2
	[ -e "$STATE/$n" ] && p+=("$STATE/$n is there")
	[ -e "/etc/netns/$n" ] && p+=("/etc/netns/$n is there")
	sl list | grep -qw -- "$n" && p+=("the broker still lists $n")
	"$@" ip link show "$i" >/dev/null 2>&1 && p+=("$i is still in the namespace")
	printf '%s\n' "${p[@]}"
}

# policy_checks TAG RUNNER...: through the attached namespace, as a program
# of it that takes no proxy variables (the transparent path) and one that
# does (the explicit proxy on the gateway, GW).
policy_checks() {
	local tag=$1 canary
	shift
	canary=at-$tag-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n').world.test
	t_ok "$tag: allowed host reached" "$@" curl -sf -m 10 "http://echo.world.test/$tag"
	t_contains "$tag: the echo server answered" "$T_OUT" "\"path\": \"/$tag\""
	t_ok "$tag: allowed host through the proxy" "$@" curl -sf -m 10 -x "http://$GW:3128" "http://echo.world.test/$tag-p"
	t_contains "$tag: the echo server answered" "$T_OUT" "\"path\": \"/$tag-p\""
	t_ok "$tag: other host through the proxy" "$@" curl -s -m 10 -o /dev/null -D - -x "http://$GW:3128" http://other.world.test/
	t_eq "$tag: 403 not-allowlisted" "403 not-allowlisted" "$(status_reason "$T_OUT")"
	t_rc "$tag: other host: its name does not resolve" 2 "$@" getent ahostsv4 other.world.test
	t_ok "$tag: asked of the gateway" "$@" $DNSQ --server "$GW" other.world.test A
	t_contains "$tag: NXDOMAIN" "$T_OUT" "NXDOMAIN"
	t_ok "$tag: direct DNS to the world's resolver" "$@" $DNSQ --server 11.0.1.53 "$canary" A
	t_contains "$tag: meets the filter: NXDOMAIN" "$T_OUT" "NXDOMAIN"
	t_ok "$tag: the resolver never saw the name" bash -c "! grep -qF '$canary' '$D/dnsmasq.log'"
	t_ok "$tag: the metadata address" "$@" curl -s -m 10 -o /dev/null -D - http://169.254.169.254/latest/
	t_eq "$tag: 403 address-literal" "403 address-literal" "$(status_reason "$T_OUT")"
	t_eq "$tag: no decoy was hit" "" "$(world_decoy_hits)"
}

# --- usage -------------------------------------------------------------------------
t_rc "attach without --netns: usage" 2 sl attach "$NS1" --policy "$D/pol.yaml"
t_contains "attach: the usage line" "$T_ERR" "usage: sluice attach NAME --netns PATH"
t_rc "attach without --policy: usage" 2 sl attach "$NS1" --netns /run/netns/x
t_rc "attach with a stray word: usage" 2 sl attach "$NS1" extra --netns /run/netns/x --policy "$D/pol.yaml"
t_rc "detach without a name: usage" 2 sl detach
t_rc "detach of nothing: exit 1" 1 sl detach "$P-anone"
t_contains "detach of nothing: says so" "$T_ERR" "no such sandbox"
t_rc "attach with a bad name" 1 sl attach "a/b" --netns /run/netns/x --policy "$D/pol.yaml"
t_contains "attach with a bad name: says so" "$T_ERR" "bad sandbox name"
# NAME.tmp is how the broker writes a state file of NAME: no sandbox's name.
t_rc "attach of a name ending in .tmp" 1 sl attach "$P-at.tmp" --netns /run/netns/x --policy "$D/pol.yaml"
t_contains "is refused, saying why" "$T_ERR" "not ending in .tmp)"
t_rc "so is create" 1 sl create "$P-at.tmp" --policy "$D/pol.yaml"
t_contains "(the same words)" "$T_ERR" "bad sandbox name \`$P-at.tmp\`"

# --- a namespace made with ip netns add, attached under its own name ----------
t_ok "ip netns add" ip netns add "$NS1"
IN1=(ip netns exec "$NS1")
INO1=$(stat -L -c %i "/run/netns/$NS1")
el0=$(elements)
t_ok "sluice attach --json" sl attach "$NS1" --netns "/run/netns/$NS1" --policy "$D/pol.yaml" --json
J=$T_OUT
jf() { jq -r "$1" <<<"$J"; }
t_eq "json: name" "$NS1" "$(jf .name)"
t_eq "json: netns" "/run/netns/$NS1" "$(jf .netns)"
t_eq "json: ifname" "eth0" "$(jf .ifname)"
ADDR=$(jf .address)
GW=$(jf .gateway)
HOSTIF=$(jf .host_ifname)
t_ok "json: the address is a /30 of the pool" bash -c "[[ '$ADDR' =~ ^10\.200\.[0-9]+\.[0-9]+/30$ ]]"
t_eq "json: the nameserver is the gateway" "$GW" "$(jf .nameserver)"
t_eq "json: the MAC is the interface's" "$("${IN1[@]}" cat /sys/class/net/eth0/address)" "$(jf .mac)"
t_eq "json: the host MAC is the broker side's" \
	"$(ip netns exec "$WORLD_BRK" cat "/sys/class/net/$HOSTIF/address" 2>&1)" "$(jf .host_mac)"
t_contains "the address is on eth0" "$(ip -n "$NS1" -o addr show dev eth0)" "inet $ADDR"
t_contains "the default route is via the gateway" "$(ip -n "$NS1" route show default)" "default via $GW dev eth0"
t_eq "IPv6 is off, lo is up" "1 1 1 ,UP, " "$(ns_state "${IN1[@]}")"
t_eq "one set element more" "$((el0 + 1))" "$(elements)"
t_contains "the broker lists it" "$(sl list)" "$NS1"
# (A checked record: each line after its checksum, common/sumfile.h.)
t_ok "the record says attached" grep -qE "(^| )attached yes$" "$STATE/$NS1/sandbox"
t_eq "the namespace is still the one ip netns add made" "$INO1" "$(stat -L -c %i "/run/netns/$NS1")"
t_ok "sluice env" sl env "$NS1"
t_contains "sluice env: the proxy on the gateway" "$T_OUT" "HTTPS_PROXY=http://$GW:3128"
policy_checks netns "${IN1[@]}"
t_ok "sluice exec works in it" sl exec "$NS1" -- curl -sf -m 10 "http://echo.world.test/exec"
t_contains "sluice exec: reached the echo server" "$T_OUT" '"path": "/exec"'

t_ok "sluice detach" sl detach "$NS1"
t_eq "detach: the namespace stays" "$INO1" "$(stat -L -c %i "/run/netns/$NS1" 2>&1)"
t_none "detach: nothing else is left" $(left "$NS1" eth0 "${IN1[@]}" | tr ' ' _)
t_eq "detach: no set element" "$el0" "$(elements)"
t_rc "detach: the broker-side link is gone" 1 ip -n "$WORLD_BRK" link show "$HOSTIF"
t_eq "detach: no route left in the namespace" "" "$(ip -n "$NS1" route show)"
t_rc "detach twice: no such sandbox" 1 sl detach "$NS1"
t_contains "detach twice: says so" "$T_ERR" "no such sandbox"

# `sluice delete` of an attached sandbox is a detach: the namespace stays.
t_ok "attach again" sl attach "$NS1" --netns "/run/netns/$NS1" --policy "$D/pol.yaml"
t_ok "sluice delete of an attached sandbox" sl delete "$NS1"
t_eq "delete: the namespace stays" "$INO1" "$(stat -L -c %i "/run/netns/$NS1" 2>&1)"
t_none "delete: nothing else is left" $(left "$NS1" eth0 "${IN1[@]}" | tr ' ' _)

# `attach --audit` as `create --audit`: the sandbox is in audit mode, an
# unlisted host is reached and audited would-deny; the guard still holds.
t_ok "attach --audit" sl attach "$NS1" --netns "/run/netns/$NS1" --policy "$D/pol.yaml" --audit
read -r _ _ GW <<<"$T_OUT"
t_contains "attach --audit: list says audit" "$(sl list | awk -v n="$NS1" '$1 == n')" " audit "
t_contains "attach --audit: status counts it" "$(sl status)" "sandboxes_audit 1"
t_ok "attach --audit: other host through the proxy" "${IN1[@]}" curl -s -m 10 -o /dev/null -D - \
	-x "http://$GW:3128" http://other.world.test/attach-audit
t_eq "attach --audit: reached (200)" "200 " "$(status_reason "$T_OUT")"
t_ok "attach --audit: audited would-deny not-allowlisted" bash -c "grep -F '\"sandbox\":\"$NS1\"' '$BROKER_AUDIT' |
	grep -F '/attach-audit' | grep -qF '\"decision\":\"would-deny\",\"reason\":\"not-allowlisted\"'"
t_ok "attach --audit: the metadata address" "${IN1[@]}" curl -s -m 10 -o /dev/null -D - http://169.254.169.254/latest/
t_eq "attach --audit: still 403 address-literal" "403 address-literal" "$(status_reason "$T_OUT")"
t_ok "detach the --audit sandbox" sl detach "$NS1"

# --- /proc/PID/ns/net of a process in an unshared namespace -----------------
unshare --net sleep 600 </dev/null >/dev/null 2>&1 &
HOLDER=$!
for ((i = 0; i < 50; i++)); do
	[ "$(readlink "/proc/$HOLDER/ns/net")" != "$(readlink /proc/self/ns/net)" ] && break
	sleep 0.1
done
INO2=$(stat -L -c %i "/proc/$HOLDER/ns/net")
IN2=(nsenter --net="/proc/$HOLDER/ns/net")
t_eq "a fresh namespace: IPv6 on, lo down" "0 0 0 down " "$(ns_state "${IN2[@]}")"
t_ok "attach /proc/PID/ns/net --ifname sl0" sl attach "$SB2" --netns "/proc/$HOLDER/ns/net" \
	--ifname sl0 --policy "$D/pol.yaml"
read -r _ _ GW <<<"$T_OUT"
t_eq "sluice names it /run/netns/NAME" "$INO2" "$(stat -L -c %i "/run/netns/$SB2" 2>&1)"
t_ok "the interface is sl0" "${IN2[@]}" ip link show sl0
t_ok "the record says so" grep -qE "(^| )ifname sl0$" "$STATE/$SB2/sandbox"
policy_checks proc ip netns exec "$SB2"
t_ok "sluice detach" sl detach "$SB2"
t_ok "detach: the process's namespace stays" test "$(stat -L -c %i "/proc/$HOLDER/ns/net")" = "$INO2"
t_rc "detach: sluice's name of it is gone" 1 test -e "/run/netns/$SB2"
t_none "detach: nothing else is left" $(left "$SB2" sl0 "${IN2[@]}" | tr ' ' _)
t_ok "detach: the namespace has lo alone" bash -c "[ \"\$(${IN2[*]} ip -o link show | wc -l)\" = 1 ]"
t_rc "detach twice" 1 sl detach "$SB2"

# --- failures leave nothing, and the namespace as it was --------------------
t_ok "ip netns add (for failures)" ip netns add "$NSX"
INX=(ip netns exec "$NSX")
el0=$(elements)
ln0=$(brk_links)
before=$(ns_state "${INX[@]}")
# fails NAME WHAT NEEDLE ARGS...: attach fails with NEEDLE in its message,
# and leaves nothing.
fails() {
	local n=$1 what=$2 needle=$3
	shift 3
	t_rc "attach, $what: fails" 1 sl attach "$n" "$@"
	t_contains "attach, $what: says why" "$T_ERR" "$needle"
	t_none "attach, $what: nothing left" $(left "$n" eth0 "${INX[@]}" | tr ' ' _)
	t_eq "attach, $what: no set element" "$el0" "$(elements)"
	t_eq "attach, $what: no broker-side link" "$ln0" "$(brk_links)"
	t_eq "attach, $what: the namespace as it was" "$before" "$(ns_state "${INX[@]}")"
}
fails "$NSX" "bad policy" "bad.yaml:4:" --netns "/run/netns/$NSX" --policy "$D/bad.yaml"
fails "$NSX" "no such policy file" "No such file" --netns "/run/netns/$NSX" --policy "$D/none.yaml"
t_rc "no name was made" 1 test -e "/run/netns/$P-ay"
fails "$P-ay" "no such namespace" "cannot open network namespace" --netns "/run/netns/$P-none" --policy "$D/pol.yaml"
fails "$P-ay" "not a namespace" "is not a network namespace" --netns /etc/hostname --policy "$D/pol.yaml"
fails "$P-ay" "the broker's own namespace" "broker's own" --netns "/run/netns/$WORLD_BRK" --policy "$D/pol.yaml"
fails "$NS1" "a name whose /run/netns is another namespace" "another namespace" --netns "/run/netns/$NSX" --policy "$D/pol.yaml"
fails "$NSX" "a bad interface name" "bad interface name" --netns "/run/netns/$NSX" --ifname "a/b" --policy "$D/pol.yaml"
t_ok "a busy name: a sandbox of it" sl attach "$P-ab" --netns "/run/netns/$NS1" --policy "$D/pol.yaml"
el0=$(elements)
ln0=$(brk_links)
t_rc "attach, a busy name: fails" 1 sl attach "$P-ab" --netns "/run/netns/$NSX" --policy "$D/pol.yaml"
t_contains "attach, a busy name: says why" "$T_ERR" "exists"
t_eq "attach, a busy name: no set element more" "$el0" "$(elements)"
t_eq "attach, a busy name: no broker-side link more" "$ln0" "$(brk_links)"
t_eq "attach, a busy name: the namespace as it was" "$before" "$(ns_state "${INX[@]}")"
t_rc "attach, a busy name: no interface in it" 1 "${INX[@]}" ip link show eth0
t_ok "the busy name's sandbox is untouched" ip netns exec "$NS1" curl -sf -m 10 "http://echo.world.test/busy"
t_rc "a busy namespace: its eth0 is taken" 1 sl attach "$P-ay" --netns "/run/netns/$NS1" --policy "$D/pol.yaml"
t_contains "a busy namespace: says so" "$T_ERR" "\`eth0\` exists in the network namespace"
t_ok "detach the busy name" sl detach "$P-ab"
el0=$(elements)
ln0=$(brk_links)
# A failure late in the attach (the default route, after the broker's
# register, the files and the veth): all of it undone. (A default route on
# lo: any other link is refused before anything is made, below.)
t_ok "a default route in the namespace" sh -c "ip -n $NSX link set lo up && ip -n $NSX route add default dev lo"
before=$(ns_state "${INX[@]}")
fails "$NSX" "the default route is taken" "default route" --netns "/run/netns/$NSX" --policy "$D/pol.yaml"
t_contains "the namespace's own route is untouched" "$(ip -n "$NSX" route show default)" "default dev lo"
ip -n "$NSX" route del default dev lo
# Another link is another way out, whatever its routes: a default route of
# a higher metric, or only a route to one network, would still carry what
# the broker never sees (by route, or SO_BINDTODEVICE).
t_ok "another link, with a default route of metric 100" sh -c "ip -n $NSX link add d0 type veth peer name d1 &&
	ip -n $NSX link set d0 up && ip -n $NSX addr add 192.0.2.1/24 dev d0 &&
	ip -n $NSX route add default via 192.0.2.254 metric 100"
before=$(ns_state "${INX[@]}")
fails "$NSX" "another link (metric 100)" "has another way out: d1 (veth), d0 (veth)" \
	--netns "/run/netns/$NSX" --policy "$D/pol.yaml"
t_ok "only a route to one network on it" sh -c "ip -n $NSX route del default via 192.0.2.254 metric 100 &&
	ip -n $NSX route add 198.51.100.0/24 via 192.0.2.254"
before=$(ns_state "${INX[@]}")
fails "$NSX" "another link (one route)" "has another way out" --netns "/run/netns/$NSX" --policy "$D/pol.yaml"
ip -n "$NSX" link del d0

# --- runtimes --------------------------------------------------------------------
# Each gets an exploded root file system built from the host's binaries
# (/usr bound read-only, the /bin, /lib ... symlinks of a merged /usr), the
# test world's tools at their own path, and whatever of sluice's files the
# way it joins needs. Their state lives under $D only.
ROOTFS=$D/rootfs
mkdir -p "$ROOTFS"/etc "$ROOTFS"/proc "$ROOTFS"/sys "$ROOTFS"/dev "$ROOTFS"/tmp "$ROOTFS"/run "$ROOTFS"/usr
for d in bin sbin lib lib32 lib64; do
	[ -L "/$d" ] && ln -sfn "$(readlink "/$d")" "$ROOTFS/$d"
done
touch "$ROOTFS/etc/resolv.conf"
WT=$PWD/tests/world
# crun (podman's runtime here) refuses a hybrid cgroup layout (cgroup2 at
# /sys/fs/cgroup/unified): the runtimes run in a mount namespace of their
# own without that mount, as test_runtimes.sh does for crun (made private
# there first: the host's mounts are untouched). Not a private namespace
# as a whole: podman's keeps the host's propagation (as podman run on the
# host has it), so that a name the OCI hook gives a namespace in
# /run/netns is the host's too; containerd's is a slave (see below).
CG_HYBRID=0
if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] &&
	[ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then
	CG_HYBRID=1
fi
CG_FIX='[ "$0" = 0 ] || { mount --make-rprivate /sys/fs/cgroup && umount -l /sys/fs/cgroup/unified; } || exit 125; '
RT_PRE=(unshare --mount --propagation unchanged sh -c "$CG_FIX"'exec "$@"' "$CG_HYBRID")
CTRD_PRE=(unshare --mount --propagation slave sh -c "$CG_FIX"'exec "$@"' "$CG_HYBRID")
CTRD_PID=
PMD=$D/podman
runtime_cleanup() {
	local i
	[ -d "$PMD/graph" ] && timeout 30 pm rm -af >/dev/null 2>&1
	if [ -n "$CTRD_PID" ]; then
		kill -TERM "$CTRD_PID" 2>/dev/null
		for ((i = 0; i < 50; i++)); do kill -0 "$CTRD_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$CTRD_PID" 2>/dev/null
		wait "$CTRD_PID" 2>/dev/null
		[ -n "${RUN_CTRD_MADE:-}" ] && rmdir /run/containerd 2>/dev/null
	fi
}

# Podman's own configuration and storage, under $D: nothing lands in
# /var/lib/containers. Root here lacks CAP_SYS_RESOURCE: explicit ulimits.
mkdir -p "$PMD"
printf '[storage]\ndriver = "vfs"\nrunroot = "%s/run"\ngraphroot = "%s/graph"\n' "$PMD" "$PMD" >"$PMD/storage.conf"
printf '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "none"\ntmp_dir = "%s/tmp"\nvolume_path = "%s/volumes"\nstatic_dir = "%s/libpod"\n[network]\nnetwork_config_dir = "%s/net"\n' \
	"$PMD" "$PMD" "$PMD" "$PMD" >"$PMD/containers.conf"
pm() {
	CONTAINERS_CONF=$PMD/containers.conf CONTAINERS_STORAGE_CONF=$PMD/storage.conf \
		"${RT_PRE[@]}" podman --root "$PMD/graph" --runroot "$PMD/run" "$@"
}
PM_RUN=(run --rm --cgroups=disabled --ulimit nofile=20000:20000 --ulimit nproc=32768:32768
	-v /usr:/usr:ro -v "$WT:$WT:ro")

if ! command -v podman >/dev/null; then
	t_skip "podman" "not installed (scripts/deps.sh installs it)"
else
	# podman --network ns:/run/netns/NAME: it binds /etc/netns/NAME/resolv.conf
	# itself; the CA bundle is bound in, `sluice env` is its --env-file.
	SBP=$P-apm
	t_ok "podman: ip netns add" ip netns add "$SBP"
	t_ok "podman: sluice attach" sl attach "$SBP" --netns "/run/netns/$SBP" --policy "$D/pol.yaml"
	read -r _ _ GW <<<"$T_OUT"
	sl env "$SBP" >"$D/pm.env"
	BUNDLE=$STATE/$SBP/ca-bundle.crt
	pmr() { pm "${PM_RUN[@]}" --network "ns:/run/netns/$SBP" --env-file "$D/pm.env" \
		-v "$BUNDLE:$BUNDLE:ro" -v "$BIN:$BIN:ro" --rootfs "$ROOTFS" "$@"; }
	t_ok "podman: runs" pmr sh -c 'readlink /proc/self/ns/net; cat /etc/resolv.conf; test -s "$SSL_CERT_FILE" && echo bundle'
	t_contains "podman: in the sandbox's namespace" "$T_OUT" "net:[$(stat -L -c %i "/run/netns/$SBP")]"
	t_contains "podman: the gateway is its resolver" "$T_OUT" "nameserver $GW"
	t_contains "podman: the bundle is where the environment says" "$T_OUT" "bundle"
	policy_checks podman pmr
	t_rc "podman: the probe passes" 0 pmr "$BIN/sluice-probe" --timeout 3 \
		--expect-allow echo.world.test:80 --expect-deny other.world.test:80 \
		--canary canary.world.test --resolver 11.0.1.53 --public-addr 11.0.2.10 \
		--private-addr 10.0.0.5 --metadata-addr 169.254.169.254 --udp-addr 11.0.3.1 \
		--udp-port 9999 --dns-name other.world.test \
		--skip caps-init-userns,control-socket,host-processes,netns-etc,netns-run,secret-files,vsock
	t_eq "podman: no container left" "" "$(pm ps -aq 2>&1)"
	t_ok "podman: sluice detach" sl detach "$SBP"
	t_none "podman: nothing left" $(left "$SBP" eth0 ip netns exec "$SBP" | tr ' ' _)
	ip netns del "$SBP"
fi

if ! command -v podman >/dev/null; then
	t_skip "sluice-oci-hook under podman" "podman not installed (scripts/deps.sh installs it)"
else
	# sluice-oci-hook from a --hooks-dir, selected by the annotation
	# sluice.io/policy: podman makes the namespace (--network none), the
	# hook wires it at createRuntime and unwires it at poststop. The
	# container binds the hook's directory and finds its files by its own
	# network namespace's inode.
	OCI=$D/oci
	mkdir -p "$OCI/hooks.d" "$OCI/policies" "$OCI/share"
	cp "$D/pol.yaml" "$OCI/policies/web.yaml"
	hook_conf() {	# FILE SOCKET
		printf '{ "socket": "%s", "brokerNetns": "/run/netns/%s", "policyDir": "%s",\n  "dir": "%s" }\n' \
			"$2" "$WORLD_BRK" "$OCI/policies" "$OCI/share" >"$1"
	}
	hook_conf "$OCI/hook.json" "$BROKER_SOCK"
	hook_conf "$OCI/hook-nobroker.json" "$D/no-such.sock"
	# deploy/oci/sluice.json, with this test's paths.
	hooks_dir() {	# DIR CONFIG
		mkdir -p "$1"
		sed -e "s|/usr/local/bin/sluice-oci-hook|$BIN/sluice-oci-hook|" -e "s|/etc/sluice/oci-hook.json|$2|" \
			deploy/oci/sluice.json >"$1/sluice.json"
	}
	hooks_dir "$OCI/hooks.d" "$OCI/hook.json"
	hooks_dir "$OCI/hooks-nobroker.d" "$OCI/hook-nobroker.json"
	t_ok "oci-hook: the example hooks.d file is JSON" jq -e '.hook.path and .stages' deploy/oci/sluice.json
	# hk HOOKS-DIR [PODMAN-RUN-OPTIONS] -- CMD...: a container with the
	# hook; what the hook said (crun's run.oci.hooks.stderr) on stderr.
	hk() {
		local hd=$1
		shift
		: >"$OCI/hook.err"
		pm "${PM_RUN[@]}" --network none --hooks-dir "$hd" -v "$OCI/share:$OCI/share:ro" \
			--annotation run.oci.hooks.stderr="$OCI/hook.err" "$@"
		local rc=$?
		cat "$OCI/hook.err" >&2
		return $rc
	}
	# In the container: its files, found by its namespace's inode; then CMD.
	INSIDE='d='$OCI'/share/net-$(stat -L -c %i /proc/self/ns/net); set -a; . "$d/env"; set +a; '
	t_ok "oci-hook: the container runs, wired" hk "$OCI/hooks.d" --annotation sluice.io/policy=web \
		--rootfs "$ROOTFS" sh -c "$INSIDE"'readlink "$d"; cat /etc/resolv.conf; ip -o -4 addr show eth0;
			test -s "$SSL_CERT_FILE" && echo bundle; curl -sf -m 10 http://echo.world.test/hook;
			curl -s -m 10 -o /dev/null -w "other=%{http_code}\n" http://other.world.test/'
	OUT=$T_OUT
	HOOKSB=$(head -n 1 <<<"$OUT")
	t_ok "oci-hook: the sandbox is oci- and 24 characters of the id" bash -c "[[ '$HOOKSB' =~ ^oci-[0-9a-f]{24}$ ]]"
	t_contains "oci-hook: its resolver is the gateway" "$OUT" "nameserver 10.200."
	t_contains "oci-hook: its address is the pool's" "$OUT" "inet 10.200."
	t_contains "oci-hook: the bundle came through the directory" "$OUT" "bundle"
	t_contains "oci-hook: the allowed host is reached" "$OUT" '"path": "/hook"'
	t_contains "oci-hook: another host is refused" "$OUT" "other=403"
	t_not_contains "oci-hook: poststop detached it" "$(sl list)" "oci-"
	t_eq "oci-hook: its files are gone" "" "$(ls -A "$OCI/share")"
	t_rc "oci-hook: its name is gone" 1 test -e "/run/netns/$HOOKSB"
	t_rc "oci-hook: its record is gone" 1 test -e "$STATE/$HOOKSB"

	# An image whose /etc is an absolute symbolic link: the hook finds
	# /etc/resolv.conf as the container will, inside the root, never at
	# the host path the link names (which does not exist here).
	ROOTFS2=$D/rootfs-etclink
	mkdir -p "$ROOTFS2" && cp -a "$ROOTFS"/. "$ROOTFS2"/ && rm -rf "$ROOTFS2/etc" &&
		mkdir -p "$ROOTFS2/$WORLD_PREFIX-etc" && touch "$ROOTFS2/$WORLD_PREFIX-etc/resolv.conf" &&
		ln -s "/$WORLD_PREFIX-etc" "$ROOTFS2/etc"
	t_rc "oci-hook: (the link's target is no host path)" 1 test -e "/$WORLD_PREFIX-etc"
	t_ok "oci-hook: an image whose /etc is a link to /$WORLD_PREFIX-etc runs" hk "$OCI/hooks.d" \
		--annotation sluice.io/policy=web --rootfs "$ROOTFS2" sh -c 'cat /etc/resolv.conf'
	t_contains "oci-hook: its resolv.conf, found inside the root, is the sandbox's" "$T_OUT" \
		"nameserver 10.200."
	t_rc "oci-hook: and nothing was made at the host path" 1 test -e "/$WORLD_PREFIX-etc"

	# Fail closed: the container does not start.
	el0=$(elements)
	t_fails "oci-hook: an unknown policy: the container does not start" hk "$OCI/hooks.d" \
		--annotation sluice.io/policy=nope --rootfs "$ROOTFS" touch "$OCI/share/started"
	t_contains "oci-hook: says why" "$T_ERR" "unknown policy \`nope\`"
	t_fails "oci-hook: a policy name with a /: refused" hk "$OCI/hooks.d" \
		--annotation sluice.io/policy=../web --rootfs "$ROOTFS" touch "$OCI/share/started"
	t_contains "oci-hook: says why" "$T_ERR" "bad policy name"
	t_fails "oci-hook: the broker down: the container does not start" hk "$OCI/hooks-nobroker.d" \
		--annotation sluice.io/policy=web --rootfs "$ROOTFS" touch "$OCI/share/started"
	t_contains "oci-hook: says why" "$T_ERR" "cannot reach sluiced"
	t_rc "oci-hook: none of them started" 1 test -e "$OCI/share/started"
	t_eq "oci-hook: no set element left" "$el0" "$(elements)"
	t_not_contains "oci-hook: no sandbox left" "$(sl list)" "oci-"
	t_eq "oci-hook: no files left" "" "$(ls -A "$OCI/share" "$STATE" | grep oci-)"
	t_ok "oci-hook: without the annotation, not run" hk "$OCI/hooks.d" --rootfs "$ROOTFS" \
		sh -c 'ip -o link show | wc -l'
	t_eq "oci-hook: without it, lo only" "1" "$T_OUT"
	t_eq "oci-hook: no container left" "" "$(pm ps -aq 2>&1)"

	# "audit": true in the hook's configuration: its sandboxes are in
	# audit mode (an unlisted host reached, audited would-deny; the guard
	# holds). A value that is not a boolean: the container does not start.
	hook_conf "$OCI/hook-audit.json" "$BROKER_SOCK"
	sed -i 's/ }$/, "audit": true }/' "$OCI/hook-audit.json"
	hooks_dir "$OCI/hooks-audit.d" "$OCI/hook-audit.json"
	t_ok "oci-hook audit: the container runs" hk "$OCI/hooks-audit.d" --annotation sluice.io/policy=web \
		--rootfs "$ROOTFS" sh -c "$INSIDE"'curl -s -m 10 -o /dev/null -w "other=%{http_code}\n" http://other.world.test/oci-audit;
			curl -s -m 10 -o /dev/null -w "meta=%{http_code}\n" http://169.254.169.254/latest/'
	t_contains "oci-hook audit: the unlisted host is reached" "$T_OUT" "other=200"
	t_contains "oci-hook audit: the metadata address is still refused" "$T_OUT" "meta=403"
	t_ok "oci-hook audit: audited would-deny not-allowlisted" bash -c "grep -F '/oci-audit' '$BROKER_AUDIT' |
		grep -qF '\"decision\":\"would-deny\",\"reason\":\"not-allowlisted\"'"
	hook_conf "$OCI/hook-badaudit.json" "$BROKER_SOCK"
	sed -i 's/ }$/, "audit": "yes" }/' "$OCI/hook-badaudit.json"
	hooks_dir "$OCI/hooks-badaudit.d" "$OCI/hook-badaudit.json"
	t_fails "oci-hook: \"audit\": \"yes\": the container does not start" hk "$OCI/hooks-badaudit.d" \
		--annotation sluice.io/policy=web --rootfs "$ROOTFS" touch "$OCI/share/started"
	t_contains "oci-hook: says why" "$T_ERR" "\`audit\` is true or false"
	t_rc "oci-hook: it did not start" 1 test -e "$OCI/share/started"
	t_not_contains "oci-hook: no sandbox left" "$(sl list)" "oci-"
	t_eq "oci-hook: no container left after these" "" "$(pm ps -aq 2>&1)"
fi

if ! command -v containerd >/dev/null || ! command -v ctr >/dev/null; then
	t_skip "containerd" "not installed (scripts/deps.sh installs it)"
else
	# containerd of its own (root, state, socket under $D; no CRI), stopped
	# by its PID. Its shims put their sockets in /run/containerd/s whatever
	# the configuration says: a tmpfs there in its own mount namespace
	# keeps them off the host (an empty /run/containerd it had to make is
	# removed after). runc's state and ctr's fifos are under $D too. ctr
	# does not bind resolv.conf: the test does.
	CTRD=$D/containerd
	mkdir -p "$CTRD/runc" "$CTRD/fifo"
	[ -e /run/containerd ] || RUN_CTRD_MADE=1
	printf 'version = 2\nroot = "%s/root"\nstate = "%s/state"\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n[grpc]\n  address = "%s/containerd.sock"\n[ttrpc]\n  address = "%s/containerd.sock.ttrpc"\n' \
		"$CTRD" "$CTRD" "$CTRD" "$CTRD" >"$CTRD/config.toml"
	"${CTRD_PRE[@]}" sh -c 'mkdir -p /run/containerd && mount -t tmpfs -o mode=0711 sluice-test /run/containerd && exec "$@"' \
		ctrd containerd --config "$CTRD/config.toml" >"$CTRD/log" 2>&1 </dev/null &
	CTRD_PID=$!
	for ((i = 0; i < 100; i++)); do
		ctr --address "$CTRD/containerd.sock" version >/dev/null 2>&1 && break
		sleep 0.1
	done
	t_ok "containerd: answers" ctr --address "$CTRD/containerd.sock" version
	SBC=$P-act
	t_ok "containerd: ip netns add" ip netns add "$SBC"
	t_ok "containerd: sluice attach" sl attach "$SBC" --netns "/run/netns/$SBC" --policy "$D/pol.yaml"
	read -r _ _ GW <<<"$T_OUT"
	CTR_ENV=()
	while IFS= read -r l; do [ -n "$l" ] && CTR_ENV+=(--env "$l"); done < <(sl env "$SBC")
	BUNDLE=$STATE/$SBC/ca-bundle.crt
	rbind() { echo "type=bind,src=$1,dst=$2,options=rbind:ro"; }
	ctrr() {
		ctr --address "$CTRD/containerd.sock" run --rm --fifo-dir "$CTRD/fifo" --runc-root "$CTRD/runc" \
			--rootfs --with-ns "network:/run/netns/$SBC" \
			--mount "$(rbind /usr /usr)" --mount "$(rbind "$WT" "$WT")" \
			--mount "$(rbind "/etc/netns/$SBC/resolv.conf" /etc/resolv.conf)" \
			--mount "$(rbind "$BUNDLE" "$BUNDLE")" --env PATH=/usr/bin:/bin "${CTR_ENV[@]}" \
			"$ROOTFS" "$P-ctr-$BASHPID-$RANDOM" "$@"
	}
	t_ok "containerd: runs" ctrr sh -c 'readlink /proc/self/ns/net; cat /etc/resolv.conf'
	t_contains "containerd: in the sandbox's namespace" "$T_OUT" "net:[$(stat -L -c %i "/run/netns/$SBC")]"
	t_contains "containerd: the gateway is its resolver" "$T_OUT" "nameserver $GW"
	policy_checks ctr ctrr
	t_eq "containerd: no container left" "" "$(ctr --address "$CTRD/containerd.sock" containers ls -q 2>&1)"
	t_ok "containerd: sluice detach" sl detach "$SBC"
	t_none "containerd: nothing left" $(left "$SBC" eth0 ip netns exec "$SBC" | tr ' ' _)
	ip netns del "$SBC"
fi

t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_done
