# SPDX-License-Identifier: Apache-2.0
# Sourced by run_payloads.sh (CUBICLE_PAYLOAD_ONLY=cycles, run_cycles.sh):
# create/destroy cycles of an idle payload VM under a long-lived parent made
# like `cubicle serve` (tests/kvm/cycles.c, issue 14 must-show 4): the
# parent's fds and VmRSS, each VMM's fds and VmRSS stay flat, nothing is left.
# CUBICLE_CYCLES sets the number (default 1000; CI's sanitizer run: fewer).

# ---- create/destroy cycles (issue 14) ----
cy_n=${CUBICLE_CYCLES:-1000}
mkcfg cycles idle long 1
mkdir "$tmp/cycles"
cy_note=
[ $asan = 1 ] && cy_note=' (VmRSS not judged under ASan)'
if cy_out=$(CYCLES_NO_RSS=$asan "$bd/tests/kvm/cycles" "$cub" "$tmp/cycles.cfg" "$tmp/cycles" "$cy_n" 2>"$tmp/cycles.err"); then
	echo "ok - create/destroy x$cy_n: $cy_out$cy_note"
	tail -n 1 "$tmp/cycles.err" | sed 's/^/#   /'
	pass=$((pass + 1))
else
	echo "not ok - create/destroy x$cy_n: $cy_out"
	sed 's/^/#   /' "$tmp/cycles.err" | tail -n 20
	fail=$((fail + 1))
fi
