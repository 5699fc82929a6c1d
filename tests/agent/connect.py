#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Connect-protocol helper for run_agent.sh: wraps a JSON request in an
# envelope, and sums up a server stream (the events, then its end envelope).
#   connect.py wrap JSON          > body        (flag 0, 4-byte BE length, JSON)
#   connect.py events FILE        -> one JSON line: pid, stdout, stderr, pty,
#                                    keepalives, end event, end envelope
#   connect.py bridge SOCK TOKEN  the port bridge (GET /cubicle/port) against
#                                 a TCP server of its own: TAP-ish lines
import base64
import json
import socket
import struct
import sys
import threading


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


def read_to_end(s):
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            return out
        out += b


def bridge(sock, token):
    # the "guest's" server: reads to the client's end, then answers and ends
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def serve_one(c):
        c.sendall(b"got:" + read_to_end(c))
        c.close()

    def loop():
        while True:
            c, _ = srv.accept()
            threading.Thread(target=serve_one, args=(c,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()

    def ask(p, tok=token, upgrade=True):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(20)
        s.connect(sock)
        s.sendall(f"GET /cubicle/port?port={p} HTTP/1.1\r\nHost: agent\r\nX-Access-Token: {tok}\r\n".encode() +
                  (b"Connection: Upgrade\r\nUpgrade: cubicle-port\r\n" if upgrade else b"") + b"\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(1)
            if not b:
                break
            head += b
        return s, head

    def echo(payload):
        s, head = ask(port)
        if not head.startswith(b"HTTP/1.1 101 "):
            s.close()
            return f"no 101: {head[:100]!r}"
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)  # the end, passed on as a half close
        out = read_to_end(s)
        s.close()
        return out == b"got:" + payload or f"got {out[:60]!r}... ({len(out)} bytes)"

    def check(cond, name):
        print(("ok - " if cond is True else "not ok - ") + name + ("" if cond is True else f": {cond}"), flush=True)

    check(echo(b"hello"), "port bridge: 101, bytes both ways, each end passed on")
    big = bytes(range(256)) * 8192  # 2 MiB
    check(echo(big), "port bridge: 2 MiB through it, unchanged")
    res = []
    ths = [threading.Thread(target=lambda i=i: res.append(echo(b"n%d" % i))) for i in range(40)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    bad = [r for r in res if r is not True]
    check(len(res) == 40 and not bad or f"{len(bad)} of {len(res)} wrong: {bad[:3]}", "port bridge: 40 at once")
    free = socket.create_server(("127.0.0.1", 0))
    fport = free.getsockname()[1]
    free.close()
    for p, tok, up, want, name in ((fport, token, True, b"HTTP/1.1 502 ", "a port nothing listens on: 502"),
                                   (port, "wrong", True, b"HTTP/1.1 401 ", "a wrong token: 401"),
                                   (port, token, False, b"HTTP/1.1 400 ", "no Upgrade header: 400"),
                                   (0, token, True, b"HTTP/1.1 400 ", "port 0: 400"),
                                   (65536, token, True, b"HTTP/1.1 400 ", "port 65536: 400")):
        s, head = ask(p, tok, up)
        if p == fport:
            head502, body = head, read_to_end(s)
        s.close()
        check(head.startswith(want) or repr(head[:120]), f"port bridge: {name}")
    # the 502's body: JSON as the agent's other answers, its length said, the port named
    try:
        j = json.loads(body)
        why = (j.get("code") == 502 and f"port {fport} " in j.get("message", "") and
               f"Content-Length: {len(body)}\r\n".encode() in head502) or f"{head502!r} {body!r}"
    except ValueError as e:
        why = f"not JSON ({e}): {head502!r} {body[:120]!r}"
    check(why, "port bridge: the 502 says which port, as JSON")


if __name__ == "__main__":
    if sys.argv[1] == "wrap":
        wrap(sys.argv[2])
    elif sys.argv[1] == "events":
        events(sys.argv[2])
    elif sys.argv[1] == "bridge":
        bridge(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: connect.py wrap JSON | events FILE | bridge SOCK TOKEN")
