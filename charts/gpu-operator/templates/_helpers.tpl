{{/*
Shared names, labels and ClusterPolicy fragments of gpuctl's GPU Operator chart.

Object names are fixed ("gpu-operator", "cluster-policy"), as in NVIDIA's chart (templates/operator.yaml and clusterpolicy.yaml at v26.7.0): the
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
{{- with .Values.operator.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
Labels that select the operator pod. app=gpu-operator is what NVIDIA's chart, its docs and gpuctl's
sandbox use to find the operator (templates/operator.yaml at v26.7.0).
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
"true" when the GPU Operator release this chart renders is the given minor or newer, else "". Call with
(list $ "26.3"). The release is .Chart.AppVersion, which gpuctl stamps when it loads the chart for
another release than its own (--operator-version), so the templates render what NVIDIA's chart of that
release renders: fields a release does not know are left out for it.
*/}}
{{- define "gpu-operator.since" -}}
{{- if semverCompare (printf ">= %s.0-0" (index . 1)) (index . 0).Chart.AppVersion -}}
true
{{- end -}}
{{- end -}}

{{/*
Defaults that differ between releases, so values.yaml (the default release's) leaves them out and the
ClusterPolicy takes them from here when the values do not have the key. Each is the default in
deployments/gpu-operator/values.yaml of NVIDIA's chart at that release (v25.10.1, v26.3.3, v26.7.0).
*/}}
{{- define "gpu-operator.releaseDefaults" -}}
dcgmExporter:
  serviceMonitor:
    {{- if include "gpu-operator.since" (list . "26.7") }}
    enabled: true
    scrapeTimeout: 10s
    {{- else }}
    enabled: false
    {{- end }}
{{- if include "gpu-operator.since" (list . "26.3") }}
ccManager:
  enabled: true
  defaultMode: "on"
{{- else }}
ccManager:
  enabled: false
  defaultMode: "off"
  env:
    - name: CC_CAPABLE_DEVICE_IDS
      value: "0x2339,0x2331,0x2330,0x2324,0x2322,0x233d"
operator:
  initContainer:
    repository: nvcr.io/nvidia
    image: cuda
    version: 13.0.1-base-ubi9
    imagePullPolicy: IfNotPresent
kataManager:
  repository: nvcr.io/nvidia/cloud-native
  image: k8s-kata-manager
  version: v0.2.3
  config:
    artifactsDir: /opt/nvidia-gpu-operator/artifacts/runtimeclasses
    runtimeClasses:
      - name: kata-nvidia-gpu
        nodeSelector: {}
        artifacts:
          url: nvcr.io/nvidia/cloud-native/kata-gpu-artifacts:ubuntu22.04-535.54.03
          pullSecret: ""
      - name: kata-nvidia-gpu-snp
        nodeSelector:
          nvidia.com/cc.capable: "true"
        artifacts:
          url: nvcr.io/nvidia/cloud-native/kata-gpu-artifacts:ubuntu22.04-535.86.10-snp
          pullSecret: ""
{{- end }}
{{- end -}}

{{/*
The values the templates read: .Values with the release's defaults filled in (gpu-operator.releaseDefaults)
where the values do not have the key. Call with (dict "top" $ "out" $someDict); the values are left
in .out.values (templates cannot return maps).
*/}}
{{- define "gpu-operator.effectiveValues" -}}
{{- $v := deepCopy .top.Values -}}
{{- include "gpu-operator.fillDefaults" (dict "dst" $v "src" (include "gpu-operator.releaseDefaults" .top | fromYaml)) -}}
{{- $_ := set .out "values" $v -}}
{{- end -}}

{{/*
Fills the keys of .src that .dst does not have, recursing into maps both have. A key the values set,
even to false or "", is kept.
*/}}
{{- define "gpu-operator.fillDefaults" -}}
{{- $dst := .dst -}}
{{- range $k, $d := .src -}}
{{- if not (hasKey $dst $k) -}}
{{- $_ := set $dst $k $d -}}
{{- else if and (kindIs "map" $d) (kindIs "map" (get $dst $k)) -}}
{{- include "gpu-operator.fillDefaults" (dict "dst" (get $dst $k) "src" $d) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
"key: value" for each of .keys whose value in the map .v is not empty, in the value's own YAML type.
Empty values are left out, as NVIDIA's chart leaves them out, so the operator applies its own defaults.
*/}}
{{- define "gpu-operator.fields" -}}
{{- $v := .v | default dict -}}
{{- range $k := .keys }}
{{- with get $v $k }}
{{- if or (kindIs "map" .) (kindIs "slice" .) }}
{{ $k }}:
  {{- toYaml . | nindent 2 }}
{{- else }}
{{ $k }}: {{ toYaml . }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The image fields of an operand, in the CR's names: repository, image, version (always a string: driver
versions such as 595.91.07 and tags such as 2.6 must not become numbers; defaultVersion when empty),
imagePullPolicy and imagePullSecrets. Call with (dict "v" .Values.toolkit "defaultVersion" "").
*/}}
{{- define "gpu-operator.imageFields" -}}
{{- include "gpu-operator.fields" (dict "v" .v "keys" (list "repository" "image")) }}
{{- with (.v.version | default .defaultVersion) }}
version: {{ toString . | quote }}
{{- end }}
{{- include "gpu-operator.fields" (dict "v" .v "keys" (list "imagePullPolicy" "imagePullSecrets")) }}
{{- end -}}

{{/*
What most ClusterPolicy operands share: the image fields, then resources, env and args when not empty.
Same call as gpu-operator.imageFields; the caller renders enabled, whose rules differ per operand.
*/}}
{{- define "gpu-operator.operand" -}}
{{- include "gpu-operator.imageFields" . }}
{{- include "gpu-operator.fields" (dict "v" .v "keys" (list "resources" "env" "args")) }}
{{- end -}}

{{/*
hostNetwork of an operand, which the ClusterPolicy has since v26.3 (clusterpolicy.yaml at v26.3.3);
rendered only when true. Call with (dict "v" .Values.toolkit "top" $).
*/}}
{{- define "gpu-operator.hostNetwork" -}}
{{- if and .v.hostNetwork (include "gpu-operator.since" (list .top "26.3")) }}
hostNetwork: {{ .v.hostNetwork }}
{{- end }}
{{- end -}}

{{/*
A driver-manager block (driver.manager, vgpuManager.driverManager, vfioManager.driverManager): its image
fields without pull secrets, and env.
*/}}
{{- define "gpu-operator.driverManager" -}}
{{- include "gpu-operator.fields" (dict "v" . "keys" (list "repository" "image")) }}
{{- with .version }}
version: {{ toString . | quote }}
{{- end }}
{{- include "gpu-operator.fields" (dict "v" . "keys" (list "imagePullPolicy" "env")) }}
{{- end -}}

{{/*
The driver upgrade policy in the CR's names (gpuPodDeletion becomes podDeletion), for the ClusterPolicy
and the NVIDIADriver. maxUnavailable keeps its type: the upgrade library takes an integer or an "N%"
string (an IntOrString, api/upgrade/v1alpha1/upgrade_spec.go of NVIDIA/k8s-operator-libs), so 2 stays 2
and "25%" stays "25%"; a number written as a string ("2") becomes the number, as NVIDIA's chart
renders it (clusterpolicy.yaml at v26.7.0).
*/}}
{{- define "gpu-operator.upgradePolicy" -}}
{{- $w := .waitForCompletion | default dict -}}
{{- $p := .gpuPodDeletion | default dict -}}
{{- $d := .drain | default dict -}}
{{- $max := toString (.maxUnavailable | default "25%") -}}
autoUpgrade: {{ .autoUpgrade | default false }}
maxParallelUpgrades: {{ .maxParallelUpgrades | default 0 }}
maxUnavailable: {{ if regexMatch "^[0-9]+$" $max }}{{ $max }}{{ else }}{{ $max | quote }}{{ end }}
waitForCompletion:
  timeoutSeconds: {{ $w.timeoutSeconds | toJson }}
  {{- with $w.podSelector }}
  podSelector: {{ . | quote }}
  {{- end }}
podDeletion:
  force: {{ $p.force | default false }}
  timeoutSeconds: {{ $p.timeoutSeconds | toJson }}
  deleteEmptyDir: {{ $p.deleteEmptyDir | default false }}
drain:
  enable: {{ $d.enable | default false }}
  force: {{ $d.force | default false }}
  {{- with $d.podSelector }}
  podSelector: {{ . | quote }}
  {{- end }}
  timeoutSeconds: {{ $d.timeoutSeconds | toJson }}
  deleteEmptyDir: {{ $d.deleteEmptyDir | default false }}
{{- end -}}

{{/*
Refuse values that ask NVIDIA's chart for objects this chart does not create, rather than drop them
silently, and values NVIDIA's chart refuses too (templates/validations.yaml at v26.7.0). Included once,
by deployment.yaml, which is always rendered. platform.openshift is accepted on purpose: on OpenShift
gpuctl installs through OLM, not this chart.
*/}}
{{- define "gpu-operator.checkUnsupported" -}}
{{- if .Values.nfd.nodefeaturerules -}}
{{- fail "nfd.nodefeaturerules: this chart does not create NodeFeatureRule nvidia-kernel-modules; create it separately" -}}
{{- end -}}
{{- if .Values.gpuCluster.deployCR -}}
{{- if not (include "gpu-operator.since" (list . "26.7")) -}}
{{- fail (printf "gpuCluster.deployCR: GPU Operator %s has no GPUCluster (new in v26.7.0)" .Chart.AppVersion) -}}
{{- end -}}
{{- if .Values.clusterPolicy.deployCR -}}
{{- fail "gpuCluster.deployCR needs clusterPolicy.deployCR=false: the operator reconciles no GPUCluster while a ClusterPolicy exists" -}}
{{- end -}}
{{- if and .Values.driver.enabled (not .Values.driver.nvidiaDriverCRD.enabled) -}}
{{- fail "gpuCluster.deployCR with driver.enabled needs driver.nvidiaDriverCRD.enabled=true: a GPUCluster does not manage the driver" -}}
{{- end -}}
{{- /*
NVIDIA's chart also fails without a served resource.k8s.io DeviceClass API. This chart does not: gpuctl
renders it offline too (preflight, template, export), where Capabilities are Helm's defaults, and its
plan refuses --dra on Kubernetes older than 1.34 instead.
*/}}
{{- end -}}
{{- if and .Values.cdi.nriPluginEnabled (not (and .Values.cdi.enabled .Values.toolkit.enabled)) -}}
{{- fail "cdi.nriPluginEnabled needs cdi.enabled and toolkit.enabled" -}}
{{- end -}}
{{- if and .Values.devicePlugin.config.create (empty .Values.devicePlugin.config.data) -}}
{{- fail "devicePlugin.config.data cannot be empty with devicePlugin.config.create" -}}
{{- end -}}
{{- end -}}

{{/*
gpu-operator.tolerationPolicyName names the MutatingAdmissionPolicy that adds the GPU toleration and its
binding: cluster-scoped, so the name says whose it is.
*/}}
{{- define "gpu-operator.tolerationPolicyName" -}}
gpuctl-gpu-toleration
{{- end }}
