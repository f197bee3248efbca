#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Splice pipes made while the broker's user is over its pipe pages
# (fs.pipe-user-pages-soft: past it an unprivileged user's new pipes get 2
# pages): such a pipe carries its transfer whole and is then closed, not
# kept by the worker; once the pages are free, the next transfer's pipe is
# full size and is kept. The broker runs as a user of this test's own,
# whose pages a helper spends as that user, with no privilege: no other
# test's broker shares them.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

HERE=$PWD/tests/integration
D=
HOG=
down() {
	[ -n "$D" ] && touch "$D/hog/release"
	[ -n "$HOG" ] && { kill "$HOG" 2>/dev/null; wait "$HOG" 2>/dev/null; }
	broker_stop
	world_down
}
world_up || { echo "world did not come up"; echo "0 passed, 1 failed"; exit 1; }
trap down EXIT
D=$WORLD_DIR
ORIGIN=other.world.test:8088

# A uid no account has and no process runs as.
BUID=$((61000 + $$ % 3000))
for ((n = 0; n < 100; n++)); do
	getent passwd "$BUID" >/dev/null || ps -e -o uid= | grep -qx " *$BUID" || break
	BUID=$((BUID + 1))
done
broker_config "user: $BUID:$BUID"
cat >"$D/pol.yaml" <<POL
version: 1
egress:
  allow:
    - host: other.world.test
      ports: [8088]
POL
world_spawn inet spliceserver /usr/bin/python3 "$HERE/spliceserver.py" 11.0.2.20 8088 "$D/ready.splice"
for ((n = 0; n < 50; n++)); do [ -s "$D/ready.splice" ] && break; sleep 0.1; done
broker_start || { echo "0 passed, 1 failed"; exit 1; }
world_add_client c1 10.99.0.2/30 10.99.0.1 || echo "client c1 failed"
t_ok "register c1" sl register c1 --addr 10.99.0.2 --policy "$D/pol.yaml"
t_eq "the broker runs as this test's own user" "$BUID" "$(awk '/^Uid:/ { print $2 }' "/proc/$BROKER_PID/status")"

# kept: the empty pipes the workers keep (sluice_splice_pipes{state="kept"}).
kept() {
	sl status --metrics | awk '$1 == "sluice_splice_pipes{state=\"kept\"}" { v = $2 }
		END { print (v == "" ? 0 : v) }'
}
# small_pipes: how many of sluiced's pipe descriptors are smaller than
# 64 KiB (F_GETPIPE_SZ of each, opened anew through /proc).
small_pipes() {
	python3 - "$BROKER_PID" <<'PY'
import fcntl, os, sys
d = "/proc/%s/fd" % sys.argv[1]
n = 0
for f in os.listdir(d):
    try:
        if not os.readlink(os.path.join(d, f)).startswith("pipe:"):
            continue
        fd = os.open(os.path.join(d, f), os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try:
        n += fcntl.fcntl(fd, 1032) < 65536  # F_GETPIPE_SZ
    finally:
        os.close(fd)
print(n)
PY
}
N=5000000
get() { client_exec c1 curl -sS -m 30 -x http://10.99.0.1:3128 -o "$D/get.out" "http://$ORIGIN/cl/$N"; }

# small_made: sluice_splice_pipes_small_total.
small_made() {
	sl status --metrics | awk '$1 == "sluice_splice_pipes_small_total" { v = $2 }
		END { print (v == "" ? "none" : v) }'
}
t_eq "before any transfer, no pipe is kept" "0" "$(kept)"
t_eq "and none came out small" "0" "$(small_made)"
mkdir -m 0700 "$D/hog"
chown "$BUID:$BUID" "$D/hog"
setpriv --reuid="$BUID" --regid="$BUID" --clear-groups /usr/bin/python3 "$HERE/pipehog.py" \
	"$D/hog/ready" "$D/hog/release" &
HOG=$!
for ((n = 0; n < 100; n++)); do [ -s "$D/hog/ready" ] && break; sleep 0.1; done
read -r hog npipes <"$D/hog/ready" 2>/dev/null || hog=none
echo "# the helper, as uid $BUID: $hog after $npipes pipes"
if [ "$hog" != ready ]; then
	t_skip "pipes made over the user's pages are not kept" \
		"(the helper: $hog after ${npipes:-0} pipes; fs.pipe-user-pages-soft is $(cat /proc/sys/fs/pipe-user-pages-soft))"
	t_done
	exit
fi
# Read slowly, so that bytes may wait in the broker's pipe: a sample of
# its descriptors then sees a 2-page one (shown, not checked: the client's
# socket buffers may take all the bytes between two samples; the counter
# below is the check).
t_first=$(date +%s%N)
client_exec c1 curl -sS -m 30 --limit-rate 2M -x http://10.99.0.1:3128 -o "$D/get.out" \
	"http://$ORIGIN/cl/$N" &
cpid=$!
seen=0
for ((n = 0; n < 40 && seen == 0; n++)); do
	kill -0 "$cpid" 2>/dev/null || break # (a sample may take 0.4 s)
	seen=$(small_pipes)
	sleep 0.05
done
wait "$cpid"
t_eq "a 5 MB download while the user's pipe pages are spent" "0" "$?"
echo "# 2-page pipe descriptors seen in the broker while it ran: $seen"
t_eq "arrives byte for byte" "$(pattern_sha $N)" "$(sha256sum <"$D/get.out" | cut -d' ' -f1)"
made=$(small_made)
t_ok "it went through pipes of 2 pages, and each is counted (sluice_splice_pipes_small_total $made)" \
	test "$made" -ge 1
t_eq "the pipe made then is not kept" "0" "$(kept)"
t_eq "nor is any pipe of 2 pages left in the broker" "0" "$(small_pipes)"
t_ok "a second download while the pages are spent" get
t_eq "arrives byte for byte" "$(pattern_sha $N)" "$(sha256sum <"$D/get.out" | cut -d' ' -f1)"
made2=$(small_made)
t_ok "its pipe is counted too ($made, then $made2)" test "$made2" -gt "$made"
made=$made2
lines=$(grep -c 'proxy: a splice pipe came out at' "$BROKER_LOG")
t_contains "the log says why" "$(grep -F 'proxy: a splice pipe came out at' "$BROKER_LOG" | head -1)" \
	"not 65536: the broker's user (uid $BUID) is over its pipe pages (fs.pipe-user-pages-soft)"
# The line comes at most once every 10 s: one line, and one more for each
# whole 10 s the two downloads took (3 s or so here; a slower machine may
# take longer, and then a second line is right).
secs=$((($(date +%s%N) - t_first) / 1000000000))
most=$((1 + secs / 10))
t_ok "at most once every 10 s ($lines lines for $made pipes in $secs s; at most $most)" \
	test "$lines" -ge 1 -a "$lines" -le "$most"
if [ "$most" -lt "$made" ]; then
	t_ok "not once per pipe" test "$lines" -lt "$made"
else
	t_skip "not once per pipe" "(the downloads took $secs s: each pipe may have its line)"
fi
touch "$D/hog/release"
wait "$HOG"
HOG=
t_ok "the same download once the pages are free" get
t_eq "arrives byte for byte" "$(pattern_sha $N)" "$(sha256sum <"$D/get.out" | cut -d' ' -f1)"
t_eq "its pipe, full size, is kept" "1" "$(kept)"
t_eq "and none of its pipes is smaller than 64 KiB" "0" "$(small_pipes)"
t_eq "nor counted as small" "$made" "$(small_made)"
t_ok "the broker is still running" broker_alive
t_done
