#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Connect-protocol helper for run_agent.sh: wraps a JSON request in an
# envelope, and sums up a server stream (the events, then its end envelope).
#   connect.py wrap JSON          > body        (flag 0, 4-byte BE length, JSON)
#   connect.py events FILE        -> one JSON line: pid, stdout, stderr, pty,
#                                    keepalives, end event, end envelope
import base64
import json
import struct
import sys


def wrap(text):
    data = text.encode()
    sys.stdout.buffer.write(b"\x00" + struct.pack(">I", len(data)) + data)


def events(path):
    raw = open(path, "rb").read()
    out = {"pid": None, "stdout": "", "stderr": "", "pty": "", "keepalives": 0,
           "end": None, "trailer": None, "order": [], "bad": None}
    i = 0
    while i < len(raw):
        if len(raw) - i < 5:
            out["bad"] = "truncated envelope header"
            break
        flags = raw[i]
        (n,) = struct.unpack(">I", raw[i + 1:i + 5])
        body = raw[i + 5:i + 5 + n]
        if len(body) != n:
            out["bad"] = "truncated envelope"
            break
        i += 5 + n
        msg = json.loads(body)
        if flags & 2:
            out["trailer"] = msg
            if i != len(raw):
                out["bad"] = "bytes after the end envelope"
            break
        ev = msg["event"]
        kind = next(iter(ev))
        out["order"].append(kind)
        if kind == "start":
            out["pid"] = ev["start"]["pid"]
        elif kind == "data":
            for k, v in ev["data"].items():
                out[k] += base64.b64decode(v).decode(errors="replace")
        elif kind == "keepalive":
            out["keepalives"] += 1
        elif kind == "end":
            out["end"] = ev["end"]
    print(json.dumps(out))


if __name__ == "__main__":
    if sys.argv[1] == "wrap":
        wrap(sys.argv[2])
    elif sys.argv[1] == "events":
        events(sys.argv[2])
    else:
        sys.exit("usage: connect.py wrap JSON | events FILE")
