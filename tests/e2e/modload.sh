#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# modload.sh NAME DIR MODULES NESTED: load kernel module NAME. In the nested
# L1 (NESTED 1) only its initramfs's modules are there: insmod the L1
# kernel's own from MODULES/kernel/DIR/NAME.ko; elsewhere modprobe it.
[ -d "/sys/module/$1" ] && exit 0
if [ "$4" = 1 ]; then
	insmod "$3/kernel/$2/$1.ko"
else
	modprobe "$1"
fi
