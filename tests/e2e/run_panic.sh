#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Boots the example guest with cubicle.test=panic and expects cubicle to report the guest panic as exit status 3 (the checks live in run_boot.sh).
E2E_NAME=run_panic exec "$(dirname "${BASH_SOURCE[0]}")/run_boot.sh" --panic
