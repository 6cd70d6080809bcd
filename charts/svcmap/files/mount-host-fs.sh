#!/bin/sh
# svcmap init container: make sure the host has
#   - bpffs at /sys/fs/bpf (where the agent pins its maps and links), and
#   - cgroup v2 at $CGROUP_ROOT (where the socket hooks attach),
# mounting them in the host's mount namespace when they are missing.
#
# Why nsenter and not a Bidirectional volume mount: the API server accepts
# Bidirectional mount propagation only on privileged containers, and no
# svcmap container is privileged. Entering the host's mount namespace needs
# SYS_ADMIN + SYS_CHROOT (setns) and SYS_PTRACE (opening PID 1's namespace
# files), which is all this container gets. The mount(8) and mkdir(1) that
# run are the host's own, since setns(CLONE_NEWNS) also switches the root.
#
# Environment (set by the DaemonSet):
#   HOSTPROC          the host's /proc as mounted into this container
#   CGROUP_ROOT       host path for the cgroup v2 root (cgroup.hostRoot)
#   BPF_AUTOMOUNT     true: mount bpffs when missing; false: fail instead
#   CGROUP_AUTOMOUNT  true: mount cgroup v2 when missing; false: fail instead
set -eu

HOSTPROC=${HOSTPROC:-/hostproc}
CGROUP_ROOT=${CGROUP_ROOT:?CGROUP_ROOT must name the host path of the cgroup v2 root}
BPF_AUTOMOUNT=${BPF_AUTOMOUNT:-true}
CGROUP_AUTOMOUNT=${CGROUP_AUTOMOUNT:-true}
BPFFS=/sys/fs/bpf

log() {
	printf 'svcmap-init: %s\n' "$*"
}

die() {
	printf 'svcmap-init: error: %s\n' "$*" >&2
	exit 1
}

# fstype_at PATH prints the type of the file system mounted at PATH in the
# host's mount namespace (the topmost mount when several are stacked), or
# nothing when PATH is not a mount point. mountinfo lines read
#   ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE
fstype_at() {
	awk -v mp="$1" '
		$5 == mp {
			for (i = 7; i <= NF; i++) {
				if ($i == "-") {
					t = $(i + 1)
					break
				}
			}
		}
		END {
			if (t != "") print t
		}
	' "$HOSTPROC/1/mountinfo"
}

# host_run CMD... runs CMD in the host's mount and cgroup namespaces.
host_run() {
	nsenter --mount="$HOSTPROC/1/ns/mnt" --cgroup="$HOSTPROC/1/ns/cgroup" -- "$@"
}

[ -r "$HOSTPROC/1/mountinfo" ] ||
	die "cannot read $HOSTPROC/1/mountinfo: the host's /proc is not mounted at $HOSTPROC"

# bpffs at /sys/fs/bpf.
fstype=$(fstype_at "$BPFFS")
if [ "$fstype" = bpf ]; then
	log "bpffs is mounted at $BPFFS on the host"
elif [ "$BPF_AUTOMOUNT" != true ]; then
	die "the host has no bpffs at $BPFFS (found: ${fstype:-nothing}) and bpf.autoMount is false; mount it on the host (e.g. a sys-fs-bpf.mount unit) or set bpf.autoMount=true"
else
	log "mounting bpffs at $BPFFS on the host (found: ${fstype:-nothing})"
	host_run mount -t bpf -o rw,nosuid,nodev,noexec,relatime,mode=700 bpffs "$BPFFS"
	[ "$(fstype_at "$BPFFS")" = bpf ] || die "mounting bpffs at $BPFFS did not take effect"
	log "bpffs mounted at $BPFFS"
fi

# cgroup v2 at $CGROUP_ROOT.
fstype=$(fstype_at "$CGROUP_ROOT")
if [ "$fstype" = cgroup2 ]; then
	log "cgroup v2 is mounted at $CGROUP_ROOT on the host"
elif [ -n "$fstype" ]; then
	die "$CGROUP_ROOT on the host holds a $fstype mount, not cgroup v2; set cgroup.hostRoot to a cgroup v2 mount point or to an unused directory (default /run/svcmap/cgroupv2)"
elif [ "$CGROUP_AUTOMOUNT" != true ]; then
	die "the host has no cgroup v2 mount at $CGROUP_ROOT and cgroup.autoMount is false; set cgroup.hostRoot to the host's cgroup v2 mount point (often /sys/fs/cgroup) or set cgroup.autoMount=true"
else
	log "mounting cgroup v2 at $CGROUP_ROOT on the host"
	host_run mkdir -p "$CGROUP_ROOT"
	host_run mount -t cgroup2 -o rw,nosuid,nodev,noexec,relatime cgroup2 "$CGROUP_ROOT"
	[ "$(fstype_at "$CGROUP_ROOT")" = cgroup2 ] || die "mounting cgroup v2 at $CGROUP_ROOT did not take effect"
	log "cgroup v2 mounted at $CGROUP_ROOT"
fi
