{{/*
Shared names, labels and pod parts of gpuctl's Node Feature Discovery chart. Object names and labels
follow the upstream chart (kubernetes-sigs/node-feature-discovery deployment/helm/node-feature-discovery
at v0.19.0), so tooling that looks for "<fullname>-worker" or role=worker keeps working; pods are
selected by "node-feature-discovery.selectorLabels" plus a role label (master, worker, gc,
topology-updater).
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "node-feature-discovery.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object name: fullnameOverride, else the release name when it already contains the
chart name, else "<release>-<name>". Truncated to 63 characters, as upstream.
*/}}
{{- define "node-feature-discovery.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "node-feature-discovery.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The namespace of namespaced objects. */}}
{{- define "node-feature-discovery.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* "<chart>-<version>" for the helm.sh/chart label. */}}
{{- define "node-feature-discovery.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that select this release's pods (with a role label per component). */}}
{{- define "node-feature-discovery.selectorLabels" -}}
app.kubernetes.io/name: {{ include "node-feature-discovery.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
Standard labels of every object. The version is the NFD image's tag (made a valid label value): gpuctl
runs each GPU Operator release's own NFD image under this chart (internal/bundle NFDValues).
*/}}
{{- define "node-feature-discovery.labels" -}}
helm.sh/chart: {{ include "node-feature-discovery.chart" . }}
{{ include "node-feature-discovery.selectorLabels" . }}
app.kubernetes.io/version: {{ regexReplaceAll "[^-A-Za-z0-9_.]" (include "node-feature-discovery.tag" .) "_" | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpuctl
{{- end -}}

{{/* The NFD image tag: image.tag, else the chart's appVersion. */}}
{{- define "node-feature-discovery.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{/* The one image all NFD programs run. */}}
{{- define "node-feature-discovery.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "node-feature-discovery.tag" .) -}}
{{- end -}}

{{/*
"true" when the image is NFD v0.19 or newer, "" for an older one. Templates branch on it only where an
older nfd program would fail or lack a permission: the GPU Operator releases v26.3.3 and v25.10.1 ship
NFD v0.18.3 and v0.18.2, whose nfd-worker has no -owner-refs flag and whose nfd-gc and
nfd-topology-updater read the kubelet through nodes/proxy (NFD v0.19 moved to nodes/configz,
kubernetes-sigs/node-feature-discovery deployment/helm/node-feature-discovery/templates/clusterrole.yaml
at v0.18.3 and v0.19.0). A tag that is not a version (a branch build, a digest) counts as current.
*/}}
{{- define "node-feature-discovery.v019" -}}
{{- $v := regexFind "^v?[0-9]+\\.[0-9]+(\\.[0-9]+)?" (include "node-feature-discovery.tag" .) -}}
{{- if or (not $v) (semverCompare ">=0.19.0-0" $v) -}}true{{- end -}}
{{- end -}}

{{/*
The ServiceAccount a component runs as. Call with (dict "root" $ "component" "worker"); the master's
default name is the bare fullname, the others get a "-worker", "-gc" or "-topology-updater" suffix, as
upstream.
*/}}
{{- define "node-feature-discovery.serviceAccountName" -}}
{{- $sa := (index .root.Values .component).serviceAccount -}}
{{- $fullname := include "node-feature-discovery.fullname" .root -}}
{{- $suffix := ternary "topology-updater" .component (eq .component "topologyUpdater") -}}
{{- $default := ternary $fullname (printf "%s-%s" $fullname $suffix) (eq .component "master") -}}
{{- if $sa.create -}}
{{- default $default $sa.name -}}
{{- else -}}
{{- default "default" $sa.name -}}
{{- end -}}
{{- end -}}

{{/* A component's priority class: its own, else the chart-wide one. Same call as above. */}}
{{- define "node-feature-discovery.priorityClassName" -}}
{{- default .root.Values.priorityClassName (index .root.Values .component).priorityClassName -}}
{{- end -}}

{{/*
The -feature-gates flags, one per gate ("-feature-gates=Name=true"), sorted by name; nfd's flag adds
each to the set it already has.
*/}}
{{- define "node-feature-discovery.featureGateArgs" -}}
{{- $args := list -}}
{{- range $name, $on := .Values.featureGates -}}
{{- $args = append $args (printf "- -feature-gates=%s=%v" $name $on) -}}
{{- end -}}
{{- join "\n" $args -}}
{{- end -}}

{{/*
The pull secrets of every pod: imagePullSecrets, else global.imagePullSecrets (set by a parent chart, or
in a GPU Operator values file written for NVIDIA's chart).
*/}}
{{- define "node-feature-discovery.imagePullSecrets" -}}
{{- $secrets := .Values.imagePullSecrets -}}
{{- if and (not $secrets) .Values.global -}}
{{- $secrets = .Values.global.imagePullSecrets -}}
{{- end -}}
{{- with $secrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/*
An HTTP /healthz probe on the "http" port with the fields a user set (zero and empty leave Kubernetes'
defaults). Call with (dict "probe" .Values.master.readinessProbe "readiness" true); only a readiness
probe may ask for more than one success.
*/}}
{{- define "node-feature-discovery.probe" -}}
httpGet:
  path: /healthz
  port: http
{{- $keys := list "initialDelaySeconds" "timeoutSeconds" "periodSeconds" "failureThreshold" -}}
{{- if .readiness }}{{ $keys = append $keys "successThreshold" }}{{ end -}}
{{- $probe := .probe | default dict -}}
{{- range $key := $keys }}
{{- with index $probe $key }}
{{ $key }}: {{ . }}
{{- end }}
{{- end -}}
{{- end -}}

{{/*
The pod-level settings every component shares. Call with (dict "root" $ "component" "gc"): DNS policy,
host network and user namespaces, priority class, pull secrets, ServiceAccount, pod security context
and init containers.
*/}}
{{- define "node-feature-discovery.podSettings" -}}
{{- $v := index .root.Values .component -}}
serviceAccountName: {{ include "node-feature-discovery.serviceAccountName" . }}
{{- with $v.dnsPolicy }}
dnsPolicy: {{ . }}
{{- end }}
hostNetwork: {{ $v.hostNetwork | default false }}
{{- if kindIs "bool" $v.hostUsers }}
hostUsers: {{ $v.hostUsers }}
{{- end }}
{{- with include "node-feature-discovery.priorityClassName" . }}
priorityClassName: {{ . }}
{{- end }}
{{- include "node-feature-discovery.imagePullSecrets" .root }}
{{- with $v.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.initContainers }}
initContainers:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* nodeSelector, affinity and tolerations of a component's pods. Same call as above. */}}
{{- define "node-feature-discovery.scheduling" -}}
{{- $v := index .root.Values .component -}}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
A component's pod template labels: the selector labels, the user's labels, then the role (which the user
cannot override, or the selector would stop matching). Call with (dict "root" $ "role" "worker"
"labels" .Values.worker.labels).
*/}}
{{- define "node-feature-discovery.podLabels" -}}
{{ include "node-feature-discovery.selectorLabels" .root }}
{{- range $k, $v := .labels }}
{{- if not (has $k (list "role" "app.kubernetes.io/name" "app.kubernetes.io/instance")) }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}
role: {{ .role }}
{{- end -}}

{{/*
The body of a component's configuration ConfigMap. Call with (dict "root" $ "component" "worker"
"file" "nfd-worker.conf" "config" .Values.worker.config); configmap.yaml renders it, and the pods hash
it into their checksum/config annotation so that `helm upgrade` with a new config rolls them.
*/}}
{{- define "node-feature-discovery.configMap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "node-feature-discovery.fullname" .root }}-{{ .component }}-conf
  namespace: {{ include "node-feature-discovery.namespace" .root }}
  labels:
    {{- include "node-feature-discovery.labels" .root | nindent 4 }}
data:
  {{ .file }}: |-
    {{- .config | toYaml | nindent 4 }}
{{- end -}}

{{/*
The checksum/config annotation: of the config values alone with checksumValuesOnly (pods then restart
only when the config changes), else of the whole rendered ConfigMap, as upstream. Same call as above.
*/}}
{{- define "node-feature-discovery.configChecksum" -}}
{{- if .root.Values.checksumValuesOnly -}}
{{- .config | toYaml | sha256sum -}}
{{- else -}}
{{- include "node-feature-discovery.configMap" . | sha256sum -}}
{{- end -}}
{{- end -}}
