#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The virtio-vsock payload group (tests/kvm/vsock.sh: a raw driver, credit, RSTs, malformed packets, a guest that never reads) through run_payloads.sh, in a nested L1 of its own so that it runs beside the other payloads under make -j.
CUBICLE_PAYLOAD_ONLY=vsock
export CUBICLE_PAYLOAD_ONLY
exec sh "$(dirname "$0")/run_payloads.sh" "$@"
