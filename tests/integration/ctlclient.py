#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# ctlclient.py - control-socket clients that misbehave, for test_control.sh.
# Every wait is bounded; every socket is closed on exit.
#
#   ctlclient.py flood SOCK HALF IDLE HOLD
#       opens HALF connections that write half a request ("lis", no newline)
#       and IDLE that write nothing, prints "ready" once all are connected,
#       keeps them HOLD seconds, then prints one line of what each got:
#       "busy=N deadline=N other=N open=N" (busy: answered "error: busy: ...";
#       deadline: answered an error about the time limit; other: any other
#       answer or a bare close; open: still open, no answer) and, if any
#       answer was not busy or deadline, the first such answer.
#   ctlclient.py split SOCK REQUEST PAUSE
#       sends REQUEST (a newline is added) a byte or two at a time, PAUSE
#       seconds apart, and prints the answer.
#   ctlclient.py silent SOCK LIMIT
#       connects, sends nothing, and prints how long (seconds) until the
#       broker closed, then the answer; "open" if not within LIMIT seconds.
import select
import signal
import socket
import sys
import time


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Blocking, as `sluice` connects: it waits while the listen backlog is
    # full (alarm() below bounds it).
    s.connect(path)
    s.settimeout(10)
    return s


def drain(s, limit):
    """What @s got until the broker closed it, or None if still open."""
    data = b""
    end = time.monotonic() + limit
    s.setblocking(False)
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return None
        r, _, _ = select.select([s], [], [], left)
        if not r:
            return None
        try:
            k = s.recv(65536)
        except (BlockingIOError, InterruptedError):
            continue
        except ConnectionResetError:
            return data
        if not k:
            return data
        data += k


def flood(path, half, idle, hold):
    socks = []
    try:
        for i in range(half + idle):
            s = connect(path)
            if i < half:
                s.sendall(b"lis")
            socks.append(s)
        print("ready", flush=True)
        time.sleep(hold)
        n = {"busy": 0, "deadline": 0, "other": 0, "open": 0}
        odd = ""
        for s in socks:
            got = drain(s, 0.05)
            if got is None:
                n["open"] += 1
            elif got.startswith(b"error: busy: "):
                n["busy"] += 1
            elif got.startswith(b"error: ") and b"within" in got:
                n["deadline"] += 1
            else:
                n["other"] += 1
                odd = odd or got.decode(errors="replace").strip()
        print(" ".join("%s=%d" % kv for kv in n.items()))
        if odd:
            print("first other answer: " + odd[:200])
    finally:
        for s in socks:
            s.close()


def split(path, req, pause):
    s = connect(path)
    data = (req + "\n").encode()
    for i in range(0, len(data), 2):
        s.sendall(data[i:i + 2])
        time.sleep(pause)
    got = drain(s, 10)
    s.close()
    print("open" if got is None else got.decode(errors="replace"), end="")


def silent(path, limit):
    s = connect(path)
    t0 = time.monotonic()
    got = drain(s, limit)
    s.close()
    if got is None:
        print("open")
    else:
        print("%.2f" % (time.monotonic() - t0))
        print(got.decode(errors="replace"), end="")


def main():
    a = sys.argv
    # Whatever the broker does, this process ends: the test waits on it.
    signal.alarm(60)
    if len(a) == 6 and a[1] == "flood":
        flood(a[2], int(a[3]), int(a[4]), float(a[5]))
    elif len(a) == 5 and a[1] == "split":
        split(a[2], a[3], float(a[4]))
    elif len(a) == 4 and a[1] == "silent":
        silent(a[2], float(a[3]))
    else:
        sys.exit("usage: ctlclient.py flood SOCK HALF IDLE HOLD | split SOCK REQ PAUSE | "
                 "silent SOCK LIMIT")


if __name__ == "__main__":
    main()
