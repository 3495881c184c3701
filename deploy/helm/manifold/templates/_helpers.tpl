{{/* The chart's name, truncated to the 63 characters of a DNS label. */}}
{{- define "manifold.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The fully qualified app name: <release>-manifold unless the release name has it. */}}
{{- define "manifold.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "manifold.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "manifold.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "manifold.selectorLabels" -}}
app.kubernetes.io/name: {{ include "manifold.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "manifold.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "manifold.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Whether the chart generates the API key Secret. */}}
{{- define "manifold.generatedKey" -}}
{{- $auth := .Values.config.auth | default dict }}
{{- if and .Values.auth.generatedKey.enabled (not .Values.auth.apiKeys) (not $auth.jwt) }}true{{ end }}
{{- end }}

{{/* Where the Secret volumes are mounted. */}}
{{- define "manifold.secretsDir" -}}/var/run/secrets/manifold{{- end }}

{{/*
The config file: .Values.config with what the chart manages set on top: the listen address,
the API keys (as keyFile paths into the mounted Secrets) and the metrics listener.
*/}}
{{- define "manifold.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $gw := get $cfg "gateway" | default dict }}
{{- $_ := set $gw "listen" (printf "0.0.0.0:%d" (int .Values.containerPort)) }}
{{- $auth := get $cfg "auth" | default dict }}
{{- $keys := list }}
{{- range $k := $auth.apiKeys }}{{ $keys = append $keys $k }}{{ end }}
{{- range $i, $k := .Values.auth.apiKeys }}
{{- $entry := dict "name" $k.name "keyFile" (printf "%s/api-keys/%d/%s" (include "manifold.secretsDir" $) $i $k.secretKey) }}
{{- if $k.groups }}{{ $_ := set $entry "groups" $k.groups }}{{ end }}
{{- $keys = append $keys $entry }}
{{- end }}
{{- if include "manifold.generatedKey" . }}
{{- $keys = append $keys (dict "name" .Values.auth.generatedKey.principal "keyFile" (printf "%s/api-key/key" (include "manifold.secretsDir" .))) }}
{{- end }}
{{- if $keys }}{{ $_ := set $auth "apiKeys" $keys }}{{ end }}
{{- if $auth }}{{ $_ := set $cfg "auth" $auth }}{{ end }}
{{- if .Values.metrics.enabled }}
{{- $_ := set $gw "insecure" true }}
{{- $tel := get $cfg "telemetry" | default dict }}
{{- $_ := set $tel "metrics" (dict "listen" (printf "0.0.0.0:%d" (int .Values.metrics.port))) }}
{{- $_ := set $cfg "telemetry" $tel }}
{{- end }}
{{- $_ := set $cfg "gateway" $gw }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.cluster.enabled) (not .Values.autoscaling.enabled) }}
{{- fail "replicaCount > 1 needs cluster.enabled: without it a session lives on one replica and a round-robin Service breaks it" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (not .Values.cluster.enabled) }}
{{- fail "autoscaling.enabled needs cluster.enabled: without it a session lives on one replica and a round-robin Service breaks it" }}
{{- end }}
{{- if and .Values.cluster.enabled (not .Values.cluster.secretName) }}
{{- fail "cluster.enabled needs cluster.secretName: an existing Secret holding the cluster secret (at least 32 bytes)" }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}
