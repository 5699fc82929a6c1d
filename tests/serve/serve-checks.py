#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`cubicle serve` under bad and heavy use (issue 15, part 4), over plain HTTP.

Usage: serve-checks.py URL API_KEY
Wrong API key, unknown sandbox, malformed JSON, template build requests
refused, a wrong access token, a
client that disconnects mid-stream, then 200 concurrent requests: each
gets its documented status and {"code", "message"} body, and the server
keeps serving. Needs a template "base". Prints TAP-ish lines; exit 1 on a
failure.
"""
import calendar
import http.client
import json
import os
import random
import re
import socket
import struct
import sys
import threading
import time
import urllib.parse

url, key = sys.argv[1], sys.argv[2]
u = urllib.parse.urlparse(url)
host, port = u.hostname, u.port
fails = 0


def ok(cond, name, why=""):
    global fails
    print(("ok - " if cond else "not ok - ") + name + ("" if cond else ": " + why), flush=True)
    if not cond:
        fails += 1


def call(method, path, body=None, headers=None, raw=None):
    c = http.client.HTTPConnection(host, port, timeout=60)
    h = {"X-API-Key": key}
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    b = r.read()
    c.close()
    try:
        j = json.loads(b) if b else None
    except ValueError:
        j = b
    return r.status, j, r


def err_body(j, code):
    return isinstance(j, dict) and j.get("code") == code and isinstance(j.get("message"), str)


st, j, _ = call("GET", "/v2/sandboxes", headers={"X-API-Key": "e2b_wrong"})
ok(st == 401 and err_body(j, 401), "a wrong API key: 401 {code, message}", f"{st} {j}")
st, j, _ = call("GET", "/sandboxes", headers={"X-API-Key": ""})
ok(st == 401 and err_body(j, 401), "no API key: 401", f"{st} {j}")
st, j, _ = call("GET", "/sandboxes", headers={"X-API-Key": "", "Authorization": "Bearer " + key})
ok(st == 200 and isinstance(j, list), "Authorization: Bearer KEY is accepted", f"{st} {j}")
for m, p in (("GET", "/sandboxes/nosuchbox"), ("DELETE", "/sandboxes/nosuchbox"),
             ("POST", "/sandboxes/nosuchbox/pause"), ("POST", "/v2/sandboxes/nosuchbox/connect"),
             ("POST", "/sandboxes/nosuchbox/timeout"), ("POST", "/sandboxes/nosuchbox/refreshes")):
    st, j, _ = call(m, p, body={"timeout": 10} if m == "POST" else None)
    ok(st == 404 and err_body(j, 404), f"unknown sandbox: {m} {p}: 404", f"{st} {j}")
st, j, _ = call("POST", "/v2/sandboxes", raw="{not json")
ok(st == 400 and err_body(j, 400), "malformed JSON: 400", f"{st} {j}")
st, j, _ = call("POST", "/v2/sandboxes", body={"templateID": "no-such-template"})
ok(st == 404 and err_body(j, 404) and "no-such-template" in j["message"], "unknown template: 404", f"{st} {j}")
st, j, _ = call("POST", "/v2/sandboxes", body={"templateID": "base", "volumeMounts": [{"name": "v", "path": "/mnt/v"}]})
ok(st == 501 and err_body(j, 501) and "volume" in j["message"], "a create with volumeMounts: 501, not a sandbox without them", f"{st} {j}")
# what serve has not built is refused, never a sandbox without it
for net, word in (({"egressProxy": {"address": "proxy.example.com:1080"}}, "egressProxy"),
                  ({"rules": {"api.example.com": [{"transform": {"headers": {"X-A": "b"}}}]}}, "rules"),
                  ({"httpsPorts": [3000]}, "httpsPorts")):
    st, j, _ = call("POST", "/v2/sandboxes", body={"templateID": "base", "network": net})
    ok(st == 501 and err_body(j, 501) and word in j["message"], f"a create with network.{word}: 501", f"{st} {j}")
for mask in ("", "a b", "x\r\nEvil: 1", "h" * 201, 42):
    st, j, _ = call("POST", "/v2/sandboxes", body={"templateID": "base", "network": {"maskRequestHost": mask}})
    ok(st == 400 and err_body(j, 400) and "maskRequestHost" in j["message"], f"a create with maskRequestHost {mask!r:.20}: 400",
       f"{st} {j}")
for m, p, what in (("GET", "/volumes", "volumes"), ("POST", "/volumes", "volumes"), ("GET", "/volumes/v1", "volumes"),
                   ("DELETE", "/volumes/v1", "volumes"), ("GET", "/secrets", "secrets"), ("POST", "/secrets", "secrets"),
                   ("DELETE", "/secrets/s1", "secrets")):
    st, j, _ = call(m, p, body={"name": "v"} if m == "POST" else None)
    ok(st == 501 and err_body(j, 501) and what in j["message"], f"{m} {p}: 501, {what} not built", f"{st} {j}")
st, j, _ = call("GET", "/files?path=%2Fetc%2Fhostname&signature=v1_AAAA")
ok(st == 401 and err_body(j, 401) and "signature" in j["message"], "a signed file link no sandbox signed: 401", f"{st} {j}")
st, j, _ = call("POST", "/v2/sandboxes", body={"templateID": 7})
ok(st == 400 and err_body(j, 400), "templateID not a string: 400", f"{st} {j}")
for body, what in (({"autoResume": True}, "autoResume not an object"),
                   ({"autoResume": {"enabled": "yes"}}, "autoResume.enabled not a boolean"),
                   ({"autoResume": {"enabled": True}}, "autoResume without autoPause")):
    st, j, _ = call("POST", "/v2/sandboxes", body=dict(body, templateID="base"))
    ok(st == 400 and err_body(j, 400) and "autoResume" in j["message"], f"a create with {what}: 400", f"{st} {j}")
st, j, _ = call("GET", "/nowhere")
ok(st == 404 and err_body(j, 404), "unknown path: 404", f"{st} {j}")
st, j, _ = call("GET", "/health", headers={"E2b-Sandbox-Id": "nosuchbox", "E2b-Sandbox-Port": "49983"})
ok(st == 502 and err_body(j, 502), "data plane, unknown sandbox: 502", f"{st} {j}")

# template builds (Template.build's calls): what is refused, and why
st, j, _ = call("POST", "/v3/templates", body={"name": "bad name"})
ok(st == 400 and err_body(j, 400), "build of a name with a space: 400", f"{st} {j}")
st, j, _ = call("POST", "/v3/templates", body={"name": "base"})
ok(st == 409 and err_body(j, 409) and "template build" in j["message"],
   "build over a template `cubicle template build` made: 409", f"{st} {j}")
st, bj, _ = call("POST", "/v3/templates", body={"name": "checks-build:v1", "tags": ["x"]})
ok(st == 202 and bj.get("templateID") == "checks-build" and bj.get("tags") == ["v1", "x"] and bj.get("buildID"),
   "build requested: 202 {templateID: NAME, buildID, tags: the name's and the list's}", f"{st} {bj}")
bid = bj.get("buildID", "none") if isinstance(bj, dict) else "none"
h = "ab" * 32
st, j, _ = call("GET", f"/templates/checks-build/files/{h[:-1]}")
ok(st == 400 and err_body(j, 400), "files link of a hash that is not SHA-256 hex: 400", f"{st} {j}")
st, link, _ = call("GET", f"/templates/checks-build/files/{h}")
ok(st == 201 and link.get("present") is False and f"/templates/checks-build/files/{h}?upload=" in link.get("url", ""),
   "files link: 201 {present: false, url}", f"{st} {link}")
st, j, _ = call("PUT", f"/templates/checks-build/files/{h}?upload=wrong", raw=b"data", headers={"X-API-Key": ""})
ok(st == 401 and err_body(j, 401), "an upload with a wrong token and no key: 401", f"{st} {j}")
for body, what in (({"fromImage": "debian:12"}, "fromImage (this serve has no image_vm)"),
                   ({"fromImage": "Bad/Ref:v1"}, "a fromImage that is no image reference"),
                   ({"fromImage": "debian:12", "fromTemplate": "base"}, "both fromImage and fromTemplate"),
                   ({"fromImage": "debian:12", "fromImageRegistry": {"type": "registry", "username": "u"}},
                    "fromImageRegistry without a password"),
                   ({"fromTemplate": "no-such-template"}, "an unknown fromTemplate"),
                   ({"steps": [{"type": "FROB", "args": []}]}, "an unknown step type"),
                   ({"steps": [{"type": "COPY", "args": ["a", "/a"], "filesHash": h}]}, "a COPY whose files were not uploaded"),
                   ({"steps": [{"type": "ENV", "args": ["A"]}]}, "an ENV without a value"),
                   ({"steps": [{"type": "WORKDIR", "args": ["relative"]}]}, "a relative WORKDIR")):
    st, j, _ = call("POST", f"/v2/templates/checks-build/builds/{bid}", body=body)
    ok(st == 400 and err_body(j, 400), f"build start with {what}: 400", f"{st} {j}")
st, j, _ = call("POST", f"/v2/templates/checks-build/builds/{bid}",
                body={"fromImage": "x.dkr.ecr.eu-west-1.amazonaws.com/img:1",
                      "fromImageRegistry": {"type": "aws", "awsAccessKeyId": "a", "awsSecretAccessKey": "b",
                                            "awsRegion": "eu-west-1"}})
ok(st == 501 and err_body(j, 501) and "AWS" in j.get("message", ""),
   "build start with an AWS fromImageRegistry: 501, not built", f"{st} {j}")
st, j, _ = call("POST", "/v2/templates/checks-build/builds/nosuchbuild", body={})
ok(st == 404 and err_body(j, 404), "start of an unknown build: 404", f"{st} {j}")
st, j, _ = call("GET", f"/templates/checks-build/builds/{bid}/status?logsOffset=x")
ok(st == 400 and err_body(j, 400), "status with a bad logsOffset: 400", f"{st} {j}")
st, j, _ = call("GET", f"/templates/checks-build/builds/{bid}/status")
ok(st == 200 and j.get("status") == "waiting" and j.get("logEntries") == [], "status of a build not started: waiting", f"{st} {j}")
st, j, _ = call("GET", "/templates/aliases/no-such-template")
ok(st == 404 and err_body(j, 404), "alias of no template: 404", f"{st} {j}")
st, j, _ = call("GET", "/templates/aliases/base")
ok(st == 200 and j == {"templateID": "base", "public": False}, "alias of base: 200", f"{st} {j}")
for body, code, what in (({"target": "base", "tags": ["prod"]}, 409, "to a template `cubicle template build` made"),
                         ({"target": "no-such-template", "tags": ["prod"]}, 404, "to no template"),
                         ({"target": "base", "tags": ["default"]}, 400, "named default"),
                         ({"target": "base"}, 400, "none")):
    st, j, _ = call("POST", "/templates/tags", body=body)
    ok(st == code and err_body(j, code), f"tags assigned {what}: {code}", f"{st} {j}")
st, j, _ = call("GET", "/templates/no-such-template/tags")
ok(st == 404 and err_body(j, 404), "tags of no template: 404", f"{st} {j}")

# one sandbox for the data-plane checks
st, sbx, _ = call("POST", "/v2/sandboxes", body={"templateID": "base", "timeout": 300})
ok(st == 201 and sbx.get("sandboxID") and sbx.get("envdAccessToken"), "create: 201 with sandboxID and envdAccessToken", f"{st} {sbx}")
sid, tok = sbx["sandboxID"], sbx["envdAccessToken"]
dp = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983"}
st, j, _ = call("GET", "/files?path=/etc/hostname", headers=dict(dp, **{"X-Access-Token": "wrong"}))
ok(st == 401, "a wrong access token: 401 from the agent", f"{st} {j}")
st, j, _ = call("GET", "/files?path=/etc/hostname", headers=dp)
ok(st == 401, "no access token: 401", f"{st} {j}")
st, j, _ = call("GET", f"/sandboxes/{sid}/metrics")
need = ("timestamp", "timestampUnix", "cpuCount", "cpuUsedPct", "memUsed", "memTotal", "memCache",
        "diskUsed", "diskTotal")
ok(st == 200 and isinstance(j, list) and len(j) >= 1 and all(all(k in m for k in need) for m in j) and
   time.strftime("%Y-%m-%dT", time.gmtime()) in j[-1]["timestamp"],
   "metrics: every field E2B's API requires (timestamp too: SDK 2.51 reads it)", f"{st} {j}")
# a series: serve samples a running sandbox every 5 s and keeps an hour
t0 = time.time()
while time.time() - t0 < 30:
    st, j, _ = call("GET", f"/sandboxes/{sid}/metrics")
    if st != 200 or len(j) >= 3:
        break
    time.sleep(1)
ts = [m["timestampUnix"] for m in j] if st == 200 else []
ok(st == 200 and len(j) >= 3 and ts == sorted(ts) and ts[-1] - ts[0] >= 5 and
   all(0 <= m["cpuUsedPct"] <= 100 and m["memUsed"] > 0 for m in j),
   "metrics: samples kept every 5 s, oldest first, then one now", f"{st} {j}")
if len(ts) >= 3:
    st, j, _ = call("GET", f"/sandboxes/{sid}/metrics?start={ts[0]}&end={ts[0]}")
    ok(st == 200 and [m["timestampUnix"] for m in j] == [t for t in ts if t == ts[0]],
       "metrics?start=&end=: only the samples in that range (none taken now)", f"{st} {j}")
    st, j, _ = call("GET", f"/sandboxes/{sid}/metrics?start={ts[-1]}")
    ok(st == 200 and 1 <= len(j) and all(m["timestampUnix"] >= ts[-1] for m in j),
       "metrics?start=: from then to now", f"{st} {j}")
for q in ("start=x", "end=-1", f"start={int(time.time()) + 100}"):
    st, j, _ = call("GET", f"/sandboxes/{sid}/metrics?{q}")
    ok(st == 400 and err_body(j, 400), f"metrics?{q}: 400", f"{st} {j}")

st, j, _ = call("GET", f"/sandboxes/metrics?sandbox_ids={sid},nosuchbox,{sid}")
ok(st == 200 and isinstance(j, dict) and list(j.get("sandboxes", {})) == [sid] and
   all(k in j["sandboxes"][sid] for k in need),
   "metrics of many (sandbox_ids): {sandboxes: {ID: metric}}, an unknown ID left out", f"{st} {j}")
for q, what in (("", "no sandbox_ids"), ("?sandbox_ids=", "an empty sandbox_ids"),
                ("?sandbox_ids=" + ",".join(f"x{i}" for i in range(101)), "101 IDs")):
    st, j, _ = call("GET", "/sandboxes/metrics" + q)
    ok(st == 400 and err_body(j, 400) and "sandbox_ids" in j["message"], f"metrics of many with {what}: 400", f"{st} {j}")
st, j, _ = call("POST", "/sandboxes/metrics", body={})
ok(st == 405 and err_body(j, 405), "POST /sandboxes/metrics: 405", f"{st} {j}")


# refreshes (E2B's keep-alive): at least DURATION (15 s the least and the
# default) from now, never shorter than the sandbox had
def end_in():
    st, j, _ = call("GET", f"/sandboxes/{sid}")
    return calendar.timegm(time.strptime(j["endAt"][:19], "%Y-%m-%dT%H:%M:%S")) - time.time()


call("POST", f"/sandboxes/{sid}/timeout", body={"timeout": 300})  # however long the checks above took
left = end_in()
st, j, _ = call("POST", f"/sandboxes/{sid}/refreshes", body={"duration": 30})
after = end_in()
ok(st == 204 and 250 < left < 301 and abs(after - left) < 3,
   "refresh for 30 s of a sandbox with ~300 s left: 204, its end unchanged", f"{st} {j} {left:.0f} -> {after:.0f}")
call("POST", f"/sandboxes/{sid}/timeout", body={"timeout": 10})
for body, want, what in ((None, 15, "no body: 15 s"), ({"duration": 3}, 15, "3 s: 15 s, the least"),
                         ({"duration": 120}, 120, "120 s: 120 s")):
    st, j, _ = call("POST", f"/sandboxes/{sid}/refreshes", body=body)
    after = end_in()
    ok(st == 204 and want - 5 < after <= want + 1, f"refresh of a sandbox with less left, {what}", f"{st} {j} {after:.0f}")
for body in ({"duration": 3601}, {"duration": -1}, {"duration": "60"}):
    st, j, _ = call("POST", f"/sandboxes/{sid}/refreshes", body=body)
    ok(st == 400 and err_body(j, 400) and "duration" in j["message"], f"refresh with {body}: 400", f"{st} {j}")
st, j, _ = call("GET", f"/sandboxes/{sid}/refreshes")
ok(st == 405 and err_body(j, 405), "GET of refreshes: 405", f"{st} {j}")
call("POST", f"/sandboxes/{sid}/timeout", body={"timeout": 300})


# its logs: the VMM's log file as E2B's log entries
def entry_ok(e):
    return (isinstance(e, dict) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", e.get("timestamp", "")) and
            e.get("level") in ("debug", "info", "warn", "error") and isinstance(e.get("message"), str) and
            e.get("fields", {}).get("source") in ("vmm", "console"))


st, j, _ = call("GET", f"/sandboxes/{sid}/logs")
ok(st == 200 and isinstance(j, dict) and isinstance(j.get("logs"), list) and len(j["logs"]) >= 1 and
   len(j["logs"]) == len(j.get("logEntries", [])) and all(entry_ok(e) for e in j["logEntries"]) and
   all(l.get("line") == e["message"] and l.get("timestamp") == e["timestamp"] for l, e in zip(j["logs"], j["logEntries"])),
   "logs (v1): its VMM's log as logs and logEntries, alike", f"{st} {j}")
st, fwd, _ = call("GET", f"/v2/sandboxes/{sid}/logs")
ok(st == 200 and isinstance(fwd, dict) and len(fwd.get("logs", [])) >= 1 and all(entry_ok(e) for e in fwd["logs"]) and
   [e["timestamp"] for e in fwd["logs"]] == sorted(e["timestamp"] for e in fwd["logs"]),
   f"logs (v2): {len((fwd or {}).get('logs', []))} entries, oldest first; the last: "
   f"{((fwd or {}).get('logs') or [{}])[-1].get('fields')} {((fwd or {}).get('logs') or [{}])[-1].get('message', '')[:80]!r}",
   f"{st} {fwd}")
st, j, _ = call("GET", f"/v2/sandboxes/{sid}/logs?limit=1&direction=backward")
ok(st == 200 and len(j.get("logs", [])) == 1 and entry_ok(j["logs"][0]) and
   j["logs"][0]["timestamp"] >= max(e["timestamp"] for e in fwd["logs"]),
   "logs (v2) limit=1, backward: the newest", f"{st} {j}")
st, j, _ = call("GET", f"/v2/sandboxes/{sid}/logs?limit=2")
ok(st == 200 and j.get("logs") == fwd["logs"][:2], "logs (v2) limit=2: the oldest two", f"{st} {j}")
if os.environ.get("SERVE_FAKE_VMM"):  # (a real VMM's log may grow meanwhile)
    st, j, _ = call("GET", f"/v2/sandboxes/{sid}/logs?limit=2&direction=backward")
    ok(st == 200 and j.get("logs") == fwd["logs"][-2:][::-1], "logs (v2) limit=2, backward: the newest two, newest first",
       f"{st} {j}")
    st, j, _ = call("GET", f"/v2/sandboxes/{sid}/logs?direction=backward&cursor=0")
    ok(st == 200 and j == {"logs": []}, "logs (v2) backward from 1970: none", f"{st} {j}")
st, j, _ = call("GET", f"/v2/sandboxes/{sid}/logs?level=warn")
warned = [e for e in (j or {}).get("logs", []) if "fake-vmm: playing a VMM" in e["message"]]
ok(st == 200 and all(e["level"] in ("warn", "error") for e in j.get("logs", [])) and
   (not os.environ.get("SERVE_FAKE_VMM") or
    (len(warned) == 1 and warned[0]["level"] == "warn" and warned[0]["fields"]["source"] == "vmm")),
   "logs (v2) level=warn: warnings and errors only" + (" (the fake VMM's warning, source vmm)" if os.environ.get("SERVE_FAKE_VMM") else ""),
   f"{st} {j}")
st, j, _ = call("GET", f"/v2/sandboxes/{sid}/logs?search=no-such-text-in-a-log")
ok(st == 200 and j == {"logs": []}, "logs (v2) search for what no line has: none", f"{st} {j}")
st, j, _ = call("GET", f"/v2/sandboxes/{sid}/logs?cursor={int(time.time() * 1000) + 3600000}")
ok(st == 200 and j == {"logs": []}, "logs (v2) from an hour ahead: none", f"{st} {j}")
for q in ("limit=1001", "direction=sideways", "level=loud", "cursor=soon", "search=" + "x" * 257):
    st, j, _ = call("GET", f"/v2/sandboxes/{sid}/logs?{q}")
    ok(st == 400 and err_body(j, 400), f"logs (v2) {q[:20]}: 400", f"{st} {j}")
st, j, _ = call("GET", "/v2/sandboxes/no-such-sandbox/logs")
ok(st == 404 and err_body(j, 404), "logs of no sandbox: 404", f"{st} {j}")

st, j, _ = call("GET", "/health", headers=dict(dp, **{"E2b-Sandbox-Port": "1"}))
ok(st == 502 and err_body(j, 502) and "nothing listens" in j["message"], "a port nothing listens on: 502", f"{st} {j}")
for p in ("70000", "0", "x"):
    st, j, _ = call("GET", "/health", headers=dict(dp, **{"E2b-Sandbox-Port": p}))
    ok(st == 400 and err_body(j, 400), f"E2b-Sandbox-Port {p}: 400, not a TCP port", f"{st} {j}")
for net, word in (({"egressProxy": {"address": "proxy.example.com:1080"}}, "egressProxy"),
                  ({"rules": {"api.example.com": []}}, "rules")):
    st, j, _ = call("PUT", f"/sandboxes/{sid}/network", body=net)
    ok(st == 501 and err_body(j, 501) and word in j["message"], f"a network update with {word}: 501", f"{st} {j}")

if os.environ.get("SERVE_FAKE_VMM"):
    # a port of the guest other than the agent's: the fake VMM's guest is
    # this host, so a server here on port GP is the guest's server on GP
    import http.server

    seen = []

    class Guest(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get_all("Host"))
            b = b"guest-port-ok " + self.path.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)

        def log_message(self, *a):
            pass

    gs = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Guest)
    threading.Thread(target=gs.serve_forever, daemon=True).start()
    gp = gs.server_address[1]
    st, j, _ = call("GET", "/hello", headers=dict(dp, **{"E2b-Sandbox-Port": str(gp)}))
    ok(st == 200 and j == b"guest-port-ok /hello" and seen and seen[-1] == [f"{host}:{port}"],
       "a guest's own port: its server answers, the Host as the client sent it", f"{st} {j!r} {seen}")
    st, sb2, _ = call("POST", "/v2/sandboxes", body={
        "templateID": "base", "timeout": 120,
        "network": {"allowPublicTraffic": False, "maskRequestHost": "localhost:${PORT}"}})
    ok(st == 201 and sb2.get("trafficAccessToken"), "create with allowPublicTraffic false and maskRequestHost: 201 "
       "with a trafficAccessToken", f"{st} {sb2}")
    if st == 201:
        sid2 = sb2["sandboxID"]
        dp2 = {"E2b-Sandbox-Id": sid2, "E2b-Sandbox-Port": str(gp)}
        st, j, _ = call("GET", f"/sandboxes/{sid2}")
        ok(st == 200 and j.get("network") == {"allowPublicTraffic": False, "maskRequestHost": "localhost:${PORT}"},
           "its info has both", f"{st} {j}")
        n = len(seen)
        st, j, _ = call("GET", "/a", headers=dp2)
        ok(st == 403 and err_body(j, 403) and len(seen) == n, "its port without the traffic token: 403, not passed on",
           f"{st} {j} {seen[n:]}")
        st, j, _ = call("GET", "/a", headers=dict(dp2, **{"E2b-Traffic-Access-Token": "wrong"}))
        ok(st == 403 and len(seen) == n, "with a wrong traffic token: 403", f"{st} {j}")
        st, j, _ = call("GET", "/b", headers=dict(dp2, **{"E2b-Traffic-Access-Token": sb2["trafficAccessToken"],
                                                          "Host": "evil.example"}))
        ok(st == 200 and j == b"guest-port-ok /b" and seen[n:] == [[f"localhost:{gp}"]],
           "with its traffic token: answered, and the guest saw one Host, the mask's with its port", f"{st} {j!r} {seen[n:]}")
        st, j, _ = call("GET", "/files?path=/etc/hostname", headers=dict(dp2, **{"E2b-Sandbox-Port": "49983",
                                                                                 "X-Access-Token": sb2["envdAccessToken"]}))
        ok(st == 200, "the agent's port takes the masked Host too (files read)", f"{st} {j!r:.100}")
        st, j, _ = call("DELETE", f"/sandboxes/{sid2}")
        ok(st == 204, "kill it: 204", f"{st} {j}")
    gs.shutdown()


def start_stream(cmd):
    """A raw Connect server stream (process.Process/Start): the socket, once the start event came."""
    s = socket.create_connection((host, port), timeout=30)
    msg = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}}).encode()
    body = b"\0" + struct.pack(">I", len(msg)) + msg
    s.sendall(("POST /process.Process/Start HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: %s\r\n"
               "E2b-Sandbox-Port: 49983\r\nX-Access-Token: %s\r\nContent-Type: application/connect+json\r\n"
               "Connect-Protocol-Version: 1\r\nContent-Length: %d\r\n\r\n" % (sid, tok, len(body))).encode() + body)
    got = b""
    while b'"start"' not in got:
        d = s.recv(4096)
        if not d:
            break
        got += d
    return s, got


# a client that goes away mid-stream, five times
for i in range(5):
    s, got = start_stream("while :; do echo tick; sleep 0.2; done")
    if i == 0:
        ok(b"200 OK" in got and b'"start"' in got, "a streamed command starts through the proxy", repr(got[:200]))
    s.close()
time.sleep(0.5)
st, j, _ = call("GET", f"/sandboxes/{sid}")
ok(st == 200 and j.get("state") == "running", "after 5 clients left mid-stream the server still answers", f"{st} {j}")
def run_stream(cmd):
    """A command through the raw stream, to its end event: what came."""
    s, got = start_stream(cmd)
    while b'"end"' not in got and len(got) < 65536:
        d = s.recv(4096)
        if not d:
            break
        got += d
    s.close()
    return got


got = run_stream("echo after")
ok(b"YWZ0ZXIK" in got, "and the sandbox still runs commands", repr(got[-300:]))

# a web server the sandbox runs on a TCP port of its own (what the SDK's
# getHost(port) is for), reached through serve's data plane: the vsock
# reaches the agent, whose bridge connects to that port in the guest
wp = random.randint(20000, 40000)  # (with fake VMMs the guest is this host)
web, got = start_stream(f"mkdir -p /tmp/www-{wp} && echo guest-web-{wp} >/tmp/www-{wp}/index.html && "
                        f"echo $$ >/tmp/www-{wp}/pid && exec timeout 120 busybox httpd -f -p 127.0.0.1:{wp} -h /tmp/www-{wp}")
t0 = time.time()
while True:
    st, j, _ = call("GET", "/index.html", headers=dict(dp, **{"E2b-Sandbox-Port": str(wp)}))
    if st == 200 or time.time() - t0 > 60:
        break
    time.sleep(0.5)
ok(st == 200 and j == f"guest-web-{wp}\n".encode(), f"a web server in the sandbox (busybox httpd on its port {wp}): "
   f"its page through serve ({time.time() - t0:.1f} s after its start)", f"{st} {j!r:.200}")
st, j, _ = call("GET", "/nothing-here", headers=dict(dp, **{"E2b-Sandbox-Port": str(wp)}))
ok(st == 404, "and its own 404 for a page it has not", f"{st} {j!r:.200}")
web.close()
run_stream(f"kill $(cat /tmp/www-{wp}/pid); rm -rf /tmp/www-{wp}")

# 200 concurrent requests: control plane and data plane mixed
res = []
lock = threading.Lock()


def one(i):
    t0 = time.time()
    try:
        if i % 2:
            st, j, _ = call("GET", "/v2/sandboxes")
        else:
            st, j, _ = call("GET", "/health", headers=dp)
        good = st in (200, 204)
    except Exception as e:  # noqa: BLE001 - any failure is a finding
        good, st = False, repr(e)
    with lock:
        res.append((good, st, time.time() - t0))


t0 = time.time()
ths = [threading.Thread(target=one, args=(i,)) for i in range(200)]
for t in ths:
    t.start()
for t in ths:
    t.join(120)
wall = time.time() - t0
bad = [r for r in res if not r[0]]
ok(len(res) == 200 and not bad and wall < 60,
   f"200 concurrent requests: all answered in {wall:.1f} s (slowest {max(r[2] for r in res):.2f} s)",
   f"{len(res)} answered, {len(bad)} bad {bad[:3]}, {wall:.1f} s")
st, j, _ = call("DELETE", f"/sandboxes/{sid}")
ok(st == 204, "kill: 204", f"{st} {j}")
st, j, _ = call("DELETE", f"/sandboxes/{sid}")
ok(st == 404 and err_body(j, 404), "kill again: 404", f"{st} {j}")
print(f"# {fails} failed")
sys.exit(1 if fails else 0)
