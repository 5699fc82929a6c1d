#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The cubicle program links the static archives configure found
# (configure.ac: "how the cubicle program links its libraries"): fails if
# the program still needs the shared copy of any of them (libtool put the
# shared ones first), or exports their symbols (a plugin linking the shared
# library would then call the program's copy).
set -u
bd=${top_builddir:-.}
prog="$bd/cubicle"
if [ -z "${CUBICLE_STATIC_LIBS:-}" ]; then
	echo "skip - configure linked no static archives into cubicle (--disable-static-deps, or none found)"
	exit 77
fi
if ! needed=$(readelf -d "$prog" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p') || [ -z "$needed" ]; then
	echo "not ok - cannot read the shared libraries $prog needs (readelf -d)"
	exit 1
fi
status=0
n=0
for a in $CUBICLE_STATIC_LIBS; do
	n=$((n + 1))
	stem=$(basename "$a" .a)
	if echo "$needed" | grep -q "^$stem\.so"; then
		echo "not ok - $prog needs the shared $stem although configure chose $a"
		status=1
	fi
done
exported=$(nm -D --defined-only "$prog" | awk '{print $NF}' |
	grep -E '^(ZSTD_|ZDICT_|XXH|LZ4|json_|jansson_|seccomp_|config_|ffi_|crc32|inflate|deflate)' | head -5 || true)
if [ -n "$exported" ]; then
	echo "not ok - $prog exports its static libraries' symbols: $exported"
	status=1
fi
[ $status -eq 0 ] && echo "ok - cubicle links $n static archives and needs only: $(echo $needed)"
exit $status
