#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The contained runner (`sluice exec`, `sluice run`): code in a sandbox,
# root inside, cannot read the host's secrets, see the host's processes (the
# broker's), reach the control socket, list or enter other namespaces, make
# namespaces of its own, or hold a capability or uid 0 outside; it starts in
# a workspace that persists across exec calls and goes with delete; --user,
# --bind (rw, :ro), --privileged (today's uncontained behaviour, warned);
# exit statuses and signals come back as a shell's; proxy variables, the CA
# bundle and credential placeholders still work inside. Bad input (unknown
# --user, missing --bind source) runs nothing.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
broker_world r1 r2 r3 rrun
BIN=${SLUICE_BIN:-$PWD/bin}
WS=/var/lib/sluice/workspaces

SECRET="s3cr3t-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
ENVSECRET="envs3cr3t-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$D/secret"
chmod 600 "$D/secret"
broker_config
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
    plaintext: allow
EOF
# A secret in the broker's environment only (not this shell's).
SLUICE_TEST_ENVSECRET=$ENVSECRET broker_start || { echo "0 passed, 1 failed"; exit 1; }
t_ok "create $S1" S create "$S1" --policy "$D/pol.yaml"
read -r _ A1 _ <<<"$T_OUT"
t_ok "create $S2" S create "$S2" --policy "$D/pol.yaml"

X() { S exec "$S1" -- "$@"; }
# R CMD...: CMD under `sluice run` (a sandbox of its own, gone after).
R() { S run --policy "$D/pol.yaml" --name "$S4" -- "$@"; }
# H CMD...: `sluice exec` as the README shows it, from the host's own
# namespaces, without `ip netns exec` (sluice joins the sandbox itself).
H() { "$BIN/sluice" --socket "$BROKER_SOCK" exec "$S1" -- "$@"; }

# --- escapes, under exec and under run -------------------------------------------------
for how in exec run exec-from-host; do
	case $how in exec) E=X ;; run) E=R ;; *) E=H ;; esac
	t_fails "$how: the policy's secret file cannot be read" $E cat "$D/secret"
	t_not_contains "$how: nor printed" "$T_OUT" "$SECRET"
	t_fails "$how: no other process's environment holds the broker's secret" \
		$E sh -c 'cat /proc/[0-9]*/environ | tr "\0" "\n" | grep -F "$1"' sh "$ENVSECRET"
	t_ok "$how: /proc lists processes" $E sh -c 'for p in /proc/[0-9]*; do tr "\0" " " <$p/cmdline; echo; done'
	t_not_contains "$how: sluiced is not among them" "$T_OUT" sluiced
	t_ok "$how: only a handful of processes (its own PID namespace)" \
		$E sh -c 'test "$(ls -d /proc/[0-9]* | wc -l)" -le 5'
	t_fails "$how: the control socket is not there" $E test -e "$BROKER_SOCK"
	t_fails "$how: nor the default one" $E test -e /run/sluice
	t_fails "$how: /run/netns cannot be listed" $E ls /run/netns
	t_fails "$how: /etc/netns is not there" $E ls /etc/netns
	if [ "$how" = run ]; then n=$S4; else n=$S1; fi
	t_ok "$how: /run" $E sh -c 'ls /run; ls /run/sluice-sandboxes'
	t_eq "$how: holds this sandbox's CA bundle only (no other sandbox's files)" \
		"sluice-sandboxes $n" "$(echo $T_OUT)"
	t_fails "$how: another sandbox cannot be entered (nsenter)" $E nsenter --net="/run/netns/$S2" true
	t_fails "$how: no new network namespace (unshare -n)" $E unshare -n true
	t_fails "$how: no new user namespace (unshare -Ur)" $E unshare -Ur true
	# vsock is not network namespaced: on a virtual machine with a vsock
	# transport its sockets reach the hypervisor's host past the broker.
	# Only making one is tried (no connect: nothing leaves the machine).
	t_ok "$how: socket families" $E python3 -c '
import errno, socket
for name, fam, typ in (("unix", socket.AF_UNIX, socket.SOCK_STREAM),
                       ("inet", socket.AF_INET, socket.SOCK_STREAM),
                       ("inet6", socket.AF_INET6, socket.SOCK_DGRAM),
                       ("netlink", socket.AF_NETLINK, socket.SOCK_RAW),
                       ("vsock", 40, socket.SOCK_STREAM),
                       ("tipc", 30, socket.SOCK_RDM),
                       ("alg", 38, socket.SOCK_SEQPACKET)):
    try:
        socket.socket(fam, typ).close()
        print(name, "made")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
try:
    socket.socketpair(40, socket.SOCK_STREAM)
    print("vsock-pair made")
except OSError as e:
    print("vsock-pair", errno.errorcode.get(e.errno, e.errno))
'
	t_eq "$how: Unix, IPv4, IPv6 and netlink sockets; no vsock, TIPC or AF_ALG (EAFNOSUPPORT)" \
		"unix made inet made inet6 made netlink made vsock EAFNOSUPPORT tipc EAFNOSUPPORT alg EAFNOSUPPORT vsock-pair EAFNOSUPPORT" \
		"$(echo $T_OUT)"
	t_ok "$how: capabilities" $E grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
	t_eq "$how: none, no_new_privs, seccomp filter" \
		"CapBnd: 0000000000000000 CapEff: 0000000000000000 NoNewPrivs: 1 Seccomp: 2" \
		"$(sort <<<"$T_OUT" | tr -s ' \t' ' ' | paste -sd' ')"
	t_ok "$how: root inside" $E id -u
	t_eq "$how: id -u" "0" "$T_OUT"
	t_fails "$how: /home and /root are not there" $E sh -c 'ls /home || ls /root'
done

# The uid outside, as the host sees the command. (ip netns exec execs
# sluice, so $! is sluice itself.)
ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" exec "$S1" -- \
	sh -c 'trap "echo got TERM >/workspace/term; exit 5" TERM; sleep 20 & wait' </dev/null >/dev/null 2>&1 &
XPID=$!
for _ in $(seq 100); do
	pids=$(ip netns pids "$S1" 2>/dev/null | paste -sd,)
	[ -n "$pids" ] && ps -o comm= -p "$pids" | grep -qx sleep && break
	sleep 0.05
done
SLEEP_PID=$(ps -o pid=,comm= -p "$pids" | awk '$2 == "sleep" {print $1}')
SH_PID=$(ps -o pid=,comm= -p "$pids" | awk '$2 == "sh" {print $1}')
t_ok "the command runs (sleep)" test -n "$SLEEP_PID"
UIDS=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$SLEEP_PID/status" 2>/dev/null)
# 0x70000000 plus the low 24 bits of the sandbox's address (README).
U=$((0x70000000 + 0x$(printf '%02x' ${A1//./ } | cut -c3-8)))
t_eq "its real, effective, saved and fs uid outside are the sandbox's" "$U" \
	"$(tr ' ' '\n' <<<"$UIDS" | sort -u)"
t_eq "and no process of the sandbox is uid 0 outside" "" \
	"$(ps -o uid= -p "$pids" | awk '$1 == 0')"

# SIGTERM to `sluice exec` reaches the command (its handler runs), and its
# exit status comes back.
kill -TERM "$XPID"
rc=0
for _ in $(seq 50); do kill -0 "$XPID" 2>/dev/null || break; sleep 0.1; done
wait "$XPID" || rc=$?
t_eq "exec: kill -TERM sluice exec: the command's handler ran" "got TERM" "$(cat "$WS/$S1/term" 2>&1)"
t_eq "exec: and its exit status comes back" "5" "$rc"
for _ in $(seq 50); do [ -e "/proc/$SH_PID" ] || [ -e "/proc/$SLEEP_PID" ] || break; sleep 0.1; done
t_ok "exec: the sandbox's processes are gone" test ! -e "/proc/$SH_PID" -a ! -e "/proc/$SLEEP_PID"
rm -f "$WS/$S1/term"

# A command that does not handle SIGTERM: 143.
ip netns exec "$WORLD_BRK" "$BIN/sluice" --socket "$BROKER_SOCK" exec "$S1" -- sleep 20 </dev/null >/dev/null 2>&1 &
XPID=$!
for _ in $(seq 100); do
	pids=$(ip netns pids "$S1" 2>/dev/null | paste -sd,)
	[ -n "$pids" ] && ps -o comm= -p "$pids" | grep -qx sleep && break
	sleep 0.05
done
kill -TERM "$XPID"
rc=0
for _ in $(seq 50); do kill -0 "$XPID" 2>/dev/null || break; sleep 0.1; done
wait "$XPID" || rc=$?
t_eq "exec: kill -TERM sluice exec gives 143" "143" "$rc"
t_eq "exec: nothing is left in the sandbox" "" "$(ip netns pids "$S1" 2>/dev/null)"

# Ctrl-C at a terminal: SIGINT goes to the whole foreground process group.
# The command handles it; the sandbox's init (whose death would take the
# command with it) and sluice must not die of it, nor pass it on again.
cat >"$D/ptyrun.py" <<'PY'
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out = b""
def pump(secs, until=None):
    global out
    end = time.time() + secs
    while time.time() < end and not (until and until in out):
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                d = os.read(fd, 4096)
            except OSError:
                return
            if not d:
                return
            out += d
pump(10, b"started")
os.write(fd, b"\x03")
pump(10)
_, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace").replace("\r", ""))
print("status %d" % os.waitstatus_to_exitcode(st))
PY
t_ok "Ctrl-C at a terminal" python3 "$D/ptyrun.py" ip netns exec "$WORLD_BRK" "$BIN/sluice" \
	--socket "$BROKER_SOCK" exec "$S1" -- \
	sh -c 'trap "echo INT-handled" INT; echo started; sleep 5; echo after; exit 4'
t_contains "reaches the command's handler" "$T_OUT" "INT-handled"
t_contains "which goes on, and its status comes back" "$T_OUT" "after
status 4"

# --- exit statuses --------------------------------------------------------------------
t_rc "exec: the command's exit status" 7 X sh -c 'exit 7'
t_rc "exec: a command killed by SIGTERM gives 143" 143 X sh -c 'kill -TERM $$'
t_rc "run: a command killed by SIGTERM gives 143" 143 R sh -c 'kill -TERM $$'
t_rc "exec: a missing command is 127" 127 X /nonexistent/cmd
t_contains "saying so" "$T_ERR" "sluice: /nonexistent/cmd: No such file or directory"
# The command starts as execvp() would start it (cli/runner.c, start_command()).
t_ok "exec: a script without #! and a file not executable, in the workspace" X sh -c \
	'printf "echo no-shebang \$0\\n" >noshebang && chmod 755 noshebang && echo x >noexec && chmod 644 noexec'
t_ok "exec: a script without #! runs, by /bin/sh, as a shell would run it" X ./noshebang
t_eq "its output" "no-shebang ./noshebang" "$T_OUT"
t_rc "exec: a file that may not be executed is 126" 126 X ./noexec
t_contains "saying why" "$T_ERR" "sluice: ./noexec: Permission denied"

# --- the workspace ----------------------------------------------------------------------
t_ok "exec: starts in the workspace, its HOME" X sh -c 'echo "$(pwd) $HOME"'
t_eq "cwd and HOME" "/workspace /workspace" "$T_OUT"
t_ok "exec: writes a file in the workspace" X sh -c 'echo kept >note'
t_ok "the next exec reads it" X cat note
t_eq "note" "kept" "$T_OUT"
t_eq "the workspace is on the host at $WS/NAME" "kept" "$(cat "$WS/$S1/note" 2>&1)"
t_eq "owned by the sandbox's uid, mode 0700" "$U $U 700" "$(stat -c '%u %g %a' "$WS/$S1")"
t_ok "delete $S1" S delete "$S1"
t_ok "the workspace goes with it" test ! -e "$WS/$S1"
t_ok "create $S1 again" S create "$S1" --policy "$D/pol.yaml"
t_fails "its workspace is a new one" X cat note
mkdir -p "$WS/$S3"
echo left >"$WS/$S3/note"
t_ok "create $S3 over a leftover workspace" S create "$S3" --policy "$D/pol.yaml"
t_ok "which is gone" test ! -e "$WS/$S3/note"

# --- the runner's template ----------------------------------------------------------------
# Built on the first exec, kept (a bind mount of its mount namespace's file)
# and taken again by the next: no exec copies the host's mount table.
t_eq "the runner's template is kept" "nsfs" "$(stat -f -c %T /run/sluice-sandboxes/.runner-ns 2>&1)"
# A host file the template copies (/etc/passwd, say) that another test
# running beside this one changes makes the next exec build a new one, as
# it should: then the pair (stamp, exec, stamp) is tried once more. An
# exec that never takes the template it finds fails both.
same_template() {
	local k stamp
	for k in 1 2; do
		stamp=$(cat /run/sluice-sandboxes/.runner-stamp 2>&1)
		X true || return 1
		[ "$stamp" = "$(cat /run/sluice-sandboxes/.runner-stamp 2>&1)" ] && return 0
	done
	return 1
}
t_ok "another exec takes the same template" same_template
t_ok "mounts inside" X sh -c 'wc -l </proc/self/mountinfo'
t_ok "a few dozen, however many the host has ($(wc -l </proc/self/mountinfo))" test "$T_OUT" -le 60

# --- --user, --bind, --privileged, bad input ----------------------------------------------
t_ok "--user 1000:1001" S exec --user 1000:1001 "$S1" -- id
t_eq "id" "uid=1000 gid=1001 groups=1001" "$(sed 's/([^)]*)//g' <<<"$T_OUT")"
t_ok "--user nobody (a name)" S exec --user nobody "$S1" -- id -u
t_eq "nobody's uid" "$(id -u nobody)" "$T_OUT"
t_ok "--user 1000 writes its workspace" S exec --user 1000 "$S1" -- sh -c 'echo u >u && cat u'
t_rc "--user of an unknown name" 2 S exec --user no-such-user-x "$S1" -- touch ran
t_contains "says so" "$T_ERR" "no such user"
t_rc "--user with an unknown group" 2 S exec --user 0:no-such-group-x "$S1" -- touch ran
t_ok "and nothing ran" test ! -e "$WS/$S1/ran"

mkdir -m 0777 "$D/rw"
echo host >"$D/rw/in"
chmod 644 "$D/rw/in"
t_ok "--bind SRC:DST (rw)" S exec --bind "$D/rw:/mnt/rw" "$S1" -- sh -c 'cat /mnt/rw/in && echo out >/mnt/rw/out'
t_eq "reads the host's file" "host" "$T_OUT"
t_eq "and writes back" "out" "$(cat "$D/rw/out" 2>&1)"
t_ok "--bind SRC:DST:ro reads" S exec --bind "$D/rw:/mnt/ro:ro" "$S1" -- cat /mnt/ro/in
t_rc "--bind SRC:DST:ro does not write" 2 S exec --bind "$D/rw:/mnt/ro:ro" "$S1" -- sh -c 'echo x >/mnt/ro/x'
t_contains "read-only" "$T_ERR" "Read-only"
t_ok "even a bound root-owned 0600 file is not readable" \
	S exec --bind "$D:$D:ro" "$S1" -- test -e "$D/secret"
t_fails "cat it" S exec --bind "$D:$D:ro" "$S1" -- cat "$D/secret"
t_not_contains "nothing of it printed" "$T_OUT" "$SECRET"
# A source under a directory only root may pass (as a project under
# /root): sluice binds it, as root; the files in it are read as the
# sandbox's uid may.
mkdir -m 0700 "$D/closed" && mkdir -m 0755 "$D/closed/open" && echo inner >"$D/closed/open/f" &&
	chmod 644 "$D/closed/open/f"
t_ok "--bind of a source behind a directory only root may pass" \
	S exec --bind "$D/closed/open:/mnt/o:ro" "$S1" -- cat /mnt/o/f
t_eq "its readable file" "inner" "$T_OUT"
# A link the sandbox left in its workspace must not steer where root makes
# a --bind's mount point (before the pivot the command's root is /.root):
# here, into the host directory another --bind brings in.
mkdir -m 0777 "$D/other"
t_ok "the sandbox leaves a link in its workspace" S exec "$S1" -- ln -sfn /.root/mnt/other lnk
t_fails "a --bind whose DST goes through it is refused" \
	S exec --bind "$D/other:/mnt/other" --bind "$D/rw:/workspace/lnk/planted" "$S1" -- touch ran
t_contains "saying why" "$T_ERR" "Too many levels of symbolic links"
t_ok "nothing was made in the other host directory" test ! -e "$D/other/planted"
t_ok "and nothing ran" test ! -e "$WS/$S1/ran"
t_fails "a --bind DST with .. is refused" S exec --bind "$D/rw:/mnt/../etc/x" "$S1" -- touch ran
t_ok "a --bind DST in the workspace is made, owned by the sandbox" \
	S exec --bind "$D/rw:/workspace/sub/dir:ro" "$S1" -- cat sub/dir/in
t_eq "owner" "$(stat -c %u "$WS/$S1/sub")" "$(stat -c %u "$WS/$S1")"
t_rc "--bind of a missing source" 1 S exec --bind "$D/nope:/mnt/x" "$S1" -- touch ran
t_contains "says which" "$T_ERR" "--bind \`$D/nope\`: No such file or directory"
# A --bind source is opened one part at a time, following only links root
# owns: a link a sandbox left (in its workspace, owned by its uid) must not
# bring the host's / into the next sandbox.
t_ok "the sandbox leaves a link to / in its workspace" S exec "$S1" -- ln -sfn / dist
t_fails "a --bind whose SRC goes through that link is refused" \
	S exec --bind "$WS/$S1/dist:/mnt/dist:ro" "$S1" -- ls /mnt/dist/proc
t_contains "saying why" "$T_ERR" "a symbolic link on the way is not root's"
t_fails "also as the last part of a longer SRC" \
	S exec --bind "$WS/$S1/dist/etc:/mnt/etc:ro" "$S1" -- true
ln -sfn "$D/rw" "$D/rootlink"
t_ok "a link root owns is followed" S exec --bind "$D/rootlink:/mnt/rl:ro" "$S1" -- cat /mnt/rl/in
ln -sfn "../rw" "$D/closed/rel"
t_ok "a relative one too" S exec --bind "$D/closed/rel/:/mnt/rel:ro" "$S1" -- cat /mnt/rel/in
ln -sfn loop1 "$D/loop2" && ln -sfn loop2 "$D/loop1"
t_fails "a loop of links is refused" S exec --bind "$D/loop1:/mnt/l" "$S1" -- true
t_rc "--bind without DST" 2 S exec --bind "$D/rw" "$S1" -- touch ran
t_rc "--bind with a relative DST" 2 S exec --bind "$D/rw:mnt" "$S1" -- touch ran
t_ok "nothing ran" test ! -e "$WS/$S1/ran"
t_rc "run: --bind of a missing source" 1 S run --policy "$D/pol.yaml" --name "$S4" \
	--bind "$D/nope:/mnt/x" -- true
t_ok "run: --user and --bind" S run --policy "$D/pol.yaml" --name "$S4" --user 1000 \
	--bind "$D/rw:/mnt/rw:ro" -- sh -c 'id -u; cat /mnt/rw/in'
t_eq "run: uid and file" "1000 host" "$(echo $T_OUT)"

t_ok "--privileged: today's behaviour" S exec --privileged "$S1" -- sh -c 'id -u; test -S "$1" && echo sock' sh "$BROKER_SOCK"
t_eq "root with the host's files" "0 sock" "$(echo $T_OUT)"
t_contains "warned on stderr" "$T_ERR" "warning: --privileged"
t_ok "and audited by the broker, with the caller's pid and uid" \
	bash -c "grep '\"reason\":\"privileged-exec\"' '$BROKER_AUDIT' | grep -q '\"sandbox\":\"$S1\".*\"uid\":0'"
t_rc "--privileged with --bind is misuse" 2 S exec --privileged --bind "$D:/x" "$S1" -- true
# A descriptor the caller left open (here 7, on the world directory) does
# not go in: from a directory's, openat() would reach around the mounts.
t_ok "only stdin, stdout and stderr are open in the command" \
	sh -c 'exec 7<"$1"; shift; "$@"' sh "$D" ip netns exec "$WORLD_BRK" "$BIN/sluice" \
	--socket "$BROKER_SOCK" exec "$S1" -- sh -c 'ls /proc/self/fd'
t_eq "0 1 2 (and ls's own)" "0 1 2 3" "$(echo $T_OUT)"

# --- the devices a program needs --------------------------------------------------------
t_ok "/dev: null, zero, urandom, shm, a pty of its own" X sh -c 'echo x >/dev/null &&
	head -c 4 /dev/zero | od -An -tx1 && head -c 1 /dev/urandom >/dev/null &&
	echo y >/dev/shm/t && cat /dev/shm/t &&
	python3 -c "import os; m, s = os.openpty(); print(os.ttyname(s))"'
t_eq "they work" "00 00 00 00 y /dev/pts/0" "$(echo $T_OUT)"
t_fails "no other device (the host's disks)" X sh -c 'ls /dev | grep -E "^(sd|vd|nvme|loop|mem|kmsg)"'

# --- what sluice exec gives still works inside ---------------------------------------------
t_ok "proxy variables: curl through the proxy" X curl -sf -m 10 http://echo.world.test/runner-hello
t_contains "reached the echo server" "$T_OUT" '"path": "/runner-hello"'
t_ok "the CA bundle named by SSL_CERT_FILE is there" X sh -c 'sha256sum <"$SSL_CERT_FILE"; sha256sum </etc/ssl/certs/ca-certificates.crt'
t_eq "and is the sandbox's bundle, also as the system store" \
	"$(sha256sum <"/run/sluice-sandboxes/$S1/ca-bundle.crt")
$(sha256sum <"/run/sluice-sandboxes/$S1/ca-bundle.crt")" "$T_OUT"
t_ok "resolv.conf is the sandbox's" X cat /etc/resolv.conf
t_eq "the gateway" "$(cat "/etc/netns/$S1/resolv.conf")" "$T_OUT"
t_ok "a credential placeholder works inside" X sh -c \
	'curl -sf -m 10 -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $ECHO_TOKEN" http://echo.world.test/api/runner'
t_eq "200" "200" "$T_OUT"
t_contains "the secret was injected on the way out" "$(origin /api/runner | tail -n 1)" \
	"\"Authorization\", \"Bearer $SECRET\""

# --- programs that read more of /etc: the JVM, apt -----------------------------------------
# Debian's JVM reads its configuration in /etc/java-N-openjdk (its conf/
# links there) and does not start without it; apt warns when
# /etc/apt/apt.conf.d is missing. Both are there, read-only; apt's
# credentials (auth.conf, auth.conf.d) are not.
# ro_in PATH: the mount options of the mount at PATH inside, if one is there.
ro_in() { X awk -v p="$1" '$5 == p { print $6 }' /proc/self/mountinfo; }
njava=0
for d in /etc/java-*; do
	[ -d "$d" ] || continue
	njava=$((njava + 1))
	t_ok "$d is there inside" X test -d "$d"
	t_ok "$d: its files read" X sh -c "ls -A '$d' | wc -l"
	t_eq "$d: as many entries as on the host" "$(ls -A "$d" | wc -l)" "$T_OUT"
	t_contains "$d: read-only" "$(ro_in "$d")," "ro,"
done
[ "$njava" = 0 ] && t_skip "/etc/java-* inside" "the host has none"
if command -v java >/dev/null; then
	t_ok "java -version inside" X java -version
	t_contains "the JVM starts" "$T_ERR" "version"
	# -version alone reads no java.security; this does (JDK 17 and later).
	if java -XshowSettings:security -version >/dev/null 2>&1; then
		t_ok "the JVM reads its security settings inside" X java -XshowSettings:security -version
		t_not_contains "no error loading java.security" "$T_ERR" "Error loading java.security"
	else
		t_skip "java -XshowSettings:security inside" "this JVM has no such setting"
	fi
else
	t_skip "java -version inside" "no JVM installed (command -v java)"
fi
if command -v apt-config >/dev/null; then
	t_ok "apt-config dump inside" X apt-config dump
	t_not_contains "no warning about apt.conf.d" "$T_ERR" "apt.conf.d"
	t_eq "the configuration the host's apt sees" "$(apt-config dump)" "$T_OUT"
	t_fails "/etc/apt/apt.conf.d: read-only" X touch /etc/apt/apt.conf.d/sluice-test
	# apt's writable directories in the workspace, as README's apt recipe says.
	t_ok "apt's directories in the workspace" X mkdir -p /workspace/apt-lists/partial /workspace/apt-cache/archives/partial
	t_ok "apt-get -s inside" X apt-get -s -o Dir::State::Lists=/workspace/apt-lists \
		-o Dir::Cache=/workspace/apt-cache -o Debug::NoLocking=1 -o APT::Sandbox::User=root check
	t_not_contains "no warning about apt.conf.d" "$T_ERR" "apt.conf.d"
	t_not_contains "no warning at all" "$T_ERR" "W: "
else
	t_skip "apt inside" "no apt on the host"
fi
# apt.conf.d's files are copied, not bound, and a file that may hold a
# credential is left out: an apt proxy's password in a URL, a file only its
# owner may read. The host's /etc is not touched: a private mount namespace
# binds a copy of apt.conf.d with those files over it, and the template
# (built from the namespace of the `sluice exec` that finds it stale) is
# built from that copy.
if [ -d /etc/apt/apt.conf.d ] && command -v unshare >/dev/null; then
	APTSECRET="aptpw-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
	mkdir -p "$D/aptconf"
	cp -a /etc/apt/apt.conf.d/. "$D/aptconf/"
	printf 'Acquire::http::Proxy "http://user:%s@proxy.world.test:3128/";\n' "$APTSECRET" \
		>"$D/aptconf/99sluice-test-proxy"
	printf 'Sluice::Test::Private "%s";\n' "$APTSECRET" >"$D/aptconf/99sluice-test-private"
	printf 'Sluice::Test::Visible "yes";\n' >"$D/aptconf/99sluice-test-visible"
	chmod 644 "$D/aptconf/99sluice-test-proxy" "$D/aptconf/99sluice-test-visible"
	chmod 600 "$D/aptconf/99sluice-test-private"
	# AC CMD...: `sluice exec` of CMD in a mount namespace where that copy is
	# /etc/apt/apt.conf.d.
	AC() {
		unshare -m --propagation private -- sh -c \
			'mount --bind "$1" /etc/apt/apt.conf.d && shift && exec "$@"' ac "$D/aptconf" \
			"$BIN/sluice" --socket "$BROKER_SOCK" exec "$S1" -- "$@"
	}
	t_ok "apt.conf.d's copy: files inside" AC sh -c 'ls -A /etc/apt/apt.conf.d; cat /etc/apt/apt.conf.d/*'
	t_contains "a file without a credential is there" "$T_OUT" "99sluice-test-visible"
	t_contains "and what it says" "$T_OUT" 'Sluice::Test::Visible "yes"'
	t_not_contains "the proxy's password is not" "$T_OUT" "$APTSECRET"
	t_not_contains "the file that holds it is not there" "$T_OUT" "99sluice-test-proxy"
	t_not_contains "a file only root may read is not there" "$T_OUT" "99sluice-test-private"
	t_ok "apt-config dump inside, with that copy" AC apt-config dump
	t_not_contains "apt sees no password" "$T_OUT$T_ERR" "$APTSECRET"
	t_contains "apt sees the rest" "$T_OUT" "Sluice::Test::Visible"
	# The next exec from the host's namespace sees the host's again.
	t_ok "apt.conf.d inside, from the host's namespace" X ls -A /etc/apt/apt.conf.d
	t_not_contains "the test's copy is gone" "$T_OUT" "99sluice-test-visible"
else
	t_skip "apt.conf.d's files with credentials" "no /etc/apt/apt.conf.d or no unshare"
fi
for f in /etc/apt/auth.conf /etc/apt/auth.conf.d /etc/shadow /etc/gshadow /etc/sluice /etc/ssh; do
	t_fails "$f is not there inside" X test -e "$f"
done

t_done
