# SPDX-License-Identifier: MIT
"""tlstunnel.py - pieces of test_splice.sh's inline clients, which run only
inside the test world's namespaces.

tls_tunnel(PROXY, HOST, CA): connects to PROXY (address, port), asks for a
tunnel to HOST:443, and speaks TLS in it verified against CA (the broker
splices: the certificate is the origin's). Returns the TLS socket; exits
with a message when the proxy refuses or closes.

read_answer(F): one HTTP/1.1 answer with a Content-Length from the binary
file F: (status, body)."""
import socket
import ssl
import sys


def tls_tunnel(proxy, host, ca):
    s = socket.create_connection(proxy, timeout=10)
    s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(), host.encode()))
    h = b""
    while b"\r\n\r\n" not in h:
        d = s.recv(1)
        if not d:
            sys.exit("proxy closed")
        h += d
    if b" 200 " not in h.split(b"\r\n")[0]:
        sys.exit("CONNECT: %r" % h)
    return ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname=host)


def read_answer(f):
    status = f.readline().split()[1].decode()
    n = 0
    while True:
        line = f.readline().strip()
        if not line:
            break
        k, _, v = line.partition(b":")
        if k.lower() == b"content-length":
            n = int(v)
    return status, f.read(n)
