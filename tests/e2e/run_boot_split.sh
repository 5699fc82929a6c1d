#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Boots the example guest with machine.irqchip = "split" (KVM's LAPICs, cubicle's IOAPIC, no 8259, no PIT): a stock kernel finds its timers and takes the serial's interrupts through it (the checks live in run_boot.sh).
E2E_NAME=run_boot_split exec "$(dirname "${BASH_SOURCE[0]}")/run_boot.sh" --split
