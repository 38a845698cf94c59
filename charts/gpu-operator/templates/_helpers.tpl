{{/*
Shared names, labels and ClusterPolicy fragments of gpuctl's GPU Operator chart.

Object names are fixed ("gpu-operator", "cluster-policy"), as in NVIDIA's chart (research §3): the
operator finds its own objects by these names, gpuctl waits on them, and only one GPU Operator can run
per cluster anyway.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "gpu-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* "<chart>-<version>" for the helm.sh/chart label. */}}
{{- define "gpu-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Standard labels of every object this chart renders. */}}
{{- define "gpu-operator.labels" -}}
helm.sh/chart: {{ include "gpu-operator.chart" . }}
app.kubernetes.io/name: {{ include "gpu-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpuctl
app.kubernetes.io/component: gpu-operator
{{- end -}}

{{/*
Labels that select the operator pod. app=gpu-operator is what NVIDIA's chart, its docs and gpuctl's
sandbox use to find the operator (research §3).
*/}}
{{- define "gpu-operator.selectorLabels" -}}
app: gpu-operator
app.kubernetes.io/component: gpu-operator
{{- end -}}

{{/* An image reference "<repository>/<image>:<version>"; call with (list $values $defaultVersion). */}}
{{- define "gpu-operator.image" -}}
{{- $v := index . 0 -}}
{{- printf "%s/%s:%s" $v.repository $v.image (toString ($v.version | default (index . 1))) -}}
{{- end -}}

{{/*
The image fields of a ClusterPolicy operand, in the CR's own names. Call with
(dict "v" .Values.toolkit "defaultVersion" "") and nindent the result; the version is quoted because
driver versions such as 595.91.07 must stay strings.
*/}}
{{- define "gpu-operator.imageFields" -}}
{{- $v := .v -}}
{{- with $v.repository }}
repository: {{ . }}
{{- end }}
{{- with $v.image }}
image: {{ . }}
{{- end }}
{{- with ($v.version | default .defaultVersion) }}
version: {{ toString . | quote }}
{{- end }}
{{- with $v.imagePullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The fields most operands share: enabled (when the values have the key), the image fields, and
resources, args and env when they are not empty. Same call as gpu-operator.imageFields.
*/}}
{{- define "gpu-operator.operand" -}}
{{- $v := .v -}}
{{- if hasKey $v "enabled" }}
enabled: {{ $v.enabled }}
{{- end }}
{{- include "gpu-operator.imageFields" . }}
{{- with $v.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.args }}
args:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.env }}
env:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
A driver-manager block (driver.manager, vgpuManager.driverManager, vfioManager.driverManager). Call with
the values map.
*/}}
{{- define "gpu-operator.driverManager" -}}
{{- include "gpu-operator.imageFields" (dict "v" . "defaultVersion" "") }}
{{- with .env }}
env:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Whether the dcgm-exporter ServiceMonitor is asked for and possible: the operator (module d73a0086)
reports state-dcgm-exporter notReady, forever, when the ServiceMonitor CRD is missing. Returns "true" or "".
*/}}
{{- define "gpu-operator.serviceMonitorEnabled" -}}
{{- if and .Values.dcgmExporter.serviceMonitor.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") -}}
true
{{- end -}}
{{- end -}}

{{/*
Refuse values that ask NVIDIA's chart for objects nobody would create with this chart, rather than drop
them silently. Included once, by deployment.yaml, which is always rendered. Two such keys are accepted
on purpose: extraObjects (gpuctl applies a profile's extra objects itself, before NFD, so rendering them
here too would make Helm refuse the already existing objects) and platform.openshift (on OpenShift gpuctl
installs through OLM, not this chart).
*/}}
{{- define "gpu-operator.checkUnsupported" -}}
{{- if .Values.nfd.nodefeaturerules -}}
{{- fail "nfd.nodefeaturerules: this chart does not create NodeFeatureRule nvidia-kernel-modules; create it separately" -}}
{{- end -}}
{{- if .Values.gpuCluster.deployCR -}}
{{- fail "gpuCluster.deployCR: the DRA GPUCluster is not supported by this chart (and excludes the ClusterPolicy)" -}}
{{- end -}}
{{- if and .Values.cdi.nriPluginEnabled (not (and .Values.cdi.enabled .Values.toolkit.enabled)) -}}
{{- fail "cdi.nriPluginEnabled needs cdi.enabled and toolkit.enabled" -}}
{{- end -}}
{{- end -}}
