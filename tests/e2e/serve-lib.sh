# SPDX-License-Identifier: Apache-2.0
# Sourced by the scripts the `cubicle serve` e2e tests run where KVM is
# (run_serve.sh, run_serve_net.sh, run_serve_rootfs.sh), after they set
# $w (work folder, shared with the host), $k (guest kernel), $cub (cubicle),
# $top (source tree). Gives them:
#   $t, $state     a folder off the 9p share (it cannot hold sockets) and
#                  serve's state folder in it; $fail, ok, bad
#   serve_vm_cfg FILE [DEVICE...]   a template VM file: the example initramfs
#                  ($w/initramfs.cpio.gz) staying up for the agent, a file
#                  console, a vsock device, and each DEVICE line
#   serve_template NAME ARGS...     `cubicle template build NAME ARGS...`,
#                  reported (its output in $w/template-NAME.out); status 1
#                  with the build's and console's last lines on failure
#   start_serve CONFIG LOG          serve in the background: $spid, $url, $key
#   stop_serve                      SIGTERM to it, reaped
#   serve_left [WHAT FOUND]         "ok - nothing left" when no VMM process
#                  and no sandbox folder is left, and FOUND (what the caller
#                  found left of WHAT, e.g. "tap" and the taps) is empty
t=$(mktemp -d)
state=$t/s
fail=0
ok() { echo "ok - $*"; }
bad() { echo "not ok - $*"; fail=1; }

serve_vm_cfg() {
	local f=$1 d
	shift
	{
		echo 'machine = { vcpus = 1; memory_mib = 256; };'
		echo "boot = { kernel = \"$k\"; initrd = \"$w/initramfs.cpio.gz\";"
		echo '  cmdline = "console=ttyS0 reboot=k panic=-1 quiet cubicle.agent"; };'
		echo 'devices = ('
		echo "  { type = \"serial8250\"; id = \"com1\"; console = \"file\"; path = \"$t/template-console.log\"; },"
		printf '  { type = "virtio-vsock"; id = "vsock0"; guest_cid = 3; uds_path = "%s" }' "$t/template.sock"
		for d in "$@"; do printf ',\n  %s' "$d"; done
		printf '\n);\n'
	} >"$f"
}

serve_template() {
	local name=$1
	shift
	if "$cub" template build "$name" "$@" --state "$state" >"$w/template-$name.out" 2>&1; then
		ok "cubicle template build $name: $(tail -n 1 "$w/template-$name.out")"
	else
		bad "cubicle template build $name $*: $(tail -n 5 "$w/template-$name.out")"
		tail -n 20 "$state"/templates/."$name".build-*/build.log 2>/dev/null
		tail -n 20 "$t/template-console.log" 2>/dev/null
		return 1
	fi
}

start_serve() {
	"$cub" serve --config "$1" --state "$state" --listen 127.0.0.1:0 >"$2" 2>&1 &
	spid=$!
	port=$(sh "$top/tests/serve/serve-port.sh" "$2") ||
		{ bad "serve did not start: $(cat "$2")"; exit 1; }
	url=http://127.0.0.1:$port
	key=$(cat "$state/api-key")
}

stop_serve() {
	kill "$spid"
	wait "$spid"
	sleep 0.5
}

serve_left() {
	local left dirs
	left=$(pgrep -af "cubicle restore" || true)
	dirs=$(ls "$state/sandboxes" 2>/dev/null)
	if [ -z "$left$dirs${2:-}" ]; then
		ok "nothing left: no VMM process, sandbox folder${1:+ or $1}"
	else
		bad "left behind: processes [$left] folders [$dirs]${1:+ $1 [${2:-}]}"
	fi
}
