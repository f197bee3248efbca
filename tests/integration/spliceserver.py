#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# spliceserver.py - an upstream for test_splice.sh whose every byte on the wire is known.
#
#   spliceserver.py ADDR PORT READY-FILE
#
# HTTP/1.1, keep-alive, responses written raw (no Date or Server header), so
# that a test can predict the exact bytes and audit counts:
#   GET  /cl/N            200, Content-Length N, body pattern(N)
#   GET  /chunked         200, chunked: odd sizes, extensions, a trailer
#   GET  /late/N          /cl/N's answer; 0.3 s later a second answer nobody asked for
#   GET  /cut/N/M         Content-Length N, M bytes of it, then close
#   GET  /smuggle/N       /cl/N's answer, then a second answer nobody asked for
#                         ("HTTP/1.1 200 OK", Content-Length 5, "EVIL!") in the same write
#   GET  /chunkcut        chunked, one chunk of 100000 announced, 50000 sent, close
#   GET  /reflect/N       Content-Length, N filler bytes, then the request's
#                         Authorization value, then 1000 more
#   POST /sum             the request body (Content-Length or chunked) read and
#                         answered as "LEN SHA256"
#   POST /early           413 before the body is read, then a reset (SO_LINGER 0)
# pattern(N) is the first N bytes of b"0123456789abcdefghijklmnopqrstuv" repeated.
import hashlib
import socket
import struct
import sys
import threading
import time

PAT = b"0123456789abcdefghijklmnopqrstuv"
CHUNKS = [(1, b""), (17, b";ext=1"), (65537, b""), (100003, b';a="b c";d'), (3, b""),
          (200001, b";x"), (7, b"")]


def pattern(n):
    return (PAT * (n // len(PAT) + 1))[:n]


MIB = pattern(1 << 20)


def chunked_raw():
    out, off = [], 0
    for size, ext in CHUNKS:
        out.append(b"%x%s\r\n" % (size, ext) + pattern(off + size)[off:] + b"\r\n")
        off += size
    out.append(b"0\r\nX-Trailer: t\r\n\r\n")
    return b"".join(out)


def send_stream(s, n, block):
    """n bytes of block repeated (len(block) a multiple of len(PAT))."""
    while n > 0:
        k = min(n, len(block))
        s.sendall(block[:k])
        n -= k


def head(n, extra=b""):
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n" % (n, extra)


class Conn:
    def __init__(self, s):
        self.s, self.buf = s, b""

    def fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > 65536:
                raise ValueError("line too long")
            self.fill()
        l, self.buf = self.buf.split(b"\r\n", 1)
        return l

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        d, self.buf = self.buf[:n], self.buf[n:]
        return d


def body_of(c, hdrs):
    if hdrs.get(b"transfer-encoding", b"").lower() == b"chunked":
        h = hashlib.sha256()
        n = 0
        for _ in range(1 << 20):
            size = int(c.line().split(b";")[0], 16)
            if size == 0:
                while c.line():
                    pass
                return n, h.hexdigest()
            d = c.take(size)
            h.update(d)
            n += size
            if c.take(2) != b"\r\n":
                raise ValueError("chunk without CRLF")
        raise ValueError("too many chunks")
    n = int(hdrs.get(b"content-length", b"0"))
    h = hashlib.sha256()
    left = n
    while left:
        d = c.take(min(left, 65536))
        h.update(d)
        left -= len(d)
    return n, h.hexdigest()


def serve(s):
    c = Conn(s)
    try:
        while True:
            req = c.line()
            hdrs = {}
            # The head's size as received (lines end in CRLF): what the
            # broker counts as sent upstream before the body.
            hlen = len(req) + 2
            while True:
                l = c.line()
                hlen += len(l) + 2
                if not l:
                    break
                k, v = l.split(b":", 1)
                hdrs[k.strip().lower()] = v.strip()
            method, path = req.split(b" ")[:2]
            path = path.decode()
            if HEADLOG:
                with open(HEADLOG, "a") as f:
                    f.write("%s %d\n" % (path, hlen))
            if method == b"POST" and path == "/early":
                # Answered before the body has come, then reset: the
                # body's sender meets an error next.
                s.sendall(b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n"
                          b"Connection: close\r\n\r\n")
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            n, digest = body_of(c, hdrs)
            if method == b"POST" and path == "/sum":
                b = b"%d %s" % (n, digest.encode())
                s.sendall(head(len(b)) + b)
            elif path.startswith("/cl/"):
                k = int(path[4:])
                s.sendall(head(k))
                send_stream(s, k, MIB)
            elif path.startswith("/smuggle/"):
                k = int(path[9:])
                s.sendall(head(k) + pattern(k) + head(5) + b"EVIL!")
            elif path.startswith("/late/"):
                k = int(path[6:])
                s.sendall(head(k) + pattern(k))
                time.sleep(0.3)
                s.sendall(head(5) + b"EVIL!")
            elif path == "/chunked":
                s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_raw())
            elif path.startswith("/cut/"):
                k, m = (int(x) for x in path[5:].split("/"))
                s.sendall(head(k) + pattern(m))
                return
            elif path == "/chunkcut":
                s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % 100000
                          + pattern(50000))
                return
            elif path.startswith("/reflect/"):
                a = hdrs.get(b"authorization", b"")
                k = int(path[9:])
                s.sendall(head(k + len(a) + 1000))
                send_stream(s, k, b"f" * (1 << 20))
                s.sendall(a + b"g" * 1000)
            else:
                s.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    except (EOFError, OSError, ValueError):
        pass
    finally:
        s.close()


HEADLOG = None


def main():
    global HEADLOG
    if len(sys.argv) > 4:
        HEADLOG = sys.argv[4]
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((sys.argv[1], int(sys.argv[2])))
    ls.listen(64)
    open(sys.argv[3], "w").write("ready\n")
    while True:
        s, _ = ls.accept()
        threading.Thread(target=serve, args=(s,), daemon=True).start()


if __name__ == "__main__":
    main()
