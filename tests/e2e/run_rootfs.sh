#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Boots Debian's cloud kernel with root=/dev/vda: an ext4 image made by this test (mkfs.ext4 -d) on a virtio-blk disk through the raw backend, hvc0 as the only console, a second read-only disk and virtio-rng. The guest checks a host file's sha256, writes a file, syncs and reboots; the host then reads that file from the image and e2fsck -fn must find it clean.
#
# Exit status: 0 pass, 1 fail, 77 skip (see lib.sh).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

e2e_init
w=$e2e_work
console=$w/console.log
stderr=$w/stderr.log
for t in mkfs.ext4 e2fsck debugfs sha256sum; do
	command -v $t >/dev/null || PATH=$PATH:/sbin:/usr/sbin
	command -v $t >/dev/null || e2e_skip "$t not found (apt-get install e2fsprogs coreutils)"
done

# The initramfs only loads the virtio drivers and hands over to /dev/vda, the
# way a distribution initramfs honours root=.
e2e_switchroot_initramfs "$w/initramfs.cpio.gz" virtio virtio_ring virtio_pci virtio_blk virtio_console virtio_rng

# The root file system: busybox, an init that runs the checks, and a file
# whose checksum the guest verifies.
root=$w/rootfs
rm -rf "$root" && mkdir -p "$root"/{bin,sbin,proc,sys,dev,data,tmp}
cp /bin/busybox "$root/bin/busybox"
head -c 300000 /dev/urandom >"$root/data/from-host.bin"
sha=$(sha256sum <"$root/data/from-host.bin" | cut -d' ' -f1)
token=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
cat >"$root/sbin/init" <<'EOF'
#!/bin/busybox sh
# The root file system's init for run_rootfs.sh: check, write, sync, reboot.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
exec </dev/hvc0 >/dev/hvc0 2>&1
say() { echo "CUBICLE-GUEST $1=$2"; }
arg() { sed -n "s/.*cubicle\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
say root "$(awk '$2 == "/" { print $1 " " $3 " " $4 }' /proc/mounts | grep -v rootfs | head -n 1)"
say console "$(cat /proc/consoles | cut -d' ' -f1 | tr '\n' ' ')"
say sha_ok "$([ "$(sha256sum /data/from-host.bin | cut -d' ' -f1)" = "$(arg sha)" ] && echo yes || echo no)"
echo "written by the guest: $(arg token)" >/data/from-guest.txt
say write $?
sync
say sync $?
say vdb_ro "$(cat /sys/block/vdb/ro)"
dd if=/dev/zero of=/dev/vdb bs=4096 count=1 oflag=direct 2>/dev/null
say vdb_write $?
say rng "$(cat /sys/class/misc/hw_random/rng_current 2>/dev/null)"
say rng_bytes "$(dd if=/dev/hwrng bs=32 count=2 2>/dev/null | wc -c)"
echo "CUBICLE-GUEST ready"
umount /data 2>/dev/null
mount -o remount,ro / 2>/dev/null
sync
reboot -f
EOF
chmod +x "$root/sbin/init"
rm -f "$w/root.img"
mkfs.ext4 -q -F -L cubicle-root -d "$root" "$w/root.img" 64M ||
	{ echo "not ok - mkfs.ext4 -d failed"; exit 1; }
head -c $((1 << 20)) /dev/urandom >"$w/ro.img"
ro_md5=$(md5sum <"$w/ro.img" | cut -d' ' -f1)

cmdline="console=hvc0 root=/dev/vda rw reboot=k panic=-1 quiet cubicle.sha=$sha cubicle.token=$token"
cat >"$w/vm.cfg" <<EOF
machine = { vcpus = 1; memory_mib = 256; };
boot = {
  kernel = "$e2e_guest/vmlinuz";
  initrd = "initramfs.cpio.gz";
  cmdline = "$cmdline";
};
devices = (
  { type = "virtio-console"; id = "hvc"; console = "stdio"; input = false; },
  { type = "virtio-blk"; id = "root"; root = true;
    backend = { type = "raw"; path = "root.img"; }; },
  { type = "virtio-blk"; id = "ro"; read_only = true;
    backend = { type = "raw"; path = "ro.img"; }; },
  { type = "virtio-rng"; id = "rng"; }
);
EOF

e2e_run "$CUBICLE" run "$w/vm.cfg" >"$console" 2>"$stderr" </dev/null
rc=$?
echo "# exit status $rc"

m() { e2e_marker "$console" "$1"; }
rng=$(m rng)
from_guest=$(debugfs -R "cat /data/from-guest.txt" "$w/root.img" 2>/dev/null)
e2e_check "root is /dev/vda ext4 rw (got '$(m root)')" [ "$(m root)" = "/dev/vda ext4 rw,relatime" ]
e2e_check "the console is hvc0 (got '$(m console)')" [ "$(m console)" = "hvc0 " ]
e2e_check "guest verified the host file's sha256" [ "$(m sha_ok)" = yes ]
e2e_check "guest wrote and synced" [ "$(m write)/$(m sync)" = 0/0 ]
e2e_check "the second disk is read-only" [ "$(m vdb_ro)" = 1 ]
ro_refused() { [ -n "$(m vdb_write)" ] && [ "$(m vdb_write)" != 0 ]; }
fsck_clean() { e2fsck -fn "$w/root.img" >"$w/e2fsck.log" 2>&1 || { sed 's/^/# /' "$w/e2fsck.log"; false; }; }
e2e_check "a write to the read-only disk fails" ro_refused
e2e_check "the read-only image is unchanged" [ "$(md5sum <"$w/ro.img" | cut -d' ' -f1)" = "$ro_md5" ]
e2e_check "virtio-rng is /dev/hwrng (got '$rng')" [ "${rng#virtio_rng}" != "$rng" ]
e2e_check "/dev/hwrng gave 64 bytes (got '$(m rng_bytes)')" [ "$(m rng_bytes)" = 64 ]
e2e_check "guest reached ready" grep -q 'CUBICLE-GUEST ready' "$console"
e2e_check "exit status 0 after reboot -f (got $rc)" [ $rc = 0 ]
e2e_check "the host reads the guest's file from the image" \
	[ "$from_guest" = "written by the guest: $token" ]
e2e_check "e2fsck -fn finds the image clean" fsck_clean
e2e_finish "$console" "$stderr"
