#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every shell script of the tree parses in each shell it may meet: one that
# starts with #!/bin/bash under bash; one that starts with #!/bin/sh, and a
# fragment others source (no #! line), under dash, bash as /bin/sh (POSIX
# mode) and plain bash (`bash tests/kvm/run_payloads.sh`). A sourced fragment
# that a shell cannot parse fails only its `.`, and the caller goes on: under
# plain bash the snapshot group of tests/kvm/run_payloads.sh did not run and
# the suite still passed (a ' inside "${v:+...}", which plain bash reads as
# the start of a quoted string).
set -u
sd=${top_srcdir:-.}
status=0
n=0
sh_shells='bash --posix:bash'
command -v dash >/dev/null 2>&1 && sh_shells="dash:$sh_shells"
check() { # SHELL-COMMAND FILE
	if ! out=$($1 -n "$2" 2>&1); then
		echo "not ok - $2 does not parse under $1: $out"
		status=1
	fi
}
for f in $(find "$sd/scripts" "$sd/bench" "$sd/tests" "$sd/tools" "$sd/agent" "$sd/.ci" \
	-name node_modules -prune -o -type f \( -name '*.sh' -o -path '*/.ci/run' \) -print 2>/dev/null); do
	n=$((n + 1))
	case $(head -n 1 "$f") in
	'#!/bin/bash'* | '#!/usr/bin/env bash'*)
		check bash "$f"
		;;
	'#!'*sh*|'#'*|'')
		IFS=:
		for s in $sh_shells; do
			IFS=' '
			check "$s" "$f"
		done
		IFS=' 	
'
		;;
	*)
		echo "not ok - $f: a .sh file that is no shell script? (first line: $(head -n 1 "$f"))"
		status=1
		;;
	esac
done
if [ $n -lt 20 ]; then
	echo "not ok - only $n shell scripts found under $sd (is top_srcdir right?)"
	exit 1
fi
[ $status -eq 0 ] && echo "ok - $n shell scripts parse (bash ones under bash; sh ones and sourced fragments under each of: $sh_shells)"
exit $status
