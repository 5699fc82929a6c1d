# SPDX-License-Identifier: Apache-2.0
# What the host-side agent tests (run_agent.sh, tests/e2b/run_sdk.sh) share: the build and source folders, the agent, and a skip that fails when CUBICLE_E2E_REQUIRE=1. Set $what (the test, for its cross-build skip), then source it.
set -u
bd=${top_builddir:-.}
sd=${top_srcdir:-.}
agent=${CUBICLE_AGENT:-$bd/agent/cubicle-agent}
req=${CUBICLE_E2E_REQUIRE:-0}
skip() {
	if [ "$req" = 1 ]; then echo "FAIL: $1"; exit 1; fi
	echo "SKIP: $1"; exit 77
}
[ -n "${TEST_RUNNER:-}" ] && { echo "SKIP: cross build: the ${what:-test} runs in the native build"; exit 77; }
