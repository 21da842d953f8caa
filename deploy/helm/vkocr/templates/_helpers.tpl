{{/* Names: the release's name, with "vkocr" added unless it already holds it. */}}
{{- define "vkocr.fullname" -}}
{{- if contains "vkocr" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-vkocr" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* What selects this release's agents: the DaemonSet, the Service and the NetworkPolicy agree on it. */}}
{{- define "vkocr.selectorLabels" -}}
app.kubernetes.io/name: vkocr
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "vkocr.labels" -}}
{{ include "vkocr.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Where the Secret's and the ConfigMap's files are mounted; the agent's config names the same paths. */}}
{{- define "vkocr.tlsDir" -}}/etc/vkocr/tls{{- end -}}
{{- define "vkocr.trustedKeysDir" -}}/etc/vkocr/trusted-keys{{- end -}}

{{/* The combinations values.schema.json cannot say with a clear message: each fails the render naming the
     values to set. Included once, by the ConfigMap. */}}
{{- define "vkocr.checkValues" -}}
{{- $v := .Values -}}
{{- if and $v.tls.enabled (not $v.tls.secretName) -}}
{{- fail "tls.enabled needs tls.secretName: an existing Secret with tls.crt and tls.key (and ca.crt when tls.mutual)" -}}
{{- end -}}
{{- if $v.modelStore.enabled -}}
{{- if not (and $v.tls.enabled $v.tls.mutual) -}}
{{- fail "modelStore.enabled needs tls.enabled and tls.mutual: operators are named by their client certificates" -}}
{{- end -}}
{{- if not $v.modelStore.trustedKeysConfigMap -}}
{{- fail "modelStore.enabled needs modelStore.trustedKeysConfigMap: an existing ConfigMap of the public keys that may sign bundles" -}}
{{- end -}}
{{- if not $v.modelStore.allowedSubjects -}}
{{- fail "modelStore.enabled needs modelStore.allowedSubjects: the common names of the fleet operators' client certificates" -}}
{{- end -}}
{{- end -}}
{{- if and $v.serviceMonitor.enabled (not $v.metrics.enabled) -}}
{{- fail "serviceMonitor.enabled needs metrics.enabled: there is nothing to scrape without it" -}}
{{- end -}}
{{- $ports := list $v.ports.grpc $v.ports.health $v.ports.metrics -}}
{{- if ne (len (uniq $ports)) 3 -}}
{{- fail (printf "ports.grpc, ports.health and ports.metrics must differ, got %v" $ports) -}}
{{- end -}}
{{- end -}}
