#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""drip.py - small segments against a side that does not read, for test_splice.sh.

A pipe holds 16 buffers, one per segment spliced into it: a peer that sends
small segments to a side that does not read fills it long before its 64 KiB.
Every wait is bounded; every socket is closed on exit.

  drip.py serve HOST PORT MODE TOTAL STALL OUT
      one connection at a time (for 60 s at most). MODE "down": sends TOTAL
      bytes in 100-byte segments 1 ms apart, then waits for the peer's EOF.
      MODE "up": a 1 KiB receive buffer, reads nothing for STALL seconds,
      then reads until EOF and writes the count to OUT. MODE "http": reads
      a request head, answers 200 with a Content-Length of TOTAL, and sends
      the body as "down" does.
  drip.py down PROXY PORT TARGET TOTAL STALL
      CONNECT TARGET (host:port) through the proxy with a 1 KiB receive
      buffer, reads the answer's head, reads nothing for STALL seconds, then
      reads until TOTAL bytes came (10 s at most) and prints the count.
  drip.py get PROXY PORT URL TOTAL STALL
      the same for a GET of URL (absolute) and its body of TOTAL bytes.
  drip.py up PROXY PORT TARGET TOTAL
      CONNECT TARGET, then sends TOTAL bytes in 100-byte segments 1 ms apart
      (for 20 s at most), shuts its write side and waits for the close.
"""
import socket
import sys
import time

PIECE = 100


def small_rcvbuf(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)


def drip_out(s, total, limit):
    """Sends @total bytes in PIECE-byte segments 1 ms apart; returns the count."""
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sent, end = 0, time.monotonic() + limit
    while sent < total and time.monotonic() < end:
        try:
            sent += s.send(b"d" * min(PIECE, total - sent), socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
        time.sleep(0.001)
    return sent


def read_until(s, total, limit):
    got, end = 0, time.monotonic() + limit
    s.settimeout(1)
    while got < total and time.monotonic() < end:
        try:
            k = s.recv(65536)
        except socket.timeout:
            continue
        if not k:
            break
        got += len(k)
    return got


def head(s, limit=5):
    """Reads an answer's head byte by byte (nothing past it)."""
    h, end = b"", time.monotonic() + limit
    s.settimeout(limit)
    while b"\r\n\r\n" not in h and time.monotonic() < end:
        k = s.recv(1)
        if not k:
            break
        h += k
    return h.split(b"\r\n")[0].decode("latin-1")


def through(proxy, port, request, rcvbuf):
    s = socket.socket()
    if rcvbuf:
        small_rcvbuf(s)
    s.settimeout(5)
    s.connect((proxy, int(port)))
    s.sendall(request)
    return s


def serve(host, port, mode, total, stall, out):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if mode == "up":
        small_rcvbuf(ls)  # accepted sockets inherit it
    ls.bind((host, int(port)))
    ls.listen(4)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        ls.settimeout(1)
        try:
            c = ls.accept()[0]
        except socket.timeout:
            continue
        with c:
            if mode == "http":
                c.settimeout(5)
                req = b""
                while b"\r\n\r\n" not in req and len(req) < 65536:
                    k = c.recv(4096)
                    if not k:
                        break
                    req += k
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % total)
            if mode in ("down", "http"):
                drip_out(c, total, 20)
                read_until(c, 1 << 30, 20)  # until the peer's EOF
            else:
                time.sleep(stall)
                n = read_until(c, 1 << 30, 20)
                with open(out, "w") as f:
                    f.write("%d\n" % n)


def main():
    a = sys.argv[1:]
    if a[0] == "serve":
        serve(a[1], a[2], a[3], int(a[4]), float(a[5]), a[6])
    elif a[0] in ("down", "get"):
        total, stall = int(a[4]), float(a[5])
        if a[0] == "down":
            req = b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a[3].encode(), a[3].encode())
        else:
            host = a[3].split("/")[2].encode()
            req = b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a[3].encode(), host)
        with through(a[1], a[2], req, True) as s:
            print(head(s), flush=True)
            time.sleep(stall)
            print(read_until(s, total, 10), flush=True)
    elif a[0] == "up":
        req = b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a[3].encode(), a[3].encode())
        with through(a[1], a[2], req, False) as s:
            print(head(s), flush=True)
            print(drip_out(s, int(a[4]), 20), flush=True)
            s.shutdown(socket.SHUT_WR)
            read_until(s, 1 << 30, 10)


if __name__ == "__main__":
    main()
