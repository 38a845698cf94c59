{{/*
Shared names and labels of gpuctl's gpu-monitoring chart.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "gpu-monitoring.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The objects' name: fullnameOverride, else the release name when it already contains the chart name,
else "<release>-<name>".
*/}}
{{- define "gpu-monitoring.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "gpu-monitoring.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<chart>-<version>" for the helm.sh/chart label. */}}
{{- define "gpu-monitoring.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Standard labels of every object, then additionalLabels. */}}
{{- define "gpu-monitoring.labels" -}}
helm.sh/chart: {{ include "gpu-monitoring.chart" . }}
app.kubernetes.io/name: {{ include "gpu-monitoring.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpuctl
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The namespace the GPU Operator's validator pods run in. */}}
{{- define "gpu-monitoring.operatorNamespace" -}}
{{- .Values.operatorNamespace | default .Release.Namespace -}}
{{- end -}}

{{/*
Fills the placeholders of a PromQL expression or dashboard: __POD__ and __NAMESPACE__ are the labels
naming a GPU workload's pod and namespace (metricLabels), __OPERATOR_NAMESPACE__ the operator's
namespace. Call with (list $ "text").
*/}}
{{- define "gpu-monitoring.fill" -}}
{{- $ := index . 0 -}}
{{- index . 1 | replace "__POD__" $.Values.metricLabels.pod | replace "__NAMESPACE__" $.Values.metricLabels.namespace | replace "__OPERATOR_NAMESPACE__" (include "gpu-monitoring.operatorNamespace" $) -}}
{{- end -}}
