#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Opens COUNT CONNECT tunnels through an explicit proxy and holds them idle.

usage: tunnels.py PROXY_HOST PROXY_PORT TARGET_HOST TARGET_PORT COUNT
                  --ready FILE --release FILE [--hold-max SECONDS]
                  [--trickle SECONDS] [--tls CAFILE]

Each tunnel is a CONNECT TARGET_HOST:TARGET_PORT that must be answered 200;
then one small GET goes through it to the server (blast) and its answer is
read whole, so that every tunnel has carried data both ways before it idles.
When all are open (or the time budget, 120 s, is spent) it writes one JSON
object to --ready FILE:
  {"wanted": N, "connected": N, "established": N, "get_ok": N,
   "errors": {"REASON": COUNT, ...}, "open_seconds": S}
and then holds every tunnel idle until FILE --release exists (checked every
0.1 s, at most --hold-max seconds, default 120), closes them all and exits
0 if every tunnel was established and carried its GET, 1 otherwise.

With --trickle SECONDS the tunnels are not idle: each carries another small
GET every SECONDS (spread over the period), so that each is active as a
long-poll or a chat connection is; a GET that fails is counted in the
exit status (1) and on stderr. With --tls CAFILE each tunnel carries TLS
(verified against CAFILE, for TARGET_HOST), as HTTPS through a proxy does:
the broker splices such a tunnel, where it reads plain HTTP in one."""
import json
import os
import resource
import socket
import ssl
import sys
import time

OPEN_BUDGET = 120.0
IO_TIMEOUT = 10.0
MAX_HEAD = 16384


def in_named_netns():
    """The bench sends only inside namespaces it made (named under /run/netns)."""
    me = os.stat("/proc/self/ns/net")
    try:
        names = os.listdir("/run/netns")
    except OSError:
        return False
    for n in names:
        try:
            st = os.stat(os.path.join("/run/netns", n))
        except OSError:
            continue
        if (st.st_ino, st.st_dev) == (me.st_ino, me.st_dev):
            return True
    return False


def read_head(s):
    """Reads one response head. The peer sends nothing after it until we
    speak again, so what follows the head in the buffer ("rest") can only be
    body bytes. Returns (status, head, rest)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEAD:
            raise ValueError("head-too-large")
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("eof-in-head")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    line = head.split(b"\r\n", 1)[0].split()
    if len(line) < 2 or not line[0].startswith(b"HTTP/1."):
        raise ValueError("bad-status-line")
    return int(line[1]), head, rest


def content_length(head):
    for h in head.split(b"\r\n")[1:]:
        k, _, v = h.partition(b":")
        if k.strip().lower() == b"content-length":
            return int(v.strip())
    raise ValueError("no-content-length")


def get(s, auth):
    """One small GET through an open tunnel, its answer read whole."""
    s.sendall(("GET /t HTTP/1.1\r\nHost: %s\r\n\r\n" % auth).encode())
    status, head, rest = read_head(s)
    want = content_length(head)
    while len(rest) < want:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("eof-in-body")
        rest += chunk
    if status != 200 or len(rest) != want:
        raise ValueError("get-status-%d" % status)


def open_tunnel(proxy, target_host, target_port, counts, tls=None):
    s = socket.create_connection(proxy, timeout=IO_TIMEOUT)
    counts["connected"] += 1
    auth = "%s:%d" % (target_host, target_port)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (auth, auth)).encode())
    status, _, rest = read_head(s)
    if status != 200:
        s.close()
        raise ValueError("connect-status-%d" % status)
    if rest:
        s.close()
        raise ValueError("bytes-after-200")
    counts["established"] += 1
    if tls:
        s = tls.wrap_socket(s, server_hostname=target_host)
    get(s, auth)
    counts["get_ok"] += 1
    return s


def main():
    args = sys.argv[1:]
    opts = {"--ready": None, "--release": None, "--hold-max": "120", "--trickle": "0",
            "--tls": None}
    pos = []
    while args:
        if args[0] in opts and len(args) > 1:
            opts[args[0]] = args[1]
            args = args[2:]
        else:
            pos.append(args.pop(0))
    if len(pos) != 5 or not opts["--ready"] or not opts["--release"]:
        sys.stderr.write(__doc__)
        return 2
    if not in_named_netns():
        sys.stderr.write("tunnels: refusing to run in the root network namespace\n")
        return 2
    proxy = (pos[0], int(pos[1]))
    target_host, target_port, count = pos[2], int(pos[3]), int(pos[4])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want_fds = count + 64
    if soft < want_fds:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(want_fds, soft), hard), hard))

    tls = ssl.create_default_context(cafile=opts["--tls"]) if opts["--tls"] else None
    counts = {"wanted": count, "connected": 0, "established": 0, "get_ok": 0}
    errors = {}
    socks = []
    t0 = time.monotonic()
    for _ in range(count):
        if time.monotonic() - t0 > OPEN_BUDGET:
            errors["open-budget-exceeded"] = errors.get("open-budget-exceeded", 0) + 1
            break
        try:
            socks.append(open_tunnel(proxy, target_host, target_port, counts, tls))
        except (OSError, ValueError) as e:
            key = str(e) if isinstance(e, ValueError) else type(e).__name__
            if isinstance(e, ConnectionError) and str(e):
                key = str(e)
            errors[key] = errors.get(key, 0) + 1
    counts["errors"] = errors
    counts["open_seconds"] = round(time.monotonic() - t0, 2)
    tmp = opts["--ready"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(counts, f)
        f.write("\n")
    os.rename(tmp, opts["--ready"])

    deadline = time.monotonic() + float(opts["--hold-max"])
    period = float(opts["--trickle"])
    auth = "%s:%d" % (target_host, target_port)
    failed = 0
    i = 0
    next_check = 0.0
    while time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_check:
            if os.path.exists(opts["--release"]):
                break
            next_check = now + 0.1
        if period <= 0 or not socks:
            time.sleep(0.1)
            continue
        # One tunnel's GET, the next one's period / len(socks) later.
        t_next = now + period / len(socks)
        try:
            get(socks[i], auth)
        except (OSError, ValueError):
            failed += 1
        i = (i + 1) % len(socks)
        pause = t_next - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    for s in socks:
        s.close()
    if failed:
        sys.stderr.write("tunnels: %d trickled GETs failed\n" % failed)
    ok = counts["get_ok"] == count and failed == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
