#!/usr/bin/env bash
# svcmap end-to-end on kind (make e2e-kind). Needs Docker (a running engine),
# kind, kubectl, helm (HELM, default .tools/bin/helm) and node on PATH.
#
#   1. creates a kind cluster without kube-proxy (kind-config.yaml)
#   2. builds the svcmap image and loads it into the nodes
#   3. installs charts/svcmap with k8sServiceHost = the control plane and
#      waits until the agent is ready on every node and CoreDNS runs
#   4. checks, from a pod: ClusterIP TCP and UDP (UDP replies must come
#      from the Service address), DNS through the kube-dns Service; from
#      the host: NodePort TCP and UDP on every node; session affinity;
#      an endpoint removal; helm test
#   5. optionally the upstream "[sig-network] Services" conformance tests
#   6. uninstalls and checks that no node keeps svcmap's pins
#   7. deletes the cluster (also on failure, after printing the agents' logs)
#
# Environment:
#   SVCMAP_E2E_CLUSTER        cluster name (svcmap-e2e)
#   SVCMAP_E2E_IMAGE          image name:tag (svcmap:e2e)
#   SVCMAP_E2E_SKIP_BUILD=1   use an existing image of that name
#   SVCMAP_E2E_KEEP=1         keep the cluster at the end (kubeconfig path printed)
#   SVCMAP_E2E_REQUIRE_AFFINITY=1  fail (not warn) when session affinity does not hold
#   KIND_NODE_IMAGE           kind node image (kind's default otherwise)
#   E2E_TEST_BINARY           path to an upstream e2e.test binary: run the
#                             "[sig-network] Services" conformance focus with it
#   E2E_TEST_SKIP             ginkgo skip regex for that run
#   DOCKER, KIND, KUBECTL, HELM, NODE  the tools (default: from PATH / .tools/bin)
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)

CLUSTER=${SVCMAP_E2E_CLUSTER:-svcmap-e2e}
IMAGE=${SVCMAP_E2E_IMAGE:-svcmap:e2e}
DOCKER=${DOCKER:-docker}
KIND=${KIND:-kind}
KUBECTL=${KUBECTL:-kubectl}
HELM=${HELM:-$root/.tools/bin/helm}
NODE=${NODE:-node}
NS=kube-system
RELEASE=svcmap
APP_NS=svcmap-e2e

work=$(mktemp -d "${TMPDIR:-/tmp}/svcmap-e2e.XXXXXX")
export KUBECONFIG="$work/kubeconfig"
cluster_created=0

step() {
	printf '\n==> %s\n' "$*"
}

info() {
	printf '    %s\n' "$*"
}

fail() {
	printf '\nFAIL: %s\n' "$*" >&2
	exit 1
}

k() {
	"$KUBECTL" "$@"
}

# wait_for DESCRIPTION TIMEOUT_SECONDS CMD...: prints what it waits for and
# retries CMD every 2 s until it succeeds or the time is up.
wait_for() {
	local what=$1 timeout=$2
	shift 2
	info "waiting up to ${timeout}s for: $what"
	local deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			info "last attempt:"
			"$@" || true
			fail "timed out after ${timeout}s waiting for: $what"
		fi
		sleep 2
	done
	info "ok: $what"
}

diagnostics() {
	printf '\n==== diagnostics ====\n' >&2
	k get nodes -o wide >&2 || true
	k get pods -A -o wide >&2 || true
	k -n "$NS" describe daemonset "$RELEASE" >&2 || true
	printf '\n==== svcmap agent logs ====\n' >&2
	k -n "$NS" logs -l "app.kubernetes.io/instance=$RELEASE" --all-containers --prefix --tail=300 >&2 || true
	k -n "$NS" logs -l "app.kubernetes.io/instance=$RELEASE" --all-containers --prefix --previous --tail=100 >&2 || true
	printf '\n==== events ====\n' >&2
	k get events -A --sort-by=.lastTimestamp >&2 || true
}

finish() {
	local status=$?
	trap - EXIT INT TERM
	if ((status != 0)) && ((cluster_created)); then
		diagnostics
	fi
	if ((cluster_created)); then
		if [[ ${SVCMAP_E2E_KEEP:-0} == 1 ]]; then
			step "keeping cluster $CLUSTER (SVCMAP_E2E_KEEP=1): export KUBECONFIG=$KUBECONFIG"
		else
			step "deleting cluster $CLUSTER"
			"$KIND" delete cluster --name "$CLUSTER" || true
			rm -rf "$work"
		fi
	else
		rm -rf "$work"
	fi
	if ((status == 0)); then
		printf '\nPASS: svcmap e2e on kind\n'
	else
		printf '\nFAIL: svcmap e2e on kind (exit %d)\n' "$status" >&2
	fi
	exit "$status"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- preflight -------------------------------------------------------------
step "checking tools"
for tool in "$DOCKER" "$KIND" "$KUBECTL" "$HELM" "$NODE"; do
	command -v "$tool" >/dev/null || fail "$tool not found (see the header of $0)"
done
"$DOCKER" info >/dev/null 2>&1 || fail "no Docker engine answers ($DOCKER info failed): kind needs one"
info "docker, kind $("$KIND" version | head -n 1), helm $("$HELM" version --short)"

# --- cluster ----------------------------------------------------------------
step "creating kind cluster $CLUSTER without kube-proxy"
if "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
	fail "a kind cluster named $CLUSTER exists already; delete it or set SVCMAP_E2E_CLUSTER"
fi
create=("$KIND" create cluster --name "$CLUSTER" --config "$here/kind-config.yaml" --kubeconfig "$KUBECONFIG" --wait 0s)
if [[ -n ${KIND_NODE_IMAGE:-} ]]; then
	create+=(--image "$KIND_NODE_IMAGE")
fi
cluster_created=1
"${create[@]}"
if k -n "$NS" get daemonset kube-proxy >/dev/null 2>&1; then
	fail "kube-proxy is running: the cluster was not created with kubeProxyMode: none"
fi
info "no kube-proxy DaemonSet"

mapfile -t nodes < <("$KIND" get nodes --name "$CLUSTER")
cp_ip=$(k get node "$CLUSTER-control-plane" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
[[ -n $cp_ip ]] || fail "no InternalIP for $CLUSTER-control-plane"
info "nodes: ${nodes[*]}; API server for the agents: https://$cp_ip:6443"

# --- image ------------------------------------------------------------------
if [[ ${SVCMAP_E2E_SKIP_BUILD:-0} == 1 ]]; then
	step "using existing image $IMAGE (SVCMAP_E2E_SKIP_BUILD=1)"
else
	step "building image $IMAGE"
	"$DOCKER" build -t "$IMAGE" -f "$root/Dockerfile" "$root"
fi
step "loading $IMAGE into the kind nodes"
"$KIND" load docker-image "$IMAGE" --name "$CLUSTER"

# --- install ----------------------------------------------------------------
step "helm install $RELEASE (k8sServiceHost=$cp_ip)"
"$HELM" install "$RELEASE" "$root/charts/svcmap" -n "$NS" \
	--set "k8sServiceHost=$cp_ip" \
	--set k8sServicePort=6443 \
	--set "image.repository=${IMAGE%:*}" \
	--set "image.tag=${IMAGE##*:}" \
	--set image.pullPolicy=Never \
	--set logLevel=debug
wait_for "svcmap agent ready on every node (rollout status)" 300 \
	k -n "$NS" rollout status "daemonset/$RELEASE" --timeout=10s
wait_for "CoreDNS ready (it reaches the API server through the kubernetes Service)" 300 \
	k -n "$NS" rollout status deployment/coredns --timeout=10s
wait_for "every node Ready" 300 k wait --for=condition=Ready nodes --all --timeout=10s

step "svcmap status on every node"
mapfile -t agents < <(k -n "$NS" get pods -l "app.kubernetes.io/instance=$RELEASE,app.kubernetes.io/component=agent" -o name)
((${#agents[@]} == ${#nodes[@]})) || fail "${#agents[@]} agent pods for ${#nodes[@]} nodes"
for pod in "${agents[@]}"; do
	info "$pod:"
	k -n "$NS" exec "$pod" -c agent -- svcmap status | sed 's/^/      /'
done

# --- workloads ----------------------------------------------------------------
step "deploying the echo backends, Services and a client pod"
k create namespace "$APP_NS" --dry-run=client -o yaml | k apply -f -
k -n "$APP_NS" create configmap e2e-scripts --from-file=echo.mjs="$here/echo.mjs" --dry-run=client -o yaml | k apply -f -
sed "s|__IMAGE__|$IMAGE|g" "$here/workloads.yaml" | k apply -f -
wait_for "echo Deployment ready (2 backends)" 180 k -n "$APP_NS" rollout status deployment/echo --timeout=10s
wait_for "client pod ready" 120 k -n "$APP_NS" wait --for=condition=Ready pod/client --timeout=10s

mapfile -t backends < <(k -n "$APP_NS" get pods -l app=echo -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
((${#backends[@]} == 2)) || fail "expected 2 echo pods, found ${#backends[@]}"
info "backends: ${backends[*]}"

echo_ip=$(k -n "$APP_NS" get service echo -o jsonpath='{.spec.clusterIP}')
aff_ip=$(k -n "$APP_NS" get service echo-affinity -o jsonpath='{.spec.clusterIP}')

client() {
	k -n "$APP_NS" exec client -- node /e2e/echo.mjs "$@"
}

# distinct_count: number of distinct non-empty lines on stdin.
distinct_count() {
	grep -v '^$' | sort -u | wc -l | tr -d ' '
}

# --- checks -------------------------------------------------------------------
step "ClusterIP TCP: 20 connections to $echo_ip:80"
out=$(client tcp "$echo_ip" 80 20) || fail "ClusterIP TCP to $echo_ip:80 failed"
n=$(distinct_count <<<"$out")
info "answered by $n distinct backends"
((n == 2)) || fail "20 connections reached $n backends, expected both: $(sort <<<"$out" | uniq -c | tr '\n' ' ')"

step "ClusterIP UDP: 20 datagrams to $echo_ip:5353 (replies must come from the ClusterIP)"
out=$(client udp "$echo_ip" 5353 20) || fail "ClusterIP UDP to $echo_ip:5353 failed"
info "answered by $(distinct_count <<<"$out") distinct backends"

step "DNS through the kube-dns Service (the proof that kube-proxy is replaced)"
dns_ip=$(k -n "$NS" get service kube-dns -o jsonpath='{.spec.clusterIP}')
info "kube-dns ClusterIP: $dns_ip"
resolved=$(client dns "echo.$APP_NS.svc.cluster.local") || fail "DNS lookup through kube-dns failed"
[[ $resolved == "$echo_ip" ]] || fail "echo.$APP_NS.svc.cluster.local resolved to $resolved, expected $echo_ip"
info "echo.$APP_NS.svc.cluster.local -> $resolved"
client tcp "echo.$APP_NS.svc.cluster.local" 80 3 >/dev/null || fail "TCP by Service name failed"
info "TCP by Service name: ok"

step "NodePort from the host: TCP :30080 and UDP :30081 on every node"
for node in "${nodes[@]}"; do
	ip=$(k get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
	out=$("$NODE" "$here/echo.mjs" tcp "$ip" 30080 10) || fail "NodePort TCP $node ($ip:30080) failed"
	info "$node $ip:30080 TCP: $(distinct_count <<<"$out") distinct backends"
	out=$("$NODE" "$here/echo.mjs" udp "$ip" 30081 5) || fail "NodePort UDP $node ($ip:30081) failed"
	info "$node $ip:30081 UDP: $(distinct_count <<<"$out") distinct backends"
done

step "session affinity (ClientIP): 10 connections to $aff_ip:80 must reach one backend"
out=$(client tcp "$aff_ip" 80 10) || fail "ClusterIP TCP to the affinity Service failed"
n=$(distinct_count <<<"$out")
if ((n == 1)); then
	info "ok: one backend ($(head -n 1 <<<"$out"))"
elif [[ ${SVCMAP_E2E_REQUIRE_AFFINITY:-0} == 1 ]]; then
	fail "session affinity: 10 connections reached $n backends"
else
	info "WARNING: session affinity not in effect ($n backends); set SVCMAP_E2E_REQUIRE_AFFINITY=1 to fail on this"
fi

step "endpoint removal: scale echo to 1 and expect every connection on the remaining backend"
k -n "$APP_NS" scale deployment/echo --replicas=1
# Terminating pods are listed too: this waits until the removed one is gone.
one_echo_pod() {
	[[ $(k -n "$APP_NS" get pods -l app=echo --no-headers 2>/dev/null | wc -l) -eq 1 ]]
}
wait_for "echo scaled to 1 pod" 120 one_echo_pod
remaining=$(k -n "$APP_NS" get pods -l app=echo -o jsonpath='{.items[0].metadata.name}')
info "remaining backend: $remaining"
only_remaining() {
	local got
	got=$(client tcp "$echo_ip" 80 20) || return 1
	[[ $(distinct_count <<<"$got") -eq 1 && $(head -n 1 <<<"$got") == "$remaining" ]]
}
wait_for "20 connections to $echo_ip:80 all answered by $remaining" 30 only_remaining

step "helm test"
"$HELM" test "$RELEASE" -n "$NS" --logs --timeout 3m

# --- conformance (optional) -----------------------------------------------------
if [[ -n ${E2E_TEST_BINARY:-} ]]; then
	step "upstream conformance: [sig-network] Services with $E2E_TEST_BINARY"
	[[ -x $E2E_TEST_BINARY ]] || fail "E2E_TEST_BINARY=$E2E_TEST_BINARY is not executable"
	"$E2E_TEST_BINARY" \
		--kubeconfig "$KUBECONFIG" \
		--provider skeleton \
		--ginkgo.focus '\[sig-network\] Services' \
		--ginkgo.skip "${E2E_TEST_SKIP:-\[Serial\]|\[Disruptive\]|\[Feature:|LoadBalancer|ESIPP|IPv6|Slow}" \
		--report-dir "$work/e2e-report"
else
	step "upstream conformance skipped (set E2E_TEST_BINARY to an e2e.test binary to run it)"
fi

# --- uninstall ------------------------------------------------------------------
step "helm uninstall (pre-delete hook runs svcmap cleanup on every node)"
k delete namespace "$APP_NS" --wait=false
"$HELM" uninstall "$RELEASE" -n "$NS" --wait --timeout 10m
for node in "${nodes[@]}"; do
	if "$DOCKER" exec "$node" test -e /sys/fs/bpf/svcmap; then
		"$DOCKER" exec "$node" ls -laR /sys/fs/bpf/svcmap >&2 || true
		fail "$node still has /sys/fs/bpf/svcmap after uninstall"
	fi
	info "$node: no svcmap pins"
done
left=$(k -n "$NS" get daemonsets,jobs,pods -l "app.kubernetes.io/instance=$RELEASE" -o name 2>/dev/null || true)
[[ -z $left ]] || fail "left behind after uninstall: $left"
info "no svcmap objects left in $NS"
