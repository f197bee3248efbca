#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""pipehog.py - spends its user's pipe pages, for test_pipes_small.sh.

  pipehog.py READY RELEASE

Makes pipes until a new one is smaller than 64 KiB (its user is over
fs.pipe-user-pages-soft; at most 8,000 pipes), writes "ready N" (or
"unlimited N" when none came out small, "out-of-descriptors N" when its
descriptors ran out first) to READY, holds them until the
file RELEASE exists (60 s at most), then closes them all and exits."""
import fcntl
import os
import resource
import sys
import time

F_GETPIPE_SZ = 1032


def main():
    ready, release = sys.argv[1], sys.argv[2]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    pipes, small, word = [], False, "unlimited"
    while len(pipes) < 8000 and not small:
        try:
            r, w = os.pipe()
        except OSError:
            word = "out-of-descriptors"  # RLIMIT_NOFILE's hard limit
            break
        pipes.append((r, w))
        small = fcntl.fcntl(r, F_GETPIPE_SZ) < 65536
    with open(ready + ".tmp", "w") as f:
        f.write("%s %d\n" % ("ready" if small else word, len(pipes)))
    os.rename(ready + ".tmp", ready)
    end = time.monotonic() + 60
    while not os.path.exists(release) and time.monotonic() < end:
        time.sleep(0.05)
    for r, w in pipes:
        os.close(r)
        os.close(w)


if __name__ == "__main__":
    main()
