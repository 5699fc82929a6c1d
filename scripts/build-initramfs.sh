#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Builds a busybox initramfs (gzip'd newc cpio) carrying chosen kernel modules and either the example guest /init or a given one.
#
# Usage: scripts/build-initramfs.sh [--init FILE] [--modules "NAME..."] [--busybox FILE] [--agent FILE] [MODULES_DIR [OUTPUT]]
#
#   MODULES_DIR  a kernel's lib/modules/<release> tree
#                (default: $CUBICLE_CACHE/guest/x86_64/modules, as fetch-guest.sh leaves it)
#   OUTPUT       the .cpio.gz to write (default: $CUBICLE_CACHE/guest/x86_64/initramfs.cpio.gz)
#   --init FILE  use FILE as /init instead of the example guest init below
#   --modules L  modules to carry, space separated; their dependencies are added
#                depth first (default: the virtio set a cubicle guest may use)
#   --busybox F  a static busybox to carry instead of the host's (e.g. an arm64
#                one); when it cannot run here, its applet links are taken from
#                the host's busybox (same Debian package), and /init should run
#                `/bin/busybox --install -s /bin` to fill any gap
#   --agent F    carry F (a static cubicle-agent) as /bin/cubicle-agent; the
#                example /init starts it when the guest has a vsock device, and
#                with `cubicle.agent` on the kernel command line stays up
#                serving it instead of rebooting; with cubicle.root=/dev/vdX too
#                it mounts that ext4 disk and runs the agent from there as pid 1
#                (templates built with `cubicle template build --rootfs/--oci`)
#
# Modules go to /lib/modules/*.ko and their load order to /etc/modules.order.
# Built-in modules are skipped; missing ones are warned about and skipped.

set -euo pipefail

cache=${CUBICLE_CACHE:-${HOME:?HOME is not set}/.cache/cubicle}
moddir=$cache/guest/x86_64/modules
out=$cache/guest/x86_64/initramfs.cpio.gz
init=
busybox=
agent=
mods="virtio virtio_ring virtio_pci virtio_blk virtio_net virtio_console virtio_rng vmw_vsock_virtio_transport"

say() { printf 'build-initramfs: %s\n' "$*" >&2; }
die() { printf 'build-initramfs: error: %s\n' "$*" >&2; exit 1; }

pos=()
while [ $# -gt 0 ]; do
	case $1 in
	--init) init=${2:?--init needs a file}; shift ;;
	--modules) mods=${2?--modules needs a list}; shift ;;
	--busybox) busybox=${2:?--busybox needs a file}; shift ;;
	--agent) agent=${2:?--agent needs a file}; shift ;;
	-h|--help) sed -n '3,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown option '$1' (try --help)" ;;
	*) pos+=("$1") ;;
	esac
	shift
done
[ ${#pos[@]} -le 2 ] || die "too many arguments (try --help)"
[ ${#pos[@]} -ge 1 ] && moddir=${pos[0]}
[ ${#pos[@]} -ge 2 ] && out=${pos[1]}

host_busybox=/bin/busybox
[ -x "$host_busybox" ] || host_busybox=/usr/bin/busybox
if [ -z "$busybox" ]; then
	busybox=$host_busybox
	[ -x "$busybox" ] || die "busybox not found: apt-get install busybox-static"
fi
[ -f "$busybox" ] || die "busybox '$busybox' not found"
file -L "$busybox" 2>/dev/null | grep -q 'dynamically linked' &&
	die "$busybox is dynamically linked: apt-get install busybox-static"
for tool in cpio gzip modinfo; do
	command -v $tool >/dev/null || die "'$tool' not found (packages: cpio gzip kmod)"
done
[ -d "$moddir/kernel" ] || die "$moddir is not a kernel modules tree (run scripts/fetch-guest.sh)"
[ -z "$init" ] || [ -f "$init" ] || die "init file '$init' not found"
if [ -n "$agent" ]; then
	[ -f "$agent" ] || die "agent '$agent' not found (build it: make agent/cubicle-agent)"
	file -L "$agent" 2>/dev/null | grep -q 'dynamically linked' &&
		die "$agent is dynamically linked; the guest has no libc: configure without --enable-sanitizers"
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/cubicle-initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,sbin,dev,proc,sys,run,tmp,etc,root,lib/modules,mnt}

# busybox and a link per applet
cp "$busybox" "$stage/bin/busybox"
chmod 755 "$stage/bin/busybox"
if [ -n "$agent" ]; then
	cp "$agent" "$stage/bin/cubicle-agent"
	chmod 755 "$stage/bin/cubicle-agent"
	# E2B's SDK runs every command as `/bin/bash -l -c CMD`; busybox has no
	# bash applet, and its ash takes those flags.
	[ -e "$stage/bin/bash" ] || printf '#!/bin/sh\n# bash stand-in for E2B clients: busybox ash takes -l -c.\nexec /bin/sh "$@"\n' >"$stage/bin/bash"
	chmod 755 "$stage/bin/bash"
fi
applets=$("$busybox" --list 2>/dev/null) ||
	applets=$("$host_busybox" --list 2>/dev/null) || applets=sh
for applet in $applets; do
	[ "$applet" = busybox ] || ln -sf busybox "$stage/bin/$applet"
done
# The kernel opens /dev/console before /init runs; /init also re-opens it
# after devtmpfs is mounted, for builds done without root.
mknod -m 600 "$stage/dev/console" c 5 1 2>/dev/null || true

# --- modules: resolve dependencies depth first ---------------------------
norm() { echo "${1//-/_}"; }
declare -A file_of=() builtin=() seen=()
while IFS= read -r f; do
	b=${f##*/}; b=${b%%.ko*}
	file_of[$(norm "$b")]=$f
done < <(find "$moddir/kernel" -name '*.ko*')
if [ -f "$moddir/modules.builtin" ]; then
	while IFS= read -r f; do
		b=${f##*/}; builtin[$(norm "${b%%.ko*}")]=1
	done <"$moddir/modules.builtin"
fi

order=()
add_module() {
	local name f dep
	name=$(norm "$1")
	[ -n "${seen[$name]:-}" ] && return 0
	seen[$name]=1
	if [ -n "${builtin[$name]:-}" ]; then
		return 0
	fi
	f=${file_of[$name]:-}
	if [ -z "$f" ]; then
		say "warning: module $1 is neither built in nor in $moddir; skipped"
		return 0
	fi
	for dep in $(modinfo -F depends "$f" | tr ',' ' '); do
		add_module "$dep"
	done
	order+=("$f")
}
for m in $mods; do add_module "$m"; done

: >"$stage/etc/modules.order"
for f in "${order[@]}"; do
	b=${f##*/}; b=${b%%.ko*}.ko
	case $f in
	*.ko) cp "$f" "$stage/lib/modules/$b" ;;
	*.ko.xz) xz -dc "$f" >"$stage/lib/modules/$b" ;;
	*.ko.zst) zstd -qdc "$f" >"$stage/lib/modules/$b" ;;
	*.ko.gz) gzip -dc "$f" >"$stage/lib/modules/$b" ;;
	*) die "unknown module format: $f" ;;
	esac
	echo "$b" >>"$stage/etc/modules.order"
done

# --- /init -----------------------------------------------------------------
if [ -n "$init" ]; then
	cp "$init" "$stage/init"
else
	cat >"$stage/init" <<'EOF'
#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The example cubicle guest's init: report what the guest sees, signal boot done, then reboot, panic or open a shell.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1

while read -r m; do
	insmod "/lib/modules/$m" 2>/dev/null
done </etc/modules.order

cpus=$(grep -c '^processor' /proc/cpuinfo)
# Top-level "System RAM" ranges only; ash arithmetic is 64-bit.
kib=0
while IFS=' ' read -r range colon rest; do
	case "$range" in [0-9a-f]*-[0-9a-f]*) ;; *) continue ;; esac
	[ "$rest" = "System RAM" ] || continue
	start=${range%-*} end=${range#*-}
	kib=$((kib + (0x$end - 0x$start + 1) / 1024))
done </proc/iomem
read -r cmdline </proc/cmdline

echo "CUBICLE-GUEST cpus=$cpus"
echo "CUBICLE-GUEST mem_kib=$kib"
echo "CUBICLE-GUEST cmdline=$cmdline"
echo "CUBICLE-GUEST ready"
# Tell cubicle's boot-timer device that userspace is up.
devmem 0xd0000000 8 123 2>/dev/null || echo "CUBICLE-GUEST devmem-failed"
# Where the kernel's text runs: KASLR's choice (root reads it unmasked).
# After the marker: reading /proc/kallsyms (~150k symbols) takes the
# nested guest about a second, which no boot time should include.
echo "CUBICLE-GUEST text=$(grep ' _text$' /proc/kallsyms | cut -d' ' -f1)"

# The agent (scripts/build-initramfs.sh --agent) serves `cubicle exec`, `cubicle
# cp` and E2B's SDK over vsock port 49983 when the VM has a vsock device. With
# cubicle.agent on the command line the guest stays up for it (and powers off
# when it exits); without, the example goes on to reboot as before.
vsockdev=$(ls -d /sys/bus/virtio/drivers/vmw_vsock_virtio_transport/virtio* 2>/dev/null)
# cubicle.root=DEV (what `cubicle template build --rootfs/--ext4/--oci` adds):
# the agent serves from inside the ext4 file system on DEV instead, as pid 1,
# from a tmpfs at /.cubicle (nothing of it is written to the disk but that
# folder and the mount points).
root=
for w in $cmdline; do
	case $w in cubicle.root=/dev/*) root=${w#cubicle.root=} ;; esac
done
if [ -n "$root" ] && [ -x /bin/cubicle-agent ] && [ -n "$vsockdev" ]; then
	mkdir -p /newroot
	if mount -t ext4 "$root" /newroot; then
		for d in proc sys dev tmp home/user .cubicle; do
			[ -d "/newroot/$d" ] || mkdir -p "/newroot/$d"
		done
		chmod 1777 /newroot/tmp
		mount -t tmpfs -o mode=755,size=64m cubicle /newroot/.cubicle
		cp /bin/cubicle-agent /newroot/.cubicle/cubicle-agent
		for d in proc sys dev; do mount --move "/$d" "/newroot/$d"; done
		echo "CUBICLE-GUEST root=$root"
		export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		cd /newroot
		exec switch_root /newroot /.cubicle/cubicle-agent
	fi
	echo "CUBICLE-GUEST cannot mount $root as ext4"
	sync
	reboot -f
fi
if [ -x /bin/cubicle-agent ] && [ -n "$vsockdev" ]; then
	mkdir -p /home/user /tmp
	/bin/cubicle-agent &
	agent=$!
	echo "CUBICLE-GUEST agent pid=$agent"
	case " $cmdline " in
	*" cubicle.agent "*)
		wait $agent
		echo "CUBICLE-GUEST agent exited ($?)"
		sync
		reboot -f ;;
	esac
fi

# The markers sit in the tty's buffer until the UART has sent them (slow under
# emulation); a panic's printk or a reset would cut or interleave them.
sleep 1
case " $cmdline " in
*" cubicle.test=panic "*)
	sleep 1
	echo 1 >/proc/sys/kernel/sysrq
	echo c >/proc/sysrq-trigger ;;
*" cubicle.shell "*)
	setsid cttyhack sh ;;
esac
sync
reboot -f
EOF
fi
chmod 755 "$stage/init"

mkdir -p "$(dirname "$out")"
tmpout=$(mktemp "$out.XXXXXX")
(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort |
	cpio --quiet -o -H newc -R 0:0 --reproducible) | gzip -9n >"$tmpout"
chmod 644 "$tmpout"
mv -f "$tmpout" "$out"
say "wrote $out (${#order[@]} modules: $(sed 's/\.ko$//' "$stage/etc/modules.order" | tr '\n' ' '))"
