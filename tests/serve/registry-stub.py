#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A container registry for the tests of `cubicle template pull` / --image.

  registry-stub.py make DIR [--broken-layer]
      (--broken-layer: the amd64 image's second layer is text, not a tar,
      under its right digest)
      writes a test image as an OCI image layout in DIR: an image index with
      an arm64 manifest first (a decoy), an attestation (unknown/unknown) and
      the amd64 one; the amd64 image has two layers (a gzip'd tar and a plain
      one: a whiteout, an opaque folder, owners, modes, a link); DIR/digests.json
      names the index's and the amd64 manifest's digests.
  registry-stub.py serve LAYOUT PORTFILE [OPTIONS]
      serves the OCI layout LAYOUT (a folder, or an oci-archive tarball) as
      repository test/img, tag v1, on 127.0.0.1 (its port written to PORTFILE)
      with the distribution API's GETs: /v2/test/img/manifests/REF and
      /v2/test/img/blobs/DIGEST, a blob redirected to
      http://localhost:PORT/cdn/DIGEST (another host name: credentials must
      not follow). GET /stats: what it saw.
      --auth bearer|basic|none  (bearer: a token from /token, which wants
                                 --user/--password when given)
      --user U --password P
      --corrupt      each image's first layer with one bit flipped
      --oversize     each image's first layer with a byte more than its size
      --lie          a manifest asked by digest answered with another
"""
import base64
import gzip
import hashlib
import http.server
import io
import json
import os
import sys
import tarfile
import threading

MT_INDEX = 'application/vnd.oci.image.index.v1+json'
MT_MAN = 'application/vnd.oci.image.manifest.v1+json'


def make(out, broken=False):
    blobs = {}

    def blob(data):
        d = hashlib.sha256(data).hexdigest()
        blobs[d] = data
        return 'sha256:' + d

    def layer(entries, gz):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode='w', format=tarfile.PAX_FORMAT) as t:
            for name, kind, data, uid, gid, mode, link in entries:
                ti = tarfile.TarInfo(name)
                ti.uid, ti.gid, ti.mode, ti.type, ti.mtime = uid, gid, mode, kind, 1700000000
                ti.size = len(data) if kind == tarfile.REGTYPE else 0
                if link:
                    ti.linkname = link
                t.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
        raw = buf.getvalue()
        return gzip.compress(raw, mtime=0) if gz else raw

    R, D, L = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE

    def image(arch, first):
        l1 = layer(first, True)
        l2 = layer([('etc/.wh.gone', R, b'', 0, 0, 0o644, None),
                    ('opq/.wh..wh..opq', R, b'', 0, 0, 0o644, None),
                    ('opq/new', R, b'layer two\n', 0, 0, 0o644, None),
                    ('etc/hello', R, b'hello from layer two\n', 0, 0, 0o644, None),
                    ('etc/owned', R, b'owned\n', 1234, 4321, 0o640, None)], False)
        if broken and arch == 'amd64':  # its right digest, but no tar in it: the unpack fails after layer 1
            l2 = b'this is not a tar archive\n' * 40
        cfg = json.dumps({'architecture': arch, 'os': 'linux', 'config': {'Env': ['PATH=/bin']},
                          'rootfs': {'type': 'layers', 'diff_ids': []}}).encode()
        man = json.dumps({'schemaVersion': 2, 'mediaType': MT_MAN,
                          'config': {'mediaType': 'application/vnd.oci.image.config.v1+json',
                                     'digest': blob(cfg), 'size': len(cfg)},
                          'layers': [{'mediaType': 'application/vnd.oci.image.layer.v1.tar+gzip',
                                      'digest': blob(l1), 'size': len(l1)},
                                     {'mediaType': 'application/vnd.oci.image.layer.v1.tar',
                                      'digest': blob(l2), 'size': len(l2)}]}).encode()
        return man, blob(man)

    base = [('etc', D, b'', 0, 0, 0o755, None),
            ('etc/hello', R, b'hello from layer one\n', 0, 0, 0o644, None),
            ('etc/gone', R, b'whited out\n', 0, 0, 0o644, None),
            ('opq', D, b'', 0, 0, 0o755, None),
            ('opq/old', R, b'old\n', 0, 0, 0o644, None),
            ('bin', D, b'', 0, 0, 0o755, None),
            ('bin/tool', R, b'#!/bin/sh\necho tool\n', 1000, 1000, 0o755, None),
            ('home/user', D, b'', 1000, 1000, 0o700, None),
            ('link', L, b'', 0, 0, 0o777, 'etc/hello')]
    arm, arm_d = image('arm64', base + [('etc/arch', R, b'arm64\n', 0, 0, 0o644, None)])
    amd, amd_d = image('amd64', base + [('etc/arch', R, b'amd64\n', 0, 0, 0o644, None)])
    att = b'{"schemaVersion":2,"mediaType":"%s","config":{},"layers":[]}' % MT_MAN.encode()
    idx = json.dumps({'schemaVersion': 2, 'mediaType': MT_INDEX, 'manifests': [
        {'mediaType': MT_MAN, 'digest': arm_d, 'size': len(arm),
         'platform': {'architecture': 'arm64', 'os': 'linux', 'variant': 'v8'}},
        {'mediaType': MT_MAN, 'digest': blob(att), 'size': len(att),
         'platform': {'architecture': 'unknown', 'os': 'unknown'}},
        {'mediaType': MT_MAN, 'digest': amd_d, 'size': len(amd),
         'platform': {'architecture': 'amd64', 'os': 'linux'}}]}).encode()
    idx_d = blob(idx)
    os.makedirs(os.path.join(out, 'blobs', 'sha256'), exist_ok=True)
    for d, data in blobs.items():
        with open(os.path.join(out, 'blobs', 'sha256', d), 'wb') as f:
            f.write(data)
    with open(os.path.join(out, 'oci-layout'), 'w') as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
    with open(os.path.join(out, 'index.json'), 'w') as f:
        json.dump({'schemaVersion': 2, 'manifests': [
            {'mediaType': MT_INDEX, 'digest': idx_d, 'size': len(idx),
             'annotations': {'org.opencontainers.image.ref.name': 'v1'}}]}, f)
    with open(os.path.join(out, 'digests.json'), 'w') as f:
        json.dump({'index': idx_d, 'amd64': amd_d, 'arm64': arm_d}, f)


def load(layout):
    """{digest: bytes} and the tag's descriptor, from a folder or a tarball."""
    files = {}
    if os.path.isdir(layout):
        for dp, _, fs in os.walk(layout):
            for n in fs:
                p = os.path.join(dp, n)
                with open(p, 'rb') as f:
                    files[os.path.relpath(p, layout)] = f.read()
    else:
        with tarfile.open(layout) as t:
            for m in t.getmembers():
                if m.isfile():
                    files[m.name.lstrip('./')] = t.extractfile(m).read()
    blobs = {}
    for name, data in files.items():
        parts = name.split('/')
        if len(parts) == 3 and parts[0] == 'blobs':
            blobs[parts[1] + ':' + parts[2]] = data
    top = json.loads(files['index.json'])['manifests'][0]
    return blobs, top


def serve(layout, portfile, opts):
    blobs, top = load(layout)
    stats = {'requests': [], 'cdn_authorization': 0, 'token_requests': 0}
    first_layers = set()  # each image's first layer: what --corrupt and --oversize alter
    for d, data in blobs.items():
        try:
            m = json.loads(data)
        except ValueError:
            continue
        if isinstance(m, dict) and m.get('layers'):
            first_layers.add(m['layers'][0]['digest'])
    token = 'stub-token-42'
    port = [0]

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *a):
            pass

        def send(self, code, body=b'', ctype='application/json', extra=()):
            self.send_response(code)
            self.send_header('Content-Type', ctype)
            self.send_header('Content-Length', str(len(body)))
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def authorized(self):
            a = self.headers.get('Authorization', '')
            if opts['auth'] == 'none':
                return True
            if opts['auth'] == 'basic':
                want = 'Basic ' + base64.b64encode(f"{opts['user']}:{opts['password']}".encode()).decode()
                if a == want:
                    return True
                self.send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', extra=[('WWW-Authenticate', 'Basic realm="stub"')])
                return False
            if a == 'Bearer ' + token:
                return True
            self.send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', extra=[(
                'WWW-Authenticate',
                f'Bearer realm="http://127.0.0.1:{port[0]}/token",service="stub",scope="repository:test/img:pull"')])
            return False

        def do_GET(self):
            path = self.path.split('?')[0]
            stats['requests'].append(self.path)
            if path == '/stats':
                return self.send(200, json.dumps(stats).encode())
            if path == '/token':
                stats['token_requests'] += 1
                if opts['user']:
                    want = 'Basic ' + base64.b64encode(f"{opts['user']}:{opts['password']}".encode()).decode()
                    if self.headers.get('Authorization', '') != want:
                        return self.send(401, b'{"details":"bad credentials"}')
                if 'scope=repository%3Atest%2Fimg%3Apull' not in self.path:
                    return self.send(400, b'{"details":"scope"}')
                return self.send(200, json.dumps({'token': token}).encode())
            if path.startswith('/cdn/'):
                if self.headers.get('Authorization'):
                    stats['cdn_authorization'] += 1
                d = path[5:]
                data = blobs.get(d)
                if data is None:
                    return self.send(404)
                if d in first_layers and opts['corrupt']:
                    data = bytes([data[0] ^ 1]) + data[1:]
                if d in first_layers and opts['oversize']:
                    data = data + b'x'
                return self.send(200, data, 'application/octet-stream')
            pre = '/v2/test/img/'
            if not path.startswith(pre):
                return self.send(404, b'{"errors":[{"code":"NAME_UNKNOWN"}]}')
            if not self.authorized():
                return
            kind, _, ref = path[len(pre):].partition('/')
            if kind == 'manifests':
                if ref == 'v1':
                    d = top['digest']
                elif ref in blobs:
                    d = ref
                    if opts['lie']:
                        d = top['digest'] if ref != top['digest'] else ref
                else:
                    return self.send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
                data = blobs[d]
                mt = json.loads(data).get('mediaType', MT_MAN)
                return self.send(200, data, mt, [('Docker-Content-Digest', d)])
            if kind == 'blobs':
                if ref not in blobs:
                    return self.send(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')
                return self.send(307, b'', extra=[('Location', f'http://localhost:{port[0]}/cdn/{ref}')])
            return self.send(404)

    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
    port[0] = srv.server_address[1]
    with open(portfile + '.tmp', 'w') as f:
        f.write(str(port[0]))
    os.rename(portfile + '.tmp', portfile)
    srv.serve_forever()


if __name__ == '__main__':
    if len(sys.argv) >= 3 and sys.argv[1] == 'make':
        make(sys.argv[2], broken=sys.argv[3:] == ['--broken-layer'])
    elif len(sys.argv) >= 4 and sys.argv[1] == 'serve':
        a = sys.argv[4:]
        o = {'auth': 'bearer', 'user': '', 'password': '', 'corrupt': False, 'oversize': False, 'lie': False}
        while a:
            k = a.pop(0)
            if k in ('--auth', '--user', '--password'):
                o[k[2:]] = a.pop(0)
            elif k in ('--corrupt', '--oversize', '--lie'):
                o[k[2:]] = True
            else:
                sys.exit(f'registry-stub: unknown option {k}')
        serve(sys.argv[2], sys.argv[3], o)
    else:
        sys.exit(__doc__)
