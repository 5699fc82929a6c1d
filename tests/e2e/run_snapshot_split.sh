#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# run_snapshot.sh with machine.irqchip = "split": snapshot, restore and roll back a Linux guest whose IOAPIC is cubicle's (its state in the snapshot, the new generation's SCI a level-triggered pin through it).
E2E_NAME=run_snapshot_split exec "$(dirname "${BASH_SOURCE[0]}")/run_snapshot.sh" --split
