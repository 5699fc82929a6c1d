#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Ctrl-A x at the console ends cubicle with status 130 (issue 16).

    console-escape.py CUBICLE CONFIG

Runs `CUBICLE run CONFIG` on a pseudo-terminal (its console is stdio), waits
for the guest, types Ctrl-A h until the console lists its escapes (it is
then in raw mode and reading), types Ctrl-A x and checks the exit status:
130, "stopped at the console", not 0 (a guest reboot). Prints one TAP line; exits 0 or 1. The VM must
still run when the keys come (an idle payload guest).
"""
import os
import pty
import select
import sys
import time


def main():
    cub, cfg = sys.argv[1], sys.argv[2]
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(cub, [cub, "run", cfg])
    seen = b""
    deadline = time.monotonic() + 120
    sent = False
    asked = 0.0
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        if not sent and b"guest: up" in seen:
            if b"escapes: Ctrl-A x" in seen:
                os.write(fd, b"\x01x")
                sent = True
            elif time.monotonic() - asked > 2:
                os.write(fd, b"\x01h")
                asked = time.monotonic()
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("not ok - Ctrl-A x: cubicle still ran after 120 s (keys sent: %s)" % sent)
        print("#   " + seen.decode(errors="replace")[-600:].replace("\n", "\n#   "))
        return 1
    if not done:
        _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if sent and code == 130:
        print("ok - Ctrl-A x at the console: cubicle exited 130 (a guest reboot is 0)")
        return 0
    print("not ok - Ctrl-A x: exit status %d, keys sent: %s" % (code, sent))
    print("#   " + seen.decode(errors="replace")[-600:].replace("\n", "\n#   "))
    return 1


if __name__ == "__main__":
    sys.exit(main())
