#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# decoy.py - records every connection or datagram that reaches an address nobody should reach.
#
#   decoy.py --log FILE --ready FILE [--tcp ADDR:PORT ...] [--udp ADDR:PORT ...]
#   ADDR: 10.0.0.5 or [fd00::5]
#
# Each TCP connection and each UDP datagram appends one line
#   HIT <tcp|udp> <addr> <port> <peer-addr>:<peer-port>
# to --log (one write(2) on an O_APPEND fd, so several decoy processes may
# share the file). The line is written before anything is answered, so a
# client that saw the answer can read the hit at once. A TCP hit is then
# answered "HTTP/1.0 200 OK\r\n\r\nDECOY\n" and closed, a UDP hit "DECOY\n":
# a leak must look like success to the code under test, never like a
# timeout it might treat as "blocked".
#
# --ready FILE is written once every socket is bound (and listening).

import argparse
import os
import selectors
import socket
import sys
import threading
import time

ANSWER_TCP = b"HTTP/1.0 200 OK\r\n\r\nDECOY\n"
ANSWER_UDP = b"DECOY\n"
DRAIN_SECONDS = 2.0
DRAIN_BYTES = 64 * 1024
MAX_THREADS = 64


def parse(spec):
    addr, _, port = spec.rpartition(":")
    addr = addr.strip("[]")
    if not addr or not port.isdigit():
        raise SystemExit("decoy.py: bad address %r" % spec)
    return addr, int(port)


def peer_str(peer):
    return "[%s]:%d" % peer[:2] if ":" in peer[0] else "%s:%d" % peer[:2]


class Recorder:
    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def hit(self, proto, addr, port, peer):
        line = "HIT %s %s %d %s\n" % (proto, addr, port, peer_str(peer))
        os.write(self.fd, line.encode())


def answer_tcp(conn):
    """Answer, then read what the client sent (bounded) before closing, so
    that unread data does not turn our answer into a reset."""
    try:
        conn.settimeout(DRAIN_SECONDS)
        conn.sendall(ANSWER_TCP)
        conn.shutdown(socket.SHUT_WR)
        got = 0
        deadline = time.monotonic() + DRAIN_SECONDS
        while got < DRAIN_BYTES and time.monotonic() < deadline:
            data = conn.recv(4096)
            if not data:
                break
            got += len(data)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--tcp", action="append", default=[])
    ap.add_argument("--udp", action="append", default=[])
    a = ap.parse_args()

    rec = Recorder(a.log)
    sel = selectors.DefaultSelector()
    for kind, specs in (("tcp", a.tcp), ("udp", a.udp)):
        for spec in specs:
            addr, port = parse(spec)
            fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
            typ = socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM
            s = socket.socket(fam, typ)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((addr, port))
            if kind == "tcp":
                s.listen(128)
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, (kind, addr, port))

    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(tmp, a.ready)

    slots = threading.BoundedSemaphore(MAX_THREADS)

    def worker(conn):
        try:
            answer_tcp(conn)
        finally:
            slots.release()

    while True:
        for key, _ in sel.select():
            kind, addr, port = key.data
            s = key.fileobj
            try:
                if kind == "tcp":
                    conn, peer = s.accept()
                    conn.setblocking(True)
                    rec.hit("tcp", addr, port, peer)
                    if slots.acquire(blocking=False):
                        threading.Thread(target=worker, args=(conn,),
                                         daemon=True).start()
                    else:
                        # Too many at once: answer without draining.
                        try:
                            conn.settimeout(DRAIN_SECONDS)
                            conn.sendall(ANSWER_TCP)
                        except OSError:
                            pass
                        conn.close()
                else:
                    _, peer = s.recvfrom(65535)
                    rec.hit("udp", addr, port, peer)
                    try:
                        s.sendto(ANSWER_UDP, peer)
                    except OSError:
                        pass
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as e:
                print("decoy.py: %s" % e, file=sys.stderr)


if __name__ == "__main__":
    main()
