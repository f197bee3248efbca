#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Validates audit log lines against docs/audit.schema.json.

usage: audit_schema.py SCHEMA [--require-lines] [--self-test] [PATH ...]

Each PATH is an audit log, or a directory whose files are audit logs (the
ones tests/integration/run.sh collected from every broker of a run). Every
line must be one JSON object that the schema accepts, with no key twice and
its keys in the schema's order ("required" lists them in that order).
--self-test first feeds known-bad lines (a key missing, a key too many, a
wrong type, an unknown reason, keys out of order) and a good one, so that a
validator that accepts everything is caught. --require-lines: validating
no line at all is a failure (a whole run always has some).

Output: "ok - ..." / "not ok - ..." lines, an invalid line with its error
(bounded), and last "N passed, N failed" as the tests print it. Exit 1 on
any failure.
"""
import json
import os
import sys

try:
    import jsonschema
except ImportError:
    print("not ok - python3 cannot import jsonschema (Debian: python3-jsonschema; scripts/deps.sh)")
    print("0 passed, 1 failed")
    sys.exit(1)

PASS = 0
FAIL = 0


def ok(name):
    global PASS
    PASS += 1
    print("ok - %s" % name)


def not_ok(name, *detail):
    global FAIL
    FAIL += 1
    print("not ok - %s" % name)
    for d in detail[:20]:
        d = str(d)
        print("#   " + (d[:400] + "..." if len(d) > 400 else d))


def pairs(kv):
    keys = [k for k, _ in kv]
    if len(set(keys)) != len(keys):
        raise ValueError("a key twice: %s" % keys)
    return kv


class Checker:
    def __init__(self, schema_path):
        with open(schema_path, encoding="utf-8") as f:
            self.schema = json.load(f)
        cls = jsonschema.validators.validator_for(self.schema)
        cls.check_schema(self.schema)
        self.validator = cls(self.schema, format_checker=jsonschema.FormatChecker())
        self.order = list(self.schema["required"])

    def error(self, line):
        """None when @line is valid, else why not."""
        try:
            kv = json.loads(line, object_pairs_hook=pairs)
        except ValueError as e:
            return "not JSON: %s" % e
        if not isinstance(kv, list):
            return "not an object"
        obj = dict(kv)
        errs = sorted(self.validator.iter_errors(obj), key=lambda e: list(e.path))
        if errs:
            e = errs[0]
            where = "/".join(str(p) for p in e.path) or "(line)"
            return "%s: %s" % (where, e.message)
        keys = [k for k, _ in kv]
        if keys != self.order:
            return "keys out of the schema's order: %s" % keys
        return None


def good_line(order):
    d = {k: None for k in order}
    d.update(time="2026-12-01T21:00:00.250Z", sandbox="s1", proto="http",
             decision="deny", reason="address-literal", target="http://2852039166/",
             src_addr="10.99.0.2", src_port=40000, status=403,
             bytes_up=0, bytes_down=0, duration_ms=1)
    return json.dumps(d)


def self_test(c):
    good = good_line(c.order)
    e = c.error(good)
    if e is None:
        ok("self-test: a valid line is accepted")
    else:
        not_ok("self-test: a valid line is accepted", good, e)
    base = json.loads(good)

    def variant(fn):
        d = dict(base)
        fn(d)
        return json.dumps(d)

    def reorder(d):
        items = list(d.items())
        items[1], items[2] = items[2], items[1]
        d.clear()
        d.update(items)

    bad = {
        "a key missing (dst_port)": variant(lambda d: d.pop("dst_port")),
        "a key too many (addr)": variant(lambda d: d.update(addr="1.2.3.4")),
        "a wrong type (dst_port a string)": variant(lambda d: d.update(dst_port="80")),
        "a wrong type (bytes_up negative)": variant(lambda d: d.update(bytes_up=-1)),
        "a null decision": variant(lambda d: d.update(decision=None)),
        "an unknown reason": variant(lambda d: d.update(reason="no-such-reason")),
        "an unknown proto": variant(lambda d: d.update(proto="gopher")),
        "a src_addr that is no address": variant(lambda d: d.update(src_addr="10.99.0.256")),
        "keys out of order": variant(reorder),
        "a key twice": good[:-1] + ', "time": "2026-12-01T21:00:00.250Z"}',
        "not JSON": good[:-1],
    }
    for what, line in bad.items():
        e = c.error(line)
        if e is None:
            not_ok("self-test: %s is refused" % what, line)
        else:
            ok("self-test: %s is refused (%s)" % (what, e[:80]))


def files_of(paths):
    for p in paths:
        if os.path.isdir(p):
            for n in sorted(os.listdir(p)):
                f = os.path.join(p, n)
                if os.path.isfile(f):
                    yield f
        else:
            yield p


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    schema = args.pop(0)
    require = "--require-lines" in args
    selftest = "--self-test" in args
    paths = [a for a in args if a not in ("--require-lines", "--self-test")]
    try:
        c = Checker(schema)
    except Exception as e:  # a broken schema fails the run, clearly
        not_ok("the schema %s loads" % schema, e)
        print("%d passed, %d failed" % (PASS, FAIL))
        return 1
    if selftest:
        self_test(c)
    lines = nfiles = invalid = 0
    for f in files_of(paths):
        nfiles += 1
        bad = []
        n = 0
        with open(f, "rb") as fh:
            for i, raw in enumerate(fh, 1):
                n += 1
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    bad.append("%s:%d: not UTF-8 (%s)" % (f, i, e))
                    continue
                if not line.endswith("\n"):
                    bad.append("%s:%d: no newline at the end: %s" % (f, i, line))
                    continue
                e = c.error(line)
                if e:
                    bad.append("%s:%d: %s" % (f, i, line.rstrip("\n")))
                    bad.append("  %s" % e)
        lines += n
        if bad:
            nbad = sum(1 for b in bad if not b.startswith("  "))
            invalid += nbad
            not_ok("%s: %d lines, %d invalid" % (os.path.basename(f), n, nbad), *bad)
    msg = "audit schema: %d lines from %d files validated" % (lines, nfiles)
    if lines == 0:
        if require:
            not_ok(msg + " (none: nothing was checked)")
        else:
            print("# " + msg)
    elif invalid:
        print("# %s, %d of them invalid" % (msg, invalid))
    else:
        ok(msg + ", every one valid")
    print("%d passed, %d failed" % (PASS, FAIL))
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
