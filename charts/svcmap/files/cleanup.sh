#!/bin/sh
# svcmap pre-delete cleanup, one pod per node: detach every svcmap program
# (cgroup links, tc/tcx) and remove the pins, then report done through the
# readiness probe (DONE_FILE) and wait to be deleted with the hook.
#
# Environment (set by the cleanup DaemonSet):
#   PIN_DIR    bpffs directory of the pins (pinDir)
#   DONE_FILE  file whose existence the readiness probe checks
#   NODE_NAME  for the log lines
set -eu

PIN_DIR=${PIN_DIR:?PIN_DIR must name the pin directory}
DONE_FILE=${DONE_FILE:-/tmp/svcmap-cleanup.done}
NODE_NAME=${NODE_NAME:-unknown}

log() {
	printf 'svcmap-cleanup: node %s: %s\n' "$NODE_NAME" "$*"
}

rm -f "$DONE_FILE"
log "svcmap cleanup --force --pin-dir $PIN_DIR"
# The cgroup and tcx links are pinned there: detaching them through the pins
# reaches every attachment the agent made. --force: this runs as a pre-delete
# hook, before Helm deletes the agent's DaemonSet, so the node's agent is
# still running (and holds the pin directory's lock, which makes a plain
# `svcmap cleanup` refuse). Uninstalling is asking for exactly what --force
# warns of: the node's Services stop being translated.
svcmap cleanup --force --pin-dir "$PIN_DIR"

if [ -e "$PIN_DIR" ]; then
	log "error: $PIN_DIR still exists after svcmap cleanup:"
	ls -la "$PIN_DIR" >&2 || true
	exit 1
fi

touch "$DONE_FILE"
log "done: programs detached, pins removed; waiting for the hook to finish"

sleeper=
trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM INT
while :; do
	sleep 3600 &
	sleeper=$!
	wait "$sleeper"
done
