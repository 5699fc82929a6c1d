#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# README command 2: the whole test suite. Installs dependencies and the guest
# kernel, builds with warnings as errors, runs `make check` (unit, KVM payload,
# Linux end-to-end), the unit and payload tests again under ASan+UBSan, the
# libFuzzer smoke run and `make distcheck`.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
"$src/scripts/deps.sh"
"$src/scripts/fetch-guest.sh"
export CUBICLE_E2E_REQUIRE=1 # a missing kernel or QEMU fails instead of skipping

echo "== build and make check (unit, kvm payloads, e2e)" >&2
"$src/scripts/build.sh" "$src/build" --enable-werror
make -C "$src/build" -j2 check || { cat "$src"/build/tests/*/*.log "$src"/build/tests/unit/*.log 2>/dev/null | tail -n 200; exit 1; }

echo "== ASan+UBSan: unit and kvm payload tests" >&2
"$src/scripts/build.sh" "$src/build-asan" --enable-werror --enable-sanitizers
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	make -C "$src/build-asan" -j2 check TESTS='$(UNIT_TESTS) tests/kvm/run_payloads.sh' ||
	{ tail -n 100 "$src"/build-asan/tests/*/*.log; exit 1; }

echo "== fuzz smoke: each libFuzzer harness for ${FUZZ_SECONDS:-60} s" >&2
make -C "$src/build" fuzz-smoke FUZZ_SECONDS="${FUZZ_SECONDS:-60}"

echo "== make distcheck (e2e skipped inside it: already run above)" >&2
CUBICLE_E2E_REQUIRE=0 CUBICLE_E2E_SKIP=1 make -C "$src/build" distcheck >/dev/null
echo "== all tests passed" >&2
