#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Makes (or removes) a persistent tap device for cubicle's tap backend: creates it, gives the host side an address and brings it up.
#
# Usage: scripts/tap-setup.sh [--user USER] [--addr CIDR] [--mtu N] TAPNAME
#        scripts/tap-setup.sh --delete TAPNAME
#
#   TAPNAME      e.g. tap0; a VM attaches with
#                  backend = { type = "tap"; ifname = "tap0"; };
#   --addr CIDR  the host's address on the tap (default 10.0.2.1/24); the
#                guest then uses an address of that subnet (10.0.2.15) with
#                the host's as its gateway
#   --user USER  let USER open the tap (cubicle then needs no CAP_NET_ADMIN
#                for the tap itself; the eBPF policy still needs root)
#   --mtu N      the tap's MTU (default: the kernel's, 1500)
#   --delete     remove the tap
#
# Needs root (ip from iproute2). The host routes, NAT or firewalling beyond
# the tap are yours to set up: this script gives the guest the host only.
# Running cubicle with `create = true` instead makes a tap that lives as
# long as the VM; then give it an address once it exists, as below.
set -eu

addr=10.0.2.1/24 user='' mtu='' delete=0
die() { printf 'tap-setup: error: %s\n' "$*" >&2; exit 1; }
while [ $# -gt 0 ]; do
	case $1 in
	--addr) addr=${2:?--addr needs a CIDR}; shift ;;
	--user) user=${2:?--user needs a user}; shift ;;
	--mtu) mtu=${2:?--mtu needs a number}; shift ;;
	--delete) delete=1 ;;
	-h|--help) sed -n '3,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown option '$1' (try --help)" ;;
	*) break ;;
	esac
	shift
done
[ $# -eq 1 ] || die "give exactly one tap name (try --help)"
tap=$1
command -v ip >/dev/null || PATH=$PATH:/sbin:/usr/sbin
command -v ip >/dev/null || die "ip not found (apt-get install iproute2)"

if [ $delete = 1 ]; then
	ip tuntap del dev "$tap" mode tap
	echo "tap-setup: removed $tap" >&2
	exit 0
fi
[ -c /dev/net/tun ] || modprobe tun 2>/dev/null || true
[ -c /dev/net/tun ] || die "/dev/net/tun is missing (modprobe tun)"
if ip link show dev "$tap" >/dev/null 2>&1; then
	echo "tap-setup: $tap exists; setting its address and state" >&2
else
	ip tuntap add dev "$tap" mode tap vnet_hdr ${user:+user "$user"}
fi
ip addr replace "$addr" dev "$tap"
[ -n "$mtu" ] && ip link set dev "$tap" mtu "$mtu"
ip link set dev "$tap" up
echo "tap-setup: $tap up with host address $addr${user:+, usable by $user}" >&2
