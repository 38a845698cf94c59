{{/*
Shared names and labels of gpuctl's Node Feature Discovery chart. Every object carries
"node-feature-discovery.labels"; pods are selected by "node-feature-discovery.selectorLabels" plus a
role label (master, worker, gc) as in the upstream chart, so existing tooling that looks for role=worker
keeps working.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "node-feature-discovery.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object name: fullnameOverride, else the release name when it already contains the
chart name, else "<release>-<name>". Truncated so that suffixes such as "-worker-conf" still fit in 63.
*/}}
{{- define "node-feature-discovery.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 51 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "node-feature-discovery.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 51 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 51 | trimSuffix "-" -}}
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

{{/* Labels that select this release's pods. */}}
{{- define "node-feature-discovery.selectorLabels" -}}
app.kubernetes.io/name: {{ include "node-feature-discovery.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Standard labels of every object. */}}
{{- define "node-feature-discovery.labels" -}}
helm.sh/chart: {{ include "node-feature-discovery.chart" . }}
{{ include "node-feature-discovery.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpuctl
{{- end -}}

{{/* The one image all three programs run. */}}
{{- define "node-feature-discovery.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
The ServiceAccount a component runs as. Call with (dict "root" $ "component" "worker"); the master's
default name is the bare fullname, as upstream, the others get a "-<component>" suffix.
*/}}
{{- define "node-feature-discovery.serviceAccountName" -}}
{{- $sa := (index .root.Values .component).serviceAccount -}}
{{- $fullname := include "node-feature-discovery.fullname" .root -}}
{{- $default := ternary $fullname (printf "%s-%s" $fullname .component) (eq .component "master") -}}
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

{{/* The -feature-gates flag value, "A=true,B=false", sorted by gate name; empty when no gates are set. */}}
{{- define "node-feature-discovery.featureGates" -}}
{{- $gates := list -}}
{{- range $name, $on := .Values.featureGates -}}
{{- $gates = append $gates (printf "%s=%t" $name $on) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}
