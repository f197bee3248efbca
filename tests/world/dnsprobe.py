#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# dnsprobe.py - times a resolver's answers, one query at a time (test world
#               only; standard library only), e.g. while another sandbox
#               floods it (tests/world/dnsflood.c).
#
# Usage: dnsprobe.py --server ADDR [--port N] [--count N] [--interval S]
#                    [--timeout S] [--name NAME]
#
# COUNT queries (A for NAME), one every INTERVAL seconds, each from a new
# socket (a new source port, so any of the broker's SO_REUSEPORT sockets),
# each waited for at most TIMEOUT seconds. Prints one line
#   answered A asked N worst_ms W median_ms M
# where an unanswered query counts as TIMEOUT. Exit 0 when it ran, 1 on bad
# usage.

import argparse
import socket
import struct
import sys
import time


def query(qid, name):
    m = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        m += bytes([len(label)]) + label.encode("ascii")
    return m + b"\0" + struct.pack(">HH", 1, 1)


def ask(a, qid):
    """Seconds until the answer to @qid came, or None."""
    t0 = time.monotonic()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((a.server, a.port))
        s.send(query(qid, a.name))
        while True:
            left = a.timeout - (time.monotonic() - t0)
            if left <= 0:
                return None
            s.settimeout(left)
            try:
                r = s.recv(4096)
            except (socket.timeout, ConnectionRefusedError):
                return None
            if len(r) >= 4 and struct.unpack(">H", r[:2])[0] == qid:
                return time.monotonic() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--port", type=int, default=53)
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--interval", type=float, default=0.05)
    p.add_argument("--timeout", type=float, default=2.0)
    p.add_argument("--name", default="echo.world.test")
    a = p.parse_args()
    if not 1 <= a.count <= 10000 or not 0 < a.timeout <= 30 or \
            not 0 <= a.interval <= 10:
        print("dnsprobe: bad arguments", file=sys.stderr)
        return 1
    lat = []
    answered = 0
    for i in range(a.count):
        t0 = time.monotonic()
        got = ask(a, 0x4000 + i)
        answered += got is not None
        lat.append(a.timeout if got is None else got)
        rest = a.interval - (time.monotonic() - t0)
        if rest > 0 and i + 1 < a.count:
            time.sleep(rest)
    lat.sort()
    print("answered %d asked %d worst_ms %d median_ms %d" % (
        answered, a.count, round(lat[-1] * 1000),
        round(lat[len(lat) // 2] * 1000)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
