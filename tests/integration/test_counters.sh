#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The counters of `sluice status` and `status --metrics` against traffic
# that must move each of them by a known amount: connections accepted and
# open, bytes up and down, decisions allowed and denied (with their
# reason), upstream connects, the upstream DNS cache's hits and misses, and
# the DNS filter's answers, and the TLS leaf cache. Every figure is read before and after the
# traffic, and the difference is checked, so that what the broker did to
# come up (its readiness probes) does not count.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

DNSQ=$PWD/tests/world/dnsq.py
PY=/usr/bin/python3
N_OK=10 # allowed requests, each on a connection of its own
N_NO=5  # refused requests
N_SYN=3 # DNS queries answered with a synthetic address
N_NX=2  # DNS queries answered NXDOMAIN
N_TLS=3 # intercepted HTTPS requests, each on a connection of its own
WORKERS=2

# The names' TTL (dnsmasq's, 0 by default in the test world) outlives the
# test, so that the broker's cache hits do not depend on how fast it runs.
export WORLD_DNS_TTL=600
world_up || { echo "world did not come up"; echo "0 passed, 1 failed"; exit 1; }
trap 'broker_stop; world_down' EXIT

D=$WORLD_DIR
GW=10.99.0.1
DNSPORT=3153
broker_config "workers: $WORKERS" "dns_port: $DNSPORT" "synthetic_pool: 198.18.0.0/15" \
	"audit_fold: 0"
printf 'tok-%s\n' "$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" >"$D/secret"
chmod 600 "$D/secret"
# A credential scoped to echo.world.test's HTTPS: its TLS is intercepted,
# with a leaf certificate from the sandbox's CA (made once, then cached).
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
      ports: [80, 443]
credentials:
  - name: echo-token
    source: { file: $D/secret }
    inject: { header: Authorization, value: "Bearer {secret}" }
    scope: { hosts: [echo.world.test], paths: ["/api/*"] }
EOF

broker_start
t_ok "broker starts" test -S "$BROKER_SOCK"
world_add_client c1 10.99.0.2/30 "$GW" || echo "client c1 failed"
t_ok "register c1" sl register c1 --addr 10.99.0.2 --policy "$D/pol.yaml"
c1() { client_exec c1 "$@"; }
q() { c1 "$PY" "$DNSQ" --server "$GW" --port "$DNSPORT" --timeout 2 "$@"; }
# The filter answers once the workers run (bounded wait); this query counts
# in the "before" figures.
for _ in $(seq 50); do q echo.world.test A >/dev/null 2>&1 && break; sleep 0.1; done

# metric NAME [LABELS]: the value of one Prometheus sample (0 when absent).
metric() {
	local k=$1
	[ -n "${2:-}" ] && k="$1{$2}"
	K=$k awk '$1 == ENVIRON["K"] { v = $2 } END { print (v == "" ? 0 : v) }' "$D/metrics"
}
# snap: the figures of this moment, into the arrays B (before) or A (after).
declare -A B A
snap() {
	local -n to=$1
	sl status --metrics >"$D/metrics" 2>"$D/metrics.err" || { echo "# status --metrics failed"; return 1; }
	sl status >"$D/status.txt" 2>&1 || { echo "# status failed"; return 1; }
	to[accepted]=$(metric sluice_connections_total)
	to[up]=$(metric sluice_bytes_total 'direction="up"')
	to[down]=$(metric sluice_bytes_total 'direction="down"')
	to[allow]=$(metric sluice_decisions_total 'proto="http",decision="allow",reason="allowed"')
	to[tlsallow]=$(metric sluice_decisions_total 'proto="connect",decision="allow",reason="intercepted"')
	to[tlsreq]=$(metric sluice_decisions_total 'proto="https",decision="allow",reason="secret-redacted"')
	to[deny]=$(metric sluice_decisions_total 'proto="http",decision="deny",reason="not-allowlisted"')
	to[connects]=$(metric sluice_upstream_connect_seconds_count)
	to[hits]=$(metric sluice_dns_cache_hits_total)
	to[misses]=$(metric sluice_dns_cache_misses_total)
	to[syn]=$(metric sluice_dns_queries_total 'answer="synthetic"')
	to[nx]=$(metric sluice_dns_queries_total 'answer="nxdomain"')
	to[leaf_hits]=$(awk '$1 == "tls_leaf_hits" { print $2 }' "$D/status.txt")
	to[leaf_misses]=$(awk '$1 == "tls_leaf_misses" { print $2 }' "$D/status.txt")
	to[leaf_cached]=$(awk '$1 == "tls_leaf_cached" { print $2 }' "$D/status.txt")
}
d() { echo $((A[$1] - B[$1])); }

snap B; t_eq "status --metrics before the traffic" 0 $?
grep -E '^sluice_(connections|bytes|decisions|upstream_connect_seconds_count|dns)' "$D/metrics" |
	sed 's/^/# before: /'

# --- the traffic -------------------------------------------------------------
P="-x http://$GW:3128"
got=0 ok=0
for i in $(seq "$N_OK"); do
	# Each curl is a connection of its own; the size is what the origin
	# sent in its body, which the broker relayed downstream.
	sz=$(c1 curl -s -m 10 $P -o /dev/null -w '%{http_code} %{size_download}' \
		"http://echo.world.test/count$i")
	[ "${sz% *}" = 200 ] && ok=$((ok + 1)) && got=$((got + ${sz#* }))
done
t_eq "$N_OK allowed requests answered 200" "$N_OK" "$ok"
no=0
for i in $(seq "$N_NO"); do
	s=$(c1 curl -s -m 10 $P -o /dev/null -w '%{http_code}' "http://other.world.test/no$i")
	[ "$s" = 403 ] && no=$((no + 1))
done
t_eq "$N_NO refused requests answered 403" "$N_NO" "$no"
sl ca c1 >"$D/c1-ca.crt"
tls=0
for i in $(seq "$N_TLS"); do
	s=$(c1 curl -s -m 10 $P --cacert "$D/c1-ca.crt" -o /dev/null -w '%{http_code}' \
		"https://echo.world.test/api/tls$i")
	[ "$s" = 200 ] && tls=$((tls + 1))
done
t_eq "$N_TLS intercepted HTTPS requests answered 200" "$N_TLS" "$tls"
for i in $(seq "$N_SYN"); do q echo.world.test A >/dev/null 2>&1; done
for i in $(seq "$N_NX"); do q "nx$i.other.test" A >/dev/null 2>&1; done
# Connections are counted when they close: wait until none is open.
for _ in $(seq 50); do
	sl status --metrics >"$D/metrics" 2>/dev/null
	[ "$(metric sluice_open_connections)" = 0 ] && break
	sleep 0.1
done
t_eq "no connection left open" 0 "$(metric sluice_open_connections)"

snap A; t_eq "status --metrics after the traffic" 0 $?
grep -E '^sluice_(connections|bytes|decisions|upstream_connect_seconds_count|dns)' "$D/metrics" |
	sed 's/^/# after:  /'

# --- each counter moved by what the traffic made -----------------------------
t_eq "connections accepted: +$((N_OK + N_NO + N_TLS))" $((N_OK + N_NO + N_TLS)) "$(d accepted)"
t_eq "decisions allowed (http, allowed): +$N_OK" "$N_OK" "$(d allow)"
t_eq "decisions allowed (connect, intercepted): +$N_TLS" "$N_TLS" "$(d tlsallow)"
# The echo origin sends back the token it got; the broker redacts it.
t_eq "decisions allowed (https, secret-redacted): +$N_TLS" "$N_TLS" "$(d tlsreq)"
t_eq "TLS leaf certificates made: +1" 1 "$(d leaf_misses)"
t_eq "TLS leaf certificates from the cache: +$((N_TLS - 1))" $((N_TLS - 1)) "$(d leaf_hits)"
t_eq "TLS leaf certificates cached: +1" 1 "$(d leaf_cached)"
t_eq "decisions denied (http, not-allowlisted): +$N_NO" "$N_NO" "$(d deny)"
t_eq "upstream connects: +$((N_OK + N_TLS))" $((N_OK + N_TLS)) "$(d connects)"
t_ok "bytes down >= the $got body bytes the client got ($(d down))" test "$(d down)" -ge "$got"
# Every allowed request sent at least its request line upstream.
t_ok "bytes up >= $N_OK request lines ($(d up))" test "$(d up)" -ge $((N_OK * 20))
# One upstream lookup per allowed connection; each worker's cache misses at
# most once (the first lookup of the name on that worker), the rest hit.
t_eq "DNS cache lookups: hits + misses = +$((N_OK + N_TLS))" $((N_OK + N_TLS)) $(($(d hits) + $(d misses)))
t_ok "DNS cache misses: 1..$WORKERS ($(d misses))" test "$(d misses)" -ge 1 -a "$(d misses)" -le "$WORKERS"
t_ok "DNS cache hits: >= $((N_OK + N_TLS - WORKERS)) ($(d hits))" test "$(d hits)" -ge $((N_OK + N_TLS - WORKERS))
t_eq "DNS filter, synthetic answers: +$N_SYN" "$N_SYN" "$(d syn)"
t_eq "DNS filter, NXDOMAIN: +$N_NX" "$N_NX" "$(d nx)"

# The text form shows the same figures.
t_contains "status: DNS cache hits" "$(cat "$D/status.txt")" "cache ${A[hits]} hits, ${A[misses]} misses"
t_contains "status: bytes" "$(cat "$D/status.txt")" "bytes: ${A[up]} up, ${A[down]} down"

t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_done
