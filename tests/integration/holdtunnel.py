#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# holdtunnel.py - an open CONNECT tunnel across a policy change, for test_update.sh.
#
#   holdtunnel.py PROXY-ADDR PROXY-PORT HOST CA READY GO
#   holdtunnel.py PROXY-ADDR PROXY-PORT HOST - READY GO --plain TAG
#
# Opens a CONNECT tunnel to HOST:443 through the explicit proxy, speaks TLS
# in it (verified against CA: the broker splices, so it is the origin's
# certificate) and makes one keep-alive request; then writes "open" to the
# file READY and waits (at most 30 s) for the file GO to exist, and makes a
# second request on the same connection. Prints "open" then "alive" when the
# second got its answer, "closed" when the connection was closed or reset
# under it. With --plain, the two requests are plain HTTP in absolute form
# (/hold/TAG/1 and /hold/TAG/2) on one keep-alive connection to the proxy
# (no tunnel), and a second answer that is not 200 prints "refused STATUS
# REASON" (X-Sluice-Reason).
# Refuses to run in the root network namespace (see rawhttp.py).
import os
import socket
import ssl
import sys
import time


def in_test_netns():
    me = os.stat("/proc/self/ns/net").st_ino
    for n in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
        try:
            if os.stat(os.path.join("/run/netns", n)).st_ino == me:
                return True
        except OSError:
            pass
    return False


def answer(s, host, target):
    """One GET of @target on @s: "STATUS REASON" (X-Sluice-Reason, or
    empty) once a whole answer came back, None when it did not."""
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, host)).encode())
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(65536)
        if not chunk:
            return None
        got += chunk
    head, body = got.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    status = lines[0].split(b" ")[1].decode("latin-1") if len(lines[0].split(b" ")) > 1 else "?"
    n, reason = 0, ""
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            n = int(value)
        elif name.lower() == b"x-sluice-reason":
            reason = value.strip().decode("latin-1")
    while len(body) < n:
        chunk = s.recv(65536)
        if not chunk:
            return None
        body += chunk
    return (status + " " + reason).strip()


def request(s, host, path):
    """One GET on @s; True when a whole 200 answer came back."""
    return answer(s, host, path) == "200"


def hold(ready, go):
    """Says "open" (on stdout and in READY), then waits at most 30 s for GO."""
    print("open", flush=True)
    with open(ready, "w") as f:
        f.write("open\n")
    deadline = time.time() + 30
    while not os.path.exists(go) and time.time() < deadline:
        time.sleep(0.05)


def plain(paddr, pport, host, ready, go, tag):
    """Two absolute-form GETs on one keep-alive connection to the proxy."""
    s = socket.create_connection((paddr, int(pport)), timeout=10)
    first = answer(s, host, "http://%s/hold/%s/1" % (host, tag))
    if first != "200":
        print("refused %s" % first)
        return 1
    hold(ready, go)
    try:
        second = answer(s, host, "http://%s/hold/%s/2" % (host, tag))
    except OSError:
        second = None
    print("closed" if second is None else "alive" if second == "200" else "refused " + second)
    return 0


def main():
    if not in_test_netns():
        sys.stderr.write("holdtunnel: refusing to run in the root network namespace\n")
        return 2
    paddr, pport, host, ca, ready, go = sys.argv[1:7]
    if len(sys.argv) == 9 and sys.argv[7] == "--plain":
        return plain(paddr, pport, host, ready, go, sys.argv[8])
    raw = socket.create_connection((paddr, int(pport)), timeout=10)
    raw.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host, host)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = raw.recv(1)
        if not chunk:
            print("refused")
            return 1
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        print("refused " + head.split(b"\r\n")[0].decode("latin-1"))
        return 1
    ctx = ssl.create_default_context(cafile=ca)
    s = ctx.wrap_socket(raw, server_hostname=host)
    if not request(s, host, "/hold/1"):
        print("refused")
        return 1
    hold(ready, go)
    try:
        print("alive" if request(s, host, "/hold/2") else "closed")
    except (OSError, ssl.SSLError):
        print("closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
