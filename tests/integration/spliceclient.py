#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# spliceclient.py - raw HTTP/1.1 exchanges through the explicit proxy for test_splice.sh.
#
#   spliceclient.py PROXY-ADDR PROXY-PORT ORIGIN MODE
#   MODE chunked-raw: GET /chunked; prints "same" when the bytes that came
#        back are exactly what spliceserver.py sent, else what differed
#   MODE chunked-post: POST /sum with a chunked body of odd sizes and
#        extensions; prints the answer's body ("LEN SHA256") and the expected one
#   MODE pipelined: POST /sum (Content-Length 300000) and GET /cl/20000 in
#        one write; prints both answers' status and body length, the /sum
#        answer's body and the expected one
# Refuses to run in the root network namespace (see rawhttp.py).
import hashlib
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spliceserver import chunked_raw, pattern  # noqa: E402


def in_test_netns():
    me = os.stat("/proc/self/ns/net").st_ino
    for n in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
        try:
            if os.stat(os.path.join("/run/netns", n)).st_ino == me:
                return True
        except OSError:
            pass
    return False


def read_response(s, buf):
    """One response with a Content-Length body: (status, body, rest)."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise EOFError("head")
        buf += d
    h, buf = buf.split(b"\r\n\r\n", 1)
    lines = h.split(b"\r\n")
    status = int(lines[0].split()[1])
    n = 0
    for l in lines[1:]:
        k, v = l.split(b":", 1)
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(buf) < n:
        d = s.recv(65536)
        if not d:
            raise EOFError("body")
        buf += d
    return status, buf[:n], buf[n:]


def main():
    if not in_test_netns():
        sys.stderr.write("spliceclient: refusing to run in the root network namespace\n")
        return 2
    host, port, origin, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    s = socket.create_connection((host, port), timeout=20)
    if mode == "chunked-raw":
        s.sendall(b"GET http://%s/chunked HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                  % (origin.encode(), origin.encode()))
        got = b""
        while len(got) < 1 << 22:
            d = s.recv(65536)
            if not d:
                break
            got += d
        want = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_raw()
        # The proxy relays the origin's head and body as they came.
        print("same" if got == want else "differ: got %d bytes, want %d" % (len(got), len(want)))
    elif mode == "chunked-post":
        sizes = [(5, b""), (70001, b";e=1"), (1, b""), (131071, b';q="x y"'), (9, b"")]
        out, off = [], 0
        for size, ext in sizes:
            out.append(b"%x%s\r\n" % (size, ext) + pattern(off + size)[off:] + b"\r\n")
            off += size
        out.append(b"0\r\nX-T: 1\r\n\r\n")
        s.sendall(b"POST http://%s/sum HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
                  % (origin.encode(), origin.encode()) + b"".join(out))
        st, body, _ = read_response(s, b"")
        print(st, body.decode())
        print(200, "%d %s" % (off, hashlib.sha256(pattern(off)).hexdigest()))
    elif mode == "pipelined":
        n = 300000
        s.sendall(b"POST http://%s/sum HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n"
                  % (origin.encode(), origin.encode(), n) + pattern(n) +
                  b"GET http://%s/cl/20000 HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                  % (origin.encode(), origin.encode()))
        st1, b1, rest = read_response(s, b"")
        st2, b2, _ = read_response(s, rest)
        print(st1, len(b1), st2, len(b2), b2 == pattern(20000))
        print(b1.decode())
        print("%d %s" % (n, hashlib.sha256(pattern(n)).hexdigest()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
