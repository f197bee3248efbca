#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# dnsq.py - minimal DNS query tool for the test world (there is no dig here).
#
# Usage: dnsq.py [--server ADDR] [--port N] [--timeout S] [--tcp] [--no-edns]
#                NAME [TYPE]
#
# Prints one line "rcode NAME" (NOERROR, NXDOMAIN, ...), one line "flags ..."
# (qr aa tc rd ra), one line per answer record "TYPE DATA" (A, AAAA, TXT,
# CNAME, other types as "TYPEnn <hex>"), and one line "ede CODE TEXT" per
# Extended DNS Error option (RFC 8914) in the OPT record.
# Exit 0 when a matching response arrived (whatever its rcode), 2 when none
# did within the timeout, 3 on a malformed response, 1 on bad usage.
# Standard library only.

import argparse
import ipaddress
import os
import socket
import struct
import sys

TYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "MX": 15,
         "TXT": 16, "AAAA": 28, "SRV": 33, "OPT": 41, "ANY": 255}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN",
          4: "NOTIMP", 5: "REFUSED"}
MAX_PTR_HOPS = 64          # bounds a compression-pointer loop


class Malformed(Exception):
    pass


def encode_name(name):
    out = b""
    name = name.rstrip(".")
    if name:
        for label in name.split("."):
            raw = label.encode("ascii")
            if not 0 < len(raw) < 64:
                raise ValueError("bad label in %r" % name)
            out += bytes([len(raw)]) + raw
    if len(out) + 1 > 255:
        raise ValueError("name too long")
    return out + b"\0"


def read_name(msg, off):
    """Return (name, offset after the name in the original position)."""
    labels = []
    end = None
    hops = 0
    total = 0
    while True:
        if off >= len(msg):
            raise Malformed("name runs past the end")
        ln = msg[off]
        if ln & 0xC0 == 0xC0:
            if off + 1 >= len(msg):
                raise Malformed("truncated pointer")
            hops += 1
            if hops > MAX_PTR_HOPS:
                raise Malformed("pointer loop")
            if end is None:
                end = off + 2
            off = ((ln & 0x3F) << 8) | msg[off + 1]
            continue
        if ln & 0xC0:
            raise Malformed("bad label type")
        off += 1
        if ln == 0:
            break
        if off + ln > len(msg):
            raise Malformed("label runs past the end")
        total += ln + 1
        if total > 255:
            raise Malformed("name too long")
        labels.append(msg[off:off + ln].decode("ascii", "replace"))
        off += ln
    return ".".join(labels) + ".", (end if end is not None else off)


def fmt_rdata(rtype, rdata):
    if rtype == 1 and len(rdata) == 4:
        return str(ipaddress.IPv4Address(rdata))
    if rtype == 28 and len(rdata) == 16:
        return str(ipaddress.IPv6Address(rdata))
    if rtype == 16:
        parts = []
        i = 0
        while i < len(rdata):
            ln = rdata[i]
            if i + 1 + ln > len(rdata):
                raise Malformed("TXT string runs past rdata")
            s = rdata[i + 1:i + 1 + ln].decode("utf-8", "replace")
            parts.append('"' + s.replace('"', '\\"') + '"')
            i += 1 + ln
        return " ".join(parts)
    return rdata.hex()


def build_query(qid, name, qtype, edns):
    hdr = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 1 if edns else 0)
    q = encode_name(name) + struct.pack(">HH", qtype, 1)
    opt = b""
    if edns:
        # root name, type OPT, udp size 1232, ext-rcode/version/flags 0, no options
        opt = b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0)
    return hdr + q + opt


def parse(msg, qid):
    if len(msg) < 12:
        raise Malformed("short header")
    rid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", msg[:12])
    if rid != qid or not flags & 0x8000:
        return None
    off = 12
    for _ in range(qd):
        _, off = read_name(msg, off)
        off += 4
        if off > len(msg):
            raise Malformed("truncated question")
    rcode = flags & 0xF
    lines = []
    ede = []
    for section, count in (("an", an), ("ns", ns), ("ar", ar)):
        for _ in range(count):
            _, off = read_name(msg, off)
            if off + 10 > len(msg):
                raise Malformed("truncated record header")
            rtype, rclass, ttl, rdlen = struct.unpack(">HHIH", msg[off:off + 10])
            off += 10
            if off + rdlen > len(msg):
                raise Malformed("rdata runs past the end")
            rdata = msg[off:off + rdlen]
            off += rdlen
            if rtype == 41:
                rcode |= (ttl >> 24) << 4
                i = 0
                while i + 4 <= len(rdata):
                    code, olen = struct.unpack(">HH", rdata[i:i + 4])
                    if i + 4 + olen > len(rdata):
                        raise Malformed("EDNS option runs past rdata")
                    val = rdata[i + 4:i + 4 + olen]
                    if code == 15 and olen >= 2:
                        info = struct.unpack(">H", val[:2])[0]
                        ede.append("ede %d %s" % (info,
                                   val[2:].decode("utf-8", "replace")))
                    i += 4 + olen
                continue
            if section != "an":
                continue
            tname = TYPE_NAMES.get(rtype, "TYPE%d" % rtype)
            if rtype == 5:
                target, _ = read_name(msg, off - rdlen)
                lines.append("%s %s" % (tname, target))
            else:
                lines.append("%s %s" % (tname, fmt_rdata(rtype, rdata)))
    fl = [n for bit, n in ((0x8000, "qr"), (0x0400, "aa"), (0x0200, "tc"),
                           (0x0100, "rd"), (0x0080, "ra")) if flags & bit]
    out = ["rcode " + RCODES.get(rcode, "RCODE%d" % rcode),
           "flags " + " ".join(fl)]
    return out + lines + ede


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise Malformed("TCP connection closed early")
        buf += chunk
    return buf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="11.0.1.53")
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--tcp", action="store_true")
    ap.add_argument("--no-edns", action="store_true")
    ap.add_argument("name")
    ap.add_argument("type", nargs="?", default="A")
    a = ap.parse_args()
    qtype = TYPES.get(a.type.upper())
    if qtype is None:
        if a.type.upper().startswith("TYPE") and a.type[4:].isdigit():
            qtype = int(a.type[4:])
        else:
            print("dnsq: unknown type %s" % a.type, file=sys.stderr)
            return 1
    qid = struct.unpack(">H", os.urandom(2))[0]
    try:
        query = build_query(qid, a.name, qtype, not a.no_edns)
    except ValueError as e:
        print("dnsq: %s" % e, file=sys.stderr)
        return 1
    fam = socket.AF_INET6 if ":" in a.server else socket.AF_INET
    try:
        if a.tcp:
            with socket.socket(fam, socket.SOCK_STREAM) as s:
                s.settimeout(a.timeout)
                s.connect((a.server, a.port))
                s.sendall(struct.pack(">H", len(query)) + query)
                ln = struct.unpack(">H", recv_exact(s, 2))[0]
                res = parse(recv_exact(s, ln), qid)
        else:
            with socket.socket(fam, socket.SOCK_DGRAM) as s:
                s.settimeout(a.timeout)
                s.connect((a.server, a.port))
                s.send(query)
                res = None
                for _ in range(16):     # skip stray datagrams, bounded
                    res = parse(s.recv(65535), qid)
                    if res is not None:
                        break
        if res is None:
            print("dnsq: no matching response", file=sys.stderr)
            return 2
    except (socket.timeout, OSError) as e:
        print("dnsq: %s" % e, file=sys.stderr)
        return 2
    except (Malformed, struct.error) as e:
        print("dnsq: malformed response: %s" % e, file=sys.stderr)
        return 3
    print("\n".join(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
