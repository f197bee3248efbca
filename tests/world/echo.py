#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# echo.py - the test world's upstream: HTTP/1.1 + HTTPS echo and an SSH-like banner server.
#
# One process serves every listen spec given on the command line, each in its
# own thread; connections are handled one thread each (ThreadingHTTPServer).
#
#   echo.py --log FILE --ready FILE [--cert C --key K] [--bad-cert C --bad-key K]
#           [--idle-timeout SECONDS] [--files DIR] --listen KIND:ADDR:PORT ...
#   KIND: http | https (test-CA cert) | https-bad (self-signed cert) | banner
#   ADDR: 11.0.2.10 or [2600:1::10]
#
# HTTP behaviour (any method, keep-alive, Content-Length on every response
# that may carry a body):
#   /redirect?to=URL[&code=3xx]  that code (default 302) with Location: URL
#   /status/N                    status N (200..599)
#   /interim/N                   an interim response N (100..199 but 101),
#                                then the 200 answer, on the same connection
#   /bytes/N                     N bytes of 'x' (N <= 1 GiB), streamed
#   /files/PATH                  with --files DIR: GET or HEAD of DIR/PATH (a
#                                directory: its index.html, else index.json),
#                                typed by extension, 404 if absent; what a
#                                client that parses its answer needs (a
#                                package index, a registry, a git repository)
#   .../late                     200, then 0.3 s later a second answer
#                                nobody asked for (Content-Length 5, EVIL!)
#   anything else                200
# The body of every non-/bytes answer is JSON:
#   {"server": "ADDR:PORT", "scheme", "peer", "method", "path", "version",
#    "headers": [[name, value], ...] (received order), "body_len",
#    "body_head" (first 4 KiB of the body, latin-1)}
# with v6 servers written "[ADDR]:PORT". The same object is appended as one
# JSON line to --log *before* the answer is sent, so a client that has its
# answer can read the log at once.
#
# The banner server sends "SSH-2.0-sluice-world\r\n" and echoes its input.
#
# A connection idle for --idle-timeout seconds (default 60) is closed by the
# server: a short one lets a test watch what a proxy does when an upstream
# it kept alive closes its side.
#
# --ready FILE is written once every socket is bound and listening: from then
# on the kernel accepts connections. A bind failure exits non-zero.

import argparse
import json
import os
import socket
import socketserver
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MAX_BYTES = 1 << 30
BODY_HEAD = 4096
CHUNK = 64 * 1024
IDLE_TIMEOUT = 60
BANNER = b"SSH-2.0-sluice-world\r\n"
FILE_TYPES = {".html": "text/html", ".json": "application/json",
              ".txt": "text/plain", ".tgz": "application/octet-stream"}
QUIET_ERRORS = (ConnectionError, ssl.SSLError, TimeoutError, socket.timeout,
                BrokenPipeError)


class BadRequest(Exception):
    pass


class Log:
    """One JSON line per record, one write(2) per line on an O_APPEND fd."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.lock = threading.Lock()

    def write(self, obj):
        line = (json.dumps(obj) + "\n").encode()
        with self.lock:
            os.write(self.fd, line)


def label(addr, port):
    return "[%s]:%d" % (addr, port) if ":" in addr else "%s:%d" % (addr, port)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sluice-world-echo"
    sys_version = ""
    timeout = IDLE_TIMEOUT

    def log_message(self, fmt, *args):
        pass

    def version_string(self):
        return self.server_version

    def __getattr__(self, name):
        # Any method at all: do_GET, do_PROPFIND, do_BREW ...
        if name.startswith("do_"):
            return self.handle_any
        raise AttributeError(name)

    # -- request body ---------------------------------------------------
    def _take(self, n, head):
        """Read exactly n bytes, keep at most BODY_HEAD of them in head."""
        while n > 0:
            data = self.rfile.read(min(n, CHUNK))
            if not data:
                raise BadRequest("body ended early")
            room = BODY_HEAD - len(head)
            if room > 0:
                head += data[:room]
            n -= len(data)
        return head

    def read_body(self):
        te = ",".join(self.headers.get_all("Transfer-Encoding") or [])
        cl = self.headers.get_all("Content-Length") or []
        head = bytearray()
        if te:
            codings = [t.strip().lower() for t in te.split(",") if t.strip()]
            if not codings or codings[-1] != "chunked":
                raise BadRequest("unsupported transfer-encoding")
            total = 0
            for _ in range(1 << 20):            # bounded number of chunks
                line = self.rfile.readline(1026)
                if not line.endswith(b"\n"):
                    raise BadRequest("bad chunk size line")
                size_s = line.split(b";", 1)[0].strip()
                if not size_s or len(size_s) > 10 or \
                        any(c not in b"0123456789abcdefABCDEF" for c in size_s):
                    raise BadRequest("bad chunk size")
                size = int(size_s, 16)
                if size == 0:
                    break
                total += size
                if total > MAX_BYTES * 4:
                    raise BadRequest("body too large")
                head = self._take(size, head)
                if self.rfile.read(2) != b"\r\n":
                    raise BadRequest("chunk not followed by CRLF")
            else:
                raise BadRequest("too many chunks")
            for _ in range(100):                # trailer section
                line = self.rfile.readline(8192)
                if line in (b"\r\n", b"\n"):
                    break
                if not line.endswith(b"\n"):
                    raise BadRequest("bad trailer")
            else:
                raise BadRequest("too many trailers")
            return total, bytes(head)
        if cl:
            vals = {v.strip() for v in ",".join(cl).split(",")}
            if len(vals) != 1:
                raise BadRequest("conflicting Content-Length")
            v = vals.pop()
            if not v.isdigit() or len(v) > 15:
                raise BadRequest("bad Content-Length")
            n = int(v)
            return n, bytes(self._take(n, head))
        return 0, b""

    # -- answers ----------------------------------------------------------
    def record(self, body_len, body_head):
        srv = self.server
        return {
            "server": srv.label,
            "scheme": srv.scheme,
            "peer": label(self.client_address[0], self.client_address[1]),
            "method": self.command,
            "path": self.path,
            "version": self.request_version,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_len": body_len,
            "body_head": body_head.decode("latin-1"),
        }

    def answer(self, code, rec, extra=(), body=None):
        if body is None:
            body = (json.dumps(rec) + "\n").encode()
        self.send_response(code)
        for k, v in extra:
            self.send_header(k, v)
        if code in (204, 304):
            # RFC 9110: no body, and no Content-Length on a 204.
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            return
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def bad(self, why):
        self.close_connection = True
        body = ("bad request: %s\n" % why).encode()
        self.send_response(400)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        try:
            body_len, body_head = self.read_body()
        except BadRequest as e:
            self.server.log.write(dict(self.record(-1, b""), error=str(e)))
            self.bad(str(e))
            return
        rec = self.record(body_len, body_head)
        self.server.log.write(rec)

        url = urlsplit(self.path)
        path = url.path
        if path == "/redirect":
            try:
                q = parse_qs(url.query, strict_parsing=True)
            except ValueError:
                q = {}
            to = q.get("to", [None])[0]
            code_s = q.get("code", ["302"])[0]
            if not to or not code_s.isdigit() or not 300 <= int(code_s) <= 399:
                self.bad("redirect needs to=URL and code=3xx")
                return
            self.answer(int(code_s), rec, extra=[("Location", to)])
        elif path.startswith("/status/"):
            n = path[len("/status/"):]
            if not n.isdigit() or not 200 <= int(n) <= 599:
                self.bad("status must be 200..599")
                return
            self.answer(int(n), rec)
        elif path.startswith("/interim/"):
            n = path[len("/interim/"):]
            if not n.isdigit() or not 100 <= int(n) <= 199 or int(n) == 101:
                self.bad("interim must be 100..199, not 101")
                return
            self.send_response_only(int(n))
            self.end_headers()
            self.answer(200, rec)
        elif path.startswith("/bytes/"):
            n = path[len("/bytes/"):]
            if not n.isdigit() or len(n) > 10 or int(n) > MAX_BYTES:
                self.bad("bytes must be 0..%d" % MAX_BYTES)
                return
            self.send_bytes(int(n))
        elif path.endswith("/late"):
            self.answer(200, rec)
            self.wfile.flush()
            time.sleep(0.3)
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nEVIL!")
            self.wfile.flush()
        elif path.startswith("/files/") and self.server.files:
            self.send_file(path[len("/files/"):])
        else:
            self.answer(200, rec)

    def send_file(self, rel):
        """A file under --files; never one outside it (no "..", no link out)."""
        root = os.path.realpath(self.server.files)
        full = os.path.realpath(os.path.join(root, rel))
        if full != root and not full.startswith(root + os.sep):
            self.bad("path leaves the files directory")
            return
        if os.path.isdir(full):
            for index in ("index.html", "index.json"):
                if os.path.isfile(os.path.join(full, index)):
                    full = os.path.join(full, index)
                    break
        if self.command not in ("GET", "HEAD") or not os.path.isfile(full):
            self.answer(404 if self.command in ("GET", "HEAD") else 405, None,
                        body=b"no such file\n")
            return
        with open(full, "rb") as f:
            body = f.read()
        ctype = FILE_TYPES.get(os.path.splitext(full)[1], "application/octet-stream")
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_bytes(self, n):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command == "HEAD":
            return
        block = b"x" * CHUNK
        while n > 0:
            k = min(n, CHUNK)
            self.wfile.write(block if k == CHUNK else block[:k])
            n -= k


class EchoServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, family, addr, port, scheme, ctx, log, files=None):
        self.address_family = family
        self.files = files
        self.scheme = scheme
        self.ctx = ctx
        self.log = log
        self.label = label(addr, port)
        super().__init__((addr, port), Handler)

    def server_bind(self):
        # HTTPServer.server_bind calls getfqdn(), a reverse DNS lookup that
        # may hang before dnsmasq is up: skip it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def finish_request(self, request, client_address):
        if self.ctx is None:
            self.RequestHandlerClass(request, client_address, self)
            return
        # TLS handshake here, in the connection's own thread, so that a slow
        # or silent client does not stall the accept loop.
        request.settimeout(10)
        try:
            tls = self.ctx.wrap_socket(request, server_side=True)
        except QUIET_ERRORS + (OSError,):
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            try:
                tls.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            tls.close()

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, QUIET_ERRORS):
            return
        super().handle_error(request, client_address)


class BannerHandler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        s.settimeout(Handler.timeout)
        try:
            s.sendall(BANNER)
            while True:
                data = s.recv(CHUNK)
                if not data:
                    break
                s.sendall(data)
        except QUIET_ERRORS + (OSError,):
            pass


class BannerServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, family, addr, port):
        self.address_family = family
        super().__init__((addr, port), BannerHandler)


def parse_spec(spec):
    kind, _, rest = spec.partition(":")
    addr, _, port = rest.rpartition(":")
    addr = addr.strip("[]")
    if kind not in ("http", "https", "https-bad", "banner") or not addr \
            or not port.isdigit():
        raise SystemExit("echo.py: bad listen spec %r" % spec)
    return kind, addr, int(port)


def tls_ctx(cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--bad-cert")
    ap.add_argument("--bad-key")
    ap.add_argument("--listen", action="append", required=True)
    ap.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT)
    ap.add_argument("--files")
    a = ap.parse_args()
    if not 0 < a.idle_timeout <= 3600:
        raise SystemExit("echo.py: --idle-timeout must be in (0, 3600]")
    Handler.timeout = a.idle_timeout

    log = Log(a.log)
    good = tls_ctx(a.cert, a.key) if a.cert else None
    bad = tls_ctx(a.bad_cert, a.bad_key) if a.bad_cert else None
    servers = []
    for spec in a.listen:
        kind, addr, port = parse_spec(spec)
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        if kind == "banner":
            servers.append(BannerServer(fam, addr, port))
            continue
        ctx = {"http": None, "https": good, "https-bad": bad}[kind]
        if kind != "http" and ctx is None:
            raise SystemExit("echo.py: %s needs a certificate" % spec)
        scheme = "http" if kind == "http" else "https"
        servers.append(EchoServer(fam, addr, port, scheme, ctx, log, a.files))
    for srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()

    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(tmp, a.ready)
    while True:                  # SIGTERM (default action) ends the process
        time.sleep(3600)


if __name__ == "__main__":
    main()
