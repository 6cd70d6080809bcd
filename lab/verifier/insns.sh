#!/bin/bash
# The verifier's processed-instruction count (and xlated size) per program of
# the BPF objects `bin/svcmap compile` last built (build/bpf/<name>.latest):
#   lab/verifier/insns.sh            -> "<object> <program> <processed> <xlated>"
# Loads each program alone, nothing pinned, nothing attached. Needs root.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
tool=${TMPDIR:-/tmp}/svcmap-verifier-insns.$(id -u)
if [ ! -x "$tool" ] || [ "$root/lab/verifier/insns.c" -nt "$tool" ]; then
	gcc -O2 -Wall -o "$tool" "$root/lab/verifier/insns.c" -lbpf
fi
for latest in "$root"/build/bpf/*.latest; do
	name=$(basename "$latest" .latest)
	obj="$root/build/bpf/$name-$(cat "$latest").o"
	"$tool" "$obj" | sed "s|^$root/build/bpf/$name-[0-9a-f]*\.o|$name|"
done
