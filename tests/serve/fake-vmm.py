#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for `cubicle restore` where there is no KVM (tests/serve/run_serve_host.sh).

It plays what cubicle-serve sees of a VMM, so serve's own logic (routing,
the data plane, lifecycle, state folder, restarts) is tested on any host:
  - the API socket (--api-sock): PATCH /vm, PUT /snapshot/create (writes a
    folder whose manifest.json keeps the config tree, with the socket paths
    this process was given), PUT /stop, GET /vm/config;
  - the vsock socket (the tree's devices[].uds_path, after --set): the
    CONNECT handshake, joined to a real cubicle-agent listening on a Unix
    socket beside the API socket (so the SDK talks to the real agent; a
    sandbox's other ports are the agent's bridge to this host's 127.0.0.1);
  - its guest is this host: files and commands are the host's.
It is not the VMM and tests nothing of it; the nested tests do that.
  - `exec` and `cp` (a template build's steps) are the real cubicle's
    (FAKE_CUBICLE), which reach the agent through that vsock socket.
Usage: fake-vmm.py restore SNAP --api-sock PATH --id ID [--paused] [--seccomp M] [--set K=V]...
       fake-vmm.py exec|cp ARG...
Environment: FAKE_AGENT (the cubicle-agent binary), FAKE_CUBICLE (cubicle),
FAKE_VMM_FAIL=1 to exit at once.
"""
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time


def main():
    a = sys.argv[1:]
    if a and a[0] in ("exec", "cp") and os.environ.get("FAKE_CUBICLE"):
        os.execv(os.environ["FAKE_CUBICLE"], ["cubicle"] + a)
    if not a or a[0] != "restore":
        print("fake-vmm: only `restore` is played", file=sys.stderr)
        return 1
    snap, api, sets = a[1], None, []
    i = 2
    while i < len(a):
        if a[i] == "--api-sock":
            api = a[i + 1]
        elif a[i] == "--set":
            sets.append(a[i + 1])
        i += 2 if a[i] in ("--api-sock", "--id", "--seccomp", "--set") else 1
    if os.environ.get("FAKE_VMM_FAIL") == "1":
        print("cubicle: error: fake-vmm: told to fail (FAKE_VMM_FAIL=1)", file=sys.stderr)
        return 1
    with open(os.path.join(snap, "manifest.json")) as f:
        manifest = json.load(f)
    tree = manifest["config"]["tree"]
    for s in sets:
        key, val = s.split("=", 1)
        parts = key.split(".")
        if parts[0] != "devices":
            continue
        dev = next(d for d in tree["devices"] if d.get("id") == parts[1])
        node = dev
        for p in parts[2:-1]:
            node = node[p]
        node[parts[-1]] = val
    vs = next(d["uds_path"] for d in tree["devices"] if "uds_path" in d)
    here = os.path.dirname(api)
    agent_sock = os.path.join(here, "agent.sock")
    for p in (agent_sock, vs, api):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
    libc = ctypes.CDLL(None, use_errno=True)

    def agent_setup():
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: it ends with this "VMM"
        # The SDK runs commands with `bash -l`: keep the host's dotfiles (a
        # slow pyenv init in root's .bashrc) out of this stand-in guest.
        if os.geteuid() == 0 and libc.unshare(0x20000) == 0:  # CLONE_NEWNS
            libc.mount(None, b"/", None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE
            home = os.path.expanduser("~")
            for f in (".bashrc", ".profile", ".bash_profile", ".bash_login"):
                p = os.path.join(home, f).encode()
                if os.path.exists(p):
                    libc.mount(b"/dev/null", p, None, 0x1000, None)  # MS_BIND

    agent = subprocess.Popen(
        [os.environ["FAKE_AGENT"], "--listen", "unix:" + agent_sock, "--ready-port", "0",
         "--cmdline", "/dev/null"], preexec_fn=agent_setup)
    for _ in range(200):
        if os.path.exists(agent_sock):
            break
        time.sleep(0.01)
    state = {"paused": "--paused" in a}

    def pipe(src, dst):
        try:
            while True:
                d = src.recv(65536)
                if not d:
                    break
                dst.sendall(d)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def vsock_conn(c):
        line = b""
        while not line.endswith(b"\n") and len(line) < 64:
            b = c.recv(1)
            if not b:
                c.close()
                return
            line += b
        if line.strip() != b"CONNECT 49983":
            c.close()
            return
        up = socket.socket(socket.AF_UNIX)
        try:
            up.connect(agent_sock)
        except OSError:
            c.close()
            return
        c.sendall(b"OK 1073741824\n")
        threading.Thread(target=pipe, args=(c, up), daemon=True).start()
        threading.Thread(target=pipe, args=(up, c), daemon=True).start()

    def serve(path, handler):
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        s.listen(128)  # the VMM's vsock backlog
        def loop():
            while True:
                c, _ = s.accept()
                threading.Thread(target=handler, args=(c,), daemon=True).start()
        threading.Thread(target=loop, daemon=True).start()

    def reply(c, status, body=b""):
        c.sendall(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\nContent-Type: application/json\r\n\r\n%s"
                  % (status, len(body), body))

    def api_conn(c):
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = c.recv(4096)
            if not d:
                return
            buf += d
        head, body = buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        method, path, _ = lines[0].split(" ")
        n = 0
        for h in lines[1:]:
            if h.lower().startswith("content-length:"):
                n = int(h.split(":")[1])
        while len(body) < n:
            body += c.recv(4096)
        if method == "PATCH" and path == "/vm":
            state["paused"] = json.loads(body)["state"] == "Paused"
            reply(c, 204)
        elif method == "PUT" and path == "/snapshot/create":
            if not state["paused"]:
                reply(c, 400, b'{"fault_message":"the VM is running: pause it first"}')
                return
            d = json.loads(body)["snapshot_path"]
            os.makedirs(d + ".tmp")
            with open(d + ".tmp/manifest.json", "w") as f:
                json.dump(manifest, f)
            os.rename(d + ".tmp", d)
            reply(c, 204)
        elif method == "PUT" and path == "/stop":
            reply(c, 204)
            agent.kill()
            os.unlink(api)
            os._exit(0)
        elif method == "GET" and path == "/":
            reply(c, 200, json.dumps({"state": "Paused" if state["paused"] else "Running"}).encode())
        elif method == "GET" and path == "/vm/config":
            reply(c, 200, json.dumps({"vsock": {"uds_path": vs}}).encode())
        else:
            reply(c, 400, b'{"fault_message":"fake-vmm: not played"}')
        c.close()

    serve(vs, vsock_conn)
    serve(api, api_conn)
    # a line as the real VMM writes one to a file (its time first), for
    # the logs API's checks (serve-checks.py)
    print(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".000Z cubicle: warning: fake-vmm: playing a VMM",
          file=sys.stderr, flush=True)
    print("fake-vmm: running", snap, flush=True)
    agent.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
