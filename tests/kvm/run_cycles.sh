#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The create/destroy cycles (tests/kvm/cycles.sh, issue 14) through run_payloads.sh, in a nested L1 of its own when there is no /dev/kvm here, so that they run beside the other payloads under make -j.
CUBICLE_PAYLOAD_ONLY=cycles
export CUBICLE_PAYLOAD_ONLY
exec sh "$(dirname "$0")/run_payloads.sh" "$@"
