#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Boots Debian's cloud kernel with virtio-blk (raw images, one read-only), virtio-rng and virtio-console, and checks what the guest sees and what reaches the host.
#
# Exit status: 0 pass, 1 fail, 77 skip (see lib.sh).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

e2e_init
w=$e2e_work
console=$w/console.log
stderr=$w/stderr.log

cat >"$w/init" <<'EOF'
#!/bin/sh
# The guest side of run_virtio_devices.sh: report what the virtio devices look like, write, discard, read entropy, then reboot.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
while read -r m; do
	insmod "/lib/modules/$m" 2>/dev/null
done </etc/modules.order
i=0
while [ ! -b /dev/vdb ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
say() { echo "CUBICLE-GUEST $1=$2"; }
for d in /sys/bus/pci/devices/* /sys/bus/virtio/devices/*; do
	[ -e "$d" ] && echo "# $d: $(cat "$d/vendor" "$d/device" 2>/dev/null | tr '\n' ' ')"
done
echo "# modules: $(lsmod | cut -d' ' -f1 | tr '\n' ' ')"
dmesg | grep -iE 'virtio|pci|vd[ab]|acpi.*LNRO' | tail -n 30 | sed 's/^/# /'
say n_virtio "$(ls /sys/bus/virtio/devices 2>/dev/null | wc -l)"
say vda_sectors "$(cat /sys/block/vda/size)"
say vda_serial "$(cat /sys/block/vda/serial 2>/dev/null)"
say vda_ro "$(cat /sys/block/vda/ro)"
say vdb_ro "$(cat /sys/block/vdb/ro)"
say vda_discard "$(cat /sys/block/vda/queue/discard_max_bytes)"
say vda_md5 "$(dd if=/dev/vda bs=1M count=4 2>/dev/null | md5sum | cut -d' ' -f1)"
dd if=/dev/vda of=/dev/vda bs=1M count=1 seek=8 conv=fsync 2>/dev/null
say vda_write $?
blkdiscard -o 16777216 -l 1048576 /dev/vda
say vda_blkdiscard $?
dd if=/dev/zero of=/dev/vdb bs=4096 count=1 oflag=direct 2>/dev/null
say vdb_write $?
say vdb_md5 "$(dd if=/dev/vdb bs=1M count=1 2>/dev/null | md5sum | cut -d' ' -f1)"
say rng "$(cat /sys/class/misc/hw_random/rng_current 2>/dev/null)"
say rng_bytes "$(dd if=/dev/hwrng bs=64 count=4 2>/dev/null | wc -c)"
echo "hello from hvc0" >/dev/hvc0
say hvc $?
echo "CUBICLE-GUEST ready"
sync
reboot -f
EOF

"$e2e_top/scripts/build-initramfs.sh" --init "$w/init" \
	--modules "virtio virtio_ring virtio_pci virtio_mmio virtio_blk virtio_console virtio_rng" \
	"$e2e_guest/modules" "$w/initramfs.cpio.gz" \
	2>"$w/initramfs.log" || { cat "$w/initramfs.log"; e2e_skip "cannot build the initramfs"; }
head -c $((32 << 20)) /dev/urandom >"$w/disk.img"
head -c $((1 << 20)) /dev/urandom >"$w/ro.img"
want_md5=$(head -c $((4 << 20)) "$w/disk.img" | md5sum | cut -d' ' -f1)
ro_md5=$(md5sum <"$w/ro.img" | cut -d' ' -f1)

# CUBICLE_E2E_VIRTIO_TRANSPORT=pci|mmio overrides the arch's default transport.
tr=${CUBICLE_E2E_VIRTIO_TRANSPORT:+ transport = \"$CUBICLE_E2E_VIRTIO_TRANSPORT\";}
cat >"$w/vm.cfg" <<EOF
machine = { vcpus = 1; memory_mib = 256; };
boot = {
  kernel = "$e2e_guest/vmlinuz";
  initrd = "initramfs.cpio.gz";
  cmdline = "console=ttyS0 reboot=k panic=-1 quiet";
};
devices = (
  { type = "serial8250"; id = "com1"; console = "stdio"; input = false; },
  { type = "virtio-blk"; id = "disk0"; serial = "cubicle-disk0"; root = true;$tr
    backend = { type = "raw"; path = "disk.img"; }; },
  { type = "virtio-blk"; id = "disk1"; read_only = true;$tr
    backend = { type = "raw"; path = "ro.img"; }; },
  { type = "virtio-rng"; id = "rng0"; rate_bytes_per_s = "64K";$tr },
  { type = "virtio-console"; id = "hvc"; console = "file"; path = "$w/hvc.log";$tr }
);
EOF

e2e_run "$CUBICLE" run "$w/vm.cfg" >"$console" 2>"$stderr" </dev/null
rc=$?
echo "# exit status $rc"

m() { e2e_marker "$console" "$1"; }
# same_bytes FILE OFFSET LEN OTHER OTHER_OFFSET
same_bytes() {
	cmp -s <(tail -c +$(($2 + 1)) "$1" | head -c "$3") <(tail -c +$(($5 + 1)) "$4" | head -c "$3")
}
positive() { [ -n "$1" ] && [ "$1" -gt 0 ]; }
md5_of() { md5sum <"$1" | cut -d' ' -f1; }

rng=$(m rng)
# The devices are this test's subject; their transport's discovery is not.
if grep -q 'CUBICLE-GUEST ready' "$console" && [ "$(m n_virtio)" = 0 ]; then
	e2e_dump "$console"
	e2e_skip "the guest found no virtio device at all (is the transport discoverable?)"
fi
e2e_check "guest reached ready" grep -q 'CUBICLE-GUEST ready' "$console"
e2e_check "vda has 32 MiB (got '$(m vda_sectors)' sectors)" [ "$(m vda_sectors)" = 65536 ]
e2e_check "vda serial (got '$(m vda_serial)')" [ "$(m vda_serial)" = cubicle-disk0 ]
e2e_check "vda writable (ro '$(m vda_ro)')" [ "$(m vda_ro)" = 0 ]
e2e_check "vdb read-only (ro '$(m vdb_ro)')" [ "$(m vdb_ro)" = 1 ]
e2e_check "vda offers discard (max '$(m vda_discard)' bytes)" positive "$(m vda_discard)"
e2e_check "guest reads the image (md5)" [ "$(m vda_md5)" = "$want_md5" ]
e2e_check "guest write + fsync succeeded" [ "$(m vda_write)" = 0 ]
e2e_check "the write reached the image" same_bytes "$w/disk.img" 0 $((1 << 20)) "$w/disk.img" $((8 << 20))
e2e_check "blkdiscard succeeded" [ "$(m vda_blkdiscard)" = 0 ]
# Discard is a hint (virtio 1.2 §5.2.6.2): what a discarded range reads back as is not
# specified, and hole punching is not there on every host file system (9p).
e2e_check "write to the read-only disk failed" [ "$(m vdb_write)" != 0 ]
ro_ok() { [ "$(m vdb_md5)" = "$ro_md5" ] && [ "$(md5_of "$w/ro.img")" = "$ro_md5" ]; }
e2e_check "read-only disk unchanged, guest read it" ro_ok
e2e_check "virtio-rng is the hwrng (got '$rng')" [ "${rng#virtio_rng}" != "$rng" ]
e2e_check "hwrng gave 256 bytes (got '$(m rng_bytes)')" [ "$(m rng_bytes)" = 256 ]
e2e_check "hvc0 write succeeded" [ "$(m hvc)" = 0 ]
e2e_check "hvc0 output reached the host" grep -q 'hello from hvc0' "$w/hvc.log"
e2e_check "root disk logged" grep -q 'root disk raw\[disk0\]' "$stderr"
e2e_check "exit status 0 after reboot -f (got $rc)" [ $rc = 0 ]
e2e_finish "$console" "$stderr"
