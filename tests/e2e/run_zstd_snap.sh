#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Boots Debian's cloud kernel with root=/dev/vda on a virtio-blk disk whose backend is zstd-snap: an ext4 image (mkfs.ext4 -d) compressed by `cubicle disk compress`, under a copy-on-write delta. Boot 1 writes a file and reboots; boot 2, on the same delta, finds it; `zstd -d` of the base gives back the image (sha256); boot 3, on a copy of the base with one frame corrupted, gets I/O errors for that frame's blocks only, and cubicle exits normally.
#
# Exit status: 0 pass, 1 fail, 77 skip (see lib.sh).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

e2e_init
w=$e2e_work
# Three boots in one e2e_run (one L1 in nested mode): three boots' time.
e2e_timeout=$((e2e_timeout * 3))
for t in mkfs.ext4 debugfs sha256sum od; do
	command -v $t >/dev/null || PATH=$PATH:/sbin:/usr/sbin
	command -v $t >/dev/null || e2e_skip "$t not found (apt-get install e2fsprogs coreutils)"
done
command -v zstd >/dev/null || e2e_skip "zstd not found (apt-get install zstd)"

# The initramfs loads the virtio drivers and hands over to root=, as run_rootfs.sh's does.
e2e_switchroot_initramfs "$w/initramfs.cpio.gz" virtio virtio_ring virtio_pci virtio_blk virtio_console

# The root file system: busybox, an init that acts on cubicle.phase=, a small
# file and a 4 MiB one (random: one frame of it is corrupted in boot 3).
root=$w/rootfs
rm -rf "$root" && mkdir -p "$root"/{bin,sbin,proc,sys,dev,data,tmp}
cp /bin/busybox "$root/bin/busybox"
head -c $((4 << 20)) /dev/urandom >"$root/data/big.bin"
echo "a small file in another frame" >"$root/data/small.txt"
big_sha=$(sha256sum <"$root/data/big.bin" | cut -d' ' -f1)
small_sha=$(sha256sum <"$root/data/small.txt" | cut -d' ' -f1)
token=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
cat >"$root/sbin/init" <<'EOF'
#!/bin/busybox sh
# The root file system's init for run_zstd_snap.sh: write (boot 1), find (boot 2), read a corrupt frame (boot 3).
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
exec </dev/hvc0 >/dev/hvc0 2>&1
say() { echo "CUBICLE-GUEST $1=$2"; }
arg() { sed -n "s/.*cubicle\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
sha() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1; }
say root "$(awk '$2 == "/" { print $1 " " $3 }' /proc/mounts | grep -v rootfs | head -n 1)"
case $(arg phase) in
write)
	say big_ok "$([ "$(sha /data/big.bin)" = "$(arg big)" ] && echo yes || echo no)"
	echo "written by the guest: $(arg token)" >/data/from-guest.txt
	say write $?
	sync
	say sync $?
	;;
find)
	say found "$(cat /data/from-guest.txt 2>/dev/null | tr ' ' _)"
	say big_ok "$([ "$(sha /data/big.bin)" = "$(arg big)" ] && echo yes || echo no)"
	;;
corrupt)
	say small_ok "$([ "$(sha /data/small.txt)" = "$(arg small)" ] && echo yes || echo no)"
	dd if=/data/big.bin of=/dev/null bs=4096 2>/dev/null
	say big_read $?
	say io_errors "$(dmesg | grep -c 'I/O error')"
	say small_again "$([ "$(sha /data/small.txt)" = "$(arg small)" ] && echo yes || echo no)"
	;;
esac
echo "CUBICLE-GUEST ready"
mount -o remount,ro / 2>/dev/null
sync
reboot -f
EOF
chmod +x "$root/sbin/init"
rm -f "$w/root.img"
mkfs.ext4 -q -F -b 4096 -L cubicle-root -d "$root" "$w/root.img" 64M ||
	{ echo "not ok - mkfs.ext4 -d failed"; exit 1; }
img_sha=$(sha256sum <"$w/root.img" | cut -d' ' -f1)

# The base, made by the tool under test; `zstd -d` must give the image back.
fsz=262144
"$CUBICLE" disk compress --frame-size $fsz "$w/root.img" "$w/root.zst" >"$w/compress.log" 2>&1 ||
	{ cat "$w/compress.log"; echo "not ok - cubicle disk compress failed"; exit 1; }
cat "$w/compress.log" | sed 's/^/# /'
zstd -q -d -f "$w/root.zst" -o "$w/root.zstd-d.img"
cli_sha=$(sha256sum <"$w/root.zstd-d.img" | cut -d' ' -f1)
rm -f "$w/root.zstd-d.img"

# Boot 3's base: a copy with one frame in the middle of big.bin corrupted.
# The frame holding big.bin's block 512; its compressed offset is the sum of
# the seek table's compressed sizes before it (12-byte entries, checksummed).
phys=$(debugfs -R "bmap /data/big.bin 512" "$w/root.img" 2>/dev/null)
frame=$((phys * 4096 / fsz))
zsize=$(stat -c %s "$w/root.zst")
nframes=$(od -An -tu4 -j $((zsize - 9)) -N 4 "$w/root.zst" | tr -d ' ')
coff=$(od -An -tu4 -v -w12 -j $((zsize - 9 - nframes * 12)) -N $((frame * 12)) "$w/root.zst" |
	awk '{ s += $1 } END { print s + 0 }')
csize=$(od -An -tu4 -j $((zsize - 9 - nframes * 12 + frame * 12)) -N 4 "$w/root.zst" | tr -d ' ')
cp "$w/root.zst" "$w/corrupt.zst"
printf '\xde\xad\xbe\xef\xde\xad\xbe\xef' |
	dd of="$w/corrupt.zst" bs=1 seek=$((coff + csize / 2)) conv=notrunc 2>/dev/null
echo "# corrupted frame $frame of $nframes (compressed bytes $coff+$csize; big.bin block 512 is disk block $phys)"

common="console=hvc0 root=/dev/vda rw reboot=k panic=-1 quiet cubicle.big=$big_sha cubicle.small=$small_sha"
cfg() { # NAME PHASE BASE DELTA
	cat >"$w/$1.cfg" <<EOF
machine = { vcpus = 1; memory_mib = 256; };
boot = {
  kernel = "$e2e_guest/vmlinuz";
  initrd = "initramfs.cpio.gz";
  cmdline = "$common cubicle.phase=$2 cubicle.token=$token";
};
devices = (
  { type = "virtio-console"; id = "hvc"; console = "stdio"; input = false; },
  { type = "virtio-blk"; id = "root"; root = true;
    backend = { type = "zstd-snap"; base = "$3"; delta = "$4"; cache_frames = 16; }; }
);
EOF
}
cfg boot1 write root.zst root.delta
cfg boot2 find root.zst root.delta
cfg boot3 corrupt corrupt.zst corrupt.delta

# The three boots in one go (one L1 in nested mode); each records its exit status and time.
cat >"$w/boots.sh" <<EOF
#!/bin/bash
# The three cubicle runs of run_zstd_snap.sh, in order.
for b in boot1 boot2 boot3; do
	s=\$(date +%s.%N)
	"$CUBICLE" run "$w/\$b.cfg" >"$w/\$b.console" 2>"$w/\$b.stderr" </dev/null
	echo \$? >"$w/\$b.rc"
	awk "BEGIN { printf \"%.1f\", \$(date +%s.%N) - \$s }" >"$w/\$b.time"
done
EOF
chmod +x "$w/boots.sh"
base_sha=$(sha256sum <"$w/root.zst" | cut -d' ' -f1)
start=$(date +%s)
e2e_run "$w/boots.sh"
rc=$?
echo "# the boots took $(($(date +%s) - start)) s in all (harness exit status $rc)"
for b in boot1 boot2 boot3; do
	echo "# $b: exit status $(cat "$w/$b.rc" 2>/dev/null), $(cat "$w/$b.time" 2>/dev/null) s"
done

m() { e2e_marker "$w/$1.console" "$2"; }
rc_of() { cat "$w/$1.rc" 2>/dev/null; }
"$CUBICLE" disk inspect "$w/root.delta" >"$w/inspect.log" 2>&1
written=$(sed -n 's/^ *written blocks *\([0-9]*\).*/\1/p' "$w/inspect.log")
e2e_check "zstd -d of the base is the image (sha256)" [ "$cli_sha" = "$img_sha" ]
e2e_check "boot 1: root is /dev/vda ext4 (got '$(m boot1 root)')" [ "$(m boot1 root)" = "/dev/vda ext4" ]
e2e_check "boot 1: big.bin read back from the base intact" [ "$(m boot1 big_ok)" = yes ]
e2e_check "boot 1: guest wrote and synced" [ "$(m boot1 write)/$(m boot1 sync)" = 0/0 ]
e2e_check "boot 1: exit status 0 after reboot -f (got $(rc_of boot1))" [ "$(rc_of boot1)" = 0 ]
# Reading big.bin is sequential: the read-ahead threads start (confined as
# workers: a call their filter lacks would have killed the VM above).
e2e_check "boot 1: zstd-snap read ahead on its helper threads" grep -q "read-ahead of 8 frames on 2 threads" "$w/boot1.stderr"
e2e_check "the delta holds the guest's blocks ($written written)" [ "${written:-0}" -gt 0 ]
e2e_check "the base is unchanged" [ "$(sha256sum <"$w/root.zst" | cut -d' ' -f1)" = "$base_sha" ]
e2e_check "boot 2: the guest finds its file on the same delta (got '$(m boot2 found)')" \
	[ "$(m boot2 found)" = "written_by_the_guest:_$token" ]
e2e_check "boot 2: big.bin still intact" [ "$(m boot2 big_ok)" = yes ]
e2e_check "boot 2: exit status 0 (got $(rc_of boot2))" [ "$(rc_of boot2)" = 0 ]
e2e_check "boot 3: root mounted from the corrupted base" [ "$(m boot3 root)" = "/dev/vda ext4" ]
e2e_check "boot 3: a file in another frame reads fine" [ "$(m boot3 small_ok)/$(m boot3 small_again)" = yes/yes ]
read_failed() { [ -n "$(m boot3 big_read)" ] && [ "$(m boot3 big_read)" != 0 ]; }
io_errors() { [ "$(m boot3 io_errors)" -gt 0 ] 2>/dev/null; }
e2e_check "boot 3: reading big.bin fails (dd status $(m boot3 big_read))" read_failed
e2e_check "boot 3: the guest logs I/O errors ($(m boot3 io_errors) lines)" io_errors
e2e_check "boot 3: cubicle's log names frame $frame" grep -q "frame $frame at offset $coff" "$w/boot3.stderr"
e2e_check "boot 3: cubicle did not crash: exit status 0 after reboot -f (got $(rc_of boot3))" [ "$(rc_of boot3)" = 0 ]
e2e_check "boot 3: guest reached ready" grep -q 'CUBICLE-GUEST ready' "$w/boot3.console"
e2e_finish "$w/boot1.console" "$w/boot1.stderr" "$w/boot2.console" "$w/boot2.stderr" \
	"$w/boot3.console" "$w/boot3.stderr"
