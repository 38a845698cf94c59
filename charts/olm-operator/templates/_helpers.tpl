{{/* Standard labels of every object. */}}
{{- define "olm-operator.labels" -}}
app.kubernetes.io/name: {{ .Values.package }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpuctl
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}
