#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Templates from a root file system (issue 15), directly or nested in L1:
#   - a root folder made here (static busybox, a bash stand-in, a marker);
#     `cubicle template build rootfs CONFIG --rootfs DIR` makes an ext4 image
#     of it (mke2fs -d) and boots the example initramfs with cubicle.root=,
#     which runs the agent from that disk;
#   - `--ext4 IMAGE`: the same folder as an ext4 image made beforehand;
#   - `--oci ARCHIVE`: an OCI image layout tarball made here with two layers
#     (gzip'd and plain), the second whiting out a file and a folder's old
#     contents, adding a file owned by 1234:4321;
#   - `--ext4` of the example Debian 12 root that scripts/debian-rootfs.sh
#     makes (mmdebstrap, minbase): the template `base` is built so
#     (cubicle-serve(1)); commands run there as its user `user` in bash;
#   - the SDK's Template.build of fromImage (serve's image_vm): the same
#     archive served by tests/serve/registry-stub.py on L1's loopback,
#     pulled into a template of its own (its config's Env and WorkingDir
#     kept) and built on with a RUN step;
#   - `cubicle serve`, and the real npm e2b SDK on each template: the
#     sandbox's / is its template's ext4 disk, the image's whiteouts and
#     owners hold, a written file survives pause and connect and is not in
#     a second sandbox of the same template; afterwards no VMM process or
#     sandbox folder is left and no template kept its build's root image.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${CUBICLE_E2E_TIMEOUT:=600}"
export CUBICLE_E2E_TIMEOUT
e2e_init
w=$e2e_work
[ -x /sbin/mke2fs ] || command -v mke2fs >/dev/null || e2e_skip "mke2fs is needed (apt-get install e2fsprogs)"
[ "$(id -u)" = 0 ] || e2e_skip "root is needed (--oci writes the image's owners)"
grep -q '^LIBARCHIVE_LIBS = -l' "$e2e_builddir/Makefile" 2>/dev/null ||
	e2e_skip "cubicle was configured without libarchive (template build --oci)"
e2e_serve_sdk
e2e_agent_initramfs "virtio virtio_ring virtio_pci virtio_console vmw_vsock_virtio_transport virtio_blk"

# ---- the root folder, its ext4 image, the OCI archive ----------------------
bb=/bin/busybox
[ -x $bb ] || bb=/usr/bin/busybox
file -L $bb 2>/dev/null | grep -q 'statically linked' || e2e_skip "a static busybox is needed (busybox-static)"
r=$w/rootfs
rm -rf "$r"
mkdir -p "$r"/{bin,etc,home,tmp,proc,sys,dev}
cp $bb "$r/bin/busybox"
for a in sh cat ls stat test awk sync echo mkdir rm sleep printf; do ln -s busybox "$r/bin/$a"; done
printf '#!/bin/sh\n# bash stand-in for E2B clients: busybox ash takes -l -c.\nexec /bin/sh "$@"\n' >"$r/bin/bash"
chmod 755 "$r/bin/bash"
echo rootfs >"$r/etc/cubicle-root"
mkdir -p "$w/e4"
rm -f "$w/e4/root.img"
sed -i 's/^rootfs$/ext4/' "$r/etc/cubicle-root"
mke2fs -q -F -t ext4 -d "$r" "$w/e4/root.img" 64M >"$w/mke2fs.log" 2>&1 ||
	{ cat "$w/mke2fs.log"; echo "not ok - mke2fs -d $r"; exit 1; }
echo rootfs >"$r/etc/cubicle-root"
python3 - "$r" "$w/image.tar" <<'PY' || { echo "not ok - cannot make the OCI archive"; exit 1; }
import gzip, hashlib, io, json, os, sys, tarfile
root, out = sys.argv[1], sys.argv[2]
def layer(add, gz):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w', format=tarfile.PAX_FORMAT) as t:
        add(t)
    raw = buf.getvalue()
    return gzip.compress(raw, mtime=0) if gz else raw
def f(t, name, data=b'', uid=0, gid=0, mode=0o644, kind=tarfile.REGTYPE):
    ti = tarfile.TarInfo(name)
    ti.uid, ti.gid, ti.mode, ti.type, ti.mtime = uid, gid, mode, kind, 1700000000
    ti.size = len(data) if kind == tarfile.REGTYPE else 0
    t.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
def one(t):
    for dp, dirs, files in os.walk(root):
        for n in sorted(dirs + files):
            p = os.path.join(dp, n)
            rel = os.path.relpath(p, root)
            if rel == 'etc/cubicle-root':
                continue
            t.add(p, arcname=rel, recursive=False)
    f(t, 'etc/cubicle-root', b'oci\n')
    f(t, 'etc/gone', b'whited out\n')
    f(t, 'opq', kind=tarfile.DIRTYPE, mode=0o755)
    f(t, 'opq/old', b'old\n')
    f(t, 'home/user', kind=tarfile.DIRTYPE, uid=1000, gid=1000, mode=0o700)
def two(t):
    f(t, 'etc/.wh.gone')
    f(t, 'opq/.wh..wh..opq')
    f(t, 'opq/new', b'layer two\n')
    f(t, 'etc/owned', b'owned\n', uid=1234, gid=4321, mode=0o640)
blobs = {}
def blob(data):
    d = hashlib.sha256(data).hexdigest()
    blobs[d] = data
    return 'sha256:' + d
l1, l2 = layer(one, True), layer(two, False)
cfg = json.dumps({'architecture': 'amd64', 'os': 'linux', 'rootfs': {'type': 'layers', 'diff_ids': []},
                  'config': {'Env': ['PATH=/bin', 'IMAGE_GREETING=from the image config'], 'WorkingDir': '/opq'}}).encode()
man = json.dumps({'schemaVersion': 2, 'mediaType': 'application/vnd.oci.image.manifest.v1+json',
    'config': {'mediaType': 'application/vnd.oci.image.config.v1+json', 'digest': blob(cfg), 'size': len(cfg)},
    'layers': [{'mediaType': 'application/vnd.oci.image.layer.v1.tar+gzip', 'digest': blob(l1), 'size': len(l1)},
               {'mediaType': 'application/vnd.oci.image.layer.v1.tar', 'digest': blob(l2), 'size': len(l2)}]}).encode()
md = blob(man)
idx = json.dumps({'schemaVersion': 2, 'manifests': [{'mediaType': 'application/vnd.oci.image.manifest.v1+json',
    'digest': md, 'size': len(man), 'platform': {'architecture': 'amd64', 'os': 'linux'}}]}).encode()
with tarfile.open(out, 'w') as t:
    def put(name, data):
        ti = tarfile.TarInfo(name); ti.size = len(data); ti.mtime = 1700000000
        t.addfile(ti, io.BytesIO(data))
    put('oci-layout', b'{"imageLayoutVersion":"1.0.0"}')
    put('index.json', idx)
    for d, data in blobs.items():
        put('blobs/sha256/' + d, data)
PY

# ---- the example Debian root (mmdebstrap: cached after the first time) ----
command -v mmdebstrap >/dev/null || e2e_skip "mmdebstrap is needed (apt-get install mmdebstrap)"
sh "$e2e_top/scripts/debian-rootfs.sh" --size 256 "$w/debian.ext4" >"$w/debian-rootfs.log" 2>&1 ||
	{ cat "$w/debian-rootfs.log"; echo "not ok - scripts/debian-rootfs.sh $w/debian.ext4"; exit 1; }
echo "ok - scripts/debian-rootfs.sh: $(tail -n 1 "$w/debian-rootfs.log")"

cat >"$w/rootfs.sh" <<'SCRIPT'
#!/bin/bash
# Where KVM is: $1 work folder, $2 kernel, $3 cubicle, $4 source tree, $5
# the build's tests/e2b.
set -u
w=$1 k=$2 cub=$3 top=$4 e2b=$5
. "$top/tests/e2e/serve-lib.sh"
serve_vm_cfg "$w/vm.cfg"
serve_template rootfs "$w/vm.cfg" --rootfs "$w/rootfs" --disk-size 64
serve_template ext4 "$w/vm.cfg" --ext4 "$w/e4/root.img"
serve_template oci "$w/vm.cfg" --oci "$w/image.tar" --disk-size 64
serve_template debian "$w/vm.cfg" --ext4 "$w/debian.ext4"
# each template keeps its snapshot's copy of the disk, not the build's image
kept=$(ls "$state"/templates/*/root.ext4 2>/dev/null)
disks=$(ls "$state"/templates/*/snap/disk-root 2>/dev/null | wc -l)
[ -z "$kept" ] && [ "$disks" = 4 ] && ok "4 templates hold their root disk in the snapshot (snap/disk-root), no build image left" ||
	bad "templates: root images left [$kept], $disks snapshot disks"

# a registry on L1's loopback serving the OCI archive: the SDK's fromImage
python3 "$top/tests/serve/registry-stub.py" serve "$w/image.tar" "$t/registry.port" 2>"$w/registry.log" &
rpid=$!
for i in $(seq 100); do [ -s "$t/registry.port" ] && break; sleep 0.1; done
printf 'agent_wait_ms = 240000;\nimage_vm = "%s";\n' "$w/vm.cfg" >"$t/serve.cfg"
start_serve "$t/serve.cfg" "$w/serve.log"
for tm in rootfs ext4 oci debian; do
	node "$e2b/serve-sdk.mjs" "$url" "$key" root $tm || fail=1
done
node "$e2b/serve-sdk.mjs" "$url" "$key" image "127.0.0.1:$(cat "$t/registry.port")/test/img:v1" || fail=1
kill $rpid
stop_serve
serve_left
pkill -KILL -f "cubicle restore" 2>/dev/null
rm -rf "$t"
exit $fail
SCRIPT

if [ $e2e_mode = nested ]; then
	"$e2e_top/tests/e2e/nested/run-nested.sh" --arch x86_64 --mem 4096 \
		--timeout $((e2e_timeout + 180)) --cmd-timeout "$e2e_timeout" --rw "$w" -- \
		bash "$w/rootfs.sh" "$w" "$e2e_guest/vmlinuz" "$CUBICLE" "$e2e_top" \
		"$e2e_builddir/tests/e2b" | tee "$w/out.log"
else
	timeout -k 5 "$e2e_timeout" bash "$w/rootfs.sh" "$w" "$e2e_guest/vmlinuz" "$CUBICLE" \
		"$e2e_top" "$e2e_builddir/tests/e2b" | tee "$w/out.log"
fi
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ] || grep -q '^not ok' "$w/out.log" || ! grep -q '^ok - nothing left' "$w/out.log"; then
	e2e_dump "$w/serve.log" "$w"/template-*.out
	exit 1
fi
exit 0
