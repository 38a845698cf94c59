{{/*
Shared names, labels and image references of gpuctl's GKE driver installer chart.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "gke-driver-installer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The DaemonSet name: fullnameOverride, else the release name when it already contains the chart name,
else "<release>-<name>".
*/}}
{{- define "gke-driver-installer.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "gke-driver-installer.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<chart>-<version>" for the helm.sh/chart label. */}}
{{- define "gke-driver-installer.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that select this release's pods. */}}
{{- define "gke-driver-installer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gke-driver-installer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Standard labels of every object. */}}
{{- define "gke-driver-installer.labels" -}}
helm.sh/chart: {{ include "gke-driver-installer.chart" . }}
{{ include "gke-driver-installer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpuctl
app.kubernetes.io/component: driver-installer
{{- end -}}

{{/*
An image reference from {repository, tag, digest}: "<repository>[:<tag>][@<digest>]". Google's
preloaded installers are referenced by tag, its other images by digest.
*/}}
{{- define "gke-driver-installer.image" -}}
{{- .repository -}}
{{- with .tag }}:{{ toString . }}{{ end -}}
{{- with .digest }}@{{ . }}{{ end -}}
{{- end -}}
