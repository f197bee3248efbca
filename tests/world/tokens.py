#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# tokens.py - the test world's OAuth2 token endpoint and JWT-verifying service.
#
#   tokens.py --log FILE --ready FILE
#             [--oauth ADDR:PORT --cert C --key K --client-id ID
#              --client-secret-file F --tokens-file F [--expires-in N]]
#             [--jwt ADDR:PORT --jwks FILE --issuer ISS --jwt-log F]
#
# The token endpoint (HTTPS, the world CA's certificate):
#   POST /token     RFC 6749 4.4 client credentials, the client secret in
#                   the form body (client_secret_post): grant_type must be
#                   client_credentials, client_id and client_secret must
#                   match. Answers 200 {"access_token", "token_type":
#                   "Bearer", "expires_in"} with a fresh random token,
#                   appended to --tokens-file as "TOKEN<TAB>SCOPE"; 401
#                   {"error": "invalid_client"}; 400 for another grant; 503
#                   while told to fail.
#   POST /token-chunked, /token-close   the same, the answer in chunks, or
#                   with a body that the connection's close ends
#   GET /count      {"issued": N, "by_scope": {SCOPE: N}, "requests": N,
#                   "refused": N}
#   GET /control?fail=0|1&expires_in=N   change behaviour (N < 0: the
#                   answer carries no expires_in)
#   anything else   500
# The JWT service (plain HTTP): any request with "Authorization: Bearer
# JWT" is verified against the JWK Set in --jwks (read anew each time):
# alg ES256 (R||S) or EdDSA, the key by kid, the signature, exp in the
# future, iat not in the future, iss == --issuer, aud == the Host header's
# host, sub present. 200 {"ok": true, "header", "claims"} or 401 {"ok":
# false, "error": WHY}. Each token received is appended to --jwt-log.
#
# --log gets one JSON line per request, without secrets or tokens. --ready
# is written once every socket listens.

import argparse
import base64
import json
import os
import secrets
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

MAX_BODY = 64 * 1024


class State:
    def __init__(self, args):
        self.lock = threading.Lock()
        self.args = args
        self.fail = False
        self.expires_in = args.expires_in
        self.issued = 0
        self.by_scope = {}
        self.requests = 0
        self.refused = 0
        self.client_secret = None
        if args.client_secret_file:
            with open(args.client_secret_file) as f:
                self.client_secret = f.read().strip()
        self.logfd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(self, obj):
        line = (json.dumps(obj) + "\n").encode()
        with self.lock:
            os.write(self.logfd, line)


def append(path, line):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def b64url(s):
    s = s.encode() if isinstance(s, str) else s
    return base64.urlsafe_b64decode(s + b"=" * (-len(s) % 4))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sluice-world-tokens"
    sys_version = ""
    timeout = 30

    def log_message(self, fmt, *args):
        pass

    def send_json(self, code, obj, framing="length"):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-store")
        if framing == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            half = len(body) // 2
            for part in (body[:half], body[half:]):
                self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\nX-Trailer: 1\r\n\r\n")
        elif framing == "close":
            # Neither length nor chunks: the body ends with the connection.
            self.send_header("Connection", "close")
            self.close_connection = True
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def body(self):
        n = self.headers.get("Content-Length")
        if not n or not n.isdigit() or int(n) > MAX_BODY:
            return b""
        return self.rfile.read(int(n))

    def do_GET(self):
        self.route()

    def do_POST(self):
        self.route()

    def route(self):
        if self.server.kind == "oauth":
            self.oauth()
        else:
            self.jwt()

    # -- the token endpoint ----------------------------------------------
    def oauth(self):
        st = self.server.state
        url = urlsplit(self.path)
        if self.command == "GET" and url.path == "/count":
            with st.lock:
                obj = {"issued": st.issued, "by_scope": dict(st.by_scope),
                       "requests": st.requests, "refused": st.refused}
            return self.send_json(200, obj)
        if self.command == "GET" and url.path == "/control":
            q = parse_qs(url.query)
            with st.lock:
                if "fail" in q:
                    st.fail = q["fail"][0] == "1"
                if "expires_in" in q:
                    st.expires_in = int(q["expires_in"][0])
                obj = {"fail": st.fail, "expires_in": st.expires_in}
            return self.send_json(200, obj)
        data = self.body()
        framing = {"/token": "length", "/token-chunked": "chunked",
                   "/token-close": "close"}.get(url.path)
        if self.command != "POST" or not framing:
            st.log({"oauth": url.path, "answer": 500})
            return self.send_json(500, {"error": "no such endpoint"})
        form = parse_qs(data.decode("latin-1"), keep_blank_values=True)
        one = lambda k: (form.get(k) or [""])[0]
        scope = one("scope")
        ctype = self.headers.get("Content-Type", "")
        rec = {"oauth": "/token", "grant_type": one("grant_type"),
               "client_id": one("client_id"), "scope": scope, "content_type": ctype}
        with st.lock:
            st.requests += 1
            fail, exp = st.fail, st.expires_in
        if fail:
            rec["answer"] = 503
            st.log(rec)
            return self.send_json(503, {"error": "temporarily_unavailable"})
        if ctype.split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
            rec["answer"] = 400
            st.log(rec)
            return self.send_json(400, {"error": "invalid_request"})
        if one("grant_type") != "client_credentials":
            rec["answer"] = 400
            st.log(rec)
            return self.send_json(400, {"error": "unsupported_grant_type"})
        if one("client_id") != st.args.client_id or \
                not secrets.compare_digest(one("client_secret"), st.client_secret or "\0"):
            with st.lock:
                st.refused += 1
            rec["answer"] = 401
            st.log(rec)
            return self.send_json(401, {"error": "invalid_client"})
        token = "tok-" + secrets.token_hex(20)
        with st.lock:
            st.issued += 1
            st.by_scope[scope] = st.by_scope.get(scope, 0) + 1
        append(st.args.tokens_file, "%s\t%s" % (token, scope or "-"))
        obj = {"access_token": token, "token_type": "Bearer"}
        if exp >= 0:
            obj["expires_in"] = exp
        rec["answer"] = 200
        rec["expires_in"] = exp
        st.log(rec)
        return self.send_json(200, obj, framing)

    # -- the JWT-verifying service ---------------------------------------
    def jwt(self):
        st = self.server.state
        self.body()
        auth = self.headers.get("Authorization", "")
        host = (self.headers.get("Host") or "").lower()
        host = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if not auth.startswith("Bearer "):
            st.log({"jwt": self.path, "answer": 401, "error": "no bearer token"})
            return self.send_json(401, {"ok": False, "error": "no bearer token"})
        token = auth[7:].strip()
        if st.args.jwt_log:
            append(st.args.jwt_log, token)
        try:
            header, claims = verify(token, st.args.jwks, st.args.issuer, host)
        except ValueError as e:
            st.log({"jwt": self.path, "answer": 401, "error": str(e)})
            return self.send_json(401, {"ok": False, "error": str(e)})
        st.log({"jwt": self.path, "answer": 200, "sub": claims.get("sub")})
        return self.send_json(200, {"ok": True, "header": header, "claims": claims})


def jwk_key(jwk):
    if jwk.get("kty") == "EC" and jwk.get("crv") == "P-256":
        x = int.from_bytes(b64url(jwk["x"]), "big")
        y = int.from_bytes(b64url(jwk["y"]), "big")
        return "ES256", ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
    if jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
        return "EdDSA", ed25519.Ed25519PublicKey.from_public_bytes(b64url(jwk["x"]))
    raise ValueError("unsupported key in the JWK Set")


def verify(token, jwks_path, issuer, host):
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not a JWS compact token")
    try:
        header = json.loads(b64url(parts[0]))
        claims = json.loads(b64url(parts[1]))
        sig = b64url(parts[2])
    except Exception:
        raise ValueError("undecodable token")
    try:
        with open(jwks_path) as f:
            keys = json.load(f)["keys"]
    except Exception:
        raise ValueError("no JWK Set")
    alg, kid = header.get("alg"), header.get("kid")
    if alg not in ("ES256", "EdDSA"):
        raise ValueError("alg %r refused" % alg)
    cands = [k for k in keys if k.get("kid") == kid]
    if not cands:
        raise ValueError("unknown kid %r" % kid)
    signed = (parts[0] + "." + parts[1]).encode()
    good = False
    for jwk in cands:
        kalg, pub = jwk_key(jwk)
        if kalg != alg:
            continue
        try:
            if alg == "ES256":
                if len(sig) != 64:
                    raise ValueError("ES256 signature is not R||S")
                der = encode_dss_signature(int.from_bytes(sig[:32], "big"),
                                           int.from_bytes(sig[32:], "big"))
                pub.verify(der, signed, ec.ECDSA(hashes.SHA256()))
            else:
                pub.verify(sig, signed)
            good = True
            break
        except InvalidSignature:
            continue
    if not good:
        raise ValueError("bad signature")
    now = time.time()
    if not isinstance(claims.get("exp"), int) or now >= claims["exp"]:
        raise ValueError("expired")
    if not isinstance(claims.get("iat"), int) or claims["iat"] > now + 5:
        raise ValueError("iat in the future")
    if claims.get("iss") != issuer:
        raise ValueError("wrong issuer %r" % claims.get("iss"))
    aud = claims.get("aud")
    if aud != host and not (isinstance(aud, list) and host in aud):
        raise ValueError("wrong audience %r (host %r)" % (aud, host))
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise ValueError("no subject")
    return header, claims


def serve(kind, spec, state, ctx=None):
    addr, port = spec.rsplit(":", 1)
    srv = ThreadingHTTPServer((addr, int(port)), Handler)
    srv.daemon_threads = True
    srv.kind = kind
    srv.state = state
    if ctx:
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    return srv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--oauth")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--client-id")
    ap.add_argument("--client-secret-file")
    ap.add_argument("--tokens-file")
    ap.add_argument("--expires-in", type=int, default=3600)
    ap.add_argument("--jwt")
    ap.add_argument("--jwks")
    ap.add_argument("--issuer")
    ap.add_argument("--jwt-log")
    args = ap.parse_args()
    st = State(args)
    if args.oauth:
        if not (args.cert and args.key and args.client_id and args.client_secret_file
                and args.tokens_file):
            ap.error("--oauth needs --cert, --key, --client-id, --client-secret-file, --tokens-file")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        serve("oauth", args.oauth, st, ctx)
    if args.jwt:
        if not (args.jwks and args.issuer):
            ap.error("--jwt needs --jwks and --issuer")
        serve("jwt", args.jwt, st)
    with open(args.ready, "w") as f:
        f.write("ready\n")
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
