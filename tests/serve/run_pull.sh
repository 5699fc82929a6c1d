#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `cubicle template pull REF DIR` (and --image's checks before any VM) against
# tests/serve/registry-stub.py, a registry on 127.0.0.1: an image index
# followed to linux/amd64 (past an arm64 decoy and an attestation), its two
# layers unpacked (whiteouts, an opaque folder, owners, modes, a link), a
# Bearer token from the registry's realm with and without credentials,
# Basic authentication, blobs redirected to another host name (which must
# not get the token), and a registry that lies: a layer's bytes altered, a
# layer longer than its descriptor, a manifest that is not the one asked
# by digest. Needs root (the layers keep their owners, written in a chroot).
set -u
bd=${top_builddir:-.}
sd=${top_srcdir:-.}
cub=$(cd "$bd" && pwd)/cubicle
skip() { echo "SKIP: $1"; exit 77; }
[ "$(id -u)" = 0 ] || skip "root is needed (the image's owners are kept)"
[ "${CUBICLE_ARCH:-x86_64}" = x86_64 ] || skip "the test image is linux/amd64; this build is for $CUBICLE_ARCH"
command -v python3 >/dev/null || skip "python3 is not installed"
grep -q '^LIBARCHIVE_LIBS = .*-larchive' "$bd/Makefile" 2>/dev/null ||
	skip "cubicle was configured without libarchive (template pull needs it)"
w=$(mktemp -d)
stub=
trap 'kill $stub 2>/dev/null; rm -rf "$w"' EXIT
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
bad() { echo "not ok - $1"; fail=$((fail + 1)); [ -n "${2:-}" ] && sed 's/^/#   /' "$2" | tail -n 12; }

python3 "$sd/tests/serve/registry-stub.py" make "$w/layout" || { echo "not ok - the test image"; exit 1; }
if "$cub" template pull 2>"$w/probe.err"; [ $? = 2 ] && grep -q 'Usage: cubicle template pull' "$w/probe.err"; then
	ok "template pull without arguments: its usage, status 2"
else
	bad "template pull without arguments" "$w/probe.err"
fi
amd=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["amd64"])' "$w/layout/digests.json")
arm=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["arm64"])' "$w/layout/digests.json")

# start_stub ARGS...: a registry of its own for one case; $reg its host:port
start_stub() {
	[ -n "$stub" ] && kill $stub 2>/dev/null && wait $stub 2>/dev/null
	rm -f "$w/port"
	python3 "$sd/tests/serve/registry-stub.py" serve "$w/layout" "$w/port" "$@" 2>"$w/stub.err" &
	stub=$!
	i=0
	while [ ! -s "$w/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	reg=127.0.0.1:$(cat "$w/port")
}
stats() { python3 -c 'import json,sys,urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1]))[sys.argv[2]])' "http://$reg/stats" "$1"; }
# pull NAME REF [ENV...]: status in $st, stdout in $w/NAME.out, stderr in $w/NAME.err
pull() {
	n=$1 ref=$2
	shift 2
	rm -rf "$w/$n"
	env "$@" "$cub" template pull "$ref" "$w/$n" >"$w/$n.out" 2>"$w/$n.err"
	st=$?
}
# nothing of a failed pull is left: DIR empty, no work folder beside it
clean_after() { [ -z "$(ls -A "$w/$1" 2>/dev/null)" ] && ! ls -d "$w/$1".pull-* >/dev/null 2>&1; }

# ---- a public image (an anonymous Bearer token) ----
start_stub
pull img "$reg/test/img:v1"
f=$w/img
if [ $st = 0 ] && [ "$(cat "$w/img.out")" = "$amd" ] && [ "$(cat "$f/etc/arch")" = amd64 ] &&
   [ "$(cat "$f/etc/hello")" = "hello from layer two" ] && [ ! -e "$f/etc/gone" ] &&
   [ ! -e "$f/opq/old" ] && [ "$(cat "$f/opq/new")" = "layer two" ] &&
   [ "$(stat -c '%u:%g %a' "$f/etc/owned")" = "1234:4321 640" ] &&
   [ "$(stat -c '%u:%g %a' "$f/bin/tool")" = "1000:1000 755" ] &&
   [ "$(stat -c '%u:%g %a' "$f/home/user")" = "1000:1000 700" ] &&
   [ "$(readlink "$f/link")" = etc/hello ] && ! ls -d "$f".pull-* >/dev/null 2>&1; then
	ok "pull REG/test/img:v1: the index followed to linux/amd64 (past arm64 and an attestation), its digest printed, both layers unpacked: whiteout, opaque folder, owners, modes, link"
else
	bad "pull REG/test/img:v1: status $st, printed '$(cat "$w/img.out")' (want $amd), arch '$(cat "$f/etc/arch" 2>/dev/null)'" "$w/img.err"
fi
if grep -q 'layer 2 of 2' "$w/img.err" && grep -q "pulled $reg/test/img:v1" "$w/img.err"; then
	ok "pull: a progress line per layer, then what was pulled"
else
	bad "pull: progress lines" "$w/img.err"
fi
[ "$(stats cdn_authorization)" = 0 ] && [ "$(stats token_requests)" = 1 ] &&
	ok "pull: one token asked; the blobs' redirect to another host name got no Authorization" ||
	bad "pull: $(stats cdn_authorization) requests to the other host carried the token; $(stats token_requests) token requests"
pull bydigest "$reg/test/img@$arm"
[ $st = 0 ] && [ "$(cat "$w/bydigest/etc/arch")" = arm64 ] && [ "$(cat "$w/bydigest.out")" = "$arm" ] &&
	ok "pull NAME@DIGEST: that manifest, whatever its architecture (the digest decides)" ||
	bad "pull by digest: status $st, arch '$(cat "$w/bydigest/etc/arch" 2>/dev/null)'" "$w/bydigest.err"
pull notag "$reg/test/img:nope"
[ $st = 1 ] && grep -q "no manifest 'nope' (404)" "$w/notag.err" && clean_after notag &&
	ok "pull of an unknown tag: status 1, 404 named, nothing left" ||
	bad "pull of an unknown tag: status $st" "$w/notag.err"
pull norepo "$reg/test/other:v1"
[ $st = 1 ] && grep -q "test/other" "$w/norepo.err" && clean_after norepo &&
	ok "pull of an unknown repository: status 1, named" || bad "pull of an unknown repository: status $st" "$w/norepo.err"
mkdir -p "$w/full" && echo x >"$w/full/file"
pull2() { "$cub" template pull "$@" >"$w/e.out" 2>"$w/e.err"; st=$?; }
pull2 "$reg/test/img:v1" "$w/full"
[ $st = 1 ] && grep -q 'is not empty' "$w/e.err" && [ "$(cat "$w/full/file")" = x ] &&
	ok "pull into a folder that is not empty: refused, untouched" || bad "pull into a full folder: status $st" "$w/e.err"
for r in 'Upper/case:v1' 'img:bad tag' 'img:-x' "img@sha256:abc" "$reg/a//b:v1" "$reg/../x:v1" ''; do
	pull2 "$r" "$w/badref"
	[ $st = 2 ] && grep -q "image '" "$w/e.err" && [ ! -e "$w/badref" ] ||
		{ bad "pull '$r': status $st (want 2, before anything)" "$w/e.err"; continue; }
	ok "pull '$r': refused as a reference (status 2): $(head -c 120 "$w/e.err")"
done

# ---- a private image: the token service wants credentials ----
start_stub --user alice --password s3cret
pull anon "$reg/test/img:v1"
[ $st = 1 ] && grep -q 'wants credentials' "$w/anon.err" && clean_after anon &&
	ok "private image without credentials: status 1, says the token service wants them" ||
	bad "private image without credentials: status $st" "$w/anon.err"
pull wrongpw "$reg/test/img:v1" CUBICLE_REGISTRY_USER=alice CUBICLE_REGISTRY_PASSWORD=nope
[ $st = 1 ] && grep -q 'credentials were refused' "$w/wrongpw.err" && clean_after wrongpw &&
	ok "private image, a wrong password: status 1, refused" || bad "a wrong password: status $st" "$w/wrongpw.err"
pull priv "$reg/test/img:v1" CUBICLE_REGISTRY_USER=alice CUBICLE_REGISTRY_PASSWORD=s3cret
[ $st = 0 ] && [ "$(cat "$w/priv/etc/arch")" = amd64 ] && [ "$(stats cdn_authorization)" = 0 ] &&
	ok "private image with CUBICLE_REGISTRY_USER/PASSWORD: pulled; the other host got no credentials" ||
	bad "private image with credentials: status $st" "$w/priv.err"

# ---- Basic authentication ----
start_stub --auth basic --user bob --password pw
pull basic0 "$reg/test/img:v1"
[ $st = 1 ] && grep -q 'CUBICLE_REGISTRY_USER' "$w/basic0.err" &&
	ok "Basic registry without credentials: status 1, names the variables" || bad "Basic without credentials: status $st" "$w/basic0.err"
pull basic "$reg/test/img:v1" CUBICLE_REGISTRY_USER=bob CUBICLE_REGISTRY_PASSWORD=pw
[ $st = 0 ] && [ "$(cat "$w/basic/etc/arch")" = amd64 ] && [ "$(stats cdn_authorization)" = 0 ] &&
	ok "Basic registry with credentials: pulled; the other host got none" || bad "Basic with credentials: status $st" "$w/basic.err"

# ---- a registry that lies ----
start_stub --corrupt
pull corrupt "$reg/test/img:v1"
[ $st = 1 ] && grep -q 'refused (damaged or altered)' "$w/corrupt.err" && clean_after corrupt &&
	ok "a layer whose bytes do not match its digest: refused, nothing unpacked" || bad "an altered layer: status $st" "$w/corrupt.err"
start_stub --oversize
pull over "$reg/test/img:v1"
[ $st = 1 ] && grep -q "larger than its descriptor's size" "$w/over.err" && clean_after over &&
	ok "a layer longer than its descriptor: refused" || bad "a long layer: status $st" "$w/over.err"
start_stub --lie
pull lie "$reg/test/img:v1"
[ $st = 1 ] && grep -q 'has digest .*: refused' "$w/lie.err" && clean_after lie &&
	ok "a manifest that is not the one asked by digest: refused" || bad "a lying manifest: status $st" "$w/lie.err"

# ---- a second layer that is no tar (its digest right): the unpack fails
# after the first layer's files are in DIR, which is left empty ----
python3 "$sd/tests/serve/registry-stub.py" make "$w/brokenlayout" --broken-layer
kill $stub 2>/dev/null && wait $stub 2>/dev/null
rm -f "$w/port"
python3 "$sd/tests/serve/registry-stub.py" serve "$w/brokenlayout" "$w/port" 2>"$w/stub.err" &
stub=$!
i=0
while [ ! -s "$w/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
reg=127.0.0.1:$(cat "$w/port")
pull broken "$reg/test/img:v1"
[ $st = 1 ] && clean_after broken && [ -d "$w/broken" ] &&
	ok "a second layer that is no tar archive: status 1 ($(tail -n 1 "$w/broken.err" | head -c 100)), DIR left empty" ||
	bad "a broken layer: status $st, DIR holds [$(ls -A "$w/broken" 2>/dev/null | tr '\n' ' ')]" "$w/broken.err"

# ---- template build --image: the reference is checked before anything ----
CUBICLE_BIN=$cub "$cub" template build x /nonexistent.cfg --image 'Bad/Ref' --state "$w/state" 2>"$w/tb.err"
st=$?
[ $st = 2 ] && grep -q "image 'Bad/Ref'" "$w/tb.err" && [ ! -e "$w/state" ] &&
	ok "template build --image with a bad reference: status 2, nothing made" || bad "template build --image Bad/Ref: status $st" "$w/tb.err"
"$cub" template build x /nonexistent.cfg --image img:v1 --oci y.tar 2>"$w/tb2.err"
[ $? = 2 ] && grep -q 'one of --rootfs, --ext4, --oci and --image' "$w/tb2.err" &&
	ok "template build: --image and --oci together refused" || bad "--image with --oci" "$w/tb2.err"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
