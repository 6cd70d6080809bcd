{{/*
Names. The full name is the release name when it already contains the chart
name (`helm install svcmap ...` gives resources named "svcmap").
*/}}
{{- define "svcmap.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "svcmap.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "svcmap.cleanupName" -}}
{{- printf "%s-cleanup" (include "svcmap.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "svcmap.serviceAccountName" -}}
{{- default (include "svcmap.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "svcmap.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "svcmap.selectorLabels" -}}
app.kubernetes.io/name: {{ include "svcmap.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "svcmap.labels" -}}
helm.sh/chart: {{ include "svcmap.chart" . }}
{{ include "svcmap.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: svcmap
{{- end -}}

{{/*
The image reference: repository@digest when a digest is given, else
repository:tag with the tag defaulting to the chart's appVersion.
*/}}
{{- define "svcmap.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
Checks that the schema cannot express, with messages that say what to do.
Included by every template that needs the API server address, so a bad
value fails `helm template`, `helm lint` and `helm install` alike.
*/}}
{{/*
ADDRESS:PORT as the agent's --*-bind-address flags take it, IPv6 in brackets.
Called with (list address port).
*/}}
{{- define "svcmap.hostPort" -}}
{{- $a := index . 0 -}}{{- $p := int (index . 1) -}}
{{- if contains ":" $a -}}[{{ $a }}]:{{ $p }}{{- else -}}{{ $a }}:{{ $p }}{{- end -}}
{{- end -}}

{{/* "true" when the address is a loopback one (127.0.0.0/8, ::1), else empty. */}}
{{- define "svcmap.loopback" -}}
{{- if or (hasPrefix "127." .) (eq . "::1") -}}true{{- end -}}
{{- end -}}

{{- define "svcmap.validate" -}}
{{- if not .Values.k8sServiceHost -}}
{{- fail "k8sServiceHost is required: svcmap replaces kube-proxy, so the agent cannot reach the API server through the kubernetes Service ClusterIP (nothing translates it before svcmap runs). Set it to the API server's host name or IP as the nodes reach it, e.g. --set k8sServiceHost=10.0.0.10 (see `kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}'`, or controlPlaneEndpoint in the kubeadm-config ConfigMap), and k8sServicePort if it is not 6443." -}}
{{- end -}}
{{- if or (contains "://" .Values.k8sServiceHost) (contains "/" .Values.k8sServiceHost) -}}
{{- fail (printf "k8sServiceHost must be a host name or IP address, not a URL (got %q): put the port in k8sServicePort" .Values.k8sServiceHost) -}}
{{- end -}}
{{- if or (regexMatch "^[^:]+:[0-9]*$" .Values.k8sServiceHost) (regexMatch "^\\[.*\\]:[0-9]*$" .Values.k8sServiceHost) -}}
{{- fail (printf "k8sServiceHost must not carry a port (got %q): put the port in k8sServicePort" .Values.k8sServiceHost) -}}
{{- end -}}
{{- if eq (int .Values.metricsPort) (int .Values.healthPort) -}}
{{- fail (printf "metricsPort and healthPort must differ (both are %d): the agent binds them as two servers" (int .Values.metricsPort)) -}}
{{- end -}}
{{- if not (hasPrefix "/sys/fs/bpf/" .Values.pinDir) -}}
{{- fail (printf "pinDir must be a directory under /sys/fs/bpf/ (got %q): only /sys/fs/bpf is mounted from the host" .Values.pinDir) -}}
{{- end -}}
{{- end -}}

{{/*
The API server URL handed to the agent (--k8s-api-server). IPv6 literals
are bracketed.
*/}}
{{- define "svcmap.apiServerURL" -}}
{{- $host := trimAll "[]" .Values.k8sServiceHost -}}
{{- if contains ":" $host -}}
{{- printf "https://[%s]:%d" $host (int .Values.k8sServicePort) -}}
{{- else -}}
{{- printf "https://%s:%d" $host (int .Values.k8sServicePort) -}}
{{- end -}}
{{- end -}}

{{/*
Every API server URL handed to the agent (--k8s-api-server), comma-separated:
k8sServiceHost's first, then each of k8sServiceHostFallbacks ("HOST" takes
k8sServicePort; "HOST:PORT" and "[IPv6]:PORT" keep theirs; a bare IPv6
literal is bracketed).
*/}}
{{- define "svcmap.apiServerURLs" -}}
{{- $urls := list (include "svcmap.apiServerURL" .) -}}
{{- $port := int .Values.k8sServicePort -}}
{{- range .Values.k8sServiceHostFallbacks -}}
{{- if regexMatch "^\\[.*\\]:[0-9]+$" . -}}
{{- $urls = append $urls (printf "https://%s" .) -}}
{{- else if hasPrefix "[" . -}}
{{- $urls = append $urls (printf "https://%s:%d" . $port) -}}
{{- else if regexMatch "^[^:]+:[0-9]+$" . -}}
{{- $urls = append $urls (printf "https://%s" .) -}}
{{- else if contains ":" . -}}
{{- $urls = append $urls (printf "https://[%s]:%d" . $port) -}}
{{- else -}}
{{- $urls = append $urls (printf "https://%s:%d" . $port) -}}
{{- end -}}
{{- end -}}
{{- join "," $urls -}}
{{- end -}}

{{/*
Whether the cluster has the pod-level securityContext.appArmorProfile field
(1.30+). helm template without --kube-version assumes a current version.
*/}}
{{- define "svcmap.appArmorField" -}}
{{- if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version -}}true{{- end -}}
{{- end -}}

{{/*
Pod-level security context shared by the agent and the cleanup pods.
*/}}
{{- define "svcmap.podSecurityContext" -}}
{{- if and .Values.securityContext.appArmorUnconfined (include "svcmap.appArmorField" .) }}
appArmorProfile:
  type: Unconfined
{{- end }}
{{- with .Values.securityContext.seLinuxOptions }}
seLinuxOptions:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
AppArmor annotations for clusters older than 1.30 (one per container name
given in .containers).
*/}}
{{- define "svcmap.appArmorAnnotations" -}}
{{- if and .root.Values.securityContext.appArmorUnconfined (not (include "svcmap.appArmorField" .root)) }}
{{- range .containers }}
container.apparmor.security.beta.kubernetes.io/{{ . }}: unconfined
{{- end }}
{{- end }}
{{- end -}}

{{/*
The agent's capabilities (also the cleanup DaemonSet's): the list in
securityContext.capabilities (default BPF, NET_ADMIN, PERFMON, SYS_ADMIN;
values.yaml says what each is for and why SYS_RESOURCE is not among them),
plus those in "extra" that the list lacks, everything else dropped. Called
with (dict "root" $ "extra" (list ...)).
*/}}
{{- define "svcmap.agentCapabilities" -}}
{{- $caps := .root.Values.securityContext.capabilities | default list -}}
{{- range .extra }}{{ if not (has . $caps) }}{{ $caps = append $caps . }}{{ end }}{{ end -}}
capabilities:
  {{- with $caps }}
  add:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  drop:
    - ALL
{{- end -}}

{{/*
"true" when stale-socket termination reaches pods' sockets and finds their
network namespaces through their processes (staleSockets.podNamespaces:
hostPID), else empty.
*/}}
{{- define "svcmap.podNamespacesByPID" -}}
{{- if and .Values.staleSockets.podSockets (eq .Values.staleSockets.podNamespaces "hostPID") -}}true{{- end -}}
{{- end -}}

{{/*
"true" when it finds them in the runtime's netns directory
(staleSockets.podNamespaces: netnsDir), else empty.
*/}}
{{- define "svcmap.podNamespacesByDir" -}}
{{- if and .Values.staleSockets.podSockets (eq .Values.staleSockets.podNamespaces "netnsDir") -}}true{{- end -}}
{{- end -}}

{{/*
Capabilities only the agent gets on top of the list: SYS_PTRACE when
stale-socket termination finds pods' namespaces through their processes, to
open /proc/PID/ns/net of pods' processes (other users: a ptrace access
check). Finding them in the netns directory needs nothing more.
*/}}
{{- define "svcmap.agentExtraCapabilities" -}}
{{- if include "svcmap.podNamespacesByPID" . }}{{ list "SYS_PTRACE" | toJson }}{{ else }}[]{{ end -}}
{{- end -}}

{{/*
The security context of the containers that run the agent's code (the
agent, preflight). Root inside the pod: the added capabilities only reach
the effective set of a uid-0 process (there are no ambient capabilities in
a pod spec); the image's default user is not root. A read-only root
filesystem: the agent writes only to bpffs and cgroupfs (and, with
bpf.compile, its objects to an emptyDir). The runtime's default seccomp
profile allows bpf(2), perf_event_open(2), setns(2) and mount(2) to a
container holding BPF, PERFMON and SYS_ADMIN.
*/}}
{{- define "svcmap.agentSecurityContext" -}}
privileged: false
runAsUser: 0
runAsGroup: 0
readOnlyRootFilesystem: true
{{- with .Values.securityContext.seccompProfile }}
seccompProfile:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{ include "svcmap.agentCapabilities" (dict "root" . "extra" (include "svcmap.agentExtraCapabilities" . | fromJsonArray)) }}
{{- end -}}

{{/*
Volumes of the agent's pod only: the runtime's netns directory
(staleSockets.podNamespaces: netnsDir) and, with bpf.compile, a writable
directory for the compiled objects (the root filesystem is read-only).
*/}}
{{- define "svcmap.agentVolumes" -}}
{{- if include "svcmap.podNamespacesByDir" . }}
- name: netns
  hostPath:
    path: {{ .Values.staleSockets.netnsDir }}
    # The runtime creates it with the first pod that has a network namespace.
    type: DirectoryOrCreate
{{- end }}
{{- if .Values.bpf.compile }}
- name: bpf-objects
  emptyDir: {}
{{- end }}
{{- end -}}

{{/*
Their mounts. The netns directory: read-only, and HostToContainer so that
the namespaces the runtime pins there after the agent started (each a bind
mount) reach it.
*/}}
{{- define "svcmap.agentVolumeMounts" -}}
{{- if include "svcmap.podNamespacesByDir" . }}
- name: netns
  mountPath: {{ include "svcmap.netnsMountPath" . }}
  mountPropagation: HostToContainer
  readOnly: true
{{- end }}
{{- include "svcmap.objectDirMount" . }}
{{- end -}}

{{/* The compiled objects' emptyDir (bpf.compile), in the agent and preflight containers. */}}
{{- define "svcmap.objectDirMount" -}}
{{- if .Values.bpf.compile }}
- name: bpf-objects
  mountPath: {{ include "svcmap.objectDir" . }}
{{- end }}
{{- end -}}

{{/* Where the runtime's netns directory appears in the agent's container (--netns-dir). */}}
{{- define "svcmap.netnsMountPath" -}}
/run/svcmap/netns
{{- end -}}

{{/* Where the agent compiles its objects with bpf.compile (--bpf-dir). */}}
{{- define "svcmap.objectDir" -}}
/run/svcmap/bpf
{{- end -}}

{{/*
Volumes shared by the agent and the cleanup DaemonSet.
*/}}
{{- define "svcmap.hostVolumes" -}}
- name: bpffs
  hostPath:
    path: /sys/fs/bpf
    type: DirectoryOrCreate
- name: cgroup-root
  hostPath:
    path: {{ .Values.cgroup.hostRoot }}
    type: DirectoryOrCreate
{{- end -}}

{{/*
Mounts of those volumes. HostToContainer, not Bidirectional: the API server
accepts Bidirectional propagation only on privileged containers, and the
agent does not need it (it pins files inside an existing bpffs and never
mounts anything); the bpffs and cgroup2 mounts that the init container makes
in the host's mount namespace reach the agent through HostToContainer.
*/}}
{{- define "svcmap.hostVolumeMounts" -}}
- name: bpffs
  mountPath: /sys/fs/bpf
  mountPropagation: HostToContainer
- name: cgroup-root
  mountPath: {{ include "svcmap.cgroupMountPath" . }}
  mountPropagation: HostToContainer
{{- end -}}

{{/*
Where the host's cgroup v2 root appears inside the containers (--cgroup).
Fixed, so that hostRoot: /sys/fs/cgroup does not shadow the container's own
/sys/fs/cgroup.
*/}}
{{- define "svcmap.cgroupMountPath" -}}
/run/svcmap/cgroupv2
{{- end -}}
