#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-test: alone (run.sh): podman and containerd: machine-wide runtime state
# Other runtimes in a sluice sandbox: bubblewrap (as an unprivileged user,
# and as root), crun with an OCI bundle whose network namespace is the
# sandbox's path, plain `ip netns exec` / `nsenter` + `unshare`, and, where
# they are installed, firejail --netns and systemd-nspawn
# --network-namespace-path (fewer checks; skipped when missing). Each is
# given what sluice provides (/run/netns/NAME, /etc/netns/NAME/resolv.conf,
# /run/sluice-sandboxes/NAME/ca-bundle.crt, `sluice env NAME`) the way
# README's "Wrapping other runtimes" says, and must meet the same policy as
# `sluice exec`: the allowed host works with and without the proxy
# variables, HTTPS to an intercepted host is trusted through the bundle
# only, a refused name gets 403 (proxy) or NXDOMAIN (no proxy), address
# literals and the metadata address are refused, direct DNS to the world's
# resolver meets the filter, and no decoy is hit.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

world_up || { echo "world did not come up"; echo "0 passed, 1 failed"; exit 1; }
SB=$WORLD_PREFIX-rt
D=$WORLD_DIR
CRUN_ROOT=$D/crun-state	# crun's state for this run only: every container in it is ours
BUNDLE_DIR=$D/oci
cleanup() {
	local id
	if command -v crun >/dev/null && [ -d "$CRUN_ROOT" ]; then
		for id in $(timeout 10 crun --root "$CRUN_ROOT" list -q 2>/dev/null); do
			timeout 10 crun --root "$CRUN_ROOT" delete -f "$id" >/dev/null 2>&1
		done
	fi
	sl delete "$SB" >/dev/null 2>&1
	broker_stop
	world_down
}
trap cleanup EXIT

SECRET="s3cr3t-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$D/secret"
chmod 600 "$D/secret"
broker_config "connect_timeout: 2s"
# echo.world.test only; the credential puts it in scope, so its HTTPS is
# intercepted with the sandbox's own CA: trusted only through the bundle.
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
credentials:
  - name: echo-token
    source: { file: $D/secret }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/api/*"] }
    placeholder: ECHO_TOKEN
EOF
broker_start || { echo "0 passed, 1 failed"; exit 1; }
t_ok "sluice create" sl create "$SB" --policy "$D/pol.yaml"
read -r _ _ SB_GW <<<"$T_OUT"
t_ok "sluice env" sl env "$SB"
ENVLINES=$T_OUT
NETNS=/run/netns/$SB
RESOLV=/etc/netns/$SB/resolv.conf
BUNDLE=/run/sluice-sandboxes/$SB/ca-bundle.crt
NETNS_ID="net:[$(stat -L -c %i "$NETNS")]"
t_contains "the environment names the bundle" "$ENVLINES" "SSL_CERT_FILE=$BUNDLE"
t_contains "and the proxy on the gateway" "$ENVLINES" "HTTPS_PROXY=http://$SB_GW:3128"

# The test world's helper scripts, bound read-only into the runtimes that
# do not see the host's file system (where they do, at their own path).
WTOOLS=/opt/sluice-world
NOPROXY="env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy"
OS_STORE=/etc/ssl/certs/ca-certificates.crt

# status_reason OUTPUT: "STATUS REASON" of the last response head in OUTPUT.
status_reason() {
	t_status_reason <<<"$1"
}

# policy_checks RT RUNNER TOOLS [short]: what every runtime must show;
# RUNNER CMD... runs CMD inside that runtime, which sees tests/world at
# TOOLS. "short" (for the optional runtimes) leaves out the variants that
# only repeat a path the others prove: fewer runtime starts.
policy_checks() {
	local rt=$1 R=$2 DNSQ="python3 $3/dnsq.py" full=1 canary
	[ "${4:-}" = short ] && full=0
	canary=rt-$rt-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n').world.test
	t_ok "$rt: runs" $R readlink /proc/self/ns/net
	t_eq "$rt: in the sandbox's network namespace" "$NETNS_ID" "$T_OUT"
	t_ok "$rt: sees the sandbox's resolv.conf" $R cat /etc/resolv.conf
	t_contains "$rt: the gateway is its resolver" "$T_OUT" "nameserver $SB_GW"
	t_ok "$rt: the bundle is where the environment says" $R sh -c 'test -s "$SSL_CERT_FILE" && echo "$ECHO_TOKEN"'
	t_contains "$rt: the placeholder came through" "$T_OUT" "sluice-ph-"

	t_ok "$rt: allowed host, proxy variables" $R curl -sf -m 10 "http://echo.world.test/$rt/proxy"
	t_contains "$rt: reached the echo server" "$T_OUT" "\"path\": \"/$rt/proxy\""
	t_ok "$rt: allowed host, transparent path" $R $NOPROXY curl -sf -m 10 "http://echo.world.test/$rt/transparent"
	t_contains "$rt: reached the echo server" "$T_OUT" "\"path\": \"/$rt/transparent\""
	t_ok "$rt: HTTPS to an intercepted host, trusted through the bundle" \
		$R curl -sf -m 10 "https://echo.world.test/api/$rt"
	t_contains "$rt: the credential was injected" "$(origin "/api/$rt" | tail -n 1)" \
		"\"Authorization\", \"Bearer $SECRET\""
	t_not_contains "$rt: the origin's echo of it comes back redacted" "$T_OUT" "$SECRET"
	if [ $full = 1 ]; then
		t_ok "$rt: the same without proxy variables" $R $NOPROXY curl -sf -m 10 "https://echo.world.test/api/$rt-t"
		t_contains "$rt: injected on the transparent path" "$(origin "/api/$rt-t" | tail -n 1)" \
			"\"Authorization\", \"Bearer $SECRET\""
		t_rc "$rt: the OS store alone does not trust the sandbox CA" 60 \
			$R curl -s -m 10 --cacert "$OS_STORE" -o /dev/null "https://echo.world.test/api/$rt"
	fi

	t_ok "$rt: refused host, proxy variables" $R curl -s -m 10 -o /dev/null -D - http://other.world.test/
	t_eq "$rt: 403 not-allowlisted" "403 not-allowlisted" "$(status_reason "$T_OUT")"
	t_rc "$rt: refused name, no proxy: does not resolve" 2 $R getent ahostsv4 other.world.test
	if [ $full = 1 ]; then
		t_ok "$rt: asked of the sandbox's resolver" $R $DNSQ --server "$SB_GW" other.world.test A
		t_contains "$rt: NXDOMAIN" "$T_OUT" "NXDOMAIN"
		t_ok "$rt: an address literal, proxy variables" $R curl -s -m 10 -o /dev/null -D - http://11.0.2.10/
		t_eq "$rt: 403 address-literal" "403 address-literal" "$(status_reason "$T_OUT")"
		t_ok "$rt: the metadata address, proxy variables" $R curl -s -m 10 -o /dev/null -D - http://169.254.169.254/
		t_eq "$rt: 403 address-literal" "403 address-literal" "$(status_reason "$T_OUT")"
	fi
	t_ok "$rt: the metadata address, no proxy" $R $NOPROXY curl -s -m 10 -o /dev/null -D - http://169.254.169.254/latest/
	t_eq "$rt: 403 address-literal" "403 address-literal" "$(status_reason "$T_OUT")"
	t_ok "$rt: direct DNS to the world's resolver (UDP)" $R $DNSQ --server 11.0.1.53 "$canary" A
	t_contains "$rt: meets the filter: NXDOMAIN" "$T_OUT" "NXDOMAIN"
	if [ $full = 1 ]; then
		t_ok "$rt: direct DNS to the world's resolver (TCP)" $R $DNSQ --tcp --server 11.0.1.53 "$canary" A
		t_contains "$rt: meets the filter: NXDOMAIN" "$T_OUT" "NXDOMAIN"
	fi
	t_ok "$rt: the resolver never saw the name" bash -c "test -s '$D/dnsmasq.log' && ! grep -qF '$canary' '$D/dnsmasq.log'"
	t_eq "$rt: no decoy was hit" "" "$(world_decoy_hits)"
}

# --- bubblewrap ------------------------------------------------------------------
# The file system the runtimes get: /usr read-only, /bin, /lib ... as the host
# has them (symlinks into /usr on a merged-/usr system), /etc read-only, the
# sandbox's resolv.conf and CA bundle, the world's helper scripts.
BW_FS=(--ro-bind /usr /usr)
for d in /bin /sbin /lib /lib32 /lib64; do
	if [ -L "$d" ]; then
		BW_FS+=(--symlink "$(readlink "$d")" "$d")
	elif [ -d "$d" ]; then
		BW_FS+=(--ro-bind "$d" "$d")
	fi
done
BW_FS+=(--ro-bind /etc /etc --ro-bind "$RESOLV" /etc/resolv.conf
	--ro-bind "$BUNDLE" "$BUNDLE" --ro-bind "$PWD/tests/world" "$WTOOLS"
	--dev /dev --proc /proc --tmpfs /tmp)
BW_ENV=(--clearenv --setenv PATH /usr/bin:/bin)
while IFS='=' read -r k v; do
	[ -n "$k" ] && BW_ENV+=(--setenv "$k" "$v")
done <<<"$ENVLINES"
# bw CMD...: CMD in bubblewrap as nobody (bwrap makes its own user
# namespace), every namespace new but the network, which is the sandbox's:
# root enters it (ip netns exec), then drops to the user.
bw() {
	ip netns exec "$SB" setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all -- \
		bwrap --unshare-all --share-net --die-with-parent --new-session \
		"${BW_FS[@]}" "${BW_ENV[@]}" -- "$@"
}
# bw_root CMD...: the same, run by root (bwrap keeps uid 0 in its own user namespace).
bw_root() {
	ip netns exec "$SB" bwrap --unshare-all --share-net --die-with-parent --new-session \
		"${BW_FS[@]}" "${BW_ENV[@]}" -- "$@"
}

if t_ok "bubblewrap is installed (scripts/deps.sh)" command -v bwrap; then
	t_ok "bwrap: runs as nobody" bw id -u
	t_eq "bwrap: uid 65534 inside" "65534" "$T_OUT"
	policy_checks bwrap bw "$WTOOLS"
	t_ok "bwrap as root: runs" bw_root sh -c 'readlink /proc/self/ns/net; curl -sf -m 10 http://echo.world.test/bwrap-root'
	t_contains "bwrap as root: in the sandbox's network namespace" "$T_OUT" "$NETNS_ID"
	t_contains "bwrap as root: reached the echo server" "$T_OUT" '"path": "/bwrap-root"'
	# --unshare-net instead of --share-net: a namespace of its own, with
	# nothing in it (the runtime made its own network: sluice is out of
	# the path; here that means no network at all).
	t_ok "bwrap --unshare-net: its own namespace" ip netns exec "$SB" bwrap --unshare-all \
		--die-with-parent "${BW_FS[@]}" -- readlink /proc/self/ns/net
	t_not_contains "bwrap --unshare-net: not the sandbox's" "$T_OUT" "$NETNS_ID"
fi

# --- crun ------------------------------------------------------------------------
# An OCI bundle: config.json from `crun spec`. First what any image gives
# (python3 json; here the host's: a read-only root holding only mount
# points and the /usr symlinks, read-only binds of /usr and /etc, the world's
# helper scripts; no cgroup limits, as crun runs with
# --cgroup-manager=disabled). Then what sluice adds, with README's jq filter
# verbatim: `sluice env` appended to process.env, the sandbox's resolv.conf
# and CA bundle bound in, the network namespace given by path. Each run sets
# process.args.
cat >"$D/oci-image.py" <<'EOF'
import json, os, sys

spec, bundle, tools = sys.argv[1:4]
c = json.load(open(spec))
c["process"].update(terminal=False, cwd="/")
c["process"]["env"] = ["PATH=/usr/bin:/bin"]
rootfs = os.path.join(bundle, "rootfs")
os.makedirs(rootfs, exist_ok=True)
c["root"] = {"path": "rootfs", "readonly": True}


def bind(src, dst=None):
    return {"destination": dst or src, "type": "bind", "source": src,
            "options": ["rbind", "ro", "nosuid", "nodev"]}


mounts = [bind("/usr")]
for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
    if os.path.islink(d):           # merged /usr: the same symlink
        if not os.path.lexists(rootfs + d):
            os.symlink(os.readlink(d), rootfs + d)
    elif os.path.isdir(d):
        mounts.append(bind(d))
mounts += [bind("/etc"), bind(*tools.split(":", 1))]
# No cgroup file system in the container: crun runs without a cgroup manager.
c["mounts"] = [m for m in c["mounts"] if m["destination"] != "/sys/fs/cgroup"] + mounts
c["linux"].pop("resources", None)
c["hostname"] = "sluice-crun"
json.dump(c, sys.stdout, indent=1)
EOF
# README, "Wrapping other runtimes", crun: keep the two the same.
# shellcheck disable=SC2016 # jq's own variables
JQ_SLUICE='
  .process.env += $env
  | .mounts += [
      {destination: "/etc/resolv.conf", type: "bind",
       source: "/etc/netns/\($sb)/resolv.conf", options: ["rbind", "ro"]},
      {destination: "/run/sluice-sandboxes/\($sb)/ca-bundle.crt", type: "bind",
       source: "/run/sluice-sandboxes/\($sb)/ca-bundle.crt", options: ["rbind", "ro"]}]
  | .linux.namespaces = [(.linux.namespaces[] | select(.type != "network")),
      {type: "network", path: "/run/netns/\($sb)"}]'
# crun 1.8 refuses a hybrid cgroup layout (cgroup2 at /sys/fs/cgroup/unified
# holding controllers) even with --cgroup-manager=disabled. On such a host
# crun runs in a private mount namespace without that mount; the host's own
# mounts are untouched. A pure v1 or v2 host needs none of this.
CRUN_PRE=()
if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] &&
	[ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then
	CRUN_PRE=(unshare --mount --propagation private sh -c 'umount -l /sys/fs/cgroup/unified && exec "$@"' crun-pre)
fi
# cr CMD...: CMD as the process of a new container (a unique ID; crun run
# deletes it when CMD exits, cleanup deletes what a killed run left).
cr() {
	local id=$WORLD_PREFIX-rt-$BASHPID
	python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
c["process"]["args"] = sys.argv[2:]
json.dump(c, sys.stdout, indent=1)' "$BUNDLE_DIR/sluice.json" "$@" >"$BUNDLE_DIR/config.json" || return 99
	"${CRUN_PRE[@]}" crun --root "$CRUN_ROOT" --cgroup-manager=disabled run --bundle "$BUNDLE_DIR" "$id"
}

if t_ok "crun is installed (scripts/deps.sh)" command -v crun &&
	t_ok "jq is installed (scripts/deps.sh)" command -v jq; then
	mkdir -p "$BUNDLE_DIR" "$CRUN_ROOT"
	t_ok "crun spec" crun spec --bundle "$BUNDLE_DIR" --file "$BUNDLE_DIR/spec.json"
	t_ok "the image's part" bash -c 'python3 "$1" "$2/spec.json" "$2" "$3" >"$2/image.json"' \
		oci-image "$D/oci-image.py" "$BUNDLE_DIR" "$PWD/tests/world:$WTOOLS"
	t_ok "sluice's part (README's jq filter)" bash -c \
		'jq --arg sb "$1" --argjson env "$(jq -Rn "[inputs]" <<<"$2")" "$3" "$4/image.json" >"$4/sluice.json"' \
		jq-sluice "$SB" "$ENVLINES" "$JQ_SLUICE" "$BUNDLE_DIR"
	t_eq "the bundle's network namespace is the sandbox's" "$NETNS" \
		"$(jq -r '.linux.namespaces[] | select(.type == "network") | .path' "$BUNDLE_DIR/sluice.json")"
	t_ok "crun: runs" cr sh -c 'hostname; id -u'
	t_eq "crun: in its own container (uts), as its root" "sluice-crun
0" "$T_OUT"
	policy_checks crun cr "$WTOOLS"
	t_eq "crun: no container left behind" "" "$(crun --root "$CRUN_ROOT" list -q 2>&1)"
fi

# --- firejail ---------------------------------------------------------------------
# firejail --netns=NAME joins /run/netns/NAME and, like ip netns exec, binds
# /etc/netns/NAME/resolv.conf; the environment is passed through. Run by
# root here (Debian's firejail.config has restricted-network: network
# options are root's). Optional: runs where firejail is installed.
# firejail remounts every mount it finds read-only and gives up if one
# vanishes meanwhile: a network namespace that another sandbox or test
# deletes at that moment. It starts from a private copy of the mount table
# here (unshare), which nobody else changes.
mapfile -t ENVV <<<"$ENVLINES"
fj() {
	env -i PATH=/usr/bin:/bin "${ENVV[@]}" unshare --mount --propagation private -- \
		firejail --noprofile --quiet --netns="$SB" -- "$@"
}
if command -v firejail >/dev/null; then
	policy_checks firejail fj "$PWD/tests/world" short
else
	t_skip "firejail" "not installed"
fi

# --- systemd-nspawn --------------------------------------------------------------
# The host's /usr in a volatile root (-D / --volatile=yes; /etc/ssl for an
# OS trust store, as an image would have), output through pipes, the sandbox's
# namespace by path. --register=no --keep-unit: no machined, no scope of its
# own (this machine need not run systemd). Optional: runs where
# systemd-nspawn is installed.
NS_ENV=()
for l in "${ENVV[@]}"; do NS_ENV+=("--setenv=$l"); done
nsp() {
	systemd-nspawn --quiet --pipe --register=no --keep-unit --machine="$WORLD_PREFIX-rt-$BASHPID" \
		--directory=/ --volatile=yes --resolv-conf=off --bind-ro=/etc/ssl \
		--network-namespace-path="$NETNS" --bind-ro="$RESOLV:/etc/resolv.conf" \
		--bind-ro="$BUNDLE" --bind-ro="$PWD/tests/world:$WTOOLS" \
		"${NS_ENV[@]}" -- "$@"
}
if command -v systemd-nspawn >/dev/null; then
	policy_checks nspawn nsp "$WTOOLS" short
else
	t_skip "systemd-nspawn" "not installed"
fi

# --- plain: ip netns exec, nsenter + unshare -----------------------------------------
t_ok "ip netns exec with the sluice env" ip netns exec "$SB" env "${ENVV[@]}" sh -c \
	'readlink /proc/self/ns/net; curl -sf -m 10 http://echo.world.test/netns-exec; curl -s -m 10 -o /dev/null -w "status=%{http_code}\n" http://other.world.test/'
t_contains "ip netns exec: in the sandbox's namespace" "$T_OUT" "$NETNS_ID"
t_contains "ip netns exec: reached the echo server" "$T_OUT" '"path": "/netns-exec"'
t_contains "ip netns exec: a refused host gets 403" "$T_OUT" "status=403"
# nsenter joins the network namespace by path (it does not bind resolv.conf:
# the unshared mount namespace does it), unshare makes the rest new.
t_ok "nsenter --net + unshare" nsenter --net="$NETNS" unshare --mount --pid --fork --mount-proc -- \
	sh -c 'mount --bind "$0" /etc/resolv.conf && readlink /proc/self/ns/net &&
		env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy curl -sf -m 10 http://echo.world.test/nsenter' "$RESOLV"
t_contains "nsenter: in the sandbox's namespace" "$T_OUT" "$NETNS_ID"
t_contains "nsenter: the name resolved through the filter" "$T_OUT" '"path": "/nsenter"'

t_ok "sluice delete" sl delete "$SB"
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
broker_stop
t_done
