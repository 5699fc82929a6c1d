#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Fails if any built plugin needs a symbol from the executable (cub_*/vm_*/...)
# or exports anything but cubicle_plugin: plugins get host services only
# through struct cub_host.
set -u
bd=${top_builddir:-.}
status=0
found=0
for so in "$bd"/plugins/*/.libs/*.so; do
	[ -e "$so" ] || continue
	found=$((found + 1))
	bad=$(nm -D --undefined-only "$so" | awk '{print $NF}' |
		grep -E '^(cub_|vm_|bus_|mem_|event_|config_|loader_|devices_|arch_|log_|irq_|vcpu_)' || true)
	if [ -n "$bad" ]; then
		echo "not ok - $so needs executable symbols: $bad"
		status=1
	fi
	exported=$(nm -D --defined-only "$so" | awk '$2 ~ /[A-Z]/ {print $NF}' | grep -v '^cubicle_plugin$' || true)
	if [ -n "$exported" ]; then
		echo "not ok - $so exports more than cubicle_plugin: $exported"
		status=1
	fi
done
if [ "$found" -eq 0 ]; then
	echo "not ok - no plugins found under $bd/plugins"
	exit 1
fi
[ $status -eq 0 ] && echo "ok - $found plugins use only the cub_host vtable and export only cubicle_plugin"
exit $status
