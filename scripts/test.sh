#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# README command 2: the whole test suite. Installs dependencies and the guest
# kernel, builds with warnings as errors, runs `make check` (unit, KVM payload,
# Linux end-to-end), the unit and payload tests again under ASan+UBSan beside
# the libFuzzer smoke run, and `make distcheck`; then the ARM64 cross build
# (build-arm64/) with its unit tests under qemu-user, and the ARM64 nested boot
# (begun beside the fuzz smoke and distcheck when those are still running;
# its packages are downloaded beside the first stage). Each step's header
# carries the seconds since the start and the CPU's idle share so far.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
t0=$(date +%s)
# idle: the share of the host's CPU time left idle since the start (a
# step's header shows it: on CI's 2 cores the nested stages keep it near 0,
# so only less work, not more overlap, makes CI shorter).
read -r _ u0 n0 s0 i0 w0 _ </proc/stat
idle() {
	local u n s i w
	read -r _ u n s i w _ </proc/stat
	echo "$(((i + w - i0 - w0) * 100 / (u + n + s + i + w - u0 - n0 - s0 - i0 - w0 + 1)))%"
}
step() { echo "== [$(($(date +%s) - t0)) s, CPU idle $(idle)] $*" >&2; }
# failed DIR: the logs of the tests that failed under DIR (their .trs say
# FAIL or ERROR), the last 300 lines of each, so a red run shows why.
failed() {
	local trs
	trs=$(grep -l -E '^:test-result: (FAIL|ERROR|XPASS)' $(find "$1/tests" -name '*.trs') 2>/dev/null)
	[ -n "$trs" ] || echo "test.sh: no test failed in $1: make itself did (see above)" >&2
	for t in $trs; do
		echo "==== ${t%.trs}.log (last 300 lines)" >&2
		tail -n 300 "${t%.trs}.log" >&2
	done
	exit 1
}
"$src/scripts/deps.sh" --test
"$src/scripts/fetch-guest.sh"
export CUBICLE_E2E_REQUIRE=1 # a missing kernel or QEMU fails instead of skipping
# The ARM64 stage's packages are downloaded now, beside
# the first stage (minutes on a fresh machine, which would otherwise leave
# the CPU idle at that stage's start); nothing is installed until that stage
# (a multiarch install may upgrade the host's own libc to match, which must
# not happen under running builds). Its log is shown when that stage begins.
nice -n 10 "$src/scripts/deps-arm64.sh" --download-only >"$src/deps-arm64.log" 2>&1 </dev/null &
pre_arm64=$!
# A step that fails from here on waits for what runs beside it before the
# script ends, so no apt-get or make outlives it.
trap 'wait' EXIT

step "build and make check (unit, kvm payloads, e2e)"
"$src/scripts/build.sh" "$src/build" --enable-werror
# run_exec.sh streams a 16 MiB file through exec's stdout and copies it in
# and out (1 GiB by default, about 4 minutes nested on an idle machine, 14 on
# a busy one): CI has 40 minutes, and nested, at 0.5 MiB/s through exec,
# 64 MiB made run_exec the first stage's last test by a minute. What it
# checks (the stream's flow control, the sha256 on both sides) holds for any
# size past the 64 KiB chunks.
# tests/serve/run_serve_host.sh (serve with its VMMs played by a script)
# runs once, in the sanitizer build below, where it finds more.
CUBICLE_SERVE_HOST_SKIP=1 CUBICLE_EXEC_BIG_MIB=${CUBICLE_EXEC_BIG_MIB:-16} make -C "$src/build" -j2 check ||
	failed "$src/build"

step "ASan+UBSan: unit, kvm payload and serve host tests; beside them the fuzz smoke, then distcheck"
"$src/scripts/build.sh" "$src/build-asan" --enable-werror --enable-sanitizers
# The fuzz smoke (each libFuzzer harness for FUZZ_SECONDS, one at a time;
# 10 s each here: it ends CI's critical path, and the long campaigns are
# `make fuzz-smoke`'s 60 s or more by hand)
# and then `make distcheck` run beside the sanitizer tests, whose long part
# (the payloads in a nested L1, which has one vCPU) keeps one core busy and
# leaves the other mostly idle. distcheck builds the tarball and runs the
# unit tests and the CLI checks in it (the script suites ran above, from
# this tree, in a build folder of its own as distcheck's is: running them
# again made distcheck CI's last step); that the tarball holds every file
# the tests need is checked on its list below (dist_complete).
(
	rc=0
	make -C "$src/build" -j1 fuzz-smoke FUZZ_SECONDS="${FUZZ_SECONDS:-10}" >"$src/build/fuzz-smoke.log" 2>&1 || rc=1
	CUBICLE_E2E_REQUIRE=0 CUBICLE_E2E_SKIP=1 make -C "$src/build" -j2 distcheck \
		TESTS='$(UNIT_TESTS) tests/check-plugin-symbols.sh tests/check-cubicle-libs.sh tests/check-shell-syntax.sh tests/cli/run_errors.sh' \
		>"$src/build/distcheck.log" 2>&1 || rc=$((rc + 2))
	exit $rc
) &
beside=$!
# The snapshot group's clones: 10 under the sanitizers (what they look for
# is in each clone's code path, not in their number; the 50 ran above);
# likewise 100 create/destroy cycles (the 1000 ran above).
# Without a usable /dev/kvm the payload suites run in the nested harness's
# L1, whose emulated CPU runs an ASan build of cubicle many times slower:
# there they ran once above (every payload, 1000 cycles), and the sanitizers
# check the same code through the unit tests and the fuzzers, which keeps
# CI within its time on such a host.
kvm_tests='tests/kvm/run_payloads.sh tests/kvm/run_vsock_payloads.sh tests/kvm/run_cycles.sh'
if ! [ -r /dev/kvm ] || ! [ -w /dev/kvm ]; then
	echo "test.sh: no usable /dev/kvm: the payload suites ran nested above; not again under the sanitizers" >&2
	kvm_tests=
fi
asan=0
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	CUBICLE_CLONES=10 CUBICLE_CYCLES=100 make -C "$src/build-asan" -j2 check \
	TESTS="\$(UNIT_TESTS) tests/cli/run_errors.sh tests/cli/run_exec.sh tests/api/run_api.sh tests/agent/run_agent.sh tests/serve/run_pull.sh $kvm_tests tests/serve/run_serve_host.sh" ||
	asan=1
# A failure under the sanitizers is shown once what runs beside them ends.
if [ $asan != 0 ]; then
	wait $beside || :
	failed "$src/build-asan"
fi

# The ARM64 stage starts when the sanitizer tests end, beside the fuzz smoke
# and distcheck if they are still running (on a host without /dev/kvm they
# are: the sanitizer tests are short there, and a core would wait idle).
step "ARM64: multiarch dependencies (downloaded beside the first stage), cross build in build-arm64"
deps_rc=0
wait $pre_arm64 || deps_rc=$?
cat "$src/deps-arm64.log" >&2
[ $deps_rc = 0 ] || { echo "test.sh: scripts/deps-arm64.sh --download-only failed (above)" >&2; exit 1; }
"$src/scripts/deps-arm64.sh"
"$src/scripts/build.sh" "$src/build-arm64" --host=aarch64-linux-gnu --enable-werror
for f in "$src/build-arm64/cubicle" "$src"/build-arm64/plugins/*/.libs/*.so; do
	file -b "$f" | grep -q 'ARM aarch64' || { echo "test.sh: $f is not an ARM aarch64 binary: $(file -b "$f")" >&2; exit 1; }
done
echo "test.sh: cubicle and $(ls "$src"/build-arm64/plugins/*/.libs/*.so | wc -l) plugins are ARM aarch64 ELF files" >&2

# What needs KVM or an x86 guest skips here (REQUIRE=0): the x86 run above
# already insisted on every ingredient.
# ---- ARM64 nested end-to-end boot (tests/e2e/*arm64*): runs after ----
# ---- build-arm64 exists; qemu-system-aarch64 -> L1 KVM -> cubicle -> L2 ----
# It runs beside `make check` under qemu-user: its L1 has one vCPU.
step "ARM64: nested end-to-end boot, beside make check under qemu-user (KVM payload and x86 e2e tests skip there)"
"$src/scripts/fetch-guest.sh" --arch aarch64
make -C "$src/build-arm64" -j2 check-programs
make -C "$src/build-arm64" check-e2e-arm64 >"$src/build-arm64/check-e2e-arm64.log" 2>&1 &
e2e_arm64=$!
arm64=0
CUBICLE_E2E_REQUIRE=0 CUBICLE_E2E_SKIP=1 make -C "$src/build-arm64" -j1 check-no-e2e-arm64 || arm64=1
e2e_arm64_rc=0
wait $e2e_arm64 || e2e_arm64_rc=$?
cat "$src/build-arm64/check-e2e-arm64.log" >&2
[ $arm64 = 0 ] || failed "$src/build-arm64"
[ $e2e_arm64_rc = 0 ] ||
	{ cat "$src"/build-arm64/tests/e2e/run_arm64_boot.log \
		"$src"/build-arm64/tests/e2e/run_arm64_snapshot.log; exit 1; }

step "fuzz smoke and distcheck (started beside the sanitizer tests): waiting for them if they still run"
beside_rc=0
wait $beside || beside_rc=$?
cat "$src/build/fuzz-smoke.log" >&2
[ $((beside_rc & 1)) = 0 ] || { echo "test.sh: the fuzz smoke failed (its log is above)" >&2; exit 1; }
if [ $((beside_rc & 2)) != 0 ]; then
	tail -n 300 "$src/build/distcheck.log" >&2
	echo "test.sh: make distcheck failed (the end of its log is above)" >&2
	exit 1
fi
tail -n 4 "$src/build/distcheck.log" >&2
# dist_complete: every file git tracks is in the tarball (.ci/ and
# .gitignore aside, which only a clone needs).
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	tarball=$(ls "$src"/build/cubicle-*.tar.xz | head -n 1)
	git -C "$src" ls-files | grep -v -e '^\.ci/' -e '^\.gitignore$' | sort >"$src/build/dist-git.list"
	tar -tJf "$tarball" | sed 's|^[^/]*/||' | sort >"$src/build/dist-tar.list"
	missing=$(comm -23 "$src/build/dist-git.list" "$src/build/dist-tar.list")
	[ -z "$missing" ] || { echo "test.sh: $tarball lacks files git tracks (add them to EXTRA_DIST):" >&2; echo "$missing" >&2; exit 1; }
	echo "test.sh: $tarball holds all $(wc -l <"$src/build/dist-git.list") files git tracks (but .ci/ and .gitignore)" >&2
else
	echo "test.sh: not a git checkout: the tarball's list is not compared with git's" >&2
fi

step "all tests passed"
