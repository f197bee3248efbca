#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sends raw bytes to HOST:PORT and prints what comes back (bounded).

usage: rawhttp.py HOST PORT PAYLOAD [--hold SECONDS] [--slow SECONDS]
PAYLOAD uses Python escapes (\\r\\n, \\x00). --hold keeps the connection open
without sending PAYLOAD's end... see below:
  --slow S   send PAYLOAD one byte per S seconds (slow client)
  --hold S   after sending, wait up to S seconds for the answer (default 5)
  --after F  once connected, send only when file F exists (at most 10 s)
Exit 0 when something came back, 3 when the peer closed without a byte."""
import os
import socket
import sys
import time


def main():
    # Tests send only inside namespaces they made (named ones, under
    # /run/netns): refuse to run anywhere else.
    me = os.stat("/proc/self/ns/net").st_ino
    named = []
    if os.path.isdir("/run/netns"):
        for n in os.listdir("/run/netns"):
            try:
                named.append(os.stat(os.path.join("/run/netns", n)).st_ino)
            except OSError:
                pass
    if me not in named:
        sys.stderr.write("rawhttp: refusing to run in the root network namespace\n")
        return 2
    host, port, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    hold, slow, after = 5.0, 0.0, None
    args = sys.argv[4:]
    while args:
        if args[0] == "--hold":
            hold = float(args[1])
        elif args[0] == "--slow":
            slow = float(args[1])
        elif args[0] == "--after":
            after = args[1]
        args = args[2:]
    data = payload.encode("latin-1").decode("unicode_escape").encode("latin-1")
    s = socket.create_connection((host, port), timeout=10)
    if after:
        for _ in range(200):
            if os.path.exists(after):
                break
            time.sleep(0.05)
        else:
            sys.stderr.write("rawhttp: %s never appeared\n" % after)
            return 4
    if slow:
        for b in data:
            try:
                s.sendall(bytes([b]))
            except OSError:
                break
            time.sleep(slow)
    else:
        s.sendall(data)
    s.settimeout(hold)
    got = b""
    deadline = time.time() + hold
    while time.time() < deadline and len(got) < 1 << 20:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    sys.stdout.write(got.decode("latin-1"))
    return 0 if got else 3


if __name__ == "__main__":
    sys.exit(main())
