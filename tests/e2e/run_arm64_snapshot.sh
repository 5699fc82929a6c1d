#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Snapshot, SIGKILL, restore and roll back an arm64 Linux guest, nested
# inside qemu-system-aarch64 (run_arm64_boot.sh --snapshot).
exec bash "$(dirname "${BASH_SOURCE[0]}")/run_arm64_boot.sh" --snapshot
