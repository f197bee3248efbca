#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A tunnel's first bytes, however they arrive: sent before the CONNECT's 200
# (in the CONNECT's own segment), split over segments after it, or stopping
# half-way. They are examined as a tunnel's first bytes always are (a
# ClientHello's SNI bound to the CONNECT host, plain HTTP through the HTTP
# path with its Host bound to it), never spliced unexamined; bytes that stay
# undecided until head_timeout are reset. Silence is never a reason to
# splice: where the rule allows raw TCP (`raw_tcp: true`) a protocol where
# the server speaks first is spliced once the server has spoken; elsewhere
# the client's first bytes are examined whenever they come, anything that
# a lenient server could read as a request line goes to the strict parser,
# and bytes that are neither HTTP nor TLS are reset. The same on the
# transparent path. The client is a small python3 program in the sandbox
# that sends each segment with an explicit send() and sleeps in between.
set -u
cd "$(dirname "$0")/../.."
. tests/world/world.sh
. tests/world/broker.sh
. tests/integration/lib.sh

T_TIMEOUT=20
broker_world f1

SECRET="s3cr3t-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$D/secret"
chmod 600 "$D/secret"
# A short head_timeout keeps the "stops half-way" checks quick; 300 ms of
# silence (SNIFF_MS) is far below it.
broker_config "head_timeout: 1s" "connect_timeout: 2s" "audit_fold: 0"
# echo.world.test is spliced (no credential); other.world.test is allowed
# too, so that a Host or SNI naming it is refused for not being the
# tunnel's host, not for being outside the policy; its TLS is intercepted.
cat >"$D/pol.yaml" <<EOF
version: 1
egress:
  allow:
    - host: echo.world.test
      ports: [80, 443]
    - host: echo.world.test
      ports: [22]
      raw_tcp: true
    - host: other.world.test
      ports: [80, 443]
credentials:
  - name: other-token
    source: { file: $D/secret }
    inject: { header: X-Other, value: "{secret}" }
    scope: { hosts: [other.world.test] }
EOF
broker_start || { echo "0 passed, 1 failed"; exit 1; }
t_ok "sluice create" S create "$S1" --policy "$D/pol.yaml"
BUNDLE=/run/sluice-sandboxes/$S1/ca-bundle.crt

# fb.py TARGET STEP...: one connection, TARGET "proxy" (the sandbox's
# HTTPS_PROXY) or "direct:HOST:PORT" (the transparent path). Steps queue
# bytes (c:AUTH a CONNECT head, h:TEXT with \r \n \xNN escapes, tls:SNI a
# whole ClientHello, tls1:SNI its first half, tls2 the rest); the others
# first send what is queued as one send(), so that bytes queued together
# leave in one segment: sleep:S; wait200 (reads the CONNECT's answer);
# handshake (finishes the TLS handshake, verified against --ca, with the
# SNI as the name); tget:HOST:PATH (a GET inside that TLS, read to its end);
# read:S (reads until EOF, reset or S seconds). Prints what it received
# (non-text bytes as '.') and a last line "RESULT reset|eof|timeout|tls-ok
# ..." with the seconds since the connection was made.
cat >"$D/fb.py" <<'PY'
import codecs, errno, os, socket, ssl, sys, time

args = sys.argv[1:]
ca = None
if args[:1] == ["--ca"]:
    ca, args = args[1], args[2:]
target, steps = args[0], args[1:]
if target == "proxy":
    hp = os.environ["HTTPS_PROXY"].split("//", 1)[1].rstrip("/")
    host, port = hp.rsplit(":", 1)
else:
    _, host, port = target.split(":")
sock = socket.create_connection((host, int(port)), timeout=5)
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
t0 = time.monotonic()
queued = b""     # to send as one segment
got = b""        # received, not yet shown
tls = None       # SSLObject, incoming BIO, outgoing BIO, the rest of the hello


def show():
    global got
    sys.stdout.write("".join(chr(b) if b in (10, 13) or 32 <= b < 127 else "." for b in got))
    if got and not got.endswith(b"\n"):
        sys.stdout.write("\n")
    got = b""


def done(what):
    show()
    print("RESULT %s %.2f" % (what, time.monotonic() - t0))
    sys.stdout.flush()
    os._exit(0)


def flush():
    global queued
    if queued:
        try:
            sock.sendall(queued)
        except OSError as e:
            done("reset" if e.errno in (errno.ECONNRESET, errno.EPIPE) else "error " + str(e))
        queued = b""


def recv(deadline):
    """Some bytes; b"" at EOF; None at the deadline; a reset ends the run."""
    wait = deadline - time.monotonic()
    if wait <= 0:
        return None
    sock.settimeout(wait)
    try:
        return sock.recv(65536)
    except socket.timeout:
        return None
    except ConnectionResetError:
        done("reset")


def hello(sni):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca:
        ctx.load_verify_locations(ca)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=sni)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return [obj, inc, out, out.read()]


def tls_feed(deadline, pending):
    """Feeds the TLS object pending bytes or one read; False at EOF."""
    data = pending or recv(deadline)
    if data is None:
        done("timeout")
    if not data:
        tls[1].write_eof()
        return False
    tls[1].write(data)
    return True


left = b""       # read past the CONNECT's answer: the origin's first TLS bytes
for i, step in enumerate(steps):
    kind, _, arg = step.partition(":")
    if kind == "c":
        queued += b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (arg.encode(), arg.encode())
    elif kind == "h":
        queued += codecs.escape_decode(arg.encode())[0]
    elif kind in ("tls", "tls1", "tlsech"):
        tls = hello(arg)
        ch = tls[3]
        if kind == "tlsech":
            # An encrypted_client_hello extension (0xfe0d), as a client
            # with an ECH config (or GREASE) sends it: the record, the
            # handshake and the extensions grow by its length.
            ext = b"\xfe\x0d\x00\x08" + b"\x00\x00\x01\x00\x01\x07\x00\x00"
            body = bytearray(ch[9:])
            p = 34
            p += 1 + body[p]
            p += 2 + int.from_bytes(body[p:p + 2], "big")
            p += 1 + body[p]
            elen = int.from_bytes(body[p:p + 2], "big")
            body[p:p + 2] = (elen + len(ext)).to_bytes(2, "big")
            body += ext
            hs = b"\x01" + len(body).to_bytes(3, "big") + bytes(body)
            ch = ch[:3] + len(hs).to_bytes(2, "big") + hs
            kind = "tls"
        half = len(ch) // 2 if kind == "tls1" else len(ch)
        tls[3] = ch[half:]
        queued += ch[:half]
    elif kind == "tls2":
        queued += tls[3]
    elif kind == "sleep":
        flush()
        time.sleep(float(arg))
    elif kind == "wait200":
        flush()
        deadline = time.monotonic() + 3
        while b"\r\n\r\n" not in got:
            data = recv(deadline)
            if not data:
                done("eof" if data == b"" else "timeout")
            got += data
        head, _, left = got.partition(b"\r\n\r\n")
        got = head + b"\r\n\r\n"
        show()
        if not head.startswith(b"HTTP/1.1 200"):
            done("no-200")
    elif kind == "handshake":
        flush()
        obj, inc, out = tls[:3]
        deadline = time.monotonic() + 5
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                if out.pending:
                    sock.sendall(out.read())
                if not tls_feed(deadline, left):
                    done("eof")
                left = b""
            except ssl.SSLError as e:
                done("tls-error " + str(e))
        if out.pending:
            sock.sendall(out.read())
        issuer = dict(x[0] for x in obj.getpeercert().get("issuer", ()))
        print("TLS-OK %s issuer=%s" % (obj.version(), issuer.get("commonName")))
    elif kind == "tget":
        obj, inc, out = tls[:3]
        h, _, path = arg.partition(":")
        obj.write(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path.encode(), h.encode()))
        sock.sendall(out.read())
        deadline = time.monotonic() + 5
        while True:
            try:
                got += obj.read(65536)
                continue
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break
            if not tls_feed(deadline, b""):
                break
        done("tls-ok")
    elif kind == "read":
        flush()
        got, left = got + left, b""
        deadline = time.monotonic() + float(arg)
        while True:
            data = recv(deadline)
            if data is None:
                # Not the end: later steps may follow.
                if i == len(steps) - 1:
                    done("timeout")
                show()
                break
            if not data:
                done("eof")
            got += data
    else:
        sys.exit("fb.py: unknown step `%s`" % step)
flush()
done("end")
PY
# The contained runner sees only what is bound in: the test world's files
# (CA, scripts) and the repository, read-only.
X() { S exec --bind "$D:$D:ro" "$S1" -- "$@"; }
FB() { X /usr/bin/python3 "$D/fb.py" "$@"; }
CRLF='\r\n'
# req PATH HOST: a GET request head, as an h: step's text.
req() { echo "h:GET $1 HTTP/1.1${CRLF}Host: $2${CRLF}Connection: close${CRLF}${CRLF}"; }

# Audit lines are counted from a mark set before each check.
amark() { AMARK=$(cat "$BROKER_AUDIT" 2>/dev/null | wc -l); }
# audited REASON: an audit line written since the mark has that reason
# (the broker writes it as it resets; up to 3 s for a late line).
audited() {
	local i
	for ((i = 0; i < 30; i++)); do
		tail -n +$((AMARK + 1)) "$BROKER_AUDIT" 2>/dev/null | grep -q "\"reason\":\"$1\"" && return 0
		sleep 0.1
	done
	echo "no new audit line with reason $1; the new lines:"
	tail -n +$((AMARK + 1)) "$BROKER_AUDIT" 2>/dev/null
	return 1
}
# inner: "STATUS REASON" of the answer after the CONNECT's 200 (" " if none).
inner() { echo "$T_OUT" | grep -v '^HTTP/1.1 200 Connection established' | t_status_reason; }
# result: the client's outcome (reset, eof, timeout, tls-ok ...) from T_OUT.
result() { echo "$T_OUT" | awk '$1 == "RESULT" { print $2 }' | tail -n 1; }
# in_echo PATH: the echo servers logged a request for PATH.
in_echo() { world_echo_log | grep -qF "\"path\": \"$1\""; }
not_in_echo() { ! in_echo "$1"; }

# --- CONNECT: bytes sent before the 200, in the CONNECT's own segment --------------
amark
t_ok "CONNECT + early HTTP, right Host" FB proxy c:echo.world.test:80 "$(req /fb-early-ok echo.world.test)" read:3
t_eq "reaches the origin (200 inside the tunnel)" "200 " "$(inner)"
t_contains "the echo server's answer" "$T_OUT" '"path": "/fb-early-ok"'
t_ok "the echo server has the request" in_echo /fb-early-ok
t_ok "it went through the HTTP path (audit http-in-tunnel)" audited http-in-tunnel

amark
t_ok "CONNECT + early HTTP, wrong Host" FB proxy c:echo.world.test:80 "$(req /fb-early-bad other.world.test)" read:3
t_eq "403 host-mismatch" "403 host-mismatch" "$(inner)"
t_ok "audit host-mismatch" audited host-mismatch
t_ok "the echo server never saw it" not_in_echo /fb-early-bad

amark
t_ok "CONNECT + early ClientHello, wrong SNI" FB proxy c:echo.world.test:443 tls:other.world.test read:3
t_eq "is reset" "reset" "$(result)"
t_ok "audit sni-mismatch" audited sni-mismatch

amark
t_ok "CONNECT + early ClientHello, right SNI, a spliced host" \
	FB --ca "$WORLD_CA" proxy c:echo.world.test:443 tls:echo.world.test wait200 handshake \
	tget:echo.world.test:/fb-early-tls
t_contains "the handshake with the origin completes (its world-CA certificate)" "$T_OUT" \
	"issuer=sluice test world CA"
t_eq "and a request inside gets its answer" "200 " "$(inner)"
t_eq "to its end" "tls-ok" "$(result)"
t_ok "the echo server has it, over TLS" \
	bash -c "grep -F '\"path\": \"/fb-early-tls\"' '$D/echo.log' | grep -qF '\"scheme\": \"https\"'"

amark
t_ok "CONNECT + early ClientHello to an intercepted host" \
	FB proxy c:other.world.test:443 tls:other.world.test read:3
t_eq "is reset" "reset" "$(result)"
t_ok "audit early-client-hello" audited early-client-hello
t_ok "a client of that host that waits for the 200 is intercepted as before" \
	FB --ca "$BUNDLE" proxy c:other.world.test:443 wait200 tls:other.world.test handshake \
	tget:other.world.test:/fb-int
t_contains "a leaf from the sandbox's CA" "$T_OUT" "issuer=sluice sandbox $S1 CA"
t_contains "and the credential is injected" "$(origin /fb-int | tail -n 1)" "\"X-Other\", \"$SECRET\""

# --- CONNECT: first bytes split over segments after the 200 -------------------------
amark
t_ok "CONNECT, \"GE\", a pause, the rest naming another Host" \
	FB proxy c:echo.world.test:80 wait200 h:GE sleep:0.4 \
	"h:T /fb-split-bad HTTP/1.1${CRLF}Host: other.world.test${CRLF}Connection: close${CRLF}${CRLF}" read:3
t_eq "403 host-mismatch (a split method is still HTTP)" "403 host-mismatch" "$(inner)"
t_ok "audit host-mismatch" audited host-mismatch
t_ok "not spliced: the echo server never saw it" not_in_echo /fb-split-bad

amark
t_ok "CONNECT, half a ClientHello with a wrong SNI, a pause, the rest" \
	FB proxy c:echo.world.test:443 wait200 tls1:other.world.test sleep:0.4 tls2 read:3
t_eq "is reset" "reset" "$(result)"
t_ok "audit sni-mismatch" audited sni-mismatch

amark
t_ok "CONNECT, half a ClientHello, then silence" \
	FB proxy c:echo.world.test:443 wait200 tls1:echo.world.test read:4
t_eq "is reset at head_timeout" "reset" "$(result)"
t_ok "audit head-timeout" audited head-timeout

amark
t_ok "CONNECT, \"GE\", then silence" FB proxy c:echo.world.test:80 wait200 h:GE read:4
t_eq "is reset at head_timeout" "reset" "$(result)"
t_ok "audit head-timeout" audited head-timeout

amark
t_ok "CONNECT, then silence (the server speaks first)" \
	FB proxy c:echo.world.test:22 wait200 read:1 'h:\x00hello\r\n' read:1
t_contains "spliced: the banner came through" "$T_OUT" "SSH-2.0-sluice-world"
t_contains "and the server echoes what follows" "$T_OUT" ".hello"
t_eq "no reset" "timeout" "$(result)"

# --- CONNECT: silence first, then the client speaks ----------------------------------
# Waiting is no way past the checks: silence splices nothing where the rule
# does not allow raw TCP, and what comes after it is examined.
amark
t_ok "CONNECT to :443, 0.6 s of silence, then a ClientHello with another SNI" \
	FB proxy c:echo.world.test:443 wait200 sleep:0.6 tls:other.world.test read:3
t_eq "is reset" "reset" "$(result)"
t_ok "audit sni-mismatch" audited sni-mismatch

amark
t_ok "CONNECT to :80, 0.6 s of silence, then a request naming another Host" \
	FB proxy c:echo.world.test:80 wait200 sleep:0.6 \
	"h:GET /fb-silent-bad HTTP/1.1${CRLF}Host: other.world.test${CRLF}Connection: close${CRLF}${CRLF}" read:3
t_eq "403 host-mismatch" "403 host-mismatch" "$(inner)"
t_ok "the echo server never saw it" not_in_echo /fb-silent-bad

amark
t_ok "CONNECT to :80, silence until head_timeout" FB proxy c:echo.world.test:80 wait200 read:4
t_eq "is reset (not spliced)" "reset" "$(result)"
t_ok "audit head-timeout" audited head-timeout

amark
t_ok "CONNECT to :80, bytes that are neither HTTP nor TLS" \
	FB proxy c:echo.world.test:80 wait200 'h:\x00\x01hello\r\n' read:3
t_eq "are reset" "reset" "$(result)"
t_ok "audit raw-tcp-not-allowed" audited raw-tcp-not-allowed

amark
t_ok "CONNECT to :443, a ClientHello with an ECH extension" \
	FB proxy c:echo.world.test:443 wait200 tlsech:echo.world.test read:3
t_eq "is reset" "reset" "$(result)"
t_ok "audit ech-refused" audited ech-refused

# --- request lines a lenient server would take ------------------------------------------
# A tab for the space, leading empty lines, a lower-case or a long method:
# each goes to the strict parser (refused), never spliced to the origin.
for form in "GET\\t/fb-lax-tab" "\\r\\nGET /fb-lax-crlf" "get /fb-lax-lower" \
	"LONGMETHODNAMEXYZW /fb-lax-long"; do
	path=${form##*/}
	amark
	t_ok "transparent: \"${form%% *}\" request line naming another Host" \
		FB direct:echo.world.test:80 \
		"h:${form} HTTP/1.1${CRLF}Host: other.world.test${CRLF}Connection: close${CRLF}${CRLF}" read:3
	t_contains "refused by the broker" "$T_OUT" "X-Sluice-Reason:"
	t_ok "the echo server never saw it" not_in_echo "/$path"
	amark
	t_ok "CONNECT: the same inside a tunnel" FB proxy c:echo.world.test:80 wait200 \
		"h:${form}-c HTTP/1.1${CRLF}Host: other.world.test${CRLF}Connection: close${CRLF}${CRLF}" read:3
	t_contains "refused by the broker" "$T_OUT" "X-Sluice-Reason:"
	t_ok "the echo server never saw it" not_in_echo "/$path-c"
done

# --- the transparent path -------------------------------------------------------------
amark
t_ok "transparent: 0.6 s of silence, then a ClientHello with another SNI" \
	FB direct:echo.world.test:443 sleep:0.6 tls:other.world.test read:3
t_eq "is reset" "reset" "$(result)"
t_ok "audit sni-mismatch" audited sni-mismatch

amark
t_ok "transparent: 0.6 s of silence, then a request naming another Host" \
	FB direct:echo.world.test:80 sleep:0.6 \
	"h:GET /fb-t-silent HTTP/1.1${CRLF}Host: other.world.test${CRLF}Connection: close${CRLF}${CRLF}" read:3
t_eq "403 host-mismatch" "403 host-mismatch" "$(inner)"
t_ok "the echo server never saw it" not_in_echo /fb-t-silent

amark
t_ok "transparent: 0.6 s of silence, then the right Host" \
	FB direct:echo.world.test:80 sleep:0.6 "$(req /fb-t-silent-ok echo.world.test)" read:3
t_contains "reaches the origin" "$T_OUT" '"path": "/fb-t-silent-ok"'

amark
t_ok "transparent: 0.6 s of silence, then TLS with the right SNI" \
	FB --ca "$WORLD_CA" direct:echo.world.test:443 sleep:0.6 tls:echo.world.test handshake \
	tget:echo.world.test:/fb-t-silent-tls
t_eq "is spliced once examined" "tls-ok" "$(result)"
t_contains "the origin's certificate" "$T_OUT" "issuer=sluice test world CA"

amark
t_ok "transparent: silence, then the server speaks first (raw_tcp rule)" \
	FB direct:echo.world.test:22 read:1 'h:\x00hello\r\n' read:1
t_contains "spliced: the banner came through" "$T_OUT" "SSH-2.0-sluice-world"
t_contains "and the server echoes what follows" "$T_OUT" ".hello"

amark
t_ok "transparent: bytes that are neither HTTP nor TLS to :80" \
	FB direct:echo.world.test:80 'h:\x00\x01hello\r\n' read:3
t_eq "are reset" "reset" "$(result)"
t_ok "audit raw-tcp-not-allowed" audited raw-tcp-not-allowed

amark
t_ok "transparent: a ClientHello with an ECH extension" \
	FB direct:echo.world.test:443 tlsech:echo.world.test read:3
t_eq "is reset" "reset" "$(result)"
t_ok "audit ech-refused" audited ech-refused

amark
amark
t_ok "transparent: \"GE\", a pause, the rest naming another Host" \
	FB direct:echo.world.test:80 h:GE sleep:0.4 \
	"h:T /fb-t-split HTTP/1.1${CRLF}Host: other.world.test${CRLF}Connection: close${CRLF}${CRLF}" read:3
t_eq "403 host-mismatch" "403 host-mismatch" "$(inner)"
t_ok "audit host-mismatch" audited host-mismatch
t_ok "the echo server never saw it" not_in_echo /fb-t-split

amark
t_ok "transparent: a ClientHello with a wrong SNI in two segments" \
	FB direct:echo.world.test:443 tls1:other.world.test sleep:0.4 tls2 read:3
t_eq "is reset" "reset" "$(result)"
t_ok "audit sni-mismatch" audited sni-mismatch

amark
t_ok "transparent: half a ClientHello, then silence" FB direct:echo.world.test:443 tls1:echo.world.test read:4
t_eq "is reset at head_timeout" "reset" "$(result)"
t_ok "audit head-timeout" audited head-timeout

amark
t_ok "transparent: \"GE\", then silence" FB direct:echo.world.test:80 h:GE read:4
t_eq "is reset at head_timeout" "reset" "$(result)"
t_ok "audit head-timeout" audited head-timeout

# --- and afterwards ---------------------------------------------------------------------
t_ok "the broker still runs" broker_alive
t_ok "and serves a normal request" X curl -sf -m 10 http://echo.world.test/fb-after
t_contains "from the origin" "$T_OUT" '"path": "/fb-after"'
t_eq "no decoy was hit" "" "$(world_decoy_hits)"
t_rc "the secret is not in the audit log" 1 grep -qF "$SECRET" "$BROKER_AUDIT"
t_ok "sluice delete" S delete "$S1"
broker_stop
t_done
